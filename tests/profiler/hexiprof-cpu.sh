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
membw_shape() { # hexiprof options: the shape of the cpu.membw measurement
	"$P" --cpu --only-gemm --gemm=8x8x8 -r 1 -w 0 --no-mpi --json "$@" |
		python3 -c 'import json,sys; print([x["shape"] for x in json.load(sys.stdin)["measurements"] if x["name"] == "cpu.membw"][0])'
}
expect_eq "-q: 4M memory working set" "$(membw_shape -q)" 4194300B
expect_eq "-q keeps an explicit --membw-size=64M" "$(membw_shape -q --membw-size=64M)" 67108860B
expect_eq "--membw-size=64M -q, either order" "$(membw_shape --membw-size=64M -q)" 67108860B

# -o -: the profile is the whole of standard output (one JSON document);
# the report, table or --json, goes to standard error.
for how in "-o -" "-o /dev/stdout" "--output=-"; do
	for rep in "--json" ""; do
		# shellcheck disable=SC2086
		"$P" --cpu --only-gemm --gemm=16x16x16 -r 1 -w 0 --no-mpi \
			--host=n1 $how $rep >"$d/o.out" 2>"$d/o.err"
		check "$how $rep: stdout is the profile, stderr the report" \
			python3 - "$d/o.out" "$d/o.err" "$rep" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))   # one document: the profile
assert p["format"] == "hexiscale-profile" and p["host"] == "n1", p
err = open(sys.argv[2]).read()
if sys.argv[3] == "--json":
    r = json.loads(err)
    assert r["format"] == "hexiscale-profile-report" and r["profile"] == p, r
else:
    assert "cpu.sgemm" in err and "GFLOP/s" in err, err
PY
	done
done

# -o is checked before measuring: a run of minutes (1000 GEMMs of 137
# GFLOP) into a file that cannot be written fails at once, not at the end.
timeout 20 "$P" --cpu --only-gemm --gemm=4096x4096x4096 -r 1000 -w 0 \
	-o /nonexistent-dir/x.json >/dev/null 2>"$d/err"
st=$?
case $st in 7|8) pass "unwritable output: exit $st before measuring" ;;
*) fail "unwritable output: exit $st (124: it measured first)" ;; esac
grep -q "/nonexistent-dir/x.json: the profile cannot be written there (checked before measuring): No such file or directory" "$d/err" &&
	! grep -q '\.tmp\.' "$d/err" && pass "error names the file (not its temporary name) and the cause" ||
	fail "error: $(cat "$d/err")"
mkdir "$d/out.json" || hard "mkdir"
timeout 20 "$P" --cpu --only-gemm --gemm=4096x4096x4096 -r 1000 -w 0 \
	-o "$d/out.json" >/dev/null 2>"$d/err"
st=$?
expect_eq "a directory as output: refused before measuring" "$st" 8
grep -q "$d/out.json: is a directory" "$d/err" && pass "error names the directory" || fail "error: $(cat "$d/err")"
# The check leaves nothing behind, whether the run then succeeds or fails.
expect_eq "no temporary file left by a run that wrote" "$(cd "$d" && ls -d -- *.tmp.* 2>/dev/null)" ""
mkdir "$d/g" || hard "mkdir"
if "$P" --gpu --quick -r 1 -w 0 -o "$d/g/x.json" >/dev/null 2>&1; then
	pass "GPU mode ran (a GPU is present): nothing to check"
else
	expect_eq "a run that fails after the check leaves no file" "$(ls -A "$d/g")" ""
fi
done_testing
