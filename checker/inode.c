/*
 * checker/inode.c - what an inode's fields may hold, from its bytes alone:
 * file types, 64-bit sizes and their limits, the ext4 fields and flags a
 * file system's features allow, which inodes keep a block map, and the
 * internal journal's superblock (block 0 of the journal inode).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chk_ext4.h"

bool chk_mode_type_valid(uint16_t mode)
{
	switch (mode & 0170000) {
	case 0100000: case 0040000: case 0120000: case 0020000:
	case 0060000: case 0010000: case 0140000:
		return true;
	}
	return false;
}

int chk_mode_to_ftype(uint16_t mode)
{
	switch (mode & 0170000) {
	case 0100000: return EXT2_FT_REG_FILE;
	case 0040000: return EXT2_FT_DIR;
	case 0020000: return EXT2_FT_CHRDEV;
	case 0060000: return EXT2_FT_BLKDEV;
	case 0010000: return EXT2_FT_FIFO;
	case 0140000: return EXT2_FT_SOCK;
	case 0120000: return EXT2_FT_SYMLINK;
	}
	return -1;
}

uint64_t chk_inode_file_acl(const struct chk_fs *fs, const struct ext2_inode *in)
{
	return in->i_file_acl | (fs->bit64 ? (uint64_t)in->osd2.linux2.l_i_file_acl_high << 32 : 0);
}

uint64_t chk_inode_size64(const struct ext2_inode *in)
{
	if ((in->i_mode & 0170000) == 0100000)
		return in->i_size | ((uint64_t)in->i_size_high << 32);
	return in->i_size;
}

/* 12 direct + single + double + triple indirect blocks, as e2fsck computes
 * its per-block-size limit (it does not cap by i_blocks; the kernel's limit
 * is lower, so kernel files always pass). */
uint64_t chk_max_file_size(uint32_t bs)
{
	uint64_t a = bs / 4;
	return (12 + a + a * a + a * a * a) * (uint64_t)bs;
}

/* The internal journal's superblock (block 0 of the journal inode), as
 * e2fsck's journal load judges it; jbd fields are big endian. */
