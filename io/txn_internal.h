/*
 * io/txn_internal.h - what the files of io/'s transactions share: txn.c
 * (the boundary, violations, the data guard, the small public calls and
 * the stats), attach.c (attach, detach, the checker's attach and the base
 * check), commit.c (the commit path and its thread), savepoint.c
 * (libext2fs's allocation callbacks, savepoints and rollback), overlay.c
 * (the overlay and the block sets), flush.c (libext2fs's allocation state
 * into the overlay at a commit), fault.c (the test-only corruption
 * injector).  Internal to io/: nothing outside it includes this.
 *
 * Threads: the file-system thread (under the caller's lock) and the commit
 * thread; what each field's users are is said at the field.
 */
#ifndef RECON_IO_TXN_INTERNAL_H
#define RECON_IO_TXN_INTERNAL_H

#include <pthread.h>
#include <time.h>
#include "rio_internal.h"
#include "checker.h"

/* One block of the overlay: its approved contents (base) and new contents. */
struct ovl_ent {
	uint64_t blk;
	struct ovl_ent *hnext;
	unsigned char *data;
	unsigned char *base;
	bool dropped;        /* committing only: became file data, not written home */
	/* operation savepoints: created_gen is the savepoint generation the
	 * entry was created under; undo holds its data as of savepoint undo_gen */
	uint64_t created_gen, undo_gen;
	unsigned char *undo;
};

/* An allocation or free libext2fs made since the savepoint, undone in
 * reverse order by a rollback. */
struct alloc_change {
	uint64_t num;      /* block or inode number */
	int inuse;         /* +1 allocated, -1 freed */
	bool inode, isdir;
};

/* A set of block numbers (open addressing; 0 marks an empty slot, so block 0
 * is never stored: it is never freed, and the sets only serve frees). */
struct blkset {
	uint64_t *slot;
	size_t cap, count;   /* cap: power of two or 0 */
};

enum corrupt_kind {
	CK_NONE, CK_BBITMAP, CK_IBITMAP, CK_BGD_FREE_BLOCKS, CK_BGD_FREE_INODES, CK_BGD_USED_DIRS,
	CK_SB_FREE_BLOCKS, CK_PTR_USED, CK_PTR_FREE, CK_PTR_META, CK_IND_PTR, CK_LINKS, CK_SIZE,
	CK_IBLOCKS, CK_DTIME, CK_MODE, CK_DIRENT_INODE, CK_DIRENT_RECLEN, CK_DIRENT_NAMELEN,
	CK_DIRENT_TYPE, CK_DOTDOT, CK_XATTR_REFCOUNT, CK_RANDOM,
};

static const char *const corrupt_names[] = {
	[CK_BBITMAP] = "bbitmap", [CK_IBITMAP] = "ibitmap",
	[CK_BGD_FREE_BLOCKS] = "bgd_free_blocks", [CK_BGD_FREE_INODES] = "bgd_free_inodes",
	[CK_BGD_USED_DIRS] = "bgd_used_dirs", [CK_SB_FREE_BLOCKS] = "sb_free_blocks",
	[CK_PTR_USED] = "ptr_used", [CK_PTR_FREE] = "ptr_free", [CK_PTR_META] = "ptr_meta",
	[CK_IND_PTR] = "ind_ptr", [CK_LINKS] = "links", [CK_SIZE] = "size",
	[CK_IBLOCKS] = "iblocks", [CK_DTIME] = "dtime", [CK_MODE] = "mode",
	[CK_DIRENT_INODE] = "dirent_inode", [CK_DIRENT_RECLEN] = "dirent_reclen",
	[CK_DIRENT_NAMELEN] = "dirent_namelen", [CK_DIRENT_TYPE] = "dirent_type",
	[CK_DOTDOT] = "dotdot", [CK_XATTR_REFCOUNT] = "xattr_refcount", [CK_RANDOM] = "random",
};

/* A transaction closed at a boundary: frozen overlay blocks (sorted) and the
 * blocks it frees.  Built and retired by the file-system thread; run (check,
 * log, write home) by the commit thread or, synchronously, by the caller. */
struct cset {
	struct ovl_ent **ents;
	size_t n;
	struct ovl_ent **hash;      /* lookups for reads while it is in flight */
	size_t nhash;
	struct blkset freed;
	uint64_t tid;
	errcode_t result;
	bool done;                  /* under t->cm */
};

/* A channel's transactions, from rio_txn_attach to detach: the open one's
 * overlay, the one committing, the journal, the checker and the savepoint
 * of the operation in progress. */
