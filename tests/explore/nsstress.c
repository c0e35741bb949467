/*
 * nsstress: a seeded multi-process namespace stressor in the design of
 * xfstests' fsstress.
 *
 * N processes share one small tree (names drawn from a few dozen, so they
 * collide): create, mkdir, rename (files and directories, across
 * directories, over existing targets), link, unlink, rmdir, symlink,
 * rewrite/truncate of small files, setxattr/removexattr, fsync, readdir.
 * Every regular file carries its own header (seed, process, file id,
 * generation, length) and content derived from it; only the process that
 * created a file rewrites it, so after any interleaving each file must match
 * its header.  Verification (-V) walks the tree: every file against its
 * header, every symlink target against its own length tag, every xattr value
 * well formed, and each inode's st_nlink against the names found for it.
 *
 *   nsstress [-S seed] [-p procs] [-N ops] [-O outcomes] [-s] [-H] DIR    run
 *   nsstress -V DIR                                                  verify
 * -s: no inode another process may have looked up is freed under it: opens,
 * xattrs and link sources only in the process's own directory o<N>, no
 * rmdir, no directory renames (FUSE servers must keep a looked-up inode until
 * the kernel forgets it; this mode leaves that out).
 * -H: orphans at scale: files unlinked while open (hundreds held per
 * process, their content checked through the descriptor before it closes;
 * those still held at the end close as the process exits, racing whatever
 * follows, such as an unmount), and writes far past EOF (gigabytes) followed
 * at once by the file's unlink or its truncate back to its header.
 * -O (one process only): every op's outcome (return, errno, stat of the
 * target, directory listings) for the differential runs.
 * Exit: 0 pass, 1 failure (unexpected errno or a verify mismatch), 2 usage.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "seeded_rng.h"

#define MAGIC  0x5453534eu     /* "NSST" */
#define HDR    32
#define MAXLEN (300u << 10)    /* past 12 blocks of 4 KiB: some files reach indirect blocks */

struct header { uint32_t magic, seed, proc, fid, gen, len, spare, sum; };

static uint32_t seed = 1, proc_id;
static uint64_t rng_state, op_n;
static FILE *outf;
static const char *root;
static uint32_t next_fid;

static uint64_t rnd(void) { return seeded_next(&rng_state); }
static uint32_t rnd_below(uint32_t n) { return n ? (uint32_t)(rnd() % n) : 0; }

static void __attribute__((noreturn, format(printf, 1, 2))) failure(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "nsstress: FAIL seed %u proc %u op %" PRIu64 ": ", seed, proc_id, op_n);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (outf)
		fflush(outf);
	exit(1);
}

static uint8_t content_byte(const struct header *h, uint32_t o)
{
	uint32_t x = h->seed * 2654435761u ^ h->proc * 40503u ^ h->fid * 0x9e3779b1u ^
		     h->gen * 0x85ebca6bu ^ (o / 4) * 0xc2b2ae35u;
	x ^= x >> 15;
	x *= 0x2c1b3c6du;
	x ^= x >> 12;
	return (uint8_t)(x >> ((o & 3) * 8));
}

static uint32_t header_sum(const struct header *h)
{
	return (h->magic ^ h->seed * 3 ^ h->proc * 5 ^ h->fid * 7 ^ h->gen * 11 ^ h->len * 13) |
	       1;
}

/* ---- paths: a fixed small namespace so that processes collide ---- */

static void rand_dir(char *p, size_t n)
{
	uint32_t r = rnd_below(20);   /* shallow directories exist more often */
	switch (r < 6 ? 0 : r < 13 ? 1 : r < 18 ? 2 : 3) {
	case 0: snprintf(p, n, "%s", root); break;
	case 1: snprintf(p, n, "%s/d%u", root, rnd_below(4)); break;
	case 2: snprintf(p, n, "%s/d%u/d%u", root, rnd_below(4), rnd_below(4)); break;
	default: snprintf(p, n, "%s/d%u/d%u/d%u", root, rnd_below(4), rnd_below(4), rnd_below(4));
	}
}
static void rand_path(char *p, size_t n, char kind)
{
	char d[512];
	rand_dir(d, sizeof d);
	snprintf(p, n, "%s/%c%u", d, kind, rnd_below(kind == 'f' ? 12 : 4));
}
/* -s: a name in this process's own directory, which no other process
 * addresses (so no other process can remove a name this one looks up) */
