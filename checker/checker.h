/*
 * checker/checker.h - the one public header of checker/: Recon's shadow
 * consistency checker for ext2/ext3, and ext4 as far as the feature table
 * says (chk_features).
 *
 * It decides whether one transaction of metadata writes keeps a consistent
 * file system consistent, from block contents alone.  It never sees a
 * libext2fs file-system handle: it may use ext2_fs.h's on-disk definitions,
 * byte swapping and the directory-hash / crc helpers, nothing else.  No FUSE,
 * no io_uring: the device is reached only through the caller's read callback.
 *
 * Errors: functions return 0 or -errno (and fill `err` with a message where
 * they take one).  A rejected transaction is not an error: it is a verdict.
 *
 * Threads: one chk_fs is used by one thread at a time (the caller's commit
 * path).  Different chk_fs objects are independent.
 */
#ifndef RECON_CHECKER_H
#define RECON_CHECKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Read `len` bytes at byte `offset` of the approved (last committed) state of
 * the device into buf.  Returns 0 or -errno.  The checker calls it at attach
 * and on cache misses; it must never return contents of a transaction that
 * has not been approved.
 */
typedef int (*chk_read_fn)(void *ctx, uint64_t offset, void *buf, size_t len);

/* Optional: 1 when len bytes at offset read as zeros and the caller knows it
 * without reading them (a hole in an image file), else 0.  Whole-image
 * passes then skip empty inode tables of empty groups. */
typedef int (*chk_zero_fn)(void *ctx, uint64_t offset, size_t len);

struct chk_options {
	size_t cache_bytes;   /* metadata block cache (LRU); 0 = default 128 MiB */
	chk_zero_fn zero;     /* may be NULL */
	/* Optional: bit g set (of npristine bits, the image's group count) for
	 * each group the caller vouches is pristine: its block bitmap exactly its
	 * static blocks, its inode bitmap clear, every inode of its table in the
	 * free form (a seal; checker/README.md).  Neither bitmap nor table of
	 * such a group is read; chk_scan treats it as sealed (chk_set_sealed).
	 * Copied; NULL: every group is read. */
	const uint8_t *pristine;
	uint32_t npristine;
	/* The pristine groups are only claimed (their descriptors count no
	 * inode and no block but the static ones, no seal vouches): attached
	 * as above, unread, but each is left deferred by chk_scan (its whole
	 * table its tail) and chk_check_tail verifies its bitmaps first
	 * (chk_group_claimed). */
	bool pristine_claimed;
	bool   lazy;          /* reserved: build the type/owner map lazily (unused: always full scan) */
};

struct chk_fs;

/*
 * The feature table: every ext2/3/4 feature bit the kernel defines, with
 * whether the driver writes images that carry it (`written`: served
 * read-write) and whether the checker models it (`modelled`: chk_attach
 * accepts it).  The driver's read-write gate and chk_attach both decide
 * from this one table; the driver serves read-write (checked) what is both.
 * The checker may model what the driver does not write (recon-check judges
 * any image).  Pure data; any thread.
 */
enum chk_feature_word { CHK_COMPAT, CHK_RO_COMPAT, CHK_INCOMPAT };
struct chk_feature {
	enum chk_feature_word word;
	uint32_t mask;
	const char *name;	/* as mke2fs -O spells it */
	bool written;
	bool modelled;
};
const struct chk_feature *chk_features(size_t *n);

/* What chk_feature_missing asks of each feature set. */
#define CHK_NEED_WRITTEN 1u
#define CHK_NEED_MODELLED 2u
/*
 * words[CHK_COMPAT], [CHK_RO_COMPAT], [CHK_INCOMPAT]: a superblock's feature
 * words (zeros for a revision-0 superblock, whose words mean nothing).  The
 * name of the first feature set there that lacks what `need` asks, or of a
 * bit no row names ("an unknown incompatible feature (0x...)", written into
 * buf); NULL when every feature set qualifies.  Incompatible bits first.
 */
const char *chk_feature_missing(const uint32_t words[3], unsigned need, char *buf, size_t len);

/*
 * Attach to the file system behind `read`: read the superblock (offset 1024)
 * and group descriptors, load both bitmaps, scan inode tables, indirect and
 * extent tree blocks into the type/owner map.  Refuses (-EINVAL, with a
 * message in err) what is not ext2/3/4 or uses a feature we do not model.
 * Attaching does not judge the image; chk_scan() does.
 */
