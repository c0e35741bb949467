/*
 * fuse/file.c - file data: open/read/write/release, fsync, fallocate, hole
 * punching and SEEK_DATA/SEEK_HOLE (the block map is bmap.c's).
 */
#include "rfs.h"
#include "inline.h"
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

/* ---- file data ---- */

/* The failed operation is rolled back, but a failed write may have left any
 * part of an overwritten block on the disk. */
static int data_io_failed(struct rfs *r, ext2_ino_t ino, bool write)
{
	if (write)
		data_error_note(r, ino);
	return -EIO;
}

/* Read or write whole blocks; phys[i] == 0 means a hole (read as zeros,
 * never written).  Contiguous runs go out as one extent. */
int blocks_io(struct rfs *r, ext2_ino_t ino, bool write, const blk64_t *phys, unsigned n,
	      char *buf)
{
	size_t bs = r->fs->blocksize;
	struct rio_extent ext[64];
	unsigned ne = 0;

	for (unsigned i = 0; i < n; i++) {
		if (!phys[i]) {
			if (!write)
				memset(buf + i * bs, 0, bs);
			continue;
		}
		if (ne && ext[ne - 1].blk + ext[ne - 1].count == phys[i] &&
		    (char *)ext[ne - 1].buf + ext[ne - 1].count * bs == buf + i * bs) {
			ext[ne - 1].count++;
			continue;
		}
		if (ne == 64) {
			errcode_t e = rio_data_io(r->fs->io, write, ino, ext, ne);
			if (e)
				return data_io_failed(r, ino, write);
			ne = 0;
		}
		ext[ne].blk = phys[i];
		ext[ne].count = 1;
		ext[ne].buf = buf + i * bs;
		ne++;
	}
	if (ne && rio_data_io(r->fs->io, write, ino, ext, ne))
		return data_io_failed(r, ino, write);
	return 0;
}

/* Zero n newly allocated blocks phys[] (contiguous runs as one extent)
 * without sending zeros where the device can zero a range itself. */
static int blocks_zero(struct rfs *r, ext2_ino_t ino, const blk64_t *phys, unsigned n)
{
	struct rio_extent ext[64];
	unsigned ne = 0;

	for (unsigned i = 0; i < n; i++) {
		if (ne && ext[ne - 1].blk + ext[ne - 1].count == phys[i]) {
			ext[ne - 1].count++;
			continue;
		}
		if (ne == 64) {
			if (rio_data_zero(r->fs->io, ino, ext, ne))
				return data_io_failed(r, ino, true);
			ne = 0;
		}
		ext[ne++] = (struct rio_extent){ .blk = phys[i], .count = 1, .buf = NULL };
	}
	if (ne && rio_data_zero(r->fs->io, ino, ext, ne))
		return data_io_failed(r, ino, true);
	return 0;
}

/* Touch times after a change; relatime decides atime on reads. */
static bool atime_needs_update(struct rfs *r, struct ext2_inode *in)
{
	time_t now = time(NULL);
	if (flags_noatime(in))
		return false;
	switch (r->cfg->atime) {
	case ATIME_NOATIME:
		return false;
	case ATIME_STRICTATIME:
		return (time_t)in->i_atime != now;
	default:
		return in->i_atime <= in->i_mtime || in->i_atime <= in->i_ctime ||
		       now - (time_t)in->i_atime >= 86400;
	}
}

static void maybe_touch_atime(struct rfs *r, ext2_ino_t ino)
{
	struct ext2_inode in;
	if (r->ro || wr_begin(r) || get_inode(r, ino, &in) || !atime_needs_update(r, &in))
		return;
	in.i_atime = stamp_now(r, ino, T_A);
	int ret = put_inode(r, ino, &in);
	(void)wr_end(r, ret, false);
}

/* What an open file handle is, in fi->fh (set by set_open_mode). */
#define FH_CACHED 1u	/* reads and writes go through the kernel's page cache */
#define FH_DIRECT 2u	/* they bypass it: each write(2) is a WRITE */

void open_get(struct rfs *r, ext2_ino_t ino, const struct fuse_file_info *fi)
{
	struct open_ino **p = open_slot(r, ino);
	if (!*p) {
		*p = calloc(1, sizeof(**p));
		if (!*p)
			return;   /* untracked: an unlink while open frees at once */
		(*p)->ino = ino;
	}
	(*p)->count++;
	if (fi && (fi->fh & FH_CACHED))
		(*p)->cached++;
}

/* An open the kernel never got (its opener went away): counted no more. */
void open_undo(struct rfs *r, ext2_ino_t ino, const struct fuse_file_info *fi)
{
	struct open_ino *o = *open_slot(r, ino);
	if (!o || !o->count)
		return;
	o->count--;
	if (fi && (fi->fh & FH_CACHED) && o->cached)
		o->cached--;
}

