/* SPDX-License-Identifier: MIT */
/*
 * Writing a new tree (treeout.c), shared by merge -o and whiteout convert
 * -o.  The tree is built as ".NAME.hunion-XXXXXX" beside OUT, one open
 * directory per level, and renamed to OUT (RENAME_NOREPLACE) only when
 * complete; on failure the partial tree is removed.  Meanwhile OUT's lock
 * is held (outlock.c): what a killed run left for OUT is removed.  Owners (as root),
 * modes, public xattrs, times and hard links are kept.  Errors of the
 * output side name "OUT/PATH/NAME", PATH the current directory.
 */
#ifndef HUNION_TREEOUT_H
#define HUNION_TREEOUT_H

#include "internal.h"
#include "common/linkmap.h"

/* What the errors of the lifecycle call OUT: each command keeps its own
 * words, which its users and tests know.  (What exists already is judged
 * by the rule every output shares, outexist.c.) */
struct hu_treeout_words {
	const char *bad_name;	/* OUT's last component is "", ".", ".." */
	const char *no_parent;	/* OUT's parent cannot be opened */
	const char *no_create;	/* the temporary directory */
	const char *no_open;	/* the temporary directory, once made */
	const char *no_move;	/* the final rename */
};

struct hu_treeout {
	const char *out;	/* OUT as the user named it */
	const struct hu_treeout_words *words;
	int parentfd;		/* OUT's parent */
	char *base;		/* OUT's last component */
	char *tmp;		/* the temporary name; NULL until begun */
	int replace;		/* 1: OUT is an empty directory, which the
				 * new tree replaces (rename(2) does so
				 * only while it is empty) */
	struct hu_outlock lock;	/* held from begin to end (outlock.c) */
	int *fds;		/* open directory per depth; fds[0] the root */
	size_t depth, cap;
	struct hu_pathbuf path;	/* the current directory, below OUT */
	struct hu_copy_state cs;
	struct hu_linkmap links;	/* first output path of linked inodes */
	bool as_root;		/* owners are kept */
	uid_t uid;		/* who owns what we create */
	gid_t gid;
	mode_t umask;
	struct hu_pool *pool;	/* writes regular files beside the walk */
};

/* Check that OUT can be written: its parent opens, OUT does not exist (or
 * is an empty directory: the rule of outexist.c) and lies inside none of
 * @layers.  Nothing is created yet (a dry run stops
 * here).  Whatever it returns, hu_treeout_end() releases @t. */
int hu_treeout_open(struct hu_treeout *t, const char *out,
		    const struct hu_treeout_words *words,
		    const struct hu_layer *layers, size_t n,
		    struct hu_error *e);
/* Wait for OUT's lock, remove what killed runs left for OUT, and create
 * the temporary directory: the root of the new tree. */
int hu_treeout_begin(struct hu_treeout *t, struct hu_error *e);
/* Rename the new tree to OUT when @rc is 0, else (or when that fails)
 * remove it; release @t.  Returns the final status. */
int hu_treeout_end(struct hu_treeout *t, int rc, struct hu_error *e);

/* The current output directory. */
static inline int hu_treeout_fd(const struct hu_treeout *t)
{
	return t->fds[t->depth];
}

/* Name "OUT/PATH/@name" in @e: with a new message, or as the prefix of a
 * lower level's path (copy.c and marker.c name no output).  Return -1. */
int hu_treeout_fail(struct hu_treeout *t, const char *name, int err,
		    const char *what, struct hu_error *e);
int hu_treeout_prefix(struct hu_treeout *t, const char *name,
		      struct hu_error *e);

/* Directory @name in the current one, entered: it becomes current. */
int hu_treeout_dir(struct hu_treeout *t, const char *name,
		   struct hu_error *e);
/* After its entries, the current directory takes the metadata of @src
 * (stat @st) and its parent becomes current again (not above the root).
 * Last, so that creating the entries does not change its times. */
int hu_treeout_dir_done(struct hu_treeout *t, int src, const struct stat *st,
			struct hu_error *e);

/* A second name of an inode met before (@st): linked as @name to the
 * first and 1 returned.  Else @name is remembered as its first name and
 * 0 returned: write it. */
int hu_treeout_hardlink(struct hu_treeout *t, const char *name,
			const struct stat *st, struct hu_error *e);

/* Regular file @name: the bytes of @src (stat @data), the metadata @meta
 * and the xattrs of @xsrc.  @xsrc is @src but for an overlay metacopy
 * file, whose metadata and xattrs are its own and its bytes another's.
 * Takes both fds: the bytes may be written by a worker thread later; a
 * failure there is reported by a later call or by hu_treeout_end(). */
int hu_treeout_file(struct hu_treeout *t, const char *name, int src,
		    const struct stat *data, int xsrc,
		    const struct stat *meta, struct hu_error *e);
/* Symlink @name to @target, and a device, fifo (from @st's type and rdev),
 * each with the metadata @st and the xattrs of @name in @srcdir. */
int hu_treeout_symlink(struct hu_treeout *t, const char *name,
		       const char *target, int srcdir, const struct stat *st,
		       struct hu_error *e);
int hu_treeout_special(struct hu_treeout *t, const char *name, int srcdir,
		       const struct stat *st, struct hu_error *e);

/* The target of symlink @name in @dirfd (@st its lstat), malloc'd; NULL
 * with errno on failure (EAGAIN: it changed while read). */
char *hu_read_symlink(int dirfd, const char *name, const struct stat *st);

#endif
