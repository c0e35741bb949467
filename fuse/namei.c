/*
 * fuse/namei.c - names: lookup, readlink, creating nodes (mknod, mkdir, symlink,
 * create), unlink, rmdir, rename and link.
 */
#include "rfs.h"
#include "inline.h"
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

/* Send an entry counted by lookup_get; if the kernel never got it (its
 * caller went away), the reference it did not take is given back. */
static void reply_entry_counted(fuse_req_t req, struct rfs *r, ext2_ino_t ino,
				const struct fuse_entry_param *e)
{
	if (fuse_reply_entry(req, e) == -ENOENT) {
		lock(r);
		lookup_put(r, ino, 1);
		unlock(r);
	}
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct rfs *r = R(req);
	struct fuse_entry_param e;
	/* read whole once: the reply's times need the bytes past 128 */
	union inode_buf b;
	struct ext2_inode *in = &b.small;
	ext2_ino_t ino;
	int ft, ret;

	if (!name_ok(name, &ret)) {
		fuse_reply_err(req, -ret);
		return;
	}
	lock(r);
	/* "." of any inode: the kernel asks it (FUSE_EXPORT_SUPPORT) to
	 * rebuild an inode from a file handle after a remount; only a live
	 * inode answers, so a handle of a freed and reused inode meets a
	 * different generation (ESTALE) */
	if (!strcmp(name, ".")) {
		ino = to_ext(parent);
		ret = get_inode_buf(r, ino, &b);
		if (!ret && in->i_links_count == 0 && !*open_slot(r, ino))
			ret = -ESTALE;
	} else {
		ret = dindex_lookup(r->di, to_ext(parent), name, strlen(name), &ino, &ft);
		if (!ret)
			ret = get_inode_buf(r, ino, &b);
	}
	if (!ret)
		ret = lookup_get(r, ino);
	if (!ret)
		fill_entry_buf(r, ino, &b, &e);
	unlock(r);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		reply_entry_counted(req, r, ino, &e);
}

void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct rfs *r = R(req);

	lock(r);
	if (ino != FUSE_ROOT_ID)
		lookup_put(r, to_ext(ino), nlookup);
	unlock(r);
	fuse_reply_none(req);
}

void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	struct rfs *r = R(req);

	lock(r);
	for (size_t i = 0; i < count; i++)
		if (f[i].ino != FUSE_ROOT_ID)
			lookup_put(r, to_ext(f[i].ino), f[i].nlookup);
	unlock(r);
	fuse_reply_none(req);
}

