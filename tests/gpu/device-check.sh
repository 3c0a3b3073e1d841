#!/bin/bash
# device-check.sh - everything that needs an NVIDIA GPU, in one run of at
# most 8 minutes on a machine with one GPU, ending with one SUMMARY block:
#
#   1. build the GPU path (configure --with-cuda, only this GPU's arch)
#   2. the CUDA kernels against their CPU references (test_kernels) and the
#      NCCL backend on one rank (test_nccl.t)
#   3. hexiprof in GPU mode: GEMM TFLOPS (bf16/fp16/fp32), memory and
#      host<->device bandwidth, written as a profile
#   4. one training step of the whole model on the GPU against the CPU model,
#      then training throughput (tokens/s, MFU against the catalog peak) of a
#      ~1B-parameter model in bf16 on one GPU: the model alone
#      (bench_gpu_train) and through hexitrain --backend nccl --dtype bf16
#      (the trainer's GPU path; its MFU from the same FLOPs per token);
#      and hexitrain's GPU path against its CPU path (backend_cli.sh)
#   5. the cost-model fidelity comparison (tests/bench/fidelity.sh)
#   6. cuDNN's attention plans on this GPU's own properties
#      (test_cudnn_plan.t); the properties are kept as cudnn-devprop.json,
#      the real input of the offline check CI runs without a GPU
#
# Usage: tests/gpu/device-check.sh      (from anywhere).  Environment:
#   HEXI_BUILD   build directory (default: the bundle $HEXI_SRC/bundle-gpu
#                when it exists (tests/gpu/make-bundle.sh), then no build
#                step; else $HEXI_SRC/build-gpu)
#   HEXI_DEVICE_CHECK_NO_BUILD=1   use HEXI_BUILD as it is (no build step)
#   HEXI_JOBS    make -j (default: number of CPUs)
#   HEXI_DEVICE_CHECK_BENCH_MODEL  the model of step 4's throughput runs (a
#                catalog name or model file; default a ~1B Llama shape sized
#                to the GPU's memory).  tests/simt/device_check_simt.sh sets
#                tiny-4l for its dry run on the SIMT emulation of the device.
#   OUT          if set, ONE archive $OUT/device-check.tar.gz of every log
#                (SUMMARY.txt first), rewritten after every step and on any
#                exit or signal, so it comes back even when the run is killed
# Exit: 0 every step that ran passed; 1 a step failed; 77 no usable GPU here
# (the reason is in the summary); the summary is printed in every case.
set -u
start=$(date +%s)
BUDGET_S=${HEXI_DEVICE_CHECK_BUDGET_S:-480}
HEXI_SRC=$(cd "$(dirname "$0")/../.." && pwd)
bundle=0
if [ -z "${HEXI_BUILD:-}" ] && [ -f "$HEXI_SRC/bundle-gpu/MANIFEST" ]; then
	HEXI_BUILD=$HEXI_SRC/bundle-gpu
fi
BUILD=${HEXI_BUILD:-$HEXI_SRC/build-gpu}
if [ -f "$BUILD/MANIFEST" ] && grep -q '^hexiscale-gpu-bundle' "$BUILD/MANIFEST"; then
	bundle=1
	HEXI_DEVICE_CHECK_NO_BUILD=1
fi
work=$(mktemp -d /tmp/hexi-device-check.XXXXXX) || exit 99
summary=()
failed=0
finished=0

