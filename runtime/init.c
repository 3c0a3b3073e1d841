/* init.c - layout-independent deterministic initialisation. */
#include "config.h"

#include "rt_model.h"

#include <math.h>
#include <string.h>

/* splitmix64 finaliser: a good 64-bit mixer for counter-based streams. */
static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

void rt_init_tensor(float *w, const char *name, int64_t row_begin,
		    int64_t row_end, int64_t ncols, float std, uint64_t seed)
{
	size_t n = (size_t)(row_end - row_begin) * (size_t)ncols;
	if (std <= 0.0f) {
		for (size_t i = 0; i < n; i++)
			w[i] = 1.0f;
		return;
	}
	const uint64_t key = mix64(seed ^ mix64(hexi_fnv1a64(name, strlen(name))));
	const float a = sqrtf(3.0f) * std;
	const uint64_t first = (uint64_t)row_begin * (uint64_t)ncols;
	for (size_t i = 0; i < n; i++) {
		uint64_t x = mix64(key + (first + i) * 0xd1b54a32d192ed03ULL);
		/* top 24 bits: u exactly representable in [0, 1) */
		float u = (float)(x >> 40) * 0x1p-24f;
		w[i] = (2.0f * u - 1.0f) * a;
	}
}

static int ends_with(const char *s, const char *suffix)
{
	size_t ls = strlen(s), lx = strlen(suffix);
	return ls >= lx && strcmp(s + ls - lx, suffix) == 0;
}

float rt_init_std(const hexi_model *md, const char *name)
{
	const double C = md->hidden, L = md->layers > 0 ? md->layers : 1;
	if (ends_with(name, "norm.weight"))
		return 0.0f;
	if (strcmp(name, "embed.weight") == 0)
		return 1.0f;
	/* residual-branch outputs are scaled down by 1/sqrt(2L) (GPT-2) */
	if (ends_with(name, ".attn.wo"))
		return (float)(1.0 / sqrt(C * 2.0 * L)); /* fan_in H*d = C */
	if (ends_with(name, ".mlp.w_down"))
		return (float)(1.0 / sqrt((double)md->ffn * 2.0 * L));
	return (float)(1.0 / sqrt(C)); /* wq wk wv w_gate w_up lm_head */
}
