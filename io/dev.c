/*
 * io/dev.c - the device under the I/O manager: a pool of io_uring rings (or
 * pread/pwrite when io_uring cannot be set up), flushes, request counters,
 * the host's readahead and early writeback, and the power-cut fault
 * (fault_crash_after).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "rio_internal.h"

static void readahead_stop(struct dev *d);
static void kick_stop(struct dev *d);

errcode_t rio_dev_open(struct dev *d, int fd, bool quiet)
{
	memset(d, 0, sizeof(*d));
	d->fd = fd;
	struct stat st;
	d->regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
	pthread_mutex_init(&d->fault_lock, NULL);
	pthread_mutex_init(&d->kick_mu, NULL);
	pthread_cond_init(&d->kick_cv, NULL);
	d->crash_after = rio_cfg.fault_crash_after;
	/* splitmix64 state; seed 0 still gives a usable sequence */
	d->rng = rio_cfg.fault_seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;

	d->uring = !rio_cfg.no_uring;
	int ret = 0;
	unsigned i = 0;
	if (d->uring) {
		for (i = 0; i < DEV_RINGS; i++) {
			ret = io_uring_queue_init(DEV_QUEUE_DEPTH, &d->rings[i].ring, 0);
			if (ret < 0)
				break;
			pthread_mutex_init(&d->rings[i].lock, NULL);
		}
		if (ret < 0) {
			while (i-- > 0) {
				io_uring_queue_exit(&d->rings[i].ring);
				pthread_mutex_destroy(&d->rings[i].lock);
			}
			d->uring = false;
		}
	}
	if (!d->uring && !quiet) {
		/* the fallback notice is printed once per process */
		static atomic_bool told;
		if (!atomic_exchange(&told, true)) {
			if (rio_cfg.no_uring)
				fprintf(stderr, "recon-fuse: io_uring disabled by configuration; using pread/pwrite\n");
			else
				fprintf(stderr, "recon-fuse: io_uring unavailable (%s); using pread/pwrite\n",
					strerror(-ret));
		}
	}
	return 0;
}

void rio_dev_close(struct dev *d)
{
	readahead_stop(d);
	kick_stop(d);
	if (d->uring)
		for (unsigned i = 0; i < DEV_RINGS; i++) {
			if (!d->rings[i].broken)
				io_uring_queue_exit(&d->rings[i].ring);
			pthread_mutex_destroy(&d->rings[i].lock);
		}
	for (size_t i = 0; i < d->npending; i++) {
		free(d->pending[i].old_data);
		free(d->pending[i].new_data);
	}
	free(d->pending);
	pthread_mutex_destroy(&d->fault_lock);
	pthread_cond_destroy(&d->kick_cv);
	pthread_mutex_destroy(&d->kick_mu);
}

