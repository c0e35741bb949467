/*
 * tests/jbd/test_jbd.c - io/jbd.c against the tools that define the format:
 * transactions we log are replayed by e2fsck (and the kernel, as root) and
 * parsed by debugfs logdump; journals others wrote (e2fsprogs corpus, the
 * kernel) are replayed by us exactly as e2fsck replays them.
 *
 * Usage: test_jbd NAME (see main); exit 0 pass, 77 skip, 1 fail.
 * Scratch files go under $TMPDIR (or /tmp) in a directory of their own.
 */
#include "jbd_util.h"
#include "jbd_tag.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>



static void test_e2fsck(unsigned bs)
{
	char a[512], b[512];
	path_in(a, sizeof(a), "a.img");
	path_in(b, sizeof(b), "b.img");
	mkfs(a, bs, bs == 1024 ? 16 : 64, NULL);
	struct scenario *s = malloc(sizeof(*s));
	REQUIRE(s, "oom");
	build_scenario(a, bs, s);
	check_logdump(a, s);
	copy_file(a, b);
	int rc = e2fsck("-fy", a);
	CHECK(rc == 0 || rc == 1, "e2fsck -fy exits %d (log in %s.fsck.log)", rc, a);
	verify_scenario(a, bs, s, "e2fsck replay");
	char msg[256] = "";
	unsigned replayed = 0;
	errcode_t err = our_recover(b, false, &replayed, msg, sizeof(msg));
	CHECK(!err, "jbd_recover: %s (%s)", error_message(err), msg);
	CHECK(replayed == s->ntx, "replayed %u transactions, logged %u", replayed, s->ntx);
	verify_scenario(b, bs, s, "jbd_recover");
	uint64_t skip[2];
	size_t d = compare_images(a, b, bs, skip, sb_blocks(bs, skip));
	CHECK(d == 0, "%zu blocks differ between e2fsck's replay and ours", d);
	free(s);
}

/* ---- the kernel replays what we logged ---- */


static void test_kernel(unsigned bs)
{
	if (!can_mount()) {
		fprintf(stderr, "SKIP: needs root and kernel ext3\n");
		exit(77);
	}
	char a[512], mnt[512];
	path_in(a, sizeof(a), "k.img");
	path_in(mnt, sizeof(mnt), "mnt");
	REQUIRE(mkdir(mnt, 0755) == 0, "mkdir");
	mkfs(a, bs, bs == 1024 ? 16 : 64, NULL);
	struct scenario *s = malloc(sizeof(*s));
	REQUIRE(s, "oom");
	build_scenario(a, bs, s);
	int rc = run_shell("mount -t ext3 -o loop '%s' '%s'", a, mnt);
	if (rc != 0) {
		fprintf(stderr, "SKIP: mount -t ext3 -o loop failed\n");
		free(s);
		exit(77);
	}
	rc = run_shell("umount '%s'", mnt);
	REQUIRE(rc == 0, "umount %s", mnt);
	verify_scenario(a, bs, s, "kernel replay");
	free(s);
}

/* ---- wrap-around, and no replay of checkpointed transactions ---- */

static void test_wrap(void)
{
	const unsigned bs = 1024;
	char a[512], b[512];
	path_in(a, sizeof(a), "w.img");
	path_in(b, sizeof(b), "w2.img");
	mkfs(a, bs, 16, "-J size=1");
	struct img im = { 0 };
	img_open(&im, a);
	enum { NB = 100 };
	uint64_t F[NB];
	REQUIRE(free_blocks(im.fs, F, NB) == NB, "free blocks");
	unsigned char *buf = malloc(bs);
	REQUIRE(buf, "oom");
	uint32_t maxjournal = jbd_max_transaction_blocks(im.j);
	CHECK(maxjournal > 900 && maxjournal < 1024, "max transaction %u for a 1024-block journal",
	      maxjournal);
	struct txb *t = calloc(1, sizeof(*t));
	REQUIRE(t, "oom");
	/* transactions of 60 blocks (+1 descriptor +1 commit), checkpointed,
	 * until the log has wrapped at least twice and the next two will
	 * straddle the end */
	unsigned v = 1, wraps = 0;
	uint32_t prev_start = 0;
	for (;; v++) {
		for (int i = 0; i < 60; i++)
			tx_add(t, bs, F[i], v, (i + v) % 11 == 0);
		tx_log(&im, NULL, t, NULL, 0);
		uint32_t start, seq;
		jsb_state(a, &start, &seq);
		if (start < prev_start)
			wraps++;
		prev_start = start;
		/* checkpoint: home, flush, tell jbd */
		for (int i = 0; i < 60; i++) {
			pattern(buf, bs, F[i], v, (i + v) % 11 == 0);
			write_home(&im, F[i], buf);
		}
		REQUIRE(fdev_flush(&im.d) == 0, "flush");
		errcode_t err = jbd_checkpointed(im.j);
		REQUIRE(!err, "checkpointed: %s", error_message(err));
		REQUIRE(v < 200, "the log never wrapped");
		/* start + 62 is the head; stop when two more overrun the end */
		if (wraps >= 2 && start + 62 + 2 * 62 > 1024)
			break;
	}
	jsb_state(a, &prev_start, &(uint32_t){ 0 });
	CHECK(prev_start == 0, "s_start %u after jbd_checkpointed (the write must be there)",
	      prev_start);
	/* blocks 60..99 were in no transaction; blocks 40..59 get a newer home
	 * version behind jbd's back (as a block freed and reused as file data
	 * would): a replay of the checkpointed transactions would undo that */
	struct scenario *s = calloc(1, sizeof(*s));
	REQUIRE(s, "oom");
	for (int i = 0; i < 60; i++)
		expect_set(s, F[i], v, (i + v) % 11 == 0);
	for (int i = 40; i < 60; i++) {
		pattern(buf, bs, F[i], 7, false);
		write_home(&im, F[i], buf);
		expect_set(s, F[i], 7, false);
	}
	REQUIRE(fdev_flush(&im.d) == 0, "flush");
	/* two transactions not checkpointed, the second across the end */
	v++;
	for (int i = 0; i < 40; i++)
		tx_add(t, bs, F[i], v, false);
	tx_log(&im, NULL, t, NULL, 0);
	for (int i = 0; i < 40; i++)
		expect_set(s, F[i], v, false);
	v++;
	for (int i = 0; i < 30; i++)
		tx_add(t, bs, F[i], v, i == 3);
	for (int i = 60; i < 100; i++)
		tx_add(t, bs, F[i], v, false);
	tx_log(&im, NULL, t, NULL, 0);
	for (int i = 0; i < 30; i++)
		expect_set(s, F[i], v, i == 3);
	for (int i = 60; i < 100; i++)
		expect_set(s, F[i], v, false);
	uint32_t start, seq;
	jsb_state(a, &start, &seq);
	CHECK(start != 0 && start + 42 + 72 > 1024, "the last transaction does not wrap (s_start %u)",
	      start);
	free(t);
	free(buf);
	img_close(&im, true);
	copy_file(a, b);
	int rc = e2fsck("-fy", a);
	CHECK(rc == 0 || rc == 1, "e2fsck -fy exits %d", rc);
	check_expect(a, bs, s->e, s->n, "e2fsck replay");
	unsigned replayed = 0;
	char msg[256];
	errcode_t err = our_recover(b, false, &replayed, msg, sizeof(msg));
	CHECK(!err, "jbd_recover: %s (%s)", error_message(err), msg);
	CHECK(replayed == 2, "replayed %u transactions, 2 were live", replayed);
	check_expect(b, bs, s->e, s->n, "jbd_recover");
	rc = e2fsck("-fn", b);
	CHECK(rc == 0, "e2fsck -fn exits %d after our replay", rc);
	uint64_t skip[2];
	size_t d = compare_images(a, b, bs, skip, sb_blocks(bs, skip));
	CHECK(d == 0, "%zu blocks differ between e2fsck's replay and ours", d);
	free(s);
}

