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
#include <signal.h>
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

/* ---- nanosecond timestamps ----
 * On inodes larger than 128 bytes the kernel keeps i_{a,m,c,cr}time_extra:
 * two epoch bits (seconds past 2038) and the nanoseconds shifted left by 2.
 * The operation marks the times it sets (stamp_now, stamp_set) with their
 * extra words, encoded from the full 64-bit seconds (the 32-bit inode field
 * has lost the epoch); put_inode writes them with the rest of the inode. */
enum { T_A = 1, T_M = 2, T_C = 4, T_CR = 8 };

static uint32_t encode_extra(time_t sec, long nsec)
{
	uint32_t epoch = (uint32_t)(((int64_t)sec - (int64_t)(int32_t)sec) >> 32) & 3;
	return epoch | ((uint32_t)nsec << 2);
}

static void decode_extra(uint32_t extra, time_t *sec, long *nsec)
{
	/* the 32-bit seconds are signed once the epoch bits extend them */
	*sec = (time_t)(int32_t)(uint32_t)*sec + (time_t)((int64_t)(extra & 3) << 32);
	*nsec = extra >> 2;
	if (*nsec > 999999999)
		*nsec = 0;
}

static void stamp_set(struct rfs *r, ext2_ino_t ino, unsigned mask, time_t sec, long nsec)
{
	struct time_stamp *s = NULL;
	for (unsigned i = 0; i < r->nstamp; i++)
		if (r->stamp[i].ino == ino)
			s = &r->stamp[i];
	if (!s) {
		if (r->nstamp == sizeof(r->stamp) / sizeof(r->stamp[0]))
			return;   /* whole seconds only for this one */
		s = &r->stamp[r->nstamp++];
		s->ino = ino;
		s->mask = 0;
	}
	s->mask |= mask;
	for (unsigned f = 0; f < 4; f++)
		if (mask & (1u << f))
			s->extra[f] = encode_extra(sec, nsec);   /* the whole extra word */
}

/* The operation's time, for the fields in mask of ino. */
static time_t stamp_now(struct rfs *r, ext2_ino_t ino, unsigned mask)
{
	stamp_set(r, ino, mask, r->now.tv_sec, r->now.tv_nsec);
	return r->now.tv_sec;
}

static bool large_inodes(struct rfs *r)
{
	return EXT2_INODE_SIZE(r->fs->super) > EXT2_GOOD_OLD_INODE_SIZE;
}

static int put_inode(struct rfs *r, ext2_ino_t ino, struct ext2_inode *inode)
{
	struct time_stamp *s = NULL;
	for (unsigned i = 0; i < r->nstamp; i++)
		if (r->stamp[i].ino == ino)
			s = &r->stamp[i];
	if (s && large_inodes(r)) {
		struct ext2_inode_large big;
		errcode_t e = ext2fs_read_inode_full(r->fs, ino, (struct ext2_inode *)&big,
						     sizeof(big));
		if (!e) {
			memcpy(&big, inode, sizeof(*inode));
			unsigned have = big.i_extra_isize;
			if ((s->mask & T_C) && have >= 8)
				big.i_ctime_extra = s->extra[2];
			if ((s->mask & T_M) && have >= 12)
				big.i_mtime_extra = s->extra[1];
			if ((s->mask & T_A) && have >= 16)
				big.i_atime_extra = s->extra[0];
			if ((s->mask & T_CR) && have >= 24) {
				big.i_crtime = (uint32_t)r->now.tv_sec;
				big.i_crtime_extra = s->extra[3];
			}
			e = ext2fs_write_inode_full(r->fs, ino, (struct ext2_inode *)&big,
						    sizeof(big));
		}
		return e ? -errmap(e) : 0;
	}
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
	/* signed 32-bit seconds, as the kernel reads them (times before 1970) */
	st->st_atime = (int32_t)in->i_atime;
	st->st_mtime = (int32_t)in->i_mtime;
	st->st_ctime = (int32_t)in->i_ctime;
	if (large_inodes(r)) {
		struct ext2_inode_large big;
		if (!ext2fs_read_inode_full(r->fs, ino, (struct ext2_inode *)&big, sizeof(big))) {
			if (big.i_extra_isize >= 8)
				decode_extra(big.i_ctime_extra, &st->st_ctim.tv_sec, &st->st_ctim.tv_nsec);
			if (big.i_extra_isize >= 12)
				decode_extra(big.i_mtime_extra, &st->st_mtim.tv_sec, &st->st_mtim.tv_nsec);
			if (big.i_extra_isize >= 16)
				decode_extra(big.i_atime_extra, &st->st_atim.tv_sec, &st->st_atim.tv_nsec);
		}
	}
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
	if (r->known && ino <= r->fs->super->s_inodes_count)
		r->known[ino >> 3] |= (uint8_t)(1u << (ino & 7));
	e->ino = to_fuse(ino);
	e->generation = in->i_generation;
	fill_stat(r, ino, in, &e->attr);
	e->attr_timeout = TIMEOUT;
	e->entry_timeout = TIMEOUT;
}

/* ---- rollback of a failed operation ---- */

