/*
 * tests/dirindex/test_dxsplit.c - indexed directories growing through
 * dirindex.c: the hash cookies of readdir and their collision runs
 * (dxorder.c, on made-up names), then metadata_csum ext4 images (1 KiB and
 * 4 KiB blocks) whose htree (e2fsck -D builds it) takes adds past many leaf
 * splits, index node splits and a new level, with a readdir opened before
 * the changes and finished after them; the index fills up at its depth
 * (the directory turns linear), or with large_dir gets a third level.
 * Fresh directories on ext3 and ext4 images become htrees when a name no
 * longer fits their one block (root and two leaves), a readdir begun at one
 * block seeing each name once; with no block or one block free that add
 * gets ENOSPC and leaves a valid linear directory; one whose first entry
 * is not "." gets EIO, unchanged.
 * Every image must pass e2fsck -fn, which checks the htree (pass 2).
 *
 * Exit 0 pass, 77 skip (no mke2fs/e2fsck), 1 fail.
 */
#include "dirindex.h"
#include "test_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char scratch[] = "/tmp/dxsplit-test.XXXXXX";
static int failures;

/* ---- readdir batches over names: each name's count, the batch limit ---- */

struct reader {
	int n;                  /* names "n<i>" counted in seen[i] */
	unsigned char *seen;
	int dots, other;
	int batch, taken;       /* names a call takes at most, and took */
	uint64_t next;          /* next_off of the last name taken */
	bool cut_run;           /* fits refused a run after names were taken */
};

static int reader_fill(void *ctx, const char *name, size_t len, ext2_ino_t ino, int ftype,
		       uint64_t next_off)
{
	struct reader *r = ctx;
	char buf[300];
	int i;

	(void)ino;
	(void)ftype;
	if (r->taken == r->batch)
		return 1;
	r->taken++;
	r->next = next_off;
	memcpy(buf, name, len);
	buf[len] = 0;
	if (!strcmp(buf, ".") || !strcmp(buf, ".."))
		r->dots++;
	else if (sscanf(buf, "n%d", &i) == 1 && i >= 0 && i < r->n)
		r->seen[i]++;
	else
		r->other++;
	return 0;
}

static bool reader_fits(void *ctx, const struct dindex_name *run, size_t n)
{
	struct reader *r = ctx;

	(void)run;
	return r->taken + (int)n <= r->batch;
}

/* ---- hash cookies and runs, on made-up names ---- */

struct fake {
	struct dx_ord *v;
	size_t n;
	char (*names)[16];
};

/* Names n0..n<count-1>; name i gets the key i / 3 * 7 + 2 for i % 5 != 0
 * (runs of up to three) and a key of its own otherwise. */
static void fake_build(struct fake *f, int count, const unsigned char *absent)
{
	f->n = 0;
	for (int i = 0; i < count + 2; i++) {
		struct dx_ord *o = &f->v[f->n];

		if (i < 2) {
			*o = (struct dx_ord){ .key = (uint64_t)i, .name = i ? ".." : ".", .len = (uint8_t)(i + 1) };
		} else {
			int k = i - 2;

			if (absent && absent[k])
				continue;
			snprintf(f->names[k], sizeof(f->names[k]), "n%d", k);
			*o = (struct dx_ord){ .name = f->names[k], .len = (uint8_t)strlen(f->names[k]),
					      .key = k % 5 ? (uint64_t)k / 3 * 7 + 2 : (uint64_t)k * 7 + 5 };
		}
		f->n++;
	}
	f->n = dx_order_sort(f->v, f->n);
}

