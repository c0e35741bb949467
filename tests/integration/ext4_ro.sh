#!/bin/bash
# ext4 images read-only (-o ro): what the kernel's ext4 wrote, recon-fuse
# shows exactly as the kernel does.
# Images: mkfs.ext4's defaults (has_journal, extent, huge_file, flex_bg,
# metadata_csum, 64bit, dir_nlink, extra_isize), the same with
# metadata_csum_seed and orphan_file, and with inline_data; 1 KiB and 4 KiB
# blocks.  The kernel fills each (small files, a 5,000-entry htree
# directory, a file with an extent tree of depth >= 1, unwritten extents,
# a 3 GiB sparse file, fast and slow symlinks, hard links, a fifo and a
# device, xattrs in the inode and in a block, ACLs; on the inline_data image
# inline files, directories and a symlink) and unmounts cleanly.  Then a
# walk (names, types, modes, link counts, sizes, inode numbers, owners,
# times, block counts, contents' sha256 (data segments of large sparse files
# by SEEK_DATA/SEEK_HOLE), symlink targets, xattrs) of the kernel's ro mount
# must equal the walk of recon-fuse's ro mount, which must leave the image
# byte for byte unchanged.
. "$(dirname "$0")/lib.sh"
need_root
need_kernel_ext4
command -v setfacl >/dev/null || skip "no setfacl"
command -v debugfs >/dev/null || skip "no debugfs"
mnt="$SCRATCH/mnt"
kmnt="$SCRATCH/kmnt"
mkdir -p "$mnt" "$kmnt"

# populate.py MNT KIND BLOCKSIZE: what the kernel writes (KIND full or inline).
cat >"$SCRATCH/populate.py" <<'EOF'
import os, subprocess, sys
from pylib import pattern, fallocate, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE
mnt, kind, bs = sys.argv[1], sys.argv[2], int(sys.argv[3])
def p(*a):
    return os.path.join(mnt, *a)
def write(path, data, mode=0o644):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
def acl(*args):
    subprocess.run(["setfacl"] + list(args), check=True)

if kind == "inline":
    os.mkdir(p("in"))
    # inline files: in i_block (60 bytes), spilling into system.data, and
    # too big for the inode (blocks)
    for size in [0, 1, 30, 59, 60, 61, 80, 100, 120, 140, 200, 5000]:
        write(p("in", "f%d" % size), pattern("inline%d" % size, size))
    os.setxattr(p("in", "f30"), "user.beside", b"shares the inode's extra space")
    os.mkdir(p("in", "empty"))
    os.mkdir(p("in", "two"))                 # entries in i_block only
    write(p("in", "two", "a"), b"a\n")
    os.mkdir(p("in", "two", "sub"))
    os.mkdir(p("in", "spill"))               # entries continue in system.data
    for i in range(7):
        write(p("in", "spill", "n%d" % i), pattern("spill%d" % i, 40 + i))
    os.mkdir(p("in", "grown"))               # past the inode: a block directory
    for i in range(40):
        write(p("in", "grown", "entry-%02d" % i), b"")
    os.symlink("target-of-a-fast-link", p("in", "fast"))
    os.link(p("in", "f59"), p("in", "two", "f59-again"))
    sys.exit(0)

# many small files
for d in range(10):
    os.mkdir(p("d%d" % d))
    for i in range(30):
        size = (d * 30 + i) * 97 % 20000
        write(p("d%d" % d, "f%d" % i), pattern("small%d-%d" % (d, i), size))
# an htree directory of 5,000 entries (names long enough that 1 KiB blocks
# need a second index level)
os.mkdir(p("htree"))
for i in range(5000):
    name = "entry-%05d-%s" % (i, "x" * (i % 17))
    data = pattern("h%d" % i, i % 300) if i % 50 == 0 else b""
    write(p("htree", name), data)
os.mkdir(p("htree", "subdir"))
# an extent tree of depth >= 1: every other block written
fd = os.open(p("frag"), os.O_WRONLY | os.O_CREAT, 0o644)
for i in range(0, 1200, 2):
    os.pwrite(fd, pattern("frag%d" % i, bs), i * bs)
os.close(fd)
# unwritten extents: fallocate, punch every other 16 KiB, write into some
fd = os.open(p("unwritten"), os.O_RDWR | os.O_CREAT, 0o644)
fallocate(fd, 0, 0, 1 << 20)
for off in range(0, 1 << 20, 32 << 10):
    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, 16 << 10)
