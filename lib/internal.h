/* SPDX-License-Identifier: MIT */
/* Private helpers shared by the modules of lib/. */
#ifndef HUNION_INTERNAL_H
#define HUNION_INTERNAL_H

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "hunion.h"

#define HU_UNION_WHITEOUT_TARGET "(union-whiteout)"

/*
 * OCI marker names, known by name alone (marker.c): ".wh.NAME" whites NAME
 * out, ".wh..wh..opq" makes its directory opaque, and any other
 * ".wh..wh.*" is AUFS metadata, kept but never shown.
 */
#define HU_OCI_WH_PREFIX ".wh."
#define HU_OCI_WH_PREFIX_LEN (sizeof(HU_OCI_WH_PREFIX) - 1)
#define HU_OCI_META_PREFIX ".wh..wh."
#define HU_OCI_META_PREFIX_LEN (sizeof(HU_OCI_META_PREFIX) - 1)
#define HU_OCI_OPAQUE ".wh..wh..opq"

/* Is @name any OCI marker (whiteout, opaque or metadata): ".wh.*"? */
static inline bool hu_oci_is_marker(const char *name)
{
	return strncmp(name, HU_OCI_WH_PREFIX, HU_OCI_WH_PREFIX_LEN) == 0;
}

/* Is @name the opaque marker ".wh..wh..opq"? */
static inline bool hu_oci_is_opaque(const char *name)
{
	return strcmp(name, HU_OCI_OPAQUE) == 0;
}

/* The name whiteout @name hides: what follows ".wh." (maybe "", "." or
 * "..": see hu_oci_hides_nothing); NULL when @name is no whiteout (not
 * ".wh.*", or ".wh..wh.*"). */
static inline const char *hu_oci_hidden(const char *name)
{
	if (!hu_oci_is_marker(name) ||
	    strncmp(name, HU_OCI_META_PREFIX, HU_OCI_META_PREFIX_LEN) == 0)
		return NULL;
	return name + HU_OCI_WH_PREFIX_LEN;
}

/* The same for the @len bytes at @name, which need no NUL: NONE, WHITEOUT,
 * OPAQUE_FILE or META. */
enum hu_marker hu_oci_name_kind(const char *name, size_t len);

/* Does a whiteout hiding @hidden (from hu_oci_hidden) hide no name of its
 * directory: "", "." or ".."?  Such a whiteout is invalid. */
bool hu_oci_hides_nothing(const char *hidden);

/* Write the whiteout name ".wh.@name" to @buf of @size bytes (cut short
 * if it does not fit); false when it did not fit.  With a buffer of
 * NAME_MAX + 1 bytes, false says no such whiteout can exist. */
bool hu_oci_whiteout_name(char *buf, size_t size, const char *name);

/* "@dir/.wh.@name" and "@dir/.wh..wh..opq" (without "@dir/" when @dir is
 * ""), malloc'd; NULL when out of memory. */
char *hu_oci_whiteout_path(const char *dir, const char *name);
char *hu_oci_opaque_path(const char *dir);

/* A conversion in place makes each new whiteout under such a name and
 * renames it into place: in a half-converted layer these names are never
 * entries (view_list.c), and a re-run removes them (convert_inplace.c). */
#define HU_CONV_TEMP_PREFIX ".hunion-wh."
static inline bool hu_conv_temp_prefixed(const char *name)
{
	return strncmp(name, HU_CONV_TEMP_PREFIX,
		       sizeof(HU_CONV_TEMP_PREFIX) - 1) == 0;
}
/* ... and one such name in a half-converted layer, where it is none of
 * the layer's entries. */
bool hu_conv_temp_name(const struct hu_layer *l, const char *name);

/*
 * A whiteout of format @f (union or overlay) for @name in @dirfd, with
 * the times @ts: made whole under such a temporary name and renamed to
 * @name with @flags (0: over the old marker, so the name is never
 * unhidden; RENAME_NOREPLACE: into place).  A failure leaves no
 * temporary.  *@seed carries the temporary names from call to call.
 * Errors name @name (marker.c).
 */
int hu_marker_put_whiteout(const struct hu_layer *l, enum hu_format f,
			   int dirfd, const char *name,
			   const struct timespec ts[2], unsigned int flags,
			   unsigned int *seed, struct hu_error *e);

/*
 * Report problem @id (problem.c) met in layer @layer (the path the user
 * gave; NULL: the stack) at @path (relative to the layer root; NULL or
 * "": the root), @detail the offending value or NULL.  @stops: what a
 * reader without a sink does, stop (true) or read on as the kernel
 * would (false).  Returns -1 (with @e naming the problem, errno @err)
 * when the reader must stop, 0 when it goes on.
 */
