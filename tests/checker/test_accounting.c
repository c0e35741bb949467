/*
 * tests/checker/test_accounting.c - block ownership accounting across
 * indirect levels: transitions that free, rewrite and reuse indirect blocks
 * in one transaction must be approved whatever order the transaction lists
 * its blocks in.
 *
 *   test_accounting     every scenario at its block size(s)
 *
 * Each scenario builds a before image (mke2fs -t ext3, a sparse file written
 * by debugfs from a source with data at given byte ranges), applies debugfs
 * commands (punch, size, write, rm) to a copy in one session, requires
 * e2fsck -fn to accept the after image, and then checks the transition with
 * the changed blocks given to chk_check in ascending, descending and seeded
 * shuffled orders: every order must be approved.  After an approval the
 * state is advanced and the file is removed as a second transaction, which
 * must be approved too (the advanced counts are right).
 * Exit 0 pass, 1 fail, 77 skip (no mke2fs/debugfs/e2fsck).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checker.h"
#include "test_util.h"

static char dir[64];
static int failures;

#define FAIL(...) do { fprintf(stderr, "FAIL: " __VA_ARGS__); fputc('\n', stderr); failures++; } while (0)

static int run(const char *cmd)
{
	int r = system(cmd);
	return WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

static void dump(const struct chk_verdict *v)
{
	for (size_t i = 0; i < chk_verdict_nviolations(v); i++) {
		const struct chk_violation *x = chk_verdict_violation(v, i);
		fprintf(stderr, "   %s: %s\n", x->inv->id, x->detail);
	}
}

enum order { ASCENDING, DESCENDING, SHUFFLED };
static const char *const order_name[] = { "ascending", "descending", "shuffled" };

/* The blocks that differ between a and b, as whole-block writes in `order`
 * (seed: for SHUFFLED). */
static struct chk_verdict *check_pair(struct chk_fs *fs, const uint8_t *a, const uint8_t *b, size_t n,
				      enum order order, unsigned seed)
{
	uint32_t bs = chk_block_size(fs);
	size_t nw = 0;
	struct chk_write *w = malloc((n / bs + 1) * sizeof(*w));
	if (!w)
		return NULL;
	for (size_t off = 0; off < n; off += bs)
		if (memcmp(a + off, b + off, bs))
			w[nw++] = (struct chk_write){ off, bs, b + off };
	if (order == DESCENDING) {
		for (size_t i = 0; i < nw / 2; i++) {
			struct chk_write x = w[i];
			w[i] = w[nw - 1 - i];
			w[nw - 1 - i] = x;
		}
	} else if (order == SHUFFLED) {
		srand(seed);
		for (size_t i = nw; i > 1; i--) {
			size_t j = (size_t)rand() % i;
			struct chk_write x = w[i - 1];
			w[i - 1] = w[j];
			w[j] = x;
		}
	}
	struct chk_verdict *v = NULL;
	int r = chk_check(fs, w, nw, &v);
	free(w);
	if (r) {
		FAIL("chk_check: %s", strerror(-r));
		return NULL;
	}
	return v;
}

struct range { uint64_t start, end; };     /* bytes [start, end) holding data */

struct scenario {
	const char *name;
	uint32_t bs;
	const char *fs_size;
	uint64_t file_size;
	struct range data[8];
	/* debugfs commands of the transition (one session, one transaction);
	 * %s is the scratch directory (for a second source file "src2") */
	const char *cmds;
};

#define K 1024ull
#define M (1024ull * 1024)
#define B4(a, b) { (a) * 4096ull, ((b) + 1) * 4096ull }   /* 4 KiB blocks a..b */

