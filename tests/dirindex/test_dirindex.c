/*
 * tests/dirindex/test_dirindex.c - fuse/dirindex.c against real images:
 * mke2fs images (1k and 4k blocks, with and without filetype), the htree
 * directory of the corpus image f_h_normal, and corrupt directory blocks,
 * metadata_csum htree directories whose dx blocks end in a leaf tail's bytes.
 * Every image must pass `e2fsck -fn` after the changes.
 *
 * Usage: test_dirindex [corpus-dir]   (default /work/shared/corpus/e2fsprogs-tests)
 * Exit 0 pass, 77 skip (no mke2fs/e2fsck), 1 fail.
 */
#include "dirindex.h"
#include "test_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char scratch[] = "/tmp/dirindex-test.XXXXXX";
static int failures;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int open_fs(const char *path, ext2_filsys *fs)
{
	errcode_t err = ext2fs_open2(path, NULL, EXT2_FLAG_RW | EXT2_FLAG_64BITS, 0, 0,
				     unix_io_manager, fs);

	if (err) {
		fprintf(stderr, "ext2fs_open2 %s: %ld\n", path, (long)err);
		return -1;
	}
	err = ext2fs_read_bitmaps(*fs);
	if (err) {
		fprintf(stderr, "read_bitmaps: %ld\n", (long)err);
		ext2fs_close_free(fs);
		return -1;
	}
	return 0;
}

/* e2fsck -fn must find nothing. */
static int fsck_clean(const char *img)
{
	int rc = e2fsck_fn(img, scratch);

	if (rc != 0) {
		fprintf(stderr, "FAIL: e2fsck -fn %s exit %d\n", img, rc);
		failures++;
	} else {
		printf("  e2fsck -fn: clean\n");
	}
	return rc == 0 ? 0 : -1;
}

/* A new empty directory under root. */
static int make_dir(ext2_filsys fs, const char *name, ext2_ino_t *ino)
{
	errcode_t err = ext2fs_mkdir(fs, EXT2_ROOT_INO, 0, name);

	if (!err)
		err = ext2fs_lookup(fs, EXT2_ROOT_INO, name, strlen(name), NULL, ino);
	if (err) {
		fprintf(stderr, "mkdir %s: %ld\n", name, (long)err);
		return -1;
	}
	return 0;
}

/* A regular file inode that the test links many names to. */
static int make_file(ext2_filsys fs, ext2_ino_t *ino)
{
	struct ext2_inode inode;
	errcode_t err = ext2fs_new_inode(fs, EXT2_ROOT_INO, LINUX_S_IFREG | 0644, NULL, ino);

	if (err)
		return -1;
	ext2fs_inode_alloc_stats2(fs, *ino, +1, 0);
	memset(&inode, 0, sizeof(inode));
	inode.i_mode = LINUX_S_IFREG | 0644;
	inode.i_atime = inode.i_ctime = inode.i_mtime = fs->now ? fs->now : time(NULL);
	inode.i_links_count = 0;
	return ext2fs_write_new_inode(fs, *ino, &inode) ? -1 : 0;
}

static int set_links(ext2_filsys fs, ext2_ino_t ino, unsigned int links)
{
	struct ext2_inode inode;

	if (ext2fs_read_inode(fs, ino, &inode))
		return -1;
	inode.i_links_count = (__u16)links;
	return ext2fs_write_inode(fs, ino, &inode) ? -1 : 0;
}

/* Names of varying length so entries pack unevenly. */
static void entry_name(char *buf, size_t size, int i)
{
	snprintf(buf, size, "e%d-%.*s", i, i % 37,
		 "abcdefghijklmnopqrstuvwxyz0123456789_");
}

/* ---- readdir collection ---- */

struct seen {
	unsigned char *count;   /* per entry number */
	int n;
	int dots, dotdots, other, taken, batch;
	uint64_t last_next;
	int bad;
};

static int collect(void *ctx, const char *name, size_t len, ext2_ino_t ino,
		   int ftype, uint64_t next_off)
{
	struct seen *s = ctx;
	char buf[300];
	int i;

	(void)ino;
	(void)ftype;
	if (s->taken == s->batch)
		return 1;
	s->taken++;
	s->last_next = next_off;
	memcpy(buf, name, len);
	buf[len] = 0;
	if (!strcmp(buf, "."))
		s->dots++;
	else if (!strcmp(buf, ".."))
		s->dotdots++;
	else if (sscanf(buf, "e%d-", &i) == 1 && i >= 0 && i < s->n) {
		char want[300];

		entry_name(want, sizeof(want), i);
		if (strcmp(want, buf))
			s->bad++;
		else
			s->count[i]++;
	} else
		s->other++;
	return 0;
}

/* A run of names sharing a position is taken whole or not at all. */
static bool collect_fits(void *ctx, const struct dindex_name *run, size_t n)
{
	struct seen *s = ctx;

	(void)run;
	return s->taken + (int)n <= s->batch;
}

