/*
 * fuse/main.c - recon-fuse: parse the configuration, open and check the file
 * system, replay its journal, process orphans, attach transactions, mount,
 * serve, and at unmount flush and close everything before exiting.
 */
#include "rfs.h"
#include "io.h"

#include <errno.h>
#include <linux/fuse.h>
#include <poll.h>
#include <stddef.h>
#include <sys/uio.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#define RECON_VERSION "0.1.0"

static int status_fd = -1;   /* pipe to the waiting parent (daemon mode) */

static void report_status(int st)
{
	if (status_fd >= 0) {
		rfs_log_flush();   /* the parent exits after what we said */
		char c = (char)st;
		if (write(status_fd, &c, 1) != 1) {
			/* the parent is gone; nothing to tell */
		}
		close(status_fd);
		status_fd = -1;
	}
}

/* Fork now, before any thread or ring exists; the parent waits for the
 * child to say whether the mount succeeded, so errors reach the terminal
 * and the exit status means "mounted". */
static int daemonize_early(void)
{
	int p[2];

	if (pipe(p))
		return -errno;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		char c = 1;
		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			c = 1;
		_exit(c);
	}
	close(p[0]);
	status_fd = p[1];
	if (setsid() < 0)
		return -errno;
	return 0;
}

static void detach_stdio(void)
{
	int fd = open("/dev/null", O_RDWR);
	if (fd < 0)
		return;
	dup2(fd, 0);
	dup2(fd, 1);
	if (!rfs_log_detach())
		dup2(fd, 2);
	if (fd > 2)
		close(fd);
	if (chdir("/")) {
		/* not fatal */
	}
}

/* A read-write open writes nothing: libext2fs's open of an MMP image would
 * write its MMP block (and wait), but such an image is refused read-write
 * (rfs_rw_refusal) before anything is written. */
static errcode_t open_fs(const char *dev, bool rw, ext2_filsys *fs)
{
	int flags = EXT2_FLAG_64BITS | EXT2_FLAG_IGNORE_CSUM_ERRORS |
		    (rw ? EXT2_FLAG_RW | EXT2_FLAG_SKIP_MMP : 0);
	errcode_t e = ext2fs_open2(dev, NULL, flags, 0, 0, rio_io_manager, fs);
	/* bitmaps as extents, not one bit per block (the mount's, and those
	 * ext2fs_check_desc builds): an empty 15 TiB disk's take a few MiB
	 * instead of 575 */
	if (!e)
		(*fs)->default_bitmap_type = EXT2FS_BMAP64_RBTREE;
	return e;
}

/* What a read-write mount reads next, group by group: both bitmaps (read by
 * libext2fs, then by the checker's base case).  Asked for all at once, from
 * the I/O manager's thread, so that the device works on many while the
 * first are read; a hint, errors ignored. */
static void readahead_group_metadata(ext2_filsys fs)
{
	size_t n = (size_t)fs->group_desc_count * 2;
	blk64_t *blks = malloc(n * sizeof(*blks));
	if (!blks)
		return;
	for (dgrp_t g = 0; g < fs->group_desc_count; g++) {
		blks[2 * (size_t)g] = ext2fs_block_bitmap_loc(fs, g);
		blks[2 * (size_t)g + 1] = ext2fs_inode_bitmap_loc(fs, g);
	}
	(void)rio_readahead_blocks(fs->io, blks, n);
	free(blks);
}

static void set_rio_config(const struct recon_config *cfg)
{
	struct rio_config rc = {
		.block_cache_mb = cfg->block_cache_mb,
		.no_uring = cfg->no_uring,
		.quiet = false,
		.checker = cfg->checker,
		.checker_cache_mb = cfg->checker_cache_mb,
		.commit_interval_ms = cfg->commit_interval_ms,
		.max_transaction_blocks = cfg->max_transaction_blocks,
		.on_violation = cfg->on_violation == ONV_STOP ? RIO_ONV_STOP :
				cfg->on_violation == ONV_LOG ? RIO_ONV_LOG : RIO_ONV_READONLY,
		.journal = cfg->journal,
		.async_commit = cfg->async_commit,
		.fault_crash_after = cfg->fault_crash_after,
		.fault_seed = cfg->fault_seed,
		.fault_corrupt = cfg->fault_corrupt,
		.fault_data_eio = cfg->fault_data_eio,
	};
	rio_set_config(&rc);
}

/* Close fs without writing anything (a read-write open has written
 * nothing yet) and open the device again read-only.  0 or -1 (said why). */
static int reopen_fs_ro(struct rfs *r, ext2_filsys *fs)
{
	(*fs)->flags &= ~(EXT2_FLAG_DIRTY | EXT2_FLAG_BB_DIRTY | EXT2_FLAG_IB_DIRTY);
	ext2fs_close_free(fs);
	r->ro = true;
	errcode_t e = open_fs(r->cfg->device, false, fs);
	if (e) {
		fprintf(stderr, "recon-fuse: cannot open %s: %s\n", r->cfg->device, error_message(e));
		return -1;
	}
	return 0;
}

/* Read-write refused after r->fs was set up: close it without writing and
 * open it again read-only (with its directory index).  0 or -1. */
