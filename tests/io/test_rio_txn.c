/*
 * tests/io/test_rio_txn.c - transactions: the overlay that holds metadata
 * writes until a boundary commits them (in place, through the journal, past
 * the checker, on the commit thread), whole-block and range writes over it,
 * the checker's early attach, rollback to a savepoint, transaction ids and
 * pending frees, and what a commit writes of the allocation state.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "rio_test.h"

/* ---- transactions ---- */

static int raw_sb(const char *path, struct ext2_super_block *sb)
{
	return raw_read(path, 1024, sb, sizeof(*sb));
}

/* Remove /name and free its blocks (through ext2fs_punch: alloc stats). */
static void remove_file(ext2_filsys fs, const char *name)
{
	ext2_ino_t ino;
	CHECK_ERR(ext2fs_lookup(fs, EXT2_ROOT_INO, name, strlen(name), NULL, &ino));
	struct ext2_inode inode;
	CHECK_ERR(ext2fs_read_inode(fs, ino, &inode));
	CHECK_ERR(ext2fs_unlink(fs, EXT2_ROOT_INO, name, ino, 0));
	CHECK_ERR(ext2fs_punch(fs, ino, &inode, NULL, 0, ~0ULL));
	CHECK_ERR(ext2fs_read_inode(fs, ino, &inode));
	inode.i_links_count = 0;
	inode.i_dtime = 1700000001;
	CHECK_ERR(ext2fs_write_inode(fs, ino, &inode));
	rio_txn_inode_alloc_stats(fs, ino, -1, false);
}

/* Whole-block metadata writes and the base they are compared with at the
 * commit (unchanged rewrites are dropped): over a free block the image file
 * does not hold (a hole, not cached) the write reads nothing from the
 * device, and zeros there are unchanged; over a free block that holds old
 * data (used) zeros are a change that reaches the disk. */
static void whole_block_bases(ext2_filsys fs, const char *path, blk64_t used)
{
	unsigned bs = fs->blocksize;
	unsigned char zero[EXT2_MAX_BLOCK_SIZE];
	memset(zero, 0, bs);
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0, "open %s", path);
	blk64_t hole = 0, nblocks = ext2fs_blocks_count(fs->super);
	for (blk64_t b = nblocks - 1; fd >= 0 && b > nblocks / 2 && !hole; b--) {
		if (ext2fs_test_block_bitmap2(fs->block_map, b))
			continue;
		off_t d = lseek(fd, (off_t)(b * bs), SEEK_DATA);
		if ((d < 0 && errno == ENXIO) || (d >= 0 && (uint64_t)d >= (b + 1) * bs))
			hole = b;
	}
	if (fd >= 0)
		close(fd);
	if (!hole) {
		printf("whole-block bases: the host file system shows no hole, skipped\n");
		return;
	}
	struct rio_stats before, after;
	CHECK_ERR(rio_get_stats(fs->io, &before));
	CHECK_ERR(io_channel_write_blk64(fs->io, hole, 1, zero));
	CHECK_ERR(rio_get_stats(fs->io, &after));
	CHECK(after.device_reads == before.device_reads,
	      "a whole-block write over a hole read the device (%llu reads)",
	      (unsigned long long)(after.device_reads - before.device_reads));
	CHECK_ERR(rio_txn_boundary(fs, true));
	CHECK_ERR(rio_get_stats(fs->io, &after));
	CHECK(after.device_writes == before.device_writes, "zeros over a hole reached the disk");
	CHECK_ERR(rio_get_stats(fs->io, &before));
	CHECK_ERR(io_channel_write_blk64(fs->io, used, 1, zero));
	CHECK_ERR(rio_txn_boundary(fs, true));
	CHECK_ERR(rio_get_stats(fs->io, &after));
	CHECK(after.device_writes > before.device_writes, "zeros over old data were dropped as unchanged");
}

/* rio_data_write_range over file f1's first block: the bytes around the
 * range keep the file's data without a device read; when the overlay holds
 * bytes of the block, those are what is kept. */
static void data_write_range(ext2_filsys fs)
{
	unsigned bs = fs->blocksize;
	unsigned char buf[EXT2_MAX_BLOCK_SIZE], got[EXT2_MAX_BLOCK_SIZE], want[EXT2_MAX_BLOCK_SIZE];
	ext2_ino_t ino;
	blk64_t p = 0;
	CHECK_ERR(ext2fs_lookup(fs, EXT2_ROOT_INO, "f1", 2, NULL, &ino));
	CHECK_ERR(ext2fs_bmap2(fs, ino, NULL, NULL, 0, 0, NULL, &p));
	CHECK(p != 0, "f1 has no first block");
	if (failures)
		return;
	struct rio_extent w = { p, 1, want }, b = { p, 1, buf }, g = { p, 1, got };
	CHECK_ERR(rio_data_io(fs->io, false, ino, &w, 1));
	memset(buf, 0xEE, bs);
	memset(buf + 100, 'X', 10);
	struct rio_stats before, after;
	CHECK_ERR(rio_get_stats(fs->io, &before));
	CHECK_ERR(rio_data_write_range(fs->io, ino, &b, 100, 10));
	CHECK_ERR(rio_get_stats(fs->io, &after));
	CHECK(after.device_reads == before.device_reads, "a range write read the device");
	memset(want + 100, 'X', 10);
	CHECK_ERR(rio_data_io(fs->io, false, ino, &g, 1));
	CHECK(memcmp(got, want, bs) == 0, "a range write changed the bytes around it");
	/* the open transaction holds the block (as metadata written there) */
	memset(want, 0x5A, bs);
	CHECK_ERR(io_channel_write_blk64(fs->io, p, 1, want));
	memset(buf, 0xEE, bs);
	memset(buf + 200, 'Y', 8);
	CHECK_ERR(rio_data_write_range(fs->io, ino, &b, 200, 8));
	memset(want + 200, 'Y', 8);
	CHECK_ERR(rio_data_io(fs->io, false, ino, &g, 1));
	CHECK(memcmp(got, want, bs) == 0, "a range write kept the device's bytes, not the overlay's");
	CHECK(rio_data_write_range(fs->io, ino, &b, bs, 1) == EINVAL, "a range past the first block");
}

