/*
 * fuzz_catalog.c - libFuzzer target: the catalog parser
 * (hexi_catalog_parse, hexiscale-cluster(5)'s catalog files, which
 * `hexiplan --catalog` and the plugin's catalog= read) merging into the
 * built-in catalog.  A refusal must say why and leave the catalog as it
 * was; what merges must hold figures the planner can use, and merging the
 * same text again must change nothing.
 */
#include "config.h"

#include <math.h>

#include "fuzz_target.h"
#include "hexi_sched.h"

static int same(const hexi_catalog *a, const hexi_catalog *b)
{
	size_t n = hexi_catalog_count(a);

	if (hexi_catalog_count(b) != n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (memcmp(hexi_catalog_at(a, i), hexi_catalog_at(b, i),
			   sizeof(hexi_gpu_type)) != 0)
			return 0;
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hexi_catalog *cat = NULL, *ref = NULL, *once = NULL;
	hexi_rc rc;

	if (hexi_catalog_builtin(&cat) != HEXI_OK ||
	    hexi_catalog_builtin(&ref) != HEXI_OK)
		abort();
	hexi_error_clear();
	rc = hexi_catalog_parse(cat, (const char *)data, size);
	fuzz_require_own_message(rc);
	if (rc != HEXI_OK && !same(cat, ref))
		abort(); /* a refused text changed the catalog */
	if (rc == HEXI_OK) {
		for (size_t i = 0; i < hexi_catalog_count(cat); i++) {
			const hexi_gpu_type *t = hexi_catalog_at(cat, i);
			double r = hexi_gpu_tflops(t);
			if (!(isfinite(r) && r > 0) ||
			    hexi_catalog_find(cat, t->name) == NULL)
				abort();
		}
		if (hexi_catalog_clone(cat, &once) != HEXI_OK ||
		    hexi_catalog_parse(cat, (const char *)data, size) !=
			HEXI_OK ||
		    !same(cat, once))
			abort(); /* merging the same text again changed it */
	}
	hexi_error_clear();
	hexi_catalog_destroy(once);
	hexi_catalog_destroy(ref);
	hexi_catalog_destroy(cat);
	return 0;
}
