/*
 * tests/io/test_rio.c - io/ (rio_io_manager) on real images: cache coherence,
 * block-size switches, byte writes, the data path, the pread/pwrite fallback,
 * power-cut injection and journal recovery.  `test_rio NAME` runs one test;
 * exit 0 pass, 77 skip, 1 fail.  Every file-system image is checked with
 * `e2fsck -fn` after.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "io.h"
#include "test_util.h"

static char scratch[256];
static int failures;

#define CHECK(cond, ...) do { \
	if (!(cond)) { \
		test_report("FAIL", __FILE__, __LINE__, #cond, __VA_ARGS__); \
		failures++; \
		return; \
	} } while (0)
#define CHECK_ERR(expr) do { \
	errcode_t e_ = (expr); \
	if (e_) { \
		fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #expr, error_message(e_)); \
		failures++; \
		return; \
	} } while (0)

static int fsck_clean(const char *path)
{
	return e2fsck_fn(path, scratch) == 0;
}

static void set_cfg(bool no_uring, unsigned cache_mb, uint64_t crash_after, uint64_t seed)
{
	struct rio_config cfg = {
		.block_cache_mb = cache_mb, .no_uring = no_uring, .quiet = true,
		.checker = false, .commit_interval_ms = 0, .journal = true,
		.fault_crash_after = crash_after, .fault_seed = seed,
	};
	rio_set_config(&cfg);
}

static void fill(unsigned char *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(seed * 131 + i * 7 + (i >> 9));
}

static int raw_read(const char *path, uint64_t off, void *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	ssize_t r = pread(fd, buf, len, (off_t)off);
	close(fd);
	return r == (ssize_t)len ? 0 : -1;
}

/* ---- channel-level cache coherence on a plain file ---- */
static void test_channel(bool no_uring, unsigned cache_mb)
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
static void test_sparse(void)
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
static void test_eviction(void)
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

/* Create /f<i> files with n data blocks each, data through rio_data_io. */
static void make_files(ext2_filsys fs, const char *prefix, unsigned nfiles, unsigned nblocks)
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

static void verify_files(ext2_filsys fs, unsigned nfiles, unsigned nblocks)
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

static void test_fs(const char *mkfs_opts, bool no_uring, unsigned cache_mb)
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
static void test_blockdev(void)
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

/* ---- power cut ---- */

/* Writes W1..W8 of distinct blocks, a flush after W3; crash at W6.
 * Expected: W1..W3 present; each of W4..W6 either fully old or fully new;
 * W7.. fail with EIO, flush fails with EIO. */
static void crash_once(uint64_t seed, unsigned *kept_mask, bool no_uring)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/crash.img", scratch);
	if (run_shell("rm -f %s && truncate -s 1M %s", path, path) != 0)
		exit(77);
	set_cfg(no_uring, 0, 6, seed);
	io_channel ch;
	CHECK_ERR(rio_io_manager->open(path, IO_FLAG_RW, &ch));
	CHECK_ERR(io_channel_set_blksize(ch, 4096));
	unsigned char a[4096], b[4096];
	errcode_t err = 0;
	for (unsigned i = 1; i <= 8; i++) {
		fill(a, 4096, i);
		err = io_channel_write_blk64(ch, i, 1, a);   /* cache off: one request each */
		if (i < 6)
			CHECK(err == 0, "write %u: %s", i, error_message(err));
		else
			CHECK(err == EIO, "write %u after the cut: %ld", i, (long)err);
		if (i == 3)
			CHECK_ERR(rio_flush_device(ch));
	}
	CHECK(rio_flush_device(ch) == EIO, "flush after the cut");
	struct rio_extent ext = { .blk = 20, .count = 1, .buf = a };
	CHECK(rio_data_io(ch, true, 0, &ext, 1) == EIO, "data write after the cut");
	struct rio_stats st;
	CHECK_ERR(rio_get_stats(ch, &st));
	CHECK(st.device_writes == 6, "device_writes %llu", (unsigned long long)st.device_writes);
	io_channel_close(ch);   /* its flush fails with EIO: expected */

	unsigned char zero[4096] = { 0 };
	*kept_mask = 0;
	for (unsigned i = 1; i <= 8; i++) {
		CHECK(raw_read(path, (uint64_t)i * 4096, b, 4096) == 0, "raw");
		fill(a, 4096, i);
		bool is_new = memcmp(a, b, 4096) == 0, is_old = memcmp(zero, b, 4096) == 0;
		if (i <= 3)
			CHECK(is_new, "flushed write %u lost", i);
		else if (i <= 6)
			CHECK(is_new || is_old, "write %u torn", i);
		else
			CHECK(is_old, "write %u after the cut reached the disk", i);
		if (is_new && i > 3)
			*kept_mask |= 1u << i;
	}
}

static void test_crash(bool no_uring)
{
	unsigned first = 0, mask;
	bool differ = false;
	for (uint64_t seed = 1; seed <= 12; seed++) {
		crash_once(seed, &mask, no_uring);
		if (failures)
			return;
		unsigned again;
		crash_once(seed, &again, no_uring);
		if (failures)
			return;
		CHECK(mask == again, "seed %llu not deterministic: %x vs %x", (unsigned long long)seed,
		      mask, again);
		if (seed == 1)
			first = mask;
		else if (mask != first)
			differ = true;
	}
	CHECK(differ, "every seed kept the same subset");

	/* overlapping writes after a flush: block 5 written twice; whatever is
	 * kept, the block is old, first or second version, never a blend */
	for (uint64_t seed = 1; seed <= 16; seed++) {
		char path[300];
		snprintf(path, sizeof(path), "%s/crash2.img", scratch);
		if (run_shell("rm -f %s && truncate -s 1M %s", path, path) != 0)
			exit(77);
		set_cfg(no_uring, 0, 3, seed);
		io_channel ch;
		CHECK_ERR(rio_io_manager->open(path, IO_FLAG_RW, &ch));
		CHECK_ERR(io_channel_set_blksize(ch, 4096));
		unsigned char v1[4096], v2[4096], b[4096], zero[4096] = { 0 };
		fill(v1, 4096, 50);
		fill(v2, 2048, 51);
		memcpy(v2 + 2048, v1 + 2048, 2048);
		CHECK_ERR(io_channel_write_blk64(ch, 5, 1, v1));
		CHECK_ERR(io_channel_write_blk64(ch, 5, -2048, v2));
		CHECK(io_channel_write_blk64(ch, 6, 1, v1) == EIO, "third write");
		io_channel_close(ch);
		CHECK(raw_read(path, 5 * 4096, b, 4096) == 0, "raw");
		unsigned char half[4096];
		memcpy(half, v2, 2048);     /* second kept, first dropped */
		memset(half + 2048, 0, 2048);
		CHECK(!memcmp(b, zero, 4096) || !memcmp(b, v1, 4096) || !memcmp(b, v2, 4096) ||
		      !memcmp(b, half, 4096), "seed %llu: block 5 is a blend", (unsigned long long)seed);
	}
}

/* A power cut in the middle of libext2fs work leaves a file system that
 * e2fsck can judge (ext2 without a journal may be inconsistent: we only check
 * that nothing crashes and every call returns a code). */
static void test_crash_fs(void)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/crashfs.img", scratch);
	for (uint64_t n = 1; n <= 40; n += 7) {
		make_image_or_skip(path, "-t ext3 -b 1024", 16384);
		set_cfg(false, 4, n, n);
		ext2_filsys fs;
		CHECK_ERR(ext2fs_open2(path, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs));
		CHECK_ERR(ext2fs_read_bitmaps(fs));
		errcode_t err = 0;
		for (int i = 0; i < 20 && !err; i++) {
			char name[16];
			snprintf(name, sizeof(name), "d%d", i);
			err = ext2fs_mkdir(fs, EXT2_ROOT_INO, 0, name);
			if (!err)
				err = ext2fs_flush(fs);
		}
		CHECK(err != 0, "crash at %llu: no error reported", (unsigned long long)n);
		/* fails with EIO (the device is gone), then fs is still ours */
		if (ext2fs_close2(fs, 0))
			ext2fs_free(fs);
	}
}

