/*
 * fuse/claim.c - claim the image for this daemon before anything opens it:
 * one writer per image file or any number of readers, and nothing served
 * while a loop device serves the same file.
 *
 * The claim is a BSD lock (flock) on a descriptor of its own, exclusive for
 * a read-write mount and shared for a read-only one, held until the process
 * exits.  A BSD lock belongs to its open file description, so libext2fs
 * opening and closing the image (several times at mount) does not drop it,
 * as the close of any descriptor drops a POSIX lock; and /proc/locks names
 * the pid holding it, which it does not for an OFD lock.  Only recon-fuse
 * takes it: a loop device attached after the claim cannot be refused (the
 * README's Limits say so).  Other block devices need no claim: the I/O
 * manager opens them O_EXCL, which the kernel enforces against everyone.
 */
#include "rfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

/* After umount a daemon still writes what is left, then exits: a claim
 * waits this long for a recon-fuse that holds the image but no longer has
 * it mounted, so that "umount; mount" works. */
#define CLAIM_WAIT_MS 30000
#define CLAIM_POLL_MS 100
#define CLAIM_UNSEEN_RETRIES 5	/* tries when the lock is held but no holder is listed */

static int claim_fd = -1;	/* never closed: the lock lasts as long as the process */

struct file_id {
	dev_t dev;
	ino_t ino;
};

static bool same_file(const struct file_id *a, const struct stat *st)
{
	return a->dev == st->st_dev && a->ino == st->st_ino;
}

/* The first line of a small file (sysfs, procfs) without its newline. */
static bool read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	bool ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	if (ok)
		buf[strcspn(buf, "\n")] = 0;
	return ok;
}

/* Undo mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *out = s;
	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = 0;
}

/* One line of /proc/self/mountinfo, split in place:
 * ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER */
struct mount_line {
	dev_t dev;
	char *mountpoint, *fstype, *source;
};

static bool split_mount_line(char *line, struct mount_line *m)
{
	char *save = NULL, *f[6];
	unsigned maj, min;

	for (int i = 0; i < 6; i++)
		if (!(f[i] = strtok_r(i ? NULL : line, " \n", &save)))
			return false;
	char *t;
	while ((t = strtok_r(NULL, " \n", &save)) && strcmp(t, "-"))
		;
	if (!t || sscanf(f[2], "%u:%u", &maj, &min) != 2)
		return false;
	m->fstype = strtok_r(NULL, " \n", &save);
	m->source = strtok_r(NULL, " \n", &save);
	if (!m->fstype || !m->source)
		return false;
	m->dev = makedev(maj, min);
	m->mountpoint = f[4];
	unescape(m->mountpoint);
	unescape(m->source);
	return true;
}

/* The first mount point (in this process's namespace) for which pick()
 * answers true, copied to mp; false if none. */
static bool find_mount(bool (*pick)(const struct mount_line *m, const void *arg), const void *arg,
		       char *mp, size_t len)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	bool found = false;

	if (!f)
		return false;
	while (!found && getline(&line, &cap, f) > 0) {
		struct mount_line m;
		if (split_mount_line(line, &m) && pick(&m, arg)) {
			snprintf(mp, len, "%s", m.mountpoint);
			found = true;
		}
	}
	free(line);
	fclose(f);
	return found;
}

static bool mount_of_dev(const struct mount_line *m, const void *arg)
{
	return m->dev == *(const dev_t *)arg;
}

/* a recon-fuse mount whose source (its fsname, the image's absolute path)
 * is the image; only ours are stat'ed, so no other file system's hang */
static bool mount_of_image(const struct mount_line *m, const void *arg)
{
	struct stat st;
	return !strcmp(m->fstype, "fuse.recon-fuse") && m->source[0] == '/' &&
	       !stat(m->source, &st) && same_file(arg, &st);
}

struct loop_dev {
	char name[NAME_MAX + 1];	/* loopN */
	dev_t rdev;			/* its device number */
	bool read_only;
	struct file_id backing;
	char backing_path[PATH_MAX];	/* as sysfs shows it (may be stale) */
};

/* What the bound loop device NAME serves.  LOOP_GET_STATUS64 gives the
 * backing file by identity; a user who may not open the device gets the
 * file at the path sysfs shows (a renamed or deleted one goes unseen).
 * false: unbound, or cannot be told. */
