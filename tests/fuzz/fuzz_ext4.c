/*
 * tests/fuzz/fuzz_ext4.c - the fuzzers' ext4 part (see fuzz_image.h):
 * mutations aimed at extent trees and 64-byte group descriptors, single-bit
 * flips inside what a metadata_csum checksum covers, and the repair of every
 * checksum a mutation touches.  The layouts are the on-disk format's
 * (Documentation/filesystems/ext4 in the kernel); the crc32c primitive is
 * libext2fs's, the test's own bookkeeping, never the checker's.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ext2fs/ext2fs.h>

#include "fuzz_image.h"

static uint32_t ld32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint16_t ld16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static void st32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void st16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static uint32_t crc(uint32_t seed, const void *p, size_t len)
{
	return ext2fs_crc32c_le(seed, (unsigned char const *)p, len);
}

#define EXT_MAGIC 0xF30A
#define INODE_EXTENTS_FL 0x80000
#define BG_INODE_UNINIT 1
#define BG_BLOCK_UNINIT 2

/* ------------------------------------------------------------ extent trees */

/* byte offset of the extent node to mutate: an extent inode's i_block or an
 * extent tree block; *ino its owner */
static uint64_t pick_extent_node(const struct fz_image *im, uint64_t *s, uint32_t *room)
{
	if (fz_below(s, 2)) {
		static const uint8_t kinds[] = { FZ_EXTENT };
		const struct fz_block *b = fz_pick(im, s, kinds, 1);
		if (b) {
			*room = (im->bs - 12) / 12;
			return b->blk * im->bs;
		}
	}
	uint32_t cand[FZ_MAX_INODES], n = 0;
	for (size_t i = 0; i < im->nused; i++) {
		const uint8_t *in = im->data + im->inode_off[i];
		if ((ld32(in + 32) & INODE_EXTENTS_FL) && ld16(in + 40) == EXT_MAGIC)
			cand[n++] = (uint32_t)i;
	}
	if (!n)
		return 0;
	*room = 4;
	return im->inode_off[cand[fz_below(s, n)]] + 40;
}

static void draw_extent_header(const struct fz_image *im, uint64_t *s, struct fz_mutant *m, uint64_t at)
{
	const uint8_t *h = im->data + at;
	uint16_t entries = ld16(h + 2), max = ld16(h + 4), depth = ld16(h + 6);
	switch (fz_below(s, 4)) {
	case 0: fz_edit_le(m, at, fz_below(s, 2) ? EXT_MAGIC ^ (1u << fz_below(s, 16)) : fz_interesting(im, s, EXT_MAGIC), 2); break;
	case 1: {
		const uint16_t v[] = { 0, (uint16_t)(entries + 1), (uint16_t)(entries - 1), max, (uint16_t)(max + 1), 0xffff };
		fz_edit_le(m, at + 2, v[fz_below(s, 6)], 2);
		break;
	}
	case 2: {
		const uint16_t v[] = { 0, (uint16_t)(max + 1), (uint16_t)(max - 1), entries, 4, 5, 340, 341, 0xffff };
		fz_edit_le(m, at + 4, v[fz_below(s, 9)], 2);
		break;
	}
	default: {
		const uint16_t v[] = { 0, 1, 2, 3, 5, 6, (uint16_t)(depth + 1), (uint16_t)(depth - 1), 0xffff };
		fz_edit_le(m, at + 6, v[fz_below(s, 9)], 2);
	}
	}
}