static bool safe_mode;
static void own_path(char *p, size_t n, char kind)
{
	snprintf(p, n, "%s/o%u/%c%u", root, proc_id, kind, rnd_below(kind == 'f' ? 12 : 4));
}
/* the target of an op on an inode the kernel looked up (open, xattr, link) */
static void inode_path(char *p, size_t n, char kind)
{
	if (safe_mode || rnd_below(4) == 0)
		own_path(p, n, kind);
	else
		rand_path(p, n, kind);
}

/* a name of any kind (for rename/unlink/link sources) */
static void rand_any(char *p, size_t n)
{
	static const char kinds[] = "fffds";
	rand_path(p, n, kinds[rnd_below(5)]);
}

/* ---- outcomes ---- */

static const char *rel(const char *p)
{
	size_t l = strlen(root);
	return strncmp(p, root, l) ? p : p[l] ? p + l + 1 : ".";
}

static void outcome(const char *op, const char *a, const char *b, long ret, int err)
{
	if (!outf)
		return;
	fprintf(outf, "%" PRIu64 " %s %s%s%s = %ld %s", op_n, op, rel(a), b ? " " : "",
		b ? rel(b) : "", ret, err ? strerrorname_np(err) : "-");
	struct stat st;
	for (int i = 0; i < 2; i++) {
		const char *p = i ? b : a;
		if (!p)
			continue;
		if (lstat(p, &st))
			fprintf(outf, " [%s]", strerrorname_np(errno));
		else
			fprintf(outf, " [mode=%o size=%lld nlink=%lu blocks=%lld]", st.st_mode,
				S_ISDIR(st.st_mode) ? -1LL : (long long)st.st_size,
				(unsigned long)st.st_nlink,
				S_ISDIR(st.st_mode) ? -1LL : (long long)st.st_blocks);
	}
	fputc('\n', outf);
}

/* errnos a racing namespace legitimately produces; anything else fails */
static void expect_errno(const char *op, const char *a, int err)
{
	if (err == EPERM && !strcmp(op, "link"))
		return;   /* a directory as the source (checked by op_link) */
	switch (err) {
	case ENOENT: case EEXIST: case ENOTEMPTY: case ENOTDIR: case EISDIR: case EINVAL:
	case ENODATA: case EBUSY: case ELOOP: case ENAMETOOLONG:   /* a symlink followed */
		return;
	default:
		failure("%s %s: unexpected %s", op, a, strerror(err));
	}
}

#define CALL(op, a, b, expr) do { \
	long r_ = (long)(expr); int e_ = r_ < 0 ? errno : 0; \
	if (r_ < 0) expect_errno(op, a, e_); \
	outcome(op, a, b, r_, e_); \
} while (0)

/* ---- file content ---- */

static uint8_t *wbuf;

static int write_content(int fd, uint32_t fid, uint32_t gen, uint32_t len)
{
	struct header h = { MAGIC, seed, proc_id, fid, gen, len, 0, 0 };
	h.sum = header_sum(&h);
	memcpy(wbuf, &h, HDR);
	for (uint32_t o = HDR; o < len; o++)
		wbuf[o] = content_byte(&h, o);
	if (ftruncate(fd, len))
		return -1;
	ssize_t w = pwrite(fd, wbuf, len, 0);
	if (w >= 0 && w != (ssize_t)len) {
		errno = EIO;
		return -1;
	}
	return w < 0 ? -1 : 0;
}

static void op_create(void)
{
	char p[600];
	if (rnd_below(3) == 0)
		own_path(p, sizeof p, 'f');
	else
		rand_path(p, sizeof p, 'f');
	int fd = open(p, O_CREAT | O_EXCL | O_RDWR, 0644);
	if (fd < 0) {
		CALL("create", p, NULL, -1);
		return;
	}
	uint32_t len = rnd_below(4) ? HDR + rnd_below(8192) : HDR + rnd_below(MAXLEN - HDR);
	if (rnd_below(8) == 0)
		len = 0;
	int r = len ? write_content(fd, ++next_fid, 0, len) : 0;
	if (r)
		failure("write %s: %s", p, strerror(errno));
	close(fd);
	outcome("create", p, NULL, len, 0);
}

