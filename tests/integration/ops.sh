#!/bin/bash
# Every FUSE operation the daemon serves, with the errno of each refusal, on
# 1 KiB and 4 KiB block images; inode numbers checked against debugfs; then a
# read-only mount where every modification gets EROFS.  e2fsck -fn after each.
. "$(dirname "$0")/lib.sh"
need_root

for bs in 1024 4096; do
	img="$SCRATCH/ops-$bs.img" mnt="$SCRATCH/mnt"
	mkimg "$img" "$bs" 64M
	# allow_other and a traversable scratch dir: some steps run as nobody
	chmod 755 "$SCRATCH"
	# the 1 KiB round runs the plain blocking reader, the 4 KiB one the
	# polling reader (poll_us, on by default)
	opts=allow_other,poll_us=0; [ "$bs" = 4096 ] && opts=allow_other
	mount_recon "$img" "$mnt" "$opts" || die "mount ($bs, $opts)"
	python3 - "$mnt" "$bs" "$SCRATCH/inos-$bs" <<'EOF' || fail "operations on $bs-byte blocks"
import errno, os, stat, sys, time
from pylib import *
m, bs, inos_out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
c = Checker("ops-%d" % bs)
os.chdir(m)

# statfs
sv = os.statvfs(".")
c.eq(sv.f_bsize, bs, "statfs f_bsize")
c.eq(sv.f_namemax, 255, "statfs f_namemax")
# bsddf (the kernel's default) leaves out static metadata; minixdf does not
c.ok(0.8 * (64 << 20) <= sv.f_blocks * sv.f_frsize <= 64 << 20, "statfs size (blocks * frsize): %d" % (sv.f_blocks * sv.f_frsize))
c.ok(0 < sv.f_bavail <= sv.f_bfree < sv.f_blocks, "statfs bavail <= bfree < blocks: %r" % (sv,))
c.ok(0 < sv.f_ffree < sv.f_files, "statfs free inodes: %r" % (sv,))
root_links = os.stat(".").st_nlink
c.eq(root_links, 3, "root nlink on a fresh image (., .., lost+found)")

# mkdir
c.succeeds(os.mkdir, "d", 0o755)
c.eq(os.stat(".").st_nlink, root_links + 1, "parent nlink after mkdir")
c.eq(os.stat("d").st_nlink, 2, "new directory nlink")
c.ok(stat.S_ISDIR(os.stat("d").st_mode), "mkdir makes a directory")
c.eq(stat.S_IMODE(os.stat("d").st_mode), 0o755, "mkdir mode (umask 022)")
c.errno(errno.EEXIST, os.mkdir, "d")
c.errno(errno.ENOENT, os.mkdir, "missing/d")
c.errno(errno.ENAMETOOLONG, os.mkdir, "n" * 256)
c.succeeds(os.mkdir, "n" * 255)
c.ok(os.path.isdir("n" * 255), "255-byte name is a directory")
c.succeeds(os.rmdir, "n" * 255)

# create / open
fd = c.succeeds(os.open, "f", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o640)
c.errno(errno.EEXIST, os.open, "f", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o640)
c.errno(errno.ENOENT, os.open, "nothere", os.O_RDONLY)
c.errno(errno.ENOTDIR, os.open, "f/x", os.O_RDONLY)
c.errno(errno.ENOTDIR, os.open, "f/x", os.O_CREAT | os.O_RDWR, 0o644)
c.errno(errno.ENOTDIR, os.mkdir, "f/x")
c.errno(errno.ENOTDIR, os.stat, "f/x")
c.errno(errno.EISDIR, os.open, "d", os.O_WRONLY)
c.errno(errno.EISDIR, os.open, "d", os.O_RDWR)
c.errno(errno.ENAMETOOLONG, os.open, "x" * 256, os.O_CREAT | os.O_RDWR, 0o644)
c.errno(errno.ENAMETOOLONG, os.stat, "x" * 256)
c.errno(errno.ENOENT, os.stat, "x" * 255)
st = os.stat("f")
c.eq(stat.S_IMODE(st.st_mode), 0o640, "create mode")
c.ok(stat.S_ISREG(st.st_mode), "create makes a regular file")
c.eq((st.st_uid, st.st_gid), (0, 0), "owner of a file root created")
c.eq(st.st_nlink, 1, "new file nlink")
c.eq(st.st_size, 0, "new file size")

