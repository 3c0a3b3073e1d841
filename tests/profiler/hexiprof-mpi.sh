# shellcheck shell=sh
# hexiprof-mpi.sh: CPU mode under mpirun -np 2: MPI ping-pong gives the
# intra-node link, all-reduce and sendrecv bus bandwidths are validated and
# reported; only rank 0 prints and writes.
. "$top_srcdir/tests/tap.sh"
P="$top_builddir/profiler/hexiprof"
command -v python3 >/dev/null || skip "python3 is needed to read JSON"
grep -q '^#define HAVE_MPI 1' "$top_builddir/config.h" || skip "built without MPI"
grep -q '^#define HAVE_OPENBLAS 1' "$top_builddir/config.h" || skip "built without OpenBLAS"
MPIRUN=${MPIRUN:-$(command -v mpirun)}
[ -n "$MPIRUN" ] || skip "no mpirun"
d=$(mktemp -d) || hard "mktemp"
trap 'rm -rf "$d"' EXIT
export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export OMPI_MCA_plm_rsh_agent=false OPENBLAS_NUM_THREADS=1
# Open MPI's own allocations show up as leaks under LeakSanitizer.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

timeout 120 "$MPIRUN" -np 2 --oversubscribe --allow-run-as-root \
	-x OPENBLAS_NUM_THREADS "$P" --mode=cpu --quick -r 3 -w 1 --host=n1 \
	-o "$d/prof.json" --json >"$d/report.json" 2>"$d/err"
st=$?
[ $st -eq 0 ] || { cat "$d/err"; fail "mpirun -np 2 hexiprof: exit $st"; done_testing; }
pass "mpirun -np 2 hexiprof"
check "profile has the intra-node link and the CPU rate" \
	python3 "$top_srcdir/tests/profiler/check_profile.py" "$d/prof.json" \
	links.intra_bw_gbps links.intra_lat_s cpu.gemm_gflops
expect_eq "one node: no inter-node link" \
	"$(python3 -c 'import json,sys; print("inter_bw_gbps" in json.load(open(sys.argv[1]))["links"])' "$d/prof.json")" False
check "report: MPI measurements, only rank 0 printed" python3 - "$d/report.json" "$d/prof.json" <<'PY'
import json, sys
txt = open(sys.argv[1]).read()
r = json.loads(txt)   # a second rank printing would make this invalid JSON
p = json.load(open(sys.argv[2]))
names = {m["name"]: m for m in r["measurements"]}
for n in ("mpi.pingpong.intra", "mpi.allreduce.busbw", "mpi.sendrecv.busbw"):
    assert n in names, (n, sorted(names))
pp = [m for m in r["measurements"] if m["name"] == "mpi.pingpong.intra"]
assert [m["unit"] for m in pp] == ["s", "GB/s"], pp
assert abs(pp[0]["value"] - p["links"]["intra_lat_s"]) <= 1e-9 + 1e-6 * pp[0]["value"]
assert abs(pp[1]["value"] - p["links"]["intra_bw_gbps"]) <= 1e-5 * pp[1]["value"]
assert pp[1]["shape"] == "1048576B", pp[1]
for m in r["measurements"]:
    assert m["value"] > 0 and m["min_s"] <= m["median_s"] <= m["max_s"], m
PY

# A largest message below 1M times mostly latency: reported, but no link
# bandwidth in the profile (64 bytes made it 0.003 GB/s: plans days long)
timeout 120 "$MPIRUN" -np 2 --oversubscribe --allow-run-as-root \
	-x OPENBLAS_NUM_THREADS "$P" --mode=cpu --quick -r 1 -w 0 -s 64K \
	--membw-size=4K --host=n1 -o "$d/small.json" >/dev/null 2>"$d/small.err" ||
	fail "mpirun -np 2 hexiprof -s 64K: $(cat "$d/small.err")"
expect_eq "-s 64K: no intra_bw_gbps in the profile, the latency kept" \
	"$(python3 -c 'import json,sys; l = json.load(open(sys.argv[1]))["links"]; print("intra_bw_gbps" in l, "intra_lat_s" in l)' "$d/small.json")" "False True"
check "-s 64K: a warning says why" grep -q "below 1M, mostly latency" "$d/small.err"

# Ranks that wait while another measures must sleep: rank 1 (local rank 1)
# waits while rank 0 runs the CPU GEMMs, and Open MPI's MPI_Barrier polls,
# taking a core from rank 0 (half its GEMM rate on 2 cores).  Two runs that
# differ only in the GEMM repeats: the difference of rank 1's CPU time
# (user + system) over the difference of its wall time is the CPU share of
# the longer wait; MPI start-up and the links cost the same in both.
cat >"$d/rusage.py" <<'PY'
import os, resource, subprocess, sys, time
t0 = time.monotonic()
rc = subprocess.call(sys.argv[2:])
wall = time.monotonic() - t0
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
rank = next((os.environ[v] for v in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK",
                                     "PMI_RANK") if v in os.environ), "")
if rank == "1":
    with open(sys.argv[1], "w") as f:
        f.write("%.4f %.4f\n" % (ru.ru_utime + ru.ru_stime, wall))
sys.exit(rc)
PY
idle_run() { # REPEATS OUT: rank 1's "cpu_s wall_s" in OUT
	timeout 120 "$MPIRUN" -np 2 --oversubscribe --allow-run-as-root \
		-x OPENBLAS_NUM_THREADS python3 "$d/rusage.py" "$2" "$P" \
		--mode=cpu --only-gemm --gemm=1024x1024x1024 -r "$1" -w 0 \
		-s 64 --membw-size=4K --host=n1 >/dev/null 2>>"$d/err"
}
if idle_run 1 "$d/short" && idle_run 120 "$d/long"; then
	check "a waiting rank sleeps: its CPU < 25 % of the wait" \
		python3 - "$d/short" "$d/long" <<'PY'
import sys
(c1, w1), (c2, w2) = (map(float, open(a).read().split()) for a in sys.argv[1:])
wait = w2 - w1
print("# rank 1: short run %.2f s CPU / %.2f s, long run %.2f s CPU / %.2f s"
      % (c1, w1, c2, w2))
assert wait >= 0.5, "the longer GEMM phase added only %.2f s" % wait
share = (c2 - c1) / wait
print("# CPU over the %.2f s of added wait: %.0f %%" % (wait, 100 * share))
assert share < 0.25, "rank 1 used %.0f %% of a core while waiting" % (100 * share)
PY
else
	cat "$d/err"
	fail "mpirun -np 2 hexiprof (idle-rank runs)"
fi
done_testing
