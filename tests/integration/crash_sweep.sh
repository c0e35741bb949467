#!/bin/bash
# Crash consistency: a workload of creates, writes, renames, deletes
# and fsyncs under -o deterministic, once clean (its stats give device_writes
# W), then with a power cut at CRASH_POINTS evenly spread write requests N in
# 1..W, each with CRASH_SEEDS seeds (-o fault_crash_after=N,fault_seed=S).
# After each cut, two copies of the image: one recovered by the Linux kernel
# (loop mount, read, umount: journal replay and orphans), one by our own
# mount; e2fsck -fn must exit 0 on both, and every file whose fsync returned
# success (and every rename a later fsyncdir made durable) must read back
# intact on both.  The workload goes on after the cut: files written before a
# commit the cut fails are fsynced after it, and a 0 from those fsyncs (a
# promise for changes that were discarded) shows as a lost file.  Prints "points tried N, consistent N"; the bar is all.
# The file system: ext3, or with the argument ext4 (or CRASH_FS=ext4)
# mkfs.ext4's defaults (extents, 64bit, metadata_csum, a jbd2 journal with
# 64-bit tags and checksum v3), recovered by the kernel's ext4 driver; the
# checker approves every commit either way.
# Environment: CRASH_POINTS (default 16; ext4 15), CRASH_SEEDS (default 2;
# ext4 1), CRASH_BLOCKSIZE (default 1024; ext4 "1024 4096": a list sweeps each),
# CRASH_OPTS (more -o options for the
# workload's mounts: CRASH_OPTS=journal=off shows what the sweep catches when
# writes go in place).  bench/crash-sweep runs the full sweep.
. "$(dirname "$0")/lib.sh"
fs=${1:-${CRASH_FS:-ext3}}
TEST_NAME=crash_sweep${1:+_$1}
need_root
case $fs in
ext3) have_kernel_ext3 || skip "the kernel has no ext3 driver" ;;
ext4) need_kernel_ext4 ;;
*) die "file system $fs: ext3 or ext4" ;;
esac
# CI's bounds: ext3 16 points x 2 seeds at 1 KiB; ext4 15 x 1 at 1 and 4 KiB
# (bench/crash-sweep runs hundreds)
if [ "$fs" = ext3 ]; then
	points=${CRASH_POINTS:-16} seeds=${CRASH_SEEDS:-2} sizes=${CRASH_BLOCKSIZE:-1024}
else
	points=${CRASH_POINTS:-15} seeds=${CRASH_SEEDS:-1} sizes=${CRASH_BLOCKSIZE:-"1024 4096"}
fi
[ "$points" -ge 1 ] && [ "$seeds" -ge 1 ] || die "CRASH_POINTS and CRASH_SEEDS must be >= 1"

# kmount_fs IMG MNT: the kernel's driver for $fs on a loop device.
kmount_fs() {
	if [ "$fs" = ext3 ]; then kmount "$1" "$2"; return; fi
	mkdir -p "$2"
	mount -t ext4 -o loop "$1" "$2" && MOUNTS+=("$2")
}
mnt="$SCRATCH/mnt"
kmnt="$SCRATCH/kmnt"
mkdir -p "$mnt" "$kmnt"

# The workload; argv: mount point, record file.  It never stops at an error
# (after the cut every write fails) and records, one JSON line each, a name
# that must survive with its content: a file after a successful fsync, or the
# target of a rename after the source's fsync and a successful fsyncdir.  No
# recorded name is touched again.
cat >"$SCRATCH/workload.py" <<'EOF'
import json, os, sys
from pylib import pattern, sha
mnt, recpath = sys.argv[1], sys.argv[2]
rec = open(recpath, "w")
def durable(name, data):
    rec.write(json.dumps([name, sha(data), len(data)]) + "\n")
    rec.flush()
def attempt(fn, *a):
    try:
        return fn(*a)
    except OSError:
        return None
