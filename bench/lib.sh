# bench/lib.sh - shell helpers shared by the bench scripts: finding the
# binaries, the scratch directory, mounts, timing.  Sourced, not run.  The
# mount helpers need root (loop devices, mount, drop_caches).
#
# Drivers: "kernel" (ext3 on a loop device), "tmpfs" (the kernel's tmpfs:
# no device), "fuse2fs" (Debian fuse2fs,
# -o fakeroot), "recon" (recon-fuse), "fuse-null" and "fuse-null-uring"
# (bench/fuse-null.c over /dev/fuse and over io_uring).  The FUSE daemons run in the
# foreground (-f) as children of this shell, so an unmount can wait for the
# daemon's exit (the point where its last flush is done).
#
# Every mount, daemon and loop device made here is recorded and undone by
# bench_cleanup, which the scripts install as an EXIT/INT/TERM trap.

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$BENCH_DIR/.." && pwd)

: "${MOUNT_TIMEOUT:=30}"     # seconds for a mount to appear
: "${UMOUNT_TIMEOUT:=300}"   # seconds for a daemon to exit after umount
: "${PHASE_TIMEOUT:=600}"    # seconds per phase before the driver is declared hung

BENCH_LOOPS=()       # loop devices we attached
declare -A BENCH_PID # mountpoint -> daemon pid (FUSE drivers)
declare -A BENCH_DRV # mountpoint -> driver
BENCH_LAST_RSS_KB=0  # VmHWM of the last daemon unmounted (0 for kernel)

bench_log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
bench_die() { bench_log "error: $*"; exit 1; }

bench_need_root() {
	[[ $(id -u) == 0 ]] || bench_die "must run as root (loop devices, mount, drop_caches)"
}

# Locate the recon-fuse binary: $RECON_FUSE (what --recon sets), then this
# source tree's build folders, then recon-fuse on PATH (an installed one).
bench_find_recon() {
	local c
	for c in "${RECON_FUSE:-}" "$REPO_DIR/build/fuse/recon-fuse" "$REPO_DIR/builddir/fuse/recon-fuse" \
		 "$(command -v recon-fuse 2>/dev/null)"; do
		[[ -n $c && -x $c ]] && { echo "$c"; return 0; }
	done
	return 1
}
BENCH_NO_RECON="recon-fuse not found: build it (meson setup build -Dbuildtype=release && ninja -C build), install it on PATH, or pass --recon PATH"

# Locate recon-check: $RECON_CHECK (what --recon-check sets), then beside
# RECON_BIN when that is in a build folder, then this source tree's build
# folders, then PATH.
bench_find_recon_check() {
	local c beside=""
	[[ -n ${RECON_BIN:-} ]] && beside=$(dirname "$RECON_BIN")/../checker/recon-check
	for c in "${RECON_CHECK:-}" "$beside" "$REPO_DIR/build/checker/recon-check" \
		 "$REPO_DIR/builddir/checker/recon-check" "$(command -v recon-check 2>/dev/null)"; do
		[[ -n $c && -x $c ]] && { echo "$c"; return 0; }
	done
	return 1
}
BENCH_NO_RECON_CHECK="recon-check not found: build it (meson setup build && ninja -C build), install it on PATH, or pass --recon-check PATH"

# Compile bench/fuse-null.c (the FUSE floor driver) with recon-fuse's
# transport (fuse/transport.c, fuse/uring.c) into DIR and export
# FUSE_NULL_BIN for bench_mount; needs cc, libfuse3-dev and liburing-dev.
bench_build_fuse_null() {
	export FUSE_NULL_BIN=$1/fuse-null
	# shellcheck disable=SC2046
	cc -O2 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -I"$REPO_DIR/fuse" -o "$FUSE_NULL_BIN" \
		"$BENCH_DIR/fuse-null.c" "$REPO_DIR/fuse/transport.c" "$REPO_DIR/fuse/uring.c" \
		$(pkg-config --cflags --libs fuse3 liburing) -lpthread ||
		bench_die "cannot build bench/fuse-null.c (cc, libfuse3-dev, liburing-dev)"
}

