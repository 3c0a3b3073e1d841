/* test_error.c - error table, messages and strict parsers. */
#include "config.h"

#include "hexi_common.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_table(void)
{
	is_str(hexi_strerror(HEXI_OK), "success", "HEXI_OK text");
	is_str(hexi_errname(HEXI_ERR_PARSE), "HEXI_ERR_PARSE", "name of PARSE");
	is_str(hexi_strerror((hexi_rc)250), "unknown error", "unknown code");
	ok(HEXI_ERR_INTERNAL > 0 && HEXI_ERR_INTERNAL < 256,
	   "codes fit an exit status");
}

static void test_messages(void)
{
	hexi_error_clear();
	is_str(hexi_errmsg(HEXI_ERR_IO), "input/output error",
	       "no message falls back to the code text");
	is_int(hexi_error(HEXI_ERR_RANGE, "field '%s' is %d", "tp", -1),
	       HEXI_ERR_RANGE, "hexi_error returns its code");
	is_str(hexi_errmsg(HEXI_ERR_RANGE), "field 'tp' is -1", "message kept");
	hexi_error_prefix(HEXI_ERR_RANGE, "plan.json");
	is_str(hexi_errmsg(HEXI_ERR_RANGE), "plan.json: field 'tp' is -1",
	       "prefix added");
}

/* hexi_error/hexi_error_prefix are macros (DECISIONS 110): rc is evaluated
 * once, errno survives the formatting, and the out-of-line functions of the
 * library ABI behave the same. */
static void test_error_macros(void)
{
	hexi_rc codes[] = {HEXI_ERR_IO, HEXI_ERR_PARSE};
	int n = 0;

	is_int(hexi_error(codes[n++], "n=%d", 7), HEXI_ERR_IO,
	       "hexi_error: rc expression's value");
	is_int(n, 1, "hexi_error: rc evaluated once");
	is_int(hexi_error_prefix(codes[n++], "p%d", 1), HEXI_ERR_PARSE,
	       "hexi_error_prefix: rc expression's value");
	is_int(n, 2, "hexi_error_prefix: rc evaluated once");
	is_str(hexi_errmsg(HEXI_OK), "p1: n=7", "macro messages");
	errno = ENOSPC;
	hexi_error(HEXI_ERR_NOSPACE, "%s", "x");
	is_int(errno, ENOSPC, "errno kept by hexi_error");
	hexi_error_prefix(HEXI_ERR_NOSPACE, "%s", "y");
	is_int(errno, ENOSPC, "errno kept by hexi_error_prefix");
	is_int((hexi_error)(HEXI_ERR_RANGE, "f%d", 2), HEXI_ERR_RANGE,
	       "out-of-line hexi_error returns its code");
	is_int((hexi_error_prefix)(HEXI_ERR_RANGE, "g"), HEXI_ERR_RANGE,
	       "out-of-line hexi_error_prefix returns its code");
	is_str(hexi_errmsg(HEXI_OK), "g: f2", "out-of-line messages");
	hexi_error_clear();
	hexi_error_prefix(HEXI_ERR_IO, "h");
	is_str(hexi_errmsg(HEXI_OK), "h: input/output error",
	       "prefix of no message: the code's text");
}

static void test_parse_long(void)
{
	static const struct {
		const char *in;
		hexi_rc rc;
	} bad[] = {
	    {"", HEXI_ERR_PARSE},
	    {" 1", HEXI_ERR_PARSE},
	    {"1 ", HEXI_ERR_PARSE},
	    {"+1", HEXI_ERR_PARSE},
	    {"0x10", HEXI_ERR_PARSE},
	    {"12a", HEXI_ERR_PARSE},
	    {"101", HEXI_ERR_RANGE},
	    {"-1", HEXI_ERR_RANGE},
	    {"99999999999999999999999", HEXI_ERR_RANGE},
	};
	long v = 0;

	is_int(hexi_parse_long("42", 0, 100, &v), HEXI_OK, "parse 42");
	is_int(v, 42, "value 42");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		is_int(hexi_parse_long(bad[i].in, 0, 100, &v), bad[i].rc,
		       "reject '%s'", bad[i].in);
}

