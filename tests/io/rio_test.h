/*
 * tests/io/rio_test.h - what the parts of test_rio share: the check macros,
 * the scratch directory and failure count, the helpers of rio_test.c and
 * each part's tests (main in test_rio.c calls them by name).
 */
#ifndef RECON_TESTS_IO_RIO_TEST_H
#define RECON_TESTS_IO_RIO_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "io.h"
#include "test_util.h"

/* the run's scratch directory (kept when a test fails) */
extern char scratch[256];
/* failed checks so far; a check that fails returns from its function */
extern int failures;
/* set_txn_cfg's commit thread and max_transaction_blocks */
extern bool g_async;
extern unsigned g_max_blocks;

#define CHECK(cond, ...) do { \
	if (!(cond)) { \
		test_report("FAIL", __FILE__, __LINE__, #cond, __VA_ARGS__); \
		failures++; \
		return; \
	} } while (0)
#define CHECK_ERR(expr) do { \
	errcode_t e_ = (expr); \
	if (e_) { \
		fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #expr, error_message(e_)); \
		failures++; \
		return; \
	} } while (0)

/* 1 when `e2fsck -fn` finds PATH clean (its log goes to scratch) */
int fsck_clean(const char *path);
/* rio's configuration for the channel tests: no checker, no commit interval */
void set_cfg(bool no_uring, unsigned cache_mb, uint64_t crash_after, uint64_t seed);
/* rio's configuration for transactions (on_violation=readonly, g_async,
 * g_max_blocks); CORRUPT is the fault_corrupt spec or NULL */
void set_txn_cfg(bool checker, bool journal, uint64_t crash_after, uint64_t seed,
		 const char *corrupt);
/* LEN bytes of a pattern that differs with SEED and with the offset */
void fill(unsigned char *buf, size_t len, unsigned seed);
/* LEN bytes at OFF of the file PATH, past any cache; 0 or -1 */
int raw_read(const char *path, uint64_t off, void *buf, size_t len);
/* NFILES files PREFIX<i> in the root of NBLOCKS blocks each (fill's pattern,
 * seed i + 100), data through rio_data_io; a failure is counted */
void make_files(ext2_filsys fs, const char *prefix, unsigned nfiles, unsigned nblocks);
/* the data of the files f<i> that make_files wrote reads back */
void verify_files(ext2_filsys fs, unsigned nfiles, unsigned nblocks);

/* test_rio_channel.c: the channel and libext2fs over it */
void test_channel(bool no_uring, unsigned cache_mb);
void test_sparse(void);
void test_eviction(void);
void test_fs(const char *mkfs_opts, bool no_uring, unsigned cache_mb);
void test_blockdev(void);

/* test_rio_txn.c: transactions */
void test_txn(bool journal, bool checker);
void test_early_attach(void);
void test_rollback(bool journal);
void test_txn_ids(void);
void test_txn_flush(void);
void test_txn_commit_begin(void);

/* test_rio_crash.c: power cuts and injected corruption */
void test_crash(bool no_uring);
void test_crash_fs(void);
void test_journal_recover(void);
void test_crash_sweep(unsigned points, unsigned seeds);
void test_async_small(bool journal);
void test_corrupt(bool journal);
void test_corrupt_log(void);

#endif