/* ---- torn tail: a transaction without its commit block is not replayed ---- */


static void test_torn(void)
{
	const unsigned bs = 1024;
	for (int variant = 0; variant < 2; variant++) {
		char a[512], b[512];
		path_in(a, sizeof(a), "t.img");
		path_in(b, sizeof(b), "t2.img");
		mkfs(a, bs, 16, NULL);
		struct img im = { 0 };
		img_open(&im, a);
		uint64_t F[30];
		REQUIRE(free_blocks(im.fs, F, 30) == 30, "free");
		unsigned char *buf = malloc(bs);
		REQUIRE(buf, "oom");
		struct scenario *s = calloc(1, sizeof(*s));
		REQUIRE(s, "oom");
		for (int i = 0; i < 30; i++) {
			pattern(buf, bs, F[i], 0, false);
			write_home(&im, F[i], buf);
			expect_set(s, F[i], 0, false);
		}
		REQUIRE(fdev_flush(&im.d) == 0, "flush");
		struct txb *t = calloc(1, sizeof(*t));
		REQUIRE(t, "oom");
		for (int i = 0; i < 20; i++)
			tx_add(t, bs, F[i], 1, false);
		tx_log(&im, NULL, t, NULL, 0);
		for (int i = 0; i < 20; i++)
			expect_set(s, F[i], 1, false);
		uint32_t start, seq1;
		jsb_state(a, &start, &seq1);
		/* T2 and T3: T2 loses its commit block (or gets a wrong tid) */
		for (int i = 10; i < 30; i++)
			tx_add(t, bs, F[i], 2, false);
		tx_log(&im, NULL, t, NULL, 0);
		for (int i = 0; i < 30; i++)
			tx_add(t, bs, F[i], 3, false);
		tx_log(&im, NULL, t, NULL, 0);
		free(t);
		free(buf);
		img_close(&im, true);
		CHECK(patch_log_block(a, seq1 + 1, 2, 0, variant ? bump_tid : zero_block),
		      "no commit block of tid %u found", seq1 + 1);
		copy_file(a, b);
		int rc = e2fsck("-fy", a);
		CHECK(rc == 0 || rc == 1, "e2fsck -fy exits %d", rc);
		check_expect(a, bs, s->e, s->n, variant ? "e2fsck, bad commit tid" : "e2fsck, torn");
		unsigned replayed = 0;
		char msg[256];
		errcode_t err = our_recover(b, false, &replayed, msg, sizeof(msg));
		CHECK(!err, "jbd_recover: %s (%s)", error_message(err), msg);
		CHECK(replayed == 1, "replayed %u transactions, 1 was complete", replayed);
		check_expect(b, bs, s->e, s->n, variant ? "jbd_recover, bad commit tid" : "jbd_recover, torn");
		rc = e2fsck("-fn", b);
		CHECK(rc == 0, "e2fsck -fn exits %d after our replay", rc);
		uint64_t skip[2];
		size_t d = compare_images(a, b, bs, skip, sb_blocks(bs, skip));
		CHECK(d == 0, "%zu blocks differ between e2fsck's replay and ours", d);
		/* logging resumes after the torn tail without reviving it */
		struct img im2 = { 0 };
		img_open(&im2, b);
		CHECK(!jbd_needs_recovery(im2.j), "needs recovery after recovery");
		t = calloc(1, sizeof(*t));
		REQUIRE(t, "oom");
		tx_add(t, bs, F[29], 4, false);
		tx_log(&im2, NULL, t, NULL, 0);
		free(t);
		img_close(&im2, true);
		replayed = 0;
		err = our_recover(b, false, &replayed, msg, sizeof(msg));
		CHECK(!err && replayed == 1, "second recovery: %s, %u replayed", error_message(err),
		      replayed);
		expect_set(s, F[29], 4, false);
		check_expect(b, bs, s->e, s->n, "after logging past a torn tail");
		free(s);
	}
}

/* ---- corrupt or unsupported journal superblocks ---- */

struct sbpatch {
	const char *what;
	struct { unsigned off; uint32_t val; } f[3];   /* off 0 ends (the magic is patched alone) */
	bool sum;         /* store a valid superblock checksum after the patch */
	errcode_t want;   /* 0: accepted */
};

/* Garbage in the log after a valid start: replay stops or fails, never
 * crashes (run under ASan in the sanitizer build). */
