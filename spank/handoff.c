/*
 * handoff.c - the compact, checksummed form in which srun hands a step's
 * roles to slurmstepd through the step environment (HEXISCALE_HANDOFF):
 *
 *   hxV;j=JOB;s=STEP;h=PLANHASH;w=WORLD;np=NPIPE;ma=ADDR;mp=PORT;pf=PATH;
 *   g=TYPE,TYPE,...;t=ROW/ROW/...;c=CHECKSUM
 *
 * ROW = rank.node.gpu.pipeline.stage.nstages.tprank.tpsize.l0.l1.batch.
 *       microbatches.localrank.localsize, one per task in global task order;
 *       version 2 adds .idle (0 or 1).  WORLD counts the training ranks.
 * srun writes version 1 when no task is idle (the bytes of a plugin
 * without idle tasks, so a slurmstepd not yet upgraded still reads every
 * step it could before) and version 2 otherwise; the decoder reads both.
 * Version 3 is a step over several components of a heterogeneous job:
 *
 *   hx3;j=LEADER;hc=COMP/COMP/...;h=... (the rest as version 2)
 *
 * COMP = jobid.taskoffset.ntasks.nodeoffset.nnodes, one per component in
 * task order; no step id (srun makes this hand-off before Slurm creates
 * the step, see local.c).
 * ADDR (rank 0's NodeAddr) has at most 255 bytes (HX_HOST_MAX; a decoder
 * from before took 63 and refuses a longer one, it never cuts it).
 * CHECKSUM is FNV-1a 64 over everything before ";c=".  The decoder is
 * strict: fixed field order, every number range-checked, printable ASCII
 * only, except PATH, which may also hold well-formed UTF-8 (a plan
 * directory /home/josé/run); no control byte anywhere.
 */
#include "config.h"

#include "hexiscale_int.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The fields of a role row, in wire order (the table is the format: a new
 * field is a new row at the end and a new hand-off version). */
static const size_t row_field[] = {
    offsetof(hx_task_role, rank),
    offsetof(hx_task_role, node),
    offsetof(hx_task_role, gpu),
    offsetof(hx_task_role, pipeline),
    offsetof(hx_task_role, stage),
    offsetof(hx_task_role, nstages),
    offsetof(hx_task_role, tp_rank),
    offsetof(hx_task_role, tp_size),
    offsetof(hx_task_role, layer_begin),
    offsetof(hx_task_role, layer_end),
    offsetof(hx_task_role, batch),
    offsetof(hx_task_role, micro_batches),
    offsetof(hx_task_role, local_rank),
    offsetof(hx_task_role, local_world_size),
    offsetof(hx_task_role, idle), /* version 2 */
};
#define NROW2 ((int)(sizeof(row_field) / sizeof(row_field[0])))
#define NROW1 (NROW2 - 1)

/* Fields of a row in hand-off version v (1, 2 or 3). */
static int row_fields(int v)
{
	return v == 1 ? NROW1 : NROW2;
}

static int *row_int(hx_task_role *r, int k)
{
	return (int *)(void *)((char *)r + row_field[k]);
}

static int row_get(const hx_task_role *r, int k)
{
	return *(const int *)(const void *)((const char *)r + row_field[k]);
}

void hx_handoff_init(hx_handoff *h)
{
	memset(h, 0, sizeof(*h));
}

void hx_handoff_fini(hx_handoff *h)
{
	free(h->comps);
	free(h->gpu_type);
	free(h->roles);
	hx_handoff_init(h);
}

hexi_rc hx_handoff_alloc(hx_handoff *h, int nnodes, int ntasks)
{
	if (nnodes < 1 || nnodes > HX_NODES_MAX || ntasks < 1 ||
	    ntasks > HX_TASKS_MAX)
		return hexi_error(HEXI_ERR_RANGE,
				  "hand-off: %d nodes, %d tasks out of range",
				  nnodes, ntasks);
	h->gpu_type = calloc((size_t)nnodes, sizeof(*h->gpu_type));
	h->roles = calloc((size_t)ntasks, sizeof(*h->roles));
	if (h->gpu_type == NULL || h->roles == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "hand-off: no memory");
	h->nnodes = nnodes;
	h->ntasks = ntasks;
	return HEXI_OK;
}

