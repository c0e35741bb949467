/*
 * fuse/acl.c - POSIX ACLs as the kernel's ext3 with `acl` keeps them.
 *
 * The kernel enforces them: with FUSE_POSIX_ACL it asks for
 * system.posix_acl_access (GETXATTR) in every permission check and caches
 * the answer, and it validates what setfacl sends before we see it.  What
 * is left to the daemon, as to ext3's own code: storing them, the mode
 * bits an access ACL implies (and the ACL dropped when the mode says it
 * all), the mask entry a chmod rewrites, and a new inode's ACLs and mode
 * from its directory's default ACL and the caller's umask (FUSE_DONT_MASK:
 * the kernel passes the umask and leaves it to us).
 *
 * Values cross the xattr interface in the generic posix_acl_xattr format
 * (version 2, 8-byte entries); libext2fs stores system.posix_acl_access
 * and _default as ext3 does on disk (name index 2 and 3, ext3_acl_header
 * version 1, 4-byte entries for USER_OBJ, GROUP_OBJ, MASK and OTHER, 8-byte
 * ones with the id for USER and GROUP), so images go both ways between this
 * daemon and the kernel.  Every change happens inside the calling
 * operation's transaction.
 */
#include "rfs.h"

#include <errno.h>
#include <linux/posix_acl.h>
#include <linux/posix_acl_xattr.h>
#include <stdlib.h>
#include <string.h>

#define ACL_ACCESS_NAME "system.posix_acl_access"
#define ACL_DEFAULT_NAME "system.posix_acl_default"

struct acl_entry {
	uint16_t tag, perm;
	uint32_t id;
};

struct acl {
	unsigned n;
	struct acl_entry e[];
};

bool acl_name(const char *name)
{
	return !strcmp(name, ACL_ACCESS_NAME) || !strcmp(name, ACL_DEFAULT_NAME);
}

/* With map_root the image's uid 0 and the mounting user's uid trade places
 * (map_uid, map_gid): the ids named in ACL entries trade too, so that
 * user:root in the image reads as the user, and the user's own entry is
 * stored as root's.  The swap is its own inverse: one call for either
 * direction, in place on a posix_acl_xattr value (partial entries left). */
void acl_map_ids(const struct rfs *r, void *val, size_t len)
{
	size_t es = sizeof(struct posix_acl_xattr_entry);
	unsigned char *p = val;

	if (!r->map_root || len < sizeof(struct posix_acl_xattr_header))
		return;
	for (size_t off = sizeof(struct posix_acl_xattr_header); off + es <= len; off += es) {
		struct posix_acl_xattr_entry x;
		memcpy(&x, p + off, es);
		uint16_t tag = ext2fs_le16_to_cpu(x.e_tag);
		uint32_t id = ext2fs_le32_to_cpu(x.e_id);
		if (tag == ACL_USER)
			id = map_uid(r, id);
		else if (tag == ACL_GROUP)
			id = map_gid(r, id);
		else
			continue;
		x.e_id = ext2fs_cpu_to_le32(id);
		memcpy(p + off, &x, es);
	}
}

/*
 * Parse and validate an xattr value as the kernel's posix_acl_from_xattr
 * and posix_acl_valid do: version 2 (else EOPNOTSUPP), whole entries,
 * permissions rwx only, USER_OBJ, USERs, GROUP_OBJ, GROUPs, MASK, OTHER in
 * that order with one each of the objects, a MASK when named entries are
 * present, ids other than -1.  A header alone is no ACL (*out NULL).
 */
