/*
 * test_bitmaps: fuse/bitmaps.c's rfs_read_bitmaps() makes the same bitmaps
 * as libext2fs's ext2fs_read_bitmaps() (every bit up to each bitmap's real
 * end, the tail-problem flags, the error when one fails).
 *
 * Images: mke2fs ext3 images of 1 KiB and 4 KiB blocks whose last group is
 * partial, with seeded edits of their on-disk bitmaps (empty, leading runs,
 * full groups, random bits, damaged tails, a descriptor pointing at block 0
 * or past the end), and the e2fsprogs corpus when it is there
 * (RECON_CORPUS, default ../shared/corpus/e2fsprogs-tests).
 *   test_bitmaps [SEED [ROUNDS]]   the seed prints on failure
 */
#include "rfs.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned failures, checks;
static uint64_t rng;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

#define FAIL(...) do { failures++; fprintf(stderr, "FAIL: " __VA_ARGS__); fputc('\n', stderr); } while (0)

/* Every bit of [start, real_end] of both bitmaps alike (real_end: what the
 * groups cover, past the end of the last one's blocks or inodes). */
static bool same_bits(ext2_filsys fs, ext2fs_generic_bitmap a, ext2fs_generic_bitmap b, bool block)
{
	__u64 start = ext2fs_get_generic_bmap_start(a);
	__u64 end = block ? fs->super->s_first_data_block +
			    (__u64)fs->group_desc_count * EXT2_CLUSTERS_PER_GROUP(fs->super) - 1
			  : (__u64)fs->group_desc_count * EXT2_INODES_PER_GROUP(fs->super);
	if (start != ext2fs_get_generic_bmap_start(b) ||
	    ext2fs_get_generic_bmap_end(a) != ext2fs_get_generic_bmap_end(b))
		return false;
	size_t n = end - start + 1;
	unsigned char *x = calloc(n / 8 + 1, 1), *y = calloc(n / 8 + 1, 1);
	bool same = x && y;
	if (same) {
		errcode_t ea, eb;
		if (block) {
			ea = ext2fs_get_block_bitmap_range2(a, start, n, x);
			eb = ext2fs_get_block_bitmap_range2(b, start, n, y);
		} else {
			ea = ext2fs_get_inode_bitmap_range2(a, start, n, x);
			eb = ext2fs_get_inode_bitmap_range2(b, start, n, y);
		}
		same = !ea && !eb && memcmp(x, y, n / 8 + 1) == 0;
	}
	free(x);
	free(y);
	return same;
}

static errcode_t open_rbtree(const char *img, ext2_filsys *fs)
{
	errcode_t e = ext2fs_open(img, EXT2_FLAG_64BITS, 0, 0, unix_io_manager, fs);
	if (!e)
		(*fs)->default_bitmap_type = EXT2FS_BMAP64_RBTREE;
	return e;
}

/* The groups of fs whose descriptors count only their static blocks and
 * no inode (as a seal's pristine groups, fuse/seal.c), but the last. */
static uint8_t *pristine_by_counts(ext2_filsys fs)
{
	uint8_t *bits = calloc(fs->group_desc_count / 8 + 1, 1);
	for (dgrp_t g = 0; bits && g + 1 < fs->group_desc_count; g++) {
		blk64_t sup, od, nd;
		blk_t used = 0;
		if (ext2fs_super_and_bgd_loc2(fs, g, &sup, &od, &nd, &used) ||
		    ext2fs_bg_free_inodes_count(fs, g) != fs->super->s_inodes_per_group ||
		    ext2fs_bg_free_blocks_count(fs, g) !=
			    fs->super->s_blocks_per_group - used - 2 - fs->inode_blocks_per_group)
			continue;
		bits[g / 8] |= (uint8_t)(1u << (g % 8));
	}
	return bits;
}

/* Both readers on img; what differs is a failure named after what.  With
 * pristine, rfs_read_bitmaps is told which groups are pristine by their
 * counts (an image as mke2fs made it): what it makes up must be what the
 * disk holds. */
