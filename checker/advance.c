/*
 * checker/advance.c - chk_txn_apply: the approved state moves to a checked
 * transaction's after-state (type/owner map, pages and runs, per-inode block
 * counts, bitmaps, descriptors, superblock, cache), all memory reserved
 * first so that it cannot fail half-way.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chk_internal.h"

/* What one ownership change leaves its block as: nothing to do (false),
 * or the after-state's type (BT_FREE: released), owner, logical block and
 * whether it is a run's (an extent's) block. */
struct after { uint8_t type; uint32_t owner, lblk; bool run; };

static bool after_of(const struct chk_fs *fs, const struct bchange *c, struct after *a)
{
	uint64_t b = c->blk;
	if (b >= fs->blocks_count || bt_static(chk_btype(fs, b)))
		return false;
	if (c->adds) {
		if (c->new_type == BT_XATTR && chk_btype(fs, b) == BT_XATTR)
			return false;                         /* one more sharer */
		*a = (struct after){ c->new_type, c->new_owner, c->new_lblk, c->run };
		return true;
	}
	if (c->removes) {
		if (c->old_type == BT_XATTR && c->xattr_old_refs - c->xremoves > 0)
			return false;                         /* still shared */
		*a = (struct after){ BT_FREE, 0, 0, false };
		return true;
	}
	return false;
}

static int cmp_bch(const void *x, const void *y)
{
	uint64_t a = (*(struct bchange *const *)x)->blk, b = (*(struct bchange *const *)y)->blk;
	return a < b ? -1 : a > b;
}

/* The map's changes, in block order and coalesced: blocks that leave the
 * runs, blocks that join them (consecutive ones of one owner continuing
 * each other make one run), and page entries. */
struct map_plan {
	struct bchange **by_blk;
	size_t n;
	struct prange { uint64_t start; uint32_t len, owner, lblk; uint8_t type; } *out, *in;
	size_t nout, nin;
};

static int plan_map(const struct chk_fs *fs, const struct txn *t, struct map_plan *p)
{
	memset(p, 0, sizeof(*p));
	p->by_blk = malloc((t->nbch ? t->nbch : 1) * sizeof(*p->by_blk));
	p->out = malloc((t->nbch ? t->nbch : 1) * sizeof(*p->out));
	p->in = malloc((t->nbch ? t->nbch : 1) * sizeof(*p->in));
	if (!p->by_blk || !p->out || !p->in)
		return -ENOMEM;
	p->n = t->nbch;
	if (p->n) {
		memcpy(p->by_blk, t->bch, p->n * sizeof(*p->by_blk));
		qsort(p->by_blk, p->n, sizeof(*p->by_blk), cmp_bch);
	}
	for (size_t i = 0; i < p->n; i++) {
		const struct bchange *c = p->by_blk[i];
		struct after a;
		if (!after_of(fs, c, &a))
			continue;
		if (chk_run_at(fs, c->blk, NULL)) {
			struct prange *o = p->nout ? &p->out[p->nout - 1] : NULL;
			if (o && o->start + o->len == c->blk)
				o->len++;
			else
				p->out[p->nout++] = (struct prange){ c->blk, 1, 0, 0, 0 };
		}
		if (a.run && a.type != BT_FREE) {
			struct prange *r = p->nin ? &p->in[p->nin - 1] : NULL;
			if (r && r->start + r->len == c->blk && r->owner == a.owner && r->type == a.type &&
			    (uint64_t)r->lblk + r->len == a.lblk)
				r->len++;
			else
				p->in[p->nin++] = (struct prange){ c->blk, 1, a.owner, a.lblk, a.type };
		}
	}
	return 0;
}

static void plan_free(struct map_plan *p)
{
	free(p->by_blk);
	free(p->out);
	free(p->in);
}

/* The pages, runs and group bitmaps apply will write, made to exist first
 * so that applying cannot fail half-way: -ENOMEM leaves the approved state
 * as it was. */
static int reserve_apply(struct chk_fs *fs, struct txn *t, const struct map_plan *p)
{
	for (size_t i = 0; i < t->nbch; i++) {
		struct bchange *c = t->bch[i];
		if (c->adds && !c->run && chk_bmap_reserve(fs, c->blk))
			return -ENOMEM;
	}
	if (chk_runs_reserve(fs, p->nout + p->nin + 1))
		return -ENOMEM;
	for (size_t i = 0; i < t->nblocks; i++) {
		struct tblock *b = &t->blocks[i];
		if (!b->changed || b->blk >= fs->blocks_count ||
		    (b->otype != BT_BBITMAP && b->otype != BT_IBITMAP))
			continue;
		uint32_t g = chk_layout_group(fs, b->blk, b->otype, NULL);
		if (chk_group_bits_reserve(fs, g, b->otype == BT_IBITMAP))
			return -ENOMEM;
	}
	return 0;
}