static int acl_parse(const void *val, size_t len, struct acl **out)
{
	const unsigned char *p = val;
	struct posix_acl_xattr_header h;
	size_t es = sizeof(struct posix_acl_xattr_entry);

	*out = NULL;
	if (!val || len < sizeof(h))
		return -EINVAL;
	memcpy(&h, p, sizeof(h));
	if (ext2fs_le32_to_cpu(h.a_version) != POSIX_ACL_XATTR_VERSION)
		return -EOPNOTSUPP;
	if ((len - sizeof(h)) % es)
		return -EINVAL;
	unsigned n = (len - sizeof(h)) / es;
	if (!n)
		return 0;
	struct acl *a = malloc(sizeof(*a) + n * sizeof(a->e[0]));
	if (!a)
		return -ENOMEM;
	a->n = n;
	enum { S_UOBJ, S_USER, S_GROUP, S_OTHER, S_DONE } state = S_UOBJ;
	bool needs_mask = false;
	int ret = 0;
	for (unsigned i = 0; i < n && !ret; i++) {
		struct posix_acl_xattr_entry x;
		memcpy(&x, p + sizeof(h) + i * es, es);
		struct acl_entry *e = &a->e[i];
		e->tag = ext2fs_le16_to_cpu(x.e_tag);
		e->perm = ext2fs_le16_to_cpu(x.e_perm);
		e->id = ext2fs_le32_to_cpu(x.e_id);
		if (e->perm & ~(ACL_READ | ACL_WRITE | ACL_EXECUTE))
			ret = -EINVAL;
		else if (e->tag == ACL_USER_OBJ && state == S_UOBJ)
			state = S_USER;
		else if (e->tag == ACL_USER && state == S_USER && e->id != (uint32_t)-1)
			needs_mask = true;
		else if (e->tag == ACL_GROUP_OBJ && state == S_USER)
			state = S_GROUP;
		else if (e->tag == ACL_GROUP && state == S_GROUP && e->id != (uint32_t)-1)
			needs_mask = true;
		else if (e->tag == ACL_MASK && state == S_GROUP)
			state = S_OTHER;
		else if (e->tag == ACL_OTHER &&
			 (state == S_OTHER || (state == S_GROUP && !needs_mask)))
			state = S_DONE;
		else
			ret = -EINVAL;
		if (e->tag != ACL_USER && e->tag != ACL_GROUP)
			e->id = (uint32_t)-1;
	}
	if (!ret && state != S_DONE)
		ret = -EINVAL;
	if (ret)
		free(a);
	else
		*out = a;
	return ret;
}

static void *acl_encode(const struct acl *a, size_t *len)
{
	struct posix_acl_xattr_header h = { .a_version = ext2fs_cpu_to_le32(POSIX_ACL_XATTR_VERSION) };
	size_t es = sizeof(struct posix_acl_xattr_entry);
	unsigned char *buf = malloc(sizeof(h) + a->n * es);

	if (!buf)
		return NULL;
	memcpy(buf, &h, sizeof(h));
	for (unsigned i = 0; i < a->n; i++) {
		struct posix_acl_xattr_entry x = {
			.e_tag = ext2fs_cpu_to_le16(a->e[i].tag),
			.e_perm = ext2fs_cpu_to_le16(a->e[i].perm),
			.e_id = ext2fs_cpu_to_le32(a->e[i].id),
		};
		memcpy(buf + sizeof(h) + i * es, &x, es);
	}
	*len = sizeof(h) + a->n * es;
	return buf;
}

/* The mode bits an ACL stands for (the kernel's posix_acl_equiv_mode):
 * 1 when it says more than they can (named entries or a mask), else 0. */
static int acl_equiv_mode(const struct acl *a, unsigned *mode)
{
	unsigned m = 0;
	int not_equiv = 0;

	for (unsigned i = 0; i < a->n; i++) {
		unsigned perm = a->e[i].perm & 7;
		switch (a->e[i].tag) {
		case ACL_USER_OBJ:
			m |= perm << 6;
			break;
		case ACL_GROUP_OBJ:
			m |= perm << 3;
			break;
		case ACL_OTHER:
			m |= perm;
			break;
		case ACL_MASK:
			m = (m & ~0070u) | perm << 3;
			not_equiv = 1;
			break;
		default:
			not_equiv = 1;
		}
	}
	*mode = (*mode & ~0777u) | m;
	return not_equiv;
}

/* A chmod's new permission bits written into the ACL (__posix_acl_chmod):
 * the owner and others entries, and the mask (the owning group's entry
 * when there is no mask). */
static void acl_apply_mode(struct acl *a, unsigned mode)
{
	struct acl_entry *group = NULL, *mask = NULL;

	for (unsigned i = 0; i < a->n; i++) {
		struct acl_entry *e = &a->e[i];
		if (e->tag == ACL_USER_OBJ)
			e->perm = (mode >> 6) & 7;
		else if (e->tag == ACL_GROUP_OBJ)
			group = e;
		else if (e->tag == ACL_MASK)
			mask = e;
		else if (e->tag == ACL_OTHER)
			e->perm = mode & 7;
	}
	if (mask)
		mask->perm = (mode >> 3) & 7;
	else if (group)
		group->perm = (mode >> 3) & 7;
}

/* A new inode's access ACL from its directory's default one
 * (posix_acl_create_masq): the requested mode limits the entries that
 * stand for mode bits, and the mode keeps only what they allow.  1 when
 * the result needs to be stored (it says more than the mode), else 0. */
