#!/usr/bin/env python3
"""check_profile.py FILE [REQUIRE...]: strict check of a hexiscale-profile
file (exact key sets, types, ranges).  REQUIRE names dotted fields that must
be present, e.g. cpu.gemm_gflops links.intra_bw_gbps.  Exit 0 ok, 1 bad."""
import json
import math
import sys

TOP = {"format", "version", "host", "gpus", "cpu", "links"}
GPU = {"type", "index", "name", "gemm_tflops", "mem_bw_gbps", "h2d_gbps", "d2h_gbps"}
GEMM = {"bf16", "fp16", "fp32"}
CPU = {"gemm_gflops", "mem_bw_gbps", "threads"}
LINKS = {"intra_bw_gbps", "intra_lat_s", "inter_bw_gbps", "inter_lat_s"}


def num(v, what):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise ValueError(f"{what}: {v!r} is not a positive number")


def keys(obj, allowed, what):
    if not isinstance(obj, dict):
        raise ValueError(f"{what}: not an object")
    extra = set(obj) - allowed
    if extra:
        raise ValueError(f"{what}: unknown keys {sorted(extra)}")


def check(p):
    keys(p, TOP, "profile")
    if p.get("format") != "hexiscale-profile" or p.get("version") != 1:
        raise ValueError("format/version")
    if not isinstance(p.get("host", "x"), str) or not p.get("host", "x"):
        raise ValueError("host")
    for i, g in enumerate(p.get("gpus", [])):
        keys(g, GPU, f"gpus[{i}]")
        for k in ("mem_bw_gbps", "h2d_gbps", "d2h_gbps"):
            if k in g:
                num(g[k], f"gpus[{i}].{k}")
        keys(g.get("gemm_tflops", {}), GEMM, f"gpus[{i}].gemm_tflops")
        for k, v in g.get("gemm_tflops", {}).items():
            num(v, f"gpus[{i}].gemm_tflops.{k}")
    if "cpu" in p:
        keys(p["cpu"], CPU, "cpu")
        for k, v in p["cpu"].items():
            num(v, f"cpu.{k}")
        if "threads" in p["cpu"] and not isinstance(p["cpu"]["threads"], int):
            raise ValueError("cpu.threads not an integer")
    if "links" in p:
        keys(p["links"], LINKS, "links")
        for k, v in p["links"].items():
            num(v, f"links.{k}")


def main():
    with open(sys.argv[1]) as f:
        p = json.load(f)
    try:
        check(p)
        for req in sys.argv[2:]:
            o = p
            for part in req.split("."):
                if not isinstance(o, dict) or part not in o:
                    raise ValueError(f"missing {req}")
                o = o[part]
    except ValueError as e:
        print(f"{sys.argv[1]}: {e}")
        return 1
    return 0


sys.exit(main())
