/*
 * fuse/flags.c - inode flags (chattr) as the kernel's ext3 keeps and honours
 * them, and the ioctls lsattr, chattr and xfs_io use.
 *
 * The kernel's FUSE client does not mirror an inode's flags into its own
 * inode (no S_IMMUTABLE, S_APPEND, S_SYNC, S_NOATIME there), so the checks
 * the VFS makes for a local file system are made here, at the request:
 * immutable (no change of any kind, no new or removed names in such a
 * directory), append-only (writes at the end only, O_APPEND required to open
 * for writing, no truncate, no removal or rename), no-atime, sync and dirsync
 * (the operation commits, data included, before it replies).  The other
 * flags ext3 defines are stored and shown, as the kernel's driver does.
 *
 * FS_IOC_GETFLAGS/SETFLAGS and FS_IOC_FSGETXATTR/FSSETXATTR reach the daemon
 * from the kernel's fileattr code (it opens the file, asks for the flags,
 * checks ownership and CAP_LINUX_IMMUTABLE itself); FS_IOC_GETVERSION and
 * SETVERSION arrive as plain restricted ioctls.  Which flags are refused
 * and how follows what Linux 6.18's ext4 driver answers on an ext3 image
 * (tests/integration/posix_diff.py, section flags).
 */
#include "rfs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

/* What FS_IOC_GETFLAGS shows and what SETFLAGS may change (the kernel's
 * EXT4_FL_USER_VISIBLE and EXT4_FL_USER_MODIFIABLE). */
#define FL_VISIBLE 0x725BDFFFu
#define FL_MODIFIABLE 0x624BC0FFu
#define FL_DAX 0x02000000u          /* EXT4_DAX_FL */
/* Flags a new inode takes from its directory (EXT4_FL_INHERITED). */
#define FL_INHERITED (EXT2_SECRM_FL | EXT2_UNRM_FL | EXT2_COMPR_FL | EXT2_SYNC_FL | \
		      EXT2_NODUMP_FL | EXT2_NOATIME_FL | EXT2_NOCOMPR_FL | EXT3_JOURNAL_DATA_FL | \
		      EXT2_NOTAIL_FL | EXT2_DIRSYNC_FL | EXT4_PROJINHERIT_FL | EXT4_CASEFOLD_FL | \
		      FL_DAX)
#define FL_DIR_ONLY (EXT2_DIRSYNC_FL | EXT2_TOPDIR_FL | EXT4_CASEFOLD_FL | EXT4_PROJINHERIT_FL)

#define CAP_FOWNER_BIT 3
#define CAP_LINUX_IMMUTABLE_BIT 9
#define CAP_SYS_RESOURCE_BIT 24

/* The flags that make sense for an inode of this mode (ext4_mask_flags). */
static uint32_t mask_for_mode(unsigned mode, uint32_t fl)
{
	if (LINUX_S_ISDIR(mode))
		return fl;
	if (LINUX_S_ISREG(mode))
		return fl & ~FL_DIR_ONLY;
	return fl & (EXT2_NODUMP_FL | EXT2_NOATIME_FL);
}

uint32_t flags_inherit(const struct ext2_inode *dir, unsigned mode)
{
	return mask_for_mode(mode, dir->i_flags & FL_INHERITED);
}

int flags_check_open(const struct ext2_inode *in, int oflags)
{
	bool write = (oflags & O_ACCMODE) != O_RDONLY || (oflags & O_TRUNC);

	if ((in->i_flags & EXT2_IMMUTABLE_FL) && write)
		return -EPERM;
	if ((in->i_flags & EXT2_APPEND_FL) &&
	    (((oflags & O_ACCMODE) != O_RDONLY && !(oflags & O_APPEND)) || (oflags & O_TRUNC)))
		return -EPERM;
	return 0;
}

/* notify_change and ext4_setattr: nothing on an immutable inode; on an
 * append-only one no mode, owner, explicit times or size (touching the
 * times to now is allowed). */
