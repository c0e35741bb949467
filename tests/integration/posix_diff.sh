#!/bin/bash
# Differential POSIX semantics: one scripted sequence of file-system operations
# (posix_diff.py: open flags incl. O_TRUNC/O_APPEND/O_TMPFILE/O_DIRECT, holes,
# SEEK_DATA/SEEK_HOLE, the largest file size, truncate across the indirect
# boundaries, page-cache coherence and mmap, unlinked open files, every form of
# rename, links, symlinks, directories, device nodes, setuid/setgid on chmod,
# chown, write and truncate (root and a normal user), utimensat incl. times
# before 1970 and after 2038, xattrs and security.capability, statvfs and its
# deltas, a 500-entry directory, fallocate and punched holes, access(), POSIX
# ACLs (enforcement, mode and mask, default ACLs and the umask, malformed
# values), inode flags and their ioctls (every FS_IOC_SETFLAGS bit, immutable,
# append-only and no-atime files and directories, inheritance, FSGETXATTR,
# GETVERSION), and one set of operations as root, as the files' owner, as a
# member of their group and as another user) runs
# on the kernel's ext3 driver and on recon-fuse, each on a copy of the same
# fresh image, 1 KiB and 4 KiB blocks.  Every step's outcome must agree
# (return value or errno, contents, stat fields, time relations, listings,
# xattrs), except the short allowlist EXPECTED in posix_diff.py.  e2fsck -fn
# must be clean on both images.  With the argument ext4: mkfs.ext4's
# defaults, against the kernel's ext4 driver (posix_diff.py's EXPECTED
# differences are per file system).
. "$(dirname "$0")/lib.sh"
fs=${1:-ext3}
TEST_NAME=posix_diff${1:+_$1}
need_root
case $fs in
ext3) have_kernel_ext3 || skip "the kernel has no ext3 driver" ;;
ext4) need_kernel_ext4 ;;
*) die "file system $fs: ext3 or ext4" ;;
esac
ensure_test_user

body="$RECON_SRC/tests/integration/posix_diff.py"
for bs in 1024 4096; do
	kimg="$SCRATCH/kernel-$bs.img" rimg="$SCRATCH/recon-$bs.img"
	kmnt="$SCRATCH/kmnt" rmnt="$SCRATCH/rmnt"
	if [ "$fs" = ext3 ]; then
		mkimg "$kimg" "$bs" 128M
	else
		rm -f "$kimg"
		mke2fs -F -q -t ext4 -b "$bs" "$kimg" 128M >"$SCRATCH/mke2fs.out" 2>&1 ||
			{ cat "$SCRATCH/mke2fs.out"; die "mke2fs -t ext4"; }
	fi
	# statfs's f_blocks leaves out the static metadata: mke2fs records how
	# much; without the record both drivers count it (4 KiB run)
	if [ "$bs" = 4096 ]; then
		debugfs -w -R "ssv overhead_clusters 0" "$kimg" >/dev/null 2>&1 ||
			fail "debugfs ssv overhead_clusters"
	fi
	cp --sparse=always "$kimg" "$rimg"

	if [ "$fs" = ext3 ]; then
		kmount "$kimg" "$kmnt" || die "kernel mount ($bs)"
	else
		mkdir -p "$kmnt"
		mount -t ext4 -o loop "$kimg" "$kmnt" || die "kernel mount ($bs)"
		MOUNTS+=("$kmnt")
	fi
	python3 "$body" run "$kmnt" "$SCRATCH/kernel-$bs.json" "$TEST_UID" "$TEST_GID" ||
		fail "the sequence did not complete on the kernel ($bs)"
	kumount "$kmnt" || fail "kernel umount ($bs)"
	fsck_clean "$kimg" "what the kernel left ($bs)"

	# allow_other: the unprivileged steps run as $TEST_USER
	mount_recon "$rimg" "$rmnt" allow_other || die "mount ($bs)"
	python3 "$body" run "$rmnt" "$SCRATCH/recon-$bs.json" "$TEST_UID" "$TEST_GID" ||
		fail "the sequence did not complete on recon-fuse ($bs)"
	umount_recon "$rmnt"
	fsck_clean "$rimg" "what recon-fuse left ($bs)"

	python3 "$body" compare "$SCRATCH/kernel-$bs.json" "$SCRATCH/recon-$bs.json" "$bs" "$fs" ||
		fail "recon-fuse and the kernel differ ($bs-byte blocks; the steps above)"
	rm -f "$kimg" "$rimg"
done
finish
