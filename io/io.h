/*
 * io/io.h - the one public header of io/: recon-fuse's libext2fs I/O manager.
 *
 * What it is: an io_manager for libext2fs built on io_uring (pread/pwrite
 * fallback when io_uring is unavailable, reported once at open), with a
 * bounded LRU cache of metadata blocks and one seam through which every
 * metadata write passes.  Everything that reaches the io_channel is metadata
 * by construction: file data goes through rio_data_io(), never through the
 * channel.
 *
 * Errors: errcode_t, as libext2fs (0, an EXT2_ET_* code, or a positive errno).
 *
 * Threads: the channel (metadata) path is called under the file-system lock,
 * as libext2fs is not thread-safe.  rio_data_io() may be called from any
 * thread without that lock (a small pool of rings, each behind a mutex).
 * Threads of io's own: the commit thread (async_commit), the background
 * check (base_check_background), and two that only give the host hints:
 * the readahead of rio_readahead_blocks and the writeback kick of file
 * data (started every 2 MiB written, by a thread named recon-kick, so that
 * the writer does not pay for the host's writeback).  The first two share
 * the checker under one mutex, held by the commit path across the check and
 * again across the advance, by the background check while it judges one
 * group (io/bgcheck.c), and by rio_data_io's caller's thread while it
 * checks a claimed group its data is about to land in
 * (rio_set_claimed_groups).
 */
#ifndef RECON_IO_H
#define RECON_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <ext2fs/ext2fs.h>

/* The manager's configuration, set before ext2fs_open2(..., rio_io_manager,
 * ...): the manager's open() takes only a name and flags, so configuration
 * is process-global.  The daemon's -o keys of the same names fill it
 * (recon-fuse(8)); RIO_CONFIG_DEFAULTS is the one place their defaults are
 * written, for the daemon and for io alone. */
enum rio_on_violation {
	RIO_ONV_READONLY,   /* a rejected commit: EROFS from then on */
	RIO_ONV_STOP,       /* ... and the daemon unmounts (exit 2) */
	RIO_ONV_LOG,        /* the rejected commit is written anyway (experiments only) */
};

struct rio_config {
	unsigned block_cache_mb;  /* metadata block cache; 0 = no caching (write-through) */
	bool     no_uring;        /* force the pread/pwrite fallback (tests) */
	bool     quiet;           /* do not print the fallback notice */
	bool     shared_bdev;     /* open block devices without O_EXCL: the caller holds
				   * the exclusive claim (a fuseblk mount's kernel claim) */

	/* transactions (used from rio_txn_attach on) */
	bool     checker;                 /* shadow checker on every commit */
	unsigned checker_cache_mb;        /* checker's block cache */
	unsigned commit_interval_ms;      /* 0 = no age limit (deterministic) */
	unsigned max_transaction_blocks;  /* 0 = 1024 when no commit runs, else a quarter of the journal */
	enum rio_on_violation on_violation;
	bool     journal;                 /* log through the ext3 journal (else checked write-in-place) */
	bool     async_commit;            /* check and log transaction N on a commit thread while N+1
					   * builds (off = commit in rio_txn_boundary; deterministic).
					   * With RECON_COMMIT_GATE=PATH in the environment at
					   * rio_txn_attach (tests), each commit waits while PATH
					   * exists, having created PATH.held: a commit held in
					   * flight */
	bool     base_check_background;   /* a read-write mount's base check leaves the free inodes
					   * past each group's last in use to a background thread
					   * (checked before any commit relies on them; off: all read
					   * before rio_image_check returns).  The thread starts at
					   * rio_txn_attach and stops at rio_txn_detach; with
					   * RECON_BGCHECK_PAUSE_MS=N in the environment it first
					   * waits N ms (tests: commits meet unchecked groups) */

	/* fault injection (tests; -o only) */
	uint64_t fault_crash_after;       /* 0 = off; counts device write requests */
	uint64_t fault_seed;
	const char *fault_corrupt;        /* "KIND@N" or NULL; the caller's, read at attach */
	uint64_t fault_data_eio;          /* 0 = off; the Nth rio_data_io write fails with EIO,
					   * nothing of it issued (a device error on file data) */
};
#define RIO_CONFIG_DEFAULTS { \
	.block_cache_mb = 64, .checker = true, .checker_cache_mb = 128, \
	.commit_interval_ms = 1000, .on_violation = RIO_ONV_READONLY, .journal = true, \
	.async_commit = true, .base_check_background = true, \
}
/* Copied: later changes to *cfg do not reach the manager. */
void rio_set_config(const struct rio_config *cfg);

