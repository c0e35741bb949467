#!/bin/bash
# Kernel interop, both ways, 1 KiB and 4 KiB blocks:
#  1. what recon-fuse leaves, the kernel's ext3 driver mounts and sees the
#     same (manifest: types, modes, owners, sizes, contents, links, xattrs);
#     the kernel then changes it, and recon-fuse sees what the kernel left;
#  2. what the kernel leaves after a crash (the image copied while mounted,
#     after a commit, with an open unlinked file: a journal to replay and an
#     orphan): recovered by the kernel and by recon-fuse, the two views agree
#     and e2fsck -fn is clean after each.
# With the argument ext4: mkfs.ext4's defaults and the kernel's ext4 driver
# (its crash leaves a jbd2 log with 64-bit tags and checksums to replay).
# The kernel's crash also leaves a directory removed while open (an orphan
# that still has its block).
. "$(dirname "$0")/lib.sh"
fs=${1:-ext3}
TEST_NAME=kernel_interop${1:+_$1}
need_root
case $fs in
ext3) have_kernel_ext3 || skip "the kernel has no ext3 driver"
      entries=2500 added=400 ;;
ext4) need_kernel_ext4
      entries=2500 added=400 ;;
*) die "file system $fs: ext3 or ext4" ;;
esac
export INTEROP_ENTRIES=$entries INTEROP_ADDED=$added INTEROP_ORPHAN_DIR=1
# kmount_fs IMG MNT [OPTS]: the kernel's driver for $fs on a loop device.
kmount_fs() {
	if [ "$fs" = ext3 ]; then kmount "$@"; return; fi
	mkdir -p "$2"
	mount -t ext4 -o "loop${3:+,$3}" "$1" "$2" && MOUNTS+=("$2")
}

