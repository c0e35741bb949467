/*
 * fuse/orphan.c - open counts, the on-disk orphan list, truncating and freeing
 * inodes under its protection when their release spans commits (the steps
 * are bmap.c's), and releasing the orphan list at mount and unmount.
 */
#include "rfs.h"
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

static int orphan_release(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in);
static int orphan_list_release(struct rfs *r, unsigned *n);

/* ---- open table and orphans ---- */

struct open_ino **open_slot(struct rfs *r, ext2_ino_t ino)
{
	if (!r->open_tab) {
		r->open_tab = r->open_tab0;
		r->open_cap = OPEN_TAB_SIZE;
	}
	struct open_ino **p = &r->open_tab[ino & (r->open_cap - 1)];
	while (*p && (*p)->ino != ino)
		p = &(*p)->next;
	return p;
}

/* The kernel holds every inode it has an entry for, tens of thousands after
 * a large untar or create: before a chain gets long, four times the buckets
 * (out of memory, the chains just grow).  Only where no caller holds a
 * slot of the table. */
static void open_tab_fit(struct rfs *r, ext2_ino_t ino)
{
	unsigned chain = 0;
	(void)open_slot(r, ino);   /* the table set up */
	for (struct open_ino *o = r->open_tab[ino & (r->open_cap - 1)]; o && chain <= 2; o = o->next)
		chain++;
	if (chain <= 2 || r->open_cap >= (size_t)1 << 24)
		return;
	size_t cap = r->open_cap * 4;
	struct open_ino **tab = calloc(cap, sizeof(*tab));
	if (!tab)
		return;
	for (size_t i = 0; i < r->open_cap; i++)
		while (r->open_tab[i]) {
			struct open_ino *o = r->open_tab[i];
			r->open_tab[i] = o->next;
			o->next = tab[o->ino & (cap - 1)];
			tab[o->ino & (cap - 1)] = o;
		}
	if (r->open_tab != r->open_tab0)
		free(r->open_tab);
	r->open_tab = tab;
	r->open_cap = cap;
}

/* A write of ino's data failed on the device: what the file holds there is
 * unknown, so its next fsync must not promise it (as Linux reports a failed
 * writeback to fsync).  The kernel holds an inode it writes through, so the
 * entry is there; if not (out of memory at its LOOKUP), nobody can fsync it. */
void data_error_note(struct rfs *r, ext2_ino_t ino)
{
	struct open_ino *o = *open_slot(r, ino);
	if (o)
		o->data_err = true;
}

/* True once after data_error_note: the error is reported to one fsync. */
bool data_error_take(struct rfs *r, ext2_ino_t ino)
{
	struct open_ino *o = *open_slot(r, ino);
	if (!o || !o->data_err)
		return false;
	o->data_err = false;
	return true;
}

/* Free an unlinked inode nothing holds any more (off the orphan list, in a
 * write lifecycle of its own).  Read-only: it stays listed for the next
 * mount's orphan processing. */
static int free_orphan(struct rfs *r, ext2_ino_t ino)
{
	struct ext2_inode in;

	if (r->ro)
		return 0;
	int ret = wr_begin(r);
	if (ret)
		return ret == -EROFS ? 0 : ret;
	ret = get_inode(r, ino, &in);
	if (!ret)
		ret = orphan_release(r, ino, &in);
	return wr_end(r, ret, false);
}

/* ---- the reaper ----
 * Freeing a huge file takes seconds, and with one worker every other
 * request would wait for it.  When the reaper thread runs, an unlinked inode
 * nothing holds any more is queued instead, and the thread frees it a step
 * at a time, each step an operation of its own under the lock, so requests
 * are served in between.  As ext3's truncate of an orphan, the blocks go
 * from the end with i_size following, the inode on the orphan list until the
 * step that frees it: a crash at any point leaves it to the next mount's
 * orphan processing. */
#define REAP_STEP_BLOCKS 32768   /* a group's worth: tens of ms per step */

static bool reap_pending(const struct rfs *r)
{
	return r->nreap > r->reaphead;
}

