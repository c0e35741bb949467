/*
 * fuse/ops.c - the FUSE low-level operations over libext2fs.  Node ids are
 * ext2 inode numbers (root mapped to FUSE_ROOT_ID), generations are
 * i_generation.  One mutex serialises every libext2fs call.  File data never
 * goes through the io_channel: blocks are mapped with ext2fs_bmap2 and moved
 * with rio_data_io; directories change only through dirindex.
 */
#include "rfs.h"
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#define LINK_MAX_EXT3 65000
/* The kernel is the only client of the image while it is mounted and it
 * invalidates what our replies to its own changes make stale, so its
 * entry and attribute caches can live long: each expiry costs a LOOKUP or
 * a GETATTR round trip (PostMark re-opens files older than a second). */
#define TIMEOUT 60.0

static struct rfs *R(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static ext2_ino_t to_ext(fuse_ino_t n)
{
	return n == FUSE_ROOT_ID ? EXT2_ROOT_INO : (ext2_ino_t)n;
}

static fuse_ino_t to_fuse(ext2_ino_t i)
{
	return i == EXT2_ROOT_INO ? FUSE_ROOT_ID : i;
}

static int errmap(errcode_t e)
{
	if (!e)
		return 0;
	if (e > 0 && e < 256)
		return (int)e;
	switch (e) {
	case EXT2_ET_BLOCK_ALLOC_FAIL:
	case EXT2_ET_INODE_ALLOC_FAIL:
	case EXT2_ET_DIR_NO_SPACE:
	case EXT2_ET_EA_NO_SPACE:
		return ENOSPC;
	case EXT2_ET_RO_FILSYS:
		return EROFS;
	case EXT2_ET_NO_MEMORY:
		return ENOMEM;
	case EXT2_ET_EA_KEY_NOT_FOUND:
		return ENODATA;
	case EXT2_ET_FILE_TOO_BIG:
		return EFBIG;
	case EXT2_ET_MISSING_EA_FEATURE:
	case EXT2_ET_EA_BAD_NAME_LEN:
		return EOPNOTSUPP;
	default:
		return EIO;
	}
}

/* A corrupt object: log once per inode, then EIO. */
static int corrupt(ext2_ino_t ino, const char *what)
{
	static ext2_ino_t logged[256];
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	bool seen = false;

	pthread_mutex_lock(&mu);
	for (unsigned i = 0; i < 256; i++)
		if (logged[i] == ino)
			seen = true;
	if (!seen)
		logged[ino % 256] = ino;
	pthread_mutex_unlock(&mu);
	if (!seen) {
		fprintf(stderr, "recon-fuse: inode %u: %s; returning EIO\n", ino, what);
		syslog(LOG_ERR, "recon-fuse: inode %u: %s", ino, what);
	}
	return -EIO;
}

static void lock(struct rfs *r)
{
	pthread_mutex_lock(&r->lock);
}

static void unlock(struct rfs *r)
{
	pthread_mutex_unlock(&r->lock);
}

static int get_inode(struct rfs *r, ext2_ino_t ino, struct ext2_inode *inode)
{
	if (ino < 1 || ino > r->fs->super->s_inodes_count)
		return corrupt(ino, "inode number out of range");
	errcode_t e = ext2fs_read_inode(r->fs, ino, inode);
	return e ? -errmap(e) : 0;
}

static int put_inode(struct rfs *r, ext2_ino_t ino, struct ext2_inode *inode)
{
	errcode_t e = ext2fs_write_inode(r->fs, ino, inode);
	return e ? -errmap(e) : 0;
}

static int ftype_of(struct rfs *r, unsigned mode)
{
	if (!ext2fs_has_feature_filetype(r->fs->super))
		return 0;
	switch (mode & LINUX_S_IFMT) {
	case LINUX_S_IFREG: return EXT2_FT_REG_FILE;
	case LINUX_S_IFDIR: return EXT2_FT_DIR;
	case LINUX_S_IFCHR: return EXT2_FT_CHRDEV;
	case LINUX_S_IFBLK: return EXT2_FT_BLKDEV;
	case LINUX_S_IFIFO: return EXT2_FT_FIFO;
	case LINUX_S_IFSOCK: return EXT2_FT_SOCK;
	case LINUX_S_IFLNK: return EXT2_FT_SYMLINK;
	}
	return 0;
}

static void fill_stat(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = in->i_mode;
	st->st_nlink = in->i_links_count;
	st->st_uid = inode_uid(*in);
	st->st_gid = inode_gid(*in);
	st->st_size = EXT2_I_SIZE(in);
	st->st_blksize = r->fs->blocksize;
	st->st_blocks = ext2fs_get_stat_i_blocks(r->fs, in);
	st->st_atime = in->i_atime;
	st->st_mtime = in->i_mtime;
	st->st_ctime = in->i_ctime;
	if (LINUX_S_ISCHR(in->i_mode) || LINUX_S_ISBLK(in->i_mode)) {
		if (in->i_block[0]) {
			st->st_rdev = makedev((in->i_block[0] >> 8) & 255, in->i_block[0] & 255);
		} else {
			uint32_t d = in->i_block[1];
			st->st_rdev = makedev((d & 0xfff00) >> 8, (d & 0xff) | ((d >> 12) & 0xfff00));
		}
	}
}

static void fill_entry(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in,
		       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = to_fuse(ino);
	e->generation = in->i_generation;
	fill_stat(r, ino, in, &e->attr);
	e->attr_timeout = TIMEOUT;
	e->entry_timeout = TIMEOUT;
}

/* ---- write lifecycle ---- */

static int wr_begin(struct rfs *r)
{
	if (r->ro)
		return -EROFS;
	if (rio_txn_failed(r->fs->io)) {
		r->ro = true;
		return -EROFS;
	}
	return 0;
}

/* End of a modifying operation: the transaction boundary. */
static int wr_end(struct rfs *r, int ret, bool force)
{
	errcode_t e = rio_txn_boundary(r->fs, force);

	if (e == EROFS) {
		if (!r->ro)
			fprintf(stderr, "recon-fuse: a commit was rejected; the file system is now "
				"read-only%s%s\n", rio_txn_last_violation(r->fs->io) ? ":\n" : "",
				rio_txn_last_violation(r->fs->io) ? rio_txn_last_violation(r->fs->io) : "");
		r->ro = true;
		/* libext2fs's in-memory state no longer matches the disk: forget
		 * what the indexes and the kernel cached from it */
		dindex_drop_all(r->di);
		if (r->cfg->on_violation == ONV_STOP)
			fuse_session_exit(r->se);
		return -EROFS;
	}
	if (e && !ret)
		return -errmap(e);
	return ret;
}

void rfs_tick(struct rfs *r)
{
	lock(r);
	if (r->fs && !r->ro && !wr_begin(r))
		(void)wr_end(r, 0, false);
	unlock(r);
}

static bool name_ok(const char *name, int *err)
{
	size_t n = strlen(name);
	if (n > EXT2_NAME_LEN) {
		*err = -ENAMETOOLONG;
		return false;
	}
	return true;
}

static int space_check(struct rfs *r, fuse_req_t req, blk64_t need)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	struct ext2_super_block *sb = r->fs->super;
	blk64_t fr = ext2fs_free_blocks_count(sb), res = ext2fs_r_blocks_count(sb);

	if (need == 0)
		return 0;
	if (c->uid == 0 || c->uid == sb->s_def_resuid || c->gid == sb->s_def_resgid)
		res = 0;
	return fr < need + res ? -ENOSPC : 0;
}

