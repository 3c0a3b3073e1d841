/* fuzz_spank.c - the hand-off decoder, the GRES parser and the reader of
 * srun's command line on any bytes. */
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
	/* Again with a valid checksum, so mutations reach the field parser. */
	{
		char *c = strstr(s, ";c="), *fixed;
		size_t blen = c != NULL ? (size_t)(c - s) : size;

		fixed = malloc(blen + 21);
		if (fixed != NULL) {
			memcpy(fixed, s, blen);
			memcpy(fixed + blen, ";c=", 3);
			hx_fnv1a_hex(fixed, blen, fixed + blen + 3);
			if (hx_handoff_decode(fixed, &h) == HEXI_OK)
				hx_handoff_fini(&h);
			free(fixed);
		}
	}
	hx_gres_parse(s, &g);
	hx_parse_idx_list(s, idx, 64, &n);
	{
		hx_het_request r;

		hx_het_request_parse(s, size + 1, &r); /* s[size] is NUL */
	}
	free(s);
	return 0;
}
