#!/bin/bash
# The checker's ext4 format parsers against libext2fs (tests/checker/test_ext4.c)
# on images that kernel ext4 populated (the formats and contents of
# ext4-lib.sh: Debian 12's mkfs.ext4 defaults at 4 KiB and 1 KiB blocks,
# metadata_csum_seed with and without orphan_file, 32-bit descriptors,
# uninit_bg without metadata_csum; an htree directory, a file whose extent
# tree is two levels deep on 1 KiB blocks, unwritten extents, xattr blocks,
# symlinks); e2fsck -fn must call each clean before the parsers are compared
# with it.
. "$RECON_SRC/tests/integration/lib.sh"
. "$RECON_SRC/tests/checker/ext4-lib.sh"
need_root
exe="$RECON_BUILD/tests/checker/test_ext4"
[ -x "$exe" ] || die "test_ext4 not built: $exe"
command -v setfattr >/dev/null || skip "no setfattr (package attr)"
modprobe ext4 2>/dev/null
grep -qw ext4 /proc/filesystems || skip "the kernel has no ext4"
kmnt="$SCRATCH/k"
mkdir -p "$kmnt"

n=0
for spec in $EXT4_FORMATS; do
	bs=${spec%%:*} feat=${spec#*:}
	img="$SCRATCH/e-$n.img"; n=$((n + 1))
	make_ext4 "$img" "$spec" "$kmnt" || continue
	e2fsck -fn "$img" >"$SCRATCH/fsck.out" 2>&1 || { fail "-b $bs -O '$feat': e2fsck -fn is not clean"; cat "$SCRATCH/fsck.out"; continue; }
	if "$exe" "$img" >"$SCRATCH/out" 2>&1; then
		log "-b $bs -O '$feat': $(tail -1 "$SCRATCH/out" | cut -d: -f2-)"
	else
		fail "-b $bs -O '$feat':"; cat "$SCRATCH/out"
	fi
done
finish
