/*
 * checker/chk_ext4.h - internal to checker/: the ext4 on-disk formats the
 * checker parses from bytes alone, beside the ext2/3 ones of chk_internal.h.
 *
 *   csum.c    metadata checksums (metadata_csum's crc32c, uninit_bg's crc16):
 *             superblock, group descriptors, bitmaps, inodes, extent blocks,
 *             directory leaf and index blocks, xattr blocks
 *   extent.c  extent tree nodes: the header and entry rules of the kernel's
 *             ext4_ext_check and e2fsck's pass 1, and a walk of a whole tree
 *
 * Every function is a pure function of its arguments (the walk reads
 * through its caller's callback); any thread.  Byte buffers are on-disk
 * little-endian contents, read through chk_ld16/chk_ld32.
 */
#ifndef RECON_CHK_EXT4_H
#define RECON_CHK_EXT4_H

#include "chk_internal.h"

/* ---- csum.c ---- */

/* struct chk_csum (chk_internal.h): what one file system's checksums need */
void chk_csum_init(struct chk_csum *c, const uint8_t sb[1024]);

uint32_t chk_crc32c(uint32_t crc, const void *p, size_t len);
uint16_t chk_crc16(uint16_t crc, const void *p, size_t len);

/* Each *_csum computes what the structure's checksum field should hold;
 * each *_csum_ok says whether it does (true when the feature asks for no
 * checksum). */
uint32_t chk_sb_csum(const uint8_t sb[1024]);
bool     chk_sb_csum_ok(const uint8_t sb[1024]);
/* desc: c->desc_size bytes of group g's descriptor */
uint16_t chk_gd_csum(const struct chk_csum *c, uint32_t g, const uint8_t *desc);
bool     chk_gd_csum_ok(const struct chk_csum *c, uint32_t g, const uint8_t *desc);
/* bitmap: the group's bitmap bytes that count (blocks or inodes per group
 * / 8); compared with the lo (and, with 64-byte descriptors, hi) halves in
 * desc */
uint32_t chk_bitmap_csum(const struct chk_csum *c, const uint8_t *bitmap, size_t len);
bool     chk_bbitmap_csum_ok(const struct chk_csum *c, const uint8_t *desc, const uint8_t *bitmap,
			     size_t len);
bool     chk_ibitmap_csum_ok(const struct chk_csum *c, const uint8_t *desc, const uint8_t *bitmap,
			     size_t len);
/* raw: c->inode_size bytes of inode ino.  An all-zero inode passes, as in
 * e2fsck (a never-used slot of an initialised table). */
uint32_t chk_inode_csum(const struct chk_csum *c, uint32_t ino, const uint8_t *raw);
bool     chk_inode_csum_ok(const struct chk_csum *c, uint32_t ino, const uint8_t *raw);
/* The seed of the structures an inode owns: crc32c over its number and
 * i_generation. */
uint32_t chk_inode_seed(const struct chk_csum *c, uint32_t ino, uint32_t generation);
/* An extent tree block (bs bytes) of the inode whose seed is given; false
 * too when eh_max leaves no room for the tail. */
bool     chk_extent_block_csum_ok(const struct chk_csum *c, uint32_t iseed, const uint8_t *blk,
				  uint32_t bs);

/* A directory block's checksum: a leaf ends in a 12-byte tail entry
 * (found by walking rec_len, as the kernel leaves stale tail-like bytes in
 * an index root), an index root or node ends its dx_entry array with an
 * 8-byte tail. */
enum chk_dir_csum { CHK_DIR_CSUM_OK, CHK_DIR_CSUM_BAD, CHK_DIR_CSUM_NO_TAIL };
enum chk_dir_csum chk_dir_block_csum(const struct chk_csum *c, uint32_t iseed, const uint8_t *blk,
				     uint32_t bs);
/* An index block's form with metadata_csum: no leaf tail, an index root's
 * or node's layout with a dx tail.  A directory without the index flag must
 * have none (e2fsck: "no space for a checksum"; the kernel: a bad block). */
bool chk_dir_block_is_dx(const uint8_t *blk, uint32_t bs);
/* Store the right checksum in a directory, extent, xattr block or inode
 * (tests and fuzzers: mutants whose structure, not checksum, is wrong).
 * 0, or -EINVAL when the block has no place for one. */
int chk_dir_block_csum_set(const struct chk_csum *c, uint32_t iseed, uint8_t *blk, uint32_t bs);
int chk_extent_block_csum_set(const struct chk_csum *c, uint32_t iseed, uint8_t *blk, uint32_t bs);
void chk_inode_csum_set(const struct chk_csum *c, uint32_t ino, uint8_t *raw);
/* An orphan-file block (bs bytes) of the orphan file ino, generation gen,
 * at block number blknr: the checksum over its entries (all but the
 * 8-byte tail, whose magic precedes the checksum). */
#define CHK_ORPHAN_MAGIC 0x0b10ca04u
uint32_t chk_orphan_block_csum(const struct chk_csum *c, uint32_t ino, uint32_t gen, uint64_t blknr,
			       const uint8_t *blk, uint32_t bs);
/* A shared xattr block at block number blknr (bs bytes). */
uint32_t chk_xattr_block_csum(const struct chk_csum *c, uint64_t blknr, const uint8_t *blk,
			      uint32_t bs);
bool     chk_xattr_block_csum_ok(const struct chk_csum *c, uint64_t blknr, const uint8_t *blk,
				 uint32_t bs);

/* ---- extent.c ---- */