static int test_cookies(void)
{
	const int count = 300;
	struct fake f;
	struct reader r = { .n = count };
	unsigned char *absent = calloc(count, 1);
	int rc, calls;

	printf("hash cookies and collision runs:\n");
	TEST_CHECK_RET(dx_readdir_key(0, 0) == 2 && dx_readdir_key(0, 1) == 2 && dx_readdir_key(0, 3) == 3,
	      "the first names' cookies come after \".\" and \"..\"");
	TEST_CHECK_RET(dx_readdir_key(2, 0) == UINT64_C(1) << 32 && dx_readdir_key(4, 7) == (UINT64_C(2) << 32 | 7),
	      "cookie = (major >> 1) << 32 | minor");
	TEST_CHECK_RET(dx_readdir_key(0xfffffffe, 0xffffffff) == (UINT64_C(1) << 63) - 2,
	      "the last cookie + 1 is a valid off_t");
	TEST_CHECK_RET(dx_readdir_key(0x10, 5) < dx_readdir_key(0x12, 0), "major first, then minor");

	f.v = calloc(count + 2, sizeof(*f.v));
	f.names = calloc(count, sizeof(*f.names));
	r.seen = calloc(count, 1);
	TEST_CHECK_RET(f.v && f.names && r.seen && absent, "calloc");
	/* any batch that holds the largest run (3): every name once */
	for (int batch = 3; batch <= 9; batch++) {
		fake_build(&f, count, NULL);
		memset(r.seen, 0, count);
		r.dots = r.other = 0;
		r.batch = batch;
		r.next = 0;
		for (calls = 0;; calls++) {
			r.taken = 0;
			rc = dx_order_emit(f.v, f.n, r.next, reader_fill, reader_fits, &r);
			TEST_CHECK_RET(rc == 0, "batch %d: emit %d", batch, rc);
			if (!r.taken)
				break;
			TEST_CHECK_RET(calls < 2 * count, "batch %d: readdir does not end", batch);
		}
		TEST_CHECK_RET(r.dots == 2 && r.other == 0, "batch %d: dots %d other %d", batch, r.dots, r.other);
		for (int i = 0; i < count; i++)
			TEST_CHECK_RET(r.seen[i] == 1, "batch %d: n%d seen %d times", batch, i, r.seen[i]);
	}
	/* a batch smaller than a run: the run is refused whole */
	r.batch = 2;
	r.next = 0;
	rc = 0;
	for (calls = 0; calls < 2 * count && rc == 0; calls++) {
		r.taken = 0;
		rc = dx_order_emit(f.v, f.n, r.next, reader_fill, reader_fits, &r);
		TEST_CHECK_RET(rc == 0 || r.taken == 0, "a run was cut: %d taken before %d", r.taken, rc);
		if (!rc && !r.taken)
			break;
	}
	TEST_CHECK_RET(rc == -EINVAL, "a buffer too small for a run: %d", rc);
	/* without fits a run cut short is read again, never skipped */
	memset(r.seen, 0, count);
	r.batch = 4;
	r.next = 0;
	for (calls = 0;; calls++) {
		r.taken = 0;
		TEST_CHECK_RET(dx_order_emit(f.v, f.n, r.next, reader_fill, NULL, &r) == 0, "emit");
		if (!r.taken)
			break;
		TEST_CHECK_RET(calls < 4 * count, "readdir without fits does not end");
	}
	for (int i = 0; i < count; i++)
		TEST_CHECK_RET(r.seen[i] >= 1, "n%d skipped without fits", i);
	printf("  ok\n");
	free(f.v);
	free(f.names);
	free(r.seen);
	free(absent);
	return 0;
}

/* Names removed and added between calls: every name present throughout
 * once (removed ones are tombstones until the next sort). */
