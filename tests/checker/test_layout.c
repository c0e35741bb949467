/*
 * tests/checker/test_layout.c - the checker's superblock and descriptor
 * copy layouts other than the classic one (checker/layout_meta.c):
 * meta_bg (ext4 at 1 KiB blocks, ext3 at 4 KiB; several metagroups; and
 * s_first_meta_bg 1 as an online resize leaves it, made with debugfs and
 * e2fsck -fy) and sparse_super2 (s_backup_bgs naming groups 1 and the last).
 *
 * On each small mke2fs image (groups shrunk with -g so that it has
 * several metagroups): the image scans clean; then each edit (debugfs, or
 * a raw write at a location libext2fs reports) breaks one rule the layout
 * feeds, and the transaction from the base to the edited image must be
 * rejected naming that rule's invariant (T_SCAN: a scan of the edited
 * image, which e2fsck -fn must reject too).  Layouts e2fsck repairs first
 * (s_first_meta_bg past the descriptor blocks, meta_bg with resize_inode)
 * must be refused at attach, naming the field.
 *
 * libext2fs and debugfs only make and locate; the decisions are the
 * checker's.  Exit 0 pass, 1 fail, 77 skip (no mke2fs/debugfs).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ext2fs/ext2fs.h>

#include "checker.h"
#include "test_util.h"

static int failures;
static char dir[64];

/* the image mapped read-only (a few hundred MiB, mostly holes), or NULL */
static uint8_t *map_image(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	void *p = MAP_FAILED;
	if (fd >= 0 && !fstat(fd, &st) && st.st_size > 0)
		p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (fd >= 0)
		close(fd);
	*len = p == MAP_FAILED ? 0 : (size_t)st.st_size;
	return p == MAP_FAILED ? NULL : p;
}

static void unmap_image(uint8_t *p, size_t len)
{
	if (p)
		munmap(p, len);
}

/* the writes turning a into b, block by block */
static struct chk_verdict *check_pair(struct chk_fs *fs, const uint8_t *a, const uint8_t *b, size_t n)
{
	uint32_t bs = chk_block_size(fs);
	size_t cap = 64, nw = 0;
	struct chk_write *w = malloc(cap * sizeof(*w));
	for (size_t off = 0; w && off < n; off += bs) {
		if (!memcmp(a + off, b + off, bs))
			continue;
		if (nw == cap) {
			struct chk_write *g = realloc(w, (cap *= 2) * sizeof(*w));
			if (!g)
				break;
			w = g;
		}
		w[nw++] = (struct chk_write){ off, bs, b + off };
	}
	struct chk_verdict *v = NULL;
	int r = w ? chk_check(fs, w, nw, &v) : -ENOMEM;
	free(w);
	TEST_CHECK(r == 0, "chk_check: %s", strerror(-r));
	return r ? NULL : v;
}

static bool names(const struct chk_verdict *v, const char *id, const char **detail)
{
	for (size_t i = 0; v && i < chk_verdict_nviolations(v); i++)
		if (!strcmp(chk_verdict_violation(v, i)->inv->id, id)) {
			*detail = chk_verdict_violation(v, i)->detail;
			return true;
		}
	return false;
}

static void dump(const struct chk_verdict *v)
{
	for (size_t i = 0; v && i < chk_verdict_nviolations(v) && i < 10; i++)
		fprintf(stderr, "   %s: %s\n", chk_verdict_violation(v, i)->inv->id,
			chk_verdict_violation(v, i)->detail);
}

/* ------------------------------------------------------------ locations */

/* what the edits need: libext2fs's answer to where the copies lie */
struct where {
	uint32_t dpb, ngroups;
	blk64_t desc_primary[2];      /* descriptor blocks of metagroups 1 and 2 */
	blk64_t desc_backup;          /* metagroup 2's copy in its second group */
	blk64_t desc_last_copy;       /* metagroup 1's copy in its last group */
	blk64_t backup_sb;            /* the superblock copy in the last group (sparse_super2) */
	blk64_t no_sb_free;           /* group 3's first block: no copy there, free */
	blk64_t classic_copy;         /* group 3's classic copy (below s_first_meta_bg) */
	uint32_t desc_group;          /* a group whose descriptor lies in metagroup 2 */
};

