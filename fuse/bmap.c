/*
 * fuse/bmap.c - how a file's logical blocks map onto the disk, and the one
 * room of fuse/ that knows it (as the kernel's ext4_map_blocks is): looking
 * a block or a run up, allocating, punching a range, freeing a file's blocks
 * in steps sized to the transaction's room, SEEK_DATA/SEEK_HOLE, and the
 * largest file size the map can address.  Indirect block trees are here;
 * extent trees (EXT4_EXTENTS_FL) in extmap.c.
 */
#include "rfs.h"
#include "io.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- looking blocks up ---- */

static int check_blk(struct rfs *r, ext2_ino_t ino, blk64_t b)
{
	if (b && (b < r->fs->super->s_first_data_block || b >= ext2fs_blocks_count(r->fs->super)))
		return report_corruption(ino, "block pointer out of range");
	return 0;
}

static bool is_extent(const struct ext2_inode *in)
{
	return in->i_flags & EXT4_EXTENTS_FL;
}

bool bmap_has_unwritten(const struct ext2_inode *in)
{
	return is_extent(in);
}

/*
 * A block-mapped file's lookups, each indirect block read once for all the
 * blocks of a run it maps: ext2fs_bmap2 allocates two blocks of buffer and
 * reads the whole chain of indirect blocks for every block it is asked.
 * level[d] holds the indirect block last read at depth d, held[d] its
 * number: nothing writes the map while a walk holds it.
 */
struct ind_walk {
	blk64_t held[3];
	uint32_t *level[3];
};

/* The walk's buffers, at its first indirect block: most runs map direct
 * blocks alone. */
static bool ind_walk_buffers(struct ind_walk *w, size_t bs)
{
	if (w->level[0])
		return true;
	char *bufs = malloc(3 * bs);
	for (int d = 0; bufs && d < 3; d++)
		w->level[d] = (uint32_t *)(bufs + d * bs);
	return bufs != NULL;
}

static void ind_walk_free(struct ind_walk *w)
{
	free(w->level[0]);
}

/* The path to lblk past the direct blocks: how many indirect blocks deep
 * (1-3) and the index at each; 0 when lblk is a direct block, -1 past the
 * largest file a block map addresses. */
static int ind_path(uint64_t apb, blk64_t lblk, unsigned idx[3])
{
	if (lblk < EXT2_NDIR_BLOCKS)
		return 0;
	lblk -= EXT2_NDIR_BLOCKS;
	if (lblk < apb) {
		idx[0] = lblk;
		return 1;
	}
	if ((lblk -= apb) < apb * apb) {
		idx[0] = lblk / apb;
		idx[1] = lblk % apb;
		return 2;
	}
	if ((lblk -= apb * apb) < apb * apb * apb) {
		idx[0] = lblk / (apb * apb);
		idx[1] = lblk / apb % apb;
		idx[2] = lblk % apb;
		return 3;
	}
	return -1;
}

/* The physical block of lblk (0: a hole), reading the indirect blocks on
 * its path that w does not hold.  Past a direct block, w then holds its
 * leaf: w->held[depth - 1]. */
static int ind_lookup(struct rfs *r, ext2_ino_t ino, const struct ext2_inode *in,
		      struct ind_walk *w, blk64_t lblk, blk64_t *pblk)
{
	ext2_filsys fs = r->fs;
	unsigned idx[3];
	int depth = ind_path(fs->blocksize / 4, lblk, idx);

	*pblk = 0;
	if (depth < 0)
		return report_corruption(ino, "cannot map a block");
	if (depth == 0) {
		*pblk = in->i_block[lblk];
		return check_blk(r, ino, *pblk);
	}
	blk64_t b = in->i_block[EXT2_NDIR_BLOCKS + depth - 1];
	if (b && !ind_walk_buffers(w, fs->blocksize))
		return -ENOMEM;
	for (int d = 0; d < depth && b; d++) {
		if (b < fs->super->s_first_data_block || b >= ext2fs_blocks_count(fs->super))
			return report_corruption(ino, "cannot map a block");
		if (w->held[d] != b) {
			w->held[d] = 0;
			if (io_channel_read_blk64(fs->io, b, 1, w->level[d]))
				return report_corruption(ino, "cannot map a block");
			w->held[d] = b;
		}
		b = ext2fs_le32_to_cpu(w->level[d][idx[d]]);
	}
	*pblk = b;
	return check_blk(r, ino, b);
}

