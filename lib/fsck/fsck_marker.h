/* SPDX-License-Identifier: MIT */
/*
 * fsck's marker checks, shared by fsck_marker.c (lookalikes, whiteouts
 * and opaque marks against what lies beneath, the entry points),
 * fsck_foreign.c (markers of another format) and fsck_leftover.c (what
 * interrupted runs leave).
 */
#ifndef HUNION_FSCK_MARKER_H
#define HUNION_FSCK_MARKER_H

#include "fsck/fsck.h"

/* What one entry of the layer is, read once for every check. */
struct look {
	struct stat st;
	char *xattrs;		/* names, back to back */
	ssize_t xlen;
	bool wh_target;		/* a symlink to (union-whiteout) */
	bool union_wh;		/* ... with union.whiteout "y" */
	bool dev00;		/* a character device 0/0 */
};

/* Report problem @id at @name of @d (NULL: @d itself): 1 when to repair
 * now, 0 not, -1 stop (fsck_found). */
int fm_found(struct fsck_run *r, const struct fsck_dir *d,
	     enum hu_problem_id id, const char *name, const char *detail,
	     struct hu_error *e);
/* Before a repair that adds or removes entries of @d: its times kept
 * (fsck_keep_times).  After it: fm_done() with its outcome (@rc 0 done,
 * -1 failed with @why), the times back. */
int fm_keep(struct fsck_run *r, const struct fsck_dir *d,
	    struct hu_error *why);
int fm_done(struct fsck_run *r, const struct fsck_dir *d, int rc,
	    struct hu_error *why, struct hu_error *e);
/* -1 with @why: errno, "@d/@name: @what". */
int fm_fail(struct hu_error *why, const struct fsck_dir *d,
	    const char *name, const char *what);
/* Remove entry @name of @d, a tree too (through the write wrapper). */
int fm_remove_entry(const struct fsck_dir *d, const char *name,
		    struct hu_error *why);

/* fsck_leftover.c.  Each returns -1 to stop the run; check_leftover 1
 * when @ent is a leftover (reported), 0 when not; the others 0. */
int fm_check_leftover(struct fsck_run *r, const struct fsck_dir *d,
		      const struct wh_ent *ent, struct hu_error *e);
int fm_check_times_record(struct fsck_run *r, struct fsck_dir *d,
			  struct hu_error *e);
int fm_check_converting(struct fsck_run *r, const struct fsck_dir *d,
			struct hu_error *e);

/* fsck_foreign.c: markers of another format on @name of @d (NULL: @d
 * itself), whose lstat and xattr names are @k: 1 when the entry itself
 * was one (reported), 0 when not, -1 to stop. */
int fm_check_foreign(struct fsck_run *r, const struct fsck_dir *d,
		     const char *name, const struct look *k,
		     struct hu_error *e);

#endif
