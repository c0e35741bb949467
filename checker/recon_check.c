/*
 * checker/recon_check.c - the recon-check tool.
 *
 *   recon-check [--verbose] BEFORE.img AFTER.img   judge one transition
 *   recon-check [--verbose] --scan IMAGE           the base case
 *   recon-check [--scan] --list-invariants         print the invariant table
 *   recon-check --help | --version
 *
 * Exit 0 approved / consistent, 1 rejected, 2 cannot judge (bad input,
 * two different file systems; the message on stderr).  Problems go to
 * stdout, one line each, then a verdict line and a legend of the
 * invariants involved; success prints nothing unless --verbose.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ext2fs/ext2_fs.h>
#include <ext2fs/ext2fs.h>   /* ext2fs_get_library_version, for --version only */

#include "checker.h"

struct image {
	const char *path;
	int fd;
	size_t size;
};

/* Images are read with pread, not mapped: memory stays bounded by the
 * checker's state and the blocks that differ, whatever the image size. */
static int image_read(void *ctx, uint64_t offset, void *buf, size_t len)
{
	const struct image *im = ctx;
	if (offset > im->size || len > im->size - offset)
		return -EIO;
	uint8_t *p = buf;
	while (len) {
		ssize_t n = pread(im->fd, p, len, (off_t)offset);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
		offset += (uint64_t)n;
	}
	return 0;
}

/* A hole of the image file reads as zeros: the scan need not read it. */
static int image_zero(void *ctx, uint64_t offset, size_t len)
{
	const struct image *im = ctx;
	if (offset > im->size || len > im->size - offset)
		return 0;
	off_t data = lseek(im->fd, (off_t)offset, SEEK_DATA);
	if (data >= 0)
		return (uint64_t)data >= offset + len;
	return errno == ENXIO;    /* no data from offset to the end of the file */
}

