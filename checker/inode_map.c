/*
 * checker/inode_map.c - an inode's block map: the indirect tree of ext2/3
 * (twelve direct pointers, then single, double and triple indirect blocks)
 * walked, asked for one logical block, and searched for its last block.
 * Contents are read through the caller (approved state) or the transaction.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chk_ext4.h"

/* ------------------------------------------------------------ walk */

struct walk_ctx {
	struct chk_fs *fs;
	blk_get_fn get;
	void *get_ctx;
	blk_visit_fn visit;
	void *vctx;
	bool isdir;
	uint8_t *bufs[3];
	struct u64map descended;         /* indirect blocks already read in this walk */
};

static bool visit1(struct walk_ctx *w, uint64_t blk, uint8_t type, uint32_t lblk)
{
	struct chk_span sp = { .blk = blk, .len = 1, .lblk = lblk, .type = type };
	return w->visit(w->vctx, &sp);
}

static int walk_level(struct walk_ctx *w, uint64_t blk, int level, uint32_t base)
{
	struct chk_fs *fs = w->fs;
	uint8_t t = level == 3 ? BT_TIND : level == 2 ? BT_DIND : BT_IND;
	if (!visit1(w, blk, t, base))
		return 0;
	/* do not follow pointers out of range or into static metadata */
	if (blk < fs->first_data_block || blk >= fs->blocks_count || bt_static(chk_btype(fs, blk)))
		return 0;
	if (chk_u64map_get(&w->descended, blk, NULL))
		return 0;
	if (chk_u64map_put(&w->descended, blk, 1))
		return -ENOMEM;
	uint8_t *b = w->bufs[level - 1];
	int r = w->get(w->get_ctx, blk, b);
	if (r)
		return r;
	uint64_t span = 1;
	for (int i = 1; i < level; i++)
		span *= fs->addr_per_block;
	for (uint32_t i = 0; i < fs->addr_per_block; i++) {
		uint32_t p = chk_ld32(b + (size_t)i * 4);
		if (!p)
			continue;
		uint32_t lb = (uint32_t)(base + i * span);
		if (level == 1)
			visit1(w, p, w->isdir ? BT_DIR : BT_DATA, lb);
		else if ((r = walk_level(w, p, level - 1, lb)))
			return r;
	}
	return 0;
}

static int walk_indirect(struct walk_ctx *w, const struct ext2_inode *in)
{
	struct chk_fs *fs = w->fs;
	int r = 0;
	for (int i = 0; i < EXT2_NDIR_BLOCKS; i++)
		if (in->i_block[i])
			visit1(w, in->i_block[i], w->isdir ? BT_DIR : BT_DATA, (uint32_t)i);
	uint32_t a = fs->addr_per_block;
	uint32_t bases[3] = { 12, 12 + a, 12 + a + a * a };
	for (int l = 0; l < 3 && !r; l++) {
		if (!in->i_block[12 + l])
			continue;
		for (int k = 0; k < 3; k++)
			if (!w->bufs[k] && !(w->bufs[k] = malloc(fs->bs)))
				return -ENOMEM;
		r = walk_level(w, in->i_block[12 + l], l + 1, bases[l]);
	}
	return r;
}

static bool ext_node(void *ctx, uint64_t pblk, uint16_t depth, const uint8_t *node)
{
	struct walk_ctx *w = ctx;
	struct chk_span sp = { .blk = pblk, .len = 1, .type = BT_EXTENT, .depth = depth, .node = node };
	return w->visit(w->vctx, &sp);
}

static bool ext_leaf(void *ctx, const struct chk_ext *e)
{
	struct walk_ctx *w = ctx;
	struct chk_span sp = { .blk = e->pblk, .len = e->len, .lblk = e->lblk,
			       .type = w->isdir ? BT_DIR : BT_DATA, .unwritten = e->unwritten };
	w->visit(w->vctx, &sp);
	return true;
}

bool chk_inode_extent_mapped(const struct chk_fs *fs, const struct ext2_inode *in)
{
	return fs->extents && (in->i_flags & EXT4_EXTENTS_FL);
}

