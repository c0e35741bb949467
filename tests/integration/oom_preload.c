/*
 * tests/integration/oom_preload.c - allocation-failure injection for the
 * running daemon, loaded with LD_PRELOAD by tests/integration/oom.sh (built
 * as a module of the tests; the daemon never links it).
 *
 * Environment:
 *   RECON_OOM_NTH=N    N >= 1: once armed, the Nth allocation from then on
 *                      (malloc, calloc, realloc, posix_memalign, aligned_alloc,
 *                      memalign, on any thread, in any library: the daemon,
 *                      libext2fs, libfuse, libc's own) returns NULL with
 *                      errno ENOMEM; that one only.  N = 0: count, never fail.
 *   RECON_OOM_LOG=PATH where to write what happened (appended): "fired N SIZE"
 *                      and the caller's stack when it fails one, "signal S"
 *                      and the stack on SIGABRT, SIGSEGV or SIGBUS, "calls K"
 *                      at exit (allocations since arming).
 * Armed by SIGUSR2, which the test sends once the mount is up: the mount
 * itself never sees a failure, and the count starts from the workload.
 * Unset, the module does nothing (no handler, no counting).
 *
 * The allocator underneath is glibc's (__libc_malloc and friends), which
 * needs no dlsym and so no allocation of its own; free() is glibc's too.
 */
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void *__libc_memalign(size_t align, size_t size);

static atomic_bool armed;
static atomic_ulong calls;
static unsigned long nth;
static int log_fd = -1;
static bool active;

static void log_line(const char *what, unsigned long a, unsigned long b)
{
	char line[96];
	int n = snprintf(line, sizeof(line), "%s %lu %lu\n", what, a, b);

	if (log_fd >= 0 && n > 0 && write(log_fd, line, (size_t)n) < 0)
		return;
}

/* Whether this allocation is the one to fail. */
static bool fail_now(size_t size)
{
	unsigned long n;

	if (!active || !atomic_load_explicit(&armed, memory_order_relaxed))
		return false;
	n = atomic_fetch_add(&calls, 1) + 1;
	if (nth == 0 || n != nth)
		return false;
	log_line("fired", n, size);
	if (log_fd >= 0) {
		void *frames[24];
		int depth = backtrace(frames, 24);

		backtrace_symbols_fd(frames, depth, log_fd);
	}
	errno = ENOMEM;
	return true;
}

void *malloc(size_t size)
{
	return fail_now(size) ? NULL : __libc_malloc(size);
}

void *calloc(size_t n, size_t size)
{
	return fail_now(n * size) ? NULL : __libc_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
	if (p && size == 0)
		return __libc_realloc(p, 0);    /* a free, never failed */
	return fail_now(size) ? NULL : __libc_realloc(p, size);
}

void *memalign(size_t align, size_t size)
{
	return fail_now(size) ? NULL : __libc_memalign(align, size);
}

void *aligned_alloc(size_t align, size_t size)
{
	return fail_now(size) ? NULL : __libc_memalign(align, size);
}

int posix_memalign(void **out, size_t align, size_t size)
{
	void *p;

	if (align < sizeof(void *) || (align & (align - 1)))
		return EINVAL;
	if (fail_now(size))
		return ENOMEM;
	p = __libc_memalign(align, size);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

/* A crash after the failure: its stack into the log, then the default action. */
static void crashed(int sig)
{
	void *frames[32];
	int depth = backtrace(frames, 32);

	log_line("signal", (unsigned long)sig, 0);
	if (log_fd >= 0)
		backtrace_symbols_fd(frames, depth, log_fd);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void arm(int sig)
{
	(void)sig;
	atomic_store(&calls, 0);
	atomic_store(&armed, true);
}

__attribute__((constructor)) static void oom_init(void)
{
	const char *n = getenv("RECON_OOM_NTH"), *path = getenv("RECON_OOM_LOG");
	struct sigaction sa;
	void *warm[2];

	if (!n)
		return;
	nth = strtoul(n, NULL, 10);
	if (path)
		log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	/* backtrace loads libgcc on first use, allocating: do it now */
	backtrace(warm, 2);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = arm;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR2, &sa, NULL);
	sa.sa_handler = crashed;
	sa.sa_flags = SA_RESETHAND;
	sigaction(SIGABRT, &sa, NULL);
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	active = true;
}

__attribute__((destructor)) static void oom_fini(void)
{
	if (active)
		log_line("calls", atomic_load(&calls), nth);
}
