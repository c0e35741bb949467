/*
 * checker/invariants_ext4.c - the check functions of the ext4 rows of the
 * invariant table (invariants.def): uninitialised groups, extent trees, the
 * orphan file and metadata checksums.  Each looks at what the transaction
 * changes (facts diff.c and diff_extent.c computed), as invariants.c does
 * for ext2/ext3: every metadata block a transaction writes must carry the
 * checksum the kernel verifies before it trusts the block.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chk_ext4.h"

#define V(id, recs, n, ...) chk_verdict_add_violation(v, id, recs, n, __VA_ARGS__)

static const struct ext2_inode *I_NEW(const struct ichange *ic) { return (const void *)ic->new; }

/* the first record about block blk's contents (an htree or xattr record,
 * or the change of ownership that attached it), for the violation */
static size_t block_rec(struct txn *t, uint64_t blk)
{
	struct bchange *c = chk_txn_bch_find(t, blk);
	return c ? c->rec : SIZE_MAX;
}

/* The written blocks whose proposed type is `type`, with their owner. */
typedef void (*written_fn)(struct chk_fs *fs, struct txn *t, struct chk_verdict *v, const struct tblock *b,
			   uint32_t owner);
static void each_written(struct chk_fs *fs, struct txn *t, struct chk_verdict *v, uint8_t type, written_fn fn)
{
	for (size_t i = 0; i < t->nblocks && !t->err; i++) {
		const struct tblock *b = &t->blocks[i];
		uint32_t owner = 0, lblk = 0;
		if (!b->changed || b->blk >= fs->blocks_count ||
		    chk_new_type_of(fs, t, b->blk, &owner, &lblk) != type)
			continue;
		fn(fs, t, v, b, owner);
	}
}

/* ------------------------------------------------------------ groups */

/*
 * Group g leaves an UNINIT flag without its bitmap written: from now on the
 * block on disk is its bitmap, so it must hold what the flag stood for (the
 * bits approved for the group: made up from its static blocks, or all clear
 * for inodes).  The kernel writes the bitmap it initialises, but a write
 * that equals the block's bytes is no change: under flex_bg a group without
 * a backup superblock initialises to all zeros, as a block mke2fs never
 * wrote reads.  The bits past the group's blocks or inodes are set, as the
 * kernel initialises them and e2fsck wants them ("padding at end of inode
 * bitmap is not set").  A problem's text, or NULL (buf: 2 bs bytes).
 */
static const char *uninit_left_problem(struct chk_fs *fs, struct txn *t, uint32_t g, bool inode, uint8_t *buf,
				       uint64_t *bit)
{
	const uint8_t *d = chk_gd_new(fs, t, g);
	uint64_t at = inode ? chk_gd_ibitmap(fs, d) : chk_gd_bbitmap(fs, d);
	if (at >= fs->blocks_count)
		return NULL;                    /* INV_BGD_FROZEN's: locations never move */
	const uint8_t *disk = chk_txn_new_block(fs, t, at, buf + fs->bs);
	if (!disk)
		return NULL;                    /* t->err set */
	uint64_t start = fs->first_data_block + (uint64_t)g * fs->bpg;
	uint64_t n = inode ? fs->ipg : fs->blocks_count - start < fs->bpg ? fs->blocks_count - start : fs->bpg;
	const uint8_t *approved = inode ? chk_group_ibits(fs, g) : chk_group_bbits(fs, g);
	if (!approved && !inode)
		chk_group_static_bits(fs, g, buf);
	else if (!approved)
		memset(buf, 0, fs->bs);
	if (!approved)
		approved = buf;
	for (*bit = 0; *bit < n; (*bit)++)
		if (bit_get(disk, *bit) != bit_get(approved, *bit))
			return bit_get(disk, *bit) ? "set" : "clear";
	for (; *bit < fs->bs * 8u; (*bit)++)
		if (!bit_get(disk, *bit))
			return "clear in the padding";
	return NULL;
}

