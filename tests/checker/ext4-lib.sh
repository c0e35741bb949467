# tests/checker/ext4-lib.sh: ext4 images populated by kernel ext4, for the
# checker's ext4 tests (sourced after tests/integration/lib.sh).

# the formats: "BLOCKSIZE:FEATURES" (mke2fs -t ext4 -O FEATURES): Debian 12's
# defaults at 4 KiB and 1 KiB blocks, metadata_csum_seed (with and without
# orphan_file), 32-bit descriptors, uninit_bg without metadata_csum
EXT4_FORMATS="4096: 1024: 1024:metadata_csum_seed,orphan_file 1024:metadata_csum_seed 4096:^64bit 1024:^metadata_csum,uninit_bg"

# populate DIR BLOCKSIZE: an htree directory (big), a file with one extent
# per block (a tree two levels deep on 1 KiB blocks), unwritten extents
# (prealloc), xattr blocks, symlinks, nested directories and a 3 MiB file
populate() {
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
os.makedirs(os.path.join(d, "a", "b", "c"))
with open(os.path.join(d, "a", "b", "c", "bigfile"), "wb") as f: f.write(os.urandom(3 << 20))
PY
	# too big for the inode's extra space: in an xattr block
	setfattr -n user.big -v "$(head -c $((bs / 2)) /dev/zero | tr '\0' v)" "$d/small" || return 1
	setfattr -n user.big -v "$(head -c $((bs / 2)) /dev/zero | tr '\0' w)" "$d/big" || return 1
}

# make_ext4 IMG SPEC MNT: a 128 MiB image of format SPEC populated by the
# kernel; returns 1 (with a log line) if mke2fs or the kernel cannot
make_ext4() {
	local img=$1 spec=$2 mnt=$3 bs=${2%%:*} feat=${2#*:} loop
	rm -f "$img"
	truncate -s 128M "$img"
	if ! mke2fs -F -q -t ext4 -b "$bs" ${feat:+-O "$feat"} "$img" >"$SCRATCH/mkfs.out" 2>&1; then
		log "mke2fs cannot make -b $bs -O '$feat' here: $(head -1 "$SCRATCH/mkfs.out")"; return 1
	fi
	loop=$(losetup -f --show "$img") || die "losetup"
	if ! mount -t ext4 "$loop" "$mnt" 2>"$SCRATCH/mount.err"; then
		losetup -d "$loop"
		log "kernel ext4 does not mount -b $bs -O '$feat': $(cat "$SCRATCH/mount.err")"; return 1
	fi
	populate "$mnt" "$bs" || { umount "$mnt"; losetup -d "$loop"; fail "-b $bs -O '$feat': populating failed"; return 1; }
	umount "$mnt"
	losetup -d "$loop"
}
