/*
 * fuse/dirindex.c - per-directory in-memory index: name -> entry location,
 * and a max-tree of the largest insertable gap per directory block, so that
 * lookup, add, remove and replace cost O(1) or O(log blocks) plus one block
 * read and write, instead of libext2fs's scan of the whole directory.
 *
 * The index is built by one pass over the directory's blocks and is kept
 * exact by every change made through this file; any failure part-way through
 * a change drops the directory's index so the next call rebuilds it from
 * disk.  Indexes are kept for at most max_dirs directories (LRU).
 *
 * Errors: 0 or -errno, as declared in dirindex.h.
 *
 * The index, its gap tree and the block edits that keep both exact are one
 * invariant and stay in this file; walking one block's entries is
 * dirblock.c's, the htree's blocks (the path to a name's leaf, index
 * blocks rewritten as leaves) dxwrite.c's, splitting them in memory
 * dxsplit.c's, making a one-block directory's index dxmake.c's, and the
 * hash order of an indexed directory's readdir dxorder.c's, and the
 * record of names added since the caller last cleared it addednames.c's.
 */
#include "dirindex.h"
#include "inline.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* One directory entry known to the index. */
struct dent {
	struct dent *next;      /* hash chain */
	uint32_t hash;
	uint64_t key;           /* readdir cookie in an indexed directory */
	uint32_t lblk;          /* logical block of the entry */
	uint32_t off;           /* byte offset of the entry in that block */
	ext2_ino_t ino;
	uint8_t ftype;
	uint8_t len;
	char name[];
};

/* The index of one directory. */
struct dirix {
	ext2_filsys fs;
	ext2_ino_t dir;
	struct dirix *hnext;                    /* dindex hash chain */
	struct dirix *lru_prev, *lru_next;      /* most recent at lru_head */
	bool htree;             /* EXT2_INDEX_FL still set on disk */
	bool inline_dir;        /* entries in the inode (inline.c); read-only */
	/* The hash version of readdir's cookies: an htree's this follows (its
	 * root's), or, for one block on a dir_index file system, the one its
	 * index will take (dx_default_version: the kernel reads it in hash
	 * order too); else -1: readdir by block and offset.  Adds go by the
	 * htree when one is followed, else by the gap tree. */
	int dx_version;
	/* Readdir order of an indexed directory: every name sorted by its
	 * cookie, rebuilt on the first readdir after an add. */
	struct dx_ord *ord;
	size_t nord;
	bool ord_stale;
	uint32_t nblocks;       /* i_size / blocksize */
	blk64_t *pblk;          /* physical block of each logical block */
	uint32_t blk_cap;       /* allocated length of pblk */
	struct gap_tree gaps;   /* the largest entry each block takes */
	uint32_t *room_first;   /* per block: no entry before it has room */
	struct dent **buckets;
	size_t nbuckets;        /* a power of two */
	size_t nentries;        /* all named entries, "." and ".." included */
	size_t nother;          /* entries other than "." and ".." */
};

struct dindex {
	ext2_filsys fs;
	size_t max_dirs;
	size_t ndirs;
	struct dirix **dir_buckets;
	size_t ndir_buckets;    /* a power of two */
	struct dirix *lru_head, *lru_tail;
	char *blockbuf;         /* one directory block, reused by every call */
	char *splitbuf;         /* four more, for growing or making an htree */
	/* directories changed since dindex_mark() (an operation's rollback
	 * forgets them); overflow means "possibly all" */
	ext2_ino_t changed[8];
	unsigned nchanged;
	bool changed_overflow;
	/* names added or repointed since dindex_clear_added() */
	struct added_names added;
};

/* ---- helpers ------------------------------------------------------------ */

static uint32_t name_hash(const char *name, size_t len)
{
	/* FNV-1a: cheap and well spread for short file names. */
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)name[i];
		h *= 16777619u;
	}
	return h;
}

static bool is_dot_or_dotdot(const char *name, size_t len)
{
	return (len == 1 && name[0] == '.') ||
	       (len == 2 && name[0] == '.' && name[1] == '.');
}

/* Make room for nblocks blocks in pblk[] and the gap tree. */
static int dirix_reserve_blocks(struct dirix *d, uint32_t nblocks)
{
	/* the capacities double: past 2^31 they would wrap to 0 */
	if (nblocks > UINT32_C(1) << 31)
		return -EFBIG;
	if (nblocks > d->blk_cap) {
		uint32_t cap = d->blk_cap ? d->blk_cap : 8;
		blk64_t *p;
		uint32_t *first;

		while (cap < nblocks)
			cap *= 2;
		p = realloc(d->pblk, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		d->pblk = p;
		first = realloc(d->room_first, cap * sizeof(*first));
		if (!first)
			return -ENOMEM;
		d->room_first = first;
		d->blk_cap = cap;
	}
	return gap_tree_reserve(&d->gaps, nblocks);
}

/* ---- name table ----------------------------------------------------------- */

static struct dent *name_find(const struct dirix *d, const char *name,
			      size_t len, uint32_t hash)
{
	if (!d->nbuckets)
		return NULL;
	for (struct dent *e = d->buckets[hash & (d->nbuckets - 1)]; e; e = e->next)
		if (e->hash == hash && e->len == len && !memcmp(e->name, name, len))
			return e;
	return NULL;
}

static int name_table_grow(struct dirix *d)
{
	size_t n = d->nbuckets ? d->nbuckets * 2 : 64;
	struct dent **b = calloc(n, sizeof(*b));

	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < d->nbuckets; i++) {
		struct dent *e = d->buckets[i], *next;

		for (; e; e = next) {
			next = e->next;
			e->next = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
		}
	}
	free(d->buckets);
	d->buckets = b;
	d->nbuckets = n;
	return 0;
}

