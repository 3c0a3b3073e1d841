/*
 * rt_cuda_matmul.c - the model's matmul forms (rt_ops.h's rt_matmul_* and
 * rt_matmul_tw_*) as row-major GEMMs through rt_cuda_gemm.  Plain C over
 * rt_cuda.h, so the host emulation of the device (tests/gpuemu) runs these
 * same wrappers over its own rt_cuda_gemm.
 */
#include "config.h"

#include "rt_cuda.h"

hexi_rc rt_cuda_matmul_forward(rt_cuda *c, rt_cuda_dtype dt, void *out,
			       const void *inp, const void *w, int BT, int C,
			       int OC)
{
	/* out (BT,OC) = inp (BT,C) . w^T, w (OC,C) */
	return rt_cuda_gemm(c, dt, dt, 0, 1, BT, OC, C, 1.0f, inp, C, w, C,
			    0.0f, out, OC);
}

hexi_rc rt_cuda_matmul_backward(rt_cuda *c, rt_cuda_dtype dt, void *dinp,
				float *dw, const void *dout, const void *inp,
				const void *w, int BT, int C, int OC)
{
	hexi_rc rv;

	/* dinp (BT,C) += dout (BT,OC) . w (OC,C) */
	if (dinp != NULL &&
	    (rv = rt_cuda_gemm(c, dt, dt, 0, 0, BT, C, OC, 1.0f, dout, OC, w, C,
			       1.0f, dinp, C)) != HEXI_OK)
		return rv;
	/* dw (OC,C) += dout^T (OC,BT) . inp (BT,C), in fp32 */
	return rt_cuda_gemm(c, dt, RT_CUDA_F32, 1, 0, OC, C, BT, 1.0f, dout, OC,
			    inp, C, 1.0f, dw, C);
}

hexi_rc rt_cuda_matmul_tw_forward(rt_cuda *c, rt_cuda_dtype dt, void *out,
				  const void *inp, const void *w, int BT, int C,
				  int OC)
{
	/* out (BT,OC) = inp (BT,C) . w (C,OC) */
	return rt_cuda_gemm(c, dt, dt, 0, 0, BT, OC, C, 1.0f, inp, C, w, OC,
			    0.0f, out, OC);
}

hexi_rc rt_cuda_matmul_tw_backward(rt_cuda *c, rt_cuda_dtype dt, void *dinp,
				   float *dw, const void *dout, const void *inp,
				   const void *w, int BT, int C, int OC)
{
	hexi_rc rv;

	/* dinp (BT,C) += dout (BT,OC) . w^T */
	if (dinp != NULL &&
	    (rv = rt_cuda_gemm(c, dt, dt, 0, 1, BT, C, OC, 1.0f, dout, OC, w,
			       OC, 1.0f, dinp, C)) != HEXI_OK)
		return rv;
	/* dw (C,OC) += inp^T (C,BT) . dout (BT,OC), in fp32 */
	return rt_cuda_gemm(c, dt, RT_CUDA_F32, 1, 0, C, OC, BT, 1.0f, inp, C,
			    dout, OC, 1.0f, dw, OC);
}
