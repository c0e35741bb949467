/*
 * fuse/rfs.h - internal to fuse/: the mounted file system's state and what
 * the rooms of fuse/ (one concern per file) share.
 */
#ifndef RECON_FUSE_RFS_H
#define RECON_FUSE_RFS_H

#include "config.h"
#include "dirindex.h"
#include "transport.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <sys/uio.h>
#include <ext2fs/ext2fs.h>

/* What holds an inode besides its links: its open file handles and the
 * kernel's references (each entry reply adds one, FORGET takes nlookup).  An
 * inode unlinked while held sits on the on-disk orphan list until both reach
 * 0, as the kernel's VFS frees at the last iput.  An entry at 0 and 0 goes. */
struct open_ino {
	ext2_ino_t ino;
	unsigned count;            /* open file handles */
	unsigned cached;           /* of them, those reading through the page cache */
	uint64_t nlookup;          /* the kernel's references */
	bool orphan;
	bool data_err;             /* a write of its data failed: the next fsync says EIO */
	struct open_ino *next;
};
#define OPEN_TAB_SIZE 1024

struct rfs {
	ext2_filsys fs;
	pthread_mutex_t lock;      /* libext2fs is not thread-safe: every call under it */
	atomic_uint lock_waiters;  /* threads in lock(): the reaper lets them go first */
	struct dindex *di;
	struct recon_config *cfg;
	bool ro;                   /* mounted read-only, or went read-only */
	bool attached;             /* rio_txn_attach done: transactions in use */
	struct fuse_session *se;
	struct open_ino *open_tab0[OPEN_TAB_SIZE]; /* the open table's first buckets */
	struct open_ino **open_tab;   /* its buckets (open_tab0, or more once grown) */
	size_t open_cap;              /* how many: a power of two */
	uint64_t max_bytes;        /* largest file size an indirect block map can address */
	uint64_t max_extent_bytes; /* the same for an extent tree */

	/* rollback of the operation in progress (lifecycle.c): a savepoint in io
	 * (which undoes the allocation changes) and the superblock as it was.
	 * Per-operation state kept per mount, as io's savepoint is per channel:
	 * valid because `lock` makes operations one at a time, from wr_begin to
	 * wr_end; concurrent writers would need it per operation. */
	bool sp_active;
	struct ext2_super_block sb_saved;

	/* after a rejected commit: the kernel's caches are invalidated once (notify.c) */
	uint8_t *known;            /* bit per inode handed to the kernel */
	bool invalidated;
	bool notifier_running;
	pthread_t notifier;
	atomic_bool notifier_stop;  /* set at exit: no more notifications */
	atomic_bool notifier_done;
	/* unlinked inodes nothing holds, freed a step at a time (orphan.c) by
	 * the reaper thread (ticker.c) while requests go on; reap_kick wakes it
	 * (NULL: no reaper, inodes are freed at once) */
	ext2_ino_t *reapq;         /* queued inodes are reapq[reaphead .. nreap) */
	size_t reaphead, nreap, capreap;
	/* where each inode on the on-disk orphan list sits: its predecessor
	 * (0: the superblock), so removal need not walk the list from its head.
	 * A hint only, checked against the list before use (orphan.c). */
	struct orphan_hint **orphan_hints;
	struct orphan_file *ofile; /* orphan_file.c's state (NULL: not yet read) */
	void (*reap_kick)(struct rfs *r);
	bool stopped;              /* on_violation=stop fired: exit status 2 */
	bool lost;                 /* changes were discarded: exit status 3 */

	/* what fsync may promise (lifecycle.c): per inode, the last transaction
	 * that wrote it (entries already durable are dropped as the table grows) */
	struct ino_change {
		ext2_ino_t ino;    /* 0: empty slot */
		bool reported;     /* after a failure: EIO given once, EROFS after */
		uint64_t tid;
	} *chg;
	size_t chg_cap, chg_count;
	bool chg_lost;             /* out of memory while recording: trust no fsync after a failure */

	/* nanosecond timestamps (256-byte inodes): the operation's time, and
	 * which times of which inodes it set (put_inode writes *_extra) */
	struct timespec now;
	struct time_stamp {
		ext2_ino_t ino;
		unsigned mask;     /* 1 atime, 2 mtime, 4 ctime, 8 crtime */
		long extra[4];   /* i_[amc]time_extra words, epoch bits and ns */
	} stamp[8];
	unsigned nstamp;

	bool sync_op;              /* the operation commits, data included, before replying
				      (sync and dirsync flags and mount options) */

	/* inodes whose attributes the daemon changed on its own (set-id bits
	 * a write cleared, flags an ioctl set): the kernel's copy is
	 * invalidated before the reply (attr_notify) */
	ext2_ino_t attr_stale[16];
	unsigned nattr_stale;

	/* map_root: the image's uid/gid 0 and the mounting user's swap places
	 * between the disk and the kernel (owner_map_init) */
	bool map_root;
	uint32_t map_uid, map_gid;
};

