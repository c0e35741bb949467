#!/bin/bash
# The read-write gate and the checker against the feature table: for every
# feature the table does not serve read-write and checked, an ext3 image with
# that bit set in its superblock is refused read-write with a message naming
# the feature and offering -o ro, before anything is written (the image is
# byte-identical after); with checker=off the refusal names the feature only
# when the driver cannot write it; recon-check --scan names every feature the
# checker does not model (exit 2).  Unknown bits are refused by all three.
. "$(dirname "$0")/lib.sh"
need_root
table_exe="$RECON_BUILD/tests/checker/test_features"
[ -x "$table_exe" ] || die "test_features not built: $table_exe"
mnt="$SCRATCH/mnt"
base="$SCRATCH/base.img"
img="$SCRATCH/f.img"
mkimg "$base" 1024 16M
debugfs -w -R "write /etc/hostname hello" "$base" >/dev/null 2>&1

# setbit WORD MASK: OR MASK into the superblock's feature word of $img
setbit() {
	python3 - "$img" "$1" "$2" <<'PY'
import struct, sys
path, word, mask = sys.argv[1], sys.argv[2], int(sys.argv[3], 16)
off = 1024 + {"compat": 0x5C, "incompat": 0x60, "ro_compat": 0x64}[word]
with open(path, "r+b") as f:
    f.seek(off); v = struct.unpack("<I", f.read(4))[0]
    f.seek(off); f.write(struct.pack("<I", v | mask))
PY
}

# refused OPTS NAME: recon-fuse with OPTS exits 1 without mounting, naming NAME and -o ro
refused() {
	local opts=$1 name=$2
	if mount_recon "$img" "$mnt" "$opts" 2>/dev/null; then
		fail "$name ($opts): mounted read-write"; umount_recon "$mnt"; return
	fi
	[ "$RECON_STATUS" -eq 1 ] || fail "$name ($opts): exit $RECON_STATUS, want 1: $(head -3 "$RECON_LOG")"
	grep -qF -- "$name" "$RECON_LOG" || fail "$name ($opts): the refusal does not name it: $(head -3 "$RECON_LOG")"
	grep -qF -- "-o ro" "$RECON_LOG" || fail "$name ($opts): the refusal does not offer -o ro: $(head -3 "$RECON_LOG")"
}

mkdir -p "$mnt"
rows=0
while read -r word mask name written modelled; do
	[ "$written" = 1 ] && [ "$modelled" = 1 ] && continue
	rows=$((rows + 1))
	cp --sparse=always "$base" "$img"
	setbit "$word" "$mask"
	cp --sparse=always "$img" "$SCRATCH/before.img"
	refused "" "$name"
	if [ "$written" = 0 ]; then
		refused "checker=off" "$name"
	else
		# written, not modelled: checker=off may serve it (or refuse it for
		# what the edit broke), never as a feature it cannot write
		if mount_recon "$img" "$mnt" checker=off 2>/dev/null; then umount_recon "$mnt"; fi
		grep -q "cannot write" "$RECON_LOG" && fail "$name (checker=off): refused as unwritable: $(head -2 "$RECON_LOG")"
		cp --sparse=always "$SCRATCH/before.img" "$img"
	fi
	cmp -s "$img" "$SCRATCH/before.img" || fail "$name: a refused read-write mount changed the image"
	rc=0
	"$RECON_CHECK" --scan "$img" >"$SCRATCH/scan.out" 2>&1 || rc=$?
	if [ "$modelled" = 0 ]; then
		[ "$rc" -eq 2 ] || fail "$name: recon-check --scan exit $rc, want 2 (cannot judge)"
		grep -qF -- "$name" "$SCRATCH/scan.out" || fail "$name: recon-check --scan does not name it: $(head -2 "$SCRATCH/scan.out")"
	fi
done < <("$table_exe" --list)
# every row the table does not both write and model was tried
want=$("$table_exe" --list | awk '!($4 == 1 && $5 == 1)' | wc -l)
[ "$rows" -ge 15 ] && [ "$rows" -eq "$want" ] || fail "$rows table rows tested, want $want (at least 15)"

# bits no row names: every word
for spec in "compat 0x80000000" "ro_compat 0x40000000" "incompat 0x800000"; do
	cp --sparse=always "$base" "$img"
	setbit $spec
	cp --sparse=always "$img" "$SCRATCH/before.img"
	refused "" "unknown"
	cmp -s "$img" "$SCRATCH/before.img" || fail "unknown bit ($spec): the image changed"
done
log "$rows feature rows and 3 unknown bits refused by name"
finish