static void garbage_log(const char *a, const char *c, unsigned bs, blk64_t jsb,
			const blk64_t *logmap, unsigned char *buf)
{
	errcode_t err;
	for (unsigned seed = 1; seed <= 40; seed++) {
		copy_file(a, c);
		int fd = open(c, O_RDWR);
		REQUIRE(fd >= 0, "open");
		REQUIRE(pread(fd, buf, bs, (off_t)(jsb * bs)) == (ssize_t)bs, "read");
		uint32_t seq = get_be32(buf + 0x18);
		put_be32(buf + 0x1C, 1);
		REQUIRE(pwrite(fd, buf, bs, (off_t)(jsb * bs)) == (ssize_t)bs, "write");
		uint64_t x = seed * 0x9E3779B97F4A7C15ull;
		for (unsigned l = 1; l < 40; l++) {
			for (unsigned i = 0; i < bs; i++) {
				x ^= x << 13;
				x ^= x >> 7;
				x ^= x << 17;
				buf[i] = (unsigned char)x;
			}
			put_be32(buf, JBD_MAGIC);
			unsigned kind = (unsigned)(x >> 40) % 4;
			put_be32(buf + 4, kind == 3 ? 5 : kind + 1);
			put_be32(buf + 8, seq + (unsigned)(x >> 50) % 3);
			if (seed % 2)
				memset(buf + 12, 0, bs / 2); /* small block numbers, flags */
			REQUIRE(pwrite(fd, buf, bs, (off_t)(logmap[l] * bs)) == (ssize_t)bs, "write");
		}
		close(fd);
		struct img im = { 0 };
		snprintf(im.path, sizeof(im.path), "%s", c);
		img_open_fs(&im);
		char msg[256] = "";
		err = img_open_jbd(&im, msg, sizeof(msg));
		REQUIRE(!err, "seed %u: open: %s", seed, msg);
		unsigned replayed = 0;
		err = jbd_recover(im.j, &replayed);
		fprintf(stderr, "  garbage seed %u: %s, %u replayed\n", seed, err ? error_message(err) : "ok",
			replayed);
		img_close(&im, false);
	}
}

static void test_corrupt_sb(void)
{
	const unsigned bs = 1024;
	char a[512], c[512];
	path_in(a, sizeof(a), "c.img");
	path_in(c, sizeof(c), "c2.img");
	mkfs(a, bs, 16, NULL);
	ext2_filsys fs;
	errcode_t err = ext2fs_open2(a, NULL, EXT2_FLAG_64BITS, 0, 0, unix_io_manager, &fs);
	REQUIRE(!err, "open");
	blk64_t jsb = 0;
	REQUIRE(!ext2fs_bmap2(fs, fs->super->s_journal_inum, NULL, NULL, 0, 0, NULL, &jsb) && jsb,
		"bmap");
	blk64_t logmap[40];
	for (unsigned l = 0; l < 40; l++)
		REQUIRE(!ext2fs_bmap2(fs, fs->super->s_journal_inum, NULL, NULL, 0, l, NULL, &logmap[l]) &&
			logmap[l], "bmap");
	ext2fs_close_free(&fs);
	/* mke2fs made a journal of 1024 blocks, s_first 1: the shortest the
	 * kernel takes */
	enum { MAGIC = 0x00, TYPE = 0x04, BS = 0x0C, MAXLEN = 0x10, FIRST = 0x14, START = 0x1C,
	       COMPAT = 0x24, INCOMPAT = 0x28, RO = 0x2C, USERS = 0x40, CTYPE = 0x50, NFC = 0x54 };
	const uint32_t crc32c_type = (uint32_t)JBD_CSUM_TYPE_CRC32C << 24;   /* the byte at 0x50 */
	const struct sbpatch p[] = {
		{ "bad magic", { { MAGIC, 0x12345678 } }, false, EXT2_ET_CORRUPT_JOURNAL_SB },
		{ "unknown type", { { TYPE, 9 } }, false, EXT2_ET_JOURNAL_UNSUPP_VERSION },
		{ "block size", { { BS, 4096 } }, false, EXT2_ET_CORRUPT_JOURNAL_SB },
		{ "maxlen too big", { { MAXLEN, 0x7fffffff } }, false, EXT2_ET_CORRUPT_JOURNAL_SB },
		{ "first = 0", { { FIRST, 0 } }, false, EXT2_ET_CORRUPT_JOURNAL_SB },
		{ "first past the end", { { FIRST, 5000 } }, false, EXT2_ET_CORRUPT_JOURNAL_SB },
		{ "start past the end", { { START, 5000 } }, false, EXT2_ET_CORRUPT_JOURNAL_SB },
		{ "log of 1022 blocks (s_first 2)", { { FIRST, 2 } }, false, EXT2_ET_JOURNAL_TOO_SMALL },
		{ "log of 8 blocks", { { FIRST, 1016 } }, false, EXT2_ET_JOURNAL_TOO_SMALL },
		{ "s_maxlen 1000", { { MAXLEN, 1000 } }, false, EXT2_ET_JOURNAL_TOO_SMALL },
		{ "fast-commit area leaves 1021", { { INCOMPAT, JBD_INCOMPAT_FAST_COMMIT }, { NFC, 2 } },
		  false, EXT2_ET_JOURNAL_TOO_SMALL },
		{ "fast-commit area of the default 256", { { INCOMPAT, JBD_INCOMPAT_FAST_COMMIT } }, false,
		  EXT2_ET_JOURNAL_TOO_SMALL },
		{ "unknown incompat", { { INCOMPAT, 0x100 } }, false, EXT2_ET_UNSUPP_FEATURE },
		{ "unknown ro_compat", { { RO, 1 } }, false, EXT2_ET_RO_UNSUPP_FEATURE },
		{ "csum v2 and v3", { { INCOMPAT, JBD_INCOMPAT_CSUM_V2 | JBD_INCOMPAT_CSUM_V3 },
				       { CTYPE, crc32c_type } }, true, EXT2_ET_CORRUPT_JOURNAL_SB },
		{ "csum v3 and v1", { { INCOMPAT, JBD_INCOMPAT_CSUM_V3 }, { COMPAT, 1 },
				       { CTYPE, crc32c_type } }, true, EXT2_ET_CORRUPT_JOURNAL_SB },
		{ "csum v3, checksum type 0", { { INCOMPAT, JBD_INCOMPAT_CSUM_V3 } }, true,
		  EXT2_ET_UNKNOWN_CSUM },
		{ "csum v3, bad superblock checksum", { { INCOMPAT, JBD_INCOMPAT_CSUM_V3 },
						       { CTYPE, crc32c_type } }, false,
		  EXT2_ET_CORRUPT_JOURNAL_SB },
		{ "nr_users", { { USERS, 1000 } }, false, EXT2_ET_CORRUPT_JOURNAL_SB },
		/* what the kernel and e2fsck read, and so do we */
		{ "64bit", { { INCOMPAT, JBD_INCOMPAT_64BIT } }, false, 0 },
		{ "csum v3 64bit", { { INCOMPAT, JBD_INCOMPAT_CSUM_V3 | JBD_INCOMPAT_64BIT },
				      { CTYPE, crc32c_type } }, true, 0 },
		{ "csum v2", { { INCOMPAT, JBD_INCOMPAT_CSUM_V2 }, { CTYPE, crc32c_type } }, true, 0 },
		{ "async commit", { { INCOMPAT, JBD_INCOMPAT_ASYNC } }, false, 0 },
		{ "checksum v1", { { COMPAT, JBD_COMPAT_CHECKSUM } }, false, 0 },
	};
	unsigned char *buf = malloc(bs);
	REQUIRE(buf, "oom");
	for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++) {
		copy_file(a, c);
		int fd = open(c, O_RDWR);
		REQUIRE(fd >= 0, "open");
		REQUIRE(pread(fd, buf, bs, (off_t)(jsb * bs)) == (ssize_t)bs, "read");
		for (int k = 0; k < 3 && (k == 0 || p[i].f[k].off); k++)
			put_be32(buf + p[i].f[k].off, p[i].f[k].val);
		if (p[i].sum)
			jbd_put_be32(buf + JSB_CHECKSUM, jbd_sb_csum(buf));
		REQUIRE(pwrite(fd, buf, bs, (off_t)(jsb * bs)) == (ssize_t)bs, "write");
		close(fd);
		struct img im = { 0 };
		snprintf(im.path, sizeof(im.path), "%s", c);
		img_open_fs(&im);
		char msg[256] = "";
		err = img_open_jbd(&im, msg, sizeof(msg));
		if (!p[i].want) {
			CHECK(!err && im.j, "%s: refused: %s", p[i].what, msg);
			/* the shortest log the kernel takes holds any one operation */
			CHECK(!im.j || jbd_max_transaction_blocks(im.j) >= JBD_MIN_TRANSACTION_BLOCKS,
			      "%s: transactions of at most %u blocks", p[i].what,
			      im.j ? jbd_max_transaction_blocks(im.j) : 0);
		} else {
			CHECK(err != 0 && im.j == NULL, "%s: jbd_open accepted it", p[i].what);
			CHECK(err == p[i].want, "%s: error %s", p[i].what, error_message(err));
			CHECK(msg[0] != 0, "%s: no message", p[i].what);
		}
		if (err == EXT2_ET_JOURNAL_TOO_SMALL)
			CHECK(strstr(msg, "too short") && strstr(msg, c) && strstr(msg, "1023"),
			      "%s: the message does not name the image and the kernel's minimum: %s",
			      p[i].what, msg);
		fprintf(stderr, "  %s -> %s: %s\n", p[i].what, err ? error_message(err) : "accepted", msg);
		if (im.j)
			jbd_close(im.j);
		im.j = NULL;
		img_close(&im, false);
	}
	garbage_log(a, c, bs, jsb, logmap, buf);
	free(buf);
}

