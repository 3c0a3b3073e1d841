#!/usr/bin/python3
"""tokenize.py - text files to hexitrain token files (hexiscale-data(5)).

  tokenize.py --spm MODEL.model -o train.tok [--val-fraction F] TEXT...
  tokenize.py --bytes -o train.tok [--val-fraction F] TEXT...  (byte level)
  tokenize.py --train-spm PREFIX --vocab N TEXT... (train a SentencePiece model)

Token file: 1024-byte header of 256 little-endian int32 words
  [0] magic 20240520  [1] version 2  [2] count low 32 bits
  [3] count high 32 bits  [4] token width in bytes (2: uint16, 4: uint32)
  [5..255] zero
then `count` little-endian tokens.  The width is 2 when every id fits in
uint16, else 4.

The TEXT files are read as one text, in order, as they are (end a file with
a line break to keep its last line apart from the next file's first).
Both modes mark the end of every line: --bytes makes each byte of the text
one token 0..255, line breaks included, and adds nothing (a model needs
vocab >= 256); --spm encodes each line (as str.splitlines splits the text:
\\n, \\r\\n, \\r and Unicode's line breaks; invalid UTF-8 becomes U+FFFD)
and appends the model's end-of-sequence id, if it has one, in place of the
line break, which SentencePiece's pieces drop.  With --val-fraction F the
last F of the tokens go to OUTPUT's sibling NAME.val.tok (for --val-data).
--train-spm hands the trainer the TEXT paths as a list, so a comma in one
is part of its name.

The text is read in chunks and the tokens written as they come: memory is
a few chunks (and, with --spm, the longest line), not the corpus.  Files
are written beside and renamed, both only once both are complete; an
OUTPUT that is not a regular file (/dev/stdout, a pipe) is written in
place once the tokens are counted.  An expected error is one line
"tokenize.py: OBJECT: CAUSE" on stderr; exit status 2 for a usage error
(an option's value, a corpus too small for the split), 1 for the others.
Needs only the Python standard library, plus python3-sentencepiece for
--spm / --train-spm.
"""
import argparse
import codecs
import contextlib
import errno
import itertools
import os
import re
import shutil
import signal
import stat
import struct
import sys
import tempfile
from array import array

PROG = "tokenize.py"
MAGIC = 20240520
VERSION = 2
HEADER_WORDS = 256
HEADER_BYTES = 4 * HEADER_WORDS
# Bytes of text read, and of tokens moved, at a time: the memory used is a
# few of these, whatever the corpus size.
CHUNK_BYTES = 1 << 18
# array typecodes of the two token widths (little-endian on disk)
TYPECODE = {2: "H", 4: "I" if array("I").itemsize == 4 else "L"}
BIG_ENDIAN = sys.byteorder == "big"


class Fail(Exception):
    """An expected error: printed as "tokenize.py: OBJECT: CAUSE", one line;
    the exit status is STATUS (2: usage, 1: anything else)."""

    def __init__(self, obj, cause, status=1):
        super().__init__("%s: %s" % (obj, cause) if obj else cause)
        self.status = status


def usage(obj, cause):
    return Fail(obj, cause, 2)


def one_line(e):
    """E's text on one line, less SentencePiece's source position
    ("Internal: ./src/x.cc(660) [check] ") when a message follows it."""
    text = " ".join(str(e).split())
    return re.sub(r"^\w+: \S+\(\d+\) \[.*?\] (?=\S)", "", text)


@contextlib.contextmanager
def about(obj):
    """An OSError inside becomes the expected error "OBJ: strerror"."""
    try:
        yield
    except OSError as e:
        raise Fail(obj, e.strerror or one_line(e)) from None


# ---- reading --------------------------------------------------------------


def check_inputs(paths):
    """Fail before any work on a missing, unreadable or directory input,
    naming it.  Only regular files are opened here: a pipe (<(zcat ...))
    can be read once only."""
    for p in paths:
        with about(p):
            st = os.stat(p)
            if stat.S_ISDIR(st.st_mode):
                raise Fail(p, os.strerror(errno.EISDIR))
            if stat.S_ISREG(st.st_mode):
                open(p, "rb").close()


def read_chunks(paths):
    """The bytes of PATHS one after another, as they are, a chunk at a
    time."""
    for p in paths:
        with about(p), open(p, "rb") as f:
            while True:
                b = f.read(CHUNK_BYTES)
                if not b:
                    break
                yield b


