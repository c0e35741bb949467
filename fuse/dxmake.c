/*
 * fuse/dxmake.c - indexing a directory of one block, the way the kernel's
 * ext4 indexes one that a new name does not fit (make_indexed_dir): block
 * 0 becomes the dx root and keeps only "." and ".."; the entries after
 * ".." move, as they are, to the start of a new leaf, block 1 (the last
 * one stretched to the leaf's end), which is split as a full leaf splits
 * (dxsplit.c) into itself and block 2, the upper hashes in block 2; the
 * root holds the two index entries.  The caller then adds the name through
 * the index (dx_probe), as the kernel adds it after its split.  Moving the
 * entries first matters: the split weighs each by its rec_len, and the
 * last one's grew by the bytes "." and ".." held.
 *
 * The root: "." (12 bytes) and ".." over the rest of the block, then
 * dx_root_info (reserved_zero 0, hash_version the superblock's default,
 * info_length 8, indirect_levels 0, unused_flags 0) at offset 24, then
 * dx_countlimit at 32 (limit: the 8-byte entries from there to the block's
 * end, one less under metadata_csum for the dx tail; count 2), whose last 4
 * bytes are entry 0's block, then entry 1 (hash, block).  The rest is
 * zeroes; ext2fs_write_dir_block4 fills in the dx tail's checksum, and the
 * leaves' tails (dx_blocks' write).  The kernel leaves the bytes of block
 * 0's old leaf tail in the root's dx tail (dt_reserved); e2fsck -D writes
 * zeroes there, as this does: nothing interprets them (the checksum covers
 * whatever they hold).
 *
 * Readdir positions: the kernel reads a one-block directory on a dir_index
 * file system in hash order already (its readdir takes it for an indexed
 * one), by the default hash the new root records; dirindex.c does the same
 * (dx_default_version), so a reader's hash cookie holds across the change.
 *
 * Errors: 0 or -errno, as declared in dirindex.h.  Threads: the caller
 * holds the file-system lock.
 */
#include "dirindex.h"

#include <errno.h>
#include <string.h>

static void st16(char *p, uint16_t v) { memcpy(p, &v, 2); }
static void st32(char *p, uint32_t v) { memcpy(p, &v, 4); }

int dx_default_version(ext2_filsys fs)
{
	int version = fs->super->s_def_hash_version;

	if (!ext2fs_has_feature_dir_index(fs->super) || version > EXT2_HASH_TEA)
		return -1;
	if (fs->super->s_flags & EXT2_FLAGS_UNSIGNED_HASH)
		version += EXT2_HASH_LEGACY_UNSIGNED - EXT2_HASH_LEGACY;
	return version;
}

/* "." and ".." as the first two entries of blk, as e2fsck wants them (the
 * root keeps them at fixed offsets); -EIO otherwise. */
static int find_dots(ext2_filsys fs, char *blk, struct dirent_view dots[2])
{
	struct dirblock_cursor c;

	dirblock_cursor_init(&c, fs, blk);
	for (unsigned int i = 0; i < 2; i++) {
		struct dirent_view *e = &dots[i];

		if (dirblock_cursor_next(&c, e) != 1 || e->ino == 0 || e->name_len != i + 1 ||
		    memcmp(e->de->name, "..", i + 1))
			return -EIO;
	}
	return 0;
}

/* Where a leaf's entries end: before its tail under metadata_csum. */
static unsigned int leaf_end(ext2_filsys fs)
{
	if (ext2fs_has_feature_metadata_csum(fs->super))
		return fs->blocksize - sizeof(struct ext2_dir_entry_tail);
	return fs->blocksize;
}

/* The entries of root after "..", moved to the start of leaf as they are,
 * the last one stretched to the leaf's end.  -EAGAIN if there are none,
 * -EIO for a block without its tail under metadata_csum. */
static int entries_after_dots(ext2_filsys fs, char *root, const struct dirent_view *dotdot, char *leaf)
{
	unsigned int start = dotdot->off + dotdot->rec_len, last = 0;
	struct dirblock_cursor c;
	struct dirent_view e;
	int rc;

	dirblock_cursor_init(&c, fs, root);
	while ((rc = dirblock_cursor_next(&c, &e)) == 1)
		last = e.off;
	if (rc < 0 || c.end != leaf_end(fs))
		return rc < 0 ? rc : -EIO;
	if (last < start)
		return -EAGAIN;
	memset(leaf, 0, fs->blocksize);
	memcpy(leaf, root + start, c.end - start);
	if (leaf_end(fs) != fs->blocksize)
		ext2fs_initialize_dirent_tail(fs, EXT2_DIRENT_TAIL(leaf, fs->blocksize));
	return ext2fs_set_rec_len(fs, leaf_end(fs) - (last - start), (struct ext2_dir_entry *)(leaf + last - start)) ?
		       -EIO : 0;
}

