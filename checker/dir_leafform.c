/*
 * checker/dir_leafform.c - INV_DIR_LEAF_FORM: with metadata_csum, a
 * directory without the index flag holds leaf blocks only.  An index root or
 * node ends in a dx tail, not in the 12-byte leaf tail a linear directory's
 * blocks need, so a directory that loses its htree (the driver keeps
 * directories linear) must have every former index block rewritten as a
 * leaf; a block left in index form is one e2fsck and the kernel reject.
 * Without metadata_csum index blocks read as empty leaves: nothing to check.
 */
#include <errno.h>
#include <stdlib.h>

#include "chk_ext4.h"

static bool is_dir(const struct ext2_inode *in) { return imode_type(in) == 0040000; }

/* Every block of dir (losing its index flag in t): none in index form. */
static void walk_deindexed(struct chk_fs *fs, struct txn *t, struct chk_verdict *v, const struct ichange *ic,
			   uint8_t *buf)
{
	const struct ext2_inode *in = (const void *)ic->new;
	uint32_t nblocks = chk_dir_blocks(fs, in);
	for (uint32_t lb = 0; lb < nblocks && !t->err; lb++) {
		uint64_t pb = chk_txn_bmap(fs, t, in, lb);
		if (!pb || pb >= fs->blocks_count)
			continue;              /* a hole or a bad pointer: reported as such */
		const uint8_t *d = chk_txn_new_block(fs, t, pb, buf);
		if (!d) {
			t->err = -EIO;
			return;
		}
		if (chk_dir_block_is_dx(d, fs->bs)) {
			chk_verdict_add_violation(v, INV_DIR_LEAF_FORM, ic->recs, ic->nrecs,
						  "dir %u loses its index flag but its block %u (%llu) keeps an index block's form",
						  ic->ino, lb, (unsigned long long)pb);
			return;
		}
	}
}

void inv_dir_leaf_form(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	if (!fs->csum.metadata_csum)
		return;
	uint8_t *buf = malloc(fs->bs);
	if (!buf) {
		t->err = -ENOMEM;
		return;
	}
	for (size_t i = 0; i < t->nich && !t->err; i++) {
		const struct ichange *ic = t->ich[i];
		const struct ext2_inode *o = (const void *)ic->old, *n = (const void *)ic->new;
		if (ic->new_live && is_dir(n) && !(n->i_flags & EXT2_INDEX_FL) && ic->old_live && is_dir(o) &&
		    (o->i_flags & EXT2_INDEX_FL))
			walk_deindexed(fs, t, v, ic, buf);
	}
	free(buf);
	/* blocks written into directories that stay without the flag */
	for (size_t i = 0; i < t->nblocks && !t->err; i++) {
		const struct tblock *b = &t->blocks[i];
		uint32_t owner = 0, lblk = 0;
		if (!b->changed || b->blk >= fs->blocks_count ||
		    chk_new_type_of(fs, t, b->blk, &owner, &lblk) != BT_DIR)
			continue;
		const struct ichange *ic = chk_txn_inode(fs, t, owner);
		const struct ext2_inode *n = ic ? (const void *)ic->new : NULL;
		if (!n || !ic->new_live || (n->i_flags & EXT2_INDEX_FL) || !chk_dir_block_is_dx(b->new, fs->bs))
			continue;
		struct bchange *c = chk_txn_bch_find(t, b->blk);
		size_t rec = c ? c->rec : SIZE_MAX;
		chk_verdict_add_violation(v, INV_DIR_LEAF_FORM, &rec, 1,
					  "dir %u block %u (%llu): an index block in a directory without the index flag",
					  owner, lblk, (unsigned long long)b->blk);
	}
}
