#!/bin/bash
# The bench's FUSE floor (bench/fuse-null.c, built as fuse/fuse-null) serves
# through recon-fuse's own transport (fuse/transport.h): over /dev/fuse, and
# with -u over io_uring, the fuse module's enable_uring set to Y for the test
# (and restored after).  Four untars at once into one mount leave every file
# of the tree, at its size, in each of the four directories, over either
# transport (over the ring each CPU's queue thread serves at once); the
# daemon says it served requests over the ring and exits 0 at unmount.  And
# the floor asks for what recon-fuse asks for: one untar on recon-fuse -o
# fuse_uring=on and on fuse-null -u sends the same synchronous requests,
# opcode by opcode (libfuse's -d log; a difference means bench/fuse-null.c
# must ask for what recon-fuse now negotiates).  Skipped (77) when the
# parameter cannot be set (a kernel without FUSE over io_uring, or not root).
. "$(dirname "$0")/lib.sh"
need_root
FUSE_NULL=$(dirname "$RECON_FUSE")/fuse-null
[ -x "$FUSE_NULL" ] || die "fuse-null not built: $FUSE_NULL"
take_uring_param
param=$URING_PARAM

mnt=$SCRATCH/mnt
# the tree: 2,000 files of assorted sizes in 20 directories, and some
# symlinks (enough that four copies at once over the ring, without the
# floor's lock, broke its tree in 2 runs of 3)
python3 - "$SCRATCH/tree" <<'EOF'
import os, sys
for d in range(20):
    sub = os.path.join(sys.argv[1], "d%d" % d, "sub")
    os.makedirs(sub)
    for f in range(100):
        with open(os.path.join(sub, "f%d" % f), "wb") as out:
            out.write(b"x" * ((d * 100 + f) * 37 % 3000))
    os.symlink("sub/f%d" % d, os.path.join(sub, "..", "link"))
EOF
tar -cf "$SCRATCH/tree.tar" -C "$SCRATCH" tree
# listing DIR: every name under DIR with its type and, but for directories,
# its size (a directory's size is the file system's business)
listing() { (cd "$1" && find tree \( -type d -printf '%P d\n' \) -o -printf '%P %y %s\n' | sort); }
listing "$SCRATCH" >"$SCRATCH/want"

# start_daemon LOG CMD...: a daemon in the background until MNT is mounted;
# sets RECON_PID and RECON_LOG for umount_recon.
start_daemon() {
	local i
	RECON_LOG=$1
	shift
	mkdir -p "$mnt"
	"$@" >"$RECON_LOG" 2>&1 &
	RECON_PID=$!
	PIDS+=("$RECON_PID")
	MOUNTS+=("$mnt")
	for ((i = 0; i < 200 * TMUL; i++)); do
		is_mounted "$mnt" && return 0
		kill -0 "$RECON_PID" 2>/dev/null || break
		sleep 0.1
	done
	fail "$* did not mount: $(cat "$RECON_LOG")"
	return 1
}

# four_untars WHAT: the tree four times at once, each copy checked
four_untars() {
	local i pids=()
	for i in 1 2 3 4; do
		mkdir "$mnt/u$i" && tar -xf "$SCRATCH/tree.tar" -C "$mnt/u$i" & pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i" || fail "$1: an untar failed"; done
	for i in 1 2 3 4; do
		listing "$mnt/u$i" >"$SCRATCH/got"
		cmp -s "$SCRATCH/want" "$SCRATCH/got" ||
			fail "$1: copy $i differs from the tree: $(diff "$SCRATCH/want" "$SCRATCH/got" | head -5)"
	done
}

for ring in "" -u; do
	what="fuse-null ${ring:-(/dev/fuse)}"
	log "$what: four untars at once"
	rm -f "$SCRATCH/state"
	start_daemon "$SCRATCH/null$ring.log" "$FUSE_NULL" $ring "$SCRATCH/state" "$mnt" || continue
	four_untars "$what"
	umount_recon "$mnt"
	if [ -n "$ring" ]; then
		served=$(sed -n 's/.*FUSE over io_uring: \([0-9]*\) requests served.*/\1/p' "$RECON_LOG")
		[ -n "$served" ] && [ "$served" -ge 1000 ] ||
			fail "$what: requests served over io_uring: '$served' (expected >= 1000): $(cat "$RECON_LOG")"
	fi
done

# sync_requests LOG: synchronous requests by opcode, one "OPCODE COUNT" a line
sync_requests() {
	sed -n 's/^unique: [0-9]*, opcode: \([A-Z_0-9]*\) .*/\1/p' "$1" |
		grep -vxE 'INIT|FORGET|BATCH_FORGET|INTERRUPT|RELEASE|RELEASEDIR' | sort | uniq -c |
		awk '{ print $2, $1 }'
}

log "the same requests: recon-fuse and fuse-null over io_uring, one untar"
img=$SCRATCH/floor.img
mkimg "$img" 4096 64M
if start_daemon "$SCRATCH/recon-d.log" "$RECON_FUSE" -d -o fuse_uring=on "$img" "$mnt"; then
	tar -xf "$SCRATCH/tree.tar" -C "$mnt" && sync -f "$mnt" || fail "untar on recon-fuse"
	umount_recon "$mnt"
	fsck_clean "$img" "after the untar"
fi
rm -f "$SCRATCH/state"
if start_daemon "$SCRATCH/null-d.log" "$FUSE_NULL" -d -u "$SCRATCH/state" "$mnt"; then
	tar -xf "$SCRATCH/tree.tar" -C "$mnt" && sync -f "$mnt" || fail "untar on fuse-null"
	umount_recon "$mnt"
fi
sync_requests "$SCRATCH/recon-d.log" >"$SCRATCH/recon.req"
sync_requests "$SCRATCH/null-d.log" >"$SCRATCH/null.req"
[ -s "$SCRATCH/recon.req" ] || fail "no requests in recon-fuse's -d log"
cmp -s "$SCRATCH/recon.req" "$SCRATCH/null.req" ||
	fail "fuse-null is no longer asked what recon-fuse is (make bench/fuse-null.c ask for what" \
	     "recon-fuse negotiates): $(diff "$SCRATCH/recon.req" "$SCRATCH/null.req" | grep '^[<>]' | tr '\n' ' ')"
log "synchronous requests of one untar: $(tr '\n' ' ' <"$SCRATCH/recon.req")"
restore_uring_param
finish
