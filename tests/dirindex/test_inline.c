/*
 * tests/dirindex/test_inline.c - fuse/inline.c and the inline directories of
 * fuse/dirindex.c on an inline_data image made here: a directory whose
 * entries fill i_block and continue in system.data (e2fsck -fn must accept
 * the image as made), an empty inline directory, an inline file, and each
 * kind of damage to an inline directory (EIO from lookup and readdir).
 *
 * Usage: test_inline   Exit 0 pass, 77 skip (no mke2fs/e2fsck), 1 fail.
 */
#include "dirindex.h"
#include "test_util.h"
#include "inline.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char scratch[] = "/tmp/inline-test.XXXXXX";
static int failures;

/* ---- building inline areas ---- */

/* The test directory's entries: name, position in the area, rec_len.
 * i_block's run is [4, 60): four entries; system.data's run is [60, 100):
 * a name, an empty entry, a name. */
static const struct layout {
	const char *name;       /* NULL: an empty entry (inode 0) */
	uint32_t pos, rec_len;
} layout[] = {
	{ "a1", 4, 12 }, { "b22", 16, 12 }, { "c333", 28, 12 }, { "d4444", 40, 20 },
	{ "e55555", 60, 16 }, { NULL, 76, 12 }, { "f6", 88, 12 },
};
#define NLAYOUT (sizeof(layout) / sizeof(layout[0]))
#define AREA_LEN 100

static void put_entry(char *area, uint32_t pos, uint32_t rec_len, ext2_ino_t ino,
		      const char *name)
{
	struct ext2_dir_entry de;
	size_t len = name ? strlen(name) : 0;

	memset(&de, 0, sizeof(de));
	de.inode = ext2fs_cpu_to_le32(ino);
	de.rec_len = ext2fs_cpu_to_le16((uint16_t)rec_len);
	de.name_len = ext2fs_cpu_to_le16((uint16_t)(len | (name ? EXT2_FT_REG_FILE << 8 : 0)));
	memcpy(area + pos, &de, 8);
	memcpy(area + pos + 8, name ? name : "", len);
}

static void build_area(char *area, ext2_ino_t parent, ext2_ino_t file)
{
	uint32_t p = ext2fs_cpu_to_le32(parent);

	memset(area, 0, AREA_LEN);
	memcpy(area, &p, 4);
	for (size_t i = 0; i < NLAYOUT; i++)
		put_entry(area, layout[i].pos, layout[i].rec_len, layout[i].name ? file : 0,
			  layout[i].name);
}

/* A new inode with inline data area[0..len) and i_size len. */
static int make_inline(ext2_filsys fs, unsigned mode, const char *area, size_t len,
		       unsigned links, ext2_ino_t *ino)
{
	struct ext2_inode inode;

	TEST_CHECK_RET(ext2fs_new_inode(fs, EXT2_ROOT_INO, mode, NULL, ino) == 0, "new inode");
	ext2fs_inode_alloc_stats2(fs, *ino, +1, LINUX_S_ISDIR(mode));
	memset(&inode, 0, sizeof(inode));
	inode.i_mode = (uint16_t)mode;
	inode.i_links_count = (uint16_t)links;
	inode.i_atime = inode.i_ctime = inode.i_mtime = (uint32_t)time(NULL);
	inode.i_flags = EXT4_INLINE_DATA_FL;
	inode.i_size = (uint32_t)len;
	TEST_CHECK_RET(ext2fs_write_new_inode(fs, *ino, &inode) == 0, "write inode");
	TEST_CHECK_RET(ext2fs_inline_data_init(fs, *ino) == 0, "inline init");
	TEST_CHECK_RET(ext2fs_inline_data_set(fs, *ino, NULL, (void *)area, len) == 0, "inline set");
	return 0;
}

