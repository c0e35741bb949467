/*
 * checker/diff.c - chk_check: gather the transaction's blocks (overlaying
 * partial writes on the approved contents), infer what each block is, and
 * compute the logical diff into change records plus the facts the
 * invariants need (ownership changes per block, per-inode deltas, directory
 * entry changes, structural problems).
 *
 * Type inference: static metadata is typed by the layout; a block already
 * in the type/owner map keeps its type; a block newly pointed to in this
 * transaction takes its type from the pointer (a directory's i_block makes
 * a directory block, slot 12 an indirect block, i_file_acl an xattr block,
 * ...).  Any other written block is free or file data: not metadata.
 *
 * Directory blocks are diffed in diff_dir.c, htree indexes in diff_htree.c;
 * what stays (about 1,080 lines) is one pass: gather, type, diff per block.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ext2fs/ext2fs.h>

#include "chk_ext4.h"

/* ------------------------------------------------------------ containers */

void *chk_grow(void *arr, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return arr;
	size_t nc = *cap ? *cap * 2 : 32;
	while (nc < need)
		nc *= 2;
	void *n = realloc(arr, nc * elem);
	if (n)
		*cap = nc;
	return n;
}

struct tblock *chk_tb_find(struct txn *t, uint64_t blk)
{
	uint32_t i;
	return chk_u64map_get(&t->bidx, blk, &i) ? &t->blocks[i] : NULL;
}

/* An uninitialised group's bitmap block holds whatever the disk had: its
 * approved contents are the bitmap libext2fs makes up (blocks) or a clear
 * one (inodes), padding set as written.  The block is then marked made up:
 * a write equal to it is no change, yet the disk's bytes change, and the
 * cache (which holds the disk's) must learn them (advance.c). */
static void uninit_bitmap_as_approved(const struct chk_fs *fs, struct tblock *b)
{
	bool inode = b->otype == BT_IBITMAP;
	if (b->otype != BT_BBITMAP && !inode)
		return;
	uint32_t g = chk_layout_group(fs, b->blk, b->otype, NULL);
	if (!(inode ? chk_group_inode_uninit(fs, g) : chk_group_block_uninit(fs, g)))
		return;
	uint64_t start = fs->first_data_block + (uint64_t)g * fs->bpg;
	uint64_t n = inode ? fs->ipg : fs->blocks_count - start < fs->bpg ? fs->blocks_count - start : fs->bpg;
	memset(b->old, 0xff, fs->bs);
	const uint8_t *bits = inode ? chk_group_ibits(fs, g) : chk_group_bbits(fs, g);
	uint8_t *pat = NULL;
	if (!bits && !inode && (pat = malloc(fs->bs)))
		chk_group_static_bits(fs, g, pat);
	for (uint64_t i = 0; i < n; i++)
		bit_put(b->old, i, bits ? bit_get(bits, i) : pat ? bit_get(pat, i) : false);
	free(pat);
	b->made_up = true;
}

/* `full`: the write covers the whole block.  The approved contents of a
 * free or data block are then never needed (data is not diffed), so the
 * read is skipped: a data write costs no device read. */
static struct tblock *tb_get(struct chk_fs *fs, struct txn *t, uint64_t blk, bool full)
{
	struct tblock *b = chk_tb_find(t, blk);
	if (b)
		return b;
	struct tblock *nb = chk_grow(t->blocks, &t->capblocks, t->nblocks + 1, sizeof(*nb));
	if (!nb)
		return NULL;
	t->blocks = nb;
	b = &t->blocks[t->nblocks];
	memset(b, 0, sizeof(*b));
	b->blk = blk;
	b->otype = blk < fs->blocks_count ? chk_btype(fs, blk) : BT_FREE;
	bool skip_old = full && (b->otype == BT_FREE || b->otype == BT_DATA);
	/* one allocation: new, then old (freed with new) */
	b->new = chk_pool_get(t->pool, CHK_POOL_BLOCK, 2 * (size_t)fs->bs);
	b->old = skip_old || !b->new ? NULL : b->new + fs->bs;
	if (!b->new || chk_u64map_put(&t->bidx, blk, (uint32_t)t->nblocks)) {
		chk_pool_put(t->pool, CHK_POOL_BLOCK, t->block_alloc, b->new);
		return NULL;
	}
	if (!skip_old) {
		int r = chk_read_block(fs, blk, b->old);
		if (r) {
			chk_pool_put(t->pool, CHK_POOL_BLOCK, t->block_alloc, b->new);
			chk_u64map_del(&t->bidx, blk);
			t->err = r;
			return NULL;
		}
		uninit_bitmap_as_approved(fs, b);
		/* a whole-block write overwrites all of it at once */
		if (!full)
			memcpy(b->new, b->old, fs->bs);
	}
	t->nblocks++;
	return b;
}

const uint8_t *chk_txn_new_block(struct chk_fs *fs, struct txn *t, uint64_t blk, uint8_t *buf)
{
	struct tblock *b = chk_tb_find(t, blk);
	if (b)
		return b->new;
	int r = chk_read_block(fs, blk, buf);
	if (r) {
		t->err = r;
		return NULL;
	}
	return buf;
}

const uint8_t *chk_txn_old_block(struct chk_fs *fs, struct txn *t, uint64_t blk, uint8_t *buf)
{
	struct tblock *b = chk_tb_find(t, blk);
	if (b && b->old)
		return b->old;
	int r = chk_read_block(fs, blk, buf);
	if (r) {
		t->err = r;
		return NULL;
	}
	return buf;
}

bool chk_txn_bbit_new(struct chk_fs *fs, struct txn *t, uint64_t blk)
{
	if (blk >= fs->blocks_count || blk < fs->first_data_block)
		return false;
	uint32_t g = chk_group_of_block(fs, blk);
	struct tblock *b = chk_tb_find(t, chk_gd_bbitmap(fs, chk_gd(fs, g)));
	if (b)
		return bit_get(b->new, blk - fs->first_data_block - (uint64_t)g * fs->bpg);
	return chk_bbit(fs, blk);
}

bool chk_txn_ibit_new(struct chk_fs *fs, struct txn *t, uint32_t ino)
{
	if (ino == 0 || ino > fs->inodes_count)
		return false;
	uint32_t g = chk_group_of_inode(fs, ino);
	struct tblock *b = chk_tb_find(t, chk_gd_ibitmap(fs, chk_gd(fs, g)));
	if (b)
		return bit_get(b->new, (ino - 1) % fs->ipg);
	return chk_ibit(fs, ino);
}

