#!/usr/bin/env python3
"""imgfuzz.py - run recon-fuse on mutated ext2/ext3/ext4 images and judge it.

For each mutant BASE/CLASS[+csum]/SEED[/EDIT] (mutate.py):
  1. e2fsck -fn before (on a copy with the journal replayed by e2fsck when the
     image needs recovery): its exit status and its problems;
  2. a read-only mount (-o ro): walk everything (lstat, readdir, read each file
     up to 8 MiB, readlink, listxattr/getxattr, statfs) and record checksums;
     the image must be byte-identical afterwards;
  3. a read-write mount (default options): a small workload (mkdir, creates,
     writes, fsync, rename, unlink of its own files, a new directory grown
     past one block (indexed), a create in an existing directory; on the
     ext4 bases also names added, renamed and removed in the htree
     directory, a file unlinked while open, fallocate, a punched
     hole, a truncated extent tree), unmount.  A refused mount must leave
     the image byte-identical; the bases recon-fuse cannot write
     (bases.READ_ONLY: inline_data) must be refused, and are not given the
     workload if they are not;
  4. e2fsck -fn after, and a second read-only mount that reads every file the
     workload did not write again.
Each daemon runs in the foreground with a timeout; ASAN_OPTIONS/UBSAN_OPTIONS
send sanitizer reports to log files (halt on the first).
Outcomes, worst first (a mutant gets the first that applies):
  crash      the daemon died of a signal, or a sanitizer reported
  hang       a mount, walk, workload or unmount exceeded its time
  bad-exit   exit status not as documented (0 without mounting, non-zero
             without a message, or a refusal with no message)
  written    the image changed under a read-only mount or a refused
             read-write one
  rw-served  a base recon-fuse cannot write (inline_data) was mounted read-write
  worse      e2fsck after the read-write run is worse than before: the image
             was clean (exit 0) and is not, or a problem appears that was not
             there before (problem lines normalised: answers, pass headers and
             summaries dropped, the numbers of "(X, counted=Y)" and "is X,
             should be Y" dropped, bitmap difference lists split into single
             blocks/inodes)
  changed    a file the workload did not write reads back different content
  false-alarm  a commit was rejected, or the daemon reported damage (EIO,
             "run e2fsck") during the workload, or its mount-time scan (of
             an image with no journal to replay) named a violation (but for
             MOUNT_SCAN_BLIND), on an image e2fsck -fn passed (exit 0)
  harness    the walk or the workload itself failed (a bug of this script)
  refused    the read-write mount was refused with a message (for a
             read-only base: the read-only mount)
  readonly   a commit was rejected or the mount found damage: the daemon
             went (or mounted) read-only and said so
  errors     some operation failed (EIO, EUCLEAN, ...) with no crash
  clean      everything worked
plus no-target (the base has nothing of the class; not run).
Usage: imgfuzz.py [options] SPEC...      (see --help)
Exit status: 0 if every mutant's outcome is allowed (--allow), 1 otherwise.
"""
import argparse
import errno
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bases  # noqa: E402
import bases_ext4  # noqa: E402
import mutate  # noqa: E402

BAD = ("crash", "hang", "bad-exit", "written", "rw-served", "worse", "changed", "false-alarm",
       "harness")
ORDER = BAD + ("refused", "readonly", "errors", "clean", "no-target")
READ_CAP = 8 << 20
# the daemon blaming the image while serving it (EIO, a refused allocation)
DAMAGE_RE = re.compile(r"returning EIO|run e2fsck")
# what the mount-time scan may name on an image e2fsck -fn passes: states
# e2fsck -fn does not report and the kernel refuses (an extent node's depth
# against its parent's; the superblock of an empty journal, which e2fsck -n
# hardly reads and the kernel's jbd2 checks at mount: s_first outside the
# journal); the scan is otherwise no stricter than e2fsck (checker/README.md),
# and the violations such a state brings along (the blocks below a refused
# node unowned) come with it
MOUNT_SCAN_BLIND = re.compile(r"INV_EXTENT_TREE: .*depth \d+ (where its parent wants|beyond)|INV_JOURNAL_SB: ")
MOUNT_SCAN_SAID = "is not consistent; mounting read-only"      # fuse/mount.c
SCAN_LINE_RE = re.compile(r"^(INV_[A-Z0-9_]+): ", re.M)
SAN_RE = re.compile(r"ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer|SUMMARY: UndefinedBehavior")

# ---------------------------------------------------------------------------
# the two clients, run as child processes so that a hung mount can be killed


