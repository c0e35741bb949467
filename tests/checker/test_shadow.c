/*
 * tests/checker/test_shadow.c - the checker's sparse shadow state (static
 * extents, per-group bitmaps, paged type/owner map and its runs of extent
 * blocks) against a flat model:
 * one array entry per block and per inode, as the state was once kept.
 * Seeded random operations on several geometries (1 KiB blocks with block
 * 0 outside the groups, 4 KiB, a short last group, overlapping static
 * extents as corrupt descriptors give); every query is compared after
 * every operation on a sample of blocks and inodes, and a whole sweep ends
 * each round.
 *
 *   test_shadow [SEED [ROUNDS]]     prints the seed on failure
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
static uint64_t below(uint64_t n) { return n ? rnd() % n : 0; }

struct model {
	uint8_t *type;           /* static or dynamic, by block */
	uint32_t *owner, *lblk;
	uint8_t *bbit, *ibit;    /* one byte per block / inode */
	uint8_t *is_static;      /* union of the static extents */
	uint8_t *is_run;         /* held by a run (shadow_runs.c), not the pages */
};

static int failures;
static uint64_t seed;
#define FAIL(...) do { fprintf(stderr, "FAIL (seed %" PRIu64 "): ", seed); fprintf(stderr, __VA_ARGS__); \
	fputc('\n', stderr); failures++; } while (0)

static bool check_block(struct chk_fs *fs, struct model *m, uint64_t b)
{
	if (chk_btype(fs, b) != m->type[b] || chk_bowner(fs, b) != m->owner[b] ||
	    (!bt_static(m->type[b]) && chk_blblk(fs, b) != m->lblk[b])) {
		FAIL("block %" PRIu64 ": type %u owner %u lblk %u, model %u %u %u", b, chk_btype(fs, b),
		     chk_bowner(fs, b), chk_blblk(fs, b), m->type[b], m->owner[b], m->lblk[b]);
		return false;
	}
	if (b >= fs->first_data_block && chk_bbit(fs, b) != m->bbit[b]) {
		FAIL("block %" PRIu64 ": bit %d, model %d", b, chk_bbit(fs, b), m->bbit[b]);
		return false;
	}
	return true;
}

static bool check_group(struct chk_fs *fs, struct model *m, uint32_t g, uint8_t *buf)
{
	uint64_t s = fs->first_data_block + (uint64_t)g * fs->bpg;
	uint64_t n = s + fs->bpg <= fs->blocks_count ? fs->bpg : fs->blocks_count - s;
	uint32_t nstatic = 0;
	chk_group_static_bits(fs, g, buf);
	for (uint64_t k = 0; k < n; k++) {
		bool st = m->is_static[s + k] || (fs->resize_dind && s + k == fs->resize_dind);
		nstatic += m->is_static[s + k];
		if (bit_get(buf, k) != st) {
			FAIL("group %u: static bit %" PRIu64 " is %d, model %d", g, k, bit_get(buf, k), st);
			return false;
		}
	}
	if (chk_group_static_blocks(fs, g) != nstatic) {
		FAIL("group %u: %u static blocks, model %u", g, chk_group_static_blocks(fs, g), nstatic);
		return false;
	}
	bool any = false;
	for (uint32_t i = 0; i < fs->ipg; i++)
		any |= m->ibit[g * fs->ipg + i + 1];
	if (chk_group_inodes_any(fs, g) != any) {
		FAIL("group %u: inodes in use %d, model %d", g, chk_group_inodes_any(fs, g), any);
		return false;
	}
	for (uint32_t i = 0; i < fs->ipg; i++)
		if (chk_ibit(fs, g * fs->ipg + i + 1) != m->ibit[g * fs->ipg + i + 1]) {
			FAIL("inode %u: bit %d, model %d", g * fs->ipg + i + 1,
			     chk_ibit(fs, g * fs->ipg + i + 1), m->ibit[g * fs->ipg + i + 1]);
			return false;
		}
	return true;
}

/* One random operation on the shadow state and the model at block b (in
 * group g): a pointer set or released, a bitmap written, a run added
 * (often continuing *last) or punched. */
