/*
 * tests/checker/test_faults_paths.c - allocation failures on the checker's
 * rarer paths, each reached by a state or transaction of its own (the
 * sweep of test_faults.c takes one legitimate transaction, which never
 * takes them):
 *
 *   test_faults_paths [CASE]   every case, or the one named
 *
 * A case is a before image and an after image (mke2fs -d, then debugfs or
 * libext2fs edits), the transaction the blocks that differ.  The
 * operation: attach to the before image, judge it whole (chk_scan), check
 * the transaction, advance to it when approved, judge the after image
 * whole.  Run once with nothing failing: the reference.  Then once per N,
 * N = 1, 2, ..., with the Nth allocation from the case's first interesting
 * step on failing, until a run completes without reaching it.
 *
 * What each run must show: every call returns what the reference's
 * returned or -ENOMEM; a call that returned -ENOMEM, made again with
 * nothing failing, returns what the reference's returned, its verdict the
 * reference's (approval or the same violations): a failure leaves the state
 * as it was and never reads as a verdict, neither "consistent" nor a false
 * violation.  Leaks: the ASan build runs LeakSanitizer after each case.
 * FAULT_N=n runs that injection point alone (gdb: break fault_injected).
 * Exit 0 pass, 1 fail, 77 skip (no mke2fs/debugfs).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ext2fs/ext2fs.h>

#include "checker.h"
#include "fault_inject.h"
#include "test_util.h"

int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

static char scratch[64];
static int failures;

/* The steps from which a case's sweep fails allocations (the earlier ones
 * run with nothing failing: the sweep stays short). */
enum phase { FROM_ATTACH, FROM_SCAN, FROM_CHECK };

struct path_case {
	const char *name;
	const char *reaches;   /* the path, for the reader of a failure */
	enum phase from;
	/* sh in the scratch folder: makes b.img (before) and a.img (after);
	 * src/ and newdata are there, $sz the image size in KiB */
	const char *script;
	int (*patch)(const char *after);   /* libext2fs edit of a.img, or NULL */
};

/* ------------------------------------------------------------ the cases */

/* A file unlinked while held open, as the kernel leaves it: its entry
 * removed, no links, in use, named by the ext4 orphan file's first block
 * (its checksum set) and the orphan-present flag set. */
static int orphan_entry(const char *after)
{
	ext2_filsys fs;
	struct ext2_inode in;
	blk64_t blk = 0;
	char buf[4096];
	ext2_ino_t dir = 0, victim = 0;

	if (ext2fs_open(after, EXT2_FLAG_RW | EXT2_FLAG_64BITS, 0, 0, unix_io_manager, &fs))
		return -1;
	ext2_ino_t ofile = fs->super->s_orphan_file_inum;
	errcode_t err = ext2fs_read_bitmaps(fs);
	err = err ? err : ext2fs_namei(fs, EXT2_ROOT_INO, EXT2_ROOT_INO, "a", &dir);
	err = err ? err : ext2fs_namei(fs, EXT2_ROOT_INO, dir, "f5", &victim);
	err = err ? err : ext2fs_unlink(fs, dir, "f5", victim, 0);
	err = err ? err : ext2fs_read_inode(fs, victim, &in);
	if (!err) {
		in.i_links_count = 0;
		err = ext2fs_write_inode(fs, victim, &in);
	}
	err = err ? err : ext2fs_read_inode(fs, ofile, &in);
	err = err ? err : ext2fs_bmap2(fs, ofile, &in, NULL, 0, 0, NULL, &blk);
	if (!err && (!blk || fs->blocksize > sizeof(buf)))
		err = EXT2_ET_INVALID_ARGUMENT;
	err = err ? err : io_channel_read_blk64(fs->io, blk, 1, buf);
	if (!err) {
		memcpy(buf, &victim, 4);   /* little-endian host: the tests run on x86 and arm64 */
		err = ext2fs_orphan_file_block_csum_set(fs, ofile, blk, buf);
	}
	err = err ? err : io_channel_write_blk64(fs->io, blk, 1, buf);
	if (!err) {
		ext2fs_set_feature_orphan_present(fs->super);
		ext2fs_mark_super_dirty(fs);
	}
	errcode_t cerr = ext2fs_close_free(&fs);
	return err || cerr ? -1 : 0;
}

/* shell: the physical block of logical block $2 of $1 in image $3 */
#define BMAP "bmap() { debugfs -R \"bmap $1 $2\" $3 2>/dev/null; }; "