/* ino appended to the array *v of *n (room for *cap, doubled when full). */
static int ino_append(ext2_ino_t **v, size_t *n, size_t *cap, ext2_ino_t ino)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 16;
		ext2_ino_t *grown = realloc(*v, c * sizeof(**v));
		if (!grown)
			return -ENOMEM;
		*v = grown;
		*cap = c;
	}
	(*v)[(*n)++] = ino;
	return 0;
}

static int reap_push(struct rfs *r, ext2_ino_t ino)
{
	if (r->nreap == r->capreap && r->reaphead) {
		/* reuse the room the reaped ones left in front */
		memmove(r->reapq, r->reapq + r->reaphead,
			(r->nreap - r->reaphead) * sizeof(*r->reapq));
		r->nreap -= r->reaphead;
		r->reaphead = 0;
	}
	return ino_append(&r->reapq, &r->nreap, &r->capreap, ino);
}

/* One step for ino: REAP_STEP_BLOCKS logical blocks below its last mapped
 * one, or, when no more than that are held, the inode and all it holds.
 * *more when ino needs another step. */
static int reap_step(struct rfs *r, ext2_ino_t ino, bool *more)
{
	ext2_filsys fs = r->fs;
	uint64_t bs = fs->blocksize;
	struct ext2_inode in;

	*more = false;
	if (r->ro)
		return 0;   /* stays listed for the next mount */
	int ret = wr_begin(r);
	if (ret)
		return ret == -EROFS ? 0 : ret;
	ret = get_inode(r, ino, &in);
	blk64_t held = ret ? 0 : ext2fs_get_stat_i_blocks(fs, &in) / (bs / 512);
	if (!ret && in.i_links_count == 0 && held > REAP_STEP_BLOCKS) {
		blk64_t end = 0;
		errcode_t e = bmap_end(fs, ino, &in, &end);
		ret = e ? -errmap(e) : 0;
		blk64_t keep = end > REAP_STEP_BLOCKS ? end - REAP_STEP_BLOCKS : 0;
		bool listed = true;
		if (!ret)
			ret = punch_from(r, ino, &in, keep, &listed);
		if (!ret)
			ret = put_inode(r, ino, &in);
		*more = !ret;
	} else if (!ret) {
		ret = orphan_release(r, ino, &in);
	}
	ret = wr_end(r, ret, false);
	if (ret)
		*more = false;
	return ret;
}

static void reap_first(struct rfs *r)
{
	bool more = false;
	ext2_ino_t ino = r->reapq[r->reaphead];
	int ret = reap_step(r, ino, &more);
	if (more)
		return;
	if (ret && ret != -EROFS)
		fprintf(stderr, "recon-fuse: cannot free unlinked inode %u: %s (it stays on the "
			"orphan list)\n", ino, strerror(-ret));
	if (++r->reaphead == r->nreap)
		r->reaphead = r->nreap = 0;
}

/* Inodes one batch frees at most; together they hold no more than a step's
 * blocks (REAP_STEP_BLOCKS), so a batch keeps the lock no longer than a step
 * of a big file does. */
#define REAP_BATCH_MAX 256

/* Can ino join a batch holding *budget blocks so far?  Only an inode the
 * step frees whole, and only while the open transaction has room left for
 * it without a commit (so a batch does not span commits in the common case). */
static bool reap_fits(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t *budget)
{
	uint64_t bs = r->fs->blocksize;
	blk64_t step;
	if (get_inode(r, ino, in) || in->i_links_count)
		return false;
	blk64_t held = ext2fs_get_stat_i_blocks(r->fs, in) / (bs / 512);
	if (*budget + held > REAP_STEP_BLOCKS)
		return false;
	/* room for a step of held blocks (or, with none, for the inode's own
	 * writes) */
	if (punch_step(r, 0, NULL, 0, false, &step) || step == 0 || step < held)
		return false;
	*budget += held;
	return true;
}

/*
 * The common case, many small unlinked inodes queued: the newest ones (the
 * queue's tail) freed together in one operation (one savepoint, one
 * transaction boundary, one lock hold), each off the orphan list in the
 * transaction that frees it, as reap_step does.  Newest first, as the list
 * has them from its head: each comes off the head, with no neighbour's
 * inode to rewrite.  When the batch fails it is undone (a commit inside it
 * kept what came before the commit); the caller then frees its inodes one
 * at a time, so the failure is reported for the inode it belongs to.
 * *tried: how many of the tail's inodes the batch took (0: none, the head
 * needs a step of its own); true when all of those are freed.
 */