struct ichange *chk_txn_inode(struct chk_fs *fs, struct txn *t, uint32_t ino)
{
	uint32_t i;
	if (ino == 0 || ino > fs->inodes_count)
		return NULL;
	if (chk_u64map_get(&t->ichidx, ino, &i))
		return t->ich[i];
	struct ichange **na = chk_grow(t->ich, &t->capich, t->nich + 1, sizeof(*na));
	if (!na)
		goto oom;
	t->ich = na;
	/* one allocation: the change, then the old and new inode (each set
	 * in full below) */
	struct ichange *ic = chk_pool_get(t->pool, CHK_POOL_ICHANGE, sizeof(*ic) + 2 * (size_t)fs->inode_size);
	if (!ic)
		goto oom;
	memset(ic, 0, sizeof(*ic));
	ic->ino = ino;
	ic->old = (uint8_t *)(ic + 1);
	ic->new = ic->old + fs->inode_size;
	if (chk_u64map_put(&t->ichidx, ino, (uint32_t)t->nich)) {
		chk_pool_put(t->pool, CHK_POOL_ICHANGE, t->ichange_alloc, ic);
		goto oom;
	}
	/* past a group's initialised inodes a slot holds whatever the disk
	 * had: it reads as a zeroed inode (e2fsck does not read it) */
	uint32_t g = chk_group_of_inode(fs, ino), idx = (ino - 1) % fs->ipg;
	struct tblock *b = chk_tb_find(t, chk_gd_itable(fs, chk_gd(fs, g)) + idx / fs->inodes_per_block);
	size_t at = (idx % fs->inodes_per_block) * fs->inode_size;
	int r = 0;
	if (idx >= chk_group_used_inodes(fs, g))
		memset(ic->old, 0, fs->inode_size);
	else if (b && b->old)   /* the transaction read the table block already */
		memcpy(ic->old, b->old + at, fs->inode_size);
	else if ((r = chk_read_inode(fs, ino, ic->old)) != 0) {
		t->err = r;
		memset(ic->old, 0, fs->inode_size);
	}
	if (idx >= chk_txn_used_inodes(fs, t, g))
		memset(ic->new, 0, fs->inode_size);
	else if (b)
		memcpy(ic->new, b->new + at, fs->inode_size);
	else
		memcpy(ic->new, ic->old, fs->inode_size);
	ic->written = memcmp(ic->old, ic->new, fs->inode_size) != 0;
	const struct ext2_inode *o = (const void *)ic->old, *n = (const void *)ic->new;
	ic->old_inuse = chk_ibit(fs, ino);
	ic->new_inuse = chk_txn_ibit_new(fs, t, ino);
	ic->old_live = ic->old_inuse && o->i_links_count > 0;
	ic->new_live = ic->new_inuse && n->i_links_count > 0;
	ic->bitflip = ic->old_inuse != ic->new_inuse;
	ic->bit_rec = SIZE_MAX;
	for (int k = 0; k < 16; k++)
		ic->ptr_rec[k] = SIZE_MAX;
	t->ich[t->nich++] = ic;
	return ic;
oom:
	t->err = -ENOMEM;
	return NULL;
}

void chk_ich_add_rec(struct ichange *ic, size_t rec)
{
	if (rec == SIZE_MAX)
		return;
	size_t *n = chk_grow(ic->recs, &ic->caprecs, ic->nrecs + 1, sizeof(*n));
	if (!n)
		return;
	ic->recs = n;
	ic->recs[ic->nrecs++] = rec;
}

struct bchange *chk_txn_bch_find(struct txn *t, uint64_t blk)
{
	uint32_t i;
	return chk_u64map_get(&t->bchidx, blk, &i) ? t->bch[i] : NULL;
}

static struct bchange *bch_get(struct chk_fs *fs, struct txn *t, uint64_t blk)
{
	struct bchange *c = chk_txn_bch_find(t, blk);
	if (c)
		return c;
	struct bchange **na = chk_grow(t->bch, &t->capbch, t->nbch + 1, sizeof(*na));
	if (!na)
		goto oom;
	t->bch = na;
	c = calloc(1, sizeof(*c));
	if (!c || chk_u64map_put(&t->bchidx, blk, (uint32_t)t->nbch)) {
		free(c);
		goto oom;
	}
	c->blk = blk;
	c->old_type = blk < fs->blocks_count ? chk_btype(fs, blk) : BT_FREE;
	c->old_owner = blk < fs->blocks_count ? chk_bowner(fs, blk) : 0;
	c->new_type = c->old_type;
	c->new_owner = c->old_owner;
	c->new_lblk = blk < fs->blocks_count ? chk_blblk(fs, blk) : 0;
	c->rec = c->flip_rec = SIZE_MAX;
	c->xattr_old_refs = -1;
	t->bch[t->nbch++] = c;
	return c;
oom:
	t->err = -ENOMEM;
	return NULL;
}

struct gtouch *chk_txn_group(struct txn *t, uint32_t g)
{
	uint32_t i;
	if (chk_u64map_get(&t->gtidx, g, &i))
		return &t->gt[i];
	struct gtouch *na = chk_grow(t->gt, &t->capgt, t->ngt + 1, sizeof(*na));
	if (!na || chk_u64map_put(&t->gtidx, g, (uint32_t)t->ngt)) {
		if (na)
			t->gt = na;
		t->err = -ENOMEM;
		return NULL;
	}
	t->gt = na;
	t->gt[t->ngt] = (struct gtouch){ .g = g, .rec = SIZE_MAX };
	return &t->gt[t->ngt++];
}

uint32_t chk_txn_used_inodes(const struct chk_fs *fs, const struct txn *t, uint32_t g)
{
	if (!fs->group_csum)
		return fs->ipg;
	const uint8_t *d = chk_gd_new(fs, t, g);
	if (chk_gd_flags(d) & EXT2_BG_INODE_UNINIT)
		return 0;          /* as libext2fs's inode scan: whatever the checksum */
	uint32_t unused = chk_gd_itable_unused(fs, d);
	return unused < fs->ipg ? fs->ipg - unused : 0;
}

const uint8_t *chk_gd_new(const struct chk_fs *fs, const struct txn *t, uint32_t g)
{
	const uint8_t *b = t->gdb_new ? t->gdb_new[g / fs->desc_per_block] : NULL;
	if (!b)
		return chk_gd(fs, g);
	return b + (size_t)(g % fs->desc_per_block) * fs->desc_size;
}

static int gt_cmp(const void *a, const void *b)
{
	uint32_t x = ((const struct gtouch *)a)->g, y = ((const struct gtouch *)b)->g;
	return x < y ? -1 : x > y;
}

void chk_txn_groups_sort(struct txn *t)
{
	if (t->ngt > 1)
		qsort(t->gt, t->ngt, sizeof(*t->gt), gt_cmp);
	/* same keys, new indexes: a key already in the map cannot fail */
	for (size_t i = 0; i < t->ngt; i++)
		(void)chk_u64map_put(&t->gtidx, t->gt[i].g, (uint32_t)i);
}

