#!/bin/bash
# A 0 from fsync is a promise: after a rejected commit (-o fault_corrupt) the
# changes of the discarded transaction are gone, so fsync, fdatasync and
# fsyncdir of what they touched must fail (EIO first, as Linux reports lost
# writeback, then EROFS), never 0; what was durable before may still fsync 0.
# Writes after the failure get EROFS.  The daemon exits 3 (RFS_EXIT_LOST)
# with a message, on fusermount -u and on SIGTERM, and the cache-invalidation
# thread is joined before the FUSE channel closes (no "writing device" error
# from a descriptor already closed).  e2fsck -fn is clean and the durable
# file reads back; the discarded ones do not exist.  A failed write of file
# data is reported to the file's next fsync.
# Environment: FSYNC_FAILURE_RUNS (default 4): runs that unmount (fusermount -u,
# SIGTERM) right after a rejection, while the notifier is busy.
. "$(dirname "$0")/lib.sh"
fs_from_arg "$@"
need_root
runs=${FSYNC_FAILURE_RUNS:-4}

base="$SCRATCH/base.img"
mkimg "$base" 1024 64M
mnt="$SCRATCH/mnt"

# scenario.py MNT NFILES full|quick: A is fsynced (transaction 1); many files are made
# and looked up so the kernel knows them (the notifier has work at the
# rejection); B and C are created and written; fsync B commits transaction
# 2, which fault_corrupt=links@2 corrupts.
cat >"$SCRATCH/scenario.py" <<'EOF'
import errno, os, sys
from pylib import Checker, pattern
m, nfiles, quick = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "quick"
c = Checker("fsync_failure")
os.chdir(m)
os.mkdir("d")
fa = os.open("A", os.O_CREAT | os.O_RDWR, 0o644)
os.write(fa, pattern("A", 5000))
os.fsync(fa)
fd_d = os.open("d", os.O_RDONLY)
os.fsync(fd_d)
# transaction 2: many names, then B and C
os.mkdir("many")
for i in range(nfiles):
    os.close(os.open("many/f%d" % i, os.O_CREAT | os.O_WRONLY, 0o644))
for i in range(nfiles):
    os.stat("many/f%d" % i)
fb = os.open("B", os.O_CREAT | os.O_RDWR, 0o644)
fc = os.open("C", os.O_CREAT | os.O_RDWR, 0o644)
os.write(fb, pattern("B", 3000))
os.write(fc, pattern("C", 3000))
fc2 = os.open("C", os.O_RDONLY)
fdr = os.open(".", os.O_RDONLY)
c.errno(errno.EIO, os.fsync, fb)            # the commit is rejected
if quick:          # unmount while the notifier is still busy
    sys.exit(0)
c.errno(errno.EROFS, os.fsync, fb)          # reported once, then read-only
c.errno(errno.EIO, os.fdatasync, fc)        # C's changes were discarded too
c.errno(errno.EROFS, os.fsync, fc)
c.errno(errno.EROFS, os.fsync, fc2)
c.errno(errno.EIO, os.fsync, fdr)           # the root's new names are gone
c.errno(errno.EROFS, os.fsync, fdr)
c.succeeds(os.fsync, fa)                    # A was durable before the failure
c.succeeds(os.fdatasync, fa)
c.succeeds(os.fsync, fd_d)                  # and so was d
c.errno(errno.EROFS, os.write, fa, b"more")
c.errno(errno.EROFS, os.pwrite, fa, b"more", 0)
c.errno(errno.EROFS, os.mkdir, "e")
for fd in (fa, fb, fc, fc2, fdr, fd_d):
    c.succeeds(os.close, fd)
c.done()
EOF

# verify.py MNT: A intact, B and C gone.
cat >"$SCRATCH/verify.py" <<'EOF'
import os, sys
from pylib import Checker, pattern
m = sys.argv[1]
c = Checker("fsync_failure-verify")
c.eq(open(m + "/A", "rb").read(), pattern("A", 5000), "A, fsynced before the failure, reads back")
c.ok(os.path.isdir(m + "/d"), "d exists")
for n in ("B", "C", "many"):
    c.ok(not os.path.exists(m + "/" + n), "%s, discarded, does not exist" % n)
c.done()
EOF

