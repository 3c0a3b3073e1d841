/*
 * bench_ckpt - checkpoint throughput against the same bytes moved by dd and
 * cp, measured in the same run (make bench).
 *
 *   save:    all rank files written, fsynced and committed, vs
 *            dd of the same files with conv=fsync
 *   load:    every slice read back with checksums, vs dd of the files to
 *            /dev/null (both cold: the files' pages are dropped first with
 *            posix_fadvise, no system-wide cache drop)
 *   reshard: plan (2,3) -> (1,4) in a child process (peak RSS from
 *            wait4), vs cp -r of the step directory plus fsync of the copies
 *
 * Size: HEXI_CKPT_BENCH_MIB (default 256; 2048 for the 2 GiB run).
 * The disk is shared and noisy: each measurement is the best of
 * HEXI_CKPT_BENCH_REPS runs (default 3), alternating ours and the baseline.
 * Directory: HEXI_CKPT_BENCH_DIR, else $TMPDIR, else /tmp (a real disk).
 * Prints ratios; asserts nothing about time.
 */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <stdarg.h>
#include <time.h>

#include "ckpt_fixture.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds (user + system) of this process and its waited-for
 * children: a measure the load of a shared machine does not inflate. */
static double cpu_s(void)
{
	struct rusage a, b;

	getrusage(RUSAGE_SELF, &a);
	getrusage(RUSAGE_CHILDREN, &b);
	return (double)(a.ru_utime.tv_sec + a.ru_stime.tv_sec +
			b.ru_utime.tv_sec + b.ru_stime.tv_sec) +
	       1e-6 * (double)(a.ru_utime.tv_usec + a.ru_stime.tv_usec +
			       b.ru_utime.tv_usec + b.ru_stime.tv_usec);
}

/* Best wall and CPU time of one measured operation. */
typedef struct meas {
	double wall, cpu;
} meas;

static double meas_add(meas *m, double wall, double cpu)
{
	if (m->wall == 0 || wall < m->wall)
		m->wall = wall;
	if (m->cpu == 0 || cpu < m->cpu)
		m->cpu = cpu;
	return wall;
}

static void die(const char *what, hexi_rc rc)
{
	fprintf(stderr, "bench_ckpt: %s: %s\n", what, hexi_errmsg(rc));
	exit(1);
}

static void model_for(int64_t mib, fx_model *m)
{
	/* hidden 1024, ffn 4096, vocab 8192, with moments: 96 MiB of
	 * embeddings and ~48 MiB per layer. */
	int64_t per = 48;

	m->vocab = 8192;
	m->hidden = 1024;
	m->ffn = 4096;
	m->opt = 1;
	m->layers = (int)((mib - 96 + per - 1) / per);
	if (m->layers < 1)
		m->layers = 1;
}

static uint64_t layout_bytes(const hexi_layout *l)
{
	uint64_t b = 0;
	int i;

	for (i = 0; i < l->ntensors; i++)
		b += (uint64_t)l->tensors[i].shape[0] *
		     (uint64_t)(l->tensors[i].ndim == 2 ? l->tensors[i].shape[1]
							: 1) *
		     4;
	return b;
}

/* Drop the page cache of every regular file under DIR (ours only). */
static void drop_cache(const char *dir)
{
	char p[1200];
	struct dirent *e;
	DIR *d = opendir(dir);

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		int fd;
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		fd = open(p, O_RDONLY);
		if (fd < 0)
			continue;
		fdatasync(fd);
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
	}
	closedir(d);
}

static double run(const char *cmd)
{
	double t0 = now_s();

	if (system(cmd) != 0) {
		fprintf(stderr, "bench_ckpt: failed: %s\n", cmd);
		exit(1);
	}
	return now_s() - t0;
}

