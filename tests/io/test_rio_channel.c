/*
 * tests/io/test_rio_channel.c - the channel on plain files, image files and
 * a block device, and libext2fs over it: cache coherence, block-size
 * switches, byte writes, the data path, the pread/pwrite fallback, holes and
 * evictions.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "rio_test.h"

/* ---- channel-level cache coherence on a plain file ---- */
void test_channel(bool no_uring, unsigned cache_mb)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/chan.img", scratch);
	if (run_shell("rm -f %s && truncate -s 8M %s", path, path) != 0)
		exit(77);
	set_cfg(no_uring, cache_mb, 0, 0);
	io_channel ch;
	CHECK_ERR(rio_io_manager->open(path, IO_FLAG_RW, &ch));
	struct rio_stats st;
	CHECK_ERR(rio_get_stats(ch, &st));
	CHECK(st.uring == !no_uring, "uring %d", st.uring);

	unsigned char a[4096], b[4096], c[8192];
	/* blksize 1024: write blocks 4..7, read back */
	fill(a, 4096, 1);
	CHECK_ERR(io_channel_write_blk64(ch, 4, 4, a));
	memset(b, 0, sizeof(b));
	CHECK_ERR(io_channel_read_blk64(ch, 4, 4, b));
	CHECK(memcmp(a, b, 4096) == 0, "read after write at 1024");
	/* negative count: 1000 bytes */
	CHECK_ERR(io_channel_read_blk64(ch, 5, -1000, b));
	CHECK(memcmp(a + 1024, b, 1000) == 0, "negative-count read");
	/* switch to 4096: block 1 is bytes 4096..8191 = the four 1 KiB blocks */
	CHECK_ERR(io_channel_set_blksize(ch, 4096));
	CHECK_ERR(io_channel_read_blk64(ch, 1, 1, b));
	CHECK(memcmp(a, b, 4096) == 0, "read after blksize switch");
	/* byte write into the middle, read-modify-write */
	unsigned char patch[10] = "0123456789";
	CHECK_ERR(io_channel_write_byte(ch, 4096 + 1020, 10, patch));
	CHECK_ERR(io_channel_read_blk64(ch, 1, 1, b));
	memcpy(a + 1020, patch, 10);
	CHECK(memcmp(a, b, 4096) == 0, "write_byte then read");
	/* partial write with a negative count: 1024 bytes at block 3 (12288) */
	fill(c, 1024, 2);
	CHECK_ERR(io_channel_write_blk64(ch, 3, -1024, c));
	CHECK_ERR(io_channel_read_blk64(ch, 3, 1, b));
	CHECK(memcmp(b, c, 1024) == 0, "negative-count write");
	/* back to 1024 */
	CHECK_ERR(io_channel_set_blksize(ch, 1024));
	CHECK_ERR(io_channel_read_blk64(ch, 12, 1, b));
	CHECK(memcmp(b, c, 1024) == 0, "after switching back");
	/* a write spanning two blocks at unaligned offsets */
	fill(c, 3000, 3);
	CHECK_ERR(io_channel_write_byte(ch, 20000, 3000, c));
	CHECK_ERR(io_channel_read_blk64(ch, 19, 4, b));
	CHECK(memcmp(b + (20000 - 19 * 1024), c, 3000) == 0, "unaligned span");

	/* write-back: nothing on the disk before the flush (when caching) */
	unsigned char d[1024];
	fill(d, 1024, 4);
	CHECK_ERR(io_channel_write_blk64(ch, 30, 1, d));
	if (cache_mb) {
		CHECK(rio_dirty_blocks(ch) > 0, "dirty blocks expected");
		CHECK(raw_read(path, 30 * 1024, b, 1024) == 0, "raw read");
		CHECK(memcmp(d, b, 1024) != 0, "write-back cache wrote through");
	}
	CHECK_ERR(rio_flush_device(ch));
	CHECK(rio_dirty_blocks(ch) == 0, "dirty after flush");
	CHECK(raw_read(path, 4096, b, 4096) == 0, "raw read");
	CHECK(memcmp(a, b, 4096) == 0, "on disk after flush");
	CHECK(raw_read(path, 20000, b, 3000) == 0, "raw read");
	CHECK(memcmp(b, c, 3000) == 0, "unaligned span on disk");
	CHECK(raw_read(path, 30 * 1024, b, 1024) == 0, "raw read");
	CHECK(memcmp(d, b, 1024) == 0, "block 30 on disk after flush");

	/* data path drops cached copies: cache block 40, overwrite as data */
	CHECK_ERR(io_channel_set_blksize(ch, 4096));
	CHECK_ERR(io_channel_read_blk64(ch, 40, 1, b));
	fill(a, 4096, 9);
	struct rio_extent ext = { .blk = 40, .count = 1, .buf = a };
	CHECK_ERR(rio_data_io(ch, true, 0, &ext, 1));
	CHECK_ERR(io_channel_read_blk64(ch, 40, 1, b));
	CHECK(memcmp(a, b, 4096) == 0, "stale cached copy after data write");
	/* dirty metadata copy must not be written back over data */
	fill(a, 4096, 10);
	CHECK_ERR(io_channel_write_blk64(ch, 41, 1, a));
	fill(c, 4096, 11);
	ext.blk = 41;
	ext.buf = c;
	CHECK_ERR(rio_data_io(ch, true, 0, &ext, 1));
	CHECK_ERR(rio_flush_device(ch));
	CHECK(raw_read(path, 41 * 4096, b, 4096) == 0, "raw read");
	CHECK(memcmp(b, c, 4096) == 0, "dirty metadata copy overwrote data");

	CHECK_ERR(rio_get_stats(ch, &st));
	CHECK(st.device_writes > 0 && st.device_reads > 0 && st.flushes >= 2, "stats %llu %llu %llu",
	      (unsigned long long)st.device_writes, (unsigned long long)st.device_reads,
	      (unsigned long long)st.flushes);
	CHECK_ERR(io_channel_close(ch));

	/* read-only open refuses writes */
	CHECK_ERR(rio_io_manager->open(path, 0, &ch));
	CHECK(io_channel_write_blk64(ch, 1, 1, a) == EXT2_ET_RO_FILSYS, "ro write");
	CHECK_ERR(io_channel_close(ch));
}

