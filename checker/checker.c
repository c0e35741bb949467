/*
 * checker/checker.c - the library's plumbing: the u64 map, the bounded
 * block cache, layout arithmetic, the type/owner queries of the public
 * header, change records and verdicts, chk_advance and statistics.
 * Attach is attach.c, inode rules inode.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chk_internal.h"

/* ------------------------------------------------------------------ maps */

/* The slot of a key: the bits above the lowest three mixed into the low
 * ones (keys are block numbers, often a group's stride apart, which a
 * plain multiply would send to a handful of slots), the lowest three kept:
 * eight neighbouring keys share a cache line of slots.  A commit's blocks,
 * an inode table's inodes and a bitmap's bits come in runs, and a map of
 * tens of thousands of keys is larger than the caches: one miss per eight
 * keys of a run instead of one per key. */
static size_t u64map_slot(uint64_t k, size_t mask)
{
	uint64_t g = k >> 3;
	g ^= g >> 33;
	g *= 0xff51afd7ed558ccdull;
	g ^= g >> 33;
	return (size_t)((g << 3) | (k & 7)) & mask;
}

static int u64map_resize(struct u64map *m, size_t ncap)
{
	uint64_t *nk = calloc(ncap, sizeof(*nk));
	uint32_t *nv = calloc(ncap, sizeof(*nv));
	if (!nk || !nv) {
		free(nk);
		free(nv);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->keys[i])
			continue;
		size_t j = u64map_slot(m->keys[i], ncap - 1);
		while (nk[j])
			j = (j + 1) & (ncap - 1);
		nk[j] = m->keys[i];
		nv[j] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = nk;
	m->vals = nv;
	m->cap = ncap;
	return 0;
}

static int u64map_grow(struct u64map *m)
{
	return u64map_resize(m, m->cap ? m->cap * 2 : 64);
}

int chk_u64map_reserve(struct u64map *m, size_t n)
{
	size_t cap = m->cap ? m->cap : 64;
	while (cap / 2 < n && cap < ((size_t)1 << 40))
		cap *= 2;
	return cap > m->cap ? u64map_resize(m, cap) : 0;
}

int chk_u64map_put(struct u64map *m, uint64_t key, uint32_t val)
{
	uint64_t k = key + 1;
	/* a key already there takes its new value in place: no growth, so
	 * that updating a map's values cannot fail */
	for (size_t j = m->cap ? u64map_slot(k, m->cap - 1) : 0; m->cap && m->keys[j];
	     j = (j + 1) & (m->cap - 1))
		if (m->keys[j] == k) {
			m->vals[j] = val;
			return 0;
		}
	if ((m->n + 1) * 2 > m->cap) {
		int r = u64map_grow(m);
		if (r)
			return r;
	}
	size_t j = u64map_slot(k, m->cap - 1);
	while (m->keys[j])
		j = (j + 1) & (m->cap - 1);
	m->n++;
	m->keys[j] = k;
	m->vals[j] = val;
	return 0;
}

bool chk_u64map_get(const struct u64map *m, uint64_t key, uint32_t *val)
{
	if (!m->cap)
		return false;
	uint64_t k = key + 1;
	size_t j = u64map_slot(k, m->cap - 1);
	while (m->keys[j]) {
		if (m->keys[j] == k) {
			if (val)
				*val = m->vals[j];
			return true;
		}
		j = (j + 1) & (m->cap - 1);
	}
	return false;
}

/* Backward-shift deletion keeps probe chains intact without tombstones. */
void chk_u64map_del(struct u64map *m, uint64_t key)
{
	if (!m->cap)
		return;
	uint64_t k = key + 1;
	size_t mask = m->cap - 1, j = u64map_slot(k, mask);
	while (m->keys[j] && m->keys[j] != k)
		j = (j + 1) & mask;
	if (!m->keys[j])
		return;
	size_t hole = j;
	for (;;) {
		j = (j + 1) & mask;
		if (!m->keys[j])
			break;
		size_t home = u64map_slot(m->keys[j], mask);
		/* move j into the hole if its home is not in (hole, j] */
		bool in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
		if (!in_range) {
			m->keys[hole] = m->keys[j];
			m->vals[hole] = m->vals[j];
			hole = j;
		}
	}
	m->keys[hole] = 0;
	m->n--;
}