/* Rewrite an inline directory's area (same length). */
static int set_area(ext2_filsys fs, ext2_ino_t ino, const char *area, size_t len)
{
	TEST_CHECK_RET(ext2fs_inline_data_set(fs, ino, NULL, (void *)area, len) == 0, "inline set");
	return 0;
}

/* ---- readdir collection ---- */

struct listing {
	char names[16][16];
	ext2_ino_t inos[16];
	int n, batch, taken;
	uint64_t last_next;
};

static int collect(void *ctx, const char *name, size_t len, ext2_ino_t ino, int ftype,
		   uint64_t next_off)
{
	struct listing *l = ctx;

	(void)ftype;
	if (l->taken == l->batch || l->n == 16 || len >= 16)
		return 1;
	memcpy(l->names[l->n], name, len);
	l->names[l->n][len] = 0;
	l->inos[l->n++] = ino;
	l->taken++;
	l->last_next = next_off;
	return 0;
}

/* The whole listing, batch entries per call, resuming at next_off. */
static int list_all(struct dindex *di, ext2_ino_t dir, int batch, struct listing *l)
{
	uint64_t off = 0;
	int rc;

	memset(l, 0, sizeof(*l));
	l->batch = batch;
	for (int calls = 0; calls < 32; calls++) {
		l->taken = 0;
		rc = dindex_readdir(di, dir, off, collect, l);
		if (rc)
			return rc;
		if (!l->taken)
			return 0;
		off = l->last_next;
	}
	return -ELOOP;
}

/* ---- the tests ---- */

static int test_dir(ext2_filsys fs, ext2_ino_t dir, ext2_ino_t empty, ext2_ino_t file)
{
	struct dindex *di = dindex_new(fs, 4);
	struct listing l;
	ext2_ino_t ino;
	int ftype, rc;

	TEST_CHECK_RET(di, "dindex_new");
	for (size_t i = 0; i < NLAYOUT; i++) {
		if (!layout[i].name)
			continue;
		rc = dindex_lookup(di, dir, layout[i].name, strlen(layout[i].name), &ino, &ftype);
		TEST_CHECK_RET(rc == 0 && ino == file && ftype == EXT2_FT_REG_FILE,
		      "lookup %s: rc %d ino %u ft %d", layout[i].name, rc, ino, ftype);
	}
	TEST_CHECK_RET(dindex_lookup(di, dir, ".", 1, &ino, &ftype) == 0 && ino == dir, ".");
	TEST_CHECK_RET(dindex_lookup(di, dir, "..", 2, &ino, &ftype) == 0 && ino == EXT2_ROOT_INO, "..");
	TEST_CHECK_RET(dindex_lookup(di, dir, "zz", 2, &ino, &ftype) == -ENOENT, "absent");
	for (int batch = 1; batch <= 9; batch += 8) {
		size_t want = 0;

		TEST_CHECK_RET(list_all(di, dir, batch, &l) == 0, "readdir, batch %d", batch);
		TEST_CHECK_RET(l.n == 8, "readdir, batch %d: %d names", batch, l.n);
		TEST_CHECK_RET(!strcmp(l.names[0], ".") && l.inos[0] == dir, ". first");
		TEST_CHECK_RET(!strcmp(l.names[1], "..") && l.inos[1] == EXT2_ROOT_INO, ".. second");
		for (int k = 2; k < l.n; k++, want++) {
			while (!layout[want].name)
				want++;
			TEST_CHECK_RET(!strcmp(l.names[k], layout[want].name) && l.inos[k] == file,
			      "readdir entry %d: %s", k, l.names[k]);
		}
	}
	TEST_CHECK_RET(dindex_is_empty(di, dir) == 0, "not empty");
	TEST_CHECK_RET(dindex_add(di, dir, "new", 3, file, EXT2_FT_REG_FILE) == -EOPNOTSUPP, "add");
	TEST_CHECK_RET(dindex_remove(di, dir, "a1", 2) == -EOPNOTSUPP, "remove");
	TEST_CHECK_RET(dindex_replace(di, dir, "a1", 2, dir, EXT2_FT_DIR) == -EOPNOTSUPP, "replace");

	TEST_CHECK_RET(dindex_is_empty(di, empty) == 1, "empty inline directory");
	TEST_CHECK_RET(list_all(di, empty, 5, &l) == 0 && l.n == 2, "empty: %d names", l.n);
	dindex_free(di);
	printf("  inline directory: lookups, readdir in batches of 1 and 9, changes refused\n");
	return 0;
}