static void uninit_left(struct chk_fs *fs, struct txn *t, struct chk_verdict *v, uint32_t g, bool inode,
			size_t rec, uint8_t *buf)
{
	uint64_t bit;
	const char *why = uninit_left_problem(fs, t, g, inode, buf, &bit);
	if (why)
		V(INV_BGD_UNINIT, &rec, 1,
		  "group %u leaves %s_UNINIT without its %s bitmap written, and the block on disk is not the "
		  "bitmap the flag stood for (bit %llu %s)", g, inode ? "INODE" : "BLOCK", inode ? "inode" : "block",
		  (unsigned long long)bit, why);
}

/*
 * An inode may come into use only inside its group's initialised part (the
 * proposed bg_itable_unused); a group leaving BLOCK_UNINIT or INODE_UNINIT
 * has its bitmap, written or as on disk, equal to the one the flag stood
 * for; with descriptor checksums, bg_itable_unused stays within the free
 * inodes.
 */
void inv_bgd_uninit(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	chk_report_problems(t, v, INV_BGD_UNINIT);
	if (!fs->group_csum)
		return;
	for (size_t i = 0; i < t->nich; i++) {
		struct ichange *ic = t->ich[i];
		uint32_t g = chk_group_of_inode(fs, ic->ino), slot = (ic->ino - 1) % fs->ipg;
		if (ic->new_inuse && !ic->old_inuse && slot >= chk_txn_used_inodes(fs, t, g))
			V(INV_BGD_UNINIT, ic->recs, ic->nrecs,
			  "inode %u comes into use past group %u's initialised inodes (%u)", ic->ino, g,
			  chk_txn_used_inodes(fs, t, g));
	}
	uint8_t *buf = NULL;
	chk_txn_groups_sort(t);
	for (size_t i = 0; i < t->ngt && !t->err; i++) {
		uint32_t g = t->gt[i].g;
		if (!t->gt[i].changed)
			continue;
		const uint8_t *o = chk_gd(fs, g), *n = chk_gd_new(fs, t, g);
		uint16_t cleared = chk_gd_flags(o) & ~chk_gd_flags(n);
		/* a written bitmap was diffed against the made-up one (diff.c) */
		bool bb = chk_tb_find(t, chk_gd_bbitmap(fs, n)), ib = chk_tb_find(t, chk_gd_ibitmap(fs, n));
		size_t rec = t->gt[i].rec;
		bool left_b = (cleared & EXT2_BG_BLOCK_UNINIT) && chk_group_block_uninit(fs, g) && !bb;
		bool left_i = (cleared & EXT2_BG_INODE_UNINIT) && chk_group_inode_uninit(fs, g) && !ib;
		if ((left_b || left_i) && !buf && !(buf = malloc(2 * (size_t)fs->bs))) {
			t->err = -ENOMEM;
			break;
		}
		if (left_b)
			uninit_left(fs, t, v, g, false, rec, buf);
		if (left_i)
			uninit_left(fs, t, v, g, true, rec, buf);
		if (chk_gd_itable_unused(fs, n) > chk_gd_free_inodes(fs, n))
			V(INV_BGD_UNINIT, &rec, 1, "group %u: bg_itable_unused %u beyond its %u free inodes", g,
			  chk_gd_itable_unused(fs, n), chk_gd_free_inodes(fs, n));
	}
	free(buf);
}

/* ------------------------------------------------------------ extent trees */

void inv_extent_tree(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_EXTENT_TREE);
}

/* ------------------------------------------------------------ orphan file */

