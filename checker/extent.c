/*
 * checker/extent.c - ext4 extent trees, parsed from bytes alone.
 *
 * A tree's root is the 60 bytes of i_block (a 12-byte header and up to 4
 * entries); deeper nodes are whole blocks.  The rules are those the kernel
 * checks before it trusts a node (ext4_ext_check, ext4_valid_extent_entries)
 * and e2fsck's pass 1 (scan_extent_node), no stricter: a false alarm is a
 * checker bug.
 */
#include "chk_ext4.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HDR 12u
#define ENTRY 12u
#define LBLK_END (1ull << 32)

struct chk_ext chk_ext_entry(const uint8_t *node, uint16_t depth, unsigned i)
{
	const uint8_t *p = node + HDR + ENTRY * i;
	struct chk_ext e = { .lblk = chk_ld32(p) };
	if (depth) {
		e.pblk = chk_ld32(p + 4) | (uint64_t)chk_ld16(p + 8) << 32;
		return e;
	}
	uint16_t len = chk_ld16(p + 4);
	e.pblk = chk_ld32(p + 8) | (uint64_t)chk_ld16(p + 6) << 32;
	e.unwritten = len > CHK_EXT_INIT_MAX_LEN;
	e.len = e.unwritten ? len - CHK_EXT_INIT_MAX_LEN : len;
	return e;
}