int hu_problem_found(const struct hu_problem_sink *sink,
		     const struct hu_report *report, enum hu_problem_id id,
		     bool stops, const char *layer, const char *path,
		     const char *detail, int err, struct hu_error *e);

/* Is overlay redirect @r one the kernel follows: "/a/b" with no empty,
 * "." or ".." component, or one name in the same parent?  (view_lookup.c) */
bool hu_redirect_valid(const char *r);

char *hu_path_join(const char *dir, const char *name);

/* -1 with "interrupted" in @e once hu_interrupt() was called: the long
 * loops ask between entries. */
int hu_interrupt_check(struct hu_error *e);

/* Try a call that failed with EINTR again?  Not once the run was asked
 * to stop: where the front end lets SIGINT, SIGTERM and SIGHUP interrupt
 * calls (an input that may block, a FIFO nobody writes), a read ends on
 * the first signal.  Other signals still get the call tried again. */
static inline bool hu_eintr_retry(void)
{
	return errno == EINTR && !hu_interrupted();
}

/* Find @l's format and xattr namespace from the markers it holds (detect.c).
 * Refuses a layer with both union and overlay markers, unless its problem
 * sink (hu_layer.problems) lets it go on: then the layer is read in the
 * format of most of its markers, and each marker of the other is
 * reported (formatMixed). */
int hu_layer_detect(struct hu_layer *l, struct hu_error *e);
/* Record @l's format (union or overlay; nothing for another) on its root,
 * for detection to read where no marker is left (detect.c): what fsck
 * does before it repairs.  Through the write wrapper; nothing when the
 * record is there already.  Errors name the layer root as "". */
int hu_layer_record_format(const struct hu_layer *l, struct hu_error *e);
/* @l converted in place to @to's format: a format record it holds (either
 * namespace) names @to's format, in @to's namespace, or goes (OCI).
 * Nothing for a layer without one. */
int hu_layer_record_convert(const struct hu_layer *l,
			    const struct hu_layer *to, struct hu_error *e);
/* Is @rest (an xattr name, its namespace left off) one of hunion's own
 * records, which layers of every format hold and which are no marker nor
 * evidence of a format: a conversion's (union.converting*), a merge
 * --into's (union.mergedown-*), the format fsck keeps (union.format)? */
bool hu_xattr_is_record(const char *rest);
/* The same in two steps, for layers detected side by side with a problem
 * sink: the walk that counts, which reports nothing and may run in any
 * thread, then (always, to free *@out, even after the walk failed) the
 * finish, in the thread that may call the sink: a mixed layer's reports
 * and the layer's fields.  Each returns 0, or -1 with @e. */
struct hu_detect;
int hu_layer_detect_walk(struct hu_layer *l, struct hu_detect **out,
			 struct hu_error *e);
int hu_layer_detect_finish(struct hu_detect *s, struct hu_error *e);
/* The stack-wide part of detection (layer.c): the layers of @v (@n of
 * them) detected OCI for their .wh. names alone read as NONE where
 * another directory layer is union or overlay.  @self: a deferred layer
 * being settled (detected, not released yet), or NULL. */
int hu_stack_read_names(struct hu_layer *v, size_t n,
			const struct hu_layer *self, struct hu_error *e);

/*
 * The record of a conversion in place (convrec.c): the private xattr
 * "union.converting" on the layer root, under user.* when neither format
 * needs trusted.*, valued "FROM>TO", each "union", "overlay" (with
 * "-user" for the user.* namespace) or "oci".  While it is there, the
 * layer is half-converted and read in both formats (hu_layer.conv_to).
 * hu_conv_record_set() writes @l's record converting to @to (through the
 * write wrapper); hu_conv_record_clear() removes it.
 */
int hu_conv_record_set(const struct hu_layer *l, const struct hu_layer *to,
		       struct hu_error *e);
int hu_conv_record_clear(const struct hu_layer *l, const struct hu_layer *to,
			 struct hu_error *e);
/* Read @l's record, if any, into its format and conv_to: 1 when there is
 * one, 0 when none. */
int hu_conv_record_read(struct hu_layer *l, struct hu_error *e);
/* The times of directory @fd before the conversion changed it, kept in
 * "union.converting-times" until they are restored. */
int hu_conv_times_set(const struct hu_layer *l, const struct hu_layer *to,
		      int fd, const struct stat *st, struct hu_error *e);