/* Write-only opens bypass the kernel's page cache (they cannot be read or
 * mmapped, so nothing is lost): each write(2) becomes one WRITE, where the
 * cached path splits writes at partially filled pages and asks
 * getxattr("security.capability") before each one (do_write drops that
 * attribute and the set-id bits itself).  O_DIRECT opens too: through the
 * cached file operations the kernel drops the written range from the page
 * cache before an asynchronous direct write (AIO, io_uring) and not after it
 * completes, so a buffered read racing it caches the old data for good
 * (tests/explore/dio_race: stale reads within 100 rounds); the direct-I/O
 * operations drop the range as each WRITE is sent, and op_write closes the
 * window between that drop and the reply.  A shared mmap of such an fd goes
 * through the page cache (FUSE_DIRECT_IO_ALLOW_MMAP, asked for in main.c's
 * INIT reply).  Other opens keep the cache. */
void set_open_mode(struct fuse_file_info *fi)
{
	if ((fi->flags & O_ACCMODE) == O_WRONLY || (fi->flags & O_DIRECT)) {
		fi->direct_io = 1;
		fi->fh = FH_DIRECT;
	} else {
		fi->keep_cache = 1;
		fi->fh = FH_CACHED;
	}
}

static int open_truncate(struct rfs *r, fuse_req_t req, ext2_ino_t ino, struct ext2_inode *in)
{
	int ret = wr_begin(r);
	if (ret)
		return ret;
	ret = do_truncate(r, ino, in, 0);
	if (!ret) {
		if (fuse_req_ctx(req)->uid != 0 && (in->i_mode & setid_bits_to_kill(req, in))) {
			in->i_mode &= ~setid_bits_to_kill(req, in);
			attr_changed(r, ino);
		}
		in->i_mtime = in->i_ctime = stamp_now(r, ino, T_M | T_C);
		ret = put_inode(r, ino, in);
	}
	return wr_end(r, ret, false);
}

void op_open(fuse_req_t req, fuse_ino_t fino, struct fuse_file_info *fi)
{
	struct rfs *r = R(req);
	ext2_ino_t ino = to_ext(fino);
	struct ext2_inode in;
	int ret;

	lock(r);
	ret = get_inode(r, ino, &in);
	if (!ret && ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) && r->ro)
		ret = -EROFS;
	if (!ret)
		ret = flags_check_open(&in, fi->flags);   /* immutable, append-only */
	/* libfuse negotiates FUSE_ATOMIC_O_TRUNC, so O_TRUNC reaches us here and
	 * not as a SETATTR: truncate as ext3's open does, times updated even
	 * when the file is already empty. */
	if (!ret && (fi->flags & O_TRUNC) && LINUX_S_ISREG(in.i_mode))
		ret = open_truncate(r, req, ino, &in);
	set_open_mode(fi);
	if (!ret)
		open_get(r, ino, fi);
	unlock(r);
	attr_notify(r);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	if (fuse_reply_open(req, fi) == -ENOENT) {
		/* the opener went away: no RELEASE will come */
		lock(r);
		open_undo(r, ino, fi);
		ret = held_settle(r, open_slot(r, ino));
		unlock(r);
		if (ret)
			fprintf(stderr, "recon-fuse: cannot free unlinked inode %u: %s (it stays "
				"on the orphan list)\n", ino, strerror(-ret));
	}
}

void op_read(fuse_req_t req, fuse_ino_t fino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct rfs *r = R(req);
	ext2_ino_t ino = to_ext(fino);
	size_t bs;
	struct ext2_inode in;
	char *buf = NULL;
	blk64_t *phys = NULL;
	size_t got = 0;
	int ret;

	(void)fi;
	lock(r);
	bs = r->fs->blocksize;
	ret = get_inode(r, ino, &in);
	if (ret)
		goto out;
	uint64_t isize = EXT2_I_SIZE(&in);
	if ((uint64_t)off >= isize || size == 0)
		goto out;
	if (off + size > isize)
		size = isize - off;
	blk64_t first = off / bs, last = (off + size - 1) / bs;
	unsigned n = last - first + 1;
	buf = malloc(n * bs);
	phys = calloc(n, sizeof(*phys));
	if (!buf || !phys) {
		ret = -ENOMEM;
		goto out;
	}
	if (in.i_flags & EXT4_INLINE_DATA_FL) {
		ret = inline_file_read(r->fs, ino, &in, off, size, buf + off % bs);
	} else {
		ret = bmap_run(r, ino, &in, first, n, phys, NULL);
		if (!ret)
			ret = blocks_io(r, ino, false, phys, n, buf);
	}
	if (!ret) {
		got = size;
		maybe_touch_atime(r, ino);
	}
out:
	unlock(r);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_buf(req, buf ? buf + off % bs : NULL, got);
	free(buf);
	free(phys);
}

/* Holes and unwritten blocks among n: what a write must allocate or convert. */
static unsigned count_new(const blk64_t *phys, const bool *unwritten, unsigned n,
			  unsigned *nunwritten)
{
	unsigned holes = 0;
	*nunwritten = 0;
	for (unsigned i = 0; i < n; i++) {
		holes += !phys[i];
		*nunwritten += unwritten[i];
	}
	return holes;
}

