/* SPDX-License-Identifier: MIT */
/*
 * The merged view: for one directory of the view, the layer directories
 * that make it up (topmost first) and their merged, sorted listing.
 *
 * The rules are the kernel's (fs/overlayfs/namei.c and readdir.c): a name
 * is looked up from the top down; a whiteout ends the lookup and hides the
 * name; a non-directory wins over everything below it; directories merge
 * until one is opaque or something that is not a directory is met.
 * Overlay redirects move the lookup below a directory elsewhere, and
 * metacopy files take their data from further down.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "internal.h"

struct vlayer {
	size_t layer;		/* index into the stack */
	int fd;
	bool own;		/* close fd with the vdir */
};

/* A file's data opened ahead by hu_vdir_prefetch, for hu_vdir_open_data
 * to hand out. */
struct prefetched {
	const struct hu_ventry *ent;
	int fd;			/* -1 once handed out */
	bool own;
};
enum { PREFETCH_MAX = 16, PREFETCH_BYTES = 128 << 10 };

struct hu_vdir {
	const struct hu_stack *s;
	struct hu_vdir *parent;
	char *path;		/* relative to the view root, "" at the root */
	struct vlayer *d;	/* topmost first */
	size_t nd;
	struct hu_names *lists;	/* one per vlayer, backing entry names */
	struct hu_ventry *ents;
	size_t nents;
	bool listed;
	struct prefetched pre[PREFETCH_MAX];
	size_t npre;
};

/* One name of one layer directory, as a candidate for the listing. */
struct vrec {
	const char *key;	/* the name in the view */
	const char *name;	/* the name on disk (.wh.key for OCI) */
	size_t rank;		/* index into vdir->d: 0 is the topmost */
	bool whiteout;		/* an OCI whiteout (known from the name) */
};

/* Errors below name paths relative to a layer directory of @d. */
static int vfail(const struct hu_vdir *d, size_t layer, struct hu_error *e)
{
	hu_error_prefix(e, d->path);
	hu_error_prefix(e, d->s->layers[layer].path);
	return -1;
}

/* The same for a path relative to layer @layer's root (@rel may be NULL). */
static int lfail(const struct hu_stack *s, size_t layer, const char *rel,
		 struct hu_error *e)
{
	hu_error_prefix(e, rel);
	hu_error_prefix(e, s->layers[layer].path);
	return -1;
}

static int vdir_push(struct hu_vdir *d, size_t layer, int fd, bool own)
{
	struct vlayer *v = realloc(d->d, (d->nd + 1) * sizeof(*v));

	if (!v)
		return -1;
	d->d = v;
	d->d[d->nd++] = (struct vlayer){ .layer = layer, .fd = fd, .own = own };
	return 0;
}

/* Does directory @fd in @layer stop the lookup of the layers below? */
static int dir_stops(const struct hu_stack *s, size_t layer, int fd,
		     bool *stop, struct hu_error *e)
{
	const struct hu_layer *l = &s->layers[layer];
	enum hu_opaque op;
	struct stat st;

	*stop = false;
	if (hu_layer_probe_dir(l, fd, e) < 0)
		return -1;
	if (hu_layer_is(l, HU_FMT_OCI)) {
		if (fstatat(fd, HU_OCI_OPAQUE, &st, AT_SYMLINK_NOFOLLOW) == 0)
			*stop = true;
		else if (errno != ENOENT)
			return hu_error_set(e, errno, HU_OCI_OPAQUE,
					    "cannot stat");
		if (*stop || (!hu_layer_is(l, HU_FMT_UNION) &&
			      !hu_layer_is(l, HU_FMT_OVERLAY)))
			return 0;
	}
	if (hu_marker_dir_opaque(l, fd, &op, e) < 0)
		return -1;
	*stop = op == HU_OPAQUE_YES;
	return 0;
}

/* Does the root of OCI layer @l hold .wh..wh..opq?  (The kernel ignores
 * an opaque xattr on a layer root; an OCI root's file does hide all.) */
static int root_stops(const struct hu_layer *l, bool *stop, struct hu_error *e)
{
	struct stat st;

	*stop = false;
	if (hu_layer_probe_dir(l, l->fd, e) < 0)
		return -1;
	if (!hu_layer_is(l, HU_FMT_OCI))
		return 0;
	if (fstatat(l->fd, HU_OCI_OPAQUE, &st, AT_SYMLINK_NOFOLLOW) == 0)
		*stop = true;
	else if (errno != ENOENT)
		return hu_error_set(e, errno, HU_OCI_OPAQUE, "cannot stat");
	return 0;
}

