/*
 * fuzz_target.h - what the fuzz targets of parsers share: the libFuzzer
 * entry point they define (driven by fuzz_main.c) and the rule that a
 * refusal says why.
 */
#ifndef HEXI_FUZZ_TARGET_H
#define HEXI_FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hexi_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * A parser that refuses an input must set a message of its own, naming
 * the object and the cause; hexi_errmsg falls back to the code's text
 * (hexi_strerror) when none was set, so that text alone is a failure.
 * The caller clears the message (hexi_error_clear) before each input.
 */
static inline void fuzz_require_own_message(hexi_rc rc)
{
	if (rc != HEXI_OK && strcmp(hexi_errmsg(rc), hexi_strerror(rc)) == 0)
		abort();
}

#endif