/* rewrite with a new generation and length, only files this process created */
static void op_rewrite(void)
{
	char p[600];
	inode_path(p, sizeof p, 'f');
	int fd = open(p, O_RDWR | O_NOFOLLOW);
	if (fd < 0) {
		CALL("rewrite", p, NULL, -1);
		return;
	}
	struct header h;
	ssize_t n = pread(fd, &h, HDR, 0);
	if (n == HDR && h.magic == MAGIC && h.proc == proc_id && h.seed == seed) {
		uint32_t len = HDR + (rnd_below(2) ? rnd_below(16384) : rnd_below(MAXLEN - HDR));
		if (write_content(fd, h.fid, h.gen + 1, len))
			failure("rewrite %s: %s", p, strerror(errno));
		if (rnd_below(4) == 0 && fsync(fd))
			failure("fsync %s: %s", p, strerror(errno));
		outcome("rewrite", p, NULL, len, 0);
	} else {
		outcome("rewrite-skip", p, NULL, n, 0);
	}
	close(fd);
}

static void op_mkdir(void)
{
	char p[600];
	rand_path(p, sizeof p, 'd');
	CALL("mkdir", p, NULL, mkdir(p, 0755));
}

static void op_rmdir(void)
{
	char p[600];
	rand_path(p, sizeof p, 'd');
	if (safe_mode)   /* directories stay: no parent a lookup found is freed */
		return;
	CALL("rmdir", p, NULL, rmdir(p));
}

static void op_unlink(void)
{
	char p[600];
	rand_any(p, sizeof p);
	if (p[strlen(p) - 2] == 'd')   /* files and symlinks */
		p[strlen(p) - 2] = 'f';
	CALL("unlink", p, NULL, unlink(p));
}

static void op_rename(void)
{
	char a[600], b[600];
	char kind = safe_mode ? "ffs"[rnd_below(3)] : "ffds"[rnd_below(4)];
	rand_path(a, sizeof a, kind);
	rand_path(b, sizeof b, kind);   /* same kind: over an existing target works */
	if (rnd_below(6) == 0)
		rand_any(b, sizeof b);
	CALL("rename", a, b, rename(a, b));
}

static bool racing;   /* more than one process works on the tree */

static void op_link(void)
{
	char a[600], b[600];
	inode_path(a, sizeof a, rnd_below(4) ? 'f' : 's');
	rand_path(b, sizeof b, 'f');
	int r = link(a, b);
	/* EPERM: the source is a directory (renamed onto a file name).  With
	 * other processes renaming, the name may hold something else by the
	 * time we look, so only a lone process can tell. */
	if (r && errno == EPERM && !racing) {
		struct stat st;
		if (lstat(a, &st) || !S_ISDIR(st.st_mode))
			failure("link %s %s: EPERM but the source is not a directory", a, b);
	}
	CALL("link", a, b, r);
}

/* a symlink target tags its own length: "L<len>:" then filler */
static void op_symlink(void)
{
	char p[600], t[400];
	rand_path(p, sizeof p, 's');
	uint32_t len = rnd_below(2) ? 8 + rnd_below(50) : 61 + rnd_below(300);
	int h = snprintf(t, sizeof t, "L%u:", len);
	for (uint32_t i = h; i < len; i++)
		t[i] = 'a' + (i * 7 + proc_id) % 26;
	t[len] = 0;
	CALL("symlink", p, NULL, symlink(t, p));
}

static void op_xattr(void)
{
	char p[600], name[32], val[128];
	if (rnd_below(3))
		inode_path(p, sizeof p, 'f');
	else
		rand_dir(p, sizeof p);
	snprintf(name, sizeof name, "user.k%u", rnd_below(4));
	if (rnd_below(3) == 0) {
		CALL("removexattr", p, NULL, removexattr(p, name));
		return;
	}
	uint32_t len = 8 + rnd_below(100);
	int h = snprintf(val, sizeof val, "X%u:", len);
	for (uint32_t i = h; i < len; i++)
		val[i] = '0' + i % 10;
	CALL("setxattr", p, NULL, setxattr(p, name, val, len, 0));
}

static void op_fsync(void)
{
	char p[600];
	if (rnd_below(2))
		rand_dir(p, sizeof p);
	else
		inode_path(p, sizeof p, 'f');
	int fd = open(p, O_RDONLY | O_NOFOLLOW);
	if (fd < 0) {
		CALL("fsync", p, NULL, -1);
		return;
	}
	CALL("fsync", p, NULL, fsync(fd));
	close(fd);
}

/* ---- -H: orphans at scale ---- */

static bool orphan_mode;
#define HELD_MAX 300
static struct held { int fd; uint32_t fid, len; } held[HELD_MAX];
static unsigned nheld;

