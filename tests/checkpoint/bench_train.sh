#!/bin/sh
# bench_train.sh - hexitrain's OWN checkpoint save and resume (not the
# fixture of bench_ckpt) against dd of the same bytes, in the same run
# (make bench; issue 14 item 5, issue 18).
#
#   save:   hexitrain --save-every 1 (rank files, whole-file xxh64, fsync,
#           commit) vs  dd if=/dev/zero bs=8M conv=fsync  of as many bytes
#   resume: hexitrain --resume (whole-file xxh64 before HDF5, every slice
#           read and checked) vs  dd of the rank files to /dev/null, both
#           with the files' pages dropped first (dd iflag=nocache count=0)
#
# Times are hexitrain's own (HEXI_CKPT_TIMING=1: rank 0 prints the seconds
# of each save and resume), best of HEXI_CKPT_BENCH_REPS (default 2),
# alternating ours and dd.  Model: about HEXI_CKPT_BENCH_MIB MiB of
# checkpoint (default 1400: weights + AdamW moments), one rank.
# Directory: HEXI_CKPT_BENCH_DIR, else $TMPDIR, else /var/tmp (a real disk).
# The machine is shared: wall times depend on its load; the CPU seconds
# are printed too.  Prints ratios (goal >= 0.8x dd); asserts nothing.
B=${top_builddir:-../..}
TRAIN=$B/runtime/hexitrain
[ -x "$TRAIN" ] || { echo "bench_train: $TRAIN not built"; exit 77; }
REPS=${HEXI_CKPT_BENCH_REPS:-2}
MIB=${HEXI_CKPT_BENCH_MIB:-1400}
D=$(mktemp -d "${HEXI_CKPT_BENCH_DIR:-${TMPDIR:-/var/tmp}}/hexitrain-bench.XXXXXX") || exit 99
trap 'rm -rf "$D"' EXIT
# layers of 12.6 Mi parameters (hidden 1024, ffn 2816), x12 bytes with AdamW
L=$(( (MIB * 1048576 / 12 - 2 * 8192 * 1024) / (4 * 1024 * 1024 + 3 * 1024 * 2816) ))
[ "$L" -ge 1 ] || L=1
cat > "$D/model.json" <<EOF
{"format": "hexiscale-model", "version": 1, "name": "bench-ckpt",
 "layers": $L, "hidden": 1024, "heads": 8, "kv_heads": 8, "ffn": 2816,
 "vocab": 8192, "seq_len": 16}
EOF
export OPENBLAS_NUM_THREADS=1 HEXI_CKPT_TIMING=1
now() { date +%s.%N; }
best() { awk -v a="$1" -v b="$2" 'BEGIN { print (a == "" || b < a) ? b : a }'; }
field() { sed -n "s/^hexitrain: checkpoint $1 step [0-9]*: \([0-9.]*\) s wall, \([0-9.]*\) s cpu$/\\$2/p" "$3" | tail -1; }
sw='' sc='' rw='' rc='' dw='' dr='' bytes=0
for _ in $(seq "$REPS"); do
	rm -rf "$D/ck" "$D/dd.bin"
	"$TRAIN" --model "$D/model.json" --batch 1 --steps 1 --save-every 1 \
		--ckpt-dir "$D/ck" >"$D/save.out" 2>&1 || { cat "$D/save.out"; exit 99; }
	w=$(field save 1 "$D/save.out"); c=$(field save 2 "$D/save.out")
	[ -n "$w" ] || { echo "bench_train: no save timing"; cat "$D/save.out"; exit 99; }
	sw=$(best "$sw" "$w"); sc=$(best "$sc" "$c")
	bytes=$(cat "$D"/ck/step-00000001/* | wc -c)
	t0=$(now)
	dd if=/dev/zero of="$D/dd.bin" bs=8M count=$(( (bytes + 8388607) / 8388608 )) conv=fsync 2>/dev/null
	dw=$(best "$dw" "$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')")
	rm -f "$D/dd.bin"
	for f in "$D"/ck/step-00000001/*; do dd if="$f" iflag=nocache count=0 2>/dev/null; done
	"$TRAIN" --model "$D/model.json" --batch 1 --steps 2 --resume "$D/ck" \
		>"$D/resume.out" 2>&1 || { cat "$D/resume.out"; exit 99; }
	w=$(field resume 1 "$D/resume.out"); c=$(field resume 2 "$D/resume.out")
	rw=$(best "$rw" "$w"); rc=$(best "$rc" "$c")
	for f in "$D"/ck/step-00000001/*; do dd if="$f" iflag=nocache count=0 2>/dev/null; done
	t0=$(now)
	cat "$D"/ck/step-00000001/rank-*.h5 | dd of=/dev/null bs=8M 2>/dev/null
	dr=$(best "$dr" "$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')")
done
awk -v by="$bytes" -v sw="$sw" -v sc="$sc" -v dw="$dw" -v rw="$rw" -v rc="$rc" -v dr="$dr" -v l="$L" -v n="$REPS" -v ld="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {
	mib = by / 1048576
	printf "hexitrain checkpoint (%d layers, %.0f MiB, 1 rank, best of %d, load %s):\n", l, mib, n, ld
	printf "  save   %7.3f s (%6.0f MiB/s, cpu %.3f s)  dd conv=fsync %7.3f s  ratio %.2fx dd (goal >= 0.8)\n", sw, mib / sw, sc, dw, dw / sw
	printf "  resume %7.3f s (%6.0f MiB/s, cpu %.3f s)  dd read (cold) %7.3f s  ratio %.2fx dd (goal >= 0.8)\n", rw, mib / rw, rc, dr, dr / rw
	printf "{\"bench\":\"hexitrain-ckpt\",\"bytes\":%d,\"save_s\":%.4f,\"save_cpu_s\":%.4f,\"dd_write_s\":%.4f,\"save_ratio\":%.3f,\"resume_s\":%.4f,\"resume_cpu_s\":%.4f,\"dd_read_s\":%.4f,\"resume_ratio\":%.3f,\"load\":%s}\n", by, sw, sc, dw, dw / sw, rw, rc, dr, dr / rw, ld
}'