static void test_journal_recover(void)
{
	char path[300], data[300];
	snprintf(path, sizeof(path), "%s/jr.img", scratch);
	snprintf(data, sizeof(data), "%s/jr.data", scratch);
	make_image_or_skip(path, "-t ext3 -b 1024", 16384);
	/* debugfs writes a committed transaction into the journal without
	 * replaying it: block 9000 (free) gets the contents of data */
	if (run_shell("head -c 1024 /dev/urandom > %s && printf 'jo\\njw -b 9000 %s\\njc\\n' > %s.cmd && "
		"debugfs -w -f %s.cmd %s >/dev/null 2>&1", data, data, data, data, path) != 0) {
		fprintf(stderr, "debugfs journal write unavailable\n");
		exit(77);
	}
	unsigned char want[1024], got[1024];
	CHECK(raw_read(data, 0, want, 1024) == 0, "data");
	set_cfg(false, 8, 0, 0);
	ext2_filsys fs;
	CHECK_ERR(ext2fs_open2(path, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs));
	if (!ext2fs_has_feature_journal_needs_recovery(fs->super)) {
		ext2fs_close2(fs, 0);
		fprintf(stderr, "debugfs did not leave needs_recovery\n");
		exit(77);
	}
	unsigned replayed = 0;
	char msg[256];
	errcode_t err = rio_journal_recover(fs, &replayed, msg, sizeof(msg));
	CHECK(err == 0, "recover: %s (%s)", error_message(err), msg);
	CHECK(replayed >= 1, "replayed %u", replayed);
	ext2fs_free(fs);
	CHECK(raw_read(path, 9000 * 1024, got, 1024) == 0, "raw");
	CHECK(memcmp(want, got, 1024) == 0, "block 9000 not replayed");
	CHECK_ERR(ext2fs_open2(path, NULL, 0, 0, 0, unix_io_manager, &fs));
	CHECK(!ext2fs_has_feature_journal_needs_recovery(fs->super), "needs_recovery still set");
	ext2fs_close2(fs, 0);
	CHECK(fsck_clean(path), "e2fsck after recovery");
	/* nothing to do the second time */
	CHECK_ERR(ext2fs_open2(path, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs));
	CHECK_ERR(rio_journal_recover(fs, &replayed, msg, sizeof(msg)));
	CHECK(replayed == 0, "replayed again");
	CHECK_ERR(ext2fs_close2(fs, 0));
}


/* ---- transactions ---- */

static bool g_async;             /* commit thread on */
static unsigned g_max_blocks;    /* max_transaction_blocks */

static void set_txn_cfg(bool checker, bool journal, uint64_t crash_after, uint64_t seed,
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

static int raw_sb(const char *path, struct ext2_super_block *sb)
{
	return raw_read(path, 1024, sb, sizeof(*sb));
}

/* Remove /name and free its blocks (through ext2fs_punch: alloc stats). */
static void remove_file(ext2_filsys fs, const char *name)
{
	ext2_ino_t ino;
	CHECK_ERR(ext2fs_lookup(fs, EXT2_ROOT_INO, name, strlen(name), NULL, &ino));
	struct ext2_inode inode;
	CHECK_ERR(ext2fs_read_inode(fs, ino, &inode));
	CHECK_ERR(ext2fs_unlink(fs, EXT2_ROOT_INO, name, ino, 0));
	CHECK_ERR(ext2fs_punch(fs, ino, &inode, NULL, 0, ~0ULL));
	CHECK_ERR(ext2fs_read_inode(fs, ino, &inode));
	inode.i_links_count = 0;
	inode.i_dtime = 1700000001;
	CHECK_ERR(ext2fs_write_inode(fs, ino, &inode));
	rio_txn_inode_alloc_stats(fs, ino, -1, false);
}

/* Whole-block metadata writes and the base they are compared with at the
 * commit (unchanged rewrites are dropped): over a free block the image file
 * does not hold (a hole, not cached) the write reads nothing from the
 * device, and zeros there are unchanged; over a free block that holds old
 * data (used) zeros are a change that reaches the disk. */
static void whole_block_bases(ext2_filsys fs, const char *path, blk64_t used)
{
	unsigned bs = fs->blocksize;
	unsigned char zero[EXT2_MAX_BLOCK_SIZE];
	memset(zero, 0, bs);
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0, "open %s", path);
	blk64_t hole = 0, nblocks = ext2fs_blocks_count(fs->super);
	for (blk64_t b = nblocks - 1; fd >= 0 && b > nblocks / 2 && !hole; b--) {
		if (ext2fs_test_block_bitmap2(fs->block_map, b))
			continue;
		off_t d = lseek(fd, (off_t)(b * bs), SEEK_DATA);
		if ((d < 0 && errno == ENXIO) || (d >= 0 && (uint64_t)d >= (b + 1) * bs))
			hole = b;
	}
	if (fd >= 0)
		close(fd);
	if (!hole) {
		printf("whole-block bases: the host file system shows no hole, skipped\n");
		return;
	}
	struct rio_stats before, after;
	CHECK_ERR(rio_get_stats(fs->io, &before));
	CHECK_ERR(io_channel_write_blk64(fs->io, hole, 1, zero));
	CHECK_ERR(rio_get_stats(fs->io, &after));
	CHECK(after.device_reads == before.device_reads,
	      "a whole-block write over a hole read the device (%llu reads)",
	      (unsigned long long)(after.device_reads - before.device_reads));
	CHECK_ERR(rio_txn_boundary(fs, true));
	CHECK_ERR(rio_get_stats(fs->io, &after));
	CHECK(after.device_writes == before.device_writes, "zeros over a hole reached the disk");
	CHECK_ERR(rio_get_stats(fs->io, &before));
	CHECK_ERR(io_channel_write_blk64(fs->io, used, 1, zero));
	CHECK_ERR(rio_txn_boundary(fs, true));
	CHECK_ERR(rio_get_stats(fs->io, &after));
	CHECK(after.device_writes > before.device_writes, "zeros over old data were dropped as unchanged");
}

/* rio_data_write_range over file f1's first block: the bytes around the
 * range keep the file's data without a device read; when the overlay holds
 * bytes of the block, those are what is kept. */
static void data_write_range(ext2_filsys fs)
{
	unsigned bs = fs->blocksize;
	unsigned char buf[EXT2_MAX_BLOCK_SIZE], got[EXT2_MAX_BLOCK_SIZE], want[EXT2_MAX_BLOCK_SIZE];
	ext2_ino_t ino;
	blk64_t p = 0;
	CHECK_ERR(ext2fs_lookup(fs, EXT2_ROOT_INO, "f1", 2, NULL, &ino));
	CHECK_ERR(ext2fs_bmap2(fs, ino, NULL, NULL, 0, 0, NULL, &p));
	CHECK(p != 0, "f1 has no first block");
	if (failures)
		return;
	struct rio_extent w = { p, 1, want }, b = { p, 1, buf }, g = { p, 1, got };
	CHECK_ERR(rio_data_io(fs->io, false, ino, &w, 1));
	memset(buf, 0xEE, bs);
	memset(buf + 100, 'X', 10);
	struct rio_stats before, after;
	CHECK_ERR(rio_get_stats(fs->io, &before));
	CHECK_ERR(rio_data_write_range(fs->io, ino, &b, 100, 10));
	CHECK_ERR(rio_get_stats(fs->io, &after));
	CHECK(after.device_reads == before.device_reads, "a range write read the device");
	memset(want + 100, 'X', 10);
	CHECK_ERR(rio_data_io(fs->io, false, ino, &g, 1));
	CHECK(memcmp(got, want, bs) == 0, "a range write changed the bytes around it");
	/* the open transaction holds the block (as metadata written there) */
	memset(want, 0x5A, bs);
	CHECK_ERR(io_channel_write_blk64(fs->io, p, 1, want));
	memset(buf, 0xEE, bs);
	memset(buf + 200, 'Y', 8);
	CHECK_ERR(rio_data_write_range(fs->io, ino, &b, 200, 8));
	memset(want + 200, 'Y', 8);
	CHECK_ERR(rio_data_io(fs->io, false, ino, &g, 1));
	CHECK(memcmp(got, want, bs) == 0, "a range write kept the device's bytes, not the overlay's");
	CHECK(rio_data_write_range(fs->io, ino, &b, bs, 1) == EINVAL, "a range past the first block");
}