static int reopen_ro(struct rfs *r)
{
	bool had_di = r->di != NULL;

	if (r->di)
		dindex_free(r->di);
	r->di = NULL;
	if (reopen_fs_ro(r, &r->fs))
		return -1;
	if (!had_di)
		return 0;
	r->di = dindex_new(r->fs, 4096);
	if (!r->di) {
		fprintf(stderr, "recon-fuse: out of memory\n");
		ext2fs_close_free(&r->fs);
		return -1;
	}
	return 0;
}

/* Drop a message's lines about the superblock's free counts: the mount
 * recounts those from the descriptors, as the kernel does, so the state it
 * would write has them right whenever the descriptors agree with the
 * bitmaps (which the check does judge). */
static void drop_free_count_lines(char *report)
{
	char *out = report;
	for (char *line = report; *line;) {
		char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
		if (strncmp(line, "INV_SB_FREE_BLOCKS:", 19) && strncmp(line, "INV_SB_FREE_INODES:", 19)) {
			memmove(out, line, len);
			out += len;
		}
		line += len;
	}
	*out = 0;
	if (out > report && out[-1] == '\n')
		out[-1] = 0;
}

/*
 * The base case of the checker's induction, before anything is written:
 * the whole image as a read-write mount would take it over (a journal
 * replayed in memory; the superblock's free counts as recounted) against
 * the properties every approved commit preserves.  What the checker
 * approves from an inconsistent base proves nothing, and libext2fs would
 * allocate from wrong bitmaps: such an image is served read-only.  On a
 * read-write open the checker that judged it is the transactions' (io
 * keeps it for rio_txn_attach).  0 consistent, 1 not (said why), -1 cannot
 * check (said why).
 */
static int check_image(struct rfs *r, ext2_filsys fs, bool replayed)
{
	const char *dev = r->cfg->device;
	char *report = NULL;
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	errcode_t e = rio_image_check(fs, &report);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (e == EXT2_ET_UNSUPP_FEATURE && !r->cfg->checker) {
		fprintf(stderr, "recon-fuse: %s: not checked at mount (checker=off, and the checker "
			"does not model this image)\n", dev);
		return 0;
	}
	if (e) {
		fprintf(stderr, "recon-fuse: cannot check %s at mount%s: %s; mount it read-only with "
			"-o ro, or run e2fsck\n", dev, replayed ? " (its journal replayed in memory)" : "",
			error_message(e));
		return -1;
	}
	double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	if (ms > 2000)
		fprintf(stderr, "recon-fuse: %s: the consistency check at mount took %.1f s\n", dev,
			ms / 1e3);
	if (report)
		drop_free_count_lines(report);
	if (!report || !*report) {
		free(report);
		return 0;
	}
	if (replayed)
		fprintf(stderr, "recon-fuse: %s: its journal, replayed, would leave it inconsistent; "
			"the replay stays in memory, the image is not written and is mounted read-only "
			"(run e2fsck -f; -o rw_unchecked replays and mounts read-write anyway, at your "
			"risk):\n%s\n", dev, report);
	else
		fprintf(stderr, "recon-fuse: %s is not consistent; mounting read-only (run e2fsck -f; "
			"-o rw_unchecked mounts it read-write anyway, at your risk):\n%s\n", dev, report);
	syslog(LOG_WARNING, "recon-fuse: %s is not consistent%s; mounted read-only", dev,
	       replayed ? " after its journal replay" : "");
	free(report);
	return 1;
}

static bool root_is_dir(struct rfs *r, ext2_filsys fs)
{
	struct ext2_inode root;
	if (ext2fs_read_inode(fs, EXT2_ROOT_INO, &root) || !LINUX_S_ISDIR(root.i_mode) ||
	    root.i_links_count == 0) {
		fprintf(stderr, "recon-fuse: %s: the root inode is not a directory; run e2fsck\n",
			r->cfg->device);
		return false;
	}
	return true;
}

/*
 * Whether to serve fs read-write, decided before anything is written: the
 * features, the recorded errors, the bitmaps (read here, as libext2fs's
 * allocator needs them) and the whole-image check.  fs is what a read-write
 * mount would take over: the device opened read-write, or, when its journal
 * needs recovery, the replay in memory.  0 read-write; 1 read-only (said
 * why); -1 refused (said why).
 */
static int decide_rw(struct rfs *r, ext2_filsys fs, bool replayed)
{
	const char *dev = r->cfg->device;
	struct ext2_super_block *sb = fs->super;
	char refusal[256], why_bad[256];

	if (rfs_rw_refusal(sb, dev, r->cfg->checker, refusal, sizeof(refusal))) {
		fprintf(stderr, "recon-fuse: %s\n", refusal);
		return -1;
	}
	bool errors = (sb->s_state & EXT2_ERROR_FS) ||
		      (!(sb->s_state & EXT2_VALID_FS) && !ext2fs_has_feature_journal(sb));
	if (errors && !r->cfg->force_rw) {
		fprintf(stderr, "recon-fuse: %s %s; mounting read-only (run e2fsck, or use -o "
			"force_rw)\n", dev, (sb->s_state & EXT2_ERROR_FS) ?
			"is marked with errors (ERROR_FS)" : "was not cleanly unmounted (ext2, no journal)");
		return 1;
	}
	readahead_group_metadata(fs);
	/* the checker's attach reads the same bitmaps: beside this pass */
	(void)rio_txn_prepare(fs);
	/* each bitmap block is read once here: past the block cache */
	(void)io_channel_set_options(fs->io, "cache=off");
	errcode_t e = rfs_read_bitmaps(fs);
	(void)io_channel_set_options(fs->io, "cache=on");
	if (e) {
		fprintf(stderr, "recon-fuse: cannot read the bitmaps of %s: %s; mount with -o ro or "
			"run e2fsck\n", dev, error_message(e));
		return -1;
	}
	/* as the kernel refuses to allocate from such a group: whatever the
	 * options, a write could land on the metadata */
	if (rfs_check_bitmaps(fs, why_bad, sizeof(why_bad))) {
		fprintf(stderr, "recon-fuse: %s: %s; mounting read-only (run e2fsck)\n", dev, why_bad);
		return 1;
	}
	if (!root_is_dir(r, fs))
		return -1;
	return r->cfg->rw_unchecked ? 0 : check_image(r, fs, replayed);
}