int bmap_block(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t lblk,
	       blk64_t *pblk)
{
	return bmap_run(r, ino, in, lblk, 1, pblk, NULL);
}

int bmap_run(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t first, unsigned n,
	     blk64_t *phys, bool *unwritten)
{
	if (is_extent(in))
		return ext_map_run(r, ino, in, first, n, phys, unwritten);
	if (unwritten)
		memset(unwritten, 0, n * sizeof(*unwritten));
	if (in->i_flags & EXT4_INLINE_DATA_FL)
		return report_corruption(ino, "cannot map a block");
	struct ind_walk w = { 0 };
	int ret = 0;
	for (unsigned i = 0; i < n && !ret; i++)
		ret = ind_lookup(r, ino, in, &w, first + i, &phys[i]);
	ind_walk_free(&w);
	return ret;
}

/* ---- allocating ---- */

/* A new block for logical block lblk of a block-mapped file, near goal,
 * counted in in's blocks; the caller maps it. */
static int ind_new_block(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t lblk,
			 blk64_t goal, blk64_t *pblk)
{
	ext2_filsys fs = r->fs;

	if (!goal || goal >= ext2fs_blocks_count(fs->super))
		goal = ext2fs_find_inode_goal(fs, ino, in, lblk);
	if (goal >= ext2fs_blocks_count(fs->super))
		goal = fs->super->s_first_data_block;
	errcode_t e = ext2fs_new_block2(fs, goal, NULL, pblk);
	if (e)
		return -errmap(e);
	/* an indirect block map holds 32-bit block numbers (64bit images) */
	if (*pblk >> 32)
		return -ENOSPC;
	ext2fs_block_alloc_stats2(fs, *pblk, +1);
	ext2fs_iblk_add_blocks(fs, in, 1);
	return 0;
}

/* The leaf indirect block a run of allocations fills: read once, its
 * pointers set in memory, written once (ext2fs_bmap2 reads and writes it
 * for every block). */
struct ind_leaf {
	struct ind_walk w;
	blk64_t blk;		/* held in w.level[depth - 1]; 0: none */
	blk64_t base;		/* the logical block its first pointer maps */
	int depth;
	bool dirty;
};

static int leaf_flush(struct rfs *r, struct ind_leaf *l)
{
	errcode_t e = 0;
	if (l->blk && l->dirty)
		e = io_channel_write_blk64(r->fs->io, l->blk, 1, l->w.level[l->depth - 1]);
	l->blk = 0;
	l->dirty = false;
	return e ? -errmap(e) : 0;
}

/* Maps pblk at lblk, whose leaf (depth > 0) is not held, through
 * ext2fs_bmap2 (which adds the indirect blocks the path lacks); then holds
 * that leaf for the blocks after it.  A direct block's pointer is set in in
 * alone, which the caller writes: ext2fs_bmap2 would write the inode (a read
 * and a write of its inode table block) for each one. */
static int ind_map_new(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t lblk,
		       blk64_t pblk, int depth, const unsigned *idx, struct ind_leaf *l)
{
	if (depth == 0 && !(in->i_flags & EXT4_INLINE_DATA_FL)) {
		in->i_block[lblk] = (uint32_t)pblk;
		return 0;
	}
	errcode_t e = ext2fs_bmap2(r->fs, ino, in, NULL, BMAP_SET | BMAP_ALLOC, lblk, NULL, &pblk);
	if (e)
		return -errmap(e);
	if (depth <= 0)
		return 0;
	blk64_t mapped;
	memset(l->w.held, 0, sizeof(l->w.held));
	int ret = ind_lookup(r, ino, in, &l->w, lblk, &mapped);
	if (!ret && mapped != pblk)
		ret = report_corruption(ino, "cannot map a block");
	if (ret)
		return ret;
	l->blk = l->w.held[depth - 1];
	l->base = lblk - idx[depth - 1];
	l->depth = depth;
	return 0;
}