static void test_txn(bool journal, bool checker)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/txn.img", scratch);
	make_image_or_skip(path, journal ? "-t ext3 -b 1024" : "-t ext2 -b 1024", 32768);
	set_txn_cfg(checker, journal, 0, 0, NULL);
	ext2_filsys fs;
	CHECK_ERR(ext2fs_open2(path, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs));
	CHECK_ERR(ext2fs_read_bitmaps(fs));
	CHECK_ERR(rio_txn_attach(fs));
	struct ext2_super_block sb;
	CHECK(raw_sb(path, &sb) == 0, "raw sb");
	if (journal)
		CHECK(sb.s_feature_incompat & EXT3_FEATURE_INCOMPAT_RECOVER, "needs_recovery not set at attach");
	else
		CHECK(!(sb.s_state & EXT2_VALID_FS), "VALID_FS not cleared at attach");

	/* nothing reaches the disk before the boundary, reads see the overlay */
	struct rio_stats before, after;
	CHECK_ERR(rio_get_stats(fs->io, &before));
	make_files(fs, "f", 10, 15);
	if (failures)
		return;
	CHECK_ERR(rio_get_stats(fs->io, &after));
	CHECK(after.device_writes - before.device_writes == 10 * 15,
	      "only the 150 data writes may reach the disk before the boundary (%llu)",
	      (unsigned long long)(after.device_writes - before.device_writes));
	verify_files(fs, 10, 15);
	ext2_ino_t ino;
	CHECK_ERR(ext2fs_lookup(fs, EXT2_ROOT_INO, "f3", 2, NULL, &ino));
	CHECK_ERR(rio_txn_boundary(fs, false) );  /* no interval, small: stays open */
	CHECK_ERR(rio_get_stats(fs->io, &after));
	CHECK(after.flushes == before.flushes, "boundary without force committed");
	CHECK_ERR(rio_txn_boundary(fs, true));
	CHECK_ERR(rio_get_stats(fs->io, &after));
	CHECK(after.flushes > before.flushes, "forced boundary did not flush");
	/* on disk now: a second handle through unix_io sees the files */
	ext2_filsys fs2;
	CHECK_ERR(ext2fs_open2(path, NULL, 0, 0, 0, unix_io_manager, &fs2));
	ext2_ino_t ino2;
	CHECK_ERR(ext2fs_lookup(fs2, EXT2_ROOT_INO, "f3", 2, NULL, &ino2));
	CHECK(ino == ino2, "inode numbers");
	ext2fs_close2(fs2, 0);

	/* an empty boundary commits nothing */
	CHECK_ERR(rio_get_stats(fs->io, &before));
	CHECK_ERR(rio_txn_boundary(fs, true));
	CHECK_ERR(rio_get_stats(fs->io, &after));
	CHECK(after.device_writes == before.device_writes, "empty transaction wrote");
	/* an unchanged rewrite is dropped */
	unsigned char blk[1024];
	CHECK_ERR(io_channel_read_blk64(fs->io, ext2fs_inode_table_loc(fs, 0), 1, blk));
	CHECK_ERR(io_channel_write_blk64(fs->io, ext2fs_inode_table_loc(fs, 0), 1, blk));
	CHECK_ERR(rio_txn_boundary(fs, true));
	CHECK_ERR(rio_get_stats(fs->io, &after));
	CHECK(after.device_writes == before.device_writes, "unchanged rewrite reached the disk");

	/* committed-data rule: blocks freed by the open transaction are not
	 * handed out again before it commits */
	blk64_t freed[15];
	CHECK_ERR(ext2fs_lookup(fs, EXT2_ROOT_INO, "f0", 2, NULL, &ino));
	for (int i = 0; i < 15; i++)
		CHECK_ERR(ext2fs_bmap2(fs, ino, NULL, NULL, 0, i, NULL, &freed[i]));
	remove_file(fs, "f0");
	if (failures)
		return;
	for (int i = 0; i < 15; i++) {
		blk64_t b;
		CHECK_ERR(ext2fs_new_block2(fs, freed[0], NULL, &b));
		for (int k = 0; k < 15; k++)
			CHECK(b != freed[k], "freed block %llu reallocated before commit",
			      (unsigned long long)b);
		CHECK_ERR(ext2fs_new_block2(fs, freed[i], NULL, &b));
		for (int k = 0; k < 15; k++)
			CHECK(b != freed[k], "freed block %llu reallocated before commit",
			      (unsigned long long)b);
	}
	CHECK_ERR(rio_txn_boundary(fs, true));
	blk64_t b;
	CHECK_ERR(ext2fs_new_block2(fs, freed[0], NULL, &b));
	CHECK(b == freed[0], "freed block not free after commit (%llu vs %llu)",
	      (unsigned long long)b, (unsigned long long)freed[0]);
	/* the checker would judge metadata writes to free blocks */
	if (!checker) {
		whole_block_bases(fs, path, freed[1]);
		data_write_range(fs);
	}
	/* the freed blocks are free on disk too (e2fsck below) */
	make_files(fs, "g", 3, 4);
	CHECK_ERR(ext2fs_mkdir(fs, EXT2_ROOT_INO, 0, "dir"));
	CHECK_ERR(rio_txn_detach(fs));
	CHECK(raw_sb(path, &sb) == 0, "raw sb");
	if (journal)
		CHECK(!(sb.s_feature_incompat & EXT3_FEATURE_INCOMPAT_RECOVER), "needs_recovery left at detach");
	else
		CHECK(sb.s_state & EXT2_VALID_FS, "VALID_FS not restored at detach");
	char stats[300];
	snprintf(stats, sizeof(stats), "%s/stats.json", scratch);
	CHECK_ERR(rio_write_stats(fs->io, stats));
	CHECK_ERR(ext2fs_close2(fs, 0));
	CHECK(fsck_clean(path), "e2fsck after transactions");
	CHECK(run_shell("python3 -c 'import json,sys; d=json.load(open(\"%s\")); "
		  "k=\"transactions device_writes device_reads bytes_written bytes_read flushes blocks_checked "
		  "blocks_journalled violations checker_cpu_seconds checker_commit_cpu_seconds checker_cache_hit_rate "
		  "block_cache_hit_rate peak_rss_kb\".split(); "
		  "sys.exit(0 if all(x in d for x in k) and d[\"transactions\"] >= 3 and "
		  "0 <= d[\"checker_commit_cpu_seconds\"] <= d[\"checker_cpu_seconds\"] else 1)'", stats) == 0,
	      "stats json");
}


/* ---- crash sweep: power cut at spread write requests, then recovery ---- */

/* Creates files with data (written through rio_data_io before the metadata
 * commits), renames and deletes, with a forced boundary (fsync) per round.
 * synced[r] is set when round r's fsync returned success: its file k<r>_2
 * is never touched again and must survive any later power cut. */