/* Exit status of the daemon when on_violation=stop unmounted it. */
#define RFS_EXIT_STOPPED 2
/* Exit status when a commit was rejected or failed (on_violation=readonly,
 * a device error): what was not durable then was discarded. */
#define RFS_EXIT_LOST 3

/* After rio_txn_attach: hook libext2fs's inode writes (what fsync may
 * promise) and start tracking the inodes the kernel knows.  0 or -errno. */
int rfs_txn_hooks(struct rfs *r);

/* notify.c: the kernel's caches after a rejected commit.  invalidate_kernel
 * (lock held; once, as the file system goes read-only): every inode the
 * kernel was handed, the names added since the last durable commit (then
 * forgotten) and the names on disk in the indexed directories are
 * invalidated from a thread of its own, as a notification sent from inside
 * a request on the same inode would deadlock; out of memory, it says that
 * the kernel's entries expire within TIMEOUT s instead.
 * The cache-invalidation thread writes to the FUSE channel: at exit, stop
 * it (it ends after the notification in progress), wait while it is busy
 * (requests must still be answered meanwhile: a notification can wait for a
 * lock a request holds), and join it, all before the channel closes. */
void invalidate_kernel(struct rfs *r);
void rfs_stop_notifier(struct rfs *r);
bool rfs_notifier_busy(struct rfs *r);
void rfs_join_notifier(struct rfs *r);

/* session.c: the low-level operations fuse_session_new serves; its init
 * negotiates what the kernel offers, its destroy is rfs_unmount. */
extern const struct fuse_lowlevel_ops rfs_ops;

/* claim.c: claim the image for this daemon, before it is opened, in the
 * process that serves it (the claim lasts until that process exits): a
 * read-write mount is the image file's only user, a read-only one shares it
 * with read-only ones only, and neither starts while a loop device serves
 * the file (read-only: unless that loop device is read-only).  A loop device
 * given as the device is claimed through its backing file; other block
 * devices are left to the O_EXCL of their open.  Waits up to 30 s for a
 * recon-fuse that holds the image with no mount of it left (still writing
 * after umount).  0, or -1 after a message naming the holder. */
int rfs_claim_image(const char *dev, bool ro);

/* mountstate.c: the kernel mount's state and the daemon's kept in step.
 * mountstate_start, after the mount and before the loop: finds the mount
 * (no request reaches the file system) and, with watch, starts the thread
 * that follows remounts and marks the mount read-only once the daemon
 * serves it so; 0, or -1 after a message (the mount goes on, unfollowed).
 * mountstate_request: called by the channel before each request is served;
 * an fsync of the root directory first brings the daemon in step (the
 * signal `recon-fuse -o remount` sends).  mountstate_stop: after the loop.
 * mountstate_show_atime: strictatime in the mount's flags (libfuse passes
 * noatime only; root); 0 or -errno.  mountstate_is_remount /
 * mountstate_remount: recon-fuse run by mount(8) for mount -o remount (the
 * word remount in an -o list): makes the change and returns the exit
 * status (0, or 1 after a message). */
int mountstate_start(struct rfs *r, bool watch);
/* Before the mount: mountstate_check_options: libfuse accepts the options
 * (0, or -1 after its message), with a session made and destroyed;
 * mountstate_fuseblk_claim: the exclusive claim on a block device root
 * mounts as fuseblk (a descriptor to close just before the mount; the I/O
 * manager must then open it shared), or -1 to mount as fuse;
 * mountstate_fuseblk_claim_lost: after a failed fuseblk mount, another user
 * holds the device now; mountstate_add_flags: the flags for libfuse that
 * make the mount say what the daemon serves (read-only, noatime, fuseblk),
 * 0 or -1 (out of memory). */
int mountstate_check_options(const struct fuse_args *args);
int mountstate_fuseblk_claim(const struct recon_config *cfg, const struct fuse_args *args);
bool mountstate_fuseblk_claim_lost(const char *dev);
int mountstate_add_flags(struct fuse_args *args, const struct rfs *r, bool blkdev);
void mountstate_request(uint32_t opcode, uint64_t nodeid);
void mountstate_stop(void);
int mountstate_show_atime(const char *mountpoint, enum atime_mode atime);
bool mountstate_is_remount(int argc, char **argv);
int mountstate_remount(int argc, char **argv);

/* bitmaps.c: fs->block_map and fs->inode_map from the disk, as
 * ext2fs_read_bitmaps() makes them, in time that grows with the groups in
 * use rather than with the disk.  pristine (NULL: none): bit g set for a
 * group a seal vouches (or, without one, its descriptor claims: io checks
 * the claim later) holds only its static blocks and no inode in use
 * (rfs_seal_take): its bitmaps are made so, not read.  0 or a libext2fs
 * error (then none). */
errcode_t rfs_read_bitmaps(ext2_filsys fs, const uint8_t *pristine);

/* features.c: the read-write gate, from the checker's feature table.
 * rfs_rw_refusal: 0 when an image with superblock sb may be served
 * read-write (with the checker on when `checker`), else -1 with the refusal,
 * naming dev, the feature and -o ro, in msg.  rfs_read_super: dev's primary
 * superblock as the disk has it (CPU byte order), read before libext2fs
 * opens it (which refuses some features without naming them); 0 or -errno. */
