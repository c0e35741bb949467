#!/bin/bash
# Differential runs: one seeded single-process fsx sequence and one
# single-process nsstress sequence, each on the kernel's ext3 and on
# recon-fuse (1 KiB and 4 KiB blocks), every outcome recorded (return value,
# errno, bytes read, stat size/blocks/nlink/mode, directory listings) and the
# two logs compared by outcome_diff.py (its accepted differences carry their
# reasons).  fsx leaves out fallocate mode 0: recon-fuse allocates where the
# kernel refuses block-mapped files (posix_diff.py's first accepted
# difference), and the sizes it sets would make the runs diverge.
# DIFF_SEEDS, DIFF_OPS override.
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/lib_explore.sh"
need_root
have_kernel_ext3 || skip "no kernel ext3"
SEEDS=${DIFF_SEEDS:-"7"}
OPS=${DIFF_OPS:-2000}
for bs in 1024 4096; do
	if [ "$bs" = 1024 ]; then len=80m; else len=4200m; fi
	for seed in $SEEDS; do
		for tool in fsx ns; do
			for side in kernel recon; do
				img="$SCRATCH/diff-$bs.img" out="$SCRATCH/$tool-$bs-$seed.$side"
				mkimg "$img" "$bs" 1G
				if [ $tool = fsx ]; then
					cmd=("$FSX" -q -S "$seed" -N "$OPS" -l "$len" -b "$bs" -x falloc -O "$out")
				else
					cmd=("$NSSTRESS" -S "$seed" -p 1 -N "$OPS" -O "$out")
				fi
				if [ $side = kernel ]; then
					kernel_run "$img" "$tool seed $seed bs $bs" "${cmd[@]}" "$SCRATCH/kmnt"
				else
					recon_run "$img" "$tool seed $seed bs $bs" "${cmd[@]}" "$SCRATCH/mnt"
				fi
			done
			log "$tool seed $seed bs $bs: kernel vs recon-fuse"
			check "$tool seed $seed bs $bs: outcomes differ" python3 "$RECON_SRC/tests/explore/outcome_diff.py" \
				$tool "$SCRATCH/$tool-$bs-$seed.kernel" "$SCRATCH/$tool-$bs-$seed.recon"
		done
	done
done
finish