static int test_cookies_changing(void)
{
	const int count = 300;
	struct fake f;
	struct reader r = { .n = count };
	unsigned char *absent = calloc(count, 1);
	int calls;

	printf("hash cookies with names removed and added between calls:\n");
	f.v = calloc(count + 2, sizeof(*f.v));
	f.names = calloc(count, sizeof(*f.names));
	r.seen = calloc(count, 1);
	TEST_CHECK_RET(f.v && f.names && r.seen && absent, "calloc");
	r.batch = 5;
	r.next = 0;
	fake_build(&f, count, absent);
	for (calls = 0;; calls++) {
		r.taken = 0;
		TEST_CHECK_RET(dx_order_emit(f.v, f.n, r.next, reader_fill, reader_fits, &r) == 0, "emit");
		if (!r.taken)
			break;
		/* each call: one name removed (a tombstone), and every
		 * seventh call, the array rebuilt with one name back */
		int gone = (calls * 37) % count;

		if (!absent[gone]) {
			absent[gone] = 1;
			for (size_t i = 0; i < f.n; i++)
				if (f.v[i].name == f.names[gone])
					f.v[i].name = NULL;
		}
		if (calls % 7 == 6) {
			absent[(calls * 53) % count] = 0;
			fake_build(&f, count, absent);
		}
	}
	for (int i = 0; i < count; i++) {
		bool throughout = true;

		for (int c = 0; c <= calls && throughout; c++)
			if ((c * 37) % count == i || (c % 7 == 6 && (c * 53) % count == i))
				throughout = false;
		TEST_CHECK_RET(!throughout || r.seen[i] == 1, "n%d present throughout, seen %d times", i, r.seen[i]);
		TEST_CHECK_RET(r.seen[i] <= 1, "n%d seen %d times", i, r.seen[i]);
	}
	printf("  ok\n");
	free(f.v);
	free(f.names);
	free(r.seen);
	free(absent);
	return 0;
}

/* ---- images ---- */

static int open_fs(const char *path, ext2_filsys *fs)
{
	errcode_t err = ext2fs_open2(path, NULL, EXT2_FLAG_RW | EXT2_FLAG_64BITS, 0, 0,
				     unix_io_manager, fs);

	if (!err)
		err = ext2fs_read_bitmaps(*fs);
	if (err) {
		fprintf(stderr, "open %s: %ld\n", path, (long)err);
		return -1;
	}
	return 0;
}

static int fsck_clean(const char *img)
{
	int rc = e2fsck_fn(img, scratch);

	TEST_CHECK_RET(rc == 0, "e2fsck -fn %s exit %d", img, rc);
	printf("  e2fsck -fn: clean\n");
	return 0;
}

/* Regular file inodes the names point to, 60,000 names each at most. */
#define NAMES_PER_FILE 60000
static ext2_ino_t files[8];

static int make_files(ext2_filsys fs)
{
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		struct ext2_inode inode = { .i_mode = LINUX_S_IFREG | 0644 };

		if (ext2fs_new_inode(fs, EXT2_ROOT_INO, LINUX_S_IFREG | 0644, NULL, &files[i]))
			return -1;
		ext2fs_inode_alloc_stats2(fs, files[i], +1, 0);
		inode.i_atime = inode.i_ctime = inode.i_mtime = (__u32)time(NULL);
		if (ext2fs_write_new_inode(fs, files[i], &inode))
			return -1;
	}
	return 0;
}

/* Each file's link count from the names present[0..n) point to. */
static int set_links(ext2_filsys fs, const unsigned char *present, int n)
{
	for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
		struct ext2_inode inode;
		unsigned int links = 0;

		for (int i = (int)f * NAMES_PER_FILE; i < n && i < (int)(f + 1) * NAMES_PER_FILE; i++)
			links += present[i];
		TEST_CHECK_RET(ext2fs_read_inode(fs, files[f], &inode) == 0, "read");
		inode.i_links_count = (__u16)links;
		TEST_CHECK_RET(ext2fs_write_inode(fs, files[f], &inode) == 0, "write");
	}
	return 0;
}

/* Name i: "n<i>-" padded with letters to len bytes (at least its digits). */
static size_t name_of(char *buf, int i, size_t len)
{
	int k = snprintf(buf, 300, "n%d-", i);

	for (size_t j = (size_t)k; j < len; j++)
		buf[j] = (char)('a' + (i + j) % 26);
	buf[len > (size_t)k ? len : (size_t)k] = 0;
	return strlen(buf);
}

static int add_name(struct dindex *di, ext2_ino_t dir, int i, size_t len)
{
	char name[300];
	size_t n = name_of(name, i, len);
	int rc = dindex_add(di, dir, name, n, files[i / NAMES_PER_FILE], EXT2_FT_REG_FILE);

	TEST_CHECK_RET(rc == 0, "add %s: %d", name, rc);
	return 0;
}

