/*
 * bench/fuse-null.c - what a FUSE file system costs when the file system
 * itself costs nothing: an in-memory tree served by libfuse's low-level API,
 * with the connection recon-fuse asks for (default permissions, POSIX ACLs,
 * READDIRPLUS on every directory read, no writeback cache, recon-fuse's
 * max_background, direct I/O for write-only and O_DIRECT opens and the page
 * cache kept across other opens, 60 s entry and attribute timeouts, FLUSH
 * answered ENOSYS), so that the kernel sends it the same requests: a change
 * to what recon-fuse negotiates (fuse/session.c, set_open_mode in
 * fuse/file.c) belongs here too.  And through recon-fuse's own transport,
 * linked in (fuse/transport.h: transport.c and uring.c): the same INIT reply
 * patches, the same polling after each reply (recon-fuse's poll_us, 50 us:
 * of /dev/fuse, or of each queue's ring), and with -u the same io_uring
 * queues (one per CPU, its thread pinned there, 16 entries each), so that
 * the floor over either transport is that transport doing no work.  File data is not kept: a read
 * returns zeros up to the size.
 * bench/phases runs it as the drivers "fuse-null" (/dev/fuse) and
 * "fuse-null-uring" (-u): the time of a phase on them is the kernel's FUSE
 * client and the round trips alone.
 *
 * usage: fuse-null [-d] [-u] STATE MOUNTPOINT
 *
 * -d: libfuse's debug log of every request on stderr (bench/census counts
 * the requests from it, whichever way they came).
 * -u: requests over io_uring, as recon-fuse -o fuse_uring=on: refused when
 * the kernel does not offer it (/sys/module/fuse/parameters/enable_uring N).
 * $FUSE_NULL_POLL_US: another poll_us (0: never poll, as bench/cpu-per-op
 * runs it, since polling is CPU time that depends on the machine's load).
 *
 * STATE is a file the tree is loaded from at mount (when it exists) and saved
 * to at unmount, so that phases that remount to start cold find what earlier
 * phases made.  Over /dev/fuse one thread serves every client, a request at
 * a time; over io_uring each CPU's queue thread serves its CPU's callers,
 * and the operations take one lock, as recon-fuse's take its file-system
 * lock.  Not for anything but measuring.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE          /* O_DIRECT */
#endif
#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>
#include "transport.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TIMEOUT 60.0

struct dent {
	char *name;
	uint64_t ino;        /* 0: removed (offsets of a directory being read stay put) */
};

struct node {
	struct stat st;      /* st_ino 0: free */
	char *link;          /* symlink target */
	struct dent *ents;   /* directories */
	size_t nents, capents;
};

/* The tree's lock, held by every operation that touches the tree (the
 * ring's queue threads serve at once): TREE_HELD takes it until the end of
 * the enclosing block, reply included. */
static pthread_mutex_t tree_lock = PTHREAD_MUTEX_INITIALIZER;

static pthread_mutex_t *tree_take(void)
{
	pthread_mutex_lock(&tree_lock);
	return &tree_lock;
}

static void tree_release(pthread_mutex_t **held)
{
	pthread_mutex_unlock(*held);
}

#define TREE_HELD pthread_mutex_t *tree_held_ __attribute__((cleanup(tree_release))) = tree_take()

static struct node *nodes;
static size_t nnodes, capnodes;
static const char *state_path;

/* (parent, name) -> index into the parent's entries */
struct hslot {
	uint64_t parent;
	uint64_t ino;
	const char *name;    /* the entry's own copy */
};
static struct hslot *hash;
static size_t hcap, hused;

static uint64_t hname(uint64_t parent, const char *name)
{
	uint64_t h = parent * 0x9E3779B97F4A7C15ull;
	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 0x100000001B3ull;
	return h;
}

static struct hslot *hfind(uint64_t parent, const char *name)
{
	for (size_t i = hname(parent, name) & (hcap - 1);; i = (i + 1) & (hcap - 1)) {
		if (!hash[i].name)
			return &hash[i];
		if (hash[i].parent == parent && hash[i].ino && !strcmp(hash[i].name, name))
			return &hash[i];
	}
}

static void hput(uint64_t parent, const char *name, uint64_t ino);

/* The inode `name` in directory `parent` names, 0 when none. */
static uint64_t child_of(uint64_t parent, const char *name)
{
	struct hslot *s = hfind(parent, name);
	return s->name ? s->ino : 0;
}

