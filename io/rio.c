/*
 * io/rio.c - recon-fuse's libext2fs io_manager: the channel entry points,
 * the one seam every metadata write passes through, the file-data path and
 * journal recovery.  The device is dev.c, the cache cache.c, transactions
 * txn.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "rio_internal.h"

struct rio_config rio_cfg = RIO_CONFIG_DEFAULTS;

void rio_set_config(const struct rio_config *cfg)
{
	rio_cfg = *cfg;
}

/* ---- journal replayed into memory (read-only opens) ---- */

struct replay_ent {
	uint64_t blk;
	struct replay_ent *next;
	unsigned char data[];
};

struct rio_replay {
	atomic_uint refs;
	dev_t dev;                /* the device it belongs to: st_dev/st_ino of an */
	ino_t ino;                /* image file, st_rdev of a block device */
	dev_t rdev;
	bool blockdev;
	unsigned bs;              /* block size of the entries */
	struct replay_ent **hash;
	size_t nhash, n;
};

/* The replay a read-only open of the same device adopts (libext2fs's copies
 * are stale after a replay, so the caller closes and opens the file system
 * again; the manager's open takes only a name, hence process-global, as
 * rio_cfg). */
static pthread_mutex_t replay_mu = PTHREAD_MUTEX_INITIALIZER;
static struct rio_replay *replay_installed;

static size_t replay_slot(uint64_t blk, size_t nhash)
{
	return (size_t)((blk * 0x9E3779B97F4A7C15ull) >> 23) & (nhash - 1);
}

static struct replay_ent *replay_find(const struct rio_replay *rp, uint64_t blk)
{
	for (struct replay_ent *e = rp->hash[replay_slot(blk, rp->nhash)]; e; e = e->next)
		if (e->blk == blk)
			return e;
	return NULL;
}

static void replay_unref(struct rio_replay *rp)
{
	if (!rp || atomic_fetch_sub(&rp->refs, 1) != 1)
		return;
	for (size_t i = 0; i < rp->nhash; i++)
		while (rp->hash[i]) {
			struct replay_ent *e = rp->hash[i];
			rp->hash[i] = e->next;
			free(e);
		}
	free(rp->hash);
	free(rp);
}

static struct rio_replay *replay_ref(struct rio_replay *rp)
{
	atomic_fetch_add(&rp->refs, 1);
	return rp;
}

static errcode_t replay_new(int fd, unsigned bs, struct rio_replay **out)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return errno;
	struct rio_replay *rp = calloc(1, sizeof(*rp));
	if (!rp)
		return ENOMEM;
	atomic_init(&rp->refs, 1);
	rp->blockdev = S_ISBLK(st.st_mode);
	rp->dev = st.st_dev;
	rp->ino = st.st_ino;
	rp->rdev = st.st_rdev;
	rp->bs = bs;
	rp->nhash = 256;
	rp->hash = calloc(rp->nhash, sizeof(*rp->hash));
	if (!rp->hash) {
		free(rp);
		return ENOMEM;
	}
	*out = rp;
	return 0;
}

static bool replay_same_device(const struct rio_replay *rp, int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || S_ISBLK(st.st_mode) != rp->blockdev)
		return false;
	return rp->blockdev ? st.st_rdev == rp->rdev : st.st_dev == rp->dev && st.st_ino == rp->ino;
}

/* Whole block blk now reads as data (while the replay is being built). */
static errcode_t replay_put(struct rio_replay *rp, uint64_t blk, const void *data)
{
	struct replay_ent *e = replay_find(rp, blk);
	if (e) {
		memcpy(e->data, data, rp->bs);
		return 0;
	}
	if (rp->n >= rp->nhash) {
		size_t nhash = rp->nhash * 2;
		struct replay_ent **h = calloc(nhash, sizeof(*h));
		if (!h)
			return ENOMEM;
		for (size_t i = 0; i < rp->nhash; i++)
			while (rp->hash[i]) {
				struct replay_ent *x = rp->hash[i];
				rp->hash[i] = x->next;
				size_t sl = replay_slot(x->blk, nhash);
				x->next = h[sl];
				h[sl] = x;
			}
		free(rp->hash);
		rp->hash = h;
		rp->nhash = nhash;
	}
	e = malloc(sizeof(*e) + rp->bs);
	if (!e)
		return ENOMEM;
	e->blk = blk;
	memcpy(e->data, data, rp->bs);
	size_t sl = replay_slot(blk, rp->nhash);
	e->next = rp->hash[sl];
	rp->hash[sl] = e;
	rp->n++;
	return 0;
}

/* Copy the replayed bytes of [off, off+len) over buf (which holds the
 * device's). */
