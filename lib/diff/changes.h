/* SPDX-License-Identifier: MIT */
/* diff: shared by changes.c (the walk), changes_cmp.c (comparing two
 * entries) and changes_tar.c (the change set as an OCI layer). */
#ifndef HUNION_CHANGES_H
#define HUNION_CHANGES_H

#include <stdint.h>

#include "internal.h"

/* How hard two entries of the same type are compared. */
enum chg_cmp {
	CHG_CMP_STAT,	/* the inode only: mode, owner, mtime, size, rdev,
			 * symlink target (a copy-up is M anyway) */
	CHG_CMP_QUICK,	/* also xattrs; bytes only when size and mtime do
			 * not settle it (--trees) */
	CHG_CMP_FULL,	/* also xattrs; bytes whenever the sizes agree */
};

/* One side of a comparison: an entry of a directory of a view. */
struct chg_side {
	const struct hu_stack *s;	/* for messages: the layer paths */
	struct hu_vdir *d;
	const struct hu_ventry *ent;
};

/* The HU_DIFF_* bits between @n and @o, which are of the same type.
 * Directories: mode, owner, mtime and xattrs, whatever @how says. */
int chg_compare(const struct chg_side *n, const struct chg_side *o,
		enum chg_cmp how, unsigned *what, struct hu_error *e);

typedef int (*chg_fn)(void *ctx, const struct hu_change *c,
		      struct hu_error *e);

/* What the walk lists beyond the changed paths themselves. */
struct chg_flags {
	bool rec_add;		/* the contents of added directories */
	bool rec_del;		/* the contents of deleted directories */
	bool replace_opaque;	/* an opaque directory: its whole contents
				 * as additions, no deletions inside (for a
				 * layer with .wh..wh..opq markers) */
	chg_fn same;		/* when set: hears of each non-directory
				 * left out as unchanged that has other
				 * names (st_nlink > 1), as an M with no
				 * bits, so that a sink can keep a hard-link
				 * group whole */
};

/* One directory of one view, listed.  The new side of a directory that
 * only the one upper layer changes ("fast": its lower layers looked up as
 * in the old view) lists the upper layer's own entries only: the rest is
 * the old view's.  The old side then is not listed either ("lookup"):
 * each name the upper layer has or whites out is looked up in it, so the
 * lower layers are read where the upper one touches them, no more. */
struct chg_dir {
	struct hu_vdir *d;
	const struct hu_ventry *ents;
	size_t n;
	bool lookup;			/* old side: not listed (n is 0) */
	/* fast */
	struct hu_vdir *ud;		/* the upper layer alone, here */
	const struct hu_ventry *uents;	/* ud's entries (ents: the same as
					 * entries of the new view) */
	struct hu_ventry *own;		/* ents */
	struct hu_names raw;		/* the upper dir's names, markers
					 * too */
	bool merged;			/* the new dir merges with the
					 * old */
};

/* The directories of the upper layers ([base, n), overlay ones only) at
 * the current path, to see redirects; kept while the layers beneath are
 * looked up along the same path in both views. */
struct chg_uppers {
	int *fd;		/* -1: none */
	bool own;
};

struct chg_walk {
	const struct hu_stack *news, *olds;
	struct hu_stack oldbuf;		/* layered: the bottom layers */
	size_t base;
	bool layered;
	bool track;			/* an upper layer may redirect */
	bool fast;			/* one upper layer: see chg_dir */
	struct hu_stack ustack;		/* fast: the upper layer alone */
	enum chg_cmp how;
	const struct chg_flags *f;
	chg_fn fn;
	void *ctx;
	const struct hu_report *report;
	struct hu_pathbuf path;		/* of the current directory */
	uint64_t seen;
};

int chg_nomem(struct hu_error *e);

/* ---- directories of the two views (changes_upper.c) ---- */

/* @sd: directory @d of a view, listed whole. */
int chg_side_list(struct chg_dir *sd, struct hu_vdir *d, struct hu_error *e);
/* Does listed side @sd have @name? */
bool chg_side_has(const struct chg_dir *sd, const char *name);
/* @sd: old directory @d, for hu_vdir_lookup() only. */
void chg_side_lookup(struct chg_dir *sd, struct hu_vdir *d);
/* @sd: the fast new side of directory @nd (not listed), whose upper layer
 * directory alone is @ud. */
int chg_side_fast(const struct chg_walk *w, struct chg_dir *sd,
		  struct hu_vdir *nd, struct hu_vdir *ud, struct hu_error *e);
void chg_side_free(struct chg_dir *sd);
/* Is old name @name, which fast side @sd does not list, gone from the new
 * view? */
bool chg_fast_gone(const struct chg_walk *w, const struct chg_dir *sd,
		   const char *name);
/* The name raw name @k of fast side @sd whites out, or NULL. */
const char *chg_fast_whiteout(const struct chg_walk *w,
			      const struct chg_dir *sd, size_t k);

/* The upper layers' directories at the root; at child @name of @pu, with
 * *@redirected when one of them sends the lookup beneath elsewhere. */
int chg_uppers_root(const struct chg_walk *w, struct chg_uppers *u,
		    struct hu_error *e);
int chg_uppers_child(const struct chg_walk *w, const struct chg_uppers *pu,
		     const char *name, struct chg_uppers *cu,
		     bool *redirected, struct hu_error *e);
void chg_uppers_close(const struct chg_walk *w, struct chg_uppers *u);

/* hu_changes_walk() with the listing chosen by @f. */
int chg_walk(const struct hu_stack *s, const struct hu_changes_opts *o,
	     const struct chg_flags *f, chg_fn fn, void *ctx,
	     struct hu_error *e);

/* Prefix @e with where @side's entry lies: the layer, the view dir. */
int chg_fail(const struct chg_side *side, struct hu_error *e);

#endif
