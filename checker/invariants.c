/*
 * checker/invariants.c - the invariant table (id, one-line description,
 * check function) and the check functions.  Each function looks only at
 * what the transaction changes (records and facts computed by diff.c) plus
 * the shadow state: the global properties e2fsck checks become local ones,
 * assuming the approved state satisfies them (chk_scan is the base case).
 * One file (about 1,050 lines): one short function per table row, read
 * side by side with checker/README.md's table.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chk_internal.h"

typedef void (*check_fn)(struct chk_fs *fs, struct txn *t, struct chk_verdict *v);

struct inv_row {
	struct chk_invariant pub;
	check_fn fn;
};

#define V(id, recs, n, ...) chk_verdict_add_violation(v, id, recs, n, __VA_ARGS__)

void chk_report_problems(struct txn *t, struct chk_verdict *v, enum chk_inv id)
{
	for (size_t i = 0; i < t->nprobs; i++)
		if (t->probs[i].inv == id)
			V(id, &t->probs[i].rec, 1, "%s", t->probs[i].detail);
}

static const struct ext2_inode *I_OLD(const struct ichange *ic) { return (const void *)ic->old; }
static const struct ext2_inode *I_NEW(const struct ichange *ic) { return (const void *)ic->new; }
static bool is_dir(const struct ext2_inode *in) { return imode_type(in) == 0040000; }

/* records of one group's descriptor (contiguous) */
static size_t gd_rec_list(struct txn *t, uint32_t g, size_t *out, size_t max)
{
	size_t n = 0;
	uint32_t i;
	size_t first = chk_u64map_get(&t->gtidx, g, &i) ? t->gt[i].rec : SIZE_MAX;
	for (size_t r = first; r != SIZE_MAX && r < t->v->nrecs && n < max; r++) {
		if (t->v->recs[r].type != CHK_BGD || t->v->recs[r].id != g)
			break;
		out[n++] = r;
	}
	return n;
}

static size_t sb_rec_find(struct txn *t, const char *field)
{
	for (size_t i = 0; i < t->nsb_recs; i++)
		if (!strcmp(t->v->recs[t->sb_recs[i]].field, field))
			return t->sb_recs[i];
	return SIZE_MAX;
}

/* ------------------------------------------------------------ superblock */

void inv_sb_frozen(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	for (size_t i = 0; i < t->nsb_recs; i++) {
		const struct chk_record *r = &v->recs[t->sb_recs[i]];
		if (chk_sb_rec_class(r->field) == F_FROZEN)
			V(INV_SB_FROZEN, &t->sb_recs[i], 1, "superblock field %s may not change", r->field);
	}
	chk_report_problems(t, v, INV_SB_FROZEN);
}

void inv_sb_features(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	if (!t->sb_changed)
		return;
	const struct ext2_super_block *o = (const void *)t->sb_old, *n = (const void *)t->sb_new;
	uint32_t cadd = n->s_feature_compat & ~o->s_feature_compat, cdel = o->s_feature_compat & ~n->s_feature_compat;
	uint32_t radd = n->s_feature_ro_compat & ~o->s_feature_ro_compat,
		 rdel = o->s_feature_ro_compat & ~n->s_feature_ro_compat;
	if (fs->orphan_file_ino)      /* set and cleared as the orphan file fills (INV_ORPHAN_PRESENT) */
		radd &= ~EXT4_FEATURE_RO_COMPAT_ORPHAN_PRESENT, rdel &= ~EXT4_FEATURE_RO_COMPAT_ORPHAN_PRESENT;
	uint32_t ichg = n->s_feature_incompat ^ o->s_feature_incompat;
	if ((cadd & ~EXT2_FEATURE_COMPAT_EXT_ATTR) || cdel) {
		size_t r = sb_rec_find(t, "s_feature_compat");
		V(INV_SB_FEATURES, &r, 1, "compat features 0x%x -> 0x%x: only ext_attr may be set, none cleared",
		  o->s_feature_compat, n->s_feature_compat);
	}
	if ((radd & ~(EXT2_FEATURE_RO_COMPAT_LARGE_FILE | EXT4_FEATURE_RO_COMPAT_DIR_NLINK)) || rdel) {
		size_t r = sb_rec_find(t, "s_feature_ro_compat");
		V(INV_SB_FEATURES, &r, 1, "ro_compat features 0x%x -> 0x%x: only large_file and dir_nlink may be set",
		  o->s_feature_ro_compat, n->s_feature_ro_compat);
	}
	if (ichg & ~EXT3_FEATURE_INCOMPAT_RECOVER) {
		size_t r = sb_rec_find(t, "s_feature_incompat");
		V(INV_SB_FEATURES, &r, 1, "incompat features 0x%x -> 0x%x: only needs_recovery may change",
		  o->s_feature_incompat, n->s_feature_incompat);
	}
	/* revision 0 has no feature fields: e2fsck wants revision 1 before any
	 * flag, and the kernel and libext2fs upgrade first (INV_SB_REVISION) */
	if ((cadd || radd || (ichg & n->s_feature_incompat)) && n->s_rev_level == EXT2_GOOD_OLD_REV) {
		const char *field = cadd ? "s_feature_compat" : radd ? "s_feature_ro_compat" : "s_feature_incompat";
		size_t r = sb_rec_find(t, field);
		V(INV_SB_FEATURES, &r, 1, "a feature flag set on a revision-0 superblock (revision 1 first)");
	}
}

/* The one revision change there is: the kernel's ext4_update_dynamic_rev
 * (and libext2fs's) before it sets a feature flag on a revision-0 file
 * system: revision 1, with the first inode and inode size that revision 0
 * implies.  Flags already in revision 0's unused feature words would start
 * to count unchecked: only from none. */
void inv_sb_revision(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	size_t recs[3], nrecs = 0;
	(void)fs;
	for (size_t i = 0; i < t->nsb_recs && nrecs < 3; i++)
		if (chk_sb_rec_class(v->recs[t->sb_recs[i]].field) == F_REVISION)
			recs[nrecs++] = t->sb_recs[i];
	if (!nrecs)
		return;
	const struct ext2_super_block *o = (const void *)t->sb_old, *n = (const void *)t->sb_new;
	const char *why = NULL;
	if (o->s_rev_level != EXT2_GOOD_OLD_REV || n->s_rev_level != EXT2_DYNAMIC_REV)
		why = "only revision 0 becomes revision 1";
	else if (n->s_first_ino != EXT2_GOOD_OLD_FIRST_INO || n->s_inode_size != EXT2_GOOD_OLD_INODE_SIZE)
		why = "revision 1 must say what revision 0 implied: first inode 11, inode size 128";
	else if (o->s_feature_compat || o->s_feature_ro_compat || o->s_feature_incompat)
		why = "the revision-0 superblock had feature flags, which would start to count";
	else if (!n->s_feature_compat && !n->s_feature_ro_compat && !n->s_feature_incompat)
		why = "no feature flag is set with it";
	if (why)
		V(INV_SB_REVISION, recs, nrecs, "s_rev_level %u -> %u, s_first_ino %u -> %u, s_inode_size %u -> %u: %s",
		  o->s_rev_level, n->s_rev_level, o->s_first_ino, n->s_first_ino, o->s_inode_size,
		  n->s_inode_size, why);
}

