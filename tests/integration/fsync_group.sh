#!/bin/bash
# fsync waits for its commit without holding the file system: with a commit
# held in flight (RECON_COMMIT_GATE, a test hook of io: each commit waits
# while the gate file exists), one client's fsync stays unanswered while
# other clients' lookups, reads, creates and readdirs are answered; it
# returns 0 once the gate opens.  Four clients that fsync while a commit is
# held share the next commit: fewer commits (stats "commits") than the
# same four fsyncs one after another.  A daemon told to stop (SIGTERM)
# while an fsync waits answers it after its last commit, exits 0, and the
# file reads back.  Four clients appending and fsyncing 50 times each, then
# kill -9 of the daemon: everything they fsynced reads back after the
# journal's replay, and e2fsck -fn is clean.
# Argument: devfuse (default) or uring (FUSE over io_uring; skipped, 77,
# when the kernel cannot offer it).
. "$(dirname "$0")/lib.sh"
transport=${1:-devfuse}
TEST_NAME=fsync_group${1:+_$1}
need_root
case $transport in
devfuse) topt="fuse_uring=off" ;;
uring) take_uring_param; topt="fuse_uring=on" ;;
*) die "transport $transport: devfuse or uring" ;;
esac

img="$SCRATCH/base.img" mnt="$SCRATCH/mnt" gate="$SCRATCH/gate"
mkimg "$img" 4096 256M
opts="$topt,commit_interval_ms=0"

# fsyncer.py PATH N TAG: N times, append 4 KiB of pattern(TAG.i) and fsync.
cat >"$SCRATCH/fsyncer.py" <<'EOF'
import os, sys
from pylib import pattern
path, n, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
for i in range(n):
    os.write(fd, pattern("%s.%d" % (tag, i), 4096))
    os.fsync(fd)
os.close(fd)
EOF

# in_fsync PID: the process waits in the kernel's FUSE fsync.
in_fsync() { grep -q fsync "/proc/$1/stack" 2>/dev/null; }

# wait_for WHAT CMD...: up to 20 s for CMD to succeed.
wait_for() {
	local what=$1 i; shift
	for ((i = 0; i < 200 * TMUL; i++)); do
		"$@" && return 0
		sleep 0.1
	done
	fail "$what: not within $((20 * TMUL)) s"
	return 1
}

# A first mount leaves names the kernel has never looked up in the next.
mount_recon "$img" "$mnt" "$opts" || die "mount"
mkdir "$mnt/d" && echo hello >"$mnt/B" || fail "set-up"
umount_recon "$mnt"

# 1. other clients are served while an fsync waits for its commit
export RECON_COMMIT_GATE=$gate
mount_recon "$img" "$mnt" "$opts" || die "mount with the gate"
touch "$gate"
python3 "$SCRATCH/fsyncer.py" "$mnt/A" 1 A &
waiter=$!
if wait_for "the fsync's commit reaches the gate" test -e "$gate.held"; then
	check "lookup while an fsync waits" timeout -s KILL 10 stat "$mnt/B"
	check "read while an fsync waits" timeout -s KILL 10 grep -q hello "$mnt/B"
	check "create while an fsync waits" timeout -s KILL 10 touch "$mnt/d/new"
	check "readdir while an fsync waits" timeout -s KILL 10 ls "$mnt/d"
	kill -0 "$waiter" 2>/dev/null ||
		fail "fsync returned while its commit was held (0 before durable?)"
fi
rm -f "$gate"
wait "$waiter" || fail "fsync after the gate opened: status $?"
umount_recon "$mnt"

# group_run STATS MODE: four clients each append 4 KiB and fsync once;
# MODE together (while a commit is held) or apart (one after another).
group_run() {
	local stats=$1 mode=$2 i pids=()
	mount_recon "$img" "$mnt" "$opts,stats=$stats" || { fail "mount for $mode"; return; }
	if [ "$mode" = together ]; then
		touch "$gate"
		for i in 1 2 3 4; do
			python3 "$SCRATCH/fsyncer.py" "$mnt/g$mode$i" 1 "$mode$i" &
			pids+=($!)
		done
		wait_for "a commit held" test -e "$gate.held"
		for i in 0 1 2 3; do
			wait_for "client $i in fsync" in_fsync "${pids[$i]}"
		done
		rm -f "$gate"
		for i in 0 1 2 3; do
			wait "${pids[$i]}" || fail "fsync of client $i: status $?"
		done
	else
		for i in 1 2 3 4; do
			python3 "$SCRATCH/fsyncer.py" "$mnt/g$mode$i" 1 "$mode$i" ||
				fail "fsync of client $i"
		done
	fi
	umount_recon "$mnt"
}

# 2. fsyncs that arrive during a commit share the next one
group_run "$SCRATCH/together.json" together
group_run "$SCRATCH/apart.json" apart
together=$(stat_of "$SCRATCH/together.json" commits)
apart=$(stat_of "$SCRATCH/apart.json" commits)
log "commits: four fsyncs together $together, one after another $apart"
[ "$((together + 2))" -le "$apart" ] ||
	fail "four fsyncs during a commit took $together commits, one after another $apart"
# 3. a daemon told to stop answers the fsync that waits: after its last
# commit, which is then durable
mount_recon "$img" "$mnt" "$opts" || die "mount for the stop"
touch "$gate"
python3 "$SCRATCH/fsyncer.py" "$mnt/S" 1 S &
waiter=$!
if wait_for "the fsync's commit reaches the gate" test -e "$gate.held"; then
	kill -TERM "$RECON_PID"
	sleep 0.5   # the daemon's loop ends; the fsync still waits for its commit
	kill -0 "$waiter" 2>/dev/null ||
		fail "fsync returned while its commit was held, at the stop"
fi
rm -f "$gate"
wait "$waiter" || fail "fsync waiting at the stop: status $?"
wait_daemon "$RECON_PID" $((60 * TMUL)) || fail "daemon told to stop: status $RECON_STATUS"
RECON_PID=
fusermount3 -uz "$mnt" 2>/dev/null
mount_recon "$img" "$mnt" "$opts" || die "mount after the stop"
python3 -c 'import sys
from pylib import pattern
sys.exit(open(sys.argv[1], "rb").read() != pattern("S.0", 4096))' "$mnt/S" ||
	fail "the file fsynced at the stop does not read back"
umount_recon "$mnt"
unset RECON_COMMIT_GATE

# 4. what was fsynced survives kill -9 of the daemon
mount_recon "$img" "$mnt" "$opts" || die "mount for the kill"
pids=()
for i in 1 2 3 4; do
	python3 "$SCRATCH/fsyncer.py" "$mnt/k$i" 50 "k$i" &
	pids+=($!)
done
for i in 0 1 2 3; do
	wait "${pids[$i]}" || fail "client $i appending and fsyncing: status $?"
done
kill -9 "$RECON_PID"
wait "$RECON_PID" 2>/dev/null
forget_pid "$RECON_PID"
RECON_PID=
fusermount3 -uz "$mnt" 2>/dev/null
mount_recon "$img" "$mnt" "$opts" || die "mount after the kill"
python3 - "$mnt" <<'EOF' || fail "fsynced data after kill -9"
import sys
from pylib import Checker, pattern, sha
c = Checker("fsync_group-verify")
for i in range(1, 5):
    want = b"".join(pattern("k%d.%d" % (i, j), 4096) for j in range(50))
    got = open("%s/k%d" % (sys.argv[1], i), "rb").read()
    c.eq((len(got), sha(got)), (len(want), sha(want)), "k%d reads back" % i)
c.done()
EOF
umount_recon "$mnt"
fsck_clean "$img"
finish
