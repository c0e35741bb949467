/*
 * checker/checker.c - attach (superblock, descriptors, static layout, shadow
 * bitmaps, type/owner map), the bounded block cache, verdict plumbing,
 * chk_advance and statistics.  One file (about 1,080 lines): attach builds
 * the shadow state that chk_advance alone may change; the shadow state's
 * representation is due to change for large disks (bench/scale), and will be
 * its own file then.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chk_internal.h"

/* ------------------------------------------------------------------ maps */

/* The slot of a key: all its bits mixed into the low ones (keys are block
 * numbers, often a group's stride apart, which a plain multiply would send
 * to a handful of slots). */
static size_t u64map_slot(uint64_t k, size_t mask)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return (size_t)k & mask;
}

static int u64map_grow(struct u64map *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 64;
	uint64_t *nk = calloc(ncap, sizeof(*nk));
	uint32_t *nv = calloc(ncap, sizeof(*nv));
	if (!nk || !nv) {
		free(nk);
		free(nv);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->keys[i])
			continue;
		size_t j = u64map_slot(m->keys[i], ncap - 1);
		while (nk[j])
			j = (j + 1) & (ncap - 1);
		nk[j] = m->keys[i];
		nv[j] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = nk;
	m->vals = nv;
	m->cap = ncap;
	return 0;
}

int chk_u64map_put(struct u64map *m, uint64_t key, uint32_t val)
{
	if ((m->n + 1) * 2 > m->cap) {
		int r = u64map_grow(m);
		if (r)
			return r;
	}
	uint64_t k = key + 1;
	size_t j = u64map_slot(k, m->cap - 1);
	while (m->keys[j] && m->keys[j] != k)
		j = (j + 1) & (m->cap - 1);
	if (!m->keys[j])
		m->n++;
	m->keys[j] = k;
	m->vals[j] = val;
	return 0;
}

bool chk_u64map_get(const struct u64map *m, uint64_t key, uint32_t *val)
{
	if (!m->cap)
		return false;
	uint64_t k = key + 1;
	size_t j = u64map_slot(k, m->cap - 1);
	while (m->keys[j]) {
		if (m->keys[j] == k) {
			if (val)
				*val = m->vals[j];
			return true;
		}
		j = (j + 1) & (m->cap - 1);
	}
	return false;
}

/* Backward-shift deletion keeps probe chains intact without tombstones. */
void chk_u64map_del(struct u64map *m, uint64_t key)
{
	if (!m->cap)
		return;
	uint64_t k = key + 1;
	size_t mask = m->cap - 1, j = u64map_slot(k, mask);
	while (m->keys[j] && m->keys[j] != k)
		j = (j + 1) & mask;
	if (!m->keys[j])
		return;
	size_t hole = j;
	for (;;) {
		j = (j + 1) & mask;
		if (!m->keys[j])
			break;
		size_t home = u64map_slot(m->keys[j], mask);
		/* move j into the hole if its home is not in (hole, j] */
		bool in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
		if (!in_range) {
			m->keys[hole] = m->keys[j];
			m->vals[hole] = m->vals[j];
			hole = j;
		}
	}
	m->keys[hole] = 0;
	m->n--;
}

void chk_u64map_free(struct u64map *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}

/* ------------------------------------------------------------------ cache */

static void lru_unlink(struct blk_cache *c, uint32_t s)
{
	struct cache_ent *e = &c->ents[s];
	if (e->prev != CACHE_NIL) c->ents[e->prev].next = e->next; else c->head = e->next;
	if (e->next != CACHE_NIL) c->ents[e->next].prev = e->prev; else c->tail = e->prev;
	e->prev = e->next = CACHE_NIL;
}

static void lru_push_head(struct blk_cache *c, uint32_t s)
{
	struct cache_ent *e = &c->ents[s];
	e->prev = CACHE_NIL;
	e->next = c->head;
	if (c->head != CACHE_NIL)
		c->ents[c->head].prev = s;
	c->head = s;
	if (c->tail == CACHE_NIL)
		c->tail = s;
}

/* Stores a copy; silently does nothing when memory is short (the cache is an
 * optimisation: a miss is served by the read callback). */
void chk_cache_put(struct chk_fs *fs, uint64_t blk, const void *buf)
{
	struct blk_cache *c = &fs->cache;
	uint32_t s;
	if (fs->cache_max == 0)
		return;
	if (chk_u64map_get(&c->index, blk, &s)) {
		memcpy(c->ents[s].data, buf, fs->bs);
		lru_unlink(c, s);
		lru_push_head(c, s);
		return;
	}
	if (c->nfree) {
		s = c->free_slots[--c->nfree];
	} else if (c->nslots < fs->cache_max) {
		if (c->nslots == c->capslots) {
			size_t ncap = c->capslots ? c->capslots * 2 : 256;
			if (ncap > fs->cache_max)
				ncap = fs->cache_max;
			struct cache_ent *ne = realloc(c->ents, ncap * sizeof(*ne));
			if (!ne)
				return;
			c->ents = ne;
			uint32_t *nf = realloc(c->free_slots, ncap * sizeof(*nf));
			if (!nf)
				return;
			c->free_slots = nf;
			c->capslots = ncap;
		}
		uint8_t *d = malloc(fs->bs);
		if (!d)
			return;
		s = (uint32_t)c->nslots++;
		c->ents[s].data = d;
	} else {
		s = c->tail;                 /* evict least recently used */
		lru_unlink(c, s);
		chk_u64map_del(&c->index, c->ents[s].blk);
	}
	if (chk_u64map_put(&c->index, blk, s)) {
		c->free_slots[c->nfree++] = s;
		return;
	}
	c->ents[s].blk = blk;
	c->ents[s].prev = c->ents[s].next = CACHE_NIL;
	memcpy(c->ents[s].data, buf, fs->bs);
	lru_push_head(c, s);
}