cat >"$SCRATCH/interop.py" <<'EOF'
import os, sys, time
from pylib import *
mode, root = sys.argv[1], sys.argv[2]
seed = sys.argv[3] if len(sys.argv) > 3 else ""
entries = int(os.environ["INTEROP_ENTRIES"])
added = int(os.environ["INTEROP_ADDED"])
os.chdir(root)
if mode == "populate":
    bs = os.statvfs(".").f_bsize
    os.makedirs(seed + "/deep/er/still")
    for i, size in enumerate((0, 1, 1000, bs, 12 * bs + 1, (12 + bs // 4) * bs + 3, 3 << 20)):
        with open("%s/f%d" % (seed, i), "wb") as f:
            f.write(pattern(seed + str(i), size))
    with open(seed + "/sparse", "wb") as f:
        f.seek((12 + bs // 4 + 5) * bs); f.write(b"end")
    os.symlink("f1", seed + "/fast")
    os.symlink("x" * 300, seed + "/slow")
    os.link(seed + "/f2", seed + "/deep/hard")
    os.mkfifo(seed + "/fifo")
    os.mknod(seed + "/dev", 0o20600, os.makedev(4, 5))
    os.setxattr(seed + "/f1", "user.small", b"v")
    os.setxattr(seed + "/f2", "user.big", pattern("xa", 300))
    os.setxattr(seed + "/deep", "trusted.t", b"on a directory")
    os.chown(seed + "/f3", 1001, 1002)
    os.chmod(seed + "/f4", 0o4711)
    os.mkdir(seed + "/dir")
    for i in range(entries):    # 2500: several blocks, an htree or a linear directory
        open("%s/dir/entry-%05d-%s" % (seed, i, "n" * (i % 30)), "w").close()
    for i in range(0, entries, 3):
        os.unlink("%s/dir/entry-%05d-%s" % (seed, i, "n" * (i % 30)))
    os.rename(seed + "/f5", seed + "/deep/er/f5-moved")
    os.rename(seed + "/deep/er/still", seed + "/moved-dir")
    os.utime(seed + "/f0", (1500000000, 1500000000))
elif mode == "mutate":
    for name in sorted(os.listdir(".")):
        if name == "lost+found" or not os.path.isdir(name + "/dir"):
            continue
        for i in range(1, entries, 3):
            p = "%s/dir/entry-%05d-%s" % (name, i, "n" * (i % 30))
            if os.path.exists(p):
                os.rename(p, p + "-r")
        for i in range(added):
            open("%s/dir/new-%s-%d" % (name, seed, i), "w").close()
        with open(name + "/f1", "ab") as f:
            f.write(b"appended by " + seed.encode())
        # the tree may have been mutated before (by the other driver)
        if os.path.lexists(name + "/f0"):
            os.unlink(name + "/f0")
        os.symlink("y" * 100, "%s/slow-%s" % (name, seed))
        os.setxattr(name + "/f3", "user.by", seed.encode())
        if "user.big" in os.listxattr(name + "/f2"):
            os.removexattr(name + "/f2", "user.big")
elif mode == "manifest":
    print("\n".join(manifest(".")))
elif mode == "crashwork":
    # work the kernel commits, then an open unlinked file; a ready flag; hold
    flag = sys.argv[4]
    os.makedirs("crash/sub")
    for i in range(200):
        with open("crash/sub/c%d" % i, "wb") as f:
            f.write(pattern("c%d" % i, 100 + 37 * i))
    for i in range(0, 200, 4):
        os.unlink("crash/sub/c%d" % i)
    fd = os.open("crash/held", os.O_CREAT | os.O_RDWR, 0o644)
    os.write(fd, pattern("held", 2 << 20))
    os.fsync(fd)
    os.unlink("crash/held")
    if os.environ.get("INTEROP_ORPHAN_DIR") == "1":
        # and a directory removed while open: an orphan with its block
        os.makedirs("crash/gone")
        dfd = os.open("crash/gone", os.O_RDONLY | os.O_DIRECTORY)
        os.rmdir("crash/gone")
    os.sync()
    open(flag, "w").close()
    time.sleep(600)
EOF
run_py() { python3 "$SCRATCH/interop.py" "$@"; }

for bs in 1024 4096; do
	img="$SCRATCH/interop-$bs.img" mnt="$SCRATCH/mnt" kmnt="$SCRATCH/kmnt"
	if [ "$fs" = ext3 ]; then
		mkimg "$img" "$bs" 128M
	else
		rm -f "$img"
		mke2fs -F -q -t ext4 -b "$bs" "$img" 128M >"$SCRATCH/mke2fs.out" 2>&1 ||
			{ cat "$SCRATCH/mke2fs.out"; die "mke2fs -t ext4"; }
	fi

	# 1. recon-fuse writes, the kernel reads and writes, recon-fuse reads
	mount_recon "$img" "$mnt" || die "mount ($bs)"
	run_py populate "$mnt" ours || fail "populate on recon-fuse ($bs)"
	run_py manifest "$mnt" >"$SCRATCH/m-ours" || fail "manifest on recon-fuse ($bs)"
	umount_recon "$mnt"
	fsck_clean "$img" "what recon-fuse left ($bs)"
	kmount_fs "$img" "$kmnt" || die "the kernel cannot mount what recon-fuse left ($bs)"
	run_py manifest "$kmnt" >"$SCRATCH/m-kernel" || fail "manifest on the kernel ($bs)"
	diff "$SCRATCH/m-ours" "$SCRATCH/m-kernel" >"$SCRATCH/diff" ||
		{ fail "the kernel sees something else than recon-fuse wrote ($bs)"; head -20 "$SCRATCH/diff"; }
	run_py mutate "$kmnt" kernel || fail "the kernel changing our tree ($bs)"
	run_py populate "$kmnt" kern || fail "populate on the kernel ($bs)"
	run_py manifest "$kmnt" >"$SCRATCH/m-kernel2"
	kumount "$kmnt"
	fsck_clean "$img" "what the kernel left ($bs)"
	mount_recon "$img" "$mnt" || die "mount what the kernel left ($bs)"
	run_py manifest "$mnt" >"$SCRATCH/m-ours2" || fail "manifest on recon-fuse ($bs)"
	diff "$SCRATCH/m-kernel2" "$SCRATCH/m-ours2" >"$SCRATCH/diff" ||
		{ fail "recon-fuse sees something else than the kernel left ($bs)"; head -20 "$SCRATCH/diff"; }
	run_py mutate "$mnt" ours2 || fail "recon-fuse changing the kernel's tree ($bs)"
	run_py manifest "$mnt" >"$SCRATCH/m-ours3"
	umount_recon "$mnt"
	fsck_clean "$img" "recon-fuse after the kernel ($bs)"
	kmount_fs "$img" "$kmnt" ro || die "kernel remount ($bs)"
	run_py manifest "$kmnt" >"$SCRATCH/m-kernel3"
	kumount "$kmnt"
	diff "$SCRATCH/m-ours3" "$SCRATCH/m-kernel3" >"$SCRATCH/diff" ||
		{ fail "the kernel disagrees after the second round ($bs)"; head -20 "$SCRATCH/diff"; }

	# 2. what the kernel leaves when it crashes
	rm -f "$SCRATCH/ready"
	kmount_fs "$img" "$kmnt" "commit=60" || die "kernel mount for the crash ($bs)"
	# python itself in the background (not a function's subshell) so kill reaches it
	python3 "$SCRATCH/interop.py" crashwork "$kmnt" x "$SCRATCH/ready" &
	holder=$!
	for ((i = 0; i < 600; i++)); do [ -e "$SCRATCH/ready" ] && break; sleep 0.1; done
	[ -e "$SCRATCH/ready" ] || fail "kernel crash workload did not finish ($bs)"
	cp --sparse=always "$img" "$SCRATCH/crashed.img"   # the power cut
	kill "$holder"; wait "$holder" 2>/dev/null
	kumount "$kmnt"
	dumpe2fs -h "$SCRATCH/crashed.img" 2>/dev/null | grep -q needs_recovery ||
		fail "the crash image does not need recovery ($bs): the test did not set up what it meant to"
	cp --sparse=always "$SCRATCH/crashed.img" "$SCRATCH/crashed-k.img"
	kmount_fs "$SCRATCH/crashed-k.img" "$kmnt" || die "kernel recovery ($bs)"
	run_py manifest "$kmnt" >"$SCRATCH/m-crash-kernel"
	kumount "$kmnt"
	fsck_clean "$SCRATCH/crashed-k.img" "the kernel's own recovery ($bs)"
	if mount_recon "$SCRATCH/crashed.img" "$mnt"; then
		run_py manifest "$mnt" >"$SCRATCH/m-crash-ours"
		umount_recon "$mnt"
		fsck_clean "$SCRATCH/crashed.img" "recon-fuse's recovery of a kernel crash ($bs)"
		diff "$SCRATCH/m-crash-kernel" "$SCRATCH/m-crash-ours" >"$SCRATCH/diff" ||
			{ fail "recon-fuse recovers a kernel crash differently than the kernel ($bs)"; head -20 "$SCRATCH/diff"; }
		grep -q '^crash/sub/c199 ' "$SCRATCH/m-crash-ours" || fail "committed work missing after our recovery ($bs)"
	else
		fail "recon-fuse cannot mount what a kernel crash left ($bs)"
	fi
	rm -f "$img" "$SCRATCH"/crashed*.img
done
finish
