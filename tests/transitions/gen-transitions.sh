#!/bin/bash
# Make K ext3 transitions (before/after image pairs) of a populated image, for
# the transition tests (tests/transitions) and the corruption campaign
# (bench/campaign).  The image is populated once by the kernel's ext3 driver
# (NFILES small files in 10 directories, files past the indirect thresholds, a
# 400-entry htree directory, fast and slow symlinks, an xattr); then each of K
# rounds mounts the chosen driver, runs a seeded batch of operations, unmounts
# (for recon-fuse: until the daemon has exited, status 0) and snapshots.
# OUTDIR/t000.img is the base, OUTDIR/tNNN.img the image after round N;
# transition N is the pair (t(N-1), tN).
#
# Deterministic by seed: the operation sequence comes from bash's $RANDOM
# seeded once, UUID and hash seed are fixed; where the kernel allocates (Orlov
# spreads top-level directories at random) may differ between runs.
# Needs root and loop devices (exit 77 otherwise).
#
# usage: gen-transitions.sh [options] OUTDIR BLOCKSIZE K SEED [NFILES]
#   --driver kernel|recon  who writes the rounds (default kernel)
#   --recon-fuse BIN       the recon-fuse binary (--driver recon)
#   --xattr-blocks         also files whose xattrs do not fit in the inode,
#                          several with the same set, so that the kernel
#                          shares one xattr block between them (h_refcount >
#                          1), and operations that join, leave and own such sets
#   --image-size SIZE      image size (default 32M at 1 KiB blocks, 160M at 4 KiB)
#   NFILES defaults to 600.
set -euo pipefail
DRIVER=kernel RECON= XATTR_BLOCKS=0 SIZE=
while [ $# -gt 0 ]; do
	case $1 in
	--driver) DRIVER=$2; shift 2 ;;
	--recon-fuse) RECON=$2; shift 2 ;;
	--xattr-blocks) XATTR_BLOCKS=1; shift ;;
	--image-size) SIZE=$2; shift 2 ;;
	-*) echo "gen-transitions.sh: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -ge 4 ] || { sed -n '17,25p' "$0" >&2; exit 2; }
OUT=$1 BS=$2 K=$3 SEED=$4 NFILES=${5:-600}
[ "$(id -u)" = 0 ] || { echo "gen-transitions.sh: needs root and loop devices" >&2; exit 77; }
case $DRIVER in
kernel) ;;
recon) [ -x "$RECON" ] || { echo "gen-transitions.sh: --driver recon needs --recon-fuse BIN" >&2; exit 2; } ;;
*) echo "gen-transitions.sh: --driver kernel or recon" >&2; exit 2 ;;
esac
[ "$XATTR_BLOCKS" = 0 ] || command -v setfattr >/dev/null ||
	{ echo "gen-transitions.sh: --xattr-blocks needs setfattr (package attr)" >&2; exit 2; }
[ "$XATTR_BLOCKS" = 0 ] || [ "$NFILES" -ge 280 ] ||
	{ echo "gen-transitions.sh: --xattr-blocks needs NFILES >= 280" >&2; exit 2; }
mkdir -p "$OUT"
MNT=$(mktemp -d /tmp/gen-transitions-mnt.XXXXXX)
IMG=$OUT/work.img
RPID=
cleanup() {
	if mountpoint -q "$MNT"; then
		if [ -n "$RPID" ]; then fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT"
		else umount "$MNT" 2>/dev/null || { sleep 1; umount "$MNT"; } || umount -l "$MNT"; fi
	fi
	[ -n "$RPID" ] && { kill "$RPID" 2>/dev/null; wait "$RPID" 2>/dev/null; }
	rmdir "$MNT" 2>/dev/null || true
}
trap cleanup EXIT
RANDOM=$SEED

[ -n "$SIZE" ] || if [ "$BS" = 1024 ]; then SIZE=32M; else SIZE=160M; fi
rm -f "$IMG"; truncate -s "$SIZE" "$IMG"
mke2fs -q -F -t ext3 -b "$BS" -I 256 -U 6f1c7a52-5e0b-4c39-9d7e-0a5e3f00e3a1 \
	-E root_owner=0:0,hash_seed=2d0f5c1e-7b7a-4d8e-a1a6-3c9b7f0e5d11 "$IMG" >/dev/null

# Every draw from $RANDOM happens in this shell, never in a subshell (a
# pipeline, $(...)): bash reseeds $RANDOM in subshells, which would make the
# sequence, and so the transitions, differ from run to run.
# data N: N bytes of seeded non-zero content (the driver writes real blocks)
data() { local word="blk$RANDOM"; yes "$word" | head -c "$1" || :; }
# an xattr value too large for the 256-byte inode's free space: goes to a block
bigval() { printf 'v%s%0300d' "$1" 0; }
IND=$((12 * BS)) DIND=$(( (12 + BS / 4) * BS ))

kernel_mount() { mount -t ext3 -o loop "$IMG" "$MNT"; }
kernel_umount() { umount "$MNT" || { sleep 1; umount "$MNT"; }; }
mount_driver() {
	[ "$DRIVER" = kernel ] && { kernel_mount; return; }
	"$RECON" -f "$IMG" "$MNT" 2>>"$OUT/daemon.log" &
	RPID=$!
	local i
	for i in $(seq 1 100); do
		mountpoint -q "$MNT" && return 0
		kill -0 "$RPID" 2>/dev/null || { echo "recon-fuse exited at mount" >&2; RPID=; exit 1; }
		sleep 0.1
	done
	echo "recon-fuse did not mount" >&2; exit 1
}
umount_driver() {
	[ "$DRIVER" = kernel ] && { kernel_umount; return; }
	fusermount3 -u "$MNT" || { sleep 1; fusermount3 -u "$MNT"; }
	local rc=0; wait "$RPID" || rc=$?
	RPID=
	[ "$rc" = 0 ] || { echo "recon-fuse exited with status $rc" >&2; exit 1; }
}

