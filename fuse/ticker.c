/*
 * fuse/ticker.c - the daemon's background thread: it ends an idle
 * transaction within commit_interval_ms, and it is the reaper that frees
 * unlinked inodes nothing holds, a step at a time.
 */
#include "rfs.h"

#include <errno.h>
#include <signal.h>
#include <time.h>

static pthread_t ticker;
static bool ticker_running;
static pthread_mutex_t ticker_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ticker_cv = PTHREAD_COND_INITIALIZER;
static atomic_bool ticker_stop;
static bool reap_kicked;   /* under ticker_mu */

/* How long the reaper lets deletions gather after the first one wakes it:
 * a burst of them (rm -r, PostMark) is freed in batches (orphan.c's
 * reap_batch), one wake-up and one operation for many instead of one per
 * inode.  Short enough that the space comes back as promptly as anyone
 * can tell (and an allocation that runs short reaps at once, reap_all). */
#define REAP_GATHER_NS 5000000L

/* Called with the file-system lock held (held_settle): the thread takes
 * ticker_mu only while it does not hold that lock, so no cycle.  Only the
 * first kick of a gathering wakes the thread. */
static void ticker_reap_kick(struct rfs *r)
{
	(void)r;
	pthread_mutex_lock(&ticker_mu);
	if (!reap_kicked) {
		reap_kicked = true;
		pthread_cond_signal(&ticker_cv);
	}
	pthread_mutex_unlock(&ticker_mu);
}

/* Calls the transaction boundary every commit_interval_ms, so a transaction
 * left open by the last operation before an idle period still commits; and
 * is the reaper: frees queued unlinked inodes a step at a time, the lock
 * let go between steps so requests are served meanwhile. */
static void *ticker_main(void *arg)
{
	struct rfs *r = arg;
	unsigned ms = r->cfg->io.commit_interval_ms;

	pthread_setname_np(pthread_self(), "recon-ticker");
	pthread_mutex_lock(&ticker_mu);
	while (!atomic_load(&ticker_stop)) {
		struct timespec ts = deadline_in((long long)ms * 1000000);
		if (!reap_kicked)
			pthread_cond_timedwait(&ticker_cv, &ticker_mu, &ts);
		bool reap = reap_kicked;
		if (reap && !atomic_load(&ticker_stop)) {
			/* kicks meanwhile do not signal: only stop_ticker ends
			 * the gathering early */
			ts = deadline_in(REAP_GATHER_NS);
			while (!atomic_load(&ticker_stop) &&
			       pthread_cond_timedwait(&ticker_cv, &ticker_mu, &ts) != ETIMEDOUT)
				;
		}
		reap_kicked = false;
		if (atomic_load(&ticker_stop))
			break;
		pthread_mutex_unlock(&ticker_mu);
		if (reap)
			while (!atomic_load(&ticker_stop) && rfs_reap(r))
				;
		else
			rfs_tick(r);
		pthread_mutex_lock(&ticker_mu);
	}
	pthread_mutex_unlock(&ticker_mu);
	return NULL;
}

bool reaper_planned(const struct rfs *r)
{
	return !r->cfg->deterministic && r->cfg->io.commit_interval_ms;
}

void start_ticker(struct rfs *r)
{
	/* with every signal blocked, so the daemon's exit signals reach the
	 * FUSE loop's thread and end its read() */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	ticker_running = pthread_create(&ticker, NULL, ticker_main, r) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	/* the orphans the mount queued go to the thread, or, when it did not
	 * start, are freed now (requests wait, as with no reaper) */
	pthread_mutex_lock(&r->lock);
	if (ticker_running)
		r->reap_kick = ticker_reap_kick;
	reap_resume(r);
	pthread_mutex_unlock(&r->lock);
}

void stop_ticker(struct rfs *r)
{
	if (!ticker_running)
		return;
	/* what is still queued is freed at unmount (held_release_all) */
	pthread_mutex_lock(&r->lock);
	r->reap_kick = NULL;
	pthread_mutex_unlock(&r->lock);
	pthread_mutex_lock(&ticker_mu);
	atomic_store(&ticker_stop, true);
	pthread_cond_signal(&ticker_cv);
	pthread_mutex_unlock(&ticker_mu);
	pthread_join(ticker, NULL);
	ticker_running = false;
}
