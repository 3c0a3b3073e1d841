#!/bin/sh
# Replays the seed corpora (hand-offs, GRES strings, option values and
# plugstack arguments), then bounded deterministic mutations.
exec ./fuzz_spank -n "${HEXI_FUZZ_ITERATIONS:-3000}" "$srcdir/corpus/handoff" "$srcdir/corpus/gres" "$srcdir/corpus/options"
