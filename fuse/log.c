/*
 * fuse/log.c - where the daemon's messages go.  Every part of the daemon
 * writes its messages to stderr; after detaching, stderr is /dev/null and
 * an admin would see nothing but EROFS.  So fd 2 becomes a pipe, read by a
 * thread that forwards each line: to the original stderr while there is one
 * (the foreground, and a daemon until it detaches), to the -o log= file with
 * a time stamp, and, for a daemon that detaches, to the kernel log (root) or
 * syslog (everyone else), each line naming the image and the mount point.
 *
 * Nothing here decides what is worth saying: every line of a detached
 * daemon goes to the system log, because the daemon prints only at events
 * an admin must see (refusals, read-only fallbacks, rejections, the exit).
 * A line starting with white space or "INV_" continues the message before
 * it (a rejection's invariants and change records); a message and its
 * continuation lines are a report, which the kernel log gets cut short.
 */
#include "rfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

/* /dev/kmsg lets one open file write 10 lines per 5 s (the kernel's
 * printk_devkmsg=ratelimit default); each report opens it anew, so a report
 * gets at most that many: its first lines and a "... N more lines" line. */
#define KMSG_REPORT_LINES 9
#define SYSLOG_REPORT_LINES 20
/* A message repeated in a loop (a damaged inode read again and again) must
 * not flood the system log: at most this many reports per window. */
#define REPORTS_PER_WINDOW 5
#define REPORT_WINDOW_S 5
/* An unfinished report ends when nothing more comes for this long. */
#define REPORT_IDLE_MS 200
#define LINE_MAX_BYTES 2048
#define KMSG_LINE_MAX 976	/* below the kernel's limit for one record */
#define FLUSH_MARK '\001'	/* never in a message: "all before me is forwarded" */
#define PREFIX "recon-fuse: "

enum sys_sink { SYS_NONE, SYS_KMSG, SYS_SYSLOG };

static struct {
	bool running;
	pthread_t thread;
	int rd;                  /* the pipe's read end (fd 2 is its write end) */
	int wake;                /* eventfd: stop */
	atomic_int term;         /* the original stderr, or -1 (detach takes it) */
	int file;                /* the log= file, or -1 */
	enum sys_sink sys;
	char dev[PATH_MAX], mnt[PATH_MAX];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t flush_sent, flush_done;   /* under mu */
	atomic_bool stopping;

	/* the report in progress (reader thread only) */
	bool in_report;
	int level;               /* KERN_* / LOG_* number: 3 err, 4 warning, 6 info */
	bool muted;              /* over the window's budget: the system log does not get it */
	int kmsg_fd;
	size_t lines, dropped;
	time_t window_start;
	unsigned window_reports, suppressed;
	char line[LINE_MAX_BYTES];
	size_t len;
} lg = { .rd = -1, .wake = -1, .term = -1, .file = -1, .kmsg_fd = -1,
	 .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

static void write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;   /* a log that cannot take more loses lines, nothing else */
		p += w;
		n -= (size_t)w;
	}
}

static const char *strip_prefix(const char *s)
{
	return strncmp(s, PREFIX, strlen(PREFIX)) ? s : s + strlen(PREFIX);
}

static bool continues_report(const char *s)
{
	return s[0] == ' ' || s[0] == '\t' || !strncmp(s, "INV_", 4);
}

/* The kernel log's level of a message, from its words: a rejection, a
 * failure or a refusal is an error; going read-only or a damaged image is
 * a warning; the rest (journal replayed, timings) is information. */
static int level_of(const char *s)
{
	static const char *const errors[] = {
		"rejected", "refused", "failed", "cannot", "error:", "lost", "out of memory",
	};
	static const char *const warnings[] = {
		"read-only", "WARNING", "inconsistent", "not consistent", "with errors",
		"damaged", "fault:", "not checked",
	};
	for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
		if (strstr(s, errors[i]))
			return LOG_ERR;
	for (size_t i = 0; i < sizeof(warnings) / sizeof(warnings[0]); i++)
		if (strstr(s, warnings[i]))
			return LOG_WARNING;
	return LOG_INFO;
}

static void sys_emit(const char *text)
{
	if (lg.sys == SYS_SYSLOG) {
		syslog(lg.level, "%s on %s: %s", lg.dev, lg.mnt, text);
		return;
	}
	if (lg.kmsg_fd < 0)
		return;
	char buf[KMSG_LINE_MAX + 2];
	int n = snprintf(buf, sizeof(buf) - 1, "<%d>recon-fuse (%s on %s): %s", lg.level, lg.dev,
			 lg.mnt, text);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	write_all(lg.kmsg_fd, buf, (size_t)n);
}

static void end_report(void)
{
	if (!lg.in_report)
		return;
	if (lg.dropped) {
		char more[64];
		snprintf(more, sizeof(more), "... %zu more lines", lg.dropped);
		sys_emit(more);
	}
	if (lg.kmsg_fd >= 0)
		close(lg.kmsg_fd);
	lg.kmsg_fd = -1;
	lg.in_report = false;
}

