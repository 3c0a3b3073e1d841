#!/usr/bin/env python3
"""cycles.py BUILDDIR ALLOWFILE - file-level call circles, from the objects.

Each library and program object of the build (common, scheduler, spank,
runtime, runtime/cuda, checkpoint, profiler) is a node named after its
source file.  File A depends on file B when A references a symbol that B
defines (nm: undefined in A, defined in B): that is every call and every
use of a global across files, as the linker sees it, with no guessing from
the source text.  Modules are the directories; a module depends on another
when one of its files does.

It reports
  - circles of files inside a module (a strongly connected component of two
    or more files),
  - circles of modules,
  - sources compiled into more than one object of a module (the same file
    built twice under different names),
and fails (exit 1) on any of them that ALLOWFILE does not list.  ALLOWFILE
has one entry per line, '#' comments:
  circle MODULE FILE FILE ...      (the files of one component, any order)
  modules MODULE MODULE ...
  twice MODULE FILE
An entry that no longer matches anything is reported as stale, so the list
shrinks as circles are taken apart.  Exit 77 when there are no objects.
"""
import os
import re
import subprocess
import sys

MODULES = ["common", "scheduler", "spank", "runtime", "runtime/cuda",
           "checkpoint", "profiler"]
# libtool's per-target object prefix: libhexirt_dist_la-train.o -> train
PREFIX = re.compile(r"^[A-Za-z0-9_]+_la-")
# tests/gpuemu compiles runtime sources again for its emulated device; with
# subdir-objects those objects land in the runtime build directories but
# belong to test programs, not to the modules
TEST_OBJ = re.compile(r"^(libgpuemu_la|libhexirt_emu_la|hexitrain_emu)-")


def built_objects(d):
    """Base names of the objects the directory's Makefile builds (every
    *_OBJECTS variable), so objects left over from an older Makefile are not
    counted; None when make cannot say."""
    rule = ("hexi-print-objects:\n\t@echo $(foreach v,$(filter %_OBJECTS,"
            "$(.VARIABLES)),$($(v)))\n")
    try:
        r = subprocess.run(["make", "-s", "--no-print-directory", "-C", d,
                            "-f", "Makefile", "-f", "-", "hexi-print-objects"],
                           input=rule, capture_output=True, text=True,
                           timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    names = set()
    for w in r.stdout.split():
        base = os.path.basename(w)
        for ext in (".lo", ".o"):
            if base.endswith(ext):
                names.add(base[:-len(ext)])
    return names


def objects(build):
    """(module, source name, object path) for every object of the modules."""
    out = []
    for mod in MODULES:
        d = os.path.join(build, mod)
        if not os.path.isdir(d):
            continue
        live = built_objects(d) if os.path.exists(
            os.path.join(d, "Makefile")) else None
        for sub in (d, os.path.join(d, ".libs")):
            if not os.path.isdir(sub):
                continue
            for f in sorted(os.listdir(sub)):
                if not f.endswith(".o") or TEST_OBJ.match(f):
                    continue
                if live is not None and f[:-2] not in live:
                    continue  # left over from an older Makefile
                # the non-PIC twin of a libtool object sits beside .libs
                if sub == d and os.path.exists(os.path.join(d, ".libs", f)):
                    continue
                out.append((mod, f[:-2], os.path.join(sub, f)))
    return out


def nm(path, undefined):
    args = ["nm", "-P", "-u" if undefined else "--defined-only", path]
    r = subprocess.run(args, capture_output=True, text=True, check=True)
    syms = set()
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if undefined or kind in "TDBRVWGS":  # global definitions only
            syms.add(name)
    return syms


def tarjan(nodes, edges):
    """Strongly connected components (lists of nodes)."""
    index, low, stack, on, comps = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return comps


def load_allow(path):
    allow = set()
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].split()
            if not line:
                continue
            kind = line[0]
            if kind == "circle" and len(line) >= 4:
                allow.add(("circle", line[1], tuple(sorted(line[2:]))))
            elif kind == "modules" and len(line) >= 3:
                allow.add(("modules", "", tuple(sorted(line[1:]))))
            elif kind == "twice" and len(line) == 3:
                allow.add(("twice", line[1], (line[2],)))
            else:
                sys.exit("cycles.py: %s: bad line: %s" % (path, " ".join(line)))
    return allow


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: cycles.py BUILDDIR ALLOWFILE")
    build, allowfile = sys.argv[1], sys.argv[2]
    objs = objects(build)
    if not objs:
        print("SKIP: no objects under %s (build first)" % build)
        return 77
    allow = load_allow(allowfile)
    found = set()

    # the same source built twice inside a module
    seen = {}
    for mod, obj, _ in objs:
        src = PREFIX.sub("", obj)
        seen.setdefault((mod, src), set()).add(obj)
    for (mod, src), objnames in seen.items():
        if len(objnames) > 1:
            found.add(("twice", mod, (src,)))

    # symbol -> defining file; file -> referenced symbols
    defs, uses = {}, {}
    for mod, obj, path in objs:
        node = (mod, PREFIX.sub("", obj))
        for s in nm(path, False):
            defs.setdefault(s, set()).add(node)
        uses.setdefault(node, set()).update(nm(path, True))
    fedges, medges = {}, {}
    for node, syms in uses.items():
        for s in syms:
            for d in defs.get(s, ()):
                if d == node:
                    continue
                if d[0] == node[0]:
                    fedges.setdefault(node, set()).add(d)
                else:
                    medges.setdefault(node[0], set()).add(d[0])
    for comp in tarjan(list(uses), fedges):
        if len(comp) > 1:
            mod = comp[0][0]
            found.add(("circle", mod, tuple(sorted(f for _, f in comp))))
    for comp in tarjan(sorted({m for m, _ in uses}), medges):
        if len(comp) > 1:
            found.add(("modules", "", tuple(comp)))

    bad = 0
    for kind, mod, names in sorted(found):
        what = "%s %s %s" % (kind, mod, " ".join(names)) if mod else \
            "%s %s" % (kind, " ".join(names))
        if (kind, mod, names) in allow:
            print("known (listed in %s): %s" % (os.path.basename(allowfile),
                                                what))
        else:
            print("NEW: %s" % what)
            bad += 1
    for kind, mod, names in sorted(allow - found):
        print("stale entry, no longer found (remove it): %s %s %s" %
              (kind, mod, " ".join(names)))
    print("%d objects, %d file edges, %d module edges; %d new finding(s)" %
          (len(objs), sum(len(v) for v in fedges.values()),
           sum(len(v) for v in medges.values()), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
