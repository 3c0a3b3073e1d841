#!/bin/bash
# render-png.sh - the SVG plan picture renders (rsvg-convert to PNG): the
# PNG has the SVG's size, is not blank, and shows each GPU type's colour;
# a long pipeline wraps into rows; idle GPUs are drawn.  Skips without
# rsvg-convert (librsvg2-bin).
. "$top_srcdir/tests/tap.sh"
HP=$top_builddir/scheduler/hexiplan
MKPLAN=$top_builddir/tests/runtime/mkplan
[ -x "$HP" ] || hard "hexiplan not built"
[ -x "$MKPLAN" ] || make -C "$top_builddir/tests/runtime" mkplan >/dev/null || hard "mkplan"
command -v rsvg-convert >/dev/null 2>&1 || skip "rsvg-convert not installed (librsvg2-bin)"
W=$(mktemp -d "${TMPDIR:-/tmp}/hexisvg.XXXXXX") || hard mktemp
trap 'rm -rf "$W"' EXIT

# png_check SVG PNG COLOURS...: size as declared, >= 2 % non-white pixels,
# every colour (#RRGGBB) present.  Plain zlib decoding of rsvg's RGB(A) PNG.
png_check() {
	python3 - "$@" <<'PY'
import re, struct, sys, zlib
svg, png, want = sys.argv[1], sys.argv[2], sys.argv[3:]
head = open(svg).read(400)
sw, sh = (int(v) for v in re.search(r'width="(\d+)" height="(\d+)"', head).groups())
data = open(png, "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, w = 8, b"", None
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype, _, _, lace = struct.unpack(">IIBBBBB", body)
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
if (w, h) != (sw, sh):
    sys.exit(f"PNG {w}x{h}, SVG {sw}x{sh}")
if depth != 8 or ctype not in (2, 6) or lace:
    sys.exit(f"unexpected PNG layout depth {depth} type {ctype}")
bpp = 4 if ctype == 6 else 3  # RGBA or RGB
raw, stride = zlib.decompress(idat), w * bpp
prev, rows = bytearray(stride), []
for y in range(h):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(line)
    prev = line
colours, nonwhite = set(), 0
for line in rows:
    for i in range(0, stride, bpp):
        px = bytes(line[i:i + 3])
        colours.add(px)
        nonwhite += px != b"\xff\xff\xff"
frac = nonwhite / (w * h)
print(f"# {png}: {w}x{h}, {frac:.1%} non-white, {len(colours)} colours")
if frac < 0.02:
    sys.exit("PNG is (nearly) blank")
for c in want:
    if bytes.fromhex(c[1:]) not in colours:
        sys.exit(f"colour {c} not in the PNG")
PY
}

# The paper's plan: 3 GPU types, 3 distinct colours, legend.
"$HP" show "$top_srcdir/examples/plans/paper-7b.json" --svg "$W/paper.svg" >/dev/null ||
	hard "hexiplan show --svg"
check "paper plan renders" rsvg-convert -o "$W/paper.png" "$W/paper.svg"
check "paper plan PNG: size, not blank, 3 type colours" \
	png_check "$W/paper.svg" "$W/paper.png" "#E69F00" "#56B4E9" "#009E73"
expect_eq "paper plan: one legend swatch per type" "$(grep -c 'class="legend"' "$W/paper.svg")" 3
# 6 stages on n1 and n2 of the test cluster: 2 rows of at most 5 stages;
# n3's two GPUs idle.
spec="8/2:1x1@0,1x1@0,1x1@0,1x1@1,1x1@1,1x3@1"
"$MKPLAN" tiny-8l "$spec" "$W/idle.json" || hard "mkplan"
"$HP" show "$W/idle.json" --svg "$W/idle.svg" >/dev/null || hard "hexiplan show --svg"
check "wrapped plan with idle GPUs renders" rsvg-convert -o "$W/idle.png" "$W/idle.svg"
check "wrapped plan PNG: size, not blank, colours" \
	png_check "$W/idle.svg" "$W/idle.png" "#E69F00" "#56B4E9" "#009E73"
width=$(sed -n 's/^<svg [^>]*width="\([0-9]*\)".*/\1/p' "$W/idle.svg")
[ "$width" -le 1200 ] && pass "6 stages wrap: width $width <= 1200 px" ||
	fail "6 stages: width $width"
expect_eq "two idle GPUs drawn" "$(grep -c 'class="idle"' "$W/idle.svg")" 2
done_testing
