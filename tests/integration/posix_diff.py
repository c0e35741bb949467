"""tests/integration/posix_diff.py - the body of posix_diff.sh.

  posix_diff.py run ROOT OUT.json UID GID
      runs one scripted sequence of file-system operations under ROOT (a
      fresh ext3 file system) and writes the observable outcome of every step
      (return value or errno, contents as length+hash, the stat fields two
      drivers must agree on, time relations, listings, xattrs, statvfs deltas)
      as an ordered JSON list of [step, outcome].  UID/GID: the unprivileged
      user for the steps that must not run as root.
  posix_diff.py compare KERNEL.json RECON.json BLOCKSIZE [FS]
      prints a FAIL line for every step whose outcomes differ, unless
      EXPECTED below (EXPECTED_EXT4 when FS is ext4) accepts exactly that
      difference; and for every section
      that stopped on an exception, on either driver (even the same one).

The sequence is deterministic: the same steps in the same order on both
drivers, so every difference is a difference of semantics.
"""
import ctypes
import errno
import json
import mmap
import os
import re
import stat
import struct
import sys
import time

from pylib import _libc, renameat2, fallocate, pattern, sha, RENAME_NOREPLACE, RENAME_EXCHANGE
from pylib import FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE

# Expected differences: step (a regular expression matching the whole step
# name) -> test(kernel's outcome, recon-fuse's outcome, block size), true when
# the difference is exactly the expected one; anything else that differs fails.
EXPECTED = {
    # The kernel's ext4 driver serving ext3 refuses fallocate on block-mapped
    # (non-extent) files; recon-fuse allocates zeroed
    # blocks and extends the size for mode 0 (README.md, "Limits").
    "fallocate/mode0": lambda k, o, bs: k == "err:" + errno.errorcode[errno.EOPNOTSUPP] and o == "ok",
    # ... so the file is empty on the kernel and 5 blocks long on recon-fuse
    "fallocate/mode0-stat": lambda k, o, bs: (
        (k["size"], k["blocks"]) == (0, 0) and (o["size"], o["blocks"]) == (5 * bs, 5 * bs // 512)
        and dict(k, size=0, blocks=0) == dict(o, size=0, blocks=0)),
    # O_TMPFILE: the FUSE protocol has TMPFILE, but libfuse 3.14 (Debian 12's)
    # has no operation for it, so the kernel's FUSE client answers EOPNOTSUPP.
    "tmpfile/open": lambda k, o, bs: k == "ok" and o == "err:" + errno.errorcode[errno.EOPNOTSUPP],
    "tmpfile/named": lambda k, o, bs: k["nlink"] == 1 and o == "err:ENOENT",
    # A punched hole: the kernel (ext4_ind_remove_space) keeps the indirect
    # blocks the punch emptied, recon-fuse (ext2fs_punch) frees them: fewer
    # blocks on recon-fuse (up to a double-indirect and two indirect blocks).
    r"fallocate/punch-.*-fstat": lambda k, o, bs: (
        dict(k, blocks=0) == dict(o, blocks=0)
        and 0 < k["blocks"] - o["blocks"] <= 3 * bs // 512),
    # Opening an immutable file for writing as a user without write
    # permission: the kernel's VFS tests immutability first (EPERM); the FUSE
    # client checks the permission bits (default_permissions) before the
    # request reaches the daemon, which alone knows the flag (EACCES).
    "flags/user-write-imm": lambda k, o, bs: k == "err:EPERM" and o == "err:EACCES",
}

# On ext4 (extent-mapped files) the kernel allocates for fallocate as
# recon-fuse does and frees no index block a punch empties; what stays
# different is the FUSE client's.
EXPECTED_EXT4 = {step: EXPECTED[step] for step in (
    "tmpfile/open", "tmpfile/named", "flags/user-write-imm")}
EXPECTED_EXT4.update({
    # The kernel converts a small extent-mapped file to a block map when
    # its extents flag is cleared (ext4_ind_migrate); recon-fuse does not
    # convert and refuses (EINVAL), so the flag stays.
    "flags/clear-extents": lambda k, o, bs: k == "ok" and o == "err:EINVAL",
    "flags/clear-extents-flags": lambda k, o, bs: k == "0" and o == "80000",
    # FALLOC_FL_ZERO_RANGE: the kernel zeroes the range of an extent-mapped
    # file; recon-fuse answers EOPNOTSUPP (README.md, "Limits").  The file's
    # first block then differs, its size does not.
    "fallocate/zero-range": lambda k, o, bs: k == "ok" and o == "err:" + errno.errorcode[errno.EOPNOTSUPP],
    "fallocate/k-stat": lambda k, o, bs: dict(k, blocks=0) == dict(o, blocks=0),
    "fallocate/k-content": lambda k, o, bs: k.split(":")[0] == o.split(":")[0],
    # Delayed allocation: right after the writes the kernel counts the data
    # blocks it has reserved but not the extent index block their fifth
    # extent will need at writeback; recon-fuse allocates both at once.
    "holes/pwrite-tind-fstat": lambda k, o, bs: (
        dict(k, blocks=0) == dict(o, blocks=0) and o["blocks"] - k["blocks"] == bs // 512),
    # A 4 MiB file written at once: the kernel's allocator finds one run;
    # recon-fuse's may fill the gaps the removed directories left, and past
    # four extents the tree needs an index block (bfree, bavail, st_blocks).
    "statfs/dense-blocks": lambda k, o, bs: (
        o[0] - k[0] == o[1] - k[1] in (1, 2) and o[2] - k[2] == (o[0] - k[0]) * bs // 512),
})

UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2
XATTR_CREATE = 1
XATTR_REPLACE = 2
SEEK_DATA = 3
SEEK_HOLE = 4
OLD = 1_000_000_000     # a time in the past: "moved" is then "moved forward"


class Run:
    def __init__(self, root, uid, gid):
        self.root = root
        self.uid = uid
        self.gid = gid
        self.out = []
        self.names = set()
        self.bs = os.statvfs(root).f_bsize
        self.prefix = ""

    def rec(self, step, outcome):
        step = self.prefix + step
        assert step not in self.names, "duplicate step " + step
        self.names.add(step)
        self.out.append([step, outcome])

    def do(self, step, fn, *args, show=None):
        """Run fn(*args); record 'ok[:shown result]' or 'err:ERRNO'.
        Returns the result, or None if it raised."""
        try:
            res = fn(*args)
        except OSError as e:
            self.rec(step, "err:" + errno.errorcode.get(e.errno, str(e.errno)))
            return None
        self.rec(step, "ok" if show is None else "ok:%s" % (show(res),))
        return res

    def close_fd(self, fd):
        if fd is not None:
            os.close(fd)


def err_name(e):
    return "err:" + errno.errorcode.get(e.errno, str(e.errno))


def stat_fields(s):
    """The fields two drivers must agree on (not inode numbers, not times)."""
    d = {"type": stat.S_IFMT(s.st_mode), "mode": "%o" % stat.S_IMODE(s.st_mode),
         "nlink": s.st_nlink, "uid": s.st_uid, "gid": s.st_gid,
         "size": s.st_size, "blocks": s.st_blocks}
    if stat.S_ISCHR(s.st_mode) or stat.S_ISBLK(s.st_mode):
        d["rdev"] = "%d:%d" % (os.major(s.st_rdev), os.minor(s.st_rdev))
    return d


def lst(path):
    try:
        return stat_fields(os.lstat(path))
    except OSError as e:
        return err_name(e)


def fst(fd):
    try:
        return stat_fields(os.fstat(fd))
    except OSError as e:
        return err_name(e)


def content(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return err_name(e)
    return "%d:%s" % (len(data), sha(data)[:16])


def digest(data):
    return "%d:%s" % (len(data), sha(data)[:16])


def times(path):
    s = os.lstat(path)
    return (s.st_mtime_ns, s.st_ctime_ns)


def moved(before, path):
    """'m+' / 'm=' / 'm-' and 'c...' for mtime and ctime against before."""
    try:
        after = times(path)
    except OSError as e:
        return err_name(e)
    rel = lambda a, b: "+" if b > a else ("=" if a == b else "-")
    return "m%s c%s" % (rel(before[0], after[0]), rel(before[1], after[1]))


def age(*paths):
    """Set atime/mtime far in the past and let the clock pass the current
    ctime, so that a step's effect on mtime and ctime is visible."""
    for p in paths:
        os.utime(p, (OLD, OLD), follow_symlinks=False)
    time.sleep(0.012)
    return {p: times(p) for p in paths}


def write_file(path, data, mode=0o644):
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def c_utimensat(path, a, m, nofollow=False):
    class Timespec(ctypes.Structure):
        _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]
    ts = (Timespec * 2)()
    for i, v in enumerate((a, m)):
        if v in (UTIME_NOW, UTIME_OMIT):
            ts[i].tv_sec, ts[i].tv_nsec = 0, v
        else:
            ts[i].tv_sec, ts[i].tv_nsec = v // 10**9, v % 10**9
    fn = _libc.utimensat
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    rc = fn(-100, os.fsencode(path), ts, 0x100 if nofollow else 0)
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), path)


def c_linkat_fd(fd, newpath):
    """linkat(fd, "", AT_FDCWD, newpath, AT_EMPTY_PATH): a name for an open file."""
    fn = _libc.linkat
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    if fn(fd, b"", -100, os.fsencode(newpath), 0x1000) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), newpath)


def c_getxattr(path, name, size):
    """getxattr(2) with an explicit buffer size (ERANGE, size queries)."""
    buf = ctypes.create_string_buffer(max(size, 1))
    fn = _libc.lgetxattr
    fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
    fn.restype = ctypes.c_ssize_t
    rc = fn(os.fsencode(path), name.encode(), buf if size else None, size)
    if rc < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), path)
    return rc if size == 0 else buf.raw[:rc]


def c_listxattr(path, size):
    buf = ctypes.create_string_buffer(max(size, 1))
    fn = _libc.llistxattr
    fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
    fn.restype = ctypes.c_ssize_t
    rc = fn(os.fsencode(path), buf if size else None, size)
    if rc < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), path)
    return rc if size == 0 else buf.raw[:rc]


def xattrs(path):
    """Sorted names with value digests."""
    try:
        names = sorted(os.listxattr(path, follow_symlinks=False))
        return ["%s=%s" % (n, digest(os.getxattr(path, n, follow_symlinks=False))) for n in names]
    except OSError as e:
        return err_name(e)


class Dirent(ctypes.Structure):
    _fields_ = [("d_ino", ctypes.c_uint64), ("d_off", ctypes.c_int64),
                ("d_reclen", ctypes.c_ushort), ("d_type", ctypes.c_ubyte),
                ("d_name", ctypes.c_char * 256)]


def listing(path):
    """Sorted (name, d_type) through readdir(3), '.' and '..' included."""
    opendir = _libc.opendir
    opendir.argtypes = [ctypes.c_char_p]
    opendir.restype = ctypes.c_void_p
    readdir = _libc.readdir
    readdir.argtypes = [ctypes.c_void_p]
    readdir.restype = ctypes.POINTER(Dirent)
    closedir = _libc.closedir
    closedir.argtypes = [ctypes.c_void_p]
    d = opendir(os.fsencode(path))
    if not d:
        e = ctypes.get_errno()
        return "err:" + errno.errorcode.get(e, str(e))
    names = []
    while True:
        ctypes.set_errno(0)
        ent = readdir(d)
        if not ent:
            break
        names.append("%s/%d" % (ent.contents.d_name.decode(), ent.contents.d_type))
    closedir(d)
    return sorted(names)


