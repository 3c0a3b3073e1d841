# shellcheck shell=sh
# tests/common/shellcheck.sh: every shell script git tracks (*.sh, and any
# other file whose first line is a sh or bash #!, such as .ci/run and the
# *.sbatch examples) passes `shellcheck -x -S warning` under the top
# directory's .shellcheckrc, which says why each check it turns off is off.
# SC2154 (variable used but never set), off there for automake's top_srcdir,
# top_builddir and srcdir, runs again without .shellcheckrc and excuses only
# those three names.
. "$top_srcdir/tests/tap.sh"
command -v shellcheck >/dev/null 2>&1 ||
	skip "shellcheck is not installed (Debian package shellcheck)"
cd "$top_srcdir" || hard "cd $top_srcdir"
command -v git >/dev/null 2>&1 && [ -e .git ] &&
	git rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
	skip "not a git checkout: the scripts to check are the tracked ones"
tmp=$(mktemp -d) || hard "mktemp"
trap 'rm -rf "$tmp"' EXIT

# The scripts; what autotools generate or install is not ours.
git ls-files >"$tmp/tracked" || hard "git ls-files failed"
while IFS= read -r f; do
	case $f in build*/* | configure | */ltmain.sh | ltmain.sh) continue ;; esac
	[ -f "$f" ] || continue # deleted in the work tree
	case $f in
	*.sh) echo "$f" ;;
	*) head -n 1 "$f" | grep -qE '^#! *(/[^ ]*/)?(env +)?(ba|da)?sh( |$)' && echo "$f" ;;
	esac
done <"$tmp/tracked" >"$tmp/list"
n=$(wc -l <"$tmp/list")
# the listing itself must work, or the checks below pass on nothing
grep -qx 'tests/tap.sh' "$tmp/list" && grep -qx '.ci/run' "$tmp/list" &&
	pass "$n scripts found, tests/tap.sh and .ci/run (by its #!) among them" ||
	hard "the list of scripts lacks tests/tap.sh or .ci/run"

# sc NAME ARGS...: shellcheck ARGS on every script; its findings, one a line
# (gcc format), in $tmp/NAME, its exit status in $tmp/NAME.rc.
sc() {
	name=$1
	shift
	tr '\n' '\0' <"$tmp/list" | xargs -0 shellcheck -f gcc "$@" >"$tmp/$name" 2>&1
	echo $? >"$tmp/$name.rc"
}
# Both at once (each takes some 20 s); the second without .shellcheckrc, so
# its -x and source-path are given here.
sc all -x -S warning &
sc unset --norc -x -P SCRIPTDIR -S warning -i SC2154 &
wait

# report NAME WHAT: pass when shellcheck found nothing, else one failure a
# finding (a failure with its output when shellcheck itself failed)
report() {
	if [ "$(cat "$tmp/$1.rc")" = 0 ] && [ ! -s "$tmp/$1" ]; then
		pass "$2: nothing found in $n scripts"
	elif grep -qE '^[^:]+:[0-9]+:[0-9]+: ' "$tmp/$1"; then
		while IFS= read -r line; do
			fail "$2: $line"
		done <"$tmp/$1"
	else
		sed 's/^/# /' "$tmp/$1"
		fail "$2: shellcheck failed (exit $(cat "$tmp/$1.rc"))"
	fi
}
report all "shellcheck -x -S warning"
# automake's check environment sets these (tests/common.am)
grep -vE ': warning: (top_srcdir|top_builddir|srcdir) is referenced but not assigned\.' \
	"$tmp/unset" >"$tmp/unset.left"
if [ -s "$tmp/unset" ] && [ ! -s "$tmp/unset.left" ]; then
	: >"$tmp/unset" && echo 0 >"$tmp/unset.rc" # those three only
else
	mv "$tmp/unset.left" "$tmp/unset"
fi
report unset "SC2154 but for top_srcdir, top_builddir, srcdir"
done_testing