static void apply_map(struct chk_fs *fs, const struct map_plan *p)
{
	for (size_t i = 0; i < p->nout; i++)
		chk_run_remove(fs, p->out[i].start, p->out[i].len);
	for (size_t i = 0; i < p->n; i++) {
		const struct bchange *c = p->by_blk[i];
		struct after a;
		if (!after_of(fs, c, &a))
			continue;
		/* the page entry: the new owner's, or none */
		if (a.run || a.type == BT_FREE)
			chk_bmap_set(fs, c->blk, BT_FREE, 0, 0);
		else
			chk_bmap_set(fs, c->blk, a.type, a.owner, a.lblk);
	}
	for (size_t i = 0; i < p->nin; i++)
		chk_run_add(fs, p->in[i].start, p->in[i].len, p->in[i].type, p->in[i].owner, p->in[i].lblk);
	for (size_t i = 0; i < p->n; i++)
		chk_bmap_trim(fs, p->by_blk[i]->blk);
	chk_runs_trim(fs);
}

int chk_txn_apply(struct chk_fs *fs, struct txn *t)
{
	struct map_plan plan;
	if (plan_map(fs, t, &plan) || reserve_apply(fs, t, &plan)) {
		plan_free(&plan);
		return -ENOMEM;
	}
	/* type/owner map and per-inode counts */
	apply_map(fs, &plan);
	plan_free(&plan);
	for (size_t i = 0; i < t->nich; i++) {
		struct ichange *ic = t->ich[i];
		if (!ic->old_inuse) {
			fs->ndata[ic->ino] = 0;
			fs->nmeta[ic->ino] = 0;
		}
		fs->ndata[ic->ino] = (uint32_t)((int64_t)fs->ndata[ic->ino] + ic->ndata_delta);
		fs->nmeta[ic->ino] = (uint32_t)((int64_t)fs->nmeta[ic->ino] + ic->nmeta_delta);
		if (!ic->new_inuse)
			fs->ndata[ic->ino] = fs->nmeta[ic->ino] = 0;
	}
	/* bitmaps, descriptors, superblock */
	for (size_t i = 0; i < t->nblocks; i++) {
		struct tblock *b = &t->blocks[i];
		if (!b->changed || b->blk >= fs->blocks_count)
			continue;
		if (b->otype != BT_BBITMAP && b->otype != BT_IBITMAP)
			continue;
		uint32_t g = chk_layout_group(fs, b->blk, b->otype, NULL);
		chk_group_bits_copy(fs, g, b->otype == BT_IBITMAP, b->new);
	}
	for (uint32_t i = 0; i < fs->gdt_blocks; i++) {
		if (!t->gdb_new[i])
			continue;
		const uint8_t *n = t->gdb_new[i];
		uint8_t *o = fs->gd + (size_t)i * fs->bs;
		for (uint32_t k = 0; k < fs->desc_per_block && i * fs->desc_per_block + k < fs->ngroups; k++) {
			const uint8_t *nd = n + (size_t)k * fs->desc_size, *od = o + (size_t)k * fs->desc_size;
			fs->gd_free_blocks += (uint64_t)chk_gd_free_blocks(fs, nd) - chk_gd_free_blocks(fs, od);
			fs->gd_free_inodes += (uint64_t)chk_gd_free_inodes(fs, nd) - chk_gd_free_inodes(fs, od);
		}
		memcpy(o, n, fs->bs);
	}
	memcpy(fs->sb_raw, t->sb_new, 1024);
	/* cache: keep metadata, forget data; a made-up bitmap written as it
	 * was made up changes nothing approved but the disk's bytes, which the
	 * cache holds */
	for (size_t i = 0; i < t->nblocks; i++) {
		struct tblock *b = &t->blocks[i];
		if ((!b->changed && !b->made_up) || b->blk >= fs->blocks_count)
			continue;
		uint8_t ty = chk_btype(fs, b->blk);
		if (ty == BT_FREE || ty == BT_DATA)
			chk_cache_drop(fs, b->blk);
		else
			chk_cache_put(fs, b->blk, b->new);
	}
	return 0;
}
