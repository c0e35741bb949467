/*
 * fuse/dirindex.h - internal to fuse/: directory operations that are not
 * linear per call.  libext2fs 1.47 looks names up, inserts and removes by a
 * linear scan of the whole directory; with 20,000 entries that makes every
 * create O(n).  Here each directory gets an in-memory index (name hash ->
 * entry location, and free space per block), built by one read of the
 * directory on first use and kept exact across every change made through
 * this API.  All directory changes in fuse/ go through it.
 *
 * On disk the result stays a valid ext2/ext3/ext4 directory for the kernel
 * and e2fsck.  A directory with an htree (EXT2_INDEX_FL, on a file system
 * with dir_index) keeps it: an add goes into the leaf its name hashes to
 * (dx_probe; after the split it causes, the leaf the kernel picks, see
 * struct dx_split); a full leaf is split as the kernel splits it, a full index
 * node split or a level added (dxsplit.c), within the depth the kernel
 * allows (two index levels, three with large_dir).  Only an add the index
 * cannot take (already at that depth and full, or an index this cannot
 * follow) clears EXT2_INDEX_FL (the dx blocks then read as ordinary
 * directory blocks; with metadata_csum they are rewritten as empty leaf
 * blocks with a checksum tail, see dx_block_to_leaf), and the directory
 * stays linear from then on.  A directory of one block on a file system
 * with dir_index that an add does not fit is indexed first, as the kernel
 * indexes it (dxmake.c); a linear directory of more blocks stays linear.
 * Splits move entries between blocks, so readdir positions in an indexed
 * directory, and in one of one block on a dir_index file system (the
 * kernel reads it in hash order too, and its index keeps that order), are
 * hash cookies (see dindex_readdir_batch); in a linear one of more blocks,
 * where entries never move, block and offset.  An inline directory
 * (EXT4_INLINE_DATA_FL, read through inline.c) is only read: lookups,
 * readdir and dindex_is_empty work, changes are -EOPNOTSUPP.
 *
 * Errors: 0 or -errno.  Threads: the caller holds the file-system lock.
 */
#ifndef RECON_FUSE_DIRINDEX_H
#define RECON_FUSE_DIRINDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <ext2fs/ext2fs.h>

struct dindex;

/* max_dirs bounds how many directory indexes stay in memory (LRU). */
struct dindex *dindex_new(ext2_filsys fs, size_t max_dirs);
void dindex_free(struct dindex *di);

/* -ENOENT if absent.  ftype: EXT2_FT_* from the entry (0 without filetype). */
int dindex_lookup(struct dindex *di, ext2_ino_t dir, const char *name, size_t len,
		  ext2_ino_t *ino, int *ftype);

/* Add an entry (the caller has checked it is absent).  Grows the directory by
 * one block when no block has room (allocating near the directory, updating
 * i_size and i_blocks).  -ENAMETOOLONG, -ENOSPC, -EFBIG, -EIO. */
int dindex_add(struct dindex *di, ext2_ino_t dir, const char *name, size_t len,
	       ext2_ino_t ino, int ftype);

/* Remove an entry; -ENOENT if absent. */
int dindex_remove(struct dindex *di, ext2_ino_t dir, const char *name, size_t len);

/* Point an existing entry at another inode (rename over a target, "..").
 * -ENOENT if absent. */
int dindex_replace(struct dindex *di, ext2_ino_t dir, const char *name, size_t len,
		   ext2_ino_t ino, int ftype);

/* 1 if the directory holds only "." and "..", 0 if not, or -errno. */
int dindex_is_empty(struct dindex *di, ext2_ino_t dir);

