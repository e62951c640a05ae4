#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Markdown tables of scripts/platforms-bench.sh's CSV (docs/platforms.md).

    scripts/platforms_table.py [bench/results/<machine>/platforms.csv]

One table per size: each kind's AVX2 frame in ms and the SSE2-only and
scalar frames as ratios to it, on agents, mixed and level; then the
WebAssembly table (agents at 100,000, Node scalar and SIMD128 against the
native AVX2 build configured as Node configures it).
"""
import csv
import sys

path = sys.argv[1] if len(sys.argv) > 1 else "bench/results/amd-epyc-2c/platforms.csv"
rows = list(csv.DictReader(open(path)))
kinds = list(dict.fromkeys(r["kind"] for r in rows))
get = {(r["workload"], r["kind"], r["n"], r["form"]): r for r in rows}
workloads = ["agents", "mixed", "level"]


def ms(x):
    v = float(x)
    return f"{v:.3f}" if v < 1 else f"{v:.2f}" if v < 100 else f"{v:.0f}"


for n in sorted({r["n"] for r in rows if r["form"] == "avx2"}, key=int):
    frames = {w: get.get((w, kinds[0], n, "avx2"), {}).get("frames", "?") for w in workloads}
    print(f"N = {int(n):,} (frames: " + ", ".join(f"{w} {frames[w]}" for w in workloads) + ")\n")
    head = "| kind | " + " | ".join(f"{w} AVX2 ms | SSE2 | scalar" for w in workloads) + " |"
    print(head)
    print("|---" * (1 + 3 * len(workloads)) + "|")
    for k in kinds:
        cells = []
        for w in workloads:
            a = get.get((w, k, n, "avx2"))
            if a is None:
                cells += ["", "", ""]
                continue
            cells.append(ms(a["frame_ms"]))
            for form in ("sse2", "scalar"):
                r = get.get((w, k, n, form))
                cells.append(f"{float(r['ratio_to_avx2']):.2f}" if r else "")
        print(f"| {k} | " + " | ".join(cells) + " |")
    print()

if any(r["form"].startswith("wasm") for r in rows):
    print("agents, N = 100,000, 30 frames\n")
    print("| kind | native AVX2 ms | Node scalar ms | Node SIMD128 ms | scalar / native | SIMD128 / native |")
    print("|---|---|---|---|---|---|")
    for k in kinds:
        a = get.get(("agents", k, "100000", "avx2_tuned"))
        s = get.get(("agents", k, "100000", "wasm_scalar"))
        v = get.get(("agents", k, "100000", "wasm_simd128"))
        if a and s and v:
            print(f"| {k} | {ms(a['frame_ms'])} | {ms(s['frame_ms'])} | {ms(v['frame_ms'])} | "
                  f"{float(s['ratio_to_avx2']):.2f} | **{float(v['ratio_to_avx2']):.2f}** |")
