/*
 * io/savepoint.c - libext2fs's allocation changes as io follows them, and
 * the operation savepoint that undoes an operation's changes.  The
 * alloc-stats callbacks mark the groups a commit must flush and keep the
 * committed-data rule (a block the open transaction frees stays marked in
 * libext2fs's bitmap until that transaction is durable); since a savepoint
 * they also note the frees and take-backs a rollback reverses, and every
 * allocation and free, which the rollback undoes in libext2fs's bitmaps
 * and group descriptors.
 *
 * Why io, and not the caller, keeps the undo log: io must see every block
 * allocation and free whoever makes it (the caller's operations, the
 * libext2fs calls inside them such as punch, bmap or the xattr code, the
 * mount's orphan processing), or a group's bitmap is not written and the
 * checker rejects the commit, or a freed block is reused before its free is
 * durable.  It owns libext2fs's one alloc-stats callback while attached, so
 * the log is kept where every allocation is already seen, and the caller
 * undoes an operation through rio_txn_rollback instead of hooking the
 * callback a second time.  Inodes have no callback: their allocations come
 * through rio_txn_inode_alloc_stats.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "txn_internal.h"

/* ---- libext2fs's allocation callbacks ---- */

static struct txn_manager *txn_of_fs(ext2_filsys fs)
{
	if (!fs->io || fs->io->manager != rio_io_manager)
		return NULL;
	return rio_chan_of(fs->io)->txn;
}

static void sp_note(struct txn_manager *t, uint64_t **v, size_t *n, size_t *cap, uint64_t blk)
{
	if (!t->sp_gen)
		return;
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		uint64_t *nv = realloc(*v, nc * sizeof(*nv));
		if (!nv) {
			t->sp_lost = true;
			return;
		}
		*v = nv;
		*cap = nc;
	}
	(*v)[(*n)++] = blk;
}

/* An allocation or free since the savepoint, for the rollback's undo. */
static void note_alloc(struct txn_manager *t, uint64_t num, int inuse, bool inode, bool isdir)
{
	if (!t->sp_gen)
		return;
	if (t->sp_nallocs == t->sp_capallocs) {
		size_t cap = t->sp_capallocs ? t->sp_capallocs * 2 : 64;
		struct alloc_change *v = realloc(t->sp_allocs, cap * sizeof(*v));
		if (!v) {
			t->sp_lost = true;
			return;
		}
		t->sp_allocs = v;
		t->sp_capallocs = cap;
	}
	t->sp_allocs[t->sp_nallocs++] = (struct alloc_change){ .num = num, .inuse = inuse,
							       .inode = inode, .isdir = isdir };
}

/* Linear: taking back a block the open transaction freed is rare (the
 * freed blocks stay marked, no allocator hands them out). */
static bool freed_since_savepoint(const struct txn_manager *t, uint64_t blk)
{
	for (size_t i = 0; i < t->sp_nfreed; i++)
		if (t->sp_freed[i] == blk)
			return true;
	return false;
}

static void note_block_stats(struct txn_manager *t, ext2_filsys fs, blk64_t blk, int inuse)
{
	note_alloc(t, blk, inuse, false, false);
	flush_mark_block(t, blk);
	if (inuse < 0) {
		/* keep it marked so no allocator hands it out before the commit
		 * that frees it is durable; if we cannot remember it, leave it
		 * free (correct bitmap, weaker protection) */
		if (!blkset_has(&t->freed, blk) && blkset_add(&t->freed, blk) == 0) {
			ext2fs_mark_block_bitmap2(fs->block_map, blk);
			sp_note(t, &t->sp_freed, &t->sp_nfreed, &t->sp_capfreed, blk);
		}
	} else if (inuse > 0 && blkset_has(&t->freed, blk)) {
		blkset_remove(&t->freed, blk);
		/* a block freed since the savepoint is gone from the set once
		 * the rollback has undone its free: only the set's blocks of
		 * the savepoint come back */
		if (!freed_since_savepoint(t, blk))
			sp_note(t, &t->sp_unfreed, &t->sp_nunfreed, &t->sp_capunfreed, blk);
	}
}

void block_stats_cb(ext2_filsys fs, blk64_t blk, int inuse)
{
	struct txn_manager *t = txn_of_fs(fs);
	if (t) {
		if (t->old_stats)
			t->old_stats(fs, blk, inuse);
		note_block_stats(t, fs, blk, inuse);
	}
}

void block_stats_range_cb(ext2_filsys fs, blk64_t blk, blk_t num, int inuse)
{
	struct txn_manager *t = txn_of_fs(fs);
	if (t) {
		if (t->old_stats_range)
			t->old_stats_range(fs, blk, num, inuse);
		for (blk_t i = 0; i < num; i++)
			note_block_stats(t, fs, blk + i, inuse);
	}
}

