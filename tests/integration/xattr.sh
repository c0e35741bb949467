#!/bin/bash
# Extended attributes: the four calls (set, get, list, remove) with their
# errno cases, in-inode (256-byte inodes) and in a block (128-byte inodes),
# namespaces, on files and directories, identical sets on several files (the
# kernel shares one block between them), values after a remount; with the
# setfattr/getfattr tools as well.
. "$(dirname "$0")/lib.sh"
fs_from_arg "$@"
need_root
command -v setfattr >/dev/null || skip "no setfattr (package attr)"

for cfg in "1024 128" "4096 256" "1024 256"; do
	set -- $cfg
	bs=$1 isz=$2
	img="$SCRATCH/xattr-$bs-$isz.img" mnt="$SCRATCH/mnt"
	mkimg "$img" "$bs" 32M -I "$isz"
	mount_recon "$img" "$mnt" || die "mount ($bs/$isz)"
	python3 - "$mnt" "$bs" <<'EOF' || fail "xattr calls ($bs/$isz)"
import errno, os, sys
from pylib import *
m, bs = sys.argv[1], int(sys.argv[2])
c = Checker("xattr-%d" % bs)
os.chdir(m)
open("f", "w").close()
os.mkdir("d")
os.symlink("f", "s")
c.succeeds(os.setxattr, "f", "user.small", b"1")
c.succeeds(os.setxattr, "f", "user.empty", b"")
c.succeeds(os.setxattr, "f", "trusted.t", b"trusted value")
c.succeeds(os.setxattr, "f", "security.s", b"sec")
c.succeeds(os.setxattr, "d", "user.ondir", b"dir value")
c.eq(os.getxattr("f", "user.small"), b"1", "getxattr")
c.eq(os.getxattr("f", "user.empty"), b"", "empty value")
c.eq(os.getxattr("f", "trusted.t"), b"trusted value", "trusted namespace")
c.eq(os.getxattr("f", "security.s"), b"sec", "security namespace")
c.eq(os.getxattr("d", "user.ondir"), b"dir value", "xattr on a directory")
c.eq(sorted(os.listxattr("f")), ["security.s", "trusted.t", "user.empty", "user.small"], "listxattr")
c.errno(errno.ENODATA, os.getxattr, "f", "user.none")
c.errno(errno.ENODATA, os.removexattr, "f", "user.none")
c.errno(errno.EEXIST, os.setxattr, "f", "user.small", b"2", os.XATTR_CREATE)
c.errno(errno.ENODATA, os.setxattr, "f", "user.none", b"2", os.XATTR_REPLACE)
c.succeeds(os.setxattr, "f", "user.small", b"replaced", os.XATTR_REPLACE)
c.eq(os.getxattr("f", "user.small"), b"replaced", "XATTR_REPLACE")
c.errno(errno.EOPNOTSUPP, os.setxattr, "f", "bogus.ns", b"1")
c.errno(errno.EPERM, os.setxattr, "s", "user.x", b"1", follow_symlinks=False)
c.errno(errno.ERANGE, os.setxattr, "f", "user." + "n" * 251, b"1")
c.errno(errno.E2BIG, os.setxattr, "f", "user.huge", b"v" * 70000)
c.errno(errno.ENOSPC, os.setxattr, "f", "user.toobig", b"v" * bs)
c.errno(errno.ENOENT, os.setxattr, "missing", "user.x", b"1")
# a value that needs the block, growing and shrinking
big = pattern("xv", bs // 4)
c.succeeds(os.setxattr, "f", "user.big", big)
c.eq(os.getxattr("f", "user.big"), big, "large value")
c.succeeds(os.setxattr, "f", "user.big", big[:10])
c.eq(os.getxattr("f", "user.big"), big[:10], "shrunk value")
c.succeeds(os.setxattr, "f", "user.big", big)
# many attributes
for i in range(12):
    os.setxattr("f", "user.many%02d" % i, b"%d" % i)
c.eq(len(os.listxattr("f")), 17, "listxattr after many")
for i in range(0, 12, 2):
    os.removexattr("f", "user.many%02d" % i)
c.eq(sorted(a for a in os.listxattr("f") if a.startswith("user.many")),
     ["user.many%02d" % i for i in range(1, 12, 2)], "removexattr")
# identical sets on several files, then diverging: shared blocks stay right
for n in ("g1", "g2", "g3"):
    open(n, "w").close()
    os.setxattr(n, "user.shared", big)
os.setxattr("g2", "user.shared", b"changed")
os.removexattr("g3", "user.shared")
c.eq(os.getxattr("g1", "user.shared"), big, "g1 keeps the shared value")
c.eq(os.getxattr("g2", "user.shared"), b"changed", "g2 changed")
c.errno(errno.ENODATA, os.getxattr, "g3", "user.shared")
os.unlink("g1")
c.eq(os.getxattr("g2", "user.shared"), b"changed", "g2 after g1's removal")
c.done()
EOF
	# the command-line tools
	setfattr -n user.tool -v '"from setfattr"' "$mnt/f" || fail "setfattr ($bs/$isz)"
	[ "$(getfattr --only-values -n user.tool "$mnt/f" 2>/dev/null)" = "from setfattr" ] ||
		fail "getfattr ($bs/$isz)"
	getfattr -d -m - "$mnt/f" >"$SCRATCH/dump-before" 2>/dev/null || fail "getfattr -d ($bs/$isz)"
	umount_recon "$mnt"
	fsck_clean "$img" "after xattrs ($bs/$isz)"
	mount_recon "$img" "$mnt" || die "remount ($bs/$isz)"
	getfattr -d -m - "$mnt/f" >"$SCRATCH/dump-after" 2>/dev/null
	cmp -s "$SCRATCH/dump-before" "$SCRATCH/dump-after" || fail "xattrs differ after remount ($bs/$isz)"
	[ "$(getfattr --only-values -n user.ondir "$mnt/d" 2>/dev/null)" = "dir value" ] ||
		fail "directory xattr after remount ($bs/$isz)"
	setfattr -x user.tool "$mnt/f" || fail "setfattr -x ($bs/$isz)"
	rm -f "$mnt/f"
	umount_recon "$mnt"
	fsck_clean "$img" "after the remount ($bs/$isz)"
	rm -f "$img"
done
finish
