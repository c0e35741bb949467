#!/bin/bash
# Directories recon-fuse grows past one block get an htree, as the kernel's
# ext4 gives them one (checker on).  Images: mkfs.ext3's and mkfs.ext4's
# defaults (both have dir_index; ext4's metadata_csum), at 1 KiB and 4 KiB
# blocks.  On each:
#  1. through recon-fuse a fresh directory gets a few short names; two
#     readers open it while it is one block and read some, one of them
#     remembering a telldir() position; then names of many lengths (up to
#     255 bytes) are created until it is far past one block, the first reader
#     reading on as they come; both finish (the second after seekdir() back):
#     each name present throughout comes exactly once, no name twice;
#  2. a one-block directory on a small image filled up: a name that does not
#     fit gets ENOSPC with no block free and with one (the index needs two),
#     the directory unchanged; with room again it is indexed;
#  3. the daemon exits 0 with no commit rejected, e2fsck -fn is clean, both
#     directories are indexed (debugfs), a directory of a few names is not;
#     d/ is the kernel's block for block: the kernel creating the same names
#     in a copy of the image makes the same index (debugfs htree: each
#     block's hash range and entries, their order and rec_len);
#     the kernel lists exactly the expected names and finds each, then adds
#     names to the index recon-fuse made, and e2fsck -fn stays clean.
# Without dir_index (ext3, 1 KiB) a directory stays linear past one block.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/htree_lib.sh"

iflags() { debugfs -R "stat $2" "$1" 2>/dev/null | sed -n 's/.*Flags: \(0x[0-9a-f]*\).*/\1/p'; }
has_index() { local f; f=$(iflags "$1" "$2"); [ -n "$f" ] && (( f & 0x1000 )); }
dir_size() { debugfs -R "stat $2" "$1" 2>/dev/null | sed -n 's/^User:.*Size: *\([0-9]*\).*/\1/p'; }
def_hash() {
	case $(dumpe2fs -h "$1" 2>/dev/null | sed -n 's/^Default directory hash: *//p') in
	legacy) echo 0 ;; half_md4) echo 1 ;; tea) echo 2 ;; *) echo "?" ;;
	esac
}

# grow.py DIR TOTAL OUT: step 1 in DIR; OUT gets the names DIR holds after.
# grow.py DIR TOTAL -: the same names created, nothing else (for the kernel)
cat >"$SCRATCH/grow.py" <<'EOF2'
import os, sys
from pylib import Checker, LibcDir
d, total, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
c = Checker("htree_make grow")
first = 12
def name(i):
    # past the first, one name in five of 200 to 255 bytes, the others of 10 to 30
    ln = 255 - i % 56 if i % 5 == 0 and i >= first else 10 + i % 21
    return ("n%05d-" % i).ljust(ln, "abcdefghij"[i % 10])
