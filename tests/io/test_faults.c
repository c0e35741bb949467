/*
 * tests/io/test_faults.c - io's error paths, reached by injected failures
 * (tests/common/fault_inject.h):
 *
 *   test_faults alloc [OP]   the Nth allocation fails, N = 1, 2, ...
 *   test_faults io [OP]      the Nth pread, pwrite or fdatasync fails with EIO
 *                            (the pread/pwrite fallback: every device call is one)
 *
 * OP is mount, power-cut, rejected, replay or ro-replay (default: all); FAULT_N=n runs
 * that injection point alone (gdb: break fault_injected).
 *
 * Each operation runs once per N until it completes without reaching the
 * Nth call.  The mount: open an ext3 image through rio_io_manager (checker
 * and journal on, commits in the caller's thread) as the daemon does
 * (bitmaps read ahead, the checker's early attach, the image judged whole),
 * a metadata block rewritten, a free block zeroed and both flushed before
 * attach (the cache's write-back), attach, an operation left in the open transaction, one that creates a
 * file and removes another and is rolled back to its savepoint, one that
 * creates two files, a forced commit (fsync), detach, close; power-cut: the
 * same with the power-cut injector armed (never reached).  Rejected: the
 * base check of an image with an in-use block free in its bitmap must
 * report it or fail, never call it consistent.  The replay:
 * open an image whose journal needs recovery and replay it
 * (rio_journal_recover); and one whose journal holds 300 blocks opened
 * read-only, replayed into memory and read through (the image must not
 * change).
 *
 * What each run must show: no crash, and every call returns 0 or an error;
 * an operation that fails is rolled back, and a rollback returns 0 or EROFS
 * (io.h); a rollback that returned 0 restored exactly (the rolled-back file
 * is gone, the removed one back); a forced commit that returned 0 is on disk
 * (no lying fsync: the image, its journal replayed by e2fsck, holds the
 * files); the image, its journal replayed, passes e2fsck -fn.  Leaks: the
 * ASan build runs LeakSanitizer every few runs.
 * Exit 0 pass, 1 fail, 77 skip (no mke2fs/debugfs/e2fsck).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault_inject.h"
#include "io.h"
#include "io_test_files.h"
#include "test_util.h"

int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

static char scratch[64];
static int failures;

/* power_cut: the power-cut injector armed past every write the mount
 * makes (each write then keeps the old contents to restore, zeroing is
 * written out), so that its own allocations fail in turn. */
static void set_config(bool no_uring, bool power_cut)
{
	struct rio_config cfg = {
		.block_cache_mb = 1, .no_uring = no_uring, .quiet = true, .checker = true,
		.checker_cache_mb = 1, .commit_interval_ms = 0, .journal = true,
		.on_violation = RIO_ONV_READONLY, .async_commit = false,
		.fault_crash_after = power_cut ? UINT64_C(1) << 40 : 0,
	};
	rio_set_config(&cfg);
}

/* A file of nblocks blocks named name in the root: libext2fs's calls and
 * rio_data_io, as the daemon's create and write make them, its second
 * block then zeroed (rio_data_zero) when it has more than two. */
static errcode_t create_file(ext2_filsys fs, const char *name, unsigned nblocks)
{
	ext2_ino_t ino;
	struct ext2_inode inode;
	unsigned char buf[1024];
	errcode_t err = ext2fs_new_inode(fs, EXT2_ROOT_INO, 0100644, 0, &ino);

	if (err)
		return err;
	rio_txn_inode_alloc_stats(fs, ino, +1, false);
	memset(&inode, 0, sizeof(inode));
	inode.i_mode = 0100644;
	inode.i_links_count = 1;
	inode.i_size = nblocks * fs->blocksize;
	inode.i_atime = inode.i_ctime = inode.i_mtime = 1700000000;
	if ((err = ext2fs_write_new_inode(fs, ino, &inode)))
		return err;
	memset(buf, name[0], sizeof(buf));
	for (unsigned i = 0; i < nblocks && !err; i++) {
		blk64_t pblk = 0;
		err = ext2fs_bmap2(fs, ino, NULL, NULL, BMAP_ALLOC, i, NULL, &pblk);
		struct rio_extent ext = { pblk, 1, buf };
		err = err ? err : rio_data_io(fs->io, true, ino, &ext, 1);
		/* the middle of a file zeroed, as fallocate's zero range does
		 * (written out when the device cannot, or the power cut is armed) */
		if (!err && i == 1 && nblocks > 2)
			err = rio_data_zero(fs->io, ino, &ext, 1);
	}
	if (err)
		return err;
	err = ext2fs_link(fs, EXT2_ROOT_INO, name, ino, EXT2_FT_REG_FILE);
	if (err == EXT2_ET_DIR_NO_SPACE) {
		err = ext2fs_expand_dir(fs, EXT2_ROOT_INO);
		err = err ? err : ext2fs_link(fs, EXT2_ROOT_INO, name, ino, EXT2_FT_REG_FILE);
	}
	return err;
}

