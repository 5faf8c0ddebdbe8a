/* SPDX-License-Identifier: MIT */
/*
 * diff: the changes from an old view to a new one, in canonical order.
 *
 * Layered (the default): the new view is the whole stack, the old one its
 * bottom @base layers.  Both share those layers, so an entry that comes
 * from one of them, looked up along the same path, is the same in both:
 * the walk descends only into the directories the upper layers have, and
 * costs what the change costs, not what the image does.  Where an upper
 * directory carries an overlay redirect the layers beneath are looked up
 * elsewhere: from there down, entries are compared by identity (layer,
 * device, inode), and a directory reached by a redirect is a new one,
 * listed with all its contents when they are asked for.
 *
 * With one upper layer (base n-1), the new side of such a directory lists
 * only the upper layer's own entries (the upper layer's own view of it,
 * plus its raw names for the whiteouts), and the old side is not listed
 * at all: each of those names is looked up in it, so the lower layers are
 * read where the upper one touches them (an opaque directory excepted:
 * its old listing says what it deletes).  HUNION_DIFF_SLOW=1 in the
 * environment lists the whole new view instead, as with several upper
 * layers; the kernel test checks that both walks agree.
 *
 * Trees (o->old): two views that share nothing; every directory is
 * walked and every entry compared.
 *
 * In each directory the deletions come first (one pass over both sorted
 * listings), then the additions and modifications, each directory before
 * its contents: the order an OCI layer wants its whiteouts in.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "diff/changes.h"
#include "common/linkmap.h"

int chg_nomem(struct hu_error *e)
{
	return hu_error_set(e, ENOMEM, NULL, "out of memory");
}

static void seen(struct chg_walk *w)
{
	hu_report_progress(w->report, ++w->seen);
}

/* Change @c, named @name in the current directory, to @fn. */
static int call(struct chg_walk *w, chg_fn fn, struct hu_change *c,
		const char *name, struct hu_error *e)
{
	size_t saved;
	int rc;

	if (hu_pathbuf_push(&w->path, name, &saved) < 0)
		return chg_nomem(e);
	c->path = w->path.s;
	rc = fn(w->ctx, c, e);
	hu_pathbuf_pop(&w->path, saved);
	return rc;
}

static int emit(struct chg_walk *w, enum hu_change_kind kind,
		struct hu_vdir *dir, const struct hu_ventry *ent,
		const char *name, const struct stat *old, unsigned what,
		bool opaque, struct hu_error *e)
{
	if (hu_interrupt_check(e) < 0)
		return -1;
	struct hu_change c = { kind, NULL, ent, dir, old, what, opaque };

	return call(w, w->fn, &c, name, e);
}

/* New entry @ne of @dir, equal to old @oe, is left out.  Another name of
 * its inode may be written all the same (a new hard link to a copy-up
 * that changed nothing): a sink that asks hears of it. */
static int unchanged(struct chg_walk *w, struct hu_vdir *dir,
		     const struct hu_ventry *ne, const struct hu_ventry *oe,
		     struct hu_error *e)
{
	struct hu_change c = { HU_CHG_MODIFY, NULL, ne, dir, &oe->st, 0,
			       false };

	if (!w->f->same || !hu_linkmap_shared(&ne->st))
		return 0;
	return call(w, w->f->same, &c, ne->name, e);
}

static int emit_tree(struct chg_walk *w, struct hu_vdir *parent,
		     const struct hu_ventry *ent, enum hu_change_kind kind,
		     struct hu_error *e);

/* Every entry of @sd and below as @kind: A from the new view, D from
 * the old. */
static int emit_list(struct chg_walk *w, const struct chg_dir *sd,
		     enum hu_change_kind kind, struct hu_error *e)
{
	bool add = kind == HU_CHG_ADD;

	for (size_t i = 0; i < sd->n; i++) {
		const struct hu_ventry *ce = &sd->ents[i];

		seen(w);
		if (emit(w, kind, add ? sd->d : NULL, add ? ce : NULL,
			 ce->name, add ? NULL : &ce->st, 0, false, e) < 0)
			return -1;
		if (S_ISDIR(ce->st.st_mode) &&
		    emit_tree(w, sd->d, ce, kind, e) < 0)
			return -1;
	}
	return 0;
}

