/*
 * io/bgcheck.c - the base check's deferred part: the inode-table tails the
 * mount's chk_scan left unread (checker.h, "deferred table tails"), checked
 * group by group on a thread of the channel's own while the file system
 * serves, and, before a commit that writes a deferred group's inode table
 * or inode bitmap, synchronously in the commit path (bg_gate), so that no
 * verdict relies on a tail not yet checked.
 *
 * Locking: t->chk_use makes the checker's users one at a time: the commit
 * path holds it from bg_gate through chk_check, and again around
 * chk_advance; the background thread holds it while it asks where a tail
 * lies and while chk_check_tail judges what it read, never across its
 * device read.  A tail read off the lock is still the approved state when
 * the lock is taken and the group is still deferred: a commit writes a
 * group's table only after bg_gate has checked (and unmarked) it, under
 * the lock; the reads before attach's flush are home.  Damage found either
 * way fails the file system as a rejected commit does (totals.failed: no
 * more writes, no seal), with a log line naming the group and invariant.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "txn_internal.h"

struct bgcheck {
	pthread_t thread;
	pthread_mutex_t lock;   /* stop, with cv: the thread's waits end at once */
	pthread_cond_t cv;
	bool stop;
	unsigned pause_ms;      /* RECON_BGCHECK_PAUSE_MS: tests hold the thread back */
};

/* Damage in the base: the file system takes no more writes. */
static void base_failed(struct txn_manager *t, uint32_t g, const struct chk_verdict *v, const char *who)
{
	for (size_t i = 0; i < chk_verdict_nviolations(v); i++) {
		const struct chk_violation *x = chk_verdict_violation(v, i);
		fprintf(stderr, "recon-fuse: base check (%s): group %u: %s: %s\n", who, g,
			x->inv ? x->inv->id : "?", x->detail ? x->detail : "");
	}
	fprintf(stderr, "recon-fuse: the image was not consistent when mounted (group %u's free inodes); "
		"no more writes are taken (unmount and run e2fsck -f)\n", g);
	record_verdict(t, v);
	t->rc->totals.failed = true;
}

/* chk_check_tail of g with t->chk_use held; table NULL: the checker reads.
 * 0, EROFS (damage: failed) or EIO (could not read: the group stays
 * deferred). */
static errcode_t check_group(struct txn_manager *t, uint32_t g, const void *table, const char *who)
{
	struct chk_verdict *v = NULL;
	int r = chk_check_tail(t->chk, g, table, &v);
	if (r < 0) {
		fprintf(stderr, "recon-fuse: base check (%s): group %u: cannot check its inode table: %s\n", who,
			g, strerror(-r));
		return EIO;
	}
	if (!v)
		return 0;
	errcode_t err = 0;
	if (!chk_verdict_ok(v)) {
		base_failed(t, g, v, who);
		err = EROFS;
	}
	chk_verdict_free(v);
	return err;
}

errcode_t bg_gate(struct txn_manager *t, const struct chk_write *w, size_t n)
{
	if (!t->chk || !chk_deferred_count(t->chk))
		return 0;
	for (size_t i = 0; i < n; i++) {
		for (uint64_t b = w[i].offset / t->bs; b * t->bs < w[i].offset + w[i].len; b++) {
			struct chk_block_info bi;
			chk_block_info(t->chk, b, &bi);
			if ((strcmp(bi.type, "itable") && strcmp(bi.type, "ibitmap")) ||
			    !chk_group_deferred(t->chk, bi.owner))
				continue;
			errcode_t err = check_group(t, bi.owner, NULL, "before a commit");
			if (err) {
				t->rc->totals.failed = true;
				return err;
			}
			t->rc->totals.base_commit_done++;
		}
	}
	return 0;
}

/* Wait ms unless stopped; true when stopped. */
static bool bg_wait(struct bgcheck *b, unsigned ms)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&b->lock);
	while (!b->stop && pthread_cond_timedwait(&b->cv, &b->lock, &until) != ETIMEDOUT)
		;
	bool stop = b->stop;
	pthread_mutex_unlock(&b->lock);
	return stop;
}

static bool bg_stopped(struct bgcheck *b)
{
	pthread_mutex_lock(&b->lock);
	bool stop = b->stop;
	pthread_mutex_unlock(&b->lock);
	return stop;
}

/* One group's tail read off the lock, judged under it.  0, or the error
 * that ends the pass. */