/* Whether spec is a fault_corrupt value io takes: KIND@N, KIND one of the
 * kinds it injects ("bbitmap", "links", ...: recon-fuse(8)) and N >= 1 in
 * decimal.  Pure; any thread. */
bool rio_fault_corrupt_valid(const char *spec);

extern io_manager rio_io_manager;
/* Options (io_channel_set_options): "cache=off" keeps blocks read from the
 * device out of the block cache (cached and dirty blocks are still served
 * from it; writes are unchanged) until "cache=on": for a pass that reads
 * each block once, such as the mount's reading of every bitmap. */

/* Counters since open, for the stats file and the bench. */
struct rio_stats {
	uint64_t device_reads, device_writes;   /* submitted requests (data + metadata) */
	uint64_t bytes_read, bytes_written;
	uint64_t flushes;                       /* fdatasync/fsync of the device */
	uint64_t cache_hits, cache_misses;      /* metadata block cache */
	uint64_t meta_writes;                   /* block writes through the seam */
	bool     uring;                         /* io_uring in use (false: fallback) */
	bool     checker_attached_early;        /* rio_txn_prepare's attach was taken over */
};
errcode_t rio_get_stats(io_channel ch, struct rio_stats *out);

/*
 * File data path.  Each extent is `count` whole file-system blocks starting at
 * physical block `blk`, to or from `buf` (count * block_size bytes).  All
 * extents are submitted together and waited for.  Writes first drop any
 * cached copy of those blocks (a block freed as metadata and reused as data
 * must never be written back over the data, nor read back stale later).
 * Data writes are not durable until rio_flush_device().
 *
 * `ino` is the inode whose data this is (ignored for reads).  Once
 * transactions are attached with the checker on, a write is refused before
 * any of it is issued unless every block is free or a data block of `ino` in
 * the checker's approved state (the data guard: a wrong block bitmap must
 * not make the allocator hand another file's block to this one and its data
 * overwrite the other's in place).  A refusal returns EIO and fails the file
 * system as a rejected commit does (rio_txn_failed, the violation in
 * rio_txn_last_violation and the stats; on_violation=log lets it through).
 * With the checker off there is no approved owner map and no guard.
 */
struct rio_extent {
	uint64_t blk;
	uint32_t count;
	void    *buf;
};
errcode_t rio_data_io(io_channel ch, bool write, ext2_ino_t ino, const struct rio_extent *ext,
		      unsigned n);

/* rio_data_io's write of bytes [skip, skip + len) of one extent (buf holds
 * count blocks; skip < block size, and the range ends in the last block):
 * the bytes around the range keep the file's data.  They are not read unless
 * the open or committing transaction holds bytes of the first or last block
 * (then those blocks are read into buf around the range, which the caller
 * gives as scratch, and written whole).  A WRITE that starts or ends inside
 * a block with data (an append) need not read that block first. */
errcode_t rio_data_write_range(io_channel ch, ext2_ino_t ino, const struct rio_extent *ext,
			       size_t skip, size_t len);

/* rio_data_io's write of zeros to the extents (their buf is not used),
 * without sending the zeros where the device can zero a range itself
 * (fallocate FALLOC_FL_ZERO_RANGE on an image file or a block device). The
 * data guard and the errors are rio_data_io's. */
errcode_t rio_data_zero(io_channel ch, ext2_ino_t ino, const struct rio_extent *ext, unsigned n);

/* Write back every dirty metadata block (sorted, batched), then make data and
 * metadata durable (fdatasync).  io_channel_flush() does the same. */
errcode_t rio_flush_device(io_channel ch);

/* Ask the host to start reading the blocks blks[0..n) into its cache, from
 * a thread of the channel's own, and return at once: a hint for a pass
 * about to read them one by one (the mount's bitmaps), so that the device
 * works on many while the pass reads the first.  A later call replaces an
 * unfinished list; close stops it.  0, ENOMEM or EXT2_ET_INVALID_ARGUMENT. */
errcode_t rio_readahead_blocks(io_channel ch, const blk64_t *blks, size_t n);

/* Number of dirty metadata blocks held in the cache (for flush heuristics). */
size_t rio_dirty_blocks(io_channel ch);


