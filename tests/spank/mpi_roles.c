/*
 * mpi_roles.c - run under srun --mpi=pmix with a HexiScale plan: builds the
 * plan's communicators from the role variables alone (hexiscale-env(7))
 * and checks them with collectives:
 *   - MPI_COMM_WORLD size is WORLD_SIZE; ordering by RANK is a bijection;
 *   - the TP group (pipeline, stage) has TP_SIZE members, TP ranks 0..t-1,
 *     and agrees on the layer range (all-reduce MIN/MAX);
 *   - in each pipeline the stages' layer ranges are contiguous from 0 to L
 *     (all-reduce of per-stage arrays), and each stage's TP rank 0 receives
 *     from the previous stage's TP rank 0 exactly its own first layer;
 *   - the pipelines' batches add up to the same global batch everywhere.
 * Prints "mpi-roles: ok W ranks" on rank 0; exit 0 ok, 1 on any failure.
 */
#include "config.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXS 256

static int env_int(const char *name, int *bad)
{
	const char *v = getenv(name);
	char *end = NULL;
	long l = v != NULL ? strtol(v, &end, 10) : -1;

	if (v == NULL || *end != '\0' || l < 0 || l > 1 << 24) {
		fprintf(stderr, "mpi-roles: %s missing or bad\n", name);
		*bad = 1;
		return 0;
	}
	return (int)l;
}

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "mpi-roles: rank %d: ", rank);         \
			fprintf(stderr, __VA_ARGS__);                          \
			fprintf(stderr, "\n");                                 \
			ok = 0;                                                \
		}                                                              \
	} while (0)

int main(int argc, char **argv)
{
	int bad = 0, ok = 1, all_ok = 0, size, r;
	int rank, world, pipe, stage, nst, tpr, tps, l0, l1, batch;
	int lo[2], hi[2], one = 1, cnt = 0, total = 0, gb = 0, prev_end = -1;
	int begin[MAXS] = {0}, end[MAXS] = {0}, tpsz[MAXS] = {0}, sum[MAXS];
	MPI_Comm ordered, tp, pp;

	MPI_Init(&argc, &argv);
	rank = env_int("RANK", &bad);
	world = env_int("WORLD_SIZE", &bad);
	pipe = env_int("HEXISCALE_PIPELINE", &bad);
	stage = env_int("HEXISCALE_STAGE", &bad);
	nst = env_int("HEXISCALE_NSTAGES", &bad);
	tpr = env_int("HEXISCALE_TP_RANK", &bad);
	tps = env_int("HEXISCALE_TP_SIZE", &bad);
	l0 = env_int("HEXISCALE_LAYER_BEGIN", &bad);
	l1 = env_int("HEXISCALE_LAYER_END", &bad);
	batch = env_int("HEXISCALE_PIPELINE_BATCH", &bad);
	if (bad || nst > MAXS)
		MPI_Abort(MPI_COMM_WORLD, 1);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	CHECK(size == world, "world size %d, WORLD_SIZE %d", size, world);
	MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &ordered);
	MPI_Comm_rank(ordered, &r);
	CHECK(r == rank, "position %d when ordered by RANK", r);

	/* TP group */
	MPI_Comm_split(ordered, pipe * 1024 + stage, tpr, &tp);
	MPI_Comm_size(tp, &size);
	MPI_Comm_rank(tp, &r);
	CHECK(size == tps && r == tpr, "TP group %d/%d, env %d/%d", r, size,
	      tpr, tps);
	MPI_Allreduce(&one, &cnt, 1, MPI_INT, MPI_SUM, tp);
	lo[0] = l0, lo[1] = l1;
	MPI_Allreduce(lo, hi, 2, MPI_INT, MPI_MAX, tp);
	MPI_Allreduce(MPI_IN_PLACE, lo, 2, MPI_INT, MPI_MIN, tp);
	CHECK(cnt == tps && lo[0] == hi[0] && lo[1] == hi[1] && lo[0] == l0,
	      "TP group disagrees on layers [%d,%d)", l0, l1);

	/* Pipeline: contiguous stages, neighbours agree. */
	MPI_Comm_split(ordered, pipe, stage * 1024 + tpr, &pp);
	if (tpr == 0) {
		begin[stage] = l0;
		end[stage] = l1;
		tpsz[stage] = tps;
	}
	MPI_Allreduce(begin, sum, nst, MPI_INT, MPI_SUM, pp);
	memcpy(begin, sum, sizeof(int) * nst);
	MPI_Allreduce(end, sum, nst, MPI_INT, MPI_SUM, pp);
	memcpy(end, sum, sizeof(int) * nst);
	MPI_Allreduce(tpsz, sum, nst, MPI_INT, MPI_SUM, pp);
	memcpy(tpsz, sum, sizeof(int) * nst);
	CHECK(begin[0] == 0, "pipeline %d starts at layer %d", pipe, begin[0]);
	for (int s = 0; s + 1 < nst; s++)
		CHECK(end[s] == begin[s + 1],
		      "pipeline %d: stage %d ends at %d, "
		      "stage %d begins at %d",
		      pipe, s, end[s], s + 1, begin[s + 1]);
	if (tpr == 0) {
		int base = 0, next = -1, prev = -1;

		for (int s = 0; s < nst; s++) {
			if (s == stage - 1)
				prev = base;
			if (s == stage + 1)
				next = base;
			base += tpsz[s];
		}
		if (next >= 0)
			MPI_Send(&l1, 1, MPI_INT, next, 7, pp);
		if (prev >= 0) {
			MPI_Recv(&prev_end, 1, MPI_INT, prev, 7, pp,
				 MPI_STATUS_IGNORE);
			CHECK(prev_end == l0,
			      "previous stage ends at %d, this "
			      "one begins at %d",
			      prev_end, l0);
		}
	}
	MPI_Allreduce(&end[nst - 1], &total, 1, MPI_INT, MPI_MAX, ordered);
	CHECK(end[nst - 1] == total, "pipeline %d ends at layer %d of %d", pipe,
	      end[nst - 1], total);

	/* Batches of the pipelines add up to one global batch. */
	one = (stage == 0 && tpr == 0) ? batch : 0;
	MPI_Allreduce(&one, &gb, 1, MPI_INT, MPI_SUM, ordered);
	CHECK(gb > 0, "global batch %d", gb);

	MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, ordered);
	if (rank == 0)
		printf("mpi-roles: %s %d ranks, %d layers, global batch %d\n",
		       all_ok ? "ok" : "FAILED", world, total, gb);
	MPI_Comm_free(&pp);
	MPI_Comm_free(&tp);
	MPI_Comm_free(&ordered);
	MPI_Finalize();
	return all_ok ? 0 : 1;
}
