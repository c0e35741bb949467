#!/bin/bash
# The kernel mount tells the truth about the daemon, and the kernel's
# interfaces around it work:
#  1. read-only in /proc/mounts when the daemon serves read-only: -o ro, ro
#     from a configuration file, an ext2 image not cleanly unmounted (the
#     fallback at mount), and after a rejected commit (once no file is open
#     for writing);
#  2. the access-time policy in the mount flags: noatime (also from a
#     configuration file), strictatime (root);
#  3. mount -o remount,ro / remount,rw (mount.fuse3 runs recon-fuse with
#     remount among the options): read-only commits before it returns (kill
#     -9 after it loses nothing), is refused while a file is open for
#     writing; rw writes again; rw of a mount served read-only is refused;
#     remount,noatime changes the daemon's policy;
#  4. a root mount of a block device is fuseblk: umount returns once the
#     image is complete (e2fsck and the last files right after, 3 of 3);
#  5. what sync promises: `sync MNT` (fsync of the root) commits everything,
#     a plain sync commits nothing (FUSE sends no syncfs to a /dev/fuse
#     daemon);
#  6. a shared mmap of an O_DIRECT descriptor (FUSE_DIRECT_IO_ALLOW_MMAP):
#     written through the map, read back through a cached descriptor and
#     after a remount.
. "$(dirname "$0")/lib.sh"
need_root
mnt="$SCRATCH/mnt"
img="$SCRATCH/m.img"

opts_of() { findmnt -n -o OPTIONS --mountpoint "$1"; }
# has_opt MNT WORD: WORD is one of the mount's options
has_opt() { [[ ",$(opts_of "$1")," == *",$2,"* ]]; }
disk_cat() { debugfs -R "cat /$2" "$1" 2>/dev/null; }
# kill_daemon: kill -9 RECON_PID, drop the dead mount
kill_daemon() {
	kill -9 "$RECON_PID"
	wait "$RECON_PID" 2>/dev/null
	forget_pid "$RECON_PID"
	RECON_PID=
	fusermount3 -uz "$mnt" 2>/dev/null
}
# remount MNT OPTS: as mount.fuse3 runs recon-fuse for mount -o remount
remount() { "$RECON_FUSE" "$img" "$1" -o "$2,remount,user_id=0,group_id=0,default_permissions"; }

# ---- 1. read-only shown ----
mkimg "$img" 4096 64M
if mount_recon "$img" "$mnt" ro; then
	has_opt "$mnt" ro || fail "-o ro: the mount shows $(opts_of "$mnt")"
	umount_recon "$mnt"
fi
echo 'ro = true;' >"$SCRATCH/ro.conf"
if mount_recon "$img" "$mnt" "config=$SCRATCH/ro.conf"; then
	has_opt "$mnt" ro || fail "ro from a configuration file: the mount shows $(opts_of "$mnt")"
	umount_recon "$mnt"
fi
ext2="$SCRATCH/ext2.img"
rm -f "$ext2"; truncate -s 32M "$ext2"
mke2fs -F -q -t ext2 "$ext2" >/dev/null 2>&1 || die "mke2fs ext2"
debugfs -w -R "ssv state 0" "$ext2" >/dev/null 2>&1 || die "debugfs ssv state"
if mount_recon "$ext2" "$mnt"; then
	grep -q "not cleanly unmounted" "$RECON_LOG" || fail "ext2 not cleanly unmounted: no fallback message"
	has_opt "$mnt" ro || fail "fallback to read-only: the mount shows $(opts_of "$mnt")"
	touch "$mnt/x" 2>/dev/null && fail "fallback to read-only: a write succeeded"
	# rw of a mount the daemon serves read-only: refused, stays ro
	remount "$mnt" rw 2>"$SCRATCH/remount.err" &&
		fail "remount,rw of a read-only fallback succeeded"
	grep -q "cannot remount read-write" "$SCRATCH/remount.err" ||
		fail "remount,rw refusal message: $(cat "$SCRATCH/remount.err")"
	has_opt "$mnt" ro || fail "after a refused remount,rw the mount shows $(opts_of "$mnt")"
	umount_recon "$mnt"
fi

# after a rejected commit: rw while a file is open for writing, ro once closed
mkimg "$img" 4096 64M
if mount_recon "$img" "$mnt" "fault_corrupt=links@1"; then
	python3 - "$mnt" <<'EOF' || fail "rejection scenario"
