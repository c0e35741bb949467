#!/bin/bash
# Mounting the ways users do: as the type fuse.recon-fuse through mount(8) and
# mount.fuse3, from an fstab line, and by running recon-fuse without -f (it
# daemonizes, and the mount exists when the command returns).  A pid file
# names the daemon; after umount, waiting for that pid to go is how scripts
# know everything is on disk.
. "$(dirname "$0")/lib.sh"
need_root
command -v mount.fuse3 >/dev/null || skip "no mount.fuse3 (package fuse3)"
# mount.fuse3 runs "recon-fuse" through /bin/sh from the standard PATH (a
# directory like the build tree's is not searched): as the README says, it
# must be installed.  Unless it is, a symlink to the build's binary stands in
# /usr/local/sbin for the test's duration (the pid file check below makes sure
# the daemon that runs is the one under test).
exec 8>/tmp/recon-test-mount_type.lock
flock 8
LINK=/usr/local/sbin/recon-fuse
if [ -e "$LINK" ] || [ -L "$LINK" ]; then
	LINK=
else
	mkdir -p /usr/local/sbin && ln -s "$(readlink -f "$RECON_FUSE")" "$LINK" || die "cannot link $LINK"
fi
trap 'cleanup; [ -n "$LINK" ] && rm -f "$LINK"' EXIT

img="$SCRATCH/type.img" mnt="$SCRATCH/mnt" pidf="$SCRATCH/recon.pid"
mkdir -p "$mnt"
mkimg "$img" 4096 64M

# wait_pidfile_gone PIDFILE_PID: the daemon (not our child) exits after umount
wait_gone() {
	local pid=$1 i
	for ((i = 0; i < 600 * TMUL; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	fail "daemon $pid still running $((60 * TMUL)) s after umount"
	return 1
}

daemon_from_pidfile() {
	local pid
	pid=$(cat "$pidf" 2>/dev/null)
	if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
		fail "$1: no live daemon in the pid file ($pid)"
		return 1
	fi
	[ "$(readlink "/proc/$pid/exe")" = "$(readlink -f "$RECON_FUSE")" ] ||
		fail "$1: the pid file names $(readlink "/proc/$pid/exe"), not recon-fuse"
	PIDS+=("$pid")
	echo "$pid" >"$SCRATCH/pid"
}

one_round() {   # one_round HOW: after a mount, write, umount, wait, fsck
	local how=$1 pid
	MOUNTS+=("$mnt")
	is_mounted "$mnt" || { fail "$how: not mounted when the command returned"; return 1; }
	daemon_from_pidfile "$how" || { umount "$mnt"; return 1; }
	pid=$(cat "$SCRATCH/pid")
	echo "written via $how" >"$mnt/${how// /_}" || fail "$how: write"
	umount "$mnt" || fail "$how: umount"
	wait_gone "$pid" && forget_pid "$pid"
	[ -e "$pidf" ] && fail "$how: the pid file is left after the daemon exited"
	fsck_clean "$img" "after $how"
	[ "$(debugfs -R "cat /${how// /_}" "$img" 2>/dev/null)" = "written via $how" ] ||
		fail "$how: the file is not on disk after the daemon exited"
}

# 1. mount -t fuse.recon-fuse
mount -t fuse.recon-fuse -o "pidfile=$pidf" "$img" "$mnt" 2>"$SCRATCH/mount.err" ||
	{ fail "mount -t fuse.recon-fuse: $(cat "$SCRATCH/mount.err")"; }
one_round "mount -t"

# 2. an fstab line (the README documents one like it)
echo "$img $mnt fuse.recon-fuse rw,noatime,pidfile=$pidf,nofail 0 0" >"$SCRATCH/fstab"
mount --fstab "$SCRATCH/fstab" "$mnt" 2>"$SCRATCH/mount.err" ||
	fail "mount from an fstab line: $(cat "$SCRATCH/mount.err")"
one_round "fstab"

# 3. recon-fuse without -f daemonizes
"$RECON_FUSE" -o "pidfile=$pidf" "$img" "$mnt" >"$SCRATCH/daemonize.log" 2>&1 ||
	fail "recon-fuse (daemonizing) exited $?: $(cat "$SCRATCH/daemonize.log")"
one_round "daemonized"

# 4. read-only through mount(8)
mount -t fuse.recon-fuse -o "ro,pidfile=$pidf" "$img" "$mnt" 2>"$SCRATCH/mount.err" ||
	fail "mount -t fuse.recon-fuse -o ro: $(cat "$SCRATCH/mount.err")"
if is_mounted "$mnt"; then
	MOUNTS+=("$mnt")
	daemon_from_pidfile "ro" && pid=$(cat "$SCRATCH/pid")
	touch "$mnt/x" 2>/dev/null && fail "a write succeeded on -o ro"
	[ "$(cat "$mnt/mount_-t")" = "written via mount -t" ] || fail "read on -o ro"
	umount "$mnt" || fail "umount (ro)"
	[ -n "${pid:-}" ] && wait_gone "$pid" && forget_pid "$pid"
fi
fsck_clean "$img" "after ro"

# 5. an unknown option is refused at mount, with a message
if mount_recon "$img" "$mnt" "no_such_option=1" 2>/dev/null; then
	fail "an unknown option was accepted"
	umount_recon "$mnt"
fi
grep -q 'no_such_option' "$RECON_LOG" || fail "the message for an unknown option does not name it: $(cat "$RECON_LOG")"
finish
