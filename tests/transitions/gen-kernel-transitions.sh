#!/bin/bash
# Make K kernel ext3 transitions: a populated image, then K rounds of
# (loop-mount with the kernel driver, a seeded batch of operations, umount,
# snapshot).  Writes OUTDIR/t000.img (base) .. OUTDIR/tK.img; transition i is
# the pair (t(i-1), t(i)).  Deterministic by seed: the operation sequence comes
# from bash's $RANDOM seeded once, UUID and hash seed are fixed; where the
# kernel allocates (Orlov spreads top-level directories at random) may differ
# between runs.  Needs root and loop devices.
# usage: gen-kernel-transitions.sh OUTDIR BLOCKSIZE K SEED [NFILES]
set -euo pipefail
OUT=$1 BS=$2 K=$3 SEED=$4 NFILES=${5:-600}
[ "$(id -u)" = 0 ] || { echo "need root" >&2; exit 77; }
mkdir -p "$OUT"
MNT=$(mktemp -d /tmp/eval-mnt.XXXXXX)
IMG=$OUT/work.img
cleanup() { mountpoint -q "$MNT" && { umount "$MNT" || { sleep 1; umount "$MNT"; } || umount -l "$MNT"; }; rmdir "$MNT" 2>/dev/null || true; }
trap cleanup EXIT
RANDOM=$SEED

if [ "$BS" = 1024 ]; then SIZE=32M; else SIZE=160M; fi
rm -f "$IMG"; truncate -s "$SIZE" "$IMG"
mke2fs -q -F -t ext3 -b "$BS" -I 256 -U 6f1c7a52-5e0b-4c39-9d7e-0a5e3f00e3a1 \
    -E root_owner=0:0,hash_seed=2d0f5c1e-7b7a-4d8e-a1a6-3c9b7f0e5d11 "$IMG" >/dev/null

# data N: N bytes of seeded non-zero content (kernel writes real blocks)
data() { yes "blk$RANDOM" | head -c "$1" || :; }
rnd() { echo $(( RANDOM % $1 )); }
IND=$((12 * BS)) DIND=$(( (12 + BS / 4) * BS ))

populate() {
    local d i
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
}

pick_file() { # an existing regular file, seeded choice
    local list; mapfile -t list < <(cd "$MNT" && find . -type f | LC_ALL=C sort)
    [ ${#list[@]} -gt 0 ] && echo "$MNT/${list[$(( RANDOM % ${#list[@]} ))]}"
}
pick_dir() {
    local list; mapfile -t list < <(cd "$MNT" && find . -type d ! -name lost+found | LC_ALL=C sort)
    echo "$MNT/${list[$(( RANDOM % ${#list[@]} ))]}"
}

one_op() {
    local n=$1 f d op=$(( RANDOM % 16 ))
    case $op in
    0) d=$(pick_dir); data $(( RANDOM % 5000 + 1 )) > "$d/new$n" ;;
    1) d=$(pick_dir); data $(( IND + (RANDOM % 4) * BS )) > "$d/ind$n" ;;        # past 12 blocks
    2) d=$(pick_dir); data $(( DIND + (RANDOM % 3) * BS )) > "$d/dind$n" ;;      # past 12+bs/4
    3) f=$(pick_file) && data $(( RANDOM % (3 * BS) + 1 )) >> "$f" ;;            # append
    4) f=$(pick_file) && truncate -s $(( RANDOM % (14 * BS) )) "$f" ;;            # truncate
    5) d=$(pick_dir); mkdir -p "$d/dir$n"; : > "$d/dir$n/inner" ;;
    6) d=$(pick_dir); mkdir "$d/rmd$n"; rmdir "$d/rmd$n"; mkdir "$d/keep$n" ;;
    7) f=$(pick_file) && mv "$f" "$(pick_dir)/mv$n" ;;                          # rename across dirs
    8) f=$(pick_file) && ln "$f" "$(pick_dir)/hl$n" ;;                          # hard link
    9) ln -s "t$n" "$(pick_dir)/sl$n" ;;                                        # fast symlink
    10) ln -s "$(printf 'q%.0s' $(seq 1 $(( 70 + RANDOM % 200 ))))/$n" "$(pick_dir)/ssl$n" ;; # slow
    11) f=$(pick_file) && setfattr -n "user.k$n" -v "v$RANDOM$RANDOM" "$f" ;;
    12) f=$(pick_file) && rm -f "$f" ;;                                          # unlink
    13) for i in $(seq 1 $(( 20 + RANDOM % 60 ))); do : > "$MNT/htree/another_long_name_for_the_index_${n}_$i"; done ;;
    14) f=$(pick_file) && setfattr -x user.tag "$f" 2>/dev/null || setfattr -n user.tag -v x "$f" ;;
    15) d=$(pick_dir); mkdir -p "$d/tree$n/a/b"; data 100 > "$d/tree$n/a/b/leaf"; [ $(( RANDOM % 2 )) = 0 ] && rm -rf "$d/tree$n" ;;
    esac
}

mount -t ext3 -o loop "$IMG" "$MNT"
populate
umount "$MNT"
cp --sparse=always "$IMG" "$OUT/t000.img"
for t in $(seq 1 "$K"); do
    mount -t ext3 -o loop "$IMG" "$MNT"
    nops=$(( 5 + RANDOM % 20 ))
    for j in $(seq 1 $nops); do one_op "${t}_$j" || true; done
    umount "$MNT"
    cp --sparse=always "$IMG" "$OUT/$(printf 't%03d.img' "$t")"
done
rm -f "$IMG"
echo "$OUT: bs=$BS K=$K seed=$SEED"
