#!/bin/bash
# hostile.sh - issue 18 findings 3 and 6 on the real test cluster:
# - a FIFO given as --hexiscale-model or as the plan file (--hexiscale=FIFO,
#   its env twin) is refused at once by sbatch, salloc and srun, with a
#   message naming the FIFO; nothing blocks (every client runs under a
#   timeout, so a regression fails instead of hanging);
# - a link flipping between a valid plan and a FIFO while sbatch and srun
#   check it: every submission either runs with the plan or is refused, none
#   hangs;
# - plan names planted by another unprivileged user in a shared sticky
#   directory for the coming job ids (a file of the planter's, a link to a
#   file of the victim's, a directory, the old predictable temporary name)
#   neither break the victim's steps nor get written through: the steps
#   run, the plan keeps its unpredictable name, the planted objects are
#   untouched.
. "$top_srcdir/tests/spank/slurm-lib.sh"
slurm_up
EX=$top_srcdir/examples
export HEXI_EXAMPLES=$EX
CHECK="python3 $top_srcdir/tests/spank/check-roles.py"
GPUS="-N3 -n8 --gpus-per-task=1"
T=30 # seconds: far above a normal submission, far below a hang
"$top_builddir/tests/spank/mkplan" good "$JOBS/good.json" || hard "mkplan good"

# The planting user: created here if missing (root only, as the cluster is).
PLANTER=hexi-planter
if ! id -u "$PLANTER" >/dev/null 2>&1; then
	useradd --system --no-create-home --shell /usr/sbin/nologin "$PLANTER" ||
		hard "cannot create user $PLANTER"
fi
as_planter() { setpriv --reuid="$PLANTER" --regid="$(id -g "$PLANTER")" --clear-groups "$@"; }

# ---- FIFOs as inputs ------------------------------------------------------
mkfifo "$JOBS/fifo.json" || hard "mkfifo"
chmod 666 "$JOBS/fifo.json"
while IFS='|' read -r what cmd want; do
	out=$(eval "$cmd" 2>&1)
	rc=$?
	if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
		fail "$what: hung (killed after $T s)"
	elif [ $rc -ne 0 ] && printf '%s' "$out" | grep -q "$want"; then
		pass "$what: refused at once"
	else
		fail "$what: rc $rc: $(printf '%s' "$out" | head -3)"
	fi
done <<TABLE
srun --hexiscale-model=FIFO|timeout $T srun $GPUS --hexiscale=auto --hexiscale-model=$JOBS/fifo.json true|fifo.json: not a regular file (FIFO)
sbatch --hexiscale-model=FIFO|timeout $T sbatch $GPUS --hexiscale=auto --hexiscale-model=$JOBS/fifo.json --wrap true|fifo.json: not a regular file (FIFO)
salloc --hexiscale-model=FIFO|timeout $T salloc $GPUS --hexiscale=auto --hexiscale-model=$JOBS/fifo.json true|fifo.json: not a regular file (FIFO)
HEXISCALE_MODEL=FIFO srun|HEXISCALE_MODEL=$JOBS/fifo.json timeout $T srun $GPUS --hexiscale=auto true|fifo.json: not a regular file (FIFO)
srun --hexiscale=FIFO|timeout $T srun $GPUS --hexiscale=$JOBS/fifo.json true|plan file .*fifo.json: not a regular file (FIFO)
sbatch --hexiscale=FIFO|timeout $T sbatch $GPUS --hexiscale=$JOBS/fifo.json --wrap true|plan file .*fifo.json: not a regular file (FIFO)
HEXISCALE_MODE=FIFO sbatch|HEXISCALE_MODE=$JOBS/fifo.json timeout $T sbatch $GPUS --wrap true|plan file .*fifo.json: not a regular file (FIFO)
srun as nobody --hexiscale=FIFO|as_user timeout $T srun $GPUS --hexiscale=$JOBS/fifo.json true|not a regular file (FIFO)
TABLE

