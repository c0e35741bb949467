/*
 * io/rio_internal.h - internal to io/ (owned by the io work; only io/ sources
 * include it).  The channel's private state and the interfaces between the
 * layers of the I/O manager:
 *
 *   rio.c   the io_manager (channel entry points), the write seam, data path,
 *           journal recovery, configuration
 *   dev.c   the device: io_uring ring pool or pread/pwrite fallback, flushes,
 *           request counters, power-cut fault injection
 *   cache.c the metadata block cache (LRU, write-back)
 *   txn.c   transactions: overlay, checker, journal, checkpoint (with the
 *           files txn_internal.h names)
 *
 * Errors: errcode_t everywhere, as io.h.
 */
#ifndef RECON_IO_RIO_INTERNAL_H
#define RECON_IO_RIO_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <liburing.h>
#include "io.h"
#include "jbd.h"

/* Process-global configuration (io.h: the manager's open takes no config). */
extern struct rio_config rio_cfg;

/* ---- device ---- */

/* One device request: len bytes at byte offset off.  Reads fill buf. */
struct dev_req {
	bool     write;
	uint64_t off;
	size_t   len;
	void    *buf;
};

#define DEV_RINGS 4       /* ring pool: metadata and data threads share it */
#define DEV_QUEUE_DEPTH 64

struct dev_ring {
	pthread_mutex_t lock;
	struct io_uring ring;
	bool broken;              /* could not be re-created after a failure */
};

/* A write made after the last completed flush, remembered (only while the
 * power-cut fault is armed) so that a simulated power cut can drop it. */
struct dev_pending_write {
	uint64_t off;
	size_t   len;
	unsigned char *old_data;  /* device contents before the write */
	unsigned char *new_data;
};

struct dev {
	int  fd;
	bool uring;
	struct dev_ring rings[DEV_RINGS];
	atomic_uint next_ring;

	/* counters (atomic: data I/O comes from any thread) */
	atomic_uint_fast64_t reads, writes, bytes_read, bytes_written, flushes;
	/* file data written since the last early-writeback kick */
	atomic_uint_fast64_t data_unkicked;
	atomic_bool no_kick;      /* sync_file_range refused: stop trying */
	/* the kicks' thread (started at the first): the writeback it starts
	 * is not the writing thread's to pay for */
	pthread_mutex_t kick_mu;
	pthread_cond_t  kick_cv;
	pthread_t       kick_thread;
	bool            kick_started, kick_wanted, kick_stopping;   /* under kick_mu */
	atomic_int zero_mode;     /* rio_dev_zero: 0 ZERO_RANGE, 1 PUNCH_HOLE, 2 writes */
	bool regular;             /* an image file: it may have holes */

	/* background readahead (rio_dev_readahead_list) */
	pthread_t   ra_thread;
	bool        ra_running;
	atomic_bool ra_stop;
	uint64_t   *ra_offs;
	size_t      ra_n, ra_len;

	/* power-cut fault injection: fault_lock serialises writes and flushes
	 * while armed, so the pending list is exact */
	pthread_mutex_t fault_lock;
	uint64_t crash_after;     /* 0 = off */
	uint64_t write_seq;       /* write requests submitted so far */
	uint64_t rng;
	bool     crashed;
	struct dev_pending_write *pending;
	size_t npending, cappending;
};

errcode_t rio_dev_open(struct dev *d, int fd, bool quiet);
void      rio_dev_close(struct dev *d);
/* Submit all requests together and wait for all; every request is counted. */
errcode_t rio_dev_submit(struct dev *d, struct dev_req *reqs, size_t n);
errcode_t rio_dev_pread(struct dev *d, uint64_t off, void *buf, size_t len);
/* The same for a long read: the holes of an image file (SEEK_DATA/SEEK_HOLE)
 * read as zeros without the host copying them; anything else as
 * rio_dev_pread(). */