def ended(piece):
    """Whether a piece of str.splitlines(True) ends with a line break."""
    return piece.splitlines()[0] != piece


def text_lines(chunks):
    """The lines of the text, line breaks removed, a list per chunk: the
    same lines as str.splitlines() of the whole text decoded as UTF-8
    (invalid bytes U+FFFD), holding one chunk and one line at a time."""
    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
    head = []  # the parts of a line not ended yet (a long line: linear)
    after_cr = False  # the last line ended "\r": a "\n" next belongs to it
    for b in itertools.chain(chunks, [None]):
        text = dec.decode(b or b"", b is None)
        if after_cr and text[:1] == "\n":
            text, after_cr = text[1:], False
        if not text:
            continue
        pieces = text.splitlines(True)
        rest = None if ended(pieces[-1]) else pieces.pop()
        lines = [p.splitlines()[0] for p in pieces]
        if lines and head:
            lines[0] = "".join(head) + lines[0]
            head = []
        after_cr = rest is None and pieces[-1].endswith("\r")
        if rest is not None:
            head.append(rest)
        yield lines
    if head:
        yield ["".join(head)]


# ---- encoding: text chunks to blocks of little-endian tokens --------------


def bytes_tokens(chunks):
    """--bytes: each byte one uint16 token."""
    for b in chunks:
        out = bytearray(2 * len(b))
        out[0::2] = b
        yield out


def spm_tokens(sp, chunks, width):
    """--spm: each line's pieces, then the end-of-sequence id (if any)."""
    eos = sp.eos_id()
    for lines in text_lines(chunks):
        if not lines:
            continue
        a = array(TYPECODE[width])
        for ids in sp.EncodeAsIds(lines):
            a.extend(ids)
            if eos >= 0:
                a.append(eos)
        if BIG_ENDIAN:
            a.byteswap()
        yield a


def import_spm(option):
    try:
        import sentencepiece  # Debian: python3-sentencepiece
    except ImportError as e:
        raise Fail(option, "needs python3-sentencepiece (%s)" % e) from None
    return sentencepiece


def load_spm(path):
    spm = import_spm("--spm")
    with about(path), open(path, "rb"):
        pass
    sp = spm.SentencePieceProcessor()
    try:
        sp.Load(path)
    except RuntimeError:  # its text is a failed check in the parser
        raise Fail(path, "not a SentencePiece model") from None
    except OSError as e:
        raise Fail(path, one_line(e)) from None
    return sp


def encoder(args):
    """The width tokens are written at, and the function from text chunks
    to token blocks of that width."""
    if args.bytes:
        return 2, bytes_tokens
    sp = load_spm(args.spm)
    n = sp.GetPieceSize()
    print("%s: vocabulary %d" % (PROG, n), file=sys.stderr)
    width = 2 if n <= 65536 else 4
    return width, lambda chunks: spm_tokens(sp, chunks, width)


# ---- writing ----------------------------------------------------------------


def current_umask():
    u = os.umask(0)
    os.umask(u)
    return u