int flags_check_setattr(const struct ext2_inode *in, int to_set)
{
	if (in->i_flags & EXT2_IMMUTABLE_FL)
		return -EPERM;
	if (!(in->i_flags & EXT2_APPEND_FL))
		return 0;
	if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID | FUSE_SET_ATTR_SIZE))
		return -EPERM;
	if (((to_set & FUSE_SET_ATTR_ATIME) && !(to_set & FUSE_SET_ATTR_ATIME_NOW)) ||
	    ((to_set & FUSE_SET_ATTR_MTIME) && !(to_set & FUSE_SET_ATTR_MTIME_NOW)))
		return -EPERM;
	return 0;
}

/* A write through a descriptor opened before the flag was set: none on an
 * immutable file, only at the end of an append-only one. */
int flags_check_write(const struct ext2_inode *in, uint64_t off)
{
	if (in->i_flags & EXT2_IMMUTABLE_FL)
		return -EPERM;
	if ((in->i_flags & EXT2_APPEND_FL) && off != EXT2_I_SIZE(in))
		return -EPERM;
	return 0;
}

/* vfs_fallocate: nothing on an immutable file; only plain allocation (mode
 * 0 or KEEP_SIZE) on an append-only one. */
int flags_check_fallocate(const struct ext2_inode *in, int mode)
{
	if (in->i_flags & EXT2_IMMUTABLE_FL)
		return -EPERM;
	if ((in->i_flags & EXT2_APPEND_FL) && (mode & ~FALLOC_FL_KEEP_SIZE))
		return -EPERM;
	return 0;
}

/* The inode itself is changed or removed: its xattrs and ACLs, a link to
 * it, an unlink or rename of it (may_delete, may_linkat, xattr_permission). */
int flags_check_modify(const struct ext2_inode *in)
{
	return (in->i_flags & (EXT2_IMMUTABLE_FL | EXT2_APPEND_FL)) ? -EPERM : 0;
}

/* The same for an xattr change of ino, which commits at once when ino has
 * the sync flag. */
int flags_check_modify_ino(struct rfs *r, ext2_ino_t ino)
{
	struct ext2_inode in;
	int ret = get_inode(r, ino, &in);
	if (!ret)
		ret = flags_check_modify(&in);
	if (!ret)
		flags_sync_inode(r, &in);
	return ret;
}

/* A name added to a directory: not in an immutable one. */
int flags_check_dir_add(const struct ext2_inode *dir)
{
	return (dir->i_flags & EXT2_IMMUTABLE_FL) ? -EPERM : 0;
}

/* A name removed from a directory: not from an immutable or append-only one. */
int flags_check_dir_remove(const struct ext2_inode *dir)
{
	return (dir->i_flags & (EXT2_IMMUTABLE_FL | EXT2_APPEND_FL)) ? -EPERM : 0;
}

int flags_check_dir_remove_ino(struct rfs *r, ext2_ino_t dir)
{
	struct ext2_inode din;
	int ret = get_inode(r, dir, &din);
	return ret ? ret : flags_check_dir_remove(&din);
}

bool flags_noatime(const struct ext2_inode *in)
{
	return in->i_flags & EXT2_NOATIME_FL;
}

/* A change to a file with the sync flag (or on a sync mount): the
 * operation commits before it replies. */
void flags_sync_inode(struct rfs *r, const struct ext2_inode *in)
{
	if ((in->i_flags & EXT2_SYNC_FL) || r->cfg->sync)
		r->sync_op = true;
}

/* A change to a directory with the dirsync or sync flag (or on a sync or
 * dirsync mount). */
void flags_sync_dir(struct rfs *r, const struct ext2_inode *dir)
{
	if ((dir->i_flags & (EXT2_SYNC_FL | EXT2_DIRSYNC_FL)) || r->cfg->sync || r->cfg->dirsync)
		r->sync_op = true;
}

/*
 * Whether the caller holds a capability.  The request carries the caller's
 * thread id; the caller is blocked in the system call until we answer, so
 * /proc/TID/status is the caller's own, and its CapEff is what the
 * kernel's capable() would test (not uid 0: a root process may have
 * dropped the capability, and a capability is granted without uid 0).
 * Without a readable status (a caller in another pid namespace: pid 0),
 * only uid 0 counts.
 */
