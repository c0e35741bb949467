/*
 * fsx: a seeded file exerciser in the design of xfstests' fsx.
 *
 * Random reads, writes (through the read-write fd, a write-only fd and an
 * O_DIRECT fd), mmap reads and writes (msync), truncates up and down,
 * fallocate (mode 0, KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE), fsync/fdatasync and
 * close/reopen over a few files, with offsets spread over the direct, single-,
 * double- and triple-indirect ranges of the block map.  Every read, and the
 * whole file at reopen and at the end (with the page cache dropped first), is
 * compared with an in-memory model
 * (sparse: 64 KiB chunks, absent = zeros).  On a mismatch: the seed, the op
 * number, the tail of the op log and the differing ranges; exit 1.
 *
 *   fsx [options] DIR
 *   -S seed      (default: time)        -N ops (default 1000)
 *   -l maxlen    file length bound, k/m/g suffixes (default 80m)
 *   -b bsize     block size hint for the offset regions (default: statvfs)
 *   -n files     number of files (default 2)
 *   -m maxop     longest read, write or fallocate (default 1 MiB): small ops
 *                at random offsets fragment files into many extents
 *   -e           a third of the offsets within 64 MiB of maxlen (with maxlen
 *                the file system's largest file: its last blocks)
 *   -x ops       leave out op kinds, comma list of: write,wowrite,dwrite,
 *                read,mapread,mapwrite,trunc,falloc,keepsize,punch,fsync,reopen,
 *                drop (POSIX_FADV_DONTNEED: later reads reach the file system)
 *   -L file      write the op log (replayable with -R)
 *   -R file      replay an op log instead of random ops (the data of the
 *                logged run's seed, from its first line, unless -S)
 *   -O file      outcome log: every op's result, errno, bytes, stat fields
 *                (the differential runs compare two of them)
 *   -q           quiet (no progress)
 * Exit: 0 pass, 1 mismatch or unexpected error, 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#include <linux/falloc.h>

#include "seeded_rng.h"

#define CHUNK     (64u << 10)
#define MAXFILES  8
#define TAIL      48          /* op log lines kept for a failure report */
#define MAXOP     (1u << 20)  /* longest single read/write */

enum op_kind { OP_WRITE, OP_WOWRITE, OP_DWRITE, OP_READ, OP_MAPREAD, OP_MAPWRITE,
	       OP_TRUNC, OP_FALLOC, OP_KEEPSIZE, OP_PUNCH, OP_FSYNC, OP_FDATASYNC,
	       OP_REOPEN, OP_DROP, OP_VERIFY, OP_NKINDS };
static const char *const op_names[OP_NKINDS] = {
	"write", "wowrite", "dwrite", "read", "mapread", "mapwrite", "trunc",
	"falloc", "keepsize", "punch", "fsync", "fdatasync", "reopen", "drop", "verify" };
/* relative frequency of each kind in a random run */
static const int op_weight[OP_NKINDS] = { 20, 6, 4, 18, 6, 6, 8, 3, 3, 6, 3, 2, 2, 3, 0 };

struct op { uint64_t n; enum op_kind kind; int file; uint64_t off, len; };

/* sparse model of one file: chunk index -> CHUNK bytes */
struct chunk { uint64_t idx; uint8_t *data; struct chunk *next; };
#define NBUCKET 4096
struct model { uint64_t size; struct chunk *b[NBUCKET]; };

struct file { char path[4096]; int fd; struct model m; };

static struct file files[MAXFILES];
static int nfiles = 2;
static uint64_t seed, nops = 1000, maxlen = 80ull << 20, bsize, maxop = MAXOP;
static bool near_top;        /* -e */
static bool disabled[OP_NKINDS], quiet, seed_given;
static FILE *logf, *outf, *replayf;
static char tail[TAIL][160];
static uint64_t tail_n;
static uint64_t counts[OP_NKINDS], unsupported[OP_NKINDS];
static uint8_t *buf, *buf2;
static uint64_t rng_state;
static uint64_t cur_op;

static uint64_t rnd(void) { return seeded_next(&rng_state); }
static uint64_t rnd_below(uint64_t n) { return n ? rnd() % n : 0; }