static double save(const char *dir, const hexi_layout *l, int world)
{
	hexi_ckpt_meta meta;
	hexi_ckpt_writer *w;
	size_t maxn = 0;
	float *buf;
	double t0;
	int i, j, r;
	hexi_rc rc;

	for (i = 0; i < l->ntensors; i++)
		for (j = 0; j < l->tensors[i].nshards; j++) {
			const hexi_tensor_layout *t = &l->tensors[i];
			size_t n = (size_t)(t->shards[j].row_end -
					    t->shards[j].row_begin) *
				   (size_t)(t->ndim == 2 ? t->shape[1] : 1);
			if (n > maxn)
				maxn = n;
		}
	buf = malloc(maxn * 4);
	if (buf == NULL)
		die("buffer", HEXI_ERR_NOMEM);
	fx_fill("bench", 0, 1, (int64_t)maxn, 1, buf);
	fx_meta(&meta, 1, world, "00112233aabbccdd");
	t0 = now_s();
	for (r = 0; r < world; r++) {
		if ((rc = hexi_ckpt_save_begin(dir, &meta, r, &w)) != HEXI_OK)
			die("save_begin", rc);
		for (i = 0; i < l->ntensors; i++) {
			const hexi_tensor_layout *t = &l->tensors[i];
			for (j = 0; j < t->nshards; j++)
				if (t->shards[j].rank == r &&
				    hexi_ckpt_shard_is_writer(t, j) &&
				    (rc = hexi_ckpt_write_slice(
					 w, t->name, t->ndim, t->shape,
					 t->shards[j].row_begin,
					 t->shards[j].row_end, buf)) != HEXI_OK)
					die("write", rc);
		}
		if ((rc = hexi_ckpt_save_end(w)) != HEXI_OK)
			die("save_end", rc);
	}
	if ((rc = hexi_ckpt_commit(dir, &meta, "{}")) != HEXI_OK)
		die("commit", rc);
	t0 = now_s() - t0;
	free(buf);
	return t0;
}

static double load(const char *dir)
{
	hexi_ckpt_reader *r = NULL;
	hexi_ckpt_tensor_info ti;
	hexi_ckpt_slice_info si;
	float *buf = NULL;
	size_t cap = 0, n;
	double t0 = now_s();
	hexi_rc rc;
	int i, j, k;

	if ((rc = hexi_ckpt_open(dir, NULL, &r)) != HEXI_OK)
		die("open", rc);
	/* Each stored slice once, rank by rank, as the ranks of the same plan
	 * would (each reads its own file). */
	for (k = 0; k < hexi_ckpt_reader_meta(r)->world_size; k++)
		for (i = 0; i < hexi_ckpt_ntensors(r); i++) {
			hexi_ckpt_tensor_at(r, i, &ti);
			for (j = 0; j < ti.nslices; j++) {
				hexi_ckpt_slice_at(r, i, j, &si);
				if (si.rank != k)
					continue;
				n = (size_t)(si.row_end - si.row_begin) *
				    (size_t)ti.shape[1] * 4;
				if (n > cap) {
					free(buf);
					buf = malloc(n);
					cap = n;
					if (buf == NULL)
						die("buffer", HEXI_ERR_NOMEM);
				}
				if ((rc = hexi_ckpt_read_rows(
					 r, ti.name, si.row_begin, si.row_end,
					 buf)) != HEXI_OK)
					die("read", rc);
			}
		}
	hexi_ckpt_close(r);
	free(buf);
	return now_s() - t0;
}

static int reshard_child(const char *src, const char *dst, int64_t mib)
{
	fx_model m;
	int tp[2] = {1, 4};
	hexi_layout *l;
	hexi_ckpt_reader *r = NULL;
	hexi_ckpt_reshard_target t;
	hexi_rc rc;

	model_for(mib, &m);
	l = fx_layout(&m, 2, tp);
	memset(&t, 0, sizeof(t));
	t.layout = l;
	t.world_size = fx_world(2, tp);
	t.plan_hash = "ffeeddccbbaa9988";
	t.plan_json = "{}";
	if ((rc = hexi_ckpt_open(src, NULL, &r)) == HEXI_OK)
		rc = hexi_ckpt_reshard(r, &t, dst, NULL, NULL);
	hexi_ckpt_close(r);
	fx_layout_free(l);
	if (rc != HEXI_OK)
		die("reshard", rc);
	return 0;
}