static void test_parse_double(void)
{
	double d = 0;

	is_int(hexi_parse_double("0.7", 0, 1e6, &d), HEXI_OK, "parse 0.7");
	is_near(d, 0.7, 1e-15, "value 0.7");
	is_int(hexi_parse_double("nan", 0, 1, &d), HEXI_ERR_RANGE,
	       "reject nan");
	is_int(hexi_parse_double("inf", 0, 1e300, &d), HEXI_ERR_RANGE,
	       "reject inf");
	is_int(hexi_parse_double("1e", 0, 1, &d), HEXI_ERR_PARSE, "reject 1e");
	is_int(hexi_parse_double("-0.5", 0, 1, &d), HEXI_ERR_RANGE,
	       "reject negative");
}

static void test_strings(void)
{
	char buf[4];

	is_int(hexi_strlcpy(buf, "abc", sizeof(buf)), HEXI_OK, "fits");
	is_str(buf, "abc", "copied");
	is_int(hexi_strlcpy(buf, "abcd", sizeof(buf)), HEXI_ERR_RANGE,
	       "too long is refused");
	ok(hexi_is_printable("a=b c"), "printable");
	ok(!hexi_is_printable("a\nb"), "newline is not printable");
	ok(!hexi_is_printable("a\x1b[0m"), "escape is not printable");
}

static void test_files(void)
{
	char dir[] = "/tmp/hexi-test-XXXXXX";
	char path[256];
	char *data = NULL;
	size_t len = 0;

	if (mkdtemp(dir) == NULL)
		tap_bail("mkdtemp failed");
	snprintf(path, sizeof(path), "%s/f.json", dir);
	is_int(hexi_write_file_atomic(path, "{}\n", 3, 0644), HEXI_OK,
	       "atomic write");
	is_int(hexi_read_file(path, 100, &data, &len), HEXI_OK, "read back");
	is_int(len, 3, "length");
	is_str(data, "{}\n", "content");
	free(data);
	is_int(hexi_read_file(path, 2, &data, &len), HEXI_ERR_RANGE,
	       "size cap enforced");
	snprintf(path, sizeof(path), "%s/missing", dir);
	is_int(hexi_read_file(path, 100, &data, &len), HEXI_ERR_NOTFOUND,
	       "missing file");
	snprintf(path, sizeof(path), "%s/f.json", dir);
	unlink(path);
	rmdir(dir);
}

/* A regression would block in open(2) on a FIFO: SIGALRM (default action)
 * kills the test so it fails instead of hanging. */
#define WATCHDOG_S 20

static int mode_of(const char *path, int follow)
{
	struct stat st;

	if ((follow ? stat(path, &st) : lstat(path, &st)) != 0)
		return -1;
	return (int)(st.st_mode & S_IFMT);
}

/* The FIFO is refused without being opened: a writer waiting in open(2)
 * goes on at the first reader, and the open of a device runs its driver
 * (/dev/watchdog starts counting). */
static void fifo_never_opened(const char *fifo)
{
	int p[2], fd, st = 0;
	char c = 0, *data = NULL;
	pid_t pid;
	hexi_rc rc;

	if (pipe(p) != 0)
		tap_bail("pipe failed");
	if ((pid = fork()) < 0)
		tap_bail("fork failed");
	if (pid == 0) { /* the writer: says 'w' once its open returned */
		close(p[0]);
		alarm(30); /* never outlives a parent that died */
		if ((fd = open(fifo, O_WRONLY)) >= 0 &&
		    write(p[1], "w", 1) == 1)
			_exit(0);
		_exit(1);
	}
	close(p[1]);
	usleep(100000); /* the writer is in its open */
	rc = hexi_read_file(fifo, 100, &data, NULL);
	ok(rc == HEXI_ERR_IO && data == NULL,
	   "FIFO with a waiting writer refused");
	usleep(200000);
	(void)fcntl(p[0], F_SETFL, O_NONBLOCK);
	ok(read(p[0], &c, 1) < 0 && errno == EAGAIN,
	   "and never opened: its writer still waits");
	fd = open(fifo, O_RDONLY); /* let it go */
	(void)fcntl(p[0], F_SETFL, 0);
	ok(read(p[0], &c, 1) == 1 && c == 'w',
	   "the writer went on once a reader came");
	waitpid(pid, &st, 0);
	if (fd >= 0)
		close(fd);
	close(p[0]);
}