static void note_alloc(struct rfs *r, uint64_t num, int inuse, bool inode, bool isdir)
{
	if (!r->sp_active || r->undo_lost)
		return;
	if (r->nundo == r->capundo) {
		size_t cap = r->capundo ? r->capundo * 2 : 64;
		struct alloc_rec *n = realloc(r->undo, cap * sizeof(*n));
		if (!n) {
			r->undo_lost = true;
			return;
		}
		r->undo = n;
		r->capundo = cap;
	}
	r->undo[r->nundo++] = (struct alloc_rec){ .num = num, .inuse = inuse, .inode = inode,
						  .isdir = isdir };
}

static void block_stats_hook(ext2_filsys fs, blk64_t blk, int inuse)
{
	struct rfs *r = fs->priv_data;
	if (r->old_stats)
		r->old_stats(fs, blk, inuse);
	note_alloc(r, blk, inuse, false, false);
}

static void block_stats_range_hook(ext2_filsys fs, blk64_t blk, blk_t num, int inuse)
{
	struct rfs *r = fs->priv_data;
	if (r->old_stats_range)
		r->old_stats_range(fs, blk, num, inuse);
	for (blk_t i = 0; i < num; i++)
		note_alloc(r, blk + i, inuse, false, false);
}

static void inode_stats(struct rfs *r, ext2_ino_t ino, int inuse, bool isdir)
{
	ext2fs_inode_alloc_stats2(r->fs, ino, inuse, isdir);
	note_alloc(r, ino, inuse, true, isdir);
}

int rfs_txn_hooks(struct rfs *r)
{
	r->fs->priv_data = r;
	ext2fs_set_block_alloc_stats_callback(r->fs, block_stats_hook, &r->old_stats);
	ext2fs_set_block_alloc_stats_range_callback(r->fs, block_stats_range_hook,
						    &r->old_stats_range);
	r->known = calloc(r->fs->super->s_inodes_count / 8 + 1, 1);
	return r->known ? 0 : -ENOMEM;
}

/* Start of a mutating operation (and again after a commit inside one). */
static void op_savepoint(struct rfs *r)
{
	r->sp_active = false;
	if (!r->attached || rio_txn_savepoint(r->fs->io))
		return;
	r->sb_saved = *r->fs->super;
	r->nundo = 0;
	r->undo_lost = false;
	dindex_mark(r->di);
	r->sp_active = true;
}

/*
 * The operation failed: io drops its metadata writes since the savepoint;
 * here libext2fs's in-memory copies follow (allocation changes undone in
 * reverse, which restores bitmaps and group counters; the superblock as it
 * was; the inode cache and the changed directories' indexes forgotten).
 * 0, or -EROFS when it could not be restored exactly.
 */
static int op_rollback(struct rfs *r)
{
	ext2_filsys fs = r->fs;
	void (*cur)(ext2_filsys, blk64_t, int) = NULL;
	void (*cur_range)(ext2_filsys, blk64_t, blk_t, int) = NULL;

	if (!r->sp_active)
		return 0;
	r->sp_active = false;
	if (rio_txn_failed(fs->io))
		return -EROFS;
	errcode_t e = rio_txn_rollback(fs->io);
	/* the undo is not an allocation io must track: no callbacks */
	ext2fs_set_block_alloc_stats_callback(fs, NULL, &cur);
	ext2fs_set_block_alloc_stats_range_callback(fs, NULL, &cur_range);
	for (size_t i = r->nundo; i-- > 0;) {
		struct alloc_rec *a = &r->undo[i];
		if (a->inode)
			ext2fs_inode_alloc_stats2(fs, (ext2_ino_t)a->num, -a->inuse, a->isdir);
		else
			ext2fs_block_alloc_stats2(fs, a->num, -a->inuse);
	}
	ext2fs_set_block_alloc_stats_callback(fs, cur, NULL);
	ext2fs_set_block_alloc_stats_range_callback(fs, cur_range, NULL);
	*fs->super = r->sb_saved;
	ext2fs_mark_super_dirty(fs);
	(void)ext2fs_flush_icache(fs);
	dindex_forget_changed(r->di);
	r->nundo = 0;
	if (e || r->undo_lost) {
		fprintf(stderr, "recon-fuse: cannot roll back a failed operation (%s); the file "
			"system is now read-only\n", e ? error_message(e) : "out of memory");
		return -EROFS;
	}
	return 0;
}

/* ---- after a rejected commit ---- */

struct inval_list {
	struct fuse_session *se;
	fuse_ino_t *inos;
	size_t ninos;
	fuse_ino_t *parents;
	char **names;
	size_t nnames, capnames;
};

/* The kernel must not keep what the discarded transactions made: notified
 * from a thread of its own, as a notification sent from inside a request on
 * the same inode would deadlock. */
static void *notifier_main(void *arg)
{
	struct inval_list *l = arg;

	for (size_t i = 0; i < l->nnames; i++) {
		(void)fuse_lowlevel_notify_inval_entry(l->se, l->parents[i], l->names[i],
						       strlen(l->names[i]));
		free(l->names[i]);
	}
	for (size_t i = 0; i < l->ninos; i++)
		(void)fuse_lowlevel_notify_inval_inode(l->se, l->inos[i], 0, 0);
	free(l->names);
	free(l->parents);
	free(l->inos);
	free(l);
	return NULL;
}

