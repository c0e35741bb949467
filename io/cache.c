/*
 * io/cache.c - the metadata block cache: LRU, write-back, keyed by block
 * number at the channel's current block size.  Byte-range reads and writes
 * (negative counts, write_byte, a 1 KiB superblock inside a 4 KiB block) are
 * served by read-modify-write of whole cached blocks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "rio_internal.h"

struct cache_ent {
	uint64_t blk;
	bool     dirty;
	struct cache_ent *hnext;
	struct cache_ent *prev, *next;   /* LRU list through the sentinel */
	unsigned char data[];
};

/* Reads or writes spanning more than this share of the cache go straight to
 * the device, so that one inode-table scan does not flush the whole cache. */
#define CACHE_BYPASS_DIVISOR 4
/* Reads of more blocks than this go straight to the device too: such reads
 * are the checker's whole-table passes at mount, which read each block once
 * (copying every block into the cache and out again, and evicting it, cost
 * more than the reads themselves on a terabyte disk). */
#define CACHE_BYPASS_READ_BLOCKS 64

static size_t hash_slot(const struct cache *c, uint64_t blk)
{
	return (size_t)((blk * 0x9E3779B97F4A7C15ull) >> 20) & (c->nhash - 1);
}

errcode_t rio_cache_init(struct cache *c, size_t budget_bytes, unsigned blksize)
{
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->lock, NULL);
	c->budget_bytes = budget_bytes;
	c->lru_head = calloc(1, sizeof(struct cache_ent));
	if (!c->lru_head)
		return ENOMEM;
	c->lru_head->prev = c->lru_head->next = c->lru_head;
	c->blksize = blksize;
	c->capacity = budget_bytes / blksize;
	c->nhash = 1;
	while (c->nhash < c->capacity * 2 && c->nhash < (1u << 24))
		c->nhash <<= 1;
	c->hash = calloc(c->nhash, sizeof(*c->hash));
	if (!c->hash) {
		free(c->lru_head);
		return ENOMEM;
	}
	return 0;
}

static void lru_unlink(struct cache_ent *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
}

static void lru_push_front(struct cache *c, struct cache_ent *e)
{
	e->next = c->lru_head->next;
	e->prev = c->lru_head;
	e->next->prev = e;
	c->lru_head->next = e;
}

static struct cache_ent *lookup(struct cache *c, uint64_t blk)
{
	for (struct cache_ent *e = c->hash[hash_slot(c, blk)]; e; e = e->hnext)
		if (e->blk == blk)
			return e;
	return NULL;
}

static void remove_ent(struct cache *c, struct cache_ent *e)
{
	struct cache_ent **pp = &c->hash[hash_slot(c, e->blk)];
	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	lru_unlink(e);
	if (e->dirty)
		c->ndirty--;
	c->count--;
	free(e);
}

static void drop_all(struct cache *c)
{
	while (c->lru_head->next != c->lru_head)
		remove_ent(c, c->lru_head->next);
}

void rio_cache_destroy(struct cache *c)
{
	if (!c->lru_head)
		return;
	drop_all(c);
	free(c->hash);
	free(c->lru_head);
	pthread_mutex_destroy(&c->lock);
}

/* Make room for one more entry: evict the least recently used, writing it
 * back first if dirty. */
static errcode_t make_room(struct cache *c, struct dev *d)
{
	while (c->count >= c->capacity) {
		struct cache_ent *victim = c->lru_head->prev;
		if (victim->dirty) {
			errcode_t err = rio_dev_pwrite(d, victim->blk * c->blksize, victim->data, c->blksize);
			if (err)
				return err;
		}
		remove_ent(c, victim);
	}
	return 0;
}

/* Insert block blk with contents data (not yet present). */
static errcode_t insert(struct cache *c, struct dev *d, uint64_t blk, const void *data,
			bool dirty, struct cache_ent **out)
{
	errcode_t err = make_room(c, d);
	if (err)
		return err;
	struct cache_ent *e = malloc(sizeof(*e) + c->blksize);
	if (!e)
		return ENOMEM;
	e->blk = blk;
	e->dirty = dirty;
	memcpy(e->data, data, c->blksize);
	size_t s = hash_slot(c, blk);
	e->hnext = c->hash[s];
	c->hash[s] = e;
	lru_push_front(c, e);
	c->count++;
	if (dirty)
		c->ndirty++;
	if (out)
		*out = e;
	return 0;
}

