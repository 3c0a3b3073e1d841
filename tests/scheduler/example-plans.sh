#!/bin/sh
# example-plans.sh: examples/plans/ equal what gen_plans writes today (the
# plan format and hash are stable), and each fits its GPUs' memory
# (hexiplan simulate exits 0; the paper example did not, at 129.5 of
# 80 GiB).
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
./gen_plans "$tmp" || { echo "gen_plans failed"; exit 1; }
status=0
for f in "$tmp"/*.json; do
	b=$(basename "$f")
	if ! cmp -s "$f" "$top_srcdir/examples/plans/$b"; then
		echo "FAIL: examples/plans/$b differs from gen_plans output:"
		diff -u "$top_srcdir/examples/plans/$b" "$f" | head -20
		status=1
	else
		echo "ok: examples/plans/$b"
	fi
	if out=$("$top_builddir/scheduler/hexiplan" simulate "$top_srcdir/examples/plans/$b" 2>&1); then
		echo "ok: examples/plans/$b fits (hexiplan simulate)"
	else
		echo "FAIL: hexiplan simulate examples/plans/$b:"
		echo "$out" | sed 's/^/  /'
		status=1
	fi
done
n=$(ls "$top_srcdir"/examples/plans/*.json | wc -l)
[ "$n" -eq "$(ls "$tmp"/*.json | wc -l)" ] ||
	{ echo "FAIL: examples/plans has $n files"; status=1; }
exit $status
