/*
 * checker/csum.c - ext4's metadata checksums, computed from block contents.
 *
 * metadata_csum protects every metadata structure with crc32c, seeded by
 * the file system (s_checksum_seed, or the crc of its UUID) and, for what an
 * inode owns, by the inode's number and generation; uninit_bg protects only
 * group descriptors, with crc16.  The formulas are the kernel's and
 * e2fsprogs' (their on-disk format); the code is ours, apart from libext2fs's
 * crc32c primitive, which checker.h allows.
 */
#include "chk_ext4.h"

#include <errno.h>
#include <string.h>
#include <ext2fs/ext2fs.h>

/* superblock offsets */
#define SB_INODE_SIZE 0x58
#define SB_REV_LEVEL 0x4C
#define SB_INCOMPAT 0x60
#define SB_RO_COMPAT 0x64
#define SB_UUID 0x68
#define SB_DESC_SIZE 0xFE
#define SB_CSUM_SEED 0x270
#define SB_CSUM 0x3FC
/* group descriptor offsets */
#define GD_BBITMAP_CSUM_LO 0x18
#define GD_IBITMAP_CSUM_LO 0x1A
#define GD_CSUM 0x1E
#define GD_BBITMAP_CSUM_HI 0x38
#define GD_IBITMAP_CSUM_HI 0x3A
/* inode offsets */
#define I_GENERATION 0x64
#define I_CSUM_LO 0x7C
#define I_EXTRA_ISIZE 0x80
#define I_CSUM_HI 0x82
#define I_CSUM_HI_EXTRA_END 4   /* i_extra_isize that reaches i_checksum_hi */

uint32_t chk_crc32c(uint32_t crc, const void *p, size_t len)
{
	return ext2fs_crc32c_le(crc, p, len);
}

/* CRC-16 (polynomial 0x8005, bit-reflected), as uninit_bg defines it. */
uint16_t chk_crc16(uint16_t crc, const void *p, size_t len)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < len; i++) {
		crc ^= b[i];
		for (int k = 0; k < 8; k++)
			crc = (crc & 1) ? (uint16_t)((crc >> 1) ^ 0xA001) : (uint16_t)(crc >> 1);
	}
	return crc;
}

static uint32_t crc_le32(uint32_t crc, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
	return chk_crc32c(crc, b, 4);
}

static void st16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void st32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

void chk_csum_init(struct chk_csum *c, const uint8_t sb[1024])
{
	uint32_t rev = chk_ld32(sb + SB_REV_LEVEL);
	uint32_t ro = rev ? chk_ld32(sb + SB_RO_COMPAT) : 0;
	uint32_t inc = rev ? chk_ld32(sb + SB_INCOMPAT) : 0;

	memset(c, 0, sizeof(*c));
	c->metadata_csum = ro & EXT4_FEATURE_RO_COMPAT_METADATA_CSUM;
	c->gdt_csum = !c->metadata_csum && (ro & EXT4_FEATURE_RO_COMPAT_GDT_CSUM);
	memcpy(c->uuid, sb + SB_UUID, 16);
	if (inc & EXT4_FEATURE_INCOMPAT_CSUM_SEED)
		c->seed = chk_ld32(sb + SB_CSUM_SEED);
	else
		c->seed = chk_crc32c(~0u, c->uuid, 16);
	c->desc_size = (inc & EXT4_FEATURE_INCOMPAT_64BIT) ? chk_ld16(sb + SB_DESC_SIZE) : 32;
	c->inode_size = rev ? chk_ld16(sb + SB_INODE_SIZE) : 128;
}

uint32_t chk_sb_csum(const uint8_t sb[1024])
{
	return chk_crc32c(~0u, sb, SB_CSUM);
}

bool chk_sb_csum_ok(const uint8_t sb[1024])
{
	uint32_t rev = chk_ld32(sb + SB_REV_LEVEL);
	if (!rev || !(chk_ld32(sb + SB_RO_COMPAT) & EXT4_FEATURE_RO_COMPAT_METADATA_CSUM))
		return true;
	return chk_ld32(sb + SB_CSUM) == chk_sb_csum(sb);
}

