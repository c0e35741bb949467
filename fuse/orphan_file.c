/*
 * fuse/orphan_file.c - the orphan file (ext4's orphan_file feature): orphans
 * recorded as inode numbers in the slots of a special file's blocks, each
 * block ending with a tail (magic, checksum over the inode's number and
 * generation, the block number and the slots), and RO_COMPAT_ORPHAN_PRESENT
 * set while any slot is used.  orphan.c records new orphans here first and
 * falls back to the s_last_orphan list when every slot is taken, as the
 * kernel does: an entry is one slot of one block, so adding or removing an
 * orphan writes that block and never a neighbour's inode (the list rewrites
 * the predecessor, found by a walk when its hint fails), and a kernel that
 * mounts the image after a crash reads both.
 *
 * The file's block map is read once (nothing resizes it while mounted); the
 * count of used slots per block is a cache of what the blocks hold, reread
 * after a rollback.  The slots themselves are always read from the device
 * (through the transaction), never from memory.
 */
#include "rfs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct orphan_file {
	ext2_ino_t ino;
	uint32_t nblocks, per_block;
	blk64_t *pblk;          /* logical block -> physical */
	uint32_t *used;         /* non-zero slots per block (valid when counted) */
	uint64_t total;         /* their sum */
	bool counted;
	bool broken;            /* unusable (said why): orphans go to the list */
	uint32_t next;          /* where the search for a free slot starts */
	uint8_t *buf;
};

static bool ofile_enabled(const struct rfs *r)
{
	return r->fs && ext2fs_has_feature_orphan_file(r->fs->super) && r->fs->super->s_orphan_file_inum;
}

/* Map the file once.  A file that is not a hole-free regular file of whole
 * blocks is not used (the checker's base check names the damage). */
static int of_map(struct rfs *r, struct orphan_file *of)
{
	ext2_filsys fs = r->fs;
	struct ext2_inode in;

	of->ino = fs->super->s_orphan_file_inum;
	of->per_block = (fs->blocksize - sizeof(struct ext4_orphan_block_tail)) / sizeof(__u32);
	if (of->ino > fs->super->s_inodes_count || ext2fs_read_inode(fs, of->ino, &in) ||
	    !LINUX_S_ISREG(in.i_mode) || EXT2_I_SIZE(&in) % fs->blocksize ||
	    EXT2_I_SIZE(&in) / fs->blocksize > 1u << 20)
		return -EUCLEAN;
	of->nblocks = (uint32_t)(EXT2_I_SIZE(&in) / fs->blocksize);
	of->pblk = calloc(of->nblocks ? of->nblocks : 1, sizeof(*of->pblk));
	of->used = calloc(of->nblocks ? of->nblocks : 1, sizeof(*of->used));
	of->buf = malloc(fs->blocksize);
	if (!of->pblk || !of->used || !of->buf)
		return -ENOMEM;
	for (uint32_t b = 0; b < of->nblocks; b++)
		if (ext2fs_bmap2(fs, of->ino, &in, NULL, 0, b, NULL, &of->pblk[b]) || !of->pblk[b])
			return -EUCLEAN;
	return 0;
}

/* Read block b into of->buf, its tail checked. */
static int of_read(struct rfs *r, struct orphan_file *of, uint32_t b)
{
	errcode_t e = io_channel_read_blk64(r->fs->io, of->pblk[b], 1, of->buf);
	if (e)
		return -errmap(e);
	struct ext4_orphan_block_tail *tail = ext2fs_orphan_block_tail(r->fs, (char *)of->buf);
	if (ext2fs_le32_to_cpu(tail->ob_magic) != EXT4_ORPHAN_BLOCK_MAGIC ||
	    !ext2fs_orphan_file_block_csum_verify(r->fs, of->ino, of->pblk[b], (char *)of->buf))
		return -EUCLEAN;
	return 0;
}

static int of_write(struct rfs *r, struct orphan_file *of, uint32_t b)
{
	errcode_t e = ext2fs_orphan_file_block_csum_set(r->fs, of->ino, of->pblk[b], (char *)of->buf);
	if (!e)
		e = io_channel_write_blk64(r->fs->io, of->pblk[b], 1, of->buf);
	return e ? (e == EROFS ? -EROFS : -errmap(e)) : 0;
}

