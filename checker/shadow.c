/*
 * checker/shadow.c - the approved state the invariants compare against,
 * stored in proportion to what is in use rather than to the disk's size:
 *
 *   static layout   superblocks, descriptor tables, bitmaps and inode tables
 *                   as a sorted array of extents (a few per group), built
 *                   once from the geometry and the descriptors;
 *   bitmaps         per group; a group whose block bitmap sets exactly its
 *                   static blocks, or whose inode bitmap is all clear, has
 *                   none (NULL), and most groups of a big disk are such;
 *   type/owner map  pages of BPAGE_N blocks holding the type, owner and
 *                   logical block of every block an inode points to; a page
 *                   with nothing owned is not there.
 *
 * An empty 15 TiB file system thus needs about 12 MiB (its 368,640 static
 * extents and the per-group pointers) where flat per-block arrays needed
 * 1.1 GiB touched and 36 GiB reserved.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chk_ext4.h"

struct bpage {
	uint32_t owner[BPAGE_N];
	uint32_t lblk[BPAGE_N];
	uint8_t  type[BPAGE_N];
	uint32_t nowned;
};

/* One static extent; `seq` is the order of marking: where corrupt
 * descriptors make two extents overlap, the later one names the block.
 * owner: the resize inode for reserved GDT blocks; a group's bitmaps and
 * inode table keep the group there (chk_layout_group), which the type/owner
 * map reports as owner 0. */
struct sext {
	uint64_t start;
	uint32_t len, owner, seq;
	uint8_t  type;
};

static bool group_owned(uint8_t type)
{
	return type == BT_BBITMAP || type == BT_IBITMAP || type == BT_ITABLE;
}

static uint64_t group_start(const struct chk_fs *fs, uint32_t g)
{
	return fs->first_data_block + (uint64_t)g * fs->bpg;
}

static uint64_t group_len(const struct chk_fs *fs, uint32_t g)
{
	uint64_t s = group_start(fs, g);
	return s + fs->bpg <= fs->blocks_count ? fs->bpg : fs->blocks_count - s;
}

int chk_shadow_init(struct chk_fs *fs)
{
	fs->nbpages = ((uint64_t)fs->blocks_count + BPAGE_N - 1) / BPAGE_N;
	fs->bpages = calloc(fs->nbpages, sizeof(*fs->bpages));
	fs->gbb = calloc(fs->ngroups, sizeof(*fs->gbb));
	fs->gib = calloc(fs->ngroups, sizeof(*fs->gib));
	fs->gstatic = calloc(fs->ngroups, sizeof(*fs->gstatic));
	if (!fs->bpages || !fs->gbb || !fs->gib || !fs->gstatic)
		return -ENOMEM;
	return chk_runs_init(fs);
}

void chk_shadow_free(struct chk_fs *fs)
{
	if (fs->bpages)
		for (size_t i = 0; i < fs->nbpages; i++)
			free(fs->bpages[i]);
	if (fs->gbb)
		for (uint32_t g = 0; g < fs->ngroups; g++)
			free(fs->gbb[g]);
	if (fs->gib)
		for (uint32_t g = 0; g < fs->ngroups; g++)
			free(fs->gib[g]);
	free(fs->bpages);
	free(fs->gbb);
	free(fs->gib);
	free(fs->gstatic);
	free(fs->bmnote);
	free(fs->sext);
	chk_runs_free(fs);
}

/* ---------------------------------------------------------- static layout */

