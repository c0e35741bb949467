/*
 * tests/common/test_util.h - what the C tests share: reporting a failed
 * check, running a shell command, e2fsck -fn on an image, a fresh mke2fs
 * image.
 *
 * A test counts its failures in its own `int failures` (TEST_CHECK and
 * TEST_CHECK_RET and TEST_REQUIRE expect that name in scope): a failed
 * check goes on, returns -1 or exits.  Single-threaded use only.
 */
#ifndef RECON_TESTS_TEST_UTIL_H
#define RECON_TESTS_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Print "KIND FILE:LINE: COND: message" to stderr (KIND: FAIL or FATAL). */
void test_report(const char *kind, const char *file, int line, const char *cond,
		 const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* A false cond is reported and counted; the test goes on. */
#define TEST_CHECK(cond, ...)                                                    \
	do {                                                                     \
		if (!(cond)) {                                                   \
			test_report("FAIL", __FILE__, __LINE__, #cond, __VA_ARGS__); \
			failures++;                                              \
		}                                                                \
	} while (0)

/* A false cond is reported and counted; the calling function returns -1
 * (for tests whose steps are functions that give up at their first fault). */
#define TEST_CHECK_RET(cond, ...)                                                \
	do {                                                                     \
		if (!(cond)) {                                                   \
			test_report("FAIL", __FILE__, __LINE__, #cond, __VA_ARGS__); \
			failures++;                                              \
			return -1;                                               \
		}                                                                \
	} while (0)

/* A false cond is reported and ends the test (exit 1): it cannot go on. */
#define TEST_REQUIRE(cond, ...)                                                  \
	do {                                                                     \
		if (!(cond)) {                                                   \
			test_report("FATAL", __FILE__, __LINE__, #cond, __VA_ARGS__); \
			exit(1);                                                 \
		}                                                                \
	} while (0)

/* Run the shell command made from fmt (at most 4 KiB); its exit status, or
 * -1 when it could not run or did not exit normally. */
int run_shell(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* e2fsck -fn img, its output in log_dir/fsck.log; on a non-zero exit that
 * output goes to stderr.  Returns e2fsck's exit status (0: clean). */
int e2fsck_fn(const char *img, const char *log_dir);

/* A fresh image: mke2fs -q -F opts img size_kb.  A failing mke2fs means this
 * machine cannot run the test: exit 77 (skip). */
void make_image_or_skip(const char *img, const char *opts, unsigned size_kb);

/* A whole file in memory (malloc'd; free it), its size in *len; NULL (and
 * *len 0) when it cannot be read or is empty. */
uint8_t *test_slurp(const char *path, size_t *len);

/* An image in memory, read as the checker reads a device (struct
 * chk_options' read callback, ctx a struct test_mem): -EIO past its end. */
struct test_mem {
	const uint8_t *p;
	size_t n;
};
int test_mem_read(void *ctx, uint64_t off, void *buf, size_t len);

#endif
