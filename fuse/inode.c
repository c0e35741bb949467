/*
 * fuse/inode.c - inodes and attributes: reading and writing inodes with their
 * nanosecond times, stat replies, getattr/setattr, truncation and set-id clearing.
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

int errmap(errcode_t e)
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
int report_corruption(ext2_ino_t ino, const char *what)
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

int get_inode(struct rfs *r, ext2_ino_t ino, struct ext2_inode *inode)
{
	if (ino < 1 || ino > r->fs->super->s_inodes_count)
		return report_corruption(ino, "inode number out of range");
	errcode_t e = ext2fs_read_inode(r->fs, ino, inode);
	return e ? -errmap(e) : 0;
}

/* get_inode with the large inode's fields (i_extra_isize 0 and the rest
 * zero where the file system's inodes are 128 bytes). */
static int get_inode_large(struct rfs *r, ext2_ino_t ino, struct ext2_inode_large *big)
{
	if (ino < 1 || ino > r->fs->super->s_inodes_count)
		return report_corruption(ino, "inode number out of range");
	if (EXT2_INODE_SIZE(r->fs->super) < sizeof(*big))
		memset(big, 0, sizeof(*big));
	errcode_t e = ext2fs_read_inode_full(r->fs, ino, (struct ext2_inode *)big, sizeof(*big));
	return e ? -errmap(e) : 0;
}

/* ---- nanosecond timestamps ----
 * On inodes larger than 128 bytes the kernel keeps i_{a,m,c,cr}time_extra:
 * two epoch bits (seconds past 2038) and the nanoseconds shifted left by 2.
 * The operation marks the times it sets (stamp_now, stamp_set) with their
 * extra words, encoded from the full 64-bit seconds (the 32-bit inode field
 * has lost the epoch); put_inode writes them with the rest of the inode. */

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
time_t stamp_now(struct rfs *r, ext2_ino_t ino, unsigned mask)
{
	stamp_set(r, ino, mask, r->now.tv_sec, r->now.tv_nsec);
	return r->now.tv_sec;
}

static bool large_inodes(struct rfs *r)
{
	return EXT2_INODE_SIZE(r->fs->super) > EXT2_GOOD_OLD_INODE_SIZE;
}

/* The operation's stamps of ino, or NULL. */
static const struct time_stamp *stamp_of(const struct rfs *r, ext2_ino_t ino)
{
	const struct time_stamp *s = NULL;
	for (unsigned i = 0; i < r->nstamp; i++)
		if (r->stamp[i].ino == ino)
			s = &r->stamp[i];
	return s;
}

/* The extra words of the stamped times, where big's extra space has them. */
static void stamps_apply(const struct rfs *r, const struct time_stamp *s,
			 struct ext2_inode_large *big)
{
	unsigned have = big->i_extra_isize;
	if ((s->mask & T_C) && have >= 8)
		big->i_ctime_extra = s->extra[2];
	if ((s->mask & T_M) && have >= 12)
		big->i_mtime_extra = s->extra[1];
	if ((s->mask & T_A) && have >= 16)
		big->i_atime_extra = s->extra[0];
	if ((s->mask & T_CR) && have >= 24) {
		big->i_crtime = (uint32_t)r->now.tv_sec;
		big->i_crtime_extra = s->extra[3];
	}
}

int put_inode(struct rfs *r, ext2_ino_t ino, struct ext2_inode *inode)
{
	const struct time_stamp *s = stamp_of(r, ino);
	if (s && large_inodes(r)) {
		union {
			struct ext2_inode_large big;
			char raw[1024];
		} here;
		/* the whole on-disk inode: given less, libext2fs reads the
		 * inode once more itself to fill in the rest */
		size_t size = EXT2_INODE_SIZE(r->fs->super);
		if (size > sizeof(here) || size < sizeof(here.big))
			size = sizeof(here.big);
		errcode_t e = ext2fs_read_inode_full(r->fs, ino, (struct ext2_inode *)&here.big,
						     (int)size);
		if (!e) {
			memcpy(&here.big, inode, sizeof(*inode));
			stamps_apply(r, s, &here.big);
			e = ext2fs_write_inode_full(r->fs, ino, (struct ext2_inode *)&here.big,
						    (int)size);
		}
		return e ? -errmap(e) : 0;
	}
	errcode_t e = ext2fs_write_inode(r->fs, ino, inode);
	return e ? -errmap(e) : 0;
}