static void one_op(struct chk_fs *fs, struct model *m, uint64_t b, uint32_t g, uint8_t *bb, uint8_t *ib,
		   struct chk_run *last)
{
	switch (below(8)) {
	case 0: case 1:                                 /* an inode points to b */
		if (bt_static(m->type[b]) || m->is_run[b])
			break;
		if (chk_bmap_reserve(fs, b)) {
			FAIL("reserve");
			break;
		}
		m->type[b] = (uint8_t)(BT_DATA + below(BT_XATTR));
		m->owner[b] = 11 + (uint32_t)below(1000);
		m->lblk[b] = (uint32_t)rnd();
		chk_bmap_set(fs, b, m->type[b], m->owner[b], m->lblk[b]);
		break;
	case 2:                                         /* released */
		if (bt_static(m->type[b]) || m->is_run[b])
			break;
		chk_bmap_set(fs, b, BT_FREE, 0, 0);
		chk_bmap_trim(fs, b);
		m->type[b] = BT_FREE;
		m->owner[b] = m->lblk[b] = 0;
		break;
	case 3: {                /* a bitmap block written: some bits flip */
		uint64_t s0 = fs->first_data_block + (uint64_t)g * fs->bpg;
		uint64_t n = s0 + fs->bpg <= fs->blocks_count ? fs->bpg : fs->blocks_count - s0;
		m->bbit[b] = below(2);
		memset(bb, 0xff, fs->bs);        /* padding set, as libext2fs writes it */
		for (uint64_t k = 0; k < n; k++)
			bit_put(bb, k, m->bbit[s0 + k]);
		if (chk_group_bits_reserve(fs, g, false)) {
			FAIL("reserve bits");
			break;
		}
		chk_group_bits_copy(fs, g, false, bb);
		break;
	}
	case 4: {
		uint32_t ino = 1 + (uint32_t)below(fs->inodes_count), ig = (ino - 1) / fs->ipg;
		m->ibit[ino] = below(2);
		memset(ib, 0xff, fs->bs);
		for (uint32_t i = 0; i < fs->ipg; i++)
			bit_put(ib, i, m->ibit[ig * fs->ipg + i + 1]);
		if (chk_group_bits_reserve(fs, ig, true)) {
			FAIL("reserve bits");
			break;
		}
		chk_group_bits_copy(fs, ig, true, ib);
		break;
	}
	case 5: case 6: {        /* an extent: a run over free blocks, often continuing the last */
		struct chk_run r = { b, 1 + (uint32_t)below(below(4) ? 40 : 3000), 11 + (uint32_t)below(50),
				     (uint32_t)below(1u << 20), below(2) ? BT_DATA : BT_DIR };
		if (last->len && below(2)) {
			r = *last;
			r.start += r.len;
			r.lblk += r.len;
			r.len = 1 + (uint32_t)below(20);
		}
		if (r.start + r.len > fs->blocks_count)
			break;
		bool free_all = true;
		for (uint64_t k = r.start; k < r.start + r.len && free_all; k++)
			free_all = m->type[k] == BT_FREE;
		if (!free_all)
			break;
		if (chk_run_add(fs, r.start, r.len, r.type, r.owner, r.lblk)) {
			FAIL("run add");
			break;
		}
		for (uint64_t k = r.start; k < r.start + r.len; k++) {
			m->type[k] = r.type;
			m->owner[k] = r.owner;
			m->lblk[k] = r.lblk + (uint32_t)(k - r.start);
			m->is_run[k] = 1;
		}
		*last = r;
		break;
	}
	case 7: {                /* blocks leave the runs (a punch, a truncate) */
		uint64_t len = 1 + below(below(4) ? 30 : 5000);
		if (b + len > fs->blocks_count)
			len = fs->blocks_count - b;
		if (chk_runs_reserve(fs, 1)) {
			FAIL("run reserve");
			break;
		}
		chk_run_remove(fs, b, len);
		chk_runs_trim(fs);
		for (uint64_t k = b; k < b + len; k++)
			if (m->is_run[k]) {
				m->type[k] = BT_FREE;
				m->owner[k] = m->lblk[k] = 0;
				m->is_run[k] = 0;
			}
		break;
	}
	}
}

