#!/bin/bash
# The daemon out of memory: oom_preload.so (LD_PRELOAD, built with the tests
# only) fails the Nth allocation made after the mount is up (armed by
# SIGUSR2), in the daemon, libext2fs, libfuse or libc, while a workload runs
# create, write, rename, unlink, setxattr, readdir, truncate, fsync and
# fsyncdir.  Each run: the daemon does not crash (exit 0, or 3 when it
# reports changes lost); an operation that fails gets ENOMEM or EIO, or
# EROFS once a commit failed and the daemon turned read-only, or ENOENT for a
# name that failed commit discarded; after the unmount e2fsck -fn is
# clean and every file whose operations all succeeded up to a successful
# fsync reads back as it was fsynced (a 0 from fsync is a promise).
# First a counting run learns K, the allocations the workload makes; then N
# runs over 1..K: every N up to OOM_DENSE, then OOM_RUNS spread evenly.
# Environment: OOM_RUNS (default 24), OOM_DENSE (default 8), OOM_ALL=1 runs
# every N, OOM_NS="N..." runs those (to reproduce a failure).
. "$(dirname "$0")/lib.sh"
need_root
is_asan && skip "the preload replaces malloc, which ASan owns"
preload="$RECON_BUILD/tests/integration/oom_preload.so"
[ -f "$preload" ] || die "no $preload (built with the tests)"
runs=${OOM_RUNS:-24}
dense=${OOM_DENSE:-8}

img="$SCRATCH/oom.img"
base="$SCRATCH/base.img"
mkimg "$base" 1024 32M
mnt="$SCRATCH/mnt"

# workload.py MNT EXPECT: the operations, each checked; writes EXPECT (JSON:
# the files whose operations all succeeded, as last fsynced) and prints
# "failed OP ERRNO" for each operation that failed.
cat >"$SCRATCH/workload.py" <<'EOF'
import errno, json, os, sys
from pylib import pattern, sha
m, expect_path = sys.argv[1], sys.argv[2]
ALLOWED = {errno.ENOMEM, errno.EIO}
bad = []          # operations that failed with something else
failed = []       # (op, errno)
broken = set()    # files an operation on which failed
durable = {}      # path -> (size, sha) as last fsynced with 0
content = {}      # path -> bytes as the successful operations left it

discarded = False  # a commit failed: changes since the last durable one are gone

def op(name, path, fn, *args):
    global discarded
    try:
        return True, fn(*args)
    except OSError as e:
        failed.append((name, e.errno))
        # EROFS: a commit failed (perhaps the timer's, not ours) and the
        # daemon turned read-only; ENOENT: a name made since the last
        # durable commit was discarded with it
        # (ENOTDIR: a directory discarded with it, still in the kernel's
        # cache, names an inode that is no longer a directory)
        allowed = ALLOWED | {errno.EROFS} | ({errno.ENOENT, errno.ENOTDIR} if discarded else set())
        if e.errno == errno.EROFS or e.errno == errno.EIO or name in ("fsync", "fsyncdir"):
            discarded = True
        if e.errno not in allowed:
            bad.append("%s %s: %s" % (name, path, os.strerror(e.errno)))
        if path:
            broken.add(path)
        return False, None

def close(path, fd):
    # close() returns the FLUSH request's error (the mount's first close
    # sends one; a failed allocation in libfuse answers ENOMEM); the
    # descriptor is closed either way and what was written stays as it was
    try:
        os.close(fd)
    except OSError as e:
        failed.append(("close", e.errno))
        if e.errno not in ALLOWED:
            bad.append("close %s: %s" % (path, os.strerror(e.errno)))

def make(path, data):
    ok, fd = op("create", path, os.open, path, os.O_CREAT | os.O_RDWR, 0o644)
    if not ok:
        return None
    content[path] = b""
    ok, n = op("write", path, os.write, fd, data)
    if ok and n == len(data):
        content[path] = data
    elif ok:
        broken.add(path)      # a short write: what is there is not known
    return fd

def sync(path, fd):
    ok, _ = op("fsync", path, os.fsync, fd)
    if ok and path not in broken:
        durable[path] = content[path]

