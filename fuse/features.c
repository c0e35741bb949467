/*
 * fuse/features.c - the read-write gate: which images the driver serves
 * read-write, decided from the checker's feature table (checker/features.c),
 * the one table the checker's attach also reads.
 */
#include "rfs.h"
#include "checker.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

static bool uuid_is_null(const uint8_t *u)
{
	for (int i = 0; i < 16; i++)
		if (u[i])
			return false;
	return true;
}

int rfs_rw_refusal(const struct ext2_super_block *sb, const char *dev, bool checker, char *msg,
		   size_t len)
{
	char fbuf[64];

	if ((sb->s_feature_compat & EXT3_FEATURE_COMPAT_HAS_JOURNAL) &&
	    (sb->s_journal_inum == 0 || !uuid_is_null(sb->s_journal_uuid))) {
		snprintf(msg, len, "%s uses an external journal, which recon-fuse cannot write; "
			 "mount it read-only with -o ro", dev);
		return -1;
	}
	uint32_t words[3] = { 0, 0, 0 };
	if (sb->s_rev_level) {
		words[CHK_COMPAT] = sb->s_feature_compat;
		words[CHK_RO_COMPAT] = sb->s_feature_ro_compat;
		words[CHK_INCOMPAT] = sb->s_feature_incompat;
	}
	const char *f = chk_feature_missing(words, CHK_NEED_WRITTEN, fbuf, sizeof(fbuf));
	if (f) {
		snprintf(msg, len, "%s uses %s, which recon-fuse cannot write; mount it read-only "
			 "with -o ro", dev, f);
		return -1;
	}
	if (!checker)
		return 0;
	f = chk_feature_missing(words, CHK_NEED_MODELLED, fbuf, sizeof(fbuf));
	if (f) {
		snprintf(msg, len, "%s uses %s, which the checker does not model; mount it "
			 "read-only with -o ro (or read-write unchecked with -o checker=off)", dev, f);
		return -1;
	}
	return 0;
}

int rfs_read_super(const char *dev, struct ext2_super_block *sb)
{
	int fd = open(dev, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = pread(fd, sb, sizeof(*sb), SUPERBLOCK_OFFSET);
	int err = n < 0 ? -errno : 0;
	close(fd);
	if (n >= 0 && (size_t)n < sizeof(*sb))
		err = -ENODATA;
#ifdef WORDS_BIGENDIAN
	if (!err)
		ext2fs_swap_super(sb);
#endif
	return err;
}