note() { summary+=("$(printf '%-14s %s' "$1" "$2")"); }
left() { echo $((BUDGET_S - ($(date +%s) - start))); }
# step_failed STATUS: a step that failed counts, one never started does not
step_failed() { [ "${1:-1}" -eq 125 ] || failed=1; }
summary_text() {
	local st=$1
	echo "==================== SUMMARY (device-check) ===================="
	printf '%s\n' "${summary[@]}"
	echo "elapsed        $(($(date +%s) - start)) s of ${BUDGET_S} s"
	case $st in
	0) echo "result         PASS" ;;
	77) echo "result         SKIP (no usable GPU)" ;;
	running) echo "result         (incomplete: the run stopped here)" ;;
	*) echo "result         FAIL" ;;
	esac
}
# pack: the one archive in $OUT, written beside and renamed (never half)
pack() {
	[ -n "${OUT:-}" ] && [ -d "${OUT:-}" ] || return 0
	tar -czf "$OUT/.device-check.tar.gz.tmp" -C "$work" . 2>/dev/null &&
		mv -f "$OUT/.device-check.tar.gz.tmp" "$OUT/device-check.tar.gz"
}
step_pid=""
on_exit() {
	[ -z "$step_pid" ] || kill -TERM "$step_pid" 2>/dev/null
	[ "$finished" = 1 ] || { summary_text running >"$work/SUMMARY.txt"; pack; }
	rm -rf "$work"
}
trap on_exit EXIT
trap 'note "stopped" "by a signal after $(($(date +%s) - start)) s"; exit 1' TERM INT HUP
finish() {
	local st=$1
	summary_text "$st" | tee "$work/SUMMARY.txt"
	pack
	finished=1
	exit "$st"
}
# run NAME TIMEOUT CMD...: run with a time limit inside the budget; output
# to $work/NAME.txt; returns the command's status (124: timed out; 125: not
# started, the budget was spent: noted, and not counted as a failure).  The
# archive is rewritten after every step, with the summary so far.
run() {
	local name=$1 limit=$2 rem st
	shift 2
	rem=$(left)
	if [ "$rem" -le 5 ]; then
		echo "budget exhausted before $name" >"$work/$name.txt"
		note "$name" "not run: the ${BUDGET_S} s budget was spent (HEXI_DEVICE_CHECK_BUDGET_S)"
		return 125
	fi
	[ "$limit" -le "$rem" ] || limit=$rem
	# in the background and waited for, so a signal to this script runs
	# its trap at once (on_exit stops the step, then packs the logs)
	timeout -k 5 "$limit" "$@" >"$work/$name.txt" 2>&1 &
	step_pid=$!
	wait "$step_pid"
	st=$?
	step_pid=""
	[ $st -ne 124 ] || echo "device-check: $name timed out after $limit s" >>"$work/$name.txt"
	summary_text running >"$work/SUMMARY.txt"
	pack
	return $st
}
# py: a Python 3 for the JSON summaries (PATH, else a venv's)
PY=$(command -v python3 || true)
if [ -z "$PY" ]; then
	for p in /opt/venv/bin/python3 /venv/bin/python3 /usr/local/bin/python3 /opt/conda/bin/python3; do
		[ -x "$p" ] && PY=$p && break
	done
fi
[ -n "$PY" ] || PY=false

# ---- 0. probe: what this machine has (at most 20 s) ------------------------
# Libraries the GPU binaries load: from /usr/local/cuda, the system, or the
# pip wheels of a PyTorch environment (nvidia/{nccl,cublas,cudnn,cuda_nvrtc}/lib).
find_lib() { # find_lib SONAME-GLOB: first directory holding it
	local d f
	for d in ${CUDA_HOME:-/usr/local/cuda}/lib64 /usr/local/cuda/lib64 \
		/usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu /usr/lib64; do
		for f in "$d"/$1; do [ -e "$f" ] && { echo "$d"; return 0; }; done
	done
	f=$(timeout 8 find / -xdev \( -path /proc -o -path /sys -o -path "$work" \) -prune -o \
		-path "*/nvidia/*/lib/$1" -print 2>/dev/null | head -n 1)
	[ -n "$f" ] && dirname "$f"
}
probe() {
	echo "== date: $(date -u)  host: $(hostname)  kernel: $(uname -r)"
	echo "== build: $BUILD (bundle: $bundle)"
	[ -f "$BUILD/MANIFEST" ] && cat "$BUILD/MANIFEST"
	echo "== nvidia-smi"
	if command -v nvidia-smi >/dev/null 2>&1; then
		timeout 10 nvidia-smi 2>&1 | head -n 30
		timeout 5 nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,pci.bus_id --format=csv 2>&1
	else
		echo "nvidia-smi: not found"
	fi
	echo "== CUDA: $(command -v nvcc || echo 'no nvcc on PATH') $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*')"
	ls -d /usr/local/cuda* 2>/dev/null
	echo "== libraries (directory found)"
	for l in nccl cublas cublasLt cudnn nvrtc; do
		printf '%-9s %s\n' "$l" "$(cat "$work/lib-$l" 2>/dev/null || echo 'not found')"
	done
	echo "== python: $PY"
	echo "== LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
	for b in tests/gpu/test_kernels profiler/hexiprof; do
		[ -x "$BUILD/$b" ] && { echo "== ldd $b"; ldd "$BUILD/$b" 2>&1; }
	done
}
ldirs=""
# nvrtc: cuDNN's runtime-compiled attention engines dlopen libnvrtc.so.<CUDA
# major> (and its builtins); without it only cuDNN's precompiled engines
for l in nccl:libnccl.so.2 cublas:'libcublas.so.*' cublasLt:'libcublasLt.so.*' \
	cudnn:libcudnn.so.9 nvrtc:'libnvrtc.so.*'; do
	d=$(find_lib "${l#*:}")
	[ -n "$d" ] || continue
	echo "$d" >"$work/lib-${l%%:*}"
	case ":$ldirs:" in *":$d:"*) ;; *) ldirs=${ldirs:+$ldirs:}$d ;; esac