/* A name's readdir cookie in an indexed directory ("." and ".." first). */
static uint64_t dent_key(const struct dirix *d, const char *name, size_t len)
{
	uint32_t hash, minor;

	if (d->dx_version < 0)
		return 0;
	if (is_dot_or_dotdot(name, len))
		return len - 1;         /* "." 0, ".." 1 */
	if (dx_name_hash(d->fs, d->dx_version, name, len, &hash, &minor))
		return dx_readdir_key(0, 0);    /* a version dx_root_version accepted cannot fail */
	return dx_readdir_key(hash, minor);
}

/* Insert a name not yet present; key: its dent_key if known (NULL: not). */
static int name_insert(struct dirix *d, const char *name, size_t len, const uint64_t *key,
		       uint32_t lblk, uint32_t off, ext2_ino_t ino, int ftype)
{
	struct dent *e;
	size_t slot;
	int rc;

	if (d->nentries >= d->nbuckets) {
		rc = name_table_grow(d);
		if (rc)
			return rc;
	}
	e = malloc(sizeof(*e) + len);
	if (!e)
		return -ENOMEM;
	e->hash = name_hash(name, len);
	e->key = key ? *key : dent_key(d, name, len);
	e->lblk = lblk;
	e->off = off;
	e->ino = ino;
	e->ftype = (uint8_t)ftype;
	e->len = (uint8_t)len;
	memcpy(e->name, name, len);
	slot = e->hash & (d->nbuckets - 1);
	e->next = d->buckets[slot];
	d->buckets[slot] = e;
	d->nentries++;
	d->ord_stale = true;
	if (!is_dot_or_dotdot(name, len))
		d->nother++;
	return 0;
}

static void name_delete(struct dirix *d, struct dent *victim)
{
	struct dent **pp = &d->buckets[victim->hash & (d->nbuckets - 1)];
	struct dx_ord *o = d->ord_stale ? NULL : dx_order_find(d->ord, d->nord, victim->key, victim->name);

	if (o)
		o->name = NULL;

	while (*pp != victim)
		pp = &(*pp)->next;
	*pp = victim->next;
	d->nentries--;
	if (!is_dot_or_dotdot(victim->name, victim->len))
		d->nother--;
	free(victim);
}

/* ---- directory index lifetime --------------------------------------------- */

static void dirix_free(struct dirix *d)
{
	for (size_t i = 0; i < d->nbuckets; i++) {
		struct dent *e = d->buckets[i], *next;

		for (; e; e = next) {
			next = e->next;
			free(e);
		}
	}
	free(d->buckets);
	gap_tree_free(&d->gaps);
	free(d->pblk);
	free(d->room_first);
	free(d->ord);
	free(d);
}

struct map_ctx {
	struct dirix *d;
	bool bad;               /* block mapped past i_size */
};

static int map_block(ext2_filsys fs, blk64_t *blocknr, e2_blkcnt_t blockcnt,
		     blk64_t ref_blk, int ref_offset, void *priv)
{
	struct map_ctx *m = priv;

	(void)fs;
	(void)ref_blk;
	(void)ref_offset;
	if (blockcnt < 0)
		return 0;
	if ((uint64_t)blockcnt >= m->d->nblocks) {
		m->bad = true;
		return BLOCK_ABORT;
	}
	m->d->pblk[blockcnt] = *blocknr;
	return 0;
}

/* Read and index one block of d; lblk must be mapped. */
static int index_block(struct dindex *di, struct dirix *d, uint32_t lblk)
{
	ext2_filsys fs = di->fs;
	struct dirblock_cursor c;
	struct dirent_view e;
	struct block_room room;
	errcode_t err;
	int rc;

	err = ext2fs_read_dir_block4(fs, d->pblk[lblk], di->blockbuf, 0, d->dir);
	if (err)
		return dir_errno(err);
	rc = dirblock_room_from(fs, di->blockbuf, 0, &room);
	if (rc)
		return rc;
	dirblock_cursor_init(&c, fs, di->blockbuf);
	while ((rc = dirblock_cursor_next(&c, &e)) == 1) {
		const char *name = e.de->name;

		if (e.ino == 0)
			continue;
		if (e.name_len > EXT2_NAME_LEN)
			return -EIO;
		/* Two entries with one name: the index could not stay exact. */
		if (name_find(d, name, e.name_len, name_hash(name, e.name_len)))
			return -EIO;
		rc = name_insert(d, name, e.name_len, NULL, lblk, e.off, e.ino, e.ftype);
		if (rc)
			return rc;
	}
	if (rc < 0)
		return rc;
	gap_tree_set(&d->gaps, lblk, room.max);
	d->room_first[lblk] = room.first;
	return 0;
}

