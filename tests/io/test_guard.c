/*
 * tests/io/test_guard.c - the data guard of rio_data_io and journal replay
 * into memory on read-only channels.  `test_guard NAME` runs one test; exit
 * 0 pass, 77 skip, 1 fail.
 *
 *   guard        a data write to a block the checker's approved state gives
 *                to another inode, to static metadata, or from a reserved
 *                inode is refused (EIO) before it reaches the device, and the
 *                file system fails; free blocks and the writer's own are not
 *   guard-async  many small transactions committed on the commit thread while
 *                files are created and deleted: blocks freed by a transaction
 *                still being checked are never written by the next one, so
 *                the guard never refuses (a false alarm is a bug), and freed
 *                blocks are reused once their free is approved
 *   ro-replay    a read-only channel replays a needs_recovery journal into
 *                memory: reads (metadata and data paths, and a read-only
 *                reopen) see the replayed blocks, the image is not written
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
/* CHECK, CHECK_ERR, scratch, failures, fill, fsck_clean and raw_read */
#include "rio_test.h"

static void guard_cfg(bool checker, bool async, unsigned max_blocks)
{
	struct rio_config cfg = {
		.block_cache_mb = 8, .quiet = true, .checker = checker, .checker_cache_mb = 16,
		.commit_interval_ms = 0, .journal = true, .on_violation = RIO_ONV_READONLY,
		.async_commit = async, .max_transaction_blocks = max_blocks,
	};
	rio_set_config(&cfg);
}

/* A new regular file /name with nblocks data blocks (data through
 * rio_data_io, as fuse/ writes it); *ino_out its inode, blks[] its blocks. */
static errcode_t new_file(ext2_filsys fs, const char *name, unsigned nblocks, unsigned seed,
			  ext2_ino_t *ino_out, blk64_t *blks)
{
	unsigned bs = fs->blocksize;
	ext2_ino_t ino;
	errcode_t err = ext2fs_new_inode(fs, EXT2_ROOT_INO, 0100644, 0, &ino);
	if (err)
		return err;
	ext2fs_inode_alloc_stats2(fs, ino, +1, 0);
	rio_txn_inode_bitmap_changed(fs, ino);
	struct ext2_inode inode;
	memset(&inode, 0, sizeof(inode));
	inode.i_mode = 0100644;
	inode.i_links_count = 1;
	inode.i_atime = inode.i_ctime = inode.i_mtime = 1700000000;
	err = ext2fs_write_new_inode(fs, ino, &inode);
	unsigned char *buf = malloc((size_t)nblocks * bs);
	struct rio_extent *ext = calloc(nblocks, sizeof(*ext));
	if (!buf || !ext)
		err = ENOMEM;
	if (!err)
		fill(buf, (size_t)nblocks * bs, seed);
	for (unsigned i = 0; i < nblocks && !err; i++) {
		blk64_t p = 0;
		err = ext2fs_bmap2(fs, ino, NULL, NULL, BMAP_ALLOC, i, NULL, &p);
		ext[i] = (struct rio_extent){ p, 1, buf + (size_t)i * bs };
		if (blks)
			blks[i] = p;
	}
	if (!err)
		err = rio_data_io(fs->io, true, ino, ext, nblocks);
	free(ext);
	free(buf);
	if (!err)
		err = ext2fs_read_inode(fs, ino, &inode);
	if (!err) {
		inode.i_size = nblocks * bs;
		err = ext2fs_write_inode(fs, ino, &inode);
	}
	if (!err)
		err = ext2fs_link(fs, EXT2_ROOT_INO, name, ino, EXT2_FT_REG_FILE);
	if (err == EXT2_ET_DIR_NO_SPACE) {
		err = ext2fs_expand_dir(fs, EXT2_ROOT_INO);
		if (!err)
			err = ext2fs_link(fs, EXT2_ROOT_INO, name, ino, EXT2_FT_REG_FILE);
	}
	if (!err && ino_out)
		*ino_out = ino;
	return err;
}

