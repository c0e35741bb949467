/*
 * checker/attach.c - chk_attach: the superblock and descriptors, the static
 * layout, both bitmaps of every group, and the type/owner map built from
 * every in-use inode's block map; chk_refresh_super and chk_detach.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chk_ext4.h"

static int read_approved(void *ctx, uint64_t blk, void *buf)
{
	return chk_read_block(ctx, blk, buf);
}

struct attach_visit_ctx {
	struct chk_fs *fs;
	uint32_t ino;
	bool runs;                       /* extent-mapped: data and directory blocks as runs */
	int err;
};

static void note_bad(struct dup_ent **arr, size_t *n, uint64_t blk, uint32_t o1, uint32_t o2)
{
	if (*n >= 4096)
		return;
	struct dup_ent *na = realloc(*arr, (*n + 1) * sizeof(**arr));
	if (!na)
		return;
	*arr = na;
	na[*n].blk = blk;
	na[*n].owner1 = o1;
	na[*n].owner2 = o2;
	(*n)++;
}

/* blk is taken: static (a bad pointer) or owned (a duplicate) */
static void note_taken(struct attach_visit_ctx *a, uint64_t blk)
{
	struct chk_fs *fs = a->fs;
	uint8_t t = chk_btype(fs, blk);
	if (blk < fs->first_data_block || blk >= fs->blocks_count || bt_static(t))
		note_bad(&fs->badptrs, &fs->nbadptr, blk, a->ino, t);
	else
		note_bad(&fs->dups, &fs->ndups, blk, chk_bowner(fs, blk), a->ino);
}

/* An extent's blocks: the free stretches become runs of the inode, each
 * block already taken is reported (as e2fsck's pass 1b would). */
static void attach_run(struct attach_visit_ctx *a, const struct chk_span *s)
{
	struct chk_fs *fs = a->fs;
	uint64_t b = s->blk, end = s->blk + s->len;
	if (b < fs->first_data_block || end > fs->blocks_count) {
		note_taken(a, b < fs->first_data_block ? b : fs->blocks_count);
		return;                  /* the extent rules reject it: nothing owned */
	}
	while (b < end) {
		uint64_t stop = chk_first_taken(fs, b, end);
		if (stop > b) {
			if (chk_run_add(fs, b, (uint32_t)(stop - b), s->type, a->ino,
					s->lblk + (uint32_t)(b - s->blk))) {
				a->err = -ENOMEM;
				return;
			}
			fs->ndata[a->ino] += (uint32_t)(stop - b);
		}
		if (stop >= end)
			break;
		note_taken(a, stop);
		b = stop + 1;
	}
}

/* An indirect or extent tree block already owned (by another inode, or by
 * this one from another slot) is a duplicate: reported, not descended a
 * second time. */
static bool attach_visit(void *ctx, const struct chk_span *s)
{
	struct attach_visit_ctx *a = ctx;
	struct chk_fs *fs = a->fs;
	if (a->runs && (s->type == BT_DATA || s->type == BT_DIR)) {
		attach_run(a, s);
		return true;
	}
	uint64_t blk = s->blk;
	uint8_t t = chk_btype(fs, blk);
	if (a->ino == EXT2_BAD_INO && t == BT_ITABLE && !bt_indirect(s->type)) {
		/* a bad block of an inode table: e2fsck's inode scan skips
		 * the inodes stored there, and so do we */
		if (chk_bad_itable_add(fs, blk))
			a->err = -ENOMEM;
		return false;
	}
	if (blk < fs->first_data_block || blk >= fs->blocks_count || t != BT_FREE) {
		note_taken(a, blk);
		return false;
	}
	if (chk_bmap_reserve(fs, blk)) {
		a->err = -ENOMEM;
		return false;
	}
	chk_bmap_set(fs, blk, s->type, a->ino, s->lblk);
	if (bt_map_meta(s->type))
		fs->nmeta[a->ino]++;
	else
		fs->ndata[a->ino]++;
	return true;
}

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

