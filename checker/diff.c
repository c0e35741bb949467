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
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ext2fs/ext2fs.h>

#include "chk_internal.h"

/* ------------------------------------------------------------ containers */

static void *grow(void *arr, size_t *cap, size_t need, size_t elem)
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

static struct tblock *tb_find(struct txn *t, uint64_t blk)
{
	uint32_t i;
	return chk_u64map_get(&t->bidx, blk, &i) ? &t->blocks[i] : NULL;
}

/* `full`: the write covers the whole block.  The approved contents of a
 * free or data block are then never needed (data is not diffed), so the
 * read is skipped: a data write costs no device read. */
static struct tblock *tb_get(struct chk_fs *fs, struct txn *t, uint64_t blk, bool full)
{
	struct tblock *b = tb_find(t, blk);
	if (b)
		return b;
	struct tblock *nb = grow(t->blocks, &t->capblocks, t->nblocks + 1, sizeof(*nb));
	if (!nb)
		return NULL;
	t->blocks = nb;
	b = &t->blocks[t->nblocks];
	memset(b, 0, sizeof(*b));
	b->blk = blk;
	b->otype = blk < fs->blocks_count ? fs->btype[blk] : BT_FREE;
	bool skip_old = full && (b->otype == BT_FREE || b->otype == BT_DATA);
	b->old = skip_old ? NULL : malloc(fs->bs);
	b->new = malloc(fs->bs);
	if ((!skip_old && !b->old) || !b->new || chk_u64map_put(&t->bidx, blk, (uint32_t)t->nblocks)) {
		free(b->old);
		free(b->new);
		return NULL;
	}
	if (!skip_old) {
		int r = chk_read_block(fs, blk, b->old);
		if (r) {
			free(b->old);
			free(b->new);
			chk_u64map_del(&t->bidx, blk);
			t->err = r;
			return NULL;
		}
		memcpy(b->new, b->old, fs->bs);
	}
	t->nblocks++;
	return b;
}

const uint8_t *chk_txn_new_block(struct chk_fs *fs, struct txn *t, uint64_t blk, uint8_t *buf)
{
	struct tblock *b = tb_find(t, blk);
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
	struct tblock *b = tb_find(t, blk);
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
	struct tblock *b = tb_find(t, fs->gd[g].bg_block_bitmap);
	if (b)
		return bit_get(b->new, blk - fs->first_data_block - (uint64_t)g * fs->bpg);
	return bit_get(fs->bbits, blk);
}

bool chk_txn_ibit_new(struct chk_fs *fs, struct txn *t, uint32_t ino)
{
	if (ino == 0 || ino > fs->inodes_count)
		return false;
	uint32_t g = chk_group_of_inode(fs, ino);
	struct tblock *b = tb_find(t, fs->gd[g].bg_inode_bitmap);
	if (b)
		return bit_get(b->new, (ino - 1) % fs->ipg);
	return bit_get(fs->ibits, ino);
}

struct ichange *chk_txn_inode(struct chk_fs *fs, struct txn *t, uint32_t ino)
{
	uint32_t i;
	if (ino == 0 || ino > fs->inodes_count)
		return NULL;
	if (chk_u64map_get(&t->ichidx, ino, &i))
		return t->ich[i];
	struct ichange **na = grow(t->ich, &t->capich, t->nich + 1, sizeof(*na));
	if (!na)
		goto oom;
	t->ich = na;
	struct ichange *ic = calloc(1, sizeof(*ic));
	if (!ic)
		goto oom;
	ic->ino = ino;
	ic->old = malloc(fs->inode_size);
	ic->new = malloc(fs->inode_size);
	if (!ic->old || !ic->new || chk_u64map_put(&t->ichidx, ino, (uint32_t)t->nich)) {
		free(ic->old);
		free(ic->new);
		free(ic);
		goto oom;
	}
	int r = chk_read_inode(fs, ino, ic->old);
	if (r) {
		t->err = r;
		memset(ic->old, 0, fs->inode_size);
	}
	uint32_t g = chk_group_of_inode(fs, ino), idx = (ino - 1) % fs->ipg;
	struct tblock *b = tb_find(t, fs->gd[g].bg_inode_table + idx / fs->inodes_per_block);
	if (b)
		memcpy(ic->new, b->new + (idx % fs->inodes_per_block) * fs->inode_size, fs->inode_size);
	else
		memcpy(ic->new, ic->old, fs->inode_size);
	ic->written = memcmp(ic->old, ic->new, fs->inode_size) != 0;
	const struct ext2_inode *o = (const void *)ic->old, *n = (const void *)ic->new;
	ic->old_inuse = bit_get(fs->ibits, ino);
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
	size_t *n = grow(ic->recs, &ic->caprecs, ic->nrecs + 1, sizeof(*n));
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
	struct bchange **na = grow(t->bch, &t->capbch, t->nbch + 1, sizeof(*na));
	if (!na)
		goto oom;
	t->bch = na;
	c = calloc(1, sizeof(*c));
	if (!c || chk_u64map_put(&t->bchidx, blk, (uint32_t)t->nbch)) {
		free(c);
		goto oom;
	}
	c->blk = blk;
	c->old_type = blk < fs->blocks_count ? fs->btype[blk] : BT_FREE;
	c->old_owner = blk < fs->blocks_count ? fs->bowner[blk] : 0;
	c->new_type = c->old_type;
	c->new_owner = c->old_owner;
	c->new_lblk = blk < fs->blocks_count ? fs->blblk[blk] : 0;
	c->rec = c->flip_rec = SIZE_MAX;
	c->xattr_old_refs = -1;
	t->bch[t->nbch++] = c;
	return c;
oom:
	t->err = -ENOMEM;
	return NULL;
}

