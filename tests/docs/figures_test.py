#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The measured figures README.md quotes from other pages are those pages'
own tables: the hand-tuning bounds from docs/tuning.md, the Python-to-C
ratio from docs/python.md; and every "within ...x (worst: ..., N x)"
sentence of docs/tuning.md is its table's worst ratio.
Also the Python speedups (python.md), the JavaScript speedup and the
WebAssembly range (js.md) and the SSE2 bound (platforms.md) the README quotes.
Usage: figures_test.py SOURCE_DIR"""
import os
import re
import sys

src = sys.argv[1]
fail = []


def page(name):
    with open(os.path.join(src, name)) as f:
        return f.read()


def tables(text):
    """(header cells, rows of cells, the text after the table up to the next table)."""
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and re.match(r"^\|\s*:?-{3}", lines[i + 1]):
            head = [c.strip() for c in lines[i].strip("|").split("|")]
            j, rows = i + 2, []
            while j < len(lines) and lines[j].startswith("|"):
                rows.append([c.strip() for c in lines[j].strip("|").split("|")])
                j += 1
            k = j
            while k < len(lines) and not lines[k].startswith("|"):
                k += 1
            out.append((head, rows, "\n".join(lines[j:k])))
            i = j
        else:
            i += 1
    return out


def ratios(head, rows, pred):
    cols = [i for i, h in enumerate(head) if pred(h)]
    vals = []
    for r in rows:
        for i in cols:
            m = re.fullmatch(r"([0-9.]+)x?", r[i]) if i < len(r) else None
            if m:
                vals.append(float(m.group(1)))
    return vals


tuning = page("docs/tuning.md")
fixed, changing = [], []
for head, rows, after in tables(tuning):
    if "default/tuned" not in head:
        continue
    vals = ratios(head, rows, lambda h: h.endswith("/tuned"))
    worst = max(vals)
    (fixed if "bounds/tuned" in head else changing).append(worst)
    m = re.search(r"within ([0-9.]+)x", after)
    if not m:
        fail.append("docs/tuning.md: no 'within ...x' after the table headed %s" % head[:2])
        continue
    if float(m.group(1)) < worst:
        fail.append("docs/tuning.md says within %sx, its table reaches %.2fx" % (m.group(1), worst))
    w = re.search(r"\(worst: [^)]*?([0-9.]+)x", after)
    if w and abs(float(w.group(1)) - worst) > 1e-9:
        fail.append("docs/tuning.md names a worst of %sx, its table's is %.2fx" % (w.group(1), worst))
    print("docs/tuning.md table %s: worst %.2fx, the page says within %sx" % ("/".join(head[:2]), worst, m.group(1)))

readme = page("README.md")
m = re.search(r"within ([0-9.]+)x of its best hand tuning in the fixed scenes .*?and within ([0-9.]+)x", readme, re.S)
if not m:
    fail.append("README.md: no 'within ...x of its best hand tuning in the fixed scenes ... and within ...x'")
else:
    if abs(float(m.group(1)) - max(fixed)) > 1e-9:
        fail.append("README.md says %sx from hand tuning, docs/tuning.md's fixed scenes reach %.2fx" % (m.group(1), max(fixed)))
    if abs(float(m.group(2)) - max(changing)) > 1e-9:
        fail.append("README.md says %sx after a change, docs/tuning.md's changing scenes reach %.2fx" % (m.group(2), max(changing)))
    print("README.md hand tuning: %s / %s, docs/tuning.md: %.2f / %.2f" % (m.group(1), m.group(2), max(fixed), max(changing)))

python = page("docs/python.md")
py = [t for t in tables(python) if any(h.startswith("ratio") for h in t[0])]
if not py:
    fail.append("docs/python.md: no table with a ratio column")
else:
    head, rows, _ = py[0]
    worst = max(ratios(head, rows, lambda h: h.startswith("ratio")))
    m = re.search(r"within ([0-9.]+)x of the same frame in C", readme)
    if not m or abs(float(m.group(1)) - worst) > 1e-9:
        fail.append("README.md's Python-to-C figure (%s) is not docs/python.md's worst ratio %.2f"
                    % (m.group(1) if m else "missing", worst))
    else:
        print("README.md Python: within %sx, docs/python.md's worst %.2f" % (m.group(1), worst))

# The Python speedups: the README's "Ax and Bx faster" are python.md's
# "quadgrid vs the fastest alternative" row at 100,000 and 1,000,000.
m = re.search(r"a frame is ([0-9]+)x and ([0-9]+)x faster than the fastest of SciPy", readme)
row = re.search(r"^\| \*\*quadgrid vs the fastest alternative\*\* \| [^|]* \| \*\*([0-9]+)x\*\*[^|]*\| \*\*([0-9]+)x\*\*", python, re.M)
if not m or not row or m.groups() != row.groups():
    fail.append("README.md's Python speedups %s are not docs/python.md's %s"
                % (m.groups() if m else None, row.groups() if row else None))
else:
    print("README.md Python speedups %sx, %sx: docs/python.md's" % m.groups())

# WebAssembly against native: the README's range is js.md's SIMD128 / native column.
js = page("docs/js.md")
wasm = [t for t in tables(js) if "SIMD128 / native" in t[0]]
m = re.search(r"WebAssembly within ([0-9.]+)-([0-9.]+)x of native", readme)
if not wasm or not m:
    fail.append("README.md's WebAssembly range or docs/js.md's SIMD128 / native table is missing")
else:
    head, rows, _ = wasm[0]
    i = head.index("SIMD128 / native")
    vals = [float(r[i].strip("*")) for r in rows]
    if (float(m.group(1)), float(m.group(2))) != (min(vals), max(vals)):
        fail.append("README.md says WebAssembly %s-%sx of native, docs/js.md's table %.2f-%.2f"
                    % (m.group(1), m.group(2), min(vals), max(vals)))
    else:
        print("README.md WebAssembly %s-%sx: docs/js.md's table" % m.groups())

# The JavaScript speedup at 100,000: js.md's own sentence, and its table.
m = re.search(r"At 100,000 agents it is ([0-9]+)x the fastest of", readme)
t = re.search(r"([0-9]+)x at 100,000 \(([a-z_]+) ([0-9.]+) ms,\s+([a-z-]+) ([0-9.,]+) ms\)", js)
if not m or not t or m.group(1) != t.group(1):
    fail.append("README.md's JavaScript speedup %s is not docs/js.md's %s" % (m and m.group(1), t and t.group(1)))
elif round(float(t.group(5).replace(",", "")) / float(t.group(3))) != int(t.group(1)):
    fail.append("docs/js.md's %sx at 100,000 is not %s / %s" % (t.group(1), t.group(5), t.group(3)))
else:
    print("README.md JavaScript %sx: docs/js.md's" % m.group(1))

# SSE2 against AVX2: the README's bound is platforms.md's.
platforms = page("docs/platforms.md")
m = re.search(r"without AVX2 every kind\s+is within ([0-9.]+)x of its AVX2 frame", readme)
p = re.search(r"SSE2 only against AVX2\*\* \(the bar: within [0-9.]+x\): within ([0-9.]+)x", platforms)
if not m or not p or m.group(1) != p.group(1):
    fail.append("README.md's SSE2 bound %s is not docs/platforms.md's %s" % (m and m.group(1), p and p.group(1)))
else:
    print("README.md SSE2 within %sx: docs/platforms.md's" % m.group(1))

for f in fail:
    print("FAIL:", f, file=sys.stderr)
sys.exit(1 if fail else 0)