/* ---- open table and orphans ---- */

static struct open_ino **open_slot(struct rfs *r, ext2_ino_t ino)
{
	struct open_ino **p = &r->open_tab[ino % 1024];
	while (*p && (*p)->ino != ino)
		p = &(*p)->next;
	return p;
}

static int orphan_add(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in)
{
	in->i_dtime = r->fs->super->s_last_orphan;
	r->fs->super->s_last_orphan = ino;
	ext2fs_mark_super_dirty(r->fs);
	return put_inode(r, ino, in);
}

static int orphan_remove(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in)
{
	ext2_ino_t cur = r->fs->super->s_last_orphan, prev = 0;
	struct ext2_inode pin;
	unsigned guard = 0;

	while (cur && cur != ino && guard++ < r->fs->super->s_inodes_count) {
		if (get_inode(r, cur, &pin))
			return -EIO;
		prev = cur;
		cur = pin.i_dtime;
	}
	if (cur != ino)
		return -ENOENT;
	if (!prev) {
		r->fs->super->s_last_orphan = in->i_dtime;
		ext2fs_mark_super_dirty(r->fs);
	} else {
		pin.i_dtime = in->i_dtime;
		int ret = put_inode(r, prev, &pin);
		if (ret)
			return ret;
	}
	in->i_dtime = 0;
	return 0;
}

/*
 * Free the blocks of ino from logical block `keep` on.  A huge file frees
 * more blocks than one transaction may hold, so the punch goes from the end
 * in chunks sized to the room left, with i_size following each chunk (the
 * file stays consistent at every commit), committing in between.
 */
static int punch_from(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t keep)
{
	ext2_filsys fs = r->fs;
	uint64_t bs = fs->blocksize, apb = bs / 4;
	errcode_t e;

	if (!ext2fs_inode_has_valid_blocks2(fs, in))
		return 0;
	blk64_t cur = (EXT2_I_SIZE(in) + bs - 1) / bs;
	for (;;) {
		size_t used = 0, limit = 0;
		blk64_t chunk = ~0ULL;
		if (!r->ro && r->attached &&
		    !rio_txn_room(fs->io, &used, &limit) && limit) {
			size_t room = limit > used ? limit - used : 0;
			/* per chunk: its indirect blocks, a bitmap block per group
			 * touched, descriptors and the inode */
			blk64_t groups_room = room > 16 ? room - 16 : 0;
			chunk = groups_room / 2 * apb;
			if (chunk < apb) {
				e = rio_txn_boundary(fs, true);
				if (e)
					return e == EROFS ? -EROFS : -errmap(e);
				continue;
			}
		}
		if (cur <= keep || cur - keep <= chunk) {
			e = ext2fs_punch(fs, ino, in, NULL, keep, ~0ULL);
			return e ? -errmap(e) : 0;
		}
		blk64_t start = cur - chunk;
		e = ext2fs_punch(fs, ino, in, NULL, start, ~0ULL);
		if (!e && start * bs < EXT2_I_SIZE(in))
			e = ext2fs_inode_size_set(fs, in, start * bs);
		if (!e)
			e = ext2fs_write_inode(fs, ino, in);
		if (!e)
			e = rio_txn_boundary(fs, true);
		if (e)
			return e == EROFS ? -EROFS : -errmap(e);
		cur = start;
	}
}

int rfs_free_inode(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in)
{
	ext2_filsys fs = r->fs;
	errcode_t e;
	int ret;

	ret = punch_from(r, ino, in, 0);
	if (ret)
		return ret;
	blk64_t ea = ext2fs_file_acl_block(fs, in);
	if (ea) {
		__u32 count = 1;
		if (ea >= fs->super->s_first_data_block && ea < ext2fs_blocks_count(fs->super)) {
			e = ext2fs_adjust_ea_refcount3(fs, ea, NULL, -1, &count, ino);
			if (!e && count == 0)
				ext2fs_block_alloc_stats2(fs, ea, -1);
		}
		ext2fs_file_acl_block_set(fs, in, 0);
		ext2fs_iblk_sub_blocks(fs, in, 1);
	}
	in->i_links_count = 0;
	in->i_dtime = time(NULL);
	in->i_size = 0;
	in->i_size_high = 0;
	ret = put_inode(r, ino, in);
	if (ret)
		return ret;
	ext2fs_inode_alloc_stats2(fs, ino, -1, LINUX_S_ISDIR(in->i_mode));
	return 0;
}

/* Drop one link of a non-directory (or the last of a directory). */
static int drop_link(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in)
{
	if (LINUX_S_ISDIR(in->i_mode))
		in->i_links_count = 0;
	else if (in->i_links_count)
		in->i_links_count--;
	in->i_ctime = time(NULL);
	if (in->i_links_count)
		return put_inode(r, ino, in);
	if (LINUX_S_ISDIR(in->i_mode))
		dindex_forget(r->di, ino);
	struct open_ino *o = *open_slot(r, ino);
	if (o) {
		o->orphan = true;
		return orphan_add(r, ino, in);
	}
	return rfs_free_inode(r, ino, in);
}

int rfs_process_orphans(struct rfs *r)
{
	ext2_ino_t ino = r->fs->super->s_last_orphan;
	unsigned n = 0, guard = 0;

	r->fs->super->s_last_orphan = 0;
	ext2fs_mark_super_dirty(r->fs);
	while (ino && guard++ < 1000000) {
		struct ext2_inode in;
		if (ino > r->fs->super->s_inodes_count || get_inode(r, ino, &in)) {
			fprintf(stderr, "recon-fuse: orphan list broken at inode %u; stopped\n", ino);
			break;
		}
		ext2_ino_t next = in.i_dtime;
		in.i_dtime = 0;
		int ret;
		if (in.i_links_count == 0) {
			ret = rfs_free_inode(r, ino, &in);
		} else {
			uint64_t size = EXT2_I_SIZE(&in);
			blk64_t start = (size + r->fs->blocksize - 1) / r->fs->blocksize;
			errcode_t e = 0;
			if (ext2fs_inode_has_valid_blocks2(r->fs, &in))
				e = ext2fs_punch(r->fs, ino, &in, NULL, start, ~0ULL);
			ret = e ? -errmap(e) : put_inode(r, ino, &in);
		}
		if (ret) {
			fprintf(stderr, "recon-fuse: orphan inode %u: %s\n", ino, strerror(-ret));
			return ret;
		}
		n++;
		ino = next;
	}
	if (n)
		fprintf(stderr, "recon-fuse: processed %u orphan inode(s)\n", n);
	return 0;
}

/* ---- file data ---- */

static int check_blk(struct rfs *r, ext2_ino_t ino, blk64_t b)
{
	if (b && (b < r->fs->super->s_first_data_block || b >= ext2fs_blocks_count(r->fs->super)))
		return corrupt(ino, "block pointer out of range");
	return 0;
}

static int map_block(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t lblk,
		     blk64_t *pblk)
{
	int ret_flags = 0;
	errcode_t e = ext2fs_bmap2(r->fs, ino, in, NULL, 0, lblk, &ret_flags, pblk);
	if (e)
		return corrupt(ino, "cannot map a block");
	if (ret_flags & BMAP_RET_UNINIT)
		*pblk = 0;
	return check_blk(r, ino, *pblk);
}

/* Read or write whole blocks; phys[i] == 0 means a hole (read as zeros,
 * never written).  Contiguous runs go out as one extent. */