static bool caller_capable(fuse_req_t req, int cap)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	char path[64], line[256];
	bool found = false, has = false;

	if (c->pid > 0) {
		snprintf(path, sizeof(path), "/proc/%d/status", (int)c->pid);
		FILE *f = fopen(path, "re");
		if (f) {
			while (fgets(line, sizeof(line), f))
				if (!strncmp(line, "CapEff:", 7)) {
					unsigned long long v = strtoull(line + 7, NULL, 16);
					found = true;
					has = (v >> cap) & 1;
					break;
				}
			fclose(f);
		}
	}
	return found ? has : c->uid == 0;
}

static bool owner_or_capable(fuse_req_t req, const struct ext2_inode *in)
{
	return fuse_req_ctx(req)->uid == map_uid(R(req), inode_uid(*in)) ||
	       caller_capable(req, CAP_FOWNER_BIT);
}

/* FS_IOC_SETFLAGS as ext4_fileattr_set answers it on an ext3 image. */
static int set_flags(struct rfs *r, fuse_req_t req, ext2_ino_t ino, uint32_t fl)
{
	struct ext2_inode in;
	int ret = get_inode(r, ino, &in);

	if (ret)
		return ret;
	if (!owner_or_capable(req, &in))
		return -EPERM;
	if (fl & ~FL_VISIBLE)
		return -EOPNOTSUPP;
	fl &= FL_MODIFIABLE;
	if (mask_for_mode(in.i_mode, fl) != fl)
		return -EOPNOTSUPP;
	uint32_t old = in.i_flags;
	if (((fl ^ old) & (EXT2_IMMUTABLE_FL | EXT2_APPEND_FL)) &&
	    !caller_capable(req, CAP_LINUX_IMMUTABLE_BIT))
		return -EPERM;
	if ((fl ^ old) & EXT3_JOURNAL_DATA_FL)
		/* per-file data journaling: not implemented (data is always
		 * written before the metadata that points to it) */
		return caller_capable(req, CAP_SYS_RESOURCE_BIT) ? -EOPNOTSUPP : -EPERM;
	if ((fl ^ old) & EXT4_CASEFOLD_FL)
		return -EOPNOTSUPP;
	if ((fl ^ old) & EXT4_EXTENTS_FL)
		return -EINVAL;   /* no extents on ext3: ext4_ext_migrate refuses */
	in.i_flags = (old & ~FL_MODIFIABLE) | fl;
	in.i_ctime = stamp_now(r, ino, T_C);
	flags_sync_inode(r, &in);
	attr_changed(r, ino);   /* ctime: no reply carries it */
	return put_inode(r, ino, &in);
}

static const struct {
	uint32_t fl, xfl;
} xflag_map[] = {
	{ EXT2_SYNC_FL, FS_XFLAG_SYNC },
	{ EXT2_IMMUTABLE_FL, FS_XFLAG_IMMUTABLE },
	{ EXT2_APPEND_FL, FS_XFLAG_APPEND },
	{ EXT2_NODUMP_FL, FS_XFLAG_NODUMP },
	{ EXT2_NOATIME_FL, FS_XFLAG_NOATIME },
	{ FL_DAX, FS_XFLAG_DAX },
	{ EXT4_PROJINHERIT_FL, FS_XFLAG_PROJINHERIT },
};
#define NXFLAGS (sizeof(xflag_map) / sizeof(xflag_map[0]))

static uint32_t to_xflags(uint32_t fl)
{
	uint32_t x = 0;
	for (size_t i = 0; i < NXFLAGS; i++)
		if (fl & xflag_map[i].fl)
			x |= xflag_map[i].xfl;
	return x;
}

/* FSSETXATTR: the flags xflags stand for replace those, the rest stay (the
 * VFS merges them the same way for a local file system). */
static uint32_t from_xflags(uint32_t old, uint32_t x)
{
	for (size_t i = 0; i < NXFLAGS; i++)
		old = (x & xflag_map[i].xfl) ? old | xflag_map[i].fl : old & ~xflag_map[i].fl;
	return old;
}

