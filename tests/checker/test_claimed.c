/*
 * tests/checker/test_claimed.c - claimed groups (chk_options.pristine_claimed):
 * groups whose descriptors say they hold nothing but their static blocks,
 * attached without reading their bitmaps, left deferred by chk_scan, and
 * verified by chk_check_tail: exactly the static pattern passes; a stray
 * block bit, a static block left clear, a stray inode bit and bad padding
 * are each named; the checker reads the bitmaps itself when not given them;
 * a claim outside chk_set_deferred's marks counts as checked.
 *
 * On a small mke2fs ext3 image (16 groups of 8 MiB), held in memory; which
 * groups are empty is found with libext2fs from the descriptors, as the
 * driver finds them (fuse/seal.c).  Exit 0 pass, 1 fail, 77 skip.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ext2fs/ext2fs.h>

#include "checker.h"
#include "test_util.h"

static int failures;

/* The groups (not the last) whose descriptors count no inode in use and
 * no block but their static ones, as bits; *count of them. */
static uint8_t *empty_groups(const char *img, uint32_t *ngroups, uint32_t *count)
{
	ext2_filsys fs;
	TEST_REQUIRE(ext2fs_open(img, 0, 0, 0, unix_io_manager, &fs) == 0, "open %s", img);
	uint8_t *bits = calloc(fs->group_desc_count / 8 + 1, 1);
	TEST_REQUIRE(bits, "out of memory");
	*count = 0;
	for (dgrp_t g = 0; g + 1 < fs->group_desc_count; g++) {
		blk64_t sup, od, nd;
		blk_t used = 0;
		if (ext2fs_super_and_bgd_loc2(fs, g, &sup, &od, &nd, &used) ||
		    ext2fs_bg_free_inodes_count(fs, g) != fs->super->s_inodes_per_group ||
		    ext2fs_bg_free_blocks_count(fs, g) !=
			    fs->super->s_blocks_per_group - used - 2 - fs->inode_blocks_per_group)
			continue;
		bits[g / 8] |= (uint8_t)(1u << (g % 8));
		(*count)++;
	}
	*ngroups = fs->group_desc_count;
	ext2fs_close_free(&fs);
	return bits;
}

static bool names(const struct chk_verdict *v, const char *inv)
{
	for (size_t i = 0; v && i < chk_verdict_nviolations(v); i++) {
		const struct chk_violation *x = chk_verdict_violation(v, i);
		if (x->inv && !strcmp(x->inv->id, inv))
			return true;
	}
	return false;
}

struct edit {
	const char *what, *want;   /* want NULL: the verdict is clean */
	uint32_t byte;             /* in the pair: block bitmap, then inode bitmap */
	uint8_t xor_mask;
};

/* Attach with the claims and scan; the claimed group g checked with the
 * pair as edited (given, or written into the image for the checker to read
 * when in_image). */
static void run_edit(struct test_mem *m, uint8_t *image, const uint8_t *claims, uint32_t ngroups,
		     uint32_t nclaims, uint32_t g, const struct edit *e, bool in_image)
{
	struct chk_options opt = { .pristine = claims, .npristine = ngroups, .pristine_claimed = true };
	struct chk_fs *fs = NULL;
	struct chk_verdict *v = NULL;
	char err[256] = "";
	TEST_REQUIRE(chk_attach(&fs, test_mem_read, m, &opt, err, sizeof(err)) == 0, "attach: %s", err);
	chk_set_defer_tails(fs, true);
	TEST_REQUIRE(chk_scan(fs, &v) == 0, "scan");
	TEST_CHECK(v && chk_verdict_ok(v), "%s: the fresh image does not scan clean", e->what);
	chk_verdict_free(v);
	v = NULL;
	TEST_CHECK(chk_claimed_count(fs) == nclaims, "%s: %u claims, want %u", e->what, chk_claimed_count(fs),
		   nclaims);
	TEST_CHECK(chk_group_claimed(fs, g) && chk_group_deferred(fs, g), "%s: group %u not claimed and deferred",
		   e->what, g);
	uint64_t off;
	size_t len;
	chk_claim_extent(fs, g, &off, &len);
	TEST_REQUIRE(len == 2 * (size_t)chk_block_size(fs), "group %u's bitmaps are not adjacent", g);
	uint8_t *pair = malloc(len), saved = 0;
	TEST_REQUIRE(pair, "out of memory");
	memcpy(pair, image + off, len);
	pair[e->byte] ^= e->xor_mask;
	if (in_image) {
		saved = image[off + e->byte];
		image[off + e->byte] ^= e->xor_mask;
	}
	int r = chk_check_tail(fs, g, NULL, in_image ? NULL : pair, &v);
	TEST_CHECK(r == 0, "%s: chk_check_tail: %s", e->what, strerror(-r));
	if (e->want)
		TEST_CHECK(v && names(v, e->want), "%s: %s not named", e->what, e->want);
	else
		TEST_CHECK(v && chk_verdict_ok(v), "%s: the exact static pattern refused", e->what);
	TEST_CHECK(!chk_group_claimed(fs, g) && !chk_group_deferred(fs, g) &&
		   chk_claimed_count(fs) == nclaims - 1, "%s: group %u still claimed after its check", e->what, g);
	if (!failures)
		printf("ok   %s%s\n", e->what, in_image ? " (read by the checker)" : "");
	if (in_image)
		image[off + e->byte] = saved;
	free(pair);
	chk_verdict_free(v);
	chk_detach(fs);
}

