/*
 * io/commit.c - the commit path: the open transaction closed into a cset at
 * a boundary (libext2fs's state flushed into it, unchanged blocks dropped),
 * the checker's verdict, the journal or the write in place, the home
 * writes and the checkpoint; the commit thread; retiring a finished commit.
 *
 * One transaction commits at a time.  With async_commit the commit thread
 * checks, logs and checkpoints transaction N while N+1 builds (reads see
 * N+1, then N, then the approved state); otherwise, and always with force,
 * the commit runs in rio_txn_boundary and is durable on return.  Each commit
 * is checkpointed before the next is logged, so the log holds at most one
 * transaction and revoke records only matter for blocks logged by the
 * current or the previous transaction.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "txn_internal.h"

/* ---- commit ---- */

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

void cset_free(struct cset *c)
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
void discard(struct txn_manager *t)
{
	ovl_clear(t);
	restore_freed_marks(t);
	blkset_clear(&t->freed);
	t->rc->totals.failed = true;
	t->sp_lost = true;   /* an operation in progress cannot be restored now */
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

/* The checker's verdict on c (*verdict NULL without a checker): 0 when c may
 * be written (approved, or rejected with on_violation=log); else the file
 * system has failed: EROFS for a rejection, EIO when the check could not
 * run, ENOMEM. */
static errcode_t check_cset(struct txn_manager *t, struct cset *c, struct chk_verdict **verdict)
{
	struct txn_totals *tt = &t->rc->totals;
	size_t n = c->n;
	*verdict = NULL;
	if (!t->chk)
		return 0;
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
	/* no verdict relies on a table tail the base check left unchecked */
	pthread_mutex_lock(&t->chk_use);
	errcode_t gate = bg_gate(t, w, n);
	int ret = gate ? 0 : chk_check(t->chk, w, n, verdict);
	pthread_mutex_unlock(&t->chk_use);
	free(w);
	if (gate)
		return gate;
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
	if (!chk_verdict_ok(*verdict)) {
		record_verdict(t, *verdict);
		if (rio_cfg.on_violation != RIO_ONV_LOG) {
			chk_verdict_free(*verdict);
			*verdict = NULL;
			tt->failed = true;
			return EROFS;
		}
		fprintf(stderr, "recon-fuse: on_violation=log: WRITING THE REJECTED TRANSACTION\n");
	}
	return 0;
}

/* Log c through the journal, with revoke records for what it frees that the
 * log could still replay (*logged: the blocks logged), or without a journal
 * make the data written so far durable before the home writes. */
static errcode_t log_cset(struct txn_manager *t, struct cset *c, struct blkset *logged)
{
	size_t n = c->n;
	errcode_t err = 0;
	const void **data = malloc(n * sizeof(*data));
	uint64_t *blks = malloc(n * sizeof(*blks));
	uint64_t *revoke = malloc((c->freed.count + 1) * sizeof(*revoke));
	if (!data || !blks || !revoke) {
		err = ENOMEM;
		goto out;
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
			goto out;
		t->rc->totals.blocks_journalled += n;
		for (size_t i = 0; i < n && !err; i++)
			err = blkset_add(logged, blks[i]);
	} else {
		/* write in place: data first, durably */
		err = rio_dev_flush(&t->rc->dev);
	}
out:
	free(data);
	free(blks);
	free(revoke);
	return err;
}

/* Check, log, write home, checkpoint.  Runs without ovl_lock (except for
 * the home writes); touches the checker, the journal and the counters,
 * which only the thread running commits uses. */
static errcode_t run_cset(struct txn_manager *t, struct cset *c)
{
	struct rio_chan *rc = t->rc;
	struct txn_totals *tt = &rc->totals;
	struct chk_verdict *verdict;
	errcode_t err = check_cset(t, c, &verdict);
	if (err)
		return err;
	struct blkset logged = { 0 };
	err = log_cset(t, c, &logged);
	if (!err)
		err = write_home(t, c);
	if (!err)
		err = rio_dev_flush(&rc->dev);
	if (!err && t->journal)
		err = jbd_checkpointed(t->jbd);
	if (err) {
		/* an I/O error mid-commit: the device (or the log) is in an
		 * unknown state; what the journal holds is replayed at the next
		 * mount */
		fprintf(stderr, "recon-fuse: commit failed: %s\n", error_message(err));
		if (verdict)
			chk_verdict_free(verdict);
		blkset_clear(&logged);
		tt->io_failed = true;
		tt->failed = true;
		return err;
	}
	if (verdict) {
		pthread_mutex_lock(&t->chk_use);
		pthread_rwlock_wrlock(&t->chk_lock);
		int ret = chk_advance(t->chk, verdict);
		pthread_rwlock_unlock(&t->chk_lock);
		pthread_mutex_unlock(&t->chk_use);
		chk_verdict_free(verdict);
		if (ret < 0) {
			/* the checker's approved state is lost: it cannot judge the
			 * next transaction; stop taking writes */
			fprintf(stderr, "recon-fuse: checker could not advance: %s\n", strerror(-ret));
			tt->failed = true;
			err = EIO;
		}
	}
	tt->transactions++;
	if (c->n > tt->largest_transaction)
		tt->largest_transaction = c->n;
	blkset_clear(&t->logged_prev);
	t->logged_prev = logged;
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
	t->sp_nfreed = t->sp_nunfreed = t->sp_nallocs = 0;
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

void wait_cset(struct txn_manager *t, struct cset *c)
{
	pthread_mutex_lock(&t->cm);
	while (!c->done)
		pthread_cond_wait(&t->cv, &t->cm);
	pthread_mutex_unlock(&t->cm);
}

/* The committing transaction finished (file-system thread): its freed
 * blocks become allocatable; if it failed, what was built on it goes too. */
errcode_t retire(struct txn_manager *t)
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

bool cset_done(struct txn_manager *t, struct cset *c)
{
	pthread_mutex_lock(&t->cm);
	bool d = c->done;
	pthread_mutex_unlock(&t->cm);
	return d;
}

/* The test gate (RECON_COMMIT_GATE): a commit held while its file exists,
 * so that a test can look at the mount while one is in flight. */
static void commit_gate(struct txn_manager *t)
{
	if (!t->gate || access(t->gate, F_OK))
		return;
	size_t len = strlen(t->gate) + sizeof(".held");
	char *held = malloc(len);
	if (held) {
		snprintf(held, len, "%s.held", t->gate);
		int fd = open(held, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd >= 0)
			close(fd);
	}
	while (!access(t->gate, F_OK))
		usleep(10000);
	if (held)
		unlink(held);
	free(held);
}

/* Run one closed transaction; one with no block only makes the data
 * written before it durable. */
static errcode_t run_commit(struct txn_manager *t, struct cset *c)
{
	commit_gate(t);
	t->rc->totals.commits++;
	if (c->n == 0)
		return rio_dev_flush(&t->rc->dev);
	return run_cset(t, c);
}

void *commit_thread(void *arg)
{
	struct txn_manager *t = arg;
	/* named, so that its CPU can be told from the serving thread's
	 * (/proc/PID/task/TID/comm, top -H, perf) */
	pthread_setname_np(pthread_self(), "recon-commit");
	pthread_mutex_lock(&t->cm);
	for (;;) {
		while (!t->queued && !t->stop)
			pthread_cond_wait(&t->cv, &t->cm);
		if (!t->queued)
			break;
		struct cset *c = t->queued;
		t->queued = NULL;
		pthread_mutex_unlock(&t->cm);
		errcode_t err = run_commit(t, c);
		pthread_mutex_lock(&t->cm);
		c->result = err;
		c->done = true;
		pthread_cond_broadcast(&t->cv);
		void (*hook)(void *, uint64_t, bool) = t->done_hook;
		void *harg = t->done_arg;
		if (hook) {
			/* c stays until the file-system thread retires it,
			 * which may happen as soon as cm is let go */
			uint64_t tid = c->tid;
			pthread_mutex_unlock(&t->cm);
			hook(harg, tid, !err);
			pthread_mutex_lock(&t->cm);
		}
	}
	pthread_mutex_unlock(&t->cm);
	return NULL;
}

static void queue_cset(struct txn_manager *t, struct cset *c)
{
	t->committing = c;
	pthread_mutex_lock(&t->cm);
	t->queued = c;
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->cm);
}

/* Commit the open transaction.  Waits for the one in flight first (one
 * committing transaction at a time, as jbd).  With `wait` (or without a
 * commit thread) it runs here and is durable on return; otherwise the
 * commit thread runs it while the next transaction builds. */
errcode_t txn_commit(struct txn_manager *t, bool wait)
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
		rc->totals.commits++;
		err = rio_dev_flush(&rc->dev);
		if (!err)
			t->tid_durable = t->tid_open++;
		return err;
	}
	if (t->thread_running && !wait) {
		queue_cset(t, c);
		return 0;
	}
	t->committing = c;
	err = run_commit(t, c);
	pthread_mutex_lock(&t->cm);
	c->result = err;
	c->done = true;
	pthread_mutex_unlock(&t->cm);
	return retire(t);
}

errcode_t txn_commit_begin(struct txn_manager *t, uint64_t *tid)
{
	struct rio_chan *rc = t->rc;
	if (t->committing) {
		if (!cset_done(t, t->committing)) {
			/* data written meanwhile may have missed its flush: the
			 * open transaction's commit covers it, once this one is
			 * done */
			*tid = t->tid_open;
			return 0;
		}
		errcode_t err = retire(t);
		if (err)
			return err;
	}
	struct cset *c;
	pthread_mutex_lock(&rc->ovl_lock);
	errcode_t err = prepare(t, &c);
	if (!err && !c) {
		/* no block changed: a commit of none flushes the data */
		c = calloc(1, sizeof(*c));
		if (c)
			c->tid = t->tid_open++;
		else {
			discard(t);
			err = ENOMEM;
		}
	}
	pthread_mutex_unlock(&rc->ovl_lock);
	if (err)
		return err;
	*tid = c->tid;
	queue_cset(t, c);
	return 0;
}
