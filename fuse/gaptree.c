/*
 * fuse/gaptree.c - a max-tree of the free room in each block of a
 * directory, so that dirindex.c finds a block an entry fits in O(log blocks)
 * instead of scanning every block.
 *
 * Errors: 0 or -errno, as declared in dirindex.h.  Threads: the caller
 * holds the file-system lock.
 */
#include "dirindex.h"

#include <errno.h>
#include <stdlib.h>

void gap_tree_set(struct gap_tree *g, uint32_t blk, uint32_t room)
{
	size_t i = (size_t)g->cap + blk;

	g->node[i] = room;
	for (i /= 2; i >= 1; i /= 2) {
		uint32_t l = g->node[2 * i], r = g->node[2 * i + 1];

		g->node[i] = l > r ? l : r;
	}
}

uint32_t gap_tree_room(const struct gap_tree *g, uint32_t blk)
{
	return g->node[(size_t)g->cap + blk];
}

int64_t gap_tree_find(const struct gap_tree *g, uint32_t need)
{
	size_t i = 1;

	if (g->cap == 0 || g->node[1] < need)
		return -1;
	while (i < g->cap)
		i = g->node[2 * i] >= need ? 2 * i : 2 * i + 1;
	return (int64_t)(i - g->cap);
}

int gap_tree_reserve(struct gap_tree *g, uint32_t nblocks)
{
	uint32_t cap = g->cap ? g->cap : 8;
	uint32_t *t;

	/* the capacity doubles: past 2^31 it would wrap to 0 */
	if (nblocks > UINT32_C(1) << 31)
		return -EFBIG;
	if (nblocks <= g->cap)
		return 0;
	while (cap < nblocks)
		cap *= 2;
	t = calloc(2 * (size_t)cap, sizeof(*t));
	if (!t)
		return -ENOMEM;
	/* Rebuild: copy the leaves, then recompute inner nodes. */
	for (uint32_t b = 0; b < g->cap; b++)
		t[cap + b] = g->node[g->cap + b];
	for (size_t i = cap - 1; i >= 1; i--)
		t[i] = t[2 * i] > t[2 * i + 1] ? t[2 * i] : t[2 * i + 1];
	free(g->node);
	g->node = t;
	g->cap = cap;
	return 0;
}

void gap_tree_free(struct gap_tree *g)
{
	free(g->node);
	g->node = NULL;
	g->cap = 0;
}