#define SWEEP_ROUNDS 6
static errcode_t sweep_workload(ext2_filsys fs, bool synced[SWEEP_ROUNDS])
{
	errcode_t err = 0;
	unsigned bs = fs->blocksize;
	unsigned char *buf = malloc(16 * bs);
	for (int r = 0; r < SWEEP_ROUNDS; r++)
		synced[r] = false;
	if (!buf)
		return ENOMEM;
	for (int r = 0; r < SWEEP_ROUNDS; r++) {
		for (int k = 0; k < 3 && !err; k++) {
			char name[32];
			snprintf(name, sizeof(name), "k%d_%d", r, k);
			unsigned nblk = 2 + (unsigned)(r * 3 + k) % 14;
			ext2_ino_t ino;
			err = ext2fs_new_inode(fs, EXT2_ROOT_INO, 0100644, 0, &ino);
			if (err)
				break;
			ext2fs_inode_alloc_stats2(fs, ino, +1, 0);
			rio_txn_inode_bitmap_changed(fs, ino);
			struct ext2_inode inode;
			memset(&inode, 0, sizeof(inode));
			inode.i_mode = 0100644;
			inode.i_links_count = 1;
			err = ext2fs_write_new_inode(fs, ino, &inode);
			fill(buf, (size_t)nblk * bs, (unsigned)(r * 10 + k));
			struct rio_extent ext[16];
			for (unsigned i = 0; i < nblk && !err; i++) {
				blk64_t p = 0;
				err = ext2fs_bmap2(fs, ino, NULL, NULL, BMAP_ALLOC, i, NULL, &p);
				ext[i] = (struct rio_extent){ p, 1, buf + (size_t)i * bs };
			}
			if (!err)
				err = rio_data_io(fs->io, true, ino, ext, nblk);
			if (!err)
				err = ext2fs_read_inode(fs, ino, &inode);
			if (!err) {
				inode.i_size = nblk * bs;
				err = ext2fs_write_inode(fs, ino, &inode);
			}
			if (!err) {
				err = ext2fs_link(fs, EXT2_ROOT_INO, name, ino, EXT2_FT_REG_FILE);
				if (err == EXT2_ET_DIR_NO_SPACE) {
					err = ext2fs_expand_dir(fs, EXT2_ROOT_INO);
					if (!err)
						err = ext2fs_link(fs, EXT2_ROOT_INO, name, ino, EXT2_FT_REG_FILE);
				}
			}
			if (!err)
				err = rio_txn_boundary(fs, false);
		}
		if (!err && r > 0) {
			char from[32], to[32];
			snprintf(from, sizeof(from), "k%d_0", r - 1);
			snprintf(to, sizeof(to), "m%d", r - 1);
			ext2_ino_t ino;
			err = ext2fs_lookup(fs, EXT2_ROOT_INO, from, strlen(from), NULL, &ino);
			if (!err)
				err = ext2fs_link(fs, EXT2_ROOT_INO, to, ino, EXT2_FT_REG_FILE);
			if (!err)
				err = ext2fs_unlink(fs, EXT2_ROOT_INO, from, ino, 0);
			if (!err)
				err = rio_txn_boundary(fs, false);
			snprintf(from, sizeof(from), "k%d_1", r - 1);
			struct ext2_inode inode;
			if (!err)
				err = ext2fs_lookup(fs, EXT2_ROOT_INO, from, strlen(from), NULL, &ino);
			if (!err)
				err = ext2fs_unlink(fs, EXT2_ROOT_INO, from, ino, 0);
			if (!err)
				err = ext2fs_read_inode(fs, ino, &inode);
			if (!err)
				err = ext2fs_punch(fs, ino, &inode, NULL, 0, ~0ULL);
			if (!err)
				err = ext2fs_read_inode(fs, ino, &inode);
			if (!err) {
				inode.i_links_count = 0;
				inode.i_dtime = 1700000002;
				err = ext2fs_write_inode(fs, ino, &inode);
			}
			if (!err) {
				ext2fs_inode_alloc_stats2(fs, ino, -1, 0);
				rio_txn_inode_bitmap_changed(fs, ino);
			}
		}
		if (!err)
			err = rio_txn_boundary(fs, true);
		if (err)
			break;
		synced[r] = true;
	}
	free(buf);
	return err;
}

static bool file_intact(ext2_filsys fs, int r)
{
	char name[32];
	snprintf(name, sizeof(name), "k%d_2", r);
	unsigned nblk = 2 + (unsigned)(r * 3 + 2) % 14;
	ext2_ino_t ino;
	if (ext2fs_lookup(fs, EXT2_ROOT_INO, name, strlen(name), NULL, &ino))
		return false;
	ext2_file_t f;
	if (ext2fs_file_open(fs, ino, 0, &f))
		return false;
	size_t len = (size_t)nblk * fs->blocksize;
	unsigned char *got = malloc(len + 1), *want = malloc(len);
	unsigned n = 0;
	bool ok = got && want && !ext2fs_file_read(f, got, (unsigned)len + 1, &n) && n == len;
	if (ok) {
		fill(want, len, (unsigned)(r * 10 + 2));
		ok = memcmp(got, want, len) == 0;
	}
	ext2fs_file_close(f);
	free(got);
	free(want);
	return ok;
}

static bool kernel_recovery_ok(const char *img)
{
	char mnt[300];
	snprintf(mnt, sizeof(mnt), "%s/mnt", scratch);
	if (run_shell("mkdir -p %s && mount -t ext3 -o loop %s %s >/dev/null 2>&1", mnt, img, mnt) != 0)
		return false;
	if (run_shell("umount %s", mnt) != 0)
		return false;
	return true;
}

static void test_crash_sweep(unsigned points, unsigned seeds)
{
	char pristine[300], img[300], kimg[300];
	snprintf(pristine, sizeof(pristine), "%s/pristine.img", scratch);
	snprintf(img, sizeof(img), "%s/sweep.img", scratch);
	snprintf(kimg, sizeof(kimg), "%s/kernel.img", scratch);
	make_image_or_skip(pristine, "-t ext3 -b 1024 -O ^dir_index", 16384);
	bool kernel = geteuid() == 0 && run_shell("grep -qw ext3 /proc/filesystems || modprobe ext3 2>/dev/null; grep -qw ext3 /proc/filesystems") == 0;

	/* the reference run: how many device writes the workload makes */
	CHECK(run_shell("cp %s %s", pristine, img) == 0, "cp");
	set_txn_cfg(true, true, 0, 0, NULL);
	ext2_filsys fs;
	bool synced[SWEEP_ROUNDS];
	CHECK_ERR(ext2fs_open2(img, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs));
	CHECK_ERR(ext2fs_read_bitmaps(fs));
	struct rio_stats st0, st;
	CHECK_ERR(rio_get_stats(fs->io, &st0));
	CHECK_ERR(rio_txn_attach(fs));
	CHECK_ERR(sweep_workload(fs, synced));
	CHECK_ERR(rio_txn_detach(fs));
	CHECK_ERR(rio_get_stats(fs->io, &st));
	CHECK_ERR(ext2fs_close2(fs, 0));
	CHECK(fsck_clean(img), "reference run");
	uint64_t total = st.device_writes;
	fprintf(stderr, "sweep: %llu device writes in the workload\n", (unsigned long long)total);

	unsigned tried = 0, consistent = 0;
	for (unsigned p = 0; p < points; p++) {
		uint64_t n = 1 + (uint64_t)p * (total - 1) / (points > 1 ? points - 1 : 1);
		for (uint64_t seed = 1; seed <= seeds; seed++) {
			tried++;
			CHECK(run_shell("cp %s %s", pristine, img) == 0, "cp");
			set_txn_cfg(true, true, n, seed, NULL);
			CHECK_ERR(ext2fs_open2(img, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs));
			errcode_t err = ext2fs_read_bitmaps(fs);
			if (!err)
				err = rio_txn_attach(fs);
			if (!err) {
				err = sweep_workload(fs, synced);
				errcode_t derr = rio_txn_detach(fs);
				if (!err)
					err = derr;
			} else {
				memset(synced, 0, sizeof(synced));
			}
			if (ext2fs_close2(fs, 0))
				ext2fs_free(fs);
			if (n <= total)
				CHECK(err != 0, "power cut at %llu not reported", (unsigned long long)n);

			if (kernel) {
				CHECK(run_shell("cp %s %s", img, kimg) == 0, "cp");
				bool kok = kernel_recovery_ok(kimg) && fsck_clean(kimg);
				if (!kok)
					fprintf(stderr, "point %llu seed %llu: kernel recovery left an inconsistent image\n",
						(unsigned long long)n, (unsigned long long)seed);
			}
			/* our own recovery */
			set_txn_cfg(false, true, 0, 0, NULL);
			char msg[256];
			unsigned replayed;
			CHECK_ERR(ext2fs_open2(img, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs));
			err = rio_journal_recover(fs, &replayed, msg, sizeof(msg));
			CHECK(err == 0, "recover at %llu: %s %s", (unsigned long long)n, error_message(err), msg);
			ext2fs_free(fs);
			bool ok = fsck_clean(img);
			if (ok) {
				CHECK_ERR(ext2fs_open2(img, NULL, 0, 0, 0, unix_io_manager, &fs));
				for (int r = 0; r < SWEEP_ROUNDS; r++)
					if (synced[r] && !file_intact(fs, r)) {
						fprintf(stderr, "point %llu seed %llu: fsynced k%d_2 lost\n",
							(unsigned long long)n, (unsigned long long)seed, r);
						ok = false;
					}
				ext2fs_close2(fs, 0);
			} else {
				fprintf(stderr, "point %llu seed %llu: e2fsck -fn failed after our recovery\n",
					(unsigned long long)n, (unsigned long long)seed);
			}
			if (kernel) {
				/* the kernel's verdict on the same crash */
				bool kok = run_shell("e2fsck -fn %s >/dev/null 2>&1", kimg) == 0;
				ok = ok && kok;
			}
			consistent += ok;
		}
	}
	printf("crash sweep: %u points tried, %u consistent (kernel recovery %s)\n", tried, consistent,
	       kernel ? "checked" : "skipped: not root");
	CHECK(consistent == tried, "%u of %u crash points inconsistent", tried - consistent, tried);
}