#define CHK_EXT_MAGIC 0xF30Au
#define CHK_EXT_MAX_DEPTH 5u              /* the deepest tree the kernel reads */
#define CHK_EXT_READ_DEPTH 32u            /* the deepest the checker reads: e2fsck reads any */
#define CHK_EXT_INIT_MAX_LEN 32768u      /* an initialised extent's longest run */

struct chk_ext_header { uint16_t magic, entries, max, depth; };
static inline struct chk_ext_header chk_ext_header_at(const uint8_t *p)
{
	return (struct chk_ext_header){ chk_ld16(p), chk_ld16(p + 2), chk_ld16(p + 4), chk_ld16(p + 6) };
}
/* One leaf entry (a run of blocks) or index entry (a child node). */
struct chk_ext {
	uint32_t lblk;           /* first logical block */
	uint32_t len;            /* blocks (leaf); 0 for an index entry */
	uint64_t pblk;           /* first physical block, or the child node */
	bool unwritten;          /* leaf: allocated, reads as zeros */
};
/* Entry i (0-based) of a node whose header says depth: a leaf entry when
 * depth is 0, else an index entry.  The caller checked i < entries. */
struct chk_ext chk_ext_entry(const uint8_t *node, uint16_t depth, unsigned i);

/* What bounds a node's entries: the logical range its parent's index entry
 * gives it [lo, hi) (hi = 2^32 at the root and past the last index entry),
 * and the depth it must have (-1: any up to the maximum, for the root). */
struct chk_ext_bounds { uint64_t lo, hi; int depth; };

/*
 * What is wrong with one node of `size` bytes (60 for the root in i_block,
 * the block size for a tree block), NULL if nothing: the header (magic,
 * entries <= max, max what the container holds, less up to 2 entries as
 * e2fsck allows, depth as expected and within CHK_EXT_READ_DEPTH: e2fsck
 * only offers to make a deeper tree than the kernel's 5 shallower), then every
 * entry (logical order strictly increasing without overlap, inside the
 * bounds, a leaf run of 1..32768 blocks or 1..32767 unwritten, physical
 * blocks inside [first_data_block, blocks_count)).  The message is in buf.
 */
const char *chk_ext_node_problem(const uint8_t *node, size_t size, struct chk_ext_bounds b,
				 uint64_t first_data_block, uint64_t blocks_count, char *buf,
				 size_t len);

/*
 * Walk the tree rooted in i_block (60 bytes), depth first in logical order;
 * a child node's first entry starts where its index entry says (e2fsck).
 * visit_node is called for each tree block (its physical number, depth and
 * contents) and returns false to skip its subtree; visit_ext is called for
 * each leaf run and returns false to stop the walk.  get reads a tree block's contents (bs bytes) into buf.  A node
 * with a problem stops the walk with its message in buf (returns 1); each
 * tree block is visited at most once (a block named twice is a problem).
 * Returns 0 walked, 1 a problem (message in buf), or get's -errno; -ENOMEM.
 */
struct chk_ext_walk {
	uint32_t bs;
	uint64_t first_data_block, blocks_count;
	blk_get_fn get;
	void *get_ctx;
	bool (*visit_node)(void *ctx, uint64_t pblk, uint16_t depth, const uint8_t *node);
	bool (*visit_ext)(void *ctx, const struct chk_ext *e);
	void *ctx;
};
int chk_ext_walk(const struct chk_ext_walk *w, const uint8_t i_block[60], char *buf, size_t len);
/* The physical block of logical block lblk (0: a hole, a node on the way
 * that is not one, or an error); *unwritten (may be NULL) says whether its
 * extent is unwritten; *err (may be NULL) gets w->get's error or -ENOMEM,
 * and is left alone otherwise.  Reads through w->get; the visit callbacks
 * are not used. */
uint64_t chk_ext_bmap(const struct chk_ext_walk *w, const uint8_t i_block[60], uint32_t lblk, bool *unwritten,
		      int *err);
/* The last logical block the tree maps and the last of an initialised
 * extent (-1: none), from the right: 0 or get's -errno. */
int chk_ext_last(const struct chk_ext_walk *w, const uint8_t i_block[60], int64_t *last, int64_t *last_init);

/* ---- scan_ext4.c: chk_scan's parts for ext4 ---- */

/* The descriptors (checksums, UNINIT flags and bg_itable_unused, where
 * their bitmaps and table lie), the bitmaps' checksums and the
 * superblock's.  buf: one block of scratch; a read error goes to *err. */
void chk_scan_groups(struct chk_fs *fs, struct chk_verdict *v, uint8_t *buf, int *err);
/* Group g's bitmaps as the attach read them from the disk (bb, ib: one
 * block each): their padding and checksums, judged now so that
 * chk_scan_groups need not read them again (a 15 TiB disk has 122,880
 * groups).  Without memory nothing is noted and the scan reads them. */
void chk_note_group_bitmaps(struct chk_fs *fs, uint32_t g, const uint8_t *bb, const uint8_t *ib);
/* The orphan file (orphan_file): a regular file in use, no hole below
 * i_size, every block with the tail's magic and (metadata_csum) checksum
 * (its entries are orphan_file.c's). */
void chk_scan_orphan_file(struct chk_fs *fs, struct chk_verdict *v, uint8_t *buf, int *err);
/* orphan_file.c: a scan's ORPHAN_PRESENT rule (t: the scan's transaction) */
void chk_scan_orphan_present(struct chk_fs *fs, struct txn *t, struct chk_verdict *v);

#endif