# ---- a link flipping between a plan and a FIFO ----------------------------
mkdir -p "$JOBS/out"
ln -sf good.json "$JOBS/flip.json"
(
	# flip for at most 120 s, until the stop file appears
	end=$((SECONDS + 120))
	while [ ! -e "$JOBS/flip.stop" ] && [ $SECONDS -lt $end ]; do
		ln -sfn fifo.json "$JOBS/flip.tmp" && mv -Tf "$JOBS/flip.tmp" "$JOBS/flip.json"
		ln -sfn good.json "$JOBS/flip.tmp" && mv -Tf "$JOBS/flip.tmp" "$JOBS/flip.json"
	done
) &
flipper=$!
hung=0 ran=0 refused=0 other=0
for i in $(seq 15); do
	for cmd in "sbatch --parsable $GPUS -o $JOBS/out/flip-%j.out --hexiscale=$JOBS/flip.json --wrap true" \
		"srun $GPUS --hexiscale=$JOBS/flip.json true"; do
		out=$(timeout $T $cmd 2>&1)
		rc=$?
		if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then hung=$((hung + 1))
		elif [ $rc -eq 0 ]; then ran=$((ran + 1))
		elif printf '%s' "$out" | grep -q "not a regular file (FIFO)\|No such file"; then refused=$((refused + 1))
		else other=$((other + 1)); echo "# flip: rc $rc: $(printf '%s' "$out" | head -2)"
		fi
	done
done
touch "$JOBS/flip.stop"
wait "$flipper"
expect_eq "30 sbatch/srun on a link flipping plan/FIFO: none hung ($ran ran, $refused refused)" "$hung" 0
expect_eq "flipping link: every failure names the FIFO" "$other" 0
squeue -h -o %i | xargs -r scancel 2>/dev/null

# ---- planted plan names for coming job ids --------------------------------
SH=$JOBS/shared
mkdir -p "$SH" && chmod 1777 "$SH"
chmod 755 "$JOBS"
# the victim (nobody) has a file the planter would like overwritten
as_user sh -c "echo precious >'$SH/victim.txt'"
jid=$(srun -N1 -n1 sh -c 'echo $SLURM_JOB_ID')
[ -n "$jid" ] || hard "no job id"
for j in $(seq $((jid + 1)) $((jid + 4))); do
	for s in 0 1; do
		case $(((j + s) % 4)) in
		0) as_planter sh -c "echo planted >'$SH/hexiscale-plan.$j.$s.json'" ;;
		1) as_planter ln -s victim.txt "$SH/hexiscale-plan.$j.$s.json" ;;
		2) as_planter mkdir "$SH/hexiscale-plan.$j.$s.json" ;;
		3) as_planter sh -c "echo planted >'$SH/hexiscale-plan.$j.$s.json'" ;;
		esac
		# the temporary names the old scheme used (PID-based): a few
		for p in $(seq 100 120); do
			as_planter ln -s victim.txt "$SH/hexiscale-plan.$j.$s.json.tmp.$p" 2>/dev/null
		done
	done
done
before=$(cd "$SH" && find . -maxdepth 1 -name 'hexiscale-plan.*' -printf '%P %u %y %l\n' | sort | sha256sum)
ok_steps=0
for k in 1 2; do
	out=$(as_user timeout 120 salloc $GPUS --hexiscale="$JOBS/good.json" --hexiscale-plan-dir="$SH" \
		sh -c "srun $EX/print-role.sh; srun $EX/print-role.sh" 2>&1)
	rc=$?
	printf '%s\n' "$out" >planted.$k.out
	[ $rc -eq 0 ] && [ "$(grep -c HXROLE planted.$k.out)" -eq 16 ] && ok_steps=$((ok_steps + 2))
done
expect_eq "4 steps of the victim ran despite planted names" "$ok_steps" 4
check "stderr names the plan file that could not be replaced" grep -q "cannot be replaced (.*); the plan stays at $SH/hexiscale-plan\.[0-9]*\.[01]\.[0-9a-f]\{16\}\.json" planted.1.out
after=$(cd "$SH" && find . -maxdepth 1 -name 'hexiscale-plan.*' ! -user nobody -printf '%P %u %y %l\n' | sort | sha256sum)
expect_eq "planted names untouched (owner, type, link target)" "$after" "$before"
expect_eq "the victim's file was not written through a planted link" "$(cat "$SH/victim.txt")" precious
planted_content=$(cat "$SH"/hexiscale-plan.*.json 2>/dev/null | grep -c planted)
check "planted files still say 'planted'" test "$planted_content" -ge 4
fallback=$(grep -o "the plan stays at [^ ]*" planted.1.out | head -1 | sed 's/the plan stays at //')
if [ -n "$fallback" ] && [ -f "$fallback" ]; then
	expect_eq "the plan under its unpredictable name is the victim's" "$(stat -c %U "$fallback")" nobody
	grep HXROLE planted.1.out | head -8 >planted.roles
	check "roles of a step with a planted name match its plan" $CHECK "$fallback" planted.roles
else
	fail "no fallback plan file found: $fallback"
fi
no_drain
done_testing
