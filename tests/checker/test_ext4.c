/*
 * tests/checker/test_ext4.c - the checker's ext4 format parsers (csum.c,
 * extent.c) against libext2fs on a real image: every checksum the image
 * carries (superblock, descriptors, bitmaps, inodes, extent blocks,
 * directory leaf and index blocks, xattr blocks) is computed by the checker
 * as stored, every extent tree walks to the runs libext2fs reports, and
 * mutants of each structure are caught: one flipped byte fails its
 * checksum (repaired by the *_set call, it passes again), and each extent
 * rule broken in a real node is named.
 * Usage: test_ext4 IMAGE   (tests/checker/ext4-formats.sh makes the images)
 */
#include "chk_ext4.h"

#include <ext2fs/ext2fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static unsigned counts[8];
enum { N_GD, N_BITMAP, N_INODE, N_EXTBLK, N_DIRLEAF, N_DIRDX, N_XATTR, N_RUNS };
static const char *const count_names[] = { "descriptors", "bitmaps", "inodes", "extent blocks",
					   "directory leaves", "index blocks", "xattr blocks",
					   "extent runs" };

#define FAIL(...) do { printf("FAIL: " __VA_ARGS__); printf("\n"); if (++failures > 20) exit(1); } while (0)

static ext2_filsys fs;
static struct chk_csum cs;
static uint32_t bs;

static void read_blk(uint64_t blk, void *buf)
{
	errcode_t e = io_channel_read_blk64(fs->io, blk, 1, buf);
	if (e) {
		printf("FAIL: reading block %llu: %s\n", (unsigned long long)blk, error_message(e));
		exit(1);
	}
}

static int get_blk(void *ctx, uint64_t blk, void *buf)
{
	(void)ctx;
	read_blk(blk, buf);
	return 0;
}

/* flip one byte at off (not a checksum byte), check ok() fails, flip back */
#define MUTANT_FAILS(what, buf, off, okexpr) do {                          \
	(buf)[off] ^= 0x5a;                                                 \
	if (okexpr) FAIL("%s: a flipped byte at %u passes its checksum", what, (unsigned)(off)); \
	(buf)[off] ^= 0x5a;                                                 \
} while (0)

static void check_groups(void)
{
	uint8_t *buf = malloc(bs);
	const uint8_t *sb = (const uint8_t *)fs->super;
	if (!chk_sb_csum_ok(sb))
		FAIL("superblock checksum");
	for (dgrp_t g = 0; g < fs->group_desc_count; g++) {
		uint8_t *desc = (uint8_t *)ext2fs_group_desc(fs, fs->group_desc, g);
		counts[N_GD]++;
		if (!chk_gd_csum_ok(&cs, g, desc))
			FAIL("group %u: descriptor checksum", g);
		if (cs.metadata_csum || cs.gdt_csum)
			MUTANT_FAILS("descriptor", desc, 0x0C, chk_gd_csum_ok(&cs, g, desc));
		if (!cs.metadata_csum)
			continue;
		uint16_t flags = ext2fs_bg_flags(fs, g);
		if (!(flags & EXT2_BG_BLOCK_UNINIT)) {
			read_blk(ext2fs_block_bitmap_loc(fs, g), buf);
			size_t n = EXT2_CLUSTERS_PER_GROUP(fs->super) / 8;
			counts[N_BITMAP]++;
			if (!chk_bbitmap_csum_ok(&cs, desc, buf, n))
				FAIL("group %u: block bitmap checksum", g);
			MUTANT_FAILS("block bitmap", buf, 0, chk_bbitmap_csum_ok(&cs, desc, buf, n));
		}
		if (!(flags & EXT2_BG_INODE_UNINIT)) {
			read_blk(ext2fs_inode_bitmap_loc(fs, g), buf);
			size_t n = EXT2_INODES_PER_GROUP(fs->super) / 8;
			counts[N_BITMAP]++;
			if (!chk_ibitmap_csum_ok(&cs, desc, buf, n))
				FAIL("group %u: inode bitmap checksum", g);
			MUTANT_FAILS("inode bitmap", buf, 0, chk_ibitmap_csum_ok(&cs, desc, buf, n));
		}
	}
	free(buf);
}

