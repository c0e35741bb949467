/*
 * checker/diff_htree.c - the diff of htree indexes: roots, nodes and leaves a transaction
 * writes, walked from the root when an index block changes (part of
 * chk_check; diff.c holds the entry point).
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ext2fs/ext2fs.h>

#include "chk_internal.h"

/* A dx entry's block number: its top four bits are not part of it. */
#define DX_BLOCK_MASK 0x0fffffffu

/* ------------------------------------------------------------ htree */

uint32_t chk_dx_limit(const struct chk_fs *fs, uint32_t off)
{
	/* metadata_csum keeps an 8-byte dx tail after the entries */
	return (fs->bs - off) / 8 - (fs->csum.metadata_csum ? 1 : 0);
}

bool chk_dx_node_like(const struct chk_fs *fs, const uint8_t *d)
{
	const struct dirent_hdr e = chk_dirent_at(d);
	return e.inode == 0 && e.rec_len == fs->bs && e.name_len == 0 &&
	       chk_ld16(d + 8 + offsetof(struct ext2_dx_countlimit, limit)) == chk_dx_limit(fs, 8);
}

static bool is_dx_node(const struct chk_fs *fs, const uint8_t *d)
{
	return chk_dx_node_like(fs, d);
}

static void htree_records(const struct chk_fs *fs, struct txn *t, uint64_t blk, const uint8_t *o, const uint8_t *n,
			  uint32_t off, bool root)
{
	if (root) {
		const struct ext2_dx_root_info *oi = (const void *)(o + 24), *ni = (const void *)(n + 24);
		if (oi->hash_version != ni->hash_version)
			chk_verdict_add_record(t->v, CHK_HTREE, blk, "hash_version", oi->hash_version, ni->hash_version);
		if (oi->indirect_levels != ni->indirect_levels)
			chk_verdict_add_record(t->v, CHK_HTREE, blk, "indirect_levels", oi->indirect_levels,
					   ni->indirect_levels);
	}
	const struct ext2_dx_countlimit *oc = (const void *)(o + off), *nc = (const void *)(n + off);
	if (oc->count != nc->count)
		chk_verdict_add_record(t->v, CHK_HTREE, blk, "count", oc->count, nc->count);
	if (oc->limit != nc->limit)
		chk_verdict_add_record(t->v, CHK_HTREE, blk, "limit", oc->limit, nc->limit);
	const struct ext2_dx_entry *oe = (const void *)(o + off), *ne = (const void *)(n + off);
	uint32_t cnt = nc->count > oc->count ? nc->count : oc->count;
	for (uint32_t i = 0; i < cnt && off + 8 * (i + 1) <= fs->bs; i++) {
		if (i > 0 && oe[i].hash != ne[i].hash)
			chk_verdict_add_record(t->v, CHK_HTREE, blk, chk_arena_indexed(&t->v->strings, "hash", i),
					   i < oc->count ? oe[i].hash : 0, i < nc->count ? ne[i].hash : 0);
		if (oe[i].block != ne[i].block)
			chk_verdict_add_record(t->v, CHK_HTREE, blk, chk_arena_indexed(&t->v->strings, "block", i),
					   i < oc->count ? oe[i].block : 0, i < nc->count ? ne[i].block : 0);
	}
}

/* The root info the checker can walk: what e2fsck pass 1/2 and the kernel's
 * dx_probe accept (one level of nodes, two with large_dir). */
static bool dx_root_usable(const struct chk_fs *fs, const struct ext2_dx_root_info *ri)
{
	return ri->reserved_zero == 0 && ri->info_length == 8 && !(ri->unused_flags & 1) &&
	       ri->hash_version <= EXT2_HASH_TEA && ri->indirect_levels <= chk_htree_max_levels(fs);
}

/* A block shaped like an index node (fake empty entry over the whole block),
 * whatever its count/limit say. */
static bool dx_node_shape(const struct chk_fs *fs, const uint8_t *d)
{
	const struct dirent_hdr e = chk_dirent_at(d);
	return e.inode == 0 && e.rec_len == fs->bs && e.name_len == 0;
}

/* Walk of a directory's index in the new state: the structure e2fsck pass 2
 * checks (count/limit, hash order, depth, each block referenced once). */
