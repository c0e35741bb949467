/*
 * checker/chk_internal.h - internal header shared by the checker/ sources
 * only (owned by the checker work; not installed, not used outside checker/).
 *
 * Layout of the library:
 *   checker.c     u64 map, block cache, queries, verdicts, advance, stats
 *   attach.c      chk_attach: superblock, descriptors, layout, bitmaps, map
 *   layout_meta.c where superblock and descriptor copies lie (classic,
 *                 meta_bg, sparse_super2)
 *   inode.c       what an inode's fields may hold (types, sizes, ext4 fields)
 *   inode_map.c   an inode's block map: walk, one logical block, last block
 *   shadow.c      the approved state: static layout, per-group bitmaps,
 *                 paged type/owner map
 *   shadow_runs.c the type/owner map's runs (extent-mapped data)
 *   diff.c        chk_check: gathers a transaction's blocks, infers their
 *                 types and computes the logical diff (change records) and
 *                 the per-block / per-inode / per-entry facts
 *   invariants.c  the invariant table and one check function per row
 *   scan.c        chk_scan: the base case on a whole image
 *
 * On-disk integers are little endian; this code reads them in place and so
 * requires a little-endian host (checked at compile time).
 */
#ifndef RECON_CHK_INTERNAL_H
#define RECON_CHK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <ext2fs/ext2_fs.h>
#include <ext2fs/ext2_ext_attr.h>

#include "checker.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checker/ reads on-disk little-endian fields in place"
#endif

/* Loads from untrusted block contents go through memcpy: an on-disk
 * structure may sit at any offset a corrupt rec_len or offset field gives. */
static inline uint16_t chk_ld16(const uint8_t *p) { uint16_t v; __builtin_memcpy(&v, p, 2); return v; }
static inline uint32_t chk_ld32(const uint8_t *p) { uint32_t v; __builtin_memcpy(&v, p, 4); return v; }

/* The 8-byte header of a directory entry (struct ext2_dir_entry_2) at p;
 * the name follows it.  Callers check that 8 bytes are there. */
struct dirent_hdr {
	uint32_t inode;
	uint32_t rec_len;                /* 64 KiB blocks (65536 encoded) are refused at attach */
	uint8_t  name_len, file_type;
};
static inline struct dirent_hdr chk_dirent_at(const uint8_t *p)
{
	return (struct dirent_hdr){ chk_ld32(p), chk_ld16(p + 4), p[6], p[7] };
}
/* A well-formed entry at byte off of a bs-byte directory block: header
 * inside, rec_len a multiple of 4 that stays inside, the name inside
 * rec_len.  (Deleted entries, inode 0, may carry any name_len.) */
static inline bool chk_dirent_fits(struct dirent_hdr h, uint32_t off, uint32_t bs)
{
	return off + 8 <= bs && h.rec_len >= 8 && h.rec_len % 4 == 0 && h.rec_len <= bs - off &&
	       (!h.inode || 8u + h.name_len <= h.rec_len);
}

/* The invariants, by id (invariants.def: one table). */
enum chk_inv {
#define INV(id, fn, description, state) id,
#include "invariants.def"
#undef INV
	CHK_NINV
};

/* What a block is, in the type/owner map. */
enum blk_type {
	BT_FREE = 0,     /* pointed to by nobody (its bitmap bit may be anything) */
	BT_DATA,         /* file / symlink / journal data, owner = inode */
	BT_DIR,          /* directory block (dirents or an htree node), owner = dir */
	BT_IND,          /* single indirect, owner = inode */
	BT_DIND,
	BT_TIND,
	BT_XATTR,        /* shared xattr block, owner = first inode seen */
	BT_EXTENT,       /* extent tree block (below the root in i_block), owner = inode */
	/* static layout: never pointed to by an ordinary inode */
	BT_BOOT,         /* block 0 when the file system starts at block 1 */
	BT_SB,           /* primary or backup superblock */
	BT_GDT,          /* primary or backup group descriptor block */
	BT_RGDT,         /* reserved GDT block (owned by the resize inode) */
	BT_RESIZE_IND,   /* the resize inode's double-indirect block */
	BT_BBITMAP,
	BT_IBITMAP,
	BT_ITABLE,
	BT_NTYPES
};
static inline bool bt_static(uint8_t t) { return t >= BT_BOOT; }
static inline bool bt_indirect(uint8_t t) { return t == BT_IND || t == BT_DIND || t == BT_TIND; }
/* blocks of an inode's map, not its data: counted in nmeta */
static inline bool bt_map_meta(uint8_t t) { return bt_indirect(t) || t == BT_EXTENT; }

/* What one file system's checksums need, taken from its superblock
 * (csum.c). */
struct chk_csum {
	bool metadata_csum;      /* crc32c everywhere (ro_compat metadata_csum) */
	bool gdt_csum;           /* crc16 of descriptors only (ro_compat uninit_bg) */
	uint32_t seed;           /* crc32c seed: s_checksum_seed, or crc32c(~0, uuid) */
	uint8_t uuid[16];
	uint32_t desc_size;      /* 32, or s_desc_size with 64bit */
	uint32_t inode_size;
};

/* Open-addressing map u64 -> u32 (key stored +1 so that 0 means empty). */
struct u64map {
	uint64_t *keys;
	uint32_t *vals;
	size_t    cap, n;
};
/* put: 0, or -ENOMEM when a new key needs room (an existing key cannot fail) */
int   chk_u64map_put(struct u64map *m, uint64_t key, uint32_t val);
bool  chk_u64map_get(const struct u64map *m, uint64_t key, uint32_t *val);
/* room for n keys without growing: 0, or -ENOMEM (the map unchanged) */
int   chk_u64map_reserve(struct u64map *m, size_t n);
void  chk_u64map_del(struct u64map *m, uint64_t key);
void  chk_u64map_free(struct u64map *m);

