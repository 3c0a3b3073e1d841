#!/bin/bash
# pytorch_local.sh - examples/pytorch/train.py against hexitrain(1) on the
# same asymmetric plans without Slurm: hexitrain under mpirun, train.py as
# one process per plan rank with the variables the plugin would set
# (HEXISCALE_RANK, RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).  The losses
# of every step must agree within 1e-4 (relative).  Skips without torch or
# mpirun.
. "$top_srcdir/tests/tap.sh"
HT=$top_builddir/runtime/hexitrain
CMP=$top_builddir/tests/runtime/rt_cmp
PY=${HEXI_PYTHON:-/usr/bin/python3}
TRAIN=$top_srcdir/examples/pytorch/train.py
[ -x "$HT" ] || hard "hexitrain not built"
[ -x "$CMP" ] || make -C "$top_builddir/tests/runtime" rt_cmp >/dev/null || hard "rt_cmp"
command -v mpirun >/dev/null 2>&1 || skip "mpirun not installed"
"$PY" -c 'import torch, numpy' 2>/dev/null || skip "$PY has no torch/numpy (python3-torch)"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 OMPI_MCA_btl=self,tcp
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export OMPI_MCA_mpi_yield_when_idle=1
W=$(mktemp -d "${TMPDIR:-/tmp}/hexitorch.XXXXXX") || hard mktemp
trap 'rm -rf "$W"' EXIT
# a port for the rendezvous, from the build dir so parallel runs differ
port=$((29000 + $(printf '%s' "$top_builddir" | cksum | cut -d' ' -f1) % 900))

# torch_run NP OUT ARGS...: train.py as NP ranks; rank 0's stdout in OUT
torch_run() {
	local n=$1 out=$2 r pids="" rc=0
	shift 2
	for r in $(seq 0 $((n - 1))); do
		HEXISCALE_RANK=$r RANK=$r WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 \
			MASTER_PORT=$port timeout -k 5 300 "$PY" "$TRAIN" "$@" \
			>"$out.$r" 2>"$out.$r.err" &
		pids="$pids $!"
	done
	for r in $pids; do wait "$r" || rc=1; done
	port=$((port + 1))
	cp "$out.0" "$out"
	[ $rc -eq 0 ] || sed 's/^/# /' "$out".*.err | tail -n 20
	return $rc
}

# compare NAME PLAN ARGS...: same losses from both trainers
compare() {
	local name=$1 plan=$2 np out
	shift 2
	np=$(sed -n 's/^ *"world_size": *\([0-9]*\).*/\1/p' "$plan" | head -n 1)
	timeout -k 5 300 mpirun --oversubscribe --allow-run-as-root -np "$np" \
		"$HT" --plan "$plan" --json "$@" >"$W/$name.ht" 2>"$W/$name.ht.err" ||
		{ fail "$name: hexitrain failed"; sed 's/^/# /' "$W/$name.ht.err" | tail; return; }
	torch_run "$np" "$W/$name.py" --plan "$plan" --json "$@" ||
		{ fail "$name: train.py failed"; return; }
	expect_eq "$name: train.py printed every step" \
		"$(grep -c '"loss"' "$W/$name.py")" "$(grep -c '"loss"' "$W/$name.ht")"
	out=$("$CMP" --tol 1e-4 --loss "$W/$name.ht" "$W/$name.py")
	st=$?
	echo "$out" | tail -n 1 | sed 's/^/# /'
	expect_eq "$name: losses of train.py = hexitrain's within 1e-4" "$st" 0
}

PL=$top_srcdir/examples/plans
# 2 pipelines: TP 2 + TP 1 stages against one TP-3 stage, batches 4/4 in
# 2 and 4 micro-batches (uneven shard boundaries: chunked sync)
compare tp123 "$PL/tiny-8l-tp123.json" --steps 6
# SGD, no clipping, raw bytes instead of the synthetic corpus (digits and
# blanks: inside tiny-8l's vocabulary of 64), both sampling hexitrain's
# shuffled windows (hexiscale-data(5))
seq 3000 | tr '\n' ' ' >"$W/text"
compare tp123-sgd-bytes "$PL/tiny-8l-tp123.json" --steps 4 --optimizer sgd \
	--lr 0.3 --clip 0 --data "$W/text" --data-format bytes
# a token file (version 2, uint16 tokens below the vocabulary of 64)
"$PY" -c '
import struct, sys
n = 5000
hdr = struct.pack("<5I", 20240520, 2, n, 0, 2) + bytes(1024 - 20)
tok = struct.pack("<%dH" % n, *[(i * 7 + i // 13) % 64 for i in range(n)])
sys.stdout.buffer.write(hdr + tok)' >"$W/train.tok" || hard "token file"
compare gqa-tokens "$PL/tiny-gqa-cpu2x2.json" --steps 3 --data "$W/train.tok"
# GQA model on 2x2 ranks
compare gqa "$PL/tiny-gqa-cpu2x2.json" --steps 4
# A broken plan is one clear error on every rank, not a hang.
printf '{"format":"hexiscale-plan","version":9}' >"$W/bad.json"
out=$(HEXISCALE_RANK=0 RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 \
	MASTER_PORT=$port timeout 60 "$PY" "$TRAIN" --plan "$W/bad.json" 2>&1)
st=$?
[ $st -eq 1 ] && echo "$out" | grep -q "version 9" &&
	pass "bad plan version: exit 1, one line naming it" ||
	fail "bad plan: exit $st: $out"
done_testing