errcode_t rio_dev_pread_sparse(struct dev *d, uint64_t off, void *buf, size_t len);
/* [off, off+len) is a hole of an image file (false when unsure). */
bool rio_dev_is_hole(struct dev *d, uint64_t off, size_t len);
errcode_t rio_dev_pwrite(struct dev *d, uint64_t off, const void *buf, size_t len);
/* Ask the host to start reading n ranges of len bytes at offs (taken over,
 * freed by the device) into its cache, from a thread of its own so that the
 * caller's reads run behind the host's; a hint, nothing fails if it is
 * ignored.  One list at a time (a running one is stopped first), stopped at
 * close. */
void      rio_dev_readahead_list(struct dev *d, uint64_t *offs, size_t n, size_t len);
/* Make every completed write durable (fdatasync). */
errcode_t rio_dev_flush(struct dev *d);
/* len bytes of file data were written: every few MiB, have the host start
 * the writeback of the device (no wait, no ordering promise) so that the next
 * flush finds less to write.  The writeback is started from a thread of the
 * device's own (stopped at close), so the caller only signals it.  A hint
 * only: durability still comes from rio_dev_flush alone. */
void      rio_dev_data_written(struct dev *d, size_t len);
/* Make [off, off + len) read as zeros: FALLOC_FL_ZERO_RANGE, else
 * PUNCH_HOLE|KEEP_SIZE, else (and while the power-cut fault is armed, which
 * must see every write) written zeros.  Not durable until rio_dev_flush. */
errcode_t rio_dev_zero(struct dev *d, uint64_t off, uint64_t len);
bool      rio_dev_crashed(struct dev *d);

/* ---- metadata block cache ---- */

struct cache_ent;

struct cache {
	pthread_mutex_t lock;     /* data I/O invalidates from any thread */
	unsigned blksize;
	size_t   budget_bytes;    /* block_cache_mb */
	size_t   capacity;        /* entries at this blksize; 0 = no caching */
	size_t   count, ndirty;
	struct cache_ent **hash;
	size_t   nhash;           /* power of two */
	struct cache_ent *lru_head; /* sentinel: head->next is most recent */
	uint64_t hits, misses;
	bool     no_fill;         /* reads that miss leave the cache as it is */
};

/* ---- transactions (txn.c and the files txn_internal.h names) ---- */
struct txn_manager;
struct txn_prep;

/* One rejected (or, with on_violation=log, let-through) invariant. */
struct txn_violation {
	char  *invariant;
	char **records;           /* chk_record_format lines */
	size_t nrecords;
};

/* Transaction counters: kept in the channel so they outlive detach (the
 * stats file is written at unmount). */
struct txn_totals {
	uint64_t transactions, blocks_checked, blocks_journalled;
	uint64_t commits;          /* every commit run, one of no block (a flush) too */
	uint64_t largest_transaction;  /* blocks of the largest commit */
	uint64_t chk_cpu_ns, chk_scan_ns, chk_hits, chk_misses;
	/* the base check's inode-table reads (chk_stats' scan_table*) */
	uint64_t scan_tables_read, scan_tables_sealed, scan_table_bytes;
	uint64_t pristine_groups;  /* groups whose bitmaps the checked attach did not read (a seal's) */
	uint64_t claimed_groups;   /* groups whose bitmaps it did not read, left to the background check */
	/* deferred table tails (bgcheck.c): left by the base check, checked by
	 * the background thread, checked first by a commit, left at detach */
	uint64_t base_deferred, base_bg_done, base_commit_done, base_pending;
	struct txn_violation *viol;
	size_t nviol, capviol;
	char  *last_violation;
	/* set by whichever thread ran the commit; read from any */
	atomic_bool failed;       /* a commit was rejected or the device failed */
	atomic_bool io_failed;    /* ... and it was the device: the disk state is unknown */
	pthread_mutex_t lock;     /* violations and last_violation */
};

/* ---- journal replayed into memory (read-only opens) ----
 * The blocks a journal replay produced (home blocks, the emptied journal
 * superblock, the superblock with needs_recovery cleared), kept in memory
 * instead of being written: reads of a read-only channel on the same device
 * see them over the device's contents.  Immutable once built (read from any
 * thread without a lock); shared by reference between the channel that
 * replayed and those opened after it (rio.c). */