static bool reap_batch(struct rfs *r, size_t *tried)
{
	size_t avail = r->nreap - r->reaphead;
	blk64_t budget = 0;
	struct ext2_inode in;
	int ret = 0;

	*tried = 0;
	if (avail < 2 || r->ro || wr_begin(r))
		return false;
	while (!ret && *tried < avail && *tried < REAP_BATCH_MAX &&
	       reap_fits(r, r->reapq[r->nreap - 1 - *tried], &in, &budget)) {
		ret = orphan_release(r, r->reapq[r->nreap - 1 - *tried], &in);
		++*tried;
	}
	ret = wr_end(r, ret, false);
	return *tried && !ret;
}

/* The queue's last inode out of it. */
static void reap_drop_last(struct rfs *r)
{
	if (--r->nreap == r->reaphead)
		r->reaphead = r->nreap = 0;
}

/* After a failed batch: its inodes one at a time (those a commit inside the
 * batch freed already are free in the bitmap: skipped).  Each is one a step
 * frees whole (reap_fits). */
static void reap_singly(struct rfs *r, size_t n)
{
	for (size_t i = 0; i < n && !r->ro; i++) {
		ext2_ino_t ino = r->reapq[r->nreap - 1];
		bool more = false;
		int ret = 0;
		if (ext2fs_test_inode_bitmap2(r->fs->inode_map, ino))
			ret = reap_step(r, ino, &more);
		if (more)
			return;
		if (ret && ret != -EROFS)
			fprintf(stderr, "recon-fuse: cannot free unlinked inode %u: %s (it stays on "
				"the orphan list)\n", ino, strerror(-ret));
		reap_drop_last(r);
	}
}

/* Some of the queue's work, with the lock held. */
static void reap_some(struct rfs *r)
{
	size_t n;
	if (reap_batch(r, &n)) {
		while (n--)
			reap_drop_last(r);
	} else if (n) {
		reap_singly(r, n);
	} else {
		reap_first(r);
	}
}

bool rfs_reap(struct rfs *r)
{
	lock(r);
	if (reap_pending(r) && r->fs)
		reap_some(r);
	bool pending = reap_pending(r) && r->fs && !r->ro;
	unlock(r);
	/* a mutex is not fair: a request waiting for the lock gets it before
	 * the next step (for a while: a steady stream must not stop the reaper) */
	for (int i = 0; i < 1000 && atomic_load(&r->lock_waiters); i++)
		usleep(10);
	/* an fsync waits for the next commit without the lock: a step taken
	 * now would go into that commit and make it wait for the reaper */
	if (pending)
		fsync_let_waiters_first(1000);
	return pending;
}

void reap_all(struct rfs *r)
{
	while (reap_pending(r) && !r->ro)
		reap_some(r);
}

/* *p neither open nor held by the kernel: out of the table, and freed if it
 * was unlinked (by the reaper when it runs).  Called with the lock held;
 * 0 or -errno. */
int held_settle(struct rfs *r, struct open_ino **p)
{
	struct open_ino *o = *p;
	if (!o || o->count || o->nlookup)
		return 0;
	*p = o->next;
	int ret = 0;
	if (o->orphan) {
		if (r->reap_kick && !r->ro && reap_push(r, o->ino) == 0)
			r->reap_kick(r);
		else
			ret = free_orphan(r, o->ino);
	}
	free(o);
	return ret;
}

/* The kernel got an entry for ino (before the reply is sent, so a FORGET
 * cannot come first).  -ENOMEM: not counted, the caller fails the reply. */
int lookup_get(struct rfs *r, ext2_ino_t ino)
{
	open_tab_fit(r, ino);
	struct open_ino **p = open_slot(r, ino);
	if (!*p) {
		*p = calloc(1, sizeof(**p));
		if (!*p)
			return -ENOMEM;
		(*p)->ino = ino;
	}
	(*p)->nlookup++;
	return 0;
}

