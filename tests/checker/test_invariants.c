/*
 * tests/checker/test_invariants.c - one test per invariant of checker/.
 *
 *   test_invariants INV_ID   break the invariant (debugfs edits or raw block
 *                            edits on a copy of a small mke2fs -t ext3 image,
 *                            or -t ext4 for ext4 rows, 1 KiB and 4 KiB blocks)
 *                            and expect a rejection naming INV_ID, of the
 *                            transaction or (T_SCAN) of a scan of the state
 *                            it leaves; then run a chain of legitimate
 *                            libext2fs (debugfs) transitions, each checked
 *                            against the advanced state, and expect approval.
 *   test_invariants --features: superblock feature and revision changes on
 *                            images without ext_attr (mke2fs -O ^ext_attr,
 *                            mke2fs -r 0): the first xattr's are approved,
 *                            others rejected.
 *   test_invariants --orphan: a new linked inode on the orphan list (its
 *                            i_dtime the chain's next) is approved, the
 *                            same off the list rejected.
 *   test_invariants --format checks the record grammar.
 *   test_invariants --list-cases prints the invariant of each breaking case
 *                            (tests/checker/invariant-table.sh).
 *
 * The edits use libext2fs and debugfs only to make images; the decision is
 * the checker's alone.  Exit 0 pass, 1 fail, 77 skip (no mke2fs/debugfs).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ext2fs/ext2fs.h>

#include "checker.h"
#include "test_util.h"

static char dir[64];
static int failures;

#define FAIL(...) do { fprintf(stderr, "FAIL: " __VA_ARGS__); fputc('\n', stderr); failures++; } while (0)

static int run(const char *cmd)
{
	int r = system(cmd);
	return WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

/* Check after against the state in fs; split differing blocks into 1 KiB
 * writes when `partial` (exercises overlaying on the approved contents). */
static struct chk_verdict *check_pair(struct chk_fs *fs, const uint8_t *a, const uint8_t *b, size_t n,
				      bool partial)
{
	uint32_t bs = chk_block_size(fs);
	size_t cap = 64, nw = 0;
	struct chk_write *w = malloc(cap * sizeof(*w));
	for (size_t off = 0; off < n; off += bs) {
		if (!memcmp(a + off, b + off, bs))
			continue;
		uint32_t step = partial ? 1024 : bs;
		for (uint32_t k = 0; k < bs; k += step) {
			if (partial && !memcmp(a + off + k, b + off + k, step))
				continue;
			if (nw == cap)
				w = realloc(w, (cap *= 2) * sizeof(*w));
			w[nw++] = (struct chk_write){ off + k, step, b + off + k };
		}
	}
	struct chk_verdict *v = NULL;
	int r = chk_check(fs, w, nw, &v);
	free(w);
	if (r) {
		FAIL("chk_check: %s", strerror(-r));
		return NULL;
	}
	return v;
}

static bool has_violation(const struct chk_verdict *v, const char *id)
{
	for (size_t i = 0; i < chk_verdict_nviolations(v); i++)
		if (!strcmp(chk_verdict_violation(v, i)->inv->id, id))
			return true;
	return false;
}

static void dump(const struct chk_verdict *v)
{
	char buf[512];
	for (size_t i = 0; i < chk_verdict_nviolations(v); i++) {
		const struct chk_violation *x = chk_verdict_violation(v, i);
		fprintf(stderr, "   %s: %s\n", x->inv->id, x->detail);
	}
	for (size_t i = 0; i < chk_verdict_nrecords(v) && i < 40; i++) {
		chk_record_format(chk_verdict_record(v, i), buf, sizeof(buf));
		fprintf(stderr, "     %s\n", buf);
	}
}

/* ------------------------------------------------------------ images */

static const char *base_cmds =
	"mkdir d\nmkdir d/sub\nmkdir h\nwrite /etc/services d/f\nwrite /etc/hostname d/g\n"
	"symlink sl /target/x\nmknod fifo p\nea_set -f %s/big.txt d/g user.big\ncd h\n";

/* ext4: mke2fs -t ext4 (extents, 64bit, flex_bg, huge_file, metadata_csum)
 * with orphan_file, its journal with checksums (v3, as the kernel's), and
 * d/frag, a file of seven extents: a tree block */
static const char *ext4_cmds = "jo -c\njc\ncd /\nwrite %s/r40k d/frag\npunch d/frag 1 1\npunch d/frag 3 3\npunch d/frag 5 5\n"
			       "punch d/frag 7 7\npunch d/frag 9 9\npunch d/frag 11 11\ncd h\n";

static int make_base(uint32_t bs, char *path, bool ext4)
{
	char cmd[4096];
	snprintf(path, 512, "%s/base%u%s.img", dir, bs, ext4 ? "-ext4" : "");
	snprintf(cmd, sizeof(cmd), "head -c 600 /dev/urandom | base64 -w0 > %s/big.txt", dir);
	if (run(cmd))
		return -1;
	char cf[512];
	snprintf(cf, sizeof(cf), "%s/cmds", dir);
	FILE *f = fopen(cf, "w");
	if (!f)
		return -1;
	fprintf(f, base_cmds, dir);
	if (ext4)
		fprintf(f, ext4_cmds, dir);
	int nent = bs == 1024 ? 120 : 200;
	for (int i = 0; i < nent; i++)
		fprintf(f, "mknod entry_with_a_rather_long_name_number_%d p\n", i);
	fclose(f);
	snprintf(cmd, sizeof(cmd),
		 "head -c 40000 /dev/urandom > %s/r40k && "
		 "mke2fs -q -F %s -b %u -N 256 %s 16M >/dev/null 2>&1 && debugfs -w -f %s %s >/dev/null 2>&1"
		 " && { e2fsck -fyD %s >/dev/null 2>&1; [ $? -le 1 ]; } && e2fsck -fn %s >/dev/null 2>&1",
		 dir, ext4 ? "-t ext4 -O orphan_file" : "-t ext3", bs, path, cf, path, path, path);
	return run(cmd) ? -1 : 0;
}

static int debugfs_cmds(const char *img, const char *cmds)
{
	char cf[512], cmd[4096];
	snprintf(cf, sizeof(cf), "%s/edit", dir);
	FILE *f = fopen(cf, "w");
	if (!f)
		return -1;
	fputs(cmds, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "debugfs -w -f %s %s >/dev/null 2>&1", cf, img);
	return run(cmd);
}

/* ------------------------------------------------------------ raw edits */

enum raw {
	R_NONE, R_BACKUP_SB, R_RGDT, R_PADDING, R_FTYPE, R_TILING, R_NAME, R_UNIQUE, R_DOT, R_DOTDOT,
	R_XREF, R_XMAGIC, R_HINFO, R_HVER0, R_HVER9, R_HDEPTH, R_HDEPTH2, R_HCOUNT, R_HLIMIT, R_HORDER,
	R_HBLK0, R_HBLKBIG, R_HDUP, R_HRANGE, R_ZERO_BOOT, R_LOOP, R_JSB_BS, R_JSB_V1,
	/* ext4: one checksum flipped, one extent broken, an orphan listed */
	R_CSUM_SB, R_CSUM_BGD, R_CSUM_BITMAP, R_CSUM_INODE, R_CSUM_EXTENT, R_CSUM_DIR, R_CSUM_XATTR,
	R_EXT_LEN0, R_ORPHAN_ENTRY, R_EXT_MOVE, R_EXT_DUP, R_JSB_CSUM,
	/* orphan-file slots, the block's checksum right: a free inode, a
	 * file twice, a file (with ORPHAN_PRESENT left clear) */
	R_OFILE_FREE, R_OFILE_TWICE, R_OFILE_FILE
};

