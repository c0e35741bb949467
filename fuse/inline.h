/*
 * fuse/inline.h - internal to fuse/: reading inline data.  An inode with
 * EXT4_INLINE_DATA_FL keeps its bytes in the inode itself: the 60 bytes of
 * i_block, continued in the value of its "system.data" extended attribute
 * (in the inode's extra space).  Files, symlinks and directories can be
 * inline; a directory's inline area starts with its parent's inode number
 * (4 bytes) and holds entries in two runs, i_block's rest and system.data,
 * each a chain of rec_len as in a directory block; it has no "." or ".."
 * entries of its own.
 *
 * Read-only: nothing here writes (a mount with inline_data is read-only).
 *
 * Errors: 0 or -errno; a malformed inline area is -EIO, after a line on
 * stderr naming the inode and the problem.
 * Threads: the caller holds the file-system lock (libext2fs is not
 * thread-safe).
 */
#ifndef RECON_FUSE_INLINE_H
#define RECON_FUSE_INLINE_H

#include <stddef.h>
#include <stdint.h>
#include <ext2fs/ext2fs.h>

#include "dirindex.h"

/* The inline area of inode ino (in: its inode, EXT4_INLINE_DATA_FL set):
 * i_block's 60 bytes, then system.data's value.  *buf is malloc'd (the
 * caller frees it), *len its length (60 or more).  -ENOMEM, -EIO. */
int inline_load(ext2_filsys fs, ext2_ino_t ino, const struct ext2_inode *in,
		char **buf, size_t *len);

/* size bytes of an inline file's data from off into out (the caller has
 * bounded off + size by i_size).  Bytes past the inline area read as zeros,
 * as the kernel reads them. */
int inline_file_read(ext2_filsys fs, ext2_ino_t ino, const struct ext2_inode *in,
		     uint64_t off, size_t size, char *out);

/*
 * The entries of an inline directory, in order: "." (the directory), ".."
 * (the parent in the area's first 4 bytes), then each named entry; empty
 * entries (inode 0) are skipped.  Each entry has a position, stable while
 * the directory is unchanged: 0 for ".", 1 for "..", else the entry's byte
 * offset in the inline area (4 or more); next is the position after it.
 * fn returns 0 to go on, a positive value to stop (inline_dir_iterate then
 * returns 0) or -errno to fail with it.
 * Every entry is checked before fn sees it: a chain that leaves its run, a
 * name longer than its record or an inode number out of range is -EIO.
 */
typedef int (*inline_dirent_fn)(void *ctx, const char *name, size_t len,
				ext2_ino_t ino, int ftype, uint32_t pos, uint32_t next);
int inline_dir_iterate(ext2_filsys fs, ext2_ino_t dir, const struct ext2_inode *in,
		       inline_dirent_fn fn, void *ctx);

/* readdir of inline directory DIR from position OFF (inline_dir_iterate's
 * positions, all in "block" 0), each entry to FILL until it asks to stop:
 * 0 or -errno (-EIO: the inode is no longer inline). */
int inline_dir_readdir(ext2_filsys fs, ext2_ino_t dir, uint64_t off, dindex_fill_fn fill, void *ctx);

#endif
