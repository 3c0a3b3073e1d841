#!/bin/bash
# hostile-cli.sh - issue 18 findings 3, 4 and 8 through the command-line
# tools:
# - FIFOs, directories and devices as every input file of hexiplan
#   (cluster, model, catalog, profiles file and inside a profiles
#   directory, plan) are refused at once with a message naming the type;
#   every command runs under a timeout so a regression fails, not hangs;
# - `hexiplan plan ... -o /dev/null` as root leaves /dev/null a character
#   device (run in a private mount namespace with its own /dev, so a
#   regression cannot break the machine's); -o onto a FIFO with a reader
#   streams the plan, onto a FIFO without one fails at once, onto a
#   directory is refused, onto a link replaces the link, not its target;
# - a profile refused before its "gpus" key is read (finding 8: an
#   uninitialised json_t was walked) is a clean error under valgrind;
# - standard output that cannot be written (>/dev/full) fails every tool
#   with a message (they exited 0).
. "$top_srcdir/tests/tap.sh"
B=$top_builddir
S=$top_srcdir
T=20
tmp=$(mktemp -d /tmp/hexi-hostile-XXXXXX) || hard "mktemp failed"
trap 'rm -rf "$tmp"' EXIT
plan=$B/scheduler/hexiplan
[ -x "$plan" ] || skip "hexiplan not built"
C=$S/examples/clusters/homo-a100-8.json
mkfifo "$tmp/fifo.json" || hard "mkfifo"
mkdir "$tmp/profdir" && mkfifo "$tmp/profdir/n1.json" || hard "profdir"
"$plan" plan "$C" --model llama2-7b -o "$tmp/good.json" >/dev/null 2>&1 || hard "no good plan"

# refused CMD... : fails within $T s, message has $want
refused() {
	local name=$1 want=$2 out rc
	shift 2
	out=$(timeout $T "$@" 2>&1)
	rc=$?
	if [ $rc -eq 124 ]; then fail "$name: hung ($T s)"
	elif [ $rc -ne 0 ] && printf '%s' "$out" | grep -q "$want"; then pass "$name: refused at once"
	else fail "$name: rc $rc: $(printf '%s' "$out" | head -2)"; fi
}
F="not a regular file (FIFO)"
refused "cluster file is a FIFO" "$F" "$plan" plan "$tmp/fifo.json" --model llama2-7b
refused "model file is a FIFO" "$F" "$plan" plan "$C" --model "$tmp/fifo.json"
refused "catalog is a FIFO" "$F" "$plan" plan "$C" --model llama2-7b --catalog "$tmp/fifo.json"
refused "profiles file is a FIFO" "$F" "$plan" plan "$C" --model llama2-7b --profiles "$tmp/fifo.json"
refused "a FIFO inside a profiles directory" "$F" "$plan" plan "$C" --model llama2-7b --profiles "$tmp/profdir"
refused "hexiplan show FIFO" "$F" "$plan" show "$tmp/fifo.json"
refused "hexiplan validate FIFO" "$F" "$plan" validate "$tmp/fifo.json"
refused "hexiplan simulate FIFO" "$F" "$plan" simulate "$tmp/fifo.json"
refused "cluster file is a directory" "not a regular file (directory)" "$plan" plan "$tmp" --model llama2-7b
refused "cluster file is /dev/zero" "not a regular file (character device)" "$plan" plan /dev/zero --model llama2-7b

