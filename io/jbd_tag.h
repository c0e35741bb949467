/*
 * io/jbd_tag.h - internal to io/ (io/jbd.c and the jbd tests include it).
 *
 * The jbd2 on-disk format, encoded and decoded in this one place, for every
 * variant the journal superblock's features select: descriptor tags of 8, 10,
 * 12, 14 or 16 bytes (32- or 64-bit block numbers, checksum v2's 16-bit or v3's
 * 32-bit block checksum), the checksummed tails of descriptor and revoke
 * blocks, 4- or 8-byte revoke records, commit block checksums (v1: CRC32 of
 * the transaction's descriptor and data blocks; v2/v3: crc32c of the commit
 * block), the journal superblock's checksum and the checksum seed.  Byte
 * layouts as the kernel's fs/jbd2 and e2fsprogs write them (all fields
 * big-endian); the fast-commit area's first tag (ext4's, little-endian) is
 * read only to learn whether it holds a fast commit to replay.
 *
 * Pure functions of bytes and a format: no I/O, no allocation, no state.
 * Decoders never read past the block they are given.
 *
 * Errors: none; a decoder says "bad input" through its return value.
 * Threads: no shared state.
 */
#ifndef RECON_IO_JBD_TAG_H
#define RECON_IO_JBD_TAG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JBD_MAGIC 0xc03b3998U

enum jbd_block_type {
	JBD_DESCRIPTOR = 1, JBD_COMMIT = 2, JBD_SB_V1 = 3, JBD_SB_V2 = 4, JBD_REVOKE = 5,
};

/* tag flags */
enum { JBD_TAG_ESCAPE = 1, JBD_TAG_SAME_UUID = 2, JBD_TAG_DELETED = 4, JBD_TAG_LAST = 8 };

/* journal superblock features (meaningful in a v2 superblock only) */
#define JBD_COMPAT_CHECKSUM      0x00000001u   /* v1: CRC32 in the commit block */
#define JBD_INCOMPAT_REVOKE      0x00000001u
#define JBD_INCOMPAT_64BIT       0x00000002u
#define JBD_INCOMPAT_ASYNC       0x00000004u
#define JBD_INCOMPAT_CSUM_V2     0x00000008u
#define JBD_INCOMPAT_CSUM_V3     0x00000010u
#define JBD_INCOMPAT_FAST_COMMIT 0x00000020u
#define JBD_INCOMPAT_KNOWN       0x0000003fu

/* byte offsets and sizes */
enum {
	JBD_HDR = 12,            /* magic, block type, sequence (tid) */
	JBD_UUID_SIZE = 16,
	JBD_TAIL = 4,            /* block tail checksum (csum v2/v3) */
	JBD_REVOKE_HDR = 16,     /* header + r_count */
	/* journal superblock */
	JSB_BLOCKSIZE = 0x0C, JSB_MAXLEN = 0x10, JSB_FIRST = 0x14, JSB_SEQUENCE = 0x18,
	JSB_START = 0x1C, JSB_ERRNO = 0x20, JSB_COMPAT = 0x24, JSB_INCOMPAT = 0x28,
	JSB_RO_COMPAT = 0x2C, JSB_UUID = 0x30, JSB_NR_USERS = 0x40, JSB_CSUM_TYPE = 0x50,
	JSB_NUM_FC = 0x54, JSB_CHECKSUM = 0xFC, JSB_SIZE = 0x400,
	/* commit block */
	JBD_COMMIT_CSUM_TYPE = 12, JBD_COMMIT_CSUM_SIZE = 13, JBD_COMMIT_CSUM = 16,
	JBD_COMMIT_SEC = 0x30, JBD_COMMIT_NSEC = 0x38,
};

enum {
	JBD_CSUM_TYPE_CRC32 = 1,      /* commit block, checksum v1 */
	JBD_CSUM_TYPE_CRC32C = 4,     /* superblock, checksum v2/v3 */
	JBD_DEFAULT_FC_BLOCKS = 256,  /* fast-commit area when s_num_fc_blks is 0 */
};

static inline uint32_t jbd_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t jbd_be64(const unsigned char *p)
{
	return (uint64_t)jbd_be32(p) << 32 | jbd_be32(p + 4);
}

static inline void jbd_put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static inline void jbd_put_be64(unsigned char *p, uint64_t v)
{
	jbd_put_be32(p, (uint32_t)(v >> 32));
	jbd_put_be32(p + 4, (uint32_t)v);
}

/* What a journal's superblock says about the format of its blocks. */
struct jbd_fmt {
	unsigned bs;             /* journal block size */
	bool v2;                 /* superblock v2: the feature words count */
	uint32_t compat, incompat;
	uint32_t seed;           /* crc32c(~0, s_uuid): checksums v2/v3 start from it */
	unsigned tag_bytes;      /* one descriptor tag, without the uuid after it */
	unsigned tail;           /* JBD_TAIL with checksums v2/v3, else 0 */
	unsigned revoke_rec;     /* 4, or 8 with 64-bit block numbers */
	unsigned char uuid[JBD_UUID_SIZE];
};

/* The format of a journal whose superblock (at least JSB_SIZE bytes) is jsb
 * and whose blocks are bs bytes. */
