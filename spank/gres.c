/* gres.c - GRES detail strings and index lists, e.g. "gpu:a800:3(IDX:0-2)";
 * freeing the allocation they make up. */
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

/*
 * GPU names.  A GRES type (the gres.conf Type=, usually a catalog name or
 * alias: "a100-80g", "h100-sxm", "v100-32gb") and an NVML device name
 * ("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-32GB")
 * are each cut into lower-cased alphanumeric words, and every word is one
 * of: a vendor word (nvidia, geforce, tesla: dropped), a memory size
 * ("80g", "80gb", "141gb"), a form factor ("sxm", "sxm4", "pcie", "nvl";
 * "hbm3" too, which NVIDIA puts only in the SXM parts' names, "H100 80GB
 * HBM3"), or a model word ("a100", "rtx", "4090", "ti").  A form factor
 * glued to a model ("h100sxm", "h200nvl") is cut off it.
 */
#define GPU_WORDS_MAX 12
#define GPU_WORD_MAX  24

enum gpu_form { FORM_NONE, FORM_SXM, FORM_PCIE, FORM_NVL };

typedef struct gpu_name {
	char model[GPU_WORDS_MAX][GPU_WORD_MAX]; /* [nmodel] in name order */
	int nmodel;
	int mem_gb;   /* 0: the name states no memory size */
	int form;     /* enum gpu_form */
	int overflow; /* too many or too long words: matches nothing */
} gpu_name;

/* "80g", "80gb", "141gb" -> GB; else 0. */
static int word_mem_gb(const char *w)
{
	size_t d = strspn(w, "0123456789");

	if (d == 0 || d > 4 ||
	    (strcmp(w + d, "g") != 0 && strcmp(w + d, "gb") != 0))
		return 0;
	return atoi(w);
}

/* The form factor a whole word names, or FORM_NONE. */
static int word_form(const char *w)
{
	if (strncmp(w, "sxm", 3) == 0 &&
	    strspn(w + 3, "0123456789") == strlen(w + 3))
		return FORM_SXM;
	if (strcmp(w, "hbm3") == 0)
		return FORM_SXM;
	if (strcmp(w, "pcie") == 0)
		return FORM_PCIE;
	if (strcmp(w, "nvl") == 0)
		return FORM_NVL;
	return FORM_NONE;
}

/* A model with a form factor glued on ("h100sxm", "a100sxm4", "h200nvl"):
 * cut the form off (w keeps the model) and return it; FORM_NONE and w
 * unchanged if there is none.  The model must have a digit ("h100"). */
static int split_form(char *w)
{
	static const char *const suf[] = {"sxm", "pcie", "nvl"};

	for (size_t i = 0; i < sizeof(suf) / sizeof(suf[0]); i++) {
		char *at = NULL;
		int form;

		for (char *p = strstr(w, suf[i]); p != NULL;
		     p = strstr(p + 1, suf[i]))
			at = p; /* the last one */
		if (at == NULL || (form = word_form(at)) == FORM_NONE ||
		    strcspn(w, "0123456789") >= (size_t)(at - w))
			continue;
		*at = '\0';
		return form;
	}
	return FORM_NONE;
}

static void add_word(gpu_name *g, char *w)
{
	static const char *const vendor[] = {"nvidia", "geforce", "tesla"};
	int form, mem;

	for (size_t i = 0; i < sizeof(vendor) / sizeof(vendor[0]); i++)
		if (strcmp(w, vendor[i]) == 0)
			return;
	if ((mem = word_mem_gb(w)) > 0) {
		if (g->mem_gb == 0) /* the first: "40GB MIG 1g.5gb" is 40 */
			g->mem_gb = mem;
		return;
	}
	if ((form = word_form(w)) == FORM_NONE)
		form = split_form(w);
	if (form != FORM_NONE && g->form == FORM_NONE)
		g->form = form;
	if (w[0] == '\0' || word_form(w) != FORM_NONE)
		return;
	if (g->nmodel >= GPU_WORDS_MAX) {
		g->overflow = 1;
		return;
	}
	memcpy(g->model[g->nmodel++], w, strlen(w) + 1);
}

static void gpu_name_parse(const char *s, gpu_name *g)
{
	memset(g, 0, sizeof(*g));
	while (*s != '\0') {
		char w[GPU_WORD_MAX];
		size_t n = 0;

		if (!isalnum((unsigned char)*s)) {
			s++;
			continue;
		}
		for (; isalnum((unsigned char)*s); s++)
			if (n + 1 < sizeof(w))
				w[n++] = (char)tolower((unsigned char)*s);
			else
				g->overflow = 1;
		w[n] = '\0';
		add_word(g, w);
	}
}

/* A word after a model that makes it another GPU: "RTX 3080 Ti" is no
 * RTX 3080, "RTX 4090 D" no RTX 4090. */
static int is_variant(const char *w)
{
	return strcmp(w, "ti") == 0 || strcmp(w, "super") == 0 ||
	       strcmp(w, "d") == 0;
}

/* Is m (model words joined) one model word of nv, or several consecutive
 * ones joined, not followed by a variant word? */
static int model_run_matches(const gpu_name *nv, const char *m)
{
	for (int i = 0; i < nv->nmodel; i++) {
		size_t off = 0;

		for (int j = i; j < nv->nmodel; j++) {
			size_t k = strlen(nv->model[j]);

			if (strncmp(m + off, nv->model[j], k) != 0)
				break;
			off += k;
			if (m[off] != '\0')
				continue;
			if (j + 1 == nv->nmodel ||
			    !is_variant(nv->model[j + 1]))
				return 1;
			break;
		}
	}
	return 0;
}

/* A type that states a form factor refuses a GPU whose name states
 * another; NVL is always in the name of an NVL part, so a type saying
 * NVL wants it there. */
static int forms_agree(int type_form, int nvml_form)
{
	switch (type_form) {
	case FORM_SXM:
		return nvml_form != FORM_PCIE && nvml_form != FORM_NVL;
	case FORM_PCIE:
		return nvml_form != FORM_SXM && nvml_form != FORM_NVL;
	case FORM_NVL:
		return nvml_form == FORM_NVL;
	default:
		return 1;
	}
}

/* The GRES type's model must be whole words of the NVML name (a substring
 * match took an A100 for an A10), and the memory size and form factor it
 * states, if any, must not contradict the name's. */
int hx_gpu_name_matches(const char *nvml_name, const char *gres_type)
{
	gpu_name nv, ty;
	char m[GPU_WORDS_MAX * GPU_WORD_MAX] = "";
	size_t off = 0;

	gpu_name_parse(nvml_name, &nv);
	gpu_name_parse(gres_type, &ty);
	if (nv.overflow || ty.overflow || ty.nmodel == 0)
		return 0;
	if (ty.mem_gb != 0 && nv.mem_gb != 0 && ty.mem_gb != nv.mem_gb)
		return 0;
	if (!forms_agree(ty.form, nv.form))
		return 0;
	for (int i = 0; i < ty.nmodel; i++) {
		size_t k = strlen(ty.model[i]);

		memcpy(m + off, ty.model[i], k + 1);
		off += k;
	}
	return model_run_matches(&nv, m);
}

void hx_alloc_fini(hx_alloc *a)
{
	for (int i = 0; a->nodes != NULL && i < a->nnodes; i++)
		free(a->nodes[i].tids);
	free(a->nodes);
	free(a->comps);
	free(a->jobs);
	memset(a, 0, sizeof(*a));
}