def as_user(run, uid, gid, body, groups=()):
    """body(rec) in a forked child with uid/gid and the supplementary groups
    given (none by default); its records come back through a pipe, in order."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        recs = []
        try:
            os.setgroups(list(groups))
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            body(lambda step, outcome: recs.append([step, outcome]))
        except BaseException as e:       # the parent records it as a failure
            recs.append(["<child-exception>", repr(e)])
        os.write(wfd, json.dumps(recs).encode())
        os._exit(0)
    os.close(wfd)
    data = b""
    while True:
        b = os.read(rfd, 65536)
        if not b:
            break
        data += b
    os.close(rfd)
    os.waitpid(pid, 0)
    for step, outcome in json.loads(data):
        run.rec(step, outcome)


def user_do(rec, step, fn, *args, show=None):
    try:
        res = fn(*args)
    except OSError as e:
        rec(step, err_name(e))
        return None
    rec(step, "ok" if show is None else "ok:%s" % (show(res),))
    return res


# ---------------------------------------------------------------- sections

def sec_fresh(r):
    """statvfs of the fresh file system, as df shows it."""
    s = os.statvfs(".")
    r.rec("statvfs", {"bsize": s.f_bsize, "frsize": s.f_frsize, "blocks": s.f_blocks,
                      "bfree": s.f_bfree, "bavail": s.f_bavail, "files": s.f_files,
                      "ffree": s.f_ffree, "favail": s.f_favail, "namemax": s.f_namemax,
                      "flag-rdonly": s.f_flag & os.ST_RDONLY})
    r.rec("root", lst("."))
    r.rec("root-listing", listing("."))
    r.rec("lost+found", lst("lost+found"))


def sec_open(r):
    bs = r.bs
    os.mkdir("open")
    os.chdir("open")
    data = pattern("open", 3 * bs + 7)
    for name in ("t-wr", "t-rdwr", "t-empty", "t-rdonly", "excl"):
        write_file(name, data if name != "t-empty" else b"")
    r.do("creat-excl-existing", os.open, "excl", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    r.rec("creat-excl-existing-content", content("excl"))
    fd = r.do("creat-existing-no-excl", os.open, "excl", os.O_CREAT | os.O_WRONLY, 0o600)
    r.close_fd(fd)
    r.rec("creat-existing-mode-kept", lst("excl"))
    for name, flags in (("t-wr", os.O_WRONLY), ("t-rdwr", os.O_RDWR), ("t-empty", os.O_WRONLY),
                        ("t-rdonly", os.O_RDONLY)):
        before = age(name, ".")[name]
        fd = r.do("trunc-%s" % name, os.open, name, flags | os.O_TRUNC)
        r.rec("trunc-%s-fstat" % name, fst(fd) if fd is not None else None)
        r.close_fd(fd)
        r.rec("trunc-%s-stat" % name, lst(name))
        r.rec("trunc-%s-content" % name, content(name))
        r.rec("trunc-%s-times" % name, moved(before, name))
    # O_TRUNC | O_CREAT on an existing file with data, then write
    fd = r.do("trunc-creat", os.open, "excl", os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o644)
    if fd is not None:
        r.do("trunc-creat-write", os.write, fd, b"abc", show=str)
        os.close(fd)
    r.rec("trunc-creat-content", content("excl"))
    # O_APPEND with two fds and a plain one
    write_file("app", b"0123456789")
    a1 = os.open("app", os.O_WRONLY | os.O_APPEND)
    a2 = os.open("app", os.O_WRONLY | os.O_APPEND)
    pl = os.open("app", os.O_WRONLY)
    r.do("append-1", os.write, a1, b"first-", show=str)
    r.do("append-2", os.write, a2, b"second-", show=str)
    r.do("append-plain-at-0", os.write, pl, b"XY", show=str)
    r.do("append-1-again", os.write, a1, pattern("ap", bs + 3), show=str)
    r.do("append-pwrite-ignores-offset", os.pwrite, a2, b"PW", 0, show=str)
    r.do("append-offset-after", os.lseek, a2, 0, os.SEEK_CUR, show=str)
    for f in (a1, a2, pl):
        os.close(f)
    r.rec("append-content", content("app"))
    r.rec("append-stat", lst("app"))
    # O_DIRECTORY, O_NOFOLLOW, symlinks, directories
    os.symlink("app", "lnk")
    os.symlink("not-yet", "dangling")
    os.mkdir("dir")
    r.do("odirectory-on-file", os.open, "app", os.O_RDONLY | os.O_DIRECTORY)
    r.do("odirectory-on-symlink-to-file", os.open, "lnk", os.O_RDONLY | os.O_DIRECTORY)
    fd = r.do("odirectory-on-dir", os.open, "dir", os.O_RDONLY | os.O_DIRECTORY)
    r.close_fd(fd)
    r.do("onofollow-on-symlink", os.open, "lnk", os.O_RDONLY | os.O_NOFOLLOW)
    fd = r.do("onofollow-on-file", os.open, "app", os.O_RDONLY | os.O_NOFOLLOW)
    r.close_fd(fd)
    r.do("ocreat-odirectory", os.open, "newdir", os.O_CREAT | os.O_DIRECTORY | os.O_RDWR, 0o755)
    r.do("dir-wronly", os.open, "dir", os.O_WRONLY)
    r.do("dir-rdwr", os.open, "dir", os.O_RDWR)
    r.do("file-trailing-slash", os.open, "app/", os.O_RDONLY)
    r.do("creat-trailing-slash", os.open, "nf/", os.O_CREAT | os.O_WRONLY, 0o644)
    r.do("excl-on-dangling-symlink", os.open, "dangling", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    fd = r.do("creat-through-dangling-symlink", os.open, "dangling", os.O_CREAT | os.O_WRONLY, 0o640)
    r.close_fd(fd)
    r.rec("creat-through-dangling-target", lst("not-yet"))
    old = os.umask(0o027)
    fd = r.do("creat-umask", os.open, "um", os.O_CREAT | os.O_WRONLY, 0o777)
    r.close_fd(fd)
    os.umask(old)
    r.rec("creat-umask-stat", lst("um"))
    # O_DIRECT: aligned transfers bypass the page cache
    buf = mmap.mmap(-1, 2 * 4096)
    buf.write(pattern("direct", 2 * 4096))
    fd = r.do("odirect-open", os.open, "direct", os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o644)
    if fd is not None:
        r.do("odirect-write", os.pwritev, fd, [buf], 0, show=str)
        rbuf = mmap.mmap(-1, 2 * 4096)
        r.do("odirect-read", os.preadv, fd, [rbuf], 0, show=str)
        r.rec("odirect-read-data", digest(rbuf[:]))
        os.close(fd)
    r.rec("odirect-content", content("direct"))
    # fsync on a directory and on a read-only descriptor
    fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    r.do("fsync-dir", os.fsync, fd)
    os.close(fd)
    fd = os.open("app", os.O_RDONLY)
    r.do("fsync-rdonly", os.fsync, fd)
    r.do("write-rdonly-fd", os.write, fd, b"x")
    os.close(fd)
    r.rec("listing", listing("."))
    os.chdir("..")


def sec_tmpfile(r):
    """O_TMPFILE: an unnamed file, given a name later (in a directory of its
    own: the allowlist covers both steps)."""
    os.mkdir("tmpf")
    os.chdir("tmpf")
    fd = r.do("open", os.open, ".", os.O_TMPFILE | os.O_RDWR, 0o600)
    if fd is not None:
        os.write(fd, b"tmp")
        try:
            c_linkat_fd(fd, "named")
        except OSError:
            pass                # shows in "named"
        os.close(fd)
    r.rec("named", lst("named"))
    os.chdir("..")


def sec_holes(r):
    bs = r.bs
    ppb = bs // 4
    os.mkdir("holes")
    os.chdir("holes")
    fd = os.open("h", os.O_CREAT | os.O_RDWR, 0o644)
    for label, off in (("10", 10 * bs), ("ind", 12 * bs), ("ind-last", (12 + ppb - 1) * bs + 1),
                       ("dind", (12 + ppb) * bs), ("dind-2", (12 + ppb + ppb) * bs + bs - 1),
                       ("tind", (12 + ppb + ppb * ppb) * bs + 3)):
        r.do("pwrite-" + label, os.pwrite, fd, b"x" * 5, off, show=str)
        r.rec("pwrite-%s-fstat" % label, fst(fd))
    r.rec("hole-read", digest(os.pread(fd, 3 * bs, 5 * bs)))
    r.rec("hole-read-around", digest(os.pread(fd, 2 * bs, 12 * bs - bs)))
    os.lseek(fd, 20 * bs, os.SEEK_SET)
    r.do("lseek-end-write", os.write, fd, b"tail", show=str)
    size = os.fstat(fd).st_size
    for label, off in (("0", 0), ("in-data", 10 * bs + 2), ("ind", 11 * bs + 7),
                       ("past-ind", 13 * bs), ("dind", (12 + ppb) * bs + 1), ("near-end", size - 1),
                       ("at-end", size), ("past-end", 1 << 40)):
        r.do("seek-data-" + label, os.lseek, fd, off, SEEK_DATA, show=str)
        r.do("seek-hole-" + label, os.lseek, fd, off, SEEK_HOLE, show=str)
    os.close(fd)
    r.rec("h-content", content("h"))
    fd = os.open("large", os.O_CREAT | os.O_RDWR, 0o644)
    r.do("write-3M-unaligned", os.pwrite, fd, pattern("large", (3 << 20) + 7), 12345, show=str)
    r.rec("write-3M-unaligned-fstat", fst(fd))
    r.rec("write-3M-unaligned-read", digest(os.pread(fd, 4 << 20, 0)))
    os.close(fd)
    write_file("dense", pattern("dense", 3 * bs + 1))
    fd = os.open("dense", os.O_RDONLY)
    r.do("dense-seek-hole", os.lseek, fd, 5, SEEK_HOLE, show=str)
    r.do("dense-seek-data", os.lseek, fd, bs + 1, SEEK_DATA, show=str)
    os.close(fd)
    fd = os.open("empty", os.O_CREAT | os.O_RDONLY, 0o644)
    r.do("empty-seek-hole", os.lseek, fd, 0, SEEK_HOLE, show=str)
    r.do("empty-seek-data", os.lseek, fd, 0, SEEK_DATA, show=str)
    os.close(fd)
    # read at / after EOF
    write_file("e", pattern("eof", bs + 10))
    fd = os.open("e", os.O_RDONLY)
    r.do("read-at-eof", os.pread, fd, 100, bs + 10, show=digest)
    r.do("read-past-eof", os.pread, fd, 100, bs + 1000, show=digest)
    r.do("read-short-at-end", os.pread, fd, 100, bs, show=digest)
    r.do("read-huge-offset", os.pread, fd, 100, 1 << 50, show=digest)
    os.lseek(fd, 0, os.SEEK_END)
    r.do("read-at-end-pos", os.read, fd, 10, show=digest)
    os.close(fd)
    # the largest offset a byte can be written at, and the straddling write
    fd = os.open("big", os.O_CREAT | os.O_RDWR, 0o644)
    lo, hi = 0, 1 << 45      # lo: writable; hi: not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            os.pwrite(fd, b"z", mid)
            lo = mid
        except OSError as e:
            if e.errno != errno.EFBIG:
                r.rec("maxbytes-probe-%d" % mid, err_name(e))
                break
            hi = mid
        os.ftruncate(fd, 0)
    r.rec("max-writable-offset", lo)
    r.do("write-straddling-max", os.pwrite, fd, b"s" * (2 * bs), lo + 1 - bs, show=str)
    r.rec("write-straddling-max-fstat", fst(fd))
    r.do("write-at-max", os.pwrite, fd, b"s", lo + 1, show=str)
    r.do("truncate-to-max", os.ftruncate, fd, lo + 1)
    r.do("truncate-past-max", os.ftruncate, fd, lo + 2)
    r.rec("truncate-max-fstat", fst(fd))
    os.ftruncate(fd, 0)
    os.close(fd)
    os.chdir("..")


def sec_truncate(r):
    bs = r.bs
    ppb = bs // 4
    os.mkdir("trunc")
    os.chdir("trunc")
    full = pattern("trunc", (12 + ppb + 2) * bs + 100)
    fd = os.open("t", os.O_CREAT | os.O_RDWR, 0o644)
    os.write(fd, full)
    r.rec("full-fstat", fst(fd))
    for label, size in (("dind+1", (12 + ppb + 1) * bs), ("dind", (12 + ppb) * bs),
                        ("ind+1", 12 * bs + 1), ("ind", 12 * bs), ("11.5", 11 * bs + bs // 2),
                        ("up-dind", (12 + ppb) * bs + 1), ("up-ind", 12 * bs + 7),
                        ("down-1", 1), ("up-2blocks", 2 * bs), ("zero", 0)):
        before = age("t")["t"]
        r.do("ftruncate-" + label, os.ftruncate, fd, size)
        r.rec("ftruncate-%s-fstat" % label, fst(fd))
        r.rec("ftruncate-%s-content" % label, digest(os.pread(fd, len(full) + bs, 0)))
        r.rec("ftruncate-%s-times" % label, moved(before, "t"))
    # a truncate that does not change the size still moves mtime and ctime
    before = age("t")["t"]
    r.do("ftruncate-same-size", os.ftruncate, fd, 0)
    r.rec("ftruncate-same-size-times", moved(before, "t"))
    # the tail of a partial block is zero after truncate down and up
    os.pwrite(fd, b"\xff" * (3 * bs), 0)
    os.ftruncate(fd, bs + 100)
    os.ftruncate(fd, 3 * bs)
    r.rec("trunc-tail-zeroed", digest(os.pread(fd, 3 * bs, 0)))
    os.ftruncate(fd, 1500)          # inside a page, across a 1 KiB block
    os.ftruncate(fd, 8192)
    r.rec("trunc-tail-zeroed-page", digest(os.pread(fd, 8192, 0)))
    os.close(fd)
    r.do("truncate-path", os.truncate, "t", 5 * bs)
    r.rec("truncate-path-stat", lst("t"))
    r.do("truncate-negative", os.truncate, "t", -1)
    os.mkdir("d")
    r.do("truncate-dir", os.truncate, "d", 0)
    os.mkfifo("fifo")
    r.do("truncate-fifo", os.truncate, "fifo", 0)
    fd = os.open("t", os.O_RDONLY)
    r.do("ftruncate-rdonly-fd", os.ftruncate, fd, 0)
    os.close(fd)
    os.chdir("..")


def sec_coherence(r):
    bs = r.bs
    os.mkdir("coh")
    os.chdir("coh")
    write_file("f", pattern("coh0", 2 * bs))
    fr = os.open("f", os.O_RDONLY)
    fw = os.open("f", os.O_WRONLY)
    r.rec("read-before", digest(os.pread(fr, 4 * bs, 0)))
    os.pwrite(fw, b"NEW" * 100, bs // 2)
    r.rec("read-after-other-fd-write", digest(os.pread(fr, 4 * bs, 0)))
    os.pwrite(fw, pattern("coh1", bs), 2 * bs)        # extends the file
    r.rec("read-after-other-fd-extend", digest(os.pread(fr, 4 * bs, 0)))
    r.rec("fstat-reader-after-extend", fst(fr))
    # mmap of the reader sees writes through the writer
    mm = mmap.mmap(fr, 3 * bs, mmap.MAP_SHARED, mmap.PROT_READ)
    r.rec("mmap-before", digest(mm[:]))
    os.pwrite(fw, b"MMAP" * 10, 10)
    r.rec("mmap-after-write", digest(mm[:]))
    mm.close()
    # writes through a shared mapping, seen by read(2) and after msync
    frw = os.open("f", os.O_RDWR)
    mm = mmap.mmap(frw, 3 * bs, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    mm[bs:bs + 8] = b"WRITTEN!"
    r.rec("read-after-mmap-store", digest(os.pread(fr, 4 * bs, 0)))
    mm.flush()
    mm.close()
    os.close(frw)
    for f in (fr, fw):
        os.close(f)
    r.rec("content-after", content("f"))
    # a new open sees what a still-open writer wrote
    fw = os.open("f", os.O_WRONLY | os.O_APPEND)
    os.write(fw, b"appended")
    r.rec("new-open-sees-append", content("f"))
    r.rec("stat-while-writer-open", lst("f"))
    os.close(fw)
    os.chdir("..")


def sec_unlinked(r):
    bs = r.bs
    os.mkdir("unl")
    os.chdir("unl")
    write_file("f", pattern("unl", 3 * bs))
    fd = os.open("f", os.O_RDWR)
    sv0 = statvfs_settled()
    r.do("unlink-open", os.unlink, "f")
    r.rec("unlinked-fstat", fst(fd))
    r.rec("unlinked-read", digest(os.pread(fd, 10 * bs, 0)))
    r.do("unlinked-write", os.pwrite, fd, pattern("unl2", 2 * bs), 2 * bs, show=str)
    r.rec("unlinked-fstat-after-write", fst(fd))
    r.rec("unlinked-read-after-write", digest(os.pread(fd, 10 * bs, 0)))
    r.do("unlinked-ftruncate", os.ftruncate, fd, bs)
    r.rec("unlinked-fstat-after-truncate", fst(fd))
    r.do("unlinked-fchmod", os.fchmod, fd, 0o600)
    r.rec("unlinked-fstat-after-fchmod", fst(fd))
    r.do("unlinked-fsync", os.fsync, fd)
    r.do("unlinked-futimens", lambda: os.utime(fd, ns=(OLD * 10**9 + 5, OLD * 10**9 + 7)))
    s = os.fstat(fd)
    r.rec("unlinked-futimens-values", [s.st_atime_ns, s.st_mtime_ns])
    r.rec("unlinked-stat-path", lst("f"))
    sv1 = os.statvfs(".")
    r.rec("unlinked-inode-still-used", sv1.f_ffree - sv0.f_ffree)
    os.close(fd)
    # FUSE sends RELEASE after close(2) returns: wait for the inode to be
    # freed (the kernel's ext3 frees it before close returns)
    for _ in range(100):
        sv2 = os.statvfs(".")
        if sv2.f_ffree != sv1.f_ffree:
            break
        time.sleep(0.02)
    r.rec("unlinked-inode-freed-at-close", sv2.f_ffree - sv0.f_ffree)
    r.rec("listing", listing("."))
    os.chdir("..")


def sec_rename(r):
    bs = r.bs
    os.mkdir("ren")
    os.chdir("ren")
    write_file("a", pattern("ra", 100))
    write_file("b", pattern("rb", 2 * bs))
    bfd = os.open("b", os.O_RDONLY)     # the target is open: it stays readable
    t = age("a", ".")
    r.do("file-over-file", os.rename, "a", "b")
    r.rec("file-over-file-src", lst("a"))
    r.rec("file-over-file-dst", lst("b"))
    r.rec("file-over-file-content", content("b"))
    r.rec("file-over-file-ctime", moved(t["a"], "b"))
    r.rec("file-over-file-dir-times", moved(t["."], "."))
    r.rec("replaced-open-target-fstat", fst(bfd))
    r.rec("replaced-open-target-read", digest(os.pread(bfd, 4 * bs, 0)))
    os.close(bfd)
    os.makedirs("d1/sub")
    os.mkdir("d2")
    os.makedirs("full/x")
    write_file("file", b"f")
    r.rec("nlink-before", [lst(".")["nlink"], lst("d1")["nlink"], lst("d2")["nlink"]])
    r.do("dir-over-empty-dir", os.rename, "d1", "d2")
    r.rec("dir-over-empty-dir-nlink", [lst(".")["nlink"], lst("d2")["nlink"], lst("d1")])
    r.do("dir-over-nonempty-dir", os.rename, "d2", "full")
    r.do("file-over-dir", os.rename, "file", "full")
    r.do("dir-over-file", os.rename, "d2", "file")
    r.do("dir-into-own-subdir", os.rename, "d2", "d2/sub/x")
    r.do("dir-onto-own-subdir", os.rename, "d2", "d2/sub")
    r.do("dot-rename", os.rename, "d2/.", "dd")
    r.do("missing-source", os.rename, "nothere", "x")
    r.do("to-missing-dir", os.rename, "file", "nothere/x")
    r.do("dir-trailing-slash", os.rename, "d2/", "d3/")
    r.do("file-trailing-slash", os.rename, "file/", "file2")
    r.do("back", os.rename, "d3", "d2")
    # hard links to one inode: a no-op, both names stay
    os.link("file", "file-link")
    t = age("file", ".")
    r.do("same-inode", os.rename, "file", "file-link")
    r.rec("same-inode-names", [lst("file"), lst("file-link")])
    r.rec("same-inode-times", [moved(t["file"], "file"), moved(t["."], ".")])
    r.do("to-itself", os.rename, "file", "file")
    os.mkdir("other")
    os.link("file", "other/file-link2")
    r.do("same-inode-across-dirs", os.rename, "file", "other/file-link2")
    r.rec("same-inode-across-dirs-names", [lst("file"), lst("other/file-link2")])
    # across directories: '..' and link counts
    os.makedirs("p1/mv/inner")
    os.mkdir("p2")
    t = age("p1", "p2", "p1/mv")
    r.do("across-dirs", os.rename, "p1/mv", "p2/mv")
    r.rec("across-dirs-nlink", [lst("p1")["nlink"], lst("p2")["nlink"], lst("p2/mv")["nlink"]])
    r.rec("across-dirs-dotdot-is-p2", os.stat("p2/mv/..").st_ino == os.stat("p2").st_ino)
    r.rec("across-dirs-times", [moved(t["p1"], "p1"), moved(t["p2"], "p2"), moved(t["p1/mv"], "p2/mv")])
    r.rec("across-dirs-listing", [listing("p1"), listing("p2"), listing("p2/mv")])
    # replacing a directory across directories
    os.mkdir("p1/empty")
    r.do("dir-over-empty-dir-across", os.rename, "p2/mv", "p1/empty")
    r.rec("dir-over-empty-dir-across-nlink", [lst("p1")["nlink"], lst("p2")["nlink"]])
    # renameat2
    write_file("n1", b"1")
    write_file("n2", b"22")
    r.do("noreplace-existing", renameat2, "n1", "n2", RENAME_NOREPLACE)
    r.do("noreplace-free", renameat2, "n1", "n3", RENAME_NOREPLACE)
    r.do("exchange-files", renameat2, "n3", "n2", RENAME_EXCHANGE)
    r.rec("exchange-files-content", [content("n2"), content("n3")])
    r.do("exchange-missing", renameat2, "n3", "nothere", RENAME_EXCHANGE)
    r.do("exchange-file-dir-across", renameat2, "n2", "p1/empty", RENAME_EXCHANGE)
    r.rec("exchange-file-dir-nlink", [lst(".")["nlink"], lst("p1")["nlink"], lst("n2"), lst("p1/empty")])
    r.rec("exchange-dotdot", os.stat("n2/..").st_ino == os.stat(".").st_ino)
    # rename of an open file: the fd follows the inode
    write_file("open-src", pattern("os", bs))
    fd = os.open("open-src", os.O_RDWR)
    r.do("open-file", os.rename, "open-src", "p2/open-dst")
    r.do("open-file-write", os.pwrite, fd, b"after rename", 5, show=str)
    r.rec("open-file-fstat", fst(fd))
    os.close(fd)
    r.rec("open-file-content", content("p2/open-dst"))
    r.rec("listing", listing("."))
    os.chdir("..")


def sec_links(r):
    os.mkdir("lnk")
    os.chdir("lnk")
    write_file("f", b"data")
    os.mkdir("d")
    t = age("f", ".", "d")
    r.do("link", os.link, "f", "d/g")
    r.rec("link-stat", [lst("f"), lst("d/g")])
    r.rec("link-times", [moved(t["f"], "f"), moved(t["."], "."), moved(t["d"], "d")])
    r.do("link-existing", os.link, "f", "d/g")
    r.do("link-dir", os.link, "d", "d2")
    r.do("link-missing", os.link, "nothere", "x")
    r.do("link-into-missing", os.link, "f", "nothere/x")
    os.symlink("f", "sl")
    r.do("link-symlink", os.link, "sl", "sl2")
    r.rec("link-symlink-stat", lst("sl2"))
    t = age("f", "d")
    r.do("unlink-one", os.unlink, "d/g")
    r.rec("unlink-one-stat", lst("f"))
    r.rec("unlink-one-times", [moved(t["f"], "f"), moved(t["d"], "d")])
    r.do("unlink-dir", os.unlink, "d")
    r.do("rmdir-file", os.rmdir, "f")
    r.do("unlink-missing", os.unlink, "nothere")
    r.do("unlink-trailing-slash", os.unlink, "f/")
    os.chdir("..")


def sec_symlink(r):
    bs = r.bs
    os.mkdir("sym")
    os.chdir("sym")
    for n in sorted({1, 59, 60, 61, 500, bs - 1, bs, 4095, 4096}):
        target = ("t%d-" % n + "x" * n)[:n]
        r.do("symlink-%d" % n, os.symlink, target, "s%d" % n)
        if os.path.lexists("s%d" % n):
            r.rec("symlink-%d-stat" % n, lst("s%d" % n))
            r.rec("symlink-%d-readlink" % n, digest(os.readlink("s%d" % n).encode()))
    os.symlink("target", "s")
    r.do("symlink-existing", os.symlink, "other", "s")
    r.do("symlink-empty-target", os.symlink, "", "empty")
    r.do("readlink-file", os.readlink, ".")
    r.do("readlink-missing", os.readlink, "nothere")
    r.do("lchown-symlink", lambda: os.chown("s", 123, 456, follow_symlinks=False))
    r.rec("lchown-symlink-stat", lst("s"))
    r.rec("listing", listing("."))
    os.chdir("..")


def sec_dirs(r):
    bs = r.bs
    os.mkdir("dirs")
    os.chdir("dirs")
    n0 = lst(".")["nlink"]
    t = age(".")
    r.do("mkdir", os.mkdir, "a", 0o750)
    r.rec("mkdir-stat", lst("a"))
    r.rec("mkdir-parent-nlink", lst(".")["nlink"] - n0)
    r.rec("mkdir-parent-times", moved(t["."], "."))
    t = age(".")
    r.do("mkdir-existing", os.mkdir, "a")
    r.rec("mkdir-existing-times", moved(t["."], "."))
    write_file("file", b"x")
    r.do("mkdir-over-file", os.mkdir, "file")
    r.do("mkdir-sticky-setgid", os.mkdir, "sg", 0o3777)
    r.rec("mkdir-sticky-setgid-stat", lst("sg"))
    os.mkdir("a/b")
    r.do("rmdir-nonempty", os.rmdir, "a")
    r.do("rmdir-dot", os.rmdir, "a/b/.")
    r.do("rmdir-dotdot", os.rmdir, "a/b/..")
    r.do("rmdir-missing", os.rmdir, "nothere")
    r.do("rmdir-trailing-slash", os.rmdir, "a/b/")
    r.rec("rmdir-parent-nlink", lst("a")["nlink"])
    r.do("rmdir", os.rmdir, "a")
    r.rec("rmdir-parent-nlink-after", lst(".")["nlink"] - n0)
    # setgid directory: gid and S_ISGID inherited
    os.mkdir("g", 0o755)
    os.chown("g", 0, 4321)
    os.chmod("g", 0o2775)
    r.rec("setgid-dir-stat", lst("g"))
    write_file("g/f", b"")
    os.mkdir("g/sub", 0o755)
    os.mknod("g/fifo", 0o1666 | stat.S_IFIFO)
    r.rec("setgid-inherit", [lst("g/f"), lst("g/sub"), lst("g/fifo")])
    fd = os.open("g/sgidfile", os.O_CREAT | os.O_WRONLY, 0o2755)
    os.close(fd)
    r.rec("setgid-create-mode-root", lst("g/sgidfile"))
    # a directory with holes' worth of entries: 500 created, every other removed
    os.mkdir("big")
    for i in range(500):
        write_file("big/entry-%03d-%s" % (i, "n" * (i % 40)), b"")
    os.mkdir("big/subdir")
    os.symlink("x", "big/symlink")
    os.mkfifo("big/fifo")
    for i in range(1, 500, 2):
        os.unlink("big/entry-%03d-%s" % (i, "n" * (i % 40)))
    # a removed directory that is still open: empty, no new entries
    os.mkdir("gone")
    write_file("gone/f", b"")
    os.unlink("gone/f")
    dfd = os.open("gone", os.O_RDONLY | os.O_DIRECTORY)
    r.do("rmdir-open", os.rmdir, "gone")
    r.rec("rmdir-open-fstat", fst(dfd))
    r.do("rmdir-open-list", os.listdir, dfd, show=sorted)
    r.do("rmdir-open-create", lambda: os.open("x", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=dfd))
    r.do("rmdir-open-mkdir", lambda: os.mkdir("y", dir_fd=dfd))
    r.do("rmdir-open-fchmod", os.fchmod, dfd, 0o700)
    r.rec("rmdir-open-fstat-after-fchmod", fst(dfd))
    sv = statvfs_settled()
    os.close(dfd)
    for _ in range(100):      # RELEASEDIR comes after close(2) returns
        if os.statvfs(".").f_ffree != sv.f_ffree:
            break
        time.sleep(0.02)
    r.rec("rmdir-open-freed-at-close", os.statvfs(".").f_ffree - sv.f_ffree)
    # a directory replaced by rename while open
    os.mkdir("rsrc")
    os.mkdir("rdst")
    dfd = os.open("rdst", os.O_RDONLY | os.O_DIRECTORY)
    r.do("rename-over-open-dir", os.rename, "rsrc", "rdst")
    r.rec("rename-over-open-dir-fstat", fst(dfd))
    os.close(dfd)
    r.rec("big-listing", listing("big"))
    r.rec("big-stat", lst("big"))
    r.do("rmdir-big", os.rmdir, "big")
    os.chdir("..")


def sec_mknod(r):
    os.mkdir("nod")
    os.chdir("nod")
    r.do("mkfifo", os.mkfifo, "fifo", 0o640)
    r.do("mknod-char", os.mknod, "chr", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    r.do("mknod-block", os.mknod, "blk", 0o660 | stat.S_IFBLK, os.makedev(7, 200))
    r.do("mknod-bigdev", os.mknod, "bigdev", 0o600 | stat.S_IFCHR, os.makedev(300, 70000))
    r.do("mknod-sock", os.mknod, "sock", 0o644 | stat.S_IFSOCK)
    r.do("mknod-reg", os.mknod, "reg", 0o644 | stat.S_IFREG)
    r.do("mknod-existing", os.mknod, "fifo", 0o644 | stat.S_IFIFO)
    for n in ("fifo", "chr", "blk", "bigdev", "sock", "reg"):
        r.rec("stat-" + n, lst(n))
    r.rec("listing", listing("."))
    os.chdir("..")


def sec_modes(r):
    os.mkdir("modes")
    os.chdir("modes")
    write_file("f", b"x" * 100, 0o644)
    for m in (0o4755, 0o2755, 0o6755, 0o1777, 0o2745, 0o7000, 0):
        t = age("f")["f"]
        r.do("chmod-%o" % m, os.chmod, "f", m)
        r.rec("chmod-%o-stat" % m, lst("f"))
        r.rec("chmod-%o-times" % m, moved(t, "f"))
    os.mkdir("d")
    r.do("chmod-dir-7777", os.chmod, "d", 0o7777)
    r.rec("chmod-dir-7777-stat", lst("d"))
    # chown by root clears S_ISUID; S_ISGID only with group-exec
    for name, mode, owner in (("suid", 0o4755, (1000, 1000)), ("sgid-gx", 0o2755, (1000, 1000)),
                              ("sgid-nogx", 0o2745, (1000, 1000)), ("both", 0o6755, (1000, 1000)),
                              ("suid-minus1", 0o4755, (-1, -1)), ("suid-same", 0o4755, (0, 0)),
                              ("suid-nox", 0o4644, (1000, -1))):
        write_file(name, b"x", 0o644)
        os.chmod(name, mode)
        t = age(name)[name]
        r.do("chown-" + name, os.chown, name, *owner)
        r.rec("chown-%s-stat" % name, lst(name))
        r.rec("chown-%s-times" % name, moved(t, name))
    os.mkdir("sdir")
    os.chmod("sdir", 0o6755)
    r.do("chown-dir", os.chown, "sdir", 1000, 1000)
    r.rec("chown-dir-stat", lst("sdir"))
    # write and truncate by root keep the bits
    write_file("rootw", b"x", 0o644)
    os.chmod("rootw", 0o6755)
    with open("rootw", "ab") as f:
        f.write(b"more")
    r.rec("root-write-keeps-suid", lst("rootw"))
    os.truncate("rootw", 1)
    r.rec("root-truncate-keeps-suid", lst("rootw"))
    os.chdir("..")


def sec_times(r):
    os.mkdir("times")
    os.chdir("times")
    write_file("f", b"x")
    T1 = 1_234_567_890_123_456_789
    T2 = 1_300_000_000_987_654_321
    r.do("utimensat-both", c_utimensat, "f", T1, T2)
    s = os.stat("f")
    r.rec("utimensat-both-values", [s.st_atime_ns, s.st_mtime_ns])
    r.do("utimensat-omit-atime", c_utimensat, "f", UTIME_OMIT, T1)
    s = os.stat("f")
    r.rec("utimensat-omit-atime-values", [s.st_atime_ns, s.st_mtime_ns])
    r.do("utimensat-omit-mtime", c_utimensat, "f", T2, UTIME_OMIT)
    s = os.stat("f")
    r.rec("utimensat-omit-mtime-values", [s.st_atime_ns, s.st_mtime_ns])
    t = times("f")
    time.sleep(0.012)
    r.do("utimensat-omit-both", c_utimensat, "f", UTIME_OMIT, UTIME_OMIT)
    s = os.stat("f")
    r.rec("utimensat-omit-both-values", [s.st_atime_ns, s.st_mtime_ns, moved(t, "f")])
    t = times("f")
    time.sleep(0.012)
    r.do("utimensat-now-mtime", c_utimensat, "f", UTIME_OMIT, UTIME_NOW)
    s = os.stat("f")
    r.rec("utimensat-now-mtime-values", [s.st_atime_ns, moved(t, "f")])
    r.do("utimensat-now-both", c_utimensat, "f", UTIME_NOW, UTIME_NOW)
    s = os.stat("f")
    r.rec("utimensat-now-both-values", [s.st_atime_ns > T2, s.st_mtime_ns > T2,
                                        s.st_atime_ns == s.st_mtime_ns])
    # past 2038 and before 1970 (256-byte inodes keep extra epoch bits)
    for label, v in (("y2040", 2_200_000_000 * 10**9 + 5), ("y2400", 13_500_000_000 * 10**9 + 7),
                     ("pre1970", -86400 * 10**9 * 365 + 11), ("minus1", -1 * 10**9)):
        r.do("utimensat-" + label, c_utimensat, "f", v, v)
        s = os.stat("f")
        r.rec("utimensat-%s-values" % label, [s.st_atime_ns, s.st_mtime_ns])
    os.symlink("f", "sl")
    r.do("utimensat-nofollow", c_utimensat, "sl", T1, T1, True)
    r.rec("utimensat-nofollow-values", [os.lstat("sl").st_mtime_ns, os.stat("sl").st_mtime_ns])
    # a read does not move mtime/ctime; a write moves both; chmod moves ctime only
    t = age("f")["f"]
    with open("f", "rb") as f:
        f.read()
    r.rec("read-times", moved(t, "f"))
    t = age("f")["f"]
    with open("f", "r+b") as f:
        f.write(b"y")
    r.rec("write-times", moved(t, "f"))
    t = age("f")["f"]
    with open("f", "r+b") as f:
        f.write(b"")
    r.rec("empty-write-times", moved(t, "f"))
    t = age("f")["f"]
    os.chmod("f", 0o600)
    r.rec("chmod-times", moved(t, "f"))
    t = age("f")["f"]
    os.setxattr("f", "user.t", b"v")
    r.rec("setxattr-times", moved(t, "f"))
    os.chdir("..")


def cap_v2(permitted):
    # struct vfs_cap_data, revision 2, effective: magic_etc, then
    # {permitted, inheritable} for the low and high 32 capabilities
    return struct.pack("<IIIII", 0x02000000 | 1, permitted, 0, 0, 0)


def sec_xattr(r):
    bs = r.bs
    os.mkdir("xa")
    os.chdir("xa")
    write_file("f", b"x")
    r.rec("blocks-before", lst("f")["blocks"])
    r.do("set", os.setxattr, "f", "user.a", b"value-a")
    r.do("get", os.getxattr, "f", "user.a", show=digest)
    r.do("create-existing", os.setxattr, "f", "user.a", b"v", XATTR_CREATE)
    r.do("replace-missing", os.setxattr, "f", "user.b", b"v", XATTR_REPLACE)
    r.do("replace-existing", os.setxattr, "f", "user.a", b"replaced", XATTR_REPLACE)
    r.do("create-new", os.setxattr, "f", "user.b", b"bbb", XATTR_CREATE)
    r.do("get-missing", os.getxattr, "f", "user.nothere")
    r.do("remove-missing", os.removexattr, "f", "user.nothere")
    r.do("size-query", c_getxattr, "f", "user.a", 0, show=str)
    r.do("erange-get", c_getxattr, "f", "user.a", 3)
    r.do("exact-get", c_getxattr, "f", "user.a", 8, show=digest)
    r.do("list-size-query", c_listxattr, "f", 0, show=str)
    r.do("erange-list", c_listxattr, "f", 4)
    r.do("zero-length", os.setxattr, "f", "user.empty", b"")
    r.do("zero-length-get", os.getxattr, "f", "user.empty", show=digest)
    r.do("zero-length-size", c_getxattr, "f", "user.empty", 0, show=str)
    r.do("name-255", os.setxattr, "f", "user." + "n" * 250, b"long name")
    r.do("name-256", os.setxattr, "f", "user." + "n" * 251, b"too long")
    r.do("name-empty-suffix", os.setxattr, "f", "user.", b"x")
    r.do("name-empty-suffix-get", os.getxattr, "f", "user.")
    r.do("name-empty-suffix-remove", os.removexattr, "f", "user.")
    r.do("name-empty-trusted", os.setxattr, "f", "trusted.", b"x")
    r.do("unknown-namespace", os.setxattr, "f", "bogus.x", b"x")
    r.do("trusted", os.setxattr, "f", "trusted.t", b"trusted value")
    r.rec("list-small", xattrs("f"))
    r.rec("stat-small", lst("f"))
    for n in (100, 200, bs // 2, bs - 100, bs - 32, 3000, 4000, 65536, 65537):
        r.do("value-%d" % n, os.setxattr, "f", "user.v%d" % n, pattern("xv%d" % n, n))
        r.rec("value-%d-stat" % n, lst("f"))
    r.rec("list-large", xattrs("f"))
    for name in os.listxattr("f"):
        if name.startswith("user.v"):
            r.do("remove-" + name, os.removexattr, "f", name)
    r.rec("stat-after-remove-large", lst("f"))
    r.do("remove", os.removexattr, "f", "user.a")
    r.do("get-removed", os.getxattr, "f", "user.a")
    r.rec("list-after-remove", xattrs("f"))
    # on a directory, a symlink, a fifo
    os.mkdir("d")
    os.symlink("f", "sl")
    os.mkfifo("fifo")
    r.do("dir-set", os.setxattr, "d", "user.d", b"dir value")
    r.do("symlink-user", lambda: os.setxattr("sl", "user.s", b"x", follow_symlinks=False))
    r.do("symlink-trusted", lambda: os.setxattr("sl", "trusted.s", b"x", follow_symlinks=False))
    r.do("fifo-user", os.setxattr, "fifo", "user.p", b"x")
    r.rec("dir-list", xattrs("d"))
    r.rec("symlink-list", xattrs("sl"))
    # a ~3 KiB value on its own (an EA block on 4 KiB blocks, too big on 1 KiB)
    write_file("big", b"y")
    r.do("big-3k", os.setxattr, "big", "user.big", pattern("big", 3000))
    r.rec("big-3k-stat", lst("big"))
    r.rec("big-3k-list", xattrs("big"))
    # the same EA block shared by two files with identical xattrs
    write_file("s1", b"1")
    write_file("s2", b"2")
    for f in ("s1", "s2"):
        os.setxattr(f, "user.shared", pattern("shared", 600))
    r.rec("shared-stat", [lst("s1"), lst("s2")])
    os.setxattr("s1", "user.shared", b"changed")
    r.rec("shared-after-change", [xattrs("s1"), xattrs("s2"), lst("s1"), lst("s2")])
    os.unlink("s2")
    # the last attribute leaves the EA block: removed, or moved into the inode
    write_file("last", b"l")
    os.setxattr("last", "user.block", pattern("blk", 600))
    r.do("last-remove", os.removexattr, "last", "user.block")
    r.rec("last-remove-stat", lst("last"))
    os.setxattr("last", "user.block", pattern("blk", 600))
    r.do("last-shrink", os.setxattr, "last", "user.block", b"small")
    r.rec("last-shrink-stat", lst("last"))
    r.rec("last-shrink-list", xattrs("last"))
    # security.capability goes away on write, truncate and chown
    for what in ("write", "truncate", "chown", "chmod", "read"):
        name = "cap-" + what
        write_file(name, b"capable", 0o755)
        r.do(name + "-set", os.setxattr, name, "security.capability", cap_v2(1 << 13))
        r.do(name + "-get", os.getxattr, name, "security.capability", show=digest)
        if what == "write":
            with open(name, "r+b") as f:
                f.write(b"C")
        elif what == "truncate":
            os.truncate(name, 3)
        elif what == "chown":
            os.chown(name, 1000, 1000)
        elif what == "chmod":
            os.chmod(name, 0o700)
        else:
            with open(name, "rb") as f:
                f.read()
        r.rec(name + "-after", xattrs(name))
    r.do("cap-invalid", os.setxattr, "f", "security.capability", b"short")
    # the capability alone in an EA block (the inode's room taken): a write
    # removes it and the block goes with it
    write_file("cap-block", b"capable", 0o755)
    os.setxattr("cap-block", "user.fill", pattern("fill", 60))
    os.setxattr("cap-block", "security.capability", cap_v2(1 << 13))
    os.removexattr("cap-block", "user.fill")
    r.rec("cap-block-before", [lst("cap-block"), xattrs("cap-block")])
    with open("cap-block", "r+b") as f:
        f.write(b"C")
    r.rec("cap-block-after", [lst("cap-block"), xattrs("cap-block")])
    os.chdir("..")


def statvfs_after_unlink(field, floor):
    """statvfs once `field` is back to at least `floor`, or after 2 s. recon-fuse
    frees an unlinked inode at the kernel's FORGET for it, which the kernel may
    send after the next request (README, Limits); the kernel's ext3 frees at the
    unlink. A daemon that never frees still differs."""
    for _ in range(200):
        sv = os.statvfs(".")
        if getattr(sv, field) >= floor:
            return sv
        time.sleep(0.01)
    return os.statvfs(".")


def statvfs_settled():
    """statvfs once the free counts have stayed the same for 0.2 s (at most
    3 s): the inodes unlinked before are freed at their FORGETs on recon-fuse
    (see statvfs_after_unlink), at once on the kernel's ext3."""
    last, same = os.statvfs("."), 0
    for _ in range(150):
        time.sleep(0.02)
        sv = os.statvfs(".")
        same = same + 1 if (sv.f_ffree, sv.f_bfree) == (last.f_ffree, last.f_bfree) else 0
        last = sv
        if same >= 10:
            break
    return last


