#!/bin/bash
# bench/lib_phase.sh PHASE MOUNTPOINT - the body of one bench phase, run by
# bench/phases (and bench/overhead) under a timeout in its own process, so a
# hung file system can be abandoned.  Timing is done by the caller.
# Sizes come from the environment (bench/phases sets them; --quick shrinks them):
#   BENCH_TARBALL, SMALL_FILES, SMALL_DIRS, SEQ_MB, ONEDIR_FILES, PM_FILES, PM_TX
# Writing phases end with syncfs of the mount (sync -f), which for FUSE
# pushes the kernel's dirty pages to the daemon and asks for its flush where
# the kernel sends one; the daemon's own final flush is timed by "umount".
set -u
phase=$1 mnt=$2

syncfs() { sync -f "$mnt"; }

case $phase in
untar)
	mkdir -p "$mnt/src" && tar -xf "$BENCH_TARBALL" -C "$mnt/src" && syncfs ;;
create_small)
	# Shell builtins only (no fork per file): the time is the file system's.
	payload=$(printf '%0512d' 0)
	for ((d = 0; d < SMALL_DIRS; d++)); do
		mkdir "$mnt/small$d" || exit 1
		for ((f = 0; f < SMALL_FILES / SMALL_DIRS; f++)); do
			printf '%s\n' "$payload" > "$mnt/small$d/f$f" || exit 1
		done
	done
	syncfs ;;
find_cold)
	find "$mnt" -printf '%s\n' > /dev/null ;;
read_cold)
	# cat, not tar: GNU tar skips reading file data when writing to /dev/null.
	find "$mnt" -type f -print0 | xargs -0 -r cat > /dev/null ;;
seq_write)
	dd if=/dev/zero of="$mnt/seq" bs=1M count="$SEQ_MB" conv=fsync status=none && syncfs ;;
create_onedir)
	mkdir "$mnt/onedir" || exit 1
	for ((i = 0; i < ONEDIR_FILES; i++)); do
		: > "$mnt/onedir/f$i" || exit 1
	done
	syncfs ;;
stat_cold)
	# Lookups by name (no readdir), then getattr: the cost of a large directory.
	cd "$mnt/onedir" || exit 1
	seq -f 'f%.0f' 0 $((ONEDIR_FILES - 1)) | xargs stat -c '%s' > /dev/null ;;
create_touch)
	# touch(1), as a user would: open(O_CREAT) and utimensat per name.
	mkdir "$mnt/touchdir" || exit 1
	seq -f "$mnt/touchdir/t%.0f" 0 $((ONEDIR_FILES - 1)) | xargs touch || exit 1
	syncfs ;;
rm)
	rm -rf "${mnt:?}"/* && syncfs ;;
postmark)
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