/* Every hole of phys[0..n) of a block-mapped file, the first near goal. */
static int ind_alloc_run(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t first,
			 unsigned n, blk64_t goal, blk64_t *phys)
{
	uint64_t apb = r->fs->blocksize / 4;
	struct ind_leaf l = { .blk = 0 };
	int ret = 0;
	for (unsigned i = 0; i < n && !ret; i++) {
		if (phys[i]) {
			goal = phys[i] + 1;
			continue;
		}
		blk64_t lblk = first + i;
		unsigned idx[3];
		int depth = ind_path(apb, lblk, idx);
		bool held = l.blk && depth == l.depth && lblk - idx[depth - 1] == l.base;
		if (!held && (ret = leaf_flush(r, &l)) != 0)
			break;
		ret = ind_new_block(r, ino, in, lblk, goal, &phys[i]);
		if (!ret && held) {
			l.w.level[depth - 1][idx[depth - 1]] = ext2fs_cpu_to_le32((uint32_t)phys[i]);
			l.dirty = true;
		} else if (!ret && (ret = ind_map_new(r, ino, in, lblk, phys[i], depth, idx, &l))) {
			ext2fs_block_alloc_stats2(r->fs, phys[i], -1);
			ext2fs_iblk_sub_blocks(r->fs, in, 1);
		}
		if (ret)
			phys[i] = 0;
		else
			goal = phys[i] + 1;
	}
	int fret = leaf_flush(r, &l);
	ind_walk_free(&l.w);
	return ret ? ret : fret;
}

int bmap_alloc(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t lblk,
	       blk64_t goal, blk64_t *pblk)
{
	*pblk = 0;
	if (is_extent(in))
		return ext_alloc_run(r, ino, in, lblk, 1, goal, false, pblk);
	return ind_alloc_run(r, ino, in, lblk, 1, goal, pblk);
}

int bmap_alloc_run(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t first,
		   unsigned n, bool unwritten, blk64_t *phys)
{
	if (is_extent(in))
		return ext_alloc_run(r, ino, in, first, n, 0, unwritten, phys);
	return ind_alloc_run(r, ino, in, first, n, 0, phys);
}

int bmap_mark_written(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t lblk,
		      blk64_t len)
{
	return is_extent(in) ? ext_mark_written(r, ino, in, lblk, len) : 0;
}

/* After an allocation failed half-way: blocks past i_size are invalid in a
 * block-mapped file (and written blocks in an extent-mapped one), so the
 * ones of [from, to) past it are given back. */
void bmap_trim_past_eof(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t from,
			blk64_t to)
{
	blk64_t keep = (EXT2_I_SIZE(in) + r->fs->blocksize - 1) / r->fs->blocksize;
	if (!ext2fs_inode_has_valid_blocks2(r->fs, in))
		return;
	if (is_extent(in)) {
		if (from < keep)
			from = keep;
		if (from < to)
			(void)ext_punch(r->fs, ino, in, from, to);
		return;
	}
	(void)ext2fs_punch(r->fs, ino, in, NULL, keep, ~0ULL);
}

/* A run of 256 allocations in a block-mapped file dirties at most a single,
 * a double and a triple indirect block per 256 data blocks it crosses into,
 * with room to spare. */
unsigned bmap_alloc_meta(struct rfs *r)
{
	(void)r;
	return 64;
}

/* ---- punching ---- */

/*
 * Frees the blocks mapped at [start, end) of the subtree under the n block
 * pointers p at 'level' (0: p points at data blocks; the range counts blocks
 * from the subtree's first).  An indirect block the punch empties is freed
 * too; one it changes is written back; *changed says whether p changed.
 * (libext2fs 1.47's ext2fs_punch passes a wrong count down the tree and frees
 * to the end of a leaf indirect block that is not the first of its subtree.)
 * bufs holds one block per level below this one.
 */
