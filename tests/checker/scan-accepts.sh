#!/bin/bash
# tests/checker/scan-accepts.sh: states e2fsck -fn accepts that recon-check
# --scan (the mount's base check) must accept too: a rejection of a state
# fsck passes is a false alarm, and at mount it would serve the image
# read-only.  Each case: a small image edited by debugfs, then both verdicts.
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
	printf '%s\n' "$@" | debugfs -w "$img" >/dev/null 2>&1
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

for bs in 1024 4096; do
	# i_size at the start of the last block: that block lies wholly past EOF,
	# which e2fsck allows (size < last block's start is what it flags)
	head -c $((2 * bs + 100)) /dev/zero | tr '\0' x >"$work/three"   # three blocks
	case_ "size 0, one block (bs $bs)" "$bs" "write $work/small f" "sif f size 0"
	case_ "size at the last block's start (bs $bs)" "$bs" "write $work/three f" "sif f size $((2 * bs))"
done
echo "$fails failure(s)"
[ "$fails" -eq 0 ]
