/*
 * tests/fuzz/fuzz_pairs.c - seeded pair fuzzer for recon-check (no clang
 * needed).  For 1 KiB and 4 KiB blocks it builds a small populated ext3
 * image (BEFORE) and, as variant 1, the same after a legitimate debugfs
 * transition; each mutant edits metadata of one of them (AFTER) and runs
 *
 *     recon-check BEFORE AFTER       and       recon-check --scan AFTER
 *
 * under a timeout.  A mutant fails if either run crashes (signal), prints a
 * sanitizer report, exceeds the timeout or exits other than 0/1/2.  With
 * --fsck, e2fsck -fn AFTER is run too and an AFTER the scan rejects but
 * e2fsck accepts is listed as a false-alarm candidate (the scan is stricter
 * on a few documented points, so candidates are for a human to judge).
 *
 *   fuzz_pairs [-n MUTANTS_PER_BS] [-s FIRST_SEED] [-t TIMEOUT_S] [--bs 1024|4096]
 *              [--ext4] [--fsck] [--results FILE] [--replay DESC | --replay-file FILE]
 *
 * --ext4 makes the images with mke2fs -t ext4 (extents, metadata checksums).
 *
 * Mutant i of a run uses seed FIRST_SEED + i, class i % 9, variant (i / 9) % 2.
 * Failures print the mutant's description ("bs=... v=... seed=... class=...
 * edits=OFF:HEX,..."), which --replay runs again; fixed ones are kept in
 * tests/fuzz/regressions.txt.  recon-check is $RECON_CHECK.
 * Exit 0 no failure, 1 failures, 77 no mke2fs/debugfs/e2fsck.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fuzz_image.h"

static char dir[64];
static const char *recon_check;
static unsigned timeout_s = 20;

struct counts { unsigned tried, crashes, verdict[3], scan_only, fsck_only; };
static struct counts per_class[FC_NCLASSES];
static unsigned failures;

/* Runs argv with stdout/stderr to `out`; returns the wait status, or -1 on a
 * timeout (the child is killed). */
static int run_timed(char *const argv[], const char *out)
{
	pid_t pid = fork();
	if (pid < 0)
		return -2;
	if (pid == 0) {
		int fd = open(out, O_CREAT | O_TRUNC | O_WRONLY, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		execvp(argv[0], argv);
		_exit(127);
	}
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int st;
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return st;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec >= (time_t)timeout_s) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		struct timespec d = { 0, 2000000 };
		nanosleep(&d, NULL);
	}
}

static bool file_has(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	char line[4096];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

static void print_file(const char *path, int max)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	char line[4096];
	while (max-- > 0 && fgets(line, sizeof(line), f))
		fprintf(stderr, "      %s", line);
	fclose(f);
}

/* One recon-check run: -1 failure (reported), else its exit code (0/1/2). */
static int judge(const char *what, char *const argv[], const char *desc)
{
	char out[256];
	snprintf(out, sizeof(out), "%s/out", dir);
	int st = run_timed(argv, out);
	const char *why = NULL;
	char buf[64];
	if (st == -1)
		why = "timeout";
	else if (st < 0)
		why = "cannot fork";
	else if (WIFSIGNALED(st))
		snprintf(buf, sizeof(buf), "killed by signal %d", WTERMSIG(st)), why = buf;
	else if (WEXITSTATUS(st) > 2)
		snprintf(buf, sizeof(buf), "exit %d", WEXITSTATUS(st)), why = buf;
	else if (file_has(out, "runtime error") || file_has(out, "Sanitizer"))
		why = "sanitizer report";
	if (!why)
		return WEXITSTATUS(st);
	fprintf(stderr, "FAIL: %s: %s\n   mutant: %s\n", what, why, desc);
	print_file(out, 12);
	return -1;
}

struct target {
	uint32_t bs;
	char before[512], after_base[2][512], after[2][512];
	struct fz_image im[2];
	uint8_t *after_data[2];
};

static int fd_patch(const char *path, const struct fz_mutant *m, const uint8_t *orig, size_t size, bool restore)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	int rc = 0;
	for (size_t i = 0; i < m->nedits && !rc; i++) {
		const struct fz_edit *e = &m->edits[i];
		for (uint32_t r = 0; r < e->rep && !rc; r++) {
			uint64_t at = e->off + (uint64_t)r * e->plen;
			if (at + e->plen > size)
				continue;
			const void *src = restore ? orig + at : e->pat;
			rc = pwrite(fd, src, e->plen, (off_t)at) == e->plen ? 0 : -1;
		}
	}
	close(fd);
	return rc;
}

