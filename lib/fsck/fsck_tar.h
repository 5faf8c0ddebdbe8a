/* SPDX-License-Identifier: MIT */
/*
 * fsck of a tarball layer, private to fsck_tar.c (reading the tarball,
 * the layers beneath, reporting) and fsck_tarcheck.c (the checks of one
 * entry against the paths seen before it).
 */
#ifndef HUNION_FSCK_TAR_H
#define HUNION_FSCK_TAR_H

#include <archive.h>
#include <stdbool.h>
#include <time.h>

#include "fsck/fsck.h"
#include "tar/tarlayer.h"

/* What the check knows of a path (struct ti_node.flags, an index of its
 * own: the unpack's TI_* flags do not apply here). */
enum {
	FT_ENTRY = 1 << 0,	/* named by an entry */
	FT_DIR = 1 << 1,	/* ... the last of which is a directory */
	FT_PARENT = 1 << 2,	/* holds an entry: the tarball makes it */
	FT_WHITED = 1 << 3,	/* a whiteout of this name in the tarball */
	FT_OPAQUE = 1 << 4,	/* a directory holding .wh..wh..opq */
	FT_WH_ENTRY_DONE = 1 << 5,	/* tarWhiteoutAndEntry reported */
	FT_REDUNDANT_DONE = 1 << 6,	/* a whiteout: tarOpaqueRedundant
					 * reported */
};

/* The metadata of a directory entry: a directory restated with the same
 * is no duplicate any reader can tell apart. */
struct ft_meta {
	mode_t mode;
	la_int64_t uid, gid;
	time_t mtime;
	long mtime_nsec;
};

struct ft {
	struct fsck_run *r;
	const struct hu_layer *l;
	struct hu_error *e;
	struct tar_src *src;
	struct archive *a;
	struct archive_entry *ae;
	const char *raw;	/* the current entry's name, as written */
	struct tar_index ix;
	struct ft_meta *meta;	/* by ti_dir index (ti_node.dir) */
	size_t meta_cap;
	/* The layers beneath: their root, and the directory the last
	 * whiteout was looked up in (bdir; bd NULL when they have none). */
	struct hu_vdir *broot, *bd;
	char *bdir;
	bool bdir_known;
};

/* "TARBALL: ENTRY: message" (outside an entry "TARBALL: message"), -1. */
int ft_fail(struct ft *t, int err, const char *msg);
int ft_nomem(struct ft *t);
/* Report problem @id at @path (of the layer, normalised), @detail (may
 * be NULL) escaped: 0, or -1 when the run must stop. */
int ft_report(struct ft *t, enum hu_problem_id id, const char *path,
	      const char *detail);
/* Does the view beneath have @name in directory @dir?  1, 0, or -1. */
int ft_below_has(struct ft *t, const char *dir, const char *name);

/* The entry libarchive just read (t->ae): 0, or -1 when the run must
 * stop (fsck_tarcheck.c). */
int ft_check_entry(struct ft *t);

#endif /* HUNION_FSCK_TAR_H */