static const struct path_case cases[] = {
	{ "rejection", "a violation recorded while the check runs (the problem list grows)", FROM_CHECK,
	  "mke2fs -q -F -t ext3 -b 1024 -d src b.img $sz && cp b.img a.img && "
	  "printf 'zap_block -p 0x55 -l 16 0\\n' >cmds && debugfs -w -f cmds a.img", NULL },
	{ "index-flag", "a directory gaining the htree index flag (a walk of its index)", FROM_CHECK,
	  "mke2fs -q -F -t ext3 -b 1024 -d src b.img $sz && cp b.img a.img && "
	  "printf 'set_inode_field c flags 0x1000\\n' >cmds && debugfs -w -f cmds a.img", NULL },
	{ "htree-root", "an index root whose hashes move, its nodes and leaves not written "
	  "(the leaves below read from the approved state)", FROM_CHECK,
	  BMAP "mkdir src/deep && for i in $(seq 1 600); do : >src/deep/$(printf %0200d $i); done && "
	  "mke2fs -q -F -t ext3 -b 1024 -d src b.img $sz && "
	  "{ e2fsck -fyD b.img >/dev/null 2>&1; [ $? -le 1 ]; } && cp b.img a.img && "
	  "root=$(bmap deep 0 a.img) && off=$((root * 1024 + 40)) && "
	  "h=$(od -An -tu4 -j $off -N4 a.img | tr -d ' ') && h=$((h + 2)) && "
	  "printf \"$(printf '\\\\%03o\\\\%03o\\\\%03o\\\\%03o' $((h & 255)) $((h >> 8 & 255)) "
	  "$((h >> 16 & 255)) $((h >> 24 & 255)))\" | dd of=a.img bs=1 seek=$off conv=notrunc 2>/dev/null",
	  NULL },
	{ "empty-indirect", "an indirect block of no pointers (the search for a file's last block)", FROM_SCAN,
	  "head -c 13300 /dev/urandom >src/f19 && mke2fs -q -F -t ext3 -b 1024 -d src b.img $sz && "
	  "ind=$(debugfs -R 'stat f19' b.img 2>/dev/null | sed -n 's/.*(IND):\\([0-9]*\\).*/\\1/p') && "
	  "data=$((ind + 1)) && printf 'zap_block -p 0 %s\\nfreeb %s\\nset_inode_field f19 blocks 26\\n' "
	  "$ind $data >cmds && debugfs -w -f cmds b.img && { e2fsck -fy b.img; [ $? -le 1 ]; } && "
	  "cp b.img a.img && printf 'set_inode_field f19 mtime 1234567\\n' >cmds && debugfs -w -f cmds a.img",
	  NULL },
	{ "uninit-cleared", "a group's inode-uninit flag cleared, its bitmap not written", FROM_CHECK,
	  "sz=32768 && mke2fs -q -F -t ext4 -b 1024 -d src b.img $sz && cp b.img a.img && "
	  "printf 'set_bg 2 flags 0\\nset_bg 2 checksum calc\\n' >cmds && debugfs -w -f cmds a.img", NULL },
	{ "orphan-entry", "a file unlinked while open, named by the orphan file (the orphans "
	  "recorded)", FROM_CHECK,
	  "mke2fs -q -F -t ext4 -O orphan_file -b 1024 -d src b.img $sz && cp b.img a.img", orphan_entry },
	{ "bad-itable", "a bad block in an inode table (its inodes skipped)", FROM_ATTACH,
	  "mke2fs -q -F -t ext3 -b 1024 -d src b.img $sz && "
	  "it=$(dumpe2fs b.img 2>/dev/null | sed -n 's/^  Inode table at \\([0-9]*\\)-\\([0-9]*\\).*/\\2/p' | head -1) && "
	  "printf 'set_inode_field <1> block[0] %s\\nset_inode_field <1> size 1024\\n"
	  "set_inode_field <1> blocks 2\\n' $it >cmds && debugfs -w -f cmds b.img && cp b.img a.img", NULL },
	{ "journal-sb-written", "a transaction that damages the journal superblock (the journal "
	  "inode read to find it)", FROM_CHECK,
	  "mke2fs -q -F -t ext3 -b 1024 -d src b.img $sz && cp b.img a.img && "
	  "printf 'zap_block -f <8> -o 12 -l 4 -p 0x11 0\\n' >cmds && debugfs -w -f cmds a.img", NULL },
	{ "journal-sb-damaged", "an image whose journal superblock is damaged, judged whole", FROM_SCAN,
	  "mke2fs -q -F -t ext3 -b 1024 -d src b.img $sz && "
	  "printf 'zap_block -f <8> -o 12 -l 4 -p 0x11 0\\n' >cmds && debugfs -w -f cmds b.img && "
	  "cp b.img a.img", NULL },
	{ "htree-leaf-twice", "an index root naming one leaf twice (its leaves listed and sorted)",
	  FROM_CHECK,
	  BMAP "mkdir src/h && for i in $(seq 1 400); do : >src/h/entry_with_a_longish_name_$i; done && "
	  "mke2fs -q -F -t ext3 -b 1024 -d src b.img $sz && "
	  "{ e2fsck -fyD b.img >/dev/null 2>&1; [ $? -le 1 ]; } && cp b.img a.img && "
	  "root=$(bmap h 0 a.img) && dd if=b.img of=a.img bs=1 skip=$((root * 1024 + 44)) "
	  "seek=$((root * 1024 + 52)) count=4 conv=notrunc 2>/dev/null", NULL },
	{ "fresh-group", "blocks and inodes allocated in a group nothing used before "
	  "(the advance's reservations of map pages and group bitmaps)", FROM_CHECK,
	  "sz=32768 && touch src/p1 src/p2 src/p3 src/p4 src/p5 && "
	  "mke2fs -q -F -t ext3 -b 1024 -I 128 -N 32 -d src b.img $sz && cp b.img a.img && "
	  "printf 'write newdata fresh\\n' >cmds && debugfs -w -f cmds a.img && "
	  "debugfs -R 'stat fresh' a.img 2>/dev/null | grep -q 'Inode: 25 '", NULL },
};

