/*
 * fuse/config.c - recon-fuse's configuration (see config.h): defaults, then
 * the config file (libconfig syntax), then -o key=value.  Every value from
 * either source goes through one setter, so both accept the same spellings.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <libconfig.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_CONFIG_FILE "/etc/recon-fuse.conf"

enum key_kind { K_BOOL, K_UINT, K_U64, K_STR, K_ATIME, K_ONV, K_ERRORS, K_DATA, K_COMMIT, K_MAPROOT,
		K_URING };

struct key_desc {
	const char *name;
	enum key_kind kind;
	size_t off;
	bool test_only;     /* accepted from -o alone */
	const char *help;
};

#define F(field) offsetof(struct recon_config, field)
static const struct key_desc keys[] = {
	{ "force_rw", K_BOOL, F(force_rw), false, "mount read-write an image marked with errors" },
	{ "rw_unchecked", K_BOOL, F(rw_unchecked), false,
	  "mount read-write without checking the image first (risky: trusts it)" },
	{ "atime", K_ATIME, F(atime), false, "relatime (default), noatime or strictatime" },
	{ "pidfile", K_STR, F(pidfile), false, "write the daemon's pid to FILE once mounted" },
	{ "log", K_STR, F(log_file), false, "append every message to FILE, time-stamped" },
	{ "acl", K_BOOL, F(acl), false, "POSIX ACLs, enforced by the kernel (on; noacl: off)" },
	{ "user_xattr", K_BOOL, F(user_xattr), false, "user.* extended attributes (on; nouser_xattr: off)" },
	{ "sync", K_BOOL, F(sync), false, "every change commits before it returns (also the kernel's sync flag)" },
	{ "dirsync", K_BOOL, F(dirsync), false, "every directory change commits before it returns" },
	{ "noload", K_BOOL, F(noload), false, "with ro: no journal replay (norecovery)" },
	{ "map_root", K_MAPROOT, F(map_root), false,
	  "show the image's root-owned files as the mounting user's: auto (default: when not root "
	  "and the image's root directory is root's), on, off" },
	{ "errors", K_ERRORS, F(on_violation), false,
	  "ext3's: remount-ro or continue (on_violation=readonly), panic (on_violation=stop)" },
	{ "data", K_DATA, 0, false, "ext3's: ordered or writeback (both run ordered); journal is refused" },
	{ "commit", K_COMMIT, F(commit_interval_ms), false, "ext3's commit interval in s (commit_interval_ms)" },
	{ "block_cache_mb", K_UINT, F(block_cache_mb), false, "metadata block cache in MiB (64)" },
	{ "threads", K_UINT, F(threads), false, "FUSE worker threads (1: one thread)" },
	{ "poll_us", K_UINT, F(poll_us), false, "with one thread: poll for the next request this long, in us (50)" },
	{ "fuse_uring", K_URING, F(fuse_uring), false,
	  "FUSE requests over io_uring when the kernel offers it: auto (default), on, off" },
	{ "checker", K_BOOL, F(checker), false, "shadow checker on every commit (on)" },
	{ "checker_cache_mb", K_UINT, F(checker_cache_mb), false, "checker's block cache in MiB (128)" },
	{ "commit_interval_ms", K_UINT, F(commit_interval_ms), false, "commit age limit in ms (1000)" },
	{ "max_transaction_blocks", K_UINT, F(max_transaction_blocks), false,
	  "commit size limit in blocks (0 = a quarter of the journal)" },
	{ "on_violation", K_ONV, F(on_violation), false, "readonly (default), stop or log" },
	{ "journal", K_BOOL, F(journal), false, "log commits through the ext3 journal (on)" },
	{ "async_commit", K_BOOL, F(async_commit), false, "commit on a separate thread (on)" },
	{ "deterministic", K_BOOL, F(deterministic), true, "test: one thread, no timers" },
	{ "fault_crash_after", K_U64, F(fault_crash_after), true, "test: crash after N device writes" },
	{ "fault_seed", K_U64, F(fault_seed), true, "test: fault injection seed" },
	{ "fault_corrupt", K_STR, F(fault_corrupt), true, "test: corrupt KIND@N" },
	{ "fault_data_eio", K_U64, F(fault_data_eio), true, "test: fail the Nth file-data write with EIO" },
	{ "stats", K_STR, F(stats_file), true, "test: write the stats JSON to FILE at unmount" },
	{ "no_uring", K_BOOL, F(no_uring), true, "test: force the pread/pwrite fallback" },
};
#undef F

/* The kernel's ext3 spellings of our boolean keys. */
struct ext3_alias {
	const char *opt, *key, *val;
};

