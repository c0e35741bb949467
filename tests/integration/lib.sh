# tests/integration/lib.sh - shared by the integration tests (sourced, never run).
#
# Every test: makes images in its own scratch directory, mounts them with the
# real daemon (recon-fuse -f in the background), runs its scenario, unmounts
# with fusermount3 -u, waits for the daemon (its exit means everything is on
# disk; its status must be 0) and runs e2fsck -fn, which must exit 0.
# Failures are collected (check/fail) so one run reports all of them; the test
# exits 1 if any, 77 when it cannot run here (not root, no /dev/fuse).
#
# Environment (set by tests/integration/meson.build): RECON_FUSE, RECON_CHECK,
# RECON_SRC, RECON_BUILD.  RECON_KEEP=1 keeps the scratch directory.

set -u
: "${RECON_FUSE:?RECON_FUSE not set (run through meson test)}"
: "${RECON_SRC:?RECON_SRC not set (run through meson test)}"

TEST_NAME=$(basename "$0" .sh)
CORPUS=${RECON_CORPUS:-$RECON_SRC/../shared/corpus/e2fsprogs-tests}
export PYTHONPATH="$RECON_SRC/tests/integration${PYTHONPATH:+:$PYTHONPATH}"
export LC_ALL=C
# A dedicated unprivileged user for the permission, ENOSPC and user-mount tests.
TEST_USER=recon-tester

FAILURES=0
RECON_PID=
MOUNTS=()          # mount points to clean up
PIDS=()            # daemons to clean up
LOOPS=()           # loop devices to detach
MOUNT_SEQ=0

log()  { printf '[%s] %s\n' "$TEST_NAME" "$*"; }
fail() { printf 'FAIL [%s]: %s\n' "$TEST_NAME" "$*"; FAILURES=$((FAILURES + 1)); }
die()  { printf 'FAIL [%s]: %s\n' "$TEST_NAME" "$*"; FAILURES=$((FAILURES + 1)); exit 1; }
skip() { printf 'SKIP [%s]: %s\n' "$TEST_NAME" "$*"; exit 77; }

# check DESCRIPTION CMD...: run CMD, record a failure if it exits non-zero.
check() {
	local what=$1; shift
	"$@" || fail "$what (exit $?)"
}

# The ASan+UBSan build is several times slower: timeouts scale, timing bars do not apply.
is_asan() { ldd "$RECON_FUSE" 2>/dev/null | grep -q 'libasan'; }
if is_asan; then TMUL=4; else TMUL=1; fi

# open_dev_fuse_to_test_user: /dev/fuse is mode 0666 on Debian (udev); a
# container may leave it 0600.  Then it is opened to others for the test's
# duration and its mode put back at exit (under a lock, so two runs on one
# machine do not undo each other).  Skips when it cannot be done.
open_dev_fuse_to_test_user() {
	exec 8>/tmp/recon-test-devfuse.lock
	flock 8
	as_user test -r /dev/fuse -a -w /dev/fuse && return 0
	fuse_mode=$(stat -c %a /dev/fuse)
	chmod o+rw /dev/fuse || skip "cannot make /dev/fuse usable by $TEST_USER"
	trap 'cleanup; chmod "$fuse_mode" /dev/fuse' EXIT
	as_user test -r /dev/fuse -a -w /dev/fuse || die "/dev/fuse is still not usable by $TEST_USER"
}

need_root() {
	[ "$(id -u)" -eq 0 ] || skip "needs root (tests/run runs itself through sudo when not root)"
	[ -c /dev/fuse ] || skip "no /dev/fuse"
	command -v fusermount3 >/dev/null || skip "no fusermount3"
	command -v e2fsck >/dev/null || skip "no e2fsck"
	[ -x "$RECON_FUSE" ] || die "recon-fuse not built: $RECON_FUSE"
}

SCRATCH=$(mktemp -d "/tmp/recon-test-$TEST_NAME.XXXXXX")
chmod 755 "$SCRATCH"

# is_mounted DIR: from mountinfo, so a hung daemon cannot hang the test (stat would).
is_mounted() {
	local dir
	dir=$(realpath -m "$1")
	awk -v d="$dir" '$5 == d { found = 1 } END { exit !found }' /proc/self/mountinfo
}