/* Bounded LRU cache of approved metadata block contents. */
struct cache_ent {
	uint64_t blk;
	uint32_t prev, next;             /* LRU list by slot, most recent at head */
	uint8_t *data;
};
#define CACHE_NIL UINT32_MAX
struct blk_cache {
	struct u64map index;             /* blk -> slot */
	struct cache_ent *ents;          /* slots, grown up to cache_max */
	size_t nslots, capslots;
	uint32_t *free_slots;            /* slots released by chk_cache_drop */
	size_t nfree;
	uint32_t head, tail;
};

struct chk_fs {
	chk_read_fn read;
	chk_zero_fn zero;                /* may be NULL */
	struct chk_pool *pool;           /* pool.c; made at the first chk_check, NULL before */
	uint8_t *sealed;                 /* chk_set_sealed's ngroups bits, or NULL */
	uint8_t *pristine;               /* chk_options.pristine, ngroups bits, or NULL */
	/* scan_tail.c: pristine groups only claimed (chk_options.pristine_claimed)
	 * whose bitmaps are not verified yet: ngroups bits, each also deferred */
	uint8_t *claimed;                /* NULL: none */
	uint32_t nclaimed;
	/* scan.c: deferred table tails (chk_set_defer_tails): ngroups bits of
	 * the groups whose free inodes past the last in use are unchecked */
	bool defer_tails;
	uint8_t *deferred;               /* NULL: none */
	uint32_t ndeferred;
	void *ctx;
	uint8_t sb_raw[1024] __attribute__((aligned(8)));  /* approved primary superblock */
	const struct ext2_super_block *sb; /* = (void *)sb_raw */
	uint32_t bs;                     /* block size */
	uint64_t blocks_count;           /* with s_blocks_count_hi (64bit) */
	uint32_t inodes_count, bpg, ipg, first_data_block;
	uint32_t ngroups, inode_size, desc_size, desc_per_block, gdt_blocks, rgdt_blocks;
	uint32_t first_ino, inodes_per_block, itable_blocks, addr_per_block;
	uint32_t sb_blk;                 /* block holding byte 1024 */
	uint32_t sb_off;                 /* offset of the superblock in it */
	bool filetype, sparse, dir_index, large_file, has_journal;
	/* layout_meta.c: meta_bg descriptor placement from s_first_meta_bg,
	 * sparse_super2 superblock copies in s_backup_bgs only */
	bool meta_bg, sparse_super2;
	uint32_t first_meta_bg, backup_bgs[2];
	/* ext4: extent trees, bitmaps and tables anywhere, i_blocks_hi,
	 * directories past 65,000 subdirectories, 48-bit block pointers,
	 * descriptor flags and checksums (uninit_bg or metadata_csum) */
	bool extents, flex_bg, huge_file, dir_nlink, bit64, group_csum;
	struct chk_csum csum;
	uint32_t journal_ino;
	uint32_t orphan_file_ino;        /* orphan_file: its inode, else 0 */

	uint8_t *gd;                     /* approved descriptors (desc_size bytes each): chk_gd() */
	uint64_t gd_free_blocks, gd_free_inodes;   /* their sums, kept by chk_txn_apply */

	/* shadow.c: bitmaps and the type/owner map, complete for every block
	 * (see chk_attach) but stored only where something is in use */
	uint8_t **gbb;                   /* per group: block bitmap, NULL = its static blocks */
	uint8_t **gib;                   /* per group: inode bitmap, NULL = all clear */
	uint32_t *gstatic;               /* per group: static blocks in it */
	uint8_t *bmnote;                 /* per group: its bitmaps as the attach read them
					  * (scan_ext4.c's BMNOTE_ bits), NULL = none noted */
	struct bpage **bpages;           /* per BPAGE_N blocks: owned blocks, NULL = none */
	size_t nbpages;
	struct run_map *runs;            /* shadow_runs.c: extent-mapped data as ranges */
	struct sext *sext;               /* static layout extents, sorted */
	size_t nsext, capsext;
	uint32_t sext_maxlen;
	uint64_t resize_dind;            /* the resize inode's dind block, 0 = none */
	uint32_t *ndata;                 /* per inode: data/dir blocks owned */
	uint32_t *nmeta;                 /* per inode: indirect blocks owned */
	/* blocks found owned twice at attach (for chk_scan; capped) */
	struct dup_ent { uint64_t blk; uint32_t owner1, owner2; } *dups;
	size_t ndups;
	size_t nbadptr;                  /* out-of-range / static pointers at attach */
	struct dup_ent *badptrs;
	/* inode-table blocks the bad-blocks inode lists, sorted: e2fsck leaves
	 * the inodes stored there unread (in use, named by no entry) */
	uint64_t *bad_itable;
	size_t nbad_itable;

	struct blk_cache cache;
	size_t cache_max;                /* in blocks */
	struct chk_stats stats;
};

/* ---- group descriptors: 32 bytes, or s_desc_size (64 or more) with the
 * 64bit feature, whose second half holds the high halves of every field.
 * Every read of a descriptor field goes through these. ---- */