/* A new report: the window's budget decides whether the system log gets it
 * (a suppressed one still counts lines, silently). */
static void begin_report(const char *first)
{
	time_t now = time(NULL);
	lg.in_report = true;
	lg.level = level_of(first);
	lg.lines = lg.dropped = 0;
	if (now - lg.window_start >= REPORT_WINDOW_S) {
		lg.window_start = now;
		lg.window_reports = 0;
	}
	lg.muted = ++lg.window_reports > REPORTS_PER_WINDOW;
	if (lg.muted) {
		lg.suppressed++;
		return;
	}
	if (lg.sys == SYS_KMSG)
		lg.kmsg_fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC | O_NOCTTY);
	if (lg.suppressed) {
		char note[96];
		snprintf(note, sizeof(note), "%u messages not logged here (too many in %d s)",
			 lg.suppressed, REPORT_WINDOW_S);
		int level = lg.level;
		lg.level = LOG_WARNING;
		sys_emit(note);
		lg.level = level;
		lg.suppressed = 0;
	}
}

static void to_system_log(const char *s)
{
	if (!continues_report(s) || !lg.in_report) {
		end_report();
		begin_report(s);
	}
	size_t cap = lg.sys == SYS_KMSG ? KMSG_REPORT_LINES : SYSLOG_REPORT_LINES;
	if (lg.muted)
		return;
	if (lg.lines++ < cap)
		sys_emit(strip_prefix(s));
	else
		lg.dropped++;
}

static void to_file(const char *s)
{
	struct timespec ts;
	struct tm tm;
	char stamp[64], zone[8], head[PATH_MAX * 2 + 128];

	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	strftime(zone, sizeof(zone), "%z", &tm);
	int n = snprintf(head, sizeof(head), "%s.%03ld%s recon-fuse[%d] (%s on %s): ", stamp,
			 ts.tv_nsec / 1000000, zone, (int)getpid(), lg.dev, lg.mnt);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(head))
		n = (int)sizeof(head) - 1;
	const char *text = strip_prefix(s);
	struct iovec iov[3] = {
		{ head, (size_t)n }, { (void *)text, strlen(text) }, { "\n", 1 },
	};
	/* one write per line: daemons sharing a file do not interleave lines */
	size_t total = iov[0].iov_len + iov[1].iov_len + 1;
	if (writev(lg.file, iov, 3) != (ssize_t)total) {
		/* the file is full or gone: the other sinks still have the line */
	}
}

static void forward_line(void)
{
	lg.line[lg.len] = 0;
	int term = atomic_load(&lg.term);
	if (term >= 0) {
		struct iovec iov[2] = { { lg.line, lg.len }, { "\n", 1 } };
		if (writev(term, iov, 2) < 0) {
			/* the terminal is gone: nothing to do */
		}
	}
	/* a blank line separates messages on a terminal; a log has its stamps */
	if (lg.file >= 0 && lg.len)
		to_file(lg.line);
	if (lg.sys != SYS_NONE && lg.len)
		to_system_log(lg.line);
	lg.len = 0;
}

static void flushed(void)
{
	pthread_mutex_lock(&lg.mu);
	lg.flush_done++;
	pthread_cond_broadcast(&lg.cv);
	pthread_mutex_unlock(&lg.mu);
}

static void consume(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] == FLUSH_MARK) {
			flushed();
		} else if (p[i] == '\n' || lg.len == sizeof(lg.line) - 1) {
			if (p[i] != '\n')
				lg.line[lg.len++] = p[i];
			forward_line();
		} else {
			lg.line[lg.len++] = p[i];
		}
	}
}

