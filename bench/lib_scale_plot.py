#!/usr/bin/env python3
"""bench/lib_scale_plot.py OUT.png RESULTS.csv... - the figure of bench/scale:
mount time and peak daemon memory against the size of an empty image, one
line per driver, from the medians of one or more bench/scale results files
(scale.csv, scale-15T.csv).  Needs gnuplot (png terminal)."""
import csv
import os
import subprocess
import sys
import tempfile

SIZE_TIB = {"16G": 16 / 1024, "1T": 1, "15T": 15}


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
                    if size in SIZE_TIB and v is not None:
                        data.setdefault((row["driver"], row["metric"]), {})[size] = v
    series = [("kernel", "mount_s", 1, "kernel ext3 mount"),
              ("fuse2fs", "mount_s", 1, "fuse2fs mount"),
              ("recon", "mount_s", 1, "recon-fuse mount"),
              ("fuse2fs", "peak_rss_mib", 2, "fuse2fs peak RSS"),
              ("recon", "peak_rss_mib", 2, "recon-fuse peak RSS")]
    with tempfile.TemporaryDirectory() as tmp:
        plots = {1: [], 2: []}
        for drv, metric, panel, title in series:
            pts = sorted((SIZE_TIB[s], v) for s, v in data.get((drv, metric), {}).items())
            if not pts:
                continue
            dat = os.path.join(tmp, f"{drv}-{metric}.dat")
            with open(dat, "w") as f:
                for x, y in pts:
                    f.write(f"{x} {y}\n")
            plots[panel].append(f"'{dat}' using 1:2 with linespoints title '{title}'")
        if not plots[1] and not plots[2]:
            sys.exit("lib_scale_plot: no medians of empty images in " + " ".join(files))
        script = os.path.join(tmp, "plot.gp")
        with open(script, "w") as f:
            f.write(f"set terminal pngcairo size 1100,420 noenhanced\nset output '{out}'\n")
            f.write("set multiplot layout 1,2\nset logscale x\nset logscale y\nset grid\n")
            f.write("set xlabel 'empty ext3 image (TiB)'\nset key top left\n")
            f.write("set ylabel 'cold mount (s)'\n")
            f.write("plot " + ", ".join(plots[1]) + "\n")
            f.write("set ylabel 'daemon peak RSS (MiB)'\n")
            f.write("plot " + ", ".join(plots[2]) + "\n")
            f.write("unset multiplot\n")
        r = subprocess.run(["gnuplot", script], capture_output=True, text=True)
        if r.returncode:
            sys.exit("gnuplot failed: " + r.stderr)


if __name__ == "__main__":
    main()
