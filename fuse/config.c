/*
 * fuse/config.c - recon-fuse's configuration (see config.h): defaults, then
 * the config file (libconfig syntax), then -o key=value.  Every value from
 * either source goes through one setter, so both accept the same spellings.
 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stddef.h>
#include <inttypes.h>
#include <libconfig.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_CONFIG_FILE "/etc/recon-fuse.conf"

static const struct rio_config io_defaults = RIO_CONFIG_DEFAULTS;

enum key_kind { K_BOOL, K_UINT, K_U64, K_STR, K_ATIME, K_ONV, K_ERRORS, K_DATA, K_COMMIT, K_MAPROOT,
		K_URING, K_UID, K_GID, K_BASECHECK };

struct key_desc {
	const char *name;
	const char *arg;    /* what the value is, for --help (NULL: a boolean) */
	enum key_kind kind;
	size_t off;
	bool test_only;     /* accepted from -o alone */
	const char *help;
};

#define F(field) offsetof(struct recon_config, field)
static const struct key_desc keys[] = {
	{ "force_rw", NULL, K_BOOL, F(force_rw), false,
	  "mount read-write an image marked with errors or not cleanly unmounted" },
	{ "rw_unchecked", NULL, K_BOOL, F(rw_unchecked), false,
	  "mount read-write without checking the image first (risky: trusts it)" },
	{ "atime", "POLICY", K_ATIME, F(atime), false, "relatime (default), noatime or strictatime" },
	{ "pidfile", "FILE", K_STR, F(pidfile), false, "write the daemon's pid to FILE once mounted" },
	{ "log", "FILE", K_STR, F(log_file), false, "append every message to FILE, time-stamped" },
	{ "seal_dir", "DIR", K_STR, F(seal_dir), false,
	  "where clean unmounts leave the seal that spares the next mount reading empty inode "
	  "tables (/var/lib/recon-fuse/seals; none: no seals)" },
	{ "acl", NULL, K_BOOL, F(acl), false, "POSIX ACLs, enforced by the kernel (on; noacl: off)" },
	{ "user_xattr", NULL, K_BOOL, F(user_xattr), false,
	  "user.* extended attributes (on; nouser_xattr: off)" },
	{ "sync", NULL, K_BOOL, F(sync), false,
	  "every change commits before it returns (also the kernel's sync flag)" },
	{ "dirsync", NULL, K_BOOL, F(dirsync), false, "every directory change commits before it returns" },
	{ "noload", NULL, K_BOOL, F(noload), false, "with ro: no journal replay (norecovery)" },
	{ "map_root", "MODE", K_MAPROOT, F(map_root), false,
	  "show the image's root-owned files as the mounting user's: auto (default: when not root "
	  "and the image's root directory is root's), on, off" },
	{ "grpid", NULL, K_BOOL, F(grpid), false,
	  "new files and directories take their directory's group (off: the creator's, unless "
	  "the directory is setgid)" },
	{ "resuid", "UID", K_UID, F(resuid), false,
	  "a user who may use the reserved blocks, besides root (the superblock's)" },
	{ "resgid", "GID", K_GID, F(resgid), false,
	  "a group whose members may use the reserved blocks (the superblock's)" },
	{ "minixdf", NULL, K_BOOL, F(minixdf), false,
	  "statfs counts every block, metadata too (off: bsddf, without the metadata)" },
	{ "errors", "ACTION", K_ERRORS, F(io.on_violation), false,
	  "ext3's: remount-ro or continue (on_violation=readonly), panic (on_violation=stop)" },
	{ "data", "MODE", K_DATA, 0, false,
	  "ext3's: ordered or writeback (both run ordered); journal is refused" },
	{ "commit", "S", K_COMMIT, F(io.commit_interval_ms), false,
	  "ext3's commit interval in seconds (commit_interval_ms)" },
	{ "block_cache_mb", "N", K_UINT, F(io.block_cache_mb), false, "metadata block cache in MiB (64)" },
	{ "threads", "N", K_UINT, F(threads), false, "FUSE worker threads (1: one thread)" },
	{ "poll_us", "N", K_UINT, F(poll_us), false,
	  "with one thread: poll for the next request this long, in us (50)" },
	{ "fuse_uring", "MODE", K_URING, F(fuse_uring), false,
	  "FUSE requests over io_uring when the kernel offers it: auto (default), on, off" },
	{ "checker", NULL, K_BOOL, F(io.checker), false, "shadow checker on every commit (on)" },
	{ "base_check", "WHEN", K_BASECHECK, F(io.base_check_background), false,
	  "free inodes past each group's last in use: background (default) or foreground" },
	{ "checker_cache_mb", "N", K_UINT, F(io.checker_cache_mb), false, "checker's block cache in MiB (128)" },
	{ "commit_interval_ms", "N", K_UINT, F(io.commit_interval_ms), false, "commit age limit in ms (1000)" },
	{ "max_transaction_blocks", "N", K_UINT, F(io.max_transaction_blocks), false,
	  "commit size limit in blocks (0 = 1024 when no commit runs, a quarter of the journal always)" },
	{ "on_violation", "ACTION", K_ONV, F(io.on_violation), false, "readonly (default), stop or log" },
	{ "journal", NULL, K_BOOL, F(io.journal), false, "log commits through the ext3 journal (on)" },
	{ "async_commit", NULL, K_BOOL, F(io.async_commit), false, "commit on a separate thread (on)" },
	{ "deterministic", NULL, K_BOOL, F(deterministic), true, "test: one thread, no timers" },
	{ "fault_crash_after", "N", K_U64, F(io.fault_crash_after), true, "test: crash after N device writes" },
	{ "fault_seed", "N", K_U64, F(io.fault_seed), true, "test: fault injection seed" },
	{ "fault_corrupt", "KIND@N", K_STR, F(io.fault_corrupt), true, "test: corrupt KIND@N" },
	{ "fault_data_eio", "N", K_U64, F(io.fault_data_eio), true,
	  "test: fail the Nth file-data write with EIO" },
	{ "stats", "FILE", K_STR, F(stats_file), true, "test: write the stats JSON to FILE at unmount" },
	{ "no_uring", NULL, K_BOOL, F(io.no_uring), true, "test: force the pread/pwrite fallback" },
};
#undef F

