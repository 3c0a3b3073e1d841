/*
 * render.c - pictures of a plan: text boxes for a terminal and an SVG file.
 * Pipelines are rows, stages are boxes (node, GPU type, TP degree, layers,
 * ranks, and the prediction when the plan has one).
 */
#include "config.h"

#include "json_util.h"

#include <stdlib.h>
#include <string.h>

#define BOX_W	      18 /* columns inside a box: 3 boxes fit in 80 */
#define BOXES_PER_ROW 3
#define BOX_LINES     5

/* "ranks 4-7", "rank 2" or "ranks 0,3,5" (shortened to fit). */
static void ranks_text(const hexi_stage *s, char *buf, size_t cap)
{
	int contiguous = 1;
	size_t n;

	for (int d = 1; d < s->tp; d++)
		contiguous = contiguous &&
			     s->devices[d].rank == s->devices[d - 1].rank + 1;
	if (s->tp == 1) {
		snprintf(buf, cap, "rank %d", s->devices[0].rank);
		return;
	}
	if (contiguous) {
		snprintf(buf, cap, "ranks %d-%d", s->devices[0].rank,
			 s->devices[s->tp - 1].rank);
		return;
	}
	n = (size_t)snprintf(buf, cap, "ranks %d", s->devices[0].rank);
	for (int d = 1; d < s->tp && n < cap; d++)
		n += (size_t)snprintf(buf + n, cap - n, ",%d",
				      s->devices[d].rank);
	if (n >= cap && cap > 4)
		memcpy(buf + cap - 4, "...", 4);
}

/* Line k (0..BOX_LINES-1) of a stage's box, BOX_W characters wide. */
static void box_line(const hexi_plan *p, const hexi_stage *s, int k, char *out)
{
	const hexi_node *n = &p->cluster->nodes[s->devices[0].node];
	char buf[2 * HEXI_NAME_MAX + 32];

	switch (k) {
	case 0:
		snprintf(buf, sizeof(buf), "%s TP%d", n->name, s->tp);
		break;
	case 1:
		snprintf(buf, sizeof(buf), "%s", n->gpu_type);
		break;
	case 2:
		snprintf(buf, sizeof(buf), "layers %d-%d (%d)", s->layer_begin,
			 s->layer_end - 1, s->layer_end - s->layer_begin);
		break;
	case 3:
		ranks_text(s, buf, sizeof(buf));
		break;
	default:
		if (s->time_s > 0 || s->mem_gib > 0)
			snprintf(buf, sizeof(buf), "%.3g s %.1f GiB", s->time_s,
				 s->mem_gib);
		else
			buf[0] = '\0';
	}
	snprintf(out, BOX_W + 1, "%-*.*s", BOX_W, BOX_W, buf);
}

static void print_row(FILE *f, const hexi_plan *p, const hexi_pipeline *pl,
		      int s0, int s1)
{
	char line[BOX_W + 1];

	fputs("  ", f);
	for (int s = s0; s < s1; s++)
		fprintf(f, "%s+%.*s+", s > s0 ? "    " : "", BOX_W + 2,
			"------------------------------------------");
	fputc('\n', f);
	for (int k = 0; k < BOX_LINES; k++) {
		fputs(s0 > 0 && k == 0 ? ">>" : "  ", f);
		for (int s = s0; s < s1; s++) {
			box_line(p, &pl->stages[s], k, line);
			fprintf(f, "%s| %s |",
				s == s0	 ? ""
				: k == 0 ? "--->"
					 : "    ",
				line);
		}
		fputs(k == 0 && s1 < pl->nstages ? "-->>\n" : "\n", f);
	}
	fputs("  ", f);
	for (int s = s0; s < s1; s++)
		fprintf(f, "%s+%.*s+", s > s0 ? "    " : "", BOX_W + 2,
			"------------------------------------------");
	fputc('\n', f);
}