static errcode_t remove_file(ext2_filsys fs, const char *name)
{
	ext2_ino_t ino;
	struct ext2_inode inode;
	errcode_t err = ext2fs_lookup(fs, EXT2_ROOT_INO, name, strlen(name), NULL, &ino);
	if (!err)
		err = ext2fs_read_inode(fs, ino, &inode);
	if (!err)
		err = ext2fs_unlink(fs, EXT2_ROOT_INO, name, ino, 0);
	if (!err)
		err = ext2fs_punch(fs, ino, &inode, NULL, 0, ~0ULL);
	if (!err)
		err = ext2fs_read_inode(fs, ino, &inode);
	if (!err) {
		inode.i_links_count = 0;
		inode.i_dtime = 1700000001;
		err = ext2fs_write_inode(fs, ino, &inode);
	}
	if (!err) {
		ext2fs_inode_alloc_stats2(fs, ino, -1, 0);
		rio_txn_inode_bitmap_changed(fs, ino);
	}
	return err;
}

static errcode_t open_attached(const char *path, ext2_filsys *fs)
{
	errcode_t err = ext2fs_open2(path, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, fs);
	if (err)
		return err;
	err = ext2fs_read_bitmaps(*fs);
	if (!err)
		err = rio_txn_attach(*fs);
	if (err)
		ext2fs_close_free(fs);
	return err;
}

/* Close after a refusal: the open transaction is dropped (as the daemon). */
static void close_failed(ext2_filsys fs)
{
	fs->flags &= ~(EXT2_FLAG_DIRTY | EXT2_FLAG_BB_DIRTY | EXT2_FLAG_IB_DIRTY);
	ext2fs_close_free(&fs);
}

/* One refused write: ino writes seed-filled data to blk; it must fail with
 * EIO, leave the device's block as it was, fail the file system, and name
 * blk and `owner_text` in the violation. */
static void expect_refused(const char *path, ext2_ino_t ino, blk64_t blk, const char *owner_text)
{
	ext2_filsys fs;
	CHECK_ERR(open_attached(path, &fs));
	unsigned bs = fs->blocksize;
	unsigned char *before = malloc(bs), *after = malloc(bs), *data = malloc(bs);
	CHECK(before && after && data, "malloc");
	CHECK(raw_read(path, blk * bs, before, bs) == 0, "raw read");
	fill(data, bs, 77);
	struct rio_extent ext[2] = { { blk, 1, data }, { 0, 0, data } };
	/* a free block after it in the same call: nothing of the call is issued */
	blk64_t free_blk;
	CHECK_ERR(ext2fs_new_block2(fs, 0, NULL, &free_blk));
	ext[1].blk = free_blk;
	ext[1].count = 1;
	unsigned char *free_before = malloc(bs), *free_after = malloc(bs);
	CHECK(free_before && free_after, "malloc");
	CHECK(raw_read(path, free_blk * bs, free_before, bs) == 0, "raw read");
	errcode_t err = rio_data_io(fs->io, true, ino, ext, 2);
	CHECK(err == EIO, "write of inode %u to block %llu: %s, not EIO", ino,
	      (unsigned long long)blk, err ? error_message(err) : "accepted");
	CHECK(rio_txn_failed(fs->io), "the file system did not fail after a refusal");
	const char *v = rio_txn_last_violation(fs->io);
	char want[64];
	snprintf(want, sizeof(want), "block %llu", (unsigned long long)blk);
	CHECK(v && strstr(v, want) && strstr(v, owner_text), "violation text: %s", v ? v : "(none)");
	CHECK(rio_txn_boundary(fs, true) == EROFS, "boundary after a refusal is not EROFS");
	close_failed(fs);
	CHECK(raw_read(path, blk * bs, after, bs) == 0, "raw read");
	CHECK(memcmp(before, after, bs) == 0, "block %llu changed on the device",
	      (unsigned long long)blk);
	CHECK(raw_read(path, free_blk * bs, free_after, bs) == 0, "raw read");
	CHECK(memcmp(free_before, free_after, bs) == 0, "the free block of the refused call was written");
	free(before);
	free(after);
	free(data);
	free(free_before);
	free(free_after);
}

