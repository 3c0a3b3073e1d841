/*
 * fuzz_main.c - a main() for libFuzzer-style targets, so every fuzz target
 * also runs as an ordinary, bounded test without clang's -fsanitize=fuzzer.
 *
 * A target defines LLVMFuzzerTestOneInput(data, size) and links this file.
 * Run as:  TARGET [-n ITERATIONS] [-s SEED] [CORPUS_FILE_OR_DIR...]
 * It replays every corpus file, then ITERATIONS (default 2000, or
 * $HEXI_FUZZ_ITERATIONS) deterministic mutations of them (bit flips, byte
 * sets, inserts, deletes, splices, truncation).  A crash or sanitizer report
 * fails the test; the target must not exit.
 *
 * Built with --enable-fuzzing (clang, HEXI_LIBFUZZER defined) the same
 * program is also a coverage-guided libFuzzer target: with the arguments
 * above (-n or -s given) it runs the deterministic replay as before, with
 * any other arguments it hands them to libFuzzer (LLVMFuzzerRunDriver:
 * -max_total_time=S CORPUS_DIR SEEDS..., see tests/fuzz/libfuzzer.sh and
 * `make fuzz`).
 */
#include "config.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_INPUT (1u << 20)
#define MAX_SEEDS      256

static uint8_t *seeds[MAX_SEEDS];
static size_t seed_len[MAX_SEEDS];
static int nseeds;

static uint64_t rng_state;

static uint64_t rng(void)
{
	/* splitmix64: deterministic for a given -s */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void add_seed_file(const char *path)
{
	FILE *f;
	uint8_t *buf;
	size_t n;

	if (nseeds >= MAX_SEEDS)
		return;
	f = fopen(path, "rb");
	if (f == NULL)
		return;
	buf = malloc(FUZZ_MAX_INPUT);
	if (buf == NULL) {
		fclose(f);
		return;
	}
	n = fread(buf, 1, FUZZ_MAX_INPUT, f);
	fclose(f);
	seeds[nseeds] = buf;
	seed_len[nseeds] = n;
	nseeds++;
}

static void add_seeds(const char *path)
{
	struct stat st;
	struct dirent **ents = NULL;
	int n;

	if (stat(path, &st) != 0)
		return;
	if (!S_ISDIR(st.st_mode)) {
		add_seed_file(path);
		return;
	}
	n = scandir(path, &ents, NULL, alphasort);
	for (int i = 0; i < n; i++) {
		char p[4096];
		if (ents[i]->d_name[0] != '.') {
			snprintf(p, sizeof(p), "%s/%s", path, ents[i]->d_name);
			add_seed_file(p);
		}
		free(ents[i]);
	}
	free(ents);
}

static size_t mutate(uint8_t *buf, size_t len, size_t cap)
{
	int rounds = 1 + (int)(rng() % 4);

	for (int r = 0; r < rounds; r++) {
		size_t pos = len ? rng() % len : 0;
		switch (rng() % 7) {
		case 0: /* bit flip */
			if (len)
				buf[pos] ^= (uint8_t)(1u << (rng() % 8));
			break;
		case 1: /* interesting byte */
			if (len) {
				static const uint8_t b[] = {
				    0,	 0xff, '"', '{', '}', '[',
				    ']', ',',  ':', '-', '9', '\\'};
				buf[pos] = b[rng() % sizeof(b)];
			}
			break;
		case 2: /* insert */
			if (len < cap) {
				memmove(buf + pos + 1, buf + pos, len - pos);
				buf[pos] = (uint8_t)rng();
				len++;
			}
			break;
		case 3: /* delete a run */
			if (len) {
				size_t k = 1 + rng() % 8;
				if (k > len - pos)
					k = len - pos;
				memmove(buf + pos, buf + pos + k,
					len - pos - k);
				len -= k;
			}
			break;
		case 4: /* truncate */
			len = pos;
			break;
		case 5: /* splice from another seed */
			if (nseeds > 0) {
				int s = (int)(rng() % (uint64_t)nseeds);
				size_t k =
				    seed_len[s] ? rng() % seed_len[s] : 0;
				size_t m = seed_len[s] - k;
				if (pos + m > cap)
					m = cap - pos;
				memcpy(buf + pos, seeds[s] + k, m);
				if (pos + m > len)
					len = pos + m;
			}
			break;
		default: /* big number */
			if (len + 24 < cap) {
				const char *big = "99999999999999999999";
				memmove(buf + pos + 20, buf + pos, len - pos);
				memcpy(buf + pos, big, 20);
				len += 20;
			}
			break;
		}
	}
	return len;
}

#ifdef HEXI_LIBFUZZER
int LLVMFuzzerRunDriver(int *argc, char ***argv,
			int (*cb)(const uint8_t *data, size_t size));
#endif

static int deterministic_main(int argc, char **argv)
{
	long iters = 2000;
	const char *env = getenv("HEXI_FUZZ_ITERATIONS");
	uint8_t *buf;
	int i = 1;

	rng_state = 1;
	if (env != NULL)
		iters = strtol(env, NULL, 10);
	for (; i < argc; i++) {
		if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
			iters = strtol(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc)
			rng_state = strtoull(argv[++i], NULL, 10);
		else
			add_seeds(argv[i]);
	}
	buf = malloc(FUZZ_MAX_INPUT);
	if (buf == NULL)
		return 99;
	for (int s = 0; s < nseeds; s++)
		LLVMFuzzerTestOneInput(seeds[s], seed_len[s]);
	for (long it = 0; it < iters; it++) {
		size_t len = 0;
		if (nseeds > 0) {
			int s = (int)(rng() % (uint64_t)nseeds);
			len = seed_len[s];
			memcpy(buf, seeds[s], len);
		}
		len = mutate(buf, len, FUZZ_MAX_INPUT);
		LLVMFuzzerTestOneInput(buf, len);
	}
	printf("fuzz: %d seeds, %ld mutations, no crash\n", nseeds, iters);
	free(buf);
	for (int s = 0; s < nseeds; s++)
		free(seeds[s]);
	return 0;
}

int main(int argc, char **argv)
{
#ifdef HEXI_LIBFUZZER
	int replay = 0;

	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "-n") == 0 || strcmp(argv[i], "-s") == 0)
			replay = 1;
	if (!replay)
		return LLVMFuzzerRunDriver(&argc, &argv, LLVMFuzzerTestOneInput);
#endif
	return deterministic_main(argc, argv);
}
