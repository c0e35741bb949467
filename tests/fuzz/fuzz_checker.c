/*
 * tests/fuzz/fuzz_checker.c - libFuzzer target for the checker, through
 * checker.h only.
 *
 * At start-up it builds the fuzzers' small populated ext3 and ext4 images
 * (1 KiB and 4 KiB blocks, tests/fuzz/fuzz_image.c: mke2fs + debugfs into a
 * scratch directory, nothing checked in) and keeps them in memory.  An input is
 *
 *   byte 0          bit 0: block size (0 = 1 KiB, 1 = 4 KiB)
 *                   bit 1: mode (0 = transaction, 1 = scan of a mutated image)
 *                   bit 2: the ext4 image (extent trees, flex_bg, uninit
 *                          groups, metadata_csum)
 *                   bit 3: (ext4) checksums of the blocks the records touch
 *                          recomputed, so that the parsers behind them are
 *                          reached; the changed blocks are then written whole
 *   then records    [u8 sel][u16 off][u8 len][len bytes]
 *                   sel < 255: the sel-th metadata block of the image (mod the
 *                   list); sel 255: the next u32 is a block number (mod blocks)
 *
 * Transaction mode: attach to the image, chk_check the records as writes
 * (partial blocks, overlapping, in input order), chk_advance when approved,
 * then check the same writes again and scan.  Scan mode: attach to the image
 * with the records applied and chk_scan it.  Verdicts are not judged (the
 * input may be any corruption); crashes, sanitizer reports, leaks and hangs
 * are what the fuzzer finds.
 *
 *   CC=clang meson setup build-fuzz -Dfuzzer=true
 *   ninja -C build-fuzz tests/fuzz/fuzz_checker
 *   build-fuzz/tests/fuzz/fuzz_checker -max_total_time=60 CORPUS_DIR
 * (bench/fuzz-checker wraps this).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checker.h"
#include "fuzz_image.h"

static struct fz_image images[4];           /* ext3 1 KiB, 4 KiB, ext4 1 KiB, 4 KiB */

struct mem { const uint8_t *p; size_t n; };
static int mem_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	const struct mem *m = ctx;
	if (off > m->n || len > m->n - off)
		return -EIO;
	memcpy(buf, m->p + off, len);
	return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	char dir[] = "/tmp/chk-libfuzzer-XXXXXX", path[512];
	if (!mkdtemp(dir))
		abort();
	static const uint32_t sizes[] = { 1024, 4096 };
	for (int i = 0; i < 4; i++) {
		fz_ext4 = i >= 2;
		if (fz_make_base(dir, sizes[i % 2], 0, path, sizeof(path)) || fz_load(path, &images[i])) {
			fprintf(stderr, "fuzz_checker: cannot build the seed images (mke2fs, debugfs, e2fsck?)\n");
			abort();
		}
	}
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		fprintf(stderr, "fuzz_checker: cannot remove %s\n", dir);
	return 0;
}

#define MAX_WRITES 64

/* the image with the writes applied (a copy; NULL without memory) */
static uint8_t *patched(const struct fz_image *im, const struct chk_write *w, size_t nw)
{
	uint8_t *img = malloc(im->size);
	if (!img)
		return NULL;
	memcpy(img, im->data, im->size);
	for (size_t i = 0; i < nw; i++)
		memcpy(img + w[i].offset, w[i].data, w[i].len);
	return img;
}

/* The writes applied with every checksum they touch recomputed, as whole
 * blocks (each differing block of the image, MAX_WRITES at most): the
 * returned buffer holds their data. */
static uint8_t *repair_writes(const struct fz_image *im, struct chk_write *w, size_t *nw)
{
	uint8_t *img = patched(im, w, *nw);
	if (!img)
		return NULL;
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < *nw; i++)
			fz_repair_range(im, img, w[i].offset, w[i].len, pass);
	size_t n = 0;
	for (uint64_t b = 0; b < im->size / im->bs && n < MAX_WRITES; b++)
		if (memcmp(img + b * im->bs, im->data + b * im->bs, im->bs))
			w[n++] = (struct chk_write){ b * im->bs, im->bs, img + b * im->bs };
	*nw = n;
	return img;
}