static errcode_t punch_tree(ext2_filsys fs, struct ext2_inode *in, blk_t *p, blk64_t n,
			    int level, blk64_t start, blk64_t end, char *bufs, bool *changed)
{
	blk64_t apb = fs->blocksize / 4, span = 1;
	for (int l = 0; l < level; l++)
		span *= apb;
	for (blk64_t i = start / span; i < n && i * span < end; i++) {
		if (!p[i])
			continue;
		if (level) {
			blk64_t lo = i * span;
			bool child_changed = false;
			errcode_t e = ext2fs_read_ind_block(fs, p[i], bufs);
			if (!e)
				e = punch_tree(fs, in, (blk_t *)bufs, apb, level - 1,
					       start > lo ? start - lo : 0,
					       (end < lo + span ? end : lo + span) - lo,
					       bufs + fs->blocksize, &child_changed);
			if (!e && child_changed)
				e = ext2fs_write_ind_block(fs, p[i], bufs);
			if (e)
				return e;
			bool empty = true;
			for (blk64_t j = 0; j < apb && empty; j++)
				empty = ((blk_t *)bufs)[j] == 0;
			if (!empty)
				continue;
		}
		ext2fs_block_alloc_stats2(fs, p[i], -1);
		errcode_t e = ext2fs_iblk_sub_blocks(fs, in, 1);
		if (e)
			return e;
		p[i] = 0;
		*changed = true;
	}
	return 0;
}

errcode_t bmap_punch(ext2_filsys fs, ext2_ino_t ino, struct ext2_inode *in, blk64_t start,
		     blk64_t end)
{
	if (is_extent(in))
		return ext_punch(fs, ino, in, start, end);
	blk64_t apb = fs->blocksize / 4, base = 0, span = 1;
	char *bufs = malloc(3 * fs->blocksize);
	errcode_t e = 0;
	bool changed = false;

	if (!bufs)
		return EXT2_ET_NO_MEMORY;
	/* i_block[0..11] map blocks directly, [12] [13] [14] are the roots of
	 * the single, double and triple indirect trees */
	for (int slot = 0, level = 0; slot < EXT2_N_BLOCKS && !e && base < end; level++) {
		blk64_t n = level ? 1 : EXT2_NDIR_BLOCKS, cover = n * span;
		if (start < base + cover)
			e = punch_tree(fs, in, (blk_t *)in->i_block + slot, n, level,
				       start > base ? start - base : 0,
				       (end < base + cover ? end : base + cover) - base, bufs, &changed);
		slot += n;
		base += cover;
		span = level ? span * apb : apb;
	}
	free(bufs);
	return e;
}

/*
 * What one step of a punch may touch in the open transaction.  Punching k
 * indirect blocks' worth of logical blocks below the last mapped one writes
 * (or frees after writing, as libext2fs does) at most k+1 single, k+1 double
 * and one triple indirect block; the step also rewrites the inode, and the
 * release around it an orphan-list neighbour and an EA block.  The bitmaps,
 * descriptors and superblock a commit adds are already outside the room
 * rio_txn_room reports.
 */
#define STEP_OVERHEAD 8
#define STEP_MIN (STEP_OVERHEAD + 2)
/* In an extent tree a step may also split a leaf, and each node above it
 * up to the root (five levels at most): new blocks and rewritten ones. */
#define EXT_SPLIT 12

