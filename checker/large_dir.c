/*
 * checker/large_dir.c - what the large_dir feature changes for the checker:
 * a directory's size takes i_size_high (directories past 4 GiB; without
 * large_dir the kernel reads only i_size and e2fsck wants i_size_high 0),
 * and an htree may have a third level (indirect_levels 2).
 */
#include "chk_internal.h"

bool chk_large_dir(const struct chk_fs *fs)
{
	return (fs->sb->s_feature_incompat & EXT4_FEATURE_INCOMPAT_LARGEDIR) != 0;
}

uint64_t chk_dir_size(const struct chk_fs *fs, const struct ext2_inode *in)
{
	if (!chk_large_dir(fs))
		return in->i_size;
	return in->i_size | ((uint64_t)in->i_size_high << 32);
}

bool chk_dir_size_high_ok(const struct chk_fs *fs, const struct ext2_inode *in)
{
	return chk_large_dir(fs) || in->i_size_high == 0;
}

uint32_t chk_dir_blocks(const struct chk_fs *fs, const struct ext2_inode *in)
{
	uint64_t n = chk_dir_size(fs, in) / fs->bs;
	return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

unsigned chk_htree_max_levels(const struct chk_fs *fs)
{
	return chk_large_dir(fs) ? 2 : 1;
}
