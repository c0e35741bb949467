/*
 * fuse/extmap.c - extent-mapped files (EXT4_EXTENTS_FL), for bmap.c: runs
 * looked up, allocated and mapped, unwritten extents converted, ranges
 * punched, SEEK_DATA/SEEK_HOLE, and the cost of a punch in tree blocks.
 *
 * Built on libext2fs's extent handle (ext2fs_extent_goto, _get, _replace,
 * _insert, _delete, _fix_parents), which keeps the tree's shape, its node
 * splits and its block checksums; the higher-level calls of libext2fs 1.47.0
 * are avoided where they are wrong for us: ext2fs_punch refuses an extent
 * that ends at the file system's last block, ext2fs_fallocate allocates far
 * past the range asked when it starts before the first extent, and
 * ext2fs_extent_set_bmap maps one block at a time.  The handle works on the
 * caller's inode in place and writes it when the root changes (the caller
 * writes it again with its own changes).  Tree blocks go through the io
 * channel: they are metadata, journaled and checked like any other.
 */
#include "rfs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define EXT_MAX_LEN(uninit) ((uninit) ? EXT_UNINIT_MAX_LEN : EXT_INIT_MAX_LEN)

/* Block by block: libext2fs 1.47.0's ext2fs_block_alloc_stats_range tells
 * its callback (the rollback's and the transaction's record) a count of 0. */
static void stats_run(ext2_filsys fs, blk64_t pblk, blk64_t n, int inuse)
{
	for (blk64_t k = 0; k < n; k++)
		ext2fs_block_alloc_stats2(fs, pblk + k, inuse);
}

static bool is_uninit(const struct ext2fs_extent *e)
{
	return e->e_flags & EXT2_EXTENT_FLAGS_UNINIT;
}

static int ext_err(ext2_ino_t ino, errcode_t e)
{
	switch (e) {
	case EXT2_ET_BLOCK_ALLOC_FAIL:
	case EXT2_ET_NO_MEMORY:
	case EXT2_ET_RO_FILSYS:
		return -errmap(e);
	default:
		if (e > 0 && e < 256)
			return -(int)e;
		return report_corruption(ino, "bad extent tree");
	}
}

static bool extent_in_fs(ext2_filsys fs, const struct ext2fs_extent *x)
{
	return x->e_len && x->e_pblk >= fs->super->s_first_data_block &&
	       x->e_pblk + x->e_len <= ext2fs_blocks_count(fs->super);
}

/* The extent after (or before) *x in file order: EXT2_ET_EXTENT_NO_NEXT at
 * the end.  After ext2fs_extent_goto, libext2fs's NEXT_LEAF (PREV_LEAF)
 * first goes back down into the leaf it came from at each level of a tree
 * deeper than the root (the path's visit counts are left unset): the
 * extents it passes again are skipped. */
static errcode_t step_extent(ext2_extent_handle_t h, struct ext2fs_extent *x, bool back)
{
	blk64_t was = x->e_lblk;
	for (unsigned guard = 0; guard < (1u << 20); guard++) {
		errcode_t e = ext2fs_extent_get(h, back ? EXT2_EXTENT_PREV_LEAF :
							  EXT2_EXTENT_NEXT_LEAF, x);
		if (e == EXT2_ET_EXTENT_NO_PREV)
			return EXT2_ET_EXTENT_NO_NEXT;
		if (e || (back ? x->e_lblk < was : x->e_lblk > was))
			return e;
	}
	return EXT2_ET_EXTENT_LEAF_BAD;
}

/*
 * Positions h at the first extent that ends past lblk (NULL *x: none).
 * ext2fs_extent_goto leaves the handle on the extent holding lblk or, in a
 * hole, on a neighbour either side of it (or nowhere for an empty tree).
 */
static errcode_t seek_extent(ext2_extent_handle_t h, blk64_t lblk, struct ext2fs_extent *x,
			     bool *found)
{
	errcode_t e = ext2fs_extent_goto(h, lblk);
	*found = false;
	if (e && e != EXT2_ET_EXTENT_NOT_FOUND)
		return e;
	e = ext2fs_extent_get(h, EXT2_EXTENT_CURRENT, x);
	if (e == EXT2_ET_NO_CURRENT_NODE || e == EXT2_ET_EXTENT_NO_NEXT)
		return 0;
	if (e)
		return e;
	while (x->e_lblk + x->e_len <= lblk) {
		e = step_extent(h, x, false);
		if (e == EXT2_ET_EXTENT_NO_NEXT)
			return 0;
		if (e)
			return e;
	}
	*found = true;
	return 0;
}

