/*
 * hexi_prof.h - HexiScale profiler: micro-benchmarks that turn a machine's
 * real speeds into the numbers the cost model uses, and the profile file
 * (format "hexiscale-profile", version 1) that hexi_catalog_apply_profiles()
 * reads in place of catalog values.  The CLI is hexiprof(1).
 *
 * Every benchmark validates its result first (GEMM checked on a sample of
 * entries against a double-precision reference, messages checked against a
 * known pattern, reductions against the known sum) and only then times:
 * warm-up runs, then repeats, reported as median, min, max and spread.
 *
 * Ownership: hexi_profile_to_json() and hexi_prof_report_to_json() return
 * heap strings the caller frees.  A value that was not measured is NAN and
 * is left out of the profile (every field but format/version is optional).
 */
#ifndef HEXI_PROF_H
#define HEXI_PROF_H

#include <stddef.h>
#include <stdint.h>

#include "hexi_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HEXI_PROFILE_FORMAT  "hexiscale-profile"
#define HEXI_PROFILE_VERSION 1
#define HEXI_PROF_MAX_GPUS   64
#define HEXI_PROF_NAME_MAX   64
#define HEXI_PROF_MAX_MEAS   128
#define HEXI_PROF_MAX_SHAPES 16
/* The smallest largest message (-s) whose time gives a link bandwidth:
 * below it the transfer is mostly latency, and stored as a bandwidth it
 * made every planned transfer orders of magnitude too slow. */
#define HEXI_PROF_BW_MIN_BYTES ((size_t)1 << 20)

/* ---- timing statistics ----------------------------------------------------
 */

typedef struct hexi_prof_stat {
	int repeats;	 /* timed runs */
	double median_s; /* median of the timed runs */
	double min_s;
	double max_s;
	double spread_pct;    /* (max - min) / median * 100 */
	int calls_per_sample; /* a sample is the mean of this many calls */
} hexi_prof_stat;

/* One run of the thing to time; returns HEXI_OK or an error (stops timing). */
typedef hexi_rc (*hexi_prof_fn)(void *arg);

/* Run fn warmup times untimed, then repeats times timed (1..10000). */
hexi_rc hexi_prof_time(hexi_prof_fn fn, void *arg, int warmup, int repeats,
		       hexi_prof_stat *out);
/* The same, but each sample runs fn back to back enough times (at most
 * 1000) to last about min_sample_s and records the time per call: short
 * operations are then measured at their sustained rate, and a time slice
 * lost to another process weighs less.  min_sample_s 0..10 (0: one call). */
hexi_rc hexi_prof_time_min(hexi_prof_fn fn, void *arg, int warmup, int repeats,
			   double min_sample_s, hexi_prof_stat *out);
/* Statistics of n samples (seconds); sorts samples in place. */
hexi_rc hexi_prof_stat_of(double *samples_s, int n, hexi_prof_stat *out);

/* ---- measurements (the detailed report) ---------------------------------- */

typedef struct hexi_prof_meas {
	char name[HEXI_PROF_NAME_MAX];	/* e.g. "cpu.sgemm", "mpi.allreduce" */
	char shape[HEXI_PROF_NAME_MAX]; /* e.g. "1024x1024x1024", "4194304B" */
	char unit[16];			/* "GFLOP/s", "TFLOP/s", "GB/s", "s" */
	double value;			/* at the median time, in unit */
	double best;			/* at the minimum time, in unit */
	hexi_prof_stat stat;
	double check_err; /* validation error (max relative), 0 if exact */
	int device;	  /* GPU index or -1 */
} hexi_prof_meas;

typedef struct hexi_prof_report {
	int nmeas;
	hexi_prof_meas meas[HEXI_PROF_MAX_MEAS];
} hexi_prof_report;

/* Append one measurement; HEXI_ERR_RANGE when full. */
hexi_rc hexi_prof_report_add(hexi_prof_report *r, const hexi_prof_meas *m);

/* ---- the profile file ------------------------------------------------------
 */