/* ----------------------------------------------------------- the driver */

struct image {
	uint8_t *p;
	size_t n;
};

static int mem_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	const struct image *m = *(const struct image **)ctx;

	if (off > m->n || len > m->n - off)
		return -EIO;
	memcpy(buf, m->p + off, len);
	return 0;
}

static bool make_case(const struct path_case *c, struct image *before, struct image *after)
{
	char path[128];

	/* a small tree: files of direct and indirect blocks (inodes 12 to
	 * 19), a small directory c/ */
	if (run_shell("cd '%s' && rm -rf src b.img a.img && mkdir -p src/a src/c && "
		      "for i in 1 2 3 4 5; do head -c $((i * 3000)) /dev/urandom >src/a/f$i; done && "
		      ": >src/c/x && head -c 30000 /dev/urandom >newdata && sz=8192 && { %s; } >setup.log 2>&1",
		      scratch, c->script) != 0) {
		fprintf(stderr, "%s: setup failed (mke2fs, debugfs or e2fsck):\n", c->name);
		run_shell("cat '%s/setup.log' >&2", scratch);
		return false;
	}
	snprintf(path, sizeof(path), "%s/a.img", scratch);
	TEST_REQUIRE(!c->patch || c->patch(path) == 0, "%s: the libext2fs edit failed", c->name);
	before->p = test_slurp(strcat(strcpy(path, scratch), "/b.img"), &before->n);
	after->p = test_slurp(strcat(strcpy(path, scratch), "/a.img"), &after->n);
	TEST_REQUIRE(before->p && after->p && before->n == after->n, "%s: images", c->name);
	return true;
}

/* What a run saw: each call's result (after its retry) and verdict. */
struct outcome {
	int attach, scan_before, check, advance, scan_after;
	char verdicts[3][160];   /* scan before, check, scan after: "ok" or the violations' ids */
};

static void summary(char *out, size_t len, struct chk_verdict *v)
{
	size_t used = (size_t)snprintf(out, len, "%s", chk_verdict_ok(v) ? "ok" : "rejected:");
	for (size_t i = 0; i < chk_verdict_nviolations(v) && used < len; i++)
		used += (size_t)snprintf(out + used, len - used, " %s", chk_verdict_violation(v, i)->inv->id);
}

/* A call's result: on -ENOMEM made again with nothing failing.  Then
 * anything but the reference's result is a failure of the test. */
