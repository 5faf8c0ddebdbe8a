/* SPDX-License-Identifier: MIT */
/*
 * Tarball layers, private to tarlayer.c and tarindex.c: the index of the
 * paths a tarball has made so far, and of its directories, whose modes and
 * times are set once everything beneath them is written.
 */
#ifndef HUNION_TARLAYER_H
#define HUNION_TARLAYER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/stat.h>
#include <time.h>

#include "hunion.h"

enum {
	TI_DIR = 1 << 0,	/* a directory */
	TI_EXPLICIT = 1 << 1,	/* named by an entry (else a parent made for
				 * one) */
	TI_GONE = 1 << 2,	/* replaced by a later entry */
	/* Streamed over the layers beneath (tl.over): */
	TI_BELOW = 1 << 3,	/* a directory that was there already, the
				 * layers beneath's, merged with this one */
	TI_BELOW_GONE = 1 << 4,	/* the layers beneath's directory here was
				 * removed by an entry of this tarball */
	TI_STASHED = 1 << 5,	/* a parent no entry names, made where the
				 * layers beneath have a non-directory, which
				 * waits in tl.stash: back if the parent
				 * goes */
};

#define TI_NONE UINT32_MAX
#define TI_ROOT 0

/* One name made by the tarball.  A node of a directory removed since
 * stays, with its old flags: the disk says what is there. */
struct ti_node {
	const char *name;	/* "" for the root */
	uint32_t parent;	/* TI_NONE for the root */
	uint32_t child, next;	/* first child, next sibling */
	uint32_t hash;
	uint32_t dir;		/* index into tar_index.dirs, or TI_NONE */
	uint8_t flags;
};

/* What a directory gets once its contents are written. */
struct ti_dir {
	uint32_t node;
	mode_t mode;
	struct timespec times[2];	/* atime, mtime */
	bool explicit_;		/* from an entry; else made as a parent */
	bool gone;		/* replaced by a non-directory */
	/* TI_BELOW and not named: the directory's mode and times beneath,
	 * which it keeps unless this tarball hides what lies beneath */
	mode_t below_mode;
	struct timespec below_times[2];
};

struct ti_chunk;

struct tar_index {
	struct ti_node *nodes;	/* nodes[TI_ROOT] is the root */
	size_t n, ncap;
	uint32_t *table;	/* (parent, name) -> node + 1; 0 when free */
	size_t tcap;
	struct ti_dir *dirs;
	size_t ndirs, dcap;
	struct ti_chunk *chunks;	/* the names */
};

/* An index holding the root only; -1 when out of memory. */
int ti_init(struct tar_index *x);
/* The node of @name (@len bytes) in @parent, added (flags 0) when missing
 * and @add; TI_NONE when missing or out of memory. */
uint32_t ti_child(struct tar_index *x, uint32_t parent, const char *name,
		  size_t len, bool add);
/* The same for a normalised path ("" is the root). */
uint32_t ti_path(struct tar_index *x, const char *path, bool add);
/* The directory record of @node, made when missing; NULL when out of
 * memory.  Pointers are valid until the next ti_dir. */
struct ti_dir *ti_dir(struct tar_index *x, uint32_t node);
/* The path of @node, malloc'd ("" for the root); NULL when out of memory. */
char *ti_name_path(const struct tar_index *x, uint32_t node);
void ti_free(struct tar_index *x);

/* ---- one unpack (tarlayer.c, tardirs.c) ---- */

struct archive;
struct archive_entry;
struct tar_src;

struct tl {
	struct hu_layer *l;
	const struct hu_stack *below;	/* the layers beneath, or NULL */
	const struct hu_report *r;
	struct hu_error *e;
	struct tar_src *src;
	struct archive *a;
	struct archive_entry *ae;
	const char *raw;	/* the current entry's name, as in the tarball */
	char *last;		/* the last entry read, for errors after it */
	int root;		/* the layer's root directory */
	struct tar_index ix;
	bool as_root;
	bool root_timed;	/* the root has times (from an entry) */
	struct timespec times[2];	/* the current entry's atime, mtime */
	char *cpath;		/* the last parent directory used: path, */
	int cfd;		/* fd */
	uint32_t cnode;		/* and node */
	uint64_t done;
	uint64_t size;		/* the tarball file's, for progress */
	uint64_t counted;	/* of it, in r->bytes->tarball_done */
	char *what;		/* what progress calls it, when not the
				 * layer's path: an image layer's short
				 * name (hu_oci_layer_name) */
	size_t blk;		/* the block size holes are made of */
	/* The tree is merge -o's output (hu_tarlayer_extract), not a layer:
	 * its markers go once its directories are done, as the view hides
	 * them, and what is written is counted here. */
	bool to_output;
	struct hu_merge_stats *stats;
	/* An output that holds the layers beneath already (merge -o of a
	 * stack of tarballs, the second one on): each entry goes over what
	 * is there as the view would put this layer over them, and at the
	 * end what this tarball hides is removed (tardirs.c).  @fallback:
	 * the tarball asked for what the stream cannot do (a directory of
	 * the layers beneath replaced by an entry, then made again): the
	 * caller takes the general path. */
	bool over;
	bool fallback;
	int stash;		/* -1, or the directory (in the root, named
				 * stash_name) of what the parents this
				 * tarball makes replaced, by node number */
	char stash_name[40];
	/* What makes each entry: tl_entry, or (NULL) so; the path index
	 * (pindex.c) records it instead. */
	int (*entry)(struct tl *t);
	/* Optional: each warning (its entry t->raw) as it is given, to
	 * @r or not; and instead of what a problem sink would take (a
	 * path stated again, a hard link forward: left out, 0 to go on),
	 * @kind a TL_PROBLEM_*.  The path index keeps them, to give them
	 * as the unpack would, to a reader with a sink or without
	 * (hu_pindex_replay()). */
	void (*warned)(struct tl *t, int err, const char *msg);
	int (*problem)(struct tl *t, int kind, const char *path,
		       const char *msg);
	/* The index: the stored bytes' sha256 taken too, for a tarball that
	 * is no image's layer (tar_src_hash_stored). */
	bool hash_stored;
};

