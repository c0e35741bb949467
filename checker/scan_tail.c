/*
 * checker/scan_tail.c - deferred table tails (checker.h): the part of a
 * group's inode table past its last inode in use, which holds only free
 * inodes, left by chk_scan for chk_check_tail to judge group by group, and
 * the judgement of one table inode that both share; and claimed groups,
 * whose bitmaps chk_check_tail verifies with their tables.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chk_ext4.h"

#define V(id, ...) chk_verdict_add_violation(v, id, NULL, 0, __VA_ARGS__)

bool chk_judge_table_inode(struct chk_fs *fs, struct chk_verdict *v, uint32_t ino, const struct ext2_inode *in)
{
	if (!chk_inode_csum_ok(&fs->csum, ino, (const uint8_t *)in))
		V(INV_CSUM_INODE, "inode %u: checksum does not match", ino);
	if (!chk_inode_in_bad_block(fs, ino))
		return false;
	/* unread, as e2fsck: in use, named by no entry */
	if (!chk_ibit(fs, ino))
		V(INV_IBITMAP_CLEAR, "inode %u lies in a bad block of the inode table "
		  "but is free in the inode bitmap", ino);
	return true;
}

void chk_judge_free_inode(struct chk_fs *fs, struct chk_verdict *v, uint32_t ino, const struct ext2_inode *in)
{
	(void)fs;
	if (in->i_links_count && !in->i_dtime && chk_mode_type_valid(in->i_mode))
		V(INV_FREE_INODE_FORM, "inode %u is free in the inode bitmap but looks in use "
		  "(%u links, mode 0%o, no dtime): it would be handed out twice", ino,
		  in->i_links_count, in->i_mode);
}

uint32_t chk_tail_start(const struct chk_fs *fs, uint32_t g)
{
	uint32_t used = chk_group_used_inodes(fs, g);
	const uint8_t *ibits = chk_group_ibits(fs, g);
	uint32_t upto = ibits ? (uint32_t)chk_bits_end(ibits, used) : 0;
	/* the reserved inodes are judged by the scan, whatever their bits */
	if (g == 0 && upto < fs->first_ino - 1)
		upto = fs->first_ino - 1;
	uint64_t blocks = ((uint64_t)upto * fs->inode_size + fs->bs - 1) / fs->bs;
	uint64_t whole = blocks * fs->bs / fs->inode_size;
	return whole < used ? (uint32_t)whole : used;
}

int chk_mark_deferred(struct chk_fs *fs, uint32_t g)
{
	if (!fs->deferred && !(fs->deferred = calloc((size_t)fs->ngroups / 8 + 1, 1)))
		return -ENOMEM;
	if (!bit_get(fs->deferred, g)) {
		fs->deferred[g >> 3] |= (uint8_t)(1u << (g & 7));
		fs->ndeferred++;
		fs->stats.scan_tails_deferred++;
	}
	return 0;
}

void chk_clear_deferred(struct chk_fs *fs)
{
	free(fs->deferred);
	fs->deferred = NULL;
	fs->ndeferred = 0;
}

int chk_claim_groups(struct chk_fs *fs)
{
	if (!fs->pristine || !(fs->claimed = calloc((size_t)fs->ngroups / 8 + 1, 1)))
		return fs->pristine ? -ENOMEM : 0;
	memcpy(fs->claimed, fs->pristine, ((size_t)fs->ngroups + 7) / 8);
	fs->nclaimed = 0;
	for (uint32_t g = 0; g < fs->ngroups; g++)
		fs->nclaimed += bit_get(fs->claimed, g);
	return 0;
}

uint32_t chk_claimed_count(const struct chk_fs *fs)
{
	return fs->nclaimed;
}

bool chk_group_claimed(const struct chk_fs *fs, uint32_t g)
{
	return fs->claimed && g < fs->ngroups && bit_get(fs->claimed, g);
}

void chk_claim_extent(const struct chk_fs *fs, uint32_t g, uint64_t *offset, size_t *len)
{
	*offset = 0;
	*len = 0;
	if (!chk_group_claimed(fs, g))
		return;
	const uint8_t *d = chk_gd(fs, g);
	uint64_t bb = chk_gd_bbitmap(fs, d);
	if (chk_gd_ibitmap(fs, d) == bb + 1) {
		*offset = bb * fs->bs;
		*len = 2 * (size_t)fs->bs;
	}
}

/* Every byte of b[from..to) is c: the first is, and each equals the one
 * after it (one overlapping memcmp). */