static int locate(const char *img, struct where *w)
{
	ext2_filsys fs;
	if (ext2fs_open(img, 0, 0, 0, unix_io_manager, &fs))
		return -1;
	memset(w, 0, sizeof(*w));
	w->dpb = EXT2_DESC_PER_BLOCK(fs->super);
	w->ngroups = fs->group_desc_count;
	int r = ext2fs_read_block_bitmap(fs) ? -1 : 0;
	for (int m = 1; m <= 2 && !r; m++)
		w->desc_primary[m - 1] = ext2fs_descriptor_block_loc2(fs, fs->super->s_first_data_block, m);
	blk64_t sb, old, nw;
	if (!r && 2 * w->dpb + 1 < w->ngroups && !ext2fs_super_and_bgd_loc2(fs, 2 * w->dpb + 1, &sb, &old, &nw, NULL))
		w->desc_backup = nw;
	if (!r && 2 * w->dpb - 1 < w->ngroups && !ext2fs_super_and_bgd_loc2(fs, 2 * w->dpb - 1, &sb, &old, &nw, NULL))
		w->desc_last_copy = nw;
	if (!r && !ext2fs_super_and_bgd_loc2(fs, w->ngroups - 1, &sb, &old, &nw, NULL))
		w->backup_sb = sb;
	if (!r && !ext2fs_super_and_bgd_loc2(fs, 3, &sb, &old, &nw, NULL))
		w->classic_copy = old;
	blk64_t g3 = ext2fs_group_first_block2(fs, 3);
	if (!r && !ext2fs_bg_has_super(fs, 3) && !ext2fs_test_block_bitmap2(fs->block_map, g3))
		w->no_sb_free = g3;
	w->desc_group = 2 * w->dpb + 2;
	ext2fs_close_free(&fs);
	return r;
}

/* ------------------------------------------------------------ edits */

enum edit { E_DEBUGFS, E_BACKUP_ITABLE };
enum { T_SCAN = 1 };

struct tcase {
	const char *inv;
	const char *what;
	enum edit edit;
	const char *cmd;      /* debugfs command, %llu: the location below (NULL: /f's
			       * first block pointer set to it) */
	size_t at;            /* offsetof(struct where, ...) of that location */
	unsigned flags;
};

#define AT(f) offsetof(struct where, f)
#define GROUP_AT (~(size_t)0)     /* the %llu is w->desc_group */

static const struct tcase meta_cases[] = {
	{ "INV_BGD_FREE_BLOCKS", "a count in metagroup 2's descriptor block", E_DEBUGFS,
	  "set_bg %llu free_blocks_count 3\n", GROUP_AT, 0 },
	{ "INV_BBITMAP_CLEAR", "metagroup 1's descriptor block freed", E_DEBUGFS, "freeb %llu\n",
	  AT(desc_primary[0]), 0 },
	{ "INV_BBITMAP_CLEAR", "metagroup 1's copy in its last group freed", E_DEBUGFS, "freeb %llu\n",
	  AT(desc_last_copy), 0 },
	/* a scan counts static blocks among those in use */
	{ "INV_PTR_MARKED", "metagroup 2's copy in its second group clear", E_DEBUGFS, "freeb %llu\n",
	  AT(desc_backup), T_SCAN },
	{ "INV_PTR_NOT_STATIC", "a file pointing at metagroup 2's descriptor block", E_DEBUGFS,
	  NULL, AT(desc_primary[1]), 0 },
	{ "INV_BACKUP_COPIES", "metagroup 2's copy names another inode table", E_BACKUP_ITABLE, NULL,
	  AT(desc_backup), 0 },
};

