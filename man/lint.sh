#!/bin/sh
# lint.sh PAGE...: mandoc -Tlint (or groff -ww -z) must print nothing.
status=0
for page in "$@"; do
	if command -v mandoc >/dev/null 2>&1; then
		out=$(mandoc -Tlint -W warning "$page" 2>&1)
	elif command -v groff >/dev/null 2>&1; then
		out=$(groff -man -ww -z "$page" 2>&1)
	else
		echo "no mandoc or groff to lint with"; exit 77
	fi
	if [ -n "$out" ]; then
		echo "$out"
		status=1
	else
		echo "ok $page"
	fi
done
exit $status