/* The content of an unlinked file read back through its descriptor. */
static void check_held(const struct held *h)
{
	struct header want = { MAGIC, seed, proc_id, h->fid, 0, h->len, 0, 0 };
	want.sum = header_sum(&want);
	uint32_t len = h->len < 65536 ? h->len : 65536;
	uint8_t *b = malloc(len ? len : 1);
	if (!b)
		failure("out of memory");
	ssize_t n = pread(h->fd, b, len, 0);
	if (n != (ssize_t)len)
		failure("read of an unlinked file (fid %u): %zd of %u bytes", h->fid, n, len);
	if (len >= HDR && memcmp(b, &want, HDR))
		failure("unlinked file (fid %u): header changed", h->fid);
	for (uint32_t o = HDR; o < len; o++)
		if (b[o] != content_byte(&want, o))
			failure("unlinked file (fid %u): byte %u changed", h->fid, o);
	free(b);
}

static void release_held(unsigned i)
{
	check_held(&held[i]);
	if (close(held[i].fd))
		failure("close of an unlinked file: %s", strerror(errno));
	held[i] = held[--nheld];
}

/* a far offset: 1 to 9 GiB, past the double-indirect range of 1 KiB blocks
 * and within the largest file they allow (16 GiB) */
static off_t far_offset(void)
{
	return ((off_t)1 << 30) * (1 + rnd_below(8)) + (off_t)rnd_below(1u << 18) * 4096;
}

/* create in the own directory, write, unlink while open, hold */
static void op_hold(void)
{
	char p[600];
	own_path(p, sizeof p, 'f');
	int fd = open(p, O_CREAT | O_EXCL | O_RDWR, 0644);
	if (fd < 0) {
		CALL("hold-create", p, NULL, -1);
		return;
	}
	uint32_t len = HDR + (rnd_below(4) ? rnd_below(4096) : rnd_below(MAXLEN - HDR));
	struct held h = { fd, ++next_fid, len };
	if (write_content(fd, h.fid, 0, len))
		failure("write %s: %s", p, strerror(errno));
	if (rnd_below(3) == 0 && pwrite(fd, "far", 3, far_offset()) != 3)
		failure("far write %s: %s", p, strerror(errno));
	if (unlink(p))
		failure("unlink %s: %s", p, strerror(errno));
	if (nheld == HELD_MAX)
		release_held(rnd_below(nheld));
	held[nheld++] = h;
	/* now and then many go at once */
	if (rnd_below(50) == 0)
		for (unsigned n = nheld / 2; n; n--)
			release_held(rnd_below(nheld));
	else if (nheld && rnd_below(3) == 0)
		release_held(rnd_below(nheld));
	outcome("hold", p, NULL, len, 0);
}