static bool exists(ext2_filsys fs, const char *name)
{
	ext2_ino_t ino;
	return ext2fs_lookup(fs, EXT2_ROOT_INO, name, strlen(name), NULL, &ino) == 0;
}

/* libext2fs's in-memory state an operation may change, restored by the
 * caller after a rollback (io restores the bitmaps and descriptors). */
struct op_snapshot {
	struct ext2_super_block sb;
};

static errcode_t op_begin(ext2_filsys fs, struct op_snapshot *s)
{
	s->sb = *fs->super;
	return rio_txn_savepoint(fs->io);
}

/* Roll the operation back as the daemon does; 0 or EROFS is io's promise. */
static errcode_t op_rollback(ext2_filsys fs, const struct op_snapshot *s, unsigned long n)
{
	errcode_t err = rio_txn_rollback(fs->io);

	TEST_CHECK(err == 0 || err == EROFS, "N=%lu: rio_txn_rollback returned %ld (%s)", n,
		   (long)err, error_message(err));
	*fs->super = s->sb;
	ext2fs_flush_icache(fs);
	ext2fs_mark_super_dirty(fs);
	return err;
}

/* What a run of the mount promised: rolled back exactly, and durable. */
struct promises {
	enum fault_kind kind;
	bool op_failed;       /* the rolled-back operation saw an error */
	bool after_rollback;  /* the failure came before a rollback that returned 0 */
	bool synced;          /* the forced commit returned 0: b0, d0, d1 on disk */
};

/* The mount's operations on fs, attached; false as soon as one fails. */
static bool mount_ops(ext2_filsys fs, unsigned long n, struct promises *p)
{
	struct op_snapshot s;
	/* b0: acknowledged, left in the open transaction, so that the next
	 * operation changes blocks the transaction holds already */
	errcode_t err = op_begin(fs, &s);

	if (err)
		return false;
	err = create_file(fs, "b0", 2);
	err = err ? err : rio_txn_boundary(fs, false);
	if (err) {
		op_rollback(fs, &s, n);
		return false;
	}
	if ((err = op_begin(fs, &s)))
		return false;
	err = create_file(fs, "c0", 13);
	err = err ? err : io_test_remove_file(fs, "a0");
	p->op_failed = err != 0;
	if (op_rollback(fs, &s, n))
		return false;
	TEST_CHECK(!exists(fs, "c0") && exists(fs, "a0") && exists(fs, "b0"), "N=%lu: the rollback "
		   "did not restore (c0 %d, a0 %d, b0 %d)", n, exists(fs, "c0"), exists(fs, "a0"),
		   exists(fs, "b0"));
	/* restored exactly: nothing of the failure is left to fail what follows */
	p->after_rollback = fault_fired(p->kind);
	/* whether it failed or not, the operation is undone: go on as the daemon does */
	if ((err = op_begin(fs, &s)))
		return false;
	err = create_file(fs, "d0", 14);
	err = err ? err : create_file(fs, "d1", 3);
	if (err) {
		op_rollback(fs, &s, n);
		return false;
	}
	if (rio_txn_boundary(fs, true))
		return false;
	p->synced = true;
	/* a write or flush that failed and that nothing reported: fsync's 0
	 * would lie (a read may fail over to another copy: the journal
	 * inode's backup in the superblock) */
	const char *call = fault_fired_call(FAULT_IO);
	TEST_CHECK(p->kind != FAULT_IO || !call || !strcmp(call, "pread") || p->op_failed,
		   "N=%lu: a failed %s went unreported and the fsync returned 0", n,
		   fault_fired_call(FAULT_IO));
	return true;
}

