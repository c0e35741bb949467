/*
 * checker/shadow_runs.c - the type/owner map's ranges: the data and
 * directory blocks of extent-mapped inodes, one entry per run of blocks
 * rather than one per block (a 32,768-block extent is one entry where the
 * paged map of shadow.c would spend 32,768 slots).
 *
 * Runs never overlap.  They are kept sorted by their first block in chunks
 * of at most RUN_CHUNK entries, and the chunks in a sorted array: a lookup
 * is two binary searches, an insertion moves at most a chunk's entries and
 * the chunk pointers (a million runs are eight thousand chunks).  Adjacent
 * runs of one owner that continue each other (physically and logically)
 * are merged, so a file grown block by block stays one run.
 *
 * Changing the map must not fail half-way through a transaction's advance:
 * chk_runs_reserve(n) makes the memory for n insertions (each splits at
 * most one chunk) exist first.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chk_internal.h"

#define RUN_CHUNK 128u
#define SPARE_KEEP 4u                  /* spare chunks kept after a transaction */

struct run_chunk {
	uint32_t n;
	struct chk_run r[RUN_CHUNK];
};

struct run_map {
	struct run_chunk **c;              /* sorted by c[i]->r[0].start; none empty */
	size_t n, cap;
	struct run_chunk **spare;          /* reserved, unused */
	size_t nspare, capspare;
	size_t nruns;
};

static uint64_t run_end(const struct chk_run *r)
{
	return r->start + r->len;
}

int chk_runs_init(struct chk_fs *fs)
{
	fs->runs = calloc(1, sizeof(*fs->runs));
	return fs->runs ? 0 : -ENOMEM;
}

void chk_runs_free(struct chk_fs *fs)
{
	struct run_map *m = fs->runs;
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		free(m->c[i]);
	for (size_t i = 0; i < m->nspare; i++)
		free(m->spare[i]);
	free(m->c);
	free(m->spare);
	free(m);
	fs->runs = NULL;
}

size_t chk_runs_count(const struct chk_fs *fs)
{
	return fs->runs ? fs->runs->nruns : 0;
}

/* The last chunk whose first run starts at or before blk (0 if none does). */
static size_t chunk_of(const struct run_map *m, uint64_t blk)
{
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->c[mid]->r[0].start <= blk)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? lo - 1 : 0;
}