/*
 * The kernel's ext3 mount options (what Linux 6.18's ext4 driver accepts for
 * an ext3 mount) that are not keys of ours, so that an fstab line written for
 * the kernel works: each is another spelling of one of our keys, or has
 * nothing to change here (the reason shows in --help and recon-fuse(8)), or
 * is refused with the reason.  -o only: a configuration file sets keys.
 */
enum ext3_kind { E_ALIAS, E_NOOP, E_REFUSED };
enum ext3_arg { A_FLAG, A_NUM, A_FLAG_OR_NUM, A_TEXT };

struct ext3_opt {
	const char *name;       /* the kernel's spelling; one with '=' matches itself only */
	enum ext3_arg arg;      /* the value it takes (refused ones: any) */
	enum ext3_kind kind;
	const char *key, *val;  /* E_ALIAS: the key it sets, to this value */
	const char *why;        /* E_ALIAS, E_NOOP: --help's text; E_REFUSED: the message */
	uint32_t max;           /* A_NUM: the largest value (0: any 32-bit number) */
};

static const char R_BARRIER[] = "no effect: the device is flushed at every commit";
static const char R_DISCARD[] = "no effect: recon-fuse does not discard (TRIM) freed blocks";
static const char R_VALIDITY[] =
	"no effect: the checker checks every commit's block pointers (checker=on)";
static const char R_JCSUM[] = "no effect: the ext3 journal is written without checksums";
static const char R_DELALLOC[] =
	"no effect: no delayed allocation, blocks are allocated at write(2)";
static const char R_BATCH[] = "no effect: commits follow commit_interval_ms and fsync";
static const char R_IOPRIO[] =
	"no effect: the journal is written at the daemon's I/O priority (ionice(1))";
static const char R_ATIME[] =
	"no effect: the atime policy covers directories; times are written with their inode";
static const char R_REMOVED[] = "no effect, as in the kernel (options it no longer uses)";
static const char R_DEBUG[] = "no effect: debugging aids of the kernel's driver";
static const char R_ALLOC[] = "no effect: hints to the kernel's block allocator";
static const char R_READAHEAD[] = "no effect: read-ahead of the kernel's driver";
static const char R_ITABLE[] = "no effect: recon-fuse never zeroes inode tables in the background";
static const char R_MBCACHE[] =
	"no effect: recon-fuse never shares an extended attribute block between inodes";
static const char R_DIOREAD[] = "no effect: locking in the kernel's direct I/O path";
static const char R_CRYPT[] = "no effect: it concerns encrypted files, which ext3 has none of";
static const char R_NOQUOTA[] = "no effect: no quota (the quota options are refused)";
static const char R_QUOTA[] = "disk quotas are not supported (no quota files are kept and no "
	"limits enforced); remove the option (noquota is accepted)";
static const char R_EXTJOURNAL[] = "external journals are not supported";

