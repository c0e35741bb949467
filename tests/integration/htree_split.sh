#!/bin/bash
# Indexed ext4 directories growing through recon-fuse (checker on): leaf
# splits, a new index level, and readdir positions that hold across them.
# Images: mkfs.ext4's defaults (metadata_csum) at 1 KiB and 4 KiB blocks.
# On each:
#  1. the kernel's ext4 fills d/ until it is indexed (debugfs shows
#     EXT2_INDEX_FL);
#  2. through recon-fuse a reader opens d/ and reads some names, then names
#     are added past many leaf splits (at 1 KiB past a full root: a level of
#     index nodes) and a third of the kernel's names removed, and the reader
#     finishes: every name present throughout comes exactly once; a second
#     reader seekdir()s back to a telldir() taken before the changes and
#     reads the names after it again, each once;
#  3. the daemon exits 0, d/ is still indexed, e2fsck -fn is clean (pass 2
#     checks the htree), and the kernel lists exactly the expected names and
#     finds each by lookup; then the kernel adds names and e2fsck -fn stays
#     clean.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/htree_lib.sh"
has_index() {
	local f
	f=$(debugfs -R "stat $2" "$1" 2>/dev/null | sed -n 's/.*Flags: \(0x[0-9a-f]*\).*/\1/p')
	[ -n "$f" ] && (( f & 0x1000 ))
}
dir_size() { debugfs -R "stat $2" "$1" 2>/dev/null | sed -n 's/^User:.*Size: *\([0-9]*\).*/\1/p'; }
levels() { debugfs -R "htree $2" "$1" 2>/dev/null | sed -n 's/.*Indirect levels: *\([0-9]*\).*/\1/p'; }