static int blocks_io(struct rfs *r, bool write, const blk64_t *phys, unsigned n, char *buf)
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
			errcode_t e = rio_data_io(r->fs->io, write, ext, ne);
			if (e)
				return -EIO;
			ne = 0;
		}
		ext[ne].blk = phys[i];
		ext[ne].count = 1;
		ext[ne].buf = buf + i * bs;
		ne++;
	}
	if (ne && rio_data_io(r->fs->io, write, ext, ne))
		return -EIO;
	return 0;
}

/* Give logical block lblk a new physical block (contents are the caller's). */
static int alloc_block(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t lblk,
		       blk64_t goal, blk64_t *pblk)
{
	ext2_filsys fs = r->fs;
	errcode_t e;

	if (!goal || goal >= ext2fs_blocks_count(fs->super))
		goal = ext2fs_find_inode_goal(fs, ino, in, lblk);
	if (goal >= ext2fs_blocks_count(fs->super))
		goal = fs->super->s_first_data_block;
	e = ext2fs_new_block2(fs, goal, NULL, pblk);
	if (e)
		return -errmap(e);
	ext2fs_block_alloc_stats2(fs, *pblk, +1);
	ext2fs_iblk_add_blocks(fs, in, 1);
	e = ext2fs_bmap2(fs, ino, in, NULL, BMAP_SET | BMAP_ALLOC, lblk, NULL, pblk);
	if (e) {
		ext2fs_block_alloc_stats2(fs, *pblk, -1);
		ext2fs_iblk_sub_blocks(fs, in, 1);
		return -errmap(e);
	}
	return 0;
}

/* After an allocation failed half-way: blocks past i_size are invalid in a
 * block-mapped file, so give them back. */
static void trim_past_eof(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in)
{
	blk64_t keep = (EXT2_I_SIZE(in) + r->fs->blocksize - 1) / r->fs->blocksize;
	if (ext2fs_inode_has_valid_blocks2(r->fs, in))
		(void)ext2fs_punch(r->fs, ino, in, NULL, keep, ~0ULL);
}

/* Touch times after a change; relatime decides atime on reads. */
static bool atime_needs_update(struct rfs *r, struct ext2_inode *in)
{
	time_t now = time(NULL);
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
	in.i_atime = time(NULL);
	int ret = put_inode(r, ino, &in);
	(void)wr_end(r, ret, false);
}

/* ---- operations ---- */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct rfs *r = userdata;
	long page = sysconf(_SC_PAGESIZE);

	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	/* The kernel's page cache gathers small writes into page-sized WRITEs
	 * (fewer round trips, and a write(2) no longer waits for us); fsync
	 * still writes the pages back and then reaches op_fsync.  Only when a
	 * block is at least a page: a page written back whole would otherwise
	 * turn the holes sharing it with the data into allocated zeros. */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	if ((conn->capable & FUSE_CAP_WRITEBACK_CACHE) && r->fs && page > 0 &&
	    r->fs->blocksize >= (unsigned long)page)
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	conn->time_gran = 1000000000;   /* ext3 stores whole seconds */
	conn->max_write = 1 << 20;
	conn->max_readahead = 1 << 20;
}

static void op_destroy(void *userdata)
{
	rfs_unmount(userdata);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct rfs *r = R(req);
	struct fuse_entry_param e;
	struct ext2_inode in;
	ext2_ino_t ino;
	int ft, ret;

	if (!name_ok(name, &ret)) {
		fuse_reply_err(req, -ret);
		return;
	}
	lock(r);
	ret = dindex_lookup(r->di, to_ext(parent), name, strlen(name), &ino, &ft);
	if (!ret)
		ret = get_inode(r, ino, &in);
	if (!ret)
		fill_entry(r, ino, &in, &e);
	unlock(r);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_entry(req, &e);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	(void)ino;
	(void)nlookup;
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	(void)count;
	(void)f;
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct rfs *r = R(req);
	struct ext2_inode in;
	struct stat st;
	int ret;

	(void)fi;
	lock(r);
	ret = get_inode(r, to_ext(ino), &in);
	if (!ret)
		fill_stat(r, to_ext(ino), &in, &st);
	unlock(r);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_attr(req, &st, TIMEOUT);
}

/* Zero the tail of the block holding `size` (a truncate that does not end
 * on a block boundary must not leave old bytes to reappear on extension). */
static int zero_tail(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, uint64_t size)
{
	size_t bs = r->fs->blocksize;
	blk64_t pblk;
	int ret;

	if (size % bs == 0 || !ext2fs_inode_has_valid_blocks2(r->fs, in))
		return 0;
	ret = map_block(r, ino, in, size / bs, &pblk);
	if (ret || !pblk)
		return ret;
	char *buf = malloc(bs);
	if (!buf)
		return -ENOMEM;
	ret = blocks_io(r, false, &pblk, 1, buf);
	if (!ret) {
		memset(buf + size % bs, 0, bs - size % bs);
		ret = blocks_io(r, true, &pblk, 1, buf);
	}
	free(buf);
	return ret;
}

static int do_truncate(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, uint64_t size)
{
	uint64_t old = EXT2_I_SIZE(in);
	size_t bs = r->fs->blocksize;
	errcode_t e;
	int ret;

	if (size > r->max_bytes)
		return -EFBIG;
	if (size < old) {
		ret = zero_tail(r, ino, in, size);
		if (ret)
			return ret;
		ret = punch_from(r, ino, in, (size + bs - 1) / bs);
		if (ret)
			return ret;
	}
	e = ext2fs_inode_size_set(r->fs, in, size);
	return e ? -errmap(e) : 0;
}

static void op_setattr(fuse_req_t req, fuse_ino_t fino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct rfs *r = R(req);
	ext2_ino_t ino = to_ext(fino);
	struct ext2_inode in;
	struct stat st;
	time_t now = time(NULL);
	int ret;

	(void)fi;
	lock(r);
	ret = wr_begin(r);
	if (ret)
		goto out;
	ret = get_inode(r, ino, &in);
	if (ret)
		goto end;
	if (to_set & FUSE_SET_ATTR_MODE)
		in.i_mode = (in.i_mode & LINUX_S_IFMT) | (attr->st_mode & 07777);
	if (to_set & FUSE_SET_ATTR_UID) {
		in.i_uid = attr->st_uid & 0xffff;
		ext2fs_set_i_uid_high(in, attr->st_uid >> 16);
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		in.i_gid = attr->st_gid & 0xffff;
		ext2fs_set_i_gid_high(in, attr->st_gid >> 16);
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (LINUX_S_ISDIR(in.i_mode)) {
			ret = -EISDIR;
			goto end;
		}
		if (!LINUX_S_ISREG(in.i_mode)) {
			ret = -EINVAL;
			goto end;
		}
		if ((uint64_t)attr->st_size > EXT2_I_SIZE(&in) &&
		    (ret = space_check(r, req, 0)) != 0 && 0)
			goto end;
		ret = do_truncate(r, ino, &in, attr->st_size);
		if (ret)
			goto end;
		in.i_mtime = now;
	}
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		in.i_atime = now;
	else if (to_set & FUSE_SET_ATTR_ATIME)
		in.i_atime = attr->st_atime;
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		in.i_mtime = now;
	else if (to_set & FUSE_SET_ATTR_MTIME)
		in.i_mtime = attr->st_mtime;
	in.i_ctime = (to_set & FUSE_SET_ATTR_CTIME) ? attr->st_ctime : now;
	ret = put_inode(r, ino, &in);
	if (!ret)
		fill_stat(r, ino, &in, &st);
end:
	ret = wr_end(r, ret, false);
out:
	unlock(r);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_attr(req, &st, TIMEOUT);
}