def walk(root):
    """Every name under ROOT: kind, size, content digest, link target, xattrs;
    and the errors met.  Prints one JSON object."""
    out, errs, seen_dirs = {}, [], set()

    def note(path, e):
        errs.append("%s: %s" % (os.path.relpath(path, root), errno.errorcode.get(e.errno, e.errno)))

    def visit(path):
        rel = os.path.relpath(path, root)
        try:
            st = os.lstat(path)
        except OSError as e:
            note(path, e)
            return
        rec = {"mode": st.st_mode, "size": st.st_size, "ino": st.st_ino}
        out[rel] = rec
        try:
            names = os.listxattr(path, follow_symlinks=False)
            xa = {}
            for n in sorted(names):
                try:
                    xa[n] = hashlib.sha1(os.getxattr(path, n, follow_symlinks=False)).hexdigest()[:12]
                except OSError as e:
                    note(path, e)
            rec["xattrs"] = xa
        except OSError as e:
            note(path, e)
        if stat.S_ISLNK(st.st_mode):
            try:
                rec["link"] = os.readlink(path)
            except OSError as e:
                note(path, e)
        elif stat.S_ISREG(st.st_mode):
            try:
                h = hashlib.sha1()
                with open(path, "rb") as f:
                    left = READ_CAP
                    while left > 0:
                        b = f.read(min(left, 1 << 20))
                        if not b:
                            break
                        h.update(b)
                        left -= len(b)
                rec["sha"] = h.hexdigest()
            except OSError as e:
                note(path, e)
        elif stat.S_ISDIR(st.st_mode):
            if st.st_ino in seen_dirs:      # a damaged entry naming a directory again
                rec["seen"] = True
                return
            seen_dirs.add(st.st_ino)
            try:
                names = sorted(os.listdir(path))
            except OSError as e:
                note(path, e)
                return
            for n in names:
                visit(os.path.join(path, n))
    visit(root)
    try:
        os.statvfs(root)
    except OSError as e:
        note(root, e)
    print(json.dumps({"files": out, "errors": errs}))


WORK_DIR = "fuzz-work"