/* Readdir the whole directory in batches; present[i] says which e<i> names
 * must be there. */
static int readdir_all(struct dindex *di, ext2_ino_t dir, const unsigned char *present,
		       int n, int batch)
{
	struct seen s = { .n = n, .batch = batch };
	uint64_t off = 0;
	int calls = 0;

	s.count = calloc(n, 1);
	TEST_CHECK_RET(s.count, "calloc");
	for (;;) {
		int rc;

		s.taken = 0;
		rc = dindex_readdir_batch(di, dir, off, collect, collect_fits, &s);
		TEST_CHECK_RET(rc == 0, "readdir rc %d", rc);
		if (s.taken == 0)
			break;
		off = s.last_next;
		calls++;
		TEST_CHECK_RET(calls < 10 * n + 10, "readdir does not end");
	}
	TEST_CHECK_RET(s.dots == 1 && s.dotdots == 1 && s.other == 0 && s.bad == 0,
	      "dots %d dotdots %d other %d bad %d", s.dots, s.dotdots, s.other, s.bad);
	for (int i = 0; i < n; i++)
		TEST_CHECK_RET(s.count[i] == (present[i] ? 1 : 0), "name %d seen %d times", i, s.count[i]);
	free(s.count);
	return 0;
}

/* ---- the big linear directory ---- */