/* Load the internal journal of fs as the kernel loads it at mount, without
 * writing: 0 when fs has none or it loads; else the error and a one-line
 * reason in msg, EXT2_ET_JOURNAL_TOO_SMALL for a log shorter than the
 * kernel takes (which it refuses to mount even read-only). */
errcode_t rio_journal_check(ext2_filsys fs, char *msg, size_t msglen);

/* The error the internal journal of fs records (its superblock's s_errno,
 * set when the kernel aborted the journal: a file system with errors, as
 * the kernel marks it at its next mount) into *jerrno, 0 for none or no
 * journal.  Only reads.  0, or rio_journal_check's errors. */
errcode_t rio_journal_errno(ext2_filsys fs, int32_t *jerrno);

/* Replay the journal of fs if a crash left it needing recovery (our own JBD
 * replay, before anything else writes).  On return the disk holds the
 * recovered state and needs_recovery is clear; libext2fs's in-memory copies
 * are stale, so the caller closes and re-opens fs.  *replayed = transactions
 * replayed (0 when there was nothing to do).  msg gets a one-line reason on
 * failure (unsupported or corrupt journal). */
errcode_t rio_journal_recover(ext2_filsys fs, unsigned *replayed, char *msg, size_t msglen);

/* Opened read-only, rio_journal_recover() replays into memory instead: the
 * device is not written, and this and every later read-only open of the same
 * device read the recovered state.  rio_replay_forget() drops that state
 * (the read-only file systems using it must be closed first), as before the
 * device is opened read-write and the journal replayed onto it. */
void rio_replay_forget(void);

/* Judge a file system before rio_txn_attach (no transactions) as a whole,
 * as rio_txn_base_check() does, on what it serves (the in-memory replay
 * included; on a read-write channel with base_check_background, what it
 * leaves is checked from rio_txn_attach on, by the background check and
 * before any commit that relies on it): whether the state a mount would write to is one to write to,
 * decided before anything is written.  On a read-write channel with the
 * checker on, it takes over rio_txn_prepare's attach when begun, and when
 * the image passes keeps its checker for rio_txn_attach, which takes it
 * over as it does rio_txn_prepare's (only if nothing but the primary
 * superblock was written in between).  Same report and errors as
 * rio_txn_base_check(). */
errcode_t rio_image_check(ext2_filsys fs, char **report);

/* ---- transactions ----
 * Until rio_txn_attach(), metadata writes go through the cache as plain
 * write-back (mount-time work such as journal replay happens before).
 * From then on every metadata write lands in the open transaction's overlay;
 * reads see the overlay first.  All calls below are made under the
 * file-system lock.
 */

/* Attach after ext2fs_open2() and journal replay: map the journal, attach the
 * checker to the on-disk state, mark the file system mounted (needs_recovery
 * on ext3 with the journal, VALID_FS cleared otherwise). */
errcode_t rio_txn_attach(ext2_filsys fs);

/* Begin rio_txn_attach's checker attach now, on a thread of its own, beside
 * the mount's other reads (libext2fs's bitmaps): the attach takes it over.
 * What it read is used only when nothing but the primary superblock was
 * written in between (else the attach reads anew); the channel must hold no
 * dirty block (else nothing is begun).  Close waits for it.  0, or ENOMEM
 * or a thread error (nothing begun; the attach works as without it). */
errcode_t rio_txn_prepare(ext2_filsys fs);

/* The base case of the checker's induction, after rio_txn_attach and before
 * the first write: judge the attached image as a whole (chk_scan; with the
 * checker off, on a shadow state built for it alone; with the checker on and
 * base_check_background, the free inodes past each group's last in use are
 * left to the background check, started here).  0 with *report NULL
 * when consistent; 0 with *report set (malloc'd: the first violations, one a
 * line) when not; or an error when the check could not run
 * (EXT2_ET_UNSUPP_FEATURE: with the checker off, an image it does not model). */
errcode_t rio_txn_base_check(ext2_filsys fs, char **report);

/* Groups whose inode tables a seal vouches for (bit g of ngroups bits; NULL:
 * none): handed to the base check (chk_set_sealed), so that it reads of those
 * groups' tables only what holds an inode in use.  Before rio_image_check or
 * rio_txn_base_check; the caller answers for the seal (fuse/seal.c).  Copied.
 * 0, ENOMEM or EXT2_ET_INVALID_ARGUMENT (transactions already attached). */