/* How many of an inode's bytes a union inode_buf carries; 0 where it
 * cannot carry them all (inodes past 1 KiB, or an inode size smaller than
 * struct ext2_inode_large's on a large-inode file system). */
static size_t inode_buf_size(struct rfs *r)
{
	size_t size = EXT2_INODE_SIZE(r->fs->super);
	if (!large_inodes(r))
		return sizeof(struct ext2_inode);
	return size < sizeof(struct ext2_inode_large) || size > sizeof(union inode_buf) ? 0 : size;
}

int get_inode_buf(struct rfs *r, ext2_ino_t ino, union inode_buf *b)
{
	size_t size = inode_buf_size(r);
	if (!size)
		return get_inode_large(r, ino, &b->big);
	if (ino < 1 || ino > r->fs->super->s_inodes_count)
		return report_corruption(ino, "inode number out of range");
	if (size < sizeof(b->big))
		memset(&b->big, 0, sizeof(b->big));   /* i_extra_isize 0 */
	errcode_t e = ext2fs_read_inode_full(r->fs, ino, &b->small, (int)size);
	return e ? -errmap(e) : 0;
}

int put_inode_buf(struct rfs *r, ext2_ino_t ino, union inode_buf *b)
{
	size_t size = inode_buf_size(r);
	const struct time_stamp *s = stamp_of(r, ino);
	if (s && large_inodes(r))
		stamps_apply(r, s, &b->big);
	if (!size || !large_inodes(r))
		return put_inode(r, ino, &b->small);
	errcode_t e = ext2fs_write_inode_full(r->fs, ino, &b->small, (int)size);
	return e ? -errmap(e) : 0;
}

/* A new inode's first write, laid out as ext2fs_write_new_inode lays it
 * (the whole inode from zero, so nothing of a freed inode's extra space
 * survives; i_extra_isize covering struct ext2_inode_large), with the
 * operation's time stamps in it: one write, where that call and then
 * put_inode for the stamps would make two, each a read and a write of the
 * inode table block. */
int put_new_inode(struct rfs *r, ext2_ino_t ino, struct ext2_inode *inode)
{
	size_t size = EXT2_INODE_SIZE(r->fs->super);
	union {
		struct ext2_inode_large big;
		char raw[1024];
	} here;
	const struct time_stamp *s = stamp_of(r, ino);
	errcode_t e;

	if (!s || !large_inodes(r) || size < sizeof(here.big) || size > sizeof(here)) {
		e = ext2fs_write_new_inode(r->fs, ino, inode);
		return e ? -errmap(e) : s ? put_inode(r, ino, inode) : 0;
	}
	memset(&here, 0, size);
	memcpy(&here.big, inode, sizeof(*inode));
	here.big.i_extra_isize = sizeof(here.big) - EXT2_GOOD_OLD_INODE_SIZE;
	here.big.i_crtime = (uint32_t)r->now.tv_sec;
	stamps_apply(r, s, &here.big);
	e = ext2fs_write_inode_full(r->fs, ino, (struct ext2_inode *)&here.big, (int)size);
	return e ? -errmap(e) : 0;
}

int ftype_of(struct rfs *r, unsigned mode)
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

/*
 * map_root: an image made by root (mke2fs makes the root directory root's)
 * mounted by a normal user.  The image's uid 0 and the user's uid (and the
 * gids alike) swap places between the disk and what the kernel sees, so
 * the user works in the image as its owner would: root's files are the
 * user's (and the user's, if any, are root's); what the user creates is
 * root's on disk, as it would be had root made it.  The user gains nothing
 * outside the image: the user can write every byte of the image file anyway
 * (or read it, on a read-only mount), and an unprivileged FUSE mount is
 * nosuid and nodev (fusermount3), so no set-id file or device node of the
 * image works; the kernel still refuses the user what only a privileged
 * caller may do (chown to others, CAP_LINUX_IMMUTABLE).  The swap is its
 * own inverse: the same call maps both ways.
 */
