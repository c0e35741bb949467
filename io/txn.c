/*
 * io/txn.c - metadata transactions: every channel write after attach lands
 * in the open transaction's overlay; at a boundary libext2fs's in-memory
 * bitmaps, descriptors and superblock are flushed into it, the shadow
 * checker judges it, and only an approved transaction is logged through the
 * journal (or, without one, written in place), written home and checkpointed.
 *
 * One transaction commits at a time.  With async_commit the commit thread
 * checks, logs and checkpoints transaction N while N+1 builds (reads see
 * N+1, then N, then the approved state); otherwise, and always with force,
 * the commit runs in rio_txn_boundary and is durable on return.  Each commit
 * is checkpointed before the next is logged, so the log holds at most one
 * transaction and revoke records only matter for blocks logged by the
 * current or the previous transaction.
 *
 * The overlay and the block sets live in overlay.c, the flush of libext2fs's
 * bitmaps, descriptors and superblock in flush.c, the test-only corruption
 * injector in fault.c; txn_internal.h names what they share.  What
 * stays here is the commit path and the public calls, which share the
 * commit thread's locking.
 */
#include <errno.h>
#include <signal.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include "txn_internal.h"


/* ---- violations ---- */

static void set_last_violation(struct txn_totals *tt, const char *text)
{
	free(tt->last_violation);
	tt->last_violation = strdup(text);
}

static void add_violation(struct txn_totals *tt, const char *inv, char **records, size_t n)
{
	if (tt->nviol == tt->capviol) {
		size_t cap = tt->capviol ? tt->capviol * 2 : 8;
		struct txn_violation *v = realloc(tt->viol, cap * sizeof(*v));
		if (!v)
			goto drop;
		tt->viol = v;
		tt->capviol = cap;
	}
	char *name = strdup(inv);
	if (!name)
		goto drop;
	tt->viol[tt->nviol].invariant = name;
	tt->viol[tt->nviol].records = records;
	tt->viol[tt->nviol].nrecords = n;
	tt->nviol++;
	return;
drop:
	for (size_t i = 0; i < n; i++)
		free(records[i]);
	free(records);
}

/* Records the verdict's violations in the totals and the last-violation
 * text, and prints them (what memory allows: a rejection is never lost for
 * want of its description, only the description). */
static void record_verdict(struct txn_manager *t, const struct chk_verdict *v)
{
	struct txn_totals *tt = &t->rc->totals;
	size_t cap = 4096, len = 0;
	char *text = malloc(cap);
	if (!text)
		return;
	text[0] = 0;
	for (size_t i = 0; i < chk_verdict_nviolations(v); i++) {
		const struct chk_violation *vi = chk_verdict_violation(v, i);
		const char *inv = vi->inv && vi->inv->id ? vi->inv->id : "?";
		char **recs = calloc(vi->nrecords ? vi->nrecords : 1, sizeof(*recs));
		size_t nrec = 0;
		char line[512];
		int l = snprintf(line, sizeof(line), "%s: %s", inv, vi->detail ? vi->detail : "");
		for (size_t r = 0; r <= vi->nrecords; r++) {
			if (r > 0) {
				const struct chk_record *rec = chk_verdict_record(v, vi->records[r - 1]);
				char rb[384];
				chk_record_format(rec, rb, sizeof(rb));
				if (recs && (recs[nrec] = strdup(rb)))
					nrec++;
				l = snprintf(line, sizeof(line), "  %s", rb);
			}
			if (l < 0)
				continue;
			size_t need = len + (size_t)l + 2;
			if (need > cap) {
				size_t ncap = need * 2;
				char *nt = realloc(text, ncap);
				if (!nt)
					continue;
				text = nt;
				cap = ncap;
			}
			len += (size_t)snprintf(text + len, cap - len, "%s\n", line);
		}
		if (recs) {
			pthread_mutex_lock(&tt->lock);
			add_violation(tt, inv, recs, nrec);
			pthread_mutex_unlock(&tt->lock);
		}
	}
	pthread_mutex_lock(&tt->lock);
	set_last_violation(tt, text);
	pthread_mutex_unlock(&tt->lock);
	fprintf(stderr, "recon-fuse: transaction rejected by the checker:\n%s", text);
	free(text);
}

/* ---- commit ---- */

/* A transaction closed at a boundary: frozen overlay blocks (sorted) and the
 * blocks it frees.  Built and retired by the file-system thread; run (check,
 * log, write home) by the commit thread or, synchronously, by the caller. */
struct cset {
	struct ovl_ent **ents;
	size_t n;
	struct ovl_ent **hash;      /* lookups for reads while it is in flight */
	size_t nhash;
	struct blkset freed;
	uint64_t tid;
	errcode_t result;
	bool done;                  /* under t->cm */
};

static int cmp_ent(const void *a, const void *b)
{
	const struct ovl_ent *x = *(struct ovl_ent *const *)a, *y = *(struct ovl_ent *const *)b;
	return x->blk < y->blk ? -1 : x->blk > y->blk;
}

static struct ovl_ent *cset_find(const struct cset *c, uint64_t blk)
{
	if (!c || !c->nhash)
		return NULL;
	for (struct ovl_ent *e = c->hash[bs_slot(blk, c->nhash)]; e; e = e->hnext)
		if (e->blk == blk)
			return e->dropped ? NULL : e;
	return NULL;
}

static void cset_free(struct cset *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++) {
		free(c->ents[i]->data);
		free(c->ents[i]->base);
		free(c->ents[i]->undo);
		free(c->ents[i]);
	}
	free(c->ents);
	free(c->hash);
	blkset_clear(&c->freed);
	free(c);
}

struct ovl_ent *committing_find(struct txn_manager *t, uint64_t blk)
{
	return cset_find(t->committing, blk);
}

/* The open transaction is lost (rejected, or built on a rejected or failed
 * one): nothing of it reaches the disk; libext2fs's in-memory state now runs
 * ahead of the disk and the caller must re-read it.  ovl_lock held. */
static void discard(struct txn_manager *t)
{
	ovl_clear(t);
	restore_freed_marks(t);
	blkset_clear(&t->freed);
	t->rc->totals.failed = true;
}

/* Home writes of an approved transaction, in one sorted batch.  Under
 * ovl_lock, so that a data write racing for a block of it either marks it
 * dropped first (and it is skipped) or waits until it is home. */
