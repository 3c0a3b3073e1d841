/*
 * test_safety.c - the attacks of issue 18 on the checkpoint writer and
 * reader, as an ordinary user (the cross-user and root cases are in
 * attack.sh): planted symlinks in the destination and the step directory,
 * FIFOs named MANIFEST.json / latest / a rank file (an alarm turns a hang
 * into a failure), two concurrent writers of one directory, a killed
 * writer's lock and staging directory, crafted rank files refused before
 * libhdf5 opens them, and the staging protocol of several processes.
 */
#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "ckpt_fixture.h"

static const char *plan = "{\"fixture\":1}";
static hexi_layout *L;
static int W;

static __attribute__((format(printf, 1, 2))) void sh(const char *fmt, ...)
{
	char cmd[3000];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0)
		tap_bail(cmd);
}

static int file_is(const char *path, const char *want)
{
	char *t = NULL;
	size_t n;
	int same;

	if (hexi_read_file(path, 1 << 20, &t, &n) != HEXI_OK)
		return 0;
	same = n == strlen(want) && memcmp(t, want, n) == 0;
	free(t);
	return same;
}

static hexi_rc open_verify(const char *dir, int64_t step)
{
	hexi_ckpt_open_opts o;
	hexi_ckpt_reader *r = NULL;
	hexi_rc rc;

	hexi_ckpt_open_opts_init(&o);
	o.step = step;
	alarm(20); /* a hang fails the test (SIGALRM) */
	rc = hexi_ckpt_open(dir, &o, &r);
	if (rc == HEXI_OK)
		rc = hexi_ckpt_verify(r, NULL, NULL);
	alarm(0);
	hexi_ckpt_close(r);
	return rc;
}

/* A symlink planted as a rank file of an uncommitted step directory of
 * ours, and as the step directory itself: nothing outside is written. */
static void test_symlinks(const char *base)
{
	char d[700], victim[700], vdir[700];
	hexi_rc rc;

	snprintf(d, sizeof(d), "%s/sym", base);
	snprintf(victim, sizeof(victim), "%s/victim", base);
	snprintf(vdir, sizeof(vdir), "%s/victim-dir", base);
	sh("mkdir -p '%s/step-00000004' '%s' && printf precious > '%s'", d,
	   vdir, victim);
	sh("ln -s '%s' '%s/step-00000004/rank-00000.h5'", victim, d);
	sh("ln -s '%s' '%s/step-00000004/MANIFEST.json.tmp.1'", victim, d);
	is_rc(fx_save(d, L, W, 4, "00112233aabbccdd", plan), HEXI_OK,
	      "save over a leftover step directory with planted symlinks");
	ok(file_is(victim, "precious"), "the symlinks' target is untouched");
	is_rc(open_verify(d, 4), HEXI_OK, "and the new step 4 verifies");

	sh("ln -s '%s' '%s/step-00000005'", vdir, d);
	rc = fx_save(d, L, W, 5, "00112233aabbccdd", plan);
	is_int(rc, HEXI_ERR_PERM, "step directory is a symlink: refused");
	ok(strstr(hexi_errmsg(rc), "a symlink") != NULL, "message: %s",
	   hexi_errmsg(rc));
	sh("test -z \"$(ls -A '%s')\"", vdir);
	ok(1, "nothing written into the symlink's target directory");

	sh("rm -f '%s/latest' && ln -s '%s' '%s/latest'", d, victim, d);
	is_rc(fx_save(d, L, W, 6, "00112233aabbccdd", plan), HEXI_OK,
	      "save with 'latest' a symlink to another file");
	ok(file_is(victim, "precious"),
	   "the link was replaced, its target untouched");
}