/* Issue 18 finding 3: special files as input never block, are refused with
 * a message naming their type. */
static void test_read_special(const char *dir)
{
	char fifo[256], link[256], reg[256];
	char *data = NULL;
	hexi_rc rc;

	snprintf(fifo, sizeof(fifo), "%s/fifo.json", dir);
	snprintf(link, sizeof(link), "%s/link.json", dir);
	snprintf(reg, sizeof(reg), "%s/reg.json", dir);
	if (mkfifo(fifo, 0600) != 0)
		tap_bail("mkfifo failed");
	alarm(WATCHDOG_S);
	rc = hexi_read_file(fifo, 100, &data, NULL);
	ok(rc == HEXI_ERR_IO && strstr(hexi_errmsg(rc), "FIFO") != NULL,
	   "FIFO refused at once: %s", hexi_errmsg(rc));
	ok(data == NULL, "nothing returned for the FIFO");
	fifo_never_opened(fifo);
	rc = hexi_read_file(dir, 100, &data, NULL);
	ok(rc == HEXI_ERR_IO && strstr(hexi_errmsg(rc), "directory") != NULL,
	   "directory refused: %s", hexi_errmsg(rc));
	rc = hexi_read_file("/dev/zero", 100, &data, NULL);
	ok(rc == HEXI_ERR_IO &&
	       strstr(hexi_errmsg(rc), "character device") != NULL,
	   "/dev/zero refused: %s", hexi_errmsg(rc));
	is_int(hexi_write_file_atomic(reg, "{}", 2, 0644), HEXI_OK, "regular");
	if (symlink(reg, link) != 0)
		tap_bail("symlink failed");
	rc = hexi_read_file(link, 100, &data, NULL);
	is_int(rc, HEXI_OK, "a link to a regular file is read");
	free(data);
	data = NULL;
	rc = hexi_read_file_ex(link, 100, HEXI_READ_NOFOLLOW, &data, NULL);
	ok(rc == HEXI_ERR_PERM && strstr(hexi_errmsg(rc), "symbolic link"),
	   "HEXI_READ_NOFOLLOW refuses a link: %s", hexi_errmsg(rc));
	unlink(link);
	if (symlink(fifo, link) != 0)
		tap_bail("symlink failed");
	rc = hexi_read_file(link, 100, &data, NULL);
	ok(rc == HEXI_ERR_IO && strstr(hexi_errmsg(rc), "FIFO") != NULL,
	   "a link to a FIFO refused at once");
	alarm(0);
	unlink(link);
	unlink(reg);
	unlink(fifo);
}

/* A link flipping between a plan and a FIFO while it is read (the
 * check-then-read race of finding 3): every read either gets the whole
 * plan or refuses the FIFO; none blocks.  At least 3000 reads, and on
 * until both outcomes were seen (at most 200000, the reader yielding
 * after each): on two busy cores the flipper can sleep through 3000 fast
 * reads, which once left every one of them on the FIFO (CI, stop 32). */
struct flipper {
	const char *dir;
	volatile int stop;
};

static void *flip(void *arg)
{
	struct flipper *f = arg;
	char a[256], b[256], cur[256];

	snprintf(a, sizeof(a), "%s/to-reg", f->dir);
	snprintf(b, sizeof(b), "%s/to-fifo", f->dir);
	snprintf(cur, sizeof(cur), "%s/cur.json", f->dir);
	for (unsigned i = 0; !f->stop; i++) {
		const char *src = (i & 1) ? b : a;
		const char *dst = (i & 1) ? "fifo.json" : "reg.json";

		unlink(src);
		if (symlink(dst, src) == 0)
			rename(src, cur);
	}
	return NULL;
}