int hu_conv_times_clear(const struct hu_layer *l, const struct hu_layer *to,
			int fd, struct hu_error *e);
int hu_conv_times_read(int fd, struct timespec ts[2], bool *found,
		       struct hu_error *e);
/* fstat of directory @fd of layer @l, with the times it had before a
 * conversion in place of @l began, if one is under way. */
int hu_layer_dir_stat(const struct hu_layer *l, int fd, struct stat *st,
		      struct hu_error *e);

/*
 * A deferred layer (hu_stack_opts.defer_below) reads as HU_FMT_NONE until
 * something that could be a marker of some format is met; then the whole
 * layer is detected (hu_layer_settle).  Reading an entry without such
 * evidence as NONE is exact: in every format an entry that is none of
 * these things is an ordinary one.  The view calls the probes below before
 * it asks a deferred layer's format about a directory, a name or an entry;
 * each is a no-op once the layer is settled.
 */
int hu_layer_settle(const struct hu_layer *l, struct hu_error *e);
/* Whether @l is still deferred, asked by a thread other than the one that
 * lists the view, which may settle @l meanwhile: once this says false, the
 * format is settled and may be read. */
bool hu_layer_is_deferred(const struct hu_layer *l);
/* Did detection list every regular file's xattrs (hu_layer.refs asked)
 * and find neither a redirect nor metacopy anywhere, nor a private xattr
 * on any regular file? */
bool hu_layer_files_plain(const struct hu_layer *l);
/* Directory @fd: overlay or union xattrs, or a .wh..wh..opq in it. */
int hu_layer_probe_dir(const struct hu_layer *l, int fd, struct hu_error *e);
/* Name @name in directory @dirfd, whether it exists or not: a .wh. name
 * the layer holds, or a .wh.@name beside it. */
int hu_layer_probe_name(const struct hu_layer *l, int dirfd,
			const char *name, struct hu_error *e);
/* Entry @name (lstat @st): a 0/0 device, a union whiteout symlink, a
 * regular file with overlay or union xattrs (metacopy, xattr whiteout). */
int hu_layer_probe_entry(const struct hu_layer *l, int dirfd,
			 const char *name, const struct stat *st,
			 struct hu_error *e);
/* The same for a regular file whose xattr names (@len bytes) are read. */
int hu_layer_probe_xattr_names(const struct hu_layer *l, const char *names,
			       size_t len, struct hu_error *e);
/* Entry @name of @l's own walk, of type @type (S_IFMT bits): its .wh.
 * name, then what hu_layer_probe_entry() looks at, with the syscalls
 * detection spends on it (a readlink for a symlink, an xattr listing for
 * a regular file, a stat for a character device). */
int hu_layer_probe_own(const struct hu_layer *l, int dirfd, const char *name,
		       mode_t type, struct hu_error *e);
/* A deferred layer whose own walk probed each of its directories (their
 * xattr names) and entries (hu_layer_probe_own) and never settled it: it
 * is NONE, as its detection would find, and settled so (hu_layer.refs
 * not asked: that needs detection's walk). */
void hu_layer_settle_plain(const struct hu_layer *l);
/* Does the walk of @l, within its first @max_dirs directories, meet
 * what the probes settle a deferred layer on?  1 yes, 0 no, -1 error.
 * Nothing is settled: a stack detects a layer found so with the others,
 * side by side (hu_stack_opts.defer_look). */
int hu_layer_marked_early(const struct hu_layer *l, size_t max_dirs,
			  struct hu_error *e);

/* Open the data of the regular files of listed @d from entry @from on,
 * up to the next directory or a bound, and start reading it ahead:
 * hu_vdir_open_data() hands out those fds.  The previous window's fds
 * not handed out are closed.  Returns the entry to call it again at. */
size_t hu_vdir_prefetch(struct hu_vdir *d, size_t from);
/* hu_vdir_open_child(), but the bottom layer's directory is looked up
 * only when something asks for it (a listing, a name lookup that gets
 * there, a child's lookup, a file's data), where the lookup has found the
 * child merging already with a directory of a layer between and would
 * go on into the bottom layer plainly (by the same path, no redirect):
 * most directories a merge-down walks never need theirs.  The accessors
 * below that take no error see only the directories looked up so far
 * (hu_vdir_is_merged() is true either way).  Looking the bottom up
 * touches the child alone: another thread may then be the parent's. */
int hu_vdir_open_child_lazy(struct hu_vdir *d, const struct hu_ventry *ent,
			    struct hu_vdir **out, struct hu_error *e);
