#!/bin/bash
# EMLINK past 65000 links, as the kernel's ext4 driver does on ext3 (no
# dir_nlink feature): a file reaches 65000 links and link() then fails with
# EMLINK; a directory with 64998 subdirectories (65000 links) refuses mkdir
# and a rename of a directory into it with EMLINK, and a removed subdirectory
# makes room again.  Remount: the counts are on disk; e2fsck -fn exits 0.
# With the argument ext4 (dir_nlink, indexed directories): files still stop
# at 65000 links, but a directory takes a 64999th subdirectory and more, its
# count then 1 (the kernel's ext4 rule, checked on the kernel's driver too),
# and a rename into it is allowed; an indexed directory keeps the count 1
# as the kernel's does, a linear one (ext4 without dir_index) takes back its
# true count once it has 65000 links or fewer.
. "$(dirname "$0")/lib.sh"
fs_from_arg "$@"
need_root
[ "$FS_TYPE" = ext4 ] && need_kernel_ext4
export EMLINK_FS=$FS_TYPE
img="$SCRATCH/emlink.img"
mnt="$SCRATCH/mnt"
# emlink_scenario INDEXED [mke2fs options]: INDEXED 1 when the image has
# dir_index (the directory of 65000 subdirectories is then an htree, as the
# kernel makes it), 0 when its directories stay linear
emlink_scenario() {
local indexed=$1; shift
# 1 KiB blocks: 65000 directories take 65000 blocks and inodes
mkimg "$img" 1024 160M -N 140000 "$@"
mount_recon "$img" "$mnt" || die "mount"
EMLINK_INDEXED=$indexed timeout -s KILL $((600 * TMUL)) python3 - "$mnt" <<'PY' || fail "EMLINK scenario (indexed: $indexed)"
import errno, os, sys
from pylib import Checker
m = sys.argv[1]
c = Checker("emlink")
os.chdir(m)
os.mkdir("links")
open("links/f", "wb").write(b"data")
n = 1
for i in range(1, 65000):
    try:
        os.link("links/f", "links/l%d" % i)
        n += 1
    except OSError as e:
        c.fail("link %d: %s" % (i + 1, e))
        break
c.eq(os.stat("links/f").st_nlink, 65000, "link count after 64999 links")
c.errno(errno.EMLINK, os.link, "links/f", "links/one-more")
c.ok(not os.path.exists("links/one-more"), "the refused link left no entry")
os.unlink("links/l1")
c.succeeds(os.link, "links/f", "links/again")
c.errno(errno.EMLINK, os.link, "links/f", "links/one-more")

os.mkdir("dirs")
os.mkdir("other")
os.mkdir("other/moveme")
for i in range(64998):
    try:
        os.mkdir("dirs/d%d" % i)
    except OSError as e:
        c.fail("mkdir %d: %s" % (i + 1, e))
        break
c.eq(os.stat("dirs").st_nlink, 65000, "directory link count with 64998 subdirectories")
def commit_dirs():
    fd = os.open("dirs", os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)
    os.close(fd)
if os.environ["EMLINK_FS"] == "ext4":
    commit_dirs()
    c.succeeds(os.mkdir, "dirs/one-more")
    commit_dirs()   # the checker sees 65000 links become 1
    c.eq(os.stat("dirs").st_nlink, 1, "dir_nlink: the count past 65000 links is 1")
    c.succeeds(os.rename, "other/moveme", "dirs/moveme")
    c.eq(os.stat("dirs").st_nlink, 1, "the count stays 1 after a rename into it")
    c.succeeds(os.rmdir, "dirs/d0")
    c.eq(os.stat("dirs").st_nlink, 1, "the count stays 1 after an rmdir")
    # an indexed directory keeps 1, as the kernel's (e2fsck accepts it);
    # e2fsck wants a linear directory's true count once it has no more
    # than the maximum
    commit_dirs()
    c.succeeds(os.rmdir, "dirs/d1")
    commit_dirs()   # the checker sees the count come back from 1 on its own
    if os.environ["EMLINK_INDEXED"] == "1":
        c.eq(os.stat("dirs").st_nlink, 1, "an indexed directory back at 65000 links keeps 1")
    else:
        c.eq(os.stat("dirs").st_nlink, 65000, "a linear directory back at 65000 links counts them")
    c.succeeds(os.mkdir, "dirs/again")
    c.eq(os.stat("dirs").st_nlink, 1, "past 65000 links again the count is 1")
    c.done()
    sys.exit(0)
c.errno(errno.EMLINK, os.mkdir, "dirs/one-more")
c.errno(errno.EMLINK, os.rename, "other/moveme", "dirs/moveme")
c.ok(os.path.isdir("other/moveme"), "the refused rename left the source")
# a file is not a link of the directory
open("dirs/file", "wb").close()
os.rmdir("dirs/d0")
c.succeeds(os.mkdir, "dirs/again")
c.errno(errno.EMLINK, os.mkdir, "dirs/one-more")
c.done()
PY
umount_recon "$mnt"
fsck_clean "$img" "after the EMLINK scenario"
mount_recon "$img" "$mnt" ro || die "remount"
[ "$(stat -c %h "$mnt/links/f")" = 65000 ] || fail "file link count after remount: $(stat -c %h "$mnt/links/f")"
if [ "$FS_TYPE" = ext4 ]; then dirs_nlink=1; else dirs_nlink=65000; fi
[ "$(stat -c %h "$mnt/dirs")" = "$dirs_nlink" ] ||
	fail "directory link count after remount: $(stat -c %h "$mnt/dirs"), want $dirs_nlink"
umount_recon "$mnt"
if [ "$indexed" = 1 ]; then
	debugfs -R "htree /dirs" "$img" 2>/dev/null | grep -q "Root node dump" ||
		fail "the directory of 65000 subdirectories is not indexed"
fi
}
emlink_scenario 1
# ext4 without dir_index: a linear directory's count comes back
[ "$FS_TYPE" = ext4 ] && emlink_scenario 0 -O ^dir_index

# the reference: the kernel's ext4 on the same steps of directories
if [ "$FS_TYPE" = ext4 ]; then
	kimg="$SCRATCH/kernel.img" kmnt="$SCRATCH/kmnt"
	mkimg "$kimg" 1024 160M -N 140000
	kmount "$kimg" "$kmnt" || die "the kernel's ext4 does not mount a fresh image"
	python3 - "$kmnt" <<'PY' || fail "the kernel's ext4 does not follow the dir_nlink rule checked here"
import os, sys
from pylib import Checker
c = Checker("emlink-kernel")
os.chdir(sys.argv[1])
os.mkdir("dirs")
for i in range(64998):
    os.mkdir("dirs/d%d" % i)
c.eq(os.stat("dirs").st_nlink, 65000, "the kernel: 64998 subdirectories")
c.succeeds(os.mkdir, "dirs/one-more")
c.eq(os.stat("dirs").st_nlink, 1, "the kernel: past 65000 links the count is 1")
os.rmdir("dirs/d0")
os.rmdir("dirs/d1")
c.eq(os.stat("dirs").st_nlink, 1, "the kernel: an indexed directory back at 65000 links keeps 1")
c.done()
PY
	kumount "$kmnt"
	fsck_clean "$kimg" "the kernel's dir_nlink directory"
	rm -f "$kimg"
fi
finish
