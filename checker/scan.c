/*
 * checker/scan.c - chk_scan: the base case.  Checks, on the whole attached
 * image, the global properties the invariants preserve: pointers vs bitmaps,
 * single ownership, counters vs bitmaps, link counts vs entries, '.'/'..',
 * entry targets and types, sizes and i_blocks, xattr refcounts, htree roots
 * and nodes, the orphan list, reserved inodes.  One read of every inode
 * table, directory block and xattr block; the type/owner map built at attach
 * supplies the ownership facts.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chk_ext4.h"

#define V(id, ...) chk_verdict_add_violation(v, id, NULL, 0, __VA_ARGS__)

struct sent {                    /* compact entry: what the global checks need */
	uint32_t dir, ino;
	uint8_t ft;
	uint8_t kind;                /* 0 name, 1 ".", 2 ".." */
};

struct scan {
	struct chk_fs *fs;
	struct txn *t;               /* empty transaction: reads give the approved state */
	struct chk_verdict *v;
	uint16_t *mode, *links;
	uint8_t *indexed;            /* per inode: the htree index flag (a bitmap) */
	uint32_t *seen, *parents, *parent_of, *dotdot;
	struct sent *ents;
	size_t nents, capents;
	struct u64map xrefs;         /* xattr block -> inodes pointing to it */
	struct u64map names;         /* name hashes of the directory being read */
	uint8_t *buf;
	int err;
	bool ea_inode;               /* an xattr value in an inode: cannot judge */
};

/* One inode's block map as the scan walks it. */
struct mapwalk {
	struct scan *s;
	uint32_t ino;
	const struct ext2_inode *in;
	bool dir, indexed;
	uint32_t dir_blocks;
	uint32_t iseed;                  /* metadata_csum: the inode's checksum seed */
	int64_t last, last_init;         /* last logical block mapped, and initialised (-1: none) */
	bool unwritten_reported;
};

/* the names of one directory block, into the scan's entry list */
static void collect_entries(struct scan *s, uint32_t dir, const struct dent_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		const struct dent *e = &l->e[i];
		const char *nm = l->names + e->name_off;
		uint8_t kind = e->name_len == 1 && nm[0] == '.' ? 1 : e->name_len == 2 && nm[0] == '.' && nm[1] == '.' ? 2 : 0;
		uint64_t h = 1469598103934665603ull;       /* FNV-1a of the name */
		for (unsigned k = 0; k < e->name_len; k++)
			h = (h ^ (uint8_t)nm[k]) * 1099511628211ull;
		if (chk_u64map_get(&s->names, h, NULL))
			chk_verdict_add_violation(s->v, INV_DIRENT_UNIQUE, NULL, 0, "dir %u: name %s appears twice",
					      dir, chk_quote_name(s->t, nm, e->name_len));
		else if (chk_u64map_put(&s->names, h, 1))
			s->err = -ENOMEM;
		struct sent *ne = s->ents;
		if (s->nents == s->capents) {
			size_t nc = s->capents ? s->capents * 2 : 4096;
			ne = realloc(s->ents, nc * sizeof(*ne));
			if (!ne) {
				s->err = -ENOMEM;
				break;
			}
			s->ents = ne;
			s->capents = nc;
		}
		s->ents[s->nents++] = (struct sent){ e->dir, e->ino, e->ft, kind };
	}
}

/* One block of a directory: its entries, its htree role, its checksum. */
static void dir_block(struct mapwalk *w, uint64_t blk, uint32_t lblk)
{
	struct scan *s = w->s;
	struct chk_fs *fs = s->fs;
	if (chk_btype(fs, blk) != BT_DIR || chk_bowner(fs, blk) != w->ino)
		return;                /* owned twice: reported from the attach scan */
	int r = chk_read_block(fs, blk, s->buf);
	if (r) {
		s->err = r;
		return;
	}
	if (fs->csum.metadata_csum) {
		enum chk_dir_csum c = chk_dir_block_csum(&fs->csum, w->iseed, s->buf, fs->bs);
		if (c != CHK_DIR_CSUM_OK)
			chk_verdict_add_violation(s->v, INV_CSUM_DIR, NULL, 0, "dir %u block %u (%llu): %s", w->ino,
						  lblk, (unsigned long long)blk,
						  c == CHK_DIR_CSUM_BAD ? "checksum does not match" : "no checksum tail");
		if (!w->indexed && chk_dir_block_is_dx(s->buf, fs->bs))
			chk_verdict_add_violation(s->v, INV_DIR_LEAF_FORM, NULL, 0,
						  "dir %u block %u (%llu): an index block in a directory without the index flag",
						  w->ino, lblk, (unsigned long long)blk);
	}
	struct dent_list l = { 0 };
	chk_parse_dir_block(fs, s->t, s->buf, blk, w->ino, lblk, true, 1, &l);
	if (w->indexed) {
		if (lblk == 0)
			chk_htree_scan_dir(fs, s->t, w->ino, w->in, blk, s->buf);
		else if (!chk_dx_node_like(fs, s->buf))
			chk_htree_check_leaf(fs, s->t, w->ino, w->in, lblk, s->buf, blk);
	}
	collect_entries(s, w->ino, &l);
	if (l.err)
		s->err = l.err;
	free(l.e);
	free(l.names);
}

/* Walks what the attach scan gave this inode (a block owned twice is
 * reported from there and walked once): the directory's blocks, the
 * extent tree's nodes and runs. */