static void test_guard(const char *mkfs)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/guard.img", scratch);
	make_image_or_skip(path, mkfs, 16384);
	guard_cfg(true, false, 0);
	ext2_filsys fs;
	CHECK_ERR(open_attached(path, &fs));
	ext2_ino_t a, b;
	blk64_t ablk[5], bblk[3];
	CHECK_ERR(new_file(fs, "a", 5, 1, &a, ablk));
	CHECK_ERR(new_file(fs, "b", 3, 2, &b, bblk));
	CHECK_ERR(rio_txn_boundary(fs, true));
	/* allowed: the writer's own blocks, and free ones (a new file) */
	unsigned bs = fs->blocksize;
	unsigned char *data = malloc(bs);
	CHECK(data, "malloc");
	fill(data, bs, 9);
	struct rio_extent own = { ablk[2], 1, data };
	CHECK_ERR(rio_data_io(fs->io, true, a, &own, 1));
	ext2_ino_t c;
	CHECK_ERR(new_file(fs, "c", 4, 3, &c, NULL));
	CHECK(!rio_txn_failed(fs->io), "a legitimate write was refused: %s",
	      rio_txn_last_violation(fs->io));
	CHECK_ERR(rio_txn_detach(fs));
	CHECK_ERR(ext2fs_close_free(&fs));
	free(data);
	CHECK(fsck_clean(path), "e2fsck after the allowed writes");

	char owner[64];
	/* another inode's data block */
	snprintf(owner, sizeof(owner), "of inode %u", a);
	expect_refused(path, b, ablk[3], owner);
	if (failures)
		return;
	CHECK(fsck_clean(path), "e2fsck after a refusal");
	/* static metadata: the first inode-table block, the block bitmap */
	CHECK_ERR(ext2fs_open2(path, NULL, 0, 0, 0, unix_io_manager, &fs));
	blk64_t itable = ext2fs_inode_table_loc(fs, 0), bbitmap = ext2fs_block_bitmap_loc(fs, 0);
	ext2_ino_t journal_ino = fs->super->s_journal_inum;
	blk64_t jblk = 0, rootblk = 0;
	CHECK_ERR(ext2fs_bmap2(fs, journal_ino, NULL, NULL, 0, 3, NULL, &jblk));
	CHECK_ERR(ext2fs_bmap2(fs, EXT2_ROOT_INO, NULL, NULL, 0, 0, NULL, &rootblk));
	ext2fs_close_free(&fs);
	expect_refused(path, b, itable, "itable");
	expect_refused(path, b, bbitmap, "bbitmap");
	/* a directory block, a journal block */
	expect_refused(path, b, rootblk, "dir block 0 of inode 2");
	expect_refused(path, b, jblk, "of inode 8");
	/* the journal inode writing its own block is refused too */
	expect_refused(path, journal_ino, jblk, "may not own file data");
	if (!failures)
		CHECK(fsck_clean(path), "e2fsck after the refusals");
}

/* Rounds of: create files, delete older ones, a boundary that commits in
 * the background once the transaction exceeds a few blocks.  No write may be
 * refused, and blocks freed earlier must be written again later (after
 * their free was approved) for the guard to have been tested on them. */
