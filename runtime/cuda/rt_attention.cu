/*
 * rt_attention.cu - causal self-attention with grouped KV heads, flash
 * style: no (T,T) matrix.  The GPU twin of rt_attention_forward/backward.
 *
 * Layout: q (B,T,NH,hs), k, v (B,T,NKV,hs); query head h reads KV head
 * h / (NH/NKV).  scale = 1/sqrt(hs).
 *
 * Forward: a block of QROWS warps takes QROWS consecutive query rows of one
 * (b, h); each warp owns one row (its q in registers, lane i holding
 * elements i, i+32, ...).  K and V rows are staged through shared memory in
 * tiles of KTILE = 32 rows, and a warp takes a tile at once: every lane
 * forms its partial dot products with all 32 keys, and one reduce-scatter
 * over the warp (31 shuffles, dots32) leaves lane r with the whole score of
 * key r; the tile's max and sum are one warp reduction each, and the
 * probabilities reach the lanes' accumulators by broadcast.  A first
 * version reduced each key's dot product on its own (5 shuffles, two exps
 * per lane per key): about 2.5x the shuffles.  Online softmax (running max
 * m, normaliser l, accumulator acc) keeps O(hs) state per row; lse = m +
 * log l is kept for the backward pass.
 *
 * Backward (recompute, as FlashAttention-2): delta = rowsum(dO * O); then
 *  - dq kernel: per query row, over key tiles: p = exp(s - lse),
 *    dp = dO . v, ds = p (dp - delta) scale, dq += ds k;
 *  - dk/dv kernel: per key row of one KV head, over the query heads of its
 *    group and query tiles t >= t2 (Q, dO, lse, delta staged in shared
 *    memory): dv += p dO, dk += ds q.
 * Both take a tile of 32 rows at once the same way.  No atomics: each
 * output row is written by exactly one warp.
 */
#include "rt_cuda_int.cuh"

#define QROWS	 8   /* warps (rows) per block */
#define KTILE	 32  /* rows per shared-memory tile */
#define HS_MAX	 128 /* largest head size */
#define PER_LANE (HS_MAX / 32)

/* Row r of a (B,T,NHx,hs) tensor for (b, t, head). */
__device__ __forceinline__ size_t row_off(int b, int t, int head, int T,
					  int nheads, int hs)
{
	return (((size_t)b * T + t) * nheads + head) * hs;
}

/* Load a row into per-lane registers (lane i: elements i, i+32, ...). */
template <typename T>
__device__ __forceinline__ void load_row(float r[PER_LANE], const T *p, int hs,
					 int lane)
{
#pragma unroll
	for (int j = 0; j < PER_LANE; j++) {
		int i = lane + 32 * j;
		r[j] = i < hs ? ld(p, i) : 0.0f;
	}
}

/* Stage rows [t0, t0+KTILE) of one head of x into sh (KTILE, hs) as float. */
template <typename T>
__device__ __forceinline__ void stage(float *sh, const T *x, int b, int t0,
				      int head, int T_, int nheads, int hs)
{
	for (int e = threadIdx.x; e < KTILE * hs; e += blockDim.x) {
		int r = e / hs, i = e % hs, t = t0 + r;
		sh[e] = t < T_ ? ld(x, row_off(b, t, head, T_, nheads, hs) + i)
			       : 0.0f;
	}
}

/*
 * Dot products of a row r (in registers, lane i holding elements i, i+32,
 * ...) with the KTILE = 32 rows of a staged tile sh (KTILE, hs): lane l
 * gets r . sh[l].  Each lane forms its 32 partial sums, then a
 * reduce-scatter halves them five times: at offset o a lane keeps the half
 * of its sums its lane bit o selects and adds its partner's copy of that
 * half (o shuffles), so after 16+8+4+2+1 = 31 shuffles lane l holds the
 * sum over the warp of partial l.
 */
__device__ __forceinline__ float dots32(const float r[PER_LANE],
					const float *sh, int hs, int lane)
{
	float d[KTILE];

#pragma unroll
	for (int k = 0; k < KTILE; k++) {
		float a = 0.0f;
#pragma unroll
		for (int j = 0; j < PER_LANE; j++) {
			int i = lane + 32 * j;
			if (i < hs)
				a += r[j] * sh[k * hs + i];
		}
		d[k] = a;
	}
#pragma unroll
	for (int o = KTILE / 2; o >= 1; o >>= 1) {
		bool upper = (lane & o) != 0;
#pragma unroll
		for (int k = 0; k < o; k++) {
			float send = upper ? d[k] : d[k + o];
			float keep = upper ? d[k + o] : d[k];

			d[k] = keep + __shfl_xor_sync(0xffffffffu, send, o);
		}
	}
	return d[0];
}