static int test_big_dir(const char *img, int with_filetype)
{
	const int n = 30000;
	ext2_filsys fs;
	struct dindex *di;
	ext2_ino_t dir, empty_dir, file, file2, ino;
	unsigned char *present;
	char name[300];
	unsigned int links = 0;
	int ftype, rc;
	int want_ft = with_filetype ? EXT2_FT_REG_FILE : 0;
	double t0;

	if (open_fs(img, &fs))
		return -1;
	TEST_CHECK_RET(make_dir(fs, "big", &dir) == 0 && make_dir(fs, "empty", &empty_dir) == 0, "mkdir");
	TEST_CHECK_RET(make_file(fs, &file) == 0 && make_file(fs, &file2) == 0, "make file");
	di = dindex_new(fs, 4);
	TEST_CHECK_RET(di, "dindex_new");
	present = calloc(n, 1);
	TEST_CHECK_RET(present, "calloc");

	t0 = now();
	for (int i = 0; i < n; i++) {
		entry_name(name, sizeof(name), i);
		rc = dindex_add(di, dir, name, strlen(name), file, EXT2_FT_REG_FILE);
		TEST_CHECK_RET(rc == 0, "add %s: %d", name, rc);
		present[i] = 1;
		links++;
	}
	printf("  %d adds: %.3f s\n", n, now() - t0);
	{
		/* past one block, as the kernel's ext4, with dir_index: an htree */
		struct ext2_inode inode;

		TEST_CHECK_RET(ext2fs_read_inode(fs, dir, &inode) == 0, "read inode");
		TEST_CHECK_RET(!(inode.i_flags & EXT2_INDEX_FL) == !ext2fs_has_feature_dir_index(fs->super),
		      "index flag 0x%x, dir_index %d", inode.i_flags & EXT2_INDEX_FL,
		      ext2fs_has_feature_dir_index(fs->super));
	}
	entry_name(name, sizeof(name), 7);
	TEST_CHECK_RET(dindex_add(di, dir, name, strlen(name), file, EXT2_FT_REG_FILE) == -EEXIST, "dup add");

	t0 = now();
	for (int i = 0; i < n; i++) {
		entry_name(name, sizeof(name), i);
		rc = dindex_lookup(di, dir, name, strlen(name), &ino, &ftype);
		TEST_CHECK_RET(rc == 0 && ino == file && ftype == want_ft,
		      "lookup %s: rc %d ino %u ft %d", name, rc, ino, ftype);
	}
	printf("  %d lookups: %.3f s\n", n, now() - t0);
	TEST_CHECK_RET(dindex_lookup(di, dir, "absent", 6, &ino, &ftype) == -ENOENT, "absent");
	TEST_CHECK_RET(dindex_lookup(di, dir, "..", 2, &ino, &ftype) == 0 && ino == EXT2_ROOT_INO, "..");

	/* The on-disk directory agrees (libext2fs's own linear lookup). */
	for (int i = 0; i < n; i += 997) {
		entry_name(name, sizeof(name), i);
		TEST_CHECK_RET(ext2fs_lookup(fs, dir, name, strlen(name), NULL, &ino) == 0 && ino == file,
		      "ext2fs_lookup %s", name);
	}

	t0 = now();
	if (readdir_all(di, dir, present, n, 7))
		return -1;
	printf("  readdir of %d in batches of 7: %.3f s\n", n, now() - t0);

	/* A fresh index built from disk must see the same. */
	dindex_drop_all(di);
	if (readdir_all(di, dir, present, n, 100))
		return -1;

	for (int i = 0; i < n; i += 2) {
		entry_name(name, sizeof(name), i);
		rc = dindex_remove(di, dir, name, strlen(name));
		TEST_CHECK_RET(rc == 0, "remove %s: %d", name, rc);
		present[i] = 0;
		links--;
	}
	entry_name(name, sizeof(name), 0);
	TEST_CHECK_RET(dindex_remove(di, dir, name, strlen(name)) == -ENOENT, "remove twice");
	for (int i = 0; i < n; i++) {
		entry_name(name, sizeof(name), i);
		rc = dindex_lookup(di, dir, name, strlen(name), &ino, &ftype);
		TEST_CHECK_RET(present[i] ? rc == 0 : rc == -ENOENT, "lookup after remove %s: %d", name, rc);
	}
	if (readdir_all(di, dir, present, n, 13))
		return -1;

	/* Re-adds go into the freed space: a linear directory must not grow.
	 * An indexed one puts each into the leaf its hash picks and splits a
	 * leaf whose gaps are all too small for the name: it grows a little. */
	{
		struct ext2_inode before, after;

		TEST_CHECK_RET(ext2fs_read_inode(fs, dir, &before) == 0, "read inode");
		for (int i = 0; i < n; i += 4) {
			entry_name(name, sizeof(name), i);
			rc = dindex_add(di, dir, name, strlen(name), file, EXT2_FT_REG_FILE);
			TEST_CHECK_RET(rc == 0, "re-add %s: %d", name, rc);
			present[i] = 1;
			links++;
		}
		TEST_CHECK_RET(ext2fs_read_inode(fs, dir, &after) == 0, "read inode");
		TEST_CHECK_RET(after.i_size == before.i_size ||
		      ((after.i_flags & EXT2_INDEX_FL) && after.i_size - before.i_size <= before.i_size / 10),
		      "grew from %u to %u", before.i_size, after.i_size);
		printf("  re-adds: %u -> %u blocks\n", before.i_size / fs->blocksize, after.i_size / fs->blocksize);
	}

	/* Replace: names 1 and 3 now point at the second file. */
	for (int i = 1; i <= 3; i += 2) {
		entry_name(name, sizeof(name), i);
		TEST_CHECK_RET(dindex_replace(di, dir, name, strlen(name), file2, EXT2_FT_REG_FILE) == 0, "replace");
		TEST_CHECK_RET(dindex_lookup(di, dir, name, strlen(name), &ino, &ftype) == 0 && ino == file2,
		      "lookup after replace");
		TEST_CHECK_RET(ext2fs_lookup(fs, dir, name, strlen(name), NULL, &ino) == 0 && ino == file2,
		      "ext2fs_lookup after replace");
		links--;
	}
	TEST_CHECK_RET(dindex_replace(di, dir, "absent", 6, file2, EXT2_FT_REG_FILE) == -ENOENT, "replace absent");

	TEST_CHECK_RET(dindex_is_empty(di, dir) == 0, "big not empty");
	TEST_CHECK_RET(dindex_is_empty(di, empty_dir) == 1, "empty is empty");
	TEST_CHECK_RET(dindex_add(di, empty_dir, "x", 1, file2, EXT2_FT_REG_FILE) == 0, "add x");
	TEST_CHECK_RET(dindex_is_empty(di, empty_dir) == 0, "with x not empty");
	TEST_CHECK_RET(dindex_remove(di, empty_dir, "x", 1) == 0, "remove x");
	TEST_CHECK_RET(dindex_is_empty(di, empty_dir) == 1, "empty again");
	TEST_CHECK_RET(dindex_add(di, empty_dir, "", 0, file2, 1) == -EINVAL, "empty name");
	memset(name, 'n', 256);
	TEST_CHECK_RET(dindex_add(di, empty_dir, name, 256, file2, 1) == -ENAMETOOLONG, "long name");
	TEST_CHECK_RET(dindex_add(di, empty_dir, name, 255, file2, EXT2_FT_REG_FILE) == 0, "255 name");
	TEST_CHECK_RET(dindex_lookup(di, empty_dir, name, 255, &ino, &ftype) == 0 && ino == file2, "255 lookup");

	if (readdir_all(di, dir, present, n, 50))
		return -1;
	dindex_free(di);

	TEST_CHECK_RET(set_links(fs, file, links) == 0 && set_links(fs, file2, 3) == 0, "links");
	TEST_CHECK_RET(ext2fs_close_free(&fs) == 0, "close");
	free(present);
	return fsck_clean(img);
}

/* ---- growth timing: 10k, 20k, 40k adds into fresh directories ---- */

