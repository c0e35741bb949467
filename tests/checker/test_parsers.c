/*
 * tests/checker/test_parsers.c - the checker's parsers of untrusted bytes,
 * one case per class of defect: each case corrupts a copy of the fuzzers'
 * small populated image (tests/fuzz/fuzz_image.c) and requires that
 *   - the transaction base -> corrupt is rejected naming the expected
 *     invariant, and
 *   - attaching to the corrupt image is refused (superblock cases) or its
 *     scan reports the expected invariant,
 * within a time bound.  Under the ASan+UBSan build (tests/run) any read past
 * a buffer or misaligned load aborts the test.
 *
 *   test_parsers [CASE]      every case (or one) at 1 KiB and 4 KiB blocks
 * Exit 0 pass, 1 fail, 77 skip (no mke2fs/debugfs/e2fsck).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <ext2fs/ext2_fs.h>

#include "checker.h"
#include "fuzz_image.h"
#include "test_util.h"

static int failures;
#define FAIL(...) do { fprintf(stderr, "FAIL: " __VA_ARGS__); fputc('\n', stderr); failures++; } while (0)

static uint32_t ld32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint16_t ld16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static void st32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void st16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

static bool has(const struct chk_verdict *v, const char *id)
{
	for (size_t i = 0; i < chk_verdict_nviolations(v); i++)
		if (!strcmp(chk_verdict_violation(v, i)->inv->id, id))
			return true;
	return false;
}

static void dump(const struct chk_verdict *v)
{
	for (size_t i = 0; i < chk_verdict_nviolations(v) && i < 8; i++)
		fprintf(stderr, "   %s: %s\n", chk_verdict_violation(v, i)->inv->id, chk_verdict_violation(v, i)->detail);
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static const struct fz_block *find(const struct fz_image *im, uint8_t kind, uint32_t not_ino)
{
	for (size_t i = 0; i < im->nmeta; i++)
		if (im->meta[i].kind == kind && im->meta[i].ino != not_ino)
			return &im->meta[i];
	return NULL;
}

/* a leaf of the indexed directory (a directory block of the root's owner
 * that is not an index node) */
static const struct fz_block *htree_leaf(const struct fz_image *im)
{
	const struct fz_block *root = find(im, FZ_HTREE_ROOT, 0);
	if (!root)
		return NULL;
	for (size_t i = 0; i < im->nmeta; i++)
		if (im->meta[i].kind == FZ_DIR && im->meta[i].ino == root->ino)
			return &im->meta[i];
	return NULL;
}

/* offset of the last entry of a directory block */
static uint32_t last_entry(const uint8_t *d, uint32_t bs)
{
	uint32_t off = 0;
	for (;;) {
		uint16_t rl = ld16(d + off + 4);
		if (rl < 8 || off + rl >= bs)
			return off;
		off += rl;
	}
}

enum expect_attach { ATTACHES, REFUSED };

struct pcase {
	const char *name;
	const char *inv;                   /* expected in the transaction's verdict (NULL: any rejection) */
	const char *scan_inv;              /* expected in the scan (NULL: the attach is refused) */
	/* corrupts img (a copy of im's data); false if the image lacks the target */
	bool (*corrupt)(const struct fz_image *im, uint8_t *img);
};

/* An htree leaf whose last entry's name runs past its rec_len and the block. */
static bool c_leaf_name_past_block(const struct fz_image *im, uint8_t *img)
{
	const struct fz_block *b = htree_leaf(im);
	if (!b)
		return false;
	uint8_t *d = img + b->blk * im->bs;
	uint32_t off = last_entry(d, im->bs), need = (8 + d[off + 6] + 3) & ~3u;
	uint32_t tail = im->bs - 12;
	if (off + need > tail)
		return false;
	st16(d + off + 4, (uint16_t)(tail - off));          /* the last entry ends 12 bytes early */
	st32(d + tail, ld32(d + off));                      /* a new entry there: same inode */
	st16(d + tail + 4, 12);
	d[tail + 6] = 200;                                  /* name_len 200 > rec_len - 8 */
	d[tail + 7] = d[off + 7];
	return true;
}