static bool fsck_oracle;

static void run_mutant(struct target *tg, const struct fz_mutant *m)
{
	char desc[2048];
	fz_describe(m, desc, sizeof(desc));
	const char *after = tg->after[m->variant];
	const uint8_t *orig = tg->im[m->variant].data;
	struct counts *c = &per_class[m->cls];
	c->tried++;
	if (fd_patch(after, m, orig, tg->im[m->variant].size, false)) {
		fprintf(stderr, "FAIL: cannot write the mutant %s\n", desc);
		failures++;
		return;
	}
	char *pair[] = { (char *)recon_check, tg->before, (char *)after, NULL };
	char *scan[] = { (char *)recon_check, "--scan", (char *)after, NULL };
	int a = judge("recon-check BEFORE AFTER", pair, desc);
	int b = judge("recon-check --scan AFTER", scan, desc);
	if (a < 0 || b < 0) {
		c->crashes++;
		failures++;
	} else {
		c->verdict[a]++;
	}
	if (fsck_oracle && b >= 0) {
		char out[256];
		snprintf(out, sizeof(out), "%s/fsck.out", dir);
		char *fsck[] = { "e2fsck", "-fn", (char *)after, NULL };
		int st = run_timed(fsck, out);
		int f = st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		if (b == 1 && f == 0) {
			c->scan_only++;
			printf("scan-only (false-alarm candidate): %s\n", desc);
			char *scanv[] = { (char *)recon_check, "--scan", (char *)after, NULL };
			snprintf(out, sizeof(out), "%s/scan.out", dir);
			run_timed(scanv, out);
			print_file(out, 4);
		} else if (b == 0 && f > 0) {
			c->fsck_only++;
		}
	}
	if (fd_patch(after, m, orig, tg->im[m->variant].size, true)) {
		fprintf(stderr, "FAIL: cannot restore the after image after %s\n", desc);
		failures++;
	}
}

static int setup(struct target *tg, uint32_t bs)
{
	tg->bs = bs;
	if (fz_make_base(dir, bs, 0, tg->before, sizeof(tg->before)) ||
	    fz_make_base(dir, bs, 1, tg->after_base[1], sizeof(tg->after_base[1])))
		return -1;
	snprintf(tg->after_base[0], sizeof(tg->after_base[0]), "%s", tg->before);
	for (int v = 0; v < 2; v++) {
		snprintf(tg->after[v], sizeof(tg->after[v]), "%s/after-%u-%d.img", dir, bs, v);
		char cmd[2048];
		snprintf(cmd, sizeof(cmd), "cp %s %s", tg->after_base[v], tg->after[v]);
		if (system(cmd) || fz_load(tg->after_base[v], &tg->im[v])) {
			fprintf(stderr, "fuzz: cannot load %s\n", tg->after_base[v]);
			return -1;
		}
	}
	/* the unmutated pair must be approved and both images scan clean */
	struct fz_mutant none = { .bs = bs, .variant = 1 };
	char *pair[] = { (char *)recon_check, tg->before, tg->after[1], NULL };
	char *scan[] = { (char *)recon_check, "--scan", tg->after[1], NULL };
	if (judge("unmutated pair", pair, "none") != 0 || judge("unmutated scan", scan, "none") != 0) {
		fprintf(stderr, "FAIL: the unmutated bs %u pair is not approved or does not scan clean\n", bs);
		return -1;
	}
	(void)none;
	return 0;
}

static void teardown(struct target *tg)
{
	for (int v = 0; v < 2; v++)
		fz_free(&tg->im[v]);
}

