/*
 * io/jbd.c - the journal in the jbd2 on-disk format (see jbd.h; the byte
 * layouts are io/jbd_tag.c's).
 *
 * The log.  Journal block 0 is the superblock; the log runs from s_first up
 * to s_maxlen, less the fast-commit area at its end when the superblock has
 * the fast_commit feature (the kernel's j_last), and wraps.  Its blocks:
 *   descriptor: tags naming the home blocks of the logged blocks that follow
 *     it, a block that would start with the journal magic stored with those
 *     4 bytes zeroed and its tag flagged ESCAPE;
 *   revoke: block numbers whose copies in this or earlier transactions are
 *     not replayed;
 *   commit: the transaction is complete.
 *
 * Log tail.  The journal superblock says where replay starts.  We keep it
 * pointing at the oldest transaction not yet checkpointed: jbd_log() writes
 * it (s_start = this transaction) when the log was empty, before the flush
 * that precedes the commit block, so a durable commit is always reachable;
 * jbd_checkpointed() writes s_start = 0 without a flush of its own (the next
 * jbd_log's flush, or jbd_close, makes it durable).  Until that write is known
 * durable, the superblock on disk may still name the previous transaction, so
 * its log blocks are not overwritten (a replay of an intact, checkpointed
 * transaction rewrites what is already home; a replay of one half-overwritten
 * by a newer transaction would not).  The head never goes back to s_first
 * while the process runs, for the same reason.  Sequence numbers only grow,
 * so stale blocks past the head never continue a replay.
 */
#include "jbd.h"
#include "jbd_tag.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define JBD_MAX_USERS 48

struct revoke_tab {
	uint64_t *key;   /* block + 1; 0 = empty slot */
	uint32_t *tid;
	size_t cap, count;
};

struct jbd {
	struct jbd_dev dev;
	struct jbd_fmt fmt;
	unsigned bs;
	uint64_t fs_blocks;
	uint32_t first, last;     /* log blocks are [first, last) */
	uint32_t fc_first;        /* the fast-commit area's first block (0: none) */
	uint64_t *map;            /* journal block -> file-system block */
	unsigned char *sb;        /* the journal superblock block, as on disk */

	uint32_t head;            /* next log block to write */
	uint32_t seq;             /* tid of the next transaction */
	bool live;                /* something logged is not checkpointed yet */
	uint32_t tail, tail_seq;  /* oldest transaction not checkpointed (if live) */

	uint32_t sb_start;        /* s_start last written (0 = empty) */
	uint32_t sb_durable;      /* s_start at the last flush */
	bool sb_unflushed;        /* sb_start written since the last flush */
	bool failed;              /* an I/O error left the log in an unknown state */

	/* the last transaction's log blocks, kept for the next (up to
	 * LOGBUF_KEEP_BYTES): a fresh buffer of that size is a page fault
	 * per block on every commit */
	unsigned char *logbuf;
	size_t logbuf_blocks;
};
#define LOGBUF_KEEP_BYTES ((size_t)16 << 20)

/* tids wrap: compare as the kernel does */
static bool tid_gt(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) > 0;
}

static void say(char *msg, size_t msglen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void say(char *msg, size_t msglen, const char *fmt, ...)
{
	if (!msg || !msglen)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, msglen, fmt, ap);
	va_end(ap);
}

static uint32_t log_len(const struct jbd *j)
{
	return j->last - j->first;
}

static uint32_t log_next(const struct jbd *j, uint32_t b)
{
	return b + 1 >= j->last ? j->first : b + 1;
}

/* Log blocks from p up to the head, p being where some transaction began
 * (0: none). */
static uint32_t behind_head(const struct jbd *j, uint32_t p)
{
	if (p == 0)
		return 0;
	return (j->head + log_len(j) - p) % log_len(j);
}