/* what the edits need to know of the base image (get_facts) */
struct facts {
	unsigned f0, f12, fi, gi, subi, it, bb, freeblk, freeino, symi, fifoi, di;
	unsigned iun;              /* bg_itable_unused hiding all but group 0's first 3 inodes */
	unsigned unusedi;          /* an inode past group 0's initialised ones (ext4) */
	unsigned etb, orphan_blk;  /* ext4: d/frag's tree block, the orphan file's first block */
};
static unsigned facts_dir_ino(const struct facts *x);

static int with_fs(const char *img, ext2_filsys *fs)
{
	return ext2fs_open(img, EXT2_FLAG_RW, 0, 0, unix_io_manager, fs) ? -1 : 0;
}

static int inode_of(ext2_filsys fs, const char *path, ext2_ino_t *ino, struct ext2_inode *in)
{
	if (ext2fs_namei(fs, EXT2_ROOT_INO, EXT2_ROOT_INO, path, ino))
		return -1;
	return ext2fs_read_inode(fs, *ino, in) ? -1 : 0;
}

/* find the entry `name` in dir's block 0; returns its offset or -1 */
static int find_entry(ext2_filsys fs, uint8_t *blk, const char *name)
{
	for (unsigned off = 0; off < fs->blocksize;) {
		struct ext2_dir_entry_2 *e = (void *)(blk + off);
		if (e->rec_len < 8)
			return -1;
		if (e->inode && e->name_len == strlen(name) && !memcmp(e->name, name, e->name_len))
			return (int)off;
		off += e->rec_len;
	}
	return -1;
}

/* The ext4 edits of raw_edit: block blk (set here) is read into b and
 * edited; 0, or -1 when the image lacks what the edit needs. */
static int raw_edit_ext4(ext2_filsys fs, enum raw what, const struct facts *x, uint8_t *b, blk_t *blkp)
{
	ext2_ino_t ino;
	struct ext2_inode in;
	blk_t blk = 0;
	blk64_t iblk0 = 0;
	int r = -1;
	switch (what) {
	case R_CSUM_SB:
		blk = 1024 / fs->blocksize;
		if (io_channel_read_blk(fs->io, blk, 1, b))
			break;
		b[(fs->blocksize == 1024 ? 0 : 1024) + 0x3FC] ^= 0x5a;
		r = 0;
		break;
	case R_CSUM_BGD: case R_CSUM_BITMAP:
		blk = fs->super->s_first_data_block + 1;
		if (io_channel_read_blk(fs->io, blk, 1, b))
			break;
		b[what == R_CSUM_BGD ? 0x1E : 0x18] ^= 0x5a;   /* bg_checksum, bg_block_bitmap_csum_lo */
		r = 0;
		break;
	case R_CSUM_INODE: case R_EXT_LEN0: case R_EXT_MOVE: case R_EXT_DUP: {
		blk64_t iblk;
		if (inode_of(fs, what == R_EXT_DUP ? "d/g" : "d/f", &ino, &in))
			break;
		dgrp_t g = (ino - 1) / fs->super->s_inodes_per_group;
		unsigned off = ((ino - 1) % fs->super->s_inodes_per_group) * EXT2_INODE_SIZE(fs->super);
		iblk = ext2fs_inode_table_loc(fs, g) + off / fs->blocksize;
		blk = (blk_t)iblk;
		if (io_channel_read_blk(fs->io, blk, 1, b))
			break;
		uint8_t *raw = b + off % fs->blocksize;
		uint32_t start = what == R_EXT_MOVE ? x->freeblk : x->f0;
		if (what == R_CSUM_INODE)
			raw[0x7C] ^= 0x5a;                      /* l_i_checksum_lo */
		else if (what == R_EXT_LEN0)
			memset(raw + 0x28 + 12 + 4, 0, 2);      /* the first extent's length */
		else {                                          /* its start: a free block, or d/f's */
			uint16_t one = 1;
			memcpy(raw + 0x28 + 12 + 8, &start, 4);
			if (what == R_EXT_MOVE)
				memcpy(raw + 0x28 + 12 + 4, &one, 2);
		}
		r = 0;
		break;
	}
	case R_CSUM_EXTENT:
		blk = x->etb;
		if (!blk || io_channel_read_blk(fs->io, blk, 1, b))
			break;
		b[12 + 12 * 20] ^= 0x5a;                        /* an unused entry slot: the checksum only */
		r = 0;
		break;
	case R_CSUM_DIR:
		if (inode_of(fs, "d", &ino, &in) || ext2fs_bmap2(fs, ino, &in, NULL, 0, 0, NULL, &iblk0))
			break;
		blk = (blk_t)iblk0;
		if (io_channel_read_blk(fs->io, blk, 1, b))
			break;
		b[fs->blocksize - 1] ^= 0x5a;                   /* the leaf tail's checksum */
		r = 0;
		break;
	case R_CSUM_XATTR:
		if (inode_of(fs, "d/g", &ino, &in) || !in.i_file_acl)
			break;
		blk = in.i_file_acl;
		if (io_channel_read_blk(fs->io, blk, 1, b))
			break;
		b[0x10] ^= 0x5a;                                /* h_checksum */
		r = 0;
		break;
	case R_ORPHAN_ENTRY:
		blk = x->orphan_blk;
		if (!blk || io_channel_read_blk(fs->io, blk, 1, b))
			break;
		b[0] = 12;                                      /* lists inode 12 */
		r = 0;
		break;
	case R_OFILE_FREE: case R_OFILE_TWICE: case R_OFILE_FILE: {
		blk = x->orphan_blk;
		if (!blk || io_channel_read_blk(fs->io, blk, 1, b))
			break;
		uint32_t *slot = (uint32_t *)b;
		slot[0] = ext2fs_cpu_to_le32(what == R_OFILE_FREE ? x->freeino : x->fi);
		if (what == R_OFILE_TWICE)
			slot[5] = slot[0];
		r = ext2fs_orphan_file_block_csum_set(fs, fs->super->s_orphan_file_inum, blk, (char *)b) ? -1 : 0;
		break;
	}
	default:
		break;
	}
	*blkp = blk;
	return r;
}

