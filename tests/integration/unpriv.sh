#!/bin/bash
# A normal user mounts an image file the user owns (fusermount3 through
# libfuse), read-write, writes, and unmounts with fusermount3 -u; the daemon
# runs as that user and exits 0; files belong to the user; default_permissions
# keeps root's files closed to the user.
. "$(dirname "$0")/lib.sh"
need_root
ensure_test_user
[ -u "$(command -v fusermount3)" ] || skip "fusermount3 is not setuid root"
open_dev_fuse_to_test_user

dir="$SCRATCH/user"
mkdir -p "$dir/mnt"
img="$dir/user.img"
mkimg "$img" 4096 64M -E "root_owner=$TEST_UID:$TEST_GID"    # the user's own file system
# root's file in the image, not readable by others
debugfs -w -R "write /etc/hostname secret" "$img" >/dev/null 2>&1
debugfs -w -R "sif /secret mode 0100600" "$img" >/dev/null 2>&1
chown -R "$TEST_UID:$TEST_GID" "$dir"
chmod 644 "$img"

# default_permissions: the kernel checks modes and owners
# allow_other without user_allow_other in /etc/fuse.conf: refused up front,
# with the reason, not after the image is opened ("cannot mount on")
if ! grep -qx '[[:space:]]*user_allow_other[[:space:]]*' /etc/fuse.conf 2>/dev/null; then
	rc=0
	setpriv --reuid="$TEST_UID" --regid="$TEST_GID" --clear-groups env HOME="$SCRATCH" \
		timeout 20 "$RECON_FUSE" -f -o allow_other "$img" "$dir/mnt" >"$SCRATCH/ao.log" 2>&1 || rc=$?
	is_mounted "$dir/mnt" && { fail "allow_other mounted without user_allow_other"; fusermount3 -u "$dir/mnt"; }
	[ "$rc" = 1 ] || fail "allow_other without user_allow_other: exit $rc, want 1"
	grep -q "user_allow_other" "$SCRATCH/ao.log" || fail "allow_other refusal does not name user_allow_other: $(cat "$SCRATCH/ao.log")"
	grep -q "cannot mount on" "$SCRATCH/ao.log" && fail "allow_other refusal also says 'cannot mount on'"
fi

# setpriv execs env, which execs recon-fuse: $! is the daemon, our child
setpriv --reuid="$TEST_UID" --regid="$TEST_GID" --clear-groups env HOME="$SCRATCH" \
	"$RECON_FUSE" -f -o default_permissions "$img" "$dir/mnt" >"$SCRATCH/daemon.log" 2>&1 &
pid=$!
PIDS+=("$pid"); MOUNTS+=("$dir/mnt")
for ((i = 0; i < 200 * TMUL; i++)); do
	is_mounted "$dir/mnt" && break
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
if ! is_mounted "$dir/mnt"; then
	sed 's/^/    /' "$SCRATCH/daemon.log"
	die "a normal user cannot mount an image the user owns"
fi
# the real and effective uid (/proc/PID itself may be root's: not dumpable)
[ "$(awk '/^Uid:/ { print $2 ":" $3 }' "/proc/$pid/status")" = "$TEST_UID:$TEST_UID" ] ||
	fail "the daemon does not run as the user: $(grep ^Uid: "/proc/$pid/status")"
grep -E " $dir/mnt " /proc/self/mountinfo | grep -q 'user_id='"$TEST_UID" ||
	fail "the mount is not the user's: $(grep " $dir/mnt " /proc/self/mountinfo)"

as_user python3 - "$dir/mnt" <<'EOF' || fail "the user's work on the mount"
import errno, os, sys
from pylib import *
m = sys.argv[1]
c = Checker("unpriv")
os.chdir(m)
os.mkdir("work")
data = pattern("user", 3 << 20)
with open("work/data", "wb") as f:
    f.write(data)
c.eq(open("work/data", "rb").read(), data, "the user's data reads back")
st = os.stat("work/data")
c.eq((st.st_uid, st.st_gid), (os.getuid(), os.getgid()), "files belong to the user")
os.symlink("data", "work/link"); os.link("work/data", "work/hard")
os.rename("work/hard", "work/hard2")
os.unlink("work/hard2")
c.errno(errno.EACCES, os.open, "secret", os.O_RDONLY)
c.errno(errno.EPERM, os.chown, "work/data", 0, 0)
c.done()
EOF
# root is not let in without allow_other
if [ -e "$dir/mnt/work" ] 2>/dev/null; then
	fail "root can see into a user's mount without allow_other"
fi
as_user fusermount3 -u "$dir/mnt" || fail "fusermount3 -u as the user"
if wait_daemon "$pid" $((60 * TMUL)); then :; else
	fail "the user's daemon exited with $RECON_STATUS"
	sed 's/^/    /' "$SCRATCH/daemon.log" | tail -20
fi
fsck_clean "$img" "after the user's mount"
[ "$(debugfs -R "stat /work/data" "$img" 2>/dev/null | sed -n 's/.*User: *\([0-9]*\).*/\1/p')" = "$TEST_UID" ] ||
	fail "the image does not record the user as owner"
finish