void chk_cache_drop(struct chk_fs *fs, uint64_t blk)
{
	struct blk_cache *c = &fs->cache;
	uint32_t s;
	if (!chk_u64map_get(&c->index, blk, &s))
		return;
	lru_unlink(c, s);
	chk_u64map_del(&c->index, blk);
	c->free_slots[c->nfree++] = s;
}

static void cache_free(struct blk_cache *c)
{
	for (size_t i = 0; i < c->nslots; i++)
		free(c->ents[i].data);
	free(c->ents);
	free(c->free_slots);
	chk_u64map_free(&c->index);
}

int chk_read_block(struct chk_fs *fs, uint64_t blk, void *buf)
{
	uint32_t s;
	if (chk_u64map_get(&fs->cache.index, blk, &s)) {
		memcpy(buf, fs->cache.ents[s].data, fs->bs);
		lru_unlink(&fs->cache, s);
		lru_push_head(&fs->cache, s);
		fs->stats.cache_hits++;
		return 0;
	}
	fs->stats.cache_misses++;
	if (blk >= fs->blocks_count) {
		memset(buf, 0, fs->bs);      /* past the end: reads as zeros, never cached */
		return 0;
	}
	int r = fs->read(fs->ctx, blk * fs->bs, buf, fs->bs);
	if (r)
		return r < 0 ? r : -EIO;
	chk_cache_put(fs, blk, buf);
	return 0;
}

void chk_note_read(struct chk_fs *fs, uint64_t blk, const void *buf)
{
	uint8_t t = chk_btype(fs, blk);
	if (t != BT_FREE && t != BT_DATA)
		chk_cache_put(fs, blk, buf);
}

/* ------------------------------------------------------------------ layout */

uint32_t chk_group_of_block(const struct chk_fs *fs, uint64_t blk)
{
	return (uint32_t)((blk - fs->first_data_block) / fs->bpg);
}

uint32_t chk_group_of_inode(const struct chk_fs *fs, uint32_t ino)
{
	return (ino - 1) / fs->ipg;
}

static bool is_power_of(uint32_t n, uint32_t b)
{
	while (n > 1 && n % b == 0)
		n /= b;
	return n == 1;
}

bool chk_group_has_super(const struct chk_fs *fs, uint32_t g)
{
	if (!fs->sparse || g <= 1)
		return true;
	return is_power_of(g, 3) || is_power_of(g, 5) || is_power_of(g, 7);
}

uint64_t chk_sb_blocks_count(const struct ext2_super_block *sb)
{
	bool wide = sb->s_rev_level && (sb->s_feature_incompat & EXT4_FEATURE_INCOMPAT_64BIT);
	return sb->s_blocks_count | (wide ? (uint64_t)sb->s_blocks_count_hi << 32 : 0);
}

uint64_t chk_sb_free_blocks(const struct ext2_super_block *sb)
{
	bool wide = sb->s_rev_level && (sb->s_feature_incompat & EXT4_FEATURE_INCOMPAT_64BIT);
	return sb->s_free_blocks_count | (wide ? (uint64_t)sb->s_free_blocks_hi << 32 : 0);
}

int chk_read_inode(struct chk_fs *fs, uint32_t ino, void *buf)
{
	uint32_t g = chk_group_of_inode(fs, ino), idx = (ino - 1) % fs->ipg;
	uint64_t blk = chk_gd_itable(fs, chk_gd(fs, g)) + idx / fs->inodes_per_block;
	uint8_t *b = malloc(fs->bs);
	if (!b)
		return -ENOMEM;
	int r = chk_read_block(fs, blk, b);
	if (!r)
		memcpy(buf, b + (idx % fs->inodes_per_block) * fs->inode_size, fs->inode_size);
	free(b);
	return r;
}

int chk_journal_head(struct chk_fs *fs, uint64_t *block0, uint64_t *nblocks)
{
	uint8_t raw[1024] __attribute__((aligned(8)));
	if (!fs->journal_ino || fs->inode_size > sizeof(raw) ||
	    chk_read_inode(fs, fs->journal_ino, raw))
		return -ENOENT;
	const struct ext2_inode *in = (const void *)raw;
	uint64_t b0 = in->i_block[0];
	if (!b0 || b0 >= fs->blocks_count)
		return -ENOENT;
	*block0 = b0;
	*nblocks = in->i_size / fs->bs;
	return 0;
}

/* ------------------------------------------------------------------ inodes */

bool chk_mode_type_valid(uint16_t mode)
{
	switch (mode & 0170000) {
	case 0100000: case 0040000: case 0120000: case 0020000:
	case 0060000: case 0010000: case 0140000:
		return true;
	}
	return false;
}

int chk_mode_to_ftype(uint16_t mode)
{
	switch (mode & 0170000) {
	case 0100000: return EXT2_FT_REG_FILE;
	case 0040000: return EXT2_FT_DIR;
	case 0020000: return EXT2_FT_CHRDEV;
	case 0060000: return EXT2_FT_BLKDEV;
	case 0010000: return EXT2_FT_FIFO;
	case 0140000: return EXT2_FT_SOCK;
	case 0120000: return EXT2_FT_SYMLINK;
	}
	return -1;
}

uint64_t chk_inode_size64(const struct ext2_inode *in)
{
	if ((in->i_mode & 0170000) == 0100000)
		return in->i_size | ((uint64_t)in->i_size_high << 32);
	return in->i_size;
}