hexi_rc hexi_plan_render_text(const hexi_plan *p, FILE *f)
{
	hexi_rc rv = hexi_plan_validate(p);

	if (rv != HEXI_OK)
		return hexi_error_prefix(rv, "render");
	if (f == NULL)
		return hexi_error(HEXI_ERR_INVAL, "render: no output stream");
	fprintf(f, "plan %s: %s on %d GPUs, %d pipeline%s, global batch %d",
		p->hash[0] ? p->hash : "(unhashed)", p->model.name,
		p->world_size, p->npipelines, p->npipelines == 1 ? "" : "s",
		p->train.global_batch);
	if (p->strategy[0] != '\0')
		fprintf(f, ", strategy %s", p->strategy);
	fputc('\n', f);
	if (p->pred.iter_s > 0)
		fprintf(f,
			"predicted: iteration %.4g s, DP sync %.4g s, %.6g "
			"tokens/s, MFU %.2f%%\n",
			p->pred.iter_s, p->pred.dp_sync_s, p->pred.tokens_per_s,
			100.0 * p->pred.mfu);
	for (int i = 0; i < p->npipelines; i++) {
		const hexi_pipeline *pl = &p->pipelines[i];
		fprintf(f, "\npipeline %d: batch %d, %d micro-batch%s of %d", i,
			pl->batch, pl->micro_batches,
			pl->micro_batches == 1 ? "" : "es",
			pl->batch / pl->micro_batches);
		if (pl->time_s > 0)
			fprintf(f, ", time %.4g s", pl->time_s);
		fputc('\n', f);
		for (int s = 0; s < pl->nstages; s += BOXES_PER_ROW)
			print_row(f, p, pl, s,
				  s + BOXES_PER_ROW < pl->nstages
				      ? s + BOXES_PER_ROW
				      : pl->nstages);
	}
	if (ferror(f))
		return hexi_error(HEXI_ERR_IO, "render: write failed");
	return HEXI_OK;
}

/* ---- SVG ----------------------------------------------------------------- */

#define SVG_BOX_W     170
#define SVG_BOX_H     94
#define SVG_GAP	      36
#define SVG_ROW_H     120 /* one row of stage boxes */
#define SVG_PIPE_GAP  14  /* between pipelines */
#define SVG_LEFT      130
#define SVG_TOP	      56
#define SVG_WRAP      5 /* stages per row: 5 boxes are 1160 px wide */
#define SVG_LEGEND_H  28
#define SVG_IDLE_W    54 /* one idle GPU */
#define SVG_MAX_TYPES 64
#define SVG_MIN_W     720 /* the title line */

/* Okabe & Ito's colour-blind-safe palette without its black (the text
 * colour), in their order; a plan's GPU types take them in order of first
 * appearance among the cluster's nodes.  Types beyond the seventh repeat a
 * colour: every box also names its type, so colour is never the only cue. */
static const char *const svg_pal[] = {"#E69F00", "#56B4E9", "#009E73",
				      "#F0E442", "#0072B2", "#D55E00",
				      "#CC79A7"};
#define SVG_NPAL ((int)(sizeof(svg_pal) / sizeof(svg_pal[0])))

/* The distinct GPU types of the plan's cluster, in node order. */
typedef struct svg_types {
	int n;
	const char *name[SVG_MAX_TYPES];
	int used[SVG_MAX_TYPES], idle[SVG_MAX_TYPES]; /* GPUs of each type */
} svg_types;