struct txn_manager {
	ext2_filsys fs;
	struct rio_chan *rc;
	unsigned bs;

	/* the overlay */
	struct ovl_ent **hash;
	size_t nhash;
	struct ovl_ent **ents;
	size_t nents, capents;
	uint64_t opened_ns;          /* first write of the open transaction */

	/* committed-data rule: blocks freed by the open transaction stay marked
	 * in libext2fs's bitmap (so nothing reallocates them) until its commit */
	struct blkset freed;
	/* blocks logged by the previous transaction: freeing one needs a revoke */
	struct blkset logged_prev;
	void (*old_stats)(ext2_filsys, blk64_t, int);
	void (*old_stats_range)(ext2_filsys, blk64_t, blk_t, int);

	/* flush.c: the groups whose block or inode bitmap changed in memory
	 * since the last commit (a bit per group), and the descriptor blocks
	 * as last written (NULL: not yet) */
	uint64_t *bb_dirty, *ib_dirty;
	unsigned char *desc_written;
	bool verify_flush;           /* RECON_VERIFY_FLUSH: check every group at each commit */

	bool journal;                /* logging through jbd (else write in place) */
	bool was_valid;              /* VALID_FS at attach: restored at a clean detach only then */
	struct jbd *jbd;
	struct rio_raw_dev jctx;
	struct jbd_dev jdev;
	uint32_t max_blocks;         /* commit past this many blocks */
	uint32_t soft_blocks;        /* ... and past this many when no commit runs */

	struct chk_fs *chk;
	/* the data guard reads chk's owner map from the file-system thread
	 * while the commit thread may advance it: advance takes it to write */
	pthread_rwlock_t chk_lock;
	/* chk's users one at a time: the commit path (bg_gate and chk_check,
	 * then chk_advance) and the background check (bgcheck.c) */
	pthread_mutex_t chk_use;
	struct bgcheck *bg;          /* the background check's thread, or NULL */
	/* claimed groups not checked yet (bgcheck.c), ngroups bits read and
	 * cleared atomically: the data path looks without chk_use; NULL: none */
	uint8_t *claim_open;

	/* the transaction being committed (at most one) and the commit thread */
	struct cset *committing;
	pthread_mutex_t cm;
	pthread_cond_t cv;
	struct cset *queued;
	bool stop, thread_running;
	pthread_t thread;
	/* called by the commit thread after each commit it ran finished (set
	 * under cm, called without it) */
	void (*done_hook)(void *arg, uint64_t tid, bool durable);
	void *done_arg;
	/* RECON_COMMIT_GATE (tests): while this file exists each commit waits
	 * before its check, having made PATH.held (NULL: no gate) */
	char *gate;

	/* the savepoint of the operation in progress (0 = none), per channel:
	 * one operation at a time, as the caller's file-system lock makes
	 * them (savepoint.c) */
	uint64_t sp_gen, sp_next;
	uint64_t *sp_freed;          /* blocks freed since the savepoint */
	size_t sp_nfreed, sp_capfreed;
	uint64_t *sp_unfreed;        /* blocks taken back from the freed set since */
	size_t sp_nunfreed, sp_capunfreed;
	struct alloc_change *sp_allocs;  /* libext2fs's allocations and frees since */
	size_t sp_nallocs, sp_capallocs;
	bool sp_lost;                /* out of memory while tracking: cannot roll back */

	/* transaction ids: the open one, and the highest known durable (every
	 * commit flushes the device, so all ids up to it are on disk) */
	uint64_t tid_open, tid_durable;

