/*
 * fuse/dxorder.c - readdir of an indexed directory in hash order.  Leaf
 * splits move entries between blocks, so a block/offset position would
 * skip or repeat names across a split; a name's hash never changes, so its
 * hash cookie (dx_readdir_key) is a position that holds, as the kernel's
 * ext4 positions an htree directory's readdir by hash.  dirindex.c keeps
 * the names sorted by cookie (struct dx_ord) and calls these.
 *
 * Errors: 0 or -errno, as declared in dirindex.h.  Threads: the caller
 * holds the file-system lock.
 */
#include "dirindex.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define KEY_FIRST_NAME 2                        /* 0 ".", 1 ".." */
#define KEY_LAST_NAME ((UINT64_C(1) << 63) - 2) /* + 1 stays a valid off_t */

uint64_t dx_readdir_key(uint32_t hash, uint32_t minor)
{
	/* bit 0 of a major hash is always clear: 63 bits of hash */
	uint64_t key = ((uint64_t)(hash >> 1) << 32) | minor;

	if (key < KEY_FIRST_NAME)
		return KEY_FIRST_NAME;
	return key > KEY_LAST_NAME ? KEY_LAST_NAME : key;
}

static int ord_cmp(const void *a, const void *b)
{
	const struct dx_ord *x = a, *y = b;
	int c;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	c = memcmp(x->name, y->name, x->len < y->len ? x->len : y->len);
	return c ? c : (int)x->len - (int)y->len;
}

size_t dx_order_sort(struct dx_ord *v, size_t n)
{
	size_t kept = 0;

	for (size_t i = 0; i < n; i++)
		if (v[i].name)
			v[kept++] = v[i];
	qsort(v, kept, sizeof(*v), ord_cmp);
	return kept;
}

/* The first index whose key is >= key. */
static size_t order_lower_bound(const struct dx_ord *v, size_t n, uint64_t key)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].key < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct dx_ord *dx_order_find(struct dx_ord *v, size_t n, uint64_t key, const char *name)
{
	for (size_t i = order_lower_bound(v, n, key); i < n && v[i].key == key; i++)
		if (v[i].name == name)
			return &v[i];
	return NULL;
}

/* Ask fits whether the run v[i..j) (its names still present) fits whole. */
static int run_fits(const struct dx_ord *v, size_t i, size_t j, dindex_fits_fn fits, void *ctx)
{
	struct dindex_name *names = malloc((j - i) * sizeof(*names));
	size_t n = 0;
	bool ok;

	if (!names)
		return -ENOMEM;
	for (; i < j; i++)
		if (v[i].name)
			names[n++] = (struct dindex_name){ .name = v[i].name, .len = v[i].len };
	ok = fits(ctx, names, n);
	free(names);
	return ok ? 1 : 0;
}

int dx_order_emit(const struct dx_ord *v, size_t n, uint64_t off, dindex_fill_fn fill,
		  dindex_fits_fn fits, void *ctx)
{
	bool taken = false;
	size_t i = order_lower_bound(v, n, off);

	while (i < n) {
		size_t j = i, last = n;
		uint64_t key = v[i].key;

		/* the run of names sharing this key, and its last present one */
		for (; j < n && v[j].key == key; j++)
			if (v[j].name)
				last = j;
		if (last == n) {
			i = j;
			continue;       /* removed names only */
		}
		if (j - i > 1 && fits) {
			int rc = run_fits(v, i, j, fits, ctx);

			if (rc < 0)
				return rc;
			if (!rc)
				return taken ? 0 : -EINVAL;
		}
		for (; i < j; i++) {
			if (!v[i].name)
				continue;
			if (fill(ctx, v[i].name, v[i].len, v[i].ino, v[i].ftype, i == last ? key + 1 : key))
				return 0;
			taken = true;
		}
	}
	return 0;
}
