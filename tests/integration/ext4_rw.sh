#!/bin/bash
# ext4 images read-write, every commit approved by the checker: extent-mapped
# files as the kernel's ext4 keeps them.  Images: mkfs.ext4's defaults (extent,
# 64bit, flex_bg,
# metadata_csum, huge_file, dir_nlink, extra_isize) and e2fsprogs 1.47's
# (the same with metadata_csum_seed), at 1 KiB and 4 KiB blocks.  On each:
#  1. unwritten extents (fallocate) written into, partly and unaligned, and
#     read back (zeros around the new bytes; SEEK_DATA skips them as holes);
#     fallocate KEEP_SIZE past EOF; a hole punched inside one extent; a
#     tree of depth >= 2 (every other block written) truncated to a third;
#     new files, directories and slow symlinks extent-mapped; a write at the
#     largest offset an extent addresses (and EFBIG one block further;
#     without huge_file the kernel's lower limit);
#  2. a fragmented file removed with -o max_transaction_blocks=16: its
#     release spans several commits;
#  3. after each mount: the daemon exits 0, e2fsck -fn is clean, and a
#     read-only remount and the kernel's ext4 read the same bytes (and
#     debugfs shows the trees: depth, unwritten extents);
#  4. power cuts (fault_crash_after) inside the release of a fragmented
#     file and a truncate spanning commits: our recovery and the kernel's
#     leave a clean image, the truncated file its old size or its new.
. "$(dirname "$0")/lib.sh"
# the checker approves every commit (EXT4_CHECKER=off: the driver alone)
ext4_checker=${EXT4_CHECKER:-on}
need_root
need_kernel_ext4
command -v debugfs >/dev/null || skip "no debugfs"
mnt="$SCRATCH/mnt"
kmnt="$SCRATCH/kmnt"
mkdir -p "$mnt" "$kmnt"

# the largest depth of NAME's extent tree, and its unwritten extents
ext_depth() { debugfs -R "ex $2" "$1" 2>/dev/null | awk 'NR == 2 { print $2 + 0 }'; }
ext_uninit() { debugfs -R "ex $2" "$1" 2>/dev/null | grep -c Uninit; }

# mkext4 IMG BS SIZE KIND: Debian 12's mkfs.ext4 defaults, or 1.47's (seed)
mkext4() {
	local img=$1 bs=$2 size=$3 kind=$4
	rm -f "$img"
	truncate -s "$size" "$img" || die "truncate $img"
	local o=()
	[ "$kind" = seed ] && o=(-O metadata_csum_seed)
	# orphan_file (1.47.1's default) is refused read-write: never asked for
	mke2fs -F -q -t ext4 -b "$bs" "${o[@]}" "$img" >"$SCRATCH/mke2fs.out" 2>&1 ||
		{ cat "$SCRATCH/mke2fs.out"; die "mke2fs $img"; }
	dumpe2fs -h "$img" 2>/dev/null | grep -q 'features:.*orphan_file' &&
		tune2fs -O ^orphan_file "$img" >/dev/null 2>&1
	return 0
}

# cases.py MNT BS OUT: the deterministic cases; OUT gets the expected
# sha256 of every file (the kernel's walk must match it).
cat >"$SCRATCH/cases.py" <<'EOF'
import errno, hashlib, os, sys
from pylib import Checker, pattern, fallocate, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE
m, bs, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
c = Checker("ext4_rw cases bs %d" % bs)
def p(n):
    return os.path.join(m, n)