# mount_recon IMG MNT [OPTS]: start recon-fuse -f in the background, wait for
# the mount.  Sets RECON_PID and RECON_LOG.  Returns non-zero (and says why) if
# the daemon exits or does not mount within the timeout.
mount_recon() {
	local img=$1 mnt=$2 opts=${3:-} i
	MOUNT_SEQ=$((MOUNT_SEQ + 1))
	RECON_LOG="$SCRATCH/daemon-$MOUNT_SEQ.log"
	mkdir -p "$mnt"
	if [ -n "$opts" ]; then
		"$RECON_FUSE" -f -o "$opts" "$img" "$mnt" >"$RECON_LOG" 2>&1 &
	else
		"$RECON_FUSE" -f "$img" "$mnt" >"$RECON_LOG" 2>&1 &
	fi
	RECON_PID=$!
	PIDS+=("$RECON_PID")
	MOUNTS+=("$mnt")
	for ((i = 0; i < 200 * TMUL; i++)); do
		is_mounted "$mnt" && return 0
		if ! kill -0 "$RECON_PID" 2>/dev/null; then
			local rc=0
			wait "$RECON_PID" || rc=$?
			forget_pid "$RECON_PID"
			RECON_STATUS=$rc
			RECON_PID=
			echo "recon-fuse exited with $rc before mounting $img (opts: $opts):" >&2
			sed 's/^/    /' "$RECON_LOG" >&2
			return 1
		fi
		sleep 0.1
	done
	echo "recon-fuse did not mount $img within $((20 * TMUL)) s" >&2
	sed 's/^/    /' "$RECON_LOG" >&2
	kill -9 "$RECON_PID" 2>/dev/null
	wait "$RECON_PID" 2>/dev/null
	forget_pid "$RECON_PID"
	fusermount3 -uz "$mnt" 2>/dev/null
	RECON_PID=
	RECON_STATUS=137
	return 1
}

# forget_pid PID: it has been waited for; cleanup must not signal a reused pid.
forget_pid() {
	local p keep=()
	for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	PIDS=("${keep[@]}")
}

# kill_recon: kill -9 the daemon of the last mount_recon (a crash) and reap it;
# its mount stays, dead, until the caller drops it.
kill_recon() {
	kill -9 "$RECON_PID"
	wait "$RECON_PID" 2>/dev/null
	forget_pid "$RECON_PID"
	RECON_PID=
}

# unmount_after_cut MNT PID: unmount a mount whose daemon may have lost its
# disk (a power cut): the plain unmount tried for 10 s, then a lazy one
# (status 1: it was needed); then wait_daemon PID (RECON_STATUS).
unmount_after_cut() {
	local i lazy=0
	for ((i = 0; i < 50; i++)); do
		fusermount3 -u "$1" 2>/dev/null && break
		is_mounted "$1" || break
		sleep 0.2
	done
	is_mounted "$1" && { fusermount3 -uz "$1"; lazy=1; }
	RECON_PID=
	wait_daemon "$2" $((60 * TMUL))
	return $lazy
}