static int raw_edit(const char *img, enum raw what, const struct facts *x)
{
	ext2_filsys fs;
	if (what == R_NONE)
		return 0;
	if (with_fs(img, &fs))
		return -1;
	uint8_t *b = malloc(fs->blocksize);
	ext2_ino_t ino;
	struct ext2_inode in;
	blk_t blk = 0;
	int off, r = -1;
	switch (what) {
	case R_BACKUP_SB:
		blk = fs->super->s_first_data_block + fs->super->s_blocks_per_group;
		if (io_channel_read_blk(fs->io, blk, 1, b))
			break;
		((struct ext2_super_block *)(b + (blk == 0 ? 1024 : 0)))->s_blocks_per_group ^= 8;
		r = 0;
		break;
	case R_RGDT:
		blk = fs->super->s_first_data_block + 1 + fs->desc_blocks;
		if (io_channel_read_blk(fs->io, blk, 1, b))
			break;
		b[100] ^= 0x40;
		r = 0;
		break;
	case R_PADDING:
		blk = ext2fs_block_bitmap_loc(fs, fs->group_desc_count - 1);
		if (io_channel_read_blk(fs->io, blk, 1, b))
			break;
		b[fs->blocksize - 1] &= 0x7f;
		r = 0;
		break;
	case R_FTYPE: case R_TILING: case R_NAME: case R_UNIQUE: case R_DOT:
		if (inode_of(fs, "d", &ino, &in))
			break;
		blk = in.i_block[0];
		if (io_channel_read_blk(fs->io, blk, 1, b))
			break;
		off = find_entry(fs, b, what == R_DOT ? "." : what == R_NAME ? "f" : "g");
		if (off < 0)
			break;
		{
			struct ext2_dir_entry_2 *e = (void *)(b + off);
			if (what == R_FTYPE) e->file_type = EXT2_FT_DIR;
			if (what == R_TILING) e->rec_len = 10;
			if (what == R_NAME) e->name[0] = '/';
			if (what == R_UNIQUE) e->name[0] = 'f';
			if (what == R_DOT) e->inode = EXT2_ROOT_INO;
		}
		r = 0;
		break;
	case R_DOTDOT:
		if (inode_of(fs, "d/sub", &ino, &in))
			break;
		blk = in.i_block[0];
		if (io_channel_read_blk(fs->io, blk, 1, b))
			break;
		off = find_entry(fs, b, "..");
		if (off < 0)
			break;
		((struct ext2_dir_entry_2 *)(b + off))->inode = EXT2_ROOT_INO;
		r = 0;
		break;
	case R_XREF: case R_XMAGIC:
		if (inode_of(fs, "d/g", &ino, &in) || !in.i_file_acl)
			break;
		blk = in.i_file_acl;
		if (io_channel_read_blk(fs->io, blk, 1, b))
			break;
		if (what == R_XREF)
			((struct ext2_ext_attr_header *)b)->h_refcount = 3;
		else
			((struct ext2_ext_attr_header *)b)->h_magic = 0x1234;
		r = 0;
		break;
	case R_HINFO: case R_HVER0: case R_HVER9: case R_HDEPTH: case R_HDEPTH2: case R_HCOUNT:
	case R_HLIMIT: case R_HORDER: case R_HBLK0: case R_HBLKBIG: case R_HDUP: case R_HRANGE:
		if (inode_of(fs, "h", &ino, &in) || !(in.i_flags & EXT2_INDEX_FL))
			break;
		blk = in.i_block[0];
		if (io_channel_read_blk(fs->io, blk, 1, b))
			break;
		{
			struct ext2_dx_root_info *ri = (void *)(b + 24);
			struct ext2_dx_countlimit *cl = (void *)(b + 32);
			struct ext2_dx_entry *e = (void *)(b + 32);
			unsigned count = cl->count;
			if (ri->indirect_levels != 0 || ri->hash_version != fs->super->s_def_hash_version || count < 2)
				break;   /* the edits below assume a one-level index in the default hash */
			if ((what == R_HORDER || what == R_HDUP) && count < 3)
				break;
			switch (what) {
			case R_HINFO:   ri->info_length = 4; break;
			case R_HVER0:   ri->hash_version = ri->hash_version == 0 ? 2 : 0; break;
			case R_HVER9:   ri->hash_version = 9; break;
			case R_HDEPTH:  ri->indirect_levels = 1; break;
			case R_HDEPTH2: ri->indirect_levels = 2; break;
			case R_HCOUNT:  cl->count = 0; break;
			case R_HLIMIT:  cl->limit -= 1; break;
			case R_HORDER: {
				uint32_t h = e[1].hash;
				e[1].hash = e[2].hash;
				e[2].hash = h;
				break;
			}
			case R_HBLK0:   e[1].block = 0; break;
			case R_HBLKBIG: e[1].block = (uint32_t)(in.i_size / fs->blocksize) + 5; break;
			case R_HDUP:    e[2].block = e[1].block; break;
			case R_HRANGE:  e[1].hash = ((count > 2 ? e[2].hash : 0xfffffff0u) & ~1u) - 2; break;
			default: break;
			}
		}
		r = 0;
		break;
	case R_LOOP:           /* d's '..' names d/sub: d becomes its own ancestor */
		ino = facts_dir_ino(x);
		if (ext2fs_read_inode(fs, ino, &in))
			break;
		blk = in.i_block[0];
		if (io_channel_read_blk(fs->io, blk, 1, b))
			break;
		off = find_entry(fs, b, "..");
		if (off < 0 || inode_of(fs, "d/sub", &ino, &in) == 0)
			break;         /* d must be unlinked from / by the debugfs part */
		{
			struct ext2_dir_entry_2 *dd = (void *)(b + off), *dot = (void *)b;
			ext2_ino_t sub;
			/* d/sub is found through d's own block: scan it for "sub" */
			int so = find_entry(fs, b, "sub");
			if (so < 0)
				break;
			sub = ((struct ext2_dir_entry_2 *)(b + so))->inode;
			(void)dot;
			dd->inode = sub;
		}
		r = 0;
		break;
	case R_JSB_BS: case R_JSB_V1: case R_JSB_CSUM:  /* the journal superblock is big endian */
		{
			blk64_t j0 = 0;   /* through its map: an extent tree on ext4 */
			if (ext2fs_bmap2(fs, fs->super->s_journal_inum, NULL, NULL, 0, 0, NULL, &j0))
				break;
			blk = (blk_t)j0;
		}
		if (!blk || io_channel_read_blk(fs->io, blk, 1, b))
			break;
		if (what == R_JSB_CSUM)
			b[0x100] ^= 0x5a;               /* s_users[0]: under the checksum only */
		else if (what == R_JSB_BS)
			b[14] ^= 0x08;                  /* s_blocksize */
		else
			b[7] = 3;                       /* v2 -> v1 with its v2 fields kept */
		r = 0;
		break;
	case R_CSUM_SB: case R_CSUM_BGD: case R_CSUM_BITMAP: case R_CSUM_INODE: case R_EXT_LEN0:
	case R_EXT_MOVE: case R_EXT_DUP: case R_CSUM_EXTENT: case R_CSUM_DIR: case R_CSUM_XATTR:
	case R_ORPHAN_ENTRY: case R_OFILE_FREE: case R_OFILE_TWICE: case R_OFILE_FILE:
		r = raw_edit_ext4(fs, what, x, b, &blk);
		break;
	case R_ZERO_BOOT:
		blk = 0;
		if (io_channel_read_blk(fs->io, blk, 1, b))
			break;
		b[10] ^= 1;
		r = 0;
		break;
	case R_NONE:
		break;
	}
	if (!r && io_channel_write_blk(fs->io, blk, 1, b))
		r = -1;
	io_channel_flush(fs->io);
	free(b);
	ext2fs_free(fs);     /* no flush of the superblock: only our edit lands */
	return r;
}

/* ------------------------------------------------------------ placeholders */


static int get_facts(const char *img, struct facts *x)
{
	ext2_filsys fs;
	if (ext2fs_open(img, 0, 0, 0, unix_io_manager, &fs))
		return -1;
	ext2_ino_t ino;
	struct ext2_inode in;
	int r = -1;
	if (inode_of(fs, "d/f", &ino, &in))
		goto out;
	x->fi = ino;
	blk64_t f0 = 0;
	ext2fs_bmap2(fs, ino, &in, NULL, 0, 0, NULL, &f0);   /* i_block[0], or the first extent's */
	x->f0 = (unsigned)f0;
	x->f12 = in.i_block[12];
	if (inode_of(fs, "d/g", &ino, &in))
		goto out;
	x->gi = ino;
	if (inode_of(fs, "d/sub", &ino, &in))
		goto out;
	x->subi = ino;
	if (inode_of(fs, "d", &ino, &in))
		goto out;
	x->di = ino;
	if (inode_of(fs, "sl", &ino, &in))
		goto out;
	x->symi = ino;
	if (inode_of(fs, "fifo", &ino, &in))
		goto out;
	x->fifoi = ino;
	x->iun = fs->super->s_inodes_per_group - 3;
	x->unusedi = 0;       /* in an initialised group with room past its used inodes */
	for (dgrp_t g = 0; g < fs->group_desc_count && !x->unusedi; g++)
		if (ext2fs_has_group_desc_csum(fs) && !ext2fs_bg_flags_test(fs, g, EXT2_BG_INODE_UNINIT) &&
		    ext2fs_bg_itable_unused(fs, g) > 6)
			x->unusedi = g * fs->super->s_inodes_per_group + fs->super->s_inodes_per_group -
				     ext2fs_bg_itable_unused(fs, g) + 5;
	x->etb = x->orphan_blk = 0;
	if (inode_of(fs, "d/frag", &ino, &in) == 0 && (in.i_flags & EXT4_EXTENTS_FL)) {
		const uint8_t *root = (const uint8_t *)in.i_block;
		uint16_t depth;
		memcpy(&depth, root + 6, 2);
		if (depth)
			memcpy(&x->etb, root + 12 + 4, 4);      /* the first index entry's child */
	}
	blk64_t ob;
	if (fs->super->s_orphan_file_inum &&
	    ext2fs_bmap2(fs, fs->super->s_orphan_file_inum, NULL, NULL, 0, 0, NULL, &ob) == 0)
		x->orphan_blk = (unsigned)ob;
	x->it = (unsigned)ext2fs_inode_table_loc(fs, 0);
	x->bb = (unsigned)ext2fs_block_bitmap_loc(fs, 0);
	x->freeino = fs->super->s_inodes_count - 3;
	if (ext2fs_read_bitmaps(fs))
		goto out;
	x->freeblk = 0;
	for (blk64_t b = ext2fs_blocks_count(fs->super) - 10; b > 100; b--)
		if (!ext2fs_test_block_bitmap2(fs->block_map, b)) {
			x->freeblk = (unsigned)b;
			break;
		}
	r = x->freeblk ? 0 : -1;
out:
	ext2fs_close_free(&fs);
	return r;
}

