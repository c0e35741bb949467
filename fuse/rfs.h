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
};

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
