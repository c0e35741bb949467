/*
 * tests/dirindex/test_dirroom.c - where dirindex.c puts a new entry: the
 * first entry with room for it, walking the block from its start, as the
 * kernel's ext4 picks, although the index starts its walk at the first
 * entry it knows to have room and learns a block's room from the entries it
 * changed, not from the block.  Two copies of one image take the same
 * random adds and removes of names of every length: one through an index
 * kept across all of them, the other through an index dropped before each
 * (built again from the blocks: every block's room read from all its
 * entries).  Their directory blocks must stay byte for byte the same, and
 * readdir must give the same names at the same positions (an htree's hash
 * cookies, the kept index's from each add's probe); a linear directory of
 * many blocks, an htree, and metadata_csum leaves with their tails.  Each
 * image passes e2fsck -fn after.
 *
 * Usage: test_dirroom.  Exit 0 pass, 77 skip (no mke2fs/e2fsck), 1 fail.
 */
#include "dirindex.h"
#include "test_util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAMES 1500      /* the names drawn from */
#define OPS 6000

static char scratch[] = "/tmp/dirroom-test.XXXXXX";
static int failures;

struct side {
	ext2_filsys fs;
	struct dindex *di;
	ext2_ino_t dir, file;
	bool rebuild;           /* drop the index before every change */
};

static int open_side(const char *img, bool rebuild, struct side *s)
{
	errcode_t err = ext2fs_open2(img, NULL, EXT2_FLAG_RW | EXT2_FLAG_64BITS, 0, 0,
				     unix_io_manager, &s->fs);

	TEST_CHECK_RET(!err, "ext2fs_open2 %s: %ld", img, (long)err);
	err = ext2fs_read_bitmaps(s->fs);
	TEST_CHECK_RET(!err, "read_bitmaps %s: %ld", img, (long)err);
	s->di = dindex_new(s->fs, 16);
	TEST_CHECK_RET(s->di, "dindex_new");
	s->rebuild = rebuild;
	err = ext2fs_mkdir(s->fs, EXT2_ROOT_INO, 0, "d");
	if (!err)
		err = ext2fs_lookup(s->fs, EXT2_ROOT_INO, "d", 1, NULL, &s->dir);
	if (!err)
		err = ext2fs_new_inode(s->fs, EXT2_ROOT_INO, LINUX_S_IFREG | 0644, NULL, &s->file);
	TEST_CHECK_RET(!err, "mkdir, new inode: %ld", (long)err);
	ext2fs_inode_alloc_stats2(s->fs, s->file, +1, 0);
	struct ext2_inode in = { .i_mode = LINUX_S_IFREG | 0644, .i_links_count = 1 };
	err = ext2fs_write_new_inode(s->fs, s->file, &in);
	TEST_CHECK_RET(!err, "write_new_inode: %ld", (long)err);
	return 0;
}

/* Name i: 3 to 60 bytes, so entries take most sizes; distinct by its
 * first three bytes (i in base 36). */