static bool all_bytes(const uint8_t *b, size_t from, size_t to, uint8_t c)
{
	return from >= to || (b[from] == c && !memcmp(b + from, b + from + 1, to - from - 1));
}

/* Claimed group g's bitmaps (block bitmap, then inode bitmap) against the
 * static pattern its descriptor's counts allow: a difference is a count
 * that does not match its bitmap, as the scan names it. */
static void judge_claim(struct chk_fs *fs, struct chk_verdict *v, uint32_t g, const uint8_t *bb,
			const uint8_t *ib, uint8_t *pat)
{
	chk_group_static_bits(fs, g, pat);
	uint32_t extra = 0, missing = 0, inodes = 0;
	uint64_t first_extra = 0, first_missing = 0, first_ino = 0;
	uint64_t start = fs->first_data_block + (uint64_t)g * fs->bpg;
	/* the bit walks only for a report: 122,880 groups on 15 TiB */
	bool bb_ok = !memcmp(bb, pat, fs->bpg / 8), ib_ok = all_bytes(ib, 0, fs->ipg / 8, 0);
	for (uint32_t i = 0; !bb_ok && i < fs->bpg; i++) {
		bool on = bit_get(bb, i), want = bit_get(pat, i);
		if (on && !want && !extra++)
			first_extra = start + i;
		if (!on && want && !missing++)
			first_missing = start + i;
	}
	for (uint32_t i = 0; !ib_ok && i < fs->ipg; i++)
		if (bit_get(ib, i) && !inodes++)
			first_ino = (uint64_t)g * fs->ipg + i + 1;
	if (extra)
		V(INV_BGD_FREE_BLOCKS, "group %u: its descriptor counts no block in use but its static ones, "
		  "yet its block bitmap marks %u more (first: block %llu)", g, extra,
		  (unsigned long long)first_extra);
	if (missing)
		V(INV_BGD_FREE_BLOCKS, "group %u: its block bitmap leaves %u of its static blocks clear "
		  "(first: block %llu)", g, missing, (unsigned long long)first_missing);
	if (inodes)
		V(INV_BGD_FREE_INODES, "group %u: its descriptor counts no inode in use, yet its inode "
		  "bitmap marks %u (first: inode %llu)", g, inodes, (unsigned long long)first_ino);
	if (!all_bytes(bb, fs->bpg / 8, fs->bs, 0xff) || !all_bytes(ib, fs->ipg / 8, fs->bs, 0xff))
		V(INV_BITMAP_PADDING, "group %u: a bitmap's padding past its bits is not all set", g);
}

/* Verify claimed group g's bitmaps (given: the chk_claim_extent bytes) into
 * v.  0 or a read's -errno. */
static int check_claim(struct chk_fs *fs, struct chk_verdict *v, uint32_t g, const void *given)
{
	uint8_t *buf = malloc((size_t)3 * fs->bs);
	if (!buf)
		return -ENOMEM;
	uint64_t off;
	size_t len;
	chk_claim_extent(fs, g, &off, &len);
	const uint8_t *d = chk_gd(fs, g);
	int r = 0;
	if (given && len)
		memcpy(buf, given, len);
	else if (len)
		r = fs->read(fs->ctx, off, buf, len);
	else if (!(r = fs->read(fs->ctx, chk_gd_bbitmap(fs, d) * fs->bs, buf, fs->bs)))
		r = fs->read(fs->ctx, chk_gd_ibitmap(fs, d) * fs->bs, buf + fs->bs, fs->bs);
	if (!r)
		judge_claim(fs, v, g, buf, buf + fs->bs, buf + 2 * (size_t)fs->bs);
	free(buf);
	return r > 0 ? -EIO : r;
}

void chk_set_defer_tails(struct chk_fs *fs, bool on)
{
	fs->defer_tails = on;
}

uint32_t chk_deferred_count(const struct chk_fs *fs)
{
	return fs->ndeferred;
}

bool chk_group_deferred(const struct chk_fs *fs, uint32_t g)
{
	return fs->deferred && g < fs->ngroups && bit_get(fs->deferred, g);
}

const uint8_t *chk_deferred_bits(const struct chk_fs *fs)
{
	return fs->ndeferred ? fs->deferred : NULL;
}