/* The partial first and last blocks of a write: what is there (holes and
 * unwritten blocks read as zeros) around the new bytes, in buf. */
static int read_edges(struct rfs *r, ext2_ino_t ino, const blk64_t *phys, const bool *unwritten,
		      unsigned n, off_t off, size_t size, size_t head, size_t tail, char *buf)
{
	size_t bs = r->fs->blocksize;
	blk64_t none = 0;
	int ret = 0;
	if (off % bs && !head)
		ret = blocks_io(r, ino, false, unwritten[0] ? &none : &phys[0], 1, buf);
	if (!ret && (off + size) % bs && !tail && (n > 1 || off % bs == 0 || head))
		ret = blocks_io(r, ino, false, unwritten[n - 1] ? &none : &phys[n - 1], 1,
				buf + (n - 1) * bs);
	return ret;
}

/* A write's n blocks from buf, except the first `head` bytes of the first
 * block and the last `tail` bytes of the last, which keep the file's data. */
static int write_blocks(struct rfs *r, ext2_ino_t ino, const blk64_t *phys, unsigned n,
			char *buf, size_t head, size_t tail)
{
	size_t bs = r->fs->blocksize;
	if (!head && !tail)
		return blocks_io(r, ino, true, phys, n, buf);
	for (unsigned i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && phys[j] == phys[i] + (j - i); j++)
			;
		size_t skip = i == 0 ? head : 0, keep = j == n ? tail : 0;
		int ret = 0;
		if (skip || keep) {
			struct rio_extent ext = { .blk = phys[i], .count = j - i, .buf = buf + i * bs };
			if (rio_data_write_range(r->fs->io, ino, &ext, skip, (j - i) * bs - skip - keep))
				ret = data_io_failed(r, ino, true);
		} else {
			ret = blocks_io(r, ino, true, phys + i, j - i, buf + i * bs);
		}
		if (ret)
			return ret;
	}
	return 0;
}

/* After the data is on its blocks: the unwritten ones among them are
 * written now. */
static int mark_written(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t first,
			const bool *unwritten, unsigned n)
{
	int ret = 0;
	for (unsigned i = 0; i < n && !ret;) {
		if (!unwritten[i]) {
			i++;
			continue;
		}
		unsigned j = i;
		while (j < n && unwritten[j])
			j++;
		ret = bmap_mark_written(r, ino, in, first + i, j - i);
		i = j;
	}
	return ret;
}

/* A write's block map: physical blocks and which are unwritten extents.
 * Up to 128 KiB of 4 KiB blocks (the kernel's usual WRITE) it is on the
 * stack: no allocation per request. */
#define WRITE_MAP_HERE 32
#define WRITE_BOUNCE_HERE (16 << 10)
struct write_map {
	blk64_t *phys;
	bool *unwritten;
	blk64_t phys_here[WRITE_MAP_HERE];
	bool unwritten_here[WRITE_MAP_HERE];
};

/* Zeroed maps of n blocks; false out of memory (write_map_free still due). */
static bool write_map_init(struct write_map *m, unsigned n)
{
	if (n <= WRITE_MAP_HERE) {
		m->phys = memset(m->phys_here, 0, n * sizeof(*m->phys));
		m->unwritten = memset(m->unwritten_here, 0, n * sizeof(*m->unwritten));
		return true;
	}
	m->phys = calloc(n, sizeof(*m->phys));
	m->unwritten = calloc(n, sizeof(*m->unwritten));
	return m->phys && m->unwritten;
}

static void write_map_free(struct write_map *m)
{
	if (m->phys != m->phys_here)
		free(m->phys);
	if (m->unwritten != m->unwritten_here)
		free(m->unwritten);
}

/* The bounce buffer of a write that is not whole blocks: the new bytes, the
 * gap after an old EOF in the first block zeroed, and around them what the
 * file holds.  Where a write starts or ends inside a block with data (an
 * append), the block's other bytes stay on the device, neither read nor
 * rewritten: *head bytes of the first block, *tail of the last (not the
 * first block's when its gap must be zeroed). */
static int fill_bounce(struct rfs *r, ext2_ino_t ino, const struct write_map *m, unsigned n,
		       off_t off, size_t size, uint64_t isize, const char *data, char *buf,
		       size_t *head, size_t *tail)
{
	size_t bs = r->fs->blocksize;
	bool gap = (uint64_t)off > isize && isize / bs == (uint64_t)off / bs;
	*head = off % bs && m->phys[0] && !m->unwritten[0] && !gap ? (size_t)(off % bs) : 0;
	*tail = (off + size) % bs && m->phys[n - 1] && !m->unwritten[n - 1] ?
		bs - (off + size) % bs : 0;
	int ret = read_edges(r, ino, m->phys, m->unwritten, n, off, size, *head, *tail, buf);
	if (ret)
		return ret;
	if (gap)
		memset(buf + isize % bs, 0, off - isize);
	memcpy(buf + off % bs, data, size);
	return 0;
}

