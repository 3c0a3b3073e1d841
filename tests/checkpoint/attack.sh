#!/bin/sh
# attack.sh - issue 18's attacks on checkpoints by unprivileged users, run
# for real: users created here, their commands run with setpriv, the root
# side (hexickpt reshard / export / ls / verify on a user's directory) as
# root.  Locally: the root side is a command an admin runs, not a job.
# The attacks between users as Slurm jobs of unprivileged users (a planted
# step directory, two jobs on one directory) are tests/e2e/attack.sh.
. "$top_srcdir/tests/tap.sh"
B=$top_builddir
CK=$B/checkpoint/hexickpt
GEN=$B/tests/checkpoint/ckpt_gen
TRAIN=$B/runtime/hexitrain
PLAN=$B/scheduler/hexiplan
[ -x "$CK" ] && [ -x "$GEN" ] && [ -x "$PLAN" ] || hard "hexickpt, ckpt_gen or hexiplan not built"
[ "$(id -u)" = 0 ] || skip "needs root to create users and run the root side"
command -v setpriv >/dev/null && command -v useradd >/dev/null || skip "setpriv/useradd missing"
A=hxck_alice
O=hxck_bob
for u in $A $O; do
	id "$u" >/dev/null 2>&1 || useradd -m "$u" >/dev/null 2>&1 || skip "useradd $u failed"
done
HA=$(getent passwd $A | cut -d: -f6)
as() { u=$1; shift; setpriv --reuid="$u" --regid="$u" --init-groups "$@"; }
T=$(mktemp -d /var/tmp/hexickpt-attack.XXXXXX) || hard "mktemp"
chmod 755 "$T"
SH=$T/shared
mkdir -m 1777 "$SH"
cleanup() {
	rm -rf "$T" "$HA/src" "$HA/dst" "$HA/dst2" "$HA/dst3" "$HA/out.h5" "$HA/precious" "$HA/r1" "$HA/m2.json" "$HA/hfx" "$HA/imp" "$HA/hfl"
	[ -c /dev/null ] || { rm -f /dev/null; mknod -m 666 /dev/null c 1 3; }
}
trap cleanup EXIT
# the binaries must be reachable for the users
as $A test -x "$GEN" || skip "ckpt_gen not executable by $A (build directory permissions)"

SECRET=$T/root-only
printf 'root secret\n' > "$SECRET"; chmod 600 "$SECRET"
"$PLAN" plan "$top_srcdir/examples/clusters/cpu-1x4.json" --model tiny-4l -o "$T/B.json" >/dev/null 2>&1 || hard "hexiplan"
chmod 644 "$T/B.json"

# 1. root reshards a user's checkpoint into a directory where the user
#    planted symlinks to a root-only file (finding 1)
check "$A saves a checkpoint" as $A "$GEN" save-plan "$HA/src" 7 "$T/B.json"
as $A sh -c "mkdir -p '$HA/dst/step-00000007' && for r in 0 1 2 3; do ln -s '$SECRET' $HA/dst/step-00000007/rank-0000\$r.h5; done"
"$CK" reshard "$HA/src" --plan "$T/B.json" -o "$HA/dst" >"$T/out" 2>&1; st=$?
expect_eq "root reshard into a step directory the user planted: refused (exit 14)" $st 14
check "message: not a directory of root's" grep -q "owned by uid .*not a directory of yours" "$T/out"
expect_eq "the root-only file is untouched" "$(cat "$SECRET")" "root secret"
as $A ln -s "$T" "$HA/dst3"
"$CK" reshard "$HA/src" --plan "$T/B.json" -o "$HA/dst3" >"$T/out" 2>&1; st=$?
expect_eq "root reshard into a user's symlink to a root directory: refused (exit 14)" $st 14
check "message: symlink owned by the user" grep -q "symlink owned by uid" "$T/out"
# shellcheck disable=SC2010 # counts every entry whose name has "step", whatever the rest
expect_eq "nothing created in the root directory" "$(ls -A "$T" | grep -c step)" 0
as $A mkdir "$HA/dst2"
check "root reshard into a user's empty directory works" "$CK" reshard "$HA/src" --plan "$T/B.json" -o "$HA/dst2"
check "and verifies" "$CK" verify -q "$HA/dst2"
# shellcheck disable=SC2010 # counts every entry named .step-*, hidden ones included (-A)
expect_eq "the root-owned staging left nothing behind" "$(ls -A "$HA/dst2" | grep -c '^\.step-')" 0