static const struct ext3_opt ext3_opts[] = {
	{ "noacl", A_FLAG, E_ALIAS, "acl", "off", "acl=off", 0 },
	{ "nouser_xattr", A_FLAG, E_ALIAS, "user_xattr", "off", "user_xattr=off", 0 },
	{ "norecovery", A_FLAG, E_ALIAS, "noload", "on", "noload", 0 },
	{ "async", A_FLAG, E_ALIAS, "sync", "off", "sync=off (the default)", 0 },
	{ "bsdgroups", A_FLAG, E_ALIAS, "grpid", "on", "grpid", 0 },
	{ "nogrpid", A_FLAG, E_ALIAS, "grpid", "off", "grpid=off (the default)", 0 },
	{ "sysvgroups", A_FLAG, E_ALIAS, "grpid", "off", "grpid=off (the default)", 0 },
	{ "bsddf", A_FLAG, E_ALIAS, "minixdf", "off", "minixdf=off (the default)", 0 },
	{ "data_err=ignore", A_FLAG, E_NOOP, NULL, NULL,
	  "a file-data write error fails that write (EIO), the file system goes on", 0 },
	{ "barrier", A_FLAG_OR_NUM, E_NOOP, NULL, NULL, R_BARRIER, 0 },
	{ "nobarrier", A_FLAG, E_NOOP, NULL, NULL, R_BARRIER, 0 },
	{ "discard", A_FLAG, E_NOOP, NULL, NULL, R_DISCARD, 0 },
	{ "nodiscard", A_FLAG, E_NOOP, NULL, NULL, R_DISCARD, 0 },
	{ "block_validity", A_FLAG, E_NOOP, NULL, NULL, R_VALIDITY, 0 },
	{ "noblock_validity", A_FLAG, E_NOOP, NULL, NULL, R_VALIDITY, 0 },
	{ "journal_checksum", A_FLAG, E_NOOP, NULL, NULL, R_JCSUM, 0 },
	{ "nojournal_checksum", A_FLAG, E_NOOP, NULL, NULL, R_JCSUM, 0 },
	{ "delalloc", A_FLAG, E_NOOP, NULL, NULL, R_DELALLOC, 0 },
	{ "nodelalloc", A_FLAG, E_NOOP, NULL, NULL, R_DELALLOC, 0 },
	{ "auto_da_alloc", A_FLAG_OR_NUM, E_NOOP, NULL, NULL, R_DELALLOC, 0 },
	{ "noauto_da_alloc", A_FLAG, E_NOOP, NULL, NULL, R_DELALLOC, 0 },
	{ "min_batch_time", A_NUM, E_NOOP, NULL, NULL, R_BATCH, 0 },
	{ "max_batch_time", A_NUM, E_NOOP, NULL, NULL, R_BATCH, 0 },
	{ "journal_ioprio", A_NUM, E_NOOP, NULL, NULL, R_IOPRIO, 7 },
	{ "diratime", A_FLAG, E_NOOP, NULL, NULL, R_ATIME, 0 },
	{ "nodiratime", A_FLAG, E_NOOP, NULL, NULL, R_ATIME, 0 },
	{ "lazytime", A_FLAG, E_NOOP, NULL, NULL, R_ATIME, 0 },
	{ "nolazytime", A_FLAG, E_NOOP, NULL, NULL, R_ATIME, 0 },
	{ "i_version", A_FLAG, E_NOOP, NULL, NULL, R_REMOVED, 0 },
	{ "bh", A_FLAG, E_NOOP, NULL, NULL, R_REMOVED, 0 },
	{ "nobh", A_FLAG, E_NOOP, NULL, NULL, R_REMOVED, 0 },
	{ "orlov", A_FLAG, E_NOOP, NULL, NULL, R_REMOVED, 0 },
	{ "oldalloc", A_FLAG, E_NOOP, NULL, NULL, R_REMOVED, 0 },
	{ "mblk_io_submit", A_FLAG, E_NOOP, NULL, NULL, R_REMOVED, 0 },
	{ "nomblk_io_submit", A_FLAG, E_NOOP, NULL, NULL, R_REMOVED, 0 },
	{ "prefetch_block_bitmaps", A_FLAG, E_NOOP, NULL, NULL, R_REMOVED, 0 },
	{ "reservation", A_FLAG, E_NOOP, NULL, NULL, R_REMOVED, 0 },
	{ "noreservation", A_FLAG, E_NOOP, NULL, NULL, R_REMOVED, 0 },
	{ "check", A_TEXT, E_NOOP, NULL, NULL, R_REMOVED, 0 },
	{ "nocheck", A_FLAG, E_NOOP, NULL, NULL, R_REMOVED, 0 },
	{ "warn_on_error", A_FLAG, E_NOOP, NULL, NULL, R_DEBUG, 0 },
	{ "nowarn_on_error", A_FLAG, E_NOOP, NULL, NULL, R_DEBUG, 0 },
	{ "debug_want_extra_isize", A_NUM, E_NOOP, NULL, NULL, R_DEBUG, 0 },
	{ "stripe", A_NUM, E_NOOP, NULL, NULL, R_ALLOC, 0 },
	{ "mb_optimize_scan", A_NUM, E_NOOP, NULL, NULL, R_ALLOC, 0 },
	{ "inode_readahead_blks", A_NUM, E_NOOP, NULL, NULL, R_READAHEAD, 0 },
	{ "no_prefetch_block_bitmaps", A_FLAG, E_NOOP, NULL, NULL, R_READAHEAD, 0 },
	{ "init_itable", A_FLAG_OR_NUM, E_NOOP, NULL, NULL, R_ITABLE, 0 },
	{ "noinit_itable", A_FLAG, E_NOOP, NULL, NULL, R_ITABLE, 0 },
	{ "nombcache", A_FLAG, E_NOOP, NULL, NULL, R_MBCACHE, 0 },
	{ "no_mbcache", A_FLAG, E_NOOP, NULL, NULL, R_MBCACHE, 0 },
	{ "dioread_nolock", A_FLAG, E_NOOP, NULL, NULL, R_DIOREAD, 0 },
	{ "nodioread_nolock", A_FLAG, E_NOOP, NULL, NULL, R_DIOREAD, 0 },
	{ "dioread_lock", A_FLAG, E_NOOP, NULL, NULL, R_DIOREAD, 0 },
	{ "inlinecrypt", A_FLAG, E_NOOP, NULL, NULL, R_CRYPT, 0 },
	{ "noquota", A_FLAG, E_NOOP, NULL, NULL, R_NOQUOTA, 0 },
	{ "usrjquota=", A_FLAG, E_NOOP, NULL, NULL, R_NOQUOTA, 0 },
	{ "grpjquota=", A_FLAG, E_NOOP, NULL, NULL, R_NOQUOTA, 0 },
	{ "quota", A_FLAG, E_REFUSED, NULL, NULL, R_QUOTA, 0 },
	{ "usrquota", A_FLAG, E_REFUSED, NULL, NULL, R_QUOTA, 0 },
	{ "grpquota", A_FLAG, E_REFUSED, NULL, NULL, R_QUOTA, 0 },
	{ "prjquota", A_FLAG, E_REFUSED, NULL, NULL, R_QUOTA, 0 },
	{ "jqfmt", A_TEXT, E_REFUSED, NULL, NULL, R_QUOTA, 0 },
	{ "usrjquota", A_TEXT, E_REFUSED, NULL, NULL, R_QUOTA, 0 },
	{ "grpjquota", A_TEXT, E_REFUSED, NULL, NULL, R_QUOTA, 0 },
	{ "journal_async_commit", A_FLAG, E_REFUSED, NULL, NULL,
	  "it changes the journal's on-disk format (asynchronous commit blocks with "
	  "checksums), which an ext3 journal does not have", 0 },
	{ "data_err=abort", A_FLAG, E_REFUSED, NULL, NULL,
	  "a file-data write error fails that write with EIO and the file system goes on "
	  "(data_err=ignore); turning read-only on one is not supported", 0 },
	{ "nouid32", A_FLAG, E_REFUSED, NULL, NULL,
	  "user and group ids are stored with their 32 bits; 16-bit ids are not supported", 0 },
	{ "sb", A_TEXT, E_REFUSED, NULL, NULL,
	  "only the primary superblock is used; repair the file system from a backup with "
	  "e2fsck -b N first", 0 },
	{ "journal_dev", A_TEXT, E_REFUSED, NULL, NULL, R_EXTJOURNAL, 0 },
	{ "journal_path", A_TEXT, E_REFUSED, NULL, NULL, R_EXTJOURNAL, 0 },
	{ "max_dir_size_kb", A_TEXT, E_REFUSED, NULL, NULL,
	  "a limit on the size of directories is not supported", 0 },
	{ "dax", A_TEXT, E_REFUSED, NULL, NULL, "DAX is not available through FUSE", 0 },
	{ "abort", A_FLAG, E_REFUSED, NULL, NULL,
	  "the kernel's debugging option (a file system aborted at mount) is not supported; "
	  "mount with ro", 0 },
	{ "test_dummy_encryption", A_TEXT, E_REFUSED, NULL, NULL, "encryption is not supported", 0 },
};
#define N_EXT3_OPTS (sizeof(ext3_opts) / sizeof(ext3_opts[0]))

static int parse_u64(const char *v, uint64_t max, uint64_t *out);

static bool ext3_value_ok(const struct ext3_opt *o, const char *eq)
{
	uint64_t n;

	switch (o->arg) {
	case A_FLAG:
		return !eq;
	case A_NUM:
		return eq && !parse_u64(eq + 1, o->max ? o->max : UINT32_MAX, &n);
	case A_FLAG_OR_NUM:
		return !eq || !parse_u64(eq + 1, UINT32_MAX, &n);
	case A_TEXT:
		return eq != NULL;
	}
	return false;
}

/* The row for one -o token (KEY or KEY=VALUE), or NULL; *bad_value is set
 * when KEY is one of the kernel's ext3 options but VALUE is not a form it
 * takes (refused options are refused in every form). */