static int parse_super(struct chk_fs *fs, char *err, size_t errlen)
{
	const struct ext2_super_block *sb = fs->sb;
	if (sb->s_magic != EXT2_SUPER_MAGIC)
		return fail(err, errlen, -EINVAL, "not an ext2/ext3 file system (bad superblock magic 0x%04x)", sb->s_magic);
	if (sb->s_rev_level > EXT2_DYNAMIC_REV)   /* e2fsck and the kernel refuse a newer revision */
		return fail(err, errlen, -EINVAL, "superblock revision %u is newer than ext2/3/4's", sb->s_rev_level);
	if (sb->s_log_block_size > 6)
		return fail(err, errlen, -EINVAL, "bad block size (s_log_block_size %u)", sb->s_log_block_size);
	fs->bs = 1024u << sb->s_log_block_size;
	/* 64 KiB blocks encode rec_len 65536 apart: not modelled */
	if (fs->bs > 32768)
		return fail(err, errlen, -EINVAL, "block size %u not supported (1 KiB to 32 KiB)", fs->bs);
	/* A revision-0 superblock's feature words count too: the kernel (with a
	 * warning) and libext2fs honour them; only the geometry fields below
	 * take revision 0's fixed values. */
	uint32_t words[3];
	words[CHK_COMPAT] = sb->s_feature_compat;
	words[CHK_RO_COMPAT] = sb->s_feature_ro_compat;
	words[CHK_INCOMPAT] = sb->s_feature_incompat;
	char fbuf[64];
	const char *missing = chk_feature_missing(words, CHK_NEED_MODELLED, fbuf, sizeof(fbuf));
	if (missing)
		return fail(err, errlen, -EINVAL, "feature %s not modelled by the checker", missing);
	uint32_t co = words[CHK_COMPAT], ro = words[CHK_RO_COMPAT], inc = words[CHK_INCOMPAT];
	if (sb->s_creator_os == EXT2_OS_HURD)
		return fail(err, errlen, -EINVAL, "GNU Hurd file systems (different inode layout) not modelled");
	if (sb->s_log_cluster_size != sb->s_log_block_size)
		return fail(err, errlen, -EINVAL, "cluster size differs from block size (bigalloc)");
	fs->blocks_count = chk_sb_blocks_count(sb);
	uint64_t r_blocks = sb->s_r_blocks_count | ((inc & EXT4_FEATURE_INCOMPAT_64BIT) ? (uint64_t)sb->s_r_blocks_count_hi << 32 : 0);
	if (r_blocks > fs->blocks_count / 2)      /* e2fsck: "Corruption found in superblock" */
		return fail(err, errlen, -EINVAL, "s_r_blocks_count %llu is more than half the blocks",
			    (unsigned long long)r_blocks);
	fs->inodes_count = sb->s_inodes_count;
	fs->bpg = sb->s_blocks_per_group;
	fs->ipg = sb->s_inodes_per_group;
	fs->first_data_block = sb->s_first_data_block;
	fs->inode_size = sb->s_rev_level ? sb->s_inode_size : 128;
	fs->first_ino = sb->s_rev_level ? sb->s_first_ino : 11;
	/* clusters are blocks here (bigalloc refused): libext2fs and the kernel
	 * refuse any other s_clusters_per_group */
	if (fs->bpg == 0 || fs->bpg > fs->bs * 8 || sb->s_clusters_per_group != fs->bpg || fs->ipg == 0 || fs->ipg > fs->bs * 8 ||
	    fs->inode_size < 128 || fs->inode_size > fs->bs || (fs->inode_size & (fs->inode_size - 1)) ||
	    fs->blocks_count <= fs->first_data_block || fs->first_data_block != (fs->bs == 1024 ? 1u : 0u) ||
	    fs->first_ino < 11 || fs->first_ino > fs->inodes_count)
		return fail(err, errlen, -EINVAL, "inconsistent superblock geometry");
	uint64_t ngroups = (fs->blocks_count - fs->first_data_block + fs->bpg - 1) / fs->bpg;
	if (ngroups * fs->ipg != fs->inodes_count)
		return fail(err, errlen, -EINVAL, "s_inodes_count %u != groups %llu * inodes per group %u",
			    fs->inodes_count, (unsigned long long)ngroups, fs->ipg);
	fs->ngroups = (uint32_t)ngroups;
	fs->desc_size = EXT2_MIN_DESC_SIZE;
	if (inc & EXT4_FEATURE_INCOMPAT_64BIT) {
		/* e2fsck's rule: a power of two from 64 up to EXT2_MAX_DESC_SIZE */
		fs->desc_size = sb->s_desc_size;
		if (fs->desc_size < EXT2_MIN_DESC_SIZE_64BIT || fs->desc_size > EXT2_MAX_DESC_SIZE ||
		    (fs->desc_size & (fs->desc_size - 1)) || fs->desc_size > fs->bs)
			return fail(err, errlen, -EINVAL, "s_desc_size %u is not a valid descriptor size",
				    sb->s_desc_size);
	}
	fs->desc_per_block = fs->bs / fs->desc_size;
	fs->gdt_blocks = (fs->ngroups + fs->desc_per_block - 1) / fs->desc_per_block;
	fs->rgdt_blocks = (co & EXT2_FEATURE_COMPAT_RESIZE_INODE) ? sb->s_reserved_gdt_blocks : 0;
	if (fs->rgdt_blocks > fs->bs / 4)          /* e2fsck's bound: one dind block's worth */
		return fail(err, errlen, -EINVAL, "s_reserved_gdt_blocks %u beyond %u", fs->rgdt_blocks, fs->bs / 4);
	int lr = chk_layout_parse(fs, err, errlen);
	if (lr)
		return lr;
	fs->inodes_per_block = fs->bs / fs->inode_size;
	fs->itable_blocks = (fs->ipg * fs->inode_size + fs->bs - 1) / fs->bs;
	fs->addr_per_block = fs->bs / 4;
	fs->sb_blk = 1024 / fs->bs;
	fs->sb_off = 1024 % fs->bs;
	fs->filetype = inc & EXT2_FEATURE_INCOMPAT_FILETYPE;
	fs->sparse = ro & EXT2_FEATURE_RO_COMPAT_SPARSE_SUPER;
	fs->dir_index = co & EXT2_FEATURE_COMPAT_DIR_INDEX;
	fs->large_file = ro & EXT2_FEATURE_RO_COMPAT_LARGE_FILE;
	fs->has_journal = co & EXT3_FEATURE_COMPAT_HAS_JOURNAL;
	fs->journal_ino = fs->has_journal ? sb->s_journal_inum : 0;
	fs->extents = inc & EXT3_FEATURE_INCOMPAT_EXTENTS;
	fs->flex_bg = inc & EXT4_FEATURE_INCOMPAT_FLEX_BG;
	fs->bit64 = inc & EXT4_FEATURE_INCOMPAT_64BIT;
	fs->huge_file = ro & EXT4_FEATURE_RO_COMPAT_HUGE_FILE;
	fs->dir_nlink = ro & EXT4_FEATURE_RO_COMPAT_DIR_NLINK;
	fs->group_csum = ro & (EXT4_FEATURE_RO_COMPAT_GDT_CSUM | EXT4_FEATURE_RO_COMPAT_METADATA_CSUM);
	fs->orphan_file_ino = (co & EXT4_FEATURE_COMPAT_ORPHAN_FILE) ? sb->s_orphan_file_inum : 0;
	chk_csum_init(&fs->csum, fs->sb_raw);
	if (fs->has_journal && (sb->s_journal_inum == 0 || sb->s_journal_inum >= fs->first_ino))
		return fail(err, errlen, -EINVAL, "external journal (s_journal_inum %u) not modelled", sb->s_journal_inum);
	return 0;
}