static bool map_visit(void *ctx, const struct chk_span *sp)
{
	struct mapwalk *w = ctx;
	struct scan *s = w->s;
	struct chk_fs *fs = s->fs;
	if (sp->blk < fs->first_data_block || sp->blk >= fs->blocks_count || bt_static(chk_btype(fs, sp->blk)))
		return false;
	if (sp->type == BT_EXTENT) {
		if (chk_btype(fs, sp->blk) != BT_EXTENT || chk_bowner(fs, sp->blk) != w->ino)
			return false;
		if (!chk_extent_block_csum_ok(&fs->csum, w->iseed, sp->node, fs->bs))
			chk_verdict_add_violation(s->v, INV_CSUM_EXTENT, NULL, 0,
						  "inode %u: extent tree block %llu: checksum does not match", w->ino,
						  (unsigned long long)sp->blk);
		return true;
	}
	if (sp->type != BT_DATA && sp->type != BT_DIR)
		return chk_btype(fs, sp->blk) == sp->type && chk_bowner(fs, sp->blk) == w->ino;
	int64_t end = (int64_t)sp->lblk + sp->len - 1;
	if (end > w->last)
		w->last = end;
	if (!sp->unwritten && end > w->last_init)
		w->last_init = end;
	if (sp->unwritten && w->dir && !w->unwritten_reported) {
		w->unwritten_reported = true;
		chk_verdict_add_violation(s->v, INV_EXTENT_TREE, NULL, 0,
					  "dir %u: unwritten extent at logical block %u", w->ino, sp->lblk);
	}
	/* an orphan directory's entries name nothing: it is no longer linked,
	 * as for block-mapped directories in walk_map */
	if (sp->type == BT_DIR && w->in->i_links_count)
		for (uint32_t k = 0; k < sp->len && !s->err; k++)
			dir_block(w, sp->blk + k, sp->lblk + k);
	return true;
}

static int get_approved(void *ctx, uint64_t blk, void *buf)
{
	return chk_read_block(ctx, blk, buf);
}

/* The block map's checks: an extent tree's rules and checksums, a
 * directory's blocks and entries; the last (initialised) block. */
static void walk_map(struct scan *s, uint32_t ino, const struct ext2_inode *in, struct mapwalk *w)
{
	struct chk_fs *fs = s->fs;
	bool ext = chk_inode_extent_mapped(fs, in);
	*w = (struct mapwalk){ 0 };
	w->s = s;
	w->ino = ino;
	w->in = in;
	w->dir = imode_type(in) == 0040000;
	w->indexed = w->dir && (in->i_flags & EXT2_INDEX_FL) && fs->dir_index;
	w->dir_blocks = chk_dir_blocks(fs, in);
	w->iseed = chk_inode_seed(&fs->csum, ino, in->i_generation);
	w->last = w->last_init = -1;
	if (!ext && !(w->dir && in->i_links_count)) {
		/* an indirect-mapped file: only its last block matters, and the
		 * path to it is all that is read */
		uint32_t last;
		if (chk_inode_has_block_ptrs(fs, in) && chk_txn_last_lblk(fs, s->t, in, &last, NULL))
			w->last = w->last_init = last;
		return;
	}
	if (w->dir)
		chk_u64map_free(&s->names);
	char why[200];
	int r = chk_walk_inode_tree(fs, in, w->dir, get_approved, fs, map_visit, w, why, sizeof(why));
	if (r == 1)
		chk_verdict_add_violation(s->v, INV_EXTENT_TREE, NULL, 0, "inode %u: extent tree: %s", ino, why);
	else if (r)
		s->err = r;
}

/* An unused reserved inode (the boot loader's, 6, 9, 10...): e2fsck checks
 * its mode and counts its blocks, an xattr block too. */
static void scan_unused_reserved(struct scan *s, uint32_t ino, const struct ext2_inode *in, uint64_t acl)
{
	struct chk_fs *fs = s->fs;
	struct chk_verdict *v = s->v;
	const char *why = chk_reserved_inode_mode_problem(ino, in);
	if (why)
		V(INV_RESERVED_INODES, "reserved inode %u has mode 0%o: %s", ino, in->i_mode, why);
	uint64_t owned = (uint64_t)fs->ndata[ino] + fs->nmeta[ino] + (acl ? 1 : 0);
	if (!chk_iblocks_ok(fs, in, owned))
		V(INV_IBLOCKS, "reserved inode %u: i_blocks %llu but it owns %llu blocks", ino,
		  (unsigned long long)chk_inode_iblocks(fs, in), (unsigned long long)owned);
}