void op_readlink(fuse_req_t req, fuse_ino_t fino)
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
		ret = report_corruption(ino, "symlink too long");
		goto out;
	}
	buf = calloc(1, r->fs->blocksize + 1);
	if (!buf) {
		ret = -ENOMEM;
		goto out;
	}
	if (in.i_flags & EXT4_INLINE_DATA_FL) {
		ret = inline_file_read(r->fs, ino, &in, 0, len, buf);
	} else if (ext2fs_is_fast_symlink(&in)) {
		if (len >= sizeof(in.i_block)) {
			ret = report_corruption(ino, "fast symlink too long");
			goto out;
		}
		memcpy(buf, in.i_block, len);
	} else {
		blk64_t pblk;
		ret = bmap_block(r, ino, &in, 0, &pblk);
		if (!ret && !pblk)
			ret = report_corruption(ino, "symlink without a block");
		if (!ret)
			ret = blocks_io(r, ino, false, &pblk, 1, buf);
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

/* Past the part of its group's inode table the descriptor says was ever
 * used (INODE_UNINIT, or beyond bg_itable_unused): what the table holds
 * there is not an inode, whatever it looks like (a crash can leave one
 * written behind a log whose replay stopped earlier), and e2fsck reads
 * none of it. */
static bool inode_never_used(ext2_filsys fs, ext2_ino_t ino)
{
	if (!ext2fs_has_group_desc_csum(fs))
		return false;
	dgrp_t g = ext2fs_group_of_ino(fs, ino);
	uint32_t index = (ino - 1) % fs->super->s_inodes_per_group;
	return ext2fs_bg_flags_test(fs, g, EXT2_BG_INODE_UNINIT) ||
	       index >= fs->super->s_inodes_per_group - ext2fs_bg_itable_unused(fs, g);
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
	/* The bitmap says free; the inode must agree (links 0, a deletion time,
	 * or never used): a live inode clear in the bitmap would be handed out
	 * twice, its old names then leading to the new file.  The kernel fails
	 * the create with EIO ("doubly allocated?"); so do we. */
	struct ext2_inode old;
	e = ext2fs_read_inode(r->fs, *out, &old);
	if (e)
		return -errmap(e);
	if (!inode_never_used(r->fs, *out) && old.i_links_count && !old.i_dtime &&
	    (old.i_mode & LINUX_S_IFMT)) {
		fprintf(stderr, "recon-fuse: inode %u is free in the inode bitmap but in use (%u "
			"links, mode 0%o): not reused; run e2fsck\n", *out, old.i_links_count,
			old.i_mode);
		syslog(LOG_ERR, "recon-fuse: inode %u free in the bitmap but in use; run e2fsck", *out);
		return -EIO;
	}
	memset(in, 0, sizeof(*in));
	in->i_mode = mode;
	uint32_t uid = map_uid(r, c->uid);
	in->i_uid = uid & 0xffff;
	ext2fs_set_i_uid_high(*in, uid >> 16);
	gid_t gid = map_gid(r, c->gid);
	/* grpid: the directory's group, as the kernel's ext3 gives it, without
	 * the setgid bit a setgid directory passes on to new directories */
	if (r->cfg->grpid) {
		gid = inode_gid(din);
	} else if (din.i_mode & LINUX_S_ISGID) {
		gid = inode_gid(din);
		if (LINUX_S_ISDIR(mode))
			in->i_mode |= LINUX_S_ISGID;
	}
	in->i_gid = gid & 0xffff;
	ext2fs_set_i_gid_high(*in, gid >> 16);
	in->i_atime = in->i_mtime = in->i_ctime = stamp_now(r, *out, T_A | T_M | T_C | T_CR);
	in->i_links_count = 1;
	in->i_flags = flags_inherit(&din, mode);
	if (LINUX_S_ISREG(mode) || LINUX_S_ISDIR(mode))
		bmap_init(r, in);
	in->i_generation = (uint32_t)lrand48();
	ret = put_new_inode(r, *out, in);
	if (ret)
		return ret;
	rio_txn_inode_alloc_stats(r->fs, *out, +1, LINUX_S_ISDIR(mode));
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
	return ret == -ENOENT ? flags_check_dir_add(&din) : ret;
}

/* A directory's link count on a dir_nlink file system.  The kernel's ext4
 * lets an indexed directory take subdirectories past LINK_MAX_EXT3 links and
 * then count 1, "too many to count"; once 1 it stays 1, and a removal never
 * takes a count below 2.  e2fsck accepts 1 on any directory with more than
 * the maximum, indexed or not, and on an indexed one with fewer (it only
 * tidies that count).  This daemon writes new directories linear (and makes
 * an indexed one linear when an add cannot keep its hash tree, dirindex.c),
 * so its linear directories stand where the kernel's indexed ones do: any
 * directory passes the maximum and counts 1.  A linear one at 1 is counted
 * again when a subdirectory leaves, since e2fsck wants its true count once
 * it has no more than the maximum; an indexed one keeps 1, as the kernel. */
static bool dir_nlink_fs(const struct rfs *r)
{
	return ext2fs_has_feature_dir_nlink(r->fs->super);
}

static bool dir_indexed(const struct rfs *r, const struct ext2_inode *din)
{
	return ext2fs_has_feature_dir_index(r->fs->super) && (din->i_flags & EXT2_INDEX_FL);
}

/* May dir take one more subdirectory?  0 or -EMLINK (without dir_nlink,
 * as the kernel's ext3, at LINK_MAX_EXT3 links). */
static int dir_link_room(const struct rfs *r, const struct ext2_inode *din)
{
	return din->i_links_count < LINK_MAX_EXT3 || dir_nlink_fs(r) ? 0 : -EMLINK;
}

struct subdir_count {
	struct rfs *r;
	uint32_t n;
};

static int count_subdir(void *ctx, const char *name, size_t len, ext2_ino_t ino, int ftype,
			uint64_t next_off)
{
	struct subdir_count *c = ctx;
	struct ext2_inode in;

	(void)next_off;
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return 0;
	if (ftype == EXT2_FT_DIR ||
	    (ftype == EXT2_FT_UNKNOWN && !get_inode(c->r, ino, &in) && LINUX_S_ISDIR(in.i_mode)))
		c->n++;
	return 0;
}

/* The link count of a linear directory at 1 after a subdirectory left: 1
 * while it still has more than the maximum, else the true count. */
static uint16_t dir_links_recounted(struct rfs *r, ext2_ino_t dir)
{
	struct subdir_count c = { .r = r, .n = 0 };

	if (dindex_readdir(r->di, dir, 0, count_subdir, &c) || c.n + 2 > LINK_MAX_EXT3)
		return 1;
	return (uint16_t)(c.n + 2);
}

static uint16_t dir_links_after(struct rfs *r, ext2_ino_t dir, const struct ext2_inode *din,
				int delta)
{
	uint32_t n = din->i_links_count;

	if (!dir_nlink_fs(r) || delta == 0)
		return (uint16_t)(n + delta);
	if (delta > 0)
		return n == 1 || n + delta > LINK_MAX_EXT3 ? 1 : (uint16_t)(n + delta);
	if (n == 1 && !dir_indexed(r, din))
		return dir_links_recounted(r, dir);
	return n > 2 ? (uint16_t)(n + delta) : (uint16_t)n;
}

static void touch_dir(struct rfs *r, ext2_ino_t dir, int links_delta)
{
	union inode_buf b;   /* read whole once: put_inode would read it again */
	struct ext2_inode *din = &b.small;
	if (get_inode_buf(r, dir, &b))
		return;
	flags_sync_dir(r, din);
	din->i_mtime = din->i_ctime = stamp_now(r, dir, T_M | T_C);
	din->i_links_count = dir_links_after(r, dir, din, links_delta);
	(void)put_inode_buf(r, dir, &b);
}

/* What a new node needs before anything is allocated: a name free to
 * take, the blocks it will hold (a directory's first block, a slow
 * symlink's one block), and a link left in dir for a subdirectory's "..". */
static int make_node_allowed(struct rfs *r, fuse_req_t req, ext2_ino_t dir, const char *name,
			     bool isdir, const char *link)
{
	struct ext2_inode din;
	int ret = check_new_name(r, dir, name);

	if (ret)
		return ret;
	ret = space_check(r, req, isdir || (link && strlen(link) >= sizeof(din.i_block)) ? 1 : 0);
	if (ret || !isdir)
		return ret;
	ret = get_inode(r, dir, &din);
	if (ret)
		return ret;
	return dir_link_room(r, &din);
}

/* A new directory's first block: "." and "..". */
static int make_dir_block(struct rfs *r, ext2_ino_t dir, ext2_ino_t ino, struct ext2_inode *in)
{
	ext2_filsys fs = r->fs;
	char *blockbuf = NULL;
	blk64_t pblk;

	in->i_size = fs->blocksize;
	in->i_links_count = 2;
	errcode_t err = ext2fs_new_dir_block(fs, ino, dir, &blockbuf);
	int ret = err ? -errmap(err) : bmap_alloc(r, ino, in, 0, 0, &pblk);
	if (!ret) {
		err = ext2fs_write_dir_block4(fs, pblk, blockbuf, 0, ino);
		ret = err ? -errmap(err) : 0;
	}
	ext2fs_free_mem(&blockbuf);
	return ret;
}

/* A symlink's target: in i_block when it fits (a fast symlink), else in a
 * block of its own. */
static int make_symlink_target(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, const char *link)
{
	ext2_filsys fs = r->fs;
	size_t len = strlen(link);
	blk64_t pblk;
	int ret;

	if (len >= fs->blocksize)
		return -ENAMETOOLONG;
	if (len < sizeof(in->i_block)) {
		memcpy(in->i_block, link, len);
		in->i_size = len;
		return 0;
	}
	char *buf = calloc(1, fs->blocksize);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, link, len);
	bmap_init(r, in);
	ret = bmap_alloc(r, ino, in, 0, 0, &pblk);
	if (!ret)
		ret = blocks_io(r, ino, true, &pblk, 1, buf);
	free(buf);
	if (!ret)
		in->i_size = len;
	return ret;
}

