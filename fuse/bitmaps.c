/*
 * fuse/bitmaps.c - reading the allocation bitmaps at mount.
 *
 * libext2fs's ext2fs_read_bitmaps() hands each group's bitmap block to its
 * red-black-tree bitmap a byte at a time; on a large disk that is most of
 * the mount (bench/results/history-2026-12-scale.md).  Nearly every group of a big
 * disk is empty or full up to some block: its bitmap is a run of ones from
 * the start and zeros after it, which is one range to mark.  So groups of
 * that shape are marked as a range and every other group goes through
 * libext2fs's own range call; the result is the same bitmap, tails and
 * padding included.  Uninitialised groups (group descriptor checksums) are
 * made up as libext2fs makes them: nothing read, their metadata marked
 * (524,288 groups of 64 TiB of ext4 cost libext2fs over 30 s).  Bigalloc
 * is left to ext2fs_read_bitmaps.
 */
#include "rfs.h"

#include <stdlib.h>
#include <string.h>

/* Index of the first clear bit of b[0..nbits), or nbits. */
static uint32_t first_clear(const unsigned char *b, uint32_t nbits)
{
	uint32_t i = 0;
	for (; i + 64 <= nbits; i += 64) {
		uint64_t w;
		memcpy(&w, b + i / 8, sizeof(w));
		if (w != ~0ULL)
			break;
	}
	for (; i < nbits; i++)
		if (!(b[i / 8] & (1u << (i % 8))))
			return i;
	return nbits;
}

/* True when no bit of b[from..nbits) is set. */
static bool none_set(const unsigned char *b, uint32_t from, uint32_t nbits)
{
	uint32_t i = from;
	for (; i < nbits && (i % 64); i++)
		if (b[i / 8] & (1u << (i % 8)))
			return false;
	for (; i + 64 <= nbits; i += 64) {
		uint64_t w;
		memcpy(&w, b + i / 8, sizeof(w));
		if (w)
			return false;
	}
	for (; i < nbits; i++)
		if (b[i / 8] & (1u << (i % 8)))
			return false;
	return true;
}

/* As libext2fs judges a bitmap block: the bytes past the group's bits are
 * all ones. */
static bool tail_ok(const unsigned char *b, size_t nbytes, size_t bs)
{
	size_t i = nbytes;
	for (; i < bs && (i % 8); i++)
		if (b[i] != 0xff)
			return false;
	for (; i + 8 <= bs; i += 8) {
		uint64_t w;
		memcpy(&w, b + i, sizeof(w));
		if (w != ~0ULL)
			return false;
	}
	for (; i < bs; i++)
		if (b[i] != 0xff)
			return false;
	return true;
}

/* Read bitmap block blk into buf (zeros for 0 or a block past the end, as
 * libext2fs reads them; have: already in buf); the tail problem flag in
 * *tail when it is bad. */
static errcode_t read_one(ext2_filsys fs, blk64_t blk, unsigned char *buf, size_t nbytes,
			  errcode_t fail, int flag, int *tail, bool have)
{
	if (!blk || blk >= ext2fs_blocks_count(fs->super)) {
		memset(buf, 0, nbytes);
		return 0;
	}
	if (!have && io_channel_read_blk64(fs->io, blk, 1, buf))
		return fail;
	if (!tail_ok(buf, nbytes, fs->blocksize))
		*tail |= flag;
	return 0;
}

/* A pristine group's blocks in use (sealed, or claimed by its descriptor
 * and checked after the mount): its superblock and descriptor copies,
 * reserved descriptor blocks, bitmaps and inode table. */
static errcode_t mark_static(ext2_filsys fs, dgrp_t g)
{
	ext2fs_reserve_super_and_bgd(fs, g, fs->block_map);
	ext2fs_mark_block_bitmap2(fs->block_map, ext2fs_block_bitmap_loc(fs, g));
	ext2fs_mark_block_bitmap2(fs->block_map, ext2fs_inode_bitmap_loc(fs, g));
	ext2fs_mark_block_bitmap_range2(fs->block_map, ext2fs_inode_table_loc(fs, g),
					fs->inode_blocks_per_group);
	return 0;
}

