#!/bin/bash
# The op logs of tests/explore/regress/ replayed by fsx (each a failing seed
# made a regression test; its first lines say what it found), on 1 KiB and
# 4 KiB blocks, on recon-fuse (checker on: a rejected commit fails) and on
# the kernel's ext3:
#   punch-*.log: short punches in double- and triple-indirect leaves past the
#     first of their subtree (libext2fs 1.47's ext2fs_punch freed to the end
#     of the leaf: data lost);
#   iblocks-truncate.log: a truncate from the triple- into the
#     double-indirect range (a checker false alarm, INV_IBLOCKS).
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/lib_explore.sh"
need_root
have_kernel_ext3 || skip "no kernel ext3"
[ -x "$FSX" ] || die "fsx not built: $FSX"
for log in "$RECON_SRC"/tests/explore/regress/*.log; do
	name=$(basename "$log" .log)
	for bs in 1024 4096; do
		img="$SCRATCH/replay-$bs.img"
		mkimg "$img" "$bs" 256M
		log "$name, block $bs: recon-fuse"
		recon_run "$img" "$name bs $bs" "$FSX" -q -n 2 -R "$log" "$SCRATCH/mnt"
		mkimg "$img" "$bs" 256M
		kernel_run "$img" "$name bs $bs" "$FSX" -q -n 2 -R "$log" "$SCRATCH/kmnt"
	done
done
finish