/* mknod, mkdir, symlink, create share this. */
static int make_node(struct rfs *r, fuse_req_t req, ext2_ino_t dir, const char *name,
		     unsigned mode, dev_t rdev, const char *link, struct fuse_entry_param *e,
		     ext2_ino_t *out_ino)
{
	struct ext2_inode in;
	ext2_ino_t ino = 0;
	bool isdir = LINUX_S_ISDIR(mode);
	int ret = make_node_allowed(r, req, dir, name, isdir, link);

	if (ret)
		return ret;
	/* the directory's default ACL, or the umask, decides the mode */
	struct acl_new acls;
	ret = acl_inherit(r, req, dir, &mode, &acls);
	if (ret)
		return ret;
	ret = new_inode(r, req, dir, mode, &in, &ino);
	if (ret) {
		acl_new_free(&acls);
		return ret;
	}
	if (LINUX_S_ISCHR(mode) || LINUX_S_ISBLK(mode)) {
		unsigned ma = major(rdev), mi = minor(rdev);
		if (ma < 256 && mi < 256)
			in.i_block[0] = ma << 8 | mi;
		else
			in.i_block[1] = (mi & 0xff) | (ma << 8) | ((mi & ~0xffu) << 12);
	} else if (isdir) {
		ret = make_dir_block(r, dir, ino, &in);
	} else if (link) {
		ret = make_symlink_target(r, ino, &in, link);
	}
	/* a regular file is as new_inode wrote it */
	if (!ret && !LINUX_S_ISREG(mode))
		ret = put_inode(r, ino, &in);
	if (ret)
		goto undo;
	ret = acl_inherit_store(r, ino, &acls);
	/* as written: the ACLs may have taken an EA block (none stored: in is
	 * what was just written) */
	if (!ret && (acls.access || acls.deflt))
		ret = get_inode(r, ino, &in);
	if (ret)
		goto undo;
	ret = dindex_add(r->di, dir, name, strlen(name), ino, ftype_of(r, mode));
	if (ret)
		goto undo;
	acl_new_free(&acls);
	touch_dir(r, dir, isdir ? 1 : 0);
	fill_entry_new(r, ino, &in, e);
	*out_ino = ino;
	return 0;
undo:
	acl_new_free(&acls);
	in.i_links_count = 0;
	(void)rfs_free_inode(r, ino, &in, false);
	return ret;
}

