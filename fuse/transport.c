/*
 * fuse/transport.c - the /dev/fuse side of the FUSE transport
 * (transport.h): libfuse's reads and writes of the device, through our own,
 * to patch the INIT reply, to hand requests over to io_uring when the
 * kernel offers it (uring.c), and to poll for the next request instead of
 * sleeping.
 *
 * The INIT reply also asks for FUSE_HANDLE_KILLPRIV_V2 and
 * FUSE_DIRECT_IO_ALLOW_MMAP when the kernel offers them.
 * libfuse 3.14 (Debian 12) does not forward FUSE_CAP_HANDLE_KILLPRIV*, and
 * without it the kernel asks getxattr("security.capability") before every
 * write(2) and re-reads the mode by GETATTR before every chown; with it the
 * file system marks inodes S_NOSEC after one check and leaves clearing of
 * set-id bits and capabilities to us (recon-fuse's op_setattr, do_write,
 * open_truncate and drop_capability do it, as ext3 does).
 */
#include "transport.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static uint64_t init_unique;	/* the INIT request's id until it is answered */
static uint32_t init_offered;	/* the kernel's INIT flags (low 32 bits) */
static uint32_t init_offered2;	/* and the high 32 bits (with FUSE_INIT_EXT) */

/* Protocol 7.42 (Linux 6.14): requests over io_uring (fuse/uring.c). */
#define INIT_EXT_FLAG (1u << 30)		/* FUSE_INIT_EXT: flags2 is valid */
#define OVER_IO_URING_FLAG2 (1u << (41 - 32))	/* FUSE_OVER_IO_URING in flags2 */
/* Protocol 7.39 (Linux 6.6): a shared mmap of a file opened with direct I/O
 * (O_DIRECT and write-only opens, set_open_mode) goes through the page
 * cache, which the kernel keeps coherent with the direct reads and writes;
 * without it such an mmap fails with ENODEV. */
#define DIRECT_IO_ALLOW_MMAP_FLAG2 (1u << (36 - 32))

static struct transport_config dev_cfg;
static struct fuse_session *dev_session;
static struct rfs_uring *dev_uring;	/* requests over io_uring, when in use */
static unsigned dev_poll_us;	/* 0: plain blocking reads */
static bool dev_uring_serving;	/* requests come over io_uring (fuse/uring.c) */
static uint64_t dev_replied_at;	/* when the last reply went out (us) */
static uint64_t dev_gap_avg;	/* moving average of reply-to-next-request gaps (us) */

static uint64_t now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

/* Sleep until a request is ready.  The exit signals (libfuse's handlers
 * end the session) are blocked from the check of the session's state until
 * ppoll() sleeps, so one that lands while we were polling is not missed. */
static int dev_sleep(int fd)
{
	sigset_t exits, old;
	sigemptyset(&exits);
	sigaddset(&exits, SIGINT);
	sigaddset(&exits, SIGTERM);
	sigaddset(&exits, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &exits, &old);
	int ret = 0, err = 0;
	if (fuse_session_exited(dev_session)) {
		ret = -1;
		err = EINTR;
	} else {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ret = ppoll(&p, 1, NULL, &old);
		err = errno;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = err;
	return ret < 0 ? -1 : 0;
}

/*
 * With poll_us (one worker only), the descriptor is non-blocking and the
 * worker keeps asking for the next request for up to poll_us after a reply
 * before it sleeps in poll(): a request that arrives meanwhile costs no
 * wake-up of the daemon, which on a virtual machine is the largest single
 * cost of a FUSE round trip.  It polls only while the recent gaps between a
 * reply and the next request (a moving average, measured whether it polled
 * or slept) are shorter than poll_us: a client that thinks between
 * requests, or a CPU shared with other work, turns polling off by itself.
 * Never returns EAGAIN (libfuse's loop would end on it).
 */
static ssize_t dev_read_next(int fd, void *buf, size_t len)
{
	if (!dev_poll_us)
		return read(fd, buf, len);
	uint64_t start = now_us();
	/* with io_uring serving, only FORGETs and INTERRUPTs come this way */
	bool spin = dev_gap_avg < dev_poll_us && !dev_uring_serving;
	ssize_t n;
	for (;;) {
		n = read(fd, buf, len);
		if (n >= 0 || errno != EAGAIN)
			break;
		if (spin && now_us() - start < dev_poll_us)
			continue;
		spin = false;
		if (dev_sleep(fd) < 0)
			return -1;	/* EINTR: libfuse checks for exit */
	}
	if (n >= 0 && dev_replied_at) {
		uint64_t gap = now_us() - dev_replied_at;
		if (gap > 8 * (uint64_t)dev_poll_us)
			gap = 8 * (uint64_t)dev_poll_us;
		dev_gap_avg = (dev_gap_avg * 7 + gap) / 8;
	}
	return n;
}

static ssize_t dev_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	ssize_t n = dev_read_next(fd, buf, len);
	/* an unmount with requests still queued (thousands of RELEASEs after a
	 * process closed its files) aborts the request being read: the end of
	 * the session, as ENODEV is, not a failure */
	if (n < 0 && errno == ECONNABORTED)
		errno = ENODEV;
	const struct fuse_in_header *h = buf;
	if (n >= (ssize_t)sizeof(*h) && dev_cfg.on_request)
		dev_cfg.on_request(h->opcode, h->nodeid);
	if (n >= (ssize_t)(sizeof(*h) + offsetof(struct fuse_init_in, flags) + sizeof(uint32_t)) &&
	    h->opcode == FUSE_INIT) {
		const struct fuse_init_in *in = (const void *)(h + 1);
		init_unique = h->unique;
		init_offered = in->flags;
		init_offered2 = (in->flags & INIT_EXT_FLAG) &&
				n >= (ssize_t)(sizeof(*h) + offsetof(struct fuse_init_in, flags2) +
					       sizeof(uint32_t)) ? in->flags2 : 0;
	}
	return n;
}