int rfs_rw_refusal(const struct ext2_super_block *sb, const char *dev, bool checker, char *msg,
		   size_t len);
int rfs_read_super(const char *dev, struct ext2_super_block *sb);

/* Mount-time checks (mountcheck.c), each 0 or -1 with a one-line reason in
 * msg.  rfs_check_geometry: the superblock and group descriptors are sane
 * enough to read anything through them (before anything is); dev, when not
 * NULL, is the device whose size bounds the block count.
 * rfs_check_bitmaps: after the bitmaps are read, each marks its group's own
 * superblock copy, descriptors, bitmaps and inode table in use. */
int rfs_check_geometry(ext2_filsys fs, const char *dev, char *msg, size_t len);
int rfs_check_bitmaps(ext2_filsys fs, char *msg, size_t len);
/* The superblock's free block and inode counts from the group descriptors, as
 * the kernel recomputes them at mount (they are hints the kernel may leave
 * stale on disk).  True if they changed (in memory only). */
bool rfs_recount_free(ext2_filsys fs);
/* Every group descriptor's free block and inode counts match the loaded
 * bitmaps (only then may the recounted superblock be written). */
bool rfs_group_counts_agree(ext2_filsys fs);
/* Without the group-descriptor checksum feature the UNINIT flags and
 * bg_itable_unused mean nothing to the kernel, but e2fsck still reads
 * bg_itable_unused and would call every inode allocated past it unused:
 * clear them (in memory; the caller commits), as e2fsck's own fix does.
 * True if any group changed. */
bool rfs_clear_uninit(ext2_filsys fs);

/* log.c: where the daemon's messages go.  Everything is printed to stderr;
 * rfs_log_start (once, before any thread that prints, after the fork of
 * daemon mode) makes fd 2 a pipe read by a thread of its own, with every
 * signal blocked, when the daemon will detach or -o log= is given: each
 * line goes on to the original stderr while there is one, to the log= file
 * (appended, time-stamped, naming the image and the mount point) and, for
 * a daemon that detaches, to the kernel log (/dev/kmsg, root) or syslog
 * (LOG_DAEMON), a long report cut short there.  0, or -1 after a message
 * (the log file cannot be opened; nothing changed).  rfs_log_flush: returns
 * once the lines printed so far are forwarded (before the waiting parent
 * is told to exit; bounded wait).  rfs_log_detach: the original stderr is
 * let go; true if fd 2 is the log's pipe (the caller must leave it), false
 * if no log runs.  rfs_log_stop: at exit, after the last message: forwards
 * what is left, joins the thread, puts fd 2 back (the terminal, or
 * /dev/null after detaching).  All are called from the main thread. */
int rfs_log_start(const struct recon_config *cfg);
void rfs_log_flush(void);
bool rfs_log_detach(void);
void rfs_log_stop(void);

/* Mount-time orphan processing (the first transaction, after the base
 * check; the caller commits it; a huge inode's release commits in between,
 * each commit with the rest still listed).  When reaper_planned, the
 * unlinked orphans are queued for the reaper instead, still listed, and
 * reap_resume hands them on once the reaper runs.  0 or -errno (the queue
 * empty). */
int rfs_process_orphans(struct rfs *r);

/* Free an inode with no links: its blocks, then the inode itself.  listed:
 * it is on the orphan list (it comes off in the transaction that frees it);
 * if not, it goes on the list before a commit can fall inside the release.
 * 0 or -errno. */
int rfs_free_inode(struct rfs *r, ext2_ino_t ino, struct ext2_inode *inode, bool listed);

/* daemon.c: daemon mode's ties to the process that started it, all called
 * from the main thread.  daemonize_early: forks, before any thread or ring
 * exists; the parent waits for report_status and exits with the status it
 * is told (1 if the child dies first), so that errors reach the terminal
 * and its exit status means "mounted"; the child returns 0 in a session of
 * its own, or -errno (errno set) when the pipe, fork or setsid fails.
 * report_status: tells the waiting parent st (0: mounted), once the log has
 * forwarded what was said; the first call only, none in the foreground.
 * detach_stdio: stdin, stdout and (unless the log's pipe holds it) stderr
 * on /dev/null, the working directory /.  write_pidfile: path holds our
 * pid; 0, or -1 (after a message when it cannot be opened). */
int daemonize_early(void);
void report_status(int st);
void detach_stdio(void);
int write_pidfile(const char *path);

/* mount.c: prepare_fs opens r->cfg->device and decides how to serve it
 * before anything is written: read-write only when its features, recorded
 * errors, bitmaps and the whole-image check allow (else read-only, or
 * refused, said why); a journal that needs recovery is replayed in memory
 * for a read-only mount, rehearsed so before a read-write one replays it on
 * disk.  Read-write, it then makes the first writes (transactions attached,
 * free counts recounted, orphans released).  Called once, from main, after
 * rio_set_config.  0 with r->fs open (read-write unless r->ro is set),
 * r->di and r->max_bytes set; -1 after a message, nothing left open.
 * rfs_unmount: the unmount (op_destroy, and main at exit; a no-op once the
 * file system is closed): frees the unlinked inodes only the kernel held,
 * makes the last commit, writes the stats file and closes the file system;
 * r->lost is set when changes were discarded.  Takes r->lock. */