/* the byte a write of op n puts at file offset o: never all zeros per op */
static uint8_t data_byte(uint64_t n, uint64_t o)
{
	uint64_t h = (seed * 0x100000001b3ull) ^ (n * 0x9e3779b97f4a7c15ull) ^ (o >> 3);
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return (uint8_t)((h >> ((o & 7) * 8)) | 1);
}

static void record(const char *fmt, ...)
{
	char line[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	memcpy(tail[tail_n++ % TAIL], line, sizeof line);
	if (logf)
		fprintf(logf, "%s\n", line);
}

static void print_tail(void)
{
	uint64_t i = tail_n > TAIL ? tail_n - TAIL : 0;
	fprintf(stderr, "last %" PRIu64 " ops:\n", tail_n - i);
	for (; i < tail_n; i++)
		fprintf(stderr, "  %s\n", tail[i % TAIL]);
}

static void finish_logs(void)
{
	if (logf)
		fflush(logf);
	if (outf)
		fflush(outf);
}

static void __attribute__((noreturn, format(printf, 1, 2))) failure(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "fsx: FAIL seed %" PRIu64 " op %" PRIu64 ": ", seed, cur_op);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	print_tail();
	fprintf(stderr, "fsx: replay: fsx -S %" PRIu64 " -N %" PRIu64 " -l %" PRIu64
		" -n %d (same -x, -b, -m, -e)\n", seed, nops, maxlen, nfiles);
	finish_logs();
	exit(1);
}

/* ---- the model ---- */

static struct chunk *chunk_get(struct model *m, uint64_t idx, bool create)
{
	struct chunk **pp = &m->b[idx % NBUCKET];
	for (struct chunk *c = *pp; c; c = c->next)
		if (c->idx == idx)
			return c;
	if (!create)
		return NULL;
	struct chunk *c = calloc(1, sizeof *c);
	if (!c || !(c->data = calloc(1, CHUNK))) {
		fprintf(stderr, "fsx: out of memory\n");
		exit(1);
	}
	c->idx = idx;
	c->next = *pp;
	*pp = c;
	return c;
}

static void model_read(struct model *m, uint64_t off, uint64_t len, uint8_t *out)
{
	while (len) {
		uint64_t in = off % CHUNK, n = CHUNK - in < len ? CHUNK - in : len;
		struct chunk *c = chunk_get(m, off / CHUNK, false);
		if (c)
			memcpy(out, c->data + in, n);
		else
			memset(out, 0, n);
		off += n, out += n, len -= n;
	}
}

static void model_write(struct model *m, uint64_t off, uint64_t len, const uint8_t *src)
{
	while (len) {
		uint64_t in = off % CHUNK, n = CHUNK - in < len ? CHUNK - in : len;
		struct chunk *c = chunk_get(m, off / CHUNK, src != NULL);
		if (c) {
			if (src)
				memcpy(c->data + in, src, n);
			else
				memset(c->data + in, 0, n);
		}
		off += n, len -= n;
		if (src)
			src += n;
	}
}

/* size changes: bytes past the new size become zeros (chunks past it dropped) */
static void model_truncate(struct model *m, uint64_t size)
{
	if (size < m->size) {
		for (int b = 0; b < NBUCKET; b++)
			for (struct chunk **pp = &m->b[b]; *pp;) {
				struct chunk *c = *pp;
				if (c->idx * CHUNK >= size) {
					*pp = c->next;
					free(c->data);
					free(c);
				} else {
					if ((c->idx + 1) * CHUNK > size)
						memset(c->data + size % CHUNK, 0, CHUNK - size % CHUNK);
					pp = &c->next;
				}
			}
	}
	m->size = size;
}

/* ---- differing ranges ---- */