	enum corrupt_kind ckind;
	uint64_t cwhen, cseen;       /* corrupt the cwhen-th matching transaction */
	uint64_t rng;
};

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t txn_random(struct txn_manager *t)
{
	uint64_t z = (t->rng += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* The channel of fs when it is one of ours, else NULL. */
static inline struct rio_chan *chan_of_fs(ext2_filsys fs)
{
	if (!fs || !fs->io || fs->io->magic != EXT2_ET_MAGIC_IO_CHANNEL ||
	    fs->io->manager != rio_io_manager)
		return NULL;
	return rio_chan_of(fs->io);
}

/* The channel of fs and its transaction manager: 0, or
 * EXT2_ET_MAGIC_IO_CHANNEL (not our channel), EXT2_ET_INVALID_ARGUMENT (not
 * attached). */
static inline errcode_t txn_attached(ext2_filsys fs, struct rio_chan **rc, struct txn_manager **t)
{
	*rc = chan_of_fs(fs);
	if (!*rc)
		return EXT2_ET_MAGIC_IO_CHANNEL;
	*t = (*rc)->txn;
	return *t ? 0 : EXT2_ET_INVALID_ARGUMENT;
}

/* overlay.c */
errcode_t blkset_add(struct blkset *s, uint64_t blk);
void blkset_clear(struct blkset *s);
bool blkset_has(const struct blkset *s, uint64_t blk);
void blkset_remove(struct blkset *s, uint64_t blk);
size_t bs_slot(uint64_t blk, size_t cap);
bool ovl_changed(const struct txn_manager *t, const struct ovl_ent *e);
void ovl_clear(struct txn_manager *t);
struct ovl_ent *ovl_find(struct txn_manager *t, uint64_t blk);
void ovl_remove(struct txn_manager *t, struct ovl_ent *e);
void release_freed_marks(struct txn_manager *t);
void restore_freed_marks(struct txn_manager *t);

/* flush.c */
errcode_t flush_init(struct txn_manager *t);
void flush_free(struct txn_manager *t);
void flush_mark_block(struct txn_manager *t, blk64_t blk);
void flush_mark_inode(struct txn_manager *t, ext2_ino_t ino);
errcode_t flush_fs_state(struct txn_manager *t);

/* fault.c: fault_corrupt_parse reads the KIND@N option; inject_corruption
 * corrupts one site of the closing transaction when it is the Nth that
 * holds a site of KIND. */
void inject_corruption(struct txn_manager *t);
errcode_t fault_corrupt_parse(struct txn_manager *t, const char *spec);

/* savepoint.c: libext2fs's block alloc-stats callbacks while attached */
void block_stats_cb(ext2_filsys fs, blk64_t blk, int inuse);
void block_stats_range_cb(ext2_filsys fs, blk64_t blk, blk_t num, int inuse);

/* commit.c (file-system thread unless said).  txn_commit: commit the open
 * transaction, on the commit thread unless `wait` (retiring the one in
 * flight first); retire: wait for the committing transaction and take its
 * result (its frees become allocatable, or what was built on a failed one
 * is discarded); discard: the open transaction is lost (ovl_lock held);
 * cset_done: the committing one finished; wait_cset: wait until it has;
 * commit_thread: the commit thread's body; committing_find: a block of the
 * committing transaction (ovl_lock held). */
errcode_t txn_commit(struct txn_manager *t, bool wait);
/* txn_commit_begin: the open transaction to the commit thread unless one
 * is still in flight (then nothing is closed); *tid is the transaction
 * whose durability covers every write made so far.  The commit thread runs. */
errcode_t txn_commit_begin(struct txn_manager *t, uint64_t *tid);
errcode_t retire(struct txn_manager *t);
void discard(struct txn_manager *t);
bool cset_done(struct txn_manager *t, struct cset *c);
void wait_cset(struct txn_manager *t, struct cset *c);
void *commit_thread(void *arg);
void cset_free(struct cset *c);
struct ovl_ent *committing_find(struct txn_manager *t, uint64_t blk);

/* bgcheck.c: the base check's deferred table tails (checker.h).  bg_start:
 * the background thread, when chk has deferred groups and base_check is
 * background (0 or a thread error); bg_stop: stop it and wait (prompt: it
 * stops between groups); bg_gate, in the commit path with chk_use held
 * before chk_check of writes w[0..n): each deferred group whose inode table
 * or inode bitmap they write, or a claimed one's block bitmap, is checked
 * first; 0, or EROFS / EIO with the file system failed. */
errcode_t bg_start(struct txn_manager *t);
void bg_stop(struct txn_manager *t);
errcode_t bg_gate(struct txn_manager *t, const struct chk_write *w, size_t n);
/* Before file data is written to blocks blk..blk+count-1 (any thread,
 * chk_use not held): each claimed group among them not yet checked is
 * checked first (bg_gate's errors). */
errcode_t bg_claim_gate(struct txn_manager *t, uint64_t blk, uint64_t count);

/* attach.c: a thread of io's own, taking no signals (pthread_create's result) */
int rio_start_quiet_thread(pthread_t *th, void *(*fn)(void *), void *arg);

/* txn.c: record_verdict puts a rejection's violations into the channel's
 * totals, the last violation's text and stderr (takes the totals' lock);
 * set_last_violation replaces that text (the totals' lock held). */
void record_verdict(struct txn_manager *t, const struct chk_verdict *v);
void set_last_violation(struct txn_totals *tt, const char *text);

#endif