int prepare_fs(struct rfs *r);
void rfs_unmount(struct rfs *r);

/* ticker.c: start_ticker, after the mount of a read-write file system: the
 * thread, with every signal blocked, that calls rfs_tick every
 * commit_interval_ms and is the reaper (it frees the queued unlinked
 * inodes, rfs_reap, when r->reap_kick wakes it).  When the thread cannot
 * start there is no reaper (r->reap_kick stays NULL).  stop_ticker, after
 * the session loop: stops and joins it (nothing when it did not start).
 * start_ticker hands the thread what mount-time orphan processing queued
 * (reap_resume).  Both from the main thread, without r->lock (they take it).
 * reaper_planned: the options start the thread on a read-write mount. */
bool reaper_planned(const struct rfs *r);
void start_ticker(struct rfs *r);
void stop_ticker(struct rfs *r);

/* channel.c: the FUSE channel.  channel_start, once r->se is mounted:
 * libfuse reads and writes the device through the transport (transport.h),
 * which patches the INIT reply, hands requests over to io_uring when the
 * kernel offers it and fuse_uring allows, and with poll_us and one thread
 * polls for the next request before it sleeps; 0, or -1 (the caller says so).
 * channel_finish, after the session loop and before fuse_session_unmount:
 * keeps answering requests until the cache-invalidation and direct-write
 * reply threads, which write to the channel, are done, joins them, and
 * stops the ring; true when a queue of the ring failed.  channel_serve, in
 * between: libfuse's loop, with one thread or a pool of `threads`, until the
 * session ends; its status. */
int channel_start(struct rfs *r);
int channel_serve(struct rfs *r);
bool channel_finish(struct rfs *r);

/* Periodic boundary so an idle transaction still commits within
 * commit_interval_ms. */
void rfs_tick(struct rfs *r);

/* ---- shared by the rooms of fuse/ (one concern per file, as fs/ext4) ---- */

#define LINK_MAX_EXT3 65000
/* The kernel is the only client of the image while it is mounted and it
 * invalidates what our replies to its own changes make stale, so its
 * entry and attribute caches can live long: each expiry costs a LOOKUP or
 * a GETATTR round trip (PostMark re-opens files older than a second). */
#define TIMEOUT 60.0
/* The kernel's limit on requests in the background (readahead, asynchronous
 * direct I/O), asked for at INIT; direct-write replies held for an
 * invalidation (file.c) must leave some of it to readahead. */
#define MAX_BACKGROUND 64

/* Which times of an inode an operation sets (stamp_now). */
enum { T_A = 1, T_M = 2, T_C = 4, T_CR = 8 };

static inline struct rfs *R(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static inline ext2_ino_t to_ext(fuse_ino_t n)
{
	return n == FUSE_ROOT_ID ? EXT2_ROOT_INO : (ext2_ino_t)n;
}

static inline fuse_ino_t to_fuse(ext2_ino_t i)
{
	return i == EXT2_ROOT_INO ? FUSE_ROOT_ID : i;
}

/* now + ns, as pthread_cond_timedwait takes it */
static inline struct timespec deadline_in(long long ns)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(ns / 1000000000);
	ts.tv_nsec += (long)(ns % 1000000000);
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return ts;
}

static inline void lock(struct rfs *r)
{
	atomic_fetch_add(&r->lock_waiters, 1);
	pthread_mutex_lock(&r->lock);
	atomic_fetch_sub(&r->lock_waiters, 1);
}

static inline void unlock(struct rfs *r)
{
	pthread_mutex_unlock(&r->lock);
}

/* lifecycle.c */
bool name_ok(const char *name, int *err);
void op_savepoint(struct rfs *r);
int space_check(struct rfs *r, fuse_req_t req, blk64_t need);
int wr_begin(struct rfs *r);
int wr_end(struct rfs *r, int ret, bool force);
bool wr_retry_enospc(struct rfs *r, int ret, bool *retried);
int wr_undo(struct rfs *r);
int wr_room_for(struct rfs *r, blk64_t need);
int rfs_fsync(struct rfs *r, ext2_ino_t ino);
/* fsync answered once durable (fsyncwait.c keeps the waiters), lock held.
 * rfs_fsync_begin: the commit asked for; true when the fsync of ino is to
 * be answered once transaction *tid is durable (*data_err: a failed data
 * write to report, taken here as rfs_fsync takes it; *later: *tid is the
 * open transaction, to be asked for once the commit in flight is done
 * (rfs_fsync_commit), not one handed over here), false when rfs_fsync
 * must serve it (not attached, read-only, no commit thread, a failure to
 * report).  rfs_fsync_progress: retires a finished commit (final: commits
 * everything at once and waits); *durable is the durable id; 0, or -errno for
 * the waiters not durable yet (the file system failed or is read-only:
 * rfs_fsync_verdict gives each its answer).  rfs_fsync_commit: asks for the
 * open transaction's commit (nothing when one is still in flight); false
 * when it could not (a failure, which turns the file system read-only; or
 * no commit thread).
 * rfs_fsync_verdict: the answer of an fsync of ino that is not durable,
 * given progress's failure: what rfs_fsync answers after a failure. */