/* An htree leaf's first entry with a rec_len that is not a multiple of 4
 * (the next header would be misaligned). */
static bool c_leaf_rec_len_unaligned(const struct fz_image *im, uint8_t *img)
{
	const struct fz_block *b = htree_leaf(im);
	if (!b)
		return false;
	uint8_t *d = img + b->blk * im->bs;
	st16(d + 4, (uint16_t)(ld16(d + 4) + 3));
	return true;
}

/* A directory's '..' moves to the indexed directory, whose block 0 has '.'
 * with rec_len 13: the ancestor walk reads a misaligned '..' there. */
static bool c_dot_rec_len_unaligned(const struct fz_image *im, uint8_t *img)
{
	const struct fz_block *h = find(im, FZ_HTREE_ROOT, 2);   /* not the root directory */
	if (!h)
		return false;
	for (size_t i = 0; i < im->nmeta; i++) {
		const struct fz_block *b = &im->meta[i];
		uint8_t *d = img + b->blk * im->bs;
		if (b->kind == FZ_DIR && b->ino != 2 && b->ino != h->ino && ld32(d) == b->ino && d[6] == 1 &&
		    d[8] == '.' && ld16(d + 4) == 12) {
			st32(d + 12, h->ino);                     /* its '..' */
			st16(img + h->blk * im->bs + 4, 13);      /* the index root's '.' */
			return true;
		}
	}
	return false;
}

/* The index root claims a level of nodes and its first entry names a
 * logical block past the triple-indirect range at 1 KiB blocks: the
 * leaf-range collection maps that block to find the node. */
static bool c_dx_block_huge(const struct fz_image *im, uint8_t *img)
{
	const struct fz_block *b = find(im, FZ_HTREE_ROOT, 0);
	if (!b)
		return false;
	uint8_t *d = img + b->blk * im->bs;
	d[24 + 6] = 1;                                      /* indirect_levels */
	/* 65804 + 1024 * 65536: at 1 KiB blocks the triple-indirect index 1024,
	 * the first word past a 4 KiB buffer */
	st32(d + 32 + 4, 0x0401010c);                       /* dx_entry[0].block */
	/* and the directory gets a triple-indirect pointer (its own block 0), so
	 * that mapping the block reads an index of that block */
	for (size_t i = 0; i < im->nused; i++)
		if (im->used_inodes[i] == b->ino)
			st32(img + im->inode_off[i] + 40 + 4 * 14, (uint32_t)b->blk);
	return true;
}

/* An xattr entry whose value size wraps around 2^32 with its offset. */
static bool c_xattr_value_wraps(const struct fz_image *im, uint8_t *img)
{
	const struct fz_block *b = find(im, FZ_XATTR, 0);
	if (!b)
		return false;
	uint8_t *d = img + b->blk * im->bs;
	uint16_t offs = ld16(d + 32 + 2);
	st32(d + 32 + 8, 0u - offs + 16);                   /* offs + size = 2^32 + 16 */
	return true;
}

/* An xattr entry whose name runs past the block: the end marker replaced by
 * an entry header just before the block's end. */
static bool c_xattr_name_past_block(const struct fz_image *im, uint8_t *img)
{
	const struct fz_block *b = find(im, FZ_XATTR, 0);
	if (!b)
		return false;
	uint8_t *d = img + b->blk * im->bs;
	d[32] = 255;                                        /* the first entry's e_name_len */
	if (32 + ((255 + 16 + 3) & ~3u) <= im->bs) {
		/* the block is larger than one long entry: the entry list must still
		 * end inside; make every following byte a long entry's start */
		for (uint32_t off = 32; off + 16 <= im->bs; off += (255 + 16 + 3) & ~3u) {
			memset(d + off, 0, 16);
			d[off] = 255;
			d[off + 1] = 1;
		}
	}
	return true;
}

