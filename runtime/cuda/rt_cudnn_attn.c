/*
 * rt_cudnn_attn.c - causal scaled-dot-product attention through cuDNN 9's
 * fused flash-attention engines, built with the backend API (plain C,
 * cudnn_graph.h) as the operation graph cuDNN documents for its fused
 * attention: forward
 *   S = Q K^T * scale; causal mask (GEN_INDEX row/col, CMP_GE,
 *   BINARY_SELECT); stats = max + log(sum exp(S - max)); P = exp(S - max) /
 *   sum; O = P V,
 * and backward (dQ, dK, dV from Q, K, V, O, dO, stats).  libcudnn.so.9 is
 * opened with dlopen on first use, so a binary runs where cuDNN is absent
 * (rt_cuda_cudnn_version() is then 0 and the own kernel runs).  The forward
 * plan is required; when cuDNN builds no backward plan for the sizes, the
 * own backward kernel runs on cuDNN's stats, which are the own kernel's lse
 * (log-sum-exp of the scaled scores).
 *
 * Checked without a GPU, not yet run on one: rt_cuda_sdpa_plan_offline
 * builds both graphs for a GPU described by cuDNN's device properties
 * (deviceless compilation, cuDNN >= 9.8), and tests/gpu/test_cudnn_plan.t
 * asserts that cuDNN 9.19 recognises them as its fused SDPA forward and
 * backward (including GQA) for H100, H200 and A100 in bf16 and compiles
 * their kernels; only loading a kernel needs the driver.  Whatever cuDNN
 * refuses on a GPU (a descriptor, a finalize, no engine) is an error value
 * with cuDNN's own message, and the model falls back to the own kernel
 * (rt_cuda_model.c attn_init); tests/gpu/test_kernels compares this path
 * with the CPU reference when it is chosen.
 */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_cuda.h"

/* tests/simt (the kernels on a CPU emulation of the device) builds this
 * file with HEXI_SIMT_NO_CUDNN: cuDNN cannot run there. */
#if !defined(HAVE_CUDNN) || defined(HEXI_SIMT_NO_CUDNN)

long rt_cuda_cudnn_version(void)
{
	return 0;
}

hexi_rc rt_cuda_sdpa_create(rt_cuda *c, rt_cuda_dtype dt, int B, int T, int NH,
			    int NKV, int hs, rt_cuda_sdpa **out)
{
	(void)c, (void)dt, (void)B, (void)T, (void)NH, (void)NKV, (void)hs;
	*out = NULL;
	return hexi_error(HEXI_ERR_UNSUPPORTED,
			  "cuDNN attention: built without --with-cudnn");
}

void rt_cuda_sdpa_destroy(rt_cuda_sdpa *a)
{
	(void)a;
}

const char *rt_cuda_sdpa_backward_why(const rt_cuda_sdpa *a)
{
	(void)a;
	return "cuDNN attention: not built";
}

hexi_rc rt_cuda_sdpa_plan_offline(const char *devprop_json, rt_cuda_dtype dt,
				  int B, int T, int NH, int NKV, int hs,
				  rt_cuda_sdpa_plans *r)
{
	(void)devprop_json, (void)dt, (void)B, (void)T, (void)NH, (void)NKV,
	    (void)hs;
	memset(r, 0, sizeof(*r));
	return hexi_error(HEXI_ERR_UNSUPPORTED,
			  "cuDNN attention: built without --with-cudnn");
}

hexi_rc rt_cuda_cudnn_devprop_json(int device, char **json)
{
	(void)device;
	*json = NULL;
	return hexi_error(HEXI_ERR_UNSUPPORTED,
			  "cuDNN: built without --with-cudnn");
}

hexi_rc rt_cuda_sdpa_forward(rt_cuda_sdpa *a, void *out, float *lse,
			     const void *q, const void *k, const void *v)
{
	(void)a, (void)out, (void)lse, (void)q, (void)k, (void)v;
	return hexi_error(HEXI_ERR_UNSUPPORTED, "cuDNN attention: not built");
}

hexi_rc rt_cuda_sdpa_backward(rt_cuda_sdpa *a, void *dq, void *dk, void *dv,
			      const void *dout, const void *out, const void *q,
			      const void *k, const void *v, const float *lse)
{
	(void)a, (void)dq, (void)dk, (void)dv, (void)dout, (void)out, (void)q,
	    (void)k, (void)v, (void)lse;
	return hexi_error(HEXI_ERR_UNSUPPORTED, "cuDNN attention: not built");
}

#else /* HAVE_CUDNN */

#include <dlfcn.h>
#include <float.h>
#include <math.h>

#include <cuda_runtime_api.h>
#include <cudnn_graph.h>

#include "hexi_cuda_err.h"

/* ---- the library, opened once ---------------------------------------------
 */

typedef cudnnBackendDescriptor_t bdesc;

static struct cudnn_api {
	int tried, ok;
	void *so;
	size_t (*version)(void);
	cudnnStatus_t (*create)(cudnnHandle_t *);
	cudnnStatus_t (*destroy)(cudnnHandle_t);
	cudnnStatus_t (*set_stream)(cudnnHandle_t, cudaStream_t);
	void (*last_error)(char *, size_t);
	cudnnStatus_t (*b_create)(cudnnBackendDescriptorType_t, bdesc *);
	cudnnStatus_t (*b_destroy)(bdesc);
	cudnnStatus_t (*b_set)(bdesc, cudnnBackendAttributeName_t,
			       cudnnBackendAttributeType_t, int64_t,
			       const void *);
	cudnnStatus_t (*b_get)(bdesc const, cudnnBackendAttributeName_t,
			       cudnnBackendAttributeType_t, int64_t, int64_t *,
			       void *);
	cudnnStatus_t (*b_finalize)(bdesc);
	cudnnStatus_t (*b_execute)(cudnnHandle_t, bdesc, bdesc);
} api;