static int run_scan(const struct fz_image *im, const struct chk_write *w, size_t nw)
{
	char err[256];
	struct chk_fs *fs;
	struct chk_verdict *v;
	uint8_t *img = patched(im, w, nw);
	if (!img)
		return 0;
	struct mem m = { img, im->size };
	if (chk_attach(&fs, mem_read, &m, NULL, err, sizeof(err)) == 0) {
		if (chk_scan(fs, &v) == 0)
			chk_verdict_free(v);
		chk_detach(fs);
	}
	free(img);
	return 0;
}

static int run_transaction(const struct fz_image *im, const struct chk_write *w, size_t nw)
{
	char err[256];
	struct chk_fs *fs;
	struct chk_verdict *v;
	struct mem m = { im->data, im->size };
	struct chk_options opt = { .cache_bytes = 64 * 1024 };   /* small: evictions too */
	if (chk_attach(&fs, mem_read, &m, &opt, err, sizeof(err)))
		abort();                             /* the seed image always attaches */
	if (chk_check(fs, w, nw, &v) == 0) {
		bool ok = chk_verdict_ok(v);
		char line[512];
		for (size_t i = 0; i < chk_verdict_nrecords(v); i++)
			chk_record_format(chk_verdict_record(v, i), line, sizeof(line));
		for (size_t i = 0; i < chk_verdict_nviolations(v); i++) {
			const struct chk_violation *x = chk_verdict_violation(v, i);
			if (!x->inv || !x->detail)
				abort();
			for (size_t k = 0; k < x->nrecords; k++)
				if (x->records[k] >= chk_verdict_nrecords(v))
					abort();
		}
		if (ok) {
			/* the approved after-state, served from a patched copy, is the new base */
			uint8_t *img = patched(im, w, nw);
			if (img) {
				struct mem m2 = { img, im->size };
				if (chk_advance(fs, v))
					abort();
				/* the checker reads through the callback from now on: point it at the after-state */
				m = m2;
				struct chk_verdict *v2;
				if (chk_check(fs, w, nw, &v2) == 0)
					chk_verdict_free(v2);
				struct chk_verdict *sv;
				if (chk_scan(fs, &sv) == 0)
					chk_verdict_free(sv);
				m = (struct mem){ im->data, im->size };
				free(img);
			}
		}
		chk_verdict_free(v);
	}
	chk_detach(fs);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const struct fz_image *im = &images[(data[0] & 1) | (data[0] & 4 ? 2 : 0)];
	bool scan_mode = data[0] & 2, repair = (data[0] & 4) && (data[0] & 8);
	uint32_t bs = im->bs;
	struct chk_write w[MAX_WRITES];
	size_t nw = 0, pos = 1;
	while (pos + 4 <= size && nw < MAX_WRITES) {
		uint8_t sel = data[pos];
		uint16_t off;
		memcpy(&off, data + pos + 1, 2);
		uint8_t len = data[pos + 3];
		pos += 4;
		uint64_t blk;
		if (sel == 255) {
			uint32_t b = 0;
			if (pos + 4 > size)
				break;
			memcpy(&b, data + pos, 4);
			pos += 4;
			blk = b % (im->size / bs);
		} else {
			blk = im->meta[sel % im->nmeta].blk;
		}
		off %= bs;
		if (len > size - pos)
			len = (uint8_t)(size - pos);
		if (len > bs - off)
			len = (uint8_t)(bs - off);
		if (!len)
			break;
		w[nw++] = (struct chk_write){ blk * bs + off, len, data + pos };
		pos += len;
	}
	uint8_t *repaired = NULL;
	if (repair && nw && !(repaired = repair_writes(im, w, &nw)))
		return 0;
	int r = scan_mode ? run_scan(im, w, nw) : run_transaction(im, w, nw);
	free(repaired);
	return r;
}