/* An empty leaf: one unused entry over the block (up to its tail). */
static int leaf_empty(ext2_filsys fs, char *blk)
{
	memset(blk, 0, fs->blocksize);
	if (leaf_end(fs) != fs->blocksize)
		ext2fs_initialize_dirent_tail(fs, EXT2_DIRENT_TAIL(blk, fs->blocksize));
	return ext2fs_set_rec_len(fs, leaf_end(fs), (struct ext2_dir_entry *)blk) ? -EIO : 0;
}

/* The dx root in root (whose "." and ".." are dots): entry 0 to block 1,
 * entry 1 from split_hash on to block 2. */
static int root_init(ext2_filsys fs, char *root, const struct dirent_view dots[2], uint32_t split_hash)
{
	struct ext2_dx_root_info *ri = (struct ext2_dx_root_info *)(root + 24);
	ext2_ino_t ino[2] = { dots[0].ino, dots[1].ino };
	int ftype[2] = { dots[0].ftype, dots[1].ftype };
	unsigned int limit = (fs->blocksize - 32) / 8;

	if (ext2fs_has_feature_metadata_csum(fs->super))
		limit--;
	memset(root, 0, fs->blocksize);
	for (unsigned int i = 0; i < 2; i++) {
		struct ext2_dir_entry *de = (struct ext2_dir_entry *)(root + 12 * i);

		dirent_fill(fs, de, "..", i + 1, ino[i], ftype[i]);
		if (ext2fs_set_rec_len(fs, i ? fs->blocksize - 12 : 12, de))
			return -EIO;
	}
	ri->hash_version = fs->super->s_def_hash_version;
	ri->info_length = sizeof(*ri);
	st16(root + 32, (uint16_t)limit);
	st16(root + 34, 2);
	st32(root + 36, 1);
	st32(root + 40, split_hash);
	st32(root + 44, 2);
	return 0;
}

static int set_index_flag(ext2_filsys fs, ext2_ino_t dir)
{
	struct ext2_inode inode;
	errcode_t err = ext2fs_read_inode(fs, dir, &inode);

	if (!err) {
		inode.i_flags |= EXT2_INDEX_FL;
		err = ext2fs_write_inode(fs, dir, &inode);
	}
	return err ? dir_errno(err) : 0;
}

int dx_make_index(ext2_filsys fs, ext2_ino_t dir, const struct dx_blocks *b, char *scratch,
		  struct dx_split *split)
{
	char *root = scratch, *lo = root + fs->blocksize, *hi = lo + fs->blocksize, *empty = hi + fs->blocksize;
	int version = dx_default_version(fs);
	struct dirent_view dots[2];
	uint32_t split_hash, lblk[2] = { 0, 0 };
	int rc;

	*split = (struct dx_split){ .leaf = false };
	if (version < 0)
		return -EAGAIN;
	rc = b->read(b->ctx, 0, root);
	if (!rc)
		rc = find_dots(fs, root, dots);
	if (!rc)
		rc = entries_after_dots(fs, root, &dots[1], lo);
	if (!rc)
		rc = dx_split_leaf(fs, version, lo, lo, hi, &split_hash);
	if (!rc)
		rc = leaf_empty(fs, empty);
	/* The two blocks are added empty before any name moves: an allocation
	 * that fails leaves a linear directory with all its names. */
	for (unsigned int i = 0; i < 2 && !rc; i++)
		rc = b->append(b->ctx, empty, &lblk[i]);
	if (!rc && (lblk[0] != 1 || lblk[1] != 2))
		rc = -EIO;
	if (!rc)
		rc = b->write(b->ctx, 1, lo);
	if (!rc)
		rc = b->moved(b->ctx, 1, lo);
	if (!rc)
		rc = b->write(b->ctx, 2, hi);
	if (!rc)
		rc = b->moved(b->ctx, 2, hi);
	if (!rc)
		rc = root_init(fs, root, dots, split_hash);
	if (!rc)
		rc = b->write(b->ctx, 0, root);
	if (!rc)
		rc = set_index_flag(fs, dir);
	if (!rc)
		*split = (struct dx_split){ .leaf = true, .lo = 1, .hi = 2, .hash = split_hash };
	return rc;
}
