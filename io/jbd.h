/*
 * io/jbd.h - internal to io/ (not a public header: only io/ sources include it).
 *
 * The journal, in the jbd2 format that e2fsck and the Linux kernel replay
 * (journal superblock v1/v2, descriptor blocks with tags and escaping, revoke
 * blocks, commit blocks; 32- or 64-bit block numbers, checksums v1, v2 or v3,
 * the fast-commit area's bounds; the byte layouts are io/jbd_tag.h's).  Like
 * fs/jbd2 beside fs/ext4, it knows nothing of what a transaction means or of
 * the checker: it logs the blocks it is given, replays what a crash left, and
 * keeps the log's head and tail.  It writes every format it reads, except
 * fast commits, which it neither writes nor replays.
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
	/* The writes are a read-only view of the replayed state (in memory):
	 * jbd_recover then replays what e2fsck would and says what it left out
	 * (blocks whose checksum fails, transactions after a corrupt one, fast
	 * commits), where a replay onto the disk refuses such a log before it
	 * writes anything, as the kernel refuses to mount it. */
	bool view;
};

/* The shortest log (s_maxlen - s_first, less any fast-commit area) a
 * journal may have: the kernel refuses to load a shorter one ("JBD2: Journal
 * too short", jbd2's journal_reset: s_first + 1024 > s_maxlen + 1). */
#define JBD_MIN_LOG_BLOCKS 1023u
/* What jbd_max_transaction_blocks() is at least on any journal jbd_open
 * accepts: room for any one operation of the file system. */
#define JBD_MIN_TRANSACTION_BLOCKS 512u

struct jbd;

/* Open the internal journal of fs (s_journal_inum): map its blocks through
 * fs, read and validate the journal superblock as the kernel does when it
 * loads a journal.  Refuses, with a code and a message (msg may be NULL): an
 * external journal; a superblock with a bad magic, type, block size or
 * checksum, unknown or contradictory features; s_maxlen past the journal
 * inode, s_first or s_start outside the log; and a log shorter than
 * JBD_MIN_LOG_BLOCKS (EXT2_ET_JOURNAL_TOO_SMALL, the message naming
 * fs->device_name and how to recreate the journal). */
errcode_t jbd_open(ext2_filsys fs, const struct jbd_dev *dev, struct jbd **out,
		   char *msg, size_t msglen);
void jbd_close(struct jbd *j);

/* The log holds transactions a crash left (s_start != 0). */
bool jbd_needs_recovery(const struct jbd *j);

/* The error the journal's superblock records (s_errno: a negative errno
 * the kernel stored when it aborted the journal), 0 for none. */
int32_t jbd_errno(const struct jbd *j);

/* Replay every complete, committed transaction to its home location
 * (honouring revoke records and escaped blocks), flush, then mark the log
 * empty; *replayed = transactions replayed.  The log ends as the kernel's
 * recovery ends it (jbd2's do_one_pass): at a block that is not the next
 * one expected (a torn tail, a wrong sequence), at a commit block whose
 * checksum fails, at a stale transaction.  Checksums are checked where the
 * journal's features ask for them.  What the kernel refuses (a descriptor or
 * revoke block whose checksum fails in a transaction that is not stale, a
 * corrupt commit, a logged block whose checksum fails, fast commits to
 * replay) fails the replay onto the disk before anything is written
 * (EXT2_ET_BAD_CRC, EXT2_ET_UNSUPP_FEATURE); a view replay (dev->view)
 * replays what e2fsck replays instead.  Either way each such finding is
 * printed on stderr, one line each.  On failure the log is left as it was. */
errcode_t jbd_recover(struct jbd *j, unsigned *replayed);

/* The most data blocks one jbd_log() call may carry (descriptor, revoke and
 * commit overhead already subtracted); at least JBD_MIN_TRANSACTION_BLOCKS. */
uint32_t jbd_max_transaction_blocks(const struct jbd *j);

/* Log one transaction: n blocks with their home block numbers, plus revoke
 * records for blocks logged earlier that are now freed, in the journal's own
 * format (tag size, checksums).  Writes descriptor and data blocks, flushes,
 * writes the commit block, flushes.  On return the transaction is durable in
 * the log (and would be replayed after a crash). */
errcode_t jbd_log(struct jbd *j, const uint64_t *blk, const void *const *data, size_t n,
		  const uint64_t *revoke, size_t nrevoke);

/* The caller wrote every logged block home and flushed: the log's tail may
 * advance past everything logged so far (space is reclaimed). */
errcode_t jbd_checkpointed(struct jbd *j);

#endif
