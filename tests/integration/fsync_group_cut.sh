#!/bin/bash
# Power cuts under the fsync answered by the commit thread: mounted without
# deterministic (async_commit on, commit_interval_ms=0: only the fsyncs
# commit), four writer processes append + fsync / fdatasync, write + fsync +
# rename + fsyncdir, and unlink + fsyncdir, each logging a promise (to a file
# outside the mount, flushed per line) only after the call returned 0.  The
# commits are held in flight 20 ms of every 22 (RECON_COMMIT_GATE, as behind
# a slow disk's flush) and the writers pause up to 10 ms before each step, so
# that fsyncs keep arriving while a commit is in flight.  A power cut
# (-o fault_crash_after=N,fault_seed=S) at CUT_POINTS write counts spread over
# a clean run's device writes; after the writers a filler fsyncs until the
# cut has happened, so every point cuts.  Then our mount replays the journal,
# every promise is checked (an appended file holds at least the promised
# prefix, a renamed name exists with the promised version or a later one, an
# unlinked name is gone), the unmount exits 0 and e2fsck -fn is clean.
# Whatever write the cut hits, a correct daemon passes.
# Argument: ext3 (default: 1 KiB blocks) or ext4 (mkfs.ext4's defaults,
# 4 KiB blocks).  Environment: CUT_POINTS (default 24), CUT_BLOCKSIZE.
. "$(dirname "$0")/lib.sh"
fs_from_arg "${1:-}"
need_root
points=${CUT_POINTS:-24}
[ "$points" -ge 1 ] || die "CUT_POINTS must be >= 1"
if [ "$FS_TYPE" = ext3 ]; then bs=1024; else bs=4096; fi
bs=${CUT_BLOCKSIZE:-$bs}

base="$SCRATCH/base.img" img="$SCRATCH/cut.img" mnt="$SCRATCH/mnt" gate="$SCRATCH/gate"
mkimg "$base" "$bs" 64M
opts="fuse_uring=off,commit_interval_ms=0"

# writer.py MNT W ROUNDS LOG: writer W's rounds in MNT/wW; a promise per
# line of LOG, each after the call that makes it returned 0.  Never stops at
# an error: after the cut every call fails and nothing more is promised.
cat >"$SCRATCH/writer.py" <<'EOF'
import json, os, random, sys, time
from pylib import pattern
mnt, w, rounds, logpath = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
d = "w%d" % w
log = open(logpath, "a")
rng = random.Random(w)
def stagger():
    # up to 10 ms: writers change the tree while another's commit is in flight
    time.sleep(rng.random() * 0.01)
def promise(*rec):
    log.write(json.dumps(rec) + "\n")
    log.flush()
def path(name):
    return os.path.join(mnt, name)