/* Long reads bypass the cache and read an image file's holes as zeros
 * without reading them: data, holes (leading, inner, trailing), a hole
 * inside a read's first and last block, dirty cached blocks over both, and a
 * read past the end of the file. */
void test_sparse(void)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/sparse.img", scratch);
	const size_t size = 16u << 20;
	if (run_shell("rm -f %s && truncate -s 16M %s", path, path) != 0)
		exit(77);
	unsigned char *want = calloc(1, size), *got = malloc(size), blk[4096];
	CHECK(want && got, "out of memory");
	int fd = open(path, O_WRONLY);
	CHECK(fd >= 0, "open %s", path);
	static const struct { uint64_t off, len; } data[] = {
		{ 1u << 20, 4096 }, { (1u << 20) + 65536, 3 * 65536 }, { 5u << 20, 1u << 20 },
		{ (9u << 20) + 512, 100 }, { 12u << 20, 8192 },
	};
	for (size_t i = 0; i < sizeof(data) / sizeof(data[0]); i++) {
		fill(want + data[i].off, data[i].len, (unsigned)i + 20);
		CHECK(pwrite(fd, want + data[i].off, data[i].len, (off_t)data[i].off) == (ssize_t)data[i].len,
		      "pwrite");
	}
	close(fd);
	set_cfg(false, 8, 0, 0);
	io_channel ch;
	CHECK_ERR(rio_io_manager->open(path, IO_FLAG_RW, &ch));
	CHECK_ERR(io_channel_set_blksize(ch, 4096));
	/* dirty cached blocks in a hole and over data, not yet on the disk */
	fill(blk, 4096, 40);
	CHECK_ERR(io_channel_write_blk64(ch, 700, 1, blk));
	memcpy(want + 700 * 4096, blk, 4096);
	fill(blk, 4096, 41);
	CHECK_ERR(io_channel_write_blk64(ch, (5u << 20) / 4096 + 3, 1, blk));
	memcpy(want + (5u << 20) + 3 * 4096, blk, 4096);
	static const struct { uint64_t blk; unsigned n; } reads[] = {
		{ 0, 4096 }, { 0, 300 }, { 250, 600 }, { 1280, 300 }, { 2300, 200 }, { 3000, 1096 },
	};
	for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++) {
		memset(got, 0xee, size);
		CHECK_ERR(io_channel_read_blk64(ch, reads[i].blk, (int)reads[i].n, got));
		CHECK(memcmp(got, want + reads[i].blk * 4096, (size_t)reads[i].n * 4096) == 0,
		      "long read of %u blocks at %llu differs from the file", reads[i].n,
		      (unsigned long long)reads[i].blk);
	}
	CHECK(io_channel_read_blk64(ch, 4000, 200, got) != 0, "a long read past the end succeeded");
	CHECK_ERR(io_channel_close(ch));
	free(want);
	free(got);
}

