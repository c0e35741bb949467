"""mutate_ext4.py - the mutation classes of ext4's structures, and the repair
of checksums after any mutation.

Classes (each a table of edits, as in mutate.py):
  extent   an extent tree: its root in i_block or an index or leaf block
           (header, entries, child pointers, flips)
  inline   inline data: i_size, the inode flag, the system.data attribute
           that holds the bytes past i_block, an inline directory's parent
           and entries, flips in i_block or the attribute's value
  dirtail  the checksum tails of directory blocks: a leaf's 12-byte tail
           entry (found by walking rec_len), a dx root's or node's limit
           and dx_tail
  jinode   the journal inode (mode, links, size, flags, its block map or
           extent root) and the superblock's copy of its map (s_jnl_blocks),
           which a reader falls back on when the inode is unusable
  orphan   the orphan file: entries of its blocks (live, free, reserved and
           out-of-range inodes), their tails (magic, checksum), the
           superblock's s_orphan_file_inum and orphan_present flag, the
           orphan file inode's size
  uninit   uninit_bg state of the groups: BLOCK_UNINIT/INODE_UNINIT set on
           groups in use or cleared on groups that are not (their bitmaps
           then read as they are, or filled), ITABLE_ZEROED, bg_itable_unused
           hiding live inodes, the counts of uninitialised groups
  extnode  extent index blocks below the root (depth, entries, order, a
           child pointing back up), the unwritten bit of leaf extents, and
           the checksum tails of extent blocks
A class named CLASS+csum (e.g. extent+csum) makes the same mutant as CLASS
and then recomputes the checksum of every structure it changed
(repair()): on a metadata_csum image the reader then meets the damaged
structure itself rather than a checksum mismatch.
"""
import struct

import csum
import ext2meta as em

u16, u32 = em.u16, em.u32


# ---------------------------------------------------------------------------
# checksum repair

