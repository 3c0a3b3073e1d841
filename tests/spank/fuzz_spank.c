/* fuzz_spank.c - the hand-off decoder, the GRES parser, the reader of
 * srun's command line, the --hexiscale* option values (each option given
 * the input, resolved as srun and slurmstepd do) and the plugstack.conf
 * arguments (the input cut into words) on any bytes. */
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
	{ /* the input as each option's value, then as all of them */
		const char *cmd[HX_OPT_COUNT] = {0};
		hx_settings st;
		hx_conf c;

		hx_conf_defaults(&c);
		for (int i = 0; i <= HX_OPT_COUNT; i++) {
			for (int j = 0; j < HX_OPT_COUNT; j++)
				cmd[j] = i == HX_OPT_COUNT || j == i ? s : NULL;
			/* reads no file: nothing to free (plan_text) */
			hx_settings_resolve(&st, &c, cmd);
		}
	}
	{ /* plugstack.conf arguments: the input's words */
		char *w = strdup(s), *av[32], *save = NULL;
		int ac = 0;
		hx_conf c;

		for (char *t = w ? strtok_r(w, " \t\n", &save) : NULL;
		     t != NULL && ac < 32; t = strtok_r(NULL, " \t\n", &save))
			av[ac++] = t;
		if (w != NULL)
			hx_conf_parse(&c, ac, av);
		free(w);
	}
	hexi_error_clear();
	free(s);
	return 0;
}
