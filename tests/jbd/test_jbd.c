/*
 * tests/jbd/test_jbd.c - io/jbd.c against the tools that define the format:
 * transactions we log are replayed by e2fsck (and the kernel, as root) and
 * parsed by debugfs logdump; journals others wrote (e2fsprogs corpus, the
 * kernel) are replayed by us exactly as e2fsck replays them.
 *
 * Usage: test_jbd NAME (see main); exit 0 pass, 77 skip, 1 fail.
 * Scratch files go under $TMPDIR (or /tmp) in a directory of their own.
 */
#include "jbd.h"

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

#define JBD_MAGIC 0xc03b3998U

static int failures;
static char scratch[256];

#define CHECK(cond, ...)                                                                  \
	do {                                                                              \
		if (!(cond)) {                                                            \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);  \
			fprintf(stderr, __VA_ARGS__);                                    \
			fputc('\n', stderr);                                              \
			failures++;                                                       \
		}                                                                         \
	} while (0)

#define REQUIRE(cond, ...)                                                                \
	do {                                                                              \
		if (!(cond)) {                                                            \
			fprintf(stderr, "FATAL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                    \
			fputc('\n', stderr);                                              \
			exit(1);                                                          \
		}                                                                         \
	} while (0)

static uint32_t get_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

/* Run a shell command; returns its exit status (or -1). */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int st = system(cmd);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static void path_in(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", scratch, name);
}

static void make_scratch(void)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(scratch, sizeof(scratch), "%s/test_jbd.XXXXXX", tmp ? tmp : "/tmp");
	REQUIRE(mkdtemp(scratch), "mkdtemp: %s", strerror(errno));
}

static void remove_scratch(void)
{
	if (scratch[0])
		sh("rm -rf '%s'", scratch);
}

/* ---- a jbd_dev over an image file ---- */

struct fdev {
	int fd;
	unsigned bs;
	unsigned long writes, flushes;
};

static errcode_t fdev_read(void *ctx, uint64_t blk, void *buf)
{
	struct fdev *d = ctx;
	ssize_t r = pread(d->fd, buf, d->bs, (off_t)(blk * d->bs));
	if (r < 0)
		return errno;
	if ((size_t)r != d->bs)
		return EXT2_ET_SHORT_READ;
	return 0;
}

static errcode_t fdev_write(void *ctx, uint64_t blk, unsigned count, const void *buf)
{
	struct fdev *d = ctx;
	size_t len = (size_t)count * d->bs;
	ssize_t r = pwrite(d->fd, buf, len, (off_t)(blk * d->bs));
	if (r < 0)
		return errno;
	if ((size_t)r != len)
		return EXT2_ET_SHORT_WRITE;
	d->writes++;
	return 0;
}

static errcode_t fdev_flush(void *ctx)
{
	struct fdev *d = ctx;
	d->flushes++;
	return fdatasync(d->fd) ? errno : 0;
}

/* An image opened both through libext2fs (mapping, bitmaps, inodes) and as a
 * jbd_dev. */
struct img {
	char path[512];
	ext2_filsys fs;
	struct fdev d;
	struct jbd_dev jd;
	struct jbd *j;
	unsigned bs;
};

static void img_open_fs(struct img *im)
{
	errcode_t err = ext2fs_open2(im->path, NULL, EXT2_FLAG_RW | EXT2_FLAG_64BITS, 0, 0,
				     unix_io_manager, &im->fs);
	REQUIRE(!err, "ext2fs_open2 %s: %s", im->path, error_message(err));
	im->bs = im->fs->blocksize;
	im->d.fd = open(im->path, O_RDWR);
	REQUIRE(im->d.fd >= 0, "open %s: %s", im->path, strerror(errno));
	im->d.bs = im->bs;
	im->jd = (struct jbd_dev){ &im->d, fdev_read, fdev_write, fdev_flush };
}

static errcode_t img_open_jbd(struct img *im, char *msg, size_t msglen)
{
	return jbd_open(im->fs, &im->jd, &im->j, msg, msglen);
}

static void img_open(struct img *im, const char *path)
{
	snprintf(im->path, sizeof(im->path), "%s", path);
	img_open_fs(im);
	char msg[256];
	errcode_t err = img_open_jbd(im, msg, sizeof(msg));
	REQUIRE(!err, "jbd_open: %s (%s)", error_message(err), msg);
}

/* Close everything; with set_recover, leave needs_recovery set as a crash
 * would.  libext2fs writes its superblock copy at close: nothing we logged is
 * the superblock's block unless the caller passed keep_sb_home. */
static void img_close(struct img *im, bool set_recover)
{
	if (im->j)
		jbd_close(im->j);
	im->j = NULL;
	if (set_recover) {
		ext2fs_set_feature_journal_needs_recovery(im->fs->super);
		ext2fs_mark_super_dirty(im->fs);
	}
	errcode_t err = ext2fs_close_free(&im->fs);
	REQUIRE(!err, "ext2fs_close: %s", error_message(err));
	close(im->d.fd);
}

static void read_home(const char *path, unsigned bs, uint64_t blk, void *buf)
{
	int fd = open(path, O_RDONLY);
	REQUIRE(fd >= 0, "open %s", path);
	REQUIRE(pread(fd, buf, bs, (off_t)(blk * bs)) == (ssize_t)bs, "pread %s", path);
	close(fd);
}

static void write_home(struct img *im, uint64_t blk, const void *buf)
{
	REQUIRE(fdev_write(&im->d, blk, 1, buf) == 0, "write home %" PRIu64, blk);
}

static void mkfs(const char *path, unsigned bs, unsigned size_mb, const char *extra)
{
	REQUIRE(sh("rm -f '%s' && mke2fs -q -F -t ext3 -b %u %s '%s' %uM >/dev/null 2>&1", path, bs,
		   extra ? extra : "", path, size_mb) == 0,
		"mke2fs %s", path);
}

/* Deterministic contents for block blk, version v; escaped ones start with
 * the journal magic. */
static void pattern(unsigned char *buf, unsigned bs, uint64_t blk, unsigned v, bool escaped)
{
	uint64_t x = blk * 0x9E3779B97F4A7C15ull + v * 0xBF58476D1CE4E5B9ull + 1;
	for (unsigned i = 0; i < bs; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (unsigned char)x;
	}
	if (escaped)
		put_be32(buf, JBD_MAGIC);
	else if (get_be32(buf) == JBD_MAGIC)
		buf[0] ^= 1;
}

/* n free blocks from the top of the file system (e2fsck allocates nothing
 * on a clean one; free blocks' contents are nobody's business but ours). */
static size_t free_blocks(ext2_filsys fs, uint64_t *out, size_t n)
{
	errcode_t err = ext2fs_read_block_bitmap(fs);
	REQUIRE(!err, "read bitmap: %s", error_message(err));
	size_t k = 0;
	for (uint64_t b = ext2fs_blocks_count(fs->super) - 1; b > fs->super->s_first_data_block && k < n;
	     b--)
		if (!ext2fs_test_block_bitmap2(fs->block_map, b))
			out[k++] = b;
	return k;
}

/* ---- expectations ---- */

struct expect {
	uint64_t blk;
	unsigned v;       /* 0 = the original home contents */
	bool escaped;
};

static int check_expect(const char *path, unsigned bs, const struct expect *e, size_t n,
			const char *who)
{
	unsigned char *want = malloc(bs), *got = malloc(bs);
	REQUIRE(want && got, "oom");
	int bad = 0;
	for (size_t i = 0; i < n; i++) {
		pattern(want, bs, e[i].blk, e[i].v, e[i].escaped);
		read_home(path, bs, e[i].blk, got);
		if (memcmp(want, got, bs)) {
			unsigned found = ~0u;
			for (unsigned v = 0; v < 8; v++) {
				for (int esc = 0; esc < 2; esc++) {
					pattern(want, bs, e[i].blk, v, esc);
					if (!memcmp(want, got, bs))
						found = v * 2 + (unsigned)esc;
				}
			}
			if (bad < 10)
				fprintf(stderr, "  %s: block %" PRIu64 " wants version %u%s, holds %s%d\n",
					who, e[i].blk, e[i].v, e[i].escaped ? " (escaped)" : "",
					found == ~0u ? "unknown contents " : "version ",
					found == ~0u ? -1 : (int)(found / 2));
			bad++;
		}
	}
	free(want);
	free(got);
	CHECK(bad == 0, "%s: %d home blocks hold the wrong contents", who, bad);
	return bad;
}

/* Compare two images block by block; returns how many blocks differ outside
 * skip[] (printing a few). */
static size_t compare_images(const char *a, const char *b, unsigned bs, const uint64_t *skip,
			     size_t nskip)
{
	int fa = open(a, O_RDONLY), fb = open(b, O_RDONLY);
	REQUIRE(fa >= 0 && fb >= 0, "open images");
	unsigned char *ba = malloc(bs), *bb = malloc(bs);
	REQUIRE(ba && bb, "oom");
	size_t diff = 0;
	for (uint64_t blk = 0;; blk++) {
		ssize_t ra = pread(fa, ba, bs, (off_t)(blk * bs));
		ssize_t rb = pread(fb, bb, bs, (off_t)(blk * bs));
		if (ra <= 0 && rb <= 0)
			break;
		if (ra != rb || memcmp(ba, bb, (size_t)(ra > 0 ? ra : 0))) {
			bool skipped = false;
			for (size_t i = 0; i < nskip; i++)
				skipped |= skip[i] == blk;
			if (skipped)
				continue;
			if (diff < 8)
				fprintf(stderr, "  images differ at block %" PRIu64 "\n", blk);
			diff++;
		}
	}
	free(ba);
	free(bb);
	close(fa);
	close(fb);
	return diff;
}

static void copy_file(const char *from, const char *to)
{
	REQUIRE(sh("cp --sparse=always '%s' '%s'", from, to) == 0, "cp %s %s", from, to);
}

/* Our replay on path: open, recover, clear needs_recovery as rio does. */
static errcode_t our_recover(const char *path, unsigned *replayed, char *msg, size_t msglen)
{
	struct img im = { 0 };
	snprintf(im.path, sizeof(im.path), "%s", path);
	img_open_fs(&im);
	errcode_t err = img_open_jbd(&im, msg, msglen);
	if (err) {
		ext2fs_close_free(&im.fs);
		close(im.d.fd);
		return err;
	}
	err = jbd_recover(im.j, replayed);
	if (err) {
		jbd_close(im.j);
		im.j = NULL;
		ext2fs_close_free(&im.fs);
		close(im.d.fd);
		return err;
	}
	CHECK(!jbd_needs_recovery(im.j), "still needs recovery after jbd_recover");
	jbd_close(im.j);
	im.j = NULL;
	ext2fs_close_free(&im.fs);
	close(im.d.fd);
	/* clear the flag on disk without libext2fs rewriting its (stale) copies */
	int fd = open(path, O_RDWR);
	REQUIRE(fd >= 0, "open");
	struct ext2_super_block sb;
	REQUIRE(pread(fd, &sb, sizeof(sb), SUPERBLOCK_OFFSET) == sizeof(sb), "read sb");
	sb.s_feature_incompat &= ext2fs_cpu_to_le32(~(uint32_t)EXT3_FEATURE_INCOMPAT_RECOVER);
	REQUIRE(pwrite(fd, &sb, sizeof(sb), SUPERBLOCK_OFFSET) == sizeof(sb), "write sb");
	close(fd);
	return 0;
}

/* The journal superblock's (s_start, s_sequence) as on disk. */
static void jsb_state(const char *path, uint32_t *start, uint32_t *seq)
{
	ext2_filsys fs;
	errcode_t err = ext2fs_open2(path, NULL, EXT2_FLAG_64BITS, 0, 0, unix_io_manager, &fs);
	REQUIRE(!err, "open %s: %s", path, error_message(err));
	blk64_t pblk = 0;
	err = ext2fs_bmap2(fs, fs->super->s_journal_inum, NULL, NULL, 0, 0, NULL, &pblk);
	REQUIRE(!err && pblk, "bmap journal");
	unsigned char *buf = malloc(fs->blocksize);
	read_home(path, fs->blocksize, pblk, buf);
	*start = get_be32(buf + 0x1C);
	*seq = get_be32(buf + 0x18);
	free(buf);
	ext2fs_close_free(&fs);
}

static int e2fsck(const char *opts, const char *path)
{
	return sh("e2fsck %s '%s' >'%s.fsck.log' 2>&1", opts, path, path);
}

/* ---- scenario: several transactions, escapes, revokes, a big one ---- */

struct scenario {
	struct expect e[1024];
	size_t n;
	uint32_t atime;            /* root inode's atime as logged */
	uint64_t logged[1024];     /* every home block logged (for logdump) */
	size_t nlogged;
	unsigned ntx;
};

static void expect_set(struct scenario *s, uint64_t blk, unsigned v, bool esc)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->e[i].blk == blk) {
			s->e[i].v = v;
			s->e[i].escaped = esc;
			return;
		}
	REQUIRE(s->n < 1024, "too many");
	s->e[s->n++] = (struct expect){ blk, v, esc };
}

