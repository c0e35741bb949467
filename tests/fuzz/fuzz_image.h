/*
 * tests/fuzz/fuzz_image.h - the checker fuzzers' shared parts: a small
 * populated ext3 image made by mke2fs/debugfs (deterministic: fixed UUID,
 * hash seed and time), the list of its metadata blocks by kind (found with
 * libext2fs: the fuzzers' own bookkeeping, never the checker's), and
 * mutations described as edit lists that replay byte for byte.
 */
#ifndef RECON_FUZZ_IMAGE_H
#define RECON_FUZZ_IMAGE_H

#include <stddef.h>
#include <stdint.h>

enum fz_kind {
	FZ_SB, FZ_GDT, FZ_BBITMAP, FZ_IBITMAP, FZ_ITABLE, FZ_DIR, FZ_HTREE_ROOT, FZ_HTREE_NODE,
	FZ_IND, FZ_DIND, FZ_TIND, FZ_XATTR, FZ_JSB, FZ_EXTENT, FZ_NKINDS
};

struct fz_block { uint64_t blk; uint8_t kind; uint32_t ino; };

#define FZ_MAX_INODES 512
struct fz_image {
	uint32_t bs;
	uint8_t *data;
	size_t size;
	struct fz_block *meta;
	size_t nmeta;
	uint32_t blocks_count, inodes_count, inode_size;
	uint32_t inodes_per_group, blocks_per_group, groups, desc_size, first_data_block;
	bool metadata_csum;
	uint32_t csum_seed;
	uint64_t itable[64];                  /* inode table per group (the first 64 groups) */
	uint16_t bg_flags[64];
	uint32_t used_inodes[FZ_MAX_INODES];  /* in-use inodes (the root and >= first_ino) */
	uint64_t inode_off[FZ_MAX_INODES];    /* their byte offsets in the image */
	size_t nused;
};

/* Mutation classes (the fuzzers report counts per class). */
enum fz_class {
	FC_FLIP,      /* random bytes of a random metadata block */
	FC_DIRENT,    /* rec_len / name_len / inode / file type of a directory entry */
	FC_HTREE,     /* htree root info, count/limit, hashes, block numbers */
	FC_XATTR,     /* xattr header and entry offsets/sizes/name lengths */
	FC_IND,       /* indirect pointers: zero, out of range, static, self, shared, repeated */
	FC_INODE,     /* i_size, i_links_count, i_blocks, i_block[], i_file_acl, mode, flags, dtime */
	FC_SB,        /* superblock geometry, counts, features */
	FC_GDT,       /* group descriptor locations and counts */
	FC_JSB,       /* journal superblock fields */
	FC_EXTENT,    /* extent headers, leaf entries (ee_len's unwritten bit, ee_start_hi), index entries */
	FC_BGD64,     /* 64-byte descriptors: _hi fields, bg_flags, bg_itable_unused, checksum fields */
	FC_CSUMFLIP,  /* one bit of a checksummed metadata object, its checksum left stale: must be rejected */
	FC_NCLASSES
};
extern const char *const fz_class_name[FC_NCLASSES];

/* One edit: a pattern of `plen` bytes written `rep` times from byte `off`. */
struct fz_edit { uint64_t off; uint16_t plen, rep; uint8_t pat[16]; };

#define FZ_MAX_EDITS 24   /* a mutation's edits, then its repaired checksums */
struct fz_mutant {
	uint32_t bs;
	int variant;                      /* 0: the base; 1: the base after a legitimate transition */
	uint64_t seed;
	int cls;
	size_t nedits;
	struct fz_edit edits[FZ_MAX_EDITS];
};

/* Bases made by mke2fs -t ext4 (extent trees, 64bit, flex_bg, metadata
 * checksums) instead of -t ext3; set before the first fz_make_base. */
extern bool fz_ext4;

/* Builds the before image for bs (variant 0) or the after-base of variant 1
 * (the before image after a legitimate debugfs transition) as dir/base-BS-V.img.
 * Returns 0 or -1 (message on stderr).  Needs mke2fs, debugfs, e2fsck. */
int fz_make_base(const char *dir, uint32_t bs, int variant, char *path, size_t pathlen);
/* Loads an image and lists its metadata blocks; 0 or -1. */
int fz_load(const char *path, struct fz_image *im);
void fz_free(struct fz_image *im);

/* Draws a mutant of class cls from seed (edits only; the image is unchanged). */
void fz_draw(const struct fz_image *im, int cls, uint64_t seed, struct fz_mutant *m);
/* ext4 mutation classes and checksums (fuzz_ext4.c). */
void fz_draw_extent(const struct fz_image *im, uint64_t *s, struct fz_mutant *m);
void fz_draw_bgd64(const struct fz_image *im, uint64_t *s, struct fz_mutant *m);
void fz_draw_csumflip(const struct fz_image *im, uint64_t *s, struct fz_mutant *m);
/* Recomputes, on a copy of im with m applied, every metadata_csum checksum
 * the edits touch (and the descriptor checksums that depend on a bitmap's),
 * appending the changed checksum bytes to m as edits: the mutant then
 * replays byte for byte without this code.  No-op without metadata_csum.
 * Returns the number of checksum edits added, or -1 when m has no room. */
int fz_repair_csums(const struct fz_image *im, struct fz_mutant *m);
/* The same on img (a copy of im, changed in [off, off + len)): pass 0 for
 * every changed range, then pass 1 for every one (descriptors again). */
void fz_repair_range(const struct fz_image *im, uint8_t *img, uint64_t off, uint64_t len, int pass);
/* The seeded generator fuzz_image.c draws with, for fuzz_ext4.c. */
uint64_t fz_next(uint64_t *s);
uint32_t fz_below(uint64_t *s, uint32_t n);
uint32_t fz_interesting(const struct fz_image *im, uint64_t *s, uint32_t cur);
void fz_edit_le(struct fz_mutant *m, uint64_t off, uint64_t v, unsigned size);
const struct fz_block *fz_pick(const struct fz_image *im, uint64_t *s, const uint8_t *kinds, size_t nk);

/* Applies m's edits to buf (a copy of the image). */
void fz_apply(const struct fz_mutant *m, uint8_t *buf, size_t size);
/* "bs=1024 v=0 seed=7 class=dirent edits=OFF:HEX[*REP],..." and back (0 or -1) */
void fz_describe(const struct fz_mutant *m, char *out, size_t len);
int fz_parse(const char *desc, struct fz_mutant *m);

#endif
