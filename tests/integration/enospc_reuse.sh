#!/bin/bash
# Freed space is reusable before anyone forces a commit, as on ext3 (an
# allocation that fails while freed blocks wait for their commit commits and
# retries): on a 64 MiB image, write 40 MiB, rm, write 40 MiB again, three
# times, each write whole; on a full disk, after an rm of small files, a
# directory of long names, a long symlink, an xattr block and a link.  A
# fallocate that fails after an rm (the indirect
# blocks do not fit) is undone in time proportional to what it did, not to
# the disk: on 64, 128 and 256 MiB images it fails within a bound while a
# concurrent statvfs keeps being answered; a fallocate that fits once the
# freed blocks are back succeeds and reads as zeros where the removed file's
# data was; one too large for a transaction commits
# midway.  e2fsck -fn is clean after each.
# Environment: REUSE_MAX_SECONDS (default 5): the bar for the failed fallocate.
. "$(dirname "$0")/lib.sh"
fs_from_arg "$@"
need_root
bar=${REUSE_MAX_SECONDS:-5}
mnt="$SCRATCH/mnt"

img="$SCRATCH/reuse.img"
mkimg "$img" 1024 64M
mount_recon "$img" "$mnt" || die "mount"
for round in 1 2 3; do
	dd if=/dev/zero of="$mnt/big" bs=1M count=40 status=none ||
		fail "round $round: dd of 40 MiB after an rm failed"
	size=$(stat -c %s "$mnt/big" 2>/dev/null || echo 0)
	[ "$size" -eq $((40 << 20)) ] || fail "round $round: wrote $size bytes, want 40 MiB"
	rm -f "$mnt/big"
done
umount_recon "$mnt"
fsck_clean "$img" "64 MiB, dd/rm rounds"

# falloc.py MNT BAR: fill a file, rm it, then (1) a fallocate of every free
# block fails (the indirect blocks do not fit) within BAR seconds while a
# thread's statvfs calls are answered; (2) half the space fallocates fine.
cat >"$SCRATCH/falloc.py" <<'EOF'
import errno, os, sys, threading, time
from pylib import Checker, fallocate
m, bar = sys.argv[1], float(sys.argv[2])
c = Checker("enospc_reuse-falloc")
os.chdir(m)
sv0 = os.statvfs(".")
fill = (sv0.f_bfree * sv0.f_frsize * 3) // 4
with open("fill", "wb") as f:
    chunk = b"\xa5" * (1 << 20)    # not zeros: the fallocate below must zero what it reuses
    left = fill
    while left > 0:
        left -= f.write(chunk[:min(left, len(chunk))])
os.unlink("fill")            # freed in the open transaction: not yet reusable
# the blocks count as free once the kernel forgets the inode (a FORGET a
# moment after the unlink) and the reaper thread has freed them, a group's
# worth at a time: wait until all are back
deadline = time.monotonic() + 5
while True:
    sv = os.statvfs(".")
    if sv.f_bfree >= sv0.f_bfree or time.monotonic() > deadline:
        break
    time.sleep(0.01)
worst, stop = [0.0], threading.Event()
def statter():
    while not stop.is_set():
        t = time.monotonic()
        os.statvfs(".")
        worst[0] = max(worst[0], time.monotonic() - t)
        time.sleep(0.01)
th = threading.Thread(target=statter)
th.start()
fd = os.open("pre", os.O_CREAT | os.O_RDWR, 0o644)
t = time.monotonic()
c.errno(errno.ENOSPC, fallocate, fd, 0, 0, sv.f_bfree * sv.f_frsize)
took = time.monotonic() - t
stop.set()
th.join()
print("failed fallocate of %d MiB: %.2f s; slowest statvfs meanwhile %.2f s"
      % (sv.f_bfree * sv.f_frsize >> 20, took, worst[0]))