uint16_t chk_gd_csum(const struct chk_csum *c, uint32_t g, const uint8_t *desc)
{
	static const uint8_t zero[2];
	if (c->metadata_csum) {
		uint32_t crc = crc_le32(c->seed, g);
		crc = chk_crc32c(crc, desc, GD_CSUM);
		crc = chk_crc32c(crc, zero, 2);
		crc = chk_crc32c(crc, desc + GD_CSUM + 2, c->desc_size - GD_CSUM - 2);
		return (uint16_t)crc;
	}
	uint8_t gle[4] = { (uint8_t)g, (uint8_t)(g >> 8), (uint8_t)(g >> 16), (uint8_t)(g >> 24) };
	uint16_t crc = chk_crc16(0xFFFF, c->uuid, 16);
	crc = chk_crc16(crc, gle, 4);
	crc = chk_crc16(crc, desc, GD_CSUM);
	if (c->desc_size > GD_CSUM + 2)
		crc = chk_crc16(crc, desc + GD_CSUM + 2, c->desc_size - GD_CSUM - 2);
	return crc;
}

bool chk_gd_csum_ok(const struct chk_csum *c, uint32_t g, const uint8_t *desc)
{
	if (!c->metadata_csum && !c->gdt_csum)
		return true;
	return chk_ld16(desc + GD_CSUM) == chk_gd_csum(c, g, desc);
}

uint32_t chk_bitmap_csum(const struct chk_csum *c, const uint8_t *bitmap, size_t len)
{
	return chk_crc32c(c->seed, bitmap, len);
}

static bool bitmap_csum_ok(const struct chk_csum *c, const uint8_t *desc, unsigned lo_off,
			   unsigned hi_off, const uint8_t *bitmap, size_t len)
{
	if (!c->metadata_csum)
		return true;
	uint32_t want = chk_bitmap_csum(c, bitmap, len);
	uint32_t have = chk_ld16(desc + lo_off);
	if (c->desc_size >= hi_off + 2)
		have |= (uint32_t)chk_ld16(desc + hi_off) << 16;
	else
		want &= 0xFFFF;
	return have == want;
}

bool chk_bbitmap_csum_ok(const struct chk_csum *c, const uint8_t *desc, const uint8_t *bitmap,
			 size_t len)
{
	return bitmap_csum_ok(c, desc, GD_BBITMAP_CSUM_LO, GD_BBITMAP_CSUM_HI, bitmap, len);
}

bool chk_ibitmap_csum_ok(const struct chk_csum *c, const uint8_t *desc, const uint8_t *bitmap,
			 size_t len)
{
	return bitmap_csum_ok(c, desc, GD_IBITMAP_CSUM_LO, GD_IBITMAP_CSUM_HI, bitmap, len);
}

static bool inode_has_csum_hi(const struct chk_csum *c, const uint8_t *raw)
{
	return c->inode_size > 128 && chk_ld16(raw + I_EXTRA_ISIZE) >= I_CSUM_HI_EXTRA_END;
}

uint32_t chk_inode_seed(const struct chk_csum *c, uint32_t ino, uint32_t generation)
{
	return crc_le32(crc_le32(c->seed, ino), generation);
}

uint32_t chk_inode_csum(const struct chk_csum *c, uint32_t ino, const uint8_t *raw)
{
	static const uint8_t zero[2];
	bool hi = inode_has_csum_hi(c, raw);
	uint32_t crc = chk_inode_seed(c, ino, chk_ld32(raw + I_GENERATION));
	crc = chk_crc32c(crc, raw, I_CSUM_LO);
	crc = chk_crc32c(crc, zero, 2);
	if (!hi)
		return chk_crc32c(crc, raw + I_CSUM_LO + 2, c->inode_size - I_CSUM_LO - 2);
	crc = chk_crc32c(crc, raw + I_CSUM_LO + 2, I_CSUM_HI - I_CSUM_LO - 2);
	crc = chk_crc32c(crc, zero, 2);
	return chk_crc32c(crc, raw + I_CSUM_HI + 2, c->inode_size - I_CSUM_HI - 2);
}

