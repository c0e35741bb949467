/*
 * fuse/lifecycle.c - the write lifecycle of an operation: a savepoint at its start,
 * rollback when it fails half-way, the commit boundary at its end, and what
 * happens when a commit is rejected (read-only; notify.c invalidates the
 * kernel's caches).
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

/* ---- what fsync may promise ----
 * Every inode write (libext2fs's write_inode hook: ours, libext2fs's own in
 * punch, link, ...) records the transaction it went into.  A directory whose
 * entries change has its times changed by the same operation, so its inode
 * is written too.  After a failure, an inode written in a transaction past
 * the last durable one lost changes: its fsync must fail. */

static size_t chg_slot(ext2_ino_t ino, size_t cap)
{
	return (size_t)(((uint64_t)ino * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
}

static struct ino_change *chg_find(struct rfs *r, ext2_ino_t ino)
{
	if (!r->chg_cap)
		return NULL;
	for (size_t i = chg_slot(ino, r->chg_cap);; i = (i + 1) & (r->chg_cap - 1)) {
		if (r->chg[i].ino == ino)
			return &r->chg[i];
		if (r->chg[i].ino == 0)
			return NULL;
	}
}

static void chg_put(struct ino_change *tab, size_t cap, const struct ino_change *e)
{
	size_t i = chg_slot(e->ino, cap);
	while (tab[i].ino)
		i = (i + 1) & (cap - 1);
	tab[i] = *e;
}

/* Rebuild without the entries that are durable (nothing to report for
 * them), at a size where the rest fill at most a quarter. */
static bool chg_rebuild(struct rfs *r, uint64_t durable)
{
	size_t live = 0, cap = 256;
	for (size_t i = 0; i < r->chg_cap; i++)
		live += r->chg[i].ino && (r->chg[i].tid > durable || r->chg[i].reported);
	while (live * 4 > cap)
		cap *= 2;
	struct ino_change *tab = calloc(cap, sizeof(*tab));
	if (!tab)
		return false;
	for (size_t i = 0; i < r->chg_cap; i++)
		if (r->chg[i].ino && (r->chg[i].tid > durable || r->chg[i].reported))
			chg_put(tab, cap, &r->chg[i]);
	free(r->chg);
	r->chg = tab;
	r->chg_cap = cap;
	r->chg_count = live;
	return true;
}

static errcode_t note_inode_write(ext2_filsys fs, ext2_ino_t ino, struct ext2_inode *inode)
{
	struct rfs *r = fs->priv_data;
	uint64_t open, durable;

	(void)inode;
	rio_txn_ids(fs->io, &open, &durable);
	struct ino_change *e = chg_find(r, ino);
	if (e) {
		e->tid = open;
	} else if ((r->chg_count + 1) * 2 > r->chg_cap && !chg_rebuild(r, durable)) {
		r->chg_lost = true;
	} else {
		chg_put(r->chg, r->chg_cap, &(struct ino_change){ .ino = ino, .tid = open });
		r->chg_count++;
	}
	return EXT2_ET_CALLBACK_NOTHANDLED;   /* libext2fs writes it */
}

/* After a failure: 0 when every change of ino is durable; else EIO the first
 * time (as Linux reports lost writeback), EROFS from then on. */
static int lost_changes(struct rfs *r, ext2_ino_t ino)
{
	uint64_t open, durable;
	rio_txn_ids(r->fs->io, &open, &durable);
	struct ino_change *e = chg_find(r, ino);
	if (!r->chg_lost && (!e || e->tid <= durable))
		return 0;
	if (!e || e->reported)
		return -EROFS;
	e->reported = true;
	return -EIO;
}

int rfs_txn_hooks(struct rfs *r)
{
	r->fs->priv_data = r;
	r->fs->write_inode = note_inode_write;
	r->known = calloc(r->fs->super->s_inodes_count / 8 + 1, 1);
	return r->known ? 0 : -ENOMEM;
}

/* ---- rollback of a failed operation ----
 * io keeps the undo log (io/savepoint.c says why: it owns libext2fs's
 * alloc-stats callback and sees every allocation); here, what io does not
 * hold: the superblock, the inode cache, the directory indexes. */

/* Start of a mutating operation (and again after a commit inside one). */
void op_savepoint(struct rfs *r)
{
	r->sp_active = false;
	if (!r->attached || rio_txn_savepoint(r->fs->io))
		return;
	r->sb_saved = *r->fs->super;
	dindex_mark(r->di);
	r->sp_active = true;
}

/*
 * The operation failed: io drops its metadata writes since the savepoint
 * and undoes its allocation changes in libext2fs's bitmaps and group
 * counters; here the rest of libext2fs's in-memory copies follow (the
 * superblock as it was; the inode cache and the changed directories'
 * indexes forgotten).  0, or -EROFS when it could not be restored exactly.
 */
static int op_rollback(struct rfs *r)
{
	ext2_filsys fs = r->fs;

	if (!r->sp_active)
		return 0;
	r->sp_active = false;
	if (rio_txn_failed(fs->io))
		return -EROFS;
	errcode_t e = rio_txn_rollback(fs->io);
	*fs->super = r->sb_saved;
	ext2fs_mark_super_dirty(fs);
	(void)ext2fs_flush_icache(fs);
	dindex_forget_changed(r->di);
	orphan_hints_clear(r);
	if (e) {
		/* io's EROFS: it ran out of memory while tracking the operation */
		fprintf(stderr, "recon-fuse: cannot roll back a failed operation (%s); the file "
			"system is now read-only\n", e == EROFS ? "out of memory" : error_message(e));
		return -EROFS;
	}
	return 0;
}

/* ---- after a rejected commit ---- */

/* Does the re-read superblock describe the file system we mounted?  Data
 * written over it (a bitmap that did not mark it in use) must not become
 * the geometry everything else is read through. */
static bool same_fs(const struct ext2_super_block *a, struct ext2_super_block *b)
{
#define SAME(f) (a->f == b->f)
	/* what the discarded work may have changed: the first xattr turns
	 * ext_attr on, on a revision-0 image after upgrading it to revision 1
	 * (whose first_ino and inode_size were implied before) */
	bool upgraded = a->s_rev_level == EXT2_DYNAMIC_REV && b->s_rev_level == EXT2_GOOD_OLD_REV;
	bool same_rev = upgraded ? a->s_first_ino == EXT2_GOOD_OLD_FIRST_INO &&
					   a->s_inode_size == EXT2_GOOD_OLD_INODE_SIZE :
				   SAME(s_rev_level) && SAME(s_first_ino) && SAME(s_inode_size);
	return SAME(s_magic) && SAME(s_inodes_count) && SAME(s_blocks_count) &&
	       SAME(s_blocks_count_hi) && SAME(s_r_blocks_count) && SAME(s_first_data_block) &&
	       SAME(s_log_block_size) && SAME(s_log_cluster_size) && SAME(s_blocks_per_group) &&
	       SAME(s_clusters_per_group) && SAME(s_inodes_per_group) && same_rev &&
	       !((a->s_feature_compat ^ b->s_feature_compat) & ~EXT2_FEATURE_COMPAT_EXT_ATTR) &&
	       SAME(s_feature_ro_compat) && SAME(s_reserved_gdt_blocks) && SAME(s_journal_inum) &&
	       SAME(s_first_meta_bg) && SAME(s_desc_size) &&
	       !((a->s_feature_incompat ^ b->s_feature_incompat) & ~EXT3_FEATURE_INCOMPAT_RECOVER) &&
	       !memcmp(a->s_uuid, b->s_uuid, sizeof(a->s_uuid)) &&
	       ext2fs_free_blocks_count(b) <= ext2fs_blocks_count(b) &&
	       b->s_free_inodes_count <= b->s_inodes_count &&
	       (b->s_last_orphan == 0 || (b->s_last_orphan >= EXT2_FIRST_INO(b) &&
					  b->s_last_orphan <= b->s_inodes_count));
#undef SAME
}

/* The superblock as the disk has it (libext2fs's copy held discarded
 * counts), if the disk's still describes this file system. */
static void reread_super(struct rfs *r)
{
	ext2_filsys fs = r->fs;
	size_t bs = fs->blocksize;
	char *buf = malloc(bs);
	struct ext2_super_block disk;

	if (!buf)
		return;
	if (!io_channel_read_blk64(fs->io, SUPERBLOCK_OFFSET / bs, 1, buf)) {
		memcpy(&disk, buf + SUPERBLOCK_OFFSET % bs, SUPERBLOCK_SIZE);
		if (same_fs(fs->super, &disk))
			*fs->super = disk;
		else
			fprintf(stderr, "recon-fuse: the superblock on disk no longer describes this "
				"file system (overwritten?); keeping the mounted one; run e2fsck\n");
	}
	free(buf);
}

/* A commit was rejected (or the device failed, or a rollback could not be
 * exact): read-only from now on, and nothing of the discarded state stays
 * visible, in our caches or the kernel's.  Once. */
static void went_readonly(struct rfs *r)
{
	r->ro = true;
	r->lost = true;
	if (r->invalidated)
		return;
	r->invalidated = true;
	const char *v = rio_txn_last_violation(r->fs->io);
	fprintf(stderr, "recon-fuse: a commit was rejected or failed; the file system is now "
		"read-only%s%s\n", v ? ":\n" : "", v ? v : "");
	syslog(LOG_ERR, "recon-fuse: a commit was rejected or failed; read-only from now on");
	(void)ext2fs_flush_icache(r->fs);
	reread_super(r);
	if (r->cfg->io.on_violation == RIO_ONV_STOP) {
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

int wr_begin(struct rfs *r)
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
	r->sync_op = false;
	return 0;
}

/* End of a modifying operation: a failed one leaves nothing behind; then
 * the transaction boundary. */
int wr_end(struct rfs *r, int ret, bool force)
{
	if (r->ro) {
		/* it went read-only during the operation: nothing more commits */
		r->sp_active = false;
		return -EROFS;
	}
	if (ret && r->sp_active && op_rollback(r)) {
		went_readonly(r);
		/* an I/O error (or a data write the guard refused) is this
		 * operation's own failure; EROFS is for the ones after it */
		return ret == -EIO ? -EIO : -EROFS;
	}
	r->sp_active = false;
	r->nstamp = 0;
	/* a sync or dirsync change: durable, data first, before the reply */
	if (r->sync_op && !ret) {
		errcode_t de = rio_flush_device(r->fs->io);
		if (de)
			ret = -errmap(de);
		force = true;
	}
	r->sync_op = false;
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

/*
 * An allocation failed while blocks freed by transactions not yet durable
 * are held back (they stay allocated until the commit that frees them is on
 * disk).  As ext3 commits the running transaction and retries: undo the
 * operation, commit what came before it (the frees become allocatable), and
 * start it again, once.  True when the caller should run the operation again
 * (a new savepoint is set); false leaves ret for wr_end.
 */
bool wr_retry_enospc(struct rfs *r, int ret, bool *retried)
{
	if (ret != -ENOSPC || *retried || !r->attached || r->ro)
		return false;
	*retried = true;
	/* undone first: the frees the operation made itself do not count */
	if (r->sp_active && op_rollback(r)) {
		went_readonly(r);
		return false;
	}
	r->sp_active = false;
	r->nstamp = 0;
	/* what the reaper has still to free counts as free space too */
	reap_all(r);
	if (r->ro)
		return false;
	if (!rio_txn_pending_frees(r->fs->io))
		return false;
	errcode_t e = rio_txn_boundary(r->fs, true);
	if (e == EROFS || rio_txn_failed(r->fs->io)) {
		went_readonly(r);
		return false;
	}
	if (e)
		return false;
	dindex_clear_added(r->di);
	return wr_begin(r) == 0;
}

/* Undo what the operation did since its savepoint (none left after
 * wr_retry_enospc undid it) and set a new one, without a commit: a write
 * trying shorter lengths.  0; -EROFS (the undo was not exact: read-only
 * now); -ENOSPC when no savepoint could be set (nothing could be undone). */
int wr_undo(struct rfs *r)
{
	if (r->sp_active && op_rollback(r)) {
		went_readonly(r);
		return -EROFS;
	}
	if (r->ro)
		return -EROFS;
	r->nstamp = 0;
	op_savepoint(r);
	return r->sp_active ? 0 : -ENOSPC;
}

/* Before an operation that will allocate `need` blocks changes anything:
 * when only blocks still waiting for their commit would make them available,
 * commit first (nothing of the operation is in the transaction yet), so the
 * allocation does not fail half-way.  0 or -errno. */
int wr_room_for(struct rfs *r, blk64_t need)
{
	if (!r->attached || !need)
		return 0;
	uint64_t pending = rio_txn_pending_frees(r->fs->io);
	blk64_t fr = ext2fs_free_blocks_count(r->fs->super);
	if (!pending || (fr > pending && fr - pending >= need))
		return 0;
	errcode_t e = commit_midway(r);
	if (e == EROFS || rio_txn_failed(r->fs->io)) {
		went_readonly(r);
		return -EROFS;
	}
	if (e)
		return -errmap(e);
	dindex_clear_added(r->di);
	return 0;
}

/* fsync and fsyncdir served on the caller's thread (fsyncwait.c answers the
 * others later): commit (data first, then the metadata); after a failure
 * 0 only if every change of ino reached the disk. */
int rfs_fsync(struct rfs *r, ext2_ino_t ino)
{
	if (!r->attached)
		return 0;   /* mounted read-only: nothing was ever written */
	/* everything is made durable first; then a failed data write since the
	 * last fsync of ino is reported, once */
	bool data_err = data_error_take(r, ino);
	int ret;
	if (!r->ro) {
		errcode_t e = rio_flush_device(r->fs->io);
		ret = wr_end(r, e ? -errmap(e) : 0, true);
		if (!r->ro)
			return ret ? ret : data_err ? -EIO : 0;
	}
	ret = lost_changes(r, ino);
	return ret ? ret : data_err ? -EIO : 0;
}

/* ---- fsync answered later (fsyncwait.c holds the waiters) ---- */

bool rfs_fsync_begin(struct rfs *r, ext2_ino_t ino, uint64_t *tid, bool *data_err, bool *later)
{
	uint64_t open, durable;

	if (!r->fs || !r->attached || r->ro)
		return false;
	/* a failure found here is rfs_fsync's to report, as before */
	if (rio_txn_commit_begin(r->fs->io, tid))
		return false;
	rio_txn_ids(r->fs->io, &open, &durable);
	*later = *tid >= open;   /* the open transaction: not handed over yet */
	*data_err = data_error_take(r, ino);
	return true;
}

int rfs_fsync_progress(struct rfs *r, bool final, uint64_t *durable)
{
	uint64_t open;
	int ret = 0;

	*durable = 0;
	if (!r->fs)
		return -EIO;
	if (!r->ro) {
		errcode_t e = final ? rio_txn_boundary(r->fs, true) : rio_txn_settle(r->fs->io);
		if (e == EROFS || rio_txn_failed(r->fs->io))
			went_readonly(r);
		else if (e)
			ret = -errmap(e);
		else if (final)
			dindex_clear_added(r->di);
	}
	rio_txn_ids(r->fs->io, &open, durable);
	return r->ro ? -EROFS : ret;
}

bool rfs_fsync_commit(struct rfs *r)
{
	uint64_t tid;

	if (!r->fs || r->ro)
		return false;
	errcode_t e = rio_txn_commit_begin(r->fs->io, &tid);
	if (e && (e == EROFS || rio_txn_failed(r->fs->io)))
		went_readonly(r);
	return !e;
}

int rfs_fsync_verdict(struct rfs *r, ext2_ino_t ino, bool data_err, int failure)
{
	if (!r->fs)
		return -EIO;
	if (!r->ro)
		return failure;
	int ret = lost_changes(r, ino);
	return ret ? ret : data_err ? -EIO : 0;
}

void rfs_tick(struct rfs *r)
{
	lock(r);
	if (r->fs && !r->ro && !wr_begin(r))
		(void)wr_end(r, 0, false);
	unlock(r);
}

bool name_ok(const char *name, int *err)
{
	size_t n = strlen(name);
	if (n > EXT2_NAME_LEN) {
		*err = -ENAMETOOLONG;
		return false;
	}
	return true;
}

/* Who may use the reserved blocks, as the kernel's ext3 decides: root, the
 * resuid user, a member of the resgid group (unless that is group 0); -o
 * resuid=/resgid= override the superblock's s_def_resuid/s_def_resgid. */
static bool may_use_reserve(struct rfs *r, fuse_req_t req)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	const struct ext2_super_block *sb = r->fs->super;
	uint32_t resuid = r->cfg->resuid >= 0 ? (uint32_t)r->cfg->resuid : sb->s_def_resuid;
	uint32_t resgid = r->cfg->resgid >= 0 ? (uint32_t)r->cfg->resgid : sb->s_def_resgid;
	gid_t groups[64];

	if (c->uid == 0 || c->uid == resuid)
		return true;
	if (resgid == 0)
		return false;
	if (c->gid == resgid)
		return true;
	/* the caller's supplementary groups, from /proc: asked only here, when
	 * the write would reach into the reserve */
	int n = fuse_req_getgroups(req, 64, groups);
	for (int i = 0; i < n && i < 64; i++)
		if (groups[i] == resgid)
			return true;
	return false;
}

int space_check(struct rfs *r, fuse_req_t req, blk64_t need)
{
	struct ext2_super_block *sb = r->fs->super;
	blk64_t fr = ext2fs_free_blocks_count(sb), res = ext2fs_r_blocks_count(sb);

	if (need == 0 || fr >= need + res)
		return 0;
	return fr >= need && may_use_reserve(r, req) ? 0 : -ENOSPC;
}