void owner_map_init(struct rfs *r)
{
	struct ext2_inode root;
	uid_t uid = getuid();

	r->map_root = false;
	if (!r->fs || r->cfg->map_root == MAP_ROOT_OFF || uid == 0)
		return;
	if (r->cfg->map_root == MAP_ROOT_AUTO &&
	    (get_inode(r, EXT2_ROOT_INO, &root) || inode_uid(root) != 0))
		return;
	r->map_root = true;
	r->map_uid = uid;
	r->map_gid = getgid();
}

uint32_t map_uid(const struct rfs *r, uint32_t uid)
{
	if (!r->map_root)
		return uid;
	return uid == 0 ? r->map_uid : uid == r->map_uid ? 0 : uid;
}

uint32_t map_gid(const struct rfs *r, uint32_t gid)
{
	if (!r->map_root)
		return gid;
	return gid == 0 ? r->map_gid : gid == r->map_gid ? 0 : gid;
}

/* ino's extra time words into st, from big when the caller read them (its
 * i_extra_isize 0 on small inodes), else read here. */
static void fill_stat_extra(struct rfs *r, ext2_ino_t ino, const struct ext2_inode_large *big,
			    struct stat *st)
{
	struct ext2_inode_large here;
	if (!large_inodes(r))
		return;
	if (!big) {
		if (ext2fs_read_inode_full(r->fs, ino, (struct ext2_inode *)&here, sizeof(here)))
			return;
		big = &here;
	}
	if (big->i_extra_isize >= 8)
		decode_extra(big->i_ctime_extra, &st->st_ctim.tv_sec, &st->st_ctim.tv_nsec);
	if (big->i_extra_isize >= 12)
		decode_extra(big->i_mtime_extra, &st->st_mtim.tv_sec, &st->st_mtim.tv_nsec);
	if (big->i_extra_isize >= 16)
		decode_extra(big->i_atime_extra, &st->st_atim.tv_sec, &st->st_atim.tv_nsec);
}

static void fill_stat_of(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in,
			 const struct ext2_inode_large *big, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = in->i_mode;
	st->st_nlink = in->i_links_count;
	st->st_uid = map_uid(r, inode_uid(*in));
	st->st_gid = map_gid(r, inode_gid(*in));
	st->st_size = EXT2_I_SIZE(in);
	st->st_blksize = r->fs->blocksize;
	st->st_blocks = ext2fs_get_stat_i_blocks(r->fs, in);
	/* the kernel counts an inline file's bytes as blocks (tar would call
	 * a file of no blocks sparse) */
	if ((in->i_flags & EXT4_INLINE_DATA_FL) && LINUX_S_ISREG(in->i_mode))
		st->st_blocks += (st->st_size + 511) / 512;
	/* signed 32-bit seconds, as the kernel reads them (times before 1970) */
	st->st_atime = (int32_t)in->i_atime;
	st->st_mtime = (int32_t)in->i_mtime;
	st->st_ctime = (int32_t)in->i_ctime;
	fill_stat_extra(r, ino, big, st);
	if (LINUX_S_ISCHR(in->i_mode) || LINUX_S_ISBLK(in->i_mode)) {
		if (in->i_block[0]) {
			st->st_rdev = makedev((in->i_block[0] >> 8) & 255, in->i_block[0] & 255);
		} else {
			uint32_t d = in->i_block[1];
			st->st_rdev = makedev((d & 0xfff00) >> 8, (d & 0xff) | ((d >> 12) & 0xfff00));
		}
	}
}

static void fill_entry_of(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in,
			  const struct ext2_inode_large *big, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	if (r->known && ino <= r->fs->super->s_inodes_count)
		r->known[ino >> 3] |= (uint8_t)(1u << (ino & 7));
	e->ino = to_fuse(ino);
	/* the kernel made the root inode with generation 0 and takes any
	 * other as a stale inode */
	e->generation = ino == EXT2_ROOT_INO ? 0 : in->i_generation;
	fill_stat_of(r, ino, in, big, &e->attr);
	e->attr_timeout = TIMEOUT;
	e->entry_timeout = TIMEOUT;
}

