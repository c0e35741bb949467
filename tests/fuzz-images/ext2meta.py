"""ext2meta.py - find the metadata of a small ext2/ext3/ext4 image, by parsing it.

The fuzzer's own reader (struct on the superblock, descriptors of 32 or 64
bytes, inodes, block maps, extent trees, inline data, and the journal's log
with any tag format; formats from ext2_fs.h, ext4's on-disk documentation and
the JBD2 documentation), so mutants can be aimed at one class of metadata.
It trusts nothing it did not parse from the base image, which is clean when
it is read.
"""
import struct

SB_OFF = 1024
EXT2_ROOT_INO = 2
JOURNAL_INO = 8
S_IFMT, S_IFDIR, S_IFREG, S_IFLNK = 0o170000, 0o040000, 0o100000, 0o120000
EXT2_INDEX_FL = 0x1000
EXT4_EXTENTS_FL = 0x80000
EXT4_INLINE_DATA_FL = 0x10000000
EXT_MAGIC = 0xF30A
INCOMPAT_64BIT, INCOMPAT_INLINE_DATA, INCOMPAT_META_BG = 0x80, 0x8000, 0x10
COMPAT_SPARSE_SUPER2, COMPAT_ORPHAN_FILE, RO_COMPAT_SPARSE_SUPER = 0x200, 0x1000, 0x1
EA_MAGIC = 0xEA020000
JBD_MAGIC = 0xC03B3998


class NoTarget(Exception):
    """The base has nothing of this class to damage."""


def u16(b, o): return struct.unpack_from("<H", b, o)[0]
def u32(b, o): return struct.unpack_from("<I", b, o)[0]
def be32(b, o): return struct.unpack_from(">I", b, o)[0]
def u48(b, o_hi16, o_lo32): return u16(b, o_hi16) << 32 | u32(b, o_lo32)


