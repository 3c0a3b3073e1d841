# shellcheck shell=sh
# hexiprof-cli.sh: --help, --version, a table of invalid invocations (exit 2
# with a message naming the option), and GPU mode without a usable GPU.
. "$top_srcdir/tests/tap.sh"
P="$top_builddir/profiler/hexiprof"
[ -x "$P" ] || hard "no $P"

out=$("$P" --help) && pass "--help exits 0" || fail "--help"
case $out in *"--mode=MODE"*"--output=FILE"*"--json"*) pass "--help lists options" ;;
*) fail "--help text: $out" ;; esac
out=$("$P" --version) || fail "--version exit"
expect_eq "--version" "$out" "hexiprof (hexiscale) $(sed -n 's/^PACKAGE_VERSION = //p' "$top_builddir/Makefile")"

# Each bad invocation: exit 2 and a message mentioning the word given.
while IFS='|' read -r args word; do
	[ -n "$args" ] || continue
	# shellcheck disable=SC2086
	err=$("$P" $args 2>&1 >/dev/null)
	st=$?
	if [ $st -eq 2 ] && printf '%s' "$err" | grep -q -- "$word"; then
		pass "rejects '$args'"
	else
		fail "'$args': exit $st, message '$err' (want 2 and '$word')"
	fi
done <<'TABLE'
--mode=fast|--mode
--mode|needs a value
--repeats=0|--repeats
--repeats=1001|--repeats
--repeats=ten|--repeats
--warmup=-1|--warmup
--warmup=101|--warmup
--gemm=1x2|--gemm
--gemm=0x1x1|--gemm
--gemm=70000x1x1|--gemm
--max-msg=0|--max-msg
--max-msg=2G|--max-msg
--max-msg=1T|--max-msg
--max-msg=32|--max-msg
--host=a/b|--host
--host=|--host
--host=n1:gpu|--host
--host=nœud|--host
--host=a,b|--host
--output=|--output
--bogus|unknown option
-Z|unknown option
stray|unexpected argument
--only-gemm|--only-gemm needs
--rate=max|--rate
--gemm=8x8x8:x|want MxNxK
--gemm=8x8x8:ntt|want MxNxK
--gemm=8x8x8:|want MxNxK
--gemm=1x1x1 --gemm=1x1x1 --gemm=1x1x1 --gemm=1x1x1 --gemm=1x1x1 --gemm=1x1x1 --gemm=1x1x1 --gemm=1x1x1 --gemm=1x1x1 --gemm=1x1x1 --gemm=1x1x1 --gemm=1x1x1 --gemm=1x1x1 --gemm=1x1x1 --gemm=1x1x1 --gemm=1x1x1 --gemm=1x1x1|too many
TABLE

# GPU mode on a machine without a usable GPU (or a build without CUDA):
# a clear error, exit status = the hexi_rc code (9 unsupported, 27 no device).
if "$P" --mode=gpu --quick >/dev/null 2>"$PWD/gpu.err"; then
	pass "GPU mode ran (a GPU is present)"
else
	st=$?
	case $st in
	9) grep -q "built without CUDA" "$PWD/gpu.err" && pass "GPU mode: built without CUDA (exit 9)" ||
		fail "GPU mode exit 9 message: $(cat "$PWD/gpu.err")" ;;
	27) grep -q "no CUDA device: cudaGetDeviceCount returned" "$PWD/gpu.err" &&
		pass "GPU mode: no device (exit 27): $(cat "$PWD/gpu.err")" ||
		fail "GPU mode exit 27 message: $(cat "$PWD/gpu.err")" ;;
	*) fail "GPU mode: exit $st: $(cat "$PWD/gpu.err")" ;;
	esac
fi
rm -f "$PWD/gpu.err"
done_testing