struct rio_replay;

/* ---- the channel ---- */
struct rio_chan {
	char   *path;
	int     flags;            /* IO_FLAG_* */
	struct dev   dev;
	struct cache cache;
	struct txn_manager *txn;  /* NULL until rio_txn_attach */
	struct rio_replay *replay; /* read-only channels: the journal replayed in memory */
	/* guards the overlay: data I/O (any thread) drops and reads overlay
	 * blocks while the file-system thread fills and commits it; recursive
	 * because a commit's own flush writes through the seam */
	pthread_mutex_t ovl_lock;
	uint64_t meta_writes;
	uint64_t data_write_calls;  /* rio_data_io writes, for fault_data_eio */
	struct txn_prep *prep;      /* the checker's attach begun early (attach.c) */
	bool    chk_early;          /* the attached checker is the early one */
	uint8_t *sealed;            /* rio_set_sealed_groups: nsealed bits, or NULL */
	uint32_t nsealed;
	uint8_t *pristine;          /* rio_set_pristine_groups: npristine bits, or NULL */
	uint32_t npristine;
	bool pristine_claimed;      /* rio_set_claimed_groups: pristine only by the descriptors */
	bool    base_clean;         /* the transactions' checker passed the base check */
	uint8_t *deferred;          /* the base check's deferred groups (chk_deferred_bits), or NULL */
	uint32_t ndeferred;         /* bits of it: the group count */
	bool    scanning;           /* a base check's chk_scan is reading (scan_report) */
	struct txn_totals totals;
	/* set at detach: libext2fs's close must not fold our byte counts into
	 * s_kbytes_written again and rewrite the superblock unchecked */
	bool    hide_write_stats;
};

/* The bytes [*lo, *hi) where block `bstart`..`bstart + bs` and the byte
 * range [off, off + len) overlap (the caller knows they do). */
static inline void rio_overlap(uint64_t bstart, uint64_t bs, uint64_t off, uint64_t len,
			       uint64_t *lo, uint64_t *hi)
{
	*lo = bstart > off ? bstart : off;
	*hi = bstart + bs < off + len ? bstart + bs : off + len;
}

static inline struct rio_chan *rio_chan_of(io_channel ch)
{
	return (struct rio_chan *)ch->private_data;
}

errcode_t rio_cache_init(struct cache *c, size_t budget_bytes, unsigned blksize);
void      rio_cache_destroy(struct cache *c);
/* Byte-range read and write-back write through the cache. */
errcode_t rio_cache_read(struct cache *c, struct dev *d, uint64_t off, size_t len, void *buf);
/* Whether reads that miss enter the cache; returns the previous setting. */
bool      rio_cache_set_fill(struct cache *c, bool fill);
/* Any block of [off, off+len) cached. */
bool      rio_cache_holds_any(struct cache *c, uint64_t off, size_t len);
errcode_t rio_cache_write(struct cache *c, struct dev *d, uint64_t off, size_t len, const void *buf);
/* Write every dirty block (sorted, one batch); does not flush the device. */
errcode_t rio_cache_writeback(struct cache *c, struct dev *d);
/* Drop cached copies of [off, off+len), dirty or not. */
void      rio_cache_invalidate(struct cache *c, uint64_t off, size_t len);
/* Write back, drop everything and switch to a new block size. */
errcode_t rio_cache_set_blksize(struct cache *c, struct dev *d, unsigned blksize);
size_t    rio_cache_dirty(struct cache *c);
/* Replace a cached copy of whole block blk (if cached) with data, clean:
 * the caller has written data home itself. */
void      rio_cache_update_clean(struct cache *c, uint64_t blk, const void *data);

/* ---- the seam and the transaction hooks ---- */
/* Reads through the overlay (when attached), then the cache. */
errcode_t rio_meta_read(struct rio_chan *rc, uint64_t off, size_t len, void *buf);
/* Approved state only: cache, then device (no overlay). */
errcode_t rio_approved_read(struct rio_chan *rc, uint64_t off, size_t len, void *buf);
/* The approved bytes of [off, off+len) are known to be zeros without reading
 * them: nothing of it cached, a hole on the device. */
