/*
 * fuse/session.c - the FUSE session: INIT negotiation, destroy, and the
 * table of low-level operations the rooms implement.
 */
#include "rfs.h"

#include <stdio.h>

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct rfs *r = userdata;

	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	/* READDIRPLUS for every chunk of a directory, not only the first (the
	 * kernel's readdirplus_auto, libfuse's default): a walk that stats what
	 * it lists (find, ls -l, du, rm -rf) otherwise pays a LOOKUP for each
	 * entry past the first chunk, 0.37 per entry on find -printf %s. */
	conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	/* Every change reaches the disk through this kernel mount (rejected
	 * commits invalidate explicitly), so the kernel need not re-check size
	 * and mtime by GETATTR on reads to notice changes made elsewhere. */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	/* FUSE_HANDLE_KILLPRIV_V2 is asked for in the INIT reply itself (see
	 * dev_writev in transport.c: libfuse 3.14 cannot forward it). */
	/* No writeback cache: with it the kernel acknowledges write(2) from its
	 * page cache and keeps i_size itself, so ENOSPC and EFBIG would surface
	 * at fsync or close instead of at the write, as ext3 reports them
	 * (tests/integration/enospc.sh and ops.sh); on 1 KiB blocks it would
	 * also fill holes that share a page with data. */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	/* file handles (name_to_handle_at, NFS export) stay valid across
	 * remounts: node id and generation are the inode's own, and the
	 * kernel may look up "." and ".." (op_lookup) */
	if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
		conn->want |= FUSE_CAP_EXPORT_SUPPORT;
	/* POSIX ACLs (acl, the default): the kernel checks them in every
	 * permission check (asking for system.posix_acl_access and caching
	 * it) and passes the umask for us to apply, as a default ACL replaces
	 * it (acl.c).  With noacl the kernel applies the umask itself. */
	if (r->cfg->acl) {
		if ((conn->capable & FUSE_CAP_POSIX_ACL) && (conn->capable & FUSE_CAP_DONT_MASK))
			conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
		else {
			/* stored but not enforced would be a lie: refuse them */
			r->cfg->acl = false;
			fprintf(stderr, "recon-fuse: the kernel's FUSE offers no POSIX ACL support: "
				"mounted as with noacl\n");
		}
	}
	/* 128-byte inodes store whole seconds; 256-byte ones nanoseconds. */
	conn->time_gran = (r->fs && EXT2_INODE_SIZE(r->fs->super) > EXT2_GOOD_OLD_INODE_SIZE) ?
			  1 : 1000000000;
	owner_map_init(r);
	conn->max_write = 1 << 20;
	conn->max_readahead = 1 << 20;
	conn->max_background = MAX_BACKGROUND;
}

static void op_destroy(void *userdata)
{
	rfs_unmount(userdata);
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
	.ioctl = op_ioctl,
};