static const struct ext3_opt *ext3_lookup(const char *tok, bool *bad_value)
{
	const char *eq = strchr(tok, '=');
	size_t kl = eq ? (size_t)(eq - tok) : strlen(tok);

	*bad_value = false;
	for (size_t i = 0; i < N_EXT3_OPTS; i++) {
		const struct ext3_opt *o = &ext3_opts[i];
		if (strncmp(o->name, tok, kl) || (o->name[kl] && o->name[kl] != '='))
			continue;
		if (o->name[kl] == '=') {        /* one KEY=VALUE spelling */
			if (!strcmp(o->name, tok))
				return o;
			*bad_value = true;
			continue;
		}
		if (o->kind == E_REFUSED || ext3_value_ok(o, eq)) {
			*bad_value = false;
			return o;
		}
		*bad_value = true;
	}
	return NULL;
}

static int parse_bool(const char *v, bool *out)
{
	if (!strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes")) {
		*out = true;
		return 0;
	}
	if (!strcmp(v, "off") || !strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no")) {
		*out = false;
		return 0;
	}
	return -EINVAL;
}

static int parse_u64(const char *v, uint64_t max, uint64_t *out)
{
	char *end;

	if (!*v || *v == '-')
		return -EINVAL;
	errno = 0;
	unsigned long long n = strtoull(v, &end, 0);
	if (errno || *end || n > max)
		return -EINVAL;
	*out = n;
	return 0;
}

/* A user or group id as the kernel's resuid=/resgid= take it (a number), or
 * a name from the password or group database. */
static int parse_id(const char *v, bool group, uint64_t *out)
{
	if (!parse_u64(v, UINT32_MAX - 1, out))
		return 0;
	if (group) {
		struct group *g = getgrnam(v);
		if (g)
			*out = g->gr_gid;
		return g ? 0 : -EINVAL;
	}
	struct passwd *p = getpwnam(v);
	if (p)
		*out = p->pw_uid;
	return p ? 0 : -EINVAL;
}

/* The key named `key`, or NULL after saying why there is none for this
 * source (unknown, the kernel's ext3 option or test-only in a file). */
static const struct key_desc *find_key(const char *key, bool from_file, const char *where)
{
	const struct key_desc *k = NULL;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!strcmp(keys[i].name, key))
			k = &keys[i];
	if (!k) {
		bool bad;
		if (from_file && (ext3_lookup(key, &bad) || bad))
			fprintf(stderr, "recon-fuse: '%s' is one of the kernel's ext3 mount options, "
				"accepted from -o only, not from %s\n", key, where);
		else
			fprintf(stderr, "recon-fuse: unknown option '%s' (%s)\n", key, where);
		return NULL;
	}
	if (k->test_only && from_file) {
		fprintf(stderr, "recon-fuse: '%s' is a test-only option, accepted from -o only, "
			"not from %s\n", key, where);
		return NULL;
	}
	return k;
}

/* A key stored as its value's bytes at k->off: booleans, numbers, strings,
 * ids.  0, 1 (a bad value) or -ENOMEM. */
static int set_plain(struct recon_config *cfg, const struct key_desc *k, const char *val)
{
	char *base = (char *)cfg;
	uint64_t n;
	bool b;

	switch (k->kind) {
	case K_BOOL:
		if (parse_bool(val, &b))
			return 1;
		*(bool *)(base + k->off) = b;
		return 0;
	case K_UINT:
		if (parse_u64(val, UINT32_MAX, &n))
			return 1;
		*(unsigned *)(base + k->off) = n;
		return 0;
	case K_U64:
		if (parse_u64(val, UINT64_MAX, &n))
			return 1;
		*(uint64_t *)(base + k->off) = n;
		return 0;
	case K_UID:
	case K_GID:
		if (parse_id(val, k->kind == K_GID, &n))
			return 1;
		*(int64_t *)(base + k->off) = (int64_t)n;
		return 0;
	default:
		break;
	}
	if (!*val)
		return 1;
	if (k->off == offsetof(struct recon_config, io.fault_corrupt) && !rio_fault_corrupt_valid(val))
		return 1;
	/* copied as bytes: the field is a char * or (io's) a const char * */
	char *dup = strdup(val), *old;
	if (!dup)
		return -ENOMEM;
	memcpy(&old, base + k->off, sizeof(old));
	free(old);
	memcpy(base + k->off, &dup, sizeof(dup));
	return 0;
}

/* A key whose value is one of a few words (or ext3's commit seconds).  0,
 * 1 (a bad value) or -EINVAL after a message of its own. */
static int set_choice(struct recon_config *cfg, const struct key_desc *k, const char *val,
		      const char *where)
{
	uint64_t n;
	bool b;

	switch (k->kind) {
	case K_ATIME:
		if (!strcmp(val, "relatime"))
			cfg->atime = ATIME_RELATIME;
		else if (!strcmp(val, "noatime"))
			cfg->atime = ATIME_NOATIME;
		else if (!strcmp(val, "strictatime"))
			cfg->atime = ATIME_STRICTATIME;
		else
			return 1;
		return 0;
	case K_MAPROOT:
		if (!strcmp(val, "auto"))
			cfg->map_root = MAP_ROOT_AUTO;
		else if (!parse_bool(val, &b))
			cfg->map_root = b ? MAP_ROOT_ON : MAP_ROOT_OFF;
		else
			return 1;
		return 0;
	case K_URING:
		if (!strcmp(val, "auto"))
			cfg->fuse_uring = FUSE_URING_AUTO;
		else if (!parse_bool(val, &b))
			cfg->fuse_uring = b ? FUSE_URING_ON : FUSE_URING_OFF;
		else
			return 1;
		return 0;
	case K_BASECHECK:
		if (!strcmp(val, "background") || !strcmp(val, "foreground"))
			cfg->io.base_check_background = val[0] == 'b';
		else
			return 1;
		return 0;
	case K_ERRORS:
		/* a rejected commit's changes are gone from the disk but not from
		 * libext2fs's memory, so "continue" cannot go on writing: it turns
		 * read-only like remount-ro; panic stops the file system (exit 2),
		 * not the machine */
		if (!strcmp(val, "remount-ro") || !strcmp(val, "continue"))
			cfg->io.on_violation = RIO_ONV_READONLY;
		else if (!strcmp(val, "panic"))
			cfg->io.on_violation = RIO_ONV_STOP;
		else
			return 1;
		return 0;
	case K_DATA:
		if (!strcmp(val, "ordered") || !strcmp(val, "writeback"))
			return 0;   /* writeback's promise is weaker than ordered: kept */
		if (!strcmp(val, "journal")) {
			fprintf(stderr, "recon-fuse: data=journal (%s): recon-fuse journals metadata "
				"only; file data is written before the metadata that points to it "
				"(data=ordered)\n", where);
			return -EINVAL;
		}
		return 1;
	case K_COMMIT:
		/* seconds, 0 for the default, as ext3's commit= */
		if (parse_u64(val, UINT32_MAX / 1000, &n))
			return 1;
		cfg->io.commit_interval_ms = n ? (unsigned)n * 1000 : io_defaults.commit_interval_ms;
		return 0;
	case K_ONV:
		if (!strcmp(val, "readonly"))
			cfg->io.on_violation = RIO_ONV_READONLY;
		else if (!strcmp(val, "stop"))
			cfg->io.on_violation = RIO_ONV_STOP;
		else if (!strcmp(val, "log"))
			cfg->io.on_violation = RIO_ONV_LOG;
		else
			return 1;
		return 0;
	default:
		return 1;
	}
}