static void op_readlink(fuse_req_t req, fuse_ino_t fino)
{
	struct rfs *r = R(req);
	ext2_ino_t ino = to_ext(fino);
	struct ext2_inode in;
	char *buf = NULL;
	int ret;

	lock(r);
	ret = get_inode(r, ino, &in);
	if (ret)
		goto out;
	if (!LINUX_S_ISLNK(in.i_mode)) {
		ret = -EINVAL;
		goto out;
	}
	size_t len = EXT2_I_SIZE(&in);
	if (len >= r->fs->blocksize) {
		ret = corrupt(ino, "symlink too long");
		goto out;
	}
	buf = calloc(1, r->fs->blocksize + 1);
	if (!buf) {
		ret = -ENOMEM;
		goto out;
	}
	if (ext2fs_is_fast_symlink(&in)) {
		if (len >= sizeof(in.i_block)) {
			ret = corrupt(ino, "fast symlink too long");
			goto out;
		}
		memcpy(buf, in.i_block, len);
	} else {
		blk64_t pblk;
		ret = map_block(r, ino, &in, 0, &pblk);
		if (!ret && !pblk)
			ret = corrupt(ino, "symlink without a block");
		if (!ret)
			ret = blocks_io(r, false, &pblk, 1, buf);
	}
	buf[len] = 0;
out:
	unlock(r);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_readlink(req, buf);
	free(buf);
}

/* Allocate and write a new inode; in is filled. */
static int new_inode(struct rfs *r, fuse_req_t req, ext2_ino_t dir, unsigned mode,
		     struct ext2_inode *in, ext2_ino_t *out)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	struct ext2_inode din;
	errcode_t e;
	int ret;

	ret = get_inode(r, dir, &din);
	if (ret)
		return ret;
	e = ext2fs_new_inode(r->fs, dir, mode, NULL, out);
	if (e)
		return -errmap(e);
	memset(in, 0, sizeof(*in));
	in->i_mode = mode;
	in->i_uid = c->uid & 0xffff;
	ext2fs_set_i_uid_high(*in, c->uid >> 16);
	gid_t gid = c->gid;
	if (din.i_mode & LINUX_S_ISGID) {
		gid = inode_gid(din);
		if (LINUX_S_ISDIR(mode))
			in->i_mode |= LINUX_S_ISGID;
	}
	in->i_gid = gid & 0xffff;
	ext2fs_set_i_gid_high(*in, gid >> 16);
	in->i_atime = in->i_mtime = in->i_ctime = time(NULL);
	in->i_links_count = 1;
	in->i_generation = (uint32_t)lrand48();
	e = ext2fs_write_new_inode(r->fs, *out, in);
	if (e)
		return -errmap(e);
	ext2fs_inode_alloc_stats2(r->fs, *out, +1, LINUX_S_ISDIR(mode));
	return 0;
}

/* Common preamble of every create: dir exists and is a dir, name absent. */
static int check_new_name(struct rfs *r, ext2_ino_t dir, const char *name)
{
	struct ext2_inode din;
	ext2_ino_t ino;
	int ft, ret;

	if (!name_ok(name, &ret))
		return ret;
	ret = get_inode(r, dir, &din);
	if (ret)
		return ret;
	if (!LINUX_S_ISDIR(din.i_mode))
		return -ENOTDIR;
	if (din.i_links_count == 0)
		return -ENOENT;
	ret = dindex_lookup(r->di, dir, name, strlen(name), &ino, &ft);
	if (ret == 0)
		return -EEXIST;
	return ret == -ENOENT ? 0 : ret;
}

static void touch_dir(struct rfs *r, ext2_ino_t dir, int links_delta)
{
	struct ext2_inode din;
	if (get_inode(r, dir, &din))
		return;
	din.i_mtime = din.i_ctime = time(NULL);
	din.i_links_count += links_delta;
	(void)put_inode(r, dir, &din);
}

/* mknod, mkdir, symlink, create share this. */
static int make_node(struct rfs *r, fuse_req_t req, ext2_ino_t dir, const char *name,
		     unsigned mode, dev_t rdev, const char *link, struct fuse_entry_param *e,
		     ext2_ino_t *out_ino)
{
	ext2_filsys fs = r->fs;
	struct ext2_inode in;
	ext2_ino_t ino = 0;
	bool isdir = LINUX_S_ISDIR(mode);
	int ret;

	ret = check_new_name(r, dir, name);
	if (ret)
		return ret;
	/* a new directory needs its first block, a slow symlink its one block
	 * other nodes need no block */
	ret = space_check(r, req, isdir || (link && strlen(link) >= sizeof(in.i_block)) ? 1 : 0);
	if (ret)
		return ret;
	if (isdir) {
		struct ext2_inode din;
		ret = get_inode(r, dir, &din);
		if (ret)
			return ret;
		if (din.i_links_count >= LINK_MAX_EXT3)
			return -EMLINK;
	}
	ret = new_inode(r, req, dir, mode, &in, &ino);
	if (ret)
		return ret;
	if (LINUX_S_ISCHR(mode) || LINUX_S_ISBLK(mode)) {
		unsigned ma = major(rdev), mi = minor(rdev);
		if (ma < 256 && mi < 256)
			in.i_block[0] = ma << 8 | mi;
		else
			in.i_block[1] = (mi & 0xff) | (ma << 8) | ((mi & ~0xffu) << 12);
	} else if (isdir) {
		char *blockbuf = NULL;
		blk64_t pblk;
		errcode_t err = ext2fs_new_dir_block(fs, ino, dir, &blockbuf);
		if (!err)
			err = ext2fs_new_block2(fs, ext2fs_find_inode_goal(fs, ino, &in, 0), NULL, &pblk);
		if (!err)
			err = ext2fs_write_dir_block4(fs, pblk, blockbuf, 0, ino);
		ext2fs_free_mem(&blockbuf);
		if (err) {
			ret = -errmap(err);
			goto undo;
		}
		ext2fs_block_alloc_stats2(fs, pblk, +1);
		in.i_block[0] = pblk;
		in.i_size = fs->blocksize;
		ext2fs_iblk_set(fs, &in, 1);
		in.i_links_count = 2;
	} else if (link) {
		size_t len = strlen(link);
		if (len >= fs->blocksize) {
			ret = -ENAMETOOLONG;
			goto undo;
		}
		if (len < sizeof(in.i_block)) {
			memcpy(in.i_block, link, len);
		} else {
			char *buf = calloc(1, fs->blocksize);
			blk64_t pblk;
			if (!buf) {
				ret = -ENOMEM;
				goto undo;
			}
			memcpy(buf, link, len);
			ret = alloc_block(r, ino, &in, 0, 0, &pblk);
			if (!ret)
				ret = blocks_io(r, true, &pblk, 1, buf);
			free(buf);
			if (ret)
				goto undo;
		}
		in.i_size = len;
	}
	ret = put_inode(r, ino, &in);
	if (ret)
		goto undo;
	ret = dindex_add(r->di, dir, name, strlen(name), ino, ftype_of(r, mode));
	if (ret)
		goto undo;
	touch_dir(r, dir, isdir ? 1 : 0);
	fill_entry(r, ino, &in, e);
	*out_ino = ino;
	return 0;
undo:
	in.i_links_count = 0;
	(void)rfs_free_inode(r, ino, &in);
	return ret;
}

