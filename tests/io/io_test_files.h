/*
 * tests/io/io_test_files.h - file operations the io tests share, made
 * through libext2fs on a file system open over the I/O manager.
 */
#ifndef RECON_TESTS_IO_TEST_FILES_H
#define RECON_TESTS_IO_TEST_FILES_H

#include <ext2fs/ext2fs.h>

/* Unlink NAME from the root, free its blocks and the inode (dtime set), as
 * an unlink and a release do; 0 or libext2fs's error. */
errcode_t io_test_remove_file(ext2_filsys fs, const char *name);

#endif
