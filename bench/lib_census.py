#!/usr/bin/python3
"""bench/lib_census.py - the report of bench/census.

Reads the segments table bench/census wrote (driver, phase, log, start, end,
ops, unit, status: which bytes of which daemon log hold a phase's requests),
counts the requests in each segment by opcode from libfuse's debug lines
("unique: N, opcode: NAME (n), nodeid: ..."; a reply line "unique: N, error:
-E" marks a failed one), and writes OUT.md (per phase, requests per operation,
synchronous and asynchronous, and the opcodes), OUT.csv (every count) and the
figure OUT.png (synchronous requests per operation, stacked by opcode).
Positional arguments are phase=label pairs, in order.
"""
import csv
import os
import re
import sys

import lib_plot
import lib_report

# Requests whose caller does not wait for the reply.  Every other request is
# sent by fuse_simple_request, which sleeps until the daemon answers.  READ
# is counted synchronous: with async_read the kernel sends readahead READs in
# the background, but the reader then waits on the pages it asked for.  WRITE
# is synchronous because none of the drivers asks for the writeback cache and
# the workloads write with write(2), not through mmap or AIO.
ASYNC = {
    "FORGET": "no reply: the kernel queues it when it drops an inode",
    "BATCH_FORGET": "no reply: several FORGETs in one request",
    "INTERRUPT": "no reply awaited: the kernel asks to abort a request a signal interrupted",
    "RELEASE": "`fuse_file_release` (`fs/fuse/file.c`) puts the file with `fuse_file_put(ff, false)`, "
               "which sends RELEASE by `fuse_simple_background`: close(2) returns without waiting "
               "(Linux 6.18 and the stable kernels it went back to; older ones waited on fuseblk mounts)",
    "RELEASEDIR": "as RELEASE",
    "INIT": "`fuse_send_init` sends it by `fuse_simple_background` at mount",
    "NOTIFY_REPLY": "the kernel's answer to a retrieve notification",
}
DRIVER_NAME = {"recon": "recon-fuse", "fuse-null": "FUSE floor (fuse-null)", "fuse2fs": "fuse2fs",
               "recon-uring": "recon-fuse over io_uring", "recon-devfuse": "recon-fuse, /dev/fuse only",
               "fuse-null-uring": "FUSE floor over io_uring (fuse-null -u)"}
REQUEST = re.compile(rb"^unique: (\d+), opcode: ([A-Z_0-9]+) \(\d+\)", re.M)
FAILED = re.compile(rb"^ +unique: (\d+), error: -\d+", re.M)
TOP = 8          # opcodes named per cell of the tables
FIGURE_TOP = 9   # opcodes with a colour of their own in the figure


def parse_log(path):
    """[(byte offset, opcode, failed)] of every request in a daemon log."""
    with open(path, "rb") as f:
        text = f.read()
    failed = {m.group(1) for m in FAILED.finditer(text)}
    return [(m.start(), m.group(2).decode(), m.group(1) in failed) for m in REQUEST.finditer(text)]


def kind(opcode):
    return "async" if opcode in ASYNC else "sync"


def fmt(v):
    return "-" if v is None else f"{v:.2f}"


def opcode_list(cell, which):
    """'SETATTR 3.00, LOOKUP 1.00 (1.00 failed), ...' for one kind of request, per operation."""
    ops = cell["ops"]
    items = sorted(((n, op) for op, n in cell["counts"].items() if kind(op) == which), reverse=True)
    if not items or not ops:
        return "-"
    named = [(n, op) for n, op in items[:TOP] if n / ops >= 0.005]
    parts = []
    for n, op in named:
        f = cell["failed"].get(op, 0)
        parts.append(f"{op} {n / ops:.2f}" + (f" ({f / ops:.2f} failed)" if f else ""))
    rest = sum(n for n, _ in items) - sum(n for n, _ in named)
    if rest:
        parts.append(f"others {rest / ops:.{2 if rest / ops >= 0.005 else 4}f}")
    return ", ".join(parts)


def per_op(cell, which):
    if not cell or not cell["ops"]:
        return None
    return sum(n for op, n in cell["counts"].items() if kind(op) == which) / cell["ops"]