/* Every slot of the top indirect block of a file names the same child, and
 * that child's every slot one grandchild: a walk that descends each
 * reference reads the grandchild slots^2 times. */
static bool c_ind_repeated(const struct fz_image *im, uint8_t *img)
{
	const struct fz_block *top = find(im, FZ_TIND, 0);
	if (!top || top->ino == 8)
		top = NULL;
	if (!top)
		for (size_t i = 0; i < im->nmeta && !top; i++)
			if (im->meta[i].kind == FZ_DIND && im->meta[i].ino != 8)
				top = &im->meta[i];
	if (!top)
		return false;
	uint32_t a = im->bs / 4;
	uint8_t *t = img + top->blk * im->bs;
	uint32_t child = 0;
	for (uint32_t i = 0; i < a && !child; i++)
		child = ld32(t + 4 * i);
	if (!child)
		return false;
	uint8_t *c = img + (uint64_t)child * im->bs;
	uint32_t grand = 0;
	for (uint32_t i = 0; i < a && !grand; i++)
		grand = ld32(c + 4 * i);
	for (uint32_t i = 0; i < a; i++)
		st32(t + 4 * i, child);
	if (top->kind == FZ_TIND && grand)
		for (uint32_t i = 0; i < a; i++)
			st32(c + 4 * i, grand);
	return true;
}

/* s_blocks_count twice the device: the shadow state must not be sized by it. */
static bool c_sb_blocks_past_device(const struct fz_image *im, uint8_t *img)
{
	st32(img + 1024 + 4, im->blocks_count * 2);        /* twice the groups ... */
	st32(img + 1024 + 0, im->inodes_count * 2);        /* ... and consistent inode count */
	return true;
}

static bool c_sb_reserved_gdt_huge(const struct fz_image *im, uint8_t *img)
{
	(void)im;
	st16(img + 1024 + 206, 0xffff);
	return true;
}

/* A quota inode number naming the root (e2fsck: "Invalid user quota inode"). */
static bool c_sb_quota_inum_root(const struct fz_image *im, uint8_t *img)
{
	(void)im;
	st32(img + 1024 + offsetof(struct ext2_super_block, s_usr_quota_inum), EXT2_ROOT_INO);
	return true;
}

/* The resize inode's fields in img: the byte offset of inode 7, and where
 * the descriptor table's reserved blocks start (the first reserved GDT
 * block's number and its index in the double-indirect block). */
struct resize_loc { size_t ino_off; uint32_t dind, rgdt0, gdt_blocks; };
static bool resize_loc(const struct fz_image *im, const uint8_t *img, struct resize_loc *l)
{
	const uint8_t *sb = img + 1024;
	uint32_t fdb = ld32(sb + 20), bpg = ld32(sb + 32), isize = ld16(sb + 88);
	uint32_t groups = (im->blocks_count - fdb + bpg - 1) / bpg;
	if (!ld16(sb + 206))
		return false;                      /* no reserved GDT blocks */
	l->gdt_blocks = (groups + im->bs / 32 - 1) / (im->bs / 32);
	uint32_t itable = ld32(img + (size_t)(fdb + 1) * im->bs + 8);
	l->ino_off = (size_t)itable * im->bs + (size_t)(EXT2_RESIZE_INO - 1) * isize;
	l->dind = ld32(img + l->ino_off + 40 + 4 * EXT2_DIND_BLOCK);
	l->rgdt0 = fdb + 1 + l->gdt_blocks;
	return l->dind != 0;
}

/* The double-indirect entry of the first reserved GDT block names the
 * journal superblock (e2fsck: "Resize inode not valid", illegal blocks in
 * inode 7); journal superblock updates would then rewrite the resize
 * inode's tree. */
