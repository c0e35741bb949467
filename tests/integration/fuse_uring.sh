#!/bin/bash
# FUSE requests over io_uring (-o fuse_uring): with the kernel's fuse module
# parameter enable_uring set to Y for the test (and restored after), a mount
# with fuse_uring=on serves a mixed workload run from every CPU at once
# (create, write, read, rename, link, unlink, xattrs, a readdir of 1,000
# entries, an 8 MiB write and read), unmounts with daemon exit 0 and a count
# of requests served over the ring, and e2fsck -fn is clean; a second mount
# reads everything back.  Then the ways a daemon ends while requests are in
# flight: SIGTERM, and on_violation=stop after a rejected commit (exit 2), each
# without a hang.  Then fuse_uring=auto takes the ring (one io_uring per CPU
# more than fuse_uring=off), and with the parameter N fuse_uring=on refuses to
# mount while auto serves through /dev/fuse.  Skipped (77) when the parameter
# cannot be set (a kernel without FUSE over io_uring, or not root).
. "$(dirname "$0")/lib.sh"
need_root
take_uring_param
param=$URING_PARAM

ncpu=$(nproc)
img="$SCRATCH/uring.img" mnt="$SCRATCH/mnt"

# io_uring instances the daemon holds (its own I/O manager has some too)
uring_fds() { ls -l "/proc/$1/fd" 2>/dev/null | grep -c 'io_uring'; }

# workload.py MNT DIR MANIFEST: the mixed workload in MNT/DIR; writes the
# expected contents (path -> sha256) to MANIFEST.
cat >"$SCRATCH/workload.py" <<'EOF'
import errno, json, os, sys
from pylib import Checker, pattern, sha
mnt, sub, manifest = sys.argv[1:4]
c = Checker("fuse_uring " + sub)
os.chdir(mnt)
os.mkdir(sub)
os.chdir(sub)
files = {}
for i in range(50):
    data = pattern("%s.%d" % (sub, i), 100 + i * 997)
    with open("f%d" % i, "wb") as f:
        f.write(data)
    files["f%d" % i] = data
for i in range(0, 50, 5):
    c.eq(open("f%d" % i, "rb").read(), files["f%d" % i], "read back f%d" % i)
# rename, link, unlink, symlink, truncate
os.rename("f1", "g1"); files["g1"] = files.pop("f1")
os.link("f2", "h2"); files["h2"] = files["f2"]
c.eq(os.stat("f2").st_nlink, 2, "link count after link")
os.unlink("f3"); files.pop("f3")
c.errno(errno.ENOENT, os.stat, "f3")
os.symlink("f4", "s4")
c.eq(os.readlink("s4"), "f4", "readlink")
os.truncate("f5", 10); files["f5"] = files["f5"][:10]
# xattrs
os.setxattr("f6", "user.one", b"1" * 100)
os.setxattr("f6", "user.two", b"2" * 3000)
c.eq(os.getxattr("f6", "user.two"), b"2" * 3000, "getxattr")
c.eq(sorted(os.listxattr("f6")), ["user.one", "user.two"], "listxattr")
os.removexattr("f6", "user.one")
c.errno(errno.ENODATA, os.getxattr, "f6", "user.one")
# a directory of 1,000 entries, read back by readdir
os.mkdir("many")
for i in range(1000):
    open("many/e%04d" % i, "wb").close()
c.eq(sorted(os.listdir("many")), ["e%04d" % i for i in range(1000)], "readdir of 1,000 entries")
for i in range(0, 1000, 2):
    os.unlink("many/e%04d" % i)
c.eq(len(os.listdir("many")), 500, "readdir after unlinking half")
# 8 MiB written in 1 MiB writes, fsynced, read back in one read
big = pattern(sub + ".big", 8 << 20)
with open("big", "wb") as f:
    for off in range(0, len(big), 1 << 20):
        f.write(big[off:off + (1 << 20)])
    f.flush()
    os.fsync(f.fileno())
files["big"] = big
fd = os.open("big", os.O_RDONLY)
c.eq(sha(os.pread(fd, len(big) + 1, 0)), sha(big), "8 MiB read back")
c.eq(sha(os.pread(fd, 1 << 20, 3 << 20)), sha(big[3 << 20:4 << 20]), "1 MiB at 3 MiB")
os.close(fd)
os.sync()
with open(manifest, "w") as f:
    json.dump({os.path.join(sub, k): sha(v) for k, v in files.items()}, f)
c.done()
EOF

# verify.py MNT MANIFEST...: every file of the manifests has its content.
cat >"$SCRATCH/verify.py" <<'EOF'
import json, os, sys
from pylib import Checker, sha
c = Checker("fuse_uring verify")
for m in sys.argv[2:]:
    for path, digest in json.load(open(m)).items():
        c.eq(sha(open(os.path.join(sys.argv[1], path), "rb").read()), digest, path)
c.done()
EOF

log "mixed workload from $ncpu CPU(s) at once, fuse_uring=on"
mkimg "$img" 4096 128M
mount_recon "$img" "$mnt" fuse_uring=on || die "mount with fuse_uring=on"
wpids=()
for ((cpu = 0; cpu < ncpu; cpu++)); do
	taskset -c "$cpu" python3 "$SCRATCH/workload.py" "$mnt" "cpu$cpu" "$SCRATCH/manifest$cpu" &
	wpids+=($!)
done
for p in "${wpids[@]}"; do wait "$p" || fail "workload (pid $p)"; done
umount_recon "$mnt"
grep -q "FUSE over io_uring: $ncpu queues" "$RECON_LOG" ||
	fail "no '$ncpu queues' line in the daemon's log: $(cat "$RECON_LOG")"
