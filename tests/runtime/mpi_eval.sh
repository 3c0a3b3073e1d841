#!/bin/sh
# Validation (--val-data, --eval-every) changes nothing in training, on
# plans whose gradient sync runs between ranks: the losses each step and
# the final parameters equal those of the same plan without validation,
# and the validation losses agree across plans.  Validation runs a
# backward (the pipeline has no forward-only schedule); its last one
# started the overlapped gradient sync, whose collectives the next step's
# sync then waited on and applied: a different loss from step 2 on at
# zero 0 and 1 over two pipelines and with TP 2, and at zero 1 the
# validation batch trained into the model (its loss 4.02 against 4.61).
. "$top_srcdir/tests/runtime/rt_env.sh"
need_mpi
python3 - "$WORK" <<'PY' || hard "token files"
import random, struct, sys
def write(path, n, seed):
    r = random.Random(seed)
    hdr = [20240520, 2, n & 0xffffffff, n >> 32, 2] + [0] * 251
    toks = [r.randrange(64) for _ in range(n)]  # tiny-4l's vocabulary
    with open(path, "wb") as f:
        f.write(struct.pack("<256I", *hdr) + struct.pack("<%dH" % n, *toks))
write(sys.argv[1] + "/train.tok", 20000, 1)
write(sys.argv[1] + "/val.tok", 5000, 2)
PY
D="--data $WORK/train.tok --steps 3 --optimizer adamw"
E="--val-data $WORK/val.tok --eval-every 1"
"$HT" --model tiny-4l --batch 8 --micro-batches 2 $D $E --json \
	>"$WORK/one.json" 2>"$WORK/one.err" || hard "one process: $(cat "$WORK/one.err")"
vals() { grep -o '"val_loss":[0-9.e+-]*' "$1" | cut -d: -f2 | tr '\n' ' '; }
echo "# one process: validation losses $(vals "$WORK/one.json")"
for spec in "dp:4/2:1x4;4/2:1x4" "z1:4/2:1x4;4/2:1x4:zero=1" \
	"z2:4/2:1x4;4/2:1x4:zero=2" "tp:8/2:2x4"; do
	name=${spec%%:*} rest=${spec#*:}
	case $rest in
	*:zero=*) s=${rest%:zero=*} z=${rest##*:zero=} ;;
	*) s=$rest z=0 ;;
	esac
	P=$WORK/plan-$name.json
	"$MKPLAN" tiny-4l "$s" "$P" gpu=cpu zero="$z" >/dev/null ||
		hard "mkplan $s"
	n=$(plan_ranks "$P")
	hx_mpirun "$n" "$HT" --plan "$P" $D --json --dump "$WORK/$name" \
		>"$WORK/$name.json" 2>"$WORK/$name.err" ||
		hard "$name without validation: $(tail -n 3 "$WORK/$name.err")"
	hx_mpirun "$n" "$HT" --plan "$P" $D $E --json --dump "$WORK/$name-e" \
		>"$WORK/$name-e.json" 2>"$WORK/$name-e.err" ||
		hard "$name with validation: $(tail -n 3 "$WORK/$name-e.err")"
	# (--loss reads "loss", not "val_loss": the step lines only)
	same "$name (zero $z, $n ranks) with validation every step" "$name" "$name-e" 0
	echo "# $name: validation losses $(vals "$WORK/$name-e.json")"
	"$CMP" --key val_loss --loss "$WORK/one.json" "$WORK/$name-e.json" \
		>"$WORK/$name.cmp" 2>&1
	expect_eq "$name: its 4 validation losses equal one process's (1e-5)" "$?" 0
	[ "$(grep -c '"val_loss"' "$WORK/$name-e.json")" -eq 4 ] &&
		pass "$name: validation at steps 0 to 3" ||
		fail "$name: $(grep -c '"val_loss"' "$WORK/$name-e.json") validation lines"
done
done_testing
