/*
 * fuse/transport.h - the FUSE transport: how requests reach a libfuse
 * low-level session and replies leave it, over /dev/fuse (transport.c) and
 * over io_uring (uring.c).  It knows nothing of the file system it carries:
 * recon-fuse (channel.c) and the bench's floor driver (bench/fuse-null.c)
 * both serve through it, so that the floor measured is this transport
 * doing no work.
 *
 * What it does to the connection: it patches the INIT reply (asks for
 * FUSE_HANDLE_KILLPRIV_V2 and FUSE_DIRECT_IO_ALLOW_MMAP when the kernel
 * offers them, which libfuse 3.14 cannot), asks for requests over io_uring
 * when the kernel offers it and the caller allows, and with poll_us polls
 * for the next request before sleeping (/dev/fuse, or each CPU's ring).
 *
 * Errors: transport_start returns -1 (the caller says so); the ring's own
 * troubles are said on stderr, and one that ends the session makes
 * transport_stop return true.
 *
 * Threads: transport_start and transport_stop from the main thread, the
 * first before the session loop, the second after it.  Over io_uring each
 * CPU's queue has its own thread, with every signal blocked, that calls
 * fuse_session_process_buf: the file system's operations must be
 * thread-safe even with libfuse's single-threaded loop.
 */
#ifndef RECON_FUSE_TRANSPORT_H
#define RECON_FUSE_TRANSPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 35
#endif
#include <fuse_lowlevel.h>

enum transport_uring {
	TRANSPORT_URING_OFF,	/* /dev/fuse only */
	TRANSPORT_URING_AUTO,	/* io_uring when the kernel offers it */
	TRANSPORT_URING_ON,	/* as auto, and say how it went (queues, requests served) */
};

struct transport_config {
	/* after a reply, keep asking /dev/fuse for the next request this many
	 * microseconds before sleeping (0: plain blocking reads); only for a
	 * session served by one thread.  Over io_uring, the queue threads
	 * poll their rings after a reply instead (uring.c) */
	unsigned poll_us;
	enum transport_uring uring;
	/* called before each request is served, by the thread that serves it,
	 * whichever way it came (NULL: nothing) */
	void (*on_request)(uint32_t opcode, uint64_t nodeid);
};

/* Once se is mounted, before its loop: libfuse reads and writes the device
 * through the transport from now on.  0, or -1. */
int transport_start(struct fuse_session *se, const struct transport_config *cfg);
/* After the session loop, once nothing else replies through the channel,
 * before the session is unmounted: stops the ring.  True when a queue of
 * the ring failed and ended the session. */
bool transport_stop(void);

/* uring.c: FUSE requests over io_uring (the kernel's FUSE_OVER_IO_URING).
 * transport.c calls these: uring_prepare while answering INIT, when the
 * kernel offers the transport (NULL, after saying why, if it cannot be set
 * up: the reply then does not ask for it; poll_us as transport_config's); uring_start once the reply is
 * written (init_sent) or failed (everything undone, -ECANCELED); uring_reply
 * for every message libfuse sends (true when the reply belongs to a request
 * that came over the ring and went back through it; *res is then writev's
 * result); uring_stop after the session loop ends and before the session is
 * unmounted or destroyed (counts the requests served; -EIO if a queue failed
 * and ended the session, 0 otherwise). */
struct rfs_uring;
struct rfs_uring *uring_prepare(struct fuse_session *se, int devfd, size_t max_payload,
				unsigned poll_us, void (*on_request)(uint32_t opcode, uint64_t nodeid));
int uring_start(struct rfs_uring *u, bool init_sent);
bool uring_reply(struct rfs_uring *u, const struct iovec *iov, int count, ssize_t *res);
/* May the request this thread serves keep its reply for later?  Always
 * through /dev/fuse; over the ring only while the thread's queue keeps
 * another entry free for requests (a held entry must not be the one that a
 * request the later reply waits for needs). */
bool uring_may_hold_reply(void);
int uring_stop(struct rfs_uring *u, uint64_t *served);
unsigned uring_queues(const struct rfs_uring *u);
/* Whether the kernel offers the transport to new mounts (its fuse module's
 * enable_uring parameter); if not, *why says so for a message. */
bool uring_offered(const char **why);

#endif
