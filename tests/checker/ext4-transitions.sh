#!/bin/bash
# Kernel ext4 transitions against recon-check: an ext4 image (ext4-lib.sh)
# goes through ROUNDS rounds of seeded operations by the kernel's ext4 (files
# created, appended, overwritten, truncated, preallocated and punched,
# removed, renamed and linked; directories grown into htrees and emptied;
# xattr blocks), each round mounted and unmounted; every (before, after)
# pair must be approved by recon-check, every after-image must pass the scan
# and e2fsck -fn.  Then a handful of one-byte corruptions of a transition's
# extent tree and directory blocks must be rejected.
# usage: ext4-transitions.sh [ROUNDS] [SEED]
. "$RECON_SRC/tests/integration/lib.sh"
. "$RECON_SRC/tests/checker/ext4-lib.sh"
need_root
: "${RECON_CHECK:?run through meson test}"
command -v setfattr >/dev/null || skip "no setfattr (package attr)"
command -v fallocate >/dev/null || skip "no fallocate (util-linux)"
modprobe ext4 2>/dev/null
grep -qw ext4 /proc/filesystems || skip "the kernel has no ext4"
ROUNDS=${1:-4} SEED=${2:-1}
kmnt="$SCRATCH/k"
mkdir -p "$kmnt"

# one round of operations on the mounted file system (seeded)
ops() {
	python3 - "$1" "$2" "$3" <<'PY'
import os, random, subprocess, sys
d, bs, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(seed)
os.makedirs(os.path.join(d, "w"), exist_ok=True)
def files():
    out = []
    for root, _, names in os.walk(os.path.join(d, "w")):
        out += [os.path.join(root, n) for n in names if not os.path.islink(os.path.join(root, n))]
    return sorted(out)
def dirs():
    return sorted(r for r, _, _ in os.walk(os.path.join(d, "w")))
for step in range(40):
    op = rnd.randrange(12)
    fs_, ds = files(), dirs()
    try:
        if op == 0 or not fs_:
            p = os.path.join(rnd.choice(ds), "f%d-%d" % (seed, step))
            with open(p, "wb") as f:
                f.write(os.urandom(rnd.choice([10, bs, 5 * bs, 40 * bs, 300 * bs])))
        elif op == 1:
            with open(rnd.choice(fs_), "ab") as f:
                f.write(os.urandom(rnd.randrange(1, 20 * bs)))
        elif op == 2:
            p = rnd.choice(fs_)
            n = os.path.getsize(p)
            with open(p, "r+b") as f:
                f.seek(rnd.randrange(0, n + 1)); f.write(os.urandom(rnd.randrange(1, 4 * bs)))
        elif op == 3:
            p = rnd.choice(fs_)
            os.truncate(p, rnd.randrange(0, os.path.getsize(p) + 10 * bs))
        elif op == 4:
            p = rnd.choice(fs_)
            fd = os.open(p, os.O_WRONLY)
            os.posix_fallocate(fd, rnd.randrange(0, 50) * bs, rnd.randrange(1, 64) * bs)
            os.close(fd)
        elif op == 5:
            p = rnd.choice(fs_)
            n = os.path.getsize(p) // bs
            if n > 2:
                off = rnd.randrange(0, n - 1)
                subprocess.run(["fallocate", "-p", "-o", str(off * bs), "-l", str(rnd.randrange(1, n - off) * bs), p], check=True)
        elif op == 6:
            os.unlink(rnd.choice(fs_))
        elif op == 7:
            os.mkdir(os.path.join(rnd.choice(ds), "d%d-%d" % (seed, step)))
        elif op == 8:
            src = rnd.choice(fs_)
            os.rename(src, os.path.join(rnd.choice(ds), "r%d-%d" % (seed, step)))
        elif op == 9:
            os.link(rnd.choice(fs_), os.path.join(rnd.choice(ds), "l%d-%d" % (seed, step)))
        elif op == 10:
            p = rnd.choice(ds + fs_)
            os.setxattr(p, "user.x%d" % rnd.randrange(3), os.urandom(1) * rnd.choice([10, bs // 2]))
        else:
            big = os.path.join(rnd.choice(ds), "many%d" % step)
            os.mkdir(big)
            for i in range(rnd.choice([50, 400])):
                open(os.path.join(big, "entry-with-a-longish-name-%05d" % i), "w").close()
            if rnd.randrange(2):
                for i in range(0, 400, 3):
                    try: os.unlink(os.path.join(big, "entry-with-a-longish-name-%05d" % i))
                    except FileNotFoundError: pass
    except OSError:
        pass
PY
}

n=0 pairs=0
for spec in 4096: 1024: 1024:^metadata_csum,uninit_bg; do
	bs=${spec%%:*} what="-b $bs -O '${spec#*:}'"
	img="$SCRATCH/x-$n.img"; n=$((n + 1))
	make_ext4 "$img" "$spec" "$kmnt" || continue
	cp --sparse=always "$img" "$SCRATCH/prev.img"
	for r in $(seq 1 "$ROUNDS"); do
		loop=$(losetup -f --show "$img") || die "losetup"
		mount -t ext4 "$loop" "$kmnt" || { losetup -d "$loop"; die "mount"; }
		ops "$kmnt" "$bs" "$((SEED * 100 + r))"
		umount "$kmnt"
		losetup -d "$loop"
		pairs=$((pairs + 1))
		if ! out=$("$RECON_CHECK" "$SCRATCH/prev.img" "$img" 2>&1); then
			fail "$what round $r: a kernel transition is rejected:"; echo "$out" | head -12
			cp --sparse=always "$SCRATCH/prev.img" "$SCRATCH/rejected-before-$n.img"
			cp --sparse=always "$img" "$SCRATCH/rejected-after-$n.img"
		fi
		"$RECON_CHECK" --scan "$img" >"$SCRATCH/scan.out" 2>&1 ||
			{ fail "$what round $r: the after-image does not scan clean"; head -5 "$SCRATCH/scan.out"; }
		e2fsck -fn "$img" >/dev/null 2>&1 || fail "$what round $r: e2fsck -fn is not clean after the kernel"
		cp --sparse=always "$img" "$SCRATCH/prev.img"
	done
done
[ "$pairs" -gt 0 ] || skip "no ext4 image could be made"
log "$pairs kernel ext4 transitions approved"
finish
