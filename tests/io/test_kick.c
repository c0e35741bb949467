/*
 * tests/io/test_kick.c - the early writeback of file data: every 2 MiB
 * written through rio_data_io, the host's writeback of the device is
 * started (sync_file_range) from a thread of the device's own, never from
 * the writer; the thread stops at close; the data is the file's all along.
 * sync_file_range is wrapped (-Wl,--wrap) to see which thread calls it.
 * `test_kick writeback-kick`; exit 0 pass, 77 skip, 1 fail.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "rio_test.h"

int __real_sync_file_range(int fd, off_t off, off_t len, unsigned flags);
int __wrap_sync_file_range(int fd, off_t off, off_t len, unsigned flags);

static atomic_uint kicks_by_writer, kicks_by_others;
static pid_t writer;

int __wrap_sync_file_range(int fd, off_t off, off_t len, unsigned flags)
{
	if (gettid() == writer)
		atomic_fetch_add(&kicks_by_writer, 1);
	else
		atomic_fetch_add(&kicks_by_others, 1);
	return __real_sync_file_range(fd, off, len, flags);
}

/* Threads of this process named name. */
static unsigned threads_named(const char *name)
{
	DIR *d = opendir("/proc/self/task");
	unsigned n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)) != NULL) {
		char path[300], comm[32] = "";
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (f && fgets(comm, sizeof(comm), f)) {
			comm[strcspn(comm, "\n")] = 0;
			n += !strcmp(comm, name);
		}
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return n;
}

/* The kick is asynchronous: wait up to 5 s for the kick thread's first. */
static bool others_kicked(void)
{
	for (int i = 0; i < 500 && !atomic_load(&kicks_by_others); i++)
		nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
	return atomic_load(&kicks_by_others) > 0;
}

static void test_writeback_kick(void)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/kick.img", scratch);
	if (run_shell("rm -f %s && truncate -s 16M %s", path, path) != 0)
		exit(77);
	const size_t mib = 1u << 20;
	unsigned char *data = malloc(3 * mib), *back = malloc(3 * mib);
	CHECK(data && back, "out of memory");
	fill(data, 3 * mib, 60);
	writer = gettid();
	set_cfg(false, 8, 0, 0);
	io_channel ch;
	CHECK_ERR(rio_io_manager->open(path, IO_FLAG_RW, &ch));
	CHECK_ERR(io_channel_set_blksize(ch, 4096));
	struct rio_extent ext = { .blk = 256, .count = 256, .buf = data };
	CHECK_ERR(rio_data_io(ch, true, 12, &ext, 1));
	CHECK(threads_named("recon-kick") == 0, "a kick thread below 2 MiB of data");
	for (unsigned i = 1; i < 3; i++) {
		ext = (struct rio_extent){ .blk = 256 + 256 * i, .count = 256, .buf = data + i * mib };
		CHECK_ERR(rio_data_io(ch, true, 12, &ext, 1));
	}
	unsigned kickers = threads_named("recon-kick");
	CHECK(kickers == 1, "%u kick threads past 2 MiB of data, not 1", kickers);
	CHECK(others_kicked(), "no writeback started past 2 MiB of data");
	CHECK(atomic_load(&kicks_by_writer) == 0, "the writer started the writeback itself");
	CHECK_ERR(io_channel_close(ch));
	CHECK(threads_named("recon-kick") == 0, "the kick thread outlived the channel");
	CHECK(raw_read(path, 256 * 4096, back, 3 * mib) == 0, "raw");
	CHECK(memcmp(data, back, 3 * mib) == 0, "the data differs from what was written");
	free(data);
	free(back);
}

int main(int argc, char **argv)
{
	if (argc != 2 || strcmp(argv[1], "writeback-kick")) {
		fprintf(stderr, "usage: test_kick writeback-kick\n");
		return 2;
	}
	snprintf(scratch, sizeof(scratch), "/tmp/kick-test-XXXXXX");
	if (!mkdtemp(scratch)) {
		perror("mkdtemp");
		return 77;
	}
	add_error_table(&et_ext2_error_table);
	test_writeback_kick();
	if (!failures)
		run_shell("rm -rf %s", scratch);
	else
		fprintf(stderr, "scratch kept in %s\n", scratch);
	return failures ? 1 : 0;
}
