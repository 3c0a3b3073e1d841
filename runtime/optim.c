/* optim.c - AdamW and SGD over the local parameters of a shard. */
#include "config.h"

#include "rt_model.h"

#include <math.h>

void rt_adamw_defaults(rt_adamw_opts *o)
{
	o->lr = 1e-3f;
	o->beta1 = 0.9f;
	o->beta2 = 0.95f;
	o->eps = 1e-8f;
	o->weight_decay = 0.0f;
}

void rt_adamw_span(float *w, const float *g, float *m, float *v, size_t n,
		   const rt_adamw_opts *o, int step, int decay)
{
	const float b1 = o->beta1, b2 = o->beta2;
	const float c1 = (float)(1.0 - pow(b1, step));
	const float c2 = (float)(1.0 - pow(b2, step));
	const float wd = decay ? o->weight_decay : 0.0f;
	for (size_t i = 0; i < n; i++) {
		float gi = g[i];
		float mi = b1 * m[i] + (1.0f - b1) * gi;
		float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
		m[i] = mi;
		v[i] = vi;
		float mhat = mi / c1, vhat = vi / c2;
		w[i] -= o->lr * (mhat / (sqrtf(vhat) + o->eps) + wd * w[i]);
	}
}

void rt_param_adamw(rt_param *p, const rt_adamw_opts *o, int step, int decay)
{
	rt_adamw_span(p->w, p->g, p->m, p->v, p->n, o, step, decay);
}

hexi_rc rt_adamw_check(const rt_adamw_opts *o, int step)
{
	if (step < 1)
		return hexi_error(HEXI_ERR_INVAL, "adamw: step %d must be >= 1",
				  step);
	if (!(o->lr >= 0.0f) || !(o->beta1 >= 0.0f && o->beta1 < 1.0f) ||
	    !(o->beta2 >= 0.0f && o->beta2 < 1.0f) || !(o->eps > 0.0f) ||
	    !(o->weight_decay >= 0.0f))
		return hexi_error(HEXI_ERR_INVAL,
				  "adamw: need lr >= 0, 0 <= beta < 1, eps > 0,"
				  " weight_decay >= 0 (lr %g beta1 %g beta2 "
				  "%g eps %g wd %g)",
				  (double)o->lr, (double)o->beta1,
				  (double)o->beta2, (double)o->eps,
				  (double)o->weight_decay);
	return HEXI_OK;
}

hexi_rc rt_model_adamw(rt_model *m, const rt_adamw_opts *o, int step)
{
	hexi_rc rc = rt_adamw_check(o, step);

	if (rc != HEXI_OK)
		return rc;
	for (int i = 0; i < rt_model_nparams(m); i++) {
		rt_param *p = rt_model_param(m, i);
		rt_param_adamw(p, o, step, p->ndim == 2);
	}
	return HEXI_OK;
}

void rt_model_sgd(rt_model *m, float lr)
{
	for (int i = 0; i < rt_model_nparams(m); i++) {
		rt_param *p = rt_model_param(m, i);
		for (size_t j = 0; j < p->n; j++)
			p->w[j] -= lr * p->g[j];
	}
}

double rt_model_grad_sumsq(rt_model *m, const unsigned char *select)
{
	double s = 0.0;
	for (int i = 0; i < rt_model_nparams(m); i++) {
		const rt_param *p = rt_model_param(m, i);
		if (select && !select[i])
			continue;
		for (size_t j = 0; j < p->n; j++)
			s += (double)p->g[j] * p->g[j];
	}
	return s;
}

void rt_model_grad_scale(rt_model *m, float s)
{
	for (int i = 0; i < rt_model_nparams(m); i++) {
		rt_param *p = rt_model_param(m, i);
		for (size_t j = 0; j < p->n; j++)
			p->g[j] *= s;
	}
}