static void xml_text(FILE *f, const char *s)
{
	for (; *s != '\0'; s++)
		switch (*s) {
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '&':
			fputs("&amp;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		default:
			fputc(*s, f);
		}
}

static int type_index(const svg_types *t, const char *type)
{
	for (int i = 0; i < t->n; i++)
		if (strcmp(t->name[i], type) == 0)
			return i;
	return -1;
}

static const char *type_colour(const svg_types *t, const char *type)
{
	int i = type_index(t, type);

	return svg_pal[(i < 0 ? 0 : i) % SVG_NPAL];
}

/* 1 if GPU gpu of node ni holds a stage of the plan. */
static int gpu_used(const hexi_plan *p, int ni, int gpu)
{
	for (int i = 0; i < p->npipelines; i++)
		for (int s = 0; s < p->pipelines[i].nstages; s++) {
			const hexi_stage *st = &p->pipelines[i].stages[s];
			for (int d = 0; d < st->tp; d++)
				if (st->devices[d].node == ni &&
				    st->devices[d].gpu == gpu)
					return 1;
		}
	return 0;
}

static int node_gpu(const hexi_node *n, int k)
{
	return n->gpu_index != NULL ? n->gpu_index[k] : k;
}

/* Types in node order with their used and idle GPU counts. */
static void collect_types(const hexi_plan *p, svg_types *t)
{
	memset(t, 0, sizeof(*t));
	for (int ni = 0; ni < p->cluster->nnodes; ni++) {
		const hexi_node *n = &p->cluster->nodes[ni];
		int i = type_index(t, n->gpu_type);
		if (i < 0 && t->n < SVG_MAX_TYPES) {
			i = t->n++;
			t->name[i] = n->gpu_type;
		}
		for (int k = 0; i >= 0 && k < n->ngpus; k++) {
			if (gpu_used(p, ni, node_gpu(n, k)))
				t->used[i]++;
			else
				t->idle[i]++;
		}
	}
}

static int total_idle(const svg_types *t)
{
	int n = 0;

	for (int i = 0; i < t->n; i++)
		n += t->idle[i];
	return n;
}

/* One swatch per type: colour, name, GPUs used (and idle). */
static int legend_w(const svg_types *t, int i)
{
	return 20 + 8 * ((int)strlen(t->name[i]) + (t->idle[i] > 0 ? 26 : 14));
}

static int svg_width(const svg_types *t, int maxs)
{
	int w = SVG_LEFT + maxs * (SVG_BOX_W + SVG_GAP), lw = 10;

	for (int i = 0; i < t->n; i++)
		lw += legend_w(t, i);
	w = lw > w ? lw : w;
	return w < SVG_MIN_W ? SVG_MIN_W : w;
}

static void svg_legend(FILE *f, const svg_types *t, int y)
{
	int x = 10;

	for (int i = 0; i < t->n; i++) {
		fprintf(f,
			"<rect class=\"legend\" x=\"%d\" y=\"%d\" width=\"14\" "
			"height=\"14\" fill=\"%s\" stroke=\"#333\"/>\n"
			"<text x=\"%d\" y=\"%d\">",
			x, y, svg_pal[i % SVG_NPAL], x + 20, y + 12);
		xml_text(f, t->name[i]);
		fprintf(f, " \303\227%d", t->used[i]);
		if (t->idle[i] > 0)
			fprintf(f, " (+%d idle)", t->idle[i]);
		fputs("</text>\n", f);
		x += legend_w(t, i);
	}
}

static void svg_stage(FILE *f, const hexi_plan *p, const svg_types *t,
		      const hexi_stage *s, int x, int y)
{
	char line[BOX_W + 1];
	const char *colour =
	    type_colour(t, p->cluster->nodes[s->devices[0].node].gpu_type);

	/* a pale fill of the type colour, a full-colour band on the left */
	fprintf(f,
		"<rect class=\"stage\" x=\"%d\" y=\"%d\" width=\"%d\" "
		"height=\"%d\" rx=\"6\" fill=\"%s\" fill-opacity=\"0.3\" "
		"stroke=\"#333\"/>\n"
		"<rect x=\"%d\" y=\"%d\" width=\"8\" height=\"%d\" "
		"fill=\"%s\"/>\n",
		x, y, SVG_BOX_W, SVG_BOX_H, colour, x + 1, y + 6,
		SVG_BOX_H - 12, colour);
	for (int k = 0; k < BOX_LINES; k++) {
		box_line(p, s, k, line);
		fprintf(f, "<text x=\"%d\" y=\"%d\">", x + 14, y + 18 + 17 * k);
		xml_text(f, line);
		fputs("</text>\n", f);
	}
}

/* Arrow from stage s to s+1; a stage that ends a row points down and back
 * to the start of the next row. */
static void svg_arrow(FILE *f, int s, int y)
{
	const int col = s % SVG_WRAP, mid = y + SVG_BOX_H / 2;
	const int x = SVG_LEFT + col * (SVG_BOX_W + SVG_GAP) + SVG_BOX_W;

	if (col + 1 < SVG_WRAP) {
		fprintf(f,
			"<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
			"stroke=\"#333\" marker-end=\"url(#arrow)\"/>\n",
			x, mid, x + SVG_GAP - 4, mid);
		return;
	}
	const int xl = SVG_LEFT - SVG_GAP / 2, xr = x + SVG_GAP / 2,
		  ym = y + SVG_BOX_H + (SVG_ROW_H - SVG_BOX_H) / 2;
	fprintf(f,
		"<polyline points=\"%d,%d %d,%d %d,%d %d,%d %d,%d %d,%d\" "
		"fill=\"none\" stroke=\"#333\" marker-end=\"url(#arrow)\"/>\n",
		x, mid, xr, mid, xr, ym, xl, ym, xl, mid + SVG_ROW_H,
		SVG_LEFT - 4, mid + SVG_ROW_H);
}

static int pipe_rows(const hexi_pipeline *pl)
{
	return pl->nstages > 0 ? (pl->nstages + SVG_WRAP - 1) / SVG_WRAP : 1;
}

/* Pipeline i at height y; returns the height it took. */
static int svg_pipeline(FILE *f, const hexi_plan *p, const svg_types *t, int i,
			int y)
{
	const hexi_pipeline *pl = &p->pipelines[i];

	fprintf(f,
		"<text x=\"10\" y=\"%d\">pipeline %d</text>\n"
		"<text x=\"10\" y=\"%d\">batch %d, m %d</text>\n",
		y + 30, i, y + 48, pl->batch, pl->micro_batches);
	for (int s = 0; s < pl->nstages; s++) {
		int ys = y + (s / SVG_WRAP) * SVG_ROW_H;
		svg_stage(f, p, t, &pl->stages[s],
			  SVG_LEFT + (s % SVG_WRAP) * (SVG_BOX_W + SVG_GAP),
			  ys);
		if (s + 1 < pl->nstages)
			svg_arrow(f, s, ys);
	}
	return pipe_rows(pl) * SVG_ROW_H + SVG_PIPE_GAP;
}

/* The GPUs no stage uses, as dashed boxes per node ("idle" row). */
static void svg_idle(FILE *f, const hexi_plan *p, const svg_types *t, int y)
{
	int x = SVG_LEFT;

	fprintf(f, "<text x=\"10\" y=\"%d\">idle GPUs</text>\n", y + 30);
	for (int ni = 0; ni < p->cluster->nnodes; ni++) {
		const hexi_node *n = &p->cluster->nodes[ni];
		for (int k = 0; k < n->ngpus; k++) {
			int g = node_gpu(n, k);
			if (gpu_used(p, ni, g))
				continue;
			if (x + SVG_IDLE_W >
			    SVG_LEFT + SVG_WRAP * (SVG_BOX_W + SVG_GAP)) {
				x = SVG_LEFT;
				y += SVG_BOX_H / 2 + 8;
			}
			fprintf(f,
				"<rect class=\"idle\" x=\"%d\" y=\"%d\" "
				"width=\"%d\" height=\"%d\" rx=\"4\" "
				"fill=\"%s\" fill-opacity=\"0.15\" "
				"stroke=\"%s\" stroke-width=\"2\" "
				"stroke-dasharray=\"4 3\"/>\n"
				"<text x=\"%d\" y=\"%d\">",
				x, y + 10, SVG_IDLE_W - 6, SVG_BOX_H / 2,
				type_colour(t, n->gpu_type),
				type_colour(t, n->gpu_type), x + 4, y + 28);
			xml_text(f, n->name);
			fprintf(
			    f,
			    "</text>\n<text x=\"%d\" y=\"%d\">gpu %d</text>\n",
			    x + 4, y + 44, g);
			x += SVG_IDLE_W;
		}
	}
}

static int idle_rows(const svg_types *t)
{
	const int per_row = SVG_WRAP * (SVG_BOX_W + SVG_GAP) / SVG_IDLE_W;
	int n = total_idle(t);

	return n > 0 ? (n + per_row - 1) / per_row : 0;
}

static void svg_header(FILE *f, const hexi_plan *p, int width, int height)
{
	fprintf(
	    f,
	    "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
	    "height=\"%d\" font-family=\"monospace\" font-size=\"12\">\n"
	    "<defs><marker id=\"arrow\" markerWidth=\"8\" markerHeight=\"8\" "
	    "refX=\"6\" refY=\"3\" orient=\"auto\"><path d=\"M0,0 L6,3 L0,6 "
	    "z\" fill=\"#333\"/></marker></defs>\n"
	    "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
	    width, height);
	fprintf(f, "<text x=\"10\" y=\"24\" font-size=\"14\">plan %s: ",
		p->hash[0] ? p->hash : "(unhashed)");
	xml_text(f, p->model.name);
	fprintf(f, " on %d GPUs, %d pipeline%s", p->world_size, p->npipelines,
		p->npipelines == 1 ? "" : "s");
	if (p->pred.iter_s > 0)
		fprintf(f, ", iteration %.4g s, MFU %.2f%%", p->pred.iter_s,
			100.0 * p->pred.mfu);
	fputs("</text>\n", f);
}

static void svg_body(FILE *f, const hexi_plan *p)
{
	svg_types t;
	int maxs = 1, height = SVG_TOP + SVG_LEGEND_H, y;

	collect_types(p, &t);
	for (int i = 0; i < p->npipelines; i++) {
		if (p->pipelines[i].nstages > maxs)
			maxs = p->pipelines[i].nstages;
		height +=
		    pipe_rows(&p->pipelines[i]) * SVG_ROW_H + SVG_PIPE_GAP;
	}
	if (idle_rows(&t) > 0)
		height += idle_rows(&t) * (SVG_BOX_H / 2 + 8) + 24;
	maxs = maxs < SVG_WRAP ? maxs : SVG_WRAP;
	svg_header(f, p, svg_width(&t, maxs), height);
	svg_legend(f, &t, SVG_TOP - 20);
	y = SVG_TOP + SVG_LEGEND_H - 10;
	for (int i = 0; i < p->npipelines; i++)
		y += svg_pipeline(f, p, &t, i, y);
	if (total_idle(&t) > 0)
		svg_idle(f, p, &t, y);
	fputs("</svg>\n", f);
}

hexi_rc hexi_plan_render_svg(const hexi_plan *p, const char *path)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	hexi_rc rv = hexi_plan_validate(p);

	if (rv != HEXI_OK)
		return hexi_error_prefix(rv, "render");
	if (path == NULL)
		return hexi_error(HEXI_ERR_INVAL, "render: no SVG path");
	f = open_memstream(&buf, &len);
	if (f == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "render: out of memory");
	svg_body(f, p);
	if (fclose(f) != 0 || buf == NULL)
		rv = hexi_error(HEXI_ERR_NOMEM, "render: out of memory");
	else
		rv = hexi_write_file_atomic(path, buf, len, 0644);
	free(buf);
	return rv;
}