static uint64_t dev_random(struct dev *d)
{
	uint64_t z = (d->rng += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static void dev_count(struct dev *d, const struct dev_req *r)
{
	if (r->write) {
		atomic_fetch_add(&d->writes, 1);
		atomic_fetch_add(&d->bytes_written, r->len);
	} else {
		atomic_fetch_add(&d->reads, 1);
		atomic_fetch_add(&d->bytes_read, r->len);
	}
}

/* Whole-request pread/pwrite with short-transfer handling; not counted. */
static errcode_t raw_rw(int fd, bool write, uint64_t off, void *buf, size_t len)
{
	size_t done = 0;
	while (done < len) {
		ssize_t r = write ? pwrite(fd, (char *)buf + done, len - done, off + done)
				  : pread(fd, (char *)buf + done, len - done, off + done);
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return errno;
		}
		if (r == 0) {
			if (!write)
				memset((char *)buf + done, 0, len - done);
			return write ? EXT2_ET_SHORT_WRITE : EXT2_ET_SHORT_READ;
		}
		done += (size_t)r;
	}
	return 0;
}

static struct dev_ring *ring_acquire(struct dev *d)
{
	unsigned start = atomic_fetch_add(&d->next_ring, 1);
	for (unsigned i = 0; i < DEV_RINGS; i++) {
		struct dev_ring *r = &d->rings[(start + i) % DEV_RINGS];
		if (pthread_mutex_trylock(&r->lock) == 0)
			return r;
	}
	struct dev_ring *r = &d->rings[start % DEV_RINGS];
	pthread_mutex_lock(&r->lock);
	return r;
}

/* One batch of requests on one ring (uring_submit): how far each request
 * got, which are in flight, the short ones to resubmit, the first error. */
struct uring_batch {
	struct dev *d;
	struct io_uring *ring;
	struct dev_req *reqs;
	size_t n;
	size_t *done;           /* bytes transferred, per request */
	bool *inflight;
	size_t *retry, nretry;  /* short ones to resubmit */
	size_t next;            /* next request never submitted yet */
	size_t nflight, ncomplete;
	errcode_t err;
};

/* Fill the submission queue: retries first, then new requests, at most the
 * queue depth in flight, none after an error. */
static void batch_fill(struct uring_batch *b)
{
	while (b->nflight < DEV_QUEUE_DEPTH && (b->nretry > 0 || b->next < b->n) && !b->err) {
		size_t i = b->nretry > 0 ? b->retry[--b->nretry] : b->next++;
		struct io_uring_sqe *sqe = io_uring_get_sqe(b->ring);
		if (!sqe) {
			/* cannot happen below the depth; put it back */
			b->retry[b->nretry++] = i;
			break;
		}
		struct dev_req *r = &b->reqs[i];
		/* one SQE moves at most 1 GiB; the rest goes as a short transfer */
		size_t chunk = r->len - b->done[i];
		if (chunk > (1u << 30))
			chunk = 1u << 30;
		if (r->write)
			io_uring_prep_write(sqe, b->d->fd, (char *)r->buf + b->done[i],
					    (unsigned)chunk, r->off + b->done[i]);
		else
			io_uring_prep_read(sqe, b->d->fd, (char *)r->buf + b->done[i],
					   (unsigned)chunk, r->off + b->done[i]);
		io_uring_sqe_set_data64(sqe, i);
		b->inflight[i] = true;
		b->nflight++;
	}
}

/* Take every completion there is: a request is complete, or failed (the
 * first error kept; a short read's rest zeroed), or goes back for its
 * remainder. */
static void batch_reap(struct uring_batch *b)
{
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0;
	io_uring_for_each_cqe(b->ring, head, cqe) {
		size_t i = (size_t)io_uring_cqe_get_data64(cqe);
		int res = cqe->res;
		seen++;
		b->inflight[i] = false;
		b->nflight--;
		struct dev_req *r = &b->reqs[i];
		if (res == -EINTR || res == -EAGAIN) {
			b->retry[b->nretry++] = i;
			continue;
		}
		if (res < 0) {
			if (!b->err)
				b->err = -res;
			b->ncomplete++;
			continue;
		}
		if (res == 0 && b->done[i] < r->len) {
			if (!r->write)
				memset((char *)r->buf + b->done[i], 0, r->len - b->done[i]);
			if (!b->err)
				b->err = r->write ? EXT2_ET_SHORT_WRITE : EXT2_ET_SHORT_READ;
			b->ncomplete++;
			continue;
		}
		b->done[i] += (size_t)res;
		if (b->done[i] < r->len)
			b->retry[b->nretry++] = i;
		else
			b->ncomplete++;
	}
	io_uring_cq_advance(b->ring, seen);
}

/* After an error, drain what is still in flight before the buffers go away;
 * if the ring itself failed, some may never complete: give up on the ring
 * after a while and start a fresh one so nothing stale runs later from it. */
static void batch_drain(struct uring_batch *b, struct dev_ring *dr)
{
	while (b->nflight > 0) {
		struct io_uring_cqe *cqe;
		struct __kernel_timespec ts = { .tv_sec = 5 };
		int ret = io_uring_wait_cqe_timeout(b->ring, &cqe, &ts);
		if (ret == -EINTR)
			continue;
		if (ret < 0)
			break;
		io_uring_cqe_seen(b->ring, cqe);
		b->nflight--;
	}
	if (b->nflight > 0) {
		io_uring_queue_exit(b->ring);
		if (io_uring_queue_init(DEV_QUEUE_DEPTH, b->ring, 0) < 0) {
			fprintf(stderr, "recon-fuse: io_uring ring lost; pread/pwrite on it from now on\n");
			dr->broken = true;
		}
	}
}

/* A ring that could not be re-created: the requests one by one through
 * pread/pwrite; the first error. */
static errcode_t raw_submit(struct dev *d, struct dev_req *reqs, size_t n)
{
	errcode_t err = 0;
	for (size_t i = 0; i < n; i++) {
		errcode_t e = raw_rw(d->fd, reqs[i].write, reqs[i].off, reqs[i].buf, reqs[i].len);
		if (e && !err)
			err = e;
	}
	return err;
}

/* Submit n requests through one ring, at most the queue depth in flight,
 * resubmitting the remainder of short transfers. */
static errcode_t uring_submit(struct dev *d, struct dev_req *reqs, size_t n)
{
	struct dev_ring *dr = ring_acquire(d);
	if (dr->broken) {
		pthread_mutex_unlock(&dr->lock);
		return raw_submit(d, reqs, n);
	}
	struct uring_batch b = {
		.d = d, .ring = &dr->ring, .reqs = reqs, .n = n,
		.done = calloc(n ? n : 1, sizeof(*b.done)),
		.inflight = calloc(n ? n : 1, sizeof(*b.inflight)),
		.retry = calloc(n ? n : 1, sizeof(*b.retry)),
	};
	if (!b.done || !b.inflight || !b.retry) {
		free(b.done);
		free(b.inflight);
		free(b.retry);
		pthread_mutex_unlock(&dr->lock);
		return ENOMEM;
	}
	while (b.ncomplete < n) {
		batch_fill(&b);
		if (b.nflight == 0)
			break;  /* an error stopped new submissions and all are reaped */
		int ret = io_uring_submit_and_wait(b.ring, 1);
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) {
			b.err = -ret;
			/* nothing more can be reaped reliably: fall back for the rest */
			break;
		}
		batch_reap(&b);
		if (b.err && b.nflight == 0)
			break;
	}
	if (b.err && b.nflight > 0)
		batch_drain(&b, dr);
	pthread_mutex_unlock(&dr->lock);
	free(b.done);
	free(b.inflight);
	free(b.retry);
	return b.err;
}