static errcode_t write_home(struct txn_manager *t, struct cset *c)
{
	pthread_mutex_lock(&t->rc->ovl_lock);
	struct dev_req *reqs = calloc(c->n ? c->n : 1, sizeof(*reqs));
	if (!reqs) {
		pthread_mutex_unlock(&t->rc->ovl_lock);
		return ENOMEM;
	}
	size_t n = 0;
	for (size_t i = 0; i < c->n; i++) {
		struct ovl_ent *e = c->ents[i];
		if (e->dropped)
			continue;
		reqs[n].write = true;
		reqs[n].off = e->blk * t->bs;
		reqs[n].len = t->bs;
		reqs[n].buf = e->data;
		n++;
		/* the cache holds approved contents: it takes the new ones
		 * (clean: they are written home right here) */
		rio_cache_update_clean(&t->rc->cache, e->blk, e->data);
	}
	errcode_t err = rio_dev_submit(&t->rc->dev, reqs, n);
	pthread_mutex_unlock(&t->rc->ovl_lock);
	free(reqs);
	return err;
}

/* Check, log, write home, checkpoint.  Runs without ovl_lock (except for
 * the home writes); touches the checker, the journal and the counters,
 * which only the thread running commits uses. */
static errcode_t run_cset(struct txn_manager *t, struct cset *c)
{
	struct rio_chan *rc = t->rc;
	struct txn_totals *tt = &rc->totals;
	size_t n = c->n;
	errcode_t err = 0;
	struct chk_verdict *verdict = NULL;
	if (t->chk) {
		struct chk_write *w = calloc(n, sizeof(*w));
		if (!w) {
			tt->failed = true;
			return ENOMEM;
		}
		for (size_t i = 0; i < n; i++) {
			w[i].offset = c->ents[i]->blk * t->bs;
			w[i].len = t->bs;
			w[i].data = c->ents[i]->data;
		}
		int ret = chk_check(t->chk, w, n, &verdict);
		free(w);
		if (ret < 0) {
			/* the check could not run: not approved */
			char msg[160];
			snprintf(msg, sizeof(msg), "checker failed to run: %s\n", strerror(-ret));
			pthread_mutex_lock(&tt->lock);
			set_last_violation(tt, msg);
			pthread_mutex_unlock(&tt->lock);
			fprintf(stderr, "recon-fuse: %s", msg);
			tt->failed = true;
			return EIO;
		}
		tt->blocks_checked += n;
		if (!chk_verdict_ok(verdict)) {
			record_verdict(t, verdict);
			if (rio_cfg.on_violation != RIO_ONV_LOG) {
				chk_verdict_free(verdict);
				tt->failed = true;
				return EROFS;
			}
			fprintf(stderr, "recon-fuse: on_violation=log: WRITING THE REJECTED TRANSACTION\n");
		}
	}

	const void **data = malloc(n * sizeof(*data));
	uint64_t *blks = malloc(n * sizeof(*blks));
	uint64_t *revoke = malloc((c->freed.count + 1) * sizeof(*revoke));
	struct blkset logged = { 0 };
	if (!data || !blks || !revoke) {
		err = ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		data[i] = c->ents[i]->data;
		blks[i] = c->ents[i]->blk;
	}
	if (t->journal) {
		/* a block logged by this or the previous transaction and freed now
		 * must not be replayed over what reuses it */
		size_t nrevoke = 0;
		for (size_t i = 0; i < c->freed.cap; i++) {
			uint64_t b = c->freed.slot[i];
			if (b && (blkset_has(&t->logged_prev, b) || cset_find(c, b)))
				revoke[nrevoke++] = b;
		}
		/* data=ordered: every data write of this transaction has completed
		 * (rio_data_io waits); jbd_log flushes before its commit block,
		 * which makes them durable first */
		err = jbd_log(t->jbd, blks, data, n, revoke, nrevoke);
		if (err)
			goto fail;
		tt->blocks_journalled += n;
		for (size_t i = 0; i < n && !err; i++)
			err = blkset_add(&logged, blks[i]);
		if (err)
			goto fail;
	} else {
		/* write in place: data first, durably */
		err = rio_dev_flush(&rc->dev);
		if (err)
			goto fail;
	}
	err = write_home(t, c);
	if (!err)
		err = rio_dev_flush(&rc->dev);
	if (!err && t->journal)
		err = jbd_checkpointed(t->jbd);
	if (err)
		goto fail;
	if (verdict) {
		pthread_rwlock_wrlock(&t->chk_lock);
		int ret = chk_advance(t->chk, verdict);
		pthread_rwlock_unlock(&t->chk_lock);
		chk_verdict_free(verdict);
		verdict = NULL;
		if (ret < 0) {
			/* the checker's approved state is lost: it cannot judge the
			 * next transaction; stop taking writes */
			fprintf(stderr, "recon-fuse: checker could not advance: %s\n", strerror(-ret));
			tt->failed = true;
			err = EIO;
		}
	}
	tt->transactions++;
	blkset_clear(&t->logged_prev);
	t->logged_prev = logged;
	free(data);
	free(blks);
	free(revoke);
	return err;
fail:
	/* an I/O error mid-commit: the device (or the log) is in an unknown
	 * state; what the journal holds is replayed at the next mount */
	fprintf(stderr, "recon-fuse: commit failed: %s\n", error_message(err));
	if (verdict)
		chk_verdict_free(verdict);
	blkset_clear(&logged);
	free(data);
	free(blks);
	free(revoke);
	tt->io_failed = true;
	tt->failed = true;
	return err;
}

/* Close the open transaction into a cset (file-system thread, ovl_lock
 * held).  *out = NULL when there is nothing to commit. */