/* lstat of the topmost layer directory of @d (hu_vdir_fd()'s), through
 * its layer (layer/ldir.h): -1 with errno. */
int hu_vdir_stat(const struct hu_vdir *d, struct stat *st);
/* How many layer directories make up view directory @d (one fd each). */
size_t hu_vdir_width(const struct hu_vdir *d);
/* The directory of layer @layer that is part of @d (after redirects, as
 * the lookup found it), or -1 when that layer has none in @d. */
int hu_vdir_layer_fd(const struct hu_vdir *d, size_t layer);
/* Directory @name, just made plain in layer @layer beneath the parent's
 * directory of that layer (the parent @d was opened from, still open),
 * where @d had none: it joins @d between the directories above and below
 * it, as a lookup would find it (a plain directory steers nothing).  1
 * when it joined; 0 when @d cannot tell where a lookup would look (a
 * redirect, @layer not between two of its directories, a listing read):
 * open @d again; -1 on error. */
int hu_vdir_join(struct hu_vdir *d, size_t layer, const char *name,
		 struct hu_error *e);
/* Did that directory list no xattr at all when @d was opened?  (False
 * when unknown: a layer root, the bottom layer, names read ahead.) */
bool hu_vdir_layer_bare(const struct hu_vdir *d, size_t layer);
/* What the lookup that found that directory saw of it (its owner and
 * mode, which only their own calls change), or NULL: a layer root, a
 * directory that joined @d. */
const struct stat *hu_vdir_layer_stat(const struct hu_vdir *d, size_t layer);
/* hu_vdir_lookup() among the layer directories of @d below layer
 * @below only: what the stack of the layers beneath @below shows of
 * @name in @d, as if the layers from @below up had no entry there (they
 * still decide, by their opaque marks and redirects, which directories
 * @d holds). */
int hu_vdir_lookup_below(struct hu_vdir *d, const char *name, size_t below,
			 struct hu_ventry *ent, struct hu_error *e);
/* The lowest layer with a directory in @d. */
size_t hu_vdir_bottom_layer(const struct hu_vdir *d);
/* The path, relative to its layer's root, of the directory of layer
 * @layer in @d (where the lookup found it), or NULL when it has none. */
const char *hu_vdir_layer_path(const struct hu_vdir *d, size_t layer);
/* Would a directory of layer @below carrying overlay redirect @r ("/a/b")
 * merge with exactly the directories @d holds of the layers beneath
 * @below, as the kernel follows it?  1 yes, 0 no, -1 on error.  What a
 * merge-down writes into a layer to keep a directory's view. */
int hu_vdir_redirect_keeps(struct hu_vdir *d, size_t below, const char *r,
			   struct hu_error *e);
/* Read the xattr names of every entry of listed @d from layer @from_layer
 * up into the entries.  An entry whose names are not read (or cannot be,
 * or copied) keeps xattr_names NULL: its reader reads them itself, and
 * meets any error where it would have without this. */
void hu_vdir_read_xattr_names(struct hu_vdir *d, size_t from_layer);
/* Settle every deferred layer the data of listed @d's files may be read
 * from: those below a file that may be a metacopy one.  With it called by
 * the thread that lists, hu_vdir_open_data() never settles a layer, and
 * another thread can read the files while the lister settles layers. */
int hu_vdir_settle_for_data(struct hu_vdir *d, struct hu_error *e);

/* The names of a directory, sorted bytewise ('.' and '..' left out). */
struct hu_name {
	const char *name;
	unsigned char type;	/* d_type, DT_UNKNOWN on some filesystems */
};
struct hu_names {
	struct hu_name *v;
	size_t n;
	char *pool;		/* one allocation backing every name */
};
/* List @fd (read from its start; @fd keeps its offset after). */
int hu_names_read(int fd, struct hu_names *out, const char *path,
		  struct hu_error *e);
/* The same for an fd just opened, never read: no rewind (one syscall per
 * directory, a tenth of a flatten's directory work). */
int hu_names_read_fresh(int fd, struct hu_names *out, const char *path,
			struct hu_error *e);
/* Either of them for a directory of layer @l (@fresh: the second), one
 * syscall fewer where the layer's filesystem allows (readdir_fills). */
int hu_layer_names_read(const struct hu_layer *l, int fd, bool fresh,
			struct hu_names *out, const char *path,
			struct hu_error *e);
void hu_names_free(struct hu_names *l);