# write / read / flush / fsync / release
c.eq(os.write(fd, b"hello, world\n"), 13, "write returns the count")
c.eq(os.pread(fd, 100, 0), b"hello, world\n", "read back")
c.eq(os.pread(fd, 100, 13), b"", "read at EOF")
c.eq(os.pread(fd, 5, 7), b"world", "read in the middle")
c.succeeds(os.fsync, fd)
c.succeeds(os.fdatasync, fd)
c.eq(os.fstat(fd).st_size, 13, "size after write")
c.succeeds(os.close, fd)
with open("f", "rb") as f:
    c.eq(f.read(), b"hello, world\n", "read after close")
with open("f", "ab") as f:
    f.write(b"more\n")
c.eq(os.stat("f").st_size, 18, "O_APPEND")

# setattr: mode, owner, size, times
os.chmod("f", 0o604)
c.eq(stat.S_IMODE(os.stat("f").st_mode), 0o604, "chmod")
os.chmod("f", 0o4755)
c.eq(stat.S_IMODE(os.stat("f").st_mode), 0o4755, "chmod setuid")
os.chown("f", 1234, 5678)
st = os.stat("f")
c.eq((st.st_uid, st.st_gid), (1234, 5678), "chown")
os.chown("f", 70000, 70001)   # above 16 bits: i_uid_high
st = os.stat("f")
c.eq((st.st_uid, st.st_gid), (70000, 70001), "chown to 32-bit ids")
# set-id bits and file capabilities: the daemon clears them (the kernel
# leaves it to us under FUSE_HANDLE_KILLPRIV_V2), as ext3 does
import struct
def as_nobody(fn):
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([]); os.setresgid(65534, 65534, 65534); os.setresuid(65534, 65534, 65534)
            fn()
            os._exit(0)
        except BaseException as e:
            sys.stderr.write("as_nobody: %r\n" % (e,))
            os._exit(1)
    return os.waitpid(pid, 0)[1] == 0
def mode_of(p):
    return stat.S_IMODE(os.stat(p).st_mode)
def writer(p, flags):
    def w():
        fd = os.open(p, flags)
        os.write(fd, b"x")
        os.close(fd)
    return w
with open("sid", "wb") as f:
    f.write(b"0123456789")
for flags, how in ((os.O_WRONLY, "write-only"), (os.O_RDWR, "read-write")):
    os.chmod("sid", 0o6777)
    c.ok(as_nobody(writer("sid", flags)), "another user writes a 6777 file (%s)" % how)
    c.eq(mode_of("sid"), 0o777, "a write by another user clears setuid and setgid (%s)" % how)
    os.chmod("sid", 0o4777)
    writer("sid", flags)()
    c.eq(mode_of("sid"), 0o4777, "a write by root keeps setuid (%s)" % how)
os.chmod("sid", 0o2767)
c.ok(as_nobody(lambda: os.truncate("sid", 3)), "another user truncates a 2767 file")
c.eq(mode_of("sid"), 0o767, "truncate by another user clears group-executable setgid")
os.chmod("sid", 0o6755)
os.chown("sid", 0, 0)
c.eq(mode_of("sid"), 0o755, "chown by root clears setuid and group-executable setgid")
os.chmod("sid", 0o2745)
os.chown("sid", 0, 0)
c.eq(mode_of("sid"), 0o2745, "chown by root keeps setgid without group-exec")
cap = struct.pack("<IIIII", 0x02000000, 1 << 10, 0, 0, 0)   # v2, cap_net_bind_service
for flags, how in ((os.O_WRONLY, "write-only"), (os.O_RDWR, "read-write")):
    os.setxattr("sid", "security.capability", cap)
    c.eq(os.getxattr("sid", "security.capability"), cap, "security.capability set (%s)" % how)
    writer("sid", flags)()
    c.errno(errno.ENODATA, os.getxattr, "sid", "security.capability")
os.unlink("sid")
os.truncate("f", 100000)
c.eq(os.stat("f").st_size, 100000, "truncate up")
with open("f", "rb") as f:
    data = f.read()
