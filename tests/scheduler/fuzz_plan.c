/* fuzz_plan.c - libFuzzer target: the plan parser; whatever parses must
 * also lay out, render, write and parse back with the same hash, and a
 * refusal must say why. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_target.h"
#include "hexi_sched.h"

static void check(const hexi_plan *p)
{
	hexi_plan *q = NULL;
	hexi_layout *l = NULL;
	hexi_role r;
	char *js = NULL;
	FILE *f = fopen("/dev/null", "w");

	if (hexi_layout_create(p, &l) != HEXI_OK ||
	    hexi_plan_to_json(p, &js) != HEXI_OK ||
	    hexi_plan_parse(js, strlen(js), NULL, &q) != HEXI_OK ||
	    strcmp(q->hash, p->hash) != 0 || f == NULL ||
	    hexi_plan_render_text(p, f) != HEXI_OK)
		abort();
	for (int k = 0; k < p->world_size; k++)
		if (hexi_plan_role(p, k, &r) != HEXI_OK || r.rank != k)
			abort();
	fclose(f);
	free(js);
	hexi_layout_destroy(l);
	hexi_plan_destroy(q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hexi_plan *p = NULL;
	hexi_rc rc;

	hexi_error_clear();
	rc = hexi_plan_parse((const char *)data, size, NULL, &p);
	fuzz_require_own_message(rc);
	if (rc == HEXI_OK)
		check(p);
	else if (p != NULL)
		abort(); /* no plan handed out on an error */
	hexi_plan_destroy(p);
	return 0;
}