def sec_statfs(r):
    bs = r.bs
    ppb = bs // 4
    os.mkdir("sfs")
    os.chdir("sfs")
    os.sync()
    s0 = statvfs_settled()    # the sections before unlinked files: freed at their FORGETs
    for i in range(50):
        write_file("f%d" % i, b"")
    s1 = os.statvfs(".")
    r.rec("create-50", [s1.f_ffree - s0.f_ffree, s1.f_favail - s0.f_favail, s1.f_files - s0.f_files])
    for i in range(50):
        os.unlink("f%d" % i)
    s2 = statvfs_after_unlink("f_ffree", s0.f_ffree)
    r.rec("remove-50", [s2.f_ffree - s0.f_ffree, s2.f_files - s0.f_files])
    for i in range(5):
        os.mkdir("d%d" % i)
    s3 = os.statvfs(".")
    r.rec("mkdir-5", s3.f_ffree - s2.f_ffree)
    for i in range(5):
        os.rmdir("d%d" % i)
    # blocks: a dense file with an indirect and a double-indirect block,
    # counted from once the removed directories' blocks are back
    s0 = statvfs_after_unlink("f_bfree", s2.f_bfree)
    fd = os.open("dense", os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, pattern("dense", (12 + ppb + 1) * bs))
    os.fsync(fd)
    os.close(fd)
    s1 = os.statvfs(".")
    r.rec("dense-blocks", [s0.f_bfree - s1.f_bfree, s0.f_bavail - s1.f_bavail, lst("dense")["blocks"]])
    os.unlink("dense")
    os.sync()
    s2 = statvfs_after_unlink("f_bfree", s0.f_bfree)
    r.rec("dense-freed", [s2.f_bfree - s0.f_bfree, s2.f_blocks - s0.f_blocks])
    r.rec("constants", [s2.f_bsize, s2.f_frsize, s2.f_namemax, s2.f_blocks, s2.f_files])
    os.chdir("..")