/* One transaction: blocks F[idx[i]] at version v (escaped where esc says). */
struct txb {
	uint64_t blk[512];
	unsigned char *data[512];
	size_t n;
};

static void tx_add(struct txb *t, unsigned bs, uint64_t blk, unsigned v, bool esc)
{
	t->data[t->n] = malloc(bs);
	REQUIRE(t->data[t->n], "oom");
	pattern(t->data[t->n], bs, blk, v, esc);
	t->blk[t->n++] = blk;
}

static void tx_log(struct img *im, struct scenario *s, struct txb *t, const uint64_t *rv, size_t nrv)
{
	errcode_t err = jbd_log(im->j, t->blk, (const void *const *)t->data, t->n, rv, nrv);
	REQUIRE(!err, "jbd_log: %s", error_message(err));
	for (size_t i = 0; i < t->n; i++) {
		free(t->data[i]);
		if (s && s->nlogged < 1024)
			s->logged[s->nlogged++] = t->blk[i];
	}
	if (s)
		s->ntx++;
	t->n = 0;
}

/* Build the scenario on a fresh image; leaves it needing recovery. */
static void build_scenario(const char *path, unsigned bs, struct scenario *s)
{
	memset(s, 0, sizeof(*s));
	struct img im = { 0 };
	img_open(&im, path);
	CHECK(!jbd_needs_recovery(im.j), "fresh journal needs recovery");
	uint64_t F[420];
	REQUIRE(free_blocks(im.fs, F, 420) == 420, "not enough free blocks");
	unsigned char *buf = malloc(bs);
	REQUIRE(buf, "oom");
	/* originals at home, durable */
	for (size_t i = 0; i < 420; i++) {
		pattern(buf, bs, F[i], 0, false);
		write_home(&im, F[i], buf);
		expect_set(s, F[i], 0, false);
	}
	REQUIRE(fdev_flush(&im.d) == 0, "flush");

	/* the root inode's block with a new atime: real metadata */
	blk64_t iblk = ext2fs_inode_table_loc(im.fs, 0) +
		       (EXT2_ROOT_INO - 1) * EXT2_INODE_SIZE(im.fs->super) / bs;
	unsigned ioff = (EXT2_ROOT_INO - 1) * EXT2_INODE_SIZE(im.fs->super) % bs;
	read_home(path, bs, iblk, buf);
	struct ext2_inode *ino = (struct ext2_inode *)(buf + ioff);
	s->atime = 1234567890u;
	ino->i_atime = ext2fs_cpu_to_le32(s->atime);

	struct txb *t = calloc(1, sizeof(*t));
	REQUIRE(t, "oom");
	/* T1 */
	for (int i = 0; i < 10; i++)
		tx_add(t, bs, F[i], 1, false);
	tx_add(t, bs, F[10], 1, true);
	tx_add(t, bs, F[20], 1, false);
	tx_add(t, bs, F[21], 1, false);
	t->blk[t->n] = iblk;
	t->data[t->n] = malloc(bs);
	REQUIRE(t->data[t->n], "oom");
	memcpy(t->data[t->n++], buf, bs);
	tx_log(&im, s, t, NULL, 0);
	for (int i = 0; i < 10; i++)
		expect_set(s, F[i], 1, false);
	expect_set(s, F[10], 1, true);
	/* T2: overwrite some, revoke F[20] and F[21] (logged in T1), log and
	 * revoke F[22] in the same transaction, and a big run of 300 blocks
	 * (several descriptor blocks at 1 KiB) */
	for (int i = 0; i < 5; i++)
		tx_add(t, bs, F[i], 2, false);
	tx_add(t, bs, F[22], 2, false);
	for (int i = 100; i < 400; i++)
		tx_add(t, bs, F[i], 2, i % 37 == 0);
	uint64_t rv[3] = { F[20], F[21], F[22] };
	tx_log(&im, s, t, rv, 3);
	for (int i = 0; i < 5; i++)
		expect_set(s, F[i], 2, false);
	for (int i = 100; i < 400; i++)
		expect_set(s, F[i], 2, i % 37 == 0);
	/* F[20], F[22]: revoked, stay original */
	/* T3: F[21] logged again after its revoke: replayed; an escaped block */
	tx_add(t, bs, F[21], 3, false);
	tx_add(t, bs, F[5], 3, true);
	tx_log(&im, s, t, NULL, 0);
	expect_set(s, F[21], 3, false);
	expect_set(s, F[5], 3, true);
	free(t);
	free(buf);
	CHECK(!jbd_needs_recovery(im.j), "our own live log is not 'needs recovery' to us");
	img_close(&im, true);
	uint32_t start, seq;
	jsb_state(path, &start, &seq);
	CHECK(start != 0, "s_start is 0 with transactions not checkpointed");
}

