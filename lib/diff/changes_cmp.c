/* SPDX-License-Identifier: MIT */
/*
 * diff: what differs between two entries of one path, the old and the new.
 * The inode first (type, mode, owner, mtime, size, device numbers, symlink
 * target); xattrs and bytes only when asked, the bytes only when the sizes
 * agree, and not at all when both sides read the same file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diff/changes.h"
#include "layer/ldir.h"

int chg_fail(const struct chg_side *side, struct hu_error *e)
{
	hu_error_prefix(e, hu_vdir_path(side->d));
	hu_error_prefix(e, side->s->layers[side->ent->layer].path);
	return -1;
}

/* The layer @side's entry is of. */
static const struct hu_layer *side_layer(const struct chg_side *side)
{
	return &side->s->layers[side->ent->layer];
}

static int side_fail(const struct chg_side *side, int err, const char *what,
		     struct hu_error *e)
{
	hu_error_set(e, err, side->ent->name, "%s", what);
	return chg_fail(side, e);
}

static unsigned stat_bits(const struct stat *a, const struct stat *b)
{
	unsigned w = 0;

	if ((a->st_mode & 07777) != (b->st_mode & 07777))
		w |= HU_DIFF_MODE;
	if (a->st_uid != b->st_uid || a->st_gid != b->st_gid)
		w |= HU_DIFF_OWNER;
	if (a->st_mtim.tv_sec != b->st_mtim.tv_sec ||
	    a->st_mtim.tv_nsec != b->st_mtim.tv_nsec)
		w |= HU_DIFF_MTIME;
	return w;
}

/* ---- xattrs ------------------------------------------------------------ */

/* The public xattr names of one entry, sorted. */
struct xnames {
	char *buf;
	const char **v;
	size_t n;
};

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int xnames_read(const struct chg_side *side, struct xnames *x,
		       struct hu_error *e)
{
	const struct hu_ventry *ent = side->ent;
	ssize_t len;

	memset(x, 0, sizeof(*x));
	if (hu_ldir_listxattr(side_layer(side), ent->dirfd, ent->name,
			      &x->buf, &len) < 0)
		return side_fail(side, errno, "cannot list xattrs", e);
	if (!len)
		return 0;
	x->v = malloc(len * sizeof(*x->v));
	if (!x->v) {
		free(x->buf);
		x->buf = NULL;
		return side_fail(side, ENOMEM, "out of memory", e);
	}
	for (char *p = x->buf; p < x->buf + len; p += strlen(p) + 1)
		if (*p && !hu_xattr_is_private(p))
			x->v[x->n++] = p;
	qsort(x->v, x->n, sizeof(*x->v), name_cmp);
	return 0;
}

static void xnames_free(struct xnames *x)
{
	free(x->v);
	free(x->buf);
}

/* The value of xattr @attr of @side's entry, malloc'd, in *@out. */
static int xvalue(const struct chg_side *side, const char *attr, char **out,
		  ssize_t *len, struct hu_error *e)
{
	const struct hu_ventry *ent = side->ent;

	*out = NULL;
	for (int tries = 0; tries < 8; tries++) {
		ssize_t n = hu_ldir_getxattr(side_layer(side), ent->dirfd,
					     ent->name, attr, NULL, 0);
		char *v;

		if (n < 0)
			break;
		v = malloc(n ? n : 1);
		if (!v)
			return side_fail(side, ENOMEM, "out of memory", e);
		*len = hu_ldir_getxattr(side_layer(side), ent->dirfd,
					ent->name, attr, v, n);
		if (*len >= 0) {
			*out = v;
			return 0;
		}
		free(v);
		if (errno != ERANGE)
			break;
	}
	hu_error_set(e, errno, side->ent->name, "cannot read xattr %s", attr);
	return chg_fail(side, e);
}

