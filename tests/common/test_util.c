/*
 * tests/common/test_util.c - what the C tests share (see test_util.h).
 */
#include "test_util.h"

#include <stdarg.h>
#include <sys/wait.h>

void test_report(const char *kind, const char *file, int line, const char *cond,
		 const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s %s:%d: %s: ", kind, file, line, cond);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int run_shell(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

int e2fsck_fn(const char *img, const char *log_dir)
{
	int rc = run_shell("e2fsck -fn '%s' >'%s/fsck.log' 2>&1", img, log_dir);

	if (rc != 0) {
		fprintf(stderr, "e2fsck -fn %s exited %d:\n", img, rc);
		run_shell("cat '%s/fsck.log' >&2", log_dir);
	}
	return rc;
}

void make_image_or_skip(const char *img, const char *opts, unsigned size_kb)
{
	if (run_shell("rm -f '%s' && mke2fs -q -F %s '%s' %u >/dev/null 2>&1", img, opts, img,
		      size_kb) != 0) {
		fprintf(stderr, "mke2fs %s failed\n", opts);
		exit(77);
	}
}
