/* fuzz_spank.c - the hand-off decoder and the GRES parser on any bytes. */
#include "config.h"

#include "hexiscale_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	hx_handoff h;
	hx_gres g;
	int n = 0, idx[64];

	if (s == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	if (hx_handoff_decode(s, &h) == HEXI_OK)
		hx_handoff_fini(&h);
	hx_gres_parse(s, &g);
	hx_parse_idx_list(s, idx, 64, &n);
	free(s);
	return 0;
}
