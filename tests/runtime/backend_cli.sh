#!/bin/sh
# hexitrain --backend / --dtype / HEXISCALE_BACKEND as one process: option
# parsing, the errors and exit codes of nccl without CUDA support or
# without a device, auto falling back to mpi, bf16 refused on the CPU path.
# With a usable GPU, two short GPU runs (fp32 and bf16) must learn, and
# GPU fp32 must follow the CPU run's losses.
. "$top_srcdir/tests/runtime/rt_env.sh"

if grep -q '^#define HAVE_CUDA 1' "$top_builddir/config.h"; then
	cuda=1
else
	cuda=0
fi

"$HT" --help >"$WORK/help"
grep -q -- '--backend NAME' "$WORK/help" && grep -q -- '--dtype NAME' "$WORK/help" &&
	grep -q 'HEXISCALE_BACKEND' "$WORK/help" && pass "--help lists --backend, --dtype" ||
	fail "--help lists --backend, --dtype"

# Usage errors: exit 2, message naming the option (before any bootstrap).
while IFS='|' read -r args want; do
	# shellcheck disable=SC2086
	"$HT" $args >/dev/null 2>"$WORK/err"
	st=$?
	if [ "$st" -eq 2 ] && grep -q -- "$want" "$WORK/err"; then
		pass "usage error: $args"
	else
		fail "usage error: $args (exit $st: $(cat "$WORK/err"))"
	fi
done <<'EOT'
--backend gpu|--backend 'gpu': mpi, nccl or auto
--backend NCCL|--backend 'NCCL'
--backend|option '--backend' needs a value
--dtype fp16|--dtype 'fp16': fp32 or bf16
--dtype|option '--dtype' needs a value
--dtype BF16|--dtype 'BF16'
EOT

# A bad HEXISCALE_BACKEND: HEXI_ERR_INVAL (4) naming the variable.
HEXISCALE_BACKEND=cuda "$HT" --steps 1 >/dev/null 2>"$WORK/err"
expect_eq "HEXISCALE_BACKEND=cuda: exit 4" "$?" 4
grep -q "HEXISCALE_BACKEND 'cuda': want mpi, nccl or auto" "$WORK/err" &&
	pass "HEXISCALE_BACKEND=cuda: message" || fail "HEXISCALE_BACKEND=cuda: message: $(cat "$WORK/err")"

# --backend overrides the environment.
HEXISCALE_BACKEND=cuda "$HT" --backend mpi --steps 1 >"$WORK/out" 2>"$WORK/err"
expect_eq "--backend mpi over a bad HEXISCALE_BACKEND: exit 0" "$?" 0

# mpi and auto (auto is mpi where there is no GPU).
"$HT" --backend mpi --steps 2 >"$WORK/out" 2>"$WORK/err"
expect_eq "--backend mpi: exit 0" "$?" 0
grep -q 'backend mpi, fp32' "$WORK/out" && pass "--backend mpi: header" ||
	fail "--backend mpi: header: $(head -n 1 "$WORK/out")"

# Is there a usable GPU?  (nccl either starts or says why not.)
"$HT" --backend nccl --steps 1 >"$WORK/nccl.out" 2>"$WORK/nccl.err"
st=$?
gpu=0
if [ "$cuda" -eq 0 ]; then
	expect_eq "--backend nccl without CUDA support: exit 9 (unsupported)" "$st" 9
	grep -q -- '--backend nccl: this build has no CUDA support (configure --with-cuda)' \
		"$WORK/nccl.err" && pass "--backend nccl without CUDA: message" ||
		fail "--backend nccl without CUDA: message: $(cat "$WORK/nccl.err")"
	HEXISCALE_BACKEND=nccl "$HT" --steps 1 >/dev/null 2>"$WORK/err"
	expect_eq "HEXISCALE_BACKEND=nccl without CUDA support: exit 9" "$?" 9
elif [ "$st" -eq 27 ]; then
	pass "--backend nccl without a device: exit 27 (no device)"
	grep -q -- '--backend nccl: no usable CUDA device' "$WORK/nccl.err" &&
		pass "--backend nccl without a device: message" ||
		fail "--backend nccl without a device: message: $(cat "$WORK/nccl.err")"
	[ ! -s "$WORK/nccl.out" ] && pass "--backend nccl without a device: no step ran" ||
		fail "--backend nccl without a device: printed $(cat "$WORK/nccl.out")"
	HEXISCALE_BACKEND=nccl "$HT" --steps 1 >/dev/null 2>"$WORK/err"
	expect_eq "HEXISCALE_BACKEND=nccl without a device: exit 27" "$?" 27
	grep -q 'HEXISCALE_BACKEND nccl: no usable CUDA device' "$WORK/err" &&
		pass "HEXISCALE_BACKEND=nccl without a device: message" ||
		fail "HEXISCALE_BACKEND=nccl without a device: message: $(cat "$WORK/err")"
elif [ "$st" -eq 0 ]; then
	gpu=1
	pass "--backend nccl with a GPU: one step ran"
else
	fail "--backend nccl: exit $st: $(cat "$WORK/nccl.err")"
fi

"$HT" --backend auto --steps 1 >"$WORK/out" 2>"$WORK/err"
expect_eq "--backend auto: exit 0" "$?" 0
if [ "$gpu" -eq 1 ]; then
	grep -q 'backend nccl' "$WORK/out" && pass "--backend auto with a GPU: nccl" ||
		fail "--backend auto with a GPU: $(head -n 1 "$WORK/out")"
