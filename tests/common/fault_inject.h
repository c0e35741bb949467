/*
 * tests/common/fault_inject.h - failure injection for the C unit tests, in
 * SQLite's manner: arm a countdown, run an operation, and the Nth call to
 * one of the wrapped functions from then on fails as the system would fail
 * it (allocations return NULL with ENOMEM; pread, pwrite and fdatasync
 * return -1 with EIO).  Run the operation again with N = 1, 2, ... until it
 * completes without reaching the Nth call: every call site has then failed
 * once.
 *
 * The wrapped functions are those of the objects linked into the test
 * executable (the test, and the static checker and io libraries): the link
 * of a test that uses this passes -Wl,--wrap=NAME for each (fault_inject_dep
 * in tests/common/meson.build).  Shared libraries (libext2fs, libc itself)
 * are not affected.  Production binaries never link this.
 *
 * Threads: the countdowns are atomic; a failure is injected on whichever
 * thread makes the Nth call.
 */
#ifndef RECON_TESTS_FAULT_INJECT_H
#define RECON_TESTS_FAULT_INJECT_H

#include <stdbool.h>

enum fault_kind {
	FAULT_ALLOC,	/* malloc, calloc, realloc, strdup */
	FAULT_IO,	/* pread, pwrite, fdatasync */
	FAULT_KINDS
};

/* Fail the nth call of this kind from now on (1 = the next), that call
 * only, and start counting calls anew (the fired flag cleared).  n = 0
 * disarms and keeps the count and the flag: a test that retries a failed
 * call with nothing failing still learns whether its run reached the Nth. */
void fault_arm(enum fault_kind kind, unsigned long n);

/* Whether the armed failure was injected. */
bool fault_fired(enum fault_kind kind);

/* The name of the call that failed ("malloc", "pwrite", ...), or NULL. */
const char *fault_fired_call(enum fault_kind kind);

/* Called where a failure is injected: a place for a debugger's breakpoint. */
void fault_injected(const char *call);

/* Calls of this kind since the last fault_arm. */
unsigned long fault_calls(enum fault_kind kind);

#endif
