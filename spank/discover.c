/*
 * discover.c - the step's nodes, tasks and GPUs, from Slurm itself (srun,
 * local_user_init): slurm_load_job(SHOW_DETAIL) gives the job's GPUs per
 * node (gres_detail_str[i] for the i-th host of the job's node list), and
 * slurm_job_step_layout_get() the step's nodes and task ids.  The plugin
 * is built without -lslurm: these bind to the libslurmfull that srun has
 * loaded already.
 */
#include "config.h"

#include "hx_spank.h"

#include <errno.h>
#include <slurm/slurm.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Index of name in a hostlist expression, or -1. */
static int host_index(const char *list, const char *name)
{
	hostlist_t hl = slurm_hostlist_create(list);
	char *h;
	int i = 0, found = -1;

	if (hl == NULL)
		return -1;
	while ((h = slurm_hostlist_shift(hl)) != NULL) {
		if (found < 0 && strcmp(h, name) == 0)
			found = i;
		free(h);
		i++;
	}
	slurm_hostlist_destroy(hl);
	return found;
}

/* The default plan directory (hx_default_plan_dir), else srun's working
 * directory. */
static void job_out_dir(const slurm_job_info_t *job, hx_alloc *a)
{
	char tmp[HX_PATH_MAX];

	if (hx_default_plan_dir(job->std_out, job->work_dir, a->out_dir,
				sizeof(a->out_dir)) == HEXI_OK)
		return;
	a->out_dir[0] = '\0';
	if (getcwd(tmp, sizeof(tmp)) != NULL)
		hexi_strlcpy(a->out_dir, tmp, sizeof(a->out_dir));
}

static hexi_rc fill_nodes(const slurm_job_info_t *job,
			  const slurm_step_layout_t *lay, hx_alloc *a)
{
	hostlist_t hl = slurm_hostlist_create(lay->node_list);
	char *h;
	hexi_rc rc = HEXI_OK;
	int i = 0;

	if (hl == NULL)
		return hexi_error(HEXI_ERR_SLURM, "step node list '%.64s'",
				  lay->node_list);
	while (rc == HEXI_OK && (h = slurm_hostlist_shift(hl)) != NULL) {
		hx_alloc_node *n = &a->nodes[i];
		int k = host_index(job->nodes, h);

		if (i >= a->nnodes ||
		    hexi_strlcpy(n->name, h, sizeof(n->name)) != HEXI_OK) {
			rc =
			    hexi_error(HEXI_ERR_SLURM, "step node list '%.64s'",
				       lay->node_list);
		} else if (k < 0) {
			rc =
			    hexi_error(HEXI_ERR_SLURM,
				       "node %s of the step is not in job %u's "
				       "node list",
				       h, a->job_id);
		} else if ((uint32_t)k < job->gres_detail_cnt &&
			   job->gres_detail_str[k] != NULL &&
			   hx_gres_parse(job->gres_detail_str[k], &n->gres) !=
			       HEXI_OK) {
			rc = hexi_error_prefix(HEXI_ERR_SLURM, "node %s", h);
		} else {
			n->ntasks = lay->tasks[i];
			n->tids =
			    calloc(n->ntasks ? n->ntasks : 1, sizeof(*n->tids));
			if (n->tids == NULL)
				rc = hexi_error(HEXI_ERR_NOMEM, "no memory");
			else
				memcpy(n->tids, lay->tids[i],
				       n->ntasks * sizeof(*n->tids));
			a->ntasks += n->ntasks;
		}
		free(h);
		i++;
	}
	slurm_hostlist_destroy(hl);
	return rc;
}