c.ok(took < bar, "the failed fallocate took %.2f s (bar %.1f s)" % (took, bar))
c.ok(worst[0] < bar, "a statvfs waited %.2f s (bar %.1f s)" % (worst[0], bar))
c.eq(os.fstat(fd).st_size, 0, "the failed fallocate left the size")
c.eq(os.fstat(fd).st_blocks, 0, "the failed fallocate left no blocks")
sv2 = os.statvfs(".")
c.eq(sv2.f_bfree, sv.f_bfree, "free blocks after the failed fallocate")
half = (sv.f_bfree * sv.f_frsize) // 2
c.succeeds(fallocate, fd, 0, 0, half)
c.eq(os.fstat(fd).st_size, half, "half the free space fallocated")
nonzero = [o for o in range(0, half, 1 << 20)
           if os.pread(fd, min(1 << 20, half - o), o).count(0) != min(1 << 20, half - o)]
c.eq(nonzero[:4], [], "fallocated blocks (the filler's, reused) read as zeros")
os.close(fd)
c.done()
EOF
for size in 64M 128M 256M; do
	img="$SCRATCH/falloc-$size.img"
	mkimg "$img" 1024 "$size"
	mount_recon "$img" "$mnt" || { fail "$size: mount"; continue; }
	python3 "$SCRATCH/falloc.py" "$mnt" "$bar" || fail "$size: failed fallocate after rm"
	umount_recon "$mnt"
	fsck_clean "$img" "$size, after the fallocates"
	rm -f "$img"
done

# Names and xattrs reuse freed space too: fill the disk, rm small files, then make a
# directory of long names (new directory blocks), a long symlink and an
# xattr block, none of which may fail for the frees not yet committed.
img="$SCRATCH/names.img"
mkimg "$img" 1024 16M
mount_recon "$img" "$mnt" || die "mount (names)"
for i in $(seq 0 19); do head -c 8192 /dev/zero >"$mnt/small$i"; done
dd if=/dev/zero of="$mnt/fill" bs=1M count=64 status=none 2>/dev/null
dd if=/dev/zero of="$mnt/fill2" bs=1k count=64k status=none 2>/dev/null   # to the last block
rm -f "$mnt"/small*
python3 - "$mnt" <<'EOF2' || fail "names, a symlink and an xattr in freed space"
import os, sys, time
from pylib import Checker
c = Checker("enospc_reuse-names")
m = sys.argv[1]
# the 160 blocks come back once the kernel forgets the inodes and the reaper
# has freed them (in the open transaction: not yet reusable)
deadline = time.monotonic() + 5
while os.statvfs(m).f_bfree < 160 and time.monotonic() < deadline:
    time.sleep(0.01)
os.mkdir(os.path.join(m, "d"))
made = 0
for i in range(400):
    try:
        open(os.path.join(m, "d", "%04d-%s" % (i, "n" * 200)), "w").close()
        made += 1
    except OSError as e:
        c.ok(False, "create %d after the rm: %s" % (i, e))
        break
c.eq(made, 400, "long names created in freed space")
c.succeeds(os.symlink, "t" * 900, os.path.join(m, "link"))
c.succeeds(os.setxattr, os.path.join(m, "d"), "user.big", b"x" * 900)
c.succeeds(os.link, os.path.join(m, "d", "0000-" + "n" * 200), os.path.join(m, "d", "again-" + "n" * 200))
c.done()
EOF2
umount_recon "$mnt"
fsck_clean "$img" "names in freed space"
rm -f "$img"

# A fallocate whose indirect blocks do not fit one transaction (1 KiB blocks,
# the smallest journal: 1024 blocks) commits midway instead of failing the
# commit (which turned the file system read-only).
img="$SCRATCH/midway.img"
mkimg "$img" 1024 320M -J size=1
mount_recon "$img" "$mnt" "stats=$SCRATCH/midway.json" || die "mount (midway)"
fallocate -l 270M "$mnt/big" || fail "fallocate of 270 MiB with a 1 MiB journal"
size=$(stat -c %s "$mnt/big" 2>/dev/null || echo 0)
[ "$size" -eq $((270 << 20)) ] || fail "midway: size $size, want 270 MiB"
echo more >"$mnt/after" || fail "midway: a write after the big fallocate"
umount_recon "$mnt"
fsck_clean "$img" "after a fallocate larger than a transaction"
n=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["transactions"])' "$SCRATCH/midway.json")
[ "${n:-0}" -ge 2 ] || fail "midway: $n transactions, want the fallocate split in at least 2"
rm -f "$img"
finish