/* Set one key; `where` names the source for messages. */
static int set_key(struct recon_config *cfg, const char *key, const char *val,
		   bool from_file, const char *where)
{
	const struct key_desc *k = find_key(key, from_file, where);
	int r;

	if (!k)
		return -EINVAL;
	if (!val) {
		if (k->kind != K_BOOL) {
			fprintf(stderr, "recon-fuse: option '%s' needs a value (%s)\n", key, where);
			return -EINVAL;
		}
		val = "on";
	}
	switch (k->kind) {
	case K_BOOL:
	case K_UINT:
	case K_U64:
	case K_STR:
	case K_UID:
	case K_GID:
		r = set_plain(cfg, k, val);
		break;
	default:
		r = set_choice(cfg, k, val, where);
		break;
	}
	if (r == 1) {
		fprintf(stderr, "recon-fuse: bad value '%s' for option '%s' (%s)\n", val, key, where);
		return -EINVAL;
	}
	return r;
}

static int read_config_file(struct recon_config *cfg, const char *path)
{
	config_t lc;
	int ret = 0;

	config_init(&lc);
	errno = 0;
	if (config_read_file(&lc, path) != CONFIG_TRUE) {
		/* libconfig's "file I/O error" leaves fopen's errno; a directory
		 * opens, then fails to read */
		int err = errno;
		struct stat st;
		if (!err && !stat(path, &st) && S_ISDIR(st.st_mode))
			err = EISDIR;
		if (config_error_type(&lc) == CONFIG_ERR_FILE_IO)
			fprintf(stderr, "recon-fuse: cannot read config file %s: %s\n", path,
				err ? strerror(err) : config_error_text(&lc));
		else
			fprintf(stderr, "recon-fuse: %s:%d: %s\n", path, config_error_line(&lc),
				config_error_text(&lc));
		config_destroy(&lc);
		return -EINVAL;
	}
	config_setting_t *root = config_root_setting(&lc);
	int count = config_setting_length(root);
	for (int i = 0; i < count && !ret; i++) {
		config_setting_t *s = config_setting_get_elem(root, i);
		const char *name = config_setting_name(s);
		char where[512], val[64];
		const char *v = val;

		snprintf(where, sizeof(where), "config file %s line %d", path,
			 config_setting_source_line(s));
		switch (config_setting_type(s)) {
		case CONFIG_TYPE_BOOL:
			v = config_setting_get_bool(s) ? "on" : "off";
			break;
		case CONFIG_TYPE_INT:
			snprintf(val, sizeof(val), "%d", config_setting_get_int(s));
			break;
		case CONFIG_TYPE_INT64:
			snprintf(val, sizeof(val), "%lld", config_setting_get_int64(s));
			break;
		case CONFIG_TYPE_STRING:
			v = config_setting_get_string(s);
			break;
		default:
			fprintf(stderr, "recon-fuse: option '%s' has an unsupported type (%s)\n",
				name ? name : "?", where);
			ret = -EINVAL;
			continue;
		}
		/* ro / allow_other are command-line mount options, but a file may set them too */
		if (!strcmp(name, "ro") || !strcmp(name, "allow_other")) {
			bool b;
			if (parse_bool(v, &b)) {
				fprintf(stderr, "recon-fuse: bad value '%s' for option '%s' (%s)\n",
					v, name, where);
				ret = -EINVAL;
			} else if (!strcmp(name, "ro")) {
				cfg->ro = b;
			} else {
				cfg->allow_other = b;
			}
			continue;
		}
		ret = set_key(cfg, name, v, true, where);
	}
	config_destroy(&lc);
	return ret;
}

static void set_defaults(struct recon_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->atime = ATIME_RELATIME;
	cfg->acl = true;
	cfg->user_xattr = true;
	cfg->threads = 1;
	cfg->poll_us = 50;
	cfg->fuse_uring = FUSE_URING_AUTO;
	cfg->io = io_defaults;
	cfg->resuid = cfg->resgid = -1;
}

/* Growing comma-separated list of options passed on to libfuse. */
struct optbuf {
	char *s;
	size_t len;
};

static int optbuf_add(struct optbuf *ob, const char *opt)
{
	size_t n = strlen(opt);
	char *p = realloc(ob->s, ob->len + n + 2);

	if (!p)
		return -ENOMEM;
	ob->s = p;
	if (ob->len)
		p[ob->len++] = ',';
	memcpy(p + ob->len, opt, n + 1);
	ob->len += n;
	return 0;
}

/* One -o list: split on commas; our keys go to pending (applied after the
 * file), the rest to libfuse. */