def _changed_blocks(orig, data, bs):
    out = []
    mo, md = memoryview(orig), memoryview(data)
    for b in range(len(data) // bs):
        if mo[b * bs:(b + 1) * bs] != md[b * bs:(b + 1) * bs]:
            out.append(b)
    return out


def _itable_block(img, blk):
    """(group, first inode of the block) of an inode-table block, or None."""
    for g, gr in enumerate(img.groups):
        if gr["inode_table"] <= blk < gr["inode_table"] + img.itable_blocks:
            per = img.bs // img.inode_size
            return g, g * img.inodes_per_group + (blk - gr["inode_table"]) * per + 1
    return None


def _bitmap_groups(img, blk):
    """[(group, 'block'|'inode')] whose bitmap is block BLK."""
    return [(g, k) for g, gr in enumerate(img.groups) for k in ("block", "inode")
            if gr[k + "_bitmap"] == blk]


def repair(orig, data, img):
    """Recompute the checksums of what differs between ORIG and DATA (both
    whole images; IMG the parse of ORIG).  Returns the log lines."""
    bs, log = img.bs, []
    c = csum.Ext4(img.sb)
    jfmt = img.journal_format()
    img.journal()
    changed = _changed_blocks(orig, data, bs)
    roots = dict(img.htree_blocks())
    dir_inos = set(img.dirs)

    def iseed(ino):
        o = img.inode_off(ino)
        return c.inode_seed(ino, u32(data, o + csum.I_GENERATION))
    inodes, groups, sb = set(), set(), False
    per_block = bs // img.desc_size
    # blocks first: their checksums are not covered by anything else
    for b in changed:
        if b * bs <= em.SB_OFF < (b + 1) * bs:
            sb = True
        for k, gb in enumerate(img.gdt_blocks):
            if gb == b:
                groups.update(range(k * per_block, min((k + 1) * per_block, img.ngroups)))
        it = _itable_block(img, b)
        if it:
            g, first = it
            for k in range(bs // img.inode_size):
                o = b * bs + k * img.inode_size
                if orig[o:o + img.inode_size] != data[o:o + img.inode_size]:
                    inodes.add(first + k)
        for g, kind in _bitmap_groups(img, b):
            groups.add(g)
        if b in img.jinfo or (jfmt and img.data_blocks.get(img.journal_inum, [None])[0] == b):
            continue
        ino, role = img.owner.get(b, (None, None))
        if ino is None or not c.enabled:
            continue
        if role.startswith("ext"):
            ok = c.extent_set(data, b * bs, bs, iseed(ino))
        elif role == "data" and ino in dir_inos:
            ok = c.dir_set(data, b * bs, bs, iseed(ino), roots.get(b))
        elif role == "data" and ino == img.orphan_file_inum:
            ok = c.orphan_set(data, b * bs, bs, iseed(ino), b)
        elif role == "ea":
            ok = c.ea_block_set(data, b * bs, bs, b)
        else:
            continue
        log.append("csum: %s block %d of inode %d %s" % (role, b, ino, "repaired" if ok else
                                                         "has no place for a checksum"))
    if jfmt:
        log += _repair_journal(img, jfmt, data, changed)
    if c.enabled:
        for ino in sorted(inodes):
            c.inode_set(data, img.inode_off(ino), ino)
            log.append("csum: inode %d repaired" % ino)
        for g in sorted(groups):
            gr = img.groups[g]
            _bitmap_csums(img, c, data, g)
            c.gd_set(data, gr["off"], g)
        if groups:
            log.append("csum: descriptors of groups %s repaired" % sorted(groups))
    if c.enabled and (sb or groups):
        c.sb_set(data, em.SB_OFF)
        log.append("csum: superblock repaired")
    return log


def _bitmap_csums(img, c, data, g):
    gr, o = img.groups[g], img.groups[g]["off"]
    for kind, lo, hi, nbytes in (("block", 0x18, 0x38, img.blocks_per_group // 8),
                                 ("inode", 0x1A, 0x3A, img.inodes_per_group // 8)):
        b = gr[kind + "_bitmap"] * img.bs
        if not 0 < b < len(data):
            continue
        v = csum.crc32c(c.seed, data[b:b + nbytes])
        struct.pack_into("<H", data, o + lo, v & 0xFFFF)
        if img.desc_size >= hi + 2:
            struct.pack_into("<H", data, o + hi, v >> 16)


def _repair_journal(img, f, data, changed):
    bs, log = img.bs, []
    jsb = img.data_blocks[img.journal_inum][0]
    descs = set()
    for b in changed:
        if b == jsb:
            f.sb_set(data, b * bs)
            log.append("csum: journal superblock repaired")
            continue
        if b not in img.jinfo:
            continue
        kind, tid, desc, tag_off = img.jinfo[b]
        if kind == "data":
            f.tag_csum_set(data, desc * bs + tag_off, tid, data[b * bs:(b + 1) * bs])
            descs.add(desc)
            log.append("csum: journal tag of block %d repaired" % b)
        elif kind == "commit":
            f.commit_set(data, b * bs)
            log.append("csum: journal commit block %d repaired" % b)
        else:
            descs.add(b)
    for b in sorted(descs):
        f.tail_set(data, b * bs)
        log.append("csum: journal %s block %d tail repaired" % (img.jinfo[b][0], b))
    return log


# ---------------------------------------------------------------------------
# extent trees

def _nodes(m):
    """Every node: (offset of its header, max entries it may hold, what)."""
    img = m.img
    out = [(img.inode_off(i) + 40, 4, "inode %d extent root" % i) for i in img.ext_inodes
           if i != img.journal_inum and img.extents.get(i)]
    out += [(b * img.bs, (img.bs - 12) // 12, "inode %d extent block %d" % (i, b))
            for i, b, _ in img.ext_blocks if i != img.journal_inum]
    return out


def pick_node(m, depth=None):
    """A node, optionally only leaves (depth 0) or index nodes (depth 1)."""
    nodes = _nodes(m)
    if depth is not None:
        nodes = [n for n in nodes if (u16(m.d, n[0] + 6) == 0) == (depth == 0)
                 and u16(m.d, n[0] + 2) > 0]
    if not nodes:
        raise em.NoTarget("no extent %s" % ("node" if depth is None else ("leaf", "index")[depth]))
    return m.rng.choice(nodes)


def ext_header(name):
    def edit(m):
        o, limit, what = pick_node(m)
        entries, mx, depth = u16(m.d, o + 2), u16(m.d, o + 4), u16(m.d, o + 6)
        vals = {"eh_magic": (0, [0, 0xF30B, 0xFFFF]),
                "eh_entries": (2, [0, mx, mx + 1, entries + 1, 0xFFFF]),
                "eh_max": (4, [0, max(entries - 1, 0), limit + 1, (m.img.bs - 12) // 12 + 1, 0xFFFF]),
                "eh_depth": (6, [0, depth + 1, max(depth - 1, 0), 5, 6, 0xFFFF])}
        off, choices = vals[name]
        m.put(o + off, "<H", m.pick(choices), what + " " + name)
    return edit


def ext_leaf(name):
    def edit(m):
        o, limit, what = pick_node(m, 0)
        n = u16(m.d, o + 2)
        k = m.rng.randrange(n)
        e = o + 12 + 12 * k
        lblk, ln = u32(m.d, e), u16(m.d, e + 4)
        what = "%s entry %d %s" % (what, k, name)
        if name == "ee_block":
            prev = u32(m.d, e - 12) if k else 0
            nxt = u32(m.d, e + 12) if k + 1 < n else lblk + 1000
            m.put(e, "<I", m.pick([0, prev, max(prev, 1) - 1, nxt, nxt + 1, 0xFFFFFFFF,
                                   (1 << 32) - max(ln & 0x7FFF, 1)]), what)
        elif name == "ee_len":
            m.put(e + 4, "<H", m.pick([0, 32768, 32769, 65535, ln + 1, ln + 100, 0x7FFF]), what)
        elif name == "ee_start":
            v = m.pick([0, 1, m.img.blocks_count, m.img.blocks_count - 1, (1 << 48) - 1,
                        1 << 32, m.img.groups[0]["inode_table"], m.block_value()])
            m.put(e + 6, "<H", v >> 32, what + " (high)")
            m.put(e + 8, "<I", v, what + " (low)")
    return edit


def ext_index(name):
    def edit(m):
        o, limit, what = pick_node(m, 1)
        n = u16(m.d, o + 2)
        k = m.rng.randrange(n)
        e = o + 12 + 12 * k
        what = "%s index %d %s" % (what, k, name)
        if name == "ei_block":
            prev = u32(m.d, e - 12) if k else 0
            nxt = u32(m.d, e + 12) if k + 1 < n else 0xFFFFFFF0
            m.put(e, "<I", m.pick([0, prev, nxt, nxt + 1, 0xFFFFFFFF]), what)
        elif name == "ei_leaf":
            img = m.img
            own = o // img.bs if o % img.bs == 0 else None
            others = [b for _, b, _ in img.ext_blocks if b != own]
            cur = u32(m.d, e + 4) | u16(m.d, e + 8) << 32
            v = m.pick([0, 1, own if own else cur, m.rng.choice(others) if others else cur,
                        img.blocks_count, (1 << 48) - 1, 1 << 32,
                        img.groups[0]["inode_table"], m.block_value()])
            m.put(e + 8, "<H", v >> 32, what + " (high)")
            m.put(e + 4, "<I", v, what + " (low)")
    return edit


def ext_duplicate(m):
    """Two entries of a node made the same (an overlap, or a child twice)."""
    o, limit, what = pick_node(m)
    n = u16(m.d, o + 2)
    if n < 2:
        raise em.NoTarget("one entry")
    a, b = m.rng.sample(range(n), 2)
    m.d[o + 12 + 12 * b:o + 24 + 12 * b] = m.d[o + 12 + 12 * a:o + 24 + 12 * a]
    m.log.append("%s entry %d = entry %d" % (what, b, a))


def ext_flips(m):
    o, limit, what = pick_node(m)
    n = min(u16(m.d, o + 2), limit)
    m.flips([(o, 12 + 12 * max(n, 1))], what)


# ---------------------------------------------------------------------------
# inline data

SYSTEM_INDEX = 7


def pick_inline(m, kinds=None):
    cands = [(i, k) for i, k in m.img.inline if kinds is None or k in kinds]
    if not cands:
        raise em.NoTarget("no inline %s" % ("inode" if kinds is None else "/".join(kinds)))
    return m.rng.choice(cands)


def data_attr(m, ino):
    """(entry offset, value offset, value size, first entry, area end) of the
    inode's system.data attribute, or None."""
    img, d = m.img, m.d
    o = img.inode_off(ino)
    extra = u16(d, o + 128)
    hdr = o + 128 + extra
    end = o + img.inode_size
    if hdr + 4 > end or u32(d, hdr) != em.EA_MAGIC:
        return None
    first = e = hdr + 4
    while e + 16 <= end and u32(d, e) != 0:
        nl, idx = d[e], d[e + 1]
        if idx == SYSTEM_INDEX and bytes(d[e + 16:e + 16 + nl]) == b"data":
            return e, first + u16(d, e + 2), u32(d, e + 8), first, end
        e += (16 + nl + 3) & ~3
    return None


def inl_size(m):
    ino, kind = pick_inline(m)
    o = m.img.inode_off(ino)
    cur = u32(m.d, o + 4)
    a = data_attr(m, ino)
    cap = 60 + (a[2] if a else 0)
    if m.rng.random() < 0.15 and m.value is None:
        m.put(o + 108, "<I", m.pick([1, 0xFFFFFFFF]), "inline inode %d (%s) i_size_high" % (ino, kind))
        return
    m.put(o + 4, "<I", m.pick([0, 1, 59, 60, 61, cur + 1, cap, cap + 1, m.img.bs + 1, 0xFFFFFFFF]),
          "inline inode %d (%s) i_size" % (ino, kind))


def inl_flag(m):
    ino, kind = pick_inline(m)
    o = m.img.inode_off(ino)
    cur = u32(m.d, o + 32)
    m.put(o + 32, "<I", m.pick([cur & ~em.EXT4_INLINE_DATA_FL, cur | em.EXT4_EXTENTS_FL,
                                cur | em.EXT2_INDEX_FL, cur | 0x10, cur | 0x4000]),
          "inline inode %d (%s) i_flags" % (ino, kind))


def inl_flag_set(m):
    """INLINE_DATA_FL on an inode whose i_block holds an extent root."""
    cands = [i for i in m.img.ext_inodes if i != m.img.journal_inum]
    if not cands:
        raise em.NoTarget("no extent inode")
    ino = m.rng.choice(cands)
    o = m.img.inode_off(ino)
    m.put(o + 32, "<I", u32(m.d, o + 32) | em.EXT4_INLINE_DATA_FL, "inode %d i_flags +inline" % ino)


def inl_attr(name):
    def edit(m):
        ino, kind = pick_inline(m)
        a = data_attr(m, ino)
        if a is None:
            raise em.NoTarget("inode %d has no system.data" % ino)
        e, val, size, first, end = a
        what = "inline inode %d (%s) system.data %s" % (ino, kind, name)
        space = end - first
        if name == "e_value_size":
            m.put(e + 8, "<I", m.pick([0, 1, size + 1, size + 4, space, m.img.bs + 1, 0xFFFF,
                                       0xFFFFFFFF]), what)
        elif name == "e_value_offs":
            cur = u16(m.d, e + 2)
            m.put(e + 2, "<H", m.pick([0, 1, 2, cur + 4, max(cur - 4, 0), space - 2, 0xFFFF]), what)
        elif name == "e_name_len":
            m.put(e, "<B", m.pick([0, 3, 5, 255]), what)
        elif name == "e_name_index":
            m.put(e + 1, "<B", m.pick([0, 1, 6, 8, 255]), what)
        elif name == "name":
            m.put(e + 16 + m.rng.randrange(4), "<B", m.pick([0, ord("x"), 0xFF]), what)
        elif name == "h_magic":
            hdr = m.img.inode_off(ino) + 128 + u16(m.d, m.img.inode_off(ino) + 128)
            m.put(hdr, "<I", m.pick([0, em.EA_MAGIC ^ 1]), "inline inode %d in-inode xattr magic" % ino)
    return edit


def inline_dir_entries(m, ino):
    """[(offset in image, rec_len, run end)] of an inline directory's entries
    (both runs: i_block after the parent, then the system.data value)."""
    o = m.img.inode_off(ino)
    runs = [(o + 40 + 4, o + 40 + 60)]
    a = data_attr(m, ino)
    if a and a[2]:
        runs.append((a[1], a[1] + a[2]))
    out = []
    for start, end in runs:
        p = start
        while p + 8 <= end:
            rl = u16(m.d, p + 4)
            out.append((p, rl, end))
            if rl < 8 or rl % 4:
                break
            p += rl
    return out


def inl_dir_parent(m):
    ino, _ = pick_inline(m, ("dir",))
    o = m.img.inode_off(ino) + 40
    m.put(o, "<I", m.pick([0, 1, 2, ino, m.live_inode([em.S_IFREG]), m.img.inodes_count,
                           m.img.inodes_count + 1, 0xFFFFFFFF]), "inline dir %d parent" % ino)


def inl_dir_entry(name):
    def edit(m):
        ino, _ = pick_inline(m, ("dir",))
        ents = inline_dir_entries(m, ino)
        if not ents:
            raise em.NoTarget("inline dir %d has no entries" % ino)
        p, rl, end = m.rng.choice(ents)
        nl = m.d[p + 6]
        what = "inline dir %d entry at +%d %s" % (ino, p - m.img.inode_off(ino), name)
        if name == "rec_len":
            m.put(p + 4, "<H", m.pick([0, 4, 8, rl + 4, max(rl - 4, 0), end - p + 4, 0xFFFF]), what)
        elif name == "name_len":
            m.put(p + 6, "<B", m.pick([0, 255, nl + 1, max(rl - 8, 0) + 1]), what)
        elif name == "inode":
            m.put(p, "<I", m.pick([0, 1, ino, m.img.inodes_count, m.img.inodes_count + 1,
                                   0xFFFFFFFF, m.free_inode(), m.live_inode()]), what)
        elif name == "file_type":
            m.put(p + 7, "<B", m.pick([0, 2, 7, 8, 0xDE, 255]), what)
    return edit


def inl_flips(m):
    ino, kind = pick_inline(m)
    o = m.img.inode_off(ino)
    ranges = [(o + 40, 60)]
    a = data_attr(m, ino)
    if a:
        ranges += [(a[0], 16 + 4), (a[1], a[2])]
    m.flips(ranges, "inline inode %d (%s)" % (ino, kind))


# ---------------------------------------------------------------------------
# directory checksum tails

def pick_leaf_with_tail(m):
    img = m.img
    roots = {b for b, _ in img.htree_blocks()}
    cands = [b for _, b, _ in img.dir_blocks if b not in roots
             and csum.Ext4.leaf_tail(m.d, b * img.bs, img.bs) is not None]
    if not cands:
        raise em.NoTarget("no directory leaf with a checksum tail")
    return m.rng.choice(cands)


def tail_field(name):
    def edit(m):
        bs = m.img.bs
        b = pick_leaf_with_tail(m)
        t = b * bs + bs - 12
        what = "dir leaf %d tail %s" % (b, name)
        if name == "rec_len":
            m.put(t + 4, "<H", m.pick([0, 4, 8, 16, 24, bs, 0xFFFF]), what)
        elif name == "file_type":
            m.put(t + 7, "<B", m.pick([0, 1, 2, 0xDD, 0xFF]), what)
        elif name == "name_len":
            m.put(t + 6, "<B", m.pick([1, 4, 8, 255]), what)
        elif name == "inode":
            m.put(t, "<I", m.pick([2, 11, m.live_inode(), m.img.inodes_count + 1, 0xFFFFFFFF]), what)
    return edit


def _last_entry(m, b):
    bs, o, last = m.img.bs, 0, None
    while o < bs - 12:
        rl = u16(m.d, b * bs + o + 4)
        last = o
        o += rl
    return last


def tail_swallow(m):
    """The last entry's rec_len reaches the block's end: the tail inside it."""
    b = pick_leaf_with_tail(m)
    last = _last_entry(m, b)
    o = b * m.img.bs + last
    m.put(o + 4, "<H", u16(m.d, o + 4) + 12, "dir leaf %d last entry rec_len (over the tail)" % b)


def tail_short(m):
    """The last entry's rec_len ends 12 bytes early: the chain misses the tail."""
    b = pick_leaf_with_tail(m)
    last = _last_entry(m, b)
    o = b * m.img.bs + last
    rl = u16(m.d, o + 4)
    if rl < 20:
        raise em.NoTarget("no room")
    m.put(o + 4, "<H", m.pick([rl - 12, rl - 4, rl - 24 if rl >= 32 else rl - 12]),
          "dir leaf %d last entry rec_len (short of the tail)" % b)


def pick_dx(m):
    cands = m.img.htree_blocks()
    if not cands or not m.img.metadata_csum:
        raise em.NoTarget("no index block with a tail")
    return m.rng.choice(cands)


def dx_tail(name):
    def edit(m):
        blk, kind = pick_dx(m)
        base, bs = blk * m.img.bs, m.img.bs
        co = 32 if kind == "root" else 8
        limit, count = u16(m.d, base + co), u16(m.d, base + co + 2)
        what = "htree %s %d %s" % (kind, blk, name)
        if name == "limit":
            m.put(base + co, "<H", m.pick([limit + 1, limit - 1, (bs - co) // 8, count,
                                           max(count - 1, 0), 0]), what)
        elif name == "reserved":
            m.put(base + co + 8 * limit, "<I", m.pick([1, 0xDE000C00, 0xFFFFFFFF]), what + " (dt_reserved)")
        elif name == "checksum":
            o = base + co + 8 * limit + 4
            m.put(o, "<I", u32(m.d, o) ^ (1 << m.rng.randrange(32)), what + " (dt_checksum)")
    return edit


def tail_flips(m):
    bs = m.img.bs
    if m.rng.random() < 0.5 and m.img.htree_blocks():
        blk, kind = pick_dx(m)
        co = 32 if kind == "root" else 8
        o = blk * bs + co + 8 * u16(m.d, blk * bs + co)
        m.flips([(blk * bs + co, 4), (o, 8)] if o + 8 <= (blk + 1) * bs else [(blk * bs + co, 4)],
                "htree %s %d limit/tail" % (kind, blk))
        return
    b = pick_leaf_with_tail(m)
    m.flips([(b * bs + bs - 24, 24)], "dir leaf %d tail" % b)


# ---------------------------------------------------------------------------
# the journal inode

S_IFREG = 0o100000
SB_JNL_BLOCKS, SB_JNL_BACKUP_TYPE = 0x10C, 0xFD


def journal_inode(m):
    img = m.img
    if not img.journal_inum or img.journal_inum not in img.data_blocks:
        raise em.NoTarget("no journal inode")
    return img.journal_inum, img.inode_off(img.journal_inum)


def jinode_field(name):
    def edit(m):
        ino, o = journal_inode(m)
        bs = m.img.bs
        what = "journal inode %d %s" % (ino, name)
        if name == "i_mode":
            m.put(o, "<H", m.pick([0, 0o040600, 0o120777, S_IFREG | 0o4600, 0xFFFF]), what)
        elif name == "i_links_count":
            m.put(o + 26, "<H", m.pick([0, 2, 0xFFFF]), what)
        elif name == "i_size":
            cur = u32(m.d, o + 4)
            m.put(o + 4, "<I", m.pick([0, bs, 2 * bs, cur - bs, cur + bs, cur * 2, 0xFFFFFFFF]), what)
        elif name == "i_size_high":
            m.put(o + 108, "<I", m.pick([1, 0x100, 0xFFFFFFFF]), what)
        elif name == "i_flags":
            cur = u32(m.d, o + 32)
            m.put(o + 32, "<I", m.pick([cur ^ em.EXT4_EXTENTS_FL, cur | em.EXT4_INLINE_DATA_FL,
                                        cur | 0x10, cur | 0x4000]), what)
        elif name == "i_block":
            k = m.rng.randrange(15)
            m.put(o + 40 + 4 * k, "<I", m.block_value(), what + "[%d]" % k)
    return edit


def jinode_flips(m):
    ino, o = journal_inode(m)
    m.flips([(o + 40, 60)], "journal inode %d i_block" % ino)


def jinode_backup(m):
    """The inode made unusable (mode 0), so the superblock's copy of its map
    is what a reader uses: with flips in that copy, half of the time."""
    ino, o = journal_inode(m)
    m.put(o, "<H", 0, "journal inode %d i_mode" % ino)
    if m.rng.random() < 0.5:
        m.flips([(em.SB_OFF + SB_JNL_BLOCKS, 17 * 4)], "superblock s_jnl_blocks")


def jinode_backup_type(m):
    ino, o = journal_inode(m)
    if m.rng.random() < 0.5:
        m.put(o, "<H", 0, "journal inode %d i_mode" % ino)
    m.put(em.SB_OFF + SB_JNL_BACKUP_TYPE, "<B", m.pick([0, 2, 0xFF]), "superblock s_jnl_backup_type")


# ---------------------------------------------------------------------------
# the orphan file
RO_COMPAT_ORPHAN_PRESENT = 0x10000
SB_ORPHAN_FILE_INUM = 0x280
ORPHAN_MAGIC = 0x0B10CA04


def orphan_blocks(m):
    img = m.img
    blocks = img.data_blocks.get(img.orphan_file_inum) if img.orphan_file_inum else None
    if not blocks:
        raise em.NoTarget("no orphan file")
    return img.orphan_file_inum, blocks


def orphan_entry(m):
    """An entry of an orphan block: the one in use if any (eh), else any."""
    ino, blocks = orphan_blocks(m)
    bs = m.img.bs
    slots = [(b, k) for b in blocks for k in range((bs - 8) // 4)]
    used = [(b, k) for b, k in slots if u32(m.d, b * bs + 4 * k)]
    b, k = m.rng.choice(used) if used and m.rng.random() < 0.6 else m.rng.choice(slots)
    return b * bs + 4 * k, "orphan file block %d entry %d" % (b, k)


def of_entry(m):
    o, what = orphan_entry(m)
    img = m.img
    m.put(o, "<I", m.pick([0, 1, 2, img.journal_inum or 8, img.orphan_file_inum, 11,
                           m.live_inode([em.S_IFREG]), m.live_inode([em.S_IFDIR]),
                           m.free_inode(), img.inodes_count, img.inodes_count + 1,
                           0xFFFFFFFF]), what)


def of_duplicate(m):
    """Two entries naming the same inode."""
    o, what = orphan_entry(m)
    o2, what2 = orphan_entry(m)
    v = u32(m.d, o) or m.live_inode([em.S_IFREG])
    if o == o2:
        raise em.NoTarget("one entry picked twice")
    m.put(o, "<I", v, what)
    m.put(o2, "<I", v, what2)


def of_tail(name):
    def edit(m):
        ino, blocks = orphan_blocks(m)
        b = m.rng.choice(blocks)
        t = b * m.img.bs + m.img.bs - 8
        if name == "magic":
            m.put(t, "<I", m.pick([0, ORPHAN_MAGIC ^ 1, 0xFFFFFFFF]), "orphan file block %d magic" % b)
        else:
            m.put(t + 4, "<I", u32(m.d, t + 4) ^ (1 << m.rng.randrange(32)),
                  "orphan file block %d checksum" % b)
    return edit


def of_present(m):
    orphan_blocks(m)
    cur = u32(m.d, em.SB_OFF + 100)
    m.put(em.SB_OFF + 100, "<I", cur ^ RO_COMPAT_ORPHAN_PRESENT, "s_feature_ro_compat orphan_present")


def of_inum(m):
    ino, _ = orphan_blocks(m)
    m.put(em.SB_OFF + SB_ORPHAN_FILE_INUM, "<I",
          m.pick([0, 1, 2, 11, m.img.journal_inum or 8, m.live_inode([em.S_IFREG]),
                  m.live_inode([em.S_IFDIR]), m.free_inode(), m.img.inodes_count + 1]),
          "s_orphan_file_inum")


def of_inode(m):
    ino, blocks = orphan_blocks(m)
    o = m.img.inode_off(ino)
    bs = m.img.bs
    if m.rng.random() < 0.3:
        cur = u32(m.d, o + 32)
        m.put(o + 32, "<I", m.pick([cur & ~em.EXT4_EXTENTS_FL, cur | em.EXT4_INLINE_DATA_FL,
                                    cur | 0x10, cur | 0x4000]), "orphan file inode %d i_flags" % ino)
        return
    cur = u32(m.d, o + 4)
    m.put(o + 4, "<I", m.pick([0, 1, bs - 1, cur - bs, cur + bs, cur + 7, 0xFFFFFFFF]),
          "orphan file inode %d i_size" % ino)


def of_flips(m):
    ino, blocks = orphan_blocks(m)
    b = m.rng.choice(blocks)
    m.flips([(b * m.img.bs, m.img.bs)], "orphan file block %d" % b)


# ---------------------------------------------------------------------------
# uninit_bg state
BG_INODE_UNINIT, BG_BLOCK_UNINIT, BG_INODE_ZEROED = 1, 2, 4


def _groups(m, flag, has):
    out = [g for g, gr in enumerate(m.img.groups) if bool(gr["flags"] & flag) == has]
    if not out:
        raise em.NoTarget("no group with flag %d %s" % (flag, "set" if has else "clear"))
    return out


def _used_inode_groups(m):
    ipg = m.img.inodes_per_group
    return sorted({(i - 1) // ipg for i, _ in m.img.live}) or [0]


def ug_flag(flag, set_it):
    def edit(m):
        if flag == BG_INODE_UNINIT and set_it:
            g = m.rng.choice([g for g in _used_inode_groups(m)
                              if not m.img.groups[g]["flags"] & flag] or [0])
        else:
            g = m.rng.choice(_groups(m, flag, not set_it))
        o = m.img.groups[g]["off"] + 18
        cur = u16(m.d, o)
        m.put(o, "<H", cur | flag if set_it else cur & ~flag, "group %d bg_flags" % g)
        if not set_it and flag != BG_INODE_ZEROED and m.rng.random() < 0.5:
            # the bitmap the flag said to ignore: filled
            gr = m.img.groups[g]
            b = gr["block_bitmap" if flag == BG_BLOCK_UNINIT else "inode_bitmap"] * m.img.bs
            fill = m.rng.choice([0xFF, 0x55, None])
            for k in range(m.img.bs if flag == BG_BLOCK_UNINIT else m.img.inodes_per_group // 8):
                m.d[b + k] = fill if fill is not None else m.rng.randrange(256)
            m.log.append("group %d %s bitmap filled with %s" % (
                g, "block" if flag == BG_BLOCK_UNINIT else "inode",
                "random bytes" if fill is None else hex(fill)))
    return edit


def ug_itable_unused(m):
    """bg_itable_unused of a group with live inodes: covering some of them."""
    g = m.rng.choice(_used_inode_groups(m))
    ipg = m.img.inodes_per_group
    top = max([(i - 1) % ipg + 1 for i, _ in m.img.live if (i - 1) // ipg == g] or [1])
    o = m.img.groups[g]["off"] + 28
    m.put(o, "<H", m.pick([ipg - top + 1, ipg - 1, ipg, ipg + 1, 0xFFFF]),
          "group %d bg_itable_unused" % g)


def ug_uninit_count(m):
    """A free count of a BLOCK_UNINIT group made wrong."""
    g = m.rng.choice(_groups(m, BG_BLOCK_UNINIT, True))
    o = m.img.groups[g]["off"] + (12 if m.rng.random() < 0.5 else 14)
    m.put(o, "<H", m.count_value(u16(m.d, o), 16), "uninit group %d free count at +%d" % (
        g, o - m.img.groups[g]["off"]))


def ug_bitmap_garbage(m):
    """Garbage in the bitmap of an uninitialised group (readers must not use it)."""
    g = m.rng.choice(_groups(m, BG_BLOCK_UNINIT, True))
    b = m.img.groups[g]["block_bitmap"] * m.img.bs
    m.flips([(b, m.img.bs)], "uninit group %d block bitmap" % g)


# ---------------------------------------------------------------------------
# extent index blocks and unwritten extents

def pick_index_block(m):
    """An extent block (not a root) holding index entries."""
    cands = [(i, b) for i, b, depth in m.img.ext_blocks if depth > 0 and i != m.img.journal_inum]
    if not cands:
        raise em.NoTarget("no extent index block")
    return m.rng.choice(cands)


def xn_header(name):
    def edit(m):
        ino, b = pick_index_block(m)
        o = b * m.img.bs
        n, mx, depth = u16(m.d, o + 2), u16(m.d, o + 4), u16(m.d, o + 6)
        what = "inode %d extent index block %d %s" % (ino, b, name)
        if name == "eh_depth":
            m.put(o + 6, "<H", m.pick([0, depth + 1, depth - 1 if depth > 1 else 2, 5]), what)
        elif name == "eh_entries":
            m.put(o + 2, "<H", m.pick([0, n + 1, mx, mx + 1]), what)
    return edit


def xn_order(m):
    """Two index entries swapped: ei_block out of order."""
    ino, b = pick_index_block(m)
    o = b * m.img.bs
    n = u16(m.d, o + 2)
    if n < 2:
        raise em.NoTarget("one entry")
    k = m.rng.randrange(n - 1)
    e = o + 12 + 12 * k
    a, c = bytes(m.d[e:e + 12]), bytes(m.d[e + 12:e + 24])
    m.d[e:e + 12], m.d[e + 12:e + 24] = c, a
    m.log.append("inode %d extent index block %d entries %d and %d swapped" % (ino, b, k, k + 1))


def xn_loop(m):
    """An index entry pointing back up: at its own block or the parent's."""
    ino, b = pick_index_block(m)
    o = b * m.img.bs
    n = u16(m.d, o + 2)
    parents = [p for i, p, depth in m.img.ext_blocks if i == ino and p != b and depth > 1]
    v = m.rng.choice([b] + parents)
    e = o + 12 + 12 * m.rng.randrange(max(n, 1))
    m.put(e + 8, "<H", v >> 32, "inode %d extent index block %d ei_leaf (high)" % (ino, b))
    m.put(e + 4, "<I", v, "inode %d extent index block %d ei_leaf -> %d" % (ino, b, v))


def xn_unwritten(m):
    """The unwritten bit of a leaf extent flipped: data read as zeros, or
    preallocated blocks read as data."""
    cands = [(i, lblk, ln, unw) for i, exts in m.img.extents.items() if i != m.img.journal_inum
             for lblk, start, ln, unw in exts if 0 < ln <= 32767]
    if not cands:
        raise em.NoTarget("no extent")
    unw = [c for c in cands if c[3]]
    ino, lblk, ln, was = m.rng.choice(unw) if unw and m.rng.random() < 0.4 else m.rng.choice(cands)
    for o, limit, what in _nodes(m):
        if not what.startswith("inode %d " % ino) or u16(m.d, o + 6) != 0:
            continue
        for k in range(min(u16(m.d, o + 2), limit)):
            e = o + 12 + 12 * k
            if u32(m.d, e) == lblk:
                cur = u16(m.d, e + 4)
                m.put(e + 4, "<H", cur - 32768 if cur > 32768 else cur + 32768,
                      "%s entry %d ee_len (unwritten bit)" % (what, k))
                return
    raise em.NoTarget("extent not found")


def xn_tail(m):
    """The checksum after eh_max entries of an extent block flipped."""
    blocks = [(i, b) for i, b, _ in m.img.ext_blocks if i != m.img.journal_inum]
    if not blocks or not m.img.metadata_csum:
        raise em.NoTarget("no extent block with a checksum")
    ino, b = m.rng.choice(blocks)
    o = b * m.img.bs + 12 + 12 * u16(m.d, b * m.img.bs + 4)
    if o + 4 > (b + 1) * m.img.bs:
        raise em.NoTarget("no room for a tail")
    m.put(o, "<I", u32(m.d, o) ^ (1 << m.rng.randrange(32)), "inode %d extent block %d tail" % (ino, b))


def xn_flips(m):
    ino, b = pick_index_block(m)
    o = b * m.img.bs
    m.flips([(o, 12 + 12 * max(u16(m.d, o + 2), 1))], "inode %d extent index block %d" % (ino, b))


# ---------------------------------------------------------------------------
EDITS = {
    "extent": dict([(f, ext_header(f)) for f in ("eh_magic", "eh_entries", "eh_max", "eh_depth")]
                   + [(f, ext_leaf(f)) for f in ("ee_block", "ee_len", "ee_start")]
                   + [(f, ext_index(f)) for f in ("ei_block", "ei_leaf")]
                   + [("duplicate", ext_duplicate), ("flips", ext_flips)]),
    "inline": dict([("i_size", inl_size), ("flag", inl_flag), ("flag_set", inl_flag_set),
                    ("dir_parent", inl_dir_parent)]
                   + [("attr_" + f, inl_attr(f)) for f in ("e_value_size", "e_value_offs",
                                                           "e_name_len", "e_name_index", "name",
                                                           "h_magic")]
                   + [("dir_" + f, inl_dir_entry(f)) for f in ("rec_len", "name_len", "inode",
                                                              "file_type")]
                   + [("flips", inl_flips)]),
    "dirtail": dict([("tail_" + f, tail_field(f)) for f in ("rec_len", "file_type", "name_len",
                                                             "inode")]
                    + [("swallow", tail_swallow), ("short", tail_short)]
                    + [("dx_" + f, dx_tail(f)) for f in ("limit", "reserved", "checksum")]
                    + [("flips", tail_flips)]),
    "jinode": dict([(f, jinode_field(f)) for f in ("i_mode", "i_links_count", "i_size",
                                                    "i_size_high", "i_flags", "i_block")]
                   + [("backup", jinode_backup), ("backup_type", jinode_backup_type),
                      ("flips", jinode_flips)]),
    "orphan": {"entry": of_entry, "duplicate": of_duplicate, "magic": of_tail("magic"),
               "checksum": of_tail("checksum"), "present": of_present, "inum": of_inum,
               "inode": of_inode, "flips": of_flips},
    "uninit": {"block_uninit_set": ug_flag(BG_BLOCK_UNINIT, True),
               "block_uninit_clear": ug_flag(BG_BLOCK_UNINIT, False),
               "inode_uninit_set": ug_flag(BG_INODE_UNINIT, True),
               "inode_uninit_clear": ug_flag(BG_INODE_UNINIT, False),
               "zeroed_clear": ug_flag(BG_INODE_ZEROED, False),
               "itable_unused": ug_itable_unused, "uninit_count": ug_uninit_count,
               "flips": ug_bitmap_garbage},
    "extnode": dict([(f, xn_header(f)) for f in ("eh_depth", "eh_entries")]
                    + [("order", xn_order), ("loop", xn_loop), ("unwritten", xn_unwritten),
                       ("tail", xn_tail), ("flips", xn_flips)]),
}
