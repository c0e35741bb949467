"""bases.py - the small base images the fuzzer mutates.

Each base is made by mke2fs (fixed UUID, hash seed and clock) and populated by
the kernel's ext3 driver on a loop mount, so its layout (which block holds
what) is the same from run to run on one kernel; a mutant is then named by
(base, class, seed) and no binary is stored.  Bases:
  k1   1 KiB blocks, 128-byte inodes, 2 groups: xattrs in EA blocks (one shared)
  k4   4 KiB blocks, 256-byte inodes, 2 groups: xattrs in the inode and in blocks
  o1   k1 with an orphan list: one unlinked inode on s_last_orphan (debugfs)
  kc1  k1's content written by the kernel and the image copied while it is
       mounted after a sync: needs_recovery, transactions in the journal
  jr1  k1 after a workload under recon-fuse cut by its power-cut fault
       (-o deterministic,fault_crash_after=N): committed transactions in the
       journal that were not checkpointed (needs the recon-fuse binary)
  kg1  k1's content on 64 MiB, 8 groups, 4 of them empty: a mount with no seal
       claims those and checks their bitmaps after it serves
Contents: files in the direct, indirect and double-indirect ranges, a fast and
a slow symlink, a 400-entry htree directory, hard links, nested directories.
The ext4 bases e4, e1, ei, ej are bases_ext4.py's; recon-fuse writes all but
ei (inline_data), so for ei (READ_ONLY) a read-write mount must be refused.
"""
import contextlib
import os
import shutil
import subprocess
import tempfile
import time

import bases_ext4

BASES = ("k1", "k4", "o1", "kc1", "jr1", "kg1") + bases_ext4.BASES
READ_ONLY = ("ei",)
UUID = "6a3c0e52-1f7b-4c3e-9d2a-5b8e7f1c2d40"
HASH_SEED = "0b1c2d3e-4f50-4a61-8b72-93a4b5c6d7e8"
GEOMETRY = {  # base: (block size, inode size, image size)
    "k1": (1024, 128, "16M"),
    "k4": (4096, 256, "160M"),
    # 8 groups, most of them empty: a mount with no seal takes those as
    # claimed and checks their bitmaps later (checker/README.md)
    "kg1": (1024, 128, "64M"),
    "o1": (1024, 128, "16M"),
    "kc1": (1024, 128, "16M"),
    "jr1": (1024, 128, "16M"),
}


def pattern(tag, n):
    seed = tag.encode() + b":"
    out = bytearray()
    k = 0
    while len(out) < n:
        out += seed + str(k).encode() + b"|"
        k += 1
    return bytes(out[:n])


def _run(*cmd, **kw):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)


@contextlib.contextmanager
def kernel_mount(img, fstype, opts):
    """IMG mounted by the kernel's FSTYPE driver with -o OPTS on a temporary
    directory (yielded); unmounted after, retried while busy, and removed."""
    mnt = tempfile.mkdtemp(prefix="imgfuzz-base-")
    try:
        _run("mount", "-t", fstype, "-o", opts, img, mnt)
        try:
            yield mnt
        finally:
            for _ in range(50):
                if subprocess.run(["umount", mnt], stderr=subprocess.DEVNULL).returncode == 0:
                    break
                time.sleep(0.2)
    finally:
        os.rmdir(mnt)


def _populate(root, bs):
    """The tree; sizes straddle the direct/indirect/double-indirect limits."""
    per = bs // 4
    direct, ind = 12 * bs, (12 + per) * bs
    os.makedirs(root + "/d/sub/deeper")
    sizes = {"empty": 0, "small": 500, "direct": direct - 100,
             "ind": direct + 3 * bs + 7, "dind": ind + 5 * bs + 11}
    for name, size in sizes.items():
        with open("%s/d/%s" % (root, name), "wb") as f:
            f.write(pattern(name, size))
    with open(root + "/d/sub/deeper/leaf", "wb") as f:
        f.write(pattern("leaf", 3 * bs + 1))
    # a sparse file: a hole then data in the indirect range
    with open(root + "/d/sparse", "wb") as f:
        f.seek(direct + 2 * bs)
        f.write(pattern("sparse", bs + 3))
    os.symlink("d/small", root + "/sl-fast")
    os.symlink("d/" + "s" * 90 + "/../small", root + "/sl-slow")
    os.link(root + "/d/direct", root + "/d/sub/hl1")
    os.link(root + "/d/direct", root + "/hl2")
    os.makedirs(root + "/big")
    for i in range(400):
        name = "%s/big/entry-%04d-%s" % (root, i, "n" * (i % 23))
        with open(name, "wb") as f:
            if i % 50 == 0:
                f.write(pattern("big%d" % i, 100 + i))
    os.setxattr(root + "/d/small", "user.small", b"tiny value")
    os.setxattr(root + "/d/ind", "user.small", b"another")
    big = pattern("xattr", 600)
    os.setxattr(root + "/d/direct", "user.big", big)     # an EA block
    os.setxattr(root + "/d/dind", "user.big", big)       # shared with it
    os.setxattr(root + "/d/sub", "user.dir", pattern("dirx", 300))


def _is_mounted(mnt):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == os.path.realpath(mnt) for line in f)


