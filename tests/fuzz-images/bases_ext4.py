"""bases_ext4.py - the ext4 base images.

Made as bases.py makes the ext3 ones: mke2fs with a fixed UUID, hash seed
and clock (and no mke2fs.conf: the features are listed here), inode tables
zeroed by mke2fs (no lazy init writing behind the mount), then populated by
the kernel's ext4 driver on a loop mount.  Bases:
  e4  4 KiB blocks, Debian's mkfs.ext4 features (extent, flex_bg, 64bit,
      metadata_csum, huge_file, dir_nlink, extra_isize): htree directories
      with checksummed leaves and index blocks, a fragmented file (an extent
      tree of depth 1), unwritten extents (fallocate), xattrs in the inode
      and in blocks (one shared)
  e1  e4's features and metadata_csum_seed on 1 KiB blocks, the UUID changed
      after mke2fs (so the seed is not the UUID's): a fragmented file with an
      extent tree of depth 2, and a directory of 1,500 hard links whose htree
      has two levels (index nodes under the root)
  ei  e4 with inline_data: inline files (in i_block, and past it in the
      system.data attribute), inline directories, an inline symlink (debugfs
      writes it: the kernel puts long link targets in a block)
  ej  e4 whose journal (64-bit tags, checksum v3) needs recovery: the kernel
      writes, syncs, writes more (creates, renames, unlinks of files with
      extent blocks: revoke records), then EXT4_IOC_SHUTDOWN with the log
      flushed; unmounted as it is
  eo  e1's content on e2fsprogs 1.47's newer layout: orphan_file, large_dir,
      meta_bg (descriptor blocks in groups 0, 16 and 32; no resize inode),
      sparse_super2 (backups in groups 1 and 39 only), metadata_csum_seed,
      40 groups of 1 MiB of which the kernel leaves most BLOCK_UNINIT
  eh  eo, then files and a directory unlinked while held open, the log
      flushed and EXT4_IOC_SHUTDOWN: orphans held across a crash, in the
      orphan file (orphan_present set), the journal replayed by debugfs so
      that they are in place (e2fsck -fn flags them: the mount is what
      releases them)
recon-fuse writes them all but ei (inline_data: bases.READ_ONLY).
"""
import fcntl
import os
import struct
import subprocess

UUID = "6a3c0e52-1f7b-4c3e-9d2a-5b8e7f1c2d40"
UUID_AFTER = "0f9e8d7c-6b5a-4948-8372-615049382716"   # e1's, set after mke2fs
HASH_SEED = "0b1c2d3e-4f50-4a61-8b72-93a4b5c6d7e8"
DEBIAN_EXT4 = ("has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize,"
               "sparse_super,large_file,filetype,resize_inode,dir_index,ext_attr")
GEOMETRY = {  # base: (block size, blocks per group, image size in MiB, extra features)
    "e4": (4096, 8192, 64, ""),
    "e1": (1024, 8192, 32, ",metadata_csum_seed"),
    "ei": (4096, 8192, 32, ",inline_data"),
    "ej": (4096, 8192, 64, ""),
    "eo": (1024, 1024, 40, ",^resize_inode,meta_bg,sparse_super2,orphan_file,large_dir,"
           "metadata_csum_seed"),
}
GEOMETRY["eh"] = GEOMETRY["eo"]
BASES = tuple(GEOMETRY)
EXT4_IOC_SHUTDOWN = 0x8004587D          # _IOR('X', 125, __u32)
EXT4_GOING_FLAGS_LOGFLUSH = 1


def _run(*cmd, **kw):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def _fragmented(path, bs, extents, tag):
    """A file of EXTENTS one-block extents: every other block written, a
    hole between each, so no two can merge."""
    from bases import pattern
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for k in range(extents):
            os.pwrite(fd, pattern("%s%d" % (tag, k), bs), 2 * k * bs)
        os.fsync(fd)
    finally:
        os.close(fd)


