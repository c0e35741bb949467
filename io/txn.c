/*
 * io/txn.c - metadata transactions, what the rest of io and the caller see
 * of them: the boundary that decides when to commit, the violations a
 * commit or the data guard records, the data guard itself, and the
 * counters and stats.
 *
 * Every channel write after attach lands in the open transaction's overlay;
 * at a boundary libext2fs's in-memory bitmaps, descriptors and superblock
 * are flushed into it, the shadow checker judges it, and only an approved
 * transaction is logged through the journal (or, without one, written in
 * place), written home and checkpointed.  The files: attach.c (attach,
 * detach, the early checker attach, the base check), commit.c (the commit
 * path and its thread), savepoint.c (libext2fs's allocation callbacks,
 * savepoints and rollback), overlay.c (the overlay and block sets), flush.c
 * (libext2fs's state into the overlay), fault.c (the test-only corruption
 * injector); txn_internal.h names what they share.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "txn_internal.h"

/* ---- violations ---- */

void set_last_violation(struct txn_totals *tt, const char *text)
{
	free(tt->last_violation);
	tt->last_violation = strdup(text);
}

static void add_violation(struct txn_totals *tt, const char *inv, char **records, size_t n)
{
	if (tt->nviol == tt->capviol) {
		size_t cap = tt->capviol ? tt->capviol * 2 : 8;
		struct txn_violation *v = realloc(tt->viol, cap * sizeof(*v));
		if (!v)
			goto drop;
		tt->viol = v;
		tt->capviol = cap;
	}
	char *name = strdup(inv);
	if (!name)
		goto drop;
	tt->viol[tt->nviol].invariant = name;
	tt->viol[tt->nviol].records = records;
	tt->viol[tt->nviol].nrecords = n;
	tt->nviol++;
	return;
drop:
	for (size_t i = 0; i < n; i++)
		free(records[i]);
	free(records);
}

/* Records the verdict's violations in the totals and the last-violation
 * text, and prints them (what memory allows: a rejection is never lost for
 * want of its description, only the description). */
void record_verdict(struct txn_manager *t, const struct chk_verdict *v)
{
	struct txn_totals *tt = &t->rc->totals;
	size_t cap = 4096, len = 0;
	char *text = malloc(cap);
	if (!text)
		return;
	text[0] = 0;
	for (size_t i = 0; i < chk_verdict_nviolations(v); i++) {
		const struct chk_violation *vi = chk_verdict_violation(v, i);
		const char *inv = vi->inv && vi->inv->id ? vi->inv->id : "?";
		char **recs = calloc(vi->nrecords ? vi->nrecords : 1, sizeof(*recs));
		size_t nrec = 0;
		char line[512];
		int l = snprintf(line, sizeof(line), "%s: %s", inv, vi->detail ? vi->detail : "");
		for (size_t r = 0; r <= vi->nrecords; r++) {
			if (r > 0) {
				const struct chk_record *rec = chk_verdict_record(v, vi->records[r - 1]);
				char rb[384];
				chk_record_format(rec, rb, sizeof(rb));
				if (recs && (recs[nrec] = strdup(rb)))
					nrec++;
				l = snprintf(line, sizeof(line), "  %s", rb);
			}
			if (l < 0)
				continue;
			size_t need = len + (size_t)l + 2;
			if (need > cap) {
				size_t ncap = need * 2;
				char *nt = realloc(text, ncap);
				if (!nt)
					continue;
				text = nt;
				cap = ncap;
			}
			len += (size_t)snprintf(text + len, cap - len, "%s\n", line);
		}
		if (recs) {
			pthread_mutex_lock(&tt->lock);
			add_violation(tt, inv, recs, nrec);
			pthread_mutex_unlock(&tt->lock);
		}
	}
	pthread_mutex_lock(&tt->lock);
	set_last_violation(tt, text);
	pthread_mutex_unlock(&tt->lock);
	fprintf(stderr, "recon-fuse: transaction rejected by the checker:\n%s", text);
	free(text);
}

/* ---- the data guard ---- */

/* Data of inode `ino` is about to be written to the blocks of ext: each must
 * be free or a data block of ino in the checker's approved state.  Blocks a
 * transaction not yet approved frees are never handed out again before the
 * free is approved (the freed sets, savepoint.c), so a legitimate write always
 * finds its block free or its own there.  A refusal is a violation: recorded
 * and printed as a rejection is, the file system fails (EIO for this write,
 * nothing of it written), unless on_violation=log lets it through. */