/* openat() of a directory, never following a symlink. */
int hu_open_dir_at(int dirfd, const char *name);
/* The directory at relative @path under @rootfd ("" or "/": @rootfd
 * itself, a new fd), opened as a walk of hu_open_dir_at() would (no
 * symlink followed, never above @rootfd: a symlink met says ENOTDIR), in
 * one openat2(2) where the kernel has it. */
int hu_open_dir_beneath(int rootfd, const char *path);
/* Is open @fd still the entry @name of @dirfd (same device and inode,
 * @name not followed)?  For a file we locked, which its owner may have
 * removed or replaced meanwhile. */
bool hu_fd_is_at(int dirfd, const char *name, int fd);

/* Read xattr @name of entry @name in @dirfd without following it.  Returns
 * the value length, or -1 with errno (ENODATA when absent). */
ssize_t hu_lgetxattr_at(int dirfd, const char *name, const char *attr,
			void *buf, size_t size);
/* listxattr(2) of entry @name in @dirfd (NULL name: @dirfd itself),
 * never following it: like llistxattr, -1 with errno (ERANGE...).  A
 * @size above 512 bytes is asked for only when 512 do not do (the kernel
 * allocates what is asked on every call): then it takes two calls. */
ssize_t hu_listxattr_at(int dirfd, const char *name, char *list,
			size_t size);
/* getxattrat(2) and listxattrat(2), Linux 6.13: numbered alike on every
 * architecture but alpha and mips; glibc 2.36 does not know them yet. */
#if !defined(__NR_getxattrat) && !defined(__alpha__) && !defined(__mips__)
#define __NR_getxattrat 464
#define __NR_listxattrat 465
#endif
/* Tests: pretend the kernel has no getxattrat/listxattrat (Linux 6.13),
 * so that the /proc/self/fd path fallback is used. */
void hu_xattrat_disable(void);
/* List the xattr names of entry @name in @dirfd (NULL name: @dirfd itself).
 * Returns a malloc'd buffer in *@list (NULL when none) and its size. */
int hu_llistxattr_at(int dirfd, const char *name, char **list, ssize_t *len);
/* The same into @small (@size bytes) when the names fit, which most
 * entries' do in one call, else malloc'd: *@list is @small or a buffer to
 * free.  Returns the length (0 where xattrs are not supported), -1 with
 * errno. */
ssize_t hu_xattr_names(int dirfd, const char *name, char *small, size_t size,
		       char **list);

/* The "/proc/self/fd/N/name" path that reaches an entry without
 * following it; @buf must hold HU_FDPATH_MAX bytes. */
#define HU_FDPATH_MAX 300
const char *hu_fdpath(char *buf, int dirfd, const char *name);

/* A growable path relative to a tree's root, for messages. */
struct hu_pathbuf {
	char *s;
	size_t len, cap;
};
int hu_pathbuf_push(struct hu_pathbuf *p, const char *name, size_t *saved);
void hu_pathbuf_pop(struct hu_pathbuf *p, size_t saved);
void hu_pathbuf_free(struct hu_pathbuf *p);

/*
 * Every change to a filesystem goes through these wrappers (wr.c), so that
 * dry runs and fault injection live in one place.  They behave like the
 * system calls they wrap: -1 and errno on failure.
 *
 * Fault injection for tests: HUNION_FAULT=OP:N[:ERRNO] makes the Nth call
 * of wrapper OP (e.g. "write", "mkdir", "setxattr") fail with ERRNO
 * (default EIO); HUNION_FAULT=kill:N kills the process before its Nth
 * change of any kind, HUNION_FAULT=int:N interrupts it (SIGINT) there,
 * both on the thread making that change (wr.c says why).
 */
void hu_wr_set_dry_run(bool on);
bool hu_wr_dry_run(void);
int hu_wr_mkdirat(int dirfd, const char *name, mode_t mode);
int hu_wr_mknodat(int dirfd, const char *name, mode_t mode, dev_t dev);
int hu_wr_symlinkat(const char *target, int dirfd, const char *name);
int hu_wr_linkat(int olddirfd, const char *oldname, int newdirfd,
		 const char *newname);
int hu_wr_create(int dirfd, const char *name, mode_t mode);
/* The same for the lock file of an output (outlock.c), opened for
 * reading and writing; fault injection counts it as "lock", so that
 * "create" counts the same files as before locks. */
int hu_wr_create_lock(int dirfd, const char *name, mode_t mode);