static int test_timing(const char *img)
{
	static const int sizes[] = { 10000, 20000, 40000 };
	ext2_filsys fs;
	struct dindex *di;
	char name[300];

	if (open_fs(img, &fs))
		return -1;
	di = dindex_new(fs, 4);
	TEST_CHECK_RET(di, "dindex_new");
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		ext2_ino_t dir, file;
		double t0;

		snprintf(name, sizeof(name), "t%d", sizes[k]);
		TEST_CHECK_RET(make_dir(fs, name, &dir) == 0 && make_file(fs, &file) == 0, "setup");
		t0 = now();
		for (int i = 0; i < sizes[k]; i++) {
			entry_name(name, sizeof(name), i);
			TEST_CHECK_RET(dindex_add(di, dir, name, strlen(name), file, EXT2_FT_REG_FILE) == 0,
			      "add");
		}
		printf("  timing: %d adds in one directory: %.3f s (%.2f us/add)\n", sizes[k],
		       now() - t0, (now() - t0) * 1e6 / sizes[k]);
		TEST_CHECK_RET(set_links(fs, file, sizes[k]) == 0, "links");
	}
	dindex_free(di);
	TEST_CHECK_RET(ext2fs_close_free(&fs) == 0, "close");
	return fsck_clean(img);
}

/* ---- the htree directory of f_h_normal ---- */

struct htree_names {
	char (*names)[256];
	ext2_ino_t *inos;
	int n, cap;
};

static int collect_disk(ext2_ino_t dir, int entry, struct ext2_dir_entry *de,
			int offset, int blocksize, char *buf, void *priv)
{
	struct htree_names *h = priv;
	int len = ext2fs_dirent_name_len(de);

	(void)dir;
	(void)entry;
	(void)offset;
	(void)blocksize;
	(void)buf;
	if (de->inode == 0)
		return 0;
	if (h->n == h->cap) {
		h->cap = h->cap ? 2 * h->cap : 1024;
		h->names = realloc(h->names, h->cap * sizeof(*h->names));
		h->inos = realloc(h->inos, h->cap * sizeof(*h->inos));
		if (!h->names || !h->inos)
			return DIRENT_ABORT;
	}
	memcpy(h->names[h->n], de->name, len);
	h->names[h->n][len] = 0;
	h->inos[h->n++] = de->inode;
	return 0;
}

static bool has_index(ext2_filsys fs, ext2_ino_t dir)
{
	struct ext2_inode inode;

	return ext2fs_read_inode(fs, dir, &inode) == 0 && (inode.i_flags & EXT2_INDEX_FL);
}

/* In an htree directory: a name removed and added back lands in the leaf
 * that just gave it room; then max names added keep the index (full leaves
 * split, e2fsck checks the result) and are removed again.  ino: an inode
 * the names may point to (its link count is unchanged in the end).
 * Returns the number of blocks the adds grew the directory by, or -1. */
static int keep_through_adds(ext2_filsys fs, struct dindex *di, ext2_ino_t dir, const char *name,
			     ext2_ino_t ino, int max)
{
	struct ext2_inode inode;
	uint64_t size0;
	char fill[64];

	TEST_CHECK_RET(has_index(fs, dir), "not indexed");
	TEST_CHECK_RET(dindex_remove(di, dir, name, strlen(name)) == 0, "remove %s", name);
	TEST_CHECK_RET(has_index(fs, dir), "a removal cleared the index flag");
	TEST_CHECK_RET(dindex_add(di, dir, name, strlen(name), ino, EXT2_FT_REG_FILE) == 0, "add back %s", name);
	TEST_CHECK_RET(has_index(fs, dir), "an add into a leaf with room cleared the index flag");
	TEST_CHECK_RET(ext2fs_read_inode(fs, dir, &inode) == 0, "read");
	size0 = EXT2_I_SIZE(&inode);
	for (int n = 0; n < max; n++) {
		snprintf(fill, sizeof(fill), "fill-%05d-%.*s", n, n % 40, "0123456789012345678901234567890123456789");
		TEST_CHECK_RET(dindex_add(di, dir, fill, strlen(fill), ino, EXT2_FT_REG_FILE) == 0, "add %s", fill);
	}
	TEST_CHECK_RET(has_index(fs, dir), "%d adds cleared the index", max);
	TEST_CHECK_RET(ext2fs_read_inode(fs, dir, &inode) == 0, "read");
	for (int i = 0; i < max; i++) {
		snprintf(fill, sizeof(fill), "fill-%05d-%.*s", i, i % 40, "0123456789012345678901234567890123456789");
		TEST_CHECK_RET(dindex_remove(di, dir, fill, strlen(fill)) == 0, "remove %s", fill);
	}
	return (int)((EXT2_I_SIZE(&inode) - size0) / fs->blocksize);
}

/* img: a scratch image holding the htree directory /dirname with at least
 * min_names entries. */