/* The kernel's reference to a node just made (committed already, so the
 * reply goes out): out of memory it is not counted, and an unlink while the
 * kernel holds it frees it at once, as before lookups were counted. */
/* make_node, once more after a commit if it ran short of space while freed
 * blocks waited for their commit (wr_retry_enospc), as ext3 retries. */
static int make_node_retrying(struct rfs *r, fuse_req_t req, ext2_ino_t dir, const char *name,
			      unsigned mode, dev_t rdev, const char *link,
			      struct fuse_entry_param *e, ext2_ino_t *ino)
{
	bool retried = false;
	int ret;
	do
		ret = make_node(r, req, dir, name, mode, rdev, link, e, ino);
	while (wr_retry_enospc(r, ret, &retried));
	return ret;
}

static void hold_new(struct rfs *r, ext2_ino_t ino)
{
	if (lookup_get(r, ino))
		fprintf(stderr, "recon-fuse: out of memory counting the kernel's references to "
			"inode %u\n", ino);
}

static void reply_new(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      dev_t rdev, const char *link)
{
	struct rfs *r = R(req);
	struct fuse_entry_param e = { 0 };
	ext2_ino_t ino = 0;
	int ret;

	lock(r);
	ret = wr_begin(r);
	if (!ret)
		ret = wr_end(r, make_node_retrying(r, req, to_ext(parent), name, mode, rdev, link, &e,
						   &ino), false);
	if (!ret)
		hold_new(r, ino);
	unlock(r);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		reply_entry_counted(req, r, ino, &e);
}

