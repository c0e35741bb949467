#!/bin/bash
# A detached daemon's messages reach where admins look.  Without -f, stderr
# is gone after the mount; a rejected commit (-o fault_corrupt=links@2,
# on_violation=readonly) must still be told: in the kernel log (root) with
# the image, the mount point and the invariant, at the error level, cut
# short rather than flooding it; and in the -o log=FILE file, time-stamped,
# every line, up to the exit status the daemon says it exits with.  A
# read-only fallback at mount (an image marked with errors) reaches the
# terminal before the mount command returns, and the kernel log as a
# warning.  A normal user's daemon (no /dev/kmsg for it) still writes its
# log file.
. "$(dirname "$0")/lib.sh"
need_root
dmesg >/dev/null 2>&1 || skip "cannot read the kernel log (dmesg)"

base="$SCRATCH/base.img"
mkimg "$base" 1024 16M

# reject.py MNT: directories and files, each fsynced, until a call fails
# (the second commit is the corrupted one); prints the failing call.
cat >"$SCRATCH/reject.py" <<'EOF'
import os, sys
os.chdir(sys.argv[1])
try:
    for i in range(4):
        os.mkdir("d%d" % i)
        fd = os.open("d%d/f" % i, os.O_CREAT | os.O_WRONLY, 0o644)
        os.write(fd, b"x" * 100)
        os.fsync(fd)
        os.close(fd)
except OSError as e:
    print("rejected at %d: %s" % (i, e.strerror))
    sys.exit(0)
print("no call failed")
sys.exit(1)
EOF

# wait_gone PIDFILE PID: the daemon removes its pid file as its last act
# (its messages are forwarded before that); then it exits.
wait_gone() {
	local i
	for ((i = 0; i < 300 * TMUL; i++)); do
		[ -e "$1" ] || kill -0 "$2" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}

# detached_mount IMG MNT PIDFILE OPTS [user]: recon-fuse without -f (as the
# test user if asked) with pidfile=PIDFILE; sets DPID.
detached_mount() {
	local img=$1 mnt=$2 pidf=$3 opts=$4 who=${5:-}
	mkdir -p "$mnt"
	rm -f "$pidf"
	${who:+as_user} "$RECON_FUSE" -o "$opts,pidfile=$pidf" "$img" "$mnt" >"$SCRATCH/mount.out" 2>&1 ||
		{ fail "mount of $img exited $?: $(cat "$SCRATCH/mount.out")"; return 1; }
	MOUNTS+=("$mnt")
	DPID=$(cat "$pidf" 2>/dev/null)
	[ -n "$DPID" ] || { fail "no pid file after mounting $img"; return 1; }
	PIDS+=("$DPID")
	is_mounted "$mnt" || { fail "$img is not mounted after the command returned"; return 1; }
}