/* The inode after a write's data (ret: its outcome so far) up to end:
 * the size when it grew, the times, set-id bits a user's write clears;
 * written once.  The first error wins. */
static int write_inode_after(struct rfs *r, fuse_req_t req, ext2_ino_t ino, union inode_buf *ib,
			     uint64_t end, int ret)
{
	struct ext2_inode *in = &ib->small;
	if (end > EXT2_I_SIZE(in) && !ret)
		ext2fs_inode_size_set(r->fs, in, end);
	in->i_mtime = in->i_ctime = stamp_now(r, ino, T_M | T_C);
	if (fuse_req_ctx(req)->uid != 0 && (in->i_mode & setid_bits_to_kill(req, in))) {
		in->i_mode &= ~setid_bits_to_kill(req, in);
		attr_changed(r, ino);
	}
	int pret = put_inode_buf(r, ino, ib);
	return ret ? ret : pret;
}

/* *size is cut to what fits below the largest file size (a write that
 * crosses it writes what fits, as the kernel's ext3 does; EFBIG only when
 * nothing does).  A probe allocates what the write needs and stops before
 * any data is written: the caller undoes it (write_what_fits). */
static int do_write(struct rfs *r, fuse_req_t req, ext2_ino_t ino, const char *data,
		    size_t *sizep, off_t off, bool probe, bool *no_xattrs)
{
	size_t bs = r->fs->blocksize;
	/* read once, written once (put_inode would read it again) */
	union inode_buf ib;
	struct ext2_inode *in = &ib.small;
	char *buf = NULL, *heap = NULL;
	struct write_map map;
	blk64_t *phys;
	bool *unwritten;
	int ret;

	if (off < 0)
		return -EINVAL;
	*no_xattrs = false;
	ret = get_inode_buf(r, ino, &ib);
	if (ret)
		return ret;
	/* the write adds none: drop_capability need not read the inode again */
	*no_xattrs = inode_buf_has_no_xattrs(r, &ib);
	uint64_t max = bmap_file_max(r, in);
	if ((uint64_t)off > max || ((uint64_t)off == max && *sizep))
		return -EFBIG;
	if ((uint64_t)off + *sizep > max)
		*sizep = max - off;
	size_t size = *sizep;
	if (LINUX_S_ISDIR(in->i_mode))
		return -EISDIR;
	ret = flags_check_write(in, off);
	if (ret)
		return ret;
	flags_sync_inode(r, in);
	if (size == 0)
		return 0;
	blk64_t first = off / bs, last = (off + size - 1) / bs;
	unsigned n = last - first + 1;
	/* whole blocks (dd's 1 MiB writes, cp's 128 KiB ones): written
	 * straight from the request, no bounce buffer (blocks_io only reads it) */
	bool whole = off % bs == 0 && size % bs == 0;
	char *src = whole ? (char *)data : NULL;
	/* a small write's bounce buffer (tar's 10 KiB) on the stack */
	char here[WRITE_BOUNCE_HERE] __attribute__((aligned(64)));
	if (!whole)
		src = buf = n * bs <= sizeof(here) ? here : (heap = malloc(n * bs));
	bool mapped = write_map_init(&map, n);
	phys = map.phys;
	unwritten = map.unwritten;
	if (!src || !mapped) {
		ret = -ENOMEM;
		goto out;
	}
	ret = bmap_run(r, ino, in, first, n, phys, unwritten);
	if (ret)
		goto out;
	unsigned nuw, holes = count_new(phys, unwritten, n, &nuw);
	if (holes && ((ret = space_check(r, req, holes)) != 0 || (ret = wr_room_for(r, holes)) != 0))
		goto out;
	/* a write past an EOF inside a block: the old tail becomes file
	 * content, zeroed first (in the buffer when the write starts in that
	 * block; inode.c's tail_zero says why) */
	uint64_t isize = EXT2_I_SIZE(in);
	if (!probe && (uint64_t)off > isize && isize / bs < first &&
	    (ret = tail_zero(r, ino, in, isize)) != 0)
		goto out;
	size_t head = 0, tail = 0;
	if (!whole && !probe &&
	    (ret = fill_bounce(r, ino, &map, n, off, size, isize, data, buf, &head, &tail)) != 0)
		goto out;
	ret = holes ? bmap_alloc_run(r, ino, in, first, n, false, phys) : 0;
	if (probe) {
		/* an unwritten extent split in two or three may need a block */
		if (!ret && nuw)
			ret = mark_written(r, ino, in, first, unwritten, n);
		goto out;
	}
	if (ret) {
		/* nothing written: give back what lies past the end of the file */
		bmap_trim_past_eof(r, ino, in, first, first + n);
		n = 0;
		(void)put_inode_buf(r, ino, &ib);   /* the write's error is the one to report */
	}
	int ioret = n ? write_blocks(r, ino, phys, n, src, head, tail) : 0;
	if (ioret && !ret)
		ret = ioret;
	if (n && !ret && nuw)
		ret = mark_written(r, ino, in, first, unwritten, n);
	if (n)
		ret = write_inode_after(r, req, ino, &ib, (uint64_t)off + size, ret);
out:
	free(heap);
	write_map_free(&map);
	return ret;
}