static int emit_tree(struct chg_walk *w, struct hu_vdir *parent,
		     const struct hu_ventry *ent, enum hu_change_kind kind,
		     struct hu_error *e)
{
	struct hu_vdir *d;
	struct chg_dir sd;
	size_t saved;
	int rc = -1;

	if (hu_vdir_open_child(parent, ent, &d, e) < 0)
		return -1;
	if (chg_side_list(&sd, d, e) < 0)
		goto out;
	if (hu_pathbuf_push(&w->path, ent->name, &saved) < 0) {
		chg_nomem(e);
		goto out;
	}
	rc = emit_list(w, &sd, kind, e);
	hu_pathbuf_pop(&w->path, saved);
out:
	hu_vdir_close(d);
	return rc;
}

/* ---- the walk ----------------------------------------------------------- */

static int diff_dir(struct chg_walk *w, struct chg_dir *ns, struct chg_dir *os,
		    bool same, struct chg_uppers *u, struct hu_error *e);

/*
 * Is new directory @nd, which the upper layers provide, alone, nothing
 * beneath showing through (opaque, or redirected to nothing)?  With one
 * upper layer that is "not merged".  With more, the view does not say
 * whether a merge reaches the old layers: never, then; the deletions say
 * what is gone all the same.  A lone directory replaces the old one when
 * that has entries.
 */
static bool lone(const struct chg_walk *w, struct hu_vdir *nd)
{
	return w->layered && w->base + 1 == w->news->n &&
	       !hu_vdir_is_merged(nd);
}

/* The old side of a directory whose new side is fast (@fast) or not: a
 * lone new directory needs the old listing, to delete what it hides. */
static int old_side(struct chg_walk *w, struct chg_dir *os,
		    struct hu_vdir *od, bool fast, bool alone,
		    struct hu_error *e)
{
	if (fast && !alone) {
		chg_side_lookup(os, od);
		return 0;
	}
	return chg_side_list(os, od, e);
}

static bool same_inode(const struct hu_ventry *a, const struct hu_ventry *b)
{
	return a->st.st_dev == b->st.st_dev && a->st.st_ino == b->st.st_ino;
}

/*
 * A directory in both views: M when its metadata differ (@what) or it
 * replaces the old one (opaque), then its contents.  @same: the layers
 * beneath are looked up along the same path in both views below it, as
 * far as the parent knows.  @uent: the entry in the upper layer's own
 * view @ud, when the parent is a fast side.
 */
static int dirs(struct chg_walk *w, const struct chg_side *n,
		const struct chg_side *o, unsigned what, bool same,
		struct chg_uppers *u, struct hu_vdir *ud,
		const struct hu_ventry *uent, struct hu_error *e)
{
	bool upper = w->layered && n->ent->layer >= w->base;
	struct hu_vdir *nd = NULL, *od = NULL, *cud = NULL;
	struct chg_uppers cu = { 0 };
	bool redirected = false, alone, opaque;
	struct chg_dir ns, os;
	size_t saved;
	int rc = -1;

	memset(&ns, 0, sizeof(ns));
	if (hu_vdir_open_child(n->d, n->ent, &nd, e) < 0 ||
	    hu_vdir_open_child(o->d, o->ent, &od, e) < 0)
		goto out;
	same = same && upper;
	if (same && u && chg_uppers_child(w, u, n->ent->name, &cu,
					  &redirected, e) < 0)
		goto out;
	same = same && !redirected;
	alone = upper && lone(w, nd);
	if (old_side(w, &os, od, same && uent, alone, e) < 0)
		goto out;
	opaque = alone && os.n > 0;
	if (same && ud && uent && !(opaque && w->f->replace_opaque)) {
		if (hu_vdir_open_child(ud, uent, &cud, e) < 0 ||
		    chg_side_fast(w, &ns, nd, cud, e) < 0)
			goto out;
	} else if (chg_side_list(&ns, nd, e) < 0) {
		goto out;
	}
	if ((what || opaque) && emit(w, HU_CHG_MODIFY, n->d, n->ent,
				     n->ent->name, &o->ent->st, what, opaque,
				     e) < 0)
		goto out;
	if (hu_pathbuf_push(&w->path, n->ent->name, &saved) < 0) {
		chg_nomem(e);
		goto out;
	}
	if (opaque && w->f->replace_opaque)
		rc = emit_list(w, &ns, HU_CHG_ADD, e);
	else
		rc = diff_dir(w, &ns, &os, same, cu.fd ? &cu : NULL, e);
	hu_pathbuf_pop(&w->path, saved);
out:
	chg_side_free(&ns);
	chg_uppers_close(w, &cu);
	hu_vdir_close(cud);
	hu_vdir_close(od);
	hu_vdir_close(nd);
	return rc;
}