static void hgrow(void)
{
	struct hslot *old = hash;
	size_t oldcap = hcap;
	hcap = hcap ? hcap * 2 : 1024;
	hash = calloc(hcap, sizeof(*hash));
	if (!hash)
		abort();
	hused = 0;
	for (size_t i = 0; i < oldcap; i++)
		if (old[i].name && old[i].ino)
			hput(old[i].parent, old[i].name, old[i].ino);
	free(old);
}

static void hput(uint64_t parent, const char *name, uint64_t ino)
{
	if ((hused + 1) * 2 > hcap)
		hgrow();
	struct hslot *s = hfind(parent, name);
	if (!s->name)
		hused++;
	*s = (struct hslot){ .parent = parent, .ino = ino, .name = name };
}

static uint64_t new_node(mode_t mode, const struct fuse_ctx *ctx)
{
	if (nnodes == capnodes) {
		capnodes = capnodes ? capnodes * 2 : 4096;
		nodes = realloc(nodes, capnodes * sizeof(*nodes));
		if (!nodes)
			abort();
	}
	uint64_t ino = nnodes++;
	struct node *n = &nodes[ino];
	memset(n, 0, sizeof(*n));
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	n->st.st_ino = ino;
	n->st.st_mode = mode;
	n->st.st_nlink = S_ISDIR(mode) ? 2 : 1;
	n->st.st_uid = ctx ? ctx->uid : 0;
	n->st.st_gid = ctx ? ctx->gid : 0;
	n->st.st_blksize = 4096;
	n->st.st_atim = n->st.st_mtim = n->st.st_ctim = now;
	return ino;
}

static struct node *get(fuse_ino_t ino)
{
	return ino < nnodes && nodes[ino].st.st_ino ? &nodes[ino] : NULL;
}

static void touch_dir(struct node *d)
{
	clock_gettime(CLOCK_REALTIME, &d->st.st_mtim);
	d->st.st_ctim = d->st.st_mtim;
}

static void add_entry(uint64_t parent, const char *name, uint64_t ino)
{
	struct node *d = &nodes[parent];
	if (d->nents == d->capents) {
		d->capents = d->capents ? d->capents * 2 : 16;
		d->ents = realloc(d->ents, d->capents * sizeof(*d->ents));
		if (!d->ents)
			abort();
	}
	char *copy = strdup(name);
	if (!copy)
		abort();
	d->ents[d->nents++] = (struct dent){ .name = copy, .ino = ino };
	hput(parent, copy, ino);
	touch_dir(d);
}

static void del_entry(uint64_t parent, const char *name)
{
	struct node *d = &nodes[parent];
	struct hslot *s = hfind(parent, name);
	for (size_t i = d->nents; i-- > 0;)
		if (d->ents[i].ino && d->ents[i].name == s->name) {
			d->ents[i].ino = 0;
			break;
		}
	s->ino = 0;      /* a tombstone: the name stays owned by the removed entry */
	touch_dir(d);
}

static void free_node(uint64_t ino)
{
	struct node *n = &nodes[ino];
	free(n->link);
	n->link = NULL;
	n->st.st_ino = 0;
}

static void entry_of(uint64_t ino, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = ino;
	e->generation = 1;
	e->attr = nodes[ino].st;
	e->attr.st_blocks = (e->attr.st_size + 511) / 512;
	e->attr_timeout = e->entry_timeout = TIMEOUT;
}

static void reply_attr(fuse_req_t req, uint64_t ino)
{
	struct stat st = nodes[ino].st;
	st.st_blocks = (st.st_size + 511) / 512;
	fuse_reply_attr(req, &st, TIMEOUT);
}

/* ---- state across mounts ---- */

static void save_state(void)
{
	FILE *f = fopen(state_path, "w");
	if (!f)
		return;
	fwrite(&nnodes, sizeof(nnodes), 1, f);
	for (size_t i = 0; i < nnodes; i++) {
		struct node *n = &nodes[i];
		fwrite(&n->st, sizeof(n->st), 1, f);
		size_t ll = n->link ? strlen(n->link) : 0, live = 0;
		fwrite(&ll, sizeof(ll), 1, f);
		fwrite(n->link ? n->link : "", 1, ll, f);
		for (size_t k = 0; k < n->nents; k++)
			live += n->ents[k].ino != 0;
		fwrite(&live, sizeof(live), 1, f);
		for (size_t k = 0; k < n->nents; k++) {
			if (!n->ents[k].ino)
				continue;
			size_t nl = strlen(n->ents[k].name);
			fwrite(&nl, sizeof(nl), 1, f);
			fwrite(n->ents[k].name, 1, nl, f);
			fwrite(&n->ents[k].ino, sizeof(n->ents[k].ino), 1, f);
		}
	}
	fclose(f);
}

