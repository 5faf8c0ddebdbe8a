/* SPDX-License-Identifier: MIT */
/*
 * The whiteout modules: the walk of ONE layer (not the merged view,
 * lwalk.c) shared by whiteout.c (ls, add, rm, opaque) and convert.c.
 */
#ifndef HUNION_WHITEOUT_H
#define HUNION_WHITEOUT_H

#include <stdbool.h>
#include <sys/stat.h>

#include "internal.h"

/* One entry of a layer directory, classified. */
struct wh_ent {
	const char *name;	/* on disk */
	const char *key;	/* the name it stands for: for an OCI whiteout
				 * the hidden name, else @name */
	mode_t type;		/* S_IFMT bits of the lstat */
	enum hu_marker kind;	/* NONE, WHITEOUT, OPAQUE_FILE or META */
	bool xwhiteout;		/* an overlay xattr whiteout */
	bool twin;		/* OCI: a whiteout and an entry of the same
				 * name in this directory (both flagged) */
};

/* One directory of the layer, while the walk is inside it. */
struct wh_dir {
	struct wh_dir *parent;	/* NULL at the root */
	const char *name;	/* its name in the parent ("" at the root) */
	char *path;		/* relative to the layer root ("" at the root) */
	int fd;
	struct stat st;
	enum hu_opaque opaque;	/* YES also for an OCI .wh..wh..opq */
	bool opq_file;		/* OCI: holds .wh..wh..opq */
	bool twin;		/* OCI: its parent also holds .wh.NAME */
	char *redirect;		/* overlay.redirect, or NULL */
	/* The names of its xattrs, as the walk listed them when it opened
	 * it (union and overlay layers: xlisted), so that the readers of
	 * its markers skip the ones it lacks (wh_dir_may_hold()).  A writer
	 * of its xattrs clears xlisted. */
	char *xattrs;
	ssize_t xlen;
	bool xlisted;
	struct hu_names names;
	struct wh_ent *ents;	/* sorted by key, a whiteout before an entry
				 * of the same key */
	size_t n;
	/* for the callbacks: */
	bool changed;		/* convert in place: restore its times (kept
				 * in a record on it meanwhile) */
	bool hides_beneath;	/* convert: opaque in the target, or inside
				 * such a directory (and not redirected):
				 * nothing beneath shows through it */
};

struct wh_walk_ops {
	/* A directory, before its entries. */
	int (*dir_pre)(void *ctx, struct wh_dir *d, struct hu_error *e);
	/* Each entry in order; return 1 to descend into a directory. */
	int (*entry)(void *ctx, struct wh_dir *d, const struct wh_ent *ent,
		     struct hu_error *e);
	/* A directory, after its entries (only after a successful dir_pre). */
	int (*dir_post)(void *ctx, struct wh_dir *d, struct hu_error *e);
	/* Instead of dir_post when the walk fails inside the directory. */
	void (*dir_abort)(void *ctx, struct wh_dir *d);
	/* An OCI whiteout that hides nothing (".wh.", ".wh..", ".wh...")
	 * is handed to @entry as an ordinary entry (kind NONE), for fsck
	 * to report; else the walk refuses it. */
	bool oci_invalid_as_entries;
};

/* Depth first from the root of @l, one open fd per level.  Errors of the
 * walk itself name "@l->path/PATH"; the callbacks name their own. */
int wh_walk(const struct hu_layer *l, const struct wh_walk_ops *ops,
	    void *ctx, struct hu_error *e);

/* "@l->path/@dir/@name" as an error path (@dir and @name may be empty). */
int wh_fail(struct hu_error *e, int err, const char *top, const char *dir,
	    const char *name, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
/* Prefix the path of @e (relative to @dir) with "@top/@dir". */
int wh_prefix(struct hu_error *e, const char *top, const char *dir);

/* May directory @d hold an xattr whose name ends in @suffix (".opaque")?
 * False only when its listing says it holds none. */
bool wh_dir_may_hold(const struct wh_dir *d, const char *suffix);

/* The marker path of @d itself ("." for the root) and of @name in @d. */
const char *wh_dir_path(const struct wh_dir *d);
char *wh_ent_path(const struct wh_dir *d, const char *key);

/* A malloc'd, NUL-terminated xattr value of @name in @dirfd (NULL: the
 * fd itself), NULL when absent, and its length. */
int wh_xattr_read(int dirfd, const char *name, const char *attr, char **v,
		  ssize_t *len);

/* Overlay metadata of a regular file @name in @dirfd: metacopy, and the
 * redirect (malloc'd, NULL when none).  Both off for other formats. */
int wh_file_overlay(const struct hu_layer *l, int dirfd, const char *name,
		    bool *metacopy, char **redirect, struct hu_error *e);

/* Set or clear the opaque marker of directory @fd in @w's format; error
 * paths are relative to @fd ("" for @fd itself). */
int wh_opaque_fd(const struct hu_layer *w, int fd, bool opaque,
		 struct hu_error *e);

/* Refuse a half-converted layer (hu_layer.conv_to): its markers are in
 * two formats until the conversion is finished. */
int wh_check_whole(const struct hu_layer *l, struct hu_error *e);

/* @l with another format and namespace, for writing markers. */
struct hu_layer wh_layer_as(const struct hu_layer *l, enum hu_format f,
			    bool userxattr);

#endif