static int test_file(ext2_filsys fs, ext2_ino_t file, const char *data, size_t len)
{
	char out[200];
	struct ext2_inode inode;
	char *buf;
	size_t blen;

	TEST_CHECK_RET(ext2fs_read_inode(fs, file, &inode) == 0, "read inode");
	TEST_CHECK_RET(inline_file_read(fs, file, &inode, 0, len, out) == 0 && !memcmp(out, data, len),
	      "whole file");
	TEST_CHECK_RET(inline_file_read(fs, file, &inode, 57, 10, out) == 0 && !memcmp(out, data + 57, 10),
	      "across i_block's end");
	memset(out, 'x', sizeof(out));
	TEST_CHECK_RET(inline_file_read(fs, file, &inode, len - 5, 20, out) == 0 &&
	      !memcmp(out, data + len - 5, 5) && out[5] == 0 && out[19] == 0,
	      "past the area: zeros");
	TEST_CHECK_RET(inline_load(fs, file, &inode, &buf, &blen) == 0 && blen == len &&
	      !memcmp(buf, data, len), "load");
	free(buf);
	TEST_CHECK_RET(ext2fs_read_inode(fs, EXT2_ROOT_INO, &inode) == 0, "read root");
	TEST_CHECK_RET(inline_load(fs, EXT2_ROOT_INO, &inode, &buf, &blen) == -EIO, "not inline");
	printf("  inline file: reads at any offset, zeros past the area\n");
	return 0;
}

/* Each kind of damage: lookup and readdir say EIO. */
static int test_damage(ext2_filsys fs, ext2_ino_t dir, ext2_ino_t file)
{
	static const char *what[] = {
		"an entry crossing from i_block into system.data", "rec_len 0",
		"a name longer than its record", "an inode number out of range",
		"parent 0", "two entries of one name", "rec_len not a multiple of 4",
	};
	char area[AREA_LEN];

	for (int how = 0; how < (int)(sizeof(what) / sizeof(what[0])); how++) {
		struct dindex *di;
		struct listing l;
		ext2_ino_t ino;
		int ftype, rc;

		build_area(area, EXT2_ROOT_INO, file);
		switch (how) {
		case 0: put_entry(area, 40, 36, file, "d4444"); break;   /* to 76 */
		case 1: put_entry(area, 16, 0, file, "b22"); break;
		case 2: area[4 + 6] = 9; break;             /* "a1": name_len 9 */
		case 3: put_entry(area, 28, 12, fs->super->s_inodes_count + 1, "c333"); break;
		case 4: memset(area, 0, 4); break;
		case 5: put_entry(area, 88, 12, file, "a1"); break;
		default: put_entry(area, 16, 13, file, "b22"); break;
		}
		if (set_area(fs, dir, area, AREA_LEN))
			return -1;
		di = dindex_new(fs, 2);
		TEST_CHECK_RET(di, "dindex_new");
		rc = dindex_lookup(di, dir, "f6", 2, &ino, &ftype);
		TEST_CHECK_RET(rc == -EIO, "%s: lookup gave %d", what[how], rc);
		dindex_free(di);
		/* readdir of a fresh index, and of an index built before the damage */
		di = dindex_new(fs, 2);
		TEST_CHECK_RET(di, "dindex_new");
		rc = list_all(di, dir, 16, &l);
		TEST_CHECK_RET(rc == -EIO, "%s: readdir gave %d", what[how], rc);
		dindex_free(di);
		printf("  %s: EIO\n", what[how]);
	}
	return 0;
}

