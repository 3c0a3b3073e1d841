/*
 * catalog.c - GPU type catalog: built-in table, catalog files, measured
 * profiles from hexiprof.  Sources of the built-in numbers are given in
 * hexiscale-cluster(5) and next to each row below.
 */
#include "config.h"

#include "json_util.h"

#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CAT_MAX_ALIASES 16
#define PROFILE_FORMAT	"hexiscale-profile"

typedef struct cat_entry {
	hexi_gpu_type t; /* first member: hexi_catalog_at() returns &e->t */
	int naliases;
	char alias[CAT_MAX_ALIASES][HEXI_NAME_MAX];
} cat_entry;

struct hexi_catalog {
	size_t n, cap;
	cat_entry *e; /* [cap] */
};

/*
 * Built-in types.  peak: dense (no sparsity) BF16 tensor TFLOPS (FP16 for
 * V100/T4 which lack BF16); mem: GiB as nvidia-smi reports it; bw: memory
 * bandwidth GB/s; intra: one direction of the usual GPU<->GPU path on a
 * node (NVLink per GPU, else PCIe through the host), GB/s; eff: default
 * achievable fraction of peak for large GEMMs (replaced by hexiprof's
 * measurement when a profile is applied).
 *
 * Attention (doc/COSTMODEL.md "Attention"; hexiscale-cluster(5) gives the
 * sources): cc is the CUDA compute capability, which decides whether the
 * runtime can take cuDNN's fused attention (8.0 or newer); attn and
 * attn_bwd are that path's forward and backward FLOP rates as fractions of
 * peak (FlashAttention-2/3 and cuDNN 9 figures for causal attention at
 * 2k-4k tokens: 0.60/0.45 on A100-class, 0.55/0.40 on Hopper and Ada,
 * 0.50/0.40 on GA102 and L40S); attn_own is the runtime's own kernel
 * (rt_attention.cu: one warp per query row on CUDA cores, bound by
 * instruction issue at about 35 FLOP per clock per SM for head size 128):
 * 35 x SMs x boost clock / peak.  The cpu type prices attention at its
 * GEMM rate and has none of these (0).
 */
