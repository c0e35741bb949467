/*
 * fuse/notify.c - after a rejected commit, the kernel's caches: the inodes
 * it knows and the names it may hold, invalidated from a thread of their
 * own, which must finish before the channel closes.
 */
#include "rfs.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct inval_list {
	struct fuse_session *se;
	atomic_bool *stop, *done;
	fuse_ino_t *inos;
	size_t ninos;
	fuse_ino_t *parents;
	char **names;
	size_t nnames, capnames;
};

/* The kernel must not keep what the discarded transactions made: notified
 * from a thread of its own, as a notification sent from inside a request on
 * the same inode would deadlock. */
static void *notifier_main(void *arg)
{
	struct inval_list *l = arg;

	for (size_t i = 0; i < l->nnames; i++) {
		if (!atomic_load(l->stop))
			(void)fuse_lowlevel_notify_inval_entry(l->se, l->parents[i], l->names[i],
							       strlen(l->names[i]));
		free(l->names[i]);
	}
	for (size_t i = 0; i < l->ninos && !atomic_load(l->stop); i++)
		(void)fuse_lowlevel_notify_inval_inode(l->se, l->inos[i], 0, 0);
	atomic_store(l->done, true);
	free(l->names);
	free(l->parents);
	free(l->inos);
	free(l);
	return NULL;
}

struct name_ctx {
	struct inval_list *l;
	fuse_ino_t parent;
};

static int add_name(struct inval_list *l, fuse_ino_t parent, const char *name, size_t len)
{
	if (l->nnames == l->capnames) {
		size_t cap = l->capnames ? l->capnames * 2 : 256;
		if (cap > (1u << 20))
			return 1;   /* bounded: past that, the entry timeouts expire them */
		char **nn = realloc(l->names, cap * sizeof(*nn));
		if (nn)
			l->names = nn;
		fuse_ino_t *np = nn ? realloc(l->parents, cap * sizeof(*np)) : NULL;
		if (np)
			l->parents = np;
		if (!nn || !np)
			return 1;
		l->capnames = cap;
	}
	char *n = strndup(name, len);
	if (!n)
		return 1;
	l->parents[l->nnames] = parent;
	l->names[l->nnames++] = n;
	return 0;
}

/* Names on disk in a directory the kernel knows: its negative dentries for
 * names the discarded transactions removed. */
static int collect_name(void *vctx, const char *name, size_t len, ext2_ino_t ino, int ftype,
			uint64_t next_off)
{
	struct name_ctx *c = vctx;

	(void)ino;
	(void)ftype;
	(void)next_off;
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return 0;
	return add_name(c->l, c->parent, name, len);
}

/* Names the discarded transactions may have added. */
static void collect_added(void *vctx, ext2_ino_t dir, const char *name)
{
	(void)add_name(vctx, to_fuse(dir), name, strlen(name));
}

void invalidate_kernel(struct rfs *r)
{
	struct inval_list *l = calloc(1, sizeof(*l));
	ext2_ino_t count = r->fs->super->s_inodes_count;
	size_t ndirs = 0;
	ext2_ino_t *dirs = NULL;

	if (!l || !r->known)
		goto fail;
	l->se = r->se;
	l->stop = &r->notifier_stop;
	l->done = &r->notifier_done;
	for (ext2_ino_t i = 1; i <= count; i++)
		l->ninos += (r->known[i >> 3] >> (i & 7)) & 1;
	l->inos = malloc((l->ninos + 1) * sizeof(*l->inos));
	dirs = malloc(4096 * sizeof(*dirs));
	if (!l->inos || !dirs)
		goto fail;
	l->ninos = 0;
	l->inos[l->ninos++] = FUSE_ROOT_ID;
	for (ext2_ino_t i = 1; i <= count; i++)
		if (((r->known[i >> 3] >> (i & 7)) & 1) && i != EXT2_ROOT_INO)
			l->inos[l->ninos++] = i;
	/* dentries: names added since the last durable commit (now gone),
	 * and the names the disk has in the directories we have indexed */
	if (!dindex_added_names(r->di, collect_added, l))
		fprintf(stderr, "recon-fuse: too many new names to invalidate one by one; the "
			"kernel's entries expire within %.0f s\n", TIMEOUT);
	dindex_clear_added(r->di);
	ndirs = dindex_cached_dirs(r->di, dirs, 4096);
	for (size_t i = 0; i < ndirs; i++) {
		ext2_ino_t d = dirs[i];
		if (d != EXT2_ROOT_INO && !((r->known[d >> 3] >> (d & 7)) & 1))
			continue;
		struct name_ctx c = { .l = l, .parent = to_fuse(d) };
		(void)dindex_readdir(r->di, d, 0, collect_name, &c);
	}
	free(dirs);
	sigset_t all, old;	/* signals are the FUSE loop's to take */
	sigfillset(&all);
	atomic_store(&r->notifier_done, false);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int started = pthread_create(&r->notifier, NULL, notifier_main, l) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (started) {
		r->notifier_running = true;
		return;
	}
	dirs = NULL;
fail:
	fprintf(stderr, "recon-fuse: cannot invalidate the kernel's caches (out of memory); "
		"they expire within %.0f s\n", TIMEOUT);
	free(dirs);
	if (l) {
		for (size_t i = 0; i < l->nnames; i++)
			free(l->names[i]);
		free(l->names);
		free(l->parents);
		free(l->inos);
		free(l);
	}
}

void rfs_stop_notifier(struct rfs *r)
{
	atomic_store(&r->notifier_stop, true);
}

bool rfs_notifier_busy(struct rfs *r)
{
	return r->notifier_running && !atomic_load(&r->notifier_done);
}

void rfs_join_notifier(struct rfs *r)
{
	if (r->notifier_running) {
		pthread_join(r->notifier, NULL);
		r->notifier_running = false;
	}
}