static void replay_patch(const struct rio_replay *rp, uint64_t off, size_t len, void *buf)
{
	if (len == 0 || rp->n == 0)
		return;
	uint64_t bs = rp->bs;
	unsigned char *dst = buf;
	for (uint64_t b = off / bs; b <= (off + len - 1) / bs; b++) {
		const struct replay_ent *e = replay_find(rp, b);
		if (!e)
			continue;
		uint64_t lo, hi;
		rio_overlap(b * bs, bs, off, len, &lo, &hi);
		memcpy(dst + (lo - off), e->data + (lo - b * bs), hi - lo);
	}
}

/* ---- the seam ---- */

/* Every metadata write of the channel passes here, and only here: before
 * rio_txn_attach into the write-back cache, after it into the open
 * transaction's overlay. */
static errcode_t meta_write_seam(struct rio_chan *rc, uint64_t off, size_t len, const void *buf)
{
	if (len == 0)
		return 0;
	rc->meta_writes++;
	if (rc->prep)
		rio_txn_prep_note_write(rc, off, len);
	if (rc->txn)
		return rio_ovl_write(rc->txn, rc, off, len, buf);
	return rio_cache_write(&rc->cache, &rc->dev, off, len, buf);
}

errcode_t rio_approved_read(struct rio_chan *rc, uint64_t off, size_t len, void *buf)
{
	return rio_cache_read(&rc->cache, &rc->dev, off, len, buf);
}

bool rio_approved_zero(struct rio_chan *rc, uint64_t off, size_t len)
{
	return !rio_cache_holds_any(&rc->cache, off, len) && rio_dev_is_hole(&rc->dev, off, len);
}

errcode_t rio_meta_read(struct rio_chan *rc, uint64_t off, size_t len, void *buf)
{
	/* libext2fs re-reads the indirect blocks and bitmaps it is changing
	 * (bmap per file block): served from the overlay alone */
	enum rio_ovl_held held = rc->txn ? rio_ovl_read_whole(rc->txn, off, len, buf) : RIO_OVL_NONE;
	if (held == RIO_OVL_ALL)
		return 0;
	errcode_t err = rio_cache_read(&rc->cache, &rc->dev, off, len, buf);
	if (!err && rc->replay)
		replay_patch(rc->replay, off, len, buf);
	if (!err && held == RIO_OVL_SOME)
		rio_ovl_patch(rc->txn, off, len, buf);
	return err;
}

/* ---- io_manager entry points ---- */

static errcode_t chan_range(io_channel ch, unsigned long long block, int count,
			    uint64_t *off, size_t *len)
{
	if (count < 0)
		*len = (size_t)(-(long long)count);
	else
		*len = (size_t)count * (size_t)ch->block_size;
	*off = block * (uint64_t)ch->block_size;
	return 0;
}

static errcode_t rio_open(const char *name, int flags, io_channel *out)
{
	if (!name)
		return EXT2_ET_BAD_DEVICE_NAME;
	io_channel ch = calloc(1, sizeof(*ch));
	struct rio_chan *rc = calloc(1, sizeof(*rc));
	errcode_t err = 0;
	int fd = -1;
	if (!ch || !rc) {
		err = ENOMEM;
		goto fail;
	}
	rc->path = strdup(name);
	ch->name = strdup(name);
	if (!rc->path || !ch->name) {
		err = ENOMEM;
		goto fail;
	}
	rc->flags = flags;
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&rc->ovl_lock, &ma);
	pthread_mutexattr_destroy(&ma);
	pthread_mutex_init(&rc->totals.lock, NULL);

	struct stat st;
	bool have_st = stat(name, &st) == 0;
	bool blockdev = have_st && S_ISBLK(st.st_mode);
	/* an image file nobody may write (chmod a-w) is not opened for writing,
	 * even by root, whom the permission check would let through */
	if ((flags & IO_FLAG_RW) && have_st && S_ISREG(st.st_mode) && !(st.st_mode & 0222)) {
		err = EACCES;
		goto fail;
	}
	int oflags = (flags & IO_FLAG_RW) ? O_RDWR : O_RDONLY;
	/* a block device is ours alone: O_EXCL fails if it is mounted */
	if ((blockdev && !rio_cfg.shared_bdev) || (flags & IO_FLAG_EXCLUSIVE))
		oflags |= O_EXCL;
	fd = open(name, oflags | O_CLOEXEC);
	if (fd < 0) {
		err = errno;
		goto fail;
	}
	err = rio_dev_open(&rc->dev, fd, rio_cfg.quiet);
	if (err)
		goto fail;
	err = rio_cache_init(&rc->cache, (size_t)rio_cfg.block_cache_mb << 20, 1024);
	if (err) {
		rio_dev_close(&rc->dev);
		goto fail;
	}
	if (!(flags & IO_FLAG_RW)) {
		pthread_mutex_lock(&replay_mu);
		if (replay_installed && replay_same_device(replay_installed, fd))
			rc->replay = replay_ref(replay_installed);
		pthread_mutex_unlock(&replay_mu);
	}
	ch->magic = EXT2_ET_MAGIC_IO_CHANNEL;
	ch->manager = rio_io_manager;
	ch->block_size = 1024;
	ch->refcount = 1;
	ch->flags = blockdev ? CHANNEL_FLAGS_BLOCK_DEVICE : 0;
	ch->private_data = rc;
	*out = ch;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	if (rc)
		free(rc->path);
	if (ch)
		free(ch->name);
	free(rc);
	free(ch);
	return err;
}

