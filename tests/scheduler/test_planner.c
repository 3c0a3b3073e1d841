/*
 * test_planner.c - the planner on hand-built clusters: layer and batch
 * splits against brute force, every strategy yields structurally valid
 * plans, determinism for a seed, hexiscale vs megatron vs exhaustive.
 */
#include "config.h"

#include <float.h>
#include <math.h>
#include <stdio.h>

#include "planner_int.h"
#include "sched_fixture.h"
#include "tap.h"

/* ---- splits against brute force ---------------------------------------- */

static double brute_split(int L, int S, const double *a, const double *c,
			  const int *cap, int s, double cur)
{
	double best = DBL_MAX;

	if (s == S - 1) {
		if (L < 1 || L > cap[s])
			return DBL_MAX;
		return fmax(cur, a[s] * L + c[s]);
	}
	for (int n = 1; n <= cap[s] && n <= L - (S - s - 1); n++) {
		double v = brute_split(L - n, S, a, c, cap, s + 1,
				       fmax(cur, a[s] * n + c[s]));
		best = v < best ? v : best;
	}
	return best;
}

static void split_layers(void)
{
	uint64_t r = 7;
	int bad = 0, infeas = 0;

	for (int it = 0; it < 300; it++) {
		double a[5], c[5], got = 0, want;
		int cap[5], n[5], S = 1 + (int)(r % 5), L = S + (int)(r % 11);
		long sum = 0;
		for (int s = 0; s < S; s++) {
			r = r * 6364136223846793005ull + 1442695040888963407ull;
			a[s] = 0.1 + (double)(r >> 40) / (1 << 24);
			c[s] = (double)((r >> 20) & 0xff) / 256.0;
			cap[s] = 1 + (int)((r >> 8) % (unsigned)(L + 1));
		}
		want = brute_split(L, S, a, c, cap, 0, 0);
		if (sched_split_layers(L, S, a, c, cap, n) != 0) {
			infeas++;
			if (want != DBL_MAX) {
				bad++;
				tap_diag("L=%d S=%d: split says infeasible, "
					 "brute force %.6g",
					 L, S, want);
				for (int s = 0; s < S; s++)
					tap_diag("  a %.17g c %.17g cap %d",
						 a[s], c[s], cap[s]);
			}
			continue;
		}
		for (int s = 0; s < S; s++) {
			sum += n[s];
			got = fmax(got, a[s] * n[s] + c[s]);
			bad += n[s] < 1 || n[s] > cap[s];
		}
		if (sum != L || fabs(got - want) > 1e-9 * want) {
			bad++;
			tap_diag("L=%d S=%d got %.9g want %.9g sum %ld", L, S,
				 got, want, sum);
		}
	}
	is_int(bad, 0,
	       "layer split: optimal min-max under caps (300 cases, "
	       "%d infeasible)",
	       infeas);
}

/* Batch split against brute force, for both pipeline-time functions. */
static double pipe_time(hexi_cost_kind k, const double *c, int S, int m)
{
	return k == HEXI_COST_REFERENCE ? sched_ref_pipe_s(c, S, m)
					: sched_hexi_pipe_s(c, S, m);
}

static void split_batches(void)
{
	uint64_t r = 11;
	int bad = 0;

	for (int it = 0; it < 200; it++) {
		sched_ctx x;
		double c[3][4], want = DBL_MAX, got = 0;
		const double *cs[3] = {c[0], c[1], c[2]};
		int S[3], m[3], np = 1 + it % 3, M = np + (it / 3) % 9, sum = 0;
		memset(&x, 0, sizeof(x));
		x.kind = it % 2 ? HEXI_COST_REFERENCE : HEXI_COST_HEXISCALE;
		for (int p = 0; p < np; p++) {
			S[p] = 1 + (int)((r >> 7) % 4);
			for (int s = 0; s < S[p]; s++) {
				r = r * 6364136223846793005ull +
				    1442695040888963407ull;
				c[p][s] = 0.05 + (double)(r >> 40) / (1 << 24);
			}
		}
		/* brute force over every composition of M */
		for (int a = 1; a <= M; a++)
			for (int b = np > 1 ? 1 : 0; b <= (np > 1 ? M : 0);
			     b++) {
				int cc = M - a - b;
				double t;
				if ((np == 1 && b) || (np == 2 && cc) ||
				    (np == 3 && cc < 1) || (np == 1 && a != M))
					continue;
				t = pipe_time(x.kind, c[0], S[0], a);
				if (np > 1)
					t = fmax(t, pipe_time(x.kind, c[1],
							      S[1], b));
				if (np > 2)
					t = fmax(t, pipe_time(x.kind, c[2],
							      S[2], cc));
				want = fmin(want, t);
			}
		if (sched_split_batches(&x, np, M, cs, S, m)) {
			bad++;
			continue;
		}
		for (int p = 0; p < np; p++) {
			sum += m[p];
			bad += m[p] < 1;
			got = fmax(got, pipe_time(x.kind, c[p], S[p], m[p]));
		}
		if (sum != M || fabs(got - want) > 1e-9 * want) {
			bad++;
			tap_diag("np %d M %d kind %d: got %.9g want %.9g", np,
				 M, x.kind, got, want);
		}
	}
	is_int(bad, 0,
	       "batch split: optimal max pipeline time (200 cases, "
	       "GPipe and 1F1B)");
}

