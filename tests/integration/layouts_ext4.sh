#!/bin/bash
# Descriptor and superblock-copy layouts other than the classic one, served
# read-write with the checker on: meta_bg (each metagroup's descriptor block
# in its first group, copies in its second and last) on ext4 at 1 KiB and
# 4 KiB blocks (and with s_first_meta_bg 1) and on ext3, sparse_super2
# (superblock copies only in the groups s_backup_bgs names; num_backup_sb 0,
# 1 and 2; also with meta_bg), and a 64bit ext4
# past 16 TiB (on a tmpfs: the host's ext4 caps files at 16 TiB), as mkfs
# makes it (no meta_bg, no resize_inode) and with meta_bg.  On each: files
# written, a large allocation spanning several metagroups (fallocate on
# ext4, written data on ext3) released again, then: the daemon exits 0
# with commits checked, e2fsck -fn is clean, recon-check --scan is clean,
# and the files read back (debugfs).
. "$(dirname "$0")/lib.sh"
need_root
command -v debugfs >/dev/null || skip "no debugfs"
mnt="$SCRATCH/mnt"
mkdir -p "$mnt"

# one_layout NAME SIZE BIGMIB MKFS-ARGS...: the scenario on a fresh image
# (PREP: debugfs commands for what mke2fs cannot make, e2fsck -fy after)
one_layout() {
	local name=$1 size=$2 big=$3; shift 3
	local img=$dir/$name.img stats="$SCRATCH/$name.json" failed=$FAILURES
	rm -f "$img"
	truncate -s "$size" "$img" || { fail "$name: truncate $size"; return; }
	if ! mke2fs -F -q -E lazy_itable_init=1,lazy_journal_init=1 "$@" "$img" >"$SCRATCH/mke2fs.out" 2>&1; then
		fail "$name: mke2fs $*: $(head -2 "$SCRATCH/mke2fs.out")"
		return
	fi
	if [ -n "${PREP:-}" ]; then
		debugfs -w -R "$PREP" "$img" >/dev/null 2>&1 || { fail "$name: debugfs $PREP"; return; }
		e2fsck -fy "$img" >/dev/null 2>&1
		[ $? -le 1 ] || { fail "$name: e2fsck -fy after $PREP"; return; }
	fi
	mount_recon "$img" "$mnt" "stats=$stats" || { fail "$name: not mounted read-write"; return; }
	local i
	for i in 1 2 3 4 5 6; do
		mkdir -p "$mnt/d$i" && head -c $((i * 70000)) "$SCRATCH/src" >"$mnt/d$i/f" ||
			fail "$name: writing d$i/f"
	done
	if [ "$name" = "${name#ext3}" ]; then
		fallocate -l "${big}M" "$mnt/big" || fail "$name: fallocate ${big} MiB"
	else
		dd if=/dev/zero of="$mnt/big" bs=1M count="$big" status=none || fail "$name: writing ${big} MiB"
	fi
	sync
	rm -f "$mnt/big" "$mnt/d2/f"
	umount_recon "$mnt" || return
	local checked
	checked=$(stat_of "$stats" blocks_checked 2>/dev/null)
	[ "${checked:-0}" -gt 0 ] || fail "$name: no block checked (blocks_checked ${checked:-none})"
	fsck_clean "$img" "$name" || return
	local out rc=0
	out=$("$RECON_CHECK" --scan "$img" 2>&1) || rc=$?
	[ "$rc" -eq 0 ] || fail "$name: recon-check --scan exit $rc: $(echo "$out" | head -3)"
	for i in 1 3 6; do
		debugfs -R "cat /d$i/f" "$img" 2>/dev/null | cmp -s - <(head -c $((i * 70000)) "$SCRATCH/src") ||
			fail "$name: d$i/f does not read back"
	done
	debugfs -R "stat /d2/f" "$img" 2>&1 | grep -q "not found" || fail "$name: d2/f still there"
	[ "$FAILURES" -eq "$failed" ] && log "$name: $checked blocks checked, e2fsck and recon-check clean"
	rm -f "$img"
}

# has_feature IMG FEATURE
has_feature() { dumpe2fs -h "$1" 2>/dev/null | grep -q "features:.* $2\( \|$\)"; }

head -c 500000 /dev/urandom >"$SCRATCH/src"
dir=$SCRATCH
# metagroups: 1 KiB blocks, 64-byte descriptors: 16 groups (128 MiB); with
# -g 1024 at 4 KiB: 64 groups of 4 MiB; ext3 at -g 1024: 32 groups of 1 MiB
one_layout ext4-meta_bg-1k 2G 1200 -t ext4 -b 1024 -O meta_bg,^resize_inode
one_layout ext4-meta_bg-4k 2G 1200 -t ext4 -b 4096 -g 1024 -O meta_bg,^resize_inode
# as an online resize leaves it: descriptor block 0 in the classic layout
PREP="ssv first_meta_bg 1" one_layout ext4-first_meta_bg-1 512M 400 -t ext4 -b 1024 -g 1024 -O meta_bg,^resize_inode
one_layout ext3-meta_bg-1k 512M 100 -t ext3 -b 1024 -g 1024 -O meta_bg,^resize_inode
# LAYOUTS_ALL=1 adds four more (CI leaves them: the others cover their rules)
[ "${LAYOUTS_ALL:-0}" = 1 ] &&
	one_layout ext3-meta_bg-4k 1G 200 -t ext3 -b 4096 -g 256 -O meta_bg,^resize_inode
for n in 0 1 2; do
	[ "$n" = 1 ] && [ "${LAYOUTS_ALL:-0}" != 1 ] && continue
	one_layout "ext4-sparse_super2-$n" 1G 900 -t ext4 -b 1024 -O sparse_super2 -E num_backup_sb=$n
done
[ "${LAYOUTS_ALL:-0}" = 1 ] &&
	one_layout ext3-sparse_super2-1k 512M 100 -t ext3 -b 1024 -O sparse_super2
one_layout ext3-sparse_super2-meta_bg-4k 1G 100 -t ext3 -b 4096 -g 1024 -O sparse_super2,meta_bg,^resize_inode

# past 16 TiB: 4 KiB blocks, 128 MiB groups, 64 per metagroup (8 GiB)
dir="$SCRATCH/tmpfs"
mkdir -p "$dir"
if mount -t tmpfs -o size=2G recon-layouts "$dir"; then
	MOUNTS+=("$dir")
	truncate -s 17T "$dir/probe.img" && mkfs.ext4 -F -q -E lazy_itable_init=1,lazy_journal_init=1 "$dir/probe.img" &&
		! has_feature "$dir/probe.img" meta_bg && ! has_feature "$dir/probe.img" resize_inode ||
		fail "mkfs.ext4 past 16 TiB: want 64bit without meta_bg and resize_inode"
	rm -f "$dir/probe.img"
	# the daemon's open reads every group's descriptor and bitmaps (8 s
	# at load 12 on two cores): the mount and unmount waits scale
	TMUL=$((TMUL * 6))
	one_layout ext4-17T 17T 10240 -t ext4
	# meta_bg's rules are the small images'; at this size with LAYOUTS_ALL=1
	[ "${LAYOUTS_ALL:-0}" = 1 ] && one_layout ext4-17T-meta_bg 17T 10240 -t ext4 -O meta_bg
	umount "$dir" || fail "umount $dir"
else
	log "no tmpfs: the images past 16 TiB are not tried"
fi
finish