/* Blocks [b, b + n) read through the channel hold want; else `what` fails. */
static void expect_blocks(ext2_filsys fs, blk64_t b, unsigned n, const void *want, const char *what)
{
	unsigned char got[3 * EXT2_MAX_BLOCK_SIZE];
	if (n > 3 || io_channel_read_blk64(fs->io, b, (int)n, got)) {
		CHECK(0, "%s: the read failed", what);
		return;
	}
	CHECK(memcmp(got, want, (size_t)n * fs->blocksize) == 0, "%s", what);
}

/* A metadata read of several blocks, some held by the open transaction and
 * some not: each block comes from where it lives, whichever comes first in
 * the range, and a block the overlay does not hold reads as the device has
 * it; a write of part of a block keeps the rest.  Written under a
 * savepoint and rolled back: the overlay holds block b + 1 alone until the
 * last write (three unused inode table blocks at the end of group 0). */
static void overlay_mixed_reads(ext2_filsys fs)
{
	unsigned bs = fs->blocksize;
	blk64_t b = ext2fs_inode_table_loc(fs, 0) + fs->inode_blocks_per_group - 3;
	unsigned char old[3 * EXT2_MAX_BLOCK_SIZE], mark[EXT2_MAX_BLOCK_SIZE];
	CHECK_ERR(io_channel_read_blk64(fs->io, b, 3, old));
	memset(mark, 0xA5, bs);
	CHECK_ERR(rio_txn_savepoint(fs->io));
	CHECK_ERR(io_channel_write_blk64(fs->io, b + 1, 1, mark));
	unsigned char want[3 * EXT2_MAX_BLOCK_SIZE];
	memcpy(want, old, 3 * (size_t)bs);
	memcpy(want + bs, mark, bs);
	/* not held first, then held; held first, then not; all three; none */
	expect_blocks(fs, b, 2, want, "a read of a free then a held block");
	expect_blocks(fs, b + 1, 2, want + bs, "a read of a held then a free block");
	expect_blocks(fs, b, 3, want, "a read of three blocks, the middle held");
	expect_blocks(fs, b + 2, 1, old + 2 * bs, "a read of a block not held");
	/* a write of part of a block keeps the rest of it */
	CHECK_ERR(io_channel_write_byte(fs->io, (unsigned long)((b + 2) * bs + 100), 16, mark));
	memset(want + 2 * bs + 100, 0xA5, 16);
	expect_blocks(fs, b + 2, 1, want + 2 * bs, "a write of 16 bytes lost the rest of its block");
	CHECK_ERR(rio_txn_rollback(fs->io));
	expect_blocks(fs, b, 3, old, "the rolled-back write still read");

	/* a block the overlay held before the savepoint: a write of part of it
	 * and a whole-block write are each undone to what it held */
	unsigned char other[EXT2_MAX_BLOCK_SIZE];
	CHECK_ERR(io_channel_write_blk64(fs->io, b + 1, 1, mark));
	CHECK_ERR(rio_txn_savepoint(fs->io));
	memset(other, 0x3C, bs);
	CHECK_ERR(io_channel_write_byte(fs->io, (unsigned long)((b + 1) * bs + 50), 16, other));
	memcpy(want, mark, bs);
	memset(want + 50, 0x3C, 16);
	expect_blocks(fs, b + 1, 1, want, "a write of 16 bytes into a held block lost the rest of it");
	CHECK_ERR(rio_txn_rollback(fs->io));
	expect_blocks(fs, b + 1, 1, mark, "a write of part of a held block rolled back");
	CHECK_ERR(rio_txn_savepoint(fs->io));
	memset(other, 0x77, bs);
	CHECK_ERR(io_channel_write_blk64(fs->io, b + 1, 1, other));
	CHECK_ERR(io_channel_write_byte(fs->io, (unsigned long)((b + 1) * bs + 8), 4, mark));
	memset(other + 8, 0xA5, 4);
	expect_blocks(fs, b + 1, 1, other, "two writes of a held block under one savepoint");
	CHECK_ERR(rio_txn_rollback(fs->io));
	expect_blocks(fs, b + 1, 1, mark, "a whole-block write of a held block rolled back");
	/* the block as it was: an unchanged rewrite, dropped at the commit */
	CHECK_ERR(io_channel_write_blk64(fs->io, b + 1, 1, old + bs));
}