static void verify_scenario(const char *path, unsigned bs, const struct scenario *s, const char *who)
{
	check_expect(path, bs, s->e, s->n, who);
	ext2_filsys fs;
	errcode_t err = ext2fs_open2(path, NULL, EXT2_FLAG_64BITS, 0, 0, unix_io_manager, &fs);
	REQUIRE(!err, "open %s: %s", path, error_message(err));
	struct ext2_inode ino;
	err = ext2fs_read_inode(fs, EXT2_ROOT_INO, &ino);
	REQUIRE(!err, "read root");
	CHECK(ino.i_atime == s->atime, "%s: root atime %u, logged %u", who, ino.i_atime, s->atime);
	CHECK(!ext2fs_has_feature_journal_needs_recovery(fs->super), "%s: needs_recovery still set",
	      who);
	ext2fs_close_free(&fs);
	uint32_t start, seq;
	jsb_state(path, &start, &seq);
	CHECK(start == 0, "%s: journal s_start %u after replay", who, start);
	int rc = e2fsck("-fn", path);
	CHECK(rc == 0, "%s: e2fsck -fn exits %d after replay (log in %s.fsck.log)", who, rc, path);
}

static void check_logdump(const char *path, const struct scenario *s)
{
	char out[600];
	snprintf(out, sizeof(out), "%s.logdump", path);
	REQUIRE(sh("debugfs -R 'logdump -a' '%s' >'%s' 2>&1", path, out) == 0, "debugfs logdump");
	FILE *f = fopen(out, "r");
	REQUIRE(f, "open logdump");
	char line[512];
	unsigned commits = 0, revokes = 0;
	size_t nlogged = 0;
	uint64_t *seen = calloc(s->nlogged + 1, sizeof(*seen));
	REQUIRE(seen, "oom");
	while (fgets(line, sizeof(line), f)) {
		unsigned long long fsb;
		if (strstr(line, "(commit block)"))
			commits++;
		if (strstr(line, "(revoke table)"))
			revokes++;
		const char *p = strstr(line, "FS block ");
		if (p && sscanf(p, "FS block %llu logged at", &fsb) == 1 && strstr(p, "logged at")) {
			if (nlogged < s->nlogged)
				seen[nlogged] = fsb;
			nlogged++;
		}
	}
	fclose(f);
	CHECK(commits == s->ntx, "logdump shows %u commit blocks, we logged %u transactions (%s)",
	      commits, s->ntx, out);
	CHECK(revokes >= 1, "logdump shows no revoke block (%s)", out);
	CHECK(nlogged == s->nlogged, "logdump lists %zu logged blocks, we logged %zu (%s)", nlogged,
	      s->nlogged, out);
	for (size_t i = 0; i < s->nlogged && i < nlogged; i++)
		CHECK(seen[i] == s->logged[i], "logdump entry %zu: block %" PRIu64 ", we logged %" PRIu64,
		      i, seen[i], s->logged[i]);
	free(seen);
}