/* Answering INIT: ask for requests over io_uring when the kernel offers it
 * and the configuration allows; the queues are ready before the reply goes
 * out (the kernel holds every request from then until they are). */
static struct rfs_uring *init_uring(int fd, struct fuse_init_out *out)
{
	if (dev_cfg.uring == TRANSPORT_URING_OFF)
		return NULL;
	if (!(init_offered & INIT_EXT_FLAG) || !(init_offered2 & OVER_IO_URING_FLAG2)) {
		if (dev_cfg.uring == TRANSPORT_URING_ON)
			fprintf(stderr, "recon-fuse: fuse_uring=on, but the kernel did not offer FUSE "
				"over io_uring for this mount; serving through /dev/fuse\n");
		return NULL;
	}
	/* the kernel's payload buffers hold its largest request or reply */
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t pages = (out->flags & FUSE_MAX_PAGES) && out->max_pages ? out->max_pages : 32;
	size_t payload = out->max_write > 8192 ? out->max_write : 8192;
	if (pages * page > payload)
		payload = pages * page;
	struct rfs_uring *u = uring_prepare(dev_session, fd, payload, dev_cfg.poll_us, dev_cfg.on_request);
	if (u) {
		out->flags |= INIT_EXT_FLAG;
		out->flags2 |= OVER_IO_URING_FLAG2;
	}
	return u;
}

static ssize_t dev_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct rfs_uring *starting = NULL;
	ssize_t n;

	(void)userdata;
	if (dev_uring && uring_reply(dev_uring, iov, count, &n))
		return n;
	if (init_unique && count >= 2 && iov[0].iov_len >= sizeof(struct fuse_out_header)) {
		const struct fuse_out_header *oh = iov[0].iov_base;
		if (oh->unique == init_unique) {
			init_unique = 0;
			struct fuse_init_out *out = iov[1].iov_base;
			if (oh->error == 0 && (init_offered & FUSE_HANDLE_KILLPRIV_V2) &&
			    iov[1].iov_len >= offsetof(struct fuse_init_out, flags) + sizeof(uint32_t))
				out->flags |= FUSE_HANDLE_KILLPRIV_V2;
			if (oh->error == 0 && iov[1].iov_len >= offsetof(struct fuse_init_out, flags2) +
								 sizeof(uint32_t)) {
				if ((init_offered & INIT_EXT_FLAG) &&
				    (init_offered2 & DIRECT_IO_ALLOW_MMAP_FLAG2)) {
					out->flags |= INIT_EXT_FLAG;
					out->flags2 |= DIRECT_IO_ALLOW_MMAP_FLAG2;
				}
				starting = init_uring(fd, out);
			}
		}
	}
	n = writev(fd, iov, count);
	if (starting) {
		/* replies look for their ring from the moment the queues serve */
		dev_uring = starting;
		if (uring_start(starting, n >= 0) != 0) {
			dev_uring = NULL;
		} else {
			dev_uring_serving = true;
			if (dev_cfg.uring == TRANSPORT_URING_ON)
				fprintf(stderr, "recon-fuse: FUSE over io_uring: %u queues\n",
					uring_queues(starting));
		}
	}
	if (dev_poll_us && count >= 1 && iov[0].iov_len >= sizeof(struct fuse_out_header) &&
	    ((const struct fuse_out_header *)iov[0].iov_base)->unique)
		dev_replied_at = now_us();	/* a reply, not a notification */
	return n;
}

static const struct fuse_custom_io dev_io = { .writev = dev_writev, .read = dev_read };

int transport_start(struct fuse_session *se, const struct transport_config *cfg)
{
	int fd = fuse_session_fd(se);

	dev_cfg = *cfg;
	dev_session = se;
	if (cfg->poll_us) {
		int fl = fcntl(fd, F_GETFL);
		if (fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0)
			dev_poll_us = cfg->poll_us;
	}
	return fuse_session_custom_io(se, &dev_io, fd) ? -1 : 0;
}

bool transport_stop(void)
{
	if (!dev_uring)
		return false;
	uint64_t served;
	dev_uring_serving = false;
	bool failed = uring_stop(dev_uring, &served) < 0;
	dev_uring = NULL;
	if (dev_cfg.uring == TRANSPORT_URING_ON)
		fprintf(stderr, "recon-fuse: FUSE over io_uring: %llu requests served\n",
			(unsigned long long)served);
	return failed;
}