/* ---- power-cut fault ---- */

/* The power fails: of the writes since the last completed flush keep a
 * seeded random subset.  The device is first rolled back to its state at the
 * flush (undo every pending write, newest first), then the kept writes are
 * replayed in submission order, so overlapping writes resolve as a real
 * device that completed exactly those would. */
static void dev_power_cut(struct dev *d)
{
	size_t kept = 0;
	for (size_t i = d->npending; i-- > 0;) {
		struct dev_pending_write *w = &d->pending[i];
		if (raw_rw(d->fd, true, w->off, w->old_data, w->len))
			fprintf(stderr, "recon-fuse: fault: power-cut rollback write failed\n");
	}
	for (size_t i = 0; i < d->npending; i++) {
		struct dev_pending_write *w = &d->pending[i];
		if (dev_random(d) & 1) {
			kept++;
			if (raw_rw(d->fd, true, w->off, w->new_data, w->len))
				fprintf(stderr, "recon-fuse: fault: power-cut replay write failed\n");
		}
	}
	if (fdatasync(d->fd) < 0)
		fprintf(stderr, "recon-fuse: fault: fdatasync after power cut: %s\n", strerror(errno));
	if (!rio_cfg.quiet)
		fprintf(stderr, "recon-fuse: fault: power cut at write %llu (%zu of %zu unflushed writes kept)\n",
			(unsigned long long)d->write_seq, kept, d->npending);
	d->crashed = true;
}