/* Replay fs's journal into memory and reopen it on the replay (the device
 * opened read-only; it is not written).  fs is closed either way.  0, or -1
 * (said why; the in-memory replay dropped). */
static int replay_in_memory(struct rfs *r, ext2_filsys *fs)
{
	const char *dev = r->cfg->device;
	char msg[256] = "", why_bad[256];
	unsigned replayed = 0;

	errcode_t e = rio_journal_recover(*fs, &replayed, msg, sizeof(msg));
	(*fs)->flags &= ~(EXT2_FLAG_DIRTY | EXT2_FLAG_SUPER_ONLY);
	ext2fs_close_free(fs);
	if (e) {
		fprintf(stderr, "recon-fuse: journal recovery of %s failed: %s%s%s; run e2fsck\n", dev,
			error_message(e), *msg ? ": " : "", msg);
		rio_replay_forget();
		return -1;
	}
	/* libext2fs's copies were stale: reopened on the replay */
	e = open_fs(dev, false, fs);
	if (e) {
		fprintf(stderr, "recon-fuse: cannot reopen %s after recovery: %s\n", dev,
			error_message(e));
		rio_replay_forget();
		return -1;
	}
	if (rfs_check_geometry(*fs, dev, why_bad, sizeof(why_bad))) {
		fprintf(stderr, "recon-fuse: %s: after journal recovery, the superblock or group "
			"descriptors are damaged: %s; run e2fsck\n", dev, why_bad);
		ext2fs_close_free(fs);
		rio_replay_forget();
		return -1;
	}
	if (replayed)
		fprintf(stderr, "recon-fuse: %s: replayed %u journal transaction(s) in memory\n", dev,
			replayed);
	return 0;
}

/*
 * A read-write mount of an image whose journal needs recovery rehearses the
 * replay first: replayed into memory, the state it leaves is what the mount
 * decides on (decide_rw).  Served read-only, or refused, the image is not
 * written; only a read-write mount replays the journal onto the disk.
 * Entered with the device closed.  0: replayed on disk (*fsp opened
 * read-write on it); 1: serve read-only (*fsp reads the replay in memory);
 * -1: refused, said why.
 */
static int rehearse_replay(struct rfs *r, ext2_filsys *fsp)
{
	const char *dev = r->cfg->device;
	ext2_filsys fs = NULL;
	char msg[256] = "", why_bad[256];
	unsigned replayed = 0;

	errcode_t e = open_fs(dev, false, &fs);
	if (e) {
		fprintf(stderr, "recon-fuse: cannot open %s: %s\n", dev, error_message(e));
		return -1;
	}
	if (replay_in_memory(r, &fs))
		return -1;
	int d = decide_rw(r, fs, true);
	if (d != 0) {
		if (d > 0) {
			*fsp = fs;
			return 1;
		}
		ext2fs_close_free(&fs);
		rio_replay_forget();
		return -1;
	}
	/* decided: from here the mount writes */
	ext2fs_close_free(&fs);
	rio_replay_forget();
	e = open_fs(dev, true, &fs);
	if (!e)
		e = rio_journal_recover(fs, &replayed, msg, sizeof(msg));
	if (e) {
		fprintf(stderr, "recon-fuse: journal recovery of %s failed: %s%s%s; run e2fsck\n", dev,
			error_message(e), *msg ? ": " : "", msg);
		goto fail;
	}
	fprintf(stderr, "recon-fuse: %s: replayed %u journal transaction(s)\n", dev, replayed);
	fs->flags &= ~(EXT2_FLAG_DIRTY | EXT2_FLAG_SUPER_ONLY);
	ext2fs_close_free(&fs);
	e = open_fs(dev, true, &fs);
	if (e) {
		fprintf(stderr, "recon-fuse: cannot reopen %s after recovery: %s\n", dev,
			error_message(e));
		goto fail;
	}
	if (rfs_check_geometry(fs, dev, why_bad, sizeof(why_bad))) {
		fprintf(stderr, "recon-fuse: %s: after journal recovery, the superblock or group "
			"descriptors are damaged: %s; run e2fsck\n", dev, why_bad);
		goto fail;
	}
	*fsp = fs;
	return 0;
fail:
	if (fs)
		ext2fs_close_free(&fs);
	return -1;
}

/* Decided read-write: the writes, in order.  Mark the file system mounted
 * and start transactions (rio_txn_attach); the recounted free counts,
 * cleared UNINIT flags and the orphans released go in the first
 * transaction, checked and journaled as any other.  0, 1 (served read-only
 * after all: orphan processing failed, said why) or -1. */
