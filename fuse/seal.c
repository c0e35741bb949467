/*
 * fuse/seal.c - the seal: what a clean unmount that was checked from its
 * base on records of the image, outside it (one small file per file-system
 * UUID in seal_dir), so that the next read-write mount's base check need not
 * read the inode tables of groups with no inode in use.  checker/README.md
 * ("The seal") says why that is sound and what it trusts.
 *
 * A seal matches only the exact superblock (every byte: another driver's
 * mount changes its mount count, write time and kbytes written), the exact
 * primary descriptors and the journal superblock's sequence with an empty
 * log; a read-write mount removes the seal before it writes anything, so a
 * session that does not end in a clean, sealed unmount leaves none.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rfs.h"

#define SEAL_DEFAULT_DIR "/var/lib/recon-fuse/seals"
#define SEAL_MAGIC "recon-fuse seal 1"
#define SEAL_KEEP 256            /* seals kept in the directory; the oldest go */
#define JBD_MAGIC 0xc03b3998u

/* What a seal records, read from the device itself. */
struct seal_facts {
	uint32_t groups;
	uint32_t mnt_count;
	uint64_t wtime, kbytes_written;
	uint32_t journal_sequence, journal_start;
	uint64_t sb_digest, desc_digest, ibitmap_digest;
	bool clean;                  /* neither ERROR_FS nor needs_recovery */
};

static const char *seal_dir(const struct recon_config *cfg)
{
	const char *d = cfg->seal_dir ? cfg->seal_dir : SEAL_DEFAULT_DIR;
	return strcmp(d, "none") ? d : NULL;
}

