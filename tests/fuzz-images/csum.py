"""csum.py - the checksums of ext4's metadata_csum and of jbd2's checksum v3,
so that a mutant can carry repaired checksums: the structure it damages is
then what the reader meets, not a checksum mismatch.

All are crc32c (Castagnoli, bit-reflected) without the final inversion, as
the kernel and e2fsprogs use it; the formulas (what each covers, what seeds
it, which field counts as zero) are their on-disk format, written from the
kernel's documentation and checked against images the kernel made.
"""
import struct

_POLY = 0x82F63B78   # crc32c, reflected


def _table():
    out = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        out.append(c)
    return out


_TABLE = _table()


def crc32c(crc, data):
    """crc32c of DATA continuing CRC, no inversions (ext4's ext4_chksum)."""
    t = _TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def _check():
    # the standard check value: crc32c("123456789") with both inversions
    assert crc32c(0xFFFFFFFF, b"123456789") ^ 0xFFFFFFFF == 0xE3069283


_check()


def le32(v):
    return struct.pack("<I", v & 0xFFFFFFFF)


def _u16(b, o): return struct.unpack_from("<H", b, o)[0]
def _u32(b, o): return struct.unpack_from("<I", b, o)[0]


# ---------------------------------------------------------------------------
# ext4 (metadata_csum)
SB_CSUM = 0x3FC
GD_CSUM = 0x1E
I_GENERATION, I_CSUM_LO, I_EXTRA_ISIZE, I_CSUM_HI = 0x64, 0x7C, 0x80, 0x82
EA_CSUM = 0x10
LEAF_TAIL = 12        # the fake entry ending a leaf block
DX_TAIL = 8           # dt_reserved, dt_checksum


class Ext4:
    """The checksum seeds of one file system, from its superblock."""

    def __init__(self, sb):
        ro, inc = _u32(sb, 0x64), _u32(sb, 0x60)
        self.enabled = bool(ro & 0x400)               # metadata_csum
        self.seed = _u32(sb, 0x270) if inc & 0x2000 else crc32c(0xFFFFFFFF, sb[0x68:0x78])
        self.desc_size = _u16(sb, 0xFE) if inc & 0x80 else 32
        self.inode_size = _u16(sb, 0x58)

    # -- superblock and descriptors -------------------------------------------
    @staticmethod
    def sb_set(d, off):
        struct.pack_into("<I", d, off + SB_CSUM, crc32c(0xFFFFFFFF, d[off:off + SB_CSUM]))

    def gd_set(self, d, off, group):
        desc = bytearray(d[off:off + self.desc_size])
        desc[GD_CSUM:GD_CSUM + 2] = b"\0\0"
        c = crc32c(crc32c(self.seed, le32(group)), desc)
        struct.pack_into("<H", d, off + GD_CSUM, c & 0xFFFF)

    # -- inodes and what they own ----------------------------------------------
    def inode_seed(self, ino, generation):
        return crc32c(crc32c(self.seed, le32(ino)), le32(generation))

    def inode_set(self, d, off, ino):
        raw = bytearray(d[off:off + self.inode_size])
        hi = self.inode_size > 128 and _u16(raw, I_EXTRA_ISIZE) >= 4
        raw[I_CSUM_LO:I_CSUM_LO + 2] = b"\0\0"
        if hi:
            raw[I_CSUM_HI:I_CSUM_HI + 2] = b"\0\0"
        c = crc32c(self.inode_seed(ino, _u32(raw, I_GENERATION)), raw)
        struct.pack_into("<H", d, off + I_CSUM_LO, c & 0xFFFF)
        if hi:
            struct.pack_into("<H", d, off + I_CSUM_HI, c >> 16)

    @staticmethod
    def extent_set(d, off, bs, iseed):
        """An extent block's tail, after eh_max entries; False if no room."""
        tail = 12 + 12 * _u16(d, off + 4)
        if tail + 4 > bs:
            return False
        struct.pack_into("<I", d, off + tail, crc32c(iseed, d[off:off + tail]))
        return True

    @staticmethod
    def leaf_tail(d, off, bs):
        """Offset in the block of a leaf's tail entry, reached by walking
        rec_len from the start; None when the chain does not end on one."""
        o, top = 0, bs - LEAF_TAIL
        while o < top:
            rl = _u16(d, off + o + 4)
            if rl < 8 or rl % 4:
                return None
            o += rl
        if o != top:
            return None
        t = off + top
        if _u32(d, t) == 0 and _u16(d, t + 4) == 12 and _u16(d, t + 6) == 0xDE00:
            return top
        return None

    @staticmethod
    def dx_offsets(d, off, bs, root):
        """(count/limit offset, tail offset) of an index block; None when its
        limit leaves no room for a tail."""
        co = 32 if root else 8
        limit, count = _u16(d, off + co), _u16(d, off + co + 2)
        tail = co + 8 * limit
        if tail + DX_TAIL > bs or count > limit:
            return None
        return co, tail

    def dir_set(self, d, off, bs, iseed, dx=None):
        """A directory block's checksum: DX None for a leaf, 'root' or 'node'
        for an index block.  False when the block has no place for it."""
        if dx is None:
            t = self.leaf_tail(d, off, bs)
            if t is None:
                return False
            struct.pack_into("<I", d, off + t + 8, crc32c(iseed, d[off:off + t]))
            return True
        r = self.dx_offsets(d, off, bs, dx == "root")
        if r is None:
            return False
        co, tail = r
        count = _u16(d, off + co + 2)
        c = crc32c(iseed, d[off:off + co + 8 * count])
        c = crc32c(c, d[off + tail:off + tail + 4])
        c = crc32c(c, b"\0\0\0\0")
        struct.pack_into("<I", d, off + tail + 4, c)
        return True

    def orphan_set(self, d, off, bs, iseed, blk):
        """An orphan file block's tail checksum: over its physical block
        number (64 bits) and the entries before the 8-byte tail."""
        c = crc32c(crc32c(iseed, struct.pack("<Q", blk)), d[off:off + bs - 8])
        struct.pack_into("<I", d, off + bs - 4, c)
        return True

    def ea_block_set(self, d, off, bs, blk):
        blkbuf = bytearray(d[off:off + bs])
        blkbuf[EA_CSUM:EA_CSUM + 4] = b"\0\0\0\0"
        c = crc32c(crc32c(self.seed, struct.pack("<Q", blk)), blkbuf)
        struct.pack_into("<I", d, off + EA_CSUM, c)
        return True