static void dev_forget_pending(struct dev *d)
{
	for (size_t i = 0; i < d->npending; i++) {
		free(d->pending[i].old_data);
		free(d->pending[i].new_data);
	}
	d->npending = 0;
}

/* One write while the fault is armed (fault_lock held). */
static errcode_t dev_armed_write(struct dev *d, struct dev_req *r)
{
	if (d->crashed)
		return EIO;
	if (d->npending == d->cappending) {
		size_t cap = d->cappending ? 2 * d->cappending : 64;
		struct dev_pending_write *p = realloc(d->pending, cap * sizeof(*p));
		if (!p)
			return ENOMEM;
		d->pending = p;
		d->cappending = cap;
	}
	struct dev_pending_write *w = &d->pending[d->npending];
	w->off = r->off;
	w->len = r->len;
	w->old_data = malloc(r->len);
	w->new_data = malloc(r->len);
	if (!w->old_data || !w->new_data) {
		free(w->old_data);
		free(w->new_data);
		return ENOMEM;
	}
	/* past the end of an image file there is nothing to restore: zeros */
	errcode_t err = raw_rw(d->fd, false, r->off, w->old_data, r->len);
	if (err && err != EXT2_ET_SHORT_READ) {
		free(w->old_data);
		free(w->new_data);
		return err;
	}
	memcpy(w->new_data, r->buf, r->len);
	d->npending++;
	d->write_seq++;
	dev_count(d, r);
	err = raw_rw(d->fd, true, r->off, r->buf, r->len);
	if (d->write_seq == d->crash_after) {
		dev_power_cut(d);
		return EIO;
	}
	return err;
}

errcode_t rio_dev_submit(struct dev *d, struct dev_req *reqs, size_t n)
{
	if (n == 0)
		return 0;
	errcode_t err = 0;
	bool any_write = false;
	for (size_t i = 0; i < n; i++)
		any_write |= reqs[i].write;

	if (d->crash_after && any_write) {
		/* armed: one request at a time, in submission order */
		pthread_mutex_lock(&d->fault_lock);
		for (size_t i = 0; i < n; i++) {
			errcode_t e;
			if (reqs[i].write) {
				e = dev_armed_write(d, &reqs[i]);
			} else {
				dev_count(d, &reqs[i]);
				e = raw_rw(d->fd, false, reqs[i].off, reqs[i].buf, reqs[i].len);
			}
			if (e && !err)
				err = e;
			if (d->crashed)
				err = EIO;
		}
		pthread_mutex_unlock(&d->fault_lock);
		return err;
	}
	for (size_t i = 0; i < n; i++)
		dev_count(d, &reqs[i]);
	/* One request gains nothing from the ring: the caller waits for it
	 * anyway, and a buffered write (or a page-cache miss) is punted to an
	 * io-wq worker, two context switches more than pread/pwrite. */
	if (d->uring && n > 1)
		return uring_submit(d, reqs, n);
	for (size_t i = 0; i < n; i++) {
		errcode_t e = raw_rw(d->fd, reqs[i].write, reqs[i].off, reqs[i].buf, reqs[i].len);
		if (e && !err)
			err = e;
	}
	return err;
}

errcode_t rio_dev_pread(struct dev *d, uint64_t off, void *buf, size_t len)
{
	struct dev_req r = { .write = false, .off = off, .len = len, .buf = buf };
	return rio_dev_submit(d, &r, 1);
}

/* The first byte of data at or after `at` in an image file, end when there
 * is none before end (a hole up to there), or UINT64_MAX when the host
 * cannot tell. */
static uint64_t next_data(struct dev *d, uint64_t at, uint64_t end)
{
	off_t data = lseek(d->fd, (off_t)at, SEEK_DATA);
	if (data >= 0)
		return (uint64_t)data < end ? (uint64_t)data : end;
	struct stat st;
	/* ENXIO: no data from here to the end of the file */
	if (errno == ENXIO && fstat(d->fd, &st) == 0 && (uint64_t)st.st_size >= end)
		return end;
	return UINT64_MAX;
}

bool rio_dev_is_hole(struct dev *d, uint64_t off, size_t len)
{
	return d->regular && len && next_data(d, off, off + len) == off + len;
}