/* The overlay.redirect of directory or file @fd, or NULL. */
static int read_redirect(const struct hu_layer *l, int fd, char **out,
			 struct hu_error *e)
{
	char attr[64];
	ssize_t n = -1;
	char *v;

	*out = NULL;
	/* half-converted between namespaces: the old name, else the new */
	for (int i = 0; i < 2 && n < 0; i++) {
		if (!hu_layer_overlay_xattr(l, i, "redirect", attr,
					    sizeof(attr)))
			continue;
		n = fgetxattr(fd, attr, NULL, 0);
		if (n < 0 && errno != ENODATA && errno != ENOTSUP)
			return hu_error_set(e, errno, NULL, "cannot read %s",
					    attr);
	}
	if (n < 0)
		return 0;
	v = malloc(n + 1);
	if (!v)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	n = fgetxattr(fd, attr, v, n);
	if (n < 0) {
		free(v);
		return hu_error_set(e, errno, NULL, "cannot read %s", attr);
	}
	v[n] = '\0';
	*out = v;
	return 0;
}

/* A redirect the kernel accepts: "/a/b" with no empty component, or one
 * name.  "." and ".." would walk out of place: refused, as the kernel's
 * lookup refuses them. */
bool hu_redirect_valid(const char *r)
{
	if (!*r)
		return false;
	if (r[0] != '/')
		return !strchr(r, '/') && strcmp(r, ".") && strcmp(r, "..");
	for (const char *s = r; *s == '/';) {
		const char *next = strchrnul(s + 1, '/');
		size_t len = next - (s + 1);

		if (len == 0 || (len == 1 && s[1] == '.') ||
		    (len == 2 && s[1] == '.' && s[2] == '.'))
			return false;
		s = next;
	}
	return true;
}

/* Where the lookup of one name goes in the layers below. */
struct lookup {
	char *path;	/* components joined by '/' */
	bool abs;	/* from each layer's root, not the parent's dirs */
	bool stop;	/* nothing further down counts */
};

/*
 * Apply redirect @r met at component @k of @comps (@n components) to @lk:
 * the layers below look up the redirected path followed by the components
 * after @k.
 */
static int apply_redirect(struct lookup *lk, const char *r, char **comps,
			  size_t n, size_t k)
{
	size_t len = strlen(r) + 2;
	char *p;

	for (size_t i = 0; i < n; i++)
		len += strlen(comps[i]) + 1;
	p = malloc(len);
	if (!p)
		return -1;
	p[0] = '\0';
	if (r[0] == '/') {
		strcat(p, r + 1);
		lk->abs = true;
		lk->stop = false;
	} else {
		for (size_t i = 0; i < k; i++) {
			strcat(p, comps[i]);
			strcat(p, "/");
		}
		strcat(p, r);
	}
	for (size_t i = k + 1; i < n; i++) {
		strcat(p, "/");
		strcat(p, comps[i]);
	}
	free(lk->path);
	lk->path = p;
	return 0;
}

/* Split @p in place at '/' into a malloc'd array of its components (empty
 * ones dropped); NULL when memory runs out. */
static char **split_path(char *p, size_t *n)
{
	size_t max = 1;
	char **comps, *save;

	for (const char *c = p; *c; c++)
		max += *c == '/';
	comps = malloc(max * sizeof(*comps));
	*n = 0;
	if (!comps)
		return NULL;
	for (char *t = strtok_r(p, "/", &save); t;
	     t = strtok_r(NULL, "/", &save))
		comps[(*n)++] = t;
	return comps;
}