hexi_rc hx_discover(uint32_t job_id, uint32_t step_id, hx_alloc *a)
{
	job_info_msg_t *jresp = NULL;
	slurm_step_layout_t *lay = NULL;
	slurm_step_id_t sid = {job_id, NO_VAL, step_id};
	hexi_rc rv = HEXI_ERR_SLURM;

	memset(a, 0, sizeof(*a));
	a->job_id = job_id;
	a->step_id = step_id;
	if (slurm_load_job(&jresp, job_id, SHOW_DETAIL) != 0 ||
	    jresp->record_count < 1) {
		rv = hexi_error(HEXI_ERR_SLURM, "job %u: cannot load: %s",
				job_id, slurm_strerror(slurm_get_errno()));
		goto out;
	}
	lay = slurm_job_step_layout_get(&sid);
	if (lay == NULL || lay->node_cnt < 1 || lay->node_cnt > HX_NODES_MAX) {
		rv = hexi_error(HEXI_ERR_SLURM,
				"step %u.%u: cannot get the task layout: %s",
				job_id, step_id,
				slurm_strerror(slurm_get_errno()));
		goto out;
	}
	a->nnodes = (int)lay->node_cnt;
	a->nodes = calloc(lay->node_cnt, sizeof(*a->nodes));
	if (a->nodes == NULL) {
		rv = hexi_error(HEXI_ERR_NOMEM, "no memory");
		goto out;
	}
	rv = fill_nodes(&jresp->job_array[0], lay, a);
	if (rv == HEXI_OK)
		job_out_dir(&jresp->job_array[0], a);
	if (rv == HEXI_OK && jresp->job_array[0].het_job_id != NO_VAL)
		a->het_leader = jresp->job_array[0].het_job_id;
out:
	if (lay != NULL)
		slurm_job_step_layout_free(lay);
	if (jresp != NULL)
		slurm_free_job_info_msg(jresp);
	if (rv != HEXI_OK)
		hx_alloc_fini(a);
	return rv;
}

/* ---- heterogeneous steps ------------------------------------------------ */

static int is_het(const slurm_job_info_t *j)
{
	return j->het_job_id != 0 && j->het_job_id != NO_VAL;
}

/* The records of het job leader by component offset: by[offset] (NULL
 * where missing); *n = 1 + the highest offset. */
static hexi_rc het_records(const job_info_msg_t *resp, uint32_t leader,
			   const slurm_job_info_t **by, int *n)
{
	*n = 0;
	for (int k = 0; k < HX_COMPS_MAX; k++)
		by[k] = NULL;
	for (uint32_t i = 0; i < resp->record_count; i++) {
		const slurm_job_info_t *j = &resp->job_array[i];

		if (is_het(j) && j->het_job_id != leader)
			return hexi_error(HEXI_ERR_INVAL,
					  "job %u is component %u of "
					  "heterogeneous job %u: name the "
					  "leader (srun --jobid=%u)",
					  j->job_id, j->het_job_offset,
					  j->het_job_id, j->het_job_id);
		if (!is_het(j))
			return hexi_error(HEXI_ERR_UNSUPPORTED,
					  "job %u is not a heterogeneous job: "
					  "HexiScale plans a step over several "
					  "components (srun ... : ... or "
					  "--het-group=LIST) only in one "
					  "(sbatch or salloc A : B)",
					  leader);
		if (j->het_job_offset >= HX_COMPS_MAX)
			return hexi_error(HEXI_ERR_RANGE,
					  "job %u: component %u out of range",
					  leader, j->het_job_offset);
		by[j->het_job_offset] = j;
		if ((int)j->het_job_offset >= *n)
			*n = (int)j->het_job_offset + 1;
	}
	for (int k = 0; k < *n; k++)
		if (by[k] == NULL)
			return hexi_error(HEXI_ERR_SLURM,
					  "job %u: component %d missing",
					  leader, k);
	return HEXI_OK;
}

/* The nodes of component j (offset k) as step nodes a->nodes[node_off..],
 * one task per GPU, global task ids from task_off on. */
