/*
 * io/flush.c - libext2fs's in-memory allocation state into the overlay at a
 * commit: the bitmaps of the groups whose bitmaps changed, the descriptor
 * blocks that changed and the primary superblock.
 *
 * ext2fs_flush writes every group's bitmaps and every descriptor block at
 * each call: on a large file system every commit would copy and compare
 * hundreds of thousands of blocks, whatever it changed.  Here the cost
 * follows what the transaction did.  io sees the block bitmap's changes
 * through libext2fs's alloc-stats callbacks; the inode bitmap has none, so
 * its users report each change (rio_txn_inode_bitmap_changed).
 * A descriptor changes with its group's bitmaps (free counts, directory
 * count, checksums), so after the first commit, which compares every
 * descriptor block with what is on disk, a commit compares with what it
 * last wrote only the descriptor blocks of the groups whose bitmaps it
 * marked: comparing them all at every commit was most of an fsync's time
 * on a large disk (bench/results/history-2026-12-scale.md).
 *
 * What each block holds is what ext2fs_flush would write for it (padding
 * bits, checksums), so the disk is byte-identical either way.  A missed
 * mark would leave a bitmap stale on disk, which the checker rejects; with
 * RECON_VERIFY_FLUSH=1 in the environment (the test suite sets it) every
 * commit also compares every group's in-memory bitmaps with what is now on
 * disk, and every descriptor block with what was last written, and aborts
 * naming the group or the block.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "txn_internal.h"

static size_t group_words(const struct txn_manager *t)
{
	return ((size_t)t->fs->group_desc_count + 63) / 64;
}

errcode_t flush_init(struct txn_manager *t)
{
	ext2_filsys fs = t->fs;
	size_t w = group_words(t);
	t->bb_dirty = calloc(w ? w : 1, sizeof(uint64_t));
	t->ib_dirty = calloc(w ? w : 1, sizeof(uint64_t));
	if (!t->bb_dirty || !t->ib_dirty)
		return ENOMEM;
	/* what changed in memory before attach and was not written: all of
	 * it at the first commit, as before */
	if (fs->flags & (EXT2_FLAG_BB_DIRTY | EXT2_FLAG_IB_DIRTY)) {
		for (dgrp_t g = 0; g < fs->group_desc_count; g++) {
			t->bb_dirty[g / 64] |= 1ull << (g % 64);
			t->ib_dirty[g / 64] |= 1ull << (g % 64);
		}
	}
	const char *v = getenv("RECON_VERIFY_FLUSH");
	t->verify_flush = v && *v && strcmp(v, "0") != 0;
	/* desc_written stays NULL: the first commit compares every descriptor
	 * block with the disk through the overlay */
	return 0;
}

void flush_free(struct txn_manager *t)
{
	free(t->bb_dirty);
	free(t->ib_dirty);
	free(t->desc_written);
	t->bb_dirty = t->ib_dirty = NULL;
	t->desc_written = NULL;
}

void flush_mark_block(struct txn_manager *t, blk64_t blk)
{
	ext2_filsys fs = t->fs;
	if (!t->bb_dirty || blk < fs->super->s_first_data_block ||
	    blk >= ext2fs_blocks_count(fs->super))
		return;
	dgrp_t g = ext2fs_group_of_blk2(fs, blk);
	t->bb_dirty[g / 64] |= 1ull << (g % 64);
}

void flush_mark_inode(struct txn_manager *t, ext2_ino_t ino)
{
	ext2_filsys fs = t->fs;
	if (!t->ib_dirty || ino == 0 || ino > fs->super->s_inodes_count)
		return;
	dgrp_t g = ext2fs_group_of_ino(fs, ino);
	t->ib_dirty[g / 64] |= 1ull << (g % 64);
}

/* Group g's block bitmap block as ext2fs_flush writes it: unused bytes and,
 * in the last group, the bits past the end of the file system set.  *nbits
 * = the bits that stand for blocks. */
static errcode_t block_bitmap_image(ext2_filsys fs, dgrp_t g, unsigned char *buf, unsigned *nbits)
{
	unsigned nbytes = EXT2_CLUSTERS_PER_GROUP(fs->super) / 8;
	blk64_t first = EXT2FS_B2C(fs, fs->super->s_first_data_block) +
			(blk64_t)g * (nbytes * 8u);
	memset(buf, 0xff, fs->blocksize);
	errcode_t err = ext2fs_get_block_bitmap_range2(fs->block_map, first, nbytes * 8u, buf);
	if (err)
		return err;
	*nbits = nbytes * 8u;
	if (g == fs->group_desc_count - 1) {
		unsigned last = (unsigned)EXT2FS_NUM_B2C(fs,
			(ext2fs_blocks_count(fs->super) - (uint64_t)fs->super->s_first_data_block) %
			(uint64_t)EXT2_BLOCKS_PER_GROUP(fs->super));
		if (last) {
			for (unsigned j = last; j < fs->blocksize * 8u; j++)
				ext2fs_set_bit(j, buf);
			*nbits = last;
		}
	}
	return 0;
}