import errno, os, subprocess, sys, time
m = sys.argv[1]
def opts():
    return "," + subprocess.run(["findmnt", "-n", "-o", "OPTIONS", "--mountpoint", m],
                                capture_output=True, text=True).stdout.strip() + ","
fd = os.open(m + "/f", os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, b"x")
try:
    os.fsync(fd)
    sys.exit("the corrupted commit was not rejected")
except OSError as e:
    if e.errno != errno.EIO:
        raise
time.sleep(1.5)
if ",ro," in opts():
    sys.exit("marked read-only while a file was open for writing: " + opts())
os.close(fd)
for _ in range(50):
    if ",ro," in opts():
        break
    time.sleep(0.1)
else:
    sys.exit("after a rejection, the mount shows " + opts())
EOF
	umount_recon "$mnt" 3
fi
fsck_clean "$img" "after a rejection"

# ---- 2. access-time policy shown ----
mkimg "$img" 4096 64M
if mount_recon "$img" "$mnt" noatime; then
	has_opt "$mnt" noatime || fail "-o noatime: the mount shows $(opts_of "$mnt")"
	umount_recon "$mnt"
fi
echo 'atime = "noatime";' >"$SCRATCH/atime.conf"
if mount_recon "$img" "$mnt" "config=$SCRATCH/atime.conf"; then
	has_opt "$mnt" noatime || fail "atime from a configuration file: the mount shows $(opts_of "$mnt")"
	umount_recon "$mnt"
fi
if mount_recon "$img" "$mnt" strictatime; then
	{ has_opt "$mnt" relatime || has_opt "$mnt" noatime; } &&
		fail "-o strictatime: the mount shows $(opts_of "$mnt")"
	umount_recon "$mnt"
fi

# ---- 3. remount ----
mkimg "$img" 4096 64M
if mount_recon "$img" "$mnt" "commit_interval_ms=60000"; then
	echo "before remount" >"$mnt/kept" || fail "write"
	exec 5>"$mnt/open"
	remount "$mnt" ro 2>"$SCRATCH/remount.err" &&
		fail "remount,ro succeeded with a file open for writing"
	exec 5>&-
	has_opt "$mnt" rw || fail "after a refused remount,ro the mount shows $(opts_of "$mnt")"
	touch -a -d 2000-06-01 "$mnt/kept"
	remount "$mnt" ro 2>"$SCRATCH/remount.err" || fail "remount,ro: $(cat "$SCRATCH/remount.err")"
	has_opt "$mnt" ro || fail "after remount,ro the mount shows $(opts_of "$mnt")"
	touch "$mnt/x" 2>/dev/null && fail "a write succeeded after remount,ro"
	# read-only, the daemon writes nothing, not even an atime (relatime
	# would update this one; a direct read reaches the daemon, a cached one
	# would not)
	dd if="$mnt/kept" of=/dev/null bs=4096 iflag=direct 2>/dev/null || fail "direct read"
	remount "$mnt" rw || fail "remount,rw"
	has_opt "$mnt" rw || fail "after remount,rw the mount shows $(opts_of "$mnt")"
	echo "after remount" >"$mnt/again" || fail "write after remount,rw"
	# remount,noatime: reads no longer touch an old atime
	touch -a -d 2000-06-01 "$mnt/again"
	remount "$mnt" rw,noatime || fail "remount,noatime"
	has_opt "$mnt" noatime || fail "after remount,noatime the mount shows $(opts_of "$mnt")"
	dd if="$mnt/again" of=/dev/null bs=4096 iflag=direct 2>/dev/null || fail "direct read"
	# everything commits at remount,ro: a kill -9 right after loses nothing
	remount "$mnt" ro || fail "second remount,ro"
	kill_daemon
	fsck_clean "$img" "killed after remount,ro"
	[ "$(disk_cat "$img" kept)" = "before remount" ] || fail "a file written before remount,ro is lost"
	[ "$(disk_cat "$img" again)" = "after remount" ] || fail "a file written after remount,rw is lost"
	debugfs -R "stat /kept" "$img" 2>/dev/null | grep -q "atime:.*2000" ||
		fail "remount,ro: a read changed the atime"
	debugfs -R "stat /again" "$img" 2>/dev/null | grep -q "atime:.*2000" ||
		fail "remount,noatime: a read changed the atime"