/* s_first_meta_bg 1: descriptor block 0 keeps the classic copies */
static const struct tcase first_meta_cases[] = {
	{ "INV_BBITMAP_CLEAR", "the classic copy of descriptor block 0 in group 3 freed", E_DEBUGFS,
	  "freeb %llu\n", AT(classic_copy), 0 },
	{ "INV_PTR_NOT_STATIC", "a file pointing at the classic copy in group 3", E_DEBUGFS, NULL,
	  AT(classic_copy), 0 },
};

static const struct tcase sparse2_cases[] = {
	{ "INV_BBITMAP_CLEAR", "the superblock copy in the last group freed", E_DEBUGFS, "freeb %llu\n",
	  AT(backup_sb), 0 },
	{ "INV_PTR_MARKED", "the superblock copy in the last group clear", E_DEBUGFS, "freeb %llu\n",
	  AT(backup_sb), T_SCAN },
	{ "INV_BBITMAP_SET", "group 3's first block (no copy under sparse_super2) set", E_DEBUGFS,
	  "setb %llu\n", AT(no_sb_free), 0 },
	{ "INV_PTR_NOT_STATIC", "a file pointing at the superblock copy in the last group", E_DEBUGFS,
	  NULL, AT(backup_sb), 0 },
};

/* the copy's first descriptor: its inode table one block on */
static int edit_backup_itable(const char *img, blk64_t blk)
{
	ext2_filsys fs;
	if (!blk || ext2fs_open(img, EXT2_FLAG_RW, 0, 0, unix_io_manager, &fs))
		return -1;
	uint8_t *b = malloc(fs->blocksize);
	int r = b && !io_channel_read_blk64(fs->io, blk, 1, b) ? 0 : -1;
	if (!r) {
		struct ext2_group_desc *d = (void *)b;
		d->bg_inode_table++;
		r = io_channel_write_blk64(fs->io, blk, 1, b) ? -1 : 0;
	}
	free(b);
	ext2fs_close_free(&fs);
	return r;
}

/* the group of blk and its descriptor's flags */
static int group_flags(const char *img, blk64_t blk, uint32_t *g, uint32_t *flags)
{
	ext2_filsys fs;
	if (ext2fs_open(img, 0, 0, 0, unix_io_manager, &fs))
		return -1;
	*g = ext2fs_group_of_blk2(fs, blk);
	*flags = ext2fs_bg_flags(fs, *g);
	ext2fs_close_free(&fs);
	return 0;
}

/* i_block word of /f holding its first block: an extent's ee_start_lo, or
 * the first direct pointer */
static const char *first_ptr = "block[1]";

static int apply(const char *img, const struct tcase *c, const struct where *w)
{
	unsigned long long at = c->at == GROUP_AT ? w->desc_group : *(const blk64_t *)((const char *)w + c->at);
	if (!at)
		return -1;      /* this geometry lacks the location */
	if (c->edit == E_BACKUP_ITABLE)
		return edit_backup_itable(img, at);
	char cmds[256], path[128];
	size_t k = 0;
	if (c->cmd && (!strncmp(c->cmd, "freeb", 5) || !strncmp(c->cmd, "setb", 4))) {
		/* libext2fs writes no bitmap for a BLOCK_UNINIT group: it goes first */
		uint32_t g, flags;
		if (group_flags(img, at, &g, &flags))
			return -1;
		if (flags & EXT2_BG_BLOCK_UNINIT)
			k = (size_t)snprintf(cmds, sizeof(cmds), "set_bg %u flags %u\n", g,
					     flags & ~EXT2_BG_BLOCK_UNINIT);
	}
	if (c->cmd)
		snprintf(cmds + k, sizeof(cmds) - k, c->cmd, at);
	else
		snprintf(cmds, sizeof(cmds), "sif /f %s %llu\n", first_ptr, at);
	snprintf(path, sizeof(path), "%s/edit", dir);
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(cmds, f);
	fclose(f);
	return run_shell("debugfs -w -f %s %s >/dev/null 2>&1", path, img) ? -1 : 0;
}

