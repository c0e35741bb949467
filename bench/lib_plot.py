#!/usr/bin/python3
"""bench/lib_plot.py - the figures of the benches: PNG files drawn by gnuplot.

As a module (the Python reports import it):
  bars(out, title, ylabel, categories, series, logy=False, hline=None, stacked=False)
      one group of bars per category, one bar per series (side by side, or
      stacked); series = [(name, [value or None, one per category])];
      hline = (value, label): a horizontal reference line (e.g. 1 = the kernel)
  panels(out, title, panels)
      one to three line plots side by side; each panel is a dict with
      xlabel, ylabel, logx, logy, xtics (list of numbers), and
      series = [(name, [(x, y) or (x, y, ylow, yhigh), ...])] (error bars
      when a point has four values), refs = [(name, y)] horizontal lines
As a command (for the shell benches):
  lib_plot.py bars  OUT.png TABLE.tsv [--title T] [--ylabel Y] [--logy] [--stacked]
  lib_plot.py lines OUT.png TABLE.tsv [--title T] [--xlabel X] [--ylabel Y] [--logx] [--logy]
  TABLE.tsv: a header line (what the rows are, then one name per series), then
  one line per category (bars) or x value (lines); tab-separated; '' or '-'
  where a series has no value.
Without gnuplot no figure is drawn: that is reported, and is not an error
(the numbers of a run stand without their figure).
"""
import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile

COLORS = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d",
          "#666666", "#1f78b4", "#b2df8a", "#fb9a99", "#cab2d6"]


def _quote(text):
    """A string for a gnuplot command: single quotes, doubled inside."""
    return "'" + str(text).replace("'", "''") + "'"


def _terminal(width, height):
    r = subprocess.run(["gnuplot", "-e", "set terminal"], capture_output=True, text=True)
    if "pngcairo" in r.stdout + r.stderr:
        return f"set terminal pngcairo size {width},{height} noenhanced font ',10'"
    return f"set terminal png size {width},{height} noenhanced"


def _run(out, script_lines, data_files, width, height):
    """Write the data files and script to a temporary folder, run gnuplot
    (@KEY@ in a script line names data file KEY).  True when OUT was drawn."""
    if not shutil.which("gnuplot"):
        print(f"lib_plot: no gnuplot on PATH, {out} not drawn (Debian: apt install gnuplot-nox)",
              file=sys.stderr)
        return False
    with tempfile.TemporaryDirectory(prefix="bench-plot.") as tmp:
        names = {}
        for key, text in data_files.items():
            names[key] = os.path.join(tmp, f"{key}.dat")
            with open(names[key], "w") as f:
                f.write(text)
        script = [_terminal(width, height), f"set output {_quote(os.path.abspath(out))}",
                  "set datafile separator '\\t'", "set datafile missing '-'"]
        for line in script_lines:
            for key, name in names.items():
                line = line.replace(f"@{key}@", _quote(name))
            script.append(line)
        path = os.path.join(tmp, "plot.gp")
        with open(path, "w") as f:
            f.write("\n".join(script) + "\n")
        r = subprocess.run(["gnuplot", path], capture_output=True, text=True)
        if r.returncode:
            print(f"lib_plot: gnuplot failed on {out}: {r.stderr.strip()}", file=sys.stderr)
            return False
    return True


def _num(v):
    return "-" if v is None else repr(float(v))


def bars(out, title, ylabel, categories, series, logy=False, hline=None, stacked=False):
    series = [(n, vals) for n, vals in series if any(v is not None for v in vals)]
    if not categories or not series:
        print(f"lib_plot: nothing to draw in {out}", file=sys.stderr)
        return False
    rows = ["\t".join([c.replace("\t", " ")] + [_num(vals[i]) for _, vals in series])
            for i, c in enumerate(categories)]
    width = max(900, min(2000, 140 + len(categories) * (40 + 14 * len(series) * (not stacked))))
    lines = [f"set title {_quote(title)}", f"set ylabel {_quote(ylabel)}",
             "set style data histograms",
             "set style histogram rowstacked" if stacked else "set style histogram clustered gap 1",
             "set style fill solid 0.85 border -1", "set boxwidth 0.8" if stacked else "",
             "set xtics rotate by -30 scale 0 nomirror", "set grid ytics",
             "set key outside right top vertical Left reverse"]
    if logy:
        positive = [v for _, vals in series for v in vals if v is not None and v > 0]
        low = min(positive + [hline[0] if hline else 1]) / 2
        lines += ["set logscale y", f"set yrange [{low}:*]"]
    else:
        lines.append("set yrange [0:*]")
    parts = []
    for k, (name, _) in enumerate(series):
        src = "@data@" if k == 0 else "''"
        xt = ":xtic(1)" if k == 0 else ""
        parts.append(f"{src} using {k + 2}{xt} title {_quote(name)} lc rgb '{COLORS[k % len(COLORS)]}'")
    if hline:
        parts.append(f"{hline[0]} with lines dt 2 lw 2 lc rgb '#000000' title {_quote(hline[1])}")
    lines.append("plot " + ", ".join(parts))
    return _run(out, lines, {"data": "\n".join(rows) + "\n"}, width, 520)


