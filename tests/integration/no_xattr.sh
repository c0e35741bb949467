#!/bin/bash
# Images without the ext_attr feature: an ext3 image made with -O ^ext_attr
# (256-byte inodes: the first attributes go into the inode) and a revision-0
# image (mke2fs -r 0, where feature fields are not valid; 128-byte inodes:
# they go into a block).
# Everything but xattrs works (create, write, append, truncate, chmod, chown,
# rename, unlink; directories of another owner open with ACLs on), reading
# xattrs and ACLs answers "none" and leaves the feature off; the first
# setfattr / setfacl turns ext_attr on (a revision-0 superblock becomes
# revision 1 first), as the kernel does.  e2fsck -fn after every unmount; the
# kernel's driver reads the result back.
. "$(dirname "$0")/lib.sh"
need_root
command -v setfattr >/dev/null || skip "no setfattr (package attr)"
command -v setfacl >/dev/null || skip "no setfacl (package acl)"

# sb_field IMG NAME: a line of dumpe2fs -h
sb_field() { dumpe2fs -h "$1" 2>/dev/null | grep -m1 "^$2:" | sed "s/^$2:[[:space:]]*//"; }
has_ext_attr() { sb_field "$1" "Filesystem features" | grep -qw ext_attr; }

mnt="$SCRATCH/mnt" kmnt="$SCRATCH/kmnt"
for kind in noattr rev0; do
	img="$SCRATCH/$kind.img"
	rm -f "$img"
	truncate -s 32M "$img"
	if [ "$kind" = noattr ]; then
		mke2fs -F -q -t ext3 -b 1024 -I 256 -O ^ext_attr "$img" >/dev/null 2>&1 || die "mke2fs $kind"
		ktype=ext3
	else
		mke2fs -F -q -r 0 -b 4096 "$img" >/dev/null 2>&1 || die "mke2fs $kind"
		ktype=ext4   # (the kernel's ext3 wants a journal, revision 0 has none)
	fi
	has_ext_attr "$img" && die "$kind: mke2fs left ext_attr on"

	# everything but xattrs; reads of xattrs and ACLs answer "none"
	mount_recon "$img" "$mnt" || die "mount ($kind)"
	python3 - "$mnt" "$kind" <<'EOF' || fail "operations without ext_attr ($kind)"
import errno, os, sys
from pylib import *
m, kind = sys.argv[1], sys.argv[2]
c = Checker("no_xattr-" + kind)
os.chdir(m)
c.succeeds(os.listdir, ".")
with open("f", "w") as f:
    c.succeeds(f.write, "hello\n")
with open("f", "a") as f:
    c.succeeds(f.write, "more\n")
c.eq(open("f").read(), "hello\nmore\n", "write and append")
c.succeeds(os.truncate, "f", 3)
c.eq(os.stat("f").st_size, 3, "truncate")
c.succeeds(os.chmod, "f", 0o640)
c.eq(os.stat("f").st_mode & 0o7777, 0o640, "chmod")
c.succeeds(os.chown, "f", 1234, 1234)
c.eq((os.stat("f").st_uid, os.stat("f").st_gid), (1234, 1234), "chown")
c.succeeds(os.rename, "f", "g")
c.succeeds(os.mkdir, "d")
# a directory of another owner with group bits: the kernel's ACL check asks
# for system.posix_acl_access, which must answer "none", not an error
c.succeeds(os.chown, "d", 1234, 1234)
c.succeeds(os.chmod, "d", 0o775)
with open("d/inside", "w") as f:
    f.write("x")
