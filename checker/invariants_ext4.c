/*
 * checker/invariants_ext4.c - the check functions of the ext4 rows of the
 * invariant table (invariants.def): uninitialised groups, extent trees and
 * metadata checksums.  Each looks at what the transaction changes (facts
 * diff.c and diff_ext4.c computed), as invariants.c does for ext2/ext3.
 */
#include "chk_ext4.h"

void inv_bgd_uninit(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_BGD_UNINIT);
}

void inv_extent_tree(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_EXTENT_TREE);
}

void inv_csum_sb(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_CSUM_SB);
}

void inv_csum_bgd(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_CSUM_BGD);
}

void inv_csum_bitmap(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_CSUM_BITMAP);
}

void inv_csum_inode(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_CSUM_INODE);
}

void inv_csum_extent(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_CSUM_EXTENT);
}

void inv_csum_dir(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_CSUM_DIR);
}

void inv_csum_xattr(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_CSUM_XATTR);
}

void inv_orphan_file(struct chk_fs *fs, struct txn *t, struct chk_verdict *v)
{
	(void)fs;
	chk_report_problems(t, v, INV_ORPHAN_FILE);
}