/* ---- structural validity (what hexi_plan_validate checks) -------------- */

static int plan_ok(const sched_ctx *x, const pl_cand *c, int M, int mb, int kv,
		   char *why, size_t n)
{
	int *used = calloc((size_t)x->ndev, sizeof(int)), ok = 1, tot = 0;

	for (int p = 0; p < c->np; p++) {
		const hexi_pipeline *pl = &c->pp[p];
		int l = 0;
		tot += pl->micro_batches;
		if (pl->batch != pl->micro_batches * mb)
			ok = 0, snprintf(why, n, "pipeline %d batch", p);
		for (int s = 0; s < pl->nstages; s++) {
			const hexi_stage *st = &pl->stages[s];
			if (st->layer_begin != l || st->layer_end <= l)
				ok = 0,
				snprintf(why, n, "layers p%d s%d", p, s);
			l = st->layer_end;
			if (st->tp > kv)
				ok = 0, snprintf(why, n, "tp > kv");
			for (int i = 0; i < st->tp; i++) {
				int d = sched_dev_index(x, st->devices[i].node,
							st->devices[i].gpu);
				if (d < 0 || used[d]++)
					ok = 0,
					snprintf(why, n, "device twice");
				if (st->devices[i].node != st->devices[0].node)
					ok = 0,
					snprintf(why, n, "TP spans nodes");
			}
		}
		if (l != x->m.layers)
			ok = 0, snprintf(why, n, "pipeline %d layers", p);
	}
	if (tot != M)
		ok = 0, snprintf(why, n, "micro-batches %d != %d", tot, M);
	free(used);
	return ok;
}

static void st_init(pl_state *st, fx *f, const hexi_plan_opts *o, int gb,
		    int mb)
{
	memset(st, 0, sizeof(*st));
	st->x = f->x;
	st->o = o;
	st->mb = mb;
	st->M = gb / mb;
	st->kv = f->x.m.kv_heads;
	st->max_p = st->x.ndev < st->M ? st->x.ndev : st->M;
	st->budget_s = 30;
	st->max_evals = HEXI_PLAN_MAX_EVALS;
	st->t0 = hexi_now_s();
	st->rng = o->seed;
	st->type_max = calloc((size_t)f->x.ntypes, sizeof(int));
	for (int i = 0; i < f->c.nnodes; i++)
		st->type_max[i] = f->c.nodes[i].ngpus;
}

static double run(fx *f, hexi_strategy s, int gb, int mb, const char *name,
		  pl_cand *out)
{
	hexi_plan_opts o;
	pl_state st;
	pl_cand best = {0};
	char why[128] = "";
	double score;
	hexi_rc rc;

	hexi_plan_opts_defaults(&o);
	o.strategy = s;
	best.score = DBL_MAX;
	st_init(&st, f, &o, gb, mb);
	rc = s == HEXI_STRATEGY_MEGATRON     ? pl_search_megatron(&st, &best)
	     : s == HEXI_STRATEGY_EXHAUSTIVE ? pl_search_exhaustive(&st, &best)
	     : s == HEXI_STRATEGY_RANDOM     ? pl_search_random(&st, &best)
					     : pl_search_hexiscale(&st, &best);
	is_int(rc, HEXI_OK, "%s: search", name);
	if (s != HEXI_STRATEGY_MEGATRON)
		ok(best.pp && best.score < PL_INFEASIBLE,
		   "%s: found a plan that fits (%.4f s/iter, %ld candidates)",
		   name, best.score, st.evals);
	if (best.pp)
		ok(plan_ok(&f->x, &best, st.M, st.mb, st.kv, why, sizeof(why)),
		   "%s: plan is structurally valid %s", name, why);
	free(st.type_max);
	score = best.score;
	if (out)
		*out = best;
	else
		pl_cand_free(&best);
	return score;
}

