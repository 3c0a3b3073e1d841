# shellcheck shell=sh
# cycles.sh: no new file-level call circle inside a module, no circle of
# modules, no source compiled twice (tests/common/cycles.py reads the
# build's objects with nm; the known ones are listed in cycles.allow).
# First it proves it can fail: two objects that call each other.
. "$top_srcdir/tests/tap.sh"
command -v nm >/dev/null 2>&1 || skip "nm (binutils) is not installed"
command -v python3 >/dev/null 2>&1 || skip "python3 is not installed"
command -v cc >/dev/null 2>&1 || skip "no C compiler for the self-test"
py="$top_srcdir/tests/common/cycles.py"
tmp=$(mktemp -d) || hard "mktemp"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/b/common" && : >"$tmp/empty.allow"
echo 'int b(int); int a(int x) { return x ? b(x - 1) : 0; }' >"$tmp/a.c"
echo 'int a(int); int b(int x) { return x ? a(x - 1) : 1; }' >"$tmp/b.c"
cc -c -o "$tmp/b/common/a.o" "$tmp/a.c" && cc -c -o "$tmp/b/common/b.o" "$tmp/b.c" ||
	hard "self-test objects do not compile"
out=$(python3 "$py" "$tmp/b" "$tmp/empty.allow")
rc=$?
expect_eq "a.c <-> b.c is reported as a new circle" \
	"$rc $(echo "$out" | grep -c '^NEW: circle common a b$')" "1 1"
echo 'circle common b a' >"$tmp/ab.allow"
python3 "$py" "$tmp/b" "$tmp/ab.allow" >/dev/null
expect_eq "the same circle, listed, passes" "$?" 0

out=$(python3 "$py" "$top_builddir" "$top_srcdir/tests/common/cycles.allow")
rc=$?
echo "$out" | sed 's/^/# /'
[ $rc -eq 77 ] && skip "no objects under $top_builddir"
expect_eq "no new circle, module circle or double build in the tree" "$rc" 0
done_testing
