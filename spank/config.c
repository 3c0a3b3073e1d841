/* config.c - plugstack.conf arguments: key=value, defaults in one place;
 * the default plan directory. */
#include "config.h"

#include "hexiscale_int.h"

#include <libgen.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#ifndef HEXI_LIBSCHED_PATH
#define HEXI_LIBSCHED_PATH "libhexisched.so.0"
#endif

void hx_conf_defaults(hx_conf *c)
{
	memset(c, 0, sizeof(*c));
	/* catalog, profiles, topology, plan_dir: "" = built-in / none / next
	 * to the job output. */
	hexi_strlcpy(c->model, "llama2-7b", sizeof(c->model));
	hexi_strlcpy(c->libsched, HEXI_LIBSCHED_PATH, sizeof(c->libsched));
	hexi_strlcpy(c->nvml, "libnvidia-ml.so.1", sizeof(c->nvml));
	c->global_batch = 64;
	c->micro_batch = 1;
	c->seq_len = 0;
	c->default_on = 0;
	c->port_base = 29500;
	c->inter_bw_gbps = 1.25; /* 10 Gbit/s Ethernet */
	c->inter_lat_s = 50e-6;
	c->time_budget_s = 2.0;
}

typedef enum {
	K_PATH,
	K_STR,
	K_INT,
	K_DOUBLE,
	K_MODE,
	K_BIND,
	K_YESNO
} key_kind;

typedef struct key_desc {
	const char *key;
	key_kind kind;
	size_t off;
	double min, max;
	size_t cap; /* K_PATH, K_STR: size of the field */
	int utf8;   /* value may hold well-formed UTF-8 (hx_is_utf8_text) */
} key_desc;

/* offset and, for strings, the field's own size: a key never copies more
 * than its field holds (model is HX_VALUE_MAX, paths HX_PATH_MAX) */
#define F(m) offsetof(hx_conf, m)
#define S(m) offsetof(hx_conf, m), 0, 0, sizeof(((hx_conf *)0)->m), 0
#define U(m) offsetof(hx_conf, m), 0, 0, sizeof(((hx_conf *)0)->m), 1
static const key_desc keys[] = {
    {"catalog", K_PATH, S(catalog)},
    {"profiles", K_PATH, S(profiles)},
    {"topology", K_PATH, S(topology)},
    {"model", K_STR, S(model)},
    /* the plan path travels in the hand-off's pf=, which carries UTF-8
     * (/scratch/équipe/plans), as --hexiscale-plan-dir does */
    {"plan_dir", K_PATH, U(plan_dir)},
    {"libsched", K_PATH, S(libsched)},
    {"nvml", K_STR, S(nvml)},
    {"global_batch", K_INT, F(global_batch), 1, 1 << 24, 0, 0},
    {"micro_batch", K_INT, F(micro_batch), 1, 1 << 16, 0, 0},
    {"seq_len", K_INT, F(seq_len), 0, HX_SEQ_LEN_MAX, 0, 0},
    {"port_base", K_INT, F(port_base), 1024, 60000, 0, 0},
    {"inter_bw_gbps", K_DOUBLE, F(inter_bw_gbps), 1e-3, 1e4, 0, 0},
    {"inter_lat_s", K_DOUBLE, F(inter_lat_s), 0, 1, 0, 0},
    {"time_budget_s", K_DOUBLE, F(time_budget_s), 0.01, 600, 0, 0},
    {"default_mode", K_MODE, F(default_on), 0, 0, 0, 0},
    {"gpu_bind", K_BIND, F(gpu_bind_single), 0, 0, 0, 0},
    {"use_all_gpus", K_YESNO, F(use_all_gpus), 0, 0, 0, 0},
};
#undef F
#undef S
#undef U