/* FORGET (or an entry reply the kernel never got): n references fewer.  No
 * reply goes back, so a failed free only leaves the inode on the orphan list
 * (the next mount frees it). */
void lookup_put(struct rfs *r, ext2_ino_t ino, uint64_t n)
{
	struct open_ino **p = open_slot(r, ino);
	if (!*p)
		return;
	(*p)->nlookup = (*p)->nlookup > n ? (*p)->nlookup - n : 0;
	int ret = held_settle(r, p);
	if (ret)
		fprintf(stderr, "recon-fuse: cannot free unlinked inode %u: %s (it stays on the "
			"orphan list)\n", ino, strerror(-ret));
}

/*
 * Unmount: the session is over, so nothing holds any inode: no RELEASE or
 * FORGET can come any more (those the kernel had queued at an immediate
 * unmount are lost with the connection, and a file still open on a lazy
 * unmount can no longer reach us).  So every inode of the orphan list is
 * released now, as the kernel does at its last iput, and a clean image keeps
 * no orphans (e2fsck -fn reads a listed orphan as damage).  What cannot be
 * released (read-only, a failure) stays listed, consistently, for the next
 * mount.  The tables empty.
 */
void reap_clear(struct rfs *r)
{
	free(r->reapq);
	r->reapq = NULL;
	r->reaphead = r->nreap = r->capreap = 0;
}

void held_release_all(struct rfs *r)
{
	reap_clear(r);
	for (size_t i = 0; r->open_tab && i < r->open_cap; i++)
		while (r->open_tab[i]) {
			struct open_ino *o = r->open_tab[i];
			r->open_tab[i] = o->next;
			free(o);
		}
	if (r->open_tab != r->open_tab0)
		free(r->open_tab);
	r->open_tab = NULL;
	if (!r->ro && r->attached && orphans_pending(r) && !wr_begin(r)) {
		unsigned n = 0;
		int ret = wr_end(r, orphan_list_release(r, &n), false);
		if (ret)
			fprintf(stderr, "recon-fuse: cannot free the unlinked inodes at unmount: %s "
				"(they stay on the orphan list for the next mount)\n", strerror(-ret));
	}
	orphan_hints_clear(r);
	free(r->orphan_hints);
	r->orphan_hints = NULL;
	ofile_free(r);
}

/*
 * The on-disk orphan list is linked one way (s_last_orphan, then each
 * inode's i_dtime), and removal must rewrite the predecessor.  Walking from
 * the head makes freeing n orphans cost n^2/2 inode reads: tens of thousands
 * of files unlinked while the kernel held them take minutes.  So each listed
 * inode's predecessor is remembered here.  The hints are never trusted: the
 * predecessor must link to the inode on disk, or the list is walked (which
 * records what it passes).  A rollback forgets them all.
 */
struct orphan_hint {
	ext2_ino_t ino, prev;	/* prev 0: ino is the head */
	struct orphan_hint *next;
};
#define ORPHAN_HINT_BUCKETS 4096

static struct orphan_hint **hint_slot(struct rfs *r, ext2_ino_t ino)
{
	if (!r->orphan_hints)
		return NULL;
	struct orphan_hint **p = &r->orphan_hints[ino % ORPHAN_HINT_BUCKETS];
	while (*p && (*p)->ino != ino)
		p = &(*p)->next;
	return p;
}

/* Out of memory only loses a hint (the walk finds the predecessor). */
static void hint_set(struct rfs *r, ext2_ino_t ino, ext2_ino_t prev)
{
	if (!r->orphan_hints &&
	    !(r->orphan_hints = calloc(ORPHAN_HINT_BUCKETS, sizeof(*r->orphan_hints))))
		return;
	struct orphan_hint **p = hint_slot(r, ino);
	if (!*p) {
		*p = calloc(1, sizeof(**p));
		if (!*p)
			return;
		(*p)->ino = ino;
	}
	(*p)->prev = prev;
}

static void hint_drop(struct rfs *r, ext2_ino_t ino)
{
	struct orphan_hint **p = hint_slot(r, ino);
	if (p && *p) {
		struct orphan_hint *h = *p;
		*p = h->next;
		free(h);
	}
}