static bool c_resize_dind_entry(const struct fz_image *im, uint8_t *img)
{
	struct resize_loc l;
	const struct fz_block *jsb = find(im, FZ_JSB, 0);
	if (!jsb || !resize_loc(im, img, &l))
		return false;
	st32(img + (size_t)l.dind * im->bs + 4 * (l.gdt_blocks % (im->bs / 4)), (uint32_t)jsb->blk);
	return true;
}

/* The first reserved GDT block's first entry (its copy in group 1) moved. */
static bool c_resize_rgdt_entry(const struct fz_image *im, uint8_t *img)
{
	struct resize_loc l;
	if (!resize_loc(im, img, &l))
		return false;
	uint8_t *e = img + (size_t)l.rgdt0 * im->bs;
	st32(e, ld32(e) + 1);
	return true;
}

/* The last reserved GDT block's first entry moved: the scan reads the
 * blocks a run at a time, and the last run is checked too. */
static bool c_resize_rgdt_last(const struct fz_image *im, uint8_t *img)
{
	struct resize_loc l;
	if (!resize_loc(im, img, &l))
		return false;
	uint8_t *e = img + (size_t)(l.rgdt0 + ld16(img + 1024 + 206) - 1) * im->bs;
	st32(e, ld32(e) + 1);
	return true;
}

/* The resize inode gains a direct pointer (e2fsck: "Resize inode not valid"). */
static bool c_resize_direct_ptr(const struct fz_image *im, uint8_t *img)
{
	struct resize_loc l;
	const struct fz_block *jsb = find(im, FZ_JSB, 0);
	if (!jsb || !resize_loc(im, img, &l))
		return false;
	st32(img + l.ino_off + 40, (uint32_t)jsb->blk);
	return true;
}

static const struct pcase cases[] = {
	{ "leaf-name-past-block", "INV_DIRENT_TILING", "INV_DIRENT_TILING", c_leaf_name_past_block },
	{ "leaf-rec-len-unaligned", "INV_DIRENT_TILING", "INV_DIRENT_TILING", c_leaf_rec_len_unaligned },
	{ "dot-rec-len-unaligned", "INV_DIRENT_TILING", "INV_DIRENT_TILING", c_dot_rec_len_unaligned },
	{ "dx-block-huge", NULL, "INV_HTREE_BLOCKS", c_dx_block_huge },
	{ "xattr-value-wraps", "INV_XATTR_FORMAT", "INV_XATTR_FORMAT", c_xattr_value_wraps },
	{ "xattr-name-past-block", "INV_XATTR_FORMAT", "INV_XATTR_FORMAT", c_xattr_name_past_block },
	{ "ind-repeated", "INV_BLOCK_OWNED_ONCE", "INV_BLOCK_OWNED_ONCE", c_ind_repeated },
	{ "sb-blocks-past-device", "INV_SB_FROZEN", NULL, c_sb_blocks_past_device },
	{ "sb-reserved-gdt-huge", "INV_SB_FROZEN", NULL, c_sb_reserved_gdt_huge },
	{ "sb-quota-inum-root", "INV_SB_FROZEN", "INV_SB_FROZEN", c_sb_quota_inum_root },
	{ "resize-dind-entry", "INV_STATIC_FROZEN", "INV_STATIC_FROZEN", c_resize_dind_entry },
	{ "resize-rgdt-entry", "INV_STATIC_FROZEN", "INV_STATIC_FROZEN", c_resize_rgdt_entry },
	{ "resize-rgdt-last", "INV_STATIC_FROZEN", "INV_STATIC_FROZEN", c_resize_rgdt_last },
	{ "resize-direct-ptr", "INV_RESERVED_INODES", "INV_STATIC_FROZEN", c_resize_direct_ptr },
};

#define TIME_BOUND 20.0                   /* seconds per case, ASan build on a loaded machine */

