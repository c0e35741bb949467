#!/bin/bash
# An unlinked file that is still open keeps its data until the last close,
# then its blocks are freed.  With the daemon killed (-9) while such a file is
# open, the image holds an orphan (s_last_orphan): our next mount must process
# it (e2fsck -fn clean, blocks free), and so must the kernel's ext3 driver.
. "$(dirname "$0")/lib.sh"
fs_from_arg "$@"
need_root

# The daemon killed (-9) while $holder keeps files open, then the holder
# ended and the dead mount taken away.
kill_with_holder() {
	kill -9 "$daemon"
	wait "$daemon" 2>/dev/null
	forget_pid "$daemon"
	RECON_PID=
	kill "$holder" 2>/dev/null
	wait "$holder" 2>/dev/null
	fusermount3 -uz "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null
	rm -f "$SCRATCH/holder.ready"
}

for bs in 1024 4096; do
	img="$SCRATCH/unl-$bs.img" mnt="$SCRATCH/mnt"
	mkimg "$img" "$bs" 64M
	base_free=$(free_blocks "$img")

	# 1. live: data readable through the descriptor until close
	mount_recon "$img" "$mnt" || die "mount ($bs)"
	python3 - "$mnt" "$bs" <<'EOF' || fail "open-unlinked file ($bs)"