int punch_step(struct rfs *r, ext2_ino_t ino, const struct ext2_inode *in, blk64_t from,
	       bool down, blk64_t *step)
{
	size_t used = 0, limit = 0;

	*step = ~0ULL;
	if (r->ro || !r->attached || rio_txn_room(r->fs->io, &used, &limit))
		return 0;
	/* max_transaction_blocks paces a long release too, but never below
	 * one step per transaction */
	size_t cap = limit, soft = r->cfg->io.max_transaction_blocks;
	if (soft && soft < cap)
		cap = soft > STEP_MIN ? soft : STEP_MIN < limit ? STEP_MIN : limit;
	if (used + STEP_MIN <= cap && in && is_extent(in)) {
		size_t room = cap - used - STEP_OVERHEAD;
		errcode_t e = ext_punch_span(r->fs, ino, in, from, down,
					     room > EXT_SPLIT ? room - EXT_SPLIT : 0, step);
		return e ? -errmap(e) : 0;
	}
	if (used + STEP_MIN <= cap) {
		*step = (cap - used - STEP_OVERHEAD) / 2 * (r->fs->blocksize / 4);
		return 0;
	}
	if (used) {
		*step = 0;   /* commit what the transaction holds, then go on */
		return 0;
	}
	fprintf(stderr, "recon-fuse: a transaction has room for %zu blocks, fewer than the %d "
		"one step of freeing blocks needs (the journal is too short)\n", limit, STEP_MIN);
	return -EFBIG;
}

/* One past the last logical block the indirect block blk maps (0: none),
 * blk being a tree of `level` levels (1: it names data blocks) whose first
 * logical block is base.  bufs holds a block per level. */
static errcode_t ind_end(ext2_filsys fs, blk_t blk, int level, blk64_t base, char *bufs,
			 blk64_t *end)
{
	blk64_t apb = fs->blocksize / 4, span = 1;
	for (int l = 1; l < level; l++)
		span *= apb;
	*end = 0;
	if (blk < fs->super->s_first_data_block || blk >= ext2fs_blocks_count(fs->super)) {
		*end = base + apb * span;   /* not ours to read: the punch judges it */
		return 0;
	}
	errcode_t e = ext2fs_read_ind_block(fs, blk, bufs);
	if (e)
		return e;
	const blk_t *p = (const blk_t *)bufs;
	for (blk64_t i = apb; i-- > 0 && !*end;) {
		if (!p[i])
			continue;
		if (level == 1)
			*end = base + i + 1;
		else if ((e = ind_end(fs, p[i], level - 1, base + i * span, bufs + fs->blocksize,
				      end)) != 0)
			return e;
	}
	return 0;
}

/* One past the last logical block in's block map maps (0: none): a huge
 * sparse file's release does not walk its holes. */
errcode_t bmap_end(ext2_filsys fs, ext2_ino_t ino, const struct ext2_inode *in, blk64_t *end)
{
	if (is_extent(in))
		return ext_end(fs, ino, in, end);
	blk64_t apb = fs->blocksize / 4;
	blk64_t base[4] = { 0, EXT2_NDIR_BLOCKS, EXT2_NDIR_BLOCKS + apb,
			    EXT2_NDIR_BLOCKS + apb + apb * apb };

	*end = 0;
	if (!ext2fs_inode_has_valid_blocks2(fs, (struct ext2_inode *)in))
		return 0;
	char *bufs = malloc(3 * fs->blocksize);
	if (!bufs)
		return EXT2_ET_NO_MEMORY;
	errcode_t e = 0;
	for (int level = 3; level >= 1 && !e && !*end; level--)
		if (in->i_block[EXT2_NDIR_BLOCKS + level - 1])
			e = ind_end(fs, in->i_block[EXT2_NDIR_BLOCKS + level - 1], level,
				    base[level], bufs, end);
	for (int i = EXT2_NDIR_BLOCKS; i-- > 0 && !e && !*end;)
		if (in->i_block[i])
			*end = i + 1;
	free(bufs);
	return e;
}

/* No block is mapped and none holds the map: every i_block word zero, or an
 * extent tree that is a root without entries.  A punch would free nothing and
 * only write the inode as it is (libext2fs's punch ends with a write). */
static bool maps_nothing(const struct ext2_inode *in)
{
	if (is_extent(in)) {
		const struct ext3_extent_header *h = (const void *)in->i_block;
		return ext2fs_le16_to_cpu(h->eh_entries) == 0 && ext2fs_le16_to_cpu(h->eh_depth) == 0;
	}
	for (int i = 0; i < EXT2_N_BLOCKS; i++)
		if (in->i_block[i])
			return false;
	return true;
}

