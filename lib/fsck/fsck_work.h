/* SPDX-License-Identifier: MIT */
/* The overlay workdir's checks (fsck_work.c: work/ and where the workdir
 * lies; fsck_index.c: the index), and what they share. */
#ifndef HUNION_FSCK_WORK_H
#define HUNION_FSCK_WORK_H

#include <stdbool.h>
#include <sys/stat.h>

#include "fsck/fsck.h"

#define WORK_DIR "work"
#define INDEX_DIR "index"

/* Is @st an overlay whiteout (a character device 0/0)? */
bool fsck_work_is_whiteout(const struct stat *st);
/* Can the kernel's cleanup of its scratch directory (ovl_workdir_cleanup
 * from level 1) remove directory @name of @dirfd?  Only when no directory
 * in it holds anything. */
bool fsck_work_can_empty(int dirfd, const char *name);
/* Report problem @id at @dir/@name and, when fsck_found() says so,
 * remove the entry (a tree or not) through the write wrapper. */
int fsck_work_found_remove(struct fsck_run *r, enum hu_problem_id id,
			   int dirfd, const char *dir, const char *name,
			   const char *detail, struct hu_error *e);
/* Workdir @wfd's index/ (fsck_index.c). */
int fsck_index(struct fsck_run *r, int wfd, struct hu_error *e);

#endif /* HUNION_FSCK_WORK_H */
