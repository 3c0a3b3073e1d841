/* fuzz_model.c - libFuzzer target: the model parser (a refusal must say
 * why; what parses must validate, write and parse back). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "fuzz_target.h"
#include "hexi_sched.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hexi_model m, n;
	char *js = NULL;

	hexi_rc rc;

	hexi_error_clear();
	rc = hexi_model_parse((const char *)data, size, &m);
	fuzz_require_own_message(rc);
	if (rc == HEXI_OK) {
		if (hexi_model_validate(&m) != HEXI_OK ||
		    hexi_model_to_json(&m, &js) != HEXI_OK ||
		    hexi_model_parse(js, strlen(js), &n) != HEXI_OK ||
		    n.layers != m.layers || !(hexi_model_params(&m) > 0))
			abort();
	}
	free(js);
	return 0;
}