void chk_txn_problem(struct txn *t, const char *inv, size_t rec, const char *fmt, ...)
{
	if (t->nprobs >= 2000)
		return;
	struct tproblem *np = grow(t->probs, &t->capprobs, t->nprobs + 1, sizeof(*np));
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
	for (size_t i = 0; i < t->nblocks; i++) {
		free(t->blocks[i].old);
		free(t->blocks[i].new);
	}
	free(t->blocks);
	chk_u64map_free(&t->bidx);
	for (size_t i = 0; i < t->nbch; i++)
		free(t->bch[i]);
	free(t->bch);
	chk_u64map_free(&t->bchidx);
	for (size_t i = 0; i < t->nich; i++) {
		free(t->ich[i]->old);
		free(t->ich[i]->new);
		free(t->ich[i]->recs);
		free(t->ich[i]);
	}
	free(t->ich);
	chk_u64map_free(&t->ichidx);
	free(t->dch);
	free(t->probs);
	free(t->gd_new);
	free(t->gd_changed);
	free(t->gd_recs);
	free(t->bflip_delta);
	free(t->iflip_delta);
	free(t->dirs_delta);
	free(t->sb_recs);
	chk_u64map_free(&t->orphans);
	chk_u64map_free(&t->dirblks);
	free(t->dx);
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
 * (checked by INV_SB_FROZEN; counts, features and state have their own). */
static const struct field sb_fields[] = {
	SBF(s_inodes_count, 1), SBF(s_blocks_count, 1), SBF(s_r_blocks_count, 1),
	SBFC(s_free_blocks_count, 1, F_COUNT), SBFC(s_free_inodes_count, 1, F_COUNT),
	SBF(s_first_data_block, 1), SBF(s_log_block_size, 1), SBF(s_log_cluster_size, 1),
	SBF(s_blocks_per_group, 1), SBF(s_clusters_per_group, 1), SBF(s_inodes_per_group, 1),
	SBFC(s_mtime, 1, F_FREE), SBFC(s_wtime, 1, F_FREE), SBFC(s_mnt_count, 1, F_FREE),
	SBFC(s_max_mnt_count, 1, F_STATE), SBF(s_magic, 1), SBFC(s_state, 1, F_STATE), SBF(s_errors, 1),
	SBF(s_minor_rev_level, 1), SBFC(s_lastcheck, 1, F_FREE), SBF(s_checkinterval, 1),
	SBF(s_creator_os, 1), SBF(s_rev_level, 1), SBF(s_def_resuid, 1), SBF(s_def_resgid, 1),
	SBF(s_first_ino, 1), SBF(s_inode_size, 1), SBF(s_block_group_nr, 1),
	SBFC(s_feature_compat, 1, F_FEATURE), SBFC(s_feature_incompat, 1, F_FEATURE),
	SBFC(s_feature_ro_compat, 1, F_FEATURE), SBF(s_uuid, 16), SBF(s_volume_name, 16),
	SBFC(s_last_mounted, 64, F_FREE), SBF(s_algorithm_usage_bitmap, 1),
	SBF(s_prealloc_blocks, 1), SBF(s_prealloc_dir_blocks, 1), SBF(s_reserved_gdt_blocks, 1),
	SBF(s_journal_uuid, 16), SBF(s_journal_inum, 1), SBF(s_journal_dev, 1),
	SBFC(s_last_orphan, 1, F_FREE), SBF(s_hash_seed, 4), SBF(s_def_hash_version, 1),
	SBF(s_jnl_backup_type, 1), SBF(s_desc_size, 1), SBF(s_default_mount_opts, 1),
	SBF(s_first_meta_bg, 1), SBF(s_mkfs_time, 1), SBF(s_jnl_blocks, 17),
	SBF(s_blocks_count_hi, 1), SBF(s_r_blocks_count_hi, 1), SBF(s_free_blocks_hi, 1),
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
	size_t *n = grow(t->sb_recs, &t->capsb_recs, t->nsb_recs + 1, sizeof(*n));
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
			if (!primary && (f->cls != F_FROZEN || !strcmp(f->name, "s_block_group_nr")))
				continue;
			const char *name = f->count > 1 ? chk_arena_printf(&t->v->strings, "%s[%u]", f->name, k) : f->name;
			size_t r = chk_verdict_add_record(t->v, CHK_SB, 0, name, get_le(po, f->size), get_le(pn, f->size));
			if (primary)
				sb_add_rec(t, r);
			else
				chk_txn_problem(t, "INV_BACKUP_COPIES", r, "a backup superblock's frozen field %s changed", name);
		}
		if ((size_t)f->off + (size_t)f->size * f->count > end)
			end = (size_t)f->off + (size_t)f->size * f->count;
	}
	return memcmp(o + end, n + end, 1024 - end) != 0;
}

/* ------------------------------------------------------------ descriptors */

#define GDF(f) { #f, offsetof(struct ext2_group_desc, f), sizeof(((struct ext2_group_desc *)0)->f), 1, 0 }
static const struct field gd_fields[] = {
	GDF(bg_block_bitmap), GDF(bg_inode_bitmap), GDF(bg_inode_table),
	GDF(bg_free_blocks_count), GDF(bg_free_inodes_count), GDF(bg_used_dirs_count),
	GDF(bg_flags), GDF(bg_exclude_bitmap_lo), GDF(bg_block_bitmap_csum_lo),
	GDF(bg_inode_bitmap_csum_lo), GDF(bg_itable_unused), GDF(bg_checksum),
};

static void diff_gdt(struct chk_fs *fs, struct txn *t)
{
	for (uint32_t i = 0; i < fs->gdt_blocks; i++) {
		struct tblock *b = tb_find(t, fs->first_data_block + 1 + i);
		if (b && b->changed)
			memcpy((uint8_t *)t->gd_new + (size_t)i * fs->bs, b->new, fs->bs);
	}
	for (uint32_t g = 0; g < fs->ngroups; g++) {
		const uint8_t *o = (const void *)&fs->gd[g], *n = (const void *)&t->gd_new[g];
		if (!memcmp(o, n, sizeof(struct ext2_group_desc)))
			continue;
		t->gd_changed[g] = true;
		for (size_t i = 0; i < sizeof(gd_fields) / sizeof(gd_fields[0]); i++) {
			const struct field *f = &gd_fields[i];
			if (memcmp(o + f->off, n + f->off, f->size)) {
				size_t r = chk_verdict_add_record(t->v, CHK_BGD, g, f->name,
							      get_le(o + f->off, f->size), get_le(n + f->off, f->size));
				if (t->gd_recs[g] == SIZE_MAX)
					t->gd_recs[g] = r;
			}
		}
	}
}

/* backup descriptor blocks: only the locations are checked (libext2fs
 * rewrites backups with current counters; the kernel leaves them stale) */
static void check_backup_gdt(struct chk_fs *fs, struct txn *t, struct tblock *b)
{
	const struct ext2_group_desc *o = (const void *)b->old, *n = (const void *)b->new;
	for (uint32_t i = 0; i < fs->desc_per_block; i++) {
		if (o[i].bg_block_bitmap != n[i].bg_block_bitmap || o[i].bg_inode_bitmap != n[i].bg_inode_bitmap ||
		    o[i].bg_inode_table != n[i].bg_inode_table)
			chk_txn_problem(t, "INV_BACKUP_COPIES", SIZE_MAX,
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
					chk_txn_problem(t, "INV_BITMAP_PADDING", SIZE_MAX,
						    "group %u: block bitmap padding bit %llu cleared", g, (unsigned long long)i);
				continue;
			}
			uint64_t blk = start + i;
			size_t r = chk_verdict_add_record(t->v, CHK_BBITMAP, blk, "-", ob, nbit);
			t->bflip_delta[g] += nbit ? 1 : -1;
			struct bchange *c = bch_get(fs, t, blk);
			if (c)
				c->flip_rec = r;
		}
	}
	/* the padding words past the group (last group only) */
	for (uint64_t i = nb; i < fs->bs * 8u; i++)
		if (bit_get(b->old, i) && !bit_get(b->new, i)) {
			chk_txn_problem(t, "INV_BITMAP_PADDING", SIZE_MAX,
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
		t->iflip_delta[g] += nbit ? 1 : -1;
		struct ichange *ic = chk_txn_inode(fs, t, ino);
		if (ic) {
			ic->bit_rec = r;
			chk_ich_add_rec(ic, r);
		}
	}
	for (uint32_t i = fs->ipg; i < fs->bs * 8u; i++)
		if (bit_get(b->old, i) && !bit_get(b->new, i)) {
			chk_txn_problem(t, "INV_BITMAP_PADDING", SIZE_MAX, "group %u: inode bitmap padding bit %u cleared", g, i);
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
	uint32_t g = fs->bowner[b->blk], idx = fs->blblk[b->blk];
	for (uint32_t k = 0; k < fs->inodes_per_block; k++) {
		uint32_t slot = idx * fs->inodes_per_block + k;
		if (slot >= fs->ipg)
			break;
		if (!memcmp(b->old + k * fs->inode_size, b->new + k * fs->inode_size, fs->inode_size))
			continue;
		struct ichange *ic = chk_txn_inode(fs, t, g * fs->ipg + slot + 1);
		if (ic)
			diff_inode(fs, t, ic);
	}
}

/* ------------------------------------------------------------ pointers */

/* Whether the inode's i_block holds pointers we model, in one state. */
static bool walkable(struct chk_fs *fs, uint32_t ino, const struct ext2_inode *in, bool inuse)
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
	bool mine = fs->btype[blk] == type && fs->bowner[blk] == ic->ino;
	if (mine && type != BT_XATTR) {
		if (bt_indirect(type))
			ic->nmeta_delta--;
		else
			ic->ndata_delta--;
	}
	/* its old subtree is released once (a block has one pointer in the
	 * approved state; a second removal would count its children twice) */
	if (level == 0 || !mine || c->removes > 1)
		return;
	const uint8_t *d = chk_txn_old_block(fs, t, blk, bufs);
	if (!d)
		return;
	uint8_t copy[4096];
	memcpy(copy, d, fs->bs);
	const uint32_t *p = (const uint32_t *)copy;
	uint8_t ct = level == 3 ? BT_DIND : level == 2 ? BT_IND :
		     (fs->btype[blk] == BT_IND && p[0] && p[0] < fs->blocks_count ? fs->btype[p[0]] : BT_DATA);
	for (uint32_t i = 0; i < fs->addr_per_block; i++) {
		if (!p[i])
			continue;
		uint8_t cti = ct;
		if (level == 1 && p[i] < fs->blocks_count && fs->bowner[p[i]] == ic->ino &&
		    (fs->btype[p[i]] == BT_DIR || fs->btype[p[i]] == BT_DATA))
			cti = fs->btype[p[i]];
		remove_ptr(fs, t, p[i], level - 1, cti, ic, rec, bufs + fs->bs);
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
		if (bt_indirect(type))
			ic->nmeta_delta++;
		else
			ic->ndata_delta++;
	}
	if (level == 0 || c->adds > 1 || blk < fs->first_data_block || blk >= fs->blocks_count ||
	    bt_static(fs->btype[blk]))
		return;
	const uint8_t *d = chk_txn_new_block(fs, t, blk, bufs);
	if (!d)
		return;
	uint8_t copy[4096];
	memcpy(copy, d, fs->bs);
	const uint32_t *p = (const uint32_t *)copy;
	uint64_t span = 1;
	for (int i = 1; i < level; i++)
		span *= fs->addr_per_block;
	uint8_t ct = level == 3 ? BT_DIND : level == 2 ? BT_IND : isdir ? BT_DIR : BT_DATA;
	for (uint32_t i = 0; i < fs->addr_per_block; i++)
		if (p[i])
			add_ptr(fs, t, p[i], level - 1, ct, (uint32_t)(lblk + i * span), ic, isdir, rec,
				bufs + fs->bs);
}