int chk_walk_inode_tree(struct chk_fs *fs, const struct ext2_inode *in, bool isdir,
			blk_get_fn get, void *get_ctx, blk_visit_fn visit, void *vctx, char *why,
			size_t whylen)
{
	struct walk_ctx w = { fs, get, get_ctx, visit, vctx, isdir, { NULL, NULL, NULL }, { 0 } };
	int r;
	if (chk_inode_extent_mapped(fs, in)) {
		char tmp[160];
		struct chk_ext_walk ew = { .bs = fs->bs, .first_data_block = fs->first_data_block,
					   .blocks_count = fs->blocks_count, .get = get, .get_ctx = get_ctx,
					   .visit_node = ext_node, .visit_ext = ext_leaf, .ctx = &w };
		r = chk_ext_walk(&ew, (const uint8_t *)in->i_block, why ? why : tmp, why ? whylen : sizeof(tmp));
	} else {
		r = walk_indirect(&w, in);
	}
	for (int k = 0; k < 3; k++)
		free(w.bufs[k]);
	chk_u64map_free(&w.descended);
	return r;
}

/* ------------------------------------------------------------ one block */

/* Physical block of logical block lblk through the indirect tree, reading
 * indirect blocks with get; 0 for a hole (or a pointer out of range), or
 * when get fails (its error in *err). */
static uint64_t ind_bmap(struct chk_fs *fs, const struct ext2_inode *in, uint32_t lblk, blk_get_fn get,
			 void *gctx, uint8_t *buf, int *err)
{
	uint32_t a = fs->addr_per_block;
	if (lblk < 12)
		return in->i_block[lblk];
	lblk -= 12;
	uint64_t blk;
	int level;
	if (lblk < a) {
		blk = in->i_block[12];
		level = 1;
	} else if ((lblk -= a) < (uint64_t)a * a) {
		blk = in->i_block[13];
		level = 2;
	} else if ((uint64_t)(lblk -= a * a) < (uint64_t)a * a * a) {
		blk = in->i_block[14];
		level = 3;
	} else {
		return 0;                  /* past the triple-indirect range (a corrupt index entry) */
	}
	for (; level > 0 && blk; level--) {
		if (blk >= fs->blocks_count || bt_static(chk_btype(fs, blk)))
			return 0;
		int r = get(gctx, blk, buf);
		if (r) {
			*err = r;
			return 0;
		}
		uint64_t span = 1;
		for (int i = 1; i < level; i++)
			span *= a;
		uint32_t idx = (uint32_t)(lblk / span);
		lblk = (uint32_t)(lblk % span);
		blk = chk_ld32(buf + (size_t)idx * 4);
	}
	return blk;
}

static int get_new(void *ctx, uint64_t blk, void *buf)
{
	struct txn *t = ((void **)ctx)[1];
	const uint8_t *d = chk_txn_new_block(((void **)ctx)[0], t, blk, buf);
	if (!d)
		return t->err ? t->err : -EIO;
	if (d != buf)
		memcpy(buf, d, ((struct chk_fs *)((void **)ctx)[0])->bs);
	return 0;
}

static int get_approved(void *ctx, uint64_t blk, void *buf)
{
	return chk_read_block(ctx, blk, buf);
}

static struct chk_ext_walk ext_reader(const struct chk_fs *fs, blk_get_fn get, void *gctx)
{
	return (struct chk_ext_walk){ .bs = fs->bs, .first_data_block = fs->first_data_block,
				      .blocks_count = fs->blocks_count, .get = get, .get_ctx = gctx };
}

static uint64_t bmap(struct chk_fs *fs, const struct ext2_inode *in, uint32_t lblk, blk_get_fn get, void *gctx,
		     int *err)
{
	if (chk_inode_extent_mapped(fs, in)) {
		struct chk_ext_walk w = ext_reader(fs, get, gctx);
		return chk_ext_bmap(&w, (const uint8_t *)in->i_block, lblk, NULL, err);
	}
	if (lblk < 12)
		return in->i_block[lblk];
	uint8_t *buf = malloc(fs->bs);
	if (!buf) {
		*err = -ENOMEM;
		return 0;
	}
	uint64_t b = ind_bmap(fs, in, lblk, get, gctx, buf, err);
	free(buf);
	return b;
}

