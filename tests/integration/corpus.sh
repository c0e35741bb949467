#!/bin/bash
# The corpus walk: every image of the e2fsprogs test corpus, on a copy, either
# mounts or is refused with a message (read-write first; where that is refused,
# read-only); where it mounts: find, read every file, list xattrs and links,
# and when read-write create and remove a file.  Never a crash (the daemon
# killed by a signal, or a sanitizer report) and never a hang (timeouts).  An
# image e2fsck finds clean stays clean after our read-write walk.
# Usage: corpus.sh [K/N]   (the K-th of N shards, so meson can run them in parallel)
. "$(dirname "$0")/lib.sh"
need_root
[ -d "$CORPUS" ] || skip "no corpus at $CORPUS"
shard=${1:-1/1}
k=${shard%/*} n=${shard#*/}

mnt="$SCRATCH/mnt"
img="$SCRATCH/image.img"
# a hang is no progress at all: generous, since f_many_subdirs (130,000 entries)
# takes 40 s to find and 50 s to read on an idle 2-core machine
walk_limit=$((240 * TMUL))
tried=0 mounted_rw=0 mounted_ro=0 refused=0

# crashed RC LOG: a signal or a sanitizer's report
crashed() {
	[ "$1" -ge 128 ] && [ "$1" -ne 124 ] && return 0
	grep -qE 'ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer' "$2"
}

# try_mount OPTS: 0 mounted; 1 refused (recorded if it was a crash or hang)
try_mount() {
	local opts=$1 rc
	if mount_recon "$img" "$mnt" "$opts" 2>/dev/null; then return 0; fi
	rc=$RECON_STATUS
	if [ "$rc" -eq 137 ]; then
		fail "$name: mount ($opts) hung (no mount, daemon alive after $((20 * TMUL)) s)"
	elif crashed "$rc" "$RECON_LOG"; then
		fail "$name: daemon crashed at mount ($opts), status $rc:"; tail -15 "$RECON_LOG"
	elif [ "$rc" -eq 0 ]; then
		fail "$name: daemon exited 0 without mounting ($opts)"
	elif ! grep -q '[[:alpha:]]' "$RECON_LOG"; then
		fail "$name: refused ($opts) without a message"
	fi
	return 1
}

walk() {   # walk RW: the reads, and a create+remove when RW=1
	local rw=$1
	timeout -s KILL "$walk_limit" find "$mnt" >"$SCRATCH/find.out" 2>/dev/null
	[ $? -eq 137 ] && { fail "$name: find hung (> $walk_limit s)"; return 1; }
	timeout -s KILL "$walk_limit" find "$mnt" -type f -exec cat {} + >/dev/null 2>&1
	[ $? -eq 137 ] && { fail "$name: reading the files hung"; return 1; }
	timeout -s KILL "$walk_limit" find "$mnt" -type l -exec readlink {} + >/dev/null 2>&1
	[ $? -eq 137 ] && { fail "$name: readlink hung"; return 1; }
	timeout -s KILL "$walk_limit" find "$mnt" -exec getfattr -h -d -m - {} + >/dev/null 2>&1
	[ $? -eq 137 ] && { fail "$name: listing xattrs hung"; return 1; }
	timeout -s KILL "$walk_limit" stat -f "$mnt" >/dev/null 2>&1
	if [ "$rw" = 1 ]; then
		timeout -s KILL "$walk_limit" sh -c 'echo walk >"$1/.recon-walk" && rm "$1/.recon-walk"' _ "$mnt" \
			>/dev/null 2>"$SCRATCH/rw.err"
		case $? in
		0) ;;
		137) fail "$name: create+remove hung"; return 1 ;;
		*) log "$name: create+remove refused: $(head -c 200 "$SCRATCH/rw.err")" ;;
		esac
	fi
	return 0
}

finish_mount() {   # unmount, wait; crash or hang fails
	local rw=$1
	if ! kill -0 "$RECON_PID" 2>/dev/null; then
		wait "$RECON_PID"; local rc=$?
		forget_pid "$RECON_PID"; RECON_PID=
		fail "$name: the daemon died during the walk (status $rc)"; tail -15 "$RECON_LOG"
		fusermount3 -uz "$mnt" 2>/dev/null
		return
	fi
	fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null
	local pid=$RECON_PID; RECON_PID=
	wait_daemon "$pid" $((60 * TMUL))
	if [ "$RECON_STATUS" -eq 124 ]; then
		fail "$name: daemon hung at unmount"
	elif crashed "$RECON_STATUS" "$RECON_LOG"; then
		fail "$name: daemon crashed at unmount, status $RECON_STATUS"; tail -15 "$RECON_LOG"
	elif [ "$RECON_STATUS" -ne 0 ]; then
		log "$name: daemon exited $RECON_STATUS after the walk ($rw)"
	fi
}

i=0
for dir in "$CORPUS"/*/; do
	name=$(basename "$dir")
	i=$((i + 1))
	[ $(((i - 1) % n + 1)) -eq "$k" ] || continue
	[ -f "$dir/image.gz" ] || continue
	tried=$((tried + 1))
	corpus_image "$name" "$img" || { fail "$name: cannot gunzip"; continue; }
	clean_before=0 needs_rec=0
	dumpe2fs -h "$img" 2>/dev/null | grep -q needs_recovery && needs_rec=1
	# (e2fsck itself loops forever on a few corrupt images: bounded)
	timeout -s KILL 15 e2fsck -fn "$img" >/dev/null 2>&1 && clean_before=1
	if try_mount ""; then
		mounted_rw=$((mounted_rw + 1))
		walk 1
		finish_mount rw
		if [ "$clean_before" = 1 ]; then
			fsck_clean "$img" "$name (clean before our read-write walk)"
		fi
	else
		corpus_image "$name" "$img"
		if try_mount ro; then
			mounted_ro=$((mounted_ro + 1))
			walk 0
			finish_mount ro
			# (a journal may be replayed even read-only, as the kernel does)
			if [ "$needs_rec" = 0 ] && ! gzip -dc "$dir/image.gz" | cmp -s "$img" -; then
				fail "$name: a read-only mount changed the image"
			fi
		else
			refused=$((refused + 1))
			log "$name: refused: $(grep -m1 '[[:alpha:]]' "$RECON_LOG" | head -c 160)"
		fi
	fi
	rm -f "$img"
done
log "shard $shard: $tried images: $mounted_rw read-write, $mounted_ro read-only, $refused refused"
finish