void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	reply_new(req, parent, name, mode, rdev, NULL);
}

void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	reply_new(req, parent, name, (mode & 07777) | LINUX_S_IFDIR, 0, NULL);
}

void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	reply_new(req, parent, name, LINUX_S_IFLNK | 0777, 0, link);
}

void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct rfs *r = R(req);
	struct fuse_entry_param e = { 0 };
	ext2_ino_t ino = 0;
	int ret;

	lock(r);
	ret = wr_begin(r);
	if (!ret)
		ret = wr_end(r, make_node_retrying(r, req, to_ext(parent), name,
						   (mode & 07777) | LINUX_S_IFREG, 0, NULL, &e, &ino),
			     false);
	set_open_mode(fi);
	if (!ret) {
		hold_new(r, ino);
		open_get(r, ino, fi);
	}
	unlock(r);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		/* the opener went away: undo the open count and the reference */
		lock(r);
		open_undo(r, ino, fi);
		lookup_put(r, ino, 1);
		unlock(r);
	}
}

void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
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
		ret = flags_check_dir_remove_ino(r, dir);
	if (!ret)
		ret = flags_check_modify(&in);
	if (!ret)
		ret = dindex_remove(r->di, dir, name, strlen(name));
	/* the victim's inode first, while libext2fs's one-block buffer of the
	 * inode table still holds the block its read brought in; the
	 * directory's after (every switch of that buffer to another block
	 * copies 4 KiB out of the overlay) */
	if (!ret)
		ret = drop_link(r, ino, &in);
	if (!ret)
		touch_dir(r, dir, 0);
end:
	ret = wr_end(r, ret, false);
out:
	unlock(r);
	fuse_reply_err(req, -ret);
}

void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
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
	if (!ret)
		ret = flags_check_dir_remove_ino(r, dir);
	if (!ret)
		ret = flags_check_modify(&in);
	if (!ret) {
		ret = dindex_is_empty(r->di, ino);
		ret = ret == 1 ? 0 : ret == 0 ? -ENOTEMPTY : ret;
	}
	if (!ret)
		ret = dindex_remove(r->di, dir, name, strlen(name));
	if (!ret) {
		/* as the kernel's ext3: a removed directory still open reads as
		 * size 0 until its last close frees it; its inode before the
		 * parent's, as in unlink */
		in.i_size = 0;
		ret = drop_link(r, ino, &in);
	}
	if (!ret)
		touch_dir(r, dir, -1);
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

/* One end of a rename: a name in a directory, and the inode it names. */
struct rename_end {
	ext2_ino_t dir;
	const char *name;
	size_t len;
	ext2_ino_t ino;          /* 0: the name is free (the destination only) */
	int ftype;               /* the entry's file type */
	struct ext2_inode in;    /* ino's inode, when ino */
	bool isdir;
};

/* Both ends looked up before anything changes: the destination directory
 * (its inode in *dst_dir_in), the source's entry and inode, the
 * destination's when the name is taken; and whether each may leave or join
 * its directory.  0 or -errno. */
static int rename_look_up(struct rfs *r, struct rename_end *src, struct rename_end *dst,
			  struct ext2_inode *dst_dir_in)
{
	int ret;

	if (!name_ok(src->name, &ret) || !name_ok(dst->name, &ret))
		return ret;
	ret = get_inode(r, dst->dir, dst_dir_in);
	if (ret)
		return ret;
	if (!LINUX_S_ISDIR(dst_dir_in->i_mode))
		return -ENOTDIR;
	ret = dindex_lookup(r->di, src->dir, src->name, src->len, &src->ino, &src->ftype);
	if (ret)
		return ret;
	ret = dindex_lookup(r->di, dst->dir, dst->name, dst->len, &dst->ino, &dst->ftype);
	if (ret == -ENOENT)
		dst->ino = 0;
	else if (ret)
		return ret;
	ret = get_inode(r, src->ino, &src->in);
	if (ret)
		return ret;
	src->isdir = LINUX_S_ISDIR(src->in.i_mode);
	if (dst->ino) {
		ret = get_inode(r, dst->ino, &dst->in);
		if (ret)
			return ret;
		dst->isdir = LINUX_S_ISDIR(dst->in.i_mode);
	}
	/* may_delete of the source (and of a target it replaces), may_create
	 * in the destination: immutable and append-only as the VFS checks */
	if (dst->ino != src->ino) {
		if ((ret = flags_check_dir_remove_ino(r, src->dir)) != 0 ||
		    (ret = flags_check_modify(&src->in)) != 0)
			return ret;
		if (dst->ino && ((ret = flags_check_dir_remove(dst_dir_in)) != 0 ||
				 (ret = flags_check_modify(&dst->in)) != 0))
			return ret;
		if (!dst->ino && (ret = flags_check_dir_add(dst_dir_in)) != 0)
			return ret;
	}
	return 0;
}