void inv_sb_state(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	if (!t->sb_changed)
		return;
	const struct ext2_super_block *o = (const void *)t->sb_old, *n = (const void *)t->sb_new;
	if (n->s_state & ~(EXT2_VALID_FS | EXT2_ERROR_FS | EXT3_ORPHAN_FS)) {
		size_t r = sb_rec_find(t, "s_state");
		V(INV_SB_STATE, &r, 1, "s_state 0x%x has unknown bits", n->s_state);
	}
	/* a mount records the directory hash signedness once, when neither flag is set */
	uint32_t hflags = EXT2_FLAGS_SIGNED_HASH | EXT2_FLAGS_UNSIGNED_HASH, fchg = o->s_flags ^ n->s_flags;
	if (fchg && ((fchg & ~hflags) || (o->s_flags & hflags) || (n->s_flags & hflags) == hflags)) {
		size_t r = sb_rec_find(t, "s_flags");
		V(INV_SB_STATE, &r, 1, "s_flags 0x%x -> 0x%x: only a hash-signedness flag may be set, once",
		  o->s_flags, n->s_flags);
	}
	if (o->s_max_mnt_count != n->s_max_mnt_count && o->s_max_mnt_count != 0) {
		size_t r = sb_rec_find(t, "s_max_mnt_count");
		V(INV_SB_STATE, &r, 1, "s_max_mnt_count may only be set when it was 0");
	}
}

/* The sb counts may be lazily stale (the kernel writes them from its
 * counters); whenever they are written with a new value they must equal the
 * sum over the groups of the new state. */
void inv_sb_free_blocks(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	const struct ext2_super_block *o = (const void *)t->sb_old, *n = (const void *)t->sb_new;
	uint64_t nfree = chk_sb_free_blocks(n);
	if (chk_sb_free_blocks(o) == nfree)
		return;
	/* the approved sum, moved by the groups whose descriptors changed */
	uint64_t sum = fs->gd_free_blocks;
	for (size_t i = 0; i < t->ngt; i++)
		if (t->gt[i].changed)
			sum += (uint64_t)chk_gd_free_blocks(fs, chk_gd_new(fs, t, t->gt[i].g)) -
			       chk_gd_free_blocks(fs, chk_gd(fs, t->gt[i].g));
	if (sum != nfree) {
		size_t r = sb_rec_find(t, "s_free_blocks_count");
		if (r == SIZE_MAX)
			r = sb_rec_find(t, "s_free_blocks_hi");
		V(INV_SB_FREE_BLOCKS, &r, 1, "s_free_blocks_count %llu != sum of group free block counts %llu",
		  (unsigned long long)nfree, (unsigned long long)sum);
	}
}

void inv_sb_free_inodes(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	const struct ext2_super_block *o = (const void *)t->sb_old, *n = (const void *)t->sb_new;
	if (o->s_free_inodes_count == n->s_free_inodes_count)
		return;
	uint64_t sum = fs->gd_free_inodes;
	for (size_t i = 0; i < t->ngt; i++)
		if (t->gt[i].changed)
			sum += (uint64_t)chk_gd_free_inodes(fs, chk_gd_new(fs, t, t->gt[i].g)) -
			       chk_gd_free_inodes(fs, chk_gd(fs, t->gt[i].g));
	if (sum != n->s_free_inodes_count) {
		size_t r = sb_rec_find(t, "s_free_inodes_count");
		V(INV_SB_FREE_INODES, &r, 1, "s_free_inodes_count %u != sum of group free inode counts %llu",
		  n->s_free_inodes_count, (unsigned long long)sum);
	}
}

/* ------------------------------------------------------------ descriptors */

/* The UNINIT flags only clear: the kernel and libext2fs clear them as they
 * first allocate in a group (so does a mount where descriptors carry no
 * checksum and the flags mean nothing); the lazy init thread sets
 * INODE_ZEROED.  bg_itable_unused only shrinks, as inodes past it come into
 * use (or is cleared); under INODE_UNINIT it stands for all the inodes.
 * The checksums change with what they cover, where the file system carries
 * them (their values are INV_CSUM_*'s). */
static uint16_t bgd_flags_changed(uint16_t o, uint16_t n)
{
	uint16_t cleared_uninit = o & ~n & (EXT2_BG_BLOCK_UNINIT | EXT2_BG_INODE_UNINIT);
	return (o ^ n) & ~EXT2_BG_INODE_ZEROED & ~cleared_uninit;
}

/* Under INODE_UNINIT (descriptor checksums on) no inode of the group is
 * initialised, whatever bg_itable_unused says: libext2fs and the kernel
 * read none, and the kernel sets the field afresh as the flag clears. */
static uint32_t itable_unused_meant(const struct chk_fs *fs, const uint8_t *d)
{
	if (fs->group_csum && (chk_gd_flags(d) & EXT2_BG_INODE_UNINIT))
		return fs->ipg;
	return chk_gd_itable_unused(fs, d);
}

static const char *bgd_frozen_problem(const struct chk_fs *fs, const uint8_t *o, const uint8_t *n)
{
	if (chk_gd_bbitmap(fs, o) != chk_gd_bbitmap(fs, n) || chk_gd_ibitmap(fs, o) != chk_gd_ibitmap(fs, n) ||
	    chk_gd_itable(fs, o) != chk_gd_itable(fs, n))
		return "a bitmap or inode table location changed";
	if (bgd_flags_changed(chk_gd_flags(o), chk_gd_flags(n)))
		return "flags other than clearing UNINIT or marking the table zeroed changed";
	if (chk_gd_exclude(fs, o) != chk_gd_exclude(fs, n))
		return "the snapshot exclude bitmap changed";
	if (chk_gd_itable_unused(fs, n) > itable_unused_meant(fs, o))
		return "bg_itable_unused grew";
	if (!fs->csum.metadata_csum && (chk_gd_bbitmap_csum(fs, o) != chk_gd_bbitmap_csum(fs, n) ||
					chk_gd_ibitmap_csum(fs, o) != chk_gd_ibitmap_csum(fs, n)))
		return "a bitmap checksum changed without metadata_csum";
	if (!fs->group_csum && chk_gd_checksum(o) != chk_gd_checksum(n))
		return "bg_checksum changed without descriptor checksums";
	return NULL;
}

