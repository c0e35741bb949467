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
# The same for a leaf split in an htree already there: e/ is indexed by
# 25 names of hashes below H / 2, which are then removed (two empty
# leaves, the upper from a hash below H / 2 on); the upper leaf then gets
# the names as d/'s block did (filling a whole leaf), and tQdHC splits it,
# into a new block 3 with index hash H + 1.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/htree_lib.sh"

# names.py ROOM LEAF DIR: the names in the order they are created, for
# d/ into DIR/d, for e/ DIR/e1 (created, then removed) and DIR/e2; ROOM:
# the bytes block 0 has for names after "." and "..", LEAF a leaf's
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

room, leaf, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
triple = ["tahRI", "tPSS9", "tQdHC"]
H = legacy(triple[0])
if any(legacy(n) != H for n in triple):
    sys.exit("names.py: the three names do not share a hash")

def block(room, low):
    """names filling room bytes around the pair, the third last"""
    above, below = [], []
    fill(above, 500, lambda h: h > H)
    fill(below, room - 500 - size(triple[0]) - size(triple[1]), lambda h: low < h < H)
    names = above[::2] + [triple[0]] + below[:-1] + [triple[1]] + above[1::2]
    # d/'s block 0: its last name (the slack it gets as a leaf) stays low
    return names + [below[-1], triple[2]]

def write(name, names):
    with open(out + "/" + name, "w") as f:
        f.write("".join(n + "\n" for n in names))

write("d", block(room, 0))
first = []
fill(first, 25 * 48, lambda h: h < H // 2)
write("e1", first)
write("e2", block(leaf, H // 2))
EOF2
cat >"$SCRATCH/create.py" <<'EOF2'
import os, sys
for n in open(sys.argv[2]).read().split():
    os.close(os.open(os.path.join(sys.argv[1], n), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
EOF2
# populate DIR: d/ and e/ under DIR, as the header says
populate() {
	mkdir "$1/d" && python3 "$SCRATCH/create.py" "$1/d" "$SCRATCH/d" &&
		mkdir "$1/e" && python3 "$SCRATCH/create.py" "$1/e" "$SCRATCH/e1" &&
		(cd "$1/e" && xargs rm <"$SCRATCH/e1") && python3 "$SCRATCH/create.py" "$1/e" "$SCRATCH/e2"
}

for FS_TYPE in ext3 ext4; do
	img="$SCRATCH/eq.img" what="$FS_TYPE, 1024-byte blocks, legacy hash"
	room=$((1024 - 24)) leaf=1024   # block 0's after "." and "..", a leaf's
	# less the leaf's checksum tail
	[ "$FS_TYPE" = ext4 ] && room=$((room - 12)) leaf=$((leaf - 12))
	python3 "$SCRATCH/names.py" "$room" "$leaf" "$SCRATCH" || die "names.py"
	mkimg "$img" 1024 16M -N 1024
	tune2fs -E hash_alg=legacy "$img" >/dev/null 2>&1 || die "tune2fs -E hash_alg=legacy"
	cp --sparse=always "$img" "$SCRATCH/kernel.img"
	kmount4 "$SCRATCH/kernel.img" "$kmnt" || { fail "$what: kernel mount of the copy"; continue; }
	populate "$kmnt" || fail "$what: the kernel's creates"
	umount "$kmnt"
	for d in d e; do htree_of "$SCRATCH/kernel.img" $d >"$SCRATCH/kernel.$d.htree"; done
	rm -f "$SCRATCH/kernel.img"

	mount_recon "$img" "$mnt" checker=on || { fail "$what: mount"; continue; }
	populate "$mnt" || fail "$what: creates"
	umount_recon "$mnt" || fail "$what: unmount"
	grep -qi "rejected" "$RECON_LOG" && { fail "$what: the checker objected"; sed 's/^/    /' "$RECON_LOG" | head -20; }
	fsck_clean "$img" "$what"
	kmount4 "$img" "$kmnt" ro || { fail "$what: kernel mount"; continue; }
	# d/: the split that indexes it, entry 1 to block 2; e/: a split of
	# leaf 2, entry 2 to block 3
	for d in d e; do
		entry=1 blk=2
		[ $d = e ] && entry=2 blk=3
		kh="$SCRATCH/kernel.$d.htree"
		htree_of "$img" $d >"$SCRATCH/recon.$d.htree"
		h=$(sed -n 's/^\(0x[0-9a-f]*\)-.* tQdHC$/\1/p' "$kh")
		[ -n "$h" ] && [ "$(grep -c "^$h-.* t\(ahRI\|PSS9\|QdHC\)$" "$kh")" = 3 ] ||
			fail "$what: the kernel's $d/ does not hold the three names of one hash"
		grep -q "^Entry #$entry: Hash $(printf '0x%08x' $((h + 1))) (\*\*), block $blk$" "$kh" ||
			fail "$what: the kernel's split of $d/ is not at the three names' hash, continued"
		cmp -s "$kh" "$SCRATCH/recon.$d.htree" ||
			fail "$what: $d/'s index differs from the kernel's: $(diff "$kh" "$SCRATCH/recon.$d.htree" | head -6)"
		want="$SCRATCH/d"
		[ $d = e ] && want="$SCRATCH/e2"
		ls -1 "$kmnt/$d" | sort | cmp -s - <(sort "$want") || fail "$what: the kernel lists other names in $d/"
		while read -r n; do [ -e "$kmnt/$d/$n" ] || fail "$what: the kernel cannot look up $d/$n"; done <"$want"
	done
	umount "$kmnt"
	rm -f "$img"
done
finish