/* A re-attached checker takes the scan's marks: a claim not among them was
 * checked. */
static void set_deferred_drops_claims(struct test_mem *m, const uint8_t *claims, uint32_t ngroups,
				      uint32_t nclaims, uint32_t g)
{
	struct chk_options opt = { .pristine = claims, .npristine = ngroups, .pristine_claimed = true };
	struct chk_fs *fs = NULL;
	char err[256] = "";
	TEST_REQUIRE(chk_attach(&fs, test_mem_read, m, &opt, err, sizeof(err)) == 0, "attach: %s", err);
	uint8_t *marks = calloc(ngroups / 8 + 1, 1);
	TEST_REQUIRE(marks, "out of memory");
	memcpy(marks, claims, (ngroups + 7) / 8);
	marks[g / 8] &= (uint8_t)~(1u << (g % 8));
	TEST_CHECK(chk_set_deferred(fs, marks, ngroups) == 0, "chk_set_deferred");
	TEST_CHECK(!chk_group_claimed(fs, g) && chk_claimed_count(fs) == nclaims - 1,
		   "a claim outside the deferred marks stays open");
	free(marks);
	chk_detach(fs);
}

int main(void)
{
	char dir[] = "/tmp/test_claimed.XXXXXX", img[64];
	TEST_REQUIRE(mkdtemp(dir), "mkdtemp");
	snprintf(img, sizeof(img), "%s/c.img", dir);
	make_image_or_skip(img, "-t ext3 -b 4096 -g 2048", 128 * 1024);
	uint32_t ngroups, nclaims;
	uint8_t *claims = empty_groups(img, &ngroups, &nclaims);
	size_t n;
	uint8_t *image = test_slurp(img, &n);
	TEST_REQUIRE(image && nclaims >= 2, "%u empty groups of %u", nclaims, ngroups);
	uint32_t g = 0;
	while (!(claims[g / 8] >> (g % 8) & 1))
		g++;
	struct test_mem m = { image, n };
	const uint32_t bs = 4096;
	struct ext2_super_block *sb = (void *)(image + 1024);
	uint32_t ib_pad = sb->s_inodes_per_group / 8;
	const struct edit edits[] = {
		{ "as mke2fs left it", NULL, 0, 0 },
		{ "a stray block bit", "INV_BGD_FREE_BLOCKS", 1000 / 8, 0x01 },
		{ "a static block clear", "INV_BGD_FREE_BLOCKS", 0, 0x01 },
		{ "a stray inode bit", "INV_BGD_FREE_INODES", bs + 3, 0x10 },
		{ "inode bitmap padding", "INV_BITMAP_PADDING", bs + ib_pad, 0x80 },
		{ "block bitmap padding", "INV_BITMAP_PADDING", sb->s_blocks_per_group / 8, 0x01 },
	};
	for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++)
		run_edit(&m, image, claims, ngroups, nclaims, g, &edits[i], false);
	run_edit(&m, image, claims, ngroups, nclaims, g, &edits[1], true);
	run_edit(&m, image, claims, ngroups, nclaims, g, &edits[0], true);
	set_deferred_drops_claims(&m, claims, ngroups, nclaims, g);
	free(image);
	free(claims);
	run_shell("rm -rf %s", dir);
	return failures ? 1 : 0;
}
