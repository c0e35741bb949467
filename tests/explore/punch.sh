#!/bin/bash
# PUNCH_HOLE inside the double- and triple-indirect ranges (fsx replays of
# tests/explore/regress/punch-*.log): short punches in a leaf indirect block
# that is not the first of its subtree must free exactly the punched blocks
# (libext2fs 1.47's ext2fs_punch freed to the end of the leaf).  Each log on
# 1 KiB and 4 KiB blocks, on recon-fuse and on the kernel's ext3.
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/lib_explore.sh"
need_root
have_kernel_ext3 || skip "no kernel ext3"
[ -x "$FSX" ] || die "fsx not built: $FSX"
for log in "$RECON_SRC"/tests/explore/regress/punch-*.log; do
	name=$(basename "$log" .log)
	for bs in 1024 4096; do
		img="$SCRATCH/punch-$bs.img"
		mkimg "$img" "$bs" 256M
		log "$name, block $bs: recon-fuse"
		recon_run "$img" "$name bs $bs" "$FSX" -q -n 1 -R "$log" "$SCRATCH/mnt"
		mkimg "$img" "$bs" 256M
		kernel_run "$img" "$name bs $bs" "$FSX" -q -n 1 -R "$log" "$SCRATCH/kmnt"
	done
done
finish