done
export LD_LIBRARY_PATH=${ldirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# timeout runs programs, not functions: the probe runs in a child bash
export BUILD bundle work PY
export -f probe
run probe 20 bash -c probe
gpu_name="" cc=""
if command -v nvidia-smi >/dev/null 2>&1; then
	gpu_name=$(timeout 5 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
	cc=$(timeout 5 nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
	drv=$(timeout 5 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
fi
note "gpu" "${gpu_name:-none found (nvidia-smi absent or failed)}${cc:+, compute capability $cc}${drv:+, driver $drv}"
note "libraries" "nccl: $(cat "$work/lib-nccl" 2>/dev/null || echo missing); cublas: $(cat "$work/lib-cublas" 2>/dev/null || echo missing); cudnn: $(cat "$work/lib-cudnn" 2>/dev/null || echo 'missing (own attention kernel)'); nvrtc: $(cat "$work/lib-nvrtc" 2>/dev/null || echo "missing (cuDNN's precompiled engines only)")"
[ "$bundle" = 1 ] && note "bundle" "$(sed -n 's/^commit *//p' "$BUILD/MANIFEST"), CUDA $(sed -n 's/^cuda *\([0-9.]*\).*/\1/p' "$BUILD/MANIFEST"), $(sed -n 's/^size_mib *//p' "$BUILD/MANIFEST") MiB"

# ---- 1. build ---------------------------------------------------------------
if [ "${HEXI_DEVICE_CHECK_NO_BUILD:-0}" = 1 ]; then
	note "build" "skipped (HEXI_DEVICE_CHECK_NO_BUILD=1), using $BUILD"
else
	archs=${CUDA_ARCHS:-${cc:-80 89 90}}
	export HEXI_SRC HEXI_JOBS=${HEXI_JOBS:-$(nproc)}
	# shellcheck disable=SC2016 # expanded by the inner shell
	if run build 300 bash -c '. "$HEXI_SRC/tests/deps.sh" &&
		hexi_build "$1" --enable-werror --with-cuda "CUDA_ARCHS=$2"' \
		build "$BUILD" "$archs"; then
		note "build" "ok (--with-cuda, CUDA_ARCHS=$archs) in $(($(date +%s) - start)) s"
	else
		tail -n 30 "$work/build.txt"
		note "build" "FAILED (see above)"
		failed=1
		finish 1
	fi
fi

# ---- 2. kernels and NCCL ---------------------------------------------------
TK=$BUILD/tests/gpu/test_kernels
if [ "$bundle" = 0 ] && { [ ! -x "$TK" ] || [ ! -x "$BUILD/tests/gpu/bench_gpu_train" ]; }; then
	make -C "$BUILD/tests/gpu" test_kernels test_nccl.t test_gpu_model \
		bench_gpu_train >"$work/make-tests.txt" 2>&1
fi
if [ ! -x "$TK" ]; then
	note "kernels" "not built: this build has no CUDA (configure --with-cuda)"
	note "reason" "no usable GPU path in $BUILD"
	finish 77
fi
run kernels 90 "$TK"
st=$?
if [ $st -eq 77 ]; then
	note "kernels" "SKIP: $(grep -m1 'SKIP' "$work/kernels.txt" | sed 's/^1..0 # SKIP //')"
	note "reason" "no usable GPU: $(grep -m1 'SKIP' "$work/kernels.txt" | sed 's/^1..0 # SKIP //')"
	finish 77
fi
# which attention test_kernels could compare: cuDNN's, or why not.  Its
# fp32 pass comes first and always skips cuDNN (bf16 only), so the bf16
# verdict is the one that counts (a first-match grep reported fp32's).
att=$(grep -m1 '^# attention: ' "$work/kernels.txt" | sed 's/^# attention: /cuDNN checked: /')
[ -n "$att" ] || att=$(grep -m1 'SKIP cuDNN attention .* bf16: ' "$work/kernels.txt" |
	sed 's/^ok [0-9]* - # SKIP /not checked: /')
note "attention" "${att:-not reported by test_kernels}"
k_pass=$(grep -c '^ok ' "$work/kernels.txt")
k_fail=$(grep -c '^not ok ' "$work/kernels.txt")
if [ $st -eq 0 ]; then
	note "kernels" "ok: $k_pass checks vs CPU reference passed (fp32 + bf16)"
else
	grep '^not ok' "$work/kernels.txt" | head -10
	note "kernels" "FAILED: $k_fail of $((k_pass + k_fail)) checks (exit $st)"
	step_failed "$st"
fi
if [ -x "$BUILD/tests/gpu/test_nccl.t" ]; then
	run nccl 60 "$BUILD/tests/gpu/test_nccl.t"
	st=$?
	n_fail=$(grep -c '^not ok ' "$work/nccl.txt")
	if [ $st -eq 0 ]; then
		note "nccl" "ok: $(grep -c '^ok ' "$work/nccl.txt") checks (one rank)"
	else
		note "nccl" "FAILED: $n_fail checks (exit $st)"
		step_failed "$st"
	fi
fi

# ---- 3. hexiprof -------------------------------------------------------------
mkdir -p "$work/profiles"
if run hexiprof 90 "$BUILD/profiler/hexiprof" --gpu -r 5 -w 2 --host=localhost \
	-o "$work/profiles/localhost.json"; then
	cp "$work/profiles/localhost.json" "$work/profile.json"
	note "hexiprof" "$("$PY" - "$work/profile.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
g = p["gpus"][0]
t = g.get("gemm_tflops", {})
print(f'{g.get("type")}: GEMM bf16 {t.get("bf16", 0):.1f} fp16 {t.get("fp16", 0):.1f} '
      f'fp32 {t.get("fp32", 0):.1f} TFLOP/s; mem {g.get("mem_bw_gbps", 0):.0f} GB/s; '
      f'h2d {g.get("h2d_gbps", 0):.1f} d2h {g.get("d2h_gbps", 0):.1f} GB/s')
PY
)"
else
	st=$?
	tail -n 15 "$work/hexiprof.txt"
	note "hexiprof" "FAILED (exit $st)"
	step_failed "$st"
fi

# ---- 4. GPU training throughput (~1B parameters, bf16) ----------------------
# The single-GPU model (rt_cuda_model) is checked against the CPU model by
# test_gpu_model (also as two pipeline stages) and measured alone by
# bench_gpu_train; hexitrain trains it through --backend nccl (one rank: NCCL
# refuses two ranks on one GPU, so TP and PP across ranks are checked by the
# host emulation, tests/gpuemu, and need a machine with several GPUs here).
if [ -x "$BUILD/tests/gpu/test_gpu_model" ]; then
	run gpu-model 60 "$BUILD/tests/gpu/test_gpu_model"
	st=$?
	if [ $st -eq 0 ]; then
		note "gpu model" "ok: a training step on the GPU equals the CPU model's ($(grep -c '^ok ' "$work/gpu-model.txt") checks)"
	else
		grep '^not ok' "$work/gpu-model.txt" | head -5
		note "gpu model" "FAILED: $(grep -c '^not ok ' "$work/gpu-model.txt") checks (exit $st)"
		step_failed "$st"
	fi
fi
BENCH=$BUILD/tests/gpu/bench_gpu_train
mem_gib=0
if command -v nvidia-smi >/dev/null 2>&1; then
	mem_gib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1 | awk '{print int($1 / 1024)}')
fi
# ~1.1B parameters (16 layers, hidden 2048, Llama shape) need ~20 GiB of
# weights + fp32 Adam state; smaller GPUs get the ~0.45B variant.
if [ "${mem_gib:-0}" -ge 40 ]; then
	layers=16 hidden=2048 heads=16 ffn=5632 batch=4 seq=2048
else
	layers=12 hidden=1536 heads=12 ffn=4096 batch=2 seq=1024
fi
cat >"$work/model-bench.json" <<EOF
{"format":"hexiscale-model","version":1,"name":"llama-${layers}l-${hidden}","layers":$layers,
 "hidden":$hidden,"heads":$heads,"kv_heads":$heads,"ffn":$ffn,"vocab":32000,"seq_len":$seq}
EOF
bench_model=${HEXI_DEVICE_CHECK_BENCH_MODEL:-$work/model-bench.json}
if [ -x "$BENCH" ]; then
	if run train 100 "$BENCH" --model "$bench_model" --dtype bf16 \
		--batch "$batch" --steps 6 --json; then
		note "train" "$("$PY" - "$work/train.txt" <<'PY'
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][-1]
print(f"{s['model']} ({s['params'] / 1e9:.2f}B params) {s['dtype']}, batch {s['batch']}x{s['seq']}: "
      f"{s['tokens_per_s']:.0f} tokens/s, {s['tflops']:.1f} TFLOP/s, "
      f"MFU {100 * s['mfu']:.1f} % of {s['peak_tflops']:.1f} ({s['gpu_type']} catalog peak); "
      f"attention {s.get('attention', '?')}")
if "fwd_s" in s:
    att = (f"attention alone {s['attn_fwd_ms']:.2f} + {s['attn_bwd_ms']:.2f} ms a layer, "
           f"{100 * s['attn_share']:.0f} % of the step") if s.get("attn_fwd_ms", -1) >= 0 \
        else "attention timing failed (see train.txt)"
    print(f"  step {1e3 * (s['fwd_s'] + s['bwd_s'] + s['opt_s']):.1f} ms: forward {1e3 * s['fwd_s']:.1f}, "
          f"backward {1e3 * s['bwd_s']:.1f}, AdamW {1e3 * s['opt_s']:.1f}; {att}")
PY
)"
	else
		st=$?
		tail -n 15 "$work/train.txt"
		note "train" "FAILED (exit $st)"
		step_failed "$st"
	fi
else
	note "train" "not run: no bench_gpu_train in $BUILD/tests/gpu"
fi
HT=$BUILD/runtime/hexitrain
if [ "$bundle" = 1 ]; then
	note "hexitrain gpu" "not run from the bundle: backend_cli.sh compares with the CPU path (MPI, HDF5, config.h), which the bundle leaves out"
fi
if [ -x "$HT" ] && "$HT" --help 2>&1 | grep -q -- '--backend' && [ "$bundle" = 0 ]; then
	# hexitrain's GPU path against its CPU path on a tiny model (fp32
	# and SGD losses equal, bf16 learns, checkpoints cross GPU <-> CPU).
	if run hexitrain-gpu 120 env top_srcdir="$HEXI_SRC" top_builddir="$BUILD" \
		sh "$HEXI_SRC/tests/runtime/backend_cli.sh"; then
		note "hexitrain gpu" "ok: $(grep -c '^ok ' "$work/hexitrain-gpu.txt") checks ($(grep -m1 'GPU fp32 step-5' "$work/hexitrain-gpu.txt" | sed 's/^ok [0-9]* - //'))"
	else
		st=$?
		grep '^not ok' "$work/hexitrain-gpu.txt" | head -5
		note "hexitrain gpu" "FAILED: $(grep -c '^not ok ' "$work/hexitrain-gpu.txt") checks"
		step_failed "$st"
	fi
fi
if [ -x "$HT" ] && "$HT" --help 2>&1 | grep -q -- '--backend'; then
	# The same ~1B bf16 configuration through the trainer: step 1 is warm-up.
	if run train-hexitrain 90 "$HT" --backend nccl --dtype bf16 \
		--model "$bench_model" --batch "$batch" --steps 4 \
		--json --timeout 0; then
		note "train (hexitrain)" "$("$PY" - "$work/train-hexitrain.txt" "$work/train.txt" <<'PY'
import json, statistics, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
tps = statistics.median(s["tokens_per_s"] for s in steps[1:]) if len(steps) > 1 else steps[-1]["tokens_per_s"]
out = f"hexitrain --backend nccl --dtype bf16: {tps:.0f} tokens/s (median of steps 2..{len(steps)}), loss {steps[0]['loss']:.3f} -> {steps[-1]['loss']:.3f}"
try:
    b = [json.loads(l) for l in open(sys.argv[2]) if l.startswith("{")][-1]
    out += f", MFU {100 * b['mfu'] * tps / b['tokens_per_s']:.1f} % ({100 * tps / b['tokens_per_s']:.0f} % of bench_gpu_train's rate)"
except Exception:
    pass
print(out)
PY
)"
	else
		st=$?
		tail -n 15 "$work/train-hexitrain.txt"
		note "train (hexitrain)" "FAILED (exit $st)"
		step_failed "$st"
	fi