void test_txn(bool journal, bool checker)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/txn.img", scratch);
	make_image_or_skip(path, journal ? "-t ext3 -b 1024" : "-t ext2 -b 1024", 32768);
	set_txn_cfg(checker, journal, 0, 0, NULL);
	ext2_filsys fs;
	CHECK_ERR(ext2fs_open2(path, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs));
	CHECK_ERR(ext2fs_read_bitmaps(fs));
	CHECK_ERR(rio_txn_attach(fs));
	struct ext2_super_block sb;
	CHECK(raw_sb(path, &sb) == 0, "raw sb");
	if (journal)
		CHECK(sb.s_feature_incompat & EXT3_FEATURE_INCOMPAT_RECOVER, "needs_recovery not set at attach");
	else
		CHECK(!(sb.s_state & EXT2_VALID_FS), "VALID_FS not cleared at attach");

	/* nothing reaches the disk before the boundary, reads see the overlay */
	struct rio_stats before, after;
	CHECK_ERR(rio_get_stats(fs->io, &before));
	make_files(fs, "f", 10, 15);
	if (failures)
		return;
	CHECK_ERR(rio_get_stats(fs->io, &after));
	CHECK(after.device_writes - before.device_writes == 10 * 15,
	      "only the 150 data writes may reach the disk before the boundary (%llu)",
	      (unsigned long long)(after.device_writes - before.device_writes));
	verify_files(fs, 10, 15);
	ext2_ino_t ino;
	CHECK_ERR(ext2fs_lookup(fs, EXT2_ROOT_INO, "f3", 2, NULL, &ino));
	CHECK_ERR(rio_txn_boundary(fs, false) );  /* no interval, small: stays open */
	CHECK_ERR(rio_get_stats(fs->io, &after));
	CHECK(after.flushes == before.flushes, "boundary without force committed");
	CHECK_ERR(rio_txn_boundary(fs, true));
	CHECK_ERR(rio_get_stats(fs->io, &after));
	CHECK(after.flushes > before.flushes, "forced boundary did not flush");
	/* on disk now: a second handle through unix_io sees the files */
	ext2_filsys fs2;
	CHECK_ERR(ext2fs_open2(path, NULL, 0, 0, 0, unix_io_manager, &fs2));
	ext2_ino_t ino2;
	CHECK_ERR(ext2fs_lookup(fs2, EXT2_ROOT_INO, "f3", 2, NULL, &ino2));
	CHECK(ino == ino2, "inode numbers");
	ext2fs_close2(fs2, 0);

	/* an empty boundary commits nothing */
	CHECK_ERR(rio_get_stats(fs->io, &before));
	CHECK_ERR(rio_txn_boundary(fs, true));
	CHECK_ERR(rio_get_stats(fs->io, &after));
	CHECK(after.device_writes == before.device_writes, "empty transaction wrote");
	/* an unchanged rewrite is dropped */
	unsigned char blk[1024];
	CHECK_ERR(io_channel_read_blk64(fs->io, ext2fs_inode_table_loc(fs, 0), 1, blk));
	CHECK_ERR(io_channel_write_blk64(fs->io, ext2fs_inode_table_loc(fs, 0), 1, blk));
	CHECK_ERR(rio_txn_boundary(fs, true));
	CHECK_ERR(rio_get_stats(fs->io, &after));
	CHECK(after.device_writes == before.device_writes, "unchanged rewrite reached the disk");

	/* committed-data rule: blocks freed by the open transaction are not
	 * handed out again before it commits */
	blk64_t freed[15];
	CHECK_ERR(ext2fs_lookup(fs, EXT2_ROOT_INO, "f0", 2, NULL, &ino));
	for (int i = 0; i < 15; i++)
		CHECK_ERR(ext2fs_bmap2(fs, ino, NULL, NULL, 0, i, NULL, &freed[i]));
	remove_file(fs, "f0");
	if (failures)
		return;
	for (int i = 0; i < 15; i++) {
		blk64_t b;
		CHECK_ERR(ext2fs_new_block2(fs, freed[0], NULL, &b));
		for (int k = 0; k < 15; k++)
			CHECK(b != freed[k], "freed block %llu reallocated before commit",
			      (unsigned long long)b);
		CHECK_ERR(ext2fs_new_block2(fs, freed[i], NULL, &b));
		for (int k = 0; k < 15; k++)
			CHECK(b != freed[k], "freed block %llu reallocated before commit",
			      (unsigned long long)b);
	}
	CHECK_ERR(rio_txn_boundary(fs, true));
	blk64_t b;
	CHECK_ERR(ext2fs_new_block2(fs, freed[0], NULL, &b));
	CHECK(b == freed[0], "freed block not free after commit (%llu vs %llu)",
	      (unsigned long long)b, (unsigned long long)freed[0]);
	/* the checker would judge metadata writes to free blocks */
	if (!checker) {
		whole_block_bases(fs, path, freed[1]);
		data_write_range(fs);
	}
	overlay_mixed_reads(fs);
	/* the freed blocks are free on disk too (e2fsck below) */
	make_files(fs, "g", 3, 4);
	CHECK_ERR(ext2fs_mkdir(fs, EXT2_ROOT_INO, 0, "dir"));
	CHECK_ERR(rio_txn_detach(fs));
	CHECK(raw_sb(path, &sb) == 0, "raw sb");
	if (journal)
		CHECK(!(sb.s_feature_incompat & EXT3_FEATURE_INCOMPAT_RECOVER), "needs_recovery left at detach");
	else
		CHECK(sb.s_state & EXT2_VALID_FS, "VALID_FS not restored at detach");
	char stats[300];
	snprintf(stats, sizeof(stats), "%s/stats.json", scratch);
	CHECK_ERR(rio_write_stats(fs->io, stats));
	CHECK_ERR(ext2fs_close2(fs, 0));
	CHECK(fsck_clean(path), "e2fsck after transactions");
	CHECK(run_shell("python3 -c 'import json,sys; d=json.load(open(\"%s\")); "
		  "k=\"transactions device_writes device_reads bytes_written bytes_read flushes blocks_checked "
		  "blocks_journalled violations checker_cpu_seconds checker_commit_cpu_seconds checker_cache_hit_rate "
		  "block_cache_hit_rate peak_rss_kb\".split(); "
		  "sys.exit(0 if all(x in d for x in k) and d[\"transactions\"] >= 3 and "
		  "0 <= d[\"checker_commit_cpu_seconds\"] <= d[\"checker_cpu_seconds\"] else 1)'", stats) == 0,
	      "stats json");
}

