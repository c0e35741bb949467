/*
 * tests/jbd/jbd_util.h - what the jbd tests share: checks, scratch files,
 * images opened both through libext2fs and as a jbd_dev, known block
 * contents, a logged scenario, our replay and e2fsck's side by side.
 *
 * Every helper that cannot go on exits the test (REQUIRE); CHECK counts a
 * failure and goes on.
 */
#ifndef RECON_TESTS_JBD_UTIL_H
#define RECON_TESTS_JBD_UTIL_H

#include "jbd.h"
#include "test_util.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define JBD_MAGIC 0xc03b3998U

extern int failures;
extern char scratch[256];

/* CHECK counts a failure and goes on; REQUIRE ends the test. */
#define CHECK TEST_CHECK
#define REQUIRE TEST_REQUIRE

uint32_t get_be32(const unsigned char *p);
void put_be32(unsigned char *p, uint32_t v);
void path_in(char *out, size_t len, const char *name);
void make_scratch(void);
void remove_scratch(void);

/* ---- a jbd_dev over an image file ---- */
struct fdev {
	int fd;
	unsigned bs;
	unsigned long writes, flushes;
};

/* An image opened both through libext2fs (mapping, bitmaps, inodes) and as a
 * jbd_dev. */
struct img {
	char path[512];
	ext2_filsys fs;
	struct fdev d;
	struct jbd_dev jd;
	struct jbd *j;
	unsigned bs;
};

struct expect {
	uint64_t blk;
	unsigned v;       /* 0 = the original home contents */
	bool escaped;
};

struct scenario {
	struct expect e[1024];
	size_t n;
	uint32_t atime;            /* root inode's atime as logged */
	uint64_t logged[1024];     /* every home block logged (for logdump) */
	size_t nlogged;
	unsigned ntx;
};

/* One transaction: blocks F[idx[i]] at version v (escaped where esc says). */
struct txb {
	uint64_t blk[512];
	unsigned char *data[512];
	size_t n;
};

errcode_t fdev_read(void *ctx, uint64_t blk, void *buf);
errcode_t fdev_write(void *ctx, uint64_t blk, unsigned count, const void *buf);
errcode_t fdev_flush(void *ctx);
void img_open_fs(struct img *im);
errcode_t img_open_jbd(struct img *im, char *msg, size_t msglen);
void img_open(struct img *im, const char *path);
/* Close everything; with set_recover, leave needs_recovery set as a crash
 * would. */
void img_close(struct img *im, bool set_recover);
void read_home(const char *path, unsigned bs, uint64_t blk, void *buf);
void write_home(struct img *im, uint64_t blk, const void *buf);
/* mke2fs -t ext3 -b bs [extra] path size_mb M */
void mkfs(const char *path, unsigned bs, unsigned size_mb, const char *extra);
/* Deterministic contents for block blk, version v; escaped ones start with
 * the journal magic. */
void pattern(unsigned char *buf, unsigned bs, uint64_t blk, unsigned v, bool escaped);
/* n free blocks from the top of the file system */
size_t free_blocks(ext2_filsys fs, uint64_t *out, size_t n);
int check_expect(const char *path, unsigned bs, const struct expect *e, size_t n,
		 const char *who);
/* Blocks that differ between two images outside skip[] (printing a few). */
size_t compare_images(const char *a, const char *b, unsigned bs, const uint64_t *skip,
		      size_t nskip);
void copy_file(const char *from, const char *to);
/* Our replay on path, as rio does: open, recover, clear needs_recovery; a
 * view replay (jbd_dev.view) when view. */
errcode_t our_recover(const char *path, bool view, unsigned *replayed, char *msg, size_t msglen);
/* The file-system block holding the journal superblock of the image. */
uint64_t jsb_block(const char *path);
/* The journal superblock's (s_start, s_sequence) as on disk. */
void jsb_state(const char *path, uint32_t *start, uint32_t *seq);
/* e2fsck OPTS PATH, its output in PATH.fsck.log; its exit status */
int e2fsck(const char *opts, const char *path);

/* ---- scenario: several transactions, escapes, revokes, a big one ---- */
void expect_set(struct scenario *s, uint64_t blk, unsigned v, bool esc);
void tx_add(struct txb *t, unsigned bs, uint64_t blk, unsigned v, bool esc);
void tx_log(struct img *im, struct scenario *s, struct txb *t, const uint64_t *rv, size_t nrv);
/* Build the scenario on a fresh image; leaves it needing recovery. */
void build_scenario(const char *path, unsigned bs, struct scenario *s);
void verify_scenario(const char *path, unsigned bs, const struct scenario *s, const char *who);
void check_logdump(const char *path, const struct scenario *s);
/* Blocks that legitimately differ between e2fsck's replay and ours. */
size_t sb_blocks(unsigned bs, uint64_t *skip);

bool can_mount(void);
/* Overwrite, via fn, the log block `after` blocks past the first log block
 * of transaction tid whose type is `type` (after 0: that block itself). */
bool patch_log_block(const char *path, uint32_t tid, uint32_t type, unsigned after,
		     void (*fn)(unsigned char *buf, unsigned bs));
void zero_block(unsigned char *buf, unsigned bs);
void bump_tid(unsigned char *buf, unsigned bs);

/* ---- journals others wrote ---- */
/* The corpus image NAME gunzipped to `to`; false when there is no corpus. */
bool gunzip_corpus(const char *name, const char *to);
/* Our replay (of a copy) and e2fsck's (of a) leave the same image, block
 * for block but the superblock's.  CMP_STRICT: compared right after e2fsck
 * -E journal_only (which still clears orphans: only for images without
 * any); otherwise both are then run through e2fsck -fy at a fixed clock
 * (E2FSCK_TIME) and must converge.  CMP_VIEW: ours is a view replay.
 * CMP_SKIP_JSB: the journal superblocks may differ (e2fsck records an error
 * in it).  CMP_ANY_EXIT: e2fsck's exit status is not judged. */
enum { CMP_STRICT = 1, CMP_VIEW = 2, CMP_SKIP_JSB = 4, CMP_ANY_EXIT = 8 };
void compare_replays(const char *a, const char *what, unsigned how);

#endif