/* ---- journals others wrote ---- */


/* What we do with a corpus image's journal. */
enum corpus_want {
	REPLAYS,        /* replayed onto the disk and in a view as e2fsck replays it */
	VIEW_ONLY,      /* the disk replay refuses it untouched; a view replays as e2fsck */
	FAST_COMMITS,   /* the disk replay refuses it untouched; a view replays full commits */
	UNOPENED,       /* jbd_open refuses the journal */
};

struct corpus_case {
	const char *name;
	enum corpus_want want;
	unsigned how;   /* CMP_* for the comparisons with e2fsck */
};

/* A replay onto the disk of a copy of a fails and leaves it as it was. */
static void check_disk_refusal(const char *a, const char *what)
{
	char b[600];
	snprintf(b, sizeof(b), "%s.refused", a);
	copy_file(a, b);
	unsigned replayed = 0;
	char msg[256] = "";
	errcode_t err = our_recover(b, false, &replayed, msg, sizeof(msg));
	fprintf(stderr, "  %s: disk replay: %s %s\n", what, err ? error_message(err) : "replayed", msg);
	CHECK(err == EXT2_ET_BAD_CRC || err == EXT2_ET_UNSUPP_FEATURE ||
	      err == EXT2_ET_CORRUPT_JOURNAL_SB, "%s: the disk replay gives %s", what,
	      err ? error_message(err) : "no error");
	CHECK(run_shell("cmp -s '%s' '%s'", a, b) == 0, "%s: the refused replay wrote to the image", what);
}

static void test_corpus(void)
{
	const struct corpus_case cases[] = {
		/* a damaged journal inode (its superblock backup maps it), orphans */
		{ "f_journal", REPLAYS, 0 },
		{ "f_jnl_32bit", REPLAYS, CMP_STRICT },
		{ "f_jnl_64bit", REPLAYS, 0 },
		{ "j_corrupt_commit_tid", REPLAYS, CMP_STRICT },
		{ "j_corrupt_descr_tid", REPLAYS, CMP_STRICT },
		{ "j_corrupt_revoke_block", REPLAYS, CMP_STRICT },
		{ "j_corrupt_revoke_csum", REPLAYS, CMP_STRICT },
		/* e2fsck records the error in the journal superblock */
		{ "j_corrupt_commit_csum", VIEW_ONLY, CMP_STRICT | CMP_SKIP_JSB | CMP_ANY_EXIT },
		{ "j_corrupt_descr_csum", VIEW_ONLY, CMP_STRICT | CMP_SKIP_JSB | CMP_ANY_EXIT },
		{ "j_corrupt_journal_block", VIEW_ONLY, CMP_STRICT | CMP_SKIP_JSB | CMP_ANY_EXIT },
		{ "j_corrupt_revoke_rcount", VIEW_ONLY, CMP_STRICT | CMP_SKIP_JSB | CMP_ANY_EXIT },
		{ "j_recover_fast_commit", FAST_COMMITS, 0 },
		{ "j_corrupt_sb_magic", UNOPENED, 0 },
		{ "j_corrupt_sb_csum", UNOPENED, 0 },
	};
	int found = 0;
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		const struct corpus_case *c = &cases[i];
		char a[512], v[600];
		path_in(a, sizeof(a), c->name);
		if (!gunzip_corpus(c->name, a))
			continue;
		found++;
		snprintf(v, sizeof(v), "%s.view", a);
		copy_file(a, v);
		if (c->want == UNOPENED) {
			struct img im = { 0 };
			snprintf(im.path, sizeof(im.path), "%s", a);
			img_open_fs(&im);
			char msg[256] = "";
			errcode_t err = img_open_jbd(&im, msg, sizeof(msg));
			CHECK(err && msg[0], "%s: jbd_open accepted a damaged journal", c->name);
			fprintf(stderr, "  %s: %s: %s\n", c->name, error_message(err), msg);
			img_close(&im, false);
			continue;
		}
		if (c->want == REPLAYS)
			compare_replays(a, c->name, c->how);
		else
			check_disk_refusal(a, c->name);
		if (c->want == FAST_COMMITS) {
			unsigned replayed = 0;
			char msg[256] = "";
			errcode_t err = our_recover(v, true, &replayed, msg, sizeof(msg));
			CHECK(!err, "%s: view replay: %s (%s)", c->name, error_message(err), msg);
			continue;
		}
		compare_replays(v, c->name, c->how | CMP_VIEW);
	}
	if (!found) {
		fprintf(stderr, "SKIP: corpus not found\n");
		exit(77);
	}
}

