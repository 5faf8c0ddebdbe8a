/* SPDX-License-Identifier: MIT */
/*
 * The view's lookup (the kernel's fs/overlayfs/namei.c): the layer
 * directories that make up a directory of the view, found from the top
 * down through opaque directories, whiteouts and overlay redirects; and
 * one name looked up in them.  view.h has the rules.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "layer/ldir.h"
#include "view/view.h"

/* Errors below name paths relative to a layer directory of @d. */
int view_fail(const struct hu_vdir *d, size_t layer, struct hu_error *e)
{
	hu_error_prefix(e, d->path);
	hu_error_prefix(e, d->s->layers[layer].path);
	return -1;
}

/* The same for a path relative to layer @layer's root (@rel may be NULL). */
int view_layer_fail(const struct hu_stack *s, size_t layer, const char *rel,
		    struct hu_error *e)
{
	hu_error_prefix(e, rel);
	hu_error_prefix(e, s->layers[layer].path);
	return -1;
}

const char *view_layer_path(const struct hu_vdir *d, const struct vlayer *v)
{
	return v->path ? v->path : d->path;
}

int view_problem(const struct hu_stack *s, size_t layer, enum hu_problem_id id,
		 bool stops, const char *dir, const char *name,
		 const char *detail, int err, struct hu_error *e)
{
	const struct hu_layer *l = &s->layers[layer];
	char *path = name ? hu_path_join(dir, name) : NULL;
	int rc;

	if (name && !path)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	rc = hu_problem_found(l->problems, l->report, id, stops, l->path,
			      path ? path : dir, detail, err, e);
	free(path);
	return rc;
}

/* Add layer directory @fd to @d, with its @path (taken over, may be NULL:
 * see struct vlayer); -1 (@path freed) when memory runs out. */
static int vdir_push(struct hu_vdir *d, size_t layer, int fd, bool own,
		     char *path)
{
	struct vlayer *v = realloc(d->d, (d->nd + 1) * sizeof(*v));

	if (!v) {
		free(path);
		return -1;
	}
	d->d = v;
	d->d[d->nd++] = (struct vlayer){ .layer = layer, .fd = fd, .own = own,
					 .path = path };
	return 0;
}

/* Which marker xattrs a directory holds, from one listing: most hold
 * none, and one listxattr says so where reading each name would take a
 * call a name. */
struct dir_marks {
	bool listed;		/* false: unknown, read each name */
	bool none;		/* listed, and no name at all */
	bool opaque;		/* a private *.opaque name is there */
	bool redirect;		/* a private *.redirect name is there */
};

static void dir_marks_read(const struct hu_layer *l, int fd,
			   struct dir_marks *dm)
{
	char small[1024], *list;
	ssize_t n = hu_ldir_xattr_names(l, fd, NULL, small, sizeof(small),
					&list);

	*dm = (struct dir_marks){ .listed = n >= 0, .none = n == 0 };
	for (ssize_t off = 0; off < n; off += strlen(list + off) + 1) {
		const char *a = list + off, *dot = strrchr(a, '.');

		if (!dot || !hu_xattr_is_private(a))
			continue;
		dm->opaque |= !strcmp(dot, ".opaque");
		dm->redirect |= !strcmp(dot, ".redirect");
	}
	if (list != small)
		free(list);
}

/* Does directory @fd in @layer stop the lookup of the layers below, and
 * where does its redirect (malloc'd, or NULL) send them?  @dm: what its
 * xattr names say, or NULL. */
static int dir_steers(const struct hu_stack *s, size_t layer, int fd,
		      const struct dir_marks *dm, bool *stop, char **redirect,
		      struct hu_error *e);

/* Does directory @fd in @layer stop the lookup of the layers below? */
static int dir_stops(const struct hu_stack *s, size_t layer, int fd,
		     const struct dir_marks *dm, bool *stop,
		     struct hu_error *e)
{
	const struct hu_layer *l = &s->layers[layer];
	enum hu_opaque op;
	struct stat st;