/* Blocks that legitimately differ between e2fsck's replay and ours: the
 * block holding the primary superblock (e2fsck updates its counters and
 * times). */
static size_t sb_blocks(unsigned bs, uint64_t *skip)
{
	skip[0] = SUPERBLOCK_OFFSET / bs;
	return 1;
}

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
	errcode_t err = our_recover(b, &replayed, msg, sizeof(msg));
	CHECK(!err, "jbd_recover: %s (%s)", error_message(err), msg);
	CHECK(replayed == s->ntx, "replayed %u transactions, logged %u", replayed, s->ntx);
	verify_scenario(b, bs, s, "jbd_recover");
	uint64_t skip[2];
	size_t d = compare_images(a, b, bs, skip, sb_blocks(bs, skip));
	CHECK(d == 0, "%zu blocks differ between e2fsck's replay and ours", d);
	free(s);
}

/* ---- the kernel replays what we logged ---- */

static bool can_mount(void)
{
	if (geteuid() != 0)
		return false;
	return sh("grep -qw ext3 /proc/filesystems || modprobe ext3 >/dev/null 2>&1 || "
		  "grep -qw ext4 /proc/filesystems") == 0;
}

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
	int rc = sh("mount -t ext3 -o loop '%s' '%s'", a, mnt);
	if (rc != 0) {
		fprintf(stderr, "SKIP: mount -t ext3 -o loop failed\n");
		free(s);
		exit(77);
	}
	rc = sh("umount '%s'", mnt);
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
	errcode_t err = our_recover(b, &replayed, msg, sizeof(msg));
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

