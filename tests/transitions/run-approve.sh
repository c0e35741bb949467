#!/bin/bash
# Every kernel ext3 transition must be approved by recon-check (exit 0):
# zero false rejections.  Generates K transitions per block size (1 KiB and
# 4 KiB) with gen-transitions.sh, checks each pair, prints the
# violation lines of any rejection and appends a reproducible entry to the
# checker feedback file.  Exit 0 all approved, 1 any rejection, 77 no root.
# usage: run-approve.sh [K] [SEED] [WORKDIR]   (env RECON_CHECK, RECON_SRC)
set -uo pipefail
K=${1:-10} SEED=${2:-1} WORK=${3:-}
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root and loop devices"; exit 77; }
HERE=$(cd "$(dirname "$0")" && pwd)
RC=${RECON_CHECK:?set RECON_CHECK to the recon-check binary}
# RECON_FEEDBACK=FILE: also append each false rejection, with how to reproduce it, to FILE.
FEEDBACK=${RECON_FEEDBACK:-}
KEEP=1; [ -n "$WORK" ] || { WORK=$(mktemp -d /tmp/eval-approve.XXXXXX); KEEP=0; }
fail=0 n=0
for BS in 1024 4096; do
    D=$WORK/bs$BS
    "$HERE/gen-transitions.sh" "$D" "$BS" "$K" "$SEED" >/dev/null || { echo "FAIL: generator bs=$BS"; exit 1; }
    if ! out=$("$RC" --scan "$D/t000.img" 2>&1); then
        echo "FAIL: --scan rejects fresh kernel image bs=$BS: $out"; fail=1
    fi
    for t in $(seq 1 "$K"); do
        a=$D/$(printf 't%03d.img' $((t - 1))) b=$D/$(printf 't%03d.img' "$t")
        n=$((n + 1))
        out=$("$RC" "$a" "$b" 2>&1); rc=$?
        if [ $rc -ne 0 ]; then
            fail=1
            echo "FALSE REJECTION (exit $rc) bs=$BS seed=$SEED transition $t:"
            echo "$out" | sed 's/^/    /'
            [ -n "$FEEDBACK" ] && {
                echo "- [eval $(date -u +%FT%TZ)] false rejection (exit $rc) of a kernel transition:" \
                     "\`tests/transitions/gen-transitions.sh /tmp/x $BS $K $SEED\` then" \
                     "\`recon-check /tmp/x/$(basename "$a") /tmp/x/$(basename "$b")\` ->"
                echo "$out" | head -3 | sed 's/^/      /'
            } >> "$FEEDBACK"
        fi
    done
done
[ $KEEP = 1 ] || rm -rf "$WORK"
echo "kernel transitions checked: $n, false rejections: $([ $fail = 0 ] && echo 0 || echo some)"
exit $fail
