#!/bin/bash
# A read-only mount never writes, not even to replay a journal: the device is
# opened read-only and a journal that needs recovery is replayed into memory,
# so what the mount shows is the recovered state while the image stays
# byte-for-byte the same.
#  1. A journal transaction made by debugfs (jo/jw/jc) that rewrites a file's
#     data block: the ro mount reads the replayed bytes; the image's checksum
#     is unchanged; the image file has mode 0444 (a rw mount of it fails with
#     a message pointing at -o ro).
#     Read-write, the replay is judged consistent and written.
#  1b. A journal whose replay would leave the image inconsistent (the
#     superblock's copy names the root as quota inode): a read-write mount
#     replays into memory, judges it, serves it read-only and writes nothing;
#     -o rw_unchecked replays it onto the disk.
#  2. Images left by a power cut (-o fault_crash_after=N, as crash_sweep.sh):
#     for points where the journal holds work that is not home yet (the
#     kernel's noload view differs from its replayed view), the walked tree of
#     our ro mount equals the kernel's after its replay, and the image is not
#     written.
#  3. A read-only loop device: ro mounts, rw is refused with a message.
#  4. A normal user who may only read the image.
#  5. ext4 images (mkfs.ext4 defaults, 1 KiB and 4 KiB blocks) the kernel left
#     needing recovery (files written and fsync'd, then EXT4_IOC_SHUTDOWN with
#     LOGFLUSH: a 64-bit, checksum v3 log of committed transactions): our ro
#     walk equals the kernel's after its replay and e2fsck's after its own; a
#     read-write mount is refused (extents) and leaves no damage behind.
#  6. The journal images of the e2fsprogs corpus (64-bit and checksummed logs,
#     damaged descriptor, commit, revoke and logged blocks): our ro walk
#     equals the walk after e2fsck's replay (e2fsck -E journal_only) where
#     e2fsck replays what we do; the table is logged.
. "$(dirname "$0")/lib.sh"
need_root
command -v debugfs >/dev/null || skip "no debugfs"
have_kernel_ext3 || skip "the kernel has no ext3 driver"
mnt="$SCRATCH/mnt"
kmnt="$SCRATCH/kmnt"
mkdir -p "$mnt" "$kmnt"

# walk.py ROOT: one line per name: path, type, mode, links, size, owner,
# mtime, and the content's hash (files) or target (symlinks).
cat >"$SCRATCH/walk.py" <<'EOF'
import hashlib, os, stat, sys
root = sys.argv[1]
out = []
for d, dirs, files in os.walk(root):
    dirs.sort()
    for n in sorted(dirs + files):
        p = os.path.join(d, n)
        rel = os.path.relpath(p, root)
        if rel == "lost+found":
            continue
        st = os.lstat(p)
        extra = ""
        if stat.S_ISREG(st.st_mode):
            with open(p, "rb") as f:
                extra = hashlib.sha256(f.read()).hexdigest()[:16]
        elif stat.S_ISLNK(st.st_mode):
            extra = os.readlink(p)
        out.append("%s %o %d %d %d:%d %d %s" % (rel, st.st_mode, st.st_nlink, st.st_size,
                                               st.st_uid, st.st_gid, int(st.st_mtime), extra))
print("\n".join(sorted(out)))
EOF

# ro_walk IMG OUT [OPTS]: mount IMG read-only, walk it into OUT, unmount;
# the image's checksum must not change.
ro_walk() {
	local img=$1 out=$2 what=$3 before after
	before=$(sha256sum <"$img")
	if ! mount_recon "$img" "$mnt" "ro"; then
		fail "$what: the read-only mount failed"
		return 1
	fi
	python3 "$SCRATCH/walk.py" "$mnt" >"$out" || fail "$what: walking the ro mount"
	umount_recon "$mnt"
	after=$(sha256sum <"$img")
	[ "$before" = "$after" ] || fail "$what: the read-only mount wrote to the image"
	return 0
}

