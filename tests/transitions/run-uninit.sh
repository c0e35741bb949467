#!/bin/bash
# Kernel ext4, and recon-fuse, in uninitialised groups against recon-check:
# images with many groups, most of them BLOCK_UNINIT and INODE_UNINIT, on a
# disk that reads as zeros (sparse) or holds old random bytes (mke2fs -E
# nodiscard), with and without lazy inode table init, and with
# bg_itable_unused 0 in INODE_UNINIT groups.  Each step is one
# mount: the kernel's lazy init thread zeroing tables (ITABLE_ZEROED);
# directories spread over the groups (Orlov) with a file each; a thousand
# and more files filling groups' inodes; preallocated files taking blocks
# in block-uninit groups; removals and re-creations; and recon-fuse's own
# (libext2fs) directories, files and writes in the groups left.  Every
# (before, after) pair must be approved, every after-image scan clean and
# e2fsck -fn clean (and recon-fuse's own checker approve each commit).
# The kernel initialises a group's bitmap as it clears BLOCK_UNINIT; under
# flex_bg a group without a backup superblock initialises to all zeros, so
# on a sparse disk the block does not change: no write of it in the pair.
# usage: run-uninit.sh   (env RECON_FUSE, RECON_CHECK, RECON_SRC, via meson test)
. "$RECON_SRC/tests/integration/lib.sh"
need_root
: "${RECON_CHECK:?run through meson test}"
command -v fallocate >/dev/null || skip "no fallocate (util-linux)"
need_kernel_ext4
kmnt="$SCRATCH/k" rmnt="$SCRATCH/r"
mkdir -p "$kmnt" "$rmnt"
pairs=0

# step IMG WHAT DRIVER OPTS SCRIPT: one mount by DRIVER (kernel or recon)
# running SCRIPT (bash, in the mount point), then the pair judged
step() {
	local img=$1 what=$2 driver=$3 opts=$4 script=$5 loop out
	cp --sparse=always "$img" "$SCRATCH/prev.img"
	if [ "$driver" = kernel ]; then
		loop=$(loop_attach "$img") || die "losetup"
		mount -t ext4 ${opts:+-o "$opts"} "$loop" "$kmnt" || die "$what: kernel mount"
		(cd "$kmnt" && bash -c "$script") || fail "$what: the step's commands failed"
		umount "$kmnt" || die "$what: kernel unmount"
		losetup -d "$loop"
	else
		mount_recon "$img" "$rmnt" "$opts" || { fail "$what: recon-fuse mount"; return; }
		(cd "$rmnt" && bash -c "$script") || fail "$what: the step's commands failed"
		umount_recon "$rmnt" || fail "$what: recon-fuse unmount"
	fi
	pairs=$((pairs + 1))
	if ! out=$("$RECON_CHECK" "$SCRATCH/prev.img" "$img" 2>&1); then
		fail "$what: a transition is rejected:"; echo "$out" | head -8
	fi
	"$RECON_CHECK" --scan "$img" >"$SCRATCH/scan.out" 2>&1 ||
		{ fail "$what: the after-image does not scan clean"; head -5 "$SCRATCH/scan.out"; }
	e2fsck -fn "$img" >/dev/null 2>&1 || fail "$what: e2fsck -fn is not clean after the step"
}

# lazy_init_done IMG: no group left without ITABLE_ZEROED
lazy_init_done() {
	! dumpe2fs "$1" 2>/dev/null | grep '^Group [0-9]' | grep -qv ITABLE_ZEROED
}

# format: NAME SIZE DISK MKE2FS-ARGS (DISK: sparse or random)
formats=(
	"4k-debian 1G sparse -b 4096"
	"4k-small-groups 256M random -b 4096 -g 4096 -E nodiscard,lazy_itable_init=1"
	"1k 256M sparse -b 1024 -N 8192"
	"1k-lazy 128M random -b 1024 -E nodiscard,lazy_itable_init=1"
	"1k-uninit_bg 128M random -b 1024 -O ^metadata_csum,uninit_bg -E nodiscard,lazy_itable_init=1"
	"1k-unused-0 128M sparse -b 1024"
)
for f in "${formats[@]}"; do
	read -r name size disk args <<<"$f"
	img="$SCRATCH/$name.img"
	rm -f "$img"
	if [ "$disk" = random ]; then
		head -c "$(numfmt --from=iec "$size")" /dev/urandom >"$img"
	else
		truncate -s "$size" "$img"
	fi
	# shellcheck disable=SC2086
	mke2fs -F -q -t ext4 $args "$img" >"$SCRATCH/mkfs.out" 2>&1 ||
		{ fail "$name: mke2fs $args: $(head -1 "$SCRATCH/mkfs.out")"; continue; }
	if [ "$name" = 1k-unused-0 ]; then
		# bg_itable_unused 0 under INODE_UNINIT, which e2fsck accepts: the
		# kernel sets it afresh as it takes the group's first inode
		dumpe2fs "$img" 2>/dev/null | awk '/^Group [0-9]+:.*INODE_UNINIT/ {
			g = $2; sub(":", "", g); print "set_bg " g " itable_unused 0"; print "set_bg " g " checksum calc" }' \
			>"$SCRATCH/cmds"
		debugfs -w -f "$SCRATCH/cmds" "$img" >/dev/null 2>&1 || fail "$name: debugfs"
		e2fsck -fn "$img" >/dev/null 2>&1 || fail "$name: e2fsck -fn is not clean before the kernel"
	fi
	uninit=$(dumpe2fs "$img" 2>/dev/null | grep -c 'BLOCK_UNINIT')
	[ "$uninit" -ge 3 ] || fail "$name: only $uninit BLOCK_UNINIT groups: the test needs more"
	"$RECON_CHECK" --scan "$img" >"$SCRATCH/scan.out" 2>&1 ||
		{ fail "$name: the fresh image does not scan clean"; head -5 "$SCRATCH/scan.out"; }
	if ! lazy_init_done "$img"; then
		# the lazy init thread zeroes the tables, one group per wake-up
		step "$img" "$name lazy init" kernel init_itable=0 'sleep 6'
		lazy_init_done "$img" || log "$name: lazy init left some tables for later"
	fi
	step "$img" "$name spread dirs" kernel "" \
		'for i in $(seq 1 48); do mkdir d$i && echo x >d$i/f; done'
	step "$img" "$name recon-fuse dirs" recon "" \
		'for i in $(seq 1 48); do mkdir e$i && echo x >e$i/f; done'
	step "$img" "$name fill a group" kernel "" \
		'mkdir many && for i in $(seq 1 2500); do : >many/f$i; done'
	step "$img" "$name recon-fuse fill" recon "" \
		'mkdir rmany && for i in $(seq 1 1500); do : >rmany/f$i; done'
	step "$img" "$name preallocate" kernel "" \
		'for i in $(seq 1 48); do fallocate -l 1M d$i/p || exit 1; done'
	step "$img" "$name recon-fuse writes" recon "" \
		'for i in $(seq 1 48); do head -c 300000 /dev/zero >e$i/w || exit 1; done'
	step "$img" "$name nested dirs" kernel "" \
		'for i in $(seq 1 24); do mkdir -p n$i/a/b && head -c 70000 /dev/urandom >n$i/a/b/z; done'
	step "$img" "$name remove and redo" kernel "" \
		'rm -rf many d1* d2* && for i in $(seq 1 30); do mkdir r$i && fallocate -l 1M r$i/p; done'
	rm -f "$img"
done
[ "$pairs" -gt 0 ] || skip "no ext4 image could be made"
log "$pairs kernel and recon-fuse transitions in uninitialised groups judged"
finish