static const char *say(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static const char *say(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return buf;
}

static const char *header_problem(struct chk_ext_header h, size_t size, int want_depth, char *buf,
				  size_t len)
{
	if (h.magic != CHK_EXT_MAGIC)
		return say(buf, len, "bad magic 0x%04x", h.magic);
	if (h.entries > h.max)
		return say(buf, len, "%u entries beyond its maximum %u", h.entries, h.max);
	/* e2fsck allows a maximum up to two entries short of what fits,
	 * room once meant for a tail */
	unsigned fits = (unsigned)((size - HDR) / ENTRY);
	if (h.max > fits || h.max + 2u < fits)
		return say(buf, len, "maximum %u entries where %u fit", h.max, fits);
	if (h.depth > CHK_EXT_READ_DEPTH)
		return say(buf, len, "depth %u beyond %u", h.depth, CHK_EXT_READ_DEPTH);
	if (want_depth >= 0 && h.depth != want_depth)
		return say(buf, len, "depth %u where its parent wants %d", h.depth, want_depth);
	return NULL;
}

const char *chk_ext_node_problem(const uint8_t *node, size_t size, struct chk_ext_bounds b,
				 uint64_t first_data_block, uint64_t blocks_count, char *buf,
				 size_t len)
{
	struct chk_ext_header h = chk_ext_header_at(node);
	const char *why = header_problem(h, size, b.depth, buf, len);
	if (why)
		return why;
	uint64_t next = b.lo;   /* the first logical block the next entry may start at */
	for (unsigned i = 0; i < h.entries; i++) {
		struct chk_ext e = chk_ext_entry(node, h.depth, i);
		if (e.lblk < next)
			return say(buf, len, "entry %u starts at logical block %u, before %llu "
				   "(out of order, overlapping or outside its index range)", i,
				   e.lblk, (unsigned long long)next);
		if (e.lblk >= b.hi)
			return say(buf, len, "entry %u starts at logical block %u, past its index "
				   "range's end %llu", i, e.lblk, (unsigned long long)b.hi);
		if (h.depth) {
			if (e.pblk < first_data_block || e.pblk >= blocks_count)
				return say(buf, len, "index entry %u names block %llu, outside the "
					   "file system", i, (unsigned long long)e.pblk);
			next = (uint64_t)e.lblk + 1;
			continue;
		}
		if (e.len == 0)
			return say(buf, len, "extent %u has length 0", i);
		if ((uint64_t)e.lblk + e.len > b.hi)
			return say(buf, len, "extent %u (logical %u + %u) runs past %llu", i, e.lblk,
				   e.len, (unsigned long long)b.hi);
		if (e.pblk < first_data_block || e.pblk + e.len > blocks_count || e.pblk + e.len < e.pblk)
			return say(buf, len, "extent %u maps blocks %llu..%llu, outside the file "
				   "system", i, (unsigned long long)e.pblk,
				   (unsigned long long)(e.pblk + e.len - 1));
		next = (uint64_t)e.lblk + e.len;
	}
	return NULL;
}

/* The tree blocks seen so far in one walk, so none is descended twice. */
struct seen {
	struct u64map map;
	int err;
};

struct walker {
	const struct chk_ext_walk *w;
	struct seen seen;
	char *buf;
	size_t len;
	bool stopped;
};

static int walk_node(struct walker *k, const uint8_t *node, size_t size, struct chk_ext_bounds b)
{
	const struct chk_ext_walk *w = k->w;
	if (chk_ext_node_problem(node, size, b, w->first_data_block, w->blocks_count, k->buf, k->len))
		return 1;
	struct chk_ext_header h = chk_ext_header_at(node);
	if (!h.depth) {
		for (unsigned i = 0; i < h.entries && !k->stopped; i++) {
			struct chk_ext e = chk_ext_entry(node, 0, i);
			if (w->visit_ext && !w->visit_ext(w->ctx, &e))
				k->stopped = true;
		}
		return 0;
	}
	uint8_t *child = malloc(w->bs);
	if (!child)
		return -ENOMEM;
	int ret = 0;
	for (unsigned i = 0; i < h.entries && !k->stopped && !ret; i++) {
		struct chk_ext e = chk_ext_entry(node, h.depth, i);
		uint32_t dummy;
		if (chk_u64map_get(&k->seen.map, e.pblk, &dummy)) {
			say(k->buf, k->len, "tree block %llu is named twice", (unsigned long long)e.pblk);
			ret = 1;
			break;
		}
		if (chk_u64map_put(&k->seen.map, e.pblk, 1)) {
			ret = -ENOMEM;
			break;
		}
		ret = w->get(w->get_ctx, e.pblk, child);
		if (ret)
			break;
		if (w->visit_node && !w->visit_node(w->ctx, e.pblk, (uint16_t)(h.depth - 1), child))
			continue;      /* the caller skips this subtree */
		struct chk_ext_bounds cb = {
			.lo = e.lblk,
			.hi = i + 1 < h.entries ? chk_ext_entry(node, h.depth, i + 1).lblk : b.hi,
			.depth = h.depth - 1,
		};
		struct chk_ext_header ch = chk_ext_header_at(child);
		uint32_t first = ch.magic == CHK_EXT_MAGIC && ch.entries ? chk_ext_entry(child, ch.depth, 0).lblk : e.lblk;
		if (first != e.lblk) {
			say(k->buf, k->len, "tree block %llu starts at logical block %u, its index entry at %u",
			    (unsigned long long)e.pblk, first, e.lblk);
			ret = 1;
			break;
		}
		ret = walk_node(k, child, w->bs, cb);
		if (ret == 1) {
			/* name the block the problem is in */
			size_t used = strnlen(k->buf, k->len);
			snprintf(k->buf + used, k->len - used, " (in tree block %llu)",
				 (unsigned long long)e.pblk);
			ret = 2;
		}
	}
	free(child);
	return ret;
}

int chk_ext_walk(const struct chk_ext_walk *w, const uint8_t i_block[60], char *buf, size_t len)
{
	struct walker k = { .w = w, .buf = buf, .len = len };
	struct chk_ext_bounds root = { .lo = 0, .hi = LBLK_END, .depth = -1 };
	int ret = walk_node(&k, i_block, 60, root);
	chk_u64map_free(&k.seen.map);
	return ret > 0 ? 1 : ret;
}

/* A node that can be read: the header sane for its container (the entries'
 * order is not needed to follow one path). */
static bool node_readable(const uint8_t *node, size_t size, int want_depth)
{
	char buf[8];
	return !header_problem(chk_ext_header_at(node), size, want_depth, buf, sizeof(buf));
}

uint64_t chk_ext_bmap(const struct chk_ext_walk *w, const uint8_t i_block[60], uint32_t lblk, bool *unwritten,
		      int *err)
{
	const uint8_t *node = i_block;
	size_t size = 60;
	int want = -1;
	uint8_t *buf = NULL;
	uint64_t found = 0;
	for (int level = 0; level <= (int)CHK_EXT_READ_DEPTH && node_readable(node, size, want); level++) {
		struct chk_ext_header h = chk_ext_header_at(node);
		int pick = -1;
		for (unsigned i = 0; i < h.entries; i++) {
			struct chk_ext e = chk_ext_entry(node, h.depth, i);
			if (e.lblk > lblk)
				break;
			pick = (int)i;
		}
		if (pick < 0)
			break;
		struct chk_ext e = chk_ext_entry(node, h.depth, (unsigned)pick);
		if (!h.depth) {
			if ((uint64_t)lblk < (uint64_t)e.lblk + e.len) {
				found = e.pblk + (lblk - e.lblk);
				if (unwritten)
					*unwritten = e.unwritten;
			}
			break;
		}
		if (e.pblk < w->first_data_block || e.pblk >= w->blocks_count)
			break;
		/* not a hole: the block cannot be known */
		int r = buf || (buf = malloc(w->bs)) ? w->get(w->get_ctx, e.pblk, buf) : -ENOMEM;
		if (r) {
			if (err)
				*err = r;
			break;
		}
		node = buf;
		size = w->bs;
		want = h.depth - 1;
	}
	free(buf);
	return found;
}

/* Right to left below one node: the last mapped block and the last of an
 * initialised extent (stops once both are known). */
static int last_below(const struct chk_ext_walk *w, const uint8_t *node, size_t size, int want, int budget,
		      int64_t *last, int64_t *last_init)
{
	if (budget < 0 || !node_readable(node, size, want))
		return 0;
	struct chk_ext_header h = chk_ext_header_at(node);
	uint8_t *buf = NULL;
	int r = 0;
	for (unsigned i = h.entries; i-- > 0 && *last_init < 0 && !r;) {
		struct chk_ext e = chk_ext_entry(node, h.depth, i);
		if (!h.depth) {
			int64_t end = (int64_t)e.lblk + e.len - 1;
			if (e.len && *last < 0)
				*last = end;
			if (e.len && !e.unwritten)
				*last_init = end;
			continue;
		}
		if (e.pblk < w->first_data_block || e.pblk >= w->blocks_count)
			continue;
		if (!buf && !(buf = malloc(w->bs)))
			return -ENOMEM;
		r = w->get(w->get_ctx, e.pblk, buf);
		if (!r)
			r = last_below(w, buf, w->bs, h.depth - 1, budget - 1, last, last_init);
	}
	free(buf);
	return r;
}

int chk_ext_last(const struct chk_ext_walk *w, const uint8_t i_block[60], int64_t *last, int64_t *last_init)
{
	*last = *last_init = -1;
	return last_below(w, i_block, 60, -1, CHK_EXT_READ_DEPTH, last, last_init);
}