static void scan_inode(struct scan *s, uint32_t ino, const struct ext2_inode *in)
{
	struct chk_fs *fs = s->fs;
	struct chk_verdict *v = s->v;
	s->mode[ino] = in->i_mode;
	s->links[ino] = in->i_links_count;
	if (in->i_flags & EXT2_INDEX_FL)
		bit_put(s->indexed, ino, true);
	if (ino == EXT2_RESIZE_INO)
		return;
	bool reserved = ino < fs->first_ino;
	if (!chk_inode_blocks_counted(fs, ino))
		return;
	bool orphan = chk_txn_is_orphan(fs, s->t, ino);
	uint16_t ty = imode_type(in);
	uint64_t acl = chk_inode_counted_xattr(fs, ino, in);
	if (chk_inode_ea_in_inode(fs, (const uint8_t *)in))
		s->ea_inode = true;
	if (acl) {
		uint32_t c = 0;
		chk_u64map_get(&s->xrefs, acl, &c);
		if (chk_u64map_put(&s->xrefs, acl, c + 1))
			s->err = -ENOMEM;
	}
	if (reserved && ino != EXT2_ROOT_INO && ino != fs->journal_ino) {
		if (ino != EXT2_BAD_INO && ino != EXT2_JOURNAL_INO)   /* these two: ownership only */
			scan_unused_reserved(s, ino, in, acl);
		return;
	}
	const char *why = chk_inode_ext4_fields_problem(fs, in, CHK_EXT4_FLAGS_E2FSCK_KEEPS);
	if (why)
		V(INV_INODE_EXT4_FIELDS, "inode %u: %s", ino, why);
	else if (acl && !(fs->sb->s_feature_compat & EXT2_FEATURE_COMPAT_EXT_ATTR))
		V(INV_INODE_EXT4_FIELDS, "inode %u: i_file_acl set without ext_attr", ino);
	if (!chk_mode_type_valid(in->i_mode)) {
		V(INV_INODE_MODE, "in-use inode %u has invalid mode 0%o", ino, in->i_mode);
		return;
	}
	if (in->i_dtime && !orphan)
		V(INV_DTIME_LIVE, "in-use inode %u has i_dtime %u and is not on the orphan list", ino, in->i_dtime);
	uint64_t owned = (uint64_t)fs->ndata[ino] + fs->nmeta[ino] + (acl ? 1 : 0);
	if (!chk_iblocks_ok(fs, in, owned))
		V(INV_IBLOCKS, "inode %u: i_blocks %llu but it owns %llu blocks", ino,
		  (unsigned long long)chk_inode_iblocks(fs, in), (unsigned long long)owned);
	struct mapwalk w;
	walk_map(s, ino, in, &w);
	if (ty == 0040000 && in->i_links_count) {
		int64_t span = w.last + 1;
		uint64_t size = chk_dir_size(fs, in);
		if (size % fs->bs || size / fs->bs != fs->ndata[ino] || span != fs->ndata[ino] ||
		    fs->ndata[ino] == 0 || !chk_dir_size_high_ok(fs, in))
			V(INV_DIR_SIZE, "dir %u: i_size %llu (i_size_high %u) but it has %u blocks spanning %lld", ino,
			  (unsigned long long)size, in->i_size_high, fs->ndata[ino], (long long)span);
		if ((in->i_flags & EXT2_INDEX_FL) && !fs->dir_index)
			V(INV_HTREE_FLAG, "dir %u has the index flag without dir_index", ino);
	} else if (ty != 0040000 && (in->i_flags & EXT2_INDEX_FL)) {
		V(INV_HTREE_FLAG, "inode %u has the index flag but is not a directory", ino);
	}
	/* e2fsck: initialised blocks past i_size (unwritten ones may lie there) */
	if (ty == 0100000 && w.last_init >= 0 && !orphan && !reserved &&
	    chk_inode_size64(in) < (uint64_t)w.last_init * fs->bs)
		V(INV_FILE_SIZE, "file %u: i_size %llu is below its last block %lld", ino,
		  (unsigned long long)chk_inode_size64(in), (long long)w.last_init);
	if (ty == 0100000 && !reserved) {
		const char *szwhy = chk_file_size_problem(fs, in, chk_inode_size64(in), fs->large_file);
		if (szwhy)
			V(INV_FILE_MAX_SIZE, "file %u: i_size %llu %s", ino, (unsigned long long)chk_inode_size64(in), szwhy);
	}
	if (ty == 0120000) {
		if (!chk_inode_has_block_ptrs(fs, in)) {
			size_t len = strnlen((const char *)in->i_block, sizeof(in->i_block));
			if (in->i_size_high || in->i_size >= sizeof(in->i_block) || in->i_size != len)
				V(INV_SYMLINK, "fast symlink %u: i_size %u, target length %zu", ino, in->i_size, len);
		} else if (in->i_size_high || in->i_size == 0 || in->i_size >= fs->bs || fs->ndata[ino] != 1 ||
			   !chk_slow_symlink_map_ok(fs, in)) {
			V(INV_SYMLINK, "slow symlink %u: i_size %u with %u data blocks", ino, in->i_size, fs->ndata[ino]);
		}
	}
	if ((ty == 0020000 || ty == 0060000 || ty == 0010000 || ty == 0140000) &&
	    (!chk_iblocks_ok(fs, in, acl ? 1 : 0) || in->i_size || in->i_size_high ||
	     (in->i_flags & (EXT2_IMMUTABLE_FL | EXT2_APPEND_FL))))
		V(INV_SPECIAL_FILE, "special file %u owns blocks (i_blocks %u)", ino, in->i_blocks);
	if (in->i_links_count == 0 && !orphan && !reserved)
		V(INV_IBITMAP_SET, "inode %u is marked in use but has no links and is not an orphan", ino);
}

/* Bits 64 * w .. 64 * w + 63 of a bitmap of n bits (bits past n clear). */
static uint64_t word_at(const uint8_t *b, uint64_t w, uint64_t n)
{
	uint64_t x = 0;
	if (64 * w + 64 <= n) {
		memcpy(&x, b + 8 * w, sizeof(x));
		return x;
	}
	for (uint64_t i = 64 * w; i < n; i++)
		x |= (uint64_t)bit_get(b, i) << (i - 64 * w);
	return x;
}

/* Adds to own (the group's static blocks as bits) the blocks of [start,
 * start + n) the type/owner map's pages or runs own. */
static void owned_bits(const struct chk_fs *fs, uint64_t start, uint64_t n, uint8_t *own)
{
	for (uint64_t b = start; b < start + n;) {
		const uint8_t *types = chk_bpage_types(fs, b);
		uint64_t pend = (b / BPAGE_N + 1) * BPAGE_N;
		if (pend > start + n)
			pend = start + n;
		for (; types && b < pend; b++)
			if (types[b % BPAGE_N] != BT_FREE)
				bit_put(own, b - start, true);
		b = pend;
	}
	struct chk_run r;
	for (uint64_t b = start; chk_run_next(fs, b, &r) && r.start < start + n; b = r.start + r.len) {
		uint64_t a = r.start > start ? r.start : start, e = r.start + r.len;
		if (e > start + n)
			e = start + n;
		for (uint64_t k = a; k < e; k++)
			bit_put(own, k - start, true);
	}
}