static hexi_rc set_key(hx_conf *c, const key_desc *k, const char *val)
{
	char *base = (char *)c + k->off;
	long l;
	hexi_rc rc;

	if (!(k->utf8 ? hx_is_utf8_text(val) : hexi_is_printable(val)) ||
	    strpbrk(val, " ;|") != NULL)
		return hexi_error(HEXI_ERR_INVAL,
				  "plugstack key '%s': value has control "
				  "characters, spaces, ';' or '|'%s",
				  k->key,
				  k->utf8 ? ", or bytes that are not UTF-8"
					  : ", or is not ASCII");
	switch (k->kind) {
	case K_PATH:
		if (val[0] != '/')
			return hexi_error(HEXI_ERR_INVAL,
					  "plugstack key '%s': '%.64s' is not "
					  "an absolute path",
					  k->key, val);
		/* fall through */
	case K_STR:
		if (hexi_strlcpy(base, val, k->cap) != HEXI_OK)
			return hexi_error(HEXI_ERR_RANGE,
					  "plugstack key '%s': value longer "
					  "than %zu bytes",
					  k->key, k->cap - 1);
		return HEXI_OK;
	case K_INT:
		rc = hexi_parse_long(val, (long)k->min, (long)k->max, &l);
		if (rc == HEXI_OK)
			*(int *)(void *)base = (int)l;
		break;
	case K_DOUBLE:
		rc = hexi_parse_double(val, k->min, k->max,
				       (double *)(void *)base);
		break;
	case K_MODE:
		rc = HEXI_OK;
		if (strcmp(val, "optin") == 0 || strcmp(val, "off") == 0)
			*(int *)(void *)base = 0;
		else if (strcmp(val, "on") == 0 || strcmp(val, "auto") == 0)
			*(int *)(void *)base = 1;
		else
			return hexi_error(HEXI_ERR_INVAL,
					  "plugstack key '%s': '%.64s' is not "
					  "one of optin, on",
					  k->key, val);
		break;
	case K_BIND:
		rc = HEXI_OK;
		if (strcmp(val, "local_rank") == 0)
			*(int *)(void *)base = 0;
		else if (strcmp(val, "single") == 0)
			*(int *)(void *)base = 1;
		else
			return hexi_error(HEXI_ERR_INVAL,
					  "plugstack key '%s': '%.64s' is not "
					  "one of local_rank, single",
					  k->key, val);
		break;
	case K_YESNO:
		rc = HEXI_OK;
		if (strcmp(val, "no") == 0)
			*(int *)(void *)base = 0;
		else if (strcmp(val, "yes") == 0)
			*(int *)(void *)base = 1;
		else
			return hexi_error(HEXI_ERR_INVAL,
					  "plugstack key '%s': '%.64s' is not "
					  "one of yes, no",
					  k->key, val);
		break;
	default:
		return hexi_error(HEXI_ERR_INTERNAL, "plugstack key '%s'",
				  k->key);
	}
	if (rc != HEXI_OK)
		return hexi_error(rc,
				  "plugstack key '%s': bad value '%.64s' "
				  "(want a number in [%.10g, %.10g])",
				  k->key, val, k->min, k->max);
	return HEXI_OK;
}

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

hexi_rc hx_conf_parse(hx_conf *c, int ac, char **av)
{
	unsigned char seen[NKEYS] = {0};

	hx_conf_defaults(c);
	for (int i = 0; i < ac; i++) {
		const char *eq = strchr(av[i], '=');
		size_t klen = eq != NULL ? (size_t)(eq - av[i]) : 0;
		const key_desc *k = NULL;

		if (eq == NULL || klen == 0)
			return hexi_error(HEXI_ERR_INVAL,
					  "plugstack argument '%.64s' is not "
					  "key=value",
					  av[i]);
		for (size_t j = 0; j < NKEYS; j++)
			if (strlen(keys[j].key) == klen &&
			    strncmp(keys[j].key, av[i], klen) == 0)
				k = &keys[j];
		if (k == NULL)
			return hexi_error(HEXI_ERR_INVAL,
					  "plugstack key '%.*s' is unknown",
					  (int)(klen > 64 ? 64 : klen), av[i]);
		/* a second value would silently win: say so instead */
		if (seen[k - keys]++)
			return hexi_error(HEXI_ERR_INVAL,
					  "plugstack key '%s' is given twice",
					  k->key);
		hexi_rc rc = set_key(c, k, eq + 1);
		if (rc != HEXI_OK)
			return rc;
	}
	return HEXI_OK;
}

/* The directory of StdOut (made absolute under work_dir), if plan files
 * may go there (see hx_default_plan_dir); HEXI_ERR_NOTFOUND if not. */
static hexi_rc stdout_dir(const char *std_out, const char *work_dir, char *dir,
			  size_t cap)
{
	char path[HX_PATH_MAX];
	const char *d;
	struct stat st;
	int n;

	if (std_out == NULL || std_out[0] == '\0')
		return HEXI_ERR_NOTFOUND;
	if (std_out[0] == '/')
		n = snprintf(path, sizeof(path), "%s", std_out);
	else if (work_dir != NULL && work_dir[0] == '/')
		n = snprintf(path, sizeof(path), "%s/%s", work_dir, std_out);
	else
		return HEXI_ERR_NOTFOUND;
	if (n < 0 || (size_t)n >= sizeof(path))
		return HEXI_ERR_NOTFOUND;
	/* a name Slurm has not opened yet ("%j" unexpanded) is not there */
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
		return HEXI_ERR_NOTFOUND; /* /dev/null, a tty, a FIFO */
	d = dirname(path);
	if (strcmp(d, "/dev") == 0 || strncmp(d, "/dev/", 5) == 0 ||
	    strchr(d, '%') != NULL)
		return HEXI_ERR_NOTFOUND;
	return hexi_strlcpy(dir, d, cap);
}

hexi_rc hx_default_plan_dir(const char *std_out, const char *work_dir,
			    char *dir, size_t cap)
{
	if (cap == 0)
		return HEXI_ERR_RANGE;
	dir[0] = '\0';
	if (stdout_dir(std_out, work_dir, dir, cap) == HEXI_OK)
		return HEXI_OK;
	dir[0] = '\0';
	if (work_dir == NULL || work_dir[0] != '/')
		return HEXI_ERR_NOTFOUND;
	return hexi_strlcpy(dir, work_dir, cap);
}
