/*
 * tests/jbd/test_jbd_tag.c - io/jbd_tag.c, the jbd2 format codec, against
 * the format as the kernel's headers define it and against checksums
 * computed here independently (bit-at-a-time CRC32C and big-endian CRC32,
 * checked first against their published check values).
 *
 * Usage: test_jbd_tag; exit 0 pass, 1 fail.
 */
#include "jbd_tag.h"
#include "test_util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK TEST_CHECK

/* ---- reference checksums, one bit at a time ---- */

/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78), no final inversion:
 * what jbd2 calls jbd2_chksum. */
static uint32_t ref_crc32c(uint32_t crc, const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		crc ^= p[i];
		for (int b = 0; b < 8; b++)
			crc = crc & 1 ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
	}
	return crc;
}

/* CRC32 most-significant bit first (polynomial 0x04C11DB7), no final
 * inversion: the kernel's crc32_be, checksum v1's sum. */
static uint32_t ref_crc32_be(uint32_t crc, const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		crc ^= (uint32_t)p[i] << 24;
		for (int b = 0; b < 8; b++)
			crc = crc & 0x80000000u ? (crc << 1) ^ 0x04C11DB7u : crc << 1;
	}
	return crc;
}

/* ref_crc32c of b with the 4 bytes at hole counted as zeros */
static uint32_t ref_hole(uint32_t crc, const unsigned char *b, size_t len, size_t hole)
{
	unsigned char *c = malloc(len);
	memcpy(c, b, len);
	memset(c + hole, 0, 4);
	crc = ref_crc32c(crc, c, len);
	free(c);
	return crc;
}

static void test_reference(void)
{
	const unsigned char *check = (const unsigned char *)"123456789";
	/* the catalogue's check values: CRC-32C 0xE3069283 (with the final
	 * inversion), CRC-32/MPEG-2 0x0376E6E7 */
	CHECK((ref_crc32c(~0u, check, 9) ^ ~0u) == 0xE3069283u, "ref crc32c %08x",
	      ref_crc32c(~0u, check, 9) ^ ~0u);
	CHECK(ref_crc32_be(~0u, check, 9) == 0x0376E6E7u, "ref crc32_be %08x",
	      ref_crc32_be(~0u, check, 9));
	CHECK(jbd_crc32_be(~0u, check, 9) == 0x0376E6E7u, "jbd_crc32_be %08x",
	      jbd_crc32_be(~0u, check, 9));
}

/* ---- a journal superblock of a given format ---- */

static const unsigned char UUID[16] = { 0x6b, 0x33, 0xf5, 0x85, 0x5a, 0x3e, 0x4d, 0x4b,
					0x8c, 0x3f, 0x1c, 0x0d, 0x5e, 0x3a, 0x9b, 0x21 };

static void make_sb(unsigned char *sb, unsigned type, uint32_t compat, uint32_t incompat)
{
	memset(sb, 0, JSB_SIZE);
	jbd_hdr_put(sb, type, 0);
	jbd_put_be32(sb + JSB_BLOCKSIZE, 1024);
	jbd_put_be32(sb + JSB_MAXLEN, 1024);
	jbd_put_be32(sb + JSB_FIRST, 1);
	jbd_put_be32(sb + JSB_SEQUENCE, 7);
	jbd_put_be32(sb + JSB_COMPAT, compat);
	jbd_put_be32(sb + JSB_INCOMPAT, incompat);
	memcpy(sb + JSB_UUID, UUID, 16);
	if (incompat & (JBD_INCOMPAT_CSUM_V2 | JBD_INCOMPAT_CSUM_V3))
		sb[JSB_CSUM_TYPE] = JBD_CSUM_TYPE_CRC32C;
}

static void fill(unsigned char *b, size_t len, unsigned seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		b[i] = (unsigned char)x;
	}
}

struct variant {
	const char *name;
	unsigned type;
	uint32_t compat, incompat;
	unsigned tag_bytes;
};

static const struct variant variants[] = {
	{ "v1 superblock (features ignored)", JBD_SB_V1, 1, JBD_INCOMPAT_CSUM_V3, 8 },
	{ "plain", JBD_SB_V2, 0, JBD_INCOMPAT_REVOKE, 8 },
	{ "64bit", JBD_SB_V2, 0, JBD_INCOMPAT_64BIT, 12 },
	{ "csum v1", JBD_SB_V2, JBD_COMPAT_CHECKSUM, 0, 8 },
	{ "csum v2", JBD_SB_V2, 0, JBD_INCOMPAT_CSUM_V2, 10 },
	{ "csum v2 64bit", JBD_SB_V2, 0, JBD_INCOMPAT_CSUM_V2 | JBD_INCOMPAT_64BIT, 14 },
	{ "csum v3", JBD_SB_V2, 0, JBD_INCOMPAT_CSUM_V3, 16 },
	{ "csum v3 64bit", JBD_SB_V2, 0, JBD_INCOMPAT_CSUM_V3 | JBD_INCOMPAT_64BIT | JBD_INCOMPAT_ASYNC,
	  16 },
};