void chk_u64map_free(struct u64map *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}

/* ------------------------------------------------------------------ cache */

static void lru_unlink(struct blk_cache *c, uint32_t s)
{
	struct cache_ent *e = &c->ents[s];
	if (e->prev != CACHE_NIL) c->ents[e->prev].next = e->next; else c->head = e->next;
	if (e->next != CACHE_NIL) c->ents[e->next].prev = e->prev; else c->tail = e->prev;
	e->prev = e->next = CACHE_NIL;
}

static void lru_push_head(struct blk_cache *c, uint32_t s)
{
	struct cache_ent *e = &c->ents[s];
	e->prev = CACHE_NIL;
	e->next = c->head;
	if (c->head != CACHE_NIL)
		c->ents[c->head].prev = s;
	c->head = s;
	if (c->tail == CACHE_NIL)
		c->tail = s;
}

/* Stores a copy; silently does nothing when memory is short (the cache is an
 * optimisation: a miss is served by the read callback). */
void chk_cache_put(struct chk_fs *fs, uint64_t blk, const void *buf)
{
	struct blk_cache *c = &fs->cache;
	uint32_t s;
	if (fs->cache_max == 0)
		return;
	if (chk_u64map_get(&c->index, blk, &s)) {
		memcpy(c->ents[s].data, buf, fs->bs);
		lru_unlink(c, s);
		lru_push_head(c, s);
		return;
	}
	if (c->nfree) {
		s = c->free_slots[--c->nfree];
	} else if (c->nslots < fs->cache_max) {
		if (c->nslots == c->capslots) {
			size_t ncap = c->capslots ? c->capslots * 2 : 256;
			if (ncap > fs->cache_max)
				ncap = fs->cache_max;
			struct cache_ent *ne = realloc(c->ents, ncap * sizeof(*ne));
			if (!ne)
				return;
			c->ents = ne;
			uint32_t *nf = realloc(c->free_slots, ncap * sizeof(*nf));
			if (!nf)
				return;
			c->free_slots = nf;
			c->capslots = ncap;
		}
		uint8_t *d = malloc(fs->bs);
		if (!d)
			return;
		s = (uint32_t)c->nslots++;
		c->ents[s].data = d;
	} else {
		s = c->tail;                 /* evict least recently used */
		lru_unlink(c, s);
		chk_u64map_del(&c->index, c->ents[s].blk);
	}
	if (chk_u64map_put(&c->index, blk, s)) {
		c->free_slots[c->nfree++] = s;
		return;
	}
	c->ents[s].blk = blk;
	c->ents[s].prev = c->ents[s].next = CACHE_NIL;
	memcpy(c->ents[s].data, buf, fs->bs);
	lru_push_head(c, s);
}

void chk_cache_drop(struct chk_fs *fs, uint64_t blk)
{
	struct blk_cache *c = &fs->cache;
	uint32_t s;
	if (!chk_u64map_get(&c->index, blk, &s))
		return;
	lru_unlink(c, s);
	chk_u64map_del(&c->index, blk);
	c->free_slots[c->nfree++] = s;
}

void chk_cache_free(struct blk_cache *c)
{
	for (size_t i = 0; i < c->nslots; i++)
		free(c->ents[i].data);
	free(c->ents);
	free(c->free_slots);
	chk_u64map_free(&c->index);
}

/* The cached copy of blk, made the most recently used (a hit counted), or
 * NULL (nothing counted).  Valid until the next call that puts or drops. */
static const uint8_t *cache_hit(struct chk_fs *fs, uint64_t blk)
{
	uint32_t s;
	if (!chk_u64map_get(&fs->cache.index, blk, &s))
		return NULL;
	lru_unlink(&fs->cache, s);
	lru_push_head(&fs->cache, s);
	fs->stats.cache_hits++;
	return fs->cache.ents[s].data;
}

int chk_read_block(struct chk_fs *fs, uint64_t blk, void *buf)
{
	const uint8_t *hit = cache_hit(fs, blk);
	if (hit) {
		memcpy(buf, hit, fs->bs);
		return 0;
	}
	fs->stats.cache_misses++;
	if (blk >= fs->blocks_count) {
		memset(buf, 0, fs->bs);      /* past the end: reads as zeros, never cached */
		return 0;
	}
	int r = fs->read(fs->ctx, blk * fs->bs, buf, fs->bs);
	if (r)
		return r < 0 ? r : -EIO;
	chk_cache_put(fs, blk, buf);
	return 0;
}

