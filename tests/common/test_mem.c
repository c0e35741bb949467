/*
 * tests/common/test_mem.c - an image held in memory for the checker's
 * tests: read whole from a file, then read back as the checker's read
 * callback reads a device.  Its own object, so a test that links it takes
 * nothing else of test_util.
 */
#include "test_util.h"

#include <errno.h>
#include <string.h>

uint8_t *test_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	*len = 0;
	if (!f)
		return NULL;
	long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
	uint8_t *b = n > 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc((size_t)n) : NULL;
	if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	if (b)
		*len = (size_t)n;
	return b;
}

int test_mem_read(void *ctx, uint64_t off, void *buf, size_t len)
{
	const struct test_mem *m = ctx;
	if (off > m->n || len > m->n - off)
		return -EIO;
	memcpy(buf, m->p + off, len);
	return 0;
}