static errcode_t rio_close(io_channel ch)
{
	if (ch->magic != EXT2_ET_MAGIC_IO_CHANNEL)
		return EXT2_ET_MAGIC_IO_CHANNEL;
	if (--ch->refcount > 0)
		return 0;
	struct rio_chan *rc = rio_chan_of(ch);
	errcode_t err = 0;
	if (rc->txn) {
		/* detach was not called: what is open is not approved and is
		 * dropped, never written unchecked */
		fprintf(stderr, "recon-fuse: %s closed without rio_txn_detach: the open transaction is dropped\n",
			rc->path);
		rio_txn_free(rc->txn);
		rc->txn = NULL;
	}
	rio_txn_prep_drop(rc);
	if (rc->flags & IO_FLAG_RW)
		err = rio_flush_device(ch);
	rio_cache_destroy(&rc->cache);
	rio_dev_close(&rc->dev);
	replay_unref(rc->replay);
	rio_txn_totals_free(&rc->totals);
	free(rc->sealed);
	free(rc->deferred);
	free(rc->pristine);
	pthread_mutex_destroy(&rc->ovl_lock);
	if (close(rc->dev.fd) < 0 && !err)
		err = errno;
	free(rc->path);
	free(rc);
	free(ch->name);
	free(ch);
	return err;
}

static errcode_t rio_set_blksize(io_channel ch, int blksize)
{
	if (blksize <= 0)
		return EXT2_ET_INVALID_ARGUMENT;
	struct rio_chan *rc = rio_chan_of(ch);
	errcode_t err = rio_cache_set_blksize(&rc->cache, &rc->dev, (unsigned)blksize);
	if (err)
		return err;
	ch->block_size = blksize;
	return 0;
}

static errcode_t rio_read_blk64(io_channel ch, unsigned long long block, int count, void *data)
{
	uint64_t off;
	size_t len;
	chan_range(ch, block, count, &off, &len);
	return rio_meta_read(rio_chan_of(ch), off, len, data);
}

static errcode_t rio_read_blk(io_channel ch, unsigned long block, int count, void *data)
{
	return rio_read_blk64(ch, block, count, data);
}

static errcode_t rio_write_blk64(io_channel ch, unsigned long long block, int count,
				 const void *data)
{
	struct rio_chan *rc = rio_chan_of(ch);
	if (!(rc->flags & IO_FLAG_RW))
		return EXT2_ET_RO_FILSYS;
	uint64_t off;
	size_t len;
	chan_range(ch, block, count, &off, &len);
	return meta_write_seam(rc, off, len, data);
}

static errcode_t rio_write_blk(io_channel ch, unsigned long block, int count, const void *data)
{
	return rio_write_blk64(ch, block, count, data);
}

static errcode_t rio_write_byte(io_channel ch, unsigned long offset, int count, const void *data)
{
	struct rio_chan *rc = rio_chan_of(ch);
	if (!(rc->flags & IO_FLAG_RW))
		return EXT2_ET_RO_FILSYS;
	if (count < 0)
		return EXT2_ET_INVALID_ARGUMENT;
	return meta_write_seam(rc, offset, (size_t)count, data);
}

static errcode_t rio_flush(io_channel ch)
{
	return rio_flush_device(ch);
}

/* "cache=off": blocks read from the device do not enter the cache (cached
 * and dirty blocks are still served from it; writes are unchanged) until
 * "cache=on".  For a pass that reads each block once, as the mount reads
 * every group's bitmaps. */