/* A metadata block written before transactions are attached (as a tool
 * on the channel would) and flushed: the cache's write-back, its same
 * contents so that the image stays what the checker judged; a free
 * block zeroed through the channel (mke2fs-style tools do) and part of
 * another written; the channel's block size changed and restored. */
static errcode_t write_back_unattached(ext2_filsys fs)
{
	blk64_t blk = ext2fs_inode_bitmap_loc(fs, 0), free_blk = 0, part_blk = 0;
	void *buf = NULL;
	errcode_t err = ext2fs_get_mem(fs->blocksize, &buf);

	err = err ? err : io_channel_read_blk64(fs->io, blk, 1, buf);
	err = err ? err : io_channel_write_blk64(fs->io, blk, 1, buf);
	err = err ? err : ext2fs_new_block2(fs, 0, NULL, &free_blk);
	err = err ? err : io_channel_zeroout(fs->io, free_blk, 1);
	/* part of a block not in the cache: read, modified, written back */
	err = err ? err : ext2fs_new_block2(fs, free_blk + 1, NULL, &part_blk);
	if (!err)
		memset(buf, 0, fs->blocksize);
	err = err ? err : io_channel_write_byte(fs->io, part_blk * fs->blocksize + 512, 100, buf);
	/* the block size changed and back (libext2fs does at open and
	 * close): the cache written back, emptied and resized each time */
	err = err ? err : io_channel_set_blksize(fs->io, 4 * fs->blocksize);
	err = err ? err : io_channel_set_blksize(fs->io, fs->blocksize);
	err = err ? err : io_channel_flush(fs->io);
	ext2fs_free_mem(&buf);
	return err;
}

/* The daemon's read-write mount up to the first operation: the bitmaps
 * read ahead and read past the cache beside the checker's early attach,
 * the image judged whole, transactions attached. */
static errcode_t mount_attach(ext2_filsys fs, unsigned long n)
{
	blk64_t blks[2] = { ext2fs_block_bitmap_loc(fs, 0), ext2fs_inode_bitmap_loc(fs, 0) };
	char *report = NULL;

	uint8_t none = 0;   /* a seal that vouches for no group: copied, nothing skipped */
	errcode_t err = rio_set_pristine_groups(fs->io, &none, fs->group_desc_count);
	err = err ? err : rio_set_sealed_groups(fs->io, &none, fs->group_desc_count);
	if (err)
		return err;
	(void)rio_readahead_blocks(fs->io, blks, 2);   /* hints: their errors are ignored */
	(void)rio_txn_prepare(fs);
	(void)io_channel_set_options(fs->io, "cache=off");
	err = ext2fs_read_bitmaps(fs);
	(void)io_channel_set_options(fs->io, "cache=on");
	err = err ? err : rio_image_check(fs, &report);
	TEST_CHECK(!report, "N=%lu: a consistent image judged inconsistent: %s", n, report);
	free(report);
	err = err ? err : write_back_unattached(fs);
	return err ? err : rio_txn_attach(fs);
}

static void mount_once(const char *img, unsigned long n, struct promises *p)
{
	ext2_filsys fs = NULL;
	errcode_t err = ext2fs_open2(img, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs);

	if (err)
		return;
	if (!mount_attach(fs, n) && mount_ops(fs, n, p))
		rio_txn_detach(fs);
	ext2fs_close_free(&fs);
}

/* The image as a kernel mount would find it: its journal replayed (by
 * e2fsck, on a copy), then e2fsck -fn. */
static bool replayed_copy_clean(const char *img, const char *copy)
{
	if (run_shell("cp '%s' '%s' && { e2fsck -E journal_only -y '%s' >/dev/null 2>&1; "
		      "true; }", img, copy, copy))
		return false;
	return e2fsck_fn(copy, scratch) == 0;
}

/* The root directory's names in copy, one a line, in scratch/ls.txt; one
 * debugfs per run (they cost more than the run itself). */
static void list_root(const char *copy)
{
	run_shell("debugfs -R 'ls /' '%s' 2>/dev/null | tr -s ' ' '\\n' >'%s/ls.txt'", copy, scratch);
}

