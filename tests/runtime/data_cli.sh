#!/bin/sh
# Real data (issue 14.1, 14.2, 14.4): the three commands from text to a
# training run (a SentencePiece model trained here on the machine's licence
# texts, tokenize.py, hexitrain), validation loss, the data position across
# a resume with another global batch, the learning-rate schedule across a
# resume, --keep, and SIGUSR1/SIGTERM stops that commit a checkpoint and
# resume with no step lost (one process and 2 MPI ranks).
. "$top_srcdir/tests/runtime/rt_env.sh"
PY=/usr/bin/python3
TOK="$top_srcdir/examples/tokenize.py"
CK="$top_builddir/checkpoint/hexickpt"

# 0. tokenize.py alone (no hexitrain, no licence texts, no sentencepiece).
# Two small files: CR LF, CR, a blank line, UTF-8, a byte that is not
# UTF-8, the first file without a final line break.
printf 'Hello, world!\r\nsecond line \303\251\342\202\254 end\n\nno line break at the end' >"$WORK/c1.txt"
printf '\377 not UTF-8\rold Mac line\n\346\227\245\346\234\254\350\252\236\n' >"$WORK/c2.txt"
$PY "$TOK" --bytes -o "$WORK/small.tok" --val-fraction 0.25 "$WORK/c1.txt" \
	"$WORK/c2.txt" >/dev/null 2>&1 || fail "tokenize.py --bytes on two small files"
# sha256 of both files as the implementation before streaming wrote them
# (one Python int per token, the whole corpus in memory)
expect_eq "--bytes: token file identical to the whole-corpus implementation's" \
	"$(sha256sum <"$WORK/small.tok" | cut -c1-64)" \
	1495ecafc51605c7d49c59c9bd77a6e71c5ad422b9fa6c184866a54f8089c71d
expect_eq "--bytes: validation file identical too" \
	"$(sha256sum <"$WORK/small.val.tok" | cut -c1-64)" \
	c41a16b49323dbe8879f0d97a5edbaee560302715494c673f5cfee9190c774a5
# peak_kb CMD...: CMD's peak resident memory in KiB (-1 if CMD failed)
peak_kb() {
	$PY -c 'import resource, subprocess, sys
rc = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if rc == 0 else -1)' "$@"
}
# ~50 MB of text: streamed, the memory is a few chunks, not the corpus (the
# whole-corpus implementation held ~30 bytes per byte of text)
cat "$WORK/c1.txt" "$WORK/c2.txt" >"$WORK/big50.txt"
i=0
while [ $i -lt 19 ]; do
	cat "$WORK/big50.txt" "$WORK/big50.txt" >"$WORK/big50.2" &&
		mv "$WORK/big50.2" "$WORK/big50.txt"
	i=$((i + 1))
done
size=$(wc -c <"$WORK/big50.txt")
kb=$(peak_kb $PY "$TOK" --bytes -o "$WORK/big50.tok" "$WORK/big50.txt")
echo "# --bytes on $size bytes of text: peak RSS $kb KiB"
[ "$kb" -gt 0 ] && [ "$kb" -lt $((30 * 1024 + size / 2048)) ] &&
	pass "--bytes on $((size >> 20)) MiB: peak RSS under 30 MiB + half the corpus" ||
	fail "--bytes on $size bytes: peak RSS $kb KiB"
expect_eq "... its header counts every byte" \
	"$(od -An -tu4 -j8 -N4 "$WORK/big50.tok" | tr -d ' ')" "$size"
check "... each token is its byte" $PY -c 'import sys
t, c = open(sys.argv[1], "rb"), open(sys.argv[2], "rb")
t.seek(1024)
while True:
    b = c.read(1 << 20)
    x = t.read(2 * len(b))
    if x[0::2] != b or x[1::2].strip(b"\0"):
        sys.exit(1)
    if not b:
        sys.exit(1 if t.read() else 0)' "$WORK/big50.tok" "$WORK/big50.txt"