static errcode_t rio_set_option(io_channel ch, const char *option, const char *arg)
{
	struct rio_chan *rc = rio_chan_of(ch);
	if (!option || !arg || strcmp(option, "cache"))
		return EXT2_ET_INVALID_ARGUMENT;
	if (strcmp(arg, "on") && strcmp(arg, "off"))
		return EXT2_ET_INVALID_ARGUMENT;
	rio_cache_set_fill(&rc->cache, !strcmp(arg, "on"));
	return 0;
}

static errcode_t rio_io_get_stats(io_channel ch, io_stats *out)
{
	/* libext2fs wants a pointer it does not free: keep one per process
	 * refreshed on each call (only the counters are read) */
	static __thread struct struct_io_stats st;
	struct rio_chan *rc = rio_chan_of(ch);
	st.num_fields = 2;
	st.bytes_read = atomic_load(&rc->dev.bytes_read);
	st.bytes_written = rc->hide_write_stats ? 0 : atomic_load(&rc->dev.bytes_written);
	if (out)
		*out = &st;
	return 0;
}

/* Zero [block, block+count) in place.  Only used by tools (mke2fs-style
 * callers); file data never reaches the channel.  Goes through the seam so
 * that it is ordered and checked like any metadata write. */
static errcode_t rio_zeroout(io_channel ch, unsigned long long block, unsigned long long count)
{
	struct rio_chan *rc = rio_chan_of(ch);
	if (!(rc->flags & IO_FLAG_RW))
		return EXT2_ET_RO_FILSYS;
	size_t bs = (size_t)ch->block_size;
	void *zero = calloc(1, bs);
	if (!zero)
		return ENOMEM;
	errcode_t err = 0;
	for (unsigned long long i = 0; i < count && !err; i++)
		err = meta_write_seam(rc, (block + i) * bs, bs, zero);
	free(zero);
	return err;
}

static struct struct_io_manager rio_manager_struct = {
	.magic = EXT2_ET_MAGIC_IO_MANAGER,
	.name = "recon-fuse io_uring I/O manager",
	.open = rio_open,
	.close = rio_close,
	.set_blksize = rio_set_blksize,
	.read_blk = rio_read_blk,
	.write_blk = rio_write_blk,
	.flush = rio_flush,
	.write_byte = rio_write_byte,
	.set_option = rio_set_option,
	.get_stats = rio_io_get_stats,
	.read_blk64 = rio_read_blk64,
	.write_blk64 = rio_write_blk64,
	.zeroout = rio_zeroout,
};

io_manager rio_io_manager = &rio_manager_struct;

/* ---- public calls ---- */

errcode_t rio_readahead_blocks(io_channel ch, const blk64_t *blks, size_t n)
{
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager)
		return EXT2_ET_INVALID_ARGUMENT;
	struct rio_chan *rc = rio_chan_of(ch);
	uint64_t bs = (uint64_t)ch->block_size;
	uint64_t *offs = malloc((n ? n : 1) * sizeof(*offs));
	if (!offs)
		return ENOMEM;
	for (size_t i = 0; i < n; i++)
		offs[i] = blks[i] <= UINT64_MAX / bs ? blks[i] * bs : 0;
	rio_dev_readahead_list(&rc->dev, offs, n, bs);
	return 0;
}

errcode_t rio_get_stats(io_channel ch, struct rio_stats *out)
{
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager)
		return EXT2_ET_MAGIC_IO_CHANNEL;
	struct rio_chan *rc = rio_chan_of(ch);
	memset(out, 0, sizeof(*out));
	out->device_reads = atomic_load(&rc->dev.reads);
	out->device_writes = atomic_load(&rc->dev.writes);
	out->bytes_read = atomic_load(&rc->dev.bytes_read);
	out->bytes_written = atomic_load(&rc->dev.bytes_written);
	out->flushes = atomic_load(&rc->dev.flushes);
	pthread_mutex_lock(&rc->cache.lock);
	out->cache_hits = rc->cache.hits;
	out->cache_misses = rc->cache.misses;
	pthread_mutex_unlock(&rc->cache.lock);
	out->meta_writes = rc->meta_writes;
	out->uring = rc->dev.uring;
	out->checker_attached_early = rc->chk_early;
	return 0;
}

/* Before a write of file data is issued: the data guard, the injected
 * fault, then no cached or pending metadata copy of the blocks may survive
 * (written back over the data later, or read stale). */
