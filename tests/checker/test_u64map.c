/*
 * tests/checker/test_u64map.c - the checker's u64 -> u32 map against a flat
 * model: seeded random puts, gets and deletes over keys that come in runs
 * (neighbouring blocks), a group's stride apart, multiples of eight and of
 * large powers of two, and near the top of the range; a reserve makes room
 * that the puts after it do not outgrow.  Every key of the model and a
 * sample of absent ones is looked up after each batch.
 *
 *   test_u64map [SEED]     prints the seed on failure
 * Exit 0 pass, 1 fail.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chk_internal.h"
#include "seeded_rng.h"

static uint64_t rng;
static uint64_t rnd(void) { return seeded_next(&rng); }

#define NKEYS 6000

struct model {
	uint64_t key[NKEYS];
	uint32_t val[NKEYS];
	bool in[NKEYS];
};

static int failures;

#define FAIL(...) do { if (failures++ < 10) { printf("FAIL: " __VA_ARGS__); printf("\n"); } } while (0)

/* The key set of one round: one of the patterns keys come in. */
static void make_keys(struct model *m, int pattern)
{
	uint64_t base = rnd() % 1000000;
	for (size_t i = 0; i < NKEYS; i++) {
		switch (pattern) {
		case 0: m->key[i] = base + i; break;                          /* a run */
		case 1: m->key[i] = base + (uint64_t)i * 32768; break;        /* a group's stride */
		case 2: m->key[i] = (uint64_t)i * 8; break;                   /* multiples of eight */
		case 3: m->key[i] = (uint64_t)i << 24; break;                 /* a large power of two */
		case 4: m->key[i] = UINT64_MAX - 1 - i; break;                /* the top (the map stores key + 1) */
		default: m->key[i] = base + (i / 7) * 100 + i % 7; break;   /* short runs */
		}
		m->in[i] = false;
	}
}

static void compare(const struct u64map *map, const struct model *m, int round)
{
	size_t n = 0;
	for (size_t i = 0; i < NKEYS; i++) {
		uint32_t v = 0;
		bool got = chk_u64map_get(map, m->key[i], &v);
		if (got != m->in[i])
			FAIL("round %d: key %" PRIu64 " %s, the model says %s", round, m->key[i],
			     got ? "found" : "missing", m->in[i] ? "present" : "absent");
		else if (got && v != m->val[i])
			FAIL("round %d: key %" PRIu64 " value %u, the model %u", round, m->key[i], v, m->val[i]);
		n += m->in[i];
	}
	if (map->n != n)
		FAIL("round %d: the map counts %zu keys, the model %zu", round, map->n, n);
}

static void one_round(struct model *m, int round)
{
	struct u64map map = { 0 };
	make_keys(m, round % 6);
	size_t want = NKEYS / 2 + rnd() % (NKEYS / 2);
	if (round % 2 == 0) {
		if (chk_u64map_reserve(&map, want))
			FAIL("round %d: reserve of %zu failed", round, want);
		if (map.cap / 2 < want)
			FAIL("round %d: reserve of %zu made room for %zu", round, want, map.cap / 2);
	}
	uint64_t *keys = map.keys;
	for (size_t i = 0; i < want; i++) {
		m->val[i] = (uint32_t)rnd();
		if (chk_u64map_put(&map, m->key[i], m->val[i]))
			FAIL("round %d: put failed", round);
		m->in[i] = true;
	}
	if (round % 2 == 0 && map.keys != keys)
		FAIL("round %d: %zu puts grew a map reserved for them", round, want);
	compare(&map, m, round);
	/* deletes, updates and new puts mixed, the model following */
	for (int op = 0; op < 4 * NKEYS; op++) {
		size_t i = rnd() % NKEYS;
		switch (rnd() % 3) {
		case 0:
			chk_u64map_del(&map, m->key[i]);
			m->in[i] = false;
			break;
		case 1:
			m->val[i] = (uint32_t)rnd();
			if (chk_u64map_put(&map, m->key[i], m->val[i]))
				FAIL("round %d: put failed", round);
			m->in[i] = true;
			break;
		default: {
			uint32_t v;
			if (chk_u64map_get(&map, m->key[i], &v) != m->in[i])
				FAIL("round %d: key %" PRIu64 " looked up wrong mid-round", round, m->key[i]);
		}
		}
		if (op % 1000 == 999)
			compare(&map, m, round);
	}
	compare(&map, m, round);
	chk_u64map_free(&map);
}

int main(int argc, char **argv)
{
	uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : 20261207;
	rng = seed;
	struct model *m = malloc(sizeof(*m));
	if (!m)
		return 1;
	for (int round = 0; round < 24 && !failures; round++)
		one_round(m, round);
	free(m);
	if (failures) {
		printf("test_u64map: %d failures (seed %" PRIu64 ")\n", failures, seed);
		return 1;
	}
	printf("test_u64map: ok\n");
	return 0;
}
