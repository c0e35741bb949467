#!/bin/bash
# ENOSPC: a normal user fills the file system and gets ENOSPC while the
# reserved blocks are still free; root can then write into the reserve; out of
# inodes is ENOSPC too; space comes back after removal.  Mounted with
# allow_other,default_permissions, so the user's accesses are checked (EACCES).
. "$(dirname "$0")/lib.sh"
fs_from_arg "$@"
need_root
ensure_test_user

for bs in 1024 4096; do
	img="$SCRATCH/enospc-$bs.img" mnt="$SCRATCH/mnt"
	mkimg "$img" "$bs" 16M -m 10 -N 256
	mount_recon "$img" "$mnt" "allow_other,default_permissions" || die "mount ($bs)"
	mkdir "$mnt/u" "$mnt/r" && chown "$TEST_UID:$TEST_GID" "$mnt/u" || fail "setup ($bs)"
	echo secret >"$mnt/r/rootfile" && chmod 600 "$mnt/r/rootfile"
	as_user python3 - "$mnt" "$bs" <<'EOF' || fail "as a normal user ($bs)"
import errno, os, sys, time
from pylib import *
m, bs = sys.argv[1], int(sys.argv[2])
c = Checker("enospc-user-%d" % bs)
os.chdir(m)
c.errno(errno.EACCES, os.open, "r/rootfile", os.O_RDONLY)
c.errno(errno.EACCES, os.open, "r/new", os.O_CREAT | os.O_WRONLY, 0o644)
c.errno(errno.EACCES, os.mkdir, "r/newdir")
c.errno(errno.EPERM, os.chown, "u", 0, 0)
fd = os.open("u/fill", os.O_CREAT | os.O_WRONLY, 0o644)
c.eq(os.fstat(fd).st_uid, os.getuid(), "a user's file belongs to the user")
chunk = pattern("fill", 64 << 10)
written, err = 0, None
while err is None and written < (64 << 20):
    try:
        n = os.write(fd, chunk)
        os.fsync(fd)
        written += n
    except OSError as e:
        err = e.errno
c.eq(err, errno.ENOSPC, "the user's write stops with ENOSPC")
c.eq(os.statvfs(".").f_bavail, 0, "the user's last write took what was left (short count)")
err = None
while err is None and written < (64 << 20):   # the last blocks, one at a time
    try:
        written += os.write(fd, chunk[:bs])
        os.fsync(fd)
    except OSError as e:
        err = e.errno