# ---- 1: a debugfs journal transaction, image mode 0444 ----
img="$SCRATCH/jw.img"
mkimg "$img" 1024 16M
printf 'original content\n' >"$SCRATCH/orig"
debugfs -w -R "write $SCRATCH/orig f" "$img" >/dev/null 2>&1 || die "debugfs write"
blk=$(debugfs -R "blocks f" "$img" 2>/dev/null)
{ printf 'replayed content\n'; head -c 1007 /dev/zero; } >"$SCRATCH/new"
printf 'jo\njw -b %s %s\njc\n' "$blk" "$SCRATCH/new" >"$SCRATCH/jw.cmd"
debugfs -w -f "$SCRATCH/jw.cmd" "$img" >/dev/null 2>&1
dumpe2fs -h "$img" 2>/dev/null | grep -q needs_recovery || skip "debugfs left no journal to replay"
chmod 0444 "$img"
if ro_walk "$img" "$SCRATCH/jw.walk" "0444 image"; then
	grep -q '^f ' "$SCRATCH/jw.walk" || fail "0444 image: f is missing from the ro mount"
	want=$(head -c 17 "$SCRATCH/new" | sha256sum | cut -c1-16)
	grep -q "^f .* $want\$" "$SCRATCH/jw.walk" ||
		fail "0444 image: f does not read as the journal's copy of its block: $(grep '^f ' "$SCRATCH/jw.walk")"
	grep -q 'replayed 1 journal transaction' "$RECON_LOG" ||
		fail "0444 image: the daemon did not say it replayed: $(cat "$RECON_LOG")"
fi
# read-write: refused, with a message that says what to do
if mount_recon "$img" "$mnt" "" 2>"$SCRATCH/rw.err"; then
	fail "a read-write mount of a mode 0444 image succeeded"
	umount_recon "$mnt"
else
	grep -q -- '-o ro' "$SCRATCH/rw.err" ||
		fail "rw mount of a 0444 image: no pointer to -o ro: $(cat "$SCRATCH/rw.err")"
fi
chmod 0644 "$img"
# the same image read-write: the replay, judged consistent, is written
if mount_recon "$img" "$mnt" ""; then
	[ "$(head -c 17 "$mnt/f")" = "replayed content" ] || fail "rw replay: f does not read as the journal's copy"
	umount_recon "$mnt"
	dumpe2fs -h "$img" 2>/dev/null | grep -q needs_recovery && fail "rw replay: needs_recovery left set"
	fsck_clean "$img" "the image after a read-write replay"
else
	fail "the rw mount of a journal that needs recovery failed: $(cat "$RECON_LOG")"
fi
rm -f "$img"

# ---- 1b: a journal whose replay would leave the image inconsistent ----
# A transaction holding the superblock with s_usr_quota_inum naming the
# root (a damaged log block; e2fsck: "Invalid user quota inode"): a
# read-write mount replays it in memory, judges it and serves it read-only,
# the image unchanged; -o rw_unchecked replays it anyway.
img="$SCRATCH/badjw.img"
mkimg "$img" 1024 16M
dd if="$img" of="$SCRATCH/sb" bs=1024 skip=1 count=1 status=none
printf '\002\000\000\000' | dd of="$SCRATCH/sb" bs=1 seek=$((0x240)) conv=notrunc status=none
printf 'jo\njw -b 1 %s\njc\n' "$SCRATCH/sb" >"$SCRATCH/jw.cmd"
debugfs -w -f "$SCRATCH/jw.cmd" "$img" >/dev/null 2>&1
dumpe2fs -h "$img" 2>/dev/null | grep -q needs_recovery || skip "debugfs left no journal to replay"
before=$(sha256sum <"$img")
if mount_recon "$img" "$mnt" ""; then
	touch "$mnt/new" 2>"$SCRATCH/touch.err" && fail "bad journal: the mount is writable"
	grep -q "Read-only" "$SCRATCH/touch.err" || fail "bad journal: creating a file: $(cat "$SCRATCH/touch.err")"
	umount_recon "$mnt"
	grep -q "would leave it inconsistent" "$RECON_LOG" && grep -q "s_usr_quota_inum 2" "$RECON_LOG" ||
		fail "bad journal: the daemon does not say why it is read-only: $(cat "$RECON_LOG")"
else
	fail "bad journal: the rw mount failed: $(cat "$RECON_LOG")"