/* A group's bitmaps and table are kept as extents of their type, the
 * group as their owner (chk_layout_group). */
static int mark_layout(struct chk_fs *fs, char *err, size_t errlen)
{
	int r = 0;
	for (uint32_t g = 0; g < fs->ngroups && !r; g++) {
		const uint8_t *d = chk_gd(fs, g);
		uint64_t bb = chk_gd_bbitmap(fs, d), ib = chk_gd_ibitmap(fs, d), it = chk_gd_itable(fs, d);
		if (bb < fs->first_data_block || bb >= fs->blocks_count ||
		    ib < fs->first_data_block || ib >= fs->blocks_count ||
		    it < fs->first_data_block || it + fs->itable_blocks > fs->blocks_count)
			return fail(err, errlen, -EINVAL, "group %u: bitmap or inode table location out of range", g);
		r = chk_static_add_group_copies(fs, g);
		r = r ? r : chk_static_add(fs, bb, 1, BT_BBITMAP, g);
		r = r ? r : chk_static_add(fs, ib, 1, BT_IBITMAP, g);
		r = r ? r : chk_static_add(fs, it, fs->itable_blocks, BT_ITABLE, g);
	}
	/* With 4 KiB blocks block 0 holds the superblock at byte 1024. */
	return r ? fail(err, errlen, r, "out of memory for the static layout") : 0;
}