static bool loop_backing(const char *name, struct loop_dev *ld)
{
	char path[PATH_MAX], line[64];
	unsigned maj, min;
	struct stat st;

	snprintf(ld->name, sizeof(ld->name), "%s", name);
	snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", name);
	if (!read_line(path, ld->backing_path, sizeof(ld->backing_path)))
		return false;
	snprintf(path, sizeof(path), "/sys/block/%s/dev", name);
	if (!read_line(path, line, sizeof(line)) || sscanf(line, "%u:%u", &maj, &min) != 2)
		return false;
	ld->rdev = makedev(maj, min);
	snprintf(path, sizeof(path), "/sys/block/%s/ro", name);
	ld->read_only = read_line(path, line, sizeof(line)) && !strcmp(line, "1");

	snprintf(path, sizeof(path), "/dev/%s", name);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd >= 0) {
		struct loop_info64 li;
		int ret = ioctl(fd, LOOP_GET_STATUS64, &li);
		int err = errno;
		close(fd);
		if (ret == 0) {
			/* the kernel's encoding of a dev_t (12-bit major, 20-bit minor) */
			uint64_t d = li.lo_device;
			ld->backing.dev = makedev((d & 0xfff00) >> 8, (d & 0xff) | ((d >> 12) & 0xfff00));
			ld->backing.ino = (ino_t)li.lo_inode;
			return true;
		}
		if (err == ENXIO)
			return false;	/* detached meanwhile */
	}
	if (stat(ld->backing_path, &st))
		return false;
	ld->backing.dev = st.st_dev;
	ld->backing.ino = st.st_ino;
	return true;
}

/* The loop device with number rdev, if it is one and bound. */
static bool loop_of_rdev(dev_t rdev, struct loop_dev *ld)
{
	char path[64], real[PATH_MAX];

	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u", major(rdev), minor(rdev));
	if (!realpath(path, real))
		return false;
	const char *name = strrchr(real, '/');
	return name && !strncmp(name + 1, "loop", 4) && loop_backing(name + 1, ld);
}

/*
 * No loop device may serve the image beside us.  Read-write: none at all
 * (the kernel's driver, or anyone writing to the device, would write under
 * our feet, and what we write corrupts the kernel's mount).  Read-only: only
 * a read-only loop device, through which nothing can write (its mounts are
 * read-only too); a writable one may be mounted read-write, or written by
 * dd or mkfs, at any moment after our check, whatever its state now.
 * self: the loop device that is the image, when it is one.  0 or -1.
 */
static int check_loops(const char *dev, const struct file_id *img, const char *self, bool ro)
{
	DIR *d = opendir("/sys/block");
	struct dirent *de;
	int ret = 0;

	if (!d)
		return 0;
	while (!ret && (de = readdir(d))) {
		struct loop_dev ld;
		char mp[PATH_MAX];
		if (strncmp(de->d_name, "loop", 4) || !strcmp(de->d_name, self) ||
		    !loop_backing(de->d_name, &ld) || ld.backing.dev != img->dev ||
		    ld.backing.ino != img->ino || (ro && ld.read_only))
			continue;
		bool mounted = find_mount(mount_of_dev, &ld.rdev, mp, sizeof(mp));
		fprintf(stderr, "recon-fuse: %s is attached to the loop device /dev/%s%s%s%s, through "
			"which the kernel %s it; %s%s%slosetup -d /dev/%s first%s\n", dev, ld.name,
			mounted ? " (mounted on " : "", mounted ? mp : "", mounted ? ")" : "",
			ro ? "may write" : "reads and writes", mounted ? "umount " : "",
			mounted ? mp : "", mounted ? " and " : "", ld.name,
			ro ? " (or attach it read-only: losetup -r)" : "");
		ret = -1;
	}
	closedir(d);
	return ret;
}

/* The pid holding a BSD lock on the file (0 if /proc/locks does not say)
 * and whether its lock is exclusive; an exclusive holder is named first. */
static pid_t lock_holder(const struct file_id *img, bool *exclusive)
{
	FILE *f = fopen("/proc/locks", "re");
	char line[256];
	pid_t holder = 0;

	*exclusive = false;
	if (!f)
		return 0;
	/* "1: FLOCK  ADVISORY  WRITE 1234 fe:00:5678 0 EOF"; waiters ("->") fail the scan */
	while (fgets(line, sizeof(line), f)) {
		char kind[16], mode[16];
		int pid;
		unsigned maj, min;
		unsigned long long ino;
		const char *p = strchr(line, ':');
		if (!p || sscanf(p + 1, " %15s %*15s %15s %d %x:%x:%llu", kind, mode, &pid, &maj, &min,
				 &ino) != 6)
			continue;
		if (strcmp(kind, "FLOCK") || makedev(maj, min) != img->dev || ino != img->ino ||
		    pid <= 0 || *exclusive)
			continue;
		holder = pid;
		*exclusive = !strcmp(mode, "WRITE");
	}
	fclose(f);
	return holder;
}

