/*
 * io/fault.c - fault_corrupt, the test-only injector: corrupt one field of the Nth
 * matching transaction before the checker sees it (tests/integration/
 * fault_corrupt.sh, bench/fault-campaign).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "txn_internal.h"

/* ---- fault_corrupt ---- */

/* KIND@N: one of corrupt_names, and N >= 1 in decimal. */
static errcode_t parse_spec(const char *spec, enum corrupt_kind *kind, uint64_t *when)
{
	const char *at = strchr(spec, '@');
	if (!at)
		return EINVAL;
	*kind = CK_NONE;
	for (size_t k = 1; k < sizeof(corrupt_names) / sizeof(corrupt_names[0]); k++)
		if (corrupt_names[k] && strlen(corrupt_names[k]) == (size_t)(at - spec) &&
		    !strncmp(spec, corrupt_names[k], (size_t)(at - spec)))
			*kind = (enum corrupt_kind)k;
	char *end;
	errno = 0;
	unsigned long long n = strtoull(at + 1, &end, 10);
	if (*kind == CK_NONE || at[1] < '0' || at[1] > '9' || errno || *end || n == 0)
		return EINVAL;
	*when = n;
	return 0;
}

bool rio_fault_corrupt_valid(const char *spec)
{
	enum corrupt_kind kind;
	uint64_t when;
	return spec && parse_spec(spec, &kind, &when) == 0;
}

errcode_t fault_corrupt_parse(struct txn_manager *t, const char *spec)
{
	t->ckind = CK_NONE;
	if (!spec || !*spec)
		return 0;
	enum corrupt_kind kind;
	uint64_t when;
	errcode_t err = parse_spec(spec, &kind, &when);
	if (err)
		return err;
	t->ckind = kind;
	t->cwhen = when;
	return 0;
}

/* A place to corrupt: a block of the overlay and a byte offset in it. */
struct cand {
	struct ovl_ent *e;
	uint32_t off;
	uint64_t aux;    /* kind-specific: inode number, group */
};

struct cands {
	struct cand *v;
	size_t n, cap;
};

static void cand_add(struct cands *c, struct ovl_ent *e, uint32_t off, uint64_t aux)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 32;
		struct cand *v = realloc(c->v, cap * sizeof(*v));
		if (!v)
			return;
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n++] = (struct cand){ e, off, aux };
}

static bool is_ovl_blk(struct txn_manager *t, uint64_t blk, dgrp_t *group,
		       blk64_t (*loc)(ext2_filsys, dgrp_t))
{
	for (dgrp_t g = 0; g < t->fs->group_desc_count; g++)
		if (loc(t->fs, g) == blk) {
			*group = g;
			return true;
		}
	return false;
}

/* Inode-table block?  Returns the first inode number in it, or 0. */
static ext2_ino_t itable_first_ino(struct txn_manager *t, uint64_t blk)
{
	ext2_filsys fs = t->fs;
	for (dgrp_t g = 0; g < fs->group_desc_count; g++) {
		blk64_t it = ext2fs_inode_table_loc(fs, g);
		if (blk >= it && blk < it + fs->inode_blocks_per_group)
			return g * fs->super->s_inodes_per_group +
			       (ext2_ino_t)((blk - it) * (t->bs / EXT2_INODE_SIZE(fs->super))) + 1;
	}
	return 0;
}

/* In-use inodes this transaction changed (cand.off = offset of the inode). */
static void changed_inodes(struct txn_manager *t, struct cands *out)
{
	unsigned isz = EXT2_INODE_SIZE(t->fs->super);
	for (size_t i = 0; i < t->nents; i++) {
		struct ovl_ent *e = t->ents[i];
		ext2_ino_t first = itable_first_ino(t, e->blk);
		if (!first)
			continue;
		for (unsigned o = 0; o + isz <= t->bs; o += isz) {
			if (!memcmp(e->data + o, e->base + o, isz))
				continue;
			const struct ext2_inode *in = (const struct ext2_inode *)(e->data + o);
			if (in->i_links_count == 0 || in->i_mode == 0 || in->i_dtime)
				continue;
			cand_add(out, e, o, first + o / isz);
		}
	}
}

static bool has_block_map(const struct ext2_inode *in)
{
	if (!(LINUX_S_ISREG(in->i_mode) || LINUX_S_ISDIR(in->i_mode)))
		return false;
	return !(in->i_flags & (EXT4_EXTENTS_FL | EXT4_INLINE_DATA_FL)) && in->i_block[0] != 0;
}