static int load_state(void)
{
	FILE *f = fopen(state_path, "r");
	if (!f)
		return -1;
	size_t count;
	int ok = fread(&count, sizeof(count), 1, f) == 1;
	for (size_t i = 0; ok && i < count; i++) {
		uint64_t ino = new_node(0, NULL);
		struct node *n = &nodes[ino];
		size_t ll, live;
		ok = fread(&n->st, sizeof(n->st), 1, f) == 1 && fread(&ll, sizeof(ll), 1, f) == 1;
		if (ok && ll) {
			n->link = calloc(1, ll + 1);
			ok = n->link && fread(n->link, 1, ll, f) == ll;
		}
		ok = ok && fread(&live, sizeof(live), 1, f) == 1;
		for (size_t k = 0; ok && k < live; k++) {
			size_t nl;
			uint64_t child;
			char name[4096];
			ok = fread(&nl, sizeof(nl), 1, f) == 1 && nl < sizeof(name) &&
			     fread(name, 1, nl, f) == nl && fread(&child, sizeof(child), 1, f) == 1;
			if (ok) {
				name[nl] = 0;
				struct timespec m = n->st.st_mtim, c = n->st.st_ctim;
				add_entry(ino, name, child);
				n->st.st_mtim = m;
				n->st.st_ctim = c;
			}
		}
	}
	fclose(f);
	return ok ? 0 : -1;
}

/* ---- operations ---- */

/* recon-fuse's set_open_mode: direct I/O where nothing can read through the
 * page cache, the cache kept across opens elsewhere. */
static void set_open_mode(struct fuse_file_info *fi)
{
	if ((fi->flags & O_ACCMODE) == O_WRONLY || (fi->flags & O_DIRECT))
		fi->direct_io = 1;
	else
		fi->keep_cache = 1;
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	conn->want &= ~(FUSE_CAP_AUTO_INVAL_DATA | FUSE_CAP_WRITEBACK_CACHE);
	if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
		conn->want |= FUSE_CAP_EXPORT_SUPPORT;
	if ((conn->capable & FUSE_CAP_POSIX_ACL) && (conn->capable & FUSE_CAP_DONT_MASK))
		conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
	conn->time_gran = 1;
	conn->max_write = 1 << 20;
	conn->max_readahead = 1 << 20;
	conn->max_background = 64;   /* recon-fuse's MAX_BACKGROUND */
}