/* A handle on a copy of in: for walks that change nothing (an open on an
 * empty i_block would write a root header into the caller's inode). */
static errcode_t open_ro(ext2_filsys fs, ext2_ino_t ino, const struct ext2_inode *in,
			 struct ext2_inode *copy, ext2_extent_handle_t *h)
{
	*copy = *in;
	return ext2fs_extent_open2(fs, ino, copy, h);
}

/* A handle that changes the caller's inode in place.  libext2fs takes the
 * tree's end from i_size at open and gives the last index entry of a node
 * the length end - start, in 32 bits.  Extents may lie past i_size (a
 * truncate lowers it before it frees them; fallocate with KEEP_SIZE): with
 * the end at or below an index entry's start that length is 0, and
 * ext2fs_extent_fix_parents cannot find the entry again (EXTENT_NOT_FOUND)
 * once a leaf empties or a start moves.  So the handle is opened with the
 * end at the largest logical block, and the size put back. */
static errcode_t open_rw(ext2_filsys fs, ext2_ino_t ino, struct ext2_inode *in,
			 ext2_extent_handle_t *h)
{
	__u32 size_lo = in->i_size, size_hi = in->i_size_high;
	uint64_t tree_end = ((1ULL << 32) - 1) * fs->blocksize;
	in->i_size = (__u32)tree_end;
	in->i_size_high = (__u32)(tree_end >> 32);
	errcode_t e = ext2fs_extent_open2(fs, ino, in, h);
	in->i_size = size_lo;
	in->i_size_high = size_hi;
	return e;
}

int ext_map_run(struct rfs *r, ext2_ino_t ino, const struct ext2_inode *in, blk64_t first,
		unsigned n, blk64_t *phys, bool *unwritten)
{
	struct ext2_inode copy;
	ext2_extent_handle_t h = NULL;
	struct ext2fs_extent x;
	bool found = false;

	memset(phys, 0, n * sizeof(*phys));
	if (unwritten)
		memset(unwritten, 0, n * sizeof(*unwritten));
	errcode_t e = open_ro(r->fs, ino, in, &copy, &h);
	if (!e)
		e = seek_extent(h, first, &x, &found);
	for (unsigned i = 0; !e && found && i < n;) {
		blk64_t l = first + i;
		if (!extent_in_fs(r->fs, &x)) {
			ext2fs_extent_free(h);
			return report_corruption(ino, "extent outside the file system");
		}
		if (x.e_lblk > l) {
			blk64_t skip = x.e_lblk - l;
			i += skip < n - i ? (unsigned)skip : n - i;
			continue;
		}
		for (; i < n && first + i < x.e_lblk + x.e_len; i++) {
			bool u = is_uninit(&x);
			if (unwritten)
				unwritten[i] = u;
			if (!u || unwritten)
				phys[i] = x.e_pblk + (first + i - x.e_lblk);
		}
		e = step_extent(h, &x, false);
		if (e == EXT2_ET_EXTENT_NO_NEXT) {
			e = 0;
			break;
		}
	}
	if (h)
		ext2fs_extent_free(h);
	return e ? ext_err(ino, e) : 0;
}

/*
 * Maps the hole [lblk, lblk + len) to physical blocks from pblk, one extent
 * (or several past the longest an extent holds), merged into the extent
 * before it when that one ends where this begins on both sides.
 */