def workload(root, ext4=False):
    """Writes only names of its own: WORK_DIR/..., fuzz-top in the root, and
    one name in each of three existing directories (the htree directory, d and
    the root) that it removes again.  Prints the errno names it met, one JSON list."""
    errs = []

    def attempt(fn, *a):
        try:
            return fn(*a)
        except OSError as e:
            errs.append("%s: %s" % (fn.__name__, errno.errorcode.get(e.errno, e.errno)))
            return None

    def write(path, data, sync):
        """Whether PATH was created."""
        fd = attempt(os.open, path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        if fd is None:
            return False
        if attempt(os.write, fd, data) is not None and sync:
            attempt(os.fsync, fd)
        attempt(os.close, fd)
        return True
    # first, data in the root directory's group, before anything is committed:
    # with the direct I/O of write-only opens it reaches the disk at write(2),
    # ahead of the metadata that a rejected commit would discard
    write(os.path.join(root, "fuzz-top"), bases.pattern("top", 20000), True)
    w = os.path.join(root, WORK_DIR)
    attempt(os.mkdir, w)
    for i, size in enumerate((0, 3000, 40000, 70000)):
        write("%s/f%d" % (w, i), bases.pattern("work%d" % i, size), i % 2 == 0)
    attempt(os.symlink, "f1", w + "/link")
    attempt(os.setxattr, w + "/f1", "user.w", b"workload value")
    attempt(os.rename, w + "/f1", w + "/f1-renamed")
    attempt(os.unlink, w + "/f2")
    attempt(os.mkdir, w + "/sub")
    write(w + "/sub/g", b"g" * 5000, True)
    # names past one block of a new directory: it becomes an htree (dir_index)
    for i in range(60):
        attempt(os.mknod, "%s/sub/n%02d-%s" % (w, i, "n" * 60))
    for d in ("big", "d", ""):
        if not os.path.isdir(os.path.join(root, d)):
            continue    # a log replayed short of the tree
        p = os.path.join(root, d, "fuzz-tmp")
        write(p, b"temporary", False)
        attempt(os.unlink, p)
    if ext4:
        ext4_steps(root, w, attempt, write)
    fd = attempt(os.open, w, os.O_RDONLY | os.O_DIRECTORY)
    if fd is not None:
        attempt(os.fsync, fd)
        attempt(os.close, fd)
    print(json.dumps(errs))


FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 1, 2


def fallocate(fd, mode, off, length):
    """fallocate(2) through libc (os.posix_fallocate has no mode)."""
    import ctypes
    import ctypes.util
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    if libc.fallocate(fd, mode, off, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def ext4_steps(root, w, attempt, write):
    """What the ext4 bases add: names added, renamed and removed in the
    kernel-indexed directory (leaves split, checksummed index blocks
    rewritten), a file held open while unlinked (an orphan in the orphan
    file or list), preallocation (unwritten extents), a punched hole, and a
    fragmented file (an extent tree with an index block) truncated back."""
    big = os.path.join(root, "big")
    if not os.path.isdir(big):
        big = w
    # only names that were made are renamed and removed: on a mount that
    # went read-only every step fails with EROFS alone
    made = [i for i in range(60) if write("%s/fuzz-dx-%02d-%s" % (big, i, "x" * (i % 37)), b"", False)]
    for i in made:
        if i % 3 == 0:
            attempt(os.rename, "%s/fuzz-dx-%02d-%s" % (big, i, "x" * (i % 37)),
                    "%s/fuzz-dx-renamed-%02d" % (big, i))
        elif i % 4:
            attempt(os.unlink, "%s/fuzz-dx-%02d-%s" % (big, i, "x" * (i % 37)))
    if not os.path.isdir(w):
        return
    held = attempt(os.open, w + "/held", os.O_RDWR | os.O_CREAT, 0o644)
    if held is not None:
        attempt(os.write, held, bases.pattern("held", 30000))
        attempt(os.unlink, w + "/held")
        attempt(os.pwrite, held, b"after unlink", 50000)
        attempt(os.fsync, held)
    fd = attempt(os.open, w + "/falloc", os.O_RDWR | os.O_CREAT, 0o644)
    if fd is not None:
        attempt(fallocate, fd, 0, 0, 64 << 10)
        attempt(os.pwrite, fd, bases.pattern("falloc", 5000), 20000)
        attempt(fallocate, fd, FALLOC_FL_KEEP_SIZE, 64 << 10, 32 << 10)
        attempt(fallocate, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096, 8192)
        attempt(os.fsync, fd)
        attempt(os.close, fd)
    fd = attempt(os.open, w + "/frag", os.O_RDWR | os.O_CREAT, 0o644)
    if fd is not None:
        # every other 4 KiB written: more extents than an inode's root holds
        for k in range(12):
            attempt(os.pwrite, fd, bases.pattern("frag%d" % k, 4096), 8192 * k)
        attempt(os.fsync, fd)
        attempt(fallocate, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 8192 * 3, 8192 * 4)
        attempt(os.ftruncate, fd, 8192 * 2 + 100)
        attempt(os.fsync, fd)
        attempt(os.close, fd)
    if held is not None:
        attempt(os.close, held)


def digest(path):
    h = hashlib.sha1()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ---------------------------------------------------------------------------
# e2fsck

FSCK_MEMORY = 2 << 30


def fsck_memory_cap():
    """e2fsck's address space capped: a mutant's directory of 2^32 blocks
    has it allocate tens of GiB (the OOM killer then picks among everything
    on the machine); capped, it fails and exits 8."""
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (FSCK_MEMORY, FSCK_MEMORY))


def fsck(img, work, limit):
    """(exit status or 'hang', set of normalised problems)."""
    out = os.path.join(work, "fsck.out")
    try:
        with open(out, "w") as f:
            rc = subprocess.run(["e2fsck", "-fn", img], stdout=f, stderr=subprocess.STDOUT,
                                timeout=limit, preexec_fn=fsck_memory_cap).returncode
    except subprocess.TimeoutExpired:
        return "hang", set()
    return rc, problems(open(out, errors="replace").read())


SKIP_RE = re.compile(r"^(e2fsck \d|Pass \d|Warning: skipping journal recovery|.*: \d+/\d+ files|.*WARNING: Filesystem still has errors"
                     r"|.*\*\*\*\*\* FILE SYSTEM WAS MODIFIED|Running additional passes|$)")

# suggestions, not damage (e2fsck exits 0 on them): the kernel's ext4 leaves
# such trees after a truncate too
OPTIMIZE_RE = re.compile(r"^Inode \d+ extent tree \(at level \d+\) could be (shorter|narrower)")


def problems(text):
    out = set()
    for line in text.splitlines():
        line = re.sub(r"\s*(Fix|Clear|Ignore error|Abort|Salvage|Relocate|Recreate|Delete file"
                      r"|Clear inode|Clear HTree index|Optimize|Create|Connect to /lost\+found"
                      r"|Truncate|Fix parent|Clone multiply-claimed blocks|Set dtime)\?.*$", "", line)
        line = line.strip()
        if not line or SKIP_RE.match(line) or OPTIMIZE_RE.match(line) or line == "no":
            continue
        line = line.replace(os.path.sep + "tmp" + os.path.sep, "")
        # e2fsck's own crash report: the same frames land at other
        # addresses in every run (ASLR), which is no new damage
        if re.match(r"^(Signal \(\d+\) SIG|\S*\(\S*\+0x[0-9a-f]+\)\[0x[0-9a-f]+\]$)", line):
            line = re.sub(r"0x[0-9a-f]+", "0xN", line)
        # counts the workload moves legitimately: which object, not how much
        line = re.sub(r"\(\d+, counted=\d+\)", "(N, counted=N)", line)
        line = re.sub(r"is \d+, should be \d+", "is N, should be N", line)
        # "... time (T,\n\tnow = T2) is in the future": the clock moves between runs
        line = re.sub(r"\([^()]*,$", "(T,", line)
        line = re.sub(r"^now = [^()]*\)", "now = T)", line)
        m = re.match(r"(Block|Inode) bitmap differences:\s*(.*)", line)
        if m:
            for item in m.group(2).split():
                r = re.match(r"([+-])\(?(\d+)(?:--(\d+))?\)?$", item)
                if not r:
                    out.add("%s bitmap difference %s" % (m.group(1), item))
                    continue
                a, b = int(r.group(2)), int(r.group(3) or r.group(2))
                for x in range(a, min(b, a + 100000) + 1):
                    out.add("%s bitmap difference %s%d" % (m.group(1), r.group(1), x))
            continue
        out.add(line)
    return out


# ---------------------------------------------------------------------------
# the daemon

def is_mounted(mnt):
    mnt = os.path.realpath(mnt)
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == mnt for line in f)


