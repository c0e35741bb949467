#!/bin/bash
# nsstress on recon-fuse: 4 processes in one tree, a few seeds, 1 KiB and
# 4 KiB blocks; verified while mounted, then unmount (daemon exit 0, no
# rejected commit), e2fsck -fn, remount and verify again.  Each seed also on
# the kernel's ext3.  NS_SEEDS, NS_OPS, NS_PROCS, NS_BLOCKS override.
# NS_FLAGS (default none: the full mode, where opens, xattrs, rmdirs and
# directory renames race another process's removal of the inode it looked
# up, as explore-open_race does on purpose); -s keeps every inode another
# process may have looked up alive.
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/lib_explore.sh"
need_root
have_kernel_ext3 || skip "no kernel ext3"
[ -x "$NSSTRESS" ] || die "nsstress not built: $NSSTRESS"

SEEDS=${NS_SEEDS:-"11 12"}
OPS=${NS_OPS:-1500}
PROCS=${NS_PROCS:-4}
FLAGS=${NS_FLAGS-}
BLOCKS=${NS_BLOCKS:-"1024 4096"}

stress_and_verify() {   # DIR SEED
	"$NSSTRESS" $FLAGS -S "$2" -p "$PROCS" -N "$OPS" "$1" && "$NSSTRESS" -V "$1"
}
runs=0
for bs in $BLOCKS; do
	for seed in $SEEDS; do
		img="$SCRATCH/ns-$bs.img"
		mkimg "$img" "$bs" 512M
		log "seed $seed, $PROCS x $OPS ops${FLAGS:+ ($FLAGS)}, block $bs: recon-fuse"
		if recon_run "$img" "nsstress seed $seed bs $bs" stress_and_verify "$SCRATCH/mnt" "$seed"; then
			recon_run "$img" "nsstress seed $seed bs $bs, after a remount" \
				"$NSSTRESS" -V "$SCRATCH/mnt"
		fi
		mkimg "$img" "$bs" 512M
		log "seed $seed, block $bs: kernel ext3"
		kernel_run "$img" "nsstress seed $seed bs $bs" stress_and_verify "$SCRATCH/kmnt" "$seed"
		runs=$((runs + 1))
	done
done
log "$runs seeds x block sizes, $PROCS x $OPS ops each; false alarms: $FALSE_ALARMS"
finish
