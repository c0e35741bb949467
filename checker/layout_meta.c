/*
 * checker/layout_meta.c - where the superblock and group descriptor copies
 * lie: the classic layout (every copy of every descriptor block right after
 * each superblock copy), meta_bg (descriptor block i in the first group of
 * metagroup i, copies in its second and last group) and sparse_super2
 * (superblock copies only in the two groups s_backup_bgs names).
 *
 * A metagroup is the run of groups whose descriptors fill one block.  With
 * meta_bg, descriptor blocks below s_first_meta_bg keep the classic layout
 * (a file system converted by an online resize keeps its old blocks), and
 * the groups of those metagroups carry the classic copies of those blocks
 * only.  The rules are read from the on-disk format, computed here from
 * the superblock alone: nothing asks libext2fs where a copy lies.
 */
#include "chk_internal.h"

#include <errno.h>
#include <stdio.h>

int chk_layout_parse(struct chk_fs *fs, char *err, size_t errlen)
{
	const struct ext2_super_block *sb = fs->sb;
	fs->meta_bg = sb->s_feature_incompat & EXT2_FEATURE_INCOMPAT_META_BG;
	fs->sparse_super2 = sb->s_feature_compat & EXT4_FEATURE_COMPAT_SPARSE_SUPER2;
	fs->first_meta_bg = fs->meta_bg ? sb->s_first_meta_bg : 0;
	fs->backup_bgs[0] = fs->sparse_super2 ? sb->s_backup_bgs[0] : 0;
	fs->backup_bgs[1] = fs->sparse_super2 ? sb->s_backup_bgs[1] : 0;
	if (!fs->meta_bg)
		return 0;
	/* both are e2fsck's first repairs: it clears the feature, or resize_inode */
	if (fs->first_meta_bg > fs->gdt_blocks) {
		snprintf(err, errlen, "s_first_meta_bg %u is beyond the %u descriptor blocks (run e2fsck)",
			 fs->first_meta_bg, fs->gdt_blocks);
		return -EINVAL;
	}
	if (sb->s_feature_compat & EXT2_FEATURE_COMPAT_RESIZE_INODE) {
		snprintf(err, errlen, "features meta_bg and resize_inode together (run e2fsck)");
		return -EINVAL;
	}
	return 0;
}

static bool is_power_of(uint32_t n, uint32_t b)
{
	while (n > 1 && n % b == 0)
		n /= b;
	return n == 1;
}

bool chk_group_has_super(const struct chk_fs *fs, uint32_t g)
{
	if (g == 0)
		return true;
	if (fs->sparse_super2)
		return g == fs->backup_bgs[0] || g == fs->backup_bgs[1];
	if (!fs->sparse || g == 1)
		return true;
	return is_power_of(g, 3) || is_power_of(g, 5) || is_power_of(g, 7);
}

static uint64_t group_first_block(const struct chk_fs *fs, uint32_t g)
{
	return fs->first_data_block + (uint64_t)g * fs->bpg;
}

/* descriptor blocks in the classic layout: all, or those below s_first_meta_bg */
static uint32_t classic_desc_blocks(const struct chk_fs *fs)
{
	return fs->meta_bg ? fs->first_meta_bg : fs->gdt_blocks;
}

/* group g in a metagroup placed by meta_bg */
static bool in_meta_layout(const struct chk_fs *fs, uint32_t g)
{
	return fs->meta_bg && g / fs->desc_per_block >= fs->first_meta_bg;
}

uint64_t chk_gdt_block_loc(const struct chk_fs *fs, uint32_t i)
{
	if (i < classic_desc_blocks(fs))
		return (uint64_t)fs->first_data_block + 1 + i;
	uint32_t g = i * fs->desc_per_block;
	return group_first_block(fs, g) + (chk_group_has_super(fs, g) ? 1 : 0);
}

uint32_t chk_gdt_block_index(const struct chk_fs *fs, uint64_t blk)
{
	uint64_t first = (uint64_t)fs->first_data_block + 1;
	if (blk >= first && blk - first < classic_desc_blocks(fs))
		return (uint32_t)(blk - first);
	if (!fs->meta_bg || blk < fs->first_data_block || blk >= fs->blocks_count)
		return UINT32_MAX;
	uint32_t g = chk_group_of_block(fs, blk);
	if (g % fs->desc_per_block || !in_meta_layout(fs, g))
		return UINT32_MAX;
	uint32_t i = g / fs->desc_per_block;
	return i < fs->gdt_blocks && chk_gdt_block_loc(fs, i) == blk ? i : UINT32_MAX;
}

int chk_static_add_group_copies(struct chk_fs *fs, uint32_t g)
{
	uint64_t start = group_first_block(fs, g);
	bool super = chk_group_has_super(fs, g);
	int r = super ? chk_static_add(fs, start, 1, BT_SB, 0) : 0;
	if (r)
		return r;
	if (!in_meta_layout(fs, g)) {
		if (!super)
			return 0;
		uint32_t n = classic_desc_blocks(fs);
		r = chk_static_add(fs, start + 1, n, BT_GDT, 0);
		return r ? r : chk_static_add(fs, start + 1 + n, fs->rgdt_blocks, BT_RGDT, EXT2_RESIZE_INO);
	}
	/* the metagroup's descriptor block: in its first group, copies in its
	 * second and last (a short last metagroup may lack the last) */
	uint32_t pos = g % fs->desc_per_block;
	if (pos == 0 || pos == 1 || pos == fs->desc_per_block - 1)
		r = chk_static_add(fs, start + (super ? 1 : 0), 1, BT_GDT, 0);
	return r;
}