/* 12 direct + single + double + triple indirect blocks, as e2fsck computes
 * its per-block-size limit (it does not cap by i_blocks; the kernel's limit
 * is lower, so kernel files always pass). */
uint64_t chk_max_file_size(uint32_t bs)
{
	uint64_t a = bs / 4;
	return (12 + a + a * a + a * a * a) * (uint64_t)bs;
}

/* The internal journal's superblock (block 0 of the journal inode), as
 * e2fsck's journal load judges it; jbd fields are big endian. */
static uint32_t be32_at(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

const char *chk_journal_sb_problem(const struct chk_fs *fs, const uint8_t *jsb, uint64_t journal_blocks)
{
	enum { JSB_MAGIC = 0, JSB_TYPE = 4, JSB_BLOCKSIZE = 12, JSB_MAXLEN = 16, JSB_FIRST = 20,
	       JSB_FEAT_COMPAT = 36, JSB_FEAT_INCOMPAT = 40, JSB_FEAT_RO = 44, JSB_NR_USERS = 64 };
	uint32_t type = be32_at(jsb + JSB_TYPE), maxlen = be32_at(jsb + JSB_MAXLEN), first = be32_at(jsb + JSB_FIRST);
	if (be32_at(jsb + JSB_MAGIC) != 0xC03B3998u)
		return "bad magic";
	if (type != 3 && type != 4)              /* superblock v1, v2 */
		return "not a journal superblock type";
	if (be32_at(jsb + JSB_BLOCKSIZE) != fs->bs)
		return "block size differs from the file system's";
	if (maxlen > journal_blocks)
		return "s_maxlen beyond the journal inode's size";
	if (first == 0 || first >= maxlen)
		return "s_first outside the journal";
	if (type == 3 && (be32_at(jsb + JSB_FEAT_COMPAT) || be32_at(jsb + JSB_FEAT_INCOMPAT) ||
			  be32_at(jsb + JSB_FEAT_RO) || be32_at(jsb + JSB_NR_USERS)))
		return "v1 superblock with v2 fields set";
	if (type == 4 && be32_at(jsb + JSB_NR_USERS) > 1)   /* an internal journal has one user */
		return "v2 superblock with more than one user (v1 leftovers)";
	return NULL;
}

const char *chk_file_size_problem(const struct chk_fs *fs, uint64_t size, bool large_file)
{
	if (size > chk_max_file_size(fs->bs))
		return "is beyond the largest indirect-mapped file for this block size";
	if (size >= 0x80000000ULL && !large_file)
		return "is 2 GiB or more without the large_file feature";
	return NULL;
}

/* Which in-use inodes' i_block we model as pointers: ordinary inodes with
 * pointers, the root, the journal inode (even without has_journal: its
 * blocks are still owned) and the bad-blocks inode (whatever its mode). */
bool chk_inode_walkable(const struct chk_fs *fs, uint32_t ino, const struct ext2_inode *in)
{
	if (ino == EXT2_RESIZE_INO)
		return false;
	if (ino == EXT2_BAD_INO)
		return true;
	if (ino < fs->first_ino && ino != EXT2_ROOT_INO && ino != EXT2_JOURNAL_INO && ino != fs->journal_ino)
		return false;
	return chk_inode_has_block_ptrs(fs, in);
}

/* Without huge_file, i_blocks counts sectors whatever HUGE_FILE_FL says (to
 * libext2fs, the kernel and e2fsck alike); e2fsck's pass 4 takes a regular
 * file named by entries for a file whatever EA_INODE_FL says. */
const char *chk_inode_ext4_fields_problem(const struct chk_fs *fs, const struct ext2_inode *in,
					  uint32_t kept)
{
	kept &= CHK_EXT4_FLAGS_E2FSCK_KEEPS;
	if ((in->i_mode & 0170000) != 0100000)
		kept &= ~(uint32_t)EXT4_EA_INODE_FL;
	uint32_t flags = in->i_flags & ~kept;
	if (in->i_faddr)
		return "obsolete i_faddr";
	if (fs->inode_size > 128) {
		uint16_t x = ((const struct ext2_inode_large *)in)->i_extra_isize;
		if (x && (x < 4 || x > fs->inode_size - 128 || (x & 3)))
			return "invalid i_extra_isize";
	}
	if (flags & EXT4_EXTENTS_FL)
		return "extents flag";
	if (flags & EXT4_INLINE_DATA_FL)
		return "inline-data flag";
	if (flags & EXT4_HUGE_FILE_FL)
		return "huge-file flag";
	if (flags & EXT4_EA_INODE_FL)
		return "ea-inode flag";
	if (flags & EXT4_ENCRYPT_FL)
		return "encrypt flag";
	if (in->osd2.linux2.l_i_file_acl_high)
		return "i_file_acl high bits";
	if (in->osd2.linux2.l_i_blocks_hi)
		return "i_blocks high bits";
	return NULL;
}

/* Regular files, directories and slow symlinks keep block pointers in
 * i_block; fast symlinks keep their target there and devices a number. */
bool chk_inode_has_block_ptrs(const struct chk_fs *fs, const struct ext2_inode *in)
{
	switch (in->i_mode & 0170000) {
	case 0100000: case 0040000:
		return true;
	case 0120000: {
		uint32_t acl = in->i_file_acl ? fs->bs / 512 : 0;
		return in->i_blocks > acl;
	}
	}
	return false;
}

/* ------------------------------------------------------------------ attach */

static int read_approved(void *ctx, uint64_t blk, void *buf)
{
	return chk_read_block(ctx, blk, buf);
}

static bool attach_visit(void *ctx, uint64_t blk, uint8_t type, uint32_t lblk);

struct attach_visit_ctx {
	struct chk_fs *fs;
	uint32_t ino;
	int err;
};

static void note_bad(struct chk_fs *fs, struct dup_ent **arr, size_t *n, uint64_t blk,
		     uint32_t o1, uint32_t o2)
{
	if (*n >= 4096)
		return;
	struct dup_ent *na = realloc(*arr, (*n + 1) * sizeof(**arr));
	if (!na)
		return;
	(void)fs;
	*arr = na;
	na[*n].blk = blk;
	na[*n].owner1 = o1;
	na[*n].owner2 = o2;
	(*n)++;
}

/* An indirect block already owned (by another inode, or by this one from
 * another slot) is a duplicate: reported, not descended a second time. */
static bool attach_visit(void *ctx, uint64_t blk, uint8_t type, uint32_t lblk)
{
	struct attach_visit_ctx *a = ctx;
	struct chk_fs *fs = a->fs;
	uint8_t t = chk_btype(fs, blk);
	if (a->ino == EXT2_BAD_INO && t == BT_ITABLE && !bt_indirect(type)) {
		/* a bad block of an inode table: e2fsck's inode scan skips
		 * the inodes stored there, and so do we */
		if (chk_bad_itable_add(fs, blk))
			a->err = -ENOMEM;
		return false;
	}
	if (blk < fs->first_data_block || blk >= fs->blocks_count || bt_static(t)) {
		note_bad(fs, &fs->badptrs, &fs->nbadptr, blk, a->ino, t);
		return false;
	}
	if (t != BT_FREE) {
		note_bad(fs, &fs->dups, &fs->ndups, blk, chk_bowner(fs, blk), a->ino);
		return false;
	}
	if (chk_bmap_reserve(fs, blk)) {
		a->err = -ENOMEM;
		return false;
	}
	chk_bmap_set(fs, blk, type, a->ino, lblk);
	if (bt_indirect(type))
		fs->nmeta[a->ino]++;
	else
		fs->ndata[a->ino]++;
	return true;
}

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

static int parse_super(struct chk_fs *fs, char *err, size_t errlen)
{
	const struct ext2_super_block *sb = fs->sb;
	if (sb->s_magic != EXT2_SUPER_MAGIC)
		return fail(err, errlen, -EINVAL, "not an ext2/ext3 file system (bad superblock magic 0x%04x)", sb->s_magic);
	if (sb->s_log_block_size > 6)
		return fail(err, errlen, -EINVAL, "bad block size (s_log_block_size %u)", sb->s_log_block_size);
	fs->bs = 1024u << sb->s_log_block_size;
	if (fs->bs != 1024 && fs->bs != 2048 && fs->bs != 4096)
		return fail(err, errlen, -EINVAL, "block size %u not supported (1 KiB to 4 KiB)", fs->bs);
	uint32_t words[3] = { 0, 0, 0 };
	if (sb->s_rev_level) {
		words[CHK_COMPAT] = sb->s_feature_compat;
		words[CHK_RO_COMPAT] = sb->s_feature_ro_compat;
		words[CHK_INCOMPAT] = sb->s_feature_incompat;
	}
	char fbuf[64];
	const char *missing = chk_feature_missing(words, CHK_NEED_MODELLED, fbuf, sizeof(fbuf));
	if (missing)
		return fail(err, errlen, -EINVAL, "feature %s not modelled by the checker", missing);
	uint32_t co = words[CHK_COMPAT], ro = words[CHK_RO_COMPAT], inc = words[CHK_INCOMPAT];
	if (sb->s_creator_os == EXT2_OS_HURD)
		return fail(err, errlen, -EINVAL, "GNU Hurd file systems (different inode layout) not modelled");
	if (sb->s_log_cluster_size != sb->s_log_block_size)
		return fail(err, errlen, -EINVAL, "cluster size differs from block size (bigalloc)");
	fs->blocks_count = chk_sb_blocks_count(sb);
	fs->inodes_count = sb->s_inodes_count;
	fs->bpg = sb->s_blocks_per_group;
	fs->ipg = sb->s_inodes_per_group;
	fs->first_data_block = sb->s_first_data_block;
	fs->inode_size = sb->s_rev_level ? sb->s_inode_size : 128;
	fs->first_ino = sb->s_rev_level ? sb->s_first_ino : 11;
	if (fs->bpg == 0 || fs->bpg > fs->bs * 8 || fs->ipg == 0 || fs->ipg > fs->bs * 8 ||
	    fs->inode_size < 128 || fs->inode_size > fs->bs || (fs->inode_size & (fs->inode_size - 1)) ||
	    fs->blocks_count <= fs->first_data_block || fs->first_data_block != (fs->bs == 1024 ? 1u : 0u) ||
	    fs->first_ino < 11 || fs->first_ino > fs->inodes_count)
		return fail(err, errlen, -EINVAL, "inconsistent superblock geometry");
	uint64_t ngroups = (fs->blocks_count - fs->first_data_block + fs->bpg - 1) / fs->bpg;
	if (ngroups * fs->ipg != fs->inodes_count)
		return fail(err, errlen, -EINVAL, "s_inodes_count %u != groups %llu * inodes per group %u",
			    fs->inodes_count, (unsigned long long)ngroups, fs->ipg);
	fs->ngroups = (uint32_t)ngroups;
	fs->desc_size = EXT2_MIN_DESC_SIZE;
	if (inc & EXT4_FEATURE_INCOMPAT_64BIT) {
		/* e2fsck's rule: a power of two from 64 up to EXT2_MAX_DESC_SIZE */
		fs->desc_size = sb->s_desc_size;
		if (fs->desc_size < EXT2_MIN_DESC_SIZE_64BIT || fs->desc_size > EXT2_MAX_DESC_SIZE ||
		    (fs->desc_size & (fs->desc_size - 1)) || fs->desc_size > fs->bs)
			return fail(err, errlen, -EINVAL, "s_desc_size %u is not a valid descriptor size",
				    sb->s_desc_size);
	}
	fs->desc_per_block = fs->bs / fs->desc_size;
	fs->gdt_blocks = (fs->ngroups + fs->desc_per_block - 1) / fs->desc_per_block;
	fs->rgdt_blocks = (co & EXT2_FEATURE_COMPAT_RESIZE_INODE) ? sb->s_reserved_gdt_blocks : 0;
	if (fs->rgdt_blocks > fs->bs / 4)          /* e2fsck's bound: one dind block's worth */
		return fail(err, errlen, -EINVAL, "s_reserved_gdt_blocks %u beyond %u", fs->rgdt_blocks, fs->bs / 4);
	fs->inodes_per_block = fs->bs / fs->inode_size;
	fs->itable_blocks = (fs->ipg * fs->inode_size + fs->bs - 1) / fs->bs;
	fs->addr_per_block = fs->bs / 4;
	fs->sb_blk = 1024 / fs->bs;
	fs->sb_off = 1024 % fs->bs;
	fs->filetype = inc & EXT2_FEATURE_INCOMPAT_FILETYPE;
	fs->sparse = ro & EXT2_FEATURE_RO_COMPAT_SPARSE_SUPER;
	fs->dir_index = co & EXT2_FEATURE_COMPAT_DIR_INDEX;
	fs->large_file = ro & EXT2_FEATURE_RO_COMPAT_LARGE_FILE;
	fs->has_journal = co & EXT3_FEATURE_COMPAT_HAS_JOURNAL;
	fs->journal_ino = fs->has_journal ? sb->s_journal_inum : 0;
	if (fs->has_journal && (sb->s_journal_inum == 0 || sb->s_journal_inum >= fs->first_ino))
		return fail(err, errlen, -EINVAL, "external journal (s_journal_inum %u) not modelled", sb->s_journal_inum);
	return 0;
}

/* A group's bitmaps and table are kept as extents of their type, the
 * group as their owner (chk_layout_group). */
static int mark_layout(struct chk_fs *fs, char *err, size_t errlen)
{
	int r = 0;
	for (uint32_t g = 0; g < fs->ngroups && !r; g++) {
		const uint8_t *d = chk_gd(fs, g);
		uint64_t bb = chk_gd_bbitmap(fs, d), ib = chk_gd_ibitmap(fs, d), it = chk_gd_itable(fs, d);
		if (bb < fs->first_data_block || bb >= fs->blocks_count ||
		    ib < fs->first_data_block || ib >= fs->blocks_count ||
		    it < fs->first_data_block || it + fs->itable_blocks > fs->blocks_count)
			return fail(err, errlen, -EINVAL, "group %u: bitmap or inode table location out of range", g);
		uint64_t start = fs->first_data_block + (uint64_t)g * fs->bpg;
		if (chk_group_has_super(fs, g)) {
			r = chk_static_add(fs, start, 1, BT_SB, 0);
			r = r ? r : chk_static_add(fs, start + 1, fs->gdt_blocks, BT_GDT, 0);
			r = r ? r : chk_static_add(fs, start + 1 + fs->gdt_blocks, fs->rgdt_blocks, BT_RGDT,
						   EXT2_RESIZE_INO);
		}
		r = r ? r : chk_static_add(fs, bb, 1, BT_BBITMAP, g);
		r = r ? r : chk_static_add(fs, ib, 1, BT_IBITMAP, g);
		r = r ? r : chk_static_add(fs, it, fs->itable_blocks, BT_ITABLE, g);
	}
	/* With 4 KiB blocks block 0 holds the superblock at byte 1024. */
	return r ? fail(err, errlen, r, "out of memory for the static layout") : 0;
}

/* Both bitmaps of every group, past the block cache: a big disk's bitmaps
 * would only evict what the transactions will ask for. */
static int load_groups(struct chk_fs *fs, char *err, size_t errlen)
{
	uint8_t *buf = malloc((size_t)3 * fs->bs);
	if (!buf)
		return fail(err, errlen, -ENOMEM, "out of memory");
	uint8_t *bb = buf, *ib = buf + fs->bs, *scratch = buf + 2 * fs->bs;
	int r = 0;
	for (uint32_t g = 0; g < fs->ngroups && !r; g++) {
		const uint8_t *d = chk_gd(fs, g);
		uint64_t bbl = chk_gd_bbitmap(fs, d), ibl = chk_gd_ibitmap(fs, d);
		/* mke2fs puts the inode bitmap right after the block bitmap: one
		 * read for both (a large disk has over a hundred thousand groups) */
		if (ibl == bbl + 1 && fs->read(fs->ctx, bbl * fs->bs, bb, 2 * (size_t)fs->bs) == 0) {
			if (chk_group_load(fs, g, bb, ib, scratch))
				r = fail(err, errlen, -ENOMEM, "out of memory for the shadow state");
			continue;
		}
		r = fs->read(fs->ctx, bbl * fs->bs, bb, fs->bs);
		if (r) {
			r = fail(err, errlen, r > 0 ? -EIO : r, "group %u: cannot read block bitmap %llu", g,
				 (unsigned long long)bbl);
			break;
		}
		r = fs->read(fs->ctx, ibl * fs->bs, ib, fs->bs);
		if (r) {
			r = fail(err, errlen, r > 0 ? -EIO : r, "group %u: cannot read inode bitmap %llu", g,
				 (unsigned long long)ibl);
			break;
		}
		if (chk_group_load(fs, g, bb, ib, scratch))
			r = fail(err, errlen, -ENOMEM, "out of memory for the shadow state");
	}
	free(buf);
	return r;
}

bool chk_any_bit(const uint8_t *b, uint64_t from, uint64_t n)
{
	uint64_t i = from, end = from + n;
	for (; i < end && (i & 63); i++)
		if (bit_get(b, i))
			return true;
	for (; i + 64 <= end; i += 64) {
		uint64_t w;
		memcpy(&w, b + i / 8, sizeof(w));
		if (w)
			return true;
	}
	for (; i < end; i++)
		if (bit_get(b, i))
			return true;
	return false;
}

/*
 * Why a full scan at attach rather than a map built lazily from reads: the
 * invariants "no block is owned twice" and "a bitmap bit flips exactly when a
 * pointer appears" must know, for any block a transaction newly points to,
 * whether some inode not touched by the transaction already owns it.  A map
 * filled from the daemon's reads only knows the inodes it happened to read,
 * so it could approve a double allocation.  The scan reads inode tables in
 * one large read per group and only the indirect blocks of in-use inodes
 * (directory and data blocks are typed from their owner without reading).
 */
static int scan_inodes(struct chk_fs *fs, char *err, size_t errlen)
{
	size_t tbytes = (size_t)fs->itable_blocks * fs->bs;
	uint8_t *tab = malloc(tbytes);
	if (!tab)
		return -ENOMEM;
	int r = 0;
	for (uint32_t g = 0; g < fs->ngroups && !r; g++) {
		const uint8_t *ibits = chk_group_ibits(fs, g);
		if (!ibits || !chk_any_bit(ibits, 0, fs->ipg))
			continue;         /* nothing in use: nothing to type */
		r = fs->read(fs->ctx, chk_gd_itable(fs, chk_gd(fs, g)) * fs->bs, tab, tbytes);
		if (r) {
			r = fail(err, errlen, r < 0 ? r : -EIO, "group %u: cannot read inode table", g);
			break;
		}
		for (uint32_t i = 0; i < fs->ipg; i++) {
			uint32_t ino = g * fs->ipg + i + 1;
			const struct ext2_inode *in = (const void *)(tab + (size_t)i * fs->inode_size);
			if (!bit_get(ibits, i) || chk_inode_in_bad_block(fs, ino))
				continue;
			if (ino == EXT2_RESIZE_INO) {
				/* its blocks are the reserved GDT blocks (static) and one dind */
				if (in->i_block[EXT2_DIND_BLOCK])
					chk_static_mark_resize(fs, in->i_block[EXT2_DIND_BLOCK]);
				continue;
			}
			if (ino < fs->first_ino && ino != EXT2_ROOT_INO && ino != fs->journal_ino &&
			    ino != EXT2_BAD_INO && ino != EXT2_JOURNAL_INO)
				continue;
			struct attach_visit_ctx a = { fs, ino, 0 };
			if (in->i_file_acl) {
				uint64_t x = in->i_file_acl;
				uint8_t xt = chk_btype(fs, x);
				if (x < fs->first_data_block || x >= fs->blocks_count || bt_static(xt))
					note_bad(fs, &fs->badptrs, &fs->nbadptr, x, ino, 0);
				else if (xt == BT_FREE) {
					if (chk_bmap_reserve(fs, x)) {
						r = fail(err, errlen, -ENOMEM, "out of memory for the shadow state");
						break;
					}
					chk_bmap_set(fs, x, BT_XATTR, ino, 0);
				} else if (xt != BT_XATTR)
					note_bad(fs, &fs->dups, &fs->ndups, x, chk_bowner(fs, x), ino);
			}
			if (!chk_inode_walkable(fs, ino, in))
				continue;
			bool isdir = imode_type(in) == 0040000;
			r = chk_walk_inode_tree(fs, in, isdir, read_approved, fs, attach_visit, &a);
			if (!r && a.err) {
				r = fail(err, errlen, a.err, "out of memory for the shadow state");
				break;
			}
			if (r) {
				r = fail(err, errlen, r, "inode %u: cannot read its indirect blocks", ino);
				break;
			}
		}
	}
	free(tab);
	return r;
}

int chk_attach(struct chk_fs **out, chk_read_fn read, void *ctx,
	       const struct chk_options *opt, char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = 0;
	struct chk_fs *fs = calloc(1, sizeof(*fs));
	if (!fs)
		return fail(err, errlen, -ENOMEM, "out of memory");
	fs->read = read;
	fs->zero = opt ? opt->zero : NULL;
	fs->ctx = ctx;
	fs->sb = (const void *)fs->sb_raw;
	fs->cache.head = fs->cache.tail = CACHE_NIL;
	int r = read(ctx, 1024, fs->sb_raw, 1024);
	if (r) {
		r = fail(err, errlen, r < 0 ? r : -EIO, "cannot read the superblock");
		goto bad;
	}
	if ((r = parse_super(fs, err, errlen)))
		goto bad;
	/* the shadow state is sized by s_blocks_count: a corrupt count must not
	 * size it beyond the device (its last block must be readable) */
	uint8_t *probe = malloc(fs->bs);
	if (!probe) {
		r = fail(err, errlen, -ENOMEM, "out of memory");
		goto bad;
	}
	r = read(ctx, (uint64_t)(fs->blocks_count - 1) * fs->bs, probe, fs->bs);
	free(probe);
	if (r) {
		r = fail(err, errlen, -EINVAL, "s_blocks_count %llu reaches past the end of the device",
			 (unsigned long long)fs->blocks_count);
		goto bad;
	}
	size_t cb = opt && opt->cache_bytes ? opt->cache_bytes : (size_t)128 << 20;
	fs->cache_max = cb / fs->bs;
	if (fs->cache_max < 16)
		fs->cache_max = 16;
	fs->gd = calloc(fs->gdt_blocks, fs->bs);
	fs->ndata = calloc((size_t)fs->inodes_count + 1, sizeof(uint32_t));
	fs->nmeta = calloc((size_t)fs->inodes_count + 1, sizeof(uint32_t));
	uint8_t *buf = malloc(fs->bs);
	if (!fs->gd || !fs->ndata || !fs->nmeta || !buf || chk_shadow_init(fs)) {
		free(buf);
		r = fail(err, errlen, -ENOMEM, "out of memory for the shadow state");
		goto bad;
	}
	for (uint32_t i = 0; i < fs->gdt_blocks; i++) {
		r = chk_read_block(fs, fs->first_data_block + 1 + i, buf);
		if (r) {
			free(buf);
			r = fail(err, errlen, r, "cannot read group descriptor block %u", i);
			goto bad;
		}
		memcpy(fs->gd + (size_t)i * fs->bs, buf, fs->bs);
	}
	for (uint32_t g = 0; g < fs->ngroups; g++) {
		fs->gd_free_blocks += chk_gd_free_blocks(fs, chk_gd(fs, g));
		fs->gd_free_inodes += chk_gd_free_inodes(fs, chk_gd(fs, g));
	}
	if ((r = mark_layout(fs, err, errlen)) || (r = chk_static_seal(fs))) {
		free(buf);
		goto bad;
	}
	free(buf);
	if ((r = load_groups(fs, err, errlen)))
		goto bad;
	if ((r = scan_inodes(fs, err, errlen)))
		goto bad;
	*out = fs;
	return 0;
bad:
	chk_detach(fs);
	*out = NULL;
	return r;
}

/* The superblock with the fields a mount may change zeroed: the free counts
 * (recounted from the descriptors), the state and needs-recovery flag (the
 * mount marks itself), the write and mount times and counters. */
static void sb_without_mount_fields(const uint8_t *raw, struct ext2_super_block *out)
{
	memcpy(out, raw, sizeof(*out));
	out->s_free_blocks_count = out->s_free_blocks_hi = 0;
	out->s_free_inodes_count = 0;
	out->s_state = 0;
	out->s_feature_incompat &= ~(uint32_t)EXT3_FEATURE_INCOMPAT_RECOVER;
	out->s_mtime = out->s_wtime = 0;
	out->s_mtime_hi = out->s_wtime_hi = 0;
	out->s_mnt_count = 0;
	out->s_kbytes_written = 0;
	out->s_checksum = 0;
}

int chk_refresh_super(struct chk_fs *fs)
{
	uint8_t raw[1024] __attribute__((aligned(8)));
	int r = fs->read(fs->ctx, 1024, raw, sizeof(raw));
	if (r)
		return r < 0 ? r : -EIO;
	struct ext2_super_block was, now;
	sb_without_mount_fields(fs->sb_raw, &was);
	sb_without_mount_fields(raw, &now);
	if (memcmp(&was, &now, sizeof(was)))
		return -ESTALE;
	memcpy(fs->sb_raw, raw, sizeof(raw));
	chk_cache_drop(fs, fs->sb_blk);
	return 0;
}

void chk_detach(struct chk_fs *fs)
{
	if (!fs)
		return;
	cache_free(&fs->cache);
	free(fs->gd);
	chk_shadow_free(fs);
	free(fs->ndata);
	free(fs->nmeta);
	free(fs->dups);
	free(fs->badptrs);
	free(fs->bad_itable);
	free(fs);
}

uint32_t chk_block_size(const struct chk_fs *fs)
{
	return fs->bs;
}

/* ------------------------------------------------------------------ queries */

bool chk_data_block_ok(const struct chk_fs *fs, uint64_t blk, uint32_t ino)
{
	if (ino == 0 || ino > fs->inodes_count || ino < fs->first_ino ||
	    (fs->journal_ino && ino == fs->journal_ino))
		return false;
	if (blk < fs->first_data_block || blk >= fs->blocks_count)
		return false;
	uint8_t t = chk_btype(fs, blk);
	return t == BT_FREE || (t == BT_DATA && chk_bowner(fs, blk) == ino);
}

void chk_block_info(const struct chk_fs *fs, uint64_t blk, struct chk_block_info *out)
{
	static const char *const names[BT_NTYPES] = {
		[BT_FREE] = "free", [BT_DATA] = "data", [BT_DIR] = "dir", [BT_IND] = "ind",
		[BT_DIND] = "dind", [BT_TIND] = "tind", [BT_XATTR] = "xattr", [BT_BOOT] = "boot",
		[BT_SB] = "sb", [BT_GDT] = "gdt", [BT_RGDT] = "rgdt", [BT_RESIZE_IND] = "resize_ind",
		[BT_BBITMAP] = "bbitmap", [BT_IBITMAP] = "ibitmap", [BT_ITABLE] = "itable",
	};
	out->type = "out of range";
	out->owner = out->lblk = 0;
	if (blk >= fs->blocks_count)
		return;
	uint8_t t = chk_btype(fs, blk);
	out->type = t < BT_NTYPES && names[t] ? names[t] : "?";
	out->owner = t == BT_FREE ? 0 :
		     t == BT_BBITMAP || t == BT_IBITMAP || t == BT_ITABLE ? chk_layout_group(fs, blk, t, NULL) :
		     chk_bowner(fs, blk);
	out->lblk = t == BT_DATA || t == BT_DIR ? chk_blblk(fs, blk) : 0;
}

/* ------------------------------------------------------------------ records */

const char *chk_rtype_name(enum chk_rtype t)
{
	static const char *const names[] = { "sb", "bgd", "bbitmap", "ibitmap", "inode",
					     "dirent", "ind", "xattr", "htree" };
	return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] : "?";
}

