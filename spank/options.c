/* options.c - user options, their environment twins and their checks. */
#include "config.h"

#include "hexiscale_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const hx_opt_desc hx_opt_table[HX_OPT_COUNT] = {
    [HX_OPT_MODE] = {"hexiscale", "HEXISCALE_MODE", "auto|off|PLAN.json",
		     "Plan this job's steps with HexiScale: auto, off, or "
		     "a plan file made with hexiplan"},
    [HX_OPT_MODEL] = {"hexiscale-model", "HEXISCALE_MODEL", "NAME|FILE",
		      "Model to plan for (built-in name or model JSON)"},
    [HX_OPT_GLOBAL_BATCH] = {"hexiscale-global-batch", "HEXISCALE_GLOBAL_BATCH",
			     "N", "Samples per training iteration"},
    [HX_OPT_MICRO_BATCH] = {"hexiscale-micro-batch", "HEXISCALE_MICRO_BATCH",
			    "N", "Samples per micro-batch"},
    [HX_OPT_SEQ_LEN] = {"hexiscale-seq-len", "HEXISCALE_SEQ_LEN", "N",
			"Sequence length in tokens"},
    [HX_OPT_PLAN_DIR] = {"hexiscale-plan-dir", "HEXISCALE_PLAN_DIR", "DIR",
			 "Directory for the plan files of the steps"},
    [HX_OPT_USE_ALL_GPUS] = {"hexiscale-use-all-gpus", "HEXISCALE_USE_ALL_GPUS",
			     NULL,
			     "Give every GPU of the step a training rank (the "
			     "planner may otherwise leave slow GPUs idle)"},
};

/* yes|no|1|0 of a flag's env twin: 1, 0, or -1 for anything else. */
static int flag_value(const char *v)
{
	if (!strcmp(v, "yes") || !strcmp(v, "1"))
		return 1;
	if (!strcmp(v, "no") || !strcmp(v, "0"))
		return 0;
	return -1;
}