static void touch(struct cache *c, struct cache_ent *e)
{
	lru_unlink(e);
	lru_push_front(c, e);
}

/* Fill buf (covering whole blocks first..first+n-1) with cached copies over
 * what is already there; used after a bypassing device read. */
static void patch_cached(struct cache *c, uint64_t off, size_t len, unsigned char *buf)
{
	uint64_t bs = c->blksize;
	uint64_t first = off / bs, last = (off + len - 1) / bs;
	for (uint64_t b = first; b <= last; b++) {
		struct cache_ent *e = lookup(c, b);
		if (!e)
			continue;
		uint64_t bstart = b * bs;
		uint64_t lo, hi;
		rio_overlap(bstart, bs, off, len, &lo, &hi);
		memcpy(buf + (lo - off), e->data + (lo - bstart), hi - lo);
	}
}

static errcode_t cache_read_locked(struct cache *c, struct dev *d, uint64_t off, size_t len,
				   unsigned char *buf)
{
	uint64_t bs = c->blksize;
	uint64_t first = off / bs, last = (off + len - 1) / bs;
	uint64_t nblk = last - first + 1;
	if (c->capacity == 0 || nblk > c->capacity / CACHE_BYPASS_DIVISOR ||
	    nblk > CACHE_BYPASS_READ_BLOCKS) {
		errcode_t err = rio_dev_pread_sparse(d, off, buf, len);
		if (err)
			return err;
		patch_cached(c, off, len, buf);
		return 0;
	}

	/* all cached (the usual case for metadata): straight into buf */
	bool all_hit = true;
	for (uint64_t i = 0; i < nblk && all_hit; i++)
		all_hit = lookup(c, first + i) != NULL;
	if (all_hit) {
		for (uint64_t b = first; b <= last; b++) {
			struct cache_ent *e = lookup(c, b);
			uint64_t bstart = b * bs;
			uint64_t lo, hi;
			rio_overlap(bstart, bs, off, len, &lo, &hi);
			c->hits++;
			touch(c, e);
			memcpy(buf + (lo - off), e->data + (lo - bstart), hi - lo);
		}
		return 0;
	}

	/* a bulk pass (the mount's bitmaps) reads each block once: entering
	 * them would only evict what is used again */
	if (c->no_fill) {
		errcode_t err = rio_dev_pread(d, off, buf, len);
		if (!err)
			patch_cached(c, off, len, buf);
		return err;
	}

	/* misses become runs of consecutive blocks, read together */
	unsigned char *tmp = malloc(nblk * bs);
	struct dev_req *reqs = calloc(nblk, sizeof(*reqs));
	bool *miss = calloc(nblk, sizeof(*miss));
	errcode_t err = 0;
	if (!tmp || !reqs || !miss) {
		err = ENOMEM;
		goto out;
	}
	size_t nreq = 0;
	for (uint64_t i = 0; i < nblk; i++) {
		struct cache_ent *e = lookup(c, first + i);
		if (e) {
			c->hits++;
			touch(c, e);
			memcpy(tmp + i * bs, e->data, bs);
			continue;
		}
		c->misses++;
		miss[i] = true;
		if (i > 0 && miss[i - 1]) {
			reqs[nreq - 1].len += bs;
		} else {
			reqs[nreq].write = false;
			reqs[nreq].off = (first + i) * bs;
			reqs[nreq].len = bs;
			reqs[nreq].buf = tmp + i * bs;
			nreq++;
		}
	}
	err = rio_dev_submit(d, reqs, nreq);
	if (err == EXT2_ET_SHORT_READ) {
		/* the last block of a device whose size is not a block multiple:
		 * serve the exact range uncached */
		err = rio_dev_pread(d, off, buf, len);
		if (!err)
			patch_cached(c, off, len, buf);
		goto out;
	}
	if (err)
		goto out;
	for (uint64_t i = 0; i < nblk && !err; i++)
		if (miss[i])
			err = insert(c, d, first + i, tmp + i * bs, false, NULL);
	if (!err)
		memcpy(buf, tmp + (off - first * bs), len);
out:
	free(tmp);
	free(reqs);
	free(miss);
	return err;
}