/* ------------------------------------------------------------ runs */

static void run_case(const char *base, const char *label, const struct tcase *c, const struct where *w)
{
	char after[128];
	snprintf(after, sizeof(after), "%s/after.img", dir);
	if (run_shell("cp %s %s", base, after) || apply(after, c, w)) {
		TEST_CHECK(0, "%s %s (%s): the edit failed", label, c->inv, c->what);
		return;
	}
	size_t na, nb;
	uint8_t *a = map_image(base, &na), *b = map_image(after, &nb);
	struct test_mem ma = { a, na }, mb = { b, nb };
	struct chk_fs *fs = NULL;
	struct chk_verdict *v = NULL;
	char err[256] = "";
	if (!a || !b || na != nb) {
		TEST_CHECK(0, "%s: cannot read the images", label);
	} else if (c->flags & T_SCAN) {
		if (chk_attach(&fs, test_mem_read, &mb, NULL, err, sizeof(err)) || chk_scan(fs, &v))
			TEST_CHECK(0, "%s %s: cannot scan the edited image: %s", label, c->inv, err);
		TEST_CHECK(e2fsck_fn(after, dir) != 0, "%s %s (%s): e2fsck -fn finds the edit clean", label,
			   c->inv, c->what);
	} else if (chk_attach(&fs, test_mem_read, &ma, NULL, err, sizeof(err))) {
		TEST_CHECK(0, "%s: cannot attach: %s", label, err);
	} else {
		v = check_pair(fs, a, b, na);
	}
	const char *detail = NULL;
	if (v && names(v, c->inv, &detail)) {
		printf("ok   %s %s (%s) %s: %s\n", label, c->inv, c->what, c->flags & T_SCAN ? "scan" : "transaction",
		       detail);
	} else if (v) {
		TEST_CHECK(0, "%s %s (%s): not detected", label, c->inv, c->what);
		dump(v);
	}
	chk_verdict_free(v);
	chk_detach(fs);
	unmap_image(a, na);
	unmap_image(b, nb);
}

/* a layout e2fsck repairs first: attach refuses it, naming want */
static void run_refusal(const char *base, const char *label, const char *cmds, const char *want)
{
	char after[128], path[128];
	snprintf(after, sizeof(after), "%s/after.img", dir);
	snprintf(path, sizeof(path), "%s/edit", dir);
	FILE *f = fopen(path, "w");
	if (!f || run_shell("cp %s %s", base, after)) {
		if (f)
			fclose(f);
		TEST_CHECK(0, "%s: cannot copy the image", label);
		return;
	}
	fputs(cmds, f);
	fclose(f);
	run_shell("debugfs -w -f %s %s >/dev/null 2>&1", path, after);
	size_t n;
	uint8_t *b = map_image(after, &n);
	struct test_mem m = { b, n };
	struct chk_fs *fs = NULL;
	char err[256] = "";
	int r = b ? chk_attach(&fs, test_mem_read, &m, NULL, err, sizeof(err)) : -ENOMEM;
	TEST_CHECK(r == -EINVAL && strstr(err, want), "%s (%s): attach gave %d \"%s\", want a refusal naming %s",
		   label, cmds, r, err, want);
	if (r == -EINVAL && strstr(err, want))
		printf("ok   %s refused at attach: %s\n", label, err);
	chk_detach(fs);
	unmap_image(b, n);
}

/* prep: debugfs commands making the layout mke2fs cannot, which e2fsck -fy
 * then makes consistent (NULL: none) */