static errcode_t data_write_begin(io_channel ch, ext2_ino_t ino, const struct rio_extent *ext,
				  unsigned n)
{
	struct rio_chan *rc = rio_chan_of(ch);
	struct txn_manager *t = rc->txn;
	if (!(rc->flags & IO_FLAG_RW))
		return EXT2_ET_RO_FILSYS;
	if (t) {
		errcode_t gerr = rio_txn_data_guard(t, ino, ext, n);
		if (gerr)
			return gerr;
	}
	if (rio_cfg.fault_data_eio &&
	    __atomic_add_fetch(&rc->data_write_calls, 1, __ATOMIC_RELAXED) == rio_cfg.fault_data_eio)
		return EIO;
	size_t bs = (size_t)ch->block_size;
	for (unsigned i = 0; i < n; i++) {
		if (rc->prep)
			rio_txn_prep_note_write(rc, ext[i].blk * bs, (size_t)ext[i].count * bs);
		rio_cache_invalidate(&rc->cache, ext[i].blk * bs, (size_t)ext[i].count * bs);
		if (t)
			rio_ovl_data_written(t, ext[i].blk * bs, (size_t)ext[i].count * bs);
	}
	return 0;
}

errcode_t rio_data_zero(io_channel ch, ext2_ino_t ino, const struct rio_extent *ext, unsigned n)
{
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager)
		return EXT2_ET_MAGIC_IO_CHANNEL;
	if (n == 0)
		return 0;
	errcode_t err = data_write_begin(ch, ino, ext, n);
	size_t bs = (size_t)ch->block_size;
	for (unsigned i = 0; i < n && !err; i++)
		err = rio_dev_zero(&rio_chan_of(ch)->dev, ext[i].blk * bs, (uint64_t)ext[i].count * bs);
	return err;
}

errcode_t rio_data_io(io_channel ch, bool write, ext2_ino_t ino, const struct rio_extent *ext,
		      unsigned n)
{
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager)
		return EXT2_ET_MAGIC_IO_CHANNEL;
	struct rio_chan *rc = rio_chan_of(ch);
	if (n == 0)
		return 0;
	struct txn_manager *t = rc->txn;
	if (write) {
		errcode_t werr = data_write_begin(ch, ino, ext, n);
		if (werr)
			return werr;
	}
	/* a file's write is mostly one extent: no allocation for a few */
	struct dev_req here[8];
	struct dev_req *reqs = n <= 8 ? memset(here, 0, sizeof(here)) : calloc(n, sizeof(*reqs));
	if (!reqs)
		return ENOMEM;
	size_t bs = (size_t)ch->block_size;
	for (unsigned i = 0; i < n; i++) {
		reqs[i].write = write;
		reqs[i].off = ext[i].blk * bs;
		reqs[i].len = (size_t)ext[i].count * bs;
		reqs[i].buf = ext[i].buf;
	}
	errcode_t err = rio_dev_submit(&rc->dev, reqs, n);
	if (!err && write)
		for (unsigned i = 0; i < n; i++)
			rio_dev_data_written(&rc->dev, reqs[i].len);
	/* a block allocated in the open transaction reads as what libext2fs
	 * wrote into it (zeroes), not as the old contents of the device */
	if (!err && !write && rc->replay)
		for (unsigned i = 0; i < n; i++)
			replay_patch(rc->replay, reqs[i].off, reqs[i].len, reqs[i].buf);
	if (!err && !write && t)
		for (unsigned i = 0; i < n; i++)
			rio_ovl_patch(t, reqs[i].off, reqs[i].len, reqs[i].buf);
	if (reqs != here)
		free(reqs);
	return err;
}

/* Block i of ext, as the file's data reads, into its place in ext->buf. */
static errcode_t read_block_of(io_channel ch, ext2_ino_t ino, const struct rio_extent *ext,
			       uint32_t i)
{
	struct rio_extent one = { .blk = ext->blk + i, .count = 1,
				  .buf = (unsigned char *)ext->buf + (size_t)i * ch->block_size };
	return rio_data_io(ch, false, ino, &one, 1);
}

static bool held_elsewhere(struct rio_chan *rc, uint64_t blk)
{
	return (rc->txn && rio_ovl_holds(rc->txn, blk)) ||
	       (rc->replay && replay_find(rc->replay, blk));
}

