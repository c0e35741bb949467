#!/usr/bin/python3
"""bench/lib_fswork.py - from one bench/phases run, how much of recon-fuse's
time above the FUSE floor is file-system work the kernel's ext3 does too.

usage: lib_fswork.py --raw TAG.raw.csv --out OUT --drivers LIST
                     [--machine TAG.machine.md] [phase=label ...]

Per phase and operation (the phase's own count: the ops column of the raw
CSV), round by round (the drivers of a round ran one after the other):
  ext3 work   = kernel ext3 - kernel tmpfs: what ext3's own work costs the
                kernel (tmpfs: the same system calls, no disk, no journal)
  in the calls = the same without the phase's closing syncfs (the
                sync_seconds column): the work done inside the system calls,
                as a FUSE daemon does it inside its requests; the syncfs is
                where the kernel's ext3 waits for its journal and writeback,
                which FUSE does not pass on to a daemon
  daemon work = recon-fuse - its FUSE floor: what recon-fuse adds to the
                requests the floor answers with no work
  allowance   = 0.05 x floor: what "within 1.05x of the floor" leaves the
                daemon for all of its work
  (floor + ext3 work in the calls) / floor: the ratio to the floor of a
                daemon that did ext3's work at the kernel's own cost
Each is the median over the rounds [min-max]; ratios are of those medians;
the last column counts the rounds in which ext3's work in the calls alone
exceeds that round's allowance. Needs the drivers kernel and tmpfs and a
floor (fuse-null or fuse-null-uring), each recon-fuse driver paired with
the floor of its transport; kernel-ext4 adds ext4's work. Writes OUT.md and
OUT.csv; prints the tables.
"""
import csv
import statistics
import sys

from lib_report import DRIVER_NAME, UNTIMED, cell_median, read_raw, report_args

ALLOWANCE = 0.05
# (recon-fuse driver, its floor); "recon" follows the machine's enable_uring
FIXED_PAIRS = [("recon-uring", "fuse-null-uring"), ("recon-devfuse", "fuse-null")]


def ring_offered(machine):
    """True/False from the machine file's enable_uring line; None unknown."""
    if not machine:
        return None
    for line in open(machine):
        if "enable_uring" in line:
            return line.rstrip().endswith(": Y")
    return None


def pairs_of(drivers, ring):
    """The (recon driver, floor, title) pairs the run allows."""
    pairs = [(r, f, f"{DRIVER_NAME[r]} over {DRIVER_NAME[f]}")
             for r, f in FIXED_PAIRS if r in drivers and f in drivers]
    if "recon" in drivers:
        floor = "fuse-null-uring" if ring else "fuse-null"
        if floor in drivers:
            how = {True: "over io_uring", False: "/dev/fuse", None: "transport unknown"}[ring]
            pairs.append(("recon", floor, f"recon-fuse ({how}) over {DRIVER_NAME[floor]}"))
        elif "fuse-null" in drivers and ring:
            pairs.append(("recon", "fuse-null", "recon-fuse (over io_uring) over the /dev/fuse floor: "
                          "not like with like (add fuse-null-uring)"))
    return pairs


def missing_drivers(drivers):
    """What the report cannot do without; empty when complete."""
    need = [d for d in ("kernel", "tmpfs") if d not in drivers]
    if "fuse-null" not in drivers and "fuse-null-uring" not in drivers:
        need.append("fuse-null (or fuse-null-uring)")
    return need


class PerOp:
    """Microseconds per operation of each (phase, driver), round by round;
    None for a cell with a failed round or no operation count."""

    def __init__(self, cells):
        self.cells = cells

    def rounds(self, p, d, calls=False):
        """round -> µs per operation (calls: without the closing syncfs)."""
        if cell_median(self.cells, p, d) is None:
            return None
        out = {}
        for rnd, m in self.cells[(p, d)]["by_round"].items():
            if not m["ops"] or (calls and m["sync"] is None):
                return None
            out[rnd] = (m["seconds"] - (m["sync"] if calls else 0)) * 1e6 / m["ops"]
        return out

    def us(self, p, d, calls=False):
        v = self.rounds(p, d, calls)
        return statistics.median(v.values()) if v else None

    def ops(self, p, d):
        v = self.rounds(p, d)
        return statistics.median(m["ops"] for m in self.cells[(p, d)]["by_round"].values()) if v else None

    def diff(self, p, a, b, calls=False):
        """Per round a - b: dict round -> µs, over the rounds both have."""
        x, y = self.rounds(p, a, calls), self.rounds(p, b, calls)
        if not x or not y or not set(x) & set(y):
            return None
        return {r: x[r] - y[r] for r in x if r in y}

    def trouble(self, p, d):
        c = self.cells.get((p, d))
        if not c:
            return "no measurement"
        if c["bad"]:
            return "rounds " + ", ".join(c["bad"])
        if any(not m["ops"] for m in c["by_round"].values()):
            return "no operation count (a raw CSV from before bench/phases recorded them)"
        if any(m["sync"] is None for m in c["by_round"].values()):
            return "no syncfs times (a raw CSV from before bench/phases recorded them)"
        return None