/* Both bitmaps of every group, past the block cache: a big disk's bitmaps
 * would only evict what the transactions will ask for. */
static int load_groups(struct chk_fs *fs, char *err, size_t errlen)
{
	uint8_t *buf = malloc((size_t)3 * fs->bs);
	if (!buf)
		return fail(err, errlen, -ENOMEM, "out of memory");
	uint8_t *bb = buf, *ib = buf + fs->bs, *scratch = buf + 2 * fs->bs;
	int r = 0;
	for (uint32_t g = 0; g < fs->ngroups && !r; g++) {
		const uint8_t *d = chk_gd(fs, g);
		uint64_t bbl = chk_gd_bbitmap(fs, d), ibl = chk_gd_ibitmap(fs, d);
		if (fs->pristine && bit_get(fs->pristine, g)) {
			/* what the seal vouches for, as it was at the sealed
			 * unmount, or what the descriptor claims (checked later) */
			chk_group_static_bits(fs, g, bb);
			memset(ib, 0, fs->bs);
			if (chk_group_load(fs, g, bb, ib, scratch))
				r = fail(err, errlen, -ENOMEM, "out of memory for the shadow state");
			fs->stats.pristine_groups++;
			fs->stats.claimed_groups += fs->claimed != NULL;
			continue;
		}
		bool bu = chk_group_block_uninit(fs, g), iu = chk_group_inode_uninit(fs, g);
		if (bu || iu) {
			/* what libext2fs reads for an uninitialised bitmap: made
			 * up (blocks) or all clear (inodes), the disk unread */
			if (bu)
				chk_group_uninit_bits(fs, g, bb);
			else if ((r = fs->read(fs->ctx, bbl * fs->bs, bb, fs->bs)))
				r = fail(err, errlen, r > 0 ? -EIO : r, "group %u: cannot read block bitmap %llu", g,
					 (unsigned long long)bbl);
			if (iu)
				memset(ib, 0, fs->bs);
			else if (!r && (r = fs->read(fs->ctx, ibl * fs->bs, ib, fs->bs)))
				r = fail(err, errlen, r > 0 ? -EIO : r, "group %u: cannot read inode bitmap %llu", g,
					 (unsigned long long)ibl);
			if (!r && chk_group_load(fs, g, bb, ib, scratch))
				r = fail(err, errlen, -ENOMEM, "out of memory for the shadow state");
			continue;
		}
		/* mke2fs puts the inode bitmap right after the block bitmap: one
		 * read for both (a large disk has over a hundred thousand groups) */
		if (ibl == bbl + 1 && fs->read(fs->ctx, bbl * fs->bs, bb, 2 * (size_t)fs->bs) == 0) {
			chk_note_group_bitmaps(fs, g, bb, ib);
			if (chk_group_load(fs, g, bb, ib, scratch))
				r = fail(err, errlen, -ENOMEM, "out of memory for the shadow state");
			continue;
		}
		r = fs->read(fs->ctx, bbl * fs->bs, bb, fs->bs);
		if (r) {
			r = fail(err, errlen, r > 0 ? -EIO : r, "group %u: cannot read block bitmap %llu", g,
				 (unsigned long long)bbl);
			break;
		}
		r = fs->read(fs->ctx, ibl * fs->bs, ib, fs->bs);
		if (r) {
			r = fail(err, errlen, r > 0 ? -EIO : r, "group %u: cannot read inode bitmap %llu", g,
				 (unsigned long long)ibl);
			break;
		}
		chk_note_group_bitmaps(fs, g, bb, ib);
		if (chk_group_load(fs, g, bb, ib, scratch))
			r = fail(err, errlen, -ENOMEM, "out of memory for the shadow state");
	}
	free(buf);
	if (!r && fs->group_csum)
		r = chk_group_uninit_foreign(fs);
	return r;
}