fi
# as mount(8) does it: mount.fuse3 runs "recon-fuse" from the standard PATH
# (a symlink to the build's binary stands in, as in mount_type.sh)
if command -v mount.fuse3 >/dev/null; then
	exec 8>/tmp/recon-test-mount_type.lock
	flock 8
	LINK=/usr/local/sbin/recon-fuse
	if [ -e "$LINK" ] || [ -L "$LINK" ]; then LINK=; else
		mkdir -p /usr/local/sbin && ln -s "$(readlink -f "$RECON_FUSE")" "$LINK" || die "cannot link $LINK"
	fi
	trap 'cleanup; [ -n "$LINK" ] && rm -f "$LINK"' EXIT
	if mount_recon "$img" "$mnt"; then
		mount -o remount,ro "$mnt" 2>"$SCRATCH/mount.err" || fail "mount -o remount,ro: $(cat "$SCRATCH/mount.err")"
		has_opt "$mnt" ro || fail "after mount -o remount,ro the mount shows $(opts_of "$mnt")"
		mount -o remount,rw "$mnt" 2>"$SCRATCH/mount.err" || fail "mount -o remount,rw: $(cat "$SCRATCH/mount.err")"
		has_opt "$mnt" rw || fail "after mount -o remount,rw the mount shows $(opts_of "$mnt")"
		umount_recon "$mnt"
	fi
	[ -n "$LINK" ] && rm -f "$LINK"
	LINK=
	flock -u 8
fi
fsck_clean "$img" "after the remounts"

# ---- 4. fuseblk: umount returns with the image complete ----
mkimg "$img" 4096 128M
for run in 1 2 3; do
	dev=$(loop_attach "$img") || { fail "losetup"; break; }
	if mount_recon "$dev" "$mnt" "commit_interval_ms=60000"; then
		pid=$RECON_PID
		[ "$(findmnt -n -o FSTYPE --mountpoint "$mnt")" = fuseblk.recon-fuse ] ||
			fail "run $run: a root mount of $dev is $(findmnt -n -o FSTYPE --mountpoint "$mnt")"
		mkdir "$mnt/r$run" && for i in $(seq 1 1500); do echo "$i" >"$mnt/r$run/f$i"; done
		umount "$mnt" || fail "run $run: umount"
		n=$(debugfs -R "ls -l /r$run" "$dev" 2>/dev/null | grep -c ' f[0-9]')
		[ "$n" = 1500 ] || fail "run $run: right after umount the image holds $n of 1500 files"
		fsck_clean "$dev" "run $run, right after umount"
		RECON_PID=$pid
		umount_recon "$mnt"
	fi
	losetup -d "$dev"
done

# ---- 5. sync ----
mkimg "$img" 4096 64M
if mount_recon "$img" "$mnt" "commit_interval_ms=60000"; then
	echo synced >"$mnt/by_sync_mnt"
	sync "$mnt" || fail "sync $mnt"
	echo unsynced >"$mnt/by_sync"
	sync
	kill_daemon
	fsck_clean "$img" "killed after sync"
	[ "$(disk_cat "$img" by_sync_mnt)" = synced ] || fail "a file before 'sync MNT' is lost"
	disk_cat "$img" by_sync | grep -q unsynced &&
		fail "a plain sync committed (FUSE sent syncfs? update the README and man page)"
fi

# ---- 6. shared mmap of an O_DIRECT descriptor ----
mkimg "$img" 4096 64M
if mount_recon "$img" "$mnt"; then
	python3 - "$mnt" <<'EOF' || fail "shared mmap of an O_DIRECT descriptor"
import mmap, os, sys
p = sys.argv[1] + "/dio"
fd = os.open(p, os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o644)
os.ftruncate(fd, 3 * 4096)
m = mmap.mmap(fd, 3 * 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[0:8] = b"page one"
m[8192:8200] = b"page two"
m.flush()
m.close()
os.close(fd)
with open(p, "rb") as f:
    d = f.read()
if d[0:8] != b"page one" or d[8192:8200] != b"page two":
    sys.exit("read back through a cached descriptor: %r %r" % (d[0:8], d[8192:8200]))
EOF
	umount_recon "$mnt"
	fsck_clean "$img" "after the mmap"
	if mount_recon "$img" "$mnt" ro; then
		python3 -c 'import sys; d = open(sys.argv[1], "rb").read(); sys.exit(d[0:8] != b"page one" or d[8192:8200] != b"page two")' "$mnt/dio" ||
			fail "the mmap's writes after a remount"
		umount_recon "$mnt"
	fi
fi
finish
