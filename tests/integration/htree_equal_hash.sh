#!/bin/bash
# Names of equal hash in an htree recon-fuse grows are laid out as the
# kernel's ext4 lays them out (checker on).  A leaf that splits sorts its
# entries by hash in an order of its own for equal hashes, and that order
# decides which of them move to the new leaf and in what order they land.
# Images: ext4 (metadata_csum) and ext3, 1 KiB blocks, their default hash
# set to legacy (tune2fs -E hash_alg=legacy): its weak mixing makes names
# of equal hash cheap to find (names.py searches them, about 2 s).  On each,
# the same names (120 pairs of equal hash, 7, 97 and 207 bytes long, and
# 240 others, in a fixed shuffled order) go into d/ through the kernel on a
# copy of the image and through recon-fuse; then:
#  - d/ is indexed with the legacy hash and at least 120 of its hashes are
#    each held by two names (the premise: debugfs computed them);
#  - d/ is the kernel's block for block (debugfs htree: each block's hash
#    range and its entries, their order and rec_len);
#  - the daemon exits 0 with no commit rejected, e2fsck -fn is clean, and
#    the kernel lists exactly the names and finds each.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/htree_lib.sh"

# names.py OUT: the names, one a line, in the order they are created
cat >"$SCRATCH/names.py" <<'EOF2'
import random, sys

def legacy(data, h0=0x12a3fe2d, h1=0x37abe8f9):
    """the legacy (dx_hack) hash's state after data, from (h0, h1)"""
    for c in data:
        h = (h1 + (h0 ^ (c * 7152373))) & 0xffffffff
        if h & 0x80000000:
            h = (h - 0x7fffffff) & 0xffffffff
        h1, h0 = h0, h
    return h0, h1

def equal_pairs(prefix, want):
    """want pairs of names prefix + tail whose hashes are equal"""
    state, seen, pairs, i = legacy(prefix), {}, [], 0
    while len(pairs) < want:
        name = prefix + b"q%06d" % i
        h = legacy(name[len(prefix):], *state)[0] << 1 & 0xfffffffe
        if h in seen:
            pairs.append((seen.pop(h), name))
        else:
            seen[h] = name
        i += 1
    return pairs

names = []
for prefix in (b"", b"m" * 90, b"l" * 200):
    for a, b in equal_pairs(prefix, 40):
        names += [a.decode(), b.decode()]
names += [("f%04d-" % i).ljust(10 + i * 37 % 170, "abcdefghij"[i % 10]) for i in range(240)]
random.Random(7).shuffle(names)
with open(sys.argv[1], "w") as f:
    f.write("".join(n + "\n" for n in names))
EOF2
# create.py DIR NAMES: each name of the file NAMES created in DIR
cat >"$SCRATCH/create.py" <<'EOF2'
import os, sys
for n in open(sys.argv[2]).read().split():
    os.close(os.open(os.path.join(sys.argv[1], n), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
EOF2
python3 "$SCRATCH/names.py" "$SCRATCH/names" || die "names.py"
sort "$SCRATCH/names" >"$SCRATCH/want"

for FS_TYPE in ext4 ext3; do
	img="$SCRATCH/eq.img" what="$FS_TYPE, 1024-byte blocks, legacy hash"
	mkimg "$img" 1024 32M -N 2048
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
	[ "$(root_hash "$img" d)" = 0 ] || fail "$what: d/'s root hash version is $(root_hash "$img" d), not legacy (0)"
	htree_of "$img" d >"$SCRATCH/recon.htree"
	[ "$(grep -c '^0x' "$SCRATCH/recon.htree")" = "$(wc -l <"$SCRATCH/want")" ] ||
		fail "$what: debugfs htree shows $(grep -c '^0x' "$SCRATCH/recon.htree") names of $(wc -l <"$SCRATCH/want")"
	shared=$(sed -n 's/^\(0x[0-9a-f]*\)-.*/\1/p' "$SCRATCH/recon.htree" | sort | uniq -d | wc -l)
	[ "$shared" -ge 120 ] || fail "$what: only $shared hashes held by two names (120 pairs wanted)"
	cmp -s "$SCRATCH/kernel.htree" "$SCRATCH/recon.htree" ||
		fail "$what: d/'s index differs from the kernel's: $(diff "$SCRATCH/kernel.htree" "$SCRATCH/recon.htree" | head -6)"
	log "$what: $(wc -l <"$SCRATCH/want") names, $shared hashes shared, $(grep -c '^Entry #' "$SCRATCH/recon.htree") index entries"

	kmount4 "$img" "$kmnt" ro || { fail "$what: kernel mount"; continue; }
	ls -1 "$kmnt/d" | sort | cmp -s - "$SCRATCH/want" || fail "$what: the kernel lists other names in d/"
	python3 -c '
import os, sys
d = sys.argv[1]
missing = [n for n in open(sys.argv[2]).read().split() if not os.path.lexists(os.path.join(d, n))]
sys.exit("the kernel cannot look up %d names, e.g. %s" % (len(missing), missing[:2]) if missing else 0)' \
		"$kmnt/d" "$SCRATCH/want" || fail "$what: lookups through the kernel"
	umount "$kmnt"
	rm -f "$img"
done
finish