enum {
	TL_PROBLEM_DUPLICATE = 1,	/* @msg the warning */
	TL_PROBLEM_DIR_AGAIN,		/* a directory restated: @msg */
	TL_PROBLEM_LINK_FORWARD,	/* @msg the escaped target */
};

/* Read tarball @fd (t->l->image's layer t->l->image_layer, verified, when
 * it is one) entry by entry through t->entry, to its verified end. */
int tl_read_tarball(struct tl *t, int fd);
/* What a read leaves: all but the layer's root (t->cfd, t->stash: -1 or
 * open). */
void tl_release(struct tl *t);
/* The current entry's atime and mtime into t->times (UTIME_OMIT when the
 * tarball has none). */
void tl_entry_times(struct tl *t);
/* A whiteout or the opaque marker, made an empty file whatever the
 * entry's type. */
bool tl_is_marker_name(const char *leaf);
/* The current entry, a hard link to @hl, made at @path (@esc: @hl escaped
 * for messages): its target normalised into *@norm (malloc'd), a path an
 * earlier entry made and that is there, not a directory.  0, 1 when the
 * link is to the entry itself (nothing to do, warned), or -1. */
int tl_link_target(struct tl *t, const char *hl, const char *path,
		   char **norm, const char *esc);
/* The xattr name that @name, a key's suffix as libarchive gives it, stands
 * for (paxxattr.c) in @dec, or @name itself when it cannot be decoded;
 * NULL when the unpack leaves it out (empty, or private to layers). */
const char *tl_xattr_name(const struct tl *t, const char *name, char *dec,
			  size_t size);
/* setxattr(2) failed with @err: a warning, the attribute not kept (the
 * filesystem or the kernel refuses it), rather than an error? */
bool tl_xattr_unsupported(int err);

/* Fail naming the current entry ("LAYER: ENTRY: message"), or naming
 * @path instead. */
