#!/bin/bash
# Hard links (counts, shared data, across directories, surviving the removal
# of the first name) and symlinks: fast (target up to 59 bytes, in the inode)
# and slow (60 bytes and more, in a block), relative, absolute, chains, loops.
# After a remount everything reads the same; debugfs confirms fast vs slow.
. "$(dirname "$0")/lib.sh"
fs_from_arg "$@"
need_root

for bs in 1024 4096; do
	img="$SCRATCH/links-$bs.img" mnt="$SCRATCH/mnt"
	mkimg "$img" "$bs" 32M
	mount_recon "$img" "$mnt" || die "mount ($bs)"
	python3 - write "$mnt" "$bs" <<'EOF' || fail "links ($bs)"
import errno, os, stat, sys
from pylib import *
mode, m, bs = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = Checker("links-%d" % bs)
os.chdir(m)
os.makedirs("a/b")
os.mkdir("c")
data = pattern("hl", 3 * bs + 5)
open("a/orig", "wb").write(data)
for i, p in enumerate(("a/b/l1", "c/l2", "l3", "a/l4")):
    os.link("a/orig", p)
    c.eq(os.stat("a/orig").st_nlink, i + 2, "nlink after link %d" % (i + 1))
c.ok(len({os.stat(p).st_ino for p in ("a/orig", "a/b/l1", "c/l2", "l3", "a/l4")}) == 1, "all links share the inode")
with open("c/l2", "r+b") as f:
    f.seek(bs)
    f.write(b"THROUGH-L2")
data = data[:bs] + b"THROUGH-L2" + data[bs + 10:]
c.ok(open("a/b/l1", "rb").read() == data, "a write through one link is seen through another")
os.unlink("a/orig")
c.eq(os.stat("l3").st_nlink, 4, "nlink after removing the first name")
c.ok(open("l3", "rb").read() == data, "data survives removal of the first name")
os.rename("a/l4", "c/l4")
c.eq(os.stat("c/l4").st_nlink, 4, "rename of a link keeps nlink")
os.link("l3", "a/b/l1x")      # link of a link name
c.eq(os.stat("l3").st_nlink, 5, "link via another link")

# symlinks
targets = {}
for n in (1, 2, 58, 59, 60, 61, 100, bs - 1):
    t = ("%d-" % n + "t" * n)[:n]
    targets["s%d" % n] = t
    os.symlink(t, "s%d" % n)
for name, t in targets.items():
    c.eq(os.readlink(name), t, "readlink " + name)
    c.eq(os.lstat(name).st_size, len(t), "lstat size of " + name)
os.symlink("a/b", "rel-dir")
os.symlink(os.path.join(m, "l3"), "abs-file")
os.symlink("rel-dir/l1", "chain1")
os.symlink("chain1", "chain2")
os.symlink("loop2", "loop1")
os.symlink("loop1", "loop2")
c.ok(os.path.isdir("rel-dir") and os.path.exists("rel-dir/l1"), "a symlink to a directory resolves")
c.ok(open("abs-file", "rb").read() == data, "absolute symlink resolves")
c.ok(open("chain2", "rb").read() == data, "symlink chain resolves")
c.errno(errno.ELOOP, os.stat, "loop1")
c.errno(errno.ENOENT, os.stat, "s1")       # target "1" does not exist
os.symlink("t" * 200, "a/b/slow-in-subdir")
c.eq(os.readlink("a/b/slow-in-subdir"), "t" * 200, "slow symlink in a subdirectory")
os.unlink("s61")
c.errno(errno.ENOENT, os.lstat, "s61")
os.rename("s100", "c/s100")
c.eq(os.readlink("c/s100"), targets["s100"], "renamed slow symlink")
c.done()
EOF
	umount_recon "$mnt"
	fsck_clean "$img" "after links ($bs)"
	# fast vs slow, as the kernel decides: a target of up to 59 bytes lives in the inode
	for n in 1 58 59; do
		debugfs -R "stat /s$n" "$img" 2>/dev/null | grep -q 'Fast link dest' ||
			fail "/s$n ($n bytes) is not a fast symlink ($bs)"
	done
	for n in 60 $((bs - 1)); do
		debugfs -R "stat /s$n" "$img" 2>/dev/null | grep -q 'Fast link dest' &&
			fail "/s$n ($n bytes) is a fast symlink; the kernel makes it slow ($bs)"
		[ "$(debugfs -R "cat /s$n" "$img" 2>/dev/null | head -c $((${#n} + 1)))" = "$n-" ] ||
			fail "slow symlink /s$n: block content ($bs)"
	done
	mount_recon "$img" "$mnt" || die "remount ($bs)"
	[ "$(readlink "$mnt/s59")" = "59-$(printf 't%.0s' $(seq 56))" ] || fail "s59 after remount ($bs)"
	[ "$(readlink "$mnt/c/s100" | wc -c)" = 101 ] || fail "c/s100 after remount ($bs)"
	[ "$(stat -c %h "$mnt/l3")" = 5 ] || fail "nlink after remount ($bs)"
	cmp -s "$mnt/chain2" "$mnt/abs-file" || fail "links read differently after remount ($bs)"
	rm -f "$mnt/l3" "$mnt/c/l2" "$mnt/c/l4" "$mnt/a/b/l1x"
	[ "$(stat -c %h "$mnt/a/b/l1")" = 1 ] || fail "nlink after removing 4 of 5 names ($bs)"
	umount_recon "$mnt"
	fsck_clean "$img" "after the remount ($bs)"
	rm -f "$img"
done
finish