else
	grep -q 'backend mpi' "$WORK/out" && pass "--backend auto without a GPU: mpi" ||
		fail "--backend auto without a GPU: $(head -n 1 "$WORK/out")"
fi

# bf16 is the GPU path's: refused on mpi with exit 9 and the reason.
"$HT" --backend mpi --dtype bf16 --steps 1 >/dev/null 2>"$WORK/err"
expect_eq "--dtype bf16 on mpi: exit 9" "$?" 9
grep -q 'dtype bf16 needs the nccl backend' "$WORK/err" && pass "--dtype bf16 on mpi: message" ||
	fail "--dtype bf16 on mpi: message: $(cat "$WORK/err")"
"$HT" --backend mpi --dtype fp32 --steps 1 >/dev/null 2>&1
expect_eq "--dtype fp32 on mpi: exit 0" "$?" 0

if [ "$gpu" -eq 1 ]; then
	# fp32 on the GPU follows the CPU model (same init, same data;
	# 2 micro-batches exercise the gradient accumulation).
	"$HT" --backend mpi --steps 5 --micro-batches 2 --json >"$WORK/cpu.json" 2>"$WORK/err" &&
		"$HT" --backend nccl --steps 5 --micro-batches 2 --json >"$WORK/gpu.json" 2>>"$WORK/err" &&
		"$HT" --backend nccl --dtype bf16 --steps 5 --json >"$WORK/bf16.json" 2>>"$WORK/err" ||
		fail "GPU runs: $(cat "$WORK/err")"
	loss() { sed -n "${2}s/.*\"loss\":\([^,]*\),.*/\1/p" "$1"; }
	awk -v a="$(loss "$WORK/cpu.json" 5)" -v b="$(loss "$WORK/gpu.json" 5)" \
		'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d < 2e-3 * a) }' &&
		pass "GPU fp32 step-5 loss $(loss "$WORK/gpu.json" 5) = CPU $(loss "$WORK/cpu.json" 5) within 0.2 %" ||
		fail "GPU fp32 step-5 loss $(loss "$WORK/gpu.json" 5) vs CPU $(loss "$WORK/cpu.json" 5)"
	awk -v a="$(loss "$WORK/bf16.json" 1)" -v b="$(loss "$WORK/bf16.json" 5)" \
		'BEGIN { exit !(b != "" && b < a) }' &&
		pass "GPU bf16 learns: loss $(loss "$WORK/bf16.json" 1) -> $(loss "$WORK/bf16.json" 5)" ||
		fail "GPU bf16 learns: loss $(loss "$WORK/bf16.json" 1) -> $(loss "$WORK/bf16.json" 5)"
	# SGD on the GPU follows the CPU, and a GPU checkpoint resumes on
	# the CPU (and the other way round) with the same losses as a run
	# without a stop.
	"$HT" --backend mpi --steps 4 --optimizer sgd --lr 0.5 --json \
		>"$WORK/cpu-sgd.json" 2>"$WORK/err" &&
		"$HT" --backend nccl --steps 4 --optimizer sgd --lr 0.5 --json \
			>"$WORK/gpu-sgd.json" 2>>"$WORK/err" ||
		fail "SGD runs: $(cat "$WORK/err")"
	"$CMP" --tol 2e-3 --loss "$WORK/cpu-sgd.json" "$WORK/gpu-sgd.json" >/dev/null &&
		pass "GPU SGD losses = CPU SGD losses (2e-3)" ||
		fail "GPU SGD losses differ from the CPU's"
	if ! grep -q '^#define HAVE_HDF5 1' "$top_builddir/config.h" ||
		! grep -q '^#define HAVE_XXHASH 1' "$top_builddir/config.h"; then
		echo "# no checkpoints in this build (HDF5/xxhash): GPU<->CPU resume not checked"
	else
		"$HT" --backend mpi --steps 4 --json >"$WORK/full.json" 2>"$WORK/err" &&
			"$HT" --backend nccl --steps 2 --save-every 2 --ckpt-dir "$WORK/ckg" \
				>/dev/null 2>>"$WORK/err" &&
			"$HT" --backend mpi --steps 4 --resume "$WORK/ckg" --json \
				>"$WORK/res-cpu.json" 2>>"$WORK/err" &&
			"$HT" --backend mpi --steps 2 --save-every 2 --ckpt-dir "$WORK/ckc" \
				>/dev/null 2>>"$WORK/err" &&
			"$HT" --backend nccl --steps 4 --resume "$WORK/ckc" --json \
				>"$WORK/res-gpu.json" 2>>"$WORK/err" ||
			fail "checkpoint runs: $(cat "$WORK/err")"
		"$CMP" --tol 2e-3 --skip 2 --loss "$WORK/full.json" "$WORK/res-cpu.json" >/dev/null &&
			pass "GPU checkpoint resumed on the CPU: same losses" ||
			fail "GPU checkpoint resumed on the CPU: losses differ"
		"$CMP" --tol 2e-3 --skip 2 --loss "$WORK/full.json" "$WORK/res-gpu.json" >/dev/null &&
			pass "CPU checkpoint resumed on the GPU: same losses" ||
			fail "CPU checkpoint resumed on the GPU: losses differ"
	fi
fi
done_testing
