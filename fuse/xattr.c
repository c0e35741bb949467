/*
 * fuse/xattr.c - extended attributes: set, get, list, remove, and the capability
 * a write drops.
 */
#include "rfs.h"
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

/* An xattr change moves the inode's ctime, as the kernel's. */
static int touch_ctime(struct rfs *r, ext2_ino_t ino)
{
	struct ext2_inode in;
	if (get_inode(r, ino, &in))
		return 0;   /* the change is made; a failing re-read leaves ctime */
	in.i_ctime = stamp_now(r, ino, T_C);
	return put_inode(r, ino, &in);
}

/* ---- xattrs ---- */

/* Namespaces ext3 stores; user.* only with user_xattr and the ACL names
 * only with acl, as the kernel's mount options decide. */
static bool xattr_name_ok(struct rfs *r, const char *name)
{
	if (!strncmp(name, "user.", 5))
		return r->cfg->user_xattr;
	if (acl_name(name))
		return r->cfg->acl;
	return !strncmp(name, "trusted.", 8) || !strncmp(name, "security.", 9);
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
		return e == EXT2_ET_MISSING_EA_FEATURE ? -EOPNOTSUPP : report_corruption(ino, "bad xattrs");
	}
	return 0;
}

/* libext2fs 1.47 writes an EA block with no entries when the last
 * attribute leaves it (removed, or moved into the inode); the kernel
 * releases the block.  Release it here too. */
int xattr_drop_empty_block(struct rfs *r, ext2_ino_t ino)
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
		return report_corruption(ino, "unreadable EA block");
	if (!empty)
		return 0;
	e = ext2fs_free_ext_attr(fs, ino, &u.large);
	if (!e)
		e = ext2fs_write_inode_full(fs, ino, (struct ext2_inode *)&u.large, isize);
	return e ? -errmap(e) : 0;
}

/*
 * Before the first attribute is stored on a file system without ext_attr:
 * turn the feature on in the operation's transaction, beside the attribute,
 * as the kernel's ext4_xattr_update_super_block does at the first xattr.  A
 * revision-0 superblock has no valid feature fields; it first becomes
 * revision 1 with the first inode and inode size revision 0 implies (the
 * kernel's ext4_update_dynamic_rev, libext2fs's ext2fs_update_dynamic_rev).
 * Feature words already set there would start to count only now, unchecked:
 * then EOPNOTSUPP, and e2fsck (which upgrades such a superblock) first.  A
 * failing operation's rollback restores the superblock.  Lock held.
 */
int xattr_feature_on(struct rfs *r)
{
	ext2_filsys fs = r->fs;
	struct ext2_super_block *sb = fs->super;

	if (ext2fs_has_feature_xattr(sb))
		return 0;
	if (sb->s_rev_level == EXT2_GOOD_OLD_REV) {
		if (sb->s_feature_compat || sb->s_feature_ro_compat || sb->s_feature_incompat) {
			fprintf(stderr, "recon-fuse: cannot store an extended attribute: this "
				"revision-0 file system has feature flags set (0x%x/0x%x/0x%x), "
				"which revision 0 does not define (e2fsck -f upgrades it to revision 1)\n",
				sb->s_feature_compat, sb->s_feature_ro_compat, sb->s_feature_incompat);
			return -EOPNOTSUPP;
		}
		fprintf(stderr, "recon-fuse: the first extended attribute on a revision-0 file "
			"system: its superblock becomes revision 1 with the ext_attr feature, as "
			"the kernel does\n");
		syslog(LOG_WARNING, "recon-fuse: superblock updated to revision 1 for the ext_attr feature");
		ext2fs_update_dynamic_rev(fs);
	}
	ext2fs_set_feature_xattr(sb);
	ext2fs_mark_super_dirty(fs);
	return 0;
}

/* The body of setxattr (lock held, in an operation). */
static int set_xattr(struct rfs *r, fuse_req_t req, ext2_ino_t ino, const char *name,
		     const char *value, size_t size, int flags)
{
	struct ext2_xattr_handle *h = NULL;
	void *old = NULL;
	size_t oldlen;
	int ret = flags_check_modify_ino(r, ino);   /* immutable, append-only */
	if (ret)
		return ret;
	if (acl_name(name)) {
		/* an empty ACL (the header alone) removes it, as the kernel's */
		bool none = size == sizeof(uint32_t);
		return acl_set(r, req, ino, name, none ? NULL : value, size);
	}
	if (!ext2fs_has_feature_xattr(r->fs->super) && (flags & XATTR_REPLACE))
		return -ENODATA;   /* nothing to replace, and the feature stays off */
	ret = xattr_feature_on(r);
	if (!ret)
		ret = xattr_open(r, ino, &h);
	if (ret)
		return ret;
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
		ret = xattr_drop_empty_block(r, ino);
	if (!ret)
		ret = touch_ctime(r, ino);
	return ret;
}