void fill_entry(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in,
		struct fuse_entry_param *e)
{
	fill_entry_of(r, ino, in, NULL, e);
}

void fill_entry_new(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in,
		    struct fuse_entry_param *e)
{
	const struct time_stamp *s = stamp_of(r, ino);
	struct ext2_inode_large big;

	if (!large_inodes(r) || !inode_buf_size(r)) {
		fill_entry_of(r, ino, in, NULL, e);
		return;
	}
	/* as put_new_inode lays it out: i_extra_isize past the crtime */
	memset(&big, 0, sizeof(big));
	memcpy(&big, in, sizeof(*in));
	big.i_extra_isize = sizeof(big) - EXT2_GOOD_OLD_INODE_SIZE;
	if (s)
		stamps_apply(r, s, &big);
	fill_entry_of(r, ino, in, &big, e);
}

void fill_entry_buf(struct rfs *r, ext2_ino_t ino, union inode_buf *b,
		    struct fuse_entry_param *e)
{
	fill_entry_of(r, ino, &b->small, &b->big, e);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct rfs *r = R(req);
	struct ext2_inode_large big;
	struct ext2_inode *in = (struct ext2_inode *)&big;
	struct stat st;
	int ret;

	(void)fi;
	lock(r);
	/* the whole inode at once: its times' extra words too */
	ret = get_inode_large(r, to_ext(ino), &big);
	/* freed (a dentry the kernel kept of discarded state, or a race with
	 * unlink): gone, not a file of mode 0 */
	if (!ret && in->i_links_count == 0 && !*open_slot(r, to_ext(ino)))
		ret = -ENOENT;
	if (!ret)
		fill_stat_of(r, to_ext(ino), in, &big, &st);
	unlock(r);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_attr(req, &st, TIMEOUT);
}

/*
 * The tail of the block holding EOF: the bytes of a mapped, written block
 * past i_size are zero on disk.  The kernel's ext3/ext4 keeps it so
 * (ext4_block_truncate_page zeroes them on a truncate down) and relies on
 * it: it reads the block holding EOF whole, and an extension by the kernel
 * (truncate up, a write further on) need not rewrite those bytes
 * (pagecache_isize_extended only fixes its page cache), so stale bytes
 * there would reappear inside the file.  Two steps keep it without ever
 * losing fsynced bytes:
 *  - a truncate down zeroes the tail only once the smaller size is
 *    committed: zeroed before, a power cut between the data write and the
 *    commit would leave the old size with zeros inside it;
 *  - an extension past an EOF inside such a block zeroes the tail before
 *    the larger size can commit (still past EOF then, so safe at any cut):
 *    a cut between the truncate's commit and its tail write leaves stale
 *    bytes past EOF, which must not become file content later.
 * Holes and unwritten blocks read as zeros: nothing to zero.
 */

/* The block holding byte `size` of ino when its bytes from there on are
 * not all zero: *pblk (0 when nothing to zero) and its content in buf. */
static int tail_read(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, uint64_t size,
		     blk64_t *pblk, char *buf)
{
	size_t bs = r->fs->blocksize, from = size % bs;
	int ret;

	*pblk = 0;
	if (from == 0 || !ext2fs_inode_has_valid_blocks2(r->fs, in))
		return 0;
	ret = bmap_block(r, ino, in, size / bs, pblk);   /* 0: a hole or unwritten */
	if (!ret && *pblk)
		ret = blocks_io(r, ino, false, pblk, 1, buf);
	if (ret || !*pblk)
		return ret;
	for (size_t i = from; i < bs; i++)
		if (buf[i])
			return 0;
	*pblk = 0;
	return 0;
}

static int tail_write(struct rfs *r, ext2_ino_t ino, uint64_t size, blk64_t pblk, char *buf)
{
	size_t bs = r->fs->blocksize;
	memset(buf + size % bs, 0, bs - size % bs);
	return blocks_io(r, ino, true, &pblk, 1, buf);
}