/*
 * Why a full scan at attach rather than a map built lazily from reads: the
 * invariants "no block is owned twice" and "a bitmap bit flips exactly when a
 * pointer appears" must know, for any block a transaction newly points to,
 * whether some inode not touched by the transaction already owns it.  A map
 * filled from the daemon's reads only knows the inodes it happened to read,
 * so it could approve a double allocation.  The scan reads inode tables in
 * one large read per group and only the indirect blocks of in-use inodes
 * (directory and data blocks are typed from their owner without reading).
 */
static int scan_inodes(struct chk_fs *fs, char *err, size_t errlen)
{
	size_t tbytes = (size_t)fs->itable_blocks * fs->bs;
	uint8_t *tab = malloc(tbytes);
	if (!tab)
		return -ENOMEM;
	int r = 0;
	for (uint32_t g = 0; g < fs->ngroups && !r; g++) {
		const uint8_t *ibits = chk_group_ibits(fs, g);
		/* with descriptor checksums, inodes past the group's used part
		 * lie in a table the kernel may not have zeroed: e2fsck does not
		 * read them, nor do we (an in-use bit there is the scan's) */
		uint32_t used = ibits ? (uint32_t)chk_bits_end(ibits, chk_group_used_inodes(fs, g)) : 0;
		if (!used)
			continue;         /* nothing in use: nothing to type */
		/* up to the last inode in use: the rest of a table is not typed */
		size_t ubytes = ((size_t)used * fs->inode_size + fs->bs - 1) / fs->bs * fs->bs;
		r = fs->read(fs->ctx, chk_gd_itable(fs, chk_gd(fs, g)) * fs->bs, tab, ubytes);
		if (r) {
			r = fail(err, errlen, r < 0 ? r : -EIO, "group %u: cannot read inode table", g);
			break;
		}
		for (uint32_t i = 0; i < used; i++) {
			uint32_t ino = g * fs->ipg + i + 1;
			const struct ext2_inode *in = (const void *)(tab + (size_t)i * fs->inode_size);
			if (!bit_get(ibits, i) || chk_inode_in_bad_block(fs, ino))
				continue;
			if (ino == EXT2_RESIZE_INO) {
				/* its blocks are the reserved GDT blocks (static) and one dind */
				if (in->i_block[EXT2_DIND_BLOCK])
					chk_static_mark_resize(fs, in->i_block[EXT2_DIND_BLOCK]);
				continue;
			}
			if (!chk_inode_blocks_counted(fs, ino))
				continue;
			struct attach_visit_ctx a = { fs, ino, chk_inode_extent_mapped(fs, in), 0 };
			uint64_t x = chk_inode_counted_xattr(fs, ino, in);
			if (x) {
				uint8_t xt = chk_btype(fs, x);
				if (x < fs->first_data_block || x >= fs->blocks_count || bt_static(xt))
					note_bad(&fs->badptrs, &fs->nbadptr, x, ino, xt);
				else if (xt == BT_FREE) {
					if (chk_bmap_reserve(fs, x)) {
						r = fail(err, errlen, -ENOMEM, "out of memory for the shadow state");
						break;
					}
					chk_bmap_set(fs, x, BT_XATTR, ino, 0);
				} else if (xt != BT_XATTR)
					note_bad(&fs->dups, &fs->ndups, x, chk_bowner(fs, x), ino);
			}
			if (!chk_inode_walkable(fs, ino, in))
				continue;
			bool isdir = imode_type(in) == 0040000;
			r = chk_walk_inode_tree(fs, in, isdir, read_approved, fs, attach_visit, &a, NULL, 0);
			if (r == 1)
				r = 0;   /* a broken extent tree: owned as far as walked, the scan reports it */
			if (!r && a.err) {
				r = fail(err, errlen, a.err, "out of memory for the shadow state");
				break;
			}
			if (r) {
				r = fail(err, errlen, r, "inode %u: cannot walk its block map: %s", ino, strerror(-r));
				break;
			}
		}
	}
	free(tab);
	return r;
}

