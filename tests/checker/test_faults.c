/*
 * tests/checker/test_faults.c - the checker's error paths, reached by
 * injected failures (tests/common/fault_inject.h):
 *
 *   test_faults alloc [ext3|ext4]   the Nth allocation fails, N = 1, 2, ...
 *   test_faults read [ext3|ext4]    the Nth read of the device fails (-EIO)
 *
 * The operation: attach to a real image (mke2fs -d from a small tree, ext3
 * and ext4, its directories indexed by e2fsck -D), judge it whole
 * (chk_scan), check a legitimate transaction (the blocks debugfs changed in
 * a copy: directories made, files written and removed, entries added to and
 * removed from an indexed directory, a symlink, a hole punched in a sparse
 * file), advance to it and judge the result whole; then check a transaction
 * that must be rejected (a block bitmap that frees the superblock).  It runs
 * once per N until it completes without reaching the Nth call.
 *
 * What each run must show: every call returns 0 or the injected error
 * (-ENOMEM, -EIO) and nothing else; an attach that fails says why in err;
 * a check that returns 0 approves (the transaction is legitimate: a failure
 * must never read as a violation); a scan that returns 0 finds nothing; a
 * call that failed leaves the state as it was, so the same call made again
 * with nothing failing succeeds and the rest of the operation goes on to
 * approve; the bad transaction is never approved.  Leaks: the ASan build runs LeakSanitizer after every run.
 * Exit 0 pass, 1 fail, 77 skip (no mke2fs/debugfs).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checker.h"
#include "fault_inject.h"
#include "test_util.h"

/* LeakSanitizer's check on demand, in the ASan build (weak: absent otherwise) */
int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

static char scratch[64];
static int failures;

struct image {
	uint8_t *p;
	size_t n;
};

/* The read callback's device: the image in memory its context points to
 * (the before image, the after image once the transaction is advanced to); the Nth read fails when
 * FAULT_IO is armed (reads are counted through this callback, not pread). */
static unsigned long read_target, read_calls;
static bool read_fired;

static int mem_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	const struct image *m = *(const struct image **)ctx;

	if (read_target && ++read_calls == read_target) {
		read_fired = true;
		return -EIO;
	}
	if (off > m->n || len > m->n - off)
		return -EIO;
	memcpy(buf, m->p + off, len);
	return 0;
}

static void slurp(const char *path, struct image *img)
{
	FILE *f = fopen(path, "rb");

	TEST_REQUIRE(f, "open %s", path);
	fseek(f, 0, SEEK_END);
	img->n = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	img->p = malloc(img->n);
	TEST_REQUIRE(img->p && fread(img->p, 1, img->n, f) == img->n, "read %s", path);
	fclose(f);
}

/* A before image and the after image debugfs made of a copy. */
static void make_pair(const char *type, struct image *before, struct image *after)
{
	char b[128], a[128];

	snprintf(b, sizeof(b), "%s/%s.img", scratch, type);
	snprintf(a, sizeof(a), "%s/%s.after", scratch, type);
	/* files with indirect blocks, a sparse file with an extent tree block
	 * (ext4, which has an orphan file too), directories e2fsck -D indexes
	 * (htree; deep/'s 600 names of 200 characters fill about 150 leaves,
	 * more than a 1 KiB root holds, so its tree has two levels); then
	 * debugfs adds to and removes from each kind, and gives a file an
	 * xattr too large for its inode (an xattr block) */
	if (run_shell("cd '%s' && rm -rf src && mkdir -p src/a/b src/c src/h && "
		      "for i in $(seq 1 40); do head -c $((i * 700)) /dev/urandom >src/a/f$i; done && "
		      "for i in $(seq 1 400); do echo $i >src/h/entry_with_a_longish_name_$i; done && "
		      "mkdir src/deep && for i in $(seq 1 600); do : >src/deep/$(printf %%0200d $i); done && "
		      "for i in $(seq 0 9); do "
		      "dd if=/dev/urandom of=src/sparse bs=1024 count=2 seek=$((i * 20)) conv=notrunc && "
		      "dd if=/dev/urandom of=src/sparse2 bs=1024 count=1 seek=$((i * 10)) conv=notrunc; "
		      "done 2>/dev/null && "
		      "head -c 300000 /dev/urandom >src/big && ln -s a/f1 src/link && "
		      "head -c 30000 /dev/urandom >newdata && "
		      "mke2fs -q -F -t %s %s -b 1024 -d src '%s' 8192 >/dev/null 2>&1 && "
		      "{ e2fsck -fyD '%s' >/dev/null 2>&1; [ $? -le 1 ]; } && cp '%s' '%s' && "
		      "printf 'mkdir c/new\\nwrite newdata c/new/data\\nrm a/f3\\nrm big\\n"
		      "symlink c/sl /a/b\\nwrite newdata h/brand_new_entry\\n"
		      "rm h/entry_with_a_longish_name_7\\nmkdir h/subdir_new\\n"
		      "punch sparse 40 45\\nrm sparse2\\n"
		      "write newdata deep/a_new_name_in_a_two_level_tree\\n"
		      "rm deep/%%0200d\\n' 77 >cmds && "
		      "printf 'ea_set a/f2 user.note %%0600d\\n' 0 >>cmds && "
		      "debugfs -w -f cmds '%s' >/dev/null 2>&1", scratch, type,
		      strcmp(type, "ext4") ? "" : "-O orphan_file", b, b, b, a, a) != 0) {
		fprintf(stderr, "mke2fs -d, e2fsck -D or debugfs failed\n");
		exit(77);
	}
	TEST_REQUIRE(e2fsck_fn(b, scratch) == 0, "the before image %s is inconsistent", b);
	TEST_REQUIRE(e2fsck_fn(a, scratch) == 0, "debugfs left %s inconsistent", a);
	slurp(b, before);
	slurp(a, after);
	TEST_REQUIRE(before->n == after->n, "image sizes");
}