static hexi_rc het_comp_nodes(const slurm_job_info_t *j, int k, int cap,
			      hx_alloc *a, hx_alloc_comp *c)
{
	hostlist_t hl = slurm_hostlist_create(j->nodes);
	char *h;
	hexi_rc rc = HEXI_OK;

	if (hl == NULL)
		return hexi_error(HEXI_ERR_SLURM, "job %u: node list '%.64s'",
				  j->job_id, j->nodes ? j->nodes : "");
	for (int i = 0; rc == HEXI_OK && (h = slurm_hostlist_shift(hl)) != NULL;
	     i++) {
		hx_alloc_node *n = &a->nodes[a->nnodes];

		for (int m = 0; rc == HEXI_OK && m < a->nnodes; m++)
			if (!strcmp(a->nodes[m].name, h))
				rc = hexi_error(HEXI_ERR_UNSUPPORTED,
						"node %s is in two components "
						"of job %u (a plan node is "
						"one component's)",
						h, a->job_id);
		if (rc == HEXI_OK &&
		    (a->nnodes >= cap ||
		     hexi_strlcpy(n->name, h, sizeof(n->name)) != HEXI_OK))
			rc = hexi_error(HEXI_ERR_RANGE, "job %u: node list",
					j->job_id);
		if (rc == HEXI_OK && (uint32_t)i < j->gres_detail_cnt &&
		    j->gres_detail_str[i] != NULL &&
		    hx_gres_parse(j->gres_detail_str[i], &n->gres) != HEXI_OK)
			rc = hexi_error_prefix(HEXI_ERR_SLURM, "node %s", h);
		if (rc == HEXI_OK && n->gres.ngpus == 0)
			rc = hexi_error(HEXI_ERR_NODEV,
					"component %d (job %u) has no GPUs on "
					"node %s: a heterogeneous step is "
					"planned over every GPU of its "
					"components, one task per GPU (ask "
					"each component for GPUs, e.g. "
					"--gpus-per-task=1)",
					k, j->job_id, h);
		if (rc == HEXI_OK) {
			n->ntasks = n->gres.ngpus;
			n->tids = calloc((size_t)n->ntasks, sizeof(*n->tids));
			if (n->tids == NULL)
				rc = hexi_error(HEXI_ERR_NOMEM, "no memory");
			for (int t = 0; rc == HEXI_OK && t < n->ntasks; t++)
				n->tids[t] = (uint32_t)(a->ntasks + t);
		}
		if (rc == HEXI_OK) {
			a->ntasks += n->ntasks;
			c->ntasks += n->ntasks;
			c->nnodes++;
			a->nnodes++;
		}
		free(h);
	}
	slurm_hostlist_destroy(hl);
	return rc;
}

static hexi_rc het_fill(const job_info_msg_t *resp, uint32_t leader,
			const hx_het_request *req, hx_alloc *a)
{
	const slurm_job_info_t *by[HX_COMPS_MAX];
	int n, maxnodes = 0;
	hexi_rc rc;

	if ((rc = het_records(resp, leader, by, &n)) != HEXI_OK)
		return rc;
	for (int k = 0; k < HX_COMPS_MAX; k++)
		if (req->want[k] && k >= n)
			return hexi_error(HEXI_ERR_INVAL,
					  "job %u has components 0-%d; srun "
					  "asks for component %d",
					  leader, n - 1, k);
	for (int k = 0; k < n; k++)
		maxnodes += req->want[k] ? (int)by[k]->num_nodes : 0;
	if (maxnodes > HX_NODES_MAX)
		return hexi_error(HEXI_ERR_RANGE,
				  "job %u: more than %d nodes in the step",
				  leader, HX_NODES_MAX);
	a->comps = calloc((size_t)req->ncomps, sizeof(*a->comps));
	a->jobs = calloc((size_t)n, sizeof(*a->jobs));
	a->nodes =
	    calloc((size_t)(maxnodes > 0 ? maxnodes : 1), sizeof(*a->nodes));
	if (a->comps == NULL || a->jobs == NULL || a->nodes == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "no memory");
	a->njobs = n;
	for (int k = 0; k < n; k++)
		a->jobs[k] = by[k]->job_id;
	for (int k = 0; k < n; k++) {
		hx_alloc_comp *c = &a->comps[a->ncomps];

		if (!req->want[k])
			continue;
		*c = (hx_alloc_comp){.job_id = by[k]->job_id,
				     .offset = k,
				     .task_off = a->ntasks,
				     .node_off = a->nnodes};
		a->ncomps++;
		if ((rc = het_comp_nodes(by[k], k, maxnodes, a, c)) != HEXI_OK)
			return rc;
	}
	job_out_dir(by[0], a);
	return HEXI_OK;
}

