/*
 * fuzz_hfconfig.c - libFuzzer-style target for the Hugging Face config.json
 * parser of hexickpt import (checkpoint/hf_llama.c hf_config_parse): the
 * input is the whole file.  What it accepts must be a model the planner
 * and runtime take (hexi_model_validate, and an even head size: the RoPE
 * row permutation of import and export pairs rows) whose every dimension
 * is the file's, and a refusal must say why.  Run bounded by fuzz_data.sh
 * through tests/fuzz_main.c.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hf_internal.h"
#include "fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hexi_model m;
	char *js = NULL;
	int tied = -1;
	hexi_rc rc = hf_config_parse("fuzz/config.json", (const char *)data,
				     size, "fuzz-model", &m, &tied);

	/* every failure must say why: its own message, not only the
	 * error code's text that hexi_errmsg falls back to */
	fuzz_require_own_message(rc);
	if (rc == HEXI_OK) {
		if (tied != 0 && tied != 1)
			abort();
		if (m.hidden < 1 || m.heads < 1 || m.kv_heads < 1 ||
		    m.layers < 1 || m.vocab < 1 || m.ffn < 1 ||
		    m.hidden % m.heads != 0 || m.heads % m.kv_heads != 0 ||
		    (m.hidden / m.heads) % 2 != 0 ||
		    strcmp(m.name, "fuzz-model") != 0)
			abort();
		/* what import writes into the checkpoint next */
		if (hexi_model_to_json(&m, &js) != HEXI_OK || js == NULL)
			abort();
		free(js);
	}
	hexi_error_clear();
	return 0;
}