static void scan_bitmaps(struct scan *s)
{
	struct chk_fs *fs = s->fs;
	struct chk_verdict *v = s->v;
	uint64_t unmarked = 0, unowned = 0, first_unm = 0, first_uno = 0, sum_b = 0, sum_i = 0;
	uint8_t *stat = malloc(fs->bs), *pat = malloc(fs->bs);
	if (!stat || !pat) {
		free(stat);
		free(pat);
		s->err = -ENOMEM;
		return;
	}
	for (uint32_t g = 0; g < fs->ngroups; g++) {
		uint64_t start = fs->first_data_block + (uint64_t)g * fs->bpg, free_b = 0;
		uint64_t end = start + fs->bpg < fs->blocks_count ? start + fs->bpg : fs->blocks_count;
		uint64_t n = end - start;
		const uint8_t *bb = chk_group_bbits(fs, g);
		bool owned_any = false;
		for (uint64_t b = start; b < end && !owned_any; b = (b / BPAGE_N + 1) * BPAGE_N)
			owned_any = chk_bpage_types(fs, b) != NULL;
		struct chk_run r;
		owned_any |= chk_run_next(fs, start, &r) && r.start < end;
		if (!bb && !owned_any && (!fs->resize_dind || fs->resize_dind < start || fs->resize_dind >= end)) {
			/* bits are its static blocks and nothing else is owned:
			 * the common case of a big disk */
			free_b = n - chk_group_static_blocks(fs, g);
		} else {
			chk_group_static_bits(fs, g, stat);
			owned_bits(fs, start, n, stat);
			if (!bb) {
				memset(pat, 0, fs->bs);
				for (uint64_t b = start; b < end; b++)
					if (chk_bbit(fs, b))
						bit_put(pat, b - start, true);
				bb = pat;
			}
			for (uint64_t w = 0; w * 64 < n; w++) {
				uint64_t bits = word_at(bb, w, n), own = word_at(stat, w, n);
				uint64_t valid = 64 * w + 64 <= n ? ~0ull : (1ull << (n - 64 * w)) - 1;
				free_b += (uint64_t)__builtin_popcountll(~bits & valid);
				uint64_t unm = own & ~bits, uno = bits & ~own;
				if (unm && !unmarked)
					first_unm = start + 64 * w + (uint64_t)__builtin_ctzll(unm);
				if (uno && !unowned)
					first_uno = start + 64 * w + (uint64_t)__builtin_ctzll(uno);
				unmarked += (uint64_t)__builtin_popcountll(unm);
				unowned += (uint64_t)__builtin_popcountll(uno);
			}
		}
		const uint8_t *d = chk_gd(fs, g);
		if (free_b != chk_gd_free_blocks(fs, d))
			V(INV_BGD_FREE_BLOCKS, "group %u: bg_free_blocks_count %u but %llu bits are clear", g,
			  chk_gd_free_blocks(fs, d), (unsigned long long)free_b);
		uint64_t free_i = fs->ipg, dirs = 0;
		const uint8_t *ib = chk_group_ibits(fs, g);
		for (uint32_t i = 0; ib && i < fs->ipg; i++) {
			if ((i & 63) == 0 && i + 64 <= fs->ipg && word_at(ib, i / 64, fs->ipg) == 0) {
				i += 63;
				continue;
			}
			if (!bit_get(ib, i))
				continue;
			free_i--;
			if ((s->mode[g * fs->ipg + i + 1] & 0170000) == 0040000)
				dirs++;
		}
		if (free_i != chk_gd_free_inodes(fs, d))
			V(INV_BGD_FREE_INODES, "group %u: bg_free_inodes_count %u but %llu bits are clear", g,
			  chk_gd_free_inodes(fs, d), (unsigned long long)free_i);
		if (dirs != chk_gd_used_dirs(fs, d))
			V(INV_BGD_USED_DIRS, "group %u: bg_used_dirs_count %u but %llu directories are in use", g,
			  chk_gd_used_dirs(fs, d), (unsigned long long)dirs);
		sum_b += chk_gd_free_blocks(fs, d);
		sum_i += chk_gd_free_inodes(fs, d);
	}
	if (unmarked)
		V(INV_PTR_MARKED, "%llu blocks in use are free in the block bitmap (first %llu)",
		  (unsigned long long)unmarked, (unsigned long long)first_unm);
	if (unowned)
		V(INV_BBITMAP_SET, "%llu blocks are marked in use but nothing points to them (first %llu)",
		  (unsigned long long)unowned, (unsigned long long)first_uno);
	if (sum_b != chk_sb_free_blocks(fs->sb))
		V(INV_SB_FREE_BLOCKS, "s_free_blocks_count %llu != sum of group counts %llu",
		  (unsigned long long)chk_sb_free_blocks(fs->sb), (unsigned long long)sum_b);
	if (sum_i != fs->sb->s_free_inodes_count)
		V(INV_SB_FREE_INODES, "s_free_inodes_count %u != sum of group counts %llu", fs->sb->s_free_inodes_count,
		  (unsigned long long)sum_i);
	for (uint32_t ino = 1; ino < fs->first_ino; ino++)
		if (!chk_ibit(fs, ino))
			V(INV_RESERVED_INODES, "reserved inode %u is not marked in use", ino);
	free(stat);
	free(pat);
}

static void scan_padding(struct scan *s)
{
	struct chk_fs *fs = s->fs;
	uint32_t g = fs->ngroups - 1;
	uint64_t start = fs->first_data_block + (uint64_t)g * fs->bpg, nb = fs->blocks_count - start;
	if (chk_group_block_uninit(fs, g) && nb < fs->bpg)   /* e2fsck reads its padding clear (pass 5) */
		chk_verdict_add_violation(s->v, INV_BITMAP_PADDING, NULL, 0,
					  "the last group, shorter than a group, is BLOCK_UNINIT: no padding bits set");
	if (chk_group_block_uninit(fs, g) || chk_read_block(fs, chk_gd_bbitmap(fs, chk_gd(fs, g)), s->buf))
		return;            /* no bitmap on disk: INV_BGD_UNINIT's */
	for (uint64_t i = nb; i < fs->bs * 8u; i++)
		if (!bit_get(s->buf, i)) {
			chk_verdict_add_violation(s->v, INV_BITMAP_PADDING, NULL, 0,
					      "block bitmap padding bit %llu of the last group is clear", (unsigned long long)i);
			break;
		}
}