def main():
    a, order, label, drivers = lib_report.report_args("--segments")

    logs, cells = {}, {}
    with open(a.segments, newline="") as f:
        for s in csv.DictReader(f, delimiter="\t"):
            cell = {"ops": int(s["ops"] or 0), "unit": s["unit"], "status": s["status"],
                    "counts": {}, "failed": {}}
            if s["log"]:
                if s["log"] not in logs:
                    logs[s["log"]] = parse_log(s["log"])
                start, end = int(s["start"]), int(s["end"])
                for off, op, bad in logs[s["log"]]:
                    if start <= off < end:
                        cell["counts"][op] = cell["counts"].get(op, 0) + 1
                        if bad:
                            cell["failed"][op] = cell["failed"].get(op, 0) + 1
            cells[(s["phase"], s["driver"])] = cell
    order = [p for p in order if any((p, d) in cells for d in drivers)]
    if not order:
        sys.exit("lib_census: no phase was counted")

    with open(a.out + ".csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["phase", "unit", "operations", "driver", "status", "opcode", "kind",
                    "requests", "failed", "per_operation"])
        for p in order:
            for d in drivers:
                c = cells.get((p, d))
                if not c:
                    continue
                for op, n in sorted(c["counts"].items(), key=lambda x: -x[1]):
                    w.writerow([p, c["unit"], c["ops"], d, c["status"], op, kind(op), n,
                                c["failed"].get(op, 0), f"{n / c['ops']:.4f}" if c["ops"] else ""])

    def unit_of(p):
        return next((cells[(p, d)]["unit"] for d in drivers if (p, d) in cells), "")

    def status_note(c):
        return "" if c["status"] == "ok" else f" ({c['status']})"

    name = os.path.basename(a.out)
    md = [f"# FUSE requests per operation: {name}", ""]
    if a.machine:
        md += [open(a.machine).read().rstrip(), ""]
    md += ["Each phase of `bench/phases` ran once per driver, the daemon with `-d`; a phase's "
           "requests are the libfuse log lines between its start and the moment its log stopped "
           "growing after it, divided by the operations it did. Kernel ext3 sends no requests.", "",
           "*Asynchronous*: the caller does not wait for the reply.", ""]
    md += [f"- {op}: {why}" for op, why in ASYNC.items()]
    md += ["", "*Synchronous*: every other request (`fuse_simple_request`: the caller sleeps until "
           "the daemon answers). READ counts as synchronous (readahead READs go in the background "
           "under `async_read`, but the reader waits for its pages), WRITE too (no driver asks for "
           "the writeback cache). \"failed\": answered with an error (a LOOKUP of a name about to "
           "be created: ENOENT; an unimplemented FLUSH: ENOSYS, once). Synchronous counts repeat "
           "exactly from run to run; FORGETs do not quite, as the kernel sends those queued "
           "together as one BATCH_FORGET.", ""]
    for which, title in (("sync", "Synchronous requests per operation"),
                         ("async", "Asynchronous requests per operation")):
        md += [f"## {title}", "",
               "| phase | per | " + " | ".join(DRIVER_NAME.get(d, d) for d in drivers) + " |",
               "|---|---|" + "---:|" * len(drivers)]
        for p in order:
            row = []
            for d in drivers:
                c = cells.get((p, d))
                row.append("-" if not c else fmt(per_op(c, which)) + status_note(c))
            md.append(f"| {label.get(p, p)} | {unit_of(p)} | " + " | ".join(row) + " |")
        md.append("")
    md += ["## By phase", ""]
    for p in order:
        c0 = next(cells[(p, d)] for d in drivers if (p, d) in cells)
        md += [f"### {label.get(p, p)}", "",
               f"Requests per {c0['unit']} (operations: how many the phase did on that driver):", "",
               "| driver | operations | synchronous | asynchronous | synchronous, by opcode | asynchronous, by opcode |",
               "|---|---:|---:|---:|---|---|"]
        for d in drivers:
            c = cells.get((p, d))
            if not c:
                continue
            md.append(f"| {DRIVER_NAME.get(d, d)}{status_note(c)} | {c['ops']} | {fmt(per_op(c, 'sync'))} | "
                      f"{fmt(per_op(c, 'async'))} | {opcode_list(c, 'sync')} | {opcode_list(c, 'async')} |")
        md.append("")
    md.append(f"Figure: [{name}.png]({name}.png); every count: [{name}.csv]({name}.csv).")
    with open(a.out + ".md", "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md[md.index("## Synchronous requests per operation"):md.index("## By phase")]))

    draw(a.out + ".png", order, drivers, cells)
    return 0


def draw(out, order, drivers, cells):
    """Stacked bars: per phase and driver, synchronous requests per operation by opcode."""
    totals = {}
    for c in cells.values():
        for op, n in c["counts"].items():
            if kind(op) == "sync" and c["ops"]:
                totals[op] = totals.get(op, 0) + n / c["ops"]
    named = [op for op, _ in sorted(totals.items(), key=lambda x: -x[1])][:FIGURE_TOP]
    categories, rows = [], []
    for i, p in enumerate(order):
        if i:
            categories.append(" " * i)   # a gap between phases (labels must differ)
            rows.append({})
        for d in drivers:
            c = cells.get((p, d))
            if not c or not c["ops"]:
                continue
            categories.append(f"{p}/{c['unit']}: {d}")
            rows.append({op: n / c["ops"] for op, n in c["counts"].items() if kind(op) == "sync"})
    series = [(op, [r.get(op, 0) for r in rows]) for op in named]
    series.append(("other", [sum(v for op, v in r.items() if op not in named) for r in rows]))
    lib_plot.bars(out, "FUSE requests the caller waits for, per operation of each phase, by opcode",
                  "synchronous requests per operation", categories, series, stacked=True)


if __name__ == "__main__":
    sys.exit(main())
