/*
 * tests/jbd/jbd_util.c - what the jbd tests share (see jbd_util.h).
 */
#include "jbd_util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int failures;
char scratch[256];

uint32_t get_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

void path_in(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", scratch, name);
}

void make_scratch(void)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(scratch, sizeof(scratch), "%s/test_jbd.XXXXXX", tmp ? tmp : "/tmp");
	REQUIRE(mkdtemp(scratch), "mkdtemp: %s", strerror(errno));
}

void remove_scratch(void)
{
	if (scratch[0])
		run_shell("rm -rf '%s'", scratch);
}

/* ---- a jbd_dev over an image file ---- */


errcode_t fdev_read(void *ctx, uint64_t blk, void *buf)
{
	struct fdev *d = ctx;
	ssize_t r = pread(d->fd, buf, d->bs, (off_t)(blk * d->bs));
	if (r < 0)
		return errno;
	if ((size_t)r != d->bs)
		return EXT2_ET_SHORT_READ;
	return 0;
}

errcode_t fdev_write(void *ctx, uint64_t blk, unsigned count, const void *buf)
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

errcode_t fdev_flush(void *ctx)
{
	struct fdev *d = ctx;
	d->flushes++;
	return fdatasync(d->fd) ? errno : 0;
}


void img_open_fs(struct img *im)
{
	errcode_t err = ext2fs_open2(im->path, NULL, EXT2_FLAG_RW | EXT2_FLAG_64BITS, 0, 0,
				     unix_io_manager, &im->fs);
	REQUIRE(!err, "ext2fs_open2 %s: %s", im->path, error_message(err));
	im->bs = im->fs->blocksize;
	im->d.fd = open(im->path, O_RDWR);
	REQUIRE(im->d.fd >= 0, "open %s: %s", im->path, strerror(errno));
	im->d.bs = im->bs;
	im->jd = (struct jbd_dev){ &im->d, fdev_read, fdev_write, fdev_flush, false };
}

errcode_t img_open_jbd(struct img *im, char *msg, size_t msglen)
{
	return jbd_open(im->fs, &im->jd, &im->j, msg, msglen);
}

void img_open(struct img *im, const char *path)
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
void img_close(struct img *im, bool set_recover)
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

void read_home(const char *path, unsigned bs, uint64_t blk, void *buf)
{
	int fd = open(path, O_RDONLY);
	REQUIRE(fd >= 0, "open %s", path);
	REQUIRE(pread(fd, buf, bs, (off_t)(blk * bs)) == (ssize_t)bs, "pread %s", path);
	close(fd);
}

void write_home(struct img *im, uint64_t blk, const void *buf)
{
	REQUIRE(fdev_write(&im->d, blk, 1, buf) == 0, "write home %" PRIu64, blk);
}

void mkfs(const char *path, unsigned bs, unsigned size_mb, const char *extra)
{
	REQUIRE(run_shell("rm -f '%s' && mke2fs -q -F -t ext3 -b %u %s '%s' %uM >/dev/null 2>&1", path, bs,
		   extra ? extra : "", path, size_mb) == 0,
		"mke2fs %s", path);
}

/* Deterministic contents for block blk, version v; escaped ones start with
 * the journal magic. */
void pattern(unsigned char *buf, unsigned bs, uint64_t blk, unsigned v, bool escaped)
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
size_t free_blocks(ext2_filsys fs, uint64_t *out, size_t n)
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


