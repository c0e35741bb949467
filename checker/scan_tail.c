/*
 * checker/scan_tail.c - deferred table tails (checker.h): the part of a
 * group's inode table past its last inode in use, which holds only free
 * inodes, left by chk_scan for chk_check_tail to judge group by group, and
 * the judgement of one table inode that both share.
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

int chk_check_tail(struct chk_fs *fs, uint32_t g, const void *table, struct chk_verdict **out)
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
	fs->stats.tails_checked++;
	*out = v;
	return 0;
}