void jbd_fmt_init(struct jbd_fmt *f, unsigned bs, const unsigned char *jsb);

/* checksums v2 or v3: tails, tag checksums, commit and superblock crc32c */
bool jbd_fmt_csum(const struct jbd_fmt *f);
/* checksum v1: the commit block carries CRC32 of the descriptor and data blocks */
bool jbd_fmt_crc32_commit(const struct jbd_fmt *f);
bool jbd_fmt_64bit(const struct jbd_fmt *f);

/* ---- block header ---- */
void jbd_hdr_put(unsigned char *b, uint32_t type, uint32_t tid);
/* false when b does not start with the journal magic */
bool jbd_hdr_get(const unsigned char *b, uint32_t *type, uint32_t *tid);

/* ---- descriptor blocks ---- */
struct jbd_tag {
	uint64_t blk;       /* home block */
	uint16_t flags;     /* JBD_TAG_* */
	uint32_t csum;      /* v3: all 32 bits; v2: the low 16 bits; else unused */
};

/* Tags a descriptor holds when the first carries the uuid and the others do
 * not (as the kernel and jbd_log write them). */
unsigned jbd_tags_per_descriptor(const struct jbd_fmt *f);

/* The tag at byte offset *off of descriptor d: false when no whole tag fits
 * there (the descriptor ends); else *t is filled and *off moves past it and
 * past the uuid that follows it unless the tag says SAME_UUID. */
bool jbd_tag_get(const struct jbd_fmt *f, const unsigned char *d, unsigned *off,
		 struct jbd_tag *t);
/* Encode t at *off (the uuid after it unless SAME_UUID), *off moves past
 * them; the caller keeps within jbd_tags_per_descriptor. */
void jbd_tag_put(const struct jbd_fmt *f, unsigned char *d, unsigned *off, const struct jbd_tag *t);

/* The checksum a tag carries for a logged block (data as stored in the log,
 * escaped) of transaction tid; 0 without checksums v2/v3. */
uint32_t jbd_tag_csum(const struct jbd_fmt *f, uint32_t tid, const unsigned char *data);
bool jbd_tag_csum_ok(const struct jbd_fmt *f, const struct jbd_tag *t, uint32_t tid,
		     const unsigned char *data);

/* The checksummed tail of descriptor and revoke blocks (checksums v2/v3;
 * without them set does nothing and ok is true). */
void jbd_tail_set(const struct jbd_fmt *f, unsigned char *b);
bool jbd_tail_ok(const struct jbd_fmt *f, const unsigned char *b);

/* ---- revoke blocks ---- */
/* Records one revoke block holds. */
unsigned jbd_revokes_per_block(const struct jbd_fmt *f);
/* A whole revoke block for tid revoking blk[0..n) (n <= jbd_revokes_per_block),
 * tail included. */
void jbd_revoke_put(const struct jbd_fmt *f, unsigned char *b, uint32_t tid, const uint64_t *blk,
		    size_t n);
/* The records of revoke block b: *n of them (the caller reads each with
 * jbd_revoke_rec).  False when r_count overruns the block. */
bool jbd_revoke_count(const struct jbd_fmt *f, const unsigned char *b, size_t *n);
uint64_t jbd_revoke_rec(const struct jbd_fmt *f, const unsigned char *b, size_t i);

/* ---- commit blocks ---- */
/* CRC32 (big-endian, as checksum v1 sums) of len bytes, continuing crc. */
uint32_t jbd_crc32_be(uint32_t crc, const unsigned char *p, size_t len);
/* A whole commit block for tid with its time and the checksum its format
 * asks for: crc32_sum is checksum v1's running CRC32 (from ~0) over the
 * transaction's descriptor and data blocks as logged (ignored otherwise). */
void jbd_commit_put(const struct jbd_fmt *f, unsigned char *b, uint32_t tid, uint64_t sec,
		    uint32_t nsec, uint32_t crc32_sum);
/* Whether commit block b checks: v2/v3 its crc32c; v1 crc32_sum (or a block
 * that says it carries no checksum, as the kernel accepts); else true. */
bool jbd_commit_ok(const struct jbd_fmt *f, const unsigned char *b, uint32_t crc32_sum);
uint64_t jbd_commit_sec(const unsigned char *b);

/* ---- superblock ---- */
/* crc32c(~0, the JSB_SIZE bytes of the superblock with s_checksum zeroed) */
uint32_t jbd_sb_csum(const unsigned char *jsb);
/* With checksums v2/v3: does s_checksum match / store it.  Without: true / nothing. */
bool jbd_sb_csum_ok(const struct jbd_fmt *f, const unsigned char *jsb);
void jbd_sb_csum_set(const struct jbd_fmt *f, unsigned char *jsb);
/* s_num_fc_blks, or the kernel's default when it is 0 */
uint32_t jbd_sb_fc_blocks(const unsigned char *jsb);

/* ---- fast-commit area ---- */
/* The transaction id in the head tag that starts the fast-commit block b,
 * or false when b does not start with one. */
bool jbd_fc_head_tid(const unsigned char *b, unsigned bs, uint32_t *tid);

#endif
