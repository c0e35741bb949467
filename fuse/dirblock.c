/*
 * fuse/dirblock.c - one directory block: walking its entries (validating
 * each), where they end (a metadata_csum leaf tail), the room an entry or a
 * block offers, and filling in an entry; and the readdir of a linear
 * directory, block by block; libext2fs's errors as -errno.  Shared by
 * dirindex.c (the in-memory index and its block edits) and the htree's
 * files (dxwrite.c, dxsplit.c, dxmake.c).
 *
 * Errors: 0 or -errno, as declared in dirindex.h.
 */
#include "dirindex.h"

#include <errno.h>
#include <string.h>

int dir_errno(errcode_t err)
{
	if (err == EXT2_ET_NO_MEMORY)
		return -ENOMEM;
	if (err == EXT2_ET_BLOCK_ALLOC_FAIL || err == EXT2_ET_DIR_NO_SPACE)
		return -ENOSPC;
	/* Plain errno values come through from the I/O manager. */
	if (err > 0 && err < 4096)
		return -(int)err;
	return -EIO;
}

/* Space an entry with a name of len bytes needs: 8-byte header + name,
 * rounded up to 4 bytes, as ext2 lays entries out. */
unsigned int dirent_size(size_t len)
{
	return (unsigned int)((8 + len + 3) & ~(size_t)3);
}

/* rec_len of the entry at off, or 0 if it cannot be decoded. */
unsigned int dirent_rec_len_at(ext2_filsys fs, char *buf, unsigned int off)
{
	unsigned int rec_len;

	if (ext2fs_get_rec_len(fs, (struct ext2_dir_entry *)(buf + off), &rec_len))
		return 0;
	return rec_len;
}

unsigned int dirblock_entries_end(ext2_filsys fs, char *buf)
{
	const struct ext2_dir_entry_tail *t;
	unsigned int top = fs->blocksize - sizeof(*t), off = 0, rec_len;

	if (!ext2fs_has_feature_metadata_csum(fs->super))
		return fs->blocksize;
	while (off < top) {
		rec_len = dirent_rec_len_at(fs, buf, off);
		if (rec_len < 8 || (rec_len & 3))
			return fs->blocksize;
		off += rec_len;
	}
	if (off != top)
		return fs->blocksize;
	t = (const struct ext2_dir_entry_tail *)(buf + top);
	if (t->det_reserved_zero1 == 0 && t->det_rec_len == sizeof(*t) &&
	    t->det_reserved_name_len == EXT2_DIR_NAME_LEN_CSUM)
		return top;
	return fs->blocksize;
}

void dirblock_cursor_init(struct dirblock_cursor *c, ext2_filsys fs, char *buf)
{
	c->fs = fs;
	c->buf = buf;
	c->off = 0;
	c->end = dirblock_entries_end(fs, buf);
}

/* 1 and *e filled, 0 at the end of the block, -EIO on a corrupt entry. */
int dirblock_cursor_next(struct dirblock_cursor *c, struct dirent_view *e)
{
	struct ext2_dir_entry *de;
	unsigned int rec_len;

	if (c->off >= c->end)
		return 0;
	if (c->off + 8 > c->end)
		return -EIO;
	de = (struct ext2_dir_entry *)(c->buf + c->off);
	if (ext2fs_get_rec_len(c->fs, de, &rec_len))
		return -EIO;
	if (rec_len < 8 || (rec_len & 3) || rec_len > c->end - c->off)
		return -EIO;
	e->off = c->off;
	e->rec_len = rec_len;
	e->de = de;
	e->ino = de->inode;
	if (ext2fs_has_feature_filetype(c->fs->super)) {
		e->name_len = de->name_len & 0xff;
		e->ftype = de->name_len >> 8;
	} else {
		/* Without the filetype feature name_len is 16 bits wide. */
		e->name_len = de->name_len;
		e->ftype = 0;
	}
	if (8 + e->name_len > rec_len)
		return -EIO;
	if (e->ino != 0 &&
	    (e->name_len == 0 || e->ino > c->fs->super->s_inodes_count))
		return -EIO;
	c->off += rec_len;
	return 1;
}

int dirblock_locate(ext2_filsys fs, char *buf, unsigned int off, const char *name, size_t len,
		    struct dirent_view *found, struct dirent_view *prev, bool *has_prev)
{
	struct dirblock_cursor c;
	struct dirent_view cur;
	int rc;

	*has_prev = false;
	dirblock_cursor_init(&c, fs, buf);
	while ((rc = dirblock_cursor_next(&c, &cur)) == 1) {
		if (cur.off == off) {
			if (cur.ino == 0 || cur.name_len != len || memcmp(cur.de->name, name, len))
				return -EIO;
			*found = cur;
			return 0;
		}
		if (cur.off > off)
			break;
		*prev = cur;
		*has_prev = true;
	}
	return rc < 0 ? rc : -EIO;
}