struct name_ctx {
	struct inval_list *l;
	fuse_ino_t parent;
};

static int add_name(struct inval_list *l, fuse_ino_t parent, const char *name, size_t len)
{
	if (l->nnames == l->capnames) {
		size_t cap = l->capnames ? l->capnames * 2 : 256;
		if (cap > (1u << 20))
			return 1;   /* bounded: past that, the entry timeouts expire them */
		char **nn = realloc(l->names, cap * sizeof(*nn));
		if (nn)
			l->names = nn;
		fuse_ino_t *np = nn ? realloc(l->parents, cap * sizeof(*np)) : NULL;
		if (np)
			l->parents = np;
		if (!nn || !np)
			return 1;
		l->capnames = cap;
	}
	char *n = strndup(name, len);
	if (!n)
		return 1;
	l->parents[l->nnames] = parent;
	l->names[l->nnames++] = n;
	return 0;
}

/* Names on disk in a directory the kernel knows: its negative dentries for
 * names the discarded transactions removed. */
static int collect_name(void *vctx, const char *name, size_t len, ext2_ino_t ino, int ftype,
			uint64_t next_off)
{
	struct name_ctx *c = vctx;

	(void)ino;
	(void)ftype;
	(void)next_off;
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return 0;
	return add_name(c->l, c->parent, name, len);
}

/* Names the discarded transactions may have added. */
static void collect_added(void *vctx, ext2_ino_t dir, const char *name)
{
	(void)add_name(vctx, to_fuse(dir), name, strlen(name));
}

/* The superblock as the disk has it (libext2fs's copy held discarded counts). */
static void reread_super(struct rfs *r)
{
	ext2_filsys fs = r->fs;
	size_t bs = fs->blocksize;
	char *buf = malloc(bs);

	if (!buf)
		return;
	if (!io_channel_read_blk64(fs->io, SUPERBLOCK_OFFSET / bs, 1, buf))
		memcpy(fs->super, buf + SUPERBLOCK_OFFSET % bs, SUPERBLOCK_SIZE);
	free(buf);
}

static void invalidate_kernel(struct rfs *r)
{
	struct inval_list *l = calloc(1, sizeof(*l));
	ext2_ino_t count = r->fs->super->s_inodes_count;
	size_t ndirs = 0;
	ext2_ino_t *dirs = NULL;

	if (!l || !r->known)
		goto fail;
	l->se = r->se;
	for (ext2_ino_t i = 1; i <= count; i++)
		l->ninos += (r->known[i >> 3] >> (i & 7)) & 1;
	l->inos = malloc((l->ninos + 1) * sizeof(*l->inos));
	dirs = malloc(4096 * sizeof(*dirs));
	if (!l->inos || !dirs)
		goto fail;
	l->ninos = 0;
	l->inos[l->ninos++] = FUSE_ROOT_ID;
	for (ext2_ino_t i = 1; i <= count; i++)
		if (((r->known[i >> 3] >> (i & 7)) & 1) && i != EXT2_ROOT_INO)
			l->inos[l->ninos++] = i;
	/* dentries: names added since the last durable commit (now gone),
	 * and the names the disk has in the directories we have indexed */
	if (!dindex_added_names(r->di, collect_added, l))
		fprintf(stderr, "recon-fuse: too many new names to invalidate one by one; the "
			"kernel's entries expire within %.0f s\n", TIMEOUT);
	dindex_clear_added(r->di);
	ndirs = dindex_cached_dirs(r->di, dirs, 4096);
	for (size_t i = 0; i < ndirs; i++) {
		ext2_ino_t d = dirs[i];
		if (d != EXT2_ROOT_INO && !((r->known[d >> 3] >> (d & 7)) & 1))
			continue;
		struct name_ctx c = { .l = l, .parent = to_fuse(d) };
		(void)dindex_readdir(r->di, d, 0, collect_name, &c);
	}
	free(dirs);
	sigset_t all, old;	/* signals are the FUSE loop's to take */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int started = pthread_create(&r->notifier, NULL, notifier_main, l) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (started) {
		r->notifier_running = true;
		return;
	}
	dirs = NULL;
fail:
	fprintf(stderr, "recon-fuse: cannot invalidate the kernel's caches (out of memory); "
		"they expire within %.0f s\n", TIMEOUT);
	free(dirs);
	if (l) {
		for (size_t i = 0; i < l->nnames; i++)
			free(l->names[i]);
		free(l->names);
		free(l->parents);
		free(l->inos);
		free(l);
	}
}

void rfs_join_notifier(struct rfs *r)
{
	if (r->notifier_running) {
		pthread_join(r->notifier, NULL);
		r->notifier_running = false;
	}
}

/* A commit was rejected (or the device failed, or a rollback could not be
 * exact): read-only from now on, and nothing of the discarded state stays
 * visible, in our caches or the kernel's.  Once. */