hexi_rc hx_handoff_alloc_comps(hx_handoff *h, int ncomps)
{
	if (ncomps < 2 || ncomps > HX_COMPS_MAX)
		return hexi_error(HEXI_ERR_RANGE,
				  "hand-off: %d components out of range 2..%d",
				  ncomps, HX_COMPS_MAX);
	free(h->comps);
	h->comps = calloc((size_t)ncomps, sizeof(*h->comps));
	if (h->comps == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "hand-off: no memory");
	h->ncomps = ncomps;
	return HEXI_OK;
}

/* Growable string with a hard cap. */
typedef struct sbuf {
	char *s;
	size_t len, cap;
	int over;
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void sb_add(sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->over)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= b->cap - b->len) {
		b->over = 1;
		return;
	}
	b->len += (size_t)n;
}

hexi_rc hx_handoff_encode(const hx_handoff *h, char **out)
{
	sbuf b = {NULL, 0, HX_HANDOFF_MAX + 1, 0};
	char sum[17];
	int v = 1, nf;

	for (int t = 0; t < h->ntasks; t++)
		if (h->roles[t].idle)
			v = 2;
	if (h->ncomps > 0)
		v = 3;
	nf = row_fields(v);
	b.s = malloc(b.cap);
	if (b.s == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "hand-off: no memory");
	if (v == 3) {
		sb_add(&b, "hx3;j=%u;hc=", (unsigned)h->job_id);
		for (int k = 0; k < h->ncomps; k++)
			sb_add(&b, "%s%u.%d.%d.%d.%d", k ? "/" : "",
			       (unsigned)h->comps[k].job_id,
			       h->comps[k].task_off, h->comps[k].ntasks,
			       h->comps[k].node_off, h->comps[k].nnodes);
		sb_add(&b, ";");
	} else {
		sb_add(&b, "hx%d;j=%u;s=%u;", v, (unsigned)h->job_id,
		       (unsigned)h->step_id);
	}
	sb_add(&b, "h=%s;w=%d;np=%d;ma=%s;mp=%d;pf=%s;g=", h->plan_hash,
	       h->world_size, h->npipelines, h->master_addr, h->master_port,
	       h->plan_path);
	for (int i = 0; i < h->nnodes; i++)
		sb_add(&b, "%s%s", i ? "," : "", h->gpu_type[i]);
	sb_add(&b, ";t=");
	for (int t = 0; t < h->ntasks; t++)
		for (int k = 0; k < nf; k++)
			sb_add(&b, "%s%d", k ? "." : (t ? "/" : ""),
			       row_get(&h->roles[t], k));
	if (!b.over) {
		hx_fnv1a_hex(b.s, b.len, sum);
		sb_add(&b, ";c=%s", sum);
	}
	if (b.over) {
		free(b.s);
		return hexi_error(HEXI_ERR_RANGE,
				  "the plan of %d tasks does not fit in the "
				  "%d-byte hand-off to the tasks",
				  h->ntasks, HX_HANDOFF_MAX);
	}
	*out = b.s;
	return HEXI_OK;
}

/* Take the value of "key=" at *p up to the next ';' (or end). */
static hexi_rc take(const char **p, const char *key, char *val, size_t cap)
{
	size_t kl = strlen(key);
	const char *end;

	if (strncmp(*p, key, kl) != 0 || (*p)[kl] != '=')
		return hexi_error(HEXI_ERR_PARSE, "hand-off: expected '%s='",
				  key);
	*p += kl + 1;
	end = strchr(*p, ';');
	if (end == NULL)
		end = *p + strlen(*p);
	if ((size_t)(end - *p) >= cap)
		return hexi_error(HEXI_ERR_RANGE, "hand-off: '%s' too long",
				  key);
	memcpy(val, *p, (size_t)(end - *p));
	val[end - *p] = '\0';
	*p = *end == ';' ? end + 1 : end;
	return HEXI_OK;
}

static hexi_rc take_long(const char **p, const char *key, long min, long max,
			 long *out)
{
	char v[32];
	hexi_rc rc = take(p, key, v, sizeof(v));

	if (rc == HEXI_OK && hexi_parse_long(v, min, max, out) != HEXI_OK)
		rc = hexi_error(HEXI_ERR_PARSE, "hand-off: bad '%s'", key);
	return rc;
}

