/* SPDX-License-Identifier: MIT */
/*
 * The merged view, private to its three modules: for one directory of the
 * view, the layer directories that make it up (topmost first) and their
 * merged, sorted listing.
 *
 * The rules are the kernel's (fs/overlayfs/namei.c and readdir.c): a name
 * is looked up from the top down; a whiteout ends the lookup and hides the
 * name; a non-directory wins over everything below it; directories merge
 * until one is opaque or something that is not a directory is met.
 * Overlay redirects move the lookup below a directory elsewhere, and
 * metacopy files take their data from further down.
 *
 * What the view meets that no tool writes goes to the layer's problem sink
 * (hu_layer.problems, view_problem()): an invalid redirect (none, as
 * without a sink), an OCI whiteout that hides nothing (neither shown nor
 * hiding anything once reported; without a sink the listing fails), a
 * metacopy file without data (its data cannot be opened either way).
 *
 * The code is split as the kernel's is:
 *
 *   view_lookup.c  names down the layers: opaque directories, redirects,
 *                  the directories of the view (namei.c)
 *   view_list.c    the merged listing of a directory, one name decided
 *                  alone, the entries' xattr names (readdir.c)
 *   view_data.c    a file's data: metacopy files, data opened ahead
 */
#ifndef HUNION_VIEW_H
#define HUNION_VIEW_H

#include <limits.h>

#include "internal.h"

struct vlayer {
	size_t layer;		/* index into the stack */
	int fd;
	bool own;		/* close fd with the vdir */
	char *path;		/* relative to the layer's root, for problem
				 * reports; NULL: the same as the view's */
	bool bare;		/* listed no xattr at all when opened */
	bool has_st;		/* @st is what the lookup that found it saw */
	struct stat st;
};

/* A file's data opened ahead by hu_vdir_prefetch, for hu_vdir_open_data
 * to hand out. */
struct prefetched {
	const struct hu_ventry *ent;
	int fd;			/* -1 once handed out */
	bool own;
};
enum { PREFETCH_MAX = 16, PREFETCH_BYTES = 128 << 10 };

/* What a name lookup saw of its name in one layer directory. */
struct seen {
	bool looked;		/* the layer was asked */
	bool found;		/* and holds the name, whose stat is @st */
	bool oci_wh;		/* and an OCI whiteout of it */
	struct stat st;
};

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
	/* What the last name lookup in this directory saw (one per vlayer,
	 * of @seen_name), for the first hu_vdir_open_child after it to use
	 * instead of asking the layers again; "" once used or unusable. */
	struct seen *seen;
	char seen_name[NAME_MAX + 1];
	/* Opened by hu_vdir_open_child_lazy(): the bottom layer's directory
	 * at @path is still to be looked up (view_complete()). */
	bool bottom_pending;
};

/* One name of one layer directory, as a candidate for the listing. */
struct vrec {
	const char *key;	/* the name in the view */
	const char *name;	/* the name on disk (.wh.key for OCI) */
	size_t rank;		/* index into vdir->d: 0 is the topmost */
	bool whiteout;		/* an OCI whiteout (known from the name) */
};

/* Where the lookup of one name goes in the layers below. */
struct lookup {
	char *path;	/* components joined by '/' */
	bool abs;	/* from each layer's root, not the parent's dirs */
	bool stop;	/* nothing further down counts */
	bool redirected;	/* @path is no longer the name looked up */
	bool bare;	/* the directory view_lookup_layer() found listed no
			 * xattr at all */
};

/* ---- view_lookup.c ----------------------------------------------------- */

/* -1, with @e's path prefixed by @d's path in layer @layer (a path
 * relative to a layer directory of @d). */
int view_fail(const struct hu_vdir *d, size_t layer, struct hu_error *e);
/* The same for a path relative to layer @layer's root (@rel may be NULL). */
int view_layer_fail(const struct hu_stack *s, size_t layer, const char *rel,
		    struct hu_error *e);
/* Look up the bottom layer's directory of @d if it is still pending
 * (hu_vdir_open_child_lazy()); nothing else is touched. */
int view_complete(struct hu_vdir *d, struct hu_error *e);
/* The layer directory of @d in layer @layer, or NULL. */
struct vlayer *view_vlayer_of(const struct hu_vdir *d, size_t layer);
/* The path of layer directory @v of @d relative to its layer's root. */
const char *view_layer_path(const struct hu_vdir *d, const struct vlayer *v);
/* Report problem @id at @dir/@name (@name may be NULL) of layer @layer,
 * relative to its root, to the layer's sink: hu_problem_found(). */
int view_problem(const struct hu_stack *s, size_t layer, enum hu_problem_id id,
		 bool stops, const char *dir, const char *name,
		 const char *detail, int err, struct hu_error *e);
/* The overlay.redirect of directory or file @fd, malloc'd, or NULL. */
int view_read_redirect(const struct hu_layer *l, int fd, char **out,
		       struct hu_error *e);
/* Apply redirect @r met at component @k of @comps (@n components) to
 * @lk; -1 when memory runs out. */
int view_apply_redirect(struct lookup *lk, const char *r, char **comps,
			size_t n, size_t k);
/* Look @lk up in layer @j from directory @base, whose path relative to
 * the layer's root is @base_path (NULL: report no problem met, as for
 * data opened ahead): *@found the open fd of the final entry (a directory
 * when @want_dir), or -1 when this layer does not have it, *@st its
 * stat.  @known (may be NULL): what a name lookup saw of @lk's first
 * component in @base, not asked again. */
int view_lookup_layer(const struct hu_stack *s, size_t j, int base,
		      const char *base_path, struct lookup *lk, bool want_dir,
		      const struct seen *known, int *found, struct stat *st,
		      struct hu_error *e);
/* The records view_list.c's collect() would make of @name in @d, topmost
 * first, into @recs (room for 2 * d->nd): the entry, then an OCI
 * whiteout of it in the same layer.  Only the layer directories of @d
 * below layer @below count (s->n: all).  What each layer directory
 * showed of @name is kept in d->seen. */
int view_name_records(struct hu_vdir *d, const char *name, size_t below,
		      struct vrec *recs, size_t *n, struct hu_error *e);

/* ---- view_list.c ------------------------------------------------------- */

/* Does one of @ent's xattr names, read ahead, @match? */
bool view_any_name(const struct hu_ventry *ent, bool (*match)(const char *));
/* Were @ent's xattr names read, and is none a union or overlay one? */
bool view_known_unmarked(const struct hu_ventry *ent);

/* ---- view_data.c ------------------------------------------------------- */

/* Close the prefetched fds not handed out. */
void view_prefetch_drop(struct hu_vdir *d);

#endif /* HUNION_VIEW_H */
