/*
 * fuse/super.c - statfs: the file system's size and free counts as the
 * superblock has them, the metadata's blocks left out (bsddf, the kernel's
 * default) or counted (minixdf).
 */
#include "rfs.h"

#include <string.h>
#include <sys/statvfs.h>

static blk64_t fs_overhead(ext2_filsys fs)
{
	struct ext2_super_block *sb = fs->super;
	blk64_t total = ext2fs_blocks_count(sb), over = sb->s_overhead_clusters;

	if (over && over < total && !ext2fs_has_feature_bigalloc(sb))
		return over;
	over = sb->s_first_data_block;
	for (dgrp_t g = 0; g < fs->group_desc_count; g++) {
		blk_t used = 0;
		if (ext2fs_super_and_bgd_loc2(fs, g, NULL, NULL, NULL, &used))
			used = 0;
		over += used + fs->inode_blocks_per_group + 2;
	}
	if (ext2fs_has_feature_journal(sb) && sb->s_journal_inum) {
		struct ext2_inode jin;
		if (!ext2fs_read_inode(fs, sb->s_journal_inum, &jin))
			over += EXT2_I_SIZE(&jin) / fs->blocksize;
	}
	return over < total ? over : 0;
}

void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct rfs *r = R(req);
	struct statvfs st;

	(void)ino;
	memset(&st, 0, sizeof(st));
	lock(r);
	struct ext2_super_block *sb = r->fs->super;
	blk64_t fr = ext2fs_free_blocks_count(sb), res = ext2fs_r_blocks_count(sb);
	st.f_bsize = st.f_frsize = r->fs->blocksize;
	/* bsddf (the kernel's default) leaves out the metadata's blocks; minixdf counts all */
	st.f_blocks = ext2fs_blocks_count(sb) - (r->cfg->minixdf ? 0 : fs_overhead(r->fs));
	st.f_bfree = fr;
	/* with extents the kernel also withholds 2% of the blocks, at most
	 * 4096, for the metadata of unwritten-extent conversions and punches
	 * (ext4_calculate_resv_clusters); it reports them as not available */
	if (ext2fs_has_feature_extents(sb)) {
		blk64_t resv = ext2fs_blocks_count(sb) / 50;
		res += resv < 4096 ? resv : 4096;
	}
	st.f_bavail = fr > res ? fr - res : 0;
	st.f_files = sb->s_inodes_count;
	st.f_ffree = st.f_favail = sb->s_free_inodes_count;
	st.f_namemax = EXT2_NAME_LEN;
	/* no f_fsid: the FUSE protocol does not carry one (struct fuse_kstatfs), and
	 * the kernel reports 0 for every FUSE mount */
	unlock(r);
	fuse_reply_statfs(req, &st);
}
