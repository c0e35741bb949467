/*
 * checker/scan_ext4.c - the parts of chk_scan (the base case) that only
 * ext4 features ask for, judged as e2fsck judges them (its super.c and
 * pass 5): group descriptors and their checksums, flex_bg's freedom of
 * placement, bitmap and superblock checksums; and, for every image, the
 * bitmaps' padding past each group's bits.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chk_ext4.h"

#define V(id, ...) chk_verdict_add_violation(v, id, NULL, 0, __VA_ARGS__)

static void scan_sb_csum(struct chk_fs *fs, struct chk_verdict *v)
{
	if (!fs->csum.metadata_csum)
		return;
	if (fs->sb->s_checksum_type != EXT2_CRC32C_CHKSUM)
		V(INV_CSUM_SB, "superblock checksum type %u is not crc32c", fs->sb->s_checksum_type);
	else if (!chk_sb_csum_ok(fs->sb_raw))
		V(INV_CSUM_SB, "superblock checksum 0x%08x, want 0x%08x", fs->sb->s_checksum,
		  chk_sb_csum(fs->sb_raw));
}

/* Without flex_bg a group's bitmaps and table lie in the group (e2fsck:
 * "block bitmap for group N is not in group"). */
static void scan_placement(struct chk_fs *fs, struct chk_verdict *v, uint32_t g, const uint8_t *d)
{
	if (fs->flex_bg)
		return;
	uint64_t start = fs->first_data_block + (uint64_t)g * fs->bpg;
	uint64_t end = start + fs->bpg < fs->blocks_count ? start + fs->bpg : fs->blocks_count;
	uint64_t bb = chk_gd_bbitmap(fs, d), ib = chk_gd_ibitmap(fs, d), it = chk_gd_itable(fs, d);
	const char *what = bb < start || bb >= end ? "block bitmap" : ib < start || ib >= end ? "inode bitmap" :
			   it < start || it + fs->itable_blocks > end ? "inode table" : NULL;
	if (what)
		V(INV_BGD_FROZEN, "group %u: its %s lies outside the group (blocks %llu..%llu) without flex_bg", g,
		  what, (unsigned long long)start, (unsigned long long)end - 1);
}

/* The descriptor's checksum.  e2fsck -n also names an UNINIT flag without
 * descriptor checksums, a BLOCK_UNINIT last group and a bg_itable_unused
 * beyond the free inodes, yet calls the image clean when nothing else is
 * wrong (the kernel copes with all three): the scan does not report them,
 * transactions may not make them (INV_BGD_UNINIT). */
static bool scan_gd_csum(struct chk_fs *fs, struct chk_verdict *v, uint32_t g, const uint8_t *d)
{
	if (!fs->group_csum || chk_gd_csum_ok(&fs->csum, g, d))
		return true;
	V(INV_CSUM_BGD, "group %u: descriptor checksum 0x%04x, want 0x%04x", g, chk_gd_checksum(d),
	  chk_gd_csum(&fs->csum, g, d));
	return false;
}

/* e2fsck reads the bytes of a bitmap block past the group's bits as
 * padding that must be all ones (libext2fs's tail check, any group). */
/* Every byte from FROM on is 0xff: the first is, and each equals the one
 * before (one overlapping memcmp: a byte loop was a tenth of a 15 TiB
 * mount's CPU, 122,880 inode bitmaps of 3 KiB padding each). */
static bool tail_set(const uint8_t *buf, uint32_t from, uint32_t bs)
{
	return from >= bs || (buf[from] == 0xff && !memcmp(buf + from, buf + from + 1, bs - from - 1));
}

enum {
	BMNOTE_KNOWN = 1,
	BMNOTE_PAD_BAD = 2,            /* << k: k 0 block bitmap, 1 inode bitmap */
	BMNOTE_CSUM_BAD = 8,           /* << k */
};