int chk_attach(struct chk_fs **out, chk_read_fn read, void *ctx,
	       const struct chk_options *opt, char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = 0;
	struct chk_fs *fs = calloc(1, sizeof(*fs));
	if (!fs)
		return fail(err, errlen, -ENOMEM, "out of memory");
	fs->read = read;
	fs->zero = opt ? opt->zero : NULL;
	fs->ctx = ctx;
	fs->sb = (const void *)fs->sb_raw;
	fs->cache.head = fs->cache.tail = CACHE_NIL;
	int r = read(ctx, 1024, fs->sb_raw, 1024);
	if (r) {
		r = fail(err, errlen, r < 0 ? r : -EIO, "cannot read the superblock");
		goto bad;
	}
	if ((r = parse_super(fs, err, errlen)))
		goto bad;
	if (opt && opt->pristine && opt->npristine == fs->ngroups) {
		if (!(fs->pristine = malloc((size_t)fs->ngroups / 8 + 1))) {
			r = fail(err, errlen, -ENOMEM, "out of memory");
			goto bad;
		}
		memcpy(fs->pristine, opt->pristine, ((size_t)fs->ngroups + 7) / 8);
		if (opt->pristine_claimed && (r = chk_claim_groups(fs))) {
			r = fail(err, errlen, r, "out of memory");
			goto bad;
		}
	}
	/* the shadow state is sized by s_blocks_count: a corrupt count must not
	 * size it beyond the device (its last block must be readable) */
	uint8_t *probe = malloc(fs->bs);
	if (!probe) {
		r = fail(err, errlen, -ENOMEM, "out of memory");
		goto bad;
	}
	r = read(ctx, (uint64_t)(fs->blocks_count - 1) * fs->bs, probe, fs->bs);
	free(probe);
	if (r) {
		/* the callback cannot tell a short device from a failing one:
		 * the message says which block */
		r = fail(err, errlen, -EINVAL, "s_blocks_count %llu reaches past the end of the device "
			 "(block %llu cannot be read)", (unsigned long long)fs->blocks_count,
			 (unsigned long long)fs->blocks_count - 1);
		goto bad;
	}
	size_t cb = opt && opt->cache_bytes ? opt->cache_bytes : (size_t)128 << 20;
	fs->cache_max = cb / fs->bs;
	if (fs->cache_max < 16)
		fs->cache_max = 16;
	fs->gd = calloc(fs->gdt_blocks, fs->bs);
	fs->ndata = calloc((size_t)fs->inodes_count + 1, sizeof(uint32_t));
	fs->nmeta = calloc((size_t)fs->inodes_count + 1, sizeof(uint32_t));
	uint8_t *buf = malloc(fs->bs);
	if (!fs->gd || !fs->ndata || !fs->nmeta || !buf || chk_shadow_init(fs)) {
		free(buf);
		r = fail(err, errlen, -ENOMEM, "out of memory for the shadow state");
		goto bad;
	}
	for (uint32_t i = 0; i < fs->gdt_blocks; i++) {
		r = chk_read_block(fs, chk_gdt_block_loc(fs, i), buf);
		if (r) {
			free(buf);
			r = fail(err, errlen, r, "cannot read group descriptor block %u", i);
			goto bad;
		}
		memcpy(fs->gd + (size_t)i * fs->bs, buf, fs->bs);
	}
	for (uint32_t g = 0; g < fs->ngroups; g++) {
		fs->gd_free_blocks += chk_gd_free_blocks(fs, chk_gd(fs, g));
		fs->gd_free_inodes += chk_gd_free_inodes(fs, chk_gd(fs, g));
	}
	if ((r = mark_layout(fs, err, errlen)) || (r = chk_static_seal(fs))) {
		free(buf);
		goto bad;
	}
	free(buf);
	if ((r = load_groups(fs, err, errlen)))
		goto bad;
	if ((r = scan_inodes(fs, err, errlen)))
		goto bad;
	*out = fs;
	return 0;
bad:
	if (err && errlen && !err[0])   /* a step that fails with no message of its own */
		fail(err, errlen, r, "attach: %s", strerror(-r));
	chk_detach(fs);
	*out = NULL;
	return r;
}