c.eq(err, errno.ENOSPC, "the user's block-sized write stops with ENOSPC")
os.close(fd)
sv = os.statvfs(".")
print("user wrote %d KiB; then bfree %d bavail %d (blocks of %d)" % (written >> 10, sv.f_bfree, sv.f_bavail, sv.f_frsize))
c.ok(sv.f_bavail * sv.f_frsize < (128 << 10), "no space available to users at ENOSPC (bavail %d)" % sv.f_bavail)
c.ok(sv.f_bfree * sv.f_frsize >= (16 << 20) // 10 // 2, "the reserve is still free (bfree %d)" % sv.f_bfree)
c.errno(errno.ENOSPC, os.mkdir, "u/onemore")
c.done()
EOF
	python3 - "$mnt" "$bs" <<'EOF' || fail "as root ($bs)"
import errno, os, sys, time
from pylib import *
m, bs = sys.argv[1], int(sys.argv[2])
c = Checker("enospc-root-%d" % bs)
os.chdir(m)
fd = os.open("r/fill", os.O_CREAT | os.O_WRONLY, 0o644)
chunk = pattern("rfill", 16 << 10)
written, err = 0, None
while err is None and written < (64 << 20):
    try:
        n = os.write(fd, chunk)
        os.fsync(fd)
        written += n
    except OSError as e:
        err = e.errno
os.close(fd)
print("root wrote %d KiB into the reserve" % (written >> 10))
c.eq(err, errno.ENOSPC, "root's write stops with ENOSPC")
c.eq(os.statvfs(".").f_bfree, 0, "root's last write took the last blocks (short count)")
c.ok(written >= (16 << 20) // 10 // 2, "root can use the reserved blocks (%d KiB)" % (written >> 10))
c.ok(os.statvfs(".").f_bfree * bs < (256 << 10), "the reserve is used up (bfree %d)" % os.statvfs(".").f_bfree)
# remove, commit, and the space is usable again
os.unlink("r/fill"); os.unlink("u/fill")
dfd = os.open(".", os.O_RDONLY | os.O_DIRECTORY); os.fsync(dfd); os.close(dfd)
with open("r/again", "wb") as f:
    f.write(pattern("again", 4 << 20))
    f.flush()
    c.succeeds(os.fsync, f.fileno())
os.unlink("r/again")
# out of inodes
created, err = 0, None
os.mkdir("inodes")
while err is None and created < 1000:
    try:
        os.close(os.open("inodes/i%d" % created, os.O_CREAT | os.O_WRONLY, 0o644))
        created += 1
    except OSError as e:
        err = e.errno
c.eq(err, errno.ENOSPC, "creating past the last inode")
c.eq(os.statvfs(".").f_ffree, 0, "statfs: no free inodes")
c.ok(200 < created < 256, "inodes created before ENOSPC: %d" % created)
c.errno(errno.ENOSPC, os.mkdir, "inodes/dir")
c.errno(errno.ENOSPC, os.symlink, "x", "inodes/sym")
os.unlink("inodes/i0")
# the unlinked inode is freed after the kernel's FORGET for it (which may
# come after the next request) by the reaper thread: the create may wait
# for it briefly
def create_again():
    for _ in range(200):
        try:
            os.close(os.open("inodes/i0", os.O_CREAT | os.O_WRONLY, 0o644))
            return
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
            time.sleep(0.01)
    os.close(os.open("inodes/i0", os.O_CREAT | os.O_WRONLY, 0o644))
c.succeeds(create_again)
c.done()
EOF
	umount_recon "$mnt"
	fsck_clean "$img" "after ENOSPC ($bs)"
	rm -f "$img"
done

# A write larger than the free space writes what fits and returns a short
# count, as the kernel's ext3/ext4 do; the next write gets ENOSPC.  Through
# the page cache (O_RDWR) and direct (O_WRONLY), from a block-aligned and
# an unaligned offset; nothing stays allocated past the counted bytes.
img="$SCRATCH/shortwrite.img" mnt="$SCRATCH/mnt"
mkimg "$img" 1024 16M
mount_recon "$img" "$mnt" || die "mount (short writes)"
python3 - "$mnt" <<'EOF' || fail "short writes"
import errno, os, sys
from pylib import *
m = sys.argv[1]
c = Checker("enospc-short-write")
os.chdir(m)
chunk = pattern("short", 1 << 20)

def fill(name, flags, start):
    """Writes of 1 MiB until ENOSPC: (bytes written, short counts seen)."""
    fd = os.open(name, os.O_CREAT | flags, 0o644)
    pos, shorts = start, 0
    while True:
        try:
            n = os.pwrite(fd, chunk, pos)
        except OSError as e:
            c.eq(e.errno, errno.ENOSPC, "%s: the write after the short one" % name)
            break
        shorts += 0 < n < len(chunk)
        pos += n
    c.succeeds(os.fsync, fd)
    c.eq(os.fstat(fd).st_size, pos, "%s: the size is what write(2) returned" % name)
    os.close(fd)
    return pos - start, shorts

def content_ok(name, start, length):
    with open(name, "rb") as f:
        data = f.read()
    want = b"".join(chunk for _ in range(length // len(chunk) + 1))[:length]
    return data[start:] == want and data[:start] == bytes(start)

written, shorts = fill("buffered", os.O_RDWR, 0)
c.ok(shorts >= 1, "buffered: a short count before ENOSPC (%d)" % shorts)
c.eq(os.statvfs(".").f_bfree, 0, "buffered: every free block used")
c.ok(content_ok("buffered", 0, written), "buffered: the bytes read back")
# free about 300 blocks (a commit makes them allocatable), then direct
# writes from an offset inside a block
os.truncate("buffered", written - (300 << 10))
os.sync()
written2, shorts = fill("direct", os.O_WRONLY, 100)
print("short writes: %d KiB buffered, then %d KiB direct" % (written >> 10, written2 >> 10))
c.ok(shorts >= 1, "direct: a short count before ENOSPC (%d)" % shorts)
c.eq(os.statvfs(".").f_bfree, 0, "direct: every free block used")
c.ok(content_ok("direct", 100, written2), "direct: the bytes read back")
c.done()
EOF
umount_recon "$mnt"
fsck_clean "$img" "after short writes"
rm -f "$img"
finish
