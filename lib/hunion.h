/* SPDX-License-Identifier: MIT */
/*
 * hunion - union/overlay filesystem layers at rest.
 *
 * The public interface of libhunion.  The library never prints and never
 * exits: every call returns 0 on success or -1 with a struct hu_error
 * filled in (errno, the path it concerns, and a message); the caller
 * decides what the user sees.
 */
#ifndef HUNION_H
#define HUNION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* ---- errors (error.c) ------------------------------------------------ */

struct hu_error {
	int err;	/* errno, or 0 when the cause is not a system error */
	char *path;	/* what the error concerns, as the user named it */
	char msg[256];	/* what went wrong, without the path or errno text */
};

/* Fill @e and return -1; @path may be NULL.  A later call replaces the
 * earlier error. */
int hu_error_set(struct hu_error *e, int err, const char *path,
		 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Same, with the path given as "@dir/@name" (either part may be empty). */
int hu_error_setat(struct hu_error *e, int err, const char *dir,
		   const char *name, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
void hu_error_clear(struct hu_error *e);
/* Prepend @dir to the path of @e. */
void hu_error_prefix(struct hu_error *e, const char *dir);

/* Warnings and progress: the library reports, the front end decides. */
struct hu_report {
	void (*warn)(void *ctx, const struct hu_error *w);
	void (*progress)(void *ctx, uint64_t entries_done);
	void *ctx;
};
void hu_report_warn(const struct hu_report *r, int err, const char *dir,
		    const char *name, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* ---- layers and stacks (layer.c, detect.c) ----------------------------- */

enum hu_format {
	HU_FMT_AUTO = 0,	/* detect (input only) */
	HU_FMT_NONE,		/* detected: a layer with no markers at all */
	HU_FMT_UNION,		/* symlink whiteouts, union.opaque */
	HU_FMT_OVERLAY,		/* char 0/0 whiteouts, overlay.* xattrs */
	HU_FMT_OCI,		/* .wh.NAME files, .wh..wh..opq */
};

const char *hu_format_name(enum hu_format f);
/* Parse "auto", "union", "overlay", "oci"; -1 when unknown. */
int hu_format_parse(const char *s, enum hu_format *out);

struct hu_layer {
	char *path;		/* as given by the user, for messages */
	int fd;			/* the layer's root directory */
	dev_t dev;
	ino_t ino;
	enum hu_format format;	/* never AUTO once opened */
	bool userxattr;		/* markers under user.* instead of trusted.* */
};

struct hu_stack {
	size_t n;
	struct hu_layer *layers;	/* bottom first; layers[n-1] is the top */
};

struct hu_stack_opts {
	enum hu_format format;	/* AUTO: detect each layer */
	bool userxattr;		/* force user.* namespace for markers */
};

/* Open and check @n layers, bottom first.  Refuses missing or non-directory
 * layers, the same directory twice, mixed-format layers (naming the first
 * offending path) and trusted.* markers that cannot be read. */
int hu_stack_open(struct hu_stack *s, char *const paths[], size_t n,
		  const struct hu_stack_opts *o, struct hu_error *e);
void hu_stack_close(struct hu_stack *s);

/* Open one layer (used by commands that work on a single layer). */
int hu_layer_open(struct hu_layer *l, const char *path,
		  const struct hu_stack_opts *o, struct hu_error *e);
void hu_layer_close(struct hu_layer *l);

/* ---- markers: whiteouts and opaque directories (marker.c) -------------- */

/* The xattr name of marker attribute @what ("opaque", "whiteout",
 * "redirect", "metacopy") for format @f in the trusted or user namespace,
 * e.g. "trusted.overlay.opaque", written into @buf. */
const char *hu_marker_xattr(enum hu_format f, bool userxattr,
			    const char *what, char *buf, size_t len);

/* True for the xattr names that are private to union/overlay layers and
 * never shown in a merged view: {trusted,user}.{union,overlay}.* */
bool hu_xattr_is_private(const char *name);

enum hu_marker {
	HU_MARK_NONE = 0,	/* an ordinary entry */
	HU_MARK_WHITEOUT,	/* hides the same name in lower layers */
	HU_MARK_OPAQUE_FILE,	/* OCI .wh..wh..opq: makes its dir opaque */
	HU_MARK_META,		/* other .wh..wh.* AUFS metadata: not shown */
};

/* Classify entry @name of directory @dirfd in layer @l, whose lstat is
 * @st.  For OCI whiteouts *@target receives the hidden name (a pointer
 * into @name).  @xwhiteouts: the parent dir allows overlay xattr
 * whiteouts (overlay.opaque = "x" in a middle layer). */
int hu_marker_classify(const struct hu_layer *l, int dirfd, const char *name,
		       const struct stat *st, bool xwhiteouts,
		       enum hu_marker *kind, const char **target,
		       struct hu_error *e);

enum hu_opaque {
	HU_OPAQUE_NO = 0,
	HU_OPAQUE_YES,		/* hides lower directories of the same name */
	HU_OPAQUE_XWHITEOUTS,	/* overlay "x": may hold xattr whiteouts */
};

/* The opaque state of directory @fd of layer @l (xattr only; an OCI
 * .wh..wh..opq entry is found by listing the directory). */
int hu_marker_dir_opaque(const struct hu_layer *l, int fd,
			 enum hu_opaque *out, struct hu_error *e);

/* Create a whiteout for @name in @dirfd in format @f.  @name must not
 * exist (for OCI, ".wh.@name" must not exist). */
int hu_marker_add_whiteout(const struct hu_layer *l, enum hu_format f,
			   int dirfd, const char *name, struct hu_error *e);
/* Set or clear the opaque marker of directory @name in @dirfd. */
int hu_marker_set_opaque(const struct hu_layer *l, enum hu_format f,
			 int dirfd, const char *name, bool opaque,
			 struct hu_error *e);

/* ---- the merged view (view.c) ------------------------------------------ */

struct hu_vdir;

struct hu_ventry {
	const char *name;
	size_t layer;		/* index into the stack of the providing layer */
	int dirfd;		/* parent directory of @name in that layer */
	struct stat st;		/* lstat of the entry in that layer */
	bool hides_lower;	/* OCI: the same layer also whites the name out,
				 * so a directory here does not merge */
};

struct hu_view_opts {
	const struct hu_report *report;
};

/* The root of the merged view of @s.  The directory stays valid while
 * @s is open. */
int hu_vdir_open_root(const struct hu_stack *s, struct hu_vdir **out,
		      struct hu_error *e);
/* The child directory @ent of @d (ent->st must be a directory). */
int hu_vdir_open_child(struct hu_vdir *d, const struct hu_ventry *ent,
		       struct hu_vdir **out, struct hu_error *e);
void hu_vdir_close(struct hu_vdir *d);

/* The merged, bytewise sorted entries of @d.  Owned by @d. */
int hu_vdir_list(struct hu_vdir *d, const struct hu_ventry **ents,
		 size_t *n, struct hu_error *e);
/* The path of @d relative to the view root ("" for the root). */
const char *hu_vdir_path(const struct hu_vdir *d);
/* The topmost layer directory of @d: its metadata are the merged dir's. */
int hu_vdir_fd(const struct hu_vdir *d, size_t *layer);
/* True when @d merges directories of more than one layer. */
bool hu_vdir_is_merged(const struct hu_vdir *d);

/* Open the file whose bytes are @ent's data (following metacopy), read
 * only.  Returns the fd or -1. */
int hu_vdir_open_data(struct hu_vdir *d, const struct hu_ventry *ent,
		      struct hu_error *e);

/* A depth-first walk of the whole view, entries sorted, each directory
 * before its contents. */
struct hu_walk_ops {
	/* Called for every entry.  For directories, return 1 to descend. */
	int (*entry)(void *ctx, struct hu_vdir *d, const struct hu_ventry *ent,
		     struct hu_error *e);
	/* Called after a directory's contents (also for the root, with
	 * @ent NULL). */
	int (*leave)(void *ctx, struct hu_vdir *d, const struct hu_ventry *ent,
		     struct hu_error *e);
	/* Called before the root's contents, @d the root. */
	int (*enter_root)(void *ctx, struct hu_vdir *d, struct hu_error *e);
};
int hu_view_walk(const struct hu_stack *s, const struct hu_walk_ops *ops,
		 void *ctx, struct hu_error *e);

/* ---- merge into a new tree (merge.c) ----------------------------------- */

enum hu_data_mode {
	HU_DATA_COPY = 0,	/* reflink, then copy_file_range, then read/write */
	HU_DATA_LINK,		/* hard-link regular files to their source */
};

struct hu_merge_opts {
	enum hu_data_mode data;
	bool dry_run;		/* walk and count, write nothing */
	const struct hu_report *report;
};

struct hu_merge_stats {
	uint64_t dirs, files, symlinks, specials, hardlinks, skipped;
	uint64_t bytes;
};

/* Write the merged view of @s as a new plain tree at @out.  @out must not
 * exist and must not lie inside a layer.  The tree is built beside @out and
 * renamed into place when complete; on failure nothing is left. */
int hu_merge_tree(const struct hu_stack *s, const char *out,
		  const struct hu_merge_opts *o, struct hu_merge_stats *st,
		  struct hu_error *e);

/* ---- whiteouts of one layer (whiteout.c, convert.c) ---------------------- */

/* The markers of ONE layer (not the merged view), as 'whiteout ls' lists
 * them. */
enum hu_wh_kind {
	HU_WH_WHITEOUT = 0,	/* @path is hidden from the layers beneath */
	HU_WH_XWHITEOUT,	/* overlay xattr whiteout: an empty file with
				 * overlay.whiteout in a dir whose
				 * overlay.opaque is "x" (middle layers only) */
	HU_WH_OPAQUE,		/* directory @path hides those beneath */
	HU_WH_REDIRECT,		/* overlay: @path looks up @target beneath */
	HU_WH_METACOPY,		/* overlay: the data of @path lie beneath */
	HU_WH_META,		/* OCI: other .wh..wh.* (AUFS) metadata;
				 * never listed, only dropped by convert */
};

/* "whiteout", "xwhiteout", "opaque", "redirect", "metacopy", "meta". */
const char *hu_wh_kind_name(enum hu_wh_kind k);

struct hu_wh_marker {
	enum hu_wh_kind kind;
	const char *path;	/* relative to the layer root, "." for the
				 * root; for an OCI whiteout the path it
				 * hides (a/b for a/.wh.b) */
	const char *target;	/* HU_WH_REDIRECT: the xattr value, else NULL */
	enum hu_format format;
	bool userxattr;		/* under user.* (union, overlay) */
};

/* Return 0 to go on, -1 (with @e filled) to stop the walk. */
typedef int (*hu_wh_fn)(void *ctx, const struct hu_wh_marker *m,
			struct hu_error *e);

/* Call @fn for every marker of layer @l in order: depth first, the entries
 * of each directory sorted bytewise (an OCI whiteout by the name it
 * hides), a directory's own markers before its contents, as every walk of
 * hunion.  Never follows a symlink; no path length limit. */
int hu_wh_list(const struct hu_layer *l, hu_wh_fn fn, void *ctx,
	       struct hu_error *e);

/*
 * Edit the markers of @l by path: @path is relative to the layer root (a
 * leading '/' is allowed and means the same); a ".." component, a
 * component that is a symlink and a missing parent directory are refused.
 * Errors name "LAYER/PATH".  Return 0 when changed (or, dry, when it would
 * change), 1 when there is nothing to do (already a whiteout, already
 * (not) opaque), -1 on error.
 */
struct hu_wh_edit {
	enum hu_format format;	/* to write: AUTO for hu_wh_write_format() */
	bool dry_run;		/* check everything, change nothing */
};

/* The format hu_wh_add() and hu_wh_set_opaque() write in @l: its own;
 * for a layer with no markers (HU_FMT_NONE) @want, or union when @want is
 * AUTO.  A @want other than AUTO and the layer's own format is refused:
 * the layer would mix formats. */
int hu_wh_write_format(const struct hu_layer *l, enum hu_format want,
		       enum hu_format *out, struct hu_error *e);
/* Create a whiteout for @path.  @path must not exist in the layer. */
int hu_wh_add(const struct hu_layer *l, const struct hu_wh_edit *o,
	      const char *path, struct hu_error *e);
/* Remove the whiteout of @path (in @l's format; OCI: .wh.NAME). */
int hu_wh_remove(const struct hu_layer *l, const struct hu_wh_edit *o,
		 const char *path, struct hu_error *e);
/* Set or clear the opaque marker of directory @path ("", "." or "/": the
 * layer root). */
int hu_wh_set_opaque(const struct hu_layer *l, const struct hu_wh_edit *o,
		     const char *path, bool opaque, struct hu_error *e);

/* What convert does with one marker of the source layer. */
enum hu_wh_action {
	HU_WH_CONVERTED = 0,	/* rewritten in the target format */
	HU_WH_MADE_OPAQUE,	/* OCI whiteout of a directory the layer also
				 * holds: that directory made opaque */
	HU_WH_DROPPED,		/* means nothing in the target: left out (an
				 * OCI whiteout of a non-directory the layer
				 * also holds, AUFS metadata) */
};

struct hu_convert_opts {
	enum hu_format to;	/* UNION, OVERLAY or OCI */
	bool to_userxattr;	/* write markers under user.* */
	bool dry_run;		/* check and report, write nothing */
	/* Called for each marker changed (or, dry, that would change). */
	void (*change)(void *ctx, const struct hu_wh_marker *m,
		       enum hu_wh_action a);
	void *ctx;
	const struct hu_report *report;
};

struct hu_convert_stats {
	uint64_t converted;	/* CONVERTED and MADE_OPAQUE */
	uint64_t dropped;
	uint64_t entries;	/* -o: entries written */
	bool started;		/* in place: the layer was changed (so a failure
				 * left it partly converted) */
};

/*
 * Rewrite every marker of layer @l in format @o->to.  Refused, before
 * anything is written: overlay redirects and metacopy files when the
 * target is not overlay (naming the first such path).
 *
 * @out non-NULL: write a converted copy of the whole layer as the new
 * directory @out (must not exist, nor lie inside @l), keeping data, hard
 * links, modes, owners (as root), times and public xattrs; built beside
 * @out, renamed into place when complete, removed on failure.  Entries
 * that would read as markers of the target format (a ".wh.*" file for
 * oci, a char device 0/0 for overlay) are refused.
 *
 * @out NULL: in place, through the write wrapper.  A new marker is made
 * before the old one goes (for the same name: made under a temporary name
 * and renamed over it), so no name is ever left unhidden; directory times
 * are restored.  Markers already in the target format are kept, so a
 * conversion that stopped midway can be run again (with the source
 * format forced if the layer is then refused as mixed).
 */
int hu_wh_convert(const struct hu_layer *l, const char *out,
		  const struct hu_convert_opts *o,
		  struct hu_convert_stats *st, struct hu_error *e);

#endif /* HUNION_H */
