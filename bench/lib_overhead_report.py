#!/usr/bin/python3
"""bench/lib_overhead_report.py - summarise bench/overhead's raw CSV.

Writes OUT.csv (config, workload, metric, median, min, max, runs), OUT.md
(one table per workload) and, with gnuplot (bench/lib_plot.py),
OUT-<workload>.png: throughput
and device requests per second against checker_cache_mb, with checker-off,
journal-off, fuse2fs and kernel ext3 as horizontal reference lines.
"""
import argparse
import csv
import statistics
import sys

import lib_plot

METRICS = [  # (column, heading, format)
    ("seconds", "seconds", "{:.2f}"),
    ("ops_per_s", "ops/s", "{:.0f}"),
    ("mb_per_s", "MB/s", "{:.1f}"),
    ("dev_reads_per_s", "dev reads/s", "{:.0f}"),
    ("dev_writes_per_s", "dev writes/s", "{:.0f}"),
    ("stats_device_reads", "stats reads", "{:.0f}"),
    ("stats_device_writes", "stats writes", "{:.0f}"),
    ("checker_cpu_seconds", "checker CPU s", "{:.2f}"),
    ("checker_cache_hit_rate", "checker hit", "{:.3f}"),
    ("block_cache_hit_rate", "block-cache hit", "{:.3f}"),
    ("peak_rss_kb", "peak RSS MiB", None),
]
CACHE = [("cache8", 8), ("cache32", 32), ("cache128", 128), ("cache512", 512)]
REFS = [("checker-off", "checker off"), ("journal-off", "journal off (checker on, 128 MB)"),
        ("fuse2fs", "fuse2fs"), ("kernel", "kernel ext3")]
CONFIG_ORDER = ["kernel", "fuse2fs", "checker-off", "cache8", "cache32", "cache128", "cache512", "journal-off"]


def fnum(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--machine")
    a = ap.parse_args()
    rows = list(csv.DictReader(open(a.raw)))

    # summary[(cfg, wl)][metric] = (median, min, max, n); bad[(cfg, wl)] = statuses
    summary, bad = {}, {}
    for r in rows:
        key = (r["config"], r["workload"])
        if r["status"] != "ok":
            bad.setdefault(key, []).append(r["status"])
    keys = sorted({(r["config"], r["workload"]) for r in rows},
                  key=lambda k: (k[1], CONFIG_ORDER.index(k[0]) if k[0] in CONFIG_ORDER else 99))
    for key in keys:
        ok = [r for r in rows if (r["config"], r["workload"]) == key and r["status"] == "ok"]
        m = {}
        for col, _, _ in METRICS:
            vals = [fnum(r.get(col)) for r in ok]
            vals = [v for v in vals if v is not None]
            if vals:
                m[col] = (statistics.median(vals), min(vals), max(vals), len(vals))
        summary[key] = m

    with open(a.out + ".csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["config", "workload", "metric", "median", "min", "max", "runs_ok", "runs_bad"])
        for key in keys:
            for col, (md, lo, hi, n) in summary[key].items():
                w.writerow([key[0], key[1], col, f"{md:.4g}", f"{lo:.4g}", f"{hi:.4g}", n, ";".join(bad.get(key, []))])

    workloads = []
    for _, wl in keys:
        if wl not in workloads:
            workloads.append(wl)
    with open(a.out + ".md", "w") as f:
        if a.machine:
            f.write(open(a.machine).read() + "\n")
        for wl in workloads:
            cols = [(c, h, fm) for c, h, fm in METRICS
                    if any(c in summary[k] for k in keys if k[1] == wl)]
            f.write(f"\n### {wl}\n\n| config | " + " | ".join(h for _, h, _ in cols) + " | failed runs |\n")
            f.write("|---|" + "---:|" * len(cols) + "---|\n")
            for key in keys:
                if key[1] != wl:
                    continue
                cells = []
                for c, _, fm in cols:
                    v = summary[key].get(c)
                    if not v:
                        cells.append("-")
                        continue
                    conv = (lambda x: f"{x / 1024:.1f}") if fm is None else fm.format
                    cells.append(f"{conv(v[0])} [{conv(v[1])}–{conv(v[2])}]")
                f.write(f"| {key[0]} | " + " | ".join(cells) + f" | {' '.join(bad.get(key, [])) or '-'} |\n")
    print(open(a.out + ".md").read())

    plot(a.out, summary, workloads)
    return 0


def plot(out, summary, workloads):
    """OUT-WORKLOAD.png: three panels (throughput, device reads/s, device
    writes/s) against checker_cache_mb, median with min-max bars, and the
    configurations without a cache size as horizontal lines."""
    for wl in workloads:
        tput = "seconds" if wl == "phases" else "ops_per_s"
        ylab = "total seconds of the phases (lower is better)" if wl == "phases" else "operations per second"
        if not any(summary.get((c, wl), {}).get(tput) for c, _ in CACHE + REFS):
            continue
        panel_list = []
        for col, label in [(tput, ylab), ("dev_reads_per_s", "device reads per second"),
                           ("dev_writes_per_s", "device writes per second")]:
            pts = [(mb,) + summary[(cfg, wl)][col][:3] for cfg, mb in CACHE
                   if summary.get((cfg, wl), {}).get(col)]
            refs = [(name, summary[(cfg, wl)][col][0]) for cfg, name in REFS
                    if summary.get((cfg, wl), {}).get(col)]
            panel_list.append(dict(xlabel="checker_cache_mb", ylabel=label, logx=True,
                                   xtics=[mb for _, mb in CACHE], series=[("checker on", pts)], refs=refs))
        png = f"{out}-{wl}.png"
        if lib_plot.panels(png, f"bench/overhead: {wl} (median, bars min–max)", panel_list):
            print("plot: " + png)


if __name__ == "__main__":
    sys.exit(main())
