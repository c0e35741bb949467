#!/bin/bash
# Releases and truncates that span commits, and the orphan list at unmount.
# Every commit the checker sees must be consistent: an inode whose release
# takes several transactions is on the orphan list from the one that makes
# it unreachable; a step of a punch fits the room a transaction has, and one
# that does not commits and goes on; a clean unmount leaves no orphans.
#  1. a write 32 GiB into a file on a 4 GiB image, then rm at once (as
#     xfstests generic/490), and truncates of such files; with the default
#     transactions and with -o max_transaction_blocks=16, where the release
#     of a file with hundreds of indirect blocks spans many commits
#  2. unlinks and rmdirs while the open transaction is a few blocks from its
#     limit (commit_interval_ms=0 and the largest max_transaction_blocks on
#     a 1 MiB journal: the transaction fills to the journal's limit)
#  3. rm -r of a tree of large directories with -o max_transaction_blocks=16
#     and 32
#  4. 10,000 files opened and unlinked while open, the holder exits and the
#     unmount follows at once (as xfstests generic/488): no orphan left and
#     e2fsck -fn clean; with a kill -9 instead, the next mount frees them
#  5. a power cut (fault_crash_after) at points inside a release and a
#     truncate (16 MiB to 1 MB) that span commits (max_transaction_blocks=16):
#     our mount and the kernel's recover a consistent image, the truncated
#     file has its old size or its new one
# Each ends with the daemon's exit status 0 and e2fsck -fn clean.
# With the argument ext4: mkfs.ext4's defaults, so the releases free extent
# trees (6000 scattered blocks: a depth-2 tree, also one preallocated past
# i_size; the cut's two files written in turns: thousands of extents), and
# the kernel's ext4 recovers the power cuts (4 of them; ext3 8).
. "$(dirname "$0")/lib.sh"
fs_from_arg "$@"
need_root
[ "$FS_TYPE" = ext4 ] && need_kernel_ext4
mnt="$SCRATCH/mnt"

# far.py MNT NAME SPREAD: a block at 32 GiB (past the end of the 4 GiB image)
# and, with SPREAD n, n more blocks 4 MiB apart (a single-indirect block each)
cat >"$SCRATCH/far.py" <<'EOF'
import os, sys
m, name, spread = sys.argv[1], sys.argv[2], int(sys.argv[3])
fd = os.open(os.path.join(m, name), os.O_CREAT | os.O_WRONLY, 0o644)
os.pwrite(fd, b"far" * 1365, 34372386816)
for i in range(spread):
    os.pwrite(fd, b"%06d" % i, i << 22)
os.close(fd)
EOF

# 1. far writes, then rm or truncate at once; on ext4 6000 blocks 4 MiB
# apart (a two-level extent tree of 18 leaves) for releases that span commits
if [ "$FS_TYPE" = ext4 ]; then spread=6000; else spread=300; fi
img="$SCRATCH/far.img"
mkimg "$img" 4096 4G
base_free=$(free_blocks "$img")
for opts in "" "max_transaction_blocks=16"; do
	what="far write${opts:+ ($opts)}"
	mount_recon "$img" "$mnt" "stats=$SCRATCH/far.json${opts:+,$opts}" || die "mount ($what)"
	python3 "$SCRATCH/far.py" "$mnt" f 0 && rm "$mnt/f" || fail "$what: write far, rm"
	python3 "$SCRATCH/far.py" "$mnt" g "$spread" && rm "$mnt/g" || fail "$what: $spread scattered blocks, rm"
	python3 "$SCRATCH/far.py" "$mnt" h "$spread" && truncate -s 5000000 "$mnt/h" ||
		fail "$what: $spread scattered blocks, truncate"
	[ "$(stat -c %s "$mnt/h")" = 5000000 ] || fail "$what: size after the truncate"
	python3 "$SCRATCH/far.py" "$mnt" i "$spread" && truncate -s 0 "$mnt/i" && rm "$mnt/h" "$mnt/i" ||
		fail "$what: truncate to 0"
	if [ "$FS_TYPE" = ext4 ]; then
		# the same blocks preallocated past the size (FALLOC_FL_KEEP_SIZE):
		# a tree entirely beyond i_size, released by the rm
		python3 -c '