enum {
	GD_BBITMAP = 0x00, GD_IBITMAP = 0x04, GD_ITABLE = 0x08, GD_FREE_BLOCKS = 0x0C,
	GD_FREE_INODES = 0x0E, GD_USED_DIRS = 0x10, GD_FLAGS = 0x12, GD_EXCLUDE = 0x14,
	GD_BBITMAP_CSUM = 0x18, GD_IBITMAP_CSUM = 0x1A, GD_ITABLE_UNUSED = 0x1C, GD_CHECKSUM = 0x1E,
	GD_BBITMAP_HI = 0x20, GD_IBITMAP_HI = 0x24, GD_ITABLE_HI = 0x28, GD_FREE_BLOCKS_HI = 0x2C,
	GD_FREE_INODES_HI = 0x2E, GD_USED_DIRS_HI = 0x30, GD_ITABLE_UNUSED_HI = 0x32,
	GD_EXCLUDE_HI = 0x34, GD_BBITMAP_CSUM_HI = 0x38, GD_IBITMAP_CSUM_HI = 0x3A,
	GD_WIDE = 64                     /* the size from which the high halves exist */
};
/* group g's approved descriptor */
static inline const uint8_t *chk_gd(const struct chk_fs *fs, uint32_t g)
{
	return fs->gd + (size_t)g * fs->desc_size;
}
static inline uint64_t chk_gd_32(const struct chk_fs *fs, const uint8_t *d, unsigned lo, unsigned hi)
{
	return chk_ld32(d + lo) | (fs->desc_size >= GD_WIDE ? (uint64_t)chk_ld32(d + hi) << 32 : 0);
}
static inline uint32_t chk_gd_16(const struct chk_fs *fs, const uint8_t *d, unsigned lo, unsigned hi)
{
	return chk_ld16(d + lo) | (fs->desc_size >= GD_WIDE ? (uint32_t)chk_ld16(d + hi) << 16 : 0);
}
static inline uint64_t chk_gd_bbitmap(const struct chk_fs *fs, const uint8_t *d)
{ return chk_gd_32(fs, d, GD_BBITMAP, GD_BBITMAP_HI); }
static inline uint64_t chk_gd_ibitmap(const struct chk_fs *fs, const uint8_t *d)
{ return chk_gd_32(fs, d, GD_IBITMAP, GD_IBITMAP_HI); }
static inline uint64_t chk_gd_itable(const struct chk_fs *fs, const uint8_t *d)
{ return chk_gd_32(fs, d, GD_ITABLE, GD_ITABLE_HI); }
static inline uint32_t chk_gd_free_blocks(const struct chk_fs *fs, const uint8_t *d)
{ return chk_gd_16(fs, d, GD_FREE_BLOCKS, GD_FREE_BLOCKS_HI); }
static inline uint32_t chk_gd_free_inodes(const struct chk_fs *fs, const uint8_t *d)
{ return chk_gd_16(fs, d, GD_FREE_INODES, GD_FREE_INODES_HI); }
static inline uint32_t chk_gd_used_dirs(const struct chk_fs *fs, const uint8_t *d)
{ return chk_gd_16(fs, d, GD_USED_DIRS, GD_USED_DIRS_HI); }
static inline uint32_t chk_gd_itable_unused(const struct chk_fs *fs, const uint8_t *d)
{ return chk_gd_16(fs, d, GD_ITABLE_UNUSED, GD_ITABLE_UNUSED_HI); }
static inline uint64_t chk_gd_exclude(const struct chk_fs *fs, const uint8_t *d)
{ return chk_gd_32(fs, d, GD_EXCLUDE, GD_EXCLUDE_HI); }
static inline uint32_t chk_gd_bbitmap_csum(const struct chk_fs *fs, const uint8_t *d)
{ return chk_gd_16(fs, d, GD_BBITMAP_CSUM, GD_BBITMAP_CSUM_HI); }
static inline uint32_t chk_gd_ibitmap_csum(const struct chk_fs *fs, const uint8_t *d)
{ return chk_gd_16(fs, d, GD_IBITMAP_CSUM, GD_IBITMAP_CSUM_HI); }
static inline uint16_t chk_gd_flags(const uint8_t *d) { return chk_ld16(d + GD_FLAGS); }
static inline uint16_t chk_gd_checksum(const uint8_t *d) { return chk_ld16(d + GD_CHECKSUM); }

/* The superblock's 64-bit counts (the high halves only with 64bit). */
uint64_t chk_sb_blocks_count(const struct ext2_super_block *sb);
uint64_t chk_sb_free_blocks(const struct ext2_super_block *sb);

/* ---- shadow.c: the approved state, sized by what is in use ---- */
#define BPAGE_N 1024u                    /* blocks per page of the type/owner map */
int  chk_shadow_init(struct chk_fs *fs);  /* after parse_super; -ENOMEM */
void chk_shadow_free(struct chk_fs *fs);
/* static layout: add every extent (in marking order), then seal once
 * before any query, then load every group (chk_group_load) */
int  chk_static_add(struct chk_fs *fs, uint64_t blk, uint32_t len, uint8_t type, uint32_t owner);
int  chk_static_seal(struct chk_fs *fs);
void chk_static_mark_resize(struct chk_fs *fs, uint64_t blk);
uint32_t chk_group_static_blocks(const struct chk_fs *fs, uint32_t g);
/* type, owner and logical block of any block (BT_FREE / 0 past the end) */
uint8_t  chk_btype(const struct chk_fs *fs, uint64_t blk);
uint32_t chk_bowner(const struct chk_fs *fs, uint64_t blk);
uint32_t chk_blblk(const struct chk_fs *fs, uint64_t blk);
/* the types of the BPAGE_N blocks of blk's page (blk's at blk % BPAGE_N),
 * NULL when none of them is owned */
const uint8_t *chk_bpage_types(const struct chk_fs *fs, uint64_t blk);
/* the static blocks of group g as bits of its bitmap (buf: bs bytes), the
 * resize inode's dind block included */
void chk_group_static_bits(const struct chk_fs *fs, uint32_t g, uint8_t *buf);
/* Changing a block's entry: reserve its page (-ENOMEM, nothing changed),
 * then set (cannot fail); trim frees the page if nothing is left owned. */
int  chk_bmap_reserve(struct chk_fs *fs, uint64_t blk);
void chk_bmap_set(struct chk_fs *fs, uint64_t blk, uint8_t type, uint32_t owner, uint32_t lblk);
void chk_bmap_trim(struct chk_fs *fs, uint64_t blk);
/* ---- shadow_runs.c: extent runs in the type/owner map ----
 * A run: blocks [start, start + len) of one inode's data (BT_DATA) or
 * directory (BT_DIR), logical block lblk first.  Runs never overlap each
 * other nor a block of the paged map; chk_btype() and friends see both. */