static void went_readonly(struct rfs *r)
{
	r->ro = true;
	if (r->invalidated)
		return;
	r->invalidated = true;
	const char *v = rio_txn_last_violation(r->fs->io);
	fprintf(stderr, "recon-fuse: a commit was rejected or failed; the file system is now "
		"read-only%s%s\n", v ? ":\n" : "", v ? v : "");
	syslog(LOG_ERR, "recon-fuse: a commit was rejected or failed; read-only from now on");
	(void)ext2fs_flush_icache(r->fs);
	reread_super(r);
	if (r->cfg->on_violation == ONV_STOP) {
		dindex_drop_all(r->di);
		r->stopped = true;
		fprintf(stderr, "recon-fuse: on_violation=stop: unmounting\n");
		fuse_session_exit(r->se);
		/* wakes the loop out of its read of /dev/fuse */
		kill(getpid(), SIGTERM);
		return;
	}
	invalidate_kernel(r);
	dindex_drop_all(r->di);
}

/* ---- write lifecycle ---- */

static int wr_begin(struct rfs *r)
{
	if (r->ro)
		return -EROFS;
	if (rio_txn_failed(r->fs->io)) {
		went_readonly(r);
		return -EROFS;
	}
	op_savepoint(r);
	clock_gettime(CLOCK_REALTIME, &r->now);
	r->nstamp = 0;
	return 0;
}

/* End of a modifying operation: a failed one leaves nothing behind; then
 * the transaction boundary. */
static int wr_end(struct rfs *r, int ret, bool force)
{
	if (ret && r->sp_active && op_rollback(r)) {
		went_readonly(r);
		return -EROFS;
	}
	r->sp_active = false;
	r->nstamp = 0;
	errcode_t e = rio_txn_boundary(r->fs, force);

	if (!e && force)
		dindex_clear_added(r->di);   /* all durable: nothing to take back */
	if (e == EROFS) {
		went_readonly(r);
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

/* Is ino on the orphan list already (unlinked while open)? */
static bool orphan_listed(struct rfs *r, ext2_ino_t ino)
{
	struct open_ino *o = *open_slot(r, ino);
	return o && o->orphan;
}

/* A commit inside an operation (between chunks of a huge punch): what came
 * before it stays, so the rollback point moves past it. */
static errcode_t commit_midway(struct rfs *r)
{
	errcode_t e = rio_txn_boundary(r->fs, true);
	if (!e && r->sp_active)
		op_savepoint(r);
	return e;
}

/*
 * Free the blocks of ino from logical block `keep` on.  A huge file frees
 * more blocks than one transaction may hold, so the punch goes from the end
 * in chunks sized to the room left, with i_size following each chunk (the
 * file stays consistent at every commit), committing in between.  As ext3
 * does, the inode sits on the orphan list from before the first chunk
 * commits until the transaction holding the last one, so a crash in between
 * leaves it to the next mount's orphan processing.
 */
static int punch_from(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t keep)
{
	ext2_filsys fs = r->fs;
	uint64_t bs = fs->blocksize, apb = bs / 4;
	bool listed = false;   /* put on the orphan list here */
	errcode_t e;
	int ret;

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
				e = commit_midway(r);
				if (e)
					return e == EROFS ? -EROFS : -errmap(e);
				continue;
			}
		}
		if (cur <= keep || cur - keep <= chunk) {
			e = ext2fs_punch(fs, ino, in, NULL, keep, ~0ULL);
			if (e)
				return -errmap(e);
			/* off the list in the transaction of the last chunk (the
			 * caller writes the inode) */
			return listed ? orphan_remove(r, ino, in) : 0;
		}
		if (!listed && !orphan_listed(r, ino)) {
			ret = orphan_add(r, ino, in);
			if (ret)
				return ret;
			listed = true;
		}
		blk64_t start = cur - chunk;
		e = ext2fs_punch(fs, ino, in, NULL, start, ~0ULL);
		if (!e && start * bs < EXT2_I_SIZE(in))
			e = ext2fs_inode_size_set(fs, in, start * bs);
		if (!e)
			e = ext2fs_write_inode(fs, ino, in);
		if (!e)
			e = commit_midway(r);
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
	inode_stats(r, ino, -1, LINUX_S_ISDIR(in->i_mode));
	return 0;
}

/* Drop one link of a non-directory (or the last of a directory). */
static int drop_link(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in)
{
	if (LINUX_S_ISDIR(in->i_mode))
		in->i_links_count = 0;
	else if (in->i_links_count)
		in->i_links_count--;
	in->i_ctime = stamp_now(r, ino, T_C);
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
	in.i_atime = stamp_now(r, ino, T_A);
	int ret = put_inode(r, ino, &in);
	(void)wr_end(r, ret, false);
}

