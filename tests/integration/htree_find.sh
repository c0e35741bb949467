#!/bin/bash
# find over the corpus image f_h_normal (an htree directory of tens of
# thousands of entries) sees what the kernel sees, on a fresh mount (its time
# is logged: the bar is 2 s), then lookups of every name by path.
. "$(dirname "$0")/lib.sh"
need_root
img="$SCRATCH/f_h_normal.img" mnt="$SCRATCH/mnt"
corpus_image f_h_normal "$img" || skip "no f_h_normal in the corpus"
# what the image holds, by the kernel's driver when there is one
want=47000
# (f_h_normal has no journal: the kernel's driver mounts it as ext2)
mkdir -p "$SCRATCH/kmnt"
if have_kernel_ext3 && mount -t ext2 -o loop,ro "$img" "$SCRATCH/kmnt"; then
	MOUNTS+=("$SCRATCH/kmnt")
	want=$(find "$SCRATCH/kmnt" | wc -l)
	kumount "$SCRATCH/kmnt"
fi

mount_recon "$img" "$mnt" ro || die "mount f_h_normal"
start=$EPOCHREALTIME
count=$(timeout -s KILL $((60 * TMUL)) find "$mnt" | wc -l)
took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
log "find: $count entries in $took s"
[ "$count" -ge "$want" ] || fail "find saw $count entries, the kernel sees $want"
# the 2 s bar is reported, not asserted (a shared CI machine: no timing
# assertions in tests; bench/phases measures it)
awk -v t="$took" 'BEGIN { exit !(t >= 2.0) }' && log "NOTE: find took $took s (the bar is 2 s)"
# stat every name in the big directory by path (lookups, not readdir)
big=$(find "$mnt" -mindepth 1 -maxdepth 1 -type d -printf '%s %p\n' | sort -n | tail -1 | cut -d' ' -f2-)
start=$EPOCHREALTIME
n=$(find "$big" -mindepth 1 -maxdepth 1 -printf '%f\n' | python3 -c '
import os, sys
d = sys.argv[1]; n = 0
for line in sys.stdin:
    os.stat(os.path.join(d, line.rstrip("\n"))); n += 1
print(n)' "$big") || fail "stat of every name in $big"
log "stat of $n names in $big: $(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }') s"
umount_recon "$mnt"
gzip -dc "$CORPUS/f_h_normal/image.gz" | cmp -s "$img" - || fail "a read-only mount changed the image"
finish
