/*
 * bench/bitmap-reads.c - what a device can do for the mount's bitmap reads:
 * every group's block and inode bitmap of the ext2/3/4 file system on DEV,
 * read once in group order (a group's adjacent pair as one read), O_DIRECT
 * through io_uring with DEPTH reads in flight.  Prints the seconds of the
 * reads alone (the descriptors are read first, untimed) and the count.
 * The floor bench/scale sets beside recon-fuse's mount from the same device.
 * usage: bitmap-reads DEV DEPTH
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <ext2fs/ext2fs.h>

struct extent {
	uint64_t off;
	uint32_t len;
};

/* The bitmaps' extents of fs, a group's adjacent pair merged. */
static struct extent *bitmap_extents(ext2_filsys fs, size_t *n)
{
	struct extent *x = calloc((size_t)fs->group_desc_count * 2, sizeof(*x));
	uint64_t bs = fs->blocksize;
	*n = 0;
	for (dgrp_t g = 0; x && g < fs->group_desc_count; g++) {
		blk64_t b[2] = { ext2fs_block_bitmap_loc(fs, g), ext2fs_inode_bitmap_loc(fs, g) };
		for (int i = 0; i < 2; i++) {
			if (!b[i] || b[i] >= ext2fs_blocks_count(fs->super))
				continue;
			if (*n && x[*n - 1].off + x[*n - 1].len == b[i] * bs)
				x[*n - 1].len += (uint32_t)bs;
			else
				x[(*n)++] = (struct extent){ b[i] * bs, (uint32_t)bs };
		}
	}
	return x;
}

int main(int argc, char **argv)
{
	if (argc != 3 || atoi(argv[2]) < 1) {
		fprintf(stderr, "usage: bitmap-reads DEV DEPTH\n");
		return 2;
	}
	unsigned depth = (unsigned)atoi(argv[2]);
	ext2_filsys fs;
	errcode_t e = ext2fs_open(argv[1], 0, 0, 0, unix_io_manager, &fs);
	if (e) {
		fprintf(stderr, "bitmap-reads: cannot open %s: %s\n", argv[1], error_message(e));
		return 1;
	}
	size_t n;
	struct extent *x = bitmap_extents(fs, &n);
	size_t slot = 2 * (size_t)fs->blocksize;
	ext2fs_close_free(&fs);
	int fd = open(argv[1], O_RDONLY | O_DIRECT);
	struct io_uring ring;
	void *buf = NULL;
	if (!x || fd < 0 || io_uring_queue_init(depth, &ring, 0) ||
	    posix_memalign(&buf, 4096, depth * slot)) {
		fprintf(stderr, "bitmap-reads: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	size_t sub = 0, done = 0;
	unsigned inflight = 0;
	while (done < n) {
		for (; inflight < depth && sub < n; sub++, inflight++) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			/* the slot of a finished read is reused: only the timing counts */
			io_uring_prep_read(sqe, fd, (char *)buf + (sub % depth) * slot, x[sub].len, x[sub].off);
		}
		io_uring_submit(&ring);
		struct io_uring_cqe *cqe;
		if (io_uring_wait_cqe(&ring, &cqe) || cqe->res < 0) {
			fprintf(stderr, "bitmap-reads: read failed on %s\n", argv[1]);
			return 1;
		}
		io_uring_cqe_seen(&ring, cqe);
		inflight--;
		done++;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%.3f %zu\n", (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9, n);
	return 0;
}
