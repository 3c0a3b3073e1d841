/*
 * rt_kernels.cu - CUDA kernels of the reference model other than attention:
 * dtype cast, RMSNorm, RoPE, SwiGLU, softmax cross-entropy, AdamW.  Each is
 * the GPU twin of the CPU operator of the same name in rt_ops.h / optim.c
 * (same formulas, fp32 arithmetic, forward overwrites, backward +=).
 */
#include "rt_cuda_int.cuh"

/* ---- cast --------------------------------------------------------------- */

template <typename To, typename From>
__global__ void cast_kernel(To *out, const From *in, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		st(out, i, ld(in, i));
}

extern "C" hexi_rc rt_cuda_cast(rt_cuda_stream s, void *out, rt_cuda_dtype to,
				const void *in, rt_cuda_dtype from, size_t n)
{
	unsigned g = grid_for(n, 256);

	if (n == 0)
		return HEXI_OK;
	if (to == RT_CUDA_BF16 && from == RT_CUDA_F32)
		cast_kernel<<<g, 256, 0, s>>>((bf16 *)out, (const float *)in,
					      n);
	else if (to == RT_CUDA_F32 && from == RT_CUDA_BF16)
		cast_kernel<<<g, 256, 0, s>>>((float *)out, (const bf16 *)in,
					      n);
	else if (to == RT_CUDA_F32)
		cast_kernel<<<g, 256, 0, s>>>((float *)out, (const float *)in,
					      n);
	else
		cast_kernel<<<g, 256, 0, s>>>((bf16 *)out, (const bf16 *)in, n);
	return launch_check("cast");
}

/* ---- RMSNorm ------------------------------------------------------------- */

/* One block per row: out (BT,C) = x * rstd * w. */
template <typename T>
__global__ void rmsnorm_fwd(T *out, float *rstd, const T *inp, const T *w,
			    int C, float eps)
{
	__shared__ float sh[32];
	size_t row = blockIdx.x;
	const T *x = inp + row * C;
	float ss = 0.0f, r;

	for (int c = threadIdx.x; c < C; c += blockDim.x) {
		float v = ld(x, c);
		ss += v * v;
	}
	ss = block_sum(ss, sh);
	r = rsqrtf(ss / C + eps);
	for (int c = threadIdx.x; c < C; c += blockDim.x)
		st(out + row * C, c, ld(x, c) * r * ld(w, c));
	if (threadIdx.x == 0)
		rstd[row] = r;
}

/* dx = s*w*dy - x * s^3/C * sum(dy*w*x); dw += dy*x*s.
 *
 * dw is a sum over all BT rows.  One atomicAdd per row and column (as a
 * first version did) is BT-way contention on each of C addresses: 16 M
 * atomics for 8192 rows of 2048.  Here a grid of at most RMS_BLOCKS blocks
 * walks the rows; thread t owns columns t, t + blockDim.x, ... (RMS_K at
 * most, C <= RMS_K * blockDim.x) and keeps their partial sums in
 * registers, so each block adds its C sums once.  Two blocks of 512 per
 * SM (46-48 registers on sm_90, no spill): 256 blocks are one wave on an
 * H100/H200's 132 SMs. */
#define RMS_K	   16
#define RMS_BLOCKS 256

/* k = s^3/C * sum(dy*w*x) of one row (a block reduction: every thread of
 * the block calls it). */
template <typename T>
__device__ __forceinline__ float rms_k(const T *x, const T *dy, const T *w,
				       float s, int C, float *sh)
{
	float dot = 0.0f;

	for (int c = threadIdx.x; c < C; c += blockDim.x)
		dot += ld(dy, c) * ld(w, c) * ld(x, c);
	return block_sum(dot, sh) * s * s * s / C;
}