static unsigned facts_dir_ino(const struct facts *x)
{
	return x->di;
}

static void expand(const char *tmpl, const struct facts *x, char *out, size_t n)
{
	static const struct { const char *key; size_t off; } keys[] = {
		{ "{F0}", offsetof(struct facts, f0) }, { "{F12}", offsetof(struct facts, f12) },
		{ "{FI}", offsetof(struct facts, fi) }, { "{GI}", offsetof(struct facts, gi) },
		{ "{SUBI}", offsetof(struct facts, subi) }, { "{IT}", offsetof(struct facts, it) },
		{ "{BB}", offsetof(struct facts, bb) }, { "{FREE}", offsetof(struct facts, freeblk) },
		{ "{FREEI}", offsetof(struct facts, freeino) }, { "{SYMI}", offsetof(struct facts, symi) },
		{ "{FIFOI}", offsetof(struct facts, fifoi) }, { "{DI}", offsetof(struct facts, di) },
		{ "{IUN}", offsetof(struct facts, iun) }, { "{UNUSEDI}", offsetof(struct facts, unusedi) },
	};
	size_t k = 0;
	while (*tmpl && k + 16 < n) {
		bool done = false;
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]) && !done; i++) {
			size_t l = strlen(keys[i].key);
			if (!strncmp(tmpl, keys[i].key, l)) {
				k += (size_t)snprintf(out + k, n - k, "%u",
						      *(const unsigned *)((const char *)x + keys[i].off));
				tmpl += l;
				done = true;
			}
		}
		if (!done)
			out[k++] = *tmpl++;
	}
	out[k] = 0;
}

/* ------------------------------------------------------------ cases */

enum { T_1K = 1, T_EXT4 = 2, T_SCAN = 4 };
struct tcase {
	const char *inv;
	const char *cmds;     /* debugfs commands (with placeholders), or NULL */
	enum raw raw;
	unsigned flags;       /* T_1K: needs two block groups; T_EXT4: on the ext4 base;
			       * T_SCAN: the scan of the after-image rejects it */
};

