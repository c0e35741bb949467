#!/bin/bash
# Every rename case: file and directory, same and other directory, over an
# existing file / empty directory, the refusals (ENOTEMPTY, EISDIR, ENOTDIR,
# EINVAL into itself, ENOENT), hard links of the same inode, RENAME_NOREPLACE
# and RENAME_EXCHANGE (file/file, dir/dir, file/dir across directories).
# Link counts and '..' are checked live and by e2fsck after unmount.
. "$(dirname "$0")/lib.sh"
fs_from_arg "$@"
need_root

for bs in 1024 4096; do
	img="$SCRATCH/rename-$bs.img" mnt="$SCRATCH/mnt"
	mkimg "$img" "$bs" 32M
	mount_recon "$img" "$mnt" || die "mount ($bs)"
	python3 - "$mnt" "$bs" <<'EOF' || fail "rename ($bs)"
import errno, os, sys, time
from pylib import *
m, bs = sys.argv[1], int(sys.argv[2])
c = Checker("rename-%d" % bs)
os.chdir(m)
def mk(p, data=None):
    with open(p, "wb") as f:
        f.write(data if data is not None else p.encode())
def content(p):
    return open(p, "rb").read()
def nlink(p):
    return os.lstat(p).st_nlink
def free_inodes():
    return os.statvfs(".").f_ffree
def freed_count(want):
    # the replaced inode goes at the kernel's FORGET for it, sent as the
    # rename drops the old dentry but read after it: wait for it briefly
    for _ in range(200):
        got = free_inodes()
        if got == want:
            break
        time.sleep(0.01)
    return got

