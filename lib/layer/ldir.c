/* SPDX-License-Identifier: MIT */
/*
 * A layer's directories, on disk or in a path index (ldir.h): each call the
 * syscall it stands for on a directory layer, a read of the index (and of
 * what the layer's implicit directories took from beneath) on an index
 * layer.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layer/ldir.h"

/* What an implicit directory of an index layer reads as, beyond the
 * index: gone, or the metadata of the directory beneath. */
struct hu_ldir_imp {
	hu_pnode node;
	bool gone;
	bool below;		/* @st and the xattrs are from beneath */
	struct stat st;
	char *xnames;		/* names back to back, each NUL-ended */
	size_t xlen;
	char **xval;		/* one value per name, in their order */
	size_t *xvlen;
	size_t nx;
};

/* ---- the index side ---------------------------------------------------- */

static int imp_cmp(const void *key, const void *elem)
{
	hu_pnode n = *(const hu_pnode *)key;
	const struct hu_ldir_imp *m = elem;

	return n < m->node ? -1 : n > m->node;
}

static const struct hu_ldir_imp *imp_of(const struct hu_layer *l, hu_pnode n)
{
	if (!l->nimplied)
		return NULL;
	return bsearch(&n, l->implied, l->nimplied, sizeof(*l->implied),
		       imp_cmp);
}

static bool node_gone(const struct hu_layer *l, hu_pnode n)
{
	const struct hu_ldir_imp *m = imp_of(l, n);

	return m && m->gone;
}

static void node_stat(const struct hu_layer *l, hu_pnode n, struct stat *st)
{
	const struct hu_ldir_imp *m = imp_of(l, n);

	if (m && m->below)
		*st = m->st;
	else
		hu_pindex_stat(l->pindex, n, st);
}

/* The node handle @h names: EBADF for anything else (a real fd). */
static int node_of(const struct hu_layer *l, int h, hu_pnode *n)
{
	if (h < HU_LDIR_BASE ||
	    (size_t)(h - HU_LDIR_BASE) >= hu_pindex_nodes(l->pindex)) {
		errno = EBADF;
		return -1;
	}
	*n = (hu_pnode)(h - HU_LDIR_BASE);
	return 0;
}