static void run_case(const struct fz_image *im, const struct pcase *c)
{
	uint8_t *img = malloc(im->size);
	if (!img)
		return;
	memcpy(img, im->data, im->size);
	if (!c->corrupt(im, img)) {
		FAIL("%s (bs %u): the image has no target for this case", c->name, im->bs);
		free(img);
		return;
	}
	double t0 = now();
	/* the transaction base -> corrupt, the differing blocks as writes */
	struct test_mem base = { im->data, im->size };
	struct chk_fs *fs;
	char err[256];
	if (chk_attach(&fs, test_mem_read, &base, NULL, err, sizeof(err))) {
		FAIL("%s: cannot attach the base: %s", c->name, err);
		free(img);
		return;
	}
	size_t nw = 0;
	struct chk_write *w = malloc((im->size / im->bs) * sizeof(*w));
	for (size_t off = 0; w && off < im->size; off += im->bs)
		if (memcmp(im->data + off, img + off, im->bs))
			w[nw++] = (struct chk_write){ off, im->bs, img + off };
	struct chk_verdict *v = NULL;
	int r = w ? chk_check(fs, w, nw, &v) : -ENOMEM;
	if (r)
		FAIL("%s (bs %u): chk_check: %s", c->name, im->bs, strerror(-r));
	else if (c->inv ? !has(v, c->inv) : chk_verdict_ok(v)) {
		FAIL("%s (bs %u): transaction not rejected with %s", c->name, im->bs, c->inv ? c->inv : "any invariant");
		dump(v);
	}
	if (v && getenv("TEST_PARSERS_VERBOSE"))
		dump(v);
	chk_verdict_free(v);
	chk_detach(fs);
	free(w);
	/* the corrupt image on its own */
	struct test_mem bad = { img, im->size };
	r = chk_attach(&fs, test_mem_read, &bad, NULL, err, sizeof(err));
	if (!c->scan_inv) {
		if (r == 0)
			FAIL("%s (bs %u): attach accepted the corrupt image", c->name, im->bs);
		else if (r && r != -EINVAL)
			FAIL("%s (bs %u): attach failed with %s, not -EINVAL (%s)", c->name, im->bs, strerror(-r), err);
		if (r == 0) {
			if (chk_scan(fs, &v) == 0)
				chk_verdict_free(v);
			chk_detach(fs);
		}
	} else if (r) {
		FAIL("%s (bs %u): attach of the corrupt image failed: %s", c->name, im->bs, err);
	} else {
		if ((r = chk_scan(fs, &v)))
			FAIL("%s (bs %u): chk_scan: %s", c->name, im->bs, strerror(-r));
		else if (!has(v, c->scan_inv)) {
			FAIL("%s (bs %u): scan does not report %s", c->name, im->bs, c->scan_inv);
			dump(v);
		}
		chk_verdict_free(v);
		chk_detach(fs);
	}
	double dt = now() - t0;
	if (dt > TIME_BOUND)
		FAIL("%s (bs %u): took %.1f s", c->name, im->bs, dt);
	printf("%-24s bs %u: %.2f s\n", c->name, im->bs, dt);
	free(img);
}

/* chk_refresh_super: after the attach, a mount's superblock fields change on
 * the device (taken: a later write of the same superblock changes nothing);
 * a field that is not a mount's makes it -ESTALE and keeps the old one. */