rm -f "$WORK/big50.tok"
# tok_err NAME STATUS PATTERN CMD...: CMD fails with STATUS, and its
# stderr is one line "tokenize.py: " PATTERN (a BRE), no traceback
tok_err() {
	local name=$1 want=$2 pat=$3 st
	shift 3
	"$@" >/dev/null 2>"$WORK/tok.err"
	st=$?
	if [ "$st" = "$want" ] && [ "$(wc -l <"$WORK/tok.err")" -eq 1 ] &&
		grep -q "^tokenize.py: $pat" "$WORK/tok.err"; then
		pass "tokenize.py $name: exit $want, one line"
	else
		fail "tokenize.py $name: exit $st, want $want and '$pat': $(head -c 400 "$WORK/tok.err")"
	fi
}
tok() { $PY "$TOK" "$@"; }
tok_err "a missing file" 1 "$WORK/nosuch.txt: No such file or directory$" \
	tok --bytes -o "$WORK/e.tok" "$WORK/c1.txt" "$WORK/nosuch.txt"
tok_err "a directory to read" 1 "$WORK: Is a directory$" tok --bytes -o "$WORK/e.tok" "$WORK"
if [ "$(id -u)" -ne 0 ]; then
	cp "$WORK/c1.txt" "$WORK/locked.txt" && chmod 000 "$WORK/locked.txt"
	tok_err "an unreadable file" 1 "$WORK/locked.txt: Permission denied$" \
		tok --bytes -o "$WORK/e.tok" "$WORK/locked.txt"
fi
tok_err "OUTPUT in a missing directory" 1 "$WORK/no/e.tok: No such file or directory$" \
	tok --bytes -o "$WORK/no/e.tok" "$WORK/c1.txt"
tok_err "OUTPUT a directory" 1 "$WORK: Is a directory$" tok --bytes -o "$WORK" "$WORK/c1.txt"
# A disk full: /dev/full.  Never the system's own as root: the rename of
# the implementation before this one replaced the device node with the
# token file (/dev/null, /dev/stdout too).
full=/dev/full
if [ "$(id -u)" -eq 0 ]; then
	full=$WORK/full
	mknod "$full" c 1 7 || full=
fi
[ -n "$full" ] && [ -c "$full" ] && tok_err "OUTPUT /dev/full (disk full)" 1 \
	"$full: No space left on device$" tok --bytes -o "$full" "$WORK/c1.txt"
# as root: a block device is never written (a user's link to /dev/sdX
# would have had the tokens written over the disk), and another user's
# link is replaced, not written through
if [ "$(id -u)" -eq 0 ] && mknod "$WORK/blk" b 7 250 2>/dev/null; then
	tok_err "OUTPUT a block device" 1 "$WORK/blk: a block device, not written$" \
		tok --bytes -o "$WORK/blk" "$WORK/c1.txt"
	echo "root's file" >"$WORK/rootfile"
	ln -s "$WORK/rootfile" "$WORK/ulink.tok" && chown -h 65534 "$WORK/ulink.tok" || hard "chown -h"
	tok --bytes -o "$WORK/ulink.tok" "$WORK/c1.txt" >/dev/null 2>&1 ||
		fail "tokenize.py -o another user's link: exit $?"
	[ "$(cat "$WORK/rootfile")" = "root's file" ] && [ -f "$WORK/ulink.tok" ] && [ ! -L "$WORK/ulink.tok" ] &&
		pass "-o another user's link: the link replaced, its target untouched" ||
		fail "-o another user's link: written through it"
	ln -s "$WORK/ownfile.tok" "$WORK/olink.tok" || hard "ln -s"
	tok --bytes -o "$WORK/olink.tok" "$WORK/c1.txt" >/dev/null 2>&1 &&
		[ -L "$WORK/olink.tok" ] && [ -s "$WORK/ownfile.tok" ] &&
		pass "-o our own link: the file it names is written, the link kept" ||
		fail "-o our own link"
fi
mkfifo "$WORK/fifo" || hard "mkfifo"
tok_err "--val-fraction with OUTPUT not a regular file" 2 "--val-fraction: " \
	tok --bytes -o "$WORK/fifo" --val-fraction 0.5 "$WORK/c1.txt"
