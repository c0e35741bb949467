#!/bin/bash
# What posix_diff cannot show by comparison with the kernel: the sync and
# dirsync flags and mount options commit before the operation returns (a
# daemon killed right after keeps those changes and loses the others, which
# wait for a commit interval of 10 minutes); noacl refuses ACLs and leaves
# the umask to the kernel; nouser_xattr refuses user.* attributes; the
# daemon's set-id clearing on a user's write reaches the kernel's cached mode
# at once; an image recon-fuse wrote with ACLs and flags reads the same
# through the kernel and back; a root mount with dev,suid serves device
# nodes and set-id programs, one without does not; file handles (name_to_handle_at) open the same
# files after a remount, and a handle of a deleted file is stale.
. "$(dirname "$0")/lib.sh"
fs_from_arg "$@"
need_root
have_kernel_fs || skip "the kernel has no $FS_TYPE driver"
command -v setfacl >/dev/null || skip "no setfacl (package acl)"
ensure_test_user

img="$SCRATCH/a.img" mnt="$SCRATCH/mnt" kmnt="$SCRATCH/kmnt"

# crash_after_ops OPTS: mount with a 10-minute commit interval, run the
# steps, kill -9 the daemon; the kernel then replays the journal.
lazy=commit_interval_ms=600000,async_commit=off
mkimg "$img" 4096 64M
mount_recon "$img" "$mnt" "$lazy" || die "mount"
mkdir "$mnt/S" "$mnt/D" "$mnt/N" && chattr +S "$mnt/S" && chattr +D "$mnt/D" ||
	fail "chattr +S/+D"
sync -f "$mnt"                       # FUSE has no syncfs: this commits nothing
umount_recon "$mnt"                  # the directories are on disk now
mount_recon "$img" "$mnt" "$lazy" || die "mount 2"
printf 'synced' >"$mnt/S/file"       # +S inherited: data and name commit
mkdir "$mnt/D/sub"                   # +D: the directory change commits
printf 'lazy' >"$mnt/D/lazydata"     # in a dirsync directory: the name commits, not the data
printf 'lost' >"$mnt/N/file"         # nothing commits
kill_recon
fusermount3 -uz "$mnt" 2>/dev/null
kmount "$img" "$kmnt" || die "kernel mount after the crash"
check "sync file survives" grep -qx synced "$kmnt/S/file"
check "dirsync mkdir survives" test -d "$kmnt/D/sub"
check "dirsync name survives" test -e "$kmnt/D/lazydata"
check "a change without sync waits for its commit" test ! -e "$kmnt/N/file"
check "flags inherited" sh -c "lsattr -d '$kmnt/S/file' | grep -q '^..S'"
kumount "$kmnt"
fsck_clean "$img" "after the crash"

# -o sync: everything commits before it returns
mkimg "$img" 4096 64M
mount_recon "$img" "$mnt" "$lazy,sync" || die "mount -o sync"
check "sync mount reported" grep -qw sync /proc/self/mountinfo
printf 'all synced' >"$mnt/f"; mkdir "$mnt/d"
kill_recon
fusermount3 -uz "$mnt" 2>/dev/null
kmount "$img" "$kmnt" || die "kernel mount after the sync-mount crash"
check "-o sync: file and data survive" grep -qx "all synced" "$kmnt/f"
check "-o sync: directory survives" test -d "$kmnt/d"
kumount "$kmnt"

# noacl and nouser_xattr
mkimg "$img" 4096 64M
mount_recon "$img" "$mnt" noacl,nouser_xattr || die "mount noacl"
touch "$mnt/f"
setfacl -m u:nobody:r "$mnt/f" 2>"$SCRATCH/err" && fail "noacl: setfacl succeeded"
grep -q "not supported" "$SCRATCH/err" || fail "noacl: setfacl: $(cat "$SCRATCH/err")"
setfattr -n user.x -v 1 "$mnt/f" 2>/dev/null && fail "nouser_xattr: user.x set"
setfattr -n trusted.x -v 1 "$mnt/f" || fail "nouser_xattr: trusted.x refused"
( umask 027; mkdir "$mnt/d"; touch "$mnt/g" )
check "noacl: the kernel applies the umask (dir)" test "$(stat -c %a "$mnt/d")" = 750
check "noacl: the kernel applies the umask (file)" test "$(stat -c %a "$mnt/g")" = 640
umount_recon "$mnt"
fsck_clean "$img" "noacl"