static void refresh_case(const struct fz_image *im)
{
	uint8_t *img = malloc(im->size);
	if (!img)
		return;
	memcpy(img, im->data, im->size);
	struct test_mem m = { img, im->size };
	struct chk_fs *fs;
	char err[256];
	if (chk_attach(&fs, test_mem_read, &m, NULL, err, sizeof(err))) {
		FAIL("refresh (bs %u): cannot attach: %s", im->bs, err);
		free(img);
		return;
	}
	struct ext2_super_block *sb = (void *)(img + 1024);
	sb->s_free_blocks_count -= 3;
	sb->s_free_inodes_count += 2;
	sb->s_state &= (uint16_t)~EXT2_VALID_FS;
	sb->s_feature_incompat |= EXT3_FEATURE_INCOMPAT_RECOVER;
	sb->s_mnt_count++;
	sb->s_wtime += 60;
	int r = chk_refresh_super(fs);
	if (r)
		FAIL("refresh (bs %u): a mount's fields refused: %s", im->bs, strerror(-r));
	/* a commit that changes only s_wtime: one record, from the re-read value */
	uint8_t next[1024];
	memcpy(next, img + 1024, sizeof(next));
	((struct ext2_super_block *)next)->s_wtime += 5;
	struct chk_write w = { 1024, sizeof(next), next };
	struct chk_verdict *v = NULL;
	if ((r = chk_check(fs, &w, 1, &v)))
		FAIL("refresh (bs %u): chk_check: %s", im->bs, strerror(-r));
	else if (chk_verdict_nrecords(v) != 1 || !chk_verdict_ok(v) ||
		 strcmp(chk_verdict_record(v, 0)->field, "s_wtime"))
		FAIL("refresh (bs %u): the re-read superblock is not the approved one (%zu records)",
		     im->bs, chk_verdict_nrecords(v));
	chk_verdict_free(v);
	sb->s_max_mnt_count++;
	if ((r = chk_refresh_super(fs)) != -ESTALE)
		FAIL("refresh (bs %u): s_max_mnt_count changed: %d, not -ESTALE", im->bs, r);
	sb->s_max_mnt_count--;
	if ((r = chk_refresh_super(fs)))
		FAIL("refresh (bs %u): the same superblock again refused: %s", im->bs, strerror(-r));
	chk_detach(fs);
	free(img);
	printf("%-24s bs %u: ok\n", "refresh-super", im->bs);
}

/* One transaction: the blocks where after differs from before, judged on
 * an attach of before.  1 approved, 0 rejected (with `inv` when given), -1
 * the check failed. */
static int judge(const struct fz_image *im, const uint8_t *before, const uint8_t *after, const char *inv)
{
	struct test_mem m = { before, im->size };
	struct chk_fs *fs;
	char err[256];
	if (chk_attach(&fs, test_mem_read, &m, NULL, err, sizeof(err)))
		return -1;
	struct chk_write w[8];
	size_t nw = 0;
	for (size_t off = 0; off < im->size && nw < 8; off += im->bs)
		if (memcmp(before + off, after + off, im->bs))
			w[nw++] = (struct chk_write){ off, im->bs, after + off };
	struct chk_verdict *v = NULL;
	int r = chk_check(fs, w, nw, &v);
	int res = r ? -1 : chk_verdict_ok(v) ? 1 : !inv || has(v, inv) ? 0 : -1;
	if (res < 0 && v)
		dump(v);
	chk_verdict_free(v);
	chk_detach(fs);
	return res;
}

/* The ext4 inode flags e2fsck leaves alone on ext3 (huge_file, ea_inode on a
 * regular file): an image holding them scans clean, a transaction may keep
 * them on an inode that had them, and none may set them. */