# a file size limit (EFBIG, as a full disk): the old file stays as it was
cp "$WORK/small.tok" "$WORK/keep.tok"
cat "$WORK/c1.txt" "$WORK/c1.txt" "$WORK/c1.txt" >"$WORK/c3.txt"
for _ in 1 2 3 4 5 6 7; do cat "$WORK/c3.txt"; done >"$WORK/c21.txt"
for _ in 1 2 3 4 5 6 7 8 9 10; do cat "$WORK/c21.txt"; done >"$WORK/c210.txt"
tok_err "a write error (ulimit -f)" 1 "$WORK/keep.tok: File too large$" \
	sh -c 'ulimit -f 8 && exec "$@"' sh $PY "$TOK" --bytes -o "$WORK/keep.tok" "$WORK/c210.txt"
check "... the file it would have replaced is unchanged" cmp -s "$WORK/small.tok" "$WORK/keep.tok"
tok_err "--val-fraction nan" 2 "--val-fraction: 'nan' is not a number in \[0, 1)$" \
	tok --bytes -o "$WORK/e.tok" --val-fraction nan "$WORK/c1.txt"
tok_err "--val-fraction 1" 2 "--val-fraction: " tok --bytes -o "$WORK/e.tok" --val-fraction 1 "$WORK/c1.txt"
tok_err "--vocab 0" 2 "--vocab: " tok --train-spm "$WORK/x" --vocab 0 "$WORK/c1.txt"
tok_err "--vocab 1e3" 2 "--vocab: " tok --train-spm "$WORK/x" --vocab 1e3 "$WORK/c1.txt"
tok_err "no -o" 2 "-o: " tok --bytes "$WORK/c1.txt"
tok_err "an unknown option" 2 "unrecognized arguments: --nope$" tok --bytes --nope -o "$WORK/e.tok" "$WORK/c1.txt"
tok_err "no mode" 2 "one of the arguments" tok -o "$WORK/e.tok" "$WORK/c1.txt"
# with or without python3-sentencepiece: one line, exit 1
tok_err "--spm a missing model" 1 "" tok --spm "$WORK/nosuch.model" -o "$WORK/e.tok" "$WORK/c1.txt"
tok_err "--spm a text file as the model" 1 "" tok --spm "$WORK/c1.txt" -o "$WORK/e.tok" "$WORK/c1.txt"
tok_err "--train-spm a missing file" 1 "" tok --train-spm "$WORK/x" "$WORK/nosuch.txt"
[ ! -e "$WORK/e.tok" ] && [ -z "$(find "$WORK" -name '.tokenize.*')" ] &&
	pass "the failed runs left no token file, no temporary file" ||
	fail "left behind: $(ls -A "$WORK")"
# a pipe (as -o /dev/stdout | ...): written into, not replaced
cat "$WORK/fifo" >"$WORK/piped.tok" &
reader=$!
tok --bytes -o "$WORK/fifo" "$WORK/c1.txt" "$WORK/c2.txt" >/dev/null 2>&1
i=0
while kill -0 $reader 2>/dev/null && [ $i -lt 50 ]; do
	sleep 0.1
	i=$((i + 1))
done
kill $reader 2>/dev/null # the pipe was replaced: the reader never got a writer
tok --bytes -o "$WORK/direct.tok" "$WORK/c1.txt" "$WORK/c2.txt" >/dev/null 2>&1
[ -p "$WORK/fifo" ] && cmp -s "$WORK/piped.tok" "$WORK/direct.tok" &&
	pass "-o a named pipe: the token file written into it" ||
	fail "-o a named pipe: $(ls -l "$WORK/fifo")"

"$HT" --steps 1 --save-every 1 --ckpt-dir "$WORK/probe" >/dev/null 2>&1
[ $? -eq 9 ] && skip "hexitrain built without the checkpoint library"
TEXT=/usr/share/common-licenses
[ -r $TEXT/GPL-3 ] && [ -r $TEXT/Apache-2.0 ] || skip "no licence texts"
cat >"$WORK/m.json" <<'EOT'
{"format": "hexiscale-model", "version": 1, "name": "tiny-spm",
 "layers": 2, "hidden": 48, "heads": 6, "kv_heads": 6, "ffn": 128,
 "vocab": 256, "seq_len": 32}
EOT
M="--model $WORK/m.json"

