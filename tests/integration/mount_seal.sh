#!/bin/bash
# The seal of a clean, checked unmount, on a loop device (where the holes of
# an image file cannot be seen and every inode table would be read):
#  1. mount, unmount: a seal is written; the next mount reads no table of an
#     empty group nor the reserved GDT blocks (stats), and the seal is gone
#     while it is mounted;
#  2. the kernel's ext3 mounts the device (its mount count moves), then a free
#     inode of an empty group is made to look in use: the seal is not used,
#     the damage is found and the mount is read-only with the invariant named;
#  3. an inode freed in the bitmap alone (superblock and descriptors as they
#     were) that still looks in use: the seal is not used, the damage found;
#  4. a forged seal whose mount count is wrong: ignored, every table read;
#  5. a read-write mount with the checker off removes the seal and leaves none.
. "$(dirname "$0")/lib.sh"
need_root
have_kernel_ext3 || skip "the kernel has no ext3 driver"
mnt="$SCRATCH/mnt"
img="$SCRATCH/s.img"
seals="$SCRATCH/seals"
mkimg "$img" 4096 3G
groups=$(dumpe2fs -h "$img" 2>/dev/null | awk -F: '/^Inode count/ {i=$2} /^Inodes per group/ {g=$2} END {print i / g}')
ipg=$(dumpe2fs -h "$img" 2>/dev/null | sed -n 's/^Inodes per group: *//p')
rgdt=$(dumpe2fs -h "$img" 2>/dev/null | sed -n 's/^Reserved GDT blocks: *//p')
# not loop_attach: its record of the device would stay in a subshell
dev=$(losetup --find --show "$img") || die "losetup"
LOOPS+=("$dev")
# the seal is the subject: the check at mount reads all it reads before serving
# (the background check: mount_background.sh)
opts() { echo "seal_dir=$seals,base_check=foreground,stats=$SCRATCH/$1.json"; }
seal_file() { ls "$seals" 2>/dev/null | grep -v '\.tmp$' | head -1; }

# cycle NAME [WORK]: mount read-write, run WORK in the mount, unmount
cycle() {
	mount_recon "$dev" "$mnt" "$(opts "$1")" || { fail "$1: mount failed"; return 1; }
	[ -z "$(seal_file)" ] || fail "$1: the seal is still there while mounted read-write"
	[ -n "${2:-}" ] && (cd "$mnt" && eval "$2")
	umount_recon "$mnt"
}

# 1. sealed, then spared
cycle first "mkdir d && echo a >d/f && sync" || die "first mount"
s=$(seal_file)
[ -n "$s" ] || die "no seal written in $seals after a clean unmount"
check "first mount read every table" [ "$(stat_of "$SCRATCH/first.json" base_check_tables_read)" -eq "$groups" ]
check "first mount sealed nothing" [ "$(stat_of "$SCRATCH/first.json" base_check_tables_sealed)" -eq 0 ]
cycle second "echo b >g && sync" || die "second mount"
check "second mount: every group sealed" \
	[ "$(stat_of "$SCRATCH/second.json" base_check_tables_sealed)" -eq "$groups" ]
read=$(stat_of "$SCRATCH/second.json" base_check_tables_read)
bytes=$(stat_of "$SCRATCH/second.json" base_check_table_bytes)
check "second mount read group 0's inodes in use only ($read tables, $bytes bytes)" \
	[ "$read" -le 1 -a "$bytes" -le 65536 ]
pristine=$(stat_of "$SCRATCH/second.json" base_check_groups_pristine)
check "second mount: empty groups' bitmaps not read ($pristine)" [ "$pristine" -gt $((groups / 2)) ]
check "first mount read every bitmap" [ "$(stat_of "$SCRATCH/first.json" base_check_groups_pristine)" -eq 0 ]
# nor the resize inode's reserved GDT blocks, which no commit writes
read=$(stat_of "$SCRATCH/second.json" bytes_read)
check "second mount read less than the $rgdt reserved GDT blocks hold ($read bytes)" \
	[ "$read" -lt $((rgdt * 4096)) ]
[ -n "$(seal_file)" ] || fail "no seal after the second clean unmount"
fsck_clean "$img" "after two sealed sessions"