/*
 * Readdir from a position; 0 is the start.  fill() returns nonzero when its
 * buffer is full (the entry was not taken); next_off is the position to go
 * on from after the entry.  Positions hold, for names present throughout,
 * across any changes made between calls (telldir/seekdir):
 *  - a linear directory: (logical block << 32) | byte offset in the block
 *    (entries never move between blocks);
 *  - an indexed directory, or one of one block on a dir_index file system
 *    (the kernel's order; it keeps when the directory is indexed): a hash
 *    cookie, "." 0 and ".." 1, then every name
 *    in the order of its htree hash (major, minor), ((major >> 1) << 32) |
 *    minor, kept within [2, 2^63 - 2]; entries move between leaves when one
 *    splits, their names' hashes stay.  Names whose cookies are equal (a
 *    collision: a run) share one position: every name of a run but the
 *    last has next_off the run's own cookie (a reader stopped inside it
 *    reads the run again), the last the cookie + 1;
 *  - an inline directory: inline.c's positions in its one area.
 * An indexed directory that turns linear (see above) changes its positions.
 * fits (may be NULL) keeps runs whole in a batch: called with a run's names
 * before any is offered, false when they do not all fit the buffer; then
 * the batch ends before the run, or, if nothing was taken yet, the call
 * fails with -EINVAL (the buffer is too small for the run, as getdents(2)
 * reports).  Returns 0 or -errno.
 */
typedef int (*dindex_fill_fn)(void *ctx, const char *name, size_t len,
			      ext2_ino_t ino, int ftype, uint64_t next_off);
struct dindex_name {
	const char *name;
	size_t len;
};
typedef bool (*dindex_fits_fn)(void *ctx, const struct dindex_name *run, size_t n);
int dindex_readdir_batch(struct dindex *di, ext2_ino_t dir, uint64_t off,
			 dindex_fill_fn fill, dindex_fits_fn fits, void *ctx);
/* The same without fits: for a reader whose fill never refuses a name. */
int dindex_readdir(struct dindex *di, ext2_ino_t dir, uint64_t off,
		   dindex_fill_fn fill, void *ctx);

/* Drop one directory's index (the directory was removed) or all of them
 * (libext2fs state was re-read after a rollback). */
void dindex_forget(struct dindex *di, ext2_ino_t dir);
void dindex_drop_all(struct dindex *di);

/* Rollback support: dindex_mark() at the start of an operation;
 * dindex_forget_changed() forgets every directory changed since (their
 * indexes describe entries the rollback discarded). */
void dindex_mark(struct dindex *di);
void dindex_forget_changed(struct dindex *di);

/* The directories whose index is in memory (most recent first), at most
 * max of them into out; returns how many. */
size_t dindex_cached_dirs(struct dindex *di, ext2_ino_t *out, size_t max);

/* Names added or repointed (dindex_add, dindex_replace) since the last
 * dindex_clear_added(): after a rejected commit the kernel may hold dentries
 * for them.  fn is called for each; returns false if some were not kept
 * (more than 65536, or out of memory). */
typedef void (*dindex_name_fn)(void *ctx, ext2_ino_t dir, const char *name);
bool dindex_added_names(struct dindex *di, dindex_name_fn fn, void *ctx);
void dindex_clear_added(struct dindex *di);

/* ---- the record dindex_added_names reads (addednames.c) ---- */

/* Names added or repointed, each with its directory; zero-initialised is
 * empty.  Past 65,536 names, or out of memory, a note is dropped and
 * added_names_each returns false. */
struct added_name;
struct added_names {
	struct added_name *v;
	size_t n, cap;
};
void added_names_note(struct added_names *a, ext2_ino_t dir, const char *name, size_t len);
bool added_names_each(const struct added_names *a, dindex_name_fn fn, void *ctx);
/* forget the names, keep the room for them */
void added_names_clear(struct added_names *a);
void added_names_free(struct added_names *a);

/* ---- free space per block (gaptree.c) ---- */

/* A max-tree over a directory's blocks: leaf i (at cap + i) is the largest
 * entry block i takes, inner nodes their children's max; finds the first
 * block with room in O(log blocks).  Zeroed: empty. */
struct gap_tree {
	uint32_t *node;
	uint32_t cap;           /* leaves, a power of two */
};

/* Room for nblocks leaves (new ones 0): -ENOMEM, -EFBIG past 2^31. */
int gap_tree_reserve(struct gap_tree *g, uint32_t nblocks);
void gap_tree_set(struct gap_tree *g, uint32_t blk, uint32_t room);
uint32_t gap_tree_room(const struct gap_tree *g, uint32_t blk);
/* The first block with room >= need, or -1. */
int64_t gap_tree_find(const struct gap_tree *g, uint32_t need);
void gap_tree_free(struct gap_tree *g);