# The run's scratch directory.  bench_scratch NAME [DIR] sets BENCH_SCRATCH
# to DIR (made if missing) or to a new $BENCH_TMP/bench-NAME.XXXXXX
# (BENCH_TMP: /tmp unless set).
# bench_scratch_done STATUS, from the EXIT trap, removes it unless BENCH_KEEP
# is 1 (--keep) or DIR existed before the run (a folder the caller named and
# owns).  When STATUS is not 0 it first shows the end of the logs in it, as
# they go with it.
BENCH_KEEP=0 BENCH_SCRATCH_OURS=0
bench_scratch() {
	local name=$1 dir=${2:-}
	if [[ -z $dir ]]; then
		BENCH_SCRATCH=$(mktemp -d "${BENCH_TMP:-/tmp}/bench-$name.XXXXXX") ||
			bench_die "cannot make a scratch directory in ${BENCH_TMP:-/tmp}"
		BENCH_SCRATCH_OURS=1
	else
		[[ -d $dir ]] || BENCH_SCRATCH_OURS=1
		mkdir -p "$dir" || bench_die "cannot make the scratch directory $dir"
		BENCH_SCRATCH=$(cd "$dir" && pwd)
	fi
	export BENCH_SCRATCH
}

bench_scratch_done() {
	local status=${1:-0} f
	[[ -n ${BENCH_SCRATCH:-} && -d $BENCH_SCRATCH ]] || return 0
	if ((BENCH_KEEP)) || ! ((BENCH_SCRATCH_OURS)); then
		bench_log "scratch directory kept: $BENCH_SCRATCH"
		return 0
	fi
	if [[ $status != 0 ]]; then
		for f in "$BENCH_SCRATCH"/*.log; do
			[[ -s $f ]] || continue
			bench_log "end of $(basename "$f") (the scratch directory goes; --keep keeps it):"
			tail -n 15 "$f" >&2
		done
	fi
	rm -rf "$BENCH_SCRATCH"
}

# The usage of a script whose header comment is its usage: that comment,
# without the "#".
bench_usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$1"; }

# Draw a figure with bench/lib_plot.py; a missing gnuplot costs the figure,
# not the run.
bench_plot() {
	/usr/bin/python3 "$BENCH_DIR/lib_plot.py" "$@" || bench_log "no figure drawn (bench/lib_plot.py $1 failed)"
}

# Fresh sparse image of SIZE (e.g. 2G) formatted FSTYPE (default ext3).
bench_mkimg() {
	local img=$1 size=${2:-2G} fstype=${3:-ext3}
	rm -f "$img"
	truncate -s "$size" "$img" || return 1
	mke2fs -q -t "$fstype" -F "$img" >/dev/null 2>&1 || { bench_log "mke2fs failed on $img"; return 1; }
}

bench_loop_attach() { # IMG -> prints /dev/loopN
	local dev
	dev=$(losetup -f --show "$1") || return 1
	BENCH_LOOPS+=("$dev")
	echo "$dev"
}

bench_loop_detach() {
	local dev=$1 i
	losetup -d "$dev" 2>/dev/null
	for i in "${!BENCH_LOOPS[@]}"; do
		[[ ${BENCH_LOOPS[$i]} == "$dev" ]] && unset 'BENCH_LOOPS[i]'
	done
	return 0
}

# Read and write requests completed by a block device (fields 1 and 5 of
# /sys/block/X/stat), as "READS WRITES".
bench_dev_io() {
	local name=${1##*/} r w x
	read -r r x x x w x 2>/dev/null < "/sys/block/$name/stat" || { echo "0 0"; return; }
	echo "$r $w"
}