void orphan_hints_clear(struct rfs *r)
{
	ofile_forget(r);
	if (!r->orphan_hints)
		return;
	for (unsigned i = 0; i < ORPHAN_HINT_BUCKETS; i++)
		while (r->orphan_hints[i]) {
			struct orphan_hint *h = r->orphan_hints[i];
			r->orphan_hints[i] = h->next;
			free(h);
		}
}

/* In the orphan file when it has room (orphan_file.c says why), else at
 * the head of the list. */
int orphan_add(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in)
{
	int ret = ofile_add(r, ino);
	if (ret != -ENOSPC)
		return ret ? ret : put_inode(r, ino, in);
	ext2_ino_t head = r->fs->super->s_last_orphan;
	in->i_dtime = head;
	r->fs->super->s_last_orphan = ino;
	ext2fs_mark_super_dirty(r->fs);
	ret = put_inode(r, ino, in);
	if (!ret) {
		hint_set(r, ino, 0);
		if (head)
			hint_set(r, head, ino);
	}
	return ret;
}

/* The predecessor of ino on the list (0: the superblock), its inode in
 * *pin; from the hint when the disk agrees, else by walking from the head.
 * -ENOENT: ino is not listed. */
static int orphan_find_prev(struct rfs *r, ext2_ino_t ino, ext2_ino_t *prev,
			    struct ext2_inode *pin)
{
	struct orphan_hint **h = hint_slot(r, ino);
	if (h && *h) {
		ext2_ino_t p = (*h)->prev;
		if (!p && r->fs->super->s_last_orphan == ino) {
			*prev = 0;
			return 0;
		}
		if (p && !get_inode(r, p, pin) && pin->i_dtime == ino) {
			*prev = p;
			return 0;
		}
	}
	ext2_ino_t cur = r->fs->super->s_last_orphan, before = 0;
	unsigned guard = 0;
	while (cur && cur != ino && guard++ < r->fs->super->s_inodes_count) {
		if (get_inode(r, cur, pin))
			return -EIO;
		hint_set(r, cur, before);
		before = cur;
		cur = pin->i_dtime;
	}
	if (cur != ino)
		return -ENOENT;
	*prev = before;
	return 0;
}

int orphan_remove(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in)
{
	ext2_ino_t prev = 0, next = in->i_dtime;
	struct ext2_inode pin;

	int ret = ofile_remove(r, ino);
	if (ret != -ENOENT)
		return ret;
	ret = orphan_find_prev(r, ino, &prev, &pin);
	if (ret)
		return ret;
	if (!prev) {
		r->fs->super->s_last_orphan = next;
		ext2fs_mark_super_dirty(r->fs);
	} else {
		pin.i_dtime = next;
		ret = put_inode(r, prev, &pin);
		if (ret)
			return ret;
	}
	in->i_dtime = 0;
	hint_drop(r, ino);
	if (next)
		hint_set(r, next, prev);
	return 0;
}

/* A commit inside an operation (between steps of a huge punch): what came
 * before it stays, so the rollback point moves past it. */
errcode_t commit_midway(struct rfs *r)
{
	errcode_t e = rio_txn_boundary(r->fs, true);
	if (!e && r->sp_active)
		op_savepoint(r);
	return e;
}

/* Truncate ino's data to size bytes (smaller than its size).  When the
 * blocks past it take more than the open transaction has room for, the
 * inode goes on the orphan list with its final size before the first step,
 * so at each commit in between a crash ends as the truncate would (orphan
 * processing frees what is past i_size).  What came before is committed
 * first: the checker takes a linked inode on the orphan list only once its
 * creation is committed (a file made in this transaction).  The caller
 * writes the inode. */
