/*
 * safeio.c - every file-system access of the checkpoint module that a user
 * could aim somewhere else (hexiscale-ckpt(5), SECURITY):
 *
 *  - directories are opened component by component without following a
 *    symlink unless root or the caller owns it; everything inside a
 *    checkpoint directory is reached relative to that descriptor (openat);
 *  - every input is first opened O_PATH|O_NOFOLLOW and checked with fstat
 *    on that descriptor (a FIFO, device or symlink is refused before
 *    anything opens it: no wait, no driver's open), then read through
 *    /proc/self/fd of that descriptor;
 *  - every output is created O_CREAT|O_EXCL|O_NOFOLLOW inside a private
 *    staging directory (mode 0700) this process created itself;
 *  - a directory-level writer lock (DIR/.hexickpt.lock, an OFD lock held
 *    until the process exits) with the holder's host, pid, job, user and
 *    time makes a second writer fail at once.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckpt_internal.h"

static hexi_rc errno_rc(int e)
{
	switch (e) {
	case ENOENT:
		return HEXI_ERR_NOTFOUND;
	case ENOSPC:
	case EDQUOT:
		return HEXI_ERR_NOSPACE;
	case EACCES:
	case EPERM:
		return HEXI_ERR_PERM;
	default:
		return HEXI_ERR_IO;
	}
}

/* 1: NAME below DFD is a symlink made by root or by ourselves (followed);
 * 0: another user's symlink (*owner set); -1: not a symlink.  The owner
 * and TARGET (the link's text, followed relative to DFD) come from one
 * O_PATH descriptor of the link itself, so a link swapped between the
 * two (renamed away and back: the directory is the user's) cannot pair
 * root's ownership with the user's target.  A second name of a symlink
 * (st_nlink > 1: where fs.protected_hardlinks is 0 anyone may hard-link
 * root's relative link, /etc/os-release -> ../usr/lib/os-release, into a
 * directory of theirs, where its text resolves through their own links)
 * is judged as the directory owner's link (*second set). */
static int trusted_link(int dfd, const char *name, uid_t *owner, char *target,
			size_t cap, int *second)
{
	struct stat st, d;
	ssize_t n = -1;
	int fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);

	*second = 0;
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) == 0 && S_ISLNK(st.st_mode))
		n = readlinkat(fd, "", target, cap - 1);
	close(fd);
	if (n < 0 || (size_t)n >= cap - 1)
		return -1;
	target[n] = '\0';
	*owner = st.st_uid;
	if (st.st_nlink > 1) {
		if (fstat(dfd, &d) != 0)
			return -1;
		*owner = d.st_uid;
		*second = 1;
	}
	return *owner == 0 || *owner == geteuid();
}

/* One path component below DFD as a directory descriptor; creates it
 * (0755) when CREATE and absent. */