static bool has_index(ext2_filsys fs, ext2_ino_t dir)
{
	struct ext2_inode inode;

	return ext2fs_read_inode(fs, dir, &inode) == 0 && (inode.i_flags & EXT2_INDEX_FL);
}

/* The root's indirect_levels, or -1. */
static int levels(ext2_filsys fs, ext2_ino_t dir)
{
	char *buf = malloc(fs->blocksize);
	blk64_t pblk;
	int lv = -1;

	if (buf && !ext2fs_bmap2(fs, dir, NULL, NULL, 0, 0, NULL, &pblk) &&
	    !ext2fs_read_dir_block4(fs, pblk, buf, 0, dir))
		lv = ((struct ext2_dx_root_info *)(buf + 24))->indirect_levels;
	free(buf);
	return lv;
}

static uint32_t dir_blocks(ext2_filsys fs, ext2_ino_t dir)
{
	struct ext2_inode inode;

	return ext2fs_read_inode(fs, dir, &inode) ? 0 : (uint32_t)(EXT2_I_SIZE(&inode) / fs->blocksize);
}

/* A metadata_csum ext4 image (opts added) with /h holding n names of len
 * bytes, indexed by e2fsck -D; *dir its inode, left open in *fs. */
static int indexed_image(const char *img, int bs, const char *opts, int n, size_t len,
			 ext2_filsys *fs, ext2_ino_t *dir)
{
	unsigned char *present = calloc(n, 1);
	struct dindex *di;
	int rc;

	TEST_CHECK_RET(run_shell("mke2fs -q -F -t ext4 -O metadata_csum,^has_journal%s -N 2048 -b %d %s 96M >/dev/null 2>&1",
			opts, bs, img) == 0, "mke2fs");
	if (open_fs(img, fs))
		return -1;
	TEST_CHECK_RET(ext2fs_mkdir(*fs, EXT2_ROOT_INO, 0, "h") == 0 &&
	      ext2fs_lookup(*fs, EXT2_ROOT_INO, "h", 1, NULL, dir) == 0 && make_files(*fs) == 0, "setup");
	di = dindex_new(*fs, 2);
	TEST_CHECK_RET(di && present, "dindex_new");
	for (int i = 0; i < n; i++) {
		if (add_name(di, *dir, i, len))
			return -1;
		present[i] = 1;
	}
	dindex_free(di);
	TEST_CHECK_RET(set_links(*fs, present, n) == 0, "links");
	free(present);
	TEST_CHECK_RET(ext2fs_close_free(fs) == 0, "close");
	rc = run_shell("e2fsck -fyD %s >%s/fsck-D.out 2>&1", img, scratch);
	TEST_CHECK_RET(rc == 0 || rc == 1, "e2fsck -fyD exit %d", rc);
	if (open_fs(img, fs))
		return -1;
	TEST_CHECK_RET(has_index(*fs, *dir), "e2fsck -D made no htree");
	return 0;
}

/* Readdir of dir in batches from r->next on, until the end or calls calls. */
static int read_on(struct dindex *di, ext2_ino_t dir, struct reader *r, int calls)
{
	for (int c = 0; c < calls; c++) {
		int rc;

		r->taken = 0;
		rc = dindex_readdir_batch(di, dir, r->next, reader_fill, reader_fits, r);
		TEST_CHECK_RET(rc == 0, "readdir %d", rc);
		if (!r->taken)
			return 0;
	}
	return 0;
}

/*
 * An indexed directory of base names takes nadd more of len bytes (leaf
 * splits, and at 1 KiB blocks node splits and a second level) while every
 * third base name goes: a readdir opened before the changes and finished
 * after them returns every base name present throughout exactly once, a
 * new readdir every name present once, and each is found.
 */