# ---- output targets ---------------------------------------------------------
if [ "$(id -u)" -eq 0 ] && unshare --mount true 2>/dev/null; then
	out=$(timeout $T unshare --mount sh -c '
		mount -t tmpfs hexi-dev /dev && mknod -m 666 /dev/null c 1 3 || exit 90
		"$1" plan "$2" --model llama2-7b -o /dev/null >/dev/null 2>&1; rc=$?
		echo "rc=$rc type=$(stat -c %F /dev/null)"' sh "$plan" "$C" 2>&1)
	expect_eq "as root: hexiplan plan -o /dev/null (private /dev)" "$out" "rc=0 type=character special file"
else
	echo "# not root or no mount namespace: the /dev/null case runs in test_error.t only"
fi
mkdir "$tmp/outdir"
refused "-o onto a directory" "is a directory, not replaced" "$plan" plan "$C" --model llama2-7b -o "$tmp/outdir"
check "the directory is left as it is" test -d "$tmp/outdir"
mkfifo "$tmp/out.fifo"
refused "-o onto a FIFO without a reader" "FIFO has no reader" "$plan" plan "$C" --model llama2-7b -o "$tmp/out.fifo"
timeout $T cat "$tmp/out.fifo" >"$tmp/from-fifo.json" &
reader=$!
for _ in $(seq 50); do [ -e "/proc/$reader" ] && grep -q out.fifo "/proc/$reader/cmdline" 2>/dev/null && break; sleep 0.1; done
sleep 0.3 # let cat open the FIFO
timeout $T "$plan" plan "$C" --model llama2-7b -o "$tmp/out.fifo" >/dev/null 2>&1
rc=$?
wait "$reader"
expect_eq "-o onto a FIFO with a reader succeeds" "$rc" 0
check "the reader got the whole plan" "$plan" validate "$tmp/from-fifo.json"
check "the FIFO is still a FIFO" test -p "$tmp/out.fifo"
echo precious >"$tmp/victim"
ln -s "$tmp/victim" "$tmp/link.json"
"$plan" plan "$C" --model llama2-7b -o "$tmp/link.json" >/dev/null 2>&1
check "-o onto a link: the link is replaced by the plan" test -f "$tmp/link.json" -a ! -L "$tmp/link.json"
expect_eq "-o onto a link: its target is untouched" "$(cat "$tmp/victim")" precious

# ---- finding 8: uninitialised json_t on a refused profile -------------------
printf '{"format":"hexiscale-profile","version":1,"host":"n1","bogus":1}' >"$tmp/p.json"
refused "profile with an unknown key refused" "bogus" "$plan" plan "$C" --model llama2-7b --profiles "$tmp/p.json"
if command -v valgrind >/dev/null 2>&1 && [ "${HEXI_SANITIZED:-0}" != 1 ]; then
	real=$B/scheduler/.libs/hexiplan
	[ -x "$real" ] || real=$plan
	LD_LIBRARY_PATH="$B/scheduler/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
		valgrind -q --error-exitcode=97 --track-origins=yes \
		--suppressions="$S/tests/common/valgrind.supp" --log-file="$tmp/vg.log" \
		"$real" plan "$C" --model llama2-7b --profiles "$tmp/p.json" >/dev/null 2>&1
	rc=$?
	if [ $rc -ne 0 ] && [ $rc -ne 97 ] && [ ! -s "$tmp/vg.log" ]; then
		pass "valgrind: refused profile, no memory error (exit $rc)"
	else
		fail "valgrind: exit $rc"
		sed 's/^/# /' "$tmp/vg.log" | head -20
	fi
else
	echo "# valgrind part not run (no valgrind or sanitizer build)"
fi

# Standard output that cannot be written (a full disk: /dev/full): every
# tool says so and fails (15, no space), where all four exited 0 with
# nothing written
full() {
	local name=$1 out rc
	shift
	[ -x "$1" ] || { pass "$name: # SKIP $1 not built"; return; }
	out=$(timeout $T "$@" 2>&1 >/dev/full)
	rc=$?
	if [ $rc -eq 15 ] || [ $rc -eq 8 ]; then
		printf '%s' "$out" | grep -q "cannot write standard output" &&
			pass "$name >/dev/full: exit $rc, says why" ||
			fail "$name >/dev/full: exit $rc, message: $(printf '%s' "$out" | tail -n 1)"
	else
		fail "$name >/dev/full: exit $rc (want 15 or 8): $(printf '%s' "$out" | tail -n 1)"
	fi
}
full "hexiplan plan --json" "$plan" plan "$C" --model llama2-7b --json
full "hexiplan simulate" "$plan" simulate "$tmp/good.json"
full "hexiplan --help" "$plan" --help
full "hexiprof --cpu --json" "$B/profiler/hexiprof" --cpu -q --json
full "hexitrain --json" "$B/runtime/hexitrain" --model tiny-4l --steps 1 --json
if [ -x "$B/tests/checkpoint/ckpt_gen" ] &&
	"$B/tests/checkpoint/ckpt_gen" save "$tmp/ck" 1 --tp 1 >/dev/null 2>&1; then
	full "hexickpt info --json" "$B/checkpoint/hexickpt" info --json "$tmp/ck"
	full "hexickpt ls" "$B/checkpoint/hexickpt" ls "$tmp/ck"
fi
done_testing