int chk_record_format(const struct chk_record *r, char *buf, size_t len)
{
	if (r->type == CHK_SB)
		return snprintf(buf, len, "sb | - | %s | %lld | %lld", r->field,
				(long long)r->old_value, (long long)r->new_value);
	return snprintf(buf, len, "%s | %llu | %s | %lld | %lld", chk_rtype_name(r->type),
			(unsigned long long)r->id, r->field,
			(long long)r->old_value, (long long)r->new_value);
}

const char *chk_arena_printf(struct str_arena *a, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char tmp[1200];
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		return "?";
	if ((size_t)n >= sizeof(tmp))
		n = sizeof(tmp) - 1;
	if (!a->nchunks || a->used + (size_t)n + 1 > a->cap) {
		size_t cap = 16384;
		char **nc = realloc(a->chunks, (a->nchunks + 1) * sizeof(*nc));
		if (!nc)
			return "?";
		a->chunks = nc;
		if (!(nc[a->nchunks] = malloc(cap)))
			return "?";
		a->nchunks++;
		a->used = 0;
		a->cap = cap;
	}
	char *p = a->chunks[a->nchunks - 1] + a->used;
	memcpy(p, tmp, (size_t)n + 1);
	a->used += (size_t)n + 1;
	return p;
}

void chk_arena_free(struct str_arena *a)
{
	for (size_t i = 0; i < a->nchunks; i++)
		free(a->chunks[i]);
	free(a->chunks);
	memset(a, 0, sizeof(*a));
}