/* Overwrite the log block of transaction tid whose type is `type` (first
 * one found) via fn. */
static bool patch_log_block(const char *path, uint32_t tid, uint32_t type,
			    void (*fn)(unsigned char *buf, unsigned bs))
{
	ext2_filsys fs;
	errcode_t err = ext2fs_open2(path, NULL, EXT2_FLAG_64BITS, 0, 0, unix_io_manager, &fs);
	REQUIRE(!err, "open");
	unsigned bs = fs->blocksize;
	unsigned char *buf = malloc(bs);
	REQUIRE(buf, "oom");
	bool done = false;
	int fd = open(path, O_RDWR);
	REQUIRE(fd >= 0, "open");
	for (blk64_t l = 1; !done; l++) {
		blk64_t p = 0;
		err = ext2fs_bmap2(fs, fs->super->s_journal_inum, NULL, NULL, 0, l, NULL, &p);
		if (err || !p)
			break;
		REQUIRE(pread(fd, buf, bs, (off_t)(p * bs)) == (ssize_t)bs, "read");
		if (get_be32(buf) == JBD_MAGIC && get_be32(buf + 4) == type && get_be32(buf + 8) == tid) {
			fn(buf, bs);
			REQUIRE(pwrite(fd, buf, bs, (off_t)(p * bs)) == (ssize_t)bs, "write");
			done = true;
		}
	}
	close(fd);
	free(buf);
	ext2fs_close_free(&fs);
	return done;
}

