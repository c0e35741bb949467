/*
 * checker/orphan_file.c - the orphan file's entries (orphan_file): each
 * block of the file holds 4-byte slots, each 0 or the number of an orphan
 * inode (unlinked while open, or a truncate spanning transactions).  The
 * entries of a state join the orphan list's as the inodes that may be in
 * use without links (or with blocks past i_size), and are checked: each
 * names an inode in use, none twice (nor one the list holds), and while any
 * is non-zero RO_COMPAT_ORPHAN_PRESENT is set, for the kernel and e2fsck
 * read the file only then.  The converse is not required: the kernel
 * keeps the flag set while mounted, so an image of a crash has it set over
 * an empty file (e2fsck clears it).  The tail's magic and checksum are
 * invariants_ext4.c's (transactions) and scan_ext4.c's (scans).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chk_ext4.h"

#define V(id, recs, n, ...) chk_verdict_add_violation(v, id, recs, n, __VA_ARGS__)

static bool present(const uint8_t *sb)
{
	return ((const struct ext2_super_block *)sb)->s_feature_ro_compat & EXT4_FEATURE_RO_COMPAT_ORPHAN_PRESENT;
}

/* the record to name for block blk: its change of owner, if any */
static size_t rec_of(struct txn *t, uint64_t blk)
{
	struct bchange *c = chk_txn_bch_find(t, blk);
	return c ? c->rec : SIZE_MAX;
}

static void entry(struct chk_fs *fs, struct txn *t, uint32_t ino, uint32_t lblk, uint64_t pblk)
{
	const char *why = NULL;
	struct ichange *ic = NULL;
	if (ino < fs->first_ino || ino > fs->inodes_count)
		why = "is reserved or past the inode count";
	else if (chk_u64map_get(&t->orphans, ino, NULL))
		why = "is named twice (or is on the orphan list too)";
	else if (!(ic = chk_txn_inode(fs, t, ino)))
		return;                        /* t->err set */
	else if (!ic->new_inuse)
		why = "is not in use";
	if (why) {
		chk_txn_problem(t, INV_ORPHAN_ENTRY, rec_of(t, pblk), "orphan file block %u (%llu) names inode %u, which %s",
				lblk, (unsigned long long)pblk, ino, why);
		return;
	}
	if (chk_u64map_put(&t->orphans, ino, 1))
		t->err = -ENOMEM;
	t->ofile_used++;
}

void chk_txn_orphan_file(struct chk_fs *fs, struct txn *t)
{
	uint32_t ino = fs->orphan_file_ino;
	if (!ino || ino > fs->inodes_count)
		return;
	struct ichange *ic = chk_txn_inode(fs, t, ino);
	if (!ic || !ic->new_inuse)
		return;                        /* INV_ORPHAN_FILE's */
	const struct ext2_inode *in = (const void *)ic->new;
	uint64_t size = chk_inode_size64(in);
	uint8_t *buf = malloc(fs->bs);
	if (!buf) {
		t->err = -ENOMEM;
		return;
	}
	uint32_t per_block = (fs->bs - 8) / 4;
	for (uint64_t lb = 0; lb < size / fs->bs && lb <= UINT32_MAX && !t->err; lb++) {
		uint64_t pb = chk_txn_bmap(fs, t, in, (uint32_t)lb);
		if (!pb || pb >= fs->blocks_count)
			continue;                  /* a hole: INV_ORPHAN_FILE's */
		const uint8_t *d = chk_txn_new_block(fs, t, pb, buf);
		if (!d)
			break;
		for (uint32_t s = 0; s < per_block && !t->err; s++) {
			uint32_t e = chk_ld32(d + 4 * s);
			if (e)
				entry(fs, t, e, (uint32_t)lb, pb);
		}
	}
	free(buf);
}

/* Does t write a block of the orphan file, or free an inode (an entry
 * naming it would name a free inode)? */
static bool touches_entries(struct chk_fs *fs, struct txn *t)
{
	for (size_t i = 0; i < t->nich; i++)
		if (t->ich[i]->old_inuse && !t->ich[i]->new_inuse)
			return true;
	for (size_t i = 0; i < t->nblocks; i++) {
		uint32_t owner = 0, lblk = 0;
		const struct tblock *b = &t->blocks[i];
		if (b->changed && b->blk < fs->blocks_count &&
		    chk_new_type_of(fs, t, b->blk, &owner, &lblk) == BT_DATA && owner == fs->orphan_file_ino)
			return true;
	}
	return false;
}

void inv_orphan_entry(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	if (fs->orphan_file_ino && touches_entries(fs, t))
		chk_txn_is_orphan(fs, t, 0);
	chk_report_problems(t, v, INV_ORPHAN_ENTRY);
}

static size_t sb_rec(struct txn *t, struct chk_verdict *v)
{
	for (size_t i = 0; i < t->nsb_recs; i++)
		if (!strcmp(v->recs[t->sb_recs[i]].field, "s_feature_ro_compat"))
			return t->sb_recs[i];
	return SIZE_MAX;
}

void inv_orphan_present(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	if (!fs->orphan_file_ino)
		return;       /* the flag without the file: INV_SB_FEATURES */
	bool cleared = t->sb_changed && present(t->sb_old) && !present(t->sb_new);
	if (!cleared && !touches_entries(fs, t))
		return;
	chk_txn_is_orphan(fs, t, 0);
	if (t->ofile_used && !present(t->sb_changed ? t->sb_new : fs->sb_raw)) {
		size_t r = sb_rec(t, v);
		V(INV_ORPHAN_PRESENT, &r, r != SIZE_MAX, "the orphan file holds %u entries but ORPHAN_PRESENT is clear",
		  t->ofile_used);
	}
}

void chk_scan_orphan_present(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	if (!fs->orphan_file_ino)
		return;
	chk_txn_is_orphan(fs, t, 0);
	if (t->ofile_used && !present(fs->sb_raw))
		chk_verdict_add_violation(v, INV_ORPHAN_PRESENT, NULL, 0,
					  "the orphan file holds %u entries but ORPHAN_PRESENT is clear", t->ofile_used);
}