bool rfs_fsync_begin(struct rfs *r, ext2_ino_t ino, uint64_t *tid, bool *data_err, bool *later);
int rfs_fsync_progress(struct rfs *r, bool final, uint64_t *durable);
bool rfs_fsync_commit(struct rfs *r);
int rfs_fsync_verdict(struct rfs *r, ext2_ino_t ino, bool data_err, int failure);
/* fsyncwait.c: fsync_defer (lock held): true when req, an fsync of ino,
 * will be answered once what it covers is durable, from another thread
 * (the serving thread and the lock go on meanwhile; fsyncs that arrive
 * during one commit share the next); false when the caller serves it
 * (rfs_fsync).  fsync_drain (lock held; the unmount, before the last
 * commit): every waiter answered at once, after a commit of everything.
 * At the end of the session, as the direct-write replies: stop (the
 * thread answers what waits and ends), busy, join. */
bool fsync_defer(struct rfs *r, fuse_req_t req, ext2_ino_t ino);
void fsync_drain(struct rfs *r);
/* Without the lock: wait until the fsyncs waiting at the call are answered,
 * for at most max_ms (the reaper, so that the commit they wait for is not
 * filled with its work; fsyncs that come later do not hold it up). */
void fsync_let_waiters_first(unsigned max_ms);
void fsync_replies_stop(void);
bool fsync_replies_busy(void);
void fsync_replies_join(void);

/* inode.c */
/* A corrupt object found on disk: said once per inode; returns -EIO. */
int report_corruption(ext2_ino_t ino, const char *what);
int do_truncate(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, uint64_t size);
/* Zero on disk the bytes past `size` in ino's block holding it, if mapped,
 * written and not all zero there: before a size past an EOF of `size` can
 * commit (inode.c says why). */
int tail_zero(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, uint64_t size);
int errmap(errcode_t e);
/* fill_entry of an inode this operation made: its times' extra words are
 * the operation's stamps (put_new_inode wrote them), not read back */
void fill_entry_new(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in,
		    struct fuse_entry_param *e);
void fill_entry(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in,
		       struct fuse_entry_param *e);
int ftype_of(struct rfs *r, unsigned mode);
int get_inode(struct rfs *r, ext2_ino_t ino, struct ext2_inode *inode);
void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_setattr(fuse_req_t req, fuse_ino_t fino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi);
int put_inode(struct rfs *r, ext2_ino_t ino, struct ext2_inode *inode);
/* An inode with every byte the table holds of it (inodes of up to 1 KiB):
 * an operation that reads an inode, changes it and writes it back reads it
 * once this way, where put_inode must read it again for the bytes past the
 * first 128.  Past i_extra_isize the bytes are in-inode extended
 * attributes: nothing may change those between get_inode_buf and
 * put_inode_buf (re-read after an xattr change). */
union inode_buf {
	struct ext2_inode small;
	struct ext2_inode_large big;
	char raw[1024];
};
int get_inode_buf(struct rfs *r, ext2_ino_t ino, union inode_buf *b);
/* Writes b with the operation's time stamps, which it also puts into b. */
int put_inode_buf(struct rfs *r, ext2_ino_t ino, union inode_buf *b);
/* fill_entry of an inode read with get_inode_buf: its times' extra words
 * from b, not read again */
void fill_entry_buf(struct rfs *r, ext2_ino_t ino, union inode_buf *b,
		    struct fuse_entry_param *e);
int put_new_inode(struct rfs *r, ext2_ino_t ino, struct ext2_inode *inode);
uint16_t setid_bits_to_kill(fuse_req_t req, const struct ext2_inode *in);
void attr_changed(struct rfs *r, ext2_ino_t ino);
void owner_map_init(struct rfs *r);
uint32_t map_uid(const struct rfs *r, uint32_t uid);
uint32_t map_gid(const struct rfs *r, uint32_t gid);
void attr_notify(struct rfs *r);
time_t stamp_now(struct rfs *r, ext2_ino_t ino, unsigned mask);

/* namei.c */
void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi);
void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f);
void op_link(fuse_req_t req, fuse_ino_t fino, fuse_ino_t newparent, const char *newname);
void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void op_readlink(fuse_req_t req, fuse_ino_t fino);
void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags);
void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);

/* super.c */
void op_statfs(fuse_req_t req, fuse_ino_t ino);

/* dir.c */
void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void op_opendir(fuse_req_t req, fuse_ino_t fino, struct fuse_file_info *fi);
void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi);
void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi);

/* file.c */
/* Data of inode ino: the io layer refuses a write to a block the checker
 * does not record as free or ino's own (EIO). */
int blocks_io(struct rfs *r, ext2_ino_t ino, bool write, const blk64_t *phys, unsigned n,
	      char *buf);