errcode_t rio_dev_pread_sparse(struct dev *d, uint64_t off, void *buf, size_t len)
{
	unsigned char *p = buf;
	uint64_t end = off + len, at = off;
	if (!d->regular)
		return rio_dev_pread(d, off, buf, len);
	while (at < end) {
		uint64_t data = next_data(d, at, end);
		if (data == UINT64_MAX)
			return rio_dev_pread(d, at, p + (at - off), end - at);
		memset(p + (at - off), 0, data - at);
		if ((at = data) == end)
			break;
		off_t hole = lseek(d->fd, (off_t)at, SEEK_HOLE);
		uint64_t stop = hole < 0 || (uint64_t)hole > end || (uint64_t)hole <= at ? end : (uint64_t)hole;
		errcode_t err = rio_dev_pread(d, at, p + (at - off), stop - at);
		if (err)
			return err;
		at = stop;
	}
	return 0;
}

static void readahead_one(struct dev *d, uint64_t off, size_t len)
{
	/* many scattered hints queue many reads at once: at mount, the device
	 * works on a cold image's bitmap blocks together instead of one
	 * synchronous read at a time (bench/results/history-2026-12-scale.md) */
	(void)posix_fadvise(d->fd, (off_t)off, (off_t)len, POSIX_FADV_WILLNEED);
}

static void *readahead_thread(void *arg)
{
	struct dev *d = arg;
	/* adjacent blocks (a group's two bitmaps) in one hint: one request */
	for (size_t i = 0; i < d->ra_n && !atomic_load(&d->ra_stop);) {
		size_t j = i + 1;
		while (j < d->ra_n && d->ra_offs[j] == d->ra_offs[j - 1] + d->ra_len)
			j++;
		readahead_one(d, d->ra_offs[i], d->ra_len * (j - i));
		i = j;
	}
	return NULL;
}

static void readahead_stop(struct dev *d)
{
	if (d->ra_running) {
		atomic_store(&d->ra_stop, true);
		pthread_join(d->ra_thread, NULL);
		d->ra_running = false;
	}
	free(d->ra_offs);
	d->ra_offs = NULL;
	d->ra_n = 0;
}

void rio_dev_readahead_list(struct dev *d, uint64_t *offs, size_t n, size_t len)
{
	readahead_stop(d);
	d->ra_offs = offs;
	d->ra_n = n;
	d->ra_len = len;
	atomic_store(&d->ra_stop, false);
	if (pthread_create(&d->ra_thread, NULL, readahead_thread, d) == 0) {
		d->ra_running = true;
		return;
	}
	readahead_thread(d);          /* no thread: ask here, still at once */
	readahead_stop(d);
}

errcode_t rio_dev_pwrite(struct dev *d, uint64_t off, const void *buf, size_t len)
{
	struct dev_req r = { .write = true, .off = off, .len = len, .buf = (void *)buf };
	return rio_dev_submit(d, &r, 1);
}

errcode_t rio_dev_flush(struct dev *d)
{
	errcode_t err = 0;
	if (d->crash_after)
		pthread_mutex_lock(&d->fault_lock);
	if (d->crashed) {
		err = EIO;
	} else if (fdatasync(d->fd) < 0) {
		err = errno;
	} else {
		atomic_fetch_add(&d->flushes, 1);
		dev_forget_pending(d);
	}
	if (d->crash_after)
		pthread_mutex_unlock(&d->fault_lock);
	return err;
}

/* The host keeps written pages dirty until a flush or its own writeback
 * (dirty_background_ratio of RAM, or 30 s), so a large write's fsync, and
 * the unmount after a phase whose last fsync was long ago, would otherwise
 * wait for all of it at once. */
#define DEV_KICK_BYTES (2u << 20)

/* Start the writeback of every dirty page of the device.  The host's
 * filesystem does that work in the caller (its writepages, the block
 * layer's submissions): about 3 % of the daemon's CPU over untar and
 * PostMark, which the serving thread paid while it kicked in WRITE; the
 * kicks have a thread of their own. */