int chk_read_block_cb(void *ctx, uint64_t blk, void *buf)
{
	return chk_read_block(ctx, blk, buf);
}

void chk_note_read(struct chk_fs *fs, uint64_t blk, const void *buf)
{
	uint8_t t = chk_btype(fs, blk);
	if (t != BT_FREE && t != BT_DATA)
		chk_cache_put(fs, blk, buf);
}

/* ------------------------------------------------------------------ layout */

uint32_t chk_group_of_block(const struct chk_fs *fs, uint64_t blk)
{
	return (uint32_t)((blk - fs->first_data_block) / fs->bpg);
}

uint32_t chk_group_of_inode(const struct chk_fs *fs, uint32_t ino)
{
	return (ino - 1) / fs->ipg;
}

uint64_t chk_sb_blocks_count(const struct ext2_super_block *sb)
{
	bool wide = sb->s_feature_incompat & EXT4_FEATURE_INCOMPAT_64BIT;
	return sb->s_blocks_count | (wide ? (uint64_t)sb->s_blocks_count_hi << 32 : 0);
}

uint64_t chk_sb_free_blocks(const struct ext2_super_block *sb)
{
	bool wide = sb->s_feature_incompat & EXT4_FEATURE_INCOMPAT_64BIT;
	return sb->s_free_blocks_count | (wide ? (uint64_t)sb->s_free_blocks_hi << 32 : 0);
}

int chk_read_inode(struct chk_fs *fs, uint32_t ino, void *buf)
{
	uint32_t g = chk_group_of_inode(fs, ino), idx = (ino - 1) % fs->ipg;
	uint64_t blk = chk_gd_itable(fs, chk_gd(fs, g)) + idx / fs->inodes_per_block;
	/* a hit copies the inode alone: a transaction reads thousands */
	const uint8_t *hit = cache_hit(fs, blk);
	if (hit) {
		memcpy(buf, hit + (idx % fs->inodes_per_block) * fs->inode_size, fs->inode_size);
		return 0;
	}
	uint8_t *b = malloc(fs->bs);
	if (!b)
		return -ENOMEM;
	int r = chk_read_block(fs, blk, b);
	if (!r)
		memcpy(buf, b + (idx % fs->inodes_per_block) * fs->inode_size, fs->inode_size);
	free(b);
	return r;
}

int chk_journal_head(struct chk_fs *fs, uint64_t *block0, uint64_t *nblocks)
{
	if (!fs->journal_ino)
		return -ENOENT;
	uint8_t *raw = malloc(fs->inode_size);
	if (!raw)
		return -ENOMEM;
	int r = chk_read_inode(fs, fs->journal_ino, raw);
	if (r) {
		free(raw);
		return r;
	}
	const struct ext2_inode *in = (const void *)raw;
	/* block 0 through its map: an extent tree on ext4 */
	uint64_t b0 = chk_approved_bmap(fs, in, 0);
	uint64_t size = chk_inode_size64(in);
	free(raw);
	if (!b0 || b0 >= fs->blocks_count)
		return -ENOENT;
	*block0 = b0;
	*nblocks = size / fs->bs;
	return 0;
}

/* ------------------------------------------------------------------ bits */

bool chk_any_bit(const uint8_t *b, uint64_t from, uint64_t n)
{
	uint64_t i = from, end = from + n;
	for (; i < end && (i & 63); i++)
		if (bit_get(b, i))
			return true;
	for (; i + 64 <= end; i += 64) {
		uint64_t w;
		memcpy(&w, b + i / 8, sizeof(w));
		if (w)
			return true;
	}
	for (; i < end; i++)
		if (bit_get(b, i))
			return true;
	return false;
}

uint64_t chk_bits_end(const uint8_t *b, uint64_t n)
{
	uint64_t i = n;
	for (; i & 7; i--)
		if (bit_get(b, i - 1))
			return i;
	for (; i; i -= 8)
		if (b[i / 8 - 1])
			return i - 8 + 64 - (uint64_t)__builtin_clzll((uint64_t)b[i / 8 - 1]);
	return 0;
}

