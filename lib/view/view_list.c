/* SPDX-License-Identifier: MIT */
/*
 * The view's listing (the kernel's fs/overlayfs/readdir.c): the merged,
 * sorted entries of a directory of the view, each name decided by its
 * topmost record; one name decided alone (hu_vdir_lookup); the xattr
 * names of the entries, read ahead for their readers.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layer/ldir.h"
#include "view/view.h"

/* When @ent's xattr names were read (by the lister, or to probe a
 * deferred layer) and none is a union or overlay one, @ent carries no
 * marker: no opaque mark, redirect or metacopy to ask the layer for. */
bool view_any_name(const struct hu_ventry *ent, bool (*match)(const char *))
{
	const char *names = ent->xattr_names;

	for (size_t off = 0; off < ent->xattr_names_len;
	     off += strlen(names + off) + 1)
		if (match(names + off))
			return true;
	return false;
}

bool view_known_unmarked(const struct hu_ventry *ent)
{
	return ent->xattr_names && !view_any_name(ent, hu_xattr_is_private);
}

/* Read @ent's xattr names into it; false (names left NULL) on failure. */
static bool read_names(const struct hu_layer *l, struct hu_ventry *ent)
{
	/* XATTR_LIST_MAX: every list fits */
	static __thread char buf[65536];
	char *list, *copy;
	ssize_t n = hu_ldir_xattr_names(l, ent->dirfd, ent->name, buf,
					sizeof(buf), &list);

	if (n < 0)
		return false;
	if (n == 0) {
		ent->xattr_names = "";
		return true;
	}
	copy = list != buf ? list : malloc(n);
	if (!copy)
		return false;
	if (copy != list)
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
			(void)read_names(&d->s->layers[ent->layer], ent);
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

/* Is @name of layer directory @i of @d an OCI whiteout that hides nothing
 * (".wh.", ".wh..", ".wh...")?  With a sink it is reported, and neither
 * shown nor hiding anything: 1 (skip it), or -1 when the sink stops.
 * Without one, 0: classifying it fails, as it always did. */
static int oci_hides_nothing(struct hu_vdir *d, size_t i, const char *name,
			     struct hu_error *e)
{
	const struct vlayer *v = &d->d[i];
	const char *hidden = hu_oci_hidden(name);

	if (!hidden || !hu_oci_hides_nothing(hidden) ||
	    !d->s->layers[v->layer].problems)
		return 0;
	if (view_problem(d->s, v->layer, HU_PB_OCI_WHITEOUT_INVALID, true,
			 view_layer_path(d, v), name, NULL, 0, e) < 0)
		return -1;
	return 1;
}

/* OCI marker @r->name of layer directory @i of @d, known by its name
 * alone: 1 with @r the whiteout record it makes, 0 when it makes none
 * (an opaque file, AUFS metadata, a whiteout hiding nothing reported). */
static int oci_record(struct hu_vdir *d, size_t i, struct vrec *r,
		      struct hu_error *e)
{
	struct hu_layer oci = d->s->layers[d->d[i].layer];
	struct stat by_name = { 0 };
	enum hu_marker kind;
	const char *target;
	int rc = oci_hides_nothing(d, i, r->name, e);

	if (rc > 0)
		return 0;
	oci.format = HU_FMT_OCI;
	oci.conv_to = HU_FMT_AUTO;
	if (rc < 0 || hu_marker_classify(&oci, d->d[i].fd, r->name, &by_name,
					 false, &kind, &target, e) < 0)
		return view_fail(d, d->d[i].layer, e);
	if (kind == HU_MARK_OPAQUE_FILE || kind == HU_MARK_META)
		return 0;
	r->key = target;
	r->whiteout = kind == HU_MARK_WHITEOUT;
	return 1;
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
		const struct hu_layer *l = &d->s->layers[d->d[i].layer];
		int rc = hu_layer_names_read(l, d->d[i].fd, d->d[i].own,
					     &d->lists[i], NULL, e);

		if (rc < 0 || probe_names(d, i, e) < 0)
			return view_fail(d, d->d[i].layer, e);
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
				int rc = oci_record(d, i, &r, e);

				if (rc < 0) {
					free(recs);
					return -1;
				}
				if (rc == 0)
					continue;
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
		  bool keep_names, const struct stat *known,
		  struct hu_ventry *ent, struct hu_error *e)
{
	const struct vrec *top = &g[0];
	const struct vlayer *v = &d->d[top->rank];
	const struct hu_layer *l = &d->s->layers[v->layer];
	enum hu_marker kind = HU_MARK_NONE;
	const char *target;
	int rc;

	if (top->whiteout)
		return 0;
	if (known)
		ent->st = *known;
	else if (hu_ldir_stat(l, v->fd, top->name, &ent->st) < 0) {
		hu_error_set(e, errno, top->name, "cannot stat");
		return view_fail(d, v->layer, e);
	}
	ent->name = top->name;
	ent->dirfd = v->fd;
	ent->xattr_names = NULL;
	ent->xattr_names_len = 0;
	if (hu_layer_half(l) && S_ISDIR(ent->st.st_mode) &&
	    half_dir_times(v->fd, top->name, &ent->st, e) < 0)
		return view_fail(d, v->layer, e);
	if (keep_names && l->deferred && S_ISREG(ent->st.st_mode) &&
	    read_names(l, ent))
		rc = hu_layer_probe_xattr_names(l, ent->xattr_names,
						ent->xattr_names_len, e);
	else
		rc = hu_layer_probe_entry(l, v->fd, top->name, &ent->st, e);
	if (rc == 0 && (l->format != HU_FMT_OCI || hu_layer_half(l)))
		rc = hu_marker_classify(l, v->fd, top->name, &ent->st, true,
					&kind, &target, e);
	if (rc < 0 || kind == HU_MARK_WHITEOUT) {
		drop_names(ent);
		return rc < 0 ? view_fail(d, v->layer, e) : 0;
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
	if (view_complete(d, e) < 0 || collect(d, &recs, &nrecs, e) < 0)
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
		in = decide(d, &recs[i], j - i, true, NULL, &d->ents[d->nents],
			    e);
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
	/* room for the bottom layer's records too, if it is still to be
	 * looked up */
	struct vrec *recs = malloc(2 * (d->nd + 1) * sizeof(*recs));
	size_t n = 0;
	int rc;

	if (!recs)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	rc = view_name_records(d, name, below, recs, &n, e);
	/* the topmost record's stat, just taken */
	if (rc == 0 && n > 0)
		rc = decide(d, recs, n, false,
			    d->seen && d->seen_name[0] && !recs[0].whiteout ?
			    &d->seen[recs[0].rank].st : NULL, ent, e);
	free(recs);
	return rc;
}