static int test_grow(int bs, int base, int nadd, size_t len)
{
	int n = base + nadd;
	unsigned char *present = calloc(n, 1);
	struct reader r = { .n = n, .batch = 40 };
	char img[512], name[300];
	struct dindex *di;
	ext2_filsys fs;
	ext2_ino_t dir, ino;
	uint32_t blocks0;
	int ftype, lv0;

	printf("%d-byte blocks: %d names indexed, %d added (%zu bytes each), every third removed:\n",
	       bs, base, nadd, len);
	snprintf(img, sizeof(img), "%s/grow.img", scratch);
	r.seen = calloc(n, 1);
	TEST_CHECK_RET(present && r.seen, "calloc");
	if (indexed_image(img, bs, "", base, 12, &fs, &dir))
		return -1;
	memset(present, 1, base);
	blocks0 = dir_blocks(fs, dir);
	lv0 = levels(fs, dir);
	di = dindex_new(fs, 2);
	TEST_CHECK_RET(di, "dindex_new");
	if (read_on(di, dir, &r, 3))
		return -1;
	TEST_CHECK_RET(r.taken == r.batch, "the first batches are full");
	for (int i = base; i < n; i++) {
		if (add_name(di, dir, i, len))
			return -1;
		present[i] = 1;
		if ((i - base) % 3 == 0 && i - base < base) {
			int gone = i - base;
			size_t l = name_of(name, gone, 12);

			TEST_CHECK_RET(dindex_remove(di, dir, name, l) == 0, "remove %s", name);
			present[gone] = 0;
		}
		/* read a little on now and then, as a reader does */
		if (i % 997 == 0 && read_on(di, dir, &r, 1))
			return -1;
	}
	TEST_CHECK_RET(has_index(fs, dir), "the adds cleared the index");
	if (read_on(di, dir, &r, 1 << 30))
		return -1;
	for (int i = 0; i < base; i++)
		TEST_CHECK_RET(!present[i] || r.seen[i] == 1, "%d present throughout, seen %d times", i, r.seen[i]);
	for (int i = 0; i < n; i++)
		TEST_CHECK_RET(r.seen[i] <= 1, "%d seen %d times", i, r.seen[i]);
	TEST_CHECK_RET(r.dots == 2 && r.other == 0, "dots %d other %d", r.dots, r.other);
	printf("  %u -> %u blocks, indirect_levels %d -> %d; a readdir across it all: each name once\n",
	       blocks0, dir_blocks(fs, dir), lv0, levels(fs, dir));
	TEST_CHECK_RET(dir_blocks(fs, dir) > 4 * blocks0, "too few splits to tell: %u blocks", dir_blocks(fs, dir));
	/* from disk again: every name once, each found */
	dindex_drop_all(di);
	memset(r.seen, 0, n);
	r.dots = 0;
	r.next = 0;
	if (read_on(di, dir, &r, 1 << 30))
		return -1;
	for (int i = 0; i < n; i++) {
		size_t l = name_of(name, i, i < base ? 12 : len);

		TEST_CHECK_RET(r.seen[i] == present[i], "%s: seen %d times, present %d", name, r.seen[i], present[i]);
		TEST_CHECK_RET(dindex_lookup(di, dir, name, l, &ino, &ftype) == (present[i] ? 0 : -ENOENT),
		      "lookup %s", name);
	}
	dindex_free(di);
	TEST_CHECK_RET(set_links(fs, present, n) == 0, "links");
	TEST_CHECK_RET(ext2fs_close_free(&fs) == 0, "close");
	free(present);
	free(r.seen);
	return fsck_clean(img);
}

/*
 * Long names into a 1 KiB-block index until it can grow no more: without
 * large_dir two levels fill and the directory turns linear (every name
 * kept); with large_dir a third level comes.
 */