static void draw_extent_entry(const struct fz_image *im, uint64_t *s, struct fz_mutant *m, uint64_t at,
			      bool leaf, uint64_t prev_at)
{
	const uint8_t *e = im->data + at;
	uint32_t other = (uint32_t)im->meta[fz_below(s, (uint32_t)im->nmeta)].blk;
	if (leaf) {
		uint16_t len = ld16(e + 4);
		switch (fz_below(s, 5)) {
		case 0: {                          /* ee_block: onto the previous run, or anything */
			uint32_t pend = prev_at ? ld32(im->data + prev_at) + (ld16(im->data + prev_at + 4) & 0x7fff) : 0;
			const uint32_t v[] = { ld32(e) + 1, ld32(e) - 1, pend - 1, pend, 0, 0xffffffffu,
					       fz_interesting(im, s, ld32(e)) };
			fz_edit_le(m, at, v[fz_below(s, 7)], 4);
			break;
		}
		case 1: {                          /* ee_len and its unwritten bit */
			const uint16_t v[] = { (uint16_t)(len ^ 0x8000), (uint16_t)(len + 1), (uint16_t)(len - 1), 0, 0x8000,
					       32768, 32769, 0xffff, (uint16_t)((len & 0x7fff) + 1) };
			fz_edit_le(m, at + 4, v[fz_below(s, 9)], 2);
			break;
		}
		case 2: {                          /* ee_start_hi */
			const uint16_t v[] = { 1, 2, 0x8000, 0xffff };
			fz_edit_le(m, at + 6, v[fz_below(s, 4)], 2);
			break;
		}
		default: {                         /* ee_start_lo */
			const uint32_t v[] = { ld32(e + 8) + 1, ld32(e + 8) - 1, other, im->blocks_count - 1,
					       im->blocks_count, 0, fz_interesting(im, s, ld32(e + 8)) };
			fz_edit_le(m, at + 8, v[fz_below(s, 7)], 4);
		}
		}
		return;
	}
	switch (fz_below(s, 4)) {
	case 0: fz_edit_le(m, at, fz_below(s, 2) ? ld32(e) + 1 : fz_interesting(im, s, ld32(e)), 4); break;  /* ei_block */
	case 1: {                                                                           /* ei_leaf_lo */
		const uint32_t v[] = { other, ld32(e + 4) + 1, 0, im->blocks_count, fz_interesting(im, s, ld32(e + 4)) };
		fz_edit_le(m, at + 4, v[fz_below(s, 5)], 4);
		break;
	}
	case 2: fz_edit_le(m, at + 8, fz_below(s, 2) ? 1 : 0xffff, 2); break;               /* ei_leaf_hi */
	default: fz_edit_le(m, at + 10, fz_interesting(im, s, 0) & 0xffff, 2);              /* ei_unused */
	}
}

void fz_draw_extent(const struct fz_image *im, uint64_t *s, struct fz_mutant *m)
{
	uint32_t room = 0;
	uint64_t at = pick_extent_node(im, s, &room);
	if (!at)
		return;
	const uint8_t *h = im->data + at;
	uint16_t entries = ld16(h + 2);
	unsigned n = 1 + fz_below(s, 2);
	for (unsigned i = 0; i < n; i++) {
		if (!entries || fz_below(s, 4) == 0) {
			draw_extent_header(im, s, m, at);
			continue;
		}
		uint32_t k = fz_below(s, 2) ? entries - 1u : fz_below(s, entries);
		if (fz_below(s, 8) == 0 && entries < room)
			k = entries;               /* the first unused slot: what a bad eh_entries would expose */
		draw_extent_entry(im, s, m, at + 12 + 12ull * k, ld16(h + 6) == 0, k ? at + 12 + 12ull * (k - 1) : 0);
	}
}

/* ------------------------------------------------------------ 64-byte descriptors */

void fz_draw_bgd64(const struct fz_image *im, uint64_t *s, struct fz_mutant *m)
{
	if (im->desc_size < 64 || !im->groups)
		return;
	uint32_t g = fz_below(s, im->groups);
	uint64_t at = (uint64_t)(im->first_data_block + 1) * im->bs + (uint64_t)g * im->desc_size;
	const uint8_t *d = im->data + at;
	switch (fz_below(s, 6)) {
	case 0: {                                  /* a _hi block location or count */
		static const uint8_t hi[] = { 0x20, 0x24, 0x28 };
		fz_edit_le(m, at + hi[fz_below(s, 3)], fz_below(s, 2) ? 1 : fz_interesting(im, s, 0), 4);
		break;
	}
	case 1: {                                  /* _hi counts and itable_unused_hi */
		static const uint8_t hi[] = { 0x2c, 0x2e, 0x30, 0x32 };
		fz_edit_le(m, at + hi[fz_below(s, 4)], fz_below(s, 2) ? 1 : 0xffff, 2);
		break;
	}
	case 2:                                    /* bg_flags: one of INODE_UNINIT, BLOCK_UNINIT, ITABLE_ZEROED, or any */
		fz_edit_le(m, at + 0x12, fz_below(s, 4) ? ld16(d + 0x12) ^ (1u << fz_below(s, 3)) : fz_next(s) & 0xffff, 2);
		break;
	case 3: {                                  /* bg_itable_unused_lo */
		uint16_t cur = ld16(d + 0x1c), ipg = (uint16_t)im->inodes_per_group;
		const uint16_t v[] = { 0, (uint16_t)(cur + 1), (uint16_t)(cur - 1), ipg, (uint16_t)(ipg + 1), (uint16_t)(ipg - 1),
				       ld16(d + 0x0e), (uint16_t)(ld16(d + 0x0e) + 1) };
		fz_edit_le(m, at + 0x1c, v[fz_below(s, 8)], 2);
		break;
	}
	case 4: {                                  /* a checksum field, the exclude bitmap, the reserved tail */
		static const uint8_t f[] = { 0x18, 0x1a, 0x1e, 0x38, 0x3a };
		uint8_t off = f[fz_below(s, 5)];
		fz_edit_le(m, at + off, ld16(d + off) ^ (1u << fz_below(s, 16)), 2);
		break;
	}
	default: {
		static const uint8_t f[] = { 0x14, 0x34, 0x3c };
		fz_edit_le(m, at + f[fz_below(s, 3)], fz_interesting(im, s, 0), 4);
	}
	}
}

