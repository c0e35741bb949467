/*
 * fuse/daemon.c - the daemon's ties to whoever started it: the fork of
 * daemon mode and the status pipe by which the waiting parent learns
 * whether the mount succeeded, the detaching of stdio, the pid file.
 */
#include "rfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int status_fd = -1;   /* pipe to the waiting parent (daemon mode) */

void report_status(int st)
{
	if (status_fd >= 0) {
		rfs_log_flush();   /* the parent exits after what we said */
		char c = (char)st;
		if (write(status_fd, &c, 1) != 1) {
			/* the parent is gone; nothing to tell */
		}
		close(status_fd);
		status_fd = -1;
	}
}

/* Fork now, before any thread or ring exists; the parent waits for the
 * child to say whether the mount succeeded, so errors reach the terminal
 * and the exit status means "mounted". */
int daemonize_early(void)
{
	int p[2];

	if (pipe(p))
		return -errno;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		char c = 1;
		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			c = 1;
		_exit(c);
	}
	close(p[0]);
	status_fd = p[1];
	if (setsid() < 0)
		return -errno;
	return 0;
}

void detach_stdio(void)
{
	int fd = open("/dev/null", O_RDWR);
	if (fd < 0)
		return;
	dup2(fd, 0);
	dup2(fd, 1);
	if (!rfs_log_detach())
		dup2(fd, 2);
	if (fd > 2)
		close(fd);
	if (chdir("/")) {
		/* not fatal */
	}
}


int write_pidfile(const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "recon-fuse: cannot write pid file %s: %s\n", path, strerror(errno));
		return -1;
	}
	fprintf(f, "%d\n", (int)getpid());
	return fclose(f) ? -1 : 0;
}
