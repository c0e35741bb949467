#!/usr/bin/python3
"""bench/lib_cpu_report.py - the table of bench/cpu-per-op: per phase and
driver, the daemon's median [min-max] CPU µs per operation over the rounds,
per FUSE request (requests per operation from a bench/census .csv), and
recon-fuse's over the floor's (fuse-null).  Run by bench/cpu-per-op."""
import argparse
import collections
import csv
import statistics
import sys


def load_census(path):
    """(phase) -> requests per operation, synchronous and asynchronous, of
    recon-fuse's census (fuse-null asks for the same; the transport changes
    no count, so recon-devfuse's or recon-uring's when the census has no
    plain recon)."""
    by_driver = collections.defaultdict(lambda: collections.defaultdict(float))
    if path:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if row["status"] == "ok":
                    by_driver[row["driver"]][row["phase"]] += float(row["per_operation"])
    for d in ("recon", "recon-devfuse", "recon-uring"):
        if d in by_driver:
            return by_driver[d]
    return collections.defaultdict(float)


def fmt_range(vals):
    if not vals:
        return "-"
    med = statistics.median(vals)
    if len(vals) == 1:
        return "%.1f" % med
    return "%.1f [%.1f-%.1f]" % (med, min(vals), max(vals))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", required=True)
    ap.add_argument("--census", default="")
    ap.add_argument("--machine", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    us_per_op = collections.defaultdict(list)   # (phase, driver) -> [µs]
    phases, drivers, units, ops = [], [], {}, {}
    with open(a.raw, newline="") as f:
        for row in csv.DictReader(f):
            p, d = row["phase"], row["driver"]
            if p not in phases:
                phases.append(p)
            if d not in drivers:
                drivers.append(d)
            units[p] = row["unit"]
            if row["status"] != "ok" or not row["operations"] or int(row["operations"]) == 0:
                continue
            ops[p] = int(row["operations"])
            us_per_op[(p, d)].append(float(row["cpu_seconds"]) * 1e6 / int(row["operations"]))
    requests = load_census(a.census)

    out = [open(a.machine).read().rstrip("\n"), ""]
    out.append("Daemon CPU µs per operation, median [min-max] over the rounds "
               "(run time of all its threads); per request: the median over the "
               "requests per operation of the census (synchronous and asynchronous).")
    out.append("")
    head = ["phase", "unit", "ops", "requests/op"]
    for d in drivers:
        head += ["%s µs/op" % d, "%s µs/req" % d]
    others = [d for d in drivers if d != "fuse-null"]
    if "fuse-null" in drivers:
        head += ["%s/fuse-null" % d for d in others]
    if "recon" in drivers and "recon-base" in drivers:
        head.append("recon/recon-base")
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "|".join(["---"] * 2 + ["---:"] * (len(head) - 2)) + "|")
    med = {k: statistics.median(v) for k, v in us_per_op.items() if v}
    for p in phases:
        req = requests.get(p, 0.0)
        cells = [p, units.get(p, ""), str(ops.get(p, "-")), "%.2f" % req if req else "-"]
        for d in drivers:
            cells.append(fmt_range(us_per_op.get((p, d), [])))
            m = med.get((p, d))
            cells.append("%.1f" % (m / req) if m is not None and req else "-")

        def ratio(x, y):
            if med.get((p, x)) and med.get((p, y)):
                return "%.2f" % (med[(p, x)] / med[(p, y)])
            return "-"
        if "fuse-null" in drivers:
            cells += [ratio(d, "fuse-null") for d in others]
        if "recon" in drivers and "recon-base" in drivers:
            cells.append(ratio("recon", "recon-base"))
        out.append("| " + " | ".join(cells) + " |")
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
