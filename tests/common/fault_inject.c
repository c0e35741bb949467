/*
 * tests/common/fault_inject.c - the wrapped allocation and I/O functions
 * (pread and pwrite are pread64 and pwrite64 under _FILE_OFFSET_BITS=64)
 * (see fault_inject.h).  The linker sends every call of the wrapped objects
 * to __wrap_NAME; __real_NAME is the function itself.
 */
#include "fault_inject.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/types.h>

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
char *__real_strdup(const char *s);
ssize_t __real_pread64(int fd, void *buf, size_t len, off_t off);
ssize_t __real_pwrite64(int fd, const void *buf, size_t len, off_t off);
int __real_fdatasync(int fd);

void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
char *__wrap_strdup(const char *s);
ssize_t __wrap_pread64(int fd, void *buf, size_t len, off_t off);
ssize_t __wrap_pwrite64(int fd, const void *buf, size_t len, off_t off);
int __wrap_fdatasync(int fd);

static struct {
	unsigned long target;	/* 0: off */
	unsigned long calls;
	bool fired;
} armed[FAULT_KINDS];

void fault_arm(enum fault_kind kind, unsigned long n)
{
	__atomic_store_n(&armed[kind].target, 0, __ATOMIC_SEQ_CST);
	if (!n)
		return;
	__atomic_store_n(&armed[kind].calls, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&armed[kind].fired, false, __ATOMIC_SEQ_CST);
	__atomic_store_n(&armed[kind].target, n, __ATOMIC_SEQ_CST);
}

bool fault_fired(enum fault_kind kind)
{
	return __atomic_load_n(&armed[kind].fired, __ATOMIC_SEQ_CST);
}

unsigned long fault_calls(enum fault_kind kind)
{
	return __atomic_load_n(&armed[kind].calls, __ATOMIC_SEQ_CST);
}

/* Where a failure is injected: a breakpoint for a debugger (gdb -ex 'break
 * fault_injected'), and the name of the call for fault_fired_call. */
static const char *fired_call[FAULT_KINDS];

__attribute__((noinline)) void fault_injected(const char *call)
{
	__asm__ volatile("" ::: "memory");
	(void)call;
}

const char *fault_fired_call(enum fault_kind kind)
{
	return fault_fired(kind) ? fired_call[kind] : NULL;
}

/* Counts the call; true when it is the one to fail. */
static bool should_fail(enum fault_kind kind, const char *call)
{
	unsigned long target = __atomic_load_n(&armed[kind].target, __ATOMIC_SEQ_CST);
	unsigned long n = __atomic_add_fetch(&armed[kind].calls, 1, __ATOMIC_SEQ_CST);

	if (!target || n != target)
		return false;
	fired_call[kind] = call;
	__atomic_store_n(&armed[kind].fired, true, __ATOMIC_SEQ_CST);
	fault_injected(call);
	return true;
}

void *__wrap_malloc(size_t size)
{
	if (should_fail(FAULT_ALLOC, "malloc")) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
	if (should_fail(FAULT_ALLOC, "calloc")) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size)
{
	if (should_fail(FAULT_ALLOC, "realloc")) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_realloc(p, size);
}

char *__wrap_strdup(const char *s)
{
	if (should_fail(FAULT_ALLOC, "strdup")) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_strdup(s);
}

ssize_t __wrap_pread64(int fd, void *buf, size_t len, off_t off)
{
	if (should_fail(FAULT_IO, "pread")) {
		errno = EIO;
		return -1;
	}
	return __real_pread64(fd, buf, len, off);
}

ssize_t __wrap_pwrite64(int fd, const void *buf, size_t len, off_t off)
{
	if (should_fail(FAULT_IO, "pwrite")) {
		errno = EIO;
		return -1;
	}
	return __real_pwrite64(fd, buf, len, off);
}

int __wrap_fdatasync(int fd)
{
	if (should_fail(FAULT_IO, "fdatasync")) {
		errno = EIO;
		return -1;
	}
	return __real_fdatasync(fd);
}
