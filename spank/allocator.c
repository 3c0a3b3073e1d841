/*
 * allocator.c - sbatch and salloc: there is no job yet, so only check what
 * the user asked for (options, environment twins, a plan file's access and
 * size) and refuse the submission on any error.  The plan itself is made
 * by srun for each step, once the allocation exists.
 */
#include "config.h"

#include "hx_spank.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HX_PLAN_FILE_MAX (16u << 20)

/* Open the user's plan file with the caller's own privileges (sbatch and
 * srun run as the user) and check it is a regular file of sane size. */
static int check_plan_file(const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

	if (fd < 0) {
		hx_err("plan file %s: cannot open: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		hx_err("plan file %s: not a regular file", path);
		close(fd);
		return -1;
	}
	close(fd);
	if ((unsigned long long)st.st_size > HX_PLAN_FILE_MAX) {
		hx_err("plan file %s: %lld bytes, the limit is %u", path,
		       (long long)st.st_size, HX_PLAN_FILE_MAX);
		return -1;
	}
	return 0;
}

int hx_check_settings(hx_settings *s)
{
	if (hx_settings_resolve(s, &hx_g_conf,
				(const char *const *)hx_g_cmdline) != HEXI_OK) {
		hx_err("%s", hexi_errmsg(HEXI_ERR_INVAL));
		return -1;
	}
	if (s->mode == HX_MODE_FILE && check_plan_file(s->plan_file) != 0)
		return -1;
	return 0;
}

int hx_allocator_post_opt(spank_t sp)
{
	hx_settings s;

	(void)sp;
	return hx_check_settings(&s);
}