/* ------------------------------------------------------------ checksums */

static const struct fz_block *meta_of(const struct fz_image *im, uint64_t blk)
{
	for (size_t i = 0; i < im->nmeta; i++)
		if (im->meta[i].blk == blk && im->meta[i].kind != FZ_SB && im->meta[i].kind != FZ_GDT &&
		    im->meta[i].kind != FZ_ITABLE)
			return &im->meta[i];
	return NULL;
}

static uint32_t inode_seed(const struct fz_image *im, const uint8_t *img, uint32_t ino)
{
	uint32_t g = (ino - 1) / im->inodes_per_group;
	if (g >= 64)
		return 0;
	const uint8_t *in = img + im->itable[g] * im->bs + (uint64_t)((ino - 1) % im->inodes_per_group) * im->inode_size;
	uint32_t le = ino, gen = ld32(in + 100);
	return crc(crc(im->csum_seed, &le, 4), &gen, 4);
}

static void csum_sb(uint8_t *sb)
{
	st32(sb + 0x3fc, crc(~0u, sb, 0x3fc));
}

/* descriptor g of the table at byte `table` (the primary or a backup copy);
 * its bitmap checksums too when the (mutated) flags say the group's bitmaps are read */
static void csum_desc(const struct fz_image *im, uint8_t *img, uint64_t table, uint32_t g)
{
	uint8_t *d = img + table + (uint64_t)g * im->desc_size;
	uint16_t flags = ld16(d + 0x12);
	for (int k = 0; k < 2 && g < 64; k++) {
		if (flags & (k ? BG_INODE_UNINIT : BG_BLOCK_UNINIT))
			continue;
		uint64_t loc = ld32(d + (k ? 4 : 0));
		if (im->desc_size >= 64)
			loc |= (uint64_t)ld32(d + (k ? 0x24 : 0x20)) << 32;
		uint32_t len = (k ? im->inodes_per_group : im->blocks_per_group) / 8;
		if (loc >= im->blocks_count || loc * im->bs + len > im->size)
			continue;
		uint32_t c = crc(im->csum_seed, img + loc * im->bs, len);
		st16(d + (k ? 0x1a : 0x18), (uint16_t)c);
		if (im->desc_size >= 64)
			st16(d + (k ? 0x3a : 0x38), (uint16_t)(c >> 16));
	}
	st16(d + 0x1e, 0);
	uint32_t le = g;
	st16(d + 0x1e, (uint16_t)crc(crc(im->csum_seed, &le, 4), d, im->desc_size));
}

static void csum_inode(const struct fz_image *im, uint8_t *img, uint32_t ino)
{
	uint32_t g = (ino - 1) / im->inodes_per_group;
	if (g >= 64)
		return;
	uint8_t *in = img + im->itable[g] * im->bs + (uint64_t)((ino - 1) % im->inodes_per_group) * im->inode_size;
	bool hi = im->inode_size > 128 && ld16(in + 128) >= 4;
	st16(in + 0x7c, 0);
	if (hi)
		st16(in + 0x82, 0);
	uint32_t c = crc(inode_seed(im, img, ino), in, im->inode_size);
	st16(in + 0x7c, (uint16_t)c);
	if (hi)
		st16(in + 0x82, (uint16_t)(c >> 16));
}