static void kept_flags_case(const struct fz_image *im)
{
	size_t a = SIZE_MAX, b = SIZE_MAX;
	for (size_t i = 0; i < im->nused && b == SIZE_MAX; i++)
		if ((ld16(im->data + im->inode_off[i]) & 0170000) == 0100000) {
			if (a == SIZE_MAX)
				a = i;
			else
				b = i;
		}
	uint8_t *base = malloc(im->size), *next = malloc(im->size);
	if (b == SIZE_MAX || !base || !next) {
		FAIL("kept-flags (bs %u): no two regular files", im->bs);
		goto out;
	}
	memcpy(base, im->data, im->size);
	uint8_t *fa = base + im->inode_off[a] + 32;            /* i_flags */
	st32(fa, ld32(fa) | EXT4_HUGE_FILE_FL | EXT4_EA_INODE_FL);
	struct test_mem m = { base, im->size };
	struct chk_fs *fs = NULL;
	struct chk_verdict *v = NULL;
	char err[256];
	if (chk_attach(&fs, test_mem_read, &m, NULL, err, sizeof(err)) || chk_scan(fs, &v) || !chk_verdict_ok(v)) {
		FAIL("kept-flags (bs %u): an image with the flags does not scan clean", im->bs);
		if (v)
			dump(v);
	}
	chk_verdict_free(v);
	if (fs)
		chk_detach(fs);
	/* its mtime changes, the flags stay: approved */
	memcpy(next, base, im->size);
	st32(next + im->inode_off[a] + 16, ld32(next + im->inode_off[a] + 16) + 7);
	if (judge(im, base, next, NULL) != 1)
		FAIL("kept-flags (bs %u): a transaction keeping the flags was not approved", im->bs);
	/* another file gains each flag: rejected */
	static const uint32_t flags[] = { EXT4_HUGE_FILE_FL, EXT4_EA_INODE_FL };
	for (int k = 0; k < 2; k++) {
		memcpy(next, base, im->size);
		uint8_t *fb = next + im->inode_off[b] + 32;
		st32(fb, ld32(fb) | flags[k]);
		if (judge(im, base, next, "INV_INODE_EXT4_FIELDS") != 0)
			FAIL("kept-flags (bs %u): setting flag 0x%x was not rejected", im->bs, flags[k]);
	}
	printf("%-24s bs %u: ok\n", "kept-flags", im->bs);
out:
	free(base);
	free(next);
}

int main(int argc, char **argv)
{
	if (system("command -v mke2fs >/dev/null && command -v debugfs >/dev/null && command -v e2fsck >/dev/null"))
		return 77;
	char dir[] = "/tmp/chk-parsers-XXXXXX", path[512];
	if (!mkdtemp(dir))
		return 1;
	static const uint32_t sizes[] = { 1024, 4096 };
	for (int s = 0; s < 2; s++) {
		struct fz_image im;
		if (fz_make_base(dir, sizes[s], 0, path, sizeof(path)) || fz_load(path, &im)) {
			FAIL("cannot build the base image (bs %u)", sizes[s]);
			continue;
		}
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			if (argc < 2 || !strcmp(argv[1], cases[i].name))
				run_case(&im, &cases[i]);
		if (argc < 2 || !strcmp(argv[1], "refresh-super"))
			refresh_case(&im);
		if (argc < 2 || !strcmp(argv[1], "kept-flags"))
			kept_flags_case(&im);
		fz_free(&im);
	}
	/* room to grow past 2^32 blocks: 256 reserved GDT blocks, more than
	 * the scan reads at once */
	char cmd[640];
	if (argc < 2 || !strcmp(argv[1], "resize-rgdt-last")) {
		struct fz_image im;
		snprintf(path, sizeof(path), "%s/rgdt.img", dir);
		snprintf(cmd, sizeof(cmd), "mke2fs -q -F -t ext3 -b 1024 -E resize=4000000000 %s 16M "
			 ">/dev/null 2>&1", path);
		if (system(cmd) || fz_load(path, &im)) {
			FAIL("cannot build the image with 256 reserved GDT blocks");
		} else {
			/* as made: consistent, every run compared with its own blocks */
			struct test_mem m = { im.data, im.size };
			struct chk_fs *fs;
			struct chk_verdict *v = NULL;
			char err[256];
			if (chk_attach(&fs, test_mem_read, &m, NULL, err, sizeof(err))) {
				FAIL("256 reserved GDT blocks: cannot attach: %s", err);
			} else {
				if (chk_scan(fs, &v) || !chk_verdict_ok(v)) {
					FAIL("256 reserved GDT blocks: the scan rejects the image as made");
					dump(v);
				}
				chk_verdict_free(v);
				chk_detach(fs);
			}
			for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
				if (!strcmp(cases[i].name, "resize-rgdt-last"))
					run_case(&im, &cases[i]);
			fz_free(&im);
		}
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", dir);
	printf("parsers: %d failure(s)\n", failures);
	return failures ? 1 : 0;
}