int orphan_truncate(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, uint64_t size)
{
	struct open_ino *o = *open_slot(r, ino);
	bool was = o && o->orphan, listed = was;
	uint64_t bs = r->fs->blocksize;
	blk64_t keep = (size + bs - 1) / bs, end = 0, step = ~0ULL;
	int ret = 0;

	errcode_t e = bmap_end(r->fs, ino, in, &end);
	if (!e && !listed && end > keep && !(ret = punch_step(r, ino, in, end, true, &step)) &&
	    end - keep > step) {
		e = ext2fs_write_inode(r->fs, ino, in);
		if (!e)
			e = commit_midway(r);
		if (!e)
			e = ext2fs_inode_size_set(r->fs, in, size);
		if (!e && !(ret = orphan_add(r, ino, in)))
			listed = true;
	}
	if (!e && !ret)
		e = ext2fs_inode_size_set(r->fs, in, size);
	if (e)
		return e == EROFS ? -EROFS : -errmap(e);
	if (!ret)
		ret = punch_from(r, ino, in, keep, &listed);
	if (!listed || was)
		return ret;
	if (!ret)
		return orphan_remove(r, ino, in);
	/* listed and committed, then failed: it stays listed, the last
	 * release or the unmount finishes it (and an unlink does not list
	 * it twice) */
	if (o)
		o->orphan = true;
	return ret;
}

/* Free an inode with no links: its blocks, then the inode itself.  listed:
 * it is on the orphan list (it comes off in the transaction that frees it);
 * if not, it goes on the list before a commit can fall inside the release. */
int rfs_free_inode(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, bool listed)
{
	ext2_filsys fs = r->fs;
	errcode_t e;
	int ret;

	ret = punch_from(r, ino, in, 0, &listed);
	if (!ret && listed)
		ret = orphan_remove(r, ino, in);
	if (ret)
		return ret;
	blk64_t ea = ext2fs_file_acl_block(fs, in);
	if (ea) {
		__u32 count = 1;
		if (ea >= fs->super->s_first_data_block && ea < ext2fs_blocks_count(fs->super)) {
			e = ext2fs_adjust_ea_refcount3(fs, ea, NULL, -1, &count, ino);
			if (!e && count == 0)
				ext2fs_block_alloc_stats2(fs, ea, -1);
		}
		ext2fs_file_acl_block_set(fs, in, 0);
		ext2fs_iblk_sub_blocks(fs, in, 1);
	}
	in->i_links_count = 0;
	in->i_dtime = time(NULL);
	in->i_size = 0;
	in->i_size_high = 0;
	ret = put_inode(r, ino, in);
	if (ret)
		return ret;
	rio_txn_inode_alloc_stats(r->fs, ino, -1, LINUX_S_ISDIR(in->i_mode));
	return 0;
}

/* An inode of the orphan list, nothing holding it: freed if it has no
 * links, else (a truncate cut short) its blocks past i_size freed; off the
 * list either way, in the transaction that ends the work. */
static int orphan_release(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in)
{
	if (in->i_links_count == 0)
		return rfs_free_inode(r, ino, in, true);
	uint64_t bs = r->fs->blocksize;
	bool listed = true;
	int ret = punch_from(r, ino, in, (EXT2_I_SIZE(in) + bs - 1) / bs, &listed);
	if (!ret) {
		ret = orphan_remove(r, ino, in);
		if (ret == -ENOENT)
			return 0;   /* not listed: the unlink that listed it was undone */
	}
	return ret ? ret : put_inode(r, ino, in);
}

/* Drop one link of a non-directory (or the last of a directory). */
int drop_link(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in)
{
	if (LINUX_S_ISDIR(in->i_mode))
		in->i_links_count = 0;
	else if (in->i_links_count)
		in->i_links_count--;
	in->i_ctime = stamp_now(r, ino, T_C);
	if (in->i_links_count)
		return put_inode(r, ino, in);
	if (LINUX_S_ISDIR(in->i_mode))
		dindex_forget(r->di, ino);
	/* open, or held by the kernel: freed when nothing holds it */
	struct open_ino *o = *open_slot(r, ino);
	if (o && o->orphan)
		return put_inode(r, ino, in);   /* listed already (a cut-short truncate) */
	if (o) {
		int ret = orphan_add(r, ino, in);
		if (!ret)
			o->orphan = true;
		return ret;
	}
	return rfs_free_inode(r, ino, in, false);
}

static bool orphan_number_ok(ext2_filsys fs, ext2_ino_t ino)
{
	return ino >= EXT2_FIRST_INO(fs->super) && ino <= fs->super->s_inodes_count;
}