static void compare_as(const char *img, const char *what, bool pristine)
{
	ext2_filsys a, b;
	if (open_rbtree(img, &a))
		return;		/* libext2fs cannot open it: nothing to compare */
	if (open_rbtree(img, &b)) {
		ext2fs_close_free(&a);
		return;
	}
	uint8_t *known = pristine ? pristine_by_counts(b) : NULL;
	errcode_t ea = ext2fs_read_bitmaps(a), eb = rfs_read_bitmaps(b, known);
	free(known);
	checks++;
	int tails = EXT2_FLAG_BBITMAP_TAIL_PROBLEM | EXT2_FLAG_IBITMAP_TAIL_PROBLEM;
	if (ea != eb)
		FAIL("%s: ext2fs_read_bitmaps says %ld, rfs_read_bitmaps %ld", what, (long)ea, (long)eb);
	else if (!ea && !same_bits(a, a->block_map, b->block_map, true))
		FAIL("%s: the block bitmaps differ", what);
	else if (!ea && !same_bits(a, a->inode_map, b->inode_map, false))
		FAIL("%s: the inode bitmaps differ", what);
	else if ((a->flags & tails) != (b->flags & tails))
		FAIL("%s: tail flags %#x against %#x", what, a->flags & tails, b->flags & tails);
	else if (eb && (b->block_map || b->inode_map))
		FAIL("%s: bitmaps left after a failed read", what);
	ext2fs_close_free(&a);
	ext2fs_close_free(&b);
}

static void compare(const char *img, const char *what)
{
	compare_as(img, what, false);
}

/* Seeded edits of the on-disk bitmap blocks of img, group by group. */
static int mutate(const char *img)
{
	ext2_filsys fs;
	if (ext2fs_open(img, EXT2_FLAG_RW | EXT2_FLAG_64BITS, 0, 0, unix_io_manager, &fs))
		return -1;
	unsigned bs = fs->blocksize;
	unsigned char *buf = malloc(bs);
	for (dgrp_t g = 0; buf && g < fs->group_desc_count; g++) {
		for (int which = 0; which < 2; which++) {
			blk64_t blk = which ? ext2fs_inode_bitmap_loc(fs, g) : ext2fs_block_bitmap_loc(fs, g);
			unsigned nbits = which ? EXT2_INODES_PER_GROUP(fs->super)
					       : EXT2_CLUSTERS_PER_GROUP(fs->super);
			if (io_channel_read_blk64(fs->io, blk, 1, buf))
				continue;
			unsigned run;
			switch (rnd() % 8) {
			case 0:		/* as mke2fs left it */
				break;
			case 1:		/* all clear */
				memset(buf, 0, nbits / 8);
				break;
			case 2:		/* a leading run of ones, then zeros */
				run = rnd() % (nbits + 1);
				memset(buf, 0, nbits / 8);
				for (unsigned i = 0; i < run; i++)
					buf[i / 8] |= 1u << (i % 8);
				break;
			case 3:		/* full */
				memset(buf, 0xff, nbits / 8);
				break;
			case 4:		/* random bits */
				for (unsigned i = 0; i < nbits / 8; i++)
					buf[i] = (unsigned char)rnd();
				break;
			case 5:		/* one stray bit past a leading run */
				buf[(rnd() % (nbits / 8))] |= (unsigned char)(1u << (rnd() % 8));
				break;
			case 6:		/* a damaged tail */
				if (nbits / 8 < bs)
					buf[nbits / 8 + rnd() % (bs - nbits / 8)] = (unsigned char)rnd();
				break;
			case 7:		/* the last bit of the group alone */
				memset(buf, 0, nbits / 8);
				buf[nbits / 8 - 1] = 0x80;
				break;
			}
			(void)io_channel_write_blk64(fs->io, blk, 1, buf);
		}
	}
	/* now and then a descriptor that names block 0 or one past the end
	 * (libext2fs reads those as all clear) */
	if (rnd() % 4 == 0) {
		dgrp_t g = (dgrp_t)(rnd() % fs->group_desc_count);
		if (rnd() % 2)
			ext2fs_block_bitmap_loc_set(fs, g, rnd() % 2 ? 0 : ext2fs_blocks_count(fs->super) + 5);
		else
			ext2fs_inode_bitmap_loc_set(fs, g, rnd() % 2 ? 0 : ext2fs_blocks_count(fs->super) + 5);
		ext2fs_mark_super_dirty(fs);
		fs->flags &= ~EXT2_FLAG_SUPER_ONLY;
	} else {
		fs->flags |= EXT2_FLAG_SUPER_ONLY;   /* bitmaps were written raw */
	}
	free(buf);
	/* the bitmaps were never read here, so closing does not write them */
	return ext2fs_close_free(&fs) ? -1 : 0;
}

