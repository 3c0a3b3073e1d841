#!/bin/sh
# fuzz.sh: replay the seed corpora of the cluster, model, plan and catalog
# parsers and run a bounded number of deterministic mutations of each
# (HEXI_FUZZ_ITERATIONS overrides the count; see hexiscale-cluster(5) for
# open-ended fuzzing with clang -fsanitize=fuzzer).
n=${HEXI_FUZZ_ITERATIONS:-3000}
status=0
for t in cluster model plan catalog; do
	seeds="$srcdir/corpus/$t"
	[ "$t" = plan ] && seeds="$seeds $top_srcdir/examples/plans"
	[ "$t" = cluster ] && seeds="$seeds $top_srcdir/examples/clusters"
	[ "$t" = model ] && seeds="$seeds $top_srcdir/examples/models"
	./fuzz_$t -n "$n" $seeds || { echo "FAIL: fuzz_$t"; status=1; }
done
exit $status
