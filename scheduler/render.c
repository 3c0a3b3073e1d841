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

#define SVG_BOX_W 170
#define SVG_BOX_H 94
#define SVG_GAP	  36
#define SVG_ROW_H 120
#define SVG_LEFT  130
#define SVG_TOP	  56

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

/* A stable pastel colour per GPU type name. */
static void type_colour(const char *type, char *buf, size_t cap)
{
	static const char *const pal[] = {"#cfe2f3", "#d9ead3", "#fff2cc",
					  "#f4cccc", "#d9d2e9", "#fce5cd",
					  "#d0e0e3", "#ead1dc"};
	uint64_t h = hsj_fnv1a64(type, strlen(type));

	snprintf(buf, cap, "%s", pal[h % (sizeof(pal) / sizeof(pal[0]))]);
}

static void svg_stage(FILE *f, const hexi_plan *p, const hexi_stage *s, int x,
		      int y, int last)
{
	char colour[16], line[BOX_W + 1];

	type_colour(p->cluster->nodes[s->devices[0].node].gpu_type, colour,
		    sizeof(colour));
	fprintf(f,
		"<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"6\" "
		"fill=\"%s\" stroke=\"#333\"/>\n",
		x, y, SVG_BOX_W, SVG_BOX_H, colour);
	for (int k = 0; k < BOX_LINES; k++) {
		box_line(p, s, k, line);
		fprintf(f, "<text x=\"%d\" y=\"%d\">", x + 8, y + 18 + 17 * k);
		xml_text(f, line);
		fputs("</text>\n", f);
	}
	if (!last)
		fprintf(f,
			"<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
			"stroke=\"#333\" marker-end=\"url(#arrow)\"/>\n",
			x + SVG_BOX_W, y + SVG_BOX_H / 2,
			x + SVG_BOX_W + SVG_GAP - 4, y + SVG_BOX_H / 2);
}

static void svg_body(FILE *f, const hexi_plan *p)
{
	int maxs = 1;

	for (int i = 0; i < p->npipelines; i++)
		if (p->pipelines[i].nstages > maxs)
			maxs = p->pipelines[i].nstages;
	fprintf(
	    f,
	    "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
	    "height=\"%d\" font-family=\"monospace\" font-size=\"12\">\n"
	    "<defs><marker id=\"arrow\" markerWidth=\"8\" markerHeight=\"8\" "
	    "refX=\"6\" refY=\"3\" orient=\"auto\"><path d=\"M0,0 L6,3 L0,6 "
	    "z\" fill=\"#333\"/></marker></defs>\n"
	    "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
	    SVG_LEFT + maxs * (SVG_BOX_W + SVG_GAP),
	    SVG_TOP + p->npipelines * SVG_ROW_H);
	fprintf(f, "<text x=\"10\" y=\"24\" font-size=\"14\">plan %s: ",
		p->hash[0] ? p->hash : "(unhashed)");
	xml_text(f, p->model.name);
	fprintf(f, " on %d GPUs, %d pipelines", p->world_size, p->npipelines);
	if (p->pred.iter_s > 0)
		fprintf(f, ", iteration %.4g s, MFU %.2f%%", p->pred.iter_s,
			100.0 * p->pred.mfu);
	fputs("</text>\n", f);
	for (int i = 0; i < p->npipelines; i++) {
		const hexi_pipeline *pl = &p->pipelines[i];
		int y = SVG_TOP + i * SVG_ROW_H;
		fprintf(f,
			"<text x=\"10\" y=\"%d\">pipeline %d</text>\n"
			"<text x=\"10\" y=\"%d\">batch %d, m %d</text>\n",
			y + 30, i, y + 48, pl->batch, pl->micro_batches);
		for (int s = 0; s < pl->nstages; s++)
			svg_stage(f, p, &pl->stages[s],
				  SVG_LEFT + s * (SVG_BOX_W + SVG_GAP), y,
				  s + 1 == pl->nstages);
	}
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
