#!/usr/bin/env python3
"""mutate.py - a seeded metadata mutator for ext2/ext3/ext4 images.

A mutant is named BASE/CLASS/SEED[/EDIT]: the base image generator (bases.py),
the class of metadata it damages (the ext4 classes are mutate_ext4.py's;
CLASS+csum is CLASS's mutant with the checksums of what it changed
recomputed, see mutate_ext4.repair), the seed of its random choices, and
optionally the edit to make (else the seed picks one: half of the time a
targeted field edit of the class, half of the time 1-4 bit or byte flips in
the class's bytes).  EDIT is a name from the class's table (`mutate.py
--list`), optionally with =VALUE for the field's new value, e.g.
    k1/sb/1/s_first_data_block=1000     k1/ibitmap/3/clear_live
The targets (which inode, block, entry) come from the seed and a parse of the
base image (ext2meta.py), so the same name gives the same mutant (the layout
of a base does not change between rebuilds on one kernel; only timestamps
do).  A new edit in a class's table changes which edit that class's seeds
pick: reports name the commit of the mutator they ran.
Usage: mutate.py SPEC BASE_IMAGE OUT_IMAGE    (prints what it changed)
       mutate.py --list
"""
import random
import struct
import sys

import ext2meta as em
import mutate_ext4

CLASSES_EXT3 = ("sb", "gdt", "bbitmap", "ibitmap", "inode", "dir", "htree", "ind",
                "ea", "jsb", "jblk")
CLASSES = CLASSES_EXT3 + ("extent", "inline", "dirtail", "jinode", "orphan", "uninit", "extnode",
                          "none")
NoTarget = em.NoTarget
# the ext4 campaign (imgfuzz.py --classes ext4): each class on the bases that
# have its structures; +csum: the same mutants with repaired checksums
EXT4_CLASSES = ("extent@e4:e1:ej,extent+csum@e4:e1:ej,inline@ei,inline+csum@ei,"
                "dirtail@e4:e1:ej:ei,dirtail+csum@e4:e1:ej:ei,dir+csum@e4:e1:ei,htree@e1:e4,"
                "htree+csum@e1:e4,inode+csum@e4:e1:ei,ea+csum@e4:e1:ei,sb+csum@e4:e1:ei,"
                "gdt+csum@e4:e1:ei,jsb+csum@ej,jblk@ej,jblk+csum@ej,jinode@ej:e1,"
                "jinode+csum@ej:e1,orphan@eh:eo,orphan+csum@eh:eo,uninit+csum@eo:eh:e1,"
                "extnode@e1:eo,extnode+csum@e1:eo:eh,htree+csum@eo,dirtail+csum@eo:eh,"
                "extent+csum@eo,gdt+csum@eo,sb+csum@eo:eh,inode+csum@eh")


class Mutation:
    def __init__(self, data, img, rng, value):
        self.d, self.img, self.rng, self.value = data, img, rng, value
        self.log = []

    # -- writing ------------------------------------------------------------
    def put(self, off, fmt, val, what):
        size = struct.calcsize(fmt)
        bits = 8 * size
        val &= (1 << bits) - 1
        old = struct.unpack_from(fmt, self.d, off)[0]
        struct.pack_into(fmt, self.d, off, val)
        self.log.append("%s: %d -> %d" % (what, old, val))

    def flips(self, ranges, what):
        """1-4 bit flips or byte overwrites at offsets in RANGES [(off, len)]."""
        ranges = [r for r in ranges if r[1] > 0]
        if not ranges:
            raise NoTarget(what)
        for _ in range(self.rng.randint(1, 4)):
            off, n = self.rng.choice(ranges)
            o = off + self.rng.randrange(n)
            old = self.d[o]
            if self.rng.random() < 0.7:
                self.d[o] ^= 1 << self.rng.randrange(8)
            else:
                self.d[o] = self.rng.choice((0, 0xFF, self.rng.randrange(256)))
            self.log.append("%s: byte %d (+%d) %#04x -> %#04x" % (what, o, o - off, old, self.d[o]))

    # -- values ---------------------------------------------------------------
    def pick(self, choices):
        """The edit's value: -o VALUE if given, else one of CHOICES."""
        if self.value is not None:
            return int(self.value, 0)
        return self.rng.choice(choices)

    def block_value(self, exclude=()):
        """A block number a pointer should not hold, or a plausible wrong one."""
        img, rng = self.img, self.rng
        g = rng.choice(img.groups)
        owned = [b for b in img.owner if b not in exclude]
        kinds = [
            0, img.blocks_count, img.blocks_count + rng.randrange(1, 1 << 20), 0xFFFFFFFF,
            img.first_data_block, img.first_data_block + 1,          # superblock, descriptors
            g["block_bitmap"], g["inode_bitmap"],
            g["inode_table"] + rng.randrange(img.itable_blocks),
            rng.choice(owned) if owned else 0,                       # someone else's block
            self.free_block(), rng.randrange(img.blocks_count),
        ]
        return self.pick(kinds)

    def free_block(self):
        img = self.img
        for _ in range(1000):
            b = self.rng.randrange(img.first_data_block, img.blocks_count)
            if not img.block_in_use(b):
                return b
        return img.blocks_count - 1

    def free_inode(self):
        img = self.img
        for _ in range(1000):
            i = self.rng.randrange(img.first_ino, img.inodes_count + 1)
            if not img.inode_in_use(i):
                return i
        return img.inodes_count

    def count_value(self, cur, bits):
        top = (1 << bits) - 1
        return self.pick([0, 1, cur + 1, max(cur - 1, 0), cur * 2, top, top >> 1,
                          self.rng.randrange(top + 1)])

    def live_inode(self, kinds=None):
        live = [(i, m) for i, m in self.img.live
                if kinds is None or m & em.S_IFMT in kinds]
        if not live:
            raise NoTarget("no live inode")
        return self.rng.choice(live)[0]