/* the raw bytes of inode ino, from its table */
static void read_raw_inode(ext2_ino_t ino, uint8_t *out, uint8_t *blkbuf)
{
	dgrp_t g = (ino - 1) / fs->super->s_inodes_per_group;
	uint64_t idx = (ino - 1) % fs->super->s_inodes_per_group;
	uint64_t off = idx * cs.inode_size;
	read_blk(ext2fs_inode_table_loc(fs, g) + off / bs, blkbuf);
	memcpy(out, blkbuf + off % bs, cs.inode_size);
}

struct runs {
	struct chk_ext *e;
	size_t n, cap;
	uint32_t iseed;
	ext2_ino_t ino;
};

static bool visit_ext(void *ctx, const struct chk_ext *e)
{
	struct runs *r = ctx;
	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 64;
		r->e = realloc(r->e, r->cap * sizeof(*r->e));
		if (!r->e)
			exit(2);
	}
	r->e[r->n++] = *e;
	return true;
}

/* an extent tree block: checksum, one mutant, the node rules on mutants */
static bool visit_node(void *ctx, uint64_t pblk, uint16_t depth, const uint8_t *node)
{
	struct runs *r = ctx;
	uint8_t *b = malloc(bs);
	char why[160];
	memcpy(b, node, bs);
	counts[N_EXTBLK]++;
	if (!chk_extent_block_csum_ok(&cs, r->iseed, b, bs))
		FAIL("inode %u: extent block %llu checksum", r->ino, (unsigned long long)pblk);
	if (cs.metadata_csum) {
		MUTANT_FAILS("extent block", b, 12, chk_extent_block_csum_ok(&cs, r->iseed, b, bs));
		b[12] ^= 1;
		if (chk_extent_block_csum_set(&cs, r->iseed, b, bs) ||
		    !chk_extent_block_csum_ok(&cs, r->iseed, b, bs))
			FAIL("extent block %llu: the repaired checksum does not pass", (unsigned long long)pblk);
		memcpy(b, node, bs);
	}
	struct chk_ext_bounds any = { .lo = 0, .hi = 1ull << 32, .depth = depth };
	uint64_t first = fs->super->s_first_data_block, total = ext2fs_blocks_count(fs->super);
	const char *p = chk_ext_node_problem(b, bs, any, first, total, why, sizeof(why));
	if (p)
		FAIL("extent block %llu: %s", (unsigned long long)pblk, p);
	struct chk_ext_header h = chk_ext_header_at(b);
	/* each rule broken once: the node must be named as wrong */
	struct { const char *what; unsigned off; uint16_t val; bool need2; } cases[] = {
		{ "bad magic", 0, 0xF30B, false },
		{ "entries past max", 2, (uint16_t)(h.max + 1), false },
		{ "max past the block", 4, (uint16_t)((bs - 12) / 12 + 1), false },
		{ "a depth other than its parent wants", 6, (uint16_t)(depth + 1), false },
		{ "second entry before the first", 12 + 12, 0, true },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (cases[i].need2 && h.entries < 2)
			continue;
		memcpy(b, node, bs);
		memcpy(b + cases[i].off, &cases[i].val, 2);
		if (cases[i].need2)
			memset(b + cases[i].off, 0, 4);
		if (!chk_ext_node_problem(b, bs, any, first, total, why, sizeof(why)))
			FAIL("extent block %llu with %s: not named", (unsigned long long)pblk, cases[i].what);
	}
	if (!depth && h.entries) {
		memcpy(b, node, bs);
		memset(b + 12 + 4, 0, 2);   /* first extent's length 0 */
		if (!chk_ext_node_problem(b, bs, any, first, total, why, sizeof(why)))
			FAIL("extent block %llu with a zero-length extent: not named", (unsigned long long)pblk);
		memcpy(b, node, bs);
		uint32_t far = (uint32_t)total;
		memcpy(b + 12 + 8, &far, 4);   /* first extent starts past the end */
		memset(b + 12 + 6, 0, 2);
		if (!chk_ext_node_problem(b, bs, any, first, total, why, sizeof(why)))
			FAIL("extent block %llu mapping past the end: not named", (unsigned long long)pblk);
	}
	free(b);
	return true;
}