/*
 * Direct writes and the page cache.  The kernel drops the range of a direct
 * write from its page cache as it sends the WRITE, not when the write
 * completes (asynchronous direct I/O); a buffered READ of the range sent in
 * between, or answered first because requests are served in parallel
 * (threads, the io_uring queues), fills the cache with the old data, which
 * then outlives the write.  So a direct WRITE to a file that someone has
 * open through the page cache is answered only after an invalidation of its
 * range has gone through.  The invalidation waits for pages a pending READ
 * holds locked, so it runs on a thread of its own while requests go on.
 * A held WRITE keeps one of the kernel's background slots, and a readahead
 * waits for a slot with its pages already locked: with every slot held,
 * neither could go on.  So at most DW_HELD_MAX replies are held, the
 * others answered first and invalidated next.
 */
#define DW_HELD_MAX (MAX_BACKGROUND * 3 / 4)
struct dw_job {
	fuse_req_t req;		/* answered after the invalidation; NULL: none */
	fuse_ino_t ino;
	off_t off;
	size_t len;
	struct dw_job *next;
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct dw_job *head, **tail;
	unsigned held;		/* jobs with a reply to send */
	bool started, stopping, done;
	pthread_t thread;
	struct fuse_session *se;
} dw = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

static void *dw_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&dw.mu);
	for (;;) {
		while (!dw.head && !dw.stopping)
			pthread_cond_wait(&dw.cv, &dw.mu);
		struct dw_job *j = dw.head;
		if (!j)
			break;		/* stopping, nothing left */
		dw.head = j->next;
		if (!dw.head)
			dw.tail = &dw.head;
		pthread_mutex_unlock(&dw.mu);
		/* -ENOENT (the kernel has dropped the inode) is fine: no cache */
		(void)fuse_lowlevel_notify_inval_inode(dw.se, j->ino, j->off, (off_t)j->len);
		if (j->req)
			fuse_reply_write(j->req, j->len);
		pthread_mutex_lock(&dw.mu);
		if (j->req)
			dw.held--;
		free(j);
	}
	dw.done = true;
	pthread_mutex_unlock(&dw.mu);
	return NULL;
}

/* Hand a direct write's invalidation (and its reply, when req) to the
 * thread.  False when it cannot take it (out of memory, no thread, or
 * DW_HELD_MAX replies held): the caller answers itself. */
static bool dw_push(struct rfs *r, fuse_req_t req, fuse_ino_t ino, off_t off, size_t len)
{
	struct dw_job *j = malloc(sizeof(*j));
	if (!j)
		return false;
	*j = (struct dw_job){ .req = req, .ino = ino, .off = off, .len = len };
	pthread_mutex_lock(&dw.mu);
	if (!dw.started && !dw.stopping) {
		dw.tail = &dw.head;
		dw.se = r->se;
		dw.started = pthread_create(&dw.thread, NULL, dw_main, NULL) == 0;
	}
	bool ok = dw.started && !dw.done && (!req || dw.held < DW_HELD_MAX);
	if (ok) {
		dw.held += req != NULL;
		*dw.tail = j;
		dw.tail = &j->next;
		pthread_cond_signal(&dw.cv);
	}
	pthread_mutex_unlock(&dw.mu);
	if (!ok)
		free(j);
	return ok;
}

void direct_write_replies_stop(void)
{
	pthread_mutex_lock(&dw.mu);
	dw.stopping = true;
	pthread_cond_signal(&dw.cv);
	pthread_mutex_unlock(&dw.mu);
}

bool direct_write_replies_busy(void)
{
	pthread_mutex_lock(&dw.mu);
	bool busy = dw.started && !dw.done;
	pthread_mutex_unlock(&dw.mu);
	return busy;
}

void direct_write_replies_join(void)
{
	pthread_mutex_lock(&dw.mu);
	bool started = dw.started;
	dw.stopping = true;
	pthread_cond_signal(&dw.cv);
	pthread_mutex_unlock(&dw.mu);
	if (started)
		pthread_join(dw.thread, NULL);
	dw.started = false;
}

/* A direct write to a file open through the page cache elsewhere: its range
 * must leave the cache before the write is answered. */
static bool write_needs_invalidation(struct rfs *r, ext2_ino_t ino,
				     const struct fuse_file_info *fi)
{
	if (!fi || !(fi->fh & FH_DIRECT))
		return false;
	struct open_ino *o = *open_slot(r, ino);
	return o && o->cached;
}

/* Bytes of a write from off that end at the end of its k-th block. */
static size_t leading_part(size_t bs, off_t off, size_t size, uint64_t k)
{
	uint64_t len = k * bs - (uint64_t)off % bs;
	return len < size ? (size_t)len : size;
}