static errcode_t prepare(struct txn_manager *t, struct cset **out)
{
	*out = NULL;
	release_freed_marks(t);
	errcode_t err = flush_fs_state(t);
	if (err) {
		discard(t);
		return err;
	}
	/* unchanged rewrites are dropped */
	size_t n = 0;
	for (size_t i = 0; i < t->nents; i++)
		if (ovl_changed(t, t->ents[i]))
			t->ents[n++] = t->ents[i];
		else {
			free(t->ents[i]->data);
			free(t->ents[i]->base);
			free(t->ents[i]->undo);
			free(t->ents[i]);
		}
	t->nents = n;
	/* the hash chains still name the entries just freed: rebuild them
	 * before anything (fault injection, discard) looks blocks up */
	if (t->nhash) {
		memset(t->hash, 0, t->nhash * sizeof(*t->hash));
		for (size_t i = 0; i < n; i++) {
			size_t s = bs_slot(t->ents[i]->blk, t->nhash);
			t->ents[i]->hnext = t->hash[s];
			t->hash[s] = t->ents[i];
		}
	}
	/* a commit ends any savepoint */
	t->sp_gen = 0;
	t->sp_nfreed = t->sp_nunfreed = 0;
	if (n == 0) {
		/* nothing changed on disk: the freed blocks (if any) are free */
		blkset_clear(&t->freed);
		if (t->nhash)
			memset(t->hash, 0, t->nhash * sizeof(*t->hash));
		t->opened_ns = 0;
		return 0;
	}
	if (t->journal && n > jbd_max_transaction_blocks(t->jbd)) {
		fprintf(stderr, "recon-fuse: transaction of %zu blocks exceeds the journal's limit of %u\n",
			n, jbd_max_transaction_blocks(t->jbd));
		discard(t);
		return EFBIG;
	}
	inject_corruption(t);
	qsort(t->ents, n, sizeof(*t->ents), cmp_ent);

	struct cset *c = calloc(1, sizeof(*c));
	if (!c) {
		discard(t);
		return ENOMEM;
	}
	/* the overlay's arrays move into the cset; the open transaction
	 * starts empty */
	c->ents = t->ents;
	c->n = n;
	c->hash = t->hash;
	c->nhash = t->nhash;
	memset(c->hash, 0, c->nhash * sizeof(*c->hash));
	for (size_t i = 0; i < n; i++) {
		size_t s = bs_slot(c->ents[i]->blk, c->nhash);
		c->ents[i]->hnext = c->hash[s];
		c->hash[s] = c->ents[i];
	}
	c->freed = t->freed;
	memset(&t->freed, 0, sizeof(t->freed));
	c->tid = t->tid_open++;
	t->ents = NULL;
	t->nents = t->capents = 0;
	t->hash = NULL;
	t->nhash = 0;
	t->opened_ns = 0;
	/* what it frees stays allocated in memory until it is durable */
	for (size_t i = 0; i < c->freed.cap; i++)
		if (c->freed.slot[i])
			ext2fs_mark_block_bitmap2(t->fs->block_map, c->freed.slot[i]);
	*out = c;
	return 0;
}

static void wait_cset(struct txn_manager *t, struct cset *c)
{
	pthread_mutex_lock(&t->cm);
	while (!c->done)
		pthread_cond_wait(&t->cv, &t->cm);
	pthread_mutex_unlock(&t->cm);
}

/* The committing transaction finished (file-system thread): its freed
 * blocks become allocatable; if it failed, what was built on it goes too. */
static errcode_t retire(struct txn_manager *t)
{
	struct cset *c = t->committing;
	if (!c)
		return 0;
	wait_cset(t, c);
	pthread_mutex_lock(&t->rc->ovl_lock);
	errcode_t err = c->result;
	if (!err) {
		if (c->tid > t->tid_durable)
			t->tid_durable = c->tid;
		for (size_t i = 0; i < c->freed.cap; i++)
			if (c->freed.slot[i])
				ext2fs_unmark_block_bitmap2(t->fs->block_map, c->freed.slot[i]);
	} else {
		discard(t);
	}
	t->committing = NULL;
	cset_free(c);
	pthread_mutex_unlock(&t->rc->ovl_lock);
	return err;
}

static bool cset_done(struct txn_manager *t, struct cset *c)
{
	pthread_mutex_lock(&t->cm);
	bool d = c->done;
	pthread_mutex_unlock(&t->cm);
	return d;
}

static void *commit_thread(void *arg)
{
	struct txn_manager *t = arg;
	pthread_mutex_lock(&t->cm);
	for (;;) {
		while (!t->queued && !t->stop)
			pthread_cond_wait(&t->cv, &t->cm);
		if (!t->queued)
			break;
		struct cset *c = t->queued;
		t->queued = NULL;
		pthread_mutex_unlock(&t->cm);
		errcode_t err = run_cset(t, c);
		pthread_mutex_lock(&t->cm);
		c->result = err;
		c->done = true;
		pthread_cond_broadcast(&t->cv);
	}
	pthread_mutex_unlock(&t->cm);
	return NULL;
}

/* Commit the open transaction.  Waits for the one in flight first (one
 * committing transaction at a time, as jbd).  With `wait` (or without a
 * commit thread) it runs here and is durable on return; otherwise the
 * commit thread runs it while the next transaction builds. */
static errcode_t txn_commit(struct txn_manager *t, bool wait)
{
	struct rio_chan *rc = t->rc;
	errcode_t err = retire(t);
	if (err)
		return err;
	struct cset *c;
	pthread_mutex_lock(&rc->ovl_lock);
	err = prepare(t, &c);
	pthread_mutex_unlock(&rc->ovl_lock);
	if (err)
		return err;
	if (!c) {
		/* fsync of data alone: nothing to log, but the data must be
		 * durable; then the open transaction counts as committed */
		if (!wait)
			return 0;
		err = rio_dev_flush(&rc->dev);
		if (!err)
			t->tid_durable = t->tid_open++;
		return err;
	}
	t->committing = c;
	if (t->thread_running && !wait) {
		pthread_mutex_lock(&t->cm);
		t->queued = c;
		pthread_cond_broadcast(&t->cv);
		pthread_mutex_unlock(&t->cm);
		return 0;
	}
	err = run_cset(t, c);
	pthread_mutex_lock(&t->cm);
	c->result = err;
	c->done = true;
	pthread_mutex_unlock(&t->cm);
	return retire(t);
}

/* ---- the data guard ---- */

/* Data of inode `ino` is about to be written to the blocks of ext: each must
 * be free or a data block of ino in the checker's approved state.  Blocks a
 * transaction not yet approved frees are never handed out again before the
 * free is approved (the freed sets above), so a legitimate write always
 * finds its block free or its own there.  A refusal is a violation: recorded
 * and printed as a rejection is, the file system fails (EIO for this write,
 * nothing of it written), unless on_violation=log lets it through. */