int  chk_attach(struct chk_fs **out, chk_read_fn read, void *ctx,
		const struct chk_options *opt, char *err, size_t errlen);
void chk_detach(struct chk_fs *fs);

/*
 * Take the superblock anew after the caller changed it on the device between
 * chk_attach and the first chk_check: a mount's recounted free counts and its
 * "mounted" marks, written while the attach ran beside it.  Only what
 * describes no layout may differ (free counts, s_state, the needs-recovery
 * flag, write and mount times, the mount count, s_kbytes_written, the
 * checksum); the rest of the attached state is kept.  0: the re-read
 * superblock is the approved one; -ESTALE: something else differs (the
 * state is unchanged: detach and attach anew); or the read's -errno.
 */
int  chk_refresh_super(struct chk_fs *fs);

/* File-system block size, in bytes (valid after attach). */
uint32_t chk_block_size(const struct chk_fs *fs);

/* ---- queries on the approved state (the data path's guard) ----
 * Both read only the type/owner map.  chk_check does not change it, so they
 * may run beside a chk_check on another thread; chk_advance changes it, so
 * the caller keeps them apart from it (io/ holds a lock around the advance).
 */

/*
 * May file data of inode `ino` be written to block `blk`?  True when the
 * approved state's type/owner map says that no pointer names blk (free,
 * whatever its bitmap bit says), or that blk is a data block of `ino`
 * itself.  False for a block outside the data area, static metadata
 * (superblocks, descriptors, reserved GDT, bitmaps, inode tables), an
 * indirect, extent tree, directory or xattr block, another inode's data block, and any
 * block when `ino` is not an ordinary inode (0, reserved, the journal's or
 * past s_inodes_count).  A block bitmap that says free for a block some
 * pointer still names is what this catches before data overwrites it.
 */
bool chk_data_block_ok(const struct chk_fs *fs, uint64_t blk, uint32_t ino);

/* What the approved state's type/owner map records for one block, for
 * messages: type is "free", "data", "dir", "ind", "dind", "tind", "xattr",
 * "extent" (an extent tree block), "boot", "sb", "gdt", "rgdt", "resize_ind",
 * "bbitmap", "ibitmap", "itable" or "out of range"; owner the inode (bitmaps and inode tables: their
 * group; free blocks, superblocks and descriptors: 0); lblk the logical
 * block within its owner (data and directory blocks, else 0). */
struct chk_block_info {
	const char *type;
	uint32_t    owner;
	uint32_t    lblk;
};
void chk_block_info(const struct chk_fs *fs, uint64_t blk, struct chk_block_info *out);

/* A block the caller read from the approved state, offered to warm the cache
 * (block_size bytes).  Optional; never required for correctness. */
void chk_note_read(struct chk_fs *fs, uint64_t blk, const void *buf);

/* One write of a transaction: a byte range of the device and its new bytes.
 * Ranges may be partial blocks (a 1 KiB superblock inside a 4 KiB block) and
 * may overlap; later entries win. */
struct chk_write {
	uint64_t    offset;
	uint32_t    len;
	const void *data;
};

/* ---- change records: `type | id | field | old | new` ---- */
enum chk_rtype {
	CHK_SB, CHK_BGD, CHK_BBITMAP, CHK_IBITMAP, CHK_INODE,
	CHK_DIRENT, CHK_IND, CHK_XATTR, CHK_HTREE,
	CHK_EXTENT       /* id: the inode; field "tree block" or the logical run "L+N" */
};

struct chk_record {
	enum chk_rtype type;
	uint64_t       id;     /* group, block or inode number; ignored for CHK_SB ("-") */
	const char    *field;  /* "i_block[1]", "[37]", "\"name\"", "-" ... (owned by the verdict) */
	int64_t        old_value;
	int64_t        new_value;
};

/* "sb", "bgd", "bbitmap", "ibitmap", "inode", "dirent", "ind", "xattr", "htree", "extent" */
const char *chk_rtype_name(enum chk_rtype t);

/* Formats one record in the grammar ("inode | 12 | i_size | 4096 | 8192").
 * Returns the length snprintf would have written. */