class Daemon:
    def __init__(self, h, img, mnt, opts, tag):
        self.h, self.mnt, self.tag = h, mnt, tag
        self.log = os.path.join(h.work, "daemon-%s.log" % tag)
        self.san = os.path.join(h.work, "san-%s" % tag)
        env = dict(os.environ)
        env["ASAN_OPTIONS"] = "log_path=%s:halt_on_error=1:abort_on_error=1:detect_leaks=0" % self.san
        env["UBSAN_OPTIONS"] = "log_path=%s:halt_on_error=1:print_stacktrace=1" % self.san
        cmd = [h.fuse, "-f"] + (["-o", opts] if opts else []) + [img, mnt]
        self.p = subprocess.Popen(cmd, stdout=open(self.log, "w"), stderr=subprocess.STDOUT,
                                  env=env, preexec_fn=lambda: os.nice(0))
        self.status = None
        self.killed = False

    def wait_mount(self):
        """'mounted', 'exited' or 'hang'."""
        end = time.time() + self.h.mount_limit
        while time.time() < end:
            if is_mounted(self.mnt):
                return "mounted"
            if self.p.poll() is not None:
                self.status = self.p.returncode
                return "exited"
            time.sleep(0.05)
        self.kill()
        return "hang"

    def kill(self):
        if self.p.poll() is None:
            self.killed = True      # by us, for a hang: not a crash
            self.p.kill()
        self.p.wait()
        self.status = self.p.returncode
        if is_mounted(self.mnt):
            subprocess.run(["fusermount3", "-uz", self.mnt], stderr=subprocess.DEVNULL)

    def unmount(self):
        """Unmount and wait: 'ok' or 'hang' (the status is in self.status)."""
        if self.p.poll() is None:
            for _ in range(50):
                if subprocess.run(["fusermount3", "-u", self.mnt],
                                  stderr=subprocess.DEVNULL).returncode == 0 or not is_mounted(self.mnt):
                    break
                time.sleep(0.2)
            try:
                self.p.wait(timeout=self.h.umount_limit)
            except subprocess.TimeoutExpired:
                self.kill()
                return "hang"
        else:
            subprocess.run(["fusermount3", "-uz", self.mnt], stderr=subprocess.DEVNULL)
        self.status = self.p.returncode
        return "ok"

    def output(self):
        return open(self.log, errors="replace").read()

    def sanitizer(self):
        d = os.path.dirname(self.san)
        for n in sorted(os.listdir(d)):
            if n.startswith(os.path.basename(self.san) + "."):
                return open(os.path.join(d, n), errors="replace").read()
        text = self.output()
        return text if SAN_RE.search(text) else None

    def crashed(self):
        died = self.status is not None and self.status < 0 and not self.killed
        return died or self.sanitizer() is not None


