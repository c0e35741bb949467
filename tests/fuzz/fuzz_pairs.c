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
 *              [--ext4] [--fsck] [--repair] [--strict ALLOWLIST] [--class NAME]
 *              [--results FILE] [--replay DESC | --replay-file FILE]
 *
 * --ext4 makes the images with mke2fs -t ext4 (extent trees of depth 1 and
 * 2, unwritten extents, flex_bg, uninitialised groups, metadata checksums).
 * Class csumflip flips one bit inside what a checksum covers and leaves the
 * checksum stale: the transaction must be rejected.  --repair recomputes
 * every checksum a mutant's edits touch (the repaired bytes become edits of
 * the mutant), so that the structural invariants are what is judged.
 * --strict ALLOWLIST (implies --fsck) makes every disagreement with
 * e2fsck -fn a failure: an approval (transaction or scan) of an image e2fsck
 * finds errors in (exit 4 or more) is a missed violation, a rejection of an
 * image it finds clean (exit 0, no problem named) a false alarm, unless the
 * allowlist (tests/fuzz/ext4-oracle-allow.txt) gives the reason.  --class runs one mutation class only.
 *
 * Mutant i of a run uses seed FIRST_SEED + i, class i % FC_NCLASSES (or
 * --class), variant (i / FC_NCLASSES) % 2 (i % 2 with --class).
 * Failures print the mutant's description ("bs=... v=... seed=... class=...
 * edits=OFF:HEX,..."), which --replay runs again; fixed ones are kept in
 * tests/fuzz/regressions.txt (ext3 images) and regressions-ext4.txt.
 * recon-check is $RECON_CHECK.
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

struct counts { unsigned tried, crashes, verdict[3], scan_only, fsck_only, misses, false_alarms, allowed, repaired, csum_left; };
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

static bool fsck_oracle, repair_csums;
static const char *pair_before;

/* --strict FILE: lines "MODE: WHAT | why".  MODE pair or scan, WHAT an
 * invariant id, optionally "INV_X ~ TEXT" (its detail must contain TEXT): a
 * rejection of an image e2fsck -fn finds clean is no false alarm when every
 * problem it reports matches such a line (a transition rule e2fsck cannot
 * judge, or a state the checker is stricter on).  MODE cause: one matching
 * problem excuses the whole rejection (a corruption e2fsck does not see but
 * the kernel refuses; what follows from it needs no line of its own); MODE
 * rule: the same for a transaction only (a write no file system makes).  MODE
 * fsck, WHAT a text: an e2fsck finding outside the checker's model (an
 * approval of an image whose e2fsck output has the text is no miss). */
#define MAX_ALLOW 64
static struct { char mode[8], inv[64], text[160]; } allow[MAX_ALLOW];
static size_t nallow;
static bool strict;

static int load_allow(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "fuzz_pairs: %s: %s\n", path, strerror(errno));
		return -1;
	}
	char line[512], what[256];
	while (fgets(line, sizeof(line), f) && nallow < MAX_ALLOW) {
		char *bar = strstr(line, " | ");
		if (line[0] == '#' || line[0] == '\n' || !bar)
			continue;
		*bar = 0;
		if (sscanf(line, "%7[a-z]: %255[^\n]", allow[nallow].mode, what) != 2)
			continue;
		char *tilde = strstr(what, " ~ ");
		if (!strcmp(allow[nallow].mode, "fsck")) {
			snprintf(allow[nallow].text, sizeof(allow[nallow].text), "%.159s", what);
		} else {
			if (tilde) {
				*tilde = 0;
				snprintf(allow[nallow].text, sizeof(allow[nallow].text), "%.159s", tilde + 3);
			}
			snprintf(allow[nallow].inv, sizeof(allow[nallow].inv), "%.63s", what);
		}
		nallow++;
	}
	fclose(f);
	strict = true;
	return 0;
}

/* a recon-check problem line "INV_X: detail" matched against mode's lines */
static bool problem_allowed(const char *mode, const char *inv, const char *line)
{
	for (size_t i = 0; i < nallow; i++)
		if (!strcmp(allow[i].mode, mode) && !strcmp(allow[i].inv, inv) &&
		    (!allow[i].text[0] || strstr(line, allow[i].text)))
			return true;
	return false;
}

/* true when the rejection a recon-check run printed is explained for mode
 * (modes "cause" and "rule": when one of its problems matches such a line) */
static bool rejection_allowed(const char *out, const char *mode)
{
	FILE *f = fopen(out, "r");
	if (!f)
		return false;
	char line[4096], inv[64];
	bool all = true, any = false, cause = false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%63[A-Z0-9_]: ", inv) == 1 && !strncmp(inv, "INV_", 4) && line[strlen(inv)] == ':') {
			any = true;
			cause = cause || problem_allowed(mode, inv, line);
			all = all && problem_allowed(mode, inv, line);
		}
	fclose(f);
	return strcmp(mode, "cause") && strcmp(mode, "rule") ? any && all : cause;
}

