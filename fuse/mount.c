/*
 * fuse/mount.c - the mount's decision and its end: open the file system,
 * decide before anything is written whether to serve it read-write (its
 * features, recorded errors, bitmaps and the whole-image check), replay or
 * rehearse the replay of its journal, make the first writes; and at
 * unmount, the final commit and close.
 */
#include "rfs.h"
#include "io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

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
static void readahead_group_metadata(ext2_filsys fs, const uint8_t *pristine)
{
	size_t n = 0;
	blk64_t *blks = malloc((size_t)fs->group_desc_count * 2 * sizeof(*blks));
	if (!blks)
		return;
	for (dgrp_t g = 0; g < fs->group_desc_count; g++) {
		if (pristine && (pristine[g / 8] >> (g % 8)) & 1)
			continue;          /* not read */
		/* nor are uninitialised ones (64 TiB of ext4: a million blocks) */
		bool csum = ext2fs_has_group_desc_csum(fs);
		if (!csum || !ext2fs_bg_flags_test(fs, g, EXT2_BG_BLOCK_UNINIT))
			blks[n++] = ext2fs_block_bitmap_loc(fs, g);
		if (!csum || !ext2fs_bg_flags_test(fs, g, EXT2_BG_INODE_UNINIT))
			blks[n++] = ext2fs_inode_bitmap_loc(fs, g);
	}
	(void)rio_readahead_blocks(fs->io, blks, n);
	free(blks);
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
	if (e == EXT2_ET_UNSUPP_FEATURE && !r->cfg->io.checker) {
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
static int decide_rw_sealed(struct rfs *r, ext2_filsys fs, bool replayed, struct rfs_seal *seal);

static int decide_rw(struct rfs *r, ext2_filsys fs, bool replayed)
{
	struct rfs_seal seal = { 0 };
	int d = decide_rw_sealed(r, fs, replayed, &seal);
	free(seal.pristine);
	return d;
}

/* decide_rw's work; *seal filled when a seal is looked for (freed by the caller) */
static int decide_rw_sealed(struct rfs *r, ext2_filsys fs, bool replayed, struct rfs_seal *seal)
{
	const char *dev = r->cfg->device;
	struct ext2_super_block *sb = fs->super;
	char refusal[256], why_bad[256];

	if (rfs_rw_refusal(sb, dev, r->cfg->io.checker, refusal, sizeof(refusal))) {
		fprintf(stderr, "recon-fuse: %s\n", refusal);
		return -1;
	}
	bool errors = (sb->s_state & EXT2_ERROR_FS) ||
		      (!(sb->s_state & EXT2_VALID_FS) && !ext2fs_has_feature_journal(sb));
	/* an aborted journal's error: the kernel marks the file system with
	 * errors at its next mount, and e2fsck checks it */
	int32_t jerrno = 0;
	if (!errors && rio_journal_errno(fs, &jerrno) == 0 && jerrno && !r->cfg->force_rw) {
		fprintf(stderr, "recon-fuse: %s: its journal records error %d (%s) from an earlier "
			"mount; mounting read-only (run e2fsck, or use -o force_rw)\n", dev, (int)jerrno,
			jerrno < 0 && jerrno > -4096 ? strerror(-jerrno) : "not an errno");
		return 1;
	}
	if (errors && !r->cfg->force_rw) {
		fprintf(stderr, "recon-fuse: %s %s; mounting read-only (run e2fsck, or use -o "
			"force_rw)\n", dev, (sb->s_state & EXT2_ERROR_FS) ?
			"is marked with errors (ERROR_FS)" : "was not cleanly unmounted (ext2, no journal)");
		return 1;
	}
	/* before the bitmaps are read: a seal spares some */
	if (!replayed && r->cfg->io.checker && !r->cfg->rw_unchecked)
		rfs_seal_take(r, fs, seal);
	else
		rfs_seal_drop(r, fs);
	readahead_group_metadata(fs, seal->pristine);
	/* the checker's attach reads the same bitmaps: beside this pass */
	(void)rio_txn_prepare(fs);
	/* each bitmap block is read once here: past the block cache */
	(void)io_channel_set_options(fs->io, "cache=off");
	errcode_t e = rfs_read_bitmaps(fs, seal->pristine);
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
	if (seal->matched)
		(void)rfs_seal_use(r, fs, seal);
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
	/* said even of none: the image is marked as needing recovery */
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
	/* libext2fs's copies predate the replay: freed, never flushed (its
	 * close would write the superblock fields it counts, such as
	 * s_kbytes_written, over the replayed one, with a checksum of its
	 * stale copy) */
	ext2fs_free(fs);
	fs = NULL;
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
	if (!orphans_pending(r))
		return 0;
	int ret = rfs_process_orphans(r);
	e = rio_txn_boundary(fs, true);
	if (!ret && !e)
		return 0;
	fprintf(stderr, "recon-fuse: orphan processing on %s %s%s; mounting read-only (run "
		"e2fsck)\n", dev, e == EROFS ? "was rejected by the checker" : "failed: ",
		e == EROFS ? "" : e ? error_message(e) : strerror(-ret));
	reap_clear(r);
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

/* Open the device as r->ro says, refusing what cannot be served at all
 * before anything is written: a feature the read-write gate refuses, a
 * device we may not write, damaged geometry, an external journal to
 * recover, a journal the kernel would not load.  0 with *fsp open, or -1
 * (said why). */
static int open_servable(struct rfs *r, ext2_filsys *fsp)
{
	struct recon_config *cfg = r->cfg;
	ext2_filsys fs = NULL;
	errcode_t e;
	struct ext2_super_block disk_sb;
	char refusal[256];
	/* before libext2fs opens it read-write: it refuses some features
	 * without naming them, and a refused image must not be written */
	if (!r->ro && rfs_read_super(cfg->device, &disk_sb) == 0 &&
	    disk_sb.s_magic == EXT2_SUPER_MAGIC &&
	    rfs_rw_refusal(&disk_sb, cfg->device, cfg->io.checker, refusal, sizeof(refusal))) {
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
	*fsp = fs;
	return 0;
}

/* Open the file system, decide how to serve it, then (read-write) write:
 * nothing reaches the device before the mount has decided to serve it
 * read-write.  On success r->fs is open (read-write unless r->ro). */
int prepare_fs(struct rfs *r)
{
	struct recon_config *cfg = r->cfg;
	ext2_filsys fs = NULL;
	bool served_from_replay = false;

	if (open_servable(r, &fs))
		return -1;
	bool recover = ext2fs_has_feature_journal_needs_recovery(fs->super);
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
	/* fsyncs still waiting are answered before the last commit */
	fsync_drain(r);
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
	/* a seal is taken of what the close leaves on the device */
	struct rfs_seal_plan seal;
	bool sealable = attached && !r->lost && rio_txn_sealable(r->fs->io) && !rfs_seal_plan(r->fs, &seal);
	dindex_free(r->di);
	r->di = NULL;
	r->fs->write_inode = NULL;
	if (rio_txn_failed(r->fs->io))
		r->fs->flags &= ~(EXT2_FLAG_DIRTY | EXT2_FLAG_BB_DIRTY | EXT2_FLAG_IB_DIRTY);
	e = ext2fs_close_free(&r->fs);
	if (e)
		fprintf(stderr, "recon-fuse: closing the file system failed: %s\n", error_message(e));
	else if (sealable)
		rfs_seal_write(r->cfg, &seal);
	free(r->known);
	r->known = NULL;
	free(r->chg);
	r->chg = NULL;
	r->chg_cap = r->chg_count = 0;
	pthread_mutex_unlock(&r->lock);
}