/* Many small transactions committed by size on the commit thread while the
 * workload goes on; everything must read back and the image must be clean. */
static void test_async_small(bool journal)
{
	char img[300];
	snprintf(img, sizeof(img), "%s/async.img", scratch);
	make_image_or_skip(img, journal ? "-t ext3 -b 1024" : "-t ext2 -b 1024", 16384);
	g_async = true;
	g_max_blocks = 2;
	set_txn_cfg(false, journal, 0, 0, NULL);
	ext2_filsys fs;
	bool synced[SWEEP_ROUNDS];
	CHECK_ERR(ext2fs_open2(img, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs));
	CHECK_ERR(ext2fs_read_bitmaps(fs));
	CHECK_ERR(rio_txn_attach(fs));
	CHECK_ERR(sweep_workload(fs, synced));
	verify_files(fs, 0, 1);
	for (int r = 0; r < SWEEP_ROUNDS; r++)
		CHECK(file_intact(fs, r), "k%d_2 through the overlay", r);
	CHECK_ERR(rio_txn_detach(fs));
	char stats[300];
	snprintf(stats, sizeof(stats), "%s/stats.json", scratch);
	CHECK_ERR(rio_write_stats(fs->io, stats));
	CHECK_ERR(ext2fs_close2(fs, 0));
	CHECK(fsck_clean(img), "e2fsck after async commits");
	CHECK_ERR(ext2fs_open2(img, NULL, 0, 0, 0, unix_io_manager, &fs));
	for (int r = 0; r < SWEEP_ROUNDS; r++)
		CHECK(file_intact(fs, r), "k%d_2 on disk", r);
	ext2fs_close2(fs, 0);
	CHECK(run_shell("python3 -c 'import json,sys; d=json.load(open(\"%s\")); sys.exit(0 if d[\"transactions\"] > %d else 1)'",
		  stats, 2 * SWEEP_ROUNDS) == 0, "expected many size-limited transactions");
}


/* The checker's attach begun beside the mount's bitmap pass
 * (rio_txn_prepare) is taken over only when nothing but the primary
 * superblock's mount fields changed meanwhile; otherwise the attach reads
 * anew.  Either way the base check is clean and commits are approved.  On
 * a small image the attach may read the superblock after the test changed
 * it, so the layout-field case does not say which happened. */
enum early_case { EARLY_SB_COUNTS, EARLY_OTHER_BLOCK, EARLY_SB_LAYOUT, EARLY_DIRTY, EARLY_N };

static void test_early_attach(void)
{
	static const char *const names[EARLY_N] = { "superblock counts", "another block",
						    "a superblock layout field", "dirty cache" };
	char img[300];
	snprintf(img, sizeof(img), "%s/early.img", scratch);
	for (int c = 0; c < EARLY_N && !failures; c++) {
		make_image_or_skip(img, c % 2 ? "-t ext3 -b 4096" : "-t ext3 -b 1024", 65536);
		set_txn_cfg(true, true, 0, 0, NULL);
		ext2_filsys fs;
		/* a stale free count on disk, as a power cut leaves it */
		CHECK_ERR(ext2fs_open2(img, NULL, EXT2_FLAG_RW, 0, 0, unix_io_manager, &fs));
		ext2fs_free_blocks_count_add(fs->super, -7);
		ext2fs_mark_super_dirty(fs);
		fs->flags |= EXT2_FLAG_SUPER_ONLY;
		CHECK_ERR(ext2fs_close2(fs, 0));
		CHECK_ERR(ext2fs_open2(img, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs));
		struct ext2_inode root;
		if (c == EARLY_DIRTY) {
			CHECK_ERR(ext2fs_read_inode(fs, EXT2_ROOT_INO, &root));
			root.i_atime++;
			CHECK_ERR(ext2fs_write_inode(fs, EXT2_ROOT_INO, &root));
		}
		CHECK_ERR(rio_txn_prepare(fs));
		CHECK_ERR(ext2fs_read_bitmaps(fs));
		/* what a mount writes meanwhile: the superblock alone (the free
		 * count recounted from the descriptors) ... */
		blk64_t free_blocks = 0;
		for (dgrp_t g = 0; g < fs->group_desc_count; g++)
			free_blocks += ext2fs_bg_free_blocks_count(fs, g);
		ext2fs_free_blocks_count_set(fs->super, free_blocks);
		fs->super->s_mnt_count++;
		if (c == EARLY_SB_LAYOUT)
			fs->super->s_max_mnt_count++;
		ext2fs_mark_super_dirty(fs);
		fs->flags |= EXT2_FLAG_SUPER_ONLY;
		CHECK_ERR(ext2fs_flush(fs));
		fs->flags &= ~EXT2_FLAG_SUPER_ONLY;
		/* ... or more */
		if (c == EARLY_OTHER_BLOCK) {
			CHECK_ERR(ext2fs_read_inode(fs, EXT2_ROOT_INO, &root));
			root.i_mtime++;
			CHECK_ERR(ext2fs_write_inode(fs, EXT2_ROOT_INO, &root));
		}
		CHECK_ERR(rio_txn_attach(fs));
		struct rio_stats st;
		CHECK_ERR(rio_get_stats(fs->io, &st));
		/* a layout field is refused only if the attach read the superblock
		 * before it changed (tests/checker refresh-super): either way the
		 * checker starts from what is on disk, as the checks below show */
		if (c != EARLY_SB_LAYOUT)
			CHECK(st.checker_attached_early == (c == EARLY_SB_COUNTS), "%s: early attach %s",
			      names[c], st.checker_attached_early ? "kept" : "dropped");
		char *report = NULL;
		CHECK_ERR(rio_txn_base_check(fs, &report));
		CHECK(report == NULL, "%s: base check: %s", names[c], report ? report : "");
		free(report);
		make_files(fs, "e", 8, 20);
		CHECK_ERR(rio_txn_boundary(fs, true));
		CHECK(!rio_txn_failed(fs->io), "%s: a commit after the attach was rejected", names[c]);
		CHECK_ERR(rio_txn_detach(fs));
		CHECK_ERR(ext2fs_close2(fs, 0));
		CHECK(fsck_clean(img), "%s: e2fsck", names[c]);
	}
}

/* An operation that fails half-way is rolled back to its savepoint: its
 * metadata writes vanish, the blocks it freed are in use again, libext2fs's
 * bitmaps and group descriptors are as before it (io undoes the allocations
 * it saw; the caller restores only the superblock and the inode cache), and
 * what earlier operations of the same transaction did survives. */
