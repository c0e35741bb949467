#!/bin/bash
# The data guard: a block bitmap that says free for a block a file owns must
# not let recon-fuse overwrite that file's data.  The image gets one file
# ("victim") whose blocks debugfs then clears in the block bitmap (freeb);
# mounted read-write, a new file is written: the allocator hands it the
# victim's blocks, and the data path must refuse the write before it reaches
# the disk (the write fails with EIO, the file system goes read-only, the log
# names the block, its owner and the writing inode).  After unmount the
# victim's bytes on disk are unchanged and e2fsck -fn finds no new problem.
# Run at 1 KiB and 4 KiB blocks, with and without async_commit.  The mount
# itself notices such an image and mounts it read-only; -o rw_unchecked
# overrides that, which is what lets the write reach the guard (the guard is
# the defence for a bitmap that goes wrong after the mount's check too).
. "$(dirname "$0")/lib.sh"
fs_from_arg "$@"
need_root
command -v debugfs >/dev/null || skip "no debugfs"
mnt="$SCRATCH/mnt"

# problems IMG: e2fsck -fn's findings, without the lines that only say where
# it is or what it skipped (a rejected mount leaves needs_recovery set).
problems() {
	e2fsck -fn "$1" 2>&1 | grep -vE '^(e2fsck|Pass [0-9]|Warning: skipping journal recovery|'\
'.*: \*+ WARNING: Filesystem still has errors|.*: [0-9]+/[0-9]+ files|$)' |
		grep -vE '^(Fix|Clear|Relocate)\? no$' | sort -u
}

scenario() {
	local bs=$1 opts=$2 what="bs=$1 ${2:-defaults}"
	local img="$SCRATCH/guard-$bs.img"
	mkimg "$img" "$bs" 16M
	python3 -c 'import sys; from pylib import pattern; sys.stdout.buffer.write(pattern("victim", 9 * int(sys.argv[1])))' \
		"$bs" >"$SCRATCH/victim.data"
	debugfs -w -R "write $SCRATCH/victim.data victim" "$img" >/dev/null 2>&1 || die "debugfs write"
	local vino blocks b
	vino=$(debugfs -R "stat victim" "$img" 2>/dev/null | sed -n 's/^Inode: \([0-9]*\).*/\1/p')
	blocks=$(debugfs -R "blocks victim" "$img" 2>/dev/null)
	[ -n "$vino" ] && [ -n "$blocks" ] || die "$what: cannot read the victim's inode and blocks"
	: >"$SCRATCH/freeb.cmd"
	for b in $blocks; do echo "freeb $b" >>"$SCRATCH/freeb.cmd"; done
	debugfs -w -f "$SCRATCH/freeb.cmd" "$img" >/dev/null 2>&1 || die "debugfs freeb"
	problems "$img" >"$SCRATCH/before.txt"
	grep -q 'differences' "$SCRATCH/before.txt" ||
		fail "$what: e2fsck does not see the cleared bitmap bits"
	local sum_before
	sum_before=$(debugfs -R "cat victim" "$img" 2>/dev/null | sha256sum)

	local stats="$SCRATCH/stats-$bs.json"
	mount_recon "$img" "$mnt" "rw_unchecked,stats=$stats${opts:+,$opts}" ||
		{ fail "$what: mount"; return; }
	# a new file as large as the victim: its blocks are the first free ones
	python3 - "$mnt" "$bs" >"$SCRATCH/write.out" 2>&1 <<'EOF'
import errno, os, sys
from pylib import pattern
mnt, bs = sys.argv[1], int(sys.argv[2])
data = pattern("intruder", 9 * bs)
try:
    fd = os.open(os.path.join(mnt, "intruder"), os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, data)
    os.fsync(fd)
    os.close(fd)
    print("write: ok")
except OSError as e:
    print("write: " + errno.errorcode.get(e.errno, str(e.errno)))
try:
    os.mkdir(os.path.join(mnt, "after"))
    print("mkdir after: ok")
except OSError as e:
    print("mkdir after: " + errno.errorcode.get(e.errno, str(e.errno)))
with open(os.path.join(mnt, "victim"), "rb") as f:
    ok = f.read() == pattern("victim", 9 * bs)
print("victim through the mount: " + ("intact" if ok else "CHANGED"))
EOF
	grep -qx 'write: EIO' "$SCRATCH/write.out" ||
		fail "$what: the write into the victim's blocks did not fail with EIO: $(tr '\n' ' ' <"$SCRATCH/write.out")"
	grep -qx 'mkdir after: EROFS' "$SCRATCH/write.out" ||
		fail "$what: not read-only after the refusal: $(grep mkdir "$SCRATCH/write.out")"
	grep -qx 'victim through the mount: intact' "$SCRATCH/write.out" ||
		fail "$what: the victim reads back changed through the mount"
	# a refusal discards the open transaction: exit status 3, as after a rejection
	local pid=$RECON_PID
	fusermount3 -u "$mnt" 2>/dev/null || { sleep 1; fusermount3 -u "$mnt"; } || fusermount3 -uz "$mnt"
	RECON_PID=
	wait_daemon "$pid" $((60 * TMUL))
	[ "$RECON_STATUS" -eq 3 ] || fail "$what: the daemon exited $RECON_STATUS, not 3 (changes discarded)"
	grep -q "refused" "$RECON_LOG" || fail "$what: no refusal in the daemon's log"
	grep -qE "block [0-9]+ of inode $vino\b" "$RECON_LOG" ||
		fail "$what: the message does not name the victim (inode $vino) as the owner"
	grep -qE "data write of inode [0-9]+ to block [0-9]+" "$RECON_LOG" ||
		fail "$what: the message does not name the writing inode and the block"
	python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))["violations"]; sys.exit(0 if any(x["invariant"] == "INV_BLOCK_OWNED_ONCE" for x in v) else 1)' \
		"$stats" || fail "$what: the stats do not list the refusal as a violation"
	local sum_after
	sum_after=$(debugfs -R "cat victim" "$img" 2>/dev/null | sha256sum)
	[ "$sum_before" = "$sum_after" ] || fail "$what: the victim's data on disk was overwritten"
	problems "$img" >"$SCRATCH/after.txt"
	if ! diff "$SCRATCH/before.txt" "$SCRATCH/after.txt" >"$SCRATCH/fsck.diff"; then
		if grep -q '^>' "$SCRATCH/fsck.diff"; then
			fail "$what: e2fsck -fn finds more than before:"
			sed 's/^/    /' "$SCRATCH/fsck.diff" | head -20
		fi
	fi
	rm -f "$img"
}

scenario 1024 ""
scenario 4096 ""
scenario 1024 "async_commit=off"
finish