def _crash_workload(root):
    """Metadata-heavy work with fsyncs, so that the log holds transactions."""
    for i in range(40):
        path = "%s/d/cut%d" % (root, i)
        try:
            with open(path, "wb") as f:
                f.write(pattern("cut%d" % i, 300 + 211 * i))
                if i % 3 == 0:
                    os.fsync(f.fileno())
            if i % 4 == 1:
                os.rename(path, "%s/big/cut-moved-%d" % (root, i))
            if i % 5 == 2:
                os.unlink(path)
        except OSError:
            return


def _journal_has_log(path):
    """needs_recovery, and the journal's log starts with a transaction."""
    import ext2meta
    img = ext2meta.Image(open(path, "rb").read())
    _, log = img.journal()
    return bool(img.sb[96] & 0x4) and any(k == "commit" for _, k in log)


def _run_cut(src, dest, fuse, mnt, opts):
    """Copy SRC to DEST, run the crash workload on it under recon-fuse -o OPTS."""
    shutil.copyfile(src, dest)
    p = subprocess.Popen([fuse, "-f", "-o", "deterministic," + opts, dest, mnt],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(400):
        if _is_mounted(mnt) or p.poll() is not None:
            break
        time.sleep(0.05)
    if _is_mounted(mnt):
        _crash_workload(mnt)
        subprocess.run(["fusermount3", "-u", mnt], stderr=subprocess.DEVNULL)
    try:
        p.wait(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        subprocess.run(["fusermount3", "-uz", mnt], stderr=subprocess.DEVNULL)


def _make_jr(dest, fuse):
    """A k1 image, then the workload under recon-fuse: once whole (its stats
    give the device writes W), then with a power cut at the first of a fixed
    list of fractions of W that leaves a committed log behind."""
    import json
    if not fuse:
        raise RuntimeError("base jr1 needs the recon-fuse binary")
    src = dest + ".k1"
    make("k1", src)
    mnt = tempfile.mkdtemp(prefix="imgfuzz-base-")
    try:
        _run_cut(src, dest, fuse, mnt, "stats=%s.json" % dest)
        writes = json.load(open(dest + ".json"))["device_writes"]
        os.unlink(dest + ".json")
        for tenth in (5, 6, 4, 7, 3, 8, 2, 9):
            _run_cut(src, dest, fuse, mnt, "fault_crash_after=%d,fault_seed=1" % (writes * tenth // 10))
            if _journal_has_log(dest):
                return dest
        raise RuntimeError("no power-cut point left a committed journal")
    finally:
        os.rmdir(mnt)
        os.unlink(src)


def make(name, dest, fuse=None):
    """Make base NAME at path DEST (overwritten); FUSE: the recon-fuse binary
    (for jr1)."""
    if name == "jr1":
        return _make_jr(dest, fuse)
    if name in bases_ext4.BASES:
        return bases_ext4.make(name, dest)
    bs, isz, size = GEOMETRY[name]
    env = dict(os.environ, E2FSPROGS_FAKE_TIME="1700000000", MKE2FS_CONFIG="/dev/null")
    if os.path.exists(dest):
        os.unlink(dest)
    with open(dest, "wb") as f:
        f.truncate(int(size[:-1]) << 20)
    # the journal: 1024 blocks (mke2fs's smallest); no resize inode (k4's 2 groups)
    _run("mke2fs", "-F", "-q", "-t", "ext3", "-b", str(bs), "-I", str(isz),
         "-U", UUID, "-E", "hash_seed=" + HASH_SEED, "-O", "^resize_inode",
         "-J", "size=%d" % (bs // 1024 if bs == 1024 else 4), "-N", "2048", dest, env=env)
    with kernel_mount(dest, "ext3", "loop" + (",commit=60" if name == "kc1" else "")) as mnt:
        _populate(mnt, bs)
        if name == "kc1":
            # more work after the tree is durable, then the power cut:
            # a copy while mounted, after sync (journal committed, not
            # necessarily checkpointed; needs_recovery set)
            os.sync()
            for i in range(60):
                with open("%s/d/late%d" % (mnt, i), "wb") as f:
                    f.write(pattern("late%d" % i, 200 + 53 * i))
            for i in range(0, 400, 7):
                os.unlink("%s/big/entry-%04d-%s" % (mnt, i, "n" * (i % 23)))
            os.sync()
            shutil.copyfile(dest, dest + ".cut")
    if name == "kc1":
        os.replace(dest + ".cut", dest)
    if name == "o1":
        # an orphan: a file whose last name is gone while it is "open"
        cmds = ("unlink /d/ind\nsif <%d> links_count 0\nssv last_orphan %d\n")
        ino = int(subprocess.run(["debugfs", "-R", "stat /d/ind", dest], capture_output=True,
                                 text=True).stdout.split("Inode: ")[1].split()[0])
        subprocess.run(["debugfs", "-w", "-f", "-", dest], input=cmds % (ino, ino),
                       text=True, check=True, capture_output=True)
    return dest


def get(name, cache_dir, fuse=None):
    """Base NAME from CACHE_DIR, made once per cache."""
    path = os.path.join(cache_dir, "base-%s.img" % name)
    if not os.path.exists(path):
        make(name, path + ".tmp", fuse)
        os.replace(path + ".tmp", path)
    return path
