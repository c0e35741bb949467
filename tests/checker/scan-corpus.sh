#!/bin/bash
# recon-check --scan against e2fsck -fn on every image of the e2fsprogs test
# corpus (each gunzipped to a scratch copy), then on each image's repaired
# copy (e2fsck -fy until it is clean).  Prints one line per original image
# where the two disagree, the reasons of refusals (exit 2: features the
# checker does not model, bad geometry), and a summary.  Exit 1 if
# recon-check crashes or times out on an image, rejects an original e2fsck
# -fn finds clean, or rejects a repaired copy (false alarms); e2fsck-only
# verdicts (misses) are listed and explained in the checker's README.
# usage: scan-corpus.sh [CORPUS_DIR]   (env RECON_CHECK)
set -uo pipefail
CORPUS=${1:-${RECON_CORPUS:-/work/shared/corpus/e2fsprogs-tests}}
RC=${RECON_CHECK:?set RECON_CHECK to the recon-check binary}
[ -d "$CORPUS" ] || { echo "SKIP: no corpus at $CORPUS"; exit 77; }
W=$(mktemp -d /tmp/chk-corpus.XXXXXX)
trap 'rm -rf "$W"' EXIT
agree=0 refused=0 crashed=0 chk_only=0 fsck_only=0 total=0
fixed=0 fixed_ok=0 fixed_refused=0 fixed_bad=0 unfixable=0
: >"$W/reasons"
for d in "$CORPUS"/*/; do
    name=$(basename "$d")
    [ -f "$d/image.gz" ] || continue
    gunzip -c "$d/image.gz" > "$W/img" 2>/dev/null || continue
    total=$((total + 1))
    out=$(timeout 120 "$RC" --scan "$W/img" 2>&1); c=$?
    if [ $c -eq 2 ]; then
        refused=$((refused + 1))
        echo "$out" | tail -1 | sed 's/^recon-check: [^:]*: //' >>"$W/reasons"
    elif [ $c -gt 2 ]; then
        crashed=$((crashed + 1)); echo "CRASH/TIMEOUT (exit $c) $name: $(echo "$out" | tail -3 | tr '\n' ' ')"
    else
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
    fi
    # the repaired copy: what e2fsck leaves once it has nothing to fix
    clean=0
    for _ in 1 2 3 4 5; do
        timeout 120 e2fsck -fy "$W/img" >/dev/null 2>&1
        timeout 120 e2fsck -fn "$W/img" >/dev/null 2>&1 && { clean=1; break; }
    done
    if [ $clean = 0 ]; then unfixable=$((unfixable + 1)); continue; fi
    fixed=$((fixed + 1))
    out=$(timeout 120 "$RC" --scan "$W/img" 2>&1); c=$?
    case $c in
    0) fixed_ok=$((fixed_ok + 1)) ;;
    2) fixed_refused=$((fixed_refused + 1)) ;;
    *) fixed_bad=$((fixed_bad + 1)); echo "REPAIRED COPY REJECTED (exit $c) $name: $(echo "$out" | head -3 | tr '\n' ' ' | cut -c1-300)" ;;
    esac
done
echo "refusals by reason:"
sort "$W/reasons" | uniq -c | sort -rn | sed 's/^/  /'
echo "corpus images: $total, refused (exit 2): $refused, agree: $agree, checker-only: $chk_only, e2fsck-only: $fsck_only, crashed: $crashed"
echo "repaired copies: $fixed (e2fsck -fy could not make $unfixable clean): accepted $fixed_ok, refused $fixed_refused, rejected $fixed_bad"
[ "$chk_only" = 0 ] && [ "$crashed" = 0 ] && [ "$fixed_bad" = 0 ]