/* The checker's attach begun beside the mount's bitmap pass
 * (rio_txn_prepare) is taken over only when nothing but the primary
 * superblock's mount fields changed meanwhile; otherwise the attach reads
 * anew.  Either way the base check is clean and commits are approved.  On
 * a small image the attach may read the superblock after the test changed
 * it, so the layout-field case does not say which happened. */
enum early_case { EARLY_SB_COUNTS, EARLY_OTHER_BLOCK, EARLY_SB_LAYOUT, EARLY_DIRTY, EARLY_N };

void test_early_attach(void)
{
	static const char *const names[EARLY_N] = { "superblock counts", "another block",
						    "a superblock layout field", "dirty cache" };
	char img[300];
	snprintf(img, sizeof(img), "%s/early.img", scratch);
	for (int c = 0; c < EARLY_N && !failures; c++) {
		make_image_or_skip(img, c % 2 ? "-t ext3 -b 4096" : "-t ext3 -b 1024", 65536);
		set_txn_cfg(true, true, 0, 0, NULL);
		ext2_filsys fs;
		/* a stale free count on disk, as a power cut leaves it */
		CHECK_ERR(ext2fs_open2(img, NULL, EXT2_FLAG_RW, 0, 0, unix_io_manager, &fs));
		ext2fs_free_blocks_count_add(fs->super, -7);
		ext2fs_mark_super_dirty(fs);
		fs->flags |= EXT2_FLAG_SUPER_ONLY;
		CHECK_ERR(ext2fs_close2(fs, 0));
		CHECK_ERR(ext2fs_open2(img, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs));
		struct ext2_inode root;
		if (c == EARLY_DIRTY) {
			CHECK_ERR(ext2fs_read_inode(fs, EXT2_ROOT_INO, &root));
			root.i_atime++;
			CHECK_ERR(ext2fs_write_inode(fs, EXT2_ROOT_INO, &root));
		}
		CHECK_ERR(rio_txn_prepare(fs));
		CHECK_ERR(ext2fs_read_bitmaps(fs));
		/* what a mount writes meanwhile: the superblock alone (the free
		 * count recounted from the descriptors) ... */
		blk64_t free_blocks = 0;
		for (dgrp_t g = 0; g < fs->group_desc_count; g++)
			free_blocks += ext2fs_bg_free_blocks_count(fs, g);
		ext2fs_free_blocks_count_set(fs->super, free_blocks);
		fs->super->s_mnt_count++;
		if (c == EARLY_SB_LAYOUT)
			fs->super->s_max_mnt_count++;
		ext2fs_mark_super_dirty(fs);
		fs->flags |= EXT2_FLAG_SUPER_ONLY;
		CHECK_ERR(ext2fs_flush(fs));
		fs->flags &= ~EXT2_FLAG_SUPER_ONLY;
		/* ... or more */
		if (c == EARLY_OTHER_BLOCK) {
			CHECK_ERR(ext2fs_read_inode(fs, EXT2_ROOT_INO, &root));
			root.i_mtime++;
			CHECK_ERR(ext2fs_write_inode(fs, EXT2_ROOT_INO, &root));
		}
		CHECK_ERR(rio_txn_attach(fs));
		struct rio_stats st;
		CHECK_ERR(rio_get_stats(fs->io, &st));
		/* a layout field is refused only if the attach read the superblock
		 * before it changed (tests/checker refresh-super): either way the
		 * checker starts from what is on disk, as the checks below show */
		if (c != EARLY_SB_LAYOUT)
			CHECK(st.checker_attached_early == (c == EARLY_SB_COUNTS), "%s: early attach %s",
			      names[c], st.checker_attached_early ? "kept" : "dropped");
		char *report = NULL;
		CHECK_ERR(rio_txn_base_check(fs, &report));
		CHECK(report == NULL, "%s: base check: %s", names[c], report ? report : "");
		free(report);
		make_files(fs, "e", 8, 20);
		CHECK_ERR(rio_txn_boundary(fs, true));
		CHECK(!rio_txn_failed(fs->io), "%s: a commit after the attach was rejected", names[c]);
		CHECK_ERR(rio_txn_detach(fs));
		CHECK_ERR(ext2fs_close2(fs, 0));
		CHECK(fsck_clean(img), "%s: e2fsck", names[c]);
	}
}

