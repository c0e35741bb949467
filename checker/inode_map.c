/*
 * checker/inode_map.c - an inode's block map: the indirect tree of ext2/3
 * (twelve direct pointers, then single, double and triple indirect blocks)
 * walked, asked for one logical block, and searched for its last block.
 * Contents are read through the caller (approved state) or the transaction.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chk_internal.h"

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

static int walk_level(struct walk_ctx *w, uint64_t blk, int level, uint32_t base)
{
	struct chk_fs *fs = w->fs;
	uint8_t t = level == 3 ? BT_TIND : level == 2 ? BT_DIND : BT_IND;
	if (!w->visit(w->vctx, blk, t, base))
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
			w->visit(w->vctx, p, w->isdir ? BT_DIR : BT_DATA, lb);
		else if ((r = walk_level(w, p, level - 1, lb)))
			return r;
	}
	return 0;
}

int chk_walk_inode_tree(struct chk_fs *fs, const struct ext2_inode *in, bool isdir,
		    blk_get_fn get, void *get_ctx, blk_visit_fn visit, void *vctx)
{
	struct walk_ctx w = { fs, get, get_ctx, visit, vctx, isdir, { NULL, NULL, NULL }, { 0 } };
	int r = 0;
	for (int i = 0; i < EXT2_NDIR_BLOCKS; i++)
		if (in->i_block[i])
			visit(vctx, in->i_block[i], isdir ? BT_DIR : BT_DATA, (uint32_t)i);
	uint32_t a = fs->addr_per_block;
	uint32_t bases[3] = { 12, 12 + a, 12 + a + a * a };
	for (int l = 0; l < 3; l++) {
		if (!in->i_block[12 + l])
			continue;
		for (int k = 0; k < 3; k++)
			if (!w.bufs[k] && !(w.bufs[k] = malloc(fs->bs))) {
				r = -ENOMEM;
				goto out;
			}
		if ((r = walk_level(&w, in->i_block[12 + l], l + 1, bases[l])))
			goto out;
	}
out:
	for (int k = 0; k < 3; k++)
		free(w.bufs[k]);
	chk_u64map_free(&w.descended);
	return r;
}

/* ------------------------------------------------------------ one block */

/* Physical block of logical block lblk through the indirect tree, reading
 * indirect blocks with get; 0 for a hole (or a pointer out of range). */
static uint64_t ind_bmap(struct chk_fs *fs, const struct ext2_inode *in, uint32_t lblk, blk_get_fn get,
			 void *gctx, uint8_t *buf)
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
		if (get(gctx, blk, buf))
			return 0;
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

uint64_t chk_txn_bmap(struct chk_fs *fs, struct txn *t, const struct ext2_inode *in, uint32_t lblk)
{
	if (lblk < 12)
		return in->i_block[lblk];
	uint8_t *buf = malloc(fs->bs);
	if (!buf) {
		t->err = -ENOMEM;
		return 0;
	}
	void *ctx[2] = { fs, t };
	uint64_t b = ind_bmap(fs, in, lblk, get_new, ctx, buf);
	free(buf);
	return b;
}

uint64_t chk_approved_bmap(struct chk_fs *fs, const struct ext2_inode *in, uint32_t lblk)
{
	if (lblk < 12)
		return in->i_block[lblk];
	uint8_t *buf = malloc(fs->bs);
	uint64_t b = buf ? ind_bmap(fs, in, lblk, get_approved, fs, buf) : 0;
	free(buf);
	return b;
}

/* ------------------------------------------------------------ last block */

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
 * indirect blocks read). */
bool chk_txn_last_lblk(struct chk_fs *fs, struct txn *t, const struct ext2_inode *in, uint32_t *last)
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
