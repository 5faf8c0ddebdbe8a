/* SPDX-License-Identifier: MIT */
/*
 * merge --into (mergedown.c, mdprep.c, mdcopy.c, mdjournal.c, mdkeep.c):
 * the state of one merge-down and what its modules share.
 */
#ifndef HUNION_MERGEDOWN_H
#define HUNION_MERGEDOWN_H

#include "internal.h"
#include "common/linkmap.h"

struct md {
	const struct hu_stack *s;
	const struct hu_mergedown_opts *o;
	struct hu_mergedown_stats *st;
	const struct hu_layer *up;	/* the layer merged down */
	const struct hu_layer *to;	/* the one beneath it, changed */
	size_t iup, ito;		/* their indexes */
	/* The format and namespace of the markers written into @to: its
	 * own, or (a layer without markers) the upper's, or the nearest
	 * below's. */
	struct hu_layer tofmt;
	/* The stack as it is after: layers [0, ito]. */
	struct hu_stack after;
	struct hu_stack beneath;	/* layers [0, ito) */
	bool same_fs;		/* rename(2) from the upper to the target */
	bool keep;		/* --keep-upper: copy, change nothing above */
	bool raw;		/* the copies are the clone of the upper
				 * (mdkeep.c): markers and private xattrs
				 * kept, no temporary per entry */
	bool root;		/* run as root: records under trusted.* */
	struct hu_copy_state cs;
	struct hu_linkmap links;	/* copies: first target path of an
					 * upper inode with several names */
	struct hu_pathbuf path;		/* the directory being merged */
	uint64_t done;
	/* Several threads (mdpool.c): the pool, and the task whose entries
	 * this thread merges (both NULL on one thread). */
	struct md_pool *pool;
	struct md_task *task;
};

/* Does @m rename the upper's entries into the target (one filesystem,
 * the upper not kept), rather than copy them? */
static inline bool md_renames(const struct md *m)
{
	return m->same_fs && !m->keep;
}

/* Report step @what of @dir/@name (either may be NULL or ""). */
void md_step(struct md *m, const char *what, const char *dir,
	     const char *name);
/* Errors: prefix @e with @dir/@name and the layer's path. */
int md_fail(const struct hu_layer *l, const char *dir, const char *name,
	    int err, const char *what, struct hu_error *e);
/* Prefix @e with @name; returns -1. */
static inline int md_prefix_name(struct hu_error *e, const char *name)
{
	hu_error_prefix(e, name);
	return -1;
}
int md_prefix(const struct hu_layer *l, const char *dir, const char *name,
	      struct hu_error *e);

/* The view directory of @path in @s: 1 with *@out, 0 when the view has
 * no directory there, -1 on error. */
int md_vopen(const struct hu_stack *s, const char *path, struct hu_vdir **out,
	     struct hu_error *e);
/* Does the stack after the merge (the target and those beneath) show
 * @dir/@name?  Asked once the target's own entry is gone: 1 when a
 * layer beneath still has it, so the target needs a marker. */
int md_below_has(struct md *m, const char *dir, const char *name,
		 struct hu_error *e);
/* The same for @name in view directory @v of the whole stack. */
int md_below_has_v(struct md *m, struct hu_vdir *v, const char *name,
		   struct hu_error *e);
/* Open the parent directory of @path below @rootfd, never following a
 * symlink; *@leaf points into @path.  -1 with errno. */
int md_open_parent(int rootfd, const char *path, const char **leaf);

/* The ordinary merge (no --keep-upper) of stack @s, whose top layer is
 * the upper of @m or its clone, into the one beneath, on one
 * filesystem; in @m's options and stats. */
int md_merge_plain(const struct md *m, const struct hu_stack *s,
		   struct hu_error *e);

/* ---- phase 2 (mergedown.c), one directory at a time ------------------ */

/* Merge root directory @m->up (its stat @us) into @m->to, directory
 * after directory, on this thread. */
int md_merge_root(struct md *m, const struct stat *us, struct hu_error *e);
/* The entries of upper directory @ufd (stat @us) of view directory @v
 * merged into @tfd, after the times @ufd had are recorded into @ts. */
int md_merge_entries(struct md *m, struct hu_vdir *v, int ufd,
		     const struct stat *us, int tfd, struct timespec ts[2],
		     struct hu_error *e);
/* Then: the directory's metadata given to @tfd. */
int md_dir_done(struct md *m, const struct hu_vdir *v, int ufd,
		const struct stat *us, int tfd, const struct timespec ts[2],
		struct hu_error *e);
/* And last, the emptied upper directory @name of @ufd removed (not with
 * --keep-upper). */
int md_rmdir_upper(struct md *m, int ufd, const char *name,
		   struct hu_error *e);

/* ---- several threads (mdpool.c) ---------------------------------------- */

/* Merge the whole upper (its root's stat @us): by a pool of threads where
 * the merge allows it, each taking directories whole, else by
 * md_merge_root(). */
int md_pool_merge(struct md *m, const struct stat *us, struct hu_error *e);
/* View directory @c of subdirectory @name (its stat @us) of the task this
 * thread merges the entries of, ready to merge: a task of its own, to the
 * pool while few wait, else merged by this thread now.  Takes @c.  0, or
 * -1 on error. */
int md_task_merge(struct md *m, struct hu_vdir *c, const struct stat *us,
		  const char *name, struct hu_error *e);
/* Another thread failed: true (@e set) when this one is to stop too. */
bool md_pool_stopped(struct md *m, struct hu_error *e);
/* Count one entry merged; the count so far. */
uint64_t md_pool_tick(struct md_pool *pool);

