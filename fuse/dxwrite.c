/*
 * fuse/dxwrite.c - turning the index blocks of an htree directory into
 * ordinary directory blocks, for the first change to such a directory
 * (dirindex.c keeps directories linear; see dirindex.h).
 *
 * Without metadata_csum nothing needs rewriting: a dx root reads as "." and
 * a ".." covering the rest of the block, a dx node as one empty entry over
 * the whole block.  With metadata_csum those blocks end in a dx tail (the
 * checksum of the index entries), and a leaf block of a linear directory
 * must end in a 12-byte dirent tail instead: e2fsck and the kernel reject a
 * linear directory block without one.  So each index block is rewritten in
 * leaf form, empty but for "." and ".." in the root; the caller writes it
 * through ext2fs_write_dir_block4, which computes the leaf checksum.
 *
 * Errors: 0 or -errno.  Threads: the caller holds the file-system lock.
 */
#include "dirindex.h"

#include <errno.h>
#include <string.h>

/* rec_len of the entry at off, or 0 if it cannot be decoded. */
static unsigned int rec_len_at(ext2_filsys fs, char *buf, unsigned int off)
{
	unsigned int rec_len;

	if (ext2fs_get_rec_len(fs, (struct ext2_dir_entry *)(buf + off), &rec_len))
		return 0;
	return rec_len;
}

unsigned int dirblock_entries_end(ext2_filsys fs, char *buf)
{
	const struct ext2_dir_entry_tail *t;
	unsigned int top = fs->blocksize - sizeof(*t), off = 0, rec_len;

	if (!ext2fs_has_feature_metadata_csum(fs->super))
		return fs->blocksize;
	while (off < top) {
		rec_len = rec_len_at(fs, buf, off);
		if (rec_len < 8 || (rec_len & 3))
			return fs->blocksize;
		off += rec_len;
	}
	if (off != top)
		return fs->blocksize;
	t = (const struct ext2_dir_entry_tail *)(buf + top);
	if (t->det_reserved_zero1 == 0 && t->det_rec_len == sizeof(*t) &&
	    t->det_reserved_name_len == EXT2_DIR_NAME_LEN_CSUM)
		return top;
	return fs->blocksize;
}

/* A dx root as the kernel and e2fsck lay it out: "." of 12 bytes, then ".."
 * over the rest of the block (the index lives in its slack). */
static bool is_dx_root(ext2_filsys fs, char *buf)
{
	const struct ext2_dir_entry *dot = (const void *)buf, *dotdot = (const void *)(buf + 12);

	return rec_len_at(fs, buf, 0) == 12 && rec_len_at(fs, buf, 12) == fs->blocksize - 12 &&
	       dot->inode != 0 && ext2fs_dirent_name_len(dot) == 1 && dot->name[0] == '.' &&
	       ext2fs_dirent_name_len(dotdot) == 2 && dotdot->name[0] == '.' && dotdot->name[1] == '.';
}

/* A dx node: one empty entry over the whole block. */
static bool is_dx_node(ext2_filsys fs, char *buf)
{
	const struct ext2_dir_entry *de = (const void *)buf;

	return rec_len_at(fs, buf, 0) == fs->blocksize && de->inode == 0 &&
	       ext2fs_dirent_name_len(de) == 0;
}

int dx_block_to_leaf(ext2_filsys fs, uint32_t lblk, char *buf, bool *changed)
{
	unsigned int top = fs->blocksize - sizeof(struct ext2_dir_entry_tail);
	unsigned int keep;

	*changed = false;
	if (!ext2fs_has_feature_metadata_csum(fs->super) || dirblock_entries_end(fs, buf) != fs->blocksize)
		return 0;
	if (lblk == 0 && is_dx_root(fs, buf)) {
		keep = 24;      /* "." and "..", 12 bytes each */
		if (ext2fs_set_rec_len(fs, top - 12, (struct ext2_dir_entry *)(buf + 12)))
			return -EIO;
	} else if (lblk != 0 && is_dx_node(fs, buf)) {
		keep = 8;       /* the empty entry's header */
		if (ext2fs_set_rec_len(fs, top, (struct ext2_dir_entry *)buf))
			return -EIO;
	} else {
		/* neither a leaf with its checksum tail nor an index block:
		 * rewriting it could lose entries */
		return -EIO;
	}
	/* the index entries and the dx tail go: zeroes, as a fresh block */
	memset(buf + keep, 0, fs->blocksize - keep);
	ext2fs_initialize_dirent_tail(fs, EXT2_DIRENT_TAIL(buf, fs->blocksize));
	*changed = true;
	return 0;
}
