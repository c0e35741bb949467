/*
 * fuse/mountstate.c - the kernel mount's state and the daemon's, kept in
 * step, so that /proc/mounts tells the truth and a remount works as on the
 * kernel's ext3.
 *
 * At mount, the flags main() gives libfuse say what the daemon serves
 * (read-only after a fallback in prepare_fs, noatime; strictatime is set
 * after the mount, root only), and root mounts a block device as fuseblk,
 * whose umount waits for the daemon to finish writing.
 *
 * FUSE tells a server nothing of a remount: the kernel changes its flags and
 * stops sending writes.  The daemon learns of it from /proc/self/mountinfo
 * (a thread that wakes when the mount table changes, and once a second) and
 * at every fsync of the root directory (the channel calls
 * mountstate_request before such a request is served):
 *  - the mount turned read-only (mount -o remount,ro): the open transaction
 *    commits, with the device flushed, and the daemon serves read-only
 *    (no atime updates, no reaping of unlinked inodes);
 *  - it turned read-write again: the daemon writes again, if it stopped
 *    only because of the remount;
 *  - the daemon serves read-only on its own (after a rejected commit) but
 *    the mount says rw: the daemon marks the mount read-only
 *    (mount_setattr, root only; refused with EBUSY while a file is open for
 *    writing on it, so retried each second).  It never reconfigures the
 *    superblock itself: that syncs the page cache through the daemon, and a
 *    thread of the daemon must not wait for the daemon.
 *  - the mount's access-time flags changed (remount,noatime): the daemon's
 *    policy follows.
 *
 * mount -o remount on a fuse.recon-fuse mount runs `recon-fuse SRC MNT -o
 * ...,remount,...` through mount.fuse3: mountstate_remount makes the change
 * (superblock read-only flag by fsconfig, mount flags by mount_setattr) and
 * then fsyncs the root directory, which makes the daemon follow before the
 * command returns: a remount,ro returns once everything is committed, a
 * remount,rw the daemon cannot honour is undone and reported.
 */
#include "rfs.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fuse.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

/* The kernel mount as /proc/self/mountinfo shows it. */
struct kmount {
	bool found;
	bool sb_ro;                /* the superblock's flag (remount,ro) */
	bool mnt_ro;               /* this mount's own flag (mount_setattr, bind) */
	enum atime_mode atime;     /* this mount's access-time flags */
	bool ours;                 /* a recon-fuse mount (fuse.recon-fuse, fuseblk.recon-fuse) */
	bool moved;                /* no longer at the daemon's mount point */
	bool covered;              /* another mount sits on top of it */
};

static struct {
	struct rfs *r;
	uint64_t mnt_id;           /* 0: not started */
	const char *mountpoint;
	enum atime_mode atime;     /* the mount's access-time flags as last seen */
	bool following;            /* r->ro set because the mount went read-only */
	bool mark_said, busy_said; /* a failure to mark the mount read-only, said once */
	pthread_mutex_t mu;        /* one follow() at a time */
	pthread_t thread;
	bool running;
	int wake_fd;
	atomic_bool stop;
} ms = { .mu = PTHREAD_MUTEX_INITIALIZER, .wake_fd = -1 };

/* The mount a descriptor of the mount point (O_PATH) is on, from its fdinfo:
 * no request reaches the file system.  0 or -1. */
static int fd_mount_id(int fd, uint64_t *id)
{
	char path[64], line[256];
	int ret = -1;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "mnt_id: %" SCNu64, id) == 1) {
			ret = 0;
			break;
		}
	fclose(f);
	return ret;
}

/* A mountinfo path, its octal escapes (\040) undone, equals path. */
static bool same_point(const char *esc, const char *path)
{
	while (*esc && *path) {
		char c = *esc++;
		if (c == '\\' && esc[0] >= '0' && esc[0] <= '3' && esc[1] >= '0' && esc[1] <= '7' &&
		    esc[2] >= '0' && esc[2] <= '7') {
			c = (char)((esc[0] - '0') << 6 | (esc[1] - '0') << 3 | (esc[2] - '0'));
			esc += 3;
		}
		if (c != *path++)
			return false;
	}
	return !*esc && !*path;
}

/* Fields of one mountinfo line: "ID PARENT MAJ:MIN ROOT POINT OPTS [tags] -
 * TYPE SOURCE SUPER_OPTS". */
