"""hexiscale_torch - a HexiScale plan as torch.distributed process groups.

A task started by the HexiScale SPANK plugin finds its role in the
HEXISCALE_* variables and the conventional RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT (hexiscale-env(7)); the plan file named by HEXISCALE_PLAN
(hexiscale-plan(5)) holds the rest: every pipeline's stages and devices and
the chunked gradient-sync groups of doc/LAYOUT.md.  This module turns them
into torch.distributed groups:

    import hexiscale_torch as hx
    plan, role, groups = hx.init()          # dist.init_process_group + groups
    groups.tp                               # this stage's TP group (or None)
    groups.prev_leader, groups.next_ranks   # pipeline neighbours
    hx.sync_gradients(groups, params)       # chunked DP all-reduce

It needs only torch (1.13 or later) and the standard library.  Every rank
creates every group, in the same order, as torch.distributed requires.

A task whose GPU the plan leaves idle (HEXISCALE_ROLE=idle: its rank is W
or above, the plan's "idle" list) is in no process group: init() returns
its role with role.idle set and groups None, without calling
init_process_group (the training world is the W training ranks, RANK <
WORLD_SIZE, as torchrun would start them); it should exit 0.
"""

import json
import os
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

PLAN_FORMAT = "hexiscale-plan"
PLAN_VERSION = 1


class PlanError(Exception):
    """A plan file or a HEXISCALE_* variable is missing or inconsistent."""


@dataclass
class Role:
    """The task's place in the plan (hexiscale-env(7) names in comments)."""

    rank: int  # HEXISCALE_RANK (= RANK)
    world_size: int  # HEXISCALE_WORLD_SIZE
    pipeline: int  # HEXISCALE_PIPELINE
    npipelines: int  # HEXISCALE_NPIPELINES
    stage: int  # HEXISCALE_STAGE
    nstages: int  # HEXISCALE_NSTAGES
    tp_rank: int  # HEXISCALE_TP_RANK
    tp_size: int  # HEXISCALE_TP_SIZE
    layer_begin: int  # HEXISCALE_LAYER_BEGIN
    layer_end: int  # HEXISCALE_LAYER_END
    batch: int  # HEXISCALE_PIPELINE_BATCH
    micro_batches: int  # HEXISCALE_MICRO_BATCHES
    sample_offset: int = 0  # first sample of this pipeline in a global batch
    global_batch: int = 0  # sum of the pipelines' batches
    idle: bool = False  # HEXISCALE_ROLE=idle: trains nothing

    @property
    def micro_batch_size(self):
        return self.batch // self.micro_batches

    @property
    def first(self):
        return self.stage == 0

    @property
    def last(self):
        return self.stage == self.nstages - 1


@dataclass
class Groups:
    """Process groups and neighbours of one rank."""

    tp: object = None  # ProcessGroup of this stage (None if tp_size 1)
    tp_ranks: list = field(default_factory=list)
    prev_ranks: list = field(default_factory=list)  # previous stage
    next_ranks: list = field(default_factory=list)  # next stage
    # (tensor name, row_begin, row_end, ProcessGroup or None, ranks) of every
    # sync chunk this rank holds, in plan order
    sync: list = field(default_factory=list)

    @property
    def prev_leader(self):
        return self.prev_ranks[0] if self.prev_ranks else None

    @property
    def next_leader(self):
        return self.next_ranks[0] if self.next_ranks else None


def load_plan(path, expect_hash=None):
    """Read and check a plan file; expect_hash is HEXISCALE_PLAN_HASH."""
    try:
        with open(path, encoding="utf-8") as f:
            plan = json.load(f)
    except (OSError, ValueError) as e:
        raise PlanError(f"plan {path}: {e}") from None
    if not isinstance(plan, dict) or plan.get("format") != PLAN_FORMAT:
        raise PlanError(f"plan {path}: not a {PLAN_FORMAT} file")
    if plan.get("version") != PLAN_VERSION:
        raise PlanError(f"plan {path}: version {plan.get('version')!r}, "
                        f"this module reads {PLAN_VERSION}")
    if expect_hash and plan.get("hash") != expect_hash:
        raise PlanError(f"plan {path}: hash {plan.get('hash')} is not "
                        f"HEXISCALE_PLAN_HASH {expect_hash}")
    ranks = sorted(d["rank"] for p in plan["pipelines"]
                   for s in p["stages"] for d in s["devices"])
    if ranks != list(range(plan["world_size"])):
        raise PlanError(f"plan {path}: ranks are not 0..world_size-1")
    idle = sorted(d["rank"] for d in plan.get("idle", []))
    if idle != list(range(plan["world_size"], plan["world_size"] + len(idle))):
        raise PlanError(f"plan {path}: idle ranks are not world_size..")
    return plan


def stage_ranks(stage):
    """Ranks of a stage in TP order (TP rank i = devices[i])."""
    return [d["rank"] for d in stage["devices"]]


def role_from_plan(plan, rank):
    """The role of plan rank `rank`, as the plugin would export it."""
    pipes = plan["pipelines"]
    offset = 0
    gbatch = sum(p["batch"] for p in pipes)
    if any(d["rank"] == rank for d in plan.get("idle", [])):
        return Role(rank=rank, world_size=plan["world_size"], pipeline=-1,
                    npipelines=len(pipes), stage=-1, nstages=0, tp_rank=-1,
                    tp_size=0, layer_begin=0, layer_end=0, batch=0,
                    micro_batches=0, global_batch=gbatch, idle=True)
    for pi, p in enumerate(pipes):
        for si, s in enumerate(p["stages"]):
            ranks = stage_ranks(s)
            if rank in ranks:
                return Role(rank=rank, world_size=plan["world_size"],
                            pipeline=pi, npipelines=len(pipes), stage=si,
                            nstages=len(p["stages"]),
                            tp_rank=ranks.index(rank), tp_size=len(ranks),
                            layer_begin=s["layer_begin"],
                            layer_end=s["layer_end"], batch=p["batch"],
                            micro_batches=p["micro_batches"],
                            sample_offset=offset, global_batch=gbatch)
        offset += p["batch"]
    raise PlanError(f"rank {rank} is not in the plan")