static int index_inline_entry(void *ctx, const char *name, size_t len, ext2_ino_t ino,
			      int ftype, uint32_t pos, uint32_t next)
{
	struct dirix *d = ctx;

	(void)next;
	if (len > EXT2_NAME_LEN)
		return -EIO;
	if (name_find(d, name, len, name_hash(name, len)))
		return -EIO;    /* two entries with one name */
	return name_insert(d, name, len, NULL, 0, pos, ino, ftype);
}

/* An inline directory: no blocks, its names at their inline positions. */
static int dirix_build_inline(ext2_filsys fs, ext2_ino_t dir, const struct ext2_inode *inode,
			      struct dirix **out)
{
	struct dirix *d = calloc(1, sizeof(*d));
	int rc;

	if (!d)
		return -ENOMEM;
	d->fs = fs;
	d->dir = dir;
	d->dx_version = -1;
	d->inline_dir = true;
	rc = inline_dir_iterate(fs, dir, inode, index_inline_entry, d);
	if (rc) {
		dirix_free(d);
		return rc;
	}
	*out = d;
	return 0;
}

/* An indexed directory whose root this can follow is read in hash order
 * and grown by splits (d->dx_version), and so is one block that can be
 * indexed; any other keeps block order. */
static int dirix_dx_version(struct dindex *di, struct dirix *d)
{
	errcode_t err;

	if (d->nblocks == 1)
		d->dx_version = dx_default_version(di->fs);
	if (!d->htree || !ext2fs_has_feature_dir_index(di->fs->super) || d->nblocks < 2)
		return 0;
	err = ext2fs_read_dir_block4(di->fs, d->pblk[0], di->blockbuf, 0, d->dir);
	if (err)
		return dir_errno(err);
	d->dx_version = dx_root_version(di->fs, di->blockbuf);
	if (d->dx_version < 0)
		d->dx_version = -1;
	return 0;
}

static int dirix_build(struct dindex *di, ext2_ino_t dir, struct dirix **out)
{
	ext2_filsys fs = di->fs;
	struct ext2_inode inode;
	struct map_ctx m;
	struct dirix *d;
	uint64_t size;
	errcode_t err;
	int rc;

	err = ext2fs_read_inode(fs, dir, &inode);
	if (err)
		return dir_errno(err);
	if (!LINUX_S_ISDIR(inode.i_mode))
		return -ENOTDIR;
	if (inode.i_flags & EXT4_INLINE_DATA_FL)
		return dirix_build_inline(fs, dir, &inode, out);
	size = EXT2_I_SIZE(&inode);
	/* a directory with more blocks than the file system is damaged (its
	 * index would be sized by i_size alone) */
	if (size == 0 || size % fs->blocksize ||
	    size / fs->blocksize > ext2fs_blocks_count(fs->super) ||
	    size / fs->blocksize > UINT32_MAX)
		return -EIO;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->fs = fs;
	d->dir = dir;
	d->dx_version = -1;
	d->htree = (inode.i_flags & EXT2_INDEX_FL) != 0;
	d->nblocks = (uint32_t)(size / fs->blocksize);
	rc = dirix_reserve_blocks(d, d->nblocks);
	if (rc)
		goto fail;
	memset(d->pblk, 0, d->nblocks * sizeof(*d->pblk));

	m.d = d;
	m.bad = false;
	err = ext2fs_block_iterate3(fs, dir, BLOCK_FLAG_READ_ONLY | BLOCK_FLAG_DATA_ONLY,
				    NULL, map_block, &m);
	if (err) {
		rc = dir_errno(err);
		goto fail;
	}
	rc = -EIO;
	if (m.bad)
		goto fail;
	for (uint32_t b = 0; b < d->nblocks; b++) {
		/* A hole or a block outside the file system: corrupt. */
		if (d->pblk[b] == 0 ||
		    d->pblk[b] < fs->super->s_first_data_block ||
		    d->pblk[b] >= ext2fs_blocks_count(fs->super))
			goto fail;
	}
	rc = dirix_dx_version(di, d);
	if (rc)
		goto fail;
	for (uint32_t b = 0; b < d->nblocks; b++) {
		rc = index_block(di, d, b);
		if (rc)
			goto fail;
	}
	*out = d;
	return 0;
fail:
	dirix_free(d);
	return rc;
}

static size_t dir_slot(const struct dindex *di, ext2_ino_t dir)
{
	return (dir * 2654435761u) & (di->ndir_buckets - 1);
}

static void lru_unlink(struct dindex *di, struct dirix *d)
{
	if (d->lru_prev)
		d->lru_prev->lru_next = d->lru_next;
	else
		di->lru_head = d->lru_next;
	if (d->lru_next)
		d->lru_next->lru_prev = d->lru_prev;
	else
		di->lru_tail = d->lru_prev;
	d->lru_prev = d->lru_next = NULL;
}

