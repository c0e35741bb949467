/*
 * tests/common/seeded_rng.h - the seeded generator the tests and exercisers
 * share (splitmix64): a run is a function of its seed, so a failing seed
 * replays exactly.  Header-only: exercisers that link nothing else use it.
 */
#ifndef RECON_TESTS_SEEDED_RNG_H
#define RECON_TESTS_SEEDED_RNG_H

#include <stdint.h>

/* The next value of the sequence whose state is *state (any value, the seed
 * included, is a valid state). */
static inline uint64_t seeded_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

#endif