template <typename T>
__global__ void __launch_bounds__(512, 2)
    rmsnorm_bwd(T *dinp, float *dw, const T *dout, const T *inp, const T *w,
		const float *rstd, int BT, int C)
{
	__shared__ float sh[32];
	float acc[RMS_K];

#pragma unroll
	for (int j = 0; j < RMS_K; j++)
		acc[j] = 0.0f;
	for (size_t row = blockIdx.x; row < (size_t)BT; row += gridDim.x) {
		const T *x = inp + row * C, *dy = dout + row * C;
		T *dx = dinp + row * C;
		float s = rstd[row], k = rms_k(x, dy, w, s, C, sh);

#pragma unroll
		for (int j = 0; j < RMS_K; j++) {
			int c = threadIdx.x + j * blockDim.x;

			if (c < C) {
				float xv = ld(x, c), g = ld(dy, c);

				st(dx, c, ld(dx, c) + s * ld(w, c) * g - xv * k);
				acc[j] += g * xv * s;
			}
		}
	}
#pragma unroll
	for (int j = 0; j < RMS_K; j++) {
		int c = threadIdx.x + j * blockDim.x;

		if (c < C)
			atomicAdd(&dw[c], acc[j]);
	}
}

/* Rows wider than RMS_K * 512: one block per row, dw by atomics. */
template <typename T>
__global__ void rmsnorm_bwd_wide(T *dinp, float *dw, const T *dout,
				 const T *inp, const T *w, const float *rstd,
				 int C)
{
	__shared__ float sh[32];
	size_t row = blockIdx.x;
	const T *x = inp + row * C, *dy = dout + row * C;
	T *dx = dinp + row * C;
	float s = rstd[row], k = rms_k(x, dy, w, s, C, sh);

	for (int c = threadIdx.x; c < C; c += blockDim.x) {
		float xv = ld(x, c), g = ld(dy, c);

		st(dx, c, ld(dx, c) + s * ld(w, c) * g - xv * k);
		atomicAdd(&dw[c], g * xv * s);
	}
}

static unsigned row_block(int C)
{
	return C >= 1024 ? 512 : C >= 256 ? 256 : 128;
}

extern "C" hexi_rc rt_cuda_rmsnorm_forward(rt_cuda_stream s, rt_cuda_dtype dt,
					   void *out, float *rstd,
					   const void *inp, const void *w,
					   int BT, int C, float eps)
{
	if (BT < 0 || C < 1)
		return hexi_error(HEXI_ERR_INVAL, "rmsnorm: BT %d C %d", BT, C);
	if (BT == 0)
		return HEXI_OK;
	DT_DISPATCH(dt, rmsnorm_fwd<<<BT, row_block(C), 0, s>>>(
		    (E *)out, rstd, (const E *)inp, (const E *)w, C,
		    eps));
	return launch_check("rmsnorm_forward");
}

extern "C" hexi_rc rt_cuda_rmsnorm_backward(rt_cuda_stream s, rt_cuda_dtype dt,
					    void *dinp, float *dw,
					    const void *dout, const void *inp,
					    const void *w, const float *rstd,
					    int BT, int C)
{
	if (BT < 0 || C < 1)
		return hexi_error(HEXI_ERR_INVAL, "rmsnorm: BT %d C %d", BT, C);
	if (BT == 0)
		return HEXI_OK;
	if ((size_t)C > (size_t)RMS_K * row_block(C))
		DT_DISPATCH(dt, rmsnorm_bwd_wide<<<BT, row_block(C), 0, s>>>(
			    (E *)dinp, dw, (const E *)dout, (const E *)inp,
			    (const E *)w, rstd, C));
	else
		DT_DISPATCH(dt, rmsnorm_bwd<<<BT < RMS_BLOCKS ? BT : RMS_BLOCKS,
					      row_block(C), 0, s>>>(
			    (E *)dinp, dw, (const E *)dout, (const E *)inp,
			    (const E *)w, rstd, BT, C));
	return launch_check("rmsnorm_backward");
}

/* ---- RoPE ------------------------------------------------------------------
 */