static void lru_push_front(struct dindex *di, struct dirix *d)
{
	d->lru_prev = NULL;
	d->lru_next = di->lru_head;
	if (di->lru_head)
		di->lru_head->lru_prev = d;
	di->lru_head = d;
	if (!di->lru_tail)
		di->lru_tail = d;
}

static void dir_remove(struct dindex *di, struct dirix *d)
{
	struct dirix **pp = &di->dir_buckets[dir_slot(di, d->dir)];

	while (*pp != d)
		pp = &(*pp)->hnext;
	*pp = d->hnext;
	lru_unlink(di, d);
	di->ndirs--;
	dirix_free(d);
}

/* The index of dir, built on first use; most recently used afterwards. */
static int get_dir(struct dindex *di, ext2_ino_t dir, struct dirix **out)
{
	struct dirix *d;
	size_t slot;
	int rc;

	if (dir < 1 || dir > di->fs->super->s_inodes_count)
		return -EINVAL;
	slot = dir_slot(di, dir);
	for (d = di->dir_buckets[slot]; d; d = d->hnext) {
		if (d->dir == dir) {
			lru_unlink(di, d);
			lru_push_front(di, d);
			*out = d;
			return 0;
		}
	}
	rc = dirix_build(di, dir, &d);
	if (rc)
		return rc;
	while (di->ndirs >= di->max_dirs && di->lru_tail)
		dir_remove(di, di->lru_tail);
	d->hnext = di->dir_buckets[slot];
	di->dir_buckets[slot] = d;
	lru_push_front(di, d);
	di->ndirs++;
	*out = d;
	return 0;
}

/* ---- changes on disk ------------------------------------------------------ */

static int read_into(struct dindex *di, struct dirix *d, uint32_t lblk, char *buf)
{
	errcode_t err = ext2fs_read_dir_block4(di->fs, d->pblk[lblk], buf, 0, d->dir);

	return err ? dir_errno(err) : 0;
}

static int read_block(struct dindex *di, struct dirix *d, uint32_t lblk)
{
	return read_into(di, d, lblk, di->blockbuf);
}

/* The room block lblk of d has, as the index keeps it. */
static struct block_room room_of(const struct dirix *d, uint32_t lblk)
{
	return (struct block_room){ .max = gap_tree_room(&d->gaps, lblk), .first = d->room_first[lblk] };
}

/* Write buf as block lblk, whose room is *room. */
static int write_room(struct dindex *di, struct dirix *d, uint32_t lblk, char *buf,
		      const struct block_room *room)
{
	errcode_t err = ext2fs_write_dir_block4(di->fs, d->pblk[lblk], buf, 0, d->dir);

	if (err)
		return dir_errno(err);
	gap_tree_set(&d->gaps, lblk, room->max);
	d->room_first[lblk] = room->first;
	return 0;
}

/* Write buf as block lblk and refresh its room from all its entries. */
static int write_buf(struct dindex *di, struct dirix *d, uint32_t lblk, char *buf)
{
	struct block_room room;
	int rc = dirblock_room_from(di->fs, buf, 0, &room);

	return rc ? rc : write_room(di, d, lblk, buf, &room);
}

/* Write the block in blockbuf back and refresh its gap in the tree. */
static int write_block(struct dindex *di, struct dirix *d, uint32_t lblk)
{
	return write_buf(di, d, lblk, di->blockbuf);
}

/* Write the block in blockbuf back after a removal left entry freed (as
 * it is now) with more room than the removed entry had: the block's room
 * grows by that entry alone (the others keep theirs). */
static int write_freed(struct dindex *di, struct dirix *d, uint32_t lblk,
		       const struct dirent_view *freed)
{
	struct block_room room = room_of(d, lblk);

	return dirblock_room_freed(&room, freed) ? write_room(di, d, lblk, di->blockbuf, &room)
						 : write_block(di, d, lblk);
}

/* Before an add that cannot keep an htree valid: make the directory a
 * linear one, so the kernel and e2fsck no longer trust the (soon stale)
 * hash tree; with metadata_csum its index blocks are rewritten in leaf form
 * (dxwrite.c).  An inline directory is only read (inline_data images mount
 * read-only). */
static int prepare_change(struct dindex *di, struct dirix *d)
{
	struct ext2_inode inode;
	errcode_t err;
	bool changed;
	int rc;

	if (d->inline_dir)
		return -EOPNOTSUPP;
	if (!d->htree)
		return 0;
	err = ext2fs_read_inode(di->fs, d->dir, &inode);
	if (err)
		return dir_errno(err);
	inode.i_flags &= ~EXT2_INDEX_FL;
	err = ext2fs_write_inode(di->fs, d->dir, &inode);
	if (err)
		return dir_errno(err);
	d->htree = false;
	if (d->nblocks > 1)
		d->dx_version = -1;
	for (uint32_t b = 0; b < d->nblocks && ext2fs_has_feature_metadata_csum(di->fs->super); b++) {
		rc = read_block(di, d, b);
		if (!rc)
			rc = dx_block_to_leaf(di->fs, b, di->blockbuf, &changed);
		if (!rc && changed)
			rc = write_block(di, d, b);
		if (rc)
			return rc;
	}
	return 0;
}

