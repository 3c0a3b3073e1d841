/*
 * gen_plans.c - writes the hand-made example plans of examples/plans/ into
 * DIR (example-plans.sh regenerates them and compares, so any change of the
 * plan format or hash shows up as a test failure).
 *
 *   gen_plans DIR
 */
#include "config.h"

#include "sched_test.h"

static int write_plan(const char *dir, const char *name, const char *cluster,
		      const char *model, int zero, int np, const tpipe *pp)
{
	hexi_cluster *c = tcluster(cluster);
	hexi_plan *p = tplan(c, model, np, pp);
	char path[4096], *js = NULL;
	int rc = 1;

	snprintf(p->strategy, sizeof(p->strategy), "manual");
	p->train.zero = zero;
	snprintf(path, sizeof(path), "%s/%s.json", dir, name);
	if (hexi_plan_to_json(p, &js) == HEXI_OK &&
	    hexi_write_file_atomic(path, js, strlen(js), 0644) == HEXI_OK)
		rc = 0;
	else
		fprintf(stderr, "gen_plans: %s: %s\n", name,
			hexi_errmsg(HEXI_ERR_INTERNAL));
	free(js);
	hexi_plan_destroy(p);
	hexi_cluster_destroy(c);
	return rc;
}

#define PAPER                                                                  \
	"{\"nodes\":[{\"name\":\"n1\",\"gpu\":\"a800\",\"count\":3},"          \
	"{\"name\":\"n2\",\"gpu\":\"rtx4090\",\"count\":3},"                   \
	"{\"name\":\"n3\",\"gpu\":\"rtx3090\",\"count\":2}],"                  \
	"\"inter_bw_gbps\":0.7}"

int main(int argc, char **argv)
{
	int rc = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: gen_plans DIR\n");
		return 2;
	}
	{
		/* paper cluster, llama2-7b: p0 = n1 TP2 + n2 TP2, p1 = n1 TP1
		 * + n2 TP1 + n3 TP2, ZeRO 1 over the two pipelines (their
		 * moments would not fit the 24 GiB GPUs whole);
		 * example-plans.sh checks that it fits */
		tpipe pp[2] = {
		    {20, 10, {{0, 2, 0, 0, 22}, {1, 2, 0, 22, 32}}},
		    {12,
		     6,
		     {{0, 1, 2, 0, 18}, {1, 1, 2, 18, 23}, {2, 2, 0, 23, 32}}}};
		rc |= write_plan(argv[1], "paper-7b", PAPER, "llama2-7b", 1, 2,
				 pp);
	}
	{
		/* one CPU node of 4 ranks, tiny-4l: p0 = TP2 x 4 layers, p1 =
		 * two TP1 stages */
		tpipe pp[2] = {{4, 2, {{0, 2, 0, 0, 4}}},
			       {4, 4, {{0, 1, 2, 0, 1}, {0, 1, 3, 1, 4}}}};
		rc |= write_plan(argv[1], "tiny-4l-cpu4",
				 "{\"nodes\":[{\"name\":\"localhost\",\"gpu\":"
				 "\"cpu\",\"count\":4}]}",
				 "tiny-4l", 0, 2, pp);
	}
	{
		/* two CPU nodes of 2, tiny-gqa (KV 3): p0 = c1 TP2, p1 = c2
		 * TP1 + TP1 */
		tpipe pp[2] = {{6, 3, {{0, 2, 0, 0, 4}}},
			       {2, 2, {{1, 1, 0, 0, 2}, {1, 1, 1, 2, 4}}}};
		rc |=
		    write_plan(argv[1], "tiny-gqa-cpu2x2",
			       "{\"nodes\":[{\"name\":\"c1\",\"gpu\":\"cpu\","
			       "\"count\":2},{\"name\":\"c2\",\"gpu\":\"cpu\","
			       "\"count\":2}],\"inter_bw_gbps\":10}",
			       "tiny-gqa", 0, 2, pp);
	}
	{
		/* tiny-8l: p0 = [TP2 layers 0-2, TP1 layers 3-7] on c1, p1 =
		 * [TP3 layers 0-7] on c2: TP 1, 2 and 3 in one plan */
		tpipe pp[2] = {{4, 2, {{0, 2, 0, 0, 3}, {0, 1, 2, 3, 8}}},
			       {4, 4, {{1, 3, 0, 0, 8}}}};
		rc |=
		    write_plan(argv[1], "tiny-8l-tp123",
			       "{\"nodes\":[{\"name\":\"c1\",\"gpu\":\"cpu\","
			       "\"count\":3},{\"name\":\"c2\",\"gpu\":\"cpu\","
			       "\"count\":3}],\"inter_bw_gbps\":10}",
			       "tiny-8l", 0, 2, pp);
	}
	return rc;
}