int tl_fail(struct tl *t, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int tl_fail_at(struct tl *t, const char *path, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* A warning naming the current entry. */
void tl_warn(struct tl *t, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* "@layer: @entry", the name a message of entry @entry (raw; NULL: of the
 * tarball @layer as a whole) is given: malloc'd, NULL when out of
 * memory. */
char *tl_where(const char *layer, const char *entry);
/* Warning @msg of entry @entry (raw; NULL: of the tarball @layer as a
 * whole) to @r, worded as tl_warn() words it. */
void tl_warn_at(const struct hu_report *r, const char *layer,
		const char *entry, int err, const char *msg);
/* libarchive cannot go on: a corrupt or truncated tarball, named by the
 * current entry or the last one read; @when says where it broke. */
int tl_archive_fail(struct tl *t, const char *when);
/* Make the entry libarchive just read (tarentry.c). */
int tl_entry(struct tl *t);
/* A write failed: the message says where unpacking goes when space ran
 * out. */
int tl_write_fail(struct tl *t, int err, const char *what);
/* @s with control bytes and '\' escaped, for a name inside a message:
 * whole, malloc'd; "" (static) when memory ran out.  tl_escape_free()
 * frees it. */
char *tl_escape(const char *s);
void tl_escape_free(char *esc);

/* The parent directory @dir of an entry, made (as a parent no entry names)
 * when missing; the fd is borrowed (kept open for the next entry). */
int tl_parent_dir(struct tl *t, const char *dir, uint32_t *node);
void tl_drop_cache(struct tl *t);
/* Open directory @dir of the layer without making anything: an fd the
 * caller closes, or -1; when it is not there (or a component is no
 * directory), -1 with errno ENOENT and no error set. */
int tl_open_dir(struct tl *t, const char *dir);
/* Modes and times of every directory, deepest first; directories no entry
 * named take their metadata from the layers beneath. */
int tl_finish_dirs(struct tl *t);
/* Over the layers beneath (tl.over): the output's root is theirs. */
int tl_over_start(struct tl *t);
/* Is node @id there: made by this tarball, not replaced since? */
bool tl_live(const struct tar_index *x, uint32_t id);
/* Every xattr of @leaf in @dfd (NULL: @dfd itself) removed: the layers
 * beneath's, where this tarball's entry or parent stands. */
int tl_clear_xattrs(struct tl *t, int dfd, const char *leaf);
/* Stop: the caller takes the general path (tl.fallback). */
int tl_fall_back(struct tl *t);

/* ---- the decompressed bytes of a tarball (tarsrc.c) ---- */

enum tar_comp { TAR_PLAIN = 0, TAR_GZIP, TAR_ZSTD };

struct tar_src;

/* Read @fd (from its start) decompressed, by its magic; NULL when out of
 * memory. */
struct tar_src *tar_src_open(int fd);
void tar_src_free(struct tar_src *s);
enum tar_comp tar_src_comp(const struct tar_src *s);
const char *tar_comp_name(enum tar_comp c);
/* "gzip", "zstd" or "uncompressed", for messages. */
const char *tar_comp_label(enum tar_comp c);
/* @fd's compression by the magic of its first bytes (read with pread). */
enum tar_comp tar_comp_sniff(int fd);
/* The compression the media type of layer @k of @img names. */
enum tar_comp tar_comp_of_layer(const struct hu_oci_image *img, size_t k);
/* The next bytes into *@buf (valid until the next call): their count, 0
 * at the end, -1 with tar_src_error() set. */
ssize_t tar_src_read(struct tar_src *s, const void **buf);
/* The tar's end-of-archive block must begin at offset @at of the
 * decompressed stream: the reader says so after each entry it has read
 * whole (its data and padding); tar_src_end_found() tells, once the
 * reader is at the end, whether a zero block is there (not the end of
 * the stream, nor more entries). */
void tar_src_expect_end(struct tar_src *s, uint64_t at);
bool tar_src_end_found(const struct tar_src *s);
/* Read to the end, so that a stream cut short is found: 0, or -1. */
int tar_src_drain(struct tar_src *s);
const char *tar_src_error(const struct tar_src *s);
/* Check the stream, as it is read, as an image's layer: the stored bytes'
 * size and sha256 against @size and @blob, the sha256 of every
 * decompressed byte (the tar and whatever follows it: the DiffID) against
 * @diff_id, the compression of its bytes against @comp (its media
 * type's: the first read fails when they differ).  Before the first
 * read; -1 when out of memory. */
int tar_src_verify(struct tar_src *s, const char *blob, uint64_t size,
		   const char *diff_id, enum tar_comp comp);
/* Take the sha256 of the stored bytes as they are read, checked against
 * nothing (a tarball that is no image's layer, for its path index).
 * Before the first read; -1 when out of memory. */
int tar_src_hash_stored(struct tar_src *s);
/* Once the stream is read to its end (tar_src_verify_end, or
 * tar_src_drain): "sha256:HEX" of the stored bytes, into @out.  -1 when
 * they were not hashed. */
int tar_src_stored_digest(struct tar_src *s, char out[72]);
/* The decompressed bytes handed out so far: the tar stream's size, once
 * it is read to its end. */
uint64_t tar_src_pos(const struct tar_src *s);
/* Read the rest and compare: 0, or -1 with tar_src_error() saying what
 * differs.  0 when not verifying. */
int tar_src_verify_end(struct tar_src *s);
/* A verified stream that ended without its tar's padding and end blocks
 * is given them as zeros: where its real bytes end (UINT64_MAX while they
 * have not, or never for an unverified stream).  An entry whose data
 * ends past it was cut short. */
uint64_t tar_src_real_end(const struct tar_src *s);
/* For progress: the stored bytes (compressed) behind the decompressed
 * position @pos the tar reader has reached (archive_filter_bytes(a, 0)),
 * not those the producer has read ahead: what is left to do is the
 * file's size less this. */
uint64_t tar_src_bytes_done(const struct tar_src *s, uint64_t pos);
/* Count them into @b too (the run's bytes read).  Before the first read. */
void tar_src_count_into(struct tar_src *s, struct hu_progress_bytes *b);
/* Open @a (archive_read_new) to read the tar format from @s: libarchive's
 * status, its message in @a. */
int tar_src_archive_open(struct tar_src *s, struct archive *a);
/* archive_read_next_header(), its pax names (UTF-8) converted in
 * C.UTF-8 rather than the process's locale, in which a non-ASCII one
 * draws a warning; libarchive's status. */
int tar_src_next_header(struct archive *a, struct archive_entry **ae);
/* Read the rest of the entry @a is at (the data no one wanted, the
 * padding): where it ends, the end-of-archive block begins, unless
 * another entry does.  libarchive's status. */
int tar_src_entry_skip(struct tar_src *s, struct archive *a);
/* libarchive said ARCHIVE_EOF: 0 when the archive really ends there
 * (tar_src_end_found) and the stream after it is whole (tar_src_drain);
 * -1 with the message in @a. */
int tar_src_archive_end(struct tar_src *s, struct archive *a);

#endif /* HUNION_TARLAYER_H */