static const struct tcase cases[] = {
	{ "INV_SB_FROZEN", "ssv errors 3\n", R_NONE, 0 },
	{ "INV_SB_FEATURES", "feature dir_prealloc\n", R_NONE, 0 },
	{ "INV_SB_FEATURES", "feature -ext_attr\n", R_NONE, 0 },   /* d/g keeps its EA block */
	{ "INV_SB_REVISION", "ssv rev_level 0\n", R_NONE, 0 },
	{ "INV_SB_STATE", "ssv state 8\n", R_NONE, 0 },
	{ "INV_SB_FREE_BLOCKS", "ssv free_blocks_count 100\n", R_NONE, 0 },
	{ "INV_SB_FREE_INODES", "ssv free_inodes_count 10\n", R_NONE, 0 },
	{ "INV_BGD_FROZEN", "set_bg 0 flags 1\n", R_NONE, 0 },
	{ "INV_BGD_FREE_BLOCKS", "set_bg 0 free_blocks_count 3\n", R_NONE, 0 },
	{ "INV_BGD_FREE_INODES", "set_bg 0 free_inodes_count 3\n", R_NONE, 0 },
	{ "INV_BGD_USED_DIRS", "set_bg 0 used_dirs_count 9\n", R_NONE, 0 },
	{ "INV_BACKUP_COPIES", NULL, R_BACKUP_SB, T_1K },
	{ "INV_STATIC_FROZEN", NULL, R_RGDT, T_1K },
	{ "INV_STATIC_FROZEN", NULL, R_ZERO_BOOT, 0 },
	{ "INV_BITMAP_PADDING", NULL, R_PADDING, 0 },
	{ "INV_PTR_IN_RANGE", "sif <{FI}> block[2] 999999\n", R_NONE, 0 },
	{ "INV_PTR_NOT_STATIC", "sif <{FI}> block[2] {IT}\n", R_NONE, 0 },
	{ "INV_BLOCK_OWNED_ONCE", "sif <{GI}> block[0] {F0}\n", R_NONE, 0 },
	{ "INV_PTR_MARKED", "sif <{FI}> block[1] {FREE}\n", R_NONE, 0 },
	{ "INV_RELEASE_CLEARS", "sif <{FI}> block[1] 0\n", R_NONE, 0 },
	{ "INV_BBITMAP_SET", "setb {FREE}\n", R_NONE, 0 },
	{ "INV_BBITMAP_CLEAR", "freeb {F0}\n", R_NONE, 0 },
	{ "INV_BBITMAP_CLEAR", "freeb {BB}\n", R_NONE, 0 },
	{ "INV_IBITMAP_SET", "seti <{FREEI}>\n", R_NONE, 0 },
	{ "INV_IBITMAP_CLEAR", "freei <{FI}>\n", R_NONE, 0 },
	{ "INV_DTIME_FREE", "sif <{FI}> links_count 0\nfreei <{FI}>\n", R_NONE, 0 },
	{ "INV_DTIME_LIVE", "sif <{FI}> dtime 5\n", R_NONE, 0 },
	{ "INV_ORPHAN_LIST", "ssv last_orphan {FREEI}\n", R_NONE, 0 },
	{ "INV_FREE_INODE_FORM", "sif <{FREEI}> links_count 1\n", R_NONE, 0 },
	{ "INV_INODE_MODE", "sif <{FI}> mode 0170644\n", R_NONE, 0 },
	{ "INV_INODE_EXT4_FIELDS", "sif <{FI}> flags 0x80000\n", R_NONE, 0 },
	{ "INV_RESERVED_INODES", "freei <5>\n", R_NONE, 0 },
	{ "INV_RESERVED_INODES", "sif <7> size 5\n", R_NONE, 0 },
	/* an unused reserved inode, as e2fsck's pass 1 checks it: mode 0, and
	 * its xattr block counted (in i_blocks, ownership and format) */
	{ "INV_RESERVED_INODES", "sif <6> mode 0100644\n", R_NONE, T_SCAN },
	{ "INV_IBLOCKS", "sif <6> file_acl {FREE}\nsetb {FREE}\n", R_NONE, T_SCAN },
	{ "INV_LINKS_COUNT", "sif <{FI}> links_count 5\n", R_NONE, 0 },
	{ "INV_LINKS_COUNT", "unlink d/g\n", R_NONE, 0 },
	{ "INV_DIRENT_TARGET", "ln <{FREEI}> d/bogus\n", R_NONE, 0 },
	{ "INV_DIRENT_FTYPE", NULL, R_FTYPE, 0 },
	{ "INV_DIRENT_TILING", NULL, R_TILING, 0 },
	{ "INV_DIRENT_NAME", NULL, R_NAME, 0 },
	{ "INV_DIRENT_UNIQUE", NULL, R_UNIQUE, 0 },
	{ "INV_DIR_DOTS", NULL, R_DOT, 0 },
	{ "INV_DIR_DOTDOT_PARENT", NULL, R_DOTDOT, 0 },
	{ "INV_DIR_NO_LOOP", "ln d d/sub/dloop\nunlink d\n", R_LOOP, 0 },
	{ "INV_DIR_ONE_PARENT", "ln d/sub subalias\nsif d/sub links_count 3\n", R_NONE, 0 },
	{ "INV_IBLOCKS", "sif <{FI}> blocks 100\n", R_NONE, 0 },
	{ "INV_DIR_SIZE", "sif <{DI}> size 5000\n", R_NONE, 0 },
	{ "INV_FILE_SIZE", "sif <{FI}> size 10\n", R_NONE, 0 },
	{ "INV_FILE_MAX_SIZE", "sif <{FI}> size 281474976710656\n", R_NONE, 0 },
	{ "INV_SYMLINK", "sif <{SYMI}> size 40\n", R_NONE, 0 },
	{ "INV_SPECIAL_FILE", "sif <{FIFOI}> blocks 2\n", R_NONE, 0 },
	{ "INV_XATTR_REFCOUNT", NULL, R_XREF, 0 },
	{ "INV_XATTR_FORMAT", NULL, R_XMAGIC, 0 },
	{ "INV_JOURNAL_SB", NULL, R_JSB_BS, 0 },
	{ "INV_JOURNAL_SB", NULL, R_JSB_V1, 0 },
	{ "INV_HTREE_ROOT", NULL, R_HINFO, 0 },
	{ "INV_HTREE_HASH_VERSION", NULL, R_HVER0, 0 },
	{ "INV_HTREE_HASH_VERSION", NULL, R_HVER9, 0 },
	{ "INV_HTREE_DEPTH", NULL, R_HDEPTH, 0 },
	{ "INV_HTREE_DEPTH", NULL, R_HDEPTH2, 0 },
	{ "INV_HTREE_COUNT_LIMIT", NULL, R_HCOUNT, 0 },
	{ "INV_HTREE_COUNT_LIMIT", NULL, R_HLIMIT, 0 },
	{ "INV_HTREE_HASH_ORDER", NULL, R_HORDER, T_1K },
	{ "INV_HTREE_BLOCKS", NULL, R_HBLK0, 0 },
	{ "INV_HTREE_BLOCKS", NULL, R_HBLKBIG, 0 },
	{ "INV_HTREE_BLOCKS", NULL, R_HDUP, T_1K },
	{ "INV_HTREE_NODE", NULL, R_HRANGE, 0 },
	{ "INV_HTREE_FLAG", "sif <{FI}> flags 0x1000\n", R_NONE, 0 },
	{ "INV_JOURNAL_SB", NULL, R_JSB_CSUM, T_EXT4 },
	{ "INV_JOURNAL_SB", NULL, R_JSB_CSUM, T_EXT4 | T_SCAN },
	/* ext4 (transactions): extent trees feed the ownership invariants */
	{ "INV_PTR_MARKED", NULL, R_EXT_MOVE, T_EXT4 },
	{ "INV_BLOCK_OWNED_ONCE", NULL, R_EXT_DUP, T_EXT4 },
	{ "INV_IBLOCKS", "sif <{FI}> blocks 100\n", R_NONE, T_EXT4 },
	/* huge_file: HUGE_FILE_FL makes i_blocks count blocks, not sectors */
	{ "INV_IBLOCKS", "sif <{FI}> flags 0xc0000\n", R_NONE, T_EXT4 },
	/* ext4 (transactions) */
	/* dir_nlink: 1 only past the link maximum (or kept once 1), not on a small directory */
	{ "INV_LINKS_COUNT", "sif <{DI}> links_count 1\n", R_NONE, T_EXT4 },
	/* and not from a freed inode's 1: the fifo's inode reused by a new
	 * directory of two names, counting 3 */
	{ "INV_LINKS_COUNT", "rm fifo\nmkdir newdir\nsif newdir links_count 3\n", R_NONE, T_EXT4 },
	{ "INV_BGD_UNINIT", "seti <{UNUSEDI}>\n", R_NONE, T_EXT4 },
	{ "INV_EXTENT_TREE", NULL, R_EXT_LEN0, T_EXT4 },
	{ "INV_ORPHAN_FILE", NULL, R_ORPHAN_ENTRY, T_EXT4 },
	{ "INV_ORPHAN_ENTRY", "feature orphan_present\n", R_OFILE_FREE, T_EXT4 },
	{ "INV_ORPHAN_ENTRY", "feature orphan_present\n", R_OFILE_TWICE, T_EXT4 },
	{ "INV_ORPHAN_PRESENT", NULL, R_OFILE_FILE, T_EXT4 },
	{ "INV_CSUM_SB", NULL, R_CSUM_SB, T_EXT4 },
	{ "INV_CSUM_BGD", NULL, R_CSUM_BGD, T_EXT4 },
	{ "INV_CSUM_BITMAP", NULL, R_CSUM_BITMAP, T_EXT4 },
	{ "INV_CSUM_INODE", NULL, R_CSUM_INODE, T_EXT4 },
	{ "INV_CSUM_EXTENT", NULL, R_CSUM_EXTENT, T_EXT4 },
	{ "INV_CSUM_DIR", NULL, R_CSUM_DIR, T_EXT4 },
	{ "INV_DIR_LEAF_FORM", "sif h flags 0x80000\n", R_NONE, T_EXT4 },
	{ "INV_CSUM_XATTR", NULL, R_CSUM_XATTR, T_EXT4 },
	/* ext4 (scans) */
	{ "INV_BGD_UNINIT", "set_bg 0 itable_unused {IUN}\n", R_NONE, T_EXT4 | T_SCAN },
	{ "INV_EXTENT_TREE", NULL, R_EXT_LEN0, T_EXT4 | T_SCAN },
	{ "INV_ORPHAN_FILE", NULL, R_ORPHAN_ENTRY, T_EXT4 | T_SCAN },
	{ "INV_ORPHAN_ENTRY", "feature orphan_present\n", R_OFILE_FREE, T_EXT4 | T_SCAN },
	{ "INV_ORPHAN_ENTRY", "feature orphan_present\n", R_OFILE_TWICE, T_EXT4 | T_SCAN },
	{ "INV_ORPHAN_PRESENT", NULL, R_OFILE_FILE, T_EXT4 | T_SCAN },
	{ "INV_CSUM_SB", NULL, R_CSUM_SB, T_EXT4 | T_SCAN },
	{ "INV_CSUM_BGD", NULL, R_CSUM_BGD, T_EXT4 | T_SCAN },
	{ "INV_CSUM_BITMAP", NULL, R_CSUM_BITMAP, T_EXT4 | T_SCAN },
	{ "INV_CSUM_INODE", NULL, R_CSUM_INODE, T_EXT4 | T_SCAN },
	{ "INV_CSUM_EXTENT", NULL, R_CSUM_EXTENT, T_EXT4 | T_SCAN },
	{ "INV_CSUM_DIR", NULL, R_CSUM_DIR, T_EXT4 | T_SCAN },
	{ "INV_DIR_LEAF_FORM", "sif h flags 0x80000\n", R_NONE, T_EXT4 | T_SCAN },
	{ "INV_CSUM_XATTR", NULL, R_CSUM_XATTR, T_EXT4 | T_SCAN },
};