else
	note "train (hexitrain)" "not run: no hexitrain with --backend in $BUILD/runtime"
fi

# ---- 5. cost-model fidelity ----------------------------------------------------
if run fidelity-gpu 100 env HEXI_BUILD="$BUILD" HEXI_PYTHON="$PY" bash "$HEXI_SRC/tests/bench/fidelity.sh" --gpu; then
	note "fidelity gpu" "$(tail -n 1 "$work/fidelity-gpu.txt")"
else
	st=$?
	if [ $st -eq 77 ]; then
		note "fidelity gpu" "$(grep -m1 '^SKIP' "$work/fidelity-gpu.txt")"
	else
		note "fidelity gpu" "FAILED (exit $st)"
		step_failed "$st"
	fi
fi
if [ "$bundle" = 1 ]; then
	note "fidelity cpu" "not run from the bundle (built without MPI and OpenBLAS; the CPU machines measure it)"
elif run fidelity-cpu 120 env HEXI_BUILD="$BUILD" HEXI_PYTHON="$PY" bash "$HEXI_SRC/tests/bench/fidelity.sh"; then
	note "fidelity cpu" "$(tail -n 1 "$work/fidelity-cpu.txt")"
else
	st=$?
	note "fidelity cpu" "$([ $st -eq 77 ] && grep -m1 '^SKIP' "$work/fidelity-cpu.txt" || echo "FAILED (exit $st)")"
	[ $st -eq 77 ] || step_failed "$st"