/* a write far past EOF, then at once the unlink or a truncate back */
static void op_far(void)
{
	char p[600];
	own_path(p, sizeof p, 'f');
	int fd = open(p, O_CREAT | O_EXCL | O_RDWR, 0644);
	if (fd < 0) {
		CALL("far-create", p, NULL, -1);
		return;
	}
	uint32_t len = HDR + rnd_below(8192);
	if (write_content(fd, ++next_fid, 0, len))
		failure("write %s: %s", p, strerror(errno));
	for (unsigned i = rnd_below(3); i < 3; i++)
		if (pwrite(fd, "far", 3, far_offset()) != 3)
			failure("far write %s: %s", p, strerror(errno));
	int r = rnd_below(2) ? unlink(p) : ftruncate(fd, len);
	if (r)
		failure("after a far write %s: %s", p, strerror(errno));
	close(fd);
	outcome("far", p, NULL, len, 0);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void op_list(void)
{
	char p[600];
	rand_dir(p, sizeof p);
	DIR *d = opendir(p);
	if (!d) {
		CALL("readdir", p, NULL, -1);
		return;
	}
	char *names[256];
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < 256)
		names[n++] = strdup(e->d_name);
	closedir(d);
	qsort(names, n, sizeof *names, cmp_str);
	if (outf) {
		fprintf(outf, "%" PRIu64 " readdir %s:", op_n, rel(p));
		for (int i = 0; i < n; i++)
			fprintf(outf, " %s", names[i]);
		fputc('\n', outf);
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
}

static void run(uint64_t nops)
{
	static void (*const ops[])(void) = {
		op_create, op_create, op_create, op_rewrite, op_rewrite, op_mkdir, op_mkdir,
		op_rmdir, op_unlink, op_unlink, op_rename, op_rename, op_rename, op_link,
		op_symlink, op_xattr, op_xattr, op_fsync, op_list };
	char own[600];
	wbuf = malloc(MAXLEN);
	if (!wbuf)
		failure("out of memory");
	snprintf(own, sizeof own, "%s/o%u", root, proc_id);
	if (mkdir(own, 0755) && errno != EEXIST)
		failure("mkdir %s: %s", own, strerror(errno));
	static void (*const orphan_ops[])(void) = {
		op_create, op_rewrite, op_mkdir, op_rmdir, op_unlink, op_rename, op_link,
		op_fsync, op_list, op_hold, op_hold, op_hold, op_hold, op_far, op_far };
	for (op_n = 1; op_n <= nops; op_n++)
		if (orphan_mode)
			orphan_ops[rnd_below(sizeof orphan_ops / sizeof orphan_ops[0])]();
		else
			ops[rnd_below(sizeof ops / sizeof ops[0])]();
	/* with -H the files still held close at exit, racing what follows */
	free(wbuf);
}

/* ---- verification ---- */

struct seen { dev_t dev; ino_t ino; nlink_t nlink; uint32_t names; char path[4096]; };
static struct seen *seen;
static size_t nseen, capseen;
static uint64_t vfiles, vdirs, vlinks, vbytes;
static int vfail;

static void vfailf(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "nsstress: verify: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	vfail++;
}

static void note_name(const char *p, const struct stat *st)
{
	for (size_t i = 0; i < nseen; i++)
		if (seen[i].ino == st->st_ino && seen[i].dev == st->st_dev) {
			seen[i].names++;
			return;
		}
	if (nseen == capseen) {
		capseen = capseen ? 2 * capseen : 256;
		seen = realloc(seen, capseen * sizeof *seen);
		if (!seen)
			failure("out of memory");
	}
	struct seen *s = &seen[nseen++];
	s->dev = st->st_dev, s->ino = st->st_ino, s->nlink = st->st_nlink, s->names = 1;
	snprintf(s->path, sizeof s->path, "%s", p);
}

static void check_xattrs(const char *p)
{
	char list[1024], val[256];
	ssize_t n = llistxattr(p, list, sizeof list);
	if (n < 0) {
		vfailf("%s: listxattr: %s", p, strerror(errno));
		return;
	}
	for (ssize_t i = 0; i < n; i += strlen(list + i) + 1) {
		ssize_t l = lgetxattr(p, list + i, val, sizeof val - 1);
		unsigned want = 0;
		if (l < 0 || strncmp(list + i, "user.k", 6)) {
			vfailf("%s: xattr %s unreadable or unexpected", p, list + i);
			continue;
		}
		val[l] = 0;
		if (sscanf(val, "X%u:", &want) != 1 || want != (unsigned)l)
			vfailf("%s: xattr %s value '%s' does not match its length tag", p,
			       list + i, val);
	}
}

static void check_file(const char *p, const struct stat *st)
{
	vfiles++;
	if (st->st_size == 0)
		return;
	int fd = open(p, O_RDONLY);
	if (fd < 0) {
		vfailf("%s: open: %s", p, strerror(errno));
		return;
	}
	uint8_t *b = malloc(st->st_size);
	ssize_t n = b ? pread(fd, b, st->st_size, 0) : -1;
	close(fd);
	struct header h;
	if (n != st->st_size) {
		vfailf("%s: read %zd of %lld bytes", p, n, (long long)st->st_size);
	} else if (n < HDR || (memcpy(&h, b, HDR), h.magic != MAGIC || h.sum != header_sum(&h))) {
		vfailf("%s: no valid header (size %zd)", p, n);
	} else if (h.len != n) {
		vfailf("%s: size %zd but its header (proc %u file %u gen %u) says %u", p, n,
		       h.proc, h.fid, h.gen, h.len);
	} else {
		for (uint32_t o = HDR; o < h.len; o++)
			if (b[o] != content_byte(&h, o)) {
				uint32_t e = o;
				while (e < h.len && b[e] != content_byte(&h, e))
					e++;
				vfailf("%s: content differs from its header (seed %u proc %u file %u"
				       " gen %u len %u) at [%u, %u)%s", p, h.seed, h.proc, h.fid,
				       h.gen, h.len, o, e, b[o] == 0 ? " (zeros)" : "");
				break;
			}
		vbytes += n;
	}
	free(b);
}

static void walk(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d) {
		vfailf("%s: opendir: %s", dir, strerror(errno));
		return;
	}
	struct dirent *e;
	uint32_t subdirs = 0;
	vdirs++;
	check_xattrs(dir);
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    !strcmp(e->d_name, "lost+found"))
			continue;
		char p[4096];
		struct stat st;
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		if (lstat(p, &st)) {
			vfailf("%s: lstat: %s", p, strerror(errno));
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			subdirs++;
			walk(p);
			continue;
		}
		note_name(p, &st);
		if (S_ISREG(st.st_mode)) {
			check_xattrs(p);
			check_file(p, &st);
		} else if (S_ISLNK(st.st_mode)) {
			char t[512];
			unsigned want = 0;
			ssize_t l = readlink(p, t, sizeof t - 1);
			vlinks++;
			if (l < 0) {
				vfailf("%s: readlink: %s", p, strerror(errno));
				continue;
			}
			t[l] = 0;
			if (sscanf(t, "L%u:", &want) != 1 || want != (unsigned)l ||
			    (uint64_t)st.st_size != (uint64_t)l)
				vfailf("%s: symlink target '%.40s...' (%zd bytes, size %lld) does not"
				       " match its length tag", p, t, l, (long long)st.st_size);
		} else {
			vfailf("%s: unexpected file type %o", p, st.st_mode & S_IFMT);
		}
	}
	closedir(d);
	struct stat st;
	if (!stat(dir, &st) && st.st_nlink != 2 + subdirs + (!strcmp(dir, root) ? 1 : 0) &&
	    strcmp(dir, root))
		vfailf("%s: st_nlink %lu but it has %u subdirectories", dir,
		       (unsigned long)st.st_nlink, subdirs);
}