static void zero_block(unsigned char *buf, unsigned bs)
{
	memset(buf, 0, bs);
}

static void bump_tid(unsigned char *buf, unsigned bs)
{
	(void)bs;
	put_be32(buf + 8, get_be32(buf + 8) + 5);
}

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
		CHECK(patch_log_block(a, seq1 + 1, 2, variant ? bump_tid : zero_block),
		      "no commit block of tid %u found", seq1 + 1);
		copy_file(a, b);
		int rc = e2fsck("-fy", a);
		CHECK(rc == 0 || rc == 1, "e2fsck -fy exits %d", rc);
		check_expect(a, bs, s->e, s->n, variant ? "e2fsck, bad commit tid" : "e2fsck, torn");
		unsigned replayed = 0;
		char msg[256];
		errcode_t err = our_recover(b, &replayed, msg, sizeof(msg));
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
		err = our_recover(b, &replayed, msg, sizeof(msg));
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
	unsigned off;
	uint32_t val;
	errcode_t want;   /* 0: any error */
};

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
	const struct sbpatch p[] = {
		{ "bad magic", 0x00, 0x12345678, EXT2_ET_CORRUPT_JOURNAL_SB },
		{ "unknown type", 0x04, 9, EXT2_ET_JOURNAL_UNSUPP_VERSION },
		{ "block size", 0x0C, 4096, EXT2_ET_CORRUPT_JOURNAL_SB },
		{ "maxlen too big", 0x10, 0x7fffffff, EXT2_ET_CORRUPT_JOURNAL_SB },
		{ "first = 0", 0x14, 0, EXT2_ET_CORRUPT_JOURNAL_SB },
		{ "first past the end", 0x14, 5000, EXT2_ET_CORRUPT_JOURNAL_SB },
		{ "start past the end", 0x1C, 5000, EXT2_ET_CORRUPT_JOURNAL_SB },
		{ "64bit", 0x28, 2, EXT2_ET_UNSUPP_FEATURE },
		{ "csum v3", 0x28, 0x10, EXT2_ET_UNSUPP_FEATURE },
		{ "csum v2", 0x28, 0x8, EXT2_ET_UNSUPP_FEATURE },
		{ "async commit", 0x28, 0x4, EXT2_ET_UNSUPP_FEATURE },
		{ "unknown incompat", 0x28, 0x100, EXT2_ET_UNSUPP_FEATURE },
		{ "compat checksum", 0x24, 1, EXT2_ET_UNSUPP_FEATURE },
		{ "nr_users", 0x40, 1000, EXT2_ET_CORRUPT_JOURNAL_SB },
	};
	unsigned char *buf = malloc(bs);
	REQUIRE(buf, "oom");
	for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++) {
		copy_file(a, c);
		int fd = open(c, O_RDWR);
		REQUIRE(fd >= 0, "open");
		REQUIRE(pread(fd, buf, bs, (off_t)(jsb * bs)) == (ssize_t)bs, "read");
		put_be32(buf + p[i].off, p[i].val);
		REQUIRE(pwrite(fd, buf, bs, (off_t)(jsb * bs)) == (ssize_t)bs, "write");
		close(fd);
		struct img im = { 0 };
		snprintf(im.path, sizeof(im.path), "%s", c);
		img_open_fs(&im);
		char msg[256] = "";
		err = img_open_jbd(&im, msg, sizeof(msg));
		CHECK(err != 0 && im.j == NULL, "%s: jbd_open accepted it", p[i].what);
		CHECK(!p[i].want || err == p[i].want, "%s: error %s", p[i].what, error_message(err));
		CHECK(msg[0] != 0, "%s: no message", p[i].what);
		fprintf(stderr, "  %s -> %s: %s\n", p[i].what, error_message(err), msg);
		if (im.j)
			jbd_close(im.j);
		im.j = NULL;
		img_close(&im, false);
	}
	/* garbage in the log after a valid start: replay stops or fails, never
	 * crashes (run under ASan in the sanitizer build) */
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
	free(buf);
}