/* What is wrong with one of group g's bitmaps (BMNOTE_ bits of kind k) */
static uint8_t bitmap_faults(const struct chk_fs *fs, const uint8_t *d, int k, const uint8_t *buf)
{
	bool inode = k == 1;
	uint32_t nbytes = (inode ? fs->ipg : fs->bpg) / 8;
	uint8_t f = 0;
	if (!tail_set(buf, nbytes, fs->bs))
		f |= BMNOTE_PAD_BAD << k;
	if (fs->csum.metadata_csum &&
	    !(inode ? chk_ibitmap_csum_ok(&fs->csum, d, buf, nbytes) : chk_bbitmap_csum_ok(&fs->csum, d, buf, nbytes)))
		f |= BMNOTE_CSUM_BAD << k;
	return f;
}

void chk_note_group_bitmaps(struct chk_fs *fs, uint32_t g, const uint8_t *bb, const uint8_t *ib)
{
	if (!fs->bmnote && !(fs->bmnote = calloc(fs->ngroups, 1)))
		return;
	const uint8_t *d = chk_gd(fs, g);
	fs->bmnote[g] = BMNOTE_KNOWN | bitmap_faults(fs, d, 0, bb) | bitmap_faults(fs, d, 1, ib);
}

/* A group's bitmaps, as pass 5 reads them: their checksums (metadata_csum;
 * a flagged group is skipped whatever its descriptor's checksum) and their
 * padding (a group libext2fs reads: an UNINIT flag counts only under a
 * descriptor checksum that verifies, gd_ok, as chk_group_block_uninit has
 * it; the last group's block bitmap, whose padding starts inside the group,
 * is scan.c's).  Neither is read for a flagged group of a verified
 * descriptor: most groups of a big ext4 disk; nor for a group the attach
 * noted. */
static void scan_bitmaps(struct chk_fs *fs, struct chk_verdict *v, uint32_t g, const uint8_t *d,
			 bool gd_ok, uint8_t *buf, int *err)
{
	/* a pristine group's bitmaps are the seal's (checker/README.md, "The
	 * seal"): reading them is what a sealed mount of a disk is spared */
	if (fs->pristine && bit_get(fs->pristine, g))
		return;
	uint16_t flags = chk_gd_flags(d);
	bool honoured = fs->group_csum && gd_ok;
	uint8_t note = fs->bmnote ? fs->bmnote[g] : 0;
	for (int k = 0; k < 2 && !*err; k++) {
		bool inode = k == 1;
		uint16_t flag = inode ? EXT2_BG_INODE_UNINIT : EXT2_BG_BLOCK_UNINIT;
		bool csum = fs->csum.metadata_csum && !(flags & flag);
		bool tail = !(honoured && (flags & flag)) && (inode || g + 1 < fs->ngroups);
		if (!csum && !tail)
			continue;
		uint8_t faults = note & ~BMNOTE_KNOWN;
		if (!(note & BMNOTE_KNOWN)) {
			int r = fs->read(fs->ctx, (inode ? chk_gd_ibitmap(fs, d) : chk_gd_bbitmap(fs, d)) * fs->bs, buf,
					 fs->bs);
			if (r) {
				*err = r < 0 ? r : -EIO;
				return;
			}
			faults = bitmap_faults(fs, d, k, buf);
		}
		uint32_t nbytes = (inode ? fs->ipg : fs->bpg) / 8;
		if (csum && (faults & (BMNOTE_CSUM_BAD << k)))
			V(INV_CSUM_BITMAP, "group %u: %s bitmap checksum does not match its descriptor", g,
			  inode ? "inode" : "block");
		if (tail && (faults & (BMNOTE_PAD_BAD << k)))
			V(INV_BITMAP_PADDING, "group %u: %s bitmap padding past its %u bits is not all set", g,
			  inode ? "inode" : "block", nbytes * 8);
	}
}