static void reply_new(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      dev_t rdev, const char *link)
{
	struct rfs *r = R(req);
	struct fuse_entry_param e;
	ext2_ino_t ino;
	int ret;

	lock(r);
	ret = wr_begin(r);
	if (!ret)
		ret = wr_end(r, make_node(r, req, to_ext(parent), name, mode, rdev, link, &e, &ino),
			     false);
	unlock(r);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_entry(req, &e);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	reply_new(req, parent, name, mode, rdev, NULL);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	reply_new(req, parent, name, (mode & 07777) | LINUX_S_IFDIR, 0, NULL);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	reply_new(req, parent, name, LINUX_S_IFLNK | 0777, 0, link);
}

static void open_get(struct rfs *r, ext2_ino_t ino)
{
	struct open_ino **p = open_slot(r, ino);
	if (!*p) {
		*p = calloc(1, sizeof(**p));
		if (!*p)
			return;   /* untracked: an unlink while open frees at once */
		(*p)->ino = ino;
	}
	(*p)->count++;
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct rfs *r = R(req);
	struct fuse_entry_param e;
	ext2_ino_t ino;
	int ret;

	lock(r);
	ret = wr_begin(r);
	if (!ret)
		ret = wr_end(r, make_node(r, req, to_ext(parent), name,
					  (mode & 07777) | LINUX_S_IFREG, 0, NULL, &e, &ino), false);
	if (!ret)
		open_get(r, ino);
	unlock(r);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	fi->keep_cache = 1;
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		/* the opener went away: undo the open count */
		lock(r);
		struct open_ino **p = open_slot(r, ino);
		if (*p && --(*p)->count == 0) {
			struct open_ino *o = *p;
			*p = o->next;
			free(o);
		}
		unlock(r);
	}
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct rfs *r = R(req);
	ext2_ino_t dir = to_ext(parent), ino;
	struct ext2_inode in;
	int ft, ret;

	lock(r);
	ret = wr_begin(r);
	if (ret)
		goto out;
	if (!name_ok(name, &ret))
		goto end;
	ret = dindex_lookup(r->di, dir, name, strlen(name), &ino, &ft);
	if (!ret)
		ret = get_inode(r, ino, &in);
	if (!ret && LINUX_S_ISDIR(in.i_mode))
		ret = -EISDIR;
	if (!ret)
		ret = dindex_remove(r->di, dir, name, strlen(name));
	if (!ret) {
		touch_dir(r, dir, 0);
		ret = drop_link(r, ino, &in);
	}
end:
	ret = wr_end(r, ret, false);
out:
	unlock(r);
	fuse_reply_err(req, -ret);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct rfs *r = R(req);
	ext2_ino_t dir = to_ext(parent), ino;
	struct ext2_inode in;
	int ft, ret;

	lock(r);
	ret = wr_begin(r);
	if (ret)
		goto out;
	if (!name_ok(name, &ret))
		goto end;
	if (!strcmp(name, ".")) {
		ret = -EINVAL;
		goto end;
	}
	if (!strcmp(name, "..")) {
		ret = -ENOTEMPTY;
		goto end;
	}
	ret = dindex_lookup(r->di, dir, name, strlen(name), &ino, &ft);
	if (!ret)
		ret = get_inode(r, ino, &in);
	if (!ret && !LINUX_S_ISDIR(in.i_mode))
		ret = -ENOTDIR;
	if (!ret) {
		ret = dindex_is_empty(r->di, ino);
		ret = ret == 1 ? 0 : ret == 0 ? -ENOTEMPTY : ret;
	}
	if (!ret)
		ret = dindex_remove(r->di, dir, name, strlen(name));
	if (!ret) {
		touch_dir(r, dir, -1);
		ret = drop_link(r, ino, &in);
	}
end:
	ret = wr_end(r, ret, false);
out:
	unlock(r);
	fuse_reply_err(req, -ret);
}

/* Is `dir` inside the tree of `anc` (or anc itself)? */
static int is_within(struct rfs *r, ext2_ino_t dir, ext2_ino_t anc)
{
	unsigned guard = 0;
	while (guard++ < 65536) {
		if (dir == anc)
			return 1;
		if (dir == EXT2_ROOT_INO)
			return 0;
		ext2_ino_t up;
		int ft, ret = dindex_lookup(r->di, dir, "..", 2, &up, &ft);
		if (ret)
			return ret;
		dir = up;
	}
	return -EIO;
}

static int set_dotdot(struct rfs *r, ext2_ino_t dir, ext2_ino_t parent)
{
	return dindex_replace(r->di, dir, "..", 2, parent, ftype_of(r, LINUX_S_IFDIR));
}

static int do_rename(struct rfs *r, ext2_ino_t sdir, const char *sname, ext2_ino_t ddir,
		     const char *dname, unsigned flags)
{
	ext2_ino_t sino, dino = 0;
	struct ext2_inode sin, din, pin;
	int sft, dft, ret;
	size_t sl = strlen(sname), dl = strlen(dname);
	time_t now = time(NULL);

	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE))
		return -EINVAL;
	if ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE))
		return -EINVAL;
	if (!name_ok(sname, &ret) || !name_ok(dname, &ret))
		return ret;
	ret = get_inode(r, ddir, &pin);
	if (ret)
		return ret;
	if (!LINUX_S_ISDIR(pin.i_mode))
		return -ENOTDIR;
	ret = dindex_lookup(r->di, sdir, sname, sl, &sino, &sft);
	if (ret)
		return ret;
	ret = dindex_lookup(r->di, ddir, dname, dl, &dino, &dft);
	if (ret == -ENOENT)
		dino = 0;
	else if (ret)
		return ret;
	ret = get_inode(r, sino, &sin);
	if (ret)
		return ret;
	bool sdirp = LINUX_S_ISDIR(sin.i_mode);
	if (dino) {
		ret = get_inode(r, dino, &din);
		if (ret)
			return ret;
	}
	if (flags & RENAME_EXCHANGE) {
		if (!dino)
			return -ENOENT;
		if (dino == sino)
			return 0;
		bool ddirp = LINUX_S_ISDIR(din.i_mode);
		if (sdirp && sdir != ddir && (ret = is_within(r, ddir, sino)) != 0)
			return ret < 0 ? ret : -EINVAL;
		if (ddirp && sdir != ddir && (ret = is_within(r, sdir, dino)) != 0)
			return ret < 0 ? ret : -EINVAL;
		ret = dindex_replace(r->di, ddir, dname, dl, sino, sft);
		if (!ret)
			ret = dindex_replace(r->di, sdir, sname, sl, dino, dft);
		if (ret)
			return ret;
		if (sdir != ddir) {
			if (sdirp && (ret = set_dotdot(r, sino, ddir)))
				return ret;
			if (ddirp && (ret = set_dotdot(r, dino, sdir)))
				return ret;
			int delta = (int)sdirp - (int)ddirp;
			touch_dir(r, sdir, -delta);
			touch_dir(r, ddir, delta);
		} else {
			touch_dir(r, sdir, 0);
		}
		sin.i_ctime = din.i_ctime = now;
		ret = put_inode(r, sino, &sin);
		return ret ? ret : put_inode(r, dino, &din);
	}
	if (dino == sino)
		return 0;
	if (dino && (flags & RENAME_NOREPLACE))
		return -EEXIST;
	if (sdirp) {
		if (!strcmp(sname, ".") || !strcmp(sname, ".."))
			return -EINVAL;
		if (sdir != ddir && (ret = is_within(r, ddir, sino)) != 0)
			return ret < 0 ? ret : -EINVAL;
	}
	bool ddirp = dino && LINUX_S_ISDIR(din.i_mode);
	if (dino) {
		if (ddirp && !sdirp)
			return -EISDIR;
		if (!ddirp && sdirp)
			return -ENOTDIR;
		if (ddirp) {
			ret = dindex_is_empty(r->di, dino);
			if (ret < 0)
				return ret;
			if (ret == 0)
				return -ENOTEMPTY;
		}
		ret = dindex_replace(r->di, ddir, dname, dl, sino, sft);
	} else {
		if (sdirp && sdir != ddir && pin.i_links_count >= LINK_MAX_EXT3)
			return -EMLINK;
		ret = dindex_add(r->di, ddir, dname, dl, sino, sft);
	}
	if (ret)
		return ret;
	ret = dindex_remove(r->di, sdir, sname, sl);
	if (ret)
		return ret;
	if (sdirp && sdir != ddir) {
		ret = set_dotdot(r, sino, ddir);
		if (ret)
			return ret;
	}
	/* link counts: a moved directory leaves sdir for ddir; a replaced
	 * directory's ".." no longer points at ddir */
	int sdelta = (sdirp && sdir != ddir) ? -1 : 0;
	int ddelta = ((sdirp && sdir != ddir) ? 1 : 0) - (ddirp ? 1 : 0);
	if (sdir == ddir)
		touch_dir(r, sdir, ddirp ? -1 : 0);
	else {
		touch_dir(r, sdir, sdelta);
		touch_dir(r, ddir, ddelta);
	}
	sin.i_ctime = now;
	ret = put_inode(r, sino, &sin);
	if (!ret && dino)
		ret = drop_link(r, dino, &din);
	return ret;
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	struct rfs *r = R(req);
	int ret;

	lock(r);
	ret = wr_begin(r);
	if (!ret)
		ret = wr_end(r, do_rename(r, to_ext(parent), name, to_ext(newparent), newname, flags),
			     false);
	unlock(r);
	fuse_reply_err(req, -ret);
}