# SentencePiece's side of tokenize.py, given $WORK/spm.model
spm_checks() {
	# the TEXT files went to the trainer joined by commas, which it split
	cp $TEXT/GPL-3 "$WORK/GPL,3.txt"
	$PY "$TOK" --train-spm "$WORK/spm2" --vocab 256 "$WORK/GPL,3.txt" \
		$TEXT/Apache-2.0 >"$WORK/tok2.out" 2>&1
	expect_eq "--train-spm: a file name with a comma" "$?" 0
	check "... the model of the same texts under their own names" $PY -c '
import sys, sentencepiece as s
m = [s.SentencePieceProcessor() for _ in sys.argv[1:]]
[p.Load(f) for p, f in zip(m, sys.argv[1:])]
sys.exit(len({tuple(map(p.IdToPiece, range(p.GetPieceSize()))) for p in m}) != 1)' \
		"$WORK/spm.model" "$WORK/spm2.model"
	$PY "$TOK" --spm "$WORK/spm.model" -o "$WORK/s.tok" "$WORK/c1.txt" \
		"$WORK/c2.txt" >/dev/null 2>&1 || fail "--spm on two small files"
	expect_eq "--spm: an end-of-sequence id (1) ends each of the 6 lines (LF, CR LF, CR; the files one text)" \
		"$(od -An -v -tu2 -j1024 "$WORK/s.tok" | tr -s ' ' '\n' | grep -c '^1$') $(od -An -tu2 -j$(($(wc -c <"$WORK/s.tok") - 2)) "$WORK/s.tok" | tr -d ' ')" "6 1"
	# ~0.8 MB and ~13 MB: lines and UTF-8 cut at the edges of read chunks
	cat "$WORK/c1.txt" "$WORK/c2.txt" >"$WORK/mid.txt"
	i=0
	while [ $i -lt 17 ]; do
		[ $i = 13 ] && cp "$WORK/mid.txt" "$WORK/mid13.txt"
		cat "$WORK/mid.txt" "$WORK/mid.txt" >"$WORK/mid.2" &&
			mv "$WORK/mid.2" "$WORK/mid.txt"
		i=$((i + 1))
	done
	# the whole-text implementation: every line of the decoded text, then EOS
	$PY - "$WORK/spm.model" "$WORK/mid13.txt" "$WORK/ref.tok" <<'EOT'
import struct, sys, sentencepiece as spm
sp = spm.SentencePieceProcessor()
sp.Load(sys.argv[1])
ids = []
text = open(sys.argv[2], "rb").read().decode("utf-8", errors="replace")
for line in text.splitlines():
    ids += sp.EncodeAsIds(line) + [sp.eos_id()]
hdr = [20240520, 2, len(ids), 0, 2] + [0] * 251
with open(sys.argv[3], "wb") as f:
    f.write(struct.pack("<256I", *hdr) + struct.pack("<%dH" % len(ids), *ids))
EOT
	kb1=$(peak_kb $PY "$TOK" --spm "$WORK/spm.model" -o "$WORK/mid13.tok" "$WORK/mid13.txt")
	check "--spm on $(wc -c <"$WORK/mid13.txt") bytes: the whole-text implementation's tokens" \
		cmp -s "$WORK/ref.tok" "$WORK/mid13.tok"
	kb2=$(peak_kb $PY "$TOK" --spm "$WORK/spm.model" -o "$WORK/mid.tok" "$WORK/mid.txt")
	echo "# --spm peak RSS: $kb1 KiB on 0.8 MB, $kb2 KiB on 13 MB"
	[ "$kb1" -gt 0 ] && [ "$kb2" -gt 0 ] && [ $((kb2 - kb1)) -lt 8192 ] &&
		pass "--spm: 16 times the text, under 8 MiB more memory" ||
		fail "--spm: peak RSS $kb1 KiB on 0.8 MB, $kb2 KiB on 13 MB"
	rm -f "$WORK/mid.txt" "$WORK/mid.tok"
}

# 1. text -> token file: SentencePiece when it imports, else byte level.
if $PY -c 'import sentencepiece' 2>/dev/null; then
	$PY "$TOK" --train-spm "$WORK/spm" --vocab 256 $TEXT/GPL-3 \
		$TEXT/Apache-2.0 >"$WORK/tok.out" 2>&1 &&
		[ -s "$WORK/spm.model" ] && pass "tokenize.py --train-spm" ||
		fail "train SentencePiece: $(cat "$WORK/tok.out")"
	spm_checks
	$PY "$TOK" --spm "$WORK/spm.model" -o "$WORK/train.tok" \
		--val-fraction 0.1 $TEXT/GPL-3 $TEXT/Apache-2.0 >"$WORK/tok.out" 2>&1
	expect_eq "tokenize.py --spm: text to token files" "$?" 0