typedef struct hexi_prof_gpu {
	char type[HEXI_PROF_NAME_MAX]; /* catalog type, e.g. "rtx4090" */
	int index;		       /* CUDA ordinal on the host */
	char name[256];		       /* device name as the driver reports */
	double gemm_tflops_bf16, gemm_tflops_fp16, gemm_tflops_fp32;
	double mem_bw_gbps, h2d_gbps, d2h_gbps;
} hexi_prof_gpu;

typedef struct hexi_profile {
	char host[HEXI_PROF_NAME_MAX];
	int ngpus;
	hexi_prof_gpu gpus[HEXI_PROF_MAX_GPUS];
	double cpu_gemm_gflops; /* NAN: no "cpu" object */
	double cpu_mem_bw_gbps; /* streaming triad, one thread; NAN: none */
	int cpu_threads;
	double intra_bw_gbps, intra_lat_s, inter_bw_gbps, inter_lat_s;
} hexi_profile;

/* Every number NAN, no GPUs, host copied (HEXI_ERR_RANGE if too long). */
hexi_rc hexi_profile_init(hexi_profile *p, const char *host);
/* A GPU entry with every number NAN. */
void hexi_prof_gpu_init(hexi_prof_gpu *g, int index);
/* Compact JSON of the profile, exactly the hexiscale-profile format. */
hexi_rc hexi_profile_to_json(const hexi_profile *p, char **out);
/* hexiprof --json: {"format":"hexiscale-profile-report","version":1,
 * "mode":..., "profile":{...}, "measurements":[...]} */
hexi_rc hexi_prof_report_to_json(const hexi_profile *p,
				 const hexi_prof_report *r, const char *mode,
				 char **out);

/* The built-in catalog's type for a device name, as
 * hexi_catalog_builtin_type() gives it ("NVIDIA GeForce RTX 4090" ->
 * "rtx4090", "NVIDIA A800-SXM4-80GB" -> "a800-80g"); "unknown" for a name
 * the catalog does not know.  Static storage. */
const char *hexi_prof_gpu_type_guess(const char *device_name);

/* ---- parsers of command-line values (strict) ------------------------------
 */

typedef struct hexi_prof_shape {
	long m, n, k; /* C(m,n) = A(m,k) B(k,n) */
	int ta, tb;   /* CPU mode: A, B stored transposed (":tn" etc.) */
	int acc;      /* CPU mode: C += A B (beta 1, ":nna" etc.) */
} hexi_prof_shape;

/* "MxNxK[:XY[a]]", each 1..65536 and m*n, n*k, m*k <= 2^31 elements; XY
 * (n or t each) stores A, B transposed (CPU mode, as cblas_sgemm's flags);
 * a trailing a accumulates into C (beta 1, as a gradient GEMM does). */
hexi_rc hexi_prof_parse_shape(const char *s, hexi_prof_shape *out);
/* Byte size "N", "NK", "NM", "NG" (binary), 1 .. 2^34. */
hexi_rc hexi_prof_parse_bytes(const char *s, size_t *out);

/* ---- benchmarks -------------------------------------------------------- */

typedef struct hexi_prof_opts {
	int warmup;	/* untimed runs (default 2) */
	int repeats;	/* timed runs (default 10) */
	int quick;	/* small sizes (tests, CI) */
	int nshapes;	/* extra GEMM shapes */
	int only_given; /* 1: only the given shapes, no defaults */
	int rate_mean;	/* profile rate: 0 best median, 1 FLOP-weighted mean */
	hexi_prof_shape shapes[HEXI_PROF_MAX_SHAPES];
	size_t max_msg_bytes; /* largest message of the link tests */
	size_t membw_bytes;   /* CPU triad working set (3 arrays), bytes */
	double min_sample_s;  /* GEMM and copy samples last at least this */
	char gpu_type[HEXI_PROF_NAME_MAX]; /* "" = guess from the name */
} hexi_prof_opts;

void hexi_prof_opts_defaults(hexi_prof_opts *o);

/* Default GEMM shapes of a mode ("cpu" or "gpu"), quick or not; returns the
 * count written to out (at most cap). */
int hexi_prof_default_shapes(const char *mode, int quick, hexi_prof_shape *out,
			     int cap);