bool rio_approved_zero(struct rio_chan *rc, uint64_t off, size_t len);

/* The journal's raw device path: whole blocks straight to the device,
 * dropping cached copies of what it writes. */
struct rio_raw_dev {
	struct rio_chan *rc;
	uint64_t blksize;
};
void rio_jbd_dev_init(struct rio_raw_dev *ctx, struct jbd_dev *jd, struct rio_chan *rc,
		      uint64_t blksize);
/* Read-modify-write of the on-disk primary superblock, bypassing cache and
 * overlay, made durable: s_feature_incompat and s_state bits set/cleared. */
errcode_t rio_raw_sb_update(struct rio_chan *rc, uint32_t incompat_set, uint32_t incompat_clear,
			    uint16_t state_set, uint16_t state_clear);
/* libext2fs's record of the on-disk primary superblock (fs->orig_super) set
 * from the disk.  ext2fs_flush (the meta_bg commits) writes only the 16-bit
 * words of fs->super that differ from that record, so it must hold what the
 * disk holds, not fs->super: the mount changes fs->super in memory before
 * the first commit (free counts recounted), and with a copy of it a word
 * changed there and not again is never written (the high half of a free
 * count recounted from a value 2^16 or more away).  A failed read leaves a record
 * that differs in every word: the next flush writes the superblock whole. */
void rio_raw_sb_to_orig(ext2_filsys fs, struct rio_chan *rc);

/* overlay.c: overlay access used by the seam */
errcode_t rio_ovl_write(struct txn_manager *t, struct rio_chan *rc, uint64_t off, size_t len,
			const void *buf);
/* Copies overlay bytes over buf (buf already holds the approved state).
 * rio_ovl_write/patch and rio_ovl_data_written take ovl_lock themselves. */
void      rio_ovl_patch(struct txn_manager *t, uint64_t off, size_t len, void *buf);
/* Block blk has bytes in the overlay or the committing transaction. */
bool      rio_ovl_holds(struct txn_manager *t, uint64_t blk);
/* How much of a read the overlay (or the committing transaction) holds.
 * RIO_OVL_ALL: whole blocks [off, off+len), all held, copied into buf, so
 * that the reader skips the cache (whose copy the patch would overwrite
 * anyway); RIO_OVL_NONE: whole blocks, none held: the cache's copy is the
 * block, no patch follows (only the file-system thread adds blocks to
 * either, and it is the one reading); RIO_OVL_SOME otherwise (or a read
 * of part of a block): buf partly written, the reader patches after the
 * cache. */
enum rio_ovl_held { RIO_OVL_NONE, RIO_OVL_SOME, RIO_OVL_ALL };
enum rio_ovl_held rio_ovl_read_whole(struct txn_manager *t, uint64_t off, size_t len, void *buf);
/* File data was written over [off, off+len): those blocks are data now and
 * any overlay copy (e.g. the zeroes libext2fs writes into a block it has
 * just allocated) must never be written home over it. */
void      rio_ovl_data_written(struct txn_manager *t, uint64_t off, size_t len);
/* Before file data of inode ino is written to ext: refuse (EIO, the file
 * system failed as on a rejection) a block that the checker's approved state
 * records as neither free nor ino's own data.  0 without a checker. */
errcode_t rio_txn_data_guard(struct txn_manager *t, ext2_ino_t ino,
			     const struct rio_extent *ext, unsigned n);
/* attach.c: the teardown of rio_txn_attach (also of a failed one). */
void      rio_txn_free(struct txn_manager *t);
/* attach.c: a write of [off, off+len) before rio_txn_attach, while an early
 * attach reads the device: anything but the primary superblock makes what it
 * read stale.  rio_txn_prep_drop waits for it and frees it (close). */
void      rio_txn_prep_note_write(struct rio_chan *rc, uint64_t off, size_t len);
void      rio_txn_prep_drop(struct rio_chan *rc);
void      rio_txn_totals_free(struct txn_totals *tt);

#endif