hexi_rc hx_discover_het(uint32_t leader, const hx_het_request *req, hx_alloc *a)
{
	job_info_msg_t *resp = NULL;
	hexi_rc rv;

	memset(a, 0, sizeof(*a));
	a->job_id = leader;
	a->step_id = NO_VAL;
	if (slurm_load_job(&resp, leader, SHOW_DETAIL) != 0 ||
	    resp->record_count < 1)
		rv = hexi_error(HEXI_ERR_SLURM, "job %u: cannot load: %s",
				leader, slurm_strerror(slurm_get_errno()));
	else
		rv = het_fill(resp, leader, req, a);
	if (resp != NULL)
		slurm_free_job_info_msg(resp);
	if (rv != HEXI_OK)
		hx_alloc_fini(a);
	return rv;
}

/* Component c's part of the step as Slurm laid it out must be the
 * plan's: the same nodes in order, the same tasks on each. */
static hexi_rc het_layout_same(const hx_alloc *a, const hx_alloc_comp *c,
			       const slurm_step_layout_t *lay, uint32_t step)
{
	hostlist_t hl;
	char *h;
	hexi_rc rc = HEXI_OK;
	int i = 0;

	if ((int)lay->node_cnt != c->nnodes || (int)lay->task_cnt != c->ntasks)
		return hexi_error(HEXI_ERR_MISMATCH,
				  "step %u.%u: component %d (job %u) has %u "
				  "tasks on %u nodes, but the job has %d GPUs "
				  "on %d nodes there (a heterogeneous step "
				  "needs one task per GPU of each of its "
				  "components)",
				  a->job_id, step, c->offset, c->job_id,
				  lay->task_cnt, lay->node_cnt, c->ntasks,
				  c->nnodes);
	if ((hl = slurm_hostlist_create(lay->node_list)) == NULL)
		return hexi_error(HEXI_ERR_SLURM, "step node list '%.64s'",
				  lay->node_list);
	for (; rc == HEXI_OK && (h = slurm_hostlist_shift(hl)) != NULL; i++) {
		const hx_alloc_node *n = &a->nodes[c->node_off + i];
		int same = i < c->nnodes && !strcmp(n->name, h) &&
			   lay->tasks[i] == n->ntasks;

		for (int t = 0; same && t < n->ntasks; t++)
			same = lay->tids[i][t] + (uint32_t)c->task_off ==
			       n->tids[t];
		if (!same)
			rc = hexi_error(HEXI_ERR_MISMATCH,
					"step %u.%u: Slurm put tasks on node "
					"%s of component %d otherwise than "
					"one per GPU in block order, as "
					"HexiScale planned (use the default "
					"distribution, --distribution=block)",
					a->job_id, step, h, c->offset);
		free(h);
	}
	slurm_hostlist_destroy(hl);
	return rc;
}