errcode_t rio_txn_data_guard(struct txn_manager *t, ext2_ino_t ino,
			     const struct rio_extent *ext, unsigned n)
{
	if (!t->chk)
		return 0;   /* checker off: no approved owner map to consult */
	bool bad = false;
	uint64_t blk = 0;
	struct chk_block_info info = { 0 };
	pthread_rwlock_rdlock(&t->chk_lock);
	for (unsigned i = 0; i < n && !bad; i++)
		for (uint32_t k = 0; k < ext[i].count && !bad; k++)
			if (!chk_data_block_ok(t->chk, ext[i].blk + k, ino)) {
				bad = true;
				blk = ext[i].blk + k;
				chk_block_info(t->chk, blk, &info);
			}
	pthread_rwlock_unlock(&t->chk_lock);
	if (!bad)
		return 0;

	struct txn_totals *tt = &t->rc->totals;
	char text[512], what[160], rec1[160], rec2[160];
	bool group_owned = !strcmp(info.type, "bbitmap") || !strcmp(info.type, "ibitmap") ||
			   !strcmp(info.type, "itable");
	bool ino_refused = !strcmp(info.type, "free") ||
			   (!strcmp(info.type, "data") && info.owner == ino);
	if (ino_refused)
		snprintf(what, sizeof(what), "%s, but inode %u may not own file data (reserved or "
			 "journal inode)", info.type, ino);
	else if (group_owned)
		snprintf(what, sizeof(what), "%s of group %u (static metadata)", info.type, info.owner);
	else if (info.owner == 0)
		snprintf(what, sizeof(what), "%s (static metadata)", info.type);
	else
		snprintf(what, sizeof(what), "%s block %u of inode %u", info.type, info.lblk, info.owner);
	snprintf(text, sizeof(text),
		 "INV_BLOCK_OWNED_ONCE: data write of inode %u to block %" PRIu64 " refused before "
		 "it reached the disk: the checker's approved state has that block as %s%s\n",
		 ino, blk, what, !ino_refused ?
		 " (a block bitmap that says it is free is wrong)" : "");
	snprintf(rec1, sizeof(rec1), "inode | %u | data write | 0 | %" PRIu64, ino, blk);
	snprintf(rec2, sizeof(rec2), "%s | %u | %s block | %" PRIu64 " | %" PRIu64,
		 group_owned ? "bgd" : "inode", info.owner, info.type, blk, blk);
	char **recs = calloc(2, sizeof(*recs));
	size_t nrec = 0;
	if (recs) {
		if ((recs[nrec] = strdup(rec1)))
			nrec++;
		if ((recs[nrec] = strdup(rec2)))
			nrec++;
	}
	size_t len = strlen(text);
	snprintf(text + len, sizeof(text) - len, "  %s\n  %s\n", rec1, rec2);
	pthread_mutex_lock(&tt->lock);
	if (recs)
		add_violation(tt, "INV_BLOCK_OWNED_ONCE", recs, nrec);
	set_last_violation(tt, text);
	pthread_mutex_unlock(&tt->lock);
	fprintf(stderr, "recon-fuse: data write refused by the guard:\n%s", text);
	if (rio_cfg.on_violation == RIO_ONV_LOG) {
		fprintf(stderr, "recon-fuse: on_violation=log: WRITING THE REFUSED DATA\n");
		return 0;
	}
	tt->failed = true;
	return EIO;
}

/* ---- public calls ---- */

static struct rio_chan *chan_of_fs(ext2_filsys fs)
{
	if (!fs || !fs->io || fs->io->magic != EXT2_ET_MAGIC_IO_CHANNEL ||
	    fs->io->manager != rio_io_manager)
		return NULL;
	return rio_chan_of(fs->io);
}

static int approved_zero_cb(void *ctx, uint64_t offset, size_t len)
{
	return rio_approved_zero(ctx, offset, len);
}

/* The checker's error convention (0 or -errno) for an errcode_t: libext2fs's
 * own codes have no errno and become -EIO. */
static int chk_result(errcode_t err)
{
	return !err ? 0 : err < 256 ? -(int)err : -EIO;
}

static int approved_read_cb(void *ctx, uint64_t offset, void *buf, size_t len)
{
	return chk_result(rio_approved_read(ctx, offset, len, buf));
}

/* Attach a checker to what rc serves through read; EXT2_ET_UNSUPP_FEATURE
 * for an image the checker does not model. */
static errcode_t attach_checker(struct rio_chan *rc, chk_read_fn read, chk_zero_fn zero,
			    struct chk_fs **out)
{
	char msg[256] = "";
	struct chk_options opt = { .cache_bytes = (size_t)rio_cfg.checker_cache_mb << 20,
				   .zero = zero };
	/* the attach reads every group's bitmaps and the tables in use once */
	bool fill = rio_cache_set_fill(&rc->cache, false);
	int ret = chk_attach(out, read, rc, &opt, msg, sizeof(msg));
	rio_cache_set_fill(&rc->cache, fill);
	if (ret < 0) {
		fprintf(stderr, "recon-fuse: checker: %s\n", msg[0] ? msg : strerror(-ret));
		return ret == -EINVAL ? EXT2_ET_UNSUPP_FEATURE : (errcode_t)-ret;
	}
	return 0;
}

/* A thread of io's own takes no signals: they belong to the caller's
 * threads (the daemon's exit signals must interrupt its FUSE loop).
 * pthread_create's result. */
