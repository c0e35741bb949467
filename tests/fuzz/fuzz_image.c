/*
 * tests/fuzz/fuzz_image.c - see fuzz_image.h.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ext2fs/ext2fs.h>

#include "fuzz_image.h"
#include "seeded_rng.h"

const char *const fz_class_name[FC_NCLASSES] = {
	"flip", "dirent", "htree", "xattr", "ind", "inode", "sb", "gdt", "jsb", "extent", "bgd64", "csumflip"
};

/* ------------------------------------------------------------ base images */

static int run(const char *cmd)
{
	int r = system(cmd);
	return WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

/* deterministic file contents (never all-zero blocks: debugfs makes those holes) */
static int write_file(const char *path, uint64_t size, const uint64_t (*data)[2], size_t nr, unsigned salt)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	if (fd < 0)
		return -1;
	int rc = ftruncate(fd, (off_t)size);
	uint8_t buf[4096];
	uint32_t x = salt * 2654435761u + 1;
	for (size_t i = 0; i < nr && !rc; i++)
		for (uint64_t off = data[i][0]; off < data[i][1] && !rc; off += sizeof(buf)) {
			for (size_t k = 0; k < sizeof(buf); k++)
				buf[k] = (uint8_t)((x = x * 1103515245u + 12345u) >> 16) | 1;
			size_t len = data[i][1] - off < sizeof(buf) ? (size_t)(data[i][1] - off) : sizeof(buf);
			rc = pwrite(fd, buf, len, (off_t)off) == (ssize_t)len ? 0 : -1;
		}
	close(fd);
	return rc;
}

bool fz_ext4;

/* Files whose extent trees have depth 1 and 2: one-block runs with a hole
 * after each, 12 runs and one more than an index root of leaves holds
 * (4 * (bs - 12) / 12). */
static int write_ext4_sources(const char *dir, uint32_t bs)
{
	uint32_t runs[2] = { 12, 4 * ((bs - 12) / 12) + 8 };
	for (int k = 0; k < 2; k++) {
		uint64_t (*r)[2] = calloc(runs[k], sizeof(*r));
		if (!r)
			return -1;
		for (uint32_t i = 0; i < runs[k]; i++) {
			r[i][0] = 2ull * i * bs;
			r[i][1] = r[i][0] + bs;
		}
		char path[512];
		snprintf(path, sizeof(path), "%s/frag%d", dir, k + 1);
		int rc = write_file(path, 2ull * runs[k] * bs, (const uint64_t (*)[2])r, runs[k], 4 + k);
		free(r);
		if (rc)
			return -1;
	}
	return 0;
}

