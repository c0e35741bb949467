/*
 * io/jbd_tag.c - the jbd2 on-disk format (see jbd_tag.h).
 *
 * Tag layouts.  Without checksum v3 a tag is {be32 block, be16 checksum,
 * be16 flags, be32 block_high}: 8 bytes, 12 with 64-bit block numbers, and
 * checksum v2 adds 2 more (10 or 14; the kernel counts its 16-bit checksum
 * twice, and every tool follows).  Checksum v3's tag is {be32 block, be32
 * flags, be32 block_high, be32 checksum}: 16 bytes whatever the block
 * width.  In both the low half of the flags is at byte 6 and block_high at
 * byte 8, which is how one decoder reads them all.
 *
 * Checksums v2/v3 are crc32c without the final inversion, seeded with
 * crc32c(~0, uuid); a field being checksummed counts as zero.  A tag's
 * checksum covers the transaction id (be32) then the logged block.
 */
#include "jbd_tag.h"

#include <string.h>
#include <ext2fs/ext2fs.h>

static uint32_t crc32c(uint32_t crc, const unsigned char *p, size_t len)
{
	return ext2fs_crc32c_le(crc, p, len);
}

/* crc32c of b[0..len) with the 4 bytes at `hole` counted as zeros */
static uint32_t crc32c_hole(uint32_t crc, const unsigned char *b, size_t len, size_t hole)
{
	static const unsigned char zero[4];
	crc = crc32c(crc, b, hole);
	crc = crc32c(crc, zero, sizeof(zero));
	return crc32c(crc, b + hole + 4, len - hole - 4);
}

void jbd_fmt_init(struct jbd_fmt *f, unsigned bs, const unsigned char *jsb)
{
	memset(f, 0, sizeof(*f));
	f->bs = bs;
	f->v2 = jbd_be32(jsb + 4) == JBD_SB_V2;
	if (f->v2) {
		f->compat = jbd_be32(jsb + JSB_COMPAT);
		f->incompat = jbd_be32(jsb + JSB_INCOMPAT);
	}
	memcpy(f->uuid, jsb + JSB_UUID, JBD_UUID_SIZE);
	if (jbd_fmt_csum(f)) {
		f->seed = crc32c(~0u, f->uuid, JBD_UUID_SIZE);
		f->tail = JBD_TAIL;
	}
	if (f->incompat & JBD_INCOMPAT_CSUM_V3) {
		f->tag_bytes = 16;
	} else {
		f->tag_bytes = 8;
		if (f->incompat & JBD_INCOMPAT_CSUM_V2)
			f->tag_bytes += 2;
		if (jbd_fmt_64bit(f))
			f->tag_bytes += 4;
	}
	f->revoke_rec = jbd_fmt_64bit(f) ? 8 : 4;
}

bool jbd_fmt_csum(const struct jbd_fmt *f)
{
	return f->incompat & (JBD_INCOMPAT_CSUM_V2 | JBD_INCOMPAT_CSUM_V3);
}

bool jbd_fmt_crc32_commit(const struct jbd_fmt *f)
{
	return f->compat & JBD_COMPAT_CHECKSUM;
}

bool jbd_fmt_64bit(const struct jbd_fmt *f)
{
	return f->incompat & JBD_INCOMPAT_64BIT;
}

void jbd_hdr_put(unsigned char *b, uint32_t type, uint32_t tid)
{
	jbd_put_be32(b, JBD_MAGIC);
	jbd_put_be32(b + 4, type);
	jbd_put_be32(b + 8, tid);
}

bool jbd_hdr_get(const unsigned char *b, uint32_t *type, uint32_t *tid)
{
	if (jbd_be32(b) != JBD_MAGIC)
		return false;
	*type = jbd_be32(b + 4);
	*tid = jbd_be32(b + 8);
	return true;
}

/* ---- descriptor blocks ---- */

unsigned jbd_tags_per_descriptor(const struct jbd_fmt *f)
{
	return 1 + (f->bs - JBD_HDR - f->tail - f->tag_bytes - JBD_UUID_SIZE) / f->tag_bytes;
}

