/*
 * fuse/dir.c - directory handles: opendir, readdir(plus), fsyncdir.
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

void op_opendir(fuse_req_t req, fuse_ino_t fino, struct fuse_file_info *fi)
{
	struct rfs *r = R(req);
	struct ext2_inode in;
	int ret;

	lock(r);
	ret = get_inode(r, to_ext(fino), &in);
	if (!ret && !LINUX_S_ISDIR(in.i_mode))
		ret = -ENOTDIR;
	if (!ret)
		open_get(r, to_ext(fino), NULL);   /* an rmdir while open keeps the inode */
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
	ext2_ino_t *held;          /* readdirplus: the entries counted by lookup_get */
	size_t nheld, capheld;
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
		/* (a buffer too small only gives the size) */
		if (fuse_add_direntry_plus(c->req, NULL, 0, nm, &e, next_off) > c->size - c->pos)
			return 1;
		/* the kernel takes a reference for each entry but "." and "..";
		 * one not counted (no memory) goes without attributes */
		bool counted = !dot && c->nheld < c->capheld && !lookup_get(c->r, ino);
		if (!counted) {
			e.ino = 0;
			e.attr.st_ino = ino;
		}
		ent = fuse_add_direntry_plus(c->req, c->buf + c->pos, c->size - c->pos, nm, &e,
					     next_off);
		if (counted)
			c->held[c->nheld++] = ino;
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

/* Whether a run of names sharing one position fits the buffer whole (an
 * entry's size depends only on its name). */
static bool rd_fits(void *vctx, const struct dindex_name *run, size_t n)
{
	struct rd_ctx *c = vctx;
	char nm[EXT2_NAME_LEN + 1];
	size_t need = 0;

	for (size_t i = 0; i < n; i++) {
		struct fuse_entry_param e = { 0 };

		memcpy(nm, run[i].name, run[i].len);
		nm[run[i].len] = 0;
		need += c->plus ? fuse_add_direntry_plus(c->req, NULL, 0, nm, &e, 0)
				: fuse_add_direntry(c->req, NULL, 0, nm, NULL, 0);
	}
	return need <= c->size - c->pos;
}

static void do_readdir(fuse_req_t req, fuse_ino_t fino, size_t size, off_t off, bool plus)
{
	struct rfs *r = R(req);
	struct rd_ctx c = { .r = r, .req = req, .size = size, .plus = plus };
	int ret;

	c.buf = malloc(size);
	if (plus) {
		/* an entry takes at least its header (fuse_entry_out, 128
		 * bytes, and fuse_dirent, 24) and an 8-byte aligned name */
		c.capheld = size / (128 + 24 + 8) + 1;
		c.held = malloc(c.capheld * sizeof(*c.held));
	}
	if (!c.buf || (plus && !c.held)) {
		free(c.buf);
		free(c.held);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	lock(r);
	ret = dindex_readdir_batch(r->di, to_ext(fino), off, rd_fill, rd_fits, &c);
	unlock(r);
	if (ret && c.pos == 0)
		fuse_reply_err(req, -ret);
	else if (fuse_reply_buf(req, c.buf, c.pos) == -ENOENT && c.nheld) {
		/* the kernel never got the entries: no references taken */
		lock(r);
		for (size_t i = 0; i < c.nheld; i++)
			lookup_put(r, c.held[i], 1);
		unlock(r);
	}
	free(c.buf);
	free(c.held);
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, false);
}

void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, true);
}

void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	op_fsync(req, ino, datasync, fi);
}

/* Blocks of static metadata that statfs leaves out of f_blocks, as the
 * kernel's default (bsddf): what mke2fs recorded in s_overhead_clusters,
 * else the kernel's count: superblocks and descriptors (reserved ones
 * included), bitmaps, inode tables, the internal journal. */
