/*
 * io/jbd.c - the ext3 journal in the JBD on-disk format (see jbd.h).
 *
 * Format (all journal fields big-endian), as the kernel's jbd/jbd2 and
 * e2fsck read it, restricted to what mke2fs -t ext3 makes: 32-bit block tags,
 * no checksums, no async commit.
 *   every log block but data blocks starts with a header:
 *     magic 0xc03b3998, block type, transaction sequence (tid)
 *   superblock (type 3 = v1, 4 = v2) at journal block 0: block size, length,
 *     first log block, s_sequence (first tid to replay), s_start (first log
 *     block to replay; 0 = the log is empty), features, uuid
 *   descriptor (type 1): 8-byte tags {home block, flags}, the first tag of
 *     each descriptor followed by the 16-byte uuid, the others flagged
 *     SAME_UUID, the last one LAST_TAG; the tagged blocks follow it in the
 *     log, a block that would start with the magic stored with those 4 bytes
 *     zeroed and the tag flagged ESCAPE
 *   revoke (type 5): r_count (bytes used, header included), 4-byte block
 *     numbers: copies of those blocks in transactions up to this one are not
 *     replayed
 *   commit (type 2): the transaction is complete
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

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define JBD_MAGIC 0xc03b3998U

enum { BT_DESCRIPTOR = 1, BT_COMMIT = 2, BT_SB_V1 = 3, BT_SB_V2 = 4, BT_REVOKE = 5 };

enum { TAG_ESCAPE = 1, TAG_SAME_UUID = 2, TAG_DELETED = 4, TAG_LAST = 8 };

/* journal superblock features */
#define JFEAT_COMPAT_CHECKSUM      0x00000001u
#define JFEAT_INCOMPAT_REVOKE      0x00000001u
#define JFEAT_INCOMPAT_64BIT       0x00000002u
#define JFEAT_INCOMPAT_ASYNC       0x00000004u
#define JFEAT_INCOMPAT_CSUM_V2     0x00000008u
#define JFEAT_INCOMPAT_CSUM_V3     0x00000010u
#define JFEAT_INCOMPAT_FAST_COMMIT 0x00000020u

/* byte offsets */
enum {
	H_MAGIC = 0, H_BLOCKTYPE = 4, H_SEQUENCE = 8, HDR_SIZE = 12,
	SB_BLOCKSIZE = 0x0C, SB_MAXLEN = 0x10, SB_FIRST = 0x14, SB_SEQUENCE = 0x18,
	SB_START = 0x1C, SB_ERRNO = 0x20, SB_COMPAT = 0x24, SB_INCOMPAT = 0x28,
	SB_RO_COMPAT = 0x2C, SB_UUID = 0x30, SB_NR_USERS = 0x40,
	TAG_BLOCKNR = 0, TAG_FLAGS = 6, TAG_SIZE = 8, UUID_SIZE = 16,
	REVOKE_COUNT = 12, REVOKE_HDR = 16, REVOKE_REC = 4,
	COMMIT_SEC = 0x30, COMMIT_NSEC = 0x38,
};

#define JBD_MAX_USERS 48

struct revoke_tab {
	uint64_t *key;   /* block + 1; 0 = empty slot */
	uint32_t *tid;
	size_t cap, count;
};

struct jbd {
	struct jbd_dev dev;
	unsigned bs;
	uint64_t fs_blocks;
	uint32_t first, maxlen;   /* log blocks are [first, maxlen) */
	uint64_t *map;            /* journal block -> file-system block */
	unsigned char *sb;        /* the journal superblock block, as on disk */
	bool v2;

	uint32_t head;            /* next log block to write */
	uint32_t seq;             /* tid of the next transaction */
	bool live;                /* something logged is not checkpointed yet */
	uint32_t tail, tail_seq;  /* oldest transaction not checkpointed (if live) */

	uint32_t sb_start;        /* s_start last written (0 = empty) */
	uint32_t sb_durable;      /* s_start at the last flush */
	bool sb_unflushed;        /* sb_start written since the last flush */
	bool failed;              /* an I/O error left the log in an unknown state */
};

static uint32_t get_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint16_t get_be16(const unsigned char *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static void put_be16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)(v >> 8);
	p[1] = (unsigned char)v;
}

static void put_be64(unsigned char *p, uint64_t v)
{
	put_be32(p, (uint32_t)(v >> 32));
	put_be32(p + 4, (uint32_t)v);
}

