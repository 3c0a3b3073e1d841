/*
 * state.c - what every context file of the plugin shares: the parsed
 * plugstack arguments, the command-line option values, the registered
 * option table, the error log and the settings resolution.  It sits below
 * plugin.c and the context files (allocator.c, local.c, remote.c,
 * sched_dl.c), which call it and never each other, so no two files of the
 * plugin call each other.
 */
#include "config.h"

#include "hx_spank.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

hx_conf hx_g_conf;
char hx_g_conf_error[512];
char *hx_g_cmdline[HX_OPT_COUNT];
struct spank_option hx_g_opts[HX_OPT_COUNT];

void hx_err(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	slurm_error("hexiscale: %s", msg);
}

#define HX_PLAN_FILE_MAX (16u << 20)

/* Read the user's plan file with the caller's own privileges (sbatch and
 * srun run as the user): one open with O_NONBLOCK, fstat on that
 * descriptor (regular file only, size capped), and the read, so a FIFO
 * never blocks and a name swapped after the check is never read. */
static int load_plan_file(hx_settings *s)
{
	hexi_rc rc = hexi_read_file(s->plan_file, HX_PLAN_FILE_MAX,
				    &s->plan_text, &s->plan_len);

	if (rc != HEXI_OK) {
		hx_err("plan file %s", hexi_errmsg(rc));
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
	/* A bad plugstack line refuses only what asked for HexiScale (the
	 * defaults are in force, so default_mode is optin here). */
	if (hx_g_conf_error[0] != '\0' && s->mode != HX_MODE_OFF) {
		hx_err("plugstack.conf: %s; HexiScale cannot run until the "
		       "administrator fixes that line (hexiscale(8))",
		       hx_g_conf_error);
		return -1;
	}
	if (s->mode == HX_MODE_FILE && load_plan_file(s) != 0)
		return -1;
	return 0;
}

void hx_settings_fini(hx_settings *s)
{
	free(s->plan_text);
	s->plan_text = NULL;
	s->plan_len = 0;
}

/* Where a setting came from, for messages: "option --hexiscale-model",
 * "environment variable HEXISCALE_MODEL" or "plugstack.conf model" (no
 * '=': callers add "=VALUE"). */
void hx_setting_origin(const hx_settings *s, hx_opt_id id, const char *key,
		       char *buf, size_t cap)
{
	if (s->source[id] != NULL && !strcmp(s->source[id], "command line"))
		snprintf(buf, cap, "option --%s", hx_opt_table[id].name);
	else if (s->source[id] != NULL && !strcmp(s->source[id], "environment"))
		snprintf(buf, cap, "environment variable %s",
			 hx_opt_table[id].env);
	else
		snprintf(buf, cap, "plugstack.conf %s", key);
}
