/* util.c - clock and whole-file I/O. */
#include "config.h"

#include "hexi_common.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

uint64_t hexi_fnv1a64(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

double hexi_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static hexi_rc errno_rc(int err)
{
	switch (err) {
	case ENOENT:
		return HEXI_ERR_NOTFOUND;
	case EACCES:
	case EPERM:
		return HEXI_ERR_PERM;
	case ENOSPC:
	case EDQUOT:
		return HEXI_ERR_NOSPACE;
	case ENOMEM:
		return HEXI_ERR_NOMEM;
	default:
		return HEXI_ERR_IO;
	}
}

/* Open an input file without ever blocking or opening anything but a
 * regular file: an O_PATH descriptor is checked with fstat (a FIFO, a
 * device, a directory is refused unopened: a FIFO's open can wait, a
 * device's runs its driver), then that same file is opened through
 * /proc/self/fd, so a name flipped to a FIFO between a check and the read
 * cannot be read. */
static hexi_rc open_regular(const char *path, unsigned flags, int *fdp,
			    struct stat *st)
{
	struct stat pst;
	char proc[64];
	int pfd, fd, e;

	/* O_PATH first: fstat before anything opens the file, so a FIFO or
	 * a device (whose open runs its driver) is refused unopened */
	pfd = open(path, O_PATH | O_CLOEXEC |
			     ((flags & HEXI_READ_NOFOLLOW) ? O_NOFOLLOW : 0));
	if (pfd < 0)
		return hexi_error(errno_rc(errno), "%s: cannot open: %s", path,
				  strerror(errno));
	if (fstat(pfd, &pst) != 0) {
		e = errno;
		close(pfd);
		return hexi_error(errno_rc(e), "%s: cannot stat: %s", path,
				  strerror(e));
	}
	if (S_ISLNK(pst.st_mode)) {
		close(pfd);
		return hexi_error(HEXI_ERR_PERM,
				  "%s: is a symbolic link, not followed", path);
	}
	if (!S_ISREG(pst.st_mode)) {
		close(pfd);
		return hexi_error(HEXI_ERR_IO,
				  "%s: not a regular file (%s), refused", path,
				  hexi_file_kind(pst.st_mode));
	}
	/* the file the descriptor holds, not whatever PATH names now;
	 * without /proc, PATH again, which must still be that file */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
	/* O_NONBLOCK: another user's lease (F_SETLEASE) on the file makes
	 * the open fail at once rather than wait its break time */
	fd = open(proc, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		fd = open(path,
			  O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC |
			      ((flags & HEXI_READ_NOFOLLOW) ? O_NOFOLLOW : 0));
	e = errno;
	close(pfd);
	if (fd < 0)
		return hexi_error(errno_rc(e), "%s: cannot open: %s", path,
				  strerror(e));
	if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode) ||
	    st->st_dev != pst.st_dev || st->st_ino != pst.st_ino) {
		close(fd);
		return hexi_error(HEXI_ERR_IO,
				  "%s: changed while it was opened, refused",
				  path);
	}
	*fdp = fd;
	return HEXI_OK;
}

const char *hexi_file_kind(unsigned mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return "regular file";
	case S_IFDIR:
		return "directory";
	case S_IFIFO:
		return "FIFO";
	case S_IFSOCK:
		return "socket";
	case S_IFCHR:
		return "character device";
	case S_IFBLK:
		return "block device";
	case S_IFLNK:
		return "symbolic link";
	default:
		return "unknown file type";
	}
}