int check_expect(const char *path, unsigned bs, const struct expect *e, size_t n,
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
size_t compare_images(const char *a, const char *b, unsigned bs, const uint64_t *skip,
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

void copy_file(const char *from, const char *to)
{
	REQUIRE(run_shell("cp --sparse=always '%s' '%s'", from, to) == 0, "cp %s %s", from, to);
}

errcode_t our_recover(const char *path, bool view, unsigned *replayed, char *msg, size_t msglen)
{
	struct img im = { 0 };
	snprintf(im.path, sizeof(im.path), "%s", path);
	img_open_fs(&im);
	im.jd.view = view;
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
	/* clear the flag on disk without libext2fs rewriting its (stale) copies;
	 * its checksum (metadata_csum) from a handle on the replayed image */
	int fd = open(path, O_RDWR);
	REQUIRE(fd >= 0, "open");
	struct ext2_super_block sb;
	REQUIRE(pread(fd, &sb, sizeof(sb), SUPERBLOCK_OFFSET) == sizeof(sb), "read sb");
	sb.s_feature_incompat &= ext2fs_cpu_to_le32(~(uint32_t)EXT3_FEATURE_INCOMPAT_RECOVER);
	ext2_filsys fs;
	err = ext2fs_open2(path, NULL, EXT2_FLAG_64BITS | EXT2_FLAG_IGNORE_CSUM_ERRORS, 0, 0,
			   unix_io_manager, &fs);
	REQUIRE(!err, "reopen %s: %s", path, error_message(err));
	ext2fs_superblock_csum_set(fs, &sb);
	ext2fs_close_free(&fs);
	REQUIRE(pwrite(fd, &sb, sizeof(sb), SUPERBLOCK_OFFSET) == sizeof(sb), "write sb");
	close(fd);
	return 0;
}

/* The journal superblock's (s_start, s_sequence) as on disk. */
void jsb_state(const char *path, uint32_t *start, uint32_t *seq)
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

int e2fsck(const char *opts, const char *path)
{
	return run_shell("e2fsck %s '%s' >'%s.fsck.log' 2>&1", opts, path, path);
}

/* ---- scenario: several transactions, escapes, revokes, a big one ---- */


void expect_set(struct scenario *s, uint64_t blk, unsigned v, bool esc)
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


void tx_add(struct txb *t, unsigned bs, uint64_t blk, unsigned v, bool esc)
{
	t->data[t->n] = malloc(bs);
	REQUIRE(t->data[t->n], "oom");
	pattern(t->data[t->n], bs, blk, v, esc);
	t->blk[t->n++] = blk;
}

void tx_log(struct img *im, struct scenario *s, struct txb *t, const uint64_t *rv, size_t nrv)
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
void build_scenario(const char *path, unsigned bs, struct scenario *s)
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

void verify_scenario(const char *path, unsigned bs, const struct scenario *s, const char *who)
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

void check_logdump(const char *path, const struct scenario *s)
{
	char out[600];
	snprintf(out, sizeof(out), "%s.logdump", path);
	REQUIRE(run_shell("debugfs -R 'logdump -a' '%s' >'%s' 2>&1", path, out) == 0, "debugfs logdump");
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
size_t sb_blocks(unsigned bs, uint64_t *skip)
{
	skip[0] = SUPERBLOCK_OFFSET / bs;
	return 1;
}

bool can_mount(void)
{
	if (geteuid() != 0)
		return false;
	return run_shell("grep -qw ext3 /proc/filesystems || modprobe ext3 >/dev/null 2>&1 || "
		  "grep -qw ext4 /proc/filesystems") == 0;
}

/* Overwrite, via fn, the log block `after` blocks past the first log block
 * of transaction tid whose type is `type` (after 0: that block itself). */
bool patch_log_block(const char *path, uint32_t tid, uint32_t type, unsigned after,
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
		if (get_be32(buf) != JBD_MAGIC || get_be32(buf + 4) != type || get_be32(buf + 8) != tid)
			continue;
		if (after) {
			REQUIRE(!ext2fs_bmap2(fs, fs->super->s_journal_inum, NULL, NULL, 0, l + after,
					      NULL, &p) && p, "bmap");
			REQUIRE(pread(fd, buf, bs, (off_t)(p * bs)) == (ssize_t)bs, "read");
		}
		fn(buf, bs);
		REQUIRE(pwrite(fd, buf, bs, (off_t)(p * bs)) == (ssize_t)bs, "write");
		done = true;
	}
	close(fd);
	free(buf);
	ext2fs_close_free(&fs);
	return done;
}

void zero_block(unsigned char *buf, unsigned bs)
{
	memset(buf, 0, bs);
}

void bump_tid(unsigned char *buf, unsigned bs)
{
	(void)bs;
	put_be32(buf + 8, get_be32(buf + 8) + 5);
}

bool gunzip_corpus(const char *name, const char *to)
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
	return run_shell("zcat '%s' > '%s'", src, to) == 0;
}

/* The journal superblock's block of the image at path. */
uint64_t jsb_block(const char *path)
{
	ext2_filsys fs;
	errcode_t err = ext2fs_open2(path, NULL, EXT2_FLAG_64BITS | EXT2_FLAG_IGNORE_CSUM_ERRORS, 0, 0,
				     unix_io_manager, &fs);
	REQUIRE(!err, "open %s: %s", path, error_message(err));
	blk64_t pblk = 0;
	err = ext2fs_bmap2(fs, fs->super->s_journal_inum, NULL, NULL, 0, 0, NULL, &pblk);
	REQUIRE(!err && pblk, "bmap journal");
	ext2fs_close_free(&fs);
	return pblk;
}

void compare_replays(const char *a, const char *what, unsigned how)
{
	bool strict = how & CMP_STRICT;
	char b[600];
	snprintf(b, sizeof(b), "%s.ours", a);
	copy_file(a, b);
	uint64_t skip[3];
	size_t nskip = 0;
	if (how & CMP_SKIP_JSB)
		skip[nskip++] = jsb_block(a);
	int rc = run_shell("E2FSCK_TIME=1700000000 e2fsck %s '%s' >'%s.fsck.log' 2>&1",
		    strict ? "-y -E journal_only" : "-fy", a, a);
	CHECK(rc == 0 || rc == 1 || (how & CMP_ANY_EXIT), "%s: e2fsck exits %d", what, rc);
	unsigned replayed = 0;
	char msg[256] = "";
	errcode_t err = our_recover(b, how & CMP_VIEW, &replayed, msg, sizeof(msg));
	CHECK(!err, "%s: jbd_recover: %s (%s)", what, error_message(err), msg);
	fprintf(stderr, "  %s: %u transactions replayed%s\n", what, replayed,
		how & CMP_VIEW ? " (view)" : "");
	if (!strict) {
		rc = run_shell("E2FSCK_TIME=1700000000 e2fsck -fy '%s' >'%s.fsck.log' 2>&1", b, b);
		CHECK(rc == 0 || rc == 1, "%s: e2fsck -fy after our replay exits %d", what, rc);
		CHECK(run_shell("grep -q 'recovering journal' '%s.fsck.log'", b) != 0,
		      "%s: e2fsck found a journal to recover after ours", what);
	}
	ext2_filsys fs;
	err = ext2fs_open2(b, NULL, EXT2_FLAG_64BITS | EXT2_FLAG_IGNORE_CSUM_ERRORS, 0, 0,
			   unix_io_manager, &fs);
	REQUIRE(!err, "open");
	unsigned bs = fs->blocksize;
	ext2fs_close_free(&fs);
	nskip += sb_blocks(bs, skip + nskip);
	size_t d = compare_images(a, b, bs, skip, nskip);
	CHECK(d == 0, "%s: %zu blocks differ between e2fsck's replay and ours", what, d);
	/* and what fsck thinks of both afterwards is the same */
	int ra = e2fsck("-fn", a), rb = e2fsck("-fn", b);
	CHECK(ra == rb, "%s: e2fsck -fn exits %d after e2fsck's replay, %d after ours", what, ra, rb);
}