/* Index of the first run of chunk k starting after blk. */
static uint32_t upper_in(const struct run_chunk *k, uint64_t blk)
{
	uint32_t lo = 0, hi = k->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (k->r[mid].start <= blk)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

bool chk_run_at(const struct chk_fs *fs, uint64_t blk, struct chk_run *out)
{
	const struct run_map *m = fs->runs;
	if (!m || !m->n)
		return false;
	const struct run_chunk *k = m->c[chunk_of(m, blk)];
	uint32_t i = upper_in(k, blk);
	if (!i || blk >= run_end(&k->r[i - 1]))
		return false;
	if (out)
		*out = k->r[i - 1];
	return true;
}

bool chk_run_next(const struct chk_fs *fs, uint64_t blk, struct chk_run *out)
{
	const struct run_map *m = fs->runs;
	if (!m || !m->n)
		return false;
	size_t ci = chunk_of(m, blk);
	const struct run_chunk *k = m->c[ci];
	uint32_t i = upper_in(k, blk);
	if (i && blk < run_end(&k->r[i - 1])) {
		*out = k->r[i - 1];
		return true;
	}
	if (i == k->n) {
		if (++ci == m->n)
			return false;
		k = m->c[ci];
		i = 0;
	}
	*out = k->r[i];
	return true;
}

int chk_runs_reserve(struct chk_fs *fs, size_t n)
{
	struct run_map *m = fs->runs;
	if (m->n + n > m->cap) {
		size_t cap = m->cap ? m->cap : 16;
		while (cap < m->n + n)
			cap *= 2;
		struct run_chunk **c = realloc(m->c, cap * sizeof(*c));
		if (!c)
			return -ENOMEM;
		m->c = c;
		m->cap = cap;
	}
	if (n > m->capspare) {
		struct run_chunk **s = realloc(m->spare, n * sizeof(*s));
		if (!s)
			return -ENOMEM;
		m->spare = s;
		m->capspare = n;
	}
	while (m->nspare < n) {
		struct run_chunk *k = malloc(sizeof(*k));
		if (!k)
			return -ENOMEM;
		m->spare[m->nspare++] = k;
	}
	return 0;
}

/* Spare chunks beyond a few go back (after a transaction's changes). */
void chk_runs_trim(struct chk_fs *fs)
{
	struct run_map *m = fs->runs;
	while (m && m->nspare > SPARE_KEEP)
		free(m->spare[--m->nspare]);
}

/* Chunk k is full: its upper half moves to a spare chunk after it. */
static void split_chunk(struct run_map *m, size_t ci)
{
	struct run_chunk *k = m->c[ci], *nk = m->spare[--m->nspare];
	uint32_t half = k->n / 2;
	nk->n = k->n - half;
	memcpy(nk->r, k->r + half, nk->n * sizeof(*nk->r));
	k->n = half;
	memmove(m->c + ci + 2, m->c + ci + 1, (m->n - ci - 1) * sizeof(*m->c));
	m->c[ci + 1] = nk;
	m->n++;
}

static void drop_chunk(struct run_map *m, size_t ci)
{
	struct run_chunk *k = m->c[ci];
	memmove(m->c + ci, m->c + ci + 1, (m->n - ci - 1) * sizeof(*m->c));
	m->n--;
	if (m->nspare < m->capspare)
		m->spare[m->nspare++] = k;
	else
		free(k);
}

static bool continues(const struct chk_run *a, const struct chk_run *b)
{
	return a->type == b->type && a->owner == b->owner && run_end(a) == b->start &&
	       (uint64_t)a->lblk + a->len == b->lblk && (uint64_t)a->len + b->len <= UINT32_MAX;
}

/* Insert r, which overlaps no run; needs one reserved insertion. */
static void insert_run(struct run_map *m, const struct chk_run *r)
{
	if (!m->n) {
		struct run_chunk *k = m->spare[--m->nspare];
		k->n = 1;
		k->r[0] = *r;
		m->c[m->n++] = k;
		m->nruns++;
		return;
	}
	size_t ci = chunk_of(m, r->start);
	struct run_chunk *k = m->c[ci];
	uint32_t i = upper_in(k, r->start);
	/* merge with the run before it (same chunk) or after it */
	if (i && continues(&k->r[i - 1], r)) {
		k->r[i - 1].len += r->len;
		struct chk_run *next = i < k->n ? &k->r[i] : ci + 1 < m->n ? &m->c[ci + 1]->r[0] : NULL;
		if (next && continues(&k->r[i - 1], next)) {
			k->r[i - 1].len += next->len;
			size_t nci = i < k->n ? ci : ci + 1;
			struct run_chunk *nk = m->c[nci];
			uint32_t ni = i < k->n ? i : 0;
			memmove(nk->r + ni, nk->r + ni + 1, (nk->n - ni - 1) * sizeof(*nk->r));
			if (--nk->n == 0)
				drop_chunk(m, nci);
			m->nruns--;
		}
		return;
	}
	struct chk_run *next = i < k->n ? &k->r[i] : ci + 1 < m->n ? &m->c[ci + 1]->r[0] : NULL;
	if (next && continues(r, next)) {
		next->start = r->start;
		next->lblk = r->lblk;
		next->len += r->len;
		return;
	}
	if (k->n == RUN_CHUNK) {
		split_chunk(m, ci);
		if (i > k->n) {
			i -= k->n;
			k = m->c[ci + 1];
		}
	}
	memmove(k->r + i + 1, k->r + i, (k->n - i) * sizeof(*k->r));
	k->r[i] = *r;
	k->n++;
	m->nruns++;
}

int chk_run_add(struct chk_fs *fs, uint64_t start, uint32_t len, uint8_t type, uint32_t owner,
		uint32_t lblk)
{
	if (!len)
		return 0;
	int e = chk_runs_reserve(fs, 1);
	if (e)
		return e;
	struct chk_run r = { start, len, owner, lblk, type };
	insert_run(fs->runs, &r);
	return 0;
}

void chk_run_remove(struct chk_fs *fs, uint64_t start, uint64_t len)
{
	struct run_map *m = fs->runs;
	uint64_t end = start + len;
	struct chk_run r;
	/* each step removes or trims the first run ending after start */
	while (len && chk_run_next(fs, start, &r) && r.start < end) {
		size_t ci = chunk_of(m, r.start);
		struct run_chunk *k = m->c[ci];
		uint32_t i = upper_in(k, r.start) - 1;
		struct chk_run *p = &k->r[i];
		if (p->start < start && run_end(p) > end) {
			/* the middle goes: the tail becomes a run of its own */
			struct chk_run tail = *p;
			tail.start = end;
			tail.lblk = p->lblk + (uint32_t)(end - p->start);
			tail.len = (uint32_t)(run_end(p) - end);
			p->len = (uint32_t)(start - p->start);
			if (m->nspare || k->n < RUN_CHUNK)
				insert_run(m, &tail);
			return;
		}
		if (p->start < start) {
			p->len = (uint32_t)(start - p->start);
		} else if (run_end(p) > end) {
			p->lblk += (uint32_t)(end - p->start);
			p->len = (uint32_t)(run_end(p) - end);
			p->start = end;
		} else {
			memmove(k->r + i, k->r + i + 1, (k->n - i - 1) * sizeof(*k->r));
			m->nruns--;
			if (--k->n == 0)
				drop_chunk(m, ci);
		}
	}
}