static errcode_t map_hole(ext2_extent_handle_t h, blk64_t lblk, blk64_t pblk, blk64_t len,
			  bool uninit)
{
	while (len) {
		struct ext2fs_extent x, nx = { .e_pblk = pblk, .e_lblk = lblk,
					       .e_flags = uninit ? EXT2_EXTENT_FLAGS_UNINIT : 0 };
		blk64_t max = EXT_MAX_LEN(uninit);
		errcode_t e = ext2fs_extent_goto(h, lblk);
		if (!e)
			return EXT2_ET_EXTENT_LEAF_BAD;   /* not a hole */
		if (e != EXT2_ET_EXTENT_NOT_FOUND)
			return e;
		e = ext2fs_extent_get(h, EXT2_EXTENT_CURRENT, &x);
		int flags = 0;
		if (e == EXT2_ET_NO_CURRENT_NODE || e == EXT2_ET_EXTENT_NO_NEXT) {
			e = 0;
		} else if (e) {
			return e;
		} else if (x.e_lblk < lblk) {
			if (x.e_lblk + x.e_len == lblk && x.e_pblk + x.e_len == pblk &&
			    is_uninit(&x) == uninit && x.e_len < max) {
				blk64_t add = len < max - x.e_len ? len : max - x.e_len;
				x.e_len += add;
				e = ext2fs_extent_replace(h, 0, &x);
				lblk += add, pblk += add, len -= add;
				if (e)
					return e;
				continue;
			}
			flags = EXT2_EXTENT_INSERT_AFTER;
		}
		nx.e_len = len < max ? len : max;
		e = ext2fs_extent_insert(h, flags, &nx);
		if (!e)
			e = ext2fs_extent_fix_parents(h);
		if (e)
			return e;
		lblk += nx.e_len, pblk += nx.e_len, len -= nx.e_len;
	}
	return 0;
}

/*
 * Gives every hole of phys[0..n) (logical blocks from first) new blocks,
 * as long runs as the free space has, near goal.  A run allocated is
 * mapped before the next is looked for; on failure what is mapped stays
 * (the caller's rollback takes it back) and phys[] says what is.
 */
int ext_alloc_run(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t first,
		  unsigned n, blk64_t goal, bool uninit, blk64_t *phys)
{
	ext2_filsys fs = r->fs;
	ext2_extent_handle_t h = NULL;
	errcode_t e = open_rw(fs, ino, in, &h);

	for (unsigned i = 0; !e && i < n;) {
		if (phys[i]) {
			goal = phys[i] + 1;
			i++;
			continue;
		}
		unsigned j = i;
		while (j < n && !phys[j])
			j++;
		if (!goal || goal >= ext2fs_blocks_count(fs->super))
			goal = ext2fs_find_inode_goal(fs, ino, in, first + i);
		blk64_t pblk, plen;
		e = ext2fs_new_range(fs, 0, goal, j - i, NULL, &pblk, &plen);
		if (e)
			break;
		stats_run(fs, pblk, plen, +1);
		e = map_hole(h, first + i, pblk, plen, uninit);
		if (e) {
			stats_run(fs, pblk, plen, -1);
			break;
		}
		ext2fs_iblk_add_blocks(fs, in, plen);
		for (blk64_t k = 0; k < plen; k++)
			phys[i + k] = pblk + k;
		i += plen;
		goal = pblk + plen;
	}
	if (h)
		ext2fs_extent_free(h);
	return e ? ext_err(ino, e) : 0;
}

/*
 * Marks [lblk, lblk + len) written where an unwritten extent covers it:
 * the extent keeps its unwritten head (or tail), and the written middle is
 * mapped as a hole would be, so that it joins the written extent before it
 * when they touch (a file fallocated and then written in order ends as one
 * extent, as the kernel's merging leaves it); the unwritten tail after a
 * head goes back in last.  A leaf that fills up splits: tree blocks may be
 * allocated, ENOSPC possible.
 */
static errcode_t convert_one(ext2_extent_handle_t h, struct ext2fs_extent x, blk64_t lblk,
			     blk64_t b)
{
	blk64_t xend = x.e_lblk + x.e_len;
	struct ext2fs_extent head = x, tail = x;
	head.e_len = lblk - x.e_lblk;
	tail.e_lblk = b;
	tail.e_pblk = x.e_pblk + (b - x.e_lblk);
	tail.e_len = xend - b;
	errcode_t e;
	if (head.e_len || tail.e_len) {
		e = ext2fs_extent_replace(h, 0, head.e_len ? &head : &tail);
		if (!e)
			e = ext2fs_extent_fix_parents(h);
	} else {
		e = ext2fs_extent_delete(h, 0);
		if (!e)
			e = ext2fs_extent_fix_parents(h);
		if (e == EXT2_ET_NO_CURRENT_NODE)
			e = 0;
	}
	if (!e)
		e = map_hole(h, lblk, x.e_pblk + (lblk - x.e_lblk), b - lblk, false);
	if (!e && head.e_len && tail.e_len)
		e = map_hole(h, b, tail.e_pblk, tail.e_len, true);
	return e;
}