# wait_daemon PID SECONDS: wait for our child to exit; prints nothing, sets
# RECON_STATUS (124 on timeout, after killing it).
wait_daemon() {
	local pid=$1 limit=$2 i
	for ((i = 0; i < limit * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill -9 "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		forget_pid "$pid"
		RECON_STATUS=124
		return 1
	fi
	RECON_STATUS=0
	wait "$pid" || RECON_STATUS=$?
	forget_pid "$pid"
	[ "$RECON_STATUS" -eq 0 ]
}

# umount_recon MNT [STATUS]: fusermount3 -u, then wait for the daemon
# (RECON_PID), whose exit status must be STATUS (default 0; 3 when a rejected
# commit discarded work).  Returns non-zero after recording the failure.
umount_recon() {
	local mnt=$1 want=${2:-0} i pid=$RECON_PID
	for ((i = 0; i < 50; i++)); do
		fusermount3 -u "$mnt" 2>"$SCRATCH/umount.err" && break
		is_mounted "$mnt" || break
		sleep 0.2     # EBUSY: a process of ours may still be closing a file
	done
	if is_mounted "$mnt"; then
		fail "fusermount3 -u $mnt failed: $(cat "$SCRATCH/umount.err")"
		fusermount3 -uz "$mnt" 2>/dev/null
	fi
	[ -n "$pid" ] || return 0
	RECON_PID=
	wait_daemon "$pid" $((60 * TMUL))
	if [ "$RECON_STATUS" -ne "$want" ]; then
		if [ "$RECON_STATUS" -eq 124 ]; then
			fail "recon-fuse did not exit within $((60 * TMUL)) s of the unmount (killed)"
		else
			fail "recon-fuse exited with status $RECON_STATUS at unmount, want $want"
		fi
		sed 's/^/    /' "$RECON_LOG" | tail -30
		return 1
	fi
	return 0
}

# fsck_clean IMG [WHAT]: e2fsck -fn must exit 0.
fsck_clean() {
	local img=$1 what=${2:-$1} out="$SCRATCH/fsck.out" rc=0
	timeout -s KILL 600 e2fsck -fn "$img" >"$out" 2>&1 || rc=$?
	[ "$rc" -eq 137 ] && echo "e2fsck -fn did not finish in 600 s" >>"$out"
	if [ "$rc" -ne 0 ]; then
		fail "e2fsck -fn exited $rc on $what"
		sed 's/^/    /' "$out" | head -40
		return 1
	fi
	return 0
}

# fs_from_arg [ARG]: the file system a script exercises, from its argument:
# ext3 (none) or ext4 (mkfs.ext4's defaults).  Sets FS_TYPE, which mkimg and
# kmount follow, and TEST_NAME (NAME_ext4 for the variant).
FS_TYPE=ext3
fs_from_arg() {
	FS_TYPE=${1:-ext3}
	case $FS_TYPE in
	ext3|ext4) ;;
	*) die "file system $FS_TYPE: ext3 or ext4" ;;
	esac
	TEST_NAME=$(basename "$0" .sh)${1:+_$1}
}

# mkimg IMG BLOCKSIZE SIZE [mke2fs options...]: a fresh $FS_TYPE image.
mkimg() {
	local img=$1 bs=$2 size=$3; shift 3
	rm -f "$img"
	truncate -s "$size" "$img" || die "truncate $img"
	mke2fs -F -q -t "$FS_TYPE" -b "$bs" "$@" "$img" >"$SCRATCH/mke2fs.out" 2>&1 \
		|| { cat "$SCRATCH/mke2fs.out"; die "mke2fs -t $FS_TYPE $img"; }
}

# free_blocks IMG, first_orphan IMG: from the superblock (dumpe2fs -h).
free_blocks() { dumpe2fs -h "$1" 2>/dev/null | sed -n 's/^Free blocks: *//p'; }
first_orphan() { dumpe2fs -h "$1" 2>/dev/null | sed -n 's/^First orphan inode: *//p'; }

# stat_of FILE KEY: one value of a -o stats= JSON file.
stat_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

# corpus_image NAME DEST: gunzip a corpus image to a copy.
corpus_image() {
	local name=$1 dest=$2
	[ -f "$CORPUS/$name/image.gz" ] || return 1
	gzip -dc "$CORPUS/$name/image.gz" >"$dest"
}

# ensure_test_user: create $TEST_USER once (serialised: tests run in parallel).
ensure_test_user() {
	(
		flock 9
		id "$TEST_USER" >/dev/null 2>&1 ||
			useradd --system --no-create-home --shell /usr/sbin/nologin "$TEST_USER" \
				>/dev/null 2>&1 || true
	) 9>/tmp/recon-test-useradd.lock
	id "$TEST_USER" >/dev/null 2>&1 || die "cannot create user $TEST_USER"
	TEST_UID=$(id -u "$TEST_USER")
	TEST_GID=$(id -g "$TEST_USER")
}

# as_user CMD...: run CMD as $TEST_USER (no supplementary groups).
as_user() {
	setpriv --reuid="$TEST_UID" --regid="$TEST_GID" --clear-groups \
		env HOME="$SCRATCH" PYTHONPATH="$PYTHONPATH" "$@"
}

# loop_attach IMG: prints the loop device; detached at exit.
loop_attach() {
	local dev
	dev=$(losetup --find --show "$1") || return 1
	LOOPS+=("$dev")
	echo "$dev"
}

# kmount IMG MNT [OPTS]: the kernel's $FS_TYPE driver on a loop device.
kmount() {
	local img=$1 mnt=$2 opts=${3:-}
	mkdir -p "$mnt"
	mount -t "$FS_TYPE" -o "loop${opts:+,$opts}" "$img" "$mnt" && MOUNTS+=("$mnt")
}
kumount() { umount "$1"; }

