/*
 * io/bgcheck.c - the base check's deferred part: the inode-table tails the
 * mount's chk_scan left unread (checker.h, "deferred table tails"), checked
 * group by group on a thread of the channel's own while the file system
 * serves, and, before a commit that writes a deferred group's inode table
 * or inode bitmap, synchronously in the commit path (bg_gate), so that no
 * verdict relies on a tail not yet checked.  A claimed group (checker.h:
 * pristine by its descriptor, its bitmaps unread at mount) is checked the
 * same way, its two bitmaps read with its table, and also before a commit
 * writes its block bitmap and before file data is written to one of its
 * blocks (bg_claim_gate).
 *
 * Locking: t->chk_use makes the checker's users one at a time: the commit
 * path holds it from bg_gate through chk_check, and again around
 * chk_advance; the background thread holds it while it asks where a tail
 * lies and while chk_check_tail judges what it read, never across its
 * device read; a data write's thread holds it while it checks a claimed
 * group (bg_claim_gate), reads included (once per group at most).  A tail
 * or bitmap pair read off the lock is still the approved state when the
 * lock is taken and the group is still deferred: a commit writes a group's
 * table or bitmaps only after bg_gate has checked (and unmarked) it, under
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
	fprintf(stderr, "recon-fuse: the image was not consistent when mounted (group %u, checked after "
		"the mount); no more writes are taken (unmount and run e2fsck -f)\n", g);
	record_verdict(t, v);
	t->rc->totals.failed = true;
}

/* Claimed group g checked: the data path's mirror forgets it. */
static void claim_done(struct txn_manager *t, uint32_t g)
{
	if (t->claim_open)
		__atomic_fetch_and(&t->claim_open[g / 8], (uint8_t)~(1u << (g % 8)), __ATOMIC_RELEASE);
}

/* chk_check_tail of g with t->chk_use held; table and bitmaps NULL: the
 * checker reads.  0, EROFS (damage: failed) or EIO (could not read: the
 * group stays deferred). */
static errcode_t check_group(struct txn_manager *t, uint32_t g, const void *table, const void *bitmaps,
			     const char *who)
{
	struct chk_verdict *v = NULL;
	int r = chk_check_tail(t->chk, g, table, bitmaps, &v);
	if (r < 0) {
		fprintf(stderr, "recon-fuse: base check (%s): group %u: cannot check its inode table or "
			"bitmaps: %s\n", who, g, strerror(-r));
		return EIO;
	}
	claim_done(t, g);
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
			/* a claimed group's block bitmap changes with any block
			 * allocated or freed there: the claim is relied on */
			bool bbitmap = !strcmp(bi.type, "bbitmap") && chk_group_claimed(t->chk, bi.owner);
			if ((strcmp(bi.type, "itable") && strcmp(bi.type, "ibitmap") && !bbitmap) ||
			    !chk_group_deferred(t->chk, bi.owner))
				continue;
			errcode_t err = check_group(t, bi.owner, NULL, NULL, "before a commit");
			if (err) {
				t->rc->totals.failed = true;
				return err;
			}
			t->rc->totals.base_commit_done++;
		}
	}
	return 0;
}

errcode_t bg_claim_gate(struct txn_manager *t, uint64_t blk, uint64_t count)
{
	if (!t->claim_open || !count)
		return 0;
	uint64_t first = t->fs->super->s_first_data_block, bpg = t->fs->super->s_blocks_per_group;
	uint32_t ngroups = t->fs->group_desc_count;
	if (blk + count <= first)
		return 0;
	if (blk < first) {
		count -= first - blk;
		blk = first;
	}
	for (uint64_t g = (blk - first) / bpg; g <= (blk + count - 1 - first) / bpg && g < ngroups; g++) {
		if (!(__atomic_load_n(&t->claim_open[g / 8], __ATOMIC_ACQUIRE) >> (g % 8) & 1))
			continue;
		pthread_mutex_lock(&t->chk_use);
		errcode_t err = 0;
		if (chk_group_claimed(t->chk, (uint32_t)g)) {
			err = check_group(t, (uint32_t)g, NULL, NULL, "before a data write");
			if (!err)
				t->rc->totals.base_commit_done++;
		}
		pthread_mutex_unlock(&t->chk_use);
		if (err) {
			t->rc->totals.failed = true;
			return err;
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

/* len bytes at off into buf, read once: kept out of the host's cache (see
 * attach.c's scan). */
static errcode_t bg_read(struct rio_chan *rc, uint64_t off, uint8_t *buf, size_t len)
{
	errcode_t err = rc->dev.regular ? rio_dev_pread_sparse(&rc->dev, off, buf, len)
					: rio_dev_pread(&rc->dev, off, buf, len);
	if (!rc->dev.regular)
		(void)posix_fadvise(rc->dev.fd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
	return err;
}

/* One group's tail (and a claimed group's bitmaps, in one request) read
 * off the lock, judged under it.  0, or the error that ends the pass. */
static errcode_t bg_group(struct txn_manager *t, uint32_t g, uint8_t **buf, size_t *cap)
{
	struct rio_chan *rc = t->rc;
	uint64_t off, boff;
	size_t len, blen;
	pthread_mutex_lock(&t->chk_use);
	bool deferred = chk_group_deferred(t->chk, g);
	chk_tail_extent(t->chk, g, &off, &len);
	chk_claim_extent(t->chk, g, &boff, &blen);
	pthread_mutex_unlock(&t->chk_use);
	if (!deferred)
		return 0;
	if (len + blen > *cap) {
		uint8_t *nb = realloc(*buf, len + blen);
		if (!nb)
			return ENOMEM;
		*buf = nb;
		*cap = len + blen;
	}
	errcode_t err = len ? bg_read(rc, off, *buf, len) : 0;
	if (!err && blen)
		err = rio_dev_pread(&rc->dev, boff, *buf + len, blen);
	if (err)
		return err;
	pthread_mutex_lock(&t->chk_use);
	uint64_t off2, boff2;
	size_t len2, blen2;
	chk_tail_extent(t->chk, g, &off2, &len2);
	chk_claim_extent(t->chk, g, &boff2, &blen2);
	/* still deferred: what was read is approved (else the checker reads
	 * it anew, should its extent have moved) */
	if (chk_group_deferred(t->chk, g)) {
		bool same = off2 == off && len2 == len && boff2 == boff && blen2 == blen;
		err = check_group(t, g, same && len ? *buf : NULL, same && blen ? *buf + len : NULL,
				  "background");
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

/* The claimed groups as bits the data path reads without chk_use. */
static errcode_t claims_mirror(struct txn_manager *t)
{
	uint32_t ngroups = t->fs->group_desc_count;
	if (t->claim_open || !chk_claimed_count(t->chk))
		return 0;
	uint8_t *bits = calloc((size_t)ngroups / 8 + 1, 1);
	if (!bits)
		return ENOMEM;
	for (uint32_t g = 0; g < ngroups; g++)
		if (chk_group_claimed(t->chk, g))
			bits[g / 8] |= (uint8_t)(1u << (g % 8));
	t->claim_open = bits;
	return 0;
}

errcode_t bg_start(struct txn_manager *t)
{
	if (!t->chk || t->bg)
		return 0;
	errcode_t merr = claims_mirror(t);
	if (merr)
		return merr;
	if (!rio_cfg.base_check_background || !chk_deferred_count(t->chk))
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