/* The stem of the names beside output @base (its temporaries
 * ".STEM.hunion-XXXXXX", its lock file ".STEM.hunion-lock"): @base
 * itself, or, where those names would pass NAME_MAX (@base longer than
 * 240 bytes), its first 223 bytes, "~" and 16 hex digits of a hash of
 * all of it.  The stem of a stem is itself. */
#define HU_TEMP_STEM_SIZE 241
void hu_temp_stem(const char *base, char stem[HU_TEMP_STEM_SIZE]);
/* Create a temporary beside @base in @dirfd with @make (-1 with errno on
 * failure): named ".STEM.hunion-XXXXXX" (six hex digits), hidden and
 * recognisably ours, another name tried while one is taken.  Returns what
 * @make returned, with the malloc'd name in *@name, or -1 with errno.
 * Make it holding the lock of output BASE (hu_outlock_take): the next
 * writer of BASE removes what a killed run left. */
int hu_make_temp(int dirfd, const char *base,
		 int (*make)(int dirfd, const char *name, void *ctx),
		 void *ctx, char **name);
/* Is @name a temporary of hu_make_temp() for @base? */
bool hu_is_temp_of(const char *name, const char *base);

/*
 * One writer per output (outlock.c).  A run writing output BASE in
 * @dirfd (a file or a tree) holds flock(2) on ".STEM.hunion-lock" there
 * from before it makes its temporary until that is renamed in or
 * removed; another run for BASE waits.  Holding it, the run removes
 * every temporary of BASE it finds: only a killed run leaves one.  In a
 * dry run nothing is locked or removed; on a filesystem without flock
 * the run goes on unlocked and removes nothing.  @out names the output
 * in errors.
 */
int hu_outlock_take(struct hu_outlock *k, int dirfd, const char *base,
		    const char *out, struct hu_error *e);
/* Remove the lock file and release the lock; safe when not held. */
void hu_outlock_drop(struct hu_outlock *k, int dirfd);
int hu_wr_unlinkat(int dirfd, const char *name, int flags);
int hu_wr_renameat2(int olddirfd, const char *oldname, int newdirfd,
		    const char *newname, unsigned int flags);
int hu_wr_fchownat(int dirfd, const char *name, uid_t uid, gid_t gid,
		   int flags);
int hu_wr_fchmod(int fd, mode_t mode);
int hu_wr_fchmodat(int dirfd, const char *name, mode_t mode);
int hu_wr_futimens(int fd, const struct timespec ts[2]);
int hu_wr_utimensat(int dirfd, const char *name, const struct timespec ts[2],
		    int flags);
/* xattrs of entry @name in @dirfd, never following it (NULL name: the fd) */
int hu_wr_setxattr_at(int dirfd, const char *name, const char *attr,
		      const void *value, size_t len, int flags);
int hu_wr_removexattr_at(int dirfd, const char *name, const char *attr);
/* data */
ssize_t hu_wr_pwrite(int fd, const void *buf, size_t len, off_t off);
/* write(2) at the file offset, for streams (a tarball, standard output);
 * fault injection counts it as "write", like hu_wr_pwrite. */
ssize_t hu_wr_write(int fd, const void *buf, size_t len);
ssize_t hu_wr_copy_range(int in, off_t *in_off, int out, off_t *out_off,
			 size_t len);
/* sync_file_range(2); fault injection counts it as "sync". */
int hu_wr_sync_range(int fd, off_t off, off_t len, unsigned int flags);
int hu_wr_clone(int in, int out);
int hu_wr_ftruncate(int fd, off_t len);
/* fsync(2): fault injection counts it as "fsync". */
int hu_wr_fsync(int fd);
/* syncfs(2) of the filesystem of @fd: fault injection counts it as
 * "syncfs". */
int hu_wr_syncfs(int fd);

/* Write-behind for a long stream written to a regular file (outfile.c):
 * each window's writeback starts as soon as it is full, and the window
 * before it is waited for and dropped from the page cache.  A tarball we
 * write is not read back by us; left in the cache as dirty pages it
 * would push out the layers' own pages and be written back in one burst
 * at the end (and copying into freshly allocated pages is what makes
 * large buffered writes slow).  Inert on anything but a regular file. */
struct hu_writebehind {
	int fd;			/* -1: off */
	off_t started;		/* writeback started up to here */
	off_t dropped;		/* written back and dropped up to here */
	off_t end;		/* written up to here */
};
void hu_writebehind_init(struct hu_writebehind *w, int fd);
/* Account for @len bytes just written at the end; -1 with errno when
 * waiting for the writeback reported an error (EIO, ENOSPC). */
int hu_writebehind_wrote(struct hu_writebehind *w, size_t len);