static void *reader_main(void *arg)
{
	(void)arg;
	char buf[4096];
	for (;;) {
		struct pollfd p[2] = { { .fd = lg.rd, .events = POLLIN }, { .fd = lg.wake, .events = POLLIN } };
		int n = poll(p, 2, lg.in_report ? REPORT_IDLE_MS : -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0) {
			end_report();
			continue;
		}
		if (n < 0)
			break;
		if (p[0].revents) {
			ssize_t r = read(lg.rd, buf, sizeof(buf));
			if (r < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (r <= 0)
				break;   /* every writer is gone */
			consume(buf, (size_t)r);
			continue;
		}
		/* stopping: everything written before the stop's flush is
		 * forwarded; a child still holding fd 2 must not keep us */
		if (atomic_load(&lg.stopping))
			break;
	}
	if (lg.len)
		forward_line();
	end_report();
	return NULL;
}

static void pick_system_log(void)
{
	/* the kernel log where admins look first, when we may write it */
	int fd = geteuid() == 0 ? open("/dev/kmsg", O_WRONLY | O_CLOEXEC | O_NOCTTY) : -1;
	if (fd >= 0) {
		close(fd);
		lg.sys = SYS_KMSG;
		return;
	}
	openlog("recon-fuse", LOG_PID | LOG_NDELAY, LOG_DAEMON);
	lg.sys = SYS_SYSLOG;
}

static void name_paths(const struct recon_config *cfg)
{
	char *dev = realpath(cfg->device, NULL), *mnt = realpath(cfg->mountpoint, NULL);
	snprintf(lg.dev, sizeof(lg.dev), "%s", dev ? dev : cfg->device);
	snprintf(lg.mnt, sizeof(lg.mnt), "%s", mnt ? mnt : cfg->mountpoint);
	free(dev);
	free(mnt);
}

/* Close everything start opened (the reader is not running). */
static void release(void)
{
	int term = atomic_exchange(&lg.term, -1);
	if (term >= 0)
		close(term);
	if (lg.rd >= 0)
		close(lg.rd);
	lg.rd = -1;
	if (lg.wake >= 0)
		close(lg.wake);
	lg.wake = -1;
	if (lg.file >= 0)
		close(lg.file);
	lg.file = -1;
	if (lg.sys == SYS_SYSLOG)
		closelog();
	lg.sys = SYS_NONE;
}

/* Wake the reader to end once it has nothing more to read, and join it. */
static void end_reader(void)
{
	atomic_store(&lg.stopping, true);
	uint64_t one = 1;
	if (write(lg.wake, &one, sizeof(one)) != sizeof(one)) {
		/* the reader still ends at the pipe's EOF */
	}
	pthread_join(lg.thread, NULL);
	lg.running = false;
}

int rfs_log_start(const struct recon_config *cfg)
{
	int p[2] = { -1, -1 };

	if (cfg->foreground && !cfg->log_file)
		return 0;   /* stderr is where the user looks: leave it alone */
	name_paths(cfg);
	if (cfg->log_file) {
		lg.file = open(cfg->log_file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);
		if (lg.file < 0) {
			fprintf(stderr, "recon-fuse: cannot open the log file %s: %s; give a writable "
				"file with -o log=FILE\n", cfg->log_file, strerror(errno));
			return -1;
		}
	}
	if (!cfg->foreground)
		pick_system_log();
	lg.wake = eventfd(0, EFD_CLOEXEC);
	if (lg.wake < 0 || pipe2(p, O_CLOEXEC)) {
		fprintf(stderr, "recon-fuse: cannot set up the message log: %s\n", strerror(errno));
		release();
		return -1;
	}
	lg.rd = p[0];
	atomic_store(&lg.term, fcntl(2, F_DUPFD_CLOEXEC, 3));
	/* every signal blocked: they are for the FUSE loop's thread */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int e = pthread_create(&lg.thread, NULL, reader_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e) {
		fprintf(stderr, "recon-fuse: cannot start the message log: %s\n", strerror(e));
		close(p[1]);
		release();
		return -1;
	}
	lg.running = true;
	/* stderr becomes the pipe (not close-on-exec: a helper such as
	 * fusermount3 reports through it too) */
	int ok = dup2(p[1], 2);
	close(p[1]);
	if (ok < 0) {
		fprintf(stderr, "recon-fuse: cannot set up the message log: %s\n", strerror(errno));
		end_reader();
		release();
		return -1;
	}
	return 0;
}

void rfs_log_flush(void)
{
	if (!lg.running)
		return;
	pthread_mutex_lock(&lg.mu);
	uint64_t want = ++lg.flush_sent;
	char mark = FLUSH_MARK;
	if (write(2, &mark, 1) != 1) {
		pthread_mutex_unlock(&lg.mu);
		return;
	}
	/* bounded: a terminal that takes no output must not hang the daemon */
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	while (lg.flush_done < want)
		if (pthread_cond_timedwait(&lg.cv, &lg.mu, &until))
			break;
	pthread_mutex_unlock(&lg.mu);
}

bool rfs_log_detach(void)
{
	if (!lg.running)
		return false;
	/* what was written so far reaches the terminal; then the terminal is
	 * let go (a caller reading our output to its end gets the end), once
	 * the reader has passed a line that may still write to it */
	rfs_log_flush();
	int term = atomic_exchange(&lg.term, -1);
	rfs_log_flush();
	if (term >= 0)
		close(term);
	return true;
}

void rfs_log_stop(void)
{
	if (!lg.running)
		return;
	rfs_log_flush();
	/* fd 2 back where it was (the terminal, or /dev/null after detaching)
	 * for what is printed after this (sanitizer reports); that closes our
	 * write end of the pipe */
	int term = atomic_load(&lg.term);
	int back = term >= 0 ? term : open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (back >= 0)
		dup2(back, 2);
	else
		close(2);
	if (back >= 0 && back != term)
		close(back);
	end_reader();
	release();
}