static int replay_line(struct target tg[2], const char *line)
{
	struct fz_mutant m;
	if (fz_parse(line, &m)) {
		fprintf(stderr, "FAIL: cannot parse mutant \"%s\"\n", line);
		failures++;
		return -1;
	}
	struct target *t = m.bs == 1024 ? &tg[0] : &tg[1];
	if (!t->bs && setup(t, m.bs)) {
		failures++;
		return -1;
	}
	run_mutant(t, &m);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned n = 100;
	uint64_t seed0 = 1;
	uint32_t only_bs = 0;
	const char *replay = NULL, *replay_file = NULL, *results = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-n") && i + 1 < argc)
			n = (unsigned)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "-s") && i + 1 < argc)
			seed0 = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "-t") && i + 1 < argc)
			timeout_s = (unsigned)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--bs") && i + 1 < argc)
			only_bs = (uint32_t)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--ext4"))
			fz_ext4 = true;
		else if (!strcmp(argv[i], "--fsck"))
			fsck_oracle = true;
		else if (!strcmp(argv[i], "--results") && i + 1 < argc)
			results = argv[++i];
		else if (!strcmp(argv[i], "--replay") && i + 1 < argc)
			replay = argv[++i];
		else if (!strcmp(argv[i], "--replay-file") && i + 1 < argc)
			replay_file = argv[++i];
		else {
			fprintf(stderr, "usage: fuzz_pairs [-n N] [-s SEED] [-t SECONDS] [--bs 1024|4096] [--ext4] [--fsck]"
					" [--results FILE] [--replay DESC | --replay-file FILE]\n");
			return 2;
		}
	}
	recon_check = getenv("RECON_CHECK");
	if (!recon_check) {
		fprintf(stderr, "fuzz_pairs: set RECON_CHECK to the recon-check binary\n");
		return 2;
	}
	if (system("command -v mke2fs >/dev/null && command -v debugfs >/dev/null && command -v e2fsck >/dev/null"))
		return 77;
	snprintf(dir, sizeof(dir), "/tmp/chk-fuzz-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	struct target tg[2];
	memset(tg, 0, sizeof(tg));
	time_t start = time(NULL);
	if (replay) {
		replay_line(tg, replay);
	} else if (replay_file) {
		FILE *f = fopen(replay_file, "r");
		if (!f) {
			fprintf(stderr, "fuzz_pairs: %s: %s\n", replay_file, strerror(errno));
			failures++;
		}
		char line[4096];
		while (f && fgets(line, sizeof(line), f)) {
			if (line[0] == '#' || line[0] == '\n')
				continue;
			line[strcspn(line, "\n")] = 0;
			replay_line(tg, line);
		}
		if (f)
			fclose(f);
	} else {
		static const uint32_t sizes[] = { 1024, 4096 };
		for (int s = 0; s < 2; s++) {
			if (only_bs && only_bs != sizes[s])
				continue;
			if (setup(&tg[s], sizes[s])) {
				failures++;
				continue;
			}
			for (unsigned i = 0; i < n; i++) {
				struct fz_mutant m;
				int cls = (int)(i % FC_NCLASSES), variant = (int)((i / FC_NCLASSES) % 2);
				fz_draw(&tg[s].im[variant], cls, seed0 + i, &m);
				m.variant = variant;
				if (m.nedits)
					run_mutant(&tg[s], &m);
			}
		}
	}
	for (int s = 0; s < 2; s++)
		teardown(&tg[s]);
	unsigned tried = 0, crashes = 0, scan_only = 0;
	printf("%-8s %6s %7s %8s %8s %8s %9s %9s\n", "class", "tried", "crashes", "approved", "rejected",
	       "refused", "scan-only", "fsck-only");
	for (int c = 0; c < FC_NCLASSES; c++) {
		const struct counts *k = &per_class[c];
		printf("%-8s %6u %7u %8u %8u %8u %9u %9u\n", fz_class_name[c], k->tried, k->crashes, k->verdict[0],
		       k->verdict[1], k->verdict[2], k->scan_only, k->fsck_only);
		tried += k->tried;
		crashes += k->crashes;
		scan_only += k->scan_only;
	}
	long secs = (long)(time(NULL) - start);
	printf("fuzz_pairs: %u mutants (first seed %" PRIu64 "), %u failures, %u scan-only, %ld s\n", tried, seed0,
	       failures, scan_only, secs);
	if (results) {
		FILE *f = fopen(results, "w");
		if (f) {
			fprintf(f, "{\"first_seed\": %" PRIu64 ", \"mutants\": %u, \"failures\": %u, \"seconds\": %ld, "
				   "\"fsck_oracle\": %s, \"classes\": {", seed0, tried, failures, secs,
				fsck_oracle ? "true" : "false");
			for (int c = 0; c < FC_NCLASSES; c++) {
				const struct counts *k = &per_class[c];
				fprintf(f, "%s\"%s\": {\"tried\": %u, \"crashes\": %u, \"approved\": %u, \"rejected\": %u, "
					   "\"refused\": %u, \"scan_only\": %u, \"fsck_only\": %u}", c ? ", " : "",
					fz_class_name[c], k->tried, k->crashes, k->verdict[0], k->verdict[1], k->verdict[2],
					k->scan_only, k->fsck_only);
			}
			fprintf(f, "}}\n");
			fclose(f);
		}
	}
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (failures && getenv("RECON_KEEP"))
		fprintf(stderr, "fuzz_pairs: images kept in %s\n", dir);
	else if (system(cmd))
		fprintf(stderr, "fuzz_pairs: cannot remove %s\n", dir);
	return failures ? 1 : 0;
}