/* The kernel writes a journal and stops dead (EXT4_IOC_SHUTDOWN with
 * LOGFLUSH: the log is committed, nothing more is checkpointed); we replay
 * it as e2fsck does. */
#define EXT4_IOC_SHUTDOWN_ _IOR('X', 125, uint32_t)
#define EXT4_GOING_FLAGS_LOGFLUSH_ 0x1

static void test_kernel_made(unsigned bs)
{
	if (!can_mount()) {
		fprintf(stderr, "SKIP: needs root and kernel ext3\n");
		exit(77);
	}
	char a[512], mnt[512];
	path_in(a, sizeof(a), "km.img");
	path_in(mnt, sizeof(mnt), "kmnt");
	REQUIRE(mkdir(mnt, 0755) == 0, "mkdir");
	mkfs(a, bs, bs == 1024 ? 32 : 128, NULL);
	if (run_shell("mount -t ext3 -o loop,commit=60 '%s' '%s'", a, mnt) != 0) {
		fprintf(stderr, "SKIP: mount failed\n");
		exit(77);
	}
	/* metadata churn: creates, a big directory; directories freed after
	 * their blocks were logged (the kernel revokes them), then file data
	 * filling most of the file system, so freed directory blocks are
	 * reused for data that a replay ignoring revokes would overwrite */
	int rc = run_shell("cd '%s' && mkdir d && for i in $(seq 1 400); do echo $i > d/f$i; done && "
		    "mkdir e && for i in $(seq 1 100); do mkdir e/$i && echo x > e/$i/x; done && sync && "
		    "rm -rf e && for i in $(seq 1 200); do rm d/f$i; done && sync && "
		    "for i in $(seq 1 %u); do dd if=/dev/urandom of=big$i bs=64k count=16 status=none; done && "
		    "sync && for i in $(seq 1 50); do ln -s target s$i; done",
		    mnt, bs == 1024 ? 20u : 80u);
	CHECK(rc == 0, "workload exits %d", rc);
	int fd = open(mnt, O_RDONLY | O_DIRECTORY);
	REQUIRE(fd >= 0, "open mnt");
	uint32_t flags = EXT4_GOING_FLAGS_LOGFLUSH_;
	int ir = ioctl(fd, EXT4_IOC_SHUTDOWN_, &flags);
	int ierr = errno;
	close(fd);
	REQUIRE(run_shell("umount '%s'", mnt) == 0, "umount");
	if (ir != 0) {
		fprintf(stderr, "SKIP: EXT4_IOC_SHUTDOWN: %s\n", strerror(ierr));
		exit(77);
	}
	uint32_t start, seq;
	jsb_state(a, &start, &seq);
	fprintf(stderr, "  kernel left s_start %u, s_sequence %u\n", start, seq);
	CHECK(start != 0, "the kernel left an empty journal: nothing to test");
	char dump[600];
	snprintf(dump, sizeof(dump), "%s.logdump", a);
	REQUIRE(run_shell("debugfs -R logdump '%s' >'%s' 2>&1", a, dump) == 0, "logdump");
	CHECK(run_shell("grep -q 'revoke table' '%s'", dump) == 0, "the kernel's log has no revoke block (%s)",
	      dump);
	compare_replays(a, "kernel-made", CMP_STRICT);
	char b[600];
	snprintf(b, sizeof(b), "%s.ours", a);
	rc = e2fsck("-fn", b);
	CHECK(rc == 0, "e2fsck -fn exits %d after our replay of the kernel's journal", rc);
}

/* ---- power cuts: a device that loses unflushed writes ----
 * The commit sequence of io/txn.c (jbd_log; home writes; flush;
 * jbd_checkpointed; then file data into blocks freed earlier, revoked as txn
 * revokes them: only when logged in this or the previous transaction) runs on
 * a device that, at its Nth write, fails and keeps a random subset of the
 * writes since the last flush.  After our replay (and e2fsck's, on some
 * points) every block must hold its last durable contents or something
 * written after them, never older contents (a stale replay), and the
 * transaction in flight is all or nothing. */

static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

struct cdev {
	unsigned bs;
	unsigned char *cur, *durable;   /* what reads see; what survives */
	size_t size;
	struct cwrite { uint64_t blk; unsigned count; unsigned char *data; } *pend;
	size_t npend, cappend;
	unsigned long writes, crash_at, flushed_at;   /* flushed_at: writes made durable */
	bool crashed;
	uint64_t rng;
	/* targeted cut instead (crash_blk != 0): at the first write touching
	 * crash_blk, everything unflushed lands except the blocks in lose[] */
	uint64_t crash_blk, lose[2];
};

static bool cdev_lost(struct cdev *d, uint64_t blk)
{
	if (!d->crash_blk)
		return !(rnd(&d->rng) & 1);
	return blk == d->lose[0] || blk == d->lose[1];
}

static errcode_t cdev_read(void *ctx, uint64_t blk, void *buf)
{
	struct cdev *d = ctx;
	if (d->crashed)
		return EIO;
	if ((blk + 1) * d->bs > d->size)
		return EXT2_ET_SHORT_READ;
	memcpy(buf, d->cur + blk * d->bs, d->bs);
	return 0;
}

