/*
 * ckpt_plan.h - hexickpt's internal use of plans (ckpt_plan.c): not
 * installed, not part of libhexickpt.
 */
#ifndef HEXI_CKPT_PLAN_H
#define HEXI_CKPT_PLAN_H

#include <jansson.h>

#include "hexi_ckpt.h"
#include "hexi_sched.h"

/* Reshard R into the layout of the plan in PLAN_PATH, written (committed)
 * to the checkpoint directory OUT; BAR_FN may be NULL. */
hexi_rc ckpt_reshard_with_plan(hexi_ckpt_reader *r, const char *plan_path,
			       const char *out, hexi_ckpt_progress_fn bar_fn);
/* Summary of the stored plan (pipelines, stages, batch) as a new JSON
 * object (caller owns it), or NULL. */
json_t *ckpt_plan_summary_json(const hexi_ckpt_reader *r);
/* The same as text lines on stdout. */
void ckpt_plan_summary_text(const hexi_ckpt_reader *r);

#endif /* HEXI_CKPT_PLAN_H */