/* Everything mapped from logical block start on. */
static errcode_t punch_to_end(ext2_filsys fs, ext2_ino_t ino, struct ext2_inode *in,
			      blk64_t start)
{
	if (is_extent(in)) {
		errcode_t e = ext_punch(fs, ino, in, start, ~0ULL);
		return e ? e : ext2fs_write_inode(fs, ino, in);
	}
	return ext2fs_punch(fs, ino, in, NULL, start, ~0ULL);
}

/*
 * Free the blocks of ino from logical block `keep` on; i_size follows down
 * to keep (a truncate sets its own, smaller, size first).  A huge file frees
 * more than one transaction may hold, so the punch goes from the last mapped
 * block down in steps sized to the room left (punch_step), committing when
 * the room runs out.  Before any such commit the inode goes on the orphan
 * list (*listed: it is on it; set here when it was put there, and the caller
 * takes it off in the transaction that ends its work), so every commit in
 * between leaves the file system consistent and a crash leaves the rest to
 * the next mount's orphan processing, as ext3 does.  Each pass either frees
 * a step or commits a transaction that holds something: it always ends.
 */
int punch_from(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t keep,
	       bool *listed)
{
	ext2_filsys fs = r->fs;
	uint64_t bs = fs->blocksize;
	errcode_t e = 0;
	int ret;

	if (!ext2fs_inode_has_valid_blocks2(fs, in))
		return 0;
	while (!maps_nothing(in)) {
		blk64_t end, step;
		if ((e = bmap_end(fs, ino, in, &end)) != 0)
			break;
		if ((ret = punch_step(r, ino, in, end, true, &step)) != 0)
			return ret;
		if (end <= keep || end - keep <= step) {
			/* the last step: also what bmap_end does not see (an
			 * indirect block that maps nothing) */
			e = punch_to_end(fs, ino, in, keep);
			break;
		}
		if (!*listed) {
			if ((ret = orphan_add(r, ino, in)) != 0)
				return ret;
			*listed = true;
		}
		if (step) {
			blk64_t start = end - step;
			e = punch_to_end(fs, ino, in, start);
			if (!e && start * bs < EXT2_I_SIZE(in))
				e = ext2fs_inode_size_set(fs, in, start * bs);
			if (!e)
				e = ext2fs_write_inode(fs, ino, in);
		} else {
			e = ext2fs_write_inode(fs, ino, in);
			if (!e)
				e = commit_midway(r);
		}
		if (e)
			return e == EROFS ? -EROFS : -errmap(e);
	}
	if (!e && keep * bs < EXT2_I_SIZE(in))
		e = ext2fs_inode_size_set(fs, in, keep * bs);
	return e ? -errmap(e) : 0;
}

/* ---- SEEK_DATA / SEEK_HOLE ---- */

/* SEEK_DATA / SEEK_HOLE over the block map: the first mapped (data) or
 * unmapped (hole) logical block at or after 'from', walking only the blocks
 * that exist (indirect blocks that are holes are skipped whole). */
struct seek_scan {
	blk64_t from;       /* first logical block of interest */
	bool want_data;
	blk64_t next;       /* SEEK_HOLE: the next block expected if no hole */
	blk64_t found;      /* the answer's logical block */
	bool done;
};

static int seek_scan_block(ext2_filsys fs, blk64_t *pblk, e2_blkcnt_t lblk, blk64_t ref_blk,
			   int ref_offset, void *priv)
{
	struct seek_scan *s = priv;

	(void)fs;
	(void)ref_blk;
	(void)ref_offset;
	if (lblk < 0 || !*pblk || (blk64_t)lblk < s->from)
		return 0;
	if (s->want_data) {
		s->found = lblk;
		s->done = true;
		return BLOCK_ABORT;
	}
	if ((blk64_t)lblk > s->next) {
		s->found = s->next;
		s->done = true;
		return BLOCK_ABORT;
	}
	s->next = lblk + 1;
	return 0;
}

