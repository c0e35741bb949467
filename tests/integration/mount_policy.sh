#!/bin/bash
# What recon-fuse mounts how:
#  - features it does not write (inline_data, quota, encrypt,
#    MMP, bigalloc): read-write refused with a message naming the feature and
#    offering -o ro; -o ro mounts and reads;
#  - an image marked with errors: mounted read-only with a message (writes get
#    EROFS) unless -o force_rw;
#  - ext3: needs_recovery set while mounted, cleared at unmount; ext2 and ext3
#    with -o journal=off: written in place, VALID_FS cleared while mounted and
#    set again at unmount; e2fsck -fn exits 0 after each.
. "$(dirname "$0")/lib.sh"
need_root
mnt="$SCRATCH/mnt"
img="$SCRATCH/p.img"
state() { dumpe2fs -h "$1" 2>/dev/null | sed -n 's/^Filesystem state: *//p'; }
features() { dumpe2fs -h "$1" 2>/dev/null | sed -n 's/^Filesystem features: *//p'; }

# 1. unsupported features
for spec in "ext4:inline_data:inline_data" "ext4:casefold:casefold" "ext4:encrypt:encrypt" \
	    "ext3:mmp:MMP" "ext4:bigalloc:bigalloc"; do
	IFS=: read -r type feat word <<<"$spec"
	t0=$(date +%s)
	rm -f "$img"; truncate -s 64M "$img"
	if ! mke2fs -F -q -t "$type" -O "$feat" "$img" >"$SCRATCH/mke2fs.out" 2>&1; then
		log "mke2fs cannot make $feat here: not tested"; continue
	fi
	debugfs -w -R "write /etc/hostname hello" "$img" >/dev/null 2>&1
	if mount_recon "$img" "$mnt" "" 2>/dev/null; then
		fail "$feat: mounted read-write"
		umount_recon "$mnt"
	else
		[ "$RECON_STATUS" -ne 0 ] && [ "$RECON_STATUS" -lt 128 ] || fail "$feat: refused with status $RECON_STATUS"
		grep -qiE -- "$word" "$RECON_LOG" || fail "$feat: the refusal does not name the feature: $(head -2 "$RECON_LOG")"
		grep -q -- "-o ro" "$RECON_LOG" || fail "$feat: the refusal does not offer -o ro: $(head -2 "$RECON_LOG")"
	fi
	if [ "$feat" = bigalloc ]; then
		continue    # clusters: a read-only mount is offered, not required to read them
	fi
	if mount_recon "$img" "$mnt" ro; then
		[ "$(cat "$mnt/hello" 2>/dev/null)" = "$(cat /etc/hostname)" ] || fail "$feat: -o ro does not read"
		umount_recon "$mnt"
	else
		fail "$feat: -o ro refused too"
	fi
	fsck_clean "$img" "$feat after -o ro"
	log "$feat: $(( $(date +%s) - t0 )) s"
done

# 2. an image marked with errors
mkimg "$img" 4096 64M
tune2fs -E force_fsck "$img" >/dev/null 2>&1 || die "tune2fs -E force_fsck"
dumpe2fs -h "$img" 2>/dev/null | grep -q 'Filesystem state:.*with errors' || die "could not mark the image with errors"
if mount_recon "$img" "$mnt" ""; then
	touch "$mnt/x" 2>"$SCRATCH/touch.err" && fail "an image with errors mounted writable without -o force_rw"
	grep -q 'Read-only' "$SCRATCH/touch.err" || fail "image with errors: write gave $(cat "$SCRATCH/touch.err"), want EROFS"
	grep -qi 'error' "$RECON_LOG" || fail "image with errors: mounted read-only without a message"
	umount_recon "$mnt"
else
	fail "an image marked with errors is refused (want a read-only mount)"
fi
if mount_recon "$img" "$mnt" force_rw; then
	echo data >"$mnt/forced" || fail "-o force_rw: not writable"
	umount_recon "$mnt"
else
	fail "-o force_rw refused"
fi

# 3. journal states while mounted
check_mounted_state() {   # check_mounted_state WHAT OPTS WANT_STATE WANT_RECOVERY(0/1)
	local what=$1 opts=$2 want_state=$3 want_rec=$4 st rec
	mount_recon "$img" "$mnt" "$opts" || { fail "$what: mount"; return; }
	python3 -c 'import os,sys
for i in range(50):
    with open(os.path.join(sys.argv[1], "f%d" % i), "wb") as f:
        f.write(b"y" * 5000)
        os.fsync(f.fileno())' "$mnt" || fail "$what: writes"
	st=$(state "$img")
	rec=$(features "$img" | grep -c needs_recovery)
	[ "$st" = "$want_state" ] || fail "$what: state while mounted '$st', want '$want_state'"
	[ "$rec" = "$want_rec" ] || fail "$what: needs_recovery while mounted: $rec, want $want_rec"
	umount_recon "$mnt"
	[ "$(state "$img")" = clean ] || fail "$what: state after unmount '$(state "$img")', want clean"
	features "$img" | grep -q needs_recovery && fail "$what: needs_recovery left after unmount"
	fsck_clean "$img" "$what"
	log "$what: while mounted: state '$st', needs_recovery $rec"
}
mkimg "$img" 4096 64M
check_mounted_state "ext3" "" clean 1
check_mounted_state "ext3 -o journal=off" "journal=off" "not clean" 0
rm -f "$img"; truncate -s 64M "$img"
mke2fs -F -q -t ext2 "$img" >/dev/null 2>&1 || die "mke2fs ext2"
check_mounted_state "ext2" "" "not clean" 0
finish
