/* fuzz_profile.c - libFuzzer target: the hexiprof profile parser
 * (hexi_catalog_apply_profiles) on any bytes: a refusal says why and
 * leaves the catalog as it was.  Profiles are read by path, so each input is
 * written to one memfd, read back through /proc/self/fd/N (a regular file). */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_target.h"
#include "hexi_sched.h"

static int memfd = -1;
static char path[64];
static hexi_catalog *base;

static int setup(void)
{
	if (memfd >= 0)
		return 0;
	memfd = memfd_create("hexi-fuzz-profile", MFD_CLOEXEC);
	if (memfd < 0 || hexi_catalog_builtin(&base) != HEXI_OK)
		return -1;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hexi_catalog *cat = NULL;
	hexi_rc rc;

	if (setup() != 0 || ftruncate(memfd, 0) != 0 ||
	    pwrite(memfd, data, size, 0) != (ssize_t)size)
		return 0;
	if (hexi_catalog_clone(base, &cat) != HEXI_OK)
		abort();
	hexi_error_clear();
	rc = hexi_catalog_apply_profiles(cat, path);
	fuzz_require_own_message(rc);
	if (rc != HEXI_OK) {
		/* a refused profile leaves the catalog as it was */
		if (hexi_catalog_count(cat) != hexi_catalog_count(base))
			abort();
		for (size_t i = 0; i < hexi_catalog_count(base); i++)
			if (memcmp(hexi_catalog_at(cat, i),
				   hexi_catalog_at(base, i),
				   sizeof(hexi_gpu_type)) != 0)
				abort();
	}
	hexi_catalog_destroy(cat);
	return 0;
}
