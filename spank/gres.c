/* gres.c - GRES detail strings and index lists, e.g. "gpu:a800:3(IDX:0-2)". */
#include "config.h"

#include "hexiscale_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_digits(const char *s, size_t n)
{
	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return 1;
}

static hexi_rc parse_range(const char *tok, int *lo, int *hi)
{
	char a[16], *dash;
	long l;

	if (hexi_strlcpy(a, tok, sizeof(a)) != HEXI_OK)
		return HEXI_ERR_RANGE;
	dash = strchr(a, '-');
	if (dash != NULL)
		*dash = '\0';
	if (hexi_parse_long(a, 0, HX_GPUS_MAX * 16, &l) != HEXI_OK)
		return HEXI_ERR_PARSE;
	*lo = *hi = (int)l;
	if (dash != NULL) {
		if (hexi_parse_long(dash + 1, l, HX_GPUS_MAX * 16, &l) !=
		    HEXI_OK)
			return HEXI_ERR_PARSE;
		*hi = (int)l;
	}
	return HEXI_OK;
}

hexi_rc hx_parse_idx_list(const char *s, int *out, int cap, int *n)
{
	char buf[512], *save = NULL, *tok;
	int count = 0, last = -1;

	if (hexi_strlcpy(buf, s, sizeof(buf)) != HEXI_OK)
		return hexi_error(HEXI_ERR_RANGE, "index list longer than %zu",
				  sizeof(buf) - 1);
	for (tok = strtok_r(buf, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		int lo, hi;

		if (parse_range(tok, &lo, &hi) != HEXI_OK)
			return hexi_error(
			    HEXI_ERR_PARSE,
			    "index list '%.64s': bad item '%.16s'", s, tok);
		for (int v = lo; v <= hi; v++) {
			if (v <= last)
				return hexi_error(HEXI_ERR_PARSE,
						  "index list '%.64s': not "
						  "ascending",
						  s);
			if (count >= cap)
				return hexi_error(HEXI_ERR_RANGE,
						  "index list '%.64s': more "
						  "than %d entries",
						  s, cap);
			out[count++] = last = v;
		}
	}
	if (count == 0)
		return hexi_error(HEXI_ERR_PARSE, "index list '%.64s' is empty",
				  s);
	*n = count;
	return HEXI_OK;
}

void hx_format_ranges(const int *v, int n, char *buf, size_t cap)
{
	size_t len = 0;

	if (cap == 0)
		return;
	buf[0] = '\0';
	for (int i = 0; i < n;) {
		int j = i;
		char item[32];
		size_t il;
		const char *cut = i ? ",..." : "...";

		while (j + 1 < n && v[j + 1] == v[j] + 1)
			j++;
		if (j > i)
			snprintf(item, sizeof(item), "%s%d-%d", i ? "," : "",
				 v[i], v[j]);
		else
			snprintf(item, sizeof(item), "%s%d", i ? "," : "",
				 v[i]);
		il = strlen(item);
		/* an item goes in if ",..." still fits after it, or it is
		 * the last one and fits */
		if (len + il + (j + 1 < n ? 4 : 0) + 1 > cap) {
			if (len + strlen(cut) + 1 <= cap)
				memcpy(buf + len, cut, strlen(cut) + 1);
			return;
		}
		memcpy(buf + len, item, il + 1);
		len += il;
		i = j + 1;
	}
}

/* One item "gpu:TYPE:N(IDX:list)" of length len; non-GPU items are skipped. */
static hexi_rc parse_item(const char *it, size_t len, hx_gres *g, int *seen)
{
	char item[512], *paren, *f[3] = {NULL, NULL, NULL}, *save = NULL;
	int nf = 0, n = 0;
	long count;

	if (len == 0)
		return hexi_error(HEXI_ERR_PARSE, "empty GRES item");
	if (len >= sizeof(item))
		return hexi_error(HEXI_ERR_RANGE, "GRES item longer than %zu",
				  sizeof(item) - 1);
	memcpy(item, it, len);
	item[len] = '\0';
	paren = strchr(item, '(');
	if (paren == NULL || item[len - 1] != ')')
		return hexi_error(HEXI_ERR_PARSE,
				  "GRES '%.64s': no '(IDX:...)' part", item);
	*paren = '\0';
	item[len - 1] = '\0';
	for (char *t = strtok_r(item, ":", &save); t != NULL && nf < 4;
	     t = strtok_r(NULL, ":", &save))
		if (nf++ < 3)
			f[nf - 1] = t;
	if (nf < 2 || nf > 3 || strcmp(f[0], "gpu") != 0)
		return HEXI_OK; /* another GRES (mps, nic...) */
	if (!is_digits(f[nf - 1], strlen(f[nf - 1])) ||
	    hexi_parse_long(f[nf - 1], 0, HX_GPUS_MAX, &count) != HEXI_OK)
		return hexi_error(HEXI_ERR_PARSE, "GRES 'gpu:%.64s': bad count",
				  f[1]);
	if (*seen)
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "GPUs of two types on one node ('%s' and "
				  "'%.64s')",
				  g->type, nf == 3 ? f[1] : "");
	*seen = 1;
	if (nf == 3 && hexi_strlcpy(g->type, f[1], sizeof(g->type)) != HEXI_OK)
		return hexi_error(HEXI_ERR_RANGE, "GRES type '%.64s' too long",
				  f[1]);
	if (strncmp(paren + 1, "IDX:", 4) != 0)
		return hexi_error(HEXI_ERR_PARSE, "GRES 'gpu': no IDX list");
	if (count == 0 && strcmp(paren + 5, "N/A") == 0) {
		g->ngpus = 0;
		return HEXI_OK;
	}
	if (hx_parse_idx_list(paren + 5, g->idx, HX_GPUS_MAX, &n) != HEXI_OK)
		return hexi_error_prefix(HEXI_ERR_PARSE, "GRES 'gpu'");
	if (n != count)
		return hexi_error(HEXI_ERR_PARSE,
				  "GRES 'gpu': count %ld but %d indices", count,
				  n);
	g->ngpus = n;
	return HEXI_OK;
}