static double reshard(const char *src, const char *dst, int64_t mib,
		      long *maxrss_kib)
{
	char m[32];
	struct rusage ru;
	double t0 = now_s();
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		snprintf(m, sizeof(m), "%lld", (long long)mib);
		execl("/proc/self/exe", "bench_ckpt", "--reshard", src, dst, m,
		      (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0)
		die("reshard child", HEXI_ERR_INTERNAL);
	*maxrss_kib = ru.ru_maxrss;
	return now_s() - t0;
}

static void shf(char *cmd, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void shf(char *cmd, size_t cap, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, cap, fmt, ap);
	va_end(ap);
}

#define MEASURE(m, expr)                                                       \
	do {                                                                   \
		double c0_ = cpu_s();                                          \
		double w_ = (expr);                                            \
		meas_add(&(m), w_, cpu_s() - c0_);                             \
	} while (0)

static void report(const char *what, const char *base, const char *goal,
		   double mb, const meas *ours, const meas *theirs)
{
	printf("%-8s %7.1f MiB/s  %-14s %7.1f MiB/s  ratio %.2f %s\n", what,
	       mb / ours->wall, base, mb / theirs->wall,
	       theirs->wall / ours->wall, goal);
	printf("%-8s   CPU %.2f s vs %.2f s (ratio %.2f; the machine's load "
	       "does not inflate it)\n",
	       "", ours->cpu, theirs->cpu,
	       ours->cpu > 0 ? theirs->cpu / ours->cpu : 0.0);
}

int main(int argc, char **argv)
{
	const char *e = getenv("HEXI_CKPT_BENCH_MIB"), *bd;
	const char *er = getenv("HEXI_CKPT_BENCH_REPS");
	int64_t mib = e ? atoll(e) : 256;
	int reps = er ? atoi(er) : 3, rep;
	int tp[2] = {2, 3}, world = fx_world(2, tp);
	char dir[1024], a[1100], b[1100], step[1200], cmd[4096];
	meas ms = {0, 0}, mdd = {0, 0}, ml = {0, 0}, mddr = {0, 0}, mr = {0, 0},
	     mcp = {0, 0};
	double mb;
	long rss = 0, r1 = 0;
	hexi_layout *l;
	fx_model m;

	if (argc == 5 && strcmp(argv[1], "--reshard") == 0)
		return reshard_child(argv[2], argv[3], atoll(argv[4]));
	if (mib < 16)
		mib = 16;
	if (reps < 1)
		reps = 1;
	hexi_log_set_level(HEXI_LOG_ERROR);
	bd = getenv("HEXI_CKPT_BENCH_DIR");
	if (bd == NULL || *bd == '\0')
		bd = getenv("TMPDIR");
	snprintf(dir, sizeof(dir), "%s/hexickpt-bench.XXXXXX",
		 bd && *bd ? bd : "/tmp");
	if (mkdtemp(dir) == NULL)
		die("mkdtemp", HEXI_ERR_IO);
	snprintf(a, sizeof(a), "%s/a", dir);
	snprintf(b, sizeof(b), "%s/b", dir);
	snprintf(step, sizeof(step), "%s/step-00000001", a);
	model_for(mib, &m);
	l = fx_layout(&m, 2, tp);
	mb = (double)layout_bytes(l) / 1048576.0;
	printf("checkpoint: %d layers, %.1f MiB of tensors, %d rank files, "
	       "best of %d, in %s\n",
	       m.layers, mb, world, reps, dir);
	fflush(stdout);
	for (rep = 0; rep < reps; rep++) {
		shf(cmd, sizeof(cmd), "rm -rf '%s' '%s' '%s/dd' '%s/cp'", a, b,
		    dir, dir);
		run(cmd);
		/* save vs dd of the same files with fsync (sources in page
		 * cache, as the writer's tensors are in memory) */
		MEASURE(ms, save(a, l, world));
		shf(cmd, sizeof(cmd), "cat '%s'/rank-*.h5 >/dev/null", step);
		run(cmd);
		shf(cmd, sizeof(cmd),
		    "mkdir -p '%s/dd' && for f in '%s'/rank-*.h5; do dd "
		    "if=\"$f\" of='%s/dd/'\"${f##*/}\" bs=8M conv=fsync "
		    "status=none || exit 1; done",
		    dir, step, dir);
		MEASURE(mdd, run(cmd));
		/* load vs dd to /dev/null, both cold */
		drop_cache(step);
		MEASURE(ml, load(a));
		drop_cache(step);
		shf(cmd, sizeof(cmd),
		    "for f in '%s'/rank-*.h5; do dd if=\"$f\" of=/dev/null "
		    "bs=8M status=none || exit 1; done",
		    step);
		MEASURE(mddr, run(cmd));
		/* reshard vs cp + fsync, sources cold */
		drop_cache(step);
		MEASURE(mr, reshard(a, b, mib, &r1));
		if (r1 > rss)
			rss = r1;
		drop_cache(step);
		shf(cmd, sizeof(cmd), "cp -r '%s' '%s/cp' && sync '%s'/cp/*",
		    step, dir, dir);
		MEASURE(mcp, run(cmd));
	}
	report("save", "dd conv=fsync", "(goal >= 0.8)", mb, &ms, &mdd);
	report("load", "dd, cold", "(goal >= 0.8; checksums verified)", mb, &ml,
	       &mddr);
	report("reshard", "cp + fsync", "(goal >= 0.7)", mb, &mr, &mcp);
	printf("reshard peak RSS %.1f MiB (bound 128 MiB, any size)\n",
	       (double)rss / 1024.0);
	fx_layout_free(l);
	fx_rmrf(dir);
	return 0;
}