def med(d):
    return statistics.median(d.values()) if d else None


def num(v):
    if v is None:
        return "-"
    return f"{v:.1f}" if abs(v) < 100 else f"{v:.0f}"


def ratio(v):
    return "-" if v is None else f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"


def rng(d):
    """median [min–max] of a per-round dict."""
    return "-" if not d else f"{num(med(d))} [{num(min(d.values()))}–{num(max(d.values()))}]"


def over(a, b):
    return a / b if a is not None and b else None


def rounds_exceeding(k, floor):
    """'n of m': rounds whose ext3 work exceeds that round's allowance."""
    if not k or not floor:
        return "-"
    both = [r for r in k if r in floor]
    return f"{sum(k[r] > ALLOWANCE * floor[r] for r in both)} of {len(both)}" if both else "-"


def pair_table(po, phases, label, recon, floor, drivers):
    """Header and rows of one recon/floor pair; CSV rows beside; notes on gaps."""
    ext4 = "kernel-ext4" in drivers
    head = ["phase", "ops", "kernel ext3", "tmpfs", "ext3 work", "ext3 work in the calls"]
    head += ["ext4 work", "ext4 work in the calls"] if ext4 else []
    head += ["floor", "recon-fuse", "daemon work", "allowance (0.05 × floor)", "ext3 work / allowance",
             "in the calls / allowance", "(floor + ext3 work in the calls) / floor",
             "daemon work / ext3 work in the calls", "recon / floor",
             "rounds: ext3 work in the calls > allowance"]
    rows, csv_rows, notes = [], [], []
    for p in phases:
        k, kc = po.diff(p, "kernel", "tmpfs"), po.diff(p, "kernel", "tmpfs", calls=True)
        k4 = po.diff(p, "kernel-ext4", "tmpfs") if ext4 else None
        k4c = po.diff(p, "kernel-ext4", "tmpfs", calls=True) if ext4 else None
        dw = po.diff(p, recon, floor)
        f, r = po.us(p, floor), po.us(p, recon)
        a = ALLOWANCE * f if f is not None else None
        n = po.ops(p, "kernel")
        row = [label.get(p, p), "-" if n is None else f"{n:g}", num(po.us(p, "kernel")), num(po.us(p, "tmpfs")),
               rng(k), rng(kc)]
        row += [rng(k4), rng(k4c)] if ext4 else []
        bound = 1 + med(kc) / f if kc and f else None
        row += [num(f), num(r), rng(dw), num(a), ratio(over(med(k), a)), ratio(over(med(kc), a)), ratio(bound),
                ratio(over(med(dw), med(kc)) if med(kc) and med(kc) > 0 else None), ratio(over(r, f)),
                rounds_exceeding(kc, po.rounds(p, floor))]
        rows.append(row)
        csv_rows.append([p, recon, floor, n, po.us(p, "kernel"), po.us(p, "tmpfs"), med(k), med(kc),
                         med(k4), med(k4c), f, r, med(dw), a, over(med(k), a), over(med(kc), a), bound,
                         over(r, f)])
        for d in [d for d in ("kernel", "tmpfs", "kernel-ext4", floor, recon) if d in drivers]:
            t = po.trouble(p, d)
            if t:
                notes.append(f"{label.get(p, p)}: {DRIVER_NAME.get(d, d)}: {t}")
    return head, rows, csv_rows, notes


