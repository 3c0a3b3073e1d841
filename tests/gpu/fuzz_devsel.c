/*
 * fuzz_devsel.c - fuzz target for the CUDA_VISIBLE_DEVICES parser: any
 * text is accepted with an ordinal in range, or rejected, never a crash.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt_cuda.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	int ord = -1;

	if (s == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	for (int ndev = 1; ndev <= 4; ndev++)
		if (rt_cuda_pick_device(s, 1, 4, ndev, 1, &ord) == HEXI_OK &&
		    (ord < 0 || ord >= ndev))
			abort();
	free(s);
	return 0;
}