static hexi_rc open_component(int dfd, const char *comp, int create,
			      const char *path, int *out)
{
	char target[CK_PATH_MAX];
	uid_t owner = 0;
	int fd, t, second;

	fd = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && create) {
		if (mkdirat(dfd, comp, 0755) < 0 && errno != EEXIST)
			return hexi_error(errno_rc(errno),
					  "%s: cannot create directory '%s': "
					  "%s",
					  path, comp, strerror(errno));
		fd = openat(dfd, comp,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	/* O_NOFOLLOW|O_DIRECTORY on a symlink fails with ELOOP or ENOTDIR. */
	if (fd < 0 && (errno == ELOOP || errno == ENOTDIR)) {
		t = trusted_link(dfd, comp, &owner, target, sizeof(target),
				 &second);
		if (t < 0)
			return hexi_error(HEXI_ERR_INVAL,
					  "%s: '%s' is not a directory", path,
					  comp);
		if (t == 0)
			return hexi_error(HEXI_ERR_PERM,
					  "%s: '%s' is a symlink %s uid "
					  "%u (neither root nor you): "
					  "refusing to follow it",
					  path, comp,
					  second
					      ? "hard-linked into a directory "
						"of"
					      : "owned by",
					  (unsigned)owner);
		fd = openat(dfd, target, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	if (fd < 0)
		return hexi_error(errno_rc(errno), "%s: '%s': %s", path, comp,
				  strerror(errno));
	*out = fd;
	return HEXI_OK;
}

hexi_rc ck_dir_open(const char *path, int create, int *out)
{
	char buf[CK_PATH_MAX], *comp, *save = NULL;
	int fd, next = -1;
	hexi_rc rc = HEXI_OK;

	*out = -1;
	if (path == NULL || path[0] == '\0' || strlen(path) >= sizeof(buf))
		return hexi_error(HEXI_ERR_RANGE, "%.200s: bad directory path",
				  path ? path : "(null)");
	memcpy(buf, path, strlen(path) + 1);
	fd = open(path[0] == '/' ? "/" : ".",
		  O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return hexi_error(HEXI_ERR_IO, "%s: %s", path, strerror(errno));
	for (comp = strtok_r(buf, "/", &save); comp != NULL;
	     comp = strtok_r(NULL, "/", &save)) {
		rc = open_component(fd, comp, create, path, &next);
		close(fd);
		if (rc != HEXI_OK)
			return rc;
		fd = next;
	}
	*out = fd;
	return HEXI_OK;
}

/* NAME below DFD as an O_PATH descriptor, *st its fstat: nothing of the
 * file is opened (a device's open runs its driver: opening /dev/watchdog
 * starts the timer), and a name swapped afterwards changes nothing. */
static int path_fd(int dfd, const char *name, int nofollow, struct stat *st)
{
	int fd =
	    openat(dfd, name, O_PATH | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));

	if (fd >= 0 && fstat(fd, st) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* The regular file that the O_PATH descriptor PFD (closed here) stands
 * for, opened for reading through /proc/self/fd; without /proc, by NAME
 * below DFD again, and then it must be the same file. */
static hexi_rc reopen(int pfd, const struct stat *pst, int dfd,
		      const char *name, int nofollow, const char *what,
		      struct stat *st, int *out)
{
	char proc[64];
	int fd, e;

	if (!S_ISREG(pst->st_mode)) {
		close(pfd);
		return hexi_error(HEXI_ERR_INVAL,
				  "%s: not a regular file (FIFO, device, "
				  "directory or socket: refused)",
				  what);
	}
	if (ck_have_proc_fd() && ck_fd_path(proc, sizeof(proc), pfd, NULL) == 0)
		/* O_NONBLOCK: a lease on the file (F_SETLEASE, its owner's)
		 * makes the open fail at once rather than wait the lease
		 * break time */
		fd = open(proc, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	else
		fd = openat(dfd, name,
			    O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY |
				(nofollow ? O_NOFOLLOW : 0));
	e = errno;
	close(pfd);
	if (fd < 0)
		return hexi_error(errno_rc(e), "%s: cannot open: %s", what,
				  strerror(e));
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode) ||
	    st->st_dev != pst->st_dev || st->st_ino != pst->st_ino) {
		close(fd);
		return hexi_error(HEXI_ERR_INVAL,
				  "%s: changed while it was opened: refused",
				  what);
	}
	/* Regular files never block; reads below are plain. */
	(void)fcntl(fd, F_SETFL, 0);
	*out = fd;
	return HEXI_OK;
}

/* A regular file below DFD (not a link), PFD its O_PATH descriptor: in
 * another user's directory, a second name of a file that user does not
 * own (a hard link, which anyone may make to any file where
 * fs.protected_hardlinks is 0) is refused: root would read that file for
 * the directory's owner. */
static hexi_rc open_plain(int pfd, const struct stat *pst, int dfd,
			  const char *name, const char *what, struct stat *st,
			  int *out)
{
	struct stat d;

	if (S_ISREG(pst->st_mode) && pst->st_nlink > 1 && fstat(dfd, &d) == 0 &&
	    d.st_uid != geteuid() && d.st_uid != pst->st_uid) {
		close(pfd);
		return hexi_error(HEXI_ERR_PERM,
				  "%s: a hard link to a file of uid %u in a "
				  "directory of uid %u: refusing to read it",
				  what, (unsigned)pst->st_uid,
				  (unsigned)d.st_uid);
	}
	return reopen(pfd, pst, dfd, name, 1, what, st, out);
}

hexi_rc ck_open_at(int dfd, const char *name, const char *what, int *out,
		   struct stat *st)
{
	struct stat pst;
	int pfd = path_fd(dfd, name, 1, &pst), e = errno;

	*out = -1;
	if (pfd < 0)
		return hexi_error(errno_rc(e), "%s: cannot open: %s", what,
				  strerror(e));
	if (S_ISLNK(pst.st_mode)) {
		close(pfd);
		return hexi_error(errno_rc(ELOOP),
				  "%s: cannot open: %s (a symlink: refused)",
				  what, strerror(ELOOP));
	}
	return open_plain(pfd, &pst, dfd, name, what, st, out);
}

/* An input that is not a checkpoint (Hugging Face model files): a symlink
 * is followed where root or the caller made it, or where the file it
 * leads to belongs to the link's owner (the Hugging Face cache links
 * snapshots/REV/NAME to ../../blobs/HASH of the same user), judged by
 * fstat of an O_PATH descriptor of what it leads to, before anything is
 * opened, so a link swapped meanwhile changes nothing.  Another user's
 * link to a file that user does not own (root's or a third user's) is
 * refused: root would read it for them. */
hexi_rc ck_open_in(int dfd, const char *name, const char *what, int *out,
		   struct stat *st)
{
	char target[CK_PATH_MAX];
	struct stat pst;
	uid_t owner = 0;
	int pfd, e, t, second;

	*out = -1;
	if ((pfd = path_fd(dfd, name, 1, &pst)) < 0) {
		e = errno;
		return hexi_error(errno_rc(e), "%s: cannot open: %s", what,
				  strerror(e));
	}
	if (!S_ISLNK(pst.st_mode))
		return open_plain(pfd, &pst, dfd, name, what, st, out);
	close(pfd);
	if ((t = trusted_link(dfd, name, &owner, target, sizeof(target),
			      &second)) < 0)
		return hexi_error(HEXI_ERR_INVAL,
				  "%s: changed while it was opened: refused",
				  what);
	if ((pfd = path_fd(dfd, target, 0, &pst)) < 0) {
		e = errno;
		return hexi_error(errno_rc(e),
				  "%s: cannot open (a symlink): %s", what,
				  strerror(e));
	}
	if (t == 0 && S_ISREG(pst.st_mode) && pst.st_uid != owner) {
		close(pfd);
		if (second)
			return hexi_error(HEXI_ERR_PERM,
					  "%s: a symlink hard-linked into a "
					  "directory of uid %u, to a file of "
					  "uid %u (not the directory owner's): "
					  "refusing to follow it",
					  what, (unsigned)owner,
					  (unsigned)pst.st_uid);
		return hexi_error(HEXI_ERR_PERM,
				  "%s: a symlink owned by uid %u to a file of "
				  "uid %u (neither root's nor your link, and "
				  "not its owner's file): refusing to follow "
				  "it",
				  what, (unsigned)owner, (unsigned)pst.st_uid);
	}
	return reopen(pfd, &pst, dfd, target, 0, what, st, out);
}

static hexi_rc read_whole(int dfd, const char *name, size_t max,
			  const char *what, int input, char **out, size_t *len)
{
	struct stat st;
	char *buf = NULL;
	size_t got = 0;
	ssize_t n;
	int fd;
	hexi_rc rc;

	*out = NULL;
	rc = input ? ck_open_in(dfd, name, what, &fd, &st)
		   : ck_open_at(dfd, name, what, &fd, &st);
	if (rc != HEXI_OK)
		return rc;
	if ((uint64_t)st.st_size > max) {
		rc = hexi_error(HEXI_ERR_RANGE, "%s: larger than %zu bytes",
				what, max);
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (buf == NULL) {
		rc = hexi_error(HEXI_ERR_NOMEM, "%s: read buffer", what);
		goto out;
	}
	while (got < (size_t)st.st_size &&
	       (n = read(fd, buf + got, (size_t)st.st_size - got)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = hexi_error(HEXI_ERR_IO, "%s: read: %s", what,
					strerror(errno));
			goto out;
		}
		got += (size_t)n;
	}
	buf[got] = '\0';
	*out = buf;
	*len = got;
	buf = NULL;
	rc = HEXI_OK;
out:
	free(buf);
	close(fd);
	return rc;
}

hexi_rc ck_read_at(int dfd, const char *name, size_t max, const char *what,
		   char **out, size_t *len)
{
	return read_whole(dfd, name, max, what, 0, out, len);
}

hexi_rc ck_read_in(int dfd, const char *name, size_t max, const char *what,
		   char **out, size_t *len)
{
	return read_whole(dfd, name, max, what, 1, out, len);
}

/* With pread, never through a mapping: a page of a mapping past a
 * truncation is a SIGBUS, and the file's owner (or anyone who may write
 * it) can truncate it while we hash; with pread that is a short read,
 * i.e. a size the caller finds wrong.  The mapping no longer paid (DECISIONS
 * 64 measured the opposite on a busier machine): a 416 MB rank file saved
 * in 1.51-1.58 s CPU with pread against 1.65-2.29 s mapped, verified warm
 * in 0.46-0.51 s against 0.44-0.46 s, cold in 0.35-0.76 s wall against
 * 0.65-0.90 s (2-core VM, load 1.6-2.8). */
hexi_rc ck_hash_fd(int fd, const char *what, uint64_t *bytes, uint64_t *xxh)
{
	XXH64_state_t *s = XXH64_createState();
	char *buf = malloc(CK_IO_BLOCK_BYTES);
	uint64_t total = 0;
	ssize_t n;
	hexi_rc rc = HEXI_OK;

	if (s == NULL || buf == NULL) {
		rc = hexi_error(HEXI_ERR_NOMEM, "%s: hash buffer", what);
		goto out;
	}
	XXH64_reset(s, 0);
	/* A cold file: large sequential reads ahead of the hash. */
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	for (;;) {
		n = pread(fd, buf, CK_IO_BLOCK_BYTES, (off_t)total);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = hexi_error(HEXI_ERR_IO, "%s: read: %s", what,
					strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		XXH64_update(s, buf, (size_t)n);
		total += (uint64_t)n;
	}
	*bytes = total;
	*xxh = XXH64_digest(s);
out:
	free(buf);
	if (s != NULL)
		XXH64_freeState(s);
	return rc;
}

int ck_fd_path(char *buf, size_t cap, int fd, const char *name)
{
	int n = name ? snprintf(buf, cap, "/proc/self/fd/%d/%s", fd, name)
		     : snprintf(buf, cap, "/proc/self/fd/%d", fd);

	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int ck_have_proc_fd(void)
{
	static int have = -1;
	struct stat st;

	if (have < 0)
		have = stat("/proc/self/fd", &st) == 0 && S_ISDIR(st.st_mode);
	return have;
}

hexi_rc ck_fsync_fd(int fd, const char *what)
{
	if (fsync(fd) < 0 && errno != EINVAL)
		return hexi_error(
		    errno == ENOSPC ? HEXI_ERR_NOSPACE : HEXI_ERR_IO,
		    "%s: fsync failed: %s", what, strerror(errno));
	return HEXI_OK;
}

/* ---- atomic small files inside a directory we hold ---------------------
 */

void ck_random_name(char *buf, size_t n)
{
	static const char al[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char r[32];
	size_t i;

	if (n > sizeof(r))
		n = sizeof(r);
	if (getrandom(r, n, 0) != (ssize_t)n) {
		uint64_t x = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^
			     (uint64_t)time(NULL) ^ (uint64_t)clock();
		for (i = 0; i < n; i++, x = x * 6364136223846793005ull + 1)
			r[i] = (unsigned char)(x >> 33);
	}
	for (i = 0; i < n; i++)
		buf[i] = al[r[i] % (sizeof(al) - 1)];
	buf[n] = '\0';
}

hexi_rc ck_write_at_atomic_fn(int dfd, const char *name, const char *what,
			      ck_fill_fn fill, void *arg)
{
	char tmp[HEXI_CKPT_NAME_MAX + 40], sfx[12];
	int fd, e;
	hexi_rc rc;

	ck_random_name(sfx, 10);
	snprintf(tmp, sizeof(tmp), ".%.64s.tmp.%s", name, sfx);
	fd = openat(dfd, tmp,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return hexi_error(errno_rc(errno), "%s: cannot create: %s",
				  what, strerror(errno));
	rc = fill(fd, what, arg);
	if (rc == HEXI_OK)
		rc = ck_fsync_fd(fd, what);
	if (close(fd) < 0 && rc == HEXI_OK)
		rc = hexi_error(errno_rc(errno), "%s: close: %s", what,
				strerror(errno));
	/* rename replaces the directory entry: a planted symlink or FIFO named
	 * NAME is replaced, never followed. */
	if (rc == HEXI_OK && renameat(dfd, tmp, dfd, name) < 0) {
		e = errno;
		rc = hexi_error(errno_rc(e), "%s: rename: %s", what,
				strerror(e));
	}
	if (rc != HEXI_OK)
		unlinkat(dfd, tmp, 0);
	return rc == HEXI_OK ? ck_fsync_fd(dfd, what) : rc;
}

typedef struct text_arg {
	const char *text;
	size_t len;
} text_arg;

static hexi_rc fill_text(int fd, const char *what, void *arg)
{
	const text_arg *t = arg;
	size_t off = 0;
	ssize_t n;

	while (off < t->len) {
		n = write(fd, t->text + off, t->len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return hexi_error(errno_rc(errno), "%s: write: %s",
					  what, strerror(errno));
		off += (size_t)n;
	}
	return HEXI_OK;
}

hexi_rc ck_write_at_atomic(int dfd, const char *name, const char *text,
			   size_t len, const char *what)
{
	text_arg t = {text, len};

	return ck_write_at_atomic_fn(dfd, name, what, fill_text, &t);
}

/* ---- staging directories ----------------------------------------------- */

int ck_is_step_name(const char *s, long *step)
{
	size_t i;

	if (strncmp(s, "step-", 5) != 0 || strlen(s) != 13)
		return 0;
	for (i = 5; i < 13; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	*step = strtol(s + 5, NULL, 10);
	return 1;
}

int ck_is_stage_name(const char *s)
{
	long step;
	char sn[16];

	if (s[0] != '.' || strlen(s) != 1 + 13 + 1 + CK_STAGE_RAND)
		return 0;
	memcpy(sn, s + 1, 13);
	sn[13] = '\0';
	return ck_is_step_name(sn, &step) && s[14] == '.';
}

hexi_rc ck_stage_create(int dfd, int64_t step, const char *dir, char *name,
			size_t cap)
{
	char sfx[CK_STAGE_RAND + 1];
	int tries;

	if (cap < CK_STAGE_NAME_MAX)
		return hexi_error(HEXI_ERR_RANGE, "stage name buffer");
	for (tries = 0; tries < 100; tries++) {
		ck_random_name(sfx, CK_STAGE_RAND);
		snprintf(name, cap, ".step-%08lld.%s", (long long)step, sfx);
		if (mkdirat(dfd, name, 0700) == 0)
			return HEXI_OK;
		if (errno != EEXIST)
			return hexi_error(errno_rc(errno),
					  "%s: cannot create a staging "
					  "directory: %s",
					  dir, strerror(errno));
	}
	return hexi_error(HEXI_ERR_IO, "%s: no free staging directory name",
			  dir);
}

hexi_rc ck_stage_open(int dfd, const char *name, const char *dir, int *out)
{
	struct stat st;
	int fd;

	*out = -1;
	if (!ck_is_stage_name(name))
		return hexi_error(HEXI_ERR_INVAL,
				  "%s: '%.80s' is not a staging directory name",
				  dir, name);
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return hexi_error(errno_rc(errno), "%s/%s: %s", dir, name,
				  strerror(errno));
	/* Only a directory this user created (mode 0700) is ours: nobody else
	 * can have placed anything in it. */
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid() ||
	    (st.st_mode & 077) != 0) {
		close(fd);
		return hexi_error(HEXI_ERR_PERM,
				  "%s/%s: staging directory not owned by you "
				  "with mode 0700: refused",
				  dir, name);
	}
	*out = fd;
	return HEXI_OK;
}

/* Remove the regular files of directory NAME below DFD, then NAME.  Only a
 * directory owned by us; nothing is followed. */
hexi_rc ck_dir_remove(int dfd, const char *name)
{
	struct stat st;
	struct dirent *e;
	DIR *d;
	int fd =
	    openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT ? HEXI_OK
				       : hexi_error(errno_rc(errno), "%s: %s",
						    name, strerror(errno));
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid()) {
		close(fd);
		return hexi_error(HEXI_ERR_PERM,
				  "%s: not owned by you: not removed", name);
	}
	d = fdopendir(fd);
	if (d == NULL) {
		close(fd);
		return hexi_error(HEXI_ERR_IO, "%s: %s", name, strerror(errno));
	}
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			(void)unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return hexi_error(errno_rc(errno), "%s: cannot remove: %s",
				  name, strerror(errno));
	return HEXI_OK;
}

/* With the writer lock held no other save of this directory runs: staging
 * directories of ours are leftovers of killed saves. */
void ck_stage_cleanup(int dfd)
{
	int fd = dup(dfd);
	struct stat st;
	struct dirent *e;
	DIR *d = fd < 0 ? NULL : fdopendir(fd);

	if (d == NULL) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d)) != NULL)
		if (ck_is_stage_name(e->d_name) &&
		    fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
		    ck_dir_remove(dfd, e->d_name) != HEXI_OK)
			hexi_error_clear();
	closedir(d);
}

/* ---- the directory writer lock ----------------------------------------- */

#define CK_MAX_LOCKS 16

static struct held_lock {
	dev_t dev;
	ino_t ino;
	int fd;
} held[CK_MAX_LOCKS];
static int nheld;

static void owner_text(char *buf, size_t cap)
{
	char host[256] = "?", tbuf[32] = "?";
	const char *job = getenv("SLURM_JOB_ID");
	struct passwd *pw = getpwuid(geteuid());
	time_t now = time(NULL);
	struct tm tm;

	gethostname(host, sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	if (gmtime_r(&now, &tm) != NULL)
		strftime(tbuf, sizeof(tbuf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(buf, cap, "host=%s pid=%ld job=%s user=%s uid=%u time=%s\n",
		 host, (long)getpid(),
		 job && hexi_is_printable(job) ? job : "-",
		 pw && hexi_is_printable(pw->pw_name) ? pw->pw_name : "?",
		 (unsigned)geteuid(), tbuf);
}

/* The holder's line from the lock file (printable, one line). */
static void read_holder(int fd, char *buf, size_t cap)
{
	ssize_t n = pread(fd, buf, cap - 1, 0);
	size_t i;

	if (n <= 0) {
		snprintf(buf, cap, "(no owner information)");
		return;
	}
	buf[n] = '\0';
	for (i = 0; buf[i] != '\0'; i++)
		if (buf[i] == '\n' || (unsigned char)buf[i] < 32 ||
		    (unsigned char)buf[i] > 126) {
			buf[i] = buf[i] == '\n' ? '\0' : '?';
			if (buf[i] == '\0')
				break;
		}
}

/* Without working locks: a holder on this host whose pid is alive wins. */
static int holder_alive(const char *text)
{
	char host[256] = "", mine[256] = "";
	long pid = 0;

	if (sscanf(text, "host=%255s pid=%ld", host, &pid) != 2 || pid <= 0)
		return 0;
	gethostname(mine, sizeof(mine) - 1);
	if (strcmp(host, mine) != 0 || pid == (long)getpid())
		return 0;
	return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

/* errno values of F_OFD_SETLK that mean "this file system has no such
 * locks"; anything else (EBADF above all: a descriptor not open for
 * writing) is an error, never a reason to go on unlocked. */
static int locks_unsupported(int e)
{
	return e == EINVAL || e == ENOLCK || e == EOPNOTSUPP || e == ENOSYS;
}

/* Take the writer lock on FD.  HEXI_OK with *locked 1: taken; HEXI_OK
 * with *locked 0: the file system has no locks and no live holder on this
 * host is known (a warning is logged). */
static hexi_rc lock_file(int fd, const char *dir, int *locked)
{
	struct flock fl;
	char who[512];
	int e;

	*locked = 0;
	memset(&fl, 0, sizeof(fl));
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	if (fcntl(fd, F_OFD_SETLK, &fl) == 0) {
		*locked = 1;
		return HEXI_OK;
	}
	e = errno; /* read_holder and holder_alive overwrite errno */
	read_holder(fd, who, sizeof(who));
	/* A conflict is a conflict: never mistaken for "no locking here". */
	if (e == EAGAIN || e == EACCES || e == EWOULDBLOCK)
		return hexi_error(HEXI_ERR_PERM,
				  "%s: another writer holds the checkpoint "
				  "directory (%s)",
				  dir, who);
	if (!locks_unsupported(e))
		return hexi_error(errno_rc(e),
				  "%s/%s: cannot lock: %s (holder: %s)", dir,
				  CK_LOCK_NAME, strerror(e), who);
	if (holder_alive(who))
		return hexi_error(HEXI_ERR_PERM,
				  "%s: file locks are not supported here (%s) "
				  "and a live process holds the directory "
				  "(%s)",
				  dir, strerror(e), who);
	hexi_log(HEXI_LOG_WARN,
		 "%s: file locks not supported (%s); one writer per "
		 "directory is not enforced across hosts",
		 dir, strerror(e));
	return HEXI_OK;
}

/* DIR/.hexickpt.lock opened for writing.  Another user's lock file is
 * opened read-only only to quote its holder in the refusal; one of ours
 * that we cannot write is refused (a read-only descriptor cannot hold a
 * write lock: going on would run unlocked next to a live save). */
static hexi_rc open_lock_file(int dfd, const char *dir, int *out)
{
	struct stat st;
	char who[512];
	int fd, e;

	*out = -1;
	fd = openat(dfd, CK_LOCK_NAME,
		    O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC |
			O_NOCTTY,
		    0644);
	e = errno;
	if (fd < 0 && (e == EACCES || e == EPERM))
		fd = openat(dfd, CK_LOCK_NAME,
			    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) /* the first error: the retry only serves the refusal */
		return hexi_error(errno_rc(e), "%s/%s: cannot open: %s", dir,
				  CK_LOCK_NAME, strerror(e));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
	    st.st_uid != geteuid()) {
		read_holder(fd, who, sizeof(who));
		close(fd);
		return hexi_error(HEXI_ERR_PERM,
				  "%s/%s: lock file of uid %u or not a plain "
				  "file (%s): another user writes here; "
				  "refusing",
				  dir, CK_LOCK_NAME, (unsigned)st.st_uid, who);
	}
	if ((fcntl(fd, F_GETFL) & O_ACCMODE) != O_RDWR) {
		close(fd);
		return hexi_error(HEXI_ERR_PERM,
				  "%s/%s: your lock file is not writable by "
				  "you (mode %04o: %s), so the writer lock "
				  "cannot be taken; refusing to save without "
				  "it (chmod u+w the file, or remove it when "
				  "no save of this directory runs)",
				  dir, CK_LOCK_NAME,
				  (unsigned)(st.st_mode & 07777), strerror(e));
	}
	*out = fd;
	return HEXI_OK;
}

hexi_rc ck_lock_dir(int dfd, const char *dir, int *fresh)
{
	struct stat ds;
	char who[512];
	int fd, i, locked = 0;
	hexi_rc rc;

	if (fstat(dfd, &ds) < 0)
		return hexi_error(HEXI_ERR_IO, "%s: %s", dir, strerror(errno));
	*fresh = 0;
	for (i = 0; i < nheld; i++)
		if (held[i].dev == ds.st_dev && held[i].ino == ds.st_ino)
			return HEXI_OK;
	if (nheld == CK_MAX_LOCKS)
		return hexi_error(HEXI_ERR_RANGE,
				  "%s: this process already holds %d "
				  "checkpoint directory locks",
				  dir, CK_MAX_LOCKS);
	if ((rc = open_lock_file(dfd, dir, &fd)) != HEXI_OK)
		return rc;
	if ((rc = lock_file(fd, dir, &locked)) != HEXI_OK) {
		close(fd);
		return rc;
	}
	owner_text(who, sizeof(who));
	if (ftruncate(fd, 0) < 0 ||
	    pwrite(fd, who, strlen(who), 0) != (ssize_t)strlen(who))
		hexi_log(HEXI_LOG_WARN, "%s/%s: cannot record the owner: %s",
			 dir, CK_LOCK_NAME, strerror(errno));
	held[nheld].dev = ds.st_dev;
	held[nheld].ino = ds.st_ino;
	held[nheld].fd = fd;
	nheld++;
	/* Without a real lock another live save may run here: its staging
	 * directory cannot be told from a dead one's, so no cleanup. */
	*fresh = locked;
	return HEXI_OK;
}