class Out:
    """A token file being made.  Its tokens go to a temporary file beside
    PATH (beside the file it names, if a symbolic link of root's or the
    caller's; another user's link is replaced), renamed over that at
    commit: a hexitrain reading the old file keeps it whole (rewriting
    it in place would truncate it under the reader).  For a PATH that is
    not a regular file (/dev/stdout, a pipe, /dev/null: a rename would
    replace the device), an anonymous temporary file, copied into PATH at
    commit.  The header is written last, once the tokens are counted."""

    def __init__(self, path):
        self.path, self.tmp, self.f = path, None, None
        with about(path):
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                st = None
            # a symbolic link is followed only where root or the caller
            # made it (as hexiplan -o does): another user's link, put
            # where root writes, is replaced, never written through
            follow = st is not None and stat.S_ISLNK(st.st_mode) and \
                st.st_uid in (0, os.geteuid())
            if follow:
                try:
                    st = os.stat(path)
                except FileNotFoundError:
                    st = None
            elif st is not None and stat.S_ISLNK(st.st_mode):
                st = None
            if st is not None and stat.S_ISDIR(st.st_mode):
                raise Fail(path, os.strerror(errno.EISDIR))
            if st is not None and (stat.S_ISBLK(st.st_mode) or
                                   stat.S_ISSOCK(st.st_mode)):
                raise Fail(path, "a %s, not written" % (
                    "block device" if stat.S_ISBLK(st.st_mode) else "socket"))
            # a character device or a FIFO (/dev/stdout's terminal or
            # pipe, /dev/null) is written into, never replaced
            self.in_place = st is not None and not stat.S_ISREG(st.st_mode)
            if self.in_place:
                self.f = tempfile.TemporaryFile()
            else:
                # through our own or root's symbolic link: the file it
                # names is replaced; another user's link itself
                self.target = os.path.realpath(path) if follow else \
                    os.path.abspath(path)
                fd, self.tmp = tempfile.mkstemp(
                    prefix=".tokenize.", dir=os.path.dirname(self.target))
                self.f = os.fdopen(fd, "w+b")
            self.f.write(bytes(HEADER_BYTES))

    def commit(self):
        with about(self.path):
            if self.in_place:
                self.f.seek(0)
                with open(self.path, "wb") as o:
                    shutil.copyfileobj(self.f, o, CHUNK_BYTES)
                self.f.close()
                return
            self.f.close()
            os.chmod(self.tmp, 0o644 & ~current_umask())
            os.replace(self.tmp, self.target)
            self.tmp = None

    def discard(self):
        """Remove what commit did not use; no error (cleanup)."""
        with contextlib.suppress(OSError):
            if self.f is not None:
                self.f.close()
            if self.tmp is not None:
                os.unlink(self.tmp)


def write_tokens(out, blocks):
    """Write token BLOCKS after OUT's placeholder header; the byte count."""
    n = 0
    with about(out.path):
        for block in blocks:
            out.f.write(block)
            n += memoryview(block).nbytes
    return n