# set-id clearing by the daemon reaches the kernel's cache at once: the
# user's write drops S_ISUID, and the very next stat (no timeout expired)
# shows it
mkimg "$img" 4096 64M
mount_recon "$img" "$mnt" allow_other || die "mount allow_other"
chmod 777 "$mnt"
printf 'x' >"$mnt/suid"; chmod 4777 "$mnt/suid"
stat -c %a "$mnt/suid" >/dev/null
as_user sh -c "printf y >> '$mnt/suid'" || fail "user write"
check "S_ISUID cleared in the kernel's view" test "$(stat -c %a "$mnt/suid")" = 777
printf 'x' >"$mnt/sgid"; chmod 2777 "$mnt/sgid"
stat -c %a "$mnt/sgid" >/dev/null
as_user sh -c "exec 3>>'$mnt/sgid'; printf y >&3" || fail "user write sgid"
check "S_ISGID (group-executable) cleared in the kernel's view" test "$(stat -c %a "$mnt/sgid")" = 777
# ACLs and flags written here, read by the kernel
mkdir "$mnt/acl"; setfacl -m u:"$TEST_UID":rx,d:u:"$TEST_UID":rwx "$mnt/acl"
touch "$mnt/acl/inh"; chattr +i +d "$mnt/acl/inh"
(cd "$mnt" && getfacl -n acl acl/inh) >"$SCRATCH/ours.acl" 2>/dev/null
lsattr -d "$mnt/acl/inh" | cut -d' ' -f1 >"$SCRATCH/ours.attr"
umount_recon "$mnt"
fsck_clean "$img" "acls and flags"
kmount "$img" "$kmnt" || die "kernel mount"
(cd "$kmnt" && getfacl -n acl acl/inh) >"$SCRATCH/kernel.acl" 2>/dev/null
lsattr -d "$kmnt/acl/inh" | cut -d' ' -f1 >"$SCRATCH/kernel.attr"
check "the kernel reads our ACLs" cmp -s "$SCRATCH/ours.acl" "$SCRATCH/kernel.acl"
check "the kernel reads our flags" cmp -s "$SCRATCH/ours.attr" "$SCRATCH/kernel.attr"
# and the other way: the kernel's ACLs and flags, read by us
setfacl -m g:4321:rw "$kmnt/acl"; chattr -i "$kmnt/acl/inh"; chattr +a "$kmnt/acl/inh"
(cd "$kmnt" && getfacl -n acl) >"$SCRATCH/kernel2.acl" 2>/dev/null
kumount "$kmnt"
mount_recon "$img" "$mnt" || die "mount after the kernel"
(cd "$mnt" && getfacl -n acl) >"$SCRATCH/ours2.acl" 2>/dev/null
check "we read the kernel's ACLs" cmp -s "$SCRATCH/kernel2.acl" "$SCRATCH/ours2.acl"
check "we honour the kernel's append-only flag" sh -c "! printf x > '$mnt/acl/inh' 2>/dev/null"
chattr -a "$mnt/acl/inh"
umount_recon "$mnt"
fsck_clean "$img" "after both"

# a root mount with -o dev,suid serves device nodes and set-id programs as
# the kernel's ext3 does; without them (libfuse's default) it does not
mkimg "$img" 4096 64M
mount_recon "$img" "$mnt" dev,suid,allow_other || die "mount dev,suid"
chmod 755 "$mnt"; mknod "$mnt/null" c 1 3; chmod 666 "$mnt/null"
cp /usr/bin/id "$mnt/id"; chmod 4755 "$mnt/id"
check "dev: a device node opens" sh -c "echo x >'$mnt/null'"
check "suid: a set-user-id program runs with its owner's uid" test "$(as_user "$mnt/id" -u)" = 0
umount_recon "$mnt"
mount_recon "$img" "$mnt" allow_other || die "mount without dev,suid"
sh -c "echo x >'$mnt/null'" 2>/dev/null && fail "nodev: a device node opened"
check "nosuid: the program runs as the user" test "$(as_user "$mnt/id" -u)" = "$TEST_UID"
umount_recon "$mnt"
fsck_clean "$img" "dev,suid"

# stable file handles across a remount (FUSE_EXPORT_SUPPORT)
fh() {
	python3 - "$@" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
class FH(ctypes.Structure):
    _fields_ = [("handle_bytes", ctypes.c_uint), ("handle_type", ctypes.c_int),
                ("f_handle", ctypes.c_ubyte * 128)]
mode, mnt, store = sys.argv[1:4]
names = ("file", "dir", "dir/inner", "gone")
if mode == "save":
    out = []
    for n in names:
        h, mid = FH(handle_bytes=128), ctypes.c_int()
        if libc.name_to_handle_at(-100, os.path.join(mnt, n).encode(), ctypes.byref(h),
                                  ctypes.byref(mid), 0):
            sys.exit("name_to_handle_at %s: %s" % (n, os.strerror(ctypes.get_errno())))
        out.append(bytes(h).hex())
    open(store, "w").write("\n".join(out))
else:
    for n, hx in zip(names, open(store).read().split()):
        h = FH.from_buffer_copy(bytes.fromhex(hx))
        mfd = os.open(mnt, os.O_RDONLY)
        fd = libc.open_by_handle_at(mfd, ctypes.byref(h), os.O_RDONLY)
        err = ctypes.get_errno()
        os.close(mfd)
        if fd < 0:
            print(n, os.strerror(err))
            continue
        print(n, os.read(fd, 64).decode().strip() if n != "dir" else
              os.readlink("/proc/self/fd/%d" % fd)[len(mnt):])
        os.close(fd)
PY
}
mkimg "$img" 4096 64M
mount_recon "$img" "$mnt" || die "mount for handles"
echo data >"$mnt/file"; mkdir "$mnt/dir"; echo inner >"$mnt/dir/inner"; touch "$mnt/gone"
fh save "$mnt" "$SCRATCH/handles" || fail "name_to_handle_at"
rm "$mnt/gone"
umount_recon "$mnt"
mount_recon "$img" "$mnt" || die "remount for handles"
touch "$mnt/new"                    # may take the deleted file's inode
fh open "$mnt" "$SCRATCH/handles" >"$SCRATCH/opened" || fail "open_by_handle_at"
printf 'file data\ndir /dir\ndir/inner inner\ngone Stale file handle\n' >"$SCRATCH/want"
check "file handles after a remount" cmp -s "$SCRATCH/want" "$SCRATCH/opened"
umount_recon "$mnt"
fsck_clean "$img" "handles"
finish
