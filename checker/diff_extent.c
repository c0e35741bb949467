/*
 * checker/diff_extent.c - the diff of extent trees, beside diff.c's diff of
 * indirect pointers (part of chk_check): for each inode whose tree may have
 * changed (its inode written, or one of its tree blocks), both trees are
 * walked whole, approved and proposed, and compared as sets: tree blocks
 * that appear or go, and the physical blocks of leaf extents that appear or
 * go.  A run that stays where it was costs nothing; only blocks whose
 * ownership changes become block changes (as many as the bitmap flips that
 * must go with them).  The proposed tree is judged as the scan judges one
 * (INV_EXTENT_TREE), and no deeper than the kernel reads.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chk_ext4.h"

struct espan {                   /* a leaf extent, or a tree block (len 0) */
	uint64_t pblk;
	uint32_t len, lblk;
	uint8_t type;                /* BT_DATA, BT_DIR; BT_EXTENT for a tree block */
	bool unwritten;
};

struct etree {                   /* one tree as walked */
	struct espan *v;
	size_t n, cap;
	int err;
	bool unwritten;              /* some leaf extent is unwritten */
};

static bool collect(void *ctx, const struct chk_span *sp)
{
	struct etree *e = ctx;
	struct espan *nv = chk_grow(e->v, &e->cap, e->n + 1, sizeof(*nv));
	if (!nv) {
		e->err = -ENOMEM;
		return false;
	}
	e->v = nv;
	bool node = sp->type == BT_EXTENT;
	e->v[e->n++] = (struct espan){ sp->blk, node ? 0 : sp->len, sp->lblk, sp->type, sp->unwritten };
	e->unwritten |= sp->unwritten;
	return true;
}

struct getter { struct chk_fs *fs; struct txn *t; bool old; };

static int get_block(void *ctx, uint64_t blk, void *buf)
{
	struct getter *g = ctx;
	const uint8_t *d = g->old ? chk_txn_old_block(g->fs, g->t, blk, buf) : chk_txn_new_block(g->fs, g->t, blk, buf);
	if (!d)
		return g->t->err ? g->t->err : -EIO;
	if (d != buf)
		memcpy(buf, d, g->fs->bs);
	return 0;
}

/* Walks one state's tree; 1 with the message in why when a node breaks a
 * rule (the walk stops there: what follows is not owned). */
static int walk(struct chk_fs *fs, struct txn *t, const struct ext2_inode *in, bool old, struct etree *e,
		char *why, size_t len)
{
	struct getter g = { fs, t, old };
	bool dir = imode_type(in) == 0040000;
	int r = chk_walk_inode_tree(fs, in, dir, get_block, &g, collect, e, why, len);
	return r < 0 ? r : e->err ? e->err : r;
}

static int cmp_espan(const void *a, const void *b)
{
	const struct espan *x = a, *y = b;
	if (x->pblk != y->pblk)
		return x->pblk < y->pblk ? -1 : 1;
	return (x->len > 0) - (y->len > 0);
}

/* The blocks of [b, b + len) of span s that the other tree's sorted spans
 * (from *k on) do not hold with the same logical block and kind: calls
 * take(blk, lblk) for each. */
static void subtract(const struct espan *s, const struct espan *other, size_t n, size_t *k,
		     void (*take)(void *, uint64_t, uint32_t), void *ctx)
{
	uint64_t b = s->pblk, end = s->pblk + (s->len ? s->len : 1);
	while (*k < n && other[*k].pblk + (other[*k].len ? other[*k].len : 1) <= b)
		(*k)++;
	for (size_t j = *k; b < end; j++) {
		const struct espan *o = j < n ? &other[j] : NULL;
		uint64_t ostart = o ? o->pblk : end, oend = o ? o->pblk + (o->len ? o->len : 1) : end;
		if (ostart > b) {                       /* not held: [b, min(ostart, end)) */
			uint64_t stop = ostart < end ? ostart : end;
			for (; b < stop; b++)
				take(ctx, b, s->lblk + (uint32_t)(b - s->pblk));
		}
		if (!o || b >= end)
			break;
		/* held by o where they overlap: the same role, or taken */
		uint64_t stop = oend < end ? oend : end;
		bool same = (o->len == 0) == (s->len == 0) && o->type == s->type &&
			    (s->len == 0 || (int64_t)o->lblk - (int64_t)o->pblk == (int64_t)s->lblk - (int64_t)s->pblk);
		for (; b < stop; b++)
			if (!same)
				take(ctx, b, s->lblk + (uint32_t)(b - s->pblk));
	}
}

struct taker {
	struct chk_fs *fs;
	struct txn *t;
	struct ichange *ic;
	const struct espan *s;
	size_t rec;
	bool add;
};

static void take(void *ctx, uint64_t blk, uint32_t lblk)
{
	struct taker *k = ctx;
	if (k->add)
		chk_txn_ref_add(k->fs, k->t, blk, k->s->type, k->s->len ? lblk : 0, k->ic, k->rec, k->s->len > 0);
	else
		chk_txn_ref_remove(k->fs, k->t, blk, k->s->type, k->ic, k->rec);
}

/* One record per span that changes hands: "tree block" or "L+N". */
static size_t span_record(struct txn *t, uint32_t ino, const struct espan *s, bool add)
{
	const char *field = s->len ? chk_arena_printf(&t->v->strings, "%u+%u", s->lblk, s->len) : "tree block";
	return chk_verdict_add_record(t->v, CHK_EXTENT, ino, field, add ? 0 : (int64_t)s->pblk,
				      add ? (int64_t)s->pblk : 0);
}