void inv_bgd_frozen(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	chk_txn_groups_sort(t);
	for (size_t i = 0; i < t->ngt; i++) {
		uint32_t g = t->gt[i].g;
		if (!t->gt[i].changed)
			continue;
		const char *why = bgd_frozen_problem(fs, chk_gd(fs, g), chk_gd_new(fs, t, g));
		if (why) {
			size_t r[16], k = gd_rec_list(t, g, r, 16);
			V(INV_BGD_FROZEN, r, k, "group %u: %s", g, why);
		}
	}
}

void inv_bgd_free_blocks(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	/* an untouched group has neither a changed count nor flipped bits */
	chk_txn_groups_sort(t);
	for (size_t i = 0; i < t->ngt; i++) {
		uint32_t g = t->gt[i].g;
		int64_t d = (int64_t)chk_gd_free_blocks(fs, chk_gd_new(fs, t, g)) - chk_gd_free_blocks(fs, chk_gd(fs, g));
		if (d != -(int64_t)t->gt[i].bflip) {
			size_t r[16], k = gd_rec_list(t, g, r, 16);
			V(INV_BGD_FREE_BLOCKS, r, k, "group %u: bg_free_blocks_count changed by %lld but %d bitmap bits were set net",
			  g, (long long)d, t->gt[i].bflip);
		}
	}
}

void inv_bgd_free_inodes(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	chk_txn_groups_sort(t);
	for (size_t i = 0; i < t->ngt; i++) {
		uint32_t g = t->gt[i].g;
		int64_t d = (int64_t)chk_gd_free_inodes(fs, chk_gd_new(fs, t, g)) - chk_gd_free_inodes(fs, chk_gd(fs, g));
		if (d != -(int64_t)t->gt[i].iflip) {
			size_t r[16], k = gd_rec_list(t, g, r, 16);
			V(INV_BGD_FREE_INODES, r, k, "group %u: bg_free_inodes_count changed by %lld but %d inode bits were set net",
			  g, (long long)d, t->gt[i].iflip);
		}
	}
}

void inv_bgd_used_dirs(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	for (size_t i = 0; i < t->nich; i++) {
		struct ichange *ic = t->ich[i];
		bool od = ic->old_inuse && is_dir(I_OLD(ic)), nd = ic->new_inuse && is_dir(I_NEW(ic));
		if (od != nd) {
			struct gtouch *gt = chk_txn_group(t, chk_group_of_inode(fs, ic->ino));
			if (gt)
				gt->dirs += nd ? 1 : -1;
		}
	}
	chk_txn_groups_sort(t);
	for (size_t i = 0; i < t->ngt; i++) {
		uint32_t g = t->gt[i].g;
		int64_t d = (int64_t)chk_gd_used_dirs(fs, chk_gd_new(fs, t, g)) - chk_gd_used_dirs(fs, chk_gd(fs, g));
		if (d != t->gt[i].dirs) {
			size_t r[16], k = gd_rec_list(t, g, r, 16);
			V(INV_BGD_USED_DIRS, r, k, "group %u: bg_used_dirs_count changed by %lld but %d directories came into use net",
			  g, (long long)d, t->gt[i].dirs);
		}
	}
}

void inv_backup_copies(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_BACKUP_COPIES);
}

void inv_static_frozen(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_STATIC_FROZEN);
}

void inv_bitmap_padding(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_BITMAP_PADDING);
}

/* ------------------------------------------------------------ blocks */

static bool dyn_owned(uint8_t t) { return t != BT_FREE && !bt_static(t); }

/* Is the block owned after the transaction?  An xattr block is owned while
 * some inode's i_file_acl names it; anything else by its one pointer. */
static int64_t xattr_refs_new(const struct bchange *c)
{
	int64_t old = c->old_type == BT_XATTR ? c->xattr_old_refs : 0;
	return old + c->xadds - c->xremoves;
}

static bool bch_new_owned(const struct bchange *c)
{
	if (bt_static(c->old_type))
		return true;
	int nonx = (int)(dyn_owned(c->old_type) && c->old_type != BT_XATTR) +
		   (c->adds - c->xadds) - (c->removes - c->xremoves);
	return nonx > 0 || xattr_refs_new(c) > 0;
}

static void bch_recs(const struct bchange *c, size_t *r)
{
	r[0] = c->rec;
	r[1] = c->flip_rec;
}

void inv_ptr_in_range(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	for (size_t i = 0; i < t->nbch; i++) {
		struct bchange *c = t->bch[i];
		if (c->adds && (c->blk >= fs->blocks_count || c->blk < fs->first_data_block))
			V(INV_PTR_IN_RANGE, &c->rec, 1, "pointer to block %llu outside the file system (%u..%llu)",
			  (unsigned long long)c->blk, fs->first_data_block, (unsigned long long)fs->blocks_count - 1);
	}
	chk_report_problems(t, v, INV_PTR_IN_RANGE);
}

void inv_ptr_not_static(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	for (size_t i = 0; i < t->nbch; i++) {
		struct bchange *c = t->bch[i];
		if (c->adds && bt_static(c->old_type))
			V(INV_PTR_NOT_STATIC, &c->rec, 1, "pointer to block %llu, which is static metadata",
			  (unsigned long long)c->blk);
	}
}

void inv_block_owned_once(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	for (size_t i = 0; i < t->nbch; i++) {
		struct bchange *c = t->bch[i];
		if (!c->adds || bt_static(c->old_type) || c->blk >= fs->blocks_count)
			continue;
		int nonx = (int)(dyn_owned(c->old_type) && c->old_type != BT_XATTR) +
			   (c->adds - c->xadds) - (c->removes - c->xremoves);
		bool xattr = xattr_refs_new(c) > 0;
		/* one ordinary owner, or any number of i_file_acl sharers, never both */
		if (nonx > 1 || (nonx > 0 && xattr)) {
			size_t r[2];
			bch_recs(c, r);
			V(INV_BLOCK_OWNED_ONCE, r, 2, "block %llu would be owned twice (owner %u, new pointer from inode %u)",
			  (unsigned long long)c->blk, c->old_owner, c->new_owner);
		}
	}
	chk_report_problems(t, v, INV_BLOCK_OWNED_ONCE);   /* a block an extent tree maps twice */
}

void inv_ptr_marked(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	for (size_t i = 0; i < t->nbch; i++) {
		struct bchange *c = t->bch[i];
		if (!c->adds || bt_static(c->old_type) || c->blk >= fs->blocks_count || c->blk < fs->first_data_block)
			continue;
		if (bch_new_owned(c) && !chk_txn_bbit_new(fs, t, c->blk)) {
			size_t r[2];
			bch_recs(c, r);
			V(INV_PTR_MARKED, r, 2, "block %llu is newly pointed to but free in the block bitmap",
			  (unsigned long long)c->blk);
		}
	}
}