static void parse_line(char *line, struct kmount *k, const char *point)
{
	char *save = NULL, *opts = NULL, *type = NULL, *super = NULL;
	int field = 0;
	bool after_dash = false;

	for (char *tok = strtok_r(line, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
		field++;
		if (field == 5 && point)
			k->moved = !same_point(tok, point);
		else if (field == 6)
			opts = tok;
		else if (field > 6 && !after_dash && !strcmp(tok, "-"))
			after_dash = true, field = 100;
		else if (field == 101)
			type = tok;
		else if (field == 103)
			super = tok;
	}
	if (!opts || !type || !super)
		return;
	k->found = true;
	k->ours = !strcmp(type, "fuse.recon-fuse") || !strcmp(type, "fuseblk.recon-fuse");
	k->sb_ro = !strncmp(super, "ro", 2) && (super[2] == ',' || !super[2]);
	k->atime = ATIME_STRICTATIME;
	for (char *tok = strtok_r(opts, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "ro"))
			k->mnt_ro = true;
		else if (!strcmp(tok, "noatime"))
			k->atime = ATIME_NOATIME;
		else if (!strcmp(tok, "relatime"))
			k->atime = ATIME_RELATIME;
	}
}

/* Mount id's line of /proc/self/mountinfo; with point, whether the mount is
 * still there and on top (a mount on top of it has it as parent and the same
 * mount point).  0 or -1. */
static int read_kmount(uint64_t id, const char *point, struct kmount *k)
{
	char *line = NULL, pt[4096];
	size_t cap = 0;

	memset(k, 0, sizeof(*k));
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -1;
	while (getline(&line, &cap, f) > 0) {
		uint64_t lid, parent;
		if (sscanf(line, "%" SCNu64 " %" SCNu64 " %*s %*s %4095s", &lid, &parent, pt) != 3)
			continue;
		if (lid == id)
			parse_line(line, k, point);
		else if (parent == id && point && same_point(pt, point))
			k->covered = true;
	}
	free(line);
	fclose(f);
	return 0;
}

/* Mark our mount read-only, as the daemon serves it: by its path, which
 * mountinfo says leads to it (no descriptor of ours keeps the mount busy,
 * and a umount meanwhile finds it busy only for the call). */
static void mark_read_only(const struct kmount *k)
{
	if (k->moved || k->covered)
		return;
	struct mount_attr a = { .attr_set = MOUNT_ATTR_RDONLY };
	int ret = mount_setattr(AT_FDCWD, ms.mountpoint, 0, &a, sizeof(a));
	int err = errno;
	if (ret == 0) {
		fprintf(stderr, "recon-fuse: %s: the daemon serves it read-only: the mount is "
			"marked read-only\n", ms.mountpoint);
		ms.busy_said = ms.mark_said = false;
	} else if (err == EBUSY) {
		if (!ms.busy_said)
			fprintf(stderr, "recon-fuse: %s: files are open for writing on the mount: it "
				"shows rw until they are closed (their writes fail with EROFS)\n",
				ms.mountpoint);
		ms.busy_said = true;
	} else {
		if (!ms.mark_said)
			fprintf(stderr, "recon-fuse: %s: cannot mark the mount read-only (%s); it "
				"shows rw, and writes fail with EROFS\n", ms.mountpoint, strerror(err));
		ms.mark_said = true;
	}
}

/* Bring the daemon in step with the mount (see the top of the file). */
static void follow(void)
{
	struct kmount k;
	bool mark = false;

	pthread_mutex_lock(&ms.mu);
	if (!ms.mnt_id || read_kmount(ms.mnt_id, ms.mountpoint, &k) || !k.found) {
		pthread_mutex_unlock(&ms.mu);
		return;
	}
	struct rfs *r = ms.r;
	bool kernel_ro = k.sb_ro || k.mnt_ro;
	lock(r);
	if (r->fs) {
		if (k.atime != ms.atime) {
			r->cfg->atime = k.atime;
			ms.atime = k.atime;
		}
		if (kernel_ro && !r->ro) {
			int ret = rfs_fsync(r, EXT2_ROOT_INO);
			if (!r->ro) {
				r->ro = true;
				ms.following = true;
				fprintf(stderr, "recon-fuse: %s: remounted read-only; %s\n",
					r->cfg->device, ret ? "the last commit failed" :
					"everything is committed");
			}
		} else if (!kernel_ro && r->ro && ms.following) {
			r->ro = false;
			ms.following = false;
			fprintf(stderr, "recon-fuse: %s: remounted read-write\n", r->cfg->device);
			if (r->reap_kick)
				r->reap_kick(r);
		} else if (!kernel_ro && r->ro) {
			mark = true;
		}
	}
	unlock(r);
	if (mark && geteuid() == 0)
		mark_read_only(&k);
	pthread_mutex_unlock(&ms.mu);
}