/* e2fsck's pass 4: a directory past EXT2_LINK_MAX entries counts 1 (and
 * needs dir_nlink); an indexed one whose count fell back may keep its 1. */
static const char *links_problem(const struct chk_fs *fs, bool dir, bool indexed, uint32_t links, uint32_t seen)
{
	if (dir && seen > EXT2_LINK_MAX) {
		if (!fs->dir_nlink)
			return " (more than the link maximum without dir_nlink)";
		return links == 1 ? NULL : " (past the link maximum a directory counts 1)";
	}
	if (links == seen || (dir && indexed && links == 1 && seen > 1))
		return NULL;
	return "";
}

static void scan_entries(struct scan *s)
{
	struct chk_fs *fs = s->fs;
	struct chk_verdict *v = s->v;
	for (size_t i = 0; i < s->nents; i++) {
		const struct sent *e = &s->ents[i];
		bool inuse = e->ino && e->ino <= fs->inodes_count && chk_ibit(fs, e->ino);
		if (!inuse || !chk_mode_type_valid(s->mode[e->ino]) || s->links[e->ino] == 0) {
			V(INV_DIRENT_TARGET, "dir %u has an entry naming inode %u, which is not in use", e->dir, e->ino);
			continue;
		}
		if ((e->ino < fs->first_ino && e->ino != EXT2_ROOT_INO) || e->ino == fs->orphan_file_ino) {
			V(INV_DIRENT_TARGET, "dir %u has an entry naming reserved inode %u", e->dir, e->ino);
			continue;
		}
		/* a type byte of 0 (unknown) is one e2fsck -n lets be: it
		 * would only fill it in (transactions still write the right one) */
		int want = fs->filetype ? chk_mode_to_ftype(s->mode[e->ino]) : 0;
		if (e->ft != want && e->ft != EXT2_FT_UNKNOWN)
			V(INV_DIRENT_FTYPE, "dir %u: entry naming %u has file type %u, needs %d", e->dir, e->ino, e->ft, want);
		s->seen[e->ino]++;
		if (e->kind == 0) {
			s->parents[e->ino]++;
			s->parent_of[e->ino] = e->dir;
			if (e->ino == EXT2_ROOT_INO)
				V(INV_DIRENT_TARGET, "dir %u has an entry naming the root directory", e->dir);
		} else if (e->kind == 2) {
			s->dotdot[e->dir] = e->ino;
			if ((s->mode[e->ino] & 0170000) != 0040000)
				V(INV_DIR_DOTS, "dir %u: '..' names %u, not a directory", e->dir, e->ino);
		}
	}
	for (uint32_t ino = 1; ino <= fs->inodes_count; ino++) {
		if (!chk_group_ibits(fs, chk_group_of_inode(fs, ino))) {
			ino = (chk_group_of_inode(fs, ino) + 1) * fs->ipg;    /* none in use in its group */
			continue;
		}
		if (!chk_ibit(fs, ino) || (ino < fs->first_ino && ino != EXT2_ROOT_INO) || ino == fs->orphan_file_ino)
			continue;         /* (e2fsck's pass 4 leaves the orphan file alone) */
		bool dir = (s->mode[ino] & 0170000) == 0040000;
		const char *why = links_problem(fs, dir, bit_get(s->indexed, ino), s->links[ino], s->seen[ino]);
		if (why)
			V(INV_LINKS_COUNT, "inode %u: i_links_count %u but %u entries name it%s", ino, s->links[ino],
			  s->seen[ino], why);
		if (!dir || !s->links[ino])
			continue;
		if (ino == EXT2_ROOT_INO) {
			if (s->dotdot[ino] != EXT2_ROOT_INO)
				V(INV_DIR_DOTDOT_PARENT, "root's '..' names %u", s->dotdot[ino]);
			continue;
		}
		if (s->parents[ino] != 1)
			V(INV_DIR_ONE_PARENT, "directory %u is named by %u entries", ino, s->parents[ino]);
		else if (s->dotdot[ino] != s->parent_of[ino])
			V(INV_DIR_DOTDOT_PARENT, "directory %u is in dir %u but its '..' names %u", ino,
			  s->parent_of[ino], s->dotdot[ino]);
	}
}

static void scan_xattrs(struct scan *s)
{
	struct chk_fs *fs = s->fs;
	for (size_t k = 0; k < s->xrefs.cap; k++) {
		if (!s->xrefs.keys[k])
			continue;
		uint64_t blk = s->xrefs.keys[k] - 1;
		uint32_t refs = s->xrefs.vals[k];
		if (blk >= fs->blocks_count || chk_btype(fs, blk) != BT_XATTR)
			continue;                 /* reported as a bad or shared pointer */
		if (chk_read_block(fs, blk, s->buf))
			continue;
		const struct ext2_ext_attr_header *h = (const void *)s->buf;
		const char *why = chk_xattr_block_problem(fs, s->buf);
		if (!chk_xattr_block_csum_ok(&fs->csum, blk, s->buf, fs->bs))
			chk_verdict_add_violation(s->v, INV_CSUM_XATTR, NULL, 0, "xattr block %llu: checksum does not match",
						  (unsigned long long)blk);
		if (why)
			chk_verdict_add_violation(s->v, INV_XATTR_FORMAT, NULL, 0, "xattr block %llu: %s",
					      (unsigned long long)blk, why);
		else if (h->h_refcount != refs)
			chk_verdict_add_violation(s->v, INV_XATTR_REFCOUNT, NULL, 0,
					      "xattr block %llu: h_refcount %u but %u inodes point to it",
					      (unsigned long long)blk, h->h_refcount, refs);
	}
}

