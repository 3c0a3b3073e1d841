# shellcheck shell=sh
# valgrind.sh: the command-line tools run clean under valgrind memcheck
# (no invalid access, no use of uninitialised values, no definite leaks)
# on a small real job: plan, simulate, show, train, checkpoint, verify,
# reshard, profile; and on bad input (issue 18): the unit tests that walk
# the bad-input tables (formats, strict parsers, plugin options, GRES,
# hand-off) and a table of bad command lines and files for the CLIs.  ASan+UBSan cover the unit tests (tests/run.sh); this
# covers the programs as installed users run them, with the real libraries.
. "$top_srcdir/tests/tap.sh"
command -v valgrind >/dev/null 2>&1 || skip "valgrind is not installed"
[ "${HEXI_SANITIZED:-0}" = 1 ] && skip "sanitizer build: valgrind and ASan do not mix"
B=$top_builddir
S=$top_srcdir
tmp=$(mktemp -d /tmp/hexi-vg-XXXXXX) || hard "mktemp failed"
trap 'rm -rf "$tmp"' EXIT

# --track-origins=yes finds nothing more, it only says where an
# uninitialised value came from, at about 20 % more time: a failing
# command runs again with it for the report.
vg() {
	local name=$1 rc
	shift
	if valgrind -q --error-exitcode=97 --leak-check=full \
		--errors-for-leak-kinds=definite --suppressions="$S/tests/common/valgrind.supp" \
		--log-file="$tmp/vg.log" "$@" >"$tmp/out" 2>&1; then
		pass "$name"
	else
		rc=$?
		fail "$name (exit $rc)"
		sed 's/^/# /' "$tmp/vg.log" | head -n 30
		sed 's/^/# /' "$tmp/out" | tail -n 10
		echo "# again with --track-origins=yes:"
		valgrind -q --error-exitcode=97 --leak-check=full \
			--errors-for-leak-kinds=definite --track-origins=yes \
			--suppressions="$S/tests/common/valgrind.supp" \
			--log-file="$tmp/vg.log" "$@" >/dev/null 2>&1
		sed 's/^/# /' "$tmp/vg.log" | head -n 40
	fi
}

# vg_err NAME CMD...: CMD must fail with its own error, not a memcheck one.
vg_err() {
	local name=$1 rc
	shift
	# timeout: a FIFO among the inputs must fail, not hang the suite
	timeout 300 valgrind -q --error-exitcode=97 --leak-check=full \
		--errors-for-leak-kinds=definite --suppressions="$S/tests/common/valgrind.supp" \
		--log-file="$tmp/vg.log" "$@" >"$tmp/out" 2>&1
	rc=$?
	if [ $rc -ne 0 ] && [ $rc -ne 97 ]; then
		pass "$name (exit $rc)"
	else
		fail "$name (exit $rc)"
		sed 's/^/# /' "$tmp/vg.log" | head -n 30
	fi
}

# libtool wrappers are scripts: run the real binaries in .libs.
bin() {
	if [ -x "$B/$1/.libs/$2" ]; then echo "$B/$1/.libs/$2"; else echo "$B/$1/$2"; fi
}
export LD_LIBRARY_PATH="$B/scheduler/.libs:$B/checkpoint/.libs:$B/runtime/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

plan=$(bin scheduler hexiplan)
[ -x "$plan" ] || skip "hexiplan not built"
vg "hexiplan plan (paper cluster, llama2-13b)" "$plan" plan "$S/examples/clusters/paper.json" \
	--model llama2-13b -o "$tmp/p13.json"
