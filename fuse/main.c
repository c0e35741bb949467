/*
 * fuse/main.c - recon-fuse's main(): parse the configuration, prepare the
 * file system (mount.c), mount it, serve it over the channel (channel.c)
 * with the ticker running (ticker.c), and at unmount flush and close
 * everything before exiting with a status that says what became of it.
 */
#include "rfs.h"
#include "io.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#define RECON_VERSION "0.1.0"

/* The command line: -1 to go on, else main's exit status (help, version,
 * or a bad command line, said why).  cfg and args are main's to free. */
static int parse_command_line(int argc, char **argv, struct recon_config *cfg,
			      struct fuse_args *args)
{
	if (config_parse(argc, argv, cfg, args))
		return 1;
	if (cfg->show_help) {
		config_print_help(stdout);
		return 0;
	}
	if (cfg->show_version) {
		const char *e2ver = NULL;
		ext2fs_get_library_version(&e2ver, NULL);
		printf("recon-fuse %s (libfuse %s, libext2fs %s)\n", RECON_VERSION,
		       fuse_pkgversion(), e2ver ? e2ver : "?");
		return 0;
	}
	/* ext3 semantics: the kernel checks permissions against our modes and
	 * owners (without it any user of an allow_other mount reads anything) */
	if (fuse_opt_add_arg(args, "-odefault_permissions")) {
		fprintf(stderr, "recon-fuse: out of memory\n");
		return 1;
	}
	return -1;
}

/* Before the session, with the log running: the options checked, the image
 * claimed (*bdev_claim: the fuseblk claim, or -1; main closes it), the I/O
 * manager configured, the file system prepared.  0, or -1 after a message. */
static int prepare(struct rfs *r, struct fuse_args *args, int *bdev_claim)
{
	struct recon_config *cfg = r->cfg;

	/* before we touch the device */
	if (mountstate_check_options(args)) {
		fprintf(stderr, "recon-fuse: unknown or bad mount option (recon-fuse --help lists them)\n");
		return -1;
	}
	if (cfg->fuse_uring == FUSE_URING_ON) {
		const char *why;
		if (!uring_offered(&why)) {
			fprintf(stderr, "recon-fuse: fuse_uring=on, but %s; use fuse_uring=auto or off\n",
				why);
			return -1;
		}
	}
	if (rfs_claim_image(cfg->device, r->ro))
		return -1;
	*bdev_claim = mountstate_fuseblk_claim(cfg, args);
	cfg->io.shared_bdev = *bdev_claim >= 0;
	rio_set_config(&cfg->io);
	if (prepare_fs(r))
		return -1;
	/* the mount's passes (bitmaps, the check) freed what they read:
	 * given back, not kept resident for the whole session */
	(void)malloc_trim(0);
	return 0;
}

/* Mount the session and get ready to serve: the channel, what the mount
 * is told, the mount's state followed, the pid file, the waiting parent
 * told, the ticker.  *bdev_claim is closed (the kernel's mount takes the
 * claim over).  0; or -1 after a message, unmounted and the file system
 * closed. */
static int mount_session(struct rfs *r, int *bdev_claim)
{
	struct recon_config *cfg = r->cfg;
	bool fuseblk = *bdev_claim >= 0;

	if (fuseblk)
		close(*bdev_claim);   /* the kernel's mount takes the claim over */
	*bdev_claim = -1;
	if (fuse_session_mount(r->se, cfg->mountpoint)) {
		fprintf(stderr, "recon-fuse: cannot mount on %s\n", cfg->mountpoint);
		if (fuseblk && mountstate_fuseblk_claim_lost(cfg->device)) {
			/* another mount has the device now: the daemon must not
			 * write to it again, not even at close */
			fprintf(stderr, "recon-fuse: %s was claimed by another user while it was being "
				"mounted: nothing more is written to it\n", cfg->device);
			report_status(1);
			rfs_log_stop();
			_exit(1);
		}
		rfs_unmount(r);
		return -1;
	}
	/* libfuse and fusermount3 know noatime but not strictatime (then the
	 * mount shows relatime, as for a normal user's mount) */
	if (cfg->atime == ATIME_STRICTATIME && geteuid() == 0)
		(void)mountstate_show_atime(cfg->mountpoint, cfg->atime);
	if (channel_start(r)) {
		fprintf(stderr, "recon-fuse: cannot set up the FUSE channel on %s\n", cfg->mountpoint);
		fuse_session_unmount(r->se);
		rfs_unmount(r);
		return -1;
	}
	if (r->ro && !cfg->ro)
		fprintf(stderr, "recon-fuse: mounted %s read-only\n", cfg->device);
	if (!r->ro && cfg->io.on_violation == RIO_ONV_LOG) {
		fprintf(stderr, "recon-fuse: WARNING: on_violation=log: commits that break the "
			"checker's invariants are WRITTEN to %s anyway (for experiments only; the "
			"file system may end up corrupt)\n", cfg->device);
		syslog(LOG_WARNING, "recon-fuse: on_violation=log on %s: rejected commits reach "
		       "the disk", cfg->device);
	}
	(void)mountstate_start(r, !cfg->deterministic);
	if (cfg->pidfile && write_pidfile(cfg->pidfile)) {
		mountstate_stop();
		fuse_session_unmount(r->se);
		rfs_unmount(r);
		return -1;
	}
	if (!cfg->foreground) {
		report_status(0);
		detach_stdio();
	}
	if (reaper_planned(r) && !r->ro)
		start_ticker(r);
	return 0;
}