# State of a process: empty when gone; "Z" for a zombie (exited, not reaped).
bench_proc_state() {
	local x st
	read -r x x st x 2>/dev/null < "/proc/$1/stat" || return 0
	echo "$st"
}

bench_drop_caches() {
	sync
	echo 3 > /proc/sys/vm/drop_caches
}

# bench_mount DRIVER DEV MNT [RECON_OPTS]
# DEV is a loop device for "kernel" (mounted as $BENCH_KERNEL_FS, default
# ext3); the size (e.g. 2G) for "tmpfs"; an image or a block device for FUSE.
# Daemon output goes to $BENCH_DAEMON_LOG (default $BENCH_SCRATCH/daemon.log);
# with BENCH_DAEMON_DEBUG=1 the FUSE daemons run with -d, libfuse's log of
# every request (bench/census counts them).
bench_mount() {
	local drv=$1 dev=$2 mnt=$3 opts=${4:-} pid="" t dbg=()
	local log=${BENCH_DAEMON_LOG:-$BENCH_SCRATCH/daemon.log}
	[[ ${BENCH_DAEMON_DEBUG:-0} == 1 ]] && dbg=(-d)
	mkdir -p "$mnt"
	case $drv in
	kernel)
		mount -t "${BENCH_KERNEL_FS:-ext3}" "$dev" "$mnt" || return 1 ;;
	tmpfs)
		mount -t tmpfs -o "size=$dev" tmpfs "$mnt" || return 1 ;;
	fuse2fs)
		"${FUSE2FS_BIN:-fuse2fs}" "$dev" "$mnt" -f "${dbg[@]}" -o fakeroot >>"$log" 2>&1 &
		pid=$! ;;
	fuse-null|fuse-null-uring)
		# the image is not read: its tree lives in DEV.null between mounts
		local ring=()
		[[ $drv == fuse-null-uring ]] && ring=(-u)
		"$FUSE_NULL_BIN" "${dbg[@]}" "${ring[@]}" "$dev.null" "$mnt" >>"$log" 2>&1 &
		pid=$! ;;
	recon)
		if [[ -n $opts ]]; then
			"$RECON_BIN" -f "${dbg[@]}" -o "$opts" "$dev" "$mnt" >>"$log" 2>&1 &
		else
			"$RECON_BIN" -f "${dbg[@]}" "$dev" "$mnt" >>"$log" 2>&1 &
		fi
		pid=$! ;;
	*) bench_log "unknown driver $drv"; return 1 ;;
	esac
	BENCH_DRV[$mnt]=$drv
	if [[ -n $pid ]]; then
		BENCH_PID[$mnt]=$pid
		t=$((SECONDS + MOUNT_TIMEOUT))
		until mountpoint -q "$mnt"; do
			local st; st=$(bench_proc_state "$pid")
			if [[ -z $st || $st == Z ]]; then
				wait "$pid" 2>/dev/null
				bench_log "$drv exited before mounting (see $log)"
				unset 'BENCH_PID[$mnt]' 'BENCH_DRV[$mnt]'
				return 1
			fi
			if (( SECONDS > t )); then
				bench_log "$drv did not mount within ${MOUNT_TIMEOUT}s"
				bench_kill "$mnt"
				return 1
			fi
			sleep 0.02
		done
	fi
	return 0
}

# Peak RSS (kB) of the daemon serving MNT so far, 0 for the kernel.
bench_rss_kb() {
	local pid=${BENCH_PID[$1]:-} k v
	[[ -n $pid ]] || { echo 0; return; }
	v=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
	echo "${v:-0}"
}