static void orphan_block(struct chk_fs *fs, struct txn *t, struct chk_verdict *v, const struct tblock *b,
			 uint32_t owner)
{
	if (owner != fs->orphan_file_ino)
		return;
	struct ichange *ic = chk_txn_inode(fs, t, owner);
	if (!ic)
		return;
	uint32_t tail = fs->bs - 8;
	size_t rec = block_rec(t, b->blk);
	if (chk_ld32(b->new + tail) != CHK_ORPHAN_MAGIC)
		V(INV_ORPHAN_FILE, &rec, 1, "orphan file block %llu: no orphan-block magic", (unsigned long long)b->blk);
	else if (fs->csum.metadata_csum &&
		 chk_ld32(b->new + tail + 4) != chk_orphan_block_csum(&fs->csum, owner, I_NEW(ic)->i_generation,
								      b->blk, b->new, fs->bs))
		V(INV_ORPHAN_FILE, &rec, 1, "orphan file block %llu: checksum does not match",
		  (unsigned long long)b->blk);
}

void inv_orphan_file(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	chk_report_problems(t, v, INV_ORPHAN_FILE);
	if (!fs->orphan_file_ino)
		return;
	each_written(fs, t, v, BT_DATA, orphan_block);
	for (size_t i = 0; i < t->ndch; i++)
		if (t->dch[i].new_ino == fs->orphan_file_ino)
			V(INV_ORPHAN_FILE, &t->dch[i].rec, 1, "dir %u: an entry names the orphan file %u", t->dch[i].dir,
			  fs->orphan_file_ino);
}

/* ------------------------------------------------------------ checksums */

void inv_csum_sb(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	if (!fs->csum.metadata_csum || !t->sb_changed)
		return;
	const struct ext2_super_block *n = (const void *)t->sb_new;
	if (n->s_checksum_type != EXT2_CRC32C_CHKSUM || !chk_sb_csum_ok(t->sb_new))
		V(INV_CSUM_SB, t->sb_recs, t->nsb_recs, "superblock checksum 0x%08x, want 0x%08x (type %u)",
		  n->s_checksum, chk_sb_csum(t->sb_new), n->s_checksum_type);
}

void inv_csum_bgd(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	if (!fs->group_csum)
		return;
	chk_txn_groups_sort(t);
	for (size_t i = 0; i < t->ngt; i++) {
		uint32_t g = t->gt[i].g;
		const uint8_t *n = chk_gd_new(fs, t, g);
		if (t->gt[i].changed && !chk_gd_csum_ok(&fs->csum, g, n))
			V(INV_CSUM_BGD, &t->gt[i].rec, 1, "group %u: descriptor checksum 0x%04x, want 0x%04x", g,
			  chk_gd_checksum(n), chk_gd_csum(&fs->csum, g, n));
	}
}

/* Group g's bitmaps in the proposed state against its proposed descriptor
 * (when either is written). */
static void bitmap_csums(struct chk_fs *fs, struct txn *t, struct chk_verdict *v, uint32_t g, size_t rec,
			 uint8_t *buf)
{
	const uint8_t *d = chk_gd_new(fs, t, g);
	uint16_t flags = chk_gd_flags(d);
	bool desc_ok = chk_gd_csum_ok(&fs->csum, g, d);
	for (int inode = 0; inode < 2; inode++) {
		if ((flags & (inode ? EXT2_BG_INODE_UNINIT : EXT2_BG_BLOCK_UNINIT)) && desc_ok)
			continue;       /* no bitmap on disk */
		uint64_t at = inode ? chk_gd_ibitmap(fs, d) : chk_gd_bbitmap(fs, d);
		const uint8_t *bits = at < fs->blocks_count ? chk_txn_new_block(fs, t, at, buf) : NULL;
		if (!bits)
			continue;
		bool ok = inode ? chk_ibitmap_csum_ok(&fs->csum, d, bits, fs->ipg / 8)
				: chk_bbitmap_csum_ok(&fs->csum, d, bits, fs->bpg / 8);
		if (!ok)
			V(INV_CSUM_BITMAP, &rec, 1, "group %u: the %s bitmap's checksum is not its descriptor's", g,
			  inode ? "inode" : "block");
	}
}