static int start_rw(struct rfs *r, bool recounted)
{
	ext2_filsys fs = r->fs;
	const char *dev = r->cfg->device;
	errcode_t e = rio_txn_attach(fs);

	if (e) {
		fprintf(stderr, "recon-fuse: cannot start transactions on %s: %s; mount it read-only "
			"with -o ro, or run e2fsck\n", dev, error_message(e));
		return -1;
	}
	r->attached = true;
	/* the kernel's rule: the superblock's free counts are hints, the
	 * descriptors' sums the truth (a power cut leaves them stale); written
	 * only when the descriptors agree with the bitmaps, so that a damaged
	 * descriptor's count never reaches the superblock */
	if (recounted && rfs_group_counts_agree(fs))
		ext2fs_mark_super_dirty(fs);
	(void)rfs_clear_uninit(fs);
	if (rfs_txn_hooks(r))
		fprintf(stderr, "recon-fuse: out of memory: the kernel's caches will not be "
			"invalidated after a rejected commit (they expire within 1 s)\n");
	if (!fs->super->s_last_orphan)
		return 0;
	int ret = rfs_process_orphans(r);
	e = rio_txn_boundary(fs, true);
	if (!ret && !e)
		return 0;
	fprintf(stderr, "recon-fuse: orphan processing on %s %s%s; mounting read-only (run "
		"e2fsck)\n", dev, e == EROFS ? "was rejected by the checker" : "failed: ",
		e == EROFS ? "" : e ? error_message(e) : strerror(-ret));
	r->attached = false;
	if (!rio_txn_failed(fs->io))
		(void)rio_txn_detach(fs);
	return reopen_ro(r) ? -1 : 1;
}

/* A journal that needs recovery: replayed into memory for a read-only
 * mount (never written), rehearsed then replayed for a read-write one.
 * *fs open on entry and on success (0); -1 refused (said why). */
static int recover_journal(struct rfs *r, ext2_filsys *fs)
{
	if (r->ro)
		return replay_in_memory(r, fs);
	/* the device is closed while the replay is rehearsed */
	ext2fs_close_free(fs);
	int rh = rehearse_replay(r, fs);
	if (rh < 0)
		return -1;
	r->ro = rh > 0;
	return 0;
}

/* Open the file system, decide how to serve it, then (read-write) write:
 * nothing reaches the device before the mount has decided to serve it
 * read-write.  On success r->fs is open (read-write unless r->ro). */
static int prepare_fs(struct rfs *r)
{
	struct recon_config *cfg = r->cfg;
	ext2_filsys fs = NULL;
	errcode_t e;
	bool served_from_replay = false;

	struct ext2_super_block disk_sb;
	char refusal[256];
	/* before libext2fs opens it read-write: it refuses some features
	 * without naming them, and a refused image must not be written */
	if (!r->ro && rfs_read_super(cfg->device, &disk_sb) == 0 &&
	    disk_sb.s_magic == EXT2_SUPER_MAGIC &&
	    rfs_rw_refusal(&disk_sb, cfg->device, cfg->checker, refusal, sizeof(refusal))) {
		fprintf(stderr, "recon-fuse: %s\n", refusal);
		return -1;
	}
	e = open_fs(cfg->device, !r->ro, &fs);
	if (e && !r->ro && (e == EACCES || e == EROFS || e == EPERM)) {
		fprintf(stderr, "recon-fuse: %s: %s; use -o ro to mount read-only\n", cfg->device,
			error_message(e));
		return -1;
	}
	if (e) {
		fprintf(stderr, "recon-fuse: cannot open %s: %s%s\n", cfg->device, error_message(e),
			e == EXT2_ET_CORRUPT_SUPERBLOCK || e == EXT2_ET_BAD_MAGIC ||
			e == EXT2_ET_UNEXPECTED_BLOCK_SIZE || e == EXT2_ET_GDESC_READ ||
			e == EXT2_ET_SHORT_READ ? " (a damaged image? run e2fsck)" : "");
		return -1;
	}
	struct ext2_super_block *sb = fs->super;
	char why_bad[256];

	if (rfs_check_geometry(fs, cfg->device, why_bad, sizeof(why_bad))) {
		fprintf(stderr, "recon-fuse: %s: the superblock or group descriptors are damaged: "
			"%s; run e2fsck\n", cfg->device, why_bad);
		ext2fs_close_free(&fs);
		return -1;
	}
	bool recover = ext2fs_has_feature_journal_needs_recovery(sb);
	if (recover && !cfg->noload && (!ext2fs_has_feature_journal(sb) || sb->s_journal_inum == 0)) {
		fprintf(stderr, "recon-fuse: %s needs journal recovery from an external journal, "
			"which recon-fuse does not support; run e2fsck\n", cfg->device);
		ext2fs_close_free(&fs);
		return -1;
	}
	if (ext2fs_has_feature_journal(sb) && !cfg->noload) {
		/* a journal the kernel refuses to load, it refuses read-only too */
		char jmsg[512];
		if (rio_journal_check(fs, jmsg, sizeof(jmsg)) == EXT2_ET_JOURNAL_TOO_SMALL) {
			fprintf(stderr, "recon-fuse: %s\n", jmsg);
			ext2fs_close_free(&fs);
			return -1;
		}
	}
	if (recover && cfg->noload) {
		if (!r->ro) {
			fprintf(stderr, "recon-fuse: %s needs journal recovery, which noload "
				"suppresses; mount it read-only (-o ro) or allow the replay\n",
				cfg->device);
			ext2fs_close_free(&fs);
			return -1;
		}
		fprintf(stderr, "recon-fuse: %s: journal not replayed (noload): what is mounted is "
			"the disk without its last transactions and may look inconsistent\n", cfg->device);
	} else if (recover) {
		bool was_ro = r->ro;
		if (recover_journal(r, &fs))
			return -1;
		served_from_replay = r->ro && !was_ro;
	}
	if (!r->ro && !served_from_replay) {
		int d = decide_rw(r, fs, false);
		if (d < 0) {
			ext2fs_close_free(&fs);
			return -1;
		}
		if (d > 0 && reopen_fs_ro(r, &fs))
			return -1;
	}
	r->fs = fs;
	bmap_limits(r);
	/* in memory; a read-write mount writes it in its first transaction */
	bool recounted = rfs_recount_free(fs);
	if (!root_is_dir(r, fs))
		goto fail;
	r->di = dindex_new(fs, 4096);
	if (!r->di) {
		fprintf(stderr, "recon-fuse: out of memory\n");
		goto fail;
	}
	if (!r->ro && start_rw(r, recounted) < 0)
		goto fail;
	return 0;
fail:
	if (r->di)
		dindex_free(r->di);
	r->di = NULL;
	ext2fs_close_free(&r->fs);
	return -1;
}