# Unmount MNT and, for FUSE, wait until the daemon has exited.  Returns 1 if
# the unmount failed or the daemon did not exit within UMOUNT_TIMEOUT (it is
# then killed).  Sets BENCH_LAST_RSS_KB.
bench_umount() {
	local mnt=$1 pid=${BENCH_PID[$1]:-} t st rc=0
	BENCH_LAST_RSS_KB=$(bench_rss_kb "$mnt")
	if ! umount "$mnt" 2>/dev/null; then
		sleep 0.5
		umount "$mnt" || { bench_log "umount $mnt failed"; bench_kill "$mnt"; return 1; }
	fi
	if [[ -n $pid ]]; then
		t=$((SECONDS + UMOUNT_TIMEOUT))
		while :; do
			st=$(bench_proc_state "$pid")
			[[ -z $st || $st == Z ]] && break
			if (( SECONDS > t )); then
				bench_log "daemon $pid did not exit ${UMOUNT_TIMEOUT}s after umount; killing it"
				kill -9 "$pid" 2>/dev/null
				rc=1
				break
			fi
			sleep 0.01
		done
		wait "$pid" 2>/dev/null
		local ws=$?
		if (( rc == 0 && ws != 0 )); then
			bench_log "${BENCH_DRV[$mnt]} daemon exited with status $ws (see ${BENCH_DAEMON_LOG:-$BENCH_SCRATCH/daemon.log})"
			rc=1
		fi
	fi
	unset 'BENCH_PID[$mnt]' 'BENCH_DRV[$mnt]'
	return $rc
}

# Forcibly end a mount: kill its daemon, lazy-unmount.  For hung drivers.
bench_kill() {
	local mnt=$1 pid=${BENCH_PID[$1]:-}
	if [[ -n $pid ]]; then
		kill -9 "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	fi
	umount -l "$mnt" 2>/dev/null
	unset 'BENCH_PID[$mnt]' 'BENCH_DRV[$mnt]'
	return 0
}

bench_cleanup() {
	local mnt dev
	for mnt in "${!BENCH_DRV[@]}"; do
		bench_kill "$mnt"
	done
	for dev in "${BENCH_LOOPS[@]}"; do
		umount "$dev" 2>/dev/null
		losetup -d "$dev" 2>/dev/null
	done
	BENCH_LOOPS=()
}

# bench_time VAR CMD...: run CMD with PHASE_TIMEOUT, store elapsed seconds in
# VAR; returns CMD's status (124 on timeout).  CMD runs in a child bash so
# that a hung file system can be abandoned.
bench_time() {
	local __var=$1; shift
	local t0 t1 rc
	t0=$EPOCHREALTIME
	timeout -k 5 "$PHASE_TIMEOUT" "$@"
	rc=$?
	t1=$EPOCHREALTIME
	local us=$(( ${t1/./} - ${t0/./} ))
	printf -v "$__var" '%d.%06d' $((us / 1000000)) $((us % 1000000))
	return $rc
}

# Machine description, one line per item, for READMEs and result files.
bench_machine() {
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "- cpu: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
	echo "- memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
	echo "- kernel: $(uname -r)"
	echo "- fuse2fs: $(fuse2fs -V 2>&1 | head -1)"
	echo "- load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
	# What a FUSE round trip costs depends on these: whether the kernel
	# offers requests over io_uring (recon-fuse's default fuse_uring=auto
	# then takes it), and how an idle CPU wakes (on a virtual machine with
	# halt polling off, waking a caller on the other CPU costs a VM exit).
	local p=/sys/module/fuse/parameters/enable_uring idle=/sys/devices/system/cpu/cpuidle
	echo "- FUSE over io_uring offered (fuse enable_uring): $(cat "$p" 2>/dev/null || echo 'no such parameter')"
	echo "- cpuidle: driver $(cat "$idle/current_driver" 2>/dev/null || echo none), governor $(cat "$idle/current_governor_ro" 2>/dev/null || cat "$idle/current_governor" 2>/dev/null || echo none)$([ -r /sys/module/haltpoll/parameters/guest_halt_poll_ns ] && echo ", guest_halt_poll_ns $(cat /sys/module/haltpoll/parameters/guest_halt_poll_ns)")"
}
