#!/bin/bash
# The name that makes a leaf split goes where the kernel's ext4 puts it
# when its hash equals the hash the split falls on and that hash continues
# across the split (bit 0 set in the new index entry): into the upper leaf
# (do_split: a hash at or above the split's goes up), although a probe of
# the new index, whose entry is one above the name's hash, would send it
# to the lower one.  Both layouts are valid (e2fsck is clean, a lookup
# walks on across a continued hash); htree_make's comparison wants the
# kernel's.
# Images: ext3 and ext4 (metadata_csum), 1 KiB blocks, the legacy hash
# (tune2fs -E hash_alg=legacy).  Through the kernel on a copy and through
# recon-fuse, a fresh d/ gets names that fill its one block exactly: two
# of one hash H (tahRI, tPSS9), names above H weighing 500 bytes, names
# below; then tQdHC, also of hash H, does not fit and the block becomes an
# htree: the split keeps names below H and one of the pair, moves the
# other and those above (the 500 bytes reach the half-block mark between
# the two), the new index hash is H + 1.  Then:
#  - the three names have hash H and the index is H + 1 (the premise);
#  - d/ is the kernel's block for block (debugfs htree);
#  - e2fsck -fn is clean, the kernel finds each name.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/htree_lib.sh"
need_root
need_kernel_ext4
command -v debugfs >/dev/null || skip "no debugfs"
mnt="$SCRATCH/mnt" kmnt="$SCRATCH/kmnt"
mkdir -p "$mnt" "$kmnt"

# names.py ROOM OUT: the names in the order they are created; ROOM: the
# bytes block 0 has for names after "." and ".."
cat >"$SCRATCH/names.py" <<'EOF2'
import sys

def legacy(name):
    """the legacy (dx_hack) hash of name, bit 0 clear"""
    h0, h1 = 0x12a3fe2d, 0x37abe8f9
    for c in name.encode():
        h = (h1 + (h0 ^ (c * 7152373))) & 0xffffffff
        if h & 0x80000000:
            h = (h - 0x7fffffff) & 0xffffffff
        h1, h0 = h0, h
    return h0 << 1 & 0xfffffffe

def size(name):
    return (8 + len(name) + 3) & ~3

def fill(names, want, keep):
    """add names for which keep(hash) holds until they weigh want bytes"""
    i = len(fill.used)
    while sum(map(size, names)) != want:
        need = want - sum(map(size, names))
        # 48 bytes while that leaves 24 or more, else one of need bytes
        name = ("f%03d-" % i).ljust(40 if need >= 72 else need - 8, "x")
        i += 1
        if name not in fill.used and size(name) <= need and keep(legacy(name)):
            names.append(name)
            fill.used.add(name)
fill.used = set()

room, out = int(sys.argv[1]), sys.argv[2]
triple = ["tahRI", "tPSS9", "tQdHC"]
H = legacy(triple[0])
if any(legacy(n) != H for n in triple):
    sys.exit("names.py: the three names do not share a hash")
above, below = [], []
fill(above, 500, lambda h: h > H)
fill(below, room - 500 - size(triple[0]) - size(triple[1]), lambda h: h < H)
names = above[::2] + [triple[0]] + below[:-1] + [triple[1]] + above[1::2]
names += [below[-1], triple[2]]   # block 0's last name (its slack) stays low
with open(out, "w") as f:
    f.write("".join(n + "\n" for n in names))
EOF2
cat >"$SCRATCH/create.py" <<'EOF2'
import os, sys
for n in open(sys.argv[2]).read().split():
    os.close(os.open(os.path.join(sys.argv[1], n), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
EOF2

for FS_TYPE in ext3 ext4; do
	img="$SCRATCH/eq.img" what="$FS_TYPE, 1024-byte blocks, legacy hash"
	room=$((1024 - 24))                           # after "." and ".."
	[ "$FS_TYPE" = ext4 ] && room=$((room - 12))  # the leaf's checksum tail
	python3 "$SCRATCH/names.py" "$room" "$SCRATCH/names" || die "names.py"
	sort "$SCRATCH/names" >"$SCRATCH/want"
	mkimg "$img" 1024 16M -N 1024
	tune2fs -E hash_alg=legacy "$img" >/dev/null 2>&1 || die "tune2fs -E hash_alg=legacy"
	cp --sparse=always "$img" "$SCRATCH/kernel.img"
	kmount4 "$SCRATCH/kernel.img" "$kmnt" || { fail "$what: kernel mount of the copy"; continue; }
	mkdir "$kmnt/d" && python3 "$SCRATCH/create.py" "$kmnt/d" "$SCRATCH/names" ||
		fail "$what: the kernel's creates"
	umount "$kmnt"
	htree_of "$SCRATCH/kernel.img" d >"$SCRATCH/kernel.htree"
	rm -f "$SCRATCH/kernel.img"

	mount_recon "$img" "$mnt" checker=on || { fail "$what: mount"; continue; }
	mkdir "$mnt/d" && python3 "$SCRATCH/create.py" "$mnt/d" "$SCRATCH/names" || fail "$what: creates"
	umount_recon "$mnt" || fail "$what: unmount"
	grep -qi "rejected" "$RECON_LOG" && { fail "$what: the checker objected"; sed 's/^/    /' "$RECON_LOG" | head -20; }
	fsck_clean "$img" "$what"
	htree_of "$img" d >"$SCRATCH/recon.htree"
	h=$(sed -n 's/^\(0x[0-9a-f]*\)-.* tQdHC$/\1/p' "$SCRATCH/kernel.htree")
	[ -n "$h" ] && [ "$(grep -c "^$h-.* t\(ahRI\|PSS9\|QdHC\)$" "$SCRATCH/kernel.htree")" = 3 ] ||
		fail "$what: the kernel's d/ does not hold the three names of one hash"
	grep -q "^Entry #1: Hash $(printf '0x%08x' $((h + 1))) (\*\*), block 2$" "$SCRATCH/kernel.htree" ||
		fail "$what: the kernel's split is not at the three names' hash, continued"
	cmp -s "$SCRATCH/kernel.htree" "$SCRATCH/recon.htree" ||
		fail "$what: d/'s index differs from the kernel's: $(diff "$SCRATCH/kernel.htree" "$SCRATCH/recon.htree" | head -6)"

	kmount4 "$img" "$kmnt" ro || { fail "$what: kernel mount"; continue; }
	ls -1 "$kmnt/d" | sort | cmp -s - "$SCRATCH/want" || fail "$what: the kernel lists other names in d/"
	while read -r n; do [ -e "$kmnt/d/$n" ] || fail "$what: the kernel cannot look up $n"; done <"$SCRATCH/want"
	umount "$kmnt"
	rm -f "$img"
done
finish
