#!/bin/bash
# ext4 with orphan_file (mke2fs 1.47.4's default): files unlinked while open
# are recorded in the orphan file's slots (ORPHAN_PRESENT set while any is),
# every commit checked.  Closed: the slots cleared, the flag with the last.
# Held across commits and the daemon killed (-9): our next mount releases
# them (e2fsck -fn clean, blocks free, the file and flag clear), and so does
# the kernel's ext4.  And an image the kernel's ext4 left with orphans in the
# orphan file (a copy taken while mounted): our mount replays its journal
# and releases them.  With a full orphan file the rest go on the list.
. "$(dirname "$0")/lib.sh"
need_root
command -v debugfs >/dev/null || skip "no debugfs"

NFILES=24

# mkext4 IMG BS [MKE2FS-OPTION...]: a fresh ext4 image with the orphan file
mkext4() {
	local img=$1 bs=$2; shift 2
	rm -f "$img"
	truncate -s 64M "$img" || die "truncate $img"
	mke2fs -F -q -t ext4 -b "$bs" -O orphan_file,metadata_csum_seed "$@" "$img" >"$SCRATCH/mke2fs.out" 2>&1 ||
		{ cat "$SCRATCH/mke2fs.out"; die "mke2fs -O orphan_file $img"; }
}
features() { dumpe2fs -h "$1" 2>/dev/null | sed -n 's/^Filesystem features: *//p'; }
# slots IMG: the non-zero slots of the orphan file (its journal replayed
# into a copy first, orphans not released: debugfs's journal_run)
slots() {
	local c="$SCRATCH/slots.img" bs ino
	cp --sparse=always "$1" "$c"
	debugfs -w -R "journal_run" "$c" >/dev/null 2>&1
	bs=$(dumpe2fs -h "$c" 2>/dev/null | sed -n 's/^Block size: *//p')
	ino=$(dumpe2fs -h "$c" 2>/dev/null | sed -n 's/^Orphan file inode: *//p')
	debugfs -R "dump <$ino> $SCRATCH/ofile" "$c" >/dev/null 2>&1
	python3 - "$SCRATCH/ofile" "$bs" <<'EOF'
import struct, sys
d, bs = open(sys.argv[1], "rb").read(), int(sys.argv[2])
n = 0
for b in range(0, len(d), bs):
    n += sum(1 for v in struct.unpack("<%dI" % ((bs - 8) // 4), d[b:b + bs - 8]) if v)
print(n)
EOF
	rm -f "$c"
}
# the holder: NFILES files written, unlinked while open, each unlink
# committed (fsync of the directory), held until killed
holder_script() {
	cat <<'EOF'
import os, sys, time
m, n, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.chdir(m)
open("keep", "wb").write(b"a file that stays")
fds = []
for i in range(n):
    fd = os.open("o%d" % i, os.O_CREAT | os.O_RDWR, 0o644)
    os.write(fd, bytes([i]) * (20000 + 4096 * i))
    os.fsync(fd)
    fds.append(fd)
dfd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
for i in range(n):
    os.unlink("o%d" % i)
    if i % 5 == 0:
        os.fsync(dfd)       # some unlinks in commits of their own
os.fsync(dfd)
for i in range(0, n, 3):    # a third closed: out of the file again
    os.close(fds[i])
time.sleep(1)
fd = os.open("marker", os.O_CREAT | os.O_RDWR, 0o644)
os.fsync(fd)
os.close(fd)
os.fsync(dfd)
open(ready, "w").close()
time.sleep(600)
EOF
}

# kill_when_held DAEMON HOLDER WHO: once the holder wrote $SCRATCH/ready (its
# files open, unlinked, committed), kill -9 the daemon, end the holder and
# clear the dead mount: the orphans stay recorded as a crash leaves them
kill_when_held() {
	local daemon=$1 holder=$2 who=$3 i
	for ((i = 0; i < 600; i++)); do [ -e "$SCRATCH/ready" ] && break; sleep 0.1; done
	[ -e "$SCRATCH/ready" ] || fail "$who did not get ready"
	kill -9 "$daemon"
	wait "$daemon" 2>/dev/null
	forget_pid "$daemon"
	RECON_PID=
	kill "$holder" 2>/dev/null
	wait "$holder" 2>/dev/null
	fusermount3 -uz "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null
}

for bs in 1024 4096; do
	img="$SCRATCH/of-$bs.img" mnt="$SCRATCH/mnt"
	mkext4 "$img" "$bs"
	base_free=$(free_blocks "$img")

	# 1. live: the slots fill and empty, the flag follows
	mount_recon "$img" "$mnt" || die "mount ($bs)"
	python3 - "$mnt" <<'EOF' || fail "open-unlinked files on the orphan file ($bs)"
import os, sys, time
from pylib import *
c = Checker("orphan-file-live")
os.chdir(sys.argv[1])
fds = []
for i in range(10):
    fd = os.open("u%d" % i, os.O_CREAT | os.O_RDWR, 0o644)
    os.write(fd, pattern("u%d" % i, 50000))
    fds.append(fd)
for i in range(10):
    os.unlink("u%d" % i)
os.sync()
for i, fd in enumerate(fds):
    c.ok(os.pread(fd, 50000, 0) == pattern("u%d" % i, 50000), "u%d readable after unlink" % i)
    os.close(fd)
os.sync()
c.done()
EOF
	umount_recon "$mnt"
	fsck_clean "$img" "after open-unlinked files were closed ($bs)"
	case " $(features "$img") " in *" orphan_present "*) fail "ORPHAN_PRESENT left set ($bs)" ;; esac

	# 2. held across commits, then kill -9
	mount_recon "$img" "$mnt" || die "mount for the kill ($bs)"
	daemon=$RECON_PID
	rm -f "$SCRATCH/ready"
	python3 - "$mnt" "$NFILES" "$SCRATCH/ready" < <(holder_script) &
	holder=$!
	kill_when_held "$daemon" "$holder" "the holder ($bs)"
	held=$((NFILES - (NFILES + 2) / 3))
	n=$(slots "$img")
	[ "$n" = "$held" ] || fail "after the kill the orphan file holds $n entries, want $held ($bs)"
	[ -z "$(first_orphan "$img")" ] || fail "orphans went on the list, not the orphan file ($bs)"
	cp --sparse=always "$img" "$SCRATCH/kernel.img"

	mount_recon "$img" "$mnt" || die "mount after the kill ($bs)"
	grep -q "processed $held orphan inode(s)" "$RECON_LOG" ||
		fail "our mount did not release $held orphans ($bs): $(grep orphan "$RECON_LOG")"
	[ "$(cat "$mnt/keep" 2>/dev/null)" = "a file that stays" ] || fail "file written before the kill ($bs)"
	ls "$mnt" | grep -q '^o[0-9]' && fail "unlinked names came back ($bs)"
	umount_recon "$mnt"
	fsck_clean "$img" "after our mount released the orphan file ($bs)"
	[ "$(slots "$img")" = 0 ] || fail "the orphan file still holds entries ($bs)"
	case " $(features "$img") " in *" orphan_present "*) fail "ORPHAN_PRESENT left set after release ($bs)" ;; esac
	left=$(free_blocks "$img")
	[ "$left" -ge $((base_free - 64)) ] || fail "orphans' blocks not freed: $left free, $base_free at mkfs ($bs)"

	need_kernel_ext4
	mkdir -p "$SCRATCH/kmnt"
	if mount -t ext4 -o loop "$SCRATCH/kernel.img" "$SCRATCH/kmnt"; then
		MOUNTS+=("$SCRATCH/kmnt")
		[ "$(cat "$SCRATCH/kmnt/keep" 2>/dev/null)" = "a file that stays" ] || fail "kernel: file before the kill ($bs)"
		umount "$SCRATCH/kmnt"
		fsck_clean "$SCRATCH/kernel.img" "the kernel's release of our orphan file ($bs)"
	else
		fail "the kernel's ext4 does not mount what the kill left ($bs)"
	fi

	# 3. the kernel's crash image: its orphan file holds the open-unlinked
	mkext4 "$img" "$bs"
	mkdir -p "$SCRATCH/kmnt"
	# (-o loop: the loop device goes with the unmount)
	mount -t ext4 -o loop "$img" "$SCRATCH/kmnt" || die "kernel mount ($bs)"
	MOUNTS+=("$SCRATCH/kmnt")
	rm -f "$SCRATCH/ready"
	python3 - "$SCRATCH/kmnt" "$NFILES" "$SCRATCH/ready" < <(holder_script) &
	holder=$!
	for ((i = 0; i < 600; i++)); do [ -e "$SCRATCH/ready" ] && break; sleep 0.1; done
	[ -e "$SCRATCH/ready" ] || fail "the kernel-side holder did not get ready ($bs)"
	sync
	cp --sparse=always "$img" "$SCRATCH/crash.img"   # the power cut: what the device holds
	kill "$holder" 2>/dev/null
	wait "$holder" 2>/dev/null
	umount "$SCRATCH/kmnt"
	n=$(slots "$SCRATCH/crash.img")
	[ "$n" = "$held" ] || fail "the kernel's crash image holds $n orphan-file entries, want $held ($bs)"
	"$RECON_CHECK" --scan "$SCRATCH/crash.img" >"$SCRATCH/scan.out" 2>&1 ||
		fail "recon-check --scan rejects the kernel's crash image ($bs): $(head -3 "$SCRATCH/scan.out")"
	mount_recon "$SCRATCH/crash.img" "$mnt" || die "our mount of the kernel's crash image ($bs)"
	grep -q "processed $held orphan inode(s)" "$RECON_LOG" ||
		fail "our mount did not release the kernel's $held orphans ($bs): $(grep orphan "$RECON_LOG")"
	[ "$(cat "$mnt/keep" 2>/dev/null)" = "a file that stays" ] || fail "kernel-written file ($bs)"
	umount_recon "$mnt"
	fsck_clean "$SCRATCH/crash.img" "after our mount released the kernel's orphans ($bs)"
	case " $(features "$SCRATCH/crash.img") " in
	*" orphan_present "*) fail "ORPHAN_PRESENT left set on the kernel's image ($bs)" ;;
	esac
	rm -f "$img" "$SCRATCH/kernel.img" "$SCRATCH/crash.img"
