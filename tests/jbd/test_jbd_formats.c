/*
 * tests/jbd/test_jbd_formats.c - io/jbd.c with the journal formats ext4
 * uses: 64-bit block numbers, checksums v1, v2 and v3, async commit.
 *   write-*: transactions we log in each format are replayed by e2fsck
 *     (which checks every checksum) exactly as we replay them, and parsed
 *     by debugfs logdump;
 *   kernel-*: the kernel replays them (as root);
 *   debugfs-*: journals debugfs writes (csum v3, 32- and 64-bit) are
 *     replayed by us, onto the disk and as a view, as e2fsck replays them;
 *   damaged-*: a logged block, a commit block or a descriptor of our csum v3
 *     log damaged: the replay onto the disk refuses the log and writes
 *     nothing, a view replays what e2fsck replays.
 *
 * Usage: test_jbd_formats NAME (see main); exit 0 pass, 77 skip, 1 fail.
 */
#include "jbd_util.h"
#include "jbd_tag.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct format {
	const char *name;
	uint32_t compat, incompat;
};

static const struct format formats[] = {
	{ "64bit", 0, JBD_INCOMPAT_REVOKE | JBD_INCOMPAT_64BIT },
	{ "csum-v1", JBD_COMPAT_CHECKSUM, JBD_INCOMPAT_REVOKE },
	{ "csum-v2", 0, JBD_INCOMPAT_REVOKE | JBD_INCOMPAT_CSUM_V2 },
	{ "csum-v2-64bit", 0, JBD_INCOMPAT_REVOKE | JBD_INCOMPAT_CSUM_V2 | JBD_INCOMPAT_64BIT },
	{ "csum-v3", 0, JBD_INCOMPAT_REVOKE | JBD_INCOMPAT_CSUM_V3 },
	{ "csum-v3-64bit", 0, JBD_INCOMPAT_REVOKE | JBD_INCOMPAT_CSUM_V3 | JBD_INCOMPAT_64BIT },
	{ "async-csum-v3", 0, JBD_INCOMPAT_REVOKE | JBD_INCOMPAT_CSUM_V3 | JBD_INCOMPAT_ASYNC },
};

static const struct format *find_format(const char *name)
{
	for (size_t i = 0; i < sizeof(formats) / sizeof(*formats); i++)
		if (!strcmp(formats[i].name, name))
			return &formats[i];
	return NULL;
}

/* Give the journal of the image at path the features of f (as the kernel
 * sets them when it mounts), with a valid superblock checksum. */
static void set_format(const char *path, unsigned bs, const struct format *f)
{
	uint64_t b = jsb_block(path);
	unsigned char *buf = malloc(bs);
	REQUIRE(buf, "oom");
	read_home(path, bs, b, buf);
	jbd_put_be32(buf + JSB_COMPAT, f->compat);
	jbd_put_be32(buf + JSB_INCOMPAT, f->incompat);
	if (f->incompat & (JBD_INCOMPAT_CSUM_V2 | JBD_INCOMPAT_CSUM_V3)) {
		buf[JSB_CSUM_TYPE] = JBD_CSUM_TYPE_CRC32C;
		jbd_put_be32(buf + JSB_CHECKSUM, jbd_sb_csum(buf));
	}
	int fd = open(path, O_RDWR);
	REQUIRE(fd >= 0, "open %s", path);
	REQUIRE(pwrite(fd, buf, bs, (off_t)(b * bs)) == (ssize_t)bs, "write journal superblock");
	close(fd);
	free(buf);
}

/* ---- our log in each format, replayed by e2fsck and by us ---- */

static void test_write(const struct format *f, unsigned bs)
{
	char a[512], b[512];
	path_in(a, sizeof(a), "w.img");
	path_in(b, sizeof(b), "w2.img");
	mkfs(a, bs, bs == 1024 ? 16 : 64, NULL);
	set_format(a, bs, f);
	struct scenario *s = malloc(sizeof(*s));
	REQUIRE(s, "oom");
	build_scenario(a, bs, s);
	check_logdump(a, s);
	copy_file(a, b);
	int rc = e2fsck("-fy", a);
	CHECK(rc == 0 || rc == 1, "%s: e2fsck -fy exits %d (log in %s.fsck.log)", f->name, rc, a);
	/* e2fsck says so when a checksum fails ("Journal checksum error",
	 * "Invalid checksum recovering ...", "transaction ... was corrupt") */
	CHECK(run_shell("grep -qiE 'checksum|corrupt' '%s.fsck.log'", a) != 0,
	      "%s: e2fsck finds our log's checksums wrong (%s.fsck.log)", f->name, a);
	verify_scenario(a, bs, s, "e2fsck replay");
	char msg[256] = "";
	unsigned replayed = 0;
	errcode_t err = our_recover(b, false, &replayed, msg, sizeof(msg));
	CHECK(!err, "%s: jbd_recover: %s (%s)", f->name, error_message(err), msg);
	CHECK(replayed == s->ntx, "%s: replayed %u transactions, logged %u", f->name, replayed, s->ntx);
	verify_scenario(b, bs, s, "jbd_recover");
	uint64_t skip[2];
	size_t d = compare_images(a, b, bs, skip, sb_blocks(bs, skip));
	CHECK(d == 0, "%s: %zu blocks differ between e2fsck's replay and ours", f->name, d);
	free(s);
}

