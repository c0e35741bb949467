/*
 * tests/dirindex/test_dxsplit.c - indexed directories through dirindex.c:
 * the hash cookies of readdir and their collision runs (dxorder.c, on
 * made-up names).
 *
 * Exit 0 pass, 1 fail.
 */
#include "dirindex.h"
#include "test_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			test_report("FAIL", __FILE__, __LINE__, #cond, __VA_ARGS__); \
			failures++;                                          \
			return -1;                                           \
		}                                                            \
	} while (0)

/* ---- readdir batches over names: each name's count, the batch limit ---- */

struct reader {
	int n;                  /* names "n<i>" counted in seen[i] */
	unsigned char *seen;
	int dots, other;
	int batch, taken;       /* names a call takes at most, and took */
	uint64_t next;          /* next_off of the last name taken */
	bool cut_run;           /* fits refused a run after names were taken */
};

static int reader_fill(void *ctx, const char *name, size_t len, ext2_ino_t ino, int ftype,
		       uint64_t next_off)
{
	struct reader *r = ctx;
	char buf[300];
	int i;

	(void)ino;
	(void)ftype;
	if (r->taken == r->batch)
		return 1;
	r->taken++;
	r->next = next_off;
	memcpy(buf, name, len);
	buf[len] = 0;
	if (!strcmp(buf, ".") || !strcmp(buf, ".."))
		r->dots++;
	else if (sscanf(buf, "n%d", &i) == 1 && i >= 0 && i < r->n)
		r->seen[i]++;
	else
		r->other++;
	return 0;
}

static bool reader_fits(void *ctx, const struct dindex_name *run, size_t n)
{
	struct reader *r = ctx;

	(void)run;
	return r->taken + (int)n <= r->batch;
}

/* ---- hash cookies and runs, on made-up names ---- */

struct fake {
	struct dx_ord *v;
	size_t n;
	char (*names)[16];
};

/* Names n0..n<count-1>; name i gets the key i / 3 * 7 + 2 for i % 5 != 0
 * (runs of up to three) and a key of its own otherwise. */
static void fake_build(struct fake *f, int count, const unsigned char *absent)
{
	f->n = 0;
	for (int i = 0; i < count + 2; i++) {
		struct dx_ord *o = &f->v[f->n];

		if (i < 2) {
			*o = (struct dx_ord){ .key = (uint64_t)i, .name = i ? ".." : ".", .len = (uint8_t)(i + 1) };
		} else {
			int k = i - 2;

			if (absent && absent[k])
				continue;
			snprintf(f->names[k], sizeof(f->names[k]), "n%d", k);
			*o = (struct dx_ord){ .name = f->names[k], .len = (uint8_t)strlen(f->names[k]),
					      .key = k % 5 ? (uint64_t)k / 3 * 7 + 2 : (uint64_t)k * 7 + 5 };
		}
		f->n++;
	}
	f->n = dx_order_sort(f->v, f->n);
}

