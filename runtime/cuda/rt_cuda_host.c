/*
 * rt_cuda_host.c - host-side pieces of the GPU path that need no CUDA
 * header: the RoPE cos/sin table.  Plain C over rt_cuda.h's memory calls,
 * so the same file serves the real device (libhexicuda.a) and the host
 * emulation (tests/gpuemu).
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>

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