errcode_t rio_txn_data_guard(struct txn_manager *t, ext2_ino_t ino,
			     const struct rio_extent *ext, unsigned n)
{
	if (!t->chk)
		return 0;   /* checker off: no approved owner map to consult */
	/* a claimed group's owner map is its claim: checked first */
	for (unsigned i = 0; i < n; i++) {
		errcode_t err = bg_claim_gate(t, ext[i].blk, ext[i].count);
		if (err)
			return err == EROFS ? EIO : err;
	}
	bool bad = false;
	uint64_t blk = 0;
	struct chk_block_info info = { 0 };
	pthread_rwlock_rdlock(&t->chk_lock);
	for (unsigned i = 0; i < n && !bad; i++)
		for (uint32_t k = 0; k < ext[i].count && !bad; k++)
			if (!chk_data_block_ok(t->chk, ext[i].blk + k, ino)) {
				bad = true;
				blk = ext[i].blk + k;
				chk_block_info(t->chk, blk, &info);
			}
	pthread_rwlock_unlock(&t->chk_lock);
	if (!bad)
		return 0;

	struct txn_totals *tt = &t->rc->totals;
	char text[512], what[160], rec1[160], rec2[160];
	bool group_owned = !strcmp(info.type, "bbitmap") || !strcmp(info.type, "ibitmap") ||
			   !strcmp(info.type, "itable");
	bool ino_refused = !strcmp(info.type, "free") ||
			   (!strcmp(info.type, "data") && info.owner == ino);
	if (ino_refused)
		snprintf(what, sizeof(what), "%s, but inode %u may not own file data (reserved or "
			 "journal inode)", info.type, ino);
	else if (group_owned)
		snprintf(what, sizeof(what), "%s of group %u (static metadata)", info.type, info.owner);
	else if (info.owner == 0)
		snprintf(what, sizeof(what), "%s (static metadata)", info.type);
	else
		snprintf(what, sizeof(what), "%s block %u of inode %u", info.type, info.lblk, info.owner);
	snprintf(text, sizeof(text),
		 "INV_BLOCK_OWNED_ONCE: data write of inode %u to block %" PRIu64 " refused before "
		 "it reached the disk: the checker's approved state has that block as %s%s\n",
		 ino, blk, what, !ino_refused ?
		 " (a block bitmap that says it is free is wrong)" : "");
	snprintf(rec1, sizeof(rec1), "inode | %u | data write | 0 | %" PRIu64, ino, blk);
	snprintf(rec2, sizeof(rec2), "%s | %u | %s block | %" PRIu64 " | %" PRIu64,
		 group_owned ? "bgd" : "inode", info.owner, info.type, blk, blk);
	char **recs = calloc(2, sizeof(*recs));
	size_t nrec = 0;
	if (recs) {
		if ((recs[nrec] = strdup(rec1)))
			nrec++;
		if ((recs[nrec] = strdup(rec2)))
			nrec++;
	}
	size_t len = strlen(text);
	snprintf(text + len, sizeof(text) - len, "  %s\n  %s\n", rec1, rec2);
	pthread_mutex_lock(&tt->lock);
	if (recs)
		add_violation(tt, "INV_BLOCK_OWNED_ONCE", recs, nrec);
	set_last_violation(tt, text);
	pthread_mutex_unlock(&tt->lock);
	fprintf(stderr, "recon-fuse: data write refused by the guard:\n%s", text);
	if (rio_cfg.on_violation == RIO_ONV_LOG) {
		fprintf(stderr, "recon-fuse: on_violation=log: WRITING THE REFUSED DATA\n");
		return 0;
	}
	tt->failed = true;
	return EIO;
}

/* ---- public calls ---- */

/* A commit that finished in the background is retired; then the file
 * system's state: 0, or (everything open discarded) EIO after a device
 * failure, else the failed commit's error or EROFS. */
static errcode_t settle(struct rio_chan *rc, struct txn_manager *t)
{
	if (rio_dev_crashed(&rc->dev))
		rc->totals.io_failed = true;
	errcode_t err = 0;
	if (t->committing && cset_done(t, t->committing))
		err = retire(t);
	if (rc->totals.failed || rc->totals.io_failed) {
		retire(t);
		pthread_mutex_lock(&rc->ovl_lock);
		discard(t);
		pthread_mutex_unlock(&rc->ovl_lock);
		return rc->totals.io_failed ? EIO : err ? err : EROFS;
	}
	return 0;
}

static struct txn_manager *txn_of(io_channel ch)
{
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager)
		return NULL;
	return rio_chan_of(ch)->txn;
}

