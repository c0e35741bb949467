/*
 * io/jbd.h - internal to io/ (not a public header: only io/ sources include it).
 *
 * The ext3 journal, in the JBD format that e2fsck and the Linux kernel replay
 * (journal superblock v2, descriptor blocks with tags and escaping, revoke
 * blocks, commit blocks).  Like fs/jbd2 beside fs/ext4, it knows nothing of
 * what a transaction means or of the checker: it logs the blocks it is given,
 * replays what a crash left, and keeps the log's head and tail.
 *
 * Errors: errcode_t (0, EXT2_ET_*, or a positive errno), as the rest of io/.
 * Threads: called under the caller's lock, one jbd at a time.
 */
#ifndef RECON_IO_JBD_H
#define RECON_IO_JBD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <ext2fs/ext2fs.h>

/* How the journal reaches the device: whole file-system blocks, bypassing any
 * cache or transaction overlay (the caller's raw device path). */
struct jbd_dev {
	void *ctx;
	errcode_t (*read_blk)(void *ctx, uint64_t blk, void *buf);
	errcode_t (*write_blks)(void *ctx, uint64_t blk, unsigned count, const void *buf);
	errcode_t (*flush)(void *ctx);  /* everything written so far is durable */
};

struct jbd;

/* Open the internal journal of fs (s_journal_inum): map its blocks through
 * fs, read and validate the journal superblock.  Refuses an external journal,
 * a journal block size unlike the file system's, or incompat features we do
 * not implement (64bit tags, csum v2/v3, async commit), with a code and a
 * message (msg may be NULL). */
errcode_t jbd_open(ext2_filsys fs, const struct jbd_dev *dev, struct jbd **out,
		   char *msg, size_t msglen);
void jbd_close(struct jbd *j);

/* The log holds transactions a crash left (s_start != 0). */
bool jbd_needs_recovery(const struct jbd *j);

/* Replay every complete, committed transaction to its home location (honouring
 * revoke records and escaped blocks), flush, then mark the log empty.  A torn
 * tail (no commit block, wrong sequence) ends the replay as in the kernel. */
errcode_t jbd_recover(struct jbd *j, unsigned *replayed);

/* The most data blocks one jbd_log() call may carry (descriptor, revoke and
 * commit overhead already subtracted). */
uint32_t jbd_max_transaction_blocks(const struct jbd *j);

/* Log one transaction: n blocks with their home block numbers, plus revoke
 * records for blocks logged earlier that are now freed.  Writes descriptor
 * and data blocks, flushes, writes the commit block, flushes.  On return the
 * transaction is durable in the log (and would be replayed after a crash). */
errcode_t jbd_log(struct jbd *j, const uint64_t *blk, const void *const *data, size_t n,
		  const uint64_t *revoke, size_t nrevoke);

/* The caller wrote every logged block home and flushed: the log's tail may
 * advance past everything logged so far (space is reclaimed). */
errcode_t jbd_checkpointed(struct jbd *j);

#endif