have_kernel_ext3() {
	grep -qw ext3 /proc/filesystems && return 0
	modprobe ext3 2>/dev/null || modprobe ext4 2>/dev/null
	grep -qw ext3 /proc/filesystems
}

# have_kernel_fs: whether the kernel has a driver for $FS_TYPE.
have_kernel_fs() {
	[ "$FS_TYPE" = ext3 ] && { have_kernel_ext3; return; }
	grep -qw ext4 /proc/filesystems || modprobe ext4 2>/dev/null
	grep -qw ext4 /proc/filesystems
}

# need_kernel_ext4: skip the test when the kernel has no ext4 driver (for
# the tests that compare with it or let it recover their images).
need_kernel_ext4() {
	grep -qw ext4 /proc/filesystems || modprobe ext4 2>/dev/null
	grep -qw ext4 /proc/filesystems || skip "the kernel has no ext4 driver"
}

# cut_clean_run BASE OPTS WORKLOAD: run the power-cut workload (a script
# given the mount point) without a cut on a copy of BASE mounted with OPTS;
# its image must be clean.  Sets CUT_WRITES and CUT_TRANSACTIONS (from
# -o stats=) for cut_sweep and the caller.
cut_clean_run() {
	local base=$1 opts=$2 workload=$3 img="$SCRATCH/cut-clean.img" mnt="$SCRATCH/cut-mnt"
	cp --sparse=always "$base" "$img"
	mount_recon "$img" "$mnt" "$opts,stats=$SCRATCH/cut.json" || die "mount (the cut clean run)"
	python3 "$workload" "$mnt"
	umount_recon "$mnt"
	fsck_clean "$img" "the clean run of the cut workload"
	CUT_WRITES=$(stat_of "$SCRATCH/cut.json" device_writes)
	CUT_TRANSACTIONS=$(stat_of "$SCRATCH/cut.json" transactions)
	rm -f "$img"
}

# cut_truncate_unlink_scripts NAME VICTIM TRUNC_BYTES [VICTIM_BYTES]: the
# workload and check cut_sweep runs for a release and a truncate that span
# commits: $SCRATCH/cut.py truncates MNT/trunc (TRUNC_BYTES of
# pattern("trunc")) to 1,000,000 bytes, unlinks MNT/VICTIM, fsyncs the
# directory; $SCRATCH/cut_check.py wants trunc at either size with its bytes,
# and VICTIM, if still there and VICTIM_BYTES given, as pattern(VICTIM).
cut_truncate_unlink_scripts() {
	local name=$1 victim=$2 trunc=$3 vbytes=${4:-0}
	cat >"$SCRATCH/cut.py" <<EOF
import os, sys
m = sys.argv[1]
def attempt(fn, *a):
    try:
        fn(*a)
    except OSError:
        pass
attempt(os.truncate, os.path.join(m, "trunc"), 1000000)
attempt(os.unlink, os.path.join(m, "$victim"))
try:
    fd = os.open(m, os.O_RDONLY | os.O_DIRECTORY)
    attempt(os.fsync, fd)
except OSError:
    pass
EOF
	cat >"$SCRATCH/cut_check.py" <<EOF
import os, sys
from pylib import Checker, pattern
m, what = sys.argv[1], sys.argv[2]
c = Checker("$name " + what)
data = pattern("trunc", $trunc)
size = os.stat(os.path.join(m, "trunc")).st_size
c.ok(size in (len(data), 1000000), "the truncated file is %d bytes: neither its old size nor its new" % size)
c.ok(open(os.path.join(m, "trunc"), "rb").read() == data[:size], "the truncated file's content")
v = os.path.join(m, "$victim")
if $vbytes and os.path.exists(v):
    c.ok(open(v, "rb").read() == pattern("$victim", $vbytes), "$victim's content")
c.done()
EOF
}