errcode_t rio_data_write_range(io_channel ch, ext2_ino_t ino, const struct rio_extent *ext,
			       size_t skip, size_t len)
{
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager)
		return EXT2_ET_MAGIC_IO_CHANNEL;
	struct rio_chan *rc = rio_chan_of(ch);
	size_t bs = (size_t)ch->block_size, end = skip + len, total = (size_t)ext->count * bs;
	if (ext->count == 0 || len == 0 || skip >= bs || end > total || end <= total - bs)
		return EINVAL;
	uint32_t last = ext->count - 1;
	bool head = skip > 0, tail = end < total;
	if ((head && held_elsewhere(rc, ext->blk)) || (tail && held_elsewhere(rc, ext->blk + last))) {
		/* the device's copy is not the file's there: read-modify-write */
		unsigned char *b = ext->buf;
		unsigned char *range = malloc(len);
		if (!range)
			return ENOMEM;
		memcpy(range, b + skip, len);
		errcode_t err = head ? read_block_of(ch, ino, ext, 0) : 0;
		if (!err && tail && (last > 0 || !head))
			err = read_block_of(ch, ino, ext, last);
		memcpy(b + skip, range, len);
		free(range);
		return err ? err : rio_data_io(ch, true, ino, ext, 1);
	}
	errcode_t err = data_write_begin(ch, ino, ext, 1);
	if (err)
		return err;
	struct dev_req req = {
		.write = true,
		.off = ext->blk * bs + skip,
		.len = len,
		.buf = (unsigned char *)ext->buf + skip,
	};
	err = rio_dev_submit(&rc->dev, &req, 1);
	if (!err)
		rio_dev_data_written(&rc->dev, req.len);
	return err;
}

errcode_t rio_flush_device(io_channel ch)
{
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager)
		return EXT2_ET_MAGIC_IO_CHANNEL;
	struct rio_chan *rc = rio_chan_of(ch);
	if (!(rc->flags & IO_FLAG_RW))
		return 0;
	errcode_t err = rio_cache_writeback(&rc->cache, &rc->dev);
	if (err)
		return err;
	return rio_dev_flush(&rc->dev);
}

size_t rio_dirty_blocks(io_channel ch)
{
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager)
		return 0;
	return rio_cache_dirty(&rio_chan_of(ch)->cache);
}

/* ---- journal recovery ---- */

static errcode_t raw_read_blk(void *ctx, uint64_t blk, void *buf)
{
	struct rio_raw_dev *r = ctx;
	return rio_dev_pread(&r->rc->dev, blk * r->blksize, buf, r->blksize);
}

static errcode_t raw_write_blks(void *ctx, uint64_t blk, unsigned count, const void *buf)
{
	struct rio_raw_dev *r = ctx;
	uint64_t off = blk * r->blksize;
	size_t len = (size_t)count * r->blksize;
	rio_cache_invalidate(&r->rc->cache, off, len);
	return rio_dev_pwrite(&r->rc->dev, off, buf, len);
}

static errcode_t raw_flush(void *ctx)
{
	struct rio_raw_dev *r = ctx;
	return rio_dev_flush(&r->rc->dev);
}

void rio_jbd_dev_init(struct rio_raw_dev *ctx, struct jbd_dev *jd, struct rio_chan *rc,
		      uint64_t blksize)
{
	ctx->rc = rc;
	ctx->blksize = blksize;
	jd->ctx = ctx;
	jd->read_blk = raw_read_blk;
	jd->write_blks = raw_write_blks;
	jd->flush = raw_flush;
	jd->view = false;
}

/* A superblock changed in place keeps a valid checksum (metadata_csum: an
 * ext4 image whose journal was replayed). */
static void sb_csum_refresh(struct ext2_super_block *sb)
{
	if (ext2fs_le32_to_cpu(sb->s_feature_ro_compat) & EXT4_FEATURE_RO_COMPAT_METADATA_CSUM)
		sb->s_checksum = ext2fs_cpu_to_le32(ext2fs_crc32c_le(~0u, (unsigned char *)sb,
						    offsetof(struct ext2_super_block, s_checksum)));
}

errcode_t rio_raw_sb_update(struct rio_chan *rc, uint32_t incompat_set, uint32_t incompat_clear,
			    uint16_t state_set, uint16_t state_clear)
{
	struct ext2_super_block sb;
	errcode_t err = rio_dev_pread(&rc->dev, SUPERBLOCK_OFFSET, &sb, sizeof(sb));
	if (err)
		return err;
	uint32_t incompat = ext2fs_le32_to_cpu(sb.s_feature_incompat);
	uint16_t state = ext2fs_le16_to_cpu(sb.s_state);
	uint32_t new_incompat = (incompat | incompat_set) & ~incompat_clear;
	uint16_t new_state = (uint16_t)((state | state_set) & ~state_clear);
	uint32_t stored = sb.s_checksum;
	sb_csum_refresh(&sb);
	/* also when only the checksum is stale: a replayed superblock block
	 * logged before its last change must not stay so */
	if (new_incompat == incompat && new_state == state && sb.s_checksum == stored)
		return 0;
	sb.s_feature_incompat = ext2fs_cpu_to_le32(new_incompat);
	sb.s_state = ext2fs_cpu_to_le16(new_state);
	sb_csum_refresh(&sb);
	rio_cache_invalidate(&rc->cache, SUPERBLOCK_OFFSET, sizeof(sb));
	err = rio_dev_pwrite(&rc->dev, SUPERBLOCK_OFFSET, &sb, sizeof(sb));
	if (err)
		return err;
	return rio_dev_flush(&rc->dev);
}