static void test_read_flip(const char *dir)
{
	struct flipper f = {dir, 0};
	char fifo[256], reg[256], cur[256];
	int good = 0, refused = 0, other = 0, notfound = 0;
	pthread_t th;

	snprintf(fifo, sizeof(fifo), "%s/fifo.json", dir);
	snprintf(reg, sizeof(reg), "%s/reg.json", dir);
	snprintf(cur, sizeof(cur), "%s/cur.json", dir);
	if (mkfifo(fifo, 0600) != 0 ||
	    hexi_write_file_atomic(reg, "{\"plan\":1}", 10, 0644) != HEXI_OK ||
	    symlink("reg.json", cur) != 0)
		tap_bail("flip setup failed");
	if (pthread_create(&th, NULL, flip, &f) != 0)
		tap_bail("pthread_create failed");
	alarm(WATCHDOG_S);
	for (int i = 0; i < 200000 && (i < 3000 || !good || !refused); i++) {
		char *data = NULL;
		size_t len = 0;
		hexi_rc rc = hexi_read_file(cur, 100, &data, &len);

		if (rc == HEXI_OK && len == 10 && !strcmp(data, "{\"plan\":1}"))
			good++;
		else if (rc == HEXI_ERR_IO &&
			 strstr(hexi_errmsg(rc), "FIFO") != NULL)
			refused++;
		else if (rc == HEXI_ERR_NOTFOUND) /* between unlink+rename */
			notfound++;
		else
			other++;
		free(data);
		sched_yield();
	}
	alarm(0);
	f.stop = 1;
	pthread_join(th, NULL);
	ok(good > 0 && refused > 0 && other == 0,
	   "%d reads of a link flipping plan/FIFO: %d whole plans, %d FIFO "
	   "refusals, %d other, none blocked",
	   good + refused + other + notfound, good, refused, other);
	unlink(cur);
	snprintf(cur, sizeof(cur), "%s/to-reg", dir);
	unlink(cur);
	snprintf(cur, sizeof(cur), "%s/to-fifo", dir);
	unlink(cur);
	unlink(reg);
	unlink(fifo);
}

/* Finding 4: atomic writes onto non-regular targets write in place
 * (character devices, FIFOs with a reader) or refuse; never replace. */