static const struct ext3_alias ext3_aliases[] = {
	{ "noacl", "acl", "off" },
	{ "nouser_xattr", "user_xattr", "off" },
	{ "norecovery", "noload", "on" },
	{ "async", "sync", "off" },
};

/* ext3 mount options with nothing to change here, accepted as the kernel
 * accepts them (fstab lines written for the kernel's driver): the
 * directory atime and lazytime policies (relatime rules apply), write
 * barriers (the device is flushed at every commit regardless), delayed
 * allocation heuristics (no delayed allocation). */
static const char *const ext3_noops[] = {
	"nodiratime", "diratime", "lazytime", "nolazytime", "barrier", "nobarrier",
	"auto_da_alloc", "noauto_da_alloc", NULL
};

static bool ext3_noop(const char *opt)
{
	const char *eq = strchr(opt, '=');
	if (!strncmp(opt, "barrier=", 8) && eq && (!strcmp(eq, "=0") || !strcmp(eq, "=1")))
		return true;
	for (int i = 0; ext3_noops[i]; i++)
		if (!strcmp(ext3_noops[i], opt))
			return true;
	return false;
}

static const struct ext3_alias *ext3_alias(const char *opt)
{
	for (size_t i = 0; i < sizeof(ext3_aliases) / sizeof(ext3_aliases[0]); i++)
		if (!strcmp(ext3_aliases[i].opt, opt))
			return &ext3_aliases[i];
	return NULL;
}

static const char *const corrupt_kinds[] = {
	"bbitmap", "ibitmap", "bgd_free_blocks", "bgd_free_inodes", "bgd_used_dirs",
	"sb_free_blocks", "ptr_used", "ptr_free", "ptr_meta", "ind_ptr", "links", "size",
	"iblocks", "dtime", "mode", "dirent_inode", "dirent_reclen", "dirent_namelen",
	"dirent_type", "dotdot", "xattr_refcount", "random", NULL
};

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

static int check_fault_corrupt(const char *v)
{
	const char *at = strchr(v, '@');
	uint64_t n;

	if (!at || parse_u64(at + 1, UINT64_MAX, &n))
		return -EINVAL;
	for (int i = 0; corrupt_kinds[i]; i++)
		if (strlen(corrupt_kinds[i]) == (size_t)(at - v) &&
		    !strncmp(v, corrupt_kinds[i], at - v))
			return 0;
	return -EINVAL;
}

/* Set one key; `where` names the source for messages. */
static int set_key(struct recon_config *cfg, const char *key, const char *val,
		   bool from_file, const char *where)
{
	const struct key_desc *k = NULL;
	char *base = (char *)cfg;
	uint64_t n;
	bool b;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!strcmp(keys[i].name, key))
			k = &keys[i];
	if (!k) {
		fprintf(stderr, "recon-fuse: unknown option '%s' (%s)\n", key, where);
		return -EINVAL;
	}
	if (k->test_only && from_file) {
		fprintf(stderr, "recon-fuse: '%s' is a test-only option, accepted from -o only, "
			"not from %s\n", key, where);
		return -EINVAL;
	}
	if (!val) {
		if (k->kind != K_BOOL) {
			fprintf(stderr, "recon-fuse: option '%s' needs a value (%s)\n", key, where);
			return -EINVAL;
		}
		val = "on";
	}
	switch (k->kind) {
	case K_BOOL:
		if (parse_bool(val, &b))
			goto bad;
		*(bool *)(base + k->off) = b;
		return 0;
	case K_UINT:
		if (parse_u64(val, UINT32_MAX, &n))
			goto bad;
		*(unsigned *)(base + k->off) = n;
		return 0;
	case K_U64:
		if (parse_u64(val, UINT64_MAX, &n))
			goto bad;
		*(uint64_t *)(base + k->off) = n;
		return 0;
	case K_STR: {
		if (!*val)
			goto bad;
		if (k->off == offsetof(struct recon_config, fault_corrupt) && check_fault_corrupt(val))
			goto bad;
		char *dup = strdup(val);
		if (!dup)
			return -ENOMEM;
		free(*(char **)(base + k->off));
		*(char **)(base + k->off) = dup;
		return 0;
	}
	case K_ATIME:
		if (!strcmp(val, "relatime"))
			cfg->atime = ATIME_RELATIME;
		else if (!strcmp(val, "noatime"))
			cfg->atime = ATIME_NOATIME;
		else if (!strcmp(val, "strictatime"))
			cfg->atime = ATIME_STRICTATIME;
		else
			goto bad;
		return 0;
	case K_MAPROOT:
		if (!strcmp(val, "auto"))
			cfg->map_root = MAP_ROOT_AUTO;
		else if (!parse_bool(val, &b))
			cfg->map_root = b ? MAP_ROOT_ON : MAP_ROOT_OFF;
		else
			goto bad;
		return 0;
	case K_ERRORS:
		/* a rejected commit's changes are gone from the disk but not from
		 * libext2fs's memory, so "continue" cannot go on writing: it turns
		 * read-only like remount-ro; panic stops the file system (exit 2),
		 * not the machine */
		if (!strcmp(val, "remount-ro") || !strcmp(val, "continue"))
			cfg->on_violation = ONV_READONLY;
		else if (!strcmp(val, "panic"))
			cfg->on_violation = ONV_STOP;
		else
			goto bad;
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
		goto bad;
	case K_COMMIT:
		/* seconds, 0 for the default, as ext3's commit= */
		if (parse_u64(val, UINT32_MAX / 1000, &n))
			goto bad;
		cfg->commit_interval_ms = n ? (unsigned)n * 1000 : 1000;
		return 0;
	case K_ONV:
		if (!strcmp(val, "readonly"))
			cfg->on_violation = ONV_READONLY;
		else if (!strcmp(val, "stop"))
			cfg->on_violation = ONV_STOP;
		else if (!strcmp(val, "log"))
			cfg->on_violation = ONV_LOG;
		else
			goto bad;
		return 0;
	case K_URING:
		if (!strcmp(val, "auto"))
			cfg->fuse_uring = FUSE_URING_AUTO;
		else if (!parse_bool(val, &b))
			cfg->fuse_uring = b ? FUSE_URING_ON : FUSE_URING_OFF;
		else
			goto bad;
		return 0;
	}
