#!/bin/bash
# load.sh - 20 batch jobs submitted at once, each --hexiscale=auto with a
# tiny step (every task prints its role) on 1 to 8 GPUs of 1 to 3 nodes:
# all complete, each step has its own plan file for its own GPUs, and every
# task's role matches its plan (tests/spank/check-roles.py); no node drained.
. "$top_srcdir/tests/e2e/e2e-lib.sh"
slurm_up
mkdir -p out
N=20
# Job shapes, used in turn: nodes, tasks (one GPU each), node list.
shapes=("1 1 n1" "1 2 n2" "2 3 n2,n3" "3 4 n[1-3]" "1 3 n1" "2 5 n1,n3" "3 8 n[1-3]" "1 2 n3")
jids=()
t0=$(date +%s)
for i in $(seq 0 $((N - 1))); do
	read -r nn nt nl <<<"${shapes[$((i % ${#shapes[@]}))]}"
	jid=$(sbatch --parsable -N"$nn" -n"$nt" -w "$nl" --gpus-per-task=1 --hexiscale=auto \
		--hexiscale-model=tiny-4l --hexiscale-global-batch=8 -o "out/%j.out" -e "out/%j.err" \
		--wrap "srun $EX/print-role.sh" 2>&1) || { fail "submission $i: $jid"; continue; }
	jids+=("$jid:$nt:$nl")
done
expect_eq "$N jobs accepted" "${#jids[@]}" "$N"
done_ok=0 roles_ok=0 bad=""
for j in "${jids[@]}"; do
	IFS=: read -r jid nt nl <<<"$j"
	st=$(job_wait "$jid")
	plan=out/hexiscale-plan.$jid.0.json
	if [ "$st" != COMPLETED ]; then
		bad="$bad $jid($st)"
		sed "s/^/# job $jid: /" "out/$jid.err" 2>/dev/null | head -5
		continue
	fi
	done_ok=$((done_ok + 1))
	if [ -f "$plan" ] && [ "$(pyval "$plan" "p['world_size']")" = "$nt" ] &&
		$CHECK_ROLES "$plan" "out/$jid.out" >"out/$jid.check" 2>&1; then
		roles_ok=$((roles_ok + 1))
	else
		bad="$bad $jid(roles)"
		sed "s/^/# job $jid ($nt tasks on $nl): /" "out/$jid.check" 2>/dev/null | head -5
	fi
done
echo "# $N jobs done in $(($(date +%s) - t0)) s"
expect_eq "all $N jobs completed" "$done_ok" "$N"
expect_eq "all $N jobs: a plan for their own GPUs, every task's role right" "$roles_ok" "$N"
[ -z "$bad" ] || echo "# failed:$bad"
expect_eq "one plan file per job" "$(ls out/hexiscale-plan.*.0.json 2>/dev/null | wc -l)" "$N"
no_drain
done_testing
