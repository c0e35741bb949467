/*
 * io/attach.c - a channel's transactions begin and end: rio_txn_attach (the
 * journal opened, the file system marked mounted, the checker attached to
 * the approved state, the commit thread started), the checker's attach begun
 * early (rio_txn_prepare) or kept from the mount's image check, the base
 * check, and rio_txn_detach and the teardown.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "txn_internal.h"

/* ---- the checker's reads ---- */

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

/* A base check reads whole inode tables once; on a block device the host
 * keeps them in the device's page cache, which the kernel then tears down
 * at the last close, inside the unmount (seconds for a disk never sealed).
 * They are dropped as read instead. */
#define SCAN_DROP_READ (64u << 10)

static int approved_read_cb(void *ctx, uint64_t offset, void *buf, size_t len)
{
	struct rio_chan *rc = ctx;
	int r = chk_result(rio_approved_read(rc, offset, len, buf));
	if (rc->scanning && !rc->dev.regular && len >= SCAN_DROP_READ)
		(void)posix_fadvise(rc->dev.fd, (off_t)offset, (off_t)len, POSIX_FADV_DONTNEED);
	return r;
}

/* Attach a checker to what rc serves through read; EXT2_ET_UNSUPP_FEATURE
 * for an image the checker does not model. */
static errcode_t attach_checker(struct rio_chan *rc, chk_read_fn read, chk_zero_fn zero,
			    struct chk_fs **out)
{
	char msg[256] = "";
	struct chk_options opt = { .cache_bytes = (size_t)rio_cfg.checker_cache_mb << 20,
				   .zero = zero, .pristine = rc->pristine, .npristine = rc->npristine,
				   .pristine_claimed = rc->pristine_claimed };
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
 * threads (the daemon's exit signals must interrupt its FUSE loop). */
int rio_start_quiet_thread(pthread_t *th, void *(*fn)(void *), void *arg)
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
				   .zero = prep_zero_cb, .pristine = p->rc->pristine,
				   .npristine = p->rc->npristine,
				   .pristine_claimed = p->rc->pristine_claimed };
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
	int ret = rio_start_quiet_thread(&p->thread, prep_main, p);
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
	bg_stop(t);
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
	pthread_mutex_destroy(&t->chk_use);
	free(t->claim_open);
	free(t->gate);
	ovl_clear(t);
	free(t->ents);
	free(t->hash);
	blkset_clear(&t->freed);
	blkset_clear(&t->logged_prev);
	free(t->sp_freed);
	free(t->sp_unfreed);
	free(t->sp_allocs);
	if (t->jbd)
		jbd_close(t->jbd);
	if (t->chk) {
		struct chk_stats cs;
		chk_get_stats(t->chk, &cs);
		t->rc->totals.chk_cpu_ns += cs.cpu_ns;
		t->rc->totals.chk_scan_ns += cs.scan_cpu_ns;
		t->rc->totals.chk_hits += cs.cache_hits;
		t->rc->totals.chk_misses += cs.cache_misses;
		t->rc->totals.base_pending = chk_deferred_count(t->chk);
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

/* A new transaction manager for fs on rc, not yet attached. */
static errcode_t txn_new(ext2_filsys fs, struct rio_chan *rc, struct txn_manager **out)
{
	struct txn_manager *t = calloc(1, sizeof(*t));
	if (!t)
		return ENOMEM;
	t->fs = fs;
	t->rc = rc;
	t->bs = fs->blocksize;
	pthread_mutex_init(&t->cm, NULL);
	pthread_cond_init(&t->cv, NULL);
	pthread_rwlock_init(&t->chk_lock, NULL);
	pthread_mutex_init(&t->chk_use, NULL);
	t->rng = rio_cfg.fault_seed * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull;
	t->tid_open = 1;
	const char *gate = getenv("RECON_COMMIT_GATE");
	if (gate && *gate && !(t->gate = strdup(gate))) {
		rio_txn_free(t);
		return ENOMEM;
	}
	errcode_t err = fault_corrupt_parse(t, rio_cfg.fault_corrupt);
	if (err) {
		fprintf(stderr, "recon-fuse: bad fault_corrupt '%s'\n", rio_cfg.fault_corrupt);
		rio_txn_free(t);
		return err;
	}
	*out = t;
	return 0;
}

/* The size, in blocks, past which a transaction commits as soon as no
 * other commit is running, where no max_transaction_blocks is set.  A
 * commit's memory grows with the blocks it holds (the overlay's two copies,
 * the checker's table blocks, inode changes and records, the log buffer:
 * some 40 KiB per inode-table block), and a fast client fills a quarter of
 * a large journal within the commit interval; past this size a larger
 * transaction raises the daemon's peak RSS, and the bench sees no time
 * saved by it.  While the previous commit runs, the transaction goes on
 * growing up to the hard limit instead: committing then would wait for
 * it, and stall the request.  bench/README.md ("Memory") has the
 * measurement. */
#define SOFT_TXN_BLOCKS 1024

/* Log through the journal when there is one to use (it must not need
 * recovery), and the transaction size limits that follow. */
static errcode_t open_journal(struct txn_manager *t)
{
	ext2_filsys fs = t->fs;
	t->journal = rio_cfg.journal && ext2fs_has_feature_journal(fs->super) &&
		     fs->super->s_journal_inum != 0;
	if (!t->journal) {
		t->max_blocks = rio_cfg.max_transaction_blocks ? rio_cfg.max_transaction_blocks : 8192;
		t->soft_blocks = rio_cfg.max_transaction_blocks ? t->max_blocks : SOFT_TXN_BLOCKS;
		return 0;
	}
	char msg[256] = "";
	rio_jbd_dev_init(&t->jctx, &t->jdev, t->rc, fs->blocksize);
	errcode_t err = jbd_open(fs, &t->jdev, &t->jbd, msg, sizeof(msg));
	if (err) {
		fprintf(stderr, "recon-fuse: journal: %s\n", msg[0] ? msg : error_message(err));
		return err;
	}
	if (jbd_needs_recovery(t->jbd)) {
		fprintf(stderr, "recon-fuse: the journal needs recovery; replay it before attaching\n");
		return EXT2_ET_UNSUPP_FEATURE;
	}
	uint32_t jmax = jbd_max_transaction_blocks(t->jbd);
	t->max_blocks = rio_cfg.max_transaction_blocks ? rio_cfg.max_transaction_blocks
						       : jmax / 4;
	if (t->max_blocks > jmax)
		t->max_blocks = jmax;
	if (t->max_blocks == 0)
		t->max_blocks = 1;
	t->soft_blocks = rio_cfg.max_transaction_blocks || t->max_blocks < SOFT_TXN_BLOCKS
				 ? t->max_blocks : SOFT_TXN_BLOCKS;
	return 0;
}

/* Mark the file system mounted, durably, before anything is logged:
 * needs_recovery with the journal, VALID_FS cleared without. */
static errcode_t mark_mounted(struct txn_manager *t)
{
	ext2_filsys fs = t->fs;
	errcode_t err;
	t->was_valid = fs->super->s_state & EXT2_VALID_FS;
	if (t->journal) {
		err = rio_raw_sb_update(t->rc, EXT3_FEATURE_INCOMPAT_RECOVER, 0, 0, 0);
		fs->super->s_feature_incompat |= EXT3_FEATURE_INCOMPAT_RECOVER;
	} else {
		err = rio_raw_sb_update(t->rc, 0, 0, 0, EXT2_VALID_FS);
		fs->super->s_state &= (uint16_t)~EXT2_VALID_FS;
	}
	if (err)
		return err;
	rio_raw_sb_to_orig(fs, t->rc);
	return 0;
}

/* mark_mounted undone, for an attach that fails after it. */
static void unmark_mounted(struct txn_manager *t)
{
	ext2_filsys fs = t->fs;
	if (t->journal) {
		if (!rio_raw_sb_update(t->rc, 0, EXT3_FEATURE_INCOMPAT_RECOVER, 0, 0))
			fs->super->s_feature_incompat &= ~EXT3_FEATURE_INCOMPAT_RECOVER;
	} else if (t->was_valid && !rio_raw_sb_update(t->rc, 0, 0, EXT2_VALID_FS, 0)) {
		fs->super->s_state |= EXT2_VALID_FS;
	}
	rio_raw_sb_to_orig(fs, t->rc);
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
	struct txn_manager *t;
	errcode_t err = txn_new(fs, rc, &t);
	if (err)
		return err;
	/* what libext2fs wrote before (orphan processing, recovery) is the
	 * approved base: make it durable */
	err = rio_flush_device(fs->io);
	if (!err)
		err = open_journal(t);
	if (!err)
		err = flush_init(t);
	if (!err)
		err = mark_mounted(t);
	if (err)
		goto fail;

	rc->chk_early = rio_cfg.checker && (t->chk = prep_take(rc)) != NULL;
	if (rio_cfg.checker && !t->chk) {
		err = attach_checker(rc, approved_read_cb, approved_zero_cb, &t->chk);
		if (err) {
			t->chk = NULL;
			goto unmark;
		}
	}
	/* a checker attached anew after the base check takes its deferred
	 * groups: what that check left unread is still unchecked */
	if (t->chk && rc->deferred && chk_set_deferred(t->chk, rc->deferred, rc->ndeferred)) {
		err = ENOMEM;
		goto unmark;
	}
	if (rio_cfg.async_commit) {
		int ret = rio_start_quiet_thread(&t->thread, commit_thread, t);
		if (ret) {
			err = (errcode_t)ret;
			goto unmark;
		}
		t->thread_running = true;
	}
	ext2fs_set_block_alloc_stats_callback(fs, block_stats_cb, &t->old_stats);
	ext2fs_set_block_alloc_stats_range_callback(fs, block_stats_range_cb, &t->old_stats_range);
	rc->txn = t;
	/* without the thread every deferred group is checked before a
	 * commit relies on it all the same; only the seal waits for them */
	err = bg_start(t);
	if (err)
		fprintf(stderr, "recon-fuse: base check: no background thread (%s)\n", error_message(err));
	return 0;
unmark:
	unmark_mounted(t);
fail:
	rio_txn_free(t);
	return err;
}

/* Only the superblock's free counts wrong: what a read-write mount recounts
 * and writes in its first commit (checked as any), so a base all the same. */
static bool only_free_counts(const struct chk_verdict *v)
{
	for (size_t i = 0; i < chk_verdict_nviolations(v); i++) {
		const struct chk_violation *x = chk_verdict_violation(v, i);
		if (!x->inv || (strcmp(x->inv->id, "INV_SB_FREE_BLOCKS") && strcmp(x->inv->id, "INV_SB_FREE_INODES")))
			return false;
	}
	return true;
}

/* The scan's deferred groups, kept for the transactions' checker should
 * rio_txn_attach attach one anew.  0 or -ENOMEM. */
static int remember_deferred(struct rio_chan *rc, struct chk_fs *chk, uint32_t ngroups)
{
	const uint8_t *bits = chk_deferred_bits(chk);
	free(rc->deferred);
	rc->deferred = NULL;
	rc->ndeferred = 0;
	rc->totals.base_deferred = chk_deferred_count(chk);
	if (!bits)
		return 0;
	size_t bytes = ((size_t)ngroups + 7) / 8;
	if (!(rc->deferred = malloc(bytes)))
		return -ENOMEM;
	memcpy(rc->deferred, bits, bytes);
	rc->ndeferred = ngroups;
	return 0;
}

/* chk_scan of chk over rc into *report (NULL when consistent): the first
 * violations, one a line, and how many more; *clean when none but the
 * superblock's free counts.  The scan reads every table once: those reads
 * do not fill rc's cache. */
static errcode_t scan_report(struct rio_chan *rc, ext2_filsys fs, struct chk_fs *chk, bool defer, char **report,
			     bool *clean)
{
	struct chk_verdict *v = NULL;
	struct chk_stats before, after;
	chk_get_stats(chk, &before);
	bool fill = rio_cache_set_fill(&rc->cache, false);
	if (chk_set_sealed(chk, rc->sealed, rc->nsealed))
		(void)chk_set_sealed(chk, NULL, 0);   /* unusable: every table is read */
	chk_set_defer_tails(chk, defer);
	rc->scanning = true;
	int ret = chk_scan(chk, &v);
	rc->scanning = false;
	if (ret >= 0 && remember_deferred(rc, chk, fs->group_desc_count))
		ret = -ENOMEM;
	rio_cache_set_fill(&rc->cache, fill);
	chk_get_stats(chk, &after);
	rc->totals.scan_tables_read += after.scan_tables_read - before.scan_tables_read;
	rc->totals.scan_tables_sealed += after.scan_tables_sealed - before.scan_tables_sealed;
	rc->totals.scan_table_bytes += after.scan_table_bytes - before.scan_table_bytes;
	rc->totals.pristine_groups = after.pristine_groups - after.claimed_groups;
	rc->totals.claimed_groups = after.claimed_groups;
	errcode_t err = ret < 0 ? (errcode_t)-ret : 0;
	size_t n = v ? chk_verdict_nviolations(v) : 0;
	*clean = !err && v && only_free_counts(v);
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
	struct rio_chan *rc;
	struct txn_manager *t;
	*report = NULL;
	errcode_t bad = txn_attached(fs, &rc, &t);
	if (bad)
		return bad;
	struct chk_fs *chk = t->chk, *own = NULL;
	if (!chk) {
		/* checker=off: a shadow state of its own, for this check alone */
		errcode_t err = attach_checker(rc, approved_read_cb, approved_zero_cb, &own);
		if (err)
			return err;
		chk = own;
	}
	bool clean;
	bool defer = !own && rio_cfg.base_check_background;
	bg_stop(t);   /* the scan replaces the deferred marks the thread works on */
	errcode_t err = scan_report(rc, fs, chk, defer, report, &clean);
	rc->base_clean = !own && clean;
	chk_detach(own);
	if (!err && defer && !*report)
		err = bg_start(t);
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
	bool clean;
	/* read-write: what the scan leaves is checked after the mount */
	err = scan_report(rc, fs, own, keep && rio_cfg.base_check_background, report, &clean);
	rc->base_clean = keep && clean;
	if (keep && !err && !*report)
		prep_keep(rc, own);
	else
		chk_detach(own);
	return err;
}

errcode_t rio_txn_detach(ext2_filsys fs)
{
	struct rio_chan *rc;
	struct txn_manager *t;
	errcode_t bad = txn_attached(fs, &rc, &t);
	if (bad)
		return bad;
	/* unmount does not wait for the background check: what it left
	 * unchecked only forgoes the seal (rio_txn_sealable) */
	bg_stop(t);
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
	rio_raw_sb_to_orig(fs, rc);
	if (err)
		return err;
	if (failed)
		return EROFS;
	return merr;
}

errcode_t rio_set_sealed_groups(io_channel ch, const uint8_t *bits, uint32_t ngroups)
{
	struct rio_chan *rc = ch ? ch->private_data : NULL;
	if (!rc || rc->txn)
		return EXT2_ET_INVALID_ARGUMENT;
	uint8_t *copy = NULL;
	if (bits) {
		copy = malloc((size_t)ngroups / 8 + 1);
		if (!copy)
			return ENOMEM;
		memcpy(copy, bits, ((size_t)ngroups + 7) / 8);
	}
	free(rc->sealed);
	rc->sealed = copy;
	rc->nsealed = bits ? ngroups : 0;
	return 0;
}

static errcode_t set_pristine(io_channel ch, const uint8_t *bits, uint32_t ngroups, bool claimed)
{
	struct rio_chan *rc = ch ? ch->private_data : NULL;
	if (!rc || rc->txn || rc->prep)
		return EXT2_ET_INVALID_ARGUMENT;
	uint8_t *copy = NULL;
	if (bits && !(copy = malloc((size_t)ngroups / 8 + 1)))
		return ENOMEM;
	if (copy)
		memcpy(copy, bits, ((size_t)ngroups + 7) / 8);
	free(rc->pristine);
	rc->pristine = copy;
	rc->npristine = bits ? ngroups : 0;
	rc->pristine_claimed = bits && claimed;
	return 0;
}

errcode_t rio_set_pristine_groups(io_channel ch, const uint8_t *bits, uint32_t ngroups)
{
	return set_pristine(ch, bits, ngroups, false);
}

errcode_t rio_set_claimed_groups(io_channel ch, const uint8_t *bits, uint32_t ngroups)
{
	return set_pristine(ch, bits, ngroups, true);
}

bool rio_txn_sealable(io_channel ch)
{
	struct rio_chan *rc = ch ? ch->private_data : NULL;
	/* checked from the base on, every commit approved and home */
	return rc && rio_cfg.checker && rc->base_clean && !rc->txn && rc->totals.nviol == 0 &&
	       rc->totals.base_pending == 0 &&
	       !atomic_load(&rc->totals.failed) && !atomic_load(&rc->totals.io_failed) &&
	       !rio_dev_crashed(&rc->dev);
}