static hexi_rc parse_types(hx_handoff *h, char *g)
{
	char *save = NULL, *tok;
	int n = 0;

	for (tok = strtok_r(g, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		if (n >= h->nnodes ||
		    hexi_strlcpy(h->gpu_type[n], tok, HX_NAME_MAX) != HEXI_OK)
			return hexi_error(HEXI_ERR_PARSE,
					  "hand-off: bad GPU type list");
		n++;
	}
	return n == h->nnodes
		   ? HEXI_OK
		   : hexi_error(HEXI_ERR_PARSE,
				"hand-off: %d GPU types for %d nodes", n,
				h->nnodes);
}

/* A training row: its rank below W, a stage of a pipeline; an idle row:
 * rank W or above, nothing of a stage. */
static int row_consistent(const hx_handoff *h, const hx_task_role *r)
{
	if (r->node >= h->nnodes || r->local_rank >= r->local_world_size ||
	    r->gpu >= HX_GPUS_MAX * 16 || r->idle > 1)
		return 0;
	if (r->idle)
		return r->rank >= h->world_size && r->rank < h->ntasks &&
		       r->pipeline == 0 && r->stage == 0 && r->nstages == 0 &&
		       r->tp_rank == 0 && r->tp_size == 0 &&
		       r->layer_begin == 0 && r->layer_end == 0 &&
		       r->batch == 0 && r->micro_batches == 0;
	return r->rank < h->world_size && r->pipeline < h->npipelines &&
	       r->stage < r->nstages && r->tp_rank < r->tp_size &&
	       r->layer_begin < r->layer_end && r->micro_batches >= 1;
}

static hexi_rc parse_row(hx_handoff *h, const char *row, int nf,
			 hx_task_role *r)
{
	const char *p = row;

	memset(r, 0, sizeof(*r));
	for (int k = 0; k < nf; k++) {
		char *end;
		long v;

		if (*p < '0' || *p > '9')
			return hexi_error(HEXI_ERR_PARSE, "hand-off: bad row");
		v = strtol(p, &end, 10);
		if (v < 0 || v > (1L << 24) ||
		    *end != (k == nf - 1 ? '\0' : '.'))
			return hexi_error(HEXI_ERR_PARSE, "hand-off: bad row");
		*row_int(r, k) = (int)v;
		p = end + 1;
	}
	if (!row_consistent(h, r))
		return hexi_error(HEXI_ERR_RANGE,
				  "hand-off: inconsistent role row");
	return HEXI_OK;
}

/* Rows of every task; the idle ones are the tasks beyond W. */
static hexi_rc parse_rows(hx_handoff *h, char *t, int nf)
{
	char *save = NULL, *tok;
	int n = 0, idle = 0;
	hexi_rc rc;

	for (tok = strtok_r(t, "/", &save); tok != NULL;
	     tok = strtok_r(NULL, "/", &save)) {
		if (n >= h->ntasks)
			return hexi_error(HEXI_ERR_PARSE,
					  "hand-off: too many rows");
		if ((rc = parse_row(h, tok, nf, &h->roles[n])) != HEXI_OK)
			return rc;
		idle += h->roles[n].idle;
		n++;
	}
	if (n != h->ntasks)
		return hexi_error(HEXI_ERR_PARSE,
				  "hand-off: %d rows for %d tasks", n,
				  h->ntasks);
	if (h->world_size + idle != h->ntasks)
		return hexi_error(HEXI_ERR_RANGE,
				  "hand-off: %d training ranks and %d idle "
				  "tasks for %d tasks",
				  h->world_size, idle, h->ntasks);
	return HEXI_OK;
}

/* Version 3's component list "job.toff.nt.noff.nn/..." into h->comps. */
static hexi_rc parse_comps(hx_handoff *h, char *list)
{
	char *save = NULL, *tok;
	int n = 1, k = 0;
	hexi_rc rc;

	for (const char *q = list; *q != '\0'; q++)
		n += *q == '/';
	if ((rc = hx_handoff_alloc_comps(h, n)) != HEXI_OK)
		return rc;
	for (tok = strtok_r(list, "/", &save); tok != NULL;
	     tok = strtok_r(NULL, "/", &save), k++) {
		hx_handoff_comp *c = &h->comps[k];
		long v[5];
		char *p = tok, *end;

		for (int f = 0; f < 5; f++, p = end + 1) {
			if (*p < '0' || *p > '9')
				return hexi_error(HEXI_ERR_PARSE,
						  "hand-off: bad component");
			v[f] = strtol(p, &end, 10);
			if (v[f] < 0 ||
			    v[f] > (f ? HX_TASKS_MAX : UINT32_MAX) ||
			    *end != (f == 4 ? '\0' : '.'))
				return hexi_error(HEXI_ERR_PARSE,
						  "hand-off: bad component");
		}
		*c = (hx_handoff_comp){(uint32_t)v[0], (int)v[1], (int)v[2],
				       (int)v[3], (int)v[4]};
	}
	return k == n
		   ? HEXI_OK
		   : hexi_error(HEXI_ERR_PARSE, "hand-off: bad component list");
}

/* Version 3: the components tile the step's tasks and nodes in order, no
 * job twice, and each task's node is one of its component's. */
static hexi_rc check_comps(const hx_handoff *h)
{
	int toff = 0, noff = 0;

	for (int k = 0; k < h->ncomps; k++) {
		const hx_handoff_comp *c = &h->comps[k];

		if (c->task_off != toff || c->node_off != noff ||
		    c->ntasks < 1 || c->nnodes < 1)
			return hexi_error(HEXI_ERR_RANGE,
					  "hand-off: component %d does not "
					  "follow the one before",
					  k);
		for (int j = 0; j < k; j++)
			if (h->comps[j].job_id == c->job_id)
				return hexi_error(HEXI_ERR_RANGE,
						  "hand-off: job %u twice",
						  (unsigned)c->job_id);
		for (int t = toff; t < toff + c->ntasks && t < h->ntasks; t++)
			if (h->roles[t].node < noff ||
			    h->roles[t].node >= noff + c->nnodes)
				return hexi_error(HEXI_ERR_RANGE,
						  "hand-off: task %d is not on "
						  "a node of its component",
						  t);
		toff += c->ntasks;
		noff += c->nnodes;
	}
	if (toff != h->ntasks || noff != h->nnodes)
		return hexi_error(HEXI_ERR_RANGE,
				  "hand-off: components cover %d tasks and %d "
				  "nodes of %d and %d",
				  toff, noff, h->ntasks, h->nnodes);
	return HEXI_OK;
}

static hexi_rc decode_body(const char *s, int version, hx_handoff *h)
{
	const char *p = s + 4; /* after "hxV;" */
	size_t cap = strlen(s) + 1;
	char *g = NULL;
	long v;
	hexi_rc rc;
	int nn = 1, nt = 1;

	if ((rc = take_long(&p, "j", 0, UINT32_MAX, &v)) != HEXI_OK)
		return rc;
	h->job_id = (uint32_t)v;
	if (version == 3) {
		char *hc = malloc(cap);

		if (hc == NULL)
			return hexi_error(HEXI_ERR_NOMEM,
					  "hand-off: no memory");
		rc = take(&p, "hc", hc, cap);
		if (rc == HEXI_OK)
			rc = parse_comps(h, hc);
		free(hc);
		if (rc != HEXI_OK)
			return rc;
	} else {
		if ((rc = take_long(&p, "s", 0, UINT32_MAX, &v)) != HEXI_OK)
			return rc;
		h->step_id = (uint32_t)v;
	}
	if ((rc = take(&p, "h", h->plan_hash, sizeof(h->plan_hash))) != HEXI_OK)
		return rc;
	if ((rc = take_long(&p, "w", 1, HX_TASKS_MAX, &v)) != HEXI_OK)
		return rc;
	h->world_size = (int)v;
	if ((rc = take_long(&p, "np", 1, HX_TASKS_MAX, &v)) != HEXI_OK)
		return rc;
	h->npipelines = (int)v;
	if ((rc = take(&p, "ma", h->master_addr, sizeof(h->master_addr))) !=
	    HEXI_OK)
		return rc;
	if ((rc = take_long(&p, "mp", 1, 65535, &v)) != HEXI_OK)
		return rc;
	h->master_port = (int)v;
	if ((rc = take(&p, "pf", h->plan_path, sizeof(h->plan_path))) !=
	    HEXI_OK)
		return rc;
	/* Count nodes and tasks before allocating. */
	for (const char *q = p; *q != '\0' && *q != ';'; q++)
		nn += *q == ',';
	for (const char *q = strstr(p, ";t="); q != NULL && *q != '\0'; q++)
		nt += *q == '/';
	if ((rc = hx_handoff_alloc(h, nn, nt)) != HEXI_OK)
		return rc;
	g = malloc(cap);
	if (g == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "hand-off: no memory");
	if ((rc = take(&p, "g", g, cap)) != HEXI_OK ||
	    (rc = parse_types(h, g)) != HEXI_OK)
		goto out;
	if ((rc = take(&p, "t", g, cap)) != HEXI_OK ||
	    (rc = parse_rows(h, g, row_fields(version))) != HEXI_OK)
		goto out;
	if (*p != '\0')
		rc = hexi_error(HEXI_ERR_PARSE, "hand-off: trailing data");
	else if (version == 3)
		rc = check_comps(h);
out:
	free(g);
	return rc;
}

/* Length of the well-formed UTF-8 sequence of a code point from U+00A0
 * on at p (no C1 controls, overlong forms, surrogates or values past
 * U+10FFFF), else 0. */
static size_t utf8_char(const unsigned char *p)
{
	size_t n;
	unsigned long cp, min;

	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2, cp = p[0] & 0x1fu, min = 0xa0;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3, cp = p[0] & 0x0fu, min = 0x800;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4, cp = p[0] & 0x07u, min = 0x10000;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0u) != 0x80u)
			return 0;
		cp = cp << 6 | (p[i] & 0x3fu);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/* 1 if the len bytes at s are printable ASCII, or where utf8 also
 * well-formed UTF-8 of printable code points (see utf8_char). */