uint64_t chk_txn_bmap(struct chk_fs *fs, struct txn *t, const struct ext2_inode *in, uint32_t lblk)
{
	void *ctx[2] = { fs, t };
	return bmap(fs, in, lblk, get_new, ctx, &t->err);
}

uint64_t chk_approved_bmap(struct chk_fs *fs, const struct ext2_inode *in, uint32_t lblk)
{
	int err = 0;
	return bmap(fs, in, lblk, get_approved, fs, &err);
}

/* ------------------------------------------------------------ last block */

static bool ind_last(struct chk_fs *fs, struct txn *t, const struct ext2_inode *in, uint32_t *last);

/* empty: indirect blocks already found to hold no data (a corrupt tree may
 * name one block from every slot: each is searched once) */
static bool last_in_subtree(struct chk_fs *fs, struct txn *t, uint64_t blk, int level, uint32_t base,
			    uint32_t *last, struct u64map *empty)
{
	if (level == 0) {
		*last = base;
		return true;
	}
	if (blk < fs->first_data_block || blk >= fs->blocks_count || bt_static(chk_btype(fs, blk)))
		return false;
	if (chk_u64map_get(empty, blk * 4 + (uint64_t)level, NULL))
		return false;
	uint8_t *buf = malloc(fs->bs);
	const uint8_t *d = buf ? chk_txn_new_block(fs, t, blk, buf) : NULL;
	if (!d) {
		if (!buf)
			t->err = -ENOMEM;
		free(buf);
		return false;
	}
	uint64_t span = 1;
	for (int i = 1; i < level; i++)
		span *= fs->addr_per_block;
	bool found = false;
	for (uint32_t i = fs->addr_per_block; i-- > 0 && !found;) {
		uint32_t p = chk_ld32(d + 4 * (size_t)i);
		found = p && last_in_subtree(fs, t, p, level - 1, (uint32_t)(base + i * span), last, empty);
	}
	free(buf);
	if (!found && chk_u64map_put(empty, blk * 4 + (uint64_t)level, 1))
		t->err = -ENOMEM;
	return found;
}

/* Cheap: descends only along the last non-zero pointers (at most three
 * indirect blocks read); an extent tree along its right edge, as far left
 * as its last initialised extent. */
bool chk_txn_last_lblk(struct chk_fs *fs, struct txn *t, const struct ext2_inode *in, uint32_t *last,
		       int64_t *last_init)
{
	if (chk_inode_extent_mapped(fs, in)) {
		void *ctx[2] = { fs, t };
		struct chk_ext_walk w = ext_reader(fs, get_new, ctx);
		int64_t l, li;
		int r = chk_ext_last(&w, (const uint8_t *)in->i_block, &l, &li);
		if (r && !t->err)
			t->err = r;
		if (last_init)
			*last_init = li;
		*last = l >= 0 ? (uint32_t)l : 0;
		return l >= 0;
	}
	bool any = ind_last(fs, t, in, last);
	if (last_init)
		*last_init = any ? (int64_t)*last : -1;
	return any;
}

static bool ind_last(struct chk_fs *fs, struct txn *t, const struct ext2_inode *in, uint32_t *last)
{
	uint32_t a = fs->addr_per_block;
	uint32_t bases[3] = { 12, 12 + a, 12 + a + a * a };
	struct u64map empty = { 0 };
	for (int l = 2; l >= 0; l--)
		if (in->i_block[12 + l] && last_in_subtree(fs, t, in->i_block[12 + l], l + 1, bases[l], last, &empty)) {
			chk_u64map_free(&empty);
			return true;
		}
	chk_u64map_free(&empty);
	for (int i = 11; i >= 0; i--)
		if (in->i_block[i]) {
			*last = (uint32_t)i;
			return true;
		}
	return false;
}
