#!/bin/sh
# Replays the seed corpus, then bounded deterministic mutations.
exec ./fuzz_spank -n "${HEXI_FUZZ_ITERATIONS:-3000}" "$srcdir/corpus/handoff" "$srcdir/corpus/gres"