void inv_release_clears(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	for (size_t i = 0; i < t->nbch; i++) {
		struct bchange *c = t->bch[i];
		if (!c->removes || !dyn_owned(c->old_type) || c->blk >= fs->blocks_count)
			continue;
		if (!bch_new_owned(c) && chk_txn_bbit_new(fs, t, c->blk)) {
			size_t r[2];
			bch_recs(c, r);
			V(INV_RELEASE_CLEARS, r, 2, "block %llu lost its last pointer but stays set in the block bitmap",
			  (unsigned long long)c->blk);
		}
	}
}

void inv_bbitmap_set(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	for (size_t i = 0; i < t->nbch; i++) {
		struct bchange *c = t->bch[i];
		if (c->flip_rec == SIZE_MAX || !chk_txn_bbit_new(fs, t, c->blk))
			continue;
		if (bt_static(c->old_type) || !(c->adds && bch_new_owned(c))) {
			size_t r[2];
			bch_recs(c, r);
			V(INV_BBITMAP_SET, r, 2, "block %llu marked in use but no pointer to it appears",
			  (unsigned long long)c->blk);
		}
	}
	(void)fs;
}

void inv_bbitmap_clear(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	for (size_t i = 0; i < t->nbch; i++) {
		struct bchange *c = t->bch[i];
		if (c->flip_rec == SIZE_MAX || chk_txn_bbit_new(fs, t, c->blk))
			continue;
		if (bch_new_owned(c)) {
			size_t r[2];
			bch_recs(c, r);
			V(INV_BBITMAP_CLEAR, r, 2, "block %llu marked free but still %s",
			  (unsigned long long)c->blk, bt_static(c->old_type) ? "static metadata" : "pointed to");
		}
	}
}

/* ------------------------------------------------------------ inodes */

static bool deleted_form(const struct chk_fs *fs, const uint8_t *raw)
{
	const struct ext2_inode *in = (const void *)raw;
	if (in->i_links_count == 0 && in->i_dtime != 0)
		return true;
	for (uint32_t i = 0; i < fs->inode_size; i++)
		if (raw[i])
			return false;
	return true;
}

void inv_ibitmap_set(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	for (size_t i = 0; i < t->nich; i++) {
		struct ichange *ic = t->ich[i];
		if (!(ic->bitflip && ic->new_inuse) || ic->ino < fs->first_ino)
			continue;
		const struct ext2_inode *n = I_NEW(ic);
		/* on the orphan list i_dtime is the chain's next inode, linked
		 * or not (an unlink or a truncate in progress) */
		bool orphan = chk_txn_is_orphan(fs, t, ic->ino);
		if (!chk_mode_type_valid(n->i_mode) || (n->i_links_count == 0 && !orphan) ||
		    (n->i_dtime && !orphan))
			V(INV_IBITMAP_SET, ic->recs, ic->nrecs,
			  "inode %u marked in use but is not a live inode (mode 0%o, links %u, dtime %u)",
			  ic->ino, n->i_mode, n->i_links_count, n->i_dtime);
	}
}

void inv_ibitmap_clear(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	for (size_t i = 0; i < t->nich; i++) {
		struct ichange *ic = t->ich[i];
		if (!(ic->bitflip && !ic->new_inuse) || ic->ino < fs->first_ino)
			continue;
		const struct ext2_inode *n = I_NEW(ic);
		if (n->i_links_count != 0)
			V(INV_IBITMAP_CLEAR, ic->recs, ic->nrecs,
			  "inode %u marked free but still has %u links", ic->ino, n->i_links_count);
	}
}

void inv_dtime_free(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	for (size_t i = 0; i < t->nich; i++) {
		struct ichange *ic = t->ich[i];
		if (!(ic->bitflip && !ic->new_inuse) || ic->ino < fs->first_ino)
			continue;
		if (I_NEW(ic)->i_dtime == 0)
			V(INV_DTIME_FREE, ic->recs, ic->nrecs, "inode %u freed without a deletion time", ic->ino);
	}
}

void inv_free_inode_form(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	for (size_t i = 0; i < t->nich; i++) {
		struct ichange *ic = t->ich[i];
		if (ic->old_inuse || ic->new_inuse || !ic->written)
			continue;
		if (!deleted_form(fs, ic->new))
			V(INV_FREE_INODE_FORM, ic->recs, ic->nrecs,
			  "free inode %u changed into a non-deleted form (links %u, dtime %u)",
			  ic->ino, I_NEW(ic)->i_links_count, I_NEW(ic)->i_dtime);
	}
}

void inv_inode_mode(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	for (size_t i = 0; i < t->nich; i++) {
		struct ichange *ic = t->ich[i];
		if (!ic->new_inuse || !(ic->written || ic->bitflip) || (ic->ino < fs->first_ino && ic->ino != EXT2_ROOT_INO))
			continue;
		const struct ext2_inode *o = I_OLD(ic), *n = I_NEW(ic);
		if (!chk_mode_type_valid(n->i_mode))
			V(INV_INODE_MODE, ic->recs, ic->nrecs, "in-use inode %u has invalid mode 0%o", ic->ino, n->i_mode);
		/* a type change is a free + reallocation (between two snapshots, or
		 * unlink + create in one commit) only if every old name went */
		else if (ic->old_inuse && imode_type(o) != imode_type(n) &&
			 ic->removed_entries < (int32_t)o->i_links_count)
			V(INV_INODE_MODE, ic->recs, ic->nrecs, "in-use inode %u changes file type (0%o -> 0%o)",
			  ic->ino, o->i_mode, n->i_mode);
	}
}

void inv_inode_ext4_fields(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	const struct ext2_super_block *sb = (const void *)t->sb_new;
	for (size_t i = 0; i < t->nich; i++) {
		struct ichange *ic = t->ich[i];
		if (!ic->new_inuse || !(ic->written || ic->bitflip))
			continue;
		/* a flag e2fsck leaves alone may stay where the approved state had it */
		uint32_t kept = ic->old_inuse ? I_OLD(ic)->i_flags : 0;
		const char *why = chk_inode_ext4_fields_problem(fs, I_NEW(ic), kept);
		if (why)
			V(INV_INODE_EXT4_FIELDS, ic->recs, ic->nrecs, "inode %u: %s", ic->ino, why);
		else if (I_NEW(ic)->i_file_acl && !(sb->s_feature_compat & EXT2_FEATURE_COMPAT_EXT_ATTR))
			V(INV_INODE_EXT4_FIELDS, ic->recs, ic->nrecs, "inode %u: i_file_acl set without ext_attr", ic->ino);
	}
	(void)fs;
}

