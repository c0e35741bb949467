/*
 * fuse/inline.c - reading inline data: files, symlinks and directories whose
 * bytes live in the inode (i_block, then the "system.data" attribute).
 * libext2fs finds the attribute; the layout of an inline directory is read
 * here.  Errors and threads as declared in inline.h.
 */
#include "inline.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The parent's inode number at the head of an inline directory. */
#define PARENT_BYTES 4u

/* Say once what is wrong with an inode (a listing retries the same
 * directories many times), then -EIO. */
static int malformed(ext2_ino_t ino, const char *what)
{
	static ext2_ino_t said[64];   /* under the caller's file-system lock */

	if (said[ino % 64] != ino)
		fprintf(stderr, "recon-fuse: inode %u: %s (run e2fsck on the image)\n", ino, what);
	said[ino % 64] = ino;
	return -EIO;
}

static int from_errcode(ext2_ino_t ino, errcode_t e, const char *what)
{
	if (e == EXT2_ET_NO_MEMORY)
		return -ENOMEM;
	return malformed(ino, what);
}

int inline_load(ext2_filsys fs, ext2_ino_t ino, const struct ext2_inode *in,
		char **buf, size_t *len)
{
	struct ext2_xattr_handle *h = NULL;
	void *val = NULL;
	size_t vlen = 0;
	errcode_t e;

	*buf = NULL;
	*len = 0;
	if (!(in->i_flags & EXT4_INLINE_DATA_FL))
		return malformed(ino, "inline data asked of an inode without it");
	e = ext2fs_xattrs_open(fs, ino, &h);
	if (!e)
		e = ext2fs_xattrs_read(h);
	if (!e) {
		e = ext2fs_xattr_get(h, "system.data", &val, &vlen);
		if (e == EXT2_ET_EA_KEY_NOT_FOUND) {
			/* the whole area fits i_block */
			e = 0;
			val = NULL;
			vlen = 0;
		}
	}
	if (h)
		ext2fs_xattrs_close(&h);
	if (e)
		return from_errcode(ino, e, "cannot read its inline data attribute");
	/* The attribute lives in the inode's extra space or, at most, in one
	 * attribute block: more than a block is not inline data. */
	if (vlen > fs->blocksize) {
		ext2fs_free_mem(&val);
		return malformed(ino, "inline data attribute larger than a block");
	}
	*buf = malloc(EXT4_MIN_INLINE_DATA_SIZE + vlen);
	if (!*buf) {
		ext2fs_free_mem(&val);
		return -ENOMEM;
	}
	memcpy(*buf, in->i_block, EXT4_MIN_INLINE_DATA_SIZE);
	if (vlen)
		memcpy(*buf + EXT4_MIN_INLINE_DATA_SIZE, val, vlen);
	ext2fs_free_mem(&val);
	*len = EXT4_MIN_INLINE_DATA_SIZE + vlen;
	return 0;
}

int inline_file_read(ext2_filsys fs, ext2_ino_t ino, const struct ext2_inode *in,
		     uint64_t off, size_t size, char *out)
{
	char *buf;
	size_t len, n = 0;
	int rc = inline_load(fs, ino, in, &buf, &len);

	if (rc)
		return rc;
	if (off < len)
		n = len - off < size ? len - off : size;
	if (n)
		memcpy(out, buf + off, n);
	memset(out + n, 0, size - n);
	free(buf);
	return 0;
}

/* One run of entries, [start, end) of the area: a rec_len chain that must
 * end exactly at end.  0, 1 when fn stopped the walk, or -errno (fn's own
 * included). */
