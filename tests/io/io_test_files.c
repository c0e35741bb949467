/*
 * tests/io/io_test_files.c - file operations the io tests make through
 * libext2fs inside a transaction, as the daemon's would.
 */
#include <string.h>

#include "io.h"
#include "io_test_files.h"

errcode_t io_test_remove_file(ext2_filsys fs, const char *name)
{
	ext2_ino_t ino;
	struct ext2_inode inode;
	errcode_t err = ext2fs_lookup(fs, EXT2_ROOT_INO, name, strlen(name), NULL, &ino);

	err = err ? err : ext2fs_read_inode(fs, ino, &inode);
	err = err ? err : ext2fs_unlink(fs, EXT2_ROOT_INO, name, ino, 0);
	err = err ? err : ext2fs_punch(fs, ino, &inode, NULL, 0, ~0ULL);
	err = err ? err : ext2fs_read_inode(fs, ino, &inode);
	if (err)
		return err;
	inode.i_links_count = 0;
	inode.i_dtime = 1700000001;
	err = ext2fs_write_inode(fs, ino, &inode);
	if (!err)
		rio_txn_inode_alloc_stats(fs, ino, -1, false);
	return err;
}