done
# 4. a full orphan file: two 1 KiB blocks hold 508 entries, the other
# orphans go on the list; a kill -9, and our mount releases both
img="$SCRATCH/full.img" mnt="$SCRATCH/mnt"
mkext4 "$img" 1024 -N 2048 -E orphan_file_size=2
mount_recon "$img" "$mnt" || die "mount (a full orphan file)"
daemon=$RECON_PID
rm -f "$SCRATCH/ready"
python3 - "$mnt" "$SCRATCH/ready" <<'EOF' &
import os, sys, time
m, ready = sys.argv[1], sys.argv[2]
os.chdir(m)
fds = []
for i in range(600):
    fd = os.open("f%d" % i, os.O_CREAT | os.O_RDWR, 0o644)
    os.write(fd, b"y" * 1500)
    fds.append(fd)
dfd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
for i in range(600):
    os.unlink("f%d" % i)
os.fsync(dfd)               # the unlinks (and their orphans) committed
for fd in fds[:50]:         # out of the file and off the list again
    os.close(fd)
time.sleep(1)
fd = os.open("marker", os.O_CREAT | os.O_RDWR, 0o644)
os.fsync(fd)                # a commit after the releases
os.fsync(dfd)
open(ready, "w").close()
time.sleep(600)
EOF
holder=$!
kill_when_held "$daemon" "$holder" "the holder of 600 orphans"
n=$(slots "$img")
[ "$n" -ge 450 ] || fail "a full orphan file: $n entries after the kill, want the file (nearly) full"
mount_recon "$img" "$mnt" || die "mount after the kill (a full orphan file)"
grep -q "processed 550 orphan inode(s)" "$RECON_LOG" ||
	fail "a full orphan file: our mount did not release 550 orphans: $(grep orphan "$RECON_LOG")"
umount_recon "$mnt"
fsck_clean "$img" "a full orphan file and the list, released"
[ -z "$(first_orphan "$img")" ] || fail "a full orphan file: the list is not empty after release"
finish