static void writeback_kick(struct dev *d)
{
	if (sync_file_range(d->fd, 0, 0, SYNC_FILE_RANGE_WRITE) < 0)
		atomic_store(&d->no_kick, true);   /* e.g. not supported here */
	atomic_store(&d->data_unkicked, 0);
}

static void *kick_thread(void *arg)
{
	struct dev *d = arg;
	pthread_mutex_lock(&d->kick_mu);
	for (;;) {
		while (!d->kick_wanted && !d->kick_stopping)
			pthread_cond_wait(&d->kick_cv, &d->kick_mu);
		if (d->kick_stopping)
			break;
		d->kick_wanted = false;
		pthread_mutex_unlock(&d->kick_mu);
		writeback_kick(d);
		pthread_mutex_lock(&d->kick_mu);
	}
	pthread_mutex_unlock(&d->kick_mu);
	return NULL;
}

static void kick_stop(struct dev *d)
{
	pthread_mutex_lock(&d->kick_mu);
	bool started = d->kick_started;
	d->kick_stopping = true;
	pthread_cond_signal(&d->kick_cv);
	pthread_mutex_unlock(&d->kick_mu);
	if (started)
		pthread_join(d->kick_thread, NULL);
}

void rio_dev_data_written(struct dev *d, size_t len)
{
	if (d->crash_after || atomic_load(&d->no_kick))
		return;
	uint64_t before = atomic_fetch_add(&d->data_unkicked, len);
	if (before + len < DEV_KICK_BYTES || before >= DEV_KICK_BYTES)
		return;   /* below the mark, or a kick is under way */
	pthread_mutex_lock(&d->kick_mu);
	if (!d->kick_started && !d->kick_stopping) {
		d->kick_started = pthread_create(&d->kick_thread, NULL, kick_thread, d) == 0;
		if (d->kick_started)   /* by its creator: named from its start */
			(void)pthread_setname_np(d->kick_thread, "recon-kick");
	}
	bool handed = d->kick_started && !d->kick_stopping;
	if (handed) {
		d->kick_wanted = true;
		pthread_cond_signal(&d->kick_cv);
	}
	pthread_mutex_unlock(&d->kick_mu);
	if (!handed)
		writeback_kick(d);   /* no thread: here, as before */
}

/* Zeros written when the device cannot zero a range itself. */
#define DEV_ZERO_CHUNK (1u << 20)

static errcode_t dev_write_zeros(struct dev *d, uint64_t off, uint64_t len)
{
	size_t chunk = len < DEV_ZERO_CHUNK ? (size_t)len : DEV_ZERO_CHUNK;
	void *zero = calloc(1, chunk);
	if (!zero)
		return ENOMEM;
	errcode_t err = 0;
	while (len && !err) {
		size_t n = len < chunk ? (size_t)len : chunk;
		err = rio_dev_pwrite(d, off, zero, n);
		off += n;
		len -= n;
	}
	free(zero);
	return err;
}

errcode_t rio_dev_zero(struct dev *d, uint64_t off, uint64_t len)
{
	static const int modes[] = { FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
				     FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE };
	int m;
	while (!d->crash_after && (m = atomic_load(&d->zero_mode)) < 2) {
		if (fallocate(d->fd, modes[m], (off_t)off, (off_t)len) == 0) {
			struct dev_req r = { .write = true, .off = off, .len = len };
			dev_count(d, &r);
			return 0;
		}
		if (errno != EOPNOTSUPP && errno != ENOSYS && errno != EINVAL)
			return errno;   /* an I/O error, or the host is full */
		/* this device cannot: the next way, for good */
		atomic_compare_exchange_strong(&d->zero_mode, &m, m + 1);
	}
	return dev_write_zeros(d, off, len);
}

bool rio_dev_crashed(struct dev *d)
{
	if (!d->crash_after)
		return false;
	pthread_mutex_lock(&d->fault_lock);
	bool c = d->crashed;
	pthread_mutex_unlock(&d->fault_lock);
	return c;
}