static int split_opts(const char *list, struct optbuf *ours, struct optbuf *theirs)
{
	char *copy = strdup(list), *save = NULL;
	int ret = 0;

	if (!copy)
		return -ENOMEM;
	for (char *tok = strtok_r(copy, ",", &save); tok && !ret; tok = strtok_r(NULL, ",", &save)) {
		char key[128];
		const char *eq = strchr(tok, '=');
		size_t kl = eq ? (size_t)(eq - tok) : strlen(tok);
		bool ours_key = false;

		if (kl >= sizeof(key))
			kl = sizeof(key) - 1;
		memcpy(key, tok, kl);
		key[kl] = 0;
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
			if (!strcmp(keys[i].name, key))
				ours_key = true;
		bool bad_value = false;
		if (!strcmp(key, "config") || !strcmp(key, "noatime") || !strcmp(key, "relatime") ||
		    !strcmp(key, "strictatime") || !strcmp(key, "atime") || !strcmp(key, "ro") ||
		    !strcmp(key, "rw") || !strcmp(key, "allow_other") || ext3_lookup(tok, &bad_value) ||
		    bad_value)
			ours_key = true;
		if (!strcmp(key, "ro") || !strcmp(key, "allow_other") || !strcmp(tok, "sync") ||
		    !strcmp(tok, "dirsync") || !strcmp(tok, "async"))
			ret = optbuf_add(theirs, tok);   /* the kernel needs them too */
		if (!ret)
			ret = optbuf_add(ours_key ? ours : theirs, tok);
	}
	free(copy);
	return ret;
}

/* One of the kernel's ext3 spellings (ext3: its row; NULL for a value it
 * does not take).  0 or -EINVAL after a message. */
static int apply_ext3_opt(struct recon_config *cfg, const char *tok, const struct ext3_opt *ext3)
{
	static const char *const forms[] = {
		[A_FLAG] = "takes no value", [A_NUM] = "takes a number",
		[A_FLAG_OR_NUM] = "takes no value or a number", [A_TEXT] = "takes a value",
	};

	if (!ext3) {
		const char *eq = strchr(tok, '=');
		size_t kl = eq ? (size_t)(eq - tok) : strlen(tok);
		char form[64] = "takes another value";
		for (size_t i = 0; i < N_EXT3_OPTS; i++) {
			const struct ext3_opt *o = &ext3_opts[i];
			if (o->kind == E_REFUSED || strncmp(o->name, tok, kl) ||
			    (o->name[kl] && o->name[kl] != '='))
				continue;
			if (o->name[kl] == '=')
				snprintf(form, sizeof(form), "accepts %s only", o->name);
			else if (o->max)
				snprintf(form, sizeof(form), "takes a number from 0 to %u", o->max);
			else
				snprintf(form, sizeof(form), "%s", forms[o->arg]);
		}
		fprintf(stderr, "recon-fuse: bad value '%s' for option '%.*s' (-o): the kernel's "
			"ext3 option %s\n", eq ? eq + 1 : "", (int)kl, tok, form);
		return -EINVAL;
	}
	switch (ext3->kind) {
	case E_ALIAS:
		return set_key(cfg, ext3->key, ext3->val, false, "-o");
	case E_NOOP:
		return 0;
	case E_REFUSED:
		break;
	}
	fprintf(stderr, "recon-fuse: -o %s: %s\n", tok, ext3->why);
	return -EINVAL;
}

static int apply_cmdline_opts(struct recon_config *cfg, char *list)
{
	char *save = NULL;
	int ret = 0;

	if (!list)
		return 0;
	for (char *tok = strtok_r(list, ",", &save); tok && !ret; tok = strtok_r(NULL, ",", &save)) {
		bool bad_value;
		const struct ext3_opt *ext3 = ext3_lookup(tok, &bad_value);
		if (ext3 || bad_value) {
			ret = apply_ext3_opt(cfg, tok, ext3);
			continue;
		}
		char *eq = strchr(tok, '=');
		const char *val = NULL;

		if (eq) {
			*eq = 0;
			val = eq + 1;
		}
		if (!strcmp(tok, "config"))
			continue;
		if (!strcmp(tok, "ro") || !strcmp(tok, "rw") || !strcmp(tok, "allow_other")) {
			if (!strcmp(tok, "allow_other"))
				cfg->allow_other = true;
			else
				cfg->ro = !strcmp(tok, "ro");
			continue;
		}
		if (!strcmp(tok, "noatime") || !strcmp(tok, "relatime") || !strcmp(tok, "strictatime")) {
			ret = set_key(cfg, "atime", tok, false, "-o");
			continue;
		}
		if (!strcmp(tok, "atime") && !val) {
			cfg->atime = ATIME_STRICTATIME;
			continue;
		}
		ret = set_key(cfg, tok, val, false, "-o");
	}
	return ret;
}

/* A path the daemon can use after it leaves its working directory (it
 * chdirs to / when it detaches, then unmounts and removes its pid file from
 * there): an absolute one as given, a relative one made absolute, resolved
 * when it exists.  0 or -errno, after a message. */
static int make_absolute(char **path)
{
	char *abs, *cwd;

	if (!*path || (*path)[0] == '/')
		return 0;
	abs = realpath(*path, NULL);
	if (!abs) {
		cwd = getcwd(NULL, 0);
		if (!cwd) {
			int err = errno;
			fprintf(stderr, "recon-fuse: cannot tell the current directory (%s) to "
				"resolve %s: give an absolute path\n", strerror(err), *path);
			return -err;
		}
		if (asprintf(&abs, "%s/%s", strcmp(cwd, "/") ? cwd : "", *path) < 0)
			abs = NULL;
		free(cwd);
		if (!abs)
			return -ENOMEM;
	}
	free(*path);
	*path = abs;
	return 0;
}

/* The mount point, as the kernel's mount would judge it, before the image is
 * touched: FUSE mounts on a regular file too, and its root directory then
 * answers EIO; and a FUSE mount whose daemon is gone (kill -9) answers
 * ENOTCONN, where mounting again fails or stacks a mount on the dead one. */