static void report_diff(const char *what, struct file *f, uint64_t off, uint64_t len,
			const uint8_t *got, const uint8_t *want)
{
	fprintf(stderr, "fsx: FAIL seed %" PRIu64 " op %" PRIu64 ": %s of %s: data differs"
		" from the model in [0x%" PRIx64 ", 0x%" PRIx64 ") (file size 0x%" PRIx64 ")\n",
		seed, cur_op, what, f->path, off, off + len, f->m.size);
	int shown = 0;
	for (uint64_t i = 0; i < len && shown < 12;) {
		if (got[i] == want[i]) {
			i++;
			continue;
		}
		uint64_t j = i, zeros = 0;
		while (j < len && got[j] != want[j]) {
			zeros += got[j] == 0;
			j++;
		}
		fprintf(stderr, "  differs [0x%" PRIx64 ", 0x%" PRIx64 ") %" PRIu64 " bytes%s:"
			" got %02x %02x %02x %02x.. want %02x %02x %02x %02x..\n",
			off + i, off + j, j - i, zeros == j - i ? " (read as zeros)" : "",
			got[i], i + 1 < len ? got[i + 1] : 0, i + 2 < len ? got[i + 2] : 0,
			i + 3 < len ? got[i + 3] : 0, want[i], i + 1 < len ? want[i + 1] : 0,
			i + 2 < len ? want[i + 2] : 0, i + 3 < len ? want[i + 3] : 0);
		shown++;
		i = j;
	}
	print_tail();
	finish_logs();
	exit(1);
}

static void compare(const char *what, struct file *f, uint64_t off, uint64_t len,
		    const uint8_t *got)
{
	model_read(&f->m, off, len, buf2);
	if (memcmp(got, buf2, len))
		report_diff(what, f, off, len, got, buf2);
}

/* ---- file handling ---- */

static void open_file(struct file *f, bool create)
{
	f->fd = open(f->path, O_RDWR | (create ? O_CREAT | O_TRUNC : 0), 0644);
	if (f->fd < 0)
		failure("open %s: %s", f->path, strerror(errno));
}

static void outcome(const struct op *o, long long ret, int err, uint32_t sum)
{
	if (!outf)
		return;
	struct stat st;
	struct file *f = &files[o->file];
	if (fstat(f->fd, &st))
		failure("fstat: %s", strerror(errno));
	fprintf(outf, "%" PRIu64 " %s f%d 0x%" PRIx64 " 0x%" PRIx64 " = %lld %s size=%lld"
		" blocks=%lld nlink=%lu mode=%o sum=%08x\n", o->n, op_names[o->kind], o->file,
		o->off, o->len, ret, err ? strerrorname_np(err) : "-", (long long)st.st_size,
		(long long)st.st_blocks, (unsigned long)st.st_nlink, st.st_mode, sum);
}

