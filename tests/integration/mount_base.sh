#!/bin/bash
# The checker's base case, checked at mount rather than assumed: images
# edited one field or one bitmap at a time, each with what the mount must do.
#  1. a damaged superblock or descriptor (s_first_data_block 1 -> 1000 on a
#     1 KiB-block image used to overflow a buffer in libext2fs): refused,
#     rw and ro, exit 1 with a message naming the field;
#  2. group 0's block bitmap zeroed (a 300 KB file used to land on the
#     superblock): read-only, the image untouched;
#  3. a live inode clear in the inode bitmap (a new file used to take it over
#     and the old name led to the new file): read-only with a message; with
#     -o rw_unchecked the create fails with EIO and the old file is intact;
#  4. an image the kernel's ext3 left with needs_recovery and stale
#     superblock free counts (the first commit used to be rejected): written;
#  5. orphan lists linking to a reserved inode, or looping (inode 1 used to
#     be freed; a loop freed an inode twice): read-only with the list named;
#     with -o rw_unchecked nothing wrong freed, e2fsck clean.  A head naming
#     a reserved inode or one past the end is a list e2fsck -n and the kernel
#     drop unread: mounted read-write, the list dropped, nothing freed;
#  6. a block marked in use that nothing owns: read-only with the invariant
#     and e2fsck named; -o rw_unchecked mounts read-write;
#  7. the superblock overwritten on disk under the daemon, then a rejected
#     commit: going read-only re-read it and took its garbage geometry
#     (SIGSEGV); it must keep the mounted one and say so;
#  8. bg_itable_unused and UNINIT flags on ext3: cleared at mount, so files
#     created past the "unused" mark leave e2fsck clean.
. "$(dirname "$0")/lib.sh"
need_root
mnt="$SCRATCH/mnt"
img="$SCRATCH/b.img"
printf 'hello\n' >"$SCRATCH/hello"

dbg() { debugfs -w -f - "$1" >/dev/null 2>&1; }   # commands on stdin

# refused WHAT WORD: the mount must fail with exit 1 (no signal) and say why ($2 a word of it)
refused() {
	local what=$1 word=$2 opts
	for opts in "" ro; do
		if mount_recon "$img" "$mnt" "$opts" 2>/dev/null; then
			fail "$what: mounted (opts '$opts')"
			umount_recon "$mnt"
			continue
		fi
		[ "$RECON_STATUS" -eq 1 ] || fail "$what (opts '$opts'): exit status $RECON_STATUS, want 1"
		grep -q -- "$word" "$RECON_LOG" || fail "$what (opts '$opts'): the message does not say '$word': $(head -3 "$RECON_LOG")"
		grep -q "e2fsck" "$RECON_LOG" || fail "$what (opts '$opts'): the message does not point to e2fsck"
	done
	log "$what: refused: $(head -1 "$RECON_LOG")"
}

# 1. superblock and descriptor geometry
geometry() {   # geometry WHAT WORD BLOCKSIZE DEBUGFS-COMMAND...
	local what=$1 word=$2 bs=$3; shift 3
	mkimg "$img" "$bs" 32M
	printf '%s\n' "$@" | dbg "$img"
	refused "$what" "$word"
}
geometry "s_first_data_block 1000" s_first_data_block 1024 "ssv first_data_block 1000"
geometry "s_first_data_block 1 with 4 KiB blocks" s_first_data_block 4096 "ssv first_data_block 1"
geometry "s_blocks_per_group 0x10000" superblock 1024 "ssv blocks_per_group 65536"
geometry "s_inodes_per_group 3" superblock 1024 "ssv inodes_per_group 3"
geometry "s_inode_size 100" superblock 4096 "ssv inode_size 100"
geometry "s_first_ino 3" s_first_ino 4096 "ssv first_ino 3"
geometry "s_blocks_count past the device" "exceeds the device" 4096 "ssv blocks_count 9000"
geometry "s_reserved_gdt_blocks 5000" s_reserved_gdt_blocks 1024 "ssv reserved_gdt_blocks 5000"
geometry "group 1's block bitmap in group 0" "group 1: block bitmap" 1024 "set_bg 1 block_bitmap 300"
geometry "group 0's inode table on the descriptors" "inode table" 1024 "set_bg 0 inode_table 2"
# flex_bg: tables may lie in any group, so overlaps are sought across the
# whole disk; the message names what e2fsck names, the first table in group
# order that meets something already placed
geometry_flex() {   # geometry_flex WHAT WORD DEBUGFS-COMMAND... (BB1: group 1's block bitmap)
	local what=$1 word=$2 bb1; shift 2
	mkimg "$img" 1024 32M -O flex_bg
	bb1=$(dumpe2fs "$img" 2>/dev/null | sed -n 's/.*Block bitmap at \([0-9]*\).*/\1/p' | sed -n 2p)
	[ -n "$bb1" ] || fail "$what: no bitmap location from dumpe2fs"
	printf '%s\n' "$@" | sed "s/BB1/$bb1/" | dbg "$img"
	refused "$what" "$word"
}
geometry_flex "flex_bg: group 2's block bitmap on group 1's" "block bitmap" "set_bg 2 block_bitmap BB1"
geometry_flex "flex_bg: group 3's inode bitmap in group 1's inode table" "inode bitmap" \
	"set_bg 1 inode_table 19990" "set_bg 3 inode_bitmap 20000"