/* An operation that fails half-way is rolled back to its savepoint: its
 * metadata writes vanish, the blocks it freed are in use again, libext2fs's
 * bitmaps and group descriptors are as before it (io undoes the allocations
 * it saw; the caller restores only the superblock and the inode cache), and
 * what earlier operations of the same transaction did survives. */
void test_rollback(bool journal)
{
	char img[300];
	snprintf(img, sizeof(img), "%s/rb.img", scratch);
	make_image_or_skip(img, journal ? "-t ext3 -b 1024" : "-t ext2 -b 1024", 16384);
	set_txn_cfg(false, journal, 0, 0, NULL);
	ext2_filsys fs;
	CHECK_ERR(ext2fs_open2(img, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs));
	CHECK_ERR(ext2fs_read_bitmaps(fs));
	CHECK_ERR(rio_txn_attach(fs));
	make_files(fs, "a", 2, 14);
	CHECK_ERR(rio_txn_boundary(fs, true));
	make_files(fs, "b", 1, 5);           /* acknowledged, not yet committed */
	CHECK_ERR(rio_txn_boundary(fs, false));
	if (failures)
		return;

	/* the operation: snapshot libext2fs's state, savepoint */
	struct ext2_super_block sb_snap = *fs->super;
	size_t gdlen = (size_t)fs->desc_blocks * fs->blocksize;
	void *gd_snap = malloc(gdlen);
	CHECK(gd_snap, "malloc");
	memcpy(gd_snap, fs->group_desc, gdlen);
	ext2fs_block_bitmap bmap_snap;
	ext2fs_inode_bitmap imap_snap;
	CHECK_ERR(ext2fs_copy_bitmap(fs->block_map, &bmap_snap));
	CHECK_ERR(ext2fs_copy_bitmap(fs->inode_map, &imap_snap));
	CHECK_ERR(rio_txn_savepoint(fs->io));
	/* ... it creates a file, deletes a0 and then "fails" */
	make_files(fs, "c", 1, 13);
	remove_file(fs, "a0");
	if (failures)
		return;
	CHECK_ERR(rio_txn_rollback(fs->io));
	*fs->super = sb_snap;
	CHECK_ERR(ext2fs_flush_icache(fs));
	ext2fs_mark_super_dirty(fs);
	CHECK(memcmp(fs->group_desc, gd_snap, gdlen) == 0,
	      "group descriptors not restored by the rollback\n");
	CHECK(ext2fs_compare_block_bitmap(fs->block_map, bmap_snap) == 0,
	      "block bitmap not restored by the rollback\n");
	CHECK(ext2fs_compare_inode_bitmap(fs->inode_map, imap_snap) == 0,
	      "inode bitmap not restored by the rollback\n");
	free(gd_snap);
	ext2fs_free_block_bitmap(bmap_snap);
	ext2fs_free_inode_bitmap(imap_snap);

	ext2_ino_t ino;
	CHECK(ext2fs_lookup(fs, EXT2_ROOT_INO, "c0", 2, NULL, &ino) == EXT2_ET_FILE_NOT_FOUND,
	      "rolled-back file still visible");
	CHECK_ERR(ext2fs_lookup(fs, EXT2_ROOT_INO, "a0", 2, NULL, &ino));
	CHECK_ERR(ext2fs_lookup(fs, EXT2_ROOT_INO, "b0", 2, NULL, &ino));
	/* and the next operation goes on normally */
	make_files(fs, "d", 1, 3);
	CHECK_ERR(rio_txn_detach(fs));
	CHECK_ERR(ext2fs_close2(fs, 0));
	CHECK(fsck_clean(img), "e2fsck after rollback");
	CHECK_ERR(ext2fs_open2(img, NULL, 0, 0, 0, unix_io_manager, &fs));
	CHECK(ext2fs_lookup(fs, EXT2_ROOT_INO, "c0", 2, NULL, &ino) == EXT2_ET_FILE_NOT_FOUND, "c0 on disk");
	CHECK_ERR(ext2fs_lookup(fs, EXT2_ROOT_INO, "a0", 2, NULL, &ino));
	CHECK_ERR(ext2fs_lookup(fs, EXT2_ROOT_INO, "b0", 2, NULL, &ino));
	CHECK_ERR(ext2fs_lookup(fs, EXT2_ROOT_INO, "d0", 2, NULL, &ino));
	ext2fs_close2(fs, 0);
}

/* Transaction ids and pending frees (what fsync and the allocator's retry
 * rely on): ids only grow and a forced commit makes the open one durable;
 * blocks freed by the open transaction stay marked and are counted pending
 * until its commit; an operation that takes many of them back and frees
 * others is rolled back exactly (thousands of removals from the freed set). */
