#!/bin/bash
# One writer per image, as the kernel's "already mounted": a second
# read-write mount of an image file, a read-only one beside a writer, and any
# mount of an image a writable loop device serves are refused (exit 1, a
# message naming the holder) before anything is written; read-only mounts
# share; after an unmount the next mount waits for the daemon to finish.
# The mount point as the kernel judges it: a relative one survives the
# daemon's chdir (pid file and kill leave no dead mount), a dead FUSE mount
# (kill -9) is explained, a regular file is refused.
. "$(dirname "$0")/lib.sh"
fs_from_arg "$@"
need_root

img="$SCRATCH/d.img" mp1="$SCRATCH/mp1" mp2="$SCRATCH/mp2" kmnt="$SCRATCH/kmnt"
mkdir -p "$mp1" "$mp2"
mkimg "$img" 4096 64M
lazy=commit_interval_ms=600000,async_commit=off

# try_mount OPTS MNT [DEV]: recon-fuse detaching (a refusal exits at once);
# TRY_RC its status, TRY_OUT its messages.  A mount it made is undone.
TRY_N=0
try_mount() {
	local opts=$1 mnt=$2 dev=${3:-$img} pidf pid
	TRY_N=$((TRY_N + 1))
	pidf="$SCRATCH/try-$TRY_N.pid" TRY_OUT="$SCRATCH/try-$TRY_N.out" TRY_RC=0
	timeout -s KILL $((30 * TMUL)) "$RECON_FUSE" -o "pidfile=$pidf${opts:+,$opts}" "$dev" "$mnt" \
		>"$TRY_OUT" 2>&1 || TRY_RC=$?
	if [ "$TRY_RC" -eq 0 ] && is_mounted "$mnt"; then
		pid=$(cat "$pidf")
		PIDS+=("$pid")
		fusermount3 -u "$mnt"
		for ((i = 0; i < 300 * TMUL; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	fi
}

# refused WHAT OPTS MNT DEV WORD...: exit 1, nothing mounted, every WORD in the message
refused() {
	local what=$1 opts=$2 mnt=$3 dev=$4 w; shift 4
	local before
	before=$(grep -c " $mnt " /proc/self/mountinfo)
	try_mount "$opts" "$mnt" "$dev"
	[ "$TRY_RC" -eq 1 ] || fail "$what: exit status $TRY_RC, want 1 (a refusal): $(cat "$TRY_OUT")"
	[ "$(grep -c " $mnt " /proc/self/mountinfo)" -eq "$before" ] || fail "$what: a mount was made on $mnt"
	for w; do
		grep -qF -- "$w" "$TRY_OUT" || fail "$what: the message does not say '$w': $(cat "$TRY_OUT")"
	done
}

# 1. read-write twice: the second is refused, the first goes on
mount_recon "$img" "$mp1" || die "first mount"
first=$RECON_PID
printf 'first' >"$mp1/f" && sync "$mp1/f" || fail "write on the first mount"
refused "rw + rw" "" "$mp2" "$img" "already served read-write" "pid $first" "$mp1"
refused "rw + ro" ro "$mp2" "$img" "already served read-write" "pid $first"
printf ' and more' >>"$mp1/f" || fail "the first mount after the refusals"
umount_recon "$mp1"
fsck_clean "$img" "after the refused second mounts"
[ "$(debugfs -R 'cat /f' "$img" 2>/dev/null)" = "first and more" ] || fail "the first mount's data"

# 2. read-only mounts share; a writer is refused beside them, and told of -o ro
mount_recon "$img" "$mp1" ro || fail "ro mount"
ro1=$RECON_PID
mount_recon "$img" "$mp2" ro || fail "a second ro mount beside a ro one"
ro2=$RECON_PID
mkdir -p "$SCRATCH/mp3"
refused "ro + rw" "" "$SCRATCH/mp3" "$img" "already served read-only" "-o ro"
RECON_PID=$ro2; umount_recon "$mp2"
RECON_PID=$ro1; umount_recon "$mp1"

# 3. a refused mount writes nothing: the image needs recovery (a killed
# daemon), a ro mount replays it in memory, a rw one would replay it on disk
mount_recon "$img" "$mp1" "$lazy" || die "mount for the kill"
printf 'in the journal' >"$mp1/j" && sync "$mp1/j" || fail "write before the kill"
kill_recon
fusermount3 -u "$mp1" || fail "fusermount3 -u after kill -9"
dumpe2fs -h "$img" 2>/dev/null | grep -q needs_recovery || fail "the killed mount left no journal to replay"
sum=$(md5sum <"$img")
mount_recon "$img" "$mp1" ro || fail "ro mount of the image needing recovery"
refused "rw beside ro, journal to replay" "" "$mp2" "$img" "already served read-only"
umount_recon "$mp1"
[ "$(md5sum <"$img")" = "$sum" ] || fail "a refused read-write mount wrote the image"

# 4. after the first unmounts, the next mount works; unmounted but still
# writing (stopped here), the holder is waited for, not refused
mount_recon "$img" "$mp1" || die "mount after recovery"
[ "$(cat "$mp1/j")" = "in the journal" ] || fail "the replayed file"
umount_recon "$mp1"
mount_recon "$img" "$mp2" || fail "a mount after the first's unmount"
umount_recon "$mp2"
mount_recon "$img" "$mp1" || die "mount to stop"
first=$RECON_PID
kill -STOP "$first"
fusermount3 -u "$mp1" || fail "fusermount3 -u of a stopped daemon's mount"
"$RECON_FUSE" -f "$img" "$mp2" >"$SCRATCH/waiter.log" 2>&1 &
waiter=$!
PIDS+=("$waiter"); MOUNTS+=("$mp2")
sleep $((2 * TMUL))
is_mounted "$mp2" && fail "a mount was made while the unmounted daemon still held the image"
kill -0 "$waiter" 2>/dev/null || fail "the next mount did not wait for the unmounted daemon: $(cat "$SCRATCH/waiter.log")"
grep -q "waiting for recon-fuse (pid $first)" "$SCRATCH/waiter.log" ||
	fail "the waiting mount does not say what it waits for: $(cat "$SCRATCH/waiter.log")"
kill -CONT "$first"
RECON_PID=$first; umount_recon "$mp1"
for ((i = 0; i < 200 * TMUL; i++)); do is_mounted "$mp2" && break; sleep 0.1; done
is_mounted "$mp2" || fail "the waiting mount did not mount once the holder exited: $(cat "$SCRATCH/waiter.log")"
RECON_PID=$waiter RECON_LOG="$SCRATCH/waiter.log"; umount_recon "$mp2"
fsck_clean "$img" "after the waited-for mount"

# 5. a loop device on the image: refused, naming it; read-only beside a
# read-only loop device only
if dev=$(loop_attach "$img"); then
	refused "rw beside a loop device" "" "$mp1" "$img" "$dev" "losetup -d"
	refused "ro beside a writable loop device" ro "$mp1" "$img" "$dev" "losetup -r"
	losetup -d "$dev"
	if ! have_kernel_fs; then
		log "no kernel $FS_TYPE: the kernel's mount case not run"
	elif kmount "$img" "$kmnt"; then
		kdev=$(awk -v d="$kmnt" '$2 == d { print $1 }' /proc/mounts)
		refused "rw beside the kernel's mount" "" "$mp1" "$img" "$kdev" "$kmnt"
		kumount "$kmnt"
		fsck_clean "$img" "the kernel's mount after the refusal"
	else
		fail "kernel mount of the image"
	fi
	if dev=$(losetup --find --show --read-only "$img"); then
		LOOPS+=("$dev")
		mount_recon "$img" "$mp1" ro || fail "ro beside a read-only loop device"
		umount_recon "$mp1"
		refused "rw beside a read-only loop device" "" "$mp1" "$img" "$dev"
		losetup -d "$dev"
	fi
	# the loop device given as the device, while the file itself is served
	mount_recon "$img" "$mp1" || fail "mount for the loop device case"
	if dev=$(loop_attach "$img"); then
		refused "the loop device of a served image" "" "$mp2" "$dev" "already served read-write" "$img"
		losetup -d "$dev"
	fi
	umount_recon "$mp1"
else
	log "no loop device: loop cases not run"
fi

# 6. a relative mount point and pid file: the daemon leaves its working
# directory, then unmounts and removes its pid file at kill
(cd "$SCRATCH" && "$RECON_FUSE" -o pidfile=rel.pid d.img mp1) >"$SCRATCH/rel.log" 2>&1 ||
	fail "relative paths: exit $?: $(cat "$SCRATCH/rel.log")"
if is_mounted "$mp1"; then
	MOUNTS+=("$mp1")
	pid=$(cat "$SCRATCH/rel.pid")
	PIDS+=("$pid")
	grep -q " $SCRATCH/d.img " /proc/self/mountinfo ||
		fail "the mount's source is not the image's absolute path: $(grep " $mp1 " /proc/self/mountinfo)"
	kill "$pid"
	for ((i = 0; i < 300 * TMUL; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$pid" 2>/dev/null && fail "the daemon did not exit at SIGTERM"
	is_mounted "$mp1" && fail "SIGTERM left a mount on the relative mount point: $(stat "$mp1" 2>&1)"
	[ -e "$SCRATCH/rel.pid" ] && fail "the relative pid file is left after the daemon's exit"
	fusermount3 -uz "$mp1" 2>/dev/null
else
	fail "relative paths: not mounted"
fi
fsck_clean "$img" "after SIGTERM"

# 7. after kill -9 the mount point is a dead mount: said, with what to run
mount_recon "$img" "$mp1" || die "mount for kill -9"
kill_recon
sum=$(md5sum <"$img")
refused "the dead mount's mount point" "" "$mp1" "$img" "fusermount3 -u $mp1" "not connected"
[ "$(grep -c " $mp1 " /proc/self/mountinfo)" -eq 1 ] || fail "mounts stacked on the dead mount"
[ "$(md5sum <"$img")" = "$sum" ] || fail "the refusal on a dead mount point wrote the image"
fusermount3 -u "$mp1" || fail "fusermount3 -u of the dead mount"
mount_recon "$img" "$mp1" || fail "mount after the dead mount's unmount"
umount_recon "$mp1"

# 8. a regular file is no mount point
touch "$SCRATCH/file"
refused "a regular file as mount point" "" "$SCRATCH/file" "$img" "not a directory"
fsck_clean "$img" "at the end"
finish
