#!/bin/bash
# File data written and read back: small, large, sparse, across the direct /
# indirect / double / triple indirect thresholds of 1 KiB and 4 KiB blocks,
# overwrites, truncates and mmap; verified while mounted, after a remount and
# (checksums) by debugfs reading the image directly.
. "$(dirname "$0")/lib.sh"
fs_from_arg "$@"
need_root

for bs in 1024 4096; do
	img="$SCRATCH/data-$bs.img" mnt="$SCRATCH/mnt"
	mkimg "$img" "$bs" 256M
	mount_recon "$img" "$mnt" || die "mount ($bs)"
	cat >"$SCRATCH/data.py" <<'EOF'
import mmap, os, sys
from pylib import *
mode, m, bs, sums = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
c = Checker("data-%d" % bs)
os.chdir(m)
ppb = bs // 4
ind = 12 * bs                       # first byte mapped by the indirect block
dind = (12 + ppb) * bs              # ... by the double indirect block
tind = (12 + ppb + ppb * ppb) * bs  # ... by the triple indirect block
expect = {}                         # name -> (size, [(offset, data)])

def put(name, pieces, size=None):
    fd = os.open(name, os.O_CREAT | os.O_TRUNC | os.O_RDWR, 0o644)
    for off, data in pieces:
        c.eq(os.pwrite(fd, data, off), len(data), "pwrite %s @%d" % (name, off))
    if size is not None:
        os.ftruncate(fd, size)
    os.close(fd)
    end = max([off + len(d) for off, d in pieces] + [0])
    expect[name] = (size if size is not None else end, pieces)

def image(name):
    size, pieces = expect[name]
    buf = bytearray(size)
    for off, d in pieces:
        buf[off:off + len(d)] = d[:max(0, min(len(d), size - off))]
    return bytes(buf)