# ---- root: a rejection after detaching ----
img="$SCRATCH/rej.img" mnt="$SCRATCH/mnt" logf="$SCRATCH/daemon.log"
cp --sparse=always "$base" "$img"
if detached_mount "$img" "$mnt" "$SCRATCH/pid" "on_violation=readonly,fault_corrupt=links@2,log=$logf"; then
	[ -s "$SCRATCH/mount.out" ] && fail "a clean mount printed: $(cat "$SCRATCH/mount.out")"
	python3 "$SCRATCH/reject.py" "$mnt" >"$SCRATCH/reject.out" 2>&1 ||
		fail "the corrupted commit was not rejected: $(cat "$SCRATCH/reject.out")"
	fusermount3 -u "$mnt" || fail "fusermount3 -u after the rejection"
	wait_gone "$SCRATCH/pid" "$DPID" || fail "the daemon did not exit after the unmount"
	# the kernel log: this image's lines (its path is unique to this run)
	dmesg -x | grep -F "recon-fuse ($img on $mnt): " >"$SCRATCH/kmsg.txt"
	grep -q 'INV_LINKS_COUNT' "$SCRATCH/kmsg.txt" ||
		fail "the kernel log lacks the rejection's invariant: $(head -5 "$SCRATCH/kmsg.txt")"
	grep 'INV_LINKS_COUNT' "$SCRATCH/kmsg.txt" | grep -q ':err ' ||
		fail "the rejection is not at the error level: $(grep INV_ "$SCRATCH/kmsg.txt" | head -2)"
	grep -q 'transaction rejected by the checker' "$SCRATCH/kmsg.txt" ||
		fail "the kernel log does not say the transaction was rejected"
	grep -q 'exit status 3' "$SCRATCH/kmsg.txt" ||
		fail "the kernel log lacks the exit status line (the last message, at exit)"
	grep -q '\.\.\. [0-9]* more lines' "$SCRATCH/kmsg.txt" ||
		fail "a long report is not cut short in the kernel log"
	# the log file: every line, stamped, naming the image and the mount point
	if [ -s "$logf" ]; then
		grep -q "recon-fuse\[$DPID\] ($img on $mnt): INV_LINKS_COUNT" "$logf" ||
			fail "the log file lacks the invariant with image and mount point: $(head -3 "$logf")"
		grep -q 'exit status 3' "$logf" || fail "the log file lacks the exit status line"
		grep -vqE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]{12}[-+][0-9]{4} ' "$logf" &&
			fail "a log file line without a time stamp: $(grep -vE '^[0-9]{4}-' "$logf" | head -1)"
		[ "$(wc -l <"$logf")" -gt "$(wc -l <"$SCRATCH/kmsg.txt")" ] ||
			fail "the log file has no more lines than the kernel log (nothing was cut there?)"
		grep -qE 'AddressSanitizer|runtime error:' "$logf" && fail "a sanitizer report: $(grep -m1 -E 'Sanitizer|runtime error' "$logf")"
		log "kernel log: $(wc -l <"$SCRATCH/kmsg.txt") lines, log file: $(wc -l <"$logf") lines"
	else
		fail "the log file $logf is empty or missing"
	fi
	fsck_clean "$img" "after the rejection"
fi

# ---- root: a read-only fallback at mount, seen before the command returns ----
img="$SCRATCH/err.img"
cp --sparse=always "$base" "$img"
debugfs -w -R "ssv state 2" "$img" >/dev/null 2>&1 || die "debugfs ssv state"
if detached_mount "$img" "$mnt" "$SCRATCH/pid" "atime=relatime"; then
	grep -q 'marked with errors.*read-only' "$SCRATCH/mount.out" ||
		fail "the read-only fallback did not reach the terminal before the command returned: $(cat "$SCRATCH/mount.out")"
	fusermount3 -u "$mnt" || fail "fusermount3 -u of the read-only mount"
	wait_gone "$SCRATCH/pid" "$DPID" || fail "the read-only daemon did not exit"
	dmesg -x | grep -F "recon-fuse ($img on $mnt): " | grep 'marked with errors' | grep -q ':warn ' ||
		fail "the read-only fallback is not a warning in the kernel log: $(dmesg | grep -F "$img" | tail -3)"
fi

# ---- a normal user: no kernel log, the log file still works ----
ensure_test_user
if [ -u "$(command -v fusermount3)" ]; then
	open_dev_fuse_to_test_user
	dir="$SCRATCH/user"
	mkdir -p "$dir/mnt"
	img="$dir/user.img" logf="$dir/daemon.log"
	mkimg "$img" 1024 16M -E "root_owner=$TEST_UID:$TEST_GID"
	chown -R "$TEST_UID:$TEST_GID" "$dir"
	if detached_mount "$img" "$dir/mnt" "$dir/pid" \
		"on_violation=readonly,fault_corrupt=links@2,log=$logf" user; then
		as_user python3 "$SCRATCH/reject.py" "$dir/mnt" >"$SCRATCH/reject.out" 2>&1 ||
			fail "the user's corrupted commit was not rejected: $(cat "$SCRATCH/reject.out")"
		as_user fusermount3 -u "$dir/mnt" || fail "fusermount3 -u as the user"
		wait_gone "$dir/pid" "$DPID" || fail "the user's daemon did not exit"
		grep -q "($img on $dir/mnt): INV_LINKS_COUNT" "$logf" 2>/dev/null ||
			fail "the user's log file lacks the rejection: $(head -3 "$logf" 2>&1)"
		grep -q 'exit status 3' "$logf" 2>/dev/null || fail "the user's log file lacks the exit status"
		[ "$(stat -c %u "$logf")" = "$TEST_UID" ] || fail "the log file is not the user's"
		dmesg | grep -qF "($img on" && fail "a normal user's daemon wrote to the kernel log"
	fi
else
	log "fusermount3 is not setuid root: the normal user's case is skipped"
fi
finish