else
	echo "# python3-sentencepiece missing: byte-level tokens only"
	$PY "$TOK" --bytes -o "$WORK/train.tok" --val-fraction 0.1 \
		$TEXT/GPL-3 $TEXT/Apache-2.0 >"$WORK/tok.out" 2>&1
	expect_eq "tokenize.py --bytes" "$?" 0
fi
sed 's/^/# /' "$WORK/tok.out"
$PY "$TOK" --bytes -o "$WORK/bytes.tok" $TEXT/GPL-3 >/dev/null 2>&1 &&
	cmp -s -i 1024:0 "$WORK/bytes.tok" $TEXT/GPL-3 2>/dev/null ||
	[ "$(od -An -tu2 -j1024 -N2 "$WORK/bytes.tok" | tr -d ' ')" = \
		"$(od -An -tu1 -N1 $TEXT/GPL-3 | tr -d ' ')" ] &&
	pass "byte-level fallback: first token is the first byte" ||
	fail "byte-level fallback"
# a validation split that rounds to nothing, or an empty corpus: refused
# (it wrote no NAME.val.tok and left an older one beside the new file)
printf 'hello world!' >"$WORK/small.txt"
$PY "$TOK" --bytes -o "$WORK/small.tok" --val-fraction 0.05 "$WORK/small.txt" >/dev/null 2>"$WORK/tok.err"
expect_eq "tokenize.py: --val-fraction of 12 tokens giving 0: exit 2" $? 2
check "... says why" grep -q "too few for a validation file" "$WORK/tok.err"
: >"$WORK/empty.txt"
$PY "$TOK" --bytes -o "$WORK/empty.tok" "$WORK/empty.txt" >/dev/null 2>&1
expect_eq "tokenize.py: an empty corpus: exit 2" $? 2
D="--data $WORK/train.tok"
V="--val-data $WORK/train.val.tok"

# 2. training with validation: the loss falls, val_loss in --json.
"$HT" $M $D $V --eval-every 10 --steps 30 --lr 3e-3 --json \
	>"$WORK/run.json" 2>"$WORK/run.err"
expect_eq "hexitrain on the token file with --val-data" "$?" 0
v0=$(sed -n 's/^{"step":0,"val_loss":\([^}]*\)}$/\1/p' "$WORK/run.json")
v30=$(sed -n 's/^{"step":30,"val_loss":\([^}]*\)}$/\1/p' "$WORK/run.json")
echo "# val loss $v0 -> $v30"
awk -v a="$v0" -v b="$v30" 'BEGIN { exit !(a != "" && b != "" && b < a - 0.3) }' &&
	pass "validation loss at steps 0 and 30 falls by > 0.3" ||
	fail "val loss '$v0' -> '$v30'"
[ "$(grep -c '"val_loss"' "$WORK/run.json")" -eq 4 ] &&
	pass "validation at steps 0, 10, 20, 30" || fail "validation lines"

# 3. a resume continues the data position, also with another batch.
"$HT" $M $D --batch 8 --steps 4 --save-every 4 --ckpt-dir "$WORK/dp" \
	>/dev/null 2>"$WORK/err" || fail "batch 8 run: $(cat "$WORK/err")"
grep -q 'saved checkpoint .*step-00000004 (step 4, [0-9]* bytes' "$WORK/err" &&
	pass "a line for the save (path, step, size, seconds)" ||
	fail "save line: $(cat "$WORK/err")"
"$HT" $M $D --batch 3 --steps 6 --resume "$WORK/dp" --save-every 6 \
	--ckpt-dir "$WORK/dp" >/dev/null 2>"$WORK/err" ||
	fail "batch 3 resume: $(cat "$WORK/err")"
grep -q 'loaded checkpoint .*step-00000004 (step 4, [0-9]* bytes' "$WORK/err" &&
	pass "a line for the load" || fail "load line: $(cat "$WORK/err")"