# run_once WHAT NFILES full|quick HOW: one rejected run ended by HOW (umount
# or term); quick ends right after the rejection.
run_once() {
	local what=$1 nfiles=$2 mode=$3 how=$4 img="$SCRATCH/f.img" pid
	cp --sparse=always "$base" "$img"
	mount_recon "$img" "$mnt" "fault_corrupt=links@2,commit_interval_ms=0" || { fail "$what: mount"; return; }
	pid=$RECON_PID
	timeout -s KILL $((120 * TMUL)) python3 "$SCRATCH/scenario.py" "$mnt" "$nfiles" "$mode" ||
		fail "$what: scenario"
	case $how in
	umount) fusermount3 -u "$mnt" || fail "$what: fusermount3 -u";;
	term) kill -TERM "$pid";;
	esac
	RECON_PID=
	wait_daemon "$pid" $((60 * TMUL))
	[ "$RECON_STATUS" -eq 3 ] ||
		{ fail "$what: exit status $RECON_STATUS, want 3 (changes were lost)"; tail -5 "$RECON_LOG"; }
	grep -q "changes since the last durable commit were discarded" "$RECON_LOG" ||
		fail "$what: no message at exit about the discarded changes"
	if grep -m3 -E "writing device|AddressSanitizer|runtime error:" "$RECON_LOG"; then
		fail "$what: the daemon wrote to the FUSE channel after it closed, or crashed"
	fi
	is_mounted "$mnt" && fusermount3 -uz "$mnt"
	fsck_clean "$img" "$what"
	mount_recon "$img" "$mnt" "ro" || { fail "$what: ro mount"; return; }
	python3 "$SCRATCH/verify.py" "$mnt" || fail "$what: contents after the run"
	umount_recon "$mnt"
}

# A device error on file data (fault_data_eio=3: the third data write fails,
# nothing of it written).  The write gets EIO and is undone (an append leaves
# size and blocks as they were); the file's next fsync reports EIO, once, as
# Linux reports failed writeback; another file's fsync is not touched; the
# file system stays writable, e2fsck -fn is clean, the data written before
# and after reads back.
cat >"$SCRATCH/data_eio.py" <<'EOF2'
import errno, os, sys
from pylib import Checker, pattern
m, bs = sys.argv[1], int(sys.argv[2])
c = Checker("fsync_failure-data_eio")
os.chdir(m)
fx = os.open("X", os.O_CREAT | os.O_RDWR, 0o644)
fy = os.open("Y", os.O_CREAT | os.O_RDWR, 0o644)
os.write(fx, pattern("X", 3 * bs))          # data write 1
os.write(fy, pattern("Y", bs))              # data write 2
c.succeeds(os.fsync, fx)
c.succeeds(os.fsync, fy)
before = os.fstat(fx)
c.errno(errno.EIO, os.pwrite, fx, b"z" * bs, 3 * bs)   # data write 3 fails
after = os.fstat(fx)
c.eq([after.st_size, after.st_blocks], [before.st_size, before.st_blocks],
     "the failed append is undone (size, blocks)")
c.succeeds(os.fsync, fy)                    # Y's data was never touched
c.errno(errno.EIO, os.fsync, fx)            # the failure is reported to fsync
c.succeeds(os.fsync, fx)                    # once
c.eq(os.pwrite(fx, b"w" * bs, 3 * bs), bs, "the file system stays writable")
c.succeeds(os.fdatasync, fx)
c.eq(os.pread(fx, 4 * bs, 0), pattern("X", 3 * bs) + b"w" * bs, "X reads back")
os.close(fx)
os.close(fy)
c.done()
EOF2
img="$SCRATCH/eio.img"
cp --sparse=always "$base" "$img"
if mount_recon "$img" "$mnt" "fault_data_eio=3"; then
	pid=$RECON_PID
	timeout -s KILL $((60 * TMUL)) python3 "$SCRATCH/data_eio.py" "$mnt" 1024 ||
		fail "data_eio: scenario"
	fusermount3 -u "$mnt" || fail "data_eio: fusermount3 -u"
	RECON_PID=
	wait_daemon "$pid" $((60 * TMUL))
	[ "$RECON_STATUS" -eq 0 ] || fail "data_eio: exit status $RECON_STATUS, want 0 (nothing lost that was not reported)"
	fsck_clean "$img" "data_eio"
else
	fail "data_eio: mount"
fi

run_once "full" 1500 full umount
run_once "full, SIGTERM" 1500 full term
for ((i = 1; i <= runs; i++)); do
	run_once "quick $i" 3000 quick umount
	run_once "quick $i, SIGTERM" 3000 quick term
done
finish