/* ---- one directory block (dirblock.c) ---- */

/* A libext2fs error as -errno: -ENOMEM, -ENOSPC (no block, no room), a
 * plain errno the I/O manager passed up, else -EIO. */
int dir_errno(errcode_t err);

/* One entry as found on disk. */
struct dirent_view {
	unsigned int off, rec_len, name_len;
	ext2_ino_t ino;
	int ftype;
	struct ext2_dir_entry *de;
};

/* Walks the entries of one block, validating each. */
struct dirblock_cursor {
	ext2_filsys fs;
	char *buf;
	unsigned int off;
	unsigned int end;       /* blocksize, less the checksum tail if present */
};

/* Space an entry with a name of len bytes needs: 8-byte header + name,
 * rounded up to 4 bytes, as ext2 lays entries out. */
unsigned int dirent_size(size_t len);

/* rec_len of the entry at off in buf, or 0 if it cannot be decoded. */
unsigned int dirent_rec_len_at(ext2_filsys fs, char *buf, unsigned int off);

/* Walk the entries of buf: init, then next until it returns 0 (the end of
 * the block's entries) or -EIO (a corrupt entry); 1 with *e filled. */
void dirblock_cursor_init(struct dirblock_cursor *c, ext2_filsys fs, char *buf);
int dirblock_cursor_next(struct dirblock_cursor *c, struct dirent_view *e);

/* The entry named name (len bytes) at offset off of buf, into *found, and
 * the entry before it in the block into *prev (*has_prev false if it is
 * the first).  -EIO if no such entry is there (the block does not match
 * the caller's index), or the block is corrupt before it. */
int dirblock_locate(ext2_filsys fs, char *buf, unsigned int off, const char *name, size_t len,
		    struct dirent_view *found, struct dirent_view *prev, bool *has_prev);

/* Largest entry size that fits into one existing entry's space. */
unsigned int dirent_room(const struct dirent_view *e);

/*
 * A block's free room: max, the largest entry it takes, and first, where
 * the first entry with room for a name starts (the entries' end if none).
 * Room under dirent_size(1) takes no name and counts as none.  Kept per
 * block by dirindex.c, so that an add starts at first instead of walking
 * the block's full entries from its start.
 */
struct block_room {
	uint32_t max;
	uint32_t first;
};

/* The room of buf's entries from offset from (an entry's start, with no
 * room in any entry before it) on: the block's room.  -EIO if corrupt. */
int dirblock_room_from(ext2_filsys fs, char *buf, unsigned int from, struct block_room *r);

/* r after a removal gave entry freed (as it is now) more room than the
 * removed entry had: only that entry's room changed.  false when r cannot
 * tell (read the block's room again). */
bool dirblock_room_freed(struct block_room *r, const struct dirent_view *freed);

/*
 * Put the entry into the first entry of buf with room for it (first fit,
 * as the kernel's ext4 picks: an empty entry taken whole, else the entry
 * split after its own size), walking from r->first on (r: the block's room
 * before); r then describes the block after, *off is where the entry went.
 * -ENOSPC if no entry has room (r was not buf's), -EIO on a corrupt entry.
 */
int dirblock_insert(ext2_filsys fs, char *buf, struct block_room *r, const char *name, size_t len,
		    ext2_ino_t ino, int ftype, unsigned int *off);

/* Name, inode and file type into de (its rec_len untouched). */
void dirent_fill(ext2_filsys fs, struct ext2_dir_entry *de, const char *name, size_t len,
		 ext2_ino_t ino, int ftype);