void mountstate_request(uint32_t opcode, uint64_t nodeid)
{
	if (opcode == FUSE_FSYNCDIR && nodeid == FUSE_ROOT_ID)
		follow();
}

static void *watch_main(void *arg)
{
	(void)arg;
	int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	char buf[4096];

	while (!atomic_load(&ms.stop)) {
		struct pollfd p[2] = { { .fd = ms.wake_fd, .events = POLLIN },
				       { .fd = fd, .events = POLLPRI } };
		if (poll(p, fd >= 0 ? 2 : 1, 1000) < 0 && errno != EINTR)
			break;
		if (atomic_load(&ms.stop))
			break;
		if (fd >= 0 && (p[1].revents & (POLLPRI | POLLERR))) {
			/* reading it to its end acknowledges the change */
			(void)lseek(fd, 0, SEEK_SET);
			while (read(fd, buf, sizeof(buf)) > 0)
				;
		}
		follow();
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

int mountstate_start(struct rfs *r, bool watch)
{
	struct kmount k;
	int fd = open(r->cfg->mountpoint, O_PATH | O_DIRECTORY | O_CLOEXEC);
	uint64_t id;

	if (fd < 0 || fd_mount_id(fd, &id) || read_kmount(id, NULL, &k) || !k.found) {
		if (fd >= 0)
			close(fd);
		fprintf(stderr, "recon-fuse: %s: cannot find the mount in /proc/self/mountinfo: "
			"a remount will not be followed\n", r->cfg->mountpoint);
		return -1;
	}
	close(fd);
	pthread_mutex_lock(&ms.mu);
	ms.r = r;
	ms.mountpoint = r->cfg->mountpoint;
	ms.atime = k.atime;
	ms.mnt_id = id;
	pthread_mutex_unlock(&ms.mu);
	if (!watch)
		return 0;
	ms.wake_fd = eventfd(0, EFD_CLOEXEC);
	if (ms.wake_fd < 0)
		return -1;
	/* with every signal blocked: the exit signals are the FUSE loop's */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	ms.running = pthread_create(&ms.thread, NULL, watch_main, NULL) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ms.running ? 0 : -1;
}

void mountstate_stop(void)
{
	if (ms.running) {
		atomic_store(&ms.stop, true);
		uint64_t one = 1;
		if (write(ms.wake_fd, &one, sizeof(one)) != sizeof(one)) {
			/* it wakes within a second anyway */
		}
		pthread_join(ms.thread, NULL);
		ms.running = false;
	}
	if (ms.wake_fd >= 0)
		close(ms.wake_fd);
	ms.wake_fd = -1;
	pthread_mutex_lock(&ms.mu);
	ms.mnt_id = 0;
	pthread_mutex_unlock(&ms.mu);
}

int mountstate_show_atime(const char *mountpoint, enum atime_mode atime)
{
	if (atime != ATIME_STRICTATIME)
		return 0;
	struct mount_attr a = { .attr_clr = MOUNT_ATTR__ATIME, .attr_set = MOUNT_ATTR_STRICTATIME };
	return mount_setattr(AT_FDCWD, mountpoint, 0, &a, sizeof(a)) ? -errno : 0;
}

/* ---- the mount's flags and type ---- */

/* libfuse takes the mount's options when the session is made, and main()
 * makes the session that mounts only once prepare_fs has decided what the
 * mount must say (read-only after a fallback).  This one checks them first,
 * so an unknown option stops the mount before the device is touched; a
 * session that never mounted has no descriptor and got no INIT: destroying
 * it has no other effect.  0 or -1 (libfuse said why). */
int mountstate_check_options(const struct fuse_args *args)
{
	struct fuse_args copy = FUSE_ARGS_INIT(0, NULL);
	int ret = -1;

	for (int i = 0; i < args->argc; i++)
		if (strcmp(args->argv[i], "-d") && fuse_opt_add_arg(&copy, args->argv[i]))
			goto out;
	struct fuse_session *se = fuse_session_new(&copy, &rfs_ops, sizeof(rfs_ops), NULL);
	if (se) {
		fuse_session_destroy(se);
		ret = 0;
	}
out:
	fuse_opt_free_args(&copy);
	return ret;
}

/* The device is named as the mount's source (fsname=DEVICE, which
 * config_parse adds unless -o gives another). */
static bool source_is_device(const struct fuse_args *args, const char *dev)
{
	for (int i = 1; i + 1 < args->argc; i++) {
		if (strcmp(args->argv[i], "-o"))
			continue;
		char *copy = strdup(args->argv[i + 1]), *save = NULL;
		bool found = false;
		for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t && !found;
		     t = strtok_r(NULL, ",", &save))
			found = !strncmp(t, "fsname=", 7) && !strcmp(t + 7, dev);
		free(copy);
		if (found)
			return true;
	}
	return false;
}

/*
 * Root mounting a block device mounts it as the kernel's fuseblk type: at
 * umount the kernel then sends DESTROY and waits for its reply, so umount
 * returns once the daemon has written everything (a fuse mount's umount
 * returns at once).  The kernel's mount claims the device exclusively, so the
 * I/O manager opens it without O_EXCL (rio shared_bdev); until the mount,
 * the descriptor returned here holds the claim instead, so a device in use
 * is still refused before anything is written.  -1: mount as fuse (not
 * root, not a block device, another source, or the device is busy: the I/O
 * manager's O_EXCL open then says so).
 */
int mountstate_fuseblk_claim(const struct recon_config *cfg, const struct fuse_args *args)
{
	struct stat st;

	if (geteuid() != 0 || stat(cfg->device, &st) || !S_ISBLK(st.st_mode) ||
	    !source_is_device(args, cfg->device))
		return -1;
	return open(cfg->device, O_RDONLY | O_EXCL | O_CLOEXEC);
}

/* After a failed fuseblk mount: someone else claimed the device in the
 * moment between our letting go and the mount. */
bool mountstate_fuseblk_claim_lost(const char *dev)
{
	int fd = open(dev, O_RDONLY | O_EXCL | O_CLOEXEC);
	if (fd >= 0)
		close(fd);
	return fd < 0 && errno == EBUSY;
}

/* What the kernel mount must say, as flags for libfuse: read-only when the
 * daemon serves so (-o ro, or a fallback in prepare_fs), noatime (also from
 * the configuration file), and fuseblk.  0 or -1 (out of memory). */
int mountstate_add_flags(struct fuse_args *args, const struct rfs *r, bool blkdev)
{
	char blk[64];

	snprintf(blk, sizeof(blk), "-oblkdev,blksize=%u", r->fs->blocksize);
	if ((r->ro && fuse_opt_add_arg(args, "-oro")) ||
	    (r->cfg->atime == ATIME_NOATIME && fuse_opt_add_arg(args, "-onoatime")) ||
	    (blkdev && fuse_opt_add_arg(args, blk)))
		return -1;
	return 0;
}

/* ---- recon-fuse -o remount ---- */

/* Every comma-separated word of every -o list. */
static bool has_remount(int argc, char **argv, bool (*each)(const char *, void *), void *ctx)
{
	bool found = false;
	for (int i = 1; i < argc; i++) {
		const char *list = NULL;
		if (!strcmp(argv[i], "-o") && i + 1 < argc)
			list = argv[++i];
		else if (!strncmp(argv[i], "-o", 2))
			list = argv[i] + 2;
		if (!list)
			continue;
		char *copy = strdup(list), *save = NULL;
		if (!copy)
			return false;
		for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			if (!strcmp(tok, "remount"))
				found = true;
			else if (each)
				each(tok, ctx);
		}
		free(copy);
	}
	return found;
}