import os, sys; from pylib import fallocate
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644)
for i in range(int(sys.argv[2])):
    fallocate(fd, 1, i << 22, 4096)
os.close(fd)' "$mnt/k" "$spread" && [ "$(stat -c %s "$mnt/k")" = 0 ] && rm "$mnt/k" ||
			fail "$what: $spread blocks preallocated past the size, rm"
	fi
	umount_recon "$mnt"
	fsck_clean "$img" "$what"
	[ "$(free_blocks "$img")" = "$base_free" ] ||
		fail "$what: $(free_blocks "$img") blocks free, $base_free before"
	[ -z "$(first_orphan "$img")" ] || fail "$what: orphans left"
	if [ -n "$opts" ]; then
		n=$(stat_of "$SCRATCH/far.json" transactions)
		[ "${n:-0}" -ge 20 ] || fail "$what: $n transactions (the releases did not span commits)"
	fi
done
rm -f "$img"

# 2. unlinks and rmdirs with the transaction at its limit
img="$SCRATCH/full.img"
mkimg "$img" 1024 256M -J size=1
mount_recon "$img" "$mnt" "commit_interval_ms=0,max_transaction_blocks=1000000" ||
	die "mount (full transactions)"
(
	cd "$mnt" || exit 1
	for ((i = 1; i <= 1500; i++)); do
		mkdir "d$i" && echo x >"d$i/f" && rm "d$i/f" || exit 1
		if ((i % 3 == 0)); then rmdir "d$((i - 1))" || exit 1; fi
	done
) || fail "unlink and rmdir with full transactions"
umount_recon "$mnt"
fsck_clean "$img" "unlink and rmdir with full transactions"
rm -f "$img"

# 3. rm -r of large directories with tiny transactions
img="$SCRATCH/tiny.img"
mkimg "$img" 1024 64M
for mtb in 16 32; do
	mount_recon "$img" "$mnt" "max_transaction_blocks=$mtb" || die "mount (max_transaction_blocks=$mtb)"
	python3 - "$mnt" <<'EOF' || fail "large directories (max_transaction_blocks=$mtb)"
import os, sys
m = sys.argv[1]
for d in range(3):
    p = os.path.join(m, "t", "d%d" % d)
    os.makedirs(p)
    for i in range(800):
        open(os.path.join(p, "a-rather-long-name-%04d" % i), "w").close()
for i in range(800):
    os.unlink(os.path.join(m, "t", "d0", "a-rather-long-name-%04d" % i))
os.rmdir(os.path.join(m, "t", "d0"))
EOF
	rm -r "$mnt/t" || fail "rm -r (max_transaction_blocks=$mtb)"
	umount_recon "$mnt"
	fsck_clean "$img" "rm -r of large directories (max_transaction_blocks=$mtb)"
done
rm -f "$img"

# 4. many files unlinked while open, then an immediate unmount
cat >"$SCRATCH/open_unlink.py" <<'EOF'
import os, resource, sys, time
m, n, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3]
resource.setrlimit(resource.RLIMIT_NOFILE, (n + 64, n + 64))
fds = []
for i in range(n):
    p = os.path.join(m, "u%d" % i)
    fds.append(os.open(p, os.O_CREAT | os.O_RDWR, 0o644))
    if i % 10 == 0:
        os.write(fds[-1], b"u" * 3000)
    os.unlink(p)
if ready != "-":
    fd = os.open(m, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)          # the unlinks and the orphan list committed
    open(ready, "w").close()
    time.sleep(600)
