/*
 * test_devsel.c - rt_cuda_pick_device: which GPU a task takes from
 * CUDA_VISIBLE_DEVICES and its local rank, with a table of bad lists.
 * Needs no GPU.
 */
#include "config.h"

#include <string.h>

#include "rt_cuda.h"
#include "tap.h"

int main(void)
{
	static const struct {
		const char *visible;
		int local_rank, local_size, ndev, share, want;
	} good[] = {
	    {NULL, 0, 1, 1, 0, 0},    /* unset, one GPU */
	    {NULL, 2, 4, 4, 0, 2},    /* all visible: rank i -> GPU i */
	    {"0", 2, 3, 1, 0, 0},     /* Slurm per-task binding */
	    {"3", 0, 1, 1, 0, 0},     /* renumbered to 0 */
	    {"0,1,2", 1, 3, 3, 0, 1}, /* node-wide list */
	    {"2,0", 1, 2, 2, 0, 1},
	    {"0,1", 3, 4, 2, 1, 1}, /* sharing allowed: modulo */
	    {"GPU-8f2c1a7e-1b2c-4d5e-9f00-0123456789ab", 0, 1, 1, 0, 0},
	    {"MIG-GPU-8f2c1a7e-1b2c-4d5e-9f00-0123456789ab/1/0", 0, 1, 1, 0, 0},
	    {"0,1,2,3", 3, 4, 2, 1, 1}, /* runtime saw fewer: trust it */
	};
	static const struct {
		const char *visible;
		int local_rank, local_size, ndev;
		hexi_rc want;
	} bad[] = {
	    {"", 0, 1, 1, HEXI_ERR_NODEV},
	    {"-1", 0, 1, 1, HEXI_ERR_NODEV},
	    {"NoDevFiles", 0, 1, 1, HEXI_ERR_NODEV},
	    {"0,,1", 0, 1, 2, HEXI_ERR_PARSE},
	    {",0", 0, 1, 1, HEXI_ERR_PARSE},
	    {"0,", 0, 1, 1, HEXI_ERR_PARSE},
	    {" 0", 0, 1, 1, HEXI_ERR_PARSE},
	    {"0 ,1", 0, 1, 2, HEXI_ERR_PARSE},
	    {"+1", 0, 1, 1, HEXI_ERR_PARSE},
	    {"-2", 0, 1, 1, HEXI_ERR_PARSE},
	    {"12345", 0, 1, 1, HEXI_ERR_PARSE},
	    {"abc", 0, 1, 1, HEXI_ERR_PARSE},
	    {"GPU-", 0, 1, 1, HEXI_ERR_PARSE},
	    {"GPU-xyz!", 0, 1, 1, HEXI_ERR_PARSE},
	    {"GPU-ab cd", 0, 1, 1, HEXI_ERR_PARSE},
	    {"0;1", 0, 1, 1, HEXI_ERR_PARSE},
	    {"0", 1, 1, 1, HEXI_ERR_INVAL}, /* rank >= size */
	    {"0", -1, 1, 1, HEXI_ERR_INVAL},
	    {"0", 0, 0, 1, HEXI_ERR_INVAL},
	    {"0", 0, 1, 0, HEXI_ERR_NODEV}, /* runtime sees none */
	    {NULL, 0, 1, 0, HEXI_ERR_NODEV},
	    {"0,1", 2, 3, 2, HEXI_ERR_NODEV}, /* 3 ranks, 2 GPUs */
	};
	char many[400];
	int ord;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ord = -1;
		is_int(rt_cuda_pick_device(good[i].visible, good[i].local_rank,
					   good[i].local_size, good[i].ndev,
					   good[i].share, &ord),
		       HEXI_OK, "visible '%s' rank %d/%d ndev %d accepted",
		       good[i].visible ? good[i].visible : "(unset)",
		       good[i].local_rank, good[i].local_size, good[i].ndev);
		is_int(ord, good[i].want, "  -> ordinal %d", good[i].want);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		hexi_rc rv = rt_cuda_pick_device(
		    bad[i].visible, bad[i].local_rank, bad[i].local_size,
		    bad[i].ndev, 0, &ord);
		is_int(rv, bad[i].want, "visible '%s' rank %d/%d ndev %d: %s",
		       bad[i].visible ? bad[i].visible : "(unset)",
		       bad[i].local_rank, bad[i].local_size, bad[i].ndev,
		       hexi_errmsg(rv));
	}
	/* 65 entries: over the cap */
	many[0] = '\0';
	for (int i = 0; i < 65; i++)
		strcat(many, i ? ",1" : "1");
	is_int(rt_cuda_pick_device(many, 0, 1, 1, 0, &ord), HEXI_ERR_PARSE,
	       "65 entries rejected");
	many[strlen(many) - 2] = '\0';
	is_int(rt_cuda_pick_device(many, 0, 1, 1, 0, &ord), HEXI_OK,
	       "64 entries accepted");
	ok(strstr(hexi_errmsg(rt_cuda_pick_device("", 0, 1, 1, 0, &ord)),
		  "CUDA_VISIBLE_DEVICES") != NULL,
	   "message names CUDA_VISIBLE_DEVICES");
	return tap_done();
}