void rfs_unmount(struct rfs *r)
{
	errcode_t e;

	pthread_mutex_lock(&r->lock);
	if (!r->fs) {
		pthread_mutex_unlock(&r->lock);
		return;
	}
	/* unlinked inodes only the kernel held are freed; files still open
	 * (lazy unmount) stay on the orphan list for the next mount */
	held_release_all(r);
	bool attached = r->attached;
	/* after a turn to read-only nothing more commits: what was not durable
	 * then is discarded, and the exit status says so */
	if (attached && !rio_txn_failed(r->fs->io) && !r->lost) {
		e = rio_txn_detach(r->fs);
		if (e) {
			fprintf(stderr, "recon-fuse: final commit failed: %s\n", error_message(e));
			r->lost = true;
		}
	}
	if (attached && (r->lost || rio_txn_failed(r->fs->io))) {
		r->lost = true;
		fprintf(stderr, "recon-fuse: a commit was rejected or failed: the changes since the "
			"last durable commit were discarded (exit status %d)\n",
			r->stopped ? RFS_EXIT_STOPPED : RFS_EXIT_LOST);
	}
	if (r->cfg->stats_file) {
		e = rio_write_stats(r->fs->io, r->cfg->stats_file);
		if (e)
			fprintf(stderr, "recon-fuse: cannot write stats to %s: %s\n", r->cfg->stats_file,
				error_message(e));
	}
	dindex_free(r->di);
	r->di = NULL;
	r->fs->write_inode = NULL;
	if (rio_txn_failed(r->fs->io))
		r->fs->flags &= ~(EXT2_FLAG_DIRTY | EXT2_FLAG_BB_DIRTY | EXT2_FLAG_IB_DIRTY);
	e = ext2fs_close_free(&r->fs);
	if (e)
		fprintf(stderr, "recon-fuse: closing the file system failed: %s\n", error_message(e));
	free(r->undo);
	r->undo = NULL;
	r->nundo = r->capundo = 0;
	free(r->known);
	r->known = NULL;
	free(r->chg);
	r->chg = NULL;
	r->chg_cap = r->chg_count = 0;
	pthread_mutex_unlock(&r->lock);
}

static pthread_t ticker;
static bool ticker_running;
static pthread_mutex_t ticker_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ticker_cv = PTHREAD_COND_INITIALIZER;
static atomic_bool ticker_stop;
static bool reap_kicked;   /* under ticker_mu */

/* Called with the file-system lock held (held_settle): the thread takes
 * ticker_mu only while it does not hold that lock, so no cycle. */
static void ticker_reap_kick(struct rfs *r)
{
	(void)r;
	pthread_mutex_lock(&ticker_mu);
	reap_kicked = true;
	pthread_cond_signal(&ticker_cv);
	pthread_mutex_unlock(&ticker_mu);
}

/* Calls the transaction boundary every commit_interval_ms, so a transaction
 * left open by the last operation before an idle period still commits; and
 * is the reaper: frees queued unlinked inodes a step at a time, the lock
 * let go between steps so requests are served meanwhile. */
static void *ticker_main(void *arg)
{
	struct rfs *r = arg;
	unsigned ms = r->cfg->commit_interval_ms;

	pthread_mutex_lock(&ticker_mu);
	while (!atomic_load(&ticker_stop)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += ms / 1000;
		ts.tv_nsec += (long)(ms % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		if (!reap_kicked)
			pthread_cond_timedwait(&ticker_cv, &ticker_mu, &ts);
		bool reap = reap_kicked;
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

static void start_ticker(struct rfs *r)
{
	/* with every signal blocked, so the daemon's exit signals reach the
	 * FUSE loop's thread and end its read() */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	ticker_running = pthread_create(&ticker, NULL, ticker_main, r) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ticker_running) {
		pthread_mutex_lock(&r->lock);
		r->reap_kick = ticker_reap_kick;
		pthread_mutex_unlock(&r->lock);
	}
}

static void stop_ticker(struct rfs *r)
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

static int write_pidfile(const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "recon-fuse: cannot write pid file %s: %s\n", path, strerror(errno));
		return -1;
	}
	fprintf(f, "%d\n", (int)getpid());
	return fclose(f) ? -1 : 0;
}