/*
 * A write of several blocks that does not fit whole (after the ENOSPC
 * retry) writes its largest leading part that does, in whole blocks from
 * off, and *sizep becomes its length, as the kernel's ext3 and ext4 return
 * a short count.  What fits is found by probes (allocation only, each
 * undone), since the index or extent blocks a part needs depend on the
 * file's map; then that part is written for real.  -ENOSPC when not even
 * the first block's part fits.
 */
static int write_what_fits(struct rfs *r, fuse_req_t req, ext2_ino_t ino, const char *data,
			   size_t *sizep, off_t off)
{
	size_t bs = r->fs->blocksize;
	uint64_t fits = 0, fails = ((uint64_t)off % bs + *sizep + bs - 1) / bs;
	bool no_xattrs;
	int ret;

	if (fails < 2)
		return -ENOSPC;
	while (fails - fits > 1) {
		uint64_t mid = fits + (fails - fits) / 2;
		size_t len = leading_part(bs, off, *sizep, mid);
		if ((ret = wr_undo(r)) != 0)
			return ret;
		ret = do_write(r, req, ino, data, &len, off, true, &no_xattrs);
		if (ret && ret != -ENOSPC)
			return ret;
		if (ret)
			fails = mid;
		else
			fits = mid;
	}
	if ((ret = wr_undo(r)) != 0 || fits == 0)
		return ret ? ret : -ENOSPC;
	size_t len = leading_part(bs, off, *sizep, fits);
	ret = do_write(r, req, ino, data, &len, off, false, &no_xattrs);
	if (!ret && !no_xattrs)
		ret = drop_capability(r, ino);
	if (!ret)
		*sizep = len;
	return ret;
}

void op_write(fuse_req_t req, fuse_ino_t fino, const char *data, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct rfs *r = R(req);
	bool inval = false;
	int ret;

	lock(r);
	ret = wr_begin(r);
	if (!ret) {
		bool retried = false;
		do {
			bool no_xattrs;
			ret = do_write(r, req, to_ext(fino), data, &size, off, false, &no_xattrs);
			if (!ret && !no_xattrs)
				ret = drop_capability(r, to_ext(fino));
		} while (wr_retry_enospc(r, ret, &retried));
		if (ret == -ENOSPC)
			ret = write_what_fits(r, req, to_ext(fino), data, &size, off);
		ret = wr_end(r, ret, false);
	}
	if (!ret)
		inval = write_needs_invalidation(r, to_ext(fino), fi);
	unlock(r);
	attr_notify(r);
	if (ret)
		fuse_reply_err(req, -ret);
	else if (!inval)
		fuse_reply_write(req, size);
	else if (!uring_may_hold_reply() || !dw_push(r, req, fino, off, size)) {
		/* no entry of the queue or background slot to spare: answer now,
		 * invalidate next (never from this thread: it may wait on a READ
		 * only we can answer) */
		fuse_reply_write(req, size);
		(void)dw_push(r, NULL, fino, off, size);
	}
}

/* Nothing to do at close (data reaches us by WRITE, durability by FSYNC):
 * ENOSYS tells the kernel to stop sending FLUSH, one round trip less per
 * close (with the writeback cache it still writes the dirty pages back
 * before close returns). */
void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, ENOSYS);
}

/* The last close of a file or directory unlinked while open frees it (it
 * waited on the orphan list) unless the kernel still holds it.  Called with
 * the lock held; 0 or -errno. */
static int open_put(struct rfs *r, ext2_ino_t ino, const struct fuse_file_info *fi)
{
	struct open_ino **p = open_slot(r, ino);
	if (!*p || !(*p)->count)
		return 0;
	open_undo(r, ino, fi);
	return held_settle(r, p);
}

/* RELEASE and RELEASEDIR: the last close of an unlinked file or directory frees it */
void op_release(fuse_req_t req, fuse_ino_t fino, struct fuse_file_info *fi)
{
	struct rfs *r = R(req);
	int ret;

	lock(r);
	ret = open_put(r, to_ext(fino), fi);
	unlock(r);
	fuse_reply_err(req, -ret);
}

void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct rfs *r = R(req);
	int ret;

	(void)datasync;
	(void)fi;
	lock(r);
	if (fsync_defer(r, req, to_ext(ino))) {
		unlock(r);
		return;   /* answered once durable (fsyncwait.c) */
	}
	ret = rfs_fsync(r, to_ext(ino));
	unlock(r);
	fuse_reply_err(req, -ret);
}

/* Blocks allocated (and zeroed) per device write in fallocate. */
#define FALLOC_RUN 256

/* A commit in the middle of a fallocate that would not fit one transaction:
 * the file covers what is allocated so far (blocks past i_size are invalid
 * in a block-mapped file; an extent-mapped one keeps its size when asked,
 * its new blocks being unwritten), so each commit leaves a consistent file. */
static int fallocate_midway(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in,
			    uint64_t covered, bool keep_size)
{
	if (covered > EXT2_I_SIZE(in) && !keep_size)
		ext2fs_inode_size_set(r->fs, in, covered);
	errcode_t e = ext2fs_write_inode(r->fs, ino, in);
	if (!e)
		e = commit_midway(r);
	return e ? (e == EROFS ? -EROFS : -errmap(e)) : 0;
}