/* The superblock with the fields a mount may change zeroed: the free counts
 * (recounted from the descriptors), the state and needs-recovery flag (the
 * mount marks itself), the write and mount times and counters. */
static void sb_without_mount_fields(const uint8_t *raw, struct ext2_super_block *out)
{
	memcpy(out, raw, sizeof(*out));
	out->s_free_blocks_count = out->s_free_blocks_hi = 0;
	out->s_free_inodes_count = 0;
	out->s_state = 0;
	out->s_feature_incompat &= ~(uint32_t)EXT3_FEATURE_INCOMPAT_RECOVER;
	out->s_mtime = out->s_wtime = 0;
	out->s_mtime_hi = out->s_wtime_hi = 0;
	out->s_mnt_count = 0;
	out->s_kbytes_written = 0;
	out->s_checksum = 0;
}

int chk_refresh_super(struct chk_fs *fs)
{
	uint8_t raw[1024] __attribute__((aligned(8)));
	int r = fs->read(fs->ctx, 1024, raw, sizeof(raw));
	if (r)
		return r < 0 ? r : -EIO;
	struct ext2_super_block was, now;
	sb_without_mount_fields(fs->sb_raw, &was);
	sb_without_mount_fields(raw, &now);
	if (memcmp(&was, &now, sizeof(was)))
		return -ESTALE;
	memcpy(fs->sb_raw, raw, sizeof(raw));
	chk_cache_drop(fs, fs->sb_blk);
	return 0;
}

void chk_detach(struct chk_fs *fs)
{
	if (!fs)
		return;
	chk_pool_detach(fs->pool);
	chk_cache_free(&fs->cache);
	free(fs->gd);
	chk_shadow_free(fs);
	free(fs->ndata);
	free(fs->nmeta);
	free(fs->dups);
	free(fs->badptrs);
	free(fs->bad_itable);
	free(fs->sealed);
	free(fs->pristine);
	free(fs->claimed);
	free(fs->deferred);
	free(fs);
}

int chk_set_sealed(struct chk_fs *fs, const uint8_t *bits, uint32_t ngroups)
{
	uint8_t *copy = NULL;
	if (bits && ngroups != fs->ngroups)
		return -EINVAL;
	if (bits && !(copy = malloc((size_t)ngroups / 8 + 1)))
		return -ENOMEM;
	if (copy)
		memcpy(copy, bits, ((size_t)ngroups + 7) / 8);
	free(fs->sealed);
	fs->sealed = copy;
	return 0;
}

uint32_t chk_block_size(const struct chk_fs *fs)
{
	return fs->bs;
}