void op_setxattr(fuse_req_t req, fuse_ino_t fino, const char *name, const char *value,
			size_t size, int flags)
{
	struct rfs *r = R(req);
	ext2_ino_t ino = to_ext(fino);
	int ret;

	if (!xattr_name_ok(r, name) || xattr_name_empty(name)) {
		fuse_reply_err(req, xattr_name_empty(name) ? EINVAL : EOPNOTSUPP);
		return;
	}
	if (strlen(name) > 255 || size > 65536) {
		fuse_reply_err(req, strlen(name) > 255 ? ERANGE : E2BIG);
		return;
	}
	lock(r);
	ret = wr_begin(r);
	if (!ret) {
		/* an xattr block may need a block freed by a commit not yet made */
		bool retried = false;
		do
			ret = set_xattr(r, req, ino, name, value, size, flags);
		while (wr_retry_enospc(r, ret, &retried));
		ret = wr_end(r, ret, false);
	}
	unlock(r);
	fuse_reply_err(req, -ret);
}

/* True when the inode provably has no extended attributes: no EA block and
 * no in-inode EA header, or none on the whole file system because ext_attr
 * is off (mke2fs -O ^ext_attr, every revision-0 image: libext2fs reads no
 * attributes there and e2fsck clears an EA block it finds).  The kernel
 * asks getxattr("security.capability") before every write(2) (FUSE never
 * marks inodes S_NOSEC), so this answer must not parse xattrs. */
bool has_no_xattrs(struct rfs *r, ext2_ino_t ino)
{
	union inode_buf b;

	if (!ext2fs_has_feature_xattr(r->fs->super))
		return true;
	if (EXT2_INODE_SIZE(r->fs->super) > sizeof(b) || get_inode_buf(r, ino, &b))
		return false;
	return inode_buf_has_no_xattrs(r, &b);
}

bool inode_buf_has_no_xattrs(struct rfs *r, const union inode_buf *b)
{
	unsigned isize = EXT2_INODE_SIZE(r->fs->super);

	if (!ext2fs_has_feature_xattr(r->fs->super))
		return true;
	if (isize > sizeof(*b) || ext2fs_file_acl_block(r->fs, &b->small))
		return false;
	if (isize <= EXT2_GOOD_OLD_INODE_SIZE)
		return true;
	unsigned hdr = EXT2_GOOD_OLD_INODE_SIZE + b->big.i_extra_isize;
	if (hdr + sizeof(uint32_t) > isize)
		return true;
	uint32_t magic;
	memcpy(&magic, b->raw + hdr, sizeof(magic));
	return ext2fs_le32_to_cpu(magic) != EXT2_EXT_ATTR_MAGIC;
}

/* Remove one attribute of ino (-ENODATA when it has none of that name), and
 * the EA block with it when that leaves the block empty. */
static int xattr_remove(struct rfs *r, ext2_ino_t ino, const char *name)
{
	struct ext2_xattr_handle *h = NULL;
	void *val = NULL;
	size_t len;
	if (has_no_xattrs(r, ino))
		return -ENODATA;
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
	return ret ? ret : xattr_drop_empty_block(r, ino);
}

/* A write removes security.capability, as the kernel's file_remove_privs
 * does (it does not run for direct-I/O opens).  Most inodes have no
 * attributes at all, which has_no_xattrs answers without parsing. */
int drop_capability(struct rfs *r, ext2_ino_t ino)
{
	if (has_no_xattrs(r, ino))
		return 0;
	int ret = xattr_remove(r, ino, "security.capability");
	return ret == -ENODATA ? 0 : ret;
}

void op_getxattr(fuse_req_t req, fuse_ino_t fino, const char *name, size_t size)
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
	if (!xattr_name_ok(r, name)) {
		fuse_reply_err(req, EOPNOTSUPP);
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
		if (!ret && acl_name(name))
			acl_map_ids(r, val, len);
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
	struct rfs *r;
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
	if (!xattr_name_ok(x->r, name))
		return 0;   /* a namespace the mount options turn off */
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

void op_listxattr(fuse_req_t req, fuse_ino_t fino, size_t size)
{
	struct rfs *r = R(req);
	struct ext2_xattr_handle *h = NULL;
	struct xlist x = { .r = r };
	int ret;

	lock(r);
	ret = has_no_xattrs(r, to_ext(fino)) ? 0 : xattr_open(r, to_ext(fino), &h);
	if (!ret && h) {
		errcode_t e = ext2fs_xattrs_iterate(h, xlist_add, &x);
		ret = x.err ? x.err : e ? -errmap(e) : 0;
		ext2fs_xattrs_close(&h);
	}
	unlock(r);
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

void op_removexattr(fuse_req_t req, fuse_ino_t fino, const char *name)
{
	struct rfs *r = R(req);
	ext2_ino_t ino = to_ext(fino);
	int ret;

	if (xattr_name_empty(name)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (!xattr_name_ok(r, name)) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	lock(r);
	ret = wr_begin(r);
	if (ret)
		goto out;
	ret = flags_check_modify_ino(r, ino);   /* immutable, append-only */
	if (ret)
		goto end;
	if (acl_name(name)) {
		ret = acl_set(r, req, ino, name, NULL, 0);
		goto end;
	}
	ret = xattr_remove(r, ino, name);
	if (!ret)
		ret = touch_ctime(r, ino);
end:
	ret = wr_end(r, ret, false);
out:
	unlock(r);
	fuse_reply_err(req, -ret);
}
