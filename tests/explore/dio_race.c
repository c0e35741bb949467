/*
 * dio_race: buffered reads racing asynchronous O_DIRECT writes of the same
 * range (the design of xfstests generic/451).
 *
 * One thread rewrites a file again and again with asynchronous O_DIRECT
 * writes (io_uring), every byte of round g set to g; other threads keep
 * reading the same range through the page cache.  After each round's writes
 * have completed, a buffered read must see round g everywhere: data of an
 * earlier round is stale data the page cache kept past a direct write.
 *
 *   dio_race [-t seconds] [-r readers] [-s size] [-w] FILE
 *   -w: the writer's fd is write-only (O_WRONLY|O_DIRECT), else O_RDWR|O_DIRECT
 * Exit: 0 no stale read, 1 stale data or an error, 2 usage, 77 O_DIRECT or
 * io_uring unsupported here.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PIECE (64u << 10)

static const char *path;
static size_t fsize = 640u << 10;
static atomic_bool stop;
static atomic_ulong reads;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *reader(void *arg)
{
	(void)arg;
	char *b = malloc(fsize);
	int fd = open(path, O_RDONLY);
	if (fd < 0 || !b) {
		perror("dio_race: reader open");
		exit(1);
	}
	while (!atomic_load(&stop)) {
		if (pread(fd, b, fsize, 0) < 0) {
			perror("dio_race: reader pread");
			exit(1);
		}
		atomic_fetch_add(&reads, 1);
	}
	close(fd);
	free(b);
	return NULL;
}

/* first byte of [0, n) that is not g; -1 if none */
static long first_not(const uint8_t *b, size_t n, uint8_t g)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != g)
			return (long)i;
	return -1;
}

int main(int argc, char **argv)
{
	int c, nreaders = 2;
	double secs = 10;
	bool wronly = false;
	while ((c = getopt(argc, argv, "t:r:s:w")) != -1) {
		switch (c) {
		case 't': secs = atof(optarg); break;
		case 'r': nreaders = atoi(optarg); break;
		case 's': fsize = strtoul(optarg, NULL, 0); break;
		case 'w': wronly = true; break;
		default: goto usage;
		}
	}
	if (optind + 1 != argc || nreaders < 0 || nreaders > 16 || !fsize || fsize % PIECE)
		goto usage;
	path = argv[optind];

	int wfd = open(path, (wronly ? O_WRONLY : O_RDWR) | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	if (wfd < 0) {
		fprintf(stderr, "dio_race: open O_DIRECT %s: %s\n", path, strerror(errno));
		return errno == EINVAL ? 77 : 1;
	}
	void *wbuf;
	uint8_t *rbuf = malloc(fsize);
	if (posix_memalign(&wbuf, 4096, fsize) || !rbuf)
		return 1;
	memset(wbuf, 0, fsize);
	if (pwrite(wfd, wbuf, fsize, 0) != (ssize_t)fsize) {
		perror("dio_race: initial write");
		return 1;
	}
	struct io_uring ring;
	int e = io_uring_queue_init(16, &ring, 0);
	if (e) {
		fprintf(stderr, "dio_race: io_uring: %s\n", strerror(-e));
		return 77;
	}
	int cfd = open(path, O_RDONLY);   /* the checking reader: buffered */
	if (cfd < 0) {
		perror("dio_race: open");
		return 1;
	}
	pthread_t th[16];
	for (int i = 0; i < nreaders; i++)
		pthread_create(&th[i], NULL, reader, NULL);

	unsigned long rounds = 0, stale = 0;
	double end = now() + secs;
	uint8_t g = 0;
	while (now() < end && stale < 5) {
		g = (uint8_t)(g % 255 + 1);
		memset(wbuf, g, fsize);
		unsigned n = 0;
		for (size_t off = 0; off < fsize; off += PIECE, n++) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			if (!sqe) {
				io_uring_submit(&ring);
				sqe = io_uring_get_sqe(&ring);
			}
			io_uring_prep_write(sqe, wfd, (char *)wbuf + off, PIECE, off);
		}
		io_uring_submit(&ring);
		for (unsigned i = 0; i < n; i++) {
			struct io_uring_cqe *cqe;
			e = io_uring_wait_cqe(&ring, &cqe);
			if (e || cqe->res != (int)PIECE) {
				fprintf(stderr, "dio_race: direct write: %s\n",
					strerror(e ? -e : cqe->res < 0 ? -cqe->res : EIO));
				return 1;
			}
			io_uring_cqe_seen(&ring, cqe);
		}
		rounds++;
		/* every write of round g has completed: a read now must see g */
		if (pread(cfd, rbuf, fsize, 0) != (ssize_t)fsize) {
			perror("dio_race: check pread");
			return 1;
		}
		long bad = first_not(rbuf, fsize, g);
		if (bad >= 0) {
			long last = bad;
			for (size_t i = bad; i < fsize; i++)
				if (rbuf[i] != g)
					last = (long)i;
			fprintf(stderr, "dio_race: round %lu: buffered read after the direct writes"
				" completed: byte 0x%lx is %u (round %u's), want %u; stale bytes up to"
				" 0x%lx\n", rounds, bad, rbuf[bad], rbuf[bad], g, last);
			stale++;
		}
	}
	atomic_store(&stop, true);
	for (int i = 0; i < nreaders; i++)
		pthread_join(th[i], NULL);
	io_uring_queue_exit(&ring);
	close(cfd);
	close(wfd);
	free(wbuf);
	free(rbuf);
	printf("dio_race: %lu rounds of %zu KiB direct writes (%s fd), %lu buffered reads by"
	       " %d readers, %lu stale reads\n", rounds, fsize >> 10,
	       wronly ? "write-only" : "read-write", atomic_load(&reads), nreaders, stale);
	return stale ? 1 : 0;
usage:
	fprintf(stderr, "usage: dio_race [-t seconds] [-r readers] [-s size] [-w] FILE\n");
	return 2;
}
