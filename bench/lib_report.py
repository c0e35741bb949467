#!/usr/bin/python3
"""bench/lib_report.py - summarise bench/phases raw results.

Reads the raw CSV (round,driver,phase,seconds,status,dev_reads,dev_writes,
cpu_seconds,ops,sync_seconds),
prints the table (median [min-max] per driver, ratios of medians) and writes
OUT.csv, OUT.md and the figure OUT.png: per phase, each driver's median over
the kernel's (log scale; without a kernel run, the median seconds).
Positional arguments are phase=label pairs, in order.
"""
import argparse
import csv
import statistics
import sys

import lib_plot

DRIVER_NAME = {"kernel": "kernel ext3", "kernel-ext4": "kernel ext4", "tmpfs": "kernel tmpfs",
               "fuse2fs": "fuse2fs", "recon": "recon-fuse",
               "recon-nochk": "recon checker off", "recon-nojnl": "recon journal off",
               "recon-nochk-nojnl": "recon checker+journal off", "recon-uring": "recon over io_uring", "recon-devfuse": "recon /dev/fuse only",
               "recon-base": "recon-fuse, base commit",
               "recon-t2": "recon-fuse, 2 threads", "recon-base-t2": "base commit, 2 threads",
               "fuse-null": "FUSE floor (fuse-null)",
               "fuse-null-uring": "FUSE floor over io_uring (fuse-null -u)"}
UNTIMED = ("rtt_us", "peak_rss_mb", "checker_cpu_s")   # per-round figures, not phases


def fmt(v):
    return f"{v:.2f}" if v < 100 else f"{v:.0f}"