static const struct builtin_gpu {
	const char *name;
	double peak, mem, bw, intra, eff;
	double cc, attn, attn_bwd, attn_own; /* compute capability; attention
						efficiencies (see above) */
	const char *aliases; /* space separated, matched normalised */
} builtin_gpus[] = {
    /* A100 SXM4 80GB datasheet: 312 BF16 dense, 2039 GB/s, NVLink3 600
     * GB/s bidirectional.  HexiScale paper uses 312. */
    {"a100-80g", 312.0, 80.0, 2039.0, 300.0, 0.75, 8.0, 0.6, 0.45, 0.017,
     "a100 a100-80gb a100-sxm4-80gb a100-sxm-80gb a100-pcie-80gb "
     "a100-80gb-pcie"},
    /* A800: A100 with NVLink capped at 400 GB/s bidirectional (paper: 312). */
    {"a800-80g", 312.0, 80.0, 2039.0, 200.0, 0.75, 8.0, 0.6, 0.45, 0.017,
     "a800 a800-80gb a800-sxm4-80gb a800-pcie-80gb a800-80gb-pcie"},
    /* H100 SXM5 datasheet: 989.4 BF16 dense (1979 sparse), 3350 GB/s,
     * NVLink4 900 GB/s bidirectional. */
    {"h100-sxm", 989.4, 80.0, 3350.0, 450.0, 0.7, 9.0, 0.55, 0.4, 0.009,
     "h100 h100-80gb h100-sxm5-80gb h100-80gb-hbm3 h100sxm"},
    /* H100 PCIe datasheet: 756 BF16 dense (1513 sparse), 80 GB, 2000 GB/s,
     * NVLink bridge 600 GB/s bidirectional (NVML: "NVIDIA H100 PCIe"). */
    {"h100-pcie", 756.0, 80.0, 2000.0, 300.0, 0.7, 9.0, 0.55, 0.4, 0.009,
     "h100pcie h100-pcie-80gb"},
    /* H100 NVL datasheet: 835.5 BF16 dense (1671 sparse), 94 GB, 3900 GB/s,
     * NVLink bridge 600 GB/s bidirectional (NVML: "NVIDIA H100 NVL"). */
    {"h100-nvl", 835.5, 94.0, 3900.0, 300.0, 0.7, 9.0, 0.55, 0.4, 0.01,
     "h100nvl h100-nvl-94gb"},
    /* H800 SXM5 (H100 SXM5 with NVLink capped at 400 GB/s bidirectional):
     * 989.4 BF16 dense, 80 GB, 3350 GB/s; own: 132 SMs at 1.98 GHz, as
     * H100 SXM (NVML: "NVIDIA H800"; the H800 PCIe is another card). */
    {"h800-sxm", 989.4, 80.0, 3350.0, 200.0, 0.7, 9.0, 0.55, 0.4, 0.009,
     "h800 h800-80gb h800-sxm5-80gb h800-80gb-hbm3 h800sxm"},
    /* H200 SXM datasheet: 989.4 BF16 dense, 141 GB HBM3e, 4800 GB/s. */
    {"h200", 989.4, 141.0, 4800.0, 450.0, 0.7, 9.0, 0.55, 0.4, 0.009,
     "h200-sxm h200-141gb"},
    /* H200 NVL datasheet: 835.5 BF16 dense (1671 sparse), 141 GB, 4800
     * GB/s, NVLink bridge 900 GB/s bidirectional (NVML: "NVIDIA H200 NVL").
     */
    {"h200-nvl", 835.5, 141.0, 4800.0, 450.0, 0.7, 9.0, 0.55, 0.4, 0.01,
     "h200nvl"},
    /* A100 40GB (SXM4 and PCIe) datasheet: 312 BF16 dense, 1555 GB/s
     * (NVML: "NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB"). */
    {"a100-40g", 312.0, 40.0, 1555.0, 300.0, 0.75, 8.0, 0.6, 0.45, 0.017,
     "a100-40gb a100-sxm4-40gb a100-pcie-40gb"},
    /* L40 datasheet: 181.05 BF16 dense (362.1 sparse), 48 GB, 864 GB/s,
     * PCIe 4.0 x16 (no NVLink). */
    {"l40", 181.05, 48.0, 864.0, 25.0, 0.7, 8.9, 0.55, 0.4, 0.068, "l40-48gb"},
    /* L40S datasheet: 362.05 BF16 dense (733 sparse), 48 GB, 864 GB/s. */
    {"l40s", 362.05, 48.0, 864.0, 25.0, 0.7, 8.9, 0.5, 0.4, 0.035, "l40s-48gb"},
    /* L4 datasheet: 121 BF16 dense (242 sparse), 24 GB, 300 GB/s, PCIe 4.0
     * x16 (no NVLink); attention as L40S (full-rate FP32 accumulate on
     * GDDR bandwidth); own: 58 SMs at 2.04 GHz (NVML: "NVIDIA L4"). */
    {"l4", 121.0, 24.0, 300.0, 25.0, 0.7, 8.9, 0.5, 0.4, 0.034, "l4-24gb"},
    /* RTX 6000 Ada Generation (Ada whitepaper): 364.2 FP16/BF16 tensor
     * with FP32 accumulate, dense (728.5 sparse); 48 GB, 960 GB/s; PCIe
     * 4.0 x16, no NVLink; attention as L40S (the same AD102 with 142 SMs);
     * own: 142 SMs at 2.505 GHz (NVML: "NVIDIA RTX 6000 Ada Generation").
     */
    {"rtx6000ada", 364.2, 48.0, 960.0, 25.0, 0.7, 8.9, 0.5, 0.4, 0.034,
     "rtx-6000-ada rtx6000-ada-generation 6000ada"},
    /* RTX 4090 (Ada whitepaper): 165.2 FP16/BF16 tensor with FP32
     * accumulate, dense (330.3 with FP16 accumulate); 24 GB, 1008 GB/s;
     * PCIe 4.0, no P2P.  Paper uses 165.2. */
    {"rtx4090", 165.2, 24.0, 1008.0, 20.0, 0.7, 8.9, 0.55, 0.4, 0.068,
     "4090 rtx-4090 geforce-rtx-4090"},
    /* RTX 3090: the HexiScale authors' figure 80 (Ampere GA102 whitepaper:
     * 71 with FP32 accumulate, 142 with FP16 accumulate); 24 GB, 936 GB/s. */
    {"rtx3090", 80.0, 24.0, 936.0, 20.0, 0.7, 8.6, 0.5, 0.4, 0.061,
     "3090 rtx-3090 geforce-rtx-3090"},
    /* RTX 3080 (GA102 whitepaper): 59.5 FP32 accumulate dense (119 FP16
     * accumulate); 10 GB, 760 GB/s. */
    {"rtx3080", 59.5, 10.0, 760.0, 16.0, 0.7, 8.6, 0.5, 0.4, 0.068,
     "3080 rtx-3080 geforce-rtx-3080"},
    /* RTX 3080 Ti (GA102 whitepaper): 68.2 FP32 accumulate dense (136.4
     * FP16 accumulate); 12 GB, 912 GB/s. */
    {"rtx3080ti", 68.2, 12.0, 912.0, 16.0, 0.7, 8.6, 0.5, 0.4, 0.068,
     "3080ti 3080-ti rtx-3080-ti geforce-rtx-3080-ti"},
    /* RTX A6000 (GA102 whitepaper): 154.8 FP16/BF16 tensor with FP32
     * accumulate, dense (309.7 sparse); 48 GB, 768 GB/s; NVLink bridge
     * (pairs) 112.5 GB/s bidirectional; own: 84 SMs at 1.80 GHz (NVML:
     * "NVIDIA RTX A6000"). */
    {"rtxa6000", 154.8, 48.0, 768.0, 56.25, 0.7, 8.6, 0.5, 0.4, 0.034,
     "a6000 rtx-a6000"},
    /* A10 datasheet: 125 BF16 dense (250 sparse), 24 GB, 600 GB/s, PCIe
     * 4.0 x16 (no NVLink); own: 72 SMs at 1.695 GHz (NVML: "NVIDIA A10";
     * the A10G is another card). */
    {"a10", 125.0, 24.0, 600.0, 25.0, 0.7, 8.6, 0.5, 0.4, 0.034, "a10-24gb"},
    /* V100 SXM2 32GB datasheet: 125 FP16 tensor (no BF16), 900 GB/s,
     * NVLink2 300 GB/s bidirectional. */
    {"v100", 125.0, 32.0, 900.0, 150.0, 0.7, 7.0, 0.5, 0.4, 0.034,
     "v100-32gb v100-sxm2-32gb v100-sxm2-16gb v100-pcie-32gb v100-pcie-16gb"},
    /* T4 datasheet: 65 FP16 mixed precision, 16 GB, 320 GB/s, PCIe 3.0. */
    {"t4", 65.0, 16.0, 320.0, 12.0, 0.7, 7.5, 0.5, 0.4, 0.034, "tesla-t4"},
    /* CPU-only ranks: a placeholder until hexiprof measures the host
     * (profile cpu.gemm_gflops sets peak, efficiency 1). */
    {"cpu", 1.0, 16.0, 50.0, 10.0, 1.0, 0, 0, 0, 0, "host x86_64 aarch64"},
};

/* Lower-case alphanumerics only, vendor words ("nvidia", "geforce",
 * "tesla") dropped: "NVIDIA GeForce RTX 4090" -> "rtx4090". */
static void normalise(const char *in, char *out, size_t cap)
{
	static const char *const drop[] = {"nvidia", "geforce", "tesla"};
	size_t n = 0;

	for (; *in != '\0' && n + 1 < cap; in++)
		if (isalnum((unsigned char)*in))
			out[n++] = (char)tolower((unsigned char)*in);
	out[n] = '\0';
	for (int again = 1; again;) {
		again = 0;
		for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++) {
			size_t k = strlen(drop[i]);
			if (strlen(out) > k && strncmp(out, drop[i], k) == 0) {
				memmove(out, out + k, strlen(out + k) + 1);
				again = 1;
			}
		}
	}
}