static void run_base(const char *label, const char *mkfs, unsigned kb, const char *prep,
		     const struct tcase *cases, size_t n)
{
	char base[128];
	snprintf(base, sizeof(base), "%s/%s.img", dir, label);
	make_image_or_skip(base, mkfs, kb);
	if (prep)
		TEST_REQUIRE(run_shell("debugfs -w -R '%s' %s >/dev/null 2>&1 && "
				       "{ e2fsck -fy %s >/dev/null 2>&1; [ $? -le 1 ]; }", prep, base, base) == 0,
			     "%s: %s", label, prep);
	TEST_REQUIRE(run_shell("debugfs -w -R 'write /etc/services f' %s >/dev/null 2>&1", base) == 0,
		     "debugfs write");
	TEST_REQUIRE(e2fsck_fn(base, dir) == 0, "%s: the base image is not clean", label);
	first_ptr = strstr(mkfs, "ext4") ? "block[5]" : "block[1]";
	struct where w;
	TEST_REQUIRE(locate(base, &w) == 0, "%s: libext2fs cannot open the base image", label);
	/* the base scans clean */
	size_t len;
	uint8_t *img = map_image(base, &len);
	struct test_mem m = { img, len };
	struct chk_fs *fs = NULL;
	struct chk_verdict *v = NULL;
	char err[256] = "";
	if (!img || chk_attach(&fs, test_mem_read, &m, NULL, err, sizeof(err)) || chk_scan(fs, &v)) {
		TEST_CHECK(0, "%s: cannot attach to or scan the base: %s", label, err);
	} else {
		TEST_CHECK(chk_verdict_nviolations(v) == 0, "%s: the base scan finds problems", label);
		dump(v);
	}
	chk_verdict_free(v);
	chk_detach(fs);
	unmap_image(img, len);
	for (size_t i = 0; i < n; i++)
		run_case(base, label, &cases[i], &w);
	if (strstr(mkfs, "meta_bg")) {
		run_refusal(base, label, "ssv first_meta_bg 1000\n", "s_first_meta_bg");
		run_refusal(base, label, "feature resize_inode\n", "resize_inode");
	}
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/chk-layout-XXXXXX");
	TEST_REQUIRE(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	if (run_shell("command -v debugfs >/dev/null")) {
		fprintf(stderr, "SKIP: no debugfs\n");
		return 77;
	}
	/* 1 MiB groups at 1 KiB blocks, 16 descriptors a block: 6 metagroups */
	run_base("ext4-meta_bg-1k", "-t ext4 -b 1024 -g 1024 -N 1024 -O meta_bg,^resize_inode", 96 * 1024,
		 NULL, meta_cases, sizeof(meta_cases) / sizeof(meta_cases[0]));
	/* as an online resize leaves it: metagroup 0 in the classic layout
	 * (copies in groups 1, 3, 5, 7, 9), the others in meta_bg's */
	run_base("ext4-first_meta_bg-1", "-t ext4 -b 1024 -g 1024 -N 1024 -O meta_bg,^resize_inode", 96 * 1024,
		 "ssv first_meta_bg 1", first_meta_cases, sizeof(first_meta_cases) / sizeof(first_meta_cases[0]));
	/* 1 MiB groups at 4 KiB blocks, 128 descriptors a block: 3 metagroups */
	run_base("ext3-meta_bg-4k", "-t ext3 -b 4096 -g 256 -N 1024 -O meta_bg,^resize_inode", 320 * 1024,
		 NULL, meta_cases, sizeof(meta_cases) / sizeof(meta_cases[0]));
	/* copies in group 1 and the last of 48 */
	run_base("ext4-sparse_super2-1k", "-t ext4 -b 1024 -g 1024 -N 1024 -O sparse_super2 -E num_backup_sb=2",
		 48 * 1024, NULL, sparse2_cases, sizeof(sparse2_cases) / sizeof(sparse2_cases[0]));
	run_shell("rm -rf %s", dir);
	printf("layouts: %d failure(s)\n", failures);
	return failures ? 1 : 0;
}
