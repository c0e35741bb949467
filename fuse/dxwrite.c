/*
 * fuse/dxwrite.c - changes to a directory with an htree index: the path
 * to the leaf a new name belongs in (dx_probe; dxsplit.c splits what is
 * full on it), and turning the index blocks into ordinary directory blocks
 * when the index can take no more (dirindex.c keeps the directory linear
 * after that; see dirindex.h).
 *
 * Without metadata_csum nothing needs rewriting: a dx root reads as "." and
 * a ".." covering the rest of the block, a dx node as one empty entry over
 * the whole block.  With metadata_csum those blocks end in a dx tail (the
 * checksum of the index entries), and a leaf block of a linear directory
 * must end in a 12-byte dirent tail instead: e2fsck and the kernel reject a
 * linear directory block without one.  So each index block is rewritten in
 * leaf form, empty but for "." and ".." in the root; the caller writes it
 * through ext2fs_write_dir_block4, which computes the leaf checksum.
 *
 * Errors: 0 or -errno.  Threads: the caller holds the file-system lock.
 */
#include "dirindex.h"

#include <errno.h>
#include <string.h>

/* A dx root as the kernel and e2fsck lay it out: "." of 12 bytes, then ".."
 * over the rest of the block (the index lives in its slack). */
static bool is_dx_root(ext2_filsys fs, char *buf)
{
	const struct ext2_dir_entry *dot = (const void *)buf, *dotdot = (const void *)(buf + 12);

	return dirent_rec_len_at(fs, buf, 0) == 12 && dirent_rec_len_at(fs, buf, 12) == fs->blocksize - 12 &&
	       dot->inode != 0 && ext2fs_dirent_name_len(dot) == 1 && dot->name[0] == '.' &&
	       ext2fs_dirent_name_len(dotdot) == 2 && dotdot->name[0] == '.' && dotdot->name[1] == '.';
}

/* A dx node: one empty entry over the whole block. */
static bool is_dx_node(ext2_filsys fs, char *buf)
{
	const struct ext2_dir_entry *de = (const void *)buf;

	return dirent_rec_len_at(fs, buf, 0) == fs->blocksize && de->inode == 0 &&
	       ext2fs_dirent_name_len(de) == 0;
}

int dx_block_to_leaf(ext2_filsys fs, uint32_t lblk, char *buf, bool *changed)
{
	unsigned int top = fs->blocksize - sizeof(struct ext2_dir_entry_tail);
	unsigned int keep;

	*changed = false;
	if (!ext2fs_has_feature_metadata_csum(fs->super) || dirblock_entries_end(fs, buf) != fs->blocksize)
		return 0;
	if (lblk == 0 && is_dx_root(fs, buf)) {
		keep = 24;      /* "." and "..", 12 bytes each */
		if (ext2fs_set_rec_len(fs, top - 12, (struct ext2_dir_entry *)(buf + 12)))
			return -EIO;
	} else if (lblk != 0 && is_dx_node(fs, buf)) {
		keep = 8;       /* the empty entry's header */
		if (ext2fs_set_rec_len(fs, top, (struct ext2_dir_entry *)buf))
			return -EIO;
	} else {
		/* neither a leaf with its checksum tail nor an index block:
		 * rewriting it could lose entries */
		return -EIO;
	}
	/* the index entries and the dx tail go: zeroes, as a fresh block */
	memset(buf + keep, 0, fs->blocksize - keep);
	ext2fs_initialize_dirent_tail(fs, EXT2_DIRENT_TAIL(buf, fs->blocksize));
	*changed = true;
	return 0;
}

/* ---- the leaf a name belongs in ---------------------------------------- */

/* Entries of an index block: count/limit at off, then 8-byte entries. */
struct dx_view {
	const uint8_t *blk;
	unsigned int off, count;
};

static uint32_t ld32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint16_t ld16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }

/* count/limit as the kernel's dx_probe accepts them: limit the entries the
 * block holds (less the dx tail with metadata_csum), 0 < count <= limit. */