#define CALL(field, expr)                                                        \
	do {                                                                     \
		o->field = (expr);                                               \
		if (o->field == -ENOMEM && ref) {                                \
			fault_arm(FAULT_ALLOC, 0);                               \
			o->field = (expr);                                       \
		}                                                                \
		if (ref)                                                         \
			TEST_CHECK(o->field == ref->field, "%s N=%lu: %s returned %d, not %d", \
				   c->name, n, #field, o->field, ref->field);    \
	} while (0)

/* One run; n = 0 with ref NULL: the reference.  Returns whether the Nth
 * allocation was reached. */
static bool run_once(const struct path_case *c, const struct image *before, const struct image *after,
		     const struct chk_write *w, size_t nw, unsigned long n, const struct outcome *ref,
		     struct outcome *o)
{
	const struct image *device = before;
	struct chk_options opt = { .cache_bytes = 64 * 1024 };
	struct chk_fs *fs = NULL;
	struct chk_verdict *v = NULL;
	char err[256] = "";

	memset(o, 0, sizeof(*o));
	if (c->from == FROM_ATTACH)
		fault_arm(FAULT_ALLOC, n);
	CALL(attach, chk_attach(&fs, mem_read, &device, &opt, err, sizeof(err)));
	if (o->attach || !fs)
		goto out;
	if (c->from == FROM_SCAN)
		fault_arm(FAULT_ALLOC, n);
	CALL(scan_before, chk_scan(fs, &v));
	if (!o->scan_before) {
		summary(o->verdicts[0], sizeof(o->verdicts[0]), v);
		chk_verdict_free(v);
	}
	if (c->from == FROM_CHECK)
		fault_arm(FAULT_ALLOC, n);
	CALL(check, chk_check(fs, w, nw, &v));
	if (o->check)
		goto out;
	summary(o->verdicts[1], sizeof(o->verdicts[1]), v);
	if (chk_verdict_ok(v)) {
		CALL(advance, chk_advance(fs, v));
		if (!o->advance)
			device = after;
	}
	chk_verdict_free(v);
	CALL(scan_after, chk_scan(fs, &v));
	if (!o->scan_after) {
		summary(o->verdicts[2], sizeof(o->verdicts[2]), v);
		chk_verdict_free(v);
	}
out:;
	bool hit = n && fault_fired(FAULT_ALLOC);
	fault_arm(FAULT_ALLOC, 0);
	chk_detach(fs);
	if (ref)
		for (int i = 0; i < 3; i++)
			TEST_CHECK(!strcmp(o->verdicts[i], ref->verdicts[i]),
				   "%s N=%lu: verdict %d \"%s\", the reference's \"%s\"", c->name, n, i,
				   o->verdicts[i], ref->verdicts[i]);
	return hit;
}

static void sweep(const struct path_case *c)
{
	struct image before, after;
	struct outcome ref, o;

	if (!make_case(c, &before, &after)) {
		failures++;
		return;
	}
	size_t bs = 1024, nw = 0;
	struct chk_write *w = malloc((before.n / bs) * sizeof(*w));
	TEST_REQUIRE(w, "malloc");
	for (size_t off = 0; off < before.n; off += bs)
		if (memcmp(before.p + off, after.p + off, bs))
			w[nw++] = (struct chk_write){ off, bs, after.p + off };

	int before_failures = failures;
	run_once(c, &before, &after, w, nw, 0, NULL, &ref);
	/* the case must get as far as its path with nothing failing */
	TEST_REQUIRE(!ref.attach && !ref.scan_before && !ref.check && !ref.advance && !ref.scan_after,
		     "%s: the reference run failed (attach %d, scan %d, check %d, advance %d, scan %d)",
		     c->name, ref.attach, ref.scan_before, ref.check, ref.advance, ref.scan_after);
	unsigned long n = getenv("FAULT_N") ? strtoul(getenv("FAULT_N"), NULL, 10) : 0;
	if (n) {
		run_once(c, &before, &after, w, nw, n, &ref, &o);
	} else {
		for (n = 1; failures == before_failures && run_once(c, &before, &after, w, nw, n, &ref, &o); n++)
			;
		if (__lsan_do_recoverable_leak_check && __lsan_do_recoverable_leak_check())
			TEST_CHECK(0, "%s: leaks (above)", c->name);
	}
	printf("%s: %lu injection points, %zu blocks in the transaction; reference: attach %d, "
	       "check %d \"%s\", scans \"%s\" \"%s\"\n  (%s)\n", c->name, n - 1, nw, ref.attach, ref.check,
	       ref.verdicts[1], ref.verdicts[0], ref.verdicts[2], c->reaches);
	free(w);
	free(before.p);
	free(after.p);
}

int main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : NULL;
	size_t ncases = sizeof(cases) / sizeof(cases[0]), ran = 0;

	if (run_shell("{ command -v mke2fs && command -v debugfs && command -v dumpe2fs; } >/dev/null") != 0)
		return 77;
	snprintf(scratch, sizeof(scratch), "/tmp/chkpaths.XXXXXX");
	TEST_REQUIRE(mkdtemp(scratch), "mkdtemp");
	for (size_t i = 0; i < ncases; i++)
		if (!only || !strcmp(only, cases[i].name)) {
			sweep(&cases[i]);
			ran++;
		}
	run_shell("rm -rf '%s'", scratch);
	if (!ran) {
		fprintf(stderr, "no case named %s\n", only);
		return 2;
	}
	return failures ? 1 : 0;
}