vg "hexiplan simulate --json" "$plan" simulate "$tmp/p13.json" --json
vg "hexiplan show --svg" "$plan" show "$tmp/p13.json" --svg "$tmp/p13.svg"
vg "hexiplan compare (8 mixed GPUs)" "$plan" compare "$S/examples/clusters/mixed-8.json" --model llama2-7b
printf '{"nodes": [{"name": "n1", "gpu": "a800", "count": 3}' >"$tmp/bad.json"
vg_err "hexiplan rejects truncated JSON cleanly" "$plan" plan "$tmp/bad.json" --model llama2-7b
vg_err "hexiplan rejects an unknown model cleanly" "$plan" plan \
	"$S/examples/clusters/paper.json" --model no-such-model

# ---- bad input: the tables of the unit tests, then bad CLI inputs --------
for t in "scheduler test_badinput.t" "common test_error.t" "spank test_parse.t"; do
	set -- $t
	# tests/common runs first: build the other directories' programs here
	make -s -C "$B/tests/$1" "$2" >/dev/null 2>&1
	tb=$(bin "tests/$1" "$2")
	if [ -x "$tb" ]; then
		cd "$B/tests/$1" && vg "bad-input table: tests/$1/$2" "$tb"
		cd "$tmp" || hard "cd $tmp"
	else
		echo "# tests/$1/$2 not built: its bad-input table not run under valgrind"
	fi
done
C=$S/examples/clusters/homo-a100-8.json
mkfifo "$tmp/fifo.json"
printf '{"format":"hexiscale-profile","version":1,"host":"n1","bogus":1}' >"$tmp/badprof.json"
sed 's/"hidden": 48/"hidden": 50/' "$S/examples/models/tiny-8l.json" >"$tmp/badmodel.json"
printf '{"format": "hexiscale-plan", "version": 1,' >"$tmp/cutplan.json"
while IFS='|' read -r name args; do
	# shellcheck disable=SC2086 # args are split on purpose
	eval "set -- $args"
	vg_err "hexiplan bad input: $name" "$plan" "$@"
done <<TABLE
cluster is a FIFO|plan "$tmp/fifo.json" --model llama2-7b
cluster is a directory|plan "$tmp" --model llama2-7b
model file does not validate|plan "$C" --model "$tmp/badmodel.json"
model file is a FIFO|plan "$C" --model "$tmp/fifo.json"
profile with an unknown key|plan "$C" --model llama2-7b --profiles "$tmp/badprof.json"
truncated plan|validate "$tmp/cutplan.json"
truncated plan (show)|show "$tmp/cutplan.json"
global batch not a number|plan "$C" --model llama2-7b --global-batch 12x
micro-batch out of range|plan "$C" --model llama2-7b --micro-batch 0
unknown option|plan "$C" --model llama2-7b --bogus
unknown strategy|plan "$C" --model llama2-7b --strategy nosuch
-o onto a directory|plan "$C" --model llama2-7b -o "$tmp"
TABLE

train=$(bin runtime hexitrain)
ckpt=$(bin checkpoint hexickpt)
if [ -x "$train" ] && [ -x "$ckpt" ]; then
	vg "hexitrain: 2 steps, save" "$train" --model tiny-4l --steps 2 --save-every 2 \
		--ckpt-dir "$tmp/ck" --timeout 0
	vg "hexitrain: resume 1 step" "$train" --model tiny-4l --steps 3 --resume "$tmp/ck" \
		--timeout 0
	vg "hexickpt verify" "$ckpt" verify "$tmp/ck"
	vg "hexickpt info --json" "$ckpt" info "$tmp/ck" --json
	vg "hexickpt reshard to a 4-rank plan" "$ckpt" reshard "$tmp/ck" \
		--plan "$S/examples/plans/tiny-4l-cpu4.json" -o "$tmp/ck2"
	vg "hexickpt diff of the reshard" "$ckpt" diff "$tmp/ck" "$tmp/ck2"
else
	echo "# hexitrain/hexickpt not built: training part not run"
fi
prof=$(bin profiler hexiprof)
if [ -x "$prof" ]; then
	vg "hexiprof --cpu --quick" "$prof" --cpu --quick --no-mpi -r 2 -w 1 -o "$tmp/prof.json"
fi
done_testing