hexi_rc hx_gres_parse(const char *s, hx_gres *out)
{
	int seen = 0, depth = 0;
	const char *start = s;

	memset(out, 0, sizeof(*out));
	if (s == NULL || s[0] == '\0')
		return HEXI_OK; /* no GRES on this node */
	if (strlen(s) > 4096 || !hexi_is_printable(s))
		return hexi_error(HEXI_ERR_PARSE,
				  "GRES string too long or not printable");
	/* Items are separated by commas outside parentheses. */
	for (const char *p = s;; p++) {
		if (*p == '(')
			depth++;
		else if (*p == ')')
			depth--;
		if (depth < 0 || depth > 1)
			return hexi_error(HEXI_ERR_PARSE,
					  "GRES '%.64s': unbalanced '()'", s);
		if ((*p == ',' && depth == 0) || *p == '\0') {
			hexi_rc rc =
			    parse_item(start, (size_t)(p - start), out, &seen);
			if (rc != HEXI_OK)
				return rc;
			if (*p == '\0')
				break;
			start = p + 1;
		}
	}
	if (depth != 0)
		return hexi_error(HEXI_ERR_PARSE,
				  "GRES '%.64s': unbalanced '()'", s);
	return HEXI_OK;
}

void hx_fnv1a_hex(const char *s, size_t len, char *buf)
{
	uint64_t h = hexi_fnv1a64(s, len);

	snprintf(buf, 17, "%016llx", (unsigned long long)h);
}

/* Lower-case alphanumerics only: "NVIDIA GeForce RTX 4090" ->
 * "nvidiageforcertx4090".  Returns the length of out. */
static size_t squash(const char *in, char *out, size_t cap)
{
	size_t n = 0;

	for (; *in != '\0' && n + 1 < cap; in++)
		if (isalnum((unsigned char)*in))
			out[n++] = (char)tolower((unsigned char)*in);
	out[n] = '\0';
	return n;
}

/* Does the NVML name have the GRES type as a run of whole words?  Words are
 * the name's alphanumeric runs, lower-cased; the type (squashed the same
 * way) must equal one word or several consecutive words joined:
 * "NVIDIA GeForce RTX 4090" has "rtx4090" and "4090"; "NVIDIA
 * A100-SXM4-80GB" has "a100" but not "a10" (a substring match took an A100
 * for an A10). */
int hx_gpu_name_matches(const char *nvml_name, const char *gres_type)
{
	char want[96];
	size_t wlen;

	wlen = squash(gres_type, want, sizeof(want));
	if (wlen == 0)
		return 0;
	for (const char *p = nvml_name; *p != '\0'; p++) {
		size_t n = 0;

		if (!isalnum((unsigned char)*p) ||
		    (p > nvml_name && isalnum((unsigned char)p[-1])))
			continue; /* words start only after a separator */
		for (const char *q = p; *q != '\0' && n <= wlen; q++) {
			if (!isalnum((unsigned char)*q))
				continue;
			if ((char)tolower((unsigned char)*q) != want[n++])
				break;
			if (n == wlen && !isalnum((unsigned char)q[1]))
				return 1; /* the type ends where a word ends */
			if (n == wlen)
				break;
		}
	}
	return 0;
}
