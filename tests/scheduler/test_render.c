/* test_render.c - text and SVG pictures of a plan. */
#include "config.h"

#include "sched_test.h"

#include <unistd.h>

static int count(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	static char buf[1 << 16];
	size_t n;

	if (f == NULL)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

int main(void)
{
	hexi_cluster *c = tcluster(
	    "{\"gpu_types\":[{\"name\":\"x<&>\",\"peak_tflops\":10,"
	    "\"mem_gib\":8,\"mem_bw_gbps\":100,\"intra_bw_gbps\":5}],"
	    "\"nodes\":[{\"name\":\"n1\",\"gpu\":\"a800\",\"count\":3},"
	    "{\"name\":\"n2\",\"gpu\":\"x<&>\",\"count\":8}],"
	    "\"inter_bw_gbps\":0.7}");
	/* p0: 6 stages (wraps after 4); p1: one TP3 stage; n2 GPUs 6, 7 idle */
	tpipe pp[2] = {{6,
			3,
			{{1, 1, 0, 0, 1},
			 {1, 1, 1, 1, 2},
			 {1, 1, 2, 2, 3},
			 {1, 1, 3, 3, 4},
			 {1, 1, 4, 4, 5},
			 {1, 1, 5, 5, 6}}},
		       {2, 1, {{0, 3, 0, 0, 6}}}};
	hexi_plan *p = NULL;
	char *text = NULL, *svg;
	size_t len = 0;
	char path[] = "/tmp/hexi-svg-XXXXXX";
	hexi_model m;
	FILE *f;
	int fd;

	/* a 6-layer model with 6 KV heads */
	hexi_model_builtin("tiny-4l", &m);
	p = tplan(c, "tiny-4l", 2, pp);
	m.layers = 6;
	snprintf(m.name, sizeof(m.name), "tiny-6l");
	p->model = m;
	p->pipelines[1].stages[0].time_s = 0.25;
	p->pipelines[1].stages[0].mem_gib = 3.5;
	p->pred.iter_s = 1.5;
	p->pred.mfu = 0.123;
	is_int(hexi_plan_hash(p), HEXI_OK, "hash");

	f = open_memstream(&text, &len);
	is_int(hexi_plan_render_text(p, f), HEXI_OK, "render text");
	fclose(f);
	printf("%s", text);
	ok(strstr(text, p->hash) != NULL, "text shows the hash");
	ok(strstr(text, "pipeline 0: batch 6, 3 micro-batches of 2") != NULL,
	   "pipeline 0 header");
	ok(strstr(text, "pipeline 1: batch 2, 1 micro-batch of 2") != NULL,
	   "pipeline 1 header");
	ok(strstr(text, "| n1 TP3") != NULL &&
	       strstr(text, "| a800-80g ") != NULL,
	   "node, type, TP");
	ok(strstr(text, "layers 0-5 (6)") != NULL, "layer range");
	ok(strstr(text, "ranks 6-8") != NULL, "rank range");
	ok(strstr(text, "0.25 s 3.5 GiB") != NULL, "stage prediction");
	ok(strstr(text, "MFU 12.30%") != NULL, "MFU");
	is_int(count(text, "| n2 TP1"), 6, "six boxes of pipeline 0");
	is_int(count(text, "-->>"), 1, "pipeline 0 wraps once");
	free(text);

	fd = mkstemp(path);
	close(fd);
	is_int(hexi_plan_render_svg(p, path), HEXI_OK, "render SVG");
	svg = slurp(path);
	ok(svg && strncmp(svg, "<svg ", 5) == 0, "starts with <svg");
	ok(svg && strstr(svg, "</svg>\n") != NULL, "ends with </svg>");
	is_int(svg ? count(svg, "class=\"stage\"") : 0, 7, "one box per stage");
	is_int(svg ? count(svg, "marker-end") : 0, 5, "arrows between stages");
	is_int(svg ? count(svg, "<polyline") : 0, 1,
	       "6 stages wrap into 2 rows of 5 once");
	is_int(svg ? count(svg, "class=\"legend\"") : 0, 2,
	       "legend: one swatch per GPU type");
	ok(svg && strstr(svg, "fill=\"#E69F00\"") != NULL &&
	       strstr(svg, "fill=\"#56B4E9\"") != NULL,
	   "two types: the first two Okabe-Ito colours");
	is_int(svg ? count(svg, "class=\"idle\"") : 0, 2, "two idle GPUs drawn");
	ok(svg && strstr(svg, "(+2 idle)") != NULL, "legend counts idle GPUs");
	ok(svg && strstr(svg, ">gpu 7<") != NULL, "idle GPU named");
	ok(svg && strstr(svg, "x&lt;&amp;&gt;") != NULL &&
	       strstr(svg, "x<&>") == NULL,
	   "type name escaped");
	is_int(svg ? count(svg, "<text") : 0, 1 + 2 + 2 * 2 + 7 * 5 + 1 + 2 * 2,
	       "title, legend, row labels, 5 lines per box, idle GPUs");
	unlink(path);
	is_int(hexi_plan_render_svg(p, "/nonexistent/dir/x.svg"),
	       HEXI_ERR_NOTFOUND, "unwritable path is an error");
	p->pipelines[0].micro_batches = 4;
	f = fopen("/dev/null", "w");
	is_int(hexi_plan_render_text(p, f), HEXI_ERR_INVAL,
	       "invalid plan not rendered");
	fclose(f);
	hexi_plan_destroy(p);
	hexi_cluster_destroy(c);
	return tap_done();
}