static int check_mountpoint(const char *mp)
{
	struct stat st;

	if (stat(mp, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return 0;
		fprintf(stderr, "recon-fuse: %s: mount point is not a directory\n", mp);
		return -ENOTDIR;
	}
	int err = errno;
	if (err == ENOTCONN) {
		char *parent = strdup(mp), *slash = parent ? strrchr(parent, '/') : NULL;
		bool above = false;
		if (slash) {
			slash[slash == parent] = 0;
			above = stat(parent, &st) && errno == ENOTCONN;
		}
		free(parent);
		if (above)
			fprintf(stderr, "recon-fuse: %s is inside a FUSE mount whose daemon is gone "
				"(Transport endpoint is not connected); unmount that mount first "
				"(fusermount3 -u, or umount as root; /proc/mounts lists it)\n", mp);
		else
			fprintf(stderr, "recon-fuse: %s: the FUSE file system mounted there lost its "
				"daemon (killed or crashed) and is still mounted (Transport endpoint is "
				"not connected); unmount it first: fusermount3 -u %s (or, as root, "
				"umount %s)\n", mp, mp, mp);
	} else if (err == ENOENT) {
		fprintf(stderr, "recon-fuse: %s: mount point does not exist\n", mp);
	} else {
		fprintf(stderr, "recon-fuse: mount point %s: %s\n", mp, strerror(err));
	}
	return -err;
}

/* fsname=DEVICE as libfuse parses an -o list: a comma ends an option and a
 * backslash escapes the next character (or starts an octal \NNN), so both
 * are escaped. */
static char *fsname_opt(const char *dev)
{
	static const char prefix[] = "fsname=";
	char *opt = malloc(sizeof(prefix) + 2 * strlen(dev)), *d;

	if (!opt)
		return NULL;
	d = stpcpy(opt, prefix);
	for (const char *s = dev; *s; s++) {
		if (*s == ',' || *s == '\\')
			*d++ = '\\';
		*d++ = *s;
	}
	*d = 0;
	return opt;
}

/* Whether /etc/fuse.conf lets users mount with allow_other (a line saying
 * user_allow_other, as fusermount3 reads it: comments and blanks aside). */
static bool fuse_conf_allows_other(void)
{
	FILE *f = fopen("/etc/fuse.conf", "re");
	char line[256];
	bool ok = false;
	if (!f)
		return false;
	while (!ok && fgets(line, sizeof(line), f)) {
		char *p = line + strspn(line, " \t");
		size_t n = strcspn(p, " \t\r\n#");
		ok = n == 16 && !strncmp(p, "user_allow_other", 16);
	}
	fclose(f);
	return ok;
}

/* The command line: its options (-o lists split into ours and libfuse's),
 * the device and the mount point.  0, or -errno after a message. */
static int parse_argv(int argc, char **argv, struct recon_config *cfg, struct optbuf *ours,
		      struct optbuf *theirs)
{
	int ret = 0, npos = 0;

	for (int i = 1; i < argc && !ret; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-o")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "recon-fuse: -o needs an option list\n");
				ret = -EINVAL;
				break;
			}
			ret = split_opts(argv[++i], ours, theirs);
		} else if (!strncmp(a, "-o", 2)) {
			ret = split_opts(a + 2, ours, theirs);
		} else if (!strcmp(a, "-f")) {
			cfg->foreground = true;
		} else if (!strcmp(a, "-d") || !strcmp(a, "--debug")) {
			cfg->debug = true;
			cfg->foreground = true;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			cfg->show_help = true;
		} else if (!strcmp(a, "-V") || !strcmp(a, "--version")) {
			cfg->show_version = true;
		} else if (!strcmp(a, "-s")) {
			cfg->threads = 1;
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "recon-fuse: unknown command-line option '%s'\n", a);
			ret = -EINVAL;
		} else if (npos == 0) {
			cfg->device = strdup(a);
			npos++;
		} else if (npos == 1) {
			cfg->mountpoint = strdup(a);
			npos++;
		} else {
			fprintf(stderr, "recon-fuse: unexpected argument '%s'\n", a);
			ret = -EINVAL;
		}
	}
	if (ret || cfg->show_help || cfg->show_version)
		return ret;
	if (npos != 2) {
		fprintf(stderr, "usage: recon-fuse [-o opt,...] [-f] [-d] DEVICE MOUNTPOINT "
			"(recon-fuse --help for the options)\n");
		return -EINVAL;
	}
	ret = make_absolute(&cfg->device);
	return ret ? ret : make_absolute(&cfg->mountpoint);
}

/* Our options: the config file first (config= in ours, else the default
 * file when it exists), then the -o list ours on top of it.  0, or -errno
 * after a message. */
static int apply_options(struct recon_config *cfg, char *ours)
{
	char *config_file = NULL;
	int ret = 0;

	if (ours) {
		char *copy = strdup(ours), *save = NULL;
		if (!copy)
			return -ENOMEM;
		for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
			if (!strncmp(tok, "config=", 7)) {
				free(config_file);
				config_file = strdup(tok + 7);
			} else if (!strcmp(tok, "config")) {
				fprintf(stderr, "recon-fuse: option 'config' needs a file name\n");
				ret = -EINVAL;
			}
		free(copy);
		if (ret) {
			free(config_file);
			return ret;
		}
	}
	if (config_file) {
		ret = read_config_file(cfg, config_file);
		cfg->config_file = config_file;
	} else if (access(DEFAULT_CONFIG_FILE, F_OK) == 0) {
		ret = read_config_file(cfg, DEFAULT_CONFIG_FILE);
		cfg->config_file = strdup(DEFAULT_CONFIG_FILE);
	}
	return ret ? ret : apply_cmdline_opts(cfg, ours);
}

/* The options as a whole, once all are set: what deterministic implies,
 * the combinations refused, the paths made absolute, the mount point
 * judged.  0, or -errno after a message. */
static int settle_options(struct recon_config *cfg)
{
	if (cfg->deterministic) {
		cfg->threads = 1;
		cfg->poll_us = 0;
		cfg->io.commit_interval_ms = 0;
		cfg->io.async_commit = false;
		cfg->fuse_uring = FUSE_URING_OFF;
	}
	if (cfg->threads == 0)
		cfg->threads = 1;
	if (cfg->noload && !cfg->ro) {
		fprintf(stderr, "recon-fuse: noload (norecovery) requires ro: a read-write mount "
			"must replay the journal first\n");
		return -EINVAL;
	}
	if (cfg->allow_other && geteuid() != 0 && !fuse_conf_allows_other()) {
		/* fusermount3 would refuse it after we have opened the image */
		fprintf(stderr, "recon-fuse: allow_other: /etc/fuse.conf does not say "
			"user_allow_other, which a user's mount needs for it (root may always)\n");
		return -EINVAL;
	}
	if (cfg->poll_us > 10000) {
		fprintf(stderr, "recon-fuse: poll_us=%u: at most 10000 (10 ms)\n", cfg->poll_us);
		return -EINVAL;
	}
	if (cfg->seal_dir && strcmp(cfg->seal_dir, "none") && cfg->seal_dir[0] != '/') {
		fprintf(stderr, "recon-fuse: seal_dir=%s: an absolute path, or none\n", cfg->seal_dir);
		return -EINVAL;
	}
	int ret = make_absolute(&cfg->pidfile);
	if (!ret)
		ret = make_absolute(&cfg->stats_file);
	return ret ? ret : check_mountpoint(cfg->mountpoint);
}