# 2. between users: a pre-created 0777 step directory with a symlink in a
#    shared checkpoint directory (finding 1, second case)
as $A sh -c "printf mine > '$HA/precious'"
as $A mkdir -m 0777 "$SH/ck"
as $O sh -c "mkdir -m 0777 '$SH/ck/step-00000001' && ln -s '$HA/precious' '$SH/ck/step-00000001/rank-00000.h5'"
as $A "$GEN" save "$SH/ck" 1 --tp 1 >"$T/out" 2>&1; st=$?
expect_eq "$A's save into $O's 0777 step directory: refused (exit 14)" $st 14
check "message names the other owner" grep -q "owned by uid $(id -u $O)" "$T/out"
expect_eq "$A's own file is untouched" "$(cat "$HA/precious")" mine
if [ -x "$TRAIN" ]; then
	as $A "$TRAIN" --steps 1 --save-every 1 --ckpt-dir "$SH/ck" >"$T/out" 2>&1; st=$?
	check "hexitrain --save-every 1 into it: fails" test $st -ne 0
	expect_eq "and $A's file is still untouched" "$(cat "$HA/precious")" mine
fi
# a lock file of another user: the directory is someone else's save
as $O sh -c "mkdir -m 0777 '$SH/ck2' && printf 'host=h pid=1 job=9 user=$O\n' > '$SH/ck2/.hexickpt.lock'"
as $A "$GEN" save "$SH/ck2" 1 --tp 1 >"$T/out" 2>&1; st=$?
expect_eq "$A saving where $O holds the lock file: refused (exit 14)" $st 14
check "message names the holder" grep -q "user=$O" "$T/out"

# 3. root exports to a user's path: a planted symlink is replaced, never
#    followed; /dev/null is refused and stays a device (findings 1, 4)
as $A ln -s "$SECRET" "$HA/out.h5"
check "root export onto a user's symlink" "$CK" export "$HA/src" -o "$HA/out.h5"
expect_eq "the root-only file is untouched" "$(cat "$SECRET")" "root secret"
check "out.h5 is now a regular file" test -f "$HA/out.h5" -a ! -L "$HA/out.h5"
"$CK" export "$HA/src" -o /dev/null >"$T/out" 2>&1; st=$?
expect_eq "export -o /dev/null: refused (exit 4)" $st 4
check "/dev/null is still a character device" test -c /dev/null

# 3a. root exports --format hf into a user's directory where the user
#     planted config.json and model.safetensors: a symlink to a character
#     device (written through before: the in-place write meant for
#     -o /dev/stdout), a FIFO with no reader; both are replaced, nothing
#     written through them, nothing waits.  An output below the user's
#     symlink is refused before anything is created.  Root's import into a
#     user's directory holding a planted model.json is refused (not a new
#     directory).
as $A mkdir "$HA/hfx"
as $A ln -s /dev/null "$HA/hfx/config.json"
as $A mkfifo "$HA/hfx/model.safetensors"
timeout 60 "$CK" export "$HA/src" --format hf -o "$HA/hfx" -q >"$T/out" 2>&1; st=$?
expect_eq "root export --format hf into planted names: exit 0" $st 0
check "/dev/null is still a character device" test -c /dev/null
check "config.json is now a regular file" test -f "$HA/hfx/config.json" -a ! -L "$HA/hfx/config.json"
check "model.safetensors is now a regular file" test -f "$HA/hfx/model.safetensors" -a ! -p "$HA/hfx/model.safetensors"
# export -o below the user's symlink to a root directory: refused, and
# nothing created there (the output directory was made by path, through
# the symlink, before the path was checked)
mkdir -m 755 "$T/victim"
as $A ln -s "$T/victim" "$HA/hfl"
"$CK" export "$HA/src" --format hf -o "$HA/hfl/hfdir" -q >"$T/out" 2>&1; st=$?
expect_eq "root export --format hf below a user's symlink to a root directory: refused (exit 14)" $st 14
check "message: symlink owned by the user" grep -q "'hfl' is a symlink owned by uid $(id -u $A)" "$T/out"
check "nothing created in the root directory" test ! -e "$T/victim/hfdir"
as $A mkdir "$HA/imp"
as $A ln -s "$SECRET" "$HA/imp/model.json"
"$CK" import "$HA/hfx" -o "$HA/imp" -q >"$T/out" 2>&1; st=$?
expect_eq "root import into a user's directory holding model.json: refused (exit 4)" $st 4
expect_eq "the root-only file is untouched" "$(cat "$SECRET")" "root secret"

