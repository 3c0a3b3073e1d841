/* util.c - clock and whole-file I/O. */
#include "config.h"

#include "hexi_common.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

hexi_rc hexi_read_file(const char *path, size_t max_bytes, char **out,
		       size_t *len)
{
	hexi_rc rv = HEXI_ERR_IO;
	struct stat st;
	char *buf = NULL;
	size_t got = 0;
	int fd = -1;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rv = hexi_error(errno_rc(errno), "%s: cannot open: %s", path,
				strerror(errno));
		goto out;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rv = hexi_error(HEXI_ERR_IO, "%s: not a regular file", path);
		goto out;
	}
	if ((size_t)st.st_size > max_bytes) {
		rv = hexi_error(HEXI_ERR_RANGE,
				"%s: %lld bytes exceeds the limit of %zu", path,
				(long long)st.st_size, max_bytes);
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (buf == NULL) {
		rv = hexi_error(HEXI_ERR_NOMEM, "%s: no memory to read", path);
		goto out;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rv = hexi_error(HEXI_ERR_IO, "%s: read failed: %s",
					path, n < 0 ? strerror(errno) : "EOF");
			goto out;
		}
		got += (size_t)n;
	}
	buf[got] = '\0';
	*out = buf;
	buf = NULL;
	if (len != NULL)
		*len = got;
	rv = HEXI_OK;
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	return rv;
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

hexi_rc hexi_write_file_atomic(const char *path, const void *data, size_t len,
			       int mode)
{
	hexi_rc rv = HEXI_ERR_IO;
	char tmp[4096];
	int fd = -1;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >=
	    (int)sizeof(tmp))
		return hexi_error(HEXI_ERR_RANGE, "%.200s: path too long",
				  path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		  mode);
	if (fd < 0) {
		rv = hexi_error(errno_rc(errno), "%s: cannot create: %s", tmp,
				strerror(errno));
		goto out;
	}
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