static void test_kernel(const struct format *f, unsigned bs)
{
	if (!can_mount()) {
		fprintf(stderr, "SKIP: needs root and kernel ext4\n");
		exit(77);
	}
	char a[512], mnt[512];
	path_in(a, sizeof(a), "k.img");
	path_in(mnt, sizeof(mnt), "mnt");
	REQUIRE(mkdir(mnt, 0755) == 0, "mkdir");
	mkfs(a, bs, bs == 1024 ? 16 : 64, NULL);
	set_format(a, bs, f);
	struct scenario *s = malloc(sizeof(*s));
	REQUIRE(s, "oom");
	build_scenario(a, bs, s);
	if (run_shell("mount -t ext4 -o loop '%s' '%s'", a, mnt) != 0) {
		/* the kernel refuses a journal whose checksums fail: that is a
		 * failure, not a skip, once it mounts the plain format */
		fprintf(stderr, "  %s: the kernel refuses to mount it (dmesg):\n", f->name);
		run_shell("dmesg | tail -5 >&2");
		CHECK(0, "%s: the kernel does not replay our log", f->name);
		free(s);
		return;
	}
	REQUIRE(run_shell("umount '%s'", mnt) == 0, "umount %s", mnt);
	verify_scenario(a, bs, s, "kernel replay");
	free(s);
}

/* ---- journals debugfs writes ---- */

/* An ext4 image (metadata_csum, 64-bit or not) with three transactions
 * debugfs logged with checksums v3: blocks of a file, a revoke, and a
 * block logged after its revoke. */
static bool make_debugfs_log(const char *path, unsigned bs, bool wide)
{
	char data[600], cmds[600];
	snprintf(data, sizeof(data), "%s.data", path);
	snprintf(cmds, sizeof(cmds), "%s.cmds", path);
	REQUIRE(run_shell("head -c %u /dev/urandom >'%s'", 4 * bs, data) == 0, "data");
	REQUIRE(run_shell("rm -f '%s' && mke2fs -q -F -t ext4 -b %u -O metadata_csum,%s64bit '%s' %uM "
		   ">/dev/null 2>&1", path, bs, wide ? "" : "^", path, bs == 1024 ? 16u : 64u) == 0,
		"mke2fs");
	FILE *c = fopen(cmds, "w");
	REQUIRE(c, "cmds");
	fprintf(c, "jo -c\njw -b 3000,3001,3002,3003 %s\njc\n", data);
	fprintf(c, "jo\njw -r 3001\njc\n");
	fprintf(c, "jo\njw -b 3001,3500 %s\njc\n", data);
	fclose(c);
	if (run_shell("debugfs -w -f '%s' '%s' >/dev/null 2>&1", cmds, path) != 0)
		return false;
	return run_shell("dumpe2fs -h '%s' 2>/dev/null | grep -q 'journal_checksum_v3'", path) == 0 &&
	       run_shell("dumpe2fs -h '%s' 2>/dev/null | grep -q needs_recovery", path) == 0;
}

static void test_debugfs(unsigned bs, bool wide)
{
	char a[512], v[600];
	path_in(a, sizeof(a), "d.img");
	if (!make_debugfs_log(a, bs, wide)) {
		fprintf(stderr, "SKIP: debugfs cannot write a checksummed journal\n");
		exit(77);
	}
	snprintf(v, sizeof(v), "%s.view", a);
	copy_file(a, v);
	compare_replays(a, wide ? "debugfs csum v3 64bit" : "debugfs csum v3", CMP_STRICT);
	compare_replays(v, wide ? "debugfs csum v3 64bit" : "debugfs csum v3", CMP_STRICT | CMP_VIEW);
}

/* ---- damaged checksums ---- */

static void flip_byte(unsigned char *buf, unsigned bs)
{
	buf[bs / 2] ^= 0x5a;
}

static struct jbd_fmt stale_fmt;

/* The commit block rewritten with commit time 1 and its checksum valid. */
static void commit_time_one(unsigned char *buf, unsigned bs)
{
	(void)bs;
	jbd_commit_put(&stale_fmt, buf, get_be32(buf + 8), 1, 0, 0);
}