/* legitimate transitions, applied in a chain (libext2fs via debugfs) */
/* Every record and violation of v as text, one a line (malloc'd). */
static char *verdict_text(const struct chk_verdict *v)
{
	size_t cap = 4096, len = 0;
	char *out = malloc(cap), line[600];
	for (size_t i = 0; out && i < chk_verdict_nrecords(v) + chk_verdict_nviolations(v); i++) {
		if (i < chk_verdict_nrecords(v))
			chk_record_format(chk_verdict_record(v, i), line, sizeof(line));
		else
			snprintf(line, sizeof(line), "%s: %s",
				 chk_verdict_violation(v, i - chk_verdict_nrecords(v))->inv->id,
				 chk_verdict_violation(v, i - chk_verdict_nrecords(v))->detail);
		size_t n = strlen(line);
		if (len + n + 2 > cap && !(out = realloc(out, cap = 2 * (len + n + 2))))
			break;
		memcpy(out + len, line, n);
		len += n;
		out[len++] = '\n';
	}
	if (out)
		out[len] = 0;
	return out;
}

/* A check made with the memory an earlier check on the same chk_fs gave
 * back must say what a check on a fresh chk_fs says, and a verdict may
 * outlive its chk_fs.  The checker reuses its buffers from one check to
 * the next (checker/pool.c): one reused without being set anew would show
 * here as a record or a violation that differs. */
static void check_reuse_same(struct chk_fs *fs, struct test_mem *approved, const uint8_t *b, size_t n,
			     bool partial, const char *step)
{
	struct chk_verdict *first = check_pair(fs, approved->p, b, n, partial);
	chk_verdict_free(first);   /* its memory goes back for the next */
	struct chk_verdict *again = check_pair(fs, approved->p, b, n, partial);
	struct chk_fs *fresh;
	char err[256];
	if (chk_attach(&fresh, test_mem_read, approved, NULL, err, sizeof(err))) {
		FAIL("attach for the reuse check: %s", err);
		chk_verdict_free(again);
		return;
	}
	struct chk_verdict *once = check_pair(fresh, approved->p, b, n, partial);
	chk_detach(fresh);         /* `once` outlives its chk_fs */
	char *ta = again ? verdict_text(again) : NULL, *to = once ? verdict_text(once) : NULL;
	if (!ta || !to || strcmp(ta, to)) {
		FAIL("step %s: a check with reused memory differs from one on a fresh chk_fs", step);
		fprintf(stderr, "--- reused:\n%.2000s--- fresh:\n%.2000s", ta ? ta : "", to ? to : "");
	}
	free(ta);
	free(to);
	chk_verdict_free(again);
	chk_verdict_free(once);
}

static const char *const legit[] = {
	"mkdir d/new\n",
	"write /etc/hostname d/new/w\n",
	"rmdir d/sub\n",             /* (debugfs rm of d/g would leak its xattr block) */
	"cd h\nmknod zz p\n",
	"write /etc/services d/f2\n",
	"write %s/r40k d/f4\npunch d/f4 1 1\n",  /* a hole inside: an extent split, or a pointer gone */
	"fallocate d/f4 1 1\n",      /* the hole filled again: an unwritten extent, or a zeroed block */
	"rm d/f\n",
	"ssv mtime 123456\nssv mnt_count 7\n",
	"ea_set -f %s/big.txt d/f2 user.other\n",
	"link d/f2 d/f3\nsif d/f2 links_count 2\n",
	"rmdir d/new/w\n",           /* fails (not a dir): no change */
	"symlink d/sl2 /a/much/longer/target/that/does/not/fit/in/the/inode/i_block/area/xxxxxxxxxx\n",
	"kill_file d/f3\n",           /* frees the inode but leaves its entries: the one expected rejection */
};

static int run_legit_chain(const char *base, uint32_t bs)
{
	char prev[512], cur[512], cmd[2048];
	snprintf(prev, sizeof(prev), "%s/chain%u-0.img", dir, bs);
	snprintf(cmd, sizeof(cmd), "cp %s %s", base, prev);
	if (run(cmd))
		return -1;
	size_t n0;
	uint8_t *a = test_slurp(prev, &n0);
	struct test_mem m = { a, n0 };
	struct chk_fs *fs;
	char err[256];
	struct chk_options opt = { .cache_bytes = 64 * 1024 };   /* small: exercises eviction */
	if (chk_attach(&fs, test_mem_read, &m, &opt, err, sizeof(err))) {
		FAIL("attach %s: %s", prev, err);
		return -1;
	}
	struct chk_verdict *sv;
	if (chk_scan(fs, &sv) || !chk_verdict_ok(sv)) {
		FAIL("scan of the base image (%u) reports violations", bs);
		if (sv)
			dump(sv);
	}
	chk_verdict_free(sv);
	/* the last command (kill_file) leaves a dangling entry: expect rejection */
	size_t nlegit = sizeof(legit) / sizeof(legit[0]);
	for (size_t i = 0; i < nlegit; i++) {
		snprintf(cur, sizeof(cur), "%s/chain%u-%zu.img", dir, bs, i + 1);
		snprintf(cmd, sizeof(cmd), "cp %s %s", prev, cur);
		if (run(cmd))
			break;
		char cmds[600];
		snprintf(cmds, sizeof(cmds), legit[i], dir);
		debugfs_cmds(cur, cmds);
		size_t n1;
		uint8_t *b = test_slurp(cur, &n1);
		struct test_mem mb = { b, n1 };
		check_reuse_same(fs, &m, b, n0, bs == 4096, legit[i]);
		struct chk_verdict *v = check_pair(fs, a, b, n0, bs == 4096);
		bool expect_ok = i + 1 < nlegit;
		if (v && chk_verdict_ok(v) != expect_ok) {
			FAIL("bs %u legit step %zu (%s): %s", bs, i, legit[i], expect_ok ? "rejected" : "approved");
			dump(v);
		}
		if (v && expect_ok) {
			/* advance; the advanced state must equal a fresh attach of the after-image */
			if (chk_advance(fs, v))
				FAIL("chk_advance");
			struct chk_fs *fresh;
			if (chk_attach(&fresh, test_mem_read, &mb, NULL, err, sizeof(err)) == 0) {
				struct chk_verdict *sv2;
				if (chk_scan(fresh, &sv2) == 0) {
					if (!chk_verdict_ok(sv2)) {
						FAIL("scan after legit step %zu (bs %u) not clean", i, bs);
						dump(sv2);
					}
					chk_verdict_free(sv2);
				}
				chk_detach(fresh);
			}
			free(a);
			a = b;
			m.p = a;                /* the callback now serves the approved state */
			snprintf(prev, sizeof(prev), "%s", cur);
		} else {
			free(b);
		}
		chk_verdict_free(v);
	}
	struct chk_stats st;
	chk_get_stats(fs, &st);
	if (st.transactions != 3 * nlegit || st.cache_misses == 0)
		FAIL("stats: %llu transactions, %llu misses", (unsigned long long)st.transactions,
		     (unsigned long long)st.cache_misses);
	chk_detach(fs);
	free(a);
	return 0;
}

/* The ext4 base must pass the scan, or a scan case could find its own base. */
static void base_scans_clean(const char *base, uint32_t bs)
{
	size_t n;
	uint8_t *a = test_slurp(base, &n);
	struct test_mem m = { a, n };
	struct chk_fs *fs;
	struct chk_verdict *v = NULL;
	char err[256];
	if (!a || chk_attach(&fs, test_mem_read, &m, NULL, err, sizeof(err))) {
		FAIL("ext4 base (bs %u): cannot attach: %s", bs, a ? err : "cannot read");
	} else {
		if (chk_scan(fs, &v) || !chk_verdict_ok(v)) {
			FAIL("ext4 base (bs %u): the scan is not clean", bs);
			if (v)
				dump(v);
		}
		chk_verdict_free(v);
		chk_detach(fs);
	}
	free(a);
}

