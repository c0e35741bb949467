#!/bin/bash
# dio_race (buffered reads racing asynchronous O_DIRECT writes of the same
# range) with requests served in parallel: threads=2 through /dev/fuse, with
# 10 and with 20 writes in flight (race_many); with DIO_RACE_URING=1
# (dio_race_uring.sh) the per-CPU queues of fuse_uring=on, when the fuse
# module's enable_uring can be set for the test.  A READ the kernel queued after a direct WRITE may be
# answered first there; the WRITE's reply must still wait until no page the
# READ filled with older data is left in the cache.  A read-write O_DIRECT fd
# and a write-only one, each DIO_RACE_SECONDS (default 5).
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/lib_explore.sh"
need_root
[ -x "$DIO_RACE" ] || die "dio_race not built: $DIO_RACE"
SECS=${DIO_RACE_SECONDS:-5}
race_both() {   # DIR
	"$DIO_RACE" -t "$SECS" "$1/rw" && "$DIO_RACE" -w -t "$SECS" "$1/wo"
}
# race_many DIR: 20 direct writes in flight, past the kernel's default of 12
# background requests: replies held for invalidations must leave readahead a
# background slot, or the two wait on each other for ever.  A run still going
# long after its time is hung: its FUSE connection is aborted (fusectl) so
# that the test can fail instead of waiting in D state.
race_many() {
	local conn pid i fusectl=/sys/fs/fuse/connections
	conn=$(mountpoint -d "$1" | cut -d: -f2)
	"$DIO_RACE" -t 3 -s $((20 << 16)) "$1/many" &
	pid=$!
	for ((i = 0; i < 600 * TMUL; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "dio_race -s 1280K: hung; aborting FUSE connection $conn"
		if mountpoint -q "$fusectl"; then
			echo 1 >"$fusectl/$conn/abort"
		elif mount -t fusectl fusectl "$fusectl"; then
			echo 1 >"$fusectl/$conn/abort"
			umount "$fusectl"
		fi
		wait "$pid"
		return 1
	fi
	wait "$pid"
}
img="$SCRATCH/dio.img"
if [ -z "${DIO_RACE_URING:-}" ]; then
	mkimg "$img" 4096 256M
	EXPLORE_RECON_OPTS=threads=2 recon_run "$img" "dio_race, threads=2" race_both "$SCRATCH/mnt"
	mkimg "$img" 4096 256M
	EXPLORE_RECON_OPTS=threads=2 recon_run "$img" "dio_race -s 1280K, threads=2" race_many "$SCRATCH/mnt"
	finish
fi

# The parameter is global: tests that set it take this lock and put back the
# value they found (as fuse_uring.sh).
param=/sys/module/fuse/parameters/enable_uring
if [ -e "$param" ]; then
	exec 8>/tmp/recon-fuse-enable-uring.lock
	if flock -w $((600 * TMUL)) 8; then
		saved=$(cat "$param")
		if echo Y >"$param" 2>/dev/null && [ "$(cat "$param")" = Y ]; then
			mkimg "$img" 4096 256M
			EXPLORE_RECON_OPTS=fuse_uring=on recon_run "$img" "dio_race, fuse_uring=on" \
				race_both "$SCRATCH/mnt"
		else
			echo "dio_race_parallel: cannot set $param: the io_uring queues not tried"
		fi
		echo "$saved" >"$param" 2>/dev/null
		flock -u 8
	fi
fi
finish