struct chk_verdict *chk_verdict_new(void)
{
	return calloc(1, sizeof(struct chk_verdict));
}

size_t chk_verdict_add_record(struct chk_verdict *v, enum chk_rtype t, uint64_t id,
			  const char *field, int64_t o, int64_t n)
{
	if (v->nrecs == v->caprecs) {
		size_t nc = v->caprecs ? v->caprecs * 2 : 64;
		struct chk_record *nr = realloc(v->recs, nc * sizeof(*nr));
		if (!nr) {
			v->oom = true;
			return SIZE_MAX;
		}
		v->recs = nr;
		v->caprecs = nc;
	}
	v->recs[v->nrecs] = (struct chk_record){ t, id, field, o, n };
	return v->nrecs++;
}

void chk_verdict_add_violation(struct chk_verdict *v, enum chk_inv inv,
			   const size_t *recs, size_t nrecs, const char *fmt, ...)
{
	/* one line per violated invariant and subject; cap to keep output bounded */
	if (v->nviols >= 1000)
		return;
	if (v->nviols == v->capviols) {
		size_t nc = v->capviols ? v->capviols * 2 : 16;
		struct chk_violation *nv = realloc(v->viols, nc * sizeof(*nv));
		if (!nv) {
			v->oom = true;
			return;
		}
		v->viols = nv;
		v->capviols = nc;
	}
	char tmp[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	size_t *rc = NULL, k = 0;
	if (nrecs) {
		rc = malloc(nrecs * sizeof(*rc));
		if (!rc) {
			v->oom = true;
			return;
		}
		for (size_t i = 0; i < nrecs; i++)
			if (recs[i] != SIZE_MAX)
				rc[k++] = recs[i];
	}
	struct chk_violation *x = &v->viols[v->nviols++];
	x->inv = chk_invariant_at(inv);
	x->detail = chk_arena_printf(&v->strings, "%s", tmp);
	x->nrecords = k;
	x->records = rc;
}

bool chk_verdict_oom(const struct chk_verdict *v)
{
	return v->oom;
}

bool chk_verdict_ok(const struct chk_verdict *v) { return v->nviols == 0; }
size_t chk_verdict_nrecords(const struct chk_verdict *v) { return v->nrecs; }
const struct chk_record *chk_verdict_record(const struct chk_verdict *v, size_t i)
{
	return i < v->nrecs ? &v->recs[i] : NULL;
}
size_t chk_verdict_nviolations(const struct chk_verdict *v) { return v->nviols; }
const struct chk_violation *chk_verdict_violation(const struct chk_verdict *v, size_t i)
{
	return i < v->nviols ? &v->viols[i] : NULL;
}

void chk_verdict_free(struct chk_verdict *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->nviols; i++)
		free((void *)v->viols[i].records);
	free(v->viols);
	free(v->recs);
	chk_arena_free(&v->strings);
	if (v->txn)
		chk_txn_free(v->txn);
	free(v);
}

/* ------------------------------------------------------------------ advance, stats */

static uint64_t thread_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int chk_advance(struct chk_fs *fs, const struct chk_verdict *v)
{
	if (!v->txn)
		return -EINVAL;
	uint64_t t0 = thread_ns();
	int r = chk_txn_apply(fs, v->txn);
	fs->stats.cpu_ns += thread_ns() - t0;
	return r;
}

void chk_get_stats(const struct chk_fs *fs, struct chk_stats *out)
{
	*out = fs->stats;
}

uint64_t chk_thread_ns(void)
{
	return thread_ns();
}