static int test_fill(bool large_dir)
{
	const size_t len = 200;
	const int max = 8 * NAMES_PER_FILE;
	unsigned char *present = calloc(max, 1);
	char img[512], name[300];
	struct dindex *di;
	ext2_filsys fs;
	ext2_ino_t dir, ino;
	int n = 0, ftype, lv = 0;

	printf("1024-byte blocks%s: names of %zu bytes until the index is full:\n",
	       large_dir ? ", large_dir" : "", len);
	snprintf(img, sizeof(img), "%s/fill.img", scratch);
	TEST_CHECK_RET(present, "calloc");
	if (indexed_image(img, 1024, large_dir ? ",large_dir" : "", 50, len, &fs, &dir))
		return -1;
	memset(present, 1, 50);
	n = 50;
	di = dindex_new(fs, 2);
	TEST_CHECK_RET(di, "dindex_new");
	while (n < max && has_index(fs, dir) && (lv = levels(fs, dir)) < 2) {
		if (add_name(di, dir, n, len))
			return -1;
		present[n++] = 1;
	}
	if (large_dir) {
		TEST_CHECK_RET(has_index(fs, dir) && lv == 2, "%d names: indexed %d, indirect_levels %d", n,
		      has_index(fs, dir), lv);
		for (int i = 0; i < 2000; i++, n++) {
			if (add_name(di, dir, n, len))
				return -1;
			present[n] = 1;
		}
		TEST_CHECK_RET(has_index(fs, dir) && levels(fs, dir) == 2, "three levels hold");
	} else {
		TEST_CHECK_RET(!has_index(fs, dir), "%d names and still indexed", n);
	}
	printf("  %d names, %u blocks: %s\n", n, dir_blocks(fs, dir),
	       large_dir ? "indirect_levels 2" : "the full index made the directory linear");
	dindex_drop_all(di);
	for (int i = 0; i < n; i += 7) {
		size_t l = name_of(name, i, len);

		TEST_CHECK_RET(dindex_lookup(di, dir, name, l, &ino, &ftype) == 0, "lookup %s", name);
	}
	dindex_free(di);
	TEST_CHECK_RET(set_links(fs, present, n) == 0, "links");
	TEST_CHECK_RET(ext2fs_close_free(&fs) == 0, "close");
	free(present);
	return fsck_clean(img);
}

/* The files no name points to are freed (e2fsck: an inode in use needs a link). */
static int free_unlinked_files(ext2_filsys fs)
{
	for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
		struct ext2_inode inode;

		TEST_CHECK_RET(ext2fs_read_inode(fs, files[f], &inode) == 0, "read");
		if (inode.i_links_count)
			continue;
		inode.i_dtime = (__u32)time(NULL);
		TEST_CHECK_RET(ext2fs_write_inode(fs, files[f], &inode) == 0, "write");
		ext2fs_inode_alloc_stats2(fs, files[f], -1, 0);
	}
	return 0;
}

/* A fresh image (-t type, bs-byte blocks, size MiB) with an empty /h. */
static int fresh_image(const char *img, const char *type, int bs, int size, ext2_filsys *fs, ext2_ino_t *dir)
{
	TEST_CHECK_RET(run_shell("mke2fs -q -F -t %s -N 2048 -b %d %s %dM >/dev/null 2>&1", type, bs, img,
				 size) == 0, "mke2fs");
	if (open_fs(img, fs))
		return -1;
	TEST_CHECK_RET(ext2fs_mkdir(*fs, EXT2_ROOT_INO, 0, "h") == 0 &&
	      ext2fs_lookup(*fs, EXT2_ROOT_INO, "h", 1, NULL, dir) == 0 && make_files(*fs) == 0, "setup");
	return 0;
}

/*
 * A fresh directory takes names until it is far past one block: while one
 * block it is linear, the name that does not fit makes it an htree of
 * three blocks (root, two leaves) in the superblock's default hash, then it
 * grows by splits; a readdir begun at one block and finished after returns
 * each name present throughout once.
 */
