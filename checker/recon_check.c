/*
 * checker/recon_check.c - the recon-check tool.
 *
 *   recon-check [--verbose] BEFORE.img AFTER.img   judge one transition
 *   recon-check [--verbose] --scan IMAGE           the base case
 *   recon-check --list-invariants                  print the invariant table
 *
 * Exit 0 approved / consistent, 1 rejected, 2 bad input (message on stderr).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ext2fs/ext2_fs.h>

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

static void print_verdict(const struct chk_verdict *v, bool verbose)
{
	if (verbose)
		for (size_t i = 0; i < chk_verdict_nrecords(v); i++) {
			print_record(chk_verdict_record(v, i), stdout);
			putchar('\n');
		}
	for (size_t i = 0; i < chk_verdict_nviolations(v); i++) {
		const struct chk_violation *x = chk_verdict_violation(v, i);
		printf("%s: %s: %s", x->inv ? x->inv->id : "?", x->inv ? x->inv->description : "?", x->detail);
		size_t n = x->nrecords < 16 ? x->nrecords : 16;
		for (size_t k = 0; k < n; k++) {
			fputs(k ? "; " : " [", stdout);
			print_record(chk_verdict_record(v, x->records[k]), stdout);
		}
		if (n)
			fputs(x->nrecords > n ? "; ...]" : "]", stdout);
		putchar('\n');
	}
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
	if (r) {
		fprintf(stderr, "recon-check: %s: scan failed: %s\n", path, strerror(-r));
		rc = 2;
	} else {
		print_verdict(v, verbose);
		rc = chk_verdict_ok(v) ? 0 : 1;
		if (needs_recovery(&im))
			fprintf(stderr, "recon-check: %s: note: the journal needs recovery\n", path);
		chk_verdict_free(v);
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

static int do_transition(const char *before, const char *after, bool verbose)
{
	struct image a = { .fd = -1 }, b = { .fd = -1 };
	uint8_t *chunk_a = NULL, *chunk_b = NULL, *changed = NULL;
	int rc = 2;
	struct chk_fs *fs = NULL;
	struct chk_write *w = NULL;
	if (open_image(&a, before) || open_image(&b, after))
		goto out;
	if (a.size != b.size) {
		fprintf(stderr, "recon-check: %s and %s differ in size (%zu vs %zu bytes)\n", before, after, a.size, b.size);
		goto out;
	}
	struct ext2_super_block asb;
	if (read_super(&b, &asb) || asb.s_magic != EXT2_SUPER_MAGIC) {
		fprintf(stderr, "recon-check: %s: not an ext2/ext3 file system\n", after);
		goto out;
	}
	if (attach_image(&a, &fs))
		goto out;
	if (needs_recovery(&a)) {
		fprintf(stderr, "recon-check: %s: the journal needs recovery (mount it or run e2fsck first)\n", before);
		goto out;
	}
	uint32_t bs = chk_block_size(fs);
	size_t chunk = (size_t)4 << 20, nw = 0, capw = 0, nchanged = 0, capchanged = 0;
	uint64_t *offs = NULL;
	chunk_a = malloc(chunk);
	chunk_b = malloc(chunk);
	if (!chunk_a || !chunk_b) {
		fprintf(stderr, "recon-check: out of memory\n");
		goto out;
	}
	for (size_t pos = 0; pos < a.size; pos += chunk) {
		size_t len = a.size - pos < chunk ? a.size - pos : chunk;
		if (image_read(&a, pos, chunk_a, len) || image_read(&b, pos, chunk_b, len)) {
			fprintf(stderr, "recon-check: read error\n");
			free(offs);
			goto out;
		}
		for (size_t k = 0; k + bs <= len; k += bs) {
			if (!memcmp(chunk_a + k, chunk_b + k, bs))
				continue;
			if (nchanged == capchanged) {
				capchanged = capchanged ? capchanged * 2 : 256;
				uint8_t *nc = realloc(changed, capchanged * bs);
				uint64_t *no = realloc(offs, capchanged * sizeof(*no));
				if (nc)
					changed = nc;
				if (no)
					offs = no;
				if (!nc || !no) {
					fprintf(stderr, "recon-check: out of memory\n");
					free(offs);
					goto out;
				}
			}
			memcpy(changed + nchanged * bs, chunk_b + k, bs);
			offs[nchanged++] = pos + k;
		}
	}
	for (size_t i = 0; i < nchanged; i++) {
		/* merge runs of differing blocks into one write */
		if (nw && w[nw - 1].offset + w[nw - 1].len == offs[i] && w[nw - 1].len < (1u << 30)) {
			w[nw - 1].len += bs;
			continue;
		}
		if (nw == capw) {
			capw = capw ? capw * 2 : 1024;
			struct chk_write *nwp = realloc(w, capw * sizeof(*w));
			if (!nwp) {
				fprintf(stderr, "recon-check: out of memory\n");
				free(offs);
				goto out;
			}
			w = nwp;
		}
		w[nw++] = (struct chk_write){ offs[i], bs, changed + i * bs };
	}
	free(offs);
	struct chk_verdict *v;
	int r = chk_check(fs, w, nw, &v);
	if (r) {
		fprintf(stderr, "recon-check: check failed: %s\n", strerror(-r));
		goto out;
	}
	print_verdict(v, verbose);
	rc = chk_verdict_ok(v) ? 0 : 1;
	chk_verdict_free(v);
	print_stats(fs);
out:
	free(w);
	free(chunk_a);
	free(chunk_b);
	free(changed);
	chk_detach(fs);
	close_image(&a);
	close_image(&b);
	return rc;
}

static void usage(void)
{
	fprintf(stderr, "usage: recon-check [--verbose] [--stats] BEFORE.img AFTER.img\n"
			"       recon-check [--verbose] --scan IMAGE\n"
			"       recon-check --list-invariants\n");
}

int main(int argc, char **argv)
{
	bool verbose = false, scan = false;
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
			for (size_t k = 0; k < chk_invariant_count(); k++)
				printf("%-24s %s\n", chk_invariant_at(k)->id, chk_invariant_at(k)->description);
			return 0;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage();
			return 0;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "recon-check: unknown option %s\n", argv[i]);
			usage();
			return 2;
		} else if (nargs < 2) {
			args[nargs++] = argv[i];
		} else {
			usage();
			return 2;
		}
	}
	if (scan && nargs == 1)
		return do_scan(args[0], verbose);
	if (!scan && nargs == 2)
		return do_transition(args[0], args[1], verbose);
	usage();
	return 2;
}