/* linkat() to @newname in @newdirfd from @oldpath, a relative path below
 * @rootfd of any length, walked one component at a time. */
int hu_linkat_path(int rootfd, const char *oldpath, int newdirfd,
		   const char *newname);

/* Remove @name in @dirfd and everything below it (through the wrapper). */
int hu_rmtree(int dirfd, const char *name);

/* ---- what killed runs left, moved aside (aside.c) ---------------------- */

/* ".hunion-gone-" and 12 hex digits: an entry moved aside, locked by its
 * mover until it is removed. */
#define HU_ASIDE_PREFIX ".hunion-gone-"
bool hu_is_aside_name(const char *name);
/* Move @name of @dirfd, a killed run's leftover (its caller holds what
 * proves no live run owns it), aside in one rename within @dirfd, and
 * note it for hu_aside_remove(), locked meanwhile.  @fd: the entry open
 * and flock'd by the caller (taken on success), or -1: opened and locked
 * here.  @dir names @dirfd in progress and errors.  0 when moved (@fd
 * taken), or -1 when left where it is (held, gone, a dry run, a rename
 * refused; @fd still the caller's). */
int hu_aside_move(int dirfd, const char *name, int fd, const char *dir);
/* Is @name moved aside?  Then, if its mover died (its lock free) and it
 * is ours to remove, it is noted for hu_aside_remove() too. */
bool hu_aside_adopt(int dirfd, const char *name, const char *dir);
/* @name of @dirfd moved aside by a run that died, and ours: its fd,
 * locked (nothing noted), else -1. */
int hu_aside_locked(int dirfd, const char *name);

/* What an output is (outexist.c). */
enum hu_out_kind { HU_OUT_FILE, HU_OUT_TREE };
/* The rule for an output @name in @dirfd (@path as the user named it)
 * that exists already, the same for every command: a regular file is
 * replaced by a new file (HU_OUT_FILE), an empty directory by a new tree
 * (HU_OUT_TREE); anything else is refused.  1 when @name exists and may
 * be replaced (@st its lstat), 0 when it does not exist, -1 refused. */
int hu_out_existing(int dirfd, const char *name, const char *path,
		    enum hu_out_kind kind, struct stat *st,
		    struct hu_error *e);

/* Refuse an output @out whose directory is @dirfd when that directory or
 * one above it is the root of one of @layers (treeout.c): writing there
 * would change a layer while it is read. */
int hu_check_outside_layers(int dirfd, const struct hu_layer *layers,
			    size_t n, const char *out, struct hu_error *e);

/* A regular file's bytes are the st_size bytes its stat saw: every copy
 * of them (merge, convert -o, flatten's tar entries) reads that many and
 * no more, and fails with this error (EIO, @path) when the file ends
 * before, rather than write content that never existed. */
int hu_error_shrank(struct hu_error *e, const char *path);

/* Copying one entry's bytes and xattrs (copy.c). */
struct hu_copy_state {
	bool no_clone;		/* FICLONE failed once: the fs cannot */
	bool no_copy_range;	/* copy_file_range cannot either */
	struct hu_progress_bytes *bytes;	/* data copied; NULL: none */
};
/* Copy the data of @in (whose stat is @st) into the empty file @out,
 * keeping holes: st_size bytes, however it grew meanwhile; a file that
 * shrank is an error (hu_error_shrank). */
int hu_copy_data(struct hu_copy_state *cs, int in, const struct stat *st,
		 int out, struct hu_error *e);
/* --clamp-mtime's rule, the same in every output: a time after @max
 * (to the nanosecond) becomes @max, whole seconds. */
static inline void hu_clamp_mtime(bool clamp, int64_t max, int64_t *sec,
				  long *nsec)
{
	if (clamp && (*sec > max || (*sec == max && *nsec > 0))) {
		*sec = max;
		*nsec = 0;
	}
}

/* The sha256 of every byte of @fd from offset 0 (pread: its offset
 * stays), as "sha256:<64 hex>", and how many bytes (digest.c). */
int hu_sha256_fd(int fd, char digest[72], uint64_t *size, struct hu_error *e);

/* Count @s's entry in the summary of a flatten, by its type (flatten.c):
 * the tarball's and the EROFS image's alike. */
struct hu_flatten_stats;
void hu_flatten_count(struct hu_flatten_stats *st, const struct stat *s);
/* After a flatten's walk: each tarball layer whose bytes were read
 * forward read to its end, its digests checked (flatten.c). */