void op_fallocate(fuse_req_t req, fuse_ino_t fino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi);
void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void op_lseek(fuse_req_t req, fuse_ino_t fino, off_t off, int whence,
		     struct fuse_file_info *fi);
void op_open(fuse_req_t req, fuse_ino_t fino, struct fuse_file_info *fi);
void op_read(fuse_req_t req, fuse_ino_t fino, size_t size, off_t off,
		    struct fuse_file_info *fi);
void op_release(fuse_req_t req, fuse_ino_t fino, struct fuse_file_info *fi);
void op_write(fuse_req_t req, fuse_ino_t fino, const char *data, size_t size, off_t off,
		     struct fuse_file_info *fi);
/* fi NULL: a directory (no page cache of ours to track) */
void open_get(struct rfs *r, ext2_ino_t ino, const struct fuse_file_info *fi);
void open_undo(struct rfs *r, ext2_ino_t ino, const struct fuse_file_info *fi);
void set_open_mode(struct fuse_file_info *fi);
/* The thread that answers direct writes once the kernel's page cache holds
 * nothing older than them (file.c).  At the end of the session: stop (it
 * finishes what is queued, which may wait on requests still to be served:
 * serve while busy), then join. */
void direct_write_replies_stop(void);
bool direct_write_replies_busy(void);
void direct_write_replies_join(void);

/* bmap.c: how a file's logical blocks map onto the disk; no other room
 * knows.  Every call runs under the lock, in the caller's write lifecycle
 * when it changes anything; in is the caller's copy of ino's inode, changed
 * in memory (the caller writes it; an extent tree's root is also written
 * when it changes).  A failure part-way leaves what the caller's rollback
 * undoes.
 * bmap_block: the physical block of logical block lblk in *pblk, 0 for a
 * hole or an unwritten block (it reads as zeros); a pointer outside the file
 * system is corruption (EIO, logged).
 * bmap_run: the same for n blocks from first, into phys[]; with unwritten
 * (n flags) unwritten blocks are given with their block and flagged.
 * bmap_alloc: a new block for the hole at lblk, near goal (0: near the
 * inode's other blocks), its contents the caller's; 0 or -errno.
 * bmap_alloc_run: new blocks for every hole (0) of phys[0..n), contiguous
 * where the free space allows; unwritten: as unwritten extents (only where
 * bmap_has_unwritten, else the caller zeroes them).  On failure phys[] says
 * what was allocated.
 * bmap_mark_written: [lblk, lblk + len), written by the caller, is no
 * longer unwritten (may split extents: ENOSPC).
 * bmap_trim_past_eof: after a failed allocation, gives back the blocks of
 * [from, to) past i_size.
 * bmap_punch: frees what is mapped at logical blocks [start, end) (may
 * split an extent: ENOSPC).
 * bmap_end: one past the last logical block mapped (0: none), without
 * walking holes.
 * bmap_seek: the first logical block at or after from that holds data
 * (want_data) or is a hole (unwritten blocks are holes); -ENXIO when no data
 * follows.
 * bmap_limits: at mount, r->max_bytes and r->max_extent_bytes;
 * bmap_file_max: the largest size of in (NULL: a block-mapped file).
 * bmap_init: a new file, directory or slow symlink is extent-mapped when
 * the image has the extent feature.
 * bmap_alloc_meta: blocks of metadata a run of up to 256 allocations may
 * dirty (what a fallocate keeps free in the transaction). */
bool bmap_has_unwritten(const struct ext2_inode *in);
int bmap_block(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t lblk,
	       blk64_t *pblk);
int bmap_run(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t first, unsigned n,
	     blk64_t *phys, bool *unwritten);
int bmap_alloc(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t lblk,
	       blk64_t goal, blk64_t *pblk);
int bmap_alloc_run(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t first,
		   unsigned n, bool unwritten, blk64_t *phys);
int bmap_mark_written(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t lblk,
		      blk64_t len);
void bmap_trim_past_eof(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t from,
			blk64_t to);
errcode_t bmap_punch(ext2_filsys fs, ext2_ino_t ino, struct ext2_inode *in, blk64_t start,
		     blk64_t end);
errcode_t bmap_end(ext2_filsys fs, ext2_ino_t ino, const struct ext2_inode *in, blk64_t *end);
int bmap_seek(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t from,
	      bool want_data, blk64_t *found);
void bmap_limits(struct rfs *r);
uint64_t bmap_file_max(const struct rfs *r, const struct ext2_inode *in);
void bmap_init(struct rfs *r, struct ext2_inode *in);
unsigned bmap_alloc_meta(struct rfs *r);
/* How many logical blocks a punch from block `from` of ino (upward, or
 * downward below it when down) may free in the open transaction: ~0 with
 * no limit, 0 when the transaction holds something and must commit first
 * (commit_midway); -EFBIG when not even an empty transaction has room for
 * one step (a journal too short).  in NULL: only whether there is room. */
int punch_step(struct rfs *r, ext2_ino_t ino, const struct ext2_inode *in, blk64_t from,
	       bool down, blk64_t *step);