static int test_make(const char *type, int bs)
{
	const int n = 3000;
	unsigned char *present = calloc(n, 1);
	struct reader r = { .n = n, .batch = 3 };
	char img[512], name[300];
	struct dindex *di;
	ext2_filsys fs;
	ext2_ino_t dir, ino;
	int made = -1, ftype;

	printf("%s, %d-byte blocks: a fresh directory past one block:\n", type, bs);
	snprintf(img, sizeof(img), "%s/make.img", scratch);
	r.seen = calloc(n, 1);
	TEST_CHECK_RET(present && r.seen, "calloc");
	if (fresh_image(img, type, bs, 64, &fs, &dir))
		return -1;
	di = dindex_new(fs, 2);
	TEST_CHECK_RET(di, "dindex_new");
	for (int i = 0; i < n; i++) {
		bool one = dir_blocks(fs, dir) == 1;

		/* every fourth name long, the first few short */
		if (add_name(di, dir, i, i % 4 == 0 && i > 8 ? 200 + i % 56 : 12))
			return -1;
		present[i] = 1;
		if (i == 8 && read_on(di, dir, &r, 1))
			return -1;
		if (one && dir_blocks(fs, dir) > 1) {
			made = i;
			TEST_CHECK_RET(dir_blocks(fs, dir) == 3 && has_index(fs, dir) && levels(fs, dir) == 0,
			      "name %d: %u blocks, indexed %d, levels %d", i, dir_blocks(fs, dir),
			      has_index(fs, dir), levels(fs, dir));
		}
		TEST_CHECK_RET(has_index(fs, dir) == (dir_blocks(fs, dir) > 1), "name %d: indexed %d at %u blocks", i,
		      has_index(fs, dir), dir_blocks(fs, dir));
		if (i > 8 && i % 301 == 0 && read_on(di, dir, &r, 1))
			return -1;
	}
	TEST_CHECK_RET(made > 0, "never indexed");
	if (read_on(di, dir, &r, 1 << 30))
		return -1;
	for (int i = 0; i < n; i++)
		TEST_CHECK_RET(i > 8 ? r.seen[i] <= 1 : r.seen[i] == 1, "n%d seen %d times", i, r.seen[i]);
	TEST_CHECK_RET(r.dots == 2 && r.other == 0, "dots %d other %d", r.dots, r.other);
	printf("  indexed at name %d; %d names, %u blocks, indirect_levels %d; a readdir across: each name once\n",
	       made, n, dir_blocks(fs, dir), levels(fs, dir));
	dindex_drop_all(di);
	for (int i = 0; i < n; i++) {
		size_t l = name_of(name, i, i % 4 == 0 && i > 8 ? 200 + i % 56 : 12);

		TEST_CHECK_RET(dindex_lookup(di, dir, name, l, &ino, &ftype) == 0, "lookup %s", name);
	}
	dindex_free(di);
	TEST_CHECK_RET(set_links(fs, present, n) == 0 && free_unlinked_files(fs) == 0, "links");
	TEST_CHECK_RET(ext2fs_close_free(&fs) == 0, "close");
	free(present);
	free(r.seen);
	return fsck_clean(img);
}

/*
 * A full one-block directory on an image with `spare` blocks free: the
 * index needs two, so the add fails with ENOSPC, and the directory left
 * behind (without the rollback the daemon adds) is a valid linear one
 * holding every name.
 */