/* One geometry: bs, blocks per group, groups, blocks short in the last. */
static void run(uint32_t bs, uint32_t bpg, uint32_t ngroups, uint32_t short_by, unsigned ops)
{
	struct chk_fs *fs = calloc(1, sizeof(*fs));
	fs->bs = bs;
	fs->first_data_block = bs == 1024;
	fs->bpg = bpg;
	fs->ngroups = ngroups;
	fs->blocks_count = fs->first_data_block + ngroups * bpg - short_by;
	fs->ipg = 64;
	fs->inodes_count = ngroups * fs->ipg;
	struct model m = {
		calloc(fs->blocks_count, 1), calloc(fs->blocks_count, 4), calloc(fs->blocks_count, 4),
		calloc(fs->blocks_count, 1), calloc(fs->inodes_count + 1, 1), calloc(fs->blocks_count, 1),
		calloc(fs->blocks_count, 1),
	};
	struct chk_run last = { 0, 0, 0, 0, 0 };      /* the last run added, to continue it */
	uint8_t *buf = malloc(bs), *bb = malloc(bs), *ib = malloc(bs);
	if (chk_shadow_init(fs)) {
		FAIL("chk_shadow_init");
		return;
	}
	/* static layout: the usual extents at each group's start, plus a few
	 * anywhere (overlapping ones included); later ones win, as painted */
	if (fs->first_data_block)
		m.type[0] = BT_BOOT;
	for (uint32_t g = 0; g < ngroups; g++) {
		uint64_t s = fs->first_data_block + (uint64_t)g * bpg;
		const struct { uint32_t off, len; uint8_t t; uint32_t owner; } ext[] = {
			{ 0, 1, BT_SB, 0 }, { 1, 2, BT_GDT, 0 }, { 3, 3, BT_RGDT, EXT2_RESIZE_INO },
			{ 6, 1, BT_BBITMAP, 0 }, { 7, 1, BT_IBITMAP, 0 }, { 8, 8, BT_ITABLE, 0 },
		};
		for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++) {
			if (g % 2 && i < 3)
				continue;                          /* no backup here */
			uint64_t at = s + ext[i].off;
			uint32_t len = ext[i].len;
			if (below(8) == 0) {                   /* moved, maybe onto another */
				at = fs->first_data_block + below(fs->blocks_count - fs->first_data_block);
				len = 1 + (uint32_t)below(12);
			}
			chk_static_add(fs, at, len, ext[i].t, ext[i].owner);
			for (uint64_t b = at; b < at + len && b < fs->blocks_count; b++) {
				m.type[b] = ext[i].t;
				m.owner[b] = ext[i].owner;
				m.is_static[b] = 1;
			}
		}
	}
	chk_static_seal(fs);
	/* bitmaps as read at attach: most groups exactly their static blocks */
	for (uint32_t g = 0; g < ngroups; g++) {
		uint64_t s = fs->first_data_block + (uint64_t)g * bpg;
		uint64_t n = s + bpg <= fs->blocks_count ? bpg : fs->blocks_count - s;
		memset(bb, 0xff, bs);                          /* padding bits set, as on disk */
		memset(ib, 0, bs);
		for (uint64_t k = 0; k < n; k++) {
			bool v = m.is_static[s + k];
			if (below(4) == 0 && below(16) == 0)
				v = !v;
			bit_put(bb, k, v);
			m.bbit[s + k] = v;
		}
		if (below(3) == 0)
			for (uint32_t i = 0; i < fs->ipg; i++) {
				bool v = below(4) == 0;
				bit_put(ib, i, v);
				m.ibit[g * fs->ipg + i + 1] = v;
			}
		if (chk_group_load(fs, g, bb, ib, buf))
			FAIL("chk_group_load");
	}
	uint64_t dind = fs->first_data_block + below(fs->blocks_count - fs->first_data_block);
	if (dind && !m.is_static[dind]) {            /* 0 is no block, as in i_block */
		chk_static_mark_resize(fs, dind);
		m.type[dind] = BT_RESIZE_IND;
		m.owner[dind] = EXT2_RESIZE_INO;
	}
	for (unsigned op = 0; op < ops && !failures; op++) {
		uint64_t b = fs->first_data_block + below(fs->blocks_count - fs->first_data_block);
		uint32_t g = (uint32_t)((b - fs->first_data_block) / bpg);
		one_op(fs, &m, b, g, bb, ib, &last);
		if (!check_block(fs, &m, b))
			break;
		for (int k = 0; k < 4; k++)
			if (!check_block(fs, &m, below(fs->blocks_count)))
				break;
	}
	/* runs end-to-end merge: no more runs than maximal stretches */
	size_t stretches = 0;
	for (uint64_t b = 0; b < fs->blocks_count; b++)
		stretches += m.is_run[b] && (b == 0 || !m.is_run[b - 1] || m.owner[b - 1] != m.owner[b] ||
					     m.type[b - 1] != m.type[b] || m.lblk[b - 1] + 1 != m.lblk[b]);
	if (chk_runs_count(fs) != stretches)
		FAIL("%zu runs for %zu maximal stretches", chk_runs_count(fs), stretches);
	/* every other page emptied: its page must go (and the runs there) */
	for (uint64_t b = 0; b < fs->blocks_count; b++)
		if ((b / BPAGE_N) % 2 == 0 && m.is_run[b]) {
			chk_runs_reserve(fs, 1);
			chk_run_remove(fs, b, 1);
			m.type[b] = BT_FREE;
			m.owner[b] = m.lblk[b] = 0;
			m.is_run[b] = 0;
		}
	for (uint64_t b = 0; b < fs->blocks_count; b++)
		if ((b / BPAGE_N) % 2 == 0 && !bt_static(m.type[b])) {
			chk_bmap_set(fs, b, BT_FREE, 0, 0);
			chk_bmap_trim(fs, b);
			m.type[b] = BT_FREE;
			m.owner[b] = m.lblk[b] = 0;
		}
	for (uint64_t b = 0; b < fs->blocks_count && !failures; b++)
		check_block(fs, &m, b);
	for (uint32_t g = 0; g < ngroups && !failures; g++)
		check_group(fs, &m, g, buf);
	/* a page is kept exactly while it holds an owned block */
	for (uint64_t p = 0; p * BPAGE_N < fs->blocks_count && !failures; p++) {
		bool owned = false;
		for (uint64_t b = p * BPAGE_N; b < (p + 1) * BPAGE_N && b < fs->blocks_count; b++)
			owned |= m.type[b] != BT_FREE && !bt_static(m.type[b]) && !m.is_run[b];
		if ((chk_bpage_types(fs, p * BPAGE_N) != NULL) != owned)
			FAIL("page %" PRIu64 ": kept %d, owned blocks %d", p,
			     chk_bpage_types(fs, p * BPAGE_N) != NULL, owned);
	}
	/* past the end: free, owned by nobody, clear */
	if (chk_btype(fs, fs->blocks_count) != BT_FREE || chk_bowner(fs, fs->blocks_count) ||
	    chk_bbit(fs, fs->blocks_count) || chk_ibit(fs, fs->inodes_count + 1) || chk_ibit(fs, 0))
		FAIL("past the end is not free");
	chk_run_remove(fs, 0, fs->blocks_count);
	if (chk_runs_count(fs))
		FAIL("%zu runs left after removing every block", chk_runs_count(fs));
	chk_shadow_free(fs);
	free(fs);
	free(m.type); free(m.owner); free(m.lblk); free(m.bbit); free(m.ibit); free(m.is_static); free(m.is_run);
	free(buf); free(bb); free(ib);
}

