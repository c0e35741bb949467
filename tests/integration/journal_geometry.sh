#!/bin/bash
# A journal whose log is shorter than the kernel takes (the journal
# superblock's s_first raised so that s_maxlen - s_first < 1023; e2fsck -fn
# calls such an image clean) is refused at mount, read-write and read-only,
# as the kernel refuses it ("JBD2: Journal too short"), with a message that
# names the image, the log's length and the kernel's minimum; the image is
# not written.  Logs of 8, 16, 32 and 1022 blocks, clean and needing
# recovery; the same journal with a log of 1023 blocks mounts.
. "$(dirname "$0")/lib.sh"
need_root
command -v debugfs >/dev/null || skip "no debugfs"
mnt="$SCRATCH/mnt"
kmnt="$SCRATCH/kmnt"
base="$SCRATCH/base.img"
mkimg "$base" 1024 16M -J size=1    # 1024 journal blocks, s_first 1: a log of 1023
printf 'kept\n' >"$SCRATCH/f"
debugfs -w -R "write $SCRATCH/f f" "$base" >/dev/null 2>&1 || die "debugfs write"

# set_first IMG FIRST: the journal superblock's s_first (be32 at 0x14)
set_first() {
	local img=$1 first=$2 jsb
	jsb=$(debugfs -R "bmap <8> 0" "$img" 2>/dev/null) || die "bmap of the journal"
	python3 - "$img" "$((jsb * 1024 + 0x14))" "$first" <<'PY' || die "set s_first"
import struct, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2]))
    f.write(struct.pack(">I", int(sys.argv[3])))
PY
}

# the shortest log the kernel takes mounts, read-write
img="$SCRATCH/ok.img"
cp "$base" "$img"
if mount_recon "$img" "$mnt" ""; then
	[ "$(cat "$mnt/f")" = kept ] || fail "log of 1023 blocks: f does not read back"
	umount_recon "$mnt"
	fsck_clean "$img" "the image with a log of 1023 blocks"
else
	fail "a journal with a log of 1023 blocks is refused: $(cat "$RECON_LOG")"
fi

refused() {   # refused IMG WHAT OPTS LOGLEN
	local img=$1 what=$2 opts=$3 len=$4
	if mount_recon "$img" "$mnt" "$opts" 2>/dev/null; then
		fail "$what: mounted ($opts)"
		umount_recon "$mnt"
		return
	fi
	grep -q "the journal of $img is too short (its log has $len blocks; the kernel needs at least 1023" \
		"$RECON_LOG" || fail "$what ($opts): no clear message: $(cat "$RECON_LOG")"
	grep -q "tune2fs" "$RECON_LOG" || fail "$what ($opts): the message does not say what to do"
}

for len in 8 16 32 1022; do
	img="$SCRATCH/short$len.img"
	cp "$base" "$img"
	set_first "$img" $((1024 - len))
	e2fsck -fn "$img" >/dev/null 2>&1 || log "log of $len blocks: e2fsck -fn does not call it clean"
	cp "$img" "$SCRATCH/before.img"
	refused "$img" "log of $len blocks" "" "$len"
	refused "$img" "log of $len blocks" "ro" "$len"
	cmp -s "$img" "$SCRATCH/before.img" || fail "log of $len blocks: the refused mounts wrote"
done

# the kernel agrees: it refuses the journal, read-only too
if have_kernel_ext3; then
	cp "$SCRATCH/short32.img" "$SCRATCH/k.img"
	if kmount "$SCRATCH/k.img" "$kmnt" ro; then
		fail "the kernel mounts a journal with a log of 32 blocks (so should we?)"
		kumount "$kmnt"
	fi
else
	log "no kernel ext3: the kernel's refusal not compared"
fi

# needing recovery: refused before any replay is written
img="$SCRATCH/short32.img"
debugfs -w -R "feature needs_recovery" "$img" >/dev/null 2>&1 || die "set needs_recovery"
cp "$img" "$SCRATCH/before.img"
refused "$img" "log of 32 blocks needing recovery" "" 32
refused "$img" "log of 32 blocks needing recovery" "ro" 32
cmp -s "$img" "$SCRATCH/before.img" || fail "needing recovery: the refused mounts wrote"
finish