void inv_csum_bitmap(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	if (!fs->csum.metadata_csum)
		return;
	uint8_t *buf = malloc(fs->bs);
	if (!buf) {
		t->err = -ENOMEM;
		return;
	}
	/* the groups whose descriptor or bitmaps the transaction writes */
	for (size_t i = 0; i < t->nblocks; i++) {
		const struct tblock *b = &t->blocks[i];
		if (b->changed && (b->otype == BT_BBITMAP || b->otype == BT_IBITMAP))
			chk_txn_group(t, chk_layout_group(fs, b->blk, b->otype, NULL));
	}
	chk_txn_groups_sort(t);
	for (size_t i = 0; i < t->ngt && !t->err; i++) {
		uint32_t g = t->gt[i].g;
		struct tblock *bb = chk_tb_find(t, chk_gd_bbitmap(fs, chk_gd_new(fs, t, g)));
		struct tblock *ib = chk_tb_find(t, chk_gd_ibitmap(fs, chk_gd_new(fs, t, g)));
		if (t->gt[i].changed || (bb && bb->changed) || (ib && ib->changed))
			bitmap_csums(fs, t, v, g, t->gt[i].rec, buf);
	}
	free(buf);
}

void inv_csum_inode(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	if (!fs->csum.metadata_csum)
		return;
	for (size_t i = 0; i < t->nich; i++) {
		struct ichange *ic = t->ich[i];
		if (ic->written && !chk_inode_csum_ok(&fs->csum, ic->ino, ic->new))
			V(INV_CSUM_INODE, ic->recs, ic->nrecs, "inode %u: checksum does not match", ic->ino);
	}
}

/* the checksum seed of what owner owns, in the proposed state */
static bool owner_seed(struct chk_fs *fs, struct txn *t, uint32_t owner, uint32_t *seed)
{
	struct ichange *ic = chk_txn_inode(fs, t, owner);
	if (!ic || !ic->new_inuse)
		return false;
	*seed = chk_inode_seed(&fs->csum, owner, I_NEW(ic)->i_generation);
	return true;
}

static void extent_block(struct chk_fs *fs, struct txn *t, struct chk_verdict *v, const struct tblock *b,
			 uint32_t owner)
{
	uint32_t seed;
	size_t rec = block_rec(t, b->blk);
	if (owner_seed(fs, t, owner, &seed) && !chk_extent_block_csum_ok(&fs->csum, seed, b->new, fs->bs))
		V(INV_CSUM_EXTENT, &rec, 1, "inode %u: extent tree block %llu: checksum does not match", owner,
		  (unsigned long long)b->blk);
}

void inv_csum_extent(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	if (fs->csum.metadata_csum)
		each_written(fs, t, v, BT_EXTENT, extent_block);
}

static void dir_block(struct chk_fs *fs, struct txn *t, struct chk_verdict *v, const struct tblock *b,
		      uint32_t owner)
{
	uint32_t seed;
	if (!owner_seed(fs, t, owner, &seed))
		return;
	enum chk_dir_csum c = chk_dir_block_csum(&fs->csum, seed, b->new, fs->bs);
	size_t rec = block_rec(t, b->blk);
	if (c != CHK_DIR_CSUM_OK)
		V(INV_CSUM_DIR, &rec, 1, "dir %u block %llu: %s", owner, (unsigned long long)b->blk,
		  c == CHK_DIR_CSUM_BAD ? "checksum does not match" : "no checksum tail");
}

void inv_csum_dir(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	if (fs->csum.metadata_csum)
		each_written(fs, t, v, BT_DIR, dir_block);
}

static void xattr_block(struct chk_fs *fs, struct txn *t, struct chk_verdict *v, const struct tblock *b,
			uint32_t owner)
{
	(void)owner;
	size_t rec = block_rec(t, b->blk);
	if (!chk_xattr_block_csum_ok(&fs->csum, b->blk, b->new, fs->bs))
		V(INV_CSUM_XATTR, &rec, 1, "xattr block %llu: checksum does not match", (unsigned long long)b->blk);
}

void inv_csum_xattr(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	if (fs->csum.metadata_csum)
		each_written(fs, t, v, BT_XATTR, xattr_block);
}
