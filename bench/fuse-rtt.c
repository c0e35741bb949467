/*
 * bench/fuse-rtt.c - the cost of one request round trip to a file system.
 *
 * usage: fuse-rtt PATH [CALLS]
 *
 * Times CALLS (default 20000) getxattr("user.recon-rtt") calls on PATH, in
 * batches of 1000, and prints the median batch's cost per call in
 * microseconds.  The attribute does not exist: on a FUSE mount each call is
 * one GETXATTR request answered ENODATA (the kernel caches no xattrs), so
 * the figure is the machine's FUSE round trip plus the daemon's cheapest
 * answer; on kernel ext3 it is the in-kernel lookup.  Bench results carry it
 * so ratios from two machines can be compared.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/xattr.h>
#include <time.h>

#define BATCH 1000

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: fuse-rtt PATH [CALLS]\n");
		return 2;
	}
	long calls = argc == 3 ? strtol(argv[2], NULL, 10) : 20000;
	if (calls < BATCH) {
		fprintf(stderr, "fuse-rtt: CALLS must be at least %d\n", BATCH);
		return 2;
	}
	size_t nb = (size_t)(calls / BATCH);
	double *per = calloc(nb, sizeof(*per));
	if (!per) {
		perror("fuse-rtt");
		return 1;
	}
	char v[16];
	for (size_t b = 0; b < nb; b++) {
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (int i = 0; i < BATCH; i++) {
			if (getxattr(argv[1], "user.recon-rtt", v, sizeof(v)) >= 0 ||
			    (errno != ENODATA && errno != ENOTSUP)) {
				fprintf(stderr, "fuse-rtt: getxattr %s: %s\n", argv[1],
					errno ? "unexpected answer" : "attribute exists");
				free(per);
				return 1;
			}
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		per[b] = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / BATCH / 1e3;
	}
	qsort(per, nb, sizeof(*per), cmp_double);
	printf("%.2f\n", per[nb / 2]);
	free(per);
	return 0;
}
