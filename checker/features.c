/*
 * checker/features.c - the ext2/3/4 feature bits, and for each whether the
 * driver writes images that carry it and whether the checker models it.
 *
 * One table, read by the driver's read-write gate and by the checker's
 * attach, so the two cannot disagree: a bit the table does not name is
 * unknown to both and refused by both.  Names are mke2fs's (-O NAME).
 */
#include "checker.h"

#include <stdio.h>
#include <ext2fs/ext2_fs.h>

#define ROW(w, m, n, wr, mo) { .word = (w), .mask = (m), .name = (n), .written = (wr), .modelled = (mo) }

static const struct chk_feature table[] = {
	/* compatible: an unknown one would not stop the kernel from writing,
	 * but each of these asks the writer to keep something up to date */
	ROW(CHK_COMPAT, EXT2_FEATURE_COMPAT_DIR_PREALLOC, "dir_prealloc", true, true),
	ROW(CHK_COMPAT, EXT2_FEATURE_COMPAT_IMAGIC_INODES, "imagic_inodes", true, true),
	ROW(CHK_COMPAT, EXT3_FEATURE_COMPAT_HAS_JOURNAL, "has_journal", true, true),
	ROW(CHK_COMPAT, EXT2_FEATURE_COMPAT_EXT_ATTR, "ext_attr", true, true),
	ROW(CHK_COMPAT, EXT2_FEATURE_COMPAT_RESIZE_INODE, "resize_inode", true, true),
	ROW(CHK_COMPAT, EXT2_FEATURE_COMPAT_DIR_INDEX, "dir_index", true, true),
	ROW(CHK_COMPAT, EXT2_FEATURE_COMPAT_LAZY_BG, "lazy_bg", false, false),
	ROW(CHK_COMPAT, EXT2_FEATURE_COMPAT_EXCLUDE_BITMAP, "snapshot_bitmap", false, false),
	/* superblock copies only where s_backup_bgs says: the driver writes
	 * the primary alone, libext2fs's bitmaps keep the copies allocated */
	ROW(CHK_COMPAT, EXT4_FEATURE_COMPAT_SPARSE_SUPER2, "sparse_super2", true, true),
	ROW(CHK_COMPAT, EXT4_FEATURE_COMPAT_FAST_COMMIT, "fast_commit", false, false),
	/* a promise never to renumber inodes: the driver never does */
	ROW(CHK_COMPAT, EXT4_FEATURE_COMPAT_STABLE_INODES, "stable_inodes", true, true),
	/* orphans recorded in the file (fuse/orphan_file.c, checker/orphan_file.c) */
	ROW(CHK_COMPAT, EXT4_FEATURE_COMPAT_ORPHAN_FILE, "orphan_file", true, true),

	ROW(CHK_RO_COMPAT, EXT2_FEATURE_RO_COMPAT_SPARSE_SUPER, "sparse_super", true, true),
	ROW(CHK_RO_COMPAT, EXT2_FEATURE_RO_COMPAT_LARGE_FILE, "large_file", true, true),
	/* libext2fs keeps i_blocks_hi and descriptor checksums */
	ROW(CHK_RO_COMPAT, EXT4_FEATURE_RO_COMPAT_HUGE_FILE, "huge_file", true, true),
	ROW(CHK_RO_COMPAT, EXT4_FEATURE_RO_COMPAT_GDT_CSUM, "uninit_bg", true, true),
	ROW(CHK_RO_COMPAT, EXT4_FEATURE_RO_COMPAT_DIR_NLINK, "dir_nlink", true, true),
	ROW(CHK_RO_COMPAT, EXT4_FEATURE_RO_COMPAT_EXTRA_ISIZE, "extra_isize", true, true),
	ROW(CHK_RO_COMPAT, EXT4_FEATURE_RO_COMPAT_HAS_SNAPSHOT, "snapshot", false, false),
	ROW(CHK_RO_COMPAT, EXT4_FEATURE_RO_COMPAT_QUOTA, "quota", false, false),
	ROW(CHK_RO_COMPAT, EXT4_FEATURE_RO_COMPAT_BIGALLOC, "bigalloc", false, false),
	ROW(CHK_RO_COMPAT, EXT4_FEATURE_RO_COMPAT_METADATA_CSUM, "metadata_csum", true, true),
	ROW(CHK_RO_COMPAT, EXT4_FEATURE_RO_COMPAT_REPLICA, "replica", false, false),
	ROW(CHK_RO_COMPAT, EXT4_FEATURE_RO_COMPAT_READONLY, "read-only", false, false),
	ROW(CHK_RO_COMPAT, EXT4_FEATURE_RO_COMPAT_PROJECT, "project", false, false),
	ROW(CHK_RO_COMPAT, EXT4_FEATURE_RO_COMPAT_SHARED_BLOCKS, "shared_blocks", false, false),
	ROW(CHK_RO_COMPAT, EXT4_FEATURE_RO_COMPAT_VERITY, "verity", false, false),
	/* set while the orphan file holds entries, as the kernel's mount leaves it */
	ROW(CHK_RO_COMPAT, EXT4_FEATURE_RO_COMPAT_ORPHAN_PRESENT, "orphan_present", true, true),

	ROW(CHK_INCOMPAT, EXT2_FEATURE_INCOMPAT_COMPRESSION, "compression", false, false),
	ROW(CHK_INCOMPAT, EXT2_FEATURE_INCOMPAT_FILETYPE, "filetype", true, true),
	ROW(CHK_INCOMPAT, EXT3_FEATURE_INCOMPAT_RECOVER, "needs_recovery", true, true),
	ROW(CHK_INCOMPAT, EXT3_FEATURE_INCOMPAT_JOURNAL_DEV, "journal_dev", false, false),
	/* libext2fs writes each metagroup's descriptor block and its two
	 * copies (io/flush.c); checker/layout_meta.c places them */
	ROW(CHK_INCOMPAT, EXT2_FEATURE_INCOMPAT_META_BG, "meta_bg", true, true),
	/* the driver maps extent files itself (fuse/extmap.c); libext2fs keeps
	 * 64-bit block numbers and descriptors, flex_bg placement and every
	 * metadata_csum checksum */
	ROW(CHK_INCOMPAT, EXT3_FEATURE_INCOMPAT_EXTENTS, "extent", true, true),
	ROW(CHK_INCOMPAT, EXT4_FEATURE_INCOMPAT_64BIT, "64bit", true, true),
	ROW(CHK_INCOMPAT, EXT4_FEATURE_INCOMPAT_MMP, "mmp", false, false),
	ROW(CHK_INCOMPAT, EXT4_FEATURE_INCOMPAT_FLEX_BG, "flex_bg", true, true),
	ROW(CHK_INCOMPAT, EXT4_FEATURE_INCOMPAT_EA_INODE, "ea_inode", false, false),
	ROW(CHK_INCOMPAT, EXT4_FEATURE_INCOMPAT_DIRDATA, "dirdata", false, false),
	ROW(CHK_INCOMPAT, EXT4_FEATURE_INCOMPAT_CSUM_SEED, "metadata_csum_seed", true, true),
	/* a third htree level and directory sizes in i_size_high
	 * (large_dir.c); the driver keeps directories it changes linear */
	ROW(CHK_INCOMPAT, EXT4_FEATURE_INCOMPAT_LARGEDIR, "large_dir", true, true),
	ROW(CHK_INCOMPAT, EXT4_FEATURE_INCOMPAT_INLINE_DATA, "inline_data", false, false),
	ROW(CHK_INCOMPAT, EXT4_FEATURE_INCOMPAT_ENCRYPT, "encrypt", false, false),
	ROW(CHK_INCOMPAT, EXT4_FEATURE_INCOMPAT_CASEFOLD, "casefold", false, false),
};

const struct chk_feature *chk_features(size_t *n)
{
	*n = sizeof(table) / sizeof(table[0]);
	return table;
}

static const char *const word_names[] = { "compatible", "read-only-compatible", "incompatible" };

const char *chk_feature_missing(const uint32_t words[3], unsigned need, char *buf, size_t len)
{
	/* incompatible first: the feature that matters most to a reader */
	for (int w = CHK_INCOMPAT; w >= CHK_COMPAT; w--) {
		uint32_t left = words[w];
		for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
			const struct chk_feature *f = &table[i];
			if ((int)f->word != w || !(words[w] & f->mask))
				continue;
			left &= ~f->mask;
			if (((need & CHK_NEED_WRITTEN) && !f->written) ||
			    ((need & CHK_NEED_MODELLED) && !f->modelled))
				return f->name;
		}
		if (left) {
			snprintf(buf, len, "an unknown %s feature (0x%x)", word_names[w], left);
			return buf;
		}
	}
	return NULL;
}