int tail_zero(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, uint64_t size)
{
	blk64_t pblk;
	char *buf = malloc(r->fs->blocksize);
	if (!buf)
		return -ENOMEM;
	int ret = tail_read(r, ino, in, size, &pblk, buf);
	if (!ret && pblk)
		ret = tail_write(r, ino, size, pblk, buf);
	free(buf);
	return ret;
}

/* A truncate down: the smaller size (and the blocks past it freed) is
 * committed before the tail of its last block is zeroed, when it needs
 * zeroing (a commit per such truncate: they are rare). */
static int truncate_down(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, uint64_t size)
{
	blk64_t pblk;
	char *buf = malloc(r->fs->blocksize);
	if (!buf)
		return -ENOMEM;
	int ret = tail_read(r, ino, in, size, &pblk, buf);
	if (!ret)
		ret = orphan_truncate(r, ino, in, size);
	if (!ret && pblk)
		ret = put_inode(r, ino, in);
	if (!ret && pblk) {
		errcode_t e = commit_midway(r);
		if (e)
			ret = e == EROFS ? -EROFS : -errmap(e);
	}
	if (!ret && pblk)
		ret = tail_write(r, ino, size, pblk, buf);
	free(buf);
	return ret;
}

int do_truncate(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, uint64_t size)
{
	if (size > bmap_file_max(r, in))
		return -EFBIG;
	if (size < EXT2_I_SIZE(in))
		return truncate_down(r, ino, in, size);
	int ret = size > EXT2_I_SIZE(in) ? tail_zero(r, ino, in, EXT2_I_SIZE(in)) : 0;
	if (ret)
		return ret;
	errcode_t e = ext2fs_inode_size_set(r->fs, in, size);
	return e ? -errmap(e) : 0;
}

static bool caller_in_group(fuse_req_t req, gid_t gid)
{
	gid_t groups[64];

	gid = map_gid(R(req), gid);   /* as the kernel sees it */
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
uint16_t setid_bits_to_kill(fuse_req_t req, const struct ext2_inode *in)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	uint16_t mode = in->i_mode, kill = mode & LINUX_S_ISUID;
	if ((mode & LINUX_S_ISGID) &&
	    ((mode & LINUX_S_IXGRP) ||
	     (c->uid != 0 && !caller_in_group(req, inode_gid(*in)))))
		kill |= LINUX_S_ISGID;
	return kill;
}

/* The daemon changed ino's attributes where no reply carries them (a
 * write that cleared set-id bits, an ioctl that set flags): remembered
 * under the lock, told to the kernel by attr_notify. */
void attr_changed(struct rfs *r, ext2_ino_t ino)
{
	for (unsigned i = 0; i < r->nattr_stale; i++)
		if (r->attr_stale[i] == ino)
			return;
	if (r->nattr_stale < sizeof(r->attr_stale) / sizeof(r->attr_stale[0]))
		r->attr_stale[r->nattr_stale++] = ino;
}

/*
 * Invalidate the kernel's attributes (and cached ACLs) of the inodes
 * attr_changed noted, before the request that changed them is answered: a
 * permission check or exec must not use a mode the daemon has changed
 * (FUSE_HANDLE_KILLPRIV_V2 leaves set-id clearing to us, and the kernel
 * keeps attributes for TIMEOUT).  Called without the lock.  An offset of
 * -1 invalidates attributes only: the kernel then takes no page or inode
 * lock that the request in progress holds, so this cannot deadlock the way
 * a name invalidation could (lifecycle.c sends those from a thread).
 */
void attr_notify(struct rfs *r)
{
	ext2_ino_t inos[sizeof(r->attr_stale) / sizeof(r->attr_stale[0])];
	unsigned n;

	lock(r);
	n = r->nattr_stale;
	memcpy(inos, r->attr_stale, n * sizeof(inos[0]));
	r->nattr_stale = 0;
	unlock(r);
	for (unsigned i = 0; i < n; i++)
		(void)fuse_lowlevel_notify_inval_inode(r->se, to_fuse(inos[i]), -1, 0);
}