int main(void)
{
	char img[512], area[AREA_LEN], filedata[100], empty_area[60] = { 0 };
	ext2_filsys fs;
	ext2_ino_t dir, empty, file, ino;
	uint32_t root = ext2fs_cpu_to_le32(EXT2_ROOT_INO);
	errcode_t err;

	if (run_shell("command -v mke2fs >/dev/null && command -v e2fsck >/dev/null") != 0) {
		printf("mke2fs/e2fsck missing\n");
		return 77;
	}
	if (!mkdtemp(scratch)) {
		perror("mkdtemp");
		return 1;
	}
	initialize_ext2_error_table();
	snprintf(img, sizeof(img), "%s/inline.img", scratch);
	if (run_shell("mke2fs -q -F -t ext4 -O inline_data,^has_journal -I 256 -b 1024 %s 16M >/dev/null",
		img) != 0) {
		fprintf(stderr, "FAIL: mke2fs\n");
		return 1;
	}
	err = ext2fs_open2(img, NULL, EXT2_FLAG_RW | EXT2_FLAG_64BITS, 0, 0, unix_io_manager, &fs);
	if (err || ext2fs_read_bitmaps(fs)) {
		fprintf(stderr, "FAIL: cannot open %s\n", img);
		return 1;
	}
	/* a file (linked from the directory's six names and from the root),
	 * the directory, an empty directory (one empty entry covering i_block) */
	for (size_t i = 0; i < sizeof(filedata); i++)
		filedata[i] = (char)('A' + i % 53);
	if (make_inline(fs, LINUX_S_IFREG | 0644, filedata, sizeof(filedata), 7, &file))
		return 1;
	build_area(area, EXT2_ROOT_INO, file);
	if (make_inline(fs, LINUX_S_IFDIR | 0755, area, AREA_LEN, 2, &dir))
		return 1;
	memcpy(empty_area, &root, 4);
	put_entry(empty_area, 4, 56, 0, NULL);
	if (make_inline(fs, LINUX_S_IFDIR | 0755, empty_area, 60, 2, &empty))
		return 1;
	if (ext2fs_link(fs, EXT2_ROOT_INO, "dir", dir, EXT2_FT_DIR) ||
	    ext2fs_link(fs, EXT2_ROOT_INO, "empty", empty, EXT2_FT_DIR) ||
	    ext2fs_link(fs, EXT2_ROOT_INO, "file", file, EXT2_FT_REG_FILE) ||
	    ext2fs_lookup(fs, EXT2_ROOT_INO, "dir", 3, NULL, &ino) || ino != dir) {
		fprintf(stderr, "FAIL: linking into the root\n");
		return 1;
	}
	{
		struct ext2_inode rooti;

		ext2fs_read_inode(fs, EXT2_ROOT_INO, &rooti);
		rooti.i_links_count += 2;
		ext2fs_write_inode(fs, EXT2_ROOT_INO, &rooti);
	}
	ext2fs_close_free(&fs);
	if (e2fsck_fn(img, scratch) != 0) {
		fprintf(stderr, "FAIL: e2fsck -fn does not accept the inline image\n");
		failures++;
	} else {
		printf("  e2fsck -fn: the image as made is clean\n");
	}

	err = ext2fs_open2(img, NULL, EXT2_FLAG_RW | EXT2_FLAG_64BITS, 0, 0, unix_io_manager, &fs);
	if (err) {
		fprintf(stderr, "FAIL: cannot reopen %s\n", img);
		return 1;
	}
	test_dir(fs, dir, empty, file);
	test_file(fs, file, filedata, sizeof(filedata));
	test_damage(fs, dir, file);
	ext2fs_close_free(&fs);
	run_shell("rm -rf %s", scratch);
	printf("%s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