static errcode_t bg_group(struct txn_manager *t, uint32_t g, uint8_t **buf, size_t *cap)
{
	struct rio_chan *rc = t->rc;
	uint64_t off;
	size_t len;
	pthread_mutex_lock(&t->chk_use);
	chk_tail_extent(t->chk, g, &off, &len);
	pthread_mutex_unlock(&t->chk_use);
	if (!len)
		return 0;
	if (len > *cap) {
		uint8_t *nb = realloc(*buf, len);
		if (!nb)
			return ENOMEM;
		*buf = nb;
		*cap = len;
	}
	errcode_t err = rc->dev.regular ? rio_dev_pread_sparse(&rc->dev, off, *buf, len)
					: rio_dev_pread(&rc->dev, off, *buf, len);
	/* read once: kept out of the host's cache (see attach.c's scan) */
	if (!rc->dev.regular)
		(void)posix_fadvise(rc->dev.fd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
	if (err)
		return err;
	pthread_mutex_lock(&t->chk_use);
	uint64_t off2;
	size_t len2;
	chk_tail_extent(t->chk, g, &off2, &len2);
	/* still deferred: what was read is approved (else the checker reads
	 * it anew, should its extent have moved) */
	if (len2) {
		err = check_group(t, g, off2 == off && len2 == len ? *buf : NULL, "background");
		if (!err)
			rc->totals.base_bg_done++;
	}
	pthread_mutex_unlock(&t->chk_use);
	return err;
}

static void *bg_main(void *arg)
{
	struct txn_manager *t = arg;
	struct bgcheck *b = t->bg;
	struct rio_chan *rc = t->rc;
	uint64_t t0 = now_ns();
	pthread_mutex_lock(&t->chk_use);
	uint32_t ngroups = t->fs->group_desc_count, total = chk_deferred_count(t->chk);
	pthread_mutex_unlock(&t->chk_use);
	/* No line at the start, nor at a quick end: a clean mount prints
	 * nothing (the stats show base_check_groups_deferred and _unchecked),
	 * and the system log takes only a few reports per window, which a
	 * rejection and the exit line need. */
	uint8_t *buf = NULL;
	size_t cap = 0;
	errcode_t err = 0;
	bool stopped = b->pause_ms && bg_wait(b, b->pause_ms);
	for (uint32_t g = 0; g < ngroups && !err && !stopped; g++) {
		if (rc->totals.failed)
			break;
		err = bg_group(t, g, &buf, &cap);
		stopped = bg_stopped(b);
	}
	free(buf);
	pthread_mutex_lock(&t->chk_use);
	uint32_t left = chk_deferred_count(t->chk);
	pthread_mutex_unlock(&t->chk_use);
	double s = (double)(now_ns() - t0) / 1e9;
	if (!left) {
		if (s >= 1.0)   /* a check that took a while says it ended */
			fprintf(stderr, "recon-fuse: base check: done, every group checked (%.1f s in the "
				"background)\n", s);
	} else if (err && err != EROFS)
		fprintf(stderr, "recon-fuse: base check: the background check stopped (%s) with %u groups "
			"unchecked: they are checked before a commit relies on them; no seal is written\n",
			error_message(err), left);
	else if (!rc->totals.failed)
		fprintf(stderr, "recon-fuse: base check: the background check stopped at unmount with %u of %u "
			"groups unchecked (%.1f s); no seal is written\n", left, total, s);
	return NULL;
}

errcode_t bg_start(struct txn_manager *t)
{
	if (!t->chk || t->bg || !rio_cfg.base_check_background || !chk_deferred_count(t->chk))
		return 0;
	struct bgcheck *b = calloc(1, sizeof(*b));
	if (!b)
		return ENOMEM;
	pthread_mutex_init(&b->lock, NULL);
	pthread_cond_init(&b->cv, NULL);
	const char *pause = getenv("RECON_BGCHECK_PAUSE_MS");
	b->pause_ms = pause ? (unsigned)strtoul(pause, NULL, 10) : 0;
	t->bg = b;
	int ret = rio_start_quiet_thread(&b->thread, bg_main, t);
	if (ret) {
		t->bg = NULL;
		pthread_mutex_destroy(&b->lock);
		pthread_cond_destroy(&b->cv);
		free(b);
		return (errcode_t)ret;
	}
	return 0;
}

void bg_stop(struct txn_manager *t)
{
	struct bgcheck *b = t->bg;
	if (!b)
		return;
	pthread_mutex_lock(&b->lock);
	b->stop = true;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->lock);
	pthread_join(b->thread, NULL);
	pthread_mutex_destroy(&b->lock);
	pthread_cond_destroy(&b->cv);
	free(b);
	t->bg = NULL;
}