static void test_guard_async(void)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/async.img", scratch);
	make_image_or_skip(path, "-t ext3 -b 1024", 8192);
	guard_cfg(true, true, 1);
	ext2_filsys fs;
	CHECK_ERR(open_attached(path, &fs));
	unsigned nblocks = ext2fs_blocks_count(fs->super);
	unsigned char *freed_once = calloc(nblocks, 1);
	CHECK(freed_once, "calloc");
	blk64_t *blks[64] = { 0 };
	unsigned nb[64] = { 0 };
	unsigned reused = 0;
	for (unsigned r = 0; r < 64 && !failures; r++) {
		char name[32];
		snprintf(name, sizeof(name), "r%u", r);
		nb[r] = 1 + (r * 7) % 11;
		blks[r] = calloc(nb[r], sizeof(blk64_t));
		CHECK(blks[r], "calloc");
		errcode_t err = new_file(fs, name, nb[r], r, NULL, blks[r]);
		CHECK(err == 0, "round %u: write: %s; %s", r, error_message(err),
		      rio_txn_last_violation(fs->io) ? rio_txn_last_violation(fs->io) : "");
		for (unsigned i = 0; i < nb[r]; i++)
			reused += freed_once[blks[r][i]] != 0;
		if (r >= 3) {
			snprintf(name, sizeof(name), "r%u", r - 3);
			CHECK_ERR(remove_file(fs, name));
			for (unsigned i = 0; i < nb[r - 3]; i++)
				freed_once[blks[r - 3][i]] = 1;
		}
		err = rio_txn_boundary(fs, r % 16 == 15);
		CHECK(err == 0, "round %u: boundary: %s; %s", r, error_message(err),
		      rio_txn_last_violation(fs->io) ? rio_txn_last_violation(fs->io) : "");
	}
	for (unsigned r = 0; r < 64; r++)
		free(blks[r]);
	free(freed_once);
	if (failures)
		return;
	CHECK(!rio_txn_failed(fs->io), "refused: %s", rio_txn_last_violation(fs->io));
	CHECK_ERR(rio_txn_detach(fs));
	char stats[300];
	snprintf(stats, sizeof(stats), "%s/stats.json", scratch);
	CHECK_ERR(rio_write_stats(fs->io, stats));
	CHECK_ERR(ext2fs_close_free(&fs));
	CHECK(fsck_clean(path), "e2fsck after the async rounds");
	printf("guard-async: %u writes to blocks freed earlier in the run\n", reused);
	CHECK(reused > 0, "no freed block was reused: the case the guard must allow did not occur");
	CHECK(run_shell("python3 -c 'import json,sys; d=json.load(open(\"%s\")); "
		  "sys.exit(0 if d[\"violations\"] == [] and d[\"transactions\"] > 32 else 1)'", stats) == 0,
	      "stats: violations recorded or too few transactions");
}

static int file_sha(const char *path, char out[65])
{
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "sha256sum < %s", path);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	int ok = fscanf(p, "%64s", out) == 1;
	return pclose(p) == 0 && ok ? 0 : -1;
}