static int xattrs_differ(const struct chg_side *n, const struct chg_side *o,
			 bool *differ, struct hu_error *e)
{
	struct xnames a, b = { 0 };
	int rc = -1;

	*differ = false;
	if (xnames_read(n, &a, e) < 0)
		return -1;
	if (xnames_read(o, &b, e) < 0)
		goto out;
	*differ = a.n != b.n;
	for (size_t i = 0; i < a.n && !*differ; i++) {
		char *va, *vb;
		ssize_t la, lb;

		if (strcmp(a.v[i], b.v[i])) {
			*differ = true;
			break;
		}
		if (xvalue(n, a.v[i], &va, &la, e) < 0)
			goto out;
		if (xvalue(o, b.v[i], &vb, &lb, e) < 0) {
			free(va);
			goto out;
		}
		*differ = la != lb || memcmp(va, vb, la) != 0;
		free(va);
		free(vb);
	}
	rc = 0;
out:
	xnames_free(&a);
	xnames_free(&b);
	return rc;
}

/* ---- content ----------------------------------------------------------- */

/* Read up to @len bytes at @off, short only at the end of the file. */
static ssize_t read_full(int fd, char *buf, size_t len, off_t off)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = pread(fd, buf + got, len - got, off + got);

		if (r < 0 && hu_eintr_retry())
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		got += r;
	}
	return got;
}

#define CMP_BUF (128 * 1024)

static int bytes_differ(const struct chg_side *n, int a,
			const struct chg_side *o, int b, bool *differ,
			struct hu_error *e)
{
	char *ba = malloc(2 * CMP_BUF), *bb;
	off_t off = 0;

	if (!ba)
		return side_fail(n, ENOMEM, "out of memory", e);
	bb = ba + CMP_BUF;
	for (*differ = false; !*differ; off += CMP_BUF) {
		ssize_t ra = read_full(a, ba, CMP_BUF, off);
		ssize_t rb = ra < 0 ? 0 : read_full(b, bb, CMP_BUF, off);

		if (ra < 0 || rb < 0) {
			free(ba);
			return side_fail(ra < 0 ? n : o, errno, "cannot read",
					 e);
		}
		*differ = ra != rb || memcmp(ba, bb, ra) != 0;
		if (ra < CMP_BUF)
			break;
	}
	free(ba);
	return 0;
}

/* A file of an index layer, as its tarball's stream hands it over,
 * against file @fd from offset 0. */
struct stream_cmp {
	int fd;
	off_t off;
	bool differ;
	int read_err;	/* reading @fd failed, not the stream */
	char *buf;
};

static int stream_put(void *ctx, const void *p, size_t n, struct hu_error *e)
{
	struct stream_cmp *c = ctx;

	/* the stream goes on to the file's end: the rest is not compared */
	while (n && !c->differ) {
		size_t len = n < CMP_BUF ? n : CMP_BUF;
		ssize_t got = read_full(c->fd, c->buf, len, c->off);

		if (got < 0) {
			c->read_err = errno;
			return hu_error_set(e, errno, NULL, "cannot read");
		}
		c->differ = (size_t)got != len || memcmp(c->buf, p, len) != 0;
		c->off += len;
		p = (const char *)p + len;
		n -= len;
	}
	return 0;
}

/*
 * The data of a file on disk (side @d) and of one of an index layer (side
 * @x: read from its tarball's stream, layer/ldir.h), of the same size.
 * The stream moves forward, or starts again for a file behind it: a
 * reader in the view's order (fsck's walk) reads a sorted tarball once.
 */
static int stream_differ(const struct chg_side *d, const struct chg_side *x,
			 bool *differ, struct hu_error *e)
{
	/* the layer's stream is its reading state, not the layer */
	struct hu_layer *l = (struct hu_layer *)side_layer(x);
	struct stream_cmp c = { .fd = -1 };
	int rc = -1;

	c.buf = malloc(CMP_BUF);
	if (!c.buf)
		return side_fail(d, ENOMEM, "out of memory", e);
	c.fd = hu_vdir_open_data(d->d, d->ent, NULL, e);
	if (c.fd < 0)
		goto out;
	if (hu_ldir_copy_data(l, x->ent->dirfd, x->ent->name,
			      (uint64_t)x->ent->st.st_size, stream_put, &c,
			      e) < 0) {
		if (c.read_err)
			side_fail(d, c.read_err, "cannot read", e);
		else
			chg_fail(x, e);
		goto out;
	}
	*differ = c.differ;
	rc = 0;
out:
	if (c.fd >= 0)
		close(c.fd);
	free(c.buf);
	return rc;
}

