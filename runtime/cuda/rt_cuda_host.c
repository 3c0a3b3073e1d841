/*
 * rt_cuda_host.c - host-side pieces of the GPU path that need no CUDA
 * header: the RoPE cos/sin table and the choice of the attention
 * implementation.  Plain C over rt_cuda.h's memory calls,
 * so the same file serves the real device (libhexicuda.a) and the host
 * emulation (tests/gpuemu).
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_cuda.h"

hexi_rc rt_cuda_rope_table_create(int T, int hs, float theta, float **tab)
{
	size_t half = (size_t)(hs / 2), n;
	float *host = NULL;
	hexi_rc rv;

	*tab = NULL;
	if (T < 1 || T > (1 << 24) || hs < 2 || hs % 2 || hs > 4096 ||
	    !(theta > 1.0f))
		return hexi_error(HEXI_ERR_INVAL,
				  "rope table: T %d, head size %d (even), "
				  "theta %g (> 1)",
				  T, hs, (double)theta);
	n = (size_t)T * half * 2;
	if ((host = malloc(n * sizeof(float))) == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "rope table (%d x %d)", T,
				  hs / 2);
	/* the angle and its cos/sin exactly as rt_ops.c's rope_rotate */
	for (int t = 0; t < T; t++)
		for (size_t i = 0; i < half; i++) {
			double ang = (double)t * pow(theta, -(double)(2 * i) /
								(double)hs);
			host[((size_t)t * half + i) * 2] = (float)cos(ang);
			host[((size_t)t * half + i) * 2 + 1] = (float)sin(ang);
		}
	if ((rv = rt_cuda_alloc((void **)tab, n * sizeof(float))) == HEXI_OK &&
	    (rv = rt_cuda_upload(*tab, host, n * sizeof(float))) != HEXI_OK) {
		rt_cuda_free(*tab);
		*tab = NULL;
	}
	free(host);
	return rv;
}

/* NULL when cuDNN's fused attention can run on this (dt, cc, hs, cuDNN),
 * else the reason. */
static const char *cudnn_unfit(rt_cuda_dtype dt, int cc, int hs, long ver)
{
	if (dt != RT_CUDA_BF16)
		return "fp32 (cuDNN's fused attention is bf16/fp16)";
	if (cc < 80)
		return "compute capability below 8.0";
	if (hs % 8 != 0 || hs < 8 || hs > 128)
		return "head size not a multiple of 8 in 8..128";
	if (ver < 90000)
		return ver <= 0 ? "cuDNN not loaded (libcudnn.so.9 absent, or "
				  "built without --with-cudnn)"
				: "cuDNN older than 9.0";
	return NULL;
}

hexi_rc rt_cuda_attn_pick(const char *mode, rt_cuda_dtype dt, int cc, int hs,
			  long cudnn_version, rt_cuda_attn_kind *kind,
			  char *why, size_t cap)
{
	const char *unfit = cudnn_unfit(dt, cc, hs, cudnn_version);
	int forced;

	*kind = RT_CUDA_ATTN_OWN;
	if (mode != NULL && mode[0] != '\0' && strcmp(mode, "auto") != 0 &&
	    strcmp(mode, "own") != 0 && strcmp(mode, "cudnn") != 0)
		return hexi_error(HEXI_ERR_INVAL,
				  "HEXI_ATTENTION='%.32s': auto, own or cudnn",
				  mode);
	if (mode != NULL && strcmp(mode, "own") == 0) {
		snprintf(why, cap, "own (HEXI_ATTENTION=own)");
		return HEXI_OK;
	}
	forced = mode != NULL && strcmp(mode, "cudnn") == 0;
	if (unfit != NULL) {
		if (forced)
			return hexi_error(HEXI_ERR_UNSUPPORTED,
					  "HEXI_ATTENTION=cudnn: %s", unfit);
		snprintf(why, cap, "own (auto: %s)", unfit);
		return HEXI_OK;
	}
	*kind = RT_CUDA_ATTN_CUDNN;
	snprintf(why, cap, "cudnn (%s: %s, sm_%d, hs %d, cuDNN %ld)",
		 forced ? "HEXI_ATTENTION=cudnn" : "auto",
		 rt_cuda_dtype_name(dt), cc, hs, cudnn_version);
	return HEXI_OK;
}