static uint8_t slot_type(int s, bool isdir)
{
	return s < 12 ? (isdir ? BT_DIR : BT_DATA) : s == 12 ? BT_IND : s == 13 ? BT_DIND : BT_TIND;
}

static void diff_inode_ptrs(struct chk_fs *fs, struct txn *t, struct ichange *ic, uint8_t *bufs)
{
	const struct ext2_inode *o = (const void *)ic->old, *n = (const void *)ic->new;
	bool oh = walkable(fs, ic->ino, o, ic->old_inuse), nh = walkable(fs, ic->ino, n, ic->new_inuse);
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
	uint32_t ox = oxa_ok ? o->i_file_acl : 0, nx = nxa_ok ? n->i_file_acl : 0;
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
	struct ichange *ic = chk_txn_inode(fs, t, fs->bowner[b->blk]);
	if (!ic)
		return;
	const struct ext2_inode *n = (const void *)ic->new;
	bool isdir = imode_type(n) == 0040000;
	int level = b->otype == BT_TIND ? 3 : b->otype == BT_DIND ? 2 : 1;
	uint64_t span = 1;
	for (int i = 1; i < level; i++)
		span *= fs->addr_per_block;
	uint32_t base = fs->blblk[b->blk];
	const uint32_t *op = (const uint32_t *)b->old, *np = (const uint32_t *)b->new;
	uint8_t ct = level == 3 ? BT_DIND : level == 2 ? BT_IND : isdir ? BT_DIR : BT_DATA;
	for (uint32_t i = 0; i < fs->addr_per_block; i++) {
		if (op[i] == np[i])
			continue;
		size_t r = chk_verdict_add_record(t->v, CHK_IND, b->blk, chk_arena_printf(&t->v->strings, "[%u]", i),
					      op[i], np[i]);
		chk_ich_add_rec(ic, r);
		if (op[i]) {
			uint8_t ot = ct;
			if (level == 1 && op[i] < fs->blocks_count && fs->bowner[op[i]] == ic->ino)
				ot = fs->btype[op[i]];
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

/* ------------------------------------------------------------ directories */

void chk_dl_add(struct dent_list *l, uint32_t dir, uint32_t ino, const char *name, uint8_t nl,
		   uint8_t ft, uint8_t side, uint64_t blk)
{
	struct dent *ne = grow(l->e, &l->cap, l->n + 1, sizeof(*ne));
	char *nn = ne ? grow(l->names, &l->ncap, l->nlen + nl, 1) : NULL;
	if (!ne || !nn) {
		if (ne)
			l->e = ne;
		l->err = -ENOMEM;
		return;
	}
	l->e = ne;
	l->names = nn;
	memcpy(l->names + l->nlen, name, nl);
	l->e[l->n++] = (struct dent){ dir, ino, (uint32_t)l->nlen, nl, ft, side, blk };
	l->nlen += nl;
}

/* Parse a directory block. When `strict`, structural defects become
 * problems of the transaction (new side); the old side is trusted. */
void chk_parse_dir_block(struct chk_fs *fs, struct txn *t, const uint8_t *d, uint64_t blk,
			    uint32_t dir, uint32_t lblk, bool strict, uint8_t side, struct dent_list *l)
{
	uint32_t off = 0, idx = 0;
	while (off < fs->bs) {
		if (off + 8 > fs->bs) {
			if (strict)
				chk_txn_problem(t, "INV_DIRENT_TILING", SIZE_MAX,
					    "dir %u block %llu: entry header at %u crosses the block end", dir,
					    (unsigned long long)blk, off);
			return;
		}
		const struct dirent_hdr e = chk_dirent_at(d + off);
		const char *name = (const char *)d + off + 8;
		uint32_t rl = e.rec_len, nl = e.name_len;
		uint32_t need = (8 + nl + 3) & ~3u;
		if (rl < 8 || rl % 4 || off + rl > fs->bs || (e.inode && rl < need)) {
			if (strict)
				chk_txn_problem(t, "INV_DIRENT_TILING", SIZE_MAX,
					    "dir %u block %llu: entry at %u has rec_len %u name_len %u", dir,
					    (unsigned long long)blk, off, rl, nl);
			return;
		}
		if (e.inode) {
			bool dot = nl == 1 && name[0] == '.';
			bool dotdot = nl == 2 && name[0] == '.' && name[1] == '.';
			if (strict) {
				if (e.inode > fs->inodes_count)
					chk_txn_problem(t, "INV_DIRENT_NAME", SIZE_MAX,
						    "dir %u block %llu: entry at %u names inode %u past the end", dir,
						    (unsigned long long)blk, off, e.inode);
				if (nl == 0 || memchr(name, '/', nl) || memchr(name, 0, nl))
					chk_txn_problem(t, "INV_DIRENT_NAME", SIZE_MAX,
						    "dir %u block %llu: entry at %u has an empty or illegal name", dir,
						    (unsigned long long)blk, off);
				if ((dot || dotdot) && !(lblk == 0 && idx == (dot ? 0u : 1u)))
					chk_txn_problem(t, "INV_DIR_DOTS", SIZE_MAX,
						    "dir %u block %llu: '%s' entry at offset %u", dir,
						    (unsigned long long)blk, dot ? "." : "..", off);
				if ((dot && nl < rl - 8 && name[1]) || (dotdot && nl < rl - 8 && name[2]))
					chk_txn_problem(t, "INV_DIR_DOTS", SIZE_MAX,
						    "dir %u: '%s' entry is not NUL terminated", dir, dot ? "." : "..");
				if (lblk == 0 && idx == 0 && (!dot || e.inode != dir))
					chk_txn_problem(t, "INV_DIR_DOTS", SIZE_MAX,
						    "dir %u: first entry of block 0 is not '.' naming itself", dir);
				if (lblk == 0 && idx == 1 && !dotdot)
					chk_txn_problem(t, "INV_DIR_DOTS", SIZE_MAX,
						    "dir %u: second entry of block 0 is not '..'", dir);
			}
			if (e.inode <= fs->inodes_count)
				chk_dl_add(l, dir, e.inode, name, (uint8_t)nl, fs->filetype ? e.file_type : 0,
				       side, blk);
		} else if (strict && lblk == 0 && idx < 2) {
			chk_txn_problem(t, "INV_DIR_DOTS", SIZE_MAX, "dir %u: block 0 lacks '%s'", dir,
				    idx ? ".." : ".");
		}
		idx++;
		off += rl;
	}
}

static int dent_cmp(const void *a, const void *b, void *names)
{
	const struct dent *x = a, *y = b;
	if (x->dir != y->dir)
		return x->dir < y->dir ? -1 : 1;
	int c = memcmp((char *)names + x->name_off, (char *)names + y->name_off,
		       x->name_len < y->name_len ? x->name_len : y->name_len);
	if (c)
		return c;
	if (x->name_len != y->name_len)
		return x->name_len < y->name_len ? -1 : 1;
	if (x->side != y->side)
		return x->side < y->side ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

const char *chk_quote_name(struct txn *t, const char *n, unsigned len)
{
	char q[256 * 4 + 3];
	size_t k = 0;
	q[k++] = '"';
	for (unsigned i = 0; i < len; i++) {
		unsigned char c = (unsigned char)n[i];
		if (c == '"' || c == '\\') {
			q[k++] = '\\';
			q[k++] = (char)c;
		} else if (c == '\n') {
			q[k++] = '\\'; q[k++] = 'n';
		} else if (c == '\t') {
			q[k++] = '\\'; q[k++] = 't';
		} else if (c < 32 || c >= 127) {
			k += (size_t)snprintf(q + k, 5, "\\%03o", c);
		} else {
			q[k++] = (char)c;
		}
	}
	q[k++] = '"';
	q[k] = 0;
	return chk_arena_printf(&t->v->strings, "%s", q);
}

static void entry_effect(struct chk_fs *fs, struct txn *t, uint32_t ino, bool dotname, int d)
{
	struct ichange *ic = chk_txn_inode(fs, t, ino);
	if (!ic)
		return;
	ic->entry_delta += d;
	if (d < 0)
		ic->removed_entries -= d;
	if (!dotname) {
		ic->parent_delta += d;
		if (d < 0)
			ic->parent_removed++;
		else
			ic->parent_added++;
	}
}

static void emit_dchange(struct chk_fs *fs, struct txn *t, const struct dent *o, const struct dent *n,
			 const char *names)
{
	const struct dent *any = n ? n : o;
	const char *nm = names + any->name_off;
	bool dotname = (any->name_len == 1 && nm[0] == '.') ||
		       (any->name_len == 2 && nm[0] == '.' && nm[1] == '.');
	size_t r = chk_verdict_add_record(t->v, CHK_DIRENT, any->dir, chk_quote_name(t, nm, any->name_len),
				      o ? o->ino : 0, n ? n->ino : 0);
	if (o)
		entry_effect(fs, t, o->ino, dotname, -1);
	if (n)
		entry_effect(fs, t, n->ino, dotname, +1);
	struct ichange *dic = chk_txn_inode(fs, t, any->dir);
	if (dic)
		chk_ich_add_rec(dic, r);
	if (o) {
		struct ichange *x = chk_txn_inode(fs, t, o->ino);
		if (x)
			chk_ich_add_rec(x, r);
	}
	if (!n)
		return;
	struct ichange *x = chk_txn_inode(fs, t, n->ino);
	if (x)
		chk_ich_add_rec(x, r);
	struct dchange *nd = grow(t->dch, &t->capdch, t->ndch + 1, sizeof(*nd));
	if (!nd) {
		t->err = -ENOMEM;
		return;
	}
	t->dch = nd;
	struct dchange *c = &t->dch[t->ndch++];
	c->dir = n->dir;
	c->old_ino = o ? o->ino : 0;
	c->new_ino = n->ino;
	c->new_ft = n->ft;
	c->name_len = n->name_len;
	memcpy(c->name, nm, n->name_len);
	c->name[n->name_len] = 0;
	c->new_blk = n->blk;
	c->rec = r;
}

static void add_dirblk(struct txn *t, uint64_t blk)
{
	if (chk_u64map_put(&t->dirblks, blk, 1))
		t->err = -ENOMEM;
}

struct dir_collect { struct txn *t; };
static bool collect_visit(void *ctx, uint64_t blk, uint8_t type, uint32_t lblk)
{
	(void)lblk;
	if (type == BT_DIR)
		add_dirblk(((struct dir_collect *)ctx)->t, blk);
	return true;
}
static int get_old_cb(void *ctx, uint64_t blk, void *buf);
struct cb_ctx { struct chk_fs *fs; struct txn *t; };
static int get_old_cb(void *ctx, uint64_t blk, void *buf)
{
	struct cb_ctx *c = ctx;
	const uint8_t *d = chk_txn_old_block(c->fs, c->t, blk, buf);
	if (!d)
		return c->t->err ? c->t->err : -EIO;
	if (d != buf)
		memcpy(buf, d, c->fs->bs);
	return 0;
}
static int get_new_cb(void *ctx, uint64_t blk, void *buf)
{
	struct cb_ctx *c = ctx;
	const uint8_t *d = chk_txn_new_block(c->fs, c->t, blk, buf);
	if (!d)
		return c->t->err ? c->t->err : -EIO;
	if (d != buf)
		memcpy(buf, d, c->fs->bs);
	return 0;
}

/* new type/owner/lblk of a block after the transaction */
static uint8_t new_type_of(struct chk_fs *fs, struct txn *t, uint64_t blk, uint32_t *owner, uint32_t *lblk)
{
	struct bchange *c = chk_txn_bch_find(t, blk);
	if (c && c->adds) {
		*owner = c->new_owner;
		*lblk = c->new_lblk;
		return c->new_type;
	}
	if (c && c->removes)
		return BT_FREE;
	if (blk >= fs->blocks_count)
		return BT_FREE;
	*owner = fs->bowner[blk];
	*lblk = fs->blblk[blk];
	return fs->btype[blk];
}

static void diff_dirs(struct chk_fs *fs, struct txn *t, uint8_t *buf)
{
	/* blocks: written dir blocks, dir blocks that appear/disappear, and all
	 * blocks of directories whose liveness changes */
	for (size_t i = 0; i < t->nblocks; i++)
		if (t->blocks[i].changed && t->blocks[i].otype == BT_DIR)
			add_dirblk(t, t->blocks[i].blk);
	for (size_t i = 0; i < t->nbch; i++)
		if (t->bch[i]->old_type == BT_DIR || (t->bch[i]->adds && t->bch[i]->new_type == BT_DIR))
			add_dirblk(t, t->bch[i]->blk);
	size_t nich = t->nich;
	for (size_t i = 0; i < nich; i++) {
		struct ichange *ic = t->ich[i];
		const struct ext2_inode *o = (const void *)ic->old, *n = (const void *)ic->new;
		if (ic->old_live == ic->new_live)
			continue;
		struct dir_collect dc = { t };
		struct cb_ctx cc = { fs, t };
		if (ic->old_live && imode_type(o) == 0040000 && walkable(fs, ic->ino, o, true))
			chk_walk_inode_tree(fs, o, true, get_old_cb, &cc, collect_visit, &dc);
		if (ic->new_live && imode_type(n) == 0040000 && walkable(fs, ic->ino, n, true))
			chk_walk_inode_tree(fs, n, true, get_new_cb, &cc, collect_visit, &dc);
	}
	struct dent_list l = { 0 };
	for (size_t k = 0; k < t->dirblks.cap; k++) {
		if (!t->dirblks.keys[k])
			continue;
		uint64_t blk = t->dirblks.keys[k] - 1;
		if (blk >= fs->blocks_count)
			continue;
		if (fs->btype[blk] == BT_DIR) {
			struct ichange *ow = chk_txn_inode(fs, t, fs->bowner[blk]);
			if (ow && ow->old_live) {
				const uint8_t *d = chk_txn_old_block(fs, t, blk, buf);
				if (d)
					chk_parse_dir_block(fs, t, d, blk, ow->ino, fs->blblk[blk], false, 0, &l);
			}
		}
		uint32_t nown = 0, nlblk = 0;
		if (new_type_of(fs, t, blk, &nown, &nlblk) == BT_DIR) {
			struct ichange *ow = chk_txn_inode(fs, t, nown);
			if (ow && ow->new_live) {
				const uint8_t *d = chk_txn_new_block(fs, t, blk, buf);
				if (d)
					chk_parse_dir_block(fs, t, d, blk, nown, nlblk, true, 1, &l);
			}
		}
	}
	if (l.err)
		t->err = l.err;
	if (l.n)
		qsort_r(l.e, l.n, sizeof(*l.e), dent_cmp, l.names);
	/* walk groups of equal (dir, name): cancel identical old/new pairs */
	for (size_t i = 0; i < l.n;) {
		size_t j = i;
		while (j < l.n && l.e[j].dir == l.e[i].dir && l.e[j].name_len == l.e[i].name_len &&
		       !memcmp(l.names + l.e[j].name_off, l.names + l.e[i].name_off, l.e[i].name_len))
			j++;
		size_t no = 0;
		while (i + no < j && l.e[i + no].side == 0)
			no++;
		struct dent *ol = &l.e[i], *nl = &l.e[i + no];
		size_t nn = j - i - no;
		if (nn > 1)
			chk_txn_problem(t, "INV_DIRENT_UNIQUE", SIZE_MAX, "dir %u: name %s appears %zu times",
				    ol->dir, chk_quote_name(t, l.names + nl->name_off, nl->name_len), nn);
		/* both sides sorted by ino: merge, dropping equal inode numbers */
		struct dent *ro[8], *rn[8];
		size_t a = 0, b = 0, kro = 0, krn = 0;
		while (a < no || b < nn) {
			if (a < no && b < nn && ol[a].ino == nl[b].ino && ol[a].ft == nl[b].ft) {
				a++, b++;
			} else if (b >= nn || (a < no && ol[a].ino < nl[b].ino)) {
				if (kro < 8) ro[kro++] = &ol[a];
				a++;
			} else {
				if (krn < 8) rn[krn++] = &nl[b];
				b++;
			}
		}
		size_t m = kro > krn ? kro : krn;
		for (size_t k = 0; k < m; k++)
			emit_dchange(fs, t, k < kro ? ro[k] : NULL, k < krn ? rn[k] : NULL, l.names);
		i = j;
	}
	free(l.e);
	free(l.names);
}

/* ------------------------------------------------------------ htree */

static bool is_dx_node(const struct chk_fs *fs, const uint8_t *d)
{
	const struct dirent_hdr e = chk_dirent_at(d);
	return e.inode == 0 && e.rec_len == fs->bs && e.name_len == 0 &&
	       chk_ld16(d + 8 + offsetof(struct ext2_dx_countlimit, limit)) == (fs->bs - 8) / 8;
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
			chk_verdict_add_record(t->v, CHK_HTREE, blk, chk_arena_printf(&t->v->strings, "hash[%u]", i),
					   i < oc->count ? oe[i].hash : 0, i < nc->count ? ne[i].hash : 0);
		if (oe[i].block != ne[i].block)
			chk_verdict_add_record(t->v, CHK_HTREE, blk, chk_arena_printf(&t->v->strings, "block[%u]", i),
					   i < oc->count ? oe[i].block : 0, i < nc->count ? ne[i].block : 0);
	}
}

/* physical block of logical block lblk of `in` in the new state (0 = hole) */
static uint64_t bmap_new(struct chk_fs *fs, struct txn *t, const struct ext2_inode *in, uint32_t lblk)
{
	uint32_t a = fs->addr_per_block;
	uint8_t buf[4096];
	if (lblk < 12)
		return in->i_block[lblk];
	lblk -= 12;
	uint64_t blk;
	int level;
	if (lblk < a) {
		blk = in->i_block[12];
		level = 1;
	} else if ((lblk -= a) < (uint64_t)a * a) {
		blk = in->i_block[13];
		level = 2;
	} else if ((lblk -= a * a) < (uint64_t)a * a * a) {
		blk = in->i_block[14];
		level = 3;
	} else {
		return 0;                  /* past the triple-indirect range (a corrupt index entry) */
	}
	for (; level > 0 && blk; level--) {
		if (blk >= fs->blocks_count || bt_static(fs->btype[blk]))
			return 0;
		const uint8_t *d = chk_txn_new_block(fs, t, blk, buf);
		if (!d)
			return 0;
		uint64_t span = 1;
		for (int i = 1; i < level; i++)
			span *= a;
		uint32_t idx = (uint32_t)(lblk / span);
		lblk = (uint32_t)(lblk % span);
		blk = chk_ld32(d + (size_t)idx * 4);
	}
	return blk;
}

/* The root info the checker can walk: what e2fsck pass 1/2 and the kernel's
 * dx_probe accept for ext3 (no largedir: at most one level of nodes). */
static bool dx_root_usable(const struct ext2_dx_root_info *ri)
{
	return ri->reserved_zero == 0 && ri->info_length == 8 && ri->hash_version <= EXT2_HASH_TEA &&
	       ri->indirect_levels <= 1;
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
	bool deep;                       /* read every leaf (new root, depth change, scan) */
	unsigned nprob;
};

#define DX_MAX_PROBLEMS 8                /* per directory: one bad field is enough */

/* pblk: the index block at fault; its first htree record (if the
 * transaction changed it) goes with the violation */
static void dx_problem(struct dxwalk *w, uint64_t pblk, const char *inv, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void dx_problem(struct dxwalk *w, uint64_t pblk, const char *inv, const char *fmt, ...)
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
	uint32_t limit = (fs->bs - off) / 8;
	if (cl->limit != limit || cl->count == 0 || cl->count > cl->limit) {
		dx_problem(w, node_pblk, "INV_HTREE_COUNT_LIMIT", "block %u: count %u limit %u (the block holds %u)",
			   node_lblk, cl->count, cl->limit, limit);
		return;
	}
	for (uint32_t i = 0; i < cl->count; i++) {
		uint32_t h = e[i].hash;
		if (i >= 2 && h < e[i - 1].hash)
			dx_problem(w, node_pblk, "INV_HTREE_HASH_ORDER", "block %u: hash[%u] 0x%x below hash[%u] 0x%x",
				   node_lblk, i, h, i - 1, e[i - 1].hash);
		if (i >= 1 && ((h & ~1u) < (lo & ~1u) || (h & ~1u) > hi))
			dx_problem(w, node_pblk, "INV_HTREE_HASH_ORDER", "block %u: hash[%u] 0x%x outside its parent's range [0x%x, 0x%x]",
				   node_lblk, i, h, lo, hi);
		/* the kernel masks the block with 0x00ffffff, e2fsck with 0x0fffffff:
		 * any high bit is corruption */
		uint32_t lb = e[i].block;
		if (lb == 0 || lb >= w->dir_blocks) {
			dx_problem(w, node_pblk, "INV_HTREE_BLOCKS", "block %u: entry %u names block %u (%s)", node_lblk, i, lb,
				   lb == 0 ? "the root" : "past the directory's end");
			continue;
		}
		if (bit_get(w->seen, lb)) {
			dx_problem(w, node_pblk, "INV_HTREE_BLOCKS", "block %u: entry %u names block %u, referenced twice",
				   node_lblk, i, lb);
			continue;
		}
		bit_put(w->seen, lb, true);
		bool entry_new = !oe || i >= ocl->count || ocl->count > limit || oe[i].block != lb;
		if (level == 0 && !w->deep && !entry_new)
			continue;                /* an unchanged leaf reference: leaves checked when written */
		uint8_t buf[4096];
		uint64_t pb = bmap_new(fs, w->t, w->in, lb);
		const uint8_t *cd = pb && pb < fs->blocks_count ? chk_txn_new_block(fs, w->t, pb, buf) : NULL;
		if (!cd) {
			dx_problem(w, node_pblk, "INV_HTREE_BLOCKS", "block %u: entry %u names block %u, a hole", node_lblk, i, lb);
			continue;
		}
		bool shape = dx_node_shape(fs, cd);
		if (level == 0) {
			if (shape && ((const struct ext2_dx_countlimit *)(cd + 8))->limit == (fs->bs - 8) / 8)
				dx_problem(w, node_pblk, "INV_HTREE_DEPTH", "block %u: entry %u names index node %u where a leaf belongs",
					   node_lblk, i, lb);
			continue;
		}
		if (!shape) {
			dx_problem(w, node_pblk, "INV_HTREE_DEPTH", "block %u: entry %u names leaf %u where indirect_levels wants a node",
				   node_lblk, i, lb);
			continue;
		}
		uint8_t copy[4096], ocopy[4096];
		memcpy(copy, cd, fs->bs);
		const uint8_t *ocd = NULL;
		if (!w->deep && !entry_new && pb < fs->blocks_count && fs->btype[pb] == BT_DIR &&
		    fs->bowner[pb] == w->dir) {
			struct tblock *tb = tb_find(w->t, pb);
			if (!tb)
				ocd = copy;      /* not written: identical */
			else if (tb->old) {
				memcpy(ocopy, tb->old, fs->bs);
				ocd = ocopy;
			}
		}
		uint32_t elo = i ? h : lo, ehi = i + 1 < cl->count ? e[i + 1].hash : hi;
		dx_walk_node(w, lb, pb, copy, ocd, 8, elo, ehi, level - 1);
	}
}

/*
 * Check dir's whole index in the new state.  root: block 0 (new state);
 * old_root: its approved contents when the directory was indexed before with
 * the same block 0 (NULL for a new root, and in scans); fresh: a root made
 * by this transaction (the kernel and e2fsck -D use s_def_hash_version).
 */
static void htree_check_tree(struct chk_fs *fs, struct txn *t, uint32_t dir, const struct ext2_inode *in,
			     const uint8_t *root, const uint8_t *old_root, bool fresh, bool deep)
{
	const struct ext2_dx_root_info *ri = (const void *)(root + 24);
	struct dxwalk w = { fs, t, dir, in, in->i_size / fs->bs, NULL, deep, 0 };
	if (ri->reserved_zero != 0 || ri->info_length != 8) {
		dx_problem(&w, in->i_block[0], "INV_HTREE_ROOT", "root: reserved_zero %u info_length %u", ri->reserved_zero,
			   ri->info_length);
		return;
	}
	const struct ext2_super_block *sb = (const void *)(t->sb_changed ? t->sb_new : fs->sb_raw);
	if (ri->hash_version > EXT2_HASH_TEA) {
		dx_problem(&w, in->i_block[0], "INV_HTREE_HASH_VERSION", "root: unknown hash_version %u", ri->hash_version);
		return;
	}
	const struct ext2_dx_root_info *oi = old_root ? (const void *)(old_root + 24) : NULL;
	if (oi && oi->hash_version != ri->hash_version)
		dx_problem(&w, in->i_block[0], "INV_HTREE_HASH_VERSION", "root: hash_version %u -> %u in a live index",
			   oi->hash_version, ri->hash_version);
	else if (fresh && sb->s_def_hash_version <= EXT2_HASH_TEA && ri->hash_version != sb->s_def_hash_version)
		dx_problem(&w, in->i_block[0], "INV_HTREE_HASH_VERSION", "new root: hash_version %u, the file system's default is %u",
			   ri->hash_version, sb->s_def_hash_version);
	if (ri->indirect_levels > 1) {
		dx_problem(&w, in->i_block[0], "INV_HTREE_DEPTH", "root: indirect_levels %u (ext3 allows 1)", ri->indirect_levels);
		return;
	}
	if (oi && oi->indirect_levels != ri->indirect_levels)
		w.deep = true;
	w.seen = calloc(w.dir_blocks / 8 + 1, 1);
	if (!w.seen) {
		t->err = -ENOMEM;
		return;
	}
	bit_put(w.seen, 0, true);
	uint8_t copy[4096], ocopy[4096];
	memcpy(copy, root, fs->bs);
	if (old_root)
		memcpy(ocopy, old_root, fs->bs);
	dx_walk_node(&w, 0, in->i_block[0], copy, old_root ? ocopy : NULL, 32, 0, 0xffffffffu, ri->indirect_levels);
	/* e2fsck: "block N not referenced"; the walk marks every entry it meets,
	 * so the set is complete unless a node was malformed */
	if (w.nprob == 0)
		for (uint32_t b = 1; b < w.dir_blocks; b++)
			if (!bit_get(w.seen, b)) {
				dx_problem(&w, in->i_block[0], "INV_HTREE_BLOCKS", "block %u is not referenced by the index", b);
				break;
			}
	free(w.seen);
}

void chk_htree_scan_dir(struct chk_fs *fs, struct txn *t, uint32_t dir, const struct ext2_inode *in, const uint8_t *root)
{
	htree_check_tree(fs, t, dir, in, root, NULL, false, true);
}

static void dx_add_range(struct txn *t, uint32_t lblk, uint32_t lo, uint32_t hi, size_t *cap)
{
	struct dx_range *n = grow(t->dx, cap, t->ndx + 1, sizeof(*n));
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
	uint8_t buf[4096];
	for (uint32_t i = 0; i < cl->count; i++) {
		uint32_t elo = i ? e[i].hash : lo, ehi = i + 1 < cl->count ? e[i + 1].hash : hi;
		uint32_t lb = e[i].block & 0x0fffffff;
		if (levels == 0) {
			dx_add_range(t, lb, elo, ehi, cap);
			continue;
		}
		uint64_t pb = bmap_new(fs, t, in, lb);
		if (!pb)
			return false;
		const uint8_t *nd = chk_txn_new_block(fs, t, pb, buf);
		if (!nd || !is_dx_node(fs, nd))
			return false;
		uint8_t copy[4096];
		memcpy(copy, nd, fs->bs);
		if (!dx_collect(fs, t, in, copy, 8, elo, ehi, levels - 1, cap))
			return false;
	}
	return true;
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
		uint8_t buf[4096];
		uint64_t b0 = in->i_block[0];
		const uint8_t *r = b0 && b0 < fs->blocks_count ? chk_txn_new_block(fs, t, b0, buf) : NULL;
		if (!r)
			return;
		const struct ext2_dx_root_info *ri = (const void *)(r + 24);
		if (!dx_root_usable(ri))
			return;                /* reported by the root check */
		uint8_t copy[4096];
		memcpy(copy, r, fs->bs);
		if (!dx_collect(fs, t, in, copy, 32, 0, 0xffffffffu, ri->indirect_levels, &cap))
			return;
		int hv = ri->hash_version;
		const struct ext2_super_block *sb = (const void *)(t->sb_changed ? t->sb_new : fs->sb_raw);
		if (hv <= EXT2_HASH_TEA && (sb->s_flags & EXT2_FLAGS_UNSIGNED_HASH))
			hv += 3;
		t->dx_hver = hv;
		/* every leaf is referenced once */
		uint32_t *lb = malloc(t->ndx * sizeof(*lb) + 1);
		if (lb) {
			for (size_t i = 0; i < t->ndx; i++)
				lb[i] = t->dx[i].lblk;
			qsort(lb, t->ndx, sizeof(*lb), cmp_u32);
			for (size_t i = 1; i < t->ndx; i++)
				if (lb[i] == lb[i - 1]) {
					chk_txn_problem(t, "INV_HTREE_NODE", SIZE_MAX,
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
				chk_txn_problem(t, "INV_HTREE_BLOCKS", SIZE_MAX, "dir %u: leaf %u referenced twice by the index",
					    dir, lblk);
				return;
			}
			rg = &t->dx[i];
		}
	if (!rg) {
		chk_txn_problem(t, "INV_HTREE_BLOCKS", SIZE_MAX, "dir %u: leaf block %u (%llu) not referenced by the index",
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
				chk_txn_problem(t, "INV_HTREE_NODE", SIZE_MAX,
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
	uint8_t buf[4096];
	if (lb == 0 || lb >= in->i_size / fs->bs)
		return;                    /* the root, or past the end: INV_HTREE_BLOCKS */
	uint64_t pb = bmap_new(fs, t, in, lb);
	if (!pb || pb >= fs->blocks_count || chk_u64map_get(&t->dirblks, pb, NULL))
		return;                    /* missing (reported by the node check) or checked as written */
	const uint8_t *d = chk_txn_new_block(fs, t, pb, buf);
	if (d && !is_dx_node(fs, d))
		chk_htree_check_leaf(fs, t, dir, in, lb, d, pb);
}

/* An index block changed: the leaves whose range moved (entries that differ
 * and their predecessors) must still hold only hashes of their range.  Under
 * a two-level root the changed entries name nodes: all their leaves. */
static void check_changed_leaves(struct chk_fs *fs, struct txn *t, uint32_t dir, const struct ext2_inode *in,
				 const uint8_t *o, const uint8_t *n, uint32_t off, int levels)
{
	const struct ext2_dx_countlimit *oc = (const void *)(o + off), *nc = (const void *)(n + off);
	const struct ext2_dx_entry *oe = (const void *)(o + off), *ne = (const void *)(n + off);
	if (nc->count > (fs->bs - off) / 8)
		return;                    /* malformed: reported by the node check */
	for (uint32_t i = 0; i < nc->count; i++) {
		bool same = i < oc->count && oe[i].block == ne[i].block && (i == 0 || oe[i].hash == ne[i].hash) &&
			    (i + 1 >= nc->count || (i + 1 < oc->count && oe[i + 1].hash == ne[i + 1].hash));
		if (same)
			continue;
		uint32_t lb = ne[i].block & 0x0fffffff;
		if (levels == 0) {
			check_leaf_lblk(fs, t, dir, in, lb);
			continue;
		}
		uint8_t buf[4096];
		uint64_t pb = bmap_new(fs, t, in, lb);
		const uint8_t *d = pb && pb < fs->blocks_count ? chk_txn_new_block(fs, t, pb, buf) : NULL;
		if (!d || !is_dx_node(fs, d))
			continue;
		uint8_t copy[4096];
		memcpy(copy, d, fs->bs);
		const struct ext2_dx_countlimit *cc = (const void *)(copy + 8);
		const struct ext2_dx_entry *ce = (const void *)(copy + 8);
		for (uint32_t k = 0; k < cc->count && k < (fs->bs - 8) / 8; k++)
			check_leaf_lblk(fs, t, dir, in, ce[k].block & 0x0fffffff);
	}
}

/* Index blocks written: record their changes, recheck the leaves whose
 * range moved, and note the directory for a walk of its whole index. */
static void diff_htree(struct chk_fs *fs, struct txn *t, uint8_t *buf, struct u64map *walk)
{
	for (size_t k = 0; k < t->dirblks.cap; k++) {
		if (!t->dirblks.keys[k])
			continue;
		uint64_t blk = t->dirblks.keys[k] - 1;
		uint32_t own = 0, lblk = 0;
		if (new_type_of(fs, t, blk, &own, &lblk) != BT_DIR)
			continue;
		struct ichange *ic = chk_txn_inode(fs, t, own);
		if (!ic || !ic->new_live)
			continue;
		const struct ext2_inode *n = (const void *)ic->new;
		if (!(n->i_flags & EXT2_INDEX_FL) || !fs->dir_index || imode_type(n) != 0040000)
			continue;
		struct tblock *tb = tb_find(t, blk);
		const uint8_t *nd = chk_txn_new_block(fs, t, blk, buf);
		if (!nd)
			continue;
		const uint8_t *od = tb && tb->old ? tb->old : nd;
		bool was_dir = blk < fs->blocks_count && fs->btype[blk] == BT_DIR;
		if (lblk == 0 && tb && was_dir) {
			htree_records(fs, t, blk, od, nd, 32, true);
			const struct ext2_dx_root_info *ri = (const void *)(nd + 24);
			if (dx_root_usable(ri))
				check_changed_leaves(fs, t, own, n, od, nd, 32, ri->indirect_levels);
		} else if (lblk && tb && was_dir && is_dx_node(fs, nd) && is_dx_node(fs, od)) {
			htree_records(fs, t, blk, od, nd, 8, false);
			check_changed_leaves(fs, t, own, n, od, nd, 8, 0);
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
static void check_new_index_flags(struct chk_fs *fs, struct txn *t, struct u64map *walk)
{
	for (size_t i = 0; i < t->nich; i++) {
		struct ichange *ic = t->ich[i];
		const struct ext2_inode *o = (const void *)ic->old, *n = (const void *)ic->new;
		if (!ic->new_live || !(n->i_flags & EXT2_INDEX_FL))
			continue;
		if (imode_type(n) != 0040000 || !fs->dir_index) {
			chk_txn_problem(t, "INV_HTREE_FLAG", ic->nrecs ? ic->recs[0] : SIZE_MAX,
				    "inode %u has the htree index flag but is %s", ic->ino,
				    imode_type(n) != 0040000 ? "not a directory" : "on a file system without dir_index");
			continue;
		}
		if (ic->old_live && (o->i_flags & EXT2_INDEX_FL) && o->i_block[0] == n->i_block[0])
			continue;
		if (chk_u64map_put(walk, ic->ino, 1))
			t->err = -ENOMEM;
	}
}

static void walk_indexes(struct chk_fs *fs, struct txn *t, struct u64map *walk)
{
	uint8_t buf[4096], root[4096], old_root[4096];
	for (size_t k = 0; k < walk->cap; k++) {
		if (!walk->keys[k])
			continue;
		uint32_t dir = (uint32_t)(walk->keys[k] - 1);
		struct ichange *ic = chk_txn_inode(fs, t, dir);
		if (!ic)
			continue;
		const struct ext2_inode *o = (const void *)ic->old, *n = (const void *)ic->new;
		uint64_t b0 = n->i_block[0];
		if (!b0 || b0 >= fs->blocks_count || bt_static(fs->btype[b0]))
			continue;                /* a pointer problem, reported as such */
		const uint8_t *r = chk_txn_new_block(fs, t, b0, buf);
		if (!r) {
			t->err = -EIO;
			continue;
		}
		memcpy(root, r, fs->bs);
		bool existed = ic->old_live && (o->i_flags & EXT2_INDEX_FL) && o->i_block[0] == b0 &&
			       fs->btype[b0] == BT_DIR && fs->bowner[b0] == dir;
		const uint8_t *orr = existed ? chk_txn_old_block(fs, t, b0, buf) : NULL;
		if (orr)
			memcpy(old_root, orr, fs->bs);
		htree_check_tree(fs, t, dir, n, root, orr ? old_root : NULL, !existed, !existed);
	}
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
	struct tblock *sbb = tb_find(t, fs->sb_blk);
	memcpy(t->sb_old, fs->sb_raw, 1024);
	memcpy(t->sb_new, fs->sb_raw, 1024);
	if (sbb && sbb->changed) {
		memcpy(t->sb_new, sbb->new + fs->sb_off, 1024);
		t->sb_changed = memcmp(t->sb_old, t->sb_new, 1024) != 0;
		if (t->sb_changed && diff_sb(t, t->sb_old, t->sb_new, true))
			chk_txn_problem(t, "INV_SB_FROZEN", SIZE_MAX, "the superblock's reserved tail changed");
		if (fs->sb_off && memcmp(sbb->old, sbb->new, fs->sb_off))
			chk_txn_problem(t, "INV_STATIC_FROZEN", SIZE_MAX, "block 0's boot area (before the superblock) changed");
		if (fs->sb_off + 1024 < fs->bs &&
		    memcmp(sbb->old + fs->sb_off + 1024, sbb->new + fs->sb_off + 1024, fs->bs - fs->sb_off - 1024))
			chk_txn_problem(t, "INV_STATIC_FROZEN", SIZE_MAX, "block 0 after the superblock changed");
	}
	diff_gdt(fs, t);
	for (size_t i = 0; i < t->nblocks; i++) {
		struct tblock *b = &t->blocks[i];
		if (!b->changed || b->blk >= fs->blocks_count)
			continue;
		uint32_t g;
		switch (b->otype) {
		case BT_BBITMAP:
			g = fs->bowner[b->blk];
			diff_bbitmap(fs, t, g, b);
			break;
		case BT_IBITMAP:
			g = fs->bowner[b->blk];
			diff_ibitmap(fs, t, g, b);
			break;
		case BT_SB:
			if (b->blk != fs->sb_blk &&
			    diff_sb(t, b->old + (b->blk == 0 ? 1024 : 0), b->new + (b->blk == 0 ? 1024 : 0), false))
				chk_txn_problem(t, "INV_BACKUP_COPIES", SIZE_MAX, "backup superblock %llu: reserved tail changed",
					    (unsigned long long)b->blk);
			break;
		case BT_GDT:
			if (b->blk > fs->first_data_block + fs->gdt_blocks)
				check_backup_gdt(fs, t, b);
			break;
		case BT_RGDT: case BT_RESIZE_IND: case BT_BOOT:
			chk_txn_problem(t, "INV_STATIC_FROZEN", SIZE_MAX, "%s block %llu changed",
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
	/* pointers from inodes, then from indirect blocks that stay attached */
	for (size_t i = 0; i < t->nich; i++)
		diff_inode_ptrs(fs, t, t->ich[i], bufs);
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
	diff_dirs(fs, t, bufs);
	struct u64map walk = { 0 };
	diff_htree(fs, t, bufs, &walk);
	check_new_index_flags(fs, t, &walk);
	walk_indexes(fs, t, &walk);
	chk_u64map_free(&walk);
	free(bufs);
}

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
	size_t ng = (size_t)fs->gdt_blocks * fs->desc_per_block;
	t->gd_new = malloc(ng * sizeof(*t->gd_new));
	t->gd_changed = calloc(fs->ngroups, sizeof(bool));
	t->gd_recs = malloc(fs->ngroups * sizeof(size_t));
	t->bflip_delta = calloc(fs->ngroups, sizeof(int32_t));
	t->iflip_delta = calloc(fs->ngroups, sizeof(int32_t));
	t->dirs_delta = calloc(fs->ngroups, sizeof(int32_t));
	if (!t->gd_new || !t->gd_changed || !t->gd_recs || !t->bflip_delta || !t->iflip_delta || !t->dirs_delta) {
		chk_verdict_free(v);
		return -ENOMEM;
	}
	memcpy(t->gd_new, fs->gd, ng * sizeof(*t->gd_new));
	for (uint32_t g = 0; g < fs->ngroups; g++)
		t->gd_recs[g] = SIZE_MAX;
	uint64_t dev_bytes = (uint64_t)fs->blocks_count * fs->bs;
	for (size_t i = 0; i < n && !t->err; i++) {
		if (!w[i].len)
			continue;
		if (w[i].offset > dev_bytes || w[i].len > dev_bytes - w[i].offset) {     /* (no u64 wrap) */
			chk_txn_problem(t, "INV_PTR_IN_RANGE", SIZE_MAX, "write at byte %llu past the end of the file system",
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
	if (!t->err)
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

/* ------------------------------------------------------------ last block */

/* empty: indirect blocks already found to hold no data (a corrupt tree may
 * name one block from every slot: each is searched once) */
static bool last_in_subtree(struct chk_fs *fs, struct txn *t, uint64_t blk, int level, uint32_t base,
			    uint32_t *last, struct u64map *empty)
{
	if (level == 0) {
		*last = base;
		return true;
	}
	if (blk < fs->first_data_block || blk >= fs->blocks_count || bt_static(fs->btype[blk]))
		return false;
	if (chk_u64map_get(empty, blk * 4 + (uint64_t)level, NULL))
		return false;
	uint8_t buf[4096];
	const uint8_t *d = chk_txn_new_block(fs, t, blk, buf);
	if (!d)
		return false;
	uint32_t p[1024];
	memcpy(p, d, fs->bs);
	uint64_t span = 1;
	for (int i = 1; i < level; i++)
		span *= fs->addr_per_block;
	for (uint32_t i = fs->addr_per_block; i-- > 0;)
		if (p[i] && last_in_subtree(fs, t, p[i], level - 1, (uint32_t)(base + i * span), last, empty))
			return true;
	if (chk_u64map_put(empty, blk * 4 + (uint64_t)level, 1))
		t->err = -ENOMEM;
	return false;
}

/* Cheap: descends only along the last non-zero pointers (at most three
 * indirect blocks read). */
bool chk_txn_last_lblk(struct chk_fs *fs, struct txn *t, const struct ext2_inode *in, uint32_t *last)
{
	uint32_t a = fs->addr_per_block;
	uint32_t bases[3] = { 12, 12 + a, 12 + a + a * a };
	struct u64map empty = { 0 };
	for (int l = 2; l >= 0; l--)
		if (in->i_block[12 + l] && last_in_subtree(fs, t, in->i_block[12 + l], l + 1, bases[l], last, &empty)) {
			chk_u64map_free(&empty);
			return true;
		}
	chk_u64map_free(&empty);
	for (int i = 11; i >= 0; i--)
		if (in->i_block[i]) {
			*last = (uint32_t)i;
			return true;
		}
	return false;
}

/* ------------------------------------------------------------ advance */

int chk_txn_apply(struct chk_fs *fs, struct txn *t)
{
	/* type/owner map and per-inode counts */
	for (size_t i = 0; i < t->nbch; i++) {
		struct bchange *c = t->bch[i];
		uint64_t b = c->blk;
		if (b >= fs->blocks_count || bt_static(fs->btype[b]))
			continue;
		if (c->adds) {
			if (c->new_type == BT_XATTR && fs->btype[b] == BT_XATTR)
				continue;                         /* one more sharer */
			fs->btype[b] = c->new_type;
			fs->bowner[b] = c->new_owner;
			fs->blblk[b] = c->new_lblk;
		} else if (c->removes) {
			if (c->old_type == BT_XATTR && c->xattr_old_refs - c->xremoves > 0)
				continue;                         /* still shared */
			fs->btype[b] = BT_FREE;
			fs->bowner[b] = 0;
			fs->blblk[b] = 0;
		}
	}
	for (size_t i = 0; i < t->nich; i++) {
		struct ichange *ic = t->ich[i];
		if (!ic->old_inuse) {
			fs->ndata[ic->ino] = 0;
			fs->nmeta[ic->ino] = 0;
		}
		fs->ndata[ic->ino] = (uint32_t)((int64_t)fs->ndata[ic->ino] + ic->ndata_delta);
		fs->nmeta[ic->ino] = (uint32_t)((int64_t)fs->nmeta[ic->ino] + ic->nmeta_delta);
		if (!ic->new_inuse)
			fs->ndata[ic->ino] = fs->nmeta[ic->ino] = 0;
	}
	/* bitmaps, descriptors, superblock */
	for (size_t i = 0; i < t->nblocks; i++) {
		struct tblock *b = &t->blocks[i];
		if (!b->changed || b->blk >= fs->blocks_count)
			continue;
		uint32_t g = fs->bowner[b->blk];
		if (b->otype == BT_BBITMAP) {
			uint64_t start = fs->first_data_block + (uint64_t)g * fs->bpg;
			for (uint64_t k = 0; k < fs->bpg && start + k < fs->blocks_count; k++)
				bit_put(fs->bbits, start + k, bit_get(b->new, k));
		} else if (b->otype == BT_IBITMAP) {
			for (uint32_t k = 0; k < fs->ipg; k++)
				bit_put(fs->ibits, (uint64_t)g * fs->ipg + k + 1, bit_get(b->new, k));
		}
	}
	memcpy(fs->gd, t->gd_new, (size_t)fs->gdt_blocks * fs->desc_per_block * sizeof(*fs->gd));
	memcpy(fs->sb_raw, t->sb_new, 1024);
	/* cache: keep metadata, forget data */
	for (size_t i = 0; i < t->nblocks; i++) {
		struct tblock *b = &t->blocks[i];
		if (!b->changed || b->blk >= fs->blocks_count)
			continue;
		uint8_t ty = fs->btype[b->blk];
		if (ty == BT_FREE || ty == BT_DATA)
			chk_cache_drop(fs, b->blk);
		else
			chk_cache_put(fs, b->blk, b->new);
	}
	return 0;
}
