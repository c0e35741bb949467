# tests/explore/lib_explore.sh - shared by the explore scenarios (sourced after
# tests/integration/lib.sh, never run): where the exercisers are and how a
# run on recon-fuse is judged.
FSX="$RECON_BUILD/tests/explore/fsx"
NSSTRESS="$RECON_BUILD/tests/explore/nsstress"
DIO_RACE="$RECON_BUILD/tests/explore/dio_race"
FALSE_ALARMS=0     # rejected commits (a checker false alarm or a driver bug)
# The file system of the scenarios that take one (their argument): ext3, or
# ext4 (mkfs.ext4's defaults, the kernel's ext4 driver as the reference).
EXPLORE_FS=${EXPLORE_FS:-ext3}

# explore_fs FS: set EXPLORE_FS from a scenario's argument (default ext3),
# name the test after it and skip when the kernel lacks the driver.
explore_fs() {
	EXPLORE_FS=${1:-ext3}
	case $EXPLORE_FS in
	ext3) have_kernel_ext3 || skip "no kernel ext3" ;;
	ext4) need_kernel_ext4; TEST_NAME=${TEST_NAME}_ext4 ;;
	*) die "file system $EXPLORE_FS: ext3 or ext4" ;;
	esac
}

# explore_mkimg IMG BLOCKSIZE SIZE: a fresh image of $EXPLORE_FS.
explore_mkimg() {
	if [ "$EXPLORE_FS" = ext3 ]; then mkimg "$@"; return; fi
	rm -f "$1"
	mke2fs -F -q -t ext4 -b "$2" "$1" "$3" >"$SCRATCH/mke2fs.out" 2>&1 ||
		{ cat "$SCRATCH/mke2fs.out"; die "mke2fs -t ext4 $1"; }
}

# daemon_verdict: after umount_recon; a commit the checker rejected fails the
# run, with the violation from the daemon's log.
daemon_verdict() {
	local what=$1
	if grep -qE 'rejected by the checker|INV_[A-Z_]+' "$RECON_LOG"; then
		FALSE_ALARMS=$((FALSE_ALARMS + 1))
		fail "$what: the daemon rejected a commit (checker false alarm or driver bug):"
		grep -E 'rejected by the checker|INV_[A-Z_]+' "$RECON_LOG" | head -5 | sed 's/^/    /'
		return 1
	fi
	return 0
}

# recon_run IMG WHAT CMD...: mount IMG with recon-fuse (defaults: checker on;
# EXPLORE_RECON_OPTS adds -o options, e.g. on_violation=log to explore past a
# known false alarm: rejections are still counted and failed),
# run CMD with $MNT as its tree, unmount; the daemon must exit 0 without a
# rejected commit and e2fsck -fn must pass.  Returns non-zero on any failure.
recon_run() {
	local img=$1 what=$2 rc=0; shift 2
	MNT="$SCRATCH/mnt"
	mount_recon "$img" "$MNT" "${EXPLORE_RECON_OPTS:-}" || { fail "$what: mount"; return 1; }
	"$@" || { rc=$?; fail "$what: exited $rc"; }
	umount_recon "$MNT" || rc=1
	daemon_verdict "$what" || rc=1
	fsck_clean "$img" "$what" || rc=1
	return $rc
}

# kernel_run IMG WHAT CMD...: the same on the kernel's $EXPLORE_FS (loop mount).
kernel_run() {
	local img=$1 what=$2 rc=0; shift 2
	MNT="$SCRATCH/kmnt"
	if [ "$EXPLORE_FS" = ext3 ]; then
		kmount "$img" "$MNT" || { fail "$what: kernel mount"; return 1; }
	else
		mkdir -p "$MNT"
		mount -t "$EXPLORE_FS" -o loop "$img" "$MNT" || { fail "$what: kernel mount"; return 1; }
		MOUNTS+=("$MNT")
	fi
	"$@" || { rc=$?; fail "$what (kernel $EXPLORE_FS): exited $rc"; }
	kumount "$MNT" || { fail "$what: kernel umount"; rc=1; }
	fsck_clean "$img" "$what (kernel)" || rc=1
	return $rc
}