static void test_rollback(bool journal)
{
	char img[300];
	snprintf(img, sizeof(img), "%s/rb.img", scratch);
	make_image_or_skip(img, journal ? "-t ext3 -b 1024" : "-t ext2 -b 1024", 16384);
	set_txn_cfg(false, journal, 0, 0, NULL);
	ext2_filsys fs;
	CHECK_ERR(ext2fs_open2(img, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs));
	CHECK_ERR(ext2fs_read_bitmaps(fs));
	CHECK_ERR(rio_txn_attach(fs));
	make_files(fs, "a", 2, 14);
	CHECK_ERR(rio_txn_boundary(fs, true));
	make_files(fs, "b", 1, 5);           /* acknowledged, not yet committed */
	CHECK_ERR(rio_txn_boundary(fs, false));
	if (failures)
		return;

	/* the operation: snapshot libext2fs's state, savepoint */
	struct ext2_super_block sb_snap = *fs->super;
	size_t gdlen = (size_t)fs->desc_blocks * fs->blocksize;
	void *gd_snap = malloc(gdlen);
	CHECK(gd_snap, "malloc");
	memcpy(gd_snap, fs->group_desc, gdlen);
	ext2fs_block_bitmap bmap_snap;
	ext2fs_inode_bitmap imap_snap;
	CHECK_ERR(ext2fs_copy_bitmap(fs->block_map, &bmap_snap));
	CHECK_ERR(ext2fs_copy_bitmap(fs->inode_map, &imap_snap));
	CHECK_ERR(rio_txn_savepoint(fs->io));
	/* ... it creates a file, deletes a0 and then "fails" */
	make_files(fs, "c", 1, 13);
	remove_file(fs, "a0");
	if (failures)
		return;
	CHECK_ERR(rio_txn_rollback(fs->io));
	*fs->super = sb_snap;
	CHECK_ERR(ext2fs_flush_icache(fs));
	ext2fs_mark_super_dirty(fs);
	CHECK(memcmp(fs->group_desc, gd_snap, gdlen) == 0,
	      "group descriptors not restored by the rollback\n");
	CHECK(ext2fs_compare_block_bitmap(fs->block_map, bmap_snap) == 0,
	      "block bitmap not restored by the rollback\n");
	CHECK(ext2fs_compare_inode_bitmap(fs->inode_map, imap_snap) == 0,
	      "inode bitmap not restored by the rollback\n");
	free(gd_snap);
	ext2fs_free_block_bitmap(bmap_snap);
	ext2fs_free_inode_bitmap(imap_snap);

	ext2_ino_t ino;
	CHECK(ext2fs_lookup(fs, EXT2_ROOT_INO, "c0", 2, NULL, &ino) == EXT2_ET_FILE_NOT_FOUND,
	      "rolled-back file still visible");
	CHECK_ERR(ext2fs_lookup(fs, EXT2_ROOT_INO, "a0", 2, NULL, &ino));
	CHECK_ERR(ext2fs_lookup(fs, EXT2_ROOT_INO, "b0", 2, NULL, &ino));
	/* and the next operation goes on normally */
	make_files(fs, "d", 1, 3);
	CHECK_ERR(rio_txn_detach(fs));
	CHECK_ERR(ext2fs_close2(fs, 0));
	CHECK(fsck_clean(img), "e2fsck after rollback");
	CHECK_ERR(ext2fs_open2(img, NULL, 0, 0, 0, unix_io_manager, &fs));
	CHECK(ext2fs_lookup(fs, EXT2_ROOT_INO, "c0", 2, NULL, &ino) == EXT2_ET_FILE_NOT_FOUND, "c0 on disk");
	CHECK_ERR(ext2fs_lookup(fs, EXT2_ROOT_INO, "a0", 2, NULL, &ino));
	CHECK_ERR(ext2fs_lookup(fs, EXT2_ROOT_INO, "b0", 2, NULL, &ino));
	CHECK_ERR(ext2fs_lookup(fs, EXT2_ROOT_INO, "d0", 2, NULL, &ino));
	ext2fs_close2(fs, 0);
}

/* Transaction ids and pending frees (what fsync and the allocator's retry
 * rely on): ids only grow and a forced commit makes the open one durable;
 * blocks freed by the open transaction stay marked and are counted pending
 * until its commit; an operation that takes many of them back and frees
 * others is rolled back exactly (thousands of removals from the freed set). */
static void test_txn_ids(void)
{
	enum { NB = 6000 };
	char img[300];
	snprintf(img, sizeof(img), "%s/ids.img", scratch);
	make_image_or_skip(img, "-t ext3 -b 1024", 32768);
	set_txn_cfg(false, true, 0, 0, NULL);
	ext2_filsys fs;
	CHECK_ERR(ext2fs_open2(img, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs));
	CHECK_ERR(ext2fs_read_bitmaps(fs));
	uint64_t open = 9, durable = 9;
	rio_txn_ids(fs->io, &open, &durable);
	CHECK(open == 0 && durable == 0, "ids before attach: %llu %llu\n",
	      (unsigned long long)open, (unsigned long long)durable);
	CHECK_ERR(rio_txn_attach(fs));
	rio_txn_ids(fs->io, &open, &durable);
	CHECK(open == 1 && durable == 0, "ids at attach: %llu %llu\n",
	      (unsigned long long)open, (unsigned long long)durable);
	static blk64_t b[2 * NB];
	blk64_t goal = fs->super->s_first_data_block;
	for (int i = 0; i < 2 * NB; i++) {
		CHECK_ERR(ext2fs_new_block2(fs, goal, NULL, &b[i]));
		ext2fs_block_alloc_stats2(fs, b[i], +1);
		goal = b[i] + 1;
	}
	CHECK_ERR(rio_txn_boundary(fs, true));
	rio_txn_ids(fs->io, &open, &durable);
	CHECK(open == 2 && durable == 1, "ids after a commit: %llu %llu\n",
	      (unsigned long long)open, (unsigned long long)durable);
	CHECK(rio_txn_pending_frees(fs->io) == 0, "nothing pending after a commit\n");
	/* a forced commit with nothing to log still counts the open id durable */
	CHECK_ERR(rio_txn_boundary(fs, true));
	rio_txn_ids(fs->io, &open, &durable);
	CHECK(open == 3 && durable == 2, "ids after an empty commit: %llu %llu\n",
	      (unsigned long long)open, (unsigned long long)durable);

	for (int i = 0; i < NB; i++)
		ext2fs_block_alloc_stats2(fs, b[i], -1);
	CHECK(rio_txn_pending_frees(fs->io) == NB, "pending %llu, want %d\n",
	      (unsigned long long)rio_txn_pending_frees(fs->io), NB);
	CHECK_ERR(rio_txn_savepoint(fs->io));
	for (int i = 0; i < NB; i += 3)
		ext2fs_block_alloc_stats2(fs, b[i], +1);       /* taken back */
	for (int i = NB; i < 2 * NB; i++)
		ext2fs_block_alloc_stats2(fs, b[i], -1);       /* freed by the operation */
	CHECK(rio_txn_pending_frees(fs->io) == 2 * NB - (NB + 2) / 3, "pending %llu mid-operation\n",
	      (unsigned long long)rio_txn_pending_frees(fs->io));
	CHECK_ERR(rio_txn_rollback(fs->io));
	CHECK(rio_txn_pending_frees(fs->io) == NB, "pending %llu after the rollback, want %d\n",
	      (unsigned long long)rio_txn_pending_frees(fs->io), NB);
	for (int i = 1; i < NB; i += 3)
		CHECK(ext2fs_test_block_bitmap2(fs->block_map, b[i]), "block %llu freed but reusable "
		      "before its commit\n", (unsigned long long)b[i]);
	CHECK_ERR(rio_txn_boundary(fs, true));
	rio_txn_ids(fs->io, &open, &durable);
	CHECK(open == 4 && durable == 3, "ids after the last commit: %llu %llu\n",
	      (unsigned long long)open, (unsigned long long)durable);
	CHECK(rio_txn_pending_frees(fs->io) == 0, "pending after the commit\n");
	for (int i = 0; i < NB; i++)
		CHECK(!ext2fs_test_block_bitmap2(fs->block_map, b[i]), "block %llu still held "
		      "after the commit that freed it\n", (unsigned long long)b[i]);
	for (int i = NB; i < 2 * NB; i++)                   /* owned by no inode */
		ext2fs_block_alloc_stats2(fs, b[i], -1);
	CHECK_ERR(rio_txn_detach(fs));
	CHECK_ERR(ext2fs_close2(fs, 0));
	CHECK(fsck_clean(img), "e2fsck after the ids scenario");
}

