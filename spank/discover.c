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
#include <libgen.h>
#include <slurm/slurm.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void hx_alloc_fini(hx_alloc *a)
{
	for (int i = 0; a->nodes != NULL && i < a->nnodes; i++)
		free(a->nodes[i].tids);
	free(a->nodes);
	memset(a, 0, sizeof(*a));
}

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

static void job_out_dir(const slurm_job_info_t *job, hx_alloc *a)
{
	char tmp[HX_PATH_MAX];

	a->out_dir[0] = '\0';
	if (job->std_out != NULL && job->std_out[0] == '/' &&
	    hexi_strlcpy(tmp, job->std_out, sizeof(tmp)) == HEXI_OK &&
	    strchr(dirname(tmp), '%') == NULL) {
		hexi_strlcpy(a->out_dir, tmp, sizeof(a->out_dir));
		return;
	}
	if (job->work_dir != NULL && job->work_dir[0] == '/')
		hexi_strlcpy(a->out_dir, job->work_dir, sizeof(a->out_dir));
	else if (getcwd(tmp, sizeof(tmp)) != NULL)
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
out:
	if (lay != NULL)
		slurm_job_step_layout_free(lay);
	if (jresp != NULL)
		slurm_free_job_info_msg(jresp);
	if (rv != HEXI_OK)
		hx_alloc_fini(a);
	return rv;
}

void hx_node_addr(const char *node, char *addr, size_t cap)
{
	node_info_msg_t *resp = NULL;

	hexi_strlcpy(addr, node, cap);
	if (slurm_load_node_single(&resp, (char *)node, SHOW_ALL) == 0 &&
	    resp != NULL && resp->record_count == 1 &&
	    resp->node_array[0].node_addr != NULL &&
	    hexi_is_printable(resp->node_array[0].node_addr) &&
	    strpbrk(resp->node_array[0].node_addr, ";|,") == NULL)
		hexi_strlcpy(addr, resp->node_array[0].node_addr, cap);
	if (resp != NULL)
		slurm_free_node_info_msg(resp);
}
