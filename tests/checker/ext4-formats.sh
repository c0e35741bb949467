#!/bin/bash
# The checker's ext4 format parsers against libext2fs (tests/checker/test_ext4.c)
# on images that kernel ext4 populated: Debian 12's mkfs.ext4 defaults at 4 KiB
# and 1 KiB blocks, metadata_csum_seed + orphan_file, 32-bit descriptors
# (^64bit), uninit_bg without metadata_csum.  Each gets an htree directory, a
# fragmented file whose extent tree is two levels deep on 1 KiB blocks,
# unwritten extents (fallocate), xattr blocks, and symlinks; e2fsck -fn must
# call each clean before the parsers are compared with it.
. "$RECON_SRC/tests/integration/lib.sh"
need_root
exe="$RECON_BUILD/tests/checker/test_ext4"
[ -x "$exe" ] || die "test_ext4 not built: $exe"
command -v setfattr >/dev/null || skip "no setfattr (package attr)"
modprobe ext4 2>/dev/null
grep -qw ext4 /proc/filesystems || skip "the kernel has no ext4"
kmnt="$SCRATCH/k"
mkdir -p "$kmnt"

populate() {   # populate DIR BLOCKSIZE
	local d=$1 bs=$2
	mkdir "$d/big"
	python3 - "$d" "$bs" <<'PY'
import os, sys
d, bs = sys.argv[1], int(sys.argv[2])
for i in range(3000):
    open(os.path.join(d, "big", "entry-with-a-longish-name-%05d" % i), "w").close()
# every other block written: one extent per block, a tree of depth 2 on 1 KiB blocks
fd = os.open(os.path.join(d, "fragmented"), os.O_CREAT | os.O_WRONLY, 0o644)
for i in range(1200):
    os.pwrite(fd, b"x" * bs, 2 * i * bs)
os.fsync(fd); os.close(fd)
fd = os.open(os.path.join(d, "prealloc"), os.O_CREAT | os.O_WRONLY, 0o644)
os.posix_fallocate(fd, 0, 64 * bs)
os.pwrite(fd, b"y" * bs, 8 * bs)
os.close(fd)
with open(os.path.join(d, "small"), "w") as f: f.write("hello\n")
os.symlink("small", os.path.join(d, "fast-link"))
os.symlink("x" * 200, os.path.join(d, "slow-link"))
PY
	# too big for the inode's extra space: in an xattr block
	setfattr -n user.big -v "$(head -c $((bs / 2)) /dev/zero | tr '\0' v)" "$d/small" || return 1
	setfattr -n user.big -v "$(head -c $((bs / 2)) /dev/zero | tr '\0' w)" "$d/big" || return 1
}

n=0
for spec in "4096:" "1024:" "1024:metadata_csum_seed,orphan_file" "4096:^64bit" \
	    "1024:^metadata_csum,uninit_bg"; do
	bs=${spec%%:*} feat=${spec#*:}
	img="$SCRATCH/e-$n.img"; n=$((n + 1))
	truncate -s 128M "$img"
	if ! mke2fs -F -q -t ext4 -b "$bs" ${feat:+-O "$feat"} "$img" >"$SCRATCH/mkfs.out" 2>&1; then
		log "mke2fs cannot make -b $bs -O '$feat' here: $(head -1 "$SCRATCH/mkfs.out")"; continue
	fi
	loop=$(losetup -f --show "$img") || die "losetup"
	if ! mount -t ext4 "$loop" "$kmnt" 2>"$SCRATCH/mount.err"; then
		losetup -d "$loop"
		log "kernel ext4 does not mount -b $bs -O '$feat': $(cat "$SCRATCH/mount.err")"; continue
	fi
	populate "$kmnt" "$bs" || fail "-b $bs -O '$feat': populating failed"
	umount "$kmnt"; losetup -d "$loop"
	e2fsck -fn "$img" >"$SCRATCH/fsck.out" 2>&1 || { fail "-b $bs -O '$feat': e2fsck -fn is not clean"; cat "$SCRATCH/fsck.out"; continue; }
	if "$exe" "$img" >"$SCRATCH/out" 2>&1; then
		log "-b $bs -O '$feat': $(tail -1 "$SCRATCH/out" | cut -d: -f2-)"
	else
		fail "-b $bs -O '$feat':"; cat "$SCRATCH/out"
	fi
done
finish