c.eq(data[:18], b"hello, world\nmore\n", "truncate up keeps the data")
c.ok(data[18:] == bytes(100000 - 18), "truncate up reads zeros")
os.truncate("f", 5)
c.eq(open("f", "rb").read(), b"hello", "truncate down")
os.truncate("f", 0)
c.eq(os.stat("f").st_size, 0, "truncate to 0")
c.eq(os.stat("f").st_blocks, 0, "truncate to 0 frees the blocks")
# open(O_TRUNC): the kernel hands it to the daemon with the open (atomic_o_trunc)
with open("f", "wb") as f:
    f.write(b"z" * 50000)
with open("f", "w") as f:             # O_WRONLY|O_CREAT|O_TRUNC
    f.write("new\n")
d = open("f", "rb").read()
c.eq((len(d), d[:8]), (4, b"new\n"), "open(O_TRUNC) of a 50,000-byte file leaves only the new data")
c.eq(os.stat("f").st_blocks, 2 if bs == 1024 else 8, "open(O_TRUNC) frees the old blocks")
os.close(os.open("f", os.O_RDWR | os.O_TRUNC))
c.eq((os.stat("f").st_size, os.stat("f").st_blocks), (0, 0), "O_RDWR|O_TRUNC empties the file")
os.utime("f", (1000000000, 1000000000))
os.close(os.open("f", os.O_WRONLY | os.O_TRUNC))
c.ok(abs(os.stat("f").st_mtime - time.time()) < 60, "open(O_TRUNC) of an empty file updates mtime")
os.utime("f", (1000000000, 1200000000))
st = os.stat("f")
c.eq((int(st.st_atime), int(st.st_mtime)), (1000000000, 1200000000), "utime")
before = os.stat("f").st_ctime
time.sleep(1.1)
os.chmod("f", 0o644)
c.ok(os.stat("f").st_ctime > before, "chmod updates ctime")
m0 = os.stat("d").st_mtime
time.sleep(1.1)
open("d/new", "w").close()
c.ok(os.stat("d").st_mtime > m0, "create updates the parent's mtime")
os.unlink("d/new")

# symlink / readlink
c.succeeds(os.symlink, "target/path", "s")
c.eq(os.readlink("s"), "target/path", "readlink")
st = os.lstat("s")
c.ok(stat.S_ISLNK(st.st_mode), "symlink is a link")
c.eq(st.st_size, len("target/path"), "symlink size")
c.errno(errno.EEXIST, os.symlink, "x", "s")
c.errno(errno.EEXIST, os.symlink, "x", "d")
c.errno(errno.EINVAL, os.readlink, "f")
c.errno(errno.ENOENT, os.readlink, "nothere")
c.errno(errno.ENOENT, os.stat, "s")          # dangling
c.errno(errno.ENAMETOOLONG, os.symlink, "t" * (bs + 1), "longlink")
c.succeeds(os.symlink, "t" * (bs - 1), "longlink")
c.eq(os.readlink("longlink"), "t" * (bs - 1), "longest symlink target")

# mknod: fifo, devices, socket
c.succeeds(os.mkfifo, "fifo", 0o600)
c.ok(stat.S_ISFIFO(os.stat("fifo").st_mode), "mkfifo")
c.succeeds(os.mknod, "cdev", stat.S_IFCHR | 0o600, os.makedev(1, 3))
st = os.stat("cdev")
c.ok(stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3), "char device and rdev")
c.succeeds(os.mknod, "bdev", stat.S_IFBLK | 0o600, os.makedev(259, 70000))
st = os.stat("bdev")
c.ok(stat.S_ISBLK(st.st_mode) and st.st_rdev == os.makedev(259, 70000), "block device, large minor")
c.succeeds(os.mknod, "sock", stat.S_IFSOCK | 0o600)
c.ok(stat.S_ISSOCK(os.stat("sock").st_mode), "socket node")
c.errno(errno.EEXIST, os.mknod, "fifo", stat.S_IFIFO | 0o600)