int chk_set_deferred(struct chk_fs *fs, const uint8_t *bits, uint32_t ngroups)
{
	if (bits && ngroups != fs->ngroups)
		return -EINVAL;
	uint8_t *copy = NULL;
	uint32_t n = 0;
	if (bits) {
		if (!(copy = malloc((size_t)ngroups / 8 + 1)))
			return -ENOMEM;
		memcpy(copy, bits, ((size_t)ngroups + 7) / 8);
		for (uint32_t g = 0; g < ngroups; g++)
			n += bit_get(copy, g);
	}
	free(fs->deferred);
	fs->deferred = copy;
	fs->ndeferred = n;
	/* a claimed group no longer deferred was checked */
	for (uint32_t g = 0; fs->claimed && g < fs->ngroups; g++)
		if (bit_get(fs->claimed, g) && !chk_group_deferred(fs, g)) {
			fs->claimed[g >> 3] &= (uint8_t)~(1u << (g & 7));
			fs->nclaimed--;
		}
	return 0;
}

/* Where group g's tail lies, deferred or not (*len 0: none). */
static void tail_range(const struct chk_fs *fs, uint32_t g, uint64_t *offset, size_t *len)
{
	*offset = 0;
	*len = 0;
	uint32_t from = chk_tail_start(fs, g), used = chk_group_used_inodes(fs, g);
	if (from >= used)
		return;
	uint64_t start = (uint64_t)from * fs->inode_size;   /* a block boundary */
	uint64_t end = ((uint64_t)used * fs->inode_size + fs->bs - 1) / fs->bs * fs->bs;
	*offset = chk_gd_itable(fs, chk_gd(fs, g)) * fs->bs + start;
	*len = (size_t)(end - start);
}

bool chk_tail_known_zero(const struct chk_fs *fs, uint32_t g)
{
	uint64_t off;
	size_t len;
	tail_range(fs, g, &off, &len);
	return len && g && fs->zero && !chk_group_inodes_any(fs, g) && fs->zero(fs->ctx, off, len) == 1;
}

void chk_tail_extent(const struct chk_fs *fs, uint32_t g, uint64_t *offset, size_t *len)
{
	*offset = 0;
	*len = 0;
	if (chk_group_deferred(fs, g))
		tail_range(fs, g, offset, len);
}

int chk_check_tail(struct chk_fs *fs, uint32_t g, const void *table, const void *bitmaps,
		   struct chk_verdict **out)
{
	*out = NULL;
	if (!chk_group_deferred(fs, g))
		return 0;
	uint64_t t0 = chk_thread_ns();
	uint64_t off;
	size_t len;
	chk_tail_extent(fs, g, &off, &len);
	struct chk_verdict *v = chk_verdict_new();
	uint8_t *own = NULL;
	int r = v ? 0 : -ENOMEM;
	if (!r && chk_group_claimed(fs, g))
		r = check_claim(fs, v, g, bitmaps);
	bool zeros = !table && chk_tail_known_zero(fs, g);
	if (!r && len && !table && !zeros) {
		if (!(own = malloc(len)))
			r = -ENOMEM;
		else if ((r = fs->read(fs->ctx, off, own, len)) > 0)
			r = -EIO;
		table = own;
	}
	uint32_t from = chk_tail_start(fs, g), used = chk_group_used_inodes(fs, g);
	for (uint32_t i = from; !r && !zeros && len && i < used; i++) {
		uint32_t ino = g * fs->ipg + i + 1;
		const struct ext2_inode *in = (const void *)((const uint8_t *)table + (size_t)(i - from) * fs->inode_size);
		if (chk_judge_table_inode(fs, v, ino, in))
			continue;
		/* past the last inode in use: free, unless the caller let a
		 * commit write the group's inode bitmap before this check */
		if (chk_ibit(fs, ino))
			V(INV_FREE_INODE_FORM, "inode %u: in use past group %u's deferred check point", ino, g);
		else
			chk_judge_free_inode(fs, v, ino, in);
	}
	free(own);
	if (!r && chk_verdict_oom(v))
		r = -ENOMEM;
	uint64_t spent = chk_thread_ns() - t0;
	fs->stats.cpu_ns += spent;
	fs->stats.scan_cpu_ns += spent;
	if (r) {
		if (v)
			chk_verdict_free(v);
		return r;
	}
	fs->deferred[g >> 3] &= (uint8_t)~(1u << (g & 7));
	fs->ndeferred--;
	if (chk_group_claimed(fs, g)) {
		fs->claimed[g >> 3] &= (uint8_t)~(1u << (g & 7));
		fs->nclaimed--;
	}
	fs->stats.tails_checked++;
	*out = v;
	return 0;
}