static size_t make_name(char *buf, unsigned i)
{
	static const char digits[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	size_t len = 3 + (i * 37u) % 58;

	for (size_t k = 3; k < len; k++)
		buf[k] = digits[(i * 7u + k * 13u) % 36];
	buf[0] = digits[i % 36];
	buf[1] = digits[i / 36 % 36];
	buf[2] = digits[i / 1296 % 36];
	return len;
}

static int apply(struct side *s, bool add, unsigned i)
{
	char name[64];
	size_t len = make_name(name, i);

	if (s->rebuild)
		dindex_drop_all(s->di);
	return add ? dindex_add(s->di, s->dir, name, len, s->file, EXT2_FT_REG_FILE)
		   : dindex_remove(s->di, s->dir, name, len);
}

/* The directory's blocks, byte for byte, on both sides. */
static int same_blocks(struct side *a, struct side *b, int op)
{
	struct ext2_inode ia, ib;
	char *ba = malloc(a->fs->blocksize), *bb = malloc(a->fs->blocksize);
	int rc = 0;

	if (!ba || !bb || ext2fs_read_inode(a->fs, a->dir, &ia) || ext2fs_read_inode(b->fs, b->dir, &ib))
		rc = -1;
	TEST_CHECK(!rc && EXT2_I_SIZE(&ia) == EXT2_I_SIZE(&ib), "op %d: directory sizes differ", op);
	for (blk64_t l = 0; !rc && l < EXT2_I_SIZE(&ia) / a->fs->blocksize; l++) {
		blk64_t pa = 0, pb = 0;

		if (ext2fs_bmap2(a->fs, a->dir, &ia, NULL, 0, l, NULL, &pa) ||
		    ext2fs_bmap2(b->fs, b->dir, &ib, NULL, 0, l, NULL, &pb) ||
		    io_channel_read_blk64(a->fs->io, pa, 1, ba) || io_channel_read_blk64(b->fs->io, pb, 1, bb))
			rc = -1;
		else if (memcmp(ba, bb, a->fs->blocksize))
			rc = -1;
		TEST_CHECK(!rc, "op %d: directory block %llu differs (or cannot be read)", op,
			   (unsigned long long)l);
	}
	free(ba);
	free(bb);
	return rc;
}

/* Readdir's names and positions, one line each. */
struct listing {
	char *text;
	size_t len, cap;
};

static int list_entry(void *ctx, const char *name, size_t len, ext2_ino_t ino, int ftype,
		      uint64_t next_off)
{
	struct listing *l = ctx;

	(void)ino;
	(void)ftype;
	if (l->len + len + 32 > l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 65536;
		char *t = realloc(l->text, cap);

		if (!t)
			return 1;
		l->text = t;
		l->cap = cap;
	}
	l->len += (size_t)sprintf(l->text + l->len, "%.*s %llu\n", (int)len, name,
				  (unsigned long long)next_off);
	return 0;
}

/* The same names at the same readdir positions (an htree's hash cookies:
 * the kept index's from the add's probe, the rebuilt one's from each name). */
static void same_readdir(struct side *a, struct side *b)
{
	struct listing la = { 0 }, lb = { 0 };

	dindex_drop_all(b->di);
	TEST_CHECK(dindex_readdir(a->di, a->dir, 0, list_entry, &la) == 0 &&
		   dindex_readdir(b->di, b->dir, 0, list_entry, &lb) == 0, "readdir");
	TEST_CHECK(la.len == lb.len && la.len && !memcmp(la.text, lb.text, la.len),
		   "readdir positions differ between the kept and the rebuilt index");
	free(la.text);
	free(lb.text);
}

static void close_side(struct side *s)
{
	dindex_free(s->di);
	TEST_CHECK(!ext2fs_close_free(&s->fs), "close");
}

static void run_config(const char *opts, unsigned size_kb)
{
	char img_a[300], img_b[300];
	struct side a = { 0 }, b = { 0 };
	bool present[NAMES] = { false };
	unsigned seed = 12345, n = 0, removed = 0;

	printf("image: %s\n", opts);
	snprintf(img_a, sizeof(img_a), "%s/a.img", scratch);
	snprintf(img_b, sizeof(img_b), "%s/b.img", scratch);
	make_image_or_skip(img_a, opts, size_kb);
	TEST_REQUIRE(run_shell("cp %s %s", img_a, img_b) == 0, "cp");
	if (open_side(img_a, false, &a) || open_side(img_b, true, &b))
		return;
	for (int op = 0; op < OPS; op++) {
		unsigned i;
		bool add;
		int ra, rb;

		seed = seed * 1103515245u + 12345u;
		i = (seed >> 8) % NAMES;
		/* fill first, then as many removes as adds: holes everywhere */
		add = op < NAMES / 2 ? !present[i] : ((seed >> 4) & 1) ? !present[i] : false;
		if (!add && !present[i])
			continue;
		ra = apply(&a, add, i);
		rb = apply(&b, add, i);
		TEST_CHECK(ra == 0 && rb == 0, "op %d (%s %u): %d, rebuilt %d", op, add ? "add" : "remove",
			   i, ra, rb);
		if (ra || rb || same_blocks(&a, &b, op))
			break;
		present[i] = add;
		n += add;
		removed += !add;
	}
	same_readdir(&a, &b);
	printf("  %u adds, %u removes: the same blocks and readdir\n", n, removed);
	/* the file's link count: one per name left, for e2fsck */
	{
		struct ext2_inode in;
		unsigned left = 0;

		for (unsigned i = 0; i < NAMES; i++)
			left += present[i];
		for (struct side *s = &a; s; s = s == &a ? &b : NULL) {
			if (ext2fs_read_inode(s->fs, s->file, &in) == 0) {
				in.i_links_count = (__u16)left;
				TEST_CHECK(!ext2fs_write_inode(s->fs, s->file, &in), "links");
			}
		}
	}
	close_side(&a);
	close_side(&b);
	TEST_CHECK(e2fsck_fn(img_a, scratch) == 0, "e2fsck -fn after the index kept");
	TEST_CHECK(e2fsck_fn(img_b, scratch) == 0, "e2fsck -fn after the index rebuilt");
}

int main(void)
{
	if (run_shell("command -v mke2fs >/dev/null && command -v e2fsck >/dev/null") != 0) {
		printf("mke2fs/e2fsck missing\n");
		return 77;
	}
	TEST_REQUIRE(mkdtemp(scratch), "mkdtemp");
	initialize_ext2_error_table();
	run_config("-t ext3 -b 1024 -O ^dir_index", 65536);
	run_config("-t ext3 -b 4096", 65536);
	run_config("-t ext4 -b 1024 -O metadata_csum", 65536);
	run_shell("rm -rf %s", scratch);
	printf("%s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
