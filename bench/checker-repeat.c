/*
 * bench/checker-repeat.c - what one commit costs the checker, without a
 * daemon: the transition BEFORE -> AFTER (every block that differs, as
 * whole-block writes, as io/ hands a commit over) judged by chk_check N
 * times on one chk_fs, each verdict freed (not advanced), as a run of
 * commits of the same size.  Prints the writes, the change records and the
 * thread CPU ms of the checks: min, median, max (the max is usually the
 * first, which takes its memory fresh).
 *
 *   cc -O2 -Ichecker bench/checker-repeat.c BUILD/checker/libchecker.a \
 *      -lext2fs -lcom_err -o checker-repeat
 *   checker-repeat BEFORE.img AFTER.img [N]     (N <= 64, default 15)
 *
 * AFTER: a copy of BEFORE that a workload changed (recon-fuse mounted on
 * it, files made, unmounted).  Exit 1 when a check fails or rejects.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checker.h"

static int read_image(void *ctx, uint64_t off, void *buf, size_t len)
{
	return pread(*(int *)ctx, buf, len, (off_t)off) == (ssize_t)len ? 0 : -EIO;
}

static double thread_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The blocks of after that differ from before (after's data extents only:
 * the images are sparse copies), as writes; NULL when out of memory. */
static struct chk_write *changed_blocks(int fa, int fb, uint32_t bs, off_t size, size_t *nw)
{
	struct chk_write *w = NULL;
	size_t cap = 0;
	uint8_t *a = malloc(bs), *b = NULL;
	*nw = 0;
	for (off_t pos = 0; a && pos < size; pos += bs) {
		off_t data = lseek(fb, pos, SEEK_DATA);
		if (data < 0)
			break;
		if (data > pos) {
			pos = data / bs * bs - bs;
			continue;
		}
		if (!b && !(b = malloc(bs)))
			break;
		if (pread(fa, a, bs, pos) != (ssize_t)bs || pread(fb, b, bs, pos) != (ssize_t)bs ||
		    !memcmp(a, b, bs))
			continue;
		if (*nw == cap) {
			cap = cap ? cap * 2 : 1024;
			struct chk_write *nwp = realloc(w, cap * sizeof(*w));
			if (!nwp)
				break;
			w = nwp;
		}
		w[(*nw)++] = (struct chk_write){ (uint64_t)pos, bs, b };
		b = NULL;
	}
	free(a);
	free(b);
	return w;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: checker-repeat BEFORE.img AFTER.img [N]\n");
		return 2;
	}
	int n = argc > 3 ? atoi(argv[3]) : 15;
	if (n < 1 || n > 64)
		n = 15;
	int fa = open(argv[1], O_RDONLY), fb = open(argv[2], O_RDONLY);
	if (fa < 0 || fb < 0) {
		perror("open");
		return 2;
	}
	struct chk_options opt = { 0 };
	char err[256] = "";
	struct chk_fs *fs;
	if (chk_attach(&fs, read_image, &fa, &opt, err, sizeof(err))) {
		fprintf(stderr, "checker-repeat: %s\n", err);
		return 2;
	}
	struct stat st;
	size_t nw = 0;
	struct chk_write *w = fstat(fa, &st) ? NULL : changed_blocks(fa, fb, chk_block_size(fs), st.st_size, &nw);
	if (!w) {
		fprintf(stderr, "checker-repeat: no changed blocks (or out of memory)\n");
		return 2;
	}
	double ms[64];
	size_t nrecords = 0;
	for (int i = 0; i < n; i++) {
		struct chk_verdict *v;
		double t0 = thread_ms();
		int r = chk_check(fs, w, nw, &v);
		ms[i] = thread_ms() - t0;
		if (r || !chk_verdict_ok(v)) {
			fprintf(stderr, "checker-repeat: %s\n", r ? strerror(-r) : "transition rejected");
			return 1;
		}
		nrecords = chk_verdict_nrecords(v);
		chk_verdict_free(v);
	}
	qsort(ms, (size_t)n, sizeof(ms[0]), cmp_double);
	printf("writes %zu records %zu chk_check ms: min %.1f median %.1f max %.1f (n %d)\n", nw, nrecords,
	       ms[0], ms[n / 2], ms[n - 1], n);
	for (size_t i = 0; i < nw; i++)
		free((void *)w[i].data);
	free(w);
	chk_detach(fs);
	close(fa);
	close(fb);
	return 0;
}