/* Tags: a full descriptor round trip, the layout at fixed offsets, and each
 * tag's checksum against the reference. */
static void test_tags(const struct variant *v, unsigned bs)
{
	unsigned char sb[JSB_SIZE], d[4096], data[4096];
	make_sb(sb, v->type, v->compat, v->incompat);
	struct jbd_fmt f;
	jbd_fmt_init(&f, bs, sb);
	bool v2 = v->type == JBD_SB_V2;
	bool csum = v2 && (v->incompat & (JBD_INCOMPAT_CSUM_V2 | JBD_INCOMPAT_CSUM_V3));
	bool wide = v2 && (v->incompat & JBD_INCOMPAT_64BIT);
	bool v3 = v2 && (v->incompat & JBD_INCOMPAT_CSUM_V3);
	CHECK(f.tag_bytes == v->tag_bytes, "%s: tag bytes %u, want %u", v->name, f.tag_bytes,
	      v->tag_bytes);
	CHECK(jbd_fmt_csum(&f) == csum, "%s: checksums v2/v3", v->name);
	CHECK(f.seed == (csum ? ref_crc32c(~0u, UUID, 16) : 0), "%s: seed %08x", v->name, f.seed);
	unsigned tpd = jbd_tags_per_descriptor(&f), tail = csum ? 4 : 0;
	/* tpd tags fit (the first with its uuid), one more would not */
	CHECK(JBD_HDR + 16 + tpd * f.tag_bytes <= bs - tail &&
	      JBD_HDR + 16 + (tpd + 1) * f.tag_bytes > bs - tail, "%s/%u: %u tags per descriptor",
	      v->name, bs, tpd);
	memset(d, 0, bs);
	jbd_hdr_put(d, JBD_DESCRIPTOR, 0x01020304);
	struct jbd_tag want[600];
	unsigned off = JBD_HDR;
	for (unsigned i = 0; i < tpd; i++) {
		fill(data, bs, i);
		uint64_t blk = 0x100000000ull * (i % 3) + 0x89abcdefu - i;
		want[i] = (struct jbd_tag){ .blk = blk, .flags = (uint16_t)(i % 2 ? JBD_TAG_ESCAPE : 0) };
		if (i > 0)
			want[i].flags |= JBD_TAG_SAME_UUID;
		if (i + 1 == tpd)
			want[i].flags |= JBD_TAG_LAST;
		want[i].csum = jbd_tag_csum(&f, 0x01020304, data);
		unsigned char seq[4] = { 1, 2, 3, 4 };
		uint32_t ref = ref_crc32c(ref_crc32c(ref_crc32c(~0u, UUID, 16), seq, 4), data, bs);
		uint32_t refc = !csum ? 0 : v3 ? ref : ref & 0xffff;
		CHECK(want[i].csum == refc, "%s: tag %u checksum %08x, reference %08x", v->name, i,
		      want[i].csum, refc);
		CHECK(jbd_tag_csum_ok(&f, &want[i], 0x01020304, data), "%s: checksum not ok", v->name);
		data[bs / 2] ^= 1;
		CHECK(!csum || !jbd_tag_csum_ok(&f, &want[i], 0x01020304, data),
		      "%s: a changed block passes its tag checksum", v->name);
		unsigned at = off;
		jbd_tag_put(&f, d, &off, &want[i]);
		CHECK(off == at + f.tag_bytes + (i == 0 ? 16 : 0), "%s: tag %u took %u bytes", v->name,
		      i, off - at);
		/* the layout: block low at 0, flags' low half at 6, block high at 8 */
		CHECK(jbd_be32(d + at) == (uint32_t)blk, "%s: block at +0", v->name);
		CHECK((d[at + 6] << 8 | d[at + 7]) == want[i].flags, "%s: flags at +6", v->name);
		if (wide)
			CHECK(jbd_be32(d + at + 8) == (uint32_t)(blk >> 32), "%s: block high at +8", v->name);
		if (v3)
			CHECK(jbd_be32(d + at + 12) == want[i].csum && d[at + 4] == 0 && d[at + 5] == 0,
			      "%s: v3 checksum at +12, flags' high half zero", v->name);
		else if (csum)
			CHECK((uint32_t)(d[at + 4] << 8 | d[at + 5]) == want[i].csum, "%s: v2 checksum at +4",
			      v->name);
		if (i == 0)
			CHECK(!memcmp(d + at + f.tag_bytes, UUID, 16), "%s: uuid after the first tag",
			      v->name);
	}
	jbd_tail_set(&f, d);
	if (csum) {
		CHECK(jbd_be32(d + bs - 4) == ref_hole(f.seed, d, bs, bs - 4), "%s: descriptor tail",
		      v->name);
	}
	CHECK(jbd_tail_ok(&f, d), "%s: tail not ok", v->name);
	off = JBD_HDR;
	struct jbd_tag got;
	unsigned n = 0;
	while (jbd_tag_get(&f, d, &off, &got)) {
		uint64_t wblk = wide ? want[n].blk : (uint32_t)want[n].blk;
		CHECK(got.blk == wblk && got.flags == want[n].flags && got.csum == want[n].csum,
		      "%s: tag %u decodes as %" PRIx64 "/%x/%x, encoded %" PRIx64 "/%x/%x", v->name, n,
		      got.blk, got.flags, got.csum, wblk, want[n].flags, want[n].csum);
		n++;
		if (got.flags & JBD_TAG_LAST)
			break;
	}
	CHECK(n == tpd, "%s: %u tags decoded of %u", v->name, n, tpd);
	/* without LAST_TAG the decoder stops at the block's end (or its tail) */
	for (unsigned i = 0, o = JBD_HDR + f.tag_bytes + 16; i + 1 < tpd; i++, o += f.tag_bytes)
		d[o + 7] = JBD_TAG_SAME_UUID;
	off = JBD_HDR;
	n = 0;
	while (jbd_tag_get(&f, d, &off, &got) && n < 10000)
		n++;
	CHECK(n == tpd && off <= bs - tail, "%s: %u tags without a last one, ended at %u", v->name,
	      n, off);
	if (csum) {
		d[JBD_HDR] ^= 0x40;
		CHECK(!jbd_tail_ok(&f, d), "%s: a changed descriptor passes its tail", v->name);
	}
}