c.eq(os.listdir("d"), ["inside"], "listing another owner's directory")
c.succeeds(os.stat, "d/inside")
c.succeeds(os.link, "g", "d/hard")
c.succeeds(os.symlink, "g", "sym")
c.succeeds(os.unlink, "d/hard")
c.succeeds(os.unlink, "sym")
# nothing stored, nothing to find; none of this turns the feature on
c.eq(os.listxattr("g"), [], "listxattr")
c.eq(os.listxattr("d"), [], "listxattr of a directory")
c.errno(errno.ENODATA, os.getxattr, "g", "user.x")
c.errno(errno.ENODATA, os.getxattr, "d", "system.posix_acl_access")
c.errno(errno.ENODATA, os.getxattr, "d", "system.posix_acl_default")
c.errno(errno.ENODATA, os.removexattr, "g", "user.x")
c.errno(errno.ENODATA, os.setxattr, "g", "user.x", b"1", os.XATTR_REPLACE)
c.done()
EOF
	getfattr -d -m - "$mnt/g" "$mnt/d" >"$SCRATCH/getfattr.out" 2>&1 || fail "getfattr ($kind)"
	[ -s "$SCRATCH/getfattr.out" ] && fail "getfattr shows something ($kind): $(head -c 200 "$SCRATCH/getfattr.out")"
	getfacl -p "$mnt/d" >"$SCRATCH/getfacl.out" 2>&1 || fail "getfacl ($kind): $(cat "$SCRATCH/getfacl.out")"
	grep -q '^group::rwx' "$SCRATCH/getfacl.out" || fail "getfacl does not show the mode ($kind)"
	# an ACL the mode says all of, and removing ACLs that are not there: no xattr stored
	setfacl -m u::rwx,g::r-x,o::r-x "$mnt/g" || fail "setfacl of a mode-equivalent ACL ($kind)"
	[ "$(stat -c %a "$mnt/g")" = 755 ] || fail "the mode-equivalent ACL did not set the mode ($kind)"
	setfacl -b "$mnt/g" || fail "setfacl -b ($kind)"
	setfacl -k "$mnt/d" || fail "setfacl -k ($kind)"
	umount_recon "$mnt"
	fsck_clean "$img" "after the operations ($kind)"
	has_ext_attr "$img" && fail "$kind: ext_attr on without an xattr stored"
	if [ "$kind" = rev0 ]; then
		rev=$(sb_field "$img" "Filesystem revision #")
		[ "${rev%% *}" = 0 ] || fail "rev0: revision $rev without an xattr stored"
	fi

	# the first xattr and ACL turn the feature on
	mount_recon "$img" "$mnt" || die "remount ($kind)"
	setfattr -n user.x -v '"first"' "$mnt/g" || fail "setfattr user.x ($kind)"
	setfacl -m u:1234:rwx "$mnt/d" || fail "setfacl ($kind)"
	setfacl -d -m u:1234:rx "$mnt/d" || fail "setfacl -d ($kind)"
	touch "$mnt/d/new" || fail "create under a default ACL ($kind)"
	[ "$(getfattr --only-values -n user.x "$mnt/g" 2>/dev/null)" = first ] || fail "getfattr user.x ($kind)"
	getfacl -p "$mnt/d/new" 2>/dev/null | grep -q '^user:1234:r-x' ||
		fail "the new file did not inherit the default ACL ($kind)"
	umount_recon "$mnt"
	fsck_clean "$img" "after the first xattr ($kind)"
	has_ext_attr "$img" || fail "$kind: ext_attr still off after setfattr (dumpe2fs: $(sb_field "$img" "Filesystem features"))"
	if [ "$kind" = rev0 ]; then
		rev=$(sb_field "$img" "Filesystem revision #")
		[ "${rev%% *}" = 1 ] || fail "rev0: revision $rev after the first xattr, want 1"
		[ "$(sb_field "$img" "First inode")" = 11 ] || fail "rev0: first inode $(sb_field "$img" "First inode")"
		[ "$(sb_field "$img" "Inode size")" = 128 ] || fail "rev0: inode size $(sb_field "$img" "Inode size")"
	fi

	# the kernel reads it back
	if have_kernel_ext3; then
		mkdir -p "$kmnt"
		if mount -t "$ktype" -o loop,ro "$img" "$kmnt"; then
			MOUNTS+=("$kmnt")
			[ "$(getfattr --only-values -n user.x "$kmnt/g" 2>/dev/null)" = first ] ||
				fail "the kernel ($ktype) does not read user.x back ($kind)"
			getfacl -p "$kmnt/d" 2>/dev/null | grep -q '^user:1234:rwx' ||
				fail "the kernel ($ktype) does not read the ACL back ($kind)"
			getfacl -p "$kmnt/d/new" 2>/dev/null | grep -q '^user:1234:r-x' ||
				fail "the kernel ($ktype) does not read the inherited ACL back ($kind)"
			umount "$kmnt" || fail "umount the kernel's mount ($kind)"
		else
			fail "the kernel's $ktype does not mount the result ($kind)"
		fi
		fsck_clean "$img" "after the kernel's read-only mount ($kind)"
	else
		log "no kernel ext3/ext4: the kernel's view not checked"
	fi
	rm -f "$img"
done

# The commit that turns ext_attr on (and a revision-0 image to revision 1)
# rejected: the daemon goes read-only, takes the disk's superblock back
# without calling it overwritten, and the image keeps its old revision.
for kind in noea rev0; do
	img="$SCRATCH/rej-$kind.img"
	truncate -s 32M "$img"
	if [ "$kind" = rev0 ]; then mke2fs -F -q -r 0 "$img"; else mke2fs -F -q -t ext3 -O ^ext_attr "$img"; fi \
		>/dev/null 2>&1 || die "mke2fs ($kind, rejection)"
	debugfs -w -R "write /etc/hostname f" "$img" >/dev/null 2>&1
	if mount_recon "$img" "$mnt" sync,fault_corrupt=links@1; then
		setfattr -n user.x -v 1 "$mnt/f" 2>/dev/null && fail "$kind: setfattr succeeded in a rejected commit"
		touch "$mnt/g" 2>/dev/null && fail "$kind: a write after the rejection succeeded"
		umount_recon "$mnt" 3
		grep -q "no longer describes" "$RECON_LOG" &&
			fail "$kind: after the rejection the disk's superblock was called overwritten"
		has_ext_attr "$img" && fail "$kind: ext_attr on disk after its commit was rejected"
		fsck_clean "$img" "after the rejected first xattr ($kind)"
	else
		fail "$kind: mount for the rejection case"
	fi
	rm -f "$img"
done
finish
