#!/bin/bash
# A normal user mounts an image made by root (mke2fs makes the root
# directory root's): with map_root (implied when the daemon is not root and
# the root directory is root's) the user works in it as its owner would,
# files it creates are root's on disk, and the user gets nothing the image
# does not give: the mount is nosuid,nodev, a set-user-id-root program of the
# image runs as the user, a device node of the image cannot be opened, chown
# to another user is refused, another user's files keep their protection.
# With map_root=off the root directory stays closed to the user.
. "$(dirname "$0")/lib.sh"
need_root
ensure_test_user
[ -u "$(command -v fusermount3)" ] || skip "fusermount3 is not setuid root"
open_dev_fuse_to_test_user

dir="$SCRATCH/user"
mkdir -p "$dir/mnt"
img="$dir/root-made.img"
mkimg "$img" 4096 64M                       # root's, as mke2fs makes it
debugfs -w -R "write /usr/bin/id idcopy" "$img" >/dev/null 2>&1
debugfs -w -R "sif /idcopy mode 0104755" "$img" >/dev/null 2>&1
debugfs -w -R "mknod null c 1 3" "$img" >/dev/null 2>&1
debugfs -w -R "sif /null mode 020666" "$img" >/dev/null 2>&1
debugfs -w -R "write /etc/hostname others" "$img" >/dev/null 2>&1
debugfs -w -R "sif /others uid 4242" "$img" >/dev/null 2>&1
debugfs -w -R "sif /others mode 0100600" "$img" >/dev/null 2>&1
chown -R "$TEST_UID:$TEST_GID" "$dir"

user_mount() {   # user_mount OPTS: the user's daemon in the foreground, in the background
	setpriv --reuid="$TEST_UID" --regid="$TEST_GID" --clear-groups env HOME="$SCRATCH" \
		"$RECON_FUSE" -f ${1:+-o "$1"} "$img" "$dir/mnt" >"$SCRATCH/daemon.log" 2>&1 &
	pid=$!
	PIDS+=("$pid"); MOUNTS+=("$dir/mnt")
	for ((i = 0; i < 200 * TMUL; i++)); do
		is_mounted "$dir/mnt" && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	sed 's/^/    /' "$SCRATCH/daemon.log"
	die "the user cannot mount a root-made image (${1:-defaults})"
}
user_umount() {
	as_user fusermount3 -u "$dir/mnt" || fail "fusermount3 -u"
	wait_daemon "$pid" $((60 * TMUL)) || fail "daemon exit status $RECON_STATUS"
}

user_mount ""
m="$dir/mnt"
grep -E " $m " /proc/self/mountinfo | grep -q nosuid,nodev || fail "the user's mount is not nosuid,nodev"
check "the root directory is the user's" test "$(as_user stat -c %u:%g "$m")" = "$TEST_UID:$TEST_GID"
as_user sh -c "mkdir '$m/work' && echo hello >'$m/work/f'" || fail "the user cannot create in the image"
check "new files are the user's" test "$(as_user stat -c %u "$m/work/f")" = "$TEST_UID"
check "set-user-id root program runs as the user" \
	test "$(as_user "$m/idcopy" -u 2>/dev/null)" = "$TEST_UID"
as_user sh -c "echo x >'$m/null'" 2>/dev/null && fail "a device node of the image opened"
as_user chown 4242 "$m/work/f" 2>/dev/null && fail "chown to another user allowed"
as_user cat "$m/others" >/dev/null 2>&1 && fail "another user's 0600 file readable"
check "another user's file keeps its owner" test "$(as_user stat -c %u "$m/others")" = 4242
user_umount
fsck_clean "$img" "after the user's mount"
# on disk: what the user made is root's, as if root had made it
debugfs -R "stat /work/f" "$img" 2>/dev/null | grep -q "User: *0 *Group: *0" ||
	fail "the user's file is not root's on disk: $(debugfs -R 'stat /work/f' "$img" 2>/dev/null | grep User)"

# ACL entries trade ids as owners do: the user's own entry is stored as
# root's, and an entry naming root in the image reads as the user's
if command -v setfacl >/dev/null; then
	user_mount ""
	as_user setfacl -m "u:$TEST_UID:rwx,u:4242:r" "$m/work/f" || fail "setfacl by the user"
	got=$(as_user getfacl -pn "$m/work/f" 2>/dev/null)
	grep -q "^user:$TEST_UID:rwx" <<<"$got" || fail "the user's ACL entry does not read back: $got"
	grep -q "^user:4242:r--" <<<"$got" || fail "another user's ACL entry changed: $got"
	user_umount
	if have_kernel_ext3; then
		kmnt="$SCRATCH/kmnt"; mkdir -p "$kmnt"
		if mount -t ext3 -o loop,ro "$img" "$kmnt"; then
			got=$(getfacl -pn "$kmnt/work/f" 2>/dev/null)
			umount "$kmnt"
			grep -q "^user:0:rwx" <<<"$got" || fail "on disk the user's ACL entry is not root's: $got"
			grep -q "^user:$TEST_UID:" <<<"$got" && fail "on disk an ACL entry names the mounting user: $got"
		fi
	fi
fi

user_mount "map_root=off"
check "map_root=off: the root directory is root's" test "$(as_user stat -c %u "$m")" = 0
as_user touch "$m/nope" 2>/dev/null && fail "map_root=off: the user created a file in root's directory"
user_umount
fsck_clean "$img" "after map_root=off"
finish