/* Called from model creation (one thread), like the rest of the setup. */
static int api_load(void)
{
	static const char *const names[] = {"cudnnGetVersion",
					    "cudnnCreate",
					    "cudnnDestroy",
					    "cudnnSetStream",
					    "cudnnGetLastErrorString",
					    "cudnnBackendCreateDescriptor",
					    "cudnnBackendDestroyDescriptor",
					    "cudnnBackendSetAttribute",
					    "cudnnBackendGetAttribute",
					    "cudnnBackendFinalize",
					    "cudnnBackendExecute"};
	void **slots[] = {(void **)&api.version,    (void **)&api.create,
			  (void **)&api.destroy,    (void **)&api.set_stream,
			  (void **)&api.last_error, (void **)&api.b_create,
			  (void **)&api.b_destroy,  (void **)&api.b_set,
			  (void **)&api.b_get,	    (void **)&api.b_finalize,
			  (void **)&api.b_execute};

	if (api.tried)
		return api.ok;
	api.tried = 1;
	if ((api.so = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL)) == NULL)
		return 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if ((*slots[i] = dlsym(api.so, names[i])) == NULL)
			return 0;
	api.ok = 1;
	return 1;
}

long rt_cuda_cudnn_version(void)
{
	return api_load() ? (long)api.version() : 0;
}

/* HEXI_OK, or HEXI_ERR_UNSUPPORTED with what failed and cuDNN's message. */
static hexi_rc ck(cudnnStatus_t st, const char *what)
{
	char msg[256] = "";

	if (st == CUDNN_STATUS_SUCCESS)
		return HEXI_OK;
	api.last_error(msg, sizeof(msg));
	return hexi_error(HEXI_ERR_UNSUPPORTED, "cuDNN %s: status %d%s%.200s",
			  what, (int)st, msg[0] ? ": " : "", msg);
}

#define CK(call, what)                                                         \
	do {                                                                   \
		hexi_rc rc_ = ck((call), (what));                              \
		if (rc_ != HEXI_OK)                                            \
			return rc_;                                            \
	} while (0)

/* ---- descriptors: every one made is kept in a list freed at the end --------
 */

#define MAX_DESCS 128 /* the GQA backward with 8 plans tried: 89 */

typedef struct graph {
	bdesc d[MAX_DESCS];
	int n;
	int64_t uid;   /* next virtual tensor uid */
	uint64_t real; /* bit u: a real (non-virtual) tensor of uid u */
} graph;

static void graph_free(graph *g)
{
	for (int i = g->n - 1; i >= 0; i--)
		api.b_destroy(g->d[i]);
	g->n = 0;
}

static hexi_rc mk(graph *g, cudnnBackendDescriptorType_t t, bdesc *out)
{
	if (g->n == MAX_DESCS)
		return hexi_error(HEXI_ERR_INTERNAL, "cuDNN graph: too many "
						     "descriptors");
	CK(api.b_create(t, &g->d[g->n]), "create descriptor");
	*out = g->d[g->n++];
	return HEXI_OK;
}

static hexi_rc set(bdesc d, cudnnBackendAttributeName_t a,
		   cudnnBackendAttributeType_t t, int64_t n, const void *v)
{
	char what[48];

	snprintf(what, sizeof(what), "attribute %d", (int)a);
	return ck(api.b_set(d, a, t, n, v), what);
}

#define SET(d, a, t, n, v)                                                     \
	do {                                                                   \
		hexi_rc rc_ = set((d), (a), (t), (n), (v));                    \
		if (rc_ != HEXI_OK)                                            \
			return rc_;                                            \
	} while (0)

