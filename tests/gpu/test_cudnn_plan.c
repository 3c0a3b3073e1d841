/*
 * test_cudnn_plan.c - cuDNN's fused attention (runtime/cuda/rt_cudnn_attn.c)
 * planned without a GPU.  rt_cuda_sdpa_plan_offline sends the forward and
 * backward graphs of rt_cuda_sdpa through cuDNN's operation graph,
 * heuristics, support checks and NVRTC compilation for a GPU described by
 * its device properties (cuDNN's deviceless compilation, cuDNN >= 9.8).
 * tests/gpu/devprop/ holds H100 SXM, H200 and A100-SXM4-80GB properties.
 *
 * Without a CUDA driver, cuDNN cannot even try its runtime-compiled
 * engines, so where no libcuda.so.1 is installed this program first loads
 * the driver's stub library from the CUDA toolkit (CUDA_DIR at configure
 * time); with the stub, only the last step of a plan, loading the
 * compiled kernel, fails, and a plan counts as compiled.  That is what is
 * asserted here for every GPU file and shape in bf16, the dtype the
 * runtime gives cuDNN.  On a machine with a GPU and its driver the GPU's
 * own properties are checked as well and must give ready plans; with
 * --device FILE they are written to FILE (device-check.sh keeps them).
 *
 * usage: test_cudnn_plan.t [--device FILE] [DEVPROP.json...]
 *   no arguments: the JSON files of tests/gpu/devprop (make check);
 *   --device FILE alone: only this machine's GPU (device-check.sh).
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_cuda.h"
#include "tap.h"

#ifndef HEXI_CUDA_DIR
#define HEXI_CUDA_DIR "/usr/local/cuda"
#endif

/* The first NMAIN on every GPU; all of them on the first (each plan is
 * an NVRTC compilation: seconds). */
#define NMAIN 3
static const struct {
	int B, T, NH, NKV, hs;
	const char *what;
} shapes[] = {
    {4, 2048, 16, 16, 128, "device-check's ~1.1B model"},
    {2, 1024, 12, 12, 128, "device-check's ~0.45B model"},
    {1, 1024, 32, 8, 128, "GQA 4:1"},
    {2, 256, 16, 1, 64, "MQA"},
    {2, 37, 4, 2, 16, "test_kernels: GQA, short rows"},
    {1, 130, 2, 1, 128, "test_kernels: several tiles"},
    {1, 70, 3, 3, 48, "test_kernels: hs not 2^k"},
    {1, 1, 1, 1, 8, "one token, smallest head"},
};

static const char *const stage_name[] = {"refused", "compiled", "ready"};

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (f == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 &&
	    n < (1L << 20) && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = calloc((size_t)n + 1, 1)) != NULL &&
	    fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

/* The driver, or else the toolkit's stub, loaded under its soname so that
 * cuDNN's own dlopen("libcuda.so.1") finds it.  1: a real driver. */
static int load_driver(void)
{
	static const char *const stubs[] = {
	    HEXI_CUDA_DIR "/lib64/stubs/libcuda.so",
	    HEXI_CUDA_DIR "/targets/x86_64-linux/lib/stubs/libcuda.so",
	    HEXI_CUDA_DIR "/targets/sbsa-linux/lib/stubs/libcuda.so"};

	if (dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL) != NULL)
		return 1;
	for (size_t i = 0; i < sizeof(stubs) / sizeof(*stubs); i++)
		if (dlopen(stubs[i], RTLD_NOW | RTLD_GLOBAL) != NULL) {
			tap_diag("no CUDA driver: cuDNN gets the stub %s",
				 stubs[i]);
			return 0;
		}
	tap_skip_all(
	    "no libcuda.so.1 and no stub libcuda.so under " HEXI_CUDA_DIR
	    " (cuDNN cannot compile without one)");
	return 0;
}

/* The first n shapes in bf16 on one GPU's properties: at least `want`. */
static void check_gpu(const char *name, const char *json,
		      rt_cuda_plan_stage want, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		rt_cuda_sdpa_plans r;
		hexi_rc rc = rt_cuda_sdpa_plan_offline(
		    json, RT_CUDA_BF16, shapes[i].B, shapes[i].T, shapes[i].NH,
		    shapes[i].NKV, shapes[i].hs, &r);

		if (!ok(rc == HEXI_OK,
			"%s: %s (B%d T%d NH%d NKV%d hs%d) planned", name,
			shapes[i].what, shapes[i].B, shapes[i].T, shapes[i].NH,
			shapes[i].NKV, shapes[i].hs)) {
			tap_diag("  %s", hexi_errmsg(rc));
			hexi_error_clear();
			continue;
		}
		if (!ok(r.fwd >= want, "%s: %s forward %s (%d engines)", name,
			shapes[i].what, stage_name[r.fwd], r.fwd_engines))
			tap_diag("  want %s: %s", stage_name[want], r.fwd_why);
		if (!ok(r.bwd >= want, "%s: %s backward %s (%d engines)", name,
			shapes[i].what, stage_name[r.bwd], r.bwd_engines))
			tap_diag("  want %s: %s", stage_name[want], r.bwd_why);
		if (r.fwd == RT_CUDA_PLAN_READY && r.bwd == RT_CUDA_PLAN_READY)
			tap_diag("  workspace %zu bytes", r.ws_bytes);
	}
}

