#!/bin/bash
# bench/lib_transitions.sh: make K transitions (before/after image pairs) of a
# populated ext3 image, written by the kernel's ext3 driver or by recon-fuse.
# The image is populated once by the kernel (NFILES small files in 10
# directories, files past the indirect thresholds, a 400-entry htree
# directory, symlinks, and files whose extended attributes do not fit in the
# inode, several with the same set, so that the kernel shares one xattr block
# between them: h_refcount > 1); then each of K rounds mounts the chosen driver,
# runs a seeded batch of operations, unmounts (for recon-fuse: until the daemon
# has exited, status 0) and snapshots.  OUTDIR/t000.img is the base,
# OUTDIR/tNNN.img the image after round N; transition N = (t(N-1), tN).
# usage: bench/lib_transitions.sh OUTDIR BLOCKSIZE K SEED NFILES kernel|recon [RECON_FUSE]
set -euo pipefail
OUT=$1 BS=$2 K=$3 SEED=$4 NFILES=$5 DRIVER=$6 RECON=${7:-}
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 2; }
case $DRIVER in kernel) ;; recon) [ -x "$RECON" ] || { echo "recon-fuse binary needed" >&2; exit 2; } ;;
*) echo "driver: kernel or recon" >&2; exit 2 ;; esac
mkdir -p "$OUT"
MNT=$(mktemp -d /tmp/bench-trans-mnt.XXXXXX)
IMG=$OUT/work.img
RPID=""
cleanup() {
	if mountpoint -q "$MNT"; then
		if [ "$DRIVER" = recon ]; then fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT"
		else umount "$MNT" 2>/dev/null || umount -l "$MNT"; fi
	fi
	[ -n "$RPID" ] && { kill "$RPID" 2>/dev/null; wait "$RPID" 2>/dev/null; }
	rmdir "$MNT" 2>/dev/null || true
}
trap cleanup EXIT
RANDOM=$SEED

if [ "$BS" = 1024 ]; then SIZE=48M; else SIZE=192M; fi
rm -f "$IMG"; truncate -s "$SIZE" "$IMG"
mke2fs -q -F -t ext3 -b "$BS" -I 256 -U 6f1c7a52-5e0b-4c39-9d7e-0a5e3f00e3a1 \
	-E root_owner=0:0,hash_seed=2d0f5c1e-7b7a-4d8e-a1a6-3c9b7f0e5d11 "$IMG" >/dev/null

data() { yes "blk$RANDOM" | head -c "$1" || :; }
# an xattr value too large for the 256-byte inode's free space: goes to a block
bigval() { printf 'v%s%0300d' "$1" 0; }
IND=$((12 * BS)) DIND=$(( (12 + BS / 4) * BS ))

mount_driver() {
	if [ "$DRIVER" = kernel ]; then
		mount -t ext3 -o loop "$IMG" "$MNT"
	else
		"$RECON" -f "$IMG" "$MNT" 2>>"$OUT/daemon.log" &
		RPID=$!
		local i
		for i in $(seq 1 100); do
			mountpoint -q "$MNT" && return 0
			kill -0 "$RPID" 2>/dev/null || { echo "recon-fuse exited at mount" >&2; RPID=""; exit 1; }
			sleep 0.1
		done
		echo "recon-fuse did not mount" >&2; exit 1
	fi
}
umount_driver() {
	if [ "$DRIVER" = kernel ]; then
		umount "$MNT" || { sleep 1; umount "$MNT"; }
	else
		fusermount3 -u "$MNT" || { sleep 1; fusermount3 -u "$MNT"; }
		local rc=0; wait "$RPID" || rc=$?
		RPID=""
		[ "$rc" = 0 ] || { echo "recon-fuse exited with status $rc" >&2; exit 1; }
	fi
}

populate() {
	local d i
	for d in $(seq 0 9); do mkdir -p "$MNT/d$d/sub"; done
	for i in $(seq 1 "$NFILES"); do
		d=$(( i % 10 ))
		data $(( RANDOM % 3000 + 1 )) > "$MNT/d$d/f$i"
	done
	data $(( IND + BS )) > "$MNT/d0/big_ind"
	data $(( DIND + 3 * BS )) > "$MNT/d1/big_dind"
	mkdir "$MNT/htree"
	for i in $(seq 1 400); do : > "$MNT/htree/a_rather_long_entry_name_to_fill_blocks_$i"; done
	ln -s target "$MNT/d2/fastlink"
	ln -s "$(printf 'p%.0s' $(seq 1 100))/long/slow/symlink/target" "$MNT/d2/slowlink"
	setfattr -n user.tag -v populated "$MNT/d3/f3"
	# xattr blocks: 40 files share one set (one block, h_refcount 40 when the
	# kernel's mbcache shares it), 20 files have a set of their own
	local f
	for i in $(seq 1 40); do f=$(( i * 7 )); setfattr -n user.shared -v "$(bigval shared)" "$MNT/d$(( f % 10 ))/f$f"; done
	for i in $(seq 1 20); do f=$(( i * 11 + 3 )); setfattr -n user.own -v "$(bigval "$i")" "$MNT/d$(( f % 10 ))/f$f"; done
}