static void scan_journal_sb(struct scan *s)
{
	struct chk_fs *fs = s->fs;
	struct chk_verdict *v = s->v;
	uint64_t b0, nblocks;
	int r = chk_journal_head(fs, &b0, &nblocks);
	if (r && r != -ENOENT)
		s->err = r;
	if (r || bt_static(chk_btype(fs, b0)))
		return;                  /* pointer problems are reported as such */
	r = chk_read_block(fs, b0, s->buf);
	if (r) {
		s->err = r;
		return;
	}
	const char *why = chk_journal_sb_problem(fs, s->buf, nblocks);
	if (why)
		V(INV_JOURNAL_SB, "journal superblock (block %llu): %s", (unsigned long long)b0, why);
}

/* Reserved GDT blocks read per call of the scan's resize-inode check: up
 * to 1,024 blocks follow the descriptors, and a buffer for all of them
 * would be the mount's largest allocation; runs this long are still read
 * as a few large reads (past an I/O manager's block cache). */
#define RGDT_CHUNK_BLOCKS 128u

/* Entry idx of a resize-inode indirect block holding want?  Reports the
 * first difference of the block under what. */
static bool ptrs_as_expected(struct scan *s, const uint8_t *blk, const uint32_t *want, uint32_t n,
			     const char *what, uint64_t where)
{
	for (uint32_t i = 0; i < s->fs->addr_per_block; i++) {
		uint32_t have = chk_ld32(blk + 4 * (size_t)i), w = i < n ? want[i] : 0;
		if (have != w) {
			chk_verdict_add_violation(s->v, INV_STATIC_FROZEN, NULL, 0,
						  "resize inode: %s %llu, entry %u is %u, want %u", what,
						  (unsigned long long)where, i, have, w);
			return false;
		}
	}
	return true;
}

/* The resize inode's blocks: its double-indirect block dind lists the
 * primary reserved GDT blocks first..first+rgdt-1 (at their descriptor-block
 * index, modulo a block's pointers), each listing its copies in the groups
 * with a superblock backup, and nothing else.  False when not (reported) or
 * when they cannot be read (s->err). */
static bool resize_blocks_as_expected(struct scan *s, uint32_t dind, uint64_t first, uint32_t rgdt)
{
	struct chk_fs *fs = s->fs;
	uint32_t apb = fs->addr_per_block, nbak = 0;
	bool ok = false;
	uint32_t *want = malloc((size_t)apb * sizeof(*want)), *copies = malloc((size_t)apb * sizeof(*copies));
	uint32_t chunk = rgdt < RGDT_CHUNK_BLOCKS ? rgdt : RGDT_CHUNK_BLOCKS;
	uint8_t *tab = chunk ? malloc((size_t)chunk * fs->bs) : NULL;
	if (!want || !copies || (chunk && !tab)) {
		s->err = -ENOMEM;
		goto out;
	}
	int r = chk_read_block(fs, dind, s->buf);
	if (r) {
		s->err = r < 0 ? r : -EIO;
		goto out;
	}
	memset(want, 0, (size_t)apb * sizeof(*want));
	for (uint32_t i = 0; i < rgdt; i++)
		want[(fs->gdt_blocks + i) % apb] = (uint32_t)(first + i);
	if (!ptrs_as_expected(s, s->buf, want, apb, "double-indirect block", dind))
		goto out;
	for (uint32_t g = 1; g < fs->ngroups && nbak < apb; g++)
		if (chk_group_has_super(fs, g))
			want[nbak++] = g;
	/* the primary reserved GDT blocks follow the descriptors: read a run
	 * at a time into one small buffer, not all 4 MiB at once */
	for (uint32_t i = 0; i < rgdt; i++) {
		if (i % chunk == 0) {
			uint32_t run = rgdt - i < chunk ? rgdt - i : chunk;
			r = fs->read(fs->ctx, (first + i) * fs->bs, tab, (size_t)run * fs->bs);
			if (r) {
				s->err = r < 0 ? r : -EIO;
				goto out;
			}
		}
		for (uint32_t k = 0; k < nbak; k++)
			copies[k] = (uint32_t)(first + i + (uint64_t)want[k] * fs->bpg);
		if (!ptrs_as_expected(s, tab + (size_t)(i % chunk) * fs->bs, copies, nbak,
				      "reserved GDT block", first + i))
			goto out;
	}
	ok = true;
out:
	free(want);
	free(copies);
	free(tab);
	return ok;
}

/*
 * The resize inode, as e2fsck's check_resize_inode and pass 1 judge it and
 * as the static layout assumes it: without resize_inode, no reserved GDT
 * blocks and no pointers; with it, a regular file in use whose only pointer
 * is its double-indirect block, which lists the primary reserved GDT blocks
 * (at their descriptor-block index, modulo a block's pointers), each listing
 * its copies in the groups with a superblock backup, and nothing else (pass
 * 1 would walk any other entry as a block of the file).  Transactions keep
 * it: the inode changes only in its times, its blocks not at all
 * (INV_RESERVED_INODES, INV_STATIC_FROZEN).
 */
