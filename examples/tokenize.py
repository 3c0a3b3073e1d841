#!/usr/bin/python3
"""tokenize.py - text files to hexitrain token files (hexiscale-data(5)).

  tokenize.py --spm MODEL.model -o train.tok [--val-fraction F] TEXT...
  tokenize.py --bytes -o train.tok TEXT...        (byte-level fallback)
  tokenize.py --train-spm PREFIX --vocab N TEXT... (train a SentencePiece model)

Token file: 1024-byte header of 256 little-endian int32 words
  [0] magic 20240520  [1] version 2  [2] count low 32 bits
  [3] count high 32 bits  [4] token width in bytes (2: uint16, 4: uint32)
  [5..255] zero
then `count` little-endian tokens.  The width is 2 when every id fits in
uint16, else 4.  Byte-level fallback: each byte of the UTF-8 text is one
token 0..255 (a model needs vocab >= 256).  With --val-fraction F the last
F of the tokens go to OUTPUT's sibling NAME.val.tok (for --val-data).
Needs only the Python standard library, plus python3-sentencepiece for
--spm / --train-spm.
"""
import argparse
import os
import struct
import sys
import tempfile

MAGIC = 20240520
VERSION = 2
HEADER_WORDS = 256


def write_tokens(path, ids):
    width = 2 if (not ids or max(ids) < 65536) else 4
    if ids and min(ids) < 0:
        raise ValueError("negative token id")
    hdr = [0] * HEADER_WORDS
    n = len(ids)
    hdr[0], hdr[1] = MAGIC, VERSION
    hdr[2], hdr[3] = n & 0xFFFFFFFF, n >> 32
    hdr[4] = width
    # written beside and renamed: a hexitrain reading the old file keeps
    # it whole (rewriting it in place would truncate it under the reader)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tokenize.", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<256I", *hdr))
            f.write(struct.pack("<%d%s" % (n, "H" if width == 2 else "I"), *ids))
        os.chmod(tmp, 0o644 & ~current_umask())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return width


def current_umask():
    u = os.umask(0)
    os.umask(u)
    return u


def read_text(paths):
    parts = []
    for p in paths:
        with open(p, "rb") as f:
            parts.append(f.read())
    return b"".join(parts)


def encode(args, data):
    if args.bytes:
        return list(data)
    import sentencepiece as spm  # python3-sentencepiece

    sp = spm.SentencePieceProcessor()
    sp.Load(args.spm)
    ids = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        ids.extend(sp.EncodeAsIds(line))
        if sp.eos_id() >= 0:
            ids.append(sp.eos_id())
    print("tokenize.py: vocabulary %d" % sp.GetPieceSize(), file=sys.stderr)
    return ids


def train_spm(args):
    import sentencepiece as spm

    spm.SentencePieceTrainer.Train(
        input=",".join(args.text), model_prefix=args.train_spm,
        vocab_size=args.vocab, model_type="bpe", character_coverage=1.0,
        bos_id=-1, eos_id=1, unk_id=0, pad_id=-1,
        minloglevel=2)
    print("tokenize.py: wrote %s.model (vocabulary %d)"
          % (args.train_spm, args.vocab))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--spm", metavar="MODEL", help="SentencePiece model file")
    g.add_argument("--bytes", action="store_true",
                   help="byte-level fallback: one token per byte")
    g.add_argument("--train-spm", metavar="PREFIX",
                   help="train a BPE SentencePiece model PREFIX.model")
    ap.add_argument("--vocab", type=int, default=256,
                    help="vocabulary of --train-spm (default 256)")
    ap.add_argument("-o", "--output", help="token file to write")
    ap.add_argument("--val-fraction", type=float, default=0.0)
    ap.add_argument("text", nargs="+")
    args = ap.parse_args()
    if args.train_spm:
        train_spm(args)
        return 0
    if not args.output:
        ap.error("-o OUTPUT is required")
    if not 0 <= args.val_fraction < 1:
        ap.error("--val-fraction must be in [0, 1)")
    ids = encode(args, read_text(args.text))
    nval = int(len(ids) * args.val_fraction)
    if len(ids) - nval < 2:
        ap.error("%d tokens (%d after --val-fraction): a token file needs "
                 "at least 2, and a model seq_len + 1" % (len(ids),
                                                          len(ids) - nval))
    if args.val_fraction > 0 and nval < 2:
        # it wrote nothing, and an older NAME.val.tok stayed beside the
        # new training file
        ap.error("--val-fraction %g of %d tokens is %d: too few for a "
                 "validation file (give more text or a larger fraction)"
                 % (args.val_fraction, len(ids), nval))
    train, val = ids[:len(ids) - nval], ids[len(ids) - nval:]
    w = write_tokens(args.output, train)
    print("tokenize.py: %s: %d tokens of %d bytes, max id %d"
          % (args.output, len(train), w, max(train) if train else -1))
    if nval:
        vpath = (args.output[:-4] if args.output.endswith(".tok")
                 else args.output) + ".val.tok"
        write_tokens(vpath, val)
        print("tokenize.py: %s: %d tokens" % (vpath, len(val)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