/* Seeds that once failed, run before the others: 100169 drew block 0 as the
 * resize inode's block on a layout whose superblock had moved. */
static const uint64_t regressions[] = { 100169 };
#define NREG (sizeof(regressions) / sizeof(regressions[0]))

int main(int argc, char **argv)
{
	uint64_t first = argc > 1 ? strtoull(argv[1], NULL, 0) : 1;
	unsigned rounds = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 40;
	bool defaults = argc <= 1;
	for (unsigned r = 0; r < rounds + (defaults ? NREG : 0) && !failures; r++) {
		seed = defaults && r < NREG ? regressions[r] : first + r - (defaults ? NREG : 0);
		rng = seed;
		/* 1 KiB and 4 KiB blocks; a bitmap block holds more bits than
		 * a group has blocks, or exactly as many; a short last group */
		run(1024, 8192, 3, (uint32_t)below(100), 20000);
		run(1024, 2048, 7, (uint32_t)below(2000), 20000);
		run(4096, 32768, 2, (uint32_t)below(30000), 20000);
		run(4096, 1000, 9, 0, 20000);
	}
	if (failures) {
		fprintf(stderr, "test_shadow: %d failure(s); rerun with: test_shadow %" PRIu64 " 1\n",
			failures, seed);
		return 1;
	}
	printf("test_shadow: %u rounds from seed %" PRIu64 " agree with the flat model\n", rounds, first);
	return 0;
}