/* Read exactly size bytes; a file that shrank meanwhile is an error. */
static hexi_rc read_exact(int fd, const char *path, char *buf, size_t size)
{
	size_t got = 0;

	while (got < size) {
		ssize_t n = read(fd, buf + got, size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return hexi_error(
			    HEXI_ERR_IO, "%s: read failed: %s", path,
			    n < 0 ? strerror(errno) : "file shrank while read");
		got += (size_t)n;
	}
	return HEXI_OK;
}

hexi_rc hexi_read_file_ex(const char *path, size_t max_bytes, unsigned flags,
			  char **out, size_t *len)
{
	hexi_rc rv;
	struct stat st = {0};
	char *buf = NULL;
	size_t size;
	int fd = -1;

	*out = NULL;
	rv = open_regular(path, flags, &fd, &st);
	if (rv != HEXI_OK)
		return rv;
	size = (size_t)st.st_size;
	if (st.st_size < 0 || (unsigned long long)st.st_size > max_bytes) {
		rv = hexi_error(HEXI_ERR_RANGE,
				"%s: %lld bytes exceeds the limit of %zu", path,
				(long long)st.st_size, max_bytes);
		goto out;
	}
	buf = malloc(size + 1);
	if (buf == NULL) {
		rv = hexi_error(HEXI_ERR_NOMEM, "%s: no memory to read", path);
		goto out;
	}
	rv = read_exact(fd, path, buf, size);
	if (rv != HEXI_OK)
		goto out;
	buf[size] = '\0';
	*out = buf;
	buf = NULL;
	if (len != NULL)
		*len = size;
out:
	free(buf);
	close(fd);
	return rv;
}

hexi_rc hexi_read_file(const char *path, size_t max_bytes, char **out,
		       size_t *len)
{
	return hexi_read_file_ex(path, max_bytes, 0, out, len);
}

static hexi_rc write_all(int fd, const char *path, const void *data, size_t len)
{
	const char *p = data;

	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return hexi_error(errno_rc(errno),
					  "%s: write failed: %s", path,
					  strerror(errno));
		p += n;
		len -= (size_t)n;
	}
	return HEXI_OK;
}

static void fsync_parent(const char *path)
{
	char *copy = strdup(path);
	int dfd;

	if (copy == NULL)
		return;
	dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	free(copy);
}

/* 64 unpredictable bits: getrandom, or (never seen on Linux >= 3.17) a
 * mix of clock, pid and a counter so a name is still unique per process. */
static uint64_t name_bits(void)
{
	static unsigned counter;
	uint64_t r = 0;
	struct timespec ts;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) == (ssize_t)sizeof(r))
		return r;
	clock_gettime(CLOCK_REALTIME, &ts);
	r = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^
	    ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_sec ^ ++counter;
	return r;
}

hexi_rc hexi_create_unique(const char *prefix, const char *suffix, int mode,
			   char *path, size_t cap, int *fdp)
{
	*fdp = -1;
	for (int attempt = 0; attempt < 32; attempt++) {
		int n = snprintf(path, cap, "%s%016llx%s", prefix,
				 (unsigned long long)name_bits(), suffix);
		int fd;

		if (n < 0 || (size_t)n >= cap)
			return hexi_error(HEXI_ERR_RANGE,
					  "%.200s: path too long", prefix);
		fd = open(path,
			  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY |
			      O_CLOEXEC,
			  mode);
		if (fd >= 0) {
			*fdp = fd;
			return HEXI_OK;
		}
		if (errno != EEXIST) {
			int e = errno;
			hexi_rc rc =
			    hexi_error(errno_rc(e), "%s: cannot create: %s",
				       path, strerror(e));
			errno = e; /* for a caller that names the target */
			return rc;
		}
	}
	return hexi_error(HEXI_ERR_IO, "%.200s*%s: no free unique name", prefix,
			  suffix);
}

/* Write into an existing character device or FIFO (-o /dev/null,
 * -o /dev/stdout): opened without blocking (a FIFO with no reader is an
 * error, not a hang), checked on the descriptor, never truncated. */