static int run_case(const char *base, uint32_t bs, const struct tcase *c, const struct facts *x)
{
	char after[512], cmd[2048];
	snprintf(after, sizeof(after), "%s/after.img", dir);
	snprintf(cmd, sizeof(cmd), "cp %s %s", base, after);
	if (run(cmd))
		return -1;
	if (c->cmds) {
		char cmds[600];
		expand(c->cmds, x, cmds, sizeof(cmds));
		debugfs_cmds(after, cmds);
	}
	if (raw_edit(after, c->raw, x)) {
		FAIL("%s (bs %u): raw edit failed", c->inv, bs);
		return -1;
	}
	size_t na, nb;
	uint8_t *a = test_slurp(base, &na), *b = test_slurp(after, &nb);
	struct test_mem m = { a, na };
	struct chk_fs *fs;
	char err[256];
	if (!a || !b || na != nb || chk_attach(&fs, test_mem_read, &m, NULL, err, sizeof(err))) {
		FAIL("%s: cannot attach", c->inv);
		free(a);
		free(b);
		return -1;
	}
	struct chk_verdict *v = NULL;
	if (c->flags & T_SCAN) {
		/* the state the edit leaves, scanned from scratch */
		struct test_mem mb = { b, nb };
		struct chk_fs *after_fs;
		if (chk_attach(&after_fs, test_mem_read, &mb, NULL, err, sizeof(err)) || chk_scan(after_fs, &v))
			FAIL("%s (bs %u): cannot attach to or scan the after-image: %s", c->inv, bs, err);
		else
			chk_detach(after_fs);
	} else {
		v = check_pair(fs, a, b, na, bs == 4096);
	}
	const char *how = c->flags & T_SCAN ? "scan" : "transaction";
	if (v && !has_violation(v, c->inv)) {
		FAIL("%s (bs %u, %s %s): not detected", c->inv, bs, how, c->cmds ? c->cmds : "raw edit");
		dump(v);
	} else if (v) {
		for (size_t k = 0; k < chk_verdict_nviolations(v); k++)
			if (!strcmp(chk_verdict_violation(v, k)->inv->id, c->inv)) {
				printf("ok   %s (bs %u) %s rejects: %s\n", c->inv, bs, how,
				       chk_verdict_violation(v, k)->detail);
				break;
			}
	}
	if (c->flags & T_SCAN) {
		chk_verdict_free(v);
		chk_detach(fs);
		free(a);
		free(b);
		return 0;
	}
	/* a rejected verdict must not change the state: the same check again gives the same answer */
	struct chk_verdict *v2 = check_pair(fs, a, b, na, false);
	if (v && v2 && chk_verdict_nviolations(v) != chk_verdict_nviolations(v2))
		FAIL("%s: second check differs", c->inv);
	chk_verdict_free(v);
	chk_verdict_free(v2);
	chk_detach(fs);
	free(a);
	free(b);
	return 0;
}

/* ------------------------------------------------------------ orphans */

/*
 * A linked inode on the orphan list (a truncate in progress) keeps the
 * chain's next pointer in i_dtime, and the kernel may write it in the same
 * commit that allocates it: a new file d/o, i_dtime naming the next orphan
 * (d/f, the chain's end), s_last_orphan naming d/o.  Approved; without
 * the list head the dtime is a deleted inode's and INV_IBITMAP_SET rejects.
 */
static void run_orphan_new(const char *base, uint32_t bs, const struct facts *x)
{
	for (int on_list = 1; on_list >= 0; on_list--) {
		char after[512], cmd[1200], cmds[256];
		snprintf(after, sizeof(after), "%s/orphan.img", dir);
		snprintf(cmd, sizeof(cmd), "cp %s %s", base, after);
		ext2_filsys e2;
		ext2_ino_t ino = 0;
		struct ext2_inode in;
		if (run(cmd) || debugfs_cmds(after, "write /etc/hostname d/o\n") || with_fs(after, &e2)) {
			FAIL("orphan (bs %u): cannot make the after-image", bs);
			return;
		}
		int r = inode_of(e2, "d/o", &ino, &in);
		ext2fs_close_free(&e2);
		snprintf(cmds, sizeof(cmds), "sif <%u> dtime %u\n%s", ino, x->fi, on_list ? "ssv last_orphan " : "");
		if (on_list)
			snprintf(cmds + strlen(cmds), sizeof(cmds) - strlen(cmds), "%u\n", ino);
		if (r || debugfs_cmds(after, cmds)) {
			FAIL("orphan (bs %u): cannot edit d/o", bs);
			return;
		}
		size_t na, nb;
		uint8_t *a = test_slurp(base, &na), *b = test_slurp(after, &nb);
		struct test_mem m = { a, na };
		struct chk_fs *fs;
		char err[256];
		if (!a || !b || na != nb || chk_attach(&fs, test_mem_read, &m, NULL, err, sizeof(err))) {
			FAIL("orphan (bs %u): cannot attach", bs);
			free(a);
			free(b);
			return;
		}
		struct chk_verdict *v = check_pair(fs, a, b, na, bs == 4096);
		const char *what = on_list ? "a new linked inode on the orphan list, i_dtime its next"
					   : "a new linked inode with i_dtime, on no list";
		if (v && on_list && !chk_verdict_ok(v)) {
			FAIL("%s (bs %u): rejected", what, bs);
			dump(v);
		} else if (v && !on_list && !has_violation(v, "INV_IBITMAP_SET")) {
			FAIL("%s (bs %u): not rejected with INV_IBITMAP_SET", what, bs);
			dump(v);
		} else if (v) {
			printf("ok   %s (bs %u): %s\n", what, bs,
			       on_list ? "approved" : chk_verdict_violation(v, 0)->detail);
		}
		chk_verdict_free(v);
		chk_detach(fs);
		free(a);
		free(b);
	}
}

/* ------------------------------------------------------------ feature changes */

/* Images without ext_attr (mke2fs -O ^ext_attr; every revision-0 image):
 * the first xattr turns the feature on, a revision-0 superblock becoming
 * revision 1 first, as the kernel does; anything else stays rejected. */
struct fcase {
	const char *what;
	const char *mkfs;     /* mke2fs options */
	const char *prep;     /* debugfs commands making the base, beyond d/f */
	const char *edit;     /* debugfs commands making the after-image */
	const char *inv;      /* expected violation, NULL: approved */
};

static const struct fcase fcases[] = {
	{ "ext_attr on with the first EA block", "-t ext3 -O ^ext_attr", "",
	  "feature ext_attr\nea_set -f %s/big.txt d/f user.x\n", NULL },
	{ "revision 0 -> 1 with ext_attr and the EA block", "-r 0", "",
	  "ssv rev_level 1\nfeature ext_attr\nea_set -f %s/big.txt d/f user.x\n", NULL },
	{ "ext_attr with another flag", "-t ext3 -O ^ext_attr", "",
	  "feature ext_attr\nfeature dir_prealloc\n", "INV_SB_FEATURES" },
	{ "ext_attr on a revision-0 superblock", "-r 0", "", "feature ext_attr\n", "INV_SB_FEATURES" },
	{ "revision 1 without a feature flag", "-r 0", "", "ssv rev_level 1\n", "INV_SB_REVISION" },
	{ "revision 1 with another first inode", "-r 0", "",
	  "ssv rev_level 1\nssv first_ino 12\nfeature ext_attr\n", "INV_SB_REVISION" },
	{ "revision 1 with flags set in revision 0", "-r 0", "feature dir_prealloc\n",
	  "ssv rev_level 1\nfeature ext_attr\n", "INV_SB_REVISION" },
};

