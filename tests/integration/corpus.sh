#!/bin/bash
# The corpus walk: every image of the e2fsprogs test corpus, on a copy, either
# mounts or is refused with a message (read-write first; where that is refused,
# read-only); where it mounts: find, read every file, list xattrs and links.
# Read-write, a file with data is written and fsynced, the daemon exits 0, and
# a read-write remount reads it back (the image still passes the mount's check:
# not served read-only) and removes it; a write refused for any reason but a
# full image is a failure.  Never a crash (the daemon killed by a signal, or a
# sanitizer report) and never a hang (timeouts).  An image e2fsck finds clean
# stays clean after our read-write walk.
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
tried=0 mounted_rw=0 mounted_ro=0 refused=0 written=0 full=0
# the file written on every read-write image: past the direct blocks of a
# 1 KiB-block file, so an indirect block too
data="$SCRATCH/walk.data"
head -c 40000 /dev/urandom >"$data"

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

# served_ro: the mount at $mnt is read-only.  From the kernel's mount table,
# not the daemon's "mounted ... read-only" line: that line follows the mount,
# and on a loaded machine the walk could begin before it is written.
served_ro() {
	awk -v m="$mnt" '$2 == m { ro = ($4 ~ /^ro(,|$)/) } END { exit !ro }' /proc/mounts
}

walk() {   # walk RW: the reads, and when RW=1 a file written (0, or 1 after a failure)
	local rw=$1
	wrote=0
	timeout -s KILL "$walk_limit" find "$mnt" >"$SCRATCH/find.out" 2>/dev/null
	[ $? -eq 137 ] && { fail "$name: find hung (> $walk_limit s)"; return 1; }
	timeout -s KILL "$walk_limit" find "$mnt" -type f -exec cat {} + >/dev/null 2>&1
	[ $? -eq 137 ] && { fail "$name: reading the files hung"; return 1; }
	timeout -s KILL "$walk_limit" find "$mnt" -type l -exec readlink {} + >/dev/null 2>&1
	[ $? -eq 137 ] && { fail "$name: readlink hung"; return 1; }
	timeout -s KILL "$walk_limit" find "$mnt" -exec getfattr -h -d -m - {} + >/dev/null 2>&1
	[ $? -eq 137 ] && { fail "$name: listing xattrs hung"; return 1; }
	timeout -s KILL "$walk_limit" stat -f "$mnt" >/dev/null 2>&1
	[ "$rw" = 1 ] || return 0
	timeout -s KILL "$walk_limit" dd if="$data" of="$mnt/.recon-walk" bs=16k conv=fsync status=none \
		2>"$SCRATCH/rw.err"
	case $? in
	0) wrote=1; written=$((written + 1)) ;;
	137) fail "$name: writing a file hung"; return 1 ;;
	*)
		if grep -q "No space left" "$SCRATCH/rw.err"; then
			rm -f "$mnt/.recon-walk"
			# no inode to spare: append to a file the image has instead
			append_existing && return 0
			full=$((full + 1))
			log "$name: full: the write got ENOSPC"
		else
			fail "$name: writing a file failed: $(head -c 200 "$SCRATCH/rw.err")"
			return 1
		fi
		;;
	esac
	return 0
}

# append_existing: on an image with no free inode, the data appended to its
# first regular file (appended=FILE, its size before in appended_size)
append_existing() {
	appended=$(find "$mnt" -xdev -type f -size -1M -print -quit 2>/dev/null)
	[ -n "$appended" ] || return 1
	appended_size=$(stat -c %s "$appended")
	timeout -s KILL "$walk_limit" dd if="$data" of="$appended" bs=16k oflag=append conv=notrunc,fsync \
		status=none 2>"$SCRATCH/rw.err" || return 1
	wrote=2; written=$((written + 1))
	log "$name: no free inode: appended to ${appended#"$mnt"/}"
}

# verify_written: remount read-write, read the file back, remove it (or
# cut the appended data off again)
verify_written() {
	if ! mount_recon "$img" "$mnt" "" 2>/dev/null; then
		fail "$name: refused after our read-write walk: $(head -3 "$RECON_LOG" | tr '\n' ' ')"
		return
	fi
	if served_ro || grep -q "read-only" "$RECON_LOG"; then
		fail "$name: served read-only after our read-write walk: $(head -3 "$RECON_LOG" | tr '\n' ' ')"
	elif [ "$wrote" = 2 ]; then
		if ! tail -c "$(stat -c %s "$data")" "$appended" | cmp -s "$data" -; then
			fail "$name: the data appended to ${appended#"$mnt"/} does not read back after a remount"
		elif ! truncate -s "$appended_size" "$appended" 2>"$SCRATCH/rm.err"; then
			fail "$name: cutting the appended data off failed: $(head -c 200 "$SCRATCH/rm.err")"
		fi
	elif ! cmp -s "$data" "$mnt/.recon-walk"; then
		fail "$name: the file written does not read back after a remount"
	elif ! rm "$mnt/.recon-walk" 2>"$SCRATCH/rm.err"; then
		fail "$name: removing the file written failed: $(head -c 200 "$SCRATCH/rm.err")"
	fi
	finish_mount rw
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
		fail "$name: daemon exited $RECON_STATUS after the walk ($rw): $(grep -v '^INV_' "$RECON_LOG" | head -2 | tr '\n' ' ')"
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
	clean_before=0
	# (e2fsck itself loops forever on a few corrupt images: bounded)
	timeout -s KILL 15 e2fsck -fn "$img" >/dev/null 2>&1 && clean_before=1
	if ! try_mount ""; then
		# refused read-write: it wrote nothing; then read-only
		gzip -dc "$dir/image.gz" | cmp -s "$img" - || fail "$name: a refused read-write mount changed the image"
		if try_mount ro; then
			mounted_ro=$((mounted_ro + 1))
			walk 0
			finish_mount ro
			gzip -dc "$dir/image.gz" | cmp -s "$img" - || fail "$name: a read-only mount changed the image"
		else
			refused=$((refused + 1))
			log "$name: refused: $(grep -m1 '[[:alpha:]]' "$RECON_LOG" | head -c 160)"
		fi
	elif served_ro; then
		# read-write refused, served read-only (said why): the read-only walk
		mounted_ro=$((mounted_ro + 1))
		log "$name: read-only: $(grep -m1 '[[:alpha:]]' "$RECON_LOG" | head -c 160)"
		walk 0
		finish_mount ro
		gzip -dc "$dir/image.gz" | cmp -s "$img" - || fail "$name: a mount served read-only changed the image"
	else
		mounted_rw=$((mounted_rw + 1))
		walk 1
		finish_mount rw
		[ "$wrote" != 0 ] && verify_written
		if [ "$clean_before" = 1 ]; then
			fsck_clean "$img" "$name (clean before our read-write walk)"
		fi
	fi
	rm -f "$img"
done
log "shard $shard: $tried images: $mounted_rw read-write ($written written, $full full), $mounted_ro read-only, $refused refused"
finish