# ---------------------------------------------------------------------------
# superblock
SB_FIELDS = {   # name: (offset, format)
    "s_inodes_count": (0, "<I"), "s_blocks_count": (4, "<I"), "s_r_blocks_count": (8, "<I"),
    "s_free_blocks_count": (12, "<I"), "s_free_inodes_count": (16, "<I"),
    "s_first_data_block": (20, "<I"), "s_log_block_size": (24, "<I"),
    "s_blocks_per_group": (32, "<I"), "s_inodes_per_group": (40, "<I"),
    "s_magic": (56, "<H"), "s_state": (58, "<H"), "s_errors": (60, "<H"),
    "s_rev_level": (76, "<I"), "s_first_ino": (84, "<I"), "s_inode_size": (88, "<H"),
    "s_feature_compat": (92, "<I"), "s_feature_incompat": (96, "<I"),
    "s_feature_ro_compat": (100, "<I"), "s_reserved_gdt_blocks": (206, "<H"),
    "s_journal_inum": (224, "<I"), "s_last_orphan": (232, "<I"),
    "s_def_hash_version": (252, "<B"), "s_desc_size": (254, "<H"),
    "s_first_meta_bg": (260, "<I"),
}


def sb_values(m, name, cur):
    img = m.img
    special = {
        "s_first_data_block": [0, 1, 2, 1000, img.blocks_count],
        "s_log_block_size": [0, 1, 2, 3, 6, 0xFFFFFFFF],
        "s_blocks_per_group": [0, 8, cur // 2, cur + 8, 65536, 0xFFFFFFFF],
        "s_inodes_per_group": [0, 1, cur // 2, cur + 8, cur * 4, 0xFFFFFFFF],
        "s_inodes_count": [0, 1, cur - 1, cur // 2, cur + 100, 0xFFFFFFFF],
        "s_blocks_count": [0, cur - 1, cur + 1, cur + 5000, cur - img.blocks_per_group // 2, 0xFFFFFFFF],
        "s_inode_size": [0, 64, 127, 129, 512, 1024, 4096, 0xFFFF],
        "s_first_ino": [0, 1, 2, 5, 12, img.inodes_count, img.inodes_count + 1],
        "s_rev_level": [0, 2, 0xFFFFFFFF],
        "s_journal_inum": [0, 1, 2, 7, 11, m.live_inode(), img.inodes_count + 3],
        "s_last_orphan": [1, 2, 7, 8, m.live_inode(), m.live_inode([em.S_IFDIR]),
                          m.free_inode(), img.inodes_count + 5],
        "s_feature_incompat": [cur | 0x40, cur | 0x80, cur | 0x10, cur | 0x4, cur & ~0x2,
                               cur | 0x200, cur ^ (1 << m.rng.randrange(32))],
        "s_feature_ro_compat": [cur | 0x8, cur | 0x400, cur & ~0x1, cur ^ (1 << m.rng.randrange(32))],
        "s_feature_compat": [cur & ~0x4, cur | 0x10, cur & ~0x20, cur ^ (1 << m.rng.randrange(32))],
        "s_state": [0, 2, 3, 0xFFFF], "s_errors": [0, 2, 3, 9],
    }
    if name in special:
        return m.pick(special[name])
    return m.count_value(cur, 8 * struct.calcsize(SB_FIELDS[name][1]))


def sb_edit(name):
    def edit(m):
        off, fmt = SB_FIELDS[name]
        cur = struct.unpack_from(fmt, m.d, em.SB_OFF + off)[0]
        m.put(em.SB_OFF + off, fmt, sb_values(m, name, cur), "superblock " + name)
    return edit


def sb_flips(m):
    m.flips([(em.SB_OFF, 0x168)], "superblock")


# ---------------------------------------------------------------------------
# group descriptors
GD_FIELDS = {"bg_block_bitmap": (0, "<I"), "bg_inode_bitmap": (4, "<I"),
             "bg_inode_table": (8, "<I"), "bg_free_blocks_count": (12, "<H"),
             "bg_free_inodes_count": (14, "<H"), "bg_used_dirs_count": (16, "<H"),
             "bg_flags": (18, "<H"), "bg_itable_unused": (28, "<H")}


def gd_edit(name):
    def edit(m):
        g = m.rng.randrange(m.img.ngroups)
        off, fmt = GD_FIELDS[name]
        o = m.img.groups[g]["off"] + off
        cur = struct.unpack_from(fmt, m.d, o)[0]
        if fmt == "<I":
            val = m.block_value()
        elif name == "bg_flags":
            val = m.pick([1, 2, 4, 3, 0xFFFF])
        else:
            val = m.count_value(cur, 16)
        m.put(o, fmt, val, "group %d %s" % (g, name))
    return edit


def gd_flips(m):
    img = m.img
    if img.gdt_blocks == list(range(img.gdt_off // img.bs, img.gdt_off // img.bs + len(img.gdt_blocks))):
        m.flips([(img.gdt_off, img.desc_size * img.ngroups)], "descriptors")
    else:   # meta_bg: descriptor blocks spread over the groups
        m.flips([(g["off"], img.desc_size) for g in img.groups], "descriptors")


# ---------------------------------------------------------------------------
# bitmaps
def bitmap_bit(m, kind, index, value, what):
    """Set bit INDEX (0-based within the file system) of the block/inode bitmap."""
    img = m.img
    per = img.blocks_per_group if kind == "block" else img.inodes_per_group
    g, i = divmod(index, per)
    o = img.groups[g][kind + "_bitmap"] * img.bs + i // 8
    old = m.d[o] >> (i % 8) & 1
    if value:
        m.d[o] |= 1 << (i % 8)
    else:
        m.d[o] &= ~(1 << (i % 8)) & 0xFF
    m.log.append("%s bitmap bit of %s: %d -> %d" % (kind, what, old, value))


def bb_clear_owned(m):
    """A block a file (or directory, indirect or EA block) owns, marked free."""
    owned = sorted(b for b, (ino, _) in m.img.owner.items() if ino != m.img.journal_inum)
    if m.value is not None:
        owned = [int(m.value, 0)]
    b = m.rng.choice(owned)
    bitmap_bit(m, "block", b - m.img.first_data_block, 0, "block %d (%s)" % (b, m.img.owner.get(b)))


def bb_clear_meta(m):
    b = m.rng.choice(m.img.meta_blocks())
    bitmap_bit(m, "block", b - m.img.first_data_block, 0, "metadata block %d" % b)


def bb_set_free(m):
    b = m.free_block()
    bitmap_bit(m, "block", b - m.img.first_data_block, 1, "free block %d" % b)


def bitmap_fill(kind, byte):
    def edit(m):
        g = m.pick(range(m.img.ngroups))
        o = m.img.groups[g][kind + "_bitmap"] * m.img.bs
        m.d[o:o + m.img.bs] = bytes([byte]) * m.img.bs
        m.log.append("%s bitmap of group %d: all %#x" % (kind, g, byte))
    return edit


def bb_flips(m):
    img = m.img
    m.flips([(g["block_bitmap"] * img.bs, img.blocks_per_group // 8) for g in img.groups],
            "block bitmap")


def ib_clear_live(m):
    ino = int(m.value, 0) if m.value is not None else m.live_inode()
    bitmap_bit(m, "inode", ino - 1, 0, "live inode %d" % ino)


def ib_set_free(m):
    ino = m.free_inode()
    bitmap_bit(m, "inode", ino - 1, 1, "free inode %d" % ino)


def ib_flips(m):
    img = m.img
    m.flips([(g["inode_bitmap"] * img.bs, img.inodes_per_group // 8) for g in img.groups],
            "inode bitmap")


# ---------------------------------------------------------------------------
# inodes
def inode_field(name, off, fmt, values):
    def edit(m):
        ino = m.live_inode()
        o = m.img.inode_off(ino)
        if off >= 128 and m.img.inode_size <= 128:
            raise NoTarget("128-byte inodes have no " + name)
        cur = struct.unpack_from(fmt, m.d, o + off)[0]
        m.put(o + off, fmt, values(m, ino, cur), "inode %d %s" % (ino, name))
    return edit


def in_block_ptr(m):
    """i_block[k] of a file or directory, to a block it must not point to."""
    ino = m.live_inode([em.S_IFREG, em.S_IFDIR])
    o = m.img.inode_off(ino)
    ptrs = [k for k in range(15) if struct.unpack_from("<I", m.d, o + 40 + 4 * k)[0]]
    k = m.rng.choice(ptrs) if ptrs and m.rng.random() < 0.8 else m.rng.randrange(15)
    mine = set(m.img.data_blocks.get(ino, []))
    m.put(o + 40 + 4 * k, "<I", m.block_value(exclude=mine), "inode %d i_block[%d]" % (ino, k))


def in_flips(m):
    ino = m.live_inode()
    m.flips([(m.img.inode_off(ino), m.img.inode_size)], "inode %d" % ino)


INODE_EDITS = {
    "i_size": inode_field("i_size", 4, "<I", lambda m, i, c: m.pick(
        [0, 1, c + m.img.bs, max(c - m.img.bs, 0), 0x7FFFFFFF, 0xFFFFFFFF, m.rng.randrange(1 << 32)])),
    # bs / 2 + 1: a size of more than 2^31 blocks
    "i_size_high": inode_field("i_size_high", 108, "<I", lambda m, i, c: m.pick(
        [1, 0xFFFFFFFF, 0x100, m.img.bs // 2 + 1])),
    "i_links_count": inode_field("i_links_count", 26, "<H", lambda m, i, c: m.pick(
        [0, 1, c + 1, 65000, 65535])),
    "i_blocks": inode_field("i_blocks", 28, "<I", lambda m, i, c: m.count_value(c, 32)),
    "i_mode": inode_field("i_mode", 0, "<H", lambda m, i, c: m.pick(
        [(c & 0o7777) | t for t in (0o100000, 0o040000, 0o120000, 0o140000, 0o010000, 0o020000, 0)]
        + [c ^ 0o4000, 0xFFFF])),
    "i_flags": inode_field("i_flags", 32, "<I", lambda m, i, c: m.pick(
        [c ^ em.EXT2_INDEX_FL, c | 0x80000, c | 0x10, c | 0x20, c | 0x10000000, c | 0x4000,
         c ^ (1 << m.rng.randrange(32))])),
    "i_file_acl": inode_field("i_file_acl", 104, "<I", lambda m, i, c: m.block_value()),
    "i_dtime": inode_field("i_dtime", 20, "<I", lambda m, i, c: m.pick([1, 1700000000, m.free_inode()])),
    "i_extra_isize": inode_field("i_extra_isize", 128, "<H", lambda m, i, c: m.pick(
        [0, 2, 3, 4, 32, 100, 126, 200, 0xFFFF])),
    "i_block": in_block_ptr,
}


# ---------------------------------------------------------------------------
# directories
def dir_entries(m, blk):
    """[(offset in image, inode, rec_len, name_len)] of one directory block."""
    base, bs, out, o = blk * m.img.bs, m.img.bs, [], 0
    while o + 8 <= bs:
        ino, rl, nl = struct.unpack_from("<IHB", m.d, base + o)
        out.append((base + o, ino, rl, nl))
        if rl < 8 or rl % 4:
            break
        o += rl
    return out


def pick_dir_entry(m):
    blocks = [b for ino, b, root in m.img.dir_blocks if not root]
    if not blocks:
        raise NoTarget("no directory block")
    blk = m.rng.choice(blocks)
    ents = [e for e in dir_entries(m, blk) if e[1] or m.rng.random() < 0.2] or dir_entries(m, blk)
    return blk, m.rng.choice(ents)


def dir_field(name):
    def edit(m):
        blk, (o, ino, rl, nl) = pick_dir_entry(m)
        what = "dir block %d entry at +%d %s" % (blk, o - blk * m.img.bs, name)
        bs = m.img.bs
        if name == "rec_len":
            m.put(o + 4, "<H", m.pick([0, 4, 8, 9, 10, rl + 4, max(rl - 4, 0), bs, bs + 4, 0xFFFF]), what)
        elif name == "name_len":
            m.put(o + 6, "<B", m.pick([0, 255, nl + 1, max(rl - 8, 0) + 1, rl]), what)
        elif name == "inode":
            m.put(o, "<I", m.pick([0, 1, 7, 8, m.img.inodes_count, m.img.inodes_count + 1,
                                   0xFFFFFFFF, m.free_inode(), m.live_inode([em.S_IFDIR]),
                                   m.live_inode()]), what)
        elif name == "file_type":
            m.put(o + 7, "<B", m.pick([0, 1, 2, 7, 8, 255]), what)
        elif name == "name":
            if nl == 0:
                raise NoTarget("empty name")
            m.put(o + 8 + m.rng.randrange(nl), "<B", m.pick([0, ord("/"), ord("."), 0xFF]), what)
    return edit


def dir_dotdot(m):
    blocks = [b for ino, b, root in m.img.dir_blocks if root or True]
    firsts = {}
    for ino, b, root in m.img.dir_blocks:
        firsts.setdefault(ino, b)
    blk = m.rng.choice(sorted(firsts.values()))
    o = blk * m.img.bs + 12
    m.put(o, "<I", m.pick([0, 1, 11, m.live_inode([em.S_IFDIR]), m.live_inode(), m.free_inode(),
                           m.img.inodes_count + 9]), "dir block %d '..' inode" % blk)
    del blocks


def dir_flips(m):
    blocks = [b for ino, b, root in m.img.dir_blocks if not root]
    if not blocks:
        raise NoTarget("no directory block")
    blk = m.rng.choice(blocks)
    m.flips([(blk * m.img.bs, m.img.bs)], "dir block %d" % blk)


# ---------------------------------------------------------------------------
# htree (dx_root at +24 of an indexed directory's first block)
def pick_htree(m):
    roots = m.img.htree_blocks()
    if not roots:
        raise NoTarget("no htree")
    return m.rng.choice(roots)


def dx_field(name):
    def edit(m):
        blk, kind = pick_htree(m)
        base = blk * m.img.bs
        hdr = base + (32 if kind == "root" else 8)   # limit, count, block0
        limit, count = struct.unpack_from("<HH", m.d, hdr)
        what = "htree %s %d %s" % (kind, blk, name)
        if name in ("hash_version", "info_length", "indirect_levels", "unused_flags"):
            if kind != "root":
                raise NoTarget("not a root")
            off = {"hash_version": 28, "info_length": 29, "indirect_levels": 30, "unused_flags": 31}[name]
            vals = {"hash_version": [1, 2, 3, 4, 5, 6, 255], "info_length": [0, 7, 9, 255],
                    "indirect_levels": [1, 2, 3, 8, 255], "unused_flags": [1, 0x80, 255]}[name]
            m.put(base + off, "<B", m.pick(vals), what)
        elif name == "limit":
            m.put(hdr, "<H", m.pick([0, 1, max(count - 1, 0), limit + 1, limit * 2, 0xFFFF]), what)
        elif name == "count":
            m.put(hdr + 2, "<H", m.pick([0, 1, limit, limit + 1, 0xFFFF]), what)
        elif name == "block":
            k = m.rng.randrange(max(count, 1))
            nblocks = len(m.img.data_blocks.get(m.img.owner.get(blk, (0,))[0], []))
            m.put(hdr + 4 + 8 * k if k else hdr + 4, "<I",
                  m.pick([0, nblocks, nblocks + 1, 0xFFFFFFFF, m.rng.randrange(nblocks + 3)]),
                  what + "[%d]" % k)
        elif name == "hash":
            if count < 2:
                raise NoTarget("one entry")
            k = m.rng.randrange(1, count)
            m.put(hdr + 8 * k, "<I", m.pick([0, 1, 0xFFFFFFFF, m.rng.randrange(1 << 32)]), what + "[%d]" % k)
    return edit


def dx_fake_dirents(m):
    """The '.' and '..' entries that hide the index from linear readers."""
    blk, kind = pick_htree(m)
    if kind != "root":
        raise NoTarget("not a root")
    base, bs = blk * m.img.bs, m.img.bs
    if m.rng.random() < 0.5:
        m.put(base + 16, "<H", m.pick([0, 8, 12, bs - 16, bs - 8, bs, 0xFFFF]),
              "htree root %d '..' rec_len" % blk)
    else:
        m.put(base + 4, "<H", m.pick([0, 8, 16, bs - 12, bs]), "htree root %d '.' rec_len" % blk)


def dx_flips(m):
    blk, kind = pick_htree(m)
    base = blk * m.img.bs
    count = struct.unpack_from("<H", m.d, base + (34 if kind == "root" else 10))[0]
    start = 24 if kind == "root" else 0
    end = (32 if kind == "root" else 8) + 8 * max(count, 1)
    m.flips([(base + start, end - start)], "htree %s %d" % (kind, blk))


# ---------------------------------------------------------------------------
# indirect blocks
def pick_ind(m):
    inds = [(i, b, l) for i, b, l in m.img.ind_blocks if i != m.img.journal_inum]
    if not inds:
        raise NoTarget("no indirect block")
    return m.rng.choice(inds)


def ind_entry(m):
    ino, blk, lvl = pick_ind(m)
    base = blk * m.img.bs
    used = [k for k in range(m.img.bs // 4) if struct.unpack_from("<I", m.d, base + 4 * k)[0]]
    k = m.rng.choice(used) if used and m.rng.random() < 0.8 else m.rng.randrange(m.img.bs // 4)
    m.put(base + 4 * k, "<I", m.block_value(exclude=set(m.img.data_blocks.get(ino, []))),
          "inode %d level-%d indirect block %d [%d]" % (ino, lvl, blk, k))


def ind_duplicate(m):
    ino, blk, lvl = pick_ind(m)
    base = blk * m.img.bs
    used = [k for k in range(m.img.bs // 4) if struct.unpack_from("<I", m.d, base + 4 * k)[0]]
    if len(used) < 2:
        raise NoTarget("one entry")
    a, b = m.rng.sample(used, 2)
    m.put(base + 4 * b, "<I", struct.unpack_from("<I", m.d, base + 4 * a)[0],
          "inode %d indirect block %d [%d] = [%d]" % (ino, blk, b, a))


def ind_fill(m):
    ino, blk, lvl = pick_ind(m)
    byte = m.pick([0, 0xFF, 0x11])
    m.d[blk * m.img.bs:(blk + 1) * m.img.bs] = bytes([byte]) * m.img.bs
    m.log.append("inode %d indirect block %d: all %#x" % (ino, blk, byte))


def ind_flips(m):
    ino, blk, lvl = pick_ind(m)
    m.flips([(blk * m.img.bs, m.img.bs)], "inode %d indirect block %d" % (ino, blk))


# ---------------------------------------------------------------------------
# extended attributes: EA blocks, and the in-inode area of 256-byte inodes
def pick_ea(m):
    """(offset of the header's magic, offset of the first entry, region end, what)."""
    places = [("block", b) for b in sorted(m.img.ea_blocks)]
    places += [("inode", i) for i in m.img.inline_ea]
    if not places:
        raise NoTarget("no xattrs")
    kind, x = m.rng.choice(places)
    if kind == "block":
        base = x * m.img.bs
        return base, base + 32, base + m.img.bs, base, "EA block %d" % x
    o = m.img.inode_off(x)
    extra = struct.unpack_from("<H", m.d, o + 128)[0]
    return o + 128 + extra, o + 128 + extra + 4, o + m.img.inode_size, o + 128 + extra + 4, \
        "in-inode xattrs of %d" % x


def ea_entries(m, first, end):
    out, o = [], first
    while o + 16 <= end:
        nl = m.d[o]
        if nl == 0 and struct.unpack_from("<I", m.d, o)[0] == 0:
            break
        out.append(o)
        o += (16 + nl + 3) & ~3
    return out


def ea_field(name):
    def edit(m):
        hdr, first, end, vbase, what = pick_ea(m)
        is_block = first - hdr == 32
        if name in ("h_magic", "h_refcount", "h_blocks"):
            if not is_block and name != "h_magic":
                raise NoTarget("in-inode area has no " + name)
            off = {"h_magic": 0, "h_refcount": 4, "h_blocks": 8}[name]
            cur = struct.unpack_from("<I", m.d, hdr + off)[0]
            vals = {"h_magic": [0, em.EA_MAGIC ^ 1, 0xEA010000],
                    "h_refcount": [0, 1, 2, cur + 1, 1024, 0xFFFFFFFF],
                    "h_blocks": [0, 2, 0xFFFF]}[name]
            m.put(hdr + off, "<I", m.pick(vals), what + " " + name)
            return
        ents = ea_entries(m, first, end)
        if not ents:
            raise NoTarget("no entries")
        e = m.rng.choice(ents)
        space = end - vbase
        fields = {"e_name_len": (0, "<B", [0, 1, 100, 255]),
                  "e_name_index": (1, "<B", [0, 5, 8, 99, 255]),
                  "e_value_offs": (2, "<H", [0, 1, 2, space - 2, space, space + 4, 0xFFFF]),
                  "e_value_inum": (4, "<I", [1, 12, m.live_inode(), 0xFFFFFFFF]),
                  "e_value_size": (8, "<I", [0, 1, space, space + 1, 0x10000, 0xFFFFFFFF]),
                  "e_hash": (12, "<I", [0, m.rng.randrange(1 << 32)])}
        off, fmt, vals = fields[name]
        m.put(e + off, fmt, m.pick(vals), "%s entry at +%d %s" % (what, e - hdr, name))
    return edit


def ea_flips(m):
    hdr, first, end, vbase, what = pick_ea(m)
    m.flips([(hdr, end - hdr)], what)


# ---------------------------------------------------------------------------
# the journal
JSB_FIELDS = {"h_magic": (0, ">I"), "h_blocktype": (4, ">I"), "s_blocksize": (12, ">I"),
              "s_maxlen": (16, ">I"), "s_first": (20, ">I"), "s_sequence": (24, ">I"),
              "s_start": (28, ">I"), "s_errno": (32, ">I"), "s_feature_compat": (36, ">I"),
              "s_feature_incompat": (40, ">I"), "s_feature_ro_compat": (44, ">I"),
              "s_nr_users": (64, ">I"), "s_max_transaction": (72, ">I")}


def jsb_block(m):
    blk, _ = m.img.journal()
    if blk is None:
        raise NoTarget("no journal")
    return blk * m.img.bs


def jsb_edit(name):
    def edit(m):
        base = jsb_block(m)
        off, fmt = JSB_FIELDS[name]
        cur = struct.unpack_from(fmt, m.d, base + off)[0]
        maxlen = struct.unpack_from(">I", m.d, base + 16)[0]
        vals = {"h_magic": [0, em.JBD_MAGIC ^ 0x100], "h_blocktype": [1, 2, 3, 5, 99],
                "s_blocksize": [0, 512, 1024, 2048, 4096, 8192, 0xFFFFFFFF],
                "s_maxlen": [0, 1, 10, maxlen - 1, maxlen + 1, maxlen * 4, 0xFFFFFFFF],
                "s_first": [0, 1, 2, maxlen - 1, maxlen, 0xFFFFFFFF],
                "s_start": [0, 1, 2, maxlen - 1, maxlen, 0xFFFFFFFF],
                "s_sequence": [0, cur + 1, max(cur - 1, 0), 0xFFFFFFFF],
                "s_errno": [1, 0xFFFFFFFB],
                "s_feature_compat": [1, 0xFFFFFFFF], "s_feature_incompat": [1, 2, 4, 8, 0x10, 0x20, 0x80],
                "s_feature_ro_compat": [1, 0xFFFFFFFF], "s_nr_users": [0, 2, 48, 49, 0xFFFFFFFF],
                "s_max_transaction": [1, 0xFFFFFFFF]}[name]
        m.put(base + off, fmt, m.pick(vals), "journal superblock " + name)
    return edit


def jsb_replay_garbage(m):
    """needs_recovery with the log starting at a block that holds no transaction."""
    base = jsb_block(m)
    maxlen = struct.unpack_from(">I", m.d, base + 16)[0]
    m.put(base + 28, ">I", m.pick([1, 2, maxlen // 2, maxlen - 1]), "journal superblock s_start")
    inc = struct.unpack_from("<I", m.d, em.SB_OFF + 96)[0]
    m.put(em.SB_OFF + 96, "<I", inc | 0x4, "superblock s_feature_incompat (needs_recovery)")


def jsb_flips(m):
    m.flips([(jsb_block(m), 256)], "journal superblock")


def pick_log(m, kinds):
    _, log = m.img.journal()
    cands = [(b, k) for b, k in log if k in kinds]
    if not cands:
        raise NoTarget("no %s block in the journal" % "/".join(kinds))
    return m.rng.choice(cands)


def jb_tag(m):
    blk, _ = pick_log(m, ("descriptor",))
    base = blk * m.img.bs
    fmt = m.img.journal_format()
    tags, o = [], 12
    while o + fmt.tag_bytes <= m.img.bs - fmt.tail:
        flags = struct.unpack_from(">H", m.d, base + o + 6)[0]
        tags.append(o)
        o += fmt.tag_bytes + (0 if flags & 2 else 16)
        if flags & 8:
            break
    o = m.rng.choice(tags)
    if fmt.bit64 and m.rng.random() < 0.3:
        m.put(base + o + 8, ">I", m.pick([1, 0xFFFF, 0xFFFFFFFF]),
              "journal descriptor %d tag at +%d t_blocknr_high" % (blk, o))
    elif m.rng.random() < 0.6:
        m.put(base + o, ">I", m.block_value(), "journal descriptor %d tag at +%d t_blocknr" % (blk, o))
    else:
        cur = struct.unpack_from(">H", m.d, base + o + 6)[0]
        m.put(base + o + 6, ">H", m.pick([cur | 8, cur & ~8, cur ^ 1, cur ^ 2, cur | 4, 0xFFFF]),
              "journal descriptor %d tag at +%d t_flags" % (blk, o))


def jb_commit(m):
    blk, _ = pick_log(m, ("commit",))
    base = blk * m.img.bs
    seq = struct.unpack_from(">I", m.d, base + 8)[0]
    if m.rng.random() < 0.5:
        m.put(base + 8, ">I", m.pick([seq + 1, seq - 1, 0]), "journal commit %d h_sequence" % blk)
    else:
        m.put(base + 4, ">I", m.pick([1, 5, 9]), "journal commit %d h_blocktype" % blk)


def jb_revoke(m):
    blk, _ = pick_log(m, ("revoke",))
    base = blk * m.img.bs
    rec = m.img.journal_format().revoke_rec
    cnt = struct.unpack_from(">I", m.d, base + 12)[0]
    if m.rng.random() < 0.5 or cnt <= 16:
        m.put(base + 12, ">I", m.pick([0, 4, 15, cnt + 4, m.img.bs, m.img.bs + 4, 0xFFFFFFFF]),
              "journal revoke %d r_count" % blk)
    else:
        k = m.rng.randrange((cnt - 16) // rec)
        v = m.block_value()
        if rec == 8:
            m.put(base + 16 + 8 * k, ">Q", m.pick([v, 1 << 32, (1 << 64) - 1]),
                  "journal revoke %d [%d]" % (blk, k))
        else:
            m.put(base + 16 + 4 * k, ">I", v, "journal revoke %d [%d]" % (blk, k))


def jb_flips(m):
    blk, kind = pick_log(m, ("descriptor", "commit", "revoke", "data"))
    n = m.img.bs if kind == "data" else 64
    m.flips([(blk * m.img.bs, n)], "journal %s block %d" % (kind, blk))


# ---------------------------------------------------------------------------
EDITS = {
    "sb": dict([(f, sb_edit(f)) for f in SB_FIELDS] + [("flips", sb_flips)]),
    "gdt": dict([(f, gd_edit(f)) for f in GD_FIELDS] + [("flips", gd_flips)]),
    "bbitmap": {"clear_owned": bb_clear_owned, "clear_meta": bb_clear_meta, "set_free": bb_set_free,
                "zero_group": bitmap_fill("block", 0), "ones_group": bitmap_fill("block", 0xFF),
                "flips": bb_flips},
    "ibitmap": {"clear_live": ib_clear_live, "set_free": ib_set_free,
                "zero_group": bitmap_fill("inode", 0), "ones_group": bitmap_fill("inode", 0xFF),
                "flips": ib_flips},
    "inode": dict(list(INODE_EDITS.items()) + [("flips", in_flips)]),
    "dir": dict([(f, dir_field(f)) for f in ("rec_len", "name_len", "inode", "file_type", "name")]
                + [("dotdot", dir_dotdot), ("flips", dir_flips)]),
    "htree": dict([(f, dx_field(f)) for f in ("hash_version", "info_length", "indirect_levels",
                                              "unused_flags", "limit", "count", "block", "hash")]
                  + [("fake_dirents", dx_fake_dirents), ("flips", dx_flips)]),
    "ind": {"entry": ind_entry, "duplicate": ind_duplicate, "fill": ind_fill, "flips": ind_flips},
    "ea": dict([(f, ea_field(f)) for f in ("h_magic", "h_refcount", "h_blocks", "e_name_len",
                                           "e_name_index", "e_value_offs", "e_value_inum",
                                           "e_value_size", "e_hash")] + [("flips", ea_flips)]),
    "jsb": dict([(f, jsb_edit(f)) for f in JSB_FIELDS]
                + [("replay_garbage", jsb_replay_garbage), ("flips", jsb_flips)]),
    "jblk": {"tag": jb_tag, "commit": jb_commit, "revoke": jb_revoke, "flips": jb_flips},
    "none": {"none": lambda m: None},
}
EDITS.update(mutate_ext4.EDITS)


def parse_spec(spec):
    """(base, class, seed, edit, value, repair checksums)."""
    parts = spec.split("/")
    cls, plus, flag = parts[1].partition("+") if len(parts) > 1 else ("", "", "")
    if len(parts) not in (3, 4) or cls not in CLASSES or (plus and flag != "csum"):
        raise ValueError("bad mutant %r: BASE/CLASS[+csum]/SEED[/EDIT[=VALUE]], CLASS one of %s"
                         % (spec, " ".join(CLASSES)))
    base, seed = parts[0], int(parts[2])
    edit, value = None, None
    if len(parts) == 4:
        edit, _, value = parts[3].partition("=")
        value = value or None
        if edit not in EDITS[cls]:
            raise ValueError("class %s has no edit %r (%s)" % (cls, edit, " ".join(EDITS[cls])))
    return base, cls, seed, edit, value, bool(plus)


def mutate(spec, data):
    """Apply mutant SPEC to bytearray DATA (the base image); returns the log.
    Raises NoTarget when the base has nothing of the class."""
    base, cls, seed, edit, value, repair = parse_spec(spec)
    rng = random.Random("%s/%s/%d" % (base, cls, seed))
    orig = bytes(data)
    img = em.Image(orig)
    table = EDITS[cls]
    if edit is None:
        flips = "flips" in table and rng.random() < 0.5
        names = sorted(n for n in table if n != "flips")
        edit = "flips" if flips or not names else rng.choice(names)
    m = Mutation(data, img, rng, value)
    table[edit](m)
    log = ["%s %s" % (edit, line) for line in m.log] or [edit]
    if repair:
        log += mutate_ext4.repair(orig, data, img)
    return log


def main(argv):
    if argv[1:2] == ["--list"]:
        for cls in CLASSES:
            print("%-8s %s" % (cls, " ".join(EDITS[cls])))
        return 0
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    spec, src, dst = argv[1:]
    data = bytearray(open(src, "rb").read())
    try:
        log = mutate(spec, data)
    except NoTarget as e:
        print("%s: no target: %s" % (spec, e), file=sys.stderr)
        return 3
    open(dst, "wb").write(data)
    print("\n".join(log))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
