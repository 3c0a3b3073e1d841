/*
 * train_params.c - the trainer's parameters as host arrays, whichever
 * trainer holds them (CPU model, or the GPU shard staged through the host):
 * what checkpoints (train_ckpt.c) and the test dump read and write.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_model.h"
#include "rt_train.h"

/* ---- parameters as host arrays (dump, checkpoints) ------------------------ */

int rt_train_nparams(const hexi_trainer *t)
{
#ifdef RT_GPU
	if (t->gpu != NULL)
		return rt_gtrain_nparams(t);
#endif
	return rt_model_nparams(t->model);
}

hexi_rc rt_train_param_host(hexi_trainer *t, int i, int fetch, rt_param **p)
{
#ifdef RT_GPU
	if (t->gpu != NULL)
		return rt_gtrain_param_host(t, i, fetch, p);
#endif
	(void)fetch;
	*p = rt_model_param(t->model, i);
	return *p != NULL ? HEXI_OK
			  : hexi_error(HEXI_ERR_RANGE, "parameter %d", i);
}

hexi_rc rt_train_param_store(hexi_trainer *t, int i, int moments)
{
#ifdef RT_GPU
	if (t->gpu != NULL)
		return rt_gtrain_param_store(t, i, moments);
#endif
	(void)t;
	(void)i;
	(void)moments;
	return HEXI_OK;
}

rt_sync *rt_train_sync(const hexi_trainer *t)
{
#ifdef RT_GPU
	if (t->gpu != NULL)
		return rt_gtrain_sync(t);
#endif
	return t->sync;
}

hexi_rc rt_train_seg_host(hexi_trainer *t, const rt_sync_seg *sg, int fetch,
			  float **m, float **v)
{
#ifdef RT_GPU
	if (t->gpu != NULL)
		return rt_gtrain_seg_host(t, sg, fetch, m, v);
#endif
	(void)t;
	(void)fetch;
	*m = sg->m;
	*v = sg->v;
	return HEXI_OK;
}

hexi_rc rt_train_seg_store(hexi_trainer *t, const rt_sync_seg *sg)
{
#ifdef RT_GPU
	if (t->gpu != NULL)
		return rt_gtrain_seg_store(t, sg);
#endif
	(void)t;
	(void)sg;
	return HEXI_OK;
}

/* ---- dump (tests) -------------------------------------------------------- */

hexi_rc hexi_trainer_dump(hexi_trainer *t, const char *prefix)
{
	char path[4096];
	FILE *f;
	hexi_rc rc = HEXI_OK;

	if (snprintf(path, sizeof(path), "%s.rank%d", prefix, t->rt->rank) >=
	    (int)sizeof(path))
		return hexi_error(HEXI_ERR_RANGE, "--dump %s: path too long",
				  prefix);
	f = fopen(path, "wb");
	if (f == NULL)
		return hexi_error(HEXI_ERR_IO,
				  "--dump %s: cannot create %s: %s", prefix,
				  path, strerror(errno));
	fprintf(f, "hexitrain-dump 1 rank %d pipeline %d nparams %d\n",
		t->rt->rank, t->rt->role.pipeline, rt_train_nparams(t));
	for (int i = 0; rc == HEXI_OK && i < rt_train_nparams(t); i++) {
		rt_param *p = NULL;
		if ((rc = rt_train_param_host(t, i, 1, &p)) != HEXI_OK)
			break;
		fprintf(f, "%s %lld %lld %d %d %zu\n", p->name,
			(long long)p->shape[0], (long long)p->shape[1],
			p->row_begin, p->row_end, p->n);
		if (fwrite(p->w, sizeof(float), p->n, f) != p->n)
			rc = hexi_error(HEXI_ERR_IO,
					"--dump %s: write of %s: %s", prefix,
					path, strerror(errno));
	}
	if (fclose(f) != 0 && rc == HEXI_OK)
		rc = hexi_error(HEXI_ERR_IO, "--dump %s: close of %s: %s",
				prefix, path, strerror(errno));
	return rc;
}