/* Free ino's blocks from logical block keep on, in steps, committing in
 * between when one transaction cannot hold them all; the inode goes on the
 * orphan list before such a commit.  *listed: ino is on the list (set when
 * put there here; the caller takes it off in the transaction that ends its
 * work).  0 or -errno. */
int punch_from(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t keep,
	       bool *listed);

/* extmap.c: bmap.c's half for extent-mapped inodes (the same contracts). */
int ext_map_run(struct rfs *r, ext2_ino_t ino, const struct ext2_inode *in, blk64_t first,
		unsigned n, blk64_t *phys, bool *unwritten);
int ext_alloc_run(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t first,
		  unsigned n, blk64_t goal, bool uninit, blk64_t *phys);
int ext_mark_written(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, blk64_t lblk,
		     blk64_t len);
errcode_t ext_punch(ext2_filsys fs, ext2_ino_t ino, struct ext2_inode *in, blk64_t start,
		    blk64_t end);
errcode_t ext_end(ext2_filsys fs, ext2_ino_t ino, const struct ext2_inode *in, blk64_t *end);
errcode_t ext_punch_span(ext2_filsys fs, ext2_ino_t ino, const struct ext2_inode *in,
			 blk64_t from, bool down, size_t budget, blk64_t *span);
int ext_seek(struct rfs *r, ext2_ino_t ino, const struct ext2_inode *in, blk64_t from,
	     bool want_data, blk64_t *found);
void ext_init(struct ext2_inode *in);

/* orphan.c */
errcode_t commit_midway(struct rfs *r);
/* Put ino at the head of the on-disk orphan list (written); 0 or -errno. */
int orphan_add(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in);
int drop_link(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in);
struct open_ino **open_slot(struct rfs *r, ext2_ino_t ino);
int held_settle(struct rfs *r, struct open_ino **p);
void data_error_note(struct rfs *r, ext2_ino_t ino);
bool data_error_take(struct rfs *r, ext2_ino_t ino);
int lookup_get(struct rfs *r, ext2_ino_t ino);
void lookup_put(struct rfs *r, ext2_ino_t ino, uint64_t n);
void held_release_all(struct rfs *r);
/* The reaper thread's step, called without the lock: frees part of the
 * first queued inode (a step, bounded, an operation of its own under the
 * lock).  True while more is queued. */
bool rfs_reap(struct rfs *r);
/* Free every queued inode now (lock held): before an ENOSPC is final. */
void reap_all(struct rfs *r);
/* Empty the queue (lock held); its inodes stay on the orphan list. */
void reap_clear(struct rfs *r);
/* What mount-time orphan processing queued, handed to the reaper once
 * r->reap_kick is set, or freed now when there is none (lock held). */
void reap_resume(struct rfs *r);
int orphan_remove(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in);
/* A rolled-back operation may have changed the list: forget every hint. */
void orphan_hints_clear(struct rfs *r);
/* orphan_file.c: the orphan file, where orphan.c records orphans first.
 * ofile_add: ino in a free slot (written), ORPHAN_PRESENT set; -ENOSPC when
 * the image has no usable orphan file or it is full (the caller uses the
 * list).  ofile_remove: ino's slot cleared, ORPHAN_PRESENT cleared with the
 * last; -ENOENT when ino has none.  ofile_first: a recorded inode, 0 when
 * none.  ofile_each: each recorded inode to fn, which must not change the
 * file.  ofile_cut: before mount-time release, entries unfit names a reason
 * for (or named twice) cleared.  ofile_pending: the file may hold entries.
 * ofile_forget: after a rollback (the counts are reread).  All 0 or -errno;
 * lock held. */
typedef const char *(*ofile_unfit_fn)(struct rfs *r, ext2_ino_t ino);
int ofile_add(struct rfs *r, ext2_ino_t ino);
int ofile_remove(struct rfs *r, ext2_ino_t ino);
int ofile_first(struct rfs *r, ext2_ino_t *ino);
typedef int (*ofile_each_fn)(struct rfs *r, ext2_ino_t ino, void *arg);
int ofile_each(struct rfs *r, ofile_each_fn fn, void *arg);
int ofile_cut(struct rfs *r, ofile_unfit_fn unfit);
bool ofile_pending(const struct rfs *r);
void ofile_forget(struct rfs *r);
void ofile_free(struct rfs *r);
/* Orphans to release at mount (the list or the orphan file). */
bool orphans_pending(const struct rfs *r);
/* Shrink ino's data to size bytes (below i_size), crash-atomically through
 * the orphan list when it spans commits; the caller writes the inode. */
int orphan_truncate(struct rfs *r, ext2_ino_t ino, struct ext2_inode *in, uint64_t size);

/* xattr.c */
int drop_capability(struct rfs *r, ext2_ino_t ino);
void op_getxattr(fuse_req_t req, fuse_ino_t fino, const char *name, size_t size);
void op_listxattr(fuse_req_t req, fuse_ino_t fino, size_t size);
void op_removexattr(fuse_req_t req, fuse_ino_t fino, const char *name);
void op_setxattr(fuse_req_t req, fuse_ino_t fino, const char *name, const char *value,
			size_t size, int flags);