static void test_revoke(const struct variant *v, unsigned bs)
{
	unsigned char sb[JSB_SIZE], b[4096];
	make_sb(sb, v->type, v->compat, v->incompat);
	struct jbd_fmt f;
	jbd_fmt_init(&f, bs, sb);
	bool wide = v->type == JBD_SB_V2 && (v->incompat & JBD_INCOMPAT_64BIT);
	unsigned rec = wide ? 8 : 4, tail = jbd_fmt_csum(&f) ? 4 : 0;
	unsigned per = jbd_revokes_per_block(&f);
	CHECK(per == (bs - 16 - tail) / rec, "%s: %u revokes per block", v->name, per);
	uint64_t blk[1024];
	for (unsigned i = 0; i < per; i++)
		blk[i] = wide ? 0x0000000500000000ull + i * 7919 : 1000u + i * 7919;
	jbd_revoke_put(&f, b, 99, blk, per);
	CHECK(jbd_be32(b + JBD_HDR) == 16 + per * rec, "%s: r_count %u", v->name,
	      jbd_be32(b + JBD_HDR));
	if (tail)
		CHECK(jbd_be32(b + bs - 4) == ref_hole(f.seed, b, bs, bs - 4), "%s: revoke tail",
		      v->name);
	CHECK(jbd_tail_ok(&f, b), "%s: revoke tail not ok", v->name);
	size_t n = 0;
	CHECK(jbd_revoke_count(&f, b, &n) && n == per, "%s: %zu records", v->name, n);
	for (unsigned i = 0; i < per && i < n; i++)
		CHECK(jbd_revoke_rec(&f, b, i) == blk[i], "%s: record %u", v->name, i);
	CHECK(rec == 4 || jbd_be64(b + 16) == blk[0], "%s: 8-byte record at +16", v->name);
	jbd_put_be32(b + JBD_HDR, bs - tail + 1);
	CHECK(!jbd_revoke_count(&f, b, &n), "%s: an overrunning r_count is taken", v->name);
}