static errcode_t inode_bitmap_image(ext2_filsys fs, dgrp_t g, unsigned char *buf, unsigned *nbits)
{
	unsigned nbytes = (EXT2_INODES_PER_GROUP(fs->super) + 7) / 8;
	memset(buf, 0xff, fs->blocksize);
	*nbits = EXT2_INODES_PER_GROUP(fs->super);
	return ext2fs_get_inode_bitmap_range2(fs->inode_map,
					      (uint64_t)g * EXT2_INODES_PER_GROUP(fs->super) + 1,
					      nbytes * 8u, buf);
}

static bool has_block(ext2_filsys fs, blk64_t blk)
{
	return blk && blk < ext2fs_blocks_count(fs->super);
}

static errcode_t write_group_bitmaps(struct txn_manager *t, dgrp_t g, bool block,
				     unsigned char *buf)
{
	ext2_filsys fs = t->fs;
	bool csum = ext2fs_has_group_desc_csum(fs);
	unsigned nbits;
	errcode_t err;
	if (block) {
		if (csum && ext2fs_bg_flags_test(fs, g, EXT2_BG_BLOCK_UNINIT))
			return 0;
		err = block_bitmap_image(fs, g, buf, &nbits);
		if (!err)
			err = ext2fs_block_bitmap_csum_set(fs, g, (char *)buf,
							   (int)(EXT2_CLUSTERS_PER_GROUP(fs->super) / 8));
		if (err)
			return err;
		ext2fs_group_desc_csum_set(fs, g);
		blk64_t at = ext2fs_block_bitmap_loc(fs, g);
		if (has_block(fs, at) && io_channel_write_blk64(fs->io, at, 1, buf))
			return EXT2_ET_BLOCK_BITMAP_WRITE;
	} else {
		if (csum && ext2fs_bg_flags_test(fs, g, EXT2_BG_INODE_UNINIT))
			return 0;
		err = inode_bitmap_image(fs, g, buf, &nbits);
		if (!err)
			err = ext2fs_inode_bitmap_csum_set(fs, g, (char *)buf,
							   (int)((EXT2_INODES_PER_GROUP(fs->super) + 7) / 8));
		if (err)
			return err;
		ext2fs_group_desc_csum_set(fs, g);
		blk64_t at = ext2fs_inode_bitmap_loc(fs, g);
		if (has_block(fs, at) && io_channel_write_blk64(fs->io, at, 1, buf))
			return EXT2_ET_INODE_BITMAP_WRITE;
	}
	return 0;
}

static errcode_t write_marked(struct txn_manager *t, uint64_t *set, bool block, unsigned char *buf)
{
	size_t w = group_words(t);
	for (size_t i = 0; i < w; i++) {
		while (set[i]) {
			unsigned b = (unsigned)__builtin_ctzll(set[i]);
			errcode_t err = write_group_bitmaps(t, (dgrp_t)(i * 64 + b), block, buf);
			if (err)
				return err;
			set[i] &= set[i] - 1;
		}
	}
	return 0;
}

/* Set in `desc` (one bit per descriptor block) the blocks holding a group
 * marked in bb_dirty or ib_dirty. */
static void mark_desc_blocks(struct txn_manager *t, uint64_t *desc)
{
	size_t w = group_words(t);
	unsigned per_block = EXT2_DESC_PER_BLOCK(t->fs->super);
	for (size_t i = 0; i < w; i++) {
		uint64_t bits = t->bb_dirty[i] | t->ib_dirty[i];
		while (bits) {
			size_t d = (i * 64 + (unsigned)__builtin_ctzll(bits)) / per_block;
			desc[d / 64] |= 1ull << (d % 64);
			bits &= bits - 1;
		}
	}
}

/* The primary descriptor blocks that differ from what was last written:
 * all of them the first time (the overlay drops the unchanged ones), then
 * those `marked` names (NULL: all). */
static errcode_t write_descriptors(struct txn_manager *t, const uint64_t *marked)
{
	ext2_filsys fs = t->fs;
	size_t bs = fs->blocksize, len = (size_t)fs->desc_blocks * bs;
	blk64_t super_blk, desc_blk;
	errcode_t err = ext2fs_super_and_bgd_loc2(fs, 0, &super_blk, &desc_blk, NULL, NULL);
	if (err)
		return err;
	bool first = !t->desc_written;
	if (first) {
		t->desc_written = malloc(len ? len : 1);
		if (!t->desc_written)
			return ENOMEM;
	}
	const unsigned char *cur = (const unsigned char *)fs->group_desc;
	for (blk_t i = 0; i < fs->desc_blocks; i++) {
		if (!first && marked && !(marked[i / 64] & (1ull << (i % 64)))) {
			if (t->verify_flush && memcmp(cur + i * bs, t->desc_written + i * bs, bs)) {
				fprintf(stderr, "recon-fuse: internal error: descriptor block %u "
					"changed in memory with no group of it marked\n", i);
				abort();
			}
			continue;
		}
		if (!first && memcmp(cur + i * bs, t->desc_written + i * bs, bs) == 0)
			continue;
		err = io_channel_write_blk64(fs->io, desc_blk + i, 1, cur + i * bs);
		if (err) {
			/* compared in full at the next flush */
			free(t->desc_written);
			t->desc_written = NULL;
			return err;
		}
		memcpy(t->desc_written + i * bs, cur + i * bs, bs);
	}
	return 0;
}