/* A small cache forces evictions (dirty ones written back) */
void test_eviction(void)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/evict.img", scratch);
	if (run_shell("rm -f %s && truncate -s 16M %s", path, path) != 0)
		exit(77);
	set_cfg(false, 1, 0, 0);  /* 1 MiB = 256 blocks of 4 KiB */
	io_channel ch;
	CHECK_ERR(rio_io_manager->open(path, IO_FLAG_RW, &ch));
	CHECK_ERR(io_channel_set_blksize(ch, 4096));
	unsigned char a[4096], b[4096];
	for (unsigned i = 0; i < 1000; i++) {
		fill(a, 4096, i);
		CHECK_ERR(io_channel_write_blk64(ch, i, 1, a));
	}
	CHECK(rio_dirty_blocks(ch) <= 256, "dirty %zu beyond capacity", rio_dirty_blocks(ch));
	for (unsigned i = 0; i < 1000; i++) {
		fill(a, 4096, i);
		CHECK_ERR(io_channel_read_blk64(ch, i, 1, b));
		CHECK(memcmp(a, b, 4096) == 0, "block %u after eviction", i);
	}
	/* a read larger than a quarter of the cache bypasses it but still sees
	 * dirty cached blocks */
	unsigned char *big = malloc(512 * 4096);
	CHECK(big, "malloc");
	fill(a, 4096, 7777);
	CHECK_ERR(io_channel_write_blk64(ch, 300, 1, a));
	CHECK_ERR(io_channel_read_blk64(ch, 0, 512, big));
	CHECK(memcmp(big + 300 * 4096, a, 4096) == 0, "bypass read misses dirty block");
	free(big);
	CHECK_ERR(io_channel_close(ch));
	CHECK(raw_read(path, 300 * 4096, b, 4096) == 0, "raw");
	CHECK(memcmp(a, b, 4096) == 0, "close did not write back");
}

/* ---- a file system through libext2fs ---- */

void test_fs(const char *mkfs_opts, bool no_uring, unsigned cache_mb)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/fs.img", scratch);
	make_image_or_skip(path, mkfs_opts, 32768);
	set_cfg(no_uring, cache_mb, 0, 0);
	ext2_filsys fs;
	CHECK_ERR(ext2fs_open2(path, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs));
	CHECK_ERR(ext2fs_read_bitmaps(fs));
	make_files(fs, "f", 40, 20);   /* past the 12 direct blocks: indirect blocks too */
	if (failures)
		return;
	verify_files(fs, 40, 20);
	CHECK_ERR(ext2fs_mkdir(fs, EXT2_ROOT_INO, 0, "sub"));
	struct rio_stats st;
	CHECK_ERR(rio_get_stats(fs->io, &st));
	CHECK(st.meta_writes > 0, "no metadata writes through the seam");
	CHECK_ERR(ext2fs_close2(fs, 0));
	CHECK(fsck_clean(path), "e2fsck -fn after %s", mkfs_opts);

	/* reopen: everything there, read through rio */
	CHECK_ERR(ext2fs_open2(path, NULL, 0, 0, 0, rio_io_manager, &fs));
	verify_files(fs, 40, 20);
	CHECK_ERR(ext2fs_close2(fs, 0));
	/* and through libext2fs's own unix manager */
	CHECK_ERR(ext2fs_open2(path, NULL, 0, 0, 0, unix_io_manager, &fs));
	ext2_ino_t ino;
	CHECK_ERR(ext2fs_lookup(fs, EXT2_ROOT_INO, "sub", 3, NULL, &ino));
	CHECK_ERR(ext2fs_close2(fs, 0));
}


/* A block device (loop): opened O_EXCL (a mount of it fails while we hold
 * it), a file system written through it checks clean. */
void test_blockdev(void)
{
	if (geteuid() != 0) {
		fprintf(stderr, "not root: no loop device\n");
		exit(77);
	}
	char img[300], mnt[300], dev[64] = "";
	snprintf(img, sizeof(img), "%s/bd.img", scratch);
	snprintf(mnt, sizeof(mnt), "%s/mnt", scratch);
	make_image_or_skip(img, "-t ext3 -b 4096", 32768);
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "losetup -f --show %s", img);
	FILE *p = popen(cmd, "r");
	if (!p || !fgets(dev, sizeof(dev), p)) {
		if (p)
			pclose(p);
		fprintf(stderr, "losetup failed\n");
		exit(77);
	}
	pclose(p);
	dev[strcspn(dev, "\n")] = 0;
	set_cfg(false, 8, 0, 0);
	ext2_filsys fs;
	errcode_t err = ext2fs_open2(dev, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs);
	if (err) {
		run_shell("losetup -d %s", dev);
		CHECK_ERR(err);
	}
	CHECK(fs->io->flags & CHANNEL_FLAGS_BLOCK_DEVICE, "not seen as a block device");
	bool mounted = run_shell("mkdir -p %s && mount -t ext3 %s %s >/dev/null 2>&1", mnt, dev, mnt) == 0;
	if (mounted)
		run_shell("umount %s", mnt);
	err = ext2fs_read_bitmaps(fs);
	if (!err)
		make_files(fs, "f", 5, 20);
	if (!err)
		err = ext2fs_close2(fs, 0);
	run_shell("losetup -d %s", dev);
	CHECK(!mounted, "the kernel mounted a device we hold open (no O_EXCL)");
	CHECK_ERR(err);
	CHECK(fsck_clean(img), "e2fsck after the block device");
}
