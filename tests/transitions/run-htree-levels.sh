#!/bin/bash
# Kernel htree growth past one index level (1 KiB blocks: the root's 124
# entries overflow into index nodes, indirect_levels 0 -> 1), then deletes and
# more growth.  Every kernel transition must be approved and e2fsck-clean;
# then edits of the two-level index (node entry -> block 0, node hash outside
# its parent's range, node count > limit, root levels 1 -> 0, a node naming a
# node, a leaf referenced twice, hash_version changed) must each be rejected
# by recon-check, and e2fsck -fn must flag each too (else the edit is no test).
# Exit 0 pass, 1 fail, 77 no root.   usage: run-htree-levels.sh  (env RECON_CHECK)
set -uo pipefail
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root and loop devices"; exit 77; }
RC=${RECON_CHECK:?set RECON_CHECK to the recon-check binary}
W=$(mktemp -d /tmp/chk-htree.XXXXXX)
MNT=$W/mnt IMG=$W/work.img
mkdir -p "$MNT"
cleanup() { mountpoint -q "$MNT" && umount "$MNT"; rm -rf "$W"; }
trap cleanup EXIT
fail=0
truncate -s 64M "$IMG"
mke2fs -q -F -t ext3 -b 1024 -I 256 "$IMG" >/dev/null || { echo "FAIL: mke2fs"; exit 1; }
m() { mount -t ext3 -o loop "$IMG" "$MNT" || { echo "FAIL: mount"; exit 1; }; }
u() { umount "$MNT" || { sleep 1; umount "$MNT"; }; }
snap() { cp --sparse=always "$IMG" "$W/t$1.img"; }
many() { for i in $(seq "$2" "$3"); do : > "$MNT/$1$i"; done; }
m; mkdir "$MNT/h"; many h/a_fairly_long_entry_name_for_the_htree_index_ 1 300; u; snap 0
m; many h/second_batch_of_long_names_to_grow_the_tree_ 1 3000; u; snap 1
m; for i in $(seq 1 2 3000); do rm "$MNT/h/second_batch_of_long_names_to_grow_the_tree_$i"; done
   many h/third_ 1 1500; u; snap 2
m; many h/fourth_batch_with_quite_long_names_again_ 1 3000; mkdir "$MNT/h2"; many h2/x_long_name_number_ 1 200; u; snap 3
for t in 0 1 2 3; do
    e2fsck -fn "$W/t$t.img" >/dev/null 2>&1 || { echo "FAIL: kernel image t$t not e2fsck-clean"; fail=1; }
done
levels=$(debugfs -R "htree h" "$W/t1.img" 2>/dev/null | sed -n 's/.*Indirect levels: //p' | head -1)
[ "$levels" = 1 ] || { echo "FAIL: the index did not grow a level (levels '$levels')"; fail=1; }
for t in 1 2 3; do
    out=$("$RC" "$W/t$((t - 1)).img" "$W/t$t.img" 2>&1) || { echo "FALSE REJECTION t$((t - 1)) -> t$t:"; echo "$out" | head -5; fail=1; }
done
python3 - "$W" <<'PY' || { echo "FAIL: making the edits"; exit 1; }
import shutil, struct, subprocess, sys
w = sys.argv[1]; img = w + '/t1.img'; bs = 1024
def bmap(l):
    return int(subprocess.run(['debugfs', '-R', 'bmap h %d' % l, img], capture_output=True, text=True).stdout.split()[0])
def read(b):
    with open(img, 'rb') as f:
        f.seek(b * bs); return bytearray(f.read(bs))
def make(name, blk, buf):
    shutil.copy(img, '%s/c_%s.img' % (w, name))
    with open('%s/c_%s.img' % (w, name), 'r+b') as g:
        g.seek(blk * bs); g.write(buf)
rootb = bmap(0); r = read(rootb)
cnt = struct.unpack_from('<H', r, 34)[0]
ents = [struct.unpack_from('<II', r, 32 + 8 * i) for i in range(cnt)]
nodeb = bmap(ents[0][1]); n = read(nodeb)
ncnt = struct.unpack_from('<H', n, 10)[0]
nents = [struct.unpack_from('<II', n, 8 + 8 * i) for i in range(ncnt)]
b = bytearray(n); struct.pack_into('<I', b, 8 + 8 + 4, 0); make('nodeblk0', nodeb, b)
b = bytearray(n); struct.pack_into('<I', b, 8 + 8 * (ncnt - 1), (ents[1][0] + 0x100) & 0xffffffff); make('noderange', nodeb, b)
b = bytearray(n); struct.pack_into('<H', b, 10, 200); make('nodecount', nodeb, b)
b = bytearray(r); b[30] = 0; make('levels0', rootb, b)
b = bytearray(n); struct.pack_into('<I', b, 8 + 8 + 4, ents[1][1]); make('nodenode', nodeb, b)
b = bytearray(r); struct.pack_into('<I', b, 32 + 8 + 4, nents[0][1]); make('rootdup', rootb, b)
b = bytearray(r); b[28] = 0 if b[28] != 0 else 2; make('hver', rootb, b)
PY
for c in "$W"/c_*.img; do
    name=$(basename "$c" .img)
    e2fsck -fn "$c" >/dev/null 2>&1 && { echo "FAIL: edit $name not flagged by e2fsck (the edit is wrong)"; fail=1; }
    if "$RC" "$W/t1.img" "$c" >/dev/null 2>&1; then echo "MISSED: $name approved"; fail=1; else echo "ok: $name rejected"; fi
done
exit $fail