errcode_t rio_txn_settle(io_channel ch)
{
	struct txn_manager *t = txn_of(ch);
	return t ? settle(t->rc, t) : EXT2_ET_INVALID_ARGUMENT;
}

errcode_t rio_txn_commit_begin(io_channel ch, uint64_t *tid)
{
	struct txn_manager *t = txn_of(ch);
	if (!t)
		return EXT2_ET_INVALID_ARGUMENT;
	if (!t->thread_running)
		return EXT2_ET_OP_NOT_SUPPORTED;
	errcode_t err = settle(t->rc, t);
	return err ? err : txn_commit_begin(t, tid);
}

void rio_txn_set_commit_hook(io_channel ch, void (*fn)(void *arg, uint64_t tid, bool durable),
			     void *arg)
{
	struct txn_manager *t = txn_of(ch);
	if (!t)
		return;
	pthread_mutex_lock(&t->cm);
	t->done_hook = fn;
	t->done_arg = arg;
	pthread_mutex_unlock(&t->cm);
}

errcode_t rio_txn_boundary(ext2_filsys fs, bool force)
{
	struct rio_chan *rc;
	struct txn_manager *t;
	errcode_t bad = txn_attached(fs, &rc, &t);
	if (bad)
		return bad;
	errcode_t err = settle(rc, t);
	if (err)
		return err;
	if (!force) {
		bool old = t->opened_ns && rio_cfg.commit_interval_ms &&
			   now_ns() - t->opened_ns > (uint64_t)rio_cfg.commit_interval_ms * 1000000ull;
		/* past the soft size limit, a commit still in flight (settle
		 * retired a finished one) would make this one wait for it:
		 * only the hard limit commits then */
		bool big = t->nents > t->max_blocks ||
			   (t->nents > t->soft_blocks && !t->committing);
		bool state = fs->flags & (EXT2_FLAG_DIRTY | EXT2_FLAG_BB_DIRTY | EXT2_FLAG_IB_DIRTY);
		if (!old && !big)
			return 0;
		if (t->nents == 0 && !state)
			return 0;
		/* an age limit does not wait for the commit in flight: the
		 * next boundary after it commits this one */
		if (!big && t->committing && !cset_done(t, t->committing))
			return 0;
	}
	return txn_commit(t, force);
}

errcode_t rio_txn_room(io_channel ch, size_t *used, size_t *limit)
{
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager)
		return EXT2_ET_MAGIC_IO_CHANNEL;
	struct txn_manager *t = rio_chan_of(ch)->txn;
	if (!t)
		return EXT2_ET_INVALID_ARGUMENT;
	ext2_filsys fs = t->fs;
	/* the flush at commit may add every bitmap, the descriptors and the
	 * superblock */
	size_t flush_blocks = 2 * (size_t)fs->group_desc_count + fs->desc_blocks + 1;
	size_t hard = t->journal ? jbd_max_transaction_blocks(t->jbd) : SIZE_MAX / 2;
	*used = t->nents;
	*limit = hard > 2 * flush_blocks ? hard - flush_blocks : hard / 2;
	return 0;
}

void rio_txn_ids(io_channel ch, uint64_t *open, uint64_t *durable)
{
	*open = *durable = 0;
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager)
		return;
	struct txn_manager *t = rio_chan_of(ch)->txn;
	if (!t)
		return;
	*open = t->tid_open;
	*durable = t->tid_durable;
}

uint64_t rio_txn_pending_frees(io_channel ch)
{
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager)
		return 0;
	struct txn_manager *t = rio_chan_of(ch)->txn;
	if (!t)
		return 0;
	return t->freed.count + (t->committing ? t->committing->freed.count : 0);
}

bool rio_txn_failed(io_channel ch)
{
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager)
		return false;
	struct rio_chan *rc = rio_chan_of(ch);
	return rc->totals.failed || rio_dev_crashed(&rc->dev);
}

const char *rio_txn_last_violation(io_channel ch)
{
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager)
		return NULL;
	return rio_chan_of(ch)->totals.last_violation;
}

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