/* The holes among logical blocks [first, last]: what a fallocate allocates. */
static int count_holes(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t first,
		       blk64_t last, blk64_t *holes)
{
	blk64_t phys[FALLOC_RUN];
	bool uw[FALLOC_RUN];
	*holes = 0;
	for (blk64_t l = first; l <= last; l += FALLOC_RUN) {
		unsigned n = last - l + 1 < FALLOC_RUN ? last - l + 1 : FALLOC_RUN;
		int ret = bmap_run(r, ino, in, l, n, phys, uw);
		if (ret)
			return ret;
		for (unsigned i = 0; i < n; i++)
			*holes += !phys[i];
	}
	return 0;
}

/* One run of up to FALLOC_RUN blocks from l: its holes get blocks, unwritten
 * in an extent-mapped file, else zeroed (contiguous ones as one range, even
 * when an allocation failed: no stale data behind it). */
static int fallocate_run(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t l,
			 unsigned n)
{
	blk64_t phys[FALLOC_RUN], fresh[FALLOC_RUN];
	bool uw[FALLOC_RUN], hole[FALLOC_RUN];
	bool unwritten = bmap_has_unwritten(in);
	int ret = bmap_run(r, ino, in, l, n, phys, uw);
	if (ret)
		return ret;
	for (unsigned i = 0; i < n; i++)
		hole[i] = !phys[i];
	ret = bmap_alloc_run(r, ino, in, l, n, unwritten, phys);
	if (unwritten)
		return ret;
	unsigned nfresh = 0;
	for (unsigned i = 0; i < n; i++)
		if (hole[i] && phys[i])
			fresh[nfresh++] = phys[i];
	int zret = nfresh ? blocks_zero(r, ino, fresh, nfresh) : 0;
	return ret ? ret : zret;
}

static int do_fallocate(struct rfs *r, fuse_req_t req, ext2_ino_t ino, off_t off, off_t len,
			bool keep_size)
{
	size_t bs = r->fs->blocksize;
	struct ext2_inode in;
	int ret;

	if (off < 0 || len <= 0)
		return -EINVAL;
	ret = get_inode(r, ino, &in);
	if (ret)
		return ret;
	if ((uint64_t)off + len > bmap_file_max(r, &in))
		return -EFBIG;
	if (!LINUX_S_ISREG(in.i_mode))
		return LINUX_S_ISDIR(in.i_mode) ? -EISDIR : -ENODEV;
	/* blocks past i_size are invalid in a block-mapped file */
	if (keep_size && !bmap_has_unwritten(&in))
		return -EOPNOTSUPP;
	blk64_t first = off / bs, last = (off + len - 1) / bs, holes = 0;
	ret = count_holes(r, ino, &in, first, last, &holes);
	if (!ret)
		ret = space_check(r, req, holes);
	if (!ret)
		ret = wr_room_for(r, holes);
	/* the size grows past an EOF inside a block: its tail zeroed first */
	if (!ret && !keep_size && (uint64_t)off + len > EXT2_I_SIZE(&in))
		ret = tail_zero(r, ino, &in, EXT2_I_SIZE(&in));
	if (ret)
		return ret;
	for (blk64_t l = first; l <= last && !ret;) {
		unsigned n = last - l + 1 < FALLOC_RUN ? last - l + 1 : FALLOC_RUN;
		ret = fallocate_run(r, ino, &in, l, n);
		l += n;
		/* the mapping blocks the next run writes must fit the journal */
		size_t used = 0, limit = 0;
		if (!ret && l <= last && r->attached &&
		    !rio_txn_room(r->fs->io, &used, &limit) && used + bmap_alloc_meta(r) > limit)
			ret = fallocate_midway(r, ino, &in, l * bs, keep_size);
	}
	if (ret)
		bmap_trim_past_eof(r, ino, &in, first, last + 1);
	if (!ret && !keep_size && (uint64_t)off + len > EXT2_I_SIZE(&in))
		ext2fs_inode_size_set(r->fs, &in, off + len);
	in.i_ctime = stamp_now(r, ino, T_C | (keep_size ? 0 : T_M));
	if (!keep_size)
		in.i_mtime = in.i_ctime;
	int pret = put_inode(r, ino, &in);
	return ret ? ret : pret;
}

/* Zero bytes [from, to) of logical block lblk if it is mapped. */
static int zero_in_block(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t lblk,
			 size_t from, size_t to)
{
	size_t bs = r->fs->blocksize;
	blk64_t pblk;
	int ret = bmap_block(r, ino, in, lblk, &pblk);
	if (ret || !pblk || from >= to)
		return ret;
	char *buf = malloc(bs);
	if (!buf)
		return -ENOMEM;
	ret = blocks_io(r, ino, false, &pblk, 1, buf);
	if (!ret) {
		memset(buf + from, 0, to - from);
		ret = blocks_io(r, ino, true, &pblk, 1, buf);
	}
	free(buf);
	return ret;
}