static bool fsck_allowed(const char *out)
{
	FILE *f = fopen(out, "r");
	if (!f)
		return false;
	char line[4096];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f))
		for (size_t i = 0; i < nallow && !found; i++)
			found = !strcmp(allow[i].mode, "fsck") && strstr(line, allow[i].text);
	fclose(f);
	return found;
}

/* e2fsck -fn AFTER against the two verdicts (a: BEFORE AFTER, b: --scan AFTER).
 * Without --strict, a scan rejection e2fsck does not share is listed as a
 * candidate; with it, a checker approval of what e2fsck finds broken is a
 * miss and a rejection of what it finds clean a false alarm (both failures)
 * unless the allowlist explains them. */
static void judge_oracle(struct counts *c, const char *after, int a, int b, const char *desc)
{
	char out[256], pout[256], sout[256];
	snprintf(out, sizeof(out), "%s/fsck.out", dir);
	char *fsck[] = { "e2fsck", "-fn", (char *)after, NULL };
	int st = run_timed(fsck, out);
	int f = st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	if (b == 0 && f > 0)
		c->fsck_only++;
	if (b == 1 && f == 0)
		c->scan_only++;
	/* the harness's own check: a repaired mutant e2fsck finds a stale
	 * checksum in means the repair missed one (or the edit broke the
	 * structure the checksum lives in); counted, for a human to look at */
	if (repair_csums && file_has(out, "checksum")) {
		c->csum_left++;
		if (getenv("FUZZ_SHOW_CSUM_LEFT"))
			printf("checksum left stale: %s\n", desc);
	}
	if (!strict) {
		if (b == 1 && f == 0) {
			printf("scan-only (false-alarm candidate): %s\n", desc);
			char *scanv[] = { (char *)recon_check, "--scan", (char *)after, NULL };
			snprintf(out, sizeof(out), "%s/scan.out", dir);
			run_timed(scanv, out);
			print_file(out, 4);
		}
		return;
	}
	snprintf(pout, sizeof(pout), "%s/pair.out", dir);
	snprintf(sout, sizeof(sout), "%s/scan.out", dir);
	char *pairv[] = { (char *)recon_check, (char *)pair_before, (char *)after, NULL };
	char *scanv[] = { (char *)recon_check, "--scan", (char *)after, NULL };
	const char *bad = NULL, *shown = out;
	bool fsck_error = f >= 4 || f < 0;         /* 4: errors left; 8: e2fsck could not check it */
	if (fsck_error && (a == 0 || b == 0)) {
		if (fsck_allowed(out))
			c->allowed++;
		else
			bad = a == 0 && b == 0 ? "missed violation (both)" : a == 0 ? "missed violation (transaction)"
										   : "missed violation (scan)";
	} else if (f == 0 && (a == 1 || b == 1) && !file_has(out, "? no")) {
		/* (e2fsck -n may name a problem, "Fix? no", and still exit 0:
		 * a rejection of what it names is no false alarm) */
		run_timed(pairv, pout);
		run_timed(scanv, sout);
		/* a cause is the image's: either run may name it (the other may stop
		 * at its cap of problems before it gets there) */
		bool cause = rejection_allowed(pout, "cause") || rejection_allowed(sout, "cause");
		bool pair_ok = a != 1 || cause || rejection_allowed(pout, "rule") || rejection_allowed(pout, "pair");
		bool scan_ok = b != 1 || cause || rejection_allowed(sout, "scan");
		if (pair_ok && scan_ok)
			c->allowed++;
		else
			bad = !scan_ok ? "false alarm (scan)" : "false alarm (transaction)", shown = !scan_ok ? sout : pout;
	}
	if (!bad)
		return;
	if (bad[0] == 'm')
		c->misses++;
	else
		c->false_alarms++;
	failures++;
	fprintf(stderr, "FAIL: %s: e2fsck -fn exit %d, transaction %d, scan %d\n   mutant: %s\n", bad, f, a, b, desc);
	print_file(shown, 12);
}

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
	pair_before = tg->before;
	int a = judge("recon-check BEFORE AFTER", pair, desc);
	int b = judge("recon-check --scan AFTER", scan, desc);
	if (a < 0 || b < 0) {
		c->crashes++;
		failures++;
	} else {
		c->verdict[a]++;
	}
	if (m->cls == FC_CSUMFLIP && a == 0) {
		fprintf(stderr, "FAIL: a checksummed block with one bit flipped was approved\n   mutant: %s\n", desc);
		c->misses++;
		failures++;
	}
	/* a stale checksum is refused whatever e2fsck -n says of it (it only
	 * names a descriptor's, before pass 1) */
	if (fsck_oracle && a >= 0 && b >= 0 && m->cls != FC_CSUMFLIP)
		judge_oracle(c, after, a, b, desc);
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

