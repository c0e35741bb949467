#!/bin/bash
# Over io_uring, a queue thread polls its ring after each reply (poll_us):
# it must not take the CPU from a caller that shares it.  A client held on
# CPU 0 at nice 19 (whose wake-up alone does not preempt a running thread of
# normal weight) makes 5,000 files with touch, once with poll_us=0 and once
# with the default; from /proc, the CPU time and voluntary context switches
# of the thread serving CPU 0's queue (uring-q0).  With polling, that thread
# must spend at most 4x the CPU per file it spends without (a thread that
# polled without yielding holds the CPU for the whole poll_us after every
# reply: about 15x), and must sleep at most a quarter as often (polling
# that never catches the next request would sleep once per request, as
# without).  Skipped (77) when the fuse module's enable_uring cannot be set.
. "$(dirname "$0")/lib.sh"
need_root
take_uring_param
command -v taskset >/dev/null || skip "no taskset"

FILES=5000
img="$SCRATCH/poll.img" mnt="$SCRATCH/mnt"

# queue_thread PID CPU: the task id of the daemon's thread for CPU's queue
queue_thread() {
	local t
	for t in /proc/"$1"/task/*; do
		[ "$(cat "$t/comm" 2>/dev/null)" = "uring-q$2" ] && { echo "${t##*/}"; return 0; }
	done
	return 1
}

# thread_use PID TID: "run-time-ns voluntary-switches" of one thread
thread_use() {
	local t=/proc/$1/task/$2
	echo "$(cut -d' ' -f1 "$t/schedstat") $(awk '/^voluntary_ctxt_switches/ { print $2 }' "$t/status")"
}

# creates OPTS: sets USE to "cpu-ns-per-file switches milliseconds" of the run
creates() {
	mkimg "$img" 4096 256M
	mount_recon "$img" "$mnt" "fuse_uring=on,$1" || die "mount with fuse_uring=on,$1"
	local tid before after t0 t1
	mkdir "$mnt/d"
	tid=$(queue_thread "$RECON_PID" 0) || die "no thread named uring-q0 in the daemon"
	read -r -a before <<<"$(thread_use "$RECON_PID" "$tid")"
	t0=$(date +%s%N)
	seq -f "$mnt/d/f%.0f" 1 "$FILES" | nice -n 19 taskset -c 0 xargs touch ||
		fail "touch of $FILES files ($1)"
	t1=$(date +%s%N)
	read -r -a after <<<"$(thread_use "$RECON_PID" "$tid")"
	umount_recon "$mnt"
	USE="$(((after[0] - before[0]) / FILES)) $((after[1] - before[1])) $(((t1 - t0) / 1000000))"
}

log "$FILES creates at nice 19 on CPU 0, poll_us=0"
creates poll_us=0
read -r base_ns base_sw base_ms <<<"$USE"
log "the same with polling (poll_us=50)"
creates poll_us=50
read -r poll_ns poll_sw poll_ms <<<"$USE"
log "uring-q0 per file: ${base_ns} ns, $base_sw switches in all, $base_ms ms without polling;" \
    "${poll_ns} ns, $poll_sw switches, $poll_ms ms with"
[ "$base_sw" -ge "$FILES" ] ||
	fail "without polling, uring-q0 slept $base_sw times for $FILES files: did the requests reach it?"
[ "$poll_ns" -le $((4 * base_ns)) ] ||
	fail "polling took the CPU from its caller: ${poll_ns} ns per file against ${base_ns} without"
[ "$poll_sw" -le $((base_sw / 4)) ] ||
	fail "polling did not catch the next request: $poll_sw sleeps against $base_sw without"
fsck_clean "$img" "after the creates"

restore_uring_param
finish