fi
[ "$(sha256sum <"$img")" = "$before" ] || fail "bad journal: the read-write mount wrote its replay"
if mount_recon "$img" "$mnt" "rw_unchecked"; then
	: >"$mnt/new" || fail "bad journal, rw_unchecked: cannot create a file"
	umount_recon "$mnt"
	dumpe2fs -h "$img" 2>/dev/null | grep -q needs_recovery && fail "rw_unchecked: needs_recovery left set"
else
	fail "bad journal: the rw_unchecked mount failed: $(cat "$RECON_LOG")"
fi
rm -f "$img"

# ---- 2: power cuts ----
base="$SCRATCH/base.img"
mkimg "$base" 1024 32M -J size=1
cat >"$SCRATCH/workload.py" <<'EOF'
import os, sys
from pylib import pattern
mnt = sys.argv[1]
def attempt(fn, *a):
    try:
        fn(*a)
    except OSError:
        pass
def write(name, data):
    fd = os.open(os.path.join(mnt, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
for i in range(24):
    d = "d%d" % (i % 3)
    attempt(os.mkdir, os.path.join(mnt, d))
    attempt(write, "%s/f%d" % (d, i), pattern("f%d" % i, [900, 7000, 20000][i % 3] + i))
    if i % 4 == 3:
        attempt(os.rename, os.path.join(mnt, "%s/f%d" % (d, i - 3)), os.path.join(mnt, "%s/r%d" % (d, i)))
    if i % 5 == 4:
        attempt(os.unlink, os.path.join(mnt, "%s/f%d" % (d, i - 1)))
        attempt(os.symlink, "f%d" % i, os.path.join(mnt, "%s/s%d" % (d, i)))
EOF
# run_workload IMG OPTS: mount, workload, unmount (the daemon's status after a
# power cut may be non-zero; a crash or hang is a failure).
run_workload() {
	local img=$1 opts=$2 pid
	mount_recon "$img" "$mnt" "$opts" 2>/dev/null || return 0   # cut during the mount
	pid=$RECON_PID
	timeout -s KILL $((120 * TMUL)) python3 "$SCRATCH/workload.py" "$mnt" >/dev/null 2>&1
	unmount_after_cut "$mnt" "$pid"
	[ "$RECON_STATUS" -lt 124 ] || { fail "workload daemon ended with $RECON_STATUS ($opts)"; return 1; }
	return 0
}
clean="$SCRATCH/clean.img"
cp --sparse=always "$base" "$clean"
run_workload "$clean" "deterministic,stats=$SCRATCH/clean.json" || die "the clean run failed"
W=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["device_writes"])' \
	"$SCRATCH/clean.json") || die "no device_writes in the clean run's stats"
rm -f "$clean"
points=${RO_POINTS:-16}
mattered=0 compared=0
for ((p = 1; p <= points && mattered < 3; p++)); do
	n=$((p * W / (points + 1)))
	img="$SCRATCH/cut.img"
	cp --sparse=always "$base" "$img"
	run_workload "$img" "deterministic,fault_crash_after=$n,fault_seed=$p" || continue
	dumpe2fs -h "$img" 2>/dev/null | grep -q needs_recovery || continue
	# the kernel's views: without replay (noload) and replayed
	cp --sparse=always "$img" "$SCRATCH/k.img"
	kmount "$SCRATCH/k.img" "$kmnt" "ro,noload" || { fail "N=$n: kernel noload mount"; continue; }
	python3 "$SCRATCH/walk.py" "$kmnt" >"$SCRATCH/noload.walk"
	kumount "$kmnt"
	kmount "$SCRATCH/k.img" "$kmnt" || { fail "N=$n: kernel mount (replay)"; continue; }
	python3 "$SCRATCH/walk.py" "$kmnt" >"$SCRATCH/kernel.walk"
	kumount "$kmnt"
	fsck_clean "$SCRATCH/k.img" "N=$n after the kernel's replay"
	cmp -s "$SCRATCH/noload.walk" "$SCRATCH/kernel.walk" && continue   # nothing left to replay
	mattered=$((mattered + 1))
	chmod 0444 "$img"
	ro_walk "$img" "$SCRATCH/ours.walk" "N=$n" || continue
	compared=$((compared + 1))
	if ! diff "$SCRATCH/kernel.walk" "$SCRATCH/ours.walk" >"$SCRATCH/walk.diff"; then
		fail "N=$n: our ro mount differs from the kernel's replay (< kernel, > ours):"
		head -20 "$SCRATCH/walk.diff" | sed 's/^/    /'
	fi
	chmod 0644 "$img"
	mv "$img" "$SCRATCH/mattered.img"
	cp "$SCRATCH/kernel.walk" "$SCRATCH/mattered.walk"
done
log "write requests $W; $mattered cut points left work in the journal; $compared compared"
[ "$compared" -ge 1 ] || fail "no power-cut point left the journal with work to replay (tried $points)"

# ---- 3: a read-only loop device ----
cp --sparse=always "$base" "$SCRATCH/loop.img"
if dev=$(losetup --find --show --read-only "$SCRATCH/loop.img"); then
	LOOPS+=("$dev")
	if mount_recon "$dev" "$mnt" "ro"; then
		umount_recon "$mnt"
	else
		fail "a read-only loop device does not mount with -o ro"
	fi
	if mount_recon "$dev" "$mnt" "" 2>"$SCRATCH/rw.err"; then
		fail "a read-write mount of a read-only loop device succeeded"
		umount_recon "$mnt"
	else
		grep -q -- '-o ro' "$SCRATCH/rw.err" ||
			fail "rw mount of a read-only loop device: no pointer to -o ro: $(cat "$SCRATCH/rw.err")"
	fi
else
	log "no loop device: read-only loop case not run"
fi

# ---- 4: a normal user who may only read the image (root's, mode 0644) ----
user_case() {
	ensure_test_user
	[ -u "$(command -v fusermount3)" ] || { log "fusermount3 not setuid: user case not run"; return; }
	as_user test -r /dev/fuse -a -w /dev/fuse ||
		{ log "/dev/fuse not usable by $TEST_USER: user case not run"; return; }
	[ -f "$SCRATCH/mattered.img" ] || return
	local dir="$SCRATCH/user" img before pid i
	mkdir -p "$dir/mnt"
	chown "$TEST_UID:$TEST_GID" "$dir/mnt"
	img="$dir/root.img"
	cp "$SCRATCH/mattered.img" "$img"
	chmod 0644 "$img"
	before=$(sha256sum <"$img")
	for mode in ro rw; do
		local opts=(-f)
		# map_root off: the walk compares owners with the kernel's replay
		opts+=(-o map_root=off)
		[ "$mode" = ro ] && opts+=(-o ro)
		setpriv --reuid="$TEST_UID" --regid="$TEST_GID" --clear-groups env HOME="$SCRATCH" \
			"$RECON_FUSE" "${opts[@]}" "$img" "$dir/mnt" \
			>"$SCRATCH/user-$mode.log" 2>&1 &
		pid=$!
		PIDS+=("$pid"); MOUNTS+=("$dir/mnt")
		for ((i = 0; i < 200 * TMUL; i++)); do
			is_mounted "$dir/mnt" && break
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if [ "$mode" = ro ]; then
			if is_mounted "$dir/mnt"; then
				as_user python3 "$SCRATCH/walk.py" "$dir/mnt" >"$SCRATCH/user.walk" 2>&1
				cmp -s "$SCRATCH/user.walk" "$SCRATCH/mattered.walk" ||
					fail "user ro mount: the walk differs from the kernel's replay"
				fusermount3 -u "$dir/mnt"
			else
				fail "a user who may only read the image cannot mount it ro: $(cat "$SCRATCH/user-ro.log")"
			fi
		elif is_mounted "$dir/mnt"; then
			fail "a user who may only read the image mounted it read-write"
			fusermount3 -u "$dir/mnt"
		else
			grep -q -- '-o ro' "$SCRATCH/user-rw.log" ||
				fail "user rw mount: no pointer to -o ro: $(cat "$SCRATCH/user-rw.log")"
		fi
		wait_daemon "$pid" $((60 * TMUL)) || [ "$mode" = rw ] ||
			fail "user ro mount: the daemon exited $RECON_STATUS"
	done
	[ "$(sha256sum <"$img")" = "$before" ] || fail "user mounts wrote to root's image"
}
user_case

# ---- 5: ext4 journals the kernel left ----
kmount4() {
	mkdir -p "$2"
	mount -t ext4 -o "loop${3:+,$3}" "$1" "$2" 2>/dev/null && MOUNTS+=("$2")
}
# kwalk IMG OUT: the kernel's view of IMG (a copy is mounted read-write: the
# kernel replays onto it), walked into OUT; 1 when the kernel refuses it.
kwalk() {
	local img=$1 out=$2 opts=
	cp --sparse=always "$img" "$SCRATCH/kw.img"
	kmount4 "$SCRATCH/kw.img" "$kmnt" "$opts" || return 1
	python3 "$SCRATCH/walk.py" "$kmnt" >"$out"
	kumount "$kmnt"
}
# fsck_walk IMG OUT: the walk after e2fsck's replay of a copy of IMG
# (-E journal_only: the replay and nothing else), through the kernel.
fsck_walk() {
	local img=$1 out=$2
	cp --sparse=always "$img" "$SCRATCH/fw.img"
	e2fsck -y -E journal_only "$SCRATCH/fw.img" >"$SCRATCH/fw.log" 2>&1
	kmount4 "$SCRATCH/fw.img" "$kmnt" ro || return 1
	python3 "$SCRATCH/walk.py" "$kmnt" >"$out"
	kumount "$kmnt"
}
cat >"$SCRATCH/ext4_work.py" <<'EOF'
import fcntl, os, struct, sys
from pylib import pattern
mnt = sys.argv[1]
def write(name, data):
    fd = os.open(os.path.join(mnt, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data)
    os.fsync(fd)
    os.close(fd)
dirs = ("a", "b", "a/deep")
for d in dirs:
    os.mkdir(os.path.join(mnt, d))
names = []
for i in range(60):
    name = "%s/f%d" % (dirs[i % 3], i)
    write(name, pattern("f%d" % i, 700 + 2900 * i))
    names.append(name)
    if i % 7 == 6:
        old = names.pop(0)
        os.rename(os.path.join(mnt, old), os.path.join(mnt, "b/r%d" % i))
    if i % 11 == 10:
        os.unlink(os.path.join(mnt, names.pop(0)))
        os.symlink("../" + names[-1], os.path.join(mnt, "b/s%d" % i))
        os.link(os.path.join(mnt, names[-2]), os.path.join(mnt, "hard%d" % i))
fd = os.open(mnt, os.O_RDONLY)
os.fsync(fd)
# the log committed, then nothing more reaches the disk
EXT4_IOC_SHUTDOWN, LOGFLUSH = 0x8004587D, 1
fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, struct.pack("I", LOGFLUSH))
os.close(fd)
EOF
for bs in 1024 4096; do
	img="$SCRATCH/ext4-$bs.img"
	rm -f "$img"
	truncate -s 64M "$img"
	mke2fs -F -q -t ext4 -b "$bs" "$img" >/dev/null 2>&1 || die "mkfs.ext4 -b $bs"
	kmount4 "$img" "$kmnt" "commit=60" || { log "the kernel does not mount ext4: case 5 not run"; break; }
	python3 "$SCRATCH/ext4_work.py" "$kmnt" || fail "ext4 $bs: the workload failed"
	kumount "$kmnt"
	dumpe2fs -h "$img" 2>/dev/null | grep -q needs_recovery ||
		{ fail "ext4 $bs: the kernel left no journal to recover"; continue; }
	dumpe2fs -h "$img" 2>/dev/null | grep -q 'journal_64bit journal_checksum_v3' ||
		fail "ext4 $bs: the kernel's log is not 64-bit with checksums v3"
	chmod 0444 "$img"
	ro_walk "$img" "$SCRATCH/ours4.walk" "ext4 $bs" || continue
	chmod 0644 "$img"
	grep -q "replayed [1-9][0-9]* journal transaction" "$RECON_LOG" ||
		fail "ext4 $bs: the daemon did not say it replayed: $(cat "$RECON_LOG")"
	[ "$(wc -l <"$SCRATCH/ours4.walk")" -ge 60 ] || fail "ext4 $bs: our walk misses files"
	kwalk "$img" "$SCRATCH/kernel4.walk" || { fail "ext4 $bs: the kernel does not replay it"; continue; }
	fsck_walk "$img" "$SCRATCH/fsck4.walk" || { fail "ext4 $bs: e2fsck's replay does not mount"; continue; }
	for who in kernel fsck; do
		diff "$SCRATCH/${who}4.walk" "$SCRATCH/ours4.walk" >"$SCRATCH/walk.diff" ||
			{ fail "ext4 $bs: our ro walk differs from the $who replay's (< $who, > ours):"
			  head -10 "$SCRATCH/walk.diff" | sed 's/^/    /'; }
	done
	# read-write: the replay written, checked, served; then the walk is the same
	if mount_recon "$img" "$mnt" "" 2>/dev/null; then
		grep -q "read-only" "$RECON_LOG" && fail "ext4 $bs: served read-only: $(head -3 "$RECON_LOG")"
		umount_recon "$mnt"
		fsck_clean "$img" "ext4 $bs after its read-write mount (its replay written)"
	else
		fail "ext4 $bs: read-write refused: $(head -3 "$RECON_LOG")"
	fi
done

# ---- 6: the corpus's journals, our replay against e2fsck's ----
if [ -d "$CORPUS" ]; then
	printf '%-26s %-8s %-10s %-10s\n' image ours e2fsck kernel >"$SCRATCH/table"
	# (f_journal's journal is a visible file that e2fsck moves even with
	# -E journal_only: tests/jbd compares its replay block by block)
	for name in f_jnl_32bit f_jnl_64bit j_corrupt_commit_csum j_corrupt_commit_tid \
		    j_corrupt_descr_csum j_corrupt_descr_tid j_corrupt_journal_block \
		    j_corrupt_revoke_block j_corrupt_revoke_csum j_corrupt_revoke_rcount \
		    j_recover_fast_commit j_corrupt_sb_csum j_corrupt_sb_magic; do
		img="$SCRATCH/$name.img"
		corpus_image "$name" "$img" || continue
		dumpe2fs -h "$img" 2>/dev/null | grep -q needs_recovery || continue
		before=$(sha256sum <"$img")
		ours=refused fsck=refused kern=refused
		if mount_recon "$img" "$mnt" ro 2>/dev/null; then
			python3 "$SCRATCH/walk.py" "$mnt" >"$SCRATCH/ours.walk"
			umount_recon "$mnt"
			ours=mounted
		fi
		[ "$(sha256sum <"$img")" = "$before" ] || fail "$name: the read-only mount wrote"
		if fsck_walk "$img" "$SCRATCH/fsck.walk"; then
			fsck=differs
			[ "$ours" = mounted ] && cmp -s "$SCRATCH/fsck.walk" "$SCRATCH/ours.walk" && fsck=same
		fi
		if kwalk "$img" "$SCRATCH/kern.walk"; then
			kern=differs
			[ "$ours" = mounted ] && cmp -s "$SCRATCH/kern.walk" "$SCRATCH/ours.walk" && kern=same
		fi
		printf '%-26s %-8s %-10s %-10s\n' "$name" "$ours" "$fsck" "$kern" >>"$SCRATCH/table"
		case $name in
		j_corrupt_sb_*)
			[ "$ours" = refused ] || fail "$name: a damaged journal superblock mounted"
			grep -q "journal superblock" "$RECON_LOG" ||
				fail "$name: no reason given: $(cat "$RECON_LOG")"
			;;
		j_recover_fast_commit)
			[ "$ours" = mounted ] || fail "$name: refused read-only: $(cat "$RECON_LOG")"
			grep -q "fast commits after transaction .* were not replayed" "$RECON_LOG" ||
				fail "$name: the daemon does not say the fast commits were not replayed"
			;;
		*)
			[ "$fsck" = same ] || { fail "$name: our ro walk differs from e2fsck's replay:"
				diff "$SCRATCH/fsck.walk" "$SCRATCH/ours.walk" | head -10 | sed 's/^/    /'; }
			;;
		esac
	done
	log "journal images (ours: the ro mount; e2fsck, kernel: their replay's walk against ours):"
	sed 's/^/    /' "$SCRATCH/table"
else
	log "no corpus at $CORPUS: case 6 not run"
fi
finish