void chk_txn_problem(struct txn *t, enum chk_inv inv, size_t rec, const char *fmt, ...)
{
	if (t->nprobs >= 2000)
		return;
	struct tproblem *np = chk_grow(t->probs, &t->capprobs, t->nprobs + 1, sizeof(*np));
	if (!np) {
		t->err = -ENOMEM;
		return;
	}
	t->probs = np;
	char tmp[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	t->probs[t->nprobs++] = (struct tproblem){ inv, rec, chk_arena_printf(&t->v->strings, "%s", tmp) };
}

void chk_txn_free(struct txn *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nblocks; i++)   /* old lies in new's allocation */
		chk_pool_put(t->pool, CHK_POOL_BLOCK, t->block_alloc, t->blocks[i].new);
	free(t->blocks);
	chk_u64map_free(&t->bidx);
	for (size_t i = 0; i < t->nbch; i++)
		free(t->bch[i]);
	free(t->bch);
	chk_u64map_free(&t->bchidx);
	for (size_t i = 0; i < t->nich; i++) {
		free(t->ich[i]->recs);
		chk_pool_put(t->pool, CHK_POOL_ICHANGE, t->ichange_alloc, t->ich[i]);   /* with its inodes */
	}
	free(t->ich);
	chk_u64map_free(&t->ichidx);
	free(t->dch);
	free(t->probs);
	if (t->gdb_new)
		for (uint32_t i = 0; i < t->ngdb; i++)
			free(t->gdb_new[i]);
	free(t->gdb_new);
	free(t->gt);
	chk_u64map_free(&t->gtidx);
	free(t->sb_recs);
	chk_u64map_free(&t->orphans);
	chk_u64map_free(&t->dirblks);
	free(t->dx);
	chk_pool_unref(t->pool);
	free(t);
}

/* ------------------------------------------------------------ superblock */

struct field {
	const char *name;
	uint16_t off, size, count;   /* count > 1: array, one record per element */
	uint8_t cls;
};

#define SBF(f, c) { #f, offsetof(struct ext2_super_block, f), \
	sizeof(((struct ext2_super_block *)0)->f) / (c), c, 0 }
#define SBFC(f, c, cls) { #f, offsetof(struct ext2_super_block, f), \
	sizeof(((struct ext2_super_block *)0)->f) / (c), c, cls }

/* Every superblock field and whether a mount / commit / unmount may change it
 * (checked by INV_SB_FROZEN; counts, features, state and revision have their own). */
static const struct field sb_fields[] = {
	SBF(s_inodes_count, 1), SBF(s_blocks_count, 1), SBF(s_r_blocks_count, 1),
	SBFC(s_free_blocks_count, 1, F_COUNT), SBFC(s_free_inodes_count, 1, F_COUNT),
	SBF(s_first_data_block, 1), SBF(s_log_block_size, 1), SBF(s_log_cluster_size, 1),
	SBF(s_blocks_per_group, 1), SBF(s_clusters_per_group, 1), SBF(s_inodes_per_group, 1),
	SBFC(s_mtime, 1, F_FREE), SBFC(s_wtime, 1, F_FREE), SBFC(s_mnt_count, 1, F_FREE),
	SBFC(s_max_mnt_count, 1, F_STATE), SBF(s_magic, 1), SBFC(s_state, 1, F_STATE), SBF(s_errors, 1),
	SBF(s_minor_rev_level, 1), SBFC(s_lastcheck, 1, F_FREE), SBF(s_checkinterval, 1),
	SBF(s_creator_os, 1), SBFC(s_rev_level, 1, F_REVISION), SBF(s_def_resuid, 1),
	SBF(s_def_resgid, 1), SBFC(s_first_ino, 1, F_REVISION), SBFC(s_inode_size, 1, F_REVISION),
	SBF(s_block_group_nr, 1),
	SBFC(s_feature_compat, 1, F_FEATURE), SBFC(s_feature_incompat, 1, F_FEATURE),
	SBFC(s_feature_ro_compat, 1, F_FEATURE), SBF(s_uuid, 16), SBF(s_volume_name, 16),
	SBFC(s_last_mounted, 64, F_FREE), SBF(s_algorithm_usage_bitmap, 1),
	SBF(s_prealloc_blocks, 1), SBF(s_prealloc_dir_blocks, 1), SBF(s_reserved_gdt_blocks, 1),
	SBF(s_journal_uuid, 16), SBF(s_journal_inum, 1), SBF(s_journal_dev, 1),
	SBFC(s_last_orphan, 1, F_FREE), SBF(s_hash_seed, 4), SBF(s_def_hash_version, 1),
	SBF(s_jnl_backup_type, 1), SBF(s_desc_size, 1), SBF(s_default_mount_opts, 1),
	SBF(s_first_meta_bg, 1), SBF(s_mkfs_time, 1), SBF(s_jnl_blocks, 17),
	SBF(s_blocks_count_hi, 1), SBF(s_r_blocks_count_hi, 1), SBFC(s_free_blocks_hi, 1, F_COUNT),
	SBF(s_min_extra_isize, 1), SBF(s_want_extra_isize, 1), SBFC(s_flags, 1, F_STATE),
	SBF(s_raid_stride, 1), SBF(s_mmp_update_interval, 1), SBF(s_mmp_block, 1),
	SBF(s_raid_stripe_width, 1), SBF(s_log_groups_per_flex, 1), SBF(s_checksum_type, 1),
	SBF(s_encryption_level, 1), SBF(s_reserved_pad, 1), SBFC(s_kbytes_written, 1, F_FREE),
	SBF(s_snapshot_inum, 1), SBF(s_snapshot_id, 1), SBF(s_snapshot_r_blocks_count, 1),
	SBF(s_snapshot_list, 1), SBFC(s_error_count, 1, F_FREE), SBFC(s_first_error_time, 1, F_FREE),
	SBFC(s_first_error_ino, 1, F_FREE), SBFC(s_first_error_block, 1, F_FREE),
	SBFC(s_first_error_func, 32, F_FREE), SBFC(s_first_error_line, 1, F_FREE),
	SBFC(s_last_error_time, 1, F_FREE), SBFC(s_last_error_ino, 1, F_FREE),
	SBFC(s_last_error_line, 1, F_FREE), SBFC(s_last_error_block, 1, F_FREE),
	SBFC(s_last_error_func, 32, F_FREE), SBF(s_mount_opts, 64), SBF(s_usr_quota_inum, 1),
	SBF(s_grp_quota_inum, 1), SBF(s_overhead_clusters, 1), SBF(s_backup_bgs, 2),
	SBF(s_encrypt_algos, 4), SBF(s_encrypt_pw_salt, 16), SBF(s_lpf_ino, 1),
	SBF(s_prj_quota_inum, 1), SBF(s_checksum_seed, 1), SBFC(s_wtime_hi, 1, F_FREE),
	SBFC(s_mtime_hi, 1, F_FREE), SBF(s_mkfs_time_hi, 1), SBFC(s_lastcheck_hi, 1, F_FREE),
	SBFC(s_first_error_time_hi, 1, F_FREE), SBFC(s_last_error_time_hi, 1, F_FREE),
	SBFC(s_first_error_errcode, 1, F_FREE), SBFC(s_last_error_errcode, 1, F_FREE),
	SBF(s_encoding, 1), SBF(s_encoding_flags, 1), SBF(s_orphan_file_inum, 1), SBF(s_reserved, 94),
	/* changes with every write under metadata_csum; its value is INV_CSUM_SB's */
	SBFC(s_checksum, 1, F_FREE),
};
#define NSB_FIELDS (sizeof(sb_fields) / sizeof(sb_fields[0]))

static int64_t get_le(const uint8_t *p, unsigned size)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < size; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return (int64_t)v;
}

