#!/bin/bash
# reply_times: the attributes a reply carries are the ones the inode holds.
# The kernel keeps a reply's attributes (CREATE, MKDIR, MKNOD, SYMLINK,
# LOOKUP, SETATTR, and GETATTR's) for the attribute timeout and answers stat
# from them, so a reply that fills the nanoseconds of its times from
# anything but the inode as written shows up in stat.  Each kind of node is
# made, written, chmodded and given times with nanoseconds, its stat taken
# right after each step (the reply's view); then, after a remount (cold
# caches, fresh LOOKUPs and GETATTRs), the same stat must come back.
# ext3 and ext4 (argument), 256-byte inodes (nanosecond times).
. "$(dirname "$0")/lib.sh"
need_root
fs_from_arg "${1:-}"
img="$SCRATCH/t.img"
mnt="$SCRATCH/mnt"
mkimg "$img" 4096 64M -I 256
mount_recon "$img" "$mnt" || die "mount"

# Prints one line per node: name and its [amc]time in ns, mode, size, links.
# By name, not from a listing: after the remount each stat is a LOOKUP's
# reply (a READDIRPLUS would answer first).
stats() {
	python3 - "$mnt" <<'PY'
import os, sys
m = sys.argv[1]
for n in ("created", "dir", "fifo", "hard", "link"):
    s = os.lstat(os.path.join(m, n))
    print(n, s.st_atime_ns, s.st_mtime_ns, s.st_ctime_ns, oct(s.st_mode), s.st_size, s.st_nlink)
PY
}

# Each step's stat comes from the reply the kernel cached: taken at once.
python3 - "$mnt" >"$SCRATCH/steps" <<'PY' || fail "the steps"
import os, sys, time
m = sys.argv[1]
def st(n):
    s = os.lstat(os.path.join(m, n))
    return (s.st_atime_ns, s.st_mtime_ns, s.st_ctime_ns)
out = []
def p(name, path):
    out.append("%s %s %s %s" % ((name,) + st(path)))
fd = os.open(os.path.join(m, "created"), os.O_CREAT | os.O_WRONLY, 0o644)
p("create", "created")
os.write(fd, b"x" * 5000)
os.close(fd)
p("write", "created")
os.mkdir(os.path.join(m, "dir"))
p("mkdir", "dir")
os.mknod(os.path.join(m, "fifo"), 0o600 | 0o010000)
p("mknod", "fifo")
os.symlink("created", os.path.join(m, "link"))
p("symlink", "link")
time.sleep(0.01)
os.chmod(os.path.join(m, "created"), 0o600)
p("chmod", "created")
os.utime(os.path.join(m, "dir"), ns=(1000000123456789, 1000000987654321))
p("utimes", "dir")
os.truncate(os.path.join(m, "created"), 100)
p("truncate", "created")
os.link(os.path.join(m, "created"), os.path.join(m, "hard"))
p("link", "hard")
print("\n".join(out))
PY
stats >"$SCRATCH/before"
# every new node's times carry nanoseconds (a reply that lost them: all 0)
awk '$1 ~ /^(create|mkdir|mknod|symlink)$/ && $3 % 1000000000 == 0 { bad = 1 }
     END { exit bad }' "$SCRATCH/steps" || fail "a new node's reply has whole-second times: $(cat "$SCRATCH/steps")"
umount_recon "$mnt"
fsck_clean "$img" "after the steps"
mount_recon "$img" "$mnt" || die "remount"
stats >"$SCRATCH/after"
if ! cmp -s "$SCRATCH/before" "$SCRATCH/after"; then
	fail "stat from the replies differs from stat after a remount:"
	diff "$SCRATCH/before" "$SCRATCH/after" | sed 's/^/    /'
fi
# and the steps' own stats: each node's last step is what it holds
python3 - "$SCRATCH/steps" "$SCRATCH/after" <<'PY' || fail "a step's reply differs from the inode"
import sys
last = {}
names = {"create": "created", "write": "created", "mkdir": "dir", "mknod": "fifo",
         "symlink": "link", "chmod": "created", "utimes": "dir", "truncate": "created",
         "link": "hard"}
for line in open(sys.argv[1]):
    step, a, mt, c = line.split()
    last[names[step]] = (step, a, mt, c)
now = {l.split()[0]: l.split()[1:4] for l in open(sys.argv[2])}
bad = False
for n, (step, a, mt, c) in last.items():
    # links share the inode: "created" changed ctime with the link
    if n == "created":
        continue
    if [a, mt, c] != now[n]:
        print("    %s after %s: reply %s %s %s, inode %s" % (n, step, a, mt, c, " ".join(now[n])))
        bad = True
sys.exit(bad)
PY
umount_recon "$mnt"
log "replies' times, modes and sizes match the inodes after a remount"
finish