static int start_quiet_thread(pthread_t *th, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int ret = pthread_create(th, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ret;
}

/* ---- the checker's attach, begun early ----
 * On a large disk the attach reads every group's bitmaps, as libext2fs does
 * just before it: begun beside libext2fs's pass, the two wait on the device
 * together.  Until rio_txn_attach takes it over it reads the device itself
 * (the cache's lock is held across a read that misses, so libext2fs's pass
 * would serialize with it); the channel had no dirty block when it began, and
 * any later write but the primary superblock's makes what it read stale. */
#define PREP_SPARSE_READ (64u << 10)

struct txn_prep {
	pthread_t thread;
	struct rio_chan *rc;
	struct chk_fs *chk;
	int ret;
	bool joined;          /* no thread: a checker kept by rio_image_check */
	atomic_bool direct;   /* reads go to the device, not the approved state */
	atomic_bool stale;
	atomic_bool cancel;
};

static int prep_read_cb(void *ctx, uint64_t offset, void *buf, size_t len)
{
	struct rio_chan *rc = ctx;
	struct txn_prep *p = rc->prep;
	if (!p || !atomic_load(&p->direct))
		return approved_read_cb(rc, offset, buf, len);
	if (atomic_load(&p->cancel))
		return -ECANCELED;
	/* a whole inode table is mostly a hole on an image file: skipped, as
	 * the cache's large reads skip it, not zero-filled by the host */
	return chk_result(len >= PREP_SPARSE_READ ? rio_dev_pread_sparse(&rc->dev, offset, buf, len)
						  : rio_dev_pread(&rc->dev, offset, buf, len));
}

static int prep_zero_cb(void *ctx, uint64_t offset, size_t len)
{
	struct rio_chan *rc = ctx;
	struct txn_prep *p = rc->prep;
	if (!p || !atomic_load(&p->direct))
		return approved_zero_cb(rc, offset, len);
	return rio_dev_is_hole(&rc->dev, offset, len);
}

static void *prep_main(void *arg)
{
	struct txn_prep *p = arg;
	char msg[256];
	struct chk_options opt = { .cache_bytes = (size_t)rio_cfg.checker_cache_mb << 20,
				   .zero = prep_zero_cb };
	p->ret = chk_attach(&p->chk, prep_read_cb, p->rc, &opt, msg, sizeof(msg));
	return NULL;
}

void rio_txn_prep_note_write(struct rio_chan *rc, uint64_t off, size_t len)
{
	if (rc->prep && (off < SUPERBLOCK_OFFSET || off + len > SUPERBLOCK_OFFSET + SUPERBLOCK_SIZE))
		atomic_store(&rc->prep->stale, true);
}

/* Wait for the early attach: its checker when usable (from here on reading
 * the approved state, as any checker), else NULL. */
static struct chk_fs *prep_take(struct rio_chan *rc)
{
	struct txn_prep *p = rc->prep;
	if (!p)
		return NULL;
	if (!p->joined)
		pthread_join(p->thread, NULL);
	atomic_store(&p->direct, false);
	struct chk_fs *chk = p->ret == 0 && !atomic_load(&p->stale) ? p->chk : NULL;
	if (!chk)
		chk_detach(p->chk);
	if (chk && chk_refresh_super(chk)) {
		chk_detach(chk);
		chk = NULL;
	}
	rc->prep = NULL;
	free(p);
	return chk;
}

/* Hand chk, a checker of the state on disk, to rio_txn_attach as an early
 * attach that has finished (the same staleness rules).  Takes chk. */
static void prep_keep(struct rio_chan *rc, struct chk_fs *chk)
{
	struct txn_prep *p = calloc(1, sizeof(*p));
	if (!p) {
		chk_detach(chk);
		return;
	}
	p->rc = rc;
	p->chk = chk;
	p->joined = true;
	rc->prep = p;
}

void rio_txn_prep_drop(struct rio_chan *rc)
{
	if (rc->prep) {
		atomic_store(&rc->prep->cancel, true);
		chk_detach(prep_take(rc));
	}
}

errcode_t rio_txn_prepare(ext2_filsys fs)
{
	struct rio_chan *rc = chan_of_fs(fs);
	if (!rc)
		return EXT2_ET_MAGIC_IO_CHANNEL;
	if (!rio_cfg.checker || rc->txn || rc->prep || rc->replay || !(rc->flags & IO_FLAG_RW) ||
	    rio_cache_dirty(&rc->cache))
		return 0;
	struct txn_prep *p = calloc(1, sizeof(*p));
	if (!p)
		return ENOMEM;
	p->rc = rc;
	atomic_store(&p->direct, true);
	rc->prep = p;
	int ret = start_quiet_thread(&p->thread, prep_main, p);
	if (ret) {
		rc->prep = NULL;
		free(p);
		return (errcode_t)ret;
	}
	return 0;
}

void rio_txn_free(struct txn_manager *t)
{
	if (!t)
		return;
	if (t->thread_running) {
		/* the thread runs what is queued before it stops */
		pthread_mutex_lock(&t->cm);
		t->stop = true;
		pthread_cond_broadcast(&t->cv);
		pthread_mutex_unlock(&t->cm);
		pthread_join(t->thread, NULL);
		t->thread_running = false;
	}
	cset_free(t->committing);
	t->committing = NULL;
	flush_free(t);
	pthread_mutex_destroy(&t->cm);
	pthread_cond_destroy(&t->cv);
	pthread_rwlock_destroy(&t->chk_lock);
	ovl_clear(t);
	free(t->ents);
	free(t->hash);
	blkset_clear(&t->freed);
	blkset_clear(&t->logged_prev);
	free(t->sp_freed);
	free(t->sp_unfreed);
	if (t->jbd)
		jbd_close(t->jbd);
	if (t->chk) {
		struct chk_stats cs;
		chk_get_stats(t->chk, &cs);
		t->rc->totals.chk_cpu_ns += cs.cpu_ns;
		t->rc->totals.chk_scan_ns += cs.scan_cpu_ns;
		t->rc->totals.chk_hits += cs.cache_hits;
		t->rc->totals.chk_misses += cs.cache_misses;
		chk_detach(t->chk);
	}
	if (t->fs && t->fs->io && t->fs->io->private_data == t->rc) {
		ext2fs_set_block_alloc_stats_callback(t->fs, t->old_stats, NULL);
		ext2fs_set_block_alloc_stats_range_callback(t->fs, t->old_stats_range, NULL);
	}
	free(t);
}

void rio_txn_totals_free(struct txn_totals *tt)
{
	for (size_t i = 0; i < tt->nviol; i++) {
		free(tt->viol[i].invariant);
		for (size_t r = 0; r < tt->viol[i].nrecords; r++)
			free(tt->viol[i].records[r]);
		free(tt->viol[i].records);
	}
	free(tt->viol);
	free(tt->last_violation);
	pthread_mutex_destroy(&tt->lock);
	memset(tt, 0, sizeof(*tt));
}

errcode_t rio_txn_attach(ext2_filsys fs)
{
	struct rio_chan *rc = chan_of_fs(fs);
	if (!rc)
		return EXT2_ET_MAGIC_IO_CHANNEL;
	if (rc->txn)
		return EXT2_ET_INVALID_ARGUMENT;
	if (!(rc->flags & IO_FLAG_RW) || !(fs->flags & EXT2_FLAG_RW))
		return EXT2_ET_RO_FILSYS;
	if (fs->blocksize != (unsigned)fs->io->block_size)
		return EXT2_ET_INVALID_ARGUMENT;
	if (!fs->block_map) {
		errcode_t err = ext2fs_read_bitmaps(fs);
		if (err)
			return err;
	}
	struct txn_manager *t = calloc(1, sizeof(*t));
	if (!t)
		return ENOMEM;
	t->fs = fs;
	t->rc = rc;
	t->bs = fs->blocksize;
	pthread_mutex_init(&t->cm, NULL);
	pthread_cond_init(&t->cv, NULL);
	pthread_rwlock_init(&t->chk_lock, NULL);
	t->rng = rio_cfg.fault_seed * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull;
	t->tid_open = 1;
	errcode_t err = fault_corrupt_parse(t, rio_cfg.fault_corrupt);
	if (err) {
		fprintf(stderr, "recon-fuse: bad fault_corrupt '%s'\n", rio_cfg.fault_corrupt);
		rio_txn_free(t);
		return err;
	}

	/* what libext2fs wrote before (orphan processing, recovery) is the
	 * approved base: make it durable */
	err = rio_flush_device(fs->io);
	if (err)
		goto fail;

	t->journal = rio_cfg.journal && ext2fs_has_feature_journal(fs->super) &&
		     fs->super->s_journal_inum != 0;
	if (t->journal) {
		char msg[256] = "";
		rio_jbd_dev_init(&t->jctx, &t->jdev, rc, fs->blocksize);
		err = jbd_open(fs, &t->jdev, &t->jbd, msg, sizeof(msg));
		if (err) {
			fprintf(stderr, "recon-fuse: journal: %s\n", msg[0] ? msg : error_message(err));
			goto fail;
		}
		if (jbd_needs_recovery(t->jbd)) {
			fprintf(stderr, "recon-fuse: the journal needs recovery; replay it before attaching\n");
			err = EXT2_ET_UNSUPP_FEATURE;
			goto fail;
		}
		uint32_t jmax = jbd_max_transaction_blocks(t->jbd);
		t->max_blocks = rio_cfg.max_transaction_blocks ? rio_cfg.max_transaction_blocks
							       : jmax / 4;
		if (t->max_blocks > jmax)
			t->max_blocks = jmax;
		if (t->max_blocks == 0)
			t->max_blocks = 1;
	} else {
		t->max_blocks = rio_cfg.max_transaction_blocks ? rio_cfg.max_transaction_blocks : 8192;
	}
	err = flush_init(t);
	if (err)
		goto fail;

	/* mark the file system mounted, durably, before anything is logged */
	t->was_valid = fs->super->s_state & EXT2_VALID_FS;
	if (t->journal) {
		err = rio_raw_sb_update(rc, EXT3_FEATURE_INCOMPAT_RECOVER, 0, 0, 0);
		fs->super->s_feature_incompat |= EXT3_FEATURE_INCOMPAT_RECOVER;
	} else {
		err = rio_raw_sb_update(rc, 0, 0, 0, EXT2_VALID_FS);
		fs->super->s_state &= (uint16_t)~EXT2_VALID_FS;
	}
	if (err)
		goto fail;
	/* libext2fs compares against orig_super to write only what changed:
	 * keep it equal to the disk */
	if (fs->orig_super)
		memcpy(fs->orig_super, fs->super, SUPERBLOCK_SIZE);

	rc->chk_early = rio_cfg.checker && (t->chk = prep_take(rc)) != NULL;
	if (rio_cfg.checker && !t->chk) {
		err = attach_checker(rc, approved_read_cb, approved_zero_cb, &t->chk);
		if (err) {
			t->chk = NULL;
			goto unmark;
		}
	}

	if (rio_cfg.async_commit) {
		int ret = start_quiet_thread(&t->thread, commit_thread, t);
		if (ret) {
			err = (errcode_t)ret;
			goto unmark;
		}
		t->thread_running = true;
	}
	ext2fs_set_block_alloc_stats_callback(fs, block_stats_cb, &t->old_stats);
	ext2fs_set_block_alloc_stats_range_callback(fs, block_stats_range_cb, &t->old_stats_range);
	rc->txn = t;
	return 0;
unmark:
	if (t->journal) {
		if (!rio_raw_sb_update(rc, 0, EXT3_FEATURE_INCOMPAT_RECOVER, 0, 0))
			fs->super->s_feature_incompat &= ~EXT3_FEATURE_INCOMPAT_RECOVER;
	} else if (t->was_valid && !rio_raw_sb_update(rc, 0, 0, EXT2_VALID_FS, 0)) {
		fs->super->s_state |= EXT2_VALID_FS;
	}
	if (fs->orig_super)
		memcpy(fs->orig_super, fs->super, SUPERBLOCK_SIZE);
fail:
	rio_txn_free(t);
	return err;
}

errcode_t rio_txn_boundary(ext2_filsys fs, bool force)
{
	struct rio_chan *rc = chan_of_fs(fs);
	if (!rc)
		return EXT2_ET_MAGIC_IO_CHANNEL;
	struct txn_manager *t = rc->txn;
	if (!t)
		return EXT2_ET_INVALID_ARGUMENT;
	if (rio_dev_crashed(&rc->dev))
		rc->totals.io_failed = true;
	/* a commit that finished in the background: retire it now */
	errcode_t err = 0;
	if (t->committing && cset_done(t, t->committing))
		err = retire(t);
	if (rc->totals.failed || rc->totals.io_failed) {
		retire(t);
		pthread_mutex_lock(&rc->ovl_lock);
		discard(t);
		pthread_mutex_unlock(&rc->ovl_lock);
		return rc->totals.io_failed ? EIO : err ? err : EROFS;
	}
	if (!force) {
		bool old = t->opened_ns && rio_cfg.commit_interval_ms &&
			   now_ns() - t->opened_ns > (uint64_t)rio_cfg.commit_interval_ms * 1000000ull;
		bool big = t->nents > t->max_blocks;
		bool state = fs->flags & (EXT2_FLAG_DIRTY | EXT2_FLAG_BB_DIRTY | EXT2_FLAG_IB_DIRTY);
		if (!old && !big)
			return 0;
		if (t->nents == 0 && !state)
			return 0;
	}
	return txn_commit(t, force);
}

errcode_t rio_txn_room(io_channel ch, size_t *used, size_t *limit)
{
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager)
		return EXT2_ET_MAGIC_IO_CHANNEL;
	struct txn_manager *t = rio_chan_of(ch)->txn;
	if (!t)
		return EXT2_ET_INVALID_ARGUMENT;
	ext2_filsys fs = t->fs;
	/* the flush at commit may add every bitmap, the descriptors and the
	 * superblock */
	size_t flush_blocks = 2 * (size_t)fs->group_desc_count + fs->desc_blocks + 1;
	size_t hard = t->journal ? jbd_max_transaction_blocks(t->jbd) : SIZE_MAX / 2;
	*used = t->nents;
	*limit = hard > 2 * flush_blocks ? hard - flush_blocks : hard / 2;
	return 0;
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

errcode_t rio_txn_savepoint(io_channel ch)
{
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager)
		return EXT2_ET_MAGIC_IO_CHANNEL;
	struct txn_manager *t = rio_chan_of(ch)->txn;
	if (!t)
		return EXT2_ET_INVALID_ARGUMENT;
	pthread_mutex_lock(&t->rc->ovl_lock);
	t->sp_gen = ++t->sp_next;
	t->sp_nfreed = t->sp_nunfreed = 0;
	t->sp_lost = false;
	pthread_mutex_unlock(&t->rc->ovl_lock);
	return 0;
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
		for (size_t i = 0; i < t->sp_nunfreed; i++)
			if (blkset_add(&t->freed, t->sp_unfreed[i]))
				err = ENOMEM;
		if (t->nents == 0)
			t->opened_ns = 0;
	}
	t->sp_gen = 0;
	t->sp_nfreed = t->sp_nunfreed = 0;
	pthread_mutex_unlock(&rc->ovl_lock);
	return err;
}