def sec_fallocate(r):
    bs = r.bs
    os.mkdir("fa")
    os.chdir("fa")
    fd = os.open("m0", os.O_CREAT | os.O_RDWR, 0o644)
    r.do("mode0", fallocate, fd, 0, 0, 5 * bs)
    r.rec("mode0-stat", fst(fd))
    os.close(fd)
    write_file("k", pattern("k", 3 * bs))
    fd = os.open("k", os.O_RDWR)
    r.do("keep-size", fallocate, fd, FALLOC_FL_KEEP_SIZE, 0, 8 * bs)
    r.do("punch-hole", fallocate, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, bs, bs)
    r.do("zero-range", fallocate, fd, FALLOC_FL_ZERO_RANGE, 0, bs)
    r.do("bad-len", fallocate, fd, 0, 0, 0)
    r.do("bad-offset", fallocate, fd, 0, -1, bs)
    r.rec("k-stat", fst(fd))
    r.rec("k-content", digest(os.pread(fd, 10 * bs, 0)))
    os.close(fd)
    # posix_fallocate: glibc writes zeros where fallocate is refused, so the
    # outcome must be the same either way
    write_file("p", pattern("p", bs + 5))
    fd = os.open("p", os.O_RDWR)
    r.do("posix-fallocate", os.posix_fallocate, fd, 0, 14 * bs)
    r.rec("posix-fallocate-stat", fst(fd))
    r.rec("posix-fallocate-content", digest(os.pread(fd, 20 * bs, 0)))
    os.close(fd)
    fd = os.open("k", os.O_RDONLY)
    r.do("rdonly-fd", fallocate, fd, 0, 0, bs)
    os.close(fd)
    # punching holes: partial blocks zeroed, whole ones freed, size kept
    ppb = bs // 4
    size = (12 + ppb + 3) * bs + 100
    write_file("pu", pattern("pu", size))
    fd = os.open("pu", os.O_RDWR)
    PH = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
    for label, off, length in (("in-block", 10, 100), ("across-2", bs - 5, 10),
                               ("whole-1", 2 * bs, bs), ("partial-whole-partial", 3 * bs + 1, 3 * bs),
                               ("ind-boundary", 10 * bs, 4 * bs + 3),
                               ("all-ind", 12 * bs, ppb * bs), ("dind-to-eof", (12 + ppb) * bs + 7, 10 * bs),
                               ("past-eof", size + bs, bs), ("no-keep-size", 0, bs)):
        mode = PH if label != "no-keep-size" else FALLOC_FL_PUNCH_HOLE
        r.do("punch-" + label, fallocate, fd, mode, off, length)
        r.rec("punch-%s-fstat" % label, fst(fd))
        r.rec("punch-%s-content" % label, digest(os.pread(fd, size + bs, 0)))
    t = age("pu")["pu"]
    r.do("punch-times", fallocate, fd, PH, 0, bs)
    r.rec("punch-times-moved", moved(t, "pu"))
    r.do("punch-everything", fallocate, fd, PH, 0, 1 << 40)
    r.rec("punch-everything-fstat", fst(fd))
    os.close(fd)
    os.chdir("..")