/* the class of a superblock record's field (for invariants.c) */
uint8_t chk_sb_rec_class(const char *field)
{
	for (size_t i = 0; i < NSB_FIELDS; i++)
		if (!strncmp(field, sb_fields[i].name, strlen(sb_fields[i].name)) &&
		    (field[strlen(sb_fields[i].name)] == 0 || field[strlen(sb_fields[i].name)] == '['))
			return sb_fields[i].cls;
	return F_FROZEN;
}

static void sb_add_rec(struct txn *t, size_t rec)
{
	size_t *n = chk_grow(t->sb_recs, &t->capsb_recs, t->nsb_recs + 1, sizeof(*n));
	if (!n) {
		t->err = -ENOMEM;
		return;
	}
	t->sb_recs = n;
	t->sb_recs[t->nsb_recs++] = rec;
}

/* Diff two superblock images into sb records; returns whether anything the
 * table does not list differs (the reserved tail). */
static bool diff_sb(struct txn *t, const uint8_t *o, const uint8_t *n, bool primary)
{
	size_t end = 0;
	for (size_t i = 0; i < NSB_FIELDS; i++) {
		const struct field *f = &sb_fields[i];
		for (unsigned k = 0; k < f->count; k++) {
			const uint8_t *po = o + f->off + k * f->size, *pn = n + f->off + k * f->size;
			if (!memcmp(po, pn, f->size))
				continue;
			/* a backup's revision stays: the kernel upgrades the primary alone */
			if (!primary && ((f->cls != F_FROZEN && f->cls != F_REVISION) ||
					 !strcmp(f->name, "s_block_group_nr")))
				continue;
			const char *name = f->count > 1 ? chk_arena_indexed(&t->v->strings, f->name, k) : f->name;
			size_t r = chk_verdict_add_record(t->v, CHK_SB, 0, name, get_le(po, f->size), get_le(pn, f->size));
			if (primary)
				sb_add_rec(t, r);
			else
				chk_txn_problem(t, INV_BACKUP_COPIES, r, "a backup superblock's frozen field %s changed", name);
		}
		if ((size_t)f->off + (size_t)f->size * f->count > end)
			end = (size_t)f->off + (size_t)f->size * f->count;
	}
	return memcmp(o + end, n + end, 1024 - end) != 0;
}

/* ------------------------------------------------------------ descriptors */

#define GDF(n, off, size) { n, off, size, 1, 0 }
/* The fields of a 32-byte descriptor, then the high halves a 64-byte one
 * adds (named as libext2fs names them). */
static const struct field gd_fields[] = {
	GDF("bg_block_bitmap", GD_BBITMAP, 4), GDF("bg_inode_bitmap", GD_IBITMAP, 4),
	GDF("bg_inode_table", GD_ITABLE, 4), GDF("bg_free_blocks_count", GD_FREE_BLOCKS, 2),
	GDF("bg_free_inodes_count", GD_FREE_INODES, 2), GDF("bg_used_dirs_count", GD_USED_DIRS, 2),
	GDF("bg_flags", GD_FLAGS, 2), GDF("bg_exclude_bitmap_lo", GD_EXCLUDE, 4),
	GDF("bg_block_bitmap_csum_lo", GD_BBITMAP_CSUM, 2), GDF("bg_inode_bitmap_csum_lo", GD_IBITMAP_CSUM, 2),
	GDF("bg_itable_unused", GD_ITABLE_UNUSED, 2), GDF("bg_checksum", GD_CHECKSUM, 2),
	GDF("bg_block_bitmap_hi", GD_BBITMAP_HI, 4), GDF("bg_inode_bitmap_hi", GD_IBITMAP_HI, 4),
	GDF("bg_inode_table_hi", GD_ITABLE_HI, 4), GDF("bg_free_blocks_count_hi", GD_FREE_BLOCKS_HI, 2),
	GDF("bg_free_inodes_count_hi", GD_FREE_INODES_HI, 2), GDF("bg_used_dirs_count_hi", GD_USED_DIRS_HI, 2),
	GDF("bg_itable_unused_hi", GD_ITABLE_UNUSED_HI, 2), GDF("bg_exclude_bitmap_hi", GD_EXCLUDE_HI, 4),
	GDF("bg_block_bitmap_csum_hi", GD_BBITMAP_CSUM_HI, 2), GDF("bg_inode_bitmap_csum_hi", GD_IBITMAP_CSUM_HI, 2),
	GDF("bg_reserved", 0x3C, 4),
};

/* Only the descriptor blocks in the transaction are looked at: the cost
 * follows what changed, not the number of groups. */
static void diff_gdt(struct chk_fs *fs, struct txn *t)
{
	for (size_t k = 0; k < t->nblocks && !t->err; k++) {
		struct tblock *b = &t->blocks[k];
		uint32_t i = b->changed && b->otype == BT_GDT ? chk_gdt_block_index(fs, b->blk) : UINT32_MAX;
		if (i == UINT32_MAX)
			continue;
		if (!t->gdb_new[i]) {
			t->gdb_new[i] = malloc(fs->bs);
			if (!t->gdb_new[i]) {
				t->err = -ENOMEM;
				return;
			}
		}
		memcpy(t->gdb_new[i], b->new, fs->bs);
	}
	for (uint32_t i = 0; i < fs->gdt_blocks && !t->err; i++) {
		if (!t->gdb_new[i])
			continue;
		uint32_t end = (i + 1) * fs->desc_per_block;
		for (uint32_t g = i * fs->desc_per_block; g < end && g < fs->ngroups; g++) {
			const uint8_t *o = chk_gd(fs, g), *n = chk_gd_new(fs, t, g);
			if (!memcmp(o, n, fs->desc_size))
				continue;
			struct gtouch *gt = chk_txn_group(t, g);
			if (!gt)
				return;
			gt->changed = true;
			for (size_t f = 0; f < sizeof(gd_fields) / sizeof(gd_fields[0]); f++) {
				const struct field *fl = &gd_fields[f];
				if (fl->off + fl->size > fs->desc_size)
					break;
				if (memcmp(o + fl->off, n + fl->off, fl->size)) {
					size_t r = chk_verdict_add_record(t->v, CHK_BGD, g, fl->name,
									  get_le(o + fl->off, fl->size),
									  get_le(n + fl->off, fl->size));
					if (gt->rec == SIZE_MAX)
						gt->rec = r;
				}
			}
		}
	}
}

/* backup descriptor blocks: only the locations are checked (libext2fs
 * rewrites backups with current counters; the kernel leaves them stale) */
static void check_backup_gdt(struct chk_fs *fs, struct txn *t, struct tblock *b)
{
	for (uint32_t i = 0; i < fs->desc_per_block; i++) {
		const uint8_t *o = b->old + (size_t)i * fs->desc_size, *n = b->new + (size_t)i * fs->desc_size;
		if (chk_gd_bbitmap(fs, o) != chk_gd_bbitmap(fs, n) || chk_gd_ibitmap(fs, o) != chk_gd_ibitmap(fs, n) ||
		    chk_gd_itable(fs, o) != chk_gd_itable(fs, n))
			chk_txn_problem(t, INV_BACKUP_COPIES, SIZE_MAX,
				    "backup group descriptor block %llu: entry %u's bitmap/inode table location changed",
				    (unsigned long long)b->blk, i);
	}
}