/* acc[j] += sum over the tile's rows k of w_k * sh[k][lane + 32 j], where
 * lane k holds w_k (broadcast one row at a time). */
__device__ __forceinline__ void axpy32(float acc[PER_LANE], float w,
				       const float *sh, int hs, int lane)
{
#pragma unroll 4
	for (int k = 0; k < KTILE; k++) {
		float wk = __shfl_sync(0xffffffffu, w, k);
#pragma unroll
		for (int j = 0; j < PER_LANE; j++) {
			int i = lane + 32 * j;
			if (i < hs)
				acc[j] += wk * sh[k * hs + i];
		}
	}
}

template <typename T>
__global__ void attn_fwd(T *out, float *lse, const T *q, const T *k, const T *v,
			 int T_, int NH, int NKV, int hs, float scale)
{
	__shared__ float ks[KTILE * HS_MAX], vs[KTILE * HS_MAX];
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	int h = blockIdx.y, b = blockIdx.z, kh = h / (NH / NKV);
	int t = blockIdx.x * QROWS + warp;
	int tmax = min(T_ - 1, (int)(blockIdx.x * QROWS + QROWS - 1));
	float qr[PER_LANE], acc[PER_LANE], m = -INFINITY, l = 0.0f;

	if (t < T_)
		load_row(qr, q + row_off(b, t, h, T_, NH, hs), hs, lane);
#pragma unroll
	for (int j = 0; j < PER_LANE; j++)
		acc[j] = 0.0f;
	for (int t0 = 0; t0 <= tmax; t0 += KTILE) {
		__syncthreads();
		stage(ks, k, b, t0, kh, T_, NKV, hs);
		stage(vs, v, b, t0, kh, T_, NKV, hs);
		__syncthreads();
		if (t >= T_ || t0 > t)
			continue; /* warp-uniform: the whole warp skips */
		/* lane r: the score of key t0 + r, -inf past the diagonal */
		float sc = dots32(qr, ks, hs, lane) * scale;
		bool keep = t0 + lane <= t;
		float mn = fmaxf(m, warp_max(keep ? sc : -INFINITY));
		float corr = expf(m - mn); /* 0 on the first tile (m = -inf) */
		float p = keep ? expf(sc - mn) : 0.0f;

		l = l * corr + warp_sum(p);
#pragma unroll
		for (int j = 0; j < PER_LANE; j++)
			acc[j] *= corr;
		axpy32(acc, p, vs, hs, lane);
		m = mn;
	}
	if (t >= T_)
		return;
#pragma unroll
	for (int j = 0; j < PER_LANE; j++) {
		int i = lane + 32 * j;
		if (i < hs)
			st(out + row_off(b, t, h, T_, NH, hs), i, acc[j] / l);
	}
	if (lane == 0)
		lse[((size_t)b * NH + h) * T_ + t] = m + logf(l);
}

/* delta (B,NH,T) = sum_i dout * out per row; one warp per row, grid-stride
 * over rows (grid_for caps the grid, so B*T*NH may exceed warps launched). */
template <typename T>
__global__ void attn_delta(float *delta, const T *dout, const T *out, int B,
			   int T_, int NH, int hs)
{
	int lane = threadIdx.x & 31;
	size_t nrows = (size_t)B * T_ * NH;
	size_t step = (size_t)gridDim.x * (blockDim.x / 32);

	for (size_t row =
		 blockIdx.x * (size_t)(blockDim.x / 32) + (threadIdx.x >> 5);
	     row < nrows; row += step) {
		float d = 0.0f;

		for (int i = lane; i < hs; i += 32)
			d += ld(dout, row * hs + i) * ld(out, row * hs + i);
		d = warp_sum(d);
		if (lane == 0) {
			/* row = (b, t, h) -> delta[(b, h, t)] */
			size_t h = row % NH, bt = row / NH;
			size_t b = bt / T_, t = bt % T_;
			delta[(b * NH + h) * T_ + t] = d;
		}
	}
}