static void test_commit(const struct variant *v, unsigned bs)
{
	unsigned char sb[JSB_SIZE], b[4096];
	make_sb(sb, v->type, v->compat, v->incompat);
	struct jbd_fmt f;
	jbd_fmt_init(&f, bs, sb);
	bool v2 = v->type == JBD_SB_V2;
	jbd_commit_put(&f, b, 42, 1700000000ull, 12345, 0xdeadbeef);
	uint32_t type, tid;
	CHECK(jbd_hdr_get(b, &type, &tid) && type == JBD_COMMIT && tid == 42, "%s: commit header",
	      v->name);
	CHECK(jbd_commit_sec(b) == 1700000000ull && jbd_be32(b + 0x38) == 12345, "%s: commit time",
	      v->name);
	if (jbd_fmt_csum(&f)) {
		CHECK(b[12] == 0 && b[13] == 0 && jbd_be32(b + 16) == ref_hole(f.seed, b, bs, 16),
		      "%s: commit crc32c", v->name);
		CHECK(jbd_commit_ok(&f, b, 0), "%s: commit not ok", v->name);
		b[100] ^= 1;
		CHECK(!jbd_commit_ok(&f, b, 0), "%s: a changed commit block passes", v->name);
	} else if (v2 && (v->compat & JBD_COMPAT_CHECKSUM)) {
		CHECK(b[12] == JBD_CSUM_TYPE_CRC32 && b[13] == 4 && jbd_be32(b + 16) == 0xdeadbeef,
		      "%s: v1 commit checksum fields", v->name);
		CHECK(jbd_commit_ok(&f, b, 0xdeadbeef) && !jbd_commit_ok(&f, b, 0xdeadbeee),
		      "%s: v1 commit check", v->name);
		memset(b + 12, 0, 8);
		CHECK(jbd_commit_ok(&f, b, 1), "%s: a commit without a checksum is refused", v->name);
	} else {
		CHECK(jbd_be32(b + 16) == 0 && b[12] == 0 && jbd_commit_ok(&f, b, 1),
		      "%s: no commit checksum", v->name);
	}
}

static void test_superblock(void)
{
	unsigned char sb[JSB_SIZE];
	make_sb(sb, JBD_SB_V2, 0, JBD_INCOMPAT_CSUM_V3 | JBD_INCOMPAT_64BIT);
	fill(sb + 0x100, 0x300, 3);   /* s_users: covered too */
	struct jbd_fmt f;
	jbd_fmt_init(&f, 4096, sb);
	CHECK(jbd_sb_csum(sb) == ref_hole(~0u, sb, JSB_SIZE, JSB_CHECKSUM), "sb checksum %08x",
	      jbd_sb_csum(sb));
	CHECK(!jbd_sb_csum_ok(&f, sb), "a zero sb checksum passes");
	jbd_sb_csum_set(&f, sb);
	CHECK(jbd_sb_csum_ok(&f, sb) && jbd_be32(sb + JSB_CHECKSUM) ==
	      ref_hole(~0u, sb, JSB_SIZE, JSB_CHECKSUM), "sb checksum set");
	sb[0x3ff] ^= 1;
	CHECK(!jbd_sb_csum_ok(&f, sb), "a changed superblock passes");
	make_sb(sb, JBD_SB_V2, 0, 0);
	jbd_fmt_init(&f, 1024, sb);
	jbd_sb_csum_set(&f, sb);
	CHECK(jbd_be32(sb + JSB_CHECKSUM) == 0 && jbd_sb_csum_ok(&f, sb), "sb checksum without v2/v3");
	CHECK(jbd_sb_fc_blocks(sb) == 256, "default fast-commit blocks");
	jbd_put_be32(sb + JSB_NUM_FC, 64);
	CHECK(jbd_sb_fc_blocks(sb) == 64, "s_num_fc_blks");
}

static void test_fast_commit_head(void)
{
	unsigned char b[1024] = { 0x09, 0x00, 0x08, 0x00, 0, 0, 0, 0, 0x78, 0x56, 0x34, 0x12 };
	uint32_t tid = 0;
	CHECK(jbd_fc_head_tid(b, sizeof(b), &tid) && tid == 0x12345678, "fc head tid %08x", tid);
	b[0] = 0x08;   /* a tail tag, not a head */
	CHECK(!jbd_fc_head_tid(b, sizeof(b), &tid), "a block without a head tag");
}

int main(void)
{
	test_reference();
	for (size_t i = 0; i < sizeof(variants) / sizeof(*variants); i++) {
		for (unsigned bs = 1024; bs <= 4096; bs *= 4) {
			test_tags(&variants[i], bs);
			test_revoke(&variants[i], bs);
			test_commit(&variants[i], bs);
		}
	}
	test_superblock();
	test_fast_commit_head();
	if (failures)
		fprintf(stderr, "%d check(s) failed\n", failures);
	return failures ? 1 : 0;
}