static int entry_matches(const cat_entry *e, const char *norm)
{
	char buf[HEXI_NAME_MAX];

	normalise(e->t.name, buf, sizeof(buf));
	if (strcmp(buf, norm) == 0)
		return 1;
	for (int i = 0; i < e->naliases; i++) {
		normalise(e->alias[i], buf, sizeof(buf));
		if (strcmp(buf, norm) == 0)
			return 1;
	}
	return 0;
}

static cat_entry *find_entry(const hexi_catalog *cat, const char *name)
{
	char norm[HEXI_NAME_MAX], type[HEXI_NAME_MAX];

	if (cat == NULL || name == NULL)
		return NULL;
	/* Slurm GRES "gpu:TYPE" or "gpu:TYPE:COUNT" names TYPE. */
	if (strncmp(name, "gpu:", 4) == 0) {
		size_t k = strcspn(name + 4, ":");
		if (k == 0 || k >= sizeof(type))
			return NULL;
		memcpy(type, name + 4, k);
		type[k] = '\0';
		name = type;
	}
	normalise(name, norm, sizeof(norm));
	if (norm[0] == '\0')
		return NULL;
	for (size_t i = 0; i < cat->n; i++)
		if (entry_matches(&cat->e[i], norm))
			return &cat->e[i];
	return NULL;
}

const hexi_gpu_type *hexi_catalog_find(const hexi_catalog *cat,
				       const char *name)
{
	cat_entry *e = find_entry(cat, name);

	return e ? &e->t : NULL;
}

size_t hexi_catalog_count(const hexi_catalog *cat)
{
	return cat ? cat->n : 0;
}

const hexi_gpu_type *hexi_catalog_at(const hexi_catalog *cat, size_t i)
{
	return cat && i < cat->n ? &cat->e[i].t : NULL;
}

double hexi_gpu_tflops(const hexi_gpu_type *t)
{
	return t ? t->peak_tflops * t->efficiency : 0.0;
}

void hexi_catalog_destroy(hexi_catalog *cat)
{
	if (cat == NULL)
		return;
	free(cat->e);
	free(cat);
}

static hexi_rc cat_alloc(size_t cap, hexi_catalog **out)
{
	hexi_catalog *cat = calloc(1, sizeof(*cat));

	*out = NULL;
	if (cat == NULL || (cat->e = calloc(cap, sizeof(cat_entry))) == NULL) {
		free(cat);
		return hexi_error(HEXI_ERR_NOMEM, "catalog: out of memory");
	}
	cat->cap = cap;
	*out = cat;
	return HEXI_OK;
}

static hexi_rc cat_grow(hexi_catalog *cat)
{
	cat_entry *e;
	size_t cap;

	/* room left only where there is an array (a catalog's cap without
	 * one would be a bug; growing then is still right) */
	if (cat->e != NULL && cat->n < cat->cap)
		return HEXI_OK;
	if (cat->n >= HEXI_MAX_GPU_TYPES)
		return hexi_error(HEXI_ERR_RANGE,
				  "catalog: more than %d GPU types",
				  HEXI_MAX_GPU_TYPES);
	cap = cat->cap > cat->n ? cat->cap : cat->n * 2;
	if (cap < 8)
		cap = 8;
	if (cap > HEXI_MAX_GPU_TYPES)
		cap = HEXI_MAX_GPU_TYPES;
	e = realloc(cat->e, cap * sizeof(*e));
	if (e == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "catalog: out of memory");
	memset(e + cat->n, 0, (cap - cat->n) * sizeof(*e));
	cat->e = e;
	cat->cap = cap;
	return HEXI_OK;
}

hexi_rc hexi__catalog_clone(const hexi_catalog *cat, hexi_catalog **out)
{
	hexi_rc rv;

	if (cat == NULL)
		return hexi_catalog_builtin(out);
	rv = cat_alloc(cat->cap ? cat->cap : 1, out);
	if (rv != HEXI_OK)
		return rv;
	memcpy((*out)->e, cat->e, cat->n * sizeof(cat_entry));
	(*out)->n = cat->n;
	return HEXI_OK;
}

hexi_rc hexi_catalog_clone(const hexi_catalog *cat, hexi_catalog **out)
{
	if (cat == NULL) {
		*out = NULL;
		return hexi_error(HEXI_ERR_INVAL, "catalog: NULL to clone");
	}
	return hexi__catalog_clone(cat, out);
}

static void add_aliases(cat_entry *e, const char *list)
{
	const char *p = list;

	while (*p != '\0' && e->naliases < CAT_MAX_ALIASES) {
		size_t k = strcspn(p, " ");
		if (k > 0 && k < HEXI_NAME_MAX) {
			memcpy(e->alias[e->naliases], p, k);
			e->alias[e->naliases][k] = '\0';
			e->naliases++;
		}
		p += k;
		while (*p == ' ')
			p++;
	}
}

hexi_rc hexi_catalog_builtin(hexi_catalog **out)
{
	size_t n = sizeof(builtin_gpus) / sizeof(builtin_gpus[0]);
	hexi_catalog *cat = NULL;
	hexi_rc rv = cat_alloc(n < 32 ? 32 : n, &cat);

	if (rv != HEXI_OK)
		return rv;
	for (size_t i = 0; i < n; i++) {
		const struct builtin_gpu *b = &builtin_gpus[i];
		cat_entry *e = &cat->e[i];
		hexi_strlcpy(e->t.name, b->name, sizeof(e->t.name));
		e->t.peak_tflops = b->peak;
		e->t.mem_gib = b->mem;
		e->t.mem_bw_gbps = b->bw;
		e->t.intra_bw_gbps = b->intra;
		e->t.efficiency = b->eff;
		e->t.compute_capability = b->cc;
		e->t.attn_efficiency = b->attn;
		e->t.attn_bwd_efficiency = b->attn_bwd;
		e->t.attn_own_efficiency = b->attn_own;
		add_aliases(e, b->aliases);
	}
	cat->n = n;
	*out = cat;
	return HEXI_OK;
}

