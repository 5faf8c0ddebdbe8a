/* SPDX-License-Identifier: MIT */
/*
 * fsck's overlay module, shared by its two files: fsck_overlay.c checks
 * each directory and entry as the walk meets it; fsck_ovlayer.c decides
 * what only the whole layer shows (directories redirecting to one
 * origin, origins left uncovered, both xattr namespaces in use).
 */
#ifndef HUNION_FSCK_OVERLAY_H
#define HUNION_FSCK_OVERLAY_H

#include <stdint.h>

#include "fsck/fsck.h"

/* A directory of the layer with a redirect the kernel follows to a
 * directory beneath: one record each, kept for the end of the layer. */
struct ovl_redirect {
	char *path;		/* the directory, relative to the layer root */
	char *origin;		/* the path of the view its redirect names */
	char *lower;		/* the path beneath it merges with */
	dev_t dev;		/* the first directory beneath it merges with: */
	ino_t ino;		/* the kernel's key for the merged inode */
	bool own_below;		/* its own name is a directory beneath (so
				 * without the redirect it would merge
				 * there) */
	bool dropped;		/* its redirect was removed meanwhile */
	/* another directory, earlier in the walk, merges with the same
	 * one: its path, and its record */
	const char *shared_with;
	const struct ovl_redirect *first;
};

/* The state of the layer being checked; reset when another layer (or
 * run) begins, freed by fsck_overlay_layer(). */
struct ovl_state {
	const struct fsck_run *run;
	const struct hu_layer *layer;
	struct ovl_redirect *redirects;
	size_t nredirects, cap;
	/* the view beneath each directory on the walk's path that merges
	 * with it, by depth (NULL: it merges with nothing) */
	struct hu_vdir **belows;
	bool *impure;		/* by depth: the directory is marked, or
				 * was just repaired or reported */
	size_t depth_cap;
	/* overlay xattrs in the layer's namespace and in the other one */
	uint64_t own_ns, other_ns;
	char *first_own, *first_other;
};

/* The state for @r's layer (reset on a new layer). */
struct ovl_state *ovl_state(struct fsck_run *r, struct hu_error *e);
void ovl_state_free(struct ovl_state *st);

/* Is the layer checked the upper of the stack (the top operand), where
 * the kernel writes its bookkeeping and ignores xattr whiteouts? */
bool ovl_checked_is_upper(struct fsck_run *r);

/* The name of overlay xattr @what in the layer's namespace (@other:
 * in the other one). */
const char *ovl_xattr(const struct hu_layer *l, bool other, const char *what,
		      char *buf, size_t len);

/* Why the kernel refuses redirect @r (EINVAL or EACCES on lookup), or
 * NULL when it follows it. */
const char *ovl_redirect_refused(const char *r);

/* @v as text for a message: printable ASCII kept, the rest \xNN. */
void ovl_show_value(const char *v, size_t len, char *buf, size_t size);

/* The directory of the view beneath (fsck_below) at @path ("" the root),
 * opened along its components: *@out NULL when it is no directory there.
 * Close with ovl_below_close(). */
struct ovl_below_path {
	struct hu_stack quiet;	/* fsck_below without its problem sink;
				 * the directories point here: never
				 * copied once opened */
	struct hu_vdir **chain;
	size_t n;
};
int ovl_below_open(struct fsck_run *r, const char *path,
		   struct ovl_below_path *bp, struct hu_vdir **out,
		   struct hu_error *e);
void ovl_below_close(struct ovl_below_path *bp);

/* Remove the redirect of directory @name in @fd (NULL: @fd itself),
 * making it opaque first when @opaque; as it was when it fails. */
int ovl_drop_redirect(const struct hu_layer *l, int fd, const char *name,
		      bool opaque, struct hu_error *why);

/* The times of a directory a repair makes or removes entries in, put
 * back after it, done or failed: the view shows them, and the kernel's
 * copy-up keeps them too. */
struct ovl_times {
	struct timespec ts[2];
	bool ok;
};
void ovl_times_save(int fd, struct ovl_times *t);
void ovl_times_restore(int fd, const struct ovl_times *t);

/* The key of view directory @v: its topmost layer directory. */
int ovl_vdir_key(struct hu_vdir *v, dev_t *dev, ino_t *ino,
		 struct hu_error *e);

#endif /* HUNION_FSCK_OVERLAY_H */