# ---------------------------------------------------------------------------
# jbd2 (checksums v2 and v3: crc32c seeded with the journal's uuid)
JSB_CSUM = 0xFC
COMMIT_CSUM = 16
JBD_TAIL = 4


class Jbd:
    """The checksum seed and tag format of one journal, from its superblock."""

    def __init__(self, jsb, bs):
        self.bs = bs
        v2 = struct.unpack_from(">I", jsb, 4)[0] == 4
        self.incompat = struct.unpack_from(">I", jsb, 40)[0] if v2 else 0
        self.csum = bool(self.incompat & 0x18)
        self.v3 = bool(self.incompat & 0x10)
        self.bit64 = bool(self.incompat & 0x2)
        self.seed = crc32c(0xFFFFFFFF, jsb[48:64])
        if self.v3:
            self.tag_bytes = 16
        else:
            self.tag_bytes = 8 + (2 if self.incompat & 0x8 else 0) + (4 if self.bit64 else 0)
        self.tail = JBD_TAIL if self.csum else 0
        self.revoke_rec = 8 if self.bit64 else 4

    def sb_set(self, d, off):
        if not self.csum:
            return
        b = bytearray(d[off:off + 1024])
        b[JSB_CSUM:JSB_CSUM + 4] = b"\0\0\0\0"
        struct.pack_into(">I", d, off + JSB_CSUM, crc32c(0xFFFFFFFF, b))

    def tail_set(self, d, off):
        """A descriptor's or revoke block's tail."""
        if not self.csum:
            return
        c = crc32c(self.seed, d[off:off + self.bs - JBD_TAIL])
        c = crc32c(c, b"\0\0\0\0")
        struct.pack_into(">I", d, off + self.bs - JBD_TAIL, c)

    def commit_set(self, d, off):
        if not self.csum:
            return
        b = bytearray(d[off:off + self.bs])
        b[COMMIT_CSUM:COMMIT_CSUM + 4] = b"\0\0\0\0"
        struct.pack_into(">I", d, off + COMMIT_CSUM, crc32c(self.seed, b))

    def tag_csum(self, tid, data):
        c = crc32c(crc32c(self.seed, struct.pack(">I", tid)), data)
        return c if self.v3 else c & 0xFFFF

    def tag_csum_set(self, d, tag_off, tid, data):
        if self.v3:
            struct.pack_into(">I", d, tag_off + 12, self.tag_csum(tid, data))
        elif self.csum:
            struct.pack_into(">H", d, tag_off + 4, self.tag_csum(tid, data))