static int open_image(struct image *im, const char *path)
{
	im->path = path;
	im->fd = open(path, O_RDONLY);
	if (im->fd < 0) {
		fprintf(stderr, "recon-check: %s: %s\n", path, strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(im->fd, &st) || st.st_size < 2048) {
		fprintf(stderr, "recon-check: %s: %s\n", path, "cannot stat, or too small to be an ext2/ext3 image");
		return -1;
	}
	im->size = (size_t)st.st_size;
	posix_fadvise(im->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	return 0;
}

static void close_image(struct image *im)
{
	if (im->fd > 0)
		close(im->fd);
	im->fd = -1;
}

static int read_super(struct image *im, struct ext2_super_block *sb)
{
	return image_read(im, 1024, sb, sizeof(*sb));
}

static void print_record(const struct chk_record *r, FILE *f)
{
	char buf[1400];
	chk_record_format(r, buf, sizeof(buf));
	fputs(buf, f);
}

/* The legend's text for an invariant: what it says of a state for a scan
 * (the library's descriptions speak of transitions), of a transition
 * otherwise. */
static const char *inv_text(const struct chk_invariant *inv, bool scan)
{
	return scan && inv->state ? inv->state : inv->description;
}

static void list_invariants(bool scan)
{
	for (size_t k = 0; k < chk_invariant_count(); k++)
		printf("%-24s %s\n", chk_invariant_at(k)->id, inv_text(chk_invariant_at(k), scan));
}

/* The superblock's free counts are hints the kernel leaves stale and
 * recounts at mount, as a mount of ours does; e2fsck -fn accepts an image
 * whose only fault they are.  So it does a descriptor checksum that does
 * not match ("IGNORED"; libext2fs then reads that group's bitmaps whatever
 * its UNINIT flags say), though the kernel mounts such an image read-only
 * only.  A scan reports them as notes. */
static bool advisory_in_scan(const struct chk_violation *x)
{
	return x->inv && (!strcmp(x->inv->id, "INV_SB_FREE_BLOCKS") ||
			  !strcmp(x->inv->id, "INV_SB_FREE_INODES") ||
			  !strcmp(x->inv->id, "INV_CSUM_BGD"));
}

/*
 * One line per problem ("ID: detail [records]"), then a line with the
 * verdict and a legend of the invariants that occurred, once each, in the
 * table's order.  With --verbose a pair's change records come first.
 * Returns the number of problems (advisory notes of a scan excluded: they
 * go to stderr).
 */
static size_t print_verdict(const struct chk_verdict *v, const char *what, bool scan, bool verbose)
{
	size_t ninv = chk_invariant_count(), problems = 0, kinds = 0;
	bool *seen = calloc(ninv ? ninv : 1, sizeof(*seen));
	bool unknown_seen = false;

	if (verbose && !scan)
		for (size_t i = 0; i < chk_verdict_nrecords(v); i++) {
			print_record(chk_verdict_record(v, i), stdout);
			putchar('\n');
		}
	for (size_t i = 0; i < chk_verdict_nviolations(v); i++) {
		const struct chk_violation *x = chk_verdict_violation(v, i);
		if (scan && advisory_in_scan(x)) {
			bool csum = !strcmp(x->inv->id, "INV_CSUM_BGD");
			fprintf(stderr, "recon-check: %s: note: %s (advisory: %s)\n", what, x->detail,
				csum ? "e2fsck -n ignores it; the kernel mounts the image read-only only" :
				       "a mount and e2fsck recount the superblock's free counts");
			continue;
		}
		problems++;
		printf("%s: %s", x->inv ? x->inv->id : "?", x->detail);
		size_t n = x->nrecords < 16 ? x->nrecords : 16;
		for (size_t k = 0; k < n; k++) {
			fputs(k ? "; " : " [", stdout);
			print_record(chk_verdict_record(v, x->records[k]), stdout);
		}
		if (n)
			fputs(x->nrecords > n ? "; ...]" : "]", stdout);
		putchar('\n');
		size_t k = 0;
		while (k < ninv && chk_invariant_at(k) != x->inv)
			k++;
		if (k == ninv) {
			kinds += !unknown_seen;
			unknown_seen = true;
		} else if (seen && !seen[k]) {
			seen[k] = true;
			kinds++;
		}
	}
	if (problems) {
		printf("%s: %s: %zu problem%s, %zu invariant%s:\n", what,
		       scan ? "not consistent" : "rejected", problems, problems == 1 ? "" : "s",
		       kinds, kinds == 1 ? "" : "s");
		for (size_t k = 0; k < ninv && seen; k++)
			if (seen[k])
				printf("  %-24s %s\n", chk_invariant_at(k)->id,
				       inv_text(chk_invariant_at(k), scan));
		if (unknown_seen)
			printf("  %-24s %s\n", "?", "a violation the checker did not name");
	}
	free(seen);
	return problems;
}

static int attach_image(struct image *im, struct chk_fs **fs)
{
	char err[256];
	struct chk_options opt = { .cache_bytes = 64u << 20, .zero = image_zero };
	int r = chk_attach(fs, image_read, im, &opt, err, sizeof(err));
	if (r) {
		fprintf(stderr, "recon-check: %s: %s\n", im->path, err[0] ? err : strerror(-r));
		return -1;
	}
	return 0;
}

static int needs_recovery(struct image *im)
{
	struct ext2_super_block sbb, *sb = &sbb;
	if (read_super(im, sb))
		return 0;
	return sb->s_magic == EXT2_SUPER_MAGIC && (sb->s_feature_incompat & EXT3_FEATURE_INCOMPAT_RECOVER);
}

static int do_scan(const char *path, bool verbose)
{
	struct image im = { .fd = -1 };
	if (open_image(&im, path))
		return 2;
	struct chk_fs *fs;
	if (attach_image(&im, &fs)) {
		close_image(&im);
		return 2;
	}
	struct chk_verdict *v;
	int r = chk_scan(fs, &v);
	int rc;
	if (r == -EOPNOTSUPP) {
		fprintf(stderr, "recon-check: %s: cannot judge: an inode keeps an extended attribute's "
			"value in another inode (ea_inode), which the checker does not model\n", path);
		rc = 2;
	} else if (r) {
		fprintf(stderr, "recon-check: %s: scan failed: %s\n", path, strerror(-r));
		rc = 2;
	} else {
		rc = print_verdict(v, path, true, verbose) ? 1 : 0;
		if (needs_recovery(&im))
			fprintf(stderr, "recon-check: %s: note: the journal needs recovery\n", path);
		chk_verdict_free(v);
		struct ext2_super_block sb;
		if (rc == 0 && verbose && !read_super(&im, &sb))
			printf("%s: consistent (%u inodes, %llu blocks of %u bytes checked)\n", path,
			       sb.s_inodes_count, (unsigned long long)sb.s_blocks_count |
			       ((sb.s_feature_incompat & EXT4_FEATURE_INCOMPAT_64BIT) ? (unsigned long long)sb.s_blocks_count_hi << 32 : 0), chk_block_size(fs));
	}
	chk_detach(fs);
	close_image(&im);
	return rc;
}

static bool want_stats;

static void print_stats(struct chk_fs *fs)
{
	if (!want_stats)
		return;
	struct chk_stats st;
	chk_get_stats(fs, &st);
	fprintf(stderr, "stats: transactions %llu blocks_checked %llu cache_hits %llu cache_misses %llu "
		"cpu_us %.1f us_per_block %.2f violations %llu\n",
		(unsigned long long)st.transactions, (unsigned long long)st.blocks_checked,
		(unsigned long long)st.cache_hits, (unsigned long long)st.cache_misses, st.cpu_ns / 1000.0,
		st.blocks_checked ? st.cpu_ns / 1000.0 / st.blocks_checked : 0.0,
		(unsigned long long)st.violations);
}

/*
 * Are BEFORE and AFTER two different file systems rather than one before
 * and after some writes?  Then no transition joins them and there is
 * nothing to judge.  One differing field may be the corruption a judgement
 * must reject, so it takes two: of the UUID, the creation time, the
 * directory hash seed (all three set anew by each mke2fs) and each field
 * of the geometry.  Returns the number that differ; names them in buf.
 */
static int identity_differences(const struct ext2_super_block *a, const struct ext2_super_block *b,
				char *buf, size_t len)
{
	const struct { bool differs; const char *name; } f[] = {
		{ memcmp(a->s_uuid, b->s_uuid, sizeof(a->s_uuid)) != 0, "UUID" },
		{ a->s_mkfs_time != b->s_mkfs_time, "creation time" },
		{ memcmp(a->s_hash_seed, b->s_hash_seed, sizeof(a->s_hash_seed)) != 0, "hash seed" },
		{ a->s_blocks_count != b->s_blocks_count, "block count" },
		{ a->s_inodes_count != b->s_inodes_count, "inode count" },
		{ a->s_log_block_size != b->s_log_block_size, "block size" },
		{ a->s_first_data_block != b->s_first_data_block, "first data block" },
		{ a->s_blocks_per_group != b->s_blocks_per_group, "blocks per group" },
		{ a->s_inodes_per_group != b->s_inodes_per_group, "inodes per group" },
		{ a->s_inode_size != b->s_inode_size, "inode size" },
	};
	int n = 0;
	size_t used = 0;
	buf[0] = 0;
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		if (!f[i].differs)
			continue;
		int w = snprintf(buf + used, len - used, "%s%s", n ? ", " : "", f[i].name);
		if (w > 0 && (size_t)w < len - used)
			used += (size_t)w;
		n++;
	}
	return n;
}

static bool different_file_systems(const struct ext2_super_block *a, const struct ext2_super_block *b,
				   const char *before, const char *after)
{
	char differ[160];
	if (identity_differences(a, b, differ, sizeof(differ)) < 2)
		return false;
	fprintf(stderr, "recon-check: %s and %s are different file systems (%s differ): no "
		"transition leads from one to the other; give an image and a later copy of it\n",
		before, after, differ);
	return true;
}

/* The blocks that differ between two images of one size, as writes (runs
 * of adjacent blocks merged); the written bytes live in `changed`. */
struct transition {
	struct chk_write *w;
	size_t nw;
	uint8_t *changed;
	size_t nchanged;
};

static void transition_free(struct transition *t)
{
	free(t->w);
	free(t->changed);
}

/* The changed blocks of a and b into changed/offs; 0 or -1 after a message. */
static int changed_blocks(struct image *a, struct image *b, uint32_t bs, struct transition *t,
			  uint64_t **offs)
{
	size_t chunk = (size_t)4 << 20, cap = 0;
	uint8_t *chunk_a = malloc(chunk), *chunk_b = malloc(chunk);
	int r = chunk_a && chunk_b ? 0 : -1;

	if (r)
		fprintf(stderr, "recon-check: out of memory\n");
	for (size_t pos = 0; pos < a->size && !r; pos += chunk) {
		size_t len = a->size - pos < chunk ? a->size - pos : chunk;
		if (image_read(a, pos, chunk_a, len) || image_read(b, pos, chunk_b, len)) {
			fprintf(stderr, "recon-check: read error\n");
			r = -1;
			break;
		}
		for (size_t k = 0; k + bs <= len && !r; k += bs) {
			if (!memcmp(chunk_a + k, chunk_b + k, bs))
				continue;
			if (t->nchanged == cap) {
				cap = cap ? cap * 2 : 256;
				uint8_t *nc = realloc(t->changed, cap * bs);
				uint64_t *no = realloc(*offs, cap * sizeof(*no));
				if (nc)
					t->changed = nc;
				if (no)
					*offs = no;
				if (!nc || !no) {
					fprintf(stderr, "recon-check: out of memory\n");
					r = -1;
					break;
				}
			}
			memcpy(t->changed + t->nchanged * bs, chunk_b + k, bs);
			(*offs)[t->nchanged++] = pos + k;
		}
	}
	free(chunk_a);
	free(chunk_b);
	return r;
}

/* The transition from a to b as writes; 0 or -1 after a message. */
static int image_transition(struct image *a, struct image *b, uint32_t bs, struct transition *t)
{
	uint64_t *offs = NULL;
	size_t capw = 0;
	int r = changed_blocks(a, b, bs, t, &offs);

	for (size_t i = 0; i < t->nchanged && !r; i++) {
		struct chk_write *last = t->nw ? &t->w[t->nw - 1] : NULL;
		/* merge runs of differing blocks into one write */
		if (last && last->offset + last->len == offs[i] && last->len < (1u << 30)) {
			last->len += bs;
			continue;
		}
		if (t->nw == capw) {
			capw = capw ? capw * 2 : 1024;
			struct chk_write *nwp = realloc(t->w, capw * sizeof(*nwp));
			if (!nwp) {
				fprintf(stderr, "recon-check: out of memory\n");
				r = -1;
				break;
			}
			t->w = nwp;
		}
		t->w[t->nw++] = (struct chk_write){ offs[i], bs, t->changed + i * bs };
	}
	free(offs);
	return r;
}

static int do_transition(const char *before, const char *after, bool verbose)
{
	struct image a = { .fd = -1 }, b = { .fd = -1 };
	struct transition t = { 0 };
	int rc = 2;
	struct chk_fs *fs = NULL;
	if (open_image(&a, before) || open_image(&b, after))
		goto out;
	if (a.size != b.size) {
		fprintf(stderr, "recon-check: %s and %s differ in size (%zu vs %zu bytes)\n", before, after, a.size, b.size);
		goto out;
	}
	struct ext2_super_block asb, bsb;
	if (read_super(&b, &asb) || asb.s_magic != EXT2_SUPER_MAGIC) {
		fprintf(stderr, "recon-check: %s: not an ext2/ext3 file system\n", after);
		goto out;
	}
	if (!read_super(&a, &bsb) && bsb.s_magic == EXT2_SUPER_MAGIC &&
	    different_file_systems(&bsb, &asb, before, after))
		goto out;
	if (attach_image(&a, &fs))
		goto out;
	if (needs_recovery(&a)) {
		fprintf(stderr, "recon-check: %s: the journal needs recovery (mount it or run e2fsck first)\n", before);
		goto out;
	}
	if (image_transition(&a, &b, chk_block_size(fs), &t))
		goto out;
	struct chk_verdict *v;
	int r = chk_check(fs, t.w, t.nw, &v);
	if (r) {
		fprintf(stderr, "recon-check: check failed: %s\n", strerror(-r));
		goto out;
	}
	char what[PATH_MAX * 2 + 8];
	snprintf(what, sizeof(what), "%s -> %s", before, after);
	rc = print_verdict(v, what, false, verbose) ? 1 : 0;
	if (rc == 0 && verbose)
		printf("%s: approved (%zu blocks changed, %zu change records)\n", what, t.nchanged,
		       chk_verdict_nrecords(v));
	chk_verdict_free(v);
	print_stats(fs);
out:
	transition_free(&t);
	chk_detach(fs);
	close_image(&a);
	close_image(&b);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: recon-check [--verbose] [--stats] BEFORE.img AFTER.img\n"
		   "       recon-check [--verbose] --scan IMAGE\n"
		   "       recon-check [--scan] --list-invariants\n"
		   "       recon-check --help | --version\n"
		   "Exit status: 0 approved / consistent, 1 rejected / not consistent, 2 cannot judge.\n");
}

static void print_version(void)
{
	const char *lib = NULL, *date = NULL;
	ext2fs_get_library_version(&lib, &date);
	printf("recon-check %s (libext2fs %s, %s)\n", RECON_VERSION, lib ? lib : "?", date ? date : "?");
}

int main(int argc, char **argv)
{
	bool verbose = false, scan = false, list = false;
	const char *args[2];
	int nargs = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--verbose") || !strcmp(argv[i], "-v")) {
			verbose = true;
		} else if (!strcmp(argv[i], "--stats")) {
			want_stats = true;
		} else if (!strcmp(argv[i], "--scan")) {
			scan = true;
		} else if (!strcmp(argv[i], "--list-invariants")) {
			list = true;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--version") || !strcmp(argv[i], "-V")) {
			print_version();
			return 0;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "recon-check: unknown option %s\n", argv[i]);
			usage(stderr);
			return 2;
		} else if (nargs < 2) {
			args[nargs++] = argv[i];
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (list && nargs == 0) {
		list_invariants(scan);
		return 0;
	}
	if (scan && nargs == 1 && !list)
		return do_scan(args[0], verbose);
	if (!scan && nargs == 2 && !list)
		return do_transition(args[0], args[1], verbose);
	usage(stderr);
	return 2;
}