static void count_take(void *ctx, uint64_t blk, uint32_t lblk)
{
	(void)blk;
	(void)lblk;
	(*(size_t *)ctx)++;
}

/* Every span of `from` whose blocks `to` does not hold the same way: taken
 * (added when `from` is the new tree, else removed), with one record. */
static void sweep(struct chk_fs *fs, struct txn *t, struct ichange *ic, const struct etree *from,
		  const struct etree *to, bool add)
{
	size_t k = 0;
	for (size_t i = 0; i < from->n && !t->err; i++) {
		size_t kk = k, moved = 0;
		subtract(&from->v[i], to->v, to->n, &kk, count_take, &moved);
		if (moved) {
			struct taker tk = { fs, t, ic, &from->v[i], span_record(t, ic->ino, &from->v[i], add), add };
			chk_ich_add_rec(ic, tk.rec);
			kk = k;
			subtract(&from->v[i], to->v, to->n, &kk, take, &tk);
		}
		k = kk;
	}
}

/* The first block two spans of one sorted tree both hold (two extents, or an
 * extent and a tree block, of the same inode), or UINT64_MAX.  The sweeps
 * compare the two trees block by block and would see such a block once. */
static uint64_t held_twice(const struct etree *e)
{
	uint64_t end = 0;
	for (size_t i = 0; i < e->n; i++) {
		if (i && e->v[i].pblk < end)
			return e->v[i].pblk;
		uint64_t x = e->v[i].pblk + (e->v[i].len ? e->v[i].len : 1);
		if (x > end)
			end = x;
	}
	return UINT64_MAX;
}

/* written: the inodes whose tree blocks (in the approved map) the
 * transaction writes */
static void diff_one(struct chk_fs *fs, struct txn *t, struct ichange *ic, const struct u64map *written)
{
	const struct ext2_inode *o = (const void *)ic->old, *n = (const void *)ic->new;
	bool oe = chk_walkable(fs, ic->ino, o, ic->old_inuse) && chk_inode_extent_mapped(fs, o);
	bool ne = chk_walkable(fs, ic->ino, n, ic->new_inuse) && chk_inode_extent_mapped(fs, n);
	if (!oe && !ne)
		return;
	/* the same map in both states (nothing of it written): nothing moves,
	 * unless the type of its data blocks does (a directory's come alive) */
	bool odir = imode_type(o) == 0040000, ndir = imode_type(n) == 0040000;
	if (oe && ne && odir == ndir && !memcmp(o->i_block, n->i_block, sizeof(o->i_block)) &&
	    !chk_u64map_get(written, ic->ino, NULL))
		return;
	struct etree ot = { 0 }, nt = { 0 };
	char why[200];
	int r = oe ? walk(fs, t, o, true, &ot, why, sizeof(why)) : 0;
	if (r < 0)
		t->err = r;
	r = ne && !t->err ? walk(fs, t, n, false, &nt, why, sizeof(why)) : 0;
	if (r < 0)
		t->err = r;
	else if (r == 1)
		chk_txn_problem(t, INV_EXTENT_TREE, ic->nrecs ? ic->recs[0] : SIZE_MAX, "inode %u: extent tree: %s",
				ic->ino, why);
	if (ne && !t->err) {
		struct chk_ext_header h = chk_ext_header_at((const uint8_t *)n->i_block);
		if (h.depth > CHK_EXT_MAX_DEPTH)
			chk_txn_problem(t, INV_EXTENT_TREE, ic->nrecs ? ic->recs[0] : SIZE_MAX,
					"inode %u: extent tree of depth %u, deeper than the kernel reads (%u)",
					ic->ino, h.depth, CHK_EXT_MAX_DEPTH);
		if (ndir && nt.unwritten)
			chk_txn_problem(t, INV_EXTENT_TREE, ic->nrecs ? ic->recs[0] : SIZE_MAX,
					"dir %u: an unwritten extent", ic->ino);
	}
	if (!t->err) {
		if (ot.n)
			qsort(ot.v, ot.n, sizeof(*ot.v), cmp_espan);
		if (nt.n)
			qsort(nt.v, nt.n, sizeof(*nt.v), cmp_espan);
		uint64_t twice = held_twice(&nt);
		if (twice != UINT64_MAX && held_twice(&ot) == UINT64_MAX)
			chk_txn_problem(t, INV_BLOCK_OWNED_ONCE, ic->nrecs ? ic->recs[0] : SIZE_MAX,
					"inode %u: block %llu is mapped twice by its extent tree", ic->ino,
					(unsigned long long)twice);
		sweep(fs, t, ic, &ot, &nt, false);
		sweep(fs, t, ic, &nt, &ot, true);
	}
	free(ot.v);
	free(nt.v);
}

void chk_diff_extents(struct chk_fs *fs, struct txn *t)
{
	if (!fs->extents)
		return;
	/* the inodes whose tree blocks are written, though their inode may not be */
	struct u64map written = { 0 };
	for (size_t i = 0; i < t->nblocks && !t->err; i++)
		if (t->blocks[i].changed && t->blocks[i].otype == BT_EXTENT) {
			uint32_t owner = chk_bowner(fs, t->blocks[i].blk);
			chk_txn_inode(fs, t, owner);
			if (chk_u64map_put(&written, owner, 1))
				t->err = -ENOMEM;
		}
	for (size_t i = 0; i < t->nich && !t->err; i++)
		diff_one(fs, t, t->ich[i], &written);
	chk_u64map_free(&written);
}