/* ---- journals others wrote ---- */

static bool gunzip_corpus(const char *name, const char *to)
{
	const char *root = getenv("RECON_CORPUS");
	char src[512];
	if (root)
		snprintf(src, sizeof(src), "%s/%s/image.gz", root, name);
	else if (getenv("RECON_SRC"))
		snprintf(src, sizeof(src), "%s/../shared/corpus/e2fsprogs-tests/%s/image.gz",
			 getenv("RECON_SRC"), name);
	else
		snprintf(src, sizeof(src), "/work/shared/corpus/e2fsprogs-tests/%s/image.gz", name);
	if (access(src, R_OK) != 0) {
		snprintf(src, sizeof(src), "/work/shared/corpus/e2fsprogs-tests/%s/image.gz", name);
		if (access(src, R_OK) != 0)
			return false;
	}
	return sh("zcat '%s' > '%s'", src, to) == 0;
}

/* Our replay and e2fsck's leave the same image.  strict: compared right
 * after e2fsck -E journal_only (which still clears orphans: only for images
 * without any); otherwise both are then run through e2fsck -fy at a fixed
 * clock (E2FSCK_TIME) and must converge to the same image. */
static void compare_replays(const char *a, const char *what, bool strict)
{
	char b[600];
	snprintf(b, sizeof(b), "%s.ours", a);
	copy_file(a, b);
	int rc = sh("E2FSCK_TIME=1700000000 e2fsck %s '%s' >'%s.fsck.log' 2>&1",
		    strict ? "-y -E journal_only" : "-fy", a, a);
	CHECK(rc == 0 || rc == 1, "%s: e2fsck exits %d", what, rc);
	unsigned replayed = 0;
	char msg[256] = "";
	errcode_t err = our_recover(b, &replayed, msg, sizeof(msg));
	CHECK(!err, "%s: jbd_recover: %s (%s)", what, error_message(err), msg);
	fprintf(stderr, "  %s: %u transactions replayed\n", what, replayed);
	if (!strict) {
		rc = sh("E2FSCK_TIME=1700000000 e2fsck -fy '%s' >'%s.fsck.log' 2>&1", b, b);
		CHECK(rc == 0 || rc == 1, "%s: e2fsck -fy after our replay exits %d", what, rc);
		CHECK(sh("grep -q 'recovering journal' '%s.fsck.log'", b) != 0,
		      "%s: e2fsck found a journal to recover after ours", what);
	}
	ext2_filsys fs;
	err = ext2fs_open2(b, NULL, EXT2_FLAG_64BITS, 0, 0, unix_io_manager, &fs);
	REQUIRE(!err, "open");
	unsigned bs = fs->blocksize;
	ext2fs_close_free(&fs);
	uint64_t skip[2];
	size_t d = compare_images(a, b, bs, skip, sb_blocks(bs, skip));
	CHECK(d == 0, "%s: %zu blocks differ between e2fsck's replay and ours", what, d);
	/* and what fsck thinks of both afterwards is the same */
	int ra = e2fsck("-fn", a), rb = e2fsck("-fn", b);
	CHECK(ra == rb, "%s: e2fsck -fn exits %d after e2fsck's replay, %d after ours", what, ra, rb);
}

