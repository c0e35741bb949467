#!/bin/bash
# recon-check --scan on ext4 images that kernel ext4 populated (the formats
# of ext4-lib.sh), judged against e2fsck -fn: each image as made must pass,
# and each mutant (a raw byte flip or a debugfs edit of one structure) must
# get e2fsck's verdict: rejected when e2fsck flags it, accepted when e2fsck
# calls it clean (a checksum the file system does not carry, an i_size past
# unwritten blocks, an indexed directory counting 1 link).
. "$RECON_SRC/tests/integration/lib.sh"
. "$RECON_SRC/tests/checker/ext4-lib.sh"
need_root
: "${RECON_CHECK:?run through meson test}"
command -v setfattr >/dev/null || skip "no setfattr (package attr)"
modprobe ext4 2>/dev/null
grep -qw ext4 /proc/filesystems || skip "the kernel has no ext4"
kmnt="$SCRATCH/k"
mkdir -p "$kmnt"
m="$SCRATCH/mutant.img"

# flip IMG BYTE-OFFSET: xor one byte with 0x5a
flip() {
	python3 - "$1" "$2" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2])); b = f.read(1)[0]
    f.seek(int(sys.argv[2])); f.write(bytes([b ^ 0x5a]))
PY
}
# or16 IMG BYTE-OFFSET VALUE: OR a little-endian 16-bit value in
or16() {
	python3 - "$1" "$2" "$3" <<'PY'
import struct, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2])); v = struct.unpack("<H", f.read(2))[0]
    f.seek(int(sys.argv[2])); f.write(struct.pack("<H", v | int(sys.argv[3], 0)))
PY
}
dbg() { debugfs -R "$1" "$img" 2>/dev/null; }
# the byte offset of inode PATH in the image
inode_off() {
	local line blk off
	line=$(dbg "imap $1" | tr -d '\n')
	blk=$(sed -n 's/.*located at block \([0-9]*\),.*/\1/p' <<<"$line")
	off=$(sed -n 's/.*offset \(0x[0-9a-f]*\).*/\1/p' <<<"$line")
	echo $((blk * bs + off))
}
first_etb() { dbg "ex $1" | awk '$1 == "0/" && $2 != "0" { print $(NF - 1); exit }'; }
# rewrite inode PATH with its checksum made right (debugfs -n reads past a bad one)
resum() { debugfs -w -n -R "sif $1 uid $(dbg "stat $1" | sed -n 's/^User: *\([0-9]*\).*/\1/p')" "$m" >/dev/null 2>&1; }

# mutant NAME COMMAND...: COMMAND edits $m, a copy of $img; then both verdicts
mutant() {
	local name=$1; shift
	cp --sparse=always "$img" "$m"
	"$@" >/dev/null 2>&1
	local f=0 c=0
	e2fsck -fn "$m" >"$SCRATCH/fsck.out" 2>&1 || f=$?
	"$RECON_CHECK" --scan "$m" >"$SCRATCH/scan.out" 2>&1 || c=$?
	if [ $f -eq 0 ] && [ $c -ne 0 ]; then
		fail "$what, $name: e2fsck -fn is clean but the scan exits $c: $(head -3 "$SCRATCH/scan.out" | tr '\n' ' ')"
	elif [ $f -ne 0 ] && [ $c -ne 1 ]; then
		fail "$what, $name: e2fsck -fn exits $f ($(grep -v '^Pass\|^e2fsck' "$SCRATCH/fsck.out" | head -2 | tr '\n' ' ')) but the scan exits $c"
	else
		agreed=$((agreed + 1))
		[ $f -ne 0 ] && rejected=$((rejected + 1))
	fi
}