/* ---- operations ---- */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct rfs *r = userdata;

	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	/* Every change reaches the disk through this kernel mount (rejected
	 * commits invalidate explicitly), so the kernel need not re-check size
	 * and mtime by GETATTR on reads to notice changes made elsewhere. */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	/* FUSE_HANDLE_KILLPRIV_V2 is asked for in the INIT reply itself (see
	 * dev_writev in main.c: libfuse 3.14 cannot forward it). */
	/* No writeback cache: with it the kernel acknowledges write(2) from its
	 * page cache and keeps i_size itself, so ENOSPC and EFBIG would surface
	 * at fsync or close instead of at the write, as ext3 reports them
	 * (tests/integration/enospc.sh and ops.sh); on 1 KiB blocks it would
	 * also fill holes that share a page with data. */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	/* 128-byte inodes store whole seconds; 256-byte ones nanoseconds. */
	conn->time_gran = (r->fs && EXT2_INODE_SIZE(r->fs->super) > EXT2_GOOD_OLD_INODE_SIZE) ?
			  1 : 1000000000;
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
	/* freed (a dentry the kernel kept of discarded state, or a race with
	 * unlink): gone, not a file of mode 0 */
	if (!ret && in.i_links_count == 0 && !*open_slot(r, to_ext(ino)))
		ret = -ENOENT;
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

static bool caller_in_group(fuse_req_t req, gid_t gid)
{
	gid_t groups[64];

	if (fuse_req_ctx(req)->gid == gid)
		return true;
	int n = fuse_req_getgroups(req, 64, groups);
	for (int i = 0; i < n && i < 64; i++)
		if (groups[i] == gid)
			return true;
	return false;
}

/* The set-id bits a write, truncate or chown removes (the kernel's
 * setattr_should_drop_suidgid): set-user-id, and set-group-id when
 * group-executable or, for callers other than root, when the caller is not
 * in the file's group (its fsgid or supplementary groups). */
static uint16_t setid_bits_to_kill(fuse_req_t req, const struct ext2_inode *in)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	uint16_t mode = in->i_mode, kill = mode & LINUX_S_ISUID;
	if ((mode & LINUX_S_ISGID) &&
	    ((mode & LINUX_S_IXGRP) ||
	     (c->uid != 0 && !caller_in_group(req, inode_gid(*in)))))
		kill |= LINUX_S_ISGID;
	return kill;
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
	now = r->now.tv_sec;
	ret = get_inode(r, ino, &in);
	if (ret)
		goto end;
	/* Set-id bits (FUSE_CAP_HANDLE_KILLPRIV: the kernel leaves this to us):
	 * chown drops set-user-id and group-executable set-group-id on
	 * non-directories for anyone, truncation for callers other than root;
	 * an explicit mode in the same request wins. */
	/* chown(f, -1, -1) arrives with nothing else to set (libfuse 3.14
	 * passes on neither its ctime nor the kill flag), as does a kill
	 * request of the kernel's own: both drop the bits as chown does */
	bool chown = (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) ||
		     !(to_set & ~FUSE_SET_ATTR_CTIME);
	if (!(to_set & FUSE_SET_ATTR_MODE) && !LINUX_S_ISDIR(in.i_mode) &&
	    (chown ||
	     ((to_set & FUSE_SET_ATTR_SIZE) && fuse_req_ctx(req)->uid != 0)))
		in.i_mode &= ~setid_bits_to_kill(req, &in);
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
	if (to_set & FUSE_SET_ATTR_SIZE)
		stamp_now(r, ino, T_M);
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		stamp_now(r, ino, T_A);
	else if (to_set & FUSE_SET_ATTR_ATIME)
		stamp_set(r, ino, T_A, attr->st_atim.tv_sec, attr->st_atim.tv_nsec);
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		stamp_now(r, ino, T_M);
	else if (to_set & FUSE_SET_ATTR_MTIME)
		stamp_set(r, ino, T_M, attr->st_mtim.tv_sec, attr->st_mtim.tv_nsec);
	if (to_set & FUSE_SET_ATTR_CTIME)
		stamp_set(r, ino, T_C, attr->st_ctim.tv_sec, attr->st_ctim.tv_nsec);
	else
		stamp_now(r, ino, T_C);
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
	in->i_atime = in->i_mtime = in->i_ctime = stamp_now(r, *out, T_A | T_M | T_C | T_CR);
	in->i_links_count = 1;
	in->i_generation = (uint32_t)lrand48();
	e = ext2fs_write_new_inode(r->fs, *out, in);
	if (e)
		return -errmap(e);
	inode_stats(r, *out, +1, LINUX_S_ISDIR(mode));
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
	din.i_mtime = din.i_ctime = stamp_now(r, dir, T_M | T_C);
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

/* Write-only opens bypass the kernel's page cache (they cannot be read or
 * mmapped, so nothing is lost): each write(2) becomes one WRITE, where the
 * cached path splits writes at partially filled pages and asks
 * getxattr("security.capability") before each one (do_write drops that
 * attribute and the set-id bits itself).  Other opens keep the cache. */