static bool copy_has(const char *name)
{
	char path[128], line[256];
	bool found = false;

	snprintf(path, sizeof(path), "%s/ls.txt", scratch);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = !strncmp(line, name, strlen(name)) && line[strlen(name)] == '\n';
	fclose(f);
	return found;
}

/* Whole files in memory (a few MiB): copies and comparisons in the test's
 * own process, one fewer command per run. */
static void *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	void *buf = NULL;

	if (f && fseek(f, 0, SEEK_END) == 0) {
		*len = (size_t)ftell(f);
		rewind(f);
		buf = malloc(*len ? *len : 1);
		if (buf && fread(buf, 1, *len, f) != *len) {
			free(buf);
			buf = NULL;
		}
	}
	if (f)
		fclose(f);
	return buf;
}

static void put_file(const char *path, const void *buf, size_t len)
{
	FILE *f = fopen(path, "wb");
	TEST_REQUIRE(f && fwrite(buf, 1, len, f) == len && fclose(f) == 0, "write %s", path);
}

/* Whether path holds exactly buf. */
static bool holds(const char *path, const void *buf, size_t len)
{
	size_t n;
	void *now = slurp(path, &n);
	bool same = now && n == len && !memcmp(now, buf, len);
	free(now);
	return same;
}

static void arm(enum fault_kind kind, unsigned long n)
{
	fault_arm(kind, n);
}

/* One run of the mount with the nth call failing; whether it fired. */
static bool mount_run(const char *base, enum fault_kind kind, unsigned long n)
{
	char img[128], copy[128];
	struct promises p = { .kind = kind };

	size_t len;
	void *orig = slurp(base, &len);
	TEST_REQUIRE(orig, "read %s", base);
	snprintf(img, sizeof(img), "%s/work.img", scratch);
	snprintf(copy, sizeof(copy), "%s/replayed.img", scratch);
	put_file(img, orig, len);
	arm(kind, n);
	mount_once(img, n, &p);
	bool hit = fault_fired(kind);
	arm(kind, 0);
	bool unchanged = holds(img, orig, len);
	free(orig);
	if (unchanged) {   /* the base image is consistent and holds a0 alone */
		TEST_CHECK(!p.synced, "N=%lu: fsync returned 0 and nothing reached the disk", n);
		return hit;
	}
	TEST_CHECK(replayed_copy_clean(img, copy), "N=%lu: the image is not consistent", n);
	list_root(copy);
	if (p.synced)
		TEST_CHECK(copy_has("b0") && copy_has("d0") && copy_has("d1"),
			   "N=%lu: fsync returned 0 but b0, d0, d1 are not on disk", n);
	TEST_CHECK(!copy_has("c0") && copy_has("a0"), "N=%lu: the rolled-back operation "
		   "reached the disk", n);
	TEST_CHECK(n || p.synced, "the mount fails with nothing injected");
	TEST_CHECK(!p.after_rollback || p.synced, "N=%lu: the operations after a successful "
		   "rollback failed", n);
	return hit;
}

/* One run of the replay with the nth call failing; whether it fired. */
static bool replay_run(const char *base, enum fault_kind kind, unsigned long n)
{
	char img[128], copy[128], msg[256];
	unsigned replayed = 0;
	ext2_filsys fs = NULL;

	snprintf(img, sizeof(img), "%s/work.img", scratch);
	snprintf(copy, sizeof(copy), "%s/replayed.img", scratch);
	TEST_REQUIRE(run_shell("cp '%s' '%s'", base, img) == 0, "cp");
	arm(kind, n);
	errcode_t err = ext2fs_open2(img, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs);
	if (!err)
		err = rio_journal_recover(fs, &replayed, msg, sizeof(msg));
	if (fs)
		ext2fs_close_free(&fs);
	bool hit = fault_fired(kind);
	arm(kind, 0);
	TEST_CHECK(n || (!err && replayed > 0), "the replay fails with nothing injected: %s",
		   error_message(err));
	/* replayed or not, what is on disk is the old state or the new one */
	TEST_CHECK(replayed_copy_clean(img, copy), "N=%lu: the image is not consistent", n);
	list_root(copy);
	TEST_CHECK(copy_has("a0"), "N=%lu: a0 lost", n);
	return hit;
}

/* One run of the read-only open with the nth call failing: the journal
 * replayed into memory, a file read through it; the image must not change.
 * Whether the failure fired. */