/*
 * The /dev/fuse channel, with one change to what libfuse sends: the INIT
 * reply also asks for FUSE_HANDLE_KILLPRIV_V2 when the kernel offers it.
 * libfuse 3.14 (Debian 12) does not forward FUSE_CAP_HANDLE_KILLPRIV*, and
 * without it the kernel asks getxattr("security.capability") before every
 * write(2) and re-reads the mode by GETATTR before every chown; with it the
 * file system marks inodes S_NOSEC after one check and leaves clearing of
 * set-id bits and capabilities to us (op_setattr, do_write, open_truncate
 * and drop_capability do it, as ext3 does).
 */
static uint64_t init_unique;	/* the INIT request's id until it is answered */
static uint32_t init_offered;	/* the kernel's INIT flags (low 32 bits) */
static uint32_t init_offered2;	/* and the high 32 bits (with FUSE_INIT_EXT) */

/* Protocol 7.42 (Linux 6.14): requests over io_uring (fuse/uring.c). */
#define INIT_EXT_FLAG (1u << 30)		/* FUSE_INIT_EXT: flags2 is valid */
#define OVER_IO_URING_FLAG2 (1u << (41 - 32))	/* FUSE_OVER_IO_URING in flags2 */

static unsigned dev_poll_us;	/* 0: plain blocking reads */
static bool dev_uring_serving;	/* requests come over io_uring (fuse/uring.c) */
static struct fuse_session *dev_session;
static uint64_t dev_replied_at;	/* when the last reply went out (us) */
static uint64_t dev_gap_avg;	/* moving average of reply-to-next-request gaps (us) */

static uint64_t now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

/*
 * With poll_us (one worker only), the descriptor is non-blocking and the
 * worker keeps asking for the next request for up to poll_us after a reply
 * before it sleeps in poll(): a request that arrives meanwhile costs no
 * wake-up of the daemon, which on a virtual machine is the largest single
 * cost of a FUSE round trip.  It polls only while the recent gaps between a
 * reply and the next request (a moving average, measured whether it polled
 * or slept) are shorter than poll_us: a client that thinks between
 * requests, or a CPU shared with other work, turns polling off by itself.
 * Never returns EAGAIN (libfuse's loop would end on it).
 */
/* Sleep until a request is ready.  The exit signals (libfuse's handlers
 * end the session) are blocked from the check of the session's state until
 * ppoll() sleeps, so one that lands while we were polling is not missed. */
static int dev_sleep(int fd)
{
	sigset_t exits, old;
	sigemptyset(&exits);
	sigaddset(&exits, SIGINT);
	sigaddset(&exits, SIGTERM);
	sigaddset(&exits, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &exits, &old);
	int ret = 0, err = 0;
	if (fuse_session_exited(dev_session)) {
		ret = -1;
		err = EINTR;
	} else {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ret = ppoll(&p, 1, NULL, &old);
		err = errno;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = err;
	return ret < 0 ? -1 : 0;
}

static ssize_t dev_read_next(int fd, void *buf, size_t len)
{
	if (!dev_poll_us)
		return read(fd, buf, len);
	uint64_t start = now_us();
	/* with io_uring serving, only FORGETs and INTERRUPTs come this way */
	bool spin = dev_gap_avg < dev_poll_us && !dev_uring_serving;
	ssize_t n;
	for (;;) {
		n = read(fd, buf, len);
		if (n >= 0 || errno != EAGAIN)
			break;
		if (spin && now_us() - start < dev_poll_us)
			continue;
		spin = false;
		if (dev_sleep(fd) < 0)
			return -1;	/* EINTR: libfuse checks for exit */
	}
	if (n >= 0 && dev_replied_at) {
		uint64_t gap = now_us() - dev_replied_at;
		if (gap > 8 * (uint64_t)dev_poll_us)
			gap = 8 * (uint64_t)dev_poll_us;
		dev_gap_avg = (dev_gap_avg * 7 + gap) / 8;
	}
	return n;
}

static ssize_t dev_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	ssize_t n = dev_read_next(fd, buf, len);
	/* an unmount with requests still queued (thousands of RELEASEs after a
	 * process closed its files) aborts the request being read: the end of
	 * the session, as ENODEV is, not a failure */
	if (n < 0 && errno == ECONNABORTED)
		errno = ENODEV;
	const struct fuse_in_header *h = buf;
	if (n >= (ssize_t)(sizeof(*h) + offsetof(struct fuse_init_in, flags) + sizeof(uint32_t)) &&
	    h->opcode == FUSE_INIT) {
		const struct fuse_init_in *in = (const void *)(h + 1);
		init_unique = h->unique;
		init_offered = in->flags;
		init_offered2 = (in->flags & INIT_EXT_FLAG) &&
				n >= (ssize_t)(sizeof(*h) + offsetof(struct fuse_init_in, flags2) +
					       sizeof(uint32_t)) ? in->flags2 : 0;
	}
	return n;
}