/* A 4-d tensor; uid < 0: a fresh virtual one. */
static hexi_rc tensor(graph *g, int64_t uid, cudnnDataType_t dt,
		      const int64_t dims[4], const int64_t strides[4],
		      int by_value, bdesc *out)
{
	int64_t align = 16;
	bool virt = uid < 0, byv = by_value != 0;

	hexi_rc rc;

	if (virt)
		uid = g->uid++;
	else if (uid < 64)
		g->real |= UINT64_C(1) << uid;
	if ((rc = mk(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR, out)) != HEXI_OK)
		return rc;
	SET(*out, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
	SET(*out, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
	SET(*out, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
	SET(*out, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
	SET(*out, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1,
	    &align);
	SET(*out, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt);
	if (byv)
		SET(*out, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1,
		    &byv);
	CK(api.b_finalize(*out), "tensor finalize");
	return HEXI_OK;
}

/* Pointwise y = mode(x[, b[, t]]) (axis >= 0: GEN_INDEX along it). */
static hexi_rc pointwise(graph *g, cudnnPointwiseMode_t mode, bdesc x, bdesc b,
			 bdesc t, bdesc y, int64_t axis, bdesc *op)
{
	cudnnDataType_t prec = CUDNN_DATA_FLOAT;
	bdesc pw;

	if (mk(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, &pw) != HEXI_OK)
		return HEXI_ERR_UNSUPPORTED;
	SET(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
	SET(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
	if (axis >= 0)
		SET(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
	CK(api.b_finalize(pw), "pointwise finalize");
	if (mk(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, op) != HEXI_OK)
		return HEXI_ERR_UNSUPPORTED;
	SET(*op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
	    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw);
	SET(*op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC,
	    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
	if (b != NULL)
		SET(*op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC,
		    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
	if (t != NULL)
		SET(*op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC,
		    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
	SET(*op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC,
	    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
	CK(api.b_finalize(*op), "pointwise op finalize");
	return HEXI_OK;
}

static hexi_rc matmul(graph *g, bdesc a, bdesc b, bdesc c, bdesc *op)
{
	cudnnDataType_t prec = CUDNN_DATA_FLOAT;
	bdesc mm;

	if (mk(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR, &mm) != HEXI_OK)
		return HEXI_ERR_UNSUPPORTED;
	SET(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &prec);
	CK(api.b_finalize(mm), "matmul finalize");
	if (mk(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, op) != HEXI_OK)
		return HEXI_ERR_UNSUPPORTED;
	SET(*op, CUDNN_ATTR_OPERATION_MATMUL_ADESC,
	    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a);
	SET(*op, CUDNN_ATTR_OPERATION_MATMUL_BDESC,
	    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
	SET(*op, CUDNN_ATTR_OPERATION_MATMUL_CDESC,
	    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
	SET(*op, CUDNN_ATTR_OPERATION_MATMUL_DESC,
	    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm);
	CK(api.b_finalize(*op), "matmul op finalize");
	return HEXI_OK;
}

static hexi_rc reduction(graph *g, cudnnReduceTensorOp_t mode, bdesc x, bdesc y,
			 bdesc *op)
{
	cudnnDataType_t prec = CUDNN_DATA_FLOAT;
	bdesc rd;

	if (mk(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, &rd) != HEXI_OK)
		return HEXI_ERR_UNSUPPORTED;
	SET(rd, CUDNN_ATTR_REDUCTION_OPERATOR,
	    CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode);
	SET(rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &prec);
	CK(api.b_finalize(rd), "reduction finalize");
	if (mk(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, op) != HEXI_OK)
		return HEXI_ERR_UNSUPPORTED;
	SET(*op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC,
	    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
	SET(*op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC,
	    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
	SET(*op, CUDNN_ATTR_OPERATION_REDUCTION_DESC,
	    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &rd);
	CK(api.b_finalize(*op), "reduction op finalize");
	return HEXI_OK;
}

/* y = x seen through y's dimensions and strides (a transpose here). */
static hexi_rc reshape(graph *g, bdesc x, bdesc y, bdesc *op)
{
	hexi_rc rc = mk(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, op);

	if (rc != HEXI_OK)
		return rc;
	SET(*op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC,
	    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
	SET(*op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC,
	    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
	CK(api.b_finalize(*op), "reshape op finalize");
	return HEXI_OK;
}

/* How far make_plan got: the engine configurations heuristics offered,
 * and whether one of them compiled its kernel but the CUDA driver could
 * not load it (the driver's stub library on a machine without a GPU). */
typedef struct plan_note {
	int64_t engines;
	int driver;
} plan_note;

/* The operation graph of ops[n], then the first engine configuration of
 * heuristics mode A that finalizes into a plan; its workspace size.  For
 * the GPU of handle h, or, when h is NULL, for the GPU that the device
 * properties dev describe (cuDNN >= 9.8, no GPU needed). */
static hexi_rc make_plan(graph *g, cudnnHandle_t h, bdesc dev, bdesc *ops,
			 int n, bdesc *plan, int64_t *ws, plan_note *note)
{
	/* CUDNN_ATTR_OPERATIONGRAPH_HANDLE / EXECUTION_PLAN_HANDLE are marked
	 * deprecated in 9.x (device properties replace them) yet still the
	 * way to bind a handle: by number, so -Werror builds stay clean. */
	const cudnnBackendAttributeName_t graph_handle =
	    (cudnnBackendAttributeName_t)800;
	const cudnnBackendAttributeName_t plan_handle =
	    (cudnnBackendAttributeName_t)400;
	cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
	bdesc og, heur, cfgs[8];
	int64_t ncfg = 0;
	hexi_rc rc = HEXI_ERR_UNSUPPORTED;

	if (mk(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &og) != HEXI_OK ||
	    mk(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur) != HEXI_OK)
		return rc;
	SET(og, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n,
	    ops);
	if (h != NULL)
		SET(og, graph_handle, CUDNN_TYPE_HANDLE, 1, &h);
	CK(api.b_finalize(og), "operation graph finalize");
	SET(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
	    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &og);
	SET(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
	if (h == NULL)
		SET(heur, CUDNN_ATTR_ENGINEHEUR_DEVICEPROP,
		    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &dev);
	CK(api.b_finalize(heur), "heuristics finalize");
	for (int i = 0; i < 8; i++)
		if (mk(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[i]) !=
		    HEXI_OK)
			return rc;
	CK(api.b_get(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
		     CUDNN_TYPE_BACKEND_DESCRIPTOR, 8, &ncfg, cfgs),
	   "heuristics results");
	if (ncfg > 8)
		ncfg = 8;
	if ((note->engines = ncfg) == 0)
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "cuDNN: no engine for the attention graph");
	for (int64_t i = 0; i < ncfg; i++) {
		cudnnStatus_t st;

		if (mk(g, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, plan) !=
		    HEXI_OK)
			return rc;
		if (h != NULL)
			SET(*plan, plan_handle, CUDNN_TYPE_HANDLE, 1, &h);
		else
			SET(*plan, CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP,
			    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &dev);
		SET(*plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
		    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i]);
		st = api.b_finalize(*plan);
		note->driver |= st == CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER;
		rc = ck(st, "execution plan finalize");
		if (rc == HEXI_OK) {
			int64_t cnt = 0;
			return ck(
			    api.b_get(*plan,
				      CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
				      CUDNN_TYPE_INT64, 1, &cnt, ws),
			    "workspace size");
		}
	}
	return rc;
}

/* ---- the attention object ------------------------------------------------ */

/* Unique ids of the graphs' real tensors; virtual ones count from
 * U_VIRTUAL.  U_KB, U_VT and U_SCALE_B are the backward's second views of
 * K, V and the scale (K as dQ = dS K's operand, V^T, dS's scale). */
enum {
	U_Q = 1,
	U_K,
	U_V,
	U_O,
	U_STATS,
	U_SCALE,
	U_NEGINF,
	U_DO,
	U_DQ,
	U_DK,
	U_DV,
	U_KB,
	U_VT,
	U_SCALE_B,
	U_VIRTUAL = 100
};

/* The variant packs: the uids of rt_cuda_sdpa_forward's and _backward's
 * pointers, in their order; exactly each graph's real tensors (checked
 * when the graph is built, so a GPU-free plan check catches a mismatch
 * that would otherwise surface only in cudnnBackendExecute). */
static const int64_t fwd_uids[] = {U_Q,	    U_K,     U_V,     U_O,
				   U_STATS, U_SCALE, U_NEGINF};
static const int64_t bwd_uids[] = {U_Q,	 U_K,	  U_KB,	   U_VT,      U_O,
				   U_DO, U_STATS, U_SCALE, U_SCALE_B, U_NEGINF,
				   U_DQ, U_DK,	  U_DV};
#define NUIDS(a) ((int)(sizeof(a) / sizeof(*(a))))

static hexi_rc pack_check(const graph *g, const int64_t *uids, int n,
			  const char *what)
{
	uint64_t m = 0;

	for (int i = 0; i < n; i++)
		m |= UINT64_C(1) << uids[i];
	if (m != g->real)
		return hexi_error(
		    HEXI_ERR_INTERNAL,
		    "cuDNN %s: the variant pack's tensors "
		    "(uid mask %#llx) are not the graph's (%#llx)",
		    what, (unsigned long long)m, (unsigned long long)g->real);
	return HEXI_OK;
}

struct rt_cuda_sdpa {
	rt_cuda *c;
	rt_cuda_dtype dt;
	int B, T, NH, NKV, hs;
	/* The by-value scalars of the variant pack: the softmax scale and
	 * the mask's fill (the lowest float, as cuDNN's frontend: no inf -
	 * inf).  Their tensors declare a 16-byte alignment, so each has its
	 * own 16-byte slot rather than trusting cuDNN to read 4 bytes only. */
	_Alignas(16) float scale;
	_Alignas(16) float neg_inf;
	cudnnHandle_t h; /* NULL: plans for dev, never executed */
	bdesc dev;	 /* device properties (rt_cuda_sdpa_plan_offline) */
	graph fwd_g, bwd_g;
	bdesc fwd, bwd;	   /* plans; bwd NULL: the own backward kernel runs */
	plan_note note[2]; /* forward, backward */
	void *ws;
	size_t ws_bytes;
	float *delta;	   /* own backward's scratch (B,NH,T) */
	char bwd_why[256]; /* why bwd is NULL */
};

/* Strides of (B,T,N,hs) seen as (b, n, t, d). */
static void bnsd(const rt_cuda_sdpa *a, int n, int64_t dims[4], int64_t st[4])
{
	dims[0] = a->B, dims[1] = n, dims[2] = a->T, dims[3] = a->hs;
	st[0] = (int64_t)a->T * n * a->hs, st[1] = a->hs,
	st[2] = (int64_t)n * a->hs, st[3] = 1;
}

/* (b, h, T, T) or (b, h, T, 1) packed fp32 intermediates. */
static void rows(const rt_cuda_sdpa *a, int cols, int64_t dims[4],
		 int64_t st[4])
{
	dims[0] = a->B, dims[1] = a->NH, dims[2] = a->T, dims[3] = cols;
	st[0] = (int64_t)a->NH * a->T * cols, st[1] = (int64_t)a->T * cols,
	st[2] = cols, st[3] = 1;
}

/* Scores of the causal softmax, shared by both graphs: out *s = the
 * masked, scaled Q K^T; ops appended to ops[*n]. */
static hexi_rc scores(rt_cuda_sdpa *a, graph *g, bdesc q, bdesc kt, bdesc *ops,
		      int *n, bdesc *s)
{
	int64_t d[4], st[4], one[4] = {1, 1, 1, 1};
	bdesc s0, s1, row, col, mask, scale, ninf;

	rows(a, a->T, d, st);
	if (tensor(g, -1, CUDNN_DATA_FLOAT, d, st, 0, &s0) != HEXI_OK ||
	    matmul(g, q, kt, s0, &ops[(*n)++]) != HEXI_OK ||
	    tensor(g, U_SCALE, CUDNN_DATA_FLOAT, one, one, 1, &scale) !=
		HEXI_OK ||
	    tensor(g, -1, CUDNN_DATA_FLOAT, d, st, 0, &s1) != HEXI_OK ||
	    pointwise(g, CUDNN_POINTWISE_MUL, s0, scale, NULL, s1, -1,
		      &ops[(*n)++]) != HEXI_OK ||
	    tensor(g, -1, CUDNN_DATA_INT32, d, st, 0, &row) != HEXI_OK ||
	    pointwise(g, CUDNN_POINTWISE_GEN_INDEX, s1, NULL, NULL, row, 2,
		      &ops[(*n)++]) != HEXI_OK ||
	    tensor(g, -1, CUDNN_DATA_INT32, d, st, 0, &col) != HEXI_OK ||
	    pointwise(g, CUDNN_POINTWISE_GEN_INDEX, s1, NULL, NULL, col, 3,
		      &ops[(*n)++]) != HEXI_OK ||
	    tensor(g, -1, CUDNN_DATA_BOOLEAN, d, st, 0, &mask) != HEXI_OK ||
	    pointwise(g, CUDNN_POINTWISE_CMP_GE, row, col, NULL, mask, -1,
		      &ops[(*n)++]) != HEXI_OK ||
	    tensor(g, U_NEGINF, CUDNN_DATA_FLOAT, one, one, 1, &ninf) !=
		HEXI_OK ||
	    tensor(g, -1, CUDNN_DATA_FLOAT, d, st, 0, s) != HEXI_OK)
		return HEXI_ERR_UNSUPPORTED;
	return pointwise(g, CUDNN_POINTWISE_BINARY_SELECT, s1, ninf, mask, *s,
			 -1, &ops[(*n)++]);
}

static cudnnDataType_t io_type(const rt_cuda_sdpa *a)
{
	return a->dt == RT_CUDA_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

/* K^T (b, nkv, d, t) from K (B,T,NKV,hs). */
static hexi_rc k_transposed(rt_cuda_sdpa *a, graph *g, int64_t uid, bdesc *kt)
{
	int64_t d[4], st[4];

	bnsd(a, a->NKV, d, st);
	d[2] = a->hs, d[3] = a->T;
	st[2] = 1, st[3] = (int64_t)a->NKV * a->hs;
	return tensor(g, uid, io_type(a), d, st, 0, kt);
}

static hexi_rc build_forward(rt_cuda_sdpa *a)
{
	graph *g = &a->fwd_g;
	int64_t d[4], st[4], rd[4], rst[4];
	bdesc ops[16], q, kt, v, o, s, mx, sub, ex, sum, lg, stats, p;
	int n = 0;
	int64_t ws = 0;
	hexi_rc rc;

	g->uid = U_VIRTUAL, g->real = 0;
	bnsd(a, a->NH, d, st);
	if ((rc = tensor(g, U_Q, io_type(a), d, st, 0, &q)) != HEXI_OK ||
	    (rc = tensor(g, U_O, io_type(a), d, st, 0, &o)) != HEXI_OK ||
	    (rc = k_transposed(a, g, U_K, &kt)) != HEXI_OK)
		return rc;
	bnsd(a, a->NKV, d, st);
	if ((rc = tensor(g, U_V, io_type(a), d, st, 0, &v)) != HEXI_OK ||
	    (rc = scores(a, g, q, kt, ops, &n, &s)) != HEXI_OK)
		return rc;
	rows(a, 1, rd, rst);
	rows(a, a->T, d, st);
	if ((rc = tensor(g, -1, CUDNN_DATA_FLOAT, rd, rst, 0, &mx)) ||
	    (rc = reduction(g, CUDNN_REDUCE_TENSOR_MAX, s, mx, &ops[n++])) ||
	    (rc = tensor(g, -1, CUDNN_DATA_FLOAT, d, st, 0, &sub)) ||
	    (rc = pointwise(g, CUDNN_POINTWISE_SUB, s, mx, NULL, sub, -1,
			    &ops[n++])) ||
	    (rc = tensor(g, -1, CUDNN_DATA_FLOAT, d, st, 0, &ex)) ||
	    (rc = pointwise(g, CUDNN_POINTWISE_EXP, sub, NULL, NULL, ex, -1,
			    &ops[n++])) ||
	    (rc = tensor(g, -1, CUDNN_DATA_FLOAT, rd, rst, 0, &sum)) ||
	    (rc = reduction(g, CUDNN_REDUCE_TENSOR_ADD, ex, sum, &ops[n++])) ||
	    (rc = tensor(g, -1, CUDNN_DATA_FLOAT, rd, rst, 0, &lg)) ||
	    (rc = pointwise(g, CUDNN_POINTWISE_LOG, sum, NULL, NULL, lg, -1,
			    &ops[n++])) ||
	    (rc = tensor(g, U_STATS, CUDNN_DATA_FLOAT, rd, rst, 0, &stats)) ||
	    (rc = pointwise(g, CUDNN_POINTWISE_ADD, mx, lg, NULL, stats, -1,
			    &ops[n++])) ||
	    (rc = tensor(g, -1, io_type(a), d, st, 0, &p)) ||
	    (rc = pointwise(g, CUDNN_POINTWISE_DIV, ex, sum, NULL, p, -1,
			    &ops[n++])) ||
	    (rc = matmul(g, p, v, o, &ops[n++])) ||
	    (rc =
		 pack_check(g, fwd_uids, NUIDS(fwd_uids), "attention forward")))
		return rc;
	if ((rc = make_plan(g, a->h, a->dev, ops, n, &a->fwd, &ws,
			    &a->note[0])) != HEXI_OK)
		return hexi_error_prefix(rc, "attention forward");
	if ((size_t)ws > a->ws_bytes)
		a->ws_bytes = (size_t)ws;
	return HEXI_OK;
}

/* dK or dV (b, nkv, t, d) = x @ y, whose product has NH heads: with
 * grouped KV heads (NKV < NH) the product goes to a virtual full-head
 * tensor that an ADD reduction sums over each group, as cuDNN's GQA
 * backward expects. */
static hexi_rc kv_grad(rt_cuda_sdpa *a, graph *g, bdesc x, bdesc y, bdesc out,
		       bdesc *ops, int *n)
{
	int64_t d[4], st[4];
	bdesc full;
	hexi_rc rc;

	if (a->NKV == a->NH)
		return matmul(g, x, y, out, &ops[(*n)++]);
	d[0] = a->B, d[1] = a->NH, d[2] = a->T, d[3] = a->hs;
	st[0] = (int64_t)a->NH * a->T * a->hs, st[1] = (int64_t)a->T * a->hs;
	st[2] = a->hs, st[3] = 1;
	if ((rc = tensor(g, -1, CUDNN_DATA_FLOAT, d, st, 0, &full)) ||
	    (rc = matmul(g, x, y, full, &ops[(*n)++])))
		return rc;
	return reduction(g, CUDNN_REDUCE_TENSOR_ADD, full, out, &ops[(*n)++]);
}

/*
 * Backward as in the flash-attention recipe, in the shape cuDNN's fused
 * backward engines match: P = exp(S - stats); dV = P^T dO; dP = dO V^T;
 * dS = (dP - rowsum(dO * O)) * P * scale; dQ = dS K; dK = dS^T Q.  P^T
 * and dS^T are reshape operations (transposed strides) of P and dS.
 */
static hexi_rc build_backward(rt_cuda_sdpa *a)
{
	graph *g = &a->bwd_g;
	int64_t d[4], st[4], rd[4], rst[4], t[4], tst[4];
	bdesc ops[24], q, kt, k, vt, o, dO, dq, dk, dv, s, stats, sub, p, pt;
	bdesc dov, dsum, dp, dps, ds0, ds, dst, scale;
	int64_t one[4] = {1, 1, 1, 1}, ws = 0;
	int n = 0;
	hexi_rc rc;

	g->uid = U_VIRTUAL, g->real = 0;
	bnsd(a, a->NH, d, st);
	if ((rc = tensor(g, U_Q, io_type(a), d, st, 0, &q)) ||
	    (rc = tensor(g, U_O, io_type(a), d, st, 0, &o)) ||
	    (rc = tensor(g, U_DO, io_type(a), d, st, 0, &dO)) ||
	    (rc = tensor(g, U_DQ, io_type(a), d, st, 0, &dq)) ||
	    (rc = k_transposed(a, g, U_K, &kt)))
		return rc;
	bnsd(a, a->NKV, d, st);
	if ((rc = tensor(g, U_KB, io_type(a), d, st, 0, &k)) ||
	    (rc = tensor(g, U_DK, io_type(a), d, st, 0, &dk)) ||
	    (rc = tensor(g, U_DV, io_type(a), d, st, 0, &dv)))
		return rc;
	/* V^T (b, nkv, d, t) */
	memcpy(t, d, sizeof(t)), memcpy(tst, st, sizeof(tst));
	t[2] = a->hs, t[3] = a->T, tst[2] = 1, tst[3] = st[2];
	if ((rc = tensor(g, U_VT, io_type(a), t, tst, 0, &vt)) ||
	    (rc = scores(a, g, q, kt, ops, &n, &s)))
		return rc;
	rows(a, 1, rd, rst);
	rows(a, a->T, d, st);
	/* P^T and dS^T: (b, h, t_k, t_q) views of (b, h, t_q, t_k) */
	memcpy(t, d, sizeof(t)), memcpy(tst, st, sizeof(tst));
	tst[2] = 1, tst[3] = a->T;
	if ((rc = tensor(g, U_STATS, CUDNN_DATA_FLOAT, rd, rst, 0, &stats)) ||
	    (rc = tensor(g, -1, CUDNN_DATA_FLOAT, d, st, 0, &sub)) ||
	    (rc = pointwise(g, CUDNN_POINTWISE_SUB, s, stats, NULL, sub, -1,
			    &ops[n++])) ||
	    (rc = tensor(g, -1, CUDNN_DATA_FLOAT, d, st, 0, &p)) ||
	    (rc = pointwise(g, CUDNN_POINTWISE_EXP, sub, NULL, NULL, p, -1,
			    &ops[n++])) ||
	    (rc = tensor(g, -1, io_type(a), t, tst, 0, &pt)) ||
	    (rc = reshape(g, p, pt, &ops[n++])) ||
	    (rc = kv_grad(a, g, pt, dO, dv, ops, &n)))
		return rc;
	/* dO * O, packed (b, h, t, d) */
	t[0] = a->B, t[1] = a->NH, t[2] = a->T, t[3] = a->hs;
	tst[0] = (int64_t)a->NH * a->T * a->hs, tst[1] = (int64_t)a->T * a->hs;
	tst[2] = a->hs, tst[3] = 1;
	if ((rc = tensor(g, -1, CUDNN_DATA_FLOAT, t, tst, 0, &dov)) ||
	    (rc = pointwise(g, CUDNN_POINTWISE_MUL, dO, o, NULL, dov, -1,
			    &ops[n++])) ||
	    (rc = tensor(g, -1, CUDNN_DATA_FLOAT, rd, rst, 0, &dsum)) ||
	    (rc =
		 reduction(g, CUDNN_REDUCE_TENSOR_ADD, dov, dsum, &ops[n++])) ||
	    (rc = tensor(g, -1, CUDNN_DATA_FLOAT, d, st, 0, &dp)) ||
	    (rc = matmul(g, dO, vt, dp, &ops[n++])) ||
	    (rc = tensor(g, -1, CUDNN_DATA_FLOAT, d, st, 0, &dps)) ||
	    (rc = pointwise(g, CUDNN_POINTWISE_SUB, dp, dsum, NULL, dps, -1,
			    &ops[n++])) ||
	    (rc = tensor(g, -1, CUDNN_DATA_FLOAT, d, st, 0, &ds0)) ||
	    (rc = pointwise(g, CUDNN_POINTWISE_MUL, dps, p, NULL, ds0, -1,
			    &ops[n++])) ||
	    (rc =
		 tensor(g, U_SCALE_B, CUDNN_DATA_FLOAT, one, one, 1, &scale)) ||
	    (rc = tensor(g, -1, io_type(a), d, st, 0, &ds)) ||
	    (rc = pointwise(g, CUDNN_POINTWISE_MUL, ds0, scale, NULL, ds, -1,
			    &ops[n++])) ||
	    (rc = matmul(g, ds, k, dq, &ops[n++])))
		return rc;
	/* dS^T (b, h, t_k, t_q) for dK = dS^T Q */
	rows(a, a->T, t, tst);
	tst[2] = 1, tst[3] = a->T;
	if ((rc = tensor(g, -1, io_type(a), t, tst, 0, &dst)) ||
	    (rc = reshape(g, ds, dst, &ops[n++])) ||
	    (rc = kv_grad(a, g, dst, q, dk, ops, &n)) ||
	    (rc = pack_check(g, bwd_uids, NUIDS(bwd_uids),
			     "attention backward")))
		return rc;
	if ((rc = make_plan(g, a->h, a->dev, ops, n, &a->bwd, &ws,
			    &a->note[1])) != HEXI_OK)
		return hexi_error_prefix(rc, "attention backward");
	if ((size_t)ws > a->ws_bytes)
		a->ws_bytes = (size_t)ws;
	return HEXI_OK;
}

void rt_cuda_sdpa_destroy(rt_cuda_sdpa *a)
{
	if (a == NULL)
		return;
	graph_free(&a->bwd_g);
	graph_free(&a->fwd_g);
	if (a->h != NULL)
		api.destroy(a->h);
	if (a->dev != NULL)
		api.b_destroy(a->dev);
	rt_cuda_free(a->ws);
	rt_cuda_free(a->delta);
	free(a);
}

/* cuDNN loaded and the sizes checked: a new object without plans. */
static hexi_rc sdpa_new(rt_cuda *c, rt_cuda_dtype dt, int B, int T, int NH,
			int NKV, int hs, rt_cuda_sdpa **out)
{
	rt_cuda_sdpa *a;

	*out = NULL;
	if (!api_load())
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "cuDNN: libcudnn.so.9 not loadable (%s)",
				  api.so == NULL ? "dlopen failed" : "symbols");
	if (B < 1 || T < 1 || NH < 1 || NKV < 1 || NH % NKV || hs < 8 ||
	    hs > 128 || hs % 8)
		return hexi_error(HEXI_ERR_INVAL,
				  "cuDNN SDPA: B %d T %d NH %d NKV %d hs %d", B,
				  T, NH, NKV, hs);
	if ((a = calloc(1, sizeof(*a))) == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "cuDNN SDPA");
	*a = (rt_cuda_sdpa){.c = c,
			    .dt = dt,
			    .B = B,
			    .T = T,
			    .NH = NH,
			    .NKV = NKV,
			    .hs = hs,
			    .scale = 1.0f / sqrtf((float)hs),
			    .neg_inf = -FLT_MAX};
	*out = a;
	return HEXI_OK;
}

/* Both plans; the forward is required, a backward cuDNN refuses leaves
 * a->bwd NULL (the own backward runs) and its reason in why[cap]. */
static hexi_rc build_plans(rt_cuda_sdpa *a, char *why, size_t cap)
{
	hexi_rc rc = build_forward(a);

	if (rc != HEXI_OK)
		return rc;
	if ((rc = build_backward(a)) != HEXI_OK) {
		if (cap > 0)
			snprintf(why, cap, "%s", hexi_errmsg(rc));
		graph_free(&a->bwd_g);
		a->bwd = NULL;
		hexi_error_clear();
	}
	return HEXI_OK;
}

hexi_rc rt_cuda_sdpa_create(rt_cuda *c, rt_cuda_dtype dt, int B, int T, int NH,
			    int NKV, int hs, rt_cuda_sdpa **out)
{
	rt_cuda_sdpa *a = NULL;
	hexi_rc rc;

	*out = NULL;
	if ((rc = sdpa_new(c, dt, B, T, NH, NKV, hs, &a)) != HEXI_OK)
		return rc;
	if ((rc = ck(api.create(&a->h), "create handle")) != HEXI_OK ||
	    (rc = ck(
		 api.set_stream(a->h, (cudaStream_t)rt_cuda_compute_stream(c)),
		 "set stream")) != HEXI_OK ||
	    (rc = build_plans(a, a->bwd_why, sizeof(a->bwd_why))) != HEXI_OK)
		goto fail;
	if ((rc = rt_cuda_alloc((void **)&a->delta,
				(size_t)B * NH * T * sizeof(float))) !=
		HEXI_OK ||
	    (a->ws_bytes > 0 &&
	     (rc = rt_cuda_alloc(&a->ws, a->ws_bytes)) != HEXI_OK))
		goto fail;
	*out = a;
	return HEXI_OK;
fail:
	rt_cuda_sdpa_destroy(a);
	return rc;
}

const char *rt_cuda_sdpa_backward_why(const rt_cuda_sdpa *a)
{
	return a->bwd == NULL ? a->bwd_why : NULL;
}

/* Device properties need cuDNN 9.8 (CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR). */
static hexi_rc devprop_supported(void)
{
	if (!api_load())
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "cuDNN: libcudnn.so.9 not loadable");
	if (api.version() < 90800)
		return hexi_error(HEXI_ERR_UNSUPPORTED,
				  "cuDNN %ld: device properties need cuDNN "
				  ">= 9.8",
				  (long)api.version());
	return HEXI_OK;
}

/* How far one plan got (rt_cuda_sdpa_plans) from its build's rc and
 * note; cuDNN's reason in why when it is not ready. */
static rt_cuda_plan_stage plan_stage(hexi_rc rc, const plan_note *note,
				     char *why, size_t cap)
{
	if (rc == HEXI_OK)
		return RT_CUDA_PLAN_READY;
	snprintf(why, cap, "%s", hexi_errmsg(rc));
	hexi_error_clear();
	/* engines offered, and the one tried compiled its kernel: only
	 * loading it needs the driver (CUDA_ERROR_STUB_LIBRARY, no GPU) */
	return note->engines > 0 && note->driver ? RT_CUDA_PLAN_COMPILED
						 : RT_CUDA_PLAN_NONE;
}

hexi_rc rt_cuda_sdpa_plan_offline(const char *devprop_json, rt_cuda_dtype dt,
				  int B, int T, int NH, int NKV, int hs,
				  rt_cuda_sdpa_plans *r)
{
	rt_cuda_sdpa *a = NULL;
	hexi_rc rc;

	memset(r, 0, sizeof(*r));
	if ((rc = devprop_supported()) != HEXI_OK ||
	    (rc = sdpa_new(NULL, dt, B, T, NH, NKV, hs, &a)) != HEXI_OK)
		return rc;
	if ((rc = ck(api.b_create(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, &a->dev),
		     "create device properties")) != HEXI_OK)
		a->dev = NULL;
	else if ((rc = ck(api.b_set(
			      a->dev, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION,
			      CUDNN_TYPE_CHAR, (int64_t)strlen(devprop_json),
			      devprop_json),
			  "device properties")) == HEXI_OK &&
		 (rc = ck(api.b_finalize(a->dev),
			  "device properties finalize")) == HEXI_OK) {
		/* both graphs, whatever the forward's fate: a report */
		hexi_rc f = build_forward(a);

		r->fwd =
		    plan_stage(f, &a->note[0], r->fwd_why, sizeof(r->fwd_why));
		f = build_backward(a);
		r->bwd =
		    plan_stage(f, &a->note[1], r->bwd_why, sizeof(r->bwd_why));
		r->fwd_engines = (int)a->note[0].engines;
		r->bwd_engines = (int)a->note[1].engines;
		r->ws_bytes = a->ws_bytes;
	}
	rt_cuda_sdpa_destroy(a);
	return rc;
}

hexi_rc rt_cuda_cudnn_devprop_json(int device, char **json)
{
	bdesc d = NULL;
	int32_t id = device;
	int64_t n = 0;
	hexi_rc rc;

	*json = NULL;
	if ((rc = devprop_supported()) != HEXI_OK ||
	    (rc = ck(api.b_create(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, &d),
		     "create device properties")) != HEXI_OK)
		return rc;
	if ((rc = ck(api.b_set(d, CUDNN_ATTR_DEVICEPROP_DEVICE_ID,
			       CUDNN_TYPE_INT32, 1, &id),
		     "device properties: device id")) == HEXI_OK &&
	    (rc = ck(api.b_finalize(d), "device properties finalize")) ==
		HEXI_OK &&
	    (rc = ck(api.b_get(d, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION,
			       CUDNN_TYPE_CHAR, 0, &n, NULL),
		     "device properties: size")) == HEXI_OK) {
		if (n < 1 || (*json = calloc((size_t)n + 1, 1)) == NULL)
			rc = hexi_error(HEXI_ERR_NOMEM,
					"cuDNN device properties: %lld bytes",
					(long long)n);
		else if ((rc = ck(api.b_get(
				      d,
				      CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION,
				      CUDNN_TYPE_CHAR, n, &n, *json),
				  "device properties: json")) != HEXI_OK) {
			free(*json);
			*json = NULL;
		}
	}
	api.b_destroy(d);
	return rc;
}

static hexi_rc execute(rt_cuda_sdpa *a, bdesc plan, const int64_t *uids,
		       void **ptrs, int n, const char *what)
{
	graph vp_g = {.n = 0};
	bdesc vp;
	hexi_rc rc;

	if ((rc = mk(&vp_g, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp)) ==
		HEXI_OK &&
	    (rc = set(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
		      n, uids)) == HEXI_OK &&
	    (rc = set(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
		      CUDNN_TYPE_VOID_PTR, n, ptrs)) == HEXI_OK &&
	    (rc = set(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
		      CUDNN_TYPE_VOID_PTR, 1, &a->ws)) == HEXI_OK &&
	    (rc = ck(api.b_finalize(vp), "variant pack")) == HEXI_OK)
		rc = ck(api.b_execute(a->h, plan, vp), what);
	graph_free(&vp_g);
	return rc;
}

hexi_rc rt_cuda_sdpa_forward(rt_cuda_sdpa *a, void *out, float *lse,
			     const void *q, const void *k, const void *v)
{
	void *ptrs[] = {
	    (void *)q, (void *)k, (void *)v,  out,
	    lse,       &a->scale, &a->neg_inf}; /* fwd_uids' order */
	_Static_assert(sizeof(ptrs) / sizeof(*ptrs) == NUIDS(fwd_uids),
		       "one pointer per forward uid");

	return execute(a, a->fwd, fwd_uids, ptrs, NUIDS(fwd_uids),
		       "attention forward");
}

hexi_rc rt_cuda_sdpa_backward(rt_cuda_sdpa *a, void *dq, void *dk, void *dv,
			      const void *dout, const void *out, const void *q,
			      const void *k, const void *v, const float *lse)
{
	void *ptrs[] = {(void *)q,   (void *)k,	   (void *)k,	(void *)v,
			(void *)out, (void *)dout, (void *)lse, &a->scale,
			&a->scale,   &a->neg_inf,  dq,		dk,
			dv}; /* bwd_uids' order: V only as V^T */
	_Static_assert(sizeof(ptrs) / sizeof(*ptrs) == NUIDS(bwd_uids),
		       "one pointer per backward uid");

	if (a->bwd == NULL) {
		/* own kernel adds: the caller zeroed dq, dk, dv */
		return rt_cuda_attention_backward(
		    rt_cuda_compute_stream(a->c), a->dt, dq, dk, dv, dout, out,
		    q, k, v, lse, a->delta, a->B, a->T, a->NH, a->NKV, a->hs);
	}
	return execute(a, a->bwd, bwd_uids, ptrs, NUIDS(bwd_uids),
		       "attention backward");
}

#endif /* HAVE_CUDNN */