/* The data of two regular files of the same size. */
static int data_differ(const struct chg_side *n, const struct chg_side *o,
		       bool *differ, struct hu_error *e)
{
	struct stat sa, sb;
	int a, b, rc = -1;

	*differ = false;
	/* a file of an index layer has no fd: its bytes come in order */
	if (hu_ldir_indexed(side_layer(o)) != hu_ldir_indexed(side_layer(n)))
		return hu_ldir_indexed(side_layer(o)) ?
		       stream_differ(n, o, differ, e) :
		       stream_differ(o, n, differ, e);
	a = hu_vdir_open_data(n->d, n->ent, NULL, e);
	if (a < 0)
		return -1;
	b = hu_vdir_open_data(o->d, o->ent, NULL, e);
	if (b < 0)
		goto out_a;
	if (fstat(a, &sa) < 0 || fstat(b, &sb) < 0) {
		side_fail(n, errno, "cannot stat data", e);
		goto out_b;
	}
	/* A metacopy copy-up reads the very file beneath. */
	if (sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino)
		rc = 0;
	else
		rc = bytes_differ(n, a, o, b, differ, e);
out_b:
	close(b);
out_a:
	close(a);
	return rc;
}

static int read_target(const struct chg_side *side, char **out,
		       struct hu_error *e)
{
	size_t size = side->ent->st.st_size + 1;
	char *t = malloc(size);
	ssize_t n;

	if (!t)
		return side_fail(side, ENOMEM, "out of memory", e);
	n = hu_ldir_readlink(side_layer(side), side->ent->dirfd,
			     side->ent->name, t, size);
	if (n < 0 || (size_t)n >= size) {
		free(t);
		return side_fail(side, n < 0 ? errno : EAGAIN,
				 "cannot read symlink", e);
	}
	t[n] = '\0';
	*out = t;
	return 0;
}

static int target_differs(const struct chg_side *n, const struct chg_side *o,
			  bool *differ, struct hu_error *e)
{
	char *a, *b;

	if (read_target(n, &a, e) < 0)
		return -1;
	if (read_target(o, &b, e) < 0) {
		free(a);
		return -1;
	}
	*differ = strcmp(a, b) != 0;
	free(a);
	free(b);
	return 0;
}

static int content_differs(const struct chg_side *n, const struct chg_side *o,
			   enum chg_cmp how, bool *differ, struct hu_error *e)
{
	const struct stat *a = &n->ent->st, *b = &o->ent->st;

	*differ = false;
	switch (a->st_mode & S_IFMT) {
	case S_IFREG:
		if (a->st_size != b->st_size) {
			*differ = true;
			return 0;
		}
		if (how == CHG_CMP_STAT || (how == CHG_CMP_QUICK &&
		    !(stat_bits(a, b) & HU_DIFF_MTIME)))
			return 0;
		return data_differ(n, o, differ, e);
	case S_IFLNK:
		if (a->st_size != b->st_size) {
			*differ = true;
			return 0;
		}
		return target_differs(n, o, differ, e);
	case S_IFCHR:
	case S_IFBLK:
		*differ = a->st_rdev != b->st_rdev;
		return 0;
	default:
		return 0;
	}
}

int chg_compare(const struct chg_side *n, const struct chg_side *o,
		enum chg_cmp how, unsigned *what, struct hu_error *e)
{
	const struct stat *a = &n->ent->st, *b = &o->ent->st;
	bool differ;
	unsigned w;

	*what = 0;
	if ((a->st_mode & S_IFMT) != (b->st_mode & S_IFMT)) {
		*what = HU_DIFF_TYPE;
		return 0;
	}
	w = stat_bits(a, b);
	if (S_ISDIR(a->st_mode) || how != CHG_CMP_STAT) {
		if (xattrs_differ(n, o, &differ, e) < 0)
			return -1;
		if (differ)
			w |= HU_DIFF_XATTRS;
	}
	if (content_differs(n, o, how, &differ, e) < 0)
		return -1;
	if (differ)
		w |= HU_DIFF_CONTENT;
	*what = w;
	return 0;
}
