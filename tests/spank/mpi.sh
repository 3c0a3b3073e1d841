#!/bin/bash
# mpi.sh - srun --mpi=pmix of mpi_roles (communicators built from the role
# variables, checked with all-reduces) on a plan over the 3 fake nodes.
. "$top_srcdir/tests/spank/slurm-lib.sh"
[ -x "$top_builddir/tests/spank/mpi_roles" ] || skip "built without MPI"
slurm_up
srun --mpi=list 2>&1 | grep -q pmix || skip "Slurm has no pmix"
hexi_ompi_env
"$top_builddir/tests/spank/mkplan" good "$JOBS/good.json" || hard "mkplan"
# roles ARGS...: mpi_roles under srun --mpi=pmix on 8 tasks, output in $out
# (once more after Open MPI's TCP connect failure, hexi_ompi_tcp_flake)
roles() {
	out=$(timeout 120 srun --mpi=pmix -N3 -n8 --gpus-per-task=1 "$@" \
		"$top_builddir/tests/spank/mpi_roles" 2>&1)
	rc=$?
	if [ $rc -ne 0 ] && hexi_ompi_tcp_flake <<<"$out"; then
		echo "# Open MPI TCP connect failure (exit $rc): running the step once more"
		out=$(timeout 120 srun --mpi=pmix -N3 -n8 --gpus-per-task=1 "$@" \
			"$top_builddir/tests/spank/mpi_roles" 2>&1)
		rc=$?
	fi
}
roles --hexiscale="$JOBS/good.json"
echo "$out" | grep -v '^hexiscale:' | sed 's/^/# /'
expect_eq "mpi_roles exit status" "$rc" 0
check "communicators from the roles agree" grep -q "mpi-roles: ok 8 ranks, 8 layers, global batch 16" <<<"$out"
if [ -n "${HEXI_HAVE_PLANNER:-}" ] || srun -N3 -n8 --gpus-per-task=1 --hexiscale=auto --hexiscale-model=tiny-8l true 2>/dev/null; then
	# every GPU a rank (mpi_roles has no idle role; idle.sh tests that)
	roles --hexiscale=auto --hexiscale-use-all-gpus --hexiscale-model=tiny-8l --hexiscale-global-batch=16
	expect_eq "mpi_roles on a planned step" "$rc" 0
	check "planned communicators agree" grep -q "mpi-roles: ok 8 ranks, 8 layers, global batch 16" <<<"$out"
else
	echo "# planner not available: auto plan part not run"
fi
no_drain
done_testing