import os, sys, time
from pylib import *
m, bs = sys.argv[1], int(sys.argv[2])
c = Checker("unlinked-%d" % bs)
os.chdir(m)
data = pattern("unl", 8 << 20)
free0 = os.statvfs(".").f_bfree
fd = os.open("victim", os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, data)
os.fsync(fd)
fd2 = os.open("victim", os.O_RDONLY)
os.unlink("victim")
c.ok("victim" not in os.listdir("."), "unlinked name is gone")
c.eq(os.fstat(fd).st_nlink, 0, "st_nlink of an open unlinked file")
c.ok(os.pread(fd2, len(data), 0) == data, "data readable after unlink")
os.pwrite(fd, b"still writable", 4096)
data = data[:4096] + b"still writable" + data[4096 + 14:]
c.ok(os.pread(fd2, len(data), 0) == data, "writable after unlink")
os.fsync(fd)
c.ok(os.statvfs(".").f_bfree < free0 - (7 << 20) // bs, "blocks still held while open")
os.close(fd)
c.ok(os.pread(fd2, 14, 4096) == b"still writable", "readable through the last descriptor")
os.close(fd2)
freed = False
for i in range(50):     # release is asynchronous in FUSE
    if os.statvfs(".").f_bfree >= free0 - 16:
        freed = True
        break
    time.sleep(0.1)
c.ok(freed, "blocks freed after the last close (%d, was %d)" % (os.statvfs(".").f_bfree, free0))
c.done()
EOF
	umount_recon "$mnt"
	fsck_clean "$img" "after an open-unlinked file ($bs)"

	# 2. crash with the file open: an orphan left on disk
	mount_recon "$img" "$mnt" || die "mount for the kill ($bs)"
	daemon=$RECON_PID
	python3 - "$mnt" "$SCRATCH/holder.ready" <<'EOF' &
import os, sys, time
from pylib import pattern
os.chdir(sys.argv[1])
open("keep", "wb").write(b"a file that stays")
fd = os.open("orphan", os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, pattern("orphan", 6 << 20))
os.fsync(fd)
os.unlink("orphan")
dfd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
os.fsync(dfd)           # the unlink (and the orphan list) committed
os.fsync(fd)
open(sys.argv[2], "w").close()
time.sleep(600)         # hold the file open until killed
EOF
	holder=$!
	for ((i = 0; i < 300; i++)); do [ -e "$SCRATCH/holder.ready" ] && break; sleep 0.1; done
	[ -e "$SCRATCH/holder.ready" ] || fail "the file holder did not get ready ($bs)"
	sleep 0.5
	kill_with_holder
	orphan=$(dumpe2fs -h "$img" 2>/dev/null | sed -n 's/^First orphan inode: *//p')
	needs=$(dumpe2fs -h "$img" 2>/dev/null | grep -c needs_recovery)
	# the orphan is on disk either in place or in the journal awaiting replay
	[ -n "$orphan" ] || [ "$needs" -gt 0 ] ||
		fail "after kill -9 with an open unlinked file, no orphan and no journal to replay ($bs)"
	cp --sparse=always "$img" "$SCRATCH/kernel.img"

	# our mount processes the orphan
	mount_recon "$img" "$mnt" || die "mount after the kill ($bs)"
	[ "$(cat "$mnt/keep" 2>/dev/null)" = "a file that stays" ] || fail "file written before the kill ($bs)"
	[ -e "$mnt/orphan" ] && fail "the unlinked name came back ($bs)"
	umount_recon "$mnt"
	fsck_clean "$img" "after our mount processed the orphan ($bs)"
	[ -z "$(dumpe2fs -h "$img" 2>/dev/null | sed -n 's/^First orphan inode: *//p')" ] ||
		fail "orphan list not empty after our mount ($bs)"
	left=$(free_blocks "$img")
	[ "$left" -ge $((base_free - 64)) ] || fail "orphan's blocks not freed: $left free, $base_free at mkfs ($bs)"

	# and the kernel processes the same orphan the same way
	if have_kernel_fs; then
		kmount "$SCRATCH/kernel.img" "$SCRATCH/kmnt" || fail "kernel cannot mount what the kill left ($bs)"
		[ "$(cat "$SCRATCH/kmnt/keep" 2>/dev/null)" = "a file that stays" ] || fail "kernel: file before the kill ($bs)"
		kumount "$SCRATCH/kmnt"
		fsck_clean "$SCRATCH/kernel.img" "kernel recovery of our orphan ($bs)"
	fi
	rm -f "$img" "$SCRATCH/kernel.img"

	# 3. many open unlinked files, closed in a seeded random order: each
	# close takes one out of the middle of the on-disk list; half are still
	# open at a kill -9, and the next mount frees what the list still holds
	mkimg "$img" "$bs" 64M
	seed=${UNLINKED_SEED:-$RANDOM}
	mount_recon "$img" "$mnt" || die "mount for many orphans ($bs)"
	daemon=$RECON_PID
	python3 - "$mnt" "$seed" "$SCRATCH/holder.ready" <<'EOF' &
import os, random, sys, time
m, seed, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = random.Random(seed)
os.chdir(m)
fds = []
for i in range(600):
    fd = os.open("o%d" % i, os.O_CREAT | os.O_RDWR, 0o644)
    os.write(fd, b"x" * rng.randrange(1, 3000))
    fds.append(fd)
for i in rng.sample(range(600), 600):
    os.unlink("o%d" % i)
rng.shuffle(fds)
free0 = os.statvfs(".").f_ffree
for fd in fds[:300]:
    os.close(fd)
for i in range(300):    # the kernel forgets the closed ones, the daemon frees them
    if os.statvfs(".").f_ffree >= free0 + 300:
        break
    time.sleep(0.1)
# a change of its own, fsynced: the commit also carries the frees before it
fd = os.open("marker", os.O_CREAT | os.O_RDWR, 0o644)
os.fsync(fd)
os.unlink("marker")
os.fsync(fd)
os.close(fd)
open(ready, "w").close()
time.sleep(600)
EOF
	holder=$!
	for ((i = 0; i < 600; i++)); do [ -e "$SCRATCH/holder.ready" ] && break; sleep 0.1; done
	[ -e "$SCRATCH/holder.ready" ] || fail "the holder of many orphans did not get ready (seed $seed, $bs)"
	kill_with_holder
	mount_recon "$img" "$mnt" || die "mount after a kill with many orphans (seed $seed, $bs)"
	[ -z "$(ls -A "$mnt" | grep -v lost+found)" ] || fail "unlinked names came back (seed $seed, $bs)"
	umount_recon "$mnt"
	fsck_clean "$img" "many orphans closed in random order, then a kill (seed $seed, $bs)"
	[ -z "$(dumpe2fs -h "$img" 2>/dev/null | sed -n 's/^First orphan inode: *//p')" ] ||
		fail "orphan list not empty after many orphans (seed $seed, $bs)"
	left=$(free_blocks "$img")
	[ "$left" -ge $((base_free - 64)) ] ||
		fail "many orphans' blocks not freed: $left free, $base_free at mkfs (seed $seed, $bs)"
	rm -f "$img"
done
finish