hexi_rc hx_het_verify(const hx_alloc *a, uint32_t step_id)
{
	hexi_rc rc = HEXI_OK;

	for (int k = 0; rc == HEXI_OK && k < a->njobs; k++) {
		slurm_step_id_t sid = {a->jobs[k], NO_VAL, step_id};
		slurm_step_layout_t *lay = slurm_job_step_layout_get(&sid);
		const hx_alloc_comp *c = NULL;

		for (int m = 0; m < a->ncomps; m++)
			if (a->comps[m].offset == k)
				c = &a->comps[m];
		if (c != NULL && lay == NULL)
			rc = hexi_error(HEXI_ERR_MISMATCH,
					"step %u.%u does not run on component "
					"%d (job %u), for which HexiScale "
					"planned it: %s",
					a->job_id, step_id, k, a->jobs[k],
					slurm_strerror(slurm_get_errno()));
		else if (c == NULL && lay != NULL)
			rc = hexi_error(HEXI_ERR_MISMATCH,
					"step %u.%u runs on component %d (job "
					"%u) too, which srun's command line "
					"did not name (--het-group)",
					a->job_id, step_id, k, a->jobs[k]);
		else if (c != NULL)
			rc = het_layout_same(a, c, lay, step_id);
		if (lay != NULL)
			slurm_job_step_layout_free(lay);
	}
	return rc;
}

hexi_rc hx_het_step_span(uint32_t job_id, uint32_t step_id, int *ncomps,
			 uint32_t *leader)
{
	job_info_msg_t *resp = NULL;
	const slurm_job_info_t *by[HX_COMPS_MAX];
	hexi_rc rv = HEXI_OK;
	int n = 0;

	*ncomps = 1;
	*leader = 0;
	if (slurm_load_job(&resp, job_id, SHOW_ALL) != 0 ||
	    resp->record_count < 1) {
		rv = hexi_error(HEXI_ERR_SLURM, "job %u: cannot load: %s",
				job_id, slurm_strerror(slurm_get_errno()));
		goto out;
	}
	if (!is_het(&resp->job_array[0]))
		goto out;
	*leader = resp->job_array[0].het_job_id;
	if (resp->job_array[0].job_id != *leader) {
		slurm_free_job_info_msg(resp);
		resp = NULL;
		if (slurm_load_job(&resp, *leader, SHOW_ALL) != 0) {
			rv = hexi_error(HEXI_ERR_SLURM,
					"job %u: cannot load: %s", *leader,
					slurm_strerror(slurm_get_errno()));
			goto out;
		}
	}
	if ((rv = het_records(resp, *leader, by, &n)) != HEXI_OK)
		goto out;
	*ncomps = 0;
	for (int k = 0; k < n; k++) {
		slurm_step_id_t sid = {by[k]->job_id, NO_VAL, step_id};
		slurm_step_layout_t *lay = slurm_job_step_layout_get(&sid);

		if (lay != NULL) {
			(*ncomps)++;
			slurm_job_step_layout_free(lay);
		}
	}
out:
	if (resp != NULL)
		slurm_free_job_info_msg(resp);
	return rv;
}

hexi_rc hx_node_addr(const char *node, char *addr, size_t cap)
{
	node_info_msg_t *resp = NULL;
	const char *na;
	hexi_rc rv;

	if ((rv = hexi_strlcpy(addr, node, cap)) != HEXI_OK)
		return hexi_error(rv, "node %.64s: name longer than %zu bytes",
				  node, cap - 1);
	if (slurm_load_node_single(&resp, (char *)node, SHOW_ALL) != 0 ||
	    resp == NULL || resp->record_count != 1 ||
	    (na = resp->node_array[0].node_addr) == NULL || na[0] == '\0')
		goto out; /* the name, as Slurm itself does without NodeAddr */
	if (!hexi_is_printable(na) || strpbrk(na, ";|,") != NULL)
		rv = hexi_error(HEXI_ERR_INVAL,
				"node %s: NodeAddr has a character that "
				"MASTER_ADDR cannot carry",
				node);
	else if (hexi_strlcpy(addr, na, cap) != HEXI_OK)
		rv = hexi_error(HEXI_ERR_RANGE,
				"node %s: NodeAddr of %zu bytes is longer than "
				"the %zu that MASTER_ADDR can carry",
				node, strlen(na), cap - 1);
out:
	if (resp != NULL)
		slurm_free_node_info_msg(resp);
	return rv;
}
