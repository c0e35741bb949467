/*
 * fuse/channel.c - recon-fuse's FUSE channel: the transport (transport.c,
 * uring.c) set up from the configuration, libfuse's loop with one thread
 * or a pool, and its end, served until the threads that write to it are
 * done.
 */
#include "rfs.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * The loop has ended (signal, fusermount -u, on_violation=stop).  The
 * cache-invalidation thread writes to the channel, as do the threads that
 * answer direct writes and fsyncs (the last answers every fsync that still
 * waits, after a commit): it must be joined before
 * fuse_session_unmount closes the descriptor (a later open may reuse the
 * number).  It stops after the notification in progress, which may wait for
 * a lock held by a request the loop has not answered: keep answering
 * requests until it is done, unless the kernel has ended the connection
 * (then its writes fail at once).
 */
static void serve_until_notifier_done(struct rfs *r)
{
	struct fuse_buf buf = { .mem = NULL };
	int fd = fuse_session_fd(r->se);

	rfs_stop_notifier(r);
	direct_write_replies_stop();
	fsync_replies_stop();
	while (rfs_notifier_busy(r) || direct_write_replies_busy() || fsync_replies_busy()) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int n = poll(&p, 1, 20);
		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0)
			continue;
		if (p.revents & (POLLERR | POLLHUP | POLLNVAL))
			break;
		int res = fuse_session_receive_buf(r->se, &buf);
		if (res == -EINTR || res == -EAGAIN)
			continue;
		if (res <= 0)
			break;
		fuse_session_process_buf(r->se, &buf);
	}
	free(buf.mem);
	rfs_join_notifier(r);
	direct_write_replies_join();
	fsync_replies_join();
}

/*
 * libfuse's multithreaded loop with a pool of exactly `threads` workers.  The
 * API level the daemon is built for (3.5) can set only how many idle workers
 * the loop keeps: it then starts a new worker, up to its default of 10,
 * whenever every worker is busy (an asynchronous RELEASE beside the next
 * request is enough) and ends the ones past the idle count as they finish,
 * so with threads=2 an untar made and ended a thread every few requests
 * (763 in one untar of /usr/include).  libfuse 3.12's entry point, which
 * every libfuse recon-fuse runs on has (3.14 and later), takes the pool's
 * largest size too.
 */
int fuse_session_loop_mt_312(struct fuse_session *se, struct fuse_loop_config *config);

int channel_serve(struct rfs *r)
{
	if (r->cfg->threads <= 1 || r->cfg->deterministic)
		return fuse_session_loop(r->se);
	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	if (!lc) {
		fprintf(stderr, "recon-fuse: out of memory for the FUSE loop; serving with one "
			"thread\n");
		return fuse_session_loop(r->se);
	}
	fuse_loop_cfg_set_clone_fd(lc, 0);
	fuse_loop_cfg_set_max_threads(lc, r->cfg->threads);
	fuse_loop_cfg_set_idle_threads(lc, r->cfg->threads);
	int ret = fuse_session_loop_mt_312(r->se, lc);
	fuse_loop_cfg_destroy(lc);
	return ret;
}

static enum transport_uring uring_mode(enum fuse_uring_mode m)
{
	switch (m) {
	case FUSE_URING_ON:
		return TRANSPORT_URING_ON;
	case FUSE_URING_OFF:
		return TRANSPORT_URING_OFF;
	case FUSE_URING_AUTO:
		break;
	}
	return TRANSPORT_URING_AUTO;
}

int channel_start(struct rfs *r)
{
	struct transport_config tc = {
		/* one worker only: a pool's idle workers would spin side by side */
		.poll_us = r->cfg->threads <= 1 ? r->cfg->poll_us : 0,
		.uring = uring_mode(r->cfg->fuse_uring),
		.on_request = mountstate_request,
	};
	return transport_start(r->se, &tc);
}

bool channel_finish(struct rfs *r)
{
	/* the ring serves too while the notifier finishes: a request it waits
	 * for may come either way */
	serve_until_notifier_done(r);
	return transport_stop();
}
