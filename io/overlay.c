/*
 * io/overlay.c - the open transaction's overlay of metadata blocks, the block sets
 * that track frees, and the committed-data rule's marks: blocks an open
 * transaction frees stay marked in libext2fs's bitmap until it commits
 * (savepoint.c's callbacks keep the set; here the marks are released for a
 * commit's flush and restored after a failed one).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "txn_internal.h"

/* ---- block sets ---- */

size_t bs_slot(uint64_t blk, size_t cap)
{
	return (size_t)((blk * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

bool blkset_has(const struct blkset *s, uint64_t blk)
{
	if (!s->cap)
		return false;
	for (size_t i = bs_slot(blk, s->cap);; i = (i + 1) & (s->cap - 1)) {
		if (s->slot[i] == blk)
			return true;
		if (s->slot[i] == 0)
			return false;
	}
}

errcode_t blkset_add(struct blkset *s, uint64_t blk)
{
	if (blk == 0 || blkset_has(s, blk))
		return 0;
	if ((s->count + 1) * 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		uint64_t *slot = calloc(cap, sizeof(*slot));
		if (!slot)
			return ENOMEM;
		for (size_t i = 0; i < s->cap; i++) {
			if (!s->slot[i])
				continue;
			size_t j = bs_slot(s->slot[i], cap);
			while (slot[j])
				j = (j + 1) & (cap - 1);
			slot[j] = s->slot[i];
		}
		free(s->slot);
		s->slot = slot;
		s->cap = cap;
	}
	size_t j = bs_slot(blk, s->cap);
	while (s->slot[j])
		j = (j + 1) & (s->cap - 1);
	s->slot[j] = blk;
	s->count++;
	return 0;
}

/* Removal with backward shift (linear probing): the entries after the hole
 * that may live in it move up, so lookups never need tombstones.  O(1)
 * expected: rolling back an operation that freed n blocks costs O(n). */
void blkset_remove(struct blkset *s, uint64_t blk)
{
	if (!s->cap || blk == 0)
		return;
	size_t mask = s->cap - 1, hole = bs_slot(blk, s->cap);
	while (s->slot[hole] != blk) {
		if (s->slot[hole] == 0)
			return;
		hole = (hole + 1) & mask;
	}
	s->slot[hole] = 0;
	s->count--;
	for (size_t j = (hole + 1) & mask; s->slot[j]; j = (j + 1) & mask) {
		size_t home = bs_slot(s->slot[j], s->cap);
		/* the entry at j may move to the hole unless its home lies
		 * cyclically in (hole, j] */
		bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
		if (stays)
			continue;
		s->slot[hole] = s->slot[j];
		s->slot[j] = 0;
		hole = j;
	}
}

void blkset_clear(struct blkset *s)
{
	free(s->slot);
	s->slot = NULL;
	s->cap = s->count = 0;
}

/* ---- the overlay ---- */

struct ovl_ent *ovl_find(struct txn_manager *t, uint64_t blk)
{
	if (!t->nhash)
		return NULL;
	for (struct ovl_ent *e = t->hash[bs_slot(blk, t->nhash)]; e; e = e->hnext)
		if (e->blk == blk)
			return e;
	return NULL;
}

static errcode_t ovl_grow(struct txn_manager *t)
{
	size_t nhash = t->nhash ? t->nhash * 2 : 256;
	struct ovl_ent **h = calloc(nhash, sizeof(*h));
	if (!h)
		return ENOMEM;
	for (size_t i = 0; i < t->nents; i++) {
		struct ovl_ent *e = t->ents[i];
		size_t s = bs_slot(e->blk, nhash);
		e->hnext = h[s];
		h[s] = e;
	}
	free(t->hash);
	t->hash = h;
	t->nhash = nhash;
	return 0;
}

/* The base of a block the write covers whole, when neither the cache nor the
 * image holds it (a hole: a new block of a fresh image), is zeros, known
 * without reading it.  The read would cost a system call, and on an image
 * file the host reads ahead around it into large page-cache folios, which
 * every later small data write into that range then pays to walk. */
static errcode_t base_read(struct txn_manager *t, uint64_t blk, bool whole, unsigned char *base)
{
	if (whole && rio_approved_zero(t->rc, blk * t->bs, t->bs)) {
		memset(base, 0, t->bs);
		return 0;
	}
	return rio_approved_read(t->rc, blk * t->bs, t->bs, base);
}

static errcode_t ovl_get(struct txn_manager *t, uint64_t blk, bool whole, struct ovl_ent **out)
{
	struct ovl_ent *e = ovl_find(t, blk);
	if (e) {
		*out = e;
		return 0;
	}
	if (t->nents == t->capents) {
		size_t cap = t->capents ? t->capents * 2 : 256;
		struct ovl_ent **v = realloc(t->ents, cap * sizeof(*v));
		if (!v)
			return ENOMEM;
		t->ents = v;
		t->capents = cap;
	}
	if (t->nents + 1 > t->nhash) {
		errcode_t err = ovl_grow(t);
		if (err)
			return err;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return ENOMEM;
	e->blk = blk;
	e->data = malloc(t->bs);
	e->base = malloc(t->bs);
	if (!e->data || !e->base) {
		free(e->data);
		free(e->base);
		free(e);
		return ENOMEM;
	}
	errcode_t err = base_read(t, blk, whole, e->base);
	if (err) {
		free(e->data);
		free(e->base);
		free(e);
		return err;
	}
	/* the base is the state after the transaction in flight */
	struct ovl_ent *ce = committing_find(t, blk);
	if (ce)
		memcpy(e->base, ce->data, t->bs);
	/* a whole-block write overwrites all of data next */
	if (!whole)
		memcpy(e->data, e->base, t->bs);
	size_t s = bs_slot(blk, t->nhash);
	e->hnext = t->hash[s];
	t->hash[s] = e;
	t->ents[t->nents++] = e;
	*out = e;
	return 0;
}

void ovl_clear(struct txn_manager *t)
{
	for (size_t i = 0; i < t->nents; i++) {
		free(t->ents[i]->data);
		free(t->ents[i]->base);
		free(t->ents[i]->undo);
		free(t->ents[i]);
	}
	t->nents = 0;
	if (t->hash)
		memset(t->hash, 0, t->nhash * sizeof(*t->hash));
	t->opened_ns = 0;
}

bool ovl_changed(const struct txn_manager *t, const struct ovl_ent *e)
{
	return memcmp(e->data, e->base, t->bs) != 0;
}

errcode_t rio_ovl_write(struct txn_manager *t, struct rio_chan *rc, uint64_t off, size_t len,
			const void *buf)
{
	if (rc->totals.failed)
		return EROFS;
	const unsigned char *src = buf;
	uint64_t bs = t->bs;
	errcode_t err = 0;
	pthread_mutex_lock(&rc->ovl_lock);
	for (uint64_t b = off / bs; b <= (off + len - 1) / bs; b++) {
		struct ovl_ent *e;
		size_t before = t->nents;
		uint64_t bstart = b * bs;
		bool whole = off <= bstart && off + len >= bstart + bs;
		err = ovl_get(t, b, whole, &e);
		if (err)
			break;
		if (t->sp_gen) {
			if (t->nents > before) {
				e->created_gen = t->sp_gen;
			} else if (e->created_gen != t->sp_gen && e->undo_gen != t->sp_gen) {
				if (!e->undo)
					e->undo = malloc(bs);
				if (e->undo && whole) {
					/* the write replaces all of data: the old
					 * buffer becomes the undo copy as it is */
					unsigned char *old = e->data;
					e->data = e->undo;
					e->undo = old;
					e->undo_gen = t->sp_gen;
				} else if (e->undo) {
					memcpy(e->undo, e->data, bs);
					e->undo_gen = t->sp_gen;
				} else {
					t->sp_lost = true;
				}
			}
		}
		uint64_t lo, hi;
		rio_overlap(bstart, bs, off, len, &lo, &hi);
		memcpy(e->data + (lo - bstart), src + (lo - off), hi - lo);
	}
	if (!t->opened_ns)
		t->opened_ns = now_ns();
	pthread_mutex_unlock(&rc->ovl_lock);
	return err;
}

void ovl_remove(struct txn_manager *t, struct ovl_ent *e)
{
	struct ovl_ent **pp = &t->hash[bs_slot(e->blk, t->nhash)];
	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	for (size_t i = 0; i < t->nents; i++)
		if (t->ents[i] == e) {
			t->ents[i] = t->ents[--t->nents];
			break;
		}
	free(e->data);
	free(e->base);
	free(e->undo);
	free(e);
}

void rio_ovl_data_written(struct txn_manager *t, uint64_t off, size_t len)
{
	if (len == 0)
		return;
	pthread_mutex_lock(&t->rc->ovl_lock);
	for (uint64_t b = off / t->bs; b <= (off + len - 1) / t->bs; b++) {
		struct ovl_ent *e = t->nents ? ovl_find(t, b) : NULL;
		if (e)
			ovl_remove(t, e);
		e = committing_find(t, b);
		if (e)
			e->dropped = true;
	}
	pthread_mutex_unlock(&t->rc->ovl_lock);
}

void rio_ovl_patch(struct txn_manager *t, uint64_t off, size_t len, void *buf)
{
	if (len == 0)
		return;
	pthread_mutex_lock(&t->rc->ovl_lock);
	unsigned char *dst = buf;
	uint64_t bs = t->bs;
	for (uint64_t b = off / bs; b <= (off + len - 1) / bs; b++) {
		struct ovl_ent *e = ovl_find(t, b);
		if (!e)
			e = committing_find(t, b);
		if (!e)
			continue;
		uint64_t bstart = b * bs;
		uint64_t lo, hi;
		rio_overlap(bstart, bs, off, len, &lo, &hi);
		memcpy(dst + (lo - off), e->data + (lo - bstart), hi - lo);
	}
	pthread_mutex_unlock(&t->rc->ovl_lock);
}

bool rio_ovl_holds(struct txn_manager *t, uint64_t blk)
{
	pthread_mutex_lock(&t->rc->ovl_lock);
	bool held = ovl_find(t, blk) || committing_find(t, blk);
	pthread_mutex_unlock(&t->rc->ovl_lock);
	return held;
}

enum rio_ovl_held rio_ovl_read_whole(struct txn_manager *t, uint64_t off, size_t len, void *buf)
{
	uint64_t bs = t->bs;
	if (len == 0 || off % bs || len % bs)
		return RIO_OVL_SOME;
	unsigned char *dst = buf;
	bool some = false, missing = false;
	pthread_mutex_lock(&t->rc->ovl_lock);
	for (uint64_t b = off / bs; b < (off + len) / bs && !(some && missing); b++) {
		struct ovl_ent *e = ovl_find(t, b);
		if (!e)
			e = committing_find(t, b);
		if (!e) {
			missing = true;
			continue;
		}
		some = true;
		if (!missing)
			memcpy(dst + (b * bs - off), e->data, bs);
	}
	pthread_mutex_unlock(&t->rc->ovl_lock);
	return !missing ? RIO_OVL_ALL : some ? RIO_OVL_SOME : RIO_OVL_NONE;
}

/* ---- committed-data rule ---- */

/* Before the bitmaps go into the overlay: the freed blocks are free. */
void release_freed_marks(struct txn_manager *t)
{
	for (size_t i = 0; i < t->freed.cap; i++)
		if (t->freed.slot[i])
			ext2fs_unmark_block_bitmap2(t->fs->block_map, t->freed.slot[i]);
	if (t->freed.count)
		ext2fs_mark_bb_dirty(t->fs);
}

/* After a failed commit the blocks are still referenced by the durable
 * state: mark them again. */
void restore_freed_marks(struct txn_manager *t)
{
	for (size_t i = 0; i < t->freed.cap; i++)
		if (t->freed.slot[i])
			ext2fs_mark_block_bitmap2(t->fs->block_map, t->freed.slot[i]);
}