static int test_htree(const char *img, const char *dirname, int min_names)
{
	ext2_filsys fs;
	struct dindex *di;
	struct htree_names h = { 0 };
	struct ext2_inode inode;
	ext2_ino_t dir, ino, moved = 0;
	int ftype, rc, target = -1;
	double t0;

	if (open_fs(img, &fs))
		return -1;
	TEST_CHECK_RET(ext2fs_lookup(fs, EXT2_ROOT_INO, dirname, strlen(dirname), NULL, &dir) == 0,
	      "%s", dirname);
	TEST_CHECK_RET(ext2fs_read_inode(fs, dir, &inode) == 0 && (inode.i_flags & EXT2_INDEX_FL), "is htree");
	TEST_CHECK_RET(ext2fs_dir_iterate2(fs, dir, 0, NULL, collect_disk, &h) == 0, "iterate");
	TEST_CHECK_RET(h.n >= min_names, "only %d names", h.n);

	di = dindex_new(fs, 4);
	TEST_CHECK_RET(di, "dindex_new");
	t0 = now();
	for (int i = 0; i < h.n; i++) {
		rc = dindex_lookup(di, dir, h.names[i], strlen(h.names[i]), &ino, &ftype);
		TEST_CHECK_RET(rc == 0 && ino == h.inos[i], "lookup %s: %d", h.names[i], rc);
		if (target < 0 && strcmp(h.names[i], ".") && strcmp(h.names[i], "..")) {
			struct ext2_inode fi;

			TEST_CHECK_RET(ext2fs_read_inode(fs, ino, &fi) == 0, "read");
			if (LINUX_S_ISREG(fi.i_mode))
				target = i;
		}
	}
	printf("  htree: %d names, index build + lookups %.3f s\n", h.n, now() - t0);
	for (int i = 0; i < h.n; i += 499) {
		TEST_CHECK_RET(ext2fs_lookup(fs, dir, h.names[i], strlen(h.names[i]), NULL, &ino) == 0 &&
		      ino == h.inos[i], "ext2fs_lookup %s", h.names[i]);
	}
	TEST_CHECK_RET(target >= 0, "no regular file in %s", dirname);

	/* Readdir sees every name exactly once while the htree is intact. */
	{
		unsigned char *dummy = calloc(1, 1);
		struct seen s = { .n = 0, .batch = 64, .count = dummy };
		uint64_t off = 0;
		int total = 0;

		for (;;) {
			s.taken = 0;
			TEST_CHECK_RET(dindex_readdir_batch(di, dir, off, collect, collect_fits, &s) == 0, "readdir");
			if (!s.taken)
				break;
			total += s.taken;
			off = s.last_next;
		}
		TEST_CHECK_RET(total == h.n, "readdir %d of %d", total, h.n);
		free(dummy);
	}

	/* Changes that keep the index, adds that split leaves among them. */
	moved = h.inos[target];
	rc = keep_through_adds(fs, di, dir, h.names[target], moved, 5000);
	TEST_CHECK_RET(rc > 0, "keep_through_adds: %d new blocks", rc);
	printf("  5000 adds kept the index, splitting leaves into %d new blocks\n", rc);
	/* Rename within the directory: add a new name, remove the old one (the
	 * file keeps its link count). */
	TEST_CHECK_RET(dindex_add(di, dir, "dirindex-renamed", 16, moved, EXT2_FT_REG_FILE) == 0, "add");
	TEST_CHECK_RET(dindex_remove(di, dir, h.names[target], strlen(h.names[target])) == 0, "remove");
	TEST_CHECK_RET(dindex_lookup(di, dir, "dirindex-renamed", 16, &ino, &ftype) == 0 && ino == moved,
	      "renamed");
	TEST_CHECK_RET(ext2fs_lookup(fs, dir, "dirindex-renamed", 16, NULL, &ino) == 0 && ino == moved,
	      "renamed on disk");
	dindex_free(di);
	TEST_CHECK_RET(ext2fs_close_free(&fs) == 0, "close");
	free(h.names);
	free(h.inos);
	return fsck_clean(img);
}

/* ---- metadata_csum htree: the end of a dx block is no leaf tail ---- */

/* Put a leaf tail's bytes (inode 0, rec_len 12, name_len 0, type 0xDE) into
 * the last 12 bytes of dx block pblk, as the kernel leaves them in a root's
 * dt_reserved when it indexes a directory; the dx checksum is recomputed by
 * the write.  Only the last (unused) entry slot before the dx tail and
 * dt_reserved change; a full block is left alone.  1 if poked. */
static int poke_stale_tail(ext2_filsys fs, ext2_ino_t dir, blk64_t pblk, bool root)
{
	static const unsigned char tail[8] = { 0, 0, 0, 0, 0x0c, 0, 0, 0xde };
	char *buf = malloc(fs->blocksize);
	uint16_t limit, count;
	int poked = 0;

	TEST_CHECK_RET(buf, "malloc");
	TEST_CHECK_RET(ext2fs_read_dir_block4(fs, pblk, buf, 0, dir) == 0, "read dx block");
	/* struct dx_countlimit: after "." and ".." and the root info (32
	 * bytes) in a root, after the empty entry's header in a node */
	memcpy(&limit, buf + (root ? 32 : 8), 2);
	memcpy(&count, buf + (root ? 34 : 10), 2);
	if (ext2fs_le16_to_cpu(count) < ext2fs_le16_to_cpu(limit)) {
		memcpy(buf + fs->blocksize - 12, tail, sizeof(tail));
		TEST_CHECK_RET(ext2fs_write_dir_block4(fs, pblk, buf, 0, dir) == 0, "write dx block");
		poked = 1;
	}
	free(buf);
	return poked;
}