def totals(cells, phases, recon, floor):
    """Seconds over the phases (sums of medians) that kernel, tmpfs and the
    floor all have, naming those left out."""
    m = lambda p, d: cell_median(cells, p, d)
    known = [p for p in phases if None not in (m(p, "kernel"), m(p, "tmpfs"), m(p, floor))]
    if not known:
        return "All phases: no phase has a median on kernel, tmpfs and the floor."
    k, t, f = (sum(m(p, d) for p in known) for d in ("kernel", "tmpfs", floor))
    left = [p for p in phases if p not in known]
    s = (f"All phases{' but ' + ', '.join(left) if left else ''} (sums of medians): "
         f"ext3 work {k - t:.2f} s (kernel ext3 {k:.2f} s − tmpfs {t:.2f} s{calls_total(cells, known)}), "
         f"allowance {ALLOWANCE * f:.2f} s (0.05 × floor {f:.2f} s): ext3 work / allowance {(k - t) / (ALLOWANCE * f):.1f}")
    if all(m(p, recon) is not None for p in known):
        r = sum(m(p, recon) for p in known)
        s += f"; daemon work {r - f:.2f} s (recon-fuse {r:.2f} s, {r / f:.2f}x the floor)"
    return s + "."


def calls_total(cells, phases):
    """', in the calls X s': the sums without the closing syncfs, if known."""
    def tot(d):
        v = []
        for p in phases:
            m = cells[(p, d)]["by_round"].values()
            if any(x["sync"] is None for x in m):
                return None
            v.append(statistics.median(x["seconds"] - x["sync"] for x in m))
        return sum(v)
    k, t = tot("kernel"), tot("tmpfs")
    return "" if k is None or t is None else f"; in the calls {k - t:.2f} s"


def text_table(head, rows):
    widths = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    line = lambda r: " | ".join(str(c).ljust(w) for c, w in zip(r, widths))
    return "\n".join([line(head), "-+-".join("-" * w for w in widths)] + [line(r) for r in rows])


def main():
    a, order, label, drivers = report_args("--raw")
    need = missing_drivers(drivers)
    if need:
        print("lib_fswork: no report: the run lacks the driver(s) " + ", ".join(need) +
              "; run bench/phases --drivers kernel,tmpfs,fuse-null,recon (over io_uring add "
              "fuse-null-uring and recon-devfuse)", file=sys.stderr)
        return 2
    rows, cells = read_raw(a.raw)
    seen = []
    for r in rows:
        if r["phase"] not in UNTIMED and r["phase"] not in seen:
            seen.append(r["phase"])
    phases = [p for p in order if p in seen] or seen
    pairs = pairs_of(drivers, ring_offered(a.machine))
    if not pairs:
        print("lib_fswork: no recon-fuse driver with its floor in the run (recon, recon-devfuse with fuse-null; "
              "recon-uring with fuse-null-uring): the daemon's columns stay empty", file=sys.stderr)
        floor = "fuse-null" if "fuse-null" in drivers else "fuse-null-uring"
        pairs = [("recon", floor, f"{DRIVER_NAME[floor]} (no recon-fuse driver)")]
    po = PerOp(cells)
    md, out_csv = [], []
    if a.machine:
        md.append(open(a.machine).read())
    md.append("Microseconds per operation, median over the rounds [min–max of the rounds' differences]; "
              "ext3 work = kernel ext3 − tmpfs, in the calls = the same without the phase's closing syncfs, "
              "daemon work = recon-fuse − floor, allowance = 0.05 × floor (see bench/lib_fswork.py).\n")
    for recon, floor, title in pairs:
        head, trows, crows, notes = pair_table(po, phases, label, recon, floor, drivers)
        tot = totals(cells, phases, recon, floor)
        print(f"\n{title} (µs per operation)\n" + text_table(head, trows) + "\n" + tot)
        for n in notes:
            print("  note: " + n)
        md.append(f"\n### {title}\n\n| " + " | ".join(head) + " |\n|" +
                  "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|")
        md += ["| " + " | ".join(r) + " |" for r in trows]
        md.append("\n" + tot)
        md += ["\n- " + n for n in notes]
        out_csv += crows
    with open(a.out + ".md", "w") as f:
        f.write("\n".join(md) + "\n")
    with open(a.out + ".csv", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["phase", "recon_driver", "floor_driver", "ops", "kernel_us", "tmpfs_us",
                    "ext3_work_us", "ext3_work_calls_us", "ext4_work_us", "ext4_work_calls_us",
                    "floor_us", "recon_us", "daemon_work_us", "allowance_us",
                    "ext3_work_over_allowance", "ext3_work_calls_over_allowance",
                    "floor_plus_ext3_work_calls_over_floor", "recon_over_floor"])
        for r in out_csv:
            w.writerow(["" if v is None else (f"{v:.3f}" if isinstance(v, float) else v) for v in r])
    return 0


if __name__ == "__main__":
    sys.exit(main())