populate() {
	local d i f
	for d in $(seq 0 9); do mkdir -p "$MNT/d$d/sub"; done
	for i in $(seq 1 "$NFILES"); do
		d=$(( i % 10 ))
		data $(( RANDOM % 3000 + 1 )) > "$MNT/d$d/f$i"
	done
	# a few larger files across the indirect thresholds
	data $(( IND + BS )) > "$MNT/d0/big_ind"
	data $(( DIND + 3 * BS )) > "$MNT/d1/big_dind"
	# a directory large enough to be indexed (htree)
	mkdir "$MNT/htree"
	for i in $(seq 1 400); do : > "$MNT/htree/a_rather_long_entry_name_to_fill_blocks_$i"; done
	ln -s target "$MNT/d2/fastlink"
	ln -s "$(printf 'p%.0s' $(seq 1 100))/long/slow/symlink/target" "$MNT/d2/slowlink"
	setfattr -n user.tag -v populated "$MNT/d3/f3" 2>/dev/null || true
	[ "$XATTR_BLOCKS" = 1 ] || return 0
	# xattr blocks: 40 files share one set (one block, h_refcount 40 when the
	# kernel's mbcache shares it), 20 files have a set of their own
	for i in $(seq 1 40); do f=$(( i * 7 )); setfattr -n user.shared -v "$(bigval shared)" "$MNT/d$(( f % 10 ))/f$f"; done
	for i in $(seq 1 20); do f=$(( i * 11 + 3 )); setfattr -n user.own -v "$(bigval "$i")" "$MNT/d$(( f % 10 ))/f$f"; done
}

# pick_file / pick_dir: a seeded choice of an existing regular file or
# directory, in $PICK (pick_file fails when there is none)
pick_file() {
	local list; mapfile -t list < <(cd "$MNT" && find . -type f | LC_ALL=C sort)
	[ ${#list[@]} -gt 0 ] || return 1
	PICK="$MNT/${list[RANDOM % ${#list[@]}]}"
}
pick_dir() {
	local list; mapfile -t list < <(cd "$MNT" && find . -type d ! -name lost+found | LC_ALL=C sort)
	PICK="$MNT/${list[RANDOM % ${#list[@]}]}"
}

# operations 16-18 (xattr blocks) are drawn only with --xattr-blocks
OP_KINDS=16; [ "$XATTR_BLOCKS" = 0 ] || OP_KINDS=19
one_op() {
	local n=$1 f i count op=$(( RANDOM % OP_KINDS ))
	case $op in
	0) pick_dir; data $(( RANDOM % 5000 + 1 )) > "$PICK/new$n" ;;
	1) pick_dir; data $(( IND + (RANDOM % 4) * BS )) > "$PICK/ind$n" ;;       # past 12 blocks
	2) pick_dir; data $(( DIND + (RANDOM % 3) * BS )) > "$PICK/dind$n" ;;     # past 12+bs/4
	3) pick_file && data $(( RANDOM % (3 * BS) + 1 )) >> "$PICK" ;;           # append
	4) pick_file && truncate -s $(( RANDOM % (14 * BS) )) "$PICK" ;;           # truncate
	5) pick_dir; mkdir -p "$PICK/dir$n"; : > "$PICK/dir$n/inner" ;;
	6) pick_dir; mkdir "$PICK/rmd$n"; rmdir "$PICK/rmd$n"; mkdir "$PICK/keep$n" ;;
	7) pick_file && f=$PICK && pick_dir && mv "$f" "$PICK/mv$n" ;;             # rename across dirs
	8) pick_file && f=$PICK && pick_dir && ln "$f" "$PICK/hl$n" ;;             # hard link
	9) pick_dir; ln -s "t$n" "$PICK/sl$n" ;;                                    # fast symlink
	10) count=$(( 70 + RANDOM % 200 )); pick_dir                               # slow symlink
	    ln -s "$(printf 'q%.0s' $(seq 1 $count))/$n" "$PICK/ssl$n" ;;
	11) pick_file && setfattr -n "user.k$n" -v "v$RANDOM$RANDOM" "$PICK" ;;
	12) pick_file && rm -f "$PICK" ;;                                           # unlink
	13) count=$(( 20 + RANDOM % 60 ))
	    for i in $(seq 1 $count); do : > "$MNT/htree/another_long_name_for_the_index_${n}_$i"; done ;;
	14) pick_file && { setfattr -x user.tag "$PICK" 2>/dev/null || setfattr -n user.tag -v x "$PICK"; } ;;
	15) pick_dir; mkdir -p "$PICK/tree$n/a/b"; data 100 > "$PICK/tree$n/a/b/leaf"
	    [ $(( RANDOM % 2 )) = 0 ] && rm -rf "$PICK/tree$n" ;;
	# xattr blocks: join the shared set, get a block of one's own, drop one
	16) pick_file && setfattr -n user.shared -v "$(bigval shared)" "$PICK" ;;
	17) pick_file && setfattr -n user.own -v "$(bigval "$n")" "$PICK" ;;
	18) pick_file && { setfattr -x user.shared "$PICK" 2>/dev/null || setfattr -x user.own "$PICK" 2>/dev/null || :; } ;;
	esac
}

# populate with the kernel driver whatever DRIVER is (fast), then the rounds
kernel_mount
populate
kernel_umount
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