/* A name in both views. */
static int both(struct chg_walk *w, const struct chg_dir *ns,
		const struct hu_ventry *ne, const struct chg_dir *os,
		const struct hu_ventry *oe, bool same, struct chg_uppers *u,
		struct hu_error *e)
{
	struct chg_side n = { w->news, ns->d, ne }, o = { w->olds, os->d, oe };
	bool isdir = S_ISDIR(ne->st.st_mode);
	unsigned what;

	if (w->layered && ne->layer < w->base) {
		/* Not the upper layers' own: the same entry, unless a
		 * redirect above made the lookup go elsewhere. */
		if (same)
			return 0;
		if (same_inode(ne, oe) && ne->layer == oe->layer)
			return isdir ? dirs(w, &n, &o, 0, false, NULL, NULL,
					    NULL, e) : 0;
	} else if (!w->layered && !isdir && same_inode(ne, oe)) {
		return unchanged(w, ns->d, ne, oe, e);	/* one inode */
	}
	if (chg_compare(&n, &o, w->how, &what, e) < 0)
		return -1;
	if (what & HU_DIFF_TYPE) {
		/* Nothing beneath a retyped path is compared: an old
		 * directory's contents are gone with it, a new one's are
		 * all new. */
		if (emit(w, HU_CHG_MODIFY, ns->d, ne, ne->name, &oe->st, what,
			 false, e) < 0)
			return -1;
		if (S_ISDIR(oe->st.st_mode) && w->f->rec_del &&
		    emit_tree(w, os->d, oe, HU_CHG_DELETE, e) < 0)
			return -1;
		return isdir && w->f->rec_add ?
			emit_tree(w, ns->d, ne, HU_CHG_ADD, e) : 0;
	}
	if (isdir)
		return dirs(w, &n, &o, what, same, u, ns->ud,
			    ns->ud ? &ns->uents[ne - ns->ents] : NULL, e);
	if (!what && w->how != CHG_CMP_STAT)	/* a copy-up, unchanged */
		return unchanged(w, ns->d, ne, oe, e);
	return emit(w, HU_CHG_MODIFY, ns->d, ne, ne->name, &oe->st, what,
		    false, e);
}

static int added(struct chg_walk *w, const struct chg_dir *ns,
		 const struct hu_ventry *ne, struct hu_error *e)
{
	if (emit(w, HU_CHG_ADD, ns->d, ne, ne->name, NULL, 0, false, e) < 0)
		return -1;
	return S_ISDIR(ne->st.st_mode) && w->f->rec_add ?
		emit_tree(w, ns->d, ne, HU_CHG_ADD, e) : 0;
}

static int deleted(struct chg_walk *w, const struct chg_dir *os,
		   const struct hu_ventry *oe, struct hu_error *e)
{
	if (emit(w, HU_CHG_DELETE, NULL, NULL, oe->name, &oe->st, 0, false,
		 e) < 0)
		return -1;
	return S_ISDIR(oe->st.st_mode) && w->f->rec_del ?
		emit_tree(w, os->d, oe, HU_CHG_DELETE, e) : 0;
}

/*
 * diff_dir() with the old side not listed: the deletions are the names the
 * upper layer whites out that the old view has, the rest the upper layer's
 * own entries, each looked up in the old view.  The same changes in the
 * same order as a walk of both listings.
 */