/* ------------------------------------------------------------ bitmaps */

static void diff_bbitmap(struct chk_fs *fs, struct txn *t, uint32_t g, struct tblock *b)
{
	uint64_t start = fs->first_data_block + (uint64_t)g * fs->bpg;
	uint64_t nb = fs->blocks_count - start < fs->bpg ? fs->blocks_count - start : fs->bpg;
	for (uint64_t w = 0; w < (nb + 63) / 64; w++) {
		uint64_t ow, nw;
		memcpy(&ow, b->old + w * 8, 8);
		memcpy(&nw, b->new + w * 8, 8);
		if (ow == nw)
			continue;
		for (uint64_t i = w * 64; i < w * 64 + 64 && i < fs->bs * 8u; i++) {
			bool ob = bit_get(b->old, i), nbit = bit_get(b->new, i);
			if (ob == nbit)
				continue;
			if (i >= nb) {
				if (ob && !nbit)
					chk_txn_problem(t, INV_BITMAP_PADDING, SIZE_MAX,
						    "group %u: block bitmap padding bit %llu cleared", g, (unsigned long long)i);
				continue;
			}
			uint64_t blk = start + i;
			size_t r = chk_verdict_add_record(t->v, CHK_BBITMAP, blk, "-", ob, nbit);
			struct gtouch *gt = chk_txn_group(t, g);
			if (gt)
				gt->bflip += nbit ? 1 : -1;
			struct bchange *c = bch_get(fs, t, blk);
			if (c)
				c->flip_rec = r;
		}
	}
	/* the padding words past the group (last group only) */
	for (uint64_t i = nb; i < fs->bs * 8u; i++)
		if (bit_get(b->old, i) && !bit_get(b->new, i)) {
			chk_txn_problem(t, INV_BITMAP_PADDING, SIZE_MAX,
				    "group %u: block bitmap padding bit %llu cleared", g, (unsigned long long)i);
			break;
		}
}

static void diff_ibitmap(struct chk_fs *fs, struct txn *t, uint32_t g, struct tblock *b)
{
	for (uint32_t i = 0; i < fs->ipg; i++) {
		bool ob = bit_get(b->old, i), nbit = bit_get(b->new, i);
		if (ob == nbit)
			continue;
		uint32_t ino = g * fs->ipg + i + 1;
		size_t r = chk_verdict_add_record(t->v, CHK_IBITMAP, ino, "-", ob, nbit);
		struct gtouch *gt = chk_txn_group(t, g);
		if (gt)
			gt->iflip += nbit ? 1 : -1;
		struct ichange *ic = chk_txn_inode(fs, t, ino);
		if (ic) {
			ic->bit_rec = r;
			chk_ich_add_rec(ic, r);
		}
	}
	for (uint32_t i = fs->ipg; i < fs->bs * 8u; i++)
		if (bit_get(b->old, i) && !bit_get(b->new, i)) {
			chk_txn_problem(t, INV_BITMAP_PADDING, SIZE_MAX, "group %u: inode bitmap padding bit %u cleared", g, i);
			break;
		}
}

/* ------------------------------------------------------------ inodes */

#define INF(f) { #f, offsetof(struct ext2_inode_large, f), sizeof(((struct ext2_inode_large *)0)->f), 1, 0 }
#define INFN(n, f) { n, offsetof(struct ext2_inode_large, f), sizeof(((struct ext2_inode_large *)0)->f), 1, 0 }
static const struct field inode_fields[] = {
	INF(i_mode), INF(i_uid), INF(i_size), INF(i_atime), INF(i_ctime), INF(i_mtime),
	INF(i_dtime), INF(i_gid), INF(i_links_count), INF(i_blocks), INF(i_flags),
	INFN("l_i_version", osd1),
	INFN("i_block[0]", i_block[0]), INFN("i_block[1]", i_block[1]), INFN("i_block[2]", i_block[2]),
	INFN("i_block[3]", i_block[3]), INFN("i_block[4]", i_block[4]), INFN("i_block[5]", i_block[5]),
	INFN("i_block[6]", i_block[6]), INFN("i_block[7]", i_block[7]), INFN("i_block[8]", i_block[8]),
	INFN("i_block[9]", i_block[9]), INFN("i_block[10]", i_block[10]), INFN("i_block[11]", i_block[11]),
	INFN("i_block[12]", i_block[12]), INFN("i_block[13]", i_block[13]), INFN("i_block[14]", i_block[14]),
	INF(i_generation), INF(i_file_acl), INF(i_size_high), INF(i_faddr),
	INFN("l_i_blocks_hi", osd2.linux2.l_i_blocks_hi), INFN("l_i_file_acl_high", osd2.linux2.l_i_file_acl_high),
	INFN("l_i_uid_high", osd2.linux2.l_i_uid_high), INFN("l_i_gid_high", osd2.linux2.l_i_gid_high),
	INFN("l_i_checksum_lo", osd2.linux2.l_i_checksum_lo), INFN("l_i_reserved", osd2.linux2.l_i_reserved),
	/* large inodes */
	INF(i_extra_isize), INF(i_checksum_hi), INF(i_ctime_extra), INF(i_mtime_extra),
	INF(i_atime_extra), INF(i_crtime), INF(i_crtime_extra), INF(i_version_hi), INF(i_projid),
};
#define NINODE_FIELDS (sizeof(inode_fields) / sizeof(inode_fields[0]))
#define IFIELD_BLOCK0 12   /* index of i_block[0] in inode_fields */

static void diff_inode(struct chk_fs *fs, struct txn *t, struct ichange *ic)
{
	const uint8_t *o = ic->old, *n = ic->new;
	for (size_t i = 0; i < NINODE_FIELDS; i++) {
		const struct field *f = &inode_fields[i];
		if ((size_t)f->off + f->size > fs->inode_size)
			break;
		if (!memcmp(o + f->off, n + f->off, f->size))
			continue;
		size_t r = chk_verdict_add_record(t->v, CHK_INODE, ic->ino, f->name,
					      get_le(o + f->off, f->size), get_le(n + f->off, f->size));
		chk_ich_add_rec(ic, r);
		if (i >= IFIELD_BLOCK0 && i < IFIELD_BLOCK0 + 15)
			ic->ptr_rec[i - IFIELD_BLOCK0] = r;
		if (f->off == offsetof(struct ext2_inode, i_file_acl))
			ic->ptr_rec[15] = r;
	}
}

static void diff_itable(struct chk_fs *fs, struct txn *t, struct tblock *b)
{
	uint32_t idx, g = chk_layout_group(fs, b->blk, BT_ITABLE, &idx);
	uint32_t used = chk_txn_used_inodes(fs, t, g);
	for (uint32_t k = 0; k < fs->inodes_per_block; k++) {
		uint32_t slot = idx * fs->inodes_per_block + k;
		if (slot >= used)
			break;          /* not initialised: not an inode yet */
		if (!memcmp(b->old + k * fs->inode_size, b->new + k * fs->inode_size, fs->inode_size))
			continue;
		struct ichange *ic = chk_txn_inode(fs, t, g * fs->ipg + slot + 1);
		if (ic)
			diff_inode(fs, t, ic);
	}
}