# 3b. a format-1 manifest (no whole-file checksums) of a user: root does
#     not let libhdf5 parse it unless asked; verify says what it could check
S7=$HA/src/step-00000007
as $A cp "$S7/MANIFEST.json" "$HA/m2.json"
as $A /usr/bin/python3 -c "import json,sys; p=sys.argv[1]; d=json.load(open(p)); d['version']=1; [f.pop('xxh64') for f in d['files']]; [s.pop('offset') for t in d['tensors'] for s in t['slices']]; [b.pop('offset') for b in d['blobs']]; json.dump(d, open(p,'w'))" "$S7/MANIFEST.json"
"$CK" verify "$HA/src" >"$T/out" 2>&1; st=$?
expect_eq "root verify of a user's format-1 checkpoint: refused (exit 14)" $st 14
check "message says why" grep -q "no whole-file checksums" "$T/out"
check "with --allow-unchecked it verifies" "$CK" verify --allow-unchecked "$HA/src"
check "and says the file check was not possible" sh -c "'$CK' verify --allow-unchecked '$HA/src' | grep -q 'whole-file check not possible'"
check "$A's own resume-side open of it works" as $A "$CK" verify "$HA/src"
as $A cp "$HA/m2.json" "$S7/MANIFEST.json"
check "format 3 again: verify says files were checked" sh -c "'$CK' verify '$HA/src' | grep -q 'whole-file xxh64 checked before HDF5'"

# 4. FIFOs planted by the user: root's hexickpt never hangs (finding 3)
as $A sh -c "mv '$S7/MANIFEST.json' '$S7/M.bak' && mkfifo '$S7/MANIFEST.json'"
for c in "info" "verify" "ls"; do
	timeout 20 "$CK" $c "$HA/src" >/dev/null 2>&1; st=$?
	check "FIFO MANIFEST.json: hexickpt $c returns (no hang, exit $st)" test $st -ne 124
done
as $A sh -c "rm '$S7/MANIFEST.json' && mv '$S7/M.bak' '$S7/MANIFEST.json' && rm -f '$HA/src/latest' && mkfifo '$HA/src/latest'"
timeout 20 "$CK" verify "$HA/src" >/dev/null 2>&1; st=$?
expect_eq "FIFO latest: verify refuses at once (exit 4)" $st 4
as $A sh -c "rm '$HA/src/latest' && mv '$S7/rank-00001.h5' '$HA/r1' && mkfifo '$S7/rank-00001.h5'" 2>/dev/null
timeout 20 "$CK" verify "$HA/src" >/dev/null 2>&1; st=$?
check "FIFO rank file: verify refuses at once (exit $st)" test $st -ne 124 -a $st -ne 0

# 5. two jobs of one user saving into one directory at once (finding 2)
if [ -x "$TRAIN" ]; then
	# The first writer runs long (it keeps the last 2 checkpoints) and the
	# second starts only once the first has committed one, so the two
	# overlap however loaded the machine is; SIGTERM then makes the first
	# commit and stop (exit 75, hexitrain(1)).
	as $A mkdir -p "$HA/dst/two"
	# (setpriv itself, not the function: $! must be hexitrain's pid)
	setpriv --reuid="$A" --regid="$A" --init-groups "$TRAIN" --steps 100000 \
		--save-every 1 --keep 2 --ckpt-dir "$HA/dst/two" >"$T/t1" 2>&1 &
	p1=$!
	for _ in $(seq 1 600); do
		ls -d "$HA"/dst/two/step-* >/dev/null 2>&1 && break
		sleep 0.1
	done
	as $A "$TRAIN" --steps 6 --save-every 1 --ckpt-dir "$HA/dst/two" --seed 99 >"$T/t2" 2>&1; s2=$?
	kill -TERM $p1 2>/dev/null
	wait $p1; s1=$?
	kill -KILL $p1 2>/dev/null
	tail -n 3 "$T/t1" "$T/t2" | sed 's/^/# /'
	expect_eq "two hexitrain on one directory: the second fails, the first stops on SIGTERM (75)" "$s1 $((s2 != 0))" "75 1"
	# hexitrain takes the writer lock of an existing --ckpt-dir before
	# its first step (hexitrain(1), DECISIONS 189), so the second is
	# refused at its start, naming the holder.
	check "the failure names the holder" sh -c "grep -h 'another writer holds' '$T/t2' | grep -q 'pid='"
	check "refused before its first step" sh -c "! grep -q '^step' '$T/t2'"
	check "every committed checkpoint verifies" sh -c "for s in '$HA'/dst/two/step-*; do '$CK' verify -q \"\$s\" >/dev/null || exit 1; done"
fi
done_testing