def client(h, mode, mnt, daemon, extra=()):
    """Run walk/workload in a child: (parsed output or None, 'ok'/'hang').
    On a timeout the daemon is killed first: a request it has read but not
    answered keeps the child in an uninterruptible wait until the connection
    goes away."""
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--" + mode, mnt] + list(extra),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=h.client_limit)
    except subprocess.TimeoutExpired:
        daemon.kill()
        p.kill()
        p.communicate()
        return None, "hang"
    try:
        return json.loads(out), "ok"
    except ValueError:
        return {"harness": "%s exited %d: %s" % (mode, p.returncode, err[-500:])}, "ok"


# ---------------------------------------------------------------------------
class Harness:
    def __init__(self, a):
        self.fuse = a.fuse
        self.cache = a.cache
        self.work = tempfile.mkdtemp(prefix="imgfuzz-", dir=a.tmp)
        self.keep = a.keep
        slow = 4 if a.asan else 1
        self.mount_limit = 20 * slow
        self.umount_limit = 60 * slow
        self.client_limit = 30 * slow
        self.fsck_limit = 60

    def fsck_replayed(self, img):
        """e2fsck -fn of IMG, on a copy whose journal e2fsck replayed first
        when IMG needs recovery (e2fsck -n checks an unreplayed image as is)."""
        with open(img, "rb") as f:
            f.seek(1024 + 96)
            recover = f.read(1)[0] & 0x4
        if not recover:
            return fsck(img, self.work, self.fsck_limit)
        ref = os.path.join(self.work, "replayed.img")
        shutil.copyfile(img, ref)
        try:
            subprocess.run(["e2fsck", "-E", "journal_only", "-y", ref], capture_output=True,
                           preexec_fn=fsck_memory_cap,
                           timeout=self.fsck_limit)
        except subprocess.TimeoutExpired:
            os.unlink(ref)
            return "hang", set()
        r = fsck(ref, self.work, self.fsck_limit)
        os.unlink(ref)
        return r

    @staticmethod
    def harness_check(out, flags, note):
        if isinstance(out, dict) and "harness" in out:
            flags.add("harness")
            note(out["harness"])
            return None
        return out

    def run(self, spec):
        """One mutant: a result dict (outcome, notes, timings)."""
        t0 = time.time()
        res = {"spec": spec, "notes": []}
        note = res["notes"].append
        for n in os.listdir(self.work):
            os.unlink(os.path.join(self.work, n)) if not os.path.isdir(os.path.join(self.work, n)) else None
        base = mutate.parse_spec(spec)[0]
        data = bytearray(open(bases.get(base, self.cache, self.fuse), "rb").read())
        try:
            res["mutation"] = mutate.mutate(spec, data)
        except mutate.NoTarget as e:
            res.update(outcome="no-target", secs=0)
            note(str(e))
            return res
        img = os.path.join(self.work, "mutant.img")
        with open(img, "wb") as f:
            f.write(data)
        del data
        mnt = os.path.join(self.work, "mnt")
        os.makedirs(mnt, exist_ok=True)
        flags = set()

        # 1. e2fsck before (after e2fsck's own replay if the image needs one)
        rc0, before = self.fsck_replayed(img)
        res["fsck_before"] = rc0

        def daemon_end(d, what):
            if d.crashed():
                flags.add("crash")
                san = d.sanitizer() or ""
                m = SAN_RE.search(san)
                note("%s: daemon crashed (status %s)%s" % (what, d.status, (": " + san[m.start():].splitlines()[0]) if m else ""))
                res.setdefault("crash_log", (san or d.output())[-3000:])
                return False
            return True

        def mount(opts, tag):
            d = Daemon(self, img, mnt, opts, tag)
            st = d.wait_mount()
            if st == "mounted":
                return d
            if st == "hang":
                flags.add("hang")
                note("%s: no mount within %d s" % (tag, self.mount_limit))
            elif daemon_end(d, tag + " mount"):
                msg = d.output().strip()
                if d.status == 0:
                    flags.add("bad-exit")
                    note("%s: exited 0 without mounting" % tag)
                elif not msg:
                    flags.add("bad-exit")
                    note("%s: refused with status %s and no message" % (tag, d.status))
                else:
                    note("%s: refused: %s" % (tag, msg.splitlines()[-1][:160]))
            return None

        def finish(d, tag):
            if d.p.poll() is not None:
                d.status = d.p.returncode
                note("%s: the daemon exited during the session (status %s)" % (tag, d.status))
                if daemon_end(d, tag):
                    flags.add("bad-exit")
                subprocess.run(["fusermount3", "-uz", mnt], stderr=subprocess.DEVNULL)
                return
            if d.unmount() == "hang":
                flags.add("hang")
                note("%s: the daemon did not exit after unmount" % tag)
                return
            if not daemon_end(d, tag) or d.status == 0:
                return
            if not d.output().strip():
                flags.add("bad-exit")
                note("%s: exit status %s without a message" % (tag, d.status))
            else:
                note("%s: exit status %s" % (tag, d.status))

        def unchanged(before, what):
            if digest(img) != before:
                flags.add("written")
                note("the image changed under %s" % what)

        # 2. read-only walk
        walk0 = None
        sha = digest(img)
        d = mount("ro", "ro")
        if d:
            walk0, st = client(self, "walk", mnt, d)
            walk0 = self.harness_check(walk0, flags, note)
            if st == "hang":
                flags.add("hang")
                note("ro: the walk hung")
                d.kill()
                daemon_end(d, "ro walk")
            else:
                finish(d, "ro")
            if walk0 and walk0["errors"]:
                flags.add("errors")
                note("ro walk: %d errors, e.g. %s" % (len(walk0["errors"]), walk0["errors"][0]))
        if "hang" not in flags:
            unchanged(sha, "the read-only mount")
        read_only = base in bases.READ_ONLY
        if not d and read_only and "crash" not in flags and "hang" not in flags:
            flags.add("refused")    # what a read-only base is judged by

        # 3. read-write workload
        rw_mounted = False
        if "crash" not in flags and "hang" not in flags:
            sha = digest(img)
            d = mount("", "rw")
            if d and read_only:
                flags.add("rw-served")
                note("rw: a base recon-fuse cannot write was mounted read-write")
                finish(d, "rw")
                unchanged(sha, "a read-write mount of an image recon-fuse cannot write")
            elif d:
                rw_mounted = True
                errs, st = client(self, "workload", mnt, d,
                                  ["ext4"] if base in bases_ext4.BASES else [])
                errs = self.harness_check(errs, flags, note)
                if st == "hang":
                    flags.add("hang")
                    note("rw: the workload hung")
                    d.kill()
                    daemon_end(d, "rw workload")
                else:
                    finish(d, "rw")
                    if errs:
                        note("rw workload: %d errors, e.g. %s" % (len(errs), errs[0]))
                        flags.add("readonly" if all("EROFS" in e for e in errs) else "errors")
                    said = d.output()
                    if "now read-only" in said:
                        flags.add("readonly" if rc0 != 0 else "false-alarm")
                    elif "read-only" in said:
                        # decided at mount: e2fsck -fn is blind to some of
                        # what the checker and the kernel refuse (a child's
                        # eh_depth; a replay e2fsck does differently; orphans)
                        flags.add("readonly")
                        # (after a replay the scan judges the replayed state,
                        # which e2fsck replays its own way: not compared)
                        named = SCAN_LINE_RE.findall(said) if MOUNT_SCAN_SAID in said else []
                        if rc0 == 0 and named and not MOUNT_SCAN_BLIND.search(said):
                            flags.add("false-alarm")
                            note("rw: the mount's scan names %s on an image e2fsck passed" % " ".join(sorted(set(named))))
                    blamed = [l for l in said.splitlines() if DAMAGE_RE.search(l)
                              and "read-only" not in l and "orphan" not in l]
                    if blamed and rc0 == 0:
                        flags.add("false-alarm")
                        note("rw: damage reported on an image e2fsck passed: %s" % blamed[0][:200])
            elif "crash" not in flags and "hang" not in flags:
                if not read_only:   # expected of a read-only base: not its outcome
                    flags.add("refused")
                unchanged(sha, "a refused read-write mount")

        # 4. e2fsck after, and the contents again
        if rw_mounted and "crash" not in flags and "hang" not in flags:
            rc1, after = self.fsck_replayed(img)
            res["fsck_after"] = rc1
            if rc0 == "hang" or rc1 == "hang":
                note("e2fsck hung (before: %s, after: %s): not compared" % (rc0, rc1))
            else:
                new = sorted(after - before)
                if rc0 == 0 and rc1 != 0:
                    flags.add("worse")
                    note("e2fsck: exit 0 before, %d after" % rc1)
                if new:
                    flags.add("worse")
                    note("e2fsck: %d new problems, e.g. %s" % (len(new), "; ".join(new[:3])))
                    res["new_problems"] = new[:40]
                    res["problems_before"] = sorted(before)[:40]
            if walk0:
                d = mount("ro", "ro2")
                if d:
                    walk1, st = client(self, "walk", mnt, d)
                    walk1 = self.harness_check(walk1, flags, note)
                    if st == "hang":
                        flags.add("hang")
                        note("ro2: the walk hung")
                        d.kill()
                        daemon_end(d, "ro2 walk")
                    else:
                        finish(d, "ro2")
                    if walk1:
                        changed = []
                        for p, r0 in walk0["files"].items():
                            r1 = walk1["files"].get(p)
                            if p.split("/")[0] in (WORK_DIR, "fuzz-top") or "sha" not in r0 or not r1 or "sha" not in r1:
                                continue
                            if r0["sha"] != r1["sha"] and r0["size"] == r1["size"]:
                                changed.append(p)
                        if changed:
                            flags.add("changed")
                            note("content changed: %s" % " ".join(changed[:5]))
        res["outcome"] = next((o for o in ORDER if o in flags), "clean")
        res["flags"] = sorted(flags)
        res["secs"] = round(time.time() - t0, 1)
        if self.keep and res["outcome"] in BAD:
            os.makedirs(self.keep, exist_ok=True)
            stem = os.path.join(self.keep, spec.replace("/", "_"))
            for n in os.listdir(self.work):
                p = os.path.join(self.work, n)
                if n.startswith(("daemon-", "san-")) and os.path.isfile(p):
                    shutil.copyfile(p, "%s.%s" % (stem, n))
        return res

    def close(self):
        if is_mounted(os.path.join(self.work, "mnt")):
            subprocess.run(["fusermount3", "-uz", os.path.join(self.work, "mnt")])
        shutil.rmtree(self.work, ignore_errors=True)