static void op_link(fuse_req_t req, fuse_ino_t fino, fuse_ino_t newparent, const char *newname)
{
	struct rfs *r = R(req);
	ext2_ino_t ino = to_ext(fino), dir = to_ext(newparent);
	struct fuse_entry_param e;
	struct ext2_inode in;
	int ret;

	lock(r);
	ret = wr_begin(r);
	if (ret)
		goto out;
	ret = check_new_name(r, dir, newname);
	if (!ret)
		ret = get_inode(r, ino, &in);
	if (!ret && LINUX_S_ISDIR(in.i_mode))
		ret = -EPERM;
	if (!ret && in.i_links_count >= LINK_MAX_EXT3)
		ret = -EMLINK;
	if (!ret && in.i_links_count == 0)
		ret = -ENOENT;
	if (!ret)
		ret = dindex_add(r->di, dir, newname, strlen(newname), ino, ftype_of(r, in.i_mode));
	if (!ret) {
		in.i_links_count++;
		in.i_ctime = time(NULL);
		ret = put_inode(r, ino, &in);
		touch_dir(r, dir, 0);
	}
	if (!ret)
		fill_entry(r, ino, &in, &e);
	ret = wr_end(r, ret, false);
out:
	unlock(r);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_entry(req, &e);
}

static void op_open(fuse_req_t req, fuse_ino_t fino, struct fuse_file_info *fi)
{
	struct rfs *r = R(req);
	ext2_ino_t ino = to_ext(fino);
	struct ext2_inode in;
	int ret;

	lock(r);
	ret = get_inode(r, ino, &in);
	if (!ret && (fi->flags & O_ACCMODE) != O_RDONLY && r->ro)
		ret = -EROFS;
	if (!ret)
		open_get(r, ino);
	unlock(r);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t fino, size_t size, off_t off,
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
	for (unsigned i = 0; i < n && !ret; i++)
		ret = map_block(r, ino, &in, first + i, &phys[i]);
	if (!ret)
		ret = blocks_io(r, false, phys, n, buf);
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

static int do_write(struct rfs *r, fuse_req_t req, ext2_ino_t ino, const char *data,
		    size_t size, off_t off)
{
	size_t bs = r->fs->blocksize;
	struct ext2_inode in;
	char *buf = NULL;
	blk64_t *phys = NULL;
	int ret;

	if (off < 0)
		return -EINVAL;
	if ((uint64_t)off + size > r->max_bytes)
		return -EFBIG;
	ret = get_inode(r, ino, &in);
	if (ret)
		return ret;
	if (LINUX_S_ISDIR(in.i_mode))
		return -EISDIR;
	if (size == 0)
		return 0;
	blk64_t first = off / bs, last = (off + size - 1) / bs;
	unsigned n = last - first + 1;
	buf = malloc(n * bs);
	phys = calloc(n, sizeof(*phys));
	if (!buf || !phys) {
		ret = -ENOMEM;
		goto out;
	}
	unsigned holes = 0;
	for (unsigned i = 0; i < n && !ret; i++) {
		ret = map_block(r, ino, &in, first + i, &phys[i]);
		holes += !phys[i];
	}
	if (ret)
		goto out;
	if (holes && (ret = space_check(r, req, holes)) != 0)
		goto out;
	/* partial first and last blocks: read what is there (holes read as zeros) */
	if (off % bs)
		ret = blocks_io(r, false, &phys[0], 1, buf);
	if (!ret && (off + size) % bs && (n > 1 || off % bs == 0))
		ret = blocks_io(r, false, &phys[n - 1], 1, buf + (n - 1) * bs);
	if (ret)
		goto out;
	memcpy(buf + off % bs, data, size);
	blk64_t goal = 0;
	for (unsigned i = 0; i < n; i++) {
		if (phys[i]) {
			goal = phys[i] + 1;
			continue;
		}
		ret = alloc_block(r, ino, &in, first + i, goal, &phys[i]);
		if (ret) {
			phys[i] = 0;
			break;
		}
		goal = phys[i] + 1;
	}
	if (ret) {
		/* nothing written: give back what lies past the end of the file */
		trim_past_eof(r, ino, &in);
		n = 0;
		int pret = put_inode(r, ino, &in);
		(void)pret;
	}
	int ioret = n ? blocks_io(r, true, phys, n, buf) : 0;
	if (ioret && !ret)
		ret = ioret;
	if (n) {
		uint64_t end = (uint64_t)off + size;
		if (end > EXT2_I_SIZE(&in) && !ret)
			ext2fs_inode_size_set(r->fs, &in, end);
		in.i_mtime = in.i_ctime = time(NULL);
		if ((in.i_mode & (LINUX_S_ISUID | LINUX_S_ISGID)) && fuse_req_ctx(req)->uid != 0)
			in.i_mode &= ~(LINUX_S_ISUID | LINUX_S_ISGID);
		int pret = put_inode(r, ino, &in);
		if (!ret)
			ret = pret;
	}
out:
	free(buf);
	free(phys);
	return ret;
}

static void op_write(fuse_req_t req, fuse_ino_t fino, const char *data, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct rfs *r = R(req);
	int ret;

	(void)fi;
	lock(r);
	ret = wr_begin(r);
	if (!ret)
		ret = wr_end(r, do_write(r, req, to_ext(fino), data, size, off), false);
	unlock(r);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_write(req, size);
}

/* Nothing to do at close (data reaches us by WRITE, durability by FSYNC):
 * ENOSYS tells the kernel to stop sending FLUSH, one round trip less per
 * close (with the writeback cache it still writes the dirty pages back
 * before close returns). */
static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, ENOSYS);
}