static void run_feature_case(const struct fcase *c, uint32_t bs)
{
	char before[512], after[512], cmd[4096], cmds[600];
	snprintf(before, sizeof(before), "%s/fbase.img", dir);
	snprintf(after, sizeof(after), "%s/fafter.img", dir);
	snprintf(cmd, sizeof(cmd), "head -c 600 /dev/urandom | base64 -w0 > %s/big.txt && "
		 "mke2fs -q -F %s -b %u -N 128 %s 8M >/dev/null 2>&1", dir, c->mkfs, bs, before);
	snprintf(cmds, sizeof(cmds), "mkdir d\nwrite /etc/hostname d/f\n%s", c->prep);
	if (run(cmd) || debugfs_cmds(before, cmds)) {
		FAIL("%s (bs %u): cannot make the base image", c->what, bs);
		return;
	}
	snprintf(cmd, sizeof(cmd), "cp %s %s", before, after);
	snprintf(cmds, sizeof(cmds), c->edit, dir);
	if (run(cmd) || debugfs_cmds(after, cmds)) {
		FAIL("%s (bs %u): cannot make the after-image", c->what, bs);
		return;
	}
	size_t na, nb;
	uint8_t *a = test_slurp(before, &na), *b = test_slurp(after, &nb);
	struct test_mem m = { a, na }, mb = { b, nb };
	struct chk_fs *fs = NULL, *fresh = NULL;
	char err[256];
	if (!a || !b || na != nb || chk_attach(&fs, test_mem_read, &m, NULL, err, sizeof(err))) {
		FAIL("%s (bs %u): cannot attach", c->what, bs);
		goto out;
	}
	struct chk_verdict *v = check_pair(fs, a, b, na, bs == 4096);
	if (v && !c->inv && !chk_verdict_ok(v)) {
		FAIL("%s (bs %u): rejected", c->what, bs);
		dump(v);
	} else if (v && c->inv && !has_violation(v, c->inv)) {
		FAIL("%s (bs %u): not rejected with %s", c->what, bs, c->inv);
		dump(v);
	} else if (v) {
		printf("ok   %s (bs %u): %s\n", c->what, bs,
		       c->inv ? chk_verdict_violation(v, 0)->detail : "approved");
	}
	if (v && !c->inv && chk_verdict_ok(v)) {
		/* the after-image is a state the checker accepts from scratch too */
		struct chk_verdict *sv = NULL;
		if (chk_advance(fs, v))
			FAIL("%s: chk_advance", c->what);
		if (chk_attach(&fresh, test_mem_read, &mb, NULL, err, sizeof(err)) ||
		    chk_scan(fresh, &sv) || !chk_verdict_ok(sv)) {
			FAIL("%s (bs %u): the after-image does not scan clean", c->what, bs);
			if (sv)
				dump(sv);
		}
		chk_verdict_free(sv);
		snprintf(cmd, sizeof(cmd), "e2fsck -fn %s >/dev/null 2>&1", after);
		if (run(cmd))
			FAIL("%s (bs %u): e2fsck -fn finds the after-image unclean", c->what, bs);
	}
	chk_verdict_free(v);
out:
	if (fresh)
		chk_detach(fresh);
	if (fs)
		chk_detach(fs);
	free(a);
	free(b);
}

static int test_format(void)
{
	char buf[128];
	struct chk_record r1 = { CHK_INODE, 12, "i_size", 4096, 8192 };
	struct chk_record r2 = { CHK_SB, 0, "s_free_blocks_count", 10, 9 };
	struct chk_record r3 = { CHK_DIRENT, 2, "\"a b\"", 0, 12 };
	chk_record_format(&r1, buf, sizeof(buf));
	if (strcmp(buf, "inode | 12 | i_size | 4096 | 8192"))
		FAIL("format: %s", buf);
	chk_record_format(&r2, buf, sizeof(buf));
	if (strcmp(buf, "sb | - | s_free_blocks_count | 10 | 9"))
		FAIL("format: %s", buf);
	chk_record_format(&r3, buf, sizeof(buf));
	if (strcmp(buf, "dirent | 2 | \"a b\" | 0 | 12"))
		FAIL("format: %s", buf);
	if (chk_invariant_count() < 33)
		FAIL("only %zu invariants", chk_invariant_count());
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test_invariants INV_ID|--legit|--features|--orphan|--format|--list-cases|--all\n");
		return 2;
	}
	if (!strcmp(argv[1], "--format"))
		return test_format();
	if (!strcmp(argv[1], "--list-cases")) {
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			printf("%s\n", cases[i].inv);
		return 0;
	}
	if (run("command -v mke2fs >/dev/null && command -v debugfs >/dev/null && command -v e2fsck >/dev/null"))
		return 77;
	bool all = !strcmp(argv[1], "--all"), legit_only = !strcmp(argv[1], "--legit");
	bool features = !strcmp(argv[1], "--features");
	bool orphans = !strcmp(argv[1], "--orphan");
	if (features || all) {
		snprintf(dir, sizeof(dir), "/tmp/chk-test-XXXXXX");
		if (!mkdtemp(dir))
			return 1;
		for (size_t i = 0; i < sizeof(fcases) / sizeof(fcases[0]); i++) {
			run_feature_case(&fcases[i], 1024);
			run_feature_case(&fcases[i], 4096);
		}
		char rm[128];
		snprintf(rm, sizeof(rm), "rm -rf %s", dir);
		run(rm);
		if (features) {
			printf("%s: %d failure(s)\n", argv[1], failures);
			return failures ? 1 : 0;
		}
	}
	bool known = all || legit_only || orphans;
	for (size_t i = 0; i < chk_invariant_count(); i++)
		known |= !strcmp(chk_invariant_at(i)->id, argv[1]);
	if (!known) {
		fprintf(stderr, "unknown invariant %s\n", argv[1]);
		return 1;
	}
	snprintf(dir, sizeof(dir), "/tmp/chk-test-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	/* 16 KiB blocks (past the page size: no kernel mounts them) for the
	 * legitimate chain only */
	static const uint32_t sizes[] = { 1024, 4096, 16384 };
	size_t ran = 0;
	for (size_t s = 0; s < 6; s++) {
		uint32_t bs = sizes[s % 3];
		bool ext4 = s >= 3;
		if (bs == 16384 && !legit_only && !all)
			continue;
		/* an ext4 base for what needs it, and for the legitimate chain */
		bool need = legit_only || all;
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]) && !need; i++)
			need = !strcmp(cases[i].inv, argv[1]) && (cases[i].flags & T_EXT4);
		if (ext4 && (!need || orphans))
			continue;
		char base[512];
		if (make_base(bs, base, ext4)) {
			FAIL("cannot build the %s base image (bs %u)", ext4 ? "ext4" : "ext3", bs);
			continue;
		}
		if (ext4)
			base_scans_clean(base, bs);
		struct facts x;
		if (get_facts(base, &x)) {
			FAIL("cannot read facts of the base image");
			continue;
		}
		if (orphans || all)
			run_orphan_new(base, bs, &x);
		if (orphans)
			continue;
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			if (legit_only || (!all && strcmp(cases[i].inv, argv[1])) ||
			    ((cases[i].flags & T_1K) && bs != 1024) || !(cases[i].flags & T_EXT4) != !ext4)
				continue;
			if (cases[i].cmds && strstr(cases[i].cmds, "{UNUSEDI}") && !x.unusedi)
				continue;     /* this geometry has no initialised group with room */
			run_case(base, bs, &cases[i], &x);
			ran++;
		}
		run_legit_chain(base, bs);
	}
	if (!all && !legit_only && !orphans && ran == 0)
		FAIL("no breaking case for %s", argv[1]);
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	run(cmd);
	printf("%s: %d failure(s)\n", argv[1], failures);
	return failures ? 1 : 0;
}
