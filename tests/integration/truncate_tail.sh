#!/bin/bash
# A truncate down that does not end on a block boundary, cut by power at
# every device write: fsynced bytes below the new size never turn to zeros.
# Two files, written and fsynced (old size 20 blocks + 123 bytes), are cut
# to 5 blocks + 777 bytes and fsynced; a power cut (fault_crash_after) after
# each write of that workload.  After our recovery and after the kernel's,
# each file is its old size with its old bytes or its new size with the old
# bytes up to it.  After our recovery each file is then extended, which must
# show zeros past the new size even when the cut fell between the commit of
# the smaller size and the zeroing of the block's tail: f by a truncate up,
# g by a write two blocks past EOF, h by fallocate, k by a write inside the
# block holding EOF (two of them per image, each on ext3 and on ext4).
# ext3 and ext4 images, 1 KiB and 4 KiB blocks; e2fsck -fn clean and no
# orphans after every recovery.
. "$(dirname "$0")/lib.sh"
need_root
need_kernel_ext4
mnt="$SCRATCH/mnt"

# base.py MNT NAMES: the files, written and fsynced
cat >"$SCRATCH/base.py" <<'EOF'
import os, sys
from pylib import pattern
m, names = sys.argv[1], sys.argv[2]
bs = os.statvfs(m).f_bsize
for n in names:
    fd = os.open(os.path.join(m, n), os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, pattern(n, 20 * bs + 123))
    os.fsync(fd)
    os.close(fd)
EOF

# cut.py MNT: the workload, cut by power (the files are the ones there)
cat >"$SCRATCH/cut.py" <<'EOF'
import os, sys
m = sys.argv[1]
bs = os.statvfs(m).f_bsize
for n in sorted(x for x in os.listdir(m) if len(x) == 1):
    try:
        fd = os.open(os.path.join(m, n), os.O_WRONLY)
        os.ftruncate(fd, 5 * bs + 777)
        os.fsync(fd)
        os.close(fd)
    except OSError:
        pass
EOF

# cut_check.py MNT WHAT: the files after a recovery
cat >"$SCRATCH/cut_check.py" <<'EOF'
import os, sys
from pylib import Checker, pattern, fallocate
m, what = sys.argv[1], sys.argv[2]
c = Checker("truncate_tail " + what)
bs = os.statvfs(m).f_bsize
old, new = 20 * bs + 123, 5 * bs + 777
def disk_read(p):
    """p's bytes from the disk, not from pages the kernel cached (a page read
    before the extension holds zeros past the old EOF whatever the disk has)"""
    fd = os.open(p, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    got = b""
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            break
        got += b
    os.close(fd)
    return got
kinds = {"f": "truncate up", "g": "write past EOF", "h": "fallocate", "k": "write in the EOF block"}
for n in sorted(x for x in os.listdir(m) if len(x) == 1):
    p = os.path.join(m, n)
    data = pattern(n, old)
    size = os.stat(p).st_size
    if not c.ok(size in (old, new), "%s is %d bytes: neither its old size %d nor its new %d"
                % (n, size, old, new)):
        continue
    got = open(p, "rb").read()
    bad = next((i for i in range(size) if got[i] != data[i]), None)
    if not c.ok(bad is None, "%s's content (%d bytes): differs from byte %s" % (n, size, bad)):
        continue
    if "our recovery" not in what or size != new:
        continue
    # extend past the new EOF: what lies between reads as zeros
    fd = os.open(p, os.O_RDWR)
    if n == "f":
        os.ftruncate(fd, new + 3 * bs)
        gap = (new, new + 3 * bs)
    elif n == "g":
        os.pwrite(fd, b"G" * 10, new + 2 * bs)
        gap = (new, new + 2 * bs)
    elif n == "h":
        fallocate(fd, 0, new, 3 * bs)
        gap = (new, new + 3 * bs)
    else:
        os.pwrite(fd, b"K" * 10, new + 100)
        gap = (new, new + 100)
    os.fsync(fd)
    os.close(fd)
    got = disk_read(p)
    c.ok(got[:new] == data[:new], "%s's bytes below the new size after the %s" % (n, kinds[n]))
    stale = sum(1 for b in got[gap[0]:gap[1]] if b)
    c.ok(stale == 0, "%s after the %s: %d stale bytes past the truncated size" % (n, kinds[n], stale))
c.done()
EOF

for case in "ext3 1024 fg" "ext3 4096 hk" "ext4 1024 hk" "ext4 4096 fg"; do
	read -r kind bs names <<<"$case"
	base="$SCRATCH/base.img"
	rm -f "$base"
	truncate -s 32M "$base"
	mke2fs -F -q -t "$kind" -b "$bs" -O ^orphan_file "$base" >"$SCRATCH/mke2fs.out" 2>&1 ||
		{ cat "$SCRATCH/mke2fs.out"; die "mke2fs $kind $bs"; }
	mount_recon "$base" "$mnt" || die "mount ($kind, $bs-byte blocks)"
	python3 "$SCRATCH/base.py" "$mnt" "$names" || fail "$kind $bs: the files"
	umount_recon "$mnt"
	log "$kind, $bs-byte blocks, files $names"
	cut_clean_run "$base" deterministic "$SCRATCH/cut.py"
	# after each write from the second (the first is the mount's) to
	# the last but one (a cut after the last is the clean run); CI cuts
	# after every TRUNCATE_TAIL_EVERY-th (default 4: about 7 per image,
	# evenly spread), TRUNCATE_TAIL_EVERY=1 after every one
	every=${TRUNCATE_TAIL_EVERY:-4}
	if [ "$every" -le 1 ]; then
		cut_sweep "$base" $((CUT_WRITES - 1)) deterministic "" "$kind" \
			"$SCRATCH/cut.py" "$SCRATCH/cut_check.py" 2
	else
		# the first point whose cut falls after the mount's write
		points=$(((CUT_WRITES - 1) / every))
		cut_sweep "$base" "$points" deterministic "" "$kind" \
			"$SCRATCH/cut.py" "$SCRATCH/cut_check.py" $(((2 * (points + 1) + CUT_WRITES - 1) / CUT_WRITES))
	fi
done
finish
