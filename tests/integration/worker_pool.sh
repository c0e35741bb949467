#!/bin/bash
# threads=N serves with a pool of N workers that lives as long as the mount:
# during a workload whose asynchronous RELEASEs keep every worker busy now
# and then, the daemon may not start and end threads (libfuse's loop, left
# to its defaults, started one whenever all were busy and ended the spare
# ones as they finished: hundreds per second, each a thread made and torn
# down).  The daemon's thread ids are sampled while files are made, written
# and closed by two writers; at most N more than before the workload may
# appear.
. "$(dirname "$0")/lib.sh"
need_root

for n in 2 3; do
	img="$SCRATCH/pool-$n.img" mnt="$SCRATCH/mnt"
	mkimg "$img" 4096 64M
	mount_recon "$img" "$mnt" "threads=$n" || die "mount (threads=$n)"
	ls "/proc/$RECON_PID/task" > "$SCRATCH/tids"
	before=$(wc -l < "$SCRATCH/tids")
	writers=()
	for w in a b; do
		(mkdir "$mnt/$w" && for ((i = 0; i < 1500; i++)); do echo "$i" > "$mnt/$w/f$i"; done) &
		writers+=($!)
	done
	while kill -0 "${writers[@]}" 2>/dev/null; do
		ls "/proc/$RECON_PID/task" >> "$SCRATCH/tids" 2>/dev/null
	done
	wait "${writers[@]}" || fail "the writers failed (threads=$n)"
	seen=$(sort -u "$SCRATCH/tids" | wc -l)
	check "threads=$n: $seen daemon threads seen, at most $before + $n" \
		test "$seen" -le $((before + n))
	[ "$(cat "$mnt/b/f1499")" = 1499 ] || fail "threads=$n: a file reads back wrong"
	umount_recon "$mnt"
done
finish
