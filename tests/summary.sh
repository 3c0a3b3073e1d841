#!/bin/sh
# summary.sh DIR...: add up automake's test-suite.log headers under each DIR
# and print "N passed, N failed, N skipped" alone on the last line.
# The first awk prints each log's counts (a log without a header counts 0),
# the second adds them up.
for dir in "$@"; do
	find "$dir" -name test-suite.log -exec awk '
		function out() { if (seen) printf "%d %d %d\n", p + x, s, f + xp + e
			p = s = x = f = xp = e = 0 }
		FNR == 1 { out(); seen = 1 }
		/^# PASS:/{p=$3} /^# SKIP:/{s=$3} /^# XFAIL:/{x=$3}
		/^# FAIL:/{f=$3} /^# XPASS:/{xp=$3} /^# ERROR:/{e=$3}
		END { out() }' {} + 2>/dev/null
done | awk '{ pass += $1; skip += $2; fail += $3 }
	END { printf "%d passed, %d failed, %d skipped\n", pass, fail, skip }'
