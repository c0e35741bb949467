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
	struct ext2_inode in;
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
		ret = get_inode(r, ino, &in);
		if (!ret && in.i_links_count == 0 && !*open_slot(r, ino))
			ret = -ESTALE;
	} else {
		ret = dindex_lookup(r->di, to_ext(parent), name, strlen(name), &ino, &ft);
		if (!ret)
			ret = get_inode(r, ino, &in);
	}
	if (!ret)
		ret = lookup_get(r, ino);
	if (!ret)
		fill_entry(r, ino, &in, &e);
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
		ret = corrupt(ino, "symlink too long");
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
			ret = corrupt(ino, "fast symlink too long");
			goto out;
		}
		memcpy(buf, in.i_block, len);
	} else {
		blk64_t pblk;
		ret = bmap_block(r, ino, &in, 0, &pblk);
		if (!ret && !pblk)
			ret = corrupt(ino, "symlink without a block");
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
	if (old.i_links_count && !old.i_dtime && (old.i_mode & LINUX_S_IFMT)) {
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
	return ret == -ENOENT ? flags_check_dir_add(&din) : ret;
}

static void touch_dir(struct rfs *r, ext2_ino_t dir, int links_delta)
{
	struct ext2_inode din;
	if (get_inode(r, dir, &din))
		return;
	flags_sync_dir(r, &din);
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
		char *blockbuf = NULL;
		blk64_t pblk;
		in.i_size = fs->blocksize;
		in.i_links_count = 2;
		errcode_t err = ext2fs_new_dir_block(fs, ino, dir, &blockbuf);
		ret = err ? -errmap(err) : bmap_alloc(r, ino, &in, 0, 0, &pblk);
		if (!ret) {
			err = ext2fs_write_dir_block4(fs, pblk, blockbuf, 0, ino);
			ret = err ? -errmap(err) : 0;
		}
		ext2fs_free_mem(&blockbuf);
		if (ret)
			goto undo;
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
			bmap_init(r, &in);
			ret = bmap_alloc(r, ino, &in, 0, 0, &pblk);
			if (!ret)
				ret = blocks_io(r, ino, true, &pblk, 1, buf);
			free(buf);
			if (ret)
				goto undo;
		}
		in.i_size = len;
	}
	ret = put_inode(r, ino, &in);
	if (ret)
		goto undo;
	ret = acl_inherit_store(r, ino, &acls);
	/* as written: the ACLs may have taken an EA block */
	int reread = get_inode(r, ino, &in);
	if (ret || (ret = reread) != 0)
		goto undo;
	ret = dindex_add(r->di, dir, name, strlen(name), ino, ftype_of(r, mode));
	if (ret)
		goto undo;
	acl_new_free(&acls);
	touch_dir(r, dir, isdir ? 1 : 0);
	fill_entry(r, ino, &in, e);
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
	struct fuse_entry_param e;
	ext2_ino_t ino;
	int ret;

	lock(r);
	ret = wr_begin(r);
	if (!ret)
		ret = wr_end(r, make_node(r, req, to_ext(parent), name, mode, rdev, link, &e, &ino),
			     false);
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
	struct fuse_entry_param e;
	ext2_ino_t ino;
	int ret;

	lock(r);
	ret = wr_begin(r);
	if (!ret)
		ret = wr_end(r, make_node(r, req, to_ext(parent), name,
					  (mode & 07777) | LINUX_S_IFREG, 0, NULL, &e, &ino), false);
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
	/* may_delete of the source (and of a target it replaces), may_create
	 * in the destination: immutable and append-only as the VFS checks */
	if (dino != sino) {
		if ((ret = flags_check_dir_remove_ino(r, sdir)) != 0 ||
		    (ret = flags_check_modify(&sin)) != 0)
			return ret;
		if (dino && ((ret = flags_check_dir_remove(&pin)) != 0 ||
			     (ret = flags_check_modify(&din)) != 0))
			return ret;
		if (!dino && (ret = flags_check_dir_add(&pin)) != 0)
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

void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
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

void op_link(fuse_req_t req, fuse_ino_t fino, fuse_ino_t newparent, const char *newname)
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
	if (!ret)
		ret = flags_check_modify(&in);   /* may_linkat */
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
	if (!ret)
		hold_new(r, ino);
out:
	unlock(r);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		reply_entry_counted(req, r, ino, &e);
}