def write_file(name, data, sync):
    """create+write(+fsync); True only if every call succeeded."""
    try:
        fd = os.open(os.path.join(mnt, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError:
        return False
    ok = True
    try:
        off = 0
        while off < len(data):
            off += os.write(fd, data[off:off + 65536])
        if sync:
            os.fsync(fd)
    except OSError:
        ok = False
    try:
        os.close(fd)
    except OSError:
        ok = False
    return ok
def fsyncdir(d):
    try:
        fd = os.open(os.path.join(mnt, d), os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        os.fsync(fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)

for d in range(4):
    attempt(os.mkdir, os.path.join(mnt, "d%d" % d))
scratch = []   # names that may be renamed over or deleted
late = []      # written and left open: fsynced after the next commit (a cut may fail it)
fsyncs = {"ok": 0, "failed": 0}
def sync_late():
    """fsync (or fdatasync) what was written an iteration ago; 0 is a promise."""
    for name, fd, data, datasync in late:
        try:
            (os.fdatasync if datasync else os.fsync)(fd)
            fsyncs["ok"] += 1
            durable(name, data)
        except OSError:
            fsyncs["failed"] += 1
        attempt(os.close, fd)
    late.clear()
for i in range(32):
    d = "d%d" % (i % 4)
    # sizes cross the direct / indirect / double-indirect thresholds of 1 KiB blocks
    size = [0, 700, 5000, 12 * 1024 + 1, 40000, 300 * 1024][i % 6] + i
    data = pattern("keep%d" % i, size)
    name = "%s/keep%d" % (d, i)
    if write_file(name, data, True):
        durable(name, data)
    # the files written before this commit: if it failed (the cut), their
    # changes were discarded with it and their fsync must not return 0
    sync_late()
    lname, ldata = "%s/late%d" % (d, i), pattern("late%d" % i, 1500 + 4099 * (i % 5))
    try:
        fd = os.open(os.path.join(mnt, lname), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError:
        fd = None
    if fd is not None:
        try:
            os.write(fd, ldata)
            late.append((lname, fd, ldata, i % 2 == 1))
        except OSError:
            attempt(os.close, fd)
    # unsynced files: renamed over each other and deleted
    tmp = "%s/tmp%d" % (d, i)
    write_file(tmp, pattern("tmp%d" % i, 3000 + 97 * i), False)
    scratch.append(tmp)
    if i % 3 == 2:
        attempt(os.rename, os.path.join(mnt, scratch[-1]), os.path.join(mnt, scratch[-2]))
        scratch.pop()
    if i % 4 == 3 and len(scratch) > 2:
        attempt(os.unlink, os.path.join(mnt, scratch.pop(0)))
    # write, fsync, rename into place, fsync the directory: the new name is durable
    if i % 5 == 4:
        data = pattern("ren%d" % i, 2000 + 311 * i)
        src, dst = "%s/new%d" % (d, i), "d%d/ren%d" % ((i + 1) % 4, i)
        if write_file(src, data, True):
            try:
                os.rename(os.path.join(mnt, src), os.path.join(mnt, dst))
                moved = True
            except OSError:
                moved = False
            if moved and fsyncdir(os.path.dirname(dst)) and fsyncdir(d):
                durable(dst, data)
    # a subtree made and removed
    if i % 8 == 7:
        sub = os.path.join(mnt, d, "sub%d" % i)
        attempt(os.mkdir, sub)
        write_file(os.path.relpath(os.path.join(sub, "x"), mnt), b"x" * 5000, False)
        attempt(os.unlink, os.path.join(sub, "x"))
        attempt(os.rmdir, sub)
sync_late()
print("fsyncs of files written before a commit: %(ok)d returned 0, %(failed)d failed" % fsyncs)
# an open file unlinked at the end: an orphan if the cut comes now
try:
    fd = os.open(os.path.join(mnt, "d0/orphan"), os.O_RDWR | os.O_CREAT, 0o644)
    os.write(fd, pattern("orphan", 20000))
    os.unlink(os.path.join(mnt, "d0/orphan"))
    os.fsync(fd)
    os.close(fd)
except OSError:
    pass
EOF

# verify.py ROOT RECORD: every recorded name reads back intact.
cat >"$SCRATCH/verify.py" <<'EOF'
import json, sys
from pylib import file_sha
root, recpath = sys.argv[1], sys.argv[2]
bad = 0
for line in open(recpath):
    try:
        name, digest, size = json.loads(line)
    except ValueError:
        continue     # a record torn by the workload's end: not acknowledged
    try:
        got = file_sha(root + "/" + name)
    except OSError as e:
        print("    %s: fsynced, now %s" % (name, e.strerror)); bad += 1; continue
    if got != digest:
        print("    %s: fsynced content (%d bytes) does not read back" % (name, size)); bad += 1
sys.exit(1 if bad else 0)
EOF

# run_workload IMG OPTS RECORD: mount, workload, unmount; 0 if the daemon ended
# in time without a crash (its exit status after a power cut may be non-zero).
run_workload() {
	local img=$1 opts=$2 recf=$3 pid rc
	if ! mount_recon "$img" "$mnt" "$opts" 2>"$SCRATCH/mount.err"; then
		# a cut during the mount itself may refuse it: that is a crash point too
		rc=$RECON_STATUS
		if [ "$rc" -ge 128 ] || grep -qE 'AddressSanitizer|runtime error:' "$RECON_LOG"; then
			cat "$SCRATCH/mount.err"; return 1
		fi
		LAST_STATUS=$rc
		return 0
	fi
	pid=$RECON_PID
	timeout -s KILL $((120 * TMUL)) python3 "$SCRATCH/workload.py" "$mnt" "$recf" \
		>"$SCRATCH/workload.out" 2>&1
	[ $? -eq 137 ] && { echo "workload hung ($opts)"; return 1; }
	unmount_after_cut "$mnt" "$pid" || echo "cannot unmount ($opts)"
	rc=$RECON_STATUS
	if [ "$rc" -eq 124 ]; then echo "daemon hung at unmount ($opts)"; return 1; fi
	if [ "$rc" -ge 128 ] || grep -qE 'AddressSanitizer|runtime error:' "$RECON_LOG"; then
		echo "daemon crashed, status $rc ($opts):"; tail -15 "$RECON_LOG"; return 1
	fi
	LAST_STATUS=$rc
	return 0
}

# sweep_one BS: the clean run and the cuts on a fresh image of BS-byte blocks.
sweep_one() {
	local bs=$1 base="$SCRATCH/base.img" clean W ndur n p s ok what img rec kimg pts=$points
	# the smallest journal mke2fs makes (1024 blocks)
	if [ "$fs" = ext3 ]; then
		mkimg "$base" "$bs" 32M -J size=$((bs / 1024))
	else
		rm -f "$base"
		mke2fs -F -q -t ext4 -b "$bs" -J size=$((bs / 1024)) "$base" 32M >"$SCRATCH/mke2fs.out" 2>&1 ||
			{ cat "$SCRATCH/mke2fs.out"; die "mke2fs -t ext4 $base"; }
	fi
	# The clean run: W, and the reference for what the workload makes durable.
	clean="$SCRATCH/clean.img"
	cp --sparse=always "$base" "$clean"
	xopts=${CRASH_OPTS:+,$CRASH_OPTS}
	run_workload "$clean" "deterministic,stats=$SCRATCH/clean.json$xopts" "$SCRATCH/clean.rec" ||
		die "the clean run failed ($bs)"
	[ "$LAST_STATUS" -eq 0 ] || fail "the clean run's daemon exited $LAST_STATUS"
	fsck_clean "$clean" "the clean run"
	W=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["device_writes"])' \
		"$SCRATCH/clean.json") || die "no device_writes in the clean run's stats"
	[ "$W" -ge 2 ] || die "device_writes = $W in the clean run"
	ndur=$(wc -l <"$SCRATCH/clean.rec")
	[ "$ndur" -ge 30 ] || fail "the clean run made only $ndur names durable"
	kmount_fs "$clean" "$kmnt" || die "the kernel cannot mount the clean run's image"
	python3 "$SCRATCH/verify.py" "$kmnt" "$SCRATCH/clean.rec" || fail "clean run: fsynced data lost"
	kumount "$kmnt"
	# more points than write requests: every request once (N = 1 .. W)
	[ "$pts" -gt "$W" ] && pts=$W
	log "$fs, $bs-byte blocks: device_writes $W, $ndur durable names; $pts points x $seeds seeds"
	rm -f "$clean"

	for ((p = 0; p < pts; p++)); do
		if [ "$pts" -eq 1 ]; then n=$W; else n=$((1 + p * (W - 1) / (pts - 1))); fi
		for ((s = 1; s <= seeds; s++)); do
			tried=$((tried + 1))
			ok=1 what="bs $bs N=$n seed=$s"
			img="$SCRATCH/cut.img" rec="$SCRATCH/cut.rec"
			cp --sparse=always "$base" "$img"
			: >"$rec"
			if ! run_workload "$img" "deterministic,fault_crash_after=$n,fault_seed=$s$xopts" "$rec"; then
				fail "$what: the run did not end cleanly"; continue
			fi
			grep -q 'power cut' "$RECON_LOG" && cuts=$((cuts + 1))
			kimg="$SCRATCH/kernel.img"
			cp --sparse=always "$img" "$kimg"
			cp --sparse=always "$img" "$SCRATCH/cut-as-left.img"
			# the kernel's recovery
			if kmount_fs "$kimg" "$kmnt"; then
				python3 "$SCRATCH/verify.py" "$kmnt" "$rec" || { fail "$what: kernel recovery lost fsynced data"; ok=0; }
				kumount "$kmnt" || { fail "$what: kernel umount"; ok=0; }
				fsck_clean "$kimg" "$what after kernel recovery" || ok=0
			else
				fail "$what: the kernel cannot mount the crashed image"; ok=0
			fi
			# ours
			if mount_recon "$img" "$mnt" ""; then
				python3 "$SCRATCH/verify.py" "$mnt" "$rec" || { fail "$what: our recovery lost fsynced data"; ok=0; }
				umount_recon "$mnt" || ok=0
				fsck_clean "$img" "$what after our recovery" || ok=0
			else
				fail "$what: recon-fuse cannot mount the crashed image"; ok=0
			fi
			[ "$ok" -eq 1 ] && consistent=$((consistent + 1))
			# a failed point keeps its record, our recovery's log and the image
			# as the cut left it (compressed: cleanup removes *.img)
			[ "$ok" -eq 1 ] || { cp "$rec" "$SCRATCH/failed-$bs-N$n-s$s.rec"; cp "$RECON_LOG" "$SCRATCH/failed-$bs-N$n-s$s.log"
				gzip -c "$SCRATCH/cut-as-left.img" >"$SCRATCH/failed-$bs-N$n-s$s.img.gz"; }
		done
	done
}

tried=0 consistent=0 cuts=0
for bs in $sizes; do
	sweep_one "$bs"
done
log "$cuts of $tried runs logged the power cut"
echo "points tried $tried, consistent $consistent"
rm -f "$SCRATCH"/*.img
finish
