# shellcheck shell=sh
# man-lint.sh: every man page builds and lints without warnings.
. "$top_srcdir/tests/tap.sh"
# A sub-make started from a test must not inherit the test run's jobserver.
unset MAKEFLAGS MFLAGS MAKELEVEL
command -v mandoc >/dev/null 2>&1 || command -v groff >/dev/null 2>&1 ||
	skip "neither mandoc nor groff is installed"
cd "$top_builddir/man" || hard "no man build dir"
pages=$(make -s --no-print-directory list-pages 2>/dev/null)
[ -n "$pages" ] || hard "could not list MAN_PAGES"
make -s --no-print-directory $pages >/dev/null || hard "man pages failed to build"
for p in $pages; do
	out=$(sh "$top_srcdir/man/lint.sh" "$p" 2>&1)
	case $out in "ok $p") pass "lint $p" ;; *) fail "lint $p: $out" ;; esac
	grep -q '^\.Sh SEE ALSO' "$p" && pass "$p has SEE ALSO" || fail "$p lacks SEE ALSO"
done
done_testing