static int verify(void)
{
	walk(root);
	for (size_t i = 0; i < nseen; i++)
		if (seen[i].nlink != seen[i].names)
			vfailf("%s: st_nlink %lu but %u names found", seen[i].path,
			       (unsigned long)seen[i].nlink, seen[i].names);
	printf("nsstress: verify %s: %" PRIu64 " files (%" PRIu64 " bytes), %" PRIu64
	       " directories, %" PRIu64 " symlinks, %d failures\n", root, vfiles, vbytes, vdirs,
	       vlinks, vfail);
	return vfail ? 1 : 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: nsstress [-S seed] [-p procs] [-N ops] [-O outcomes] [-s] [-H] DIR |"
		" nsstress -V DIR\n");
	return 2;
}

int main(int argc, char **argv)
{
	int c, procs = 4;
	uint64_t nops = 1000;
	bool do_verify = false;
	const char *outname = NULL;
	seed = (uint32_t)time(NULL);
	while ((c = getopt(argc, argv, "S:p:N:O:VsH")) != -1) {
		switch (c) {
		case 'S': seed = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'p': procs = atoi(optarg); break;
		case 'N': nops = strtoull(optarg, NULL, 0); break;
		case 'O': outname = optarg; break;
		case 'V': do_verify = true; break;
		case 's': safe_mode = true; break;
		case 'H': orphan_mode = true; break;
		default: return usage();
		}
	}
	if (optind + 1 != argc || procs < 1 || procs > 64 || (outname && procs != 1))
		return usage();
	root = argv[optind];
	if (do_verify)
		return verify();
	if (outname && !(outf = fopen(outname, "w"))) {
		perror(outname);
		return 2;
	}
	printf("nsstress: seed %u, %d processes x %" PRIu64 " ops in %s\n", seed, procs, nops,
	       root);
	fflush(stdout);
	racing = procs > 1;
	if (procs == 1) {
		proc_id = 0;
		rng_state = seed;
		run(nops);
		if (outf)
			fclose(outf);
		return 0;
	}
	pid_t pids[64];
	for (int i = 0; i < procs; i++) {
		pids[i] = fork();
		if (pids[i] < 0) {
			perror("fork");
			return 1;
		}
		if (pids[i] == 0) {
			proc_id = i;
			rng_state = (uint64_t)seed * 1000003u + i;
			run(nops);
			_exit(0);
		}
	}
	int bad = 0;
	for (int i = 0; i < procs; i++) {
		int st;
		if (waitpid(pids[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
			bad++;
	}
	if (bad)
		fprintf(stderr, "nsstress: seed %u: %d of %d processes failed\n", seed, bad, procs);
	return bad ? 1 : 0;
}