bool rio_cache_set_fill(struct cache *c, bool fill)
{
	pthread_mutex_lock(&c->lock);
	bool was = !c->no_fill;
	c->no_fill = !fill;
	pthread_mutex_unlock(&c->lock);
	return was;
}

bool rio_cache_holds_any(struct cache *c, uint64_t off, size_t len)
{
	if (len == 0)
		return false;
	bool any = false;
	uint64_t first = off / c->blksize, last = (off + len - 1) / c->blksize;
	pthread_mutex_lock(&c->lock);
	if (c->count < last - first + 1) {
		/* fewer entries than blocks asked about (an inode table against
		 * a cache just filled): walk the entries */
		for (struct cache_ent *e = c->lru_head->next; e != c->lru_head && !any; e = e->next)
			any = e->blk >= first && e->blk <= last;
	} else {
		for (uint64_t b = first; b <= last && !any; b++)
			any = lookup(c, b) != NULL;
	}
	pthread_mutex_unlock(&c->lock);
	return any;
}

errcode_t rio_cache_read(struct cache *c, struct dev *d, uint64_t off, size_t len, void *buf)
{
	if (len == 0)
		return 0;
	pthread_mutex_lock(&c->lock);
	errcode_t err = cache_read_locked(c, d, off, len, buf);
	pthread_mutex_unlock(&c->lock);
	return err;
}

static errcode_t cache_write_locked(struct cache *c, struct dev *d, uint64_t off, size_t len,
				    const unsigned char *buf)
{
	uint64_t bs = c->blksize;
	uint64_t first = off / bs, last = (off + len - 1) / bs;
	uint64_t nblk = last - first + 1;
	if (c->capacity == 0 || nblk > c->capacity / CACHE_BYPASS_DIVISOR) {
		/* write-through; cached copies of those blocks take the new bytes
		 * (and stay dirty if they were: their other bytes are newer) */
		errcode_t err = rio_dev_pwrite(d, off, buf, len);
		if (err)
			return err;
		for (uint64_t b = first; b <= last; b++) {
			struct cache_ent *e = lookup(c, b);
			if (!e)
				continue;
			uint64_t bstart = b * bs;
			uint64_t lo, hi;
			rio_overlap(bstart, bs, off, len, &lo, &hi);
			memcpy(e->data + (lo - bstart), buf + (lo - off), hi - lo);
		}
		return 0;
	}
	unsigned char *blockbuf = NULL;
	errcode_t err = 0;
	for (uint64_t b = first; b <= last; b++) {
		uint64_t bstart = b * bs;
		uint64_t lo, hi;
		rio_overlap(bstart, bs, off, len, &lo, &hi);
		struct cache_ent *e = lookup(c, b);
		if (!e) {
			if (hi - lo == bs) {
				err = insert(c, d, b, buf + (lo - off), true, &e);
				if (err)
					break;
				continue;
			}
			/* partial block: read-modify-write */
			if (!blockbuf && !(blockbuf = malloc(bs))) {
				err = ENOMEM;
				break;
			}
			c->misses++;
			err = rio_dev_pread(d, bstart, blockbuf, bs);
			if (err == EXT2_ET_SHORT_READ) {
				/* tail of the device: write these bytes through */
				err = rio_dev_pwrite(d, lo, buf + (lo - off), hi - lo);
				if (err)
					break;
				continue;
			}
			if (err)
				break;
			err = insert(c, d, b, blockbuf, false, &e);
			if (err)
				break;
		} else {
			c->hits++;
			touch(c, e);
		}
		memcpy(e->data + (lo - bstart), buf + (lo - off), hi - lo);
		if (!e->dirty) {
			e->dirty = true;
			c->ndirty++;
		}
	}
	free(blockbuf);
	return err;
}

