#!/bin/bash
# nsstress on recon-fuse over ext4 images, every commit approved by the checker:
# mkfs.ext4's defaults and e2fsprogs 1.47.4's (with
# metadata_csum_seed and orphan_file), 1 KiB and 4 KiB blocks, 4 processes in one tree;
# verified while mounted, then unmount (daemon exit 0), e2fsck -fn, and
# verified again through the kernel's ext4 (read-only).  NS4_SEEDS, NS4_OPS,
# NS4_BLOCKS override.
. "$(dirname "$0")/../integration/lib.sh"
# the checker approves every commit (EXT4_CHECKER=off: the driver alone)
ext4_checker=${EXT4_CHECKER:-on}
. "$(dirname "$0")/lib_explore.sh"
need_root
need_kernel_ext4
[ -x "$NSSTRESS" ] || die "nsstress not built: $NSSTRESS"

SEEDS=${NS4_SEEDS:-"11"}
OPS=${NS4_OPS:-1500}
BLOCKS=${NS4_BLOCKS:-"1024 4096"}

stress_and_verify() {   # DIR SEED
	"$NSSTRESS" -S "$2" -p 4 -N "$OPS" "$1" && "$NSSTRESS" -V "$1"
}
mkdir -p "$SCRATCH/kmnt"
runs=0
for bs in $BLOCKS; do
	for kind in default seed; do
		for seed in $SEEDS; do
			img="$SCRATCH/ns4-$bs.img"
			rm -f "$img"
			o=()
			[ "$kind" = seed ] && o=(-O metadata_csum_seed,orphan_file)
			mke2fs -F -q -t ext4 -b "$bs" "${o[@]}" "$img" 512M >"$SCRATCH/mke2fs.out" 2>&1 ||
				{ cat "$SCRATCH/mke2fs.out"; die "mke2fs"; }
			what="nsstress ext4 ($kind) seed $seed bs $bs"
			log "$what, 4 x $OPS ops"
			EXPLORE_RECON_OPTS=checker=$ext4_checker recon_run "$img" "$what" \
				stress_and_verify "$SCRATCH/mnt" "$seed" || continue
			if mount -t ext4 -o ro,loop "$img" "$SCRATCH/kmnt"; then
				MOUNTS+=("$SCRATCH/kmnt")
				"$NSSTRESS" -V "$SCRATCH/kmnt" || fail "$what: the kernel's ext4 sees another tree"
				umount "$SCRATCH/kmnt"
			else
				fail "$what: the kernel's ext4 does not mount the result"
			fi
			runs=$((runs + 1))
		done
	done
done
log "$runs runs, 4 x $OPS ops each"
finish