int ext_mark_written(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t lblk,
		     blk64_t len)
{
	ext2_extent_handle_t h = NULL;
	errcode_t e = open_rw(r->fs, ino, in, &h);
	blk64_t end = lblk + len;

	while (!e && lblk < end) {
		struct ext2fs_extent x;
		bool found;
		e = seek_extent(h, lblk, &x, &found);
		if (e || !found || x.e_lblk >= end)
			break;
		blk64_t xend = x.e_lblk + x.e_len;
		if (!is_uninit(&x) || x.e_lblk > lblk) {
			lblk = x.e_lblk > lblk ? x.e_lblk : xend;
			continue;
		}
		blk64_t b = end < xend ? end : xend;
		e = convert_one(h, x, lblk, b);
		lblk = b;
	}
	if (h)
		ext2fs_extent_free(h);
	return e ? ext_err(ino, e) : 0;
}

/* Frees what is mapped at [start, end), forward; *freed counts blocks. */
static errcode_t punch_range(ext2_filsys fs, ext2_extent_handle_t h, blk64_t start,
			     blk64_t end, blk64_t *freed)
{
	while (start < end) {
		struct ext2fs_extent x;
		bool found;
		errcode_t e = seek_extent(h, start, &x, &found);
		if (e || !found || x.e_lblk >= end)
			return e;
		if (!extent_in_fs(fs, &x))
			return EXT2_ET_EXTENT_LEAF_BAD;
		blk64_t xend = x.e_lblk + x.e_len;
		blk64_t a = start > x.e_lblk ? start : x.e_lblk, b = end < xend ? end : xend;
		blk64_t fpblk = x.e_pblk + (a - x.e_lblk);
		if (a == x.e_lblk && b == xend) {
			e = ext2fs_extent_delete(h, 0);
			if (!e) {
				e = ext2fs_extent_fix_parents(h);
				if (e == EXT2_ET_NO_CURRENT_NODE)
					e = 0;
			}
		} else if (a == x.e_lblk) {
			x.e_lblk = b;
			x.e_pblk += b - a;
			x.e_len -= b - a;
			e = ext2fs_extent_replace(h, 0, &x);
			if (!e)
				e = ext2fs_extent_fix_parents(h);
		} else {
			struct ext2fs_extent rest = x;
			x.e_len = a - x.e_lblk;
			e = ext2fs_extent_replace(h, 0, &x);
			if (!e && b < xend) {
				rest.e_lblk = b;
				rest.e_pblk = x.e_pblk + (b - x.e_lblk);
				rest.e_len = xend - b;
				e = ext2fs_extent_insert(h, EXT2_EXTENT_INSERT_AFTER, &rest);
			}
			if (!e)
				e = ext2fs_extent_fix_parents(h);
		}
		if (e)
			return e;
		stats_run(fs, fpblk, b - a, -1);
		*freed += b - a;
		start = b;
	}
	return 0;
}

errcode_t ext_punch(ext2_filsys fs, ext2_ino_t ino, struct ext2_inode *in, blk64_t start,
		    blk64_t end)
{
	ext2_extent_handle_t h = NULL;
	blk64_t freed = 0;
	errcode_t e = open_rw(fs, ino, in, &h);
	if (e)
		return e;
	e = punch_range(fs, h, start, end, &freed);
	ext2fs_extent_free(h);
	errcode_t e2 = ext2fs_iblk_sub_blocks(fs, in, freed);
	return e ? e : e2;
}

errcode_t ext_end(ext2_filsys fs, ext2_ino_t ino, const struct ext2_inode *in, blk64_t *end)
{
	struct ext2_inode copy;
	ext2_extent_handle_t h = NULL;
	struct ext2fs_extent x;

	*end = 0;
	errcode_t e = open_ro(fs, ino, in, &copy, &h);
	if (e)
		return e;
	e = ext2fs_extent_get(h, EXT2_EXTENT_LAST_LEAF, &x);
	if (!e && x.e_len)
		*end = x.e_lblk + x.e_len;
	if (e == EXT2_ET_NO_CURRENT_NODE || e == EXT2_ET_EXTENT_NO_NEXT)
		e = 0;
	ext2fs_extent_free(h);
	return e;
}