static const struct scenario scenarios[] = {
	/* a 16 MiB file with data in 4 KiB blocks 98-112, ..., 4010-4095,
	 * truncated to 0x649c5f: the double-indirect block stays, its third
	 * indirect child is rewritten (zeroed) and freed */
	{ "truncate-sparse-16M-4k", 4096, "64M", 16 * M,
	  { B4(98, 112), B4(612, 652), B4(834, 1080), B4(1171, 1305), B4(1324, 1372), B4(4010, 4095) },
	  "punch f 1610\nsif f size 0x649c5f\n" },
	/* the same layout on 1 KiB blocks (every range deeper in the tree) */
	{ "truncate-sparse-16M-1k", 1024, "64M", 16 * M,
	  { B4(98, 112), B4(612, 652), B4(834, 1080), B4(1171, 1305), B4(1324, 1372), B4(4010, 4095) },
	  "punch f 6440\nsif f size 0x649c5f\n" },
	/* 1 KiB: data in direct, indirect, double and triple-indirect ranges;
	 * truncate inside the triple-indirect range (the triple-indirect block
	 * stays, a double-indirect child and its indirect grandchildren are
	 * rewritten and freed) */
	{ "truncate-in-tind-1k", 1024, "128M", 200 * M,
	  { { 0, 8 * K }, { 100 * K, 120 * K }, { 300 * K, 310 * K }, { 65 * M, 65 * M + 40 * K },
	    { 66 * M, 66 * M + 300 * K }, { 150 * M, 150 * M + 20 * K }, { 200 * M - 3 * K, 200 * M } },
	  "punch f 67000\nsif f size 68608000\n" },
	/* the same truncated into the double-indirect range: the whole
	 * triple-indirect subtree goes from the inode, a dind child partly */
	{ "truncate-in-dind-1k", 1024, "128M", 200 * M,
	  { { 0, 8 * K }, { 100 * K, 120 * K }, { 300 * K, 310 * K }, { 40 * M, 40 * M + 300 * K },
	    { 66 * M, 66 * M + 300 * K }, { 150 * M, 150 * M + 20 * K }, { 200 * M - 3 * K, 200 * M } },
	  "punch f 41000\nsif f size 41984000\n" },
	/* truncate to zero: every level freed from the inode */
	{ "truncate-zero-1k", 1024, "128M", 96 * M,
	  { { 0, 8 * K }, { 300 * K, 310 * K }, { 40 * M, 40 * M + 30 * K }, { 90 * M, 90 * M + 20 * K } },
	  "punch f 0\nsif f size 0\n" },
	/* a hole punched inside: indirect blocks partly freed, both sides kept */
	{ "punch-middle-1k", 1024, "128M", 96 * M,
	  { { 0, 300 * K }, { 40 * M, 41 * M }, { 66 * M, 67 * M }, { 90 * M, 90 * M + 20 * K } },
	  "punch f 150 40500\npunch f 67800 68000\n" },
	{ "punch-middle-4k", 4096, "128M", 96 * M,
	  { { 0, 300 * K }, { 40 * M, 41 * M }, { 66 * M, 67 * M }, { 90 * M, 90 * M + 20 * K } },
	  "punch f 40 10300\npunch f 16900 17000\n" },
	/* freed blocks (indirect ones included) reused by a new file in the
	 * same transaction: a freed indirect block becomes data or another
	 * inode's indirect block */
	{ "free-and-reuse-1k", 1024, "128M", 96 * M,
	  { { 0, 8 * K }, { 300 * K, 310 * K }, { 40 * M, 40 * M + 30 * K }, { 90 * M, 90 * M + 20 * K } },
	  "punch f 12\nsif f size 12288\nwrite %s/src2 g\n" },
	{ "free-and-reuse-4k", 4096, "128M", 96 * M,
	  { { 0, 8 * K }, { 300 * K, 310 * K }, { 40 * M, 40 * M + 30 * K }, { 90 * M, 90 * M + 20 * K } },
	  "punch f 12\nsif f size 49152\nwrite %s/src2 g\n" },
	/* the file removed whole (inode freed with its tree) */
	{ "remove-1k", 1024, "128M", 96 * M,
	  { { 0, 8 * K }, { 300 * K, 310 * K }, { 40 * M, 40 * M + 30 * K }, { 90 * M, 90 * M + 20 * K } },
	  "rm f\n" },
};

static int write_source(const char *path, const struct scenario *s)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	if (fd < 0)
		return -1;
	int rc = ftruncate(fd, (off_t)s->file_size);
	uint8_t buf[4096];
	unsigned x = 12345;
	for (size_t i = 0; i < 8 && !rc && s->data[i].end; i++)
		for (uint64_t off = s->data[i].start; off < s->data[i].end && !rc; off += sizeof(buf)) {
			for (size_t k = 0; k < sizeof(buf); k++)
				buf[k] = (uint8_t)((x = x * 1103515245u + 12345u) >> 16) | 1;
			size_t len = s->data[i].end - off < sizeof(buf) ? (size_t)(s->data[i].end - off) : sizeof(buf);
			rc = pwrite(fd, buf, len, (off_t)off) == (ssize_t)len ? 0 : -1;
		}
	close(fd);
	return rc;
}

static int debugfs_cmds(const char *img, const char *cmds)
{
	char cf[512], cmd[2048];
	snprintf(cf, sizeof(cf), "%s/edit", dir);
	FILE *f = fopen(cf, "w");
	if (!f)
		return -1;
	fputs(cmds, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "debugfs -w -f %s %s >/dev/null 2>&1", cf, img);
	return run(cmd);
}

/* Check before -> after in every order; returns an approved verdict in the
 * ascending order (for advancing), or NULL. */