static uint32_t be32_at(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* jbd2's checksums of a v2 superblock, as e2fsck's journal load checks
 * them: v2 and v3 exclude each other and v1, the type is crc32c, and the
 * superblock's 1,024 bytes (its checksum field zero) hash to s_checksum. */
static const char *journal_csum_problem(const uint8_t *jsb)
{
	enum { JSB_FEAT_COMPAT = 36, JSB_FEAT_INCOMPAT = 40, JSB_CSUM_TYPE = 0x50, JSB_CSUM = 0xFC };
	enum { COMPAT_CHECKSUM = 0x1, INCOMPAT_CSUM_V2 = 0x8, INCOMPAT_CSUM_V3 = 0x10, CRC32C = 4 };
	uint32_t inc = be32_at(jsb + JSB_FEAT_INCOMPAT);
	bool v2 = inc & INCOMPAT_CSUM_V2, v3 = inc & INCOMPAT_CSUM_V3;
	if (!v2 && !v3)
		return NULL;
	if ((v2 && v3) || (be32_at(jsb + JSB_FEAT_COMPAT) & COMPAT_CHECKSUM))
		return "more than one journal checksum version";
	if (jsb[JSB_CSUM_TYPE] != CRC32C)
		return "journal checksum type is not crc32c";
	static const uint8_t zero[4];
	uint32_t crc = chk_crc32c(~0u, jsb, JSB_CSUM);
	crc = chk_crc32c(crc, zero, 4);
	crc = chk_crc32c(crc, jsb + JSB_CSUM + 4, 1024 - JSB_CSUM - 4);
	return crc == be32_at(jsb + JSB_CSUM) ? NULL : "journal superblock checksum does not match";
}

const char *chk_journal_sb_problem(const struct chk_fs *fs, const uint8_t *jsb, uint64_t journal_blocks)
{
	enum { JSB_MAGIC = 0, JSB_TYPE = 4, JSB_BLOCKSIZE = 12, JSB_MAXLEN = 16, JSB_FIRST = 20,
	       JSB_FEAT_COMPAT = 36, JSB_FEAT_INCOMPAT = 40, JSB_FEAT_RO = 44, JSB_NR_USERS = 64 };
	uint32_t type = be32_at(jsb + JSB_TYPE), maxlen = be32_at(jsb + JSB_MAXLEN), first = be32_at(jsb + JSB_FIRST);
	if (be32_at(jsb + JSB_MAGIC) != 0xC03B3998u)
		return "bad magic";
	if (type != 3 && type != 4)              /* superblock v1, v2 */
		return "not a journal superblock type";
	if (be32_at(jsb + JSB_BLOCKSIZE) != fs->bs)
		return "block size differs from the file system's";
	if (maxlen > journal_blocks)
		return "s_maxlen beyond the journal inode's size";
	if (first == 0 || first >= maxlen)
		return "s_first outside the journal";
	if (type == 3 && (be32_at(jsb + JSB_FEAT_COMPAT) || be32_at(jsb + JSB_FEAT_INCOMPAT) ||
			  be32_at(jsb + JSB_FEAT_RO) || be32_at(jsb + JSB_NR_USERS)))
		return "v1 superblock with v2 fields set";
	/* jbd2 and e2fsck refuse to load a journal with an incompat or ro_compat
	 * feature they do not know (revoke, 64bit, async_commit, csum v2/v3 and
	 * fast_commit are the incompat ones; no ro_compat is defined) */
	if (type == 4 && ((be32_at(jsb + JSB_FEAT_INCOMPAT) & ~0x3fu) || be32_at(jsb + JSB_FEAT_RO)))
		return "unknown incompat or ro_compat journal feature";
	if (type == 4 && be32_at(jsb + JSB_NR_USERS) > 1)   /* an internal journal has one user */
		return "v2 superblock with more than one user (v1 leftovers)";
	return type == 4 ? journal_csum_problem(jsb) : NULL;
}

bool chk_slow_symlink_map_ok(const struct chk_fs *fs, const struct ext2_inode *in)
{
	if (chk_inode_extent_mapped(fs, in)) {
		const uint8_t *root = (const uint8_t *)in->i_block;
		struct chk_ext_header h = chk_ext_header_at(root);
		/* the extent after the 12-byte header: ee_block, ee_len */
		return h.depth == 0 && h.entries == 1 && chk_ld32(root + 12) == 0 && chk_ld16(root + 16) == 1;
	}
	for (int i = 1; i < EXT2_N_BLOCKS; i++)
		if (in->i_block[i])
			return false;
	return in->i_block[0] != 0;
}

const char *chk_file_size_problem(const struct chk_fs *fs, const struct ext2_inode *in, uint64_t size,
				  bool large_file)
{
	if (chk_inode_extent_mapped(fs, in)) {
		/* e2fsck: logical blocks are 32 bits */
		if (size > ((uint64_t)fs->bs << 32) - 1)
			return "is beyond the largest extent-mapped file for this block size";
	} else if (size > chk_max_file_size(fs->bs)) {
		return "is beyond the largest indirect-mapped file for this block size";
	}
	if (size >= 0x80000000ULL && !large_file)
		return "is 2 GiB or more without the large_file feature";
	return NULL;
}

uint64_t chk_inode_iblocks(const struct chk_fs *fs, const struct ext2_inode *in)
{
	return in->i_blocks | (fs->huge_file ? (uint64_t)in->osd2.linux2.l_i_blocks_hi << 32 : 0);
}

bool chk_iblocks_ok(const struct chk_fs *fs, const struct ext2_inode *in, uint64_t owned)
{
	bool in_blocks = fs->huge_file && (in->i_flags & EXT4_HUGE_FILE_FL);
	/* e2fsck wants i_blocks_hi clear under HUGE_FILE_FL, whatever it counts */
	if (in_blocks && in->osd2.linux2.l_i_blocks_hi)
		return false;
	return chk_inode_iblocks(fs, in) == (in_blocks ? owned : owned * (fs->bs / 512));
}

/* e2fsck's pass 1 checks the blocks (xattr block, i_block, i_blocks) of
 * every reserved inode but the quota slots (the quota feature is refused at
 * attach: e2fsck only wants them clear) and the resize inode (its blocks
 * are static, checked apart); the journal slot's even without has_journal
 * (its blocks are still owned). */
bool chk_inode_blocks_counted(const struct chk_fs *fs, uint32_t ino)
{
	if (ino >= fs->first_ino || ino == EXT2_ROOT_INO || ino == EXT2_BAD_INO || ino == EXT2_JOURNAL_INO ||
	    ino == fs->journal_ino)
		return true;
	return ino != EXT2_RESIZE_INO && ino != EXT4_USR_QUOTA_INO && ino != EXT4_GRP_QUOTA_INO;
}

/* The xattr block e2fsck's pass 1 counts for in-use inode ino.  An unused
 * reserved inode's i_file_acl outside the file system, or without ext_attr,
 * is never read: e2fsck marks the inode bad, which only an entry naming it
 * would bring to judgement, and counts no block for it. */
uint64_t chk_inode_counted_xattr(const struct chk_fs *fs, uint32_t ino, const struct ext2_inode *in)
{
	uint64_t acl = chk_inode_file_acl(fs, in);
	if (ino >= fs->first_ino || ino == EXT2_ROOT_INO || ino == EXT2_BAD_INO || ino == fs->journal_ino)
		return acl;
	bool ext_attr = fs->sb->s_feature_compat & EXT2_FEATURE_COMPAT_EXT_ATTR;
	return ext_attr && acl >= fs->first_data_block && acl < fs->blocks_count ? acl : 0;
}

/* What e2fsck's pass 1 finds wrong with an unused reserved inode's mode
 * (one of those whose blocks it counts, but the root, the bad-blocks and
 * journal inodes): the boot loader inode may hold a file, not a directory;
 * the others keep mode 0.  NULL when none. */
const char *chk_reserved_inode_mode_problem(uint32_t ino, const struct ext2_inode *in)
{
	if (ino == EXT2_BOOT_LOADER_INO)
		return (in->i_mode & 0170000) == 0040000 ? "the boot loader inode is a directory" : NULL;
	return in->i_mode ? "a mode on an unused reserved inode (e2fsck wants 0)" : NULL;
}

/* Which in-use inodes' i_block we model as pointers: those whose blocks
 * are counted, with pointers by their mode (a mode-0 reserved inode has
 * none, as e2fsck reads it), and the bad-blocks inode whatever its mode. */
bool chk_inode_walkable(const struct chk_fs *fs, uint32_t ino, const struct ext2_inode *in)
{
	if (ino == EXT2_BAD_INO)
		return true;
	return chk_inode_blocks_counted(fs, ino) && chk_inode_has_block_ptrs(fs, in);
}

/* What e2fsck's pass 1 takes for a sign of damage among the ext4 fields,
 * given the file system's features.  Without huge_file, i_blocks counts
 * sectors whatever HUGE_FILE_FL says (to libext2fs, the kernel and e2fsck
 * alike); e2fsck's pass 4 takes a regular file named by entries for a file
 * whatever EA_INODE_FL says. */
const char *chk_inode_ext4_fields_problem(const struct chk_fs *fs, const struct ext2_inode *in,
					  uint32_t kept)
{
	kept &= CHK_EXT4_FLAGS_E2FSCK_KEEPS;
	if ((in->i_mode & 0170000) != 0100000)
		kept &= ~(uint32_t)EXT4_EA_INODE_FL;
	uint32_t flags = in->i_flags & ~kept;
	if (in->i_faddr)
		return "obsolete i_faddr";
	if (fs->inode_size > 128) {
		uint16_t x = ((const struct ext2_inode_large *)in)->i_extra_isize;
		if (x && (x < 4 || x > fs->inode_size - 128 || (x & 3)))
			return "invalid i_extra_isize";
	}
	uint16_t ty = in->i_mode & 0170000;
	if (flags & EXT4_EXTENTS_FL) {
		if (!fs->extents)
			return "extents flag set without the extent feature";
		if (ty == 0020000 || ty == 0060000 || ty == 0010000 || ty == 0140000)
			return "extents flag on a device, fifo or socket";
		if (ty == 0120000 && !chk_inode_has_block_ptrs(fs, in))
			return "extents flag on a fast symlink";
	}
	if (flags & EXT4_INLINE_DATA_FL)
		return "inline-data flag set (inline data is not modelled)";
	if ((flags & EXT4_HUGE_FILE_FL) && !fs->huge_file)
		return "huge-file flag set without the huge_file feature";
	if (flags & EXT4_EA_INODE_FL)
		return "ea-inode flag set (ea_inode is not modelled)";
	if (flags & EXT4_ENCRYPT_FL)
		return "encrypt flag set (encryption is not modelled)";
	if (flags & EXT4_CASEFOLD_FL)   /* casefold is refused at attach: the kernel and e2fsck refuse the flag */
		return "casefold flag set without the casefold feature";
	if (in->osd2.linux2.l_i_file_acl_high && !fs->bit64)
		return "i_file_acl high bits set without the 64bit feature";
	if (in->osd2.linux2.l_i_blocks_hi && !fs->huge_file)
		return "i_blocks high bits set without the huge_file feature";
	return NULL;
}

/* Regular files, directories and slow symlinks keep block pointers in
 * i_block; fast symlinks keep their target there and devices a number. */
bool chk_inode_has_block_ptrs(const struct chk_fs *fs, const struct ext2_inode *in)
{
	switch (in->i_mode & 0170000) {
	case 0100000: case 0040000:
		return true;
	case 0120000: {
		uint32_t acl = in->i_file_acl ? fs->bs / 512 : 0;
		return in->i_blocks > acl;
	}
	}
	return false;
}


bool chk_inode_ea_in_inode(const struct chk_fs *fs, const uint8_t *raw)
{
	if (fs->inode_size <= EXT2_GOOD_OLD_INODE_SIZE)
		return false;
	uint32_t start = EXT2_GOOD_OLD_INODE_SIZE + chk_ld16(raw + EXT2_GOOD_OLD_INODE_SIZE);
	if (start + 4 > fs->inode_size || chk_ld32(raw + start) != EXT2_EXT_ATTR_MAGIC)
		return false;
	/* entries follow the magic, up to a zero word; e_value_inum at 4 */
	for (uint32_t off = start + 4; off + 16 <= fs->inode_size && chk_ld32(raw + off);) {
		if (chk_ld32(raw + off + 4))
			return true;
		off += (16 + raw[off] + 3) & ~3u;
	}
	return false;
}