static uint64_t digest(uint64_t h, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

/* Every group's inode bitmap as libext2fs holds it, 64 bits at a time. */
static int ibitmap_digest(ext2_filsys fs, uint64_t *out)
{
	uint32_t ipg = fs->super->s_inodes_per_group;
	size_t words = ((size_t)ipg + 63) / 64;
	uint64_t *bits = calloc(words, sizeof(*bits)), h = 1469598103934665603ull;
	if (!bits)
		return -ENOMEM;
	for (dgrp_t g = 0; g < fs->group_desc_count; g++) {
		if (ext2fs_get_inode_bitmap_range2(fs->inode_map, (uint64_t)g * ipg + 1, ipg, bits)) {
			free(bits);
			return -EIO;
		}
		for (size_t i = 0; i < words; i++)
			h = (h ^ bits[i]) * 1099511628211ull;
	}
	free(bits);
	*out = h;
	return 0;
}

int rfs_seal_plan(ext2_filsys fs, struct rfs_seal_plan *p)
{
	struct ext2_super_block *sb = fs->super;
	memset(p, 0, sizeof(*p));
	/* descriptors in one run after the superblock: what is digested */
	if (ext2fs_has_feature_meta_bg(sb))
		return -EOPNOTSUPP;
	for (int i = 0; i < 16; i++)
		snprintf(p->uuid + 2 * i, 3, "%02x", sb->s_uuid[i]);
	p->bs = fs->blocksize;
	p->ngroups = fs->group_desc_count;
	p->desc_blk = sb->s_first_data_block + 1;
	p->desc_blocks = fs->desc_blocks;
	if (fs->inode_map && ibitmap_digest(fs, &p->ibitmap_digest))
		return -EIO;
	if (ext2fs_has_feature_journal(sb) && sb->s_journal_inum) {
		blk64_t b = 0;
		if (ext2fs_bmap2(fs, sb->s_journal_inum, NULL, NULL, 0, 0, NULL, &b) || !b)
			return -EIO;
		p->journal_blk = b;
	}
	return 0;
}

/* The seal's facts of the device as it is now.  0 or -errno. */
static int read_facts(const char *dev, const struct rfs_seal_plan *p, struct seal_facts *f)
{
	memset(f, 0, sizeof(*f));
	int fd = open(dev, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t dlen = (size_t)p->desc_blocks * p->bs;
	uint8_t *buf = malloc(dlen > p->bs ? dlen : p->bs);
	uint8_t raw[SUPERBLOCK_SIZE];
	int r = buf ? 0 : -ENOMEM;
	if (!r && pread(fd, raw, sizeof(raw), SUPERBLOCK_OFFSET) != (ssize_t)sizeof(raw))
		r = -EIO;
	if (!r) {
		struct ext2_super_block sb;
		memcpy(&sb, raw, sizeof(sb));
#ifdef WORDS_BIGENDIAN
		ext2fs_swap_super(&sb);
#endif
		f->groups = p->ngroups;
		f->mnt_count = sb.s_mnt_count;
		f->wtime = sb.s_wtime | (uint64_t)sb.s_wtime_hi << 32;
		f->kbytes_written = sb.s_kbytes_written;
		/* not VALID_FS: a journalled image another driver left "not clean"
		 * stays so under recon-fuse, which judges it at mount instead */
		f->clean = !(sb.s_state & EXT2_ERROR_FS) &&
			   !(sb.s_feature_incompat & EXT3_FEATURE_INCOMPAT_RECOVER);
		f->sb_digest = digest(1469598103934665603ull, raw, sizeof(raw));
	}
	if (!r && pread(fd, buf, dlen, (off_t)(p->desc_blk * p->bs)) != (ssize_t)dlen)
		r = -EIO;
	if (!r)
		f->desc_digest = digest(1469598103934665603ull, buf, dlen);
	if (!r && p->journal_blk) {
		if (pread(fd, buf, p->bs, (off_t)(p->journal_blk * p->bs)) != (ssize_t)p->bs)
			r = -EIO;
		else if (ext2fs_be32_to_cpu(*(uint32_t *)buf) != JBD_MAGIC)
			r = -EINVAL;
		else {
			f->journal_sequence = ext2fs_be32_to_cpu(*(uint32_t *)(buf + 24));
			f->journal_start = ext2fs_be32_to_cpu(*(uint32_t *)(buf + 28));
		}
	}
	free(buf);
	close(fd);
	return r;
}

static int seal_path(const struct recon_config *cfg, const struct rfs_seal_plan *p, char *out, size_t len)
{
	const char *dir = seal_dir(cfg);
	if (!dir)
		return -ENOENT;
	int n = snprintf(out, len, "%s/%s", dir, p->uuid);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* The seal file at path into *f: 0, -ENOENT (none this process may read),
 * or -EINVAL (not a seal). */
static int load_seal(const char *path, struct seal_facts *f)
{
	FILE *in = fopen(path, "re");
	if (!in)
		return -ENOENT;
	memset(f, 0, sizeof(*f));
	char line[128];
	int seen = 0;
	bool magic = fgets(line, sizeof(line), in) && !strcmp(line, SEAL_MAGIC "\n");
	while (magic && fgets(line, sizeof(line), in)) {
		char key[40];
		uint64_t v;
		if (sscanf(line, "%39s %" SCNx64, key, &v) != 2)
			continue;
		seen += !strcmp(key, "groups") ? (f->groups = (uint32_t)v, 1)
		      : !strcmp(key, "mnt_count") ? (f->mnt_count = (uint32_t)v, 2)
		      : !strcmp(key, "wtime") ? (f->wtime = v, 4)
		      : !strcmp(key, "kbytes_written") ? (f->kbytes_written = v, 8)
		      : !strcmp(key, "journal_sequence") ? (f->journal_sequence = (uint32_t)v, 16)
		      : !strcmp(key, "sb_digest") ? (f->sb_digest = v, 32)
		      : !strcmp(key, "desc_digest") ? (f->desc_digest = v, 64)
		      : !strcmp(key, "ibitmap_digest") ? (f->ibitmap_digest = v, 128) : 0;
	}
	fclose(in);
	f->clean = true;
	return magic && seen == 255 ? 0 : -EINVAL;
}

/* Why the device's facts do not match the seal's, or NULL when they do. */
static const char *mismatch(const struct seal_facts *s, const struct seal_facts *d, char *buf, size_t len)
{
	if (!d->clean)
		return "the file system has errors or needs recovery";
	if (d->journal_start)
		return "its journal is not empty";
	if (s->mnt_count != d->mnt_count) {
		snprintf(buf, len, "mount count %u, sealed at %u: mounted by another driver since",
			 d->mnt_count, s->mnt_count);
		return buf;
	}
	if (s->wtime != d->wtime || s->kbytes_written != d->kbytes_written)
		return "the superblock's write time or kbytes written changed: written by another driver";
	if (s->groups != d->groups || s->sb_digest != d->sb_digest)
		return "the superblock changed";
	if (s->desc_digest != d->desc_digest)
		return "the group descriptors changed";
	if (s->journal_sequence != d->journal_sequence)
		return "the journal's sequence changed";
	return NULL;
}

static void sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
}

void rfs_seal_drop(struct rfs *r, ext2_filsys fs)
{
	const char *dir = seal_dir(r->cfg);
	struct rfs_seal_plan p;
	char path[4096];
	if (!dir || rfs_seal_plan(fs, &p) || seal_path(r->cfg, &p, path, sizeof(path)))
		return;
	if (unlink(path) == 0)
		sync_dir(dir);
}

/* Is group g pristine by its descriptor: no inode in use, no block but its
 * static ones (superblock and descriptor copies, bitmaps, table, all
 * inside it)?  At the sealed unmount the checked state had each count equal
 * to its bitmap's clear bits and every static block marked, so these counts
 * mean exactly the static pattern. */
static bool pristine_group(ext2_filsys fs, dgrp_t g)
{
	blk64_t start = ext2fs_group_first_block2(fs, g), end = start + fs->super->s_blocks_per_group;
	blk64_t bb = ext2fs_block_bitmap_loc(fs, g), ib = ext2fs_inode_bitmap_loc(fs, g);
	blk64_t it = ext2fs_inode_table_loc(fs, g), sup, od, nd;
	blk_t used = 0;
	if (ext2fs_bg_free_inodes_count(fs, g) != fs->super->s_inodes_per_group ||
	    ext2fs_bg_used_dirs_count(fs, g) != 0 || bb < start || bb >= end || ib < start ||
	    ib >= end || it < start || it + fs->inode_blocks_per_group > end ||
	    ext2fs_super_and_bgd_loc2(fs, g, &sup, &od, &nd, &used))
		return false;
	return ext2fs_bg_free_blocks_count(fs, g) ==
	       fs->super->s_blocks_per_group - used - 2 - fs->inode_blocks_per_group;
}

/* The groups pristine by their descriptors, as bits (malloc'd), or NULL
 * where rfs_read_bitmaps would read every group anyway or none is. */
static uint8_t *pristine_groups(ext2_filsys fs)
{
	struct ext2_super_block *sb = fs->super;
	if (ext2fs_has_group_desc_csum(fs) || ext2fs_has_feature_bigalloc(sb) ||
	    ext2fs_has_feature_flex_bg(sb) || ext2fs_has_feature_meta_bg(sb) ||
	    sb->s_blocks_per_group / 8 > fs->blocksize || sb->s_inodes_per_group / 8 > fs->blocksize)
		return NULL;
	uint8_t *bits = calloc((size_t)fs->group_desc_count / 8 + 1, 1);
	bool any = false;
	/* the last group is short: always read */
	for (dgrp_t g = 0; bits && g + 1 < fs->group_desc_count; g++)
		if (pristine_group(fs, g)) {
			bits[g / 8] |= (uint8_t)(1u << (g % 8));
			any = true;
		}
	if (!any) {
		free(bits);
		bits = NULL;
	}
	return bits;
}

/* No seal to use: with the background check, the groups pristine by their
 * descriptors are only claimed so: their bitmaps are not read now, and io
 * verifies them, with their tables, before anything relies on them
 * (checker/README.md, "Claimed groups"). */
static void claim_pristine(struct rfs *r, ext2_filsys fs, struct rfs_seal *out)
{
	if (!r->cfg->io.base_check_background || !(out->pristine = pristine_groups(fs)))
		return;
	if (rio_set_claimed_groups(fs->io, out->pristine, fs->group_desc_count)) {
		free(out->pristine);
		out->pristine = NULL;
	}
}

void rfs_seal_take(struct rfs *r, ext2_filsys fs, struct rfs_seal *out)
{
	const char *dev = r->cfg->device, *dir = seal_dir(r->cfg);
	struct rfs_seal_plan p;
	char path[4096], why[160];
	struct seal_facts sealed, now;
	memset(out, 0, sizeof(*out));
	if (!dir || rfs_seal_plan(fs, &p) || seal_path(r->cfg, &p, path, sizeof(path))) {
		claim_pristine(r, fs, out);
		return;
	}
	int e = load_seal(path, &sealed);
	if (e == -ENOENT) {
		claim_pristine(r, fs, out);
		return;
	}
	const char *bad = e ? "the seal file is not one" : NULL;
	if (!bad && (e = read_facts(dev, &p, &now)))
		bad = "cannot read the device's superblock, descriptors or journal";
	if (!bad)
		bad = mismatch(&sealed, &now, why, sizeof(why));
	/* used once: the mount writes from here on, and only a clean unmount
	 * seals again (a stale one goes too) */
	if (unlink(path) && errno != ENOENT && !bad)
		bad = "cannot remove the seal before writing";
	sync_dir(dir);
	if (bad) {
		fprintf(stderr, "recon-fuse: %s: seal %s not used (%s): every inode table is checked\n",
			dev, path, bad);
		claim_pristine(r, fs, out);
		return;
	}
	out->matched = true;
	out->groups = sealed.groups;
	out->ibitmap_digest = sealed.ibitmap_digest;
	out->pristine = pristine_groups(fs);
	if (out->pristine && rio_set_pristine_groups(fs->io, out->pristine, fs->group_desc_count)) {
		free(out->pristine);
		out->pristine = NULL;
	}
}

bool rfs_seal_use(struct rfs *r, ext2_filsys fs, const struct rfs_seal *s)
{
	uint64_t h;
	if (!s->matched || s->groups != fs->group_desc_count || !fs->inode_map)
		return false;
	if (ibitmap_digest(fs, &h) || h != s->ibitmap_digest) {
		fprintf(stderr, "recon-fuse: %s: seal not used (the inode bitmaps changed: written by "
			"another driver): every inode table is checked\n", r->cfg->device);
		return false;
	}
	size_t n = ((size_t)s->groups + 7) / 8;
	uint8_t *all = malloc(n);
	if (!all)
		return false;
	memset(all, 0xff, n);
	errcode_t err = rio_set_sealed_groups(fs->io, all, s->groups);
	free(all);
	return err == 0;
}

/* Beyond SEAL_KEEP seals, the least recently written go (a test suite
 * mounts thousands of file systems that are never seen again). */
static void prune(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct { char name[40]; time_t mtime; } *ents = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		struct stat st;
		if (de->d_name[0] == '.' || strlen(de->d_name) >= sizeof(ents->name) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		if (n == cap) {
			void *ne = realloc(ents, (cap = cap ? 2 * cap : 64) * sizeof(*ents));
			if (!ne)
				break;
			ents = ne;
		}
		strcpy(ents[n].name, de->d_name);
		ents[n++].mtime = st.st_mtime;
	}
	for (size_t k = SEAL_KEEP; k < n; k++) {
		size_t old = 0;
		for (size_t i = 1; i < n; i++)
			if (ents[i].mtime < ents[old].mtime)
				old = i;
		(void)unlinkat(dirfd(d), ents[old].name, 0);
		ents[old].mtime = (time_t)INT64_MAX;
	}
	free(ents);
	closedir(d);
}

/* mkdir -p of dir, root-only (0700). */
static int make_dir(const char *dir)
{
	char buf[4096];
	if (snprintf(buf, sizeof(buf), "%s", dir) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (char *s = buf + 1;; s++) {
		if (*s && *s != '/')
			continue;
		char c = *s;
		*s = 0;
		if (mkdir(buf, 0700) && errno != EEXIST)
			return -errno;
		*s = c;
		if (!c)
			return 0;
	}
}

void rfs_seal_write(const struct recon_config *cfg, const struct rfs_seal_plan *p)
{
	const char *dir = seal_dir(cfg);
	char path[4096], tmp[4200];
	struct seal_facts f;
	if (!dir || seal_path(cfg, p, path, sizeof(path)))
		return;
	int e = read_facts(cfg->device, p, &f);
	if (!e && (!f.clean || f.journal_start || !p->ibitmap_digest))
		e = -EINVAL;
	if (!e)
		e = make_dir(dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *out = e ? NULL : fopen(tmp, "we");
	if (!e && !out)
		e = -errno;
	if (out) {
		fprintf(out, SEAL_MAGIC "\n");
		fprintf(out, "groups %" PRIx32 "\nmnt_count %" PRIx32 "\nwtime %" PRIx64 "\n", f.groups,
			f.mnt_count, f.wtime);
		fprintf(out, "kbytes_written %" PRIx64 "\njournal_sequence %" PRIx32 "\n", f.kbytes_written,
			f.journal_sequence);
		fprintf(out, "sb_digest %016" PRIx64 "\ndesc_digest %016" PRIx64 "\n", f.sb_digest,
			f.desc_digest);
		fprintf(out, "ibitmap_digest %016" PRIx64 "\n", p->ibitmap_digest);
		if (fflush(out) || fsync(fileno(out)))
			e = -errno;
		if (fclose(out) && !e)
			e = -errno;
		if (!e && rename(tmp, path))
			e = -errno;
		if (e)
			(void)unlink(tmp);
	}
	/* a user's mount cannot write the default folder: no seal, said nowhere */
	if (e && !cfg->seal_dir && (e == -EACCES || e == -EPERM || e == -EROFS))
		return;
	if (e) {
		fprintf(stderr, "recon-fuse: %s: no seal written in %s (%s): the next mount checks "
			"every inode table\n", cfg->device, dir, strerror(-e));
		return;
	}
	sync_dir(dir);
	prune(dir);
}