void test_txn_ids(void)
{
	enum { NB = 6000 };
	char img[300];
	snprintf(img, sizeof(img), "%s/ids.img", scratch);
	make_image_or_skip(img, "-t ext3 -b 1024", 32768);
	set_txn_cfg(false, true, 0, 0, NULL);
	ext2_filsys fs;
	CHECK_ERR(ext2fs_open2(img, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs));
	CHECK_ERR(ext2fs_read_bitmaps(fs));
	uint64_t open = 9, durable = 9;
	rio_txn_ids(fs->io, &open, &durable);
	CHECK(open == 0 && durable == 0, "ids before attach: %llu %llu\n",
	      (unsigned long long)open, (unsigned long long)durable);
	CHECK_ERR(rio_txn_attach(fs));
	rio_txn_ids(fs->io, &open, &durable);
	CHECK(open == 1 && durable == 0, "ids at attach: %llu %llu\n",
	      (unsigned long long)open, (unsigned long long)durable);
	static blk64_t b[2 * NB];
	blk64_t goal = fs->super->s_first_data_block;
	for (int i = 0; i < 2 * NB; i++) {
		CHECK_ERR(ext2fs_new_block2(fs, goal, NULL, &b[i]));
		ext2fs_block_alloc_stats2(fs, b[i], +1);
		goal = b[i] + 1;
	}
	CHECK_ERR(rio_txn_boundary(fs, true));
	rio_txn_ids(fs->io, &open, &durable);
	CHECK(open == 2 && durable == 1, "ids after a commit: %llu %llu\n",
	      (unsigned long long)open, (unsigned long long)durable);
	CHECK(rio_txn_pending_frees(fs->io) == 0, "nothing pending after a commit\n");
	/* a forced commit with nothing to log still counts the open id durable */
	CHECK_ERR(rio_txn_boundary(fs, true));
	rio_txn_ids(fs->io, &open, &durable);
	CHECK(open == 3 && durable == 2, "ids after an empty commit: %llu %llu\n",
	      (unsigned long long)open, (unsigned long long)durable);

	for (int i = 0; i < NB; i++)
		ext2fs_block_alloc_stats2(fs, b[i], -1);
	CHECK(rio_txn_pending_frees(fs->io) == NB, "pending %llu, want %d\n",
	      (unsigned long long)rio_txn_pending_frees(fs->io), NB);
	CHECK_ERR(rio_txn_savepoint(fs->io));
	for (int i = 0; i < NB; i += 3)
		ext2fs_block_alloc_stats2(fs, b[i], +1);       /* taken back */
	for (int i = NB; i < 2 * NB; i++)
		ext2fs_block_alloc_stats2(fs, b[i], -1);       /* freed by the operation */
	CHECK(rio_txn_pending_frees(fs->io) == 2 * NB - (NB + 2) / 3, "pending %llu mid-operation\n",
	      (unsigned long long)rio_txn_pending_frees(fs->io));
	CHECK_ERR(rio_txn_rollback(fs->io));
	CHECK(rio_txn_pending_frees(fs->io) == NB, "pending %llu after the rollback, want %d\n",
	      (unsigned long long)rio_txn_pending_frees(fs->io), NB);
	for (int i = 1; i < NB; i += 3)
		CHECK(ext2fs_test_block_bitmap2(fs->block_map, b[i]), "block %llu freed but reusable "
		      "before its commit\n", (unsigned long long)b[i]);
	CHECK_ERR(rio_txn_boundary(fs, true));
	rio_txn_ids(fs->io, &open, &durable);
	CHECK(open == 4 && durable == 3, "ids after the last commit: %llu %llu\n",
	      (unsigned long long)open, (unsigned long long)durable);
	CHECK(rio_txn_pending_frees(fs->io) == 0, "pending after the commit\n");
	for (int i = 0; i < NB; i++)
		CHECK(!ext2fs_test_block_bitmap2(fs->block_map, b[i]), "block %llu still held "
		      "after the commit that freed it\n", (unsigned long long)b[i]);
	for (int i = NB; i < 2 * NB; i++)                   /* owned by no inode */
		ext2fs_block_alloc_stats2(fs, b[i], -1);
	CHECK_ERR(rio_txn_detach(fs));
	CHECK_ERR(ext2fs_close2(fs, 0));
	CHECK(fsck_clean(img), "e2fsck after the ids scenario");
}

/* ---- what a commit writes of libext2fs's allocation state ---- */

static int bit_on_disk(const char *path, unsigned bs, blk64_t bitmap, unsigned bit)
{
	unsigned char byte;
	if (raw_read(path, bitmap * bs + bit / 8, &byte, 1))
		return -1;
	return (byte >> (bit % 8)) & 1;
}

/* A commit writes the bitmaps of the groups it changed, not of every group:
 * its seam writes do not grow with the file system.  What it writes is on
 * disk (a second handle sees it), and a change nobody marked is caught by
 * RECON_VERIFY_FLUSH before it can be lost. */