bool jbd_tag_get(const struct jbd_fmt *f, const unsigned char *d, unsigned *off,
		 struct jbd_tag *t)
{
	/* as the kernel's loop: a tag must fit before the tail; the uuid after
	 * it is skipped unread (the next tag's bound covers it) */
	if (*off + f->tag_bytes > f->bs - f->tail)
		return false;
	const unsigned char *p = d + *off;
	t->blk = jbd_be32(p);
	if (jbd_fmt_64bit(f))
		t->blk |= (uint64_t)jbd_be32(p + 8) << 32;
	t->flags = (uint16_t)(p[6] << 8 | p[7]);
	if (f->incompat & JBD_INCOMPAT_CSUM_V3)
		t->csum = jbd_be32(p + 12);
	else if (f->incompat & JBD_INCOMPAT_CSUM_V2)
		t->csum = (uint32_t)(p[4] << 8 | p[5]);
	else
		t->csum = 0;
	*off += f->tag_bytes;
	if (!(t->flags & JBD_TAG_SAME_UUID))
		*off += JBD_UUID_SIZE;
	return true;
}

void jbd_tag_put(const struct jbd_fmt *f, unsigned char *d, unsigned *off, const struct jbd_tag *t)
{
	unsigned char *p = d + *off;
	memset(p, 0, f->tag_bytes);
	jbd_put_be32(p, (uint32_t)t->blk);
	if (jbd_fmt_64bit(f))
		jbd_put_be32(p + 8, (uint32_t)(t->blk >> 32));
	if (f->incompat & JBD_INCOMPAT_CSUM_V3) {
		jbd_put_be32(p + 4, t->flags);
		jbd_put_be32(p + 12, t->csum);
	} else {
		if (f->incompat & JBD_INCOMPAT_CSUM_V2) {
			p[4] = (unsigned char)(t->csum >> 8);
			p[5] = (unsigned char)t->csum;
		}
		p[6] = (unsigned char)(t->flags >> 8);
		p[7] = (unsigned char)t->flags;
	}
	*off += f->tag_bytes;
	if (!(t->flags & JBD_TAG_SAME_UUID)) {
		memcpy(d + *off, f->uuid, JBD_UUID_SIZE);
		*off += JBD_UUID_SIZE;
	}
}

uint32_t jbd_tag_csum(const struct jbd_fmt *f, uint32_t tid, const unsigned char *data)
{
	if (!jbd_fmt_csum(f))
		return 0;
	unsigned char seq[4];
	jbd_put_be32(seq, tid);
	uint32_t c = crc32c(crc32c(f->seed, seq, sizeof(seq)), data, f->bs);
	return f->incompat & JBD_INCOMPAT_CSUM_V3 ? c : (c & 0xffff);
}

bool jbd_tag_csum_ok(const struct jbd_fmt *f, const struct jbd_tag *t, uint32_t tid,
		     const unsigned char *data)
{
	return !jbd_fmt_csum(f) || t->csum == jbd_tag_csum(f, tid, data);
}

void jbd_tail_set(const struct jbd_fmt *f, unsigned char *b)
{
	if (!jbd_fmt_csum(f))
		return;
	jbd_put_be32(b + f->bs - JBD_TAIL, crc32c_hole(f->seed, b, f->bs, f->bs - JBD_TAIL));
}

bool jbd_tail_ok(const struct jbd_fmt *f, const unsigned char *b)
{
	if (!jbd_fmt_csum(f))
		return true;
	return jbd_be32(b + f->bs - JBD_TAIL) == crc32c_hole(f->seed, b, f->bs, f->bs - JBD_TAIL);
}

/* ---- revoke blocks ---- */

unsigned jbd_revokes_per_block(const struct jbd_fmt *f)
{
	return (f->bs - JBD_REVOKE_HDR - f->tail) / f->revoke_rec;
}

void jbd_revoke_put(const struct jbd_fmt *f, unsigned char *b, uint32_t tid, const uint64_t *blk,
		    size_t n)
{
	memset(b, 0, f->bs);
	jbd_hdr_put(b, JBD_REVOKE, tid);
	unsigned off = JBD_REVOKE_HDR;
	for (size_t i = 0; i < n; i++, off += f->revoke_rec) {
		if (f->revoke_rec == 8)
			jbd_put_be64(b + off, blk[i]);
		else
			jbd_put_be32(b + off, (uint32_t)blk[i]);
	}
	jbd_put_be32(b + JBD_HDR, off);
	jbd_tail_set(f, b);
}

