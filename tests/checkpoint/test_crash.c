/*
 * test_crash.c - kill -9 during a save: a forked writer saves step after
 * step and is killed with SIGKILL at a random moment; the latest commit must
 * always open, verify and hold exactly the data of its step, and the
 * interrupted step must stay invisible.  The next writer re-saves over the
 * interrupted directory.
 */
#include "config.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "tap.h"
#include "ckpt_fixture.h"

#define ROUNDS 8

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void writer(const char *dir, const hexi_layout *l, int world,
		   int64_t first)
{
	int64_t s;

	for (s = first; s < HEXI_CKPT_MAX_STEP; s++)
		if (fx_save(dir, l, world, s, "00112233aabbccdd", "{}") !=
		    HEXI_OK)
			_exit(3);
	_exit(0);
}

static void check_latest(const char *dir, int round, int64_t *last)
{
	hexi_ckpt_reader *r = NULL;
	hexi_ckpt_open_opts o;
	hexi_rc rc = hexi_ckpt_open(dir, NULL, &r);
	int64_t step = -1;

	is_rc(rc, HEXI_OK, "round %d: latest opens", round);
	if (r == NULL)
		return;
	step = hexi_ckpt_reader_meta(r)->step;
	ok(step >= *last, "round %d: latest step %lld >= previous %lld", round,
	   (long long)step, (long long)*last);
	is_rc(hexi_ckpt_verify(r, NULL, NULL), HEXI_OK, "round %d: verifies",
	      round);
	is_int(fx_check(r, (uint64_t)step, 1000000), 0,
	       "round %d: data of step %lld", round, (long long)step);
	hexi_ckpt_close(r);
	hexi_ckpt_open_opts_init(&o);
	o.step = step + 1;
	rc = hexi_ckpt_open(dir, &o, &r);
	ok(rc == HEXI_ERR_NOTFOUND, "round %d: interrupted step %lld invisible",
	   round, (long long)step + 1);
	hexi_ckpt_close(r);
	*last = step;
}

int main(void)
{
	fx_model fm = {3, 256, 64, 384, 1};
	int tp[2] = {2, 3}, world = fx_world(2, tp), round, st;
	hexi_layout *l = fx_layout(&fm, 2, tp);
	char dir[512];
	double t0, save_s;
	int64_t last = 1;
	pid_t pid;

	if (l == NULL || fx_tmpdir(dir, sizeof(dir)) == NULL)
		tap_bail("setup");
	hexi_log_set_level(HEXI_LOG_ERROR);
	t0 = now_s();
	if (fx_save(dir, l, world, 1, "00112233aabbccdd", "{}") != HEXI_OK)
		tap_bail(hexi_errmsg(HEXI_ERR_IO));
	save_s = now_s() - t0;
	srand(12345);
	for (round = 0; round < ROUNDS; round++) {
		/* Kill somewhere within the first ~3 saves of this writer. */
		useconds_t delay = (useconds_t)(1e6 * save_s * 3.0 *
						((double)rand() / RAND_MAX));
		fflush(stdout);
		pid = fork();
		if (pid < 0)
			tap_bail("fork");
		if (pid == 0)
			writer(dir, l, world, last + 1);
		usleep(delay);
		kill(pid, SIGKILL);
		if (waitpid(pid, &st, 0) != pid)
			tap_bail("waitpid");
		ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
		   "round %d: writer killed after %.1f ms", round, delay / 1e3);
		check_latest(dir, round, &last);
	}
	fx_rmrf(dir);
	fx_layout_free(l);
	return tap_done();
}
