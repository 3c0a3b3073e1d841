#!/bin/sh
# diskfull.sh - a save that runs out of space fails with NOSPACE (exit 15)
# and leaves the previous checkpoint committed, loadable and verifiable,
# and nothing of the failed save (issue 18: an 83 MB incomplete rank file).
# Needs a small tmpfs: root and permission to mount, else skipped.
. "$top_srcdir/tests/tap.sh"
CK=$top_builddir/checkpoint/hexickpt
GEN=./ckpt_gen
[ -x "$CK" ] && [ -x "$GEN" ] || hard "hexickpt or ckpt_gen not built"
[ "$(id -u)" = 0 ] || skip "needs root to mount a 2 MiB tmpfs"
M=$(mktemp -d "${TMPDIR:-/tmp}/hexickpt-full.XXXXXX") || hard "mktemp"
if ! mount -t tmpfs -o size=2m tmpfs "$M" 2>/dev/null; then
	rmdir "$M"
	skip "mount -t tmpfs is not permitted here"
fi
trap 'umount "$M"; rmdir "$M"' EXIT

check "step 1 (small) fits" "$GEN" save "$M" 1
"$GEN" save "$M" 2 --vocab 4096 --hidden 128 --layers 4 --ffn 512 2>"$M.err"; st=$?
expect_eq "step 2 (6 MiB) on a 2 MiB file system: exit 15 (NOSPACE)" $st 15
check "message says no space" grep -q "No space left" "$M.err"
rm -f "$M.err"
check "the previous checkpoint verifies" "$CK" verify -q "$M"
expect_eq "and is still the latest" "$("$CK" info "$M" | sed -n 's/^step *\([0-9]*\).*/\1/p')" 1
check "with the data of step 1" "$GEN" check "$M" 1
expect_eq "step 2 is not listed (it never left its staging directory)" \
	"$("$CK" ls "$M" | awk '$2 == 2 {print $3}')" ""
# shellcheck disable=SC2010 # lists every entry but the three expected, hidden ones included (-A)
expect_eq "no incomplete rank file or staging directory is left" \
	"$(ls -A "$M" | grep -v -e '^step-00000001$' -e '^latest$' -e '^\.hexickpt\.lock$')" ""
check "after freeing space, step 2 saves" "$GEN" save "$M" 2
check "and verifies" "$CK" verify -q "$M"
done_testing