/* Directory blocks of changed directories held by the overlay
 * (aux = 1 for a directory's first block). */
static void changed_dir_blocks(struct txn_manager *t, struct cands *out)
{
	struct cands ino = { 0 };
	changed_inodes(t, &ino);
	for (size_t i = 0; i < ino.n; i++) {
		const struct ext2_inode *in = (const void *)(ino.v[i].e->data + ino.v[i].off);
		if (!LINUX_S_ISDIR(in->i_mode) || !has_block_map(in))
			continue;
		for (int k = 0; k < EXT2_NDIR_BLOCKS; k++) {
			struct ovl_ent *d = in->i_block[k] ? ovl_find(t, in->i_block[k]) : NULL;
			if (d)
				cand_add(out, d, 0, k == 0);
		}
	}
	free(ino.v);
}

/* Dirents of one directory block: offsets of entries (validated chain). */
static void dirents(struct txn_manager *t, struct ovl_ent *d, uint64_t first_block,
		    struct cands *out, bool want_dotdot)
{
	unsigned o = 0, idx = 0;
	while (o + 8 <= t->bs) {
		struct ext2_dir_entry *de = (void *)(d->data + o);
		unsigned rec = de->rec_len;
		if (rec < 8 || rec % 4 || o + rec > t->bs)
			break;
		unsigned nl = de->name_len & 0xff;
		bool dot = first_block && idx < 2;
		if (want_dotdot) {
			if (first_block && idx == 1 && nl == 2)
				cand_add(out, d, o, 0);
		} else if (!dot && de->inode) {
			cand_add(out, d, o, 0);
		}
		o += rec;
		idx++;
	}
}

static blk64_t block_in_use_elsewhere(struct txn_manager *t, ext2_ino_t not_ino)
{
	struct ext2_inode in;
	ext2_ino_t ino = not_ino == EXT2_ROOT_INO ? EXT2_GOOD_OLD_FIRST_INO : EXT2_ROOT_INO;
	if (ext2fs_read_inode(t->fs, ino, &in) || in.i_block[0] == 0)
		return ext2fs_inode_table_loc(t->fs, 0);
	return in.i_block[0];
}

static blk64_t free_block(struct txn_manager *t)
{
	blk64_t goal = t->fs->super->s_first_data_block +
		       txn_random(t) % ext2fs_blocks_count(t->fs->super);
	for (int tries = 0; tries < 64; tries++) {
		blk64_t b;
		if (ext2fs_new_block2(t->fs, goal, NULL, &b))
			break;
		if (!blkset_has(&t->freed, b))
			return b;
		goal = b + 1;
	}
	return 0;
}

/* Sites in group metadata: a changed bitmap, descriptor or superblock. */
static void group_sites(struct txn_manager *t, struct cands *c)
{
	ext2_filsys fs = t->fs;
	dgrp_t g;
	switch (t->ckind) {
	case CK_BBITMAP:
	case CK_IBITMAP:
		for (size_t i = 0; i < t->nents; i++)
			if (ovl_changed(t, t->ents[i]) &&
			    is_ovl_blk(t, t->ents[i]->blk, &g, t->ckind == CK_BBITMAP ?
				       ext2fs_block_bitmap_loc : ext2fs_inode_bitmap_loc))
				cand_add(c, t->ents[i], 0, g);
		break;
	case CK_BGD_FREE_BLOCKS:
	case CK_BGD_FREE_INODES:
	case CK_BGD_USED_DIRS: {
		blk64_t first = fs->super->s_first_data_block + 1;
		unsigned dsz = EXT2_DESC_SIZE(fs->super);
		for (size_t i = 0; i < t->nents; i++) {
			struct ovl_ent *e = t->ents[i];
			if (e->blk < first || e->blk >= first + fs->desc_blocks)
				continue;
			uint64_t g0 = (e->blk - first) * (t->bs / dsz);
			for (unsigned o = 0; o + dsz <= t->bs; o += dsz)
				if (g0 + o / dsz < fs->group_desc_count &&
				    memcmp(e->data + o, e->base + o, dsz))
					cand_add(c, e, o, g0 + o / dsz);
		}
		break;
	}
	case CK_SB_FREE_BLOCKS: {
		struct ovl_ent *e = ovl_find(t, SUPERBLOCK_OFFSET / t->bs);
		if (e && ovl_changed(t, e))
			cand_add(c, e, SUPERBLOCK_OFFSET % t->bs, 0);
		break;
	}
	default:
		break;
	}
}