static void test_write_special(const char *dir)
{
	char fifo[256], sub[256], reg[256], link[256], victim[256], tmp[300];
	char null[256];
	char *data = NULL;
	hexi_rc rc;

	snprintf(fifo, sizeof(fifo), "%s/out.fifo", dir);
	snprintf(sub, sizeof(sub), "%s/subdir", dir);
	snprintf(reg, sizeof(reg), "%s/out.json", dir);
	snprintf(link, sizeof(link), "%s/link.json", dir);
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	/* as root, a private /dev/null twin (c 1 3): a regression must not
	 * replace the machine's own; hostile-cli.sh does the real one in a
	 * private mount namespace */
	snprintf(null, sizeof(null), "%s/null", dir);
	if (geteuid() != 0 || mknod(null, S_IFCHR | 0666, makedev(1, 3)) != 0)
		snprintf(null, sizeof(null), "/dev/null");
	alarm(WATCHDOG_S);
	rc = hexi_write_file_atomic(null, "{}\n", 3, 0644);
	is_int(rc, HEXI_OK, "write to %s succeeds (in place)", null);
	is_int(mode_of(null, 0), S_IFCHR, "%s is still a character device%s",
	       null, geteuid() == 0 ? " (as root)" : " (not root: weaker)");
	if (strcmp(null, "/dev/null") != 0)
		unlink(null);
	if (mkfifo(fifo, 0600) != 0 || mkdir(sub, 0700) != 0)
		tap_bail("setup failed");
	rc = hexi_write_file_atomic(fifo, "{}\n", 3, 0644);
	ok(rc == HEXI_ERR_IO && strstr(hexi_errmsg(rc), "no reader"),
	   "FIFO without a reader: error at once: %s", hexi_errmsg(rc));
	is_int(mode_of(fifo, 0), S_IFIFO, "the FIFO is still a FIFO");
	rc = hexi_write_file_atomic(sub, "{}\n", 3, 0644);
	ok(rc == HEXI_ERR_IO && strstr(hexi_errmsg(rc), "directory"),
	   "directory target refused: %s", hexi_errmsg(rc));
	is_int(mode_of(sub, 0), S_IFDIR, "the directory is left as it is");
	alarm(0);
	/* a link to a regular file is replaced, never written through */
	is_int(hexi_write_file_atomic(victim, "keep", 4, 0600), HEXI_OK,
	       "victim");
	if (symlink(victim, link) != 0)
		tap_bail("symlink failed");
	is_int(hexi_write_file_atomic(link, "new", 3, 0644), HEXI_OK,
	       "write over a link");
	is_int(mode_of(link, 0), S_IFREG, "the link was replaced by a file");
	is_int(hexi_read_file(victim, 10, &data, NULL), HEXI_OK, "victim read");
	is_str(data, "keep", "the link's target is untouched");
	free(data);
	/* one of this process's descriptors, by a link of the caller's to
	 * /proc/self/fd/N (as /dev/stdout is, as root, where stdout is
	 * redirected to a file): written through the descriptor at its
	 * offset; the link stays (a rename replaced it; as root, the
	 * machine's /dev/stdout) */
	{
		char fdl[300], dfd[300], rel[300], txt[64], fdf[300];
		int fd;
		snprintf(fdf, sizeof(fdf), "%s/fdfile", dir);
		if (hexi_write_file_atomic(fdf, "keep", 4, 0600) != HEXI_OK ||
		    (fd = open(fdf, O_WRONLY | O_APPEND)) < 0)
			tap_bail("fdfile");
		snprintf(txt, sizeof(txt), "/proc/self/fd/%d", fd);
		snprintf(fdl, sizeof(fdl), "%s/fdlink", dir);
		snprintf(dfd, sizeof(dfd), "/dev/fd/%d", fd);
		snprintf(rel, sizeof(rel), "%s/rel", dir);
		if (symlink(txt, fdl) != 0 || symlink("fdlink", rel) != 0)
			tap_bail("symlink failed");
		is_int(hexi_write_file_atomic(fdl, "+a", 2, 0644), HEXI_OK,
		       "write to a link to /proc/self/fd/%d", fd);
		is_int(mode_of(fdl, 0), S_IFLNK, "the link is still a link");
		is_int(hexi_write_file_atomic(dfd, "+b", 2, 0644), HEXI_OK,
		       "write to %s", dfd);
		is_int(hexi_write_file_atomic(rel, "+c", 2, 0644), HEXI_OK,
		       "write through a relative link to that link");
		is_int(mode_of(rel, 0), S_IFLNK, "both links are still links");
		close(fd);
		data = NULL;
		is_int(hexi_read_file(fdf, 20, &data, NULL), HEXI_OK,
		       "fdfile read");
		is_str(data, "keep+a+b+c",
		       "each went to the descriptor, appended in order");
		free(data);
		rc = hexi_write_file_atomic(fdl, "x", 1, 0644);
		ok(rc == HEXI_ERR_IO && strstr(hexi_errmsg(rc), "not open"),
		   "a closed descriptor: an error: %s", hexi_errmsg(rc));
		is_int(mode_of(fdl, 0), S_IFLNK, "and the link stays");
		unlink(fdl);
		unlink(rel);
		unlink(fdf);
	}
	/* the old predictable temporary name, planted as a link: unused */
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", reg, (long)getpid());
	if (symlink(victim, tmp) != 0)
		tap_bail("symlink failed");
	is_int(hexi_write_file_atomic(reg, "x", 1, 0644), HEXI_OK,
	       "write with a planted PATH.tmp.PID link");
	data = NULL;
	is_int(hexi_read_file(victim, 10, &data, NULL), HEXI_OK, "victim read");
	is_str(data, "keep", "planted temporary name not written through");
	free(data);
	unlink(tmp);
	unlink(link);
	/* a name of 250 bytes: its temporary name is cut to stay within
	 * NAME_MAX (it was the name plus 21 bytes: "File name too long") */
	{
		char longp[700], base[251];
		memset(base, 'a', 245);
		snprintf(base + 245, 6, ".json");
		snprintf(longp, sizeof(longp), "%s/%s", dir, base);
		rc = hexi_write_file_atomic(longp, "{}\n", 3, 0644);
		is_int(rc, HEXI_OK, "a 250-byte file name is written: %s",
		       rc ? hexi_errmsg(rc) : "ok");
		is_int(mode_of(longp, 0), S_IFREG, "and is a regular file");
		unlink(longp);
	}
	/* another user's link to a character device is replaced, not
	 * written through (a link planted in a shared directory); root's
	 * and the caller's own (/dev/stdout) are followed */
	if (geteuid() == 0 && mknod(null, S_IFCHR | 0666, makedev(1, 3)) == 0) {
		if (symlink(null, link) != 0 || lchown(link, 65534, 65534) != 0)
			tap_bail("symlink/lchown failed");
		rc = hexi_write_file_atomic(link, "{}\n", 3, 0644);
		is_int(rc, HEXI_OK, "write over uid 65534's link to a device");
		is_int(mode_of(link, 0), S_IFREG,
		       "that link was replaced by a file, not followed");
		is_int(mode_of(null, 0), S_IFCHR, "the device is untouched");
		unlink(link);
		if (symlink(null, link) != 0)
			tap_bail("symlink failed");
		is_int(hexi_write_file_atomic(link, "{}\n", 3, 0644), HEXI_OK,
		       "write over our own link to a device");
		is_int(mode_of(link, 0), S_IFLNK,
		       "our own link is followed (written in place)");
		unlink(link);
		unlink(null);
	} else
		tap_diag("not root: another user's link to a device not "
			 "tested (needs mknod, lchown)");
	unlink(victim);
	unlink(reg);
	rmdir(sub);
	unlink(fifo);
}