static uint32_t checksum(const uint8_t *p, uint64_t n)
{
	uint32_t h = 2166136261u;
	for (uint64_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

/* read [off, off+len) with pread in pieces and compare with the model */
static void read_compare(const char *what, struct file *f, uint64_t off, uint64_t len)
{
	while (len) {
		uint64_t n = len < MAXOP ? len : MAXOP, got = 0;
		while (got < n) {
			ssize_t r = pread(f->fd, buf + got, n - got, off + got);
			if (r < 0)
				failure("%s: pread %s @0x%" PRIx64 ": %s", what, f->path, off + got,
					strerror(errno));
			if (r == 0)
				break;
			got += r;
		}
		if (got != n)
			failure("%s: short read of %s: 0x%" PRIx64 " of 0x%" PRIx64 " bytes at 0x%"
				PRIx64 " (model size 0x%" PRIx64 ")", what, f->path, got, n, off,
				f->m.size);
		compare(what, f, off, n, buf);
		off += n, len -= n;
	}
}

/* the whole file: size, every range the model holds data in, every range the
 * file reports as data (SEEK_DATA), and samples of the holes; files up to
 * 256 MiB are read whole */
/* the kernel's page cache of the file dropped (no writeback cache: its pages
 * are clean), so reads reach the file system's own state */
static void drop_cache(struct file *f)
{
	int e = posix_fadvise(f->fd, 0, 0, POSIX_FADV_DONTNEED);
	if (e)
		failure("posix_fadvise DONTNEED %s: %s", f->path, strerror(e));
}

static void verify_file(const char *what, struct file *f)
{
	struct stat st;
	drop_cache(f);
	if (fstat(f->fd, &st))
		failure("fstat %s: %s", f->path, strerror(errno));
	if ((uint64_t)st.st_size != f->m.size)
		failure("%s: size of %s is 0x%llx, the model says 0x%" PRIx64, what, f->path,
			(unsigned long long)st.st_size, f->m.size);
	uint64_t size = f->m.size;
	if (size <= (256ull << 20)) {
		read_compare(what, f, 0, size);
		return;
	}
	for (int b = 0; b < NBUCKET; b++)
		for (struct chunk *c = f->m.b[b]; c; c = c->next) {
			uint64_t o = c->idx * CHUNK;
			if (o < size)
				read_compare(what, f, o, size - o < CHUNK ? size - o : CHUNK);
		}
	off_t pos = 0;
	while ((uint64_t)pos < size) {
		off_t d = lseek(f->fd, pos, SEEK_DATA);
		if (d < 0)
			break;
		off_t h = lseek(f->fd, d, SEEK_HOLE);
		if (h < 0)
			failure("SEEK_HOLE %s @0x%llx: %s", f->path, (long long)d, strerror(errno));
		read_compare(what, f, d, h - d);
		pos = h;
	}
	for (int i = 0; i < 16; i++) {
		uint64_t o = rnd_below(size), n = size - o < 8192 ? size - o : 8192;
		read_compare(what, f, o, n);
	}
}

/* ---- offsets ---- */

/* an offset in one of the block map's ranges, near EOF, or anywhere below maxlen */
static uint64_t pick_offset(struct file *f, uint64_t len)
{
	uint64_t ppb = bsize / 4;
	uint64_t ind = 12 * bsize, dind = ind + ppb * bsize, tind = dind + ppb * ppb * bsize;
	uint64_t bound = maxlen > len ? maxlen - len : 0, o;
	if (near_top && rnd_below(3) == 0)
		return bound - rnd_below((bound < (64u << 20) ? bound : (64u << 20)) + 1);
	switch (rnd_below(8)) {
	case 0: o = rnd_below(ind + bsize); break;                                  /* direct */
	case 1: o = ind - bsize + rnd_below(3 * bsize + ppb * bsize / 8); break;     /* single */
	case 2: o = dind - 2 * bsize + rnd_below(4 * bsize + ppb * bsize * 2); break; /* double */
	case 3: o = tind - 2 * bsize + rnd_below(4 * bsize + ppb * bsize * 2); break; /* triple */
	case 4: case 5: o = f->m.size > 4 * MAXOP ? f->m.size - rnd_below(4 * MAXOP) :
				rnd_below(f->m.size + 1); break;                     /* near EOF */
	default: o = rnd_below(bound + 1); break;
	}
	if (rnd_below(4) == 0)
		o -= o % bsize;          /* block aligned */
	return o > bound ? rnd_below(bound + 1) : o;
}

static uint64_t pick_len(void)
{
	uint64_t len;
	switch (rnd_below(6)) {
	case 0: len = 1 + rnd_below(64); break;
	case 1: len = bsize; break;
	case 2: len = 1 + rnd_below(MAXOP); break;
	default: len = 1 + rnd_below(64u << 10); break;
	}
	return len > maxop ? 1 + len % maxop : len;
}

static void random_op(struct op *o)
{
	int total = 0;
	for (int k = 0; k < OP_NKINDS; k++)
		total += disabled[k] ? 0 : op_weight[k];
	int r = (int)rnd_below(total);
	enum op_kind k = 0;
	for (; k < OP_NKINDS; k++) {
		if (disabled[k])
			continue;
		if (r < op_weight[k])
			break;
		r -= op_weight[k];
	}
	o->kind = k;
	o->file = (int)rnd_below(nfiles);
	struct file *f = &files[o->file];
	o->len = pick_len();
	o->off = pick_offset(f, o->len);
	switch (k) {
	case OP_READ: case OP_MAPREAD:   /* mostly inside the file */
		if (f->m.size && rnd_below(8)) {
			o->off = rnd_below(f->m.size);
			if (o->len > f->m.size - o->off)
				o->len = f->m.size - o->off;
		}
		break;
	case OP_TRUNC:
		o->len = 0;
		if (rnd_below(3) == 0)   /* down, often to a block boundary */
			o->off = f->m.size ? rnd_below(f->m.size) : 0;
		break;
	case OP_DWRITE:   /* O_DIRECT: 4 KiB-aligned offset and length */
		o->off -= o->off % 4096;
		o->len = 4096 * (1 + rnd_below(32));
		if (o->off + o->len > maxlen)
			o->off = 0;
		break;
	default:
		break;
	}
}

/* ---- the ops ---- */

static void fill(uint64_t n, uint64_t off, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++)
		buf[i] = data_byte(n, off + i);
}

static void do_pwrite_all(const char *what, int fd, struct file *f, uint64_t off, uint64_t len)
{
	uint64_t done = 0;
	while (done < len) {
		ssize_t w = pwrite(fd, buf + done, len - done, off + done);
		if (w <= 0)
			failure("%s: pwrite %s @0x%" PRIx64 " len 0x%" PRIx64 ": %s", what, f->path,
				off + done, len - done, w < 0 ? strerror(errno) : "wrote 0");
		done += w;
	}
}

static void model_write_op(struct file *f, uint64_t off, uint64_t len)
{
	model_write(&f->m, off, len, buf);
	if (off + len > f->m.size)
		f->m.size = off + len;
}

static void run_op(struct op *o)
{
	struct file *f = &files[o->file];
	long long ret = 0;
	int err = 0;
	uint32_t sum = 0;
	cur_op = o->n;
	record("%" PRIu64 " %s f%d 0x%" PRIx64 " 0x%" PRIx64 " (size 0x%" PRIx64 ")", o->n,
	       op_names[o->kind], o->file, o->off, o->len, f->m.size);
	counts[o->kind]++;
	switch (o->kind) {
	case OP_WRITE:
		fill(o->n, o->off, o->len);
		do_pwrite_all("write", f->fd, f, o->off, o->len);
		model_write_op(f, o->off, o->len);
		ret = o->len;
		break;
	case OP_WOWRITE: {   /* a write-only fd: FUSE servers may open it for direct I/O */
		int fd = open(f->path, O_WRONLY);
		if (fd < 0)
			failure("open O_WRONLY %s: %s", f->path, strerror(errno));
		fill(o->n, o->off, o->len);
		do_pwrite_all("wowrite", fd, f, o->off, o->len);
		model_write_op(f, o->off, o->len);
		close(fd);
		ret = o->len;
		break;
	}
	case OP_DWRITE: {
		int fd = open(f->path, O_RDWR | O_DIRECT);
		if (fd < 0) {
			err = errno;
			if (err != EINVAL)
				failure("open O_DIRECT %s: %s", f->path, strerror(err));
			unsupported[o->kind]++;
			ret = -1;
			break;
		}
		void *al;
		if (posix_memalign(&al, 4096, o->len))
			failure("out of memory");
		fill(o->n, o->off, o->len);
		memcpy(al, buf, o->len);
		ssize_t w = pwrite(fd, al, o->len, o->off);
		if (w != (ssize_t)o->len)
			failure("dwrite: pwrite O_DIRECT %s @0x%" PRIx64 " len 0x%" PRIx64 ": %s",
				f->path, o->off, o->len, w < 0 ? strerror(errno) : "short");
		free(al);
		close(fd);
		model_write_op(f, o->off, o->len);
		ret = o->len;
		break;
	}
	case OP_READ: {
		ssize_t r = pread(f->fd, buf, o->len, o->off);
		if (r < 0)
			failure("read: pread %s: %s", f->path, strerror(errno));
		uint64_t want = o->off >= f->m.size ? 0 :
				f->m.size - o->off < o->len ? f->m.size - o->off : o->len;
		if ((uint64_t)r != want)
			failure("read of %s @0x%" PRIx64 " len 0x%" PRIx64 " returned 0x%zx bytes,"
				" want 0x%" PRIx64, f->path, o->off, o->len, r, want);
		compare("read", f, o->off, r, buf);
		ret = r;
		sum = checksum(buf, r);
		break;
	}
	case OP_MAPREAD: case OP_MAPWRITE: {
		if (o->kind == OP_MAPREAD) {
			if (o->off >= f->m.size) {
				ret = 0;
				break;
			}
			if (o->len > f->m.size - o->off)
				o->len = f->m.size - o->off;
		} else if (o->off + o->len > f->m.size) {
			/* a mapping cannot extend the file: grow it first */
			if (ftruncate(f->fd, o->off + o->len))
				failure("mapwrite: ftruncate %s: %s", f->path, strerror(errno));
			model_truncate(&f->m, o->off + o->len);
		}
		uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
		uint64_t base = o->off - o->off % pg, mlen = o->off + o->len - base;
		uint8_t *p = mmap(NULL, mlen, o->kind == OP_MAPREAD ? PROT_READ :
				  PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, base);
		if (p == MAP_FAILED)
			failure("mmap %s @0x%" PRIx64 " len 0x%" PRIx64 ": %s", f->path, base, mlen,
				strerror(errno));
		if (o->kind == OP_MAPREAD) {
			memcpy(buf, p + (o->off - base), o->len);
			compare("mapread", f, o->off, o->len, buf);
			sum = checksum(buf, o->len);
		} else {
			fill(o->n, o->off, o->len);
			memcpy(p + (o->off - base), buf, o->len);
			if (msync(p, mlen, MS_SYNC))
				failure("msync %s: %s", f->path, strerror(errno));
			model_write_op(f, o->off, o->len);
		}
		munmap(p, mlen);
		ret = o->len;
		break;
	}
	case OP_TRUNC:
		if (ftruncate(f->fd, o->off))
			failure("ftruncate %s to 0x%" PRIx64 ": %s", f->path, o->off, strerror(errno));
		model_truncate(&f->m, o->off);
		break;
	case OP_FALLOC: case OP_KEEPSIZE: case OP_PUNCH: {
		int mode = o->kind == OP_FALLOC ? 0 : o->kind == OP_KEEPSIZE ? FALLOC_FL_KEEP_SIZE :
			   FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
		if (fallocate(f->fd, mode, o->off, o->len)) {
			err = errno;
			ret = -1;
			if (err != EOPNOTSUPP)
				failure("fallocate(%s) %s @0x%" PRIx64 " len 0x%" PRIx64 ": %s",
					op_names[o->kind], f->path, o->off, o->len, strerror(err));
			unsupported[o->kind]++;
			break;
		}
		if (o->kind == OP_PUNCH) {
			if (o->off < f->m.size)
				model_write(&f->m, o->off, f->m.size - o->off < o->len ?
					    f->m.size - o->off : o->len, NULL);
		} else if (o->kind == OP_FALLOC && o->off + o->len > f->m.size) {
			f->m.size = o->off + o->len;
		}
		break;
	}
	case OP_FSYNC:
		if (fsync(f->fd))
			failure("fsync %s: %s", f->path, strerror(errno));
		break;
	case OP_FDATASYNC:
		if (fdatasync(f->fd))
			failure("fdatasync %s: %s", f->path, strerror(errno));
		break;
	case OP_REOPEN:
		if (close(f->fd))
			failure("close %s: %s", f->path, strerror(errno));
		open_file(f, false);
		verify_file("reopen", f);
		break;
	case OP_DROP:
		drop_cache(f);
		break;
	case OP_VERIFY:
		verify_file("verify", f);
		break;
	case OP_NKINDS:
		break;
	}
	outcome(o, ret, err, sum);
}

static bool parse_op(const char *line, struct op *o)
{
	char name[32];
	if (line[0] == '#' || sscanf(line, "%" SCNu64 " %31s f%d %" SCNx64 " %" SCNx64, &o->n,
				     name, &o->file, &o->off, &o->len) != 5)
		return false;
	for (int k = 0; k < OP_NKINDS; k++)
		if (!strcmp(name, op_names[k])) {
			o->kind = k;
			return o->file >= 0 && o->file < nfiles && o->len <= MAXOP;
		}
	return false;
}

static uint64_t parse_size(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 0);
	switch (*end) {
	case 'k': case 'K': v <<= 10; break;
	case 'm': case 'M': v <<= 20; break;
	case 'g': case 'G': v <<= 30; break;
	case 0: break;
	default: fprintf(stderr, "fsx: bad size %s\n", s); exit(2);
	}
	return v;
}