int fz_make_base(const char *dir, uint32_t bs, int variant, char *path, size_t pathlen)
{
	char cmd[4096], f[512];
	snprintf(path, pathlen, "%s/base-%u-%d%s.img", dir, bs, variant, fz_ext4 ? "-ext4" : "");
	if (variant == 1) {
		char base0[512];
		if (fz_make_base(dir, bs, 0, base0, sizeof(base0)))
			return -1;
		snprintf(f, sizeof(f), "%s/legit.cmds", dir);
		FILE *c = fopen(f, "w");
		if (!c)
			return -1;
		fprintf(c, "rm d/fifo\nmkdir d/new\nwrite %s/small d/new/x\nln d/medium d/medium2\n"
			   "sif d/medium links_count 2\npunch d/sparse 300\n", dir);
		fclose(c);
		snprintf(cmd, sizeof(cmd),
			 "cp %s %s && E2FSPROGS_FAKE_TIME=1700000100 E2FSCK_TIME=1700000100 debugfs -w -f %s %s >/dev/null 2>&1"
			 " && e2fsck -fn %s >/dev/null 2>&1", base0, path, f, path, path);
		if (run(cmd)) {
			fprintf(stderr, "fuzz: cannot build the variant-1 image %s\n", path);
			return -1;
		}
		return 0;
	}
	/* sources: a small file, one crossing into the indirect range, a sparse
	 * one reaching the double (4 KiB) or triple (1 KiB) indirect range */
	uint64_t k = 1024, m = 1024 * 1024;
	const uint64_t small[][2] = { { 0, 700 } };
	const uint64_t medium[][2] = { { 0, bs == 1024 ? 300 * k : 80 * k } };
	const uint64_t sparse[][2] = { { 5 * k, 9 * k }, { 200 * k, 210 * k }, { 5 * m, 5 * m + 8 * k },
				       { 70 * m, 70 * m + 3 * k } };
	char s1[512], s2[512], s3[512], xv[512];
	snprintf(s1, sizeof(s1), "%s/small", dir);
	snprintf(s2, sizeof(s2), "%s/medium", dir);
	snprintf(s3, sizeof(s3), "%s/sparse", dir);
	snprintf(xv, sizeof(xv), "%s/xattr-value", dir);
	if (write_file(s1, 700, small, 1, 1) || write_file(s2, medium[0][1], medium, 1, 2) ||
	    write_file(s3, 70 * m + 3 * k, sparse, 4, 3))
		return -1;
	FILE *xf = fopen(xv, "w");
	if (!xf)
		return -1;
	for (int i = 0; i < 300; i++)
		fputc('a' + i % 26, xf);
	fclose(xf);
	if (fz_ext4 && write_ext4_sources(dir, bs))
		return -1;
	snprintf(f, sizeof(f), "%s/base.cmds", dir);
	FILE *c = fopen(f, "w");
	if (!c)
		return -1;
	fprintf(c, "mkdir d\nmkdir d/sub\nmkdir h\nwrite %s d/small\nwrite %s d/medium\nwrite %s d/sparse\n"
		   "symlink d/fast /short/target\n"
		   "symlink d/slow /a/long/target/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n"
		   "cd d\nmknod fifo p\ncd /\nea_set -f %s d/small user.big\nea_set d/sub user.tiny 1\ncd h\n",
		s1, s2, s3, xv);
	if (fz_ext4)
		fprintf(c, "cd /\nwrite %s/frag1 d/frag1\nwrite %s/frag2 d/frag2\nwrite %s d/prealloc\n"
			   "fallocate d/prealloc 0 %u\ncd h\n", dir, dir, s1, bs == 1024 ? 40u : 12u);
	int nent = bs == 1024 ? 90 : 400;     /* enough for an index root and leaves */
	for (int i = 0; i < nent; i++)
		fprintf(c, "mknod entry_number_%d p\n", i);
	fclose(c);
	snprintf(cmd, sizeof(cmd),
		 "export E2FSPROGS_FAKE_TIME=1700000000 E2FSCK_TIME=1700000000; rm -f %s; "
		 "mke2fs -q -F -t %s -b %u -g %u -N 512 -I %u -J size=%u -U 6b33f585-5a3e-4d4b-8c3f-1c0d5e3a9b21 "
		 "-E hash_seed=0d1f0b7e-42a4-4c59-9a0c-5e0a5c9b6f3d,nodiscard,lazy_itable_init=0 %s %s >/dev/null 2>&1"
		 " && debugfs -w -f %s %s >/dev/null 2>&1"
		 " && { e2fsck -fyD %s >/dev/null 2>&1; [ $? -le 1 ]; } && e2fsck -fn %s >/dev/null 2>&1",
		 path, fz_ext4 ? "ext4" : "ext3", bs, bs == 1024 ? 1024u : 2048u, bs == 1024 ? 128u : 256u,
		 bs == 1024 ? 1u : 4u, path, bs == 1024 ? (fz_ext4 ? "6M" : "4M") : (fz_ext4 ? "32M" : "16M"),
		 f, path, path, path);
	if (run(cmd)) {
		fprintf(stderr, "fuzz: cannot build the base image %s\n", path);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ metadata list */

struct collect {
	struct fz_image *im;
	ext2_filsys fs;
	ext2_ino_t ino;
	bool indexed, journal, extents;
	size_t cap;
	int err;
};

static void add_meta(struct collect *c, uint64_t blk, uint8_t kind, uint32_t ino)
{
	struct fz_image *im = c->im;
	if (im->nmeta == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 256;
		struct fz_block *n = realloc(im->meta, c->cap * sizeof(*n));
		if (!n) {
			c->err = -1;
			return;
		}
		im->meta = n;
	}
	im->meta[im->nmeta++] = (struct fz_block){ blk, kind, ino };
}

static int collect_block(ext2_filsys fs, blk64_t *blocknr, e2_blkcnt_t blockcnt, blk64_t ref_blk,
			 int ref_offset, void *priv)
{
	(void)fs; (void)ref_blk; (void)ref_offset;
	struct collect *c = priv;
	if (c->extents && blockcnt < 0)           /* extent tree blocks come as -1 */
		add_meta(c, *blocknr, FZ_EXTENT, c->ino);
	else if (blockcnt == BLOCK_COUNT_IND)
		add_meta(c, *blocknr, FZ_IND, c->ino);
	else if (blockcnt == BLOCK_COUNT_DIND)
		add_meta(c, *blocknr, FZ_DIND, c->ino);
	else if (blockcnt == BLOCK_COUNT_TIND)
		add_meta(c, *blocknr, FZ_TIND, c->ino);
	else if (c->journal) {
		if (blockcnt == 0)
			add_meta(c, *blocknr, FZ_JSB, c->ino);
	} else if (c->indexed) {
		const uint8_t *d = c->im->data + *blocknr * c->im->bs;
		uint32_t ino0;
		uint16_t rl;
		memcpy(&ino0, d, 4);
		memcpy(&rl, d + 4, 2);
		add_meta(c, *blocknr, blockcnt == 0 ? FZ_HTREE_ROOT : ino0 == 0 && rl == c->im->bs ? FZ_HTREE_NODE : FZ_DIR,
			 c->ino);
	}                                         /* (file data blocks are not metadata) */
	return 0;
}

static int collect_dir_block(ext2_filsys fs, blk64_t *blocknr, e2_blkcnt_t blockcnt, blk64_t ref_blk,
			     int ref_offset, void *priv)
{
	struct collect *c = priv;
	if (blockcnt >= 0 && !c->indexed) {
		add_meta(c, *blocknr, FZ_DIR, c->ino);
		return 0;
	}
	return collect_block(fs, blocknr, blockcnt, ref_blk, ref_offset, priv);
}

int fz_load(const char *path, struct fz_image *im)
{
	memset(im, 0, sizeof(*im));
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	fseek(f, 0, SEEK_END);
	im->size = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	im->data = malloc(im->size);
	if (!im->data || fread(im->data, 1, im->size, f) != im->size) {
		fclose(f);
		return -1;
	}
	fclose(f);
	ext2_filsys fs;
	if (ext2fs_open(path, 0, 0, 0, unix_io_manager, &fs))
		return -1;
	if (ext2fs_read_bitmaps(fs)) {
		ext2fs_close_free(&fs);
		return -1;
	}
	im->bs = fs->blocksize;
	im->blocks_count = (uint32_t)ext2fs_blocks_count(fs->super);
	im->inodes_count = fs->super->s_inodes_count;
	im->inode_size = EXT2_INODE_SIZE(fs->super);
	im->inodes_per_group = fs->super->s_inodes_per_group;
	im->blocks_per_group = fs->super->s_blocks_per_group;
	im->groups = fs->group_desc_count;
	im->desc_size = EXT2_DESC_SIZE(fs->super);
	im->first_data_block = fs->super->s_first_data_block;
	im->metadata_csum = ext2fs_has_feature_metadata_csum(fs->super);
	im->csum_seed = fs->csum_seed;
	for (dgrp_t g = 0; g < fs->group_desc_count && g < 64; g++) {
		im->itable[g] = ext2fs_inode_table_loc(fs, g);
		im->bg_flags[g] = ext2fs_bg_flags(fs, g);
	}
	struct collect c = { im, fs, 0, false, false, false, 0, 0 };
	add_meta(&c, 1024 / im->bs, FZ_SB, 0);
	for (dgrp_t g = 0; g < fs->group_desc_count; g++) {
		blk64_t sb = 0, old_desc = 0, new_desc = 0;
		blk_t used = 0;
		ext2fs_super_and_bgd_loc2(fs, g, &sb, &old_desc, &new_desc, &used);
		if (g && sb)
			add_meta(&c, sb, FZ_SB, g);
		for (blk_t i = 0; old_desc && i < fs->desc_blocks; i++)
			add_meta(&c, old_desc + i, FZ_GDT, g);
		add_meta(&c, ext2fs_block_bitmap_loc(fs, g), FZ_BBITMAP, g);
		add_meta(&c, ext2fs_inode_bitmap_loc(fs, g), FZ_IBITMAP, g);
	}
	for (ext2_ino_t ino = 1; ino <= fs->super->s_inodes_count; ino++) {
		if (!ext2fs_test_inode_bitmap2(fs->inode_map, ino))
			continue;
		struct ext2_inode in;
		if (ext2fs_read_inode(fs, ino, &in))
			continue;
		dgrp_t g = (ino - 1) / fs->super->s_inodes_per_group;
		uint32_t idx = (ino - 1) % fs->super->s_inodes_per_group;
		uint64_t off = ext2fs_inode_table_loc(fs, g) * im->bs + (uint64_t)idx * im->inode_size;
		if ((ino == EXT2_ROOT_INO || ino >= EXT2_FIRST_INO(fs->super)) && im->nused < FZ_MAX_INODES) {
			im->used_inodes[im->nused] = ino;
			im->inode_off[im->nused++] = off;
			add_meta(&c, off / im->bs, FZ_ITABLE, ino);
		}
		if (in.i_file_acl)
			add_meta(&c, in.i_file_acl, FZ_XATTR, ino);
		if (ino == EXT2_RESIZE_INO || (ino < EXT2_FIRST_INO(fs->super) && ino != EXT2_ROOT_INO &&
					       ino != EXT2_JOURNAL_INO))
			continue;
		if (!ext2fs_inode_has_valid_blocks2(fs, &in))
			continue;
		c.ino = ino;
		c.journal = ino == EXT2_JOURNAL_INO;
		c.indexed = LINUX_S_ISDIR(in.i_mode) && (in.i_flags & EXT2_INDEX_FL);
		c.extents = in.i_flags & EXT4_EXTENTS_FL;
		ext2fs_block_iterate3(fs, ino, BLOCK_FLAG_READ_ONLY, NULL,
				      LINUX_S_ISDIR(in.i_mode) ? collect_dir_block : collect_block, &c);
	}
	ext2fs_close_free(&fs);
	return c.err;
}

void fz_free(struct fz_image *im)
{
	free(im->data);
	free(im->meta);
	memset(im, 0, sizeof(*im));
}

/* ------------------------------------------------------------ mutations */

static uint64_t next(uint64_t *s) { return seeded_next(s); }
uint64_t fz_next(uint64_t *s) { return next(s); }
static uint32_t below(uint64_t *s, uint32_t n) { return n ? (uint32_t)(next(s) % n) : 0; }
uint32_t fz_below(uint64_t *s, uint32_t n) { return below(s, n); }

static void edit(struct fz_mutant *m, uint64_t off, const void *p, uint16_t plen, uint16_t rep)
{
	if (m->nedits >= FZ_MAX_EDITS || plen > sizeof(m->edits[0].pat))
		return;
	struct fz_edit *e = &m->edits[m->nedits++];
	e->off = off;
	e->plen = plen;
	e->rep = rep ? rep : 1;
	memcpy(e->pat, p, plen);
}

static void edit_le(struct fz_mutant *m, uint64_t off, uint64_t v, unsigned size)
{
	uint8_t b[8];
	for (unsigned i = 0; i < size; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	edit(m, off, b, (uint16_t)size, 1);
}

void fz_edit_le(struct fz_mutant *m, uint64_t off, uint64_t v, unsigned size) { edit_le(m, off, v, size); }

static void edit_be32(struct fz_mutant *m, uint64_t off, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v };
	edit(m, off, b, 4, 1);
}

/* a value worth trying for a field of the image (sizes, counts, block numbers) */
static uint32_t interesting(const struct fz_image *im, uint64_t *s, uint32_t cur)
{
	uint32_t bc = im->blocks_count, ic = im->inodes_count, bs = im->bs;
	const uint32_t v[] = { 0, 1, 2, 3, 4, 7, 8, 9, 11, 12, 0x7f, 0x80, 0xff, 0x100, 0xfff, 0x1000, 0x7fff,
			       0x8000, 0xffff, 0x10000, bs - 1, bs, bs + 1, bc - 1, bc, bc + 1, ic, ic + 1,
			       0x0fffffff, 0x7fffffff, 0x80000000u, 0xfffffffeu, 0xffffffffu, cur + 1, cur - 1,
			       cur ^ (1u << below(s, 32)), (uint32_t)next(s) };
	return v[below(s, sizeof(v) / sizeof(v[0]))];
}

uint32_t fz_interesting(const struct fz_image *im, uint64_t *s, uint32_t cur) { return interesting(im, s, cur); }

static const struct fz_block *pick(const struct fz_image *im, uint64_t *s, const uint8_t *kinds, size_t nk);
const struct fz_block *fz_pick(const struct fz_image *im, uint64_t *s, const uint8_t *kinds, size_t nk)
{
	return pick(im, s, kinds, nk);
}
static const struct fz_block *pick(const struct fz_image *im, uint64_t *s, const uint8_t *kinds, size_t nk)
{
	size_t n = 0;
	for (size_t i = 0; i < im->nmeta; i++)
		for (size_t k = 0; k < nk; k++)
			n += im->meta[i].kind == kinds[k];
	if (!n)
		return NULL;
	size_t want = below(s, (uint32_t)n);
	for (size_t i = 0; i < im->nmeta; i++)
		for (size_t k = 0; k < nk; k++)
			if (im->meta[i].kind == kinds[k] && !want--)
				return &im->meta[i];
	return NULL;
}

static uint32_t ld32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint16_t ld16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }

/* byte offsets of the entries of a directory block (well-formed prefix) */
static size_t dir_entries(const struct fz_image *im, uint64_t blk, uint32_t *offs, size_t max)
{
	const uint8_t *d = im->data + blk * im->bs;
	size_t n = 0;
	for (uint32_t off = 0; off + 8 <= im->bs && n < max;) {
		uint16_t rl = ld16(d + off + 4);
		if (rl < 8 || off + rl > im->bs)
			break;
		offs[n++] = off;
		off += rl;
	}
	return n;
}

static void draw_flip(const struct fz_image *im, uint64_t *s, struct fz_mutant *m)
{
	const struct fz_block *b = &im->meta[below(s, (uint32_t)im->nmeta)];
	unsigned n = 1 + below(s, 4);
	for (unsigned i = 0; i < n; i++) {
		uint64_t off = b->blk * im->bs + below(s, im->bs);
		uint8_t x = im->data[off] ^ (uint8_t)(1 + below(s, 255));
		edit(m, off, &x, 1, 1);
	}
}

static void draw_dirent(const struct fz_image *im, uint64_t *s, struct fz_mutant *m)
{
	static const uint8_t kinds[] = { FZ_DIR, FZ_HTREE_ROOT };
	const struct fz_block *b = pick(im, s, kinds, 2);
	if (!b)
		return;
	uint32_t offs[512];
	size_t n = dir_entries(im, b->blk, offs, 512);
	if (!n)
		return;
	/* the last entry is the interesting one (name_len vs rec_len) half the time */
	uint32_t off = below(s, 2) ? offs[n - 1] : offs[below(s, (uint32_t)n)];
	uint64_t at = b->blk * im->bs + off;
	const uint8_t *d = im->data + at;
	uint16_t rl = ld16(d + 4);
	switch (below(s, 6)) {
	case 0: {                                 /* rec_len */
		const uint16_t v[] = { 0, 4, 8, 9, 10, 12, (uint16_t)(rl + 1), (uint16_t)(rl - 1), (uint16_t)(rl + 2),
				       (uint16_t)(rl + 4), (uint16_t)(rl - 4), (uint16_t)im->bs,
				       (uint16_t)(im->bs - off + 4), 0xffff, (uint16_t)next(s) };
		edit_le(m, at + 4, v[below(s, sizeof(v) / 2)], 2);
		break;
	}
	case 1: {                                 /* name_len past rec_len */
		const uint8_t v[] = { 0, 1, 255, (uint8_t)(rl - 8 + 1), (uint8_t)(rl - 7), (uint8_t)(rl - 8 + 4),
				      (uint8_t)next(s) };
		uint8_t x = v[below(s, sizeof(v))];
		edit(m, at + 6, &x, 1, 1);
		break;
	}
	case 2:                                   /* inode */
		edit_le(m, at, interesting(im, s, ld32(d)), 4);
		break;
	case 3: {                                 /* file type */
		uint8_t x = (uint8_t)below(s, 10);
		edit(m, at + 7, &x, 1, 1);
		break;
	}
	case 4: {                                 /* a name byte: '/', NUL, '.', a sibling's */
		const uint8_t v[] = { '/', 0, '.', 'a', 0xff };
		uint8_t x = v[below(s, sizeof(v))];
		edit(m, at + 8 + below(s, d[6] ? d[6] : 1), &x, 1, 1);
		break;
	}
	default:                                  /* both lengths at once */
		edit_le(m, at + 4, (uint16_t)(8 + below(s, 40)), 2);
		{
			uint8_t x = (uint8_t)below(s, 64);
			edit(m, at + 6, &x, 1, 1);
		}
	}
}

static void draw_htree(const struct fz_image *im, uint64_t *s, struct fz_mutant *m)
{
	static const uint8_t kinds[] = { FZ_HTREE_ROOT, FZ_HTREE_NODE };
	const struct fz_block *b = pick(im, s, kinds, 2);
	if (!b)
		return;
	bool root = b->kind == FZ_HTREE_ROOT;
	uint64_t base = b->blk * im->bs;
	uint32_t cl = root ? 32 : 8;
	uint16_t count = ld16(im->data + base + cl + 2), limit = ld16(im->data + base + cl);
	unsigned n = 1 + below(s, 2);
	for (unsigned i = 0; i < n; i++) {
		switch (below(s, root ? 7 : 5)) {
		case 0:
			edit_le(m, base + cl + 2, below(s, 2) ? interesting(im, s, count) & 0xffff : count + 1u, 2);
			break;
		case 1:
			edit_le(m, base + cl, below(s, 2) ? interesting(im, s, limit) & 0xffff : limit - 1u, 2);
			break;
		case 2: {                         /* a dx_entry's block */
			uint32_t e = count ? below(s, count) : 0;
			edit_le(m, base + cl + 8 * e + 4, interesting(im, s, ld32(im->data + base + cl + 8 * e + 4)), 4);
			break;
		}
		case 3: {                         /* a dx_entry's hash */
			uint32_t e = 1 + (count > 1 ? below(s, count - 1) : 0);
			edit_le(m, base + cl + 8 * e, (uint32_t)next(s), 4);
			break;
		}
		case 4:                           /* the fake entry's rec_len */
			edit_le(m, base + 4, interesting(im, s, im->bs) & 0xffff, 2);
			break;
		case 5: {                         /* root info: hash_version, info_length, levels */
			uint8_t x = (uint8_t)interesting(im, s, 0);
			edit(m, base + 28 + below(s, 4), &x, 1, 1);
			break;
		}
		default:                          /* reserved_zero */
			edit_le(m, base + 24, interesting(im, s, 0), 4);
		}
	}
}

static void draw_xattr(const struct fz_image *im, uint64_t *s, struct fz_mutant *m)
{
	static const uint8_t kinds[] = { FZ_XATTR };
	const struct fz_block *b = pick(im, s, kinds, 1);
	if (!b)
		return;
	uint64_t base = b->blk * im->bs;
	/* entries from byte 32, each 16 bytes + name rounded to 4 */
	uint32_t offs[64], n = 0;
	for (uint32_t off = 32; off + 16 <= im->bs && n < 64 && ld32(im->data + base + off); ) {
		offs[n++] = off;
		off += (16 + im->data[base + off] + 3) & ~3u;
	}
	uint32_t e = n ? offs[below(s, n)] : 32;
	switch (below(s, 8)) {
	case 0: edit_le(m, base, interesting(im, s, 0xEA020000), 4); break;          /* h_magic */
	case 1: edit_le(m, base + 4, interesting(im, s, 1), 4); break;               /* h_refcount */
	case 2: edit_le(m, base + 8, interesting(im, s, 1), 4); break;               /* h_blocks */
	case 3: {                                                                       /* e_name_len */
		uint8_t x = (uint8_t)interesting(im, s, im->data[base + e]);
		edit(m, base + e, &x, 1, 1);
		break;
	}
	case 4: edit_le(m, base + e + 2, interesting(im, s, ld16(im->data + base + e + 2)) & 0xffff, 2); break;
	case 5: edit_le(m, base + e + 4, interesting(im, s, 0), 4); break;           /* e_value_inum */
	case 6: edit_le(m, base + e + 8, interesting(im, s, ld32(im->data + base + e + 8)), 4); break;
	default: {                                                                      /* the end marker */
		uint32_t end = n ? offs[n - 1] + ((16 + im->data[base + offs[n - 1]] + 3) & ~3u) : 32;
		if (end + 4 <= im->bs)
			edit_le(m, base + end, (uint32_t)next(s) | 1, 4);
	}
	}
}

static void draw_ind(const struct fz_image *im, uint64_t *s, struct fz_mutant *m)
{
	static const uint8_t kinds[] = { FZ_IND, FZ_DIND, FZ_TIND };
	const struct fz_block *b = pick(im, s, kinds, 3);
	if (!b)
		return;
	uint64_t base = b->blk * im->bs;
	uint32_t a = im->bs / 4;
	uint32_t v;
	const struct fz_block *other = &im->meta[below(s, (uint32_t)im->nmeta)];
	switch (below(s, 6)) {
	case 0: v = (uint32_t)b->blk; break;                /* itself */
	case 1: v = (uint32_t)other->blk; break;            /* some other metadata block */
	case 2: v = 0; break;
	default: v = interesting(im, s, ld32(im->data + base + 4 * below(s, a)));
	}
	if (below(s, 4) == 0) {
		/* every slot the same block: the walk must stay linear */
		uint8_t p[4];
		memcpy(p, &v, 4);
		edit(m, base, p, 4, (uint16_t)a);
	} else {
		uint32_t slot = below(s, 3) ? below(s, a) : below(s, 4);
		edit_le(m, base + 4 * slot, v, 4);
	}
}

static void draw_inode(const struct fz_image *im, uint64_t *s, struct fz_mutant *m)
{
	if (!im->nused)
		return;
	uint32_t k = below(s, (uint32_t)im->nused);
	uint64_t at = im->inode_off[k];
	const uint8_t *in = im->data + at;
	static const struct { uint16_t off, size; } f[] = {
		{ 0, 2 },   /* i_mode */       { 4, 4 },   /* i_size */      { 20, 4 },  /* i_dtime */
		{ 26, 2 },  /* i_links */      { 28, 4 },  /* i_blocks */    { 32, 4 },  /* i_flags */
		{ 40, 4 },  /* i_block[0] */   { 84, 4 },  /* i_block[11] */ { 88, 4 },  /* i_block[12] */
		{ 92, 4 },  /* i_block[13] */  { 96, 4 },  /* i_block[14] */ { 104, 4 }, /* i_file_acl */
		{ 108, 4 }, /* i_size_high */  { 128, 2 }, /* i_extra_isize */
	};
	unsigned n = 1 + below(s, 2);
	for (unsigned i = 0; i < n; i++) {
		unsigned j = below(s, sizeof(f) / sizeof(f[0]));
		if (f[j].off + f[j].size > im->inode_size)
			continue;
		uint32_t cur = f[j].size == 2 ? ld16(in + f[j].off) : ld32(in + f[j].off);
		uint32_t v;
		if (f[j].off == 0 && below(s, 2))
			v = (cur & 07777) | (uint32_t)(below(s, 16) << 12);     /* another file type */
		else if (f[j].off == 32 && below(s, 2))
			v = cur ^ (1u << below(s, 32));
		else if (f[j].off >= 40 && f[j].off <= 104 && below(s, 2))
			v = (uint32_t)im->meta[below(s, (uint32_t)im->nmeta)].blk;
		else
			v = interesting(im, s, cur);
		edit_le(m, at + f[j].off, v, f[j].size);
	}
}

static void draw_sb(const struct fz_image *im, uint64_t *s, struct fz_mutant *m)
{
	static const struct { uint16_t off, size; } f[] = {
		{ 0, 4 }, { 4, 4 }, { 8, 4 }, { 12, 4 }, { 16, 4 }, { 20, 4 }, { 24, 4 }, { 28, 4 }, { 32, 4 },
		{ 36, 4 }, { 40, 4 }, { 56, 2 }, { 58, 2 }, { 76, 4 }, { 84, 4 }, { 88, 2 }, { 92, 4 }, { 96, 4 },
		{ 100, 4 }, { 206, 2 }, { 224, 4 }, { 232, 4 }, { 252, 1 }, { 352, 2 },
	};
	/* the primary mostly; a backup sometimes */
	static const uint8_t kinds[] = { FZ_SB };
	const struct fz_block *b = below(s, 4) ? NULL : pick(im, s, kinds, 1);
	uint64_t base = b && b->ino ? b->blk * im->bs : 1024;
	unsigned j = below(s, sizeof(f) / sizeof(f[0]));
	const uint8_t *p = im->data + base + f[j].off;
	uint32_t cur = f[j].size == 1 ? p[0] : f[j].size == 2 ? ld16(p) : ld32(p);
	edit_le(m, base + f[j].off, interesting(im, s, cur), f[j].size);
}

static void draw_gdt(const struct fz_image *im, uint64_t *s, struct fz_mutant *m)
{
	static const uint8_t kinds[] = { FZ_GDT };
	const struct fz_block *b = pick(im, s, kinds, 1);
	if (!b)
		return;
	uint32_t ngroups = (im->blocks_count - (im->bs == 1024) + 8 * im->bs - 1) / (8 * im->bs);
	(void)ngroups;
	uint64_t at = b->blk * im->bs + 32 * below(s, 4);
	static const struct { uint16_t off, size; } f[] = {
		{ 0, 4 }, { 4, 4 }, { 8, 4 }, { 12, 2 }, { 14, 2 }, { 16, 2 }, { 18, 2 },
	};
	unsigned j = below(s, sizeof(f) / sizeof(f[0]));
	const uint8_t *p = im->data + at + f[j].off;
	edit_le(m, at + f[j].off, interesting(im, s, f[j].size == 2 ? ld16(p) : ld32(p)), f[j].size);
}

static void draw_jsb(const struct fz_image *im, uint64_t *s, struct fz_mutant *m)
{
	static const uint8_t kinds[] = { FZ_JSB };
	const struct fz_block *b = pick(im, s, kinds, 1);
	if (!b)
		return;
	static const uint16_t offs[] = { 0, 4, 12, 16, 20, 24, 28, 36, 40, 44, 64 };
	uint64_t at = b->blk * im->bs + offs[below(s, sizeof(offs) / sizeof(offs[0]))];
	const uint8_t *p = im->data + at;
	uint32_t cur = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
	edit_be32(m, at, interesting(im, s, cur));
}

void fz_draw(const struct fz_image *im, int cls, uint64_t seed, struct fz_mutant *m)
{
	uint64_t s = seed * 0x2545F4914F6CDD1Dull + (uint64_t)cls;
	m->bs = im->bs;
	m->seed = seed;
	m->cls = cls;
	m->nedits = 0;
	/* a few tries: some classes find no target in a draw */
	for (int tries = 0; tries < 8 && m->nedits == 0; tries++) {
		switch (cls) {
		case FC_FLIP:   draw_flip(im, &s, m); break;
		case FC_DIRENT: draw_dirent(im, &s, m); break;
		case FC_HTREE:  draw_htree(im, &s, m); break;
		case FC_XATTR:  draw_xattr(im, &s, m); break;
		case FC_IND:    draw_ind(im, &s, m); break;
		case FC_INODE:  draw_inode(im, &s, m); break;
		case FC_SB:     draw_sb(im, &s, m); break;
		case FC_GDT:    draw_gdt(im, &s, m); break;
		case FC_JSB:    draw_jsb(im, &s, m); break;
		case FC_EXTENT: fz_draw_extent(im, &s, m); break;
		case FC_BGD64:  fz_draw_bgd64(im, &s, m); break;
		default:        fz_draw_csumflip(im, &s, m); break;
		}
	}
}

void fz_apply(const struct fz_mutant *m, uint8_t *buf, size_t size)
{
	for (size_t i = 0; i < m->nedits; i++) {
		const struct fz_edit *e = &m->edits[i];
		for (uint32_t r = 0; r < e->rep; r++) {
			uint64_t at = e->off + (uint64_t)r * e->plen;
			if (at + e->plen <= size)
				memcpy(buf + at, e->pat, e->plen);
		}
	}
}

void fz_describe(const struct fz_mutant *m, char *out, size_t len)
{
	size_t k = (size_t)snprintf(out, len, "bs=%u v=%d seed=%" PRIu64 " class=%s edits=", m->bs, m->variant,
				    m->seed, fz_class_name[m->cls]);
	for (size_t i = 0; i < m->nedits && k < len; i++) {
		const struct fz_edit *e = &m->edits[i];
		k += (size_t)snprintf(out + k, len - k, "%s%" PRIu64 ":", i ? "," : "", e->off);
		for (unsigned j = 0; j < e->plen && k < len; j++)
			k += (size_t)snprintf(out + k, len - k, "%02x", e->pat[j]);
		if (e->rep > 1 && k < len)
			k += (size_t)snprintf(out + k, len - k, "*%u", e->rep);
	}
}

int fz_parse(const char *desc, struct fz_mutant *m)
{
	memset(m, 0, sizeof(*m));
	char cls[32];
	int pos = 0;
	if (sscanf(desc, "bs=%u v=%d seed=%" SCNu64 " class=%31s edits=%n", &m->bs, &m->variant, &m->seed, cls,
		   &pos) < 4 || !pos)
		return -1;
	m->cls = -1;
	for (int i = 0; i < FC_NCLASSES; i++)
		if (!strcmp(cls, fz_class_name[i]))
			m->cls = i;
	if (m->cls < 0 || (m->bs != 1024 && m->bs != 4096) || (m->variant != 0 && m->variant != 1))
		return -1;
	const char *p = desc + pos;
	while (*p && *p != '\n' && m->nedits < FZ_MAX_EDITS) {
		struct fz_edit *e = &m->edits[m->nedits];
		char *end;
		e->off = strtoull(p, &end, 10);
		if (*end != ':')
			return -1;
		p = end + 1;
		e->plen = 0;
		while (isxdigit((unsigned char)p[0]) && isxdigit((unsigned char)p[1]) && e->plen < sizeof(e->pat)) {
			unsigned x;
			sscanf(p, "%2x", &x);
			e->pat[e->plen++] = (uint8_t)x;
			p += 2;
		}
		e->rep = 1;
		if (*p == '*') {
			e->rep = (uint16_t)strtoul(p + 1, &end, 10);
			p = end;
		}
		if (!e->plen || !e->rep)
			return -1;
		m->nedits++;
		if (*p == ',')
			p++;
		else
			break;
	}
	return 0;
}
