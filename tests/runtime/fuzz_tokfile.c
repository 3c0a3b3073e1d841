/*
 * fuzz_tokfile.c - libFuzzer-style target for the token file header
 * parser of hexitrain --data (runtime/data.c, hexiscale-data(5)): the
 * input is a whole file.  Run bounded by fuzz_data.sh.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt_data.h"
#include "fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int w = 0;
	uint64_t n = 0;
	hexi_rc rc = rt_data_parse_header("fuzz", data, size, &w, &n);

	fuzz_require_own_message(rc);
	if (rc == HEXI_OK && ((w != 2 && w != 4) ||
			      RT_DATA_HEADER_BYTES + n * (uint64_t)w != size))
		abort(); /* accepted sizes must match the file exactly */
	hexi_error_clear();
	return 0;
}