def sec_user(r):
    """Steps as the unprivileged user."""
    uid, gid = r.uid, r.gid
    os.mkdir("usr", 0o777)
    os.chmod("usr", 0o777)
    os.chdir("usr")
    for name, mode in (("suid", 0o4777), ("sgid-gx", 0o2777), ("sgid-nogx", 0o2767),
                       ("both", 0o6777), ("trunc-sgid", 0o2777), ("otrunc-sgid", 0o2777),
                       ("cap", 0o777), ("sgid-nogx-member", 0o2767), ("trunc-sgid-nogx-member", 0o2767),
                       ("sgid-gx-member", 0o2777), ("otrunc-sgid-nogx", 0o2767),
                       ("otrunc-sgid-nogx-member", 0o2767), ("trunc-sgid-nogx", 0o2767)):
        write_file(name, b"0123456789")
        if name.endswith("-member"):
            os.chown(name, 0, gid)       # the user is in the file's group
        os.chmod(name, mode)
    os.setxattr("cap", "security.capability", cap_v2(1 << 13))
    write_file("r-only", b"secret", 0o644)
    write_file("nothing", b"", 0o000)
    os.chmod("nothing", 0)
    write_file("xonly", b"", 0o100)
    os.chmod("xonly", 0o111)
    os.mkdir("noexec-dir", 0o766)
    os.chmod("noexec-dir", 0o766)
    write_file("noexec-dir/f", b"")
    os.mkdir("sticky", 0o1777)
    os.chmod("sticky", 0o1777)
    write_file("sticky/roots", b"")
    os.chmod("sticky/roots", 0o666)
    write_file("owned", b"mine")
    os.chown("owned", uid, 0)          # the user's file in a group the user is not in
    for name, mode in (("owned-6755", 0o6755), ("owned-2745", 0o2745)):
        write_file(name, b"x")
        os.chown(name, uid, 0)
        os.chmod(name, mode)
    os.mkdir("sgdir", 0o777)
    os.chown("sgdir", 0, 4321)
    os.chmod("sgdir", 0o2777)
    # root's view of access()
    os.mkdir("dir000")
    os.chmod("dir000", 0)
    for name, mode in (("nothing", os.R_OK | os.W_OK), ("nothing", os.X_OK),
                       ("xonly", os.X_OK), ("r-only", os.X_OK), ("dir000", os.X_OK),
                       ("dir000", os.R_OK | os.W_OK)):
        r.rec("root-access-%s-%d" % (name, mode), os.access(name, mode))

    def body(rec):
        for name in ("suid", "sgid-gx", "sgid-nogx", "both", "sgid-nogx-member", "sgid-gx-member"):
            fd = user_do(rec, "write-open-" + name, os.open, name, os.O_WRONLY)
            if fd is not None:
                user_do(rec, "write-" + name, os.pwrite, fd, b"user", 0, show=str)
                rec("write-%s-fstat" % name, fst(fd))
                os.close(fd)
            rec("write-%s-stat" % name, lst(name))
        user_do(rec, "truncate-sgid", os.truncate, "trunc-sgid", 3)
        rec("truncate-sgid-stat", lst("trunc-sgid"))
        user_do(rec, "truncate-sgid-nogx-member", os.truncate, "trunc-sgid-nogx-member", 3)
        rec("truncate-sgid-nogx-member-stat", lst("trunc-sgid-nogx-member"))
        fd = user_do(rec, "otrunc-sgid", os.open, "otrunc-sgid", os.O_WRONLY | os.O_TRUNC)
        if fd is not None:
            os.close(fd)
        rec("otrunc-sgid-stat", lst("otrunc-sgid"))
        for name in ("otrunc-sgid-nogx", "otrunc-sgid-nogx-member"):
            fd = user_do(rec, name, os.open, name, os.O_WRONLY | os.O_TRUNC)
            if fd is not None:
                os.close(fd)
            rec(name + "-stat", lst(name))
        user_do(rec, "truncate-sgid-nogx", os.truncate, "trunc-sgid-nogx", 3)
        rec("truncate-sgid-nogx-stat", lst("trunc-sgid-nogx"))
        with open("cap", "r+b") as f:
            f.write(b"U")
        rec("cap-after-user-write", xattrs("cap"))
        for name in ("r-only", "nothing", "xonly", "noexec-dir", "sticky"):
            rec("access-" + name, [os.access(name, m) for m in (os.R_OK, os.W_OK, os.X_OK, os.F_OK)])
        user_do(rec, "open-r-only-write", os.open, "r-only", os.O_WRONLY)
        user_do(rec, "open-nothing", os.open, "nothing", os.O_RDONLY)
        user_do(rec, "stat-through-noexec", os.stat, "noexec-dir/f")
        user_do(rec, "list-noexec", os.listdir, "noexec-dir", show=sorted)
        user_do(rec, "sticky-unlink-roots", os.unlink, "sticky/roots")
        user_do(rec, "sticky-rename-roots", os.rename, "sticky/roots", "sticky/mine")
        user_do(rec, "chmod-not-owner", os.chmod, "r-only", 0o777)
        user_do(rec, "chown-not-root", os.chown, "owned", 0, -1)
        user_do(rec, "chgrp-not-member", os.chown, "owned", -1, 4321)
        user_do(rec, "chmod-sgid-not-member", os.chmod, "owned", 0o2755)
        rec("chmod-sgid-not-member-stat", lst("owned"))
        # the owner changes the group to its own: S_ISUID goes, S_ISGID with g+x
        for name in ("owned-6755", "owned-2745"):
            user_do(rec, "chgrp-own-" + name, os.chown, name, -1, gid)
            rec("chgrp-own-%s-stat" % name, lst(name))
        user_do(rec, "utime-now-not-owner", c_utimensat, "suid", UTIME_NOW, UTIME_NOW)
        user_do(rec, "utime-set-not-owner", c_utimensat, "suid", 10**18, 10**18)
        user_do(rec, "utime-now-r-only", c_utimensat, "r-only", UTIME_NOW, UTIME_NOW)
        user_do(rec, "utime-set-owned", c_utimensat, "owned", 10**18, 10**18)
        user_do(rec, "setxattr-user-not-owner", os.setxattr, "suid", "user.x", b"by user")
        user_do(rec, "setxattr-user-r-only", os.setxattr, "r-only", "user.x", b"by user")
        user_do(rec, "setxattr-trusted", os.setxattr, "owned", "trusted.x", b"no")
        user_do(rec, "getxattr-trusted", os.getxattr, "cap", "trusted.x")
        user_do(rec, "mknod-char", os.mknod, "uchr", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        fd = user_do(rec, "create-sgid-in-sgdir", os.open, "sgdir/f", os.O_CREAT | os.O_WRONLY, 0o2775)
        if fd is not None:
            os.close(fd)
        rec("create-sgid-in-sgdir-stat", lst("sgdir/f"))
        user_do(rec, "mkdir-in-sgdir", os.mkdir, "sgdir/d", 0o775)
        rec("mkdir-in-sgdir-stat", lst("sgdir/d"))
        user_do(rec, "link-not-owner", os.link, "r-only", "hard")   # protected_hardlinks
        rec("statvfs-avail-user", os.statvfs(".").f_bavail <= os.statvfs(".").f_bfree)

    as_user(r, uid, gid, body)

    # a member of the file's group through a supplementary group only
    for name in ("suppl-sgid-nogx", "suppl-trunc-sgid-nogx"):
        write_file(name, b"0123456789")
        os.chown(name, 0, 4321)
        os.chmod(name, 0o2767)

    def body_suppl(rec):
        with open("suppl-sgid-nogx", "r+b") as f:
            f.write(b"S")
        rec("suppl-write-stat", lst("suppl-sgid-nogx"))
        user_do(rec, "suppl-truncate", os.truncate, "suppl-trunc-sgid-nogx", 2)
        rec("suppl-truncate-stat", lst("suppl-trunc-sgid-nogx"))

    as_user(r, uid, gid, body_suppl, groups=(4321,))
    r.rec("listing", listing("."))
    os.chdir("..")


# ---------------------------------------------------------------- ACLs

A_UOBJ, A_USER, A_GOBJ, A_GROUP, A_MASK, A_OTHER = 1, 2, 4, 8, 0x10, 0x20
ACL_ACCESS = "system.posix_acl_access"
ACL_DEFAULT = "system.posix_acl_default"


def acl_bytes(entries, version=2):
    """An ACL in the posix_acl_xattr format: [(tag, perm, id)]."""
    return struct.pack("<I", version) + b"".join(
        struct.pack("<HHI", t, p, i if t in (A_USER, A_GROUP) else 0xffffffff) for t, p, i in entries)


def acl_of(path, name=ACL_ACCESS):
    """The ACL as a readable list (or the errno): what getfacl would show."""
    try:
        v = os.getxattr(path, name, follow_symlinks=False)
    except OSError as e:
        return err_name(e)
    if len(v) < 4 or (len(v) - 4) % 8:
        return "bad:%d" % len(v)
    out = ["v%d" % struct.unpack_from("<I", v)[0]]
    for off in range(4, len(v), 8):
        t, p, i = struct.unpack_from("<HHI", v, off)
        out.append("%x:%o:%d" % (t, p, i if t in (A_USER, A_GROUP) else -1))
    return out


def sec_acl(r):
    """POSIX ACLs: enforcement for the owner, a named user, a group member
    and others; the mode an access ACL sets; chmod and the mask; default
    ACLs inherited with the umask rules; malformed values refused."""
    uid, gid = r.uid, r.gid
    os.mkdir("acl", 0o777)
    os.chmod("acl", 0o755)
    os.chdir("acl")
    write_file("f", b"acl data")
    os.chmod("f", 0o644)
    deny_user = acl_bytes([(A_UOBJ, 6, 0), (A_USER, 0, uid), (A_GOBJ, 4, 0), (A_MASK, 4, 0), (A_OTHER, 4, 0)])
    before = age("f")["f"]
    r.do("set-deny-user", os.setxattr, "f", ACL_ACCESS, deny_user)
    r.rec("set-deny-user-times", moved(before, "f"))
    r.rec("deny-user-stat", lst("f"))
    r.rec("deny-user-acl", acl_of("f"))
    r.rec("deny-user-list", sorted(os.listxattr("f")))
    write_file("rw-user", b"for the user")
    os.chmod("rw-user", 0o600)
    r.do("set-rw-user", os.setxattr, "rw-user", ACL_ACCESS,
         acl_bytes([(A_UOBJ, 6, 0), (A_USER, 6, uid), (A_GOBJ, 0, 0), (A_MASK, 6, 0), (A_OTHER, 0, 0)]))
    r.rec("rw-user-stat", lst("rw-user"))
    write_file("masked", b"mask limits")
    os.chmod("masked", 0o600)
    r.do("set-masked", os.setxattr, "masked", ACL_ACCESS,
         acl_bytes([(A_UOBJ, 6, 0), (A_USER, 6, uid), (A_GOBJ, 0, 0), (A_MASK, 4, 0), (A_OTHER, 0, 0)]))
    write_file("grp", b"group entry")
    os.chmod("grp", 0o600)
    r.do("set-grp", os.setxattr, "grp", ACL_ACCESS,
         acl_bytes([(A_UOBJ, 6, 0), (A_GOBJ, 0, 0), (A_GROUP, 6, 4321), (A_MASK, 6, 0), (A_OTHER, 0, 0)]))
    os.mkdir("d", 0o700)
    os.chmod("d", 0o700)
    r.do("set-dir-user", os.setxattr, "d", ACL_ACCESS,
         acl_bytes([(A_UOBJ, 7, 0), (A_USER, 7, uid), (A_GOBJ, 0, 0), (A_MASK, 7, 0), (A_OTHER, 0, 0)]))
    r.rec("dir-user-stat", lst("d"))
    # the user's own file in a group it is not in, set-group-id
    write_file("own-sgid", b"x")
    os.chown("own-sgid", uid, 0)
    os.chmod("own-sgid", 0o2775)

    def body(rec):
        user_do(rec, "user-read-denied", content_or_raise, "f")
        user_do(rec, "user-access-denied", os.access, "f", os.R_OK, show=str)
        user_do(rec, "user-rw", content_or_raise, "rw-user")
        fd = user_do(rec, "user-write-rw", os.open, "rw-user", os.O_WRONLY)
        if fd is not None:
            os.close(fd)
        fd = user_do(rec, "user-write-masked", os.open, "masked", os.O_WRONLY)
        if fd is not None:
            os.close(fd)
        user_do(rec, "user-read-masked", content_or_raise, "masked")
        user_do(rec, "user-read-grp-nonmember", content_or_raise, "grp")
        fd = user_do(rec, "user-create-in-dir", os.open, "d/mine", os.O_CREAT | os.O_WRONLY, 0o644)
        if fd is not None:
            os.close(fd)
        rec("user-create-in-dir-stat", lst("d/mine"))
        user_do(rec, "user-list-dir", os.listdir, "d", show=sorted)
        user_do(rec, "user-set-not-owner", os.setxattr, "f", ACL_ACCESS,
                acl_bytes([(A_UOBJ, 7, 0), (A_GOBJ, 7, 0), (A_OTHER, 7, 0)]))
        user_do(rec, "user-set-own-sgid", os.setxattr, "own-sgid", ACL_ACCESS,
                acl_bytes([(A_UOBJ, 7, 0), (A_USER, 5, 0), (A_GOBJ, 5, 0), (A_MASK, 5, 0), (A_OTHER, 5, 0)]))
        rec("user-set-own-sgid-stat", lst("own-sgid"))
        user_do(rec, "user-chmod-own", os.chmod, "own-sgid", 0o751)
        rec("user-chmod-own-acl", acl_of("own-sgid"))

    as_user(r, uid, gid, body)

    def body_member(rec):
        user_do(rec, "member-read-grp", content_or_raise, "grp")
        fd = user_do(rec, "member-write-grp", os.open, "grp", os.O_WRONLY)
        if fd is not None:
            os.close(fd)

    as_user(r, uid, gid, body_member, groups=(4321,))

    # the mode and the ACL follow each other
    r.do("chmod-acl", os.chmod, "rw-user", 0o640)
    r.rec("chmod-acl-acl", acl_of("rw-user"))
    r.rec("chmod-acl-stat", lst("rw-user"))
    r.do("set-mask-rwx", os.setxattr, "rw-user", ACL_ACCESS,
         acl_bytes([(A_UOBJ, 6, 0), (A_USER, 6, uid), (A_GOBJ, 0, 0), (A_MASK, 7, 0), (A_OTHER, 1, 0)]))
    r.rec("set-mask-rwx-stat", lst("rw-user"))
    write_file("equiv", b"")
    os.chmod("equiv", 0o600)
    r.do("set-equiv", os.setxattr, "equiv", ACL_ACCESS,
         acl_bytes([(A_UOBJ, 7, 0), (A_GOBJ, 5, 0), (A_OTHER, 1, 0)]))
    r.rec("set-equiv-stat", lst("equiv"))
    r.rec("set-equiv-acl", acl_of("equiv"))
    r.do("remove-none", os.removexattr, "equiv", ACL_ACCESS)
    r.do("remove-default-file", os.removexattr, "equiv", ACL_DEFAULT)
    r.do("remove-acl", os.removexattr, "masked", ACL_ACCESS)
    r.rec("remove-acl-stat", lst("masked"))
    r.rec("remove-acl-list", sorted(os.listxattr("masked")))
    r.do("header-only", os.setxattr, "grp", ACL_ACCESS, struct.pack("<I", 2))
    r.rec("header-only-acl", acl_of("grp"))
    r.do("default-on-file", os.setxattr, "f", ACL_DEFAULT,
         acl_bytes([(A_UOBJ, 7, 0), (A_GOBJ, 5, 0), (A_OTHER, 1, 0)]))
    good = [(A_UOBJ, 6, 0), (A_USER, 4, 1000), (A_GOBJ, 4, 0), (A_MASK, 4, 0), (A_OTHER, 4, 0)]
    for name, value in (
            ("version-1", acl_bytes(good, version=1)),
            ("short", acl_bytes(good)[:-2]),
            ("no-mask", acl_bytes([(A_UOBJ, 6, 0), (A_USER, 4, 1000), (A_GOBJ, 4, 0), (A_OTHER, 4, 0)])),
            ("perm-8", acl_bytes([(A_UOBJ, 8, 0), (A_GOBJ, 4, 0), (A_OTHER, 4, 0)])),
            ("two-owners", acl_bytes([(A_UOBJ, 6, 0), (A_UOBJ, 6, 0), (A_GOBJ, 4, 0), (A_OTHER, 4, 0)])),
            ("out-of-order", acl_bytes([(A_GOBJ, 4, 0), (A_UOBJ, 6, 0), (A_OTHER, 4, 0)])),
            ("no-other", acl_bytes([(A_UOBJ, 6, 0), (A_GOBJ, 4, 0)])),
            ("bad-tag", acl_bytes([(A_UOBJ, 6, 0), (0x40, 4, 0), (A_GOBJ, 4, 0), (A_OTHER, 4, 0)])),
            ("undefined-id", acl_bytes([(A_UOBJ, 6, 0), (A_USER, 4, 0xffffffff), (A_GOBJ, 4, 0),
                                        (A_MASK, 4, 0), (A_OTHER, 4, 0)]))):
        r.do("malformed-" + name, os.setxattr, "f", ACL_ACCESS, value)
    r.rec("after-malformed-acl", acl_of("f"))
    # many named users: the ACL leaves the inode for an EA block
    many = [(A_UOBJ, 6, 0)] + [(A_USER, 4, 2000 + i) for i in range(40)] + \
        [(A_GOBJ, 4, 0), (A_MASK, 4, 0), (A_OTHER, 0, 0)]
    write_file("many", b"")
    r.do("set-many", os.setxattr, "many", ACL_ACCESS, acl_bytes(many))
    r.rec("set-many-stat", lst("many"))
    r.rec("set-many-acl", acl_of("many"))

    # default ACLs: inherited with the umask rules
    os.mkdir("inherit", 0o755)
    os.chmod("inherit", 0o777)
    dflt = acl_bytes([(A_UOBJ, 7, 0), (A_USER, 5, uid), (A_GOBJ, 5, 0), (A_MASK, 7, 0), (A_OTHER, 0, 0)])
    r.do("set-default", os.setxattr, "inherit", ACL_DEFAULT, dflt)
    r.rec("set-default-stat", lst("inherit"))
    old = os.umask(0o077)
    try:
        write_file("inherit/file", b"", 0o666)
        os.mkdir("inherit/sub", 0o777)
        os.mknod("inherit/fifo", 0o640 | stat.S_IFIFO)
        os.symlink("file", "inherit/link")
    finally:
        os.umask(old)
    for n in ("file", "sub", "fifo"):
        r.rec("inherit-%s-stat" % n, lst("inherit/" + n))
        r.rec("inherit-%s-acl" % n, acl_of("inherit/" + n))
        r.rec("inherit-%s-default" % n, acl_of("inherit/" + n, ACL_DEFAULT))
    r.rec("inherit-link-stat", lst("inherit/link"))
    os.mkdir("inherit/sub/deeper", 0o750)
    r.rec("inherit-deeper-stat", lst("inherit/sub/deeper"))
    r.rec("inherit-deeper-default", acl_of("inherit/sub/deeper", ACL_DEFAULT))
    # a default ACL that says no more than a mode: the file gets no access ACL
    os.mkdir("plain-default", 0o755)
    r.do("set-plain-default", os.setxattr, "plain-default", ACL_DEFAULT,
         acl_bytes([(A_UOBJ, 7, 0), (A_GOBJ, 5, 0), (A_OTHER, 5, 0)]))
    write_file("plain-default/f", b"", 0o640)
    r.rec("plain-default-f-stat", lst("plain-default/f"))
    r.rec("plain-default-f-list", sorted(os.listxattr("plain-default/f")))
    # the umask applies where there is no default ACL
    old = os.umask(0o027)
    try:
        write_file("umasked", b"", 0o666)
        os.mkdir("umasked-dir", 0o777)
    finally:
        os.umask(old)
    r.rec("umasked-stat", lst("umasked"))
    r.rec("umasked-dir-stat", lst("umasked-dir"))

    def body_inherit(rec):
        os.umask(0o022)
        fd = user_do(rec, "user-create-inherit", os.open, "inherit/ufile", os.O_CREAT | os.O_WRONLY, 0o666)
        if fd is not None:
            os.close(fd)
        rec("user-create-inherit-stat", lst("inherit/ufile"))
        rec("user-create-inherit-acl", acl_of("inherit/ufile"))
        user_do(rec, "user-read-sub", os.listdir, "inherit/sub", show=sorted)

    as_user(r, uid, gid, body_inherit)
    r.rec("listing", listing("."))
    os.chdir("..")


# ---------------------------------------------------------------- inode flags

FS_IOC_GETFLAGS, FS_IOC_SETFLAGS = 0x80086601, 0x40086602
FS_IOC_GETVERSION, FS_IOC_SETVERSION = 0x80087601, 0x40087602
FS_IOC_FSGETXATTR, FS_IOC_FSSETXATTR = 0x801c581f, 0x401c5820
FL_SECRM, FL_SYNC, FL_IMMUTABLE, FL_APPEND, FL_NODUMP, FL_NOATIME = 0x1, 0x8, 0x10, 0x20, 0x40, 0x80
FL_DIRSYNC, FL_TOPDIR, FL_EXTENTS = 0x10000, 0x20000, 0x80000


def getflags(path):
    import fcntl
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        return err_name(e)
    try:
        b = bytearray(4)
        fcntl.ioctl(fd, FS_IOC_GETFLAGS, b)
        return "%x" % struct.unpack("<I", b)[0]
    except OSError as e:
        return err_name(e)
    finally:
        os.close(fd)


def setflags(path, value, keep=FL_EXTENTS):
    """FS_IOC_SETFLAGS keeping the inode's bits in KEEP as chattr does:
    clearing the extents flag of an ext4 file asks the kernel to convert it
    to a block map, which only the step that means to does."""
    import fcntl
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if keep:
            b = bytearray(4)
            try:
                fcntl.ioctl(fd, FS_IOC_GETFLAGS, b)
                value |= struct.unpack("<I", b)[0] & keep
            except OSError:
                pass
        fcntl.ioctl(fd, FS_IOC_SETFLAGS, struct.pack("<I", value))
    finally:
        os.close(fd)


def fd_ioctl(path, req, arg):
    import fcntl
    fd = os.open(path, os.O_RDONLY)
    try:
        return fcntl.ioctl(fd, req, arg)
    finally:
        os.close(fd)


def sec_flags(r):
    """Inode flags: which FS_IOC_SETFLAGS values ext3 takes, stores or
    refuses (regular files and directories, every bit), and how immutable,
    append-only and no-atime files and directories answer every operation;
    flags a new inode inherits; FS_IOC_FSGETXATTR/FSSETXATTR and
    FS_IOC_GETVERSION/SETVERSION; chattr as the owner and as another user."""
    uid, gid = r.uid, r.gid
    os.mkdir("flags", 0o777)
    os.chmod("flags", 0o777)
    os.chdir("flags")
    os.mkdir("bits")
    for kind in ("file", "dir"):
        for bit in range(32):
            p = "bits/%s%d" % (kind, bit)
            if kind == "file":
                write_file(p, b"")
            else:
                os.mkdir(p)
            r.do("set-%s-bit%d" % (kind, bit), setflags, p, 1 << bit)
            r.rec("set-%s-bit%d-flags" % (kind, bit), getflags(p))
            if getflags(p) not in ("0", "err:ENOTTY"):
                setflags(p, 0)
    r.rec("get-fifo", (os.mkfifo("fifo"), getflags("fifo"))[1])
    # clearing the extents flag (ext4: a request to convert to a block map)
    write_file("extents", b"")
    r.do("clear-extents", setflags, "extents", 0, 0)
    r.rec("clear-extents-flags", getflags("extents"))

    # immutable file
    write_file("imm", b"fixed")
    os.setxattr("imm", "user.x", b"1")
    before_fd = os.open("imm", os.O_RDWR)
    r.do("set-imm", setflags, "imm", FL_IMMUTABLE)
    r.rec("imm-flags", getflags("imm"))
    for step, fn, args in (
            ("imm-open-write", os.open, ("imm", os.O_WRONLY)),
            ("imm-open-append", os.open, ("imm", os.O_WRONLY | os.O_APPEND)),
            ("imm-open-trunc", os.open, ("imm", os.O_RDONLY | os.O_TRUNC)),
            ("imm-truncate", os.truncate, ("imm", 0)),
            ("imm-unlink", os.unlink, ("imm",)),
            ("imm-rename", os.rename, ("imm", "imm2")),
            ("imm-link", os.link, ("imm", "imm-link")),
            ("imm-chmod", os.chmod, ("imm", 0o600)),
            ("imm-chown", os.chown, ("imm", 1, 1)),
            ("imm-utime-now", c_utimensat, ("imm", UTIME_NOW, UTIME_NOW)),
            ("imm-utime-set", c_utimensat, ("imm", 10**18, 10**18)),
            ("imm-setxattr", os.setxattr, ("imm", "user.y", b"2")),
            ("imm-removexattr", os.removexattr, ("imm", "user.x")),
            ("imm-setacl", os.setxattr, ("imm", ACL_ACCESS,
                                        acl_bytes([(A_UOBJ, 6, 0), (A_USER, 4, 7), (A_GOBJ, 4, 0),
                                                   (A_MASK, 4, 0), (A_OTHER, 4, 0)]))),
            ("imm-write-old-fd", os.pwrite, (before_fd, b"x", 0)),
            ("imm-ftruncate-old-fd", os.ftruncate, (before_fd, 1)),
            ("imm-fallocate-old-fd", fallocate, (before_fd, FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE, 0, 1))):
        res = r.do(step, fn, *args)
        if isinstance(res, int) and step.startswith("imm-open"):
            os.close(res)
    os.close(before_fd)
    r.rec("imm-content", content("imm"))
    r.rec("imm-stat", lst("imm"))
    r.rec("imm-xattrs", xattrs("imm"))
    r.do("imm-read", content_or_raise, "imm")

    # append-only file
    write_file("app", b"start")
    r.do("set-app", setflags, "app", FL_APPEND)
    fd = r.do("app-open-write", os.open, "app", os.O_WRONLY)
    if fd is not None:
        os.close(fd)
    fd = r.do("app-open-append", os.open, "app", os.O_WRONLY | os.O_APPEND)
    if fd is not None:
        r.do("app-write", os.write, fd, b"+more", show=str)
        r.do("app-pwrite-0", os.pwrite, fd, b"!", 0, show=str)
        r.do("app-ftruncate", os.ftruncate, fd, 0)
        r.do("app-punch", fallocate, fd, FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE, 0, 1)
        os.close(fd)
    for step, fn, args in (
            ("app-open-trunc", os.open, ("app", os.O_WRONLY | os.O_APPEND | os.O_TRUNC)),
            ("app-truncate", os.truncate, ("app", 0)),
            ("app-unlink", os.unlink, ("app",)),
            ("app-rename", os.rename, ("app", "app2")),
            ("app-link", os.link, ("app", "app-link")),
            ("app-chmod", os.chmod, ("app", 0o600)),
            ("app-chown", os.chown, ("app", 1, 1)),
            ("app-utime-now", c_utimensat, ("app", UTIME_NOW, UTIME_NOW)),
            ("app-utime-set", c_utimensat, ("app", 10**18, 10**18)),
            ("app-setxattr", os.setxattr, ("app", "user.y", b"2"))):
        res = r.do(step, fn, *args)
        if isinstance(res, int) and step.startswith("app-open"):
            os.close(res)
    r.rec("app-content", content("app"))
    r.rec("app-stat", lst("app"))

    # no-atime
    write_file("noat", b"read me")
    r.do("set-noatime", setflags, "noat", FL_NOATIME)
    os.utime("noat", (OLD, OLD))
    content("noat")
    r.rec("noatime-atime-kept", os.stat("noat").st_atime == OLD)

    # immutable and append-only directories
    for d, fl in (("imm-dir", FL_IMMUTABLE), ("app-dir", FL_APPEND)):
        os.mkdir(d)
        write_file(d + "/old", b"")
        os.mkdir(d + "/olddir")
        write_file("into-" + d, b"")
        write_file("over-" + d, b"")
        write_file(d + "/victim", b"")
        r.do("set-" + d, setflags, d, fl)
        for step, fn, args in (
                ("create", write_file, (d + "/new", b"")),
                ("mkdir", os.mkdir, (d + "/newdir",)),
                ("mknod", os.mkfifo, (d + "/fifo",)),
                ("symlink", os.symlink, ("x", d + "/sym")),
                ("link-in", os.link, ("into-" + d, d + "/hard")),
                ("unlink", os.unlink, (d + "/old",)),
                ("rmdir", os.rmdir, (d + "/olddir",)),
                ("rename-out", os.rename, (d + "/victim", "out-of-" + d)),
                ("rename-in", os.rename, ("into-" + d, d + "/moved-in")),
                ("rename-over", os.rename, ("over-" + d, d + "/victim")),
                ("rename-within", os.rename, (d + "/old", d + "/old2")),
                ("chmod", os.chmod, (d, 0o700)),
                ("utime-set", c_utimensat, (d, 10**18, 10**18)),
                ("list", os.listdir, (d,))):
            r.do("%s-%s" % (d, step), fn, *args, show=sorted if step == "list" else None)

    # inheritance
    os.mkdir("inh")
    r.do("set-inherit", setflags, "inh", FL_SYNC | FL_NOATIME | FL_NODUMP | FL_DIRSYNC | FL_TOPDIR | FL_SECRM)
    write_file("inh/file", b"synced")
    os.mkdir("inh/dir")
    os.symlink("file", "inh/link")
    os.mkfifo("inh/fifo")
    for n in ("file", "dir", "fifo"):
        r.rec("inherit-" + n, getflags("inh/" + n))
    r.rec("inherit-content", content("inh/file"))

    # FS_IOC_FSGETXATTR / FSSETXATTR, FS_IOC_GETVERSION / SETVERSION
    write_file("xf", b"")
    setflags("xf", FL_SYNC | FL_NODUMP | FL_NOATIME | FL_SECRM)
    r.do("fsgetxattr", fd_ioctl, "xf", FS_IOC_FSGETXATTR, bytes(28),
         show=lambda b: list(struct.unpack("<5I", b[:20])))
    r.do("fssetxattr", fd_ioctl, "xf", FS_IOC_FSSETXATTR,
         struct.pack("<5I8x", 0x20 | 0x80, 0, 0, 0, 0))
    r.rec("fssetxattr-flags", getflags("xf"))
    r.do("fssetxattr-extsize", fd_ioctl, "xf", FS_IOC_FSSETXATTR,
         struct.pack("<5I8x", 0x800, 4096, 0, 0, 0))
    r.do("fssetxattr-projid", fd_ioctl, "xf", FS_IOC_FSSETXATTR, struct.pack("<5I8x", 0, 0, 0, 5, 0))
    r.do("getversion", fd_ioctl, "xf", FS_IOC_GETVERSION, bytes(8), show=lambda b: len(b))
    r.do("setversion", fd_ioctl, "xf", FS_IOC_SETVERSION, struct.pack("<q", 12345))
    # the value set, or the random generation kept (ext4 with metadata_csum)
    r.do("getversion-after", fd_ioctl, "xf", FS_IOC_GETVERSION, bytes(8),
         show=lambda b: "set" if struct.unpack("<I", b[:4])[0] == 12345 else "kept")

    # as a user: the owner may set the ordinary flags, not immutable or
    # append-only (CAP_LINUX_IMMUTABLE); others may set nothing
    write_file("users", b"")
    os.chown("users", uid, gid)
    write_file("roots", b"")

    def body(rec):
        user_do(rec, "user-get", getflags, "users", show=str)
        user_do(rec, "user-set-nodump", setflags, "users", FL_NODUMP)
        rec("user-set-nodump-flags", getflags("users"))
        user_do(rec, "user-set-immutable", setflags, "users", FL_IMMUTABLE)
        user_do(rec, "user-set-append", setflags, "users", FL_APPEND)
        user_do(rec, "user-set-not-owner", setflags, "roots", FL_NODUMP)
        user_do(rec, "user-get-not-owner", getflags, "roots", show=str)
        user_do(rec, "user-setversion-not-owner", fd_ioctl, "roots", FS_IOC_SETVERSION,
                struct.pack("<q", 1))
        user_do(rec, "user-write-imm", os.open, "imm", os.O_WRONLY)

    as_user(r, uid, gid, body)
    r.do("root-set-immutable-users", setflags, "users", FL_IMMUTABLE | FL_NODUMP)
    r.rec("root-set-immutable-users-flags", getflags("users"))
    # leave nothing immutable behind (e2fsck and later sections)
    for p in ("imm", "app", "imm-dir", "app-dir", "users"):
        setflags(p, 0)
    r.rec("listing", listing("."))
    os.chdir("..")


# ---------------------------------------------------------------- who may do what

def sec_matrix(r):
    """The same operations as root, as the owner of the files, as a member
    of their group (a supplementary group) and as another user, each on its
    own copy of one fixture: plain modes, a named-user and a named-group
    ACL, a default ACL, a sticky directory, xattrs, flags."""
    owner, group = r.uid, 4321
    who = (("root", 0, 0, ()), ("owner", owner, r.gid, ()),
           ("member", 4000, 4000, (group,)), ("other", 4001, 4001, ()))
    os.mkdir("matrix", 0o755)
    os.chmod("matrix", 0o755)
    os.chdir("matrix")
    for name, _, _, _ in who:
        os.mkdir(name)
        os.chown(name, owner, group)
        os.chmod(name, 0o775)
        for f, mode in (("f", 0o640), ("g", 0o664), ("x", 0o750), ("ro", 0o444)):
            write_file("%s/%s" % (name, f), b"matrix " + f.encode())
            os.chown("%s/%s" % (name, f), owner, group)
            os.chmod("%s/%s" % (name, f), mode)
        write_file(name + "/acl", b"acl file")
        os.chown(name + "/acl", owner, group)
        os.chmod(name + "/acl", 0o600)
        os.setxattr(name + "/acl", ACL_ACCESS,
                    acl_bytes([(A_UOBJ, 6, 0), (A_USER, 4, 4001), (A_GOBJ, 0, 0), (A_GROUP, 6, group),
                               (A_MASK, 6, 0), (A_OTHER, 0, 0)]))
        os.mkdir(name + "/sub")
        os.chown(name + "/sub", owner, group)
        os.chmod(name + "/sub", 0o770)
        os.setxattr(name + "/sub", ACL_DEFAULT,
                    acl_bytes([(A_UOBJ, 7, 0), (A_USER, 7, 4001), (A_GOBJ, 5, 0), (A_MASK, 7, 0),
                               (A_OTHER, 0, 0)]))
        write_file(name + "/sub/victim", b"")
        os.chown(name + "/sub/victim", owner, group)
        os.mkdir(name + "/sticky")
        os.chmod(name + "/sticky", 0o1777)
        write_file(name + "/sticky/owners", b"")
        os.chown(name + "/sticky/owners", owner, group)
        os.chmod(name + "/sticky/owners", 0o666)
        os.setxattr(name + "/g", "user.tag", b"v")

    for name, uid, gid, groups in who:
        def body(rec, d=name):
            def do(step, fn, *args, show=None):
                user_do(rec, step, fn, *args, show=show)
            os.umask(0o022)
            do("read-f", content_or_raise, d + "/f")
            do("read-acl", content_or_raise, d + "/acl")
            fd = user_do(rec, "write-open-g", os.open, d + "/g", os.O_WRONLY)
            if fd is not None:
                os.close(fd)
            fd = user_do(rec, "write-open-acl", os.open, d + "/acl", os.O_WRONLY)
            if fd is not None:
                os.close(fd)
            fd = user_do(rec, "write-open-ro", os.open, d + "/ro", os.O_WRONLY)
            if fd is not None:
                os.close(fd)
            rec("access-x", [os.access(d + "/x", m) for m in (os.R_OK, os.W_OK, os.X_OK)])
            rec("access-acl", [os.access(d + "/acl", m) for m in (os.R_OK, os.W_OK, os.X_OK)])
            do("getxattr-user", os.getxattr, d + "/g", "user.tag", show=lambda v: v.decode())
            do("setxattr-user", os.setxattr, d + "/g", "user.mine", b"1")
            do("setxattr-trusted", os.setxattr, d + "/g", "trusted.mine", b"1")
            do("listxattr", os.listxattr, d + "/g", show=sorted)
            do("get-acl", acl_of, d + "/acl", show=str)
            do("set-acl", os.setxattr, d + "/f", ACL_ACCESS,
               acl_bytes([(A_UOBJ, 6, 0), (A_USER, 4, 4001), (A_GOBJ, 4, 0), (A_MASK, 4, 0), (A_OTHER, 0, 0)]))
            do("utime-now", c_utimensat, d + "/g", UTIME_NOW, UTIME_NOW)
            do("utime-set", c_utimensat, d + "/g", 10**18, 10**18)
            do("getflags", getflags, d + "/g", show=str)
            do("setflags-nodump", setflags, d + "/g", FL_NODUMP)
            do("setflags-immutable", setflags, d + "/x", FL_IMMUTABLE)
            do("create-in-sub", write_file, d + "/sub/new", b"new", 0o666)
            rec("create-in-sub-stat", lst(d + "/sub/new"))
            rec("create-in-sub-acl", acl_of(d + "/sub/new"))
            do("mkdir-in-sub", os.mkdir, d + "/sub/newdir", 0o777)
            rec("mkdir-in-sub-stat", lst(d + "/sub/newdir"))
            do("link-into-sub", os.link, d + "/g", d + "/sub/hard")
            do("rename-in-sub", os.rename, d + "/sub/victim", d + "/sub/renamed")
            do("unlink-in-sub", os.unlink, d + "/sub/renamed")
            do("sticky-create", write_file, d + "/sticky/mine", b"")
            do("sticky-unlink-owners", os.unlink, d + "/sticky/owners")
            do("chmod-f", os.chmod, d + "/f", 0o604)
            rec("chmod-f-acl", acl_of(d + "/f"))
            do("chgrp-f", os.chown, d + "/f", -1, group)
            do("chown-f-self", os.chown, d + "/f", os.getuid(), -1)
            do("chown-f-other", os.chown, d + "/f", 4242, -1)
            rec("f-stat", lst(d + "/f"))
            do("unlink-f", os.unlink, d + "/f")
            do("rmdir-sub", os.rmdir, d + "/sub")

        as_user(r, uid, gid, lambda rec, body=body, name=name: body(
            lambda step, outcome: rec(name + "/" + step, outcome)), groups=groups)
    for name, _, _, _ in who:
        r.rec(name + "-listing", listing(name))
        r.rec(name + "-sub-listing", listing(name + "/sub"))
        for p in (name + "/x", name + "/g"):
            try:
                setflags(p, 0)
            except OSError:
                pass
    os.chdir("..")


def content_or_raise(path):
    with open(path, "rb") as f:
        return digest(f.read())


SECTIONS = [sec_fresh, sec_open, sec_tmpfile, sec_holes, sec_truncate, sec_coherence, sec_unlinked, sec_rename,
            sec_links, sec_symlink, sec_dirs, sec_mknod, sec_modes, sec_times, sec_xattr,
            sec_statfs, sec_fallocate, sec_user, sec_acl, sec_flags, sec_matrix]


def run(root, out, uid, gid):
    os.umask(0o022)
    os.chdir(root)
    r = Run(root, uid, gid)
    for sec in SECTIONS:
        r.prefix = sec.__name__[4:] + "/"
        try:
            sec(r)
        except Exception as e:      # recorded: the other driver may get through
            r.rec("<exception>", "%s: %s" % (type(e).__name__, e))
        finally:
            os.chdir(root)
    r.prefix = ""
    r.rec("root-listing", listing("."))
    with open(out, "w") as f:
        json.dump(r.out, f, indent=0)


def compare(kfile, rfile, bs, fs="ext3"):
    label = "%s, %d-byte blocks" % (fs, bs)
    expected_here = EXPECTED_EXT4 if fs == "ext4" else EXPECTED
    with open(kfile) as f:
        kern = json.load(f)
    with open(rfile) as f:
        ours = json.load(f)
    kd, rd = dict(map(tuple, kern)), dict(map(tuple, ours))
    fails = 0
    seen = set()
    for step, _ in kern + [x for x in ours if x[0] not in kd]:
        if step in seen:
            continue
        seen.add(step)
        k, o = kd.get(step, "<no such step>"), rd.get(step, "<no such step>")
        if step.endswith("exception>"):
            # the rest of that section did not run: never a pass
            fails += 1
            print("FAIL [posix_diff %s]: %s: kernel %s, recon-fuse %s"
                  % (label, step, json.dumps(k), json.dumps(o)), flush=True)
            continue
        exp = next((test for pat, test in expected_here.items() if re.fullmatch(pat, step)), None)
        if exp is not None and k != o:
            try:
                expected = exp(k, o, bs)
            except (TypeError, KeyError):
                expected = False
            if expected:
                print("[posix_diff %s] expected difference %s: kernel %s, recon-fuse %s"
                      % (label, step, json.dumps(k), json.dumps(o)))
                continue
        if k != o:
            fails += 1
            print("FAIL [posix_diff %s]: %s: kernel %s, recon-fuse %s"
                  % (label, step, json.dumps(k), json.dumps(o)), flush=True)
    print("[posix_diff %s] %d steps compared, %d differ" % (label, len(seen), fails))
    return fails


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif sys.argv[1] == "compare":
        fs = sys.argv[5] if len(sys.argv) > 5 else "ext3"
        sys.exit(1 if compare(sys.argv[2], sys.argv[3], int(sys.argv[4]), fs) else 0)
    else:
        sys.exit("usage: posix_diff.py run ROOT OUT UID GID | compare K R BLOCKSIZE [FS]")
