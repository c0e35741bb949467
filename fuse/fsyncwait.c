/*
 * fuse/fsyncwait.c - fsync and fsyncdir answered once what they cover is
 * durable.  As jbd2's fsync sleeps until its transaction is on disk, the
 * request asks for the commit under the lock and returns without a reply:
 * the serving thread and the lock go on to other requests while the
 * commit thread checks, logs and checkpoints.  The fsyncs that arrive
 * while one commit runs wait for the next, which starts once it is done:
 * one commit for all of them (group commit).  The commit thread's hook
 * answers the fsyncs a durable commit covers, at once and without the
 * lock; the fsync thread, woken when fsyncs still wait or a commit failed,
 * takes the lock, retires the commit, asks for the next one, and after a
 * failure answers each fsync as rfs_fsync would.  Over io_uring libfuse's
 * reply from another thread hands the entry to its queue's thread
 * (uring.c), so a request is held only while its queue keeps an entry
 * free (uring_may_hold_reply).
 */
#include "rfs.h"
#include "io.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>

struct fsync_waiter {
	fuse_req_t req;
	ext2_ino_t ino;
	uint64_t tid;              /* durable once this transaction is */
	bool data_err;             /* a failed data write to report */
	int ret;                   /* the answer, once decided */
	struct fsync_waiter *next;
};

/* mu is taken after the file-system lock, never before it */
static struct {
	pthread_mutex_t mu;        /* the waiters, the thread's wake-up and life */
	pthread_cond_t cv;
	pthread_cond_t taken_cv;   /* signalled as waiters leave the list */
	bool kicked, started, stopping, done;
	uint64_t queued, taken;    /* waiters put on the list, taken off it */
	pthread_t thread;
	struct fsync_waiter *head;
	uint64_t durable;          /* the highest transaction the hook saw durable */
} fw = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,
	  .taken_cv = PTHREAD_COND_INITIALIZER };

static void answer(struct fsync_waiter *w)
{
	while (w) {
		struct fsync_waiter *next = w->next;
		fuse_reply_err(w->req, -w->ret);
		free(w);
		w = next;
	}
}

/* Take off the list the waiters that transaction `durable` covers, their
 * answer set (mu held). */
static struct fsync_waiter *take_durable(uint64_t durable)
{
	struct fsync_waiter *out = NULL, **p = &fw.head;
	while (*p) {
		struct fsync_waiter *w = *p;
		if (w->tid > durable) {
			p = &w->next;
			continue;
		}
		w->ret = w->data_err ? -EIO : 0;
		*p = w->next;
		w->next = out;
		out = w;
		fw.taken++;
	}
	if (out)
		pthread_cond_broadcast(&fw.taken_cv);
	return out;
}

/* The commit thread's hook: the fsyncs a durable commit covers are
 * answered here; the thread goes on when others wait or it failed. */
static void fw_commit_done(void *arg, uint64_t tid, bool durable)
{
	(void)arg;
	pthread_mutex_lock(&fw.mu);
	if (durable && tid > fw.durable)
		fw.durable = tid;
	struct fsync_waiter *done = durable ? take_durable(tid) : NULL;
	if (fw.head || !durable) {
		fw.kicked = true;
		pthread_cond_signal(&fw.cv);
	}
	pthread_mutex_unlock(&fw.mu);
	answer(done);
}

/* Take off the list every waiter the state decides, its answer set; the
 * list of them is returned, to be answered without the lock. */
static struct fsync_waiter *take_decided(struct rfs *r, bool final)
{
	uint64_t durable;
	int failure = rfs_fsync_progress(r, final, &durable);

	pthread_mutex_lock(&fw.mu);
	struct fsync_waiter *out = take_durable(durable), **p = &fw.head;
	while (*p) {
		struct fsync_waiter *w = *p;
		if (failure)
			w->ret = rfs_fsync_verdict(r, w->ino, w->data_err, failure);
		else if (final)
			w->ret = -EIO;   /* not durable after a full commit: never 0 */
		else {
			p = &w->next;
			continue;
		}
		*p = w->next;
		w->next = out;
		out = w;
		fw.taken++;
		pthread_cond_broadcast(&fw.taken_cv);
	}
	pthread_mutex_unlock(&fw.mu);
	return out;
}

static bool any_waiter(void)
{
	pthread_mutex_lock(&fw.mu);
	bool any = fw.head != NULL;
	pthread_mutex_unlock(&fw.mu);
	return any;
}