errcode_t rio_write_stats(io_channel ch, const char *path)
{
	if (!ch || ch->magic != EXT2_ET_MAGIC_IO_CHANNEL || ch->manager != rio_io_manager)
		return EXT2_ET_MAGIC_IO_CHANNEL;
	struct rio_chan *rc = rio_chan_of(ch);
	struct txn_totals *tt = &rc->totals;
	struct rio_stats st;
	errcode_t err = rio_get_stats(ch, &st);
	if (err)
		return err;
	uint64_t cpu_ns = tt->chk_cpu_ns, scan_ns = tt->chk_scan_ns;
	uint64_t hits = tt->chk_hits, misses = tt->chk_misses;
	if (rc->txn && rc->txn->committing)
		wait_cset(rc->txn, rc->txn->committing);   /* the checker is not shared */
	if (rc->txn && rc->txn->chk) {
		struct chk_stats cs;
		chk_get_stats(rc->txn->chk, &cs);
		cpu_ns += cs.cpu_ns;
		scan_ns += cs.scan_cpu_ns;
		hits += cs.cache_hits;
		misses += cs.cache_misses;
	}
	struct rusage ru;
	long peak = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : 0;
	FILE *f = fopen(path, "w");
	if (!f)
		return errno;
	fprintf(f, "{\n  \"transactions\": %" PRIu64 ",\n", tt->transactions);
	fprintf(f, "  \"commits\": %" PRIu64 ",\n", tt->commits);
	fprintf(f, "  \"largest_transaction_blocks\": %" PRIu64 ",\n", tt->largest_transaction);
	fprintf(f, "  \"device_writes\": %" PRIu64 ",\n  \"device_reads\": %" PRIu64 ",\n",
		st.device_writes, st.device_reads);
	fprintf(f, "  \"bytes_written\": %" PRIu64 ",\n  \"bytes_read\": %" PRIu64 ",\n",
		st.bytes_written, st.bytes_read);
	fprintf(f, "  \"flushes\": %" PRIu64 ",\n", st.flushes);
	fprintf(f, "  \"checker_attached_early\": %s,\n", st.checker_attached_early ? "true" : "false");
	fprintf(f, "  \"blocks_checked\": %" PRIu64 ",\n  \"blocks_journalled\": %" PRIu64 ",\n",
		tt->blocks_checked, tt->blocks_journalled);
	fprintf(f, "  \"violations\": [");
	for (size_t i = 0; i < tt->nviol; i++) {
		fprintf(f, "%s\n    {\"invariant\": ", i ? "," : "");
		json_string(f, tt->viol[i].invariant);
		fprintf(f, ", \"records\": [");
		for (size_t r = 0; r < tt->viol[i].nrecords; r++) {
			if (r)
				fprintf(f, ", ");
			json_string(f, tt->viol[i].records[r]);
		}
		fprintf(f, "]}");
	}
	fprintf(f, "%s],\n", tt->nviol ? "\n  " : "");
	fprintf(f, "  \"checker_cpu_seconds\": %.6f,\n", (double)cpu_ns / 1e9);
	fprintf(f, "  \"checker_commit_cpu_seconds\": %.6f,\n",
		(double)(cpu_ns - (scan_ns < cpu_ns ? scan_ns : cpu_ns)) / 1e9);
	fprintf(f, "  \"checker_cache_hit_rate\": %.6f,\n",
		hits + misses ? (double)hits / (double)(hits + misses) : 0.0);
	fprintf(f, "  \"block_cache_hit_rate\": %.6f,\n",
		st.cache_hits + st.cache_misses
			? (double)st.cache_hits / (double)(st.cache_hits + st.cache_misses) : 0.0);
	fprintf(f, "  \"base_check_tables_read\": %" PRIu64 ",\n", tt->scan_tables_read);
	fprintf(f, "  \"base_check_tables_sealed\": %" PRIu64 ",\n", tt->scan_tables_sealed);
	fprintf(f, "  \"base_check_table_bytes\": %" PRIu64 ",\n", tt->scan_table_bytes);
	fprintf(f, "  \"base_check_groups_pristine\": %" PRIu64 ",\n", tt->pristine_groups);
	fprintf(f, "  \"base_check_groups_deferred\": %" PRIu64 ",\n", tt->base_deferred);
	fprintf(f, "  \"base_check_groups_bitmaps_deferred\": %" PRIu64 ",\n", tt->claimed_groups);
	fprintf(f, "  \"base_check_groups_background_done\": %" PRIu64 ",\n", tt->base_bg_done);
	fprintf(f, "  \"base_check_groups_commit_done\": %" PRIu64 ",\n", tt->base_commit_done);
	fprintf(f, "  \"base_check_groups_unchecked\": %" PRIu64 ",\n", tt->base_pending);
	fprintf(f, "  \"peak_rss_kb\": %ld\n}\n", peak);
	if (ferror(f)) {
		fclose(f);
		return EIO;
	}
	if (fclose(f) != 0)
		return errno;
	return 0;
}