static int walk_run(ext2_filsys fs, ext2_ino_t dir, const char *area, uint32_t start,
		    uint32_t end, inline_dirent_fn fn, void *ctx)
{
	bool filetype = ext2fs_has_feature_filetype(fs->super);
	uint32_t off = start;

	while (off < end) {
		struct ext2_dir_entry de;
		unsigned name_len;
		int ftype;

		if (end - off < 8)
			return malformed(dir, "inline directory entry cut off at the end of its run");
		memcpy(&de, area + off, 8);
		uint32_t rec_len = ext2fs_le16_to_cpu(de.rec_len);
		if (rec_len < 8 || (rec_len & 3) || rec_len > end - off)
			return malformed(dir, "inline directory entry with a bad record length");
		uint16_t nl = ext2fs_le16_to_cpu(de.name_len);
		name_len = filetype ? (nl & 0xff) : nl;
		ftype = filetype ? nl >> 8 : 0;
		ext2_ino_t ino = ext2fs_le32_to_cpu(de.inode);
		if (8 + name_len > rec_len)
			return malformed(dir, "inline directory entry name longer than its record");
		if (ino && (name_len == 0 || ino > fs->super->s_inodes_count))
			return malformed(dir, "inline directory entry with a bad inode number");
		if (ino) {
			int stop = fn(ctx, area + off + 8, name_len, ino, ftype, off, off + rec_len);
			if (stop)
				return stop < 0 ? stop : 1;
		}
		off += rec_len;
	}
	return 0;
}

int inline_dir_iterate(ext2_filsys fs, ext2_ino_t dir, const struct ext2_inode *in,
		       inline_dirent_fn fn, void *ctx)
{
	char *area;
	size_t len;
	uint32_t parent;
	int rc;

	if (!LINUX_S_ISDIR(in->i_mode))
		return -ENOTDIR;
	rc = inline_load(fs, dir, in, &area, &len);
	if (rc)
		return rc;
	memcpy(&parent, area, sizeof(parent));
	parent = ext2fs_le32_to_cpu(parent);
	if (parent == 0 || parent > fs->super->s_inodes_count) {
		rc = malformed(dir, "inline directory with a bad parent inode number");
		goto out;
	}
	int dtype = ext2fs_has_feature_filetype(fs->super) ? EXT2_FT_DIR : 0;
	rc = fn(ctx, ".", 1, dir, dtype, 0, 1);
	if (rc == 0)
		rc = fn(ctx, "..", 2, parent, dtype, 1, PARENT_BYTES);
	/* i_block's run, then system.data's: an entry never spans the two */
	if (rc == 0)
		rc = walk_run(fs, dir, area, PARENT_BYTES, EXT4_MIN_INLINE_DATA_SIZE, fn, ctx);
	if (rc == 0 && len > EXT4_MIN_INLINE_DATA_SIZE)
		rc = walk_run(fs, dir, area, EXT4_MIN_INLINE_DATA_SIZE, (uint32_t)len, fn, ctx);
	if (rc > 0)
		rc = 0;
out:
	free(area);
	return rc;
}

struct inline_rd {
	uint64_t from;
	dindex_fill_fn fill;
	void *ctx;
};

static int inline_rd_entry(void *vctx, const char *name, size_t len, ext2_ino_t ino,
			   int ftype, uint32_t pos, uint32_t next)
{
	struct inline_rd *c = vctx;

	if (pos < c->from)
		return 0;       /* returned already */
	return c->fill(c->ctx, name, len, ino, ftype, next) ? 1 : 0;
}

int inline_dir_readdir(ext2_filsys fs, ext2_ino_t dir, uint64_t off, dindex_fill_fn fill, void *ctx)
{
	struct inline_rd c = { .from = off, .fill = fill, .ctx = ctx };
	struct ext2_inode inode;
	errcode_t err = ext2fs_read_inode(fs, dir, &inode);

	if (err)    /* plain errno values come from the I/O manager */
		return err == EXT2_ET_NO_MEMORY ? -ENOMEM : err > 0 && err < 4096 ? -(int)err : -EIO;
	if (!(inode.i_flags & EXT4_INLINE_DATA_FL))
		return -EIO;    /* changed under an index that says inline */
	return inline_dir_iterate(fs, dir, &inode, inline_rd_entry, &c);
}