/* Lock held: the decided waiters (to answer after unlock); the others wait
 * for a commit in flight, asked for here when none is. */
static struct fsync_waiter *settle(struct rfs *r, bool final)
{
	if (!any_waiter())
		return NULL;
	struct fsync_waiter *out = take_decided(r, final);
	if (!final && any_waiter() && !rfs_fsync_commit(r)) {
		/* no commit could be asked for: commit here, or fail them */
		struct fsync_waiter *more = take_decided(r, true);
		while (more) {
			struct fsync_waiter *w = more;
			more = w->next;
			w->next = out;
			out = w;
		}
	}
	return out;
}

static void *fw_main(void *arg)
{
	struct rfs *r = arg;
	pthread_setname_np(pthread_self(), "recon-fsync");
	for (;;) {
		pthread_mutex_lock(&fw.mu);
		while (!fw.kicked && !fw.stopping)
			pthread_cond_wait(&fw.cv, &fw.mu);
		bool stopping = fw.stopping;
		fw.kicked = false;
		pthread_mutex_unlock(&fw.mu);
		lock(r);
		struct fsync_waiter *done = settle(r, stopping);
		unlock(r);
		answer(done);
		if (stopping)
			break;
	}
	pthread_mutex_lock(&fw.mu);
	fw.done = true;
	pthread_mutex_unlock(&fw.mu);
	return NULL;
}

/* The thread, once (lock held); false when it cannot run. */
static bool fw_start(struct rfs *r)
{
	pthread_mutex_lock(&fw.mu);
	if (!fw.started && !fw.stopping) {
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		fw.started = pthread_create(&fw.thread, NULL, fw_main, r) == 0;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (fw.started)
			rio_txn_set_commit_hook(r->fs->io, fw_commit_done, NULL);
	}
	bool ok = fw.started && !fw.stopping;
	pthread_mutex_unlock(&fw.mu);
	return ok;
}

bool fsync_defer(struct rfs *r, fuse_req_t req, ext2_ino_t ino)
{
	if (!r->attached || r->ro || !r->cfg->io.async_commit || !uring_may_hold_reply())
		return false;
	struct fsync_waiter *w = calloc(1, sizeof(*w));
	bool later;
	if (!w)
		return false;
	if (!fw_start(r) || !rfs_fsync_begin(r, ino, &w->tid, &w->data_err, &later)) {
		free(w);
		return false;
	}
	w->req = req;
	w->ino = ino;
	pthread_mutex_lock(&fw.mu);
	/* its commit may have finished already: the hook saw no waiter */
	bool done = w->tid <= fw.durable;
	if (!done) {
		w->next = fw.head;
		fw.head = w;
		fw.queued++;
	}
	if (!done && later) {
		/* the commit it waits for is asked for once the one in flight
		 * is done, whose hook may have run already */
		fw.kicked = true;
		pthread_cond_signal(&fw.cv);
	}
	pthread_mutex_unlock(&fw.mu);
	if (done) {
		w->ret = w->data_err ? -EIO : 0;
		answer(w);
	}
	return true;
}

void fsync_let_waiters_first(unsigned max_ms)
{
	struct timespec until = deadline_in((long long)max_ms * 1000000);
	pthread_mutex_lock(&fw.mu);
	/* the waiters on the list now; later ones do not hold the caller up */
	uint64_t target = fw.queued;
	while (fw.taken < target && !fw.stopping &&
	       pthread_cond_timedwait(&fw.taken_cv, &fw.mu, &until) == 0)
		;
	pthread_mutex_unlock(&fw.mu);
}

void fsync_drain(struct rfs *r)
{
	answer(settle(r, true));
}

void fsync_replies_stop(void)
{
	pthread_mutex_lock(&fw.mu);
	fw.stopping = true;
	pthread_cond_signal(&fw.cv);
	pthread_mutex_unlock(&fw.mu);
}

bool fsync_replies_busy(void)
{
	pthread_mutex_lock(&fw.mu);
	bool busy = fw.started && !fw.done;
	pthread_mutex_unlock(&fw.mu);
	return busy;
}

void fsync_replies_join(void)
{
	fsync_replies_stop();
	pthread_mutex_lock(&fw.mu);
	bool started = fw.started;
	pthread_mutex_unlock(&fw.mu);
	if (started)
		pthread_join(fw.thread, NULL);
	fw.started = false;
}