int hu_flatten_data_finish(const struct hu_stack *s, struct hu_error *e);

/* One xattr of an entry, as an output writes it. */
struct hu_xattr {
	const char *name;	/* whole: "user.foo" */
	const void *value;
	size_t size;
};
/* Is xattr @name copied into an output (a tree or a tarball)?  Not the
 * layers' private ones, nor what /etc/xattr.conf says to skip; ACLs, which
 * it marks "permissions", are copied as the others.  Safe from any
 * thread. */
bool hu_xattr_copied(const char *name);
/* Copy the xattrs of a source entry to a destination entry, one by one
 * through hu_wr_setxattr_at() (errors name the attribute), leaving out
 * the private union/overlay ones and what /etc/xattr.conf says to skip.
 * Each side is an open fd (@name NULL), or @name in directory @fd (for
 * symlinks and devices, which are never opened). */
int hu_copy_xattrs(int sfd, const char *sname, int dfd, const char *dname,
		   struct hu_error *e);
/* The same for the source's xattr names @names (@len bytes, as listed by
 * hu_xattr_names()), for a caller that needs the list itself too. */
int hu_copy_xattrs_listed(int sfd, const char *sname, int dfd,
			  const char *dname, const char *names, ssize_t len,
			  struct hu_error *e);
/* The same with the private union/overlay xattrs too: a raw copy of a
 * layer, whose markers and records they are. */
int hu_copy_xattrs_raw(int sfd, const char *sname, int dfd, const char *dname,
		       struct hu_error *e);

/*
 * Tarball layers (tarlayer.c, tarindex.c): a .tar, .tar.gz or .tar.zst is
 * unpacked once, when the layer is opened, into a private directory
 * ($TMPDIR or /var/tmp, mode 0700) read as an OCI layer, and removed when
 * the layer is closed.
 */
/* Is @l a tarball layer: unpacked, streamed or read from its index? */
static inline bool hu_layer_tarball(const struct hu_layer *l)
{
	return l->unpacked || l->streamed || l->pindex;
}
/* Does the file @fd hold a tarball (zstd or gzip magic, a ustar header or
 * an all-zero first block)?  Reads its first block with pread. */
bool hu_tar_sniff(int fd);
/* Unpack the tarball @fd into a new private directory: on success @l->fd
 * is its root, @l->unpacked its path, @l->format OCI.  @below (may be
 * NULL) are the layers beneath: a directory the tarball only implies (a
 * parent no entry names) takes its metadata from there.  Errors read
 * "@l->path: ENTRY: message"; nothing is left behind. */
int hu_tarlayer_unpack(struct hu_layer *l, int fd, const struct hu_stack *below,
		       const struct hu_report *r, struct hu_error *e);
/* Read tarball layer @l (opened with hu_stack_opts.tar_sources: @l->fd
 * is the file; errors read as the unpack's) into directory @root as merge
 * -o writes the view: as tar -x would, with the layer's rules
 * (duplicates, parents no entry names), and without its markers.  Alone
 * (@root empty), they hide nothing; @over, @root holds the view of the
 * layers beneath already, and the tarball goes over it as the view puts
 * a layer over them: same names replaced but directories merged, what
 * its whiteouts and opaque directories hide removed.  @st counts what is
 * written.  *@fallback: the tarball did what only the general path can
 * read (tl.fallback).  On failure @root holds a part: the caller removes
 * it. */
int hu_tarlayer_extract(struct hu_layer *l, int root, bool over,
			struct hu_merge_stats *st, const struct hu_report *r,
			bool *fallback, struct hu_error *e);
/* Remove @l->unpacked and everything in it. */
void hu_tarlayer_remove(struct hu_layer *l);
/* An entry name as a path of the layer: "./a//b/" is "a/b"; "", "." and
 * "/" are the root (*@is_root).  NULL with *@why for a '..' component, an
 * empty name, a path through a whiteout and whiteouts that hide nothing
 * (".wh.", ".wh..", ".wh..."). */
char *hu_tar_path_norm(const char *in, bool *is_root, const char **why);
/* Is entry name @in (as in the tarball; @is_dir: the entry is a
 * directory) other than in the form every reader takes alike: names
 * joined by one '/', none empty, "." or "..", not absolute, a trailing
 * '/' on a directory only?  One leading "./" is that form too (GNU tar
 * and docker write it), and the root as "." or "/" (umoci writes "/").
 * NULL when it is in that form, else why not. */
const char *hu_tar_path_unusual(const char *in, bool is_dir);

#endif /* HUNION_INTERNAL_H */