/* Wrong input is an error value naming the cause, never a crash. */
static void check_errors(const char *json)
{
	rt_cuda_sdpa_plans r;
	hexi_rc rc;

	rc = rt_cuda_sdpa_plan_offline("{}", RT_CUDA_BF16, 1, 64, 2, 2, 64, &r);
	ok(rc != HEXI_OK && strstr(hexi_errmsg(rc), "device properties"),
	   "empty device properties refused: %s", hexi_errmsg(rc));
	hexi_error_clear();
	rc = rt_cuda_sdpa_plan_offline("{\"maxGridSize\": [1,", RT_CUDA_BF16, 1,
				       64, 2, 2, 64, &r);
	ok(rc != HEXI_OK, "truncated device properties refused: %s",
	   hexi_errmsg(rc));
	hexi_error_clear();
	rc = rt_cuda_sdpa_plan_offline(json, RT_CUDA_BF16, 1, 64, 2, 2, 12, &r);
	is_int(rc, HEXI_ERR_INVAL, "head size 12 (not a multiple of 8)");
	hexi_error_clear();
	rc = rt_cuda_sdpa_plan_offline(json, RT_CUDA_BF16, 1, 64, 6, 4, 64, &r);
	is_int(rc, HEXI_ERR_INVAL, "6 heads over 4 KV heads");
	hexi_error_clear();
	ok(r.fwd == RT_CUDA_PLAN_NONE && r.bwd == RT_CUDA_PLAN_NONE,
	   "a refused call reports no plan");
	/* fp32: the runtime keeps its own kernel (rt_cuda_attn_pick); what
	 * cuDNN says of it is printed, not asserted */
	rc = rt_cuda_sdpa_plan_offline(json, RT_CUDA_F32, 2, 256, 16, 16, 64,
				       &r);
	tap_diag(
	    "fp32 (own kernel in the runtime): forward %s, backward %s%s%s",
	    rc == HEXI_OK ? stage_name[r.fwd] : "error",
	    rc == HEXI_OK ? stage_name[r.bwd] : hexi_errmsg(rc),
	    r.bwd == RT_CUDA_PLAN_NONE ? ": " : "",
	    r.bwd == RT_CUDA_PLAN_NONE ? r.bwd_why : "");
	hexi_error_clear();
}

/* This machine's GPU: its properties must give ready plans; written to
 * out when asked. */
static void check_device(const char *out, int with_errors)
{
	char *dev = NULL;
	hexi_rc rc = rt_cuda_cudnn_devprop_json(0, &dev);

	if (rc != HEXI_OK) {
		if (out != NULL)
			ok(0, "device 0's properties: %s", hexi_errmsg(rc));
		else
			tap_diag("device 0: no properties (%s)",
				 hexi_errmsg(rc));
		hexi_error_clear();
		return;
	}
	if (with_errors)
		check_errors(dev);
	check_gpu("device 0", dev, RT_CUDA_PLAN_READY,
		  sizeof(shapes) / sizeof(*shapes));
	if (out != NULL) {
		FILE *f = fopen(out, "w");
		int w = f != NULL && fputs(dev, f) >= 0;

		if (f != NULL && fclose(f) != 0)
			w = 0;
		ok(w, "device 0's properties written to %s", out);
	}
	free(dev);
}

int main(int argc, char **argv)
{
	static const char *const builtin[] = {"h100-sxm", "h200",
					      "a100-sxm4-80gb"};
	const char *top = getenv("top_srcdir"), *out = NULL, *files[16];
	char paths[3][4096];
	int real, first = 1, nfiles = 0;
	long ver;

	if (argc > 2 && strcmp(argv[1], "--device") == 0)
		out = argv[2], first = 3;
	for (int i = first; i < argc && nfiles < 16; i++)
		files[nfiles++] = argv[i];
	if (argc == first && out == NULL) /* the files in the tree */
		for (int i = 0; i < 3; i++) {
			snprintf(paths[i], sizeof(paths[i]),
				 "%s/tests/gpu/devprop/%s.json",
				 top ? top : "..", builtin[i]);
			files[nfiles++] = paths[i];
		}
	ver = rt_cuda_cudnn_version();
	if (ver == 0)
		tap_skip_all("cuDNN: libcudnn.so.9 not loadable, or built "
			     "without --with-cudnn");
	if (ver < 90800)
		tap_skip_all("cuDNN older than 9.8: no planning without a GPU");
	real = load_driver();
	if (out != NULL && !real)
		tap_skip_all("--device: no CUDA driver on this machine");
	tap_diag("cuDNN %ld, %s", ver,
		 real ? "a CUDA driver" : "no driver (stub)");

	for (int i = 0; i < nfiles; i++) {
		char *json = slurp(files[i]);

		if (json == NULL) {
			ok(0, "%s: readable (%s)", files[i], strerror(errno));
			continue;
		}
		if (i == 0)
			check_errors(json);
		check_gpu(files[i], json, RT_CUDA_PLAN_COMPILED,
			  i == 0 ? sizeof(shapes) / sizeof(*shapes) : NMAIN);
		free(json);
	}
	if (real)
		check_device(out, nfiles == 0);
	return tap_done();
}
