/*
 * fuse/uring.c - FUSE requests over io_uring (the kernel's FUSE_OVER_IO_URING,
 * Linux 6.14 and later when /sys/module/fuse/parameters/enable_uring is Y).
 *
 * The kernel keeps one request queue per possible CPU and hands a request to
 * the queue of the CPU its caller runs on.  Each queue here has its own
 * thread, pinned to that CPU, and its own io_uring, in which every ring entry
 * (a header buffer and a payload buffer registered with the kernel) waits for
 * a request in an IORING_OP_URING_CMD on /dev/fuse.  A request arrives as a
 * completion; the thread rebuilds the /dev/fuse form of it in front of the
 * payload, hands it to libfuse's ordinary dispatch, and the reply, which
 * libfuse sends through our channel's writev (transport.c), goes back into the
 * entry with one COMMIT_AND_FETCH that also waits for the next request.  A
 * caller and its server share a CPU: the caller sleeps while the server
 * runs, so a round trip is two context switches on one CPU, without the
 * cross-CPU wake-up of the /dev/fuse read loop.  With poll_us, a thread
 * polls its ring for a while after each commit, so that the caller stays on
 * that CPU (spin_for_request).
 *
 * The INIT exchange, FORGETs, INTERRUPTs and notifications stay on
 * /dev/fuse (the kernel sends and accepts them only there), so the channel's
 * read loop keeps running.  Nothing here knows the file system: requests go
 * to the session's operations, which recon-fuse serves under its one
 * file-system lock (transport.h).
 */
#include "transport.h"

#include <errno.h>
#include <linux/fuse.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/*
 * The protocol (include/uapi/linux/fuse.h of Linux 6.14, protocol 7.42);
 * the system's header may predate it, so the pieces used are spelled here.
 */
#define URING_HEADER_IN_OUT 128	/* fuse_in_header / fuse_out_header area */
#define URING_HEADER_OP_IN 128		/* the request's first argument */

struct uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;		/* the request's unique, echoed in the commit */
	uint32_t payload_sz;		/* bytes of payload, either direction */
	uint32_t padding;
	uint64_t reserved;
};

struct uring_req_header {
	char in_out[URING_HEADER_IN_OUT];
	char op_in[URING_HEADER_OP_IN];
	struct uring_ent_in_out ent;
};

/* In the 80-byte command area of a 128-byte SQE. */
struct uring_cmd_req {
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

enum { URING_CMD_REGISTER = 1, URING_CMD_COMMIT_AND_FETCH = 2 };

_Static_assert(sizeof(struct uring_ent_in_out) == 32, "fuse_uring_ent_in_out layout");
_Static_assert(sizeof(struct uring_req_header) == 288, "fuse_uring_req_header layout");
_Static_assert(sizeof(struct uring_cmd_req) <= 80, "command area of an SQE128");

#define QUEUE_DEPTH 16		/* ring entries per queue */
/* Room in front of the payload for the in-header and first argument, so a
 * request is contiguous without copying its payload. */
#define FRONT 256
#define MAX_QUEUES 1024
/* Threads that may poll at once.  Two keep a caller and its server on one
 * CPU of a two-CPU machine; on a larger one polling threads cannot cover
 * every idle CPU anyway, and the cap bounds what polling burns there. */
#define MAX_POLLERS 2
#define EVENT_TAG ((uint64_t)1)	/* user_data of the wake-up poll */

struct entry {
	struct server *srv;
	struct uring_req_header *hdr;
	char *mem;			/* FRONT bytes, then the payload */
	struct iovec iov[2];		/* what REGISTER hands the kernel */
	_Atomic uint64_t unique;	/* request being served here, 0 when none */
	uint64_t commit_id;
	uint32_t last_op;		/* the command in flight */
	bool pending;			/* reply placed by another thread, not yet committed */
	bool dead;			/* the kernel ended it (unmount) or refused it */
	unsigned retries;
};

struct server {
	struct rfs_uring *u;
	unsigned qid;
	pthread_t thread;
	bool thread_started;
	struct io_uring ring;
	bool ring_ok;
	int evfd;
	struct entry ent[QUEUE_DEPTH];
	unsigned live;			/* entries not dead */
	bool served_any;		/* the kernel's ring is in use */
	bool commit_queued;		/* a COMMIT_AND_FETCH waits to be submitted */
	pthread_mutex_t pending_mu;	/* replies from other threads */
};

struct rfs_uring {
	struct fuse_session *se;
	void (*on_request)(uint32_t opcode, uint64_t nodeid);
	int devfd;
	size_t payload;			/* payload buffer size */
	size_t map_len;			/* one entry's mapping: FRONT + payload + slack */
	unsigned nq;
	struct server *srv;
	/* polling after a commit (see spin_for_request); times in us, from
	 * every queue, read and written without a lock: they steer a
	 * heuristic, and a lost update only shifts it a little */
	unsigned poll_us;		/* 0: never poll */
	_Atomic uint64_t last_request;	/* when a request last arrived */
	_Atomic uint64_t last_commit;	/* when a reply last went in */
	_Atomic uint64_t gap_avg;	/* moving average of commit-to-next-request gaps */
	_Atomic unsigned pollers;	/* threads polling now, at most MAX_POLLERS */