# cut_sweep BASE POINTS OPTS RECOVER_OPTS KERNEL_FS WORKLOAD CHECK [FIRST]: POINTS
# power cuts (fault_crash_after) spread evenly over the CUT_WRITES device
# writes of WORKLOAD on copies of BASE mounted with OPTS, from the FIRST'th
# (default 1; more skips cuts that would fall inside the mount itself).  Each cut image is
# then recovered twice: by our mount with RECOVER_OPTS and by the kernel's
# KERNEL_FS driver (ext3: skipped when the kernel has none).  CHECK (a script
# given the mount point and what happened) judges the files after each
# recovery; e2fsck -fn and an empty orphan list judge the image.  A daemon
# that hangs after the cut is a failure; its exit status is not judged.
cut_sweep() {
	local base=$1 points=$2 opts=$3 ropts=$4 kfs=$5 workload=$6 check=$7
	local mnt="$SCRATCH/cut-mnt" kmnt="$SCRATCH/cut-kmnt" img="$SCRATCH/cut.img"
	local kimg="$SCRATCH/cut-kernel.img" p cut what pid first=${8:-1}
	for ((p = first; p <= points; p++)); do
		cut=$((p * CUT_WRITES / (points + 1)))
		what="power cut at write $cut of $CUT_WRITES"
		cp --sparse=always "$base" "$img"
		mount_recon "$img" "$mnt" "$opts,fault_crash_after=$cut" || { fail "$what: mount"; continue; }
		pid=$RECON_PID
		python3 "$workload" "$mnt"
		fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt"
		RECON_PID=
		wait_daemon "$pid" $((60 * TMUL)) || [ "$RECON_STATUS" -ne 124 ] || fail "$what: the daemon hung"
		cp --sparse=always "$img" "$kimg"
		if mount_recon "$img" "$mnt" "$ropts"; then
			python3 "$check" "$mnt" "$what (our recovery)" || fail "$what: our recovery"
			umount_recon "$mnt"
			fsck_clean "$img" "$what, our recovery"
			[ -z "$(first_orphan "$img")" ] || fail "$what: orphans left after our recovery"
		else
			fail "$what: our mount refused the image"
		fi
		[ "$kfs" = ext3 ] && ! have_kernel_ext3 && continue
		mkdir -p "$kmnt"
		if mount -t "$kfs" -o loop "$kimg" "$kmnt"; then
			MOUNTS+=("$kmnt")
			python3 "$check" "$kmnt" "$what (kernel recovery)" || fail "$what: the kernel's recovery"
			umount "$kmnt"
			fsck_clean "$kimg" "$what, the kernel's recovery"
		else
			fail "$what: the kernel's $kfs does not mount it"
		fi
	done
	rm -f "$img" "$kimg"
}

# The fuse module's enable_uring parameter is global: a test that sets it
# takes this lock, sets it to Y, and puts back the value it found at exit
# (restore_uring_param, or the exit trap).  Skips (77) when it cannot.
URING_PARAM=/sys/module/fuse/parameters/enable_uring
set_uring_param() { echo "$1" >"$URING_PARAM" 2>/dev/null && [ "$(cat "$URING_PARAM")" = "$1" ]; }
restore_uring_param() { echo "$URING_PARAM_SAVED" >"$URING_PARAM" 2>/dev/null; }
take_uring_param() {
	[ -e "$URING_PARAM" ] || skip "this kernel has no FUSE over io_uring ($URING_PARAM missing)"
	exec 8>/tmp/recon-fuse-enable-uring.lock
	flock -w $((600 * TMUL)) 8 || skip "another test holds $URING_PARAM"
	URING_PARAM_SAVED=$(cat "$URING_PARAM")
	trap 'restore_uring_param; cleanup' EXIT
	set_uring_param Y || skip "cannot set $URING_PARAM to Y"
}

cleanup() {
	local m p l
	for m in "${MOUNTS[@]}"; do
		is_mounted "$m" || continue
		fusermount3 -uz "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
	done
	for p in "${PIDS[@]}"; do
		kill -0 "$p" 2>/dev/null && kill -9 "$p" 2>/dev/null
	done
	for l in "${LOOPS[@]}"; do
		losetup -d "$l" 2>/dev/null
	done
	if [ "${RECON_KEEP:-0}" = 1 ] || [ "$FAILURES" -gt 0 ]; then
		# keep the logs for a failed run, not the images
		find "$SCRATCH" -name '*.img' -delete 2>/dev/null
		echo "[$TEST_NAME] logs kept in $SCRATCH"
	else
		rm -rf "$SCRATCH"
	fi
}
trap cleanup EXIT

# finish: the test's verdict.
finish() {
	if [ "$FAILURES" -gt 0 ]; then
		echo "[$TEST_NAME] $FAILURES failure(s)"
		exit 1
	fi
	echo "[$TEST_NAME] ok"
	exit 0
}
