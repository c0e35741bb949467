#!/bin/bash
# tests/checker/scan-accepts.sh: states e2fsck -fn accepts that recon-check
# --scan (the mount's base check) must accept too: a rejection of a state
# fsck passes is a false alarm, and at mount it would serve the image
# read-only.  Each case: a small image edited by debugfs, then both verdicts.
# A command "!FN" runs the shell function FN on the image instead (raw edits,
# or e2fsck -fy making an edit into the state it leaves).
set -u
: "${RECON_CHECK:?run through meson test}"
command -v debugfs >/dev/null && command -v e2fsck >/dev/null || { echo "SKIP: no e2fsprogs"; exit 77; }
work=$(mktemp -d /tmp/scan-accepts.XXXXXX)
trap 'rm -rf "$work"' EXIT
fails=0
echo hello >"$work/small"

case_() {   # case_ NAME BLOCKSIZE DEBUGFS-COMMANDS...
	local name=$1 bs=$2 img=$work/img; shift 2
	rm -f "$img"
	mke2fs -q -F -t ext3 -b "$bs" "$img" 8M >/dev/null 2>&1 || { echo "FAIL $name: mke2fs"; fails=$((fails + 1)); return; }
	local c
	for c in "$@"; do
		case $c in
		!*) ${c#!} "$img" "$bs" ;;
		*) printf '%s\n' "$c" | debugfs -w "$img" >/dev/null 2>&1 ;;
		esac
	done
	if ! e2fsck -fn "$img" >/dev/null 2>&1; then
		echo "FAIL $name: e2fsck -fn does not accept the case itself"; fails=$((fails + 1)); return
	fi
	if out=$("$RECON_CHECK" --scan "$img" 2>&1); then
		echo "ok   $name"
	else
		echo "FAIL $name: recon-check --scan rejects what e2fsck accepts:"; echo "$out" | sed 's/^/    /'
		fails=$((fails + 1))
	fi
}

# entry_ftype IMG BS: the file-type byte of entry $ENTRY (0 '.', 1 '..', 2 the
# first name) of directory d's first block set to 0 (unknown)
entry_ftype() {
	local blk off=0 i
	blk=$(debugfs -R "bmap d 0" "$1" 2>/dev/null)
	for ((i = 0; i < ENTRY; i++)); do
		off=$((off + $(od -A n -t u2 -j $((blk * $2 + off + 4)) -N 2 "$1")))
	done
	printf '\0' | dd of="$1" bs=1 seek=$((blk * $2 + off + 7)) conv=notrunc status=none
}
ftype_dot() { ENTRY=0 entry_ftype "$@"; }
ftype_dotdot() { ENTRY=1 entry_ftype "$@"; }
ftype_name() { ENTRY=2 entry_ftype "$@"; }
# bad_itable_block IMG BS: the bad-blocks inode lists the last block of group
# 0's inode table (its inodes free); e2fsck -fy then marks them in use, as it
# leaves inodes stored in a bad block
bad_itable_block() {
	local it
	it=$(dumpe2fs "$1" 2>/dev/null | sed -n 's/.*Inode table at [0-9]*-\([0-9]*\).*/\1/p' | head -1)
	printf 'sif <1> block[0] %s\nsif <1> size %s\nsif <1> blocks %s\n' "$it" "$2" $(($2 / 512)) |
		debugfs -w -f - "$1" >/dev/null 2>&1
	e2fsck -fy "$1" >/dev/null 2>&1
}

for bs in 1024 4096 16384; do
	# ext4 inode flags e2fsck ignores without their feature: i_blocks stays
	# in sectors (huge_file), a named regular file stays a file (ea_inode)
	case_ "huge_file flag on ext3 (bs $bs)" "$bs" "write $work/small f" "sif f flags 0x40000"
	case_ "ea_inode flag on a regular file (bs $bs)" "$bs" "write $work/small f" "sif f flags 0x200000"
	# orphan list heads e2fsck -n (and the kernel) drop unread
	for head in 1 7 5000000 20; do
		case_ "s_last_orphan $head (reserved, past the count or free; bs $bs)" "$bs" \
			"write $work/small f" "ssv last_orphan $head"
	done
	# file type 0 (unknown): e2fsck -n only offers to fill it in
	case_ "file type 0 on '.' (bs $bs)" "$bs" "mkdir d" "!ftype_dot"
	case_ "file type 0 on '..' (bs $bs)" "$bs" "mkdir d" "!ftype_dotdot"
	case_ "file type 0 on a name (bs $bs)" "$bs" "mkdir d" "write $work/small d/f" "!ftype_name"
	# inodes stored in a bad block of the inode table: e2fsck leaves them unread
	case_ "bad block in the inode table (bs $bs)" "$bs" "!bad_itable_block"

	# i_size at the start of the last block: that block lies wholly past EOF,
	# which e2fsck allows (size < last block's start is what it flags)
	head -c $((2 * bs + 100)) /dev/zero | tr '\0' x >"$work/three"   # three blocks
	case_ "size 0, one block (bs $bs)" "$bs" "write $work/small f" "sif f size 0"
	case_ "size at the last block's start (bs $bs)" "$bs" "write $work/three f" "sif f size $((2 * bs))"
done
echo "$fails failure(s)"
[ "$fails" -eq 0 ]