static int diff_dir_lookup(struct chg_walk *w, struct chg_dir *ns,
			   struct chg_dir *os, bool same,
			   struct chg_uppers *u, struct hu_error *e)
{
	struct hu_ventry oe;
	int in;

	for (size_t k = 0; k < ns->raw.n; k++) {
		const char *gone = chg_fast_whiteout(w, ns, k);

		if (!gone || chg_side_has(ns, gone))
			continue;	/* not a whiteout, or replaced */
		in = hu_vdir_lookup(os->d, gone, &oe, e);
		if (in < 0)
			return -1;
		if (!in)
			continue;	/* nothing to delete */
		seen(w);
		if (deleted(w, os, &oe, e) < 0)
			return -1;
	}
	for (size_t i = 0; i < ns->n; i++) {
		const struct hu_ventry *ne = &ns->ents[i];

		in = hu_vdir_lookup(os->d, ne->name, &oe, e);
		if (in < 0)
			return -1;
		seen(w);
		if ((in ? both(w, ns, ne, os, &oe, same, u, e) :
		     added(w, ns, ne, e)) < 0)
			return -1;
	}
	return 0;
}

/* One directory in both views: the deletions, then the rest. */
static int diff_dir(struct chg_walk *w, struct chg_dir *ns, struct chg_dir *os,
		    bool same, struct chg_uppers *u, struct hu_error *e)
{
	size_t i = 0, j;

	if (hu_interrupt_check(e) < 0)
		return -1;
	if (os->lookup)
		return diff_dir_lookup(w, ns, os, same, u, e);

	for (j = 0; j < os->n; j++) {
		const struct hu_ventry *oe = &os->ents[j];

		while (i < ns->n && strcmp(ns->ents[i].name, oe->name) < 0)
			i++;
		if (i < ns->n && strcmp(ns->ents[i].name, oe->name) == 0)
			continue;
		if (ns->ud && !chg_fast_gone(w, ns, oe->name))
			continue;	/* the old entry, unchanged */
		seen(w);
		if (deleted(w, os, oe, e) < 0)
			return -1;
	}
	for (i = 0, j = 0; i < ns->n; i++) {
		const struct hu_ventry *ne = &ns->ents[i];
		int rc;

		while (j < os->n && strcmp(os->ents[j].name, ne->name) < 0)
			j++;
		seen(w);
		if (j < os->n && strcmp(os->ents[j].name, ne->name) == 0)
			rc = both(w, ns, ne, os, &os->ents[j], same, u, e);
		else
			rc = added(w, ns, ne, e);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* The root of a view as an entry named "." in its own fd. */
static int root_entry(const struct hu_stack *s, struct hu_vdir *d,
		      struct hu_ventry *ent, struct hu_error *e)
{
	memset(ent, 0, sizeof(*ent));
	ent->name = ".";
	ent->dirfd = hu_vdir_fd(d, &ent->layer);
	if (hu_layer_dir_stat(&s->layers[ent->layer], ent->dirfd, &ent->st,
			      e) < 0) {
		hu_error_prefix(e, s->layers[ent->layer].path);
		return -1;
	}
	return 0;
}

static int walk_roots(struct chg_walk *w, struct hu_vdir *nr,
		      struct hu_vdir *or, struct hu_error *e)
{
	struct hu_ventry nent, oent;
	struct chg_side n = { w->news, nr, &nent }, o = { w->olds, or, &oent };
	struct hu_vdir *ur = NULL;
	struct chg_uppers u = { 0 };
	struct chg_dir ns = { 0 }, os;
	bool alone = lone(w, nr), opaque;
	unsigned what;
	int rc = -1;

	if (old_side(w, &os, or, w->fast, alone, e) < 0 ||
	    root_entry(w->news, nr, &nent, e) < 0 ||
	    root_entry(w->olds, or, &oent, e) < 0 ||
	    chg_compare(&n, &o, w->how, &what, e) < 0)
		return -1;
	opaque = alone && os.n > 0;
	if (w->fast && !(opaque && w->f->replace_opaque)) {
		if (hu_vdir_open_root(&w->ustack, &ur, e) < 0 ||
		    chg_side_fast(w, &ns, nr, ur, e) < 0)
			goto out;
	} else if (chg_side_list(&ns, nr, e) < 0) {
		goto out;
	}
	if ((what || opaque) && emit(w, HU_CHG_MODIFY, nr, &nent, "",
				     &oent.st, what, opaque, e) < 0)
		goto out;
	if (opaque && w->f->replace_opaque) {
		rc = emit_list(w, &ns, HU_CHG_ADD, e);
		goto out;
	}
	if (w->track && chg_uppers_root(w, &u, e) < 0)
		goto out;
	rc = diff_dir(w, &ns, &os, w->layered, u.fd ? &u : NULL, e);
out:
	chg_uppers_close(w, &u);
	chg_side_free(&ns);
	hu_vdir_close(ur);
	return rc;
}

/* base 0: nothing is old; everything is added. */
static int walk_all_new(struct chg_walk *w, struct hu_error *e)
{
	struct hu_vdir *nr;
	struct chg_dir ns;
	int rc;

	if (hu_vdir_open_root(w->news, &nr, e) < 0)
		return -1;
	rc = chg_side_list(&ns, nr, e);
	if (rc == 0) {
		struct chg_dir none = { 0 };

		rc = diff_dir(w, &ns, &none, false, NULL, e);
	}
	hu_vdir_close(nr);
	return rc;
}

int chg_walk(const struct hu_stack *s, const struct hu_changes_opts *o,
	     const struct chg_flags *f, chg_fn fn, void *ctx,
	     struct hu_error *e)
{
	struct chg_walk w = { .news = s, .f = f, .fn = fn, .ctx = ctx,
			.report = o->report };
	struct hu_vdir *nr = NULL, *or = NULL;
	int rc = -1;

	if (o->old) {
		w.olds = o->old;
		w.how = o->exact ? CHG_CMP_FULL : CHG_CMP_QUICK;
	} else {
		if (o->base > s->n)
			return hu_error_set(e, EINVAL, NULL, "base %zu: the "
					    "stack has only %zu layers",
					    o->base, s->n);
		if (o->base == s->n)
			return 0;	/* nothing above the base */
		w.layered = true;
		w.base = o->base;
		w.oldbuf = (struct hu_stack){ .n = o->base, .layers = s->layers,
						 .problems = s->problems };
		w.olds = &w.oldbuf;
		w.how = o->exact ? CHG_CMP_FULL : CHG_CMP_STAT;
		for (size_t k = o->base; k < s->n; k++)
			w.track |= hu_layer_is(&s->layers[k], HU_FMT_OVERLAY);
		/* the fast walk reads the upper's raw names in one format */
		w.fast = o->base + 1 == s->n && !getenv("HUNION_DIFF_SLOW") &&
			 !hu_layer_half(&s->layers[o->base]);
		w.ustack = (struct hu_stack){ .n = 1,
						 .layers = &s->layers[o->base],
						 .problems = s->problems };
	}
	if (hu_pathbuf_push(&w.path, "", &(size_t){ 0 }) < 0)
		return chg_nomem(e);
	hu_report_phase(o->report, HU_PHASE_COMPARING, NULL);
	if (w.layered && w.base == 0) {
		rc = walk_all_new(&w, e);
		goto out;
	}
	if (hu_vdir_open_root(w.news, &nr, e) < 0 ||
	    hu_vdir_open_root(w.olds, &or, e) < 0)
		goto out;
	rc = walk_roots(&w, nr, or, e);
out:
	hu_vdir_close(or);
	hu_vdir_close(nr);
	hu_pathbuf_free(&w.path);
	return rc;
}

static const struct chg_flags listing_flags[2] = {
	{ .rec_add = false, .rec_del = false },
	{ .rec_add = true, .rec_del = true },
};

int hu_changes_walk(const struct hu_stack *s, const struct hu_changes_opts *o,
		    int (*fn)(void *ctx, const struct hu_change *c,
			      struct hu_error *e),
		    void *ctx, struct hu_error *e)
{
	return chg_walk(s, o, &listing_flags[o->recursive], fn, ctx, e);
}