static void op_destroy(void *userdata)
{
	(void)userdata;
	save_state();
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	TREE_HELD;
	if (!get(parent)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	uint64_t ino = parent;
	if (!strcmp(name, "..")) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (strcmp(name, ".")) {
		if (!(ino = child_of(parent, name))) {
			fuse_reply_err(req, ENOENT);
			return;
		}
	}
	struct fuse_entry_param e;
	entry_of(ino, &e);
	fuse_reply_entry(req, &e);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	(void)ino;
	(void)nlookup;
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	TREE_HELD;
	(void)fi;
	if (!get(ino))
		fuse_reply_err(req, ENOENT);
	else
		reply_attr(req, ino);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	TREE_HELD;
	(void)fi;
	struct node *n = get(ino);
	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	if (to_set & FUSE_SET_ATTR_MODE)
		n->st.st_mode = (n->st.st_mode & S_IFMT) | (attr->st_mode & 07777);
	if (to_set & FUSE_SET_ATTR_UID)
		n->st.st_uid = attr->st_uid;
	if (to_set & FUSE_SET_ATTR_GID)
		n->st.st_gid = attr->st_gid;
	if (to_set & FUSE_SET_ATTR_SIZE)
		n->st.st_size = attr->st_size;
	if (to_set & FUSE_SET_ATTR_ATIME)
		n->st.st_atim = attr->st_atim;
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		n->st.st_atim = now;
	if (to_set & FUSE_SET_ATTR_MTIME)
		n->st.st_mtim = attr->st_mtim;
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		n->st.st_mtim = now;
	n->st.st_ctim = now;
	reply_attr(req, ino);
}

static void make(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		 const char *link, struct fuse_file_info *fi)
{
	TREE_HELD;
	if (!get(parent) || !S_ISDIR(nodes[parent].st.st_mode)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (child_of(parent, name)) {
		fuse_reply_err(req, EEXIST);
		return;
	}
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	if (!link)
		mode &= ~(mode_t)ctx->umask;   /* DONT_MASK: the umask is ours to apply */
	uint64_t ino = new_node(mode, ctx);
	if (link) {
		nodes[ino].link = strdup(link);
		nodes[ino].st.st_size = (off_t)strlen(link);
	}
	if (S_ISDIR(mode))
		nodes[parent].st.st_nlink++;
	add_entry(parent, name, ino);
	struct fuse_entry_param e;
	entry_of(ino, &e);
	if (fi) {
		set_open_mode(fi);
		fuse_reply_create(req, &e, fi);
	}
	else
		fuse_reply_entry(req, &e);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	(void)rdev;
	make(req, parent, name, mode, NULL, NULL);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	make(req, parent, name, S_IFDIR | (mode & 07777), NULL, NULL);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	make(req, parent, name, S_IFLNK | 0777, link, NULL);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	make(req, parent, name, S_IFREG | (mode & 07777), NULL, fi);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	TREE_HELD;
	struct node *n = get(ino);
	if (!n || !n->link)
		fuse_reply_err(req, EINVAL);
	else
		fuse_reply_readlink(req, n->link);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	TREE_HELD;
	struct node *n = get(ino);
	if (!n || !get(newparent)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (child_of(newparent, newname)) {
		fuse_reply_err(req, EEXIST);
		return;
	}
	n->st.st_nlink++;
	add_entry(newparent, newname, ino);
	struct fuse_entry_param e;
	entry_of(ino, &e);
	fuse_reply_entry(req, &e);
}

static void remove_name(fuse_req_t req, fuse_ino_t parent, const char *name, bool dir)
{
	TREE_HELD;
	if (!get(parent)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	uint64_t ino = child_of(parent, name);
	if (!ino) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	struct node *n = &nodes[ino];
	if (dir != S_ISDIR(n->st.st_mode)) {
		fuse_reply_err(req, dir ? ENOTDIR : EISDIR);
		return;
	}
	if (dir) {
		for (size_t k = 0; k < n->nents; k++)
			if (n->ents[k].ino) {
				fuse_reply_err(req, ENOTEMPTY);
				return;
			}
		nodes[parent].st.st_nlink--;
	}
	del_entry(parent, name);
	if (dir || --n->st.st_nlink == 0)
		free_node(ino);
	fuse_reply_err(req, 0);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, false);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, true);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	TREE_HELD;
	if (flags || !get(parent) || !get(newparent)) {
		fuse_reply_err(req, flags ? EINVAL : ENOENT);
		return;
	}
	uint64_t ino = child_of(parent, name);
	if (!ino) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (child_of(newparent, newname)) {
		fuse_reply_err(req, EEXIST);   /* enough for the bench's workloads */
		return;
	}
	del_entry(parent, name);
	add_entry(newparent, newname, ino);
	fuse_reply_err(req, 0);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	TREE_HELD;
	struct node *n = get(ino);
	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (fi->flags & O_TRUNC)
		n->st.st_size = 0;
	set_open_mode(fi);
	fuse_reply_open(req, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	TREE_HELD;
	(void)fi;
	static char zeros[1 << 20];
	struct node *n = get(ino);
	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	size_t len = off >= n->st.st_size ? 0 : (size_t)(n->st.st_size - off);
	if (len > size)
		len = size;
	if (len > sizeof(zeros))
		len = sizeof(zeros);
	fuse_reply_buf(req, zeros, len);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	TREE_HELD;
	(void)buf;
	(void)fi;
	struct node *n = get(ino);
	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (off + (off_t)size > n->st.st_size)
		n->st.st_size = off + (off_t)size;
	clock_gettime(CLOCK_REALTIME, &n->st.st_mtim);
	n->st.st_ctim = n->st.st_mtim;
	fuse_reply_write(req, size);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, ENOSYS);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void list_dir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	TREE_HELD;
	struct node *d = get(ino);
	if (!d || !S_ISDIR(d->st.st_mode)) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	char *buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t used = 0;
	/* offsets: 1 ".", 2 "..", 3 + k the k-th entry */
	for (size_t k = (size_t)off; k < d->nents + 2; k++) {
		struct fuse_entry_param e;
		const char *name;
		if (k < 2) {
			name = k ? ".." : ".";
			memset(&e, 0, sizeof(e));
			e.attr.st_ino = ino;
			e.attr.st_mode = S_IFDIR;
		} else if (d->ents[k - 2].ino) {
			name = d->ents[k - 2].name;
			entry_of(d->ents[k - 2].ino, &e);
		} else {
			continue;
		}
		size_t need = plus ? fuse_add_direntry_plus(req, buf + used, size - used, name, &e,
							    (off_t)k + 1)
				   : fuse_add_direntry(req, buf + used, size - used, name, &e.attr,
						       (off_t)k + 1);
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)fi;
	list_dir(req, ino, size, off, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	(void)fi;
	list_dir(req, ino, size, off, true);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	(void)ino;
	(void)name;
	(void)size;
	fuse_reply_err(req, ENODATA);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	(void)ino;
	if (size)
		fuse_reply_buf(req, NULL, 0);
	else
		fuse_reply_xattr(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	struct statvfs sv = { .f_bsize = 4096, .f_frsize = 4096, .f_blocks = 1 << 20,
			      .f_bfree = 1 << 19, .f_bavail = 1 << 19, .f_files = 1 << 20,
			      .f_ffree = 1 << 19, .f_favail = 1 << 19, .f_namemax = 255 };
	fuse_reply_statfs(req, &sv);
}

static const struct fuse_lowlevel_ops ops = {
	.init = op_init, .destroy = op_destroy, .lookup = op_lookup, .forget = op_forget,
	.getattr = op_getattr, .setattr = op_setattr, .readlink = op_readlink,
	.mknod = op_mknod, .mkdir = op_mkdir, .unlink = op_unlink, .rmdir = op_rmdir,
	.symlink = op_symlink, .rename = op_rename, .link = op_link, .open = op_open,
	.read = op_read, .write = op_write, .flush = op_flush, .release = op_release,
	.fsync = op_fsync, .readdir = op_readdir, .readdirplus = op_readdirplus,
	.fsyncdir = op_fsync, .statfs = op_statfs, .getxattr = op_getxattr,
	.listxattr = op_listxattr, .create = op_create,
};

int main(int argc, char **argv)
{
	char *prog = argv[0];
	bool debug = false, uring = false;
	int opt;
	while ((opt = getopt(argc, argv, "du")) != -1) {
		if (opt == 'd')
			debug = true;
		else if (opt == 'u')
			uring = true;
		else
			argc = 0;
	}
	if (argc - optind != 2) {
		fprintf(stderr, "usage: fuse-null [-d] [-u] STATE MOUNTPOINT\n");
		return 2;
	}
	state_path = argv[optind];
	const char *mountpoint = argv[optind + 1];
	const char *why;
	if (uring && !uring_offered(&why)) {
		fprintf(stderr, "fuse-null: -u, but %s\n", why);
		return 1;
	}
	struct transport_config tc = {
		.poll_us = 50,		/* recon-fuse's poll_us default */
		.uring = uring ? TRANSPORT_URING_ON : TRANSPORT_URING_OFF,
	};
	const char *pu = getenv("FUSE_NULL_POLL_US");
	if (pu && *pu)
		tc.poll_us = (unsigned)strtoul(pu, NULL, 10);
	hgrow();
	if (load_state()) {
		nnodes = 0;
		free(hash);
		hash = NULL;
		hcap = hused = 0;
		hgrow();
		new_node(0, NULL);               /* inode 0: unused (st_ino 0 marks it free) */
		new_node(S_IFDIR | 0755, NULL);  /* FUSE_ROOT_ID */
	}
	char *fargs[] = { prog, "-o", "default_permissions,fsname=fuse-null,subtype=null",
			  debug ? "-d" : NULL, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(debug ? 4 : 3, fargs);
	struct fuse_session *se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (!se || fuse_session_mount(se, mountpoint)) {
		fprintf(stderr, "fuse-null: cannot mount on %s\n", mountpoint);
		return 1;
	}
	/* a ring queue that cannot go on ends the session by SIGTERM */
	if (fuse_set_signal_handlers(se) || transport_start(se, &tc)) {
		fprintf(stderr, "fuse-null: cannot set up the transport on /dev/fuse\n");
		fuse_session_unmount(se);
		fuse_session_destroy(se);
		return 1;
	}
	int ret = fuse_session_loop(se);
	bool ring_failed = transport_stop();
	fuse_remove_signal_handlers(se);
	fuse_session_unmount(se);
	fuse_session_destroy(se);
	return ret || ring_failed ? 1 : 0;
}