	pthread_mutex_t mu;
	pthread_cond_t cv;
	enum { WAITING, SERVING, ABANDONED } state;
	unsigned nready;		/* threads done with their setup */
	int setup_err;			/* the first setup error */
	_Atomic bool stop;
	_Atomic bool failed;		/* a queue could not go on: the session ends */
	_Atomic bool refused_told;
	_Atomic uint64_t served;
};

static _Thread_local struct entry *current_entry;

static uint64_t now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

static void say(struct rfs_uring *u, const char *fmt, const char *detail)
{
	(void)u;
	fprintf(stderr, "recon-fuse: FUSE over io_uring: ");
	fprintf(stderr, fmt, detail);
	fputc('\n', stderr);
}

/* A queue that can no longer take requests while the kernel sends it some
 * would leave its callers waiting forever: end the session instead (the
 * daemon then unmounts and exits 1). */
static void give_up(struct server *s, int err)
{
	struct rfs_uring *u = s->u;
	char why[160];

	snprintf(why, sizeof(why), "queue %u cannot go on (%s); unmounting", s->qid, strerror(-err));
	say(u, "%s", why);
	atomic_store(&u->failed, true);
	fuse_session_exit(u->se);
	kill(getpid(), SIGTERM);	/* wakes the /dev/fuse loop */
}

/* Number of queues the kernel keeps: one per possible CPU. */
static int possible_cpus(void)
{
	FILE *f = fopen("/sys/devices/system/cpu/possible", "r");
	char line[256];
	int max = -1, count = 0;

	if (!f)
		return -1;
	if (!fgets(line, sizeof(line), f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	for (char *p = line; *p && *p != '\n';) {
		char *end;
		long a = strtol(p, &end, 10), b;
		if (end == p || a < 0)
			return -1;
		b = a;
		if (*end == '-') {
			p = end + 1;
			b = strtol(p, &end, 10);
			if (end == p || b < a)
				return -1;
		}
		count += (int)(b - a + 1);
		if (b > max)
			max = (int)b;
		p = end;
		if (*p == ',')
			p++;
	}
	/* the kernel's queue index is the CPU number: a sparse mask would leave
	 * CPUs without a queue */
	if (count != max + 1 || count > MAX_QUEUES)
		return -1;
	return count;
}

static struct io_uring_sqe *get_sqe(struct server *s)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);
	if (sqe)
		memset(sqe, 0, 128);	/* SQE128: the command area too */
	return sqe;
}

static void prep_cmd(struct server *s, struct io_uring_sqe *sqe, struct entry *e, uint32_t op)
{
	struct uring_cmd_req *cmd = (struct uring_cmd_req *)sqe->cmd;

	sqe->opcode = IORING_OP_URING_CMD;
	sqe->flags = IOSQE_FIXED_FILE;
	sqe->fd = 0;
	sqe->cmd_op = op;
	io_uring_sqe_set_data(sqe, e);
	cmd->qid = (uint16_t)s->qid;
	if (op == URING_CMD_REGISTER) {
		sqe->addr = (uint64_t)(uintptr_t)e->iov;
		sqe->len = 2;
	} else {
		cmd->commit_id = e->commit_id;
	}
}

/* Queue a command for an entry; the server's loop submits it.  Only the
 * server's own thread touches its submission queue. */
static void queue_cmd(struct server *s, struct entry *e, uint32_t op)
{
	struct io_uring_sqe *sqe = get_sqe(s);
	if (!sqe) {
		/* one SQE per entry plus one for the wake-up: cannot run out */
		say(s->u, "%s", "no submission slot");
		e->dead = true;
		if (--s->live == 0)
			give_up(s, -EBUSY);
		return;
	}
	prep_cmd(s, sqe, e, op);
	e->last_op = op;
	if (op == URING_CMD_COMMIT_AND_FETCH)
		s->commit_queued = true;
}

static void arm_wakeup(struct server *s)
{
	struct io_uring_sqe *sqe = get_sqe(s);
	if (!sqe)
		return;
	io_uring_prep_poll_add(sqe, s->evfd, POLLIN);
	io_uring_sqe_set_data64(sqe, EVENT_TAG);
}

/* Put a reply (out-header first) into the entry: the payload, then the header. */
static void place_reply(struct entry *e, const struct iovec *iov, int count)
{
	struct rfs_uring *u = e->srv->u;
	const struct fuse_out_header *in = iov[0].iov_base;
	struct fuse_out_header oh = *in;
	size_t len = 0;

	for (int i = 1; i < count; i++)
		len += iov[i].iov_len;
	if (len > u->payload) {
		fprintf(stderr, "recon-fuse: FUSE over io_uring: a reply of %zu bytes does not fit "
			"the %zu-byte buffer; answering EIO\n", len, u->payload);
		oh.error = -EIO;
		len = 0;
	} else if (oh.error == 0) {
		char *p = e->mem + FRONT;
		for (int i = 1; i < count; i++) {
			memcpy(p, iov[i].iov_base, iov[i].iov_len);
			p += iov[i].iov_len;
		}
	} else {
		len = 0;
	}
	oh.len = (uint32_t)(sizeof(oh) + len);
	memcpy(e->hdr->in_out, &oh, sizeof(oh));
	e->hdr->ent.payload_sz = (uint32_t)len;
	e->hdr->ent.flags = 0;
}

bool uring_reply(struct rfs_uring *u, const struct iovec *iov, int count, ssize_t *res)
{
	if (!u || count < 1 || iov[0].iov_len < sizeof(struct fuse_out_header))
		return false;
	const struct fuse_out_header *oh = iov[0].iov_base;
	if (oh->unique == 0)
		return false;		/* a notification: /dev/fuse only */

	size_t total = 0;
	for (int i = 0; i < count; i++)
		total += iov[i].iov_len;

	struct entry *e = current_entry;
	if (e && atomic_load(&e->unique) == oh->unique) {
		/* the usual case: the server's own thread answers inline */
		place_reply(e, iov, count);
		atomic_store(&e->unique, 0);
		queue_cmd(e->srv, e, URING_CMD_COMMIT_AND_FETCH);
		*res = (ssize_t)total;
		return true;
	}
	for (unsigned q = 0; q < u->nq; q++) {
		struct server *s = &u->srv[q];
		for (unsigned i = 0; i < QUEUE_DEPTH; i++) {
			e = &s->ent[i];
			if (atomic_load(&e->unique) != oh->unique)
				continue;
			/* another thread answers: its server commits it */
			pthread_mutex_lock(&s->pending_mu);
			place_reply(e, iov, count);
			atomic_store(&e->unique, 0);
			e->pending = true;
			pthread_mutex_unlock(&s->pending_mu);
			uint64_t one = 1;
			if (write(s->evfd, &one, sizeof(one)) != sizeof(one)) {
				/* the counter cannot overflow by one */
			}
			*res = (ssize_t)total;
			return true;
		}
	}
	return false;
}

bool uring_may_hold_reply(void)
{
	struct entry *cur = current_entry;
	if (!cur)
		return true;
	struct server *s = cur->srv;
	bool spare = false;
	/* a reply another thread is placing clears unique and sets pending
	 * under pending_mu: read both under it */
	pthread_mutex_lock(&s->pending_mu);
	for (unsigned i = 0; i < QUEUE_DEPTH && !spare; i++) {
		struct entry *e = &s->ent[i];
		spare = e != cur && !e->dead && atomic_load(&e->unique) == 0 && !e->pending;
	}
	pthread_mutex_unlock(&s->pending_mu);
	return spare;
}

/* A request arrived in entry e: rebuild its /dev/fuse form in front of the
 * payload and dispatch it. */
static void serve_request(struct server *s, struct entry *e)
{
	struct rfs_uring *u = s->u;
	struct fuse_in_header in;
	uint32_t payload_sz = e->hdr->ent.payload_sz;

	memcpy(&in, e->hdr->in_out, sizeof(in));
	e->commit_id = e->hdr->ent.commit_id;
	size_t arg0 = in.len >= sizeof(in) + payload_sz ? in.len - sizeof(in) - payload_sz : SIZE_MAX;
	if (arg0 > URING_HEADER_OP_IN || payload_sz > u->payload) {
		/* the kernel's layout is not what we understand: answer EIO */
		struct fuse_out_header oh = { .unique = in.unique, .error = -EIO };
		struct iovec iov = { &oh, sizeof(oh) };
		atomic_store(&e->unique, in.unique);
		place_reply(e, &iov, 1);
		atomic_store(&e->unique, 0);
		queue_cmd(s, e, URING_CMD_COMMIT_AND_FETCH);
		return;
	}
	char *payload = e->mem + FRONT;
	size_t pad = (sizeof(in) + arg0) % 8;
	if (pad) {
		/* keep the in-header 8-byte aligned: shift the payload (rare:
		 * argument structures are multiples of 8 bytes) */
		pad = 8 - pad;
		memmove(payload + pad, payload, payload_sz);
		payload += pad;
	}
	char *start = payload - arg0 - sizeof(in);
	memcpy(start, &in, sizeof(in));
	memcpy(start + sizeof(in), e->hdr->op_in, arg0);

	struct fuse_buf fb = { .size = in.len, .mem = start };
	atomic_store(&e->unique, in.unique);
	atomic_fetch_add(&u->served, 1);
	if (u->on_request)
		u->on_request(in.opcode, in.nodeid);
	current_entry = e;
	fuse_session_process_buf(u->se, &fb);
	current_entry = NULL;
	if ((in.opcode == FUSE_FORGET || in.opcode == FUSE_BATCH_FORGET) &&
	    atomic_load(&e->unique) == in.unique) {
		/* A forget has no reply, but one the kernel sends itself (an
		 * entry of READDIRPLUS it could not use) arrives on the ring
		 * like any request: the entry must still be committed, or it
		 * is never offered again and the queue runs dry. */
		struct fuse_out_header oh = { .unique = in.unique };
		struct iovec iov = { &oh, sizeof(oh) };
		place_reply(e, &iov, 1);
		atomic_store(&e->unique, 0);
		queue_cmd(s, e, URING_CMD_COMMIT_AND_FETCH);
	}
}

/* Replies that other threads placed: commit them from here. */
static void commit_pending(struct server *s)
{
	pthread_mutex_lock(&s->pending_mu);
	for (unsigned i = 0; i < QUEUE_DEPTH; i++)
		if (s->ent[i].pending) {
			s->ent[i].pending = false;
			queue_cmd(s, &s->ent[i], URING_CMD_COMMIT_AND_FETCH);
		}
	pthread_mutex_unlock(&s->pending_mu);
}

static void entry_failed(struct server *s, struct entry *e, uint32_t op, int err)
{
	struct rfs_uring *u = s->u;

	if (err == -ENOTCONN || err == -ECONNABORTED || err == -ECANCELED || atomic_load(&u->stop)) {
		e->dead = true;	/* unmounted or shutting down */
		s->live--;
		return;
	}
	bool told = false;
	if (atomic_compare_exchange_strong(&u->refused_told, &told, true)) {
		char why[96];
		snprintf(why, sizeof(why), "%s", strerror(-err));
		say(u, "the kernel refused a ring command (%s)", why);
	}
	if (op == URING_CMD_COMMIT_AND_FETCH && ++e->retries <= 3) {
		/* the entry is lost to the kernel: offer its buffers again */
		queue_cmd(s, e, URING_CMD_REGISTER);
		return;
	}
	e->dead = true;
	if (--s->live == 0 && s->served_any)
		give_up(s, err);
	/* before the ring served anything, a refused REGISTER turns the kernel
	 * back to /dev/fuse for the whole connection */
}

/*
 * Polling after a commit.  The kernel queues a request on the queue of the
 * CPU its caller runs on, and the commit that answers the caller wakes it
 * while this thread still runs: the scheduler then moves the caller to an
 * idle CPU if there is one, its next request lands on that CPU's queue, and
 * every request wakes a sleeping thread on a CPU that was idle (on a virtual
 * machine an interrupt to a halted CPU) and finds the file system's lock and
 * state in the other CPU's cache.  So while the ring is busy, a queue thread
 * that has just committed keeps its CPU busy: it polls its completion queue
 * (no system call unless the kernel has work for it) as long as any queue
 * got a request in the last poll_us, and at least poll_us.  With every CPU
 * that serves busy, a woken caller stays where it was, on its server's CPU.
 * Between polls it yields, so that a caller woken onto this CPU runs at once
 * (even a niced one; the wake-up alone would not preempt a spinning thread
 * of higher weight).  It polls only while the ring's recent gaps between a
 * commit and the next request (a moving average, measured whether it polled
 * or slept) are shorter than poll_us: a client that thinks between requests,
 * or a CPU shared with other work, turns it off by itself.
 */
static void note_request(struct rfs_uring *u)
{
	if (!u->poll_us)
		return;
	uint64_t now = now_us(), lc = atomic_load_explicit(&u->last_commit, memory_order_relaxed);
	atomic_store_explicit(&u->last_request, now, memory_order_relaxed);
	if (!lc)
		return;
	uint64_t gap = now > lc ? now - lc : 0, cap = 8 * (uint64_t)u->poll_us;
	uint64_t avg = atomic_load_explicit(&u->gap_avg, memory_order_relaxed);
	atomic_store_explicit(&u->gap_avg, (avg * 7 + (gap < cap ? gap : cap)) / 8,
			      memory_order_relaxed);
}

/* Whether a completion is ready, asking the kernel for its deferred work
 * only when it says it has some (IORING_SQ_TASKRUN). */
static bool cqe_ready(struct server *s)
{
	if (io_uring_cq_ready(&s->ring))
		return true;
	if (IO_URING_READ_ONCE(*s->ring.sq.kflags) & IORING_SQ_TASKRUN) {
		(void)io_uring_get_events(&s->ring);
		return io_uring_cq_ready(&s->ring) > 0;
	}
	return false;
}

/* After a commit: true when a completion is ready, false when the thread
 * should sleep for one. */
static bool spin_for_request(struct server *s)
{
	struct rfs_uring *u = s->u;
	uint64_t start = now_us();
	for (;;) {
		if (cqe_ready(s))
			return true;
		if (atomic_load(&u->stop))
			return false;
		uint64_t now = now_us();
		if (now - start >= u->poll_us &&
		    now - atomic_load_explicit(&u->last_request, memory_order_relaxed) >= u->poll_us)
			return false;
		sched_yield();
	}
}

static void handle_cqe(struct server *s, struct io_uring_cqe *cqe)
{
	if (cqe->user_data == EVENT_TAG) {
		uint64_t v;
		if (read(s->evfd, &v, sizeof(v)) < 0) {
			/* nothing to drain */
		}
		commit_pending(s);
		if (!atomic_load(&s->u->stop))
			arm_wakeup(s);
		return;
	}
	struct entry *e = io_uring_cqe_get_data(cqe);
	if (cqe->res == -EAGAIN || cqe->res == -EINTR) {
		/* REGISTER before the kernel finished INIT, or interrupted: again */
		if (++e->retries > 1000) {
			entry_failed(s, e, e->last_op, cqe->res);
			return;
		}
		if (e->retries > 1)
			usleep(1000);
		queue_cmd(s, e, e->last_op);
		return;
	}
	if (cqe->res < 0) {
		entry_failed(s, e, e->last_op, cqe->res);
		return;
	}
	e->retries = 0;
	s->served_any = true;
	note_request(s->u);
	if (atomic_load(&s->u->stop)) {
		/* no new work while stopping: the kernel ends the request when
		 * the ring goes away */
		return;
	}
	serve_request(s, e);
}

static int setup_server(struct rfs_uring *u, struct server *s);

static void *server_main(void *arg)
{
	struct server *s = arg;
	struct rfs_uring *u = s->u;

	/* the caller's CPU is the queue's: serve it there (best effort) */
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(s->qid, &set);
	(void)sched_setaffinity(0, sizeof(set), &set);
	char name[16];
	snprintf(name, sizeof(name), "uring-q%u", s->qid);
	(void)pthread_setname_np(pthread_self(), name);

	/* the ring is this thread's alone (it is its only submitter) */
	int err = setup_server(u, s);
	pthread_mutex_lock(&u->mu);
	if (err && !u->setup_err)
		u->setup_err = err;
	u->nready++;
	pthread_cond_broadcast(&u->cv);
	while (u->state == WAITING)
		pthread_cond_wait(&u->cv, &u->mu);
	bool go = u->state == SERVING;
	pthread_mutex_unlock(&u->mu);
	if (!go)
		return NULL;

	s->live = QUEUE_DEPTH;
	for (unsigned i = 0; i < QUEUE_DEPTH; i++)
		queue_cmd(s, &s->ent[i], URING_CMD_REGISTER);
	arm_wakeup(s);
	while (!atomic_load(&u->stop)) {
		int ret;
		bool spin = false;
		if (s->commit_queued) {
			/* the commit goes in at the start of the call below */
			s->commit_queued = false;
			atomic_store_explicit(&u->last_commit, now_us(), memory_order_relaxed);
			spin = u->poll_us &&
			       atomic_load_explicit(&u->gap_avg, memory_order_relaxed) < u->poll_us;
		}
		if (spin && atomic_fetch_add(&u->pollers, 1) < MAX_POLLERS) {
			ret = io_uring_submit(&s->ring);
			bool ready = ret >= 0 && spin_for_request(s);
			atomic_fetch_sub(&u->pollers, 1);
			if (ret >= 0 && !ready)
				ret = io_uring_submit_and_wait(&s->ring, 1);
		} else {
			if (spin)
				atomic_fetch_sub(&u->pollers, 1);
			ret = io_uring_submit_and_wait(&s->ring, 1);
		}
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) {
			give_up(s, ret);
			break;
		}
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;
		io_uring_for_each_cqe(&s->ring, head, cqe) {
			handle_cqe(s, cqe);
			n++;
		}
		io_uring_cq_advance(&s->ring, n);
	}
	return NULL;
}