struct dxwalk {
	struct chk_fs *fs;
	struct txn *t;
	uint32_t dir;
	const struct ext2_inode *in;
	uint32_t dir_blocks;
	uint8_t *seen;                   /* logical blocks referenced so far */
	uint8_t *buf;                    /* scratch: one block */
	bool deep;                       /* read every leaf (new root, depth change, scan) */
	unsigned nprob;
};

#define DX_MAX_PROBLEMS 8                /* per directory: one bad field is enough */

/* pblk: the index block at fault; its first htree record (if the
 * transaction changed it) goes with the violation */
static void dx_problem(struct dxwalk *w, uint64_t pblk, enum chk_inv inv, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void dx_problem(struct dxwalk *w, uint64_t pblk, enum chk_inv inv, const char *fmt, ...)
{
	if (w->nprob++ >= DX_MAX_PROBLEMS)
		return;
	char tmp[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	size_t rec = SIZE_MAX;
	for (size_t i = 0; i < w->t->v->nrecs && rec == SIZE_MAX; i++)
		if (w->t->v->recs[i].type == CHK_HTREE && w->t->v->recs[i].id == pblk)
			rec = i;
	chk_txn_problem(w->t, inv, rec, "dir %u htree: %s", w->dir, tmp);
}

/* d: node contents (new state) with its dx_countlimit at off; od: the same
 * node approved (NULL if new); [lo, hi]: the hash range the parent gives it;
 * level: index levels below this node. */
static void dx_walk_node(struct dxwalk *w, uint32_t node_lblk, uint64_t node_pblk, const uint8_t *d,
			 const uint8_t *od, uint32_t off, uint32_t lo, uint32_t hi, int level)
{
	struct chk_fs *fs = w->fs;
	const struct ext2_dx_countlimit *cl = (const void *)(d + off);
	const struct ext2_dx_entry *e = (const void *)(d + off);
	const struct ext2_dx_countlimit *ocl = od ? (const void *)(od + off) : NULL;
	const struct ext2_dx_entry *oe = od ? (const void *)(od + off) : NULL;
	uint32_t limit = chk_dx_limit(fs, off);
	if (cl->limit != limit || cl->count == 0 || cl->count > cl->limit) {
		dx_problem(w, node_pblk, INV_HTREE_COUNT_LIMIT, "block %u: count %u limit %u (the block holds %u)",
			   node_lblk, cl->count, cl->limit, limit);
		return;
	}
	for (uint32_t i = 0; i < cl->count; i++) {
		uint32_t h = e[i].hash;
		if (i >= 2 && h < e[i - 1].hash)
			dx_problem(w, node_pblk, INV_HTREE_HASH_ORDER, "block %u: hash[%u] 0x%x below hash[%u] 0x%x",
				   node_lblk, i, h, i - 1, e[i - 1].hash);
		if (i >= 1 && ((h & ~1u) < (lo & ~1u) || (h & ~1u) > hi))
			dx_problem(w, node_pblk, INV_HTREE_HASH_ORDER, "block %u: hash[%u] 0x%x outside its parent's range [0x%x, 0x%x]",
				   node_lblk, i, h, lo, hi);
		/* the kernel and e2fsck both read the block under DX_BLOCK_MASK
		 * and pass an image with the top bits set: they are not corruption */
		uint32_t lb = e[i].block & DX_BLOCK_MASK;
		if (lb == 0 || lb >= w->dir_blocks) {
			dx_problem(w, node_pblk, INV_HTREE_BLOCKS, "block %u: entry %u names block %u (%s)", node_lblk, i, lb,
				   lb == 0 ? "the root" : "past the directory's end");
			continue;
		}
		if (bit_get(w->seen, lb)) {
			dx_problem(w, node_pblk, INV_HTREE_BLOCKS, "block %u: entry %u names block %u, referenced twice",
				   node_lblk, i, lb);
			continue;
		}
		bit_put(w->seen, lb, true);
		bool entry_new = !oe || i >= ocl->count || ocl->count > limit || (oe[i].block & DX_BLOCK_MASK) != lb;
		if (level == 0 && !w->deep && !entry_new)
			continue;                /* an unchanged leaf reference: leaves checked when written */
		uint64_t pb = chk_txn_bmap(fs, w->t, w->in, lb);
		const uint8_t *cd = pb && pb < fs->blocks_count ? chk_txn_new_block(fs, w->t, pb, w->buf) : NULL;
		if (!cd) {
			dx_problem(w, node_pblk, INV_HTREE_BLOCKS, "block %u: entry %u names block %u, a hole", node_lblk, i, lb);
			continue;
		}
		bool shape = dx_node_shape(fs, cd);
		if (level == 0) {
			if (shape && ((const struct ext2_dx_countlimit *)(cd + 8))->limit == chk_dx_limit(fs, 8))
				dx_problem(w, node_pblk, INV_HTREE_DEPTH, "block %u: entry %u names index node %u where a leaf belongs",
					   node_lblk, i, lb);
			continue;
		}
		if (!shape) {
			dx_problem(w, node_pblk, INV_HTREE_DEPTH, "block %u: entry %u names leaf %u where indirect_levels wants a node",
				   node_lblk, i, lb);
			continue;
		}
		uint8_t *copy = malloc(2 * (size_t)fs->bs), *ocopy = copy + fs->bs;
		if (!copy) {
			w->t->err = -ENOMEM;
			return;
		}
		memcpy(copy, cd, fs->bs);
		const uint8_t *ocd = NULL;
		if (!w->deep && !entry_new && pb < fs->blocks_count && chk_btype(fs, pb) == BT_DIR &&
		    chk_bowner(fs, pb) == w->dir) {
			struct tblock *tb = chk_tb_find(w->t, pb);
			if (!tb)
				ocd = copy;      /* not written: identical */
			else if (tb->old) {
				memcpy(ocopy, tb->old, fs->bs);
				ocd = ocopy;
			}
		}
		uint32_t elo = i ? h : lo, ehi = i + 1 < cl->count ? e[i + 1].hash : hi;
		dx_walk_node(w, lb, pb, copy, ocd, 8, elo, ehi, level - 1);
		free(copy);
	}
}

/*
 * Check dir's whole index in the new state.  root: block 0 (new state);
 * old_root: its approved contents when the directory was indexed before with
 * the same block 0 (NULL for a new root, and in scans); fresh: a root made
 * by this transaction (the kernel and e2fsck -D use s_def_hash_version).
 */
static void htree_check_tree(struct chk_fs *fs, struct txn *t, uint32_t dir, const struct ext2_inode *in,
			     uint64_t root_pblk, const uint8_t *root, const uint8_t *old_root, bool fresh,
			     bool deep)
{
	const struct ext2_dx_root_info *ri = (const void *)(root + 24);
	struct dxwalk w = { fs, t, dir, in, chk_dir_blocks(fs, in), NULL, NULL, deep, 0 };
	/* unused_flags bit 0: an incompatible hash flag e2fsck and dx_probe refuse */
	if (ri->reserved_zero != 0 || ri->info_length != 8 || (ri->unused_flags & 1)) {
		dx_problem(&w, root_pblk, INV_HTREE_ROOT, "root: reserved_zero %u info_length %u unused_flags 0x%x",
			   ri->reserved_zero, ri->info_length, ri->unused_flags);
		return;
	}
	const struct ext2_super_block *sb = (const void *)(t->sb_changed ? t->sb_new : fs->sb_raw);
	if (ri->hash_version > EXT2_HASH_TEA) {
		dx_problem(&w, root_pblk, INV_HTREE_HASH_VERSION, "root: unknown hash_version %u", ri->hash_version);
		return;
	}
	const struct ext2_dx_root_info *oi = old_root ? (const void *)(old_root + 24) : NULL;
	if (oi && oi->hash_version != ri->hash_version)
		dx_problem(&w, root_pblk, INV_HTREE_HASH_VERSION, "root: hash_version %u -> %u in a live index",
			   oi->hash_version, ri->hash_version);
	else if (fresh && sb->s_def_hash_version <= EXT2_HASH_TEA && ri->hash_version != sb->s_def_hash_version)
		dx_problem(&w, root_pblk, INV_HTREE_HASH_VERSION, "new root: hash_version %u, the file system's default is %u",
			   ri->hash_version, sb->s_def_hash_version);
	if (ri->indirect_levels > chk_htree_max_levels(fs)) {
		dx_problem(&w, root_pblk, INV_HTREE_DEPTH, "root: indirect_levels %u (%s allows %u)", ri->indirect_levels,
			   chk_large_dir(fs) ? "large_dir" : "a file system without large_dir", chk_htree_max_levels(fs));
		return;
	}
	if (oi && oi->indirect_levels != ri->indirect_levels)
		w.deep = true;
	w.seen = calloc(w.dir_blocks / 8 + 1, 1);
	uint8_t *copy = malloc(3 * (size_t)fs->bs), *ocopy = copy + fs->bs;
	w.buf = copy + 2 * (size_t)fs->bs;
	if (!w.seen || !copy) {
		free(w.seen);
		free(copy);
		t->err = -ENOMEM;
		return;
	}
	bit_put(w.seen, 0, true);
	memcpy(copy, root, fs->bs);
	if (old_root)
		memcpy(ocopy, old_root, fs->bs);
	dx_walk_node(&w, 0, root_pblk, copy, old_root ? ocopy : NULL, 32, 0, 0xffffffffu, ri->indirect_levels);
	/* e2fsck: "block N not referenced"; the walk marks every entry it meets,
	 * so the set is complete unless a node was malformed */
	if (w.nprob == 0)
		for (uint32_t b = 1; b < w.dir_blocks; b++)
			if (!bit_get(w.seen, b)) {
				dx_problem(&w, root_pblk, INV_HTREE_BLOCKS, "block %u is not referenced by the index", b);
				break;
			}
	free(w.seen);
	free(copy);
}

void chk_htree_scan_dir(struct chk_fs *fs, struct txn *t, uint32_t dir, const struct ext2_inode *in,
			uint64_t root_pblk, const uint8_t *root)
{
	htree_check_tree(fs, t, dir, in, root_pblk, root, NULL, false, true);
}

static void dx_add_range(struct txn *t, uint32_t lblk, uint32_t lo, uint32_t hi, size_t *cap)
{
	struct dx_range *n = chk_grow(t->dx, cap, t->ndx + 1, sizeof(*n));
	if (!n) {
		t->err = -ENOMEM;
		return;
	}
	t->dx = n;
	t->dx[t->ndx++] = (struct dx_range){ lblk, lo, hi };
}

/* Collects leaf ranges from dx entries at d+off (count entries); lo/hi bound
 * the whole node. Returns false if the node is malformed. */
static bool dx_collect(struct chk_fs *fs, struct txn *t, const struct ext2_inode *in, const uint8_t *d,
		       uint32_t off, uint32_t lo, uint32_t hi, int levels, size_t *cap)
{
	const struct ext2_dx_countlimit *cl = (const void *)(d + off);
	const struct ext2_dx_entry *e = (const void *)(d + off);
	if (cl->count == 0 || off + 8u * cl->count > fs->bs)
		return false;
	uint8_t *buf = levels ? malloc(fs->bs) : NULL;
	if (levels && !buf) {
		t->err = -ENOMEM;
		return false;
	}
	bool ok = true;
	for (uint32_t i = 0; i < cl->count && ok; i++) {
		uint32_t elo = i ? e[i].hash : lo, ehi = i + 1 < cl->count ? e[i + 1].hash : hi;
		uint32_t lb = e[i].block & DX_BLOCK_MASK;
		if (levels == 0) {
			dx_add_range(t, lb, elo, ehi, cap);
			continue;
		}
		/* nd: a transaction's block or buf, which the level below does not use */
		uint64_t pb = chk_txn_bmap(fs, t, in, lb);
		const uint8_t *nd = pb ? chk_txn_new_block(fs, t, pb, buf) : NULL;
		ok = nd && is_dx_node(fs, nd) && dx_collect(fs, t, in, nd, 8, elo, ehi, levels - 1, cap);
	}
	free(buf);
	return ok;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* Entries of a leaf must hash into the range its index entry gives it
 * (e2fsck pass 2: "bad min/max hash", "block not referenced"). */
void chk_htree_check_leaf(struct chk_fs *fs, struct txn *t, uint32_t dir, const struct ext2_inode *in,
		      uint32_t lblk, const uint8_t *d, uint64_t blk)
{
	if (t->dx_dir != dir) {
		t->dx_dir = dir;
		t->ndx = 0;
		t->dx_hver = -1;
		free(t->dx);
		t->dx = NULL;
		size_t cap = 0;
		uint8_t *buf = malloc(fs->bs);
		uint64_t b0 = chk_txn_bmap(fs, t, in, 0);
		const uint8_t *r = buf && b0 && b0 < fs->blocks_count ? chk_txn_new_block(fs, t, b0, buf) : NULL;
		const struct ext2_dx_root_info *ri = r ? (const void *)(r + 24) : NULL;
		bool usable = ri && dx_root_usable(fs, ri);   /* else reported by the root check */
		int levels = usable ? ri->indirect_levels : 0;
		if (!buf)
			t->err = -ENOMEM;
		if (usable && !dx_collect(fs, t, in, r, 32, 0, 0xffffffffu, levels, &cap))
			usable = false;
		int hv = usable ? ri->hash_version : 0;
		free(buf);
		if (!usable)
			return;
		const struct ext2_super_block *sb = (const void *)(t->sb_changed ? t->sb_new : fs->sb_raw);
		if (hv <= EXT2_HASH_TEA && (sb->s_flags & EXT2_FLAGS_UNSIGNED_HASH))
			hv += 3;
		t->dx_hver = hv;
		/* every leaf is referenced once */
		uint32_t *lb = malloc(t->ndx * sizeof(*lb) + 1);
		if (!lb)
			t->err = -ENOMEM;
		if (lb) {
			for (size_t i = 0; i < t->ndx; i++)
				lb[i] = t->dx[i].lblk;
			qsort(lb, t->ndx, sizeof(*lb), cmp_u32);
			for (size_t i = 1; i < t->ndx; i++)
				if (lb[i] == lb[i - 1]) {
					chk_txn_problem(t, INV_HTREE_NODE, SIZE_MAX,
						    "dir %u: block %u referenced twice by the index", dir, lb[i]);
					break;
				}
			free(lb);
		}
	}
	if (t->dx_hver < 0)
		return;
	const struct dx_range *rg = NULL;
	for (size_t i = 0; i < t->ndx; i++)
		if (t->dx[i].lblk == lblk) {
			if (rg) {
				chk_txn_problem(t, INV_HTREE_BLOCKS, SIZE_MAX, "dir %u: leaf %u referenced twice by the index",
					    dir, lblk);
				return;
			}
			rg = &t->dx[i];
		}
	if (!rg) {
		chk_txn_problem(t, INV_HTREE_BLOCKS, SIZE_MAX, "dir %u: leaf block %u (%llu) not referenced by the index",
			    dir, lblk, (unsigned long long)blk);
		return;
	}
	const struct ext2_super_block *sb = (const void *)(t->sb_changed ? t->sb_new : fs->sb_raw);
	for (uint32_t off = 0; off + 8 <= fs->bs;) {
		const struct dirent_hdr e = chk_dirent_at(d + off);
		if (!chk_dirent_fits(e, off, fs->bs))
			return;                /* tiling reported elsewhere */
		const char *name = (const char *)d + off + 8;
		if (e.inode && e.name_len) {
			ext2_dirhash_t h = 0, minor = 0;
			if (ext2fs_dirhash(t->dx_hver, name, e.name_len, sb->s_hash_seed, &h, &minor) == 0 &&
			    ((h & ~1u) < (rg->lo & ~1u) || (h & ~1u) > rg->hi)) {
				chk_txn_problem(t, INV_HTREE_NODE, SIZE_MAX,
					    "dir %u leaf %u: entry %s hash 0x%x outside [0x%x, 0x%x]", dir, lblk,
					    chk_quote_name(t, name, e.name_len), h, rg->lo, rg->hi);
				return;
			}
		}
		off += e.rec_len;
	}
}

static void check_leaf_lblk(struct chk_fs *fs, struct txn *t, uint32_t dir, const struct ext2_inode *in,
			    uint32_t lb)
{
	if (lb == 0 || lb >= chk_dir_blocks(fs, in))
		return;                    /* the root, or past the end: INV_HTREE_BLOCKS */
	uint64_t pb = chk_txn_bmap(fs, t, in, lb);
	if (!pb || pb >= fs->blocks_count || chk_u64map_get(&t->dirblks, pb, NULL))
		return;                    /* missing (reported by the node check) or checked as written */
	uint8_t *buf = malloc(fs->bs);
	const uint8_t *d = buf ? chk_txn_new_block(fs, t, pb, buf) : NULL;
	if (!buf)
		t->err = -ENOMEM;
	if (d && !is_dx_node(fs, d))
		chk_htree_check_leaf(fs, t, dir, in, lb, d, pb);
	free(buf);
}

/* The leaves under logical block lb, which sits at most `levels` index
 * levels above them: a leaf is checked, an index node descended into (a
 * node's depth is not known locally under a large_dir root: its children's
 * form decides). */
static void check_leaves_under(struct chk_fs *fs, struct txn *t, uint32_t dir, const struct ext2_inode *in,
			       uint32_t lb, int levels)
{
	if (levels == 0) {
		check_leaf_lblk(fs, t, dir, in, lb);
		return;
	}
	uint8_t *copy = malloc(fs->bs);
	uint64_t pb = lb && lb < chk_dir_blocks(fs, in) ? chk_txn_bmap(fs, t, in, lb) : 0;
	const uint8_t *d = copy && pb && pb < fs->blocks_count ? chk_txn_new_block(fs, t, pb, copy) : NULL;
	if (!copy)
		t->err = -ENOMEM;
	if (d && is_dx_node(fs, d)) {
		if (d != copy)
			memcpy(copy, d, fs->bs);
		const struct ext2_dx_countlimit *cc = (const void *)(copy + 8);
		const struct ext2_dx_entry *ce = (const void *)(copy + 8);
		for (uint32_t k = 0; k < cc->count && k < (fs->bs - 8) / 8 && !t->err; k++)
			check_leaves_under(fs, t, dir, in, ce[k].block & DX_BLOCK_MASK, levels - 1);
	} else if (d) {
		check_leaf_lblk(fs, t, dir, in, lb);
	}
	free(copy);
}

/* An index block changed: the leaves whose range moved (entries that differ
 * and their predecessors) must still hold only hashes of their range.  Under
 * index levels the changed entries name nodes: all the leaves below them. */
static void check_changed_leaves(struct chk_fs *fs, struct txn *t, uint32_t dir, const struct ext2_inode *in,
				 const uint8_t *o, const uint8_t *n, uint32_t off, int levels)
{
	const struct ext2_dx_countlimit *oc = (const void *)(o + off), *nc = (const void *)(n + off);
	const struct ext2_dx_entry *oe = (const void *)(o + off), *ne = (const void *)(n + off);
	if (nc->count > (fs->bs - off) / 8)
		return;                    /* malformed: reported by the node check */
	for (uint32_t i = 0; i < nc->count && !t->err; i++) {
		bool same = i < oc->count && oe[i].block == ne[i].block && (i == 0 || oe[i].hash == ne[i].hash) &&
			    (i + 1 >= nc->count || (i + 1 < oc->count && oe[i + 1].hash == ne[i + 1].hash));
		if (!same)
			check_leaves_under(fs, t, dir, in, ne[i].block & DX_BLOCK_MASK, levels);
	}
}

/* Index blocks written: record their changes, recheck the leaves whose
 * range moved, and note the directory for a walk of its whole index. */
void chk_diff_htree(struct chk_fs *fs, struct txn *t, uint8_t *buf, struct u64map *walk)
{
	for (size_t k = 0; k < t->dirblks.cap; k++) {
		if (!t->dirblks.keys[k])
			continue;
		uint64_t blk = t->dirblks.keys[k] - 1;
		uint32_t own = 0, lblk = 0;
		if (chk_new_type_of(fs, t, blk, &own, &lblk) != BT_DIR)
			continue;
		struct ichange *ic = chk_txn_inode(fs, t, own);
		if (!ic || !ic->new_live)
			continue;
		const struct ext2_inode *n = (const void *)ic->new;
		if (!(n->i_flags & EXT2_INDEX_FL) || !fs->dir_index || imode_type(n) != 0040000)
			continue;
		struct tblock *tb = chk_tb_find(t, blk);
		const uint8_t *nd = chk_txn_new_block(fs, t, blk, buf);
		if (!nd)
			continue;
		const uint8_t *od = tb && tb->old ? tb->old : nd;
		bool was_dir = blk < fs->blocks_count && chk_btype(fs, blk) == BT_DIR;
		if (lblk == 0 && tb && was_dir) {
			htree_records(fs, t, blk, od, nd, 32, true);
			const struct ext2_dx_root_info *ri = (const void *)(nd + 24);
			if (dx_root_usable(fs, ri))
				check_changed_leaves(fs, t, own, n, od, nd, 32, ri->indirect_levels);
		} else if (lblk && tb && was_dir && is_dx_node(fs, nd) && is_dx_node(fs, od)) {
			htree_records(fs, t, blk, od, nd, 8, false);
			/* a node under a large_dir root may have nodes below */
			check_changed_leaves(fs, t, own, n, od, nd, 8, (int)chk_htree_max_levels(fs) - 1);
		}
		if (lblk == 0 || dx_node_shape(fs, nd) || (tb && tb->old && was_dir && dx_node_shape(fs, tb->old))) {
			if (chk_u64map_put(walk, own, 1))
				t->err = -ENOMEM;
		} else {
			chk_htree_check_leaf(fs, t, own, n, lblk, nd, blk);
		}
	}
}

/* dirs that gain the index flag (or come alive with it) get a walk too */
void chk_check_new_index_flags(struct chk_fs *fs, struct txn *t, struct u64map *walk)
{
	for (size_t i = 0; i < t->nich; i++) {
		struct ichange *ic = t->ich[i];
		const struct ext2_inode *o = (const void *)ic->old, *n = (const void *)ic->new;
		if (!ic->new_live || !(n->i_flags & EXT2_INDEX_FL))
			continue;
		if (imode_type(n) != 0040000 || !fs->dir_index) {
			chk_txn_problem(t, INV_HTREE_FLAG, ic->nrecs ? ic->recs[0] : SIZE_MAX,
				    "inode %u has the htree index flag but is %s", ic->ino,
				    imode_type(n) != 0040000 ? "not a directory" : "on a file system without dir_index");
			continue;
		}
		if (ic->old_live && (o->i_flags & EXT2_INDEX_FL) &&
		    chk_approved_bmap(fs, o, 0) == chk_txn_bmap(fs, t, n, 0))
			continue;
		if (chk_u64map_put(walk, ic->ino, 1))
			t->err = -ENOMEM;
	}
}

void chk_walk_indexes(struct chk_fs *fs, struct txn *t, struct u64map *walk)
{
	uint8_t *buf = malloc(3 * (size_t)fs->bs), *root = buf + fs->bs, *old_root = root + fs->bs;
	if (!buf) {
		t->err = -ENOMEM;
		return;
	}
	for (size_t k = 0; k < walk->cap; k++) {
		if (!walk->keys[k])
			continue;
		uint32_t dir = (uint32_t)(walk->keys[k] - 1);
		struct ichange *ic = chk_txn_inode(fs, t, dir);
		if (!ic)
			continue;
		const struct ext2_inode *o = (const void *)ic->old, *n = (const void *)ic->new;
		uint64_t b0 = chk_txn_bmap(fs, t, n, 0);
		if (!b0 || b0 >= fs->blocks_count || bt_static(chk_btype(fs, b0)))
			continue;                /* a pointer problem, reported as such */
		const uint8_t *r = chk_txn_new_block(fs, t, b0, buf);
		if (!r) {
			t->err = -EIO;
			continue;
		}
		memcpy(root, r, fs->bs);
		bool existed = ic->old_live && (o->i_flags & EXT2_INDEX_FL) && chk_approved_bmap(fs, o, 0) == b0 &&
			       chk_btype(fs, b0) == BT_DIR && chk_bowner(fs, b0) == dir;
		const uint8_t *orr = existed ? chk_txn_old_block(fs, t, b0, buf) : NULL;
		if (orr)
			memcpy(old_root, orr, fs->bs);
		htree_check_tree(fs, t, dir, n, b0, root, orr ? old_root : NULL, !existed, !existed);
	}
	free(buf);
}
