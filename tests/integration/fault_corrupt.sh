#!/bin/bash
# Corruption never reaches the disk: for every KIND of
# -o fault_corrupt=KIND@N at a couple of N, a workload of rounds of metadata
# changes, each ending in fsync; the transaction the fault corrupts must be
# rejected by the checker: the call that commits it fails, every later write
# gets EROFS, the stats JSON lists the violation with its invariant, and after
# unmount e2fsck -fn exits 0 and what was fsynced before the rejection is
# intact.  KIND=random flips a random bit of a changed metadata block, which
# may land where no invariant looks (a timestamp): for it only "e2fsck -fn
# exits 0" is required, and the number rejected is reported.
# Environment: CORRUPT_KINDS (default all), CORRUPT_NS (default "1 3").
. "$(dirname "$0")/lib.sh"
fs_from_arg "$@"
need_root
# With the argument ext4 (mkfs.ext4's defaults, checksummed metadata): the
# KINDs whose sites exist there; ptr_*, ind_ptr, size, iblocks and the
# dirent kinds aim at block-mapped inodes and directories only (io's fault
# list has none for extent trees), and everything here is extent-mapped.
# N = 2 only.
if [ "$FS_TYPE" = ext4 ]; then
	kinds=${CORRUPT_KINDS:-"bbitmap ibitmap bgd_free_blocks bgd_free_inodes bgd_used_dirs
		sb_free_blocks links dtime mode xattr_refcount random"}
	ns=${CORRUPT_NS:-2}
else
	kinds=${CORRUPT_KINDS:-"bbitmap ibitmap bgd_free_blocks bgd_free_inodes bgd_used_dirs
		sb_free_blocks ptr_used ptr_free ptr_meta ind_ptr links size iblocks dtime mode
		dirent_inode dirent_reclen dirent_namelen dirent_type dotdot xattr_refcount random"}
	ns=${CORRUPT_NS:-"1 3"}
fi

base="$SCRATCH/base.img"
# 1 KiB blocks (indirect blocks from 12 KiB on), 128-byte inodes (xattrs in blocks)
mkimg "$base" 1024 16M -I 128
# a file from before the mount: the EROFS probes need something that exists
# whatever the rejection discarded (at N=1, everything the workload made)
printf 'made before the mount\n' >"$SCRATCH/pre.txt"
debugfs -w -R "write $SCRATCH/pre.txt pre" "$base" >/dev/null 2>&1 || die "debugfs write"
mnt="$SCRATCH/mnt"

# workload.py MNT RESULT: rounds of changes, each ending with fsync and
# fsyncdir, until a call fails; then probes that writes get EROFS.  Writes a
# JSON result: rounds completed, the failing call and its errno, the probes'
# errnos, and the files fsynced before the failure with their contents' hash.
cat >"$SCRATCH/workload.py" <<'EOF'
import errno, json, os, sys
from pylib import pattern, sha
mnt, out = sys.argv[1], sys.argv[2]
os.chdir(mnt)
res = {"rounds": 0, "failed": None, "errno": None, "probes": {}, "durable": {}}
pending = {}
def call(what, fn, *a):
    try:
        return fn(*a)
    except OSError as e:
        res["failed"], res["errno"] = what, errno.errorcode.get(e.errno, str(e.errno))
        raise
def fsync_path(p, flags=os.O_RDONLY):
    fd = os.open(p, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
try:
    for r in range(8):
        d = "dir%d" % r
        call("mkdir", os.mkdir, d)
        call("mkdir sub", os.mkdir, d + "/sub")
        for k in range(3):
            name = "%s/f%d" % (d, k)
            data = pattern("%d.%d" % (r, k), [500, 14000, 70000][k])
            def write(name=name, data=data):
                with open(name, "wb") as f:
                    f.write(data)
            call("write", write)
            pending[name] = sha(data)
        call("setxattr", os.setxattr, d + "/f0", "user.round", b"r%d" % r)
        call("setxattr", os.setxattr, d + "/f1", "user.shared", b"same")
        call("link", os.link, d + "/f1", d + "/sub/hard")
        call("symlink", os.symlink, "f0", d + "/sym")
        call("rename", os.rename, d + "/f2", d + "/sub/moved")
        pending[d + "/sub/moved"] = pending.pop(d + "/f2")
        if r:
            p = "dir%d" % (r - 1)
            call("unlink", os.unlink, p + "/sub/hard")
            call("truncate", os.truncate, p + "/f1", 3000)
            pending.pop(p + "/f1", None)
            res["durable"].pop(p + "/f1", None)
        call("fsync", fsync_path, d + "/f0", os.O_WRONLY)
        call("fsyncdir", fsync_path, d)
        res["durable"].update(pending)
        pending = {}
        res["rounds"] = r + 1
except OSError:
    pass
if res["failed"]:
    def probe(what, fn, *a):
        try:
            fn(*a)
            res["probes"][what] = "ok"
        except OSError as e:
            res["probes"][what] = errno.errorcode.get(e.errno, str(e.errno))
    probe("create", lambda: os.close(os.open("probe", os.O_WRONLY | os.O_CREAT, 0o644)))
    probe("mkdir", os.mkdir, "probe.d")
    probe("write", lambda: open("pre", "r+b").write(b"x"))
    probe("unlink", os.unlink, "pre")
    probe("rename", os.rename, "pre", "pre2")
json.dump(res, open(out, "w"))
EOF

# check_result JSON STATS KIND: the verdict of one run (prints failures).
cat >"$SCRATCH/check.py" <<'EOF'
import json, sys
res, stats, kind = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
bad = []
viol = stats.get("violations", [])
if not isinstance(viol, list):
    bad.append("stats: violations is not a list")
    viol = []
if res["failed"] is None:
    if kind != "random" or viol:
        bad.append("no call failed in %d rounds (violations: %d)" % (res["rounds"], len(viol)))
else:
    if not viol:
        bad.append("%s failed with %s, but the stats list no violation" % (res["failed"], res["errno"]))
    for v in viol:
        if not isinstance(v, dict) or not v.get("invariant") or "records" not in v:
            bad.append("violation without invariant/records: %r" % (v,))
    for what, e in sorted(res["probes"].items()):
        if e != "EROFS":
            bad.append("after the rejection, %s gave %s, want EROFS" % (what, e))
for b in bad:
    print("    " + b)
print(("REJECTED (%s: %s)" % (res["failed"], res["errno"])) if res["failed"] else "PASSED", ",".join(sorted({v.get("invariant", "?") for v in viol if isinstance(v, dict)})))
sys.exit(1 if bad else 0)
EOF

# verify.py ROOT JSON: files fsynced before the rejection read back intact.
cat >"$SCRATCH/verify.py" <<'EOF'
import json, sys
from pylib import file_sha
root, res = sys.argv[1], json.load(open(sys.argv[2]))
bad = 0
for name, digest in sorted(res["durable"].items()):
    try:
        if file_sha(root + "/" + name) != digest:
            print("    %s: fsynced content lost" % name); bad += 1
    except OSError as e:
        print("    %s: fsynced, now %s" % (name, e.strerror)); bad += 1
sys.exit(1 if bad else 0)
EOF

runs=0 rejected=0 random_rejected=0 random_runs=0
for kind in $kinds; do
	for n in $ns; do
		what="$kind@$n"
		img="$SCRATCH/c.img" res="$SCRATCH/res.json" stats="$SCRATCH/stats.json"
		cp --sparse=always "$base" "$img"
		rm -f "$res" "$stats"
		runs=$((runs + 1))
		mount_recon "$img" "$mnt" "deterministic,fault_corrupt=$what,fault_seed=$n,stats=$stats" ||
			{ fail "$what: mount failed"; continue; }
		pid=$RECON_PID
		timeout -s KILL $((120 * TMUL)) python3 "$SCRATCH/workload.py" "$mnt" "$res" \
			>"$SCRATCH/workload.out" 2>&1 || { fail "$what: workload: $(tail -3 "$SCRATCH/workload.out")"; }
		fusermount3 -u "$mnt" 2>/dev/null || { sleep 1; fusermount3 -u "$mnt"; } || fusermount3 -uz "$mnt"
		RECON_PID=
		wait_daemon "$pid" $((60 * TMUL))
		rc=$RECON_STATUS
		if [ "$rc" -eq 124 ] || [ "$rc" -ge 128 ] ||
		   grep -qE 'AddressSanitizer|runtime error:' "$RECON_LOG"; then
			fail "$what: the daemon hung or crashed (status $rc)"; tail -10 "$RECON_LOG"; continue
		fi
		[ -s "$stats" ] || { fail "$what: no stats file"; continue; }
		[ -s "$res" ] || { fail "$what: no workload result"; continue; }
		verdict=$(python3 "$SCRATCH/check.py" "$res" "$stats" "$kind") || {
			fail "$what: $(echo "$verdict" | head -5)"; sed 's/^/    /' "$RECON_LOG" | tail -5; }
		log "$what: $(echo "$verdict" | tail -1)"
		case $verdict in *REJECTED*)
			[ "$kind" = random ] && random_rejected=$((random_rejected + 1))
			rejected=$((rejected + 1));;
		esac
		[ "$kind" = random ] && random_runs=$((random_runs + 1))
		fsck_clean "$img" "$what, after unmount"
		# what was fsynced before the rejection is still there
		if mount_recon "$img" "$mnt" "ro"; then
			python3 "$SCRATCH/verify.py" "$mnt" "$res" || fail "$what: fsynced data lost"
			umount_recon "$mnt"
		else
			fail "$what: cannot mount the image read-only after the run"
		fi
	done
done
log "$runs runs, $rejected rejected (random: $random_rejected of $random_runs)"
finish