bool mountstate_is_remount(int argc, char **argv)
{
	return has_remount(argc, argv, NULL, NULL);
}

/* What a remount asks for: the read-only flag, and the mount flags, as
 * mount(8) passes them (the whole set, changed or not). */
struct remount_req {
	int ro;                    /* -1: not said */
	struct mount_attr attr;
};

static bool remount_word(const char *w, void *ctx)
{
	struct remount_req *q = ctx;
	static const struct { const char *on, *off; uint64_t bit; } flags[] = {
		{ "nosuid", "suid", MOUNT_ATTR_NOSUID },
		{ "nodev", "dev", MOUNT_ATTR_NODEV },
		{ "noexec", "exec", MOUNT_ATTR_NOEXEC },
	};

	if (!strcmp(w, "ro") || !strcmp(w, "rw")) {
		q->ro = w[1] == 'o';
		return true;
	}
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		if (!strcmp(w, flags[i].on) || !strcmp(w, flags[i].off)) {
			bool on = !strcmp(w, flags[i].on);
			q->attr.attr_set = on ? q->attr.attr_set | flags[i].bit :
						q->attr.attr_set & ~flags[i].bit;
			q->attr.attr_clr = on ? q->attr.attr_clr & ~flags[i].bit :
						q->attr.attr_clr | flags[i].bit;
			return true;
		}
	}
	uint64_t atime = !strcmp(w, "noatime") ? MOUNT_ATTR_NOATIME :
			 !strcmp(w, "relatime") ? MOUNT_ATTR_RELATIME :
			 !strcmp(w, "strictatime") || !strcmp(w, "atime") ? MOUNT_ATTR_STRICTATIME :
			 UINT64_MAX;
	if (atime != UINT64_MAX) {
		q->attr.attr_set = (q->attr.attr_set & ~MOUNT_ATTR__ATIME) | atime;
		q->attr.attr_clr |= MOUNT_ATTR__ATIME;
	}
	/* the other options (FUSE's, recon-fuse's keys) keep the values the
	 * daemon was started with */
	return true;
}