def _populate(root, bs, extents):
    from bases import pattern
    os.makedirs(root + "/d/sub/deeper")
    for name, size in (("empty", 0), ("small", 500), ("medium", 9 * bs + 17),
                       ("large", 300 * bs + 5)):
        _write("%s/d/%s" % (root, name), pattern(name, size))
    _write(root + "/d/sub/deeper/leaf", pattern("leaf", 3 * bs + 1))
    _fragmented(root + "/d/frag", bs, extents, "frag")
    # unwritten extents: preallocated, then written in the middle
    fd = os.open(root + "/d/prealloc", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, 24 * bs)
        os.pwrite(fd, pattern("prealloc", 2 * bs), 8 * bs)
    finally:
        os.close(fd)
    with open(root + "/d/sparse", "wb") as f:
        f.seek(40 * bs)
        f.write(pattern("sparse", bs + 3))
    os.symlink("d/small", root + "/sl-fast")
    os.symlink("d/" + "s" * 90 + "/../small", root + "/sl-slow")
    os.link(root + "/d/medium", root + "/d/sub/hl1")
    os.link(root + "/d/medium", root + "/hl2")
    os.makedirs(root + "/big")
    for i in range(400):
        with open("%s/big/entry-%04d-%s" % (root, i, "n" * (i % 23)), "wb") as f:
            if i % 50 == 0:
                f.write(pattern("big%d" % i, 100 + i))
    os.setxattr(root + "/d/small", "user.small", b"tiny value")
    big = pattern("xattr", 600)
    os.setxattr(root + "/d/medium", "user.big", big)     # an EA block
    os.setxattr(root + "/d/large", "user.big", big)      # shared with it
    os.setxattr(root + "/d/sub", "user.dir", pattern("dirx", 300))
    if bs == 1024:
        # 1,500 names of 64 bytes need more leaves than a 1 KiB root indexes
        os.makedirs(root + "/wide")
        for i in range(1500):
            os.link(root + "/d/small", "%s/wide/%s-%04d" % (root, "w" * 59, i))


def _populate_inline(root, bs):
    """Inline files and directories, and some that outgrew inline data."""
    from bases import pattern
    os.makedirs(root + "/in/sub")
    for name, size in (("i0", 0), ("i20", 20), ("i60", 60), ("i100", 100), ("i150", 150),
                       ("i4k", bs + 9)):
        _write("%s/in/%s" % (root, name), pattern(name, size))
    _write(root + "/in/sub/tiny", b"tiny")
    os.makedirs(root + "/in/grown")          # entries past i_block: in system.data
    for i in range(6):
        _write("%s/in/grown/g%d" % (root, i), pattern("g%d" % i, 10 + i))
    os.makedirs(root + "/in/block")          # too many for inline: a block
    for i in range(40):
        _write("%s/in/block/name-%02d-%s" % (root, i, "x" * (i % 9)), b"")
    os.makedirs(root + "/in/empty")
    os.symlink("i20", root + "/in/sl-fast")
    os.setxattr(root + "/in/i20", "user.x", b"beside inline data")
    os.link(root + "/in/i100", root + "/in/sub/i100-link")


def _inline_symlink(img):
    """A symlink whose target is past i_block's 60 bytes, inline (debugfs's
    ext2fs_symlink makes it so on inline_data file systems)."""
    target = "in/" + "t" * 70 + "/../i100"
    env = dict(os.environ, E2FSPROGS_FAKE_TIME="1700000000")
    subprocess.run(["debugfs", "-w", "-R", "symlink /sl-inline %s" % target, img],
                   check=True, capture_output=True, env=env)
    out = subprocess.run(["debugfs", "-R", "stat /sl-inline", img], capture_output=True,
                         text=True).stdout
    if "Flags: 0x10000000" not in out or "system.data" not in out:
        raise RuntimeError("debugfs did not make an inline symlink:\n" + out)