static void op_release(fuse_req_t req, fuse_ino_t fino, struct fuse_file_info *fi)
{
	struct rfs *r = R(req);
	ext2_ino_t ino = to_ext(fino);
	int ret = 0;

	(void)fi;
	lock(r);
	struct open_ino **p = open_slot(r, ino);
	if (*p && --(*p)->count == 0) {
		struct open_ino *o = *p;
		*p = o->next;
		if (o->orphan && !r->ro) {
			struct ext2_inode in;
			ret = get_inode(r, ino, &in);
			if (!ret && in.i_links_count == 0) {
				ret = orphan_remove(r, ino, &in);
				if (!ret)
					ret = rfs_free_inode(r, ino, &in);
			}
			ret = wr_end(r, ret, false);
		}
		free(o);
	}
	unlock(r);
	fuse_reply_err(req, -ret);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct rfs *r = R(req);
	int ret = 0;

	(void)ino;
	(void)datasync;
	(void)fi;
	lock(r);
	if (!r->ro) {
		errcode_t e = rio_flush_device(r->fs->io);
		ret = wr_end(r, e ? -errmap(e) : 0, true);
	}
	unlock(r);
	fuse_reply_err(req, -ret);
}

static void op_opendir(fuse_req_t req, fuse_ino_t fino, struct fuse_file_info *fi)
{
	struct rfs *r = R(req);
	struct ext2_inode in;
	int ret;

	lock(r);
	ret = get_inode(r, to_ext(fino), &in);
	if (!ret && !LINUX_S_ISDIR(in.i_mode))
		ret = -ENOTDIR;
	unlock(r);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	fi->cache_readdir = 0;
	fuse_reply_open(req, fi);
}

struct rd_ctx {
	struct rfs *r;
	fuse_req_t req;
	char *buf;
	size_t size, pos;
	bool plus;
	int err;
};

static int rd_fill(void *vctx, const char *name, size_t len, ext2_ino_t ino, int ftype,
		   uint64_t next_off)
{
	struct rd_ctx *c = vctx;
	char nm[EXT2_NAME_LEN + 1];
	size_t ent;

	(void)ftype;
	memcpy(nm, name, len);
	nm[len] = 0;
	if (c->plus) {
		struct fuse_entry_param e;
		struct ext2_inode in;
		bool dot = !strcmp(nm, ".") || !strcmp(nm, "..");
		if (get_inode(c->r, ino, &in)) {
			if (!dot)
				return 0;   /* skip an entry we cannot read */
			memset(&in, 0, sizeof(in));
			in.i_mode = LINUX_S_IFDIR;
		}
		fill_entry(c->r, ino, &in, &e);
		if (dot) {
			/* the kernel takes no reference for these */
			e.ino = 0;
			e.attr.st_ino = ino;
		}
		ent = fuse_add_direntry_plus(c->req, c->buf + c->pos, c->size - c->pos, nm, &e,
					     next_off);
	} else {
		struct stat st = { .st_ino = ino };
		struct ext2_inode in;
		if (ftype && ftype < 8) {
			static const mode_t ft[] = { 0, S_IFREG, S_IFDIR, S_IFCHR, S_IFBLK, S_IFIFO,
						     S_IFSOCK, S_IFLNK };
			st.st_mode = ft[ftype];
		} else if (!get_inode(c->r, ino, &in)) {
			st.st_mode = in.i_mode & S_IFMT;
		}
		ent = fuse_add_direntry(c->req, c->buf + c->pos, c->size - c->pos, nm, &st, next_off);
	}
	if (ent > c->size - c->pos)
		return 1;
	c->pos += ent;
	return 0;
}

