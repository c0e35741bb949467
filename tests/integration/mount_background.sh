#!/bin/bash
# The base check's background part (base_check=background, the default): on
# a loop device (where the holes of an image file cannot be seen) no seal
# vouches for, the mount reads each inode table only up to
# its last inode in use and serves; a thread checks the free inodes past it
# group by group, and a commit that writes a group not yet checked checks it
# first.
#  1. a free inode past group 0's last in use made to look in use, the thread
#     held back: a create (group 0) is refused, the damage named, nothing of
#     it on the disk;
#  2. the same damage in the last group: the thread finds it, commits are
#     refused from then on;
#  3. no damage: the thread finishes, the stats say so, the clean unmount
#     seals, e2fsck -fn is clean;
#  4. an unmount while the thread is held back: prompt, and no seal;
#  5. a group its descriptor calls empty (bitmaps not read at mount) whose
#     block bitmap has a stray bit, the thread held back: a file written
#     into that group is refused before a byte reaches it, the damage named;
#  6. the same with a stray inode bit: the thread finds it, commits refused.
. "$(dirname "$0")/lib.sh"
need_root
mnt="$SCRATCH/mnt"
img="$SCRATCH/b.img"
seals="$SCRATCH/seals"
opts() { echo "seal_dir=$seals,stats=$SCRATCH/$1.json"; }
seal_file() { ls "$seals" 2>/dev/null | grep -v '\.tmp$' | head -1; }
# 16 groups of 8 MiB
fresh() { mkimg "$img" 4096 128M -g 2048; rm -rf "$seals"; }
# attach: $dev, a loop device over $img (not loop_attach: its record of the
# device would stay in a subshell)
attach() {
	dev=$(losetup --find --show "$img") || die "losetup"
	LOOPS+=("$dev")
}
detach() { losetup -d "$dev"; }
groups() { dumpe2fs -h "$img" 2>/dev/null | awk -F: '/^Inode count/ {i=$2} /^Inodes per group/ {g=$2} END {print i / g}'; }
ipg() { dumpe2fs -h "$img" 2>/dev/null | sed -n 's/^Inodes per group: *//p'; }
# damage INO: a free inode made to look in use (a link, a mode, no dtime)
damage() {
	debugfs -w -f - "$img" >/dev/null 2>&1 <<EOF
sif <$1> mode 0100644
sif <$1> links_count 1
EOF
}
# wfsync FILE: create FILE, empty (no data written ahead of the commit into
# a free block), and fsync it: the commit's verdict reaches fsync
wfsync() { dd of="$1" conv=fsync status=none </dev/null 2>/dev/null; }
# changed_blocks BEFORE IMG: the blocks that differ, but those any read-write
# mount writes (the superblock's block, the journal's superblock)
changed_blocks() {
	local jsb
	jsb=$(debugfs -R "bmap <8> 0" "$2" 2>/dev/null)
	cmp -l "$1" "$2" | awk -v j="$jsb" '{ b = int(($1 - 1) / 4096); if (b != 0 && b != j) print b }' | sort -un | head -5
}
# bitmap_stray KIND GROUP BYTE: a bit set in GROUP's block or inode bitmap
# (KIND "Block" or "Inode"), its descriptor left as it was
bitmap_stray() {
	local at
	at=$(dumpe2fs "$img" 2>/dev/null | sed -n "/^Group $2:/,/^Group/s/^ *$1 bitmap at \([0-9]*\).*/\1/p")
	[ -n "$at" ] || die "no $1 bitmap for group $2"
	printf '\x01' | dd of="$img" bs=1 seek=$((at * 4096 + $3)) conv=notrunc status=none
}
# wait_log PATTERN SECONDS: the daemon's log says PATTERN in time
wait_log() {
	local i
	for ((i = 0; i < $2 * 10 * TMUL; i++)); do
		grep -q "$1" "$RECON_LOG" && return 0
		sleep 0.1
	done
	return 1
}

# After a refused commit: unmount, and the image must be byte for byte what it
# was at before.img, with no seal written.
expect_untouched() {
	umount_recon "$mnt" 3
	detach
	changed=$(changed_blocks "$SCRATCH/before.img" "$img")
	[ -z "$changed" ] || fail "$1: a refused write reached the disk (blocks $changed)"
	[ -z "$(seal_file)" ] || fail "$1: a seal was written after damage was found"
}

# 1. damage past group 0's last inode in use; the thread held back, so only
#    the commit's own check of group 0 can find it
fresh
damage 40
cp --sparse=always "$img" "$SCRATCH/before.img"
export RECON_BGCHECK_PAUSE_MS=60000
attach
mount_recon "$dev" "$mnt" "$(opts held)" || die "held: mount failed"
unset RECON_BGCHECK_PAUSE_MS
wfsync "$mnt/new" &&
	fail "held: a file was created on an image whose group 0 holds a damaged free inode"
grep -q "base check (before a commit): group 0: INV_FREE_INODE_FORM: inode 40" "$RECON_LOG" ||
	fail "held: the damage not named before the commit: $(head -5 "$RECON_LOG")"