# the constant schedule resumed with only --steps changed: nothing to warn
# about (its decay length follows --steps, and it warned on every such run)
grep -q 'learning-rate schedule' "$WORK/err" &&
	fail "resume with only --steps changed warns: $(grep 'learning-rate' "$WORK/err")" ||
	pass "constant schedule, only --steps changed: no schedule warning"
"$CK" info "$WORK/dp" | grep -q 'data position 38$' &&
	pass "data position 4*8 + 2*3 = 38 samples after a batch change" ||
	fail "data position: $("$CK" info "$WORK/dp" | grep position)"

# 4. the schedule (warmup + cosine) resumes exactly.
S="--lr 3e-3 --warmup 3 --lr-schedule cosine --min-lr 1e-4"
"$HT" $M $D $S --steps 8 --json >"$WORK/full.json" || fail "cosine run"
"$HT" $M $D $S --lr-decay-steps 8 --steps 4 --save-every 4 --ckpt-dir "$WORK/sc" --json \
	>/dev/null 2>&1 || fail "cosine 4 steps"
"$HT" $M $D --steps 8 --resume "$WORK/sc" --json >"$WORK/res.json" \
	2>"$WORK/err" || fail "cosine resume"
grep -q "continuing the checkpoint's learning-rate schedule" "$WORK/err" &&
	pass "cosine resumed without its options: the warning says whose schedule runs" ||
	fail "no schedule warning: $(cat "$WORK/err")"
"$CMP" --skip 4 --loss "$WORK/full.json" "$WORK/res.json" >/dev/null &&
	pass "cosine schedule: 4 + 4 resumed steps equal 8 steps" ||
	fail "schedule resume: $("$CMP" --skip 4 --loss "$WORK/full.json" "$WORK/res.json")"
lr1=$(sed -n '1s/.*"lr":\([^,}]*\).*/\1/p' "$WORK/full.json")
lr8=$(sed -n '8s/.*"lr":\([^,}]*\).*/\1/p' "$WORK/full.json")
lr8r=$(sed -n '4s/.*"lr":\([^,}]*\).*/\1/p' "$WORK/res.json")
awk -v a="$lr1" -v b="$lr8" -v c="$lr8r" 'BEGIN { exit !(a == 0.001 && b == c &&
	b > 0.000376 && b < 0.000378) }' && pass "lr: 1e-3 at step 1 (warmup), $lr8 (cosine, 0.8 of the way) at step 8 in both runs" ||
	fail "lr $lr1 $lr8 $lr8r"

# 5. --keep 2 keeps the newest two committed checkpoints.
"$HT" $M $D --steps 5 --save-every 1 --keep 2 --ckpt-dir "$WORK/kp" \
	>/dev/null 2>&1 || fail "--keep run"
# shellcheck disable=SC2010 # counts the step-* entries hexitrain left; names are its own
[ "$(ls "$WORK/kp" | grep -c '^step-')" -eq 2 ] && [ -d "$WORK/kp/step-00000005" ] &&
	[ -d "$WORK/kp/step-00000004" ] && pass "--keep 2: steps 4 and 5 left" ||
	fail "--keep 2 left: $(ls "$WORK/kp")"
mkdir "$WORK/kp/step-00000001" # uncommitted, another writer's
"$HT" $M $D --steps 7 --save-every 1 --keep 1 --resume "$WORK/kp" \
	--ckpt-dir "$WORK/kp" >/dev/null 2>&1 || fail "--keep 1 resume"
[ -d "$WORK/kp/step-00000001" ] && [ -d "$WORK/kp/step-00000005" ] &&
	[ -d "$WORK/kp/step-00000007" ] && [ ! -d "$WORK/kp/step-00000006" ] &&
	pass "--keep 1: keeps the resumed-from and uncommitted ones" ||
	fail "--keep 1 left: $(ls "$WORK/kp")"