void rio_raw_sb_to_orig(ext2_filsys fs, struct rio_chan *rc)
{
	if (!fs->orig_super)
		return;
	unsigned char *orig = (unsigned char *)fs->orig_super;
	if (rio_dev_pread(&rc->dev, SUPERBLOCK_OFFSET, orig, SUPERBLOCK_SIZE)) {
		/* unknown: every word differs, so the next flush writes it whole */
		const unsigned char *cur = (const unsigned char *)fs->super;
		for (size_t i = 0; i < SUPERBLOCK_SIZE; i++)
			orig[i] = (unsigned char)~cur[i];
	}
}

/* Clear needs_recovery on disk and in libext2fs's copy. */
static errcode_t clear_recover_flag(ext2_filsys fs, struct rio_chan *rc)
{
	errcode_t err = rio_raw_sb_update(rc, 0, EXT3_FEATURE_INCOMPAT_RECOVER, 0, 0);
	if (err)
		return err;
	fs->super->s_feature_incompat &= ~EXT3_FEATURE_INCOMPAT_RECOVER;
	rio_raw_sb_to_orig(fs, rc);
	return 0;
}

/* The journal's device path while replaying into memory: reads see what the
 * replay wrote so far, writes stay in memory, nothing needs flushing. */
struct mem_replay_dev {
	struct rio_chan *rc;
	struct rio_replay *rp;
};

static errcode_t mem_read_blk(void *ctx, uint64_t blk, void *buf)
{
	struct mem_replay_dev *m = ctx;
	errcode_t err = rio_dev_pread(&m->rc->dev, blk * m->rp->bs, buf, m->rp->bs);
	if (!err)
		replay_patch(m->rp, blk * m->rp->bs, m->rp->bs, buf);
	return err;
}

static errcode_t mem_write_blks(void *ctx, uint64_t blk, unsigned count, const void *buf)
{
	struct mem_replay_dev *m = ctx;
	errcode_t err = 0;
	for (unsigned i = 0; i < count && !err; i++)
		err = replay_put(m->rp, blk + i, (const unsigned char *)buf + (size_t)i * m->rp->bs);
	return err;
}

static errcode_t mem_flush(void *ctx)
{
	(void)ctx;
	return 0;
}

/* Open the journal through dev and replay what needs recovery; *replayed =
 * transactions replayed.  Shared by the in-memory (read-only) and the
 * on-disk replay. */
static errcode_t replay_journal(ext2_filsys fs, struct jbd_dev *dev, unsigned *replayed,
				char *msg, size_t msglen)
{
	struct jbd *j = NULL;
	errcode_t err = jbd_open(fs, dev, &j, msg, msglen);
	if (err)
		return err;
	if (jbd_needs_recovery(j)) {
		unsigned n = 0;
		err = jbd_recover(j, &n);
		if (err && msg && !msg[0])
			snprintf(msg, msglen, "journal replay failed: %s", error_message(err));
		if (!err && replayed)
			*replayed = n;
	}
	jbd_close(j);
	return err;
}

/* A read-only channel: replay the journal into memory, as the recovered
 * state a read-write replay would have written (needs_recovery cleared in
 * the superblock, the log empty), and make this channel and every later
 * read-only open of the same device read through it.  The device is not
 * written. */