/* The superblock's read-only flag, as mount -o remount,ro sets it. */
static int set_sb_ro(int fd, bool ro)
{
	int sfd = fspick(fd, "", FSPICK_EMPTY_PATH | FSPICK_CLOEXEC | FSPICK_NO_AUTOMOUNT);
	if (sfd < 0)
		return -errno;
	int ret = 0;
	if (fsconfig(sfd, FSCONFIG_SET_FLAG, ro ? "ro" : "rw", NULL, 0) ||
	    fsconfig(sfd, FSCONFIG_CMD_RECONFIGURE, NULL, NULL, 0))
		ret = -errno;
	close(sfd);
	return ret;
}

/* The daemon follows before this returns: an fsync of the root directory is
 * its signal (mountstate_request), and commits. */
static int tell_daemon(const char *mnt)
{
	int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int ret = fsync(fd) ? -errno : 0;
	close(fd);
	return ret;
}

int mountstate_remount(int argc, char **argv)
{
	struct remount_req q = { .ro = -1 };
	const char *pos[2] = { NULL, NULL };
	int npos = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-o"))
			i++;
		else if (argv[i][0] != '-' && npos < 2)
			pos[npos++] = argv[i];
	}
	(void)has_remount(argc, argv, remount_word, &q);
	if (npos < 2) {
		fprintf(stderr, "usage: recon-fuse -o remount[,ro|rw][,...] DEVICE MOUNTPOINT\n");
		return 1;
	}
	const char *mnt = pos[1];
	struct kmount k;
	uint64_t id;
	int fd = open(mnt, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fd_mount_id(fd, &id) || read_kmount(id, NULL, &k) || !k.found || !k.ours) {
		fprintf(stderr, "recon-fuse: remount: %s is not a recon-fuse mount\n", mnt);
		if (fd >= 0)
			close(fd);
		return 1;
	}
	if (q.ro == 1)
		q.attr.attr_set |= MOUNT_ATTR_RDONLY;
	else if (q.ro == 0)
		q.attr.attr_clr |= MOUNT_ATTR_RDONLY;
	int ret = 0;
	/* read-only: the superblock first (its reconfiguration writes the
	 * page cache back, and refuses while files are open for writing) */
	if (q.ro == 1)
		ret = set_sb_ro(fd, true);
	if (!ret && (q.attr.attr_set || q.attr.attr_clr) &&
	    mount_setattr(fd, "", AT_EMPTY_PATH, &q.attr, sizeof(q.attr)))
		ret = -errno;
	if (!ret && q.ro == 0)
		ret = set_sb_ro(fd, false);
	close(fd);
	if (ret == -EBUSY && q.ro == 1) {
		fprintf(stderr, "recon-fuse: %s: cannot remount read-only: files are open for "
			"writing on it\n", mnt);
		return 1;
	}
	if (ret) {
		fprintf(stderr, "recon-fuse: %s: remount failed: %s%s\n", mnt, strerror(-ret),
			ret == -EPERM ? " (a remount needs root)" : "");
		return 1;
	}
	ret = tell_daemon(mnt);
	if (q.ro == 1 && ret) {
		fprintf(stderr, "recon-fuse: %s: remounted read-only, but the daemon's last commit "
			"failed (%s): see its messages\n", mnt, strerror(-ret));
		return 1;
	}
	if (q.ro == 0 && (read_kmount(id, NULL, &k) || k.sb_ro || k.mnt_ro)) {
		fprintf(stderr, "recon-fuse: %s: cannot remount read-write: the daemon serves it "
			"read-only (mounted so, or after a rejected commit: see its messages); "
			"unmount and mount it again\n", mnt);
		return 1;
	}
	return 0;
}