/* Arm the failure of the nth call of the kind under test (0: none). */
static void arm(bool alloc, unsigned long n)
{
	if (alloc) {
		fault_arm(FAULT_ALLOC, n);
	} else {
		if (n) {
			read_calls = 0;
			read_fired = false;
		}
		read_target = n;
	}
}

static bool fired(bool alloc)
{
	return alloc ? fault_fired(FAULT_ALLOC) : read_fired;
}

/* A call's result under injection: 0 or the injected error; a failure is
 * retried with nothing failing (*again).  False when the run must stop. */
static bool outcome(const char *call, int r, int injected, unsigned long n, bool *again)
{
	*again = false;
	if (r == 0)
		return true;
	if (r != injected) {
		TEST_CHECK(0, "N=%lu: %s returned %d (%s), not the injected %d", n, call, r,
			   strerror(-r), injected);
		return false;
	}
	*again = true;
	return true;
}

/* A verdict that must approve; frees it. */
static void expect_ok(const char *call, struct chk_verdict *v, unsigned long n)
{
	if (!chk_verdict_ok(v)) {
		TEST_CHECK(0, "N=%lu: %s rejected a legitimate state under injection", n, call);
		for (size_t i = 0; i < chk_verdict_nviolations(v); i++)
			fprintf(stderr, "   %s: %s\n", chk_verdict_violation(v, i)->inv->id,
				chk_verdict_violation(v, i)->detail);
	}
	chk_verdict_free(v);
}

/* A transaction that must be rejected, checked against the after image:
 * group 0's block bitmap with the superblock's bit cleared.  A failure may
 * make the check fail (the injected error, or the same rejection when
 * checked again), never approve. */
static void check_rejected(struct chk_fs *fs, const struct image *after, bool alloc, unsigned long n)
{
	uint32_t bs = chk_block_size(fs), first = bs == 1024 ? 1 : 0;
	const uint8_t *gd = after->p + (size_t)(first + 1) * bs;
	uint32_t bbitmap = (uint32_t)gd[0] | (uint32_t)gd[1] << 8 | (uint32_t)gd[2] << 16 | (uint32_t)gd[3] << 24;
	uint8_t bad[4096];   /* not malloc: the test's own allocations are counted too */
	struct chk_verdict *v = NULL;
	bool again;

	TEST_REQUIRE(bs <= sizeof(bad) && (size_t)bbitmap * bs + bs <= after->n, "block bitmap");
	memcpy(bad, after->p + (size_t)bbitmap * bs, bs);
	bad[0] &= (uint8_t)~1u;
	struct chk_write w = { (uint64_t)bbitmap * bs, bs, bad };
	int r = chk_check(fs, &w, 1, &v);
	if (outcome("chk_check (a bad transaction)", r, alloc ? -ENOMEM : -EIO, n, &again) && again) {
		arm(alloc, 0);
		r = chk_check(fs, &w, 1, &v);
		TEST_CHECK(r == 0, "N=%lu: chk_check (a bad transaction) again: %d", n, r);
	}
	if (!r) {
		TEST_CHECK(!chk_verdict_ok(v), "N=%lu: a failure turned a rejection into an approval", n);
		chk_verdict_free(v);
	}
}