/* FIFOs: every open and the commit fail fast instead of blocking. */
static void test_fifos(const char *base)
{
	char d[700], s[800];
	hexi_rc rc;

	snprintf(d, sizeof(d), "%s/fifo", base);
	is_rc(fx_save(d, L, W, 1, "00112233aabbccdd", plan), HEXI_OK,
	      "fifo: save step 1");
	snprintf(s, sizeof(s), "%s/step-00000001", d);

	sh("mv '%s/latest' '%s/latest.bak' && mkfifo '%s/latest'", d, d, d);
	rc = open_verify(d, -1);
	is_int(rc, HEXI_ERR_INVAL, "FIFO named latest: open refuses, no hang");
	alarm(20);
	rc = fx_save(d, L, W, 2, "00112233aabbccdd", plan);
	alarm(0);
	is_rc(rc, HEXI_OK, "FIFO named latest: the commit replaces it");
	is_rc(open_verify(d, -1), HEXI_OK, "and latest opens again");

	sh("mv '%s/MANIFEST.json' '%s/M.bak' && mkfifo '%s/MANIFEST.json'", s,
	   s, s);
	rc = open_verify(d, 1);
	is_int(rc, HEXI_ERR_INVAL, "FIFO named MANIFEST.json: refused");
	ok(strstr(hexi_errmsg(rc), "not a regular file") != NULL, "message: %s",
	   hexi_errmsg(rc));
	sh("rm '%s/MANIFEST.json' && ln -s M.bak '%s/MANIFEST.json'", s, s);
	rc = open_verify(d, 1);
	ok(rc != HEXI_OK, "symlink named MANIFEST.json: refused (%s)",
	   hexi_errmsg(rc));
	sh("rm '%s/MANIFEST.json' && mv '%s/M.bak' '%s/MANIFEST.json'", s, s,
	   s);

	sh("mv '%s/rank-00001.h5' '%s/r1.bak' && mkfifo '%s/rank-00001.h5'", s,
	   s, s);
	rc = open_verify(d, 1);
	is_int(rc, HEXI_ERR_INVAL, "FIFO as a rank file: refused, no hang");
	sh("rm '%s/rank-00001.h5' && mv '%s/r1.bak' '%s/rank-00001.h5'", s, s,
	   s);
	is_rc(open_verify(d, 1), HEXI_OK, "restored: verifies");
}

/* Crafted rank files: refused by size or whole-file xxh64, never opened
 * by libhdf5 (the message is ours, not an HDF5 one). */
static void test_crafted(const char *base)
{
	char d[700], f[800];
	hexi_rc rc;
	static const struct {
		const char *cmd, *why, *msg;
		hexi_rc want;
	} cases[] = {
	    {"printf '\\377' | dd of=\"$F\" bs=1 seek=0 conv=notrunc "
	     "2>/dev/null",
	     "first byte (HDF5 signature) changed", "whole-file xxh64",
	     HEXI_ERR_CHECKSUM},
	    {"printf 'X' | dd of=\"$F\" bs=1 seek=700 conv=notrunc 2>/dev/null",
	     "a metadata byte flipped", "whole-file xxh64", HEXI_ERR_CHECKSUM},
	    {"truncate -s -1 \"$F\"", "truncated by one byte", "truncated",
	     HEXI_ERR_IO},
	    {"printf 'tail' >> \"$F\"", "four bytes appended", "manifest says",
	     HEXI_ERR_IO},
	    {"truncate -r \"$F\" \"$F.t\" && mv \"$F.t\" \"$F\"",
	     "replaced by zeros of the same size", "whole-file xxh64",
	     HEXI_ERR_CHECKSUM},
	};
	size_t i;

	snprintf(d, sizeof(d), "%s/crafted", base);
	is_rc(fx_save(d, L, W, 1, "00112233aabbccdd", plan), HEXI_OK,
	      "crafted: save step 1");
	snprintf(f, sizeof(f), "%s/step-00000001/rank-00002.h5", d);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		sh("cp -p '%s' '%s.orig'", f, f);
		setenv("F", f, 1);
		sh("%s", cases[i].cmd);
		rc = open_verify(d, 1);
		is_int(rc, cases[i].want, "%s: refused", cases[i].why);
		ok(strstr(hexi_errmsg(rc), cases[i].msg) != NULL &&
		       strstr(hexi_errmsg(rc), "(in H5") == NULL,
		   "before HDF5: %s", hexi_errmsg(rc));
		sh("mv '%s.orig' '%s'", f, f);
	}
	is_rc(open_verify(d, 1), HEXI_OK, "restored: verifies");
}

/* Two processes saving into one directory: the second fails at once
 * naming the holder, and every committed checkpoint verifies. */