void inv_reserved_inodes(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	static const struct { uint16_t off, len; } times[] = {
		{ offsetof(struct ext2_inode, i_atime), 12 },     /* atime, ctime, mtime */
	};
	for (size_t i = 0; i < t->nich; i++) {
		struct ichange *ic = t->ich[i];
		if (ic->ino >= fs->first_ino)
			continue;
		if (ic->bitflip) {
			V(INV_RESERVED_INODES, ic->recs, ic->nrecs, "reserved inode %u's bitmap bit cleared", ic->ino);
			continue;
		}
		if (!ic->written)
			continue;
		const struct ext2_inode *n = I_NEW(ic);
		if (ic->ino == EXT2_ROOT_INO) {
			if (!is_dir(n) || n->i_links_count < 2 || n->i_dtime)
				V(INV_RESERVED_INODES, ic->recs, ic->nrecs, "the root inode must stay a live directory");
			continue;
		}
		uint8_t a[1024], b[1024];
		size_t len = fs->inode_size < 128 ? fs->inode_size : 128;
		memcpy(a, ic->old, len);
		memcpy(b, ic->new, len);
		memset(a + times[0].off, 0, times[0].len);
		memset(b + times[0].off, 0, times[0].len);
		if (memcmp(a, b, len))
			V(INV_RESERVED_INODES, ic->recs, ic->nrecs, "reserved inode %u changed beyond its timestamps", ic->ino);
	}
}

/* ------------------------------------------------------------ links and entries */

/* dir_nlink, as the kernel's ext4 and e2fsck's pass 4 have it: a directory
 * whose count would pass EXT2_LINK_MAX counts 1 instead, and a 1 stays 1;
 * a linear directory at 1 may take back its true count once it has no
 * more than the maximum (an indexed one may keep 1, which e2fsck accepts). */
static bool dir_nlink_count_ok(const struct ext2_inode *in, int64_t ol, int64_t nl, int delta)
{
	if (nl == 1)
		return ol == 1 || ol + delta > EXT2_LINK_MAX;
	if (ol == 1)
		return delta < 0 && !(in->i_flags & EXT2_INDEX_FL) && nl >= 2 && nl <= EXT2_LINK_MAX;
	return false;
}

void inv_links_count(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	const struct ext2_super_block *sb = (const void *)t->sb_new;
	bool nlink = sb->s_feature_ro_compat & EXT4_FEATURE_RO_COMPAT_DIR_NLINK;
	for (size_t i = 0; i < t->nich; i++) {
		struct ichange *ic = t->ich[i];
		if (!ic->old_inuse && !ic->new_inuse)
			continue;
		if (ic->ino < fs->first_ino && ic->ino != EXT2_ROOT_INO)
			continue;
		int64_t ol = ic->old_inuse ? I_OLD(ic)->i_links_count : 0;
		int64_t nl = ic->new_inuse ? I_NEW(ic)->i_links_count : 0;
		if (nl - ol == ic->entry_delta)
			continue;
		if (nlink && is_dir(I_NEW(ic)) && dir_nlink_count_ok(I_NEW(ic), ol, nl, ic->entry_delta))
			continue;
		V(INV_LINKS_COUNT, ic->recs, ic->nrecs,
		  "inode %u: i_links_count changed by %lld but entries naming it changed by %d",
		  ic->ino, (long long)(nl - ol), ic->entry_delta);
	}
}

void inv_dirent_target(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	for (size_t i = 0; i < t->ndch; i++) {
		struct dchange *d = &t->dch[i];
		bool dotname = !strcmp(d->name, ".") || !strcmp(d->name, "..");
		if (d->new_ino < fs->first_ino && d->new_ino != EXT2_ROOT_INO) {
			V(INV_DIRENT_TARGET, &d->rec, 1, "entry \"%s\" in dir %u names reserved inode %u",
			  d->name, d->dir, d->new_ino);
			continue;
		}
		if (d->new_ino == EXT2_ROOT_INO && !dotname) {
			V(INV_DIRENT_TARGET, &d->rec, 1, "entry \"%s\" in dir %u names the root directory", d->name, d->dir);
			continue;
		}
		struct ichange *ic = chk_txn_inode(fs, t, d->new_ino);
		if (!ic)
			continue;
		if (!ic->new_inuse || !chk_mode_type_valid(I_NEW(ic)->i_mode) || I_NEW(ic)->i_links_count == 0)
			V(INV_DIRENT_TARGET, &d->rec, 1, "entry \"%s\" in dir %u names inode %u, which is not in use",
			  d->name, d->dir, d->new_ino);
	}
}

void inv_dirent_ftype(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	for (size_t i = 0; i < t->ndch; i++) {
		struct dchange *d = &t->dch[i];
		struct ichange *ic = chk_txn_inode(fs, t, d->new_ino);
		if (!ic || !ic->new_inuse)
			continue;
		int want = fs->filetype ? chk_mode_to_ftype(I_NEW(ic)->i_mode) : 0;
		if (want >= 0 && d->new_ft != want)
			V(INV_DIRENT_FTYPE, &d->rec, 1, "entry \"%s\" in dir %u has file type %u, inode %u needs %d",
			  d->name, d->dir, d->new_ft, d->new_ino, want);
	}
}

void inv_dirent_tiling(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_DIRENT_TILING);
}

void inv_dirent_name(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_DIRENT_NAME);
}

void inv_dirent_unique(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_DIRENT_UNIQUE);
}

void inv_dir_dots(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	chk_report_problems(t, v, INV_DIR_DOTS);
	for (size_t i = 0; i < t->ndch; i++) {
		struct dchange *d = &t->dch[i];
		if (strcmp(d->name, ".."))
			continue;
		struct ichange *ic = chk_txn_inode(fs, t, d->new_ino);
		if (ic && ic->new_inuse && !is_dir(I_NEW(ic)))
			V(INV_DIR_DOTS, &d->rec, 1, "dir %u: '..' names inode %u, not a directory", d->dir, d->new_ino);
	}
}

/* the inode named by ".." in dir's block 0 (new state); 0 if unknown */
static uint32_t dotdot_of(struct chk_fs *fs, struct txn *t, struct ichange *dir)
{
	uint64_t b0 = chk_txn_bmap(fs, t, I_NEW(dir), 0);
	if (!b0 || b0 >= fs->blocks_count)
		return 0;
	uint8_t *buf = malloc(fs->bs);
	const uint8_t *d = buf ? chk_txn_new_block(fs, t, b0, buf) : NULL;
	uint32_t ino = 0;
	if (!buf)
		t->err = -ENOMEM;
	struct dirent_hdr e = d ? chk_dirent_at(d) : (struct dirent_hdr){ 0, 0, 0, 0 };
	if (d && chk_dirent_fits(e, 0, fs->bs) && e.rec_len + 12u <= fs->bs) {
		const struct dirent_hdr e2 = chk_dirent_at(d + e.rec_len);
		const uint8_t *name = d + e.rec_len + 8;
		if (e2.name_len == 2 && name[0] == '.' && name[1] == '.')
			ino = e2.inode;
	}
	free(buf);
	return ino;
}