static bool ro_replay_run(const char *base, enum fault_kind kind, unsigned long n)
{
	char msg[256];
	unsigned replayed = 0;
	ext2_filsys fs = NULL;
	size_t len;
	void *orig = slurp(base, &len);

	TEST_REQUIRE(orig, "read %s", base);
	arm(kind, n);
	errcode_t err = ext2fs_open2(base, NULL, 0, 0, 0, rio_io_manager, &fs);
	err = err ? err : rio_journal_recover(fs, &replayed, msg, sizeof(msg));
	if (fs)
		ext2fs_close_free(&fs);
	if (!err)   /* read-only opens see the replayed state */
		err = ext2fs_open2(base, NULL, 0, 0, 0, rio_io_manager, &fs);
	if (!err) {
		TEST_CHECK(exists(fs, "a0") || fault_fired(kind), "N=%lu: a0 not found", n);
		ext2fs_close_free(&fs);
	}
	rio_replay_forget();
	bool hit = fault_fired(kind);
	arm(kind, 0);
	TEST_CHECK(n || (!err && replayed > 0), "the read-only replay fails with nothing injected: %s",
		   error_message(err));
	TEST_CHECK(holds(base, orig, len), "N=%lu: a read-only open changed the image", n);
	free(orig);
	return hit;
}

/* One run of the base check on an inconsistent image (a0's first block
 * free in the bitmap) with the nth call failing: an error or a report,
 * never a consistent verdict.  Whether the failure fired. */
static bool rejected_run(const char *base, enum fault_kind kind, unsigned long n)
{
	ext2_filsys fs = NULL;
	char *report = NULL;

	arm(kind, n);
	errcode_t err = ext2fs_open2(base, NULL, 0, 0, 0, rio_io_manager, &fs);
	err = err ? err : rio_image_check(fs, &report);
	TEST_CHECK(err || report, "N=%lu: an inconsistent image judged consistent", n);
	TEST_CHECK(!err || !report, "N=%lu: an error and a report", n);
	free(report);
	if (fs)
		ext2fs_close_free(&fs);
	bool hit = fault_fired(kind);
	arm(kind, 0);
	TEST_CHECK(n || !err, "the check fails with nothing injected: %s", error_message(err));
	return hit;
}

static void sweep(const char *what, bool (*run)(const char *, enum fault_kind, unsigned long),
		  const char *base, enum fault_kind kind)
{
	int before = failures;
	unsigned long n;

	run(base, kind, 0);
	TEST_REQUIRE(failures == before, "%s: fails with nothing injected", what);
	n = getenv("FAULT_N") ? strtoul(getenv("FAULT_N"), NULL, 10) : 0;
	if (n) {   /* one run, to debug (gdb: break fault_injected) */
		run(base, kind, n);
		return;
	}
	for (n = 1; failures == before; n++) {
		bool hit = run(base, kind, n);
		if ((!hit || n % 16 == 0) && __lsan_do_recoverable_leak_check &&
		    __lsan_do_recoverable_leak_check()) {
			TEST_CHECK(0, "%s: leaks in runs up to N=%lu (above)", what, n);
			break;
		}
		if (!hit)
			break;
	}
	printf("%s: %lu %s injection points\n", what, n - 1,
	       kind == FAULT_ALLOC ? "allocation" : "device call");
}

/* The images: a committed ext3 image with files a0..a3 (made through io,
 * nothing failing), a copy whose journal holds transactions to replay,
 * and one whose journal holds 300 blocks (the read-only replay's). */