int bmap_seek(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t from,
	      bool want_data, blk64_t *found)
{
	if (is_extent(in))
		return ext_seek(r, ino, in, from, want_data, found);
	struct seek_scan s = { .from = from, .want_data = want_data, .next = from };
	if (ext2fs_inode_has_valid_blocks2(r->fs, in)) {
		errcode_t e = ext2fs_block_iterate3(r->fs, ino,
						    BLOCK_FLAG_READ_ONLY | BLOCK_FLAG_DATA_ONLY,
						    NULL, seek_scan_block, &s);
		if (e)
			return -errmap(e);
	}
	if (!s.done && !s.want_data)
		s.found = s.next;            /* the hole after the last block */
	if (!s.done && s.want_data)
		return -ENXIO;               /* no data past from */
	*found = s.found;
	return 0;
}

/* ---- limits ---- */

/*
 * The largest size of a block-mapped file, as the kernel's ext4 driver
 * computes s_bitmap_maxbytes for ext3: what the block tree addresses, unless
 * i_blocks (512-byte sectors in 32 bits without huge_file) runs out first;
 * then the limit is the i_blocks bound less the indirect blocks needed to
 * map that many data blocks.
 */
static uint64_t bmap_max_bytes(ext2_filsys fs)
{
	unsigned bits = EXT2_BLOCK_SIZE_BITS(fs->super);
	uint64_t ppb = 1ULL << (bits - 2);
	uint64_t tree = EXT2_NDIR_BLOCKS + ppb + ppb * ppb + ppb * ppb * ppb;
	uint64_t tree_meta = 1 + (1 + ppb) + (1 + ppb + ppb * ppb);
	uint64_t cap = ext2fs_has_feature_huge_file(fs->super) ? (1ULL << 48) - 1 :
			   ((1ULL << 32) - 1) >> (bits - 9);
	uint64_t blocks = tree;

	if (tree + tree_meta > cap) {
		uint64_t rest = cap - EXT2_NDIR_BLOCKS - ppb;
		uint64_t meta = 1;
		if (rest < ppb * ppb) {
			meta += 1 + (rest + ppb - 1) / ppb;
		} else {
			meta += 1 + ppb;
			rest -= ppb * ppb;
			meta += 1 + (rest + ppb - 1) / ppb + (rest + ppb * ppb - 1) / (ppb * ppb);
		}
		blocks = cap - meta;
	}
	uint64_t bytes = blocks << bits;
	if (bytes > (uint64_t)INT64_MAX)
		bytes = INT64_MAX;
	return bytes;
}

/* An extent's first block is 32 bits: 2^32 - 1 blocks, less when i_blocks
 * (512-byte sectors, 32 bits without huge_file) runs out first, as the
 * kernel's ext4_max_size computes s_maxbytes. */
static uint64_t extent_max_bytes(ext2_filsys fs)
{
	unsigned bits = EXT2_BLOCK_SIZE_BITS(fs->super);
	uint64_t bytes = ((1ULL << 32) - 1) << bits;
	if (!ext2fs_has_feature_huge_file(fs->super)) {
		uint64_t cap = (((1ULL << 32) - 1) >> (bits - 9)) << bits;
		if (bytes > cap)
			bytes = cap;
	}
	return bytes;
}

uint64_t bmap_file_max(const struct rfs *r, const struct ext2_inode *in)
{
	return in && is_extent(in) ? r->max_extent_bytes : r->max_bytes;
}

void bmap_init(struct rfs *r, struct ext2_inode *in)
{
	if (ext2fs_has_feature_extents(r->fs->super))
		ext_init(in);
}

void bmap_limits(struct rfs *r)
{
	r->max_bytes = bmap_max_bytes(r->fs);
	r->max_extent_bytes = ext2fs_has_feature_extents(r->fs->super) ?
				      extent_max_bytes(r->fs) : r->max_bytes;
}
