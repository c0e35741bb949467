/*
 * checker/diff_dir.c - the diff of directory blocks: entries added and removed by name,
 * the tiling and name checks of each block, and the '..' changes (part of
 * chk_check; diff.c holds the entry point).
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ext2fs/ext2fs.h>

#include "chk_internal.h"

/* ------------------------------------------------------------ directories */

void chk_dl_add(struct dent_list *l, uint32_t dir, uint32_t ino, const char *name, uint8_t nl,
		   uint8_t ft, uint8_t side, uint64_t blk)
{
	struct dent *ne = chk_grow(l->e, &l->cap, l->n + 1, sizeof(*ne));
	char *nn = ne ? chk_grow(l->names, &l->ncap, l->nlen + nl, 1) : NULL;
	if (!ne || !nn) {
		if (ne)
			l->e = ne;
		l->err = -ENOMEM;
		return;
	}
	l->e = ne;
	l->names = nn;
	memcpy(l->names + l->nlen, name, nl);
	l->e[l->n++] = (struct dent){ dir, ino, (uint32_t)l->nlen, nl, ft, side, blk };
	l->nlen += nl;
}

/* Parse a directory block. When `strict`, structural defects become
 * problems of the transaction (new side); the old side is trusted. */
void chk_parse_dir_block(struct chk_fs *fs, struct txn *t, const uint8_t *d, uint64_t blk,
			    uint32_t dir, uint32_t lblk, bool strict, uint8_t side, struct dent_list *l)
{
	uint32_t off = 0, idx = 0;
	while (off < fs->bs) {
		if (off + 8 > fs->bs) {
			if (strict)
				chk_txn_problem(t, INV_DIRENT_TILING, SIZE_MAX,
					    "dir %u block %llu: entry header at %u crosses the block end", dir,
					    (unsigned long long)blk, off);
			return;
		}
		const struct dirent_hdr e = chk_dirent_at(d + off);
		const char *name = (const char *)d + off + 8;
		uint32_t rl = e.rec_len, nl = e.name_len;
		uint32_t need = (8 + nl + 3) & ~3u;
		if (rl < 8 || rl % 4 || off + rl > fs->bs || (e.inode && rl < need)) {
			if (strict)
				chk_txn_problem(t, INV_DIRENT_TILING, SIZE_MAX,
					    "dir %u block %llu: entry at %u has rec_len %u name_len %u", dir,
					    (unsigned long long)blk, off, rl, nl);
			return;
		}
		if (e.inode) {
			bool dot = nl == 1 && name[0] == '.';
			bool dotdot = nl == 2 && name[0] == '.' && name[1] == '.';
			if (strict) {
				if (e.inode > fs->inodes_count)
					chk_txn_problem(t, INV_DIRENT_NAME, SIZE_MAX,
						    "dir %u block %llu: entry at %u names inode %u past the end", dir,
						    (unsigned long long)blk, off, e.inode);
				if (nl == 0 || memchr(name, '/', nl) || memchr(name, 0, nl))
					chk_txn_problem(t, INV_DIRENT_NAME, SIZE_MAX,
						    "dir %u block %llu: entry at %u has an empty or illegal name", dir,
						    (unsigned long long)blk, off);
				if ((dot || dotdot) && !(lblk == 0 && idx == (dot ? 0u : 1u)))
					chk_txn_problem(t, INV_DIR_DOTS, SIZE_MAX,
						    "dir %u block %llu: '%s' entry at offset %u", dir,
						    (unsigned long long)blk, dot ? "." : "..", off);
				if ((dot && nl < rl - 8 && name[1]) || (dotdot && nl < rl - 8 && name[2]))
					chk_txn_problem(t, INV_DIR_DOTS, SIZE_MAX,
						    "dir %u: '%s' entry is not NUL terminated", dir, dot ? "." : "..");
				if (lblk == 0 && idx == 0 && (!dot || e.inode != dir))
					chk_txn_problem(t, INV_DIR_DOTS, SIZE_MAX,
						    "dir %u: first entry of block 0 is not '.' naming itself", dir);
				if (lblk == 0 && idx == 1 && !dotdot)
					chk_txn_problem(t, INV_DIR_DOTS, SIZE_MAX,
						    "dir %u: second entry of block 0 is not '..'", dir);
			}
			if (e.inode <= fs->inodes_count)
				chk_dl_add(l, dir, e.inode, name, (uint8_t)nl, fs->filetype ? e.file_type : 0,
				       side, blk);
		} else if (strict && lblk == 0 && idx < 2) {
			chk_txn_problem(t, INV_DIR_DOTS, SIZE_MAX, "dir %u: block 0 lacks '%s'", dir,
				    idx ? ".." : ".");
		}
		idx++;
		off += rl;
	}
}

