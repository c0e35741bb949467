/*
 * checker/pool.c - the memory one transaction's check hands to the next:
 * its block buffers, its inode changes and its record array.
 *
 * A commit of thousands of metadata blocks allocates tens of MiB (two
 * block copies per block, two inodes per inode, 40 bytes per change
 * record) and frees them all when its verdict goes; the allocator gives
 * most of it back to the system, and the next commit takes every page
 * afresh through a page fault (a quarter of a large check's CPU time).
 * Kept here instead, up to POOL_MAX_BYTES, they are reused warm.
 *
 * A verdict may be freed on another thread than the checks (the caller
 * keeps them apart from its own chk_fs calls only), and after its chk_fs
 * is detached: the pool is shared by the chk_fs and every transaction
 * that took memory from it (a reference each), under its own lock, and
 * takes nothing back once detached.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "chk_internal.h"

/* What the pool keeps between two checks, at most: a large commit's worth
 * (4,096 blocks of 4 KiB with their copies), small beside the block cache. */
#define POOL_MAX_BYTES ((size_t)40 << 20)

struct pool_class {
	size_t size;
	void **items;
	size_t n, cap;
};

struct chk_pool {
	pthread_mutex_t lock;
	unsigned refs;
	bool detached;
	size_t bytes;                    /* kept in items and spare_recs */
	struct pool_class cls[CHK_POOL_NCLASSES];
	struct chk_record *spare_recs;   /* a record array, its capacity */
	size_t spare_cap;
};

struct chk_pool *chk_pool_new(size_t block_size, size_t ichange_size)
{
	struct chk_pool *p = calloc(1, sizeof(*p));
	if (!p || pthread_mutex_init(&p->lock, NULL)) {
		free(p);
		return NULL;
	}
	p->refs = 1;
	p->cls[CHK_POOL_BLOCK].size = 2 * block_size;
	p->cls[CHK_POOL_ICHANGE].size = ichange_size;
	return p;
}

static void pool_free(struct chk_pool *p)
{
	for (int c = 0; c < CHK_POOL_NCLASSES; c++) {
		for (size_t i = 0; i < p->cls[c].n; i++)
			free(p->cls[c].items[i]);
		free(p->cls[c].items);
	}
	free(p->spare_recs);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

struct chk_pool *chk_pool_ref(struct chk_pool *p)
{
	if (p) {
		pthread_mutex_lock(&p->lock);
		p->refs++;
		pthread_mutex_unlock(&p->lock);
	}
	return p;
}

void chk_pool_unref(struct chk_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	bool last = --p->refs == 0;
	pthread_mutex_unlock(&p->lock);
	if (last)
		pool_free(p);
}

void chk_pool_detach(struct chk_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->detached = true;
	/* what it kept goes now; transactions still out free their own */
	for (int c = 0; c < CHK_POOL_NCLASSES; c++) {
		for (size_t i = 0; i < p->cls[c].n; i++)
			free(p->cls[c].items[i]);
		p->cls[c].n = 0;
	}
	free(p->spare_recs);
	p->spare_recs = NULL;
	p->spare_cap = 0;
	p->bytes = 0;
	pthread_mutex_unlock(&p->lock);
	chk_pool_unref(p);
}

void *chk_pool_get(struct chk_pool *p, enum chk_pool_class c, size_t size)
{
	void *x = NULL;
	if (p && p->cls[c].size == size) {
		pthread_mutex_lock(&p->lock);
		if (p->cls[c].n) {
			x = p->cls[c].items[--p->cls[c].n];
			p->bytes -= size;
		}
		pthread_mutex_unlock(&p->lock);
	}
	return x ? x : malloc(size);
}

void chk_pool_put(struct chk_pool *p, enum chk_pool_class c, size_t size, void *x)
{
	if (!x)
		return;
	if (p && p->cls[c].size == size) {
		pthread_mutex_lock(&p->lock);
		struct pool_class *pc = &p->cls[c];
		bool kept = false;
		if (!p->detached && p->bytes + size <= POOL_MAX_BYTES) {
			if (pc->n == pc->cap) {
				size_t ncap = pc->cap ? pc->cap * 2 : 256;
				void **ni = realloc(pc->items, ncap * sizeof(*ni));
				if (ni) {
					pc->items = ni;
					pc->cap = ncap;
				}
			}
			if (pc->n < pc->cap) {
				pc->items[pc->n++] = x;
				p->bytes += size;
				kept = true;
			}
		}
		pthread_mutex_unlock(&p->lock);
		if (kept)
			return;
	}
	free(x);
}

struct chk_record *chk_pool_take_recs(struct chk_pool *p, size_t *cap)
{
	struct chk_record *r = NULL;
	*cap = 0;
	if (!p)
		return NULL;
	pthread_mutex_lock(&p->lock);
	if (p->spare_recs) {
		r = p->spare_recs;
		*cap = p->spare_cap;
		p->bytes -= p->spare_cap * sizeof(*r);
		p->spare_recs = NULL;
		p->spare_cap = 0;
	}
	pthread_mutex_unlock(&p->lock);
	return r;
}

void chk_pool_give_recs(struct chk_pool *p, struct chk_record *recs, size_t cap)
{
	if (!recs)
		return;
	if (p) {
		pthread_mutex_lock(&p->lock);
		size_t bytes = cap * sizeof(*recs);
		/* one array is kept: the larger */
		if (!p->detached && cap > p->spare_cap && p->bytes - p->spare_cap * sizeof(*recs) + bytes <= POOL_MAX_BYTES) {
			struct chk_record *old = p->spare_recs;
			p->bytes = p->bytes - p->spare_cap * sizeof(*recs) + bytes;
			p->spare_recs = recs;
			p->spare_cap = cap;
			recs = old;
		}
		pthread_mutex_unlock(&p->lock);
	}
	free(recs);
}