/* ---- injected corruption: rejected, read-only, nothing on disk ---- */

static errcode_t corrupt_workload(ext2_filsys fs, int rounds)
{
	errcode_t err = 0;
	unsigned bs = fs->blocksize;
	unsigned char *buf = malloc(14 * (size_t)bs);
	if (!buf)
		return ENOMEM;
	for (int r = 0; r < rounds && !err; r++) {
		char dname[32];
		snprintf(dname, sizeof(dname), "dir%d", r);
		err = ext2fs_mkdir(fs, EXT2_ROOT_INO, 0, dname);
		ext2_ino_t dir = 0, ino = 0;
		if (!err)
			err = ext2fs_lookup(fs, EXT2_ROOT_INO, dname, strlen(dname), NULL, &dir);
		if (!err)
			err = ext2fs_new_inode(fs, dir, 0100644, 0, &ino);
		struct ext2_inode inode;
		if (!err) {
			ext2fs_inode_alloc_stats2(fs, ino, +1, 0);
			rio_txn_inode_bitmap_changed(fs, ino);
			memset(&inode, 0, sizeof(inode));
			inode.i_mode = 0100644;
			inode.i_links_count = 1;
			err = ext2fs_write_new_inode(fs, ino, &inode);
		}
		struct rio_extent ext[14];
		fill(buf, 14 * (size_t)bs, (unsigned)r);
		for (unsigned i = 0; i < 14 && !err; i++) {
			blk64_t p = 0;
			err = ext2fs_bmap2(fs, ino, NULL, NULL, BMAP_ALLOC, i, NULL, &p);
			ext[i] = (struct rio_extent){ p, 1, buf + (size_t)i * bs };
		}
		if (!err)
			err = rio_data_io(fs->io, true, ino, ext, 14);
		if (!err)
			err = ext2fs_read_inode(fs, ino, &inode);
		if (!err) {
			inode.i_size = 14 * bs;
			err = ext2fs_write_inode(fs, ino, &inode);
		}
		if (!err)
			err = ext2fs_link(fs, dir, "file", ino, EXT2_FT_REG_FILE);
		/* an xattr too large for a 128-byte inode: an xattr block */
		struct ext2_xattr_handle *h = NULL;
		if (!err)
			err = ext2fs_xattrs_open(fs, ino, &h);
		if (!err) {
			char val[200];
			memset(val, 'x', sizeof(val));
			err = ext2fs_xattrs_read(h);
			if (!err)
				err = ext2fs_xattr_set(h, "user.test", val, sizeof(val));
			errcode_t cerr = ext2fs_xattrs_close(&h);
			if (!err)
				err = cerr;
		}
		if (!err)
			err = rio_txn_boundary(fs, true);
	}
	free(buf);
	return err;
}


/* on_violation=log: the violation is recorded and the transaction written
 * anyway (so e2fsck must now find the corruption). */
static void test_corrupt_log(void)
{
	char img[300];
	snprintf(img, sizeof(img), "%s/log.img", scratch);
	make_image_or_skip(img, "-t ext3 -b 1024 -I 128", 16384);
	struct rio_config cfg = {
		.block_cache_mb = 8, .quiet = true, .checker = true, .checker_cache_mb = 16,
		.journal = true, .on_violation = RIO_ONV_LOG, .fault_seed = 3,
		.fault_corrupt = "links@2",
	};
	rio_set_config(&cfg);
	ext2_filsys fs;
	CHECK_ERR(ext2fs_open2(img, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs));
	CHECK_ERR(ext2fs_read_bitmaps(fs));
	CHECK_ERR(rio_txn_attach(fs));
	errcode_t err = corrupt_workload(fs, 3);
	CHECK(err == 0, "log mode refused: %ld", (long)err);
	CHECK(!rio_txn_failed(fs->io), "log mode failed the file system");
	CHECK(rio_txn_last_violation(fs->io) != NULL, "violation not recorded");
	CHECK_ERR(rio_txn_detach(fs));
	char stats[300];
	snprintf(stats, sizeof(stats), "%s/stats.json", scratch);
	CHECK_ERR(rio_write_stats(fs->io, stats));
	CHECK_ERR(ext2fs_close2(fs, 0));
	CHECK(run_shell("grep -q '\"invariant\"' '%s'", stats) == 0, "violation not in stats");
	CHECK(run_shell("e2fsck -fn %s >/dev/null 2>&1", img) != 0, "the let-through corruption is not on disk");
}

static const char *const kinds[] = {
	"bbitmap", "ibitmap", "bgd_free_blocks", "bgd_free_inodes", "bgd_used_dirs",
	"sb_free_blocks", "ptr_used", "ptr_free", "ptr_meta", "ind_ptr", "links", "size",
	"iblocks", "dtime", "mode", "dirent_inode", "dirent_reclen", "dirent_namelen",
	"dirent_type", "dotdot", "xattr_refcount", "random",
};

static void test_corrupt(bool journal)
{
	char pristine[300], img[300];
	snprintf(pristine, sizeof(pristine), "%s/pristine.img", scratch);
	snprintf(img, sizeof(img), "%s/corrupt.img", scratch);
	make_image_or_skip(pristine, journal ? "-t ext3 -b 1024 -I 128" : "-t ext2 -b 1024 -I 128", 16384);
	unsigned bad = 0, tried = 0;
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		for (int n = 1; n <= 2; n++) {
			char spec[64];
			snprintf(spec, sizeof(spec), "%s@%d", kinds[k], n);
			CHECK(run_shell("cp %s %s", pristine, img) == 0, "cp");
			set_txn_cfg(true, journal, 0, (uint64_t)k * 7 + (uint64_t)n, spec);
			ext2_filsys fs;
			CHECK_ERR(ext2fs_open2(img, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs));
			CHECK_ERR(ext2fs_read_bitmaps(fs));
			CHECK_ERR(rio_txn_attach(fs));
			errcode_t err = corrupt_workload(fs, 4);
			bool rejected = err == EROFS && rio_txn_failed(fs->io) &&
					rio_txn_last_violation(fs->io) != NULL;
			errcode_t derr = rio_txn_detach(fs);
			char stats[400];
			snprintf(stats, sizeof(stats), "%s/stats-%s.json", scratch, spec);
			CHECK_ERR(rio_write_stats(fs->io, stats));
			if (ext2fs_close2(fs, 0))
				ext2fs_free(fs);
			bool clean = fsck_clean(img);
			bool reported = run_shell("grep -q '\"invariant\"' '%s'", stats) == 0;
			tried++;
			if (!rejected || derr != EROFS || !clean || !reported) {
				bad++;
				fprintf(stderr, "%s: rejected %d (err %ld), detach %ld, e2fsck clean %d, in stats %d\n",
					spec, rejected, (long)err, (long)derr, clean, reported);
			}
		}
	}
	printf("corruption: %u injected, %u rejected cleanly\n", tried, tried - bad);
	CHECK(bad == 0, "%u of %u injected corruptions not handled", bad, tried);
}

/* ---- what a commit writes of libext2fs's allocation state ---- */

static int bit_on_disk(const char *path, unsigned bs, blk64_t bitmap, unsigned bit)
{
	unsigned char byte;
	if (raw_read(path, bitmap * bs + bit / 8, &byte, 1))
		return -1;
	return (byte >> (bit % 8)) & 1;
}

/* A commit writes the bitmaps of the groups it changed, not of every group:
 * its seam writes do not grow with the file system.  What it writes is on
 * disk (a second handle sees it), and a change nobody marked is caught by
 * RECON_VERIFY_FLUSH before it can be lost. */