static int dent_cmp(const void *a, const void *b, void *names)
{
	const struct dent *x = a, *y = b;
	if (x->dir != y->dir)
		return x->dir < y->dir ? -1 : 1;
	int c = memcmp((char *)names + x->name_off, (char *)names + y->name_off,
		       x->name_len < y->name_len ? x->name_len : y->name_len);
	if (c)
		return c;
	if (x->name_len != y->name_len)
		return x->name_len < y->name_len ? -1 : 1;
	if (x->side != y->side)
		return x->side < y->side ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

const char *chk_quote_name(struct txn *t, const char *n, unsigned len)
{
	char q[256 * 4 + 3];
	size_t k = 0;
	q[k++] = '"';
	for (unsigned i = 0; i < len; i++) {
		unsigned char c = (unsigned char)n[i];
		if (c == '"' || c == '\\') {
			q[k++] = '\\';
			q[k++] = (char)c;
		} else if (c == '\n') {
			q[k++] = '\\'; q[k++] = 'n';
		} else if (c == '\t') {
			q[k++] = '\\'; q[k++] = 't';
		} else if (c < 32 || c >= 127) {
			k += (size_t)snprintf(q + k, 5, "\\%03o", c);
		} else {
			q[k++] = (char)c;
		}
	}
	q[k++] = '"';
	return chk_arena_strn(&t->v->strings, q, k);
}

static void entry_effect(struct chk_fs *fs, struct txn *t, uint32_t ino, bool dotname, int d)
{
	struct ichange *ic = chk_txn_inode(fs, t, ino);
	if (!ic)
		return;
	ic->entry_delta += d;
	if (d < 0)
		ic->removed_entries -= d;
	if (!dotname) {
		ic->parent_delta += d;
		if (d < 0)
			ic->parent_removed++;
		else
			ic->parent_added++;
	}
}

static void emit_dchange(struct chk_fs *fs, struct txn *t, const struct dent *o, const struct dent *n,
			 const char *names)
{
	const struct dent *any = n ? n : o;
	const char *nm = names + any->name_off;
	bool dotname = (any->name_len == 1 && nm[0] == '.') ||
		       (any->name_len == 2 && nm[0] == '.' && nm[1] == '.');
	size_t r = chk_verdict_add_record(t->v, CHK_DIRENT, any->dir, chk_quote_name(t, nm, any->name_len),
				      o ? o->ino : 0, n ? n->ino : 0);
	if (o)
		entry_effect(fs, t, o->ino, dotname, -1);
	if (n)
		entry_effect(fs, t, n->ino, dotname, +1);
	struct ichange *dic = chk_txn_inode(fs, t, any->dir);
	if (dic)
		chk_ich_add_rec(dic, r);
	if (o) {
		struct ichange *x = chk_txn_inode(fs, t, o->ino);
		if (x)
			chk_ich_add_rec(x, r);
	}
	if (!n)
		return;
	struct ichange *x = chk_txn_inode(fs, t, n->ino);
	if (x)
		chk_ich_add_rec(x, r);
	struct dchange *nd = chk_grow(t->dch, &t->capdch, t->ndch + 1, sizeof(*nd));
	if (!nd) {
		t->err = -ENOMEM;
		return;
	}
	t->dch = nd;
	struct dchange *c = &t->dch[t->ndch++];
	c->dir = n->dir;
	c->old_ino = o ? o->ino : 0;
	c->new_ino = n->ino;
	c->new_ft = n->ft;
	c->name_len = n->name_len;
	memcpy(c->name, nm, n->name_len);
	c->name[n->name_len] = 0;
	c->new_blk = n->blk;
	c->rec = r;
}

static void add_dirblk(struct txn *t, uint64_t blk)
{
	if (chk_u64map_put(&t->dirblks, blk, 1))
		t->err = -ENOMEM;
}

struct dir_collect { struct txn *t; };
static bool collect_visit(void *ctx, const struct chk_span *s)
{
	if (s->type == BT_DIR)
		for (uint32_t k = 0; k < s->len; k++)
			add_dirblk(((struct dir_collect *)ctx)->t, s->blk + k);
	return true;
}
static int get_old_cb(void *ctx, uint64_t blk, void *buf);
struct cb_ctx { struct chk_fs *fs; struct txn *t; };
static int get_old_cb(void *ctx, uint64_t blk, void *buf)
{
	struct cb_ctx *c = ctx;
	const uint8_t *d = chk_txn_old_block(c->fs, c->t, blk, buf);
	if (!d)
		return c->t->err ? c->t->err : -EIO;
	if (d != buf)
		memcpy(buf, d, c->fs->bs);
	return 0;
}
static int get_new_cb(void *ctx, uint64_t blk, void *buf)
{
	struct cb_ctx *c = ctx;
	const uint8_t *d = chk_txn_new_block(c->fs, c->t, blk, buf);
	if (!d)
		return c->t->err ? c->t->err : -EIO;
	if (d != buf)
		memcpy(buf, d, c->fs->bs);
	return 0;
}

/* new type/owner/lblk of a block after the transaction */
uint8_t chk_new_type_of(struct chk_fs *fs, struct txn *t, uint64_t blk, uint32_t *owner, uint32_t *lblk)
{
	struct bchange *c = chk_txn_bch_find(t, blk);
	if (c && c->adds) {
		*owner = c->new_owner;
		*lblk = c->new_lblk;
		return c->new_type;
	}
	if (c && c->removes)
		return BT_FREE;
	if (blk >= fs->blocks_count)
		return BT_FREE;
	*owner = chk_bowner(fs, blk);
	*lblk = chk_blblk(fs, blk);
	return chk_btype(fs, blk);
}

void chk_diff_dirs(struct chk_fs *fs, struct txn *t, uint8_t *buf)
{
	/* blocks: written dir blocks, dir blocks that appear/disappear, and all
	 * blocks of directories whose liveness changes */
	for (size_t i = 0; i < t->nblocks; i++)
		if (t->blocks[i].changed && t->blocks[i].otype == BT_DIR)
			add_dirblk(t, t->blocks[i].blk);
	for (size_t i = 0; i < t->nbch; i++)
		if (t->bch[i]->old_type == BT_DIR || (t->bch[i]->adds && t->bch[i]->new_type == BT_DIR))
			add_dirblk(t, t->bch[i]->blk);
	size_t nich = t->nich;
	for (size_t i = 0; i < nich; i++) {
		struct ichange *ic = t->ich[i];
		const struct ext2_inode *o = (const void *)ic->old, *n = (const void *)ic->new;
		if (ic->old_live == ic->new_live)
			continue;
		struct dir_collect dc = { t };
		struct cb_ctx cc = { fs, t };
		if (ic->old_live && imode_type(o) == 0040000 && chk_walkable(fs, ic->ino, o, true))
			chk_walk_inode_tree(fs, o, true, get_old_cb, &cc, collect_visit, &dc, NULL, 0);
		if (ic->new_live && imode_type(n) == 0040000 && chk_walkable(fs, ic->ino, n, true))
			chk_walk_inode_tree(fs, n, true, get_new_cb, &cc, collect_visit, &dc, NULL, 0);
	}
	struct dent_list l = { 0 };
	for (size_t k = 0; k < t->dirblks.cap; k++) {
		if (!t->dirblks.keys[k])
			continue;
		uint64_t blk = t->dirblks.keys[k] - 1;
		if (blk >= fs->blocks_count)
			continue;
		if (chk_btype(fs, blk) == BT_DIR) {
			struct ichange *ow = chk_txn_inode(fs, t, chk_bowner(fs, blk));
			if (ow && ow->old_live) {
				const uint8_t *d = chk_txn_old_block(fs, t, blk, buf);
				if (d)
					chk_parse_dir_block(fs, t, d, blk, ow->ino, chk_blblk(fs, blk), false, 0, &l);
			}
		}
		uint32_t nown = 0, nlblk = 0;
		if (chk_new_type_of(fs, t, blk, &nown, &nlblk) == BT_DIR) {
			struct ichange *ow = chk_txn_inode(fs, t, nown);
			if (ow && ow->new_live) {
				const uint8_t *d = chk_txn_new_block(fs, t, blk, buf);
				if (d)
					chk_parse_dir_block(fs, t, d, blk, nown, nlblk, true, 1, &l);
			}
		}
	}
	if (l.err)
		t->err = l.err;
	if (l.n)
		qsort_r(l.e, l.n, sizeof(*l.e), dent_cmp, l.names);
	/* walk groups of equal (dir, name): cancel identical old/new pairs */
	for (size_t i = 0; i < l.n;) {
		size_t j = i;
		while (j < l.n && l.e[j].dir == l.e[i].dir && l.e[j].name_len == l.e[i].name_len &&
		       !memcmp(l.names + l.e[j].name_off, l.names + l.e[i].name_off, l.e[i].name_len))
			j++;
		size_t no = 0;
		while (i + no < j && l.e[i + no].side == 0)
			no++;
		struct dent *ol = &l.e[i], *nl = &l.e[i + no];
		size_t nn = j - i - no;
		if (nn > 1)
			chk_txn_problem(t, INV_DIRENT_UNIQUE, SIZE_MAX, "dir %u: name %s appears %zu times",
				    ol->dir, chk_quote_name(t, l.names + nl->name_off, nl->name_len), nn);
		/* both sides sorted by ino: merge, dropping equal inode numbers */
		struct dent *ro[8], *rn[8];
		size_t a = 0, b = 0, kro = 0, krn = 0;
		while (a < no || b < nn) {
			if (a < no && b < nn && ol[a].ino == nl[b].ino && ol[a].ft == nl[b].ft) {
				a++, b++;
			} else if (b >= nn || (a < no && ol[a].ino < nl[b].ino)) {
				if (kro < 8) ro[kro++] = &ol[a];
				a++;
			} else {
				if (krn < 8) rn[krn++] = &nl[b];
				b++;
			}
		}
		size_t m = kro > krn ? kro : krn;
		for (size_t k = 0; k < m; k++)
			emit_dchange(fs, t, k < kro ? ro[k] : NULL, k < krn ? rn[k] : NULL, l.names);
		i = j;
	}
	free(l.e);
	free(l.names);
}