/* ------------------------------------------------------------ pointers */

/* Whether the inode's i_block holds pointers we model, in one state. */
bool chk_walkable(struct chk_fs *fs, uint32_t ino, const struct ext2_inode *in, bool inuse)
{
	return inuse && chk_inode_walkable(fs, ino, in);
}

static void remove_ptr(struct chk_fs *fs, struct txn *t, uint64_t blk, int level, uint8_t type,
		       struct ichange *ic, size_t rec, uint8_t *bufs)
{
	struct bchange *c = bch_get(fs, t, blk);
	if (!c)
		return;
	c->removes++;
	if (type == BT_XATTR)
		c->xremoves++;
	if (c->rec == SIZE_MAX)
		c->rec = rec;
	if (blk >= fs->blocks_count)
		return;
	bool mine = chk_btype(fs, blk) == type && chk_bowner(fs, blk) == ic->ino;
	if (mine && type != BT_XATTR) {
		if (bt_map_meta(type))
			ic->nmeta_delta--;
		else
			ic->ndata_delta--;
	}
	/* its old subtree is released once (a block has one pointer in the
	 * approved state; a second removal would count its children twice) */
	if (level == 0 || !mine || c->removes > 1)
		return;
	/* d stays put while the levels below use the next buffers */
	const uint8_t *d = chk_txn_old_block(fs, t, blk, bufs);
	if (!d)
		return;
	uint32_t p0 = chk_ld32(d);
	uint8_t ct = level == 3 ? BT_DIND : level == 2 ? BT_IND :
		     (chk_btype(fs, blk) == BT_IND && p0 && p0 < fs->blocks_count ? chk_btype(fs, p0) : BT_DATA);
	for (uint32_t i = 0; i < fs->addr_per_block; i++) {
		uint32_t p = chk_ld32(d + 4 * (size_t)i);
		if (!p)
			continue;
		uint8_t cti = ct;
		if (level == 1 && p < fs->blocks_count && chk_bowner(fs, p) == ic->ino &&
		    (chk_btype(fs, p) == BT_DIR || chk_btype(fs, p) == BT_DATA))
			cti = chk_btype(fs, p);
		remove_ptr(fs, t, p, level - 1, cti, ic, rec, bufs + fs->bs);
	}
}

static void add_ptr(struct chk_fs *fs, struct txn *t, uint64_t blk, int level, uint8_t type,
		    uint32_t lblk, struct ichange *ic, bool isdir, size_t rec, uint8_t *bufs)
{
	struct bchange *c = bch_get(fs, t, blk);
	if (!c)
		return;
	c->adds++;
	if (type == BT_XATTR)
		c->xadds++;
	c->new_type = type;
	c->new_owner = ic->ino;
	c->new_lblk = lblk;
	if (c->rec == SIZE_MAX || c->removes)
		c->rec = rec;
	if (type != BT_XATTR) {
		if (bt_map_meta(type))
			ic->nmeta_delta++;
		else
			ic->ndata_delta++;
	}
	if (level == 0 || c->adds > 1 || blk < fs->first_data_block || blk >= fs->blocks_count ||
	    bt_static(chk_btype(fs, blk)))
		return;
	const uint8_t *d = chk_txn_new_block(fs, t, blk, bufs);
	if (!d)
		return;
	uint64_t span = 1;
	for (int i = 1; i < level; i++)
		span *= fs->addr_per_block;
	uint8_t ct = level == 3 ? BT_DIND : level == 2 ? BT_IND : isdir ? BT_DIR : BT_DATA;
	for (uint32_t i = 0; i < fs->addr_per_block; i++) {
		uint32_t p = chk_ld32(d + 4 * (size_t)i);
		if (p)
			add_ptr(fs, t, p, level - 1, ct, (uint32_t)(lblk + i * span), ic, isdir, rec,
				bufs + fs->bs);
	}
}

static uint8_t slot_type(int s, bool isdir)
{
	return s < 12 ? (isdir ? BT_DIR : BT_DATA) : s == 12 ? BT_IND : s == 13 ? BT_DIND : BT_TIND;
}

void chk_txn_ref_remove(struct chk_fs *fs, struct txn *t, uint64_t blk, uint8_t type, struct ichange *ic,
			size_t rec)
{
	remove_ptr(fs, t, blk, 0, type, ic, rec, NULL);
}

void chk_txn_ref_add(struct chk_fs *fs, struct txn *t, uint64_t blk, uint8_t type, uint32_t lblk,
		     struct ichange *ic, size_t rec, bool run)
{
	add_ptr(fs, t, blk, 0, type, lblk, ic, type == BT_DIR, rec, NULL);
	struct bchange *c = chk_txn_bch_find(t, blk);
	if (c)
		c->run = run;
}

/* An indirect tree's pointers (an extent tree is diff_extent.c's) and the
 * xattr block. */
static void diff_inode_ptrs(struct chk_fs *fs, struct txn *t, struct ichange *ic, uint8_t *bufs)
{
	const struct ext2_inode *o = (const void *)ic->old, *n = (const void *)ic->new;
	bool oh = chk_walkable(fs, ic->ino, o, ic->old_inuse) && !chk_inode_extent_mapped(fs, o);
	bool nh = chk_walkable(fs, ic->ino, n, ic->new_inuse) && !chk_inode_extent_mapped(fs, n);
	bool odir = imode_type(o) == 0040000, ndir = imode_type(n) == 0040000;
	uint32_t a = fs->addr_per_block;
	uint32_t bases[3] = { 12, 12 + a, 12 + a + a * a };
	if (oh || nh) {
		for (int s = 0; s < EXT2_N_BLOCKS; s++) {
			uint32_t op = oh ? o->i_block[s] : 0, np = nh ? n->i_block[s] : 0;
			if (op == np && (!op || odir == ndir))
				continue;
			size_t rec = ic->ptr_rec[s] != SIZE_MAX ? ic->ptr_rec[s] : ic->bit_rec;
			int level = s < 12 ? 0 : s - 11;
			if (op)
				remove_ptr(fs, t, op, level, slot_type(s, odir), ic, rec, bufs);
			if (np)
				add_ptr(fs, t, np, level, slot_type(s, ndir), s < 12 ? (uint32_t)s : bases[s - 12],
					ic, ndir, rec, bufs);
		}
	}
	bool oxa_ok = ic->old_inuse && ic->ino != EXT2_RESIZE_INO;
	bool nxa_ok = ic->new_inuse && ic->ino != EXT2_RESIZE_INO;
	uint64_t ox = oxa_ok ? chk_inode_file_acl(fs, o) : 0, nx = nxa_ok ? chk_inode_file_acl(fs, n) : 0;
	if (ox != nx) {
		size_t rec = ic->ptr_rec[15] != SIZE_MAX ? ic->ptr_rec[15] : ic->bit_rec;
		if (ox)
			remove_ptr(fs, t, ox, 0, BT_XATTR, ic, rec, bufs);
		if (nx)
			add_ptr(fs, t, nx, 0, BT_XATTR, 0, ic, false, rec, bufs);
	}
}

