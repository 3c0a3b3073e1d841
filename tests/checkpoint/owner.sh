#!/bin/sh
# owner.sh - what one user's files can do to another user's checkpoint
# tools, run for real with an unprivileged user (setpriv) and root, as
# attack.sh: a lock file of the user's own made read-only (the second
# writer ran unlocked and removed the live save's staging directory), a
# user's symlink to root's private checkpoint (root's readers followed it),
# a rank file truncated by its owner while root hashes it (SIGBUS
# through a mapping), and root's import of a user's Hugging Face model
# directory holding the user's links to root's files.  Everything of the
# user's lives in one fresh directory, so this runs beside attack.sh.
. "$top_srcdir/tests/tap.sh"
B=$top_builddir
CK=$B/checkpoint/hexickpt
GEN=$B/tests/checkpoint/ckpt_gen
PLAN=$B/scheduler/hexiplan
[ -x "$CK" ] && [ -x "$GEN" ] && [ -x "$PLAN" ] || hard "hexickpt, ckpt_gen or hexiplan not built"
[ "$(id -u)" = 0 ] || skip "needs root to create a user and run the root side"
command -v setpriv >/dev/null && command -v useradd >/dev/null || skip "setpriv/useradd missing"
A=hxck_alice
id "$A" >/dev/null 2>&1 || useradd -m "$A" >/dev/null 2>&1 || skip "useradd $A failed"
HA=$(getent passwd $A | cut -d: -f6)
as() { u=$1; shift; setpriv --reuid="$u" --regid="$u" --init-groups "$@"; }
T=$(mktemp -d /var/tmp/hexickpt-owner.XXXXXX) || hard "mktemp"
chmod 755 "$T"
U=$(as $A mktemp -d "$HA/owner.XXXXXX") || hard "mktemp as $A"
cleanup() {
	exec 3>&-
	rm -rf "$T" "$U"
}
trap cleanup EXIT
as $A test -x "$GEN" || skip "ckpt_gen not executable by $A (build directory permissions)"
"$PLAN" plan "$top_srcdir/examples/clusters/cpu-1x4.json" --model tiny-4l -o "$T/B.json" >/dev/null 2>&1 || hard "hexiplan"
chmod 644 "$T/B.json"

# 1. the user's own lock file made read-only while a save of theirs holds
#    it: a second writer must neither run unlocked (a read-only descriptor
#    cannot take the write lock: F_OFD_SETLK fails with EBADF, once taken
#    for "no locks here") nor remove the live save's staging directory as
#    a leftover
as $A mkdir "$U/lk"
mkfifo -m 0666 "$T/hold"
as $A "$GEN" prepare "$U/lk" 1 <"$T/hold" >"$T/p1" 2>&1 &
exec 3>"$T/hold"
for _ in $(seq 1 300); do
	grep -q '^\.step-' "$T/p1" && break
	sleep 0.1
done
stage=$(head -n 1 "$T/p1")
check "$A's first writer holds the lock (staging $stage)" test -d "$U/lk/$stage"
as $A chmod 0444 "$U/lk/.hexickpt.lock"
as $A "$GEN" prepare "$U/lk" 2 </dev/null >"$T/p2" 2>&1; st=$?
sed 's/^/# /' "$T/p2"
expect_eq "a second writer with $A's lock file read-only: refused (exit 14)" $st 14
check "message: the lock file is not writable, and what to do" grep -q "not writable.*chmod u+w" "$T/p2"
check "the live save's staging directory is still there" test -d "$U/lk/$stage"
exec 3>&-
wait
as $A "$GEN" prepare "$U/lk" 3 </dev/null >"$T/p3" 2>&1; st=$?
expect_eq "no holder, the lock file still read-only: refused as well (exit 14)" $st 14
check "the staging directory is kept (no cleanup without the lock)" test -d "$U/lk/$stage"
as $A chmod 0644 "$U/lk/.hexickpt.lock"
check "lock file writable again: the next writer saves" as $A "$GEN" save "$U/lk" 4 --tp 1
check "and removed the dead save's staging directory" test ! -e "$U/lk/$stage"