bool jbd_revoke_count(const struct jbd_fmt *f, const unsigned char *b, size_t *n)
{
	uint32_t used = jbd_be32(b + JBD_HDR);
	*n = 0;
	if (used > f->bs - f->tail)
		return false;
	if (used > JBD_REVOKE_HDR)
		*n = (used - JBD_REVOKE_HDR) / f->revoke_rec;
	return true;
}

uint64_t jbd_revoke_rec(const struct jbd_fmt *f, const unsigned char *b, size_t i)
{
	const unsigned char *p = b + JBD_REVOKE_HDR + i * f->revoke_rec;
	return f->revoke_rec == 8 ? jbd_be64(p) : jbd_be32(p);
}

/* ---- commit blocks ---- */

uint32_t jbd_crc32_be(uint32_t crc, const unsigned char *p, size_t len)
{
	return ext2fs_crc32_be(crc, p, len);
}

void jbd_commit_put(const struct jbd_fmt *f, unsigned char *b, uint32_t tid, uint64_t sec,
		    uint32_t nsec, uint32_t crc32_sum)
{
	memset(b, 0, f->bs);
	jbd_hdr_put(b, JBD_COMMIT, tid);
	jbd_put_be64(b + JBD_COMMIT_SEC, sec);
	jbd_put_be32(b + JBD_COMMIT_NSEC, nsec);
	if (jbd_fmt_csum(f)) {
		jbd_put_be32(b + JBD_COMMIT_CSUM, crc32c_hole(f->seed, b, f->bs, JBD_COMMIT_CSUM));
	} else if (jbd_fmt_crc32_commit(f)) {
		b[JBD_COMMIT_CSUM_TYPE] = JBD_CSUM_TYPE_CRC32;
		b[JBD_COMMIT_CSUM_SIZE] = 4;
		jbd_put_be32(b + JBD_COMMIT_CSUM, crc32_sum);
	}
}

bool jbd_commit_ok(const struct jbd_fmt *f, const unsigned char *b, uint32_t crc32_sum)
{
	uint32_t found = jbd_be32(b + JBD_COMMIT_CSUM);
	if (jbd_fmt_csum(f))
		return found == crc32c_hole(f->seed, b, f->bs, JBD_COMMIT_CSUM);
	if (jbd_fmt_crc32_commit(f)) {
		unsigned type = b[JBD_COMMIT_CSUM_TYPE], size = b[JBD_COMMIT_CSUM_SIZE];
		return (found == crc32_sum && type == JBD_CSUM_TYPE_CRC32 && size == 4) ||
		       (type == 0 && size == 0 && found == 0);
	}
	return true;
}

uint64_t jbd_commit_sec(const unsigned char *b)
{
	return jbd_be64(b + JBD_COMMIT_SEC);
}

/* ---- superblock ---- */

uint32_t jbd_sb_csum(const unsigned char *jsb)
{
	return crc32c_hole(~0u, jsb, JSB_SIZE, JSB_CHECKSUM);
}

bool jbd_sb_csum_ok(const struct jbd_fmt *f, const unsigned char *jsb)
{
	return !jbd_fmt_csum(f) || jbd_be32(jsb + JSB_CHECKSUM) == jbd_sb_csum(jsb);
}

void jbd_sb_csum_set(const struct jbd_fmt *f, unsigned char *jsb)
{
	if (jbd_fmt_csum(f))
		jbd_put_be32(jsb + JSB_CHECKSUM, jbd_sb_csum(jsb));
}

uint32_t jbd_sb_fc_blocks(const unsigned char *jsb)
{
	uint32_t n = jbd_be32(jsb + JSB_NUM_FC);
	return n ? n : JBD_DEFAULT_FC_BLOCKS;
}

/* ---- fast-commit area ---- */

bool jbd_fc_head_tid(const unsigned char *b, unsigned bs, uint32_t *tid)
{
	/* ext4's tag-length records, little-endian: {le16 tag, le16 len}, and
	 * the head's value {le32 features, le32 tid} */
	enum { FC_TAG_HEAD = 0x0009, FC_HEAD_TID = 8 };
	if (bs < FC_HEAD_TID + 4 || (b[0] | b[1] << 8) != FC_TAG_HEAD)
		return false;
	*tid = (uint32_t)b[FC_HEAD_TID] | (uint32_t)b[FC_HEAD_TID + 1] << 8 |
	       (uint32_t)b[FC_HEAD_TID + 2] << 16 | (uint32_t)b[FC_HEAD_TID + 3] << 24;
	return true;
}
