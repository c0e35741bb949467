#!/bin/bash
# Reduced corruption campaign as a test: K kernel transitions per block size,
# one corruption per field class per transition (~100 edits by default); every
# edit after which `e2fsck -fn` exits non-zero must be rejected by recon-check,
# and recon-check must never answer "bad input" to a corrupted after-image.
# usage: run-corrupt-gate.sh [K] [SEED]   (env RECON_CHECK)
set -uo pipefail
K=${1:-2} SEED=${2:-3}
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root and loop devices"; exit 77; }
HERE=$(cd "$(dirname "$0")" && pwd)
: "${RECON_CHECK:?set RECON_CHECK to the recon-check binary}"
WORK=$(mktemp -d /tmp/eval-gate.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
pairs=()
for BS in 1024 4096; do
    "$HERE/gen-transitions.sh" "$WORK/bs$BS" "$BS" "$K" "$SEED" 400 >/dev/null || { echo "FAIL: generator"; exit 1; }
    for t in $(seq 1 "$K"); do
        pairs+=("$WORK/bs$BS/$(printf 't%03d.img' $((t - 1))):$WORK/bs$BS/$(printf 't%03d.img' "$t")")
    done
done
python3 "$HERE/corrupt.py" run --out "$WORK/gate.csv" --per-class 1 --seed "$SEED" --jobs 2 \
    --gate $(( 2 * K * 20 )) "${pairs[@]}"