static hexi_rc write_in_place(const char *path, const void *data, size_t len)
{
	struct stat st;
	hexi_rc rv;
	int fd;

	fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 && errno == ENXIO)
		return hexi_error(HEXI_ERR_IO, "%s: FIFO has no reader", path);
	if (fd < 0)
		return hexi_error(errno_rc(errno), "%s: cannot open: %s", path,
				  strerror(errno));
	if (fstat(fd, &st) != 0 ||
	    !(S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
		close(fd);
		return hexi_error(HEXI_ERR_IO,
				  "%s: changed type while opened, refused",
				  path);
	}
	/* a reader exists: from here on writes wait for it as cat(1) does */
	if (S_ISFIFO(st.st_mode))
		(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	rv = write_all(fd, path, data, len);
	if (close(fd) != 0 && rv == HEXI_OK)
		rv = hexi_error(errno_rc(errno), "%s: close failed: %s", path,
				strerror(errno));
	return rv;
}

/* Write to this process's descriptor FD (PATH named it), at its offset,
 * as printing there would: a file redirected with > or >> keeps what the
 * process printed before and after; nothing is truncated or closed. */
static hexi_rc write_fd(int fd, const char *path, const void *data, size_t len)
{
	struct stat st;

	if (fd < 0 || fstat(fd, &st) != 0)
		return hexi_error(HEXI_ERR_IO, "%s: descriptor %d is not open",
				  path, fd);
	if (S_ISDIR(st.st_mode))
		return hexi_error(HEXI_ERR_IO,
				  "%s: descriptor %d is a "
				  "directory",
				  path, fd);
	/* what stdio holds for that descriptor goes first, in order */
	fflush(NULL);
	return write_all(fd, path, data, len);
}

/* How hexi_write_file_atomic treats what is at the target name now. */
typedef enum target_kind {
	TARGET_REPLACE,	 /* nothing, a regular file, a link to one: rename */
	TARGET_IN_PLACE, /* a character device or FIFO (maybe via a link) */
	TARGET_REFUSE,	 /* directory, socket, block device */
	TARGET_FD,	 /* one of this process's descriptors (below) */
} target_kind;

/* The descriptor that NAME spells (/dev/stdout, /dev/stderr, /dev/fd/N,
 * /proc/self/fd/N), or -1. */
static int fd_name(const char *name)
{
	const char *n = NULL;
	char *end;
	long v;

	if (strcmp(name, "/dev/stdout") == 0)
		return 1;
	if (strcmp(name, "/dev/stderr") == 0)
		return 2;
	if (strncmp(name, "/dev/fd/", 8) == 0)
		n = name + 8;
	else if (strncmp(name, "/proc/self/fd/", 14) == 0)
		n = name + 14;
	if (n == NULL || *n < '0' || *n > '9')
		return -1;
	errno = 0;
	v = strtol(n, &end, 10);
	return *end == '\0' && errno == 0 && v <= 1024 ? (int)v : -1;
}

/* PATH names one of this process's open descriptors: itself, or through
 * links of root's or the caller's (ln -s /proc/self/fd/1 out) whose text
 * is such a name.  Writing there means writing to the descriptor: a
 * rename would replace the link (as root, /dev/stdout itself when stdout
 * is redirected to a file) and the redirected file would never see the
 * data. */
int hexi_path_fd(const char *path)
{
	char cur[4096], next[4096];
	int fd = fd_name(path);

	if (fd >= 0 || hexi_strlcpy(cur, path, sizeof(cur)) != HEXI_OK)
		return fd;
	for (int hop = 0; hop < 8; hop++) {
		struct stat st;
		ssize_t n;
		if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode) ||
		    (st.st_uid != 0 && st.st_uid != geteuid()))
			return -1;
		n = readlink(cur, next, sizeof(next) - 1);
		if (n <= 0 || (size_t)n >= sizeof(next) - 1)
			return -1;
		next[n] = '\0';
		if ((fd = fd_name(next)) >= 0)
			return fd;    /* open or not: write_fd says */
		if (next[0] != '/') { /* relative: beside the link */
			const char *slash = strrchr(cur, '/');
			size_t dl = slash ? (size_t)(slash - cur) + 1 : 0;
			if (dl + (size_t)n >= sizeof(cur))
				return -1;
			memmove(cur + dl, next, (size_t)n + 1);
		} else
			memcpy(cur, next, (size_t)n + 1);
	}
	return -1;
}