static void do_readdir(fuse_req_t req, fuse_ino_t fino, size_t size, off_t off, bool plus)
{
	struct rfs *r = R(req);
	struct rd_ctx c = { .r = r, .req = req, .size = size, .plus = plus };
	int ret;

	c.buf = malloc(size);
	if (!c.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	lock(r);
	ret = dindex_readdir(r->di, to_ext(fino), off, rd_fill, &c);
	unlock(r);
	if (ret && c.pos == 0)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_buf(req, c.buf, c.pos);
	free(c.buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	op_fsync(req, ino, datasync, fi);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct rfs *r = R(req);
	struct statvfs st;

	(void)ino;
	memset(&st, 0, sizeof(st));
	lock(r);
	struct ext2_super_block *sb = r->fs->super;
	blk64_t fr = ext2fs_free_blocks_count(sb), res = ext2fs_r_blocks_count(sb);
	st.f_bsize = st.f_frsize = r->fs->blocksize;
	st.f_blocks = ext2fs_blocks_count(sb);
	st.f_bfree = fr;
	st.f_bavail = fr > res ? fr - res : 0;
	st.f_files = sb->s_inodes_count;
	st.f_ffree = st.f_favail = sb->s_free_inodes_count;
	st.f_namemax = EXT2_NAME_LEN;
	st.f_fsid = *(uint32_t *)sb->s_uuid;
	unlock(r);
	fuse_reply_statfs(req, &st);
}

/* ---- xattrs ---- */

static bool xattr_name_ok(const char *name)
{
	return !strncmp(name, "user.", 5) || !strncmp(name, "trusted.", 8) ||
	       !strncmp(name, "security.", 9) || !strcmp(name, "system.posix_acl_access") ||
	       !strcmp(name, "system.posix_acl_default");
}

static int xattr_open(struct rfs *r, ext2_ino_t ino, struct ext2_xattr_handle **h)
{
	struct ext2_inode in;
	int ret = get_inode(r, ino, &in);
	if (ret)
		return ret;
	errcode_t e = ext2fs_xattrs_open(r->fs, ino, h);
	if (e)
		return -errmap(e);
	e = ext2fs_xattrs_read(*h);
	if (e) {
		ext2fs_xattrs_close(h);
		return e == EXT2_ET_MISSING_EA_FEATURE ? -EOPNOTSUPP : corrupt(ino, "bad xattrs");
	}
	return 0;
}

static void op_setxattr(fuse_req_t req, fuse_ino_t fino, const char *name, const char *value,
			size_t size, int flags)
{
	struct rfs *r = R(req);
	ext2_ino_t ino = to_ext(fino);
	struct ext2_xattr_handle *h = NULL;
	void *old = NULL;
	size_t oldlen;
	int ret;

	if (!xattr_name_ok(name)) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	if (strlen(name) > 255 || size > 65536) {
		fuse_reply_err(req, strlen(name) > 255 ? ERANGE : E2BIG);
		return;
	}
	lock(r);
	ret = wr_begin(r);
	if (ret)
		goto out;
	ret = xattr_open(r, ino, &h);
	if (ret)
		goto end;
	errcode_t e = ext2fs_xattr_get(h, name, &old, &oldlen);
	if (!e)
		ext2fs_free_mem(&old);
	if ((flags & XATTR_CREATE) && !e)
		ret = -EEXIST;
	else if ((flags & XATTR_REPLACE) && e == EXT2_ET_EA_KEY_NOT_FOUND)
		ret = -ENODATA;
	else {
		e = ext2fs_xattr_set(h, name, value, size);
		ret = e ? -errmap(e) : 0;
	}
	e = ext2fs_xattrs_close(&h);
	if (e && !ret)
		ret = -errmap(e);
	if (!ret) {
		struct ext2_inode in;
		if (!get_inode(r, ino, &in)) {
			in.i_ctime = time(NULL);
			ret = put_inode(r, ino, &in);
		}
	}
end:
	ret = wr_end(r, ret, false);
out:
	unlock(r);
	fuse_reply_err(req, -ret);
}

/* True when the inode provably has no extended attributes: no EA block and
 * no in-inode EA header.  The kernel asks getxattr("security.capability")
 * before every write(2) (FUSE never marks inodes S_NOSEC), so this answer
 * must not parse xattrs. */
static bool has_no_xattrs(struct rfs *r, ext2_ino_t ino)
{
	union {
		struct ext2_inode_large large;
		char raw[1024];
	} u;
	unsigned isize = EXT2_INODE_SIZE(r->fs->super);

	if (!ext2fs_has_feature_xattr(r->fs->super) || isize > sizeof(u) ||
	    ino < 1 || ino > r->fs->super->s_inodes_count ||
	    ext2fs_read_inode_full(r->fs, ino, (struct ext2_inode *)&u.large, isize))
		return false;
	if (ext2fs_file_acl_block(r->fs, (struct ext2_inode *)&u.large))
		return false;
	if (isize <= EXT2_GOOD_OLD_INODE_SIZE)
		return true;
	unsigned hdr = EXT2_GOOD_OLD_INODE_SIZE + u.large.i_extra_isize;
	if (hdr + sizeof(uint32_t) > isize)
		return true;
	uint32_t magic;
	memcpy(&magic, u.raw + hdr, sizeof(magic));
	return ext2fs_le32_to_cpu(magic) != EXT2_EXT_ATTR_MAGIC;
}

static void op_getxattr(fuse_req_t req, fuse_ino_t fino, const char *name, size_t size)
{
	struct rfs *r = R(req);
	struct ext2_xattr_handle *h = NULL;
	void *val = NULL;
	size_t len = 0;
	int ret;

	lock(r);
	if (has_no_xattrs(r, to_ext(fino))) {
		unlock(r);
		fuse_reply_err(req, ENODATA);
		return;
	}
	ret = xattr_open(r, to_ext(fino), &h);
	if (!ret) {
		errcode_t e = ext2fs_xattr_get(h, name, &val, &len);
		ret = e ? -errmap(e) : 0;
		ext2fs_xattrs_close(&h);
	}
	unlock(r);
	if (ret)
		fuse_reply_err(req, -ret);
	else if (size == 0)
		fuse_reply_xattr(req, len);
	else if (len > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, val, len);
	if (val)
		ext2fs_free_mem(&val);
}

struct xlist {
	char *buf;
	size_t len, cap;
	int err;
};

static int xlist_add(char *name, char *value, size_t value_len, void *data)
{
	struct xlist *x = data;
	size_t n = strlen(name) + 1;

	(void)value;
	(void)value_len;
	if (x->len + n > x->cap) {
		size_t cap = (x->cap + n) * 2;
		char *p = realloc(x->buf, cap);
		if (!p) {
			x->err = -ENOMEM;
			return XATTR_ABORT;
		}
		x->buf = p;
		x->cap = cap;
	}
	memcpy(x->buf + x->len, name, n);
	x->len += n;
	return 0;
}

static void op_listxattr(fuse_req_t req, fuse_ino_t fino, size_t size)
{
	struct rfs *r = R(req);
	struct ext2_xattr_handle *h = NULL;
	struct xlist x = { 0 };
	int ret;

	lock(r);
	ret = xattr_open(r, to_ext(fino), &h);
	if (!ret) {
		errcode_t e = ext2fs_xattrs_iterate(h, xlist_add, &x);
		ret = x.err ? x.err : e ? -errmap(e) : 0;
		ext2fs_xattrs_close(&h);
	}
	unlock(r);
	if (ret == -EOPNOTSUPP) {
		ret = 0;
		x.len = 0;
	}
	if (ret)
		fuse_reply_err(req, -ret);
	else if (size == 0)
		fuse_reply_xattr(req, x.len);
	else if (x.len > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, x.buf, x.len);
	free(x.buf);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t fino, const char *name)
{
	struct rfs *r = R(req);
	ext2_ino_t ino = to_ext(fino);
	struct ext2_xattr_handle *h = NULL;
	int ret;

	lock(r);
	ret = wr_begin(r);
	if (ret)
		goto out;
	ret = xattr_open(r, ino, &h);
	if (!ret) {
		void *val = NULL;
		size_t len;
		errcode_t e = ext2fs_xattr_get(h, name, &val, &len);
		if (!e) {
			ext2fs_free_mem(&val);
			e = ext2fs_xattr_remove(h, name);
		}
		ret = e ? -errmap(e) : 0;
		e = ext2fs_xattrs_close(&h);
		if (e && !ret)
			ret = -errmap(e);
	}
	if (!ret) {
		struct ext2_inode in;
		if (!get_inode(r, ino, &in)) {
			in.i_ctime = time(NULL);
			ret = put_inode(r, ino, &in);
		}
	}
	ret = wr_end(r, ret, false);
out:
	unlock(r);
	fuse_reply_err(req, -ret);
}

static int do_fallocate(struct rfs *r, fuse_req_t req, ext2_ino_t ino, off_t off, off_t len)
{
	size_t bs = r->fs->blocksize;
	struct ext2_inode in;
	int ret;

	if (off < 0 || len <= 0)
		return -EINVAL;
	if ((uint64_t)off + len > r->max_bytes)
		return -EFBIG;
	ret = get_inode(r, ino, &in);
	if (ret)
		return ret;
	if (!LINUX_S_ISREG(in.i_mode))
		return LINUX_S_ISDIR(in.i_mode) ? -EISDIR : -ENODEV;
	blk64_t first = off / bs, last = (off + len - 1) / bs, goal = 0;
	char *zero = calloc(1, bs);
	if (!zero)
		return -ENOMEM;
	blk64_t holes = 0;
	for (blk64_t l = first; l <= last && !ret; l++) {
		blk64_t p;
		ret = map_block(r, ino, &in, l, &p);
		holes += !p;
	}
	if (!ret)
		ret = space_check(r, req, holes);
	for (blk64_t l = first; l <= last && !ret; l++) {
		blk64_t p;
		ret = map_block(r, ino, &in, l, &p);
		if (ret)
			break;
		if (p) {
			goal = p + 1;
			continue;
		}
		ret = alloc_block(r, ino, &in, l, goal, &p);
		if (!ret)
			ret = blocks_io(r, true, &p, 1, zero);
		goal = p + 1;
	}
	free(zero);
	if (ret)
		trim_past_eof(r, ino, &in);
	if (!ret && (uint64_t)off + len > EXT2_I_SIZE(&in))
		ext2fs_inode_size_set(r->fs, &in, off + len);
	in.i_ctime = in.i_mtime = time(NULL);
	int pret = put_inode(r, ino, &in);
	return ret ? ret : pret;
}

static void op_fallocate(fuse_req_t req, fuse_ino_t fino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	struct rfs *r = R(req);
	int ret;

	(void)fi;
	if (mode) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	lock(r);
	ret = wr_begin(r);
	if (!ret)
		ret = wr_end(r, do_fallocate(r, req, to_ext(fino), off, len), false);
	unlock(r);
	fuse_reply_err(req, -ret);
}

const struct fuse_lowlevel_ops rfs_ops = {
	.init = op_init,
	.destroy = op_destroy,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.open = op_open,
	.create = op_create,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.release = op_release,
	.fsync = op_fsync,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.fsyncdir = op_fsyncdir,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.fallocate = op_fallocate,
};