errcode_t rio_set_sealed_groups(io_channel ch, const uint8_t *bits, uint32_t ngroups);

/* Groups a seal vouches are pristine (bit g of ngroups bits; NULL: none):
 * block bitmap exactly the group's static blocks, inode bitmap clear, table
 * in the free form (chk_options.pristine): the checker's attach reads
 * neither their bitmaps nor their tables.  Before rio_txn_prepare and
 * rio_image_check; the caller answers for the seal (fuse/seal.c).  Copied.
 * 0, ENOMEM or EXT2_ET_INVALID_ARGUMENT (a checker attached or begun). */
errcode_t rio_set_pristine_groups(io_channel ch, const uint8_t *bits, uint32_t ngroups);

/* Groups only claimed pristine (the same bits, no seal: their descriptors
 * count no inode in use and no block but their static ones): as
 * rio_set_pristine_groups, their bitmaps and tables unread at mount, but
 * with the checker on and base_check_background each is left to the
 * background check (chk_options.pristine_claimed), which verifies both
 * bitmaps and the table, and checked first by a commit that writes its
 * bitmaps or table and by a data write to one of its blocks; damage found
 * fails the file system as a rejected commit does.  Same calls and errors
 * as rio_set_pristine_groups; the last of the two calls holds. */
errcode_t rio_set_claimed_groups(io_channel ch, const uint8_t *bits, uint32_t ngroups);

/* After rio_txn_detach: may this session seal the image?  True when the
 * checker was on, the base check of the transactions' checker found the
 * image consistent, including every group it left to the background check
 * (none left unchecked at detach), every commit since was approved (none
 * let through by on_violation=log) and reached the disk, and the device did
 * not fail. */
bool rio_txn_sealable(io_channel ch);

/* An operation boundary.  Commits the open transaction if `force` (fsync,
 * fsyncdir, unmount), or it is older than commit_interval_ms, or larger than
 * max_transaction_blocks.  Commit: flush what changed of libext2fs's
 * in-memory bitmaps, group descriptors and superblock into the overlay once
 * (see rio_txn_inode_bitmap_changed), check, journal, checkpoint.  With
 * `force` the transaction is durable on return; without it and with
 * async_commit the commit runs on the commit thread and its
 * failure is reported by a later call (and rio_txn_failed at once).
 * Returns 0, or EROFS when this or an earlier commit was rejected (the
 * transaction is discarded and the caller must drop its in-memory state), or
 * another error (I/O). */
errcode_t rio_txn_boundary(ext2_filsys fs, bool force);

/* The open transaction's size in blocks and the most it may reach before
 * its commit would not fit the journal (room for the bitmaps, descriptors
 * and superblock the commit adds is already subtracted).  An operation that
 * writes or frees many blocks (truncating a huge file) calls
 * rio_txn_boundary(fs, true) in between, under orphan-list protection, to
 * stay below the limit; a commit over the journal's capacity fails (EFBIG). */
errcode_t rio_txn_room(io_channel ch, size_t *used, size_t *limit);

/* A bit of libext2fs's in-memory inode bitmap (for ino) or block bitmap
 * (for blk) flipped.  A commit writes the bitmaps of only the groups whose
 * in-memory bitmaps changed since the last commit, and only the descriptor
 * blocks that changed.  io sees the block bitmap's changes made through
 * ext2fs_block_alloc_stats2() and ext2fs_block_alloc_stats_range() (their
 * callbacks).  Every other change to libext2fs's in-memory bitmaps after
 * rio_txn_attach() is reported here, or it never reaches the disk (and the
 * checker rejects the commit that relied on it): ext2fs_inode_alloc_stats2()
 * called directly (it has no callback; rio_txn_inode_alloc_stats reports
 * its own), a direct mark.  With RECON_VERIFY_FLUSH=1 in the environment
 * each commit also compares every group's bitmaps with the disk and aborts
 * on a difference (tests). */
void rio_txn_inode_bitmap_changed(ext2_filsys fs, ext2_ino_t ino);
void rio_txn_block_bitmap_changed(ext2_filsys fs, blk64_t blk);

/* Inode ino allocated (inuse +1) or freed (-1) in libext2fs's in-memory
 * state: ext2fs_inode_alloc_stats2(), reported to the transaction (see
 * rio_txn_inode_bitmap_changed) and recorded for rio_txn_rollback.  After
 * rio_txn_attach every inode allocation and free of an operation that may
 * roll back goes through here: libext2fs has no callback for them. */
