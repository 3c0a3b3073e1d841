#!/usr/bin/env python3
"""fidelity_mem.py PLAN SIM TRAIN: the memory side of fidelity.sh.

The plan's prediction per stage (`hexiplan simulate --json` mem_gib, less
the plan's reserve_gib, which is headroom and not allocated) against the
peak of what hexitrain allocated on the stage's ranks (--json "memory":
the rank with the largest TP share, as the plan's per-stage figure
states).  Prints one line per stage, the measured bytes by kind of the
worst stage (params, grads, optim: the bytes per parameter the model
prices at train.bytes_per_param), and last a line of key=value pairs
for fidelity.sh's FIDELITY line.  Exit 1 when an input lacks what it
needs (no "memory" in the run: an older hexitrain)."""
import json
import sys


def main(argv):
    if len(argv) != 4:
        sys.exit("usage: fidelity_mem.py PLAN SIM TRAIN")
    plan = json.load(open(argv[1]))
    sim = json.load(open(argv[2]))
    steps = [json.loads(l) for l in open(argv[3]) if l.startswith("{")]
    if not steps or "memory" not in steps[-1]:
        sys.exit("fidelity_mem: the run reported no memory")
    reserve = float(plan.get("train", {}).get("reserve_gib", 0.0))
    stage_of = {}
    for pi, p in enumerate(plan["pipelines"]):
        for si, s in enumerate(p["stages"]):
            for d in s["devices"]:
                stage_of[d["rank"]] = (pi, si)
    pred = {(s["pipeline"], s["stage"]): (s["mem_gib"] - reserve) * 2**30
            for s in sim["stages"]}
    peak = {}
    for m in steps[-1]["memory"]:
        k = stage_of[m["rank"]]
        if k not in peak or m["peak_bytes"] > peak[k]["peak_bytes"]:
            peak[k] = m
    worst = None
    for k in sorted(peak):
        p, meas = pred[k], peak[k]["peak_bytes"]
        dev = (p - meas) / meas * 100.0
        print(f"memory, pipeline {k[0]} stage {k[1]}: predicted "
              f"{p / 2**30:.3f} GiB, measured {meas / 2**30:.3f} GiB "
              f"(rank {peak[k]['rank']}), {dev:+.1f} %")
        if worst is None or abs(dev) > abs(worst[0]):
            worst = (dev, k, p, meas)
    dev, k, p, meas = worst
    m = peak[k]
    kinds = ["params", "grads", "optim", "acts", "work", "comm"]
    # AdamW's two fp32 moments are 8 B per parameter of the shard on both
    # trainers, unsharded under zero 0 or on one rank; a sharded
    # optimizer leaves no per-rank count to divide by
    zero = int(plan.get("train", {}).get("zero", 0))
    whole = zero == 0 or int(sim.get("world_size", 0)) == 1
    n = m.get("optim", 0) / 8.0 if whole else 0.0
    state = sum(m.get(x, 0) for x in ("params", "grads", "optim"))
    bpp = state / n if n > 0 else 0.0
    print("  measured by kind (GiB): " +
          ", ".join(f"{x} {m.get(x, 0) / 2**30:.3f}" for x in kinds) +
          (f"; params + grads + optim {bpp:.2f} B per parameter"
           if bpp > 0 else "") +
          f" (the plan prices them at "
          f"{plan.get('train', {}).get('bytes_per_param', 16):g})")
    print(f"mem_predicted_gib={p / 2**30:.4g} mem_measured_gib="
          f"{meas / 2**30:.4g} mem_deviation_pct={dev:.2f} "
          f"state_bytes_per_param={bpp:.2f}")


if __name__ == "__main__":
    main(sys.argv)