static void paper_cluster(void)
{
	const fx_node nd[3] = {{"a800-80g", 3, 200, 312, 0.55, 80},
			       {"rtx4090", 3, 25, 165.2, 0.55, 24},
			       {"rtx3090", 2, 25, 71, 0.55, 24}};
	hexi_model m;
	hexi_train t;
	fx f;
	double h, h2, meg, ex;
	pl_cand a = {0}, b = {0};

	fx_model(&m, "llama2-13b", 40, 5120, 40, 40, 13824);
	fx_train(&t, 32, 1);
	fx_init(&f, nd, 3, 0.7, &m, &t, HEXI_COST_HEXISCALE);
	h = run(&f, HEXI_STRATEGY_HEXISCALE, 32, 1, "hexiscale", &a);
	h2 = run(&f, HEXI_STRATEGY_HEXISCALE, 32, 1, "hexiscale again", &b);
	is_near(h, h2, 0, "hexiscale: deterministic for a seed");
	ok(a.np == b.np, "hexiscale: same pipeline count twice");
	meg = run(&f, HEXI_STRATEGY_MEGATRON, 32, 1, "megatron", NULL);
	/* 13B at 16 B/param: megatron's even 5-layer stages overflow 24 GiB */
	ok(h < meg, "hexiscale %.3f s beats megatron (%s)", h,
	   meg < PL_INFEASIBLE ? "slower" : "does not fit");
	ok(run(&f, HEXI_STRATEGY_RANDOM, 32, 1, "random", NULL) >=
	       h * (1 - 1e-9),
	   "random partition is not better than hexiscale");
	ex = run(&f, HEXI_STRATEGY_EXHAUSTIVE, 32, 1, "exhaustive", NULL);
	ok(ex <= h * (1 + 1e-9),
	   "exhaustive %.4f <= hexiscale %.4f (gap "
	   "%.2f%%)",
	   ex, h, 100 * (h / ex - 1));
	pl_cand_free(&a);
	pl_cand_free(&b);
	fx_fini(&f);
}

/* ---- the public entry point on the example clusters ------------------- */

static hexi_plan *create(const char *cluster, const char *model, int gb,
			 const hexi_plan_opts *o, hexi_rc *rc)
{
	char path[1024];
	const char *top = getenv("top_srcdir");
	hexi_cluster *c = NULL;
	hexi_model m;
	hexi_train t;
	hexi_plan *p = NULL;

	snprintf(path, sizeof(path), "%s/examples/clusters/%s.json",
		 top ? top : "../..", cluster);
	*rc = hexi_cluster_load(path, NULL, &c);
	if (*rc == HEXI_OK)
		*rc = hexi_model_builtin(model, &m);
	hexi_train_defaults(&t);
	t.global_batch = gb;
	if (*rc == HEXI_OK)
		*rc = hexi_plan_create(c, &m, &t, o, &p);
	hexi_cluster_destroy(c);
	return p;
}