static void usage(void)
{
	fprintf(stderr, "usage: fsx [-S seed] [-N ops] [-l maxlen] [-b bsize] [-n files] [-m maxop] [-e]"
		" [-x op,...] [-L log] [-R log] [-O outcomes] [-q] DIR\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int c;
	seed = (uint64_t)time(NULL);
	while ((c = getopt(argc, argv, "S:N:l:b:n:m:ex:L:R:O:q")) != -1) {
		switch (c) {
		case 'S': seed = strtoull(optarg, NULL, 0), seed_given = true; break;
		case 'N': nops = strtoull(optarg, NULL, 0); break;
		case 'l': maxlen = parse_size(optarg); break;
		case 'b': bsize = parse_size(optarg); break;
		case 'n': nfiles = atoi(optarg); break;
		case 'm': maxop = parse_size(optarg); break;
		case 'e': near_top = true; break;
		case 'q': quiet = true; break;
		case 'x': {
			char *s = strdup(optarg), *save = NULL;
			for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
				int k = 0;
				while (k < OP_NKINDS && strcmp(t, op_names[k]))
					k++;
				if (k == OP_NKINDS) {
					fprintf(stderr, "fsx: unknown op %s\n", t);
					exit(2);
				}
				disabled[k] = true;
				if (k == OP_FSYNC)
					disabled[OP_FDATASYNC] = true;
			}
			free(s);
			break;
		}
		case 'L': if (!(logf = fopen(optarg, "w"))) { perror(optarg); exit(2); } break;
		case 'R': if (!(replayf = fopen(optarg, "r"))) { perror(optarg); exit(2); } break;
		case 'O': if (!(outf = fopen(optarg, "w"))) { perror(optarg); exit(2); } break;
		default: usage();
		}
	}
	if (optind + 1 != argc || nfiles < 1 || nfiles > MAXFILES || maxlen < (1u << 20) ||
	    maxop < 1 || maxop > MAXOP)
		usage();
	const char *dir = argv[optind];
	if (!bsize) {
		struct statvfs sv;
		if (statvfs(dir, &sv)) {
			perror(dir);
			exit(2);
		}
		bsize = sv.f_bsize;
	}
	if (bsize < 512 || bsize & (bsize - 1)) {
		fprintf(stderr, "fsx: bad block size %" PRIu64 "\n", bsize);
		exit(2);
	}
	rng_state = seed;
	buf = malloc(MAXOP);
	buf2 = malloc(MAXOP);
	if (!buf || !buf2)
		exit(1);
	for (int i = 0; i < nfiles; i++) {
		snprintf(files[i].path, sizeof files[i].path, "%s/fsx.%d", dir, i);
		open_file(&files[i], true);
	}
	if (logf)
		fprintf(logf, "# fsx -S %" PRIu64 " -l %" PRIu64 " -b %" PRIu64 " -n %d\n", seed,
			maxlen, bsize, nfiles);
	if (!quiet)
		printf("fsx: seed %" PRIu64 ", %" PRIu64 " ops, max length %" PRIu64 ", block %"
		       PRIu64 ", %d files in %s\n", seed, nops, maxlen, bsize, nfiles, dir);
	uint64_t done = 0;
	struct op o;
	if (replayf) {
		char line[256];
		if (!seed_given)
			seed = 1;   /* unless the log names its run's seed */
		while (fgets(line, sizeof line, replayf)) {
			uint64_t logged_seed;
			if (!seed_given && sscanf(line, "# fsx -S %" SCNu64, &logged_seed) == 1)
				seed = logged_seed;   /* the data of the logged run */
			if (!parse_op(line, &o))
				continue;
			run_op(&o);
			done++;
		}
	} else {
		for (uint64_t n = 1; n <= nops; n++) {
			memset(&o, 0, sizeof o);
			o.n = n;
			random_op(&o);
			run_op(&o);
			done++;
			if (!quiet && n % 1000 == 0)
				printf("fsx: %" PRIu64 " ops\n", n);
		}
	}
	/* the end: every file whole, then after a close and reopen */
	for (int i = 0; i < nfiles; i++) {
		struct op v = { done + 1 + i, OP_VERIFY, i, 0, 0 };
		run_op(&v);
		v.kind = OP_REOPEN;
		run_op(&v);
		close(files[i].fd);
	}
	if (!quiet) {
		printf("fsx: seed %" PRIu64 " passed %" PRIu64 " ops:", seed, done);
		for (int k = 0; k < OP_NKINDS; k++)
			if (counts[k])
				printf(" %s %" PRIu64 "%s", op_names[k], counts[k],
				       unsupported[k] ? " (EOPNOTSUPP/EINVAL)" : "");
		printf("\n");
	}
	finish_logs();
	return 0;
}