def report_args(source_flag):
    """The command line both reports share: SOURCE_FLAG (the input file),
    --out, --machine, --drivers, then phase=label pairs in order. Returns the
    arguments, the phases in order, their labels and the drivers."""
    ap = argparse.ArgumentParser()
    ap.add_argument(source_flag, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--machine")
    ap.add_argument("--drivers", required=True)
    ap.add_argument("labels", nargs="*")
    a = ap.parse_args()
    order, label = [], {}
    for pl in a.labels:
        phase, _, text = pl.partition("=")
        order.append(phase)
        label[phase] = text
    return a, order, label, a.drivers.split(",")


def read_raw(path):
    """The raw CSV of bench/phases: its rows, and per (phase, driver) the
    measurements of the rounds that succeeded and the statuses of those that
    did not: dict(values, bad, reads, writes, cpu, by_round: round ->
    dict(seconds, ops: the phase's operations, sync: the seconds of its
    closing syncfs, 0 for a phase without one; None where the CSV has no
    such column))."""
    rows = list(csv.DictReader(open(path)))
    cells = {}
    for r in rows:
        c = cells.setdefault((r["phase"], r["driver"]),
                             {"values": [], "by_round": {}, "bad": [], "reads": [], "writes": [], "cpu": []})
        if r["status"] == "ok" and r["seconds"]:
            c["values"].append(float(r["seconds"]))
            c["by_round"][r["round"]] = {
                "seconds": float(r["seconds"]), "ops": int(r["ops"]) if r.get("ops") else None,
                "sync": float(r["sync_seconds"] or 0) if "sync_seconds" in r else None}
            if r.get("cpu_seconds"):
                c["cpu"].append(float(r["cpu_seconds"]))
            if r["dev_reads"]:
                c["reads"].append(int(r["dev_reads"]))
                c["writes"].append(int(r["dev_writes"]))
        else:
            c["bad"].append(r["status"])
    return rows, cells


def cell_median(cells, p, d):
    """Median seconds of PHASE on DRIVER; None unless every round succeeded."""
    c = cells.get((p, d))
    if not c or not c["values"] or c["bad"]:
        return None
    return statistics.median(c["values"])


def main():
    a, order, label, drivers = report_args("--raw")

    rows, cells = read_raw(a.raw)
    present = {r["phase"] for r in rows}
    order = [p for p in order if p in present]

    def med(p, d):
        return cell_median(cells, p, d)

    def cell_text(p, d):
        c = cells.get((p, d))
        if not c:
            return "-"
        txt = ""
        if c["values"]:
            v = c["values"]
            txt = f"{fmt(statistics.median(v))} [{fmt(min(v))}–{fmt(max(v))}]"
        if c["bad"]:
            counts = {}
            for s in c["bad"]:
                counts[s] = counts.get(s, 0) + 1
            txt += (" " if txt else "") + " ".join(f"{s}×{n}" for s, n in counts.items()).upper()
        return txt

    def ratio(p, num, den):
        x, y = med(p, num), med(p, den)
        if x is None or y is None or y == 0:
            return "-"
        return f"{x / y:.2f}"

    ratios = []
    if "recon" in drivers and "fuse2fs" in drivers:
        ratios.append(("recon/fuse2fs", "recon", "fuse2fs"))
    if "recon" in drivers and "kernel" in drivers:
        ratios.append(("recon/kernel", "recon", "kernel"))
    if "fuse-null" in drivers and "kernel" in drivers:
        ratios.append(("null/kernel", "fuse-null", "kernel"))
    if "recon" in drivers and "fuse-null" in drivers:
        ratios.append(("recon/null", "recon", "fuse-null"))
    if "recon-t2" in drivers and "recon" in drivers:
        ratios.append(("2 threads/1", "recon-t2", "recon"))
    if "recon-base-t2" in drivers and "recon-base" in drivers:
        ratios.append(("base: 2 threads/1", "recon-base-t2", "recon-base"))
    if "recon-devfuse" in drivers and "fuse-null" in drivers:
        ratios.append(("recon dev-fuse/null", "recon-devfuse", "fuse-null"))
    if "recon-uring" in drivers and "fuse-null-uring" in drivers:
        ratios.append(("recon io_uring/null io_uring", "recon-uring", "fuse-null-uring"))
    if "fuse-null-uring" in drivers and "fuse-null" in drivers:
        ratios.append(("null io_uring/dev-fuse", "fuse-null-uring", "fuse-null"))
    if "recon" not in drivers and "fuse2fs" in drivers and "kernel" in drivers:
        ratios.append(("fuse2fs/kernel", "fuse2fs", "kernel"))
    # what a change costs: recon against another commit's build
    if "recon-base" in drivers and "kernel" in drivers:
        ratios.append(("base/kernel", "recon-base", "kernel"))
    if "recon" in drivers and "recon-base" in drivers:
        ratios.append(("recon/base", "recon", "recon-base"))
    # the checker's cost: checker on / off, journal on and journal off
    if "recon" in drivers and "recon-nochk" in drivers:
        ratios.append(("checker on/off (journal on)", "recon", "recon-nochk"))
    if "recon-nojnl" in drivers and "recon-nochk-nojnl" in drivers:
        ratios.append(("checker on/off (journal off)", "recon-nojnl", "recon-nochk-nojnl"))
    if "recon-uring" in drivers and "recon-devfuse" in drivers:
        ratios.append(("io_uring/dev-fuse", "recon-uring", "recon-devfuse"))
    elif "recon" in drivers and "recon-devfuse" in drivers:
        ratios.append(("recon/dev-fuse", "recon", "recon-devfuse"))
    elif "recon" in drivers and "recon-uring" in drivers:
        ratios.append(("io_uring/default", "recon-uring", "recon"))
    if "recon" in drivers and "recon-nojnl" in drivers:
        ratios.append(("journal on/off", "recon", "recon-nojnl"))

    header = ["phase (seconds; median [min–max])"] + [DRIVER_NAME[d] for d in drivers] + [r[0] for r in ratios]
    table = []
    timed = [p for p in order if p not in UNTIMED]
    for p in order:
        name = label.get(p, p)
        table.append([name] + [cell_text(p, d) for d in drivers] +
                     [ratio(p, n, dd) if p != "checker_cpu_s" else "-" for _, n, dd in ratios])
    # Total of the timed phases, per round, where every phase succeeded.
    tot = {}
    for d in drivers:
        per_round = {}
        ok = True
        for r in rows:
            if r["driver"] != d or r["phase"] in UNTIMED:
                continue
            if r["status"] != "ok" or not r["seconds"]:
                ok = False
                break
            per_round[r["round"]] = per_round.get(r["round"], 0.0) + float(r["seconds"])
        tot[d] = list(per_round.values()) if ok and per_round else None
    if len(timed) > 1:
        trow = ["total of the phases"]
        for d in drivers:
            v = tot[d]
            trow.append(f"{fmt(statistics.median(v))} [{fmt(min(v))}–{fmt(max(v))}]" if v else "-")
        for _, n, dd in ratios:
            x, y = tot[n], tot[dd]
            trow.append(f"{statistics.median(x) / statistics.median(y):.2f}" if x and y else "-")
        table.append(trow)

    # Plain text table on stdout.
    widths = [max(len(str(r[i])) for r in [header] + table) for i in range(len(header))]
    line = lambda r: " | ".join(str(c).ljust(w) for c, w in zip(r, widths))
    print(line(header))
    print("-+-".join("-" * w for w in widths))
    for r in table:
        print(line(r))

    # Markdown.
    with open(a.out + ".md", "w") as f:
        if a.machine:
            f.write(open(a.machine).read() + "\n")
        f.write("| " + " | ".join(header) + " |\n")
        f.write("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|\n")
        for r in table:
            f.write("| " + " | ".join(r) + " |\n")
        cpu_drv = [d for d in drivers if any(cells.get((p, d), {}).get("cpu") for p in timed)]
        if cpu_drv:
            f.write("\nCPU seconds of the FUSE daemon per phase (user + system, all threads, from "
                    "/proc/PID/stat; median [min–max]); 'checker CPU' = CPU with the checker on minus "
                    "CPU with it off (difference of medians):\n\n")
            pairs = [(t.replace("checker on/off", "checker CPU"), n, dd) for t, n, dd in ratios
                     if t.startswith("checker on/off") and n in cpu_drv and dd in cpu_drv]
            f.write("| phase | " + " | ".join(DRIVER_NAME[d] for d in cpu_drv) +
                    "".join(f" | {t}" for t, _, _ in pairs) + " |\n")
            f.write("|---|" + "---:|" * (len(cpu_drv) + len(pairs)) + "\n")
            for p in timed:
                cols, meds = [], {}
                for d in cpu_drv:
                    v = cells.get((p, d), {}).get("cpu")
                    if v:
                        meds[d] = statistics.median(v)
                        cols.append(f"{meds[d]:.2f} [{min(v):.2f}–{max(v):.2f}]")
                    else:
                        cols.append("-")
                for _, n, dd in pairs:
                    cols.append(f"{meds[n] - meds[dd]:+.2f}" if n in meds and dd in meds else "-")
                f.write(f"| {label.get(p, p)} | " + " | ".join(cols) + " |\n")
        have_io = any(c["reads"] for (p, d), c in cells.items())
        if have_io:
            f.write("\nDevice requests (reads/writes completed by the loop device, median):\n\n")
            f.write("| phase | " + " | ".join(DRIVER_NAME[d] for d in drivers) + " |\n")
            f.write("|---|" + "---:|" * len(drivers) + "\n")
            for p in timed:
                cols = []
                for d in drivers:
                    c = cells.get((p, d))
                    if c and c["reads"]:
                        cols.append(f"{statistics.median(c['reads']):.0f} / {statistics.median(c['writes']):.0f}")
                    else:
                        cols.append("-")
                f.write(f"| {label.get(p, p)} | " + " | ".join(cols) + " |\n")

    # CSV of the summary.
    with open(a.out + ".csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["phase", "label", "driver", "runs_ok", "runs_bad", "median", "min", "max",
                    "dev_reads_median", "dev_writes_median", "daemon_cpu_s_median"])
        for p in order:
            for d in drivers:
                c = cells.get((p, d))
                if not c:
                    continue
                v = c["values"]
                w.writerow([p, label.get(p, p), d, len(v), ";".join(c["bad"]),
                            f"{statistics.median(v):.3f}" if v else "",
                            f"{min(v):.3f}" if v else "", f"{max(v):.3f}" if v else "",
                            f"{statistics.median(c['reads']):.0f}" if c["reads"] else "",
                            f"{statistics.median(c['writes']):.0f}" if c["writes"] else "",
                            f"{statistics.median(c['cpu']):.2f}" if c["cpu"] else ""])

    plot_phases(a.out + ".png", order, drivers, med, tot)
    return 0


