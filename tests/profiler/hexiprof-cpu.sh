# shellcheck shell=sh
# hexiprof-cpu.sh: CPU mode on one process: the profile file is exactly the
# hexiscale-profile format with a measured CPU GEMM rate, the --json report
# has validated measurements, %h in -o becomes the host name.
. "$top_srcdir/tests/tap.sh"
P="$top_builddir/profiler/hexiprof"
command -v python3 >/dev/null || skip "python3 is needed to read JSON"
grep -q '^#define HAVE_OPENBLAS 1' "$top_builddir/config.h" || skip "built without OpenBLAS"
d=$(mktemp -d) || hard "mktemp"
trap 'rm -rf "$d"' EXIT
export OPENBLAS_NUM_THREADS=1

timeout 120 "$P" --mode=cpu --quick -r 3 -w 1 --host=n1 \
	-o "$d/prof-%h.json" --json --gemm=100x60x80 >"$d/report.json"
expect_eq "CPU mode runs" "$?" 0
check "profile file named by host" test -f "$d/prof-n1.json"
check "profile is strict hexiscale-profile with cpu fields" \
	python3 "$top_srcdir/tests/profiler/check_profile.py" "$d/prof-n1.json" cpu.gemm_gflops cpu.mem_bw_gbps cpu.threads host
expect_eq "host in profile" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["host"])' "$d/prof-n1.json")" n1
expect_eq "single process: no links" "$(python3 -c 'import json,sys; print("links" in json.load(open(sys.argv[1])))' "$d/prof-n1.json")" False
expect_eq "threads from OPENBLAS_NUM_THREADS" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cpu"]["threads"])' "$d/prof-n1.json")" 1
check "report: 3 validated sgemm measurements, best == profile" python3 - "$d/report.json" "$d/prof-n1.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); p = json.load(open(sys.argv[2]))
m = [x for x in r["measurements"] if x["name"] == "cpu.sgemm"]
assert r["format"] == "hexiscale-profile-report" and r["mode"] == "cpu", r
assert len(m) == 3, m
assert [x["shape"] for x in m][-1] == "100x60x80", m
for x in m:
    assert x["repeats"] == 3 and 0 <= x["check_err"] < 1e-4, x
    assert x["min_s"] <= x["median_s"] <= x["max_s"], x
    assert x["value"] > 0 and x["value"] <= x["best"] * (1 + 1e-9), x
best = max(x["value"] for x in m)
assert abs(best - p["cpu"]["gemm_gflops"]) <= 1e-5 * best, (best, p)
assert r["profile"] == p, "report embeds the written profile"
PY
n=$("$P" --cpu --only-gemm --gemm=64x32x16 -r 2 -w 0 --json | python3 -c 'import json,sys; m=[x for x in json.load(sys.stdin)["measurements"] if x["name"] == "cpu.sgemm"]; print(len(m), m[0]["shape"])')
expect_eq "--cpu --only-gemm: just the given shape" "$n" "1 64x32x16"
n=$("$P" --cpu --only-gemm --gemm=64x32x16:tn --gemm=48x40x24:nt -r 2 -w 0 --json | python3 -c 'import json,sys; m=[x for x in json.load(sys.stdin)["measurements"] if x["name"] == "cpu.sgemm"]; print(" ".join(x["shape"] for x in m), all(x["check_err"] < 1e-4 for x in m))')
expect_eq "--gemm MxNxK:XY: transposed operands, validated" "$n" "64x32x16:tn 48x40x24:nt True"
check "memory bandwidth measured and in the profile" python3 - "$d/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
m = [x for x in r["measurements"] if x["name"] == "cpu.membw"]
assert len(m) == 1 and m[0]["unit"] == "GB/s" and m[0]["value"] > 0, m
assert m[0]["check_err"] < 1e-4, m
assert abs(m[0]["value"] - r["profile"]["cpu"]["mem_bw_gbps"]) <= 1e-4 * m[0]["value"], r
PY
check "--rate=mean is all FLOPs over all median time" python3 - "$P" <<'PY'
import json, subprocess, sys
r = json.loads(subprocess.run([sys.argv[1], "--cpu", "--only-gemm", "--gemm=64x32x16",
    "--gemm=96x80x64", "-r", "3", "-w", "0", "--rate=mean", "--json"],
    check=True, capture_output=True, text=True).stdout)
m = [x for x in r["measurements"] if x["name"] == "cpu.sgemm"]
flop = sum(2 * x * y * z for x, y, z in ((64, 32, 16), (96, 80, 64)))
want = flop / sum(x["median_s"] for x in m) / 1e9
got = r["profile"]["cpu"]["gemm_gflops"]
assert abs(got - want) <= 1e-4 * want, (got, want)
assert got <= max(x["value"] for x in m) * (1 + 1e-6), (got, m)
PY
out=$("$P" --mode=cpu --quick -r 2 -w 0 --no-mpi 2>&1) || fail "table mode"
case $out in *"cpu.sgemm"*"GFLOP/s"*) pass "table lists cpu.sgemm in GFLOP/s" ;; *) fail "table: $out" ;; esac
"$P" --mode=cpu --quick -r 1 -o /nonexistent-dir/x.json >/dev/null 2>"$d/err"
st=$?
case $st in 7|8) pass "unwritable output: exit $st" ;; *) fail "unwritable output: exit $st" ;; esac
grep -q "/nonexistent-dir/x.json" "$d/err" && pass "error names the file" || fail "error: $(cat "$d/err")"
done_testing