/* Answering INIT: ask for requests over io_uring when the kernel offers it
 * and the configuration allows; the queues are ready before the reply goes
 * out (the kernel holds every request from then until they are). */
static struct rfs_uring *init_uring(struct rfs *r, int fd, struct fuse_init_out *out)
{
	if (r->cfg->fuse_uring == FUSE_URING_OFF)
		return NULL;
	if (!(init_offered & INIT_EXT_FLAG) || !(init_offered2 & OVER_IO_URING_FLAG2)) {
		if (r->cfg->fuse_uring == FUSE_URING_ON)
			fprintf(stderr, "recon-fuse: fuse_uring=on, but the kernel did not offer FUSE "
				"over io_uring for this mount; serving through /dev/fuse\n");
		return NULL;
	}
	/* the kernel's payload buffers hold its largest request or reply */
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t pages = (out->flags & FUSE_MAX_PAGES) && out->max_pages ? out->max_pages : 32;
	size_t payload = out->max_write > 8192 ? out->max_write : 8192;
	if (pages * page > payload)
		payload = pages * page;
	struct rfs_uring *u = uring_prepare(r, fd, payload);
	if (u) {
		out->flags |= INIT_EXT_FLAG;
		out->flags2 |= OVER_IO_URING_FLAG2;
	}
	return u;
}

static ssize_t dev_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct rfs *r = userdata;
	struct rfs_uring *starting = NULL;
	ssize_t n;

	if (r->uring && uring_reply(r->uring, iov, count, &n))
		return n;
	if (init_unique && count >= 2 && iov[0].iov_len >= sizeof(struct fuse_out_header)) {
		const struct fuse_out_header *oh = iov[0].iov_base;
		if (oh->unique == init_unique) {
			init_unique = 0;
			struct fuse_init_out *out = iov[1].iov_base;
			if (oh->error == 0 && (init_offered & FUSE_HANDLE_KILLPRIV_V2) &&
			    iov[1].iov_len >= offsetof(struct fuse_init_out, flags) + sizeof(uint32_t))
				out->flags |= FUSE_HANDLE_KILLPRIV_V2;
			if (oh->error == 0 && iov[1].iov_len >= offsetof(struct fuse_init_out, flags2) +
								 sizeof(uint32_t))
				starting = init_uring(r, fd, out);
		}
	}
	n = writev(fd, iov, count);
	if (starting) {
		/* replies look for their ring from the moment the queues serve */
		r->uring = starting;
		if (uring_start(starting, n >= 0) != 0) {
			r->uring = NULL;
		} else {
			dev_uring_serving = true;
			if (r->cfg->fuse_uring == FUSE_URING_ON)
				fprintf(stderr, "recon-fuse: FUSE over io_uring: %u queues\n",
					uring_queues(starting));
		}
	}
	if (dev_poll_us && count >= 1 && iov[0].iov_len >= sizeof(struct fuse_out_header) &&
	    ((const struct fuse_out_header *)iov[0].iov_base)->unique)
		dev_replied_at = now_us();	/* a reply, not a notification */
	return n;
}

static const struct fuse_custom_io dev_io = { .writev = dev_writev, .read = dev_read };

/*
 * The loop has ended (signal, fusermount -u, on_violation=stop).  The
 * cache-invalidation thread writes to the channel: it must be joined before
 * fuse_session_unmount closes the descriptor (a later open may reuse the
 * number).  It stops after the notification in progress, which may wait for
 * a lock held by a request the loop has not answered: keep answering
 * requests until it is done, unless the kernel has ended the connection
 * (then its writes fail at once).
 */