/* An indirect block that stays attached and whose slots changed. */
static void diff_ind_block(struct chk_fs *fs, struct txn *t, struct tblock *b, uint8_t *bufs)
{
	struct bchange *c = chk_txn_bch_find(t, b->blk);
	if (c && (c->removes || c->adds))
		return;                        /* detached or (re)attached: handled from the pointer */
	struct ichange *ic = chk_txn_inode(fs, t, chk_bowner(fs, b->blk));
	if (!ic)
		return;
	const struct ext2_inode *n = (const void *)ic->new;
	bool isdir = imode_type(n) == 0040000;
	int level = b->otype == BT_TIND ? 3 : b->otype == BT_DIND ? 2 : 1;
	uint64_t span = 1;
	for (int i = 1; i < level; i++)
		span *= fs->addr_per_block;
	uint32_t base = chk_blblk(fs, b->blk);
	const uint32_t *op = (const uint32_t *)b->old, *np = (const uint32_t *)b->new;
	uint8_t ct = level == 3 ? BT_DIND : level == 2 ? BT_IND : isdir ? BT_DIR : BT_DATA;
	for (uint32_t i = 0; i < fs->addr_per_block; i++) {
		if (op[i] == np[i])
			continue;
		size_t r = chk_verdict_add_record(t->v, CHK_IND, b->blk, chk_arena_indexed(&t->v->strings, "", i),
					      op[i], np[i]);
		chk_ich_add_rec(ic, r);
		if (op[i]) {
			uint8_t ot = ct;
			if (level == 1 && op[i] < fs->blocks_count && chk_bowner(fs, op[i]) == ic->ino)
				ot = chk_btype(fs, op[i]);
			remove_ptr(fs, t, op[i], level - 1, ot, ic, r, bufs);
		}
		if (np[i])
			add_ptr(fs, t, np[i], level - 1, ct, (uint32_t)(base + i * span), ic, isdir, r, bufs);
	}
}

/* ------------------------------------------------------------ xattr */

static void diff_xattr(struct chk_fs *fs, struct txn *t, uint64_t blk, bool was, bool is, uint8_t *buf)
{
	static const struct ext2_ext_attr_header zero;
	const struct ext2_ext_attr_header *o = &zero, *n = &zero;
	struct ext2_ext_attr_header oh, nh;
	if (was) {
		const uint8_t *d = chk_txn_old_block(fs, t, blk, buf);
		if (!d)
			return;
		memcpy(&oh, d, sizeof(oh));
		o = &oh;
	}
	if (is) {
		const uint8_t *d = chk_txn_new_block(fs, t, blk, buf);
		if (!d)
			return;
		memcpy(&nh, d, sizeof(nh));
		n = &nh;
	}
	struct bchange *c = chk_txn_bch_find(t, blk);
	if (c)
		c->xattr_old_refs = was ? (int64_t)o->h_refcount : 0;
	if (!is)
		return;
	if (o->h_magic != n->h_magic)
		chk_verdict_add_record(t->v, CHK_XATTR, blk, "h_magic", o->h_magic, n->h_magic);
	if (o->h_refcount != n->h_refcount) {
		size_t r = chk_verdict_add_record(t->v, CHK_XATTR, blk, "h_refcount", o->h_refcount, n->h_refcount);
		if (c && c->rec == SIZE_MAX)
			c->rec = r;
	}
	if (o->h_blocks != n->h_blocks)
		chk_verdict_add_record(t->v, CHK_XATTR, blk, "h_blocks", o->h_blocks, n->h_blocks);
	if (o->h_hash != n->h_hash)
		chk_verdict_add_record(t->v, CHK_XATTR, blk, "h_hash", o->h_hash, n->h_hash);
}

/* ------------------------------------------------------------ orphans */

bool chk_txn_is_orphan(struct chk_fs *fs, struct txn *t, uint32_t ino)
{
	if (!t->orphans_done) {
		t->orphans_done = true;
		const struct ext2_super_block *sb = (const void *)(t->sb_changed ? t->sb_new : fs->sb_raw);
		uint32_t cur = sb->s_last_orphan;
		for (uint32_t steps = 0; cur; steps++) {
			if (cur > fs->inodes_count || cur < fs->first_ino || steps > fs->inodes_count ||
			    chk_u64map_get(&t->orphans, cur, NULL)) {
				t->orphan_loop = 1;
				break;
			}
			struct ichange *ic = chk_txn_inode(fs, t, cur);
			if (!ic || !ic->new_inuse) {
				t->orphan_loop = 1;
				break;
			}
			if (chk_u64map_put(&t->orphans, cur, 1))
				break;
			cur = ((const struct ext2_inode *)ic->new)->i_dtime;
		}
	}
	if (!t->ofile_done) {
		t->ofile_done = true;
		chk_txn_orphan_file(fs, t);
	}
	return chk_u64map_get(&t->orphans, ino, NULL);
}

/* ------------------------------------------------------------ entry point */