/* Is logical block lblk of dir a dx block (the root, or a node: one empty
 * entry covering the block)?  *pblk is its physical block. */
static int is_dx_block(ext2_filsys fs, ext2_ino_t dir, blk64_t lblk, blk64_t *pblk)
{
	struct ext2_dir_entry *de;
	unsigned int rec_len = 0;
	char *buf = malloc(fs->blocksize);
	int dx;

	if (!buf || ext2fs_bmap2(fs, dir, NULL, NULL, 0, lblk, NULL, pblk) ||
	    ext2fs_read_dir_block4(fs, *pblk, buf, 0, dir)) {
		free(buf);
		return -1;
	}
	de = (struct ext2_dir_entry *)buf;
	ext2fs_get_rec_len(fs, de, &rec_len);
	dx = lblk == 0 || (de->inode == 0 && rec_len == fs->blocksize);
	free(buf);
	return dx;
}

/* mke2fs's metadata_csum, a directory indexed by e2fsck -D, the stale tail
 * bytes in every dx block: every name is found and listed once; changes
 * keep the index, the stale bytes never taken for a leaf tail. */
static int test_csum_htree(int bs)
{
	const int n = 5000;
	char img[512], name[300];
	ext2_filsys fs;
	struct dindex *di;
	struct ext2_inode inode;
	ext2_ino_t dir, file, ino;
	unsigned char *present;
	int ftype, rc, ndx = 0;

	snprintf(img, sizeof(img), "%s/csum-htree.img", scratch);
	TEST_CHECK_RET(run_shell("mke2fs -q -F -t ext4 -O metadata_csum,^has_journal -b %d %s 64M >/dev/null",
		  bs, img) == 0, "mke2fs");
	if (open_fs(img, &fs))
		return -1;
	TEST_CHECK_RET(make_dir(fs, "h", &dir) == 0 && make_file(fs, &file) == 0, "setup");
	di = dindex_new(fs, 2);
	TEST_CHECK_RET(di, "dindex_new");
	for (int i = 0; i < n; i++) {
		entry_name(name, sizeof(name), i);
		TEST_CHECK_RET(dindex_add(di, dir, name, strlen(name), file, EXT2_FT_REG_FILE) == 0, "add");
	}
	dindex_free(di);
	TEST_CHECK_RET(set_links(fs, file, n) == 0, "links");
	TEST_CHECK_RET(ext2fs_close_free(&fs) == 0, "close");
	rc = run_shell("e2fsck -fyD %s >%s/fsck-D.out 2>&1", img, scratch);
	TEST_CHECK_RET(rc == 0 || rc == 1, "e2fsck -fyD exit %d", rc);

	if (open_fs(img, &fs))
		return -1;
	TEST_CHECK_RET(ext2fs_read_inode(fs, dir, &inode) == 0 && (inode.i_flags & EXT2_INDEX_FL),
	      "e2fsck -D made no htree");
	for (blk64_t lblk = 0; lblk < EXT2_I_SIZE(&inode) / fs->blocksize; lblk++) {
		blk64_t pblk;
		int dx = is_dx_block(fs, dir, lblk, &pblk);

		TEST_CHECK_RET(dx >= 0, "reading block %llu", (unsigned long long)lblk);
		if (dx) {
			rc = poke_stale_tail(fs, dir, pblk, lblk == 0);
			if (rc < 0)
				return -1;
			ndx += rc;
		}
	}
	TEST_CHECK_RET(ndx > 0, "no dx block to put the bytes in");
	TEST_CHECK_RET(ext2fs_close_free(&fs) == 0, "close");
	if (fsck_clean(img))
		return -1;

	if (open_fs(img, &fs))
		return -1;
	di = dindex_new(fs, 2);
	TEST_CHECK_RET(di, "dindex_new");
	present = malloc(n);
	TEST_CHECK_RET(present, "malloc");
	memset(present, 1, n);
	for (int i = 0; i < n; i++) {
		entry_name(name, sizeof(name), i);
		rc = dindex_lookup(di, dir, name, strlen(name), &ino, &ftype);
		TEST_CHECK_RET(rc == 0 && ino == file, "lookup %s: %d", name, rc);
	}
	TEST_CHECK_RET(dindex_lookup(di, dir, "..", 2, &ino, &ftype) == 0 && ino == EXT2_ROOT_INO, "..");
	if (readdir_all(di, dir, present, n, 64))
		return -1;
	printf("  %d-byte blocks: %d dx block(s) with stale tail bytes, %d names found and listed\n",
	       bs, ndx, n);
	/* changes that keep the index (e2fsck checks it), adds that split
	 * leaves among them; the stale bytes are not taken for a tail */
	entry_name(name, sizeof(name), 7);
	TEST_CHECK_RET(dindex_remove(di, dir, name, strlen(name)) == 0, "remove");
	TEST_CHECK_RET(dindex_add(di, dir, name, strlen(name), file, EXT2_FT_REG_FILE) == 0, "add");
	TEST_CHECK_RET(has_index(fs, dir), "index flag cleared by an add into a leaf with room");
	TEST_CHECK_RET(ext2fs_flush(fs) == 0, "flush");
	if (fsck_clean(img))
		return -1;
	entry_name(name, sizeof(name), 8);
	rc = keep_through_adds(fs, di, dir, name, file, 3000);
	TEST_CHECK_RET(rc > 0, "keep_through_adds: %d new blocks", rc);
	dindex_free(di);
	free(present);
	TEST_CHECK_RET(ext2fs_close_free(&fs) == 0, "close");
	return fsck_clean(img) ? -1 : 0;
}