struct chk_run {
	uint64_t start;
	uint32_t len, owner, lblk;
	uint8_t  type;
};
int  chk_runs_init(struct chk_fs *fs);
void chk_runs_free(struct chk_fs *fs);
size_t chk_runs_count(const struct chk_fs *fs);
/* the run holding blk */
bool chk_run_at(const struct chk_fs *fs, uint64_t blk, struct chk_run *out);
/* the first run that ends after blk (it may start after blk) */
bool chk_run_next(const struct chk_fs *fs, uint64_t blk, struct chk_run *out);
/* Memory for n changes (chk_run_add, or a chk_run_remove that splits a
 * run) to come: after it those cannot fail.  -ENOMEM, nothing changed.
 * chk_runs_trim gives back what a transaction left unused. */
int  chk_runs_reserve(struct chk_fs *fs, size_t n);
void chk_runs_trim(struct chk_fs *fs);
/* Add a run over blocks no run holds (merged with a run it continues):
 * 0, or -ENOMEM when nothing was reserved and memory is short. */
int  chk_run_add(struct chk_fs *fs, uint64_t start, uint32_t len, uint8_t type, uint32_t owner,
		 uint32_t lblk);
/* Blocks [start, start + len) leave every run (one reserved change). */
void chk_run_remove(struct chk_fs *fs, uint64_t start, uint64_t len);

/* The first block of [b, end) that is static or owned (pages or runs),
 * else end. */
uint64_t chk_first_taken(const struct chk_fs *fs, uint64_t b, uint64_t end);
/* Inodes of group g an inode scan reads: all, or with descriptor checksums
 * none of an INODE_UNINIT group and ipg - bg_itable_unused of others. */
uint32_t chk_group_used_inodes(const struct chk_fs *fs, uint32_t g);
/* approved bitmap bits */
bool chk_bbit(const struct chk_fs *fs, uint64_t blk);
bool chk_ibit(const struct chk_fs *fs, uint32_t ino);
/* a group's bitmap as on disk, or NULL (block: its static blocks; inode:
 * all clear) */
const uint8_t *chk_group_bbits(const struct chk_fs *fs, uint32_t g);
const uint8_t *chk_group_ibits(const struct chk_fs *fs, uint32_t g);
bool chk_group_inodes_any(const struct chk_fs *fs, uint32_t g);
/* Changing bits: reserve the group's bitmap (-ENOMEM), then copy in the
 * bitmap block as written (bits past the group's blocks or inodes are not
 * kept). */
int  chk_group_bits_reserve(struct chk_fs *fs, uint32_t g, bool inode);
void chk_group_bits_copy(struct chk_fs *fs, uint32_t g, bool inode, const uint8_t *src);
/* BLOCK_UNINIT / INODE_UNINIT as libext2fs reads them (descriptor
 * checksums on, the descriptor's own checksum right): no bitmap on disk */
bool chk_group_block_uninit(const struct chk_fs *fs, uint32_t g);
bool chk_group_inode_uninit(const struct chk_fs *fs, uint32_t g);
/* the bitmap libext2fs makes up for such a group (buf: bs bytes), and
 * the bits it sets for them in other groups' bitmaps (after loading) */
void chk_group_uninit_bits(const struct chk_fs *fs, uint32_t g, uint8_t *buf);
int  chk_group_uninit_foreign(struct chk_fs *fs);
/* attach: group g's bitmaps as read (scratch: bs bytes) */
int  chk_group_load(struct chk_fs *fs, uint32_t g, const uint8_t *bb, const uint8_t *ib, uint8_t *scratch);

/* ---- checker.c helpers used by the other files ---- */
static inline bool bit_get(const uint8_t *b, uint64_t i) { return (b[i >> 3] >> (i & 7)) & 1; }
/* The group whose block bitmap, inode bitmap or inode table (type) blk is,
 * from the static layout (0 if blk is none); *idx = a table block's index
 * in its table. */
uint32_t chk_layout_group(const struct chk_fs *fs, uint64_t blk, uint8_t type, uint32_t *idx);
/* Some bit of b[from .. from + n) set (whole zero words skipped). */
bool chk_any_bit(const uint8_t *b, uint64_t from, uint64_t n);
/* One past the last bit set of bits [0, n) of b; 0 when none is. */
uint64_t chk_bits_end(const uint8_t *b, uint64_t n);
static inline void bit_put(uint8_t *b, uint64_t i, bool v)
{
	if (v) b[i >> 3] |= (uint8_t)(1u << (i & 7));
	else   b[i >> 3] &= (uint8_t)~(1u << (i & 7));
}
/* Copy of the approved contents of blk into buf (cache, else read callback). */
int  chk_read_block(struct chk_fs *fs, uint64_t blk, void *buf);
/* the same as a blk_get_fn (ctx: the chk_fs) */
int  chk_read_block_cb(void *ctx, uint64_t blk, void *buf);
void chk_cache_put(struct chk_fs *fs, uint64_t blk, const void *buf);
void chk_cache_drop(struct chk_fs *fs, uint64_t blk);
void chk_cache_free(struct blk_cache *c);
/* Approved raw inode (inode_size bytes) */
int  chk_read_inode(struct chk_fs *fs, uint32_t ino, void *buf);
/* The internal journal's first block and its length in blocks: 0, or
 * -ENOENT when there is no journal inode or block 0 is absent/out of range,
 * or the error reading the inode failed with (-ENOMEM, -EIO): not "no
 * journal", or a failure would skip the journal superblock's check. */
int  chk_journal_head(struct chk_fs *fs, uint64_t *block0, uint64_t *nblocks);
uint32_t chk_group_of_block(const struct chk_fs *fs, uint64_t blk);
uint32_t chk_group_of_inode(const struct chk_fs *fs, uint32_t ino);
/* ---- layout_meta.c: superblock and descriptor copies (classic, meta_bg,
 * sparse_super2) ---- */