/* Why ino (a number orphan_number_ok accepts) cannot be an orphan (as the
 * kernel's ext4_orphan_get and e2fsck's release_orphan_inodes judge), or
 * NULL. */
static const char *not_an_orphan(struct rfs *r, ext2_ino_t ino, const struct ext2_inode *in)
{
	if (!ext2fs_test_inode_bitmap2(r->fs->inode_map, ino))
		return "is free in the inode bitmap";
	unsigned t = in->i_mode & LINUX_S_IFMT;
	if (t != LINUX_S_IFREG && t != LINUX_S_IFDIR && t != LINUX_S_IFLNK && t != LINUX_S_IFCHR &&
	    t != LINUX_S_IFBLK && t != LINUX_S_IFIFO && t != LINUX_S_IFSOCK)
		return "has a mode that is no file type";
	return NULL;
}

/* For the orphan file's entries: why ino cannot be an orphan, or NULL. */
static const char *orphan_unfit(struct rfs *r, ext2_ino_t ino)
{
	struct ext2_inode in;
	if (!orphan_number_ok(r->fs, ino))
		return "is reserved or beyond the inode count";
	struct orphan_hint **h = hint_slot(r, ino);
	if (h && *h)
		return "is on the orphan list too";   /* (orphan_list_cut hinted each) */
	if (get_inode(r, ino, &in))
		return "cannot be read";
	return not_an_orphan(r, ino, &in);
}

bool orphans_pending(const struct rfs *r)
{
	return r->fs->super->s_last_orphan || ofile_pending(r);
}

/*
 * The list is untrusted: walked from its head, it is cut before the first
 * link naming a reserved inode, a free inode, no inode at all, or one
 * already passed (a loop), saying so; what follows is never freed (the
 * kernel and e2fsck stop there too, and e2fsck deals with the rest).  Cut
 * before anything is released, so that every commit during the release
 * finds a list the checker approves.
 */
static int orphan_list_cut(struct rfs *r)
{
	ext2_filsys fs = r->fs;
	uint8_t *seen = calloc(fs->super->s_inodes_count / 8 + 1, 1);
	ext2_ino_t prev = 0, cur = fs->super->s_last_orphan;
	struct ext2_inode pin, in;

	if (!seen)
		return -ENOMEM;
	while (cur) {
		const char *why = NULL;
		if (!orphan_number_ok(fs, cur))
			why = "is reserved or beyond the inode count";
		else if (seen[cur / 8] & (1u << (cur % 8)))
			why = "is listed twice: the list loops";
		else if (get_inode(r, cur, &in))
			why = "cannot be read";
		else
			why = not_an_orphan(r, cur, &in);
		if (why) {
			if (prev)
				fprintf(stderr, "recon-fuse: orphan list: inode %u links to %u, which %s; "
					"orphan processing stops before it (run e2fsck)\n", prev, cur, why);
			else
				fprintf(stderr, "recon-fuse: orphan list: inode %u %s; orphan processing "
					"stopped there (run e2fsck)\n", cur, why);
			break;
		}
		seen[cur / 8] |= (uint8_t)(1u << (cur % 8));
		hint_set(r, cur, prev);
		prev = cur;
		pin = in;
		cur = in.i_dtime;
	}
	free(seen);
	if (!cur)
		return 0;
	if (!prev) {
		fs->super->s_last_orphan = 0;
		ext2fs_mark_super_dirty(fs);
		return 0;
	}
	pin.i_dtime = 0;
	return put_inode(r, prev, &pin);
}

/* Release ino, an inode of the list or the orphan file, in the open
 * transaction, committing first when its room has run out.  *n counts it. */
static int orphan_release_one(struct rfs *r, ext2_ino_t ino, unsigned *n)
{
	struct ext2_inode in;
	blk64_t step;
	int ret = punch_step(r, 0, NULL, 0, false, &step);
	if (!ret && !step) {
		errcode_t e = commit_midway(r);
		ret = e ? (e == EROFS ? -EROFS : -errmap(e)) : 0;
	}
	if (!ret)
		ret = get_inode(r, ino, &in);
	if (!ret)
		ret = orphan_release(r, ino, &in);
	if (ret)
		fprintf(stderr, "recon-fuse: orphan inode %u: %s\n", ino, strerror(-ret));
	else
		++*n;
	return ret;
}