/* One run with the nth call failing.  Returns whether the failure fired. */
static bool run_once(const struct image *before, const struct image *after,
		     const struct chk_write *w, size_t nw, bool alloc, unsigned long n)
{
	const struct image *device = before;
	int injected = alloc ? -ENOMEM : -EIO;
	struct chk_options opt = { .cache_bytes = 64 * 1024 };  /* small: misses read again */
	struct chk_fs *fs = NULL;
	struct chk_verdict *v = NULL;
	char err[256] = "";
	bool again, hit;
	int r;

	arm(alloc, n);
	r = chk_attach(&fs, mem_read, &device, &opt, err, sizeof(err));
	/* a read error on the last block reads as a device too short for
	 * s_blocks_count: the callback cannot tell them apart (-EINVAL) */
	if (r == -EINVAL && !alloc && strstr(err, "reaches past the end of the device"))
		r = injected;
	if (r) {
		outcome("chk_attach", r, injected, n, &again);
		TEST_CHECK(!again || err[0], "N=%lu: chk_attach failed without a message", n);
		TEST_CHECK(!fs, "N=%lu: a failed chk_attach handed out a handle", n);
		goto out;
	}
	r = chk_scan(fs, &v);
	if (!outcome("chk_scan (before)", r, injected, n, &again))
		goto out;
	if (again) {
		arm(alloc, 0);
		r = chk_scan(fs, &v);
		TEST_CHECK(r == 0, "N=%lu: chk_scan again: %d", n, r);
	}
	if (!r)
		expect_ok("chk_scan (before)", v, n);

	r = chk_check(fs, w, nw, &v);
	if (!outcome("chk_check", r, injected, n, &again))
		goto out;
	if (again) {
		arm(alloc, 0);
		r = chk_check(fs, w, nw, &v);
		TEST_CHECK(r == 0, "N=%lu: chk_check again: %d", n, r);
		if (r)
			goto out;
	}
	r = chk_advance(fs, v);
	if (outcome("chk_advance", r, injected, n, &again) && again) {
		arm(alloc, 0);
		r = chk_advance(fs, v);
		TEST_CHECK(r == 0, "N=%lu: chk_advance again: %d", n, r);
	}
	expect_ok("chk_check", v, n);
	if (r)
		goto out;
	device = after;   /* the transaction is written */

	r = chk_scan(fs, &v);
	if (!outcome("chk_scan (after)", r, injected, n, &again))
		goto out;
	if (again) {
		arm(alloc, 0);
		r = chk_scan(fs, &v);
		TEST_CHECK(r == 0, "N=%lu: chk_scan again: %d", n, r);
	}
	if (!r)
		expect_ok("chk_scan (after)", v, n);
	check_rejected(fs, after, alloc, n);
out:
	hit = fired(alloc);
	arm(alloc, 0);
	chk_detach(fs);
	return hit;
}

static void sweep(const char *type, bool alloc)
{
	struct image before, after;

	make_pair(type, &before, &after);
	uint32_t bs = 1024;
	struct chk_write *w = malloc((before.n / bs) * sizeof(*w));
	size_t nw = 0;
	TEST_REQUIRE(w, "malloc");
	for (size_t off = 0; off < before.n; off += bs)
		if (memcmp(before.p + off, after.p + off, bs))
			w[nw++] = (struct chk_write){ off, bs, after.p + off };

	/* the operation with nothing failing must approve, or the sweep means nothing */
	int before_failures = failures;
	TEST_REQUIRE(!run_once(&before, &after, w, nw, alloc, 0) && failures == before_failures,
		     "%s: the operation fails with nothing injected", type);
	/* FAULT_N=n: that run alone, to debug (gdb: break fault_injected) */
	unsigned long n = getenv("FAULT_N") ? strtoul(getenv("FAULT_N"), NULL, 10) : 0;
	if (n) {
		run_once(&before, &after, w, nw, alloc, n);
		goto done;
	}
	/* a leak stays unreachable: one leak check per 16 runs finds it, the
	 * report's stack says where */
	for (n = 1; failures == before_failures; n++) {
		bool hit = run_once(&before, &after, w, nw, alloc, n);
		if ((!hit || n % 16 == 0) && __lsan_do_recoverable_leak_check &&
		    __lsan_do_recoverable_leak_check()) {
			TEST_CHECK(0, "%s: leaks in runs up to N=%lu (above)", type, n);
			break;
		}
		if (!hit)
			break;
	}
	printf("%s: %s: %lu injection points, %zu blocks in the transaction\n", type,
	       alloc ? "allocation failures" : "read errors", n - 1, nw);
done:
	free(w);
	free(before.p);
	free(after.p);
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3 || (strcmp(argv[1], "alloc") && strcmp(argv[1], "read"))) {
		fprintf(stderr, "usage: %s alloc|read [ext3|ext4]\n", argv[0]);
		return 2;
	}
	snprintf(scratch, sizeof(scratch), "/tmp/chkfault.XXXXXX");
	TEST_REQUIRE(mkdtemp(scratch), "mkdtemp");
	bool alloc = !strcmp(argv[1], "alloc");
	const char *only = argc == 3 ? argv[2] : NULL;
	if (!only || !strcmp(only, "ext3"))
		sweep("ext3", alloc);
	if (!failures && (!only || !strcmp(only, "ext4")))
		sweep("ext4", alloc);
	run_shell("rm -rf '%s'", scratch);
	return failures ? 1 : 0;
}