/* One thread per pair (b,t,h,i) of x (B,T,NH,hs); cos and sin of the angle
 * from tab (T, hs/2, 2), computed once on the host (rt_cuda_host.c) in
 * double as the CPU reference does: no transcendental per element. */
template <typename T>
__global__ void rope_kernel(T *x, const float2 *tab, int B, int T_, int NH,
			    int hs, float sign)
{
	size_t half = hs / 2, n = (size_t)B * T_ * NH * half;

	for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	     idx < n; idx += (size_t)gridDim.x * blockDim.x) {
		size_t i = idx % half, row = idx / half; /* row = (b,t,h) */
		size_t t = (row / NH) % T_;
		float2 c = tab[t * half + i];
		float cs = c.x, sn = sign * c.y;
		size_t p = row * hs + 2 * i;
		float x0 = ld(x, p), x1 = ld(x, p + 1);

		st(x, p, x0 * cs - x1 * sn);
		st(x, p + 1, x0 * sn + x1 * cs);
	}
}

static hexi_rc rope(rt_cuda_stream s, rt_cuda_dtype dt, void *x,
		    const float *tab, int B, int T, int NH, int hs, float sign)
{
	size_t n;

	if (B < 0 || T < 0 || NH < 1 || hs < 2 || hs % 2 || tab == NULL)
		return hexi_error(HEXI_ERR_INVAL,
				  "rope: B %d T %d NH %d hs %d (even), table %s",
				  B, T, NH, hs, tab ? "given" : "missing");
	n = (size_t)B * T * NH * (hs / 2);
	if (n == 0)
		return HEXI_OK;
	DT_DISPATCH(dt, rope_kernel<<<grid_for(n, 256), 256, 0, s>>>(
			    (E *)x, (const float2 *)tab, B, T, NH, hs, sign));
	return launch_check("rope");
}

extern "C" hexi_rc rt_cuda_rope_forward(rt_cuda_stream s, rt_cuda_dtype dt,
					void *x, const float *tab, int B, int T,
					int NH, int hs)
{
	return rope(s, dt, x, tab, B, T, NH, hs, 1.0f);
}

extern "C" hexi_rc rt_cuda_rope_backward(rt_cuda_stream s, rt_cuda_dtype dt,
					 void *dx, const float *tab, int B,
					 int T, int NH, int hs)
{
	return rope(s, dt, dx, tab, B, T, NH, hs, -1.0f);
}

/* ---- SwiGLU ----------------------------------------------------------------
 */

template <typename T>
__global__ void swiglu_fwd(T *out, const T *gate, const T *up, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float g = ld(gate, i);

		st(out, i, g / (1.0f + expf(-g)) * ld(up, i));
	}
}

/* silu'(g) = sig(g) (1 + g (1 - sig(g))) */
template <typename T>
__global__ void swiglu_bwd(T *dgate, T *dup, const T *dout, const T *gate,
			   const T *up, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float g = ld(gate, i), u = ld(up, i), d = ld(dout, i);
		float sg = 1.0f / (1.0f + expf(-g));

		st(dgate, i,
		   ld(dgate, i) + d * u * sg * (1.0f + g * (1.0f - sg)));
		st(dup, i, ld(dup, i) + d * g * sg);
	}
}

extern "C" hexi_rc rt_cuda_swiglu_forward(rt_cuda_stream s, rt_cuda_dtype dt,
					  void *out, const void *gate,
					  const void *up, size_t N)
{
	if (N == 0)
		return HEXI_OK;
	DT_DISPATCH(dt, swiglu_fwd<<<grid_for(N, 256), 256, 0, s>>>(
		    (E *)out, (const E *)gate, (const E *)up, N));
	return launch_check("swiglu_forward");
}

extern "C" hexi_rc rt_cuda_swiglu_backward(rt_cuda_stream s, rt_cuda_dtype dt,
					   void *dgate, void *dup,
					   const void *dout, const void *gate,
					   const void *up, size_t N)
{
	if (N == 0)
		return HEXI_OK;
	DT_DISPATCH(dt, swiglu_bwd<<<grid_for(N, 256), 256, 0, s>>>(
		    (E *)dgate, (E *)dup, (const E *)dout,
		    (const E *)gate, (const E *)up, N));
	return launch_check("swiglu_backward");
}