# group 3's table is placed after group 1's bitmap: e2fsck names the table
geometry_flex "flex_bg: group 3's inode table over group 1's block bitmap" "inode table" \
	"set_bg 1 block_bitmap 20000" "set_bg 3 inode_table 19990"
geometry_flex "flex_bg: group 3's inode table on the descriptors" "inode table" "set_bg 3 inode_table 3"

# 2. group 0's block bitmap zeroed
mkimg "$img" 1024 32M
bb=$(dumpe2fs "$img" 2>/dev/null | sed -n 's/.*Block bitmap at \([0-9]*\).*/\1/p' | head -1)
dd if=/dev/zero of="$img" bs=1024 seek="$bb" count=1 conv=notrunc status=none
cp "$img" "$SCRATCH/before.img"
if mount_recon "$img" "$mnt" ""; then
	head -c 300000 /dev/urandom >"$mnt/f" 2>/dev/null && fail "zeroed bitmap: a 300 KB file was written"
	grep -q "does not mark block" "$RECON_LOG" || fail "zeroed bitmap: no message: $(head -3 "$RECON_LOG")"
	umount_recon "$mnt"
	cmp -s "$img" "$SCRATCH/before.img" || fail "zeroed bitmap: the image changed"
else
	fail "zeroed bitmap: refused (want a read-only mount)"
fi
if mount_recon "$img" "$mnt" rw_unchecked; then
	touch "$mnt/g" 2>/dev/null && fail "zeroed bitmap: writable with -o rw_unchecked"
	umount_recon "$mnt"
fi

# 3. a live inode free in the inode bitmap (group counts kept right, so that
# is the only damage)
mkimg "$img" 4096 16M
dbg "$img" <<EOF
write $SCRATCH/hello a
write $SCRATCH/hello hidden
unlink hidden
EOF
fi0=$(dumpe2fs "$img" 2>/dev/null | sed -n 's/.* \([0-9]*\) free inodes.*/\1/p' | head -1)
fis=$(dumpe2fs -h "$img" 2>/dev/null | sed -n 's/^Free inodes: *//p')
# 'hidden' (13) keeps its link count and block: clear its bit only, so it is
# invisible to every directory but looks in use; 'a' (12) likewise, named by '/'
dbg "$img" <<EOF
freei <12>
freei <13>
set_bg 0 free_inodes_count $((fi0 + 2))
ssv free_inodes_count $((fis + 2))
EOF
cp "$img" "$SCRATCH/before.img"
if mount_recon "$img" "$mnt" ""; then
	echo new >"$mnt/b" 2>/dev/null && fail "live inode free in the bitmap: a file was created"
	grep -q "INV_FREE_INODE_FORM" "$RECON_LOG" || fail "live inode free in the bitmap: not named: $(head -4 "$RECON_LOG")"
	grep -q "e2fsck" "$RECON_LOG" || fail "live inode free in the bitmap: e2fsck not named"
	umount_recon "$mnt"
	cmp -s "$img" "$SCRATCH/before.img" || fail "live inode free in the bitmap: the image changed under a read-only mount"
else
	fail "live inode free in the bitmap: refused (want a read-only mount)"
fi
if mount_recon "$img" "$mnt" rw_unchecked; then
	err=$( (echo new >"$mnt/b") 2>&1 ) && fail "rw_unchecked: the create took a live inode"
	case $err in *"Input/output error"*) ;; *) fail "rw_unchecked: the create failed with '$err', want EIO" ;; esac
	[ "$(cat "$mnt/a" 2>/dev/null)" = hello ] || fail "rw_unchecked: the old file a no longer reads hello"
	grep -q "free in the inode bitmap but in use" "$RECON_LOG" || fail "rw_unchecked: no message for the refused inode"
	# reading 'a' set its atime: the checker refuses a change to an inode the
	# bitmap calls free, so the mount ends with its work discarded (status 3)
	umount_recon "$mnt" 3