static void generated(const char *dir, unsigned rounds)
{
	static const char *const sizes[] = { "3333k", "20m", "70001k", "130m" };
	char img[64], cmd[256], what[128];
	snprintf(img, sizeof(img), "%.40s/gen.img", dir);
	for (unsigned r = 0; r < rounds; r++) {
		unsigned bs = r % 2 ? 4096 : 1024;
		const char *size = sizes[rnd() % 4];
		/* every third an ext4 (flex_bg, metadata_csum: uninitialised groups) */
		const char *type = r % 3 == 2 ? "ext4" : "ext3";
		snprintf(cmd, sizeof(cmd), "rm -f %s && mke2fs -q -F -t %s -b %u %s %s >/dev/null 2>&1",
			 img, type, bs, img, size);
		if (system(cmd) != 0) {
			FAIL("mke2fs of a %s image with %u-byte blocks", size, bs);
			continue;
		}
		snprintf(what, sizeof(what), "round %u (%s, %u-byte blocks, %s), as made", r, type, bs, size);
		compare(img, what);
		snprintf(what, sizeof(what), "round %u (%s, %u-byte blocks, %s), as made, pristine "
			 "groups not read", r, type, bs, size);
		compare_as(img, what, true);
		if (mutate(img)) {
			FAIL("round %u: cannot edit the image", r);
			continue;
		}
		snprintf(what, sizeof(what), "round %u (%s, %u-byte blocks, %s), edited", r, type, bs, size);
		compare(img, what);
	}
	unlink(img);
}

static void corpus(const char *dir)
{
	const char *c = getenv("RECON_CORPUS");
	char path[1024];
	if (!c) {
		const char *src = getenv("RECON_SRC");
		snprintf(path, sizeof(path), "%s/../shared/corpus/e2fsprogs-tests", src ? src : ".");
		c = path;
	}
	DIR *d = opendir(c);
	if (!d) {
		printf("test_bitmaps: no corpus at %s (generated images only)\n", c);
		return;
	}
	struct dirent *de;
	char img[64], cmd[4096];
	snprintf(img, sizeof(img), "%.40s/corpus.img", dir);
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(cmd, sizeof(cmd), "gzip -dc '%s/%s/image.gz' > '%s' 2>/dev/null", c, de->d_name,
			 img);
		if (system(cmd) != 0)
			continue;
		compare(img, de->d_name);
	}
	closedir(d);
	unlink(img);
}

int main(int argc, char **argv)
{
	uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : (uint64_t)time(NULL);
	unsigned rounds = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 24;
	char dir[32] = "/tmp/test_bitmaps.XXXXXX";

	rng = seed * 0x9E3779B97F4A7C15ull + 1;
	add_error_table(&et_ext2_error_table);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	generated(dir, rounds);
	corpus(dir);
	rmdir(dir);
	printf("test_bitmaps: seed %llu: %u comparisons, %u failed\n", (unsigned long long)seed,
	       checks, failures);
	if (failures)
		fprintf(stderr, "test_bitmaps: reproduce with: test_bitmaps %llu %u\n",
			(unsigned long long)seed, rounds);
	return failures ? 1 : 0;
}