void rio_txn_ids(io_channel ch, uint64_t *open, uint64_t *durable)
{
	*open = *durable = 0;
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager)
		return;
	struct txn_manager *t = rio_chan_of(ch)->txn;
	if (!t)
		return;
	*open = t->tid_open;
	*durable = t->tid_durable;
}

uint64_t rio_txn_pending_frees(io_channel ch)
{
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager)
		return 0;
	struct txn_manager *t = rio_chan_of(ch)->txn;
	if (!t)
		return 0;
	return t->freed.count + (t->committing ? t->committing->freed.count : 0);
}

bool rio_txn_failed(io_channel ch)
{
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager)
		return false;
	struct rio_chan *rc = rio_chan_of(ch);
	return rc->totals.failed || rio_dev_crashed(&rc->dev);
}

const char *rio_txn_last_violation(io_channel ch)
{
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager)
		return NULL;
	return rio_chan_of(ch)->totals.last_violation;
}

/* chk_scan of chk into *report (NULL when consistent): the first
 * violations, one a line, and how many more. */
static errcode_t scan_report(struct chk_fs *chk, char **report)
{
	struct chk_verdict *v = NULL;
	int ret = chk_scan(chk, &v);
	errcode_t err = ret < 0 ? (errcode_t)-ret : 0;
	size_t n = v ? chk_verdict_nviolations(v) : 0;
	if (!err && n) {
		size_t cap = 4096, used = 0;
		char *buf = malloc(cap);
		if (!buf)
			err = ENOMEM;
		for (size_t i = 0; buf && i < n && i < 8; i++) {
			const struct chk_violation *x = chk_verdict_violation(v, i);
			int k = snprintf(buf + used, cap - used, "%s%s: %s", i ? "\n" : "",
					 x->inv ? x->inv->id : "?", x->detail ? x->detail : "");
			if (k < 0 || (size_t)k >= cap - used)
				break;
			used += (size_t)k;
		}
		if (buf && n > 8)
			snprintf(buf + used, cap - used, "\n(and %zu more)", n - 8);
		*report = buf;
	}
	chk_verdict_free(v);
	return err;
}