void chk_scan_groups(struct chk_fs *fs, struct chk_verdict *v, uint8_t *buf, int *err)
{
	scan_sb_csum(fs, v);
	for (uint32_t g = 0; g < fs->ngroups && !*err; g++) {
		const uint8_t *d = chk_gd(fs, g);
		scan_placement(fs, v, g, d);
		bool gd_ok = scan_gd_csum(fs, v, g, d);
		scan_bitmaps(fs, v, g, d, gd_ok, buf, err);
	}
}

struct orphan_walk {
	struct chk_fs *fs;
	struct chk_verdict *v;
	uint32_t ino, gen, nblocks;
	uint8_t *buf, *seen;             /* seen: the logical blocks mapped */
	int err;
	bool reported;
};

static bool orphan_visit(void *ctx, const struct chk_span *sp)
{
	struct orphan_walk *o = ctx;
	struct chk_fs *fs = o->fs;
	struct chk_verdict *v = o->v;
	if (sp->type != BT_DATA)
		return true;
	for (uint32_t k = 0; k < sp->len && !o->err && !o->reported; k++) {
		uint32_t lb = sp->lblk + k;
		uint64_t pb = sp->blk + k;
		if (lb >= o->nblocks)
			break;
		bit_put(o->seen, lb, true);
		int r = chk_read_block(fs, pb, o->buf);
		if (r) {
			o->err = r;
			break;
		}
		uint32_t tail = fs->bs - 8;
		const char *why = chk_ld32(o->buf + tail) != CHK_ORPHAN_MAGIC ? "no orphan-block magic" :
				  fs->csum.metadata_csum &&
				  chk_ld32(o->buf + tail + 4) != chk_orphan_block_csum(&fs->csum, o->ino, o->gen, pb, o->buf,
										    fs->bs) ? "checksum does not match" :
				  !fs->csum.metadata_csum && chk_ld32(o->buf + tail + 4) ? "a checksum without metadata_csum" :
				  NULL;
		if (why) {
			V(INV_ORPHAN_FILE, "orphan file %u, block %u (%llu): %s", o->ino, lb, (unsigned long long)pb, why);
			o->reported = true;
		}
	}
	return true;
}

void chk_scan_orphan_file(struct chk_fs *fs, struct chk_verdict *v, uint8_t *buf, int *err)
{
	uint32_t ino = fs->orphan_file_ino;
	if (!ino || *err)
		return;
	uint8_t *raw = malloc(fs->inode_size);
	if (!raw) {
		*err = -ENOMEM;
		return;
	}
	const struct ext2_inode *in = (const void *)raw;
	/* a read that failed is the caller's error, not a verdict on the file */
	int r = ino > fs->inodes_count ? 0 : chk_read_inode(fs, ino, raw);
	if (r) {
		*err = r;
		free(raw);
		return;
	}
	if (ino > fs->inodes_count || !chk_ibit(fs, ino) || imode_type(in) != 0100000) {
		V(INV_ORPHAN_FILE, "orphan file %u is not a regular file in use", ino);
		free(raw);
		return;
	}
	uint64_t size = chk_inode_size64(in);
	struct orphan_walk o = { fs, v, ino, in->i_generation, (uint32_t)(size / fs->bs), buf, NULL, 0, false };
	if (size % fs->bs || size / fs->bs > UINT32_MAX) {
		V(INV_ORPHAN_FILE, "orphan file %u: i_size %llu is not a whole number of blocks", ino,
		  (unsigned long long)size);
	} else if ((o.seen = calloc(o.nblocks / 8 + 1, 1))) {
		int r = chk_walk_inode_tree(fs, in, false, chk_read_block_cb, fs, orphan_visit, &o, NULL, 0);
		if (r < 0)
			o.err = r;
		for (uint32_t b = 0; b < o.nblocks && !o.err && !o.reported; b++)
			if (!bit_get(o.seen, b)) {
				V(INV_ORPHAN_FILE, "orphan file %u: block %u is a hole", ino, b);
				break;
			}
	} else {
		o.err = -ENOMEM;
	}
	if (o.err)
		*err = o.err;
	free(o.seen);
	free(raw);
}
