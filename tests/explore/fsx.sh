#!/bin/bash
# fsx on recon-fuse (checker on, default options) at 1 KiB and 4 KiB blocks,
# a few seeds each; each seed also on the kernel's ext3 (the tool's sanity).
# After each run: the daemon exits 0 with no rejected commit, e2fsck -fn
# passes.  FSX_SEEDS, FSX_OPS, FSX_BLOCKS override the bounded CI run.
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/lib_explore.sh"
need_root
have_kernel_ext3 || skip "no kernel ext3"
[ -x "$FSX" ] || die "fsx not built: $FSX"

SEEDS=${FSX_SEEDS:-"101 202"}
OPS=${FSX_OPS:-2000}
BLOCKS=${FSX_BLOCKS:-"1024 4096"}
runs=0
for bs in $BLOCKS; do
	# 1 KiB: triple-indirect from 64.3 MiB, within 80 MiB; 4 KiB: from 4 GiB,
	# reached by sparse offsets below 4.1 GiB
	if [ "$bs" = 1024 ]; then len=80m; else len=4200m; fi
	for seed in $SEEDS; do
		img="$SCRATCH/fsx-$bs.img"
		mkimg "$img" "$bs" 1G
		log "seed $seed, $OPS ops, block $bs, -l $len: recon-fuse"
		recon_run "$img" "fsx seed $seed bs $bs" \
			"$FSX" -q -S "$seed" -N "$OPS" -l "$len" -b "$bs" -L "$SCRATCH/fsx-$bs-$seed.log" "$SCRATCH/mnt"
		mkimg "$img" "$bs" 1G
		log "seed $seed, block $bs: kernel ext3"
		kernel_run "$img" "fsx seed $seed bs $bs" \
			"$FSX" -q -S "$seed" -N "$OPS" -l "$len" -b "$bs" "$SCRATCH/kmnt"
		runs=$((runs + 1))
	done
done
log "$runs seeds x block sizes, $OPS ops each; false alarms: $FALSE_ALARMS"
finish