/* parse_super, after gdt_blocks and rgdt_blocks: the layout fields; 0, or
 * -EINVAL with a message in err for a layout e2fsck would repair first */
int  chk_layout_parse(struct chk_fs *fs, char *err, size_t errlen);
bool chk_group_has_super(const struct chk_fs *fs, uint32_t g);
/* the primary copy of descriptor block i (i < gdt_blocks) */
uint64_t chk_gdt_block_loc(const struct chk_fs *fs, uint32_t i);
/* i when blk is the primary copy of descriptor block i, else UINT32_MAX */
uint32_t chk_gdt_block_index(const struct chk_fs *fs, uint64_t blk);
/* group g's superblock, descriptor and reserved descriptor copies into the
 * static layout (chk_static_add): 0 or -ENOMEM */
int  chk_static_add_group_copies(struct chk_fs *fs, uint32_t g);
/* Static-layout type of blk, or BT_FREE if not static. */
uint8_t chk_static_type(const struct chk_fs *fs, uint64_t blk);

/* inode helpers */
static inline uint16_t imode_type(const struct ext2_inode *in) { return in->i_mode & 0170000; }
bool chk_inode_has_block_ptrs(const struct chk_fs *fs, const struct ext2_inode *in);
/* ext4-only inode fields that must stay clear on ext2/ext3, or NULL.  The
 * flags in `kept` pass (CHK_EXT4_FLAGS_E2FSCK_KEEPS at most): e2fsck leaves
 * them alone without their feature, so a scanned image may hold them and a
 * transaction may keep them on an inode that had them, never set them. */
#define CHK_EXT4_FLAGS_E2FSCK_KEEPS (EXT4_HUGE_FILE_FL | EXT4_EA_INODE_FL)
const char *chk_inode_ext4_fields_problem(const struct chk_fs *fs, const struct ext2_inode *in,
					  uint32_t kept);
/* An inode-table block the bad-blocks inode lists (0 or -ENOMEM); is ino
 * stored in one? */
int  chk_bad_itable_add(struct chk_fs *fs, uint64_t blk);
bool chk_inode_in_bad_block(const struct chk_fs *fs, uint32_t ino);
/* Does e2fsck count the blocks of in-use inode ino (reserved ones: not the
 * quota slots nor the resize inode)? */
bool chk_inode_blocks_counted(const struct chk_fs *fs, uint32_t ino);
bool chk_inode_walkable(const struct chk_fs *fs, uint32_t ino, const struct ext2_inode *in);
/* i_file_acl as e2fsck counts it for in-use inode ino (0: none counted). */
uint64_t chk_inode_counted_xattr(const struct chk_fs *fs, uint32_t ino, const struct ext2_inode *in);
/* An unused reserved inode's mode as e2fsck's pass 1 rejects it (why), or NULL. */
const char *chk_reserved_inode_mode_problem(uint32_t ino, const struct ext2_inode *in);
uint64_t chk_inode_size64(const struct ext2_inode *in);
/* i_blocks as stored (48 bits with huge_file), and whether it counts
 * `owned` blocks (the xattr block included) as e2fsck counts them: in
 * 512-byte sectors, in blocks for huge_file's HUGE_FILE_FL */
uint64_t chk_inode_iblocks(const struct chk_fs *fs, const struct ext2_inode *in);
bool chk_iblocks_ok(const struct chk_fs *fs, const struct ext2_inode *in, uint64_t owned);
/* Does the inode's body hold an xattr whose value is in another inode
 * (ea_inode, not modelled)? */
bool chk_inode_ea_in_inode(const struct chk_fs *fs, const uint8_t *raw);
/* i_file_acl with its high half (64bit) */
uint64_t chk_inode_file_acl(const struct chk_fs *fs, const struct ext2_inode *in);
/* e2fsck's largest indirect-mapped file for block size bs, in bytes */
uint64_t chk_max_file_size(uint32_t bs);
/* why a regular file's 64-bit size is impossible for its block map (NULL
 * if fine) */
const char *chk_file_size_problem(const struct chk_fs *fs, const struct ext2_inode *in, uint64_t size,
				  bool large_file);
/* A slow symlink's map as e2fsck wants it: one block at logical 0 (an
 * extent root of depth 0 with that one extent, or i_block[0] alone). */
bool chk_slow_symlink_map_ok(const struct chk_fs *fs, const struct ext2_inode *in);
/* A block shaped as an htree index node (count/limit at 8, the limit the
 * block holds: one entry less with metadata_csum's dx tail)? */
bool chk_dx_node_like(const struct chk_fs *fs, const uint8_t *d);
/* large_dir.c: the feature, a directory's size (i_size_high counts only
 * with it; without it i_size_high must be 0), its blocks (capped at
 * UINT32_MAX), and the deepest indirect_levels an htree root may have. */
bool chk_large_dir(const struct chk_fs *fs);
uint64_t chk_dir_size(const struct chk_fs *fs, const struct ext2_inode *in);
bool chk_dir_size_high_ok(const struct chk_fs *fs, const struct ext2_inode *in);
uint32_t chk_dir_blocks(const struct chk_fs *fs, const struct ext2_inode *in);
unsigned chk_htree_max_levels(const struct chk_fs *fs);
/* the dx entries a root (off 32) or node (off 8) block holds */
uint32_t chk_dx_limit(const struct chk_fs *fs, uint32_t off);
/* what is wrong with an internal journal superblock (NULL if fine) */
const char *chk_journal_sb_problem(const struct chk_fs *fs, const uint8_t *jsb, uint64_t journal_blocks);
/* what is wrong with an xattr block's header, entries or values (NULL if fine) */
const char *chk_xattr_block_problem(const struct chk_fs *fs, const uint8_t *d);
int chk_mode_to_ftype(uint16_t mode);
bool chk_mode_type_valid(uint16_t mode);

