#!/usr/bin/env python3
"""scan_report.py SRC REPORT_DIR SUPP - list scan-build's findings (its
-plist output) that clang-analyzer.supp does not suppress; exit 1 if any,
or if a suppression has no reason.  Prints one line per finding:
file:line: checker: message."""
import os
import plistlib
import sys


def load_supp(path):
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            parts = [p.strip() for p in line.split('|')]
            if len(parts) != 4 or not all(parts):
                sys.exit(f"{path}:{n}: want FILE|CHECKER|TEXT|REASON")
            rows.append(parts)
    return rows


def findings(src, rep):
    seen = set()
    for root, _, files in os.walk(rep):
        for name in files:
            if not name.endswith('.plist'):
                continue
            path = os.path.join(root, name)
            if os.path.getsize(path) == 0:
                continue  # a file the analyzer had nothing to say about
            with open(path, 'rb') as f:
                p = plistlib.load(f)
            for d in p.get('diagnostics', []):
                loc = d.get('location', {})
                fn = p['files'][loc.get('file', 0)] if p.get('files') else '?'
                fn = os.path.relpath(os.path.realpath(fn), src)
                key = (fn, loc.get('line', 0), d.get('check_name', '?'),
                       d.get('description', ''))
                if key not in seen:
                    seen.add(key)
                    yield key


def main():
    src, rep, supp = sys.argv[1], sys.argv[2], sys.argv[3]
    rows = load_supp(supp)
    bad, kept = [], 0
    for fn, line, checker, msg in sorted(findings(os.path.realpath(src), rep)):
        if any(fn == r[0] and checker == r[1] and r[2] in msg for r in rows):
            kept += 1
            continue
        bad.append(f"{fn}:{line}: {checker}: {msg}")
    if bad:
        print(f"FAIL: clang static analyzer: {len(bad)} finding(s)"
              f" ({kept} suppressed with a reason):")
        for b in bad:
            print("  " + b)
        return 1
    print(f"PASS: clang static analyzer: no finding ({kept} suppressed)")
    return 0


if __name__ == '__main__':
    sys.exit(main())