/* Put the entry into block lblk (which has room for it), from the block's
 * first entry with room on. */
static int add_to_block(struct dindex *di, struct dirix *d, uint32_t lblk,
			const char *name, size_t len, ext2_ino_t ino, int ftype,
			uint32_t *off_out)
{
	struct block_room room = room_of(d, lblk);
	int rc = read_block(di, d, lblk);

	if (!rc)
		rc = dirblock_insert(di->fs, di->blockbuf, &room, name, len, ino, ftype, off_out);
	/* The index said there was room: the block changed under it. */
	if (rc == -ENOSPC)
		rc = -EIO;
	return rc ? rc : write_room(di, d, lblk, di->blockbuf, &room);
}

/* Append buf (a directory block's contents) as a new last block; its
 * logical block into *lblk_out. */
static int append_block(struct dindex *di, struct dirix *d, char *buf, uint32_t *lblk_out)
{
	ext2_filsys fs = di->fs;
	uint32_t lblk = d->nblocks;
	struct block_room room;
	uint64_t new_size = ((uint64_t)lblk + 1) * fs->blocksize;
	struct ext2_inode inode;
	blk64_t goal, pblk;
	errcode_t err;
	int rc;

	/* Without large_dir a directory stays below 2 GiB: the kernel reads
	 * only i_size, and e2fsck takes a bigger one for a large_dir one. */
	if (lblk == UINT32_MAX ||
	    (!ext2fs_has_feature_largedir(fs->super) && new_size >= (1ULL << 31)))
		return -EFBIG;
	rc = dirblock_room_from(fs, buf, 0, &room);
	if (!rc)
		rc = dirix_reserve_blocks(d, lblk + 1);
	if (rc)
		return rc;
	err = ext2fs_read_inode(fs, d->dir, &inode);
	if (err)
		return dir_errno(err);

	/* Near the directory's last block, so the directory stays compact. */
	goal = lblk ? d->pblk[lblk - 1] : ext2fs_find_inode_goal(fs, d->dir, &inode, 0);
	err = ext2fs_new_block2(fs, goal, NULL, &pblk);
	if (err)
		return dir_errno(err);
	/* Contents first, then the mapping, so the directory never maps a block
	 * of garbage. */
	err = ext2fs_write_dir_block4(fs, pblk, buf, 0, d->dir);
	if (err)
		return dir_errno(err);
	/* Mark it used before bmap may allocate indirect or extent blocks. */
	ext2fs_block_alloc_stats2(fs, pblk, +1);
	err = ext2fs_bmap2(fs, d->dir, &inode, NULL, BMAP_SET | BMAP_ALLOC, lblk,
			   NULL, &pblk);
	if (err) {
		ext2fs_block_alloc_stats2(fs, pblk, -1);
		return dir_errno(err);
	}
	err = ext2fs_iblk_add_blocks(fs, &inode, 1);
	if (err)
		return dir_errno(err);
	inode.i_size = (__u32)new_size;
	inode.i_size_high = (__u32)(new_size >> 32);
	err = ext2fs_write_inode(fs, d->dir, &inode);
	if (err)
		return dir_errno(err);

	d->pblk[lblk] = pblk;
	d->nblocks = lblk + 1;
	gap_tree_set(&d->gaps, lblk, room.max);
	d->room_first[lblk] = room.first;
	*lblk_out = lblk;
	return 0;
}

/* Append a new block holding only the entry. */
static int add_new_block(struct dindex *di, struct dirix *d, const char *name,
			 size_t len, ext2_ino_t ino, int ftype)
{
	ext2_filsys fs = di->fs;
	struct ext2_dir_entry *de = (struct ext2_dir_entry *)di->blockbuf;
	unsigned int usable = fs->blocksize;
	uint32_t lblk = 0;
	int rc;

	memset(di->blockbuf, 0, fs->blocksize);
	if (ext2fs_has_feature_metadata_csum(fs->super)) {
		usable -= sizeof(struct ext2_dir_entry_tail);
		ext2fs_initialize_dirent_tail(fs, EXT2_DIRENT_TAIL(di->blockbuf,
								  fs->blocksize));
	}
	dirent_fill(fs, de, name, len, ino, ftype);
	if (ext2fs_set_rec_len(fs, usable, de))
		return -EIO;
	rc = append_block(di, d, di->blockbuf, &lblk);
	if (rc)
		return rc;
	d->dx_version = -1;     /* linear past one block: readdir by block and offset */
	return name_insert(d, name, len, NULL, lblk, 0, ino, ftype);
}

/* After a split: every name in buf (block lblk) is at its new place. */
static int relocate_names(struct dirix *d, uint32_t lblk, char *buf)
{
	struct dirblock_cursor c;
	struct dirent_view e;
	int rc;

	dirblock_cursor_init(&c, d->fs, buf);
	while ((rc = dirblock_cursor_next(&c, &e)) == 1) {
		struct dent *de;

		if (e.ino == 0)
			continue;
		de = name_find(d, e.de->name, e.name_len, name_hash(e.de->name, e.name_len));
		if (!de)
			return -EIO;
		de->lblk = lblk;
		de->off = e.off;
	}
	return rc;
}

