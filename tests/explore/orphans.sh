#!/bin/bash
# nsstress -H on recon-fuse: hundreds of files per process unlinked while
# open (their content read back through the descriptor), writes gigabytes
# past EOF followed at once by an unlink or a truncate; the files still held
# close as the processes exit and the unmount follows at once, racing their
# RELEASEs.  The daemon exits 0 with no rejected commit, the image keeps no
# orphan, e2fsck -fn passes, a remount verifies the tree.  1 KiB and 4 KiB
# blocks, default transactions and -o max_transaction_blocks=16 (releases
# spanning commits).  Each seed also on the kernel's ext3.  With the
# argument ext4: mkfs.ext4's defaults, each seed also on the kernel's ext4.  Seed 32 at 4 KiB
# with max_transaction_blocks=16 truncates a file made in the same
# transaction across commits (the checker takes a linked orphan only once
# its creation is committed).  ORPHANS_SEEDS, ORPHANS_OPS, ORPHANS_PROCS
# override.
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/lib_explore.sh"
need_root
explore_fs "${1:-}"
[ -x "$NSSTRESS" ] || die "nsstress not built: $NSSTRESS"

SEEDS=${ORPHANS_SEEDS:-"31 32"}
OPS=${ORPHANS_OPS:-800}
PROCS=${ORPHANS_PROCS:-4}
runs=0
for bs in 1024 4096; do
	for seed in $SEEDS; do
		for opts in "" "max_transaction_blocks=16"; do
			what="nsstress -H seed $seed bs $bs${opts:+ $opts}"
			img="$SCRATCH/orph-$bs.img"
			explore_mkimg "$img" "$bs" 512M
			log "$what: recon-fuse"
			if EXPLORE_RECON_OPTS=$opts recon_run "$img" "$what" \
				"$NSSTRESS" -H -S "$seed" -p "$PROCS" -N "$OPS" "$SCRATCH/mnt"; then
				orphan=$(dumpe2fs -h "$img" 2>/dev/null | sed -n 's/^First orphan inode: *//p')
				[ -z "$orphan" ] || fail "$what: the unmount left orphans (first $orphan)"
				recon_run "$img" "$what, after a remount" "$NSSTRESS" -V "$SCRATCH/mnt"
			fi
			runs=$((runs + 1))
		done
		explore_mkimg "$img" "$bs" 512M
		log "seed $seed, block $bs: kernel $EXPLORE_FS"
		kernel_run "$img" "nsstress -H seed $seed bs $bs" \
			"$NSSTRESS" -H -S "$seed" -p "$PROCS" -N "$OPS" "$SCRATCH/kmnt"
	done
done
log "$runs runs, $PROCS x $OPS ops each; false alarms: $FALSE_ALARMS"
finish