int xattr_drop_empty_block(struct rfs *r, ext2_ino_t ino);
bool has_no_xattrs(struct rfs *r, ext2_ino_t ino);
/* has_no_xattrs of an inode the caller has read whole */
bool inode_buf_has_no_xattrs(struct rfs *r, const union inode_buf *b);
/* ext_attr on (a revision-0 superblock upgraded first) before an attribute
 * is stored, in the caller's transaction; 0 or -EOPNOTSUPP. */
int xattr_feature_on(struct rfs *r);

/* acl.c */
struct acl_new {           /* a new inode's ACLs (posix_acl_xattr values) */
	void *access, *deflt;
	size_t access_len, deflt_len;
};
bool acl_name(const char *name);
void acl_map_ids(const struct rfs *r, void *val, size_t len);
int acl_set(struct rfs *r, fuse_req_t req, ext2_ino_t ino, const char *name,
	    const void *val, size_t len);
int acl_chmod(struct rfs *r, ext2_ino_t ino, unsigned mode);
int acl_inherit(struct rfs *r, fuse_req_t req, ext2_ino_t dir, unsigned *mode,
		struct acl_new *out);
int acl_inherit_store(struct rfs *r, ext2_ino_t ino, const struct acl_new *n);
void acl_new_free(struct acl_new *n);

/* flags.c: each check answers 0 or -EPERM as the kernel's VFS would */
uint32_t flags_inherit(const struct ext2_inode *dir, unsigned mode);
int flags_check_open(const struct ext2_inode *in, int oflags);
int flags_check_setattr(const struct ext2_inode *in, int to_set);
int flags_check_write(const struct ext2_inode *in, uint64_t off);
int flags_check_fallocate(const struct ext2_inode *in, int mode);
int flags_check_modify(const struct ext2_inode *in);
int flags_check_modify_ino(struct rfs *r, ext2_ino_t ino);
int flags_check_dir_add(const struct ext2_inode *dir);
int flags_check_dir_remove(const struct ext2_inode *dir);
int flags_check_dir_remove_ino(struct rfs *r, ext2_ino_t dir);
bool flags_noatime(const struct ext2_inode *in);
void flags_sync_inode(struct rfs *r, const struct ext2_inode *in);
void flags_sync_dir(struct rfs *r, const struct ext2_inode *dir);
void op_ioctl(fuse_req_t req, fuse_ino_t fino, unsigned int cmd, void *arg,
	      struct fuse_file_info *fi, unsigned flags, const void *in_buf,
	      size_t in_bufsz, size_t out_bufsz);


/* ---- the seal of a clean, checked unmount (seal.c) ---- */
/* Where a file system's seal lives and what of it is read: taken while
 * it is open, used after it is closed. */
struct rfs_seal_plan {
	char uuid[33];               /* the file system's UUID in hex: the seal's name */
	uint32_t bs, ngroups, desc_blocks;
	uint64_t desc_blk;           /* the primary descriptors' first block */
	uint64_t journal_blk;        /* the journal superblock's block; 0: no journal */
	uint64_t ibitmap_digest;     /* of libext2fs's inode bitmap (0: not loaded) */
};
/* A seal found matching at mount, until the inode bitmaps are read. */
struct rfs_seal {
	bool matched;
	uint32_t groups;
	uint64_t ibitmap_digest;
	uint8_t *pristine;           /* groups pristine by the sealed descriptors (malloc'd), or NULL */
};
/* 0, or -errno when fs cannot be sealed (meta_bg; the journal unmapped). */
int rfs_seal_plan(ext2_filsys fs, struct rfs_seal_plan *p);
/* At a read-write mount, before anything is written and before the
 * bitmaps are read: whether fs's seal matches the device's superblock,
 * descriptors and journal (into *out; said why not).  When it does, the
 * groups its descriptors show pristine (only their static blocks and no
 * inode in use) go to io (rio_set_pristine_groups) and into out->pristine,
 * for rfs_read_bitmaps.  When none matches and base_check is background,
 * the same groups go to io as only claimed (rio_set_claimed_groups), verified
 * later.  The seal is removed either way: it serves one mount. */
void rfs_seal_take(struct rfs *r, ext2_filsys fs, struct rfs_seal *out);
/* A read-write mount that does not look for a seal (checker off,
 * rw_unchecked, a journal replayed) removes it all the same, before it
 * writes. */
void rfs_seal_drop(struct rfs *r, ext2_filsys fs);
/* Once libext2fs has read the bitmaps, before the base check: when the
 * inode bitmaps are the sealed ones too, hand the sealed groups to io
 * (rio_set_sealed_groups).  True when the seal is used. */
bool rfs_seal_use(struct rfs *r, ext2_filsys fs, const struct rfs_seal *s);
/* After a clean unmount that io calls sealable (rio_txn_sealable), with
 * the device closed: record the seal (said why when it cannot). */
void rfs_seal_write(const struct recon_config *cfg, const struct rfs_seal_plan *p);

#endif