static errcode_t cdev_write(void *ctx, uint64_t blk, unsigned count, const void *buf)
{
	struct cdev *d = ctx;
	if (d->crashed)
		return EIO;
	size_t len = (size_t)count * d->bs;
	REQUIRE((blk * d->bs) + len <= d->size, "write past the image");
	++d->writes;
	if (d->writes == d->crash_at || (d->crash_blk && blk <= d->crash_blk && d->crash_blk < blk + count)) {
		/* power cut: some of the unflushed writes made it, in any order
		 * (a later write of the same block may land without an earlier;
		 * a multi-block write may land in part), and some of the write in
		 * progress */
		for (size_t i = 0; i < d->npend; i++)
			for (unsigned b = 0; b < d->pend[i].count; b++)
				if (!cdev_lost(d, d->pend[i].blk + b))
					memcpy(d->durable + (d->pend[i].blk + b) * d->bs,
					       d->pend[i].data + (size_t)b * d->bs, d->bs);
		for (unsigned b = 0; b < count; b++)
			if (!cdev_lost(d, blk + b))
				memcpy(d->durable + (blk + b) * d->bs,
				       (const unsigned char *)buf + (size_t)b * d->bs, d->bs);
		d->crashed = true;
		return EIO;
	}
	memcpy(d->cur + blk * d->bs, buf, len);
	if (d->npend == d->cappend) {
		d->cappend = d->cappend ? 2 * d->cappend : 64;
		d->pend = realloc(d->pend, d->cappend * sizeof(*d->pend));
		REQUIRE(d->pend, "oom");
	}
	unsigned char *copy = malloc(len);
	REQUIRE(copy, "oom");
	memcpy(copy, buf, len);
	d->pend[d->npend++] = (struct cwrite){ blk, count, copy };
	return 0;
}

static errcode_t cdev_flush(void *ctx)
{
	struct cdev *d = ctx;
	if (d->crashed)
		return EIO;
	for (size_t i = 0; i < d->npend; i++) {
		memcpy(d->durable + d->pend[i].blk * d->bs, d->pend[i].data,
		       (size_t)d->pend[i].count * d->bs);
		free(d->pend[i].data);
	}
	d->npend = 0;
	d->flushed_at = d->writes;
	return 0;
}

enum { CF = 96, CTX = 48 };

struct cevent {
	unsigned v;               /* version written */
	int tx;                   /* > 0: logged by that transaction; 0: data */
	unsigned long serial;     /* data: the device write that carried it */
};

struct cblock {
	struct cevent ev[4 * CTX + 4];
	size_t n;
};

/* One run: transactions until the crash (or the end); returns how many
 * device writes a run without a crash makes. */