/* dx_grow's view of d's blocks: through the index's own edits. */
struct grow_ctx {
	struct dindex *di;
	struct dirix *d;
};

static int grow_read(void *ctx, uint32_t lblk, char *buf)
{
	struct grow_ctx *g = ctx;

	return read_into(g->di, g->d, lblk, buf);
}

static int grow_write(void *ctx, uint32_t lblk, char *buf)
{
	struct grow_ctx *g = ctx;

	return write_buf(g->di, g->d, lblk, buf);
}

static int grow_append(void *ctx, char *buf, uint32_t *lblk)
{
	struct grow_ctx *g = ctx;

	return append_block(g->di, g->d, buf, lblk);
}

static int grow_moved(void *ctx, uint32_t lblk, char *buf)
{
	struct grow_ctx *g = ctx;

	return relocate_names(g->d, lblk, buf);
}

static struct dx_blocks grow_blocks(struct grow_ctx *g)
{
	return (struct dx_blocks){ .ctx = g, .read = grow_read, .write = grow_write, .append = grow_append,
				   .moved = grow_moved };
}

/* A one-block directory a name of len bytes does not fit becomes an htree
 * (dxmake.c), as the kernel's ext4 indexes one, before the add; *split:
 * its two leaves. */
static int index_if_full(struct dindex *di, struct dirix *d, size_t len, struct dx_split *split)
{
	struct grow_ctx g = { .di = di, .d = d };
	const struct dx_blocks blocks = grow_blocks(&g);
	int rc;

	*split = (struct dx_split){ .leaf = false };
	if (d->htree || d->inline_dir || d->nblocks != 1 || d->dx_version < 0 ||
	    gap_tree_room(&d->gaps, 0) >= dirent_size(len))
		return 0;
	rc = dx_make_index(di->fs, d->dir, &blocks, di->splitbuf, split);
	if (!rc)
		d->htree = true;
	/* nothing to split (a block with one name): it grows linear */
	return rc == -EAGAIN ? 0 : rc;
}

/* The leaf the name of hash goes into just after split, as the kernel's
 * do_split picks it: the upper one from the split's hash on, a continued
 * one included. */
static uint32_t split_side(const struct dx_split *split, uint32_t hash)
{
	return hash >= (split->hash & ~1u) ? split->hi : split->lo;
}

/* Add to an htree directory, into the leaf the name hashes to, growing
 * the index when that leaf is full (*split: the leaves of a split just
 * made, whose side the name takes).  -EAGAIN when the index cannot take the
 * name (it cannot grow, or cannot be followed: the caller makes the
 * directory linear), and for a directory without an htree this follows. */
static int add_indexed(struct dindex *di, struct dirix *d, const char *name, size_t len,
		       ext2_ino_t ino, int ftype, struct dx_split *split)
{
	struct grow_ctx g = { .di = di, .d = d };
	const struct dx_blocks blocks = grow_blocks(&g);
	struct dx_path p;
	uint32_t off, leaf;
	int rc;

	if (!d->htree || d->inline_dir || d->dx_version < 0)
		return -EAGAIN;
	/* each round splits one block; a name fits after at most a split at
	 * every level and a new level, a few more in case of odd splits */
	for (int round = 0; round < 2 * DX_MAX_FRAMES + 2; round++) {
		if (dx_probe(di->fs, d->dir, d->pblk, d->nblocks, di->blockbuf, name, len, &p) ||
		    p.version != d->dx_version)
			return -EAGAIN;
		leaf = p.leaf;
		if (split->leaf && gap_tree_room(&d->gaps, split_side(split, p.hash)) >= dirent_size(len))
			leaf = split_side(split, p.hash);
		if (gap_tree_room(&d->gaps, leaf) >= dirent_size(len)) {
			rc = add_to_block(di, d, leaf, name, len, ino, ftype, &off);
			uint64_t key = dx_readdir_key(p.hash, p.minor);   /* its dent_key */
			return rc ? rc : name_insert(d, name, len, &key, leaf, off, ino, ftype);
		}
		rc = dx_grow(di->fs, &blocks, &p, di->splitbuf, split);
		if (rc)
			return rc;
	}
	return -EAGAIN;
}

/* ---- public API ------------------------------------------------------------ */

struct dindex *dindex_new(ext2_filsys fs, size_t max_dirs)
{
	struct dindex *di = calloc(1, sizeof(*di));

	if (!di)
		return NULL;
	di->fs = fs;
	di->max_dirs = max_dirs ? max_dirs : 1;
	di->ndir_buckets = 16;
	while (di->ndir_buckets < di->max_dirs && di->ndir_buckets < (1u << 20))
		di->ndir_buckets *= 2;
	di->dir_buckets = calloc(di->ndir_buckets, sizeof(*di->dir_buckets));
	di->blockbuf = malloc(fs->blocksize);
	di->splitbuf = malloc(4 * (size_t)fs->blocksize);
	if (!di->dir_buckets || !di->blockbuf || !di->splitbuf) {
		free(di->dir_buckets);
		free(di->blockbuf);
		free(di->splitbuf);
		free(di);
		return NULL;
	}
	return di;
}

