#!/bin/bash
# recon-check --scan against e2fsck -fn on every image of the e2fsprogs test
# corpus (each gunzipped to a scratch copy).  Prints one line per image where
# the two disagree, and a summary.  recon-check exit 2 (refused: ext4
# features, bad geometry) is counted apart.  Exit 1 if recon-check crashes or
# times out on an image, or rejects an image e2fsck -fn finds clean (a false
# alarm); the e2fsck-only ones are listed and explained in the checker's README
# notes (orphan lists e2fsck -n cannot process).
# usage: scan-corpus.sh [CORPUS_DIR]   (env RECON_CHECK)
set -uo pipefail
CORPUS=${1:-/work/shared/corpus/e2fsprogs-tests}
RC=${RECON_CHECK:?set RECON_CHECK to the recon-check binary}
[ -d "$CORPUS" ] || { echo "SKIP: no corpus at $CORPUS"; exit 77; }
W=$(mktemp -d /tmp/chk-corpus.XXXXXX)
trap 'rm -rf "$W"' EXIT
agree=0 refused=0 crashed=0 chk_only=0 fsck_only=0 total=0
for d in "$CORPUS"/*/; do
    name=$(basename "$d")
    [ -f "$d/image.gz" ] || continue
    gunzip -c "$d/image.gz" > "$W/img" 2>/dev/null || continue
    total=$((total + 1))
    out=$(timeout 120 "$RC" --scan "$W/img" 2>&1); c=$?
    if [ $c -eq 2 ]; then refused=$((refused + 1)); continue; fi
    if [ $c -gt 2 ]; then crashed=$((crashed + 1)); echo "CRASH/TIMEOUT (exit $c) $name: $(echo "$out" | tail -3 | tr '\n' ' ')"; continue; fi
    timeout 120 e2fsck -fn "$W/img" >"$W/fsck" 2>&1; f=$?
    if [ $c -eq 0 ] && [ $f -ne 0 ]; then
        fsck_only=$((fsck_only + 1))
        echo "e2fsck-only  $name: $(grep -v '^Pass\|^e2fsck\|^$\|^Warning' "$W/fsck" | head -2 | tr '\n' ' ' | cut -c1-200)"
    elif [ $c -ne 0 ] && [ $f -eq 0 ]; then
        chk_only=$((chk_only + 1))
        echo "checker-only $name: $(echo "$out" | head -2 | tr '\n' ' ' | cut -c1-200)"
    else
        agree=$((agree + 1))
    fi
done
echo "corpus images: $total, refused (exit 2): $refused, agree: $agree, checker-only: $chk_only, e2fsck-only: $fsck_only, crashed: $crashed"
[ "$chk_only" = 0 ] && [ "$crashed" = 0 ]