/* ---- corrupt directory blocks give EIO ---- */

static int corrupt_and_check(const char *img, int how)
{
	ext2_filsys fs;
	struct dindex *di;
	ext2_ino_t dir, file, ino;
	blk64_t pblk;
	char *buf;
	int ftype, rc;
	struct ext2_dir_entry *de;

	if (open_fs(img, &fs))
		return -1;
	TEST_CHECK_RET(ext2fs_lookup(fs, EXT2_ROOT_INO, "c", 1, NULL, &dir) == 0, "c");
	TEST_CHECK_RET(ext2fs_lookup(fs, dir, "f0", 2, NULL, &file) == 0, "f0");
	TEST_CHECK_RET(ext2fs_bmap2(fs, dir, NULL, NULL, 0, 0, NULL, &pblk) == 0, "bmap");
	buf = malloc(fs->blocksize);
	TEST_CHECK_RET(buf && io_channel_read_blk64(fs->io, pblk, 1, buf) == 0, "read");
	de = (struct ext2_dir_entry *)(buf + 24);       /* the entry after "." and ".." */
	switch (how) {
	case 0: de->rec_len = 3; break;                 /* rec_len not a multiple of 4 */
	case 1: de->rec_len = 0; break;                 /* zero rec_len: a loop */
	case 2: de->rec_len = (__u16)(fs->blocksize); break;   /* past the block end */
	case 3: de->name_len = (de->name_len & 0xff00) | 200; break;   /* name beyond rec_len */
	case 4: de->inode = fs->super->s_inodes_count + 5; break;
	default: {
		struct ext2_inode inode;                /* i_size larger than the blocks */

		TEST_CHECK_RET(ext2fs_read_inode(fs, dir, &inode) == 0, "read inode");
		inode.i_size += fs->blocksize;
		TEST_CHECK_RET(ext2fs_write_inode(fs, dir, &inode) == 0, "write inode");
	}
	}
	if (how < 5)
		TEST_CHECK_RET(io_channel_write_blk64(fs->io, pblk, 1, buf) == 0, "write");
	free(buf);
	di = dindex_new(fs, 4);
	TEST_CHECK_RET(di, "dindex_new");
	rc = dindex_lookup(di, dir, "f1", 2, &ino, &ftype);
	TEST_CHECK_RET(rc == -EIO, "corruption %d: lookup gave %d", how, rc);
	rc = dindex_readdir(di, dir, 0, collect, &(struct seen){ .batch = 1000 });
	TEST_CHECK_RET(rc == -EIO, "corruption %d: readdir gave %d", how, rc);
	rc = dindex_add(di, dir, "new", 3, file, EXT2_FT_REG_FILE);
	TEST_CHECK_RET(rc == -EIO, "corruption %d: add gave %d", how, rc);
	printf("  corruption %d: lookup, readdir, add give EIO\n", how);
	dindex_free(di);
	ext2fs_close_free(&fs);
	return 0;
}

static int test_corrupt(const char *base_img)
{
	char img[512];
	ext2_filsys fs;
	struct dindex *di;
	ext2_ino_t dir, file;

	snprintf(img, sizeof(img), "%s/corrupt-base.img", scratch);
	TEST_CHECK_RET(run_shell("cp --sparse=always %s %s", base_img, img) == 0, "cp");
	if (open_fs(img, &fs))
		return -1;
	TEST_CHECK_RET(make_dir(fs, "c", &dir) == 0 && make_file(fs, &file) == 0, "setup");
	di = dindex_new(fs, 2);
	TEST_CHECK_RET(di, "dindex_new");
	for (int i = 0; i < 3; i++) {
		char name[8];

		snprintf(name, sizeof(name), "f%d", i);
		TEST_CHECK_RET(dindex_add(di, dir, name, strlen(name), file, EXT2_FT_REG_FILE) == 0, "add");
	}
	dindex_free(di);
	TEST_CHECK_RET(set_links(fs, file, 3) == 0, "links");
	TEST_CHECK_RET(ext2fs_close_free(&fs) == 0, "close");
	if (fsck_clean(img))
		return -1;
	for (int how = 0; how <= 5; how++) {
		char copy[600];

		snprintf(copy, sizeof(copy), "%s/corrupt-%d.img", scratch, how);
		TEST_CHECK_RET(run_shell("cp --sparse=always %s %s", img, copy) == 0, "cp");
		if (corrupt_and_check(copy, how))
			return -1;
	}
	return 0;
}