# 2. a user's symlink to root's private checkpoint: root's readers do not
#    follow it (hexiscale-ckpt(5) SECURITY: a symlink only when root or the
#    caller owns it), so root's data never lands in a file the user reads;
#    root's own symlink and the user's own symlink (for the user) still work
RS=$T/rootsecret
mkdir -m 0700 "$RS"
"$GEN" save "$RS/ck" 1 --tp 1 >/dev/null 2>&1 || hard "root's fixture save"
as $A ln -s "$RS/ck" "$U/lnk"
for c in info verify ls; do
	"$CK" $c "$U/lnk" >"$T/out" 2>&1; st=$?
	expect_eq "root hexickpt $c through $A's symlink to root's checkpoint: refused (exit 14)" $st 14
	check "message: $c names the symlink's owner" grep -q "symlink owned by uid $(id -u $A)" "$T/out"
done
"$CK" export "$U/lnk" -o "$U/out.h5" >"$T/out" 2>&1; st=$?
expect_eq "root export through it into $A's directory: refused (exit 14)" $st 14
check "no export file written" test ! -e "$U/out.h5"
as $A mkdir "$U/rs"
"$CK" reshard "$U/lnk" --plan "$T/B.json" -o "$U/rs" >"$T/out" 2>&1; st=$?
expect_eq "root reshard from it: refused (exit 14)" $st 14
"$CK" verify "$U/lnk/step-00000001" >"$T/out" 2>&1; st=$?
expect_eq "root verify of a step directory below it: refused (exit 14)" $st 14
ln -s "$RS/ck" "$T/rootlnk"
check "root's own symlink is followed" "$CK" verify -q "$T/rootlnk"
as $A "$GEN" save "$U/own" 1 --tp 1 >/dev/null 2>&1 || hard "$A's fixture save"
as $A ln -s "$U/own" "$U/mylnk"
check "$A's own symlink works for $A (verify)" as $A "$CK" verify -q "$U/mylnk"
check "and for $A's ls" as $A "$CK" ls "$U/mylnk"

