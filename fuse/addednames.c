/*
 * fuse/addednames.c - the names a directory index added or repointed since
 * the caller last cleared them (dindex_added_names): after a rejected
 * commit the kernel may hold dentries for them, which the caller then
 * invalidates.  A bounded record: past ADDED_NAMES_MAX names, or out of
 * memory, it stops keeping them and says so.
 *
 * Errors: none; a name not kept makes added_names_each return false.
 */
#include "dirindex.h"

#include <stdlib.h>
#include <string.h>

struct added_name {
	ext2_ino_t dir;
	char *name;
};

#define ADDED_NAMES_MAX 65536

void added_names_note(struct added_names *a, ext2_ino_t dir, const char *name, size_t len)
{
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 64;
		struct added_name *v = cap <= ADDED_NAMES_MAX ? realloc(a->v, cap * sizeof(*v)) : NULL;
		if (!v)
			return;   /* the caller's fallback: the kernel's entry timeouts */
		a->v = v;
		a->cap = cap;
	}
	char *copy = strndup(name, len);
	if (!copy)
		return;
	a->v[a->n++] = (struct added_name){ .dir = dir, .name = copy };
}

void added_names_clear(struct added_names *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i].name);
	a->n = 0;
}

bool added_names_each(const struct added_names *a, dindex_name_fn fn, void *ctx)
{
	for (size_t i = 0; i < a->n; i++)
		fn(ctx, a->v[i].dir, a->v[i].name);
	return a->n < ADDED_NAMES_MAX;
}

void added_names_free(struct added_names *a)
{
	added_names_clear(a);
	free(a->v);
	a->v = NULL;
	a->cap = 0;
}