/* ---- softmax cross-entropy -------------------------------------------------
 */

/* One block per row of logits (BT,V): lse = max + log sum exp(x - max);
 * loss = lse - x[target]. */
template <typename T>
__global__ void xent_fwd(float *losses, float *lse, const T *logits,
			 const int *targets, int V)
{
	__shared__ float sh[32];
	size_t row = blockIdx.x;
	const T *x = logits + row * V;
	float mx = -INFINITY, sum = 0.0f, l;

	for (int i = threadIdx.x; i < V; i += blockDim.x)
		mx = fmaxf(mx, ld(x, i));
	mx = block_max(mx, sh);
	for (int i = threadIdx.x; i < V; i += blockDim.x)
		sum += expf(ld(x, i) - mx);
	sum = block_sum(sum, sh);
	l = mx + logf(sum);
	if (threadIdx.x == 0) {
		lse[row] = l;
		losses[row] = l - ld(x, targets[row]);
	}
}

template <typename T>
__global__ void xent_bwd(T *dlogits, const T *logits, const float *lse,
			 const int *targets, float dloss, int V)
{
	size_t row = blockIdx.x;
	const T *x = logits + row * V;
	T *dx = dlogits + row * V;
	float l = lse[row];
	int tgt = targets[row];

	for (int i = threadIdx.x; i < V; i += blockDim.x) {
		float p = expf(ld(x, i) - l) - (i == tgt ? 1.0f : 0.0f);

		st(dx, i, ld(dx, i) + dloss * p);
	}
}

extern "C" hexi_rc rt_cuda_crossentropy_forward(rt_cuda_stream s,
						rt_cuda_dtype dt, float *losses,
						float *lse, const void *logits,
						const int *targets, int BT,
						int V)
{
	if (BT < 0 || V < 1)
		return hexi_error(HEXI_ERR_INVAL, "crossentropy: BT %d V %d",
				  BT, V);
	if (BT == 0)
		return HEXI_OK;
	DT_DISPATCH(dt, xent_fwd<<<BT, 512, 0, s>>>(losses, lse, (const E *)logits,
					    targets, V));
	return launch_check("crossentropy_forward");
}

extern "C" hexi_rc
rt_cuda_crossentropy_backward(rt_cuda_stream s, rt_cuda_dtype dt, void *dlogits,
			      const void *logits, const float *lse,
			      const int *targets, float dloss, int BT, int V)
{
	if (BT < 0 || V < 1)
		return hexi_error(HEXI_ERR_INVAL, "crossentropy: BT %d V %d",
				  BT, V);
	if (BT == 0)
		return HEXI_OK;
	DT_DISPATCH(dt, xent_bwd<<<BT, 512, 0, s>>>((E *)dlogits,
					    (const E *)logits, lse, targets,
					    dloss, V));
	return launch_check("crossentropy_backward");
}

/* ---- AdamW -----------------------------------------------------------------
 */

template <typename T>
__global__ void adamw_kernel(float *master, T *w, const float *g, float *m,
			     float *v, size_t n, float lr, float b1, float b2,
			     float eps, float wd, float c1, float c2)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float gi = g[i];
		float mi = b1 * m[i] + (1.0f - b1) * gi;
		float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
		float p = master[i];

		m[i] = mi;
		v[i] = vi;
		p -= lr * ((mi / c1) / (sqrtf(vi / c2) + eps) + wd * p);
		master[i] = p;
		if (w != NULL)
			st(w, i, p);
	}
}

