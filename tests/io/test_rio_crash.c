/*
 * tests/io/test_rio_crash.c - when things go wrong: power cuts on the
 * channel and under libext2fs, journal recovery, the crash sweep (a power
 * cut at spread points of a workload, then recovery by us and by the
 * kernel), the same workload committed by size on the commit thread, and
 * injected corruption the checker must reject before it reaches the disk.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "rio_test.h"

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

void test_crash(bool no_uring)
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
void test_crash_fs(void)
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

void test_journal_recover(void)
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

void test_crash_sweep(unsigned points, unsigned seeds)
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
void test_async_small(bool journal)
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
void test_corrupt_log(void)
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

void test_corrupt(bool journal)
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