/* Does OCI directory @fd hold ".wh.@name"? */
static bool oci_whiteout(int fd, const char *name)
{
	char wh[NAME_MAX + 1];
	struct stat st;

	if (!hu_oci_whiteout_name(wh, sizeof(wh), name))
		return false;
	return fstatat(fd, wh, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/*
 * Look @lk up in layer @j from directory @base.  On success *@found is an
 * open fd of the final entry (or -1 when this layer does not have it) and
 * *@st its stat.
 */
static int lookup_layer(const struct hu_stack *s, size_t j, int base,
			struct lookup *lk, bool want_dir, int *found,
			struct stat *st, struct hu_error *e)
{
	const struct hu_layer *l = &s->layers[j];
	char *copy = strdup(lk->path), **comps = NULL;
	int fd = base, rc = -1;
	size_t n;

	*found = -1;
	if (!copy || !(comps = split_path(copy, &n))) {
		hu_error_set(e, ENOMEM, NULL, "out of memory");
		goto out;
	}
	for (size_t k = 0; k < n; k++) {
		bool last = k + 1 == n, stop;
		enum hu_marker kind;
		const char *target;
		char *r = NULL;
		int sub;

		if (hu_layer_probe_name(l, fd, comps[k], e) < 0)
			goto out;
		if (hu_layer_is(l, HU_FMT_OCI) && oci_whiteout(fd, comps[k]))
			lk->stop = true;	/* hides what lies below */
		if (fstatat(fd, comps[k], st, AT_SYMLINK_NOFOLLOW) < 0) {
			rc = (errno == ENOENT || errno == ENAMETOOLONG ||
			      errno == ENOTDIR) ? 0 :
				hu_error_set(e, errno, comps[k], "cannot stat");
			goto out;
		}
		if (hu_layer_probe_entry(l, fd, comps[k], st, e) < 0)
			goto out;
		kind = HU_MARK_NONE;
		if ((l->format != HU_FMT_OCI || hu_layer_half(l)) &&
		    hu_marker_classify(l, fd, comps[k], st, true, &kind,
				       &target, e) < 0)
			goto out;
		if (kind == HU_MARK_WHITEOUT || !S_ISDIR(st->st_mode)) {
			/* A whiteout or a non-directory ends the lookup;
			 * only a wanted non-directory at the end is found. */
			lk->stop = true;
			if (last && !want_dir && kind == HU_MARK_NONE)
				break;
			rc = 0;
			goto out;
		}
		if (last && !want_dir) {
			lk->stop = true;	/* a directory under a file */
			rc = 0;
			goto out;
		}
		sub = hu_open_dir_at(fd, comps[k]);
		if (sub < 0) {
			hu_error_set(e, errno, comps[k], "cannot open directory");
			goto out;
		}
		if (fd != base)
			close(fd);
		fd = sub;
		if (j == 0)
			continue;	/* the bottom: nothing below to steer */
		if (dir_stops(s, j, fd, &stop, e) < 0)
			goto out;
		if (stop) {
			lk->stop = true;
			continue;
		}
		if (read_redirect(l, fd, &r, e) < 0)
			goto out;
		if (r && hu_redirect_valid(r) &&
		    apply_redirect(lk, r, comps, n, k) < 0) {
			free(r);
			hu_error_set(e, ENOMEM, NULL, "out of memory");
			goto out;
		}
		free(r);
	}
	if (want_dir) {
		*found = fd;
		fd = base;
	} else {
		*found = openat(fd, comps[n - 1],
				O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (*found < 0) {
			hu_error_set(e, errno, comps[n - 1], "cannot open");
			goto out;
		}
	}
	rc = 0;
out:
	if (fd != base)
		close(fd);
	free(comps);
	free(copy);
	return rc;
}

static struct vlayer *vlayer_of(const struct hu_vdir *d, size_t layer)
{
	for (size_t i = 0; i < d->nd; i++)
		if (d->d[i].layer == layer)
			return &d->d[i];
	return NULL;
}

/*
 * Follow @lk down from layer @from (exclusive): in the parent's layer
 * directories while the path is relative, from each layer's root once a
 * redirect made it absolute.  Directories found join @child.
 */
static int lookup_below(struct hu_vdir *parent, struct hu_vdir *child,
			size_t from, struct lookup *lk, struct hu_error *e)
{
	const struct hu_stack *s = parent->s;

	for (size_t j = from; j-- > 0 && !lk->stop;) {
		const struct vlayer *pv = vlayer_of(parent, j);
		struct stat st;
		int base, fd;

		if (lk->abs)
			base = s->layers[j].fd;
		else if (pv)
			base = pv->fd;
		else
			continue;
		if (lookup_layer(s, j, base, lk, true, &fd, &st, e) < 0)
			return lfail(s, j, lk->abs ? NULL : parent->path, e);
		if (fd < 0)
			continue;
		if (vdir_push(child, j, fd, true) < 0) {
			close(fd);
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		}
	}
	return 0;
}

static struct hu_vdir *vdir_new(const struct hu_stack *s,
				struct hu_vdir *parent, const char *name)
{
	struct hu_vdir *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->s = s;
	d->parent = parent;
	d->path = parent ? hu_path_join(parent->path, name) : strdup("");
	if (!d->path) {
		free(d);
		return NULL;
	}
	return d;
}

int hu_vdir_open_root(const struct hu_stack *s, struct hu_vdir **out,
		      struct hu_error *e)
{
	struct hu_vdir *d = vdir_new(s, NULL, NULL);

	*out = NULL;
	if (!d)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (size_t j = s->n; j-- > 0;) {
		bool stop;

		if (vdir_push(d, j, s->layers[j].fd, false) < 0) {
			hu_vdir_close(d);
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		}
		if (j == 0)
			break;
		if (root_stops(&s->layers[j], &stop, e) < 0) {
			lfail(s, j, NULL, e);
			hu_vdir_close(d);
			return -1;
		}
		if (stop)
			break;
	}
	*out = d;
	return 0;
}

/* When @ent's xattr names were read (by the lister, or to probe a
 * deferred layer) and none is a union or overlay one, @ent carries no
 * marker: no opaque mark, redirect or metacopy to ask the layer for. */
static bool any_name(const struct hu_ventry *ent, bool (*match)(const char *))
{
	const char *names = ent->xattr_names;

	for (size_t off = 0; off < ent->xattr_names_len;
	     off += strlen(names + off) + 1)
		if (match(names + off))
			return true;
	return false;
}

static bool known_unmarked(const struct hu_ventry *ent)
{
	return ent->xattr_names && !any_name(ent, hu_xattr_is_private);
}

/* Where the layers below @ent look: its name, or where its redirect
 * points.  *@stop when nothing below counts. */
static int child_lookup(struct hu_vdir *parent, const struct hu_ventry *ent,
			int fd, struct lookup *lk, struct hu_error *e)
{
	const struct hu_layer *l = &parent->s->layers[ent->layer];
	char *comps[1], *r = NULL;
	int rc;

	lk->stop = ent->hides_lower || ent->layer == 0;
	if (lk->stop)
		return 0;
	/* An OCI layer's opaque mark is a file, not an xattr, and a layer
	 * still to be detected probes the directory. */
	if (hu_layer_is(l, HU_FMT_OCI) || l->deferred ||
	    !known_unmarked(ent)) {
		if (dir_stops(parent->s, ent->layer, fd, &lk->stop, e) < 0)
			return -1;
		if (lk->stop)
			return 0;
		if (read_redirect(l, fd, &r, e) < 0)
			return -1;
	}
	lk->path = strdup(ent->name);
	comps[0] = lk->path;
	rc = lk->path ? 0 : -1;
	if (rc == 0 && r && hu_redirect_valid(r))
		rc = apply_redirect(lk, r, comps, 1, 0);
	free(r);
	return rc < 0 ? hu_error_set(e, ENOMEM, NULL, "out of memory") : 0;
}

int hu_vdir_open_child(struct hu_vdir *parent, const struct hu_ventry *ent,
		       struct hu_vdir **out, struct hu_error *e)
{
	struct hu_vdir *d = vdir_new(parent->s, parent, ent->name);
	struct lookup lk = { 0 };
	int fd;

	*out = NULL;
	if (!d)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	fd = hu_open_dir_at(ent->dirfd, ent->name);
	if (fd < 0 || vdir_push(d, ent->layer, fd, true) < 0) {
		hu_error_set(e, fd < 0 ? errno : ENOMEM, NULL,
			     "cannot open directory");
		if (fd >= 0)
			close(fd);
		goto fail_here;
	}
	if (child_lookup(parent, ent, fd, &lk, e) < 0)
		goto fail_here;
	if (!lk.stop && lookup_below(parent, d, ent->layer, &lk, e) < 0)
		goto fail;
	free(lk.path);
	*out = d;
	return 0;
fail_here:
	vfail(d, ent->layer, e);
fail:
	free(lk.path);
	hu_vdir_close(d);
	return -1;
}

/* Close the prefetched fds not handed out. */
static void prefetch_drop(struct hu_vdir *d)
{
	for (size_t i = 0; i < d->npre; i++)
		if (d->pre[i].fd >= 0)
			close(d->pre[i].fd);
	d->npre = 0;
}

void hu_vdir_close_fds(struct hu_vdir *d)
{
	prefetch_drop(d);
	for (size_t i = 0; i < d->nd; i++)
		if (d->d[i].own) {
			close(d->d[i].fd);
			d->d[i].own = false;
			d->d[i].fd = -1;
		}
}

void hu_vdir_close(struct hu_vdir *d)
{
	if (!d)
		return;
	prefetch_drop(d);
	for (size_t i = 0; i < d->nd; i++) {
		if (d->d[i].own)
			close(d->d[i].fd);
		if (d->lists)
			hu_names_free(&d->lists[i]);
	}
	free(d->lists);
	for (size_t i = 0; i < d->nents; i++)
		if (d->ents[i].xattr_names_len)
			free((char *)d->ents[i].xattr_names);
	free(d->ents);
	free(d->d);
	free(d->path);
	free(d);
}

const char *hu_vdir_path(const struct hu_vdir *d)
{
	return d->path;
}

int hu_vdir_fd(const struct hu_vdir *d, size_t *layer)
{
	if (layer)
		*layer = d->d[0].layer;
	return d->d[0].fd;
}

bool hu_vdir_is_merged(const struct hu_vdir *d)
{
	return d->nd > 1;
}

size_t hu_vdir_width(const struct hu_vdir *d)
{
	return d->nd;
}

/* Read @ent's xattr names into it; false (names left NULL) on failure. */
static bool read_names(struct hu_ventry *ent)
{
	/* XATTR_LIST_MAX: every list fits */
	static __thread char buf[65536];
	ssize_t n = hu_listxattr_at(ent->dirfd, ent->name, buf, sizeof(buf));
	char *copy;

	if (n < 0 && errno == ENOTSUP)
		n = 0;
	if (n < 0)
		return false;
	if (n == 0) {
		ent->xattr_names = "";
		return true;
	}
	copy = malloc(n);
	if (!copy)
		return false;
	memcpy(copy, buf, n);
	ent->xattr_names = copy;	/* freed by drop_names() */
	ent->xattr_names_len = n;
	return true;
}

void hu_vdir_read_xattr_names(struct hu_vdir *d, size_t from_layer)
{
	for (size_t i = 0; i < d->nents; i++) {
		struct hu_ventry *ent = &d->ents[i];

		/* a deferred layer's files have theirs already (decide) */
		if (ent->layer >= from_layer && !ent->xattr_names)
			(void)read_names(ent);
	}
}

static int vrec_cmp(const void *pa, const void *pb)
{
	const struct vrec *a = pa, *b = pb;
	int c = strcmp(a->key, b->key);

	if (c)
		return c;
	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	return (int)a->whiteout - (int)b->whiteout;	/* real first */
}

/* A deferred layer that lists a .wh. name is settled before any of its
 * names is read. */
static int probe_names(const struct hu_vdir *d, size_t i, struct hu_error *e)
{
	const struct hu_layer *l = &d->s->layers[d->d[i].layer];
	const struct hu_names *names = &d->lists[i];

	for (size_t k = 0; k < names->n && l->deferred; k++)
		if (hu_oci_is_marker(names->v[k].name))
			return hu_layer_settle(l, e);
	return 0;
}

/* Every name of every layer directory of @d, as records. */
static int collect(struct hu_vdir *d, struct vrec **out, size_t *nout,
		   struct hu_error *e)
{
	size_t total = 0, n = 0;
	struct vrec *recs;

	d->lists = calloc(d->nd, sizeof(*d->lists));
	if (!d->lists)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (size_t i = 0; i < d->nd; i++) {
		/* A directory's own fds are read once; a layer root's fd is
		 * shared, and detection may have read it. */
		int fd = d->d[i].fd;
		int rc = d->d[i].own ?
			hu_names_read_fresh(fd, &d->lists[i], NULL, e) :
			hu_names_read(fd, &d->lists[i], NULL, e);

		if (rc < 0 || probe_names(d, i, e) < 0)
			return vfail(d, d->d[i].layer, e);
		total += d->lists[i].n;
	}
	recs = malloc((total ? total : 1) * sizeof(*recs));
	if (!recs)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (size_t i = 0; i < d->nd; i++) {
		const struct hu_layer *l = &d->s->layers[d->d[i].layer];

		for (size_t k = 0; k < d->lists[i].n; k++) {
			const char *name = d->lists[i].v[k].name;
			struct vrec r = { name, name, i, false };

			if (hu_conv_temp_name(l, name))
				continue;

			if (hu_layer_is(l, HU_FMT_OCI) &&
			    hu_oci_is_marker(name)) {
				/* OCI markers are known by name alone */
				struct hu_layer oci = *l;
				struct stat by_name = { 0 };
				enum hu_marker kind;
				const char *target;

				oci.format = HU_FMT_OCI;
				oci.conv_to = HU_FMT_AUTO;
				if (hu_marker_classify(&oci, d->d[i].fd, name,
						       &by_name, false, &kind,
						       &target, e) < 0) {
					free(recs);
					return vfail(d, l - d->s->layers, e);
				}
				if (kind == HU_MARK_OPAQUE_FILE ||
				    kind == HU_MARK_META)
					continue;
				r.key = target;
				r.whiteout = kind == HU_MARK_WHITEOUT;
			}
			recs[n++] = r;
		}
	}
	/* Per-layer lists are sorted, but OCI whiteouts change the keys:
	 * one sort of everything keeps the code obvious. */
	qsort(recs, n, sizeof(*recs), vrec_cmp);
	*out = recs;
	*nout = n;
	return 0;
}

static void drop_names(struct hu_ventry *ent)
{
	if (ent->xattr_names_len)
		free((char *)ent->xattr_names);
	ent->xattr_names = NULL;
	ent->xattr_names_len = 0;
}

/* A directory of a layer being converted in place shows the times it
 * had before (hu_layer_dir_stat). */
static int half_dir_times(int dirfd, const char *name, struct stat *st,
			  struct hu_error *e)
{
	struct timespec ts[2];
	bool found;
	int fd = hu_open_dir_at(dirfd, name), rc;

	if (fd < 0)
		return hu_error_set(e, errno, name, "cannot open directory");
	rc = hu_conv_times_read(fd, ts, &found, e);
	close(fd);
	if (rc < 0) {
		hu_error_prefix(e, name);
		return -1;
	}
	if (found) {
		st->st_atim = ts[0];
		st->st_mtim = ts[1];
	}
	return 0;
}

/*
 * Decide one name: the topmost record wins unless it is a whiteout.
 * Returns 1 with *@ent filled when the name is in the view, 0 when hidden.
 * With @keep_names, a deferred layer's regular file is probed by its
 * xattr names, which it keeps (a listxattr each, not one for the probe
 * and another for its reader).
 */
static int decide(struct hu_vdir *d, const struct vrec *g, size_t ng,
		  bool keep_names, struct hu_ventry *ent, struct hu_error *e)
{
	const struct vrec *top = &g[0];
	const struct vlayer *v = &d->d[top->rank];
	const struct hu_layer *l = &d->s->layers[v->layer];
	enum hu_marker kind = HU_MARK_NONE;
	const char *target;
	int rc;

	if (top->whiteout)
		return 0;
	if (fstatat(v->fd, top->name, &ent->st, AT_SYMLINK_NOFOLLOW) < 0) {
		hu_error_set(e, errno, top->name, "cannot stat");
		return vfail(d, v->layer, e);
	}
	ent->name = top->name;
	ent->dirfd = v->fd;
	ent->xattr_names = NULL;
	ent->xattr_names_len = 0;
	if (hu_layer_half(l) && S_ISDIR(ent->st.st_mode) &&
	    half_dir_times(v->fd, top->name, &ent->st, e) < 0)
		return vfail(d, v->layer, e);
	if (keep_names && l->deferred && S_ISREG(ent->st.st_mode) &&
	    read_names(ent))
		rc = hu_layer_probe_xattr_names(l, ent->xattr_names,
						ent->xattr_names_len, e);
	else
		rc = hu_layer_probe_entry(l, v->fd, top->name, &ent->st, e);
	if (rc == 0 && (l->format != HU_FMT_OCI || hu_layer_half(l)))
		rc = hu_marker_classify(l, v->fd, top->name, &ent->st, true,
					&kind, &target, e);
	if (rc < 0 || kind == HU_MARK_WHITEOUT) {
		drop_names(ent);
		return rc < 0 ? vfail(d, v->layer, e) : 0;
	}
	ent->name = top->key;
	ent->layer = v->layer;
	ent->hides_lower = ng > 1 && g[1].rank == top->rank && g[1].whiteout;
	return 1;
}

int hu_vdir_list(struct hu_vdir *d, const struct hu_ventry **ents, size_t *n,
		 struct hu_error *e)
{
	struct vrec *recs = NULL;
	size_t nrecs = 0;

	if (d->listed)
		goto done;
	if (collect(d, &recs, &nrecs, e) < 0)
		return -1;
	d->ents = malloc((nrecs ? nrecs : 1) * sizeof(*d->ents));
	if (!d->ents) {
		free(recs);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	for (size_t i = 0, j; i < nrecs; i = j) {
		int in;

		for (j = i + 1; j < nrecs && !strcmp(recs[j].key, recs[i].key);)
			j++;
		in = decide(d, &recs[i], j - i, true, &d->ents[d->nents], e);
		if (in < 0) {
			free(recs);
			return -1;
		}
		d->nents += in;
	}
	free(recs);
	d->listed = true;
done:
	*ents = d->ents;
	*n = d->nents;
	return 0;
}

int hu_vdir_lookup(struct hu_vdir *d, const char *name, struct hu_ventry *ent,
		   struct hu_error *e)
{
	return hu_vdir_lookup_below(d, name, d->s->n, ent, e);
}

int hu_vdir_lookup_below(struct hu_vdir *d, const char *name, size_t below,
			 struct hu_ventry *ent, struct hu_error *e)
{
	struct vrec *recs = malloc(2 * d->nd * sizeof(*recs));
	size_t n = 0;
	int rc = 0;

	if (!recs)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	/* The records collect() would make of @name, topmost first: the
	 * entry, then an OCI whiteout of it in the same layer. */
	for (size_t i = 0; i < d->nd && rc == 0; i++) {
		const struct hu_layer *l = &d->s->layers[d->d[i].layer];
		int fd = d->d[i].fd;
		bool oci_wh = false;
		struct stat st;

		if (d->d[i].layer >= below)
			continue;
		if (hu_layer_probe_name(l, fd, name, e) < 0) {
			rc = vfail(d, d->d[i].layer, e);
			break;
		}
		if (hu_conv_temp_name(l, name))
			continue;
		if (hu_layer_is(l, HU_FMT_OCI)) {
			if (hu_oci_is_marker(name))
				continue;	/* a marker, never a name */
			oci_wh = oci_whiteout(fd, name);
		}
		if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			recs[n++] = (struct vrec){ name, name, i, false };
		else if (errno != ENOENT && errno != ENAMETOOLONG) {
			hu_error_set(e, errno, name, "cannot stat");
			rc = vfail(d, d->d[i].layer, e);
		}
		if (oci_wh)
			recs[n++] = (struct vrec){ name, name, i, true };
	}
	if (rc == 0 && n > 0)
		rc = decide(d, recs, n, false, ent, e);
	free(recs);
	return rc;
}

/* The layer directory of @d in @layer, or -1. */
static int vdir_layer_fd(const struct hu_vdir *d, size_t layer)
{
	const struct vlayer *v = vlayer_of(d, layer);

	return v ? v->fd : -1;
}

int hu_vdir_layer_fd(const struct hu_vdir *d, size_t layer)
{
	return vdir_layer_fd(d, layer);
}

size_t hu_vdir_bottom_layer(const struct hu_vdir *d)
{
	return d->d[d->nd - 1].layer;
}

static int is_metacopy(const struct hu_layer *l, int fd, bool *mc,
		       struct hu_error *e)
{
	char attr[64];

	*mc = false;
	for (int i = 0; i < 2 && !*mc; i++) {
		if (!hu_layer_overlay_xattr(l, i, "metacopy", attr,
					    sizeof(attr)))
			continue;
		if (fgetxattr(fd, attr, NULL, 0) >= 0)
			*mc = true;
		else if (errno != ENODATA && errno != ENOTSUP)
			return hu_error_set(e, errno, NULL, "cannot read %s",
					    attr);
	}
	return 0;
}

/*
 * The data of a metacopy file: look its name (or its redirect) up in the
 * layers below, through further metacopy files, to a regular file.
 */
static int find_data(struct hu_vdir *d, const struct hu_ventry *ent, int fd,
		     struct hu_error *e)
{
	const struct hu_stack *s = d->s;
	struct lookup lk = { .path = strdup(ent->name) };
	char *r = NULL;
	size_t from = ent->layer;

	if (!lk.path)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (;;) {
		int base, found = -1;
		bool mc;
		struct stat st;

		if (read_redirect(&s->layers[from], fd, &r, e) < 0)
			break;
		if (r && hu_redirect_valid(r)) {
			char *comps[1] = { lk.path };
			int rc;

			/* A relative redirect names the data file in the
			 * same directory; comps[0] aliases lk.path, which
			 * apply_redirect frees only after copying. */
			rc = apply_redirect(&lk, r, comps, 1, 0);
			if (rc < 0) {
				hu_error_set(e, ENOMEM, NULL, "out of memory");
				break;
			}
		}
		free(r);
		r = NULL;
		close(fd);
		fd = -1;
		lk.stop = false;	/* a metacopy file does not stop it */
		for (size_t j = from; j-- > 0 && found < 0 && !lk.stop;) {
			base = lk.abs ? s->layers[j].fd : vdir_layer_fd(d, j);
			if (base < 0)
				continue;
			if (lookup_layer(s, j, base, &lk, false, &found,
					 &st, e) < 0) {
				lfail(s, j, lk.abs ? NULL : d->path, e);
				free(lk.path);
				return -1;
			}
			from = j;
		}
		if (found < 0) {
			free(lk.path);
			hu_error_set(e, ENOENT, ent->name,
				     "metacopy file without lower data");
			return vfail(d, ent->layer, e);
		}
		fd = found;
		if (!S_ISREG(st.st_mode))
			break;
		if (is_metacopy(&s->layers[from], fd, &mc, e) < 0)
			break;
		if (!mc) {
			free(lk.path);
			return fd;
		}
	}
	if (fd >= 0)
		close(fd);
	free(lk.path);
	free(r);
	if (!e->msg[0])
		hu_error_set(e, EIO, ent->name, "metacopy data is not a file");
	return vfail(d, ent->layer, e);
}

static bool is_metacopy_name(const char *name)
{
	return !strcmp(name, "trusted.overlay.metacopy") ||
	       !strcmp(name, "user.overlay.metacopy");
}

/* Might @ent be a metacopy file, whose data is looked up below it? */
static bool may_be_metacopy(const struct hu_stack *s,
			    const struct hu_ventry *ent)
{
	if (!S_ISREG(ent->st.st_mode) ||
	    !hu_layer_is(&s->layers[ent->layer], HU_FMT_OVERLAY))
		return false;
	return !ent->xattr_names || any_name(ent, is_metacopy_name);
}

int hu_vdir_settle_for_data(struct hu_vdir *d, struct hu_error *e)
{
	const struct hu_stack *s = d->s;

	for (size_t i = 0; i < d->nents; i++) {
		const struct hu_ventry *ent = &d->ents[i];

		if (!may_be_metacopy(s, ent))
			continue;
		for (size_t j = ent->layer; j-- > 0;)
			if (hu_layer_settle(&s->layers[j], e) < 0)
				return vfail(d, ent->layer, e);
	}
	return 0;
}

static int open_data(struct hu_vdir *d, const struct hu_ventry *ent,
		     bool *own, struct hu_error *e)
{
	const struct hu_layer *l = &d->s->layers[ent->layer];
	int fd = openat(ent->dirfd, ent->name,
			O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	bool mc;

	if (fd < 0) {
		hu_error_set(e, errno, ent->name, "cannot open");
		return vfail(d, ent->layer, e);
	}
	/* A layer still deferred has no marker on this entry, or reading it
	 * would have settled the layer; and the lister may be settling it
	 * now: ask the flag, not the format. */
	if (known_unmarked(ent) || hu_layer_is_deferred(l))
		mc = false;
	else if (is_metacopy(l, fd, &mc, e) < 0) {
		close(fd);
		return vfail(d, ent->layer, e);
	}
	if (own)
		*own = !mc || ent->layer == 0;
	if (!mc || ent->layer == 0)
		return fd;
	return find_data(d, ent, fd, e);
}

int hu_vdir_open_data(struct hu_vdir *d, const struct hu_ventry *ent,
		      bool *own, struct hu_error *e)
{
	for (size_t i = 0; i < d->npre; i++) {
		struct prefetched *p = &d->pre[i];

		if (p->ent == ent && p->fd >= 0) {
			int fd = p->fd;

			p->fd = -1;
			if (own)
				*own = p->own;
			return fd;
		}
	}
	return open_data(d, ent, own, e);
}

/*
 * A walk that reads every file meets each page-cache miss alone, one
 * read(2) at a time, and the lister soon stops, its queue full.  Opening
 * the next files with POSIX_FADV_WILLNEED sends their reads to the disk
 * together.  A window ends before a directory, so that the walk never
 * holds one below another: at most PREFETCH_MAX fds are open here at
 * any time.  A file that cannot be opened now is left to
 * hu_vdir_open_data(), which reports the error at its turn.
 */
size_t hu_vdir_prefetch(struct hu_vdir *d, size_t from)
{
	size_t i;

	prefetch_drop(d);
	if (from < d->nents && S_ISDIR(d->ents[from].st.st_mode))
		return from + 1;
	for (i = from; i < d->nents && d->npre < PREFETCH_MAX; i++) {
		const struct hu_ventry *ent = &d->ents[i];
		struct hu_error ignored = { 0 };
		bool own = false;
		int fd;

		if (S_ISDIR(ent->st.st_mode))
			break;
		if (!S_ISREG(ent->st.st_mode) || ent->st.st_size == 0)
			continue;
		fd = open_data(d, ent, &own, &ignored);
		if (fd < 0) {
			hu_error_clear(&ignored);
			continue;
		}
		/* The head only: reading on, the kernel's readahead takes
		 * over, and a large file is not read (or, when cached, its
		 * pages looked up) all at once. */
		(void)posix_fadvise(fd, 0, PREFETCH_BYTES, POSIX_FADV_WILLNEED);
		d->pre[d->npre++] = (struct prefetched){ ent, fd, own };
	}
	return i;
}