static void free_server(struct rfs_uring *u, struct server *s)
{
	if (s->ring_ok)
		io_uring_queue_exit(&s->ring);
	s->ring_ok = false;
	if (s->evfd >= 0)
		close(s->evfd);
	s->evfd = -1;
	for (unsigned i = 0; i < QUEUE_DEPTH; i++) {
		struct entry *e = &s->ent[i];
		if (e->hdr)
			munmap(e->hdr, sizeof(*e->hdr));
		if (e->mem)
			munmap(e->mem, u->map_len);
		e->hdr = NULL;
		e->mem = NULL;
	}
	pthread_mutex_destroy(&s->pending_mu);
}

static void free_all(struct rfs_uring *u)
{
	for (unsigned q = 0; q < u->nq; q++)
		free_server(u, &u->srv[q]);
	free(u->srv);
	pthread_cond_destroy(&u->cv);
	pthread_mutex_destroy(&u->mu);
	free(u);
}

static int setup_server(struct rfs_uring *u, struct server *s)
{
	struct io_uring_params p;
	int ret;

	/* This thread is the ring's only submitter, and it waits in
	 * io_uring_enter whenever it is idle: the kernel may defer the
	 * completions' task work to that wait instead of interrupting it,
	 * and flags the work it holds, so that a polling thread enters the
	 * kernel for it only when there is some. */
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_SQE128 | IORING_SETUP_CQSIZE | IORING_SETUP_SINGLE_ISSUER |
		  IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
	p.cq_entries = 4 * (QUEUE_DEPTH + 1);
	ret = io_uring_queue_init_params(QUEUE_DEPTH + 1, &s->ring, &p);
	if (ret == -EINVAL) {
		memset(&p, 0, sizeof(p));
		p.flags = IORING_SETUP_SQE128 | IORING_SETUP_CQSIZE;
		p.cq_entries = 4 * (QUEUE_DEPTH + 1);
		ret = io_uring_queue_init_params(QUEUE_DEPTH + 1, &s->ring, &p);
	}
	if (ret < 0)
		return ret;
	s->ring_ok = true;
	ret = io_uring_register_files(&s->ring, &u->devfd, 1);
	if (ret < 0)
		return ret;
	s->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->evfd < 0)
		return -errno;
	for (unsigned i = 0; i < QUEUE_DEPTH; i++) {
		struct entry *e = &s->ent[i];
		e->srv = s;
		e->hdr = mmap(NULL, sizeof(*e->hdr), PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (e->hdr == MAP_FAILED) {
			e->hdr = NULL;
			return -ENOMEM;
		}
		e->mem = mmap(NULL, u->map_len, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (e->mem == MAP_FAILED) {
			e->mem = NULL;
			return -ENOMEM;
		}
		e->iov[0].iov_base = e->hdr;
		e->iov[0].iov_len = sizeof(*e->hdr);
		e->iov[1].iov_base = e->mem + FRONT;
		e->iov[1].iov_len = u->payload;
	}
	return 0;
}

struct rfs_uring *uring_prepare(struct fuse_session *se, int devfd, size_t max_payload,
				unsigned poll_us, void (*on_request)(uint32_t opcode, uint64_t nodeid))
{
	int nq = possible_cpus();
	if (nq <= 0) {
		say(NULL, "%s", "cannot tell the CPUs from /sys/devices/system/cpu/possible; "
		    "serving through /dev/fuse");
		return NULL;
	}
	struct rfs_uring *u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->se = se;
	u->on_request = on_request;
	u->devfd = devfd;
	u->payload = max_payload;
	u->poll_us = poll_us;
	u->map_len = FRONT + max_payload + 8;
	pthread_mutex_init(&u->mu, NULL);
	pthread_cond_init(&u->cv, NULL);
	u->srv = calloc((size_t)nq, sizeof(*u->srv));
	if (!u->srv) {
		free(u);
		return NULL;
	}
	u->nq = (unsigned)nq;
	for (unsigned q = 0; q < u->nq; q++) {
		u->srv[q].u = u;
		u->srv[q].qid = q;
		u->srv[q].evfd = -1;
		pthread_mutex_init(&u->srv[q].pending_mu, NULL);
	}
	int ret = 0;
	/* the threads block every signal: the daemon's exit signals must reach
	 * the /dev/fuse loop, which ends the session */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (unsigned q = 0; q < u->nq && !ret; q++) {
		ret = -pthread_create(&u->srv[q].thread, NULL, server_main, &u->srv[q]);
		u->srv[q].thread_started = ret == 0;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	unsigned started = 0;
	for (unsigned q = 0; q < u->nq; q++)
		started += u->srv[q].thread_started;
	pthread_mutex_lock(&u->mu);
	while (u->nready < started)
		pthread_cond_wait(&u->cv, &u->mu);
	if (!ret)
		ret = u->setup_err;
	pthread_mutex_unlock(&u->mu);
	if (ret) {
		char why[96];
		snprintf(why, sizeof(why), "%s", strerror(-ret));
		say(u, "cannot set up the queues (%s); serving through /dev/fuse", why);
		uring_start(u, false);
		return NULL;
	}
	return u;
}

int uring_start(struct rfs_uring *u, bool init_sent)
{
	pthread_mutex_lock(&u->mu);
	u->state = init_sent ? SERVING : ABANDONED;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
	if (init_sent)
		return 0;
	for (unsigned q = 0; q < u->nq; q++)
		if (u->srv[q].thread_started)
			pthread_join(u->srv[q].thread, NULL);
	free_all(u);
	return -ECANCELED;
}

int uring_stop(struct rfs_uring *u, uint64_t *served)
{
	*served = 0;
	if (!u)
		return 0;
	atomic_store(&u->stop, true);
	for (unsigned q = 0; q < u->nq; q++) {
		uint64_t one = 1;
		if (u->srv[q].evfd >= 0 && write(u->srv[q].evfd, &one, sizeof(one)) != sizeof(one)) {
			/* the counter cannot overflow by one */
		}
	}
	for (unsigned q = 0; q < u->nq; q++)
		if (u->srv[q].thread_started)
			pthread_join(u->srv[q].thread, NULL);
	/* the threads are gone, and with them every command they submitted
	 * (io_uring cancels a task's commands when it exits): the kernel
	 * writes no more into the buffers, which go with the rings */
	*served = atomic_load(&u->served);
	int ret = atomic_load(&u->failed) ? -EIO : 0;
	free_all(u);
	return ret;
}

unsigned uring_queues(const struct rfs_uring *u)
{
	return u ? u->nq : 0;
}

bool uring_offered(const char **why)
{
	FILE *f = fopen("/sys/module/fuse/parameters/enable_uring", "r");
	int c = EOF;

	if (!f) {
		*why = "this kernel has no FUSE over io_uring (Linux 6.14 or later built with "
		       "CONFIG_FUSE_IO_URING)";
		return false;
	}
	c = fgetc(f);
	fclose(f);
	if (c != 'Y' && c != 'y' && c != '1') {
		*why = "the kernel's /sys/module/fuse/parameters/enable_uring is N (an administrator "
		       "sets it to Y)";
		return false;
	}
	return true;
}