# 3. the rank file's owner truncates it while it is hashed (by root, and
#    by the owner's own verify): an error, never SIGBUS (the hash read the
#    file through a mapping).  The file is sparse (no disk space); the
#    truncation waits until verify has it open, i.e. is hashing its 3 GiB.
has_open() {
	for f in /proc/"$1"/fd/*; do
		[ "$(readlink "$f" 2>/dev/null)" = "$2" ] && return 0
	done
	return 1
}
as $A "$GEN" save "$U/big" 1 --tp 1 >/dev/null 2>&1 || hard "$A's fixture save"
BS=$U/big/step-00000001
as $A cp "$BS/rank-00000.h5" "$U/rank0.orig"
as $A /usr/bin/python3 -c "import json,sys; p=sys.argv[1]; d=json.load(open(p)); d['files'][0]['bytes']=3<<30; json.dump(d, open(p,'w'))" "$BS/MANIFEST.json" || hard "manifest edit"
for who in root $A; do
	as $A sh -c "cp '$U/rank0.orig' '$BS/rank-00000.h5' && truncate -s 3G '$BS/rank-00000.h5'"
	# (setpriv itself, not the function: $! must be hexickpt's pid)
	if [ $who = root ]; then
		"$CK" verify "$U/big" >"$T/out" 2>&1 &
	else
		setpriv --reuid="$A" --regid="$A" --init-groups "$CK" verify "$U/big" >"$T/out" 2>&1 &
	fi
	vp=$!
	for _ in $(seq 1 1000); do
		has_open $vp "$BS/rank-00000.h5" && break
		sleep 0.01
	done
	alive=$(kill -0 $vp 2>/dev/null && echo yes)
	as $A truncate -s 4096 "$BS/rank-00000.h5"
	wait $vp; st=$?
	sed 's/^/# /' "$T/out"
	expect_eq "$who's verify still ran, the 3 GiB rank file open, when $A truncated it" "$alive" yes
	check "$who's verify fails with an error, not a signal (exit $st)" test $st -ne 0 -a $st -lt 128
	check "message names the rank file" grep -q "rank-00000.h5" "$T/out"
done
# 4. root imports a user's Hugging Face model directory: the user's
#    symlink to root's private weights or config is refused (import read
#    them with a plain open), a FIFO behind the user's own link is refused
#    without waiting, and the Hugging Face cache's layout (snapshots/REV/
#    NAME -> ../../blobs/HASH, links and files all the user's) imports
"$GEN" save-plan "$RS/hs" 1 "$T/B.json" >/dev/null 2>&1 || hard "root's save-plan"
"$CK" export "$RS/hs" --format hf -o "$RS/hf" -q || hard "root's export --format hf"
chmod 0600 "$RS/hf/config.json" "$RS/hf/model.safetensors"
as $A "$GEN" save-plan "$U/hs" 1 "$T/B.json" >/dev/null 2>&1 || hard "$A's save-plan"
as $A "$CK" export "$U/hs" --format hf -o "$U/hfown" -q || hard "$A's export --format hf"
as $A mkdir "$U/hfa" "$U/hfc" "$U/hff"
as $A cp "$U/hfown/config.json" "$U/hfa/config.json"
as $A ln -s "$RS/hf/model.safetensors" "$U/hfa/model.safetensors"
"$CK" import "$U/hfa" -o "$U/imp1" >"$T/out" 2>&1; st=$?
sed 's/^/# /' "$T/out"
expect_eq "root import of $A's link to root's 0600 safetensors: refused (exit 14)" $st 14
check "message: the link's owner and the file's" grep -q "model.safetensors: a symlink owned by uid $(id -u $A) to a file of uid 0" "$T/out"
check "nothing written" test ! -e "$U/imp1"
as $A cp "$U/hfown/model.safetensors" "$U/hfc/model.safetensors"
as $A ln -s "$RS/hf/config.json" "$U/hfc/config.json"
"$CK" import "$U/hfc" -o "$U/imp2" >"$T/out" 2>&1; st=$?
expect_eq "root import of $A's link to root's 0600 config.json: refused (exit 14)" $st 14
check "message names config.json" grep -q "config.json: a symlink owned by uid $(id -u $A)" "$T/out"
check "nothing written" test ! -e "$U/imp2"
as $A cp "$U/hfown/config.json" "$U/hff/config.json"
as $A mkfifo "$U/fifo"
as $A ln -s "$U/fifo" "$U/hff/model.safetensors"
timeout 60 "$CK" import "$U/hff" -o "$U/imp3" >"$T/out" 2>&1; st=$?
expect_eq "root import of $A's link to $A's FIFO: refused at once (exit 4)" $st 4
check "message: not a regular file" grep -q "model.safetensors: not a regular file" "$T/out"
# ... and never opened: a writer waiting in open(2) on the FIFO goes on at
# the first reader (import opened it O_NONBLOCK before its fstat; opening a
# device runs its driver: /dev/watchdog starts counting).  Behind the
# user's link and as the file itself.
never_opened() { # DIR FIFO LABEL
	rm -f "$U/opened"
	as $A sh -c 'exec 4>"$1" && : >"$2/opened"' sh "$2" "$U" 2>/dev/null &
	wpid=$!
	timeout 60 "$CK" import "$1" -o "$U/imp4" >"$T/out" 2>&1; st=$?
	sleep 0.5
	expect_eq "root import of $A's FIFO ($3): refused (exit 4)" $st 4
	check "$3: never opened (its waiting writer still waits)" test ! -e "$U/opened"
	# a reader lets the writer go: it ends (and the check above could fail)
	timeout 10 sh -c ': <"$1"' sh "$2"
	wait "$wpid"
	check "$3: the writer went on once a reader came" test -e "$U/opened"
}
as $A mkfifo "$U/fifo2"
as $A ln -sfn "$U/fifo2" "$U/hff/model.safetensors"
never_opened "$U/hff" "$U/fifo2" "behind $A's link"
as $A mkdir "$U/hfd"
as $A cp "$U/hfown/config.json" "$U/hfd/config.json"
as $A mkfifo "$U/hfd/model.safetensors"
never_opened "$U/hfd" "$U/hfd/model.safetensors" "the file itself"
# a hard link in the user's directory to root's private file (anyone can
# make one where fs.protected_hardlinks=0; root makes it here): refused
as $A mkdir "$U/hfh"
as $A cp "$U/hfown/config.json" "$U/hfh/config.json"
cp "$RS/hf/model.safetensors" "$U/root-weights" && chmod 0600 "$U/root-weights"
ln "$U/root-weights" "$U/hfh/model.safetensors" || hard "ln"
"$CK" import "$U/hfh" -o "$U/imp5" >"$T/out" 2>&1; st=$?
expect_eq "root import of a hard link to root's 0600 file in $A's directory: refused (exit 14)" $st 14
check "message: a hard link, both owners" grep -q "model.safetensors: a hard link to a file of uid 0 in a directory of uid $(id -u $A)" "$T/out"
check "nothing written" test ! -e "$U/imp5"
# root's relative symlink hard-linked into the user's directory (anyone can
# where fs.protected_hardlinks=0; root makes it here): its text resolves
# there, through the user's own link to root's private config; root's
# link, but judged as the directory owner's, so refused
mkdir "$U/rootdir" && ln -s cfg.json "$U/rootdir/l" || hard "root's link"
as $A mkdir "$U/hfr"
as $A cp "$U/hfown/model.safetensors" "$U/hfr/model.safetensors"
ln -P "$U/rootdir/l" "$U/hfr/config.json" || hard "ln -P"
as $A ln -s "$RS/hf/config.json" "$U/hfr/cfg.json"
"$CK" import "$U/hfr" -o "$U/imp6" >"$T/out" 2>&1; st=$?
expect_eq "root import through root's symlink hard-linked into $A's directory: refused (exit 14)" $st 14
check "message: hard-linked, the directory's owner" grep -q "config.json: a symlink hard-linked into a directory of uid $(id -u $A)" "$T/out"
check "nothing written" test ! -e "$U/imp6"
as $A mkdir "$U/hfl"
as $A cp "$U/hfown/config.json" "$U/hfl/config.json"
as $A ln "$U/hfown/model.safetensors" "$U/hfl/model.safetensors"
check "root imports $A's hard link to $A's own file" "$CK" import "$U/hfl" -o "$T/impl" -q
as $A mkdir -p "$U/hub/blobs" "$U/hub/snapshots/r1"
as $A cp "$U/hfown/config.json" "$U/hub/blobs/c0ffee"
as $A cp "$U/hfown/model.safetensors" "$U/hub/blobs/beef00"
as $A ln -s ../../blobs/c0ffee "$U/hub/snapshots/r1/config.json"
as $A ln -s ../../blobs/beef00 "$U/hub/snapshots/r1/model.safetensors"
check "root imports $A's Hugging Face cache snapshot (links to $A's own blobs)" \
	"$CK" import "$U/hub/snapshots/r1" -o "$T/impc" -q
check "and the import verifies" "$CK" verify -q "$T/impc"
check "$A imports it too" as $A "$CK" import "$U/hub/snapshots/r1" -o "$U/impa" -q
"$CK" export "$T/impc" --format hf -o "$T/hfback" -q || hard "export of the import"
expect_eq "root's import of the cache holds $A's tensors" "$(cmp -s "$T/hfback/model.safetensors" "$U/hfown/model.safetensors" && echo same)" same
done_testing
