#!/bin/sh
# summary.sh DIR...: add up automake's test-suite.log headers under each DIR
# and print "N passed, N failed, N skipped" alone on the last line.
pass=0 fail=0 skip=0
for dir in "$@"; do
	for log in $(find "$dir" -name test-suite.log 2>/dev/null); do
		eval "$(awk '/^# PASS:/{p=$3} /^# SKIP:/{s=$3} /^# XFAIL:/{x=$3}
			/^# FAIL:/{f=$3} /^# XPASS:/{xp=$3} /^# ERROR:/{e=$3}
			END{printf "p=%d s=%d f=%d", p+x, s, f+xp+e}' "$log")"
		pass=$((pass + p)); skip=$((skip + s)); fail=$((fail + f))
	done
done
echo "$pass passed, $fail failed, $skip skipped"