static bool dx_view_init(ext2_filsys fs, const char *buf, unsigned int off, struct dx_view *v)
{
	unsigned int limit = (fs->blocksize - off) / 8;

	if (ext2fs_has_feature_metadata_csum(fs->super))
		limit--;
	v->blk = (const uint8_t *)buf;
	v->off = off;
	v->count = ld16(v->blk + off + 2);
	return ld16(v->blk + off) == limit && v->count > 0 && v->count <= limit;
}

/* The block of the last entry whose hash is <= hash (entry 0 covers all
 * below entry 1), as the kernel's dx_probe picks it. */
static uint32_t dx_view_pick(const struct dx_view *v, uint32_t hash, unsigned int *at)
{
	unsigned int lo = 1, hi = v->count;     /* first entry above hash in [lo, hi] */

	while (lo < hi) {
		unsigned int mid = lo + (hi - lo) / 2;

		if (ld32(v->blk + v->off + 8 * mid) > hash)
			hi = mid;
		else
			lo = mid + 1;
	}
	*at = lo - 1;
	return ld32(v->blk + v->off + 8 * (lo - 1) + 4) & 0x0fffffff;
}

int dx_name_hash(ext2_filsys fs, int version, const char *name, size_t len,
		 uint32_t *hash, uint32_t *minor)
{
	ext2_dirhash_t major = 0, minor_hash = 0;

	if (ext2fs_dirhash(version, name, (int)len, fs->super->s_hash_seed, &major, &minor_hash))
		return -EIO;
	*hash = major;
	*minor = minor_hash;
	return 0;
}

int dx_root_version(ext2_filsys fs, char *buf)
{
	const struct ext2_dx_root_info *ri = (const void *)(buf + 24);
	unsigned int max_levels = ext2fs_has_feature_largedir(fs->super) ? 2 : 1;
	int version;

	if (dirblock_entries_end(fs, buf) != fs->blocksize || !is_dx_root(fs, buf) ||
	    ri->reserved_zero || ri->info_length != 8 || ri->hash_version > EXT2_HASH_TEA ||
	    ri->indirect_levels > max_levels)
		return -EIO;
	version = ri->hash_version;
	if (fs->super->s_flags & EXT2_FLAGS_UNSIGNED_HASH)
		version += EXT2_HASH_LEGACY_UNSIGNED - EXT2_HASH_LEGACY;
	return version;
}

/* One level of the walk: the entry hash picks in the index block in buf. */
static int dx_frame_pick(ext2_filsys fs, char *buf, unsigned int off, uint32_t hash,
			 struct dx_frame *f, uint32_t *child)
{
	struct dx_view v;

	if (!dx_view_init(fs, buf, off, &v))
		return -EIO;
	f->off = off;
	f->count = v.count;
	f->limit = ld16(v.blk + off);
	*child = dx_view_pick(&v, hash, &f->at);
	return 0;
}

int dx_probe(ext2_filsys fs, ext2_ino_t dir, const blk64_t *pblk, uint32_t nblocks,
	     char *buf, const char *name, size_t len, struct dx_path *p)
{
	const struct ext2_dx_root_info *ri = (const void *)(buf + 24);
	uint32_t lblk = 0;

	if (nblocks < 2 || ext2fs_read_dir_block4(fs, pblk[0], buf, 0, dir))
		return -EIO;
	p->version = dx_root_version(fs, buf);
	if (p->version < 0)
		return -EIO;
	p->levels = ri->indirect_levels;
	if (dx_name_hash(fs, p->version, name, len, &p->hash, &p->minor))
		return -EIO;
	for (unsigned int level = 0;; level++) {
		struct dx_frame *f = &p->f[level];

		f->lblk = lblk;
		if (dx_frame_pick(fs, buf, level ? 8 : 32, p->hash, f, &lblk))
			return -EIO;
		/* block 0 is the root, never a child */
		if (lblk == 0 || lblk >= nblocks)
			return -EIO;
		if (level == p->levels)
			break;
		if (ext2fs_read_dir_block4(fs, pblk[lblk], buf, 0, dir) || !is_dx_node(fs, buf))
			return -EIO;
	}
	p->leaf = lblk;
	return 0;
}
