/*
 * tests/checker/test_uninit_reuse.c - a group leaves BLOCK_UNINIT with its
 * bitmap written exactly as the flag stood for it (blocks taken and freed
 * in one transaction: the made-up bitmap, backup superblock and descriptor
 * blocks marked), then a later transaction allocates in that group.
 *
 * The first write changes nothing the checker approved, but it changes the
 * disk's bytes (zeros before: mke2fs never wrote the bitmap); the second
 * transaction's bitmap must be diffed against those bytes, not against the
 * zeros the checker read before.  Both transitions are made by libext2fs
 * (debugfs), pass e2fsck -fn, and must be approved by one attached checker.
 *
 *   test_uninit_reuse        exit 0 pass, 1 fail, 77 skip (no mke2fs/debugfs)
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checker.h"
#include "test_util.h"

static int failures;
static char dir[64];

/* Judge the step a -> b (the blocks that differ, whole) and advance on
 * approval; prints the violations of a rejection. */
static void step(struct chk_fs *fs, const char *name, const uint8_t *a, const uint8_t *b, size_t n)
{
	uint32_t bs = chk_block_size(fs);
	size_t nw = 0;
	struct chk_write *w = malloc((n / bs) * sizeof(*w));
	TEST_REQUIRE(w, "out of memory");
	for (size_t off = 0; off < n; off += bs)
		if (memcmp(a + off, b + off, bs))
			w[nw++] = (struct chk_write){ off, bs, b + off };
	struct chk_verdict *v = NULL;
	int r = chk_check(fs, w, nw, &v);
	free(w);
	TEST_REQUIRE(r == 0, "%s: chk_check: %s", name, strerror(-r));
	TEST_CHECK(chk_verdict_ok(v), "%s: rejected", name);
	for (size_t i = 0; i < chk_verdict_nviolations(v) && i < 5; i++)
		fprintf(stderr, "   %s: %s\n", chk_verdict_violation(v, i)->inv->id, chk_verdict_violation(v, i)->detail);
	if (chk_verdict_ok(v))
		TEST_REQUIRE(chk_advance(fs, v) == 0, "%s: chk_advance", name);
	chk_verdict_free(v);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/chk-uninit-XXXXXX");
	TEST_REQUIRE(mkdtemp(dir), "mkdtemp");
	char img[3][128];
	for (int i = 0; i < 3; i++)
		snprintf(img[i], sizeof(img[i]), "%s/s%d.img", dir, i);
	/* 1 KiB blocks, 64 MiB: group 1 holds a backup superblock, descriptor
	 * and reserved descriptor blocks, and starts BLOCK_UNINIT */
	make_image_or_skip(img[0], "-t ext4 -b 1024", 64 * 1024);
	if (run_shell("dumpe2fs %s 2>/dev/null | grep -q '^Group 1: .*BLOCK_UNINIT'", img[0])) {
		fprintf(stderr, "SKIP: mke2fs left group 1 initialised\n");
		return 77;
	}
	/* step 1: the flag cleared; a block taken and freed makes libext2fs
	 * write the bitmap it made up.  Step 2: a 6 MB file fills group 0's
	 * free blocks and goes on into group 1. */
	TEST_REQUIRE(run_shell("cp %s %s && printf 'set_bg 1 flags 5\\nset_bg 1 checksum calc\\n"
			       "setb 9000\\nfreeb 9000\\n' >%s/c1 && debugfs -w -f %s/c1 %s >/dev/null 2>&1 && "
			       "head -c 6000000 /dev/urandom >%s/data && cp %s %s && "
			       "debugfs -w -R 'write %s/data f' %s >/dev/null 2>&1",
			       img[0], img[1], dir, dir, img[1], dir, img[1], img[2], dir, img[2]) == 0,
		     "debugfs steps");
	TEST_REQUIRE(run_shell("dumpe2fs %s 2>/dev/null | grep '^Group 1: ' | grep -vq BLOCK_UNINIT", img[1]) == 0,
		     "step 1 left group 1 BLOCK_UNINIT");
	TEST_REQUIRE(run_shell("debugfs -R 'ex f' %s 2>/dev/null | awk '$8 > 8193 && $8 < 16385 { f = 1 } END { exit !f }'",
			       img[2]) == 0, "step 2 allocated nothing in group 1");
	for (int i = 1; i < 3; i++)
		TEST_REQUIRE(e2fsck_fn(img[i], dir) == 0, "e2fsck -fn on %s", img[i]);

	size_t n[3];
	uint8_t *s[3];
	for (int i = 0; i < 3; i++) {
		s[i] = test_slurp(img[i], &n[i]);
		TEST_REQUIRE(s[i] && n[i] == n[0], "read %s", img[i]);
	}
	struct test_mem m = { s[0], n[0] };
	struct chk_fs *fs;
	char err[256];
	TEST_REQUIRE(chk_attach(&fs, test_mem_read, &m, NULL, err, sizeof(err)) == 0, "attach: %s", err);
	step(fs, "group 1 leaves BLOCK_UNINIT, its bitmap as made up", s[0], s[1], n[0]);
	m.p = s[1];
	step(fs, "a file allocated into group 1", s[1], s[2], n[0]);
	chk_detach(fs);
	for (int i = 0; i < 3; i++)
		free(s[i]);
	run_shell("rm -rf %s", dir);
	printf("test_uninit_reuse: %d failure(s)\n", failures);
	return failures ? 1 : 0;
}