/* The refusal: who holds the image, as far as can be told. */
static void say_held(const char *dev, bool ro, pid_t pid, const char *comm, bool exclusive,
		     const char *mp, unsigned waited_ms)
{
	if (pid > 0 && !strcmp(comm, "recon-fuse") && mp)
		fprintf(stderr, "recon-fuse: %s is already served %s by another recon-fuse (pid %d, "
			"mounted on %s); %sunmount it first (fusermount3 -u %s)\n", dev,
			exclusive ? "read-write" : "read-only", (int)pid, mp,
			!ro && !exclusive ? "mount it read-only too (-o ro), or " : "", mp);
	else if (pid > 0 && !strcmp(comm, "recon-fuse"))
		fprintf(stderr, "recon-fuse: %s is still held by recon-fuse (pid %d) after %u s, with "
			"no mount of it seen here; wait for that daemon to exit\n", dev, (int)pid,
			waited_ms / 1000);
	else if (pid > 0)
		fprintf(stderr, "recon-fuse: %s is in use: %s (pid %d) holds a lock on it\n", dev,
			*comm ? comm : "a process", (int)pid);
	else
		fprintf(stderr, "recon-fuse: %s is in use: another process holds a lock on it "
			"(another recon-fuse, perhaps in another mount namespace)\n", dev);
}

/* Take the lock on path (the image file), waiting while the holder is a
 * recon-fuse whose mount is gone (finishing its writes).  0 or -1. */
static int take_lock(const char *dev, const char *path, const struct file_id *img, bool ro)
{
	struct stat st;
	unsigned waited = 0, unseen = 0;
	bool told = false;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	/* an image that cannot be opened is reported by its open; a path that
	 * no longer names the file (a loop device's stale one) is not locked */
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) || !same_file(img, &st)) {
		close(fd);
		return 0;
	}
	for (;;) {
		if (!flock(fd, (ro ? LOCK_SH : LOCK_EX) | LOCK_NB)) {
			claim_fd = fd;
			return 0;
		}
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK) {
			fprintf(stderr, "recon-fuse: %s: cannot lock it (%s); nothing keeps another "
				"recon-fuse from mounting it beside this one\n", dev, strerror(errno));
			close(fd);
			return 0;
		}
		bool exclusive;
		char comm[32] = "", mp[PATH_MAX], procf[64];
		pid_t pid = lock_holder(img, &exclusive);
		if (pid > 0) {
			snprintf(procf, sizeof(procf), "/proc/%d/comm", (int)pid);
			if (!read_line(procf, comm, sizeof(comm)))
				comm[0] = 0;
		}
		bool served = find_mount(mount_of_image, img, mp, sizeof(mp));
		if (pid <= 0 && unseen++ < CLAIM_UNSEEN_RETRIES) {
			/* the holder let go between our try and the look at
			 * /proc/locks (a daemon exiting): try again */
			struct timespec ts = { 0, 10 * 1000000L };
			nanosleep(&ts, NULL);
			continue;
		}
		if (pid <= 0 || strcmp(comm, "recon-fuse") || served || waited >= CLAIM_WAIT_MS) {
			say_held(dev, ro, pid, comm, exclusive, served ? mp : NULL, waited);
			close(fd);
			return -1;
		}
		if (!told)
			fprintf(stderr, "recon-fuse: %s: waiting for recon-fuse (pid %d), which still "
				"holds it, to finish\n", dev, (int)pid);
		told = true;
		struct timespec ts = { 0, CLAIM_POLL_MS * 1000000L };
		nanosleep(&ts, NULL);
		waited += CLAIM_POLL_MS;
	}
}

int rfs_claim_image(const char *dev, bool ro)
{
	struct stat st;
	struct loop_dev self = { .name = "" };
	struct file_id img;
	const char *path = dev;

	if (claim_fd >= 0)
		return 0;
	if (stat(dev, &st))
		return 0;	/* the open that follows names the problem */
	if (S_ISREG(st.st_mode)) {
		img.dev = st.st_dev;
		img.ino = st.st_ino;
	} else if (S_ISBLK(st.st_mode) && loop_of_rdev(st.st_rdev, &self)) {
		/* a loop device is claimed through the file it serves, as that
		 * file mounted directly would be */
		img = self.backing;
		path = self.backing_path;
	} else {
		return 0;
	}
	char what[PATH_MAX + 64];
	if (path == dev)
		snprintf(what, sizeof(what), "%s", dev);
	else
		snprintf(what, sizeof(what), "%s (the loop device of %s)", dev, path);
	if (check_loops(what, &img, self.name, ro))
		return -1;
	return take_lock(what, path, &img, ro);
}