bool chk_inode_csum_ok(const struct chk_csum *c, uint32_t ino, const uint8_t *raw)
{
	if (!c->metadata_csum)
		return true;
	uint32_t want = chk_inode_csum(c, ino, raw);
	uint32_t have = chk_ld16(raw + I_CSUM_LO);
	if (inode_has_csum_hi(c, raw))
		have |= (uint32_t)chk_ld16(raw + I_CSUM_HI) << 16;
	else
		want &= 0xFFFF;
	if (have == want)
		return true;
	for (unsigned i = 0; i < 128; i++)   /* an all-zero slot, as e2fsck allows */
		if (raw[i])
			return false;
	return true;
}

void chk_inode_csum_set(const struct chk_csum *c, uint32_t ino, uint8_t *raw)
{
	uint32_t crc = chk_inode_csum(c, ino, raw);
	st16(raw + I_CSUM_LO, (uint16_t)crc);
	if (inode_has_csum_hi(c, raw))
		st16(raw + I_CSUM_HI, (uint16_t)(crc >> 16));
}

/* Where an extent block's tail is: after eh_max entries; 0 if no room. */
static uint32_t extent_tail_off(const uint8_t *blk, uint32_t bs)
{
	uint32_t off = 12u + 12u * chk_ld16(blk + 4);
	return off + 4 <= bs ? off : 0;
}

bool chk_extent_block_csum_ok(const struct chk_csum *c, uint32_t iseed, const uint8_t *blk,
			      uint32_t bs)
{
	if (!c->metadata_csum)
		return true;
	uint32_t off = extent_tail_off(blk, bs);
	return off && chk_ld32(blk + off) == chk_crc32c(iseed, blk, off);
}

int chk_extent_block_csum_set(const struct chk_csum *c, uint32_t iseed, uint8_t *blk, uint32_t bs)
{
	(void)c;
	uint32_t off = extent_tail_off(blk, bs);
	if (!off)
		return -EINVAL;
	st32(blk + off, chk_crc32c(iseed, blk, off));
	return 0;
}

/* A directory entry's rec_len: 0 and 65535 mean 65536 on 64 KiB blocks. */
static uint32_t rec_len_at(const uint8_t *p, uint32_t bs)
{
	uint32_t r = chk_ld16(p + 4);
	if (bs >= 65536 && (r == 0 || r == 65535))
		return 65536;
	return r;
}

/* Offset of a leaf block's tail entry, reached by walking rec_len from the
 * start; 0 if the chain does not end exactly on a well-formed tail. */
static uint32_t leaf_tail_off(const uint8_t *blk, uint32_t bs)
{
	uint32_t top = bs - 12, off = 0;
	while (off < top) {
		uint32_t r = rec_len_at(blk + off, bs);
		if (r < 8 || (r & 3))
			return 0;
		off += r;
	}
	if (off != top)
		return 0;
	const uint8_t *t = blk + top;
	return chk_ld32(t) == 0 && chk_ld16(t + 4) == 12 && chk_ld16(t + 6) == 0xDE00 ? top : 0;
}

/* Offset of an index block's count/limit pair (8 in a node, 32 in the
 * root), and of its tail; false if the block is no index block with room. */