int chk_record_format(const struct chk_record *r, char *buf, size_t len);

/* ---- invariants: one table, printed by `recon-check --list-invariants` ---- */
struct chk_invariant {
	const char *id;           /* stable id, e.g. "INV_BLOCK_OWNED_ONCE" */
	const char *description;  /* one line: what it says of a transition */
	const char *state;        /* one line: what it says of one image (chk_scan) */
};
size_t chk_invariant_count(void);
const struct chk_invariant *chk_invariant_at(size_t i);

/* ---- verdicts ---- */
struct chk_violation {
	const struct chk_invariant *inv;
	const char   *detail;     /* one line: what exactly is wrong (owned by the verdict) */
	size_t        nrecords;   /* indexes into the verdict's records */
	const size_t *records;
};

struct chk_verdict;

/*
 * Check a transaction against the current approved state.  Computes the
 * logical diff into change records and evaluates every invariant.  Does not
 * change the approved state.  Returns 0 with *out set (approved or not), or
 * -errno if the check itself could not run (read error, out of memory): the
 * caller must then treat the transaction as not approved.
 */
int  chk_check(struct chk_fs *fs, const struct chk_write *w, size_t n,
	       struct chk_verdict **out);

bool   chk_verdict_ok(const struct chk_verdict *v);
size_t chk_verdict_nrecords(const struct chk_verdict *v);
const struct chk_record *chk_verdict_record(const struct chk_verdict *v, size_t i);
size_t chk_verdict_nviolations(const struct chk_verdict *v);
const struct chk_violation *chk_verdict_violation(const struct chk_verdict *v, size_t i);
void   chk_verdict_free(struct chk_verdict *v);

/*
 * Advance the approved state to the transaction's after-state (shadow
 * bitmaps, counters, type/owner map, cache).  Normally called only for an
 * approved verdict; `on_violation = log` calls it for a rejected one too.
 * The verdict stays valid until freed.  Returns 0 or -errno.
 */
int chk_advance(struct chk_fs *fs, const struct chk_verdict *v);

/*
 * The base case: check the whole attached image for the global properties
 * the invariants preserve (bitmaps match pointers, no block owned twice,
 * counters match bitmaps, link counts match entries, ...).  Returns 0 with
 * *out set (violations listed, records empty), -EOPNOTSUPP when an inode
 * keeps an xattr's value in another inode (ea_inode, not modelled: the
 * image cannot be judged), or -errno.
 */
int chk_scan(struct chk_fs *fs, struct chk_verdict **out);

/*
 * For the next chk_scan calls: bit g set (of ngroups bits, the attached
 * image's group count) for each group whose free inodes the caller vouches
 * for: a scan found them in the free form and only approved commits wrote
 * the table since (a seal; checker/README.md says what it rests on).
 * chk_scan then reads of such a group's table only the blocks up to its last
 * inode in use, none when it has none; with group 0's bit, not the resize
 * inode's double-indirect and reserved GDT blocks either (no approved commit
 * writes them: INV_STATIC_FROZEN).  Copied; NULL: every table is read in
 * full.  0, -EINVAL (ngroups is not the image's) or -ENOMEM.
 */
int chk_set_sealed(struct chk_fs *fs, const uint8_t *bits, uint32_t ngroups);

/* ---- deferred table tails ----
 * What the base case learns from a group's inode table past its last inode
 * in use is only that each free inode there is in the free form
 * (INV_FREE_INODE_FORM; INV_CSUM_INODE with metadata_csum; an inode in a
 * bad block free in the bitmap).  A caller may have chk_scan leave that
 * part, the group's *tail*, for later, and check it group by group with
 * chk_check_tail, provided no verdict relies on a tail before it is checked:
 * before chk_check of a transaction that writes a block of a deferred
 * group's inode table or inode bitmap (chk_block_info: "itable" or "ibitmap",
 * owner the group), the caller checks that group's tail.  No other change
 * reads a free inode's contents (an entry or orphan naming a free inode is
 * rejected from the bitmap alone).  These calls are checker calls as any:
 * one thread at a time with chk_check, chk_advance and chk_scan on the same
 * chk_fs (the caller's lock).
 */