static uint64_t div_up(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

/* Log blocks one transaction of n blocks and nrevoke revoke records takes. */
static uint64_t transaction_blocks(const struct jbd_fmt *f, uint64_t n, uint64_t nrevoke)
{
	return div_up(n, jbd_tags_per_descriptor(f)) + n + div_up(nrevoke, jbd_revokes_per_block(f)) +
	       1;
}

static errcode_t read_log(struct jbd *j, uint32_t lblk, void *buf)
{
	return j->dev.read_blk(j->dev.ctx, j->map[lblk], buf);
}

/* Write count log blocks from buf at the journal blocks pos[0..count), merging
 * runs that are contiguous on the device. */
static errcode_t write_log(struct jbd *j, const uint32_t *pos, size_t count, const unsigned char *buf)
{
	size_t i = 0;
	while (i < count) {
		size_t run = 1;
		while (i + run < count && run < 1024 && j->map[pos[i + run]] == j->map[pos[i]] + run)
			run++;
		errcode_t err = j->dev.write_blks(j->dev.ctx, j->map[pos[i]], (unsigned)run,
						  buf + i * (size_t)j->bs);
		if (err)
			return err;
		i += run;
	}
	return 0;
}

static errcode_t write_sb(struct jbd *j, uint32_t start, uint32_t seq)
{
	jbd_put_be32(j->sb + JSB_START, start);
	jbd_put_be32(j->sb + JSB_SEQUENCE, seq);
	jbd_sb_csum_set(&j->fmt, j->sb);
	errcode_t err = j->dev.write_blks(j->dev.ctx, j->map[0], 1, j->sb);
	if (err)
		return err;
	j->sb_start = start;
	j->sb_unflushed = true;
	return 0;
}

static errcode_t flush(struct jbd *j)
{
	errcode_t err = j->dev.flush(j->dev.ctx);
	if (err)
		return err;
	j->sb_durable = j->sb_start;
	j->sb_unflushed = false;
	return 0;
}

/* ---- open ---- */

/* The journal inode, or e2fsck's fallback when it is damaged: the copy of its
 * block map and size that mke2fs/tune2fs keep in the superblock
 * (s_jnl_blocks). */
static errcode_t journal_inode(ext2_filsys fs, struct ext2_inode *inode, char *msg, size_t msglen)
{
	ext2_ino_t ino = fs->super->s_journal_inum;
	errcode_t err = ext2fs_read_inode(fs, ino, inode);
	if (!err && LINUX_S_ISREG(inode->i_mode) && inode->i_links_count != 0)
		return 0;
	if (fs->super->s_jnl_backup_type != EXT3_JNL_BACKUP_BLOCKS) {
		if (err)
			say(msg, msglen, "reading journal inode %u: %s", ino, error_message(err));
		else
			say(msg, msglen, "journal inode %u is not a regular file in use (and no backup)",
			    ino);
		return err ? err : EXT2_ET_NO_JOURNAL;
	}
	memset(inode, 0, sizeof(*inode));
	memcpy(inode->i_block, fs->super->s_jnl_blocks, sizeof(inode->i_block));
	inode->i_size_high = fs->super->s_jnl_blocks[15];
	inode->i_size = fs->super->s_jnl_blocks[16];
	inode->i_links_count = 1;
	inode->i_mode = LINUX_S_IFREG | 0600;
	if (ext2fs_has_feature_extents(fs->super) &&
	    ext2fs_extent_header_verify(inode->i_block, sizeof(inode->i_block)) == 0)
		inode->i_flags |= EXT4_EXTENTS_FL;
	return 0;
}

/* One indirect block of an indirect-mapped journal at depth level (1: its
 * entries are data blocks), mapping from journal block *l on.  A pointer
 * outside the file system is not followed: its span reads as holes, which
 * jbd_open then names. */
static errcode_t map_indirect(ext2_filsys fs, blk64_t blk, int level, uint64_t *l, uint64_t *map, uint64_t n,
			      char *bufs)
{
	uint32_t per = fs->blocksize / 4;
	uint64_t span = 1;
	for (int k = 1; k < level; k++)
		span *= per;
	if (blk < fs->super->s_first_data_block || blk >= ext2fs_blocks_count(fs->super)) {
		*l += span * per;
		return 0;
	}
	char *buf = bufs + (size_t)(level - 1) * fs->blocksize;
	errcode_t err = io_channel_read_blk64(fs->io, blk, 1, buf);
	if (err)
		return err;
	for (uint32_t i = 0; i < per && *l < n && !err; i++) {
		uint32_t p = ext2fs_le32_to_cpu(((const uint32_t *)buf)[i]);
		if (level == 1)
			map[(*l)++] = p;
		else if (p)
			err = map_indirect(fs, p, level - 1, l, map, n, bufs);
		else
			*l += span;
	}
	return err;
}

/* map[l] = the file-system block of journal block l (0 for a hole).  An
 * indirect-mapped journal (ext3's) is walked once, each indirect block read
 * once: ext2fs_bmap2 per block read them again for every block, three
 * opens of a 32,768-block journal at each mount. */
static errcode_t map_journal(ext2_filsys fs, struct ext2_inode *inode, uint64_t *map, uint64_t n)
{
	char *block_buf = malloc(3 * (size_t)fs->blocksize);
	if (!block_buf)
		return ENOMEM;
	errcode_t err = 0;
	memset(map, 0, n * sizeof(*map));
	if (!(inode->i_flags & EXT4_EXTENTS_FL)) {
		uint64_t l = 0;
		for (int i = 0; i < EXT2_NDIR_BLOCKS && l < n; i++)
			map[l++] = inode->i_block[i];
		for (int level = 1; level <= 3 && l < n && !err; level++) {
			uint32_t top = inode->i_block[EXT2_NDIR_BLOCKS + level - 1];
			if (top) {
				err = map_indirect(fs, top, level, &l, map, n, block_buf);
			} else {
				uint64_t span = 1;
				for (int k = 0; k < level; k++)
					span *= fs->blocksize / 4;
				l += span;
			}
		}
		free(block_buf);
		return err;
	}
	for (uint64_t l = 0; l < n && !err; l++) {
		blk64_t phys = 0;
		err = ext2fs_bmap2(fs, fs->super->s_journal_inum, inode, block_buf, 0, l, NULL, &phys);
		map[l] = phys;
	}
	free(block_buf);
	return err;
}

/* The superblock's header, block size and features, as the kernel's
 * journal_check_superblock and e2fsck's journal load judge them. */
static errcode_t check_format(struct jbd *j, char *msg, size_t msglen)
{
	const unsigned char *sb = j->sb;
	uint32_t type, tid;
	if (!jbd_hdr_get(sb, &type, &tid)) {
		say(msg, msglen, "journal superblock has a bad magic number (0x%08x)", jbd_be32(sb));
		return EXT2_ET_CORRUPT_JOURNAL_SB;
	}
	if (type != JBD_SB_V1 && type != JBD_SB_V2) {
		say(msg, msglen, "journal superblock has an unknown type %u", type);
		return EXT2_ET_JOURNAL_UNSUPP_VERSION;
	}
	uint32_t bs = jbd_be32(sb + JSB_BLOCKSIZE);
	if (bs != j->bs) {
		say(msg, msglen, "journal block size %u differs from the file system's %u", bs, j->bs);
		return EXT2_ET_CORRUPT_JOURNAL_SB;
	}
	jbd_fmt_init(&j->fmt, j->bs, sb);
	if (type != JBD_SB_V2)
		return 0;
	const struct jbd_fmt *f = &j->fmt;
	uint32_t csum_both = JBD_INCOMPAT_CSUM_V2 | JBD_INCOMPAT_CSUM_V3;
	if (f->incompat & ~JBD_INCOMPAT_KNOWN) {
		say(msg, msglen, "journal has unknown incompatible features 0x%x",
		    f->incompat & ~JBD_INCOMPAT_KNOWN);
		return EXT2_ET_UNSUPP_FEATURE;
	}
	if (jbd_be32(sb + JSB_RO_COMPAT)) {
		say(msg, msglen, "journal has unknown read-only features 0x%x",
		    jbd_be32(sb + JSB_RO_COMPAT));
		return EXT2_ET_RO_UNSUPP_FEATURE;
	}
	if ((f->incompat & csum_both) == csum_both ||
	    (jbd_fmt_csum(f) && jbd_fmt_crc32_commit(f))) {
		say(msg, msglen, "journal superblock claims two checksum versions at once (features "
		    "0x%x, 0x%x)", f->compat, f->incompat);
		return EXT2_ET_CORRUPT_JOURNAL_SB;
	}
	if (jbd_fmt_csum(f) && sb[JSB_CSUM_TYPE] != JBD_CSUM_TYPE_CRC32C) {
		say(msg, msglen, "journal checksum type %u is not crc32c", sb[JSB_CSUM_TYPE]);
		return EXT2_ET_UNKNOWN_CSUM;
	}
	if (!jbd_sb_csum_ok(f, sb)) {
		say(msg, msglen, "journal superblock checksum 0x%08x does not match its contents "
		    "(0x%08x)", jbd_be32(sb + JSB_CHECKSUM), jbd_sb_csum(sb));
		return EXT2_ET_CORRUPT_JOURNAL_SB;
	}
	if (jbd_be32(sb + JSB_NR_USERS) > JBD_MAX_USERS) {
		say(msg, msglen, "journal superblock has %u users (at most %d)",
		    jbd_be32(sb + JSB_NR_USERS), JBD_MAX_USERS);
		return EXT2_ET_CORRUPT_JOURNAL_SB;
	}
	return 0;
}

/* Where the log lies: s_maxlen within the journal inode, s_first inside it,
 * the fast-commit area after the log, and a log the kernel accepts. */
static errcode_t check_geometry(struct jbd *j, const char *dev, uint64_t mapped, char *msg,
				size_t msglen)
{
	const unsigned char *sb = j->sb;
	uint32_t maxlen = jbd_be32(sb + JSB_MAXLEN), first = jbd_be32(sb + JSB_FIRST);
	if (maxlen > mapped) {
		say(msg, msglen, "journal superblock claims %u blocks, the journal inode has %llu",
		    maxlen, (unsigned long long)mapped);
		return EXT2_ET_CORRUPT_JOURNAL_SB;
	}
	if (first == 0 || first >= maxlen) {
		say(msg, msglen, "journal superblock's log start s_first %u is outside the journal "
		    "(s_maxlen %u)", first, maxlen);
		return EXT2_ET_CORRUPT_JOURNAL_SB;
	}
	uint32_t last = maxlen, fc = 0;
	if (j->fmt.incompat & JBD_INCOMPAT_FAST_COMMIT) {
		fc = jbd_sb_fc_blocks(sb);
		last = fc < maxlen - first ? maxlen - fc : first;
	}
	if (last - first < JBD_MIN_LOG_BLOCKS) {
		say(msg, msglen, "the journal of %s is too short (its log has %u blocks%s; the kernel "
		    "needs at least %u and refuses to mount it, read-only too); recreate it: e2fsck "
		    "-fy, tune2fs -O ^has_journal, tune2fs -j", dev, last - first,
		    fc ? " before the fast-commit area" : "", JBD_MIN_LOG_BLOCKS);
		return EXT2_ET_JOURNAL_TOO_SMALL;
	}
	uint32_t start = jbd_be32(sb + JSB_START);
	if (start != 0 && (start < first || start >= last)) {
		say(msg, msglen, "journal superblock's log start %u is outside the log [%u, %u)", start,
		    first, last);
		return EXT2_ET_CORRUPT_JOURNAL_SB;
	}
	j->first = first;
	j->last = last;
	/* one block between the log and the fast-commit area, as the kernel
	 * lays it out (j_fc_first = j_last + 1) */
	j->fc_first = fc ? last + 1 : 0;
	return 0;
}

/* Read and map the journal of fs into j; the caller frees j on error. */
static errcode_t load(struct jbd *j, ext2_filsys fs, char *msg, size_t msglen)
{
	struct ext2_inode inode;
	errcode_t err = journal_inode(fs, &inode, msg, msglen);
	if (err)
		return err;
	uint64_t nblocks = EXT2_I_SIZE(&inode) / fs->blocksize;
	if (nblocks > ext2fs_blocks_count(fs->super))
		nblocks = ext2fs_blocks_count(fs->super);
	if (nblocks < 2) {
		say(msg, msglen, "journal inode is too small (%llu blocks)", (unsigned long long)nblocks);
		return EXT2_ET_JOURNAL_TOO_SMALL;
	}
	j->map = calloc(nblocks, sizeof(*j->map));
	j->sb = malloc(j->bs);
	if (!j->map || !j->sb)
		return ENOMEM;
	err = map_journal(fs, &inode, j->map, nblocks);
	if (err) {
		say(msg, msglen, "mapping the journal inode: %s", error_message(err));
		return err;
	}
	if (j->map[0] == 0 || j->map[0] >= j->fs_blocks) {
		say(msg, msglen, "journal superblock is not mapped");
		return EXT2_ET_NO_JOURNAL_SB;
	}
	err = j->dev.read_blk(j->dev.ctx, j->map[0], j->sb);
	if (err) {
		say(msg, msglen, "reading the journal superblock: %s", error_message(err));
		return err;
	}
	err = check_format(j, msg, msglen);
	if (!err)
		err = check_geometry(j, fs->device_name ? fs->device_name : "the file system", nblocks,
				     msg, msglen);
	if (err)
		return err;
	uint32_t maxlen = jbd_be32(j->sb + JSB_MAXLEN);
	for (uint32_t b = 0; b < maxlen; b++)
		if (j->map[b] < fs->super->s_first_data_block || j->map[b] >= j->fs_blocks) {
			say(msg, msglen, "journal block %u is %s", b,
			    j->map[b] ? "outside the file system" : "a hole");
			return EXT2_ET_CORRUPT_JOURNAL_SB;
		}
	return 0;
}

errcode_t jbd_open(ext2_filsys fs, const struct jbd_dev *dev, struct jbd **out, char *msg,
		   size_t msglen)
{
	*out = NULL;
	say(msg, msglen, "%s", "");
	if (!ext2fs_has_feature_journal(fs->super)) {
		say(msg, msglen, "the file system has no journal");
		return EXT2_ET_NO_JOURNAL;
	}
	if (ext2fs_has_feature_journal_dev(fs->super) || fs->super->s_journal_inum == 0) {
		say(msg, msglen, "external journal (journal_dev) is not supported");
		return EXT2_ET_LOAD_EXT_JOURNAL;
	}
	struct jbd *j = calloc(1, sizeof(*j));
	if (!j)
		return ENOMEM;
	j->dev = *dev;
	j->bs = fs->blocksize;
	j->fs_blocks = ext2fs_blocks_count(fs->super);
	errcode_t err = load(j, fs, msg, msglen);
	if (!err && jbd_max_transaction_blocks(j) < JBD_MIN_TRANSACTION_BLOCKS) {
		/* not reached with the log lengths check_geometry lets through */
		say(msg, msglen, "the journal of %s holds transactions of only %u blocks",
		    fs->device_name, jbd_max_transaction_blocks(j));
		err = EXT2_ET_JOURNAL_TOO_SMALL;
	}
	if (err) {
		free(j->map);
		free(j->sb);
		free(j);
		return err;
	}
	j->head = j->first;
	/* as the kernel does on load: a clean log's next tid is one past
	 * s_sequence, so nothing a crashed writer may have left matches */
	j->seq = jbd_be32(j->sb + JSB_SEQUENCE) + 1;
	j->sb_start = j->sb_durable = jbd_be32(j->sb + JSB_START);
	*out = j;
	return 0;
}

void jbd_close(struct jbd *j)
{
	if (!j)
		return;
	/* s_start = 0 from jbd_checkpointed must be durable before the caller
	 * clears needs_recovery (e2fsck objects to a clean file system whose
	 * journal has data) */
	if (!j->failed && j->sb_unflushed) {
		errcode_t err = flush(j);
		if (err)
			fprintf(stderr, "recon-fuse: journal: flush at close: %s\n", error_message(err));
	}
	free(j->logbuf);
	free(j->map);
	free(j->sb);
	free(j);
}

bool jbd_needs_recovery(const struct jbd *j)
{
	return !j->live && j->sb_start != 0;
}

int32_t jbd_errno(const struct jbd *j)
{
	return (int32_t)jbd_be32(j->sb + JSB_ERRNO);
}

uint32_t jbd_max_transaction_blocks(const struct jbd *j)
{
	/* a transaction must fit the empty log with one block to spare, with
	 * room for revoking as many blocks as this and the previous one logged */
	uint64_t budget = log_len(j) - 1, lo = 0, hi = budget;
	while (lo < hi) {
		uint64_t mid = (lo + hi + 1) / 2;
		if (transaction_blocks(&j->fmt, mid, 2 * mid) <= budget)
			lo = mid;
		else
			hi = mid - 1;
	}
	return (uint32_t)lo;
}

/* ---- recovery ---- */

static uint64_t revoke_hash(uint64_t k, size_t cap)
{
	return (k * 0x9E3779B97F4A7C15ull >> 17) & (cap - 1);
}

static errcode_t revoke_set(struct revoke_tab *r, uint64_t blk, uint32_t tid)
{
	if (blk == UINT64_MAX)
		return 0;   /* no file system has it; keys are blk + 1 */
	if ((r->count + 1) * 2 > r->cap) {
		size_t ncap = r->cap ? r->cap * 2 : 1024;
		uint64_t *nkey = calloc(ncap, sizeof(*nkey));
		uint32_t *ntid = calloc(ncap, sizeof(*ntid));
		if (!nkey || !ntid) {
			free(nkey);
			free(ntid);
			return ENOMEM;
		}
		for (size_t i = 0; i < r->cap; i++) {
			if (!r->key[i])
				continue;
			size_t h = revoke_hash(r->key[i], ncap);
			while (nkey[h])
				h = (h + 1) & (ncap - 1);
			nkey[h] = r->key[i];
			ntid[h] = r->tid[i];
		}
		free(r->key);
		free(r->tid);
		r->key = nkey;
		r->tid = ntid;
		r->cap = ncap;
	}
	uint64_t k = blk + 1;
	size_t h = revoke_hash(k, r->cap);
	while (r->key[h] && r->key[h] != k)
		h = (h + 1) & (r->cap - 1);
	if (!r->key[h]) {
		r->key[h] = k;
		r->tid[h] = tid;
		r->count++;
	} else if (tid_gt(tid, r->tid[h])) {
		r->tid[h] = tid;
	}
	return 0;
}

/* A copy of blk logged in transaction tid is revoked by a revoke record of
 * that transaction or a later one. */
static bool revoked(const struct revoke_tab *r, uint64_t blk, uint32_t tid)
{
	if (!r->cap)
		return false;
	uint64_t k = blk + 1;
	size_t h = revoke_hash(k, r->cap);
	while (r->key[h]) {
		if (r->key[h] == k)
			return !tid_gt(tid, r->tid[h]);
		h = (h + 1) & (r->cap - 1);
	}
	return false;
}

/* One line on stderr per finding of a recovery, as the kernel's own. */
static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("recon-fuse: journal: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* The kernel's recovery passes (do_one_pass), and one of ours: PASS_CHECK
 * finds, before PASS_REPLAY writes anything, what it would skip or fail on,
 * so that a replay onto the disk can refuse such a log untouched. */
enum pass { PASS_SCAN, PASS_REVOKE, PASS_CHECK, PASS_REPLAY };

struct replay {
	uint32_t start;          /* s_sequence: the first tid of the log */
	uint32_t end;            /* first tid not replayed (found by PASS_SCAN) */
	bool end_fixed;          /* a commit block failed its checksum: the log ends there */
	bool corrupt_commit;     /* ... and the journal commits synchronously: transaction
				  * `end` is corrupt, the kernel refuses the journal */
	bool log_error;          /* the log is damaged where the kernel's recovery fails */
	unsigned bad_data;       /* logged blocks whose tag checksum fails (skipped) */
	uint64_t bad_home;       /* a tag names a block outside the file system (+1; 0: none) */
	struct revoke_tab rv;
	unsigned char *buf, *data;
};

/* One walk through the log. */
struct cursor {
	uint32_t tid, blk;
	uint64_t walked;
	uint32_t crc;             /* checksum v1: the transaction's CRC32 so far */
	bool check_commit_time;   /* a descriptor or revoke block failed its checksum */
	uint64_t last_commit;     /* commit time of the last good transaction */
	bool stop;                /* the log ends here */
};

/* A logged block: skipped when revoked, checked against its tag, and in
 * PASS_REPLAY written home.  PASS_CHECK reads it only to check a checksum a
 * replay onto the disk must not meet. */
static errcode_t replay_tag(struct jbd *j, enum pass pass, struct replay *rp, uint32_t lblk,
			    const struct jbd_tag *t, uint32_t tid)
{
	if (revoked(&rp->rv, t->blk, tid))
		return 0;
	bool read = pass == PASS_REPLAY || (jbd_fmt_csum(&j->fmt) && !j->dev.view);
	if (read) {
		errcode_t err = read_log(j, lblk, rp->data);
		if (err)
			return err;
		if (!jbd_tag_csum_ok(&j->fmt, t, tid, rp->data)) {
			if (!rp->bad_data++)
				note("invalid checksum recovering block %llu logged at journal block %u "
				     "(transaction %u)", (unsigned long long)t->blk, lblk, tid);
			return 0;
		}
	}
	if (t->blk >= j->fs_blocks) {
		if (!rp->bad_home)
			note("transaction %u logs block %llu, outside the file system", tid,
			     (unsigned long long)t->blk);
		rp->bad_home = t->blk + 1;
		return 0;
	}
	if (pass != PASS_REPLAY)
		return 0;
	if (t->flags & JBD_TAG_ESCAPE)
		jbd_put_be32(rp->data, JBD_MAGIC);
	return j->dev.write_blks(j->dev.ctx, t->blk, 1, rp->data);
}

/* A descriptor block (in rp->buf) and the logged blocks it tags. */
static errcode_t on_descriptor(struct jbd *j, enum pass pass, struct replay *rp, struct cursor *c)
{
	const unsigned char *d = rp->buf;
	if (!jbd_tail_ok(&j->fmt, d)) {
		if (pass != PASS_SCAN) {
			note("invalid checksum of the descriptor block of transaction %u", c->tid);
			rp->log_error = true;
			return EXT2_ET_BAD_CRC;
		}
		/* the scan may be meeting a stale log: the commit time decides */
		c->check_commit_time = true;
	}
	bool sum = pass == PASS_SCAN && jbd_fmt_crc32_commit(&j->fmt) && !c->check_commit_time &&
		   !rp->end_fixed;
	if (sum)
		c->crc = jbd_crc32_be(c->crc, d, j->bs);
	unsigned off = JBD_HDR;
	struct jbd_tag t;
	while (jbd_tag_get(&j->fmt, d, &off, &t)) {
		uint32_t lblk = c->blk;
		c->blk = log_next(j, c->blk);
		c->walked++;
		errcode_t err = 0;
		if (sum) {
			err = read_log(j, lblk, rp->data);
			if (!err)
				c->crc = jbd_crc32_be(c->crc, rp->data, j->bs);
		} else if (pass == PASS_CHECK || pass == PASS_REPLAY) {
			err = replay_tag(j, pass, rp, lblk, &t, c->tid);
		}
		if (err)
			return err;
		if (t.flags & JBD_TAG_LAST)
			break;
	}
	return 0;
}

/* A commit block (in rp->buf): the transaction is complete unless the scan
 * finds its checksum, or one of its blocks', failing. */
static errcode_t on_commit(struct jbd *j, enum pass pass, struct replay *rp, struct cursor *c)
{
	const unsigned char *b = rp->buf;
	uint64_t when = jbd_commit_sec(b);
	if (c->check_commit_time) {
		/* commit times going back: stale blocks of an earlier log end
		 * this one; otherwise the log itself is damaged */
		if (when >= c->last_commit) {
			note("invalid checksum found in transaction %u", c->tid);
			rp->log_error = true;
			return EXT2_ET_BAD_CRC;
		}
		c->stop = true;
		return 0;
	}
	if (pass == PASS_SCAN) {
		if (jbd_fmt_crc32_commit(&j->fmt) && rp->end_fixed) {
			rp->corrupt_commit = true;
			c->stop = true;
			return 0;
		}
		bool ok = jbd_commit_ok(&j->fmt, b, c->crc);
		c->crc = ~0u;
		if (!ok) {
			if (when < c->last_commit) {
				c->stop = true;
				return 0;
			}
			rp->end = c->tid;
			rp->end_fixed = true;
			/* an asynchronous commit may be torn: later ones still count */
			if (!(j->fmt.incompat & JBD_INCOMPAT_ASYNC)) {
				rp->corrupt_commit = true;
				c->stop = true;
				return 0;
			}
		}
		c->last_commit = when;
	}
	c->tid++;
	return 0;
}

/* A revoke block (in rp->buf): its records count in PASS_REVOKE. */
static errcode_t on_revoke(struct jbd *j, enum pass pass, struct replay *rp, struct cursor *c)
{
	const unsigned char *b = rp->buf;
	if (pass == PASS_SCAN && !jbd_tail_ok(&j->fmt, b))
		c->check_commit_time = true;
	if (pass != PASS_REVOKE)
		return 0;
	size_t n;
	if (!jbd_revoke_count(&j->fmt, b, &n)) {
		note("revoke block of transaction %u: r_count %u overruns the block", c->tid,
		     jbd_be32(b + JBD_HDR));
		rp->log_error = true;
		return EXT2_ET_CORRUPT_JOURNAL_SB;
	}
	for (size_t i = 0; i < n; i++) {
		errcode_t err = revoke_set(&rp->rv, jbd_revoke_rec(&j->fmt, b, i), c->tid);
		if (err)
			return err;
	}
	return 0;
}

/* One walk of the log from s_start, as the kernel's do_one_pass: it ends at
 * a block that is not the next expected one (bad magic, unexpected tid,
 * unknown type), where a checksum says so, and in the later passes at the
 * end the scan found. */
static errcode_t walk(struct jbd *j, enum pass pass, struct replay *rp)
{
	struct cursor c = { .tid = rp->start, .blk = jbd_be32(j->sb + JSB_START), .crc = ~0u };
	/* a descriptor whose tags run the whole circle without a commit must
	 * not loop forever: a real transaction never spans the log */
	uint64_t limit = log_len(j);
	while (!c.stop) {
		if (pass != PASS_SCAN && !tid_gt(rp->end, c.tid))
			break;
		if (c.walked++ >= limit)
			break;
		errcode_t err = read_log(j, c.blk, rp->buf);
		if (err)
			return err;
		uint32_t type, tid;
		if (!jbd_hdr_get(rp->buf, &type, &tid) || tid != c.tid)
			break;
		c.blk = log_next(j, c.blk);
		if (type == JBD_DESCRIPTOR)
			err = on_descriptor(j, pass, rp, &c);
		else if (type == JBD_COMMIT)
			err = on_commit(j, pass, rp, &c);
		else if (type == JBD_REVOKE)
			err = on_revoke(j, pass, rp, &c);
		else
			break;
		if (err)
			return err;
	}
	if (pass == PASS_SCAN) {
		if (!rp->end_fixed)
			rp->end = c.tid;
	} else if (c.tid != rp->end) {
		note("recovery pass %d ended at transaction %u, the scan at %u", (int)pass, c.tid,
		     rp->end);
		rp->log_error = true;
		return EXT2_ET_CORRUPT_JOURNAL_SB;
	}
	return 0;
}

/* Whether the fast-commit area holds a fast commit that follows the last
 * full commit (the kernel replays it after the log). */
static errcode_t fast_commits_pending(struct jbd *j, struct replay *rp, bool *pending)
{
	*pending = false;
	if (!j->fc_first || j->fc_first >= jbd_be32(j->sb + JSB_MAXLEN))
		return 0;
	errcode_t err = read_log(j, j->fc_first, rp->buf);
	uint32_t tid;
	if (!err)
		*pending = jbd_fc_head_tid(rp->buf, j->bs, &tid) && tid == rp->end;
	return err;
}

/* After the scan: what the kernel would refuse in this log.  A replay onto
 * the disk refuses it (nothing written yet); a view goes on and says so
 * afterwards.  0 or the error to fail with. */
static errcode_t judge(struct jbd *j, struct replay *rp, bool fc_pending)
{
	if (rp->bad_home)
		return EXT2_ET_BAD_BLOCK_NUM;
	if (j->dev.view)
		return 0;
	if (rp->corrupt_commit)
		note("transaction %u has a corrupt commit block", rp->end);
	if (rp->bad_data)
		note("%u logged block(s) fail their checksum", rp->bad_data);
	if (fc_pending)
		note("fast commits after transaction %u need replay, which recon-fuse does not do",
		     rp->end - 1);
	if (rp->corrupt_commit || rp->bad_data) {
		note("the log is not replayed (the kernel refuses to mount this file system): run "
		     "e2fsck, or mount read-only (-o ro) to see what can be replayed");
		return EXT2_ET_BAD_CRC;
	}
	if (fc_pending) {
		note("the log is not replayed: replay it with e2fsck (or the kernel), or mount "
		     "read-only (-o ro) to see the full commits replayed");
		return EXT2_ET_UNSUPP_FEATURE;
	}
	return 0;
}

/* A view's account of what it left out. */
static void view_notes(const struct replay *rp, bool fc_pending, bool discarded)
{
	const char *why = "the kernel refuses to mount this file system; run e2fsck -f";
	if (discarded)
		note("nothing of the log replayed, as e2fsck does with such a log (%s)", why);
	if (rp->corrupt_commit)
		note("transaction %u is corrupt: replayed up to it, as e2fsck does (%s)", rp->end, why);
	if (rp->bad_data)
		note("%u logged block(s) failed their checksum and were not replayed, as e2fsck does "
		     "(%s)", rp->bad_data, why);
	if (fc_pending)
		note("fast commits after transaction %u were not replayed (recon-fuse replays full "
		     "commits only): what is shown lacks the last changes e2fsck or the kernel would "
		     "replay", rp->end - 1);
}

/* The replay is home: mark the log empty, durably (flush before and after:
 * the blocks home before the superblock says so, and that before the file
 * system's needs_recovery is cleared).  Fast commits are off after a
 * recovery, as the kernel turns them off. */
static errcode_t mark_recovered(struct jbd *j, uint32_t end)
{
	errcode_t err = flush(j);
	if (err)
		return err;
	if (j->fc_first) {
		j->fmt.incompat &= ~JBD_INCOMPAT_FAST_COMMIT;
		jbd_put_be32(j->sb + JSB_INCOMPAT, jbd_be32(j->sb + JSB_INCOMPAT) &
						   ~JBD_INCOMPAT_FAST_COMMIT);
		j->last = jbd_be32(j->sb + JSB_MAXLEN);
		j->fc_first = 0;
	}
	err = write_sb(j, 0, end + 1);
	if (!err)
		err = flush(j);
	if (err)
		return err;
	j->head = j->first;
	j->seq = end + 1;
	j->live = false;
	return 0;
}

errcode_t jbd_recover(struct jbd *j, unsigned *replayed)
{
	if (replayed)
		*replayed = 0;
	if (j->failed)
		return EIO;
	if (!jbd_needs_recovery(j))
		return 0;
	struct replay rp = { .start = jbd_be32(j->sb + JSB_SEQUENCE) };
	rp.buf = malloc(j->bs);
	rp.data = malloc(j->bs);
	errcode_t err = rp.buf && rp.data ? 0 : ENOMEM;
	bool fc_pending = false, discarded = false;
	if (!err)
		err = walk(j, PASS_SCAN, &rp);
	if (!err)
		err = walk(j, PASS_REVOKE, &rp);
	if (!err)
		err = walk(j, PASS_CHECK, &rp);
	if (err && rp.log_error && j->dev.view) {
		/* e2fsck's way with a log its recovery fails on: drop it */
		discarded = true;
		err = 0;
		rp.end = rp.start;
	}
	if (!err && !discarded)
		err = fast_commits_pending(j, &rp, &fc_pending);
	if (!err && !discarded)
		err = judge(j, &rp, fc_pending);
	if (!err && !discarded)
		err = walk(j, PASS_REPLAY, &rp);
	if (!err && j->dev.view)
		view_notes(&rp, fc_pending, discarded);
	if (!err)
		err = mark_recovered(j, rp.end);
	if (err) {
		/* the log stays as it is for e2fsck */
		j->failed = true;
	} else if (replayed) {
		*replayed = discarded ? 0 : rp.end - rp.start;
	}
	free(rp.rv.key);
	free(rp.rv.tid);
	free(rp.buf);
	free(rp.data);
	return err;
}

/* ---- logging ---- */

/* Make room for need log blocks at the head: they must not overwrite a
 * transaction replay may still start from. */
static errcode_t make_room(struct jbd *j, uint64_t need)
{
	for (int attempt = 0;; attempt++) {
		uint32_t used = 0;
		if (j->live)
			used = behind_head(j, j->tail);
		uint32_t u = behind_head(j, j->sb_start);
		if (u > used)
			used = u;
		if (j->sb_unflushed) {
			u = behind_head(j, j->sb_durable);
			if (u > used)
				used = u;
		}
		if (need + used < log_len(j))
			return 0;
		if (attempt > 0 || !j->sb_unflushed)
			return ENOSPC;   /* the caller has not checkpointed */
		/* the superblock that no longer needs the old blocks is written but
		 * maybe not durable: make it so */
		errcode_t err = flush(j);
		if (err) {
			j->failed = true;
			return err;
		}
	}
}

/* The total blocks of transaction tid in buf, in log order: revoke blocks
 * (as the kernel writes them, first), then each descriptor followed by the
 * blocks it tags, then the commit block; all in the journal's format. */
static void build_transaction(const struct jbd *j, unsigned char *buf, uint32_t tid,
			      const uint64_t *blk, const void *const *data, size_t n,
			      const uint64_t *revoke, size_t nrevoke)
{
	const struct jbd_fmt *f = &j->fmt;
	size_t bs = j->bs, k = 0;   /* k: next block of buf */
	unsigned rpb = jbd_revokes_per_block(f);
	/* buf is not zeroed: the revoke and commit blocks zero themselves,
	 * each descriptor is zeroed below, the logged copies overwrite all */
	for (size_t i = 0; i < nrevoke; i += rpb, k++)
		jbd_revoke_put(f, buf + k * bs, tid, revoke + i, nrevoke - i < rpb ? nrevoke - i : rpb);
	unsigned tpd = jbd_tags_per_descriptor(f);
	uint32_t crc = ~0u;   /* checksum v1: CRC32 of descriptors and logged blocks */
	for (size_t i = 0; i < n; i += tpd) {
		unsigned char *d = buf + k++ * bs;
		size_t cnt = n - i < tpd ? n - i : tpd;
		memset(d, 0, bs);
		jbd_hdr_put(d, JBD_DESCRIPTOR, tid);
		unsigned off = JBD_HDR;
		for (size_t t = 0; t < cnt; t++) {
			unsigned char *b = buf + (k + t) * bs;
			memcpy(b, data[i + t], bs);
			struct jbd_tag tag = { .blk = blk[i + t] };
			if (jbd_be32(b) == JBD_MAGIC) {
				memset(b, 0, 4);
				tag.flags |= JBD_TAG_ESCAPE;
			}
			if (t > 0)
				tag.flags |= JBD_TAG_SAME_UUID;
			if (t + 1 == cnt)
				tag.flags |= JBD_TAG_LAST;
			tag.csum = jbd_tag_csum(f, tid, b);
			jbd_tag_put(f, d, &off, &tag);
		}
		jbd_tail_set(f, d);
		if (jbd_fmt_crc32_commit(f))
			for (size_t t = 0; t <= cnt; t++)
				crc = jbd_crc32_be(crc, d + t * bs, bs);
		k += cnt;
	}
	struct timespec now = { 0 };
	clock_gettime(CLOCK_REALTIME, &now);
	jbd_commit_put(f, buf + k * bs, tid, (uint64_t)now.tv_sec, (uint32_t)now.tv_nsec, crc);
}

/* Room for `total` log blocks (not zeroed): the kept buffer when it is
 * large enough, else a new one, kept in its place if not too large. */
static unsigned char *log_buffer(struct jbd *j, uint64_t total)
{
	if (total <= j->logbuf_blocks)
		return j->logbuf;
	unsigned char *buf = malloc(total * j->bs);
	if (buf && total * j->bs <= LOGBUF_KEEP_BYTES) {
		free(j->logbuf);
		j->logbuf = buf;
		j->logbuf_blocks = total;
	}
	return buf;
}

static void log_buffer_done(struct jbd *j, unsigned char *buf)
{
	if (buf != j->logbuf)
		free(buf);
}

errcode_t jbd_log(struct jbd *j, const uint64_t *blk, const void *const *data, size_t n,
		  const uint64_t *revoke, size_t nrevoke)
{
	if (j->failed)
		return EIO;
	if (jbd_needs_recovery(j))
		return EXT2_ET_JOURNAL_FLAGS_WRONG;   /* replay first */
	if (n == 0 && nrevoke == 0)
		return 0;
	uint64_t widest = jbd_fmt_64bit(&j->fmt) ? UINT64_MAX : UINT32_MAX;
	for (size_t i = 0; i < n; i++)
		if (blk[i] >= j->fs_blocks || blk[i] > widest)
			return EXT2_ET_BAD_BLOCK_NUM;
	for (size_t i = 0; i < nrevoke; i++)
		if (revoke[i] >= j->fs_blocks || revoke[i] > widest)
			return EXT2_ET_BAD_BLOCK_NUM;
	bool set_revoke_feature = false;
	if (nrevoke) {
		if (!j->fmt.v2)
			return EXT2_ET_UNSUPP_FEATURE;   /* v1 journals cannot carry revokes */
		set_revoke_feature = !(j->fmt.incompat & JBD_INCOMPAT_REVOKE);
	}
	uint64_t total = transaction_blocks(&j->fmt, n, nrevoke);
	if (total >= log_len(j))
		return EFBIG;
	errcode_t err = make_room(j, total);
	if (err)
		return err;

	unsigned char *buf = log_buffer(j, total);
	uint32_t *pos = malloc(total * sizeof(*pos));
	if (!buf || !pos) {
		log_buffer_done(j, buf);
		free(pos);
		return ENOMEM;
	}
	uint32_t tid = j->seq, start = j->head;
	size_t k = 0;
	for (uint32_t p = start; k < total; k++, p = log_next(j, p))
		pos[k] = p;
	build_transaction(j, buf, tid, blk, data, n, revoke, nrevoke);
	const unsigned char *commit = buf + (total - 1) * (size_t)j->bs;

	/* the superblock names this transaction (when the log was empty) before
	 * the flush that precedes its commit block */
	if (!j->live || set_revoke_feature) {
		if (set_revoke_feature) {
			j->fmt.incompat |= JBD_INCOMPAT_REVOKE;
			jbd_put_be32(j->sb + JSB_INCOMPAT, j->fmt.incompat);
		}
		err = j->live ? write_sb(j, j->tail, j->tail_seq) : write_sb(j, start, tid);
	}
	if (!err)
		err = write_log(j, pos, total - 1, buf);
	if (!err)
		err = flush(j);
	if (!err)
		err = write_log(j, pos + total - 1, 1, commit);
	if (!err)
		err = flush(j);
	log_buffer_done(j, buf);
	free(pos);
	if (err) {
		j->failed = true;
		return err;
	}
	if (!j->live) {
		j->live = true;
		j->tail = start;
		j->tail_seq = tid;
	}
	j->head = start;
	for (uint64_t i = 0; i < total; i++)
		j->head = log_next(j, j->head);
	j->seq = tid + 1;
	return 0;
}

errcode_t jbd_checkpointed(struct jbd *j)
{
	if (j->failed)
		return EIO;
	if (!j->live)
		return 0;
	j->live = false;
	errcode_t err = write_sb(j, 0, j->seq);
	if (err)
		j->failed = true;
	return err;
}