template <typename T>
__global__ void attn_bwd_dq(T *dq, const T *dout, const T *q, const T *k,
			    const T *v, const float *lse, const float *delta,
			    int T_, int NH, int NKV, int hs, float scale)
{
	__shared__ float ks[KTILE * HS_MAX], vs[KTILE * HS_MAX];
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	int h = blockIdx.y, b = blockIdx.z, kh = h / (NH / NKV);
	int t = blockIdx.x * QROWS + warp;
	int tmax = min(T_ - 1, (int)(blockIdx.x * QROWS + QROWS - 1));
	float qr[PER_LANE], dor[PER_LANE], dqa[PER_LANE], L = 0.0f, D = 0.0f;

	if (t < T_) {
		load_row(qr, q + row_off(b, t, h, T_, NH, hs), hs, lane);
		load_row(dor, dout + row_off(b, t, h, T_, NH, hs), hs, lane);
		L = lse[((size_t)b * NH + h) * T_ + t];
		D = delta[((size_t)b * NH + h) * T_ + t];
	}
#pragma unroll
	for (int j = 0; j < PER_LANE; j++)
		dqa[j] = 0.0f;
	for (int t0 = 0; t0 <= tmax; t0 += KTILE) {
		__syncthreads();
		stage(ks, k, b, t0, kh, T_, NKV, hs);
		stage(vs, v, b, t0, kh, T_, NKV, hs);
		__syncthreads();
		if (t >= T_ || t0 > t)
			continue; /* warp-uniform */
		/* lane r: key t0 + r */
		float sc = dots32(qr, ks, hs, lane) * scale;
		float dp = dots32(dor, vs, hs, lane);
		float ds = t0 + lane <= t ? expf(sc - L) * (dp - D) * scale
					  : 0.0f;

		axpy32(dqa, ds, ks, hs, lane);
	}
	if (t >= T_)
		return;
	T *o = dq + row_off(b, t, h, T_, NH, hs);
#pragma unroll
	for (int j = 0; j < PER_LANE; j++) {
		int i = lane + 32 * j;
		if (i < hs)
			st(o, i, ld(o, i) + dqa[j]);
	}
}

template <typename T>
__global__ void attn_bwd_dkdv(T *dk, T *dv, const T *dout, const T *q,
			      const T *k, const T *v, const float *lse,
			      const float *delta, int T_, int NH, int NKV,
			      int hs, float scale)
{
	__shared__ float qs[KTILE * HS_MAX], ds_[KTILE * HS_MAX];
	__shared__ float ls[KTILE], dl[KTILE];
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	int kh = blockIdx.y, b = blockIdx.z, G = NH / NKV;
	int t2 = blockIdx.x * QROWS + warp;
	int tmin = blockIdx.x * QROWS; /* first key row of the block */
	float kr[PER_LANE], vr[PER_LANE], dka[PER_LANE], dva[PER_LANE];

	if (t2 < T_) {
		load_row(kr, k + row_off(b, t2, kh, T_, NKV, hs), hs, lane);
		load_row(vr, v + row_off(b, t2, kh, T_, NKV, hs), hs, lane);
	}
#pragma unroll
	for (int j = 0; j < PER_LANE; j++)
		dka[j] = dva[j] = 0.0f;
	for (int h = kh * G; h < (kh + 1) * G; h++) {
		const float *lrow = lse + ((size_t)b * NH + h) * T_;
		const float *drow = delta + ((size_t)b * NH + h) * T_;

		/* query rows t >= t2: tiles from the block's first key row */
		for (int t0 = tmin - tmin % KTILE; t0 < T_; t0 += KTILE) {
			__syncthreads();
			stage(qs, q, b, t0, h, T_, NH, hs);
			stage(ds_, dout, b, t0, h, T_, NH, hs);
			if (threadIdx.x < KTILE) {
				int t = t0 + threadIdx.x;
				ls[threadIdx.x] = t < T_ ? lrow[t] : 0.0f;
				dl[threadIdx.x] = t < T_ ? drow[t] : 0.0f;
			}
			__syncthreads();
			if (t2 >= T_ || t0 + KTILE <= t2)
				continue; /* warp-uniform */
			/* lane r: query row t0 + r, kept if t2 <= it < T */
			int tq = t0 + lane;
			float sc = dots32(kr, qs, hs, lane) * scale;
			float dp = dots32(vr, ds_, hs, lane);
			bool keep = tq >= t2 && tq < T_;
			float p = keep ? expf(sc - ls[lane]) : 0.0f;
			float dsc = keep ? p * (dp - dl[lane]) * scale : 0.0f;

			axpy32(dva, p, ds_, hs, lane);
			axpy32(dka, dsc, qs, hs, lane);
		}
	}
	if (t2 >= T_)
		return;
	T *ok = dk + row_off(b, t2, kh, T_, NKV, hs);
	T *ov = dv + row_off(b, t2, kh, T_, NKV, hs);
#pragma unroll
	for (int j = 0; j < PER_LANE; j++) {
		int i = lane + 32 * j;
		if (i < hs) {
			st(ok, i, ld(ok, i) + dka[j]);
			st(ov, i, ld(ov, i) + dva[j]);
		}
	}
}

