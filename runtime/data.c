/* data.c - the deterministic synthetic corpus. */
#include "config.h"

#include "rt_model.h"

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

void hexi_rt_data_sample(uint64_t seed, int vocab, int T, int64_t sample,
			 int *tokens)
{
	if (vocab < 1)
		vocab = 1; /* degenerate but defined: all zeros */
	const uint64_t key = mix64(mix64(seed) ^ (uint64_t)sample);
	const int stride = 1 + (int)(key % 7);
	tokens[0] = (int)(mix64(key) % (uint64_t)vocab);
	for (int t = 1; t <= T; t++) {
		uint64_t h = mix64(key + (uint64_t)t * 0xd1b54a32d192ed03ULL);
		if ((h & 7) == 0)
			tokens[t] = (int)((h >> 8) % (uint64_t)vocab);
		else
			tokens[t] = (tokens[t - 1] + stride) % vocab;
	}
}
