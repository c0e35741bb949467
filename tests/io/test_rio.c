/*
 * tests/io/test_rio.c - io/ (rio_io_manager) on real images: cache coherence,
 * block-size switches, byte writes, the data path, the pread/pwrite fallback,
 * transactions, power-cut injection, journal recovery and injected
 * corruption.  `test_rio NAME` runs one test; exit 0 pass, 77 skip, 1 fail.
 * Every file-system image is checked with `e2fsck -fn` after.  The tests are
 * in test_rio_channel.c (the channel and libext2fs over it), test_rio_txn.c
 * (transactions) and test_rio_crash.c (power cuts and corruption); what they
 * share is in rio_test.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rio_test.h"

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test_rio channel|fallback|nocache|blockdev|eviction|sparse|fs|fs-fallback|crash|crash-fs|"
			"journal-recover|txn-inplace|txn-journal|txn-checker|txn-async|txn-ids|txn-begin|txn-rollback|txn-flush|early-attach|crash-sweep|crash-sweep-full|corrupt|corrupt-ext2|corrupt-log\n");
		return 2;
	}
	snprintf(scratch, sizeof(scratch), "/tmp/rio-test-%s-XXXXXX", argv[1]);
	if (!mkdtemp(scratch)) {
		perror("mkdtemp");
		return 77;
	}
	add_error_table(&et_ext2_error_table);
	const char *t = argv[1];
	if (!strcmp(t, "channel"))
		test_channel(false, 8);
	else if (!strcmp(t, "fallback"))
		test_channel(true, 8);
	else if (!strcmp(t, "nocache"))
		test_channel(false, 0);
	else if (!strcmp(t, "blockdev"))
		test_blockdev();
	else if (!strcmp(t, "eviction"))
		test_eviction();
	else if (!strcmp(t, "sparse"))
		test_sparse();
	else if (!strcmp(t, "fs")) {
		test_fs("-t ext3 -b 1024", false, 8);
		if (!failures)
			test_fs("-t ext3 -b 4096", false, 8);
		if (!failures)
			test_fs("-t ext2 -b 4096", false, 0);
	} else if (!strcmp(t, "fs-fallback"))
		test_fs("-t ext3 -b 1024", true, 1);
	else if (!strcmp(t, "crash")) {
		test_crash(false);
		if (!failures)
			test_crash(true);
	} else if (!strcmp(t, "crash-fs"))
		test_crash_fs();
	else if (!strcmp(t, "journal-recover"))
		test_journal_recover();
	else if (!strcmp(t, "txn-inplace"))
		test_txn(false, false);
	else if (!strcmp(t, "txn-journal"))
		test_txn(true, false);
	else if (!strcmp(t, "txn-checker"))
		test_txn(true, true);
	else if (!strcmp(t, "txn-async")) {
		g_async = true;
		test_txn(true, false);
		if (!failures)
			test_txn(false, false);
		if (!failures)
			test_txn(true, true);
		if (!failures)
			test_async_small(true);
		if (!failures)
			test_async_small(false);
	} else if (!strcmp(t, "txn-ids")) {
		test_txn_ids();
	} else if (!strcmp(t, "txn-begin")) {
		test_txn_commit_begin();
	} else if (!strcmp(t, "txn-rollback")) {
		test_rollback(true);
		if (!failures)
			test_rollback(false);
	} else if (!strcmp(t, "crash-sweep"))
		test_crash_sweep(40, 2);
	else if (!strcmp(t, "crash-sweep-full"))
		test_crash_sweep(500, 3);
	else if (!strcmp(t, "corrupt"))
		test_corrupt(true);
	else if (!strcmp(t, "corrupt-ext2"))
		test_corrupt(false);
	else if (!strcmp(t, "corrupt-log"))
		test_corrupt_log();
	else if (!strcmp(t, "txn-flush"))
		test_txn_flush();
	else if (!strcmp(t, "early-attach"))
		test_early_attach();
	else {
		fprintf(stderr, "unknown test %s\n", t);
		return 2;
	}
	if (!failures)
		run_shell("rm -rf %s", scratch);
	else
		fprintf(stderr, "scratch kept: %s\n", scratch);
	printf("%s: %s\n", t, failures ? "FAIL" : "ok");
	return failures ? 1 : 0;
}