static void test_corpus(void)
{
	/* f_journal: a damaged journal inode (its superblock backup maps it)
	 * and an orphan list */
	const char *replayable[] = { "f_journal", "f_jnl_32bit" };
	const bool strict[] = { false, true };
	const char *refused[] = { "f_jnl_64bit", "j_corrupt_sb_magic", "j_corrupt_commit_csum",
				  "j_corrupt_revoke_rcount", "j_recover_fast_commit" };
	int found = 0;
	for (size_t i = 0; i < sizeof(replayable) / sizeof(*replayable); i++) {
		char a[512];
		path_in(a, sizeof(a), replayable[i]);
		if (!gunzip_corpus(replayable[i], a))
			continue;
		found++;
		compare_replays(a, replayable[i], strict[i]);
	}
	for (size_t i = 0; i < sizeof(refused) / sizeof(*refused); i++) {
		char a[512];
		path_in(a, sizeof(a), refused[i]);
		if (!gunzip_corpus(refused[i], a))
			continue;
		found++;
		struct img im = { 0 };
		snprintf(im.path, sizeof(im.path), "%s", a);
		ext2_filsys fs;
		errcode_t err = ext2fs_open2(a, NULL, EXT2_FLAG_64BITS | EXT2_FLAG_RW, 0, 0,
					     unix_io_manager, &fs);
		if (err) {
			fprintf(stderr, "  %s: libext2fs refuses it (%s)\n", refused[i], error_message(err));
			continue;
		}
		ext2fs_close_free(&fs);
		img_open_fs(&im);
		char msg[256] = "";
		err = img_open_jbd(&im, msg, sizeof(msg));
		CHECK(err && msg[0], "%s: jbd_open accepted an unsupported journal", refused[i]);
		fprintf(stderr, "  %s: %s: %s\n", refused[i], error_message(err), msg);
		if (im.j)
			jbd_close(im.j);
		im.j = NULL;
		img_close(&im, false);
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
	if (sh("mount -t ext3 -o loop,commit=60 '%s' '%s'", a, mnt) != 0) {
		fprintf(stderr, "SKIP: mount failed\n");
		exit(77);
	}
	/* metadata churn: creates, a big directory; directories freed after
	 * their blocks were logged (the kernel revokes them), then file data
	 * filling most of the file system, so freed directory blocks are
	 * reused for data that a replay ignoring revokes would overwrite */
	int rc = sh("cd '%s' && mkdir d && for i in $(seq 1 400); do echo $i > d/f$i; done && "
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
	REQUIRE(sh("umount '%s'", mnt) == 0, "umount");
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
	REQUIRE(sh("debugfs -R logdump '%s' >'%s' 2>&1", a, dump) == 0, "logdump");
	CHECK(sh("grep -q 'revoke table' '%s'", dump) == 0, "the kernel's log has no revoke block (%s)",
	      dump);
	compare_replays(a, "kernel-made", true);
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

enum { CF = 96, CTX = 24 };

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
	struct jbd_dev jd = { &d, cdev_read, cdev_write, cdev_flush };
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
	err = our_recover(out, &replayed, msg, sizeof(msg));
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

/* An 8 MiB image whose journal superblock says the log is 80 blocks (e2fsck
 * and the kernel go by s_maxlen) so runs wrap around it often; known
 * contents in the free blocks the crash tests use; needs_recovery set, as
 * io/txn.c sets it durably before anything is logged. */
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
	blk64_t jsb = 0;
	REQUIRE(!ext2fs_bmap2(im.fs, im.fs->super->s_journal_inum, NULL, NULL, 0, 0, NULL, &jsb), "bmap");
	read_home(base, im.bs, jsb, buf);
	put_be32(buf + 0x10, 80);
	write_home(&im, jsb, buf);
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
 * but not yet flushed.  The cut loses both journal superblock writes and the
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
	struct jbd_dev jd = { &d, cdev_read, cdev_write, cdev_flush };
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
	err = jbd_log(im.j, t->blk, (const void *const *)t->data, t->n, NULL, 0);
	CHECK(err == EIO && d.crashed, "the second transaction did not reach the first one's blocks "
	      "(%s)", error_message(err));
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
	err = our_recover(out, &replayed, msg, sizeof(msg));
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
