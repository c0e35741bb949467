/*
 * fuse/config.h - recon-fuse's configuration: built-in defaults, then the
 * config file (/etc/recon-fuse.conf if present, or -o config=FILE), then
 * -o key=value.  Internal to fuse/ (main.c is its only caller).
 *
 * Errors: -errno; a message naming the key and the bad value is printed to
 * stderr by the parser itself, so the caller just exits with status 1.
 *
 * The I/O manager's settings are io's own struct rio_config, embedded as
 * `io` and handed to rio_set_config() as it is: its defaults are io's
 * (RIO_CONFIG_DEFAULTS), the -o keys name its fields.
 */
#ifndef RECON_FUSE_CONFIG_H
#define RECON_FUSE_CONFIG_H

#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 35
#endif
#include <fuse_lowlevel.h>
#include "io.h"

enum atime_mode { ATIME_RELATIME, ATIME_NOATIME, ATIME_STRICTATIME };
enum map_root { MAP_ROOT_AUTO, MAP_ROOT_ON, MAP_ROOT_OFF };
enum fuse_uring_mode { FUSE_URING_AUTO, FUSE_URING_ON, FUSE_URING_OFF };

struct recon_config {
	/* command line */
	char *device;
	char *mountpoint;
	bool foreground;          /* -f */
	bool debug;               /* -d: FUSE debug, implies -f */
	bool show_help, show_version;

	/* mount behaviour (file or -o) */
	bool ro;                  /* -o ro */
	bool allow_other;
	bool force_rw;            /* mount read-write an image marked with errors */
	bool rw_unchecked;        /* skip the mount-time consistency check (the base case) */
	enum atime_mode atime;    /* relatime (default), noatime, strictatime */
	char *pidfile;            /* -o pidfile=FILE: written after mount, removed at exit */
	char *log_file;           /* -o log=FILE: every message appended, time-stamped */
	char *config_file;        /* -o config=FILE (else /etc/recon-fuse.conf if present) */
	bool acl;                 /* POSIX ACLs stored and enforced (default on, as Debian's ext3) */
	bool user_xattr;          /* user.* extended attributes (default on) */
	bool sync, dirsync;       /* every change / every directory change commits before it replies */
	bool noload;              /* ro without journal replay (noload, norecovery) */
	enum map_root map_root;   /* the image's uid/gid 0 shown as the mounting user's (auto) */
	bool grpid;               /* new inodes take the directory's group (grpid, bsdgroups) */
	int64_t resuid, resgid;   /* who may use the reserved blocks besides root; -1: the
	                           * superblock's s_def_resuid / s_def_resgid */
	bool minixdf;             /* statfs counts the metadata's blocks too (kernel's minixdf) */
	char *seal_dir;           /* seals of clean unmounts (NULL: the default; "none": no seals) */

	/* FUSE requests */
	unsigned threads;         /* FUSE worker threads, default 1 */
	unsigned poll_us;         /* keep reading /dev/fuse this long before sleeping (one thread), default 50 */
	enum fuse_uring_mode fuse_uring; /* FUSE requests over io_uring: auto (default), on, off */

	/* the I/O manager: block cache, checker, transactions, journal, and
	 * the test-only faults and no_uring (fault_corrupt: malloc'd here,
	 * validated; async_commit and commit_interval_ms off with deterministic) */
	struct rio_config io;

	/* testing only: accepted from -o alone, never from a file */
	bool deterministic;
	char *stats_file;                /* -o stats=FILE */
};

/*
 * Parse argv (recon-fuse [-o opt,...] [-f] [-d] DEVICE MOUNTPOINT, options may
 * also follow the positionals as mount.fuse3 passes them).  Keys we own are
 * consumed; everything else (the usual FUSE options: ro, allow_other,
 * default_permissions, fsname, subtype, max_read, ...) is left in *fuse_args
 * for fuse_session_new(), which rejects what it does not know.
 * Relative paths (device, mount point, pidfile, stats) are made absolute,
 * as the daemon leaves its working directory; the mount point must be a
 * directory that answers (not a FUSE mount whose daemon is gone).
 * Returns 0, or -errno after printing a clear message.
 */
int config_parse(int argc, char **argv, struct recon_config *cfg,
		 struct fuse_args *fuse_args);

/* Print the option list (for --help). */
void config_print_help(FILE *out);

void config_free(struct recon_config *cfg);

#endif