static int test_make_enospc(const char *type, int spare)
{
	unsigned char present[200] = { 0 };
	blk64_t *held, b = 0;
	size_t nheld = 0;
	char img[512], name[300];
	struct dindex *di;
	ext2_filsys fs;
	ext2_ino_t dir, ino;
	int n = 0, rc = 0, ftype;

	printf("%s, 1024-byte blocks, %d block(s) free: a full one-block directory:\n", type, spare);
	snprintf(img, sizeof(img), "%s/enospc.img", scratch);
	if (fresh_image(img, type, 1024, 8, &fs, &dir))
		return -1;
	held = malloc(ext2fs_blocks_count(fs->super) * sizeof(*held));
	TEST_CHECK_RET(held, "malloc");
	while (ext2fs_free_blocks_count(fs->super) > (blk64_t)spare && !ext2fs_new_block2(fs, b, NULL, &b)) {
		ext2fs_block_alloc_stats2(fs, b, +1);
		held[nheld++] = b;
	}
	TEST_CHECK_RET(ext2fs_free_blocks_count(fs->super) == (blk64_t)spare, "free blocks %llu",
	      (unsigned long long)ext2fs_free_blocks_count(fs->super));
	di = dindex_new(fs, 2);
	TEST_CHECK_RET(di, "dindex_new");
	while (n < 200) {
		size_t l = name_of(name, n, 100);

		rc = dindex_add(di, dir, name, l, files[0], EXT2_FT_REG_FILE);
		if (rc)
			break;
		present[n++] = 1;
	}
	TEST_CHECK_RET(rc == -ENOSPC, "%d names, then %d", n, rc);
	TEST_CHECK_RET(!has_index(fs, dir) && dir_blocks(fs, dir) == 1u + (unsigned)spare,
	      "indexed %d, %u blocks", has_index(fs, dir), dir_blocks(fs, dir));
	dindex_drop_all(di);
	for (int i = 0; i < n; i++) {
		size_t l = name_of(name, i, 100);

		TEST_CHECK_RET(dindex_lookup(di, dir, name, l, &ino, &ftype) == 0, "lookup %s", name);
	}
	printf("  %d names, ENOSPC, %u block(s), not indexed\n", n, dir_blocks(fs, dir));
	dindex_free(di);
	while (nheld)
		ext2fs_block_alloc_stats2(fs, held[--nheld], -1);
	free(held);
	TEST_CHECK_RET(set_links(fs, present, n) == 0 && free_unlinked_files(fs) == 0, "links");
	TEST_CHECK_RET(ext2fs_close_free(&fs) == 0, "close");
	return fsck_clean(img);
}

/* A full one-block directory whose first entry is not ".": the add that
 * would index it gets EIO (the root keeps "." and ".." at fixed places, as
 * the kernel does) and the directory stays as it was. */
static int test_make_no_dot(void)
{
	char img[512], name[300], *buf;
	struct dindex *di;
	ext2_filsys fs;
	ext2_ino_t dir;
	blk64_t pblk;
	int n = 0, rc = 0;

	printf("a full one-block directory without \".\" first:\n");
	snprintf(img, sizeof(img), "%s/nodot.img", scratch);
	if (fresh_image(img, "ext4", 1024, 8, &fs, &dir))
		return -1;
	buf = malloc(fs->blocksize);
	TEST_CHECK_RET(buf && ext2fs_bmap2(fs, dir, NULL, NULL, 0, 0, NULL, &pblk) == 0 &&
	      ext2fs_read_dir_block4(fs, pblk, buf, 0, dir) == 0, "read block 0");
	((struct ext2_dir_entry *)buf)->name[0] = ',';
	TEST_CHECK_RET(ext2fs_write_dir_block4(fs, pblk, buf, 0, dir) == 0, "write block 0");
	di = dindex_new(fs, 2);
	TEST_CHECK_RET(di, "dindex_new");
	while (n < 200 && !(rc = dindex_add(di, dir, name, name_of(name, n, 100), files[0], EXT2_FT_REG_FILE)))
		n++;
	TEST_CHECK_RET(rc == -EIO && dir_blocks(fs, dir) == 1 && !has_index(fs, dir),
	      "%d names, then %d; %u blocks, indexed %d", n, rc, dir_blocks(fs, dir), has_index(fs, dir));
	printf("  %d names, then EIO; one block, not indexed\n", n);
	dindex_free(di);
	free(buf);
	ext2fs_close_free(&fs);
	return 0;
}

int main(void)
{
	if (run_shell("command -v mke2fs >/dev/null && command -v e2fsck >/dev/null") != 0) {
		printf("mke2fs/e2fsck missing\n");
		return 77;
	}
	if (!mkdtemp(scratch)) {
		perror("mkdtemp");
		return 1;
	}
	initialize_ext2_error_table();
	test_cookies();
	test_cookies_changing();
	test_grow(1024, 3000, 12000, 40);
	test_grow(4096, 3000, 20000, 40);
	test_fill(false);
	test_fill(true);
	test_make("ext3", 1024);
	test_make("ext3", 4096);
	test_make("ext4", 1024);
	test_make("ext4", 4096);
	test_make_enospc("ext3", 0);
	test_make_enospc("ext4", 1);
	test_make_no_dot();
	run_shell("rm -rf %s", scratch);
	printf("%s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