static void scan_resize_inode(struct scan *s, const struct ext2_inode *in)
{
	struct chk_fs *fs = s->fs;
	struct chk_verdict *v = s->v;
	const struct ext2_super_block *sb = fs->sb;
	uint32_t apb = fs->addr_per_block, dind = in->i_block[EXT2_DIND_BLOCK];
	bool feature = sb->s_feature_compat & EXT2_FEATURE_COMPAT_RESIZE_INODE;
	bool other = false;
	for (int i = 0; i < EXT2_N_BLOCKS; i++)
		other |= i != EXT2_DIND_BLOCK && in->i_block[i];
	if (!feature) {
		if (sb->s_rev_level && sb->s_reserved_gdt_blocks)
			V(INV_STATIC_FROZEN, "s_reserved_gdt_blocks %u without the resize_inode feature",
			  sb->s_reserved_gdt_blocks);
		if (other || dind)
			V(INV_STATIC_FROZEN, "resize inode: block pointers set without the resize_inode feature");
		return;
	}
	if (other || !dind || !in->i_links_count || !(in->i_mode & 0100000) ||
	    dind < fs->first_data_block || dind >= fs->blocks_count) {
		V(INV_STATIC_FROZEN, "resize inode is not valid (mode 0%o, %u links, double-indirect "
		  "block %u%s)", in->i_mode, in->i_links_count, dind, other ? ", other pointers set" : "");
		return;
	}
	uint32_t rgdt = fs->rgdt_blocks, nbak = 0;
	uint64_t first = (uint64_t)fs->first_data_block + 1 + fs->gdt_blocks;
	if (first + rgdt > fs->blocks_count) {
		V(INV_STATIC_FROZEN, "s_reserved_gdt_blocks %u reach past the end of the file system", rgdt);
		return;
	}
	/* a seal vouches for them as for a sealed group's free inodes
	 * (README.md, "The seal"): up to 4 MiB a mount need not read */
	bool sealed = fs->sealed && bit_get(fs->sealed, 0);
	if (!sealed && !resize_blocks_as_expected(s, dind, first, rgdt))
		return;
	for (uint32_t g = 1; g < fs->ngroups && nbak < apb; g++)
		nbak += chk_group_has_super(fs, g);
	uint64_t owned = 1 + (uint64_t)rgdt * (1 + nbak);
	if (!chk_iblocks_ok(fs, in, owned))
		V(INV_IBLOCKS, "resize inode: i_blocks %u but it owns %llu blocks", in->i_blocks,
		  (unsigned long long)owned);
}

/* The frozen superblock fields whose validity no transaction can change:
 * the quota inode numbers, as e2fsck judges them (0, or an inode that is
 * neither another reserved one nor past the inode count). */
static void scan_sb_fields(struct scan *s)
{
	struct chk_fs *fs = s->fs;
	struct chk_verdict *v = s->v;
	const struct { uint32_t ino; const char *name; } quota[] = {
		{ fs->sb->s_usr_quota_inum, "s_usr_quota_inum" },
		{ fs->sb->s_grp_quota_inum, "s_grp_quota_inum" },
		{ fs->sb->s_prj_quota_inum, "s_prj_quota_inum" },
	};
	for (size_t i = 0; i < sizeof(quota) / sizeof(quota[0]); i++) {
		uint32_t ino = quota[i].ino;
		bool reserved = ino == EXT2_BAD_INO || ino == EXT2_ROOT_INO ||
				(ino >= EXT2_BOOT_LOADER_INO && ino < EXT2_GOOD_OLD_FIRST_INO);
		if (ino && (reserved || ino > fs->inodes_count))
			V(INV_SB_FROZEN, "%s %u names no valid quota inode", quota[i].name, ino);
	}
}

/* Every group's inode table, its initialised part: each inode's checksum,
 * the in-use ones judged one by one (scan_inode), the free ones for looking
 * in use.  0 or a read's -errno. */
static int scan_tables(struct scan *s, uint8_t *tab)
{
	struct chk_fs *fs = s->fs;
	struct chk_verdict *v = s->v;
	int r = 0;
	for (uint32_t g = 0; g < fs->ngroups && !r && !s->err; g++) {
		/* e2fsck reads a group's initialised inodes only (all of them
		 * without descriptor checksums); one in use past them is lost */
		uint32_t used = chk_group_used_inodes(fs, g), lost = 0, first = 0;
		const uint8_t *ibits = chk_group_ibits(fs, g);
		for (uint32_t i = used; ibits && i < fs->ipg; i++)
			if (bit_get(ibits, i) && !lost++)
				first = g * fs->ipg + i + 1;
		if (lost)
			V(INV_BGD_UNINIT, "group %u: %u inodes in use past its %u initialised ones (first %u)", g,
			  lost, used, first);
		/* a sealed group's free inodes were verified and only approved
		 * commits wrote them since: read up to its last inode in use */
		uint32_t upto = used;
		if (chk_group_claimed(fs, g)) {
			/* its bitmaps and its whole table: chk_check_tail's */
			upto = 0;
			if ((r = chk_mark_deferred(fs, g)))
				break;
		} else if ((fs->sealed && bit_get(fs->sealed, g)) || (fs->pristine && bit_get(fs->pristine, g))) {
			upto = ibits ? (uint32_t)chk_bits_end(ibits, used) : 0;
			if (upto < used)
				fs->stats.scan_tables_sealed++;
		} else if (fs->defer_tails) {
			/* the rest is chk_check_tail's, before anything relies on it */
			upto = chk_tail_start(fs, g);
		}
		/* an empty group whose table is known to read as zeros: every
		 * inode free and zero, nothing to report */
		uint64_t toff = chk_gd_itable(fs, chk_gd(fs, g)) * fs->bs;
		size_t ubytes = ((size_t)upto * fs->inode_size + fs->bs - 1) / fs->bs * fs->bs;
		if (upto < used && !(fs->sealed && bit_get(fs->sealed, g)) &&
		    !(fs->pristine && bit_get(fs->pristine, g)) && !chk_tail_known_zero(fs, g) &&
		    (r = chk_mark_deferred(fs, g)))
			break;
		if (!upto || (g && fs->zero && !chk_group_inodes_any(fs, g) && fs->zero(fs->ctx, toff, ubytes) == 1))
			continue;
		r = fs->read(fs->ctx, toff, tab, ubytes);
		if (r) {
			r = r < 0 ? r : -EIO;
			break;
		}
		fs->stats.scan_tables_read++;
		fs->stats.scan_table_bytes += ubytes;
		if (upto < used)   /* the whole blocks read */
			upto = (uint32_t)(ubytes / fs->inode_size) < used ? (uint32_t)(ubytes / fs->inode_size) : used;
		for (uint32_t i = 0; i < upto; i++) {
			uint32_t ino = g * fs->ipg + i + 1;
			const struct ext2_inode *in = (const void *)(tab + (size_t)i * fs->inode_size);
			if (chk_judge_table_inode(fs, v, ino, in))
				continue;
			if (ino == EXT2_ROOT_INO && (!chk_ibit(fs, ino) || imode_type(in) != 0040000 ||
						     in->i_links_count < 2))
				V(INV_RESERVED_INODES, "the root inode is not a live directory");
			if (ino == EXT2_RESIZE_INO)
				scan_resize_inode(s, in);
			if (chk_ibit(fs, ino))
				scan_inode(s, ino, in);
			else
				chk_judge_free_inode(fs, v, ino, in);
		}
	}
	return r;
}