/* Walks the block tree of an inode: calls visit(span) for every
 * non-zero pointer below i_block (not i_file_acl); an indirect block is read
 * and descended only if visit returns true, and at most once per walk (a
 * corrupt tree naming one block from many slots stays linear).  `get` reads
 * a block's contents in the relevant state. Returns 0 or -errno. */
typedef int (*blk_get_fn)(void *ctx, uint64_t blk, void *buf);
/* One visit: a block of the map, or a run of an extent's blocks. */
struct chk_span {
	uint64_t blk;                    /* first block */
	uint32_t len;                    /* 1, or an extent's length */
	uint32_t lblk;                   /* logical block of blk (data, directory) */
	uint8_t  type;                   /* BT_DATA, BT_DIR, BT_IND..BT_TIND, BT_EXTENT */
	bool     unwritten;              /* an unwritten extent's blocks */
	uint16_t depth;                  /* BT_EXTENT: the node's depth (0: a leaf) */
	const uint8_t *node;             /* BT_EXTENT: the node's contents */
};
typedef bool (*blk_visit_fn)(void *ctx, const struct chk_span *s);
/* Extent-mapped (EXTENTS_FL on a file system with extents)? */
bool chk_inode_extent_mapped(const struct chk_fs *fs, const struct ext2_inode *in);
/* As above for an indirect tree; an extent tree is walked in logical order,
 * a tree block (BT_EXTENT) descended when visit returns true, each leaf
 * extent visited as one span.  An extent tree breaking a node rule stops the
 * walk: 1 with the message in why (may be NULL).  0 walked, or -errno. */
int chk_walk_inode_tree(struct chk_fs *fs, const struct ext2_inode *in, bool isdir,
			blk_get_fn get, void *get_ctx, blk_visit_fn visit, void *vctx, char *why,
			size_t whylen);
/* Physical block of logical block lblk (0: a hole, or out of reach), in the
 * approved state and in a transaction's proposed state. */
uint64_t chk_approved_bmap(struct chk_fs *fs, const struct ext2_inode *in, uint32_t lblk);
struct txn;
uint64_t chk_txn_bmap(struct chk_fs *fs, struct txn *t, const struct ext2_inode *in, uint32_t lblk);