n=0 agreed=0 rejected=0 images=0
for spec in $EXT4_FORMATS; do
	bs=${spec%%:*} feat=${spec#*:} what="-b ${spec%%:*} -O '${spec#*:}'"
	img="$SCRATCH/e-$n.img"; n=$((n + 1))
	make_ext4 "$img" "$spec" "$kmnt" || continue
	e2fsck -fn "$img" >"$SCRATCH/fsck.out" 2>&1 || { fail "$what: e2fsck -fn is not clean"; continue; }
	if ! "$RECON_CHECK" --scan "$img" >"$SCRATCH/scan.out" 2>&1; then
		fail "$what: the scan rejects the image as made:"; head -5 "$SCRATCH/scan.out"; continue
	fi
	images=$((images + 1))
	small=$(inode_off /small) a=$(inode_off /a) big=$(inode_off /big)
	etb=$(first_etb /fragmented)
	acl=$(dbg "stat /small" | sed -n 's/.*File ACL: \([0-9]*\).*/\1/p')
	leaf=$(dbg "blocks /big" | awk '{ print $3 }')
	bb=$(dumpe2fs "$img" 2>/dev/null | sed -n 's/.*Block bitmap at \([0-9]*\).*/\1/p' | head -1)
	dsize=$(dumpe2fs -h "$img" 2>/dev/null | sed -n 's/^Group descriptor size: *//p')
	gdt=$(( (bs == 1024 ? 2 : 1) * bs ))
	mutant "an inode's mtime byte" flip "$m" $((small + 0x10))
	mutant "an extent tree block's byte" flip "$m" $((etb * bs + 20))
	mutant "a name in a directory leaf" flip "$m" $((leaf * bs + 40))
	mutant "a block bitmap byte" flip "$m" $((bb * bs + 2))
	mutant "a descriptor's checksum" flip "$m" $((gdt + ${dsize:-32} + 0x1E))
	mutant "the superblock's checksum" flip "$m" $((1024 + 0x3FC))
	mutant "an xattr block's value byte" flip "$m" $((acl * bs + bs - 20))
	mutant "a directory's extent unwritten" eval "or16 $m $((a + 0x28 + 12 + 4)) 0x8000 && resum /a"
	mutant "i_size past unwritten blocks" debugfs -w -R "sif /prealloc size $((8 * bs + 1))" "$m"
	mutant "i_size below the last block" debugfs -w -R "sif /fragmented size 100" "$m"
	mutant "an indexed directory with 1 link" debugfs -w -R "sif /big links_count 1" "$m"
	mutant "a plain directory with 1 link" debugfs -w -R "sif /a links_count 1" "$m"
	mutant "an extent tree block freed" debugfs -w -R "freeb $etb" "$m"
	mutant "group 0 marked INODE_UNINIT" debugfs -w -R "set_bg 0 flags 2" "$m"
	mutant "i_blocks off by one block" debugfs -w -R "sif /small blocks $((bs / 512 * 2))" "$m"
	mutant "the huge_file flag on a file" debugfs -w -R "sif /small flags 0x40000" "$m"
	mutant "an extent's length doubled" eval "or16 $m $((small + 0x28 + 12 + 4)) 0x2 && resum /small"
	mutant "big's checksum seed (generation)" flip "$m" $((big + 0x64))
	jsb=$(dbg "bmap <8> 0")
	mutant "the journal superblock's s_users" flip "$m" $((jsb * bs + 0x100))
	oino=$(dumpe2fs -h "$img" 2>/dev/null | sed -n 's/^Orphan file inode: *//p')
	if [ -n "$oino" ]; then
		ob=$(dbg "blocks <$oino>" | awk '{ print $2 }')
		mutant "an orphan listed in the orphan file" flip "$m" $((ob * bs + 8))
		mutant "the orphan file's block magic" flip "$m" $((ob * bs + bs - 8))
		mutant "the orphan file's block checksum" flip "$m" $((ob * bs + bs - 2))
	fi
done
[ "$images" -gt 0 ] || skip "no ext4 image could be made"
log "$images images scan clean; $agreed mutants agree with e2fsck -fn ($rejected rejected by both)"
finish