void test_txn_flush(void)
{
	char img[300];
	snprintf(img, sizeof(img), "%s/flush.img", scratch);
	/* 1 KiB blocks, 8 MiB groups: 64 groups, 128 bitmap blocks */
	make_image_or_skip(img, "-t ext3 -b 1024", 512 * 1024);
	set_txn_cfg(false, true, 0, 0, NULL);
	ext2_filsys fs;
	CHECK_ERR(ext2fs_open2(img, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs));
	CHECK_ERR(ext2fs_read_bitmaps(fs));
	CHECK(fs->group_desc_count >= 64, "%u groups", fs->group_desc_count);
	CHECK_ERR(rio_txn_attach(fs));
	dgrp_t g = 41;
	blk64_t blk = ext2fs_group_first_block2(fs, g) + 4000;
	ext2_ino_t ino = g * fs->super->s_inodes_per_group + 7;
	CHECK(!ext2fs_test_block_bitmap2(fs->block_map, blk), "block %llu in use",
	      (unsigned long long)blk);
	CHECK(!ext2fs_test_inode_bitmap2(fs->inode_map, ino), "inode %u in use", ino);

	struct rio_stats before, after;
	CHECK_ERR(rio_get_stats(fs->io, &before));
	ext2fs_block_alloc_stats2(fs, blk, +1);
	ext2fs_inode_alloc_stats2(fs, ino, +1, 0);
	rio_txn_inode_bitmap_changed(fs, ino);
	CHECK_ERR(rio_txn_boundary(fs, true));
	CHECK_ERR(rio_get_stats(fs->io, &after));
	/* two bitmaps, the superblock and (the first time) every descriptor
	 * block: ext2fs_flush would write all 128 bitmaps */
	uint64_t seam = after.meta_writes - before.meta_writes;
	CHECK(seam <= 3 + fs->desc_blocks, "a commit of one group's changes made %llu metadata writes",
	      (unsigned long long)seam);
	unsigned bpg = fs->super->s_blocks_per_group, ipg = fs->super->s_inodes_per_group;
	unsigned bbit = (unsigned)((blk - fs->super->s_first_data_block) % bpg);
	unsigned ibit = (ino - 1) % ipg;
	CHECK(bit_on_disk(img, fs->blocksize, ext2fs_block_bitmap_loc(fs, g), bbit) == 1,
	      "block bitmap of group %u not written", g);
	CHECK(bit_on_disk(img, fs->blocksize, ext2fs_inode_bitmap_loc(fs, g), ibit) == 1,
	      "inode bitmap of group %u not written", g);
	ext2_filsys fs2;
	CHECK_ERR(ext2fs_open2(img, NULL, 0, 0, 0, unix_io_manager, &fs2));
	CHECK(ext2fs_bg_free_blocks_count(fs2, g) == ext2fs_bg_free_blocks_count(fs, g) &&
	      ext2fs_bg_free_inodes_count(fs2, g) == ext2fs_bg_free_inodes_count(fs, g),
	      "descriptor of group %u not written", g);
	CHECK(ext2fs_free_blocks_count(fs2->super) == ext2fs_free_blocks_count(fs->super),
	      "superblock free count not written");
	ext2fs_close2(fs2, 0);

	/* and back: the disk is as mke2fs left it (e2fsck below) */
	CHECK_ERR(rio_get_stats(fs->io, &before));
	ext2fs_block_alloc_stats2(fs, blk, -1);
	ext2fs_inode_alloc_stats2(fs, ino, -1, 0);
	rio_txn_inode_bitmap_changed(fs, ino);
	CHECK_ERR(rio_txn_boundary(fs, true));
	CHECK_ERR(rio_get_stats(fs->io, &after));
	/* now only the descriptor block that changed */
	seam = after.meta_writes - before.meta_writes;
	CHECK(seam <= 4, "the second commit made %llu metadata writes", (unsigned long long)seam);
	CHECK(bit_on_disk(img, fs->blocksize, ext2fs_block_bitmap_loc(fs, g), bbit) == 0,
	      "block bitmap of group %u not written back", g);
	CHECK(bit_on_disk(img, fs->blocksize, ext2fs_inode_bitmap_loc(fs, g), ibit) == 0,
	      "inode bitmap of group %u not written back", g);
	CHECK_ERR(rio_txn_detach(fs));
	CHECK_ERR(ext2fs_close_free(&fs));
	CHECK(fsck_clean(img), "e2fsck after the commits");

	/* an inode bitmap change with no mark: the verification stops it */
	pid_t pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		setenv("RECON_VERIFY_FLUSH", "1", 1);
		int devnull = open("/dev/null", O_WRONLY);
		if (devnull >= 0)
			dup2(devnull, 2);
		if (ext2fs_open2(img, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs) ||
		    ext2fs_read_bitmaps(fs) || rio_txn_attach(fs))
			_exit(3);
		ext2fs_inode_alloc_stats2(fs, ino, +1, 0);
		(void)rio_txn_boundary(fs, true);
		_exit(0);
	}
	int st;
	CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT,
	      "an unmarked inode bitmap change was not caught (status %d)", st);
}

/* ---- commits asked for without waiting (fsync answered later) ---- */

static atomic_uint commits_done;

static _Atomic uint64_t last_durable;

static void count_commit(void *arg, uint64_t tid, bool durable)
{
	(void)arg;
	if (durable)
		atomic_store(&last_durable, tid);
	atomic_fetch_add(&commits_done, 1);
}

/* Up to 20 s for the hook to have counted n commits. */
static bool wait_commits(unsigned n)
{
	for (int i = 0; i < 2000 && atomic_load(&commits_done) < n; i++)
		usleep(10000);
	return atomic_load(&commits_done) >= n;
}