def create(i):
    os.close(os.open(os.path.join(d, name(i)), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
bs = os.statvfs(d).f_bsize
if out == "-":
    for i in range(total):
        create(i)
    sys.exit(0)
for i in range(first):
    create(i)
before = set(os.listdir(d))
c.eq(os.stat(d).st_size, bs, "the directory is one block when the readers open it")
a, b = LibcDir(d), LibcDir(d)
c.ok(a and b, "opendir")
seen_a = a.read(3)
first_b = b.read(2)
pos = b.tell()
again = b.read(2)                 # read past pos, to be read again after seekdir
for i in range(first, total):
    create(i)
    if i % 97 == 0:
        seen_a += a.read(1)       # a reader going on across the change
c.ok(os.stat(d).st_size >= 3 * bs, "the directory grew past one block (%d bytes)" % os.stat(d).st_size)
seen_a += a.read(None)
b.seek(pos)
rest_b = b.read(None)
after = set(os.listdir(d))
for what, names in (("reader", seen_a), ("reader after seekdir", first_b + rest_b)):
    count = {}
    for n in names:
        count[n] = count.get(n, 0) + 1
    twice = sorted(n for n, k in count.items() if k > 1)
    missing = sorted(before - set(count))
    strange = sorted(set(count) - after)
    c.ok(not twice, "%s: %d names twice, e.g. %s" % (what, len(twice), [n[:12] for n in twice[:3]]))
    c.ok(not missing, "%s: %d names present throughout missing, e.g. %s" % (what, len(missing), missing[:3]))
    c.ok(not strange, "%s: names never there: %s" % (what, strange[:3]))
c.ok(set(again) <= set(rest_b), "names after the telldir position come again after seekdir")
a.close()
b.close()
c.eq(after, {name(i) for i in range(total)}, "names after the creates")
for n in after:
    c.ok(os.path.lexists(os.path.join(d, n)), "lookup %s" % n[:12])
with open(out, "w") as f:
    for n in sorted(after):
        f.write(n + "\n")
c.done()
EOF2

# full.py MNT: step 2 on a small image; MNT/e is the directory
cat >"$SCRATCH/full.py" <<'EOF2'
import errno, os, sys
from pylib import Checker, pattern
m = sys.argv[1]
c = Checker("htree_make enospc")
d = os.path.join(m, "e")
os.mkdir(d)
bs = os.statvfs(m).f_bsize
fill = os.open(os.path.join(m, "fill"), os.O_CREAT | os.O_WRONLY, 0o644)
def bfree():
    os.fsync(fill)                 # frees are reusable once committed
    return os.statvfs(m).f_bfree
pads = []
def settle(want):
    """exactly want blocks free: the filler shrunk, or pad files of a block"""
    for _ in range(64):
        f = bfree()
        if f == want:
            return
        if f < want:
            os.ftruncate(fill, os.fstat(fill).st_size - bs)
        else:
            pads.append(os.path.join(m, "pad%d" % len(pads)))
            with open(pads[-1], "wb") as p:
                p.write(b"p" * bs)
    c.eq(bfree(), want, "blocks free")
chunk = pattern("fill", 256 << 10)
for step in (len(chunk), bs):      # large writes, then the last blocks one by one
    try:
        while True:
            os.write(fill, chunk[:step])
            os.fsync(fill)
    except OSError as e:
        c.eq(e.errno, errno.ENOSPC, "filling stops with ENOSPC")
settle(0)
names = []
try:
    while len(names) < 1000:
        n = ("e%04d-" % len(names)).ljust(100, "e")
        os.close(os.open(os.path.join(d, n), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        names.append(n)
    c.ok(False, "1000 names went into one block")
except OSError as e:
    c.eq(e.errno, errno.ENOSPC, "no block free: the name one block does not hold gets ENOSPC")
c.eq(os.stat(d).st_size, bs, "the full directory is one block")
c.ok(sorted(os.listdir(d)) == names, "its %d names, the last one not among them" % len(names))
settle(1)                          # the first new block is found, the second not
last = ("e%04d-" % len(names)).ljust(100, "e")
try:
    os.close(os.open(os.path.join(d, last), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    c.ok(False, "a name that needs the index went in with one block free")
except OSError as e:
    c.eq(e.errno, errno.ENOSPC, "one block free: ENOSPC")
c.eq(os.stat(d).st_size, bs, "the directory is still one block")
c.ok(sorted(os.listdir(d)) == names, "and holds the same names")
c.eq(bfree(), 1, "the block is free again")
os.ftruncate(fill, 0)
os.fsync(fill)                     # the freed blocks reusable
os.close(fill)
os.close(os.open(os.path.join(d, last), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
c.eq(os.stat(d).st_size, 3 * bs, "with room the directory is indexed: three blocks")
c.ok(sorted(os.listdir(d)) == names + [last], "all its names")
c.done()
EOF2

# kernel_check IMG DIR WANT WHAT: the kernel lists WANT's names in DIR and
# finds each, then adds 300 names; e2fsck -fn stays clean
kernel_check() {
	local img=$1 dir=$2 want=$3 what=$4 missing=0
	kmount4 "$img" "$kmnt" ro || { fail "$what: kernel mount"; return; }
	ls -1 "$kmnt/$dir" | sort >"$SCRATCH/kernel"
	while read -r n; do [ -e "$kmnt/$dir/$n" ] || missing=$((missing + 1)); done <"$want"
	umount "$kmnt"
	cmp -s "$want" "$SCRATCH/kernel" ||
		fail "$what: the kernel lists other names in $dir ($(diff "$want" "$SCRATCH/kernel" | grep -c '^[<>]') differ)"
	[ "$missing" = 0 ] || fail "$what: the kernel cannot look up $missing names in $dir"
	kmount4 "$img" "$kmnt" || { fail "$what: kernel mount rw"; return; }
	python3 -c '
import os, sys
for i in range(300):
    open(os.path.join(sys.argv[1], ("kadd%06d-" % i).ljust(60, "a")), "w").close()' "$kmnt/$dir" ||
		fail "$what: the kernel adds to $dir"
	umount "$kmnt"
	fsck_clean "$img" "$what, the kernel's additions to $dir" || return
	has_index "$img" "$dir" || fail "$what: $dir lost its index to the kernel's additions"
}

HASH_SEED=${HTREE_HASH_SEED:-cd613e30-d8f1-6adf-91b7-584a2265b1f5}
for cfg in ${HTREE_CONFIGS:-ext3:1024 ext3:4096 ext4:1024 ext4:4096}; do
	FS_TYPE=${cfg%:*} bs=${cfg#*:}
	img="$SCRATCH/make.img" small="$SCRATCH/small.img" what="$FS_TYPE, $bs-byte blocks"
	total=$((bs == 1024 ? 1500 : 3000))
	# a fixed hash seed, so that a failure repeats (htree_split_seed and
	# bench/htree-seeds run the workload at others)
	mkimg "$img" "$bs" 64M -N 8192 -E hash_seed=$HASH_SEED
	mkimg "$small" "$bs" 16M -N 512
	cp --sparse=always "$img" "$SCRATCH/kernel.img"
	kmount4 "$SCRATCH/kernel.img" "$kmnt" || { fail "$what: kernel mount of the copy"; continue; }
	mkdir "$kmnt/d" && python3 "$SCRATCH/grow.py" "$kmnt/d" "$total" - || fail "$what: the kernel's creates"
	umount "$kmnt"
	htree_of "$SCRATCH/kernel.img" d >"$SCRATCH/kernel.htree"
	rm -f "$SCRATCH/kernel.img"
	mount_recon "$img" "$mnt" checker=on || { fail "$what: mount"; continue; }
	mkdir "$mnt/few" && touch "$mnt/few/a" "$mnt/few/b" || fail "$what: a small directory"
	mkdir "$mnt/d" || fail "$what: mkdir"
	python3 "$SCRATCH/grow.py" "$mnt/d" "$total" "$SCRATCH/want" || fail "$what: growing d/"
	umount_recon "$mnt" || fail "$what: unmount"
	grep -qi "rejected" "$RECON_LOG" && { fail "$what: the checker objected"; sed 's/^/    /' "$RECON_LOG" | head -20; }
	fsck_clean "$img" "$what, after growing d/"
	has_index "$img" d || fail "$what: d/ is not indexed"
	! has_index "$img" few || fail "$what: few/ (one block) is indexed"
	[ "$(root_hash "$img" d)" = "$(def_hash "$img")" ] ||
		fail "$what: d/'s root hash version $(root_hash "$img" d), the default $(def_hash "$img")"
	log "$what: $total names, d/ $(( $(dir_size "$img" d) / bs )) blocks"
	htree_of "$img" d >"$SCRATCH/recon.htree"
	cmp -s "$SCRATCH/kernel.htree" "$SCRATCH/recon.htree" ||
		fail "$what: d/'s index differs from the kernel's: $(diff "$SCRATCH/kernel.htree" "$SCRATCH/recon.htree" | head -4)"
	[ "$(grep -c '^Entry #' "$SCRATCH/recon.htree")" -gt 10 ] || fail "$what: debugfs htree shows no index"
	[ "$(grep -c '^0x' "$SCRATCH/recon.htree")" = "$total" ] ||
		fail "$what: debugfs htree shows $(grep -c '^0x' "$SCRATCH/recon.htree") names of $total"
	kernel_check "$img" d "$SCRATCH/want" "$what"

	mount_recon "$small" "$mnt" checker=on || { fail "$what: mount the small image"; continue; }
	python3 "$SCRATCH/full.py" "$mnt" || fail "$what: a full one-block directory"
	umount_recon "$mnt" || fail "$what: unmount the small image"
	grep -qi "rejected" "$RECON_LOG" && { fail "$what: the checker objected"; sed 's/^/    /' "$RECON_LOG" | head -20; }
	fsck_clean "$small" "$what, the full image"
	has_index "$small" e || fail "$what: e/ is not indexed"
	rm -f "$img" "$small"
done

# without dir_index: linear past one block, as the kernel keeps it
FS_TYPE=ext3 img="$SCRATCH/linear.img"
mkimg "$img" 1024 16M -N 1024 -O ^dir_index
mount_recon "$img" "$mnt" checker=on || die "mount without dir_index"
python3 -c '
import os, sys
os.mkdir(sys.argv[1])
for i in range(300):
    open(os.path.join(sys.argv[1], ("lin%04d-" % i).ljust(40, "l")), "w").close()' "$mnt/d" ||
	fail "without dir_index: creates"
umount_recon "$mnt" || fail "without dir_index: unmount"
fsck_clean "$img" "without dir_index"
! has_index "$img" d || fail "without dir_index: d/ is indexed"
[ "$(dir_size "$img" d)" -gt 4096 ] || fail "without dir_index: d/ did not grow"
finish
