#!/usr/bin/env python3
"""check-roles.py [--bind single] [--gpu-map P:S,...] PLAN.json OUTPUT: every HXROLE line of
OUTPUT (one per task, from examples/print-role.sh) must match the plan file:
rank, world, pipeline, stage, TP rank/size, layers, batch, micro-batches,
node and GPU; LOCAL_RANK is SLURM_LOCALID (torchrun's meanings);
CUDA_VISIBLE_DEVICES lists the node's GPUs of the step with the task's own
at position LOCAL_RANK (gpu_bind=local_rank), or only the task's own
(--bind single); roles cover every GPU (rank) of the plan once, the idle
GPUs' included.  RANK is SLURM_PROCID when no GPU is idle; with idle GPUs
(the plan's "idle" list, hexiscale-env(7)) the training tasks have ranks
0..W-1 and the idle tasks W.., each in SLURM_PROCID order, an idle task
has role=idle and no stage variables, every other role=train.  With
--gpu-map, the task of plan GPU P must say Slurm's GPU S (a step that got
other GPUs than the job's first).
Exit 0 ok, 1 mismatch (each printed)."""
import json
import re
import sys


def hostnames(expr):
    out = []
    for m in re.finditer(r'([^,\[]+)(?:\[([^\]]+)\])?', expr):
        pre, rng = m.group(1), m.group(2)
        if not rng:
            out.append(pre)
            continue
        for part in rng.split(','):
            a, _, b = part.partition('-')
            for i in range(int(a), int(b or a) + 1):
                out.append('%s%0*d' % (pre, len(a), i))
    return out


def main():
    single = len(sys.argv) > 3 and sys.argv[1] == '--bind' and sys.argv[2] == 'single'
    if single:
        del sys.argv[1:3]
    # --gpu-map P:S,...: the step got Slurm's GPU S where the plan says P
    gmap = {}
    if len(sys.argv) > 3 and sys.argv[1] == '--gpu-map':
        gmap = dict(tuple(int(x) for x in e.split(':')) for e in sys.argv[2].split(','))
        del sys.argv[1:3]
    plan = json.load(open(sys.argv[1]))
    roles = {}
    for pi, p in enumerate(plan['pipelines']):
        for si, s in enumerate(p['stages']):
            for ti, d in enumerate(s['devices']):
                roles[d['rank']] = dict(
                    pipe=pi, stage=si, nstages=len(p['stages']), tp_rank=ti,
                    tp_size=s['tp'], l0=s['layer_begin'], l1=s['layer_end'],
                    batch=p['batch'], mb=p['micro_batches'],
                    node=d['node'], gpu=gmap.get(d['gpu'], d['gpu']), role='train')
    none = 'none'
    for d in plan.get('idle', []):
        roles[d['rank']] = dict(
            pipe=none, stage=none, nstages=none, tp_rank=none, tp_size=none,
            l0=none, l1=none, batch=none, mb=none, node=d['node'],
            gpu=gmap.get(d['gpu'], d['gpu']), role='idle')
    errors, seen = [], {}
    lines = [l for l in open(sys.argv[2]) if l.startswith('HXROLE ')]
    # The rank each task must have: SLURM_PROCID when no GPU is idle, else
    # its place among the training (or, after W, the idle) tasks.
    idle_gpus = {(d['node'], gmap.get(d['gpu'], d['gpu'])) for d in plan.get('idle', [])}
    kind = {}
    for line in lines:
        kv = dict(f.split('=', 1) for f in line.split()[1:])
        node = hostnames(kv['nodelist'])[int(kv['nodeid'])]
        kind[int(kv['procid'])] = (node, int(kv['gpu'])) in idle_gpus \
            if kv['gpu'].isdigit() else False
    order, nxt = {}, [0, plan['world_size']]
    for t in sorted(kind):
        order[t] = nxt[kind[t]]
        nxt[kind[t]] += 1

    def want_rank(procid):
        return str(order.get(int(procid), procid))

    for line in lines:
        kv = dict(f.split('=', 1) for f in line.split()[1:])
        try:
            r = int(kv['rank'])
        except ValueError:
            errors.append('task %s: no rank' % kv['procid'])
            continue
        if r in seen:
            errors.append('rank %d given to tasks %s and %s' % (r, seen[r], kv['procid']))
        seen[r] = kv['procid']
        want = roles.get(r)
        if want is None:
            errors.append('rank %d not in the plan' % r)
            continue
        node = hostnames(kv['nodelist'])[int(kv['nodeid'])]
        got = dict(pipe=kv['pipe'], stage=kv['stage'], nstages=kv['nstages'],
                   tp_rank=kv['tp_rank'], tp_size=kv['tp_size'], l0=kv['l0'],
                   l1=kv['l1'], batch=kv['batch'], mb=kv['mb'], node=node,
                   gpu=kv['gpu'], role=kv.get('role', 'none'))
        for k, v in want.items():
            if str(v) != got[k]:
                errors.append('rank %d %s: task says %s, plan says %s' % (r, k, got[k], v))
        cvd = kv['cvd'].split(',')
        lr = int(kv['local_rank'])
        mine = cvd[0] if single else (cvd[lr] if 0 <= lr < len(cvd) else 'none')
        checks = [(kv['hrank'], str(r)), (kv['world'], str(plan['world_size'])),
                  (kv['hash'], plan['hash']), (kv['plan'], sys.argv[1]),
                  (kv['rank'], want_rank(kv['procid'])),
                  (kv['local_rank'], kv['localid']),
                  (mine, kv['gpu']),
                  (str(len(cvd)), '1' if single else kv['local_size']),
                  (kv['order'], 'PCI_BUS_ID'), (kv['handoff'], '')]
        for got_v, want_v in checks:
            if got_v != want_v and not (want_v == sys.argv[1] and got_v.endswith(want_v.split('/')[-1])):
                errors.append('rank %d: %r != %r' % (r, got_v, want_v))
    missing = sorted(set(roles) - set(seen))
    if missing:
        errors.append('ranks without a task: %s' % missing)
    ntasks = plan['world_size'] + len(plan.get('idle', []))
    if len(lines) != ntasks:
        errors.append('%d tasks for %d ranks and %d idle GPUs' % (
            len(lines), plan['world_size'], len(plan.get('idle', []))))
    for e in errors:
        print('# ' + e)
    print('# %d tasks checked against %s' % (len(lines), sys.argv[1]))
    return 1 if errors else 0


sys.exit(main())