/* mke2fs puts a group's inode bitmap right after its block bitmap: both
 * in one read into bb and the block after it (ib), half the requests of a
 * disk with a hundred thousand groups.  True when read; false when not that
 * layout or the read failed (each is then read alone, for its own error). */
static bool read_pair(ext2_filsys fs, dgrp_t g, unsigned char *bb, const unsigned char *ib)
{
	blk64_t b = ext2fs_block_bitmap_loc(fs, g), i = ext2fs_inode_bitmap_loc(fs, g);
	if (ib != bb + fs->blocksize || !b || i != b + 1 || i >= ext2fs_blocks_count(fs->super))
		return false;
	return io_channel_read_blk64(fs->io, b, 2, bb) == 0;
}

/* Group g's two bitmaps into bb and ib as libext2fs reads them, each read
 * one's checksum verified unless the caller ignores checksum errors.  An
 * uninitialised one (its flag under a descriptor checksum that verifies)
 * is all zeros: left unwritten, its flag set in *zero (BLOCK_UNINIT,
 * INODE_UNINIT), since most groups of a big ext4 disk are and clearing and
 * scanning 8 KiB for each of them cost seconds. */
static errcode_t read_group(ext2_filsys fs, dgrp_t g, unsigned char *bb, size_t bnbytes,
			    unsigned char *ib, size_t inbytes, int *tail, int *zero)
{
	bool csum = ext2fs_has_group_desc_csum(fs), verify = !(fs->flags & EXT2_FLAG_IGNORE_CSUM_ERRORS);
	bool dcsum = csum && ext2fs_group_desc_csum_verify(fs, g);
	errcode_t e = 0;
	*zero = 0;
	bool bu = dcsum && ext2fs_bg_flags_test(fs, g, EXT2_BG_BLOCK_UNINIT);
	bool iu = dcsum && ext2fs_bg_flags_test(fs, g, EXT2_BG_INODE_UNINIT);
	bool pair = !bu && !iu && read_pair(fs, g, bb, ib);
	if (bu) {
		*zero |= EXT2_BG_BLOCK_UNINIT;
	} else {
		blk64_t blk = ext2fs_block_bitmap_loc(fs, g);
		e = read_one(fs, blk, bb, bnbytes, EXT2_ET_BLOCK_BITMAP_READ, EXT2_FLAG_BBITMAP_TAIL_PROBLEM,
			     tail, pair);
		if (!e && blk && blk < ext2fs_blocks_count(fs->super) && verify &&
		    !ext2fs_block_bitmap_csum_verify(fs, g, (char *)bb, (int)bnbytes))
			e = EXT2_ET_BLOCK_BITMAP_CSUM_INVALID;
	}
	if (e)
		return e;
	if (iu) {
		*zero |= EXT2_BG_INODE_UNINIT;
		return 0;
	}
	blk64_t blk = ext2fs_inode_bitmap_loc(fs, g);
	e = read_one(fs, blk, ib, inbytes, EXT2_ET_INODE_BITMAP_READ, EXT2_FLAG_IBITMAP_TAIL_PROBLEM, tail,
		     pair);
	if (!e && blk && blk < ext2fs_blocks_count(fs->super) && verify &&
	    !ext2fs_inode_bitmap_csum_verify(fs, g, (char *)ib, (int)inbytes))
		e = EXT2_ET_INODE_BITMAP_CSUM_INVALID;
	return e;
}

/* As libext2fs does last: every group flagged BLOCK_UNINIT has its
 * superblock and descriptor copies, table and bitmaps marked in use,
 * wherever they lie. */