# link
c.succeeds(os.link, "f", "d/g")
c.eq(os.stat("f").st_nlink, 2, "nlink after link")
c.eq(os.stat("f").st_ino, os.stat("d/g").st_ino, "a hard link is the same inode")
c.errno(errno.EEXIST, os.link, "f", "s")
c.errno(errno.EPERM, os.link, "d", "dlink")
c.errno(errno.ENOENT, os.link, "nothere", "x")
c.errno(errno.ENAMETOOLONG, os.link, "f", "l" * 256)

# unlink / rmdir
c.errno(errno.ENOENT, os.unlink, "nothere")
c.errno(errno.EISDIR, os.unlink, "d")
c.errno(errno.ENOTDIR, os.unlink, "f/x")
c.errno(errno.ENOTEMPTY, os.rmdir, "d")
c.errno(errno.ENOTDIR, os.rmdir, "f")
c.errno(errno.ENOENT, os.rmdir, "nothere")
c.succeeds(os.unlink, "d/g")
c.eq(os.stat("f").st_nlink, 1, "nlink after unlink of a link")
c.errno(errno.ENOENT, os.stat, "d/g")
nl = os.stat(".").st_nlink
c.succeeds(os.rmdir, "d")
c.eq(os.stat(".").st_nlink, nl - 1, "parent nlink after rmdir")
c.errno(errno.ENOENT, os.stat, "d")

# readdir / readdirplus over many entries (several readdir calls, offsets)
os.mkdir("many")
names = set("entry-%04d-%s" % (i, "x" * (i % 40)) for i in range(700))
for n in names:
    open("many/" + n, "w").close()
os.mkdir("many/sub")
got = os.listdir("many")
c.eq(len(got), len(set(got)), "readdir returns no duplicates")
c.eq(set(got), names | {"sub"}, "readdir returns every entry")
kinds = {e.name: (e.is_dir(follow_symlinks=False), e.inode()) for e in os.scandir("many")}
c.ok(kinds["sub"][0] and not any(v[0] for k, v in kinds.items() if k != "sub"), "readdir d_type")
c.eq(kinds["sub"][1], os.stat("many/sub").st_ino, "readdir d_ino matches stat")
# entries removed while reading are not returned twice
for i, n in enumerate(sorted(names)):
    if i % 2:
        os.unlink("many/" + n)