static int acl_create_masq(struct acl *a, unsigned *mode)
{
	struct acl_entry *group = NULL, *mask = NULL;
	unsigned m = *mode;
	int not_equiv = 0;

	for (unsigned i = 0; i < a->n; i++) {
		struct acl_entry *e = &a->e[i];
		switch (e->tag) {
		case ACL_USER_OBJ:
			e->perm &= (m >> 6) | ~7u;
			m &= ((unsigned)e->perm << 6) | ~0700u;
			break;
		case ACL_GROUP_OBJ:
			group = e;
			break;
		case ACL_OTHER:
			e->perm &= m | ~7u;
			m &= e->perm | ~0007u;
			break;
		case ACL_MASK:
			mask = e;
			not_equiv = 1;
			break;
		default:
			not_equiv = 1;
		}
	}
	struct acl_entry *g = mask ? mask : group;
	if (g) {
		g->perm &= (m >> 3) | ~7u;
		m &= ((unsigned)g->perm << 3) | ~0070u;
	}
	*mode = (*mode & ~0777u) | (m & 0777u);
	return not_equiv;
}

static int acl_handle(struct rfs *r, ext2_ino_t ino, struct ext2_xattr_handle **h)
{
	errcode_t e = ext2fs_xattrs_open(r->fs, ino, h);
	if (e)
		return -errmap(e);
	e = ext2fs_xattrs_read(*h);
	if (e) {
		ext2fs_xattrs_close(h);
		return e == EXT2_ET_MISSING_EA_FEATURE ? -EOPNOTSUPP : report_corruption(ino, "bad xattrs");
	}
	return 0;
}

/* The stored ACL of one kind (NULL when there is none). */
static int acl_read(struct rfs *r, ext2_ino_t ino, const char *name, struct acl **out)
{
	struct ext2_xattr_handle *h = NULL;
	void *val = NULL;
	size_t len = 0;

	*out = NULL;
	if (has_no_xattrs(r, ino))
		return 0;   /* most inodes: no parsing on every create and chmod */
	int ret = acl_handle(r, ino, &h);
	if (ret)
		return ret == -EOPNOTSUPP ? 0 : ret;
	errcode_t e = ext2fs_xattr_get(h, name, &val, &len);
	ext2fs_xattrs_close(&h);
	if (e == EXT2_ET_EA_KEY_NOT_FOUND)
		return 0;
	if (e)
		return e == EINVAL ? report_corruption(ino, "malformed ACL") : -errmap(e);
	ret = acl_parse(val, len, out);
	ext2fs_free_mem(&val);
	return ret ? report_corruption(ino, "malformed ACL") : 0;
}

/* Store (a non-NULL) or remove (NULL) one ACL; removing one that is not
 * there is no error, as on the kernel's ext3. */
static int acl_write(struct rfs *r, ext2_ino_t ino, const char *name, const struct acl *a)
{
	struct ext2_xattr_handle *h = NULL;
	size_t len = 0;
	void *val = NULL;
	int ret;

	if (!a && has_no_xattrs(r, ino))
		return 0;   /* nothing to remove (and ext_attr, if off, stays off) */
	if (a && !(val = acl_encode(a, &len)))
		return -ENOMEM;
	ret = a ? xattr_feature_on(r) : 0;
	if (!ret)
		ret = acl_handle(r, ino, &h);
	if (ret) {
		free(val);
		return ret;
	}
	errcode_t e = a ? ext2fs_xattr_set(h, name, val, len) : ext2fs_xattr_remove(h, name);
	if (e == EXT2_ET_EA_KEY_NOT_FOUND)
		e = 0;
	ret = e ? -errmap(e) : 0;
	e = ext2fs_xattrs_close(&h);
	if (e && !ret)
		ret = -errmap(e);
	free(val);
	if (!ret)
		ret = xattr_drop_empty_block(r, ino);
	return ret;
}

static bool caller_in_group_or_root(fuse_req_t req, gid_t gid)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	gid_t groups[64];

	gid = map_gid(R(req), gid);   /* as the kernel sees it */
	if (c->uid == 0 || c->gid == gid)
		return true;
	int n = fuse_req_getgroups(req, 64, groups);
	for (int i = 0; i < n && i < 64; i++)
		if (groups[i] == gid)
			return true;
	return false;
}

/*
 * setxattr of an ACL (ext3's ext4_set_acl): a default ACL only on
 * directories (EACCES elsewhere); an access ACL sets the mode's permission
 * bits, is dropped when the mode says it all, and clears set-group-id when
 * the caller is neither in the file's group nor root.  val NULL: remove.
 * In the caller's transaction.
 */
