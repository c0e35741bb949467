#!/usr/bin/python3
"""bench/lib_webserver.py - a web-server workload in the manner of filebench's
webserver personality: several threads each open a random file of a document
tree, read it whole and close it; every 10 such reads one 16 KiB record is
appended to a shared log, written by a single logger thread.

  lib_webserver.py setup DIR [--files N] [--mean-size BYTES] [--seed S]
  lib_webserver.py run DIR [--threads T] [--seconds S | --ops N] [--seed S]

`run` prints one line: ops=N reads=R appends=A bytes_read=B seconds=S ops_per_s=X
"""
import argparse
import os
import queue
import random
import sys
import threading
import time

DIR_WIDTH = 20  # files per directory, as filebench's webserver uses


def doc_path(root, i):
    return os.path.join(root, "htdocs", f"d{i // DIR_WIDTH:03d}", f"f{i:05d}.html")


def setup(a):
    rng = random.Random(a.seed)
    os.makedirs(os.path.join(a.dir, "logs"), exist_ok=True)
    for i in range(a.files):
        p = doc_path(a.dir, i)
        if i % DIR_WIDTH == 0:
            os.makedirs(os.path.dirname(p), exist_ok=True)
        # Gamma-distributed sizes (shape 1.5) around the mean, as filebench does.
        size = max(1, min(int(rng.gammavariate(1.5, a.mean_size / 1.5)), 1 << 20))
        with open(p, "wb") as f:
            f.write(rng.randbytes(size))
    with open(os.path.join(a.dir, "files"), "w") as f:
        f.write(f"{a.files}\n")
    return 0


def run(a):
    with open(os.path.join(a.dir, "files")) as f:
        nfiles = int(f.read())
    log_fd = os.open(os.path.join(a.dir, "logs", "access.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    record = b"x" * 16383 + b"\n"
    lock = threading.Lock()
    stop = threading.Event()
    log_due = queue.Queue()  # one item per 16 KiB record owed; None ends the logger
    counts = {"reads": 0, "appends": 0, "bytes": 0, "errors": 0}
    budget = [a.ops if a.ops else None]  # remaining read ops when --ops is given

    def take():
        with lock:
            if budget[0] is None:
                return not stop.is_set()
            if budget[0] <= 0 or stop.is_set():
                return False
            budget[0] -= 1
            return True

    def fail(what, e):
        print(f"webserver: {what}: {e}", file=sys.stderr)
        with lock:
            counts["errors"] += 1
        stop.set()

    def reader(tid):
        rng = random.Random(a.seed * 1000 + tid)
        n = nb = 0
        while take():
            try:
                fd = os.open(doc_path(a.dir, rng.randrange(nfiles)), os.O_RDONLY)
                try:
                    while True:
                        b = os.read(fd, 65536)
                        if not b:
                            break
                        nb += len(b)
                finally:
                    os.close(fd)
            except OSError as e:
                fail("read", e)
                break
            n += 1
            if n % 10 == 0:
                log_due.put(1)
        with lock:
            counts["reads"] += n
            counts["bytes"] += nb

    def logger():
        while log_due.get() is not None:
            try:
                os.write(log_fd, record)
            except OSError as e:
                fail("log append", e)
                return
            counts["appends"] += 1

    t0 = time.monotonic()
    readers = [threading.Thread(target=reader, args=(i,)) for i in range(a.threads)]
    lg = threading.Thread(target=logger)
    lg.start()
    for t in readers:
        t.start()
    if not a.ops:
        stop.wait(a.seconds)
        stop.set()
    for t in readers:
        t.join()
    log_due.put(None)  # the logger writes what it owes, then ends
    lg.join()
    os.close(log_fd)
    secs = time.monotonic() - t0
    ops = counts["reads"] + counts["appends"]
    print(f"ops={ops} reads={counts['reads']} appends={counts['appends']} bytes_read={counts['bytes']} "
          f"seconds={secs:.3f} ops_per_s={ops / secs:.1f}")
    return 1 if counts["errors"] else 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("setup")
    s.add_argument("dir")
    s.add_argument("--files", type=int, default=1000)
    s.add_argument("--mean-size", type=int, default=16384)
    s.add_argument("--seed", type=int, default=1)
    r = sub.add_parser("run")
    r.add_argument("dir")
    r.add_argument("--threads", type=int, default=8)
    r.add_argument("--seconds", type=float, default=10.0)
    r.add_argument("--ops", type=int, default=0)
    r.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    return setup(a) if a.cmd == "setup" else run(a)


if __name__ == "__main__":
    sys.exit(main())