wfsync "$mnt/again" && fail "held: a later create went through"
expect_untouched held

# 2. damage in the last group: found by the thread, then no commit goes through
fresh
n=$(groups)
far=$(( (n - 1) * $(ipg) + 9 ))
damage $far
attach
mount_recon "$dev" "$mnt" "$(opts far)" || die "far: mount failed"
wait_log "base check (background): group $((n - 1)): INV_FREE_INODE_FORM: inode $far" 10 ||
	fail "far: the background check did not name the damage: $(head -5 "$RECON_LOG")"
cp --sparse=always "$img" "$SCRATCH/before.img"
wfsync "$mnt/new" && fail "far: a create went through after the damage was found"
expect_untouched far

# 3. no damage: the check completes, the clean unmount seals
fresh
n=$(groups)
attach
mount_recon "$dev" "$mnt" "$(opts clean)" || die "clean: mount failed"
(cd "$mnt" && mkdir d && echo a >d/f && sync -f .) || fail "clean: writes failed"
sleep 1   # 16 groups take milliseconds; the stats at unmount say whether it finished
umount_recon "$mnt"
detach
deferred=$(stat_of "$SCRATCH/clean.json" base_check_groups_deferred)
bg=$(stat_of "$SCRATCH/clean.json" base_check_groups_background_done)
cm=$(stat_of "$SCRATCH/clean.json" base_check_groups_commit_done)
check "clean: every group deferred ($deferred of $n)" [ "$deferred" -eq "$n" ]
check "clean: every deferred group checked ($bg + $cm)" [ $((bg + cm)) -eq "$deferred" ]
check "clean: none left" [ "$(stat_of "$SCRATCH/clean.json" base_check_groups_unchecked)" -eq 0 ]
check "clean: empty groups' bitmaps left to the thread" \
	[ "$(stat_of "$SCRATCH/clean.json" base_check_groups_bitmaps_deferred)" -gt 0 ]
[ -n "$(seal_file)" ] || fail "clean: no seal after a completed check and a clean unmount"
fsck_clean "$img" "after the background check"

# 4. unmount while the thread is held back: it stops at once, no seal
fresh
export RECON_BGCHECK_PAUSE_MS=60000
attach
mount_recon "$dev" "$mnt" "$(opts early)" || die "early: mount failed"
unset RECON_BGCHECK_PAUSE_MS
echo a >"$mnt/a" || fail "early: a write failed"
t0=$(date +%s%N)
umount_recon "$mnt"
detach
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
# generous for a loaded machine: the held thread would take 60 s
check "early: the unmount did not wait for the background check (${ms} ms)" [ "$ms" -lt $((20000 * TMUL)) ]
check "early: groups left unchecked" [ "$(stat_of "$SCRATCH/early.json" base_check_groups_unchecked)" -gt 0 ]
[ -z "$(seal_file)" ] || fail "early: a seal was written with groups unchecked"
fsck_clean "$img" "after an early unmount"

# 5. group 3 (empty: its bitmaps unread at mount) with a block marked in use
#    that nothing owns; the thread held back.  A file larger than group 2's
#    free space spills into group 3: its data write or its commit checks
#    group 3 first
fresh
bitmap_stray Block 3 200
cp --sparse=always "$img" "$SCRATCH/before.img"
export RECON_BGCHECK_PAUSE_MS=60000
attach
mount_recon "$dev" "$mnt" "seal_dir=none,stats=$SCRATCH/stray.json" || die "stray: mount failed"
unset RECON_BGCHECK_PAUSE_MS
dd if=/dev/zero of="$mnt/big" bs=1M count=9 conv=fsync status=none 2>/dev/null &&
	fail "stray: a file was written into a group whose block bitmap was never verified"
grep -q "base check (before a [a-z ]*): group 3: INV_BGD_FREE_BLOCKS" "$RECON_LOG" ||
	fail "stray: the damage not named before the write: $(head -5 "$RECON_LOG")"
wfsync "$mnt/again" && fail "stray: a later create went through"
umount_recon "$mnt" 3
detach
changed=$(changed_blocks "$SCRATCH/before.img" "$img")
[ -z "$changed" ] || fail "stray: a write reached the disk after the mount (blocks $changed)"

# 6. a stray inode bit in group 13's inode bitmap: found by the thread
fresh
bitmap_stray Inode 13 7
cp --sparse=always "$img" "$SCRATCH/before.img"
attach
mount_recon "$dev" "$mnt" "seal_dir=none" || die "istray: mount failed"
wait_log "base check (background): group 13: INV_BGD_FREE_INODES" 10 ||
	fail "istray: the background check did not name the damage: $(head -5 "$RECON_LOG")"
wfsync "$mnt/new" && fail "istray: a create went through after the damage was found"
umount_recon "$mnt" 3
detach
changed=$(changed_blocks "$SCRATCH/before.img" "$img")
[ -z "$changed" ] || fail "istray: a write reached the disk after the mount (blocks $changed)"
finish