extern "C" hexi_rc rt_cuda_adamw(rt_cuda_stream s, rt_cuda_dtype dt,
				 float *master, void *w, const float *g,
				 float *m, float *v, size_t n, float lr,
				 float beta1, float beta2, float eps,
				 float weight_decay, int step)
{
	/* bias corrections in double, as the CPU optimizer */
	float c1 = (float)(1.0 - pow((double)beta1, step));
	float c2 = (float)(1.0 - pow((double)beta2, step));

	if (step < 1 || !(lr >= 0) || !(beta1 >= 0 && beta1 < 1) ||
	    !(beta2 >= 0 && beta2 < 1) || !(eps > 0))
		return hexi_error(HEXI_ERR_INVAL,
				  "adamw: step %d lr %g betas %g %g eps %g",
				  step, (double)lr, (double)beta1,
				  (double)beta2, (double)eps);
	if (n == 0)
		return HEXI_OK;
	DT_DISPATCH(dt, adamw_kernel<<<grid_for(n, 256), 256, 0, s>>>(
		    master, (E *)w, g, m, v, n, lr, beta1, beta2, eps,
		    weight_decay, c1, c2));
	return launch_check("adamw");
}

/* ---- embedding and residual ------------------------------------------------
 */

/* out (BT,C) = wte[tokens] (wte (V,C)); out-of-range ids give zero rows
 * (the caller validates ids; this keeps a bad id from reading outside). */
template <typename T>
__global__ void embed_fwd(T *out, const int *tokens, const T *wte, int BT,
			  int C, int V)
{
	size_t n = (size_t)BT * C;

	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		int tok = tokens[i / C];
		st(out, i,
		   tok >= 0 && tok < V ? ld(wte, (size_t)tok * C + i % C)
				       : 0.0f);
	}
}

/* dwte (V,C) fp32 += scatter of dout (BT,C); atomics (tokens repeat). */
template <typename T>
__global__ void embed_bwd(float *dwte, const T *dout, const int *tokens, int BT,
			  int C, int V)
{
	size_t n = (size_t)BT * C;

	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		int tok = tokens[i / C];
		if (tok >= 0 && tok < V)
			atomicAdd(&dwte[(size_t)tok * C + i % C], ld(dout, i));
	}
}

template <typename T>
__global__ void add_kernel(T *out, const T *a, const T *b, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		st(out, i, ld(a, i) + ld(b, i));
}

extern "C" hexi_rc rt_cuda_embed_forward(rt_cuda_stream s, rt_cuda_dtype dt,
					 void *out, const int *tokens,
					 const void *wte, int BT, int C, int V)
{
	size_t n = (size_t)BT * C;

	if (BT < 0 || C < 1 || V < 1)
		return hexi_error(HEXI_ERR_INVAL, "embed: BT %d C %d V %d", BT,
				  C, V);
	if (n == 0)
		return HEXI_OK;
	DT_DISPATCH(dt, embed_fwd<<<grid_for(n, 256), 256, 0, s>>>(
		    (E *)out, tokens, (const E *)wte, BT, C, V));
	return launch_check("embed_forward");
}

extern "C" hexi_rc rt_cuda_embed_backward(rt_cuda_stream s, rt_cuda_dtype dt,
					  float *dwte, const void *dout,
					  const int *tokens, int BT, int C,
					  int V)
{
	size_t n = (size_t)BT * C;

	if (BT < 0 || C < 1 || V < 1)
		return hexi_error(HEXI_ERR_INVAL, "embed: BT %d C %d V %d", BT,
				  C, V);
	if (n == 0)
		return HEXI_OK;
	DT_DISPATCH(dt, embed_bwd<<<grid_for(n, 256), 256, 0, s>>>(
		    dwte, (const E *)dout, tokens, BT, C, V));
	return launch_check("embed_backward");
}

extern "C" hexi_rc rt_cuda_add(rt_cuda_stream s, rt_cuda_dtype dt, void *out,
			       const void *a, const void *b, size_t n)
{
	if (n == 0)
		return HEXI_OK;
	DT_DISPATCH(dt, add_kernel<<<grid_for(n, 256), 256, 0, s>>>(
		    (E *)out, (const E *)a, (const E *)b, n));
	return launch_check("add");
}
