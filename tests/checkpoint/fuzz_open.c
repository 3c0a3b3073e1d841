/*
 * fuzz_open.c - libFuzzer-style target for the checkpoint open/verify path
 * on a crafted checkpoint directory: the input is MANIFEST.json, the
 * separator "\0HEXIRANK\0", then rank-00000.h5 (see corpus/open/).  Both are
 * written into DIR/step-00000001 and the directory is opened and verified
 * through the public API.  Run bounded by fuzz.sh through tests/fuzz_main.c,
 * or open-ended with -fsanitize=fuzzer.
 *
 * A rank file reaches libhdf5 only when the manifest's size and whole-file
 * xxh64 match it, so mutations of the rank file stop at that check; with
 * HEXI_FUZZ_FIXUP=1 the target rewrites the manifest's size and checksum to
 * match and so fuzzes libhdf5 itself (known to have memory errors in 1.10;
 * not part of the suite).
 */
#include "config.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "hexi_ckpt.h"
#include "fuzz_target.h"

static const char sep[] = "\0HEXIRANK\0";
#define SEP_LEN (sizeof(sep) - 1)

static char dir[256], stepdir[300];

static int put(const char *name, const void *p, size_t n)
{
	char path[400];
	int fd;
	ssize_t w;

	snprintf(path, sizeof(path), "%s/%s", stepdir, name);
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	w = n > 0 ? write(fd, p, n) : 0;
	close(fd);
	return w == (ssize_t)n ? 0 : -1;
}

static void cleanup(void)
{
	char path[400];

	snprintf(path, sizeof(path), "%s/MANIFEST.json", stepdir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/rank-00000.h5", stepdir);
	unlink(path);
	rmdir(stepdir);
	rmdir(dir);
}

static int setup(void)
{
	const char *t = getenv("TMPDIR");

	if (dir[0] != '\0')
		return 0;
	snprintf(dir, sizeof(dir), "%s/hexi-fuzz-open.XXXXXX",
		 t && *t ? t : "/tmp");
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(stepdir, sizeof(stepdir), "%s/step-00000001", dir);
	hexi_log_set_level(HEXI_LOG_ERROR);
	atexit(cleanup);
	if (mkdir(stepdir, 0700) != 0)
		return -1;
	/* As root, the step directory belongs to another user (nobody), as
	 * in the threat model: an admin's hexickpt on a user's files.  Then a
	 * crafted format-1 manifest (no whole-file hashes) is refused instead
	 * of handing its rank file to libhdf5 unchecked, which is allowed
	 * only for one's own files. */
	if (geteuid() == 0 && chown(stepdir, 65534, 65534) != 0)
		return -1;
	return 0;
}

/* Rewrite "bytes": N and "xxh64": "..." of files[0] to match the rank
 * file (fix-up mode); returns a heap copy or NULL. */
static char *fixup(const char *m, size_t mlen, const uint8_t *rf, size_t rlen)
{
	char *out = malloc(mlen + 64), *b, *x, *e;
	size_t off;

	if (out == NULL)
		return NULL;
	memcpy(out, m, mlen);
	out[mlen] = '\0';
	b = strstr(out, "\"bytes\": ");
	x = b ? strstr(b, "\"xxh64\": \"") : NULL;
	if (b == NULL || x == NULL || strlen(x) < 10 + 16) {
		free(out);
		return NULL;
	}
	e = b + 9;
	off = strspn(e, "0123456789");
	{
		char num[24], *tail = strdup(e + off);
		if (tail == NULL) {
			free(out);
			return NULL;
		}
		snprintf(num, sizeof(num), "%zu", rlen);
		memcpy(e, num, strlen(num));
		memcpy(e + strlen(num), tail, strlen(tail) + 1);
		free(tail);
	}
	x = strstr(out, "\"xxh64\": \"");
	if (x != NULL) {
		char h[17];
		snprintf(h, sizeof(h), "%016llx",
			 (unsigned long long)XXH64(rf, rlen, 0));
		memcpy(x + 10, h, 16);
	}
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *s = NULL, *rf;
	size_t i, mlen, rlen;
	hexi_ckpt_reader *r = NULL;
	char *fixed = NULL;
	hexi_rc rc;

	if (setup() < 0)
		return 0;
	for (i = 0; i + SEP_LEN <= size; i++)
		if (memcmp(data + i, sep, SEP_LEN) == 0) {
			s = data + i;
			break;
		}
	mlen = s ? (size_t)(s - data) : size;
	rf = s ? s + SEP_LEN : data + size;
	rlen = (size_t)(data + size - rf);
	if (getenv("HEXI_FUZZ_FIXUP") != NULL)
		fixed = fixup((const char *)data, mlen, rf, rlen);
	if (put("MANIFEST.json", fixed ? fixed : (const char *)data,
		fixed ? strlen(fixed) : mlen) < 0 ||
	    put("rank-00000.h5", rf, rlen) < 0) {
		free(fixed);
		return 0;
	}
	free(fixed);
	hexi_error_clear();
	rc = hexi_ckpt_open(dir, NULL, &r);
	if (rc == HEXI_OK)
		rc = hexi_ckpt_verify(r, NULL, NULL);
	hexi_ckpt_close(r);
	/* Every failure must say why. */
	fuzz_require_own_message(rc);
	hexi_error_clear();
	return 0;
}