static hexi_rc check_type(const hexi_gpu_type *t)
{
	char buf[HEXI_NAME_MAX];

	normalise(t->name, buf, sizeof(buf));
	if (buf[0] == '\0' || !hexi_is_printable(t->name))
		return hexi_error(HEXI_ERR_INVAL,
				  "GPU type name '%s' is empty "
				  "or not printable",
				  t->name);
	/* find_entry reads "gpu:X" as Slurm's GRES for type X: a type of
	 * that name could never be found, and each merge would add it again */
	if (strncmp(t->name, "gpu:", 4) == 0)
		return hexi_error(HEXI_ERR_INVAL,
				  "GPU type name '%s' is a Slurm GRES "
				  "(gpu:TYPE), not a type: name the type",
				  t->name);
	if (!(t->peak_tflops > 0 && t->peak_tflops <= 1e6) ||
	    !(t->mem_gib > 0 && t->mem_gib <= 1e5) ||
	    !(t->mem_bw_gbps > 0 && t->mem_bw_gbps <= 1e6) ||
	    !(t->intra_bw_gbps > 0 && t->intra_bw_gbps <= 1e5) ||
	    !(t->efficiency > 0 && t->efficiency <= 1))
		return hexi_error(HEXI_ERR_RANGE,
				  "GPU type '%s': a number is out of range "
				  "(peak_tflops, mem_gib, mem_bw_gbps, "
				  "intra_bw_gbps must be > 0, efficiency in "
				  "(0,1])",
				  t->name);
	/* 0 = not given (hexi_catalog_set callers that predate them) */
	if (!(t->attn_efficiency >= 0 && t->attn_efficiency <= 1) ||
	    !(t->attn_bwd_efficiency >= 0 && t->attn_bwd_efficiency <= 1) ||
	    !(t->attn_own_efficiency >= 0 && t->attn_own_efficiency <= 1) ||
	    !(t->compute_capability >= 0 && t->compute_capability < 100))
		return hexi_error(HEXI_ERR_RANGE,
				  "GPU type '%s': attn_efficiency, "
				  "attn_bwd_efficiency, attn_own_efficiency "
				  "must be in (0,1], compute_capability in "
				  "(0,100)",
				  t->name);
	return HEXI_OK;
}

/* Attention fields not given (0) in t keep old's, as a catalog file's
 * absent keys do. */
static void attn_keep(hexi_gpu_type *t, const hexi_gpu_type *old)
{
	if (t->attn_efficiency == 0)
		t->attn_efficiency = old->attn_efficiency;
	if (t->attn_bwd_efficiency == 0)
		t->attn_bwd_efficiency = old->attn_bwd_efficiency;
	if (t->attn_own_efficiency == 0)
		t->attn_own_efficiency = old->attn_own_efficiency;
	if (t->compute_capability == 0)
		t->compute_capability = old->compute_capability;
}

hexi_rc hexi_catalog_set(hexi_catalog *cat, const hexi_gpu_type *t)
{
	cat_entry *e;
	hexi_rc rv;

	if (cat == NULL || t == NULL)
		return hexi_error(HEXI_ERR_INVAL, "catalog: NULL argument");
	rv = check_type(t);
	if (rv != HEXI_OK)
		return rv;
	e = find_entry(cat, t->name);
	if (e != NULL) {
		char keep[HEXI_NAME_MAX];
		hexi_gpu_type old = e->t;
		memcpy(keep, e->t.name, sizeof(keep));
		e->t = *t;
		memcpy(e->t.name, keep, sizeof(keep));
		attn_keep(&e->t, &old);
		return HEXI_OK;
	}
	rv = cat_grow(cat);
	if (rv != HEXI_OK)
		return rv;
	e = &cat->e[cat->n++];
	memset(e, 0, sizeof(*e));
	e->t = *t;
	return HEXI_OK;
}

/* The built-in row that name resolves to, or NULL. */
static const struct builtin_gpu *builtin_row(const char *name)
{
	char norm[HEXI_NAME_MAX], buf[HEXI_NAME_MAX];

	normalise(name, norm, sizeof(norm));
	for (size_t i = 0; i < sizeof(builtin_gpus) / sizeof(builtin_gpus[0]);
	     i++) {
		cat_entry e;
		memset(&e, 0, sizeof(e));
		add_aliases(&e, builtin_gpus[i].aliases);
		normalise(builtin_gpus[i].name, buf, sizeof(buf));
		hexi_strlcpy(e.t.name, builtin_gpus[i].name, sizeof(e.t.name));
		if (strcmp(buf, norm) == 0 || entry_matches(&e, norm))
			return &builtin_gpus[i];
	}
	return NULL;
}

const char *hexi_catalog_builtin_type(const char *device_name)
{
	const struct builtin_gpu *b;

	if (device_name == NULL)
		return NULL;
	b = builtin_row(device_name);
	/* a device is a GPU: the cpu type's aliases ("x86_64") name none */
	return b != NULL && strcmp(b->name, "cpu") != 0 ? b->name : NULL;
}

/* Attention fields are written only where they differ from what a reader
 * takes when they are absent (the built-in row of the name, else 0 = the
 * cost model's default), so plans written before they existed keep their
 * hash and every plan still re-simulates the same way (DECISIONS 121). */
static hexi_rc attn_to_json(json_t *o, const hexi_gpu_type *t)
{
	const struct builtin_gpu *b = builtin_row(t->name);
	const struct {
		const char *key;
		double v, def;
	} f[] = {
	    {"attn_efficiency", t->attn_efficiency, b ? b->attn : 0},
	    {"attn_bwd_efficiency", t->attn_bwd_efficiency,
	     b ? b->attn_bwd : 0},
	    {"attn_own_efficiency", t->attn_own_efficiency,
	     b ? b->attn_own : 0},
	    {"compute_capability", t->compute_capability, b ? b->cc : 0},
	};
	hexi_rc rv = HEXI_OK;

	for (size_t i = 0; rv == HEXI_OK && i < sizeof(f) / sizeof(f[0]); i++)
		if (f[i].v != f[i].def && f[i].v > 0)
			rv = hsj_set(o, f[i].key, json_real(f[i].v));
	return rv;
}