static void writer_child(const char *d, int64_t first, int fd)
{
	int64_t s;
	hexi_rc rc = HEXI_OK;
	char c = 'x';

	for (s = first; s < first + 3 && rc == HEXI_OK; s++) {
		rc = fx_save(d, L, W, s, "00112233aabbccdd", plan);
		if (s == first && write(fd, &c, 1) != 1)
			_exit(99);
	}
	if (rc != HEXI_OK)
		fprintf(stderr, "# writer %lld: %s\n", (long long)first,
			hexi_errmsg(rc));
	_exit(rc == HEXI_OK ? 0 : rc == HEXI_ERR_PERM ? 14 : 1);
}

static void test_two_writers(const char *base)
{
	char d[700];
	int trial, good = 0, fast = 0, verified = 0, p[2];
	pid_t a, b;
	int sa, sb;

	for (trial = 0; trial < 10; trial++) {
		snprintf(d, sizeof(d), "%s/two-%d", base, trial);
		if (pipe(p) < 0)
			tap_bail("pipe");
		fflush(stdout);
		a = fork();
		if (a == 0)
			writer_child(d, 10, p[1]);
		/* b starts once a holds the lock (a's first commit), or at
		 * the same time on odd trials. */
		if (trial % 2 == 0) {
			char c;
			if (read(p[0], &c, 1) != 1)
				tap_bail("pipe read");
		}
		b = fork();
		if (b == 0)
			writer_child(d, 20, p[1]);
		waitpid(a, &sa, 0);
		waitpid(b, &sb, 0);
		close(p[0]);
		close(p[1]);
		sa = WIFEXITED(sa) ? WEXITSTATUS(sa) : -1;
		sb = WIFEXITED(sb) ? WEXITSTATUS(sb) : -1;
		good += (sa == 0) + (sb == 0) == 1;
		fast += (sa == 14) + (sb == 14) == 1;
		{
			hexi_ckpt_entry *e = NULL;
			int n = 0, i, allok = 1;
			if (hexi_ckpt_list(d, &e, &n) != HEXI_OK || n != 3)
				allok = 0;
			for (i = 0; allok && i < n; i++)
				allok = e[i].committed &&
					open_verify(d, e[i].step) == HEXI_OK;
			free(e);
			verified += allok;
		}
	}
	is_int(good, 10, "10 trials: exactly one writer succeeded each time");
	is_int(fast, 10, "the other failed with PERM (lock held) each time");
	is_int(verified, 10, "every trial: the 3 committed checkpoints verify");
}

static void test_holder_message(const char *base)
{
	char d[700];
	int p[2], q[2];
	pid_t a;
	char c;
	hexi_rc rc;

	snprintf(d, sizeof(d), "%s/holder", base);
	if (pipe(p) < 0 || pipe(q) < 0)
		tap_bail("pipe");
	fflush(stdout);
	a = fork();
	if (a == 0) {
		hexi_ckpt_meta m;
		char stage[HEXI_CKPT_STAGE_MAX];
		fx_meta(&m, 1, W, "00112233aabbccdd");
		c = hexi_ckpt_save_prepare(d, &m, stage) == HEXI_OK ? 'y' : 'n';
		if (write(p[1], &c, 1) != 1 || read(q[0], &c, 1) != 1)
			_exit(1);
		_exit(0);
	}
	if (read(p[0], &c, 1) != 1 || c != 'y')
		tap_bail("holder did not lock");
	rc = fx_save(d, L, W, 2, "00112233aabbccdd", plan);
	is_int(rc, HEXI_ERR_PERM, "a second writer: PERM at once");
	ok(strstr(hexi_errmsg(rc), "another writer") != NULL &&
	       strstr(hexi_errmsg(rc), "pid=") != NULL &&
	       strstr(hexi_errmsg(rc), "host=") != NULL &&
	       strstr(hexi_errmsg(rc), "user=") != NULL,
	   "message names the holder: %s", hexi_errmsg(rc));
	/* The holder is killed: its lock dies with it (stale lock), and its
	 * staging directory is removed by the next writer. */
	kill(a, SIGKILL);
	waitpid(a, NULL, 0);
	sh("test -n \"$(ls -d '%s'/.step-00000001.* 2>/dev/null)\"", d);
	ok(1, "the killed holder left a staging directory");
	is_rc(fx_save(d, L, W, 2, "00112233aabbccdd", plan), HEXI_OK,
	      "after the holder died (stale lock): the next writer saves");
	sh("test -z \"$(ls -d '%s'/.step-* 2>/dev/null)\"", d);
	ok(1, "and removed the dead save's staging directory");
	close(p[0]);
	close(p[1]);
	close(q[0]);
	close(q[1]);
}