/* Replays every mutant line of a file (comments and blank lines skipped). */
static void replay_all(struct target tg[2], const char *replay_file)
{
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
}

/* The per-class table on stdout and, with --results, the same as JSON. */
static void report(uint64_t seed0, time_t start, const char *results)
{
	unsigned tried = 0, crashes = 0, scan_only = 0;
	printf("%-8s %6s %7s %8s %8s %8s %9s %9s %6s %6s %7s %8s\n", "class", "tried", "crashes", "approved", "rejected",
	       "refused", "scan-only", "fsck-only", "misses", "false", "allowed", "repaired");
	for (int c = 0; c < FC_NCLASSES; c++) {
		const struct counts *k = &per_class[c];
		if (!k->tried)
			continue;
		printf("%-8s %6u %7u %8u %8u %8u %9u %9u %6u %6u %7u %8u\n", fz_class_name[c], k->tried, k->crashes,
		       k->verdict[0], k->verdict[1], k->verdict[2], k->scan_only, k->fsck_only, k->misses,
		       k->false_alarms, k->allowed, k->repaired);
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
				   "\"fsck_oracle\": %s, \"strict\": %s, \"ext4\": %s, \"repair\": %s, \"classes\": {",
				seed0, tried, failures, secs, fsck_oracle ? "true" : "false", strict ? "true" : "false",
				fz_ext4 ? "true" : "false", repair_csums ? "true" : "false");
			for (int c = 0; c < FC_NCLASSES; c++) {
				const struct counts *k = &per_class[c];
				fprintf(f, "%s\"%s\": {\"tried\": %u, \"crashes\": %u, \"approved\": %u, \"rejected\": %u, "
					   "\"refused\": %u, \"scan_only\": %u, \"fsck_only\": %u, \"misses\": %u, "
					   "\"false_alarms\": %u, \"allowed\": %u, \"repaired\": %u, \"csum_left\": %u}",
					c ? ", " : "", fz_class_name[c], k->tried, k->crashes, k->verdict[0], k->verdict[1],
					k->verdict[2], k->scan_only, k->fsck_only, k->misses, k->false_alarms, k->allowed,
					k->repaired, k->csum_left);
			}
			fprintf(f, "}}\n");
			fclose(f);
		}
	}
}

int main(int argc, char **argv)
{
	unsigned n = 100;
	uint64_t seed0 = 1;
	uint32_t only_bs = 0;
	int only_class = -1;
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
		else if (!strcmp(argv[i], "--class") && i + 1 < argc) {
			const char *name = argv[++i];
			for (int c = 0; c < FC_NCLASSES; c++)
				if (!strcmp(name, fz_class_name[c]))
					only_class = c;
			if (only_class < 0) {
				fprintf(stderr, "fuzz_pairs: no mutation class \"%s\"\n", name);
				return 2;
			}
		} else if (!strcmp(argv[i], "--ext4"))
			fz_ext4 = true;
		else if (!strcmp(argv[i], "--fsck"))
			fsck_oracle = true;
		else if (!strcmp(argv[i], "--repair"))
			repair_csums = true;
		else if (!strcmp(argv[i], "--strict") && i + 1 < argc) {
			if (load_allow(argv[++i]))
				return 2;
			fsck_oracle = true;
		}
		else if (!strcmp(argv[i], "--results") && i + 1 < argc)
			results = argv[++i];
		else if (!strcmp(argv[i], "--replay") && i + 1 < argc)
			replay = argv[++i];
		else if (!strcmp(argv[i], "--replay-file") && i + 1 < argc)
			replay_file = argv[++i];
		else {
			fprintf(stderr, "usage: fuzz_pairs [-n N] [-s SEED] [-t SECONDS] [--bs 1024|4096] [--ext4] [--fsck]"
					" [--repair] [--strict ALLOWLIST] [--class NAME]"
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
		replay_all(tg, replay_file);
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
				int cls = only_class >= 0 ? only_class : (int)(i % FC_NCLASSES);
				int variant = (int)((only_class >= 0 ? i : i / FC_NCLASSES) % 2);
				fz_draw(&tg[s].im[variant], cls, seed0 + i, &m);
				m.variant = variant;
				if (repair_csums && cls != FC_CSUMFLIP && m.nedits &&
				    fz_repair_csums(&tg[s].im[variant], &m) > 0)
					per_class[cls].repaired++;
				if (m.nedits)
					run_mutant(&tg[s], &m);
			}
		}
	}
	for (int s = 0; s < 2; s++)
		teardown(&tg[s]);
	report(seed0, start, results);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (failures && getenv("RECON_KEEP"))
		fprintf(stderr, "fuzz_pairs: images kept in %s\n", dir);
	else if (system(cmd))
		fprintf(stderr, "fuzz_pairs: cannot remove %s\n", dir);
	return failures ? 1 : 0;
}