static void test_create_unique(const char *dir)
{
	char prefix[256], a[300], b[300];
	int fa = -1, fb = -1;

	snprintf(prefix, sizeof(prefix), "%s/u.", dir);
	is_int(hexi_create_unique(prefix, ".json", 0600, a, sizeof(a), &fa),
	       HEXI_OK, "unique name 1");
	is_int(hexi_create_unique(prefix, ".json", 0600, b, sizeof(b), &fb),
	       HEXI_OK, "unique name 2");
	ok(strcmp(a, b) != 0 && strlen(a) == strlen(prefix) + 16 + 5,
	   "two different names of 16 hex digits: %s %s", a, b);
	if (fa >= 0)
		close(fa);
	if (fb >= 0)
		close(fb);
	unlink(b);
	is_int(hexi_create_unique(prefix, ".json", 0600, b, 20, &fb),
	       HEXI_ERR_RANGE, "too small a buffer refused");
	unlink(a);
}

/* FNV-1a is a format contract (plan hash, hand-off checksum, init seeds):
 * the published test vectors, and a plan-like text, pinned. */
static void test_fnv1a(void)
{
	static const struct {
		const char *in;
		uint64_t want;
	} v[] = {
	    {"", 0xcbf29ce484222325ull},
	    {"a", 0xaf63dc4c8601ec8cull},
	    {"foobar", 0x85944171f73967e8ull},
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		ok(hexi_fnv1a64(v[i].in, strlen(v[i].in)) == v[i].want,
		   "FNV-1a64('%s') = %016llx", v[i].in,
		   (unsigned long long)v[i].want);
	ok(hexi_fnv1a64("a\0b", 3) != hexi_fnv1a64("a", 1),
	   "FNV-1a64 hashes bytes, NUL included");
}

static void test_hostile_files(void)
{
	char dir[] = "/tmp/hexi-test-XXXXXX";
	char cmd[300];

	if (mkdtemp(dir) == NULL)
		tap_bail("mkdtemp failed");
	test_read_special(dir);
	test_read_flip(dir);
	test_write_special(dir);
	test_create_unique(dir);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		tap_diag("could not remove %s", dir);
}

int main(void)
{
	test_table();
	test_messages();
	test_error_macros();
	test_parse_long();
	test_parse_double();
	test_strings();
	test_files();
	test_hostile_files();
	test_fnv1a();
	return tap_done();
}