static hexi_rc attn_check(const char *what, int B, int T, int NH, int NKV,
			  int hs)
{
	if (B < 0 || T < 0 || NH < 1 || NKV < 1 || NH % NKV || hs < 1 ||
	    hs > HS_MAX || B > 65535 || NH > 65535)
		return hexi_error(HEXI_ERR_INVAL,
				  "%s: B %d T %d NH %d NKV %d hs %d (NH a "
				  "multiple of NKV, hs <= %d)",
				  what, B, T, NH, NKV, hs, HS_MAX);
	return HEXI_OK;
}

extern "C" hexi_rc rt_cuda_attention_forward(rt_cuda_stream s, rt_cuda_dtype dt,
					     void *out, float *lse,
					     const void *q, const void *k,
					     const void *v, int B, int T,
					     int NH, int NKV, int hs)
{
	float scale = 1.0f / sqrtf((float)hs);
	dim3 grid((T + QROWS - 1) / QROWS, NH, B);
	hexi_rc rv = attn_check("attention_forward", B, T, NH, NKV, hs);

	if (rv != HEXI_OK || B == 0 || T == 0)
		return rv;
	DT_DISPATCH(dt, attn_fwd<<<grid, 32 * QROWS, 0, s>>>(
		    (E *)out, lse, (const E *)q, (const E *)k,
		    (const E *)v, T, NH, NKV, hs, scale));
	return launch_check("attention_forward");
}

template <typename T>
static void attn_bwd(rt_cuda_stream s, T *dq, T *dk, T *dv, const T *dout,
		     const T *out, const T *q, const T *k, const T *v,
		     const float *lse, float *delta, int B, int T_, int NH,
		     int NKV, int hs)
{
	float scale = 1.0f / sqrtf((float)hs);
	size_t rows = (size_t)B * T_ * NH;
	dim3 gq((T_ + QROWS - 1) / QROWS, NH, B);
	dim3 gk((T_ + QROWS - 1) / QROWS, NKV, B);

	attn_delta<<<grid_for(rows, QROWS), 32 * QROWS, 0, s>>>(
	    delta, dout, out, B, T_, NH, hs);
	attn_bwd_dq<<<gq, 32 * QROWS, 0, s>>>(dq, dout, q, k, v, lse, delta, T_,
					      NH, NKV, hs, scale);
	attn_bwd_dkdv<<<gk, 32 * QROWS, 0, s>>>(dk, dv, dout, q, k, v, lse,
						delta, T_, NH, NKV, hs, scale);
}

extern "C" hexi_rc
rt_cuda_attention_backward(rt_cuda_stream s, rt_cuda_dtype dt, void *dq,
			   void *dk, void *dv, const void *dout,
			   const void *out, const void *q, const void *k,
			   const void *v, const float *lse, float *delta, int B,
			   int T, int NH, int NKV, int hs)
{
	hexi_rc rv = attn_check("attention_backward", B, T, NH, NKV, hs);

	if (rv != HEXI_OK || B == 0 || T == 0)
		return rv;
	DT_DISPATCH(dt, attn_bwd(s, (E *)dq, (E *)dk, (E *)dv,
			 (const E *)dout, (const E *)out, (const E *)q,
			 (const E *)k, (const E *)v, lse, delta, B, T, NH,
			 NKV, hs));
	return launch_check("attention_backward");
}