# readers.py DIR BASE ADD LEN OUT: readers around adds and removes in DIR
# (opendir/readdir/telldir/seekdir of libc, through ctypes); OUT gets the
# names DIR must hold afterwards
cat >"$SCRATCH/readers.py" <<'EOF2'
import os, sys
from pylib import Checker, LibcDir
d, base, add, ln, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
c = Checker("htree_split readers")
def new(i): return ("new%06d-" % i).ljust(ln, "n")
before = set(os.listdir(d))
a, b = LibcDir(d), LibcDir(d)
c.ok(a and b, "opendir")
first_a = a.read(150)
first_b = b.read(100)
pos = b.tell()
again = b.read(300)               # read past pos, to be read again after seekdir
gone = set(sorted(before)[::3])
for i in range(add):
    os.close(os.open(os.path.join(d, new(i)), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    if i % 3 == 0 and gone:
        os.unlink(os.path.join(d, gone.pop()))
for n in gone:
    os.unlink(os.path.join(d, n))
gone = set(sorted(before)[::3])
after = set(os.listdir(d))
throughout = before - gone
rest_a = a.read(None)
b.seek(pos)
rest_b = b.read(None)
for what, names in (("reader", first_a + rest_a), ("reader after seekdir", first_b + rest_b)):
    seen = {}
    for n in names:
        seen[n] = seen.get(n, 0) + 1
    twice = sorted(n for n, k in seen.items() if k > 1)
    missing = sorted(throughout - set(seen))
    strange = sorted(set(seen) - before - after)
    c.ok(not twice, "%s: %d names twice, e.g. %s" % (what, len(twice), twice[:3]))
    c.ok(not missing, "%s: %d names present throughout missing, e.g. %s" % (what, len(missing), missing[:3]))
    c.ok(not strange, "%s: names never there: %s" % (what, strange[:3]))
c.ok(set(again) & throughout <= set(rest_b), "names after the telldir position come again after seekdir")
a.close()
b.close()
c.eq(after, (before - gone) | {new(i) for i in range(add)}, "names after the changes")
for n in after:
    c.ok(os.path.lexists(os.path.join(d, n)), "lookup %s" % n)
with open(out, "w") as f:
    for n in sorted(after):
        f.write(n + "\n")
c.done()
EOF2

for bs in 1024 4096; do
	img="$SCRATCH/split-$bs.img" what="$bs-byte blocks"
	rm -f "$img"
	truncate -s 64M "$img" || die "truncate"
	mke2fs -F -q -t ext4 -b "$bs" -N 8192 "$img" >"$SCRATCH/mke2fs.out" 2>&1 ||
		{ cat "$SCRATCH/mke2fs.out"; die "$what: mke2fs"; }
	if dumpe2fs -h "$img" 2>/dev/null | grep -q 'features:.*orphan_file'; then
		tune2fs -O ^orphan_file "$img" >/dev/null 2>&1 || die "tune2fs ^orphan_file"
	fi
	# 1. the kernel indexes d/: names of 60 bytes, about 13 to a 1 KiB leaf
	kmount4 "$img" "$kmnt" || die "$what: kernel mount"
	base=$((bs == 1024 ? 400 : 1200)) add=$((bs == 1024 ? 1500 : 4000))
	mkdir "$kmnt/d" && python3 -c '
import os, sys
for i in range(int(sys.argv[2])):
    open(os.path.join(sys.argv[1], ("kern%06d-" % i).ljust(60, "k")), "w").close()' "$kmnt/d" "$base" ||
		fail "$what: kernel fill"
	umount "$kmnt" || die "$what: kernel unmount"
	has_index "$img" d || fail "$what: the kernel did not index d/"
	size0=$(dir_size "$img" d)

	# 2. readers across adds (leaf splits) and removes, every commit checked
	mount_recon "$img" "$mnt" checker=on || { fail "$what: mount"; continue; }
	python3 "$SCRATCH/readers.py" "$mnt/d" "$base" "$add" 60 "$SCRATCH/want" || fail "$what: readers"
	umount_recon "$mnt" || fail "$what: unmount"
	grep -qi "rejected" "$RECON_LOG" && { fail "$what: the checker objected"; sed 's/^/    /' "$RECON_LOG" | head -20; }

	# 3. still indexed, e2fsck and the kernel agree
	has_index "$img" d || fail "$what: d/ lost its index"
	size=$(dir_size "$img" d)
	log "$what: d/ $((size0 / bs)) -> $((size / bs)) blocks, indirect_levels $(levels "$img" d)"
	[ "$size" -gt $((size0 + 40 * bs)) ] || fail "$what: too few splits to tell ($size0 -> $size bytes)"
	[ "$bs" = 4096 ] || [ "$(levels "$img" d)" = 1 ] || fail "$what: no level of index nodes"
	fsck_clean "$img" "$what, after the changes"
	kmount4 "$img" "$kmnt" ro || { fail "$what: kernel mount after"; continue; }
	ls -1 "$kmnt/d" | sort >"$SCRATCH/kernel"
	missing=0
	while read -r n; do [ -e "$kmnt/d/$n" ] || missing=$((missing + 1)); done <"$SCRATCH/want"
	umount "$kmnt"
	cmp -s "$SCRATCH/want" "$SCRATCH/kernel" ||
		fail "$what: the kernel lists other names ($(diff "$SCRATCH/want" "$SCRATCH/kernel" | grep -c '^[<>]') differ)"
	[ "$missing" = 0 ] || fail "$what: the kernel cannot look up $missing names"
	# the kernel goes on growing the index recon-fuse grew
	kmount4 "$img" "$kmnt" || { fail "$what: kernel mount rw after"; continue; }
	python3 -c '
import os, sys
for i in range(300):
    open(os.path.join(sys.argv[1], ("kadd%06d-" % i).ljust(60, "a")), "w").close()' "$kmnt/d" ||
		fail "$what: kernel adds"
	umount "$kmnt"
	fsck_clean "$img" "$what, the kernel's additions after ours"
	rm -f "$img"
done
finish