/* dx root or node: count/limit offset, or 0 when the block is no dx block the tail can be found in */
static uint32_t dx_count_offset(const struct fz_image *im, const uint8_t *b, bool root)
{
	if (!root)
		return ld32(b) == 0 && ld16(b + 4) == im->bs && b[6] == 0 ? 8 : 0;
	return ld16(b + 4) == 12 && ld16(b + 16) == im->bs - 12 && ld32(b + 24) == 0 && b[29] == 8 ? 32 : 0;
}

static void csum_block(const struct fz_image *im, uint8_t *img, const struct fz_block *b)
{
	uint8_t *p = img + b->blk * im->bs;
	switch (b->kind) {
	case FZ_EXTENT: {
		uint32_t tail = 12 + 12u * ld16(p + 4);
		if (ld16(p) == EXT_MAGIC && tail + 4 <= im->bs)
			st32(p + tail, crc(inode_seed(im, img, b->ino), p, tail));
		break;
	}
	case FZ_DIR: {
		uint8_t *t = p + im->bs - 12;
		if (ld32(t) == 0 && ld16(t + 4) == 12 && t[6] == 0 && t[7] == 0xde)
			st32(t + 8, crc(inode_seed(im, img, b->ino), p, im->bs - 12));
		break;
	}
	case FZ_HTREE_ROOT:
	case FZ_HTREE_NODE: {
		uint32_t co = dx_count_offset(im, p, b->kind == FZ_HTREE_ROOT);
		uint16_t limit = co ? ld16(p + co) : 0, count = co ? ld16(p + co + 2) : 0;
		if (!co || count > limit || co + 8u * limit + 8 > im->bs)
			break;
		uint8_t *t = p + co + 8u * limit, zero[4] = { 0 };
		uint32_t c = crc(inode_seed(im, img, b->ino), p, co + 8u * count);
		st32(t + 4, crc(crc(c, t, 4), zero, 4));
		break;
	}
	case FZ_XATTR: {
		uint64_t le = b->blk;
		st32(p + 0x10, 0);
		st32(p + 0x10, crc(crc(im->csum_seed, &le, 8), p, im->bs));
		break;
	}
	case FZ_BBITMAP:
	case FZ_IBITMAP:                            /* its checksums are in the primary descriptor */
		csum_desc(im, img, (uint64_t)(im->first_data_block + 1) * im->bs, b->ino);
		break;
	default:
		break;
	}
}

/* the superblock or descriptor copy the byte at `off` lies in: repaired in img */
static bool repair_sb_gdt(const struct fz_image *im, uint8_t *img, uint64_t off)
{
	uint64_t blk = off / im->bs;
	if (off >= 1024 && off < 2048) {
		csum_sb(img + 1024);
		return true;
	}
	for (size_t i = 0; i < im->nmeta; i++) {
		const struct fz_block *b = &im->meta[i];
		if (b->blk != blk || (b->kind != FZ_SB && b->kind != FZ_GDT))
			continue;
		if (b->kind == FZ_SB) {                /* a backup: at the start of its block */
			if (off % im->bs < 1024)
				csum_sb(img + blk * im->bs);
		} else {                               /* the table fits one block in these images */
			uint32_t g = (uint32_t)(off % im->bs / im->desc_size);
			if (g < im->groups)
				csum_desc(im, img, blk * im->bs, g);
		}
		return true;
	}
	return false;
}

/* what the edit at byte `off` lies in: repaired in img */
static void repair_at(const struct fz_image *im, uint8_t *img, uint64_t off)
{
	if (repair_sb_gdt(im, img, off))
		return;
	for (uint32_t g = 0; g < im->groups && g < 64; g++) {
		uint64_t t0 = im->itable[g] * im->bs, tlen = (uint64_t)im->inodes_per_group * im->inode_size;
		if (off >= t0 && off < t0 + tlen) {
			csum_inode(im, img, g * im->inodes_per_group + (uint32_t)((off - t0) / im->inode_size) + 1);
			return;
		}
	}
	const struct fz_block *b = meta_of(im, off / im->bs);
	if (b)
		csum_block(im, img, b);
}

void fz_repair_range(const struct fz_image *im, uint8_t *img, uint64_t off, uint64_t len, int pass)
{
	if (!im->metadata_csum)
		return;
	for (uint64_t at = off; at < off + len && at < im->size; at += im->bs - at % im->bs)
		if (pass == 0)
			repair_at(im, img, at);
		else                                       /* again: a bitmap repaired after its descriptor */
			repair_sb_gdt(im, img, at);
}