static errcode_t recover_in_memory(ext2_filsys fs, struct rio_chan *rc, unsigned *replayed,
				   char *msg, size_t msglen)
{
	struct rio_replay *rp = NULL;
	errcode_t err = replay_new(rc->dev.fd, fs->blocksize, &rp);
	if (err)
		return err;
	struct mem_replay_dev m = { rc, rp };
	struct jbd_dev jdev = { .ctx = &m, .read_blk = mem_read_blk,
				.write_blks = mem_write_blks, .flush = mem_flush, .view = true };
	err = replay_journal(fs, &jdev, replayed, msg, msglen);
	if (err)
		goto out;
	/* the superblock as the replay leaves it, needs_recovery cleared */
	unsigned char *blk = malloc(rp->bs);
	if (!blk) {
		err = ENOMEM;
		goto out;
	}
	uint64_t sb_blk = SUPERBLOCK_OFFSET / rp->bs;
	err = mem_read_blk(&m, sb_blk, blk);
	if (!err) {
		struct ext2_super_block *sb = (void *)(blk + SUPERBLOCK_OFFSET % rp->bs);
		sb->s_feature_incompat = ext2fs_cpu_to_le32(ext2fs_le32_to_cpu(sb->s_feature_incompat) &
							   ~EXT3_FEATURE_INCOMPAT_RECOVER);
		sb_csum_refresh(sb);
		err = replay_put(rp, sb_blk, blk);
	}
	free(blk);
	if (err)
		goto out;
	pthread_mutex_lock(&replay_mu);
	replay_unref(replay_installed);
	replay_installed = replay_ref(rp);
	pthread_mutex_unlock(&replay_mu);
	replay_unref(rc->replay);
	rc->replay = replay_ref(rp);
	fs->super->s_feature_incompat &= ~EXT3_FEATURE_INCOMPAT_RECOVER;
	fs->flags &= ~(EXT2_FLAG_DIRTY | EXT2_FLAG_BB_DIRTY | EXT2_FLAG_IB_DIRTY);
out:
	if (err && msg && !msg[0])
		snprintf(msg, msglen, "replaying the journal into memory: %s", error_message(err));
	replay_unref(rp);
	return err;
}

void rio_replay_forget(void)
{
	pthread_mutex_lock(&replay_mu);
	replay_unref(replay_installed);
	replay_installed = NULL;
	pthread_mutex_unlock(&replay_mu);
}

/* Open the journal for reading only (its superblock and the journal inode's
 * map), judge it, and take its recorded error if asked. */
static errcode_t journal_peek(ext2_filsys fs, char *msg, size_t msglen, int32_t *jerrno)
{
	io_channel ch = fs->io;
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager)
		return EXT2_ET_MAGIC_IO_CHANNEL;
	if (!ext2fs_has_feature_journal(fs->super) || fs->super->s_journal_inum == 0)
		return 0;
	struct rio_raw_dev ctx;
	struct jbd_dev jdev;
	rio_jbd_dev_init(&ctx, &jdev, rio_chan_of(ch), fs->blocksize);
	struct jbd *j = NULL;
	errcode_t err = jbd_open(fs, &jdev, &j, msg, msglen);
	if (!err && jerrno)
		*jerrno = jbd_errno(j);
	jbd_close(j);
	return err;
}

errcode_t rio_journal_check(ext2_filsys fs, char *msg, size_t msglen)
{
	if (msg && msglen)
		msg[0] = 0;
	return journal_peek(fs, msg, msglen, NULL);
}

errcode_t rio_journal_errno(ext2_filsys fs, int32_t *jerrno)
{
	*jerrno = 0;
	return journal_peek(fs, NULL, 0, jerrno);
}

errcode_t rio_journal_recover(ext2_filsys fs, unsigned *replayed, char *msg, size_t msglen)
{
	if (replayed)
		*replayed = 0;
	if (msg && msglen)
		msg[0] = 0;
	io_channel ch = fs->io;
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager) {
		if (msg)
			snprintf(msg, msglen, "file system not opened through rio_io_manager");
		return EXT2_ET_MAGIC_IO_CHANNEL;
	}
	struct rio_chan *rc = rio_chan_of(ch);
	bool flag = ext2fs_has_feature_journal_needs_recovery(fs->super);
	if (!ext2fs_has_feature_journal(fs->super)) {
		if (!flag)
			return 0;
		if (msg)
			snprintf(msg, msglen, "needs_recovery is set but the file system has no journal");
		return EXT2_ET_NO_JOURNAL;
	}
	if (fs->super->s_journal_inum == 0) {
		if (msg)
			snprintf(msg, msglen, "external journal (journal_dev) is not supported");
		return EXT2_ET_LOAD_EXT_JOURNAL;
	}
	if (!(rc->flags & IO_FLAG_RW))
		return flag ? recover_in_memory(fs, rc, replayed, msg, msglen) : 0;
	/* anything libext2fs wrote before recovery goes first, as it asked */
	errcode_t err = rio_flush_device(ch);
	if (err)
		return err;

	struct rio_raw_dev ctx;
	struct jbd_dev jdev;
	rio_jbd_dev_init(&ctx, &jdev, rc, fs->blocksize);
	err = replay_journal(fs, &jdev, replayed, msg, msglen);
	if (err)
		return err;
	err = clear_recover_flag(fs, rc);
	if (err && msg)
		snprintf(msg, msglen, "clearing needs_recovery: %s", error_message(err));
	/* libext2fs's copies are stale now: nothing of them may be written back */
	fs->flags &= ~(EXT2_FLAG_DIRTY | EXT2_FLAG_BB_DIRTY | EXT2_FLAG_IB_DIRTY);
	return err;
}