# damaged_found NAME WHY: the mount must not use the seal (WHY in its
# message), must find INV_FREE_INODE_FORM and serve read-only
damaged_found() {
	local name=$1 why=$2
	if ! mount_recon "$dev" "$mnt" "$(opts "$name")"; then
		fail "$name: not mounted"
		return
	fi
	grep -q "seal.* not used (.*$why" "$RECON_LOG" || fail "$name: the seal not refused for '$why': $(head -3 "$RECON_LOG")"
	grep -q INV_FREE_INODE_FORM "$RECON_LOG" || fail "$name: the damage not found: $(head -3 "$RECON_LOG")"
	echo x >"$mnt/new" 2>/dev/null && fail "$name: a file was created on the damaged image"
	umount_recon "$mnt"
	# (the stats are the read-only reopen's: they say nothing of the check)
}

# 2. another driver mounted it; then an inode of an empty group damaged
victim=$((5 * ipg + 7))
[ -n "$(seal_file)" ] || die "no seal before the kernel's mount"
mkdir -p "$SCRATCH/k"
mount -t ext3 "$dev" "$SCRATCH/k" || die "kernel ext3 mount of $dev"
umount "$SCRATCH/k"
debugfs -w -f - "$dev" >/dev/null 2>&1 <<EOF
sif <$victim> mode 0100644
sif <$victim> links_count 1
EOF
damaged_found after_kernel "mount count"
debugfs -w -R "clri <$victim>" "$dev" >/dev/null 2>&1
cycle repaired "echo c >h && sync" || die "mount after the repair"
fsck_clean "$img" "after the repair"

# 3. a file's inode freed in the inode bitmap only: it still looks in use
[ -n "$(seal_file)" ] || die "no seal before the bitmap edit"
ino=$(debugfs -R "stat /h" "$dev" 2>/dev/null | sed -n 's/^Inode: \([0-9]*\).*/\1/p')
# the bit cleared in place (debugfs would touch the superblock too)
ibm=$(dumpe2fs "$dev" 2>/dev/null | sed -n 's/^ *Inode bitmap at \([0-9]*\).*/\1/p' | head -1)
python3 - "$dev" "$ibm" "$ino" <<'PY'
import os, sys
dev, blk, ino = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fd = os.open(dev, os.O_RDWR)
off = blk * 4096 + (ino - 1) // 8
b = os.pread(fd, 1, off)[0] & ~(1 << ((ino - 1) % 8))
os.pwrite(fd, bytes([b]), off)
os.fsync(fd)
PY
damaged_found bitmap_only "inode bitmaps changed"
e2fsck -fy "$dev" >/dev/null 2>&1
cycle repaired2 "" || die "mount after the second repair"

# 4. a forged seal: the mount count one off
s=$(seal_file)
[ -n "$s" ] || die "no seal before the forgery"
while read -r k v; do
	[ "$k" = mnt_count ] && v=$(printf '%x' $((0x$v + 1)))
	echo "$k${v:+ $v}"
done <"$seals/$s" >"$SCRATCH/forged"
cp "$SCRATCH/forged" "$seals/$s"
mount_recon "$dev" "$mnt" "$(opts forged)" || die "mount with a forged seal"
grep -q "seal.* not used (mount count" "$RECON_LOG" || fail "forged seal: not refused: $(head -3 "$RECON_LOG")"
umount_recon "$mnt"
check "forged seal: every table read" \
	[ "$(stat_of "$SCRATCH/forged.json" base_check_tables_sealed)" -eq 0 -a \
	  "$(stat_of "$SCRATCH/forged.json" base_check_tables_read)" -eq "$groups" ]

# 5. a read-write mount that does not check (checker=off) removes the seal too
[ -n "$(seal_file)" ] || fail "no seal after the forged one's mount"
mount_recon "$dev" "$mnt" "seal_dir=$seals,checker=off" || die "mount with checker=off"
echo d >"$mnt/unchecked"
umount_recon "$mnt"
[ -z "$(seal_file)" ] || fail "checker=off: the seal outlived an unchecked read-write mount"
fsck_clean "$img" "at the end"
finish