def rd(n):
    # through recon-fuse, not the kernel's page cache
    with open(p(n), "rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        return f.read()

# unwritten extents: a 1 MiB fallocate, written into in three places
fd = os.open(p("uw"), os.O_RDWR | os.O_CREAT, 0o644)
fallocate(fd, 0, 0, 1 << 20)
want = bytearray(1 << 20)
for off, data in ((256 << 10, pattern("a", 3 * bs)), (100, b"x" * 77), ((1 << 20) - 5, b"tail!")):
    os.pwrite(fd, data, off)
    want[off:off + len(data)] = data
os.close(fd)
c.eq(rd("uw") == bytes(want), True, "an unwritten extent written into reads back")
fd = os.open(p("uw"), os.O_RDONLY)
c.eq(os.lseek(fd, 256 << 10, os.SEEK_DATA), 256 << 10, "SEEK_DATA at written blocks")
c.eq(os.lseek(fd, 2 * bs, os.SEEK_DATA), 256 << 10, "SEEK_DATA skips unwritten blocks")
c.eq(os.lseek(fd, 256 << 10, os.SEEK_HOLE), (256 << 10) + 3 * bs, "SEEK_HOLE at unwritten blocks")
os.close(fd)

# fallocate KEEP_SIZE past EOF, then a write into it
fd = os.open(p("ks"), os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, pattern("ks", 10000))
fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 1 << 20)
st = os.fstat(fd)
c.eq(st.st_size, 10000, "KEEP_SIZE keeps the size")
c.ok(st.st_blocks * 512 >= 1 << 20, "KEEP_SIZE allocates (%d sectors)" % st.st_blocks)
os.pwrite(fd, b"past", 500000)
os.close(fd)
c.eq(rd("ks"), pattern("ks", 10000) + bytes(500000 - 10000) + b"past", "a write into KEEP_SIZE blocks")

# a hole punched inside one extent
data = bytearray(pattern("ps", 512 << 10))
with open(p("ps"), "wb") as f:
    f.write(data)
fd = os.open(p("ps"), os.O_RDWR)
fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 200 << 10, 64 << 10)
os.close(fd)
data[200 << 10:264 << 10] = bytes(64 << 10)
c.eq(rd("ps") == bytes(data), True, "a punch inside an extent")

# a deep tree: every other block, 6,000 extents; a hole punched across
# leaves (from a hole), then truncated to a third
n = 6000
fd = os.open(p("deep"), os.O_RDWR | os.O_CREAT, 0o644)
for i in range(n):
    os.pwrite(fd, b"%08d" % i, 2 * i * bs)
fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (2 * (n // 6) - 1) * bs,
          2 * (n // 4 - n // 6) * bs)
os.ftruncate(fd, 2 * (n // 3) * bs)
os.close(fd)
d = rd("deep")
c.eq(len(d), 2 * (n // 3) * bs, "the deep file's size after truncate")
def deep_want(i):
    return bytes(8) if n // 6 <= i < n // 4 else b"%08d" % i
bad = [i for i in range(n // 3) if d[2 * i * bs:2 * i * bs + 8] != deep_want(i)]
c.eq(bad[:3], [], "the deep file's blocks after the punch and the truncate")

# new files, directories, slow symlinks
os.makedirs(p("dir/sub"))
os.symlink("t" * 200, p("dir/slow"))
with open(p("dir/sub/f"), "wb") as f:
    f.write(pattern("f", 12345))
c.eq(os.readlink(p("dir/slow")), "t" * 200, "a slow symlink")

# the largest offset: 2^32 - 1 blocks
top = ((1 << 32) - 1) * bs
fd = os.open(p("top"), os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b"end", top - 3)
try:
    os.pwrite(fd, b"x", top)
    c.fail("a write at 2^32 - 1 blocks did not fail")
except OSError as e:
    c.eq(e.errno, errno.EFBIG, "a write past the largest size")
os.close(fd)
c.eq(os.stat(p("top")).st_size, top, "the largest file's size")
with open(out, "w") as o:
    for n in ("uw", "ks", "ps", "deep", "dir/sub/f"):
        o.write("%s %s\n" % (n, hashlib.sha256(rd(n)).hexdigest()))
c.done()
EOF

# check.py ROOT LIST: every file's sha256 as listed (the kernel's view)
cat >"$SCRATCH/check.py" <<'EOF'
import hashlib, os, sys
root, lst = sys.argv[1], sys.argv[2]
bad = 0
for line in open(lst):
    n, h = line.split()
    got = hashlib.sha256(open(os.path.join(root, n), "rb").read()).hexdigest()
    if got != h:
        print("FAIL: %s differs on the kernel's mount" % n)
        bad += 1
with open(os.path.join(root, "top"), "rb") as f:
    f.seek(os.fstat(f.fileno()).st_size - 3)
    if f.read() != b"end":
        print("FAIL: the largest file's last bytes")
        bad += 1
sys.exit(1 if bad else 0)
EOF

# leaves.py MNT BS LEAF...: O_DIRECT reads of the deep file from the first
# block of each leaf of its tree to the end of the leaf after it (a walk
# that starts on a leaf's first block and crosses into the next leaf)
cat >"$SCRATCH/leaves.py" <<'EOF'
import mmap, os, sys
m, bs, leaves = sys.argv[1], int(sys.argv[2]), [int(x) for x in sys.argv[3:]]
n = 6000
size = os.stat(os.path.join(m, "deep")).st_size
want = bytearray(size)
for i in range(n // 3):
    if not n // 6 <= i < n // 4:
        want[2 * i * bs:2 * i * bs + 8] = b"%08d" % i
fd = os.open(os.path.join(m, "deep"), os.O_RDONLY | os.O_DIRECT)
bad = 0
for a, b in zip(leaves, leaves[2:] + [size // bs]):
    n_bytes = min(b * bs, size) - a * bs
    if n_bytes <= 0:
        continue
    buf = mmap.mmap(-1, n_bytes)
    got = os.preadv(fd, [buf], a * bs)
    if buf[:got] != want[a * bs:a * bs + got] or got != n_bytes:
        print("FAIL: the deep file read from leaf start %d to %d differs" % (a, b))
        bad += 1
os.close(fd)
sys.exit(1 if bad else 0)
EOF

# frag.py MNT NAME N: N single-block extents (every other block)
cat >"$SCRATCH/frag.py" <<'EOF'
import os, sys
m, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
bs = os.statvfs(m).f_bsize
fd = os.open(os.path.join(m, name), os.O_RDWR | os.O_CREAT, 0o644)
for i in range(n):
    os.pwrite(fd, b"%08d" % i, 2 * i * bs)
os.close(fd)
EOF

for kind in default seed; do
	for bs in 1024 4096; do
		what="$kind, $bs-byte blocks"
		img="$SCRATCH/e4.img"
		mkext4 "$img" "$bs" 256M "$kind"
		# 1. the cases
		mount_recon "$img" "$mnt" checker=$ext4_checker || { fail "$what: mount"; continue; }
		python3 "$SCRATCH/cases.py" "$mnt" "$bs" "$SCRATCH/want" || fail "$what: cases"
		umount_recon "$mnt" || fail "$what: unmount"
		fsck_clean "$img" "$what, the cases"
		d=$(ext_depth "$img" deep)
		[ "${d:-0}" -ge 2 ] || fail "$what: the deep file's tree has depth $d, want >= 2"
		[ "$(ext_uninit "$img" uw)" -ge 2 ] || fail "$what: uw keeps no unwritten extents"
		[ "$(ext_uninit "$img" ks)" -ge 1 ] || fail "$what: ks keeps no unwritten extents"
		for f in dir dir/sub/f dir/slow; do
			debugfs -R "stat $f" "$img" 2>/dev/null | grep -q 'Flags: 0x80000' ||
				fail "$what: $f is not extent-mapped"
		done
		leaves=$(debugfs -R "ex deep" "$img" 2>/dev/null |
			 awk 'NR > 1 { split($1, a, "/"); if (a[1] + 1 == $2) print $5 }')
		[ "$(echo "$leaves" | wc -w)" -ge 3 ] || fail "$what: the deep file has too few leaves"
		if mount_recon "$img" "$mnt" ro,checker=$ext4_checker; then
			python3 "$SCRATCH/check.py" "$mnt" "$SCRATCH/want" || fail "$what: a remount reads other bytes"
			python3 "$SCRATCH/leaves.py" "$mnt" "$bs" $leaves || fail "$what: reads across leaves"
			umount_recon "$mnt"
		else
			fail "$what: the read-only remount"
		fi
		if mount -t ext4 -o ro,loop "$img" "$kmnt"; then
			MOUNTS+=("$kmnt")
			python3 "$SCRATCH/check.py" "$kmnt" "$SCRATCH/want" || fail "$what: the kernel reads other bytes"
			umount "$kmnt"
		else
			fail "$what: the kernel's ext4 does not mount it"
		fi
		# 2. a fragmented file's release across commits
		mount_recon "$img" "$mnt" checker=$ext4_checker || { fail "$what: mount 2"; continue; }
		python3 "$SCRATCH/frag.py" "$mnt" frag 4000 || fail "$what: frag"
		umount_recon "$mnt"
		free=$(free_blocks "$img")
		mount_recon "$img" "$mnt" "checker=$ext4_checker,max_transaction_blocks=16,stats=$SCRATCH/rm.json" ||
			{ fail "$what: mount 3"; continue; }
		rm "$mnt/frag" "$mnt/deep"
		umount_recon "$mnt"
		fsck_clean "$img" "$what, a release across commits"
		n=$(stat_of "$SCRATCH/rm.json" transactions)
		[ "${n:-0}" -ge 3 ] || fail "$what: the release took $n transactions, want several"
		[ "$(free_blocks "$img")" -gt "$free" ] || fail "$what: nothing freed"
	done
done

# limit.py ROOT BS: without huge_file i_blocks caps a file below 2^32 - 1
# blocks: the last byte below the kernel's limit is written, the next one
# is EFBIG
cat >"$SCRATCH/limit.py" <<'EOF'
import errno, os, sys
root, bits = sys.argv[1], {1024: 10, 4096: 12}[int(sys.argv[2])]
top = (((1 << 32) - 1) >> (bits - 9)) << bits
fd = os.open(os.path.join(root, "limit%d" % os.getpid()), os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b"z", top - 1)
try:
    os.pwrite(fd, b"z", top)
    print("FAIL: a write at %d did not fail" % top)
    sys.exit(1)
except OSError as e:
    sys.exit(0 if e.errno == errno.EFBIG else 1)
EOF

for bs in 1024 4096; do
	img="$SCRATCH/nohuge.img"
	rm -f "$img"
	truncate -s 64M "$img"
	mke2fs -F -q -t ext4 -b "$bs" -O ^huge_file "$img" >/dev/null 2>&1 || die "mke2fs ^huge_file"
	mount_recon "$img" "$mnt" checker=$ext4_checker || { fail "^huge_file $bs: mount"; continue; }
	python3 "$SCRATCH/limit.py" "$mnt" "$bs" || fail "^huge_file $bs: the size limit"
	umount_recon "$mnt"
	fsck_clean "$img" "^huge_file, $bs-byte blocks"
	if mount -t ext4 -o loop "$img" "$kmnt"; then
		MOUNTS+=("$kmnt")
		python3 "$SCRATCH/limit.py" "$kmnt" "$bs" || fail "^huge_file $bs: the kernel's limit differs"
		umount "$kmnt"
	fi
done

# 4. power cuts inside a release and a truncate spanning commits
cut_truncate_unlink_scripts ext4_rw frag $((8 << 20))
base="$SCRATCH/cutbase.img"
mkext4 "$base" 1024 64M default
mount_recon "$base" "$mnt" checker=$ext4_checker || die "mount (cut base)"
python3 "$SCRATCH/frag.py" "$mnt" frag 3000 || fail "cut base: frag"
# the truncated file in pieces: a release of many extents
python3 -c '
import os, sys; from pylib import pattern
d = pattern("trunc", 8 << 20)
fd = os.open(sys.argv[1] + "/trunc", os.O_WRONLY | os.O_CREAT, 0o644)
for off in list(range(0, len(d), 8192)) + list(range(4096, len(d), 8192)):
    os.pwrite(fd, d[off:off + 4096], off)
    os.fsync(fd) if off % (1 << 20) == 0 else None
os.close(fd)' "$mnt" || fail "cut base files"
umount_recon "$mnt"
cutopts="checker=$ext4_checker,deterministic,max_transaction_blocks=16"
cut_clean_run "$base" "$cutopts" "$SCRATCH/cut.py"
[ "${CUT_TRANSACTIONS:-0}" -ge 10 ] || fail "the cut workload took $CUT_TRANSACTIONS transactions, want many"
cut_sweep "$base" "${EXT4_RW_CUTS:-6}" "$cutopts" checker=$ext4_checker ext4 "$SCRATCH/cut.py" "$SCRATCH/cut_check.py"
finish
