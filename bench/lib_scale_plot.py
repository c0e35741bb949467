#!/usr/bin/env python3
"""bench/lib_scale_plot.py OUT.png RESULTS.csv... - the figure of bench/scale:
against the size of an empty image, one line per driver, the cold mount
time, the daemon's peak memory and the time of the fixed workload (200
fsynced 4 KiB files), from the medians of one or more bench/scale results
files (later files win where two have the same point).  Drawn by
bench/lib_plot.py (gnuplot)."""
import csv
import sys

import lib_plot

UNIT_TIB = {"K": 2 ** -30, "M": 2 ** -20, "G": 2 ** -10, "T": 1, "P": 2 ** 10}
DRIVERS = [("kernel", "kernel ext3"), ("fuse2fs", "fuse2fs"), ("recon", "recon-fuse")]
PANELS = [("mount_s", "cold mount (s)"), ("peak_rss_mib", "daemon peak RSS (MiB)"),
          ("workload_s", "200 fsynced 4 KiB files (s)")]


def size_tib(name):
    """An image size as bench/scale names it (16G, 1T, 15T) in TiB, or None."""
    try:
        return float(name[:-1]) * UNIT_TIB[name[-1].upper()]
    except (ValueError, KeyError, IndexError):
        return None


def median(cell):
    try:
        return float(cell.split()[0])
    except (ValueError, IndexError):
        return None


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, files = sys.argv[1], sys.argv[2:]
    data = {}      # (driver, metric) -> {size: value}
    for path in files:
        with open(path) as f:
            for row in csv.DictReader(f):
                for col, cell in row.items():
                    if not col.endswith("-empty"):
                        continue
                    size = col[: -len("-empty")]
                    v = median(cell or "")
                    if size_tib(size) is not None and v is not None:
                        data.setdefault((row["driver"], row["metric"]), {})[size] = v
    panel_list = []
    for metric, label in PANELS:
        series = [(name, sorted((size_tib(s), v) for s, v in data.get((drv, metric), {}).items()))
                  for drv, name in DRIVERS]
        panel_list.append(dict(xlabel="empty ext3 image (TiB)", ylabel=label, logx=True, logy=True,
                               series=series))
    if not any(pts for p in panel_list for _, pts in p["series"]):
        sys.exit("lib_scale_plot: no medians of empty images in " + " ".join(files))
    lib_plot.panels(out, "bench/scale: what the size of an empty image costs (medians, log scales)",
                    panel_list)


if __name__ == "__main__":
    main()