else
	fail "-o rw_unchecked refused"
fi

# 4. the kernel's ext3 after a power cut: needs_recovery, free counts stale
if have_kernel_ext3; then
	mkimg "$img" 4096 64M
	kmount "$img" "$SCRATCH/kmnt" || die "kernel mount"
	python3 - "$SCRATCH/kmnt" <<'EOF' || fail "writes on the kernel's ext3"
import os, sys
for i in range(20):
    with open(os.path.join(sys.argv[1], "k%d" % i), "wb") as f:
        f.write(os.urandom(50000)); f.flush(); os.fsync(f.fileno())
EOF
	cp --sparse=always "$img" "$SCRATCH/cut.img"     # the disk as a power cut leaves it
	kumount "$SCRATCH/kmnt"
	dumpe2fs -h "$SCRATCH/cut.img" 2>/dev/null | grep -q needs_recovery || fail "power cut image: no needs_recovery"
	cp "$SCRATCH/cut.img" "$SCRATCH/cut-fsck.img"
	fsck_clean "$SCRATCH/cut-fsck.img" "the power cut image" || true
	if mount_recon "$SCRATCH/cut.img" "$mnt" ""; then
		python3 - "$mnt" <<'EOF' || fail "power cut image: write and fsync after recovery"
import os, sys
with open(os.path.join(sys.argv[1], "after"), "wb") as f:
    f.write(b"y" * 10000); f.flush(); os.fsync(f.fileno())
EOF
		[ "$(ls "$mnt" | grep -c '^k')" = 20 ] || fail "power cut image: the kernel's fsynced files are not all there"
		umount_recon "$mnt"
		[ "$(debugfs -R 'cat /after' "$SCRATCH/cut.img" 2>/dev/null | wc -c)" = 10000 ] ||
			fail "power cut image: the fsynced file is not on disk"
		fsck_clean "$SCRATCH/cut.img" "power cut image after recon-fuse"
	else
		fail "power cut image: not mounted"
	fi
else
	log "no kernel ext3 driver: the power cut image is not tested"
fi

# 5. orphan lists: the base check names the broken list (read-only, nothing
# written); with -o rw_unchecked the processing follows it only through
# inodes that can be orphans, freeing what those are and nothing else
orphans() {   # orphans WHAT MESSAGE DEBUGFS-COMMAND...
	local what=$1 msg=$2; shift 2
	mkimg "$img" 4096 16M
	{ printf 'write %s x\nwrite %s y\n' "$SCRATCH/hello" "$SCRATCH/hello"; printf '%s\n' "$@"; } | dbg "$img"
	cp "$img" "$SCRATCH/before.img"
	if mount_recon "$img" "$mnt" ""; then
		touch "$mnt/new" 2>/dev/null && fail "$what: mounted writable"
		umount_recon "$mnt"
		grep -q "INV_ORPHAN_LIST" "$RECON_LOG" || fail "$what: the list is not named: $(head -3 "$RECON_LOG")"
		cmp -s "$img" "$SCRATCH/before.img" || fail "$what: the image changed"
	else
		fail "$what: not mounted"
	fi
	if mount_recon "$img" "$mnt" rw_unchecked; then
		umount_recon "$mnt"
	else
		fail "$what: not mounted with -o rw_unchecked"
		return
	fi
	grep -q -- "$msg" "$RECON_LOG" || fail "$what: no message saying '$msg': $(head -3 "$RECON_LOG")"
	for i in 1 7; do
		debugfs -R "testi <$i>" "$img" 2>/dev/null | grep -q "marked in use" || fail "$what: inode $i was freed"
	done
	fsck_clean "$img" "$what"
	log "$what: $(grep -m1 orphan "$RECON_LOG")"
}
# bad_head WHAT MESSAGE DEBUGFS-COMMAND...: read-write, the list dropped with MESSAGE
bad_head() {
	local what=$1 msg=$2; shift 2
	mkimg "$img" 4096 16M
	{ printf 'write %s x\n' "$SCRATCH/hello"; printf '%s\n' "$@"; } | dbg "$img"
	if mount_recon "$img" "$mnt" ""; then
		echo more >"$mnt/new" || fail "$what: not writable"
		umount_recon "$mnt"
	else
		fail "$what: not mounted"
		return
	fi
	grep -q -- "$msg" "$RECON_LOG" || fail "$what: no message saying '$msg': $(head -3 "$RECON_LOG")"
	for i in 1 7; do
		debugfs -R "testi <$i>" "$img" 2>/dev/null | grep -q "marked in use" || fail "$what: inode $i was freed"
	done
	[ "$(debugfs -R 'cat /x' "$img" 2>/dev/null)" = hello ] || fail "$what: x no longer reads hello"
	fsck_clean "$img" "$what"
	log "$what: $(grep -m1 orphan "$RECON_LOG")"
}
bad_head "s_last_orphan 1" "inode 1 is reserved" "ssv last_orphan 1"
bad_head "s_last_orphan past the inode count" "inode 5000000 is reserved or beyond" "ssv last_orphan 5000000"
orphans "orphan 12 linking to reserved inode 7" "links to 7" "unlink x" "sif <12> links_count 0" \
	"sif <12> dtime 7" "ssv last_orphan 12"