def _journal_workload(root, bs):
    """After a sync: work that lands in the log only (creates, renames,
    xattrs, and unlinks of files whose extent blocks are logged metadata,
    which revoke them)."""
    from bases import pattern
    for i in range(30):
        _write("%s/d/late%d" % (root, i), pattern("late%d" % i, 200 + 97 * i))
    for i in range(0, 30, 4):
        os.rename("%s/d/late%d" % (root, i), "%s/big/late-moved-%d" % (root, i))
    for i in range(0, 400, 9):
        os.unlink("%s/big/entry-%04d-%s" % (root, i, "n" * (i % 23)))
    os.unlink(root + "/d/frag")
    _fragmented(root + "/d/frag2", bs, 30, "frag2")
    os.setxattr(root + "/d/late3", "user.late", pattern("late-x", 700))
    os.makedirs(root + "/late-dir/a/b")


def _orphans_held(root, bs):
    """Files unlinked while open (one of them with an extent tree), the open
    descriptors returned: the kernel keeps them in the orphan file."""
    from bases import pattern
    fds = []
    for name, size in (("held-small", 700), ("held-large", 60 * bs + 5)):
        _write("%s/d/%s" % (root, name), pattern(name, size))
    _fragmented(root + "/d/held-frag", bs, 40, "held")
    os.makedirs(root + "/d/held-dir")
    for name in ("held-small", "held-large", "held-frag", "held-dir"):
        fds.append(os.open("%s/d/%s" % (root, name), os.O_RDONLY))
        (os.rmdir if name == "held-dir" else os.unlink)("%s/d/%s" % (root, name))
    return fds


def _shutdown(mnt):
    fd = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, struct.pack("I", EXT4_GOING_FLAGS_LOGFLUSH))
    finally:
        os.close(fd)


def make(name, dest):
    """Make ext4 base NAME at path DEST (overwritten)."""
    bs, bpg, mib, extra = GEOMETRY[name]
    env = dict(os.environ, E2FSPROGS_FAKE_TIME="1700000000", MKE2FS_CONFIG="/dev/null")
    if os.path.exists(dest):
        os.unlink(dest)
    with open(dest, "wb") as f:
        f.truncate(mib << 20)
    ext = "hash_seed=%s,lazy_itable_init=0,lazy_journal_init=0" % HASH_SEED
    if "sparse_super2" in extra:
        ext += ",num_backup_sb=2"
    _run("mke2fs", "-F", "-q", "-t", "ext4", "-b", str(bs), "-I", "256", "-g", str(bpg),
         "-U", UUID, "-E", ext,
         "-O", DEBIAN_EXT4 + extra, "-J", "size=%d" % (bs // 1024), "-N", "2048", dest, env=env)
    if name in ("e1", "eo", "eh"):
        _run("tune2fs", "-U", UUID_AFTER, dest, env=env)
    from bases import kernel_mount
    with kernel_mount(dest, "ext4", "loop,noinit_itable") as mnt:
        if name == "ei":
            _populate_inline(mnt, bs)
        else:
            # one-block extents: 340 fit a 4 KiB leaf and 4 the inode, so
            # 600 make depth 1; 84 fit a 1 KiB leaf, so 500 make depth 2
            _populate(mnt, bs, 600 if bs == 4096 else 500)
        if name == "ej":
            os.sync()
            _journal_workload(mnt, bs)
            _shutdown(mnt)
        if name == "eh":
            os.sync()
            fds = _orphans_held(mnt, bs)
            os.sync()
            _shutdown(mnt)
            for fd in fds:
                os.close(fd)
    if name == "eh":
        # debugfs replays the log and nothing more (e2fsck -E journal_only
        # would release the orphans too)
        _run("debugfs", "-w", "-R", "journal_run", dest, env=env)
        if "needs_recovery" in subprocess.run(["dumpe2fs", "-h", dest], capture_output=True,
                                              text=True).stdout:
            raise RuntimeError("debugfs journal_run left the journal unreplayed")
    if name == "ei":
        _inline_symlink(dest)
    return dest