static void classify_and_diff(struct chk_fs *fs, struct txn *t)
{
	uint8_t *bufs = malloc((size_t)fs->bs * 5);
	if (!bufs) {
		t->err = -ENOMEM;
		return;
	}
	/* superblock (primary) */
	struct tblock *sbb = chk_tb_find(t, fs->sb_blk);
	memcpy(t->sb_old, fs->sb_raw, 1024);
	memcpy(t->sb_new, fs->sb_raw, 1024);
	if (sbb && sbb->changed) {
		memcpy(t->sb_new, sbb->new + fs->sb_off, 1024);
		t->sb_changed = memcmp(t->sb_old, t->sb_new, 1024) != 0;
		if (t->sb_changed && diff_sb(t, t->sb_old, t->sb_new, true))
			chk_txn_problem(t, INV_SB_FROZEN, SIZE_MAX, "the superblock's reserved tail changed");
		if (fs->sb_off && memcmp(sbb->old, sbb->new, fs->sb_off))
			chk_txn_problem(t, INV_STATIC_FROZEN, SIZE_MAX, "block 0's boot area (before the superblock) changed");
		if (fs->sb_off + 1024 < fs->bs &&
		    memcmp(sbb->old + fs->sb_off + 1024, sbb->new + fs->sb_off + 1024, fs->bs - fs->sb_off - 1024))
			chk_txn_problem(t, INV_STATIC_FROZEN, SIZE_MAX, "block 0 after the superblock changed");
	}
	diff_gdt(fs, t);
	for (size_t i = 0; i < t->nblocks; i++) {
		struct tblock *b = &t->blocks[i];
		if (!b->changed || b->blk >= fs->blocks_count)
			continue;
		uint32_t g;
		switch (b->otype) {
		case BT_BBITMAP:
			g = chk_layout_group(fs, b->blk, BT_BBITMAP, NULL);
			diff_bbitmap(fs, t, g, b);
			break;
		case BT_IBITMAP:
			g = chk_layout_group(fs, b->blk, BT_IBITMAP, NULL);
			diff_ibitmap(fs, t, g, b);
			break;
		case BT_SB:
			if (b->blk != fs->sb_blk &&
			    diff_sb(t, b->old + (b->blk == 0 ? 1024 : 0), b->new + (b->blk == 0 ? 1024 : 0), false))
				chk_txn_problem(t, INV_BACKUP_COPIES, SIZE_MAX, "backup superblock %llu: reserved tail changed",
					    (unsigned long long)b->blk);
			break;
		case BT_GDT:
			if (chk_gdt_block_index(fs, b->blk) == UINT32_MAX)
				check_backup_gdt(fs, t, b);
			break;
		case BT_RGDT: case BT_RESIZE_IND: case BT_BOOT:
			chk_txn_problem(t, INV_STATIC_FROZEN, SIZE_MAX, "%s block %llu changed",
				    b->otype == BT_BOOT ? "boot" : b->otype == BT_RGDT ? "reserved GDT" : "resize inode",
				    (unsigned long long)b->blk);
			break;
		default:
			break;
		}
	}
	/* inode tables after the bitmaps (ichanges then know their new bit) */
	for (size_t i = 0; i < t->nblocks; i++)
		if (t->blocks[i].changed && t->blocks[i].blk < fs->blocks_count && t->blocks[i].otype == BT_ITABLE)
			diff_itable(fs, t, &t->blocks[i]);
	/* pointers from inodes (extent trees walked whole), then from
	 * indirect blocks that stay attached */
	for (size_t i = 0; i < t->nich; i++)
		diff_inode_ptrs(fs, t, t->ich[i], bufs);
	chk_diff_extents(fs, t);
	/* Top level first: a parent that drops a child indirect block releases
	 * the child's old subtree and marks the child detached, so the child's
	 * own rewrite (zeroed before it is freed) is then not counted again.
	 * The order of the transaction's blocks must not matter. */
	static const uint8_t levels[] = { BT_TIND, BT_DIND, BT_IND };
	for (size_t l = 0; l < sizeof(levels); l++)
		for (size_t i = 0; i < t->nblocks; i++)
			if (t->blocks[i].changed && t->blocks[i].otype == levels[l])
				diff_ind_block(fs, t, &t->blocks[i], bufs);
	/* xattr blocks: written, or attached / detached */
	for (size_t i = 0; i < t->nblocks; i++) {
		struct tblock *b = &t->blocks[i];
		if (b->changed && b->otype == BT_XATTR && !chk_txn_bch_find(t, b->blk)) {
			struct bchange *c = bch_get(fs, t, b->blk);   /* content change: track */
			(void)c;
		}
	}
	for (size_t i = 0; i < t->nbch; i++) {
		struct bchange *c = t->bch[i];
		bool was = c->old_type == BT_XATTR, is = c->adds ? c->new_type == BT_XATTR : c->old_type == BT_XATTR;
		if (was || is)
			diff_xattr(fs, t, c->blk, was, is, bufs);
	}
	chk_diff_dirs(fs, t, bufs);
	struct u64map walk = { 0 };
	chk_diff_htree(fs, t, bufs, &walk);
	chk_check_new_index_flags(fs, t, &walk);
	chk_walk_indexes(fs, t, &walk);
	chk_u64map_free(&walk);
	free(bufs);
}

/* At most this many written blocks are made room for up front (a
 * transaction the journal can hold is far smaller); past it the map grows. */
#define WRITTEN_RESERVE_MAX ((size_t)1 << 20)

int chk_check(struct chk_fs *fs, const struct chk_write *w, size_t n, struct chk_verdict **out)
{
	uint64_t t0 = chk_thread_ns();
	*out = NULL;
	struct chk_verdict *v = chk_verdict_new();
	struct txn *t = calloc(1, sizeof(*t));
	if (!v || !t) {
		free(v);
		free(t);
		return -ENOMEM;
	}
	v->txn = t;
	t->v = v;
	t->block_alloc = 2 * (size_t)fs->bs;
	t->ichange_alloc = sizeof(struct ichange) + 2 * (size_t)fs->inode_size;
	/* without a pool (out of memory) every buffer is malloc'd and freed */
	if (!fs->pool)
		fs->pool = chk_pool_new(fs->bs, t->ichange_alloc);
	t->pool = chk_pool_ref(fs->pool);
	v->recs = chk_pool_take_recs(t->pool, &v->caprecs);
	t->ngdb = fs->gdt_blocks;
	t->gdb_new = calloc(fs->gdt_blocks ? fs->gdt_blocks : 1, sizeof(*t->gdb_new));
	if (!t->gdb_new) {
		chk_verdict_free(v);
		return -ENOMEM;
	}
	uint64_t dev_bytes = (uint64_t)fs->blocks_count * fs->bs;
	/* the map of written blocks sized once for all of them, rather than
	 * doubled (and rehashed) through every size on the way */
	uint64_t nblk = 0;
	for (size_t i = 0; i < n && nblk < WRITTEN_RESERVE_MAX; i++)
		if (w[i].len && w[i].offset <= dev_bytes && w[i].len <= dev_bytes - w[i].offset)
			nblk += (w[i].offset + w[i].len - 1) / fs->bs - w[i].offset / fs->bs + 1;
	if (chk_u64map_reserve(&t->bidx, nblk < WRITTEN_RESERVE_MAX ? (size_t)nblk : WRITTEN_RESERVE_MAX))
		t->err = -ENOMEM;
	for (size_t i = 0; i < n && !t->err; i++) {
		if (!w[i].len)
			continue;
		if (w[i].offset > dev_bytes || w[i].len > dev_bytes - w[i].offset) {     /* (no u64 wrap) */
			chk_txn_problem(t, INV_PTR_IN_RANGE, SIZE_MAX, "write at byte %llu past the end of the file system",
				    (unsigned long long)w[i].offset);
			continue;
		}
		const uint8_t *src = w[i].data;
		uint64_t off = w[i].offset, end = off + w[i].len;
		while (off < end) {
			uint64_t blk = off / fs->bs, boff = off % fs->bs;
			uint64_t len = fs->bs - boff < end - off ? fs->bs - boff : end - off;
			struct tblock *b = tb_get(fs, t, blk, boff == 0 && len == fs->bs);
			if (!b) {
				if (!t->err)
					t->err = -ENOMEM;
				break;
			}
			memcpy(b->new + boff, src, len);
			src += len;
			off += len;
		}
	}
	for (size_t i = 0; i < t->nblocks && !t->err; i++) {
		t->blocks[i].changed = !t->blocks[i].old ||
				       memcmp(t->blocks[i].old, t->blocks[i].new, fs->bs) != 0;
		if (t->blocks[i].changed)
			fs->stats.blocks_checked++;
	}
	if (!t->err)
		classify_and_diff(fs, t);
	/* a record lost to memory leaves SIZE_MAX where the invariants expect
	 * an index: judging an incomplete diff could only mislead */
	if (!t->err && !chk_verdict_oom(v))
		chk_run_invariants(fs, t, v);
	int err = t->err ? t->err : chk_verdict_oom(v) ? -ENOMEM : 0;
	fs->stats.transactions++;
	if (err) {
		chk_verdict_free(v);
		fs->stats.cpu_ns += chk_thread_ns() - t0;
		return err;
	}
	if (!chk_verdict_ok(v))
		fs->stats.violations++;
	fs->stats.cpu_ns += chk_thread_ns() - t0;
	*out = v;
	return 0;
}