/* Sites in changed in-use inodes, or in the blocks they point to (their
 * single indirect block, their xattr block). */
static void inode_sites(struct txn_manager *t, struct cands *c)
{
	struct cands ino = { 0 };
	if (t->ckind == CK_LINKS || t->ckind == CK_DTIME || t->ckind == CK_MODE) {
		changed_inodes(t, c);
		return;
	}
	changed_inodes(t, &ino);
	for (size_t i = 0; i < ino.n; i++) {
		const struct ext2_inode *in = (const void *)(ino.v[i].e->data + ino.v[i].off);
		if (t->ckind == CK_IND_PTR) {
			if (!has_block_map(in) || !in->i_block[EXT2_IND_BLOCK])
				continue;
			struct ovl_ent *ind = ovl_find(t, in->i_block[EXT2_IND_BLOCK]);
			if (!ind)
				continue;
			const uint32_t *slot = (const uint32_t *)ind->data;
			for (unsigned s = 0; s < t->bs / 4; s++)
				if (slot[s])
					cand_add(c, ind, s * 4, ino.v[i].aux);
		} else if (t->ckind == CK_XATTR_REFCOUNT) {
			struct ovl_ent *x = in->i_file_acl ? ovl_find(t, in->i_file_acl) : NULL;
			if (x)
				cand_add(c, x, 4, ino.v[i].aux);
		} else if (has_block_map(in)) {   /* PTR_USED/FREE/META, SIZE, IBLOCKS */
			cand_add(c, ino.v[i].e, ino.v[i].off, ino.v[i].aux);
		}
	}
	free(ino.v);
}

/* Sites in the entries of changed directories' blocks (their ".." for
 * CK_DOTDOT). */
static void dirent_sites(struct txn_manager *t, struct cands *c)
{
	struct cands dirs = { 0 };
	changed_dir_blocks(t, &dirs);
	for (size_t i = 0; i < dirs.n; i++) {
		struct cands de = { 0 };
		if (t->ckind == CK_DOTDOT && !dirs.v[i].aux)
			continue;
		dirents(t, dirs.v[i].e, dirs.v[i].aux, &de, t->ckind == CK_DOTDOT);
		for (size_t k = 0; k < de.n; k++) {
			const struct ext2_dir_entry *d = (const void *)(de.v[k].e->data + de.v[k].off);
			unsigned ft = (unsigned)(d->name_len >> 8);
			if (t->ckind == CK_DIRENT_TYPE &&
			    (!ext2fs_has_feature_filetype(t->fs->super) || ft == 0 || ft > 7))
				continue;
			cand_add(c, de.v[k].e, de.v[k].off, 0);
		}
		free(de.v);
	}
	free(dirs.v);
}

/* Find the targets of the configured kind in this transaction. */
static void injection_sites(struct txn_manager *t, struct cands *c)
{
	switch (t->ckind) {
	case CK_BBITMAP:
	case CK_IBITMAP:
	case CK_BGD_FREE_BLOCKS:
	case CK_BGD_FREE_INODES:
	case CK_BGD_USED_DIRS:
	case CK_SB_FREE_BLOCKS:
		group_sites(t, c);
		break;
	case CK_PTR_USED:
	case CK_PTR_FREE:
	case CK_PTR_META:
	case CK_SIZE:
	case CK_IBLOCKS:
	case CK_LINKS:
	case CK_DTIME:
	case CK_MODE:
	case CK_IND_PTR:
	case CK_XATTR_REFCOUNT:
		inode_sites(t, c);
		break;
	case CK_DIRENT_INODE:
	case CK_DIRENT_RECLEN:
	case CK_DIRENT_NAMELEN:
	case CK_DIRENT_TYPE:
	case CK_DOTDOT:
		dirent_sites(t, c);
		break;
	case CK_RANDOM:
		for (size_t i = 0; i < t->nents; i++)
			if (ovl_changed(t, t->ents[i]))
				cand_add(c, t->ents[i], 0, 0);
		break;
	case CK_NONE:
		break;
	}
}