def _env_int(env, name):
    try:
        return int(env[name])
    except KeyError:
        raise PlanError(f"{name} is not set: not a HexiScale step "
                        "(srun --hexiscale=...)?") from None
    except ValueError:
        raise PlanError(f"{name}={env[name]!r}: not an integer") from None


def role_from_env(plan, env=None):
    """The role the plugin exported, checked against the plan file."""
    env = os.environ if env is None else env
    rank = _env_int(env, "HEXISCALE_RANK")
    role = role_from_plan(plan, rank)
    kind = env.get("HEXISCALE_ROLE")
    if kind and kind != ("idle" if role.idle else "train"):
        raise PlanError(f"HEXISCALE_ROLE={kind} but the plan gives rank "
                        f"{rank} the {'idle' if role.idle else 'train'} role")
    if role.idle:
        return role
    for name, value in (("HEXISCALE_WORLD_SIZE", role.world_size),
                        ("HEXISCALE_PIPELINE", role.pipeline),
                        ("HEXISCALE_STAGE", role.stage),
                        ("HEXISCALE_TP_RANK", role.tp_rank),
                        ("HEXISCALE_TP_SIZE", role.tp_size),
                        ("HEXISCALE_LAYER_BEGIN", role.layer_begin),
                        ("HEXISCALE_LAYER_END", role.layer_end)):
        if name in env and _env_int(env, name) != value:
            raise PlanError(f"{name}={env[name]} but the plan says {value}")
    return role


def _new_group(ranks):
    """A group for `ranks` (every rank must call this), None for one rank."""
    if len(ranks) < 2:
        return None
    return dist.new_group(ranks=sorted(ranks), backend=dist.get_backend())


def build_groups(plan, role):
    """Create every group of the plan on every rank; return this rank's."""
    g = Groups()
    cache = {}

    def group_of(ranks):
        key = tuple(sorted(ranks))
        if key not in cache:
            cache[key] = _new_group(list(key))
        return cache[key]

    for p in plan["pipelines"]:
        for s in p["stages"]:
            group_of(stage_ranks(s))
    for c in plan["sync"]:
        group_of(c["ranks"])
    stages = plan["pipelines"][role.pipeline]["stages"]
    g.tp_ranks = stage_ranks(stages[role.stage])
    g.tp = cache[tuple(sorted(g.tp_ranks))]
    if role.stage > 0:
        g.prev_ranks = stage_ranks(stages[role.stage - 1])
    if role.stage + 1 < len(stages):
        g.next_ranks = stage_ranks(stages[role.stage + 1])
    for c in plan["sync"]:
        if role.rank in c["ranks"]:
            g.sync.append((c["tensor"], c["rows"][0], c["rows"][1],
                           cache[tuple(sorted(c["ranks"]))], c["ranks"]))
    return g


def init(backend="gloo", plan_path=None, env=None):
    """init_process_group from RANK/WORLD_SIZE/MASTER_*, then the groups.

    Returns (plan, role, groups).  The plan is HEXISCALE_PLAN (or
    plan_path) and must carry HEXISCALE_PLAN_HASH when that is set.  An
    idle task (role.idle) gets groups None and joins no process group.
    """
    env = os.environ if env is None else env
    path = plan_path or env.get("HEXISCALE_PLAN")
    if not path:
        raise PlanError("HEXISCALE_PLAN is not set and no plan was given")
    plan = load_plan(path, env.get("HEXISCALE_PLAN_HASH"))
    role = role_from_env(plan, env)
    if "RANK" in env and _env_int(env, "RANK") != role.rank:
        raise PlanError(f"RANK={env['RANK']} is not HEXISCALE_RANK "
                        f"{role.rank}")
    if role.idle:
        return plan, role, None
    if not dist.is_initialized():
        dist.init_process_group(backend, init_method="env://",
                                rank=role.rank, world_size=role.world_size)
    return plan, role, build_groups(plan, role)


class _TPReduce(torch.autograd.Function):
    """Megatron's g: all-reduce (sum) forward, identity backward."""

    @staticmethod
    def forward(ctx, x, group):
        x = x.clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, dy):
        return dy, None


class _TPCopy(torch.autograd.Function):
    """Megatron's f: identity forward, all-reduce (sum) backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, dy):
        dy = dy.clone()
        dist.all_reduce(dy, group=ctx.group)
        return dy, None


def tp_reduce(x, group):
    """Sum partial outputs of a row-parallel layer over the TP group."""
    return x if group is None else _TPReduce.apply(x, group)


def tp_copy(x, group):
    """Input of a column-parallel layer: its gradient is summed over TP."""
    return x if group is None else _TPCopy.apply(x, group)


def sync_gradients(groups, params, replicated, tp_size):
    """Chunked data-parallel gradient sync of doc/LAYOUT.md, in place.

    params maps a tensor name to (parameter, row_begin) of the rows this
    rank holds; replicated(name) tells whether every TP rank of the stage
    holds the whole tensor: those chunks are all-reduced among all holders
    with each contribution scaled by 1/tp_size, so that every pipeline
    counts once.
    """
    for name, r0, r1, group, _ in groups.sync:
        p, begin = params[name]
        g = p.grad[r0 - begin:r1 - begin]
        if replicated(name) and tp_size > 1:
            g.mul_(1.0 / tp_size)
        if group is not None:
            dist.all_reduce(g, group=group)
