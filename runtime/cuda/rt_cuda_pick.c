/*
 * rt_cuda_pick.c - which GPU a task uses, from CUDA_VISIBLE_DEVICES and its
 * local rank.  No CUDA call, so it is built and tested without a GPU.
 */
#include "config.h"

#include <ctype.h>
#include <string.h>

#include "rt_cuda.h"

#define MAX_VISIBLE 64
#define MAX_ENTRY   96
#define MAX_TEXT    4096

/* One entry: a non-negative integer (no sign, <= 4 digits) or a UUID-like
 * token "GPU-..." / "MIG-..." of letters, digits, '-' and '/' (MIG ids look
 * like "MIG-GPU-<uuid>/1/0"). */
static int entry_ok(const char *s, size_t len)
{
	size_t i = 0;

	if (len == 0 || len > MAX_ENTRY)
		return 0;
	if (len > 4 &&
	    (strncmp(s, "GPU-", 4) == 0 || strncmp(s, "MIG-", 4) == 0)) {
		for (i = 4; i < len; i++)
			if (!isalnum((unsigned char)s[i]) && s[i] != '-' &&
			    s[i] != '/')
				return 0;
		return 1;
	}
	if (len > 4)
		return 0;
	for (i = 0; i < len; i++)
		if (!isdigit((unsigned char)s[i]))
			return 0;
	return 1;
}

/* Count the entries of a visible list; -1 if malformed. */
static int count_visible(const char *v)
{
	int n = 0;
	const char *p = v;

	if (strlen(v) > MAX_TEXT)
		return -1;
	for (;;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (!entry_ok(p, len) || ++n > MAX_VISIBLE)
			return -1;
		if (end == NULL)
			return n;
		p = end + 1;
	}
}

hexi_rc rt_cuda_pick_device(const char *visible, int local_rank, int local_size,
			    int ndevices, int allow_share, int *ordinal)
{
	if (ordinal == NULL || local_rank < 0 || local_size < 1 ||
	    local_rank >= local_size)
		return hexi_error(HEXI_ERR_INVAL,
				  "GPU choice: local rank %d of %d", local_rank,
				  local_size);
	if (visible != NULL &&
	    (visible[0] == '\0' || strcmp(visible, "-1") == 0 ||
	     strcmp(visible, "NoDevFiles") == 0))
		return hexi_error(HEXI_ERR_NODEV,
				  "CUDA_VISIBLE_DEVICES='%s' hides every GPU",
				  visible);
	if (visible != NULL && count_visible(visible) < 0)
		return hexi_error(HEXI_ERR_PARSE,
				  "CUDA_VISIBLE_DEVICES='%.64s': want a comma "
				  "list of device numbers or GPU UUIDs",
				  visible);
	if (ndevices < 1)
		return hexi_error(HEXI_ERR_NODEV,
				  "no CUDA device visible to local rank %d",
				  local_rank);
	/* CUDA ignores entries after an invalid one, so the runtime's count
	 * may be smaller than the list: trust the runtime.  One device
	 * visible is Slurm's per-task binding (each task sees its own GPU as
	 * ordinal 0) and cannot be told apart from sharing; several devices
	 * but more ranks than devices is a mistake unless sharing is asked. */
	if (!allow_share && ndevices > 1 && local_size > ndevices)
		return hexi_error(HEXI_ERR_NODEV,
				  "%d ranks on this node but only %d GPU%s "
				  "visible to each; give every task its own "
				  "GPU (srun --gpus-per-task=1)",
				  local_size, ndevices,
				  ndevices == 1 ? "" : "s");
	/* With one visible device per task (Slurm binding) every rank uses
	 * ordinal 0; with all visible, rank i takes device i. */
	*ordinal = local_rank % ndevices;
	return HEXI_OK;
}