/* The multi-process protocol: prepare, begin in the staging directory,
 * commit; the step is invisible until the commit; a staging name that is
 * not ours is refused. */
static void test_staged(const char *base)
{
	char d[700], stage[HEXI_CKPT_STAGE_MAX];
	hexi_ckpt_meta m;
	hexi_ckpt_writer *w = NULL;
	int64_t shape[2] = {4, 2};
	float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	hexi_rc rc;

	snprintf(d, sizeof(d), "%s/staged", base);
	fx_meta(&m, 3, 2, "");
	is_rc(hexi_ckpt_save_prepare(d, &m, stage), HEXI_OK, "prepare");
	ok(stage[0] == '.' && strncmp(stage, ".step-00000003.", 15) == 0,
	   "staging name %s", stage);
	sh("test \"$(stat -c %%a '%s/%s')\" = 700", d, stage);
	ok(1, "staging directory mode 0700");
	is_int(hexi_ckpt_save_begin_staged(d, "../../etc", &m, 0, &w),
	       HEXI_ERR_INVAL, "a staging name with a path: refused");
	sh("mkdir -m 0755 '%s/.step-00000003.aaaaaaaaaa'", d);
	is_int(hexi_ckpt_save_begin_staged(d, ".step-00000003.aaaaaaaaaa", &m,
					   0, &w),
	       HEXI_ERR_PERM, "a staging directory of mode 0755: refused");
	is_rc(hexi_ckpt_save_begin_staged(d, stage, &m, 0, &w), HEXI_OK,
	      "rank 0 begins");
	is_rc(hexi_ckpt_write_slice(w, "t", 2, shape, 0, 2, x), HEXI_OK,
	      "rank 0 writes");
	is_rc(hexi_ckpt_save_end(w), HEXI_OK, "rank 0 ends");
	is_int(hexi_ckpt_save_begin_staged(d, stage, &m, 0, &w), HEXI_ERR_HDF5,
	       "rank 0 again: its file exists (O_EXCL)");
	is_rc(hexi_ckpt_save_begin_staged(d, stage, &m, 1, &w), HEXI_OK,
	      "rank 1 begins");
	is_rc(hexi_ckpt_write_slice(w, "t", 2, shape, 2, 4, x + 4), HEXI_OK,
	      "rank 1 writes");
	is_rc(hexi_ckpt_save_end(w), HEXI_OK, "rank 1 ends");
	is_int(open_verify(d, 3), HEXI_ERR_NOTFOUND,
	       "not visible before the commit");
	rc = hexi_ckpt_commit_staged(d, stage, &m, NULL);
	is_rc(rc, HEXI_OK, "commit");
	is_rc(open_verify(d, 3), HEXI_OK, "committed step verifies");
	sh("test ! -e '%s/%s' && test ! -e '%s/step-00000003/rank-00000.sum'",
	   d, stage, d);
	ok(1, "staging directory renamed, no .sum files left");
}

int main(void)
{
	fx_model fm = {2, 64, 16, 48, 1};
	int tp[2] = {2, 3};
	char base[512];

	L = fx_layout(&fm, 2, tp);
	W = fx_world(2, tp);
	if (L == NULL || fx_tmpdir(base, sizeof(base)) == NULL)
		tap_bail("setup");
	hexi_log_set_level(HEXI_LOG_ERROR);
	test_symlinks(base);
	test_fifos(base);
	test_crafted(base);
	test_staged(base);
	test_holder_message(base);
	test_two_writers(base);
	fx_rmrf(base);
	fx_layout_free(L);
	return tap_done();
}