with open(expect_path, "w") as f:    # nothing promised until an fsync returns 0
    json.dump({}, f)
# the mount's root looked up by chdir may be the allocation that fails
ok, _ = op("chdir", m, os.chdir, m)
if ok:
    ok, _ = op("mkdir", "d", os.mkdir, "d")
if ok:
    a = make("d/a", pattern("a", 9000))
    if a is not None:
        sync("d/a", a)
        close("d/a", a)
    b = make("d/b", pattern("b", 3000))
    if b is not None:
        ok, _ = op("setxattr", "d/b", os.setxattr, "d/b", "user.colour", b"blue" * 20)
        sync("d/b", b)
        close("d/b", b)
        ok, _ = op("rename", "d/b", os.rename, "d/b", "d/c")
        if ok:
            durable.pop("d/b", None)
            if "d/b" in content:
                content["d/c"] = content.pop("d/b")
            if "d/b" in broken:
                broken.add("d/c")
            ok, dfd = op("open-dir", "d", os.open, "d", os.O_RDONLY)
            if ok:
                ok, _ = op("fsyncdir", "d", os.fsync, dfd)
                if ok and "d/c" in content and "d/c" not in broken:
                    durable["d/c"] = content["d/c"]
                close("d", dfd)
    for i in range(24):
        fd = make("d/f%02d" % i, pattern("f%d" % i, 100 + 37 * i))
        if fd is not None:
            close("d/f%02d" % i, fd)
    e = make("d/e", pattern("e", 2000))
    if e is not None:
        close("d/e", e)
        op("unlink", "d/e", os.unlink, "d/e")
    op("readdir", "d", os.listdir, "d")
    t = make("d/t", pattern("t", 20000))
    if t is not None:
        sync("d/t", t)
        ok, _ = op("truncate", "d/t", os.ftruncate, t, 3000)
        if ok:
            durable.pop("d/t", None)
            content["d/t"] = content["d/t"][:3000]
            sync("d/t", t)
        close("d/t", t)
    ok, rfd = op("open-dir", ".", os.open, ".", os.O_RDONLY)
    if ok:
        op("fsyncdir", ".", os.fsync, rfd)
        close(".", rfd)

for name, err in failed:
    print("failed %s %s" % (name, errno.errorcode.get(err, err)))
for b_ in bad:
    print("BAD %s" % b_)
with open(expect_path, "w") as f:
    json.dump({p: [len(d), sha(d)] for p, d in durable.items() if p not in broken}, f)
sys.exit(1 if bad else 0)
EOF

# readback IMG EXPECT: each file of EXPECT, read from the image with debugfs,
# has the size and digest it was fsynced with.
cat >"$SCRATCH/readback.py" <<'EOF'
import json, subprocess, sys
from pylib import sha
img, expect = sys.argv[1], json.load(open(sys.argv[2]))
bad = 0
for path, (size, digest) in sorted(expect.items()):
    data = subprocess.run(["debugfs", "-R", "cat /" + path, img], capture_output=True).stdout
    if len(data) != size or sha(data) != digest:
        print("fsynced %s reads back as %d bytes (want %d, digest %s)" % (
            path, len(data), size, "same" if sha(data) == digest else "differs"))
        bad = 1
sys.exit(bad)
EOF

# libext2fs_abort LOG: the daemon aborted in libext2fs because libext2fs
# failed an allocation of its own: its rb-tree bitmaps (the mount's choice,
# for memory on large disks) mark and unmark blocks through calls that cannot
# return an error, and abort() when they cannot allocate.  The daemon cannot
# catch that; what it must still keep is what a power cut keeps (a clean
# image, every fsynced file), and that is checked.
libext2fs_abort() {
	awk '/^fired /   { f = NR }
	     f && NR == f + 3 && /libext2fs\.so/ { alloc = 1 }
	     /^signal 6 / { s = NR }
	     s && NR > s && !seen && !/oom_preload\.so|libc\.so/ { seen = 1; if (/libext2fs\.so/) ab = 1 }
	     END { exit !(alloc && ab) }' "$1"
}