const char *hx_shown(const char *s, char *buf, size_t cap)
{
	size_t i;

	for (i = 0; s[i] != '\0' && i + 1 < cap && i < 64; i++)
		buf[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	buf[i] = '\0';
	return buf;
}

static hexi_rc check_int(hx_opt_id id, const char *v, long max,
			 const char *origin)
{
	long l;
	char shown[80];

	if (hexi_parse_long(v, id == HX_OPT_SEQ_LEN ? 0 : 1, max, &l) !=
	    HEXI_OK)
		return hexi_error(HEXI_ERR_INVAL,
				  "%s: '%s' is not an integer in [%d, %ld]",
				  origin, hx_shown(v, shown, sizeof(shown)),
				  id == HX_OPT_SEQ_LEN ? 0 : 1, max);
	return HEXI_OK;
}

hexi_rc hx_opt_check(hx_opt_id id, const char *v, const char *origin)
{
	size_t len = strlen(v);

	if (len == 0)
		return hexi_error(HEXI_ERR_INVAL, "%s: empty value", origin);
	if (len >= HX_VALUE_MAX)
		return hexi_error(HEXI_ERR_RANGE,
				  "%s: value is %zu bytes, the limit is %d",
				  origin, len, HX_VALUE_MAX - 1);
	/* a plan directory may be /home/josé/run: the hand-off carries
	 * UTF-8 in the plan path (handoff.c) */
	if (id == HX_OPT_PLAN_DIR && !hx_is_utf8_text(v))
		return hexi_error(HEXI_ERR_INVAL,
				  "%s: value contains control characters or "
				  "bytes that are not UTF-8",
				  origin);
	if (id != HX_OPT_PLAN_DIR && !hexi_is_printable(v))
		return hexi_error(HEXI_ERR_INVAL,
				  "%s: value contains control or non-ASCII "
				  "characters",
				  origin);
	if (strpbrk(v, ";|") != NULL)
		return hexi_error(HEXI_ERR_INVAL,
				  "%s: value contains ';' or '|'", origin);
	switch (id) {
	case HX_OPT_GLOBAL_BATCH:
		return check_int(id, v, 1 << 24, origin);
	case HX_OPT_MICRO_BATCH:
		return check_int(id, v, 1 << 16, origin);
	case HX_OPT_SEQ_LEN:
		return check_int(id, v, HX_SEQ_LEN_MAX, origin);
	case HX_OPT_USE_ALL_GPUS:
		if (flag_value(v) < 0) {
			char shown[80];

			return hexi_error(HEXI_ERR_INVAL,
					  "%s: '%s' is not one of yes, no, 1, "
					  "0",
					  origin,
					  hx_shown(v, shown, sizeof(shown)));
		}
		return HEXI_OK;
	default:
		return HEXI_OK;
	}
}

static void set_mode(hx_settings *s, const char *v)
{
	if (strcmp(v, "off") == 0 || strcmp(v, "none") == 0) {
		s->mode = HX_MODE_OFF;
	} else if (strcmp(v, "auto") == 0) {
		s->mode = HX_MODE_AUTO;
	} else {
		s->mode = HX_MODE_FILE;
		hexi_strlcpy(s->plan_file, v, sizeof(s->plan_file));
	}
}

static hexi_rc apply(hx_settings *s, hx_opt_id id, const char *v)
{
	long l = 0;

	switch (id) {
	case HX_OPT_MODE:
		set_mode(s, v);
		s->mode_from_default = 0;
		return HEXI_OK;
	case HX_OPT_MODEL:
		return hexi_strlcpy(s->model, v, sizeof(s->model));
	case HX_OPT_PLAN_DIR:
		return hexi_strlcpy(s->plan_dir, v, sizeof(s->plan_dir));
	case HX_OPT_USE_ALL_GPUS:
		s->use_all_gpus = flag_value(v) == 1;
		return HEXI_OK;
	default:
		break;
	}
	hexi_parse_long(v, 0, 1 << 24, &l); /* checked before */
	if (id == HX_OPT_GLOBAL_BATCH)
		s->global_batch = (int)l;
	else if (id == HX_OPT_MICRO_BATCH)
		s->micro_batch = (int)l;
	else
		s->seq_len = (int)l;
	return HEXI_OK;
}

hexi_rc hx_settings_resolve(hx_settings *s, const hx_conf *c,
			    const char *const cmdline[HX_OPT_COUNT])
{
	memset(s, 0, sizeof(*s));
	s->mode = c->default_on ? HX_MODE_AUTO : HX_MODE_OFF;
	s->mode_from_default = 1;
	hexi_strlcpy(s->model, c->model, sizeof(s->model));
	hexi_strlcpy(s->plan_dir, c->plan_dir, sizeof(s->plan_dir));
	s->global_batch = c->global_batch;
	s->micro_batch = c->micro_batch;
	s->seq_len = c->seq_len;
	s->use_all_gpus = c->use_all_gpus;
	for (int i = 0; i < HX_OPT_COUNT; i++) {
		const char *v = cmdline != NULL ? cmdline[i] : NULL;
		char origin[96];
		hexi_rc rc;

		s->source[i] = "plugstack default";
		if (v != NULL) {
			s->source[i] = "command line";
			snprintf(origin, sizeof(origin), "option --%s",
				 hx_opt_table[i].name);
		} else if ((v = getenv(hx_opt_table[i].env)) != NULL) {
			s->source[i] = "environment";
			snprintf(origin, sizeof(origin),
				 "environment variable %s",
				 hx_opt_table[i].env);
		} else {
			continue;
		}
		rc = hx_opt_check((hx_opt_id)i, v, origin);
		if (rc == HEXI_OK)
			rc = apply(s, (hx_opt_id)i, v);
		if (rc != HEXI_OK)
			return rc;
	}
	return HEXI_OK;
}