/* The setting ioctls, in the caller's transaction. */
static int ioctl_set(struct rfs *r, fuse_req_t req, ext2_ino_t ino, unsigned cmd, const void *buf)
{
	struct ext2_inode in;
	struct fsxattr fa;
	uint32_t v;
	int ret = get_inode(r, ino, &in);

	if (ret)
		return ret;
	if (cmd == FS_IOC_FSSETXATTR) {
		memcpy(&fa, buf, sizeof(fa));
		/* no projects without the project feature (ext4_ioctl_setproject);
		 * extent size hints are not kept, as ext4 does not keep them */
		if (fa.fsx_projid)
			return -EOPNOTSUPP;
		return set_flags(r, req, ino, from_xflags(in.i_flags & FL_VISIBLE, fa.fsx_xflags));
	}
	memcpy(&v, buf, sizeof(v));
	if (cmd == FS_IOC_SETFLAGS || cmd == FS_IOC32_SETFLAGS)
		return set_flags(r, req, ino, v);
	if (!owner_or_capable(req, &in))
		return -EPERM;
	/* the generation seeds the inode's checksum: ext4 refuses to change it */
	if (ext2fs_has_feature_metadata_csum(r->fs->super))
		return -ENOTTY;
	in.i_generation = v;
	in.i_ctime = stamp_now(r, ino, T_C);
	flags_sync_inode(r, &in);
	attr_changed(r, ino);
	return put_inode(r, ino, &in);
}

void op_ioctl(fuse_req_t req, fuse_ino_t fino, unsigned int cmd, void *arg,
	      struct fuse_file_info *fi, unsigned flags, const void *in_buf,
	      size_t in_bufsz, size_t out_bufsz)
{
	struct rfs *r = R(req);
	ext2_ino_t ino = to_ext(fino);
	struct ext2_inode in;
	uint32_t v = 0;
	int ret;

	(void)arg;
	(void)fi;
	(void)flags;
	switch (cmd) {
	case FS_IOC_GETFLAGS:
	case FS_IOC32_GETFLAGS:
	case FS_IOC_GETVERSION:
	case FS_IOC32_GETVERSION:
		if (out_bufsz < sizeof(v)) {
			fuse_reply_err(req, EINVAL);
			return;
		}
		lock(r);
		ret = get_inode(r, ino, &in);
		unlock(r);
		if (ret) {
			fuse_reply_err(req, -ret);
			return;
		}
		v = (cmd == FS_IOC_GETFLAGS || cmd == FS_IOC32_GETFLAGS) ?
			    in.i_flags & FL_VISIBLE : in.i_generation;
		fuse_reply_ioctl(req, 0, &v, sizeof(v));
		return;
	case FS_IOC_FSGETXATTR: {
		struct fsxattr fa;
		if (out_bufsz < sizeof(fa)) {
			fuse_reply_err(req, EINVAL);
			return;
		}
		lock(r);
		ret = get_inode(r, ino, &in);
		unlock(r);
		if (ret) {
			fuse_reply_err(req, -ret);
			return;
		}
		memset(&fa, 0, sizeof(fa));
		fa.fsx_xflags = to_xflags(in.i_flags & FL_VISIBLE);
		fuse_reply_ioctl(req, 0, &fa, sizeof(fa));
		return;
	}
	case FS_IOC_SETFLAGS:
	case FS_IOC32_SETFLAGS:
	case FS_IOC_SETVERSION:
	case FS_IOC32_SETVERSION:
	case FS_IOC_FSSETXATTR:
		if (in_bufsz < (cmd == FS_IOC_FSSETXATTR ? sizeof(struct fsxattr) : sizeof(v))) {
			fuse_reply_err(req, EINVAL);
			return;
		}
		lock(r);
		ret = wr_begin(r);
		if (!ret)
			ret = wr_end(r, ioctl_set(r, req, ino, cmd, in_buf), false);
		unlock(r);
		attr_notify(r);
		if (ret)
			fuse_reply_err(req, -ret);
		else
			fuse_reply_ioctl(req, 0, NULL, 0);
		return;
	default:
		fuse_reply_err(req, ENOTTY);
	}
}