pick_file() {
	local list; mapfile -t list < <(cd "$MNT" && find . -type f | LC_ALL=C sort)
	[ ${#list[@]} -gt 0 ] && echo "$MNT/${list[$(( RANDOM % ${#list[@]} ))]}"
}
pick_dir() {
	local list; mapfile -t list < <(cd "$MNT" && find . -type d ! -name lost+found | LC_ALL=C sort)
	echo "$MNT/${list[$(( RANDOM % ${#list[@]} ))]}"
}

one_op() {
	local n=$1 f d op=$(( RANDOM % 19 ))
	case $op in
	0) d=$(pick_dir); data $(( RANDOM % 5000 + 1 )) > "$d/new$n" ;;
	1) d=$(pick_dir); data $(( IND + (RANDOM % 4) * BS )) > "$d/ind$n" ;;
	2) d=$(pick_dir); data $(( DIND + (RANDOM % 3) * BS )) > "$d/dind$n" ;;
	3) f=$(pick_file) && data $(( RANDOM % (3 * BS) + 1 )) >> "$f" ;;
	4) f=$(pick_file) && truncate -s $(( RANDOM % (14 * BS) )) "$f" ;;
	5) d=$(pick_dir); mkdir -p "$d/dir$n"; : > "$d/dir$n/inner" ;;
	6) d=$(pick_dir); mkdir "$d/rmd$n"; rmdir "$d/rmd$n"; mkdir "$d/keep$n" ;;
	7) f=$(pick_file) && mv "$f" "$(pick_dir)/mv$n" ;;
	8) f=$(pick_file) && ln "$f" "$(pick_dir)/hl$n" ;;
	9) ln -s "t$n" "$(pick_dir)/sl$n" ;;
	10) ln -s "$(printf 'q%.0s' $(seq 1 $(( 70 + RANDOM % 200 ))))/$n" "$(pick_dir)/ssl$n" ;;
	11) f=$(pick_file) && setfattr -n "user.k$n" -v "v$RANDOM$RANDOM" "$f" ;;
	12) f=$(pick_file) && rm -f "$f" ;;
	13) for i in $(seq 1 $(( 20 + RANDOM % 60 ))); do : > "$MNT/htree/another_long_name_for_the_index_${n}_$i"; done ;;
	14) f=$(pick_file) && { setfattr -x user.tag "$f" 2>/dev/null || setfattr -n user.tag -v x "$f"; } ;;
	15) d=$(pick_dir); mkdir -p "$d/tree$n/a/b"; data 100 > "$d/tree$n/a/b/leaf"; [ $(( RANDOM % 2 )) = 0 ] && rm -rf "$d/tree$n" ;;
	# xattr blocks: join the shared set, get a block of one's own, drop one
	16) f=$(pick_file) && setfattr -n user.shared -v "$(bigval shared)" "$f" ;;
	17) f=$(pick_file) && setfattr -n user.own -v "$(bigval "$n")" "$f" ;;
	18) f=$(pick_file) && { setfattr -x user.shared "$f" 2>/dev/null || setfattr -x user.own "$f" 2>/dev/null || :; } ;;
	esac
}

# populate with the kernel driver whatever DRIVER is (fast), then the rounds
mount -t ext3 -o loop "$IMG" "$MNT"
populate
umount "$MNT"
cp --sparse=always "$IMG" "$OUT/t000.img"
for t in $(seq 1 "$K"); do
	mount_driver
	nops=$(( 5 + RANDOM % 20 ))
	for j in $(seq 1 $nops); do one_op "${t}_$j" || true; done
	umount_driver
	cp --sparse=always "$IMG" "$OUT/$(printf 't%03d.img' "$t")"
done
rm -f "$IMG"
echo "$OUT: $DRIVER bs=$BS K=$K seed=$SEED files=$NFILES"
