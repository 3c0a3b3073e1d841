/* fuzz_cluster.c - libFuzzer target: the cluster parser (and the writer on
 * whatever parses). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "fuzz_target.h"
#include "hexi_sched.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hexi_cluster *c = NULL, *d = NULL;
	char *js = NULL;

	hexi_rc rc;

	hexi_error_clear();
	rc = hexi_cluster_parse((const char *)data, size, NULL, &c);
	fuzz_require_own_message(rc);
	if (rc != HEXI_OK && c != NULL)
		abort(); /* no cluster handed out on an error */
	if (rc == HEXI_OK) {
		/* what parses must write and parse back */
		if (hexi_cluster_to_json(c, &js) != HEXI_OK ||
		    hexi_cluster_parse(js, strlen(js), NULL, &d) != HEXI_OK ||
		    d->nnodes != c->nnodes)
			abort();
		(void)hexi_cluster_bw(c, 0, c->nnodes - 1);
	}
	free(js);
	hexi_cluster_destroy(d);
	hexi_cluster_destroy(c);
	return 0;
}