def specs_from(args):
    """The mutants named, listed, and --per-class's: for each class of
    --classes (CLASS, or CLASS@BASE:BASE... for a pool of its own; jblk's
    default pool is kc1 and jr1) N seeds, the base taken from its pool by the
    seed."""
    out = list(args.spec)
    for path in args.list or []:
        for line in open(path):
            line = line.split("#")[0].strip()
            if line:
                out.append(line.split()[0])
    if args.per_class:
        classes = mutate.EXT4_CLASSES if args.classes == "ext4" else args.classes
        for item in classes.split(","):
            cls, _, own = item.partition("@")
            if own:
                pool = own.split(":")
            elif cls.split("+")[0] == "jblk":
                pool = ["kc1", "jr1"]
            else:
                pool = args.bases.split(",")
            for k in range(args.per_class):
                seed = args.seed0 + k
                out.append("%s/%s/%d" % (pool[seed % len(pool)], cls, seed))
    return out


def table(results):
    classes = []
    for r in results:
        c = r["spec"].split("/")[1]
        if c not in classes:
            classes.append(c)
    cols = ["tried", "e2fsck-flagged"] + [o for o in ORDER]
    lines = ["| class | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    tot = {c: 0 for c in cols}
    for c in classes:
        rs = [r for r in results if r["spec"].split("/")[1] == c]
        row = {"tried": len(rs),
               "e2fsck-flagged": sum(1 for r in rs if r.get("fsck_before") not in (None, 0))}
        for o in ORDER:
            row[o] = sum(1 for r in rs if r["outcome"] == o)
        for k in cols:
            tot[k] += row[k]
        lines.append("| %s | " % c + " | ".join(str(row[k]) for k in cols) + " |")
    lines.append("| all | " + " | ".join(str(tot[k]) for k in cols) + " |")
    return "\n".join(lines)


def report(results, allow, a):
    """Markdown: what ran, the table per class, each mutant not allowed."""
    rev = subprocess.run(["git", "-C", HERE, "describe", "--always", "--dirty"],
                         capture_output=True, text=True).stdout.strip()
    out = ["# Image fuzzer: %d mutants" % len(results), "",
           "%s, recon-fuse %s (%s build, commit %s); %s." % (
               time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), a.fuse,
               {True: "ASan+UBSan", False: "plain", None: "?"}[a.asan], rev or "?",
               "seeds %d..%d per class, classes %s, bases %s for those without @" % (
                   a.seed0, a.seed0 + a.per_class - 1,
                   mutate.EXT4_CLASSES if a.classes == "ext4" else a.classes, a.bases)
               if a.per_class else "listed mutants"),
           "Outcomes: see tests/fuzz-images/imgfuzz.py (a mutant counts under its worst); "
           "e2fsck-flagged: e2fsck -fn found the mutant damaged before the run (exit not 0).", "",
           table(results), ""]
    bad = [r for r in results if r["outcome"] not in allow]
    if bad:
        out += ["## Mutants with outcomes not allowed", ""]
        for r in bad:
            out.append("- `%s` **%s**: %s" % (r["spec"], r["outcome"], "; ".join(r.get("mutation", []))[:200]))
            for n in r["notes"]:
                out.append("  - %s" % n[:300])
        out.append("")
    return "\n".join(out)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--walk":
        walk(sys.argv[2])
        return 0
    if len(sys.argv) in (3, 4) and sys.argv[1] == "--workload":
        workload(sys.argv[2], sys.argv[3:] == ["ext4"])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("spec", nargs="*", help="mutants BASE/CLASS/SEED[/EDIT[=VALUE]]")
    ap.add_argument("--list", action="append", help="file of mutants, one a line (# comments)")
    ap.add_argument("--per-class", type=int, default=0, help="N seeded mutants per class")
    ap.add_argument("--classes", default=",".join(mutate.CLASSES_EXT3),
                    help="for --per-class: CLASS[+csum][@BASE:BASE...],... (default: the ext3 "
                    "classes), or 'ext4': mutate.EXT4_CLASSES")
    ap.add_argument("--bases", default="k1,k4,o1,kg1",
                    help="bases for --per-class of classes without @ (jblk uses kc1 and jr1)")
    ap.add_argument("--seed0", type=int, default=1)
    ap.add_argument("--fuse", default=os.environ.get("RECON_FUSE"), help="the recon-fuse binary")
    ap.add_argument("--cache", help="directory for the base images (default: a temporary one)")
    ap.add_argument("--tmp", default=None, help="where to make the work directory")
    ap.add_argument("--keep", help="copy the logs of bad outcomes here")
    ap.add_argument("--json", help="append one JSON line per mutant to this file")
    ap.add_argument("--report", help="write the table and the list of bad mutants (markdown)")
    ap.add_argument("--allow", default=",".join(o for o in ORDER if o not in BAD),
                    help="outcomes that pass (default: all but %s)" % ", ".join(BAD))
    ap.add_argument("--tabulate", help="no runs: the table (and --report) of a --json file")
    a = ap.parse_args()
    if a.tabulate:
        results = [json.loads(line) for line in open(a.tabulate)]
        a.asan, a.per_class = None, 0
        print(table(results))
        if a.report:
            with open(a.report, "w") as f:
                f.write(report(results, set(a.allow.split(",")), a))
        return 0
    if not a.fuse or not os.access(a.fuse, os.X_OK):
        ap.error("no recon-fuse binary (--fuse or RECON_FUSE)")
    a.asan = b"libasan" in subprocess.run(["ldd", a.fuse], capture_output=True).stdout
    specs = specs_from(a)
    for s in specs:
        mutate.parse_spec(s)
    own_cache = a.cache is None
    if own_cache:
        a.cache = tempfile.mkdtemp(prefix="imgfuzz-bases-", dir=a.tmp)
    os.makedirs(a.cache, exist_ok=True)
    h = Harness(a)
    allow = set(a.allow.split(","))
    results, bad = [], 0
    try:
        for s in specs:
            r = h.run(s)
            results.append(r)
            ok = r["outcome"] in allow
            bad += not ok
            print("%-40s %-9s %5.1fs  %s%s" % (s, r["outcome"], r["secs"],
                                             "; ".join(r.get("mutation", []))[:120],
                                             "" if ok else "\n    " + "\n    ".join(r["notes"])),
                  flush=True)
            if not ok and r.get("crash_log"):
                print("    " + "\n    ".join(r["crash_log"].splitlines()[:25]))
            if a.json:
                with open(a.json, "a") as f:
                    f.write(json.dumps(r) + "\n")
    finally:
        h.close()
        if own_cache:
            shutil.rmtree(a.cache, ignore_errors=True)
    print(table(results))
    if a.report:
        with open(a.report, "w") as f:
            f.write(report(results, allow, a))
    print("%d mutants, %d with outcomes not allowed (%s)" % (len(results), bad, a.allow))
    return 1 if bad else 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main())