os.mkdir("A"); os.mkdir("B")
# file: same directory, other directory
mk("A/f")
ino = os.stat("A/f").st_ino
os.rename("A/f", "A/g")
c.errno(errno.ENOENT, os.stat, "A/f")
c.eq(os.stat("A/g").st_ino, ino, "rename keeps the inode")
os.rename("A/g", "B/g")
c.eq(content("B/g"), b"A/f", "file moved to another directory")
c.eq(sorted(os.listdir("A")), [], "source directory empty")
# over an existing file: the target's inode is freed
mk("A/victim", b"victim")
mk("A/new", b"new")
fi = free_inodes()
os.rename("A/new", "A/victim")
c.eq(content("A/victim"), b"new", "rename over a file")
c.eq(freed_count(fi + 1), fi + 1, "the replaced file's inode is freed")
# over an existing file that has another link: it survives there
mk("A/t", b"t-data"); os.link("A/t", "B/t-link")
mk("A/u", b"u-data")
os.rename("A/u", "A/t")
c.eq(content("B/t-link"), b"t-data", "replaced file with another link survives")
c.eq(nlink("B/t-link"), 1, "its link count drops")
# hard links of the same inode: rename is a no-op, both names stay
os.link("A/t", "A/t2")
os.rename("A/t", "A/t2")
c.ok(os.path.exists("A/t") and os.path.exists("A/t2"), "rename between links of one inode does nothing")
# directories
os.makedirs("A/d/sub"); mk("A/d/sub/x")
na, nb = nlink("A"), nlink("B")
os.rename("A/d", "A/d2")
c.eq(nlink("A"), na, "rename within a directory keeps its nlink")
os.rename("A/d2", "B/d")
c.eq((nlink("A"), nlink("B")), (na - 1, nb + 1), "moving a directory moves a link from parent to parent")
c.eq(os.stat("B/d/..").st_ino, os.stat("B").st_ino, "'..' follows the moved directory")
c.eq(content("B/d/sub/x"), b"A/d/sub/x", "contents move with the directory")
# directory over an empty directory
os.mkdir("A/empty")
na, nb = nlink("A"), nlink("B")
fi = free_inodes()
os.rename("B/d", "A/empty")
c.eq((nlink("A"), nlink("B")), (na, nb - 1), "dir over empty dir: link counts")
c.eq(freed_count(fi + 1), fi + 1, "the replaced directory's inode is freed")
c.eq(content("A/empty/sub/x"), b"A/d/sub/x", "dir over empty dir: contents")
# refusals
os.mkdir("B/full"); mk("B/full/x")
os.mkdir("B/e2")
mk("B/file")
c.errno(errno.ENOTEMPTY, os.rename, "B/e2", "B/full")
c.errno(errno.EISDIR, os.rename, "B/file", "B/e2")
c.errno(errno.ENOTDIR, os.rename, "B/e2", "B/file")
c.errno(errno.EINVAL, os.rename, "A/empty", "A/empty/sub/inside")
c.errno(errno.ENOENT, os.rename, "B/nothere", "B/x")
c.errno(errno.ENOENT, os.rename, "B/file", "B/nodir/x")
c.errno(errno.ENOTDIR, os.rename, "B/file", "B/file/x")
c.errno(errno.ENAMETOOLONG, os.rename, "B/file", "B/" + "n" * 256)
c.eq(content("B/file"), b"B/file", "refused renames change nothing")
# RENAME_NOREPLACE
mk("B/nr1"); mk("B/nr2")
c.errno(errno.EEXIST, renameat2, "B/nr1", "B/nr2", RENAME_NOREPLACE)
c.eq(content("B/nr2"), b"B/nr2", "NOREPLACE left the target")
c.succeeds(renameat2, "B/nr1", "A/nr1", RENAME_NOREPLACE)
c.eq(content("A/nr1"), b"B/nr1", "NOREPLACE onto a free name")
# RENAME_EXCHANGE: file/file same directory
mk("B/x1", b"one"); mk("B/x2", b"two")
i1, i2 = os.stat("B/x1").st_ino, os.stat("B/x2").st_ino
c.succeeds(renameat2, "B/x1", "B/x2", RENAME_EXCHANGE)
c.eq((content("B/x1"), content("B/x2")), (b"two", b"one"), "EXCHANGE swaps files")
c.eq((os.stat("B/x1").st_ino, os.stat("B/x2").st_ino), (i2, i1), "EXCHANGE swaps inodes")
# file <-> directory across directories: '..' and both parents' link counts
os.makedirs("C/dd/inner"); os.mkdir("D"); mk("D/ff", b"ff")
nc, nd = nlink("C"), nlink("D")
c.succeeds(renameat2, "C/dd", "D/ff", RENAME_EXCHANGE)
c.ok(os.path.isdir("D/ff") and os.path.isfile("C/dd"), "EXCHANGE file <-> directory")
c.eq(content("C/dd"), b"ff", "exchanged file content")
c.eq(os.stat("D/ff/..").st_ino, os.stat("D").st_ino, "'..' of an exchanged directory")
c.eq((nlink("C"), nlink("D")), (nc - 1, nd + 1), "EXCHANGE moves the directory's link")
# dir <-> dir
os.makedirs("E/e1/a"); os.makedirs("F/f1/b")
c.succeeds(renameat2, "E/e1", "F/f1", RENAME_EXCHANGE)
c.ok(os.path.isdir("E/e1/b") and os.path.isdir("F/f1/a"), "EXCHANGE dir <-> dir")
c.eq(os.stat("E/e1/..").st_ino, os.stat("E").st_ino, "'..' after dir exchange (E)")
c.eq(os.stat("F/f1/..").st_ino, os.stat("F").st_ino, "'..' after dir exchange (F)")
c.errno(errno.ENOENT, renameat2, "E/e1", "E/missing", RENAME_EXCHANGE)
c.errno(errno.EINVAL, renameat2, "E/e1", "E/x", RENAME_EXCHANGE | RENAME_NOREPLACE)
# rename of an open file, then write through the descriptor
fd = os.open("B/open", os.O_CREAT | os.O_RDWR, 0o644)
os.rename("B/open", "A/opened")
os.write(fd, b"written after rename")
os.close(fd)
c.eq(content("A/opened"), b"written after rename", "rename of an open file")
# many renames in one directory (a directory index kept right)
os.mkdir("G")
for i in range(300):
    mk("G/n%03d" % i, b"%d" % i)
for i in range(300):
    os.rename("G/n%03d" % i, "G/m%03d-%s" % (i, "y" * (i % 50)))
c.eq(sorted(os.listdir("G")), sorted("m%03d-%s" % (i, "y" * (i % 50)) for i in range(300)), "300 renames")
c.ok(all(content("G/m%03d-%s" % (i, "y" * (i % 50))) == b"%d" % i for i in range(300)), "contents after 300 renames")
c.done()
EOF
	umount_recon "$mnt"
	fsck_clean "$img" "after renames ($bs)"
	mount_recon "$img" "$mnt" || die "remount ($bs)"
	[ "$(cat "$mnt/C/dd")" = ff ] || fail "exchanged file after remount ($bs)"
	[ -d "$mnt/E/e1/b" ] && [ -d "$mnt/F/f1/a" ] || fail "exchanged dirs after remount ($bs)"
	[ "$(ls "$mnt/G" | wc -l)" = 300 ] || fail "renamed entries after remount ($bs)"
	umount_recon "$mnt"
	fsck_clean "$img" "after the remount ($bs)"
	rm -f "$img"
done
finish