/* RENAME_EXCHANGE: the two names trade inodes; a directory that changes
 * parent has its ".." follow, and the link counts of the parents with it. */
static int rename_exchange(struct rfs *r, struct rename_end *src, struct rename_end *dst)
{
	time_t now = r->now.tv_sec;
	int ret;

	if (!dst->ino)
		return -ENOENT;
	if (dst->ino == src->ino)
		return 0;
	if (src->isdir && src->dir != dst->dir && (ret = is_within(r, dst->dir, src->ino)) != 0)
		return ret < 0 ? ret : -EINVAL;
	if (dst->isdir && src->dir != dst->dir && (ret = is_within(r, src->dir, dst->ino)) != 0)
		return ret < 0 ? ret : -EINVAL;
	ret = dindex_replace(r->di, dst->dir, dst->name, dst->len, src->ino, src->ftype);
	if (!ret)
		ret = dindex_replace(r->di, src->dir, src->name, src->len, dst->ino, dst->ftype);
	if (ret)
		return ret;
	if (src->dir != dst->dir) {
		if (src->isdir && (ret = set_dotdot(r, src->ino, dst->dir)))
			return ret;
		if (dst->isdir && (ret = set_dotdot(r, dst->ino, src->dir)))
			return ret;
		int delta = (int)src->isdir - (int)dst->isdir;
		touch_dir(r, src->dir, -delta);
		touch_dir(r, dst->dir, delta);
	} else {
		touch_dir(r, src->dir, 0);
	}
	src->in.i_ctime = dst->in.i_ctime = now;
	stamp_now(r, src->ino, T_C);
	stamp_now(r, dst->ino, T_C);
	ret = put_inode(r, src->ino, &src->in);
	return ret ? ret : put_inode(r, dst->ino, &dst->in);
}

/* A rename proper: src's inode takes the name dst, replacing the inode
 * that held it (unless noreplace), and leaves its old name.  dst_dir_in is
 * the destination directory's inode. */
static int rename_move(struct rfs *r, struct rename_end *src, struct rename_end *dst,
		       const struct ext2_inode *dst_dir_in, bool noreplace)
{
	time_t now = r->now.tv_sec;
	bool reparented = src->isdir && src->dir != dst->dir;   /* a directory changes parent */
	int ret;

	if (dst->ino == src->ino)
		return 0;
	if (dst->ino && noreplace)
		return -EEXIST;
	if (src->isdir) {
		if (!strcmp(src->name, ".") || !strcmp(src->name, ".."))
			return -EINVAL;
		if (reparented && (ret = is_within(r, dst->dir, src->ino)) != 0)
			return ret < 0 ? ret : -EINVAL;
	}
	if (dst->ino) {
		if (dst->isdir && !src->isdir)
			return -EISDIR;
		if (!dst->isdir && src->isdir)
			return -ENOTDIR;
		if (dst->isdir) {
			ret = dindex_is_empty(r->di, dst->ino);
			if (ret < 0)
				return ret;
			if (ret == 0)
				return -ENOTEMPTY;
		}
		ret = dindex_replace(r->di, dst->dir, dst->name, dst->len, src->ino, src->ftype);
	} else {
		if (reparented && (ret = dir_link_room(r, dst_dir_in)) != 0)
			return ret;
		ret = dindex_add(r->di, dst->dir, dst->name, dst->len, src->ino, src->ftype);
	}
	if (ret)
		return ret;
	ret = dindex_remove(r->di, src->dir, src->name, src->len);
	if (ret)
		return ret;
	if (reparented) {
		ret = set_dotdot(r, src->ino, dst->dir);
		if (ret)
			return ret;
	}
	/* link counts: a moved directory leaves its parent for the
	 * destination's; a replaced directory's ".." no longer points at the
	 * destination directory */
	if (src->dir == dst->dir) {
		touch_dir(r, src->dir, dst->isdir ? -1 : 0);
	} else {
		touch_dir(r, src->dir, reparented ? -1 : 0);
		touch_dir(r, dst->dir, (reparented ? 1 : 0) - (dst->isdir ? 1 : 0));
	}
	src->in.i_ctime = now;
	stamp_now(r, src->ino, T_C);
	ret = put_inode(r, src->ino, &src->in);
	if (!ret && dst->ino)
		ret = drop_link(r, dst->ino, &dst->in);
	return ret;
}

