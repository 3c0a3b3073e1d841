/*
 * train_keep.c - what follows a committed save on rank 0: the save line's
 * numbers (size of the step directory) and --keep N rotation.
 *
 * Rotation removes only committed checkpoints (hexi_ckpt_list: manifest
 * present) older than the newest N, never the one DIR/latest names, never
 * the one this run resumed from, and never anything uncommitted (a save in
 * progress by another writer).  A step directory is emptied of its plain
 * files through a descriptor opened with O_NOFOLLOW, so a symlink planted
 * in place of it is not followed; one holding a subdirectory is left.
 */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_train.h"

uint64_t rt_train_dir_bytes(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	uint64_t n = 0;

	if (d == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ==
			0 &&
		    S_ISREG(st.st_mode))
			n += (uint64_t)st.st_size;
	}
	closedir(d);
	return n;
}

#if defined(HAVE_HDF5) && defined(HAVE_XXHASH)
#include "hexi_ckpt.h"

/* Empty and remove DIR/NAME; 0 on success. */
static int remove_step(const char *dir, const char *name)
{
	int pfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int fd = -1, bad = 0;
	DIR *d = NULL;
	struct dirent *de;

	if (pfd < 0)
		return -1;
	fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0)
		d = fdopendir(fd);
	if (d == NULL) {
		if (fd >= 0)
			close(fd);
		close(pfd);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		struct stat st;
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) !=
			0 ||
		    S_ISDIR(st.st_mode) ||
		    unlinkat(dirfd(d), de->d_name, 0) != 0)
			bad = 1;
	}
	closedir(d);
	if (!bad && unlinkat(pfd, name, AT_REMOVEDIR) != 0)
		bad = 1;
	close(pfd);
	return bad ? -1 : 0;
}

static void rotate(hexi_trainer *t, const char *dir, const hexi_ckpt_entry *e,
		   int n)
{
	int committed = 0;

	for (int i = n - 1; i >= 0; i--) {
		if (!e[i].committed)
			continue;
		if (++committed <= t->o.keep || e[i].latest ||
		    e[i].step == t->resumed_step || e[i].step == t->step)
			continue;
		if (remove_step(dir, e[i].name) == 0)
			hexi_log(HEXI_LOG_INFO,
				 "--keep %d: removed %s/%s (step %lld)",
				 t->o.keep, dir, e[i].name,
				 (long long)e[i].step);
		else
			hexi_log(HEXI_LOG_WARN,
				 "--keep %d: could not remove %s/%s", t->o.keep,
				 dir, e[i].name);
	}
}

void rt_train_after_save(hexi_trainer *t, const char *dir, double seconds)
{
	hexi_ckpt_entry *e = NULL;
	int n = 0;

	if (t->rt->rank != 0)
		return;
	t->ev.loaded = 0;
	t->ev.step = t->step;
	t->ev.seconds = seconds;
	t->ev.bytes = 0;
	snprintf(t->ev.path, sizeof(t->ev.path), "%s/step-%08d", dir, t->step);
	if (hexi_ckpt_list(dir, &e, &n) != HEXI_OK) {
		hexi_error_clear();
		n = 0;
	}
	for (int i = 0; i < n; i++)
		if (e[i].step == t->step)
			t->ev.bytes = e[i].bytes;
	if (t->ev.bytes == 0)
		t->ev.bytes = rt_train_dir_bytes(t->ev.path);
	t->ev_pending = 1;
	if (t->o.keep > 0)
		rotate(t, dir, e, n);
	free(e);
}

#else

void rt_train_after_save(hexi_trainer *t, const char *dir, double seconds)
{
	(void)t;
	(void)dir;
	(void)seconds;
}

#endif