static bool dx_offsets(const uint8_t *blk, uint32_t bs, uint32_t *count_off, uint32_t *tail_off)
{
	uint32_t off;
	if (rec_len_at(blk, bs) == bs && chk_ld16(blk + 6) == 0) {
		off = 8;
	} else if (rec_len_at(blk, bs) == 12) {
		if (rec_len_at(blk + 12, bs) != bs - 12 || chk_ld32(blk + 24) != 0 || blk[29] != 8)
			return false;
		off = 32;
	} else {
		return false;
	}
	uint32_t sane = (bs - off) / 8;
	uint16_t limit = chk_ld16(blk + off), count = chk_ld16(blk + off + 2);
	if (limit > sane || count > sane || count > limit || off + limit * 8u + 8 > bs)
		return false;
	*count_off = off;
	*tail_off = off + limit * 8u;
	return true;
}

static uint32_t dx_csum(uint32_t iseed, const uint8_t *blk, uint32_t count_off, uint32_t tail_off)
{
	static const uint8_t zero[4];
	uint32_t crc = chk_crc32c(iseed, blk, count_off + 8u * chk_ld16(blk + count_off + 2));
	crc = chk_crc32c(crc, blk + tail_off, 4);   /* dt_reserved */
	return chk_crc32c(crc, zero, 4);
}

enum chk_dir_csum chk_dir_block_csum(const struct chk_csum *c, uint32_t iseed, const uint8_t *blk,
				     uint32_t bs)
{
	if (!c->metadata_csum)
		return CHK_DIR_CSUM_OK;
	uint32_t t = leaf_tail_off(blk, bs), count_off;
	if (t)
		return chk_ld32(blk + t + 8) == chk_crc32c(iseed, blk, t) ? CHK_DIR_CSUM_OK :
									 CHK_DIR_CSUM_BAD;
	if (dx_offsets(blk, bs, &count_off, &t))
		return chk_ld32(blk + t + 4) == dx_csum(iseed, blk, count_off, t) ? CHK_DIR_CSUM_OK :
										    CHK_DIR_CSUM_BAD;
	return CHK_DIR_CSUM_NO_TAIL;
}

bool chk_dir_block_is_dx(const uint8_t *blk, uint32_t bs)
{
	uint32_t count_off, tail_off;
	return !leaf_tail_off(blk, bs) && dx_offsets(blk, bs, &count_off, &tail_off);
}

int chk_dir_block_csum_set(const struct chk_csum *c, uint32_t iseed, uint8_t *blk, uint32_t bs)
{
	(void)c;
	uint32_t t = leaf_tail_off(blk, bs), count_off;
	if (t) {
		st32(blk + t + 8, chk_crc32c(iseed, blk, t));
		return 0;
	}
	if (dx_offsets(blk, bs, &count_off, &t)) {
		st32(blk + t + 4, dx_csum(iseed, blk, count_off, t));
		return 0;
	}
	return -EINVAL;
}

#define XATTR_CSUM 0x10   /* h_checksum in the block's header */

uint32_t chk_xattr_block_csum(const struct chk_csum *c, uint64_t blknr, const uint8_t *blk,
			      uint32_t bs)
{
	static const uint8_t zero[4];
	uint8_t le[8];
	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(blknr >> (8 * i));
	uint32_t crc = chk_crc32c(c->seed, le, 8);
	crc = chk_crc32c(crc, blk, XATTR_CSUM);
	crc = chk_crc32c(crc, zero, 4);
	return chk_crc32c(crc, blk + XATTR_CSUM + 4, bs - XATTR_CSUM - 4);
}

bool chk_xattr_block_csum_ok(const struct chk_csum *c, uint64_t blknr, const uint8_t *blk,
			     uint32_t bs)
{
	if (!c->metadata_csum)
		return true;
	return chk_ld32(blk + XATTR_CSUM) == chk_xattr_block_csum(c, blknr, blk, bs);
}

uint32_t chk_orphan_block_csum(const struct chk_csum *c, uint32_t ino, uint32_t gen, uint64_t blknr,
			       const uint8_t *blk, uint32_t bs)
{
	uint8_t le[8];
	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(blknr >> (8 * i));
	uint32_t crc = crc_le32(crc_le32(c->seed, ino), gen);
	crc = chk_crc32c(crc, le, 8);
	return chk_crc32c(crc, blk, bs - 8);
}