fi

# ---- 6. cuDNN's attention plans on this GPU's own properties ------------------
# Last, so it only takes what the budget has left: test_kernels (step 2)
# already ran cuDNN's attention against the CPU reference; this keeps the
# GPU's device properties (cudnn-devprop.json) for the offline check that
# CI runs without a GPU (tests/gpu/devprop/, doc/DECISIONS.md 161).
if [ -x "$BUILD/tests/gpu/test_cudnn_plan.t" ]; then
	run cudnn-plan 60 env top_srcdir="$HEXI_SRC" \
		"$BUILD/tests/gpu/test_cudnn_plan.t" --device "$work/cudnn-devprop.json"
	st=$?
	c_pass=$(grep -c '^ok ' "$work/cudnn-plan.txt")
	c_fail=$(grep -c '^not ok ' "$work/cudnn-plan.txt")
	if [ $st -eq 77 ]; then
		note "cudnn plans" "SKIP: $(grep -m1 'SKIP' "$work/cudnn-plan.txt" | sed 's/^1..0 # SKIP //')"
	elif [ $st -eq 0 ]; then
		note "cudnn plans" "ok: $c_pass checks$([ -s "$work/cudnn-devprop.json" ] && echo "; this GPU's properties in cudnn-devprop.json")"
	else
		grep '^not ok' "$work/cudnn-plan.txt" | head -5
		note "cudnn plans" "FAILED: $c_fail of $((c_pass + c_fail)) checks (exit $st)"
		step_failed "$st"
	fi
fi

finish $failed