/* the runs libext2fs reports for ino, compared with the checker's walk */
static void compare_runs(ext2_ino_t ino, struct runs *r)
{
	ext2_extent_handle_t h;
	struct ext2fs_extent ex;
	size_t i = 0;
	if (ext2fs_extent_open(fs, ino, &h)) {
		FAIL("inode %u: libext2fs cannot open its extent tree", ino);
		return;
	}
	errcode_t e = ext2fs_extent_get(h, EXT2_EXTENT_ROOT, &ex);
	while (!e) {
		if (ex.e_flags & EXT2_EXTENT_FLAGS_LEAF) {
			bool unwritten = ex.e_flags & EXT2_EXTENT_FLAGS_UNINIT;
			if (i >= r->n || r->e[i].lblk != ex.e_lblk || r->e[i].pblk != ex.e_pblk ||
			    r->e[i].len != ex.e_len || r->e[i].unwritten != unwritten)
				FAIL("inode %u: run %zu differs from libext2fs's (%llu+%u at %llu%s)", ino,
				     i, (unsigned long long)ex.e_lblk, ex.e_len,
				     (unsigned long long)ex.e_pblk, unwritten ? ", unwritten" : "");
			i++;
		}
		e = ext2fs_extent_get(h, EXT2_EXTENT_NEXT, &ex);
	}
	ext2fs_extent_free(h);
	if (i != r->n)
		FAIL("inode %u: the checker walked %zu runs, libext2fs %zu", ino, r->n, i);
	counts[N_RUNS] += (unsigned)i;
}

struct dirctx {
	uint32_t iseed;
	ext2_ino_t ino;
	uint8_t *buf;
};

static int dir_block(ext2_filsys f, blk64_t *blk, e2_blkcnt_t lblk, blk64_t ref, int refoff, void *priv)
{
	(void)f; (void)ref; (void)refoff;
	struct dirctx *d = priv;
	if (lblk < 0)
		return 0;
	read_blk(*blk, d->buf);
	enum chk_dir_csum r = chk_dir_block_csum(&cs, d->iseed, d->buf, bs);
	/* an index block: the root (".", then ".." spanning the rest) or a
	 * node (one empty entry spanning the block) */
	bool dx = chk_ld16(d->buf + 4) == 12 ? chk_ld16(d->buf + 16) == bs - 12 :
		  chk_ld16(d->buf + 4) == bs && chk_ld32(d->buf) == 0;
	counts[dx ? N_DIRDX : N_DIRLEAF]++;
	if (r != CHK_DIR_CSUM_OK)
		FAIL("directory %u block %lld (%llu): checksum %s", d->ino, (long long)lblk,
		     (unsigned long long)*blk, r == CHK_DIR_CSUM_BAD ? "wrong" : "tail not found");
	else if (cs.metadata_csum) {
		/* the first entry's inode number: no structure depends on it */
		MUTANT_FAILS("directory block", d->buf, 1, chk_dir_block_csum(&cs, d->iseed, d->buf, bs) == CHK_DIR_CSUM_OK);
		d->buf[1] ^= 1;
		if (chk_dir_block_csum_set(&cs, d->iseed, d->buf, bs) ||
		    chk_dir_block_csum(&cs, d->iseed, d->buf, bs) != CHK_DIR_CSUM_OK)
			FAIL("directory %u block %lld: the repaired checksum does not pass", d->ino, (long long)lblk);
	}
	return 0;
}