orphans "orphan loop 12 -> 13 -> 12" "the list loops" "unlink x" "unlink y" "sif <12> links_count 0" \
	"sif <13> links_count 0" "sif <12> dtime 13" "sif <13> dtime 12" "ssv last_orphan 12"

# 6. a block marked in use that nothing owns
mkimg "$img" 4096 16M
fb0=$(dumpe2fs "$img" 2>/dev/null | sed -n 's/.* \([0-9]*\) free blocks,.*/\1/p' | head -1)
fbs=$(dumpe2fs -h "$img" 2>/dev/null | sed -n 's/^Free blocks: *//p')
dbg "$img" <<EOF
setb 3000
set_bg 0 free_blocks_count $((fb0 - 1))
ssv free_blocks_count $((fbs - 1))
EOF
if mount_recon "$img" "$mnt" ""; then
	touch "$mnt/x" 2>/dev/null && fail "unowned block: mounted writable"
	grep -q "INV_BBITMAP_SET.*3000" "$RECON_LOG" || fail "unowned block: not named: $(head -4 "$RECON_LOG")"
	grep -q "rw_unchecked" "$RECON_LOG" || fail "unowned block: the message does not name -o rw_unchecked"
	umount_recon "$mnt"
else
	fail "unowned block: refused (want a read-only mount)"
fi
if mount_recon "$img" "$mnt" rw_unchecked; then
	echo data >"$mnt/x" || fail "-o rw_unchecked: not writable"
	umount_recon "$mnt"
else
	fail "-o rw_unchecked refused"
fi

# 7. garbage superblock re-read after a rejection (no cache: reads reach the disk;
#    the rejection is the flipped bitmap bit of the fsynced write)
mkimg "$img" 1024 16M
if mount_recon "$img" "$mnt" "block_cache_mb=0,fault_corrupt=bbitmap@1"; then
	head -c 1024 /dev/urandom | dd of="$img" bs=1024 seek=1 conv=notrunc status=none
	python3 - "$mnt" <<'EOF' 2>/dev/null && fail "garbage superblock: the fsync after it succeeded"
import os, sys
with open(os.path.join(sys.argv[1], "x"), "wb") as f:
    f.write(b"x"); f.flush(); os.fsync(f.fileno())
EOF
	ls "$mnt" >/dev/null 2>&1 || fail "garbage superblock: the mount no longer answers"
	umount_recon "$mnt" 3
	grep -q "no longer describes" "$RECON_LOG" || fail "garbage superblock: no message: $(grep -v INV_ "$RECON_LOG" | head -3)"
else
	fail "garbage superblock: not mounted"
fi

# 8. ext4's bg_itable_unused on ext3 (the kernel ignores it; e2fsck calls an
#    inode past it unused): cleared in the first commit, so the files created
#    in that range do not make e2fsck's verdict worse
mkimg "$img" 1024 16M
dbg "$img" <<EOF
set_bg 0 itable_unused 2000
set_bg 1 flags 1
EOF
if mount_recon "$img" "$mnt" ""; then
	for i in $(seq 1 60); do echo "$i" >"$mnt/f$i" || { fail "itable_unused: create f$i"; break; }; done
	umount_recon "$mnt"
	fsck_clean "$img" "the image with bg_itable_unused set, after 60 creates"
else
	fail "itable_unused: not mounted: $(head -3 "$RECON_LOG")"
fi

finish
