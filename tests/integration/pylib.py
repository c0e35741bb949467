"""tests/integration/pylib.py - helpers for the python parts of the
integration tests: precise errno checks and deterministic file contents.

A Checker collects failures instead of stopping at the first, so one run
reports everything; its done() exits 1 if anything failed.
"""
import ctypes
import ctypes.util
import errno
import hashlib
import os
import sys

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
AT_FDCWD = -100


def renameat2(old, new, flags):
    """renameat2(2) through libc; raises OSError like os.rename."""
    fn = _libc.renameat2
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    rc = fn(AT_FDCWD, os.fsencode(old), AT_FDCWD, os.fsencode(new), flags)
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), old)


def fallocate(fd, mode, offset, length):
    """fallocate(2) with any mode (os.posix_fallocate can only do mode 0)."""
    fn = _libc.fallocate
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    rc = fn(fd, mode, offset, length)
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


class LibcDir:
    """A directory read through libc's opendir/readdir/telldir/seekdir, whose
    positions are the file system's cookies (os.listdir hides them)."""
    _NAME_OFF = 19   # struct dirent on Linux/glibc: ino 8, off 8, reclen 2, type 1
    _ready = False

    @classmethod
    def _prototypes(cls):
        if cls._ready:
            return
        _libc.opendir.restype = ctypes.c_void_p
        _libc.opendir.argtypes = [ctypes.c_char_p]
        _libc.readdir.restype = ctypes.c_void_p
        _libc.readdir.argtypes = [ctypes.c_void_p]
        _libc.telldir.restype = ctypes.c_long
        _libc.telldir.argtypes = [ctypes.c_void_p]
        _libc.seekdir.argtypes = [ctypes.c_void_p, ctypes.c_long]
        _libc.closedir.argtypes = [ctypes.c_void_p]
        cls._ready = True

    def __init__(self, path):
        self._prototypes()
        self.dp = _libc.opendir(os.fsencode(path))
        if not self.dp:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e), path)

    def read(self, n):
        """Up to N names (None: to the end), "." and ".." left out; a readdir
        error raises OSError."""
        got = []
        while n is None or len(got) < n:
            ctypes.set_errno(0)
            p = _libc.readdir(self.dp)
            if not p:
                e = ctypes.get_errno()
                if e:
                    raise OSError(e, "readdir: " + os.strerror(e))
                break
            name = ctypes.string_at(p + self._NAME_OFF).decode()
            if name not in (".", ".."):
                got.append(name)
        return got

    def tell(self):
        return _libc.telldir(self.dp)

    def seek(self, pos):
        _libc.seekdir(self.dp, pos)

    def close(self):
        _libc.closedir(self.dp)


FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_COLLAPSE_RANGE = 0x08
FALLOC_FL_ZERO_RANGE = 0x10
FALLOC_FL_INSERT_RANGE = 0x20


def pattern(seed, size):
    """Deterministic, incompressible-looking bytes: a file's expected content."""
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(b"%s:%d" % (str(seed).encode(), counter)).digest()
        counter += 1
    return bytes(out[:size])


def sha(data):
    return hashlib.sha256(data).hexdigest()


def file_sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


class Checker:
    def __init__(self, name):
        self.name = name
        self.failures = 0
        self.count = 0

    def fail(self, msg):
        self.failures += 1
        print("FAIL [%s]: %s" % (self.name, msg), flush=True)

    def ok(self, cond, msg):
        self.count += 1
        if not cond:
            self.fail(msg)
        return cond

    def eq(self, got, want, msg):
        self.count += 1
        if got != want:
            self.fail("%s: got %r, want %r" % (msg, got, want))
            return False
        return True

    def errno(self, want, fn, *args, **kw):
        """fn(*args) must raise OSError with errno want."""
        self.count += 1
        what = "%s%r" % (getattr(fn, "__name__", str(fn)), args)
        try:
            fn(*args, **kw)
        except OSError as e:
            if e.errno != want:
                self.fail("%s: errno %s (%s), want %s" % (
                    what, errno.errorcode.get(e.errno, e.errno), e.strerror,
                    errno.errorcode[want]))
                return False
            return True
        self.fail("%s: succeeded, want %s" % (what, errno.errorcode[want]))
        return False

    def succeeds(self, fn, *args, **kw):
        """fn(*args) must not raise; returns its result (None on failure)."""
        self.count += 1
        try:
            return fn(*args, **kw)
        except OSError as e:
            self.fail("%s%r: %s" % (getattr(fn, "__name__", str(fn)), args, e))
            return None

    def done(self):
        print("[%s] %d checks, %d failed" % (self.name, self.count, self.failures), flush=True)
        sys.exit(1 if self.failures else 0)


def manifest(root, skip=("lost+found",)):
    """Everything a driver should agree on about a tree: per path, the type,
    mode, owner, size, link count, content hash or link target, and xattrs.
    Returned as a sorted list of lines, for comparing two drivers' views."""
    import stat as st_
    lines = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not (dirpath == root and d in skip))
        for name in sorted(dirnames) + sorted(filenames):
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            s = os.lstat(p)
            kind = st_.S_IFMT(s.st_mode)
            if st_.S_ISREG(s.st_mode):
                what = file_sha(p)
            elif st_.S_ISLNK(s.st_mode):
                what = "-> " + os.readlink(p)
            elif st_.S_ISCHR(s.st_mode) or st_.S_ISBLK(s.st_mode):
                what = "dev %d" % s.st_rdev
            else:
                what = ""
            try:
                xa = sorted("%s=%s" % (a, sha(os.getxattr(p, a, follow_symlinks=False))[:16])
                            for a in os.listxattr(p, follow_symlinks=False))
            except OSError:
                xa = ["<xattr error>"]
            size = s.st_size if not st_.S_ISDIR(s.st_mode) else "-"
            lines.append("%s %o %o %d:%d %s n%d %d %s %s" % (
                rel, kind, st_.S_IMODE(s.st_mode), s.st_uid, s.st_gid, size,
                s.st_nlink, int(s.st_mtime), what, ",".join(xa)))
    return sorted(lines)


def diff_manifests(a, b, limit=10):
    """The first differing lines of two manifests, for a failure message."""
    sa, sb = set(a), set(b)
    only_a = sorted(sa - sb)[:limit]
    only_b = sorted(sb - sa)[:limit]
    return "\n".join(["  - " + x for x in only_a] + ["  + " + x for x in only_b])