int fz_repair_csums(const struct fz_image *im, struct fz_mutant *m)
{
	if (!im->metadata_csum)
		return 0;
	uint8_t *img = malloc(im->size);
	if (!img)
		return -1;
	memcpy(img, im->data, im->size);
	fz_apply(m, img, im->size);
	size_t nmut = m->nedits;
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < nmut; i++)
			fz_repair_range(im, img, m->edits[i].off, (uint64_t)m->edits[i].plen * m->edits[i].rep, pass);
	/* every byte that now differs from the mutant is a checksum byte */
	struct fz_mutant applied = *m;
	uint8_t *want = malloc(im->size);
	int added = 0;
	if (!want) {
		free(img);
		return -1;
	}
	memcpy(want, im->data, im->size);
	fz_apply(&applied, want, im->size);
	for (size_t off = 0; off < im->size && added >= 0; off++) {
		if (img[off] == want[off])
			continue;
		size_t len = 1;
		while (off + len < im->size && len < 4 && img[off + len] != want[off + len])
			len++;
		if (m->nedits >= FZ_MAX_EDITS) {
			added = -1;
			break;
		}
		struct fz_edit *e = &m->edits[m->nedits++];
		e->off = off;
		e->plen = (uint16_t)len;
		e->rep = 1;
		memcpy(e->pat, img + off, len);
		added++;
		off += len - 1;
	}
	free(want);
	free(img);
	return added;
}

/* ------------------------------------------------------------ checksum flips */

/* the byte range [*lo, *hi) of block b a checksum covers, false when none does */
static bool covered(const struct fz_image *im, const struct fz_block *b, uint32_t *lo, uint32_t *hi)
{
	const uint8_t *p = im->data + b->blk * im->bs;
	*lo = 0;
	*hi = im->bs;
	switch (b->kind) {
	case FZ_SB:
		if (b->ino)                            /* backups: the checker compares, the kernel never reads them */
			return false;
		*lo = im->bs == 1024 ? 0 : 1024;
		*hi = *lo + 1024;
		return true;
	case FZ_GDT:
		if (b->ino || b->blk != im->first_data_block + 1u)
			return false;                  /* backups and the descriptor table's later blocks */
		*hi = im->groups * im->desc_size < im->bs ? im->groups * im->desc_size : im->bs;
		return true;
	case FZ_BBITMAP:
	case FZ_IBITMAP:
		if (b->ino >= 64 || (im->bg_flags[b->ino] & (b->kind == FZ_BBITMAP ? BG_BLOCK_UNINIT : BG_INODE_UNINIT)))
			return false;                  /* an uninitialised group's bitmap is never read */
		*hi = (b->kind == FZ_BBITMAP ? im->blocks_per_group : im->inodes_per_group) / 8;
		return true;
	case FZ_EXTENT:
	case FZ_XATTR:
		return true;
	case FZ_DIR:
		return ld16(p + im->bs - 8) == 12 && p[im->bs - 5] == 0xde;
	case FZ_HTREE_ROOT:
	case FZ_HTREE_NODE: {
		uint32_t co = dx_count_offset(im, p, b->kind == FZ_HTREE_ROOT);
		if (!co)
			return false;
		*hi = co + 8u * ld16(p + co + 2);      /* entries past count are not covered */
		return true;
	}
	default:
		return false;
	}
}

void fz_draw_csumflip(const struct fz_image *im, uint64_t *s, struct fz_mutant *m)
{
	if (!im->metadata_csum)
		return;
	uint64_t off;
	if (fz_below(s, 5) == 0 && im->nused) {    /* an in-use inode: all of its record is covered */
		off = im->inode_off[fz_below(s, (uint32_t)im->nused)] + fz_below(s, im->inode_size);
	} else {
		const struct fz_block *b = &im->meta[fz_below(s, (uint32_t)im->nmeta)];
		uint32_t lo, hi;
		if (!covered(im, b, &lo, &hi) || hi <= lo)
			return;
		off = b->blk * im->bs + lo + fz_below(s, hi - lo);
	}
	uint8_t x = im->data[off] ^ (uint8_t)(1u << fz_below(s, 8));
	fz_edit_le(m, off, x, 1);
}