	*stop = false;
	if (hu_layer_probe_dir(l, fd, e) < 0)
		return -1;
	if (hu_layer_is(l, HU_FMT_OCI)) {
		if (hu_ldir_stat(l, fd, HU_OCI_OPAQUE, &st) == 0)
			*stop = true;
		else if (errno != ENOENT)
			return hu_error_set(e, errno, HU_OCI_OPAQUE,
					    "cannot stat");
		if (*stop || (!hu_layer_is(l, HU_FMT_UNION) &&
			      !hu_layer_is(l, HU_FMT_OVERLAY)))
			return 0;
	}
	if (dm && dm->listed && !dm->opaque)
		return 0;
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
	if (hu_ldir_stat(l, l->fd, HU_OCI_OPAQUE, &st) == 0)
		*stop = true;
	else if (errno != ENOENT)
		return hu_error_set(e, errno, HU_OCI_OPAQUE, "cannot stat");
	return 0;
}

/* The overlay.redirect of directory or file @fd, or NULL. */
int view_read_redirect(const struct hu_layer *l, int fd, char **out,
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
		n = hu_ldir_getxattr(l, fd, NULL, attr, NULL, 0);
		if (n < 0 && errno != ENODATA && errno != ENOTSUP)
			return hu_error_set(e, errno, NULL, "cannot read %s",
					    attr);
	}
	if (n < 0)
		return 0;
	v = malloc(n + 1);
	if (!v)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	n = hu_ldir_getxattr(l, fd, NULL, attr, v, n);
	if (n < 0) {
		free(v);
		return hu_error_set(e, errno, NULL, "cannot read %s", attr);
	}
	v[n] = '\0';
	*out = v;
	return 0;
}