/* rename(2), and renameat2's RENAME_NOREPLACE and RENAME_EXCHANGE, in the
 * caller's write lifecycle.  0 or -errno. */
static int do_rename(struct rfs *r, ext2_ino_t src_dir, const char *src_name,
		     ext2_ino_t dst_dir, const char *dst_name, unsigned flags)
{
	struct rename_end src = { .dir = src_dir, .name = src_name, .len = strlen(src_name) };
	struct rename_end dst = { .dir = dst_dir, .name = dst_name, .len = strlen(dst_name) };
	struct ext2_inode dst_dir_in;

	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE))
		return -EINVAL;
	if ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE))
		return -EINVAL;
	int ret = rename_look_up(r, &src, &dst, &dst_dir_in);
	if (ret)
		return ret;
	if (flags & RENAME_EXCHANGE)
		return rename_exchange(r, &src, &dst);
	return rename_move(r, &src, &dst, &dst_dir_in, flags & RENAME_NOREPLACE);
}

void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	struct rfs *r = R(req);
	int ret;

	lock(r);
	ret = wr_begin(r);
	if (!ret) {
		bool retried = false;
		do
			ret = do_rename(r, to_ext(parent), name, to_ext(newparent), newname, flags);
		while (wr_retry_enospc(r, ret, &retried));
		ret = wr_end(r, ret, false);
	}
	unlock(r);
	fuse_reply_err(req, -ret);
}

/* The body of link(2): dir gains newname for ino (lock held, in an
 * operation). */
static int link_name(struct rfs *r, ext2_ino_t ino, ext2_ino_t dir, const char *newname,
		     struct ext2_inode *in, struct fuse_entry_param *e)
{
	int ret = check_new_name(r, dir, newname);
	if (!ret)
		ret = get_inode(r, ino, in);
	if (!ret && LINUX_S_ISDIR(in->i_mode))
		ret = -EPERM;
	if (!ret)
		ret = flags_check_modify(in);   /* may_linkat */
	if (!ret && in->i_links_count >= LINK_MAX_EXT3)
		ret = -EMLINK;
	if (!ret && in->i_links_count == 0)
		ret = -ENOENT;
	if (!ret)
		ret = dindex_add(r->di, dir, newname, strlen(newname), ino, ftype_of(r, in->i_mode));
	if (!ret) {
		in->i_links_count++;
		in->i_ctime = stamp_now(r, ino, T_C);
		ret = put_inode(r, ino, in);
		touch_dir(r, dir, 0);
	}
	if (!ret)
		fill_entry(r, ino, in, e);
	return ret;
}

void op_link(fuse_req_t req, fuse_ino_t fino, fuse_ino_t newparent, const char *newname)
{
	struct rfs *r = R(req);
	ext2_ino_t ino = to_ext(fino), dir = to_ext(newparent);
	struct fuse_entry_param e = { 0 };
	struct ext2_inode in;
	int ret;

	lock(r);
	ret = wr_begin(r);
	if (ret)
		goto out;
	bool retried = false;
	do
		ret = link_name(r, ino, dir, newname, &in, &e);
	while (wr_retry_enospc(r, ret, &retried));
	ret = wr_end(r, ret, false);
	if (!ret)
		hold_new(r, ino);
out:
	unlock(r);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		reply_entry_counted(req, r, ino, &e);
}