/* A bitmap bit flipped, a descriptor or superblock count off by one. */
static void inject_group(struct txn_manager *t, const struct cand *c, const char *what)
{
	ext2_filsys fs = t->fs;
	unsigned char *p = c->e->data + c->off;
	uint64_t bit, nbits;
	switch (t->ckind) {
	case CK_BBITMAP:
	case CK_IBITMAP:
		if (t->ckind == CK_BBITMAP) {
			nbits = fs->super->s_blocks_per_group;
			uint64_t left = ext2fs_blocks_count(fs->super) - fs->super->s_first_data_block -
					c->aux * nbits;
			if (left < nbits)
				nbits = left;
		} else {
			nbits = fs->super->s_inodes_per_group;
		}
		bit = txn_random(t) % nbits;
		p[bit / 8] ^= (unsigned char)(1u << (bit % 8));
		fprintf(stderr, "recon-fuse: fault: %s: flipped bit %" PRIu64 " of group %" PRIu64 "\n",
			what, bit, c->aux);
		return;
	case CK_BGD_FREE_BLOCKS:
	case CK_BGD_FREE_INODES:
	case CK_BGD_USED_DIRS: {
		struct ext2_group_desc *gd = (struct ext2_group_desc *)p;
		if (t->ckind == CK_BGD_FREE_BLOCKS)
			gd->bg_free_blocks_count++;
		else if (t->ckind == CK_BGD_FREE_INODES)
			gd->bg_free_inodes_count++;
		else
			gd->bg_used_dirs_count++;
		fprintf(stderr, "recon-fuse: fault: %s: group %" PRIu64 " +1\n", what, c->aux);
		return;
	}
	default: {   /* CK_SB_FREE_BLOCKS */
		struct ext2_super_block *sb = (struct ext2_super_block *)p;
		sb->s_free_blocks_count++;
		fprintf(stderr, "recon-fuse: fault: %s +1\n", what);
		return;
	}
	}
}

/* One of an inode's direct block pointers made to point elsewhere: to a
 * block another inode uses, a free block or static metadata. */
static void inject_block_ptr(struct txn_manager *t, const struct cand *c, const char *what)
{
	ext2_filsys fs = t->fs;
	struct ext2_inode *in = (struct ext2_inode *)(c->e->data + c->off);
	int nz = 0, slot = 0;
	for (int k = 0; k < EXT2_NDIR_BLOCKS; k++)
		nz += in->i_block[k] != 0;
	int pick = (int)(txn_random(t) % (uint64_t)nz);
	for (int k = 0; k < EXT2_NDIR_BLOCKS; k++)
		if (in->i_block[k] && pick-- == 0) {
			slot = k;
			break;
		}
	blk64_t to = t->ckind == CK_PTR_USED ? block_in_use_elsewhere(t, (ext2_ino_t)c->aux)
		   : t->ckind == CK_PTR_FREE ? free_block(t)
		   : ext2fs_block_bitmap_loc(fs, 0);
	if (!to)
		to = ext2fs_blocks_count(fs->super) - 1;
	in->i_block[slot] = (uint32_t)to;
	fprintf(stderr, "recon-fuse: fault: %s: inode %" PRIu64 " i_block[%d] = %llu\n", what,
		c->aux, slot, (unsigned long long)to);
}

/* A field of an inode (links, size, blocks, dtime, mode) made wrong. */
static void inject_inode_field(struct txn_manager *t, const struct cand *c, const char *what)
{
	struct ext2_inode *in = (struct ext2_inode *)(c->e->data + c->off);
	switch (t->ckind) {
	case CK_LINKS:
		in->i_links_count++;
		break;
	case CK_SIZE:
		if (LINUX_S_ISDIR(in->i_mode))
			in->i_size += t->bs;
		else
			in->i_size = 0;
		break;
	case CK_IBLOCKS:
		in->i_blocks += t->bs / 512;
		break;
	case CK_DTIME:
		in->i_dtime = 1700000000u;
		break;
	default:   /* CK_MODE */
		in->i_mode = (uint16_t)((in->i_mode & 07777) |
					(LINUX_S_ISDIR(in->i_mode) ? LINUX_S_IFREG : LINUX_S_IFDIR));
		break;
	}
	fprintf(stderr, "recon-fuse: fault: %s: inode %" PRIu64 "\n", what, c->aux);
}

/* A directory entry's inode, record length, name length, type or ".."
 * made wrong. */