void rio_txn_inode_bitmap_changed(ext2_filsys fs, ext2_ino_t ino)
{
	struct rio_chan *rc = chan_of_fs(fs);
	if (rc && rc->txn)
		flush_mark_inode(rc->txn, ino);
}

void rio_txn_block_bitmap_changed(ext2_filsys fs, blk64_t blk)
{
	struct rio_chan *rc = chan_of_fs(fs);
	if (rc && rc->txn)
		flush_mark_block(rc->txn, blk);
}

void rio_txn_inode_alloc_stats(ext2_filsys fs, ext2_ino_t ino, int inuse, bool isdir)
{
	ext2fs_inode_alloc_stats2(fs, ino, inuse, isdir);
	struct rio_chan *rc = chan_of_fs(fs);
	if (rc && rc->txn) {
		flush_mark_inode(rc->txn, ino);
		note_alloc(rc->txn, ino, inuse, true, isdir);
	}
}

/* ---- operation savepoints ---- */

errcode_t rio_txn_savepoint(io_channel ch)
{
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager)
		return EXT2_ET_MAGIC_IO_CHANNEL;
	struct txn_manager *t = rio_chan_of(ch)->txn;
	if (!t)
		return EXT2_ET_INVALID_ARGUMENT;
	pthread_mutex_lock(&t->rc->ovl_lock);
	t->sp_gen = ++t->sp_next;
	t->sp_nfreed = t->sp_nunfreed = t->sp_nallocs = 0;
	t->sp_lost = false;
	pthread_mutex_unlock(&t->rc->ovl_lock);
	return 0;
}

/* The allocations and frees since the savepoint undone in libext2fs's
 * bitmaps and group descriptors, newest first.  The undo is not an
 * allocation to follow (no freed-set or savepoint notes): the callbacks are
 * unset meanwhile, and the groups marked for the flush by hand. */
static void undo_allocs(struct txn_manager *t)
{
	ext2_filsys fs = t->fs;
	void (*cur)(ext2_filsys, blk64_t, int) = NULL;
	void (*cur_range)(ext2_filsys, blk64_t, blk_t, int) = NULL;
	ext2fs_set_block_alloc_stats_callback(fs, NULL, &cur);
	ext2fs_set_block_alloc_stats_range_callback(fs, NULL, &cur_range);
	for (size_t i = t->sp_nallocs; i-- > 0;) {
		const struct alloc_change *a = &t->sp_allocs[i];
		if (a->inode) {
			ext2fs_inode_alloc_stats2(fs, (ext2_ino_t)a->num, -a->inuse, a->isdir);
			flush_mark_inode(t, (ext2_ino_t)a->num);
		} else {
			ext2fs_block_alloc_stats2(fs, a->num, -a->inuse);
			flush_mark_block(t, a->num);
		}
	}
	ext2fs_set_block_alloc_stats_callback(fs, cur, NULL);
	ext2fs_set_block_alloc_stats_range_callback(fs, cur_range, NULL);
	t->sp_nallocs = 0;
}

errcode_t rio_txn_rollback(io_channel ch)
{
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager)
		return EXT2_ET_MAGIC_IO_CHANNEL;
	struct rio_chan *rc = rio_chan_of(ch);
	struct txn_manager *t = rc->txn;
	if (!t || !t->sp_gen)
		return EXT2_ET_INVALID_ARGUMENT;
	pthread_mutex_lock(&rc->ovl_lock);
	errcode_t err = 0;
	if (t->sp_lost) {
		/* cannot restore exactly: drop the whole open transaction */
		discard(t);
		err = EROFS;
	} else {
		for (size_t i = 0; i < t->nents;) {
			struct ovl_ent *e = t->ents[i];
			if (e->created_gen == t->sp_gen) {
				ovl_remove(t, e);   /* moves the last entry to i */
				continue;
			}
			if (e->undo_gen == t->sp_gen) {
				memcpy(e->data, e->undo, t->bs);
				e->undo_gen = 0;
			}
			i++;
		}
		for (size_t i = 0; i < t->sp_nfreed; i++)
			blkset_remove(&t->freed, t->sp_freed[i]);
		/* the set held these at the savepoint and holds fewer now (no
		 * commit ended the savepoint, no discard emptied the set: it
		 * sets sp_lost): it has room, adding them back cannot fail */
		for (size_t i = 0; i < t->sp_nunfreed; i++)
			(void)blkset_add(&t->freed, t->sp_unfreed[i]);
		if (t->nents == 0)
			t->opened_ns = 0;
	}
	t->sp_gen = 0;
	t->sp_nfreed = t->sp_nunfreed = 0;
	pthread_mutex_unlock(&rc->ovl_lock);
	undo_allocs(t);
	return err;
}