/* For the next chk_scan calls: when on, every group that is neither sealed
 * nor pristine is read as a sealed one (up to its last inode in use; group 0
 * at least past the reserved inodes), and is marked deferred when its table
 * holds initialised inodes past what was read.  Marks from an earlier scan
 * are replaced. */
void chk_set_defer_tails(struct chk_fs *fs, bool on);

/* Groups marked deferred (by chk_scan or chk_set_deferred) and not checked
 * since; and whether group g is one (false past the group count). */
uint32_t chk_deferred_count(const struct chk_fs *fs);
bool chk_group_deferred(const struct chk_fs *fs, uint32_t g);

/* The deferred marks as ngroups bits (the image's group count), NULL when
 * none; valid until the next call that changes them.  chk_set_deferred
 * gives them to a checker attached anew to the same state (the caller
 * re-attached after the scan): copied, NULL clears; 0, -EINVAL (ngroups is
 * not the image's) or -ENOMEM. */
const uint8_t *chk_deferred_bits(const struct chk_fs *fs);
int chk_set_deferred(struct chk_fs *fs, const uint8_t *bits, uint32_t ngroups);

/* Where deferred group g's tail lies on the device: *offset (block-aligned)
 * and *len bytes, whole blocks; *len 0 when g is not deferred.  What
 * chk_check_tail wants, for a caller that reads it itself (off the lock). */
void chk_tail_extent(const struct chk_fs *fs, uint32_t g, uint64_t *offset, size_t *len);

/* Claimed groups (chk_options.pristine_claimed) whose bitmaps are not
 * verified yet, and whether g is one.  Each is deferred too; besides its
 * inode table and inode bitmap, a write of its block bitmap relies on the
 * claim (a block allocated or freed there), so the caller checks the group
 * before chk_check of a transaction that writes any of the three, and
 * before file data is written to one of its blocks. */
uint32_t chk_claimed_count(const struct chk_fs *fs);
bool chk_group_claimed(const struct chk_fs *fs, uint32_t g);

/* Where claimed group g's two bitmaps lie when the inode bitmap follows
 * the block bitmap: *offset and *len (two blocks, block bitmap first);
 * *len 0 when g's claim is verified or they are apart. */
void chk_claim_extent(const struct chk_fs *fs, uint32_t g, uint64_t *offset, size_t *len);

/*
 * Check deferred group g's tail as chk_scan checks any table: `table` holds
 * the chk_tail_extent bytes read from the approved state (the caller vouches
 * that no approved commit wrote them since the read), or is NULL for the
 * checker to read them through its read callback.  A claimed group's
 * bitmaps are verified first: exactly the static pattern (its static
 * blocks set, every other bit of the block bitmap clear; the inode bitmap
 * clear), padding all set; `bitmaps` holds the chk_claim_extent bytes read
 * as `table` is, or is NULL for the checker to read them.  Clears g's
 * marks, whatever the verdict.  0 with *out set (violations listed, records
 * empty; *out NULL when g was not deferred), or -errno (a read's; g stays
 * deferred, and claimed).
 */
int chk_check_tail(struct chk_fs *fs, uint32_t g, const void *table, const void *bitmaps,
		   struct chk_verdict **out);

struct chk_stats {
	uint64_t transactions;      /* chk_check calls */
	uint64_t blocks_checked;    /* distinct blocks diffed */
	uint64_t cache_hits, cache_misses;
	uint64_t cpu_ns;            /* thread CPU time spent in chk_check, chk_advance and chk_scan */
	uint64_t scan_cpu_ns;       /* the part of it spent in chk_scan */
	uint64_t violations;        /* rejected verdicts */
	uint64_t scan_tables_read;  /* groups whose inode table chk_scan read (in full or in part) */
	uint64_t scan_tables_sealed;/* groups whose table it read in part or not at all for a seal */
	uint64_t scan_table_bytes;  /* bytes of inode table chk_scan read */
	uint64_t pristine_groups;   /* groups whose bitmaps attach took as pristine, unread */
	uint64_t claimed_groups;    /* of those, the ones only claimed (pristine_claimed) */
	uint64_t scan_tails_deferred;/* groups whose table tail chk_scan left deferred */
	uint64_t tails_checked;     /* deferred tails chk_check_tail checked */
};
void chk_get_stats(const struct chk_fs *fs, struct chk_stats *out);

#endif