/* ------------------------------------------------------------------ queries */

bool chk_data_block_ok(const struct chk_fs *fs, uint64_t blk, uint32_t ino)
{
	if (ino == 0 || ino > fs->inodes_count || ino < fs->first_ino ||
	    (fs->journal_ino && ino == fs->journal_ino))
		return false;
	if (blk < fs->first_data_block || blk >= fs->blocks_count)
		return false;
	uint8_t t = chk_btype(fs, blk);
	return t == BT_FREE || (t == BT_DATA && chk_bowner(fs, blk) == ino);
}

void chk_block_info(const struct chk_fs *fs, uint64_t blk, struct chk_block_info *out)
{
	static const char *const names[BT_NTYPES] = {
		[BT_FREE] = "free", [BT_DATA] = "data", [BT_DIR] = "dir", [BT_IND] = "ind",
		[BT_DIND] = "dind", [BT_TIND] = "tind", [BT_XATTR] = "xattr", [BT_EXTENT] = "extent",
		[BT_BOOT] = "boot",
		[BT_SB] = "sb", [BT_GDT] = "gdt", [BT_RGDT] = "rgdt", [BT_RESIZE_IND] = "resize_ind",
		[BT_BBITMAP] = "bbitmap", [BT_IBITMAP] = "ibitmap", [BT_ITABLE] = "itable",
	};
	out->type = "out of range";
	out->owner = out->lblk = 0;
	if (blk >= fs->blocks_count)
		return;
	uint8_t t = chk_btype(fs, blk);
	out->type = t < BT_NTYPES && names[t] ? names[t] : "?";
	out->owner = t == BT_FREE ? 0 :
		     t == BT_BBITMAP || t == BT_IBITMAP || t == BT_ITABLE ? chk_layout_group(fs, blk, t, NULL) :
		     chk_bowner(fs, blk);
	out->lblk = t == BT_DATA || t == BT_DIR ? chk_blblk(fs, blk) : 0;
}

/* ------------------------------------------------------------------ records */

const char *chk_rtype_name(enum chk_rtype t)
{
	static const char *const names[] = { "sb", "bgd", "bbitmap", "ibitmap", "inode",
					     "dirent", "ind", "xattr", "htree", "extent" };
	return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] : "?";
}

int chk_record_format(const struct chk_record *r, char *buf, size_t len)
{
	if (r->type == CHK_SB)
		return snprintf(buf, len, "sb | - | %s | %lld | %lld", r->field,
				(long long)r->old_value, (long long)r->new_value);
	return snprintf(buf, len, "%s | %llu | %s | %lld | %lld", chk_rtype_name(r->type),
			(unsigned long long)r->id, r->field,
			(long long)r->old_value, (long long)r->new_value);
}

char *chk_arena_alloc(struct str_arena *a, size_t n)
{
	if (!a->nchunks || a->used + n > a->cap) {
		size_t cap = n > 16384 ? n : 16384;
		char **nc = realloc(a->chunks, (a->nchunks + 1) * sizeof(*nc));
		if (!nc) {
			a->oom = true;
			return NULL;
		}
		a->chunks = nc;
		if (!(nc[a->nchunks] = malloc(cap))) {
			a->oom = true;
			return NULL;
		}
		a->nchunks++;
		a->used = 0;
		a->cap = cap;
	}
	char *p = a->chunks[a->nchunks - 1] + a->used;
	a->used += n;
	return p;
}

const char *chk_arena_strn(struct str_arena *a, const char *s, size_t n)
{
	char *p = chk_arena_alloc(a, n + 1);
	if (!p)
		return "?";
	memcpy(p, s, n);
	p[n] = 0;
	return p;
}

const char *chk_arena_indexed(struct str_arena *a, const char *name, uint32_t i)
{
	/* "name[i]" without printf: a transaction makes thousands */
	char digits[10];
	size_t nd = 0, nl = strlen(name);
	do {
		digits[nd++] = (char)('0' + i % 10);
		i /= 10;
	} while (i);
	char *p = chk_arena_alloc(a, nl + nd + 3);
	if (!p)
		return "?";
	memcpy(p, name, nl);
	p[nl] = '[';
	for (size_t k = 0; k < nd; k++)
		p[nl + 1 + k] = digits[nd - 1 - k];
	p[nl + 1 + nd] = ']';
	p[nl + 2 + nd] = 0;
	return p;
}