void dindex_drop_all(struct dindex *di)
{
	while (di->lru_head)
		dir_remove(di, di->lru_head);
}

void dindex_free(struct dindex *di)
{
	if (!di)
		return;
	dindex_drop_all(di);
	added_names_free(&di->added);
	free(di->dir_buckets);
	free(di->blockbuf);
	free(di->splitbuf);
	free(di);
}

static void note_changed(struct dindex *di, ext2_ino_t dir)
{
	for (unsigned i = 0; i < di->nchanged; i++)
		if (di->changed[i] == dir)
			return;
	if (di->nchanged < sizeof(di->changed) / sizeof(di->changed[0]))
		di->changed[di->nchanged++] = dir;
	else
		di->changed_overflow = true;
}

void dindex_clear_added(struct dindex *di)
{
	added_names_clear(&di->added);
}

bool dindex_added_names(struct dindex *di, dindex_name_fn fn, void *ctx)
{
	return added_names_each(&di->added, fn, ctx);
}

void dindex_mark(struct dindex *di)
{
	di->nchanged = 0;
	di->changed_overflow = false;
}

void dindex_forget_changed(struct dindex *di)
{
	if (di->changed_overflow)
		dindex_drop_all(di);
	else
		for (unsigned i = 0; i < di->nchanged; i++)
			dindex_forget(di, di->changed[i]);
	dindex_mark(di);
}

size_t dindex_cached_dirs(struct dindex *di, ext2_ino_t *out, size_t max)
{
	size_t n = 0;
	for (struct dirix *d = di->lru_head; d && n < max; d = d->lru_next)
		out[n++] = d->dir;
	return n;
}

void dindex_forget(struct dindex *di, ext2_ino_t dir)
{
	for (struct dirix *d = di->dir_buckets[dir_slot(di, dir)]; d; d = d->hnext) {
		if (d->dir == dir) {
			dir_remove(di, d);
			return;
		}
	}
}

static int check_name(size_t len)
{
	if (len == 0)
		return -EINVAL;
	if (len > EXT2_NAME_LEN)
		return -ENAMETOOLONG;
	return 0;
}

int dindex_lookup(struct dindex *di, ext2_ino_t dir, const char *name, size_t len,
		  ext2_ino_t *ino, int *ftype)
{
	struct dirix *d;
	struct dent *e;
	int rc;

	rc = check_name(len);
	if (rc)
		return rc == -EINVAL ? -ENOENT : rc;
	rc = get_dir(di, dir, &d);
	if (rc)
		return rc;
	e = name_find(d, name, len, name_hash(name, len));
	if (!e)
		return -ENOENT;
	*ino = e->ino;
	*ftype = e->ftype;
	return 0;
}

int dindex_add(struct dindex *di, ext2_ino_t dir, const char *name, size_t len,
	       ext2_ino_t ino, int ftype)
{
	struct dx_split split;
	struct dirix *d;
	uint32_t off;
	int64_t blk;
	int rc;

	note_changed(di, dir);
	added_names_note(&di->added, dir, name, len);
	rc = check_name(len);
	if (rc)
		return rc;
	if (ino < 1 || ino > di->fs->super->s_inodes_count)
		return -EINVAL;
	if (!ext2fs_has_feature_filetype(di->fs->super))
		ftype = 0;
	rc = get_dir(di, dir, &d);
	if (rc)
		return rc;
	if (name_find(d, name, len, name_hash(name, len)))
		return -EEXIST;
	rc = index_if_full(di, d, len, &split);
	if (!rc)
		rc = add_indexed(di, d, name, len, ino, ftype, &split);
	if (rc != -EAGAIN)
		goto out;
	rc = prepare_change(di, d);
	if (rc)
		goto out;
	blk = gap_tree_find(&d->gaps, dirent_size(len));
	if (blk < 0) {
		rc = add_new_block(di, d, name, len, ino, ftype);
		goto out;
	}
	rc = add_to_block(di, d, (uint32_t)blk, name, len, ino, ftype, &off);
	if (rc)
		goto out;
	rc = name_insert(d, name, len, NULL, (uint32_t)blk, off, ino, ftype);
out:
	if (rc)
		dindex_forget(di, dir);
	return rc;
}

/* The entry of name in dir, its block read into blockbuf: *e in the index,
 * *found (and *prev before it) in the block.  -ENOENT if absent; other
 * errors after *d is set: the caller forgets the directory's index.  The
 * entry stays in its leaf or leaves it: an htree stays valid. */
static int find_entry(struct dindex *di, ext2_ino_t dir, const char *name, size_t len,
		      struct dirix **d, struct dent **e, struct dirent_view *found,
		      struct dirent_view *prev, bool *has_prev)
{
	int rc;