/* f_h_normal's /test2: 47,618 names under a two-level htree (1k blocks). */
static int test_corpus_htree(const char *corpus)
{
	char img[512];

	snprintf(img, sizeof(img), "%s/f_h_normal/image.gz", corpus);
	if (access(img, R_OK)) {
		printf("  %s missing, skipped\n", img);
		return 0;
	}
	TEST_CHECK_RET(run_shell("zcat %s > %s/htree.img", img, scratch) == 0, "zcat");
	snprintf(img, sizeof(img), "%s/htree.img", scratch);
	return test_htree(img, "test2", 40000);
}

/* An htree made by the kernel (ext3, 4k blocks, 5,000 files); afterwards the
 * kernel must still read every name of the changed directory.
 * Skipped where loop mounts are not possible. */
static int test_kernel_htree(void)
{
	char img[256], mnt[256], path[1024];
	int count = 0;

	snprintf(img, sizeof(img), "%s/kernel.img", scratch);
	snprintf(mnt, sizeof(mnt), "%s/mnt", scratch);
	if (run_shell("mke2fs -q -F -t ext3 -b 4096 %s 64M", img) != 0 || mkdir(mnt, 0700) ||
	    run_shell("mount -o loop %s %s 2>/dev/null", img, mnt) != 0) {
		printf("  loop mount not possible, skipped\n");
		return 0;
	}
	snprintf(path, sizeof(path), "%s/h", mnt);
	if (mkdir(path, 0755) == 0) {
		for (int i = 0; i < 5000; i++) {
			char name[300];
			FILE *f;

			entry_name(name, sizeof(name), i);
			snprintf(path, sizeof(path), "%s/h/%s", mnt, name);
			f = fopen(path, "w");
			if (!f)
				break;
			fclose(f);
			count++;
		}
	}
	if (run_shell("umount %s", mnt) != 0) {
		failures++;
		fprintf(stderr, "umount %s failed\n", mnt);
		return -1;
	}
	TEST_CHECK_RET(count == 5000, "kernel created %d files", count);
	if (test_htree(img, "h", 5000))
		return -1;
	TEST_CHECK_RET(run_shell("mount -o loop,ro %s %s", img, mnt) == 0, "remount");
	snprintf(path, sizeof(path), "%s/h", mnt);
	{
		char cmd[1200];
		int n = -1;
		FILE *p;

		snprintf(cmd, sizeof(cmd), "ls -a %s | wc -l", path);
		p = popen(cmd, "r");
		if (p) {
			if (fscanf(p, "%d", &n) != 1)
				n = -1;
			pclose(p);
		}
		snprintf(cmd, sizeof(cmd), "%s/dirindex-renamed", path);
		if (access(cmd, F_OK))
			n = -2;
		run_shell("umount %s", mnt);
		/* 5,000 files + "." + ".." (one renamed, none lost). */
		TEST_CHECK_RET(n == 5002, "kernel lists %d entries", n);
		printf("  kernel reads the changed directory: %d entries\n", n);
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *corpus = argc > 1 ? argv[1] : "/work/shared/corpus/e2fsprogs-tests";
	static const struct { int bs; const char *opts; int filetype; } configs[] = {
		{ 1024, "-t ext3", 1 },
		{ 4096, "-t ext3", 1 },
		{ 1024, "-t ext3 -O ^filetype,^dir_index", 0 },
	};
	char img[512];

	if (run_shell("command -v mke2fs >/dev/null && command -v e2fsck >/dev/null") != 0) {
		printf("mke2fs/e2fsck missing\n");
		return 77;
	}
	if (!mkdtemp(scratch)) {
		perror("mkdtemp");
		return 1;
	}
	initialize_ext2_error_table();
	snprintf(img, sizeof(img), "%s/fs.img", scratch);
	for (size_t c = 0; c < sizeof(configs) / sizeof(configs[0]); c++) {
		printf("image: %d-byte blocks, %s\n", configs[c].bs, configs[c].opts);
		if (run_shell("mke2fs -q -F %s -b %d -N 100000 %s 256M", configs[c].opts,
			configs[c].bs, img) != 0) {
			fprintf(stderr, "mke2fs failed\n");
			failures++;
			continue;
		}
		if (test_big_dir(img, configs[c].filetype))
			continue;
		if (c == 0 && test_corrupt(img))
			continue;
		if (c < 2)
			test_timing(img);
	}
	printf("htree directory (f_h_normal):\n");
	test_corpus_htree(corpus);
	printf("htree directory made by the kernel:\n");
	test_kernel_htree();
	printf("metadata_csum htree directory with stale tail bytes in its dx blocks:\n");
	test_csum_htree(1024);
	test_csum_htree(4096);
	run_shell("rm -rf %s", scratch);
	printf("%s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