static void test_ro_replay(void)
{
	char path[300], data[300];
	snprintf(path, sizeof(path), "%s/ro.img", scratch);
	snprintf(data, sizeof(data), "%s/ro.data", scratch);
	make_image_or_skip(path, "-t ext3 -b 1024", 16384);
	/* debugfs logs a committed transaction without replaying it: blocks
	 * 9000 and 9001 (free) get the contents of data */
	if (run_shell("head -c 2048 /dev/urandom > %s && printf 'jo\\njw -b 9000,9001 %s\\njc\\n' > %s.cmd && "
		"debugfs -w -f %s.cmd %s >/dev/null 2>&1", data, data, data, data, path) != 0) {
		fprintf(stderr, "debugfs journal write unavailable\n");
		exit(77);
	}
	unsigned char want[2048], got[2048], disk[1024];
	CHECK(raw_read(data, 0, want, 2048) == 0, "data");
	CHECK(raw_read(path, 9000 * 1024, disk, 1024) == 0, "raw");
	CHECK(memcmp(want, disk, 1024) != 0, "block 9000 already holds the data");
	char sha_before[65], sha_after[65];
	CHECK(file_sha(path, sha_before) == 0, "sha");
	guard_cfg(false, false, 0);
	ext2_filsys fs;
	CHECK_ERR(ext2fs_open2(path, NULL, 0, 0, 0, rio_io_manager, &fs));
	if (!ext2fs_has_feature_journal_needs_recovery(fs->super)) {
		ext2fs_close_free(&fs);
		fprintf(stderr, "debugfs did not leave needs_recovery\n");
		exit(77);
	}
	unsigned replayed = 0;
	char msg[256];
	errcode_t err = rio_journal_recover(fs, &replayed, msg, sizeof(msg));
	CHECK(err == 0, "recover: %s (%s)", error_message(err), msg);
	CHECK(replayed == 1, "replayed %u", replayed);
	CHECK(!ext2fs_has_feature_journal_needs_recovery(fs->super), "needs_recovery in memory");
	/* the metadata path and the data path see the replay */
	CHECK_ERR(io_channel_read_blk64(fs->io, 9000, 2, got));
	CHECK(!memcmp(got, want, 2048), "channel read");
	memset(got, 0, sizeof(got));
	struct rio_extent ext = { 9000, 2, got };
	CHECK_ERR(rio_data_io(fs->io, false, 0, &ext, 1));
	CHECK(!memcmp(got, want, 2048), "data-path read");
	CHECK_ERR(ext2fs_close_free(&fs));
	/* a read-only reopen of the same image adopts it */
	CHECK_ERR(ext2fs_open2(path, NULL, 0, 0, 0, rio_io_manager, &fs));
	CHECK(!ext2fs_has_feature_journal_needs_recovery(fs->super),
	      "the reopened file system still needs recovery");
	memset(got, 0, sizeof(got));
	CHECK_ERR(io_channel_read_blk64(fs->io, 9001, 1, got));
	CHECK(!memcmp(got, want + 1024, 1024), "reopen: channel read");
	CHECK_ERR(ext2fs_close_free(&fs));
	CHECK(file_sha(path, sha_after) == 0, "sha");
	CHECK(!strcmp(sha_before, sha_after), "the read-only replay wrote to the image");
	/* a read-write open reads the device as it is (and replays onto it) */
	CHECK_ERR(ext2fs_open2(path, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs));
	CHECK(ext2fs_has_feature_journal_needs_recovery(fs->super), "rw open saw the memory replay");
	CHECK_ERR(rio_journal_recover(fs, &replayed, msg, sizeof(msg)));
	CHECK(replayed == 1, "rw replayed %u", replayed);
	CHECK_ERR(ext2fs_close_free(&fs));
	CHECK(raw_read(path, 9000 * 1024, disk, 1024) == 0, "raw");
	CHECK(!memcmp(want, disk, 1024), "rw replay did not write block 9000");
	CHECK(fsck_clean(path), "e2fsck after the rw replay");
	/* an image file without write permission is not opened read-write */
	CHECK(chmod(path, 0444) == 0, "chmod");
	err = ext2fs_open2(path, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs);
	CHECK(err == EACCES, "rw open of a mode 0444 image: %s", err ? error_message(err) : "accepted");
	CHECK_ERR(ext2fs_open2(path, NULL, 0, 0, 0, rio_io_manager, &fs));
	CHECK_ERR(ext2fs_close_free(&fs));
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test_guard guard|guard-async|ro-replay\n");
		return 2;
	}
	snprintf(scratch, sizeof(scratch), "/tmp/guard-test-%s-XXXXXX", argv[1]);
	if (!mkdtemp(scratch)) {
		perror("mkdtemp");
		return 77;
	}
	add_error_table(&et_ext2_error_table);
	const char *t = argv[1];
	if (!strcmp(t, "guard")) {
		test_guard("-t ext3 -b 1024");
		if (!failures)
			test_guard("-t ext3 -b 4096");
	} else if (!strcmp(t, "guard-async"))
		test_guard_async();
	else if (!strcmp(t, "ro-replay"))
		test_ro_replay();
	else {
		fprintf(stderr, "unknown test %s\n", t);
		return 2;
	}
	if (!failures)
		run_shell("rm -rf %s", scratch);
	else
		fprintf(stderr, "scratch kept in %s\n", scratch);
	return failures ? 1 : 0;
}