def plot_phases(out, order, drivers, med, tot):
    """Bars per phase: each driver's median over the kernel's, on a log scale
    (1 = the kernel; the round trip in µs is a phase here too), the total of
    the phases last.  Without the kernel: each driver's median seconds."""
    phases = [p for p in order if p not in ("peak_rss_mb", "checker_cpu_s")]
    cats = [("round trip" if p == "rtt_us" else p) for p in phases]
    totals = {d: statistics.median(tot[d]) if tot.get(d) else None for d in drivers}
    if len([p for p in phases if p != "rtt_us"]) > 1:
        cats.append("total")
    base = "kernel" if "kernel" in drivers else None
    series = []
    for d in drivers:
        if d == base:
            continue
        vals = []
        for p in phases:
            x, y = med(p, d), med(p, base) if base else 1.0
            vals.append(x / y if x is not None and y else None)
        if len(cats) > len(phases):
            x, y = totals[d], totals[base] if base else 1.0
            vals.append(x / y if x is not None and y else None)
        series.append((DRIVER_NAME.get(d, d), vals))
    if base:
        lib_plot.bars(out, "bench/phases: median time over kernel ext3's (log scale; below 1 = faster)",
                      "time / kernel ext3's time", cats, series, logy=True, hline=(1, "kernel ext3"))
    else:
        lib_plot.bars(out, "bench/phases: median seconds per phase (log scale)", "seconds (round trip: µs)",
                      cats, series, logy=True)


if __name__ == "__main__":
    sys.exit(main())