/* The key of an entry in directory dir naming ino, for the set below. */
static uint64_t entry_key(uint32_t dir, uint32_t ino)
{
	return (uint64_t)dir << 32 | ino;
}

static bool is_dot_name(const char *name)
{
	return !strcmp(name, ".") || !strcmp(name, "..");
}

/* Whether the transaction gives directory dir an entry other than "." and
 * ".." naming ino.  The entries are put in a set at the first call: a
 * transaction that makes many directories would otherwise scan every
 * changed entry for each.  (The one key the set cannot hold, all bits set,
 * is looked for by the scan.) */
static bool gains_entry(struct txn *t, struct u64map *set, bool *built, uint32_t dir, uint32_t ino)
{
	if (entry_key(dir, ino) == UINT64_MAX) {
		for (size_t j = 0; j < t->ndch; j++)
			if (t->dch[j].dir == dir && t->dch[j].new_ino == ino && !is_dot_name(t->dch[j].name))
				return true;
		return false;
	}
	if (!*built) {
		*built = true;
		for (size_t j = 0; j < t->ndch; j++) {
			const struct dchange *e = &t->dch[j];
			uint64_t k = entry_key(e->dir, e->new_ino);
			if (!is_dot_name(e->name) && k != UINT64_MAX && chk_u64map_put(set, k, 1)) {
				t->err = -ENOMEM;
				return false;
			}
		}
	}
	return chk_u64map_get(set, entry_key(dir, ino), NULL);
}

void inv_dir_dotdot_parent(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	struct u64map entries = { 0 };
	bool built = false;
	for (size_t i = 0; i < t->ndch && !t->err; i++) {
		struct dchange *d = &t->dch[i];
		if (!strcmp(d->name, ".")) {
			continue;
		} else if (!strcmp(d->name, "..")) {
			/* the new parent must name this directory in the same transaction */
			if (d->dir == EXT2_ROOT_INO) {
				if (d->new_ino != EXT2_ROOT_INO)
					V(INV_DIR_DOTDOT_PARENT, &d->rec, 1, "root's '..' must name the root");
				continue;
			}
			bool found = gains_entry(t, &entries, &built, d->new_ino, d->dir);
			if (t->err)
				break;
			if (!found)
				V(INV_DIR_DOTDOT_PARENT, &d->rec, 1,
				  "dir %u: '..' now names %u, which gains no entry naming it", d->dir, d->new_ino);
		} else {
			struct ichange *ic = chk_txn_inode(fs, t, d->new_ino);
			if (!ic || !ic->new_live || !is_dir(I_NEW(ic)))
				continue;
			uint32_t dd = dotdot_of(fs, t, ic);
			if (dd != d->dir)
				V(INV_DIR_DOTDOT_PARENT, &d->rec, 1,
				  "dir %u is entered as \"%s\" in dir %u but its '..' names %u", d->new_ino, d->name,
				  d->dir, dd);
		}
	}
	chk_u64map_free(&entries);
}

/* A directory moved under a new parent must not become its own ancestor
 * (e2fsck pass 3: loops / unconnected directories).  Walks '..' upwards in
 * the new state: as deep as the tree, not its size. */
void inv_dir_no_loop(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	for (size_t i = 0; i < t->ndch; i++) {
		struct dchange *d = &t->dch[i];
		if (strcmp(d->name, "..") || d->dir == EXT2_ROOT_INO)
			continue;
		uint32_t cur = d->new_ino;
		for (uint32_t steps = 0; steps <= fs->inodes_count; steps++) {
			if (cur == d->dir) {
				V(INV_DIR_NO_LOOP, &d->rec, 1, "dir %u would become its own ancestor (via %u)",
				  d->dir, d->new_ino);
				break;
			}
			if (cur == EXT2_ROOT_INO || cur == 0)
				break;
			struct ichange *ic = chk_txn_inode(fs, t, cur);
			if (!ic || !ic->new_live || !is_dir(I_NEW(ic)))
				break;
			cur = dotdot_of(fs, t, ic);
		}
	}
}

void inv_dir_one_parent(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	for (size_t i = 0; i < t->nich; i++) {
		struct ichange *ic = t->ich[i];
		if (ic->ino == EXT2_ROOT_INO)
			continue;
		bool od = ic->old_live && is_dir(I_OLD(ic)), nd = ic->new_live && is_dir(I_NEW(ic));
		if (!od && !nd)
			continue;
		if (!ic->parent_delta && od == nd)
			continue;
		/* entries of another incarnation (freed and reused inode) do not count */
		int cnt = od && nd ? 1 - ic->parent_removed + ic->parent_added :
			  od ? 1 - ic->parent_removed : ic->parent_added;
		if (cnt != (int)nd)
			V(INV_DIR_ONE_PARENT, ic->recs, ic->nrecs,
			  "directory %u would be named by %d entries (must be %d)", ic->ino, cnt, (int)nd);
	}
}

/* ------------------------------------------------------------ sizes and counts */

void inv_iblocks(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	for (size_t i = 0; i < t->nich; i++) {
		struct ichange *ic = t->ich[i];
		if (!ic->new_inuse || ic->ino == EXT2_RESIZE_INO)
			continue;
		if (!ic->written && !ic->ndata_delta && !ic->nmeta_delta)
			continue;
		if (ic->ino < fs->first_ino && ic->ino != EXT2_ROOT_INO && ic->ino != fs->journal_ino &&
		    ic->ino != EXT2_BAD_INO)
			continue;
		const struct ext2_inode *n = I_NEW(ic);
		int64_t owned = ic->old_inuse ? (int64_t)fs->ndata[ic->ino] + fs->nmeta[ic->ino] : 0;
		owned += ic->ndata_delta + ic->nmeta_delta;
		int64_t with_acl = owned + (chk_inode_file_acl(fs, n) ? 1 : 0);
		if (owned < 0 || !chk_iblocks_ok(fs, n, (uint64_t)with_acl))
			V(INV_IBLOCKS, ic->recs, ic->nrecs, "inode %u: i_blocks %llu but it owns %lld blocks (%lld sectors)",
			  ic->ino, (unsigned long long)chk_inode_iblocks(fs, n), (long long)owned,
			  (long long)(with_acl * (fs->bs / 512)));
	}
}