static void public_api(void)
{
	static const struct {
		const char *cluster, *model;
		hexi_strategy s;
		hexi_cost_kind k;
		int noasym, uniform;
	} cases[] = {
	    {"paper", "llama2-7b", HEXI_STRATEGY_HEXISCALE, HEXI_COST_HEXISCALE,
	     0, 0},
	    {"paper", "llama2-7b", HEXI_STRATEGY_HEXISCALE, HEXI_COST_REFERENCE,
	     0, 0},
	    {"hetero-a100-4090-24", "llama2-13b", HEXI_STRATEGY_HEXISCALE,
	     HEXI_COST_HEXISCALE, 0, 0},
	    {"hetero-a100-4090-24", "llama2-13b", HEXI_STRATEGY_HEXISCALE,
	     HEXI_COST_HEXISCALE, 1, 0},
	    {"hetero-a100-4090-24", "llama2-7b", HEXI_STRATEGY_HEXISCALE,
	     HEXI_COST_HEXISCALE, 0, 1},
	    {"hetero-a100-4090-24", "llama2-13b", HEXI_STRATEGY_MEGATRON,
	     HEXI_COST_HEXISCALE, 0, 0},
	    {"mixed-64", "llama2-70b", HEXI_STRATEGY_HEXISCALE,
	     HEXI_COST_HEXISCALE, 0, 0},
	    {"mixed-64", "llama2-7b", HEXI_STRATEGY_RANDOM, HEXI_COST_HEXISCALE,
	     0, 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		hexi_plan_opts o;
		hexi_plan *p;
		hexi_rc rc;
		int same_tp = 1, same_m = 1;
		hexi_plan_opts_defaults(&o);
		o.strategy = cases[i].s;
		o.cost_model = cases[i].k;
		o.no_asymmetric_tp = cases[i].noasym;
		o.uniform_batch = cases[i].uniform;
		p = create(cases[i].cluster, cases[i].model, 64, &o, &rc);
		is_int(rc, HEXI_OK, "create %s %s case %zu: %s",
		       cases[i].cluster, cases[i].model, i, hexi_errmsg(rc));
		if (!p)
			continue;
		is_int(hexi_plan_validate(p), HEXI_OK, "case %zu validates", i);
		ok(p->pred.iter_s > 0 && p->pred.mfu > 0 && p->pred.mfu < 1,
		   "case %zu: iteration %.3f s, MFU %.1f%%, %d pipelines", i,
		   p->pred.iter_s, 100 * p->pred.mfu, p->npipelines);
		for (int q = 0; q < p->npipelines; q++) {
			same_m &= p->pipelines[q].micro_batches ==
				  p->pipelines[0].micro_batches;
			for (int s = 0; s < p->pipelines[q].nstages; s++)
				same_tp &= p->pipelines[q].stages[s].tp ==
					   p->pipelines[0].stages[0].tp;
		}
		if (cases[i].noasym)
			ok(same_tp, "case %zu: --no-asymmetric-tp: one degree",
			   i);
		if (cases[i].uniform)
			ok(same_m, "case %zu: --uniform-batch: equal shares",
			   i);
		hexi_plan_destroy(p);
	}
}

static void bad_inputs(void)
{
	hexi_plan_opts o;
	hexi_plan *p;
	hexi_rc rc;

	hexi_plan_opts_defaults(&o);
	o.max_pipelines = 9;
	p = create("paper", "llama2-7b", 64, &o, &rc);
	is_int(rc, HEXI_ERR_RANGE, "more pipelines than GPUs: %s",
	       hexi_errmsg(rc));
	ok(!p && strstr(hexi_errmsg(rc), "max_pipelines"),
	   "the message names max_pipelines");
	hexi_plan_opts_defaults(&o);
	o.strategy = HEXI_STRATEGY_EXHAUSTIVE;
	p = create("mixed-64", "llama2-7b", 64, &o, &rc);
	is_int(rc, HEXI_ERR_RANGE, "exhaustive refuses 64 GPUs");
	hexi_plan_opts_defaults(&o);
	p = create("paper", "llama2-70b", 64, &o, &rc);
	is_int(rc, HEXI_ERR_NOFIT, "70b on the paper cluster does not fit: %s",
	       hexi_errmsg(rc));
	hexi_plan_destroy(p);
}

/* One node of 3 GPUs (local indices 4, 6, 7), a model of 2 KV heads (TP
 * <= 2), global batch 1: one pipeline of one micro-batch, where a TP-2
 * stage alone beats a TP-2 + TP-1 pipeline (the micro-batch runs through
 * both stages one after the other).  The planner leaves GPU 7 idle; with
 * use_all_gpus it may not. */
static hexi_plan *plan3(int all, hexi_rc *rc)
{
	static const int idx[3] = {4, 6, 7};
	hexi_cluster *c = NULL;
	hexi_model m;
	hexi_train t;
	hexi_plan_opts o;
	hexi_plan *p = NULL;

	*rc = hexi_cluster_create(1, NULL, &c);
	if (*rc == HEXI_OK)
		*rc = hexi_cluster_set_node(c, 0, "n1", "a100-80g", 3, idx, 0);
	if (*rc == HEXI_OK)
		*rc = hexi_cluster_validate(c);
	if (*rc == HEXI_OK)
		*rc = hexi_model_builtin("llama2-7b", &m);
	m.kv_heads = 2;
	hexi_train_defaults(&t);
	t.global_batch = 1;
	hexi_plan_opts_defaults(&o);
	o.use_all_gpus = all;
	if (*rc == HEXI_OK)
		*rc = hexi_plan_create(c, &m, &t, &o, &p);
	hexi_cluster_destroy(c);
	return p;
}

static void gpu_subset(void)
{
	hexi_rc rc, rc_all;
	hexi_plan *p = plan3(0, &rc), *a = plan3(1, &rc_all);
	hexi_role r;
	const hexi_stage *sg;

	is_int(rc, HEXI_OK, "3 GPUs, KV 2, batch 1: a plan%s%s", rc ? ": " : "",
	       rc ? hexi_errmsg(rc) : "");
	is_int(rc_all, HEXI_OK, "same with every GPU%s%s", rc_all ? ": " : "",
	       rc_all ? hexi_errmsg(rc_all) : "");
	if (!p || !a) {
		hexi_plan_destroy(p);
		hexi_plan_destroy(a);
		return;
	}
	is_int(a->world_size, 3, "use_all_gpus: 3 training ranks");
	is_int(a->nidle, 0, "use_all_gpus: no idle GPU");
	is_int(p->world_size, 2, "subsets: 2 training ranks");
	is_int(p->nidle, 1, "subsets: one GPU idle");
	ok(p->pred.iter_s < a->pred.iter_s * (1 - 1e-3),
	   "one GPU idle is faster: %.4f s < %.4f s with every GPU",
	   p->pred.iter_s, a->pred.iter_s);
	sg = &p->pipelines[0].stages[0];
	ok(p->npipelines == 1 && p->pipelines[0].nstages == 1 && sg->tp == 2,
	   "one TP-2 stage (%d pipelines, %d stages, TP %d)", p->npipelines,
	   p->pipelines[0].nstages, sg->tp);
	ok(sg->devices[0].node == 0 && sg->devices[0].gpu == 4 &&
	       sg->devices[1].gpu == 6,
	   "it trains on local GPUs 4 and 6 (%d, %d)", sg->devices[0].gpu,
	   sg->devices[1].gpu);
	if (p->nidle == 1)
		ok(p->idle[0].node == 0 && p->idle[0].gpu == 7 &&
		       p->idle[0].rank == 2,
		   "idle: node %d GPU %d rank %d (want 0, 7, 2)",
		   p->idle[0].node, p->idle[0].gpu, p->idle[0].rank);
	is_int(hexi_plan_tasks(p), 3, "3 tasks, one per GPU");
	rc = hexi_plan_role(p, 2, &r);
	ok(rc == HEXI_OK && r.idle && r.gpu == 7 && r.world_size == 2 &&
	       r.local_rank == 2 && r.local_world_size == 3,
	   "rank 2: idle on GPU 7, world 2, local rank %d of %d", r.local_rank,
	   r.local_world_size);
	rc = hexi_plan_role(p, 1, &r);
	ok(rc == HEXI_OK && !r.idle && r.tp_rank == 1 && r.local_rank == 1 &&
	       r.local_world_size == 3,
	   "rank 1 trains beside it: TP rank %d, local rank %d of %d",
	   r.tp_rank, r.local_rank, r.local_world_size);
	is_int(hexi_plan_validate(p), HEXI_OK, "the plan validates");
	hexi_plan_destroy(p);
	hexi_plan_destroy(a);
}

/*
 * One deadline for the whole planning.  A budget of 1 ns has passed by the
 * first check, so what runs after it is the same on any machine and the
 * test asserts on counted evaluations, not on time: the first search's
 * first pipeline count in one direction (its uniform TP degrees) and
 * nothing more.  Before, every search (6 memory settings, the node and
 * GPU subsets, the uniform baseline's whole grid) ran to its own first
 * check: 684 evaluations here before, 5 now.
 */
static void time_budget(void)
{
	hexi_plan_opts o;
	hexi_plan *p;
	hexi_rc rc;

	hexi_plan_opts_defaults(&o);
	o.time_budget_s = 1e-9;
	p = create("hetero-a100-4090-24", "llama2-13b", 64, &o, &rc);
	is_int(rc, HEXI_OK, "budget 1 ns: still a plan%s%s", rc ? ": " : "",
	       rc ? hexi_errmsg(rc) : "");
	if (p) {
		is_int(p->search.stop, HEXI_SEARCH_TIME,
		       "budget 1 ns: stopped by time");
		ok(p->search.evaluations > 0 && p->search.evaluations <= 100,
		   "budget 1 ns: %ld evaluations (no search starts after the "
		   "deadline; 684 when each search had its own)",
		   p->search.evaluations);
	}
	hexi_plan_destroy(p);
	o.time_budget_s = 0; /* the default: converges long before it */
	p = create("hetero-a100-4090-24", "llama2-13b", 64, &o, &rc);
	ok(rc == HEXI_OK && p->search.stop != HEXI_SEARCH_TIME &&
	       p->search.evaluations > 100,
	   "default budget: not stopped by time, %ld evaluations",
	   p ? p->search.evaluations : 0L);
	hexi_plan_destroy(p);
}

int main(void)
{
	split_layers();
	split_batches();
	paper_cluster();
	public_api();
	bad_inputs();
	gpu_subset();
	time_budget();
	return tap_done();
}