class Image:
    """The layout of one image: offsets and roles of its metadata blocks."""

    def __init__(self, data):
        self.data = data
        sb = data[SB_OFF:SB_OFF + 1024]
        self.sb = sb
        self.inodes_count = u32(sb, 0)
        self.compat = u32(sb, 92)
        self.incompat = u32(sb, 96)
        self.ro_compat = u32(sb, 100)
        self.is64 = bool(self.incompat & INCOMPAT_64BIT)
        self.blocks_count = u32(sb, 4) | ((u32(sb, 0x150) << 32) if self.is64 else 0)
        self.desc_size = u16(sb, 254) if self.is64 else 32
        self.metadata_csum = bool(self.ro_compat & 0x400)
        self.first_data_block = u32(sb, 20)
        self.bs = 1024 << u32(sb, 24)
        self.blocks_per_group = u32(sb, 32)
        self.inodes_per_group = u32(sb, 40)
        self.rev = u32(sb, 76)
        self.inode_size = u16(sb, 88) if self.rev else 128
        self.first_ino = u32(sb, 84) if self.rev else 11
        self.journal_inum = u32(sb, 224)
        self.orphan_file_inum = u32(sb, 0x280) if self.compat & COMPAT_ORPHAN_FILE else 0
        self.ngroups = (self.blocks_count - self.first_data_block
                        + self.blocks_per_group - 1) // self.blocks_per_group
        gdt_block = self.first_data_block + 1
        self.gdt_off = gdt_block * self.bs
        self.gdt_blocks = self._descriptor_blocks()
        per_block = self.bs // self.desc_size
        self.groups = []
        for g in range(self.ngroups):
            o = self.gdt_blocks[g // per_block] * self.bs + self.desc_size * (g % per_block)

            def field(lo):   # a block number: its high half at +32 in 64-byte descriptors
                return u32(data, o + lo) | (u32(data, o + 32 + lo) << 32 if self.desc_size >= 64 else 0)
            self.groups.append(dict(off=o, block_bitmap=field(0), inode_bitmap=field(4),
                                    inode_table=field(8), flags=u16(data, o + 18)))
        self.itable_blocks = (self.inodes_per_group * self.inode_size
                              + self.bs - 1) // self.bs
        self._scan_inodes()

    def has_super(self, g):
        """Whether group G holds a superblock (and so a descriptor copy)."""
        if g == 0:
            return True
        if self.compat & COMPAT_SPARSE_SUPER2:
            return g in (u32(self.sb, 0x24C), u32(self.sb, 0x250))
        if not self.ro_compat & RO_COMPAT_SPARSE_SUPER or g == 1:
            return True
        for p in (3, 5, 7):
            n = p
            while n < g:
                n *= p
            if n == g:
                return True
        return False

    def _descriptor_blocks(self):
        """The block of each descriptor block's primary copy: after group 0's
        superblock, and with meta_bg, from s_first_meta_bg on, in the first
        group of each meta group (after its superblock backup if any)."""
        per_block = self.bs // self.desc_size
        n = (self.ngroups + per_block - 1) // per_block
        first_meta = u32(self.sb, 260) if self.incompat & INCOMPAT_META_BG else n
        out = []
        for k in range(n):
            if k < first_meta:
                out.append(self.first_data_block + 1 + k)
            else:
                g = k * per_block
                out.append(self.first_data_block + g * self.blocks_per_group + self.has_super(g))
        return out

    # -- inodes -------------------------------------------------------------
    def inode_off(self, ino):
        g, i = divmod(ino - 1, self.inodes_per_group)
        return self.groups[g]["inode_table"] * self.bs + i * self.inode_size

    def inode_in_use(self, ino):
        g, i = divmod(ino - 1, self.inodes_per_group)
        if self.groups[g]["flags"] & 1 and self.ro_compat & 0x410:   # INODE_UNINIT
            return False
        b = self.groups[g]["inode_bitmap"] * self.bs
        return bool(self.data[b + i // 8] >> (i % 8) & 1)

    def block_in_use(self, blk):
        g, i = divmod(blk - self.first_data_block, self.blocks_per_group)
        b = self.groups[g]["block_bitmap"] * self.bs
        return bool(self.data[b + i // 8] >> (i % 8) & 1)

    def block(self, blk):
        return self.data[blk * self.bs:(blk + 1) * self.bs]

    def _extent_map(self, off):
        """(data blocks in logical order, [(tree block, depth below it)],
        [(logical, physical, length, unwritten)]) of an extent-mapped inode."""
        d, bs = self.data, self.bs
        data_blocks, tree, extents = [], [], []

        def node(o, depth_expected, limit):
            if u16(d, o) != EXT_MAGIC:
                return
            entries, depth = u16(d, o + 2), u16(d, o + 6)
            if depth != depth_expected or entries > limit:
                return
            for k in range(entries):
                e = o + 12 + 12 * k
                if depth == 0:
                    lblk, ln = u32(d, e), u16(d, e + 4)
                    unwritten = ln > 32768
                    ln = ln - 32768 if unwritten else ln
                    start = u48(d, e + 6, e + 8)
                    extents.append((lblk, start, ln, unwritten))
                    if start + ln <= self.blocks_count:
                        data_blocks.extend(range(start, start + ln))
                else:
                    child = u48(d, e + 8, e + 4)
                    if self.first_data_block < child < self.blocks_count and \
                            all(b != child for b, _ in tree):
                        tree.append((child, depth - 1))
                        node(child * bs, depth - 1, (bs - 12) // 12)
        node(off + 40, u16(d, off + 46), 4)
        return data_blocks, tree, extents

    def _block_map(self, ino, off):
        """(logical -> physical data blocks, [(indirect block, level)])."""
        d, per = self.data, self.bs // 4
        data_blocks, ind = [], []

        def walk(blk, level):
            if blk == 0 or blk >= self.blocks_count:
                return
            if level == 0:
                data_blocks.append(blk)
                return
            ind.append((blk, level))
            for k in range(per):
                walk(u32(d, blk * self.bs + 4 * k), level - 1)
        for k in range(15):
            walk(u32(d, off + 40 + 4 * k), 0 if k < 12 else k - 11)
        return data_blocks, ind

    def _scan_inodes(self):
        self.live = []        # (ino, mode) of live inodes with links
        self.files, self.dirs, self.symlinks = [], [], []
        self.owner = {}       # block -> (ino, role)
        self.dir_blocks = []  # (ino, block, is_htree_root)
        self.ind_blocks = []  # (ino, block, level)
        self.ea_blocks = {}   # block -> [inos]
        self.inline_ea = []   # inos with an in-inode EA area
        self.data_blocks = {} # ino -> [blocks]
        self.ext_inodes = []  # inos mapped by extents
        self.ext_blocks = []  # (ino, block, depth below it): extent index and leaf blocks
        self.extents = {}     # ino -> [(logical, physical, length, unwritten)]
        self.inline = []      # (ino, kind): inodes with inline data
        for ino in range(1, self.inodes_count + 1):
            if ino != EXT2_ROOT_INO and ino != self.journal_inum and ino < self.first_ino:
                continue
            if not self.inode_in_use(ino):
                continue
            off = self.inode_off(ino)
            mode, links = u16(self.data, off), u16(self.data, off + 26)
            if mode == 0:
                continue
            kind = mode & S_IFMT
            acl = u32(self.data, off + 104)
            if acl:
                self.ea_blocks.setdefault(acl, []).append(ino)
                self.owner[acl] = (ino, "ea")
            if self.inode_size > 128:
                extra = u16(self.data, off + 128)
                if 128 + extra + 4 <= self.inode_size and \
                        u32(self.data, off + 128 + extra) == EA_MAGIC:
                    self.inline_ea.append(ino)
            iblocks = u32(self.data, off + 28)
            flags = u32(self.data, off + 32)
            if flags & EXT4_INLINE_DATA_FL:
                self.inline.append((ino, {S_IFDIR: "dir", S_IFREG: "file", S_IFLNK: "symlink"}
                                    .get(kind, "other")))
                self.live.append((ino, mode))
                (self.dirs if kind == S_IFDIR else self.files if kind == S_IFREG else
                 self.symlinks).append(ino if kind != S_IFLNK else (ino, "inline"))
                continue
            if kind == S_IFLNK and iblocks - (self.bs // 512 if acl else 0) == 0:
                self.symlinks.append((ino, "fast"))
                self.live.append((ino, mode))
                continue
            if flags & EXT4_EXTENTS_FL:
                blocks, tree, extents = self._extent_map(off)
                self.ext_inodes.append(ino)
                self.extents[ino] = extents
                for b, depth in tree:
                    self.ext_blocks.append((ino, b, depth))
                    self.owner[b] = (ino, "ext%d" % depth)
            else:
                blocks, ind = self._block_map(ino, off)
                for b, lvl in ind:
                    self.ind_blocks.append((ino, b, lvl))
                    self.owner[b] = (ino, "ind%d" % lvl)
            self.data_blocks[ino] = blocks
            for n, b in enumerate(blocks):
                self.owner[b] = (ino, "data")
                if kind == S_IFDIR:
                    self.dir_blocks.append((ino, b, n == 0 and bool(flags & EXT2_INDEX_FL)))
            if ino == self.journal_inum:
                continue
            self.live.append((ino, mode))
            if kind == S_IFDIR:
                self.dirs.append(ino)
            elif kind == S_IFREG:
                self.files.append(ino)
            elif kind == S_IFLNK:
                self.symlinks.append((ino, "slow"))

    # -- metadata regions -----------------------------------------------------
    def meta_blocks(self):
        """Blocks that hold fixed metadata: superblock/descriptors (group 0),
        bitmaps and inode tables of every group."""
        out = [self.first_data_block] + list(self.gdt_blocks)
        for g in self.groups:
            out += [g["block_bitmap"], g["inode_bitmap"]]
            out += list(range(g["inode_table"], g["inode_table"] + self.itable_blocks))
        return out

    def htree_blocks(self):
        """(block, kind): 'root' for the first block of an indexed directory,
        'node' for its interior index blocks (depth > 0)."""
        out = []
        for ino, b, is_root in self.dir_blocks:
            if not is_root:
                continue
            out.append((b, "root"))
            blk = self.block(b)
            levels = blk[30]
            if levels:
                count = u16(blk, 34)
                for k in range(count):
                    child = u32(blk, 36 + 8 * k) if k else u32(blk, 36)
                    phys = self._logical(ino, child)
                    if phys:
                        out.append((phys, "node"))
        return out

    def _logical(self, ino, lblk):
        blocks = self.data_blocks.get(ino, [])
        return blocks[lblk] if lblk < len(blocks) else None

    def journal_format(self):
        """The journal's csum.Jbd (tag size, tail, checksum seed), or None."""
        import csum
        blocks = self.data_blocks.get(self.journal_inum, [])
        if not blocks or be32(self.block(blocks[0]), 0) != JBD_MAGIC:
            return None
        return csum.Jbd(self.block(blocks[0]), self.bs)

    def journal(self):
        """(journal superblock block, [(block, kind)] of the log's blocks:
        'descriptor', 'commit', 'revoke', 'data' as a scan from s_start finds
        them; [] when the journal is empty).  Also self.jinfo: block ->
        (kind, tid, descriptor block, tag offset) (the last two for data)."""
        self.jinfo = {}
        blocks = self.data_blocks.get(self.journal_inum, [])
        if not blocks:
            return None, []
        jsb = self.block(blocks[0])
        if be32(jsb, 0) != JBD_MAGIC:
            return blocks[0], []
        fmt = self.journal_format()
        maxlen, first, seq, start = be32(jsb, 16), be32(jsb, 20), be32(jsb, 24), be32(jsb, 28)
        log = []
        if start == 0:
            return blocks[0], log
        i, tid = start, seq

        def add(blk, kind, desc=None, tag_off=None):
            log.append((blk, kind))
            self.jinfo[blk] = (kind, tid, desc, tag_off)
        for _ in range(maxlen):
            if i >= len(blocks) or i >= maxlen:
                break
            blk = self.block(blocks[i])
            if be32(blk, 0) != JBD_MAGIC or be32(blk, 8) != tid:
                break
            btype = be32(blk, 4)
            if btype == 1:
                desc = blocks[i]
                add(desc, "descriptor")
                o = 12
                while o + fmt.tag_bytes <= self.bs - fmt.tail:
                    flags = struct.unpack_from(">H", blk, o + 6)[0]
                    i = i + 1 if i + 1 < maxlen else first
                    if i < len(blocks):
                        add(blocks[i], "data", desc, o)
                    o += fmt.tag_bytes + (0 if flags & 2 else 16)
                    if flags & 8:   # last tag
                        break
            elif btype == 2:
                add(blocks[i], "commit")
                tid += 1
            elif btype == 5:
                add(blocks[i], "revoke")
            else:
                break
            i = i + 1 if i + 1 < maxlen else first
        return blocks[0], log