static void inject_dirent(struct txn_manager *t, const struct cand *c, const char *what)
{
	ext2_filsys fs = t->fs;
	struct ext2_dir_entry *de = (struct ext2_dir_entry *)(c->e->data + c->off);
	switch (t->ckind) {
	case CK_DIRENT_INODE: {
		ext2_ino_t free_ino = 0;
		if (ext2fs_new_inode(fs, EXT2_ROOT_INO, 0, NULL, &free_ino) || !free_ino)
			free_ino = fs->super->s_inodes_count;
		de->inode = free_ino;
		fprintf(stderr, "recon-fuse: fault: %s: block %" PRIu64 " entry at %u -> inode %u\n",
			what, c->e->blk, c->off, free_ino);
		return;
	}
	case CK_DIRENT_RECLEN:
		de->rec_len = (uint16_t)(de->rec_len + 2);
		fprintf(stderr, "recon-fuse: fault: %s: block %" PRIu64 " entry at %u\n", what,
			c->e->blk, c->off);
		return;
	case CK_DIRENT_NAMELEN: {
		unsigned nl = de->name_len & 0xff;
		unsigned want = de->rec_len - 8u + 1u;
		nl = want <= 255 ? want : nl + 1 <= 255 ? nl + 1 : nl - 1;
		de->name_len = (uint16_t)((de->name_len & 0xff00) | nl);
		fprintf(stderr, "recon-fuse: fault: %s: block %" PRIu64 " entry at %u\n", what,
			c->e->blk, c->off);
		return;
	}
	case CK_DIRENT_TYPE: {
		unsigned ft = (unsigned)(de->name_len >> 8);
		ft = ft == EXT2_FT_DIR ? EXT2_FT_REG_FILE : EXT2_FT_DIR;
		de->name_len = (uint16_t)((de->name_len & 0xff) | (ft << 8));
		fprintf(stderr, "recon-fuse: fault: %s: block %" PRIu64 " entry at %u\n", what,
			c->e->blk, c->off);
		return;
	}
	default:   /* CK_DOTDOT */
		de->inode = de->inode == EXT2_ROOT_INO ? EXT2_GOOD_OLD_FIRST_INO : EXT2_ROOT_INO;
		fprintf(stderr, "recon-fuse: fault: %s: block %" PRIu64 " .. -> %u\n", what,
			c->e->blk, de->inode);
		return;
	}
}

static void inject_at_site(struct txn_manager *t, const struct cand *c)
{
	unsigned char *p = c->e->data + c->off;
	const char *what = corrupt_names[t->ckind];
	uint64_t bit;
	switch (t->ckind) {
	case CK_BBITMAP:
	case CK_IBITMAP:
	case CK_BGD_FREE_BLOCKS:
	case CK_BGD_FREE_INODES:
	case CK_BGD_USED_DIRS:
	case CK_SB_FREE_BLOCKS:
		inject_group(t, c, what);
		return;
	case CK_PTR_USED:
	case CK_PTR_FREE:
	case CK_PTR_META:
		inject_block_ptr(t, c, what);
		return;
	case CK_IND_PTR: {
		uint32_t *s = (uint32_t *)p;
		*s = (uint32_t)ext2fs_inode_bitmap_loc(t->fs, 0);
		fprintf(stderr, "recon-fuse: fault: %s: block %" PRIu64 " slot %u = %u\n", what,
			c->e->blk, c->off / 4, *s);
		return;
	}
	case CK_LINKS:
	case CK_SIZE:
	case CK_IBLOCKS:
	case CK_DTIME:
	case CK_MODE:
		inject_inode_field(t, c, what);
		return;
	case CK_DIRENT_INODE:
	case CK_DIRENT_RECLEN:
	case CK_DIRENT_NAMELEN:
	case CK_DIRENT_TYPE:
	case CK_DOTDOT:
		inject_dirent(t, c, what);
		return;
	case CK_XATTR_REFCOUNT: {
		uint32_t *rc = (uint32_t *)p;
		(*rc)++;
		fprintf(stderr, "recon-fuse: fault: %s: block %" PRIu64 "\n", what, c->e->blk);
		return;
	}
	case CK_RANDOM:
		bit = txn_random(t) % ((uint64_t)t->bs * 8);
		c->e->data[bit / 8] ^= (unsigned char)(1u << (bit % 8));
		fprintf(stderr, "recon-fuse: fault: %s: block %" PRIu64 " bit %" PRIu64 "\n", what,
			c->e->blk, bit);
		return;
	case CK_NONE:
		return;
	}
}

void inject_corruption(struct txn_manager *t)
{
	if (t->ckind == CK_NONE || t->cseen >= t->cwhen)
		return;
	struct cands c = { 0 };
	injection_sites(t, &c);
	if (c.n > 0 && ++t->cseen == t->cwhen)
		inject_at_site(t, &c.v[txn_random(t) % c.n]);
	free(c.v);
}