os.pwrite(fd, b"written into an unwritten extent", 20 << 10)
os.close(fd)
# a 3 GiB sparse file
fd = os.open(p("sparse3g"), os.O_WRONLY | os.O_CREAT, 0o600)
os.pwrite(fd, b"head", 0)
os.pwrite(fd, pattern("mid", 70000), (1 << 30) + 12345)
os.pwrite(fd, b"tail", 3 * (1 << 30) - 4)
os.close(fd)
# symlinks: fast (in i_block), slow (a block), dangling
os.symlink("d0/f1", p("fastlink"))
os.symlink("/" + "long-component/" * 12 + "end", p("slowlink"))
os.symlink("nowhere", p("dangling"))
# hard links
write(p("d1", "linked"), pattern("linked", 5000))
os.link(p("d1", "linked"), p("d2", "linked-2"))
os.link(p("d1", "linked"), p("htree", "linked-3"))
# other types, owners, modes
os.mkfifo(p("fifo"), 0o640)
os.mknod(p("chardev"), 0o620 | 0o020000, os.makedev(1, 3))
os.chown(p("d3", "f3"), 1234, 5678)
os.chmod(p("d3", "f4"), 0o4755)
# xattrs: small ones in the inode, a large one in an attribute block
os.setxattr(p("d4", "f1"), "user.small", b"value")
os.setxattr(p("d4", "f1"), "trusted.t", b"trusted value")
os.setxattr(p("d4", "f2"), "user.big", pattern("bigxattr", bs // 2 + 100))
os.setxattr(p("d4"), "user.dir", b"on a directory")
# ACLs: access on a file, access and default on a directory
acl("-m", "u:1234:rw-,g:5678:r--", p("d5", "f1"))
acl("-m", "u:1234:rwx", "-d", "-m", "u:1234:r-x,g::r-x", p("d6"))
write(p("d6", "inherits"), b"inherited ACL\n")
EOF

# walk.py ROOT: one line per name, sorted.
cat >"$SCRATCH/walk.py" <<'EOF'
import hashlib, os, stat, sys
root = sys.argv[1]
BIG = 64 << 20
def segments(path, size):
    """The data segments by SEEK_DATA/SEEK_HOLE, with each one's hash."""
    out = []
    fd = os.open(path, os.O_RDONLY)
    try:
        off = 0
        while off < size:
            try:
                data = os.lseek(fd, off, os.SEEK_DATA)
            except OSError:
                break
            hole = os.lseek(fd, data, os.SEEK_HOLE)
            h = hashlib.sha256()
            pos = data
            while pos < hole:
                b = os.pread(fd, min(1 << 20, hole - pos), pos)
                if not b:
                    break
                h.update(b)
                pos += len(b)
            out.append("%d-%d:%s" % (data, hole, h.hexdigest()[:12]))
            off = hole
        # holes read as zeros
        for probe in (size // 3, size // 2 + 4096):
            if os.pread(fd, 4096, probe).strip(b"\0"):
                out.append("probe %d not zero" % probe)
    finally:
        os.close(fd)
    return " ".join(out)
def describe(path, rel):
    st = os.lstat(path)
    extra = ""
    if stat.S_ISREG(st.st_mode) and st.st_size > BIG:
        extra = segments(path, st.st_size)
    elif stat.S_ISREG(st.st_mode):
        # seeks before the read: the kernel calls the cached pages of an
        # unwritten extent data
        seeks = ""
        if st.st_size:
            fd = os.open(path, os.O_RDONLY)
            try:
                seeks = " data@%d hole@%d" % (os.lseek(fd, 0, os.SEEK_DATA),
                                              os.lseek(fd, 0, os.SEEK_HOLE))
            finally:
                os.close(fd)
        with open(path, "rb") as f:
            extra = hashlib.sha256(f.read()).hexdigest()[:16] + seeks
    elif stat.S_ISLNK(st.st_mode):
        extra = os.readlink(path)
    xattrs = []
    if not stat.S_ISLNK(st.st_mode):
        for x in sorted(os.listxattr(path, follow_symlinks=False)):
            v = os.getxattr(path, x, follow_symlinks=False)
            xattrs.append("%s=%s" % (x, hashlib.sha256(v).hexdigest()[:12]))
    return ("%s ino=%d mode=%o nlink=%d size=%d own=%d:%d rdev=%x blocks=%d "
            "mtime=%d ctime=%d %s [%s]" % (
                rel, st.st_ino, st.st_mode, st.st_nlink, st.st_size, st.st_uid, st.st_gid,
                st.st_rdev, st.st_blocks, st.st_mtime_ns, st.st_ctime_ns, extra,
                " ".join(xattrs)))
lines = []
def walk_error(e):
    lines.append("%s ERROR listing: %s" % (os.path.relpath(e.filename, root), e.strerror))
for d, dirs, files in os.walk(root, onerror=walk_error):
    dirs.sort()
    for n in sorted(dirs + files):
        path = os.path.join(d, n)
        rel = os.path.relpath(path, root)
        if rel == "lost+found":
            continue
        try:
            lines.append(describe(path, rel))
        except OSError as e:
            lines.append("%s ERROR %s" % (rel, e.strerror))
print("\n".join(sorted(lines)))
EOF

# one_image NAME BLOCKSIZE KIND MKFS-OPTIONS...: make, fill with the kernel,
# compare the two read-only views.
one_image() {
	local name=$1 bs=$2 kind=$3 img="$SCRATCH/$1.img" before after; shift 3
	log "$name: mkfs.ext4 -b $bs $*"
	rm -f "$img"
	truncate -s 160M "$img"
	mkfs.ext4 -F -q -b "$bs" "$@" "$img" >"$SCRATCH/mkfs.out" 2>&1 ||
		{ fail "$name: mkfs.ext4: $(cat "$SCRATCH/mkfs.out")"; return; }
	mount -t ext4 -o loop "$img" "$kmnt" || { fail "$name: kernel mount"; return; }
	MOUNTS+=("$kmnt")
	python3 "$SCRATCH/populate.py" "$kmnt" "$kind" "$bs" || fail "$name: populating"
	umount "$kmnt" || { fail "$name: kernel unmount"; return; }
	if [ "$kind" = inline ]; then
		# the kernel makes no inline symlinks; e2fsprogs does
		debugfs -w -R "symlink in/inline-link /$(printf 'inline-target/%.0s' {1..5})end" \
			"$img" >/dev/null 2>&1
		debugfs -R "stat in/inline-link" "$img" 2>/dev/null | grep -q 'Flags: 0x10000000' ||
			fail "$name: debugfs made no inline symlink"
		debugfs -R "stat in/spill" "$img" 2>/dev/null | grep -q 'Size of inline data: [1-9][0-9][0-9]' ||
			fail "$name: in/spill is not an inline directory reaching into system.data"
	else
		debugfs -R "stat frag" "$img" 2>/dev/null | grep -q 'ETB' ||
			fail "$name: frag has no extent tree block"
	fi
	dumpe2fs -h "$img" 2>/dev/null | grep -q needs_recovery && fail "$name: the kernel left a journal to replay"
	fsck_clean "$img" "$name after the kernel"

	mount -t ext4 -o loop,ro "$img" "$kmnt" || { fail "$name: kernel ro mount"; return; }
	python3 "$SCRATCH/walk.py" "$kmnt" >"$SCRATCH/$name.kernel" || fail "$name: walking the kernel's mount"
	umount "$kmnt"

	before=$(sha256sum <"$img")
	if ! mount_recon "$img" "$mnt" ro; then
		fail "$name: the read-only mount failed"
		return
	fi
	python3 "$SCRATCH/walk.py" "$mnt" >"$SCRATCH/$name.recon" 2>"$SCRATCH/$name.err" ||
		fail "$name: walking recon-fuse's mount: $(tail -3 "$SCRATCH/$name.err")"
	umount_recon "$mnt"
	after=$(sha256sum <"$img")
	[ "$before" = "$after" ] || fail "$name: the read-only mount wrote to the image"
	if ! diff "$SCRATCH/$name.kernel" "$SCRATCH/$name.recon" >"$SCRATCH/$name.diff"; then
		fail "$name: recon-fuse's view differs from the kernel's ($(grep -c '^[<>]' "$SCRATCH/$name.diff") lines):"
		head -20 "$SCRATCH/$name.diff" | cut -c1-220 | sed 's/^/    /'
	else
		log "$name: $(wc -l <"$SCRATCH/$name.kernel") names alike"
	fi
	rm -f "$img"
}

one_image debian-4k 4096 full
one_image debian-1k 1024 full
one_image seed-orphan-4k 4096 full -O metadata_csum_seed,orphan_file
one_image seed-orphan-1k 1024 full -O metadata_csum_seed,orphan_file
one_image inline-4k 4096 inline -O inline_data
one_image inline-1k 1024 inline -O inline_data
finish