static int of_count(struct rfs *r, struct orphan_file *of)
{
	of->total = 0;
	for (uint32_t b = 0; b < of->nblocks; b++) {
		int ret = of_read(r, of, b);
		if (ret)
			return ret;
		const __u32 *slot = (const __u32 *)of->buf;
		of->used[b] = 0;
		for (uint32_t s = 0; s < of->per_block; s++)
			of->used[b] += slot[s] != 0;
		of->total += of->used[b];
	}
	of->counted = true;
	return 0;
}

/* The orphan file ready to use: NULL when the image has none or it is
 * unusable (*err: 0, or -errno for a failure worth reporting). */
static struct orphan_file *of_get(struct rfs *r, int *err)
{
	*err = 0;
	if (!ofile_enabled(r))
		return NULL;
	struct orphan_file *of = r->ofile;
	if (!of) {
		of = r->ofile = calloc(1, sizeof(*of));
		if (!of) {
			*err = -ENOMEM;
			return NULL;
		}
		int ret = of_map(r, of);
		if (ret == -EUCLEAN) {
			fprintf(stderr, "recon-fuse: the orphan file (inode %u) is damaged; orphans go "
				"on the orphan list instead (run e2fsck)\n", of->ino);
			of->broken = true;
		} else if (ret) {
			ofile_free(r);
			*err = ret;
			return NULL;
		}
	}
	if (of->broken)
		return NULL;
	if (!of->counted) {
		int ret = of_count(r, of);
		if (ret == -EUCLEAN) {
			fprintf(stderr, "recon-fuse: an orphan file block (inode %u) has a bad magic or "
				"checksum; orphans go on the orphan list instead (run e2fsck)\n", of->ino);
			of->broken = true;
		}
		if (ret) {
			*err = ret == -EUCLEAN ? 0 : ret;
			return NULL;
		}
	}
	return of;
}

/* ORPHAN_PRESENT follows whether any slot is used. */
static void of_present(struct rfs *r, const struct orphan_file *of)
{
	struct ext2_super_block *sb = r->fs->super;
	bool set = ext2fs_has_feature_orphan_present(sb);
	if (set == (of->total != 0))
		return;
	if (of->total)
		ext2fs_set_feature_orphan_present(sb);
	else
		ext2fs_clear_feature_orphan_present(sb);
	ext2fs_mark_super_dirty(r->fs);
}

int ofile_add(struct rfs *r, ext2_ino_t ino)
{
	int err;
	struct orphan_file *of = of_get(r, &err);
	if (!of)
		return err ? err : -ENOSPC;
	for (uint32_t k = 0; k < of->nblocks; k++) {
		uint32_t b = (of->next + k) % of->nblocks;
		if (of->used[b] >= of->per_block)
			continue;
		int ret = of_read(r, of, b);
		if (ret)
			return ret == -EUCLEAN ? -EIO : ret;
		__u32 *slot = (__u32 *)of->buf;
		uint32_t s = 0;
		while (s < of->per_block && slot[s])
			s++;
		if (s == of->per_block) {
			of->counted = false;   /* the count was wrong: recounted next time */
			continue;
		}
		slot[s] = ext2fs_cpu_to_le32(ino);
		if ((ret = of_write(r, of, b)) != 0)
			return ret;
		of->used[b]++;
		of->total++;
		of->next = b;
		of_present(r, of);
		return 0;
	}
	return -ENOSPC;
}

/* Each recorded inode, in slot order, to fn until it returns non-zero,
 * which is returned with the slot in *b and *s (the block in of->buf); 0
 * when fn took them all. */
static int of_scan(struct rfs *r, struct orphan_file *of, ofile_each_fn fn, void *arg,
		   uint32_t *b, uint32_t *s)
{
	for (uint32_t k = 0; k < of->nblocks && of->total; k++) {
		if (!of->used[k])
			continue;
		int ret = of_read(r, of, k);
		if (ret)
			return ret == -EUCLEAN ? -EIO : ret;
		const __u32 *slot = (const __u32 *)of->buf;
		for (uint32_t j = 0; j < of->per_block; j++)
			if (slot[j] && (ret = fn(r, ext2fs_le32_to_cpu(slot[j]), arg)) != 0) {
				*b = k;
				*s = j;
				return ret;
			}
	}
	return 0;
}

/* of_scan's stop: at the inode *arg, or at any when *arg is 0 */
static int is_wanted(struct rfs *r, ext2_ino_t ino, void *arg)
{
	(void)r;
	ext2_ino_t want = *(const ext2_ino_t *)arg;
	return !want || ino == want;
}