errcode_t rio_txn_base_check(ext2_filsys fs, char **report)
{
	struct rio_chan *rc = chan_of_fs(fs);
	*report = NULL;
	if (!rc)
		return EXT2_ET_MAGIC_IO_CHANNEL;
	struct txn_manager *t = rc->txn;
	if (!t)
		return EXT2_ET_INVALID_ARGUMENT;
	struct chk_fs *chk = t->chk, *own = NULL;
	if (!chk) {
		/* checker=off: a shadow state of its own, for this check alone */
		errcode_t err = attach_checker(rc, approved_read_cb, approved_zero_cb, &own);
		if (err)
			return err;
		chk = own;
	}
	bool fill = rio_cache_set_fill(&rc->cache, false);
	errcode_t err = scan_report(chk, report);
	rio_cache_set_fill(&rc->cache, fill);
	chk_detach(own);
	return err;
}

/* What a read-only channel serves: the device with the in-memory replay. */
static int served_read_cb(void *ctx, uint64_t offset, void *buf, size_t len)
{
	return chk_result(rio_meta_read(ctx, offset, len, buf));
}

errcode_t rio_image_check(ext2_filsys fs, char **report)
{
	struct rio_chan *rc = chan_of_fs(fs);
	*report = NULL;
	if (!rc)
		return EXT2_ET_MAGIC_IO_CHANNEL;
	if (rc->txn)
		return EXT2_ET_INVALID_ARGUMENT;
	/* before a read-write attach: rio_txn_prepare's checker when begun,
	 * kept for the attach when the image passes */
	bool keep = rio_cfg.checker && (rc->flags & IO_FLAG_RW) && !rc->replay;
	struct chk_fs *own = keep ? prep_take(rc) : NULL;
	errcode_t err = 0;
	if (!own)
		err = keep ? attach_checker(rc, approved_read_cb, approved_zero_cb, &own)
			   : attach_checker(rc, served_read_cb, NULL, &own);
	if (err)
		return err;
	bool fill = rio_cache_set_fill(&rc->cache, false);
	err = scan_report(own, report);
	rio_cache_set_fill(&rc->cache, fill);
	if (keep && !err && !*report)
		prep_keep(rc, own);
	else
		chk_detach(own);
	return err;
}

