/*
 * fuzz_prof_args.c - fuzz target for hexiprof's value parsers (GEMM shape,
 * byte size) and the GPU type guess: any input is rejected or parsed into
 * values inside their documented ranges, without crashing.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hexi_prof.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	hexi_prof_shape sh;
	size_t b;

	if (s == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	if (hexi_prof_parse_shape(s, &sh) == HEXI_OK &&
	    (sh.m < 1 || sh.n < 1 || sh.k < 1 || sh.m > 65536 || sh.n > 65536 ||
	     sh.k > 65536 || sh.m * sh.n > (1L << 31)))
		abort();
	if (hexi_prof_parse_bytes(s, &b) == HEXI_OK &&
	    (b < 1 || b > (1ULL << 34)))
		abort();
	if (hexi_prof_gpu_type_guess(s) == NULL)
		abort();
	free(s);
	return 0;
}