int chk_static_add(struct chk_fs *fs, uint64_t blk, uint32_t len, uint8_t type, uint32_t owner)
{
	if (blk >= fs->blocks_count || !len)
		return 0;
	if (len > fs->blocks_count - blk)
		len = (uint32_t)(fs->blocks_count - blk);
	if (fs->nsext == fs->capsext) {
		size_t cap = fs->capsext ? fs->capsext * 2 : 1024;
		struct sext *n = realloc(fs->sext, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		fs->sext = n;
		fs->capsext = cap;
	}
	fs->sext[fs->nsext] = (struct sext){ blk, len, owner, (uint32_t)fs->nsext, type };
	fs->nsext++;
	if (len > fs->sext_maxlen)
		fs->sext_maxlen = len;
	return 0;
}

static int cmp_sext(const void *a, const void *b)
{
	const struct sext *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Index just past the last extent starting at or before blk. */
static size_t sext_upper(const struct chk_fs *fs, uint64_t blk)
{
	size_t lo = 0, hi = fs->nsext;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (fs->sext[mid].start <= blk)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static const struct sext *sext_find(const struct chk_fs *fs, uint64_t blk)
{
	const struct sext *best = NULL;
	for (size_t i = sext_upper(fs, blk); i-- > 0;) {
		const struct sext *e = &fs->sext[i];
		if (e->start + fs->sext_maxlen <= blk)
			break;
		if (blk < e->start + e->len && (!best || e->seq > best->seq))
			best = e;
	}
	return best;
}

/* Set bits [a, b) of buf. */
static void set_bit_range(uint8_t *buf, uint64_t a, uint64_t b)
{
	for (; a < b && (a & 7); a++)
		bit_put(buf, a, true);
	if (b - a >= 8) {
		memset(buf + a / 8, 0xff, (b - a) / 8);
		a += (b - a) / 8 * 8;
	}
	for (; a < b; a++)
		bit_put(buf, a, true);
}

/* The static blocks of group g as bits of its bitmap (buf: bs bytes;
 * bits past the group's end are left clear); returns how many. */
static uint32_t static_pattern(const struct chk_fs *fs, uint32_t g, uint8_t *buf)
{
	uint64_t s = group_start(fs, g), n = group_len(fs, g), hi = 0;
	memset(buf, 0, fs->bs);
	size_t i = sext_upper(fs, s);
	while (i > 0 && fs->sext[i - 1].start + fs->sext_maxlen > s)
		i--;
	for (; i < fs->nsext && fs->sext[i].start < s + n; i++) {
		const struct sext *e = &fs->sext[i];
		uint64_t a = e->start > s ? e->start : s, b = e->start + e->len;
		if (b > s + n)
			b = s + n;
		if (a < b) {
			set_bit_range(buf, a - s, b - s);
			if (b - s > hi)
				hi = b - s;
		}
	}
	/* extents may overlap: count the bits, only as far as they reach */
	uint32_t c = 0;
	for (uint64_t k = 0; k < (hi + 7) / 8; k++)
		c += (uint32_t)__builtin_popcount(buf[k]);
	return c;
}

int chk_static_seal(struct chk_fs *fs)
{
	qsort(fs->sext, fs->nsext, sizeof(*fs->sext), cmp_sext);
	return 0;
}

uint8_t chk_static_type(const struct chk_fs *fs, uint64_t blk)
{
	if (blk >= fs->blocks_count)
		return BT_FREE;
	if (fs->first_data_block && blk == 0)
		return BT_BOOT;
	if (fs->resize_dind && blk == fs->resize_dind)
		return BT_RESIZE_IND;
	const struct sext *e = sext_find(fs, blk);
	return e ? e->type : BT_FREE;
}

void chk_static_mark_resize(struct chk_fs *fs, uint64_t blk)
{
	if (!blk || blk >= fs->blocks_count || fs->resize_dind)
		return;                   /* 0 is no block: a pointer, and "none" here */
	fs->resize_dind = blk;
	/* static from now on: an inode typed before it loses the block, as
	 * when the type map was painted in scan order */
	chk_bmap_set(fs, blk, BT_FREE, 0, 0);
	if (chk_run_at(fs, blk, NULL) && !chk_runs_reserve(fs, 1))
		chk_run_remove(fs, blk, 1);
}

/* The first static block of [b, end), else end. */
static uint64_t static_next(const struct chk_fs *fs, uint64_t b, uint64_t end)
{
	uint64_t first = end;
	if (fs->first_data_block && b == 0)
		return 0;
	if (fs->resize_dind >= b && fs->resize_dind < end)
		first = fs->resize_dind;
	size_t i = sext_upper(fs, b);
	for (size_t k = i; k-- > 0;) {       /* extents starting at or before b */
		const struct sext *e = &fs->sext[k];
		if (e->start + fs->sext_maxlen <= b)
			break;
		if (b < e->start + e->len)
			return b;
	}
	if (i < fs->nsext && fs->sext[i].start < first)
		first = fs->sext[i].start;      /* the first one starting after b */
	return first;
}

/* The first block of [b, end) a page of the type/owner map owns, else end. */
static uint64_t pages_next(const struct chk_fs *fs, uint64_t b, uint64_t end)
{
	while (b < end) {
		const struct bpage *p = fs->bpages[b / BPAGE_N];
		uint64_t pend = (b / BPAGE_N + 1) * BPAGE_N;
		if (pend > end)
			pend = end;
		if (p && p->nowned)
			for (; b < pend; b++)
				if (p->type[b % BPAGE_N] != BT_FREE)
					return b;
		b = pend;
	}
	return end;
}

uint64_t chk_first_taken(const struct chk_fs *fs, uint64_t b, uint64_t end)
{
	if (end > fs->blocks_count)
		end = fs->blocks_count;
	if (b >= end)
		return end;
	uint64_t first = static_next(fs, b, end);
	first = pages_next(fs, b, first);
	struct chk_run r;
	if (chk_run_next(fs, b, &r) && r.start < first)
		first = r.start > b ? r.start : b;
	return first;
}

uint32_t chk_group_static_blocks(const struct chk_fs *fs, uint32_t g)
{
	return fs->gstatic[g];
}

void chk_group_static_bits(const struct chk_fs *fs, uint32_t g, uint8_t *buf)
{
	static_pattern(fs, g, buf);
	uint64_t s = group_start(fs, g);
	if (fs->resize_dind && fs->resize_dind >= s && fs->resize_dind < s + group_len(fs, g))
		bit_put(buf, fs->resize_dind - s, true);
}

/* ------------------------------------------------------- type/owner map */

uint8_t chk_btype(const struct chk_fs *fs, uint64_t blk)
{
	if (blk >= fs->blocks_count)
		return BT_FREE;
	/* owned blocks are never static: attach and apply keep pointers to
	 * static blocks out of the map */
	const struct bpage *p = fs->bpages[blk / BPAGE_N];
	if (p && p->type[blk % BPAGE_N] != BT_FREE)
		return p->type[blk % BPAGE_N];
	struct chk_run r;
	if (chk_run_at(fs, blk, &r))
		return r.type;
	return chk_static_type(fs, blk);
}

uint32_t chk_bowner(const struct chk_fs *fs, uint64_t blk)
{
	if (blk >= fs->blocks_count)
		return 0;
	const struct bpage *p = fs->bpages[blk / BPAGE_N];
	if (p && p->type[blk % BPAGE_N] != BT_FREE)
		return p->owner[blk % BPAGE_N];
	struct chk_run r;
	if (chk_run_at(fs, blk, &r))
		return r.owner;
	if (fs->first_data_block && blk == 0)
		return 0;
	if (fs->resize_dind && blk == fs->resize_dind)
		return EXT2_RESIZE_INO;
	const struct sext *e = sext_find(fs, blk);
	return e && !group_owned(e->type) ? e->owner : 0;
}

uint32_t chk_layout_group(const struct chk_fs *fs, uint64_t blk, uint8_t type, uint32_t *idx)
{
	const struct sext *e = blk < fs->blocks_count ? sext_find(fs, blk) : NULL;
	if (idx)
		*idx = e && e->type == type ? (uint32_t)(blk - e->start) : 0;
	return e && e->type == type ? e->owner : 0;
}

uint32_t chk_blblk(const struct chk_fs *fs, uint64_t blk)
{
	if (blk >= fs->blocks_count)
		return 0;
	const struct bpage *p = fs->bpages[blk / BPAGE_N];
	if (p && p->type[blk % BPAGE_N] != BT_FREE)
		return p->lblk[blk % BPAGE_N];
	struct chk_run r;
	if (chk_run_at(fs, blk, &r))
		return r.lblk + (uint32_t)(blk - r.start);
	return 0;
}

const uint8_t *chk_bpage_types(const struct chk_fs *fs, uint64_t blk)
{
	if (blk >= fs->blocks_count || !fs->bpages[blk / BPAGE_N])
		return NULL;
	return fs->bpages[blk / BPAGE_N]->type;
}

int chk_bmap_reserve(struct chk_fs *fs, uint64_t blk)
{
	if (blk >= fs->blocks_count)
		return 0;
	struct bpage **pp = &fs->bpages[blk / BPAGE_N];
	if (!*pp && !(*pp = calloc(1, sizeof(**pp))))
		return -ENOMEM;
	return 0;
}

void chk_bmap_set(struct chk_fs *fs, uint64_t blk, uint8_t type, uint32_t owner, uint32_t lblk)
{
	if (blk >= fs->blocks_count)
		return;
	struct bpage *p = fs->bpages[blk / BPAGE_N];
	if (!p)
		return;           /* only a free block needs no page (reserve first otherwise) */
	uint32_t i = blk % BPAGE_N;
	p->nowned += (type != BT_FREE) - (p->type[i] != BT_FREE);
	p->type[i] = type;
	p->owner[i] = owner;
	p->lblk[i] = lblk;
}

void chk_bmap_trim(struct chk_fs *fs, uint64_t blk)
{
	if (blk >= fs->blocks_count)
		return;
	struct bpage **pp = &fs->bpages[blk / BPAGE_N];
	if (*pp && !(*pp)->nowned) {
		free(*pp);
		*pp = NULL;
	}
}

/* ----------------------------------------------------------------- bitmaps */

bool chk_bbit(const struct chk_fs *fs, uint64_t blk)
{
	if (blk < fs->first_data_block || blk >= fs->blocks_count)
		return false;
	uint32_t g = chk_group_of_block(fs, blk);
	if (fs->gbb[g])
		return bit_get(fs->gbb[g], blk - group_start(fs, g));
	const struct sext *e = sext_find(fs, blk);
	return e != NULL;
}

bool chk_ibit(const struct chk_fs *fs, uint32_t ino)
{
	if (ino == 0 || ino > fs->inodes_count)
		return false;
	uint32_t g = chk_group_of_inode(fs, ino);
	return fs->gib[g] && bit_get(fs->gib[g], (ino - 1) % fs->ipg);
}

const uint8_t *chk_group_bbits(const struct chk_fs *fs, uint32_t g)
{
	return fs->gbb[g];
}

const uint8_t *chk_group_ibits(const struct chk_fs *fs, uint32_t g)
{
	return fs->gib[g];
}

int chk_group_bits_reserve(struct chk_fs *fs, uint32_t g, bool inode)
{
	uint8_t **pp = inode ? &fs->gib[g] : &fs->gbb[g];
	if (*pp)
		return 0;
	uint8_t *b = malloc(fs->bs);
	if (!b)
		return -ENOMEM;
	if (inode)
		memset(b, 0, fs->bs);
	else
		static_pattern(fs, g, b);
	*pp = b;
	return 0;
}

/* The first n bits of src, bits n.. of the last byte clear. */
static void copy_bits(uint8_t *dst, const uint8_t *src, uint64_t n)
{
	memcpy(dst, src, (n + 7) / 8);
	for (uint64_t i = n; i < (n + 7) / 8 * 8; i++)
		bit_put(dst, i, false);
}

void chk_group_bits_copy(struct chk_fs *fs, uint32_t g, bool inode, const uint8_t *src)
{
	uint8_t *dst = inode ? fs->gib[g] : fs->gbb[g];
	if (dst)
		copy_bits(dst, src, inode ? fs->ipg : group_len(fs, g));
}

/* Equal on the first n bits. */
static bool bits_equal(const uint8_t *a, const uint8_t *b, uint64_t n)
{
	if (memcmp(a, b, n / 8))
		return false;
	for (uint64_t i = n / 8 * 8; i < n; i++)
		if (bit_get(a, i) != bit_get(b, i))
			return false;
	return true;
}

int chk_group_load(struct chk_fs *fs, uint32_t g, const uint8_t *bb, const uint8_t *ib, uint8_t *scratch)
{
	uint64_t n = group_len(fs, g);
	fs->gstatic[g] = static_pattern(fs, g, scratch);
	if (!bits_equal(bb, scratch, n)) {
		if (chk_group_bits_reserve(fs, g, false))
			return -ENOMEM;
		copy_bits(fs->gbb[g], bb, n);
	}
	if (chk_any_bit(ib, 0, fs->ipg)) {
		if (chk_group_bits_reserve(fs, g, true))
			return -ENOMEM;
		copy_bits(fs->gib[g], ib, fs->ipg);
	}
	return 0;
}

uint32_t chk_group_used_inodes(const struct chk_fs *fs, uint32_t g)
{
	if (!fs->group_csum)
		return fs->ipg;
	const uint8_t *d = chk_gd(fs, g);
	if (chk_gd_flags(d) & EXT2_BG_INODE_UNINIT)
		return 0;
	uint32_t unused = chk_gd_itable_unused(fs, d);
	return unused < fs->ipg ? fs->ipg - unused : 0;
}

/* libext2fs honours an UNINIT flag only in a descriptor whose checksum
 * verifies (else it reads the bitmap, as e2fsck then does) */
static bool uninit_flag(const struct chk_fs *fs, uint32_t g, uint16_t flag)
{
	const uint8_t *d = chk_gd(fs, g);
	return fs->group_csum && (chk_gd_flags(d) & flag) && chk_gd_csum_ok(&fs->csum, g, d);
}

bool chk_group_block_uninit(const struct chk_fs *fs, uint32_t g)
{
	return uninit_flag(fs, g, EXT2_BG_BLOCK_UNINIT);
}

bool chk_group_inode_uninit(const struct chk_fs *fs, uint32_t g)
{
	return uninit_flag(fs, g, EXT2_BG_INODE_UNINIT);
}

/* The block bitmap libext2fs and e2fsck make up for a BLOCK_UNINIT group
 * (its on-disk bitmap was never written): its superblock, descriptor and
 * reserved descriptor blocks, and the bitmaps and tables of the
 * BLOCK_UNINIT groups that lie in it (its own, wherever flex_bg puts
 * them, are marked in their group; see chk_group_uninit_foreign). */
void chk_group_uninit_bits(const struct chk_fs *fs, uint32_t g, uint8_t *buf)
{
	uint64_t s = group_start(fs, g), n = group_len(fs, g);
	memset(buf, 0, fs->bs);
	size_t i = sext_upper(fs, s);
	while (i > 0 && fs->sext[i - 1].start + fs->sext_maxlen > s)
		i--;
	for (; i < fs->nsext && fs->sext[i].start < s + n; i++) {
		const struct sext *e = &fs->sext[i];
		if (group_owned(e->type) && !chk_group_block_uninit(fs, e->owner))
			continue;
		uint64_t a = e->start > s ? e->start : s, b = e->start + e->len;
		if (b > s + n)
			b = s + n;
		if (a < b)
			set_bit_range(buf, a - s, b - s);
	}
}

/* libext2fs marks a BLOCK_UNINIT group's bitmaps and table in use wherever
 * they lie: in an initialised group too, whatever its bitmap says.  Those
 * bits are set in the loaded bitmaps here, after every group is loaded. */
int chk_group_uninit_foreign(struct chk_fs *fs)
{
	for (size_t i = 0; i < fs->nsext; i++) {
		const struct sext *e = &fs->sext[i];
		if (!group_owned(e->type) || !chk_group_block_uninit(fs, e->owner))
			continue;
		/* a group at a time: whether a group is uninitialised costs a
		 * descriptor checksum, too much to ask once per block */
		uint64_t b = e->start > fs->first_data_block ? e->start : fs->first_data_block;
		while (b < e->start + e->len && b < fs->blocks_count) {
			uint32_t g = chk_group_of_block(fs, b);
			uint64_t gs = group_start(fs, g), end = gs + group_len(fs, g);
			if (end > e->start + e->len)
				end = e->start + e->len;
			if (!chk_group_block_uninit(fs, g) && fs->gbb[g])
				set_bit_range(fs->gbb[g], b - gs, end - gs);   /* else made up already */
			b = end;
		}
	}
	return 0;
}

bool chk_group_inodes_any(const struct chk_fs *fs, uint32_t g)
{
	return fs->gib[g] && chk_any_bit(fs->gib[g], 0, fs->ipg);
}

/* ------------------------------------------- bad blocks of inode tables */

/* Kept sorted: the bad-blocks inode lists few blocks. */
int chk_bad_itable_add(struct chk_fs *fs, uint64_t blk)
{
	size_t n = fs->nbad_itable, i = n;
	if (n >= 4096)
		return 0;
	uint64_t *na = realloc(fs->bad_itable, (n + 1) * sizeof(*na));
	if (!na)
		return -ENOMEM;
	fs->bad_itable = na;
	while (i > 0 && na[i - 1] > blk)
		i--;
	if (i > 0 && na[i - 1] == blk)
		return 0;
	memmove(na + i + 1, na + i, (n - i) * sizeof(*na));
	na[i] = blk;
	fs->nbad_itable = n + 1;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

bool chk_inode_in_bad_block(const struct chk_fs *fs, uint32_t ino)
{
	if (!fs->nbad_itable || ino == 0 || ino > fs->inodes_count)
		return false;
	uint32_t g = (ino - 1) / fs->ipg, i = (ino - 1) % fs->ipg;
	uint64_t blk = chk_gd_itable(fs, chk_gd(fs, g)) + (uint64_t)i * fs->inode_size / fs->bs;
	return bsearch(&blk, fs->bad_itable, fs->nbad_itable, sizeof(blk), cmp_u64) != NULL;
}