static unsigned long crash_run(const char *base, const char *out, unsigned long crash_at,
			       uint64_t seed, bool with_e2fsck)
{
	struct img im = { 0 };
	snprintf(im.path, sizeof(im.path), "%s", base);
	img_open_fs(&im);
	uint64_t F[CF];
	REQUIRE(free_blocks(im.fs, F, CF) == CF, "free");
	unsigned bs = im.bs;
	struct cdev d = { .bs = bs, .crash_at = crash_at, .rng = seed * 0x2545F4914F6CDD1Dull + 7 };
	struct stat st;
	REQUIRE(fstat(im.d.fd, &st) == 0, "stat");
	d.size = (size_t)st.st_size;
	d.cur = malloc(d.size);
	d.durable = malloc(d.size);
	REQUIRE(d.cur && d.durable, "oom");
	REQUIRE(pread(im.d.fd, d.cur, d.size, 0) == (ssize_t)d.size, "read image");
	memcpy(d.durable, d.cur, d.size);
	struct jbd_dev jd = { &d, cdev_read, cdev_write, cdev_flush, false };
	char msg[256];
	errcode_t err = jbd_open(im.fs, &jd, &im.j, msg, sizeof(msg));
	REQUIRE(!err, "jbd_open: %s", msg);

	static struct cblock blocks[CF];
	memset(blocks, 0, sizeof(blocks));
	for (int i = 0; i < CF; i++)
		blocks[i].ev[blocks[i].n++] = (struct cevent){ 0, -1, 0 };  /* original, durable */
	int in_flight = 0, certain_tx = 0;
	bool logged_prev[CF] = { false }, logged_cur[CF];
	uint64_t wl = 0x9E3779B97F4A7C15ull ^ (seed << 1);   /* the workload's own randomness */
	unsigned char *buf = malloc(bs);
	REQUIRE(buf, "oom");
	unsigned dataver = 1000;
	for (int t = 1; t <= CTX && !d.crashed; t++) {
		struct txb *tb = calloc(1, sizeof(*tb));
		REQUIRE(tb, "oom");
		memset(logged_cur, 0, sizeof(logged_cur));
		size_t want = 1 + rnd(&wl) % 90;
		for (size_t k = 0; k < want; k++) {
			int i = (int)(rnd(&wl) % CF);
			if (logged_cur[i])
				continue;
			logged_cur[i] = true;
			tx_add(tb, bs, F[i], (unsigned)t, rnd(&wl) % 7 == 0);
		}
		/* blocks freed now, reused as data once this is durable */
		int reuse[4], nreuse = 0;
		uint64_t rv[4];
		size_t nrv = 0;
		for (int k = 0; k < 3; k++) {
			int i = (int)(rnd(&wl) % CF);
			bool dup = false;
			for (int r = 0; r < nreuse; r++)
				dup |= reuse[r] == i;
			if (logged_cur[i] || dup)
				continue;
			reuse[nreuse++] = i;
			if (logged_prev[i])
				rv[nrv++] = F[i];
		}
		for (size_t k = 0; k < tb->n; k++) {
			int i = 0;
			while (F[i] != tb->blk[k])
				i++;
			struct cblock *c = &blocks[i];
			c->ev[c->n++] = (struct cevent){ (unsigned)t, t, 0 };
		}
		in_flight = t;
		unsigned char *datacopy[CF];
		uint64_t blkcopy[CF];
		size_t ncopy = tb->n;
		for (size_t k = 0; k < ncopy; k++) {
			datacopy[k] = tb->data[k];
			blkcopy[k] = tb->blk[k];
		}
		err = jbd_log(im.j, tb->blk, (const void *const *)tb->data, tb->n, rv, nrv);
		if (!err) {
			certain_tx = t;
			in_flight = 0;
			for (size_t k = 0; k < ncopy && !err; k++)
				err = cdev_write(&d, blkcopy[k], 1, datacopy[k]);
			if (!err)
				err = cdev_flush(&d);
			if (!err)
				err = jbd_checkpointed(im.j);
			for (int r = 0; r < nreuse && !err; r++) {
				struct cblock *c = &blocks[reuse[r]];
				pattern(buf, bs, F[reuse[r]], dataver, false);
				/* recorded first: a write cut by the crash may land too */
				c->ev[c->n++] = (struct cevent){ dataver, 0, d.writes + 1 };
				err = cdev_write(&d, F[reuse[r]], 1, buf);
				dataver++;
			}
		}
		for (size_t k = 0; k < ncopy; k++)
			free(datacopy[k]);
		free(tb);
		memcpy(logged_prev, logged_cur, sizeof(logged_prev));
	}
	free(buf);
	unsigned long total = d.writes;
	if (!d.crashed)
		cdev_flush(&d);   /* no crash: everything lands */
	/* the closing flush of jbd_close must not reach the durable image
	 * after a crash (cdev refuses it) */
	jbd_close(im.j);
	im.j = NULL;
	ext2fs_close_free(&im.fs);
	close(im.d.fd);
	int fd = open(out, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(fd >= 0, "create %s", out);
	REQUIRE(pwrite(fd, d.durable, d.size, 0) == (ssize_t)d.size, "write %s", out);
	close(fd);
	for (size_t i = 0; i < d.npend; i++)
		free(d.pend[i].data);
	free(d.pend);
	free(d.cur);
	free(d.durable);

	/* replay: ours, and e2fsck's on a copy */
	char ref[600];
	snprintf(ref, sizeof(ref), "%s.e2fsck", out);
	if (with_e2fsck)
		copy_file(out, ref);
	unsigned replayed = 0;
	err = our_recover(out, false, &replayed, msg, sizeof(msg));
	CHECK(!err, "crash at %lu: jbd_recover: %s (%s)", crash_at, error_message(err), msg);
	const char *who[2] = { out, ref };
	unsigned char *got = malloc(bs), *want = malloc(bs);
	REQUIRE(got && want, "oom");
	for (int w = 0; w < (with_e2fsck ? 2 : 1); w++) {
		if (w == 1) {
			int rc = e2fsck("-fy", ref);
			CHECK(rc == 0 || rc == 1, "crash at %lu: e2fsck -fy exits %d", crash_at, rc);
		}
		size_t flight_new = 0, flight_old = 0;
		for (int i = 0; i < CF; i++) {
			struct cblock *c = &blocks[i];
			read_home(who[w], bs, F[i], got);
			/* the last event surely durable */
			size_t last = 0;
			for (size_t e = 0; e < c->n; e++) {
				bool sure = c->ev[e].tx == -1 || (c->ev[e].tx > 0 && c->ev[e].tx <= certain_tx) ||
					    (c->ev[e].tx == 0 && c->ev[e].serial <= d.flushed_at);
				if (sure)
					last = e;
			}
			int match = -1;
			for (size_t e = last; e < c->n && match < 0; e++) {
				for (int esc = 0; esc < 2 && match < 0; esc++) {
					pattern(want, bs, F[i], c->ev[e].v, esc);
					if (!memcmp(want, got, bs))
						match = (int)e;
				}
			}
			CHECK(match >= 0, "crash at %lu (seed %" PRIu64 "), %s: block %d holds contents older "
			      "than its last durable version %u", crash_at, seed, w ? "e2fsck" : "jbd_recover",
			      i, c->ev[last].v);
			if (in_flight) {
				for (size_t e = 0; e < c->n; e++)
					if (c->ev[e].tx == in_flight) {
						if (match == (int)e)
							flight_new++;
						else
							flight_old++;
					}
			}
		}
		CHECK(!(flight_new && flight_old), "crash at %lu: transaction %d half replayed (%zu new, "
		      "%zu old)", crash_at, in_flight, flight_new, flight_old);
	}
	free(got);
	free(want);
	if (with_e2fsck) {
		int rc = e2fsck("-fn", out);
		CHECK(rc == 0, "crash at %lu: e2fsck -fn exits %d after our replay", crash_at, rc);
	}
	return total;
}

/* An 8 MiB image with the shortest journal the kernel accepts (1024 blocks,
 * a log of 1023) so that runs wrap around it; known contents in the free
 * blocks the crash tests use; needs_recovery set, as io/txn.c sets it
 * durably before anything is logged. */
static void make_crash_base(const char *base)
{
	mkfs(base, 1024, 8, "-J size=1");
	struct img im = { 0 };
	snprintf(im.path, sizeof(im.path), "%s", base);
	img_open_fs(&im);
	uint64_t F[CF];
	REQUIRE(free_blocks(im.fs, F, CF) == CF, "free");
	unsigned char *buf = malloc(im.bs);
	REQUIRE(buf, "oom");
	for (int i = 0; i < CF; i++) {
		pattern(buf, im.bs, F[i], 0, false);
		write_home(&im, F[i], buf);
	}
	free(buf);
	img_close(&im, true);
}

static void test_crash(void)
{
	char base[512], out[512];
	path_in(base, sizeof(base), "cbase.img");
	path_in(out, sizeof(out), "crashed.img");
	make_crash_base(base);
	unsigned long total = crash_run(base, out, 0, 1, true);
	fprintf(stderr, "  %lu device writes without a crash\n", total);
	REQUIRE(total > 50, "too few writes");
	/* every point up to 300, then evenly spread */
	unsigned long step = total / 300 + 1;
	unsigned points = 0;
	for (unsigned long n = 1; n <= total; n++)
		for (uint64_t seed = 1; seed <= 2; seed++) {
			if (n % step)
				continue;
			crash_run(base, out, n, seed * 7919 + n, n % 17 == 0 && seed == 1);
			points++;
		}
	fprintf(stderr, "  %u crash points tried\n", points);
}

/* The one case the random sweep rarely hits: a transaction so large that it
 * wraps onto the previous (checkpointed) one, whose s_start = 0 is written
 * but not yet flushed (here nearly the whole log, its blocks logged many
 * times over).  The cut loses both journal superblock writes and the
 * first block of the old transaction, keeps the rest: unless jbd flushed
 * before overwriting, the old superblock replays the old descriptor over
 * half-new log blocks. */
static void test_overlap(void)
{
	char base[512], out[512];
	path_in(base, sizeof(base), "obase.img");
	path_in(out, sizeof(out), "overlap.img");
	make_crash_base(base);
	struct img im = { 0 };
	snprintf(im.path, sizeof(im.path), "%s", base);
	img_open_fs(&im);
	uint64_t F[CF];
	REQUIRE(free_blocks(im.fs, F, CF) == CF, "free");
	unsigned bs = im.bs;
	struct cdev d = { .bs = bs, .rng = 1 };
	struct stat st;
	REQUIRE(fstat(im.d.fd, &st) == 0, "stat");
	d.size = (size_t)st.st_size;
	d.cur = malloc(d.size);
	d.durable = malloc(d.size);
	REQUIRE(d.cur && d.durable, "oom");
	REQUIRE(pread(im.d.fd, d.cur, d.size, 0) == (ssize_t)d.size, "read image");
	memcpy(d.durable, d.cur, d.size);
	struct jbd_dev jd = { &d, cdev_read, cdev_write, cdev_flush, false };
	char msg[256];
	errcode_t err = jbd_open(im.fs, &jd, &im.j, msg, sizeof(msg));
	REQUIRE(!err, "jbd_open: %s", msg);
	blk64_t jsb = 0;
	REQUIRE(!ext2fs_bmap2(im.fs, im.fs->super->s_journal_inum, NULL, NULL, 0, 0, NULL, &jsb), "bmap");

	struct txb *t = calloc(1, sizeof(*t));
	REQUIRE(t, "oom");
	struct expect e[CF];
	for (int i = 0; i < 50; i++) {
		tx_add(t, bs, F[i], 1, false);
		REQUIRE(!cdev_write(&d, F[i], 1, t->data[i]), "home");
		e[i] = (struct expect){ F[i], 1, false };
	}
	/* log first, then home (the order txn uses; the writes above only
	 * stage the home copies in the volatile view) */
	tx_log(&im, NULL, t, NULL, 0);
	REQUIRE(!cdev_flush(&d), "flush");
	REQUIRE(!jbd_checkpointed(im.j), "checkpointed");
	uint32_t p = get_be32(d.durable + jsb * bs + 0x1C);
	REQUIRE(p != 0, "no s_start after the first transaction");
	blk64_t pphys = 0;
	REQUIRE(!ext2fs_bmap2(im.fs, im.fs->super->s_journal_inum, NULL, NULL, 0, p, NULL, &pphys),
		"bmap");
	d.crash_blk = pphys;
	d.lose[0] = jsb;
	d.lose[1] = pphys;
	for (int i = 50; i < CF; i++) {
		tx_add(t, bs, F[i], 2, false);
		e[i] = (struct expect){ F[i], 0, false };
	}
	/* from the head (past the first transaction) around to its start */
	enum { NBIG = 990 };
	uint64_t *bigblk = malloc(NBIG * sizeof(*bigblk));
	const void **bigdata = malloc(NBIG * sizeof(*bigdata));
	REQUIRE(bigblk && bigdata, "oom");
	for (size_t i = 0; i < NBIG; i++) {
		bigblk[i] = t->blk[i % t->n];
		bigdata[i] = t->data[i % t->n];
	}
	err = jbd_log(im.j, bigblk, bigdata, NBIG, NULL, 0);
	CHECK(err == EIO && d.crashed, "the second transaction did not reach the first one's blocks "
	      "(%s)", error_message(err));
	free(bigblk);
	free(bigdata);
	for (size_t i = 0; i < t->n; i++)
		free(t->data[i]);
	free(t);
	jbd_close(im.j);
	im.j = NULL;
	ext2fs_close_free(&im.fs);
	close(im.d.fd);
	int fd = open(out, O_RDWR | O_CREAT | O_TRUNC, 0644);
	REQUIRE(fd >= 0, "create");
	REQUIRE(pwrite(fd, d.durable, d.size, 0) == (ssize_t)d.size, "write");
	close(fd);
	for (size_t i = 0; i < d.npend; i++)
		free(d.pend[i].data);
	free(d.pend);
	free(d.cur);
	free(d.durable);
	char ref[600];
	snprintf(ref, sizeof(ref), "%s.e2fsck", out);
	copy_file(out, ref);
	unsigned replayed = 0;
	err = our_recover(out, false, &replayed, msg, sizeof(msg));
	CHECK(!err, "jbd_recover: %s (%s)", error_message(err), msg);
	check_expect(out, bs, e, CF, "jbd_recover after the cut");
	int rc = e2fsck("-fy", ref);
	CHECK(rc == 0 || rc == 1, "e2fsck -fy exits %d", rc);
	check_expect(ref, bs, e, CF, "e2fsck after the cut");
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s e2fsck-1k|e2fsck-4k|kernel-1k|kernel-4k|wrap|torn|"
				"corrupt-sb|crash|overlap|corpus|kernel-made-1k|kernel-made-4k\n",
			argv[0]);
		return 2;
	}
	add_error_table(&et_ext2_error_table);
	make_scratch();
	const char *t = argv[1];
	if (!strcmp(t, "e2fsck-1k"))
		test_e2fsck(1024);
	else if (!strcmp(t, "e2fsck-4k"))
		test_e2fsck(4096);
	else if (!strcmp(t, "kernel-1k"))
		test_kernel(1024);
	else if (!strcmp(t, "kernel-4k"))
		test_kernel(4096);
	else if (!strcmp(t, "wrap"))
		test_wrap();
	else if (!strcmp(t, "torn"))
		test_torn();
	else if (!strcmp(t, "corrupt-sb"))
		test_corrupt_sb();
	else if (!strcmp(t, "crash"))
		test_crash();
	else if (!strcmp(t, "overlap"))
		test_overlap();
	else if (!strcmp(t, "corpus"))
		test_corpus();
	else if (!strcmp(t, "kernel-made-1k"))
		test_kernel_made(1024);
	else if (!strcmp(t, "kernel-made-4k"))
		test_kernel_made(4096);
	else {
		fprintf(stderr, "unknown test %s\n", t);
		return 2;
	}
	if (failures)
		fprintf(stderr, "%d check(s) failed; scratch kept in %s\n", failures, scratch);
	else
		remove_scratch();
	return failures ? 1 : 0;
}