bad:
	fprintf(stderr, "recon-fuse: bad value '%s' for option '%s' (%s)\n", val, key, where);
	return -EINVAL;
}

static int read_config_file(struct recon_config *cfg, const char *path)
{
	config_t lc;
	int ret = 0;

	config_init(&lc);
	if (config_read_file(&lc, path) != CONFIG_TRUE) {
		if (config_error_type(&lc) == CONFIG_ERR_FILE_IO)
			fprintf(stderr, "recon-fuse: cannot read config file %s\n", path);
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
	cfg->block_cache_mb = 64;
	cfg->threads = 1;
	cfg->poll_us = 50;
	cfg->fuse_uring = FUSE_URING_AUTO;
	cfg->checker = true;
	cfg->checker_cache_mb = 128;
	cfg->commit_interval_ms = 1000;
	cfg->on_violation = ONV_READONLY;
	cfg->journal = true;
	cfg->async_commit = true;
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
		if (!strcmp(key, "config") || !strcmp(key, "noatime") || !strcmp(key, "relatime") ||
		    !strcmp(key, "strictatime") || !strcmp(key, "atime") || !strcmp(key, "ro") ||
		    !strcmp(key, "rw") || !strcmp(key, "allow_other") || ext3_alias(key) ||
		    ext3_noop(tok))
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

static int apply_cmdline_opts(struct recon_config *cfg, char *list)
{
	char *save = NULL;
	int ret = 0;

	if (!list)
		return 0;
	for (char *tok = strtok_r(list, ",", &save); tok && !ret; tok = strtok_r(NULL, ",", &save)) {
		if (ext3_noop(tok))
			continue;
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
		const struct ext3_alias *alias = val ? NULL : ext3_alias(tok);
		if (alias) {
			ret = set_key(cfg, alias->key, alias->val, false, "-o");
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

int config_parse(int argc, char **argv, struct recon_config *cfg, struct fuse_args *fuse_args)
{
	struct optbuf ours = { 0 }, theirs = { 0 };
	char *config_file = NULL;
	int ret = 0, npos = 0;

	set_defaults(cfg);
	for (int i = 1; i < argc && !ret; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-o")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "recon-fuse: -o needs an option list\n");
				ret = -EINVAL;
				break;
			}
			ret = split_opts(argv[++i], &ours, &theirs);
		} else if (!strncmp(a, "-o", 2)) {
			ret = split_opts(a + 2, &ours, &theirs);
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
	if (ret)
		goto out;
	if (cfg->show_help || cfg->show_version)
		goto out;
	if (npos != 2) {
		fprintf(stderr, "usage: recon-fuse [-o opt,...] [-f] [-d] DEVICE MOUNTPOINT "
			"(recon-fuse --help for the options)\n");
		ret = -EINVAL;
		goto out;
	}
	ret = make_absolute(&cfg->device);
	if (!ret)
		ret = make_absolute(&cfg->mountpoint);
	if (ret)
		goto out;

	/* the config file first, then -o on top of it */
	if (ours.s) {
		char *copy = strdup(ours.s), *save = NULL;
		if (!copy) {
			ret = -ENOMEM;
			goto out;
		}
		for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
			if (!strncmp(tok, "config=", 7)) {
				free(config_file);
				config_file = strdup(tok + 7);
			} else if (!strcmp(tok, "config")) {
				fprintf(stderr, "recon-fuse: option 'config' needs a file name\n");
				ret = -EINVAL;
			}
		free(copy);
		if (ret)
			goto out;
	}
	if (config_file) {
		ret = read_config_file(cfg, config_file);
		cfg->config_file = config_file;
		config_file = NULL;
	} else if (access(DEFAULT_CONFIG_FILE, F_OK) == 0) {
		ret = read_config_file(cfg, DEFAULT_CONFIG_FILE);
		cfg->config_file = strdup(DEFAULT_CONFIG_FILE);
	}
	if (!ret)
		ret = apply_cmdline_opts(cfg, ours.s);
	if (ret)
		goto out;
	if (cfg->deterministic) {
		cfg->threads = 1;
		cfg->poll_us = 0;
		cfg->commit_interval_ms = 0;
		cfg->async_commit = false;
		cfg->fuse_uring = FUSE_URING_OFF;
	}
	if (cfg->threads == 0)
		cfg->threads = 1;
	if (cfg->noload && !cfg->ro) {
		fprintf(stderr, "recon-fuse: noload (norecovery) requires ro: a read-write mount "
			"must replay the journal first\n");
		ret = -EINVAL;
		goto out;
	}
	if (cfg->poll_us > 10000) {
		fprintf(stderr, "recon-fuse: poll_us=%u: at most 10000 (10 ms)\n", cfg->poll_us);
		ret = -EINVAL;
		goto out;
	}
	ret = make_absolute(&cfg->pidfile);
	if (!ret)
		ret = make_absolute(&cfg->stats_file);
	if (!ret)
		ret = check_mountpoint(cfg->mountpoint);
	if (ret)
		goto out;

	/* show the device in mount(8) and /proc/mounts */
	if (!strstr(theirs.s ? theirs.s : "", "fsname=") && !strchr(cfg->device, ',')) {
		char *fsname;
		if (asprintf(&fsname, "fsname=%s", cfg->device) < 0) {
			ret = -ENOMEM;
			goto out;
		}
		ret = optbuf_add(&theirs, fsname);
		free(fsname);
	}
	if (!ret && !strstr(theirs.s ? theirs.s : "", "subtype="))
		ret = optbuf_add(&theirs, "subtype=recon-fuse");
	if (ret)
		goto out;
	if (fuse_opt_add_arg(fuse_args, argv[0]) ||
	    (cfg->debug && fuse_opt_add_arg(fuse_args, "-d")) ||
	    (theirs.s && (fuse_opt_add_arg(fuse_args, "-o") || fuse_opt_add_arg(fuse_args, theirs.s))))
		ret = -ENOMEM;
out:
	free(config_file);
	free(ours.s);
	free(theirs.s);
	return ret;
}

void config_print_help(FILE *out)
{
	fprintf(out,
		"usage: recon-fuse [-o opt,...] [-f] [-d] DEVICE MOUNTPOINT\n"
		"\n"
		"  -f                 stay in the foreground\n"
		"  -d                 FUSE debug output (implies -f)\n"
		"  -s                 single-threaded\n"
		"  -h, --help         this text\n"
		"  -V, --version      version\n"
		"\n"
		"recon-fuse options (-o key=value, or key = value; in the config file):\n"
		"  ro                 mount read-only\n"
		"  allow_other        let other users access the mount\n"
		"  config=FILE        config file (default /etc/recon-fuse.conf if present)\n"
		"  noatime, relatime, strictatime   access-time policy (relatime)\n");
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		fprintf(out, "  %-22s %s\n", keys[i].name, keys[i].help);
	fprintf(out, "\nBooleans take on/off/true/false/1/0.  Other -o options (default_permissions,\n"
		"fsname=, subtype=, max_read=, ...) are passed to FUSE.\n");
}

void config_free(struct recon_config *cfg)
{
	free(cfg->device);
	free(cfg->mountpoint);
	free(cfg->pidfile);
	free(cfg->log_file);
	free(cfg->config_file);
	free(cfg->fault_corrupt);
	free(cfg->stats_file);
	memset(cfg, 0, sizeof(*cfg));
}
