/* SPDX-License-Identifier: MIT */
/*
 * PLACEHOLDER, removed before this session ends: the fsck checks are
 * written in parallel (fsck_marker.c, fsck_overlay.c, fsck_vacuum.c,
 * fsck_work.c, fsck_tar.c); until each lands, the engine links against
 * these, which find nothing.
 */
#include "fsck.h"

int fsck_marker_dir(struct fsck_run *r, struct fsck_dir *d,
		    struct hu_error *e)
{
	return 0;
}

int fsck_marker_entry(struct fsck_run *r, struct fsck_dir *d,
		      const struct wh_ent *ent, struct hu_error *e)
{
	return 0;
}

int fsck_vacuum_entry(struct fsck_run *r, struct fsck_dir *d,
		      const struct wh_ent *ent, struct hu_error *e)
{
	return 0;
}