static void mark_uninit_groups(ext2_filsys fs)
{
	blk64_t n = ext2fs_blocks_count(fs->super);
	for (dgrp_t g = 0; g < fs->group_desc_count; g++) {
		if (!ext2fs_bg_flags_test(fs, g, EXT2_BG_BLOCK_UNINIT))
			continue;
		ext2fs_reserve_super_and_bgd(fs, g, fs->block_map);
		blk64_t it = ext2fs_inode_table_loc(fs, g), bb = ext2fs_block_bitmap_loc(fs, g);
		blk64_t ib = ext2fs_inode_bitmap_loc(fs, g);
		if (it)
			ext2fs_mark_block_bitmap_range2(fs->block_map, it, fs->inode_blocks_per_group);
		if (bb && bb < n)
			ext2fs_mark_block_bitmap2(fs->block_map, bb);
		if (ib && ib < n)
			ext2fs_mark_block_bitmap2(fs->block_map, ib);
	}
}

errcode_t rfs_read_bitmaps(ext2_filsys fs, const uint8_t *pristine)
{
	struct ext2_super_block *sb = fs->super;
	uint32_t bpg = EXT2_CLUSTERS_PER_GROUP(sb), ipg = EXT2_INODES_PER_GROUP(sb);
	size_t bnbytes = bpg / 8, inbytes = ipg / 8;

	if (ext2fs_has_feature_bigalloc(sb) || bnbytes > fs->blocksize || inbytes > fs->blocksize ||
	    fs->block_map || fs->inode_map)
		return ext2fs_read_bitmaps(fs);   /* (seal.c makes no group pristine here) */

	unsigned char *buf = malloc((size_t)2 * fs->blocksize);
	if (!buf)
		return EXT2_ET_NO_MEMORY;
	unsigned char *bb = buf, *ib = buf + fs->blocksize;
	fs->write_bitmaps = ext2fs_write_bitmaps;
	errcode_t e = ext2fs_allocate_block_bitmap(fs, "block bitmap", &fs->block_map);
	if (!e)
		e = ext2fs_allocate_inode_bitmap(fs, "inode bitmap", &fs->inode_map);
	int tail = 0;
	blk64_t first = sb->s_first_data_block;
	for (dgrp_t g = 0; !e && g < fs->group_desc_count; g++) {
		if (pristine && (pristine[g / 8] >> (g % 8)) & 1) {
			e = mark_static(fs, g);
			continue;
		}
		int zero = 0;
		if ((e = read_group(fs, g, bb, bnbytes, ib, inbytes, &tail, &zero)))
			break;
		blk64_t start = first + (blk64_t)g * bpg;
		uint32_t ones = zero & EXT2_BG_BLOCK_UNINIT ? 0 : first_clear(bb, bpg);
		/* the last group's bits past the end go through libext2fs, which
		 * keeps them between the bitmap's end and its real end */
		if (g + 1 < fs->group_desc_count && zero & EXT2_BG_BLOCK_UNINIT) {
			/* all clear, as the fresh bitmap is */
		} else if (zero & EXT2_BG_BLOCK_UNINIT) {
			memset(bb, 0, bnbytes);
			e = ext2fs_set_block_bitmap_range2(fs->block_map, start, bpg, bb);
		} else if (g + 1 < fs->group_desc_count && none_set(bb, ones, bpg)) {
			if (ones)
				ext2fs_mark_block_bitmap_range2(fs->block_map, start, ones);
		} else {
			e = ext2fs_set_block_bitmap_range2(fs->block_map, start, bpg, bb);
		}
		/* a fresh bitmap is all clear: an empty group's is already there */
		if (!e && !(zero & EXT2_BG_INODE_UNINIT) && !none_set(ib, 0, ipg))
			e = ext2fs_set_inode_bitmap_range2(fs->inode_map, (ext2_ino_t)g * ipg + 1,
							   ipg, ib);
	}
	free(buf);
	if (!e)
		mark_uninit_groups(fs);
	if (e) {
		ext2fs_free_block_bitmap(fs->block_map);
		ext2fs_free_inode_bitmap(fs->inode_map);
		fs->block_map = NULL;
		fs->inode_map = NULL;
		return e;
	}
	fs->flags &= ~(EXT2_FLAG_BBITMAP_TAIL_PROBLEM | EXT2_FLAG_IBITMAP_TAIL_PROBLEM);
	fs->flags |= tail;
	return 0;
}
