/*
 * tests/io/rio_test.c - what the parts of test_rio share: the scratch
 * directory, the failure count, the configurations the tests set and the
 * files they create and read back through libext2fs and rio_data_io.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "rio_test.h"

char scratch[256];
int failures;
bool g_async;             /* commit thread on */
unsigned g_max_blocks;    /* max_transaction_blocks */

int fsck_clean(const char *path)
{
	return e2fsck_fn(path, scratch) == 0;
}

void set_cfg(bool no_uring, unsigned cache_mb, uint64_t crash_after, uint64_t seed)
{
	struct rio_config cfg = {
		.block_cache_mb = cache_mb, .no_uring = no_uring, .quiet = true,
		.checker = false, .commit_interval_ms = 0, .journal = true,
		.fault_crash_after = crash_after, .fault_seed = seed,
	};
	rio_set_config(&cfg);
}

void fill(unsigned char *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(seed * 131 + i * 7 + (i >> 9));
}

int raw_read(const char *path, uint64_t off, void *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	ssize_t r = pread(fd, buf, len, (off_t)off);
	close(fd);
	return r == (ssize_t)len ? 0 : -1;
}

void set_txn_cfg(bool checker, bool journal, uint64_t crash_after, uint64_t seed,
		 const char *corrupt)
{
	struct rio_config cfg = {
		.block_cache_mb = 8, .quiet = true, .checker = checker, .checker_cache_mb = 16,
		.commit_interval_ms = 0, .journal = journal, .on_violation = RIO_ONV_READONLY,
		.fault_crash_after = crash_after, .fault_seed = seed, .fault_corrupt = corrupt,
		.async_commit = g_async, .max_transaction_blocks = g_max_blocks,
	};
	rio_set_config(&cfg);
}

/* Create /f<i> files with n data blocks each, data through rio_data_io. */
void make_files(ext2_filsys fs, const char *prefix, unsigned nfiles, unsigned nblocks)
{
	unsigned bs = fs->blocksize;
	unsigned char *buf = malloc((size_t)nblocks * bs);
	CHECK(buf, "malloc");
	for (unsigned f = 0; f < nfiles; f++) {
		ext2_ino_t ino;
		CHECK_ERR(ext2fs_new_inode(fs, EXT2_ROOT_INO, 0100644, 0, &ino));
		rio_txn_inode_alloc_stats(fs, ino, +1, false);
		struct ext2_inode inode;
		memset(&inode, 0, sizeof(inode));
		inode.i_mode = 0100644;
		inode.i_links_count = 1;
		inode.i_atime = inode.i_ctime = inode.i_mtime = 1700000000;
		CHECK_ERR(ext2fs_write_new_inode(fs, ino, &inode));
		struct rio_extent *ext = calloc(nblocks, sizeof(*ext));
		CHECK(ext, "calloc");
		fill(buf, (size_t)nblocks * bs, f + 100);
		for (unsigned i = 0; i < nblocks; i++) {
			blk64_t pblk = 0;
			CHECK_ERR(ext2fs_bmap2(fs, ino, NULL, NULL, BMAP_ALLOC, i, NULL, &pblk));
			ext[i].blk = pblk;
			ext[i].count = 1;
			ext[i].buf = buf + (size_t)i * bs;
		}
		CHECK_ERR(rio_data_io(fs->io, true, ino, ext, nblocks));
		free(ext);
		CHECK_ERR(ext2fs_read_inode(fs, ino, &inode));
		inode.i_size = nblocks * bs;
		CHECK_ERR(ext2fs_write_inode(fs, ino, &inode));
		char name[32];
		snprintf(name, sizeof(name), "%s%u", prefix, f);
		errcode_t err = ext2fs_link(fs, EXT2_ROOT_INO, name, ino, EXT2_FT_REG_FILE);
		if (err == EXT2_ET_DIR_NO_SPACE) {
			CHECK_ERR(ext2fs_expand_dir(fs, EXT2_ROOT_INO));
			err = ext2fs_link(fs, EXT2_ROOT_INO, name, ino, EXT2_FT_REG_FILE);
		}
		CHECK_ERR(err);
	}
	free(buf);
}

void verify_files(ext2_filsys fs, unsigned nfiles, unsigned nblocks)
{
	unsigned bs = fs->blocksize;
	unsigned char *buf = malloc((size_t)nblocks * bs), *want = malloc((size_t)nblocks * bs);
	CHECK(buf && want, "malloc");
	for (unsigned f = 0; f < nfiles; f++) {
		char name[32];
		snprintf(name, sizeof(name), "f%u", f);
		ext2_ino_t ino;
		CHECK_ERR(ext2fs_lookup(fs, EXT2_ROOT_INO, name, strlen(name), NULL, &ino));
		struct rio_extent *ext = calloc(nblocks, sizeof(*ext));
		CHECK(ext, "calloc");
		for (unsigned i = 0; i < nblocks; i++) {
			blk64_t pblk = 0;
			CHECK_ERR(ext2fs_bmap2(fs, ino, NULL, NULL, 0, i, NULL, &pblk));
			CHECK(pblk != 0, "hole in %s", name);
			ext[i].blk = pblk;
			ext[i].count = 1;
			ext[i].buf = buf + (size_t)i * bs;
		}
		CHECK_ERR(rio_data_io(fs->io, false, ino, ext, nblocks));
		free(ext);
		fill(want, (size_t)nblocks * bs, f + 100);
		CHECK(memcmp(buf, want, (size_t)nblocks * bs) == 0, "data of %s", name);
	}
	free(buf);
	free(want);
}