errcode_t rio_cache_write(struct cache *c, struct dev *d, uint64_t off, size_t len, const void *buf)
{
	if (len == 0)
		return 0;
	pthread_mutex_lock(&c->lock);
	errcode_t err = cache_write_locked(c, d, off, len, buf);
	pthread_mutex_unlock(&c->lock);
	return err;
}

static int cmp_ent_blk(const void *a, const void *b)
{
	const struct cache_ent *x = *(struct cache_ent *const *)a;
	const struct cache_ent *y = *(struct cache_ent *const *)b;
	return x->blk < y->blk ? -1 : x->blk > y->blk;
}

static errcode_t writeback_locked(struct cache *c, struct dev *d)
{
	if (c->ndirty == 0)
		return 0;
	struct cache_ent **dirty = malloc(c->ndirty * sizeof(*dirty));
	struct dev_req *reqs = calloc(c->ndirty, sizeof(*reqs));
	errcode_t err = 0;
	if (!dirty || !reqs) {
		err = ENOMEM;
		goto out;
	}
	size_t n = 0;
	for (struct cache_ent *e = c->lru_head->next; e != c->lru_head; e = e->next)
		if (e->dirty)
			dirty[n++] = e;
	qsort(dirty, n, sizeof(*dirty), cmp_ent_blk);
	for (size_t i = 0; i < n; i++) {
		reqs[i].write = true;
		reqs[i].off = dirty[i]->blk * c->blksize;
		reqs[i].len = c->blksize;
		reqs[i].buf = dirty[i]->data;
	}
	err = rio_dev_submit(d, reqs, n);
	if (!err) {
		/* only a fully successful batch is clean: on error everything stays
		 * dirty and is written again by the next flush */
		for (size_t i = 0; i < n; i++)
			dirty[i]->dirty = false;
		c->ndirty = 0;
	}
out:
	free(dirty);
	free(reqs);
	return err;
}

errcode_t rio_cache_writeback(struct cache *c, struct dev *d)
{
	pthread_mutex_lock(&c->lock);
	errcode_t err = writeback_locked(c, d);
	pthread_mutex_unlock(&c->lock);
	return err;
}

void rio_cache_invalidate(struct cache *c, uint64_t off, size_t len)
{
	if (len == 0)
		return;
	pthread_mutex_lock(&c->lock);
	if (c->count > 0) {
		uint64_t first = off / c->blksize, last = (off + len - 1) / c->blksize;
		for (uint64_t b = first; b <= last; b++) {
			struct cache_ent *e = lookup(c, b);
			if (e)
				remove_ent(c, e);
		}
	}
	pthread_mutex_unlock(&c->lock);
}

errcode_t rio_cache_set_blksize(struct cache *c, struct dev *d, unsigned blksize)
{
	pthread_mutex_lock(&c->lock);
	errcode_t err = 0;
	if (blksize != c->blksize) {
		err = writeback_locked(c, d);
		if (!err) {
			drop_all(c);
			c->blksize = blksize;
			c->capacity = c->budget_bytes / blksize;
			size_t nhash = 1;
			while (nhash < c->capacity * 2 && nhash < (1u << 24))
				nhash <<= 1;
			if (nhash != c->nhash) {
				struct cache_ent **h = calloc(nhash, sizeof(*h));
				if (!h) {
					err = ENOMEM;
				} else {
					free(c->hash);
					c->hash = h;
					c->nhash = nhash;
				}
			}
		}
	}
	pthread_mutex_unlock(&c->lock);
	return err;
}

size_t rio_cache_dirty(struct cache *c)
{
	pthread_mutex_lock(&c->lock);
	size_t n = c->ndirty;
	pthread_mutex_unlock(&c->lock);
	return n;
}

void rio_cache_update_clean(struct cache *c, uint64_t blk, const void *data)
{
	pthread_mutex_lock(&c->lock);
	struct cache_ent *e = c->count ? lookup(c, blk) : NULL;
	if (e) {
		memcpy(e->data, data, c->blksize);
		if (e->dirty) {
			e->dirty = false;
			c->ndirty--;
		}
	}
	pthread_mutex_unlock(&c->lock);
}