/* Blocks taken (owned by no inode: given back before the end). */
static blk64_t taken[100];
static int ntaken;

static void take_blocks(ext2_filsys fs, int n)
{
	blk64_t b, goal = fs->super->s_first_data_block;
	for (int i = 0; i < n && ntaken < 100; i++) {
		CHECK_ERR(ext2fs_new_block2(fs, goal, NULL, &b));
		ext2fs_block_alloc_stats2(fs, b, +1);
		taken[ntaken++] = b;
		goal = b + 1;
	}
}

static void check_ids(ext2_filsys fs, uint64_t want_open, uint64_t want_durable, const char *when)
{
	uint64_t open, durable;
	rio_txn_ids(fs->io, &open, &durable);
	CHECK(open == want_open && durable == want_durable, "ids %s: %llu %llu, want %llu %llu\n",
	      when, (unsigned long long)open, (unsigned long long)durable,
	      (unsigned long long)want_open, (unsigned long long)want_durable);
}

/* rio_txn_commit_begin hands the open transaction to the commit thread and
 * returns; while that commit is held in flight (RECON_COMMIT_GATE) a second
 * call closes nothing and names the open transaction, which the call after
 * the first commit finished hands over; the hook counts each commit; an
 * empty transaction commits too (a flush); without a commit thread the
 * call refuses. */
void test_txn_commit_begin(void)
{
	char img[300], gate[300], held[310];
	snprintf(img, sizeof(img), "%s/begin.img", scratch);
	snprintf(gate, sizeof(gate), "%s/gate", scratch);
	snprintf(held, sizeof(held), "%s.held", gate);
	make_image_or_skip(img, "-t ext3 -b 1024", 32768);
	uint64_t tid = 0;
	ext2_filsys fs;

	g_async = false;
	set_txn_cfg(false, true, 0, 0, NULL);
	CHECK_ERR(ext2fs_open2(img, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs));
	CHECK_ERR(ext2fs_read_bitmaps(fs));
	CHECK_ERR(rio_txn_attach(fs));
	CHECK(rio_txn_commit_begin(fs->io, &tid) == EXT2_ET_OP_NOT_SUPPORTED,
	      "without a commit thread the call refuses\n");
	CHECK_ERR(rio_txn_detach(fs));
	CHECK_ERR(ext2fs_close2(fs, 0));

	g_async = true;
	set_txn_cfg(false, true, 0, 0, NULL);
	setenv("RECON_COMMIT_GATE", gate, 1);
	CHECK_ERR(ext2fs_open2(img, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs));
	CHECK_ERR(ext2fs_read_bitmaps(fs));
	CHECK_ERR(rio_txn_attach(fs));
	unsetenv("RECON_COMMIT_GATE");
	rio_txn_set_commit_hook(fs->io, count_commit, NULL);
	int fd = open(gate, O_WRONLY | O_CREAT, 0644);
	CHECK(fd >= 0, "gate\n");
	close(fd);

	take_blocks(fs, 50);
	CHECK_ERR(rio_txn_commit_begin(fs->io, &tid));
	CHECK(tid == 1, "first commit's id %llu\n", (unsigned long long)tid);
	for (int i = 0; i < 2000 && access(held, F_OK); i++)
		usleep(10000);
	CHECK(!access(held, F_OK), "the commit reaches the gate\n");
	take_blocks(fs, 50);
	CHECK_ERR(rio_txn_commit_begin(fs->io, &tid));
	CHECK(tid == 2, "id while one is in flight %llu, want the open one\n",
	      (unsigned long long)tid);
	CHECK_ERR(rio_txn_settle(fs->io));
	check_ids(fs, 2, 0, "while the first is held");
	CHECK(atomic_load(&commits_done) == 0, "no commit finished while held\n");

	unlink(gate);
	CHECK(wait_commits(1), "the hook sees the first commit\n");
	CHECK(atomic_load(&last_durable) == 1, "the hook's durable id %llu\n",
	      (unsigned long long)atomic_load(&last_durable));
	CHECK_ERR(rio_txn_settle(fs->io));
	check_ids(fs, 2, 1, "after the first");
	CHECK_ERR(rio_txn_commit_begin(fs->io, &tid));
	CHECK(tid == 2, "second commit's id %llu\n", (unsigned long long)tid);
	CHECK(wait_commits(2), "the hook sees the second commit\n");
	CHECK_ERR(rio_txn_settle(fs->io));
	check_ids(fs, 3, 2, "after the second");
	CHECK_ERR(rio_txn_commit_begin(fs->io, &tid));
	CHECK(tid == 3, "an empty transaction commits too: id %llu\n", (unsigned long long)tid);
	CHECK(wait_commits(3), "the hook sees the empty commit\n");
	CHECK(atomic_load(&last_durable) == 3, "the hook's durable id %llu\n",
	      (unsigned long long)atomic_load(&last_durable));
	CHECK_ERR(rio_txn_settle(fs->io));
	check_ids(fs, 4, 3, "after the empty one");
	while (ntaken)
		ext2fs_block_alloc_stats2(fs, taken[--ntaken], -1);
	CHECK_ERR(rio_txn_detach(fs));
	CHECK_ERR(ext2fs_close2(fs, 0));
	CHECK(fsck_clean(img), "e2fsck after the commit-begin scenario");
}