def fsyncdir():
    fd = os.open(path(d), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
def write_whole(name, data, sync):
    fd = os.open(path(name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        sync(fd)
    finally:
        os.close(fd)
def append_size(v): return 1000 + 517 * (v % 7)
def file_size(v): return 2000 + 1234 * (v % 5)
try:
    os.mkdir(path(d))
    fsyncdir()
except OSError:
    sys.exit(0)
afd = None
kept = []     # fresh names renamed into place, oldest first
for v in range(rounds):
    # append a chunk, fsync or fdatasync: the prefix up to chunk v is durable
    stagger()
    try:
        if afd is None:
            afd = os.open(path(d + "/a"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(afd, pattern("%s/a.%d" % (d, v), append_size(v)))
        (os.fsync if v % 2 == 0 else os.fdatasync)(afd)
        promise("append", d + "/a", v)
    except OSError:
        pass
    # write a version whole, fsync, rename into place, fsync the directory
    name = d + ("/cur" if v % 2 == 0 else "/k%d" % v)
    stagger()
    try:
        write_whole(d + "/t", pattern("%s.%d" % (name, v), file_size(v)), os.fsync)
        os.rename(path(d + "/t"), path(name))
        if v % 2:
            kept.append(name)
        fsyncdir()
        promise("file", name, v)
    except OSError:
        pass
    # unlink the oldest fresh name, fsync the directory: it is gone
    if v % 3 == 2 and kept:
        victim = kept.pop(0)
        promise("unlinking", victim)
        stagger()
        try:
            os.unlink(path(victim))
            fsyncdir()
            promise("gone", victim)
        except OSError:
            pass
if afd is not None:
    try:
        os.close(afd)
    except OSError:
        pass
EOF

# filler.py MNT DAEMON_LOG: write + fsync until the daemon logs the power cut
# (or a call fails: the cut came), so that the cut always happens.
cat >"$SCRATCH/filler.py" <<'EOF'
import os, sys
mnt, dlog = sys.argv[1], sys.argv[2]
for i in range(5000):
    if "power cut" in open(dlog, errors="replace").read():
        break
    try:
        fd = os.open(os.path.join(mnt, "fill%d" % (i % 50)), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, b"f" * 3000)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        break
EOF

# gate.py GATE RUNNING: while RUNNING exists, GATE exists 20 ms of every
# 22 (RECON_COMMIT_GATE: a commit that starts meanwhile is held in flight,
# as behind a slow disk's flush), so that fsyncs arrive during commits.
cat >"$SCRATCH/gate.py" <<'EOF'
import os, sys, time
gate, running = sys.argv[1], sys.argv[2]
while os.path.exists(running):
    open(gate, "w").close()
    time.sleep(0.02)
    os.unlink(gate)
    time.sleep(0.002)
EOF

# verify.py ROOT LOG...: every promise holds.
cat >"$SCRATCH/verify.py" <<'EOF'
import json, os, sys
from pylib import Checker, pattern
root, what, logs = sys.argv[1], sys.argv[2], sys.argv[3:]
def append_size(v): return 1000 + 517 * (v % 7)
def file_size(v): return 2000 + 1234 * (v % 5)
c = Checker("fsync_group_cut " + what)
appended, files, unlinking, gone = {}, {}, set(), set()
npromises = 0
for lp in logs:
    for line in open(lp):
        rec = json.loads(line)
        npromises += 1
        kind, name = rec[0], rec[1]
        if kind == "append":
            appended[name] = max(appended.get(name, -1), rec[2])
        elif kind == "file":
            files[name] = max(files.get(name, -1), rec[2])
        elif kind == "unlinking":
            unlinking.add(name)
        elif kind == "gone":
            gone.add(name)
def read(name):
    try:
        return open(os.path.join(root, name), "rb").read()
    except OSError as e:
        c.ok(False, "%s: promised, now %s" % (name, e.strerror))
        return None
for name, v in sorted(appended.items()):
    d = name.rsplit("/", 1)[0]
    want = b"".join(pattern("%s/a.%d" % (d, j), append_size(j)) for j in range(v + 1))
    got = read(name)
    if got is not None:
        c.ok(got[:len(want)] == want,
             "%s: %d bytes, not the %d fsynced (chunk %d)" % (name, len(got), len(want), v))
for name, v in sorted(files.items()):
    if name in unlinking:
        continue
    got = read(name)
    if got is None:
        continue
    later = [j for j in range(v, v + 200, 2 if name.endswith("/cur") else 200)
             if got == pattern("%s.%d" % (name, j), file_size(j))]
    c.ok(later != [], "%s: not version %d or a later one (%d bytes)" % (name, v, len(got)))
for name in sorted(gone):
    c.ok(not os.path.lexists(os.path.join(root, name)), "%s: unlinked and fsynced, still there" % name)
print("    %s: %d promises checked" % (what, npromises))
c.done()
EOF

# one_run N SEED STATS: a copy of base, the writers and the filler with a cut
# at write N (0: none); the writers' logs in $SCRATCH/log.W.  Sets CUT_DAEMON_LOG.
one_run() {
	local n=$1 seed=$2 stats=$3 o="$opts" w pids=() pid gpid
	[ "$n" -gt 0 ] && o="$o,fault_crash_after=$n,fault_seed=$seed"
	[ -n "$stats" ] && o="$o,stats=$stats"
	cp --sparse=always "$base" "$img"
	rm -f "$SCRATCH"/log.*
	RECON_COMMIT_GATE=$gate mount_recon "$img" "$mnt" "$o" || return 1
	pid=$RECON_PID CUT_DAEMON_LOG=$RECON_LOG
	touch "$SCRATCH/gate.running"
	python3 "$SCRATCH/gate.py" "$gate" "$SCRATCH/gate.running" &
	gpid=$!
	for w in 1 2 3 4; do
		: >"$SCRATCH/log.$w"
		timeout -s KILL $((120 * TMUL)) python3 "$SCRATCH/writer.py" "$mnt" "$w" 12 "$SCRATCH/log.$w" &
		pids+=($!)
	done
	for w in 0 1 2 3; do
		wait "${pids[$w]}" || fail "cut $n: writer $((w + 1)) ended with status $?"
	done
	[ "$n" -gt 0 ] && timeout -s KILL $((120 * TMUL)) python3 "$SCRATCH/filler.py" "$mnt" "$RECON_LOG"
	rm -f "$SCRATCH/gate.running"
	wait "$gpid"
	rm -f "$gate"
	if [ "$n" -eq 0 ]; then
		umount_recon "$mnt"
		return
	fi
	# after the cut the daemon's status is not judged, only that it ends
	unmount_after_cut "$mnt" "$pid"
	[ "$RECON_STATUS" -ne 124 ] || fail "cut $n: the daemon hung"
	[ "$RECON_STATUS" -lt 128 ] || fail "cut $n: the daemon died, status $RECON_STATUS"
	! grep -qE 'AddressSanitizer|runtime error:' "$RECON_LOG" || fail "cut $n: sanitizer report"
}

# The clean run: its device writes W, and every promise holds without a cut.
one_run 0 0 "$SCRATCH/clean.json" || die "mount for the clean run"
fsck_clean "$img" "the clean run"
W=$(stat_of "$SCRATCH/clean.json" device_writes) || die "no device_writes in the stats"
mount_recon "$img" "$mnt" "$opts" || die "mount after the clean run"
python3 "$SCRATCH/verify.py" "$mnt" "clean run" "$SCRATCH"/log.* || fail "the clean run's promises"
umount_recon "$mnt"
log "$FS_TYPE, $bs-byte blocks: the clean run made $W device writes; $points cuts"

cuts=0
for ((p = 1; p <= points; p++)); do
	# spread over the writers' part of the run (the unmount's writes are
	# its last few), seeded by the point's index
	n=$((p * W * 9 / (10 * (points + 1)))) what="cut at write $n (seed $p)"
	[ "$n" -ge 1 ] || n=1
	if ! one_run "$n" "$p" ""; then
		log "$what: the mount itself was cut (refused)"
		continue
	fi
	grep -q 'power cut' "$CUT_DAEMON_LOG" && cuts=$((cuts + 1)) || fail "$what: the cut did not happen"
	if mount_recon "$img" "$mnt" "$opts"; then
		python3 "$SCRATCH/verify.py" "$mnt" "$what" "$SCRATCH"/log.* || fail "$what: promises broken"
		umount_recon "$mnt"
		fsck_clean "$img" "$what"
	else
		fail "$what: our mount refused the image"
	fi
done
log "$cuts of $points runs cut the power"
rm -f "$SCRATCH"/*.img
finish
