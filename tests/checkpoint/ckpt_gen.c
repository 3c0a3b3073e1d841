/*
 * ckpt_gen - test and benchmark helper (not installed): write, check or
 * reshard fixture checkpoints (see ckpt_fixture.h).
 *
 *   ckpt_gen save DIR STEP [model options] [--tp 2,3] [--hash H] [--model M]
 *   ckpt_gen save-plan DIR STEP PLAN.json   tensors of a real plan's layout
 *   ckpt_gen check DIR SEED            data of every tensor == fixture(SEED)
 *   ckpt_gen reshard SRC DST [model options] --tp 3,1 [--hash H]
 *   ckpt_gen prepare DIR STEP   hexi_ckpt_save_prepare, print the staging
 *                               name, hold the writer lock until stdin ends
 * model options: --layers L --vocab V --hidden C --ffn F --opt
 * Exit status: 0, 1 on a data mismatch, or the hexi_rc of a failure.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_fixture.h"

typedef struct gen {
	fx_model m;
	int tp[16], np;
	const char *hash, *model;
} gen;

static int parse_tp(const char *s, gen *g)
{
	char *end;

	g->np = 0;
	while (*s && g->np < 16) {
		long v = strtol(s, &end, 10);
		if (end == s || v < 1 || v > 64)
			return -1;
		g->tp[g->np++] = (int)v;
		s = *end == ',' ? end + 1 : end;
		if (*end != ',' && *end != '\0')
			return -1;
	}
	return g->np > 0 ? 0 : -1;
}

static int parse(int argc, char **argv, int i, gen *g)
{
	g->m.layers = 2;
	g->m.vocab = 64;
	g->m.hidden = 16;
	g->m.ffn = 48;
	g->m.opt = 0;
	g->tp[0] = 2;
	g->tp[1] = 3;
	g->np = 2;
	g->hash = "00112233aabbccdd";
	g->model = "fixture";
	for (; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--opt") == 0) {
			g->m.opt = 1;
			continue;
		}
		if (v == NULL)
			return -1;
		i++;
		if (strcmp(a, "--layers") == 0)
			g->m.layers = atoi(v);
		else if (strcmp(a, "--vocab") == 0)
			g->m.vocab = atoll(v);
		else if (strcmp(a, "--hidden") == 0)
			g->m.hidden = atoll(v);
		else if (strcmp(a, "--ffn") == 0)
			g->m.ffn = atoll(v);
		else if (strcmp(a, "--tp") == 0) {
			if (parse_tp(v, g) < 0)
				return -1;
		} else if (strcmp(a, "--hash") == 0)
			g->hash = v;
		else if (strcmp(a, "--model") == 0)
			g->model = v;
		else
			return -1;
	}
	return g->m.layers >= 1 && g->m.vocab >= 1 && g->m.hidden >= 1 &&
		       g->m.ffn >= 1
		   ? 0
		   : -1;
}

static int fail(hexi_rc rc)
{
	fprintf(stderr, "ckpt_gen: %s\n", hexi_errmsg(rc));
	return (int)rc;
}

static int save_plan(const char *dir, int64_t step, const char *path)
{
	hexi_plan *p = NULL;
	hexi_layout *l = NULL;
	char *json = NULL;
	hexi_rc rc;

	if ((rc = hexi_plan_load(path, NULL, &p)) == HEXI_OK &&
	    (rc = hexi_layout_create(p, &l)) == HEXI_OK &&
	    (rc = hexi_plan_to_json(p, &json)) == HEXI_OK)
		rc = fx_save_model(dir, l, p->world_size, step, p->hash,
				   p->model.name, json);
	free(json);
	hexi_layout_destroy(l);
	hexi_plan_destroy(p);
	return rc == HEXI_OK ? 0 : fail(rc);
}

/* A writer that holds DIR's lock (and its staging directory) until its
 * standard input reaches end of file: the other side of lock tests. */
static int prepare_hold(const char *dir, int64_t step)
{
	char stage[HEXI_CKPT_STAGE_MAX], c;
	hexi_ckpt_meta m;
	hexi_rc rc;

	fx_meta(&m, step, 1, "00112233aabbccdd");
	if ((rc = hexi_ckpt_save_prepare(dir, &m, stage)) != HEXI_OK)
		return fail(rc);
	printf("%s\n", stage);
	fflush(stdout);
	while (fread(&c, 1, 1, stdin) == 1)
		;
	return 0;
}

int main(int argc, char **argv)
{
	hexi_ckpt_reader *r = NULL;
	hexi_layout *l;
	hexi_rc rc;
	gen g;
	int bad;

	hexi_log_set_level(HEXI_LOG_ERROR);
	if (argc >= 4 && strcmp(argv[1], "check") == 0) {
		if ((rc = hexi_ckpt_open(argv[2], NULL, &r)) != HEXI_OK)
			return fail(rc);
		bad = fx_check(r, strtoull(argv[3], NULL, 10), 1000000);
		if (bad < 0)
			rc = HEXI_ERR_IO;
		hexi_ckpt_close(r);
		if (bad < 0)
			return fail(rc);
		printf("%d tensors differ\n", bad);
		return bad ? 1 : 0;
	}
	if (argc == 4 && strcmp(argv[1], "prepare") == 0)
		return prepare_hold(argv[2], atoll(argv[3]));
	if (argc == 5 && strcmp(argv[1], "save-plan") == 0)
		return save_plan(argv[2], atoll(argv[3]), argv[4]);
	if (argc < 4 || parse(argc, argv, 4, &g) < 0) {
		fprintf(stderr, "usage: see the header of ckpt_gen.c\n");
		return 2;
	}
	l = fx_layout(&g.m, g.np, g.tp);
	if (l == NULL)
		return 3;
	if (strcmp(argv[1], "save") == 0) {
		rc = fx_save_model(argv[2], l, fx_world(g.np, g.tp),
				   atoll(argv[3]), g.hash, g.model,
				   "{\"fixture\":true}");
	} else if (strcmp(argv[1], "reshard") == 0) {
		hexi_ckpt_reshard_target t = {l, fx_world(g.np, g.tp), g.hash,
					      "{\"fixture\":\"resharded\"}", 0};
		const char *mb = getenv("CKPT_GEN_BUFFER_MIB");
		t.max_buffer_bytes = mb ? (size_t)atol(mb) << 20 : 0;
		rc = hexi_ckpt_open(argv[2], NULL, &r);
		if (rc == HEXI_OK)
			rc = hexi_ckpt_reshard(r, &t, argv[3], NULL, NULL);
		hexi_ckpt_close(r);
	} else {
		rc = HEXI_ERR_USAGE;
	}
	fx_layout_free(l);
	return rc == HEXI_OK ? 0 : fail(rc);
}