/* Three transactions of our csum v3 log; one damaged as `what` says; the
 * replay onto the disk refuses it untouched, a view replays as e2fsck.
 * "stale": the second's descriptor damaged and its commit time older than
 * the first's, as blocks of an earlier log look: the log ends there, no
 * error, both replays as e2fsck's. */
static void test_damaged(const char *what)
{
	const unsigned bs = 1024;
	char a[512], b[600], v[600];
	path_in(a, sizeof(a), "x.img");
	mkfs(a, bs, 16, NULL);
	set_format(a, bs, find_format("csum-v3-64bit"));
	struct img im = { 0 };
	img_open(&im, a);
	uint64_t F[30];
	REQUIRE(free_blocks(im.fs, F, 30) == 30, "free");
	struct txb *t = calloc(1, sizeof(*t));
	REQUIRE(t, "oom");
	for (unsigned v2 = 1; v2 <= 3; v2++) {
		for (int i = 0; i < 10; i++)
			tx_add(t, bs, F[(v2 - 1) * 5 + i], v2, i == 4);
		tx_log(&im, NULL, t, NULL, 0);
	}
	free(t);
	img_close(&im, true);
	uint32_t start, seq;
	jsb_state(a, &start, &seq);
	if (!strcmp(what, "block"))
		CHECK(patch_log_block(a, seq + 1, JBD_DESCRIPTOR, 1, flip_byte),
		      "no descriptor of transaction %u", seq + 1);
	else if (!strcmp(what, "commit"))
		CHECK(patch_log_block(a, seq + 1, JBD_COMMIT, 0, flip_byte), "no commit block");
	else if (!strcmp(what, "descriptor"))
		CHECK(patch_log_block(a, seq, JBD_DESCRIPTOR, 0, flip_byte), "no descriptor");
	else {
		unsigned char *jsb = malloc(bs);
		REQUIRE(jsb, "oom");
		read_home(a, bs, jsb_block(a), jsb);
		jbd_fmt_init(&stale_fmt, bs, jsb);
		free(jsb);
		CHECK(patch_log_block(a, seq + 1, JBD_DESCRIPTOR, 0, flip_byte) &&
		      patch_log_block(a, seq + 1, JBD_COMMIT, 0, commit_time_one), "no transaction 2");
	}
	snprintf(b, sizeof(b), "%s.disk", a);
	snprintf(v, sizeof(v), "%s.view", a);
	copy_file(a, b);
	copy_file(a, v);
	if (!strcmp(what, "stale")) {
		compare_replays(b, what, CMP_STRICT);
		compare_replays(v, what, CMP_STRICT | CMP_VIEW);
		return;
	}
	unsigned replayed = 0;
	char msg[256] = "";
	errcode_t err = our_recover(b, false, &replayed, msg, sizeof(msg));
	CHECK(err == EXT2_ET_BAD_CRC, "damaged %s: the disk replay gives %s", what,
	      err ? error_message(err) : "no error");
	CHECK(run_shell("cmp -s '%s' '%s'", a, b) == 0, "damaged %s: the refused replay wrote", what);
	compare_replays(v, what, CMP_STRICT | CMP_VIEW | CMP_SKIP_JSB | CMP_ANY_EXIT);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s write-FORMAT-1k|write-FORMAT-4k|kernel-FORMAT|debugfs-1k|"
				"debugfs-4k|debugfs-32bit|damaged-block|damaged-commit|"
				"damaged-descriptor|damaged-stale\n", argv[0]);
		return 2;
	}
	add_error_table(&et_ext2_error_table);
	make_scratch();
	const char *t = argv[1];
	char fname[64];
	const struct format *f = NULL;
	unsigned bs = 0;
	if (sscanf(t, "write-%63[a-z0-9-]", fname) == 1) {
		size_t n = strlen(fname);
		bs = n > 3 && !strcmp(fname + n - 3, "-4k") ? 4096 : 1024;
		if (n > 3 && fname[n - 1] == 'k')
			fname[n - 3] = 0;
		f = find_format(fname);
	}
	if (f && bs)
		test_write(f, bs);
	else if (!strncmp(t, "kernel-", 7) && find_format(t + 7))
		test_kernel(find_format(t + 7), 4096);
	else if (!strcmp(t, "debugfs-1k"))
		test_debugfs(1024, true);
	else if (!strcmp(t, "debugfs-4k"))
		test_debugfs(4096, true);
	else if (!strcmp(t, "debugfs-32bit"))
		test_debugfs(1024, false);
	else if (!strncmp(t, "damaged-", 8))
		test_damaged(t + 8);
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