# one_run N: mount with the preload (N = 0 counts), arm, run the workload,
# unmount, check.  Sets CALLS from a counting run.
one_run() {
	local n=$1 log="$SCRATCH/oom-$1.log" out="$SCRATCH/workload-$1.out" rc=0
	cp --sparse=always "$base" "$img"
	rm -f "$log"
	RECON_OOM_NTH=$n RECON_OOM_LOG=$log LD_PRELOAD=$preload mount_recon "$img" "$mnt" \
		|| { fail "N=$n: the mount failed"; return 1; }
	kill -USR2 "$RECON_PID"
	timeout 60 python3 "$SCRATCH/workload.py" "$mnt" "$SCRATCH/expect.json" >"$out" 2>&1 || rc=$?
	# the daemon's exit: 0, or 3 when it reports a commit it could not make
	# (umount_recon wants one status; either is right here)
	local pid=$RECON_PID
	RECON_PID=
	fusermount3 -u "$mnt" 2>/dev/null || { sleep 1; fusermount3 -u "$mnt" 2>/dev/null; } \
		|| { fail "N=$n: fusermount3 -u failed"; fusermount3 -uz "$mnt" 2>/dev/null; }
	wait_daemon "$pid" $((60 * TMUL))
	local fired
	fired=$(sed -n 's/^fired \([0-9]*\) \([0-9]*\)$/malloc #\1 (\2 bytes)/p' "$log" 2>/dev/null)
	if [ "$RECON_STATUS" = 134 ] && libext2fs_abort "$log"; then
		log "N=$n ($fired): libext2fs aborted on its own failed allocation (a power cut for the image)"
		rc=0    # the workload lost its mount, as it would at a power cut
	elif [ "$RECON_STATUS" != 0 ] && [ "$RECON_STATUS" != 3 ]; then
		fail "N=$n ($fired): the daemon exited with $RECON_STATUS"
		sed 's/^/    /' "$RECON_LOG" | tail -15
		sed 's/^/    /' "$log" | head -30
	fi
	if [ "$rc" -ne 0 ]; then
		fail "N=$n ($fired): the workload saw an error other than ENOMEM/EIO (exit $rc)"
		sed 's/^/    /' "$out"
	fi
	# a daemon that exited 3 or aborted left the image as a power cut
	# would (a journal to replay, orphans to release): recovered first by
	# our mount, as any later mount recovers it
	if [ "$RECON_STATUS" = 0 ]; then
		dumpe2fs -h "$img" 2>/dev/null | grep -q '^Filesystem features:.*needs_recovery' &&
			fail "N=$n ($fired): a clean unmount left the journal to recover"
		[ -z "$(first_orphan "$img")" ] || fail "N=$n ($fired): a clean unmount left orphans"
	elif mount_recon "$img" "$mnt"; then
		umount_recon "$mnt"
		[ -z "$(first_orphan "$img")" ] || fail "N=$n ($fired): orphans left after our recovery"
	else
		fail "N=$n ($fired): our mount refused the image after the failure"
	fi
	fsck_clean "$img" "the image after N=$n ($fired)" || sed 's/^/    /' "$log" | head -30
	python3 "$SCRATCH/readback.py" "$img" "$SCRATCH/expect.json" \
		|| { fail "N=$n ($fired): fsynced data did not read back"; sed 's/^/    /' "$out"; }
	[ "$n" = 0 ] && CALLS=$(sed -n "s/^calls \([0-9]*\) .*/\1/p" "$log" | sort -n | tail -n 1)
	[ -n "$fired" ] && [ -s "$out" ] && log "N=$n $fired: $(grep -c '^failed' "$out") operation(s) failed"
	return 0
}

CALLS=
one_run 0
[ -n "$CALLS" ] && [ "$CALLS" -gt 0 ] || die "the counting run counted no allocations (preload not armed?)"
log "the workload makes $CALLS allocations in the daemon"
if [ -n "${OOM_NS:-}" ]; then
	ns=$OOM_NS
elif [ "${OOM_ALL:-0}" = 1 ]; then
	ns=$(seq 1 "$CALLS")
else
	ns=$( { seq 1 "$dense"; for ((i = 1; i <= runs; i++)); do
		echo $(( dense + (CALLS - dense) * i / runs )); done; } | sort -nu)
fi
for n in $ns; do
	one_run "$n"
done
finish