/* Cut the list and the orphan file before anything is released. */
static int orphan_lists_cut(struct rfs *r)
{
	int ret = orphan_list_cut(r);
	return ret ? ret : ofile_cut(r, orphan_unfit);
}

/* Release the orphan file's entries and the whole orphan list (unmount, or
 * a mount with no reaper), an orphan at a time, each off the list in the
 * transaction that releases it, committing between inodes when the room
 * runs out.  *n counts those released. */
static int orphan_list_release(struct rfs *r, unsigned *n)
{
	ext2_filsys fs = r->fs;
	unsigned guard = 0;
	ext2_ino_t ino;

	int ret = orphan_lists_cut(r);
	while (!ret && !(ret = ofile_first(r, &ino)) && (ino || (ino = fs->super->s_last_orphan)) &&
	       guard++ <= fs->super->s_inodes_count)
		ret = orphan_release_one(r, ino, n);
	return ret;
}

struct ino_vec {
	ext2_ino_t *v;
	size_t n, cap;
};

static int ino_vec_push(struct rfs *r, ext2_ino_t ino, void *arg)
{
	struct ino_vec *iv = arg;
	(void)r;
	return ino_append(&iv->v, &iv->n, &iv->cap, ino);
}

/* Every inode of the orphan file and (after it) of the list, head first;
 * after the cut, so the list ends and holds no inode twice. */
static int orphan_lists_gather(struct rfs *r, struct ino_vec *all)
{
	ext2_filsys fs = r->fs;
	unsigned guard = 0;
	int ret = ofile_each(r, ino_vec_push, all);
	for (ext2_ino_t ino = fs->super->s_last_orphan;
	     !ret && ino && guard++ <= fs->super->s_inodes_count;) {
		struct ext2_inode in;
		ret = ino_vec_push(r, ino, all);
		if (!ret)
			ret = get_inode(r, ino, &in);
		if (!ret)
			ino = in.i_dtime;
	}
	return ret;
}

/*
 * Mount-time processing when the reaper will run: an orphan with no links
 * is unreachable, so nobody waits for it; it goes to the reaper's queue and
 * stays listed until the reaper's step that frees it, as after a runtime
 * unlink (a huge one would otherwise hold the mount back for minutes).  One
 * with links is a truncate cut short: the file is visible, and a reader must
 * not find the blocks past i_size (nor a writer have them reused by its own
 * extension), so it is completed here, before the mount serves.  From the
 * list's tail, so the queue's tail, which the reaper batches first, is the
 * list's head.  *n counts those released, *queued those left to the reaper.
 */
static int orphan_list_defer(struct rfs *r, unsigned *n, unsigned *queued)
{
	struct ino_vec all = { 0 };
	int ret = orphan_lists_cut(r);
	if (!ret)
		ret = orphan_lists_gather(r, &all);
	for (size_t i = all.n; !ret && i--;) {
		struct ext2_inode in;
		ret = get_inode(r, all.v[i], &in);
		if (!ret && in.i_links_count == 0 && reap_push(r, all.v[i]) == 0)
			++*queued;
		else if (!ret)
			ret = orphan_release_one(r, all.v[i], n);
	}
	free(all.v);
	if (ret)
		reap_clear(r);
	return ret;
}

/* Free (or truncate) the inodes of the on-disk orphan list at mount, or
 * queue them for the reaper (orphan_list_defer). */
int rfs_process_orphans(struct rfs *r)
{
	unsigned n = 0, queued = 0;
	int ret = reaper_planned(r) ? orphan_list_defer(r, &n, &queued) : orphan_list_release(r, &n);
	if (queued)
		fprintf(stderr, "recon-fuse: processed %u orphan inode(s), %u unlinked one(s) left to "
			"the reaper (listed until freed)\n", n + queued, queued);
	else if (n)
		fprintf(stderr, "recon-fuse: processed %u orphan inode(s)\n", n);
	return ret;
}

void reap_resume(struct rfs *r)
{
	if (!reap_pending(r))
		return;
	if (r->reap_kick)
		r->reap_kick(r);
	else
		reap_all(r);
}
