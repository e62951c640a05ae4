#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The benchmark results kept as data, per machine (Box2D's benchmark/results).

  scripts/bench.py run [--machine NAME] [--quick] [--bench PATH]
      runs quadgrid-bench's standard set and writes one CSV a workload to
      bench/results/<machine>/<workload>.csv, and machine.txt (CPU, cores,
      compiler, date). NAME defaults to the CPU model and core count
      (e.g. amd-epyc-2c).
  scripts/bench.py report [--check]
      regenerates the tables between the markers in docs/benchmarks.md from
      every bench/results/<machine>/, the plots bench/results/<machine>/*.png
      when gnuplot is there, and the marked figures of README.md,
      docs/kinds.md and docs/scenes.md (REGIONS below). --check writes nothing and fails when a
      page differs from what the results give.

Only the standard library: a fresh Debian machine has python3 and nothing else.
"""
import argparse
import csv
import datetime
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
DOC = os.path.join(ROOT, "docs", "benchmarks.md")
BEGIN, END = "<!-- results:begin (scripts/bench.py report) -->", "<!-- results:end -->"

# The standard set: (file, workload, arguments). --quick divides the sizes
# and frames for a smoke run; the kept results are full runs.
STANDARD = [
    ("agents", "agents", ["--kind", "all", "--n", "100000", "--frames", "30"]),
    ("agents_1m", "agents", ["--kind", "all", "--n", "1000000", "--frames", "10"]),
    ("mixed", "mixed", ["--kind", "all", "--n", "100000", "--frames", "30"]),
    ("level", "level", ["--kind", "all", "--n", "100000", "--frames", "30"]),
    ("scenes", "scenes", ["--n", "100000", "--frames", "10"]),
    ("static", "static", ["--kind", "all", "--n", "1000000", "--queries", "100000"]),
    ("rays", "rays", ["--kind", "all", "--n", "1000000", "--queries", "20000"]),
    ("knn", "knn", ["--kind", "all", "--n", "1000000", "--queries", "20000"]),
]


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return platform.processor() or platform.machine()


def default_machine():
    slug = re.sub(r"[^a-z0-9]+", "-", cpu_model().lower()).strip("-")
    return f"{slug}-{os.cpu_count()}c"


def quick_args(args):
    """Sizes and frames cut by 10 (at least 1,000 elements, 3 frames)."""
    out = list(args)
    for flag, low in (("--n", 1000), ("--frames", 3), ("--queries", 100)):
        if flag in out:
            i = out.index(flag) + 1
            out[i] = str(max(low, int(out[i]) // 10))
    return out


def rows_of(text, fmt):
    """The bench's output as dicts: CSV (one header a run) or JSON lines."""
    if fmt == "json":
        return [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    rows, header = [], None
    for line in text.splitlines():
        if line.startswith("workload,"):
            header = line.split(",")
        elif header and line:
            rows.append(dict(zip(header, next(csv.reader([line])))))
    return rows


def run(opts):
    bench = opts.bench or os.path.join(ROOT, "build", "apps", "bench", "quadgrid-bench")
    if not os.access(bench, os.X_OK):
        sys.exit(f"bench.py: no quadgrid-bench at {bench} (build first: scripts/test.sh or cmake)")
    machine = opts.machine or default_machine()
    folder = os.path.join(RESULTS, machine)
    os.makedirs(folder, exist_ok=True)
    only = set(opts.only.split(",")) if opts.only else None
    for name, workload, args in STANDARD:
        if only and name not in only:
            continue
        args = quick_args(args) if opts.quick else args
        fmt = "json" if workload == "scenes" else "csv"
        cmd = [bench, workload, *args, "--" + fmt]
        print("bench.py:", " ".join(cmd[1:]), file=sys.stderr, flush=True)
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode not in (0,):
            sys.stderr.write(done.stderr[-2000:])
            sys.exit(f"bench.py: {workload} failed with status {done.returncode}")
        rows = rows_of(done.stdout, fmt)
        if not rows:
            sys.exit(f"bench.py: {workload} printed no results")
        keys = list(rows[0].keys())
        for r in rows[1:]:
            keys += [k for k in r if k not in keys]
        with open(os.path.join(folder, name + ".csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(rows)
    cc = subprocess.run(["cc", "--version"], capture_output=True, text=True).stdout.splitlines()
    with open(os.path.join(folder, "machine.txt"), "w") as f:
        f.write(f"cpu: {cpu_model()}\ncores: {os.cpu_count()}\n")
        f.write(f"compiler: {cc[0] if cc else 'unknown'}\n")
        f.write(f"date: {datetime.date.today().isoformat()}\n")
        f.write(f"quick: {'yes' if opts.quick else 'no'}\n")
    print(f"bench.py: wrote {os.path.relpath(folder, ROOT)}", file=sys.stderr)


def read(folder, name):
    path = os.path.join(folder, name + ".csv")
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def fnum(v, digits=3):
    try:
        x = float(v)
    except (TypeError, ValueError):
        return str(v)
    if x < 0:
        return "-"
    return f"{x:,.{digits}f}"


def kib(v):
    try:
        return f"{int(v) / 1024:,.0f}"
    except (TypeError, ValueError):
        return "-"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def frame_table(rows, extra=()):
    """Kinds and peers by total frame time, fastest first."""
    rows = sorted(rows, key=lambda r: float(r["total_ms"]))
    best = float(rows[0]["total_ms"]) if rows else 1.0
    body = []
    for r in rows:
        body.append([f"`{r['kind']}`", fnum(r["update_ms"]), fnum(r["pairs_ms"]), fnum(r["total_ms"]),
                     f"{float(r['total_ms']) / best:.2f}", kib(r.get("index_bytes"))] +
                    [r.get(k, "") for k in extra])
    return table(["kind", "update ms", "pairs ms", "frame ms", "x fastest", "index KiB"] + list(extra), body)


def scenes_table(rows):
    worst = {r["kind"]: r for r in rows if not r.get("scene") and r.get("worst_ratio")}
    rows = [r for r in rows if r.get("scene")]
    scenes = []
    for r in rows:
        if r["scene"] not in scenes:
            scenes.append(r["scene"])
    kinds = []
    for r in rows:
        if r["kind"] not in kinds:
            kinds.append(r["kind"])
    cell = {(r["kind"], r["scene"]): r for r in rows}
    body = []
    for k in kinds:
        line = [f"`{k}`"]
        for s in scenes:
            r = cell.get((k, s))
            line.append("-" if r is None or r.get("status") != "ok" else
                        f"{fnum(r['frame_ms'])} ({float(r['ratio']):.2f})")
        w = worst.get(k)
        line.append(f"{float(w['worst_ratio']):.2f} ({w['worst_scene']})" if w else "")
        body.append(line)
    return table(["kind"] + scenes + ["worst ratio"], body)


def query_table(rows, timing):
    rows = sorted(rows, key=lambda r: float(r[timing[0]]))
    return table(["kind", "build ms"] + [t.replace("_ns", " ns") for t in timing],
                 [[f"`{r['kind']}`", fnum(r["build_ms"], 1)] + [fnum(r[t], 0) for t in timing] for r in rows])


def plot(folder, name, rows):
    """A bar chart of the median frame per kind (gnuplot, when it is there)."""
    if not rows or shutil.which("gnuplot") is None:
        return None
    rows = sorted(rows, key=lambda r: float(r["total_ms"]))
    data = os.path.join(folder, name + ".dat")
    with open(data, "w") as f:
        for r in rows:
            f.write(f"{r['kind']} {r['total_ms']}\n")
    png = os.path.join(folder, name + ".png")
    # Log scale: the kinds and the slowest peers are 100x apart.
    script = (f"set terminal pngcairo noenhanced size 900,420; set output '{png}';"
              f"set style data histograms; set style fill solid 0.8; set logscale y;"
              f"set ylabel 'ms a frame (log scale)'; set xtics rotate by -35; set key off; set rmargin 10; set bmargin 7;"
              f"set title '{name}, N = {rows[0]['n']}, median frame';"
              f"plot '{data}' using 2:xtic(1)")
    subprocess.run(["gnuplot", "-e", script], check=False, capture_output=True)
    os.remove(data)
    return png if os.path.exists(png) else None


# Figures outside benchmarks.md: each region between
# <!-- bench:NAME (scripts/bench.py report) --> and <!-- bench:end --> in a
# page below is written from bench/results/<REGION_MACHINE>/ by REGIONS[NAME];
# `report --check` (the ctest bench_report) fails when a page differs.
REGION_PAGES = ["README.md", "docs/kinds.md", "docs/scenes.md"]
REGION_MACHINE = "amd-epyc-2c"
REGION_RE = re.compile(r"(<!-- bench:([a-z_-]+) \(scripts/bench\.py report\) -->\n)(.*?)(<!-- bench:end -->)", re.S)

PEER_NAMES = {
    "chipmunk_bbtree": "Chipmunk2D 7 cpBBTree",
    "chipmunk_spacehash": "Chipmunk2D 7 cpSpaceHash",
    "box2d_dynamic_tree": "Box2D 2.4 b2DynamicTree (`level`: b2BroadPhase)",
    "box2d_broadphase": "Box2D 2.4 b2DynamicTree (`level`: b2BroadPhase)",
    "boost_rtree": "Boost.Geometry R-tree",
    "sweep": "plain sort-and-sweep (the answers' reference)",
    "sap": "expert sort-and-sweep (`sap`)",
}


def ms(x):
    """A frame time as the README prints it: three figures, thousands with commas."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.2f}" if x >= 1 else f"{x:.3f}"


def region_readme_summary(folder):
    cols = [("agents", "agents 100k"), ("mixed", "mixed 100k"), ("level", "level 100k"), ("agents_1m", "agents 1M")]
    times = {}
    for name, _ in cols:
        for r in read(folder, name):
            label = PEER_NAMES.get(r["kind"], f"`{r['kind']}`")
            times.setdefault(label, {})[name] = float(r["total_ms"])
    worst = {f"`{r['kind']}`": float(r["worst_ratio"]) for r in read(folder, "scenes")
             if r.get("workload") == "scenes_worst" and r.get("worst_ratio")}
    worst[PEER_NAMES["sweep"]] = 1.0
    kinds = [k for k in times if k.startswith("`")]
    # The kinds by their agents frame, except the three slow trees last (as kinds.md lists them).
    order = ["point_grid", "quadtree", "grid", "multi_grid", "loose_grid", "loose_quadtree", "level_quadtree",
             "bucket_quadtree"]
    kinds.sort(key=lambda k: order.index(k.strip("`")) if k.strip("`") in order else len(order))
    peers = [PEER_NAMES[p] for p in ("chipmunk_bbtree", "chipmunk_spacehash", "box2d_dynamic_tree", "boost_rtree",
                                     "sap", "sweep") if PEER_NAMES[p] in times]
    best = {name: min(t[name] for t in times.values() if name in t) for name, _ in cols}
    body = []
    for label in kinds + peers:
        line = [label]
        for name, _ in cols:
            v = times[label].get(name)
            line.append("" if v is None else f"**{ms(v)}**" if v == best[name] else ms(v))
        w = worst.get(label)
        line.append("" if w is None else "1" if label == PEER_NAMES["sweep"] else f"{w:.2f}")
        body.append(line)
    return table(["implementation"] + [c for _, c in cols] + ["scenes: worst ratio"], body) + "\n"


def region_scenes_worst(folder):
    rows = [r for r in read(folder, "scenes") if r.get("workload") == "scenes_worst" and r.get("worst_ratio")]
    held = [r for r in rows if r.get("in_bar") == "True"]
    free = [r for r in rows if r.get("in_bar") != "True"]
    top = max(held, key=lambda r: float(r["worst_ratio"]))
    text = (f"every kind's worst frame is at most {float(top['worst_ratio']):.2f} times the sort-and-sweep's "
            f"(`{top['kind']}`, `{top['worst_scene']}`")
    text += "".join(f"; `{r['kind']}` {float(r['worst_ratio']):.2f}, `{r['worst_scene']}`" for r in free)
    return text + ").\n"


def region_scenes_table(folder):
    rows = read(folder, "scenes")
    head = f"N = {int(rows[0]['n']):,}, {rows[0]['frames']} frames.\n\n" if rows else ""
    return head + scenes_table(rows) + "\n"


REGIONS = {"readme-summary": region_readme_summary, "scenes-worst": region_scenes_worst,
           "scenes-table": region_scenes_table}


def write_regions(check):
    """Rewrites (or with check, compares) every marked region; returns the stale pages."""
    folder = os.path.join(RESULTS, REGION_MACHINE)
    stale = []
    for page in REGION_PAGES:
        path = os.path.join(ROOT, page)
        text = open(path).read()

        def fill(m):
            if m.group(2) not in REGIONS:
                sys.exit(f"bench.py: {page}: unknown region {m.group(2)}")
            return m.group(1) + REGIONS[m.group(2)](folder) + m.group(4)

        new = REGION_RE.sub(fill, text)
        if new != text:
            stale.append(page)
            if not check:
                with open(path, "w") as f:
                    f.write(new)
    return stale


def report(opts):
    if getattr(opts, "check", False):
        saved = open(DOC).read()
        try:
            report_tables(plots=False)
            stale = ["docs/benchmarks.md"] if open(DOC).read() != saved else []
        finally:
            with open(DOC, "w") as f:
                f.write(saved)
        stale += write_regions(True)
        if stale:
            sys.exit("bench.py report --check: figures differ from bench/results in " + ", ".join(stale) +
                     " (run scripts/bench.py report)")
        print("bench.py report --check: every generated figure matches bench/results", file=sys.stderr)
        return
    report_tables()
    write_regions(False)


def report_tables(plots=True):
    parts = []
    for machine in sorted(os.listdir(RESULTS)) if os.path.isdir(RESULTS) else []:
        folder = os.path.join(RESULTS, machine)
        if not os.path.isdir(folder):
            continue
        info = open(os.path.join(folder, "machine.txt")).read().strip().replace("\n", "; ") \
            if os.path.exists(os.path.join(folder, "machine.txt")) else machine
        parts.append(f"### {machine}\n\n{info}. Files: `bench/results/{machine}/`.\n")
        for name, workload in (("agents", "agents"), ("agents_1m", "agents"), ("mixed", "mixed"),
                               ("level", "level")):
            rows = read(folder, name)
            if rows:
                png = plot(folder, name, rows) if plots else None
                # Without gnuplot (or in --check) the plot already kept stays.
                if png is None and os.path.exists(os.path.join(folder, name + ".png")):
                    png = os.path.join(folder, name + ".png")
                title = f"`{workload}`, N = {int(rows[0]['n']):,}"
                parts.append(f"#### {title}\n\n" + frame_table(rows) + "\n")
                if png:
                    parts.append(f"![{name}](../bench/results/{machine}/{os.path.basename(png)})\n")
        rows = read(folder, "scenes")
        if rows:
            parts.append("#### The scene table: frame ms (ratio to the sort-and-sweep), N = "
                         f"{int(rows[0]['n']):,}\n\n" + scenes_table(rows) + "\n")
        for name, timing in (("static", ["query_ns"]), ("rays", ["ray_ns", "closest_ns"]), ("knn", ["query_ns"])):
            rows = read(folder, name)
            if rows and all(t in rows[0] for t in timing):
                parts.append(f"#### `{name}`, N = {int(rows[0]['n']):,}\n\n" + query_table(rows, timing) + "\n")
    text = open(DOC).read()
    if BEGIN not in text or END not in text:
        sys.exit(f"bench.py: {DOC} has no {BEGIN} ... {END} markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    body = "\n".join(parts) if parts else "No results yet: run `scripts/bench.py run`.\n"
    with open(DOC, "w") as f:
        f.write(head + BEGIN + "\n" + body + "\n" + END + tail)
    if plots:
        print(f"bench.py: tables of {len([p for p in parts if p.startswith('### ')])} machine(s) "
              f"written to docs/benchmarks.md", file=sys.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--machine")
    r.add_argument("--bench")
    r.add_argument("--quick", action="store_true")
    r.add_argument("--only", help="comma-separated result names (agents,mixed,...)")
    rp = sub.add_parser("report")
    rp.add_argument("--check", action="store_true", help="fail if a page's generated figures differ (nothing written)")
    opts = p.parse_args()
    (run if opts.cmd == "run" else report)(opts)


if __name__ == "__main__":
    main()
