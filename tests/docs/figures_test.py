#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The measured figures README.md quotes from other pages are those pages'
own tables: the hand-tuning bounds from docs/tuning.md, the Python-to-C
ratio from docs/python.md; and every "within ...x (worst: ..., N x)"
sentence of docs/tuning.md is its table's worst ratio.
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

for f in fail:
    print("FAIL:", f, file=sys.stderr)
sys.exit(1 if fail else 0)