static void put_header(unsigned char *b, uint32_t type, uint32_t tid)
{
	put_be32(b + H_MAGIC, JBD_MAGIC);
	put_be32(b + H_BLOCKTYPE, type);
	put_be32(b + H_SEQUENCE, tid);
}

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
	return j->maxlen - j->first;
}

static uint32_t log_next(const struct jbd *j, uint32_t b)
{
	return b + 1 >= j->maxlen ? j->first : b + 1;
}

/* Log blocks from p up to the head, p being where some transaction began
 * (0: none). */
static uint32_t behind_head(const struct jbd *j, uint32_t p)
{
	if (p == 0)
		return 0;
	return (j->head + log_len(j) - p) % log_len(j);
}

static unsigned tags_per_descriptor(unsigned bs)
{
	/* header, first tag + uuid, then plain tags */
	return 1 + (bs - HDR_SIZE - TAG_SIZE - UUID_SIZE) / TAG_SIZE;
}

static unsigned records_per_revoke(unsigned bs)
{
	return (bs - REVOKE_HDR) / REVOKE_REC;
}

static uint64_t div_up(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

/* Log blocks one transaction of n blocks and nrevoke revoke records takes. */
static uint64_t transaction_blocks(unsigned bs, uint64_t n, uint64_t nrevoke)
{
	return div_up(n, tags_per_descriptor(bs)) + n + div_up(nrevoke, records_per_revoke(bs)) + 1;
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
	put_be32(j->sb + SB_START, start);
	put_be32(j->sb + SB_SEQUENCE, seq);
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

/* map[l] = the file-system block of journal block l (0 for a hole). */
static errcode_t map_journal(ext2_filsys fs, struct ext2_inode *inode, uint64_t *map, uint64_t n)
{
	char *block_buf = malloc(3 * (size_t)fs->blocksize);
	if (!block_buf)
		return ENOMEM;
	errcode_t err = 0;
	for (uint64_t l = 0; l < n && !err; l++) {
		blk64_t phys = 0;
		err = ext2fs_bmap2(fs, fs->super->s_journal_inum, inode, block_buf, 0, l, NULL, &phys);
		map[l] = phys;
	}
	free(block_buf);
	return err;
}

static errcode_t check_sb(struct jbd *j, uint64_t mapped, char *msg, size_t msglen)
{
	const unsigned char *sb = j->sb;
	if (get_be32(sb + H_MAGIC) != JBD_MAGIC) {
		say(msg, msglen, "journal superblock has a bad magic number (0x%08x)",
		    get_be32(sb + H_MAGIC));
		return EXT2_ET_CORRUPT_JOURNAL_SB;
	}
	uint32_t type = get_be32(sb + H_BLOCKTYPE);
	if (type != BT_SB_V1 && type != BT_SB_V2) {
		say(msg, msglen, "journal superblock has an unknown type %u", type);
		return EXT2_ET_JOURNAL_UNSUPP_VERSION;
	}
	j->v2 = type == BT_SB_V2;
	uint32_t bs = get_be32(sb + SB_BLOCKSIZE);
	if (bs != j->bs) {
		say(msg, msglen, "journal block size %u differs from the file system's %u", bs, j->bs);
		return EXT2_ET_CORRUPT_JOURNAL_SB;
	}
	uint32_t maxlen = get_be32(sb + SB_MAXLEN), first = get_be32(sb + SB_FIRST);
	if (maxlen > mapped) {
		say(msg, msglen, "journal superblock claims %u blocks, the journal inode has %llu",
		    maxlen, (unsigned long long)mapped);
		return EXT2_ET_CORRUPT_JOURNAL_SB;
	}
	/* room for the superblock and at least a small transaction */
	if (first < 1 || first >= maxlen || maxlen - first < 8) {
		say(msg, msglen, "journal superblock has a bad log range [%u, %u)", first, maxlen);
		return EXT2_ET_CORRUPT_JOURNAL_SB;
	}
	j->first = first;
	j->maxlen = maxlen;
	uint32_t start = get_be32(sb + SB_START);
	if (start != 0 && (start < first || start >= maxlen)) {
		say(msg, msglen, "journal superblock's log start %u is outside [%u, %u)", start, first,
		    maxlen);
		return EXT2_ET_CORRUPT_JOURNAL_SB;
	}
	if (!j->v2)
		return 0;
	uint32_t compat = get_be32(sb + SB_COMPAT), incompat = get_be32(sb + SB_INCOMPAT);
	uint32_t ro_compat = get_be32(sb + SB_RO_COMPAT);
	if (incompat & JFEAT_INCOMPAT_64BIT) {
		say(msg, msglen, "journal feature 64bit (64-bit block tags) is not supported");
		return EXT2_ET_UNSUPP_FEATURE;
	}
	if (incompat & (JFEAT_INCOMPAT_CSUM_V2 | JFEAT_INCOMPAT_CSUM_V3)) {
		say(msg, msglen, "journal feature journal_checksum_v%d is not supported",
		    incompat & JFEAT_INCOMPAT_CSUM_V3 ? 3 : 2);
		return EXT2_ET_UNSUPP_FEATURE;
	}
	if (incompat & JFEAT_INCOMPAT_ASYNC) {
		say(msg, msglen, "journal feature journal_async_commit is not supported");
		return EXT2_ET_UNSUPP_FEATURE;
	}
	if (incompat & JFEAT_INCOMPAT_FAST_COMMIT) {
		say(msg, msglen, "journal feature fast_commit is not supported");
		return EXT2_ET_UNSUPP_FEATURE;
	}
	if (incompat & ~JFEAT_INCOMPAT_REVOKE) {
		say(msg, msglen, "journal has unknown incompatible features 0x%x",
		    incompat & ~JFEAT_INCOMPAT_REVOKE);
		return EXT2_ET_UNSUPP_FEATURE;
	}
	if (compat & JFEAT_COMPAT_CHECKSUM) {
		say(msg, msglen, "journal feature journal_checksum (v1 commit checksums) is not supported");
		return EXT2_ET_UNSUPP_FEATURE;
	}
	if (ro_compat) {
		say(msg, msglen, "journal has unknown read-only features 0x%x", ro_compat);
		return EXT2_ET_RO_UNSUPP_FEATURE;
	}
	if (get_be32(sb + SB_NR_USERS) > JBD_MAX_USERS) {
		say(msg, msglen, "journal superblock has %u users (at most %d)",
		    get_be32(sb + SB_NR_USERS), JBD_MAX_USERS);
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

	struct jbd *j = calloc(1, sizeof(*j));
	if (!j)
		return ENOMEM;
	j->dev = *dev;
	j->bs = fs->blocksize;
	j->fs_blocks = ext2fs_blocks_count(fs->super);
	j->map = calloc(nblocks, sizeof(*j->map));
	j->sb = malloc(j->bs);
	if (!j->map || !j->sb) {
		err = ENOMEM;
		goto fail;
	}
	err = map_journal(fs, &inode, j->map, nblocks);
	if (err) {
		say(msg, msglen, "mapping the journal inode: %s", error_message(err));
		goto fail;
	}
	if (j->map[0] == 0 || j->map[0] >= j->fs_blocks) {
		say(msg, msglen, "journal superblock is not mapped");
		err = EXT2_ET_NO_JOURNAL_SB;
		goto fail;
	}
	err = j->dev.read_blk(j->dev.ctx, j->map[0], j->sb);
	if (err) {
		say(msg, msglen, "reading the journal superblock: %s", error_message(err));
		goto fail;
	}
	err = check_sb(j, nblocks, msg, msglen);
	if (err)
		goto fail;
	for (uint32_t b = 0; b < j->maxlen; b++)
		if (j->map[b] < fs->super->s_first_data_block || j->map[b] >= j->fs_blocks) {
			say(msg, msglen, "journal block %u is %s", b,
			    j->map[b] ? "outside the file system" : "a hole");
			err = EXT2_ET_CORRUPT_JOURNAL_SB;
			goto fail;
		}
	j->head = j->first;
	/* as the kernel does on load: a clean log's next tid is one past
	 * s_sequence, so nothing a crashed writer may have left matches */
	j->seq = get_be32(j->sb + SB_SEQUENCE) + 1;
	j->sb_start = j->sb_durable = get_be32(j->sb + SB_START);
	*out = j;
	return 0;
fail:
	free(j->map);
	free(j->sb);
	free(j);
	return err;
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
	free(j->map);
	free(j->sb);
	free(j);
}

bool jbd_needs_recovery(const struct jbd *j)
{
	return !j->live && j->sb_start != 0;
}

uint32_t jbd_max_transaction_blocks(const struct jbd *j)
{
	/* a transaction must fit the empty log with one block to spare, with
	 * room for revoking as many blocks as this and the previous one logged */
	uint64_t budget = log_len(j) - 1, lo = 0, hi = budget;
	while (lo < hi) {
		uint64_t mid = (lo + hi + 1) / 2;
		if (transaction_blocks(j->bs, mid, 2 * mid) <= budget)
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

enum pass { PASS_SCAN, PASS_REVOKE, PASS_REPLAY };

struct replay {
	uint32_t end;           /* first tid not complete (found by PASS_SCAN) */
	struct revoke_tab rv;
	unsigned char *buf, *data;
	errcode_t bad_home;     /* a tag named a block outside the file system */
};

static errcode_t replay_tag(struct jbd *j, struct replay *rp, uint32_t lblk, uint64_t home,
			    uint16_t flags, uint32_t tid)
{
	if (revoked(&rp->rv, home, tid))
		return 0;
	if (home >= j->fs_blocks) {
		rp->bad_home = EXT2_ET_BAD_BLOCK_NUM;
		return 0;
	}
	errcode_t err = read_log(j, lblk, rp->data);
	if (err)
		return err;
	if (flags & TAG_ESCAPE)
		put_be32(rp->data, JBD_MAGIC);
	return j->dev.write_blks(j->dev.ctx, home, 1, rp->data);
}

/* One walk of the log from s_start, as the kernel's do_one_pass: stops at a
 * block that is not the next expected one (bad magic, unexpected tid,
 * unknown type), and in the later passes at the end the scan found. */
static errcode_t walk(struct jbd *j, enum pass pass, struct replay *rp)
{
	uint32_t tid = get_be32(j->sb + SB_SEQUENCE);
	uint32_t blk = get_be32(j->sb + SB_START);
	/* a descriptor whose tags run the whole circle without a commit must
	 * not loop forever: a real transaction never spans the log */
	uint64_t walked = 0, limit = log_len(j);
	for (;;) {
		if (pass != PASS_SCAN && !tid_gt(rp->end, tid))
			break;
		if (walked++ >= limit)
			break;
		errcode_t err = read_log(j, blk, rp->buf);
		if (err)
			return err;
		const unsigned char *b = rp->buf;
		if (get_be32(b + H_MAGIC) != JBD_MAGIC || get_be32(b + H_SEQUENCE) != tid)
			break;
		uint32_t type = get_be32(b + H_BLOCKTYPE);
		blk = log_next(j, blk);
		if (type == BT_DESCRIPTOR) {
			unsigned off = HDR_SIZE;
			while (off + TAG_SIZE <= j->bs) {
				uint64_t home = get_be32(b + off + TAG_BLOCKNR);
				uint16_t flags = get_be16(b + off + TAG_FLAGS);
				off += TAG_SIZE;
				if (!(flags & TAG_SAME_UUID))
					off += UUID_SIZE;
				if (pass == PASS_REPLAY) {
					err = replay_tag(j, rp, blk, home, flags, tid);
					if (err)
						return err;
				}
				blk = log_next(j, blk);
				walked++;
				if (flags & TAG_LAST)
					break;
			}
		} else if (type == BT_COMMIT) {
			tid++;
		} else if (type == BT_REVOKE) {
			if (pass != PASS_REVOKE)
				continue;
			uint32_t count = get_be32(b + REVOKE_COUNT);
			if (count > j->bs)
				return EXT2_ET_CORRUPT_JOURNAL_SB;
			for (uint32_t off = REVOKE_HDR; off + REVOKE_REC <= count; off += REVOKE_REC) {
				err = revoke_set(&rp->rv, get_be32(b + off), tid);
				if (err)
					return err;
			}
		} else {
			break;
		}
	}
	if (pass == PASS_SCAN)
		rp->end = tid;
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
	uint32_t tid0 = get_be32(j->sb + SB_SEQUENCE);
	struct replay rp = { 0 };
	rp.buf = malloc(j->bs);
	rp.data = malloc(j->bs);
	errcode_t err = 0;
	if (!rp.buf || !rp.data) {
		err = ENOMEM;
		goto out;
	}
	err = walk(j, PASS_SCAN, &rp);
	if (!err)
		err = walk(j, PASS_REVOKE, &rp);
	if (!err)
		err = walk(j, PASS_REPLAY, &rp);
	if (!err)
		err = rp.bad_home;
	if (err) {
		/* the log stays as it is for e2fsck */
		j->failed = true;
		goto out;
	}
	/* the replayed blocks are home before the log is marked empty */
	err = flush(j);
	if (!err)
		err = write_sb(j, 0, rp.end + 1);
	if (!err)
		err = flush(j);
	if (err) {
		j->failed = true;
		goto out;
	}
	if (replayed)
		*replayed = rp.end - tid0;
	j->head = j->first;
	j->seq = rp.end + 1;
	j->live = false;
out:
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

errcode_t jbd_log(struct jbd *j, const uint64_t *blk, const void *const *data, size_t n,
		  const uint64_t *revoke, size_t nrevoke)
{
	if (j->failed)
		return EIO;
	if (jbd_needs_recovery(j))
		return EXT2_ET_JOURNAL_FLAGS_WRONG;   /* replay first */
	if (n == 0 && nrevoke == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (blk[i] >= j->fs_blocks || blk[i] > UINT32_MAX)
			return EXT2_ET_BAD_BLOCK_NUM;
	for (size_t i = 0; i < nrevoke; i++)
		if (revoke[i] >= j->fs_blocks || revoke[i] > UINT32_MAX)
			return EXT2_ET_BAD_BLOCK_NUM;
	bool set_revoke_feature = false;
	if (nrevoke) {
		if (!j->v2)
			return EXT2_ET_UNSUPP_FEATURE;   /* v1 journals cannot carry revokes */
		set_revoke_feature = !(get_be32(j->sb + SB_INCOMPAT) & JFEAT_INCOMPAT_REVOKE);
	}
	uint64_t total = transaction_blocks(j->bs, n, nrevoke);
	if (total >= log_len(j))
		return EFBIG;
	errcode_t err = make_room(j, total);
	if (err)
		return err;

	unsigned bs = j->bs;
	unsigned char *buf = calloc(total, bs);
	uint32_t *pos = malloc(total * sizeof(*pos));
	if (!buf || !pos) {
		free(buf);
		free(pos);
		return ENOMEM;
	}
	uint32_t tid = j->seq, start = j->head;
	size_t k = 0;   /* next block of buf */
	for (uint32_t p = start; k < total; k++, p = log_next(j, p))
		pos[k] = p;
	k = 0;

	/* revoke records first, as the kernel writes them */
	unsigned rpb = records_per_revoke(bs);
	for (size_t i = 0; i < nrevoke; i += rpb) {
		unsigned char *b = buf + k++ * (size_t)bs;
		size_t cnt = nrevoke - i < rpb ? nrevoke - i : rpb;
		put_header(b, BT_REVOKE, tid);
		put_be32(b + REVOKE_COUNT, (uint32_t)(REVOKE_HDR + cnt * REVOKE_REC));
		for (size_t r = 0; r < cnt; r++)
			put_be32(b + REVOKE_HDR + r * REVOKE_REC, (uint32_t)revoke[i + r]);
	}
	unsigned tpd = tags_per_descriptor(bs);
	for (size_t i = 0; i < n; i += tpd) {
		unsigned char *d = buf + k++ * (size_t)bs;
		size_t cnt = n - i < tpd ? n - i : tpd;
		put_header(d, BT_DESCRIPTOR, tid);
		unsigned off = HDR_SIZE;
		for (size_t t = 0; t < cnt; t++) {
			unsigned char *b = buf + k++ * (size_t)bs;
			memcpy(b, data[i + t], bs);
			uint16_t flags = 0;
			if (get_be32(b) == JBD_MAGIC) {
				memset(b, 0, 4);
				flags |= TAG_ESCAPE;
			}
			if (t > 0)
				flags |= TAG_SAME_UUID;
			if (t + 1 == cnt)
				flags |= TAG_LAST;
			put_be32(d + off + TAG_BLOCKNR, (uint32_t)blk[i + t]);
			put_be16(d + off + TAG_FLAGS, flags);
			off += TAG_SIZE;
			if (t == 0) {
				memcpy(d + off, j->sb + SB_UUID, UUID_SIZE);
				off += UUID_SIZE;
			}
		}
	}
	unsigned char *commit = buf + k++ * (size_t)bs;
	put_header(commit, BT_COMMIT, tid);
	struct timespec now;
	if (clock_gettime(CLOCK_REALTIME, &now) == 0) {
		put_be64(commit + COMMIT_SEC, (uint64_t)now.tv_sec);
		put_be32(commit + COMMIT_NSEC, (uint32_t)now.tv_nsec);
	}

	/* the superblock names this transaction (when the log was empty) before
	 * the flush that precedes its commit block */
	if (!j->live || set_revoke_feature) {
		if (set_revoke_feature)
			put_be32(j->sb + SB_INCOMPAT,
				 get_be32(j->sb + SB_INCOMPAT) | JFEAT_INCOMPAT_REVOKE);
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
	free(buf);
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
