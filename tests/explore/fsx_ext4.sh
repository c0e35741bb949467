#!/bin/bash
# fsx on recon-fuse over ext4 images, every commit approved by the checker,
# mkfs.ext4's defaults at 1 KiB and 4 KiB blocks, a few seeds
# each: unwritten extents (fallocate, KEEP_SIZE) written into, holes punched
# inside extents, truncates of trees of depth 1-2 built by fragmented writes;
# on 4 KiB blocks offsets up to the largest file ext4 maps (2^32 - 1
# blocks), a third of them in its last 64 MiB; and one file fragmented by
# small writes and punches until its tree has depth 2 (3 in the soak).
# After each run: the daemon exits 0, e2fsck -fn passes, and the kernel's
# ext4 (ro) reads the same bytes in the data segments recon-fuse's
# ro mount reports (SEEK_DATA/SEEK_HOLE, unwritten extents as holes), and
# zeros elsewhere.
# FSX4_SEEDS, FSX4_OPS, FSX4_BLOCKS, FSX4_DEEP_OPS, FSX4_DEEP_DEPTH override
# the bounded CI run.
. "$(dirname "$0")/../integration/lib.sh"
# the checker approves every commit (EXT4_CHECKER=off: the driver alone)
ext4_checker=${EXT4_CHECKER:-on}
. "$(dirname "$0")/lib_explore.sh"
need_root
need_kernel_ext4
[ -x "$FSX" ] || die "fsx not built: $FSX"

SEEDS=${FSX4_SEEDS:-"101 202"}
OPS=${FSX4_OPS:-3000}
BLOCKS=${FSX4_BLOCKS:-"1024 4096"}
DEEP_OPS=${FSX4_DEEP_OPS:-4000}
DEEP_DEPTH=${FSX4_DEEP_DEPTH:-2}

# segments.py ROOT [THEIRS]: each file's size and data segments
# (SEEK_DATA/SEEK_HOLE) with their bytes' sha256.  With THEIRS (the same
# list from the other mount): THEIRS's segments must read the same bytes
# here, and this mount's other data must be zeros (the kernel may report as
# data the pages of unwritten extents its readahead cached).
cat >"$SCRATCH/segments.py" <<'PY'
import hashlib, os, sys
root = sys.argv[1]
def segments(fd, size):
    pos = 0
    while pos < size:
        try:
            d = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError:
            return
        h = os.lseek(fd, d, os.SEEK_HOLE)
        yield d, h
        pos = h
def digest(fd, d, h):
    s = hashlib.sha256()
    for off in range(d, h, 1 << 20):
        s.update(os.pread(fd, min(1 << 20, h - off), off))
    return s.hexdigest()
if len(sys.argv) == 2:
    for name in sorted(os.listdir(root)):
        if name.startswith("fsx."):
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            size = os.fstat(fd).st_size
            print(name, size, " ".join("%d:%d:%s" % (d, h, digest(fd, d, h)) for d, h in segments(fd, size)))
            os.close(fd)
    sys.exit(0)
bad = 0
for line in open(sys.argv[2]):
    name, size, *segs = line.split()
    fd = os.open(os.path.join(root, name), os.O_RDONLY)
    if os.fstat(fd).st_size != int(size):
        print("%s: size %d here, %s there" % (name, os.fstat(fd).st_size, size))
        bad += 1
    theirs = []
    for seg in segs:
        d, h, want = seg.split(":")
        d, h = int(d), int(h)
        theirs.append((d, h))
        if digest(fd, d, h) != want:
            print("%s: bytes %d-%d differ" % (name, d, h))
            bad += 1
    for d, h in segments(fd, int(size)):
        for off in range(d, h, 1 << 16):
            end = min(h, off + (1 << 16))
            buf = bytearray(os.pread(fd, end - off, off))
            for a, b in theirs:
                if a < end and b > off:
                    lo, hi = max(a, off) - off, min(b, end) - off
                    buf[lo:hi] = bytes(hi - lo)
            if buf.strip(b"\0"):
                print("%s: data at %d-%d that the other mount calls a hole" % (name, off, end))
                bad += 1
                break
    os.close(fd)
sys.exit(1 if bad else 0)
PY