def panels(out, title, panel_list):
    panel_list = [p for p in panel_list if any(pts for _, pts in p.get("series", []))]
    if not panel_list:
        print(f"lib_plot: nothing to draw in {out}", file=sys.stderr)
        return False
    data, lines = {}, []
    if len(panel_list) > 1:
        lines.append(f"set multiplot layout 1,{len(panel_list)} title {_quote(title)}")
    else:
        lines.append(f"set title {_quote(title)}")
    for i, p in enumerate(panel_list):
        lines += ["unset logscale", "set grid", "set key below", "set autoscale",
                  f"set xlabel {_quote(p.get('xlabel', ''))}", f"set ylabel {_quote(p.get('ylabel', ''))}"]
        xs = [pt[0] for _, pts in p["series"] for pt in pts]
        if p.get("logx"):
            lines += ["set logscale x", f"set xrange [{min(xs) / 1.5}:{max(xs) * 1.5}]"]
        lines.append("set logscale y" if p.get("logy") else "set yrange [0:*]")
        if p.get("xtics"):
            lines.append("set xtics (" + ", ".join(str(x) for x in p["xtics"]) + ")")
        else:
            lines.append("set xtics autofreq")
        parts = []
        for k, (name, pts) in enumerate(p["series"]):
            if not pts:
                continue
            key = f"p{i}s{k}"
            data[key] = "".join("\t".join(_num(v) for v in pt) + "\n" for pt in sorted(pts))
            color = f"lc rgb '{COLORS[k % len(COLORS)]}'"
            if len(pts[0]) == 4:
                parts.append(f"@{key}@ using 1:2:3:4 with yerrorlines lw 2 {color} title {_quote(name)}")
            else:
                parts.append(f"@{key}@ using 1:2 with linespoints lw 2 {color} title {_quote(name)}")
        for k, (name, y) in enumerate(p.get("refs", [])):
            parts.append(f"{y} with lines dt {k + 2} lw 2 lc rgb '{COLORS[(k + 4) % len(COLORS)]}' "
                         f"title {_quote(name)}")
        lines.append("plot " + ", ".join(parts))
    if len(panel_list) > 1:
        lines.append("unset multiplot")
    return _run(out, lines, data, 520 * len(panel_list) + 80, 480)


def _read_table(path):
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f, delimiter="\t") if r]
    if len(rows) < 2:
        sys.exit(f"lib_plot: {path}: a header line and at least one row are needed")
    head, body = rows[0], rows[1:]

    def val(cell):
        cell = cell.strip()
        return None if cell in ("", "-") else float(cell)
    return head, [(r[0], [val(c) for c in r[1:len(head)]] + [None] * (len(head) - len(r)))
                  for r in body]


def main():
    ap = argparse.ArgumentParser(description="Draw a bench figure from a tab-separated table.")
    ap.add_argument("kind", choices=["bars", "lines"])
    ap.add_argument("out")
    ap.add_argument("table")
    ap.add_argument("--title", default="")
    ap.add_argument("--xlabel", default="")
    ap.add_argument("--ylabel", default="")
    ap.add_argument("--logx", action="store_true")
    ap.add_argument("--logy", action="store_true")
    ap.add_argument("--stacked", action="store_true")
    a = ap.parse_args()
    head, body = _read_table(a.table)
    names = head[1:]
    if a.kind == "bars":
        bars(a.out, a.title, a.ylabel, [c for c, _ in body],
             [(n, [vals[k] for _, vals in body]) for k, n in enumerate(names)],
             logy=a.logy, stacked=a.stacked)
    else:
        xs = [float(c) for c, _ in body]
        series = [(n, [(x, vals[k]) for x, (_, vals) in zip(xs, body) if vals[k] is not None])
                  for k, n in enumerate(names)]
        panels(a.out, a.title, [dict(xlabel=a.xlabel or head[0], ylabel=a.ylabel, logx=a.logx,
                                     logy=a.logy, series=series)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