/* The primary superblock, as ext2fs_flush leaves it (the backups are left
 * alone, as the kernel does). */
static errcode_t write_superblock(ext2_filsys fs)
{
	time_t now = time(NULL);
	fs->super->s_wtime = (uint32_t)now;
	fs->super->s_wtime_hi = (uint8_t)((uint64_t)now >> 32);
	fs->super->s_block_group_nr = 0;
	errcode_t err = ext2fs_superblock_csum_set(fs, fs->super);
	if (err)
		return err;
	err = io_channel_write_byte(fs->io, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE, fs->super);
	if (err)
		return err;
	if (fs->orig_super)
		memcpy(fs->orig_super, fs->super, SUPERBLOCK_SIZE);
	return 0;
}

/* Test aid: every group's bitmaps in memory are what the disk (with the
 * overlay) now holds.  A difference is a change nobody marked. */
static void verify_all_groups(struct txn_manager *t)
{
	ext2_filsys fs = t->fs;
	unsigned char *want = malloc(fs->blocksize), *have = malloc(fs->blocksize);
	if (!want || !have)
		goto out;
	bool csum = ext2fs_has_group_desc_csum(fs);
	for (dgrp_t g = 0; g < fs->group_desc_count; g++) {
		for (int block = 0; block < 2; block++) {
			unsigned nbits;
			blk64_t at;
			if (block) {
				if (csum && ext2fs_bg_flags_test(fs, g, EXT2_BG_BLOCK_UNINIT))
					continue;
				at = ext2fs_block_bitmap_loc(fs, g);
				if (block_bitmap_image(fs, g, want, &nbits))
					continue;
			} else {
				if (csum && ext2fs_bg_flags_test(fs, g, EXT2_BG_INODE_UNINIT))
					continue;
				at = ext2fs_inode_bitmap_loc(fs, g);
				if (inode_bitmap_image(fs, g, want, &nbits))
					continue;
			}
			if (!has_block(fs, at) || io_channel_read_blk64(fs->io, at, 1, have))
				continue;
			for (unsigned j = 0; j < nbits; j++) {
				if (ext2fs_test_bit(j, want) != ext2fs_test_bit(j, have)) {
					fprintf(stderr, "recon-fuse: internal error: the %s bitmap of "
						"group %u changed in memory without being marked "
						"(bit %u)\n", block ? "block" : "inode", g, j);
					abort();
				}
			}
		}
	}
out:
	free(want);
	free(have);
}

errcode_t flush_fs_state(struct txn_manager *t)
{
	ext2_filsys fs = t->fs;
	int flags = EXT2_FLAG_DIRTY | EXT2_FLAG_BB_DIRTY | EXT2_FLAG_IB_DIRTY;
	if (!(fs->flags & flags))
		return 0;
	if (ext2fs_has_feature_meta_bg(fs->super)) {
		/* descriptors spread over the disk, with copies libext2fs
		 * keeps in step: its own flush, of everything */
		int saved = fs->flags & EXT2_FLAG_MASTER_SB_ONLY;
		fs->flags |= EXT2_FLAG_MASTER_SB_ONLY;
		errcode_t err = ext2fs_flush2(fs, EXT2_FLAG_FLUSH_NO_SYNC);
		fs->flags = (fs->flags & ~EXT2_FLAG_MASTER_SB_ONLY) | saved;
		if (!err) {
			memset(t->bb_dirty, 0, group_words(t) * sizeof(uint64_t));
			memset(t->ib_dirty, 0, group_words(t) * sizeof(uint64_t));
		}
		return err;
	}
	unsigned char *buf = malloc(fs->blocksize);
	/* taken before write_marked clears the marks; NULL: compare all */
	uint64_t *desc = t->desc_written ? calloc(((size_t)fs->desc_blocks + 63) / 64 + 1,
						  sizeof(uint64_t)) : NULL;
	if (!buf) {
		free(desc);
		return ENOMEM;
	}
	if (desc)
		mark_desc_blocks(t, desc);
	errcode_t err = 0;
	if (fs->block_map)
		err = write_marked(t, t->bb_dirty, true, buf);
	if (!err && fs->inode_map)
		err = write_marked(t, t->ib_dirty, false, buf);
	free(buf);
	if (err) {
		free(desc);
		return err;
	}
	fs->flags &= ~(EXT2_FLAG_BB_DIRTY | EXT2_FLAG_IB_DIRTY);
	err = write_descriptors(t, desc);
	free(desc);
	if (!err)
		err = write_superblock(fs);
	if (err)
		return err;
	fs->flags &= ~EXT2_FLAG_DIRTY;
	if (t->verify_flush)
		verify_all_groups(t);
	return 0;
}