/* CPU mode: OpenBLAS sgemm GFLOP/s (best shape goes to the profile) and
 * the thread count.  HEXI_ERR_UNSUPPORTED without OpenBLAS. */
hexi_rc hexi_prof_cpu(const hexi_prof_opts *o, hexi_profile *p,
		      hexi_prof_report *r);

/* One sgemm validated against a double reference on a sample of entries;
 * max relative error (vs sum of |a*b|) in *err.  Used by the tests. */
hexi_rc hexi_prof_cpu_sgemm_check(long m, long n, long k, double *err);

/* MPI context of the link benchmarks (opaque; NULL without MPI). */
typedef struct hexi_prof_mpi hexi_prof_mpi;

/* 1 if the process was started by an MPI launcher (mpirun, srun). */
int hexi_prof_mpi_launched(void);
/* MPI_Init (threads: funneled) and learn ranks and nodes. */
hexi_rc hexi_prof_mpi_init(int *argc, char ***argv, hexi_prof_mpi **out);
int hexi_prof_mpi_rank(const hexi_prof_mpi *m);
int hexi_prof_mpi_size(const hexi_prof_mpi *m);
int hexi_prof_mpi_local_rank(const hexi_prof_mpi *m);
/* Barrier over all ranks (no-op for NULL); it waits asleep (MPI_Ibarrier
 * tested every millisecond), not spinning on a core a rank that is still
 * measuring needs. */
hexi_rc hexi_prof_mpi_barrier(hexi_prof_mpi *m);
/* Broadcast bytes from rank root over all ranks (no-op for NULL). */
hexi_rc hexi_prof_mpi_bcast(hexi_prof_mpi *m, void *buf, size_t bytes,
			    int root);
/* Minimum (op 0) or maximum (op 1) of one double over all ranks. */
hexi_rc hexi_prof_mpi_reduce_double(hexi_prof_mpi *m, double *v, int op);
/* Ping-pong send/recv (latency, bandwidth) to a rank on the same node and
 * to one on another node, all-reduce and sendrecv bus bandwidth over all
 * ranks (nccl-tests' busbw).  Fills p->links on rank 0. */
hexi_rc hexi_prof_mpi_links(hexi_prof_mpi *m, const hexi_prof_opts *o,
			    hexi_profile *p, hexi_prof_report *r);
/* Number of nodes of the job (1 without MPI). */
int hexi_prof_mpi_nnodes(const hexi_prof_mpi *m);
/* Collect every rank's GPU entries (at most 8 each) on its node's leader
 * (local rank 0), appended to p->gpus in local-rank order; no-op on
 * others and without MPI. */
hexi_rc hexi_prof_mpi_gather_gpus(hexi_prof_mpi *m, const hexi_prof_gpu *mine,
				  int nmine, hexi_profile *p);
/* Bring every rank down with code (for the CLI after a failure on one
 * rank, so peers in a collective do not hang); returns without MPI. */
void hexi_prof_mpi_abort(hexi_prof_mpi *m, int code);
/* Finalize and free (NULL is a no-op). */
void hexi_prof_mpi_fini(hexi_prof_mpi *m);

/* GPU mode (built with CUDA): device count, or an error naming the CUDA
 * status ("cudaGetDeviceCount returned 35 (...)"). */
hexi_rc hexi_prof_gpu_count(int *n);
/* Per-device GEMM (bf16, fp16, fp32), memory and host<->device bandwidth,
 * GPU<->GPU on the node; devices[0..ndev-1] are CUDA ordinals. */
hexi_rc hexi_prof_gpu_run(const hexi_prof_opts *o, const int *devices, int ndev,
			  hexi_profile *p, hexi_prof_report *r);
/* NCCL all-reduce and send/recv bus bandwidth and small-message latency
 * between the ranks of the job (one GPU per rank, id broadcast over MPI). */
hexi_rc hexi_prof_nccl(hexi_prof_mpi *m, const hexi_prof_opts *o, int device,
		       hexi_profile *p, hexi_prof_report *r);

#ifdef __cplusplus
}
#endif
#endif /* HEXI_PROF_H */