const char *chk_arena_printf(struct str_arena *a, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char tmp[1200];
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		return "?";
	if ((size_t)n >= sizeof(tmp))
		n = sizeof(tmp) - 1;
	return chk_arena_strn(a, tmp, (size_t)n);
}

void chk_arena_free(struct str_arena *a)
{
	for (size_t i = 0; i < a->nchunks; i++)
		free(a->chunks[i]);
	free(a->chunks);
	memset(a, 0, sizeof(*a));
}

struct chk_verdict *chk_verdict_new(void)
{
	return calloc(1, sizeof(struct chk_verdict));
}

size_t chk_verdict_add_record(struct chk_verdict *v, enum chk_rtype t, uint64_t id,
			  const char *field, int64_t o, int64_t n)
{
	if (v->nrecs == v->caprecs) {
		size_t nc = v->caprecs ? v->caprecs * 2 : 64;
		struct chk_record *nr = realloc(v->recs, nc * sizeof(*nr));
		if (!nr) {
			v->oom = true;
			return SIZE_MAX;
		}
		v->recs = nr;
		v->caprecs = nc;
	}
	v->recs[v->nrecs] = (struct chk_record){ t, id, field, o, n };
	return v->nrecs++;
}

void chk_verdict_add_violation(struct chk_verdict *v, enum chk_inv inv,
			   const size_t *recs, size_t nrecs, const char *fmt, ...)
{
	/* one line per violated invariant and subject; cap to keep output bounded */
	if (v->nviols >= 1000)
		return;
	if (v->nviols == v->capviols) {
		size_t nc = v->capviols ? v->capviols * 2 : 16;
		struct chk_violation *nv = realloc(v->viols, nc * sizeof(*nv));
		if (!nv) {
			v->oom = true;
			return;
		}
		v->viols = nv;
		v->capviols = nc;
	}
	char tmp[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	size_t *rc = NULL, k = 0;
	if (nrecs) {
		rc = malloc(nrecs * sizeof(*rc));
		if (!rc) {
			v->oom = true;
			return;
		}
		for (size_t i = 0; i < nrecs; i++)
			if (recs[i] != SIZE_MAX)
				rc[k++] = recs[i];
	}
	struct chk_violation *x = &v->viols[v->nviols++];
	x->inv = chk_invariant_at(inv);
	x->detail = chk_arena_printf(&v->strings, "%s", tmp);
	x->nrecords = k;
	x->records = rc;
}

bool chk_verdict_oom(const struct chk_verdict *v)
{
	return v->oom || v->strings.oom;
}

bool chk_verdict_ok(const struct chk_verdict *v) { return v->nviols == 0; }
size_t chk_verdict_nrecords(const struct chk_verdict *v) { return v->nrecs; }
const struct chk_record *chk_verdict_record(const struct chk_verdict *v, size_t i)
{
	return i < v->nrecs ? &v->recs[i] : NULL;
}
size_t chk_verdict_nviolations(const struct chk_verdict *v) { return v->nviols; }
const struct chk_violation *chk_verdict_violation(const struct chk_verdict *v, size_t i)
{
	return i < v->nviols ? &v->viols[i] : NULL;
}

void chk_verdict_free(struct chk_verdict *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->nviols; i++)
		free((void *)v->viols[i].records);
	free(v->viols);
	if (v->txn)
		chk_pool_give_recs(v->txn->pool, v->recs, v->caprecs);
	else
		free(v->recs);
	chk_arena_free(&v->strings);
	if (v->txn)
		chk_txn_free(v->txn);
	free(v);
}

/* ------------------------------------------------------------------ advance, stats */

static uint64_t thread_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int chk_advance(struct chk_fs *fs, const struct chk_verdict *v)
{
	if (!v->txn)
		return -EINVAL;
	uint64_t t0 = thread_ns();
	int r = chk_txn_apply(fs, v->txn);
	fs->stats.cpu_ns += thread_ns() - t0;
	return r;
}

void chk_get_stats(const struct chk_fs *fs, struct chk_stats *out)
{
	*out = fs->stats;
}

uint64_t chk_thread_ns(void)
{
	return thread_ns();
}