EOF
img="$SCRATCH/many.img"
mkimg "$img" 1024 128M -N 16384
base_free=$(free_blocks "$img")
mount_recon "$img" "$mnt" || die "mount (open unlinked)"
t0=$(date +%s)
python3 "$SCRATCH/open_unlink.py" "$mnt" 10000 - || fail "10,000 open unlinked files"
umount_recon "$mnt"
t1=$(date +%s)
log "10,000 open unlinked files, exit and unmount: $((t1 - t0)) s"
[ $((t1 - t0)) -le $((30 * TMUL)) ] || fail "10,000 open unlinked files took $((t1 - t0)) s"
[ -z "$(first_orphan "$img")" ] || fail "the unmount left orphans (first $(first_orphan "$img"))"
fsck_clean "$img" "10,000 files unlinked while open, then an immediate unmount"
[ "$(free_blocks "$img")" = "$base_free" ] || fail "open unlinked: $(free_blocks "$img") free, $base_free before"

# the same with a kill -9 while they are open: the next mount frees them
mount_recon "$img" "$mnt" || die "mount (open unlinked, kill)"
daemon=$RECON_PID
rm -f "$SCRATCH/ready"
python3 "$SCRATCH/open_unlink.py" "$mnt" 10000 "$SCRATCH/ready" &
holder=$!
for ((i = 0; i < 600; i++)); do [ -e "$SCRATCH/ready" ] && break; sleep 0.1; done
[ -e "$SCRATCH/ready" ] || fail "the holder of 10,000 unlinked files did not get ready"
kill -9 "$daemon"; wait "$daemon" 2>/dev/null; forget_pid "$daemon"; RECON_PID=
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
fusermount3 -uz "$mnt" 2>/dev/null
[ -n "$(first_orphan "$img")" ] || dumpe2fs -h "$img" 2>/dev/null | grep -q needs_recovery ||
	fail "after the kill: no orphan list and no journal to replay"
mount_recon "$img" "$mnt" || die "mount after the kill with open unlinked files"
grep -q "processed 10000 orphan" "$RECON_LOG" || fail "the mount after the kill: $(grep orphan "$RECON_LOG")"
umount_recon "$mnt"
fsck_clean "$img" "10,000 open unlinked files, kill -9, remount"
[ -z "$(first_orphan "$img")" ] || fail "orphans left after the remount"
[ "$(free_blocks "$img")" = "$base_free" ] || fail "kill: $(free_blocks "$img") free, $base_free before"
rm -f "$img"

# 5. power cuts inside a release and a truncate that span commits
cut_truncate_unlink_scripts orphan_span big $((16 << 20)) $((12 << 20))
base="$SCRATCH/cutbase.img"
mkimg "$base" 1024 64M -J size=1
mount_recon "$base" "$mnt" || die "mount (cut base)"
# on ext4 the two files are written in turns, 8 KiB at a time: thousands of
# extents in dozens of leaves, so that their releases span commits (whole,
# each is a handful of extents freed in one transaction)
if [ "$FS_TYPE" = ext4 ]; then chunk=8192; else chunk=$((16 << 20)); fi
python3 -c '
import sys; from pylib import pattern
m, chunk = sys.argv[1], int(sys.argv[2])
files = [(open(m + "/" + n, "wb"), pattern(n, size)) for n, size in (("trunc", 16 << 20), ("big", 12 << 20))]
for off in range(0, 16 << 20, chunk):
    for f, data in files:
        f.write(data[off:off + chunk])
for f, data in files:
    f.close()' "$mnt" "$chunk" || fail "cut base files"
umount_recon "$mnt"
cutopts="deterministic,max_transaction_blocks=16"
cut_clean_run "$base" "$cutopts" "$SCRATCH/cut.py"
[ "${CUT_TRANSACTIONS:-0}" -ge 10 ] ||
	fail "the cut workload's releases took $CUT_TRANSACTIONS transactions, want many"
if [ "$FS_TYPE" = ext4 ]; then cuts=${ORPHAN_SPAN_CUTS:-4}; else cuts=${ORPHAN_SPAN_CUTS:-8}; fi
cut_sweep "$base" "$cuts" "$cutopts" "" "$FS_TYPE" "$SCRATCH/cut.py" "$SCRATCH/cut_check.py"
finish
