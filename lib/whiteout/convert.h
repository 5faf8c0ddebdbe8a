/* SPDX-License-Identifier: MIT */
/* whiteout convert, shared by convert.c (plan, driver),
 * convert_inplace.c and convert_copy.c (-o NEWLAYER). */
#ifndef HUNION_CONVERT_H
#define HUNION_CONVERT_H

#include "output/treeout.h"
#include "whiteout/whiteout.h"

enum cv_pass { CV_PLAN, CV_INPLACE, CV_COPY };

struct conv {
	const struct hu_layer *l;	/* the source, read in its format only */
	bool half;			/* in place: a run that stopped left
					 * @l half-converted to @to */
	const struct hu_layer *half_l;	/* the layer as opened (@half: read
					 * in both formats) */
	struct hu_layer to;		/* @l as the target format writes */
	const struct hu_convert_opts *o;
	struct hu_convert_stats *st;
	const char *out;		/* -o as the user named it, or NULL */
	enum cv_pass pass;
	/* No marker and no name a format reads as one (hu_layer.names_plain):
	 * no plan, nothing to change in place. */
	bool plain;
	unsigned int seed;		/* temporary names (in place) */
	struct hu_treeout t;		/* -o: the new layer */
};

/* The passes: convert.c, convert_inplace.c. */
extern const struct wh_walk_ops cv_plan_ops;
extern const struct wh_walk_ops cv_inplace_ops;

/* Does nothing change for a whiteout like @ent / for marker xattrs? */
bool cv_whiteout_kept(const struct conv *c, const struct wh_ent *ent);
bool cv_xattrs_kept(const struct conv *c);
bool cv_ns_changes(const struct conv *c);

/* Count and tell a change, in the pass that makes it (the plan when dry). */
void cv_report(struct conv *c, enum hu_wh_kind kind, const char *path,
	       const char *target, enum hu_wh_action a);
int cv_report_ent(struct conv *c, const struct wh_dir *d,
		  enum hu_wh_kind kind, const char *key, const char *target,
		  enum hu_wh_action a, struct hu_error *e);
/* Each pass, before @d's entries: set d->hides_beneath. */
int cv_dir_hides(const struct conv *c, struct wh_dir *d, struct hu_error *e);
/* Is @d an OCI directory the conversion makes opaque (.wh.@d beside)? */
bool cv_made_opaque(const struct conv *c, const struct wh_dir *d);
/* What a whiteout that changes becomes: dropped where its directory hides
 * all beneath, else converted (or, for an OCI twin, cv_twin_action). */
int cv_whiteout_action(struct conv *c, const struct wh_dir *d,
		       const struct wh_ent *ent, enum hu_wh_action *a,
		       struct hu_error *e);
/* What an OCI whiteout with a same-named entry (ent + 1) becomes. */
int cv_twin_action(struct conv *c, const struct wh_dir *d,
		   const struct wh_ent *ent, enum hu_wh_action *a,
		   struct hu_error *e);

/* The new marker @dst in @dfd takes the times of @src in @d. */
int cv_marker_times(const struct wh_dir *d, const char *src, int dfd,
		    const char *dst, const char *top, struct hu_error *e);

/* A .wh..wh..opq made for @d (in @dfd) takes @d's times. */
int cv_opq_times(const struct wh_dir *d, int dfd, const char *top,
		 struct hu_error *e);

/* -o: plan, then write the new layer beside @c->out and rename it in. */
int cv_copy(struct conv *c, struct hu_error *e);

#endif
