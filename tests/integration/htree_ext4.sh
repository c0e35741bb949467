#!/bin/bash
# Directories the kernel's ext4 indexed (an htree, metadata_csum images)
# changed through recon-fuse with the checker on.  Images: mkfs.ext4's
# defaults at 1 KiB and 4 KiB blocks.  On each:
#  1. the kernel's ext4 (loop mount) fills a directory with long names until
#     it is indexed with a level of index nodes, and a second one with one
#     index level only; debugfs shows EXT2_INDEX_FL on both;
#  2. recon-fuse (checker=on) unlinks names and creates them again (each
#     lands in the leaf it left: both directories keep their index, e2fsck
#     checks it), then creates, renames within and out of, and unlinks in
#     both (names whose leaf is full split it: both stay indexed);
#  3. the daemon exits 0, e2fsck -fn is clean, and the kernel's ext4 lists
#     exactly the expected names and finds each by lookup; then the kernel
#     adds names and e2fsck -fn stays clean.
# Then large_dir (1 KiB blocks): the kernel grows a directory to a 3-level
# htree (indirect_levels 2), recon-check --scan finds the image consistent,
# recon-check approves the kernel's further changes to it and rejects two
# damaged versions (a node's hash order, a leaf below a node under a changed
# index entry), and the same changes through recon-fuse pass the checker,
# e2fsck and the kernel.
. "$(dirname "$0")/lib.sh"
need_root
need_kernel_ext4
command -v debugfs >/dev/null || skip "no debugfs"
mnt="$SCRATCH/mnt" kmnt="$SCRATCH/kmnt"
mkdir -p "$mnt" "$kmnt"

# mkext4 IMG BS SIZE INODES [mke2fs options]: mkfs.ext4's defaults (without
# orphan_file, which is served read-only)
mkext4() {
	local img=$1 bs=$2 size=$3 inodes=$4; shift 4
	rm -f "$img"
	truncate -s "$size" "$img" || die "truncate $img"
	mke2fs -F -q -t ext4 -b "$bs" -N "$inodes" "$@" "$img" >"$SCRATCH/mke2fs.out" 2>&1 ||
		{ cat "$SCRATCH/mke2fs.out"; die "mke2fs $img"; }
	if dumpe2fs -h "$img" 2>/dev/null | grep -q 'features:.*orphan_file'; then
		tune2fs -O ^orphan_file "$img" >/dev/null 2>&1 || die "tune2fs ^orphan_file"
	fi
	return 0
}
kmount4() { mount -t ext4 -o "loop${3:+,$3}" "$1" "$2" && MOUNTS+=("$2"); }
# inode flags of a path, from debugfs
iflags() { debugfs -R "stat $2" "$1" 2>/dev/null | sed -n 's/.*Flags: \(0x[0-9a-f]*\).*/\1/p'; }
has_index() { local f; f=$(iflags "$1" "$2"); [ -n "$f" ] && (( f & 0x1000 )); }
# the root's indirect_levels of an indexed directory, from debugfs htree
levels() { debugfs -R "htree $2" "$1" 2>/dev/null | sed -n 's/.*Indirect levels: *\([0-9]*\).*/\1/p'; }

# names.py DIR COUNT LEN PREFIX: COUNT names of LEN bytes
cat >"$SCRATCH/fill.py" <<'EOF2'
import os, sys
d, n, ln, pre = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
os.makedirs(d, exist_ok=True)
for i in range(n):
    name = ("%s%06d-" % (pre, i)).ljust(ln, "x")
    os.close(os.open(os.path.join(d, name), os.O_CREAT | os.O_WRONLY, 0o644))
EOF2