/*
 * How many logical blocks from `from` (upward, or downward below it) a punch
 * may take while dirtying at most `budget` tree blocks: each extent cut or
 * removed counts two (its leaf, and the index above it should the leaf empty
 * or start elsewhere).  At least one extent's worth, so that a punch always
 * moves on.  ~0 when the whole rest fits.
 */
errcode_t ext_punch_span(ext2_filsys fs, ext2_ino_t ino, const struct ext2_inode *in,
			 blk64_t from, bool down, size_t budget, blk64_t *span)
{
	struct ext2_inode copy;
	ext2_extent_handle_t h = NULL;
	struct ext2fs_extent x;
	bool found = false;
	size_t cost = 0;

	*span = ~0ULL;
	errcode_t e = open_ro(fs, ino, in, &copy, &h);
	if (e)
		return e;
	if (down) {
		if (from) {
			e = ext2fs_extent_goto(h, from - 1);
			if (e == EXT2_ET_EXTENT_NOT_FOUND)
				e = 0;
			if (!e)
				e = ext2fs_extent_get(h, EXT2_EXTENT_CURRENT, &x);
			found = !e;
		}
	} else {
		e = seek_extent(h, from, &x, &found);
	}
	if (e == EXT2_ET_NO_CURRENT_NODE || e == EXT2_ET_EXTENT_NO_NEXT)
		e = 0, found = false;
	while (!e && found) {
		bool past = down ? x.e_lblk >= from : x.e_lblk + x.e_len <= from;
		if (!past) {
			cost += 2;
			if (cost > budget && cost > 2) {
				*span = down ? from - (x.e_lblk + x.e_len) : x.e_lblk - from;
				break;
			}
		}
		e = step_extent(h, &x, down);
		if (e == EXT2_ET_EXTENT_NO_NEXT)
			e = 0, found = false;
	}
	ext2fs_extent_free(h);
	return e;
}

/* The first block at or after from holding data (want_data: an extent that
 * is written) or a hole (none, or an unwritten one), as the kernel's ext4
 * answers SEEK_DATA and SEEK_HOLE.  -ENXIO: no data at or after from. */
int ext_seek(struct rfs *r, ext2_ino_t ino, const struct ext2_inode *in, blk64_t from,
	     bool want_data, blk64_t *found_at)
{
	struct ext2_inode copy;
	ext2_extent_handle_t h = NULL;
	struct ext2fs_extent x;
	bool found = false;
	blk64_t at = from;

	errcode_t e = open_ro(r->fs, ino, in, &copy, &h);
	if (!e)
		e = seek_extent(h, from, &x, &found);
	while (!e && found) {
		if (want_data && !is_uninit(&x)) {
			*found_at = x.e_lblk > from ? x.e_lblk : from;
			ext2fs_extent_free(h);
			return 0;
		}
		if (!want_data) {
			if (x.e_lblk > at || is_uninit(&x))
				break;          /* a hole before it, or it is one */
			at = x.e_lblk + x.e_len;
		}
		e = step_extent(h, &x, false);
		if (e == EXT2_ET_EXTENT_NO_NEXT)
			e = 0, found = false;
	}
	if (h)
		ext2fs_extent_free(h);
	if (e)
		return ext_err(ino, e);
	if (want_data)
		return -ENXIO;
	*found_at = at;
	return 0;
}

/* A new file, directory or slow symlink on an image with extents: an empty
 * root in i_block (depth 0, room for four extents). */
void ext_init(struct ext2_inode *in)
{
	struct ext3_extent_header *eh = (struct ext3_extent_header *)in->i_block;
	memset(in->i_block, 0, sizeof(in->i_block));
	eh->eh_magic = ext2fs_cpu_to_le16(EXT3_EXT_MAGIC);
	eh->eh_entries = 0;
	eh->eh_depth = 0;
	eh->eh_max = ext2fs_cpu_to_le16((sizeof(in->i_block) - sizeof(*eh)) /
					sizeof(struct ext3_extent));
	in->i_flags |= EXT4_EXTENTS_FL;
}