	*d = NULL;
	rc = get_dir(di, dir, d);
	if (rc) {
		*d = NULL;
		return rc;
	}
	*e = name_find(*d, name, len, name_hash(name, len));
	if (!*e)
		return -ENOENT;
	if ((*d)->inline_dir)
		return -EOPNOTSUPP;
	rc = read_block(di, *d, (*e)->lblk);
	return rc ? rc : dirblock_locate(di->fs, di->blockbuf, (*e)->off, (*e)->name, (*e)->len, found, prev,
					 has_prev);
}

int dindex_remove(struct dindex *di, ext2_ino_t dir, const char *name, size_t len)
{
	struct dirent_view found, prev;
	bool has_prev;
	struct dirix *d;
	struct dent *e;
	int rc;

	note_changed(di, dir);
	rc = check_name(len);
	if (rc)
		return rc == -EINVAL ? -ENOENT : rc;
	if (is_dot_or_dotdot(name, len))
		return -EINVAL;
	rc = find_entry(di, dir, name, len, &d, &e, &found, &prev, &has_prev);
	if (rc == -ENOENT || !d)
		return rc;
	if (rc)
		goto out;
	if (has_prev) {
		/* The previous entry takes over the space, as ext2 does. */
		prev.rec_len += found.rec_len;
		if (ext2fs_set_rec_len(di->fs, prev.rec_len, prev.de)) {
			rc = -EIO;
			goto out;
		}
		rc = write_freed(di, d, e->lblk, &prev);
	} else {
		found.de->inode = 0;
		found.ino = 0;
		rc = write_freed(di, d, e->lblk, &found);
	}
	if (rc)
		goto out;
	name_delete(d, e);
out:
	if (rc)
		dindex_forget(di, dir);
	return rc;
}

int dindex_replace(struct dindex *di, ext2_ino_t dir, const char *name, size_t len,
		   ext2_ino_t ino, int ftype)
{
	struct block_room room;
	struct dx_ord *order;
	struct dirent_view found, prev;
	bool has_prev;
	struct dirix *d;
	struct dent *e;
	int rc;

	note_changed(di, dir);
	added_names_note(&di->added, dir, name, len);
	rc = check_name(len);
	if (rc)
		return rc == -EINVAL ? -ENOENT : rc;
	if (ino < 1 || ino > di->fs->super->s_inodes_count)
		return -EINVAL;
	if (!ext2fs_has_feature_filetype(di->fs->super))
		ftype = 0;
	rc = find_entry(di, dir, name, len, &d, &e, &found, &prev, &has_prev);
	if (rc == -ENOENT || !d)
		return rc;
	if (rc)
		goto out;
	dirent_fill(di->fs, found.de, name, len, ino, ftype);
	/* the same name: every entry keeps its room */
	room = room_of(d, e->lblk);
	rc = write_room(di, d, e->lblk, di->blockbuf, &room);
	if (rc)
		goto out;
	e->ino = ino;
	e->ftype = (uint8_t)ftype;
	order = d->ord_stale ? NULL : dx_order_find(d->ord, d->nord, e->key, e->name);
	if (order) {
		order->ino = ino;
		order->ftype = (uint8_t)ftype;
	}
out:
	if (rc)
		dindex_forget(di, dir);
	return rc;
}

int dindex_is_empty(struct dindex *di, ext2_ino_t dir)
{
	struct dirix *d;
	int rc = get_dir(di, dir, &d);

	if (rc)
		return rc;
	return d->nother == 0;
}

/* The names of an indexed directory sorted by cookie, once per change. */
static int order_build(struct dirix *d)
{
	struct dx_ord *v;
	size_t n = 0;

	if (!d->ord_stale && d->ord)
		return 0;
	v = realloc(d->ord, (d->nentries ? d->nentries : 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	d->ord = v;
	for (size_t i = 0; i < d->nbuckets; i++)
		for (struct dent *e = d->buckets[i]; e; e = e->next)
			v[n++] = (struct dx_ord){ .key = e->key, .name = e->name, .len = e->len,
						  .ftype = e->ftype, .ino = e->ino };
	d->nord = dx_order_sort(v, n);
	d->ord_stale = false;
	return 0;
}

int dindex_readdir_batch(struct dindex *di, ext2_ino_t dir, uint64_t off,
			 dindex_fill_fn fill, dindex_fits_fn fits, void *ctx)
{
	struct dirix *d;
	int rc;

	rc = get_dir(di, dir, &d);
	if (rc)
		return rc;
	if (d->inline_dir)
		return inline_dir_readdir(di->fs, dir, off, fill, ctx);
	if (d->dx_version < 0)
		return dirblocks_readdir(di->fs, d->dir, d->pblk, d->nblocks, di->blockbuf, off,
					 fill, ctx);
	rc = order_build(d);
	if (rc)
		return rc;
	return dx_order_emit(d->ord, d->nord, off, fill, fits, ctx);
}

int dindex_readdir(struct dindex *di, ext2_ino_t dir, uint64_t off,
		   dindex_fill_fn fill, void *ctx)
{
	return dindex_readdir_batch(di, dir, off, fill, NULL, ctx);
}
