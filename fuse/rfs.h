/*
 * fuse/rfs.h - internal to fuse/ (owned by the fuse work): the mounted file
 * system's state shared by main.c and ops.c.
 */
#ifndef RECON_FUSE_RFS_H
#define RECON_FUSE_RFS_H

#include "config.h"
#include "dirindex.h"

#include <pthread.h>
#include <ext2fs/ext2fs.h>

/* Open count of an inode; an inode unlinked while open sits on the on-disk
 * orphan list until its last release. */
struct open_ino {
	ext2_ino_t ino;
	unsigned count;
	bool orphan;
	struct open_ino *next;
};

/* A block or inode allocation change made by the operation in progress,
 * undone in reverse order if the operation fails. */
struct alloc_rec {
	uint64_t num;      /* block or inode number */
	int inuse;         /* +1 allocated, -1 freed */
	bool inode, isdir;
};

struct rfs {
	ext2_filsys fs;
	pthread_mutex_t lock;      /* libext2fs is not thread-safe: every call under it */
	struct dindex *di;
	struct recon_config *cfg;
	bool ro;                   /* mounted read-only, or went read-only */
	bool attached;             /* rio_txn_attach done: transactions in use */
	struct fuse_session *se;
	struct open_ino *open_tab[1024];
	uint64_t max_bytes;        /* largest file size the block map can address */

	/* rollback of the operation in progress (ops.c): a savepoint in io,
	 * the superblock as it was, and the allocation changes made since */
	bool sp_active;
	struct ext2_super_block sb_saved;
	struct alloc_rec *undo;
	size_t nundo, capundo;
	bool undo_lost;            /* out of memory while recording */
	void (*old_stats)(ext2_filsys fs, blk64_t blk, int inuse);
	void (*old_stats_range)(ext2_filsys fs, blk64_t blk, blk_t num, int inuse);

	/* after a rejected commit: the kernel's caches are invalidated once */
	uint8_t *known;            /* bit per inode handed to the kernel */
	bool invalidated;
	bool notifier_running;
	pthread_t notifier;
	bool stopped;              /* on_violation=stop fired: exit status 2 */

	/* nanosecond timestamps (256-byte inodes): the operation's time, and
	 * which times of which inodes it set (put_inode writes *_extra) */
	struct timespec now;
	struct time_stamp {
		ext2_ino_t ino;
		unsigned mask;     /* 1 atime, 2 mtime, 4 ctime, 8 crtime */
		long extra[4];   /* i_[amc]time_extra words, epoch bits and ns */
	} stamp[8];
	unsigned nstamp;
};

/* Exit status of the daemon when on_violation=stop unmounted it. */
#define RFS_EXIT_STOPPED 2

/* After rio_txn_attach: hook libext2fs's allocation callbacks for rollback
 * and start tracking the inodes the kernel knows.  0 or -errno. */
int rfs_txn_hooks(struct rfs *r);

/* Wait for the cache-invalidation thread (before the session goes away). */
void rfs_join_notifier(struct rfs *r);

extern const struct fuse_lowlevel_ops rfs_ops;

/* Mount-time orphan processing (before transactions attach).  0 or -errno. */
int rfs_process_orphans(struct rfs *r);

/* Free an inode with no links: its blocks, then the inode itself. */
int rfs_free_inode(struct rfs *r, ext2_ino_t ino, struct ext2_inode *inode);

/* Unmount work (destroy): detach transactions, write stats, close the fs. */
void rfs_unmount(struct rfs *r);

/* Periodic boundary so an idle transaction still commits within
 * commit_interval_ms. */
void rfs_tick(struct rfs *r);

#endif