int chk_scan(struct chk_fs *fs, struct chk_verdict **out)
{
	uint64_t t0 = chk_thread_ns();
	*out = NULL;
	struct scan s = { .fs = fs };
	s.v = chk_verdict_new();
	s.t = calloc(1, sizeof(*s.t));
	size_t n = (size_t)fs->inodes_count + 1;
	s.mode = calloc(n, sizeof(uint16_t));
	s.links = calloc(n, sizeof(uint16_t));
	s.indexed = calloc(n / 8 + 1, 1);
	s.seen = calloc(n, sizeof(uint32_t));
	s.parents = calloc(n, sizeof(uint32_t));
	s.parent_of = calloc(n, sizeof(uint32_t));
	s.dotdot = calloc(n, sizeof(uint32_t));
	s.buf = malloc(fs->bs);
	size_t tbytes = (size_t)fs->itable_blocks * fs->bs;
	uint8_t *tab = malloc(tbytes);
	int r = 0;
	if (!s.v || !s.t || !s.mode || !s.links || !s.indexed || !s.seen || !s.parents || !s.parent_of || !s.dotdot ||
	    !s.buf || !tab) {
		r = -ENOMEM;
		goto out;
	}
	s.t->v = s.v;
	memcpy(s.t->sb_new, fs->sb_raw, 1024);
	memcpy(s.t->sb_old, fs->sb_raw, 1024);
	struct chk_verdict *v = s.v;
	for (size_t i = 0; i < fs->nbadptr; i++)
		V(bt_static(fs->badptrs[i].owner2) ? INV_PTR_NOT_STATIC : INV_PTR_IN_RANGE,
		  "inode %u points to block %llu (%s)", fs->badptrs[i].owner1, (unsigned long long)fs->badptrs[i].blk,
		  bt_static(fs->badptrs[i].owner2) ? "static metadata" : "outside the file system");
	for (size_t i = 0; i < fs->ndups; i++)
		V(INV_BLOCK_OWNED_ONCE, "block %llu is owned by inodes %u and %u", (unsigned long long)fs->dups[i].blk,
		  fs->dups[i].owner1, fs->dups[i].owner2);
	/* A head that names no possible orphan (reserved, past the inode
	 * count, free) is a list e2fsck -n, the kernel and the mount's orphan
	 * processing all drop unread: no orphans, nothing wrong. */
	uint32_t head = fs->sb->s_last_orphan;
	if (head && (head < fs->first_ino || head > fs->inodes_count || !chk_ibit(fs, head)))
		s.t->orphans_done = true;
	chk_txn_is_orphan(fs, s.t, 0);
	if (s.t->orphan_loop)
		V(INV_ORPHAN_LIST, "the orphan list from s_last_orphan %u loops or reaches a free or reserved inode",
		  fs->sb->s_last_orphan);
	chk_clear_deferred(fs);
	r = scan_tables(&s, tab);
	if (!r)
		r = s.err;
	if (!r && s.ea_inode)
		r = -EOPNOTSUPP;  /* its owner's i_blocks counts the value's inode, which no entry names */
	if (r)
		goto out;
	scan_bitmaps(&s);
	chk_scan_groups(fs, v, s.buf, &s.err);
	chk_scan_orphan_file(fs, v, s.buf, &s.err);
	chk_scan_orphan_present(fs, s.t, v);
	scan_padding(&s);
	scan_entries(&s);
	scan_xattrs(&s);
	scan_journal_sb(&s);
	scan_sb_fields(&s);
	for (size_t i = 0; i < s.t->nprobs; i++)
		chk_verdict_add_violation(v, s.t->probs[i].inv, NULL, 0, "%s", s.t->probs[i].detail);
	if (s.t->err)
		r = s.t->err;
	else if (s.err)   /* a pass that could not run found nothing: no verdict */
		r = s.err;
	else if (chk_verdict_oom(v))
		r = -ENOMEM;
out:
	if (s.t)
		chk_txn_free(s.t);
	free(s.mode);
	free(s.links);
	free(s.indexed);
	free(s.seen);
	free(s.parents);
	free(s.parent_of);
	free(s.dotdot);
	free(s.ents);
	free(s.buf);
	free(tab);
	chk_u64map_free(&s.xrefs);
	chk_u64map_free(&s.names);
	uint64_t spent = chk_thread_ns() - t0;
	fs->stats.cpu_ns += spent;
	fs->stats.scan_cpu_ns += spent;
	if (r) {
		chk_verdict_free(s.v);
		return r;
	}
	*out = s.v;
	return 0;
}