BIG = 64 << 20    # larger (sparse) files: pieces and holes checked, not every byte
def check_big(name):
    """The written pieces read back; the holes around and between them read
    as zeros (at both ends and the middle of each gap, which cross the
    mapping thresholds): a 4 GiB sparse file is not read whole."""
    size, pieces = expect[name]
    c.eq(os.stat(name).st_size, size, "size of " + name)
    fd = os.open(name, os.O_RDONLY)
    covered = []
    for off, d in pieces:
        d = d[:max(0, min(len(d), size - off))]
        c.eq(os.pread(fd, len(d), off), d, "piece of %s @%d" % (name, off))
        covered.append((off, off + len(d)))
    covered.sort()
    gaps, pos = [], 0
    for a, b in covered:
        if a > pos:
            gaps.append((pos, a))
        pos = max(pos, b)
    if pos < size:
        gaps.append((pos, size))
    for a, b in gaps:
        n = min(b - a, 2 * bs + 1)
        for o in (a, (a + b - n) // 2, b - n):
            c.eq(os.pread(fd, n, o), bytes(n), "hole of %s @%d" % (name, o))
    os.close(fd)

if mode == "verify":    # after a remount: the big files, from the write run's record
    import pickle
    expect = pickle.load(open(sums + ".big", "rb"))
    for name in sorted(expect):
        check_big(name)
    c.done()

# small and threshold-straddling dense files
for size in (0, 1, 100, bs - 1, bs, bs + 1, 12 * bs - 1, 12 * bs, 12 * bs + 1,
             dind - 1, dind, dind + 1, dind + 3 * bs + 17):
    put("dense-%d" % size, [(0, pattern("dense%d" % size, size))])
# large: 40 MiB written in odd-sized chunks
big = pattern("big", 40 << 20)
fd = os.open("large", os.O_CREAT | os.O_RDWR, 0o644)
off = 0
while off < len(big):
    n = min(len(big) - off, 65536 + 4097)
    os.write(fd, big[off:off + n])
    off += n
os.close(fd)
expect["large"] = (len(big), [(0, big)])
# sparse: one piece in each mapping level and holes between
put("sparse", [(0, b"head"), (ind - 3, b"across-ind"), (dind - 5, b"across-dind"),
               (dind + 100 * bs, pattern("mid", 3 * bs)),
               (tind - 7, b"across-tind"), (tind + 1000 * bs + 9, b"tail")])
put("sparse-hole-end", [(0, b"x")], size=tind + 5 * bs)
put("only-tind", [(tind + 12345, pattern("t", 5000))])

for name in sorted(expect):
    if expect[name][0] > BIG:
        check_big(name)
        continue
    want = image(name)
    st = os.stat(name)
    c.eq(st.st_size, len(want), "size of " + name)
    with open(name, "rb") as f:
        got = f.read()
    c.ok(got == want, "content of %s (%d bytes)" % (name, len(want)))
    # random reads at odd offsets and lengths
    fd = os.open(name, os.O_RDONLY)
    for i in range(20):
        o = (i * 7919 * bs + i * 13) % max(1, len(want))
        c.eq(os.pread(fd, 3 * bs + 1, o), want[o:o + 3 * bs + 1], "pread %s @%d" % (name, o))
    os.close(fd)
c.ok(os.stat("sparse").st_blocks * 512 < 64 * bs, "a sparse file has holes (st_blocks %d)" % os.stat("sparse").st_blocks)
c.ok(os.stat("sparse-hole-end").st_blocks * 512 <= 2 * bs, "truncate up allocates nothing")

# overwrites in place, across block boundaries, and appends
data = bytearray(pattern("ow", 20 * bs))
with open("overwrite", "wb") as f:
    f.write(data)
fd = os.open("overwrite", os.O_RDWR)
for off, n in ((0, 1), (bs - 1, 2), (5 * bs + 3, 3 * bs), (12 * bs - 10, 20), (20 * bs - 1, 100)):
    d = pattern("ow%d" % off, n)
    os.pwrite(fd, d, off)
    data[off:off + n] = d
os.close(fd)
c.ok(open("overwrite", "rb").read() == bytes(data), "overwrites in place and past EOF")
expect["overwrite"] = (len(data), [(0, bytes(data))])

# truncate down into each level, then extend: the tail must read as zeros
for cut in (dind + 5, ind + 3, 7, 0):
    os.truncate("dense-%d" % (dind + 3 * bs + 17), cut)
    c.eq(os.stat("dense-%d" % (dind + 3 * bs + 17)).st_size, cut, "truncate to %d" % cut)
name = "dense-%d" % (dind + 3 * bs + 17)
os.truncate(name, 20 * bs)
want = bytes(20 * bs)
c.ok(open(name, "rb").read() == want, "truncate down then up reads zeros")
expect[name] = (20 * bs, [])

# mmap: read and write through the page cache
with open("mm", "wb") as f:
    f.write(pattern("mm", 5 * bs))
with open("mm", "r+b") as f:
    mp = mmap.mmap(f.fileno(), 5 * bs)
    c.ok(mp[:] == pattern("mm", 5 * bs), "mmap read")
    mp[bs:bs + 5] = b"MMAP!"
    mp.flush()
    mp.close()
want = bytearray(pattern("mm", 5 * bs)); want[bs:bs + 5] = b"MMAP!"
c.ok(open("mm", "rb").read() == bytes(want), "mmap write reaches the file")
expect["mm"] = (5 * bs, [(0, bytes(want))])

with open(sums, "w") as out:
    for name in sorted(expect):
        if expect[name][0] <= BIG:
            out.write("%s %s %d\n" % (sha(image(name)), name, expect[name][0]))
with open(sums + ".big", "wb") as out:
    import pickle
    pickle.dump({n: e for n, e in expect.items() if e[0] > BIG}, out)
c.done()
EOF
	python3 "$SCRATCH/data.py" write "$mnt" "$bs" "$SCRATCH/sums-$bs" || fail "data written and read back ($bs)"
	umount_recon "$mnt"
	fsck_clean "$img" "after writing ($bs)"

	# after a remount, every file still has its checksum
	mount_recon "$img" "$mnt" ro || die "remount ($bs)"
	while read -r sum name size; do
		got=$(sha256sum "$mnt/$name" | cut -d' ' -f1)
		[ "$got" = "$sum" ] || fail "after remount: $name differs ($bs)"
		[ "$(stat -c %s "$mnt/$name")" = "$size" ] || fail "after remount: size of $name ($bs)"
	done <"$SCRATCH/sums-$bs"
	python3 "$SCRATCH/data.py" verify "$mnt" "$bs" "$SCRATCH/sums-$bs" || fail "after remount: sparse files ($bs)"
	umount_recon "$mnt"
	# and libext2fs itself, reading the image, agrees (small files only: dump is slow on sparse giants)
	while read -r sum name size; do
		[ "$size" -le $((64 << 20)) ] || continue
		debugfs -R "dump /$name $SCRATCH/dump" "$img" >/dev/null 2>&1
		got=$(sha256sum "$SCRATCH/dump" | cut -d' ' -f1)
		[ "$got" = "$sum" ] || fail "debugfs reads $name differently ($bs)"
		rm -f "$SCRATCH/dump"
	done <"$SCRATCH/sums-$bs"
	fsck_clean "$img" "after the remount ($bs)"
	rm -f "$img"
done
finish
