/*
 * hetargs.c - which components of a heterogeneous job a step of srun asks
 * for, read from srun's own command line (the SPANK API of Slurm 22.05
 * tells a plugin nothing of the kind before the step exists, and srun
 * runs as the user: /proc/self/cmdline is its argv).  Pure: no Slurm
 * calls, so the unit tests and the fuzzer link it.
 */
#include "config.h"

#include "hexiscale_int.h"

#include <string.h>

/* 1 if arg is srun's --het-group option (getopt_long takes any
 * unambiguous prefix, "--het" and up; 22.05 has no other "--het" option),
 * or its old name --pack-group; *val is the "=VALUE" part or NULL. */
static int is_het_opt(const char *arg, const char **val)
{
	static const char *const names[] = {"het-group", "pack-group"};
	static const size_t min_len[] = {3, 4};
	const char *eq;
	size_t n;

	if (strncmp(arg, "--", 2) != 0)
		return 0;
	arg += 2;
	eq = strchr(arg, '=');
	n = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
	for (size_t i = 0; i < 2; i++)
		if (n >= min_len[i] && n <= strlen(names[i]) &&
		    strncmp(arg, names[i], n) == 0) {
			*val = eq != NULL ? eq + 1 : NULL;
			return 1;
		}
	return 0;
}

/* Add the components of one segment (list, or "the k-th segment"). */
static hexi_rc add_segment(const char *list, int seg, hx_het_request *r)
{
	int idx[HX_COMPS_MAX], n = 0;
	char shown[80];

	if (list == NULL) {
		if (seg >= HX_COMPS_MAX)
			return hexi_error(HEXI_ERR_RANGE,
					  "srun: more than %d ':' segments",
					  HX_COMPS_MAX);
		idx[0] = seg;
		n = 1;
	} else if (hx_parse_idx_list(list, idx, HX_COMPS_MAX, &n) != HEXI_OK ||
		   n == 0 || idx[n - 1] >= HX_COMPS_MAX) {
		return hexi_error(HEXI_ERR_INVAL,
				  "srun --het-group=%s: not a list of "
				  "components 0..%d",
				  hx_shown(list, shown, sizeof(shown)),
				  HX_COMPS_MAX - 1);
	}
	for (int i = 0; i < n; i++) {
		if (r->want[idx[i]])
			return hexi_error(HEXI_ERR_INVAL,
					  "srun: component %d named twice",
					  idx[i]);
		r->want[idx[i]] = 1;
		r->ncomps++;
	}
	r->ncalls += n;
	return HEXI_OK;
}

hexi_rc hx_het_request_parse(const char *args, size_t len, hx_het_request *r)
{
	const char *list = NULL, *end = args + len;
	int seg = 0;
	hexi_rc rc;

	memset(r, 0, sizeof(*r));
	if (len == 0 || args[len - 1] != '\0')
		return hexi_error(HEXI_ERR_PARSE,
				  "srun's command line is not NUL-terminated");
	/* args[0] is srun itself */
	for (const char *a = args + strlen(args) + 1; a < end;
	     a += strlen(a) + 1) {
		const char *val;

		if (strcmp(a, ":") == 0) {
			r->colon = 1;
			if ((rc = add_segment(list, seg++, r)) != HEXI_OK)
				return rc;
			list = NULL;
		} else if (strncmp(a, "--jobid", 7) == 0 &&
			   (a[7] == '=' || a[7] == '\0')) {
			long id;

			val = a[7] == '=' ? a + 8 : a + strlen(a) + 1;
			if (val >= end ||
			    hexi_parse_long(val, 1, UINT32_MAX - 2, &id) !=
				HEXI_OK)
				return hexi_error(HEXI_ERR_INVAL,
						  "srun --jobid: not a job id");
			r->jobid = (uint32_t)id;
		} else if (is_het_opt(a, &val)) {
			r->het_group = 1;
			if (val == NULL && a + strlen(a) + 1 < end)
				val = a + strlen(a) + 1;
			list = val != NULL ? val : "";
		}
	}
	return add_segment(list, seg, r);
}