static int text_ok(const char *s, size_t len, int utf8)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + len;

	while (p < end) {
		size_t n = *p >= 0x20 && *p < 0x7f ? 1
			   : utf8		   ? utf8_char(p)
						   : 0;

		if (n == 0 || n > (size_t)(end - p))
			return 0;
		p += n;
	}
	return 1;
}

int hx_is_utf8_text(const char *s)
{
	return text_ok(s, strlen(s), 1);
}

/* Printable ASCII, except the plan path (pf=), which may be any printable
 * UTF-8 (a home directory /home/josé): no control byte anywhere. */
static int handoff_text_ok(const char *s)
{
	const char *pf = strstr(s, ";pf="), *g;

	if (pf == NULL || (g = strstr(pf, ";g=")) == NULL)
		return hexi_is_printable(s);
	pf += 4;
	return text_ok(s, (size_t)(pf - s), 0) &&
	       text_ok(pf, (size_t)(g - pf), 1) && text_ok(g, strlen(g), 0);
}

hexi_rc hx_handoff_decode(const char *s, hx_handoff *h)
{
	const char *c;
	char sum[17], *body = NULL;
	size_t blen;
	hexi_rc rc;
	int version;

	hx_handoff_init(h);
	if (strlen(s) > HX_HANDOFF_MAX || strncmp(s, "hx", 2) != 0 ||
	    (s[2] < '1' || s[2] > '3') || s[3] != ';' || !handoff_text_ok(s))
		return hexi_error(HEXI_ERR_PARSE,
				  "hand-off: not a version-1, -2 or -3 "
				  "hand-off");
	version = s[2] - '0';
	c = strstr(s, ";c=");
	if (c == NULL || strlen(c + 3) != 16)
		return hexi_error(HEXI_ERR_PARSE, "hand-off: no checksum");
	blen = (size_t)(c - s);
	if (blen < 4)
		return hexi_error(HEXI_ERR_PARSE, "hand-off: empty");
	hx_fnv1a_hex(s, blen, sum);
	if (strcmp(sum, c + 3) != 0)
		return hexi_error(HEXI_ERR_CHECKSUM,
				  "hand-off: checksum mismatch (altered "
				  "environment?)");
	body = strndup(s, blen);
	if (body == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "hand-off: no memory");
	rc = decode_body(body, version, h);
	free(body);
	if (rc != HEXI_OK)
		hx_handoff_fini(h);
	return rc;
}

hexi_rc hx_rank_tasks(hx_task_role *roles, int ntasks, int world_size,
		      int *new_of_old)
{
	int train = 0, idle = world_size;

	for (int r = 0; r < ntasks; r++)
		new_of_old[r] = -1;
	for (int t = 0; t < ntasks; t++) {
		int old = roles[t].rank;

		if (old < 0 || old >= ntasks || new_of_old[old] >= 0)
			return hexi_error(HEXI_ERR_INVAL,
					  "task %d: plan rank %d out of 0..%d "
					  "or given twice",
					  t, old, ntasks - 1);
		if (roles[t].idle ? idle >= ntasks : train >= world_size)
			return hexi_error(
			    HEXI_ERR_MISMATCH, "more than %d %s tasks",
			    roles[t].idle ? ntasks - world_size : world_size,
			    roles[t].idle ? "idle" : "training");
		new_of_old[old] = roles[t].idle ? idle++ : train++;
		roles[t].rank = new_of_old[old];
	}
	if (train != world_size)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "%d training tasks for %d training ranks",
				  train, world_size);
	return HEXI_OK;
}