/* setattr's times: the seconds in the inode, the nanoseconds beside them
 * (stamp_*); a truncation is a modification, and ctime is now unless set. */
static void setattr_times(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in,
			  const struct stat *attr, int to_set, time_t now)
{
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		in->i_atime = now;
	else if (to_set & FUSE_SET_ATTR_ATIME)
		in->i_atime = attr->st_atime;
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		in->i_mtime = now;
	else if (to_set & FUSE_SET_ATTR_MTIME)
		in->i_mtime = attr->st_mtime;
	in->i_ctime = (to_set & FUSE_SET_ATTR_CTIME) ? attr->st_ctime : now;
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
}

void op_setattr(fuse_req_t req, fuse_ino_t fino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct rfs *r = R(req);
	ext2_ino_t ino = to_ext(fino);
	union inode_buf b;
	struct ext2_inode *in = &b.small;
	struct stat st;
	time_t now = time(NULL);
	int ret;

	(void)fi;
	lock(r);
	ret = wr_begin(r);
	if (ret)
		goto out;
	now = r->now.tv_sec;
	ret = get_inode_buf(r, ino, &b);
	if (!ret)
		ret = flags_check_setattr(in, to_set);   /* immutable, append-only */
	if (ret)
		goto end;
	flags_sync_inode(r, in);
	/* Set-id bits (FUSE_CAP_HANDLE_KILLPRIV: the kernel leaves this to us):
	 * chown drops set-user-id and group-executable set-group-id on
	 * non-directories for anyone, truncation for callers other than root;
	 * an explicit mode in the same request wins. */
	/* chown(f, -1, -1) arrives with nothing else to set (libfuse 3.14
	 * passes on neither its ctime nor the kill flag), as does a kill
	 * request of the kernel's own: both drop the bits as chown does */
	bool chown = (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) ||
		     !(to_set & ~FUSE_SET_ATTR_CTIME);
	if (!(to_set & FUSE_SET_ATTR_MODE) && !LINUX_S_ISDIR(in->i_mode) &&
	    (chown ||
	     ((to_set & FUSE_SET_ATTR_SIZE) && fuse_req_ctx(req)->uid != 0)))
		in->i_mode &= ~setid_bits_to_kill(req, in);
	if (to_set & FUSE_SET_ATTR_MODE)
		in->i_mode = (in->i_mode & LINUX_S_IFMT) | (attr->st_mode & 07777);
	if (to_set & FUSE_SET_ATTR_UID) {
		uint32_t uid = map_uid(r, attr->st_uid);
		in->i_uid = uid & 0xffff;
		ext2fs_set_i_uid_high(*in, uid >> 16);
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		uint32_t gid = map_gid(r, attr->st_gid);
		in->i_gid = gid & 0xffff;
		ext2fs_set_i_gid_high(*in, gid >> 16);
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (LINUX_S_ISDIR(in->i_mode)) {
			ret = -EISDIR;
			goto end;
		}
		if (!LINUX_S_ISREG(in->i_mode)) {
			ret = -EINVAL;
			goto end;
		}
		if ((uint64_t)attr->st_size > EXT2_I_SIZE(in) &&
		    (ret = space_check(r, req, 0)) != 0 && 0)
			goto end;
		ret = do_truncate(r, ino, in, attr->st_size);
		if (ret)
			goto end;
		in->i_mtime = now;
	}
	setattr_times(r, ino, in, attr, to_set, now);
	ret = put_inode_buf(r, ino, &b);
	/* a chmod rewrites the access ACL's entries (the kernel forgets its
	 * cached ACL after every SETATTR); an inode with no attributes at all
	 * (b as read, its attribute bytes untouched) has none to rewrite */
	if (!ret && (to_set & FUSE_SET_ATTR_MODE) && !inode_buf_has_no_xattrs(r, &b) &&
	    !(ret = acl_chmod(r, ino, in->i_mode)))
		ret = get_inode_buf(r, ino, &b);
	if (!ret)
		fill_stat_of(r, ino, in, &b.big, &st);
end:
	ret = wr_end(r, ret, false);
out:
	unlock(r);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_attr(req, &st, TIMEOUT);
}
