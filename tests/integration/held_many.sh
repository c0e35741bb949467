#!/bin/bash
# The daemon's table of held and open inodes (the kernel's references, the
# open handles, the unlinked ones waiting for both to go) grows when the
# kernel holds thousands of inodes.  Files unlinked while open before and
# after it grows must keep their data until their last close and be freed
# then, not at the unmount; a name the kernel looks up again after a growth
# is the same file; the image stays clean.
. "$(dirname "$0")/lib.sh"
fs_from_arg "$@"
need_root

img="$SCRATCH/held.img" mnt="$SCRATCH/mnt"
mkimg "$img" 4096 256M -N 20000
mount_recon "$img" "$mnt" || die "mount"
python3 - "$mnt" <<'EOF2' || fail "files held across the table's growth"
import os, sys, time
from pylib import *
c = Checker("held_many")
os.chdir(sys.argv[1])
os.mkdir("d")
free0 = os.statvfs(".").f_bfree

def open_unlinked(name, mib):
    data = pattern(name, mib << 20)
    fd = os.open(name, os.O_CREAT | os.O_RDWR, 0o644)
    os.write(fd, data)
    os.fsync(fd)
    os.unlink(name)
    return fd, data

early, early_data = open_unlinked("early", 4)
held = []
# every new name stays in the kernel's cache: it holds all of their inodes
for i in range(6000):
    open("d/f%d" % i, "wb").close()
    if i in (1500, 3000, 5000):
        held.append(open_unlinked("mid%d" % i, 1))
late, late_data = open_unlinked("late", 4)
c.eq(os.stat("d/f10").st_ino, os.stat("d/f10").st_ino, "a name looked up again")
c.ok(os.pread(early, len(early_data), 0) == early_data, "early file's data after the growth")
c.ok(os.pread(late, len(late_data), 0) == late_data, "late file's data")
for fd, data in held:
    c.ok(os.pread(fd, len(data), 0) == data, "a file unlinked while the table grew")
held_blocks = free0 - os.statvfs(".").f_bfree
c.ok(held_blocks >= (11 << 20) // 4096, "blocks held while open (%d)" % held_blocks)
for fd in [early, late] + [fd for fd, _ in held]:
    os.close(fd)
freed = False
for i in range(100):    # RELEASE is asynchronous in FUSE
    if free0 - os.statvfs(".").f_bfree < 256:
        freed = True
        break
    time.sleep(0.1)
c.ok(freed, "blocks freed at the last closes (%d held, %d before)"
     % (free0 - os.statvfs(".").f_bfree, held_blocks))
c.done()
EOF2
umount_recon "$mnt"
fsck_clean "$img" "after files held across the table's growth"
[ -z "$(first_orphan "$img")" ] || fail "orphan list not empty after the unmount"
finish
