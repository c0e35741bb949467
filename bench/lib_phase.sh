#!/bin/bash
# bench/lib_phase.sh PHASE MOUNTPOINT - the body of one bench phase, run by
# bench/phases, bench/census (and bench/overhead) under a timeout in its own
# process, so a hung file system can be abandoned.  Timing is done by the caller.
# bench/lib_phase.sh --list - the phases in the order they run, one a line:
#   NAME COLD UNIT [extra]
#                    COLD 1: the caller remounts and drops the caches first;
#                    UNIT: what one operation of the phase is (per-operation
#                    figures); "extra": not in the callers' default list, run
#                    when named or with "all"; "umount" has no body here: the
#                    caller unmounts.
# Sizes come from the environment (bench/phases sets them; --quick shrinks them):
#   BENCH_TARBALL, SMALL_FILES, SMALL_DIRS, SEQ_MB, ONEDIR_FILES, PM_FILES, PM_TX,
#   FSYNC_N (default 300)
# With PHASE_OPS=FILE set, the phase writes the number of operations it did to
# FILE (bench/census); the phases whose count depends on the tree get it from
# their own output, so counting asks the file system nothing more; the untars
# take the tarball's file count from BENCH_TAR_FILES when the caller has it
# (counting the tarball takes time inside the phase).
# Writing phases end with syncfs of the mount (sync -f; PHASE_SYNC below),
# which for FUSE pushes the kernel's dirty pages to the daemon and asks for
# its flush where the kernel sends one; the daemon's own final flush is timed
# by "umount".
set -u
phase=$1 mnt=${2:-}

if [[ $phase == --list ]]; then
	cat <<'EOF'
untar 0 file
untar4 0 file extra
fsync1 0 fsync extra
fsync4 0 fsync extra
create_small 0 file
find_cold 1 entry
read_cold 1 file
seq_write 0 MiB
create_onedir 0 create
stat_cold 1 stat
create_touch 0 create
rm 0 entry
postmark 0 transaction
umount 0 unmount
EOF
	exit 0
fi

# With PHASE_SYNC=FILE set, syncfs writes the microseconds it took to FILE:
# the part of the phase spent waiting for the file system's writeback (the
# kernel's ext3 writes its journal and data there; FUSE does not pass a
# syncfs on to the daemon).
syncfs() {
	local t0=$EPOCHREALTIME
	sync -f "$mnt" || return
	[[ -z ${PHASE_SYNC:-} ]] || echo $(( ${EPOCHREALTIME/./} - ${t0/./} )) > "$PHASE_SYNC"
}
# appender FILE N: N times, append 4 KiB to FILE and fsync it (one process)
appender() {
	python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
buf = b"f" * 4096
for _ in range(int(sys.argv[2])):
    os.write(fd, buf)
    os.fsync(fd)
os.close(fd)' "$1" "$2"
}
ops() { [[ -z ${PHASE_OPS:-} ]] || echo "$1" > "$PHASE_OPS"; }
# The number of lines (or, with -z, of NUL-terminated names) in FILE, as the
# phase's operation count; FILE goes.
ops_of_list() {
	local n
	if [[ $1 == -z ]]; then n=$(tr -cd '\0' < "$2" | wc -c); shift; else n=$(wc -l < "$1"); fi
	rm -f "$1"
	ops "$n"
}

case $phase in
untar)
	[[ -n ${PHASE_OPS:-} ]] && ops "${BENCH_TAR_FILES:-$(tar -tf "$BENCH_TARBALL" | grep -vc '/$')}"
	mkdir -p "$mnt/src" && tar -xf "$BENCH_TARBALL" -C "$mnt/src" && syncfs ;;
untar4)
	# Four clients at once: four untars of the tree into four directories,
	# started together; the phase ends when the last one does.  Its trees
	# stay (rm then removes them too).
	[[ -n ${PHASE_OPS:-} ]] && ops "$((4 * ${BENCH_TAR_FILES:-$(tar -tf "$BENCH_TARBALL" | grep -vc '/$')}))"
	mkdir -p "$mnt"/untar4-{1..4} || exit 1
	pids=()
	for i in 1 2 3 4; do
		tar -xf "$BENCH_TARBALL" -C "$mnt/untar4-$i" &
		pids+=($!)
	done
	rc=0
	for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
	((rc == 0)) && syncfs ;;