def token_blocks(f, first, count, width):
    """Tokens FIRST .. FIRST+COUNT of F (a token file being made), as
    arrays of at most a chunk."""
    per = max(1, CHUNK_BYTES // width)
    f.seek(HEADER_BYTES + first * width)
    while count > 0:
        k = min(per, count)
        a = array(TYPECODE[width])
        a.frombytes(f.read(k * width))
        if len(a) != k:
            raise OSError(0, "short read of its temporary file")
        if BIG_ENDIAN:
            a.byteswap()
        yield a
        count -= k


def split_off(src, dst, first, count, width):
    """Move the last COUNT tokens of SRC, from token FIRST, to DST."""
    with about(dst.path):
        for a in token_blocks(src.f, first, count, width):
            if BIG_ENDIAN:
                a.byteswap()
            dst.f.write(a)
        src.f.truncate(HEADER_BYTES + first * width)


def narrow(f, n):
    """Rewrite the N uint32 tokens of F as uint16, in place, front to back
    (a chunk is read before it is written over)."""
    done = 0
    for a in token_blocks(f, 0, n, 4):
        pos = f.tell()
        b = array("H", a)
        if BIG_ENDIAN:
            b.byteswap()
        f.seek(HEADER_BYTES + 2 * done)
        f.write(b)
        f.seek(pos)
        done += len(a)


def finish(out, n, width):
    """Narrow OUT's N tokens to 2 bytes when every id fits, write its
    header; return (width, largest id)."""
    with about(out.path):
        top = max((max(a) for a in token_blocks(out.f, 0, n, width)),
                  default=-1)
        if width == 4 and top < 65536:
            narrow(out.f, n)
            width = 2
        out.f.truncate(HEADER_BYTES + n * width)
        hdr = [0] * HEADER_WORDS
        hdr[0], hdr[1] = MAGIC, VERSION
        hdr[2], hdr[3] = n & 0xFFFFFFFF, n >> 32
        hdr[4] = width
        out.f.seek(0)
        out.f.write(struct.pack("<%dI" % HEADER_WORDS, *hdr))
    return width, top


# ---- the commands -------------------------------------------------------


def val_path(output):
    return (output[:-4] if output.endswith(".tok") else output) + ".val.tok"


def split_sizes(args, n):
    """Tokens for the validation file of N: refused (usage, exit 2) when
    either file would get fewer than 2."""
    nval = int(n * args.val_fraction)
    if n - nval < 2:
        raise usage(args.output, "%d tokens (%d after --val-fraction): a "
                    "token file needs at least 2, and a model seq_len + 1"
                    % (n, n - nval))
    if args.val_fraction > 0 and nval < 2:
        # it wrote nothing, and an older NAME.val.tok stayed beside the
        # new training file
        raise usage("--val-fraction", "%g of %d tokens is %d: too few for "
                    "a validation file (give more text or a larger fraction)"
                    % (args.val_fraction, n, nval))
    return nval


def tokenize(args):
    if not args.output:
        raise usage("-o", "an OUTPUT token file is needed")
    check_inputs(args.text)
    width, encode = encoder(args)
    outs = []
    try:
        out = Out(args.output)
        outs.append(out)
        if args.val_fraction > 0:
            if out.in_place:
                raise usage("--val-fraction", "needs a regular file OUTPUT "
                            "(NAME.val.tok is made beside it)")
            val = Out(val_path(args.output))
            outs.append(val)
        n = write_tokens(out, encode(read_chunks(args.text))) // width
        nval = split_sizes(args, n)
        if nval:
            split_off(out, val, n - nval, nval, width)
        w, top = finish(out, n - nval, width)
        if nval:
            finish(val, nval, width)
        for o in outs:
            o.commit()
    finally:
        for o in outs:
            o.discard()
    # not into the token stream of an OUTPUT that is stdout
    log = sys.stderr if out.in_place else sys.stdout
    print("%s: %s: %d tokens of %d bytes, max id %d"
          % (PROG, args.output, n - nval, w, top), file=log)
    if nval:
        print("%s: %s: %d tokens" % (PROG, val.path, nval), file=log)
    return 0


def train_spm(args):
    spm = import_spm("--train-spm")
    check_inputs(args.text)
    try:
        # a list, not a comma-joined string: the module passes it on as
        # CSV, so a path with a comma stays one path
        spm.SentencePieceTrainer.Train(
            input=list(args.text), model_prefix=args.train_spm,
            vocab_size=args.vocab, model_type="bpe", character_coverage=1.0,
            bos_id=-1, eos_id=1, unk_id=0, pad_id=-1,
            minloglevel=2)
    except (OSError, RuntimeError) as e:
        raise Fail(args.train_spm, "cannot train: %s" % one_line(e)) from None
    print("%s: wrote %s.model (vocabulary %d)"
          % (PROG, args.train_spm, args.vocab))
    return 0


# ---- options ----------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    def error(self, message):
        # argparse's "argument --vocab: invalid ..." is OBJECT: CAUSE already
        if message.startswith("argument "):
            message = message[len("argument "):]
        raise usage(None, message)


def fraction(s):
    try:
        v = float(s)
    except ValueError:
        v = None
    if v is None or not 0 <= v < 1:  # NaN too
        raise argparse.ArgumentTypeError("%r is not a number in [0, 1)" % s)
    return v


def vocab_size(s):
    try:
        v = int(s, 10)
    except ValueError:
        v = None
    if v is None or not 1 <= v < 1 << 31:
        raise argparse.ArgumentTypeError("%r is not a vocabulary size "
                                         "(1 .. 2^31-1)" % s)
    return v


def parse_args(argv):
    ap = Parser(prog=PROG, description=__doc__.split("\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--spm", metavar="MODEL", help="SentencePiece model file")
    g.add_argument("--bytes", action="store_true",
                   help="byte-level fallback: one token per byte")
    g.add_argument("--train-spm", metavar="PREFIX",
                   help="train a BPE SentencePiece model PREFIX.model")
    ap.add_argument("--vocab", type=vocab_size, default=256,
                    help="vocabulary of --train-spm (default 256)")
    ap.add_argument("-o", "--output", help="token file to write")
    ap.add_argument("--val-fraction", type=fraction, default=0.0,
                    metavar="F", help="the last F of the tokens go to "
                    "NAME.val.tok (default 0)")
    ap.add_argument("text", nargs="+")
    return ap.parse_args(argv)


def on_term(signum, frame):
    sys.exit(128 + signum)  # unwinds: temporary files are removed


def main(argv=None):
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, on_term)
    try:
        args = parse_args(argv)
        return train_spm(args) if args.train_spm else tokenize(args)
    except Fail as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        return e.status
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