void inv_dir_size(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	for (size_t i = 0; i < t->nich; i++) {
		struct ichange *ic = t->ich[i];
		const struct ext2_inode *n = I_NEW(ic);
		if (!ic->new_live || !is_dir(n) || (!ic->written && !ic->ndata_delta))
			continue;
		int64_t ndata = (ic->old_inuse ? (int64_t)fs->ndata[ic->ino] : 0) + ic->ndata_delta;
		uint32_t last = 0;
		bool any = chk_txn_last_lblk(fs, t, n, &last, NULL);
		int64_t span = any ? (int64_t)last + 1 : 0;
		uint64_t size = chk_dir_size(fs, n);
		if (size % fs->bs || (int64_t)(size / fs->bs) != ndata || span != ndata || ndata == 0 ||
		    !chk_dir_size_high_ok(fs, n))
			V(INV_DIR_SIZE, ic->recs, ic->nrecs,
			  "dir %u: i_size %llu (i_size_high %u) but it has %lld blocks spanning %lld (holes or wrong size)",
			  ic->ino, (unsigned long long)size, n->i_size_high, (long long)ndata, (long long)span);
	}
}

void inv_file_size(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	for (size_t i = 0; i < t->nich; i++) {
		struct ichange *ic = t->ich[i];
		const struct ext2_inode *n = I_NEW(ic);
		if (!ic->new_inuse || imode_type(n) != 0100000 || (!ic->written && !ic->ndata_delta) ||
		    ic->ino < fs->first_ino)
			continue;
		uint32_t last;
		int64_t last_init;     /* e2fsck: unwritten extents may lie past i_size */
		if (!chk_txn_last_lblk(fs, t, n, &last, &last_init) || last_init < 0)
			continue;
		if (chk_txn_is_orphan(fs, t, ic->ino))
			continue;          /* a truncate in progress may leave blocks past i_size */
		uint64_t size = chk_inode_size64(n);
		if (size < (uint64_t)last_init * fs->bs)
			V(INV_FILE_SIZE, ic->recs, ic->nrecs, "file %u: i_size %llu is below its last block %lld",
			  ic->ino, (unsigned long long)size, (long long)last_init);
	}
}

/* e2fsck pass 1 ("i_size is N, should be M"): a size no indirect-mapped file
 * can reach; and its large_file feature check from 2^31 on.  Orphans too. */
void inv_file_max_size(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	const struct ext2_super_block *nsb = (const void *)t->sb_new;
	bool large = fs->large_file || (nsb->s_feature_ro_compat & EXT2_FEATURE_RO_COMPAT_LARGE_FILE);
	for (size_t i = 0; i < t->nich; i++) {
		struct ichange *ic = t->ich[i];
		const struct ext2_inode *n = I_NEW(ic);
		if (!ic->new_inuse || imode_type(n) != 0100000 || !(ic->written || ic->bitflip) ||
		    ic->ino < fs->first_ino)
			continue;
		const char *why = chk_file_size_problem(fs, n, chk_inode_size64(n), large);
		if (why)
			V(INV_FILE_MAX_SIZE, ic->recs, ic->nrecs, "file %u: i_size %llu %s", ic->ino,
			  (unsigned long long)chk_inode_size64(n), why);
	}
}

void inv_symlink(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	for (size_t i = 0; i < t->nich; i++) {
		struct ichange *ic = t->ich[i];
		const struct ext2_inode *n = I_NEW(ic);
		if (!ic->new_inuse || imode_type(n) != 0120000 || !(ic->written || ic->bitflip))
			continue;
		if (!chk_inode_has_block_ptrs(fs, n)) {
			size_t len = strnlen((const char *)n->i_block, sizeof(n->i_block));
			if (n->i_size_high || n->i_size >= sizeof(n->i_block) || n->i_size != len)   /* e2fsck: size_high 0 */
				V(INV_SYMLINK, ic->recs, ic->nrecs, "fast symlink %u: i_size %u, target length %zu",
				  ic->ino, n->i_size, len);
		} else {
			int64_t ndata = (ic->old_inuse ? (int64_t)fs->ndata[ic->ino] : 0) + ic->ndata_delta;
			if (n->i_size_high || n->i_size == 0 || n->i_size >= fs->bs || ndata != 1 ||
			    !chk_slow_symlink_map_ok(fs, n))
				V(INV_SYMLINK, ic->recs, ic->nrecs, "slow symlink %u: i_size %u with %lld data blocks",
				  ic->ino, n->i_size, (long long)ndata);
		}
	}
}

void inv_special_file(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	for (size_t i = 0; i < t->nich; i++) {
		struct ichange *ic = t->ich[i];
		const struct ext2_inode *n = I_NEW(ic);
		uint16_t ty = imode_type(n);
		if (!ic->new_inuse || !(ic->written || ic->bitflip))
			continue;
		if (ty != 0020000 && ty != 0060000 && ty != 0010000 && ty != 0140000)
			continue;
		if (!chk_iblocks_ok(fs, n, chk_inode_file_acl(fs, n) ? 1 : 0) || n->i_size || n->i_size_high ||
		    (n->i_flags & (EXT2_IMMUTABLE_FL | EXT2_APPEND_FL)))
			V(INV_SPECIAL_FILE, ic->recs, ic->nrecs, "special file %u owns blocks or has a size (i_blocks %u, i_size %u)",
			  ic->ino, n->i_blocks, n->i_size);
	}
}

/* ------------------------------------------------------------ dtime, orphans */

void inv_dtime_live(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	for (size_t i = 0; i < t->nich; i++) {
		struct ichange *ic = t->ich[i];
		if (!ic->new_inuse || !(ic->written || ic->bitflip) || ic->ino < fs->first_ino)
			continue;
		if (I_NEW(ic)->i_dtime && !chk_txn_is_orphan(fs, t, ic->ino))
			V(INV_DTIME_LIVE, ic->recs, ic->nrecs, "in-use inode %u has i_dtime %u and is not on the orphan list",
			  ic->ino, I_NEW(ic)->i_dtime);
	}
}

void inv_orphan_list(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	const struct ext2_super_block *o = (const void *)t->sb_old, *n = (const void *)t->sb_new;
	bool touched = o->s_last_orphan != n->s_last_orphan;
	for (size_t i = 0; i < t->nich && !touched; i++)
		touched = t->ich[i]->written && t->ich[i]->new_inuse && I_NEW(t->ich[i])->i_dtime;
	if (!touched)
		return;
	chk_txn_is_orphan(fs, t, 0);
	if (t->orphan_loop) {
		size_t r = sb_rec_find(t, "s_last_orphan");
		V(INV_ORPHAN_LIST, &r, 1, "the orphan list from s_last_orphan %u loops or reaches a free inode",
		  n->s_last_orphan);
	}
}

/* ------------------------------------------------------------ xattr */