static void set_open_mode(struct fuse_file_info *fi)
{
	if ((fi->flags & O_ACCMODE) == O_WRONLY)
		fi->direct_io = 1;
	else
		fi->keep_cache = 1;
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
	set_open_mode(fi);
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
		/* as the kernel's ext3: a removed directory still open reads as
		 * size 0 until its last close frees it */
		in.i_size = 0;
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
	time_t now = r->now.tv_sec;

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
		stamp_now(r, sino, T_C);
		stamp_now(r, dino, T_C);
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
	stamp_now(r, sino, T_C);
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
		in.i_ctime = stamp_now(r, ino, T_C);
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

static int open_truncate(struct rfs *r, fuse_req_t req, ext2_ino_t ino, struct ext2_inode *in)
{
	int ret = wr_begin(r);
	if (ret)
		return ret;
	ret = do_truncate(r, ino, in, 0);
	if (!ret) {
		if (fuse_req_ctx(req)->uid != 0)
			in->i_mode &= ~setid_bits_to_kill(req, in);
		in->i_mtime = in->i_ctime = stamp_now(r, ino, T_M | T_C);
		ret = put_inode(r, ino, in);
	}
	return wr_end(r, ret, false);
}

static void op_open(fuse_req_t req, fuse_ino_t fino, struct fuse_file_info *fi)
{
	struct rfs *r = R(req);
	ext2_ino_t ino = to_ext(fino);
	struct ext2_inode in;
	int ret;

	lock(r);
	ret = get_inode(r, ino, &in);
	if (!ret && ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) && r->ro)
		ret = -EROFS;
	/* libfuse negotiates FUSE_ATOMIC_O_TRUNC, so O_TRUNC reaches us here and
	 * not as a SETATTR: truncate as ext3's open does, times updated even
	 * when the file is already empty. */
	if (!ret && (fi->flags & O_TRUNC) && LINUX_S_ISREG(in.i_mode))
		ret = open_truncate(r, req, ino, &in);
	if (!ret)
		open_get(r, ino);
	unlock(r);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	set_open_mode(fi);
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

static int drop_capability(struct rfs *r, ext2_ino_t ino);

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
	/* whole blocks (dd's 1 MiB writes, cp's 128 KiB ones): written
	 * straight from the request, no bounce buffer (blocks_io only reads it) */
	bool whole = off % bs == 0 && size % bs == 0;
	char *src = whole ? (char *)data : NULL;
	if (!whole)
		src = buf = malloc(n * bs);
	phys = calloc(n, sizeof(*phys));
	if (!src || !phys) {
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
	if (!whole) {
		if (off % bs)
			ret = blocks_io(r, false, &phys[0], 1, buf);
		if (!ret && (off + size) % bs && (n > 1 || off % bs == 0))
			ret = blocks_io(r, false, &phys[n - 1], 1, buf + (n - 1) * bs);
		if (ret)
			goto out;
		memcpy(buf + off % bs, data, size);
	}
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
	int ioret = n ? blocks_io(r, true, phys, n, src) : 0;
	if (ioret && !ret)
		ret = ioret;
	if (n) {
		uint64_t end = (uint64_t)off + size;
		if (end > EXT2_I_SIZE(&in) && !ret)
			ext2fs_inode_size_set(r->fs, &in, end);
		in.i_mtime = in.i_ctime = stamp_now(r, ino, T_M | T_C);
		if (fuse_req_ctx(req)->uid != 0)
			in.i_mode &= ~setid_bits_to_kill(req, &in);
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
	/* a write that crosses the largest file size writes what fits, as the
	 * kernel's ext3 does; EFBIG only when nothing does */
	if (off >= 0 && (uint64_t)off < r->max_bytes && (uint64_t)off + size > r->max_bytes)
		size = r->max_bytes - off;
	lock(r);
	ret = wr_begin(r);
	if (!ret) {
		ret = do_write(r, req, to_ext(fino), data, size, off);
		if (!ret)
			ret = drop_capability(r, to_ext(fino));
		ret = wr_end(r, ret, false);
	}
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

/* The last close of a file or directory unlinked while open frees it (it
 * waited on the orphan list).  Called with the lock held; 0 or -errno. */
static int open_put(struct rfs *r, ext2_ino_t ino)
{
	int ret = 0;
	struct open_ino **p = open_slot(r, ino);
	if (*p && --(*p)->count == 0) {
		struct open_ino *o = *p;
		*p = o->next;
		if (o->orphan && !r->ro) {
			struct ext2_inode in;
			op_savepoint(r);
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
	return ret;
}

/* RELEASE and RELEASEDIR: the last close of an unlinked file or directory frees it */
static void op_release(fuse_req_t req, fuse_ino_t fino, struct fuse_file_info *fi)
{
	struct rfs *r = R(req);
	int ret;

	(void)fi;
	lock(r);
	ret = open_put(r, to_ext(fino));
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
	if (!ret)
		open_get(r, to_ext(fino));   /* an rmdir while open keeps the inode */
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

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	op_fsync(req, ino, datasync, fi);
}

/* Blocks of static metadata that statfs leaves out of f_blocks, as the
 * kernel's default (bsddf): what mke2fs recorded in s_overhead_clusters,
 * else the kernel's count: superblocks and descriptors (reserved ones
 * included), bitmaps, inode tables, the internal journal. */
static blk64_t fs_overhead(ext2_filsys fs)
{
	struct ext2_super_block *sb = fs->super;
	blk64_t total = ext2fs_blocks_count(sb), over = sb->s_overhead_clusters;

	if (over && over < total && !ext2fs_has_feature_bigalloc(sb))
		return over;
	over = sb->s_first_data_block;
	for (dgrp_t g = 0; g < fs->group_desc_count; g++) {
		blk_t used = 0;
		if (ext2fs_super_and_bgd_loc2(fs, g, NULL, NULL, NULL, &used))
			used = 0;
		over += used + fs->inode_blocks_per_group + 2;
	}
	if (ext2fs_has_feature_journal(sb) && sb->s_journal_inum) {
		struct ext2_inode jin;
		if (!ext2fs_read_inode(fs, sb->s_journal_inum, &jin))
			over += EXT2_I_SIZE(&jin) / fs->blocksize;
	}
	return over < total ? over : 0;
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
	st.f_blocks = ext2fs_blocks_count(sb) - fs_overhead(r->fs);
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

/* A namespace prefix with nothing after it ("user."): the kernel's ext3
 * handlers refuse it with EINVAL; the FUSE client passes it through. */
static bool xattr_name_empty(const char *name)
{
	return !strcmp(name, "user.") || !strcmp(name, "trusted.") || !strcmp(name, "security.");
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

/* libext2fs 1.47 writes an EA block with no entries when the last
 * attribute leaves it (removed, or moved into the inode); the kernel
 * releases the block.  Release it here too. */
static int drop_empty_ea_block(struct rfs *r, ext2_ino_t ino)
{
	ext2_filsys fs = r->fs;
	union {
		struct ext2_inode_large large;
		char raw[1024];
	} u;
	unsigned isize = EXT2_INODE_SIZE(fs->super);

	if (isize > sizeof(u))
		return 0;
	errcode_t e = ext2fs_read_inode_full(fs, ino, (struct ext2_inode *)&u.large, isize);
	if (e)
		return -errmap(e);
	blk64_t blk = ext2fs_file_acl_block(fs, (struct ext2_inode *)&u.large);
	if (!blk)
		return 0;
	char *buf = malloc(fs->blocksize);
	if (!buf)
		return -ENOMEM;
	e = ext2fs_read_ext_attr3(fs, blk, buf, ino);
	bool empty = !e && EXT2_EXT_IS_LAST_ENTRY(buf + sizeof(struct ext2_ext_attr_header));
	free(buf);
	if (e)
		return corrupt(ino, "unreadable EA block");
	if (!empty)
		return 0;
	e = ext2fs_free_ext_attr(fs, ino, &u.large);
	if (!e)
		e = ext2fs_write_inode_full(fs, ino, (struct ext2_inode *)&u.large, isize);
	return e ? -errmap(e) : 0;
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

	if (!xattr_name_ok(name) || xattr_name_empty(name)) {
		fuse_reply_err(req, xattr_name_empty(name) ? EINVAL : EOPNOTSUPP);
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
	if (!ret)
		ret = drop_empty_ea_block(r, ino);
	if (!ret) {
		struct ext2_inode in;
		if (!get_inode(r, ino, &in)) {
			in.i_ctime = stamp_now(r, ino, T_C);
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

/* Remove one attribute of ino (-ENODATA when it has none of that name), and
 * the EA block with it when that leaves the block empty. */
static int xattr_remove(struct rfs *r, ext2_ino_t ino, const char *name)
{
	struct ext2_xattr_handle *h = NULL;
	void *val = NULL;
	size_t len;
	int ret = xattr_open(r, ino, &h);
	if (ret)
		return ret;
	errcode_t e = ext2fs_xattr_get(h, name, &val, &len);
	if (!e) {
		ext2fs_free_mem(&val);
		e = ext2fs_xattr_remove(h, name);
	}
	ret = e ? -errmap(e) : 0;
	e = ext2fs_xattrs_close(&h);
	if (e && !ret)
		ret = -errmap(e);
	return ret ? ret : drop_empty_ea_block(r, ino);
}

/* A write removes security.capability, as the kernel's file_remove_privs
 * does (it does not run for direct-I/O opens).  Most inodes have no
 * attributes at all, which has_no_xattrs answers without parsing. */
static int drop_capability(struct rfs *r, ext2_ino_t ino)
{
	if (has_no_xattrs(r, ino))
		return 0;
	int ret = xattr_remove(r, ino, "security.capability");
	return ret == -ENODATA ? 0 : ret;
}

static void op_getxattr(fuse_req_t req, fuse_ino_t fino, const char *name, size_t size)
{
	struct rfs *r = R(req);
	struct ext2_xattr_handle *h = NULL;
	void *val = NULL;
	size_t len = 0;
	int ret;

	if (xattr_name_empty(name)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
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
	int ret;

	if (xattr_name_empty(name)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	lock(r);
	ret = wr_begin(r);
	if (ret)
		goto out;
	ret = xattr_remove(r, ino, name);
	if (!ret) {
		struct ext2_inode in;
		if (!get_inode(r, ino, &in)) {
			in.i_ctime = stamp_now(r, ino, T_C);
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
	in.i_ctime = in.i_mtime = stamp_now(r, ino, T_M | T_C);
	int pret = put_inode(r, ino, &in);
	return ret ? ret : pret;
}

/* Zero bytes [from, to) of logical block lblk if it is mapped. */
static int zero_in_block(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t lblk,
			 size_t from, size_t to)
{
	size_t bs = r->fs->blocksize;
	blk64_t pblk;
	int ret = map_block(r, ino, in, lblk, &pblk);
	if (ret || !pblk || from >= to)
		return ret;
	char *buf = malloc(bs);
	if (!buf)
		return -ENOMEM;
	ret = blocks_io(r, false, &pblk, 1, buf);
	if (!ret) {
		memset(buf + from, 0, to - from);
		ret = blocks_io(r, true, &pblk, 1, buf);
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
	uint64_t bs = fs->blocksize, apb = bs / 4;
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
		size_t used = 0, limit = 0;
		blk64_t chunk = stop - first;
		if (!r->ro && r->attached && !rio_txn_room(fs->io, &used, &limit) && limit) {
			size_t room = limit > used ? limit - used : 0;
			blk64_t groups_room = room > 16 ? room - 16 : 0;   /* as punch_from */
			blk64_t fits = groups_room / 2 * apb;
			if (fits < apb) {
				errcode_t e = ext2fs_write_inode(fs, ino, &in);
				if (!e)
					e = commit_midway(r);
				if (e)
					return e == EROFS ? -EROFS : -errmap(e);
				continue;
			}
			if (chunk > fits)
				chunk = fits;
		}
		/* one call per level of the block map: libext2fs 1.47's
		 * ext2fs_punch stops at the end of the level a range starts in
		 * (direct, indirect, ...) when the range is short */
		blk64_t level_end = EXT2_NDIR_BLOCKS, span = apb;
		for (int level = 0; level < 3 && level_end <= first; level++, span *= apb)
			level_end += span;
		if (first < level_end && first + chunk > level_end)
			chunk = level_end - first;
		errcode_t e = ext2fs_punch(fs, ino, &in, NULL, first, first + chunk - 1);
		if (e)
			return -errmap(e);
		first += chunk;
	}
	in.i_ctime = in.i_mtime = stamp_now(r, ino, T_M | T_C);
	return put_inode(r, ino, &in);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t fino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	struct rfs *r = R(req);
	int ret;

	(void)fi;
	if (mode && mode != (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	lock(r);
	ret = wr_begin(r);
	if (!ret)
		ret = wr_end(r, mode ? do_punch(r, to_ext(fino), off, len) :
				       do_fallocate(r, req, to_ext(fino), off, len), false);
	unlock(r);
	fuse_reply_err(req, -ret);
}

/* SEEK_DATA / SEEK_HOLE over the block map: the first mapped (data) or
 * unmapped (hole) logical block at or after 'from', walking only the blocks
 * that exist (indirect blocks that are holes are skipped whole). */
struct seek_scan {
	blk64_t from;       /* first logical block of interest */
	bool want_data;
	blk64_t next;       /* SEEK_HOLE: the next block expected if no hole */
	blk64_t found;      /* the answer's logical block */
	bool done;
};

static int seek_scan_block(ext2_filsys fs, blk64_t *pblk, e2_blkcnt_t lblk, blk64_t ref_blk,
			   int ref_offset, void *priv)
{
	struct seek_scan *s = priv;

	(void)fs;
	(void)ref_blk;
	(void)ref_offset;
	if (lblk < 0 || !*pblk || (blk64_t)lblk < s->from)
		return 0;
	if (s->want_data) {
		s->found = lblk;
		s->done = true;
		return BLOCK_ABORT;
	}
	if ((blk64_t)lblk > s->next) {
		s->found = s->next;
		s->done = true;
		return BLOCK_ABORT;
	}
	s->next = lblk + 1;
	return 0;
}

static void op_lseek(fuse_req_t req, fuse_ino_t fino, off_t off, int whence,
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
		struct seek_scan s = { .from = off / bs, .want_data = whence == SEEK_DATA,
				       .next = off / bs };
		if (ext2fs_inode_has_valid_blocks2(r->fs, &in)) {
			errcode_t e = ext2fs_block_iterate3(r->fs, ino,
							    BLOCK_FLAG_READ_ONLY | BLOCK_FLAG_DATA_ONLY,
							    NULL, seek_scan_block, &s);
			if (e)
				ret = -errmap(e);
		}
		if (!s.done && !s.want_data)
			s.found = s.next;            /* the hole after the last block */
		if (!ret && !s.done && s.want_data)
			ret = -ENXIO;                /* no data past off */
		uint64_t at = s.found * bs;
		res = at > (uint64_t)off ? (off_t)at : off;
		if (!ret && (uint64_t)res > size)
			res = size;                  /* the implicit hole at EOF */
		if (!ret && s.want_data && (uint64_t)res >= size)
			ret = -ENXIO;
	}
	unlock(r);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_lseek(req, res);
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
	.releasedir = op_release,
	.fsyncdir = op_fsyncdir,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.fallocate = op_fallocate,
	.lseek = op_lseek,
};