/* Largest entry size that fits into one existing entry's space. */
unsigned int dirent_room(const struct dirent_view *e)
{
	if (e->ino == 0)
		return e->rec_len;
	return e->rec_len - dirent_size(e->name_len);
}

/* Room under the smallest entry a name needs takes no name: none. */
static unsigned int usable_room(unsigned int room)
{
	return room >= dirent_size(1) ? room : 0;
}

int dirblock_room_from(ext2_filsys fs, char *buf, unsigned int from, struct block_room *r)
{
	struct dirblock_cursor c;
	struct dirent_view e;
	int rc;

	dirblock_cursor_init(&c, fs, buf);
	c.off = from;
	r->max = 0;
	r->first = c.end;
	while ((rc = dirblock_cursor_next(&c, &e)) == 1) {
		unsigned int room = usable_room(dirent_room(&e));

		if (room && r->first == c.end)
			r->first = e.off;
		if (room > r->max)
			r->max = room;
	}
	return rc;
}

bool dirblock_room_freed(struct block_room *r, const struct dirent_view *freed)
{
	unsigned int room = dirent_room(freed);

	/* (a removed entry's space alone takes a name: always true) */
	if (!usable_room(room))
		return false;
	if (room > r->max)
		r->max = room;
	if (freed->off < r->first)
		r->first = freed->off;
	return true;
}

int dirblock_insert(ext2_filsys fs, char *buf, struct block_room *r, const char *name, size_t len,
		    ext2_ino_t ino, int ftype, unsigned int *off)
{
	unsigned int need = dirent_size(len), passed = UINT32_MAX, at;
	struct dirblock_cursor c;
	struct dirent_view e;
	int rc;

	dirblock_cursor_init(&c, fs, buf);
	c.off = r->first;
	while ((rc = dirblock_cursor_next(&c, &e)) == 1) {
		struct ext2_dir_entry *de;
		unsigned int room = dirent_room(&e), rec_len;

		if (room < need) {
			if (usable_room(room) && passed == UINT32_MAX)
				passed = e.off;
			continue;
		}
		if (e.ino == 0) {
			/* Reuse an empty entry, keeping its whole rec_len. */
			de = e.de;
			rec_len = e.rec_len;
			*off = e.off;
		} else {
			/* Split: the old entry keeps its own size (no room
			 * left in it), the new one takes the rest. */
			unsigned int keep = dirent_size(e.name_len);

			if (ext2fs_set_rec_len(fs, keep, e.de))
				return -EIO;
			de = (struct ext2_dir_entry *)((char *)e.de + keep);
			rec_len = e.rec_len - keep;
			*off = e.off + keep;
		}
		dirent_fill(fs, de, name, len, ino, ftype);
		if (ext2fs_set_rec_len(fs, rec_len, de))
			return -EIO;
		/* Before the new entry (or the first roomy one the walk passed)
		 * no entry has room: the block's room is what follows it. */
		at = passed != UINT32_MAX ? passed : *off;
		return dirblock_room_from(fs, buf, at, r);
	}
	return rc < 0 ? rc : -ENOSPC;
}

void dirent_fill(ext2_filsys fs, struct ext2_dir_entry *de, const char *name,
		       size_t len, ext2_ino_t ino, int ftype)
{
	de->inode = ino;
	if (ext2fs_has_feature_filetype(fs->super))
		de->name_len = (__u16)(len | ((unsigned int)(ftype & 0xff) << 8));
	else
		de->name_len = (__u16)len;
	memcpy(de->name, name, len);
}


int dirblocks_readdir(ext2_filsys fs, ext2_ino_t dir, const blk64_t *pblk, uint32_t nblocks,
		      char *buf, uint64_t off, dindex_fill_fn fill, void *ctx)
{
	uint32_t lblk = (uint32_t)(off >> 32);
	uint32_t boff = (uint32_t)off;
	int rc;

	for (; lblk < nblocks; lblk++, boff = 0) {
		struct dirblock_cursor c;
		struct dirent_view e;

		if (ext2fs_read_dir_block4(fs, pblk[lblk], buf, 0, dir))
			return -EIO;
		dirblock_cursor_init(&c, fs, buf);
		while ((rc = dirblock_cursor_next(&c, &e)) == 1) {
			uint64_t next;

			/* Entries before the position were returned already (or
			 * were merged away); empty ones are not names. */
			if (e.off < boff || e.ino == 0)
				continue;
			if (e.off + e.rec_len >= c.end)
				next = (uint64_t)(lblk + 1) << 32;
			else
				next = ((uint64_t)lblk << 32) | (e.off + e.rec_len);
			if (fill(ctx, e.de->name, e.name_len, e.ino, e.ftype, next))
				return 0;
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}
