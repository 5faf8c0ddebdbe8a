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
	char *msg;	/* what went wrong, without the path or errno text,
			 * whole (malloc'd; NULL when none, or when memory
			 * ran out for it) */
	bool whole;	/* path is already complete: hu_error_prefix leaves
			 * it alone */
};

/* Fill @e and return -1; @path may be NULL.  A later call replaces the
 * earlier error; its arguments may be the earlier error's own path and
 * message (e->path, e->msg): they are read before they are replaced. */
int hu_error_set(struct hu_error *e, int err, const char *path,
		 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Same, with the path given as "@dir/@name" (either part may be empty). */
int hu_error_setat(struct hu_error *e, int err, const char *dir,
		   const char *name, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
void hu_error_clear(struct hu_error *e);
/* Has @e a message (it was set, and memory held for the message)? */
static inline bool hu_error_has_msg(const struct hu_error *e)
{
	return e->msg && e->msg[0];
}
/* Ask whatever this process is doing to stop: the next check, between two
 * entries, fails with "interrupted", and the operation cleans up as after
 * any error (no output file, no unpacked layer left behind).  For a signal
 * handler: async-signal-safe, and it cannot be undone. */
void hu_interrupt(void);
/* Until called with false, nothing this process writes through the
 * library reaches the filesystem: a file written goes to /dev/null (its
 * bytes counted and hashed as if written), standard output gets none,
 * and renames, links and removals are skipped.  For the dry runs of the
 * commands that write one output file (flatten -n, diff --oci -n). */
void hu_dry_run(bool on);
/* Has hu_interrupt() been called? */
bool hu_interrupted(void);
/* Prepend @dir to the path of @e. */
void hu_error_prefix(struct hu_error *e, const char *dir);

/* Warnings and progress: the library reports, the front end decides.
 * Progress is reported often, about every 256 entries (every 16 of a
 * tarball read), perhaps from a worker thread: a callback keeps it cheap
 * and decides by its own clock what to draw. */
/* Bytes moved so far, for live progress: @read of file data and tarballs
 * (as stored, compressed), @written to the output (a tarball's bytes
 * after compression, a tree's file data).  Counted where the data moves,
 * perhaps by several threads, with relaxed atomics: the front end only
 * reads them to draw a line. */
struct hu_progress_bytes {
	_Atomic uint64_t read, written;
	/* The entries done as hu_report_progress() was last told, every
	 * call (the callback sees every 256th), so that the last line can
	 * say the last count. */
	_Atomic uint64_t entries;
	/* The tarballs read (tarlayer.c): the stored bytes behind the
	 * entries taken from them so far, and their sizes. */
	_Atomic uint64_t tarball_done, tarball_size;
	/* Optional: called, from the thread that counts, each time either
	 * count passes one more MiB, so that a front end can redraw while
	 * one big file moves (entries are reported only between files). */
	void (*tick)(void *ctx);
	void *ctx;
};
void hu_progress_bytes_add(struct hu_progress_bytes *b, uint64_t read,
			   uint64_t written);

struct hu_report {
	void (*warn)(void *ctx, const struct hu_error *w);
	void (*progress)(void *ctx, uint64_t entries_done);
	/* Optional, instead of progress while a tarball @what is read:
	 * its entries so far, and of its @size (the file's) the stored
	 * bytes behind them (those read ahead not counted: what is left
	 * is @size - @read); @read is @size once its last entry is in. */
	void (*progress_read)(void *ctx, const char *what,
			      uint64_t entries_done, uint64_t read,
			      uint64_t size);
	/* Where the bytes moved are counted (copy.c, a tarball read or
	 * written); NULL: not counted. */
	struct hu_progress_bytes *bytes;
	/* Optional: the run's phase changed (hu_report_phase()). */
	void (*phase)(void *ctx, const char *phase, const char *what);
	void *ctx;
};
void hu_report_warn(const struct hu_report *r, int err, const char *dir,
		    const char *name, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* @n entries done, the @n-th begun: reported at the first (so that a front
 * end shows a line from the start, and its byte ticks redraw it while a
 * first big file moves) and then every 256th; each @n is kept in
 * r->bytes->entries (1 starts a new count; else the highest stays, as
 * worker threads report out of order). */
void hu_report_progress(const struct hu_report *r, uint64_t n);
/*
 * What the run does from now on, so that no long phase is silent: @phase
 * one of the HU_PHASE_* words below (a front end shows it and writes it
 * into its JSON lines as it is), @what what it is done to (a tarball's
 * path, an image's layer, an output; NULL: the run as a whole).  Each
 * module calls it as a phase of its own begins: a tarball unpacked or
 * read, a walk, the path index built (pindex.c), the clean-up at the end
 * (hu_aside_remove()).  The counts that follow (hu_report_progress(), a
 * tarball's progress_read) are the phase's.  @what is copied.
 */
void hu_report_phase(const struct hu_report *r, const char *phase,
		     const char *what);
#define HU_PHASE_UNPACKING "unpacking"	/* a tarball into TMPDIR */
#define HU_PHASE_READING "reading"	/* a tarball into the output */
#define HU_PHASE_INDEXING "indexing"	/* a blob's path index built */
#define HU_PHASE_WRITING "writing"	/* the view into an output */
#define HU_PHASE_COMPARING "comparing"	/* diff's walk */
#define HU_PHASE_CHECKING "checking"	/* fsck's walk */
#define HU_PHASE_MERGING "merging"	/* merge --into's walk */
#define HU_PHASE_CLEANING "cleaning up"	/* what killed runs left */

/*
 * What killed runs left is moved aside when a run meets it (one rename,
 * aside.c), never removed before the run's own work: the front end calls
 * hu_aside_remove() once the command's work is done.  It removes what
 * this process moved aside, phase HU_PHASE_CLEANING with each one's
 * path, @removed (may be NULL) told of each; it stops when interrupted
 * (the rest stays aside for the next run).  -1 with @e the first that
 * could not be removed (the others are tried).
 */
int hu_aside_remove(const struct hu_report *r,
		    void (*removed)(void *ctx, const char *path), void *ctx,
		    struct hu_error *e);
size_t hu_aside_pending(void);
/*
 * `hunion clean`: what killed runs left in TMPDIR (or /var/tmp), this
 * user's: tarball layers' unpack directories no live run holds, and what
 * was moved aside there by runs that died before removing it.  With
 * @dry_run each is only told (@found); else each is moved aside, to be
 * removed by hu_aside_remove().  @dir gets the directory (malloc'd).
 */
int hu_tmp_clean(bool dry_run, void (*found)(void *ctx, const char *path),
		 void *ctx, char **dir, struct hu_error *e);

/* ---- problems: the inconsistencies a layer can hold (problem.c) -------- */

/* One per line of problem.def: HU_PB_WHITEOUT_ORPHAN... */
enum hu_problem_id {
#define HU_PROBLEM(name, id, sev, repair, msg, action) HU_PB_##name,
#include "fsck/problem.def"
#undef HU_PROBLEM
	HU_PB_COUNT
};

enum hu_severity {
	HU_SEV_IGNORE = 0,	/* only through --severity: not reported */
	HU_SEV_INFO,
	HU_SEV_WARNING,
	HU_SEV_ERROR,
};

enum hu_repair {
	HU_REPAIR_NONE = 0,	/* cannot be repaired here */
	HU_REPAIR_SAFE,		/* cannot lose user data */
	HU_REPAIR_DESTRUCTIVE,	/* can change what the view shows */
};

struct hu_problem_info {
	const char *id;		/* "whiteoutOrphan": stable, camelCase */
	enum hu_severity severity;
	enum hu_repair repair;
	const char *message;	/* what is wrong */
	const char *action;	/* what the repair did ("" when NONE) */
};

const struct hu_problem_info *hu_problem_info(enum hu_problem_id id);
/* The problem of ID @id ("whiteoutOrphan"); -1 when there is none. */
int hu_problem_parse(const char *id, enum hu_problem_id *out);
/* "ignore", "info", "warning", "error"; -1 when unknown. */
const char *hu_severity_name(enum hu_severity s);
int hu_severity_parse(const char *s, enum hu_severity *out);

/* One problem met: in layer @layer (its path as the user gave it, or
 * NULL for the stack as a whole) at @path, relative to the layer root
 * ("" for the root); @detail (may be NULL) the offending value. */
struct hu_problem {
	enum hu_problem_id id;
	const char *layer;
	const char *path;
	const char *detail;
};

/* What a reader does when it meets a problem (hu_stack_opts.problems). */
enum hu_problem_policy {
	HU_PB_FAIL = 0,		/* stop: the call fails, the problem's
				 * message in the error */
	HU_PB_WARN,		/* a warning through the report; go on */
	HU_PB_COLLECT,		/* call @found; go on as the kernel would
				 * (where it can: an fd that does not exist
				 * still fails) */
};

struct hu_problem_sink {
	enum hu_problem_policy policy;
	/* COLLECT: return 0 to go on, -1 (with @e filled) to stop. */
	int (*found)(void *ctx, const struct hu_problem *p,
		     struct hu_error *e);
	void *ctx;
};

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

struct hu_pindex;
struct hu_pcache;
struct hu_ldir_imp;
struct hu_pstream;
struct hu_layer {
	char *path;		/* as given by the user, for messages */
	int fd;			/* the layer's root directory */
	dev_t dev;
	ino_t ino;
	struct timespec ctime;	/* its root's when opened (a directory) */
	enum hu_format format;	/* never AUTO once opened */
	bool userxattr;		/* markers under user.* instead of trusted.* */
	bool by_record;		/* format from the record fsck left (no
				 * markers: every filesystem reads it alike) */
	bool deferred;		/* format not detected yet: NONE until the
				 * view meets a marker (hu_layer_settle) */
	/* Deferred, and read by several threads at once, which must not
	 * see it change: hu_layer_settle() fails (EAGAIN) and sets *@hold
	 * (a flag of the caller's, outside the layer, which threads copy),
	 * for the caller to settle it once they have stopped.  NULL: not
	 * held. */
	bool *hold;
	bool streamed;		/* a tarball layer opened with
				 * hu_stack_opts.tar_sources: @fd is the
				 * tarball (or blob) itself, not unpacked */
	char *unpacked;		/* a tarball layer: the private directory it
				 * was unpacked into (removed by
				 * hu_layer_close); NULL for a directory */
	int unpacked_lock;	/* with @unpacked: that directory, open and
				 * flocked while it is in use (-1: none) */
	dev_t file_dev;		/* with @unpacked: the tarball file itself */
	ino_t file_ino;
	/* Half-converted (a 'whiteout convert --in-place' that stopped,
	 * known by its record on the layer root): the format and namespace
	 * being written, whose markers count as well as those of @format.
	 * AUTO for every other layer. */
	enum hu_format conv_to;
	bool conv_to_userxattr;
	/* Where detection and the view report the problems they meet in
	 * this layer, and where a WARN sink's warnings go: from
	 * hu_stack_opts (problems, report) when the layer is opened. */
	const struct hu_problem_sink *problems;
	const struct hu_report *report;
	/* Whether the layer holds an overlay redirect or metacopy xattr
	 * (either namespace): asked of the top layer's detection by
	 * hu_stack_opts.find_refs (ASK), answered NONE or SOME; UNKNOWN
	 * when not asked, or not detected (a format given). */
	enum hu_refs { HU_REFS_UNKNOWN, HU_REFS_ASK, HU_REFS_NONE,
		       HU_REFS_SOME } refs;
	bool files_private;	/* answered with refs: a regular file holds
				 * a union or overlay xattr */
	/* Detected OCI for its .wh. names alone, without a union or
	 * overlay marker: in a stack whose other directory layers are
	 * union or overlay such names are ordinary files, and the stack
	 * reads the layer as NONE (layer.c).  @wh_path: the first .wh.
	 * name met (malloc'd, relative to the root), for a warning. */
	bool oci_by_names;
	char *wh_path;
	/* Detection walked the whole layer and met no entry of any type
	 * named ".wh.*" or like a conversion's temporary files: with format
	 * NONE, a conversion has nothing to refuse and nothing to change. */
	bool names_plain;
	/* From hu_stack_opts.workdir_given; and whether detection found
	 * as many union as overlay markers and nothing else to go by (its
	 * format a guess, whose foreign markers no repair may rewrite). */
	bool workdir_given;
	bool format_tied;
	/* The stack the layer is one of (NULL: opened alone), which the
	 * rule above reads when a deferred layer settles. */
	struct hu_layer *peers;
	size_t npeers;
	/* The layer's filesystem lists a directory in as few getdents(2)
	 * calls as its buffer allows, and none is mounted beneath its root:
	 * a short read is the end (hu_layer_names_read). */
	bool readdir_fills;
	/* A layer of an image (the operand oci:DIR[:REF]): the image it is
	 * one of and its index there, bottom first; NULL for every other
	 * layer.  The stack owns the image (hu_stack.images). */
	const struct hu_oci_image *image;
	size_t image_layer;
	/* A tarball layer read from its path index (tar/pindex.h), never
	 * unpacked: @fd and every directory of it are handles of the index
	 * (layer/ldir.h), not fds; NULL for every other layer.  The layer
	 * owns the index, and keeps what its implicit directories take
	 * from the layers beneath (@implied, sorted by node). */
	struct hu_pindex *pindex;
	bool pindex_cached;	/* read from the cache, not made */
	struct hu_ldir_imp *implied;
	size_t nimplied;
	/* With hu_stack_opts.index_data: the tarball, whose files' data are
	 * read forward from it (@pstream, tar/pdata.h, opened at the first
	 * one); -1 for every other layer. */
	int tar_fd;
	struct hu_pstream *pstream;
};

/* ---- the path index cache (tar/pcache.c) -------------------------------- */

/* What the front end needs of the cache of path indexes (tar/pindex.h
 * says the rest): hu_stack_opts.pcache opened from directory @dir (NULL:
 * $XDG_CACHE_HOME/hunion, else $HOME/.cache/hunion), trimmed to its
 * bound after the command's own work, closed. */
int hu_pcache_open(struct hu_pcache **c, const char *dir, struct hu_error *e);
int hu_pcache_trim(struct hu_pcache *c, struct hu_error *e);
void hu_pcache_close(struct hu_pcache *c);

/* ---- OCI images (lib/oci/) ---------------------------------------------- */

/* A content descriptor: what a manifest or an index says of a blob. */
struct hu_oci_desc {
	char media_type[128];
	char digest[72];	/* "sha256:" and 64 lowercase hex digits */
	uint64_t size;
};

/* An image read from an OCI image layout, its JSON documents verified
 * (size and sha256) and parsed: what the operand oci:DIR[:REF] names.
 * Its layer blobs are verified as they are read (size, sha256, and the
 * sha256 of the uncompressed tar against diff_ids). */
struct hu_oci_image {
	char *layout;		/* DIR as given */
	int layout_fd;		/* DIR, O_DIRECTORY */
	char *ref;		/* REF as given (a tag, or @sha256:...); NULL */
	struct hu_oci_desc manifest;
	struct hu_oci_desc config;
	char *config_json;	/* the config blob, verified, NUL-terminated */
	size_t config_len;
	size_t nlayers;
	struct hu_oci_desc *layers;	/* bottom first */
	bool *layer_urls;		/* per layer: given with urls (a
					 * foreign layer) */
	char (*diff_ids)[72];		/* the config's rootfs.diff_ids */
};

/* Does operand @arg name an image ("oci:" first)?  A directory whose name
 * begins so is given as ./oci:... */
bool hu_oci_operand(const char *arg);
/* Split the operand "oci:DIR[:REF]" into DIR and REF (NULL when none),
 * malloc'd.  DIR may hold ':'.  REF is what follows the last ":@" (then
 * "@sha256:HEX"), else what follows the last ':' if it is a tag
 * ([A-Za-z0-9_][A-Za-z0-9._-]*, at most 128 bytes) or empty (no REF:
 * "oci:a:b:" is the layout a:b); else the whole of it is DIR. */
int hu_oci_operand_parse(const char *arg, char **layout, char **ref,
			 struct hu_error *e);
/* Open the image @ref (NULL: the layout's only one) of the layout at
 * @layout (relative to @dirfd, or AT_FDCWD; the path is followed, the
 * layout's insides never): index.json's entry by tag or digest, indexes resolved to
 * @platform ("os/arch[/variant]"; NULL: the host's), manifest and config
 * read, verified and parsed, each layer blob there with its size.  What
 * cannot be read is refused naming the blob and the layout. */
int hu_oci_image_open(int dirfd, const char *layout, const char *ref,
		      const char *platform, struct hu_oci_image **out,
		      struct hu_error *e);
void hu_oci_image_close(struct hu_oci_image *img);
/* Layer @k of @img as its progress line names it, short:
 * "oci:DIR[:REF] layer K/N sha256:0123456789ab" and an ellipsis (K from
 * 1, twelve hex digits of its digest), malloc'd; NULL when out of memory. */
char *hu_oci_layer_name(const struct hu_oci_image *img, size_t k);
/* Open the blob @d of @img (a regular file, no symlink on the way, of
 * @d's size): its fd, or -1. */
int hu_oci_blob_open(const struct hu_oci_image *img,
		     const struct hu_oci_desc *d, struct hu_error *e);


struct hu_stack {
	size_t n;
	struct hu_layer *layers;	/* bottom first; layers[n-1] is the top */
	const struct hu_problem_sink *problems;	/* from hu_stack_opts */
	/* The images whose layers are in @layers (operands oci:DIR[:REF]),
	 * owned by the stack, closed by hu_stack_close. */
	struct hu_oci_image **images;
	size_t nimages;
};

struct hu_stack_opts {
	enum hu_format format;	/* AUTO: detect each layer */
	bool userxattr;		/* force user.* namespace for markers */
	size_t defer_below;	/* with AUTO: the bottom N layers detect their
				 * format only when the view meets a marker
				 * in them, so that a command that reads a
				 * few paths of a huge lower does not walk
				 * it whole (diff) */
	size_t defer_look;	/* with defer_below: at the open, beside the
				 * other layers' detections, each deferred
				 * layer's first N directories are looked at;
				 * one that shows a marker-like entry there is
				 * detected then and there (fsck -n
				 * --all-layers: a bottom layer with markers
				 * keeps its detection side by side) */
	bool workdir_given;	/* an overlay workdir was given: a layer
				 * with as many union as overlay markers
				 * is overlay (detect.c) */
	bool find_refs;		/* the top layer's detection also answers
				 * hu_layer.refs (one xattr listing per
				 * regular file): what merge --into needs
				 * to skip its search */
	/* Tarball and image layers below the top one read from their path
	 * index (layer/ldir.h) instead of unpacked: for a command that reads
	 * no file data of theirs (diff's listing).  @pcache: where the
	 * indexes are kept (NULL: made afresh each time, --no-cache). */
	bool index_tars;
	/* With @index_tars: the top layer too, and the layers' file data
	 * read as well, forward from each tarball (layer/ldir.h:
	 * hu_ldir_copy_data), for a reader in the view's order (flatten);
	 * a tarball whose data is not in that order (hu_pindex_in_order)
	 * is unpacked instead. */
	bool index_data;
	/* With @index_tars: the top layer too, its names and metadata alone
	 * (fsck, which reads a tarball it checks again itself). */
	bool index_top;
	/* With @index_tars: a file's data read when asked, in any order
	 * (hu_ldir_copy_data): forward where the tarball holds it in the
	 * order asked, else from the stream started again; its blob's
	 * digest not checked unless read to its end (hu_ldir_data_finish),
	 * as a cached index is not.  For a reader that asks for a few
	 * files and writes nothing of them (fsck -n's copy-up compare). */
	bool index_any_order;
	struct hu_pcache *pcache;
	const struct hu_report *report;	/* warnings while opening (a
					 * tarball's duplicate entries);
					 * may be NULL */
	/* Where the layers' inconsistencies go (detection, the view); may
	 * be NULL: then what always stopped a reader stops it (a mixed
	 * layer, a metacopy file without data, an OCI whiteout hiding
	 * nothing) and the rest is read as the kernel reads it (an invalid
	 * redirect is none).  Each layer keeps it (hu_layer.problems).
	 * With a sink, a stack's layers are detected one after another in
	 * the calling thread, so the sink is called from one thread while
	 * the stack is opened; the view calls it from the thread that
	 * meets the problem (with hu_walk_ops.list_ahead: the lister's, or
	 * the walker's for a file's data, so such a walk's sink must take
	 * calls from two threads at once).  A problem is reported each
	 * time a reader meets it: a directory listed twice, or a lookup
	 * passing the same directory again, reports it again. */
	const struct hu_problem_sink *problems;
	/* The platform ("os/arch[/variant]") an image index is resolved
	 * to, for operands oci:DIR[:REF]; NULL: the host's. */
	const char *platform;
	/* Tarball layers (and an image's) are opened, not unpacked: each
	 * hu_layer.fd is the file, hu_layer.streamed, for a reader that
	 * streams them (mergetar.c); a directory layer is refused. */
	bool tar_sources;
};

/* Open and check @n layers, bottom first.  Refuses missing or non-directory
 * layers, the same directory twice, mixed-format layers (naming the first
 * offending path; with a sink that goes on, see hu_layer_detect) and
 * trusted.* markers that cannot be read.  A regular
 * file that holds a tarball (.tar, .tar.gz, .tar.zst, known by content) is
 * unpacked into a private temporary directory and read as an OCI layer
 * (--format does not apply to it); hunion-layers(7) says what it may
 * hold.  An operand oci:DIR[:REF] is an image's layers, bottom first
 * (hu_oci_image_open, @o->platform), each such a tarball layer read from
 * its blob and verified as it is read; @n counts operands, s->n layers. */
int hu_stack_open(struct hu_stack *s, char *const paths[], size_t n,
		  const struct hu_stack_opts *o, struct hu_error *e);
void hu_stack_close(struct hu_stack *s);

/* One run at a time changes a layer in place (merge --into, whiteout
 * convert --in-place): flock(2) on its root, taken without waiting and
 * held until the process ends or the layer is closed.  EBUSY, with the
 * layer named, while another run holds it, or when its root changed
 * since it was opened (a run that finished meanwhile: what this one read
 * of it, its format first, may be stale). */
int hu_layer_lock_change(const struct hu_layer *l, struct hu_error *e);
/* Is @l half-converted (conv_to)?  Does it read markers of format @f
 * (its own, or while half-converted the one it is converted to)? */
bool hu_layer_half(const struct hu_layer *l);
/* How many times the tarball of index layer @l was read again from its
 * start, a file's bytes asked for behind the position reached
 * (tar/pdata.c): 0 for a tarball read once, or any other layer. */
unsigned hu_layer_restarts(const struct hu_layer *l);
bool hu_layer_is(const struct hu_layer *l, enum hu_format f);

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
 * into @name).  @xwhiteouts: also recognise overlay xattr whiteouts
 * (empty files with overlay.whiteout); the kernel's lookup does in every
 * layer, its readdir only under a parent whose overlay.opaque is "x".
 * A half-converted layer's entry is a marker if it is one in either
 * format (the same for hu_marker_dir_opaque). */
int hu_marker_classify(const struct hu_layer *l, int dirfd, const char *name,
		       const struct stat *st, bool xwhiteouts,
		       enum hu_marker *kind, const char **target,
		       struct hu_error *e);

enum hu_opaque {
	HU_OPAQUE_NO = 0,
	HU_OPAQUE_YES,		/* hides lower directories of the same name */
	HU_OPAQUE_XWHITEOUTS,	/* overlay "x": readdir checks for xattr
				 * whiteouts; not opaque */
};

/* The name of overlay xattr @what in form @i of @l (0: its own format;
 * 1: while half-converted, the one it is converted to): false when that
 * form is not overlay, or names the same xattr as form 0. */
bool hu_layer_overlay_xattr(const struct hu_layer *l, int i, const char *what,
			    char *buf, size_t len);

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

/* ---- the merged view (view_lookup.c, view_list.c, view_data.c) -------- */

struct hu_vdir;

struct hu_ventry {
	const char *name;
	size_t layer;		/* index into the stack of the providing layer */
	int dirfd;		/* parent directory of @name in that layer */
	struct stat st;		/* lstat of the entry in that layer */
	bool hides_lower;	/* OCI: the same layer also whites the name out,
				 * so a directory here does not merge */
	/* The entry's xattr names, back to back, each ending in NUL, when
	 * the walk read them ahead (hu_walk_ops.xattr_names); else NULL. */
	const char *xattr_names;
	size_t xattr_names_len;
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
/* Name @name of @d alone, without listing @d: 1 with *@ent filled in (its
 * name is @name itself, which must outlive *@ent), 0 when the view does
 * not have it. */
int hu_vdir_lookup(struct hu_vdir *d, const char *name, struct hu_ventry *ent,
		   struct hu_error *e);
/* The path of @d relative to the view root ("" for the root). */
const char *hu_vdir_path(const struct hu_vdir *d);
/* The layer @ent of @d comes from, whose directories its reader reaches
 * through layer/ldir.h. */
struct hu_layer *hu_vdir_layer(const struct hu_vdir *d,
			       const struct hu_ventry *ent);
/* The topmost layer directory of @d: its metadata are the merged dir's. */
int hu_vdir_fd(const struct hu_vdir *d, size_t *layer);
/* True when @d merges directories of more than one layer. */
bool hu_vdir_is_merged(const struct hu_vdir *d);

/* Open the file whose bytes are @ent's data (following metacopy), read
 * only.  Returns the fd or -1; *@own (may be NULL) tells whether it is
 * @ent's own inode, whose xattrs it then reaches too. */
int hu_vdir_open_data(struct hu_vdir *d, const struct hu_ventry *ent,
		      bool *own, struct hu_error *e);
/* False when regular file @ent surely holds its own data (no metacopy
 * mark, or not an overlay layer): an empty one then need not be opened.
 * An empty metacopy file must be, to find (or miss) its data beneath. */
bool hu_vdir_may_be_metacopy(const struct hu_vdir *d,
			     const struct hu_ventry *ent);

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
	/* List directories in a second thread, ahead of the callbacks.  The
	 * order, the callbacks and the errors are those of the plain walk,
	 * except that an error listing below a directory the callback chose
	 * not to descend into still ends the walk, and that a deferred layer
	 * below a metacopy file is detected whole (and may be refused)
	 * before the file's directory, where the plain walk detects it only
	 * if the data lookup meets a marker in it. */
	bool list_ahead;
	/* With list_ahead: the lister also reads every entry's xattr names
	 * into hu_ventry.xattr_names. */
	bool xattr_names;
	/* Open the data of the next few files before their callbacks and
	 * start reading it; hu_vdir_open_data() then hands those fds out.
	 * For callbacks that read every file. */
	bool prefetch_data;
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

/* Can merge -o of the stack @layers (@n operands, as given) stream it:
 * every operand a regular file (a tarball, unless hu_merge_stream says it
 * is not one) or an image (oci:DIR[:REF]), two layers or more only as
 * root, read by detection, copied, not a dry run, and the environment
 * does not say HUNION_TAR_STREAM=0? */
bool hu_merge_can_stream(const char *const *layers, size_t n,
			 const struct hu_stack_opts *so,
			 const struct hu_merge_opts *o);
/* hu_merge_tree() of the stack of tarball layers @layers (@n operands),
 * each read once, bottom first, straight into the tree (mergetar.c): the
 * same tree, errors and warnings.  @st counts the entries as written (a
 * name written again, by a duplicate or a layer above, counts again).
 * Where a tarball asks for what the stream cannot do, the stack is read
 * by the general path instead. */
int hu_merge_stream(char *const layers[], size_t n, const char *out,
		    const struct hu_stack_opts *so,
		    const struct hu_merge_opts *o, struct hu_merge_stats *st,
		    struct hu_error *e);

/* ---- merge down: the top layer into the one beneath (mergedown.c) ----- */

struct hu_mergedown_opts {
	bool keep_upper;	/* copy into the target; the upper stays */
	bool force;		/* go on while a layer is part of a mount */
	bool dry_run;		/* report the steps, change nothing */
	/* Each step, before it is done (dry: instead): @what says what
	 * ("remove", "move", "whiteout"...), @path the path in the view. */
	void (*step)(void *ctx, const char *what, const char *path);
	void *ctx;
	const struct hu_report *report;
};

struct hu_mergedown_stats {
	uint64_t moved;		/* entries renamed from the upper */
	uint64_t copied;	/* entries copied (other fs, --keep-upper) */
	uint64_t removed;	/* target entries a whiteout or a swap removed */
	uint64_t dirs;		/* directories merged */
	uint64_t markers;	/* whiteouts and opaque marks the target keeps */
	uint64_t prepared;	/* redirects and metacopy files resolved */
	bool kept_before;	/* nothing done: a --keep-upper run merged
				 * this upper into this target before (its
				 * record on the upper's root says so) */
};

/*
 * Merge the top layer of @s into the one directly beneath it, in place,
 * so that the stack without the top layer shows the view the whole stack
 * showed.  Every change goes through the write wrapper; each step keeps
 * that view, or is written down first (an intent record on the upper's
 * root), so that a run stopped at any instant is finished by running it
 * again.  The upper ends empty, its root kept (unless @keep_upper).
 * With @keep_upper, an upper holding a redirected directory (or a
 * metacopy file with a redirect) is cloned into the target first and the
 * clone merged down; a record on the upper's root then marks it merged
 * into that target, and a later merge of it there does nothing.
 * Refused before any change: fewer than two layers, a tarball layer, a
 * half-converted one, upper and target in different formats, a layer on
 * a read-only filesystem, a layer part of a mounted overlay (unless
 * @force), OCI layers.
 */
int hu_merge_down(const struct hu_stack *s, const struct hu_mergedown_opts *o,
		  struct hu_mergedown_stats *st, struct hu_error *e);

/* ---- mounted overlays (mountinfo.c) ------------------------------------ */

/* Where a directory is in use by a mounted overlay (or union) fs. */
struct hu_mount_use {
	char *mountpoint;	/* as /proc/self/mountinfo shows it */
	char *fstype;		/* "overlay", "union", "fuse.fuse-overlayfs" */
	char *role;		/* "upperdir", "lowerdir", "workdir", "datadir" */
	char *layer;		/* its hu_dir_ref.path; NULL: not known */
	char *option;		/* hu_dirs_in_use() cannot tell: the option
				 * it could not resolve ("lowerdir=lower") */
};

void hu_mount_use_free(struct hu_mount_use *u);

/* A directory a command uses (a layer, a workdir, a mount point), for
 * the checks every command that writes layers shares. */
struct hu_dir_ref {
	int fd;			/* the directory, open */
	const char *path;	/* as the user gave it, for messages */
	const char *role;	/* "upper layer", "workdir"...: for messages */
	bool written;		/* the command writes it (else reads it) */
	bool proxy;		/* the parent of a directory not made yet: what
				 * it lies in, that directory will lie in */
};

/*
 * Do directories @d[0, @n) lie apart, none inside another (or the same)?
 * By device and inode, going up from each (never by path strings).  0,
 * or -1 with @e naming the two ("the lower layer L lies inside the upper
 * layer U: they must lie apart").  A write to a directory would change
 * every one inside it, a layer the command only reads.
 */
int hu_dirs_apart(const struct hu_dir_ref *d, size_t n, struct hu_error *e);

/*
 * Is any of directories @d[0, @n) used by a mounted overlay in a way that
 * forbids this command's use: a directory @written in any role, one read
 * as a mount's upperdir or workdir (what the mount writes), one inside
 * such an upperdir or workdir, or one @written that holds one?  By device
 * and inode of the paths /proc/self/mountinfo names (going up with ".."
 * for the nesting; use->role then "directory inside the upperdir",
 * "directory holding the workdir"...); where a mount names
 * an upperdir or workdir by a path that does not resolve (relative, gone),
 * the kernel is asked: a probe overlay, never mounted, that changes
 * nothing (probe.c), sees its lock on them.
 * 0: none.  1: one is: *@use names the mount, the role (from the probe:
 * "upperdir or workdir") and the directory (use->layer, its d[i].path).
 * 2: it cannot be known: a mount names a lowerdir by a path that does
 * not resolve while a directory is to be written, or the probe cannot be
 * made (not root, no overlayfs): *@use names that mount, and use->option
 * the option.  -1 on error.
 */
int hu_dirs_in_use(const struct hu_dir_ref *d, size_t n,
		   struct hu_mount_use *use, struct hu_error *e);

/*
 * Warn through @r when a layer of @s, or the workdir @workfd (-1: none;
 * @workdir names it), is written by a mounted overlay: its upperdir or
 * workdir, or inside one.  Reading it reads changes in progress, which
 * @effect says the consequence of ("the check may see changes in
 * progress").  Where that cannot be known (the kernel cannot be asked),
 * no warning: the reader changes nothing either way.  0, or -1 when the
 * mounts cannot be read.
 */
int hu_warn_mounted(const struct hu_stack *s, const char *workdir,
		    int workfd, const char *effect, const struct hu_report *r,
		    struct hu_error *e);

/* ---- mounting a stack with the kernel (mount.c, mountcheck.c,
 * mountopt.c, umount.c) ------------------------------------------------- */

enum hu_mount_fs {
	HU_MOUNT_AUTO = 0,	/* from the layers' format, /proc/filesystems
				 * and the user: fuse for a non-root user */
	HU_MOUNT_OVERLAY,	/* the kernel's overlayfs */
	HU_MOUNT_UNION,		/* the kernel's union fs (union layers) */
	HU_MOUNT_FUSE,		/* fuse-overlayfs: the rootless path */
};

/* The layer format the running kernel mounts: union where it has the
 * union filesystem (as hu_mount_prepare() finds it: /proc/filesystems,
 * a module it loads), else overlay. */
enum hu_format hu_mount_layer_format(void);

/* "auto", "overlay", "union", "fuse"; -1 when unknown. */
const char *hu_mount_fs_name(enum hu_mount_fs f);
int hu_mount_fs_parse(const char *s, enum hu_mount_fs *out);

struct hu_fsck_finding;

/* What the preflight tells as it goes (-v), and the problems fsck finds. */
struct hu_mount_notes {
	/* A step taken (or, dry, that would be): "created workdir" PATH. */
	void (*step)(void *ctx, const char *what, const char *path);
	/* An error fsck found in a layer (all of them are reported before
	 * the mount is refused, or, with force, mounted anyway). */
	void (*problem)(void *ctx, const struct hu_fsck_finding *f);
	void *ctx;
};

struct hu_mount_opts {
	enum hu_mount_fs fs;
	const char *workdir;	/* NULL: .UPPER.hunion-work beside the upper,
				 * created on its filesystem */
	/* -o: mount flags by name (ro, nosuid, noatime...: "ro" mounts
	 * every layer as a lower, nothing written) and options passed on
	 * to the filesystem (index=on, xino=auto...), escaped as overlayfs
	 * escapes them.  No lowerdir=, upperdir=, workdir= here. */
	const char *options;
	unsigned long flags;	/* mount(2) flags besides those of @options */
	bool lower_only;	/* every layer a lower (no upper, no workdir) */
	const char *source;	/* mount(2)'s source; NULL: "hunion" */
	bool force;		/* mount despite fsck errors and layers in use
				 * by another mount */
	bool dry_run;		/* check, build the call, change nothing */
	const struct hu_stack_opts *stack_opts;	/* how @s was opened, for
						 * fsck */
	const struct hu_mount_notes *notes;	/* may be NULL */
	const struct hu_report *report;		/* may be NULL */
};

/* The mount a preflight settled on. */
struct hu_mount_plan {
	enum hu_mount_fs fs;	/* never AUTO */
	const char *fstype;	/* mount(2)'s: "overlay", "union" */
	char *source, *target;	/* target: the mount point, absolute */
	unsigned long flags;
	char *data;		/* the option string (fuse: its -o) */
	bool fsconfig;		/* @data is longer than the page mount(2)
				 * copies: the new mount API takes it, one
				 * fsconfig() per option and lower layer */
	char *helper;		/* HU_MOUNT_FUSE: fuse-overlayfs's path */
	char *workdir;		/* absolute; NULL when lower-only */
	bool made_workdir;	/* by hu_mount_prepare: hu_mount_run removes
				 * it when the mount fails */
	bool redirect_dir, metacopy, userxattr;	/* what the layers need */
};

/*
 * Check stack @s (bottom first; the top layer the upper unless
 * lower_only) for a mount on @mountpoint and build the call:
 *  - the filesystem: union-format layers need the kernel's union fs, and
 *    are refused with a hint to 'hunion whiteout convert --to=overlay'
 *    where it is missing; overlay-format and plain layers take overlay;
 *    OCI layers (and tarballs) are refused the same way;
 *  - options: lowerdir=top:...:bottom, upperdir=, workdir= (':' ','
 *    '\' escaped), and redirect_dir, metacopy, userxattr when the layers
 *    hold redirects, metacopy files or user.* markers;
 *  - preflight: no layer, the workdir or the mount point inside another
 *    (device and inode, never path strings); no layer in use by another
 *    mount in a role that would write it; the workdir created (beside
 *    the upper, on its mount) or, when it exists, holding only
 *    overlayfs's work/ (whose leftovers are removed) and index/; the
 *    upper's filesystem keeps the xattrs the markers need (tried on a
 *    scratch file) and reports d_type; fsck finds no error.
 * Dry: the same checks, nothing created or removed.
 */
int hu_mount_prepare(struct hu_mount_plan *p, const struct hu_stack *s,
		     const char *mountpoint, const struct hu_mount_opts *o,
		     struct hu_error *e);
/* Is fuse-overlayfs there, when @fs (AUTO for a non-root user) needs it?
 * For a refusal before the layers are read. */
int hu_mount_check_fuse(enum hu_mount_fs fs, struct hu_error *e);
/* The exact call, for -n and -v: 'mount("SRC", "TARGET", "overlay",
 * FLAGS, "DATA")', the new mount API's calls one a line (p->fsconfig), or
 * fuse-overlayfs's command line (shell-quoted). */
char *hu_mount_plan_text(const struct hu_mount_plan *p);
/* Mount it.  A refusal of mount(2) becomes a sentence with the likely
 * cause and the kernel's own reason (its log line, when readable). */
int hu_mount_run(const struct hu_mount_plan *p, struct hu_error *e);
void hu_mount_plan_free(struct hu_mount_plan *p);

/* The layers and options of a mount(8) helper's -o (mount.union SPEC DIR
 * -o lowerdir=...,upperdir=...,workdir=...). */
struct hu_mount_spec {
	char **layers;		/* bottom first, NULL-terminated; the upper
				 * last when @has_upper */
	size_t n;
	bool has_upper;
	char *workdir;		/* NULL when not given */
	unsigned long flags;	/* ro, nosuid...: mount(2) flags */
	char *fs_options;	/* the rest, escaped, ',' between; NULL when
				 * none */
	size_t fs_len;
};
/* Split option string @opts.  @take_dirs false: lowerdir=, upperdir=
 * and workdir= are refused (hunion mount takes them as operands). */
int hu_mount_spec_parse(const char *opts, bool take_dirs,
			struct hu_mount_spec *sp, struct hu_error *e);
void hu_mount_spec_free(struct hu_mount_spec *sp);
/* The layers of lowerdir value @v alone (top first, ':' between, '\'
 * making the next byte literal, as overlayfs and podman inspect's
 * LowerDir write it; an unescaped ',' is a byte of a path here) into
 * @sp->layers, bottom first.  An empty path is refused. */
int hu_lowerdir_parse(const char *v, struct hu_mount_spec *sp,
		      struct hu_error *e);

/* A process keeping a mount busy. */
struct hu_mount_holder {
	pid_t pid;
	char comm[32];
	char what[32];		/* "cwd", "root", "fd 3", "mount" */
	char *path;		/* "mount": the mount beneath */
};

/* How to unmount, as umount(8)'s -l and -f ask. */
struct hu_umount_opts {
	bool lazy;	/* MNT_DETACH: gone from the tree now, cleaned up
			 * when no longer busy (fusermount3 -z) */
	bool force;	/* MNT_FORCE: fuse aborts its connection; overlayfs
			 * and a non-root user's fusermount3 do as without */
};

/*
 * Unmount @mountpoint, an overlay, union or fuse-overlayfs mount (any
 * other is refused: hunion umount is not umount(8)).  A non-root user's
 * fuse mount goes through fusermount3.  When it is busy: -1 with errno
 * EBUSY and, in *@holders (*@n of them), the processes whose working
 * directory, root or open files are in it, and the mounts beneath it.
 */
int hu_umount(const char *mountpoint, const struct hu_umount_opts *o,
	      struct hu_mount_holder **holders, size_t *n,
	      struct hu_error *e);
void hu_mount_holders_free(struct hu_mount_holder *h, size_t n);

/* ---- fsck: find and repair a layer's problems (fsck*.c) ---------------- */

enum hu_fsck_mode {
	HU_FSCK_CHECK = 0,	/* -n: change nothing */
	HU_FSCK_PREEN,		/* -p: the SAFE repairs only */
	HU_FSCK_YES,		/* -y: every repair */
};

/* What became of one problem found. */
enum hu_fsck_action {
	HU_FSCK_LEFT = 0,	/* not repaired: the mode, the severity or a
				 * repair fsck does not have */
	HU_FSCK_REPAIRED,
	HU_FSCK_WOULD,		/* a dry run: would be repaired */
	HU_FSCK_FAILED,		/* the repair failed (why), nothing half
				 * done */
};

struct hu_fsck_finding {
	enum hu_problem_id id;
	enum hu_severity severity;	/* after --severity */
	const char *layer;		/* the layer's path as given */
	const char *path;		/* relative to the layer root, "" the
					 * root */
	const char *detail;		/* the offending value, or NULL */
	enum hu_fsck_action action;
	const struct hu_error *why;	/* FAILED: what the repair met */
};

struct hu_fsck_opts {
	enum hu_fsck_mode mode;
	bool dry_run;		/* repair nothing, report what would be */
	bool all_layers;	/* check each layer against those beneath,
				 * not the top one alone */
	bool vacuum;		/* repair copyupIdentical (info) too */
	bool repair_lowers;	/* with all_layers: lower layers may change */
	const char *workdir;	/* an overlay workdir to check too, or NULL */
	bool force;		/* repair even where it cannot be known
				 * whether a mounted overlay uses a layer
				 * repaired (hu_dirs_in_use() 2); one that
				 * does is refused all the same */
	/* The severity of each problem: the table's unless overridden;
	 * HU_SEV_IGNORE: not reported.  NULL: the table's. */
	const enum hu_severity *severity;
	/* Each problem found, after its repair was tried, in walk order.
	 * Return -1 (with @e) to stop. */
	int (*finding)(void *ctx, const struct hu_fsck_finding *f,
		       struct hu_error *e);
	void *ctx;
	const struct hu_report *report;	/* warnings, progress */
};

struct hu_fsck_stats {
	uint64_t entries;		/* entries checked */
	uint64_t found[HU_SEV_ERROR + 1];	/* by severity */
	uint64_t repaired;		/* or, dry, would be */
	uint64_t left;			/* warnings and errors not repaired */
	uint64_t failed;		/* repairs that failed */
};

/*
 * Check the layers @paths (bottom first): the top one against those
 * beneath, or with @o->all_layers each one.  The stack is opened here,
 * so that what detection meets (a layer mixing formats) is a finding
 * like any other.  Tarball layers are checked read only: a repair mode
 * is refused for them, as it is while a layer is part of a mounted
 * overlay (known by device and inode, never by path).  Returns 0 when
 * the check ran to its end (whatever it found: see @st), -1 on an
 * operational error (@e), including "interrupted"; @st then counts what
 * was found and done up to there.
 */
int hu_fsck(char *const paths[], size_t n, const struct hu_stack_opts *so,
	    const struct hu_fsck_opts *o, struct hu_fsck_stats *st,
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
 * for a layer with no markers (HU_FMT_NONE) @want, or when @want is AUTO
 * the one the running kernel mounts (hu_mount_layer_format()).  A @want
 * other than AUTO and the layer's own format is refused: the layer would
 * mix formats. */
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
	HU_WH_DROPPED_HIDDEN,	/* a whiteout in a directory that hides all
				 * beneath (opaque, or below an opaque one):
				 * it hides nothing, left out */
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
 * @out NULL: in place, through the write wrapper.  A record on the
 * layer root makes it read in both formats (hu_layer.conv_to) from the
 * first change to the last; each new marker is made whole (under a
 * temporary name renamed into place) before the old one goes; so the
 * view of the layer never changes, however the run stops, and running it
 * again finishes it.  Directory times are restored (kept in a record on
 * each directory meanwhile).
 */
int hu_wh_convert(const struct hu_layer *l, const char *out,
		  const struct hu_convert_opts *o,
		  struct hu_convert_stats *st, struct hu_error *e);

/* ---- tar output: OCI layer tarballs with digests (tarout.c) ------------ */

/* xz and bzip2 have no OCI layer media type: for plain tarballs only
 * (hu_compress_oci()). */
enum hu_compress {
	HU_COMP_NONE = 0, HU_COMP_GZIP, HU_COMP_ZSTD, HU_COMP_XZ, HU_COMP_BZIP2
};

struct hu_tarout_opts {
	enum hu_compress compress;
	int level;		/* 0: the compressor's default */
	int threads;		/* zstd and xz workers; 0: all online cores */
	bool clamp_mtime;	/* mtimes newer than @mtime_max become it */
	int64_t mtime_max;
	/* No sha256 of the tar nor of the output: hu_tarout_close() leaves
	 * the digests empty.  Two hashes of every byte were a third of the
	 * CPU time of a flatten that printed neither. */
	bool no_digests;
	/* The file data read and the bytes written to the fd (after
	 * compression) are counted here as they go; NULL: not counted. */
	struct hu_progress_bytes *bytes;
};

struct hu_digests {
	char diff_id[72];	/* "sha256:<hex>" of the uncompressed tar */
	char digest[72];	/* "sha256:<hex>" of the bytes written */
	uint64_t size;		/* bytes written */
	const char *media_type;	/* application/vnd.oci.image.layer.v1.tar...;
				 * for xz and bzip2 application/x-xz,
				 * application/x-bzip2 (no OCI type) */
};

struct hu_tarout;

/* Start a tar stream into @fd (which stays the caller's). */
int hu_tarout_open(struct hu_tarout **t, int fd, const struct hu_tarout_opts *o,
		   struct hu_error *e);
/* One entry at @path (relative, no leading "./"), described by @st.  Its
 * xattrs (all but the private ones) are read from @name in @dirfd (NULL
 * name: @dirfd itself), or from @datafd when that is the entry itself; a
 * symlink's target too; a regular file's bytes from @datafd (which may
 * differ from the entry for metacopy).  Directories before contents. */
int hu_tarout_entry(struct hu_tarout *t, const char *path,
		    const struct stat *st, int dirfd, const char *name,
		    int datafd, struct hu_error *e);
/* Directory @dir of layer @l at @path, its xattrs read through
 * layer/ldir.h (an index layer's directory is no fd). */
int hu_tarout_layer_dir(struct hu_tarout *t, const char *path,
			const struct stat *st, struct hu_layer *l, int dir,
			struct hu_error *e);
/* Entry @ent of view directory @d at @path, a regular file's bytes read
 * through the view (metacopy followed).  An error from the view comes
 * whole (the layer named); one of the tarball's names only @path. */
int hu_tarout_ventry(struct hu_tarout *t, const char *path,
		     struct hu_vdir *d, const struct hu_ventry *ent,
		     struct hu_error *e);
/* A hard link at @path to @target, an earlier path of this stream. */
int hu_tarout_hardlink(struct hu_tarout *t, const char *path,
		       const char *target, const struct stat *st,
		       struct hu_error *e);
/* OCI markers in directory @dir ("" for the root): a whiteout of @name,
 * and the opaque marker. */
int hu_tarout_whiteout(struct hu_tarout *t, const char *dir, const char *name,
		       struct hu_error *e);
int hu_tarout_opaque(struct hu_tarout *t, const char *dir, struct hu_error *e);
/* Finish the stream and the compressor; fill @d (NULL: not wanted).
 * Frees @t either way. */
int hu_tarout_close(struct hu_tarout *t, struct hu_digests *d,
		    struct hu_error *e);
/* Drop a stream after an error.  Frees @t.  Nothing more reaches the
 * output (no end-of-archive blocks), so a reader of a failed stream sees
 * it cut short. */
void hu_tarout_abort(struct hu_tarout *t);
/*
 * Errors of the hu_tarout_* calls: when the output stream failed (a full
 * disk, a closed pipe) the error has no path, since the caller knows what
 * it names its output; a problem with the entry itself (reading its data,
 * xattrs or target) names the entry's @path.  Hashing, compressing and
 * writing run in a thread of their own, so a failed write shows in a
 * later call, at the latest in hu_tarout_close().
 *
 * Entry paths are bytes, written as given (pax records where a name is
 * long or not ASCII); "" is the root, written as "./"; directories get a
 * trailing '/'.  The caller writes entries in canonical order: bytewise by
 * name within each directory, a directory before its contents, and in a
 * directory its opaque marker, then its whiteouts, then the rest.
 */

/* "none", "gzip", "zstd", "xz" or "bzip2" (not "auto"); -1 when
 * unknown. */
int hu_compress_parse(const char *s, enum hu_compress *out);
/* The name hu_compress_parse() takes for @c. */
const char *hu_compress_name(enum hu_compress c);
/* The compression a file name says, in *@out: 1 when its suffix names
 * one (.tar: none; .tar.gz, .tgz, .gz: gzip; .tar.zst, .tar.zstd, .tzst,
 * .zst, .zstd: zstd; .tar.xz, .txz, .xz: xz; .tar.bz2, .tbz2, .tbz, .bz2:
 * bzip2); 0 when it says nothing (no such suffix, "-": *@out is none);
 * -1 when it names a compression that cannot be written (.lz4, .lzma,
 * .lz, .Z, ...): *@out is then none. */
int hu_compress_for_path(const char *path, enum hu_compress *out);
/* The suffixes hu_compress_for_path() knows, for a message:
 * ".tar, .tar.gz (.tgz), ...". */
extern const char hu_compress_suffixes[];
/* Has @c an OCI layer media type (none, gzip, zstd)? */
bool hu_compress_oci(enum hu_compress c);
/* The levels @c accepts in hu_tarout_opts.level (0 always means the
 * default); -1 when @c has no levels (none). */
int hu_compress_levels(enum hu_compress c, int *min, int *max);

/* The OCI descriptor of a layer written with @d, as one line of JSON:
 * {"mediaType":...,"digest":...,"size":N,"diffID":...} and a newline.
 * Returns its length (like snprintf: truncated when >= @len). */
size_t hu_descriptor_json(const struct hu_digests *d, char *buf, size_t len);

/* ---- output files: built beside their name, renamed in (outfile.c) ----- */

/* The lock a writer of output NAME holds (outlock.c); private. */
struct hu_outlock {
	int fd;			/* -1: not held */
	char *name;		/* ".NAME.hunion-lock" */
};

struct hu_outfile {
	int fd;			/* write here */
	const char *name;	/* as given; "-" is standard output */
	/* private */
	int dirfd;
	char *tmp, *base;
	char *bak;		/* a pair's commit: the old file's backup, */
	bool bak_moved;		/* moved there, not linked */
	struct hu_outlock lock;
};

/* Start output file @path: a hidden temporary file ".NAME.hunion-XXXXXX"
 * in the same directory, or standard output for "-".  Refuses a @path
 * that exists and is not a regular file (a directory...), one inside a
 * layer of @s (may be NULL) and one that is the file of a tarball layer
 * of @s (symlinks resolved, hard links too).  Waits for any other hunion
 * writing @path, then removes what killed runs left for @path
 * (outlock.c).  An existing file is replaced at commit. */
int hu_outfile_open(struct hu_outfile *f, const char *path,
		    const struct hu_stack *s, struct hu_error *e);
/* The same for two files that appear together or not at all (a tarball
 * and its descriptor): refused when they are one file (by name, or by
 * inode when both exist), locked in an order every hunion follows. */
int hu_outfile_open2(struct hu_outfile f[2], const char *const paths[2],
		     const struct hu_stack *s, struct hu_error *e);
/* Write all of @buf (through the write wrapper). */
int hu_outfile_write(struct hu_outfile *f, const void *buf, size_t len,
		     struct hu_error *e);
/* Rename the complete file into place (nothing for standard output). */
int hu_outfile_commit(struct hu_outfile *f, struct hu_error *e);
/* Rename both files of hu_outfile_open2() into place, or neither: the
 * old files are kept as backups (hard links) until both renames are
 * done, and put back when one fails. */
int hu_outfile_commit2(struct hu_outfile f[2], struct hu_error *e);
/* Remove the temporary file; safe after commit and on a failed open. */
void hu_outfile_abort(struct hu_outfile *f);

/* ---- flatten: the merged view as one tarball (flatten.c) --------------- */

struct hu_flatten_stats {
	uint64_t entries, dirs, files, symlinks, specials, hardlinks, skipped;
	uint64_t bytes;		/* regular-file data */
};

/* Write the merged view of @s into @t: the root as "./", then every entry
 * depth first, sorted, each directory before its contents.  Names that
 * are one inode of a layer become hard links to the first of them;
 * sockets are skipped with a warning. */
int hu_flatten_write_tar(const struct hu_stack *s, const struct hu_report *r,
			 struct hu_tarout *t, struct hu_flatten_stats *st,
			 struct hu_error *e);

/* ---- flatten to an EROFS image (erofsout.c, erofs/) --------------------- */

/* containerd's EROFS layer: the image is one layer of the whole view. */
#define HU_EROFS_MEDIA_TYPE "application/vnd.erofs.layer.v1"

struct hu_erofs_out_opts {
	unsigned block_bits;	/* log2 of the block size; 0: 12 (4096) */
	bool clamp_mtime;	/* mtimes newer than @mtime_max become it */
	int64_t mtime_max;
	int64_t build_time;	/* the superblock's (SOURCE_DATE_EPOCH) */
	bool uuid_content;	/* a UUID from the image's content; else 0 */
	bool sync;		/* fsync the image once complete */
};

/* Write the merged view of @s as one uncompressed EROFS image into @fd,
 * an empty regular file open for reading and writing: the same walk and
 * the same hard-link rule as hu_flatten_write_tar(); sockets are kept.
 * Errors about what EROFS cannot hold (a name over 255 bytes, an xattr
 * value over 65535 bytes) name the entry.  @d (may be NULL) gets the
 * image's sha256 and size, read back, its media type
 * application/vnd.erofs.layer.v1 and its diff_id the digest.  The caller
 * renames the file in. */
int hu_flatten_write_erofs(const struct hu_stack *s, const struct hu_report *r,
			   int fd, const struct hu_erofs_out_opts *o,
			   struct hu_flatten_stats *st, struct hu_digests *d,
			   struct hu_error *e);

/* ---- changes: what the top layers change over the ones beneath (changes.c) */

enum hu_change_kind { HU_CHG_ADD = 'A', HU_CHG_MODIFY = 'M', HU_CHG_DELETE = 'D' };

/* What differs in a modified entry (bits of hu_change.what). */
enum {
	HU_DIFF_TYPE = 1 << 0, HU_DIFF_CONTENT = 1 << 1, HU_DIFF_MODE = 1 << 2,
	HU_DIFF_OWNER = 1 << 3, HU_DIFF_MTIME = 1 << 4, HU_DIFF_XATTRS = 1 << 5,
};

struct hu_change {
	enum hu_change_kind kind;
	const char *path;		/* relative to the root, no "./" */
	const struct hu_ventry *ent;	/* in the new view (NULL for D) */
	struct hu_vdir *dir;		/* @ent's directory, for open_data */
	const struct stat *old;		/* the entry beneath (NULL for A) */
	unsigned what;			/* M: HU_DIFF_* bits (0 if unknown) */
	bool opaque;			/* a directory replacing what was
					 * beneath: lower names not listed
					 * again are gone */
};

struct hu_changes_opts {
	size_t base;		/* layers [0, base) are the old view; the
				 * whole stack is the new one */
	bool exact;		/* compare content and metadata; drop copy-ups
				 * that changed nothing */
	bool recursive;		/* list the contents of added and deleted dirs */
	const struct hu_report *report;
	/* diff --trees: when non-NULL, the old view is this stack's (two
	 * plain trees are two one-layer stacks opened with HU_FMT_NONE), not
	 * the bottom layers of the new one; @base is ignored.  Nothing is
	 * shared then, so every directory is walked and every entry
	 * compared: the inode and xattrs, the bytes when size and mtime do
	 * not settle it (always with @exact). */
	const struct hu_stack *old;
};

/* Call @fn for every change, in canonical order (bytewise, a directory
 * before its contents, deletions of a directory's names before the rest).
 * The root is the path "" (its @ent is named "." in its own fd), M when
 * its metadata differ.  A directory in both views is M only when its
 * mode, owner, mtime or xattrs differ (or it is opaque); without @exact
 * every other entry the upper layers provide over an old one is M. */
int hu_changes_walk(const struct hu_stack *s, const struct hu_changes_opts *o,
		    int (*fn)(void *ctx, const struct hu_change *c,
			      struct hu_error *e),
		    void *ctx, struct hu_error *e);

/* The change set of @s over its bottom @o->base layers as an OCI layer:
 * whiteouts for deletions (one per deleted name, never below a deleted or
 * retyped path), each added or modified entry in full (an added
 * directory with all it holds; later names of an inode as hard links),
 * an opaque directory as whiteouts of the lower names, or with
 * @opaque_markers a .wh..wh..opq and its whole contents (with one layer
 * above the base; with more, whiteouts always).  @o->recursive is
 * ignored; sockets are skipped with a warning. */
struct hu_tarout;
int hu_changes_write_tar(const struct hu_stack *s,
			 const struct hu_changes_opts *o, bool opaque_markers,
			 struct hu_tarout *t, struct hu_error *e);

/* ---- OCI image output: -o oci:DIR:TAG (lib/oci/ociwrite.c, ociimage.c,
 * ocigc.c) ------------------------------------------------------------- */

/* An output operand oci:DIR:TAG split: DIR is all before the last ':'.
 * 1 when @spec is one (DIR and TAG then malloc'd), 0 when @spec does not
 * start with "oci:", -1 (@e) when it does but DIR or TAG is missing or
 * TAG is not a valid OCI tag ([A-Za-z0-9_][A-Za-z0-9._-]{0,127}). */
int hu_ociout_parse(const char *spec, char **dir, char **tag,
		    struct hu_error *e);

struct hu_ociout_opts {
	const char *config;	/* a config JSON (--config FILE's text) to
				 * start from; NULL: the bottom image's, or
				 * a minimal one for the host */
	const char *config_name;	/* its file, for errors */
	const char *history;	/* created_by of the top layer; NULL: the
				 * command */
	const char *command;	/* "hunion flatten": created_by's default */
	bool created_set;	/* every timestamp is @created
				 * (SOURCE_DATE_EPOCH), else now */
	int64_t created;
	const struct hu_stack *stack;	/* the layers read: the layout may
					 * not lie inside one; may be NULL */
};

/* ---- an image's config: checked, and changed from the command line
 * (lib/oci/ociconfig.c) ---- */

/* The changes --config.* make to a config, as umoci config makes them:
 * Cmd and Entrypoint replaced by the lists given (one argument each; an
 * Entrypoint given keeps Cmd); an Env KEY=VALUE replaces the entry of
 * its KEY, or is appended; labels, exposed ports and volumes are added
 * to those there; User, WorkingDir and author replaced; @platform
 * ("os/arch[/variant]") sets os, architecture and variant (none when it
 * names none). */
struct hu_oci_config_edit {
	const char **cmd, **entrypoint, **env, **labels, **ports, **volumes;
	size_t ncmd, nentrypoint, nenv, nlabels, nports, nvolumes;
	const char *user, *workingdir, *author, *platform;
	/* the base is an image's config: its layers are built for its
	 * platform, which @platform must match (then it is kept as it is) */
	bool platform_of_layers;
};

/* Is @s KEY=VALUE with a KEY (an Env entry, a label)? */
bool hu_oci_config_kv_valid(const char *s);
/* Is @s an exposed port: N, N/tcp, N/udp or N/sctp, N in 1..65535? */
bool hu_oci_config_port_valid(const char *s);
/* Is @s "os/arch[/variant]"? */
bool hu_oci_platform_valid(const char *s);
/* Check @len bytes of JSON at @buf as an image config, the types
 * image-spec config.md gives its fields (null taken as absent; os and
 * architecture may be absent, the writer fills the host's in): -1 with
 * @e's message naming the field ("config.Cmd: must be an array of
 * strings"), no path. */
int hu_oci_config_check(const char *buf, size_t len, struct hu_error *e);
/* @ed applied over the config @base (NULL: an empty one), checked: the
 * new config's JSON text, malloc'd, into @out. */
int hu_oci_config_apply(const char *base, const struct hu_oci_config_edit *ed,
			char **out, struct hu_error *e);

/* An image being written into a layout: its layers' blobs go in as they
 * are made, the config, manifest and index.json entry at commit. */
struct hu_ociout;

/* Open (create when missing: DIR's parent must exist) the layout @dir
 * for writing, holding it shared against `oci gc` until close. */
int hu_ociout_open(struct hu_ociout **w, const char *dir,
		   const struct hu_ociout_opts *o, struct hu_error *e);
/* Write one layer blob, bottom first: @fill streams its entries into a
 * tar writer made with @to; @created_by its history entry (NULL: the
 * top layer's).  @d gets its digests. */
int hu_ociout_layer(struct hu_ociout *w, const struct hu_tarout_opts *to,
		    int (*fill)(void *ctx, struct hu_tarout *t,
				struct hu_error *e),
		    void *ctx, const char *created_by, struct hu_digests *d,
		    struct hu_error *e);
/* THE HOOK FOR IMAGE LAYERS: when @l is a layer of an image (l->image),
 * its blob is taken into the layout as it is (copied from the source
 * layout, size and sha256 verified; kept when already there) with its
 * diff_id: 1.  0 when @l is no image layer (the caller writes it). */
int hu_ociout_reuse_layer(struct hu_ociout *w, const struct hu_layer *l,
			  const char *created_by, struct hu_error *e);
/* Write the config and the manifest, then point TAG at the manifest in
 * index.json (replaced atomically under the layout's lock; the image
 * that held TAG keeps its blobs).  @manifest gets its descriptor. */
int hu_ociout_commit(struct hu_ociout *w, const char *tag,
		     struct hu_oci_desc *manifest, struct hu_error *e);
/* Release the layout; blobs written without a commit stay for gc. */
void hu_ociout_close(struct hu_ociout *w);

/* One image (an entry of index.json) as `oci ls` shows it. */
struct hu_oci_entry {
	const char *tag;	/* NULL: untagged */
	/* NULL: an entry that is no descriptor hunion reads (another
	 * tool's; its tag is still given) */
	const char *digest, *media_type;
	uint64_t size;
	const char *os, *arch, *variant;	/* NULL: unknown */
};
/* Call @fn for each entry of @dir's index.json, in its order. */
int hu_oci_list(const char *dir,
		int (*fn)(void *ctx, const struct hu_oci_entry *en,
			  struct hu_error *e),
		void *ctx, struct hu_error *e);

/* Remove the tag @tag from @dir's index.json, under the layout's locks
 * (a writer's): its entry goes, the image with it unless another entry
 * holds it; `oci gc` then frees the blobs no entry references.  With
 * @dry_run, only whether there is such a tag. */
int hu_oci_rm(const char *dir, const char *tag, bool dry_run,
	      struct hu_error *e);

/* Remove the blobs of @dir no image of index.json references (walked
 * through manifests and indexes to configs and layers), and what killed
 * writers left; waits for running hunion writers (a signal stops the
 * wait: hu_interrupt). */
struct hu_oci_gc_opts {
	bool dry_run;		/* remove nothing, tell of each */
	/* Told of each removal once it is done (with @dry_run, of each that
	 * would be), of each name that cannot be removed (gc goes on with
	 * the others, and fails at the end), and once when gc has to wait
	 * for writers; any may be NULL. */
	void (*removed)(void *ctx, const char *name, uint64_t size);
	void (*failed)(void *ctx, const struct hu_error *why);
	void (*waiting)(void *ctx, const char *dir);
	void *ctx;
};
struct hu_oci_gc_stats {
	uint64_t kept, removed, bytes_removed, failed;
};
int hu_oci_gc(const char *dir, const struct hu_oci_gc_opts *o,
	      struct hu_oci_gc_stats *st, struct hu_error *e);

#endif /* HUNION_H */
