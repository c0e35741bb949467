/*
 * fuse/super.c - the session: INIT negotiation, destroy, statfs, and the table of
 * low-level operations the rooms implement.
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
	 * dev_writev in channel.c: libfuse 3.14 cannot forward it). */
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
}

static void op_destroy(void *userdata)
{
	rfs_unmount(userdata);
}

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
	/* bsddf (the kernel's default) leaves out the metadata's blocks; minixdf counts all */
	st.f_blocks = ext2fs_blocks_count(sb) - (r->cfg->minixdf ? 0 : fs_overhead(r->fs));
	st.f_bfree = fr;
	st.f_bavail = fr > res ? fr - res : 0;
	st.f_files = sb->s_inodes_count;
	st.f_ffree = st.f_favail = sb->s_free_inodes_count;
	st.f_namemax = EXT2_NAME_LEN;
	/* no f_fsid: the FUSE protocol does not carry one (struct fuse_kstatfs), and
	 * the kernel reports 0 for every FUSE mount */
	unlock(r);
	fuse_reply_statfs(req, &st);
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
