#!/bin/bash
# Differential runs: one seeded single-process fsx sequence and one
# single-process nsstress sequence, each on the kernel's ext3 and on
# recon-fuse (1 KiB and 4 KiB blocks), every outcome recorded (return value,
# errno, bytes read, stat size/blocks/nlink/mode, directory listings) and the
# two logs compared by outcome_diff.py (its accepted differences carry their
# reasons).  fsx leaves out fallocate mode 0: recon-fuse allocates where the
# kernel refuses block-mapped files (posix_diff.py's first accepted
# difference), and the sizes it sets would make the runs diverge.
# With the argument ext4: mkfs.ext4's defaults against the kernel's ext4,
# fallocate included (both allocate on extent-mapped files), and each
# driver then mounts what the other wrote: the kernel's ext4 reads
# recon-fuse's nsstress tree and recon-fuse (ro) the kernel's, both verified
# by nsstress -V.  DIFF_SEEDS, DIFF_OPS, DIFF_BS (block sizes) and DIFF_TOOLS
# (fsx, ns) override.
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/lib_explore.sh"
need_root
explore_fs "${1:-}"
SEEDS=${DIFF_SEEDS:-"7"}
OPS=${DIFF_OPS:-2000}
falloc=(-x falloc)
[ "$EXPLORE_FS" = ext4 ] && falloc=()
# cross_verify IMG SIDE: the other driver mounts what SIDE left and
# verifies the nsstress tree (ext4 only).
cross_verify() {
	local img=$1 side=$2
	[ "$EXPLORE_FS" = ext4 ] || return 0
	if [ "$side" = recon ]; then
		mkdir -p "$SCRATCH/kmnt"
		if mount -t ext4 -o ro,loop "$img" "$SCRATCH/kmnt"; then
			MOUNTS+=("$SCRATCH/kmnt")
			"$NSSTRESS" -V "$SCRATCH/kmnt" >/dev/null || fail "$what: the kernel sees another tree than recon-fuse left"
			umount "$SCRATCH/kmnt"
		else
			fail "$what: the kernel's ext4 does not mount what recon-fuse left"
		fi
	elif mount_recon "$img" "$SCRATCH/mnt" ro; then
		"$NSSTRESS" -V "$SCRATCH/mnt" >/dev/null || fail "$what: recon-fuse sees another tree than the kernel left"
		umount_recon "$SCRATCH/mnt"
	else
		fail "$what: recon-fuse does not mount what the kernel left"
	fi
}
for bs in ${DIFF_BS:-1024 4096}; do
	if [ "$bs" = 1024 ]; then len=80m; else len=4200m; fi
	for seed in $SEEDS; do
		for tool in ${DIFF_TOOLS:-fsx ns}; do
			for side in kernel recon; do
				img="$SCRATCH/diff-$bs.img" out="$SCRATCH/$tool-$bs-$seed.$side"
				explore_mkimg "$img" "$bs" 1G
				if [ $tool = fsx ]; then
					cmd=("$FSX" -q -S "$seed" -N "$OPS" -l "$len" -b "$bs" "${falloc[@]}" -O "$out")
				else
					cmd=("$NSSTRESS" -S "$seed" -p 1 -N "$OPS" -O "$out")
				fi
				what="$tool seed $seed bs $bs"
				if [ $side = kernel ]; then
					kernel_run "$img" "$what" "${cmd[@]}" "$SCRATCH/kmnt"
				else
					recon_run "$img" "$what" "${cmd[@]}" "$SCRATCH/mnt"
				fi
				[ $tool = ns ] && cross_verify "$img" $side
			done
			log "$tool seed $seed bs $bs: kernel vs recon-fuse"
			check "$tool seed $seed bs $bs: outcomes differ" python3 "$RECON_SRC/tests/explore/outcome_diff.py" \
				$tool "$SCRATCH/$tool-$bs-$seed.kernel" "$SCRATCH/$tool-$bs-$seed.recon" "$EXPLORE_FS"
		done
	done
done
finish