void inv_xattr_refcount(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	uint8_t *buf = malloc(fs->bs);
	if (!buf) {
		t->err = -ENOMEM;
		return;
	}
	for (size_t i = 0; i < t->nbch; i++) {
		struct bchange *c = t->bch[i];
		bool was = c->old_type == BT_XATTR, is = c->adds ? c->new_type == BT_XATTR : was;
		if (!is || (!c->adds && !c->removes && !was))
			continue;
		int64_t oref = was ? c->xattr_old_refs : 0;
		int64_t want = oref + c->xadds - c->xremoves;
		if (want <= 0)
			continue;           /* freed: contents do not matter */
		if (!c->adds && !c->removes) {
			/* content change only: the count must not move */
			want = oref;
		}
		const uint8_t *d = chk_txn_new_block(fs, t, c->blk, buf);
		if (!d)
			continue;
		const struct ext2_ext_attr_header *h = (const void *)d;
		if ((int64_t)h->h_refcount != want)
			V(INV_XATTR_REFCOUNT, &c->rec, 1, "xattr block %llu: h_refcount %u but %lld inodes point to it",
			  (unsigned long long)c->blk, h->h_refcount, (long long)want);
	}
	free(buf);
}

/* An entry's hash over its name and value words, as e2fsck computes it:
 * the name's bytes unsigned, or signed (what some kernels wrote). */
static uint32_t xattr_entry_hash(const uint8_t *name, unsigned nlen, const uint8_t *value, uint32_t vsize,
				 bool signed_name)
{
	uint32_t h = 0;
	for (unsigned i = 0; i < nlen; i++) {
		uint32_t c = signed_name ? (uint32_t)(int32_t)(int8_t)name[i] : name[i];
		h = (h << 5) ^ (h >> 27) ^ c;
	}
	for (uint32_t i = 0; i < (vsize + 3) / 4; i++)
		h = (h << 16) ^ (h >> 16) ^ chk_ld32(value + 4 * (size_t)i);
	return h;
}

/* What is wrong with an xattr block's format (NULL if fine): the header,
 * then the entry list (inside the block, ending in a zero word) and the
 * values (inside the block, after the entries), each entry's name index
 * and hash as e2fsck checks them.  Shared with the scan. */
const char *chk_xattr_block_problem(const struct chk_fs *fs, const uint8_t *d)
{
	struct ext2_ext_attr_header h;
	memcpy(&h, d, sizeof(h));
	if (h.h_magic != EXT2_EXT_ATTR_MAGIC)
		return "bad h_magic";
	if (h.h_blocks != 1)
		return "h_blocks is not 1";
	uint32_t off = sizeof(h), min_val = fs->bs;
	for (;;) {
		if (off + 4 > fs->bs)
			return "entries run past the block";
		if (!chk_ld32(d + off))
			break;
		if (off + sizeof(struct ext2_ext_attr_entry) > fs->bs)
			return "entry header past the block";
		struct ext2_ext_attr_entry e;
		memcpy(&e, d + off, sizeof(e));
		if (off + EXT2_EXT_ATTR_LEN(e.e_name_len) > fs->bs)
			return "entry name past the block";
		if (e.e_value_inum)
			return "value in an inode (ea_inode)";
		if ((uint64_t)e.e_value_offs + (e.e_value_size + 3) / 4 * 4 > fs->bs)   /* e2fsck: even of an empty value */
			return "value past the block";
		if (e.e_name_index == 0)
			return "an entry without a name index";
		const uint8_t *nm = d + off + sizeof(struct ext2_ext_attr_entry), *val = e.e_value_size ? d + e.e_value_offs : d;
		if (e.e_hash != xattr_entry_hash(nm, e.e_name_len, val, e.e_value_size, false) &&
		    e.e_hash != xattr_entry_hash(nm, e.e_name_len, val, e.e_value_size, true))
			return "an entry's hash does not match its name and value";
		if (e.e_value_size && e.e_value_offs < min_val)
			min_val = e.e_value_offs;
		off += EXT2_EXT_ATTR_LEN(e.e_name_len);
	}
	if (off + 4 > min_val)
		return "entries overlap values";
	return NULL;
}

void inv_xattr_format(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	uint8_t *buf = malloc(fs->bs);
	if (!buf) {
		t->err = -ENOMEM;
		return;
	}
	for (size_t i = 0; i < t->nbch; i++) {
		struct bchange *c = t->bch[i];
		bool was = c->old_type == BT_XATTR, is = c->adds ? c->new_type == BT_XATTR : was;
		if (!is || c->blk >= fs->blocks_count || bt_static(c->old_type))
			continue;
		if (xattr_refs_new(c) <= 0)
			continue;
		const uint8_t *d = chk_txn_new_block(fs, t, c->blk, buf);
		if (!d)
			continue;
		const char *why = chk_xattr_block_problem(fs, d);
		if (why)
			V(INV_XATTR_FORMAT, &c->rec, 1, "xattr block %llu: %s", (unsigned long long)c->blk, why);
	}
	free(buf);
}

/* ------------------------------------------------------------ htree */

/* The journal superblock is journal data to the block map, but e2fsck
 * refuses a bad one: check it whenever a transaction writes it. */
void inv_journal_sb(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	uint64_t b0, nblocks;
	uint32_t idx;
	int r = chk_journal_head(fs, &b0, &nblocks);
	if (r && r != -ENOENT)
		t->err = r;
	if (r || !chk_u64map_get(&t->bidx, b0, &idx) ||
	    !t->blocks[idx].changed)
		return;                  /* not written by this transaction */
	/* written by this transaction: its new contents are in hand */
	const char *why = chk_journal_sb_problem(fs, t->blocks[idx].new, nblocks);
	if (why)
		V(INV_JOURNAL_SB, NULL, 0, "journal superblock (block %llu): %s", (unsigned long long)b0, why);
}

void inv_htree_root(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_HTREE_ROOT);
}
void inv_htree_hash_version(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_HTREE_HASH_VERSION);
}
void inv_htree_depth(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_HTREE_DEPTH);
}
void inv_htree_count_limit(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_HTREE_COUNT_LIMIT);
}
void inv_htree_hash_order(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_HTREE_HASH_ORDER);
}
void inv_htree_blocks(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_HTREE_BLOCKS);
}
void inv_htree_node(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_HTREE_NODE);
}
void inv_htree_flag(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_HTREE_FLAG);
}

/* ------------------------------------------------------------ the table */

static const struct inv_row table[] = {
#define INV(id, fn, description, state) { { #id, description, (state) ? (state) : (description) }, fn },
#include "invariants.def"
#undef INV
};
_Static_assert(sizeof(table) / sizeof(table[0]) == CHK_NINV, "one row per enum chk_inv");
#define NINV (sizeof(table) / sizeof(table[0]))

size_t chk_invariant_count(void)
{
	return NINV;
}

const struct chk_invariant *chk_invariant_at(size_t i)
{
	return i < NINV ? &table[i].pub : NULL;
}

void chk_run_invariants(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	for (size_t i = 0; i < NINV; i++)
		table[i].fn(fs, t, v);
}
