/*
 * memacct.c - per-rank accounting of the trainer's allocations by kind
 * (hexi_rt.h "memory accounting"): current and peak bytes.  One thread
 * allocates (the trainer's), so plain counters suffice.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "rt_dist.h"
#include "rt_train.h"

static const char *const kind_names[HEXI_MEM_NKINDS] = {
    "params", "grads", "optim", "acts", "work", "comm"};

const char *hexi_mem_kind_name(int kind)
{
	return kind >= 0 && kind < HEXI_MEM_NKINDS ? kind_names[kind] : NULL;
}

void rt_mem_count(hexi_rt *rt, hexi_mem_kind kind, double bytes)
{
	hexi_mem_stats *m = &rt->mem;

	if ((int)kind < 0 || kind >= HEXI_MEM_NKINDS)
		return;
	m->bytes[kind] += bytes;
	m->total_bytes += bytes;
	if (m->bytes[kind] > m->peak_bytes[kind])
		m->peak_bytes[kind] = m->bytes[kind];
	if (m->total_bytes > m->peak_total_bytes)
		m->peak_total_bytes = m->total_bytes;
}

void hexi_trainer_memory(const hexi_trainer *t, hexi_mem_stats *out)
{
	*out = t->rt->mem;
	out->device = t->rt->backend->device == RT_DEVICE_CUDA;
}

/* One rank's stats as doubles, in a fixed order. */
#define MEM_NDOUBLES (2 * HEXI_MEM_NKINDS + 3)

static void mem_pack(const hexi_mem_stats *s, double *d)
{
	memcpy(d, s->bytes, sizeof(s->bytes));
	memcpy(d + HEXI_MEM_NKINDS, s->peak_bytes, sizeof(s->peak_bytes));
	d[2 * HEXI_MEM_NKINDS] = s->total_bytes;
	d[2 * HEXI_MEM_NKINDS + 1] = s->peak_total_bytes;
	d[2 * HEXI_MEM_NKINDS + 2] = s->device;
}

static void mem_unpack(const double *d, hexi_mem_stats *s)
{
	memcpy(s->bytes, d, sizeof(s->bytes));
	memcpy(s->peak_bytes, d + HEXI_MEM_NKINDS, sizeof(s->peak_bytes));
	s->total_bytes = d[2 * HEXI_MEM_NKINDS];
	s->peak_total_bytes = d[2 * HEXI_MEM_NKINDS + 1];
	s->device = (int)d[2 * HEXI_MEM_NKINDS + 2];
}

hexi_rc hexi_trainer_gather_memory(hexi_trainer *t, hexi_mem_stats *all)
{
	hexi_rt *rt = t->rt;
	const size_t n = (size_t)rt->world_size * MEM_NDOUBLES;
	double *buf = calloc(n, sizeof(double));
	hexi_mem_stats mine;
	hexi_rc rc;

	if (buf == NULL)
		return hexi_error(HEXI_ERR_NOMEM, "gather memory");
	hexi_trainer_memory(t, &mine);
	mem_pack(&mine, buf + (size_t)rt->rank * MEM_NDOUBLES);
	rc = rt->comm->ops->allreduce_sum(rt->groups.world, buf, n, RT_F64);
	if (rc == HEXI_OK && all != NULL && rt->rank == 0)
		for (int i = 0; i < rt->world_size; i++)
			mem_unpack(buf + (size_t)i * MEM_NDOUBLES, &all[i]);
	free(buf);
	return rc;
}