/*
 * FALLOC_FL_PUNCH_HOLE (with KEEP_SIZE, as the VFS requires): the kernel's
 * ext3 punches block-mapped files too.  Bytes of partial blocks are zeroed,
 * whole blocks freed; nothing past EOF; the size stays.  A huge range is
 * freed in chunks sized to the transaction's room, committing in between
 * (every commit leaves a consistent file, partly punched).
 */
static int do_punch(struct rfs *r, ext2_ino_t ino, off_t off, off_t len)
{
	ext2_filsys fs = r->fs;
	uint64_t bs = fs->blocksize;
	struct ext2_inode in;
	int ret;

	if (off < 0 || len <= 0)
		return -EINVAL;
	ret = get_inode(r, ino, &in);
	if (ret)
		return ret;
	if (!LINUX_S_ISREG(in.i_mode))
		return LINUX_S_ISDIR(in.i_mode) ? -EISDIR : -ENODEV;
	uint64_t size = EXT2_I_SIZE(&in);
	if ((uint64_t)off >= size)
		return 0;
	uint64_t end = (uint64_t)len > size - off ? size : (uint64_t)off + len;
	blk64_t first = (off + bs - 1) / bs, stop = end / bs;   /* whole blocks [first, stop) */
	if (end == size)
		stop = (size + bs - 1) / bs;                    /* the last block, to EOF */
	if (off % bs)
		ret = zero_in_block(r, ino, &in, off / bs, off % bs,
				    end / bs == (uint64_t)off / bs ? end % bs : bs);
	/* a partial last block, unless the range reaches EOF (then it goes whole) */
	if (!ret && end % bs && end / bs >= first && end != size)
		ret = zero_in_block(r, ino, &in, end / bs, 0, end % bs);
	if (ret)
		return ret;
	while (first < stop && ext2fs_inode_has_valid_blocks2(fs, &in)) {
		blk64_t chunk = stop - first, fits;
		ret = punch_step(r, ino, &in, first, false, &fits);
		if (ret)
			return ret;
		if (!fits) {
			/* the transaction holds something: commit it, go on */
			errcode_t e = ext2fs_write_inode(fs, ino, &in);
			if (!e)
				e = commit_midway(r);
			if (e)
				return e == EROFS ? -EROFS : -errmap(e);
			continue;
		}
		if (chunk > fits)
			chunk = fits;
		errcode_t e = bmap_punch(fs, ino, &in, first, first + chunk);
		if (e)
			return -errmap(e);
		first += chunk;
	}
	in.i_ctime = in.i_mtime = stamp_now(r, ino, T_M | T_C);
	return put_inode(r, ino, &in);
}

void op_fallocate(fuse_req_t req, fuse_ino_t fino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	struct rfs *r = R(req);
	int ret;

	(void)fi;
	if (mode && mode != FALLOC_FL_KEEP_SIZE && mode != (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	lock(r);
	ret = wr_begin(r);
	if (!ret) {
		struct ext2_inode in;
		bool retried = false;
		ret = get_inode(r, to_ext(fino), &in);
		if (!ret)
			ret = flags_check_fallocate(&in, mode);
		if (!ret)
			flags_sync_inode(r, &in);
		if (!ret)
			do
				ret = (mode & FALLOC_FL_PUNCH_HOLE) ?
					      do_punch(r, to_ext(fino), off, len) :
					      do_fallocate(r, req, to_ext(fino), off, len,
							   mode & FALLOC_FL_KEEP_SIZE);
			while (wr_retry_enospc(r, ret, &retried));
		ret = wr_end(r, ret, false);
	}
	unlock(r);
	fuse_reply_err(req, -ret);
}

void op_lseek(fuse_req_t req, fuse_ino_t fino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	struct rfs *r = R(req);
	ext2_ino_t ino = to_ext(fino);
	struct ext2_inode in;
	off_t res = 0;
	int ret;

	(void)fi;
	if (whence != SEEK_DATA && whence != SEEK_HOLE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	lock(r);
	ret = get_inode(r, ino, &in);
	uint64_t size = ret ? 0 : EXT2_I_SIZE(&in), bs = r->fs->blocksize;
	if (!ret && (off < 0 || (uint64_t)off >= size))
		ret = -ENXIO;
	if (!ret) {
		blk64_t found = 0;
		if (in.i_flags & EXT4_INLINE_DATA_FL)
			found = whence == SEEK_DATA ? 0 : (size + bs - 1) / bs;   /* data all through */
		else
			ret = bmap_seek(r, ino, &in, off / bs, whence == SEEK_DATA, &found);
		uint64_t at = found * bs;
		res = at > (uint64_t)off ? (off_t)at : off;
		if (!ret && (uint64_t)res > size)
			res = size;                  /* the implicit hole at EOF */
		if (!ret && whence == SEEK_DATA && (uint64_t)res >= size)
			ret = -ENXIO;
	}
	unlock(r);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_lseek(req, res);
}