static void check_all_orders(const char *what, const uint8_t *a, const uint8_t *b, size_t n,
			     struct chk_fs **fsp, struct test_mem *m)
{
	for (int o = 0; o <= SHUFFLED; o++) {
		unsigned nseeds = o == SHUFFLED ? 4 : 1;
		for (unsigned seed = 1; seed <= nseeds; seed++) {
			struct chk_fs *fs;
			char err[256];
			if (chk_attach(&fs, test_mem_read, m, NULL, err, sizeof(err))) {
				FAIL("%s: attach: %s", what, err);
				return;
			}
			struct chk_verdict *v = check_pair(fs, a, b, n, (enum order)o, seed);
			if (v && !chk_verdict_ok(v)) {
				FAIL("%s: rejected with the blocks in %s order (seed %u)", what, order_name[o], seed);
				dump(v);
			}
			chk_verdict_free(v);
			chk_detach(fs);
		}
	}
	(void)fsp;
}

static void run_scenario(const struct scenario *s)
{
	char src[256], src2[256], before[256], after[256], after2[256], cmd[2048], cmds[1024];
	snprintf(src, sizeof(src), "%s/src", dir);
	snprintf(src2, sizeof(src2), "%s/src2", dir);
	snprintf(before, sizeof(before), "%s/before.img", dir);
	snprintf(after, sizeof(after), "%s/after.img", dir);
	snprintf(after2, sizeof(after2), "%s/after2.img", dir);
	struct scenario s2 = { .file_size = 3 * M, .data = { { 0, 3 * M } } };
	if (write_source(src, s) || write_source(src2, &s2)) {
		FAIL("%s: cannot write the source files", s->name);
		return;
	}
	snprintf(cmd, sizeof(cmd), "mke2fs -q -F -t ext3 -b %u -N 128 %s %s >/dev/null 2>&1",
		 s->bs, before, s->fs_size);
	snprintf(cmds, sizeof(cmds), "write %s f\n", src);
	if (run(cmd) || debugfs_cmds(before, cmds)) {
		FAIL("%s: cannot build the before image", s->name);
		return;
	}
	snprintf(cmd, sizeof(cmd), "e2fsck -fn %s >/dev/null 2>&1", before);
	if (run(cmd)) {
		FAIL("%s: e2fsck -fn rejects the before image", s->name);
		return;
	}
	snprintf(cmd, sizeof(cmd), "cp %s %s", before, after);
	snprintf(cmds, sizeof(cmds), s->cmds, dir);
	if (run(cmd) || debugfs_cmds(after, cmds)) {
		FAIL("%s: cannot build the after image", s->name);
		return;
	}
	snprintf(cmd, sizeof(cmd), "e2fsck -fn %s >/dev/null 2>&1", after);
	if (run(cmd)) {
		FAIL("%s: e2fsck -fn rejects the after image (a bad scenario, not a checker verdict)", s->name);
		return;
	}
	size_t na, nb;
	uint8_t *a = test_slurp(before, &na), *b = test_slurp(after, &nb);
	if (!a || !b || na != nb) {
		FAIL("%s: cannot read the images", s->name);
		free(a);
		free(b);
		return;
	}
	struct test_mem m = { a, na };
	check_all_orders(s->name, a, b, na, NULL, &m);

	/* advance through the transition, then remove what is left of the file */
	snprintf(cmd, sizeof(cmd), "cp %s %s", after, after2);
	if (run(cmd) || debugfs_cmds(after2, "rm f\nrm g\n")) {
		FAIL("%s: cannot build the second after image", s->name);
	} else {
		size_t nc;
		uint8_t *c = test_slurp(after2, &nc);
		struct chk_fs *fs;
		char err[256];
		if (c && nc == na && chk_attach(&fs, test_mem_read, &m, NULL, err, sizeof(err)) == 0) {
			struct chk_verdict *v = check_pair(fs, a, b, na, DESCENDING, 0);
			if (v && chk_verdict_ok(v)) {
				if (chk_advance(fs, v))
					FAIL("%s: chk_advance", s->name);
				m.p = b;
				struct chk_verdict *v2 = check_pair(fs, b, c, na, DESCENDING, 0);
				if (v2 && !chk_verdict_ok(v2)) {
					FAIL("%s: removing the file after the advanced transition rejected", s->name);
					dump(v2);
				}
				chk_verdict_free(v2);
			}
			chk_verdict_free(v);
			chk_detach(fs);
		} else {
			FAIL("%s: cannot attach for the chain", s->name);
		}
		free(c);
	}
	printf("%s %s (bs %u)\n", failures ? "done" : "ok  ", s->name, s->bs);
	free(a);
	free(b);
}

int main(int argc, char **argv)
{
	if (run("command -v mke2fs >/dev/null && command -v debugfs >/dev/null && command -v e2fsck >/dev/null"))
		return 77;
	snprintf(dir, sizeof(dir), "/tmp/chk-acct-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		if (argc < 2 || !strcmp(argv[1], scenarios[i].name))
			run_scenario(&scenarios[i]);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	run(cmd);
	printf("accounting: %d failure(s)\n", failures);
	return failures ? 1 : 0;
}
