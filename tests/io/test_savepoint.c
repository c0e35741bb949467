/*
 * tests/io/test_savepoint.c - an operation's rollback restores the set of
 * blocks the open transaction frees (the committed-data rule's marks)
 * exactly, whatever order the operation freed and took blocks back in:
 *
 *   test_savepoint
 *
 * On an ext3 image with files a0 and a1 committed, a1 removed in the open
 * transaction (its blocks in the freed set), an operation frees a block of
 * a0 and takes it back, takes back a block a1 freed, frees it again and
 * takes it back again; it is rolled back and the transaction committed.
 * The commit must be approved (0) and the image, its journal replayed,
 * pass e2fsck -fn: a0's block, in use before the operation, is in use and
 * marked so; a1's blocks are free.
 * Exit 0 pass, 1 fail, 77 skip (no mke2fs/e2fsck).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"
#include "io_test_files.h"
#include "test_util.h"

static char scratch[64];
static int failures;

/* a file of n blocks named name in the root, as the daemon makes one */
static errcode_t create_file(ext2_filsys fs, const char *name, unsigned nblocks)
{
	ext2_ino_t ino;
	struct ext2_inode inode;
	unsigned char buf[1024];
	errcode_t err = ext2fs_new_inode(fs, EXT2_ROOT_INO, 0100644, 0, &ino);

	if (err)
		return err;
	rio_txn_inode_alloc_stats(fs, ino, +1, false);
	memset(&inode, 0, sizeof(inode));
	inode.i_mode = 0100644;
	inode.i_links_count = 1;
	err = ext2fs_write_new_inode(fs, ino, &inode);
	for (unsigned i = 0; !err && i < nblocks; i++) {
		blk64_t pblk = 0;
		memset(buf, 'a' + (int)i, sizeof(buf));
		err = ext2fs_bmap2(fs, ino, NULL, NULL, BMAP_ALLOC, i, NULL, &pblk);
		struct rio_extent ext = { pblk, 1, buf };
		err = err ? err : rio_data_io(fs->io, true, ino, &ext, 1);
	}
	err = err ? err : ext2fs_read_inode(fs, ino, &inode);
	if (!err) {
		inode.i_size = nblocks * fs->blocksize;
		err = ext2fs_write_inode(fs, ino, &inode);
	}
	return err ? err : ext2fs_link(fs, EXT2_ROOT_INO, name, ino, EXT2_FT_REG_FILE);
}

static blk64_t first_block(ext2_filsys fs, const char *name)
{
	ext2_ino_t ino;
	blk64_t pblk = 0;

	TEST_REQUIRE(!ext2fs_lookup(fs, EXT2_ROOT_INO, name, strlen(name), NULL, &ino) &&
		     !ext2fs_bmap2(fs, ino, NULL, NULL, 0, 0, NULL, &pblk) && pblk, "%s's block", name);
	return pblk;
}

int main(void)
{
	char img[128], copy[128];
	ext2_filsys fs;

	snprintf(scratch, sizeof(scratch), "/tmp/riosp.XXXXXX");
	TEST_REQUIRE(mkdtemp(scratch), "mkdtemp");
	snprintf(img, sizeof(img), "%s/sp.img", scratch);
	snprintf(copy, sizeof(copy), "%s/replayed.img", scratch);
	make_image_or_skip(img, "-t ext3 -b 1024 -N 64", 4096);
	struct rio_config cfg = {
		.block_cache_mb = 1, .quiet = true, .checker = true, .checker_cache_mb = 1,
		.journal = true, .on_violation = RIO_ONV_READONLY,
	};
	rio_set_config(&cfg);
	TEST_REQUIRE(!ext2fs_open2(img, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs), "open");
	TEST_REQUIRE(!ext2fs_read_bitmaps(fs) && !rio_txn_attach(fs), "attach");
	TEST_REQUIRE(!create_file(fs, "a0", 3) && !create_file(fs, "a1", 3) &&
		     !rio_txn_boundary(fs, true), "a0, a1 committed");

	/* the open transaction frees a1's blocks */
	blk64_t kept = first_block(fs, "a0"), freed = first_block(fs, "a1");
	TEST_REQUIRE(!io_test_remove_file(fs, "a1") && !rio_txn_boundary(fs, false), "a1 removed");

	/* the operation: a0's block freed and taken back; a1's taken back,
	 * freed and taken back again (alloc-stats calls as any caller's) */
	struct ext2_super_block sb = *fs->super;
	TEST_REQUIRE(!rio_txn_savepoint(fs->io), "savepoint");
	ext2fs_block_alloc_stats2(fs, kept, -1);
	ext2fs_block_alloc_stats2(fs, kept, +1);
	ext2fs_block_alloc_stats2(fs, freed, +1);
	ext2fs_block_alloc_stats2(fs, freed, -1);
	ext2fs_block_alloc_stats2(fs, freed, +1);
	errcode_t err = rio_txn_rollback(fs->io);
	TEST_CHECK(err == 0, "rollback: %ld", (long)err);
	*fs->super = sb;
	ext2fs_mark_super_dirty(fs);
	TEST_CHECK(ext2fs_test_block_bitmap2(fs->block_map, kept), "a0's block not in use after the rollback");

	err = rio_txn_boundary(fs, true);
	TEST_CHECK(err == 0, "the commit after the rollback: %ld (rejected: a0's block freed?)", (long)err);
	TEST_CHECK(!rio_txn_detach(fs), "detach");
	ext2fs_close_free(&fs);
	TEST_CHECK(run_shell("cp '%s' '%s' && e2fsck -fy '%s' >/dev/null 2>&1; [ $? -le 1 ]", img, copy,
			     copy) == 0 && e2fsck_fn(copy, scratch) == 0,
		   "the image, its journal replayed, is not consistent");
	run_shell("rm -rf '%s'", scratch);
	return failures ? 1 : 0;
}