fsync1)
	# One client appending 4 KiB and fsyncing its file 4 x FSYNC_N times:
	# the work fsync4 shares among four.
	n=${FSYNC_N:-300}
	ops $((4 * n))
	appender "$mnt/fsync1" $((4 * n)) ;;
fsync4)
	# Four clients at once, one mount, each appending 4 KiB and fsyncing
	# its own file FSYNC_N times; the phase ends when the last one does.
	n=${FSYNC_N:-300}
	ops $((4 * n))
	pids=()
	for i in 1 2 3 4; do
		appender "$mnt/fsync4-$i" "$n" &
		pids+=($!)
	done
	rc=0
	for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
	exit $rc ;;
create_small)
	# Shell builtins only (no fork per file): the time is the file system's.
	payload=$(printf '%0512d' 0)
	ops $((SMALL_DIRS * (SMALL_FILES / SMALL_DIRS)))
	for ((d = 0; d < SMALL_DIRS; d++)); do
		mkdir "$mnt/small$d" || exit 1
		for ((f = 0; f < SMALL_FILES / SMALL_DIRS; f++)); do
			printf '%s\n' "$payload" > "$mnt/small$d/f$f" || exit 1
		done
	done
	syncfs ;;
find_cold)
	if [[ -n ${PHASE_OPS:-} ]]; then
		find "$mnt" -printf '%s\n' > "$PHASE_OPS.list" && ops_of_list "$PHASE_OPS.list"
	else
		find "$mnt" -printf '%s\n' > /dev/null
	fi ;;
read_cold)
	# cat, not tar: GNU tar skips reading file data when writing to /dev/null.
	if [[ -n ${PHASE_OPS:-} ]]; then
		find "$mnt" -type f -print0 | tee "$PHASE_OPS.list" | xargs -0 -r cat > /dev/null &&
			ops_of_list -z "$PHASE_OPS.list"
	else
		find "$mnt" -type f -print0 | xargs -0 -r cat > /dev/null
	fi ;;
seq_write)
	ops "$SEQ_MB"
	dd if=/dev/zero of="$mnt/seq" bs=1M count="$SEQ_MB" conv=fsync status=none && syncfs ;;
create_onedir)
	ops "$ONEDIR_FILES"
	mkdir "$mnt/onedir" || exit 1
	for ((i = 0; i < ONEDIR_FILES; i++)); do
		: > "$mnt/onedir/f$i" || exit 1
	done
	syncfs ;;
stat_cold)
	# Lookups by name (no readdir), then getattr: the cost of a large directory.
	ops "$ONEDIR_FILES"
	cd "$mnt/onedir" || exit 1
	seq -f 'f%.0f' 0 $((ONEDIR_FILES - 1)) | xargs stat -c '%s' > /dev/null ;;
create_touch)
	# touch(1), as a user would: open(O_CREAT) and utimensat per name.
	ops "$ONEDIR_FILES"
	mkdir "$mnt/touchdir" || exit 1
	seq -f "$mnt/touchdir/t%.0f" 0 $((ONEDIR_FILES - 1)) | xargs touch || exit 1
	syncfs ;;
rm)
	if [[ -n ${PHASE_OPS:-} ]]; then
		# rm -v names every entry it removed, into a file off the mount
		rm -rfv "${mnt:?}"/* > "$PHASE_OPS.list" && ops_of_list "$PHASE_OPS.list" && syncfs
	else
		rm -rf "${mnt:?}"/* && syncfs
	fi ;;
postmark)
	ops "$PM_TX"
	mkdir -p "$mnt/pm" || exit 1
	out=$(printf '%s\n' "set location $mnt/pm" "set number $PM_FILES" "set transactions $PM_TX" \
		"set size 500 20000" run quit | postmark 2>&1) || { echo "$out" >&2; exit 1; }
	grep -q 'transactions' <<< "$out" || { echo "$out" >&2; exit 1; }
	# PostMark deletes what it made; anything left is reported, then removed.
	left=$(find "$mnt/pm" -mindepth 1 | head -5)
	[[ -n $left ]] && echo "postmark left behind: $left" >&2
	rm -rf "$mnt/pm" && syncfs ;;
*)
	echo "lib_phase.sh: unknown phase $phase" >&2; exit 2 ;;
esac