/* Name @name (one component) in directory node @d, not followed. */
static int child_of(const struct hu_layer *l, hu_pnode d, const char *name,
		    size_t len, hu_pnode *out)
{
	struct stat st;
	char one[NAME_MAX + 1];
	hu_pnode n;

	node_stat(l, d, &st);
	if (!S_ISDIR(st.st_mode)) {
		errno = ENOTDIR;
		return -1;
	}
	if (len > NAME_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (len == 1 && name[0] == '.') {
		*out = d;
		return 0;
	}
	if (len == 2 && name[0] == '.' && name[1] == '.') {
		/* never above the layer's root, as RESOLVE_BENEATH */
		errno = EXDEV;
		return -1;
	}
	memcpy(one, name, len);
	one[len] = '\0';
	n = hu_pindex_lookup(l->pindex, d, one);
	if (n == HU_PNODE_NONE || node_gone(l, n)) {
		errno = ENOENT;
		return -1;
	}
	*out = n;
	return 0;
}

/* Path @name (NULL or "": @h itself) under handle @h, its last component
 * not followed, the ones before it directories (a symlink among them,
 * which fstatat would follow, is refused: ELOOP). */
static int node_at(const struct hu_layer *l, int h, const char *name,
		   hu_pnode *out)
{
	hu_pnode n;

	if (node_of(l, h, &n) < 0)
		return -1;
	if (!name)
		name = "";
	while (*name) {
		const char *slash = strchr(name, '/');
		size_t len = slash ? (size_t)(slash - name) : strlen(name);

		if (len && child_of(l, n, name, len, &n) < 0)
			return -1;
		name += len;
		while (*name == '/')
			name++;
		if (*name) {
			struct stat st;

			node_stat(l, n, &st);
			if (S_ISLNK(st.st_mode)) {
				errno = ELOOP;
				return -1;
			}
		}
	}
	*out = n;
	return 0;
}

/* The xattr names of node @n, as listxattr gives them. */
static const char *node_xnames(const struct hu_layer *l, hu_pnode n,
			       size_t *len)
{
	const struct hu_ldir_imp *m = imp_of(l, n);

	if (m && m->below) {
		*len = m->xlen;
		return m->xnames;
	}
	return hu_pindex_xattr_names(l->pindex, n, len);
}

static int node_xattr(const struct hu_layer *l, hu_pnode n, const char *attr,
		      const void **val, size_t *len)
{
	const struct hu_ldir_imp *m = imp_of(l, n);

	if (!m || !m->below)
		return hu_pindex_xattr(l->pindex, n, attr, val, len);
	for (size_t i = 0, off = 0; i < m->nx; i++) {
		if (!strcmp(m->xnames + off, attr)) {
			*val = m->xval[i];
			*len = m->xvlen[i];
			return 0;
		}
		off += strlen(m->xnames + off) + 1;
	}
	errno = ENODATA;
	return -1;
}

/* Copy @len bytes of @src out as the xattr calls do: @size 0 asks the
 * length, a smaller buffer is ERANGE. */
static ssize_t give(const void *src, size_t len, void *buf, size_t size)
{
	if (!size)
		return (ssize_t)len;
	if (size < len) {
		errno = ERANGE;
		return -1;
	}
	memcpy(buf, src, len);
	return (ssize_t)len;
}

int hu_ldir_names(const struct hu_layer *l, int dir, struct hu_names *out,
		  const char *path, struct hu_error *e)
{
	const struct hu_pindex *x = l->pindex;
	struct stat st;
	hu_pnode d;
	size_t n;

	memset(out, 0, sizeof(*out));
	if (node_of(l, dir, &d) < 0)
		return hu_error_set(e, errno, path, "cannot list directory");
	node_stat(l, d, &st);
	if (!S_ISDIR(st.st_mode))
		return hu_error_set(e, ENOTDIR, path, "cannot list directory");
	n = hu_pindex_nchildren(x, d);
	out->v = malloc((n ? n : 1) * sizeof(*out->v));
	if (!out->v)
		return hu_error_set(e, ENOMEM, path, "cannot list directory");
	for (size_t i = 0; i < n; i++) {
		hu_pnode c = hu_pindex_child(x, d, i);

		if (node_gone(l, c))
			continue;
		node_stat(l, c, &st);
		out->v[out->n].name = hu_pindex_name(x, c);
		out->v[out->n++].type = IFTODT(st.st_mode);
	}
	return 0;	/* the names are the index's: no pool */
}

/* ---- the calls --------------------------------------------------------- */

int hu_ldir_stat(const struct hu_layer *l, int dir, const char *name,
		 struct stat *st)
{
	hu_pnode n;

	if (!hu_ldir_indexed(l)) {
		if (!name || !*name)
			return fstat(dir, st);
		return fstatat(dir, name, st, AT_SYMLINK_NOFOLLOW);
	}
	if (node_at(l, dir, name, &n) < 0)
		return -1;
	node_stat(l, n, st);
	return 0;
}

/* Node @n as a directory handle. */
static int dir_handle(const struct hu_layer *l, hu_pnode n)
{
	struct stat st;

	node_stat(l, n, &st);
	if (!S_ISDIR(st.st_mode)) {
		errno = S_ISLNK(st.st_mode) ? ELOOP : ENOTDIR;
		return -1;
	}
	return hu_ldir_handle(n);
}

int hu_ldir_open(const struct hu_layer *l, int dir, const char *name)
{
	hu_pnode n;

	if (!hu_ldir_indexed(l))
		return hu_open_dir_at(dir, name);
	if (node_at(l, dir, name, &n) < 0)
		return -1;
	return dir_handle(l, n);
}

int hu_ldir_open_beneath(const struct hu_layer *l, int root,
			 const char *path)
{
	hu_pnode n;

	if (!hu_ldir_indexed(l))
		return hu_open_dir_beneath(root, path);
	if (node_of(l, root, &n) < 0)
		return -1;
	while (*path == '/')
		path++;
	if (node_at(l, root, path, &n) < 0)
		return -1;
	return dir_handle(l, n);
}

int hu_ldir_dup(const struct hu_layer *l, int dir)
{
	hu_pnode n;

	if (!hu_ldir_indexed(l))
		return fcntl(dir, F_DUPFD_CLOEXEC, 0);
	if (node_of(l, dir, &n) < 0)
		return -1;
	return dir;
}

void hu_ldir_close(const struct hu_layer *l, int dir)
{
	if (!hu_ldir_indexed(l) && dir >= 0)
		close(dir);
}

ssize_t hu_ldir_xattr_names(const struct hu_layer *l, int dir,
			    const char *name, char *small, size_t size,
			    char **list)
{
	const char *names;
	size_t len;
	hu_pnode n;

	if (!hu_ldir_indexed(l))
		return hu_xattr_names(dir, name, small, size, list);
	*list = small;
	if (node_at(l, dir, name, &n) < 0)
		return -1;
	names = node_xnames(l, n, &len);
	if (len > size) {
		*list = malloc(len);
		if (!*list) {
			*list = small;
			errno = ENOMEM;
			return -1;
		}
	}
	if (len)
		memcpy(*list, names, len);
	return (ssize_t)len;
}

int hu_ldir_listxattr(const struct hu_layer *l, int dir, const char *name,
		      char **list, ssize_t *len)
{
	const char *names;
	size_t n;
	hu_pnode node;

	if (!hu_ldir_indexed(l))
		return hu_llistxattr_at(dir, name, list, len);
	*list = NULL;
	*len = 0;
	if (node_at(l, dir, name, &node) < 0)
		return -1;
	names = node_xnames(l, node, &n);
	if (!n)
		return 0;
	*list = malloc(n);
	if (!*list)
		return -1;
	memcpy(*list, names, n);
	*len = (ssize_t)n;
	return 0;
}

ssize_t hu_ldir_getxattr(const struct hu_layer *l, int dir, const char *name,
			 const char *attr, void *buf, size_t size)
{
	const void *val;
	size_t len;
	hu_pnode n;

	if (!hu_ldir_indexed(l))
		return hu_lgetxattr_at(dir, name, attr, buf, size);
	if (node_at(l, dir, name, &n) < 0 ||
	    node_xattr(l, n, attr, &val, &len) < 0)
		return -1;
	return give(val, len, buf, size);
}

ssize_t hu_ldir_readlink(const struct hu_layer *l, int dir, const char *name,
			 char *buf, size_t size)
{
	const char *t;
	size_t len;
	hu_pnode n;

	if (!hu_ldir_indexed(l))
		return readlinkat(dir, name, buf, size);
	if (node_at(l, dir, name, &n) < 0)
		return -1;
	t = hu_pindex_symlink(l->pindex, n);
	if (!t) {
		errno = EINVAL;
		return -1;
	}
	len = strlen(t);
	if (len > size)
		len = size;	/* cut short, as readlink(2) does */
	memcpy(buf, t, len);
	return (ssize_t)len;
}

int hu_ldir_open_data(const struct hu_layer *l, int dir, const char *name,
		      int flags, struct hu_error *e)
{
	int fd;

	if (!hu_ldir_indexed(l)) {
		fd = openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			hu_error_set(e, errno, name, "cannot open");
		return fd;
	}
	errno = EOPNOTSUPP;
	return hu_error_set(e, EOPNOTSUPP, name, "cannot open: the data of a "
			    "tarball layer read from its path index is not "
			    "read yet");
}

int hu_ldir_copy_data(struct hu_layer *l, int dir, const char *name,
		      uint64_t size, hu_pstream_put put, void *ctx,
		      struct hu_error *e)
{
	struct hu_pdata d;
	hu_pnode n;

	if (l->tar_fd < 0) {
		errno = EOPNOTSUPP;
		return hu_error_set(e, EOPNOTSUPP, name, "cannot read: the "
				    "layer was opened for its names alone");
	}
	if (node_at(l, dir, name, &n) < 0)
		return hu_error_set(e, errno, name, "cannot read");
	if (hu_pindex_data(l->pindex, n, &d) < 0)
		return hu_error_set(e, EIO, name, "cannot read: not a file "
				    "with data");
	if (!l->pstream && hu_pstream_open(&l->pstream, l->tar_fd, l->image,
					   l->image_layer, l->pindex, e) < 0)
		return -1;
	if (hu_pstream_copy(l->pstream, &d, size, put, ctx, e) < 0) {
		if (!e->path)
			hu_error_prefix(e, name);
		return -1;
	}
	return 0;
}

unsigned hu_layer_restarts(const struct hu_layer *l)
{
	return l->pstream ? hu_pstream_restarts(l->pstream) : 0;
}

int hu_ldir_data_finish(struct hu_layer *l, struct hu_error *e)
{
	if (l->tar_fd < 0)
		return 0;
	if (!l->pstream && hu_pstream_open(&l->pstream, l->tar_fd, l->image,
					   l->image_layer, l->pindex, e) < 0)
		return -1;
	return hu_pstream_finish(l->pstream, e);
}

int hu_ldir_copy_xattrs(const struct hu_layer *l, int dir, int dfd,
			struct hu_error *e)
{
	char *list;
	ssize_t len;
	int rc = 0;

	if (!hu_ldir_indexed(l))
		return hu_copy_xattrs(dir, NULL, dfd, NULL, e);
	if (hu_ldir_listxattr(l, dir, NULL, &list, &len) < 0)
		return hu_error_set(e, errno, NULL, "cannot list xattrs");
	for (ssize_t off = 0; off < len && rc == 0;
	     off += strlen(list + off) + 1) {
		const char *a = list + off;
		const void *v;
		size_t vl;
		hu_pnode n;

		if (!*a || !hu_xattr_copied(a))
			continue;
		if (node_of(l, dir, &n) < 0 || node_xattr(l, n, a, &v, &vl) < 0)
			rc = hu_error_set(e, errno, NULL,
					  "cannot read xattr %s", a);
		else if (hu_wr_setxattr_at(dfd, NULL, a, v, vl, 0) < 0)
			rc = hu_error_set(e, errno, NULL,
					  "cannot set xattr %s", a);
	}
	free(list);
	return rc;
}

/* ---- implicit directories ---------------------------------------------- */

static void imp_clear(struct hu_ldir_imp *m)
{
	for (size_t i = 0; i < m->nx; i++)
		free(m->xval[i]);
	free(m->xval);
	free(m->xvlen);
	free(m->xnames);
}

void hu_ldir_free(struct hu_layer *l)
{
	for (size_t i = 0; i < l->nimplied; i++)
		imp_clear(&l->implied[i]);
	free(l->implied);
	l->implied = NULL;
	l->nimplied = 0;
	if (l->pindex)
		hu_pindex_free(l->pindex);
	l->pindex = NULL;
	hu_pstream_free(l->pstream);
	l->pstream = NULL;
	if (l->tar_fd >= 0)
		close(l->tar_fd);
	l->tar_fd = -1;
}

/* Does directory node @d of @l hide @name of the layers beneath (an
 * opaque marker, or a whiteout of it)?  tardirs.c's hidden_here(). */
static bool hidden_here(const struct hu_layer *l, hu_pnode d,
			const char *name)
{
	char wh[NAME_MAX + 1];

	if (hu_pindex_lookup(l->pindex, d, HU_OCI_OPAQUE) != HU_PNODE_NONE)
		return true;
	return hu_oci_whiteout_name(wh, sizeof(wh), name) &&
	       hu_pindex_lookup(l->pindex, d, wh) != HU_PNODE_NONE;
}

/* The directory of the view of @below at node @n of @l (*@vd NULL when
 * there is none, or @l hides it): tardirs.c's below_vdir(), one walk from
 * the root. */
static int below_dir(const struct hu_layer *l, const struct hu_stack *below,
		     hu_pnode n, struct hu_vdir **vd, struct hu_error *e)
{
	struct hu_vdir *parent, *child;
	struct hu_ventry ent;
	hu_pnode p;
	int rc;

	*vd = NULL;
	p = hu_pindex_parent(l->pindex, n);
	if (p == HU_PNODE_NONE)
		return hu_vdir_open_root(below, vd, e);
	if (below_dir(l, below, p, &parent, e) < 0)
		return -1;
	if (!parent || hidden_here(l, p, hu_pindex_name(l->pindex, n))) {
		if (parent)
			hu_vdir_close(parent);
		return 0;
	}
	rc = hu_vdir_lookup(parent, hu_pindex_name(l->pindex, n), &ent, e);
	if (rc > 0 && S_ISDIR(ent.st.st_mode)) {
		rc = hu_vdir_open_child(parent, &ent, &child, e);
		if (rc == 0)
			*vd = child;
	}
	hu_vdir_close(parent);
	return rc < 0 ? -1 : 0;
}

/* Implicit node @m->node takes the metadata of directory @vd beneath, as
 * imply_from_below() gives its unpack: mode, times, xattrs, and the owner
 * when run as root. */
static int imp_take(const struct hu_layer *l, struct hu_ldir_imp *m,
		    const struct hu_stack *below, struct hu_vdir *vd,
		    struct hu_error *e)
{
	size_t layer;
	int h = hu_vdir_fd(vd, &layer);
	const struct hu_layer *bl = &below->layers[layer];
	struct stat st;
	char *list;
	ssize_t len;

	hu_pindex_stat(l->pindex, m->node, &m->st);
	if (hu_ldir_stat(bl, h, NULL, &st) < 0)
		return hu_error_set(e, errno, hu_vdir_path(vd),
				    "cannot stat the directory beneath");
	if (geteuid() == 0) {
		m->st.st_uid = st.st_uid;
		m->st.st_gid = st.st_gid;
	}
	m->st.st_mode = S_IFDIR | (st.st_mode & 07777);
	m->st.st_atim = st.st_atim;
	m->st.st_mtim = st.st_mtim;
	m->st.st_ctim = st.st_mtim;
	m->below = true;
	if (hu_ldir_listxattr(bl, h, NULL, &list, &len) < 0)
		return hu_error_set(e, errno, hu_vdir_path(vd),
				    "cannot list xattrs of the directory "
				    "beneath");
	m->xnames = malloc(len ? (size_t)len : 1);
	m->xval = calloc(len ? (size_t)len : 1, sizeof(*m->xval));
	m->xvlen = calloc(len ? (size_t)len : 1, sizeof(*m->xvlen));
	if (!m->xnames || !m->xval || !m->xvlen) {
		free(list);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	for (ssize_t off = 0; off < len; off += strlen(list + off) + 1) {
		const char *a = list + off;
		ssize_t vl;

		if (!hu_xattr_copied(a))
			continue;
		vl = hu_ldir_getxattr(bl, h, NULL, a, NULL, 0);
		if (vl >= 0 && !(m->xval[m->nx] = malloc(vl ? vl : 1)))
			vl = -1;
		if (vl >= 0)
			vl = hu_ldir_getxattr(bl, h, NULL, a, m->xval[m->nx],
					      vl);
		if (vl < 0) {
			hu_error_set(e, errno, hu_vdir_path(vd),
				     "cannot read xattr %s beneath", a);
			free(list);
			return -1;
		}
		m->xvlen[m->nx++] = (size_t)vl;
		memcpy(m->xnames + m->xlen, a, strlen(a) + 1);
		m->xlen += strlen(a) + 1;
	}
	free(list);
	return 0;
}

static size_t node_depth(const struct hu_pindex *x, hu_pnode n)
{
	size_t k = 0;

	while ((n = hu_pindex_parent(x, n)) != HU_PNODE_NONE)
		k++;
	return k;
}

struct pending_imp {
	hu_pnode node;
	size_t depth;
	bool beneath;		/* a directory beneath stands for it */
};

static int deeper_first(const void *a, const void *b)
{
	const struct pending_imp *p = a, *q = b;

	if (p->depth != q->depth)
		return p->depth > q->depth ? -1 : 1;
	return p->node < q->node ? -1 : p->node > q->node;
}

static int by_node(const void *a, const void *b)
{
	const struct hu_ldir_imp *p = a, *q = b;

	return p->node < q->node ? -1 : p->node > q->node;
}

/* Does directory node @d, its gone children left out, hold names, and
 * any but markers? */
static void dir_holds(const struct hu_layer *l, hu_pnode d, bool *names,
		      bool *entries)
{
	size_t n = hu_pindex_nchildren(l->pindex, d);

	*names = *entries = false;
	for (size_t i = 0; i < n && !*entries; i++) {
		hu_pnode c = hu_pindex_child(l->pindex, d, i);

		if (node_gone(l, c))
			continue;
		*names = true;
		*entries = !hu_oci_is_marker(hu_pindex_name(l->pindex, c));
	}
}

/* The layer's list of implied nodes grown by one, kept sorted (the drop
 * pass reads node_gone() as it goes). */
static int imp_add(struct hu_layer *l, const struct hu_ldir_imp *m)
{
	struct hu_ldir_imp *v = realloc(l->implied,
					(l->nimplied + 1) * sizeof(*v));

	if (!v)
		return -1;
	l->implied = v;
	v[l->nimplied++] = *m;
	qsort(v, l->nimplied, sizeof(*v), by_node);
	return 0;
}

static int imply_all(struct hu_layer *l, const struct hu_stack *below,
		     struct pending_imp *p, size_t np, struct hu_error *e)
{
	/* top-down: each takes from the directory beneath */
	for (size_t i = np; i-- > 0;) {
		struct hu_ldir_imp m = { .node = p[i].node };
		struct hu_vdir *vd;
		int rc;

		if (!below->n)
			continue;
		if (below_dir(l, below, p[i].node, &vd, e) < 0)
			return -1;
		if (!vd)
			continue;
		p[i].beneath = true;
		rc = imp_take(l, &m, below, vd, e);
		hu_vdir_close(vd);
		if (rc < 0 || imp_add(l, &m) < 0) {
			imp_clear(&m);
			return rc < 0 ? -1 : hu_error_set(e, ENOMEM, NULL,
							  "out of memory");
		}
	}
	/* bottom-up: what holds nothing, or markers with nothing beneath
	 * to hide, goes (drop_if_idle) */
	for (size_t i = 0; i < np; i++) {
		struct hu_ldir_imp m = { .node = p[i].node, .gone = true };
		struct hu_ldir_imp *have;
		bool names, entries;

		if (p[i].node == HU_PNODE_ROOT)
			continue;
		dir_holds(l, p[i].node, &names, &entries);
		if (entries || (names && p[i].beneath))
			continue;
		have = (struct hu_ldir_imp *)imp_of(l, p[i].node);
		if (have) {
			have->gone = true;
			continue;
		}
		if (imp_add(l, &m) < 0)
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	return 0;
}

int hu_ldir_imply(struct hu_layer *l, struct hu_pindex *x,
		  const struct hu_stack *below, struct hu_error *e)
{
	size_t nodes = hu_pindex_nodes(x), np = 0;
	struct pending_imp *p = NULL;
	int rc = 0;

	if (nodes >= (size_t)(INT_MAX - HU_LDIR_BASE)) {
		hu_pindex_free(x);
		return hu_error_set(e, EFBIG, l->path, "too many paths");
	}
	l->pindex = x;
	l->fd = hu_ldir_handle(HU_PNODE_ROOT);
	l->format = HU_FMT_OCI;
	l->dev = hu_pindex_dev(x);
	l->ino = HU_PNODE_ROOT + 1;
	if (below) {
		for (hu_pnode n = 0; n < nodes; n++) {
			struct pending_imp *q;

			if (!hu_pindex_implicit(x, n))
				continue;
			q = realloc(p, (np + 1) * sizeof(*p));
			if (!q) {
				rc = hu_error_set(e, ENOMEM, NULL,
						  "out of memory");
				goto out;
			}
			p = q;
			p[np++] = (struct pending_imp){
				.node = n, .depth = node_depth(x, n) };
		}
		if (np)	/* (qsort(NULL, 0) is undefined) */
			qsort(p, np, sizeof(*p), deeper_first);
		rc = imply_all(l, below, p, np, e);
	}
out:
	free(p);
	if (rc < 0) {
		hu_error_prefix(e, l->path);
		hu_ldir_free(l);
		l->fd = -1;
	}
	return rc;
}