/* ---- phase 1 (mdprep.c): redirected directories and metacopy files made
 * plain, each step keeping the view or recorded in the intent record.
 * With --keep-upper nothing is changed: 1 when the upper holds a
 * redirected directory or a metacopy file with a redirect, which need
 * the merge through a clone (mdkeep.c). */
int md_prepare(struct md *m, struct hu_error *e);

/* ---- --keep-upper through a clone (mdkeep.c) ------------------------- */

/* The clone of the upper in the target: made under the first name,
 * renamed to the second once whole. */
#define MD_UPPER_TMP ".hunion-md.upper.tmp"
#define MD_UPPER ".hunion-md.upper"
/* At the start of every merge: what an earlier --keep-upper run left
 * finished (a clone merged, its leftovers removed).  1 when that was the
 * whole job, or it was done before (@m->st->kept_before), 0 to go on. */
int md_keep_resume(struct md *m, struct hu_error *e);
/* What md_prepare()'s 1 asks for: the upper cloned into the target,
 * marked spent for it, and the clone merged down. */
int md_keep_clone(struct md *m, struct hu_error *e);

/* ---- copies (mdcopy.c) ---------------------------------------------- */

/* The fixed temporary name for @name in its directory, into @buf (32
 * bytes): the same on every run, so a re-run removes a killed one's. */
const char *md_temp_name(char *buf, const char *name);
/* Copy non-directory @name of @sfd (lstat @st; a regular file's bytes
 * from @datafd when >= 0, which it does not close) to @dname in @dfd,
 * made whole under the temporary name and renamed over @dname. */
int md_copy_nondir(struct md *m, int sfd, const char *name,
		   const struct stat *st, int datafd, int dfd,
		   const char *ddir, const char *dname, struct hu_error *e);
/* Copy directory @name of @sfd (a tree of the upper that merges with
 * nothing) to @name in @dfd: built under the temporary name, markers and
 * private xattrs left out, @opaque marked opaque in the target's format,
 * renamed over @name (exchanged with a non-directory there, then that
 * removed). */
/* What a killed md_copy_tree() of @name may have left in @dfd (the
 * entry its copy replaced) removed. */
int md_copy_leftover(int dfd, const char *name, struct hu_error *e);
int md_copy_tree(struct md *m, int sfd, const char *name, int dfd,
		 const char *ddir, bool opaque, struct hu_error *e);
/* Give directory @tfd the upper's @ufd (its stat @us) mode, owner and
 * public xattrs (the target's own public ones not in the upper removed)
 * and times @ts.  @v: the view directory they belong to, whose opening
 * may have found either bare (no xattr to copy, none to remove). */
int md_dir_meta(struct md *m, const struct hu_vdir *v, int ufd,
		const struct stat *us, int tfd, const struct timespec ts[2],
		struct hu_error *e);
/* Remove the private xattrs of @name in @dirfd (NULL: @dirfd itself),
 * except @keep (may be NULL). */
int md_strip_private(int dirfd, const char *name, const char *keep,
		     struct hu_error *e);
/* The raw copy of the whole upper into MD_UPPER_TMP in the target (every
 * xattr, marker, hard-link group, owner, mode and times kept), synced,
 * then renamed to MD_UPPER: the clone is whole once it has that name. */
int md_clone_upper(struct md *m, struct hu_error *e);

/* ---- records (mdjournal.c) ------------------------------------------- */

/* The times directory @fd of the upper had before this merge changed
 * it: recorded on it at the first visit (with @create), read back at a
 * re-run.  *@found (may be NULL): a record was there or is now.  @st:
 * @fd's stat when the caller has it, else NULL. */
int md_times_get(const struct md *m, int fd, const struct stat *st, bool create,
		 struct timespec ts[2], bool *found, struct hu_error *e);
int md_times_clear(const struct md *m, int fd, struct hu_error *e);

/* The intent record of the steps that change the view for a moment (the
 * target's redirected directories moved to their new names, through a
 * staging directory, then the upper's redirects removed): on the upper's
 * root, written before the first and removed after the last.  A re-run
 * finishes them first. */
struct md_move {
	ino_t ino;		/* the target's directory being moved; 0:
				 * none, a new one is made at @dst */
	char *src, *dst;	/* its path in the target, from and to */
	char *marker;		/* what it gets: "" nothing; "/a/b" the
				 * redirect by which it still merges with
				 * the layers beneath the target;
				 * MD_MARK_OPAQUE */
};
#define MD_MARK_OPAQUE "opaque"
struct md_intent {
	struct md_move *v;
	size_t n;
};
#define MD_STAGE ".hunion-md.stage"
int md_intent_write(const struct md *m, const struct md_intent *in,
		    struct hu_error *e);
/* 1 with *@in filled (free with md_intent_free), 0 when none. */
int md_intent_read(const struct md *m, struct md_intent *in,
		   struct hu_error *e);
int md_intent_clear(const struct md *m, struct hu_error *e);
void md_intent_free(struct md_intent *in);

/* The kept record on the upper's root: a --keep-upper run through a clone
 * is merging it into the target (st_dev:st_ino of its root), or merged
 * it.  Read: NONE as well when it names another target. */
enum md_kept { MD_KEPT_NONE, MD_KEPT_MERGING, MD_KEPT_MERGED };
int md_kept_read(const struct md *m, enum md_kept *k, struct hu_error *e);
int md_kept_write(const struct md *m, enum md_kept k, struct hu_error *e);
/* The record on the root @fd of the clone naming the upper it is of:
 * written; and does it name @m's upper (1 yes, 0 no)? */
int md_clone_mark(const struct md *m, int fd, struct hu_error *e);
int md_clone_is_ours(const struct md *m, int fd, struct hu_error *e);

#endif /* HUNION_MERGEDOWN_H */