static int dir_steers(const struct hu_stack *s, size_t layer, int fd,
		      const struct dir_marks *dm, bool *stop, char **redirect,
		      struct hu_error *e)
{
	*redirect = NULL;
	if (dir_stops(s, layer, fd, dm, stop, e) < 0)
		return -1;
	if (*stop || (dm && dm->listed && !dm->redirect))
		return 0;
	return view_read_redirect(&s->layers[layer], fd, redirect, e);
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

/*
 * Apply redirect @r met at component @k of @comps (@n components) to @lk:
 * the layers below look up the redirected path followed by the components
 * after @k.
 */
int view_apply_redirect(struct lookup *lk, const char *r, char **comps,
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
	lk->redirected = true;
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

/* hu_layer_probe_name() of layer @j, but for the bottom layer: there an
 * OCI whiteout hides nothing, and the stat of ".wh.@name" for each name
 * looked up would settle a deferred layer no sooner than its listing or
 * a marker of its own does (a marker's name it holds still settles it). */
static int probe_name(const struct hu_stack *s, size_t j, int fd,
		      const char *name, struct hu_error *e)
{
	if (j == 0 && !hu_oci_is_marker(name))
		return 0;
	return hu_layer_probe_name(&s->layers[j], fd, name, e);
}

/* Does OCI directory @fd of @l hold ".wh.@name"? */
static bool oci_whiteout(const struct hu_layer *l, int fd, const char *name)
{
	char wh[NAME_MAX + 1];
	struct stat st;

	if (!hu_oci_whiteout_name(wh, sizeof(wh), name))
		return false;
	return hu_ldir_stat(l, fd, wh, &st) == 0;
}

/* Redirect @r of directory @comps[0..@k] under @base_path in layer @j is
 * invalid: report it (NULL @base_path: not), and read on without it. */
static int redirect_invalid(const struct hu_stack *s, size_t j,
			    const char *base_path, char **comps, size_t k,
			    const char *r, struct hu_error *e)
{
	char *path = NULL;
	int rc;

	if (!base_path || !s->layers[j].problems)
		return 0;	/* no sink: ignored, as it always was */
	for (size_t i = 0; i <= k; i++) {
		char *p = hu_path_join(i ? path : base_path, comps[i]);

		free(path);
		path = p;
		if (!p)
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	rc = view_problem(s, j, HU_PB_REDIRECT_INVALID, false, path, NULL, r,
			  EINVAL, e);
	free(path);
	return rc;
}

/*
 * Look @lk up in layer @j from directory @base.  On success *@found is an
 * open fd of the final entry (or -1 when this layer does not have it) and
 * *@st its stat.
 */
int view_lookup_layer(const struct hu_stack *s, size_t j, int base,
		      const char *base_path, struct lookup *lk, bool want_dir,
		      const struct seen *known, int *found, struct stat *st,
		      struct hu_error *e)
{
	const struct hu_layer *l = &s->layers[j];
	char *copy = strdup(lk->path), **comps = NULL;
	int fd = base, rc = -1;
	size_t n;

	*found = -1;
	lk->bare = false;
	if (!copy || !(comps = split_path(copy, &n))) {
		hu_error_set(e, ENOMEM, NULL, "out of memory");
		goto out;
	}
	for (size_t k = 0; k < n; k++) {
		bool last = k + 1 == n, stop;
		struct dir_marks dm;
		enum hu_marker kind;
		const char *target;
		char *r = NULL;
		int sub;

		if (k == 0 && known) {
			/* the name lookup asked this layer already */
			if (known->oci_wh)
				lk->stop = true;
			rc = 0;
			if (!known->found)
				goto out;
			*st = known->st;
		} else {
			if (probe_name(s, j, fd, comps[k], e) < 0)
				goto out;
			if (hu_layer_is(l, HU_FMT_OCI) &&
			    oci_whiteout(l, fd, comps[k]))
				lk->stop = true;	/* hides what lies below */
			if (hu_ldir_stat(l, fd, comps[k], st) < 0) {
				rc = (errno == ENOENT || errno == ENAMETOOLONG ||
				      errno == ENOTDIR) ? 0 :
					hu_error_set(e, errno, comps[k],
						     "cannot stat");
				goto out;
			}
		}
		rc = -1;
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
		sub = hu_ldir_open(l, fd, comps[k]);
		if (sub < 0) {
			hu_error_set(e, errno, comps[k], "cannot open directory");
			goto out;
		}
		if (fd != base)
			hu_ldir_close(l, fd);
		fd = sub;
		if (j == 0)
			continue;	/* the bottom: nothing below to steer */
		dir_marks_read(l, fd, &dm);
		lk->bare = last && dm.none;
		if (dir_steers(s, j, fd, &dm, &stop, &r, e) < 0)
			goto out;
		if (stop) {
			lk->stop = true;
			continue;
		}
		if (r && !hu_redirect_valid(r) &&
		    redirect_invalid(s, j, base_path, comps, k, r, e) < 0) {
			free(r);
			goto out;
		}
		if (r && hu_redirect_valid(r) &&
		    view_apply_redirect(lk, r, comps, n, k) < 0) {
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
		*found = hu_ldir_open_data(l, fd, comps[n - 1], O_RDONLY, e);
		if (*found < 0)
			goto out;
	}
	rc = 0;
out:
	if (fd != base)
		hu_ldir_close(l, fd);
	free(comps);
	free(copy);
	return rc;
}

struct vlayer *view_vlayer_of(const struct hu_vdir *d, size_t layer)
{
	for (size_t i = 0; i < d->nd; i++)
		if (d->d[i].layer == layer)
			return &d->d[i];
	return NULL;
}

int hu_vdir_layer_fd(const struct hu_vdir *d, size_t layer)
{
	const struct vlayer *v = view_vlayer_of(d, layer);

	return v ? v->fd : -1;
}

int hu_vdir_join(struct hu_vdir *d, size_t layer, const char *name,
		 struct hu_error *e)
{
	const struct vlayer *pv = d->parent ?
		view_vlayer_of(d->parent, layer) : NULL;
	struct vlayer joined;
	size_t at = 0;
	int fd;

	if (!pv || pv->path || d->lists || view_vlayer_of(d, layer))
		return 0;
	for (size_t i = 0; i < d->nd; i++) {
		if (d->d[i].path)
			return 0;	/* a redirect steers the lookup */
		if (d->d[i].layer > layer)
			at = i + 1;
	}
	if (at == 0 || at == d->nd)
		return 0;	/* not between two of @d's directories */
	fd = hu_ldir_open(&d->s->layers[layer], pv->fd, name);
	if (fd < 0)
		return hu_error_set(e, errno, name, "cannot open directory");
	if (vdir_push(d, layer, fd, true, NULL) < 0) {
		hu_ldir_close(&d->s->layers[layer], fd);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	/* pushed last: moved up to its place, topmost first */
	joined = d->d[d->nd - 1];
	memmove(&d->d[at + 1], &d->d[at], (d->nd - 1 - at) * sizeof(joined));
	d->d[at] = joined;
	/* what a lookup saw is one per layer directory: made anew */
	free(d->seen);
	d->seen = NULL;
	d->seen_name[0] = '\0';
	return 1;
}

bool hu_vdir_layer_bare(const struct hu_vdir *d, size_t layer)
{
	const struct vlayer *v = view_vlayer_of(d, layer);

	return v && v->bare;
}

const struct stat *hu_vdir_layer_stat(const struct hu_vdir *d, size_t layer)
{
	const struct vlayer *v = view_vlayer_of(d, layer);

	return v && v->has_st ? &v->st : NULL;
}

size_t hu_vdir_bottom_layer(const struct hu_vdir *d)
{
	return d->d[d->nd - 1].layer;
}

/* The path, relative to its layer's root, of the directory @lk finds
 * from @base_path (@pv's, or the root's), into *@out: NULL when it is
 * @child's path, as it is unless a redirect moved the lookup. */
static int lookup_path(const struct hu_vdir *child, const struct vlayer *pv,
		       const struct lookup *lk, const char *base_path,
		       char **out)
{
	*out = NULL;
	if (!lk->abs && !lk->redirected && !pv->path)
		return 0;
	*out = hu_path_join(base_path, lk->path);
	if (!*out)
		return -1;
	if (strcmp(*out, child->path) == 0) {
		free(*out);
		*out = NULL;
	}
	return 0;
}

int view_complete(struct hu_vdir *d, struct hu_error *e)
{
	struct seen *seen;
	int fd;

	if (!d->bottom_pending)
		return 0;
	d->bottom_pending = false;
	fd = hu_ldir_open_beneath(&d->s->layers[0], d->s->layers[0].fd,
				  d->path);
	if (fd < 0) {
		if (errno == ENOENT || errno == ENOTDIR ||
		    errno == ENAMETOOLONG)
			return 0;	/* the bottom layer has none */
		hu_error_set(e, errno, NULL, "cannot open directory");
		return view_fail(d, 0, e);
	}
	if (vdir_push(d, 0, fd, true, NULL) < 0) {
		hu_ldir_close(&d->s->layers[0], fd);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	/* what a lookup saw is one per layer directory: the new one, the
	 * last, asked nothing yet */
	if (!d->seen)
		return 0;
	seen = realloc(d->seen, d->nd * sizeof(*seen));
	if (!seen) {
		free(d->seen);
		d->seen = NULL;
		d->seen_name[0] = '\0';
		return 0;
	}
	seen[d->nd - 1] = (struct seen){ 0 };
	d->seen = seen;
	return 0;
}

/* May @child, whose lookup @lk is about to ask the bottom layer, leave
 * it for later (hu_vdir_open_child_lazy())?  Only where it merges
 * already, and where the bottom's directory is found by its own path from
 * the layer's root as the lookup would find it: its parent's is (or will
 * be) at the parent's path, nothing redirected.  In the bottom layer a
 * directory steers nothing, and in a deferred one only an OCI marker's
 * name is probed (probe_name()): such a name is looked up now. */
static bool bottom_can_wait(const struct hu_vdir *parent,
			    const struct hu_vdir *child,
			    const struct lookup *lk)
{
	const struct hu_layer *l = &parent->s->layers[0];
	const struct vlayer *pv = view_vlayer_of(parent, 0);

	if (child->nd < 2 || lk->abs || lk->redirected || child->d[0].path)
		return false;
	if (!parent->bottom_pending && (!pv || pv->path))
		return false;
	return !hu_layer_half(l) && !hu_oci_is_marker(lk->path);
}

/*
 * Follow @lk down from layer @from (exclusive): in the parent's layer
 * directories while the path is relative, from each layer's root once a
 * redirect made it absolute.  Directories found join @child.  With
 * @use_seen, what the parent's last name lookup saw is not asked again;
 * with @lazy, the bottom layer may wait (bottom_can_wait()).
 */
static int lookup_below(struct hu_vdir *parent, struct hu_vdir *child,
			size_t from, bool use_seen, bool lazy,
			struct lookup *lk, struct hu_error *e)
{
	const struct hu_stack *s = parent->s;

	for (size_t j = from; j-- > 0 && !lk->stop;) {
		const struct vlayer *pv;
		const struct seen *known = NULL;
		const char *base_path;
		struct stat st;
		char *path;
		int base, fd;

		if (j == 0 && lazy && bottom_can_wait(parent, child, lk)) {
			child->bottom_pending = true;
			break;
		}
		if (j == 0 && view_complete(parent, e) < 0)
			return -1;
		pv = view_vlayer_of(parent, j);
		if (lk->abs) {
			base = s->layers[j].fd;
			base_path = "";
		} else if (pv) {
			base = pv->fd;
			base_path = view_layer_path(parent, pv);
			/* the name the lookup asked, not moved by a redirect */
			if (use_seen && parent->seen && !lk->redirected &&
			    parent->seen[pv - parent->d].looked)
				known = &parent->seen[pv - parent->d];
		} else {
			continue;
		}
		/* before the lookup, which may redirect @lk further */
		if (lookup_path(child, pv, lk, base_path, &path) < 0)
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		if (view_lookup_layer(s, j, base, base_path, lk, true, known,
				      &fd, &st, e) < 0) {
			free(path);
			return view_layer_fail(s, j,
					       lk->abs ? NULL : parent->path, e);
		}
		if (fd < 0) {
			free(path);
			continue;
		}
		if (vdir_push(child, j, fd, true, path) < 0) {
			hu_ldir_close(&s->layers[j], fd);
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		}
		child->d[child->nd - 1].bare = lk->bare;
		child->d[child->nd - 1].st = st;
		child->d[child->nd - 1].has_st = true;
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

const char *hu_vdir_layer_path(const struct hu_vdir *d, size_t layer)
{
	const struct vlayer *v = view_vlayer_of(d, layer);

	return v ? view_layer_path(d, v) : NULL;
}

/* Do @a and @b hold the same directories (layer and inode) of the layers
 * beneath @below?  @b holds none from @below up. */
static int same_below(const struct hu_vdir *a, const struct hu_vdir *b,
		      size_t below, struct hu_error *e)
{
	size_t n = 0;

	for (size_t i = 0; i < a->nd; i++) {
		const struct vlayer *v = &a->d[i], *w;
		struct stat sa, sb;

		if (v->layer >= below)
			continue;
		n++;
		w = view_vlayer_of(b, v->layer);
		if (!w)
			return 0;
		if (hu_ldir_stat(&a->s->layers[v->layer], v->fd, NULL,
				 &sa) < 0 ||
		    hu_ldir_stat(&b->s->layers[w->layer], w->fd, NULL,
				 &sb) < 0) {
			hu_error_set(e, errno, NULL, "cannot stat");
			return view_fail(a, v->layer, e);
		}
		if (sa.st_ino != sb.st_ino || sa.st_dev != sb.st_dev)
			return 0;
	}
	return n == b->nd;
}

int hu_vdir_redirect_keeps(struct hu_vdir *d, size_t below, const char *r,
			   struct hu_error *e)
{
	struct lookup lk = { .abs = true, .redirected = true };
	struct hu_vdir *probe;
	int rc;

	if (!hu_redirect_valid(r) || r[0] != '/')
		return 0;
	probe = vdir_new(d->s, NULL, NULL);
	lk.path = strdup(r + 1);
	if (!probe || !lk.path) {
		hu_vdir_close(probe);
		free(lk.path);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	rc = lookup_below(d, probe, below, false, false, &lk, e);
	if (rc == 0)
		rc = same_below(d, probe, below, e);
	hu_vdir_close(probe);
	free(lk.path);
	return rc;
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

		if (vdir_push(d, j, s->layers[j].fd, false, NULL) < 0) {
			hu_vdir_close(d);
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		}
		if (j == 0)
			break;
		if (root_stops(&s->layers[j], &stop, e) < 0) {
			view_layer_fail(s, j, NULL, e);
			hu_vdir_close(d);
			return -1;
		}
		if (stop)
			break;
	}
	*out = d;
	return 0;
}

/* Where the layers below @ent look: its name, or where its redirect
 * points.  *@stop when nothing below counts.  @here: @ent's path in its
 * layer. */
static int child_lookup(struct hu_vdir *parent, const struct hu_ventry *ent,
			int fd, const char *here, struct lookup *lk,
			bool *bare, struct hu_error *e)
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
	    !view_known_unmarked(ent)) {
		struct dir_marks dm = { 0 };

		/* names the lister read ahead show some marker: read them */
		if (!ent->xattr_names)
			dir_marks_read(l, fd, &dm);
		*bare = dm.none;
		if (dir_steers(parent->s, ent->layer, fd, &dm, &lk->stop, &r,
			       e) < 0)
			return -1;
		if (lk->stop)
			return 0;
	}
	if (r && !hu_redirect_valid(r) &&
	    view_problem(parent->s, ent->layer, HU_PB_REDIRECT_INVALID, false,
			 here, NULL, r, EINVAL, e) < 0) {
		free(r);
		return -1;
	}
	lk->path = strdup(ent->name);
	comps[0] = lk->path;
	rc = lk->path ? 0 : -1;
	if (rc == 0 && r && hu_redirect_valid(r))
		rc = view_apply_redirect(lk, r, comps, 1, 0);
	free(r);
	return rc < 0 ? hu_error_set(e, ENOMEM, NULL, "out of memory") : 0;
}

/* @ent's path in its layer, for @d: NULL when it is @d's path. */
static int entry_path(const struct hu_vdir *parent, const struct hu_ventry *ent,
		      char **out)
{
	const struct vlayer *pv = view_vlayer_of(parent, ent->layer);

	*out = NULL;
	if (!pv || !pv->path)
		return 0;
	*out = hu_path_join(pv->path, ent->name);
	return *out ? 0 : -1;
}

/* Did the last name lookup in @parent find @ent, so that what it saw of
 * each layer can be used?  Once (the caller may change the layers
 * after). */
static bool seen_for(struct hu_vdir *parent, const struct hu_ventry *ent)
{
	const struct vlayer *v = view_vlayer_of(parent, ent->layer);
	const struct seen *at;
	bool same = parent->seen && v && !strcmp(parent->seen_name, ent->name);

	parent->seen_name[0] = '\0';
	if (!same)
		return false;
	at = &parent->seen[v - parent->d];
	return at->found && at->st.st_ino == ent->st.st_ino &&
	       at->st.st_dev == ent->st.st_dev;
}

static int open_child(struct hu_vdir *parent, const struct hu_ventry *ent,
		      bool lazy, struct hu_vdir **out, struct hu_error *e)
{
	bool seen = seen_for(parent, ent);
	const struct hu_layer *l = &parent->s->layers[ent->layer];
	struct hu_vdir *d = vdir_new(parent->s, parent, ent->name);
	struct lookup lk = { 0 };
	char *path;
	int fd;

	*out = NULL;
	if (!d)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	if (entry_path(parent, ent, &path) < 0) {
		hu_error_set(e, ENOMEM, NULL, "out of memory");
		goto fail_here;
	}
	fd = hu_ldir_open(l, ent->dirfd, ent->name);
	if (fd < 0 || vdir_push(d, ent->layer, fd, true, path) < 0) {
		hu_error_set(e, fd < 0 ? errno : ENOMEM, NULL,
			     "cannot open directory");
		if (fd >= 0)
			hu_ldir_close(l, fd);
		else
			free(path);
		goto fail_here;
	}
	if (child_lookup(parent, ent, fd, view_layer_path(d, &d->d[0]), &lk,
			 &d->d[0].bare, e) < 0)
		goto fail_here;
	if (!lk.stop &&
	    lookup_below(parent, d, ent->layer, seen, lazy, &lk, e) < 0)
		goto fail;
	free(lk.path);
	*out = d;
	return 0;
fail_here:
	view_fail(d, ent->layer, e);
fail:
	free(lk.path);
	hu_vdir_close(d);
	return -1;
}

int hu_vdir_open_child(struct hu_vdir *parent, const struct hu_ventry *ent,
		       struct hu_vdir **out, struct hu_error *e)
{
	return open_child(parent, ent, false, out, e);
}

int hu_vdir_open_child_lazy(struct hu_vdir *parent,
			    const struct hu_ventry *ent, struct hu_vdir **out,
			    struct hu_error *e)
{
	return open_child(parent, ent, true, out, e);
}

void hu_vdir_close(struct hu_vdir *d)
{
	if (!d)
		return;
	view_prefetch_drop(d);
	for (size_t i = 0; i < d->nd; i++) {
		free(d->d[i].path);
		if (d->d[i].own)
			hu_ldir_close(&d->s->layers[d->d[i].layer],
				      d->d[i].fd);
		if (d->lists)
			hu_names_free(&d->lists[i]);
	}
	free(d->lists);
	free(d->seen);
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

struct hu_layer *hu_vdir_layer(const struct hu_vdir *d,
			       const struct hu_ventry *ent)
{
	return &d->s->layers[ent->layer];
}

int hu_vdir_fd(const struct hu_vdir *d, size_t *layer)
{
	if (layer)
		*layer = d->d[0].layer;
	return d->d[0].fd;
}

int hu_vdir_stat(const struct hu_vdir *d, struct stat *st)
{
	return hu_ldir_stat(&d->s->layers[d->d[0].layer], d->d[0].fd, NULL,
			    st);
}

bool hu_vdir_is_merged(const struct hu_vdir *d)
{
	return d->nd > 1;
}

size_t hu_vdir_width(const struct hu_vdir *d)
{
	return d->nd;
}

int view_name_records(struct hu_vdir *d, const char *name, size_t below,
		      struct vrec *recs, size_t *n, struct hu_error *e)
{
	struct seen none = { 0 }, *seen = &none;
	int rc = 0;

	*n = 0;
	d->seen_name[0] = '\0';
	if (!d->seen)
		d->seen = malloc(d->nd * sizeof(*d->seen));
	if (d->seen && strlen(name) < sizeof(d->seen_name))
		strcpy(d->seen_name, name);	/* else nothing is kept */
	if (d->seen)
		memset(d->seen, 0, d->nd * sizeof(*d->seen));
	/* The topmost layer that has the name (or its OCI whiteout) decides
	 * it: the layers below are not asked. */
	for (size_t i = 0; *n == 0 && rc == 0; i++) {
		const struct hu_layer *l;
		bool oci_wh = false;
		int fd;

		if (i == d->nd) {
			if (!d->bottom_pending || below == 0)
				break;
			rc = view_complete(d, e);
			if (rc < 0 || i == d->nd)
				break;
		}
		l = &d->s->layers[d->d[i].layer];
		fd = d->d[i].fd;
		/* view_complete() may have moved or dropped d->seen */
		seen = d->seen ? &d->seen[i] : &none;
		*seen = (struct seen){ 0 };
		if (d->d[i].layer >= below)
			continue;
		if (probe_name(d->s, d->d[i].layer, fd, name, e) < 0) {
			rc = view_fail(d, d->d[i].layer, e);
			break;
		}
		if (hu_conv_temp_name(l, name))
			continue;
		if (hu_layer_is(l, HU_FMT_OCI)) {
			if (hu_oci_is_marker(name))
				continue;	/* a marker, never a name */
			oci_wh = oci_whiteout(l, fd, name);
		}
		if (hu_ldir_stat(l, fd, name, &seen->st) == 0) {
			recs[(*n)++] = (struct vrec){ name, name, i, false };
			seen->found = true;
		} else if (errno != ENOENT && errno != ENAMETOOLONG) {
			hu_error_set(e, errno, name, "cannot stat");
			rc = view_fail(d, d->d[i].layer, e);
		}
		seen->looked = rc == 0;
		seen->oci_wh = oci_wh;
		if (oci_wh)
			recs[(*n)++] = (struct vrec){ name, name, i, true };
	}
	if (rc < 0)
		d->seen_name[0] = '\0';
	return rc;
}
