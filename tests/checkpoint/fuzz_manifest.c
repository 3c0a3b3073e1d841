/*
 * fuzz_manifest.c - libFuzzer-style target for the manifest reader
 * (run bounded by fuzz.sh through tests/fuzz_main.c).
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hexi_ckpt.h"
#include "fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Any input: a code and no crash, leak or sanitizer report. */
	hexi_rc rc;

	hexi_error_clear();
	rc = hexi_ckpt_manifest_check((const char *)data, size);

	fuzz_require_own_message(rc);
	return 0;
}