static void check_inodes(void)
{
	uint8_t *raw = malloc(cs.inode_size), *blkbuf = malloc(bs);
	struct dirctx d = { .buf = malloc(bs) };
	for (ext2_ino_t ino = 1; ino <= fs->super->s_inodes_count; ino++) {
		if (!ext2fs_test_inode_bitmap2(fs->inode_map, ino))
			continue;
		read_raw_inode(ino, raw, blkbuf);
		counts[N_INODE]++;
		if (!chk_inode_csum_ok(&cs, ino, raw))
			FAIL("inode %u: checksum", ino);
		if (cs.metadata_csum) {
			MUTANT_FAILS("inode", raw, 0x08, chk_inode_csum_ok(&cs, ino, raw));
			raw[0x08] ^= 1;
			chk_inode_csum_set(&cs, ino, raw);
			if (!chk_inode_csum_ok(&cs, ino, raw))
				FAIL("inode %u: the repaired checksum does not pass", ino);
			raw[0x08] ^= 1;
			chk_inode_csum_set(&cs, ino, raw);
		}
		struct ext2_inode *in = (struct ext2_inode *)raw;
		uint32_t iseed = chk_inode_seed(&cs, ino, in->i_generation);
		if (in->i_links_count == 0 && ino >= EXT2_FIRST_INO(fs->super))
			continue;
		uint64_t acl = in->i_file_acl | ((uint64_t)in->osd2.linux2.l_i_file_acl_high << 32);
		if (acl) {
			read_blk(acl, blkbuf);
			counts[N_XATTR]++;
			if (!chk_xattr_block_csum_ok(&cs, acl, blkbuf, bs))
				FAIL("inode %u: xattr block %llu checksum", ino, (unsigned long long)acl);
			if (cs.metadata_csum)
				MUTANT_FAILS("xattr block", blkbuf, 0x24, chk_xattr_block_csum_ok(&cs, acl, blkbuf, bs));
		}
		if ((in->i_flags & EXT4_EXTENTS_FL) && !(in->i_flags & EXT4_INLINE_DATA_FL)) {
			struct runs r = { .iseed = iseed, .ino = ino };
			struct chk_ext_walk w = {
				.bs = bs, .first_data_block = fs->super->s_first_data_block,
				.blocks_count = ext2fs_blocks_count(fs->super), .get = get_blk,
				.visit_node = visit_node, .visit_ext = visit_ext, .ctx = &r,
			};
			char why[200];
			int ret = chk_ext_walk(&w, (const uint8_t *)in->i_block, why, sizeof(why));
			if (ret)
				FAIL("inode %u: extent walk: %s", ino, ret > 0 ? why : "error");
			else
				compare_runs(ino, &r);
			free(r.e);
		}
		if (LINUX_S_ISDIR(in->i_mode) && !(in->i_flags & EXT4_INLINE_DATA_FL)) {
			d.iseed = iseed;
			d.ino = ino;
			if (ext2fs_block_iterate3(fs, ino, BLOCK_FLAG_READ_ONLY | BLOCK_FLAG_DATA_ONLY, NULL,
						  dir_block, &d))
				FAIL("directory %u: libext2fs cannot iterate its blocks", ino);
		}
	}
	free(raw);
	free(blkbuf);
	free(d.buf);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test_ext4 IMAGE\n");
		return 2;
	}
	add_error_table(&et_ext2_error_table);
	errcode_t e = ext2fs_open(argv[1], EXT2_FLAG_64BITS, 0, 0, unix_io_manager, &fs);
	if (!e)
		e = ext2fs_read_bitmaps(fs);
	if (e) {
		printf("FAIL: cannot open %s: %s\n", argv[1], error_message(e));
		return 1;
	}
	bs = fs->blocksize;
	chk_csum_init(&cs, (const uint8_t *)fs->super);
	if (cs.seed != fs->csum_seed && cs.metadata_csum)
		FAIL("checksum seed 0x%08x, libext2fs's 0x%08x", cs.seed, fs->csum_seed);
	check_groups();
	check_inodes();
	printf("%s:", argv[1]);
	for (int i = 0; i < 8; i++)
		printf(" %u %s%s", counts[i], count_names[i], i < 7 ? "," : "\n");
	ext2fs_close_free(&fs);
	if (failures)
		printf("%d failure(s)\n", failures);
	return failures ? 1 : 0;
}