served=$(sed -n 's/.*FUSE over io_uring: \([0-9]*\) requests served.*/\1/p' "$RECON_LOG")
[ -n "$served" ] && [ "$served" -ge $((3000 * ncpu)) ] ||
	fail "requests served over io_uring: '${served}' (expected >= $((3000 * ncpu)))"
log "served over io_uring: $served requests"
fsck_clean "$img" "after the workload"
mount_recon "$img" "$mnt" fuse_uring=on || die "second mount"
check "contents after a remount" python3 "$SCRATCH/verify.py" "$mnt" "$SCRATCH"/manifest*
umount_recon "$mnt"
fsck_clean "$img" "after the remount"

# busy.sh MNT: creates and stats until the mount goes away.
cat >"$SCRATCH/busy.sh" <<'EOF'
mkdir -p "$1/busy" 2>/dev/null
i=0
while [ -d "$1/busy" ]; do
	: >"$1/busy/x$((i % 200))" 2>/dev/null
	stat "$1/busy" >/dev/null 2>&1
	i=$((i + 1))
done
EOF
log "SIGTERM while requests are in flight"
mount_recon "$img" "$mnt" fuse_uring=on || die "mount for SIGTERM"
pid=$RECON_PID
bpids=()
for ((cpu = 0; cpu < ncpu; cpu++)); do
	taskset -c "$cpu" bash "$SCRATCH/busy.sh" "$mnt" & bpids+=($!)
done
sleep 1
kill -TERM "$pid"
RECON_PID=
if ! wait_daemon "$pid" $((30 * TMUL)); then
	fail "daemon after SIGTERM: status $RECON_STATUS (124: hung, killed)"
	tail -20 "$RECON_LOG"
fi
for p in "${bpids[@]}"; do
	wait "$p" 2>/dev/null
done
is_mounted "$mnt" && { fail "still mounted after SIGTERM"; fusermount3 -uz "$mnt"; }
fsck_clean "$img" "after SIGTERM"

log "on_violation=stop while requests come over the ring"
mkimg "$img" 1024 32M
mount_recon "$img" "$mnt" fuse_uring=on,on_violation=stop,fault_corrupt=bbitmap@1 ||
	die "mount for on_violation=stop"
pid=$RECON_PID
python3 - "$mnt" <<'EOF' >/dev/null 2>&1
import os, sys
try:
    for i in range(20):
        with open(os.path.join(sys.argv[1], "v%d" % i), "wb") as f:
            f.write(b"x" * 5000)
            f.flush()
            os.fsync(f.fileno())
except OSError:
    pass
EOF
RECON_PID=
wait_daemon "$pid" $((30 * TMUL))
[ "$RECON_STATUS" -eq 2 ] || { fail "on_violation=stop: daemon status $RECON_STATUS, expected 2"; tail -20 "$RECON_LOG"; }
is_mounted "$mnt" && { fail "still mounted after on_violation=stop"; fusermount3 -uz "$mnt"; }
fsck_clean "$img" "after on_violation=stop"

log "an entry the kernel refuses: its own FORGET arrives on the ring and must free the entry"
mkimg "$img" 1024 16M
echo hello >"$SCRATCH/hello"
for i in 1 2 3 4 5 6; do echo "write $SCRATCH/hello f$i"; done | debugfs -w "$img" >/dev/null 2>&1
for i in 12 13 14 15 16 17; do echo "sif <$i> mode 0110444"; done | debugfs -w "$img" >/dev/null 2>&1
if mount_recon "$img" "$mnt" ro,fuse_uring=on; then
	for i in 1 2 3; do
		timeout -s KILL $((20 * TMUL)) ls -l "$mnt" >/dev/null 2>&1
		[ $? -eq 137 ] && { fail "ls of a directory of bad inodes hung (round $i)"; break; }
	done
	umount_recon "$mnt"
else
	fail "mount ro,fuse_uring=on of the bad-mode image"
fi

log "auto takes the ring; off does not"
mkimg "$img" 4096 32M
mount_recon "$img" "$mnt" fuse_uring=off || die "mount with fuse_uring=off"
touch "$mnt/probe"
off_fds=$(uring_fds "$RECON_PID")
umount_recon "$mnt"
mount_recon "$img" "$mnt" fuse_uring=auto || die "mount with fuse_uring=auto"
touch "$mnt/probe2"
auto_fds=$(uring_fds "$RECON_PID")
umount_recon "$mnt"
[ "$auto_fds" -eq $((off_fds + ncpu)) ] ||
	fail "io_uring instances: auto $auto_fds, off $off_fds (expected $ncpu more with auto)"

log "with the parameter N: on refuses, auto serves through /dev/fuse"
set_uring_param N || fail "cannot set $param back to N"
if mount_recon "$img" "$mnt" fuse_uring=on 2>/dev/null; then
	fail "fuse_uring=on mounted although the kernel does not offer it"
	umount_recon "$mnt"
else
	[ "$RECON_STATUS" -eq 1 ] || fail "fuse_uring=on without the kernel's offer: status $RECON_STATUS"
	grep -q "enable_uring is N" "$RECON_LOG" || fail "no reason given: $(cat "$RECON_LOG")"
fi
mount_recon "$img" "$mnt" fuse_uring=auto || die "mount with fuse_uring=auto, parameter N"
touch "$mnt/probe3"
[ "$(uring_fds "$RECON_PID")" -eq "$off_fds" ] || fail "auto took a ring the kernel does not offer"
umount_recon "$mnt"
fsck_clean "$img" "after the auto/off mounts"

restore_uring_param
finish