/*
 * Where a directory block's entries end.  With metadata_csum a leaf block
 * ends in a 12-byte tail that reads as an empty entry (name_len 0, file type
 * 0xDE): then the tail's offset.  Whether a block has one is decided by its
 * rec_len chain, as e2fsck decides: a leaf's chain stops exactly where its
 * tail starts.  A dx root ("." and a ".." covering the rest) and a dx node
 * (one empty entry covering the block) chain to the block's end, so whatever
 * their last bytes hold (a dx tail, or the bytes of the leaf tail the kernel
 * leaves in a root's dt_reserved when it indexes a directory) is never taken
 * for a leaf tail.  Otherwise (no metadata_csum, no tail, a broken chain)
 * the block size.
 */
unsigned int dirblock_entries_end(ext2_filsys fs, char *buf);

/* Readdir of a linear directory (nblocks blocks at pblk) from block/offset
 * position off on, as dindex_readdir_batch; buf: one block of scratch. */
int dirblocks_readdir(ext2_filsys fs, ext2_ino_t dir, const blk64_t *pblk, uint32_t nblocks,
		      char *buf, uint64_t off, dindex_fill_fn fill, void *ctx);

/* ---- htree blocks (dxwrite.c) ---- */

/*
 * Rewrite, in buf, logical block lblk of a directory losing its htree as a
 * leaf block: with metadata_csum a dx root keeps "." and ".." and a dx node
 * becomes one empty entry, each followed by a dirent tail (its checksum is
 * left to ext2fs_write_dir_block4).  *changed is false for a block that needs
 * nothing (a leaf, or any block without metadata_csum).  -EIO for a block
 * that is neither a leaf with its tail nor an index block (its entries would
 * be lost).
 */
int dx_block_to_leaf(ext2_filsys fs, uint32_t lblk, char *buf, bool *changed);

/* The hash (major, minor) of a name in an htree of hash version version
 * (the root's, with the superblock's unsigned-hash flag applied). */
int dx_name_hash(ext2_filsys fs, int version, const char *name, size_t len,
		 uint32_t *hash, uint32_t *minor);

/* The hash version of the dx root in buf (logical block 0, as read), with
 * the superblock's unsigned-hash flag applied; -EIO if it is no dx root
 * this can follow. */
int dx_root_version(ext2_filsys fs, char *buf);

/* The index blocks a name's lookup passes, root first, as the kernel's
 * dx_probe walks them. */
#define DX_MAX_FRAMES 3
struct dx_frame {
	uint32_t lblk;          /* logical block of the index block */
	unsigned int off;       /* its dx_countlimit: 32 in the root, 8 in a node */
	unsigned int at;        /* the entry followed */
	unsigned int count, limit;
};
struct dx_path {
	int version;            /* as dx_root_version */
	unsigned int levels;    /* indirect_levels: levels + 1 frames */
	struct dx_frame f[DX_MAX_FRAMES];
	uint32_t leaf;          /* the leaf the name belongs in */
	uint32_t hash, minor;
};

/*
 * The path of name in the htree of dir (nblocks blocks at pblk): the
 * name's hash in the root's hash version and the superblock's seed, down
 * the index levels (two with large_dir) to the leaf a lookup and an insert
 * pick.  buf: one block of scratch.  -EIO for an index this cannot follow
 * (the caller makes the directory linear instead).
 */
int dx_probe(ext2_filsys fs, ext2_ino_t dir, const blk64_t *pblk, uint32_t nblocks,
	     char *buf, const char *name, size_t len, struct dx_path *p);

/* ---- growing an htree (dxsplit.c) ---- */

/* The directory's blocks as dx_grow reads, writes and adds them; dirindex.c
 * keeps its in-memory index exact through them.  Each returns 0 or -errno. */
struct dx_blocks {
	void *ctx;
	int (*read)(void *ctx, uint32_t lblk, char *buf);
	int (*write)(void *ctx, uint32_t lblk, char *buf);
	/* buf as a new last block; its logical block into *lblk */
	int (*append)(void *ctx, char *buf, uint32_t *lblk);
	/* the names in buf (written) now live in block lblk */
	int (*moved)(void *ctx, uint32_t lblk, char *buf);
};

/* A leaf split's two leaves.  The name whose add caused it goes into hi
 * when its hash is at or above hash with bit 0 cleared (a hash that
 * continues across the split goes up), else into lo, as the kernel's
 * do_split picks the block before the add; a new probe would send a
 * continued hash down. */