/* libfuse's arguments: the program's name, -d, and the -o list theirs
 * with the device shown as fsname and the subtype added unless given.
 * 0 or -ENOMEM. */
static int libfuse_args(const struct recon_config *cfg, const char *argv0,
			struct optbuf *theirs, struct fuse_args *fuse_args)
{
	int ret = 0;

	/* show the device in mount(8) and /proc/mounts */
	if (!strstr(theirs->s ? theirs->s : "", "fsname=")) {
		char *fsname = fsname_opt(cfg->device);
		if (!fsname)
			return -ENOMEM;
		ret = optbuf_add(theirs, fsname);
		free(fsname);
	}
	if (!ret && !strstr(theirs->s ? theirs->s : "", "subtype="))
		ret = optbuf_add(theirs, "subtype=recon-fuse");
	if (ret)
		return ret;
	if (fuse_opt_add_arg(fuse_args, argv0) ||
	    (cfg->debug && fuse_opt_add_arg(fuse_args, "-d")) ||
	    (theirs->s && (fuse_opt_add_arg(fuse_args, "-o") || fuse_opt_add_arg(fuse_args, theirs->s))))
		return -ENOMEM;
	return 0;
}

int config_parse(int argc, char **argv, struct recon_config *cfg, struct fuse_args *fuse_args)
{
	struct optbuf ours = { 0 }, theirs = { 0 };

	set_defaults(cfg);
	int ret = parse_argv(argc, argv, cfg, &ours, &theirs);
	if (!ret && !cfg->show_help && !cfg->show_version) {
		ret = apply_options(cfg, ours.s);
		if (!ret)
			ret = settle_options(cfg);
		if (!ret)
			ret = libfuse_args(cfg, argv[0], &theirs, fuse_args);
	}
	free(ours.s);
	free(theirs.s);
	return ret;
}

/* One line of --help: the names in a column, the text wrapped beside them
 * (below them when the names are wider than the column). */
static void help_row(FILE *out, const char *names, const char *text)
{
	enum { NAME_W = 26, TEXT_W = 50 };
	size_t n = strlen(names);
	bool first = true;

	if (n > NAME_W) {       /* the names alone, wrapped after a comma */
		const char *p = names;
		while (*p) {
			size_t len = strlen(p);
			if (len > NAME_W + 1 + TEXT_W) {
				len = NAME_W + 1 + TEXT_W;
				while (len && p[len - 1] != ',')
					len--;
				if (!len)
					len = strlen(p);
			}
			fprintf(out, "  %.*s\n", (int)len, p);
			p += len;
			while (*p == ' ')
				p++;
		}
	}
	while (*text) {
		size_t len = strlen(text);
		if (len > TEXT_W) {
			len = TEXT_W;
			while (len && text[len] != ' ')
				len--;
			if (!len)
				len = strcspn(text, " ");
		}
		fprintf(out, "  %-*s %.*s\n", NAME_W, first && n <= NAME_W ? names : "", (int)len, text);
		first = false;
		text += len;
		while (*text == ' ')
			text++;
	}
}

/* An ext3 spelling as --help shows it: barrier, barrier=N. */
static void ext3_names(const struct ext3_opt *o, char *buf, size_t len)
{
	switch (o->arg) {
	case A_FLAG:
		snprintf(buf, len, "%s", o->name);
		break;
	case A_NUM:
		snprintf(buf, len, "%s=N", o->name);
		break;
	case A_FLAG_OR_NUM:
		snprintf(buf, len, "%s, %s=N", o->name, o->name);
		break;
	case A_TEXT:
		snprintf(buf, len, "%s=VALUE", o->name);
		break;
	}
}

void config_print_help(FILE *out)
{
	char names[256];

	fprintf(out,
		"usage: recon-fuse [-o opt,...] [-f] [-d] DEVICE MOUNTPOINT\n"
		"\n");
	help_row(out, "-f", "stay in the foreground");
	help_row(out, "-d, --debug", "FUSE debug output (implies -f)");
	help_row(out, "-s", "single-threaded");
	help_row(out, "-h, --help", "this text");
	help_row(out, "-V, --version", "the versions of recon-fuse, libfuse and libext2fs");
	fprintf(out, "\nrecon-fuse options (-o key=value, or key = value; in the config file):\n");
	help_row(out, "ro", "mount read-only");
	help_row(out, "allow_other", "let other users access the mount");
	help_row(out, "config=FILE", "config file (default /etc/recon-fuse.conf if present)");
	help_row(out, "noatime, relatime, strictatime", "access-time policy (relatime)");
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		snprintf(names, sizeof(names), "%s%s%s", keys[i].name, keys[i].arg ? "=" : "",
			 keys[i].arg ? keys[i].arg : "");
		help_row(out, names, keys[i].help);
	}
	/* rows with the same text share a line */
	fprintf(out, "\nThe kernel's ext3 mount options (-o only; recon-fuse(8) has the ones "
		"refused):\n");
	for (size_t i = 0; i < N_EXT3_OPTS; i++) {
		const struct ext3_opt *o = &ext3_opts[i];
		if (o->kind == E_REFUSED)
			continue;
		size_t used = 0;
		names[0] = 0;
		for (; i < N_EXT3_OPTS && !strcmp(ext3_opts[i].why, o->why); i++) {
			char one[64];
			ext3_names(&ext3_opts[i], one, sizeof(one));
			used += snprintf(names + used, sizeof(names) - used, "%s%s", used ? ", " : "", one);
		}
		i--;
		help_row(out, names, o->why);
	}
	fprintf(out, "\nPassed to FUSE (-o only):\n");
	help_row(out, "dev, suid", "device nodes and set-id programs work, for root's mounts "
		 "(otherwise nodev, nosuid)");
	help_row(out, "fsname=NAME, subtype=TYPE", "what mount(8) shows (the device, recon-fuse)");
	fprintf(out, "\nBooleans take on/off/true/false/1/0.  Other -o options (max_read=, ...) are\n"
		"passed to FUSE, which refuses those it does not know.\n");
}

void config_free(struct recon_config *cfg)
{
	free(cfg->device);
	free(cfg->mountpoint);
	free(cfg->pidfile);
	free(cfg->log_file);
	free(cfg->seal_dir);
	free(cfg->config_file);
	free((char *)cfg->io.fault_corrupt);   /* set_key's copy */
	free(cfg->stats_file);
	memset(cfg, 0, sizeof(*cfg));
}