json_t *hexi__gpu_type_to_json(const hexi_gpu_type *t)
{
	json_t *o = json_pack("{s:s,s:f,s:f,s:f,s:f,s:f,s:b}", "name", t->name,
			      "peak_tflops", t->peak_tflops, "mem_gib",
			      t->mem_gib, "mem_bw_gbps", t->mem_bw_gbps,
			      "intra_bw_gbps", t->intra_bw_gbps, "efficiency",
			      t->efficiency, "measured", t->measured);

	if (o != NULL && attn_to_json(o, t) != HEXI_OK) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static const char *const gpu_keys[] = {"name",
				       "aliases",
				       "peak_tflops",
				       "mem_gib",
				       "mem_bw_gbps",
				       "intra_bw_gbps",
				       "efficiency",
				       "measured",
				       "attn_efficiency",
				       "attn_bwd_efficiency",
				       "attn_own_efficiency",
				       "compute_capability",
				       NULL};

/* Numbers of one entry into t (fields absent in the JSON are kept). */
static hexi_rc entry_numbers(const json_t *g, const char *w, int isnew,
			     hexi_gpu_type *t)
{
	hexi_rc rv;

	rv =
	    hsj_get_num(g, w, "peak_tflops", isnew, 0, 1, 1e6, &t->peak_tflops);
	if (rv == HEXI_OK)
		rv =
		    hsj_get_num(g, w, "mem_gib", isnew, 0, 1, 1e5, &t->mem_gib);
	if (rv == HEXI_OK)
		rv = hsj_get_num(g, w, "mem_bw_gbps", isnew, 0, 1, 1e6,
				 &t->mem_bw_gbps);
	if (rv == HEXI_OK)
		rv = hsj_get_num(g, w, "intra_bw_gbps", isnew, 0, 1, 1e5,
				 &t->intra_bw_gbps);
	if (rv == HEXI_OK)
		rv = hsj_get_num(g, w, "efficiency", HSJ_OPTIONAL, 0, 1, 1.0,
				 &t->efficiency);
	if (rv == HEXI_OK)
		rv = hsj_get_bool(g, w, "measured", HSJ_OPTIONAL, &t->measured);
	if (rv == HEXI_OK)
		rv = hsj_get_num(g, w, "attn_efficiency", HSJ_OPTIONAL, 0, 1,
				 1.0, &t->attn_efficiency);
	if (rv == HEXI_OK)
		rv = hsj_get_num(g, w, "attn_bwd_efficiency", HSJ_OPTIONAL, 0,
				 1, 1.0, &t->attn_bwd_efficiency);
	if (rv == HEXI_OK)
		rv = hsj_get_num(g, w, "attn_own_efficiency", HSJ_OPTIONAL, 0,
				 1, 1.0, &t->attn_own_efficiency);
	if (rv == HEXI_OK)
		rv = hsj_get_num(g, w, "compute_capability", HSJ_OPTIONAL, 0, 1,
				 99.9, &t->compute_capability);
	return rv;
}

/* aliases: each added unless it already names this type (so merging a
 * text twice changes nothing); one that names another type is refused,
 * as it could never find this one.  old is the entry being overridden
 * (NULL for a new type). */
static hexi_rc entry_aliases(const hexi_catalog *cat, const cat_entry *old,
			     const json_t *g, const char *w, cat_entry *e)
{
	json_t *arr, *v;
	size_t i;
	hexi_rc rv = hsj_get_array(g, w, "aliases", HSJ_OPTIONAL,
				   CAT_MAX_ALIASES, 1, &arr);

	if (rv != HEXI_OK || arr == NULL)
		return rv;
	json_array_foreach(arr, i, v)
	{
		char p[HSJ_PATH_MAX], tmp[HSJ_PATH_MAX];
		hsj_path(tmp, sizeof(tmp), w, "aliases");
		hsj_index(p, sizeof(p), tmp, i);
		if (!json_is_string(v) || json_string_value(v)[0] == '\0' ||
		    !hexi_is_printable(json_string_value(v)) ||
		    json_string_length(v) >= HEXI_NAME_MAX)
			return hexi_error(HEXI_ERR_PARSE,
					  "%s: must be a printable string of "
					  "1..%d characters",
					  p, HEXI_NAME_MAX - 1);
		char norm[HEXI_NAME_MAX];
		const cat_entry *other = find_entry(cat, json_string_value(v));
		normalise(json_string_value(v), norm, sizeof(norm));
		if (norm[0] != '\0' && entry_matches(e, norm))
			continue;
		if (other != NULL && other != old)
			return hexi_error(HEXI_ERR_INVAL,
					  "%s: '%s' already names GPU type "
					  "%s",
					  p, json_string_value(v),
					  other->t.name);
		if (e->naliases >= CAT_MAX_ALIASES)
			return hexi_error(HEXI_ERR_RANGE,
					  "%s: more than %d aliases", p,
					  CAT_MAX_ALIASES);
		hexi_strlcpy(e->alias[e->naliases++], json_string_value(v),
			     HEXI_NAME_MAX);
	}
	return HEXI_OK;
}

static hexi_rc merge_entry(hexi_catalog *cat, const json_t *g, const char *w)
{
	char name[HEXI_NAME_MAX];
	cat_entry tmp, *e;
	hexi_rc rv;

	rv = hsj_check_keys(g, w, gpu_keys);
	if (rv == HEXI_OK)
		rv =
		    hsj_get_str(g, w, "name", HSJ_REQUIRED, name, sizeof(name));
	if (rv != HEXI_OK)
		return rv;
	e = find_entry(cat, name);
	memset(&tmp, 0, sizeof(tmp));
	if (e != NULL)
		tmp = *e;
	else {
		hexi_strlcpy(tmp.t.name, name, sizeof(tmp.t.name));
		tmp.t.efficiency = 0.7;
	}
	rv = entry_numbers(g, w, e == NULL, &tmp.t);
	if (rv == HEXI_OK)
		rv = entry_aliases(cat, e, g, w, &tmp);
	if (rv != HEXI_OK)
		return rv; /* the getters name the key's path */
	rv = check_type(&tmp.t);
	if (rv != HEXI_OK)
		return hexi_error_prefix(rv, "%s", w);
	if (e == NULL) {
		rv = cat_grow(cat);
		if (rv != HEXI_OK)
			return rv;
		e = &cat->e[cat->n++];
	}
	*e = tmp;
	return HEXI_OK;
}

hexi_rc hexi__catalog_merge_array(hexi_catalog *cat, const json_t *arr,
				  const char *where)
{
	json_t *g;
	size_t i;

	json_array_foreach(arr, i, g)
	{
		char w[HSJ_PATH_MAX];
		hexi_rc rv;
		hsj_index(w, sizeof(w), where, i);
		rv = merge_entry(cat, g, w);
		if (rv != HEXI_OK)
			return rv;
	}
	return HEXI_OK;
}

static const char *const catalog_keys[] = {"format", "version", "gpus", NULL};

static hexi_rc merge_doc(hexi_catalog *cat, const json_t *j)
{
	json_t *arr;
	hexi_rc rv;

	rv = hsj_check_keys(j, "", catalog_keys);
	if (rv == HEXI_OK)
		rv = hsj_check_format(j, "", HEXI_CATALOG_FORMAT,
				      HEXI_CATALOG_VERSION, HSJ_REQUIRED);
	if (rv == HEXI_OK)
		rv = hsj_get_array(j, "", "gpus", HSJ_REQUIRED,
				   HEXI_MAX_GPU_TYPES, 1, &arr);
	if (rv == HEXI_OK)
		rv = hexi__catalog_merge_array(cat, arr, "gpus");
	return rv;
}

/* The public merges are all or nothing: they change a copy, and on
 * success the caller's catalog takes the copy's entries (on failure it
 * keeps its own, whatever entry or profile was refused). */
static void cat_take(hexi_catalog *cat, hexi_catalog *copy)
{
	hexi_catalog old = *cat;

	*cat = *copy;
	*copy = old;
	hexi_catalog_destroy(copy);
}

hexi_rc hexi_catalog_parse(hexi_catalog *cat, const char *json, size_t len)
{
	hexi_catalog *copy = NULL;
	json_t *j = NULL;
	hexi_rc rv;

	if (cat == NULL)
		return hexi_error(HEXI_ERR_INVAL, "catalog: NULL");
	rv = hsj_parse(json, len, "catalog", &j);
	if (rv == HEXI_OK)
		rv = hexi__catalog_clone(cat, &copy);
	if (rv == HEXI_OK) {
		rv = merge_doc(copy, j);
		if (rv != HEXI_OK)
			hexi_error_prefix(rv, "catalog");
	}
	json_decref(j);
	if (rv == HEXI_OK)
		cat_take(cat, copy);
	else
		hexi_catalog_destroy(copy);
	return rv;
}

hexi_rc hexi_catalog_load(const char *path, hexi_catalog **out)
{
	hexi_catalog *cat = NULL;
	json_t *j = NULL;
	hexi_rc rv;

	*out = NULL;
	rv = hexi_catalog_builtin(&cat);
	if (rv == HEXI_OK)
		rv = hsj_load(path, &j);
	if (rv == HEXI_OK) {
		rv = merge_doc(cat, j);
		if (rv != HEXI_OK)
			hexi_error_prefix(rv, "%s", path);
	}
	json_decref(j);
	if (rv != HEXI_OK) {
		hexi_catalog_destroy(cat);
		return rv;
	}
	*out = cat;
	return HEXI_OK;
}

/* ---- measured profiles -------------------------------------------------- */

/* Sums of measurements per catalog entry, averaged at the end. */
typedef struct prof_acc {
	double tflops, membw, intra;
	int ntflops, nmembw, nintra;
	double attn[3]; /* attn_tflops fwd, bwd, own */
	int nattn[3];
} prof_acc;

static const char *const prof_keys[] = {"format", "version", "host", "gpus",
					"cpu",	  "links",   NULL};
static const char *const prof_gpu_keys[] = {
    "type",	"index", "gemm_tflops", "mem_bw_gbps", "h2d_gbps",
    "d2h_gbps", "name",	 "attn_tflops", NULL};
static const char *const prof_gemm_keys[] = {"bf16", "fp16", "fp32", NULL};
static const char *const prof_attn_keys[] = {"fwd", "bwd", "own", NULL};

/* gpus[].attn_tflops: measured attention rates (fused forward and
 * backward, own kernel), TFLOPS over the FLOPs doc/COSTMODEL.md counts;
 * each optional.  v[] keeps -1 for an absent one. */
static hexi_rc prof_attn(const json_t *g, const char *w, double v[3])
{
	json_t *a;
	char p[HSJ_PATH_MAX];
	hexi_rc rv = hsj_get_object(g, w, "attn_tflops", HSJ_OPTIONAL, &a);

	if (rv != HEXI_OK || a == NULL)
		return rv;
	hsj_path(p, sizeof(p), w, "attn_tflops");
	rv = hsj_check_keys(a, p, prof_attn_keys);
	for (int i = 0; rv == HEXI_OK && i < 3; i++)
		rv = hsj_get_num(a, p, prof_attn_keys[i], HSJ_OPTIONAL, 0, 1,
				 1e6, &v[i]);
	return rv;
}
static const char *const prof_cpu_keys[] = {"gemm_gflops", "mem_bw_gbps",
					    "threads", NULL};
static const char *const prof_link_keys[] = {
    "intra_bw_gbps", "intra_lat_s", "inter_bw_gbps", "inter_lat_s", NULL};

static hexi_rc prof_gpu(hexi_catalog *cat, prof_acc *acc, const json_t *g,
			const char *w, double intra)
{
	char type[HEXI_NAME_MAX] = "", name[256];
	double bf16 = -1, fp16 = -1, fp32 = -1, membw = -1, h2d = -1;
	double attn[3] = {-1, -1, -1};
	long index = 0;
	json_t *gemm;
	cat_entry *e;
	hexi_rc rv;

	rv = hsj_check_keys(g, w, prof_gpu_keys);
	if (rv == HEXI_OK)
		rv =
		    hsj_get_str(g, w, "type", HSJ_OPTIONAL, type, sizeof(type));
	if (rv == HEXI_OK)
		rv =
		    hsj_get_str(g, w, "name", HSJ_OPTIONAL, name, sizeof(name));
	if (rv == HEXI_OK)
		rv = hsj_get_int(g, w, "index", HSJ_OPTIONAL, 0, 4095, &index);
	if (rv == HEXI_OK)
		rv = hsj_get_num(g, w, "mem_bw_gbps", HSJ_OPTIONAL, 0, 1, 1e6,
				 &membw);
	if (rv == HEXI_OK)
		rv = hsj_get_num(g, w, "h2d_gbps", HSJ_OPTIONAL, 0, 1, 1e5,
				 &h2d);
	if (rv == HEXI_OK)
		rv = hsj_get_num(g, w, "d2h_gbps", HSJ_OPTIONAL, 0, 1, 1e5,
				 &h2d);
	if (rv == HEXI_OK)
		rv = hsj_get_object(g, w, "gemm_tflops", HSJ_OPTIONAL, &gemm);
	if (rv == HEXI_OK && gemm != NULL) {
		char p[HSJ_PATH_MAX];
		hsj_path(p, sizeof(p), w, "gemm_tflops");
		rv = hsj_check_keys(gemm, p, prof_gemm_keys);
		if (rv == HEXI_OK)
			rv = hsj_get_num(gemm, p, "bf16", 0, 0, 1, 1e6, &bf16);
		if (rv == HEXI_OK)
			rv = hsj_get_num(gemm, p, "fp16", 0, 0, 1, 1e6, &fp16);
		if (rv == HEXI_OK)
			rv = hsj_get_num(gemm, p, "fp32", 0, 0, 1, 1e6, &fp32);
	}
	if (rv == HEXI_OK)
		rv = prof_attn(g, w, attn);
	if (rv != HEXI_OK || type[0] == '\0')
		return rv; /* a GPU without a type cannot be attributed */
	e = find_entry(cat, type);
	if (e == NULL)
		return hexi_error(HEXI_ERR_NOTFOUND,
				  "%s.type: unknown GPU type '%s' (add it with "
				  "a catalog file)",
				  w, type);
	acc += e - cat->e;
	if (bf16 > 0 || fp16 > 0) {
		acc->tflops += bf16 > 0 ? bf16 : fp16;
		acc->ntflops++;
	}
	if (membw > 0) {
		acc->membw += membw;
		acc->nmembw++;
	}
	if (intra > 0) {
		acc->intra += intra;
		acc->nintra++;
	}
	for (int i = 0; i < 3; i++)
		if (attn[i] > 0) {
			acc->attn[i] += attn[i];
			acc->nattn[i]++;
		}
	return HEXI_OK;
}

static hexi_rc prof_cpu(hexi_catalog *cat, prof_acc *acc, const json_t *cpu,
			const char *w)
{
	double gflops = -1, membw = -1;
	long threads = 1;
	cat_entry *e = find_entry(cat, "cpu");
	hexi_rc rv;

	rv = hsj_check_keys(cpu, w, prof_cpu_keys);
	if (rv == HEXI_OK)
		rv = hsj_get_num(cpu, w, "gemm_gflops", 0, 0, 1, 1e9, &gflops);
	if (rv == HEXI_OK)
		rv = hsj_get_num(cpu, w, "mem_bw_gbps", HSJ_OPTIONAL, 0, 1, 1e6,
				 &membw);
	if (rv == HEXI_OK)
		rv = hsj_get_int(cpu, w, "threads", 0, 1, 1 << 20, &threads);
	if (rv != HEXI_OK || gflops <= 0 || e == NULL)
		return rv;
	acc += e - cat->e;
	acc->tflops += gflops / 1000.0;
	acc->ntflops++;
	if (membw > 0) {
		acc->membw += membw;
		acc->nmembw++;
	}
	return HEXI_OK;
}

static hexi_rc prof_doc(hexi_catalog *cat, prof_acc *acc, const json_t *j)
{
	/* NULL until found: a profile refused before "gpus" is read must
	 * not walk an uninitialised array (issue 18 finding 8) */
	json_t *gpus = NULL, *cpu = NULL, *links = NULL, *g;
	char host[256];
	double intra = -1, x;
	size_t i;
	hexi_rc rv;

	rv = hsj_check_keys(j, "", prof_keys);
	if (rv == HEXI_OK)
		rv = hsj_check_format(j, "", PROFILE_FORMAT, 1, HSJ_REQUIRED);
	if (rv == HEXI_OK)
		rv = hsj_get_str(j, "", "host", 0, host, sizeof(host));
	if (rv == HEXI_OK)
		rv = hsj_get_object(j, "", "links", 0, &links);
	if (rv == HEXI_OK && links != NULL) {
		rv = hsj_check_keys(links, "links", prof_link_keys);
		if (rv == HEXI_OK)
			rv = hsj_get_num(links, "links", "intra_bw_gbps", 0, 0,
					 1, 1e5, &intra);
		if (rv == HEXI_OK)
			rv = hsj_get_num(links, "links", "inter_bw_gbps", 0, 0,
					 1, 1e5, &x);
		if (rv == HEXI_OK)
			rv = hsj_get_num(links, "links", "intra_lat_s", 0, 0, 0,
					 10, &x);
		if (rv == HEXI_OK)
			rv = hsj_get_num(links, "links", "inter_lat_s", 0, 0, 0,
					 10, &x);
	}
	if (rv == HEXI_OK)
		rv = hsj_get_array(j, "", "gpus", 0, HEXI_MAX_GPUS_PER_NODE, 1,
				   &gpus);
	json_array_foreach(gpus, i, g)
	{
		char w[HSJ_PATH_MAX];
		if (rv != HEXI_OK)
			break;
		hsj_index(w, sizeof(w), "gpus", i);
		rv = prof_gpu(cat, acc, g, w, intra);
	}
	if (rv == HEXI_OK)
		rv = hsj_get_object(j, "", "cpu", 0, &cpu);
	if (rv == HEXI_OK && cpu != NULL)
		rv = prof_cpu(cat, acc, cpu, "cpu");
	return rv;
}

/* Attention rates of t as fractions of a new peak: a measured rate, or
 * the old fraction of the old peak kept as a rate, capped at 1. */
static void attn_rescale(hexi_gpu_type *t, double old_peak, const prof_acc *a)
{
	double *f[3] = {&t->attn_efficiency, &t->attn_bwd_efficiency,
			&t->attn_own_efficiency};

	for (int k = 0; k < 3; k++) {
		double r = a->nattn[k] > 0 ? a->attn[k] / a->nattn[k]
					   : *f[k] * old_peak;
		/* untouched when nothing changed: the built-in value stays
		 * bit for bit, so the plan's JSON leaves it out */
		if (a->nattn[k] > 0 || t->peak_tflops != old_peak)
			*f[k] = r / t->peak_tflops > 1 ? 1 : r / t->peak_tflops;
	}
}

/* A figure of type t set from profiles that the catalog reader would
 * refuse (a plan carrying it could not be read back): below HSJ_POS_MIN,
 * or not finite (0/0 from a CPU profile of gemm_gflops 5e-324). */
static hexi_rc measured_ok(const hexi_gpu_type *t, const char *key, double v)
{
	if (isfinite(v) && v >= HSJ_POS_MIN)
		return HEXI_OK;
	return hexi_error(HEXI_ERR_RANGE,
			  "profiles: GPU type %s: the measurements give %s = "
			  "%g, below %g: not a figure to plan with",
			  t->name, key, v, HSJ_POS_MIN);
}

/* Apply the averages: efficiency = measured / peak (peak raised to the
 * measurement when a profile beats the datasheet; the attention rates
 * stay what they were, or what the profile measured). */
static hexi_rc prof_commit(hexi_catalog *cat, const prof_acc *acc)
{
	for (size_t i = 0; i < cat->n; i++) {
		hexi_gpu_type *t = &cat->e[i].t;
		int cpu = strcmp(t->name, "cpu") == 0;
		double old_peak = t->peak_tflops;
		if (acc[i].ntflops > 0) {
			double m = acc[i].tflops / acc[i].ntflops;
			if (cpu || m > t->peak_tflops)
				t->peak_tflops = m;
			t->efficiency = m / t->peak_tflops;
			t->measured = 1;
		}
		attn_rescale(t, old_peak, &acc[i]);
		if (acc[i].nmembw > 0)
			t->mem_bw_gbps = acc[i].membw / acc[i].nmembw;
		if (acc[i].nintra > 0)
			t->intra_bw_gbps = acc[i].intra / acc[i].nintra;
		hexi_rc rc = HEXI_OK;
		if (acc[i].ntflops > 0 &&
		    (rc = measured_ok(t, "peak_tflops", t->peak_tflops)) ==
			HEXI_OK)
			rc = measured_ok(t, "efficiency", t->efficiency);
		/* an attention rate of 0 is unset (the catalog's default) */
		if (rc == HEXI_OK && t->attn_efficiency != 0)
			rc = measured_ok(t, "attn_efficiency",
					 t->attn_efficiency);
		if (rc == HEXI_OK && t->attn_bwd_efficiency != 0)
			rc = measured_ok(t, "attn_bwd_efficiency",
					 t->attn_bwd_efficiency);
		if (rc == HEXI_OK && t->attn_own_efficiency != 0)
			rc = measured_ok(t, "attn_own_efficiency",
					 t->attn_own_efficiency);
		if (rc == HEXI_OK && acc[i].nmembw > 0)
			rc = measured_ok(t, "mem_bw_gbps", t->mem_bw_gbps);
		if (rc == HEXI_OK && acc[i].nintra > 0)
			rc = measured_ok(t, "intra_bw_gbps", t->intra_bw_gbps);
		if (rc != HEXI_OK)
			return rc;
	}
	return HEXI_OK;
}

static int is_json_name(const char *n)
{
	size_t k = strlen(n);

	return n[0] != '.' && k > 5 && strcmp(n + k - 5, ".json") == 0;
}

hexi_rc hexi__profile_paths(const char *path,
			    hexi_rc (*fn)(const char *, void *), void *arg)
{
	struct dirent **ents = NULL;
	struct stat st;
	hexi_rc rv = HEXI_OK;
	int n;

	if (stat(path, &st) != 0)
		return hexi_error(HEXI_ERR_NOTFOUND,
				  "%s: no such profile file "
				  "or directory",
				  path);
	if (!S_ISDIR(st.st_mode))
		return fn(path, arg);
	n = scandir(path, &ents, NULL, alphasort);
	if (n < 0)
		return hexi_error(HEXI_ERR_IO, "%s: cannot read directory",
				  path);
	if (n > HEXI_MAX_PROFILES)
		rv = hexi_error(HEXI_ERR_RANGE, "%s: more than %d entries",
				path, HEXI_MAX_PROFILES);
	for (int i = 0; i < n; i++) {
		if (rv == HEXI_OK && is_json_name(ents[i]->d_name)) {
			char p[4096];
			if ((size_t)snprintf(p, sizeof(p), "%s/%s", path,
					     ents[i]->d_name) >= sizeof(p))
				rv = hexi_error(HEXI_ERR_RANGE,
						"%s: path too long", path);
			else
				rv = fn(p, arg);
		}
		free(ents[i]);
	}
	free(ents);
	return rv;
}

typedef struct prof_ctx {
	hexi_catalog *cat;
	prof_acc *acc;
} prof_ctx;

static hexi_rc prof_file(const char *path, void *arg)
{
	prof_ctx *ctx = arg;
	json_t *j = NULL;
	hexi_rc rv = hsj_load(path, &j);

	if (rv == HEXI_OK) {
		rv = prof_doc(ctx->cat, ctx->acc, j);
		if (rv != HEXI_OK)
			hexi_error_prefix(rv, "%s", path);
	}
	json_decref(j);
	return rv;
}

hexi_rc hexi_catalog_apply_profiles(hexi_catalog *cat, const char *path)
{
	prof_ctx ctx = {NULL, NULL};
	hexi_rc rv;

	if (cat == NULL || path == NULL)
		return hexi_error(HEXI_ERR_INVAL, "profiles: NULL argument");
	rv = hexi__catalog_clone(cat, &ctx.cat);
	if (rv != HEXI_OK)
		return rv;
	ctx.acc = calloc(cat->n ? cat->n : 1, sizeof(prof_acc));
	if (ctx.acc == NULL)
		rv = hexi_error(HEXI_ERR_NOMEM, "profiles: out of memory");
	if (rv == HEXI_OK)
		rv = hexi__profile_paths(path, prof_file, &ctx);
	if (rv == HEXI_OK)
		rv = prof_commit(ctx.cat, ctx.acc);
	free(ctx.acc);
	if (rv == HEXI_OK)
		cat_take(cat, ctx.cat);
	else
		hexi_catalog_destroy(ctx.cat);
	return rv;
}