c.eq(len(os.listdir("many")), len(names) // 2 + 1, "readdir after removals")

# fsyncdir
dfd = os.open("many", os.O_RDONLY | os.O_DIRECTORY)
c.succeeds(os.fsync, dfd)
os.close(dfd)

# statfs follows allocation
before = os.statvfs(".").f_bfree
with open("blob", "wb") as f:
    f.write(pattern("blob", 4 << 20))
    f.flush()
    os.fsync(f.fileno())
after = os.statvfs(".").f_bfree
c.ok(before - after >= (4 << 20) // bs, "statfs free blocks drop by the file's size (%d -> %d)" % (before, after))
os.unlink("blob")
# freed at the kernel's FORGET for the inode, which may come after the statfs
for _ in range(200):
    sv = os.statvfs(".")
    if sv.f_bfree >= before - 8:
        break
    time.sleep(0.01)
c.ok(sv.f_bfree >= before - 8, "statfs free blocks come back after unlink (%d -> %d)" % (before, sv.f_bfree))

# fallocate: mode 0 allocates zeroed blocks and extends; PUNCH_HOLE punches (as the
# kernel on block-mapped files: posix_diff.sh compares it); other modes EOPNOTSUPP
# (recon-fuse's choice; the kernel's ext4 driver refuses even mode 0 on block-mapped files)
fd = os.open("fa", os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, b"abc")
c.succeeds(fallocate, fd, 0, 0, 1 << 20)
st = os.fstat(fd)
c.eq(st.st_size, 1 << 20, "fallocate mode 0 extends the size")
c.ok(st.st_blocks * 512 >= 1 << 20, "fallocate mode 0 allocates (st_blocks %d)" % st.st_blocks)
c.ok(os.pread(fd, 1 << 20, 0) == b"abc" + bytes((1 << 20) - 3), "fallocate keeps data, rest reads zeros")
c.succeeds(fallocate, fd, 0, (3 << 20) + 5, 100)
c.eq(os.fstat(fd).st_size, (3 << 20) + 105, "fallocate past EOF extends to offset+len")
c.succeeds(fallocate, fd, 0, 0, 4096)     # already allocated: no-op
c.eq(os.fstat(fd).st_size, (3 << 20) + 105, "fallocate inside the file keeps the size")
for mode, name in ((FALLOC_FL_KEEP_SIZE, "KEEP_SIZE"),
                   (FALLOC_FL_ZERO_RANGE, "ZERO_RANGE"),
                   (FALLOC_FL_COLLAPSE_RANGE, "COLLAPSE_RANGE"),
                   (FALLOC_FL_INSERT_RANGE, "INSERT_RANGE")):
    c.errno(errno.EOPNOTSUPP, fallocate, fd, mode, 0, 1 << 16)
c.ok(os.pread(fd, 3, 0) == b"abc", "refused fallocate modes leave the data")
os.close(fd)

# EFBIG past the maximum file size (the kernel's for block-mapped files)
maxsize = {1024: 17247252480, 4096: 2196873666560}[bs]
fd = os.open("huge", os.O_CREAT | os.O_RDWR, 0o644)
c.errno(errno.EFBIG, os.ftruncate, fd, maxsize + 1)
c.succeeds(os.ftruncate, fd, maxsize)
c.eq(os.fstat(fd).st_size, maxsize, "truncate to the maximum size")
c.succeeds(os.ftruncate, fd, 0)
def write_at(off):
    os.pwrite(fd, b"x", off)
    os.fsync(fd)
c.errno(errno.EFBIG, write_at, maxsize)
c.succeeds(write_at, maxsize - 1)
c.eq(os.fstat(fd).st_size, maxsize, "a write at the last byte")
c.eq(os.pread(fd, 1, maxsize - 1), b"x", "read of the last byte")
os.close(fd)
os.unlink("huge")

# node ids are the inode numbers: written out for debugfs to confirm
with open(inos_out, "w") as out:
    for p in ("f", "s", "fifo", "many/sub", "longlink", "fa"):
        out.write("%s %d\n" % (p, os.lstat(p).st_ino))
c.done()
EOF
	umount_recon "$mnt"
	fsck_clean "$img" "ops on $bs-byte blocks"
	while read -r path ino; do
		got=$(debugfs -R "stat \"/$path\"" "$img" 2>/dev/null | sed -n 's/^Inode: \([0-9]*\).*/\1/p')
		[ "$got" = "$ino" ] || fail "st_ino of /$path is $ino, the image says '$got'"
	done <"$SCRATCH/inos-$bs" 2>/dev/null

	# read-only: every change gets EROFS, reads work
	mount_recon "$img" "$mnt" ro || die "mount -o ro ($bs)"
	python3 - "$mnt" <<'EOF' || fail "EROFS on a read-only mount ($bs)"
import errno, os, stat, sys
from pylib import *
c = Checker("ops-ro")
os.chdir(sys.argv[1])
c.ok(os.statvfs(".").f_flag & os.ST_RDONLY, "statfs says read-only")
c.eq(os.readlink("longlink")[:3], "ttt", "readlink on ro")
c.ok(open("fa", "rb").read(3) == b"abc", "read on ro")
E = errno.EROFS
c.errno(E, os.mkdir, "x")
c.errno(E, os.open, "x", os.O_CREAT | os.O_RDWR, 0o644)
c.errno(E, os.open, "fa", os.O_RDWR)
c.errno(E, os.unlink, "fa")
c.errno(E, os.rmdir, "many/sub")
c.errno(E, os.rename, "fa", "fb")
c.errno(E, os.link, "fa", "fb")
c.errno(E, os.symlink, "fa", "fb")
c.errno(E, os.chmod, "fa", 0o600)
c.errno(E, os.chown, "fa", 1, 1)
c.errno(E, os.truncate, "fa", 0)
c.errno(E, os.utime, "fa", (1, 1))
c.errno(E, os.mkfifo, "ff")
c.errno(E, os.setxattr, "fa", "user.x", b"1")
c.done()
EOF
	umount_recon "$mnt"
	fsck_clean "$img" "after the read-only mount ($bs)"
	rm -f "$img"
done
finish