/* Find ino's slot (any used one for ino 0): *b and *s, the block in
 * of->buf.  -ENOENT if none. */
static int of_find(struct rfs *r, struct orphan_file *of, ext2_ino_t ino, uint32_t *b, uint32_t *s)
{
	int ret = of_scan(r, of, is_wanted, &ino, b, s);
	return ret == 1 ? 0 : ret ? ret : -ENOENT;
}

static int of_clear(struct rfs *r, struct orphan_file *of, uint32_t b, uint32_t s)
{
	((__u32 *)of->buf)[s] = 0;
	int ret = of_write(r, of, b);
	if (ret)
		return ret;
	of->used[b]--;
	of->total--;
	of_present(r, of);
	return 0;
}

int ofile_remove(struct rfs *r, ext2_ino_t ino)
{
	int err;
	uint32_t b, s;
	struct orphan_file *of = of_get(r, &err);
	if (!of)
		return err ? err : -ENOENT;
	int ret = of_find(r, of, ino, &b, &s);
	return ret ? ret : of_clear(r, of, b, s);
}

int ofile_first(struct rfs *r, ext2_ino_t *ino)
{
	int err;
	uint32_t b, s;
	struct orphan_file *of = of_get(r, &err);
	*ino = 0;
	if (!of)
		return err;
	int ret = of_find(r, of, 0, &b, &s);
	if (!ret)
		*ino = ext2fs_le32_to_cpu(((const __u32 *)of->buf)[s]);
	return ret == -ENOENT ? 0 : ret;
}

/* Each recorded inode to fn (which must not change the orphan file: its
 * block buffer is in use); stops at fn's first non-zero return. */
int ofile_each(struct rfs *r, ofile_each_fn fn, void *arg)
{
	int err;
	uint32_t b, s;
	struct orphan_file *of = of_get(r, &err);
	return of ? of_scan(r, of, fn, arg, &b, &s) : err;
}

/*
 * Before mount-time release: a slot naming no possible orphan (unfit says
 * why) or an inode already named is cleared, saying so, and never released
 * (the kernel skips such entries; e2fsck deals with the inode).  Cleared
 * first, so that every commit during the release holds a file the checker
 * approves.  With no slot in use, ORPHAN_PRESENT (a kernel's mount leaves
 * it set) is cleared.
 */
int ofile_cut(struct rfs *r, ofile_unfit_fn unfit)
{
	int err;
	struct orphan_file *of = of_get(r, &err);
	if (!of)
		return err;
	ext2_filsys fs = r->fs;
	uint8_t *seen = calloc(fs->super->s_inodes_count / 8 + 1, 1);
	if (!seen)
		return -ENOMEM;
	int ret = 0;
	for (uint32_t b = 0; b < of->nblocks && !ret; b++) {
		if (!of->used[b])
			continue;
		bool dirty = false;
		if ((ret = of_read(r, of, b)) != 0)
			break;
		__u32 *slot = (__u32 *)of->buf;
		for (uint32_t s = 0; s < of->per_block; s++) {
			ext2_ino_t ino = ext2fs_le32_to_cpu(slot[s]);
			if (!ino)
				continue;
			const char *why = unfit(r, ino);
			if (!why && (seen[ino / 8] & (1u << (ino % 8))))
				why = "is named twice";
			if (!why) {
				seen[ino / 8] |= (uint8_t)(1u << (ino % 8));
				continue;
			}
			fprintf(stderr, "recon-fuse: orphan file: inode %u %s; its entry is dropped "
				"(run e2fsck)\n", ino, why);
			slot[s] = 0;
			of->used[b]--;
			of->total--;
			dirty = true;
		}
		if (dirty)
			ret = of_write(r, of, b);
	}
	free(seen);
	if (ret == -EUCLEAN)
		ret = -EIO;
	if (!ret)
		of_present(r, of);
	return ret;
}

bool ofile_pending(const struct rfs *r)
{
	if (!ofile_enabled(r))
		return false;
	const struct orphan_file *of = r->ofile;
	return ext2fs_has_feature_orphan_present(r->fs->super) || (of && of->counted && of->total);
}

void ofile_forget(struct rfs *r)
{
	if (r->ofile)
		r->ofile->counted = false;
}

void ofile_free(struct rfs *r)
{
	struct orphan_file *of = r->ofile;
	if (!of)
		return;
	free(of->pblk);
	free(of->used);
	free(of->buf);
	free(of);
	r->ofile = NULL;
}
