#!/bin/bash
# The image fuzzer in CI: a fixed list of mutants (tests/fuzz-images/*.list,
# BASE/CLASS/SEED[/EDIT] as mutate.py names them) run through imgfuzz.py
# with the recon-fuse of this build (meant for the ASan+UBSan build: tests/run
# runs suite fuzz-images there).  Each mutant: e2fsck before, a read-only
# walk, a read-write workload, e2fsck after, a second walk (the inline_data
# base: the read-only walk, and a read-write mount that must be refused);
# it fails on a crash, hang, sanitizer report, undocumented exit status, an
# image written by a read-only or refused mount, an inline_data image
# served read-write, an image made worse, changed contents or a rejection
# on an image e2fsck passed.
# Usage: fuzz_images.sh [--shard K/M] LIST...   (lists relative to
# tests/fuzz-images; --shard: only the K-th of every M mutants listed)
. "$RECON_SRC/tests/integration/lib.sh"
need_root
have_kernel_ext3 || skip "the kernel has no ext3 driver (the base images are written by it)"
grep -qw ext4 /proc/filesystems || skip "the kernel has no ext4 driver (the ext4 base images are written by it)"
here="$RECON_SRC/tests/fuzz-images"
shard=""
if [ "${1:-}" = --shard ]; then
	shard=$2
	shift 2
fi
lists=()
for l in "$@"; do lists+=(--list "$here/$l"); done
if [ -n "$shard" ]; then
	k=${shard%/*} m=${shard#*/}
	[ "$k" -ge 1 ] && [ "$k" -le "$m" ] 2>/dev/null || die "--shard K/M: 1 <= K <= M"
	for l in "$@"; do sed 's/#.*//' "$here/$l"; done | awk 'NF' |
		awk -v k="$k" -v m="$m" '(NR - 1) % m == k - 1' >"$SCRATCH/shard.list"
	lists=(--list "$SCRATCH/shard.list")
	log "shard $shard: $(wc -l <"$SCRATCH/shard.list") mutants"
fi
is_asan || log "note: $RECON_FUSE is not a sanitizer build; memory errors may go unseen"
nice -n 5 python3 "$here/imgfuzz.py" --fuse "$RECON_FUSE" --tmp "$SCRATCH" --keep "$SCRATCH/keep" \
	"${lists[@]}" || fail "mutants with outcomes not allowed (logs in $SCRATCH/keep)"
finish
