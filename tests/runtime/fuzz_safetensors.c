/*
 * fuzz_safetensors.c - libFuzzer-style target for the safetensors header
 * parser of hexickpt import (checkpoint/hf_safetensors.c): the input is a
 * whole file (8-byte length, JSON header, data).  Run bounded by
 * fuzz_data.sh through tests/fuzz_main.c.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hf_internal.h"
#include "fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t hl = 0;
	hf_st *st = NULL;
	hexi_rc rc;

	if (size < 8)
		return 0;
	for (int i = 7; i >= 0; i--)
		hl = hl << 8 | data[i];
	if (hl > size - 8)
		return 0; /* hf_st_open_fd refuses it before parsing */
	rc = hf_st_parse("fuzz", (const char *)data + 8, (size_t)hl,
			 size - 8 - hl, &st);
	/* every failure must say why: its own message, not only the error
	 * code's text that hexi_errmsg falls back to */
	fuzz_require_own_message(rc);
	if (rc == HEXI_OK) { /* what it accepts is inside the data */
		for (int i = 0; i < st->n; i++)
			if (st->t[i].end > size - 8 - hl ||
			    st->t[i].end < st->t[i].begin)
				abort();
		hf_st_destroy(st);
	}
	hexi_error_clear();
	return 0;
}
