#!/bin/bash
# A group leaving BLOCK_UNINIT or INODE_UNINIT without its bitmap written:
# the block on disk becomes its bitmap.  Approved when that block holds the
# bitmap the flag stood for (kernel ext4 clears BLOCK_UNINIT of a group that
# initialises to all zeros, over a block that reads as zeros: no write in
# the pair); rejected (INV_BGD_UNINIT) when it holds stray bits, and e2fsck
# -fn agrees on every after-image.  bg_itable_unused, meaningless under
# INODE_UNINIT, is set afresh as the flag clears; after, it only shrinks.
# Descriptors carry uninit_bg's crc16 (debugfs recomputes it), no bitmap
# checksums: the rule under test alone decides.
# usage: uninit-exit.sh   (env RECON_CHECK, RECON_SRC, via meson test)
. "$RECON_SRC/tests/integration/lib.sh"
: "${RECON_CHECK:?run through meson test}"
command -v debugfs >/dev/null || skip "no debugfs"
base="$SCRATCH/base.img"
truncate -s 64M "$base"
mke2fs -F -q -t ext4 -b 1024 -O ^metadata_csum,uninit_bg "$base" >/dev/null 2>&1 || skip "mke2fs cannot make uninit_bg"
# a group under both flags with nothing of its own inside (flex_bg keeps its
# bitmaps and table in group 0, no backup superblock): all free, all zeros
read -r G BB IB < <(dumpe2fs "$base" 2>/dev/null | awk '
	/^Group [0-9]+:/ { g = $2; sub(":", "", g); both = /INODE_UNINIT/ && /BLOCK_UNINIT/ }
	/Block bitmap at/ { bb = $4 } /Inode bitmap at/ { ib = $4 }
	/free blocks,/ && both && $1 == 8192 && !done { print g, bb, ib; done = 1 }')
[ -n "${G:-}" ] || die "no group under both UNINIT flags without metadata of its own"
log "group $G: block bitmap $BB, inode bitmap $IB"

IPG=$(dumpe2fs -h "$base" 2>/dev/null | awk '/^Inodes per group:/ { print $4 }')

# poke IMG BLOCK OFFSET LENGTH BYTE: LENGTH bytes of BLOCK (1 KiB) from OFFSET
poke() {
	python3 - "$@" <<'PY'
import sys
img, blk, off, n, byte = sys.argv[1], *map(int, sys.argv[2:])
with open(img, "r+b") as f:
    f.seek(blk * 1024 + off)
    f.write(bytes([byte]) * n)
PY
}

# debugfs -w IMG with COMMANDS (lines), group G's checksum recomputed after
edit_group() {
	printf '%s\nset_bg %s checksum calc\n' "$2" "$G" >"$SCRATCH/cmds"
	debugfs -w -f "$SCRATCH/cmds" "$1" >/dev/null 2>&1
}

# case NAME WANT FLAGS POKES...: before = base with the pokes ("BLOCK OFFSET
# LENGTH BYTE" each; no bitmap under the flag, so any bytes are
# consistent) and the debugfs commands $before_cmds; after = before with
# group G's flags set to FLAGS (and $after_cmds), its checksum recomputed.
# WANT: approve, or the invariant that must reject
case_() {
	local name=$1 want=$2 flags=$3 rc=0 fsck=0 p
	shift 3
	cp --sparse=always "$base" "$SCRATCH/before.img"
	for p in "$@"; do
		# shellcheck disable=SC2086
		poke "$SCRATCH/before.img" $p || die "$name: poke"
	done
	[ -z "${before_cmds:-}" ] || edit_group "$SCRATCH/before.img" "$before_cmds" || die "$name: debugfs"
	"$RECON_CHECK" --scan "$SCRATCH/before.img" >"$SCRATCH/out" 2>&1 ||
		{ fail "$name: the before-image does not scan clean"; head -3 "$SCRATCH/out"; return; }
	cp --sparse=always "$SCRATCH/before.img" "$SCRATCH/after.img"
	edit_group "$SCRATCH/after.img" "set_bg $G flags $flags${after_cmds:+
$after_cmds}" || die "$name: debugfs"
	"$RECON_CHECK" "$SCRATCH/before.img" "$SCRATCH/after.img" >"$SCRATCH/out" 2>&1 || rc=$?
	e2fsck -fn "$SCRATCH/after.img" >/dev/null 2>&1 || fsck=$?
	if [ "$want" = approve ]; then
		[ "$rc" = 0 ] || { fail "$name: rejected (exit $rc)"; head -3 "$SCRATCH/out"; }
		[ "$fsck" = 0 ] || fail "$name: e2fsck -fn is not clean on the after-image (exit $fsck)"
	else
		[ "$rc" = 1 ] && grep -q "^$want: group $G" "$SCRATCH/out" ||
			{ fail "$name: not rejected by $want (exit $rc)"; head -3 "$SCRATCH/out"; }
		# (a bg_itable_unused that grows over free inodes leaves a clean state:
		# INV_BGD_FROZEN's is a rule of transitions only)
		[ "$want" != INV_BGD_UNINIT ] || [ "$fsck" != 0 ] || fail "$name: e2fsck -fn calls the after-image clean"
	fi
}

# EXT2_BG_INODE_UNINIT 1, BLOCK_UNINIT 2, ITABLE_ZEROED 4.  1 KiB blocks:
# 8192 blocks a group, no block bitmap padding; the inode bitmap's padding
# is the block past its IPG/8 bytes.
pad="$IB $((IPG / 8)) $((1024 - IPG / 8)) 255"
case_ "BLOCK_UNINIT cleared over a zero bitmap" approve 5
case_ "INODE_UNINIT cleared over a clear bitmap, padding set" approve 6 "$pad"
case_ "both cleared over bitmaps as initialised" approve 4 "$pad"
case_ "INODE_UNINIT cleared, a stray bit under BLOCK_UNINIT" approve 6 "$pad" "$BB 0 1 1"
case_ "BLOCK_UNINIT cleared over a stray bit" INV_BGD_UNINIT 5 "$BB 0 1 1"
case_ "BLOCK_UNINIT cleared over a stray last bit" INV_BGD_UNINIT 5 "$BB 1023 1 128"
case_ "INODE_UNINIT cleared over a stray bit" INV_BGD_UNINIT 6 "$pad" "$IB 0 1 1"
case_ "INODE_UNINIT cleared over padding not set" INV_BGD_UNINIT 6
# bg_itable_unused under INODE_UNINIT means nothing (no inode initialised
# whatever it says; e2fsck and the scan accept any value there): the flag
# clearing sets it afresh, up to all the group's inodes
before_cmds="set_bg $G itable_unused 0" after_cmds="set_bg $G itable_unused $IPG" \
	case_ "INODE_UNINIT cleared, bg_itable_unused 0 under it set to all" approve 6 "$pad"
# once the group is initialised the field only shrinks
before_cmds="set_bg $G itable_unused 0
set_bg $G flags 6" after_cmds="set_bg $G itable_unused 10" \
	case_ "bg_itable_unused grows in an initialised group" INV_BGD_FROZEN 6 "$pad"
finish