# tree_facts IMG: the deepest extent tree of the fsx files (TREE_DEPTH) and,
# for the log, their extents and unwritten extents (TREE_FACTS; debugfs).
tree_facts() {
	local f depth=0 ext=0 uw=0 d
	for f in $(debugfs -R "ls -p /" "$1" 2>/dev/null | awk -F/ '$6 ~ /^fsx\./ { print $6 }'); do
		debugfs -R "ex $f" "$1" 2>/dev/null >"$SCRATCH/ex.out"
		d=$(awk 'NR == 2 { print $2 + 0 }' "$SCRATCH/ex.out")
		[ "${d:-0}" -gt "$depth" ] && depth=$d
		ext=$((ext + $(awk 'NR > 1 && $1 ~ /\// && $1 + 0 == $2 + 0' "$SCRATCH/ex.out" | wc -l)))
		uw=$((uw + $(grep -c Uninit "$SCRATCH/ex.out")))
	done
	TREE_DEPTH=$depth TREE_FACTS="depth $depth, $ext leaf extents, $uw unwritten"
}

# fsx_run BS SEED OPS LEN FSX-OPTIONS...: fsx on a fresh ext4 image through
# recon-fuse; the daemon's verdict, e2fsck, then the kernel reads the same.
fsx_run() {
	local bs=$1 seed=$2 ops=$3 len=$4 img="$SCRATCH/fsx4-$bs.img" what; shift 4
	what="fsx ext4 seed $seed bs $bs${*:+ $*}"
	rm -f "$img"
	mke2fs -F -q -t ext4 -b "$bs" "$img" 1G >"$SCRATCH/mke2fs.out" 2>&1 ||
		{ cat "$SCRATCH/mke2fs.out"; die "mke2fs"; }
	log "$what, $ops ops, -l $len: recon-fuse on ext4"
	EXPLORE_RECON_OPTS=checker=$ext4_checker recon_run "$img" "$what" \
		"$FSX" -q -S "$seed" -N "$ops" -l "$len" -b "$bs" "$@" -L "$SCRATCH/fsx4-$bs-$seed.log" \
		"$SCRATCH/mnt" || return 1
	tree_facts "$img"
	log "$what: $TREE_FACTS"
	mount_recon "$img" "$SCRATCH/mnt" ro,checker=$ext4_checker || { fail "$what: ro mount"; return 1; }
	python3 "$SCRATCH/segments.py" "$SCRATCH/mnt" >"$SCRATCH/ours" || fail "$what: segments (ours)"
	umount_recon "$SCRATCH/mnt"
	if mount -t ext4 -o ro,loop "$img" "$SCRATCH/kmnt"; then
		MOUNTS+=("$SCRATCH/kmnt")
		python3 "$SCRATCH/segments.py" "$SCRATCH/kmnt" "$SCRATCH/ours" ||
			fail "$what: the kernel's ext4 reads other data"
		umount "$SCRATCH/kmnt"
	else
		fail "$what: the kernel's ext4 does not mount the result"
	fi
	runs=$((runs + 1))
}

mkdir -p "$SCRATCH/kmnt"
runs=0
for bs in $BLOCKS; do
	# 1 KiB: within 80 MiB; 4 KiB: up to the largest file ext4 maps
	# (2^32 - 1 blocks), a third of the offsets in its last 64 MiB (-e)
	if [ "$bs" = 1024 ]; then len=(80m); else len=($(((1 << 44) - 4096)) -e); fi
	for seed in $SEEDS; do
		fsx_run "$bs" "$seed" "$OPS" "${len[@]}"
	done
done
# One file fragmented by small writes and punches at random offsets on
# 1 KiB blocks (84 extents a leaf): its tree must reach DEEP_DEPTH (depth 2
# past 336 extents, depth 3 past 28,224: FSX4_DEEP_OPS=80000 in the soak).
case " $BLOCKS " in
*" 1024 "*)
	seed=${SEEDS%% *}
	if fsx_run 1024 "$seed" "$DEEP_OPS" 200m -n 1 -m 1024 -x dwrite,read,mapread,trunc,falloc,fsync,reopen,drop; then
		[ "$TREE_DEPTH" -ge "$DEEP_DEPTH" ] ||
			fail "the fragmented file's extent tree has depth $TREE_DEPTH, want $DEEP_DEPTH ($DEEP_OPS ops)"
	fi ;;
esac
log "$runs runs ($OPS ops each, the fragmenting one $DEEP_OPS)"
finish