void rio_txn_inode_alloc_stats(ext2_filsys fs, ext2_ino_t ino, int inuse, bool isdir);

/* Operation-level rollback, for an operation that fails half-way (ENOSPC in
 * the middle of a rename, a write error): rio_txn_savepoint() at the start
 * of each operation marks the open transaction's state; rio_txn_rollback()
 * undoes every metadata write made since, forgets the blocks freed since
 * (they are in use again), and undoes, newest first, in libext2fs's bitmaps
 * and group descriptors every allocation and free made since: the blocks'
 * (ext2fs_block_alloc_stats2 and _range, whoever called them; io owns
 * those callbacks while attached) and the inodes' (rio_txn_inode_alloc_stats).
 * libext2fs's superblock and inode cache are the caller's to restore from
 * its own snapshot.  A commit ends the savepoint.  One savepoint at a time
 * per channel: the caller's file-system lock makes operations one at a
 * time.  rollback returns EROFS if it could not restore exactly (out of
 * memory while tracking, or the open transaction already discarded by a
 * failed commit): the whole open transaction is then discarded and the
 * file system fails as on a rejection. */
errcode_t rio_txn_savepoint(io_channel ch);
errcode_t rio_txn_rollback(io_channel ch);

/* Transaction ids, for fsync's promise: every metadata write lands in the
 * open transaction (*open; ids only grow), and every id up to *durable is on
 * disk (a commit flushes the device, data first).  After a failure *durable
 * stops: what a later id held was discarded.  0 and 0 before attach. */
void rio_txn_ids(io_channel ch, uint64_t *open, uint64_t *durable);

/* Commits for a caller that waits for durability without the lock (an
 * fsync answered later; a group commit for those that arrive together).
 * rio_txn_commit_begin: every write made so far, file data included, is
 * durable once transaction *tid is (rio_txn_ids's durable reaching it).
 * When no commit is in flight the open transaction is closed and handed to
 * the commit thread, even an empty one (its commit flushes the device for
 * the data); while one is, nothing is closed: data written during that
 * commit may have missed its flush, so *tid is the open transaction, whose
 * commit the caller asks for with another call once that one finished.
 * Never waits.  0; EXT2_ET_OP_NOT_SUPPORTED without a commit thread
 * (async_commit off: the caller commits with rio_txn_boundary); else
 * rio_txn_settle's errors.
 * rio_txn_settle: retires a commit that finished (never waits): 0, or the
 * failure as rio_txn_boundary returns it (EROFS, EIO, ...; the open
 * transaction discarded).
 * rio_txn_set_commit_hook: fn(arg, tid, durable) is called by the commit
 * thread after each commit it ran finished, with no lock of io held:
 * durable says transaction tid, and with it every one before, is on disk
 * (false: rejected or failed; rio_txn_settle reports it).  fn must not wait
 * for the file-system lock (its holder may be waiting for the commit
 * thread).  NULL: none.
 * All three under the file-system lock. */
errcode_t rio_txn_commit_begin(io_channel ch, uint64_t *tid);
errcode_t rio_txn_settle(io_channel ch);
void rio_txn_set_commit_hook(io_channel ch, void (*fn)(void *arg, uint64_t tid, bool durable),
			     void *arg);

/* Blocks freed by transactions that are not yet durable: held back from
 * reuse until their commit.  An allocation that fails while this is non-zero
 * may succeed after a commit (rio_txn_boundary(fs, true)). */
uint64_t rio_txn_pending_frees(io_channel ch);

/* True once a commit was rejected (on_violation readonly/stop) or the device
 * failed: the file system takes no more writes. */
bool rio_txn_failed(io_channel ch);

/* Last violation as text (one line per violated invariant with its records),
 * or NULL.  Owned by the channel. */
const char *rio_txn_last_violation(io_channel ch);

/* Clean unmount: commit what is open, checkpoint, clear needs_recovery (or
 * restore VALID_FS on ext2).  Called before ext2fs_close(). */
errcode_t rio_txn_detach(ext2_filsys fs);

/* Write the stats JSON (its keys are an external interface: recon-fuse(8), STATISTICS). */
errcode_t rio_write_stats(io_channel ch, const char *path);

#endif
