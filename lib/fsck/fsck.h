/* SPDX-License-Identifier: MIT */
/*
 * fsck's modules.  fsck.c opens the stack, walks the layer checked (the
 * walk of one layer, lwalk.c) with the view of the layers beneath it
 * alongside, and hands each directory and entry to the checks:
 *
 *   fsck_marker.c   markers of every format: lookalikes, orphans,
 *                   redundant opaque marks, foreign formats, leftovers
 *   fsck_overlay.c  redirects, metacopy, impure, xattr whiteouts,
 *                   namespaces
 *   fsck_vacuum.c   copy-ups identical to what lies beneath
 *   fsck_work.c     the overlay workdir
 *   fsck_tar.c      tarball layers, read from the tarball itself
 *
 * A check calls fsck_found() for each problem; when that says to repair,
 * it repairs through the write wrapper (wr.c: dry runs and fault
 * injection come with it), so that a failed repair leaves the entry as
 * it was, and reports the outcome with fsck_done().
 */
#ifndef HUNION_FSCK_H
#define HUNION_FSCK_H

#include "whiteout/whiteout.h"

struct fsck_run;

/* One directory of the layer checked, and what lies beneath it. */
struct fsck_dir {
	struct wh_dir *wd;	/* the layer's directory: fd, path, its
				 * entries classified, opaque, redirect */
	/* The view of the layers beneath, at the directory this one lies
	 * over (its redirect followed), whether or not this one is opaque;
	 * NULL when they have no directory there (or there are none). */
	struct hu_vdir *below;
	bool merges;		/* @below and not opaque: the kernel merges */
};

/* The layer checked, the layers beneath it (n may be 0), the options. */
const struct hu_layer *fsck_layer(const struct fsck_run *r);
const struct hu_stack *fsck_below(const struct fsck_run *r);
const struct hu_fsck_opts *fsck_opts(const struct fsck_run *r);
/* Is the layer checked the top one, the upper of the stack? */
bool fsck_layer_is_top(const struct fsck_run *r);

/*
 * Problem @id at @name in directory @dir (both relative to the layer
 * root; @name NULL or "" for @dir itself), @detail the offending value
 * or NULL.  Returns 1 when the caller is to repair it now (the mode, the
 * severity and the repair class allow it; in a dry run too, the write
 * wrapper then changing nothing) and then report with fsck_done(); 0
 * when not (reported already); -1 when the run must stop.
 */
int fsck_found(struct fsck_run *r, enum hu_problem_id id, const char *dir,
	       const char *name, const char *detail, struct hu_error *e);
/* The repair of the problem fsck_found() last said to repair: @rc 0
 * done, -1 failed with @why (cleared here).  -1 when the run must stop
 * (an interrupt, the finding callback). */
int fsck_done(struct fsck_run *r, int rc, struct hu_error *why,
	      struct hu_error *e);

/*
 * What an entry of the layer checked is: its lstat and the names of its
 * xattrs, read once for every check that asks (each would otherwise read
 * them itself).  A repair (fsck_done) forgets them, so the checks after
 * it read the entry afresh.  *@out NULL when the entry is gone (an
 * earlier check's repair removed it); -1 on error (@e).
 */
struct fsck_facts {
	struct stat st;
	char *xattrs;		/* names, back to back (NULL: none) */
	ssize_t xlen;
};
int fsck_entry_facts(struct fsck_run *r, const struct fsck_dir *d,
		     const char *name, const struct fsck_facts **out,
		     struct hu_error *e);
/* Is xattr @attr among the @len bytes of names @list? */
bool fsck_xattr_listed(const char *list, ssize_t len, const char *attr);

/* One more entry checked, for the count and the progress report: the
 * engine counts those of its walk; a check that reads entries the walk
 * does not (a tarball's) counts its own. */
void fsck_entry_checked(struct fsck_run *r);

/* A repair that adds or removes entries of @d changes the times of the
 * directory the view shows: fsck_keep_times() before the change records
 * them on @d (-1 with @why), fsck_restore_times() after it (done or
 * failed) puts them back and drops the record.  A run killed between the
 * two leaves the record, which the next run finds (hunionLeftover) and
 * restores from. */
int fsck_keep_times(struct fsck_run *r, struct fsck_dir *d,
		    struct hu_error *why);
void fsck_restore_times(struct fsck_run *r, struct fsck_dir *d);

/* The checks.  Each returns 0, or -1 when the run must stop (@e);
 * fsck_marker_entry() 1 when @ent is no entry of the layer's own (what
 * an interrupted run left, removed or not): no other check looks at it
 * and the walk does not descend into it. */
int fsck_marker_dir(struct fsck_run *r, struct fsck_dir *d,
		    struct hu_error *e);
int fsck_marker_entry(struct fsck_run *r, struct fsck_dir *d,
		      const struct wh_ent *ent, struct hu_error *e);
int fsck_overlay_dir(struct fsck_run *r, struct fsck_dir *d,
		     struct hu_error *e);
int fsck_overlay_entry(struct fsck_run *r, struct fsck_dir *d,
		       const struct wh_ent *ent, struct hu_error *e);
/* After the whole layer: what only the whole layer shows (two
 * directories redirecting to one origin, both namespaces in use). */
int fsck_overlay_layer(struct fsck_run *r, struct hu_error *e);
int fsck_vacuum_entry(struct fsck_run *r, struct fsck_dir *d,
		      const struct wh_ent *ent, struct hu_error *e);
/* The workdir @o->workdir of the upper (the layer checked). */
int fsck_workdir(struct fsck_run *r, const char *workdir, struct hu_error *e);
/* Tarball layer @l, read from its file (@l->path), reported against it. */
int fsck_tarball(struct fsck_run *r, const struct hu_layer *l,
		 struct hu_error *e);

#endif /* HUNION_FSCK_H */