int acl_set(struct rfs *r, fuse_req_t req, ext2_ino_t ino, const char *name,
	    const void *val, size_t len)
{
	bool deflt = !strcmp(name, ACL_DEFAULT_NAME);
	struct ext2_inode in;
	struct acl *a = NULL;
	int ret;

	if (!r->cfg->acl)
		return -EOPNOTSUPP;
	if (val && (ret = acl_parse(val, len, &a)) != 0)
		return ret;
	if (a && r->map_root) {
		/* the ids as the image keeps them (see acl_map_ids) */
		for (unsigned i = 0; i < a->n; i++)
			if (a->e[i].tag == ACL_USER)
				a->e[i].id = map_uid(r, a->e[i].id);
			else if (a->e[i].tag == ACL_GROUP)
				a->e[i].id = map_gid(r, a->e[i].id);
	}
	ret = get_inode(r, ino, &in);
	if (ret)
		goto out;
	if (LINUX_S_ISLNK(in.i_mode)) {
		ret = -EOPNOTSUPP;
		goto out;
	}
	if (deflt && !LINUX_S_ISDIR(in.i_mode)) {
		ret = a ? -EACCES : 0;
		goto out;
	}
	unsigned mode = in.i_mode;
	if (!deflt && a) {
		if (!acl_equiv_mode(a, &mode)) {
			free(a);
			a = NULL;
		}
		if (!caller_in_group_or_root(req, inode_gid(in)))
			mode &= ~LINUX_S_ISGID;
	}
	ret = acl_write(r, ino, name, a);
	if (!ret)
		ret = get_inode(r, ino, &in);
	if (!ret) {
		in.i_mode = mode;
		in.i_ctime = stamp_now(r, ino, T_C);
		ret = put_inode(r, ino, &in);
	}
out:
	free(a);
	return ret;
}

/* After a chmod (ext3's posix_acl_chmod): the access ACL's owner, mask
 * and others entries follow the new mode.  In the caller's transaction,
 * after the inode with its new mode is written. */
int acl_chmod(struct rfs *r, ext2_ino_t ino, unsigned mode)
{
	struct acl *a = NULL;

	if (!r->cfg->acl || LINUX_S_ISLNK(mode))
		return 0;
	int ret = acl_read(r, ino, ACL_ACCESS_NAME, &a);
	if (ret || !a)
		return ret;
	acl_apply_mode(a, mode);
	ret = acl_write(r, ino, ACL_ACCESS_NAME, a);
	free(a);
	return ret;
}

/*
 * Before a new inode is made in dir (posix_acl_create): with a default
 * ACL on dir the new inode's permission bits are those the ACL allows of
 * the requested ones (no umask), and it gets an access ACL when that
 * says more than the mode, and a directory the default ACL too; without
 * one the caller's umask applies.  Symlinks take neither.
 */
int acl_inherit(struct rfs *r, fuse_req_t req, ext2_ino_t dir, unsigned *mode,
		struct acl_new *out)
{
	struct acl *def = NULL;

	memset(out, 0, sizeof(*out));
	if (!r->cfg->acl || LINUX_S_ISLNK(*mode))
		return 0;
	int ret = acl_read(r, dir, ACL_DEFAULT_NAME, &def);
	if (ret)
		return ret;
	if (!def) {
		*mode &= ~(fuse_req_ctx(req)->umask & 0777);
		return 0;
	}
	if (LINUX_S_ISDIR(*mode)) {
		out->deflt = acl_encode(def, &out->deflt_len);
		if (!out->deflt) {
			free(def);
			return -ENOMEM;
		}
	}
	if (acl_create_masq(def, mode)) {
		out->access = acl_encode(def, &out->access_len);
		if (!out->access) {
			free(def);
			acl_new_free(out);
			return -ENOMEM;
		}
	}
	free(def);
	return 0;
}

/* Store what acl_inherit decided, on the new inode (already written). */
int acl_inherit_store(struct rfs *r, ext2_ino_t ino, const struct acl_new *n)
{
	struct ext2_xattr_handle *h = NULL;

	if (!n->access && !n->deflt)
		return 0;
	int ret = xattr_feature_on(r);   /* on already: the directory's default ACL is an xattr */
	if (!ret)
		ret = acl_handle(r, ino, &h);
	if (ret)
		return ret;
	errcode_t e = 0;
	if (n->access)
		e = ext2fs_xattr_set(h, ACL_ACCESS_NAME, n->access, n->access_len);
	if (!e && n->deflt)
		e = ext2fs_xattr_set(h, ACL_DEFAULT_NAME, n->deflt, n->deflt_len);
	ret = e ? -errmap(e) : 0;
	e = ext2fs_xattrs_close(&h);
	return ret ? ret : e ? -errmap(e) : 0;
}

void acl_new_free(struct acl_new *n)
{
	free(n->access);
	free(n->deflt);
	memset(n, 0, sizeof(*n));
}