static int test_cookies(void)
{
	const int count = 300;
	struct fake f;
	struct reader r = { .n = count };
	unsigned char *absent = calloc(count, 1);
	int rc, calls;

	printf("hash cookies and collision runs:\n");
	CHECK(dx_readdir_key(0, 0) == 2 && dx_readdir_key(0, 1) == 2 && dx_readdir_key(0, 3) == 3,
	      "the first names' cookies come after \".\" and \"..\"");
	CHECK(dx_readdir_key(2, 0) == UINT64_C(1) << 32 && dx_readdir_key(4, 7) == (UINT64_C(2) << 32 | 7),
	      "cookie = (major >> 1) << 32 | minor");
	CHECK(dx_readdir_key(0xfffffffe, 0xffffffff) == (UINT64_C(1) << 63) - 2,
	      "the last cookie + 1 is a valid off_t");
	CHECK(dx_readdir_key(0x10, 5) < dx_readdir_key(0x12, 0), "major first, then minor");

	f.v = calloc(count + 2, sizeof(*f.v));
	f.names = calloc(count, sizeof(*f.names));
	r.seen = calloc(count, 1);
	CHECK(f.v && f.names && r.seen && absent, "calloc");
	/* any batch that holds the largest run (3): every name once */
	for (int batch = 3; batch <= 9; batch++) {
		fake_build(&f, count, NULL);
		memset(r.seen, 0, count);
		r.dots = r.other = 0;
		r.batch = batch;
		r.next = 0;
		for (calls = 0;; calls++) {
			r.taken = 0;
			rc = dx_order_emit(f.v, f.n, r.next, reader_fill, reader_fits, &r);
			CHECK(rc == 0, "batch %d: emit %d", batch, rc);
			if (!r.taken)
				break;
			CHECK(calls < 2 * count, "batch %d: readdir does not end", batch);
		}
		CHECK(r.dots == 2 && r.other == 0, "batch %d: dots %d other %d", batch, r.dots, r.other);
		for (int i = 0; i < count; i++)
			CHECK(r.seen[i] == 1, "batch %d: n%d seen %d times", batch, i, r.seen[i]);
	}
	/* a batch smaller than a run: the run is refused whole */
	r.batch = 2;
	r.next = 0;
	rc = 0;
	for (calls = 0; calls < 2 * count && rc == 0; calls++) {
		r.taken = 0;
		rc = dx_order_emit(f.v, f.n, r.next, reader_fill, reader_fits, &r);
		CHECK(rc == 0 || r.taken == 0, "a run was cut: %d taken before %d", r.taken, rc);
		if (!rc && !r.taken)
			break;
	}
	CHECK(rc == -EINVAL, "a buffer too small for a run: %d", rc);
	/* without fits a run cut short is read again, never skipped */
	memset(r.seen, 0, count);
	r.batch = 4;
	r.next = 0;
	for (calls = 0;; calls++) {
		r.taken = 0;
		CHECK(dx_order_emit(f.v, f.n, r.next, reader_fill, NULL, &r) == 0, "emit");
		if (!r.taken)
			break;
		CHECK(calls < 4 * count, "readdir without fits does not end");
	}
	for (int i = 0; i < count; i++)
		CHECK(r.seen[i] >= 1, "n%d skipped without fits", i);
	/* names removed and added between calls: every name present
	 * throughout once (removed ones are tombstones until the next sort) */
	memset(r.seen, 0, count);
	r.batch = 5;
	r.next = 0;
	fake_build(&f, count, absent);
	for (calls = 0;; calls++) {
		r.taken = 0;
		CHECK(dx_order_emit(f.v, f.n, r.next, reader_fill, reader_fits, &r) == 0, "emit");
		if (!r.taken)
			break;
		/* each call: one name removed (a tombstone), and every
		 * seventh call, the array rebuilt with one name back */
		int gone = (calls * 37) % count;

		if (!absent[gone]) {
			absent[gone] = 1;
			for (size_t i = 0; i < f.n; i++)
				if (f.v[i].name == f.names[gone])
					f.v[i].name = NULL;
		}
		if (calls % 7 == 6) {
			absent[(calls * 53) % count] = 0;
			fake_build(&f, count, absent);
		}
	}
	for (int i = 0; i < count; i++) {
		bool throughout = true;

		for (int c = 0; c <= calls && throughout; c++)
			if ((c * 37) % count == i || (c % 7 == 6 && (c * 53) % count == i))
				throughout = false;
		CHECK(!throughout || r.seen[i] == 1, "n%d present throughout, seen %d times", i, r.seen[i]);
		CHECK(r.seen[i] <= 1, "n%d seen %d times", i, r.seen[i]);
	}
	printf("  ok\n");
	free(f.v);
	free(f.names);
	free(r.seen);
	free(absent);
	return 0;
}

int main(void)
{
	test_cookies();
	printf("%s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