/* ---- verdicts ---- */
struct str_arena {
	char **chunks;
	size_t nchunks, used, cap;        /* used/cap of the last chunk */
	bool oom;                         /* a string was lost ("?" in its place) */
};
const char *chk_arena_printf(struct str_arena *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* n bytes of the arena for the caller to fill; NULL (and a->oom) when out
 * of memory */
char *chk_arena_alloc(struct str_arena *a, size_t n);
/* a copy of s[0..n) with a NUL; "?" (and a->oom) when out of memory */
const char *chk_arena_strn(struct str_arena *a, const char *s, size_t n);
/* "name[i]", as chk_arena_printf("%s[%u]") makes it */
const char *chk_arena_indexed(struct str_arena *a, const char *name, uint32_t i);
void chk_arena_free(struct str_arena *a);

struct txn;   /* diff.c: the analysed transaction */

/* pool.c: memory one check hands to the next (block buffers, inode
 * changes, the record array), shared by a chk_fs and the transactions
 * that took from it; any thread, its own lock. */
enum chk_pool_class { CHK_POOL_BLOCK, CHK_POOL_ICHANGE, CHK_POOL_NCLASSES };
struct chk_pool;
/* block_size: a CHK_POOL_BLOCK item is two blocks; NULL when out of memory
 * (then every get is a malloc and every put a free) */
struct chk_pool *chk_pool_new(size_t block_size, size_t ichange_size);
struct chk_pool *chk_pool_ref(struct chk_pool *p);
void chk_pool_unref(struct chk_pool *p);
/* the chk_fs lets go: nothing is kept any more */
void chk_pool_detach(struct chk_pool *p);
/* size bytes (the class's; uninitialised), or NULL; p may be NULL */
void *chk_pool_get(struct chk_pool *p, enum chk_pool_class c, size_t size);
/* x back (kept or freed); x may be NULL */
void chk_pool_put(struct chk_pool *p, enum chk_pool_class c, size_t size, void *x);
/* a record array and its capacity (*cap 0: none kept) */
struct chk_record *chk_pool_take_recs(struct chk_pool *p, size_t *cap);
void chk_pool_give_recs(struct chk_pool *p, struct chk_record *recs, size_t cap);

struct chk_verdict {
	struct chk_record *recs;
	size_t nrecs, caprecs;
	struct chk_violation *viols;
	size_t nviols, capviols;
	struct str_arena strings;
	struct txn *txn;                  /* what chk_advance applies; NULL for scans */
	bool oom;
};
size_t chk_verdict_add_record(struct chk_verdict *v, enum chk_rtype t, uint64_t id,
			  const char *field, int64_t o, int64_t n);
/* recs copied */
void chk_verdict_add_violation(struct chk_verdict *v, enum chk_inv inv,
			   const size_t *recs, size_t nrecs, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
bool chk_verdict_oom(const struct chk_verdict *v);
struct chk_verdict *chk_verdict_new(void);

/* ---- invariants.c ---- */
void chk_run_invariants(struct chk_fs *fs, struct txn *t, struct chk_verdict *v);
/* a verdict's violations of `id` from the problems the diff found */
void chk_report_problems(struct txn *t, struct chk_verdict *v, enum chk_inv id);
/* the check functions of the table's rows */
#define INV(id, fn, description, state) void fn(struct chk_fs *fs, struct txn *t, struct chk_verdict *v);
#include "invariants.def"
#undef INV
void chk_txn_free(struct txn *t);
int  chk_txn_apply(struct chk_fs *fs, struct txn *t);

uint64_t chk_thread_ns(void);

/* scan_tail.c: deferred table tails (checker.h).  chk_judge_table_inode:
 * what holds for any inode of a table (its checksum; one in a bad block is
 * unread and must be in use), true when the inode is not to be read further;
 * chk_judge_free_inode: a free inode is in the free form.  chk_tail_start:
 * the first inode index (of group g) a deferring scan leaves unread, whole
 * blocks read; chk_mark_deferred (0 or -ENOMEM) and chk_clear_deferred keep
 * the marks. */
bool chk_judge_table_inode(struct chk_fs *fs, struct chk_verdict *v, uint32_t ino, const struct ext2_inode *in);
void chk_judge_free_inode(struct chk_fs *fs, struct chk_verdict *v, uint32_t ino, const struct ext2_inode *in);
uint32_t chk_tail_start(const struct chk_fs *fs, uint32_t g);
/* g's tail is known to read as zeros without reading it (the caller's zero
 * callback: a hole of an image file) and g holds no inode in use: every
 * inode there free and zero, nothing to judge (as chk_scan skips such a
 * table) */
bool chk_tail_known_zero(const struct chk_fs *fs, uint32_t g);
int  chk_mark_deferred(struct chk_fs *fs, uint32_t g);
void chk_clear_deferred(struct chk_fs *fs);
/* At attach, chk_options.pristine_claimed: every pristine group claimed.
 * 0 or -ENOMEM. */
int  chk_claim_groups(struct chk_fs *fs);

/* ---- diff.c: the analysed transaction ---- */
struct tblock {                  /* one block the transaction writes */
	uint64_t blk;
	uint8_t *old, *new;          /* approved and proposed contents (old: NULL, or in new's
	                              * allocation) */
	uint8_t otype;               /* type in the approved map (static or dynamic) */
	bool changed;
	bool made_up;                /* old is not the disk's bytes (an UNINIT group's bitmap) */
};

struct bchange {                 /* ownership change of one block */
	uint64_t blk;
	uint16_t adds, removes;
	uint16_t xadds, xremoves;    /* of those, from i_file_acl (xattr block sharing) */
	uint8_t  old_type, new_type;
	uint32_t old_owner, new_owner, new_lblk;
	size_t   rec;                /* a record showing a pointer to it appear/disappear */
	size_t   flip_rec;           /* its bbitmap record, SIZE_MAX if its bit did not flip */
	int64_t  xattr_old_refs;     /* h_refcount before (xattr blocks) */
	bool     run;                /* added as an extent's block: a run in the map */
};

struct ichange {                 /* an inode the transaction touches */
	uint32_t ino;
	uint8_t *old, *new;          /* inode_size bytes each, in the change's allocation */
	bool written;                /* its slot differs */
	bool old_inuse, new_inuse;   /* inode bitmap bit */
	bool old_live, new_live;     /* in use and links > 0 (its dir entries count) */
	bool bitflip;
	int32_t entry_delta;         /* entries naming it: added - removed */
	int32_t parent_delta;
	int32_t parent_removed, parent_added;
	int32_t removed_entries;     /* entries naming it removed */        /* entries naming it other than "." and "..": added - removed */
	int32_t ndata_delta, nmeta_delta;
	size_t  *recs;               /* records about this inode */
	size_t   nrecs, caprecs;
	size_t   bit_rec;
	size_t   ptr_rec[16];        /* record of i_block[n] / i_file_acl (15), or SIZE_MAX */
};

struct dchange {                 /* one (directory, name) whose target changed */
	uint32_t dir;
	uint32_t old_ino, new_ino;
	uint8_t  new_ft;
	uint8_t  name_len;
	char     name[256];
	uint64_t new_blk;            /* block holding the new entry */
	size_t   rec;
};

struct tproblem {                /* a structural defect found while parsing */
	enum chk_inv inv;
	size_t rec;                  /* SIZE_MAX if none */
	const char *detail;          /* in the verdict's arena */
};

struct txn {
	struct chk_verdict *v;
	struct chk_pool *pool;       /* a reference (or NULL): where its buffers come from and go */
	size_t block_alloc;          /* a tblock's buffer, new and old: 2 blocks */
	size_t ichange_alloc;        /* an ichange with its two inodes */
	struct tblock *blocks;
	size_t nblocks, capblocks;
	struct u64map bidx;          /* blk -> index in blocks */
	struct bchange **bch;
	size_t nbch, capbch;
	struct u64map bchidx;
	struct ichange **ich;
	size_t nich, capich;
	struct u64map ichidx;
	struct dchange *dch;
	size_t ndch, capdch;
	struct tproblem *probs;
	size_t nprobs, capprobs;

	bool sb_changed;
	uint8_t sb_old[1024] __attribute__((aligned(8)));
	uint8_t sb_new[1024] __attribute__((aligned(8)));
	/* the descriptor blocks the transaction changed (gdt_blocks slots, NULL
	 * = as approved: read through chk_gd_new) and the groups it touched:
	 * a descriptor changed, bitmap bits flipped or a directory came into or
	 * out of use.  Per-commit work follows these, not the group count. */
	uint8_t **gdb_new;
	uint32_t ngdb;
	struct gtouch *gt;
	size_t ngt, capgt;
	struct u64map gtidx;                 /* group -> index in gt */
	size_t *sb_recs;
	size_t nsb_recs, capsb_recs;
	/* orphan list of the new state (computed on demand) */
	bool orphans_done;
	struct u64map orphans;
	int orphan_loop;                     /* 1 loop or non-inode in the chain */
	bool ofile_done;                     /* the orphan file's entries joined them */
	uint32_t ofile_used;                 /* the orphan file's valid entries */
	struct u64map dirblks;               /* directory blocks to parse */
	/* htree leaf hash ranges of the last directory asked about */
	uint32_t dx_dir;
	struct dx_range { uint32_t lblk, lo, hi; } *dx;
	size_t ndx;
	int dx_hver;                         /* hash version, -1 if the index is unusable */
	int err;
};

/* A group the transaction touched. */
struct gtouch {
	uint32_t g;
	bool changed;                        /* its descriptor differs from the approved one */
	size_t rec;                          /* index of its first bgd record, or SIZE_MAX */
	int32_t bflip, iflip;                /* bitmap bits set - bits cleared */
	int32_t dirs;                        /* directories into use - out of use */
};
/* g's entry, created on first use (NULL and t->err set when out of memory) */
struct gtouch *chk_txn_group(struct txn *t, uint32_t g);
/* the inodes of group g an inode scan reads in the proposed state
 * (chk_group_used_inodes of the approved one) */
uint32_t chk_txn_used_inodes(const struct chk_fs *fs, const struct txn *t, uint32_t g);
/* g's descriptor in the proposed state */
const uint8_t *chk_gd_new(const struct chk_fs *fs, const struct txn *t, uint32_t g);
/* the touched groups in ascending order (indexes stay valid until the next
 * chk_txn_group that creates an entry) */
void chk_txn_groups_sort(struct txn *t);

/* the block's proposed contents: transaction's or approved (buf is scratch) */
const uint8_t *chk_txn_new_block(struct chk_fs *fs, struct txn *t, uint64_t blk, uint8_t *buf);
const uint8_t *chk_txn_old_block(struct chk_fs *fs, struct txn *t, uint64_t blk, uint8_t *buf);
struct ichange *chk_txn_inode(struct chk_fs *fs, struct txn *t, uint32_t ino);
bool chk_txn_bbit_new(struct chk_fs *fs, struct txn *t, uint64_t blk);
bool chk_txn_ibit_new(struct chk_fs *fs, struct txn *t, uint32_t ino);
struct bchange *chk_txn_bch_find(struct txn *t, uint64_t blk);
void chk_txn_problem(struct txn *t, enum chk_inv inv, size_t rec, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void chk_ich_add_rec(struct ichange *ic, size_t rec);
bool chk_txn_is_orphan(struct chk_fs *fs, struct txn *t, uint32_t ino);
/* orphan_file.c: the orphan file's entries of t's proposed state into
 * t->orphans (after the list's), counted in t->ofile_used; an entry naming
 * no in-use inode, or one already there, is an INV_ORPHAN_ENTRY problem. */
void chk_txn_orphan_file(struct chk_fs *fs, struct txn *t);

/* superblock field classes (diff.c table) */
enum { F_FROZEN, F_FREE, F_COUNT, F_FEATURE, F_STATE, F_REVISION };
uint8_t chk_sb_rec_class(const char *field);
/* last logical data block of an inode in the new state; false if none;
 * *last_init (may be NULL): the last of an initialised extent, -1 if none
 * (indirect-mapped: the last block) */
bool chk_txn_last_lblk(struct chk_fs *fs, struct txn *t, const struct ext2_inode *in, uint32_t *last,
		       int64_t *last_init);

/* directory entries as parsed (diff.c; used by scan.c too) */
struct dent {
	uint32_t dir, ino;
	uint32_t name_off;           /* into names */
	uint8_t name_len, ft;
	uint8_t side;                /* 0 old, 1 new */
	uint64_t blk;
};
struct dent_list {
	struct dent *e;
	size_t n, cap;
	char *names;
	size_t nlen, ncap;
	int err;
};
void chk_dl_add(struct dent_list *l, uint32_t dir, uint32_t ino, const char *name, uint8_t nl,
	    uint8_t ft, uint8_t side, uint64_t blk);
void chk_parse_dir_block(struct chk_fs *fs, struct txn *t, const uint8_t *d, uint64_t blk,
		     uint32_t dir, uint32_t lblk, bool strict, uint8_t side, struct dent_list *l);
void chk_htree_check_leaf(struct chk_fs *fs, struct txn *t, uint32_t dir, const struct ext2_inode *in,
		      uint32_t lblk, const uint8_t *d, uint64_t blk);
/* the whole index of dir in a scan (root: its block 0) */
void chk_htree_scan_dir(struct chk_fs *fs, struct txn *t, uint32_t dir, const struct ext2_inode *in,
			uint64_t root_pblk, const uint8_t *root);

/* a name in double quotes with C escapes (in the verdict's arena) */
const char *chk_quote_name(struct txn *t, const char *n, unsigned len);

/* ---- scan.c ---- */
/* ---- the rooms of chk_check: diff.c, diff_dir.c, diff_htree.c ---- */
/* diff_dir.c */
void chk_diff_dirs(struct chk_fs *fs, struct txn *t, uint8_t *buf);
uint8_t chk_new_type_of(struct chk_fs *fs, struct txn *t, uint64_t blk, uint32_t *owner, uint32_t *lblk);

/* diff_htree.c */
void chk_check_new_index_flags(struct chk_fs *fs, struct txn *t, struct u64map *walk);
void chk_diff_htree(struct chk_fs *fs, struct txn *t, uint8_t *buf, struct u64map *walk);
void chk_walk_indexes(struct chk_fs *fs, struct txn *t, struct u64map *walk);

/* diff_extent.c: the extent trees of the inodes the transaction touches */
void chk_diff_extents(struct chk_fs *fs, struct txn *t);

/* diff.c (shared with the files above) */
/* One block gains or loses a pointer from inode ic's map (rec: the record
 * showing it); run: the block is an extent's (a run of the map) */
void chk_txn_ref_add(struct chk_fs *fs, struct txn *t, uint64_t blk, uint8_t type, uint32_t lblk,
		     struct ichange *ic, size_t rec, bool run);
void chk_txn_ref_remove(struct chk_fs *fs, struct txn *t, uint64_t blk, uint8_t type, struct ichange *ic,
			size_t rec);
void *chk_grow(void *arr, size_t *cap, size_t need, size_t elem);
struct tblock *chk_tb_find(struct txn *t, uint64_t blk);
bool chk_walkable(struct chk_fs *fs, uint32_t ino, const struct ext2_inode *in, bool inuse);

#endif