errcode_t rio_txn_detach(ext2_filsys fs)
{
	struct rio_chan *rc = chan_of_fs(fs);
	if (!rc)
		return EXT2_ET_MAGIC_IO_CHANNEL;
	struct txn_manager *t = rc->txn;
	if (!t)
		return EXT2_ET_INVALID_ARGUMENT;
	errcode_t err = retire(t);
	if (!rc->totals.failed)
		err = txn_commit(t, true);
	bool failed = rc->totals.failed;
	if (failed) {
		pthread_mutex_lock(&rc->ovl_lock);
		discard(t);
		pthread_mutex_unlock(&rc->ovl_lock);
	}
	bool journal = t->journal, was_valid = t->was_valid;
	pthread_mutex_lock(&rc->ovl_lock);
	rc->txn = NULL;
	pthread_mutex_unlock(&rc->ovl_lock);
	rio_txn_free(t);
	/* libext2fs's close must not rewrite the superblock unchecked, nor write
	 * its in-memory state (unapproved after a rejection) */
	rc->hide_write_stats = true;
	if (err || failed)
		fs->flags &= ~(EXT2_FLAG_DIRTY | EXT2_FLAG_BB_DIRTY | EXT2_FLAG_IB_DIRTY);
	if (rc->totals.io_failed || rio_dev_crashed(&rc->dev)) {
		/* the disk state is unknown: leave needs_recovery / !VALID_FS */
		return err ? err : EIO;
	}
	/* Clean: the log is checkpointed and empty.  A rejected transaction
	 * never reached the disk and everything approved is home: the disk is
	 * consistent and is marked clean too. */
	errcode_t merr;
	if (journal) {
		merr = rio_raw_sb_update(rc, 0, EXT3_FEATURE_INCOMPAT_RECOVER, 0, 0);
		fs->super->s_feature_incompat &= ~EXT3_FEATURE_INCOMPAT_RECOVER;
	} else if (was_valid) {
		merr = rio_raw_sb_update(rc, 0, 0, EXT2_VALID_FS, 0);
		fs->super->s_state |= EXT2_VALID_FS;
	} else {
		merr = 0;   /* it was not clean when we found it: e2fsck's to judge */
	}
	if (fs->orig_super)
		memcpy(fs->orig_super, fs->super, SUPERBLOCK_SIZE);
	if (err)
		return err;
	if (failed)
		return EROFS;
	return merr;
}

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

errcode_t rio_write_stats(io_channel ch, const char *path)
{
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager)
		return EXT2_ET_MAGIC_IO_CHANNEL;
	struct rio_chan *rc = rio_chan_of(ch);
	struct txn_totals *tt = &rc->totals;
	struct rio_stats st;
	errcode_t err = rio_get_stats(ch, &st);
	if (err)
		return err;
	uint64_t cpu_ns = tt->chk_cpu_ns, scan_ns = tt->chk_scan_ns;
	uint64_t hits = tt->chk_hits, misses = tt->chk_misses;
	if (rc->txn && rc->txn->committing)
		wait_cset(rc->txn, rc->txn->committing);   /* the checker is not shared */
	if (rc->txn && rc->txn->chk) {
		struct chk_stats cs;
		chk_get_stats(rc->txn->chk, &cs);
		cpu_ns += cs.cpu_ns;
		scan_ns += cs.scan_cpu_ns;
		hits += cs.cache_hits;
		misses += cs.cache_misses;
	}
	struct rusage ru;
	long peak = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : 0;
	FILE *f = fopen(path, "w");
	if (!f)
		return errno;
	fprintf(f, "{\n  \"transactions\": %" PRIu64 ",\n", tt->transactions);
	fprintf(f, "  \"device_writes\": %" PRIu64 ",\n  \"device_reads\": %" PRIu64 ",\n",
		st.device_writes, st.device_reads);
	fprintf(f, "  \"bytes_written\": %" PRIu64 ",\n  \"bytes_read\": %" PRIu64 ",\n",
		st.bytes_written, st.bytes_read);
	fprintf(f, "  \"flushes\": %" PRIu64 ",\n", st.flushes);
	fprintf(f, "  \"checker_attached_early\": %s,\n", st.checker_attached_early ? "true" : "false");
	fprintf(f, "  \"blocks_checked\": %" PRIu64 ",\n  \"blocks_journalled\": %" PRIu64 ",\n",
		tt->blocks_checked, tt->blocks_journalled);
	fprintf(f, "  \"violations\": [");
	for (size_t i = 0; i < tt->nviol; i++) {
		fprintf(f, "%s\n    {\"invariant\": ", i ? "," : "");
		json_string(f, tt->viol[i].invariant);
		fprintf(f, ", \"records\": [");
		for (size_t r = 0; r < tt->viol[i].nrecords; r++) {
			if (r)
				fprintf(f, ", ");
			json_string(f, tt->viol[i].records[r]);
		}
		fprintf(f, "]}");
	}
	fprintf(f, "%s],\n", tt->nviol ? "\n  " : "");
	fprintf(f, "  \"checker_cpu_seconds\": %.6f,\n", (double)cpu_ns / 1e9);
	fprintf(f, "  \"checker_commit_cpu_seconds\": %.6f,\n",
		(double)(cpu_ns - (scan_ns < cpu_ns ? scan_ns : cpu_ns)) / 1e9);
	fprintf(f, "  \"checker_cache_hit_rate\": %.6f,\n",
		hits + misses ? (double)hits / (double)(hits + misses) : 0.0);
	fprintf(f, "  \"block_cache_hit_rate\": %.6f,\n",
		st.cache_hits + st.cache_misses
			? (double)st.cache_hits / (double)(st.cache_hits + st.cache_misses) : 0.0);
	fprintf(f, "  \"peak_rss_kb\": %ld\n}\n", peak);
	if (ferror(f)) {
		fclose(f);
		return EIO;
	}
	if (fclose(f) != 0)
		return errno;
	return 0;
}
