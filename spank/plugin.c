/*
 * plugin.c - hexiscale.so entry points: one dispatch on spank_context() to
 * the file of each context (allocator.c, local.c, remote.c).
 *
 * Failure policy: errors in sbatch/salloc/srun stop the submission or the
 * step before anything runs.  In slurmstepd an error before task_init would
 * drain the node and report the job COMPLETED (SLURM-FACTS), so there every
 * callback but task_init returns 0 and task_init fails only the task.
 */
#include "config.h"

#include "hx_spank.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

SPANK_PLUGIN(hexiscale, 1);

static void log_sink(hexi_log_level level, const char *msg, void *arg)
{
	(void)arg;
	switch (level) {
	case HEXI_LOG_ERROR:
		slurm_error("hexiscale: %s", msg);
		break;
	case HEXI_LOG_WARN:
	case HEXI_LOG_INFO:
		slurm_info("hexiscale: %s", msg);
		break;
	case HEXI_LOG_VERBOSE:
		slurm_verbose("hexiscale: %s", msg);
		break;
	default:
		slurm_debug("hexiscale: %s", msg);
		break;
	}
}

/* Option callback: Slurm may call it more than once (and again in every
 * slurmstepd with remote=1); it only checks and keeps the latest value. */
static int opt_cb(int val, const char *optarg, int remote)
{
	char origin[96];

	if (remote || val < 0 || val >= HX_OPT_COUNT)
		return 0; /* slurmstepd uses only the hand-off */
	if (hx_opt_table[val].arginfo == NULL)
		optarg = HX_FLAG_ON; /* a flag: given means on */
	snprintf(origin, sizeof(origin), "option --%s", hx_opt_table[val].name);
	if (optarg == NULL || hx_opt_check((hx_opt_id)val, optarg, origin)) {
		hx_err("%s", optarg == NULL ? "option needs a value"
					    : hexi_errmsg(HEXI_ERR_INVAL));
		return -1;
	}
	free(hx_g_cmdline[val]);
	hx_g_cmdline[val] = strdup(optarg);
	if (hx_g_cmdline[val] == NULL) {
		hx_err("%s: no memory", origin);
		return -1;
	}
	return 0;
}

static int register_options(spank_t sp)
{
	for (int i = 0; i < HX_OPT_COUNT; i++) {
		hx_g_opts[i] = (struct spank_option){
		    .name = (char *)hx_opt_table[i].name,
		    .arginfo = (char *)hx_opt_table[i].arginfo,
		    .usage = (char *)hx_opt_table[i].usage,
		    .has_arg = hx_opt_table[i].arginfo != NULL,
		    .val = i,
		    .cb = opt_cb};
		if (spank_option_register(sp, &hx_g_opts[i]) != ESPANK_SUCCESS)
			return -1;
	}
	return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	spank_context_t ctx = spank_context();

	hexi_log_set_sink(log_sink, NULL);
	hexi_log_set_level(HEXI_LOG_DEBUG);
	hx_g_conf_error[0] = '\0';
	if (hx_conf_parse(&hx_g_conf, ac, av) != HEXI_OK) {
		/* Keep nothing of a half-parsed line: defaults, and the
		 * message for the steps that ask for HexiScale. */
		snprintf(hx_g_conf_error, sizeof(hx_g_conf_error), "%s",
			 hexi_errmsg(HEXI_ERR_INVAL));
		hx_conf_defaults(&hx_g_conf);
	}
	if (ctx == S_CTX_LOCAL || ctx == S_CTX_ALLOCATOR) {
		/* A bad line never blocks --help or a job that does not use
		 * HexiScale: say it, register the options, go on. */
		if (hx_g_conf_error[0] != '\0')
			slurm_info("hexiscale: plugstack.conf: %s (HexiScale "
				   "is off until it is fixed)",
				   hx_g_conf_error);
		return register_options(sp);
	}
	if (ctx == S_CTX_REMOTE) {
		if (hx_g_conf_error[0] != '\0')
			hx_err("plugstack.conf: %s (tasks of planned steps "
			       "will fail)",
			       hx_g_conf_error);
		register_options(sp);
	}
	return 0; /* never fail in slurmd/slurmstepd here: it drains nodes */
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	switch (spank_context()) {
	case S_CTX_ALLOCATOR:
		return hx_allocator_post_opt(sp);
	case S_CTX_LOCAL:
		return hx_local_post_opt(sp);
	default:
		return 0;
	}
}

int slurm_spank_local_user_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	return spank_context() == S_CTX_LOCAL ? hx_local_user_init(sp) : 0;
}

int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (spank_context() == S_CTX_REMOTE)
		hx_remote_task_privileged(sp);
	return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (spank_context() != S_CTX_REMOTE)
		return 0;
	return hx_remote_task_init(
	    sp, hx_g_conf_error[0] == '\0' ? NULL : hx_g_conf_error);
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	(void)sp;
	(void)ac;
	(void)av;
	for (int i = 0; i < HX_OPT_COUNT; i++) {
		free(hx_g_cmdline[i]);
		hx_g_cmdline[i] = NULL;
	}
	return 0;
}