# 6. a stop signal: the step finishes, a checkpoint is committed, exit 75,
# and stopped + resumed steps equal an uninterrupted run (constant lr, so
# the run's length does not change the steps).
stop_test() { # NAME SIGNAL self|child LAUNCH... (child: signal the
	# launcher's child, mpirun under timeout)
	local name=$1 sig=$2 who=$3 n=0 st k
	shift 3
	rm -rf "$WORK/st"
	# the output file exists, empty, before the run starts: the parent
	# polls it at once, and a missing file (grep -c printing nothing, the
	# test failing) or the last call's steps ended the wait before the
	# run had its signal handlers (CI: exit 138, killed by SIGUSR1)
	: >"$WORK/a.json"
	"$@" $D --steps 100000 --ckpt-dir "$WORK/st" --json \
		>"$WORK/a.json" 2>"$WORK/a.err" &
	local pid=$!
	while [ "$(grep -c '"step"' "$WORK/a.json")" -lt 3 ] && [ $n -lt 600 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	if [ "$who" = child ]; then
		kill -s "$sig" $(pgrep -P $pid)
	else
		kill -s "$sig" $pid
	fi
	wait $pid
	st=$?
	expect_eq "$name: SIG$sig stops with exit 75" "$st" 75
	[ "$st" = 75 ] || tail -n 20 "$WORK/a.err" | sed 's/^/# /'
	k=$(grep -c '"step"' "$WORK/a.json")
	grep -q "saved checkpoint .*(step $k," "$WORK/a.err" &&
		pass "$name: stopped after step $k, checkpoint committed" ||
		fail "$name: $(cat "$WORK/a.err")"
	"$@" $D --steps $((k + 3)) --resume "$WORK/st" --json >"$WORK/b.json" \
		2>"$WORK/b.err" || fail "$name: resume: $(cat "$WORK/b.err")"
	"$@" $D --steps $((k + 3)) --json >"$WORK/ref.json" 2>/dev/null ||
		fail "$name: reference run"
	cat "$WORK/a.json" "$WORK/b.json" >"$WORK/ab.json"
	"$CMP" --loss "$WORK/ref.json" "$WORK/ab.json" >"$WORK/cmp" &&
		[ "$(grep -c '"step"' "$WORK/ab.json")" -eq $((k + 3)) ] &&
		pass "$name: stopped + resumed = $((k + 3)) uninterrupted steps" ||
		fail "$name: losses differ: $(tail -n 2 "$WORK/cmp")"
}
stop_test "one process" USR1 self "$HT" $M
stop_test "one process" TERM self "$HT" $M

# 7. resumed from one directory into another (--ckpt-dir new), stopped
# before its first step (during the validation at the resumed step, made
# long here): the resumed step is committed in the new directory, exit 75
# (it once counted as saved already: exit 75 with nothing in --ckpt-dir).
for _ in 1 2 3 4 5 6; do cat $TEXT/GPL-3 $TEXT/Apache-2.0; done >"$WORK/big.txt"
$PY "$TOK" --bytes -o "$WORK/big.tok" "$WORK/big.txt" >/dev/null 2>&1 || hard "tokenize big.txt"
"$HT" $M $D --steps 2 --save-every 2 --ckpt-dir "$WORK/r0" >/dev/null 2>&1 || fail "save step 2"
rm -rf "$WORK/r1"
"$HT" $M $D --steps 100000 --resume "$WORK/r0" --ckpt-dir "$WORK/r1" \
	--val-data "$WORK/big.tok" --eval-every 100000 --eval-batches 1000 \
	>"$WORK/r1.out" 2>"$WORK/r1.err" &
signal_when $! USR1 "$WORK/r1.err" "loaded checkpoint"
st=$?
k=$(sed -n 's/.*stopping after step \([0-9]*\).*/\1/p' "$WORK/r1.err")
echo "# stopped after step $k (2: during the validation at the resumed step)"
expect_eq "resumed into a new --ckpt-dir, stopped: exit 75" "$st" 75
check "the step it stopped at is committed in the new --ckpt-dir" \
	"$CK" verify -q "$WORK/r1/step-$(printf %08d "${k:-0}")"
if command -v mpirun >/dev/null 2>&1; then
	"$MKPLAN" "$WORK/m.json" "4/2:1x1,1x1;4/1:1x2" "$WORK/p3.json" ||
		hard "mkplan"
	# mpirun passes SIGUSR1 on to every rank.
	stop_test "3 MPI ranks, 2 pipelines" USR1 child timeout -k 5 120 mpirun \
		--oversubscribe --allow-run-as-root -np 3 "$HT" \
		--plan "$WORK/p3.json"
fi
done_testing