static void test_txn_flush(void)
{
	char img[300];
	snprintf(img, sizeof(img), "%s/flush.img", scratch);
	/* 1 KiB blocks, 8 MiB groups: 64 groups, 128 bitmap blocks */
	make_image_or_skip(img, "-t ext3 -b 1024", 512 * 1024);
	set_txn_cfg(false, true, 0, 0, NULL);
	ext2_filsys fs;
	CHECK_ERR(ext2fs_open2(img, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs));
	CHECK_ERR(ext2fs_read_bitmaps(fs));
	CHECK(fs->group_desc_count >= 64, "%u groups", fs->group_desc_count);
	CHECK_ERR(rio_txn_attach(fs));
	dgrp_t g = 41;
	blk64_t blk = ext2fs_group_first_block2(fs, g) + 4000;
	ext2_ino_t ino = g * fs->super->s_inodes_per_group + 7;
	CHECK(!ext2fs_test_block_bitmap2(fs->block_map, blk), "block %llu in use",
	      (unsigned long long)blk);
	CHECK(!ext2fs_test_inode_bitmap2(fs->inode_map, ino), "inode %u in use", ino);

	struct rio_stats before, after;
	CHECK_ERR(rio_get_stats(fs->io, &before));
	ext2fs_block_alloc_stats2(fs, blk, +1);
	ext2fs_inode_alloc_stats2(fs, ino, +1, 0);
	rio_txn_inode_bitmap_changed(fs, ino);
	CHECK_ERR(rio_txn_boundary(fs, true));
	CHECK_ERR(rio_get_stats(fs->io, &after));
	/* two bitmaps, the superblock and (the first time) every descriptor
	 * block: ext2fs_flush would write all 128 bitmaps */
	uint64_t seam = after.meta_writes - before.meta_writes;
	CHECK(seam <= 3 + fs->desc_blocks, "a commit of one group's changes made %llu metadata writes",
	      (unsigned long long)seam);
	unsigned bpg = fs->super->s_blocks_per_group, ipg = fs->super->s_inodes_per_group;
	unsigned bbit = (unsigned)((blk - fs->super->s_first_data_block) % bpg);
	unsigned ibit = (ino - 1) % ipg;
	CHECK(bit_on_disk(img, fs->blocksize, ext2fs_block_bitmap_loc(fs, g), bbit) == 1,
	      "block bitmap of group %u not written", g);
	CHECK(bit_on_disk(img, fs->blocksize, ext2fs_inode_bitmap_loc(fs, g), ibit) == 1,
	      "inode bitmap of group %u not written", g);
	ext2_filsys fs2;
	CHECK_ERR(ext2fs_open2(img, NULL, 0, 0, 0, unix_io_manager, &fs2));
	CHECK(ext2fs_bg_free_blocks_count(fs2, g) == ext2fs_bg_free_blocks_count(fs, g) &&
	      ext2fs_bg_free_inodes_count(fs2, g) == ext2fs_bg_free_inodes_count(fs, g),
	      "descriptor of group %u not written", g);
	CHECK(ext2fs_free_blocks_count(fs2->super) == ext2fs_free_blocks_count(fs->super),
	      "superblock free count not written");
	ext2fs_close2(fs2, 0);

	/* and back: the disk is as mke2fs left it (e2fsck below) */
	CHECK_ERR(rio_get_stats(fs->io, &before));
	ext2fs_block_alloc_stats2(fs, blk, -1);
	ext2fs_inode_alloc_stats2(fs, ino, -1, 0);
	rio_txn_inode_bitmap_changed(fs, ino);
	CHECK_ERR(rio_txn_boundary(fs, true));
	CHECK_ERR(rio_get_stats(fs->io, &after));
	/* now only the descriptor block that changed */
	seam = after.meta_writes - before.meta_writes;
	CHECK(seam <= 4, "the second commit made %llu metadata writes", (unsigned long long)seam);
	CHECK(bit_on_disk(img, fs->blocksize, ext2fs_block_bitmap_loc(fs, g), bbit) == 0,
	      "block bitmap of group %u not written back", g);
	CHECK(bit_on_disk(img, fs->blocksize, ext2fs_inode_bitmap_loc(fs, g), ibit) == 0,
	      "inode bitmap of group %u not written back", g);
	CHECK_ERR(rio_txn_detach(fs));
	CHECK_ERR(ext2fs_close_free(&fs));
	CHECK(fsck_clean(img), "e2fsck after the commits");

	/* an inode bitmap change with no mark: the verification stops it */
	pid_t pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		setenv("RECON_VERIFY_FLUSH", "1", 1);
		int devnull = open("/dev/null", O_WRONLY);
		if (devnull >= 0)
			dup2(devnull, 2);
		if (ext2fs_open2(img, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs) ||
		    ext2fs_read_bitmaps(fs) || rio_txn_attach(fs))
			_exit(3);
		ext2fs_inode_alloc_stats2(fs, ino, +1, 0);
		(void)rio_txn_boundary(fs, true);
		_exit(0);
	}
	int st;
	CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT,
	      "an unmarked inode bitmap change was not caught (status %d)", st);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test_rio channel|fallback|nocache|blockdev|eviction|sparse|fs|fs-fallback|crash|crash-fs|"
			"journal-recover|txn-inplace|txn-journal|txn-checker|txn-async|txn-ids|txn-rollback|txn-flush|early-attach|crash-sweep|crash-sweep-full|corrupt|corrupt-ext2|corrupt-log\n");
		return 2;
	}
	snprintf(scratch, sizeof(scratch), "/tmp/rio-test-%s-XXXXXX", argv[1]);
	if (!mkdtemp(scratch)) {
		perror("mkdtemp");
		return 77;
	}
	add_error_table(&et_ext2_error_table);
	const char *t = argv[1];
	if (!strcmp(t, "channel"))
		test_channel(false, 8);
	else if (!strcmp(t, "fallback"))
		test_channel(true, 8);
	else if (!strcmp(t, "nocache"))
		test_channel(false, 0);
	else if (!strcmp(t, "blockdev"))
		test_blockdev();
	else if (!strcmp(t, "eviction"))
		test_eviction();
	else if (!strcmp(t, "sparse"))
		test_sparse();
	else if (!strcmp(t, "fs")) {
		test_fs("-t ext3 -b 1024", false, 8);
		if (!failures)
			test_fs("-t ext3 -b 4096", false, 8);
		if (!failures)
			test_fs("-t ext2 -b 4096", false, 0);
	} else if (!strcmp(t, "fs-fallback"))
		test_fs("-t ext3 -b 1024", true, 1);
	else if (!strcmp(t, "crash")) {
		test_crash(false);
		if (!failures)
			test_crash(true);
	} else if (!strcmp(t, "crash-fs"))
		test_crash_fs();
	else if (!strcmp(t, "journal-recover"))
		test_journal_recover();
	else if (!strcmp(t, "txn-inplace"))
		test_txn(false, false);
	else if (!strcmp(t, "txn-journal"))
		test_txn(true, false);
	else if (!strcmp(t, "txn-checker"))
		test_txn(true, true);
	else if (!strcmp(t, "txn-async")) {
		g_async = true;
		test_txn(true, false);
		if (!failures)
			test_txn(false, false);
		if (!failures)
			test_txn(true, true);
		if (!failures)
			test_async_small(true);
		if (!failures)
			test_async_small(false);
	} else if (!strcmp(t, "txn-ids")) {
		test_txn_ids();
	} else if (!strcmp(t, "txn-rollback")) {
		test_rollback(true);
		if (!failures)
			test_rollback(false);
	} else if (!strcmp(t, "crash-sweep"))
		test_crash_sweep(40, 2);
	else if (!strcmp(t, "crash-sweep-full"))
		test_crash_sweep(500, 3);
	else if (!strcmp(t, "corrupt"))
		test_corrupt(true);
	else if (!strcmp(t, "corrupt-ext2"))
		test_corrupt(false);
	else if (!strcmp(t, "corrupt-log"))
		test_corrupt_log();
	else if (!strcmp(t, "txn-flush"))
		test_txn_flush();
	else if (!strcmp(t, "early-attach"))
		test_early_attach();
	else {
		fprintf(stderr, "unknown test %s\n", t);
		return 2;
	}
	if (!failures)
		run_shell("rm -rf %s", scratch);
	else
		fprintf(stderr, "scratch kept: %s\n", scratch);
	printf("%s: %s\n", t, failures ? "FAIL" : "ok");
	return failures ? 1 : 0;
}