static target_kind classify_target(const char *path, const char **kind)
{
	struct stat st;

	*kind = "regular file";
	if (hexi_path_fd(path) >= 0)
		return TARGET_FD;
	if (lstat(path, &st) != 0)
		return TARGET_REPLACE;
	/* a link is replaced by rename, never written through, unless it
	 * names a device or FIFO (/dev/stdout -> /proc/self/fd/1 -> pipe)
	 * and is root's or the caller's: another user's link in a shared
	 * directory (n1.json -> /dev/some-device) is replaced, not followed
	 * (the rule of checkpoint paths, hexiscale-ckpt(5)) */
	if (S_ISLNK(st.st_mode) &&
	    ((st.st_uid != 0 && st.st_uid != geteuid()) ||
	     stat(path, &st) != 0))
		return TARGET_REPLACE;
	*kind = hexi_file_kind(st.st_mode);
	if (S_ISREG(st.st_mode))
		return TARGET_REPLACE;
	if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))
		return TARGET_IN_PLACE;
	return TARGET_REFUSE;
}

/* The temporary file beside PATH that the atomic writer renames over it:
 * PATH.tmp.<16 hex>, its name cut so that it stays within NAME_MAX (255)
 * where PATH's own name is longer than 234 bytes.  An error names PATH,
 * not the temporary name, and leaves errno as the failed open set it. */
static hexi_rc create_beside(const char *path, int mode, char *tmp, size_t cap,
			     int *fd)
{
	const char *base = strrchr(path, '/');
	size_t dirlen = base ? (size_t)(base - path) + 1 : 0;
	size_t blen = strlen(path + dirlen);
	char prefix[4096];
	hexi_rc rv;
	int e;

	if ((size_t)snprintf(prefix, sizeof(prefix), "%.*s%.*s.tmp.",
			     (int)dirlen, path, blen > 234 ? 234 : (int)blen,
			     path + dirlen) >= sizeof(prefix))
		return hexi_error(HEXI_ERR_RANGE, "%.200s: path too long",
				  path);
	errno = 0;
	rv = hexi_create_unique(prefix, "", mode, tmp, cap, fd);
	e = errno;
	if (rv != HEXI_OK && rv != HEXI_ERR_RANGE && e != 0 && e != EEXIST) {
		rv = hexi_error(rv, "%s: cannot create: %s", path, strerror(e));
		errno = e;
	}
	return rv;
}

hexi_rc hexi_check_writable(const char *path)
{
	char tmp[4096 + 32];
	const char *kind;
	hexi_rc rv;
	int fd = -1;

	switch (classify_target(path, &kind)) {
	case TARGET_FD:
	case TARGET_IN_PLACE:
		return HEXI_OK;
	case TARGET_REFUSE:
		errno = 0; /* no open failed */
		return hexi_error(HEXI_ERR_IO, "%s: is a %s, not replaced",
				  path, kind);
	case TARGET_REPLACE:
		break;
	}
	if ((rv = create_beside(path, 0600, tmp, sizeof(tmp), &fd)) != HEXI_OK)
		return rv;
	close(fd);
	unlink(tmp);
	return HEXI_OK;
}

hexi_rc hexi_write_file_atomic(const char *path, const void *data, size_t len,
			       int mode)
{
	hexi_rc rv = HEXI_ERR_IO;
	char tmp[4096 + 32];
	const char *kind;
	int fd = -1;

	switch (classify_target(path, &kind)) {
	case TARGET_FD:
		return write_fd(hexi_path_fd(path), path, data, len);
	case TARGET_IN_PLACE:
		return write_in_place(path, data, len);
	case TARGET_REFUSE:
		return hexi_error(HEXI_ERR_IO, "%s: is a %s, not replaced",
				  path, kind);
	case TARGET_REPLACE:
		break;
	}
	if ((rv = create_beside(path, mode, tmp, sizeof(tmp), &fd)) != HEXI_OK)
		return rv;
	rv = write_all(fd, tmp, data, len);
	if (rv != HEXI_OK)
		goto out;
	if (fsync(fd) < 0) {
		rv = hexi_error(errno_rc(errno), "%s: fsync failed: %s", tmp,
				strerror(errno));
		goto out;
	}
	close(fd);
	fd = -1;
	if (rename(tmp, path) < 0) {
		rv = hexi_error(errno_rc(errno), "%s: rename failed: %s", path,
				strerror(errno));
		goto out;
	}
	fsync_parent(path);
	rv = HEXI_OK;
out:
	if (fd >= 0)
		close(fd);
	if (rv != HEXI_OK)
		unlink(tmp);
	return rv;
}