struct dx_split {
	bool leaf;              /* false: no leaf was split (an index node was, or a level added) */
	uint32_t lo, hi;        /* logical blocks: the leaf split, the new leaf after it */
	uint32_t hash;          /* hi's index hash (bit 0 set: continued) */
};

/*
 * Make room on path p (dx_probe's), whose leaf is full, as the kernel's
 * ext4 does: if the leaf's parent has room, split the leaf (its entries
 * sorted by hash, the upper half by bytes moved to a new leaf, indexed
 * after it, bit 0 of that index hash set when equal hashes continue across
 * the split); else split the highest full index node under one with room
 * (half its entries to a new node); else, the root full too, add a level
 * (the root's entries move to a new node under it).  -EAGAIN when the
 * index is as deep as the file system allows (two levels, three with
 * large_dir) and full, or the leaf holds fewer than two names (nothing to
 * split).  scratch: two blocks.  *split: the leaves of a leaf split.  The
 * path is stale after: probe again.
 */
int dx_grow(ext2_filsys fs, const struct dx_blocks *blocks, const struct dx_path *p, char *scratch,
	    struct dx_split *split);

/*
 * Split the full leaf src as the kernel's ext4 splits one (do_split): its
 * named entries sorted by hash (equal hashes in the kernel's order), the
 * upper hashes, up to half the block weighed by their rec_len, packed into
 * hi as a new leaf in that order, the others packed into lo in the order
 * they had (src may be lo).
 * *split_hash: the hash hi starts at, bit 0 set when equal hashes continue
 * from lo into hi.  -EIO for a block that cannot be parsed, -EAGAIN for one
 * with fewer than two names.
 */
int dx_split_leaf(ext2_filsys fs, int version, char *src, char *lo, char *hi, uint32_t *split_hash);

/* ---- indexing a directory of one block (dxmake.c) ---- */

/* The hash version a new index takes, and the readdir order of a one-block
 * directory: the superblock's default hash, its unsigned-hash flag
 * applied.  -1 without dir_index, or for a default this cannot hash. */
int dx_default_version(ext2_filsys fs);

/*
 * Index dir, one block, as the kernel's ext4 indexes a directory a new name
 * does not fit: two blocks appended through b (empty, before any name
 * moves), block 0's names but "." and ".." split by hash into them
 * (dx_split_leaf), block 0 rewritten as the dx root indexing both,
 * EXT2_INDEX_FL set.  The caller adds the name through the index, into
 * the leaf *split picks (leaf false when nothing changed).
 * scratch: four blocks.  -EAGAIN with nothing changed when there is nothing
 * to split (fewer than two names) or no default hash; -EIO when block 0
 * does not start with "." and ".."; an allocation's -ENOSPC leaves the
 * blocks added so far empty (a valid linear directory; the caller's
 * rollback takes them back).
 */
int dx_make_index(ext2_filsys fs, ext2_ino_t dir, const struct dx_blocks *b, char *scratch,
		  struct dx_split *split);

/* ---- hash-ordered readdir (dxorder.c) ---- */

/* A name of an indexed directory in readdir order; name NULL: removed. */
struct dx_ord {
	uint64_t key;           /* the readdir cookie (dx_readdir_key) */
	const char *name;
	uint8_t len, ftype;
	ext2_ino_t ino;
};

/* The readdir cookie of a name of hash (major, minor): see dindex_readdir_batch. */
uint64_t dx_readdir_key(uint32_t hash, uint32_t minor);

/* Sort v by key, then name, dropping removed names; returns how many stay. */
size_t dx_order_sort(struct dx_ord *v, size_t n);

/* The element of sorted v holding name (the very pointer stored), or NULL;
 * a removed name's element gets name NULL. */
struct dx_ord *dx_order_find(struct dx_ord *v, size_t n, uint64_t key, const char *name);

/* Offer the names of sorted v from position off on, as dindex_readdir_batch. */
int dx_order_emit(const struct dx_ord *v, size_t n, uint64_t off, dindex_fill_fn fill,
		  dindex_fits_fn fits, void *ctx);

#endif