static void serve_until_notifier_done(struct rfs *r)
{
	struct fuse_buf buf = { .mem = NULL };
	int fd = fuse_session_fd(r->se);

	rfs_stop_notifier(r);
	direct_write_replies_stop();
	while (rfs_notifier_busy(r) || direct_write_replies_busy()) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int n = poll(&p, 1, 20);
		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0)
			continue;
		if (p.revents & (POLLERR | POLLHUP | POLLNVAL))
			break;
		int res = fuse_session_receive_buf(r->se, &buf);
		if (res == -EINTR || res == -EAGAIN)
			continue;
		if (res <= 0)
			break;
		fuse_session_process_buf(r->se, &buf);
	}
	free(buf.mem);
	rfs_join_notifier(r);
	direct_write_replies_join();
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct recon_config cfg;
	struct rfs r;
	int status = 1;

	memset(&r, 0, sizeof(r));
	if (config_parse(argc, argv, &cfg, &args)) {
		fuse_opt_free_args(&args);
		config_free(&cfg);
		return 1;
	}
	if (cfg.show_help) {
		config_print_help(stdout);
		config_free(&cfg);
		fuse_opt_free_args(&args);
		return 0;
	}
	if (cfg.show_version) {
		const char *e2ver = NULL;
		ext2fs_get_library_version(&e2ver, NULL);
		printf("recon-fuse %s (libfuse %s, libext2fs %s)\n", RECON_VERSION,
		       fuse_pkgversion(), e2ver ? e2ver : "?");
		config_free(&cfg);
		fuse_opt_free_args(&args);
		return 0;
	}
	/* ext3 semantics: the kernel checks permissions against our modes and
	 * owners (without it any user of an allow_other mount reads anything) */
	if (fuse_opt_add_arg(&args, "-odefault_permissions")) {
		fprintf(stderr, "recon-fuse: out of memory\n");
		config_free(&cfg);
		fuse_opt_free_args(&args);
		return 1;
	}
	add_error_table(&et_ext2_error_table);
	srand48(time(NULL) ^ getpid());
	if (!cfg.foreground && daemonize_early()) {
		fprintf(stderr, "recon-fuse: cannot daemonize: %s\n", strerror(errno));
		return 1;
	}
	r.cfg = &cfg;
	r.ro = cfg.ro;
	pthread_mutex_init(&r.lock, NULL);
	set_rio_config(&cfg);
	if (rfs_log_start(&cfg))
		goto out;
	/* the session first: it rejects unknown mount options before we touch the device */
	r.se = fuse_session_new(&args, &rfs_ops, sizeof(rfs_ops), &r);
	if (!r.se) {
		fprintf(stderr, "recon-fuse: unknown or bad mount option (recon-fuse --help lists them)\n");
		goto out;
	}
	if (cfg.fuse_uring == FUSE_URING_ON) {
		const char *why;
		if (!uring_offered(&why)) {
			fprintf(stderr, "recon-fuse: fuse_uring=on, but %s; use fuse_uring=auto or off\n",
				why);
			goto out_session;
		}
	}
	if (rfs_claim_image(cfg.device, r.ro))
		goto out_session;
	if (prepare_fs(&r))
		goto out_session;
	if (fuse_set_signal_handlers(r.se)) {
		rfs_unmount(&r);
		goto out_session;
	}
	if (fuse_session_mount(r.se, cfg.mountpoint)) {
		fprintf(stderr, "recon-fuse: cannot mount on %s\n", cfg.mountpoint);
		rfs_unmount(&r);
		goto out_signals;
	}
	if (cfg.poll_us && cfg.threads <= 1) {
		int fl = fcntl(fuse_session_fd(r.se), F_GETFL);
		if (fl >= 0 && fcntl(fuse_session_fd(r.se), F_SETFL, fl | O_NONBLOCK) == 0)
			dev_poll_us = cfg.poll_us;
		dev_session = r.se;
	}
	if (fuse_session_custom_io(r.se, &dev_io, fuse_session_fd(r.se))) {
		fprintf(stderr, "recon-fuse: cannot set up the FUSE channel on %s\n", cfg.mountpoint);
		fuse_session_unmount(r.se);
		rfs_unmount(&r);
		goto out_signals;
	}
	if (r.ro && !cfg.ro)
		fprintf(stderr, "recon-fuse: mounted %s read-only\n", cfg.device);
	if (!r.ro && cfg.on_violation == ONV_LOG) {
		fprintf(stderr, "recon-fuse: WARNING: on_violation=log: commits that break the "
			"checker's invariants are WRITTEN to %s anyway (for experiments only; the "
			"file system may end up corrupt)\n", cfg.device);
		syslog(LOG_WARNING, "recon-fuse: on_violation=log on %s: rejected commits reach "
		       "the disk", cfg.device);
	}
	if (cfg.pidfile && write_pidfile(cfg.pidfile)) {
		fuse_session_unmount(r.se);
		rfs_unmount(&r);
		goto out_signals;
	}
	if (!cfg.foreground) {
		report_status(0);
		detach_stdio();
	}
	if (!cfg.deterministic && cfg.commit_interval_ms && !r.ro)
		start_ticker(&r);
	int ret;
	if (cfg.threads <= 1 || cfg.deterministic) {
		ret = fuse_session_loop(r.se);
	} else {
		struct fuse_loop_config lc = { .clone_fd = 0, .max_idle_threads = cfg.threads };
		ret = fuse_session_loop_mt(r.se, &lc);
	}
	stop_ticker(&r);
	/* the ring serves too while the notifier finishes: a request it waits
	 * for may come either way */
	serve_until_notifier_done(&r);
	bool uring_failed = false;
	if (r.uring) {
		uint64_t served;
		dev_uring_serving = false;
		uring_failed = uring_stop(r.uring, &served) < 0;
		r.uring = NULL;
		if (cfg.fuse_uring == FUSE_URING_ON)
			fprintf(stderr, "recon-fuse: FUSE over io_uring: %llu requests served\n",
				(unsigned long long)served);
	}
	fuse_session_unmount(r.se);
	status = r.stopped ? RFS_EXIT_STOPPED : ret < 0 || uring_failed ? 1 : 0;
out_signals:
	fuse_remove_signal_handlers(r.se);
out_session:
	fuse_session_destroy(r.se);   /* calls destroy: the final flush and close */
	rfs_unmount(&r);              /* when init never ran */
	if (status == 0 && r.lost)
		status = RFS_EXIT_LOST;
	if (cfg.pidfile && (status == 0 || r.stopped || r.lost)) {
		rfs_log_flush();          /* the messages are complete too */
		unlink(cfg.pidfile);      /* last: the image is complete once it is gone */
	}
out:
	rfs_log_stop();
	report_status(1);
	pthread_mutex_destroy(&r.lock);
	config_free(&cfg);
	fuse_opt_free_args(&args);
	return status;
}
