/*
 * fuse/dxsplit.c - growing an htree the way the kernel's ext4 grows one: a
 * full leaf split by hash into itself and a new leaf, an index entry
 * inserted in hash order, a full index node split in two, a level added
 * under the root.  The blocks are read, written and added through
 * dirindex.c (struct dx_blocks), which allocates them, writes them with
 * ext2fs_write_dir_block4 (it sets the leaf and dx tail checksums) and
 * keeps its in-memory index exact.
 *
 * Layout facts (the kernel's ext4 documentation, e2fsck pass 2): an index
 * block's dx_countlimit sits at offset 32 in the root, 8 in a node, and
 * doubles as the hash slot of entry 0; each entry is (hash, block), 8
 * bytes, hashes ascending; with metadata_csum the last 8 bytes of an index
 * block are its dx tail, so limit is one entry less.  A hash in an index
 * entry has bit 0 clear unless the entries of equal hash continue from the
 * block before (names' major hashes always have bit 0 clear).
 *
 * Errors: 0 or -errno, as declared in dirindex.h.  Threads: the caller
 * holds the file-system lock.
 */
#include "dirindex.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static uint16_t ld16(const char *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static void st16(char *p, uint16_t v) { memcpy(p, &v, 2); }
static uint32_t ld32(const char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static void st32(char *p, uint32_t v) { memcpy(p, &v, 4); }

/* One named entry of the leaf being split. */
struct leaf_ent {
	uint32_t hash;
	unsigned int off, size;         /* where it is, the bytes it needs */
	unsigned int rec_len;           /* the bytes it holds (the split weighs these) */
};

/*
 * Sort ents by hash into the order the kernel's do_split sees them in, equal
 * hashes included: it lists a leaf's entries last to first (dx_make_map
 * fills its map from the end) and sorts that list by hash alone, with a comb
 * sort (gap shrunk by 10/13 while over 2, a gap of 9 or 10 made 11) and
 * then exchange passes until one swaps nothing.  Neither step is stable, so
 * which of several entries of equal hash land above a split, and their order
 * in the new leaf, follow from this exact sequence of swaps.
 */
static void leaf_ent_sort(struct leaf_ent *ents, size_t n)
{
	size_t gap = n, i;
	bool swapped;

	for (i = 0; i < n / 2; i++) {           /* block order reversed */
		struct leaf_ent t = ents[i];

		ents[i] = ents[n - 1 - i];
		ents[n - 1 - i] = t;
	}
	while (gap > 2) {
		gap = gap * 10 / 13;
		if (gap == 9 || gap == 10)
			gap = 11;
		/* pairs (hi - gap, hi), hi walked down from the top */
		for (size_t hi = n - 1; hi >= gap; hi--) {
			if (ents[hi].hash < ents[hi - gap].hash) {
				struct leaf_ent t = ents[hi];

				ents[hi] = ents[hi - gap];
				ents[hi - gap] = t;
			}
		}
	}
	do {
		swapped = false;
		for (i = n; i-- > 1;) {         /* neighbours, from the top down */
			if (ents[i].hash < ents[i - 1].hash) {
				struct leaf_ent t = ents[i];

				ents[i] = ents[i - 1];
				ents[i - 1] = t;
				swapped = true;
			}
		}
	} while (swapped);
}

static int leaf_ent_off_cmp(const void *a, const void *b)
{
	const struct leaf_ent *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* Where a leaf's entries may end: before the dirent tail under metadata_csum. */
static unsigned int leaf_end(ext2_filsys fs)
{
	unsigned int end = fs->blocksize;

	if (ext2fs_has_feature_metadata_csum(fs->super))
		end -= sizeof(struct ext2_dir_entry_tail);
	return end;
}

/* Lay the entries ents[0..n) of src out packed into dst (zeroed first), the
 * last one taking the rest of the block; with metadata_csum a tail. */
static int leaf_pack(ext2_filsys fs, const char *src, const struct leaf_ent *ents, size_t n, char *dst)
{
	unsigned int end = leaf_end(fs), pos = 0;

	memset(dst, 0, fs->blocksize);
	if (end != fs->blocksize)
		ext2fs_initialize_dirent_tail(fs, EXT2_DIRENT_TAIL(dst, fs->blocksize));
	for (size_t i = 0; i < n; i++) {
		struct ext2_dir_entry *de = (struct ext2_dir_entry *)(dst + pos);
		unsigned int rec_len = i + 1 < n ? ents[i].size : end - pos;

		memcpy(de, src + ents[i].off, ents[i].size);
		if (ext2fs_set_rec_len(fs, rec_len, de))
			return -EIO;
		pos += ents[i].size;
	}
	return 0;
}

/* The named entries of blk with their hashes, sorted by hash as the kernel
 * sorts them; *n of them. */
static int leaf_collect(ext2_filsys fs, int version, char *blk, struct leaf_ent **out, size_t *n)
{
	struct leaf_ent *ents = malloc(fs->blocksize / 8 * sizeof(*ents));
	struct dirblock_cursor c;
	struct dirent_view e;
	uint32_t minor;
	int rc;

	if (!ents)
		return -ENOMEM;
	*n = 0;
	dirblock_cursor_init(&c, fs, blk);
	while ((rc = dirblock_cursor_next(&c, &e)) == 1) {
		if (e.ino == 0 || e.name_len == 0)     /* do_split weighs named entries only */
			continue;
		ents[*n].off = e.off;
		ents[*n].size = dirent_size(e.name_len);
		ents[*n].rec_len = e.rec_len;
		if (dx_name_hash(fs, version, e.de->name, e.name_len, &ents[*n].hash, &minor)) {
			rc = -EIO;
			break;
		}
		++*n;
	}
	if (rc < 0) {
		free(ents);
		return rc;
	}
	leaf_ent_sort(ents, *n);
	*out = ents;
	return 0;
}

int dx_split_leaf(ext2_filsys fs, int version, char *src, char *lo, char *hi, uint32_t *split_hash)
{
	struct leaf_ent *ents;
	size_t n, split, move = 0;
	unsigned int moved_bytes = 0;
	char *copy;
	long i;
	int rc;

	rc = leaf_collect(fs, version, src, &ents, &n);
	if (rc)
		return rc;
	if (n < 2) {
		free(ents);
		return -EAGAIN; /* a block one name fills: splitting cannot help */
	}
	/* As the kernel's do_split: from the top hash down, move entries while
	 * the moved ones, weighed by their rec_len (slack included), stay within
	 * half a block, an entry counting as moved when no more than half of it
	 * would pass that mark.  Where that stops, the lower entries stay, even
	 * when it stops at the lowest (as current kernels do; older ones halved
	 * by count there, which could leave the new name no room); only when
	 * every entry would move is the leaf halved by count. */
	for (i = (long)n - 1; i >= 0; i--) {
		if (moved_bytes + ents[i].rec_len / 2 > fs->blocksize / 2)
			break;
		moved_bytes += ents[i].rec_len;
		move++;
	}
	split = i >= 0 ? n - move : n / 2;
	if (split == 0 || split >= n) {  /* cannot be: the top entry (a block at most) moves, n > 1 */
		free(ents);
		return -EIO;
	}
	*split_hash = ents[split].hash | (ents[split].hash == ents[split - 1].hash ? 1 : 0);
	/* the kernel moves the upper entries in hash order and packs the
	 * others where they were: in block order */
	qsort(ents, split, sizeof(*ents), leaf_ent_off_cmp);
	copy = malloc(fs->blocksize);
	if (!copy) {
		free(ents);
		return -ENOMEM;
	}
	memcpy(copy, src, fs->blocksize);      /* src may be lo */
	rc = leaf_pack(fs, copy, ents + split, n - split, hi);
	if (!rc)
		rc = leaf_pack(fs, copy, ents, split, lo);
	free(copy);
	free(ents);
	return rc;
}

/* Insert the index entry (hash, lblk) after entry f->at of the index block
 * in buf (which has room). */
static void insert_entry(char *buf, const struct dx_frame *f, uint32_t hash, uint32_t lblk)
{
	char *ents = buf + f->off;
	uint16_t count = ld16(ents + 2);
	unsigned int at = f->at + 1;

	memmove(ents + 8 * (at + 1), ents + 8 * at, 8 * (size_t)(count - at));
	st32(ents + 8 * at, hash);
	st32(ents + 8 * at + 4, lblk);
	st16(ents + 2, (uint16_t)(count + 1));
}

/* An empty index node in fresh: one empty entry over the whole block, then
 * dx_countlimit with the node's limit and count entries. */
static void node_init(ext2_filsys fs, char *fresh, uint16_t count)
{
	struct ext2_dir_entry *de = (struct ext2_dir_entry *)fresh;
	unsigned int limit = (fs->blocksize - 8) / 8;

	if (ext2fs_has_feature_metadata_csum(fs->super))
		limit--;
	memset(fresh, 0, fs->blocksize);
	(void)ext2fs_set_rec_len(fs, fs->blocksize, de);     /* cannot fail: a block's size */
	st16(fresh + 8, (uint16_t)limit);
	st16(fresh + 10, count);
}

/* Split the full index node in node (frame f): its upper half of entries
 * moves into fresh, laid out here as a node; *split_hash the first moved
 * entry's hash. */
static void split_node(ext2_filsys fs, char *node, const struct dx_frame *f, char *fresh,
		       uint32_t *split_hash)
{
	char *ents = node + f->off;
	uint16_t count = ld16(ents + 2), keep = count / 2;

	node_init(fs, fresh, (uint16_t)(count - keep));
	*split_hash = ld32(ents + 8 * keep);
	/* the moved first entry's hash slot is the new node's countlimit */
	st32(fresh + 12, ld32(ents + 8 * keep + 4));
	memcpy(fresh + 16, ents + 8 * (keep + 1), 8 * (size_t)(count - keep - 1));
	memset(ents + 8 * keep, 0, 8 * (size_t)(count - keep));
	st16(ents + 2, keep);
}

/* The root's entries (root, frame f) into fresh, laid out here as a node. */
static void level_node(ext2_filsys fs, const char *root, const struct dx_frame *f, char *fresh)
{
	const char *ents = root + f->off;
	uint16_t count = ld16(ents + 2);

	node_init(fs, fresh, count);
	memcpy(fresh + 12, ents + 4, 8 * (size_t)count - 4);
}

/* The root keeps one entry, to the node at lblk, one level above it. */
static void level_root(char *root, const struct dx_frame *f, uint32_t lblk)
{
	struct ext2_dx_root_info *ri = (struct ext2_dx_root_info *)(root + 24);
	char *ents = root + f->off;
	uint16_t count = ld16(ents + 2);

	memset(ents + 8, 0, 8 * (size_t)(count - 1));
	st16(ents + 2, 1);
	st32(ents + 4, lblk);
	ri->indirect_levels++;
}

/* The leaf on path p is full, its parent has room. */
static int grow_leaf(ext2_filsys fs, const struct dx_blocks *b, const struct dx_path *p, char *scratch,
		     struct dx_split *split)
{
	const struct dx_frame *parent = &p->f[p->levels];
	char *leaf = scratch, *fresh = scratch + fs->blocksize;
	uint32_t hash, lblk;
	int rc;

	rc = b->read(b->ctx, p->leaf, leaf);
	if (!rc)
		rc = dx_split_leaf(fs, p->version, leaf, leaf, fresh, &hash);
	if (!rc)
		rc = b->append(b->ctx, fresh, &lblk);
	if (!rc)
		rc = b->write(b->ctx, p->leaf, leaf);
	if (!rc)
		rc = b->moved(b->ctx, p->leaf, leaf);
	if (!rc)
		rc = b->moved(b->ctx, lblk, fresh);
	if (!rc)
		rc = b->read(b->ctx, parent->lblk, leaf);
	if (rc)
		return rc;
	insert_entry(leaf, parent, hash, lblk);
	rc = b->write(b->ctx, parent->lblk, leaf);
	if (!rc)
		*split = (struct dx_split){ .leaf = true, .lo = p->leaf, .hi = lblk, .hash = hash };
	return rc;
}

int dx_grow(ext2_filsys fs, const struct dx_blocks *b, const struct dx_path *p, char *scratch,
	    struct dx_split *split)
{
	unsigned int max_levels = ext2fs_has_feature_largedir(fs->super) ? 2 : 1;
	char *node = scratch, *fresh = scratch + fs->blocksize;
	unsigned int i = p->levels;
	uint32_t hash, lblk;
	int rc;

	*split = (struct dx_split){ .leaf = false };
	if (p->f[i].count < p->f[i].limit)
		return grow_leaf(fs, b, p, scratch, split);
	while (i > 0 && p->f[i - 1].count >= p->f[i - 1].limit)
		i--;
	if (i == 0 && p->levels >= max_levels)
		return -EAGAIN;
	rc = b->read(b->ctx, p->f[i].lblk, node);
	if (rc)
		return rc;
	if (i == 0) {
		level_node(fs, node, &p->f[0], fresh);
		rc = b->append(b->ctx, fresh, &lblk);
		if (rc)
			return rc;
		level_root(node, &p->f[0], lblk);
		return b->write(b->ctx, 0, node);
	}
	split_node(fs, node, &p->f[i], fresh, &hash);
	rc = b->append(b->ctx, fresh, &lblk);
	if (!rc)
		rc = b->write(b->ctx, p->f[i].lblk, node);
	if (!rc)
		rc = b->read(b->ctx, p->f[i - 1].lblk, node);
	if (rc)
		return rc;
	insert_entry(node, &p->f[i - 1], hash, lblk);
	return b->write(b->ctx, p->f[i - 1].lblk, node);
}