# keep.py MNT DIR...: in each DIR unlink every 7th name and create it again
# (it hashes to the leaf that just gave it room: the index can stay)
cat >"$SCRATCH/keep.py" <<'EOF2'
import os, sys
m, dirs = sys.argv[1], sys.argv[2:]
for d in dirs:
    p = os.path.join(m, d)
    names = sorted(os.listdir(p))[::7]
    for n in names:
        os.unlink(os.path.join(p, n))
    for n in names:
        os.close(os.open(os.path.join(p, n), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
EOF2

# changes.py MNT OUT DIR...: creates, renames and unlinks in each DIR;
# OUT gets the names each directory must hold afterwards
cat >"$SCRATCH/changes.py" <<'EOF2'
import os, sys
from pylib import Checker
m, out, dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
c = Checker("htree_ext4 changes")
res = {}
for d in dirs:
    p = os.path.join(m, d)
    names = sorted(os.listdir(p))
    have = set(names)
    for i in range(0, len(names), 7):          # unlink every 7th
        os.unlink(os.path.join(p, names[i]))
        have.discard(names[i])
    for i in range(3, len(names), 11):         # rename within
        if names[i] in have:
            new = "renamed-%d-%s" % (i, "r" * (i % 50))
            os.rename(os.path.join(p, names[i]), os.path.join(p, new))
            have.discard(names[i])
            have.add(new)
    for i in range(5, len(names), 13):         # rename out of it
        if names[i] in have:
            os.rename(os.path.join(p, names[i]), os.path.join(m, "out-%s-%d" % (d, i)))
            have.discard(names[i])
    for i in range(300):                       # create, some names long
        new = "new-%d-%s" % (i, "n" * (i % 200))
        os.close(os.open(os.path.join(p, new), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        have.add(new)
    os.mkdir(os.path.join(p, "subdir"))
    have.add("subdir")
    c.eq(set(os.listdir(p)), have, "%s: names after the changes" % d)
    for n in list(have)[:200]:
        c.ok(os.path.lexists(os.path.join(p, n)), "%s: lookup %s" % (d, n))
    res[d] = sorted(have)
with open(out, "w") as f:
    for d in res:
        for n in res[d]:
            f.write("%s/%s\n" % (d, n))
c.done()
EOF2

# damage.py IMG order|range BEFORE: edit big/'s 3-level index (1 KiB blocks;
# its checksum is left stale) where the first leaf under a lowest node holds
# names and is the same in IMG and BEFORE: swap hash[1] and hash[2] of that
# node, or move the hash its parent gives it up to just below its hash[1],
# so that the leaf holds names below its range
cat >"$SCRATCH/damage.py" <<'EOF2'
import struct, subprocess, sys
img, how, before, bs = sys.argv[1], sys.argv[2], sys.argv[3], 1024
def bmap(lb):
    out = subprocess.run(["debugfs", "-R", "bmap big %d" % lb, img], capture_output=True, text=True).stdout
    return int(out.split()[0])
f, old = open(img, "r+b"), open(before, "rb")
def rd(pb, fh=f):
    fh.seek(pb * bs)
    return bytearray(fh.read(bs))
def count(blk, off):
    return struct.unpack_from("<H", blk, off + 2)[0]
def child(blk, off, i):
    return bmap(struct.unpack_from("<I", blk, off + 8 * i + 4)[0] & 0x0fffffff)
def live(blk):
    off = 0
    while off < bs - 12:
        ino, rec_len, name_len = struct.unpack_from("<IHB", blk, off)
        if ino and name_len:
            return True
        off += rec_len
    return False
def pick(root):
    for i in range(count(root, 32)):
        l1pb = child(root, 32, i)
        l1 = rd(l1pb)
        for j in range(1, count(l1, 8)):
            l2pb = child(l1, 8, j)
            l2 = rd(l2pb)
            leaf = child(l2, 8, 0)
            if count(l2, 8) >= 3 and rd(leaf) == rd(leaf, old) and live(rd(leaf)):
                return l1pb, l1, j, l2pb, l2
    sys.exit("no unchanged leaf with names")
l1pb, l1, j, l2pb, l2 = pick(rd(bmap(0)))
if how == "order":
    a, b = struct.unpack_from("<I", l2, 8 + 8)[0], struct.unpack_from("<I", l2, 8 + 16)[0]
    struct.pack_into("<I", l2, 8 + 8, b)
    struct.pack_into("<I", l2, 8 + 16, a)
    f.seek(l2pb * bs)
    f.write(l2)
else:
    h = struct.unpack_from("<I", l2, 8 + 8)[0]
    struct.pack_into("<I", l1, 8 + 8 * j, (h & ~1) - 2)
    f.seek(l1pb * bs)
    f.write(l1)
f.close()
EOF2

for bs in 1024 4096; do
	img="$SCRATCH/htree-$bs.img" what="$bs-byte blocks"
	mkext4 "$img" "$bs" 64M 8192
	# 1. the kernel indexes both directories
	kmount4 "$img" "$kmnt" || die "$what: kernel mount"
	# 1 KiB: 3 entries of 250 bytes per leaf, so 600 names need more leaves
	# than the root holds; 4 KiB: 15 per leaf, 511 leaves in the root
	big=$((bs == 1024 ? 600 : 6000))
	python3 "$SCRATCH/fill.py" "$kmnt/big" "$big" 250 big || fail "$what: kernel fill big"
	python3 "$SCRATCH/fill.py" "$kmnt/small" 60 60 small || fail "$what: kernel fill small"
	umount "$kmnt" || die "$what: kernel unmount"
	has_index "$img" big || fail "$what: the kernel did not index big/"
	has_index "$img" small || fail "$what: the kernel did not index small/"
	log "$what: big/ indirect_levels $(levels "$img" big), small/ $(levels "$img" small)"
	[ "$(levels "$img" big)" = 1 ] || fail "$what: big/ has no index nodes"
	fsck_clean "$img" "$what, as the kernel made it"

	# 2. changes that keep the index, then the rest, every commit checked
	mount_recon "$img" "$mnt" checker=on || { fail "$what: mount"; continue; }
	python3 "$SCRATCH/keep.py" "$mnt" big small || fail "$what: unlink and create again"
	umount_recon "$mnt" || fail "$what: unmount (keep)"
	has_index "$img" big || fail "$what: big/ lost its index to changes that keep it"
	has_index "$img" small || fail "$what: small/ lost its index to changes that keep it"
	fsck_clean "$img" "$what, index kept"
	mount_recon "$img" "$mnt" checker=on || { fail "$what: mount"; continue; }
	python3 "$SCRATCH/changes.py" "$mnt" "$SCRATCH/want" big small ||
		fail "$what: changes through recon-fuse"
	umount_recon "$mnt" || fail "$what: unmount"
	grep -qi "rejected" "$RECON_LOG" && { fail "$what: the checker objected"; sed 's/^/    /' "$RECON_LOG" | head -20; }
	has_index "$img" big || fail "$what: big/ lost its index to adds into full leaves"
	has_index "$img" small || fail "$what: small/ lost its index to adds into full leaves"

	# 3. e2fsck and the kernel agree
	fsck_clean "$img" "$what, after the changes"
	kmount4 "$img" "$kmnt" ro || { fail "$what: kernel mount after"; continue; }
	(cd "$kmnt" && for d in big small; do ls -1 "$d" | sed "s|^|$d/|"; done) >"$SCRATCH/kernel"
	missing=0
	while read -r n; do [ -e "$kmnt/$n" ] || missing=$((missing + 1)); done <"$SCRATCH/want"
	umount "$kmnt"
	cmp -s <(sort "$SCRATCH/want") <(sort "$SCRATCH/kernel") ||
		fail "$what: the kernel lists other names ($(diff <(sort "$SCRATCH/want") <(sort "$SCRATCH/kernel") | grep -c '^[<>]') differ)"
	[ "$missing" = 0 ] || fail "$what: the kernel cannot look up $missing names"
	kmount4 "$img" "$kmnt" || { fail "$what: kernel mount rw after"; continue; }
	python3 "$SCRATCH/fill.py" "$kmnt/big" 100 200 kern || fail "$what: kernel adds to big/"
	umount "$kmnt"
	fsck_clean "$img" "$what, the kernel's additions after ours"
	rm -f "$img"
done

# large_dir: 40,000 names of 250 bytes, 3 per 1 KiB leaf, need more leaves
# than a root of 123 entries over nodes of 126 address
img="$SCRATCH/large_dir.img" what="large_dir"
mkext4 "$img" 1024 160M 48000 -O large_dir
kmount4 "$img" "$kmnt" || die "$what: kernel mount"
python3 "$SCRATCH/fill.py" "$kmnt/big" 40000 250 big || fail "$what: kernel fill"
umount "$kmnt" || die "$what: kernel unmount"
[ "$(levels "$img" big)" = 2 ] || fail "$what: the kernel made indirect_levels $(levels "$img" big), want 2"
fsck_clean "$img" "$what, as the kernel made it"
rc=0
"$RECON_CHECK" --scan "$img" >"$SCRATCH/scan.out" 2>&1 || rc=$?
[ "$rc" = 0 ] || { fail "$what: recon-check --scan exit $rc on the kernel's 3-level htree"; sed 's/^/    /' "$SCRATCH/scan.out" | head; }
# the kernel's own changes to the 3-level tree, judged as one transaction
# (splits at every level): approved; then two damaged versions of them
cp --sparse=always "$img" "$SCRATCH/before.img"
cp --sparse=always "$img" "$SCRATCH/after.img"
kmount4 "$SCRATCH/after.img" "$kmnt" || die "$what: kernel mount (after)"
# new files: new inodes (also in groups the kernel initialises on the way)
# beside the index changes
python3 - "$kmnt/big" <<'EOF2' || fail "$what: kernel adds"
import os, sys
d = sys.argv[1]
for i in range(3000):
    open(os.path.join(d, ("more%06d-" % i).ljust(250, "y")), "w").close()
EOF2
find "$kmnt/big" -name 'big00*' -delete
umount "$kmnt" || die "$what: kernel unmount (after)"
judge() {       # judge WHAT WANT [INV]: recon-check before -> after.img
	local rc=0
	"$RECON_CHECK" "$SCRATCH/before.img" "$SCRATCH/$3" >"$SCRATCH/judge.out" 2>&1 || rc=$?
	if [ "$rc" != "$2" ] || { [ -n "${4:-}" ] && ! grep -q "^$4:" "$SCRATCH/judge.out"; }; then
		fail "$what: $1: recon-check exit $rc, want $2 ${4:-}"
		cut -c1-160 "$SCRATCH/judge.out" | sed 's/^/    /' | head -8
	fi
}
judge "the kernel's changes" 0 after.img
cp --sparse=always "$SCRATCH/after.img" "$SCRATCH/mut.img"
python3 "$SCRATCH/damage.py" "$SCRATCH/mut.img" order "$SCRATCH/before.img" 2>&1 || fail "$what: damage order"
judge "two hashes swapped in a lowest index node" 1 mut.img INV_HTREE_HASH_ORDER
cp --sparse=always "$SCRATCH/after.img" "$SCRATCH/mut.img"
python3 "$SCRATCH/damage.py" "$SCRATCH/mut.img" range "$SCRATCH/before.img" 2>&1 || fail "$what: damage range"
judge "a node's hash moved into the names of a leaf a level below" 1 mut.img INV_HTREE_NODE
rm -f "$SCRATCH/before.img" "$SCRATCH/after.img" "$SCRATCH/mut.img"

if mount_recon "$img" "$mnt" checker=on; then
	python3 "$SCRATCH/keep.py" "$mnt" big || fail "$what: unlink and create again"
	umount_recon "$mnt" || fail "$what: unmount (keep)"
	has_index "$img" big || fail "$what: big/ lost its index to changes that keep it"
	fsck_clean "$img" "$what, index kept"
fi
if mount_recon "$img" "$mnt" checker=on; then
	python3 "$SCRATCH/changes.py" "$mnt" "$SCRATCH/want" big || fail "$what: changes through recon-fuse"
	umount_recon "$mnt" || fail "$what: unmount"
	grep -qi "rejected" "$RECON_LOG" && { fail "$what: the checker objected"; sed 's/^/    /' "$RECON_LOG" | head -20; }
	has_index "$img" big || fail "$what: big/ lost its index to adds into full leaves"
	fsck_clean "$img" "$what, after the changes"
	if kmount4 "$img" "$kmnt" ro; then
		ls -1 "$kmnt/big" | sed 's|^|big/|' | sort >"$SCRATCH/kernel"
		umount "$kmnt"
		cmp -s <(sort "$SCRATCH/want") "$SCRATCH/kernel" || fail "$what: the kernel lists other names"
	else
		fail "$what: kernel mount after"
	fi
else
	fail "$what: mount read-write"
fi
rm -f "$img"
finish