/* Serve until the session ends (a signal, fusermount -u, on_violation=stop),
 * then stop what served and unmount.  The exit status: RFS_EXIT_STOPPED;
 * else 1 when the loop or the ring failed, 0 when not. */
static int serve(struct rfs *r)
{
	int ret = channel_serve(r);
	mountstate_stop();
	stop_ticker(r);
	bool uring_failed = channel_finish(r);
	fuse_session_unmount(r->se);
	return r->stopped ? RFS_EXIT_STOPPED : ret < 0 || uring_failed ? 1 : 0;
}

/* The session that mounts, with the flags the daemon's state decides:
 * made, its signal handlers set, mounted and served, and destroyed (which
 * calls op_destroy: the final flush and close).  The exit status. */
static int run_session(struct rfs *r, struct fuse_args *args, int *bdev_claim)
{
	int status = 1;

	if (mountstate_add_flags(args, r, *bdev_claim >= 0) ||
	    !(r->se = fuse_session_new(args, &rfs_ops, sizeof(rfs_ops), r))) {
		fprintf(stderr, "recon-fuse: cannot set up the FUSE session\n");
		rfs_unmount(r);
		return 1;
	}
	if (fuse_set_signal_handlers(r->se)) {
		rfs_unmount(r);
	} else {
		if (mount_session(r, bdev_claim) == 0)
			status = serve(r);
		fuse_remove_signal_handlers(r->se);
	}
	fuse_session_destroy(r->se);
	return status;
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct recon_config cfg;
	struct rfs r;
	int status = 1, bdev_claim = -1;

	/* mount -o remount runs us through mount.fuse3: no daemon, a change */
	if (mountstate_is_remount(argc, argv))
		return mountstate_remount(argc, argv);
	memset(&r, 0, sizeof(r));
	int early = parse_command_line(argc, argv, &cfg, &args);
	if (early >= 0) {
		config_free(&cfg);
		fuse_opt_free_args(&args);
		return early;
	}
	add_error_table(&et_ext2_error_table);
	srand48(time(NULL) ^ getpid());
	if (!cfg.foreground && daemonize_early()) {
		fprintf(stderr, "recon-fuse: cannot daemonize: %s\n", strerror(errno));
		return 1;
	}
	r.cfg = &cfg;
	r.ro = cfg.ro;
	pthread_mutex_init(&r.lock, NULL);
	if (!rfs_log_start(&cfg) && !prepare(&r, &args, &bdev_claim))
		status = run_session(&r, &args, &bdev_claim);
	rfs_unmount(&r);              /* when init never ran */
	if (status == 0 && r.lost)
		status = RFS_EXIT_LOST;
	if (cfg.pidfile && (status == 0 || r.stopped || r.lost)) {
		rfs_log_flush();          /* the messages are complete too */
		unlink(cfg.pidfile);      /* last: the image is complete once it is gone */
	}
	if (bdev_claim >= 0)
		close(bdev_claim);
	rfs_log_stop();
	report_status(1);
	pthread_mutex_destroy(&r.lock);
	config_free(&cfg);
	fuse_opt_free_args(&args);
	return status;
}