static void make_images(char *base, char *journalled, char *big, size_t len)
{
	snprintf(base, len, "%s/base.img", scratch);
	snprintf(journalled, len, "%s/journalled.img", scratch);
	make_image_or_skip(base, "-t ext3 -b 1024 -N 64", 4096);
	set_config(false, false);
	ext2_filsys fs;
	TEST_REQUIRE(!ext2fs_open2(base, NULL, EXT2_FLAG_RW, 0, 0, rio_io_manager, &fs), "open");
	TEST_REQUIRE(!ext2fs_read_bitmaps(fs) && !rio_txn_attach(fs), "attach");
	for (int i = 0; i < 4; i++) {
		char name[8];
		snprintf(name, sizeof(name), "a%d", i);
		TEST_REQUIRE(!create_file(fs, name, 5 + 4 * i), "create %s", name);
	}
	TEST_REQUIRE(!rio_txn_detach(fs) && !ext2fs_close2(fs, 0), "detach");
	TEST_REQUIRE(e2fsck_fn(base, scratch) == 0, "base image");
	if (run_shell("cd '%s' && cp base.img '%s' && head -c 3072 /dev/urandom >jdata && "
		      "printf 'jo\\njw -b 3000,3001,3002 jdata\\njc\\njo\\njw -b 3003 jdata\\njw -r 3001\\njc\\n' >cmds && "
		      "debugfs -w -f cmds '%s' >/dev/null 2>&1 && "
		      "dumpe2fs -h '%s' 2>/dev/null | grep -q needs_recovery", scratch, journalled,
		      journalled, journalled)) {
		fprintf(stderr, "debugfs cannot write a journal here\n");
		exit(77);
	}
	/* a journal of 300 blocks, more than the in-memory replay's first
	 * table holds: it grows while the replay runs */
	snprintf(big, len, "%s/journalled_big.img", scratch);
	TEST_REQUIRE(run_shell("cd '%s' && cp base.img '%s' && head -c 307200 /dev/urandom >jbig && "
			       "printf 'jo\\njw -b %%s jbig\\njc\\n' \"$(seq -s, 3000 3299)\" >cmds && "
			       "debugfs -w -f cmds '%s' >/dev/null 2>&1", scratch, big, big) == 0,
		     "debugfs: a journal of 300 blocks");
}

static unsigned first_block_of_a0(const char *img)
{
	ext2_filsys fs;
	ext2_ino_t ino;
	blk64_t pblk = 0;

	TEST_REQUIRE(!ext2fs_open2(img, NULL, 0, 0, 0, unix_io_manager, &fs), "open %s", img);
	TEST_REQUIRE(!ext2fs_lookup(fs, EXT2_ROOT_INO, "a0", 2, NULL, &ino) &&
		     !ext2fs_bmap2(fs, ino, NULL, NULL, 0, 0, NULL, &pblk) && pblk, "a0's block");
	ext2fs_close_free(&fs);
	return (unsigned)pblk;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3 || (strcmp(argv[1], "alloc") && strcmp(argv[1], "io"))) {
		fprintf(stderr, "usage: %s alloc|io [mount|power-cut|rejected|replay|ro-replay]\n", argv[0]);
		return 2;
	}
	const char *only = argc == 3 ? argv[2] : NULL;
	/* in memory where there is a tmpfs: hundreds of runs, each with its
	 * fdatasyncs, would otherwise wait on the disk */
	snprintf(scratch, sizeof(scratch), "%s/riofault.XXXXXX",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	TEST_REQUIRE(mkdtemp(scratch), "mkdtemp");
	add_error_table(&et_ext2_error_table);
	char base[128], journalled[128], big[128], rejected[128];
	make_images(base, journalled, big, sizeof(base));
	snprintf(rejected, sizeof(rejected), "%s/rejected.img", scratch);
	TEST_REQUIRE(run_shell("cp '%s' '%s' && debugfs -w -R 'freeb %u' '%s' >/dev/null 2>&1",
			       base, rejected, first_block_of_a0(base), rejected) == 0, "debugfs freeb");
	enum fault_kind kind = strcmp(argv[1], "alloc") ? FAULT_IO : FAULT_ALLOC;
	/* the fallback: every device call is a pread, pwrite or fdatasync */
	set_config(kind == FAULT_IO, false);
	if (!only || !strcmp(only, "mount"))
		sweep("mount", mount_run, base, kind);
	if (!failures && (!only || !strcmp(only, "power-cut"))) {
		set_config(kind == FAULT_IO, true);
		sweep("mount, power cut armed", mount_run, base, kind);
		set_config(kind == FAULT_IO, false);
	}
	if (!failures && (!only || !strcmp(only, "rejected")))
		sweep("rejected image", rejected_run, rejected, kind);
	if (!failures && (!only || !strcmp(only, "replay")))
		sweep("replay", replay_run, journalled, kind);
	if (!failures && (!only || !strcmp(only, "ro-replay")))
		sweep("read-only replay", ro_replay_run, big, kind);
	run_shell("rm -rf '%s'", scratch);
	return failures ? 1 : 0;
}
