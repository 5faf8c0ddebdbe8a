/* SPDX-License-Identifier: MIT */
/*
 * merge --into: the top layer (the upper) merged down into the one
 * beneath it (the target), in place.
 *
 * The invariant that makes it safe to stop at any instant: every step
 * keeps the view of the whole stack as it was.  A step only removes from
 * the target what the upper hides, moves an entry from the upper to the
 * same place in the target (rename(2): the view shows the same inode
 * before and after), or takes from the upper a marker that hides nothing
 * any more.  So after a kill the stack shows what it showed, and running
 * the same command again finds less to do and finishes.  The two steps
 * that cannot keep the view (a redirected directory of the target moved
 * to its new name, then the upper's redirect removed) are written down
 * first (mdjournal.c, mdprep.c) and finished by a re-run before it reads
 * the view.
 *
 * Phase 1 (mdprep.c) makes the upper plain: redirected directories moved
 * in the target, metacopy files given their data.  Phase 2 (here) walks
 * the upper: a whiteout removes the target's entry (and stays as a
 * target whiteout only where a layer beneath still shows the name); a
 * file, symlink or device is renamed over the target's entry; a directory
 * that merges with the target's is merged (its entries first, then its
 * mode, owner, xattrs and times, then the emptied upper directory goes); a
 * directory that merges with nothing beneath (opaque, or new) is swapped
 * in whole.  Which directory merges with which is the view's answer
 * (view.c), never a rule of this file.
 *
 * --keep-upper copies instead of moving and changes nothing above the
 * target; an upper that needs phase 1 is merged through a clone of it in
 * the target instead (mdkeep.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "mergedown/mergedown.h"

void md_step(struct md *m, const char *what, const char *dir,
	     const char *name)
{
	char *p;

	if (!m->o->step)
		return;
	p = hu_path_join(dir ? dir : "", name ? name : "");
	m->o->step(m->o->ctx, what, p ? p : "?");
	free(p);
}

int md_prefix(const struct hu_layer *l, const char *dir, const char *name,
	      struct hu_error *e)
{
	hu_error_prefix(e, name && *name ? name : NULL);
	hu_error_prefix(e, dir && *dir ? dir : NULL);
	hu_error_prefix(e, l->path);
	return -1;
}

int md_fail(const struct hu_layer *l, const char *dir, const char *name,
	    int err, const char *what, struct hu_error *e)
{
	hu_error_set(e, err, NULL, "%s", what);
	return md_prefix(l, dir, name, e);
}

int md_vopen(const struct hu_stack *s, const char *path, struct hu_vdir **out,
	     struct hu_error *e)
{
	char *copy = strdup(path), *save = NULL;
	struct hu_vdir *d;
	int rc = 1;

	*out = NULL;
	if (!copy)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	if (hu_vdir_open_root(s, &d, e) < 0) {
		free(copy);
		return -1;
	}
	for (char *c = strtok_r(copy, "/", &save); c && rc == 1;
	     c = strtok_r(NULL, "/", &save)) {
		struct hu_ventry ent;
		struct hu_vdir *child;

		if (!strcmp(c, "."))
			continue;
		rc = hu_vdir_lookup(d, c, &ent, e);
		if (rc == 1 && !S_ISDIR(ent.st.st_mode))
			rc = 0;
		if (rc == 1 && hu_vdir_open_child(d, &ent, &child, e) < 0)
			rc = -1;
		hu_vdir_close(d);
		d = rc == 1 ? child : NULL;
	}
	free(copy);
	*out = d;
	return rc;
}

/* @name in @v among the layers beneath the target: 1 found (*@ent), 0
 * not, -1 on error. */
static int lookup_beneath(struct md *m, struct hu_vdir *v, const char *name,
			  struct hu_ventry *ent, struct hu_error *e)
{
	if (m->ito == 0)
		return 0;	/* nothing beneath the target */
	return hu_vdir_lookup_below(v, name, m->ito, ent, e);
}

int md_below_has_v(struct md *m, struct hu_vdir *v, const char *name,
		   struct hu_error *e)
{
	struct hu_ventry ent;

	return lookup_beneath(m, v, name, &ent, e);
}

/* Does a layer beneath the target show a directory @name in @v, which an
 * opaque marker of the target's would hide?  A file beneath merges with
 * nothing, and needs none.  1, 0, or -1. */
static int below_has_dir(struct md *m, struct hu_vdir *v, const char *name,
			 struct hu_error *e)
{
	struct hu_ventry ent;
	int rc = lookup_beneath(m, v, name, &ent, e);

	return rc == 1 ? S_ISDIR(ent.st.st_mode) : rc;
}

int md_below_has(struct md *m, const char *dir, const char *name,
		 struct hu_error *e)
{
	struct hu_ventry ent;
	struct hu_vdir *d;
	int rc;

	if (m->ito == 0)
		return 0;	/* nothing beneath the target */
	/* A dry run removed nothing from the target: ask the layers
	 * beneath it alone (the plan may then show a marker too many
	 * under an opaque directory of the target). */
	rc = md_vopen(hu_wr_dry_run() ? &m->beneath : &m->after, dir, &d, e);
	if (rc == 1)
		rc = hu_vdir_lookup(d, name, &ent, e);
	hu_vdir_close(d);
	return rc;
}

int md_open_parent(int rootfd, const char *path, const char **leaf)
{
	const char *slash = strrchr(path, '/');
	char *dir;
	int fd;

	*leaf = slash ? slash + 1 : path;
	if (!slash)
		return dup(rootfd);
	dir = strndup(path, slash - path);
	if (!dir)
		return -1;
	fd = hu_open_dir_beneath(rootfd, dir);
	free(dir);
	return fd;
}

static void progress(struct md *m)
{
	hu_report_progress(m->o->report,
			   m->pool ? md_pool_tick(m->pool) : ++m->done);
}

/* Remove the target's entry @name, which the upper hides. */
static int remove_target(struct md *m, int tfd, const char *name,
			 struct hu_error *e)
{
	struct stat st;

	if (tfd < 0 || fstatat(tfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	md_step(m, "remove", m->path.s, name);
	if (hu_rmtree(tfd, name) < 0)
		return md_fail(m->to, m->path.s, name, errno, "cannot remove",
			       e);
	m->st->removed++;
	return 0;
}

/* A rename failed: true when it met another filesystem (EXDEV, a mount
 * inside a layer) and this run copies from here on.  Not in a pool,
 * whose threads stop on the error and start over on one thread, which
 * then copies with one hard-link map. */
static bool copies_from_here(struct md *m)
{
	if (errno != EXDEV || m->pool)
		return false;
	m->same_fs = false;
	return true;
}

/* Is the upper's whiteout @name (stat @st) the very marker the target
 * takes: the same format's own kind (a 0/0 device, a union symlink),
 * renamed in on one filesystem? */
static bool whiteout_moves(const struct md *m, const struct stat *st)
{
	if (!md_renames(m) || hu_wr_dry_run() ||
	    m->up->format != m->tofmt.format ||
	    m->up->userxattr != m->tofmt.userxattr)
		return false;
	if (m->tofmt.format == HU_FMT_OVERLAY)
		return S_ISCHR(st->st_mode);
	return m->tofmt.format == HU_FMT_UNION && S_ISLNK(st->st_mode);
}

/* The upper's whiteout @name made ready to move into the target as it
 * is: the kernel's bookkeeping stays behind, the marker's own xattr (a
 * union one's) not. */
static int keep_whiteout(struct md *m, int ufd, const char *name,
			 struct hu_error *e)
{
	char attr[64];
	const char *keep = m->tofmt.format == HU_FMT_UNION ?
		hu_marker_xattr(m->tofmt.format, m->tofmt.userxattr,
				"whiteout", attr, sizeof(attr)) : NULL;

	return md_strip_private(ufd, name, keep, e);
}

/* The upper's whiteout @name renamed over the target's: 1 done, 0 when
 * another filesystem was met (the copies take it from here).  What the
 * target held there is removed first, as a step of its own (the rename
 * does not replace it), so that the steps and counts are those of a
 * whiteout made anew. */
static int move_whiteout(struct md *m, int ufd, int tfd, const char *name,
			 struct hu_error *e)
{
	int rc;

	if (keep_whiteout(m, ufd, name, e) < 0)
		return md_prefix(m->up, m->path.s, NULL, e);
	rc = hu_wr_renameat2(ufd, name, tfd, name, RENAME_NOREPLACE);
	if (rc < 0 && errno == EEXIST) {
		if (remove_target(m, tfd, name, e) < 0)
			return -1;
		rc = hu_wr_renameat2(ufd, name, tfd, name, RENAME_NOREPLACE);
	}
	if (rc == 0) {
		md_step(m, "whiteout", m->path.s, name);
		m->st->markers++;
		return 1;
	}
	if (!copies_from_here(m))
		return md_fail(m->to, m->path.s, name, errno,
			       "cannot move into place", e);
	return 0;
}

/* A whiteout of the upper (stat @st): the target's entry goes; the
 * target keeps a whiteout of its own only where a layer beneath still
 * shows the name: the upper's, moved, where it is one of the target's
 * kind. */
static int do_whiteout(struct md *m, struct hu_vdir *v, int ufd, int tfd,
		       const char *name, const struct stat *st,
		       struct hu_error *e)
{
	int need = tfd < 0 ? 0 : md_below_has_v(m, v, name, e);

	if (need < 0)
		return md_prefix(m->to, NULL, NULL, e);
	if (need && whiteout_moves(m, st)) {
		int rc = move_whiteout(m, ufd, tfd, name, e);

		if (rc != 0)
			return rc < 0 ? -1 : 0;
		/* another filesystem: made anew, as below */
	}
	if (remove_target(m, tfd, name, e) < 0)
		return -1;
	if (need) {
		md_step(m, "whiteout", m->path.s, name);
		if (hu_marker_add_whiteout(&m->tofmt, m->tofmt.format, tfd,
					   name, e) < 0)
			return md_prefix(m->to, m->path.s, NULL, e);
		m->st->markers++;
	}
	if (m->keep)
		return 0;
	if (hu_wr_unlinkat(ufd, name, 0) < 0)
		return md_fail(m->up, m->path.s, name, errno,
			       "cannot remove the whiteout", e);
	return 0;
}

/* The bytes of upper file @name as the view reads them (a metacopy
 * file's from beneath), or -1 with *@fd -1 when they are its own. */
static int view_data(struct md *m, struct hu_vdir *v, const char *name,
		     const struct stat *st, int *fd, struct hu_error *e)
{
	struct hu_ventry ent;
	bool own = true;
	int rc;

	*fd = -1;
	if (!S_ISREG(st->st_mode) || !hu_layer_is(m->up, HU_FMT_OVERLAY))
		return 0;
	rc = hu_vdir_lookup(v, name, &ent, e);
	if (rc <= 0)
		return rc;
	*fd = hu_vdir_open_data(v, &ent, &own, e);
	if (*fd < 0)
		return -1;
	if (own) {
		close(*fd);
		*fd = -1;
	}
	return 0;
}

/* A copy into the target failed (@e names the entry below the upper's
 * directory being merged): the error names the upper's entry, which is
 * still there, where the copy, removed, is not. */
static int copy_failed(struct md *m, struct hu_error *e)
{
	bool whole = e->whole;

	hu_error_set(e, e->err, e->path, "cannot copy it into the target: %s",
		     e->msg);
	e->whole = whole;
	return md_prefix(m->up, m->path.s, NULL, e);
}

static int copy_nondir(struct md *m, struct hu_vdir *v, int ufd, int tfd,
		       const char *name, const struct stat *st,
		       struct hu_error *e)
{
	int datafd, rc;

	md_step(m, "copy", m->path.s, name);
	if (view_data(m, v, name, st, &datafd, e) < 0)
		return -1;
	rc = md_copy_nondir(m, ufd, name, st, datafd, tfd, m->path.s, name,
			    e);
	if (datafd >= 0)
		close(datafd);
	if (rc < 0)
		return copy_failed(m, e);
	if (!m->keep && hu_wr_unlinkat(ufd, name, 0) < 0)
		return md_fail(m->up, m->path.s, name, errno,
			       "cannot remove", e);
	return 0;
}

/* A file, symlink or device: renamed over the target's entry.  @st:
 * its stat, or NULL for a plain regular file renamed on one filesystem
 * (read here if a copy is needed after all). */
static int do_nondir(struct md *m, struct hu_vdir *v, int ufd, int tfd,
		     const char *name, const struct stat *st,
		     struct hu_error *e)
{
	bool copy = !md_renames(m);
	struct stat tst, ust;
	int rc;

	/* A directory of the target in the way goes first.  A rename says
	 * so itself (EISDIR, nothing changed): a stat of every name is
	 * left to the copies, and to a dry run, which renames nothing. */
	if ((copy || hu_wr_dry_run()) && tfd >= 0 &&
	    fstatat(tfd, name, &tst, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISDIR(tst.st_mode) && remove_target(m, tfd, name, e) < 0)
		return -1;
	if (copy)
		return copy_nondir(m, v, ufd, tfd, name, st, e);
	/* the kernel's bookkeeping (origin, nlink...) stays behind */
	if (!((!st || S_ISREG(st->st_mode)) && hu_layer_files_plain(m->up)) &&
	    md_strip_private(ufd, name, NULL, e) < 0)
		return md_prefix(m->up, m->path.s, NULL, e);
	md_step(m, "move", m->path.s, name);
	rc = hu_wr_renameat2(ufd, name, tfd, name, 0);
	if (rc < 0 && errno == EISDIR) {
		if (remove_target(m, tfd, name, e) < 0)
			return -1;
		rc = hu_wr_renameat2(ufd, name, tfd, name, 0);
	}
	if (rc == 0) {
		m->st->moved++;
		return 0;
	}
	if (!copies_from_here(m))
		return md_fail(m->to, m->path.s, name, errno,
			       "cannot move into place", e);
	if (!st && fstatat(ufd, name, &ust, AT_SYMLINK_NOFOLLOW) < 0)
		return md_fail(m->up, m->path.s, name, errno, "cannot stat",
			       e);
	return copy_nondir(m, v, ufd, tfd, name, st ? st : &ust, e);
}

static int clean_tree(struct md *m, struct hu_vdir *v, int fd,
		      const char *keep, bool *foreign, struct hu_error *e);

#define NOT_SHOWN "a directory of the upper the view does not show"

/* The view directory *@c of the upper's subdirectory @name of @v (its
 * lookup in *@ent): 1 opened, 0 when the view shows no directory of the
 * upper's there (NOT_SHOWN), -1 on error. */
static int open_upper_dir(struct md *m, struct hu_vdir *v, const char *name,
			  struct hu_ventry *ent, struct hu_vdir **c,
			  struct hu_error *e)
{
	int rc = hu_vdir_lookup(v, name, ent, e);

	*c = NULL;
	if (rc <= 0 || ent->layer != m->iup)
		return rc < 0 ? -1 : 0;
	return hu_vdir_open_child_lazy(v, ent, c, e) < 0 ? -1 : 1;
}

/* Subdirectory @name of @fd, in view directory @v (NULL: it merges with
 * nothing beneath), cleaned as clean_tree() cleans: one that merges with
 * nothing keeps an opaque marker where a layer beneath the target shows a
 * directory of the name, as swap_in() gives one. */
static int clean_subdir(struct md *m, struct hu_vdir *v, int fd,
			const char *name, bool *foreign, struct hu_error *e)
{
	struct hu_ventry ent;
	struct hu_vdir *c = NULL;
	const char *keep = NULL;
	char attr[64];
	int sub, rc = v ? open_upper_dir(m, v, name, &ent, &c, e) : 1;

	if (rc == 0)
		rc = hu_error_set(e, 0, name, NOT_SHOWN);
	else if (rc == 1)
		rc = 0;
	if (rc == 0 && c && hu_vdir_width(c) == 1) {
		hu_vdir_close(c);
		c = NULL;
		rc = below_has_dir(m, v, name, e);
		if (rc == 1) {
			keep = hu_marker_xattr(m->tofmt.format,
					       m->tofmt.userxattr, "opaque",
					       attr, sizeof(attr));
			rc = hu_marker_set_opaque(&m->tofmt, m->tofmt.format,
						  fd, name, true, e);
		}
	}
	if (rc < 0) {
		hu_vdir_close(c);
		return -1;
	}
	sub = c ? hu_vdir_layer_fd(c, m->iup) : hu_open_dir_at(fd, name);
	if (sub < 0)
		rc = hu_error_set(e, errno, name, "cannot open directory");
	else if (clean_tree(m, c, sub, keep, foreign, e) < 0)
		rc = md_prefix_name(e, name);
	if (!c && sub >= 0)
		close(sub);
	hu_vdir_close(c);
	return rc;
}

/*
 * An upper directory taken out of the view's way of merging, to be moved
 * into the target whole: every private xattr goes but @keep on its root,
 * and its whiteouts that hide nothing.  With view directory @v it merges
 * with layers beneath the target (the target has nothing there), and a
 * whiteout that hides a name of theirs stays, where it is the target's
 * own kind; one of another kind sets *@foreign and stops the walk (the
 * directory is merged entry by entry instead).  Without @v it merges
 * with nothing and every whiteout goes.  Each step keeps the view.  The
 * times of a directory whose whiteouts go are recorded first and put
 * back after.
 */
static int clean_tree(struct md *m, struct hu_vdir *v, int fd,
		      const char *keep, bool *foreign, struct hu_error *e)
{
	struct hu_names names;
	bool *wh = NULL, any = false, rec = false;
	bool bare = v && hu_vdir_layer_bare(v, m->iup);
	struct timespec ts[2];
	int rc = 0;

	if (hu_layer_names_read(m->up, fd, false, &names, NULL, e) < 0)
		return -1;
	wh = calloc(names.n ? names.n : 1, sizeof(*wh));
	if (!wh) {
		hu_names_free(&names);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	for (size_t i = 0; i < names.n && rc == 0 && !*foreign; i++) {
		const char *name = names.v[i].name, *target;
		enum hu_marker kind;
		struct stat st;
		int need = 0;

		/* a plain upper's regular file is no marker (merge_entry) */
		if (names.v[i].type == DT_REG && hu_layer_files_plain(m->up))
			continue;
		if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			rc = hu_error_set(e, errno, name, "cannot stat");
			break;
		}
		rc = hu_marker_classify(m->up, fd, name, &st, true, &kind,
					&target, e);
		if (rc == 0 && kind == HU_MARK_WHITEOUT && v)
			need = md_below_has_v(m, v, name, e);
		if (rc < 0 || need < 0)
			rc = -1;
		else if (kind == HU_MARK_WHITEOUT && !need)
			wh[i] = any = true;
		else if (kind == HU_MARK_WHITEOUT && !whiteout_moves(m, &st))
			*foreign = true;
		else if (kind == HU_MARK_WHITEOUT &&
			 (rc = keep_whiteout(m, fd, name, e)) == 0)
			m->st->markers++;	/* moves along with the tree */
		else if (S_ISDIR(st.st_mode))
			rc = clean_subdir(m, v, fd, name, foreign, e);
		else
			rc = md_strip_private(fd, name, NULL, e);
	}
	/* a directory the view found bare has no record to read, and
	 * nothing private to strip but the record made here */
	if (rc == 0 && !*foreign && (any || !bare) &&
	    md_times_get(m, fd, NULL, any, ts, &rec, e) < 0)
		rc = -1;
	for (size_t i = 0; i < names.n && rc == 0 && !*foreign; i++)
		if (wh[i] && hu_wr_unlinkat(fd, names.v[i].name, 0) < 0)
			rc = hu_error_set(e, errno, names.v[i].name,
					  "cannot remove the whiteout");
	if (rc == 0 && rec && hu_wr_futimens(fd, ts) < 0)
		rc = hu_error_set(e, errno, NULL, "cannot set the times");
	if (rc == 0 && rec)
		rc = md_times_clear(m, fd, e);
	if (rc == 0 && !*foreign && !bare)
		rc = md_strip_private(fd, NULL, keep, e);
	free(wh);
	hu_names_free(&names);
	return rc;
}

/* A directory that merges with nothing beneath it (opaque, new, or over
 * a non-directory): swapped in whole, opaque where a layer beneath the
 * target still has the name.  The target's entry hides that name until
 * the directory that takes its place hides it: the upper's is marked
 * opaque before the target's entry goes (which changes no view: that
 * entry, a file or a whiteout, stops the lookup beneath it already), and
 * a copy replaces a file or a whiteout only once it is whole. */
static int swap_in(struct md *m, struct hu_vdir *v, struct hu_vdir *c,
		   int ufd, int tfd, const char *name, struct hu_error *e)
{
	char attr[64];
	const char *keep = NULL;
	int need = tfd < 0 ? 0 : below_has_dir(m, v, name, e);
	int cufd = hu_vdir_layer_fd(c, m->iup);
	bool foreign = false;	/* never without a view directory */
	struct stat tst;

	if (need < 0)
		return md_prefix(m->to, NULL, NULL, e);
	if (need) {
		keep = hu_marker_xattr(m->tofmt.format, m->tofmt.userxattr,
				       "opaque", attr, sizeof(attr));
		m->st->markers++;
	}
	if (!md_renames(m)) {
		/* a directory of the target here is one the upper's
		 * opaque one hides: it goes first */
		if (tfd >= 0 &&
		    fstatat(tfd, name, &tst, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(tst.st_mode) && remove_target(m, tfd, name, e) < 0)
			return -1;
		md_step(m, "copy", m->path.s, name);
		if (md_copy_tree(m, ufd, name, tfd, m->path.s, need, e) < 0)
			return copy_failed(m, e);
		if (!m->keep && hu_rmtree(ufd, name) < 0)
			return md_fail(m->up, m->path.s, name, errno,
				       "cannot remove", e);
		return 0;
	}
	if (need && hu_marker_set_opaque(&m->tofmt, m->tofmt.format, ufd,
					 name, true, e) < 0)
		return md_prefix(m->up, m->path.s, NULL, e);
	if (remove_target(m, tfd, name, e) < 0)
		return -1;
	if (clean_tree(m, NULL, cufd, keep, &foreign, e) < 0)
		return md_prefix(m->up, m->path.s, name, e);
	md_step(m, "move", m->path.s, name);
	if (hu_wr_renameat2(ufd, name, tfd, name, 0) < 0) {
		if (!copies_from_here(m))
			return md_fail(m->to, m->path.s, name, errno,
				       "cannot move into place", e);
		return swap_in(m, v, c, ufd, tfd, name, e);
	}
	m->st->moved++;
	return 0;
}

/* Does this run move in whole a directory the target lacks that merges
 * beneath it (move_merged)?  Not in a dry run, nor a copy, nor for an
 * upper with redirects or metacopy files, whose xattrs the cleaning
 * would drop. */
static bool moves_merged(const struct md *m)
{
	return md_renames(m) && !hu_wr_dry_run() &&
	       m->up->refs == HU_REFS_NONE;
}

/*
 * A directory that merges with layers beneath the target, where the
 * target has nothing: moved in whole as swap_in() moves one, once
 * clean_tree() has taken it out of the view's way (no directory made, no
 * entry moved one by one, no times to put back).  1 moved; 0 merged entry
 * by entry instead: a whiteout to write in another kind, or another
 * filesystem met.
 */
static int move_merged(struct md *m, struct hu_vdir *c, int ufd, int tfd,
		       const char *name, struct hu_error *e)
{
	bool foreign = false;

	if (clean_tree(m, c, hu_vdir_layer_fd(c, m->iup), NULL, &foreign,
		       e) < 0)
		return md_prefix(m->up, m->path.s, name, e);
	if (foreign)
		return 0;
	md_step(m, "move", m->path.s, name);
	if (hu_wr_renameat2(ufd, name, tfd, name, RENAME_NOREPLACE) == 0) {
		m->st->moved++;
		return 1;
	}
	if (errno == EXDEV)
		return 0;
	return md_fail(m->to, m->path.s, name, errno,
		       "cannot move into place", e);
}

static int merge_dir(struct md *m, struct hu_vdir *v, int ufd,
		     const struct stat *us, int tfd, struct hu_error *e);

/* Upper directory @name made ready to merge: 1 with its view directory
 * *@c (its lookup in *@ent), 0 when it was swapped in whole instead. */
static int dir_ready(struct md *m, struct hu_vdir *v, int ufd, int tfd,
		     const char *name, struct hu_vdir **c,
		     struct hu_ventry *ent, struct hu_error *e)
{
	int rc = open_upper_dir(m, v, name, ent, c, e);

	if (rc == 0)
		md_fail(m->up, m->path.s, name, 0, NOT_SHOWN, e);
	if (rc <= 0)
		return -1;
	if (hu_vdir_width(*c) == 1) {
		rc = swap_in(m, v, *c, ufd, tfd, name, e);
		hu_vdir_close(*c);
		*c = NULL;
		return rc < 0 ? -1 : 0;
	}
	if (tfd < 0)
		return 1;
	if (hu_vdir_layer_fd(*c, m->ito) >= 0) {
		/* a copy killed once it replaced the target's entry left
		 * that entry under its temporary name */
		if (!md_renames(m) && !hu_wr_dry_run() &&
		    md_copy_leftover(tfd, name, e) < 0) {
			hu_vdir_close(*c);
			*c = NULL;
			return md_prefix(m->to, m->path.s, NULL, e);
		}
		return 1;
	}
	if (moves_merged(m)) {
		rc = move_merged(m, *c, ufd, tfd, name, e);
		if (rc != 0)
			goto done;
		/* looked into by the cleaning: read afresh */
		hu_vdir_close(*c);
		*c = NULL;
		if (hu_vdir_open_child_lazy(v, ent, c, e) < 0)
			return -1;
	}
	/* the target has nothing here, a layer beneath has: an empty
	 * directory between them changes no view.  Made with the upper's
	 * permissions where the umask keeps them (its metadata then needs
	 * no chmod), and writable by its maker until then. */
	md_step(m, "mkdir", m->path.s, name);
	if (hu_wr_mkdirat(tfd, name, (ent->st.st_mode & 0777) | 0700) < 0 &&
	    errno != EEXIST) {
		rc = md_fail(m->to, m->path.s, name, errno, "cannot create", e);
		goto fail;
	}
	/* a dry run made nothing: the view shows none */
	rc = hu_wr_dry_run() ? 0 : hu_vdir_join(*c, m->ito, name, e);
	if (rc < 0) {
		md_prefix(m->to, m->path.s, NULL, e);
		goto fail;
	}
	if (rc == 0) {
		hu_vdir_close(*c);
		*c = NULL;
		if (hu_vdir_open_child_lazy(v, ent, c, e) < 0)
			return -1;
	}
	return 1;
fail:
	rc = -1;
done:
	hu_vdir_close(*c);
	*c = NULL;
	return rc < 0 ? -1 : 0;
}

int md_rmdir_upper(struct md *m, int ufd, const char *name,
		   struct hu_error *e)
{
	if (m->keep)
		return 0;
	if (hu_wr_unlinkat(ufd, name, AT_REMOVEDIR) < 0)
		return md_fail(m->up, m->path.s, name, errno,
			       "cannot remove the emptied directory", e);
	return 0;
}

/* An upper directory: merged when the view merges it with a directory
 * beneath, else swapped in; by whichever thread takes it from the pool,
 * when there is one. */
static int do_dir(struct md *m, struct hu_vdir *v, int ufd, int tfd,
		  const char *name, struct hu_error *e)
{
	struct hu_ventry ent;
	struct hu_vdir *c;
	size_t saved;
	int rc;

	rc = dir_ready(m, v, ufd, tfd, name, &c, &ent, e);
	if (rc <= 0)
		return rc;
	if (m->task)
		return md_task_merge(m, c, &ent.st, name, e);
	if (hu_pathbuf_push(&m->path, name, &saved) < 0) {
		hu_vdir_close(c);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	rc = merge_dir(m, c, hu_vdir_layer_fd(c, m->iup), &ent.st,
		       hu_vdir_layer_fd(c, m->ito), e);
	hu_pathbuf_pop(&m->path, saved);
	hu_vdir_close(c);
	if (rc < 0)
		return rc;
	return md_rmdir_upper(m, ufd, name, e);
}

static int merge_entry(struct md *m, struct hu_vdir *v, int ufd, int tfd,
		       const struct hu_name *n, struct hu_error *e)
{
	const char *name = n->name, *target;
	enum hu_marker kind;
	struct stat st;

	if (hu_interrupt_check(e) < 0 || md_pool_stopped(m, e))
		return -1;
	progress(m);
	/* no directory is a marker of the upper's (union or overlay)
	 * format: the view's lookup stats it */
	if (n->type == DT_DIR)
		return do_dir(m, v, ufd, tfd, name, e);
	/* a regular file of an upper without a private xattr on any is no
	 * marker: renamed as it is, its stat unread */
	if (n->type == DT_REG && hu_layer_files_plain(m->up) && md_renames(m) &&
	    !hu_wr_dry_run())
		return do_nondir(m, v, ufd, tfd, name, NULL, e);
	if (fstatat(ufd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return md_fail(m->up, m->path.s, name, errno, "cannot stat",
			       e);
	if (hu_marker_classify(m->up, ufd, name, &st, true, &kind, &target,
			       e) < 0)
		return md_prefix(m->up, m->path.s, NULL, e);
	if (kind == HU_MARK_WHITEOUT)
		return do_whiteout(m, v, ufd, tfd, name, &st, e);
	if (kind != HU_MARK_NONE)
		return 0;
	if (S_ISDIR(st.st_mode))
		return do_dir(m, v, ufd, tfd, name, e);
	return do_nondir(m, v, ufd, tfd, name, &st, e);
}

int md_merge_entries(struct md *m, struct hu_vdir *v, int ufd,
		     const struct stat *us, int tfd, struct timespec ts[2],
		     struct hu_error *e)
{
	struct hu_names names;
	int rc = 0;

	/* below the root, @ufd is the one the view just opened: read from
	 * its start without a rewind */
	if (md_times_get(m, ufd, us, true, ts, NULL, e) < 0 ||
	    hu_layer_names_read(m->up, ufd, ufd != m->up->fd, &names, NULL,
				e) < 0)
		return md_prefix(m->up, m->path.s, NULL, e);
	for (size_t i = 0; i < names.n && rc == 0; i++)
		rc = merge_entry(m, v, ufd, tfd, &names.v[i], e);
	hu_names_free(&names);
	return rc;
}

int md_dir_done(struct md *m, const struct hu_vdir *v, int ufd,
		const struct stat *us, int tfd, const struct timespec ts[2],
		struct hu_error *e)
{
	if (tfd < 0)
		return 0;
	md_step(m, "metadata", m->path.s, NULL);
	if (md_dir_meta(m, v, ufd, us, tfd, ts, e) < 0)
		return md_prefix(m->to, m->path.s, NULL, e);
	m->st->dirs++;
	return 0;
}

/* Upper directory @ufd (its stat @us, from before the merge) merged into
 * target directory @tfd (-1 only in a dry run, where it is not made),
 * then given its metadata. */
static int merge_dir(struct md *m, struct hu_vdir *v, int ufd,
		     const struct stat *us, int tfd, struct hu_error *e)
{
	struct timespec ts[2];

	if (md_merge_entries(m, v, ufd, us, tfd, ts, e) < 0)
		return -1;
	return md_dir_done(m, v, ufd, us, tfd, ts, e);
}

/* The format of the markers written into the target. */
static int target_format(struct md *m, struct hu_error *e)
{
	const struct hu_layer *uf = m->up, *tf = m->to;
	bool um = uf->format == HU_FMT_UNION || uf->format == HU_FMT_OVERLAY;
	bool tm = tf->format == HU_FMT_UNION || tf->format == HU_FMT_OVERLAY;

	if (um && tm && (uf->format != tf->format ||
			 uf->userxattr != tf->userxattr))
		return hu_error_set(e, EINVAL, uf->path,
				    "the upper is in the %s%s format, the "
				    "target %s in the %s%s one: convert one "
				    "first (hunion whiteout convert)",
				    hu_format_name(uf->format),
				    uf->userxattr ? " (user.*)" : "",
				    tf->path, hu_format_name(tf->format),
				    tf->userxattr ? " (user.*)" : "");
	m->tofmt = *tf;
	if (tm)
		return 0;
	m->tofmt.format = um ? uf->format : HU_FMT_UNION;
	m->tofmt.userxattr = uf->userxattr;
	for (size_t j = m->ito; j-- > 0 && !um;) {
		const struct hu_layer *l = &m->s->layers[j];

		if (hu_layer_settle(l, e) < 0)
			return -1;
		if (l->format == HU_FMT_UNION || l->format == HU_FMT_OVERLAY) {
			m->tofmt.format = l->format;
			m->tofmt.userxattr = l->userxattr;
			break;
		}
	}
	/* A target without markers reads alike in any format: from here on
	 * in the one its markers are written in, or the view would not see
	 * them (a redirect phase 1 keeps in it not followed, and so no
	 * whiteout written for what that redirect reaches beneath). */
	if (tf->format == HU_FMT_NONE) {
		struct hu_layer *t = &m->s->layers[m->ito];

		t->format = m->tofmt.format;
		t->userxattr = m->tofmt.userxattr;
	}
	return 0;
}

/* @l is on a writable filesystem, else the error @why. */
static int writable(const struct hu_layer *l, const char *why,
		    struct hu_error *e)
{
	struct statvfs sv;

	if (fstatvfs(l->fd, &sv) == 0 && (sv.f_flag & ST_RDONLY))
		return hu_error_set(e, EROFS, l->path, "%s", why);
	return 0;
}

/* A layer inside another (or the same twice): a change to the one
 * changes the other, a layer this run only reads among them. */
static int layers_apart(struct md *m, struct hu_error *e)
{
	const struct hu_stack *s = m->s;
	struct hu_dir_ref *d = calloc(s->n, sizeof(*d));
	int rc;

	if (!d)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (size_t i = 0; i < s->n; i++)
		d[i] = (struct hu_dir_ref){
			s->layers[i].fd, s->layers[i].path,
			i == m->iup ? "upper" : i == m->ito ? "target" :
			"layer beneath the target", i >= m->ito, false };
	rc = hu_dirs_apart(d, s->n, e);
	free(d);
	return rc;
}

/* The upper and the target, which the run writes, in use by no mounted
 * overlay (the layers beneath the target, only read, may be lowers of
 * mounts); unless --force. */
static int unmounted(struct md *m, struct hu_error *e)
{
	struct hu_dir_ref d[2] = {
		{ m->to->fd, m->to->path, "target", true, false },
		{ m->up->fd, m->up->path, "upper", true, false },
	};
	struct hu_mount_use use;
	int rc;

	if (m->o->force)
		return 0;
	rc = hu_dirs_in_use(d, 2, &use, e);
	if (rc == 1)
		hu_error_set(e, EBUSY, use.layer, "the layer is %s %s of the "
			     "%s mounted at %s: unmount it first (or --force)",
			     strchr("aeiou", use.role[0]) ? "an" : "a",
			     use.role, use.fstype, use.mountpoint);
	else if (rc == 2)
		hu_error_set(e, EBUSY, use.mountpoint, "the %s mounted here "
			     "names a layer by a path that cannot be resolved "
			     "(%s): whether it uses %s or %s cannot be known: "
			     "unmount it first (or --force)", use.fstype,
			     use.option, m->to->path, m->up->path);
	hu_mount_use_free(&use);
	return rc > 0 ? -1 : rc;
}

/* What is refused before anything is changed. */
static int preflight(struct md *m, struct hu_error *e)
{
	const struct hu_stack *s = m->s;

	if (s->n < 2)
		return hu_error_set(e, EINVAL, NULL, "merge --into needs two "
				    "layers at least: the target and the "
				    "upper");
	for (size_t j = m->ito; j < s->n; j++) {
		const struct hu_layer *l = &s->layers[j];

		if (l->unpacked)
			return hu_error_set(e, EINVAL, l->path, "a tarball "
					    "layer cannot be merged in "
					    "place");
		if (hu_layer_half(l))
			return hu_error_set(e, EINVAL, l->path, "the layer is "
					    "half-converted: run its "
					    "'whiteout convert --in-place' "
					    "again first");
		if (l->format == HU_FMT_OCI)
			return hu_error_set(e, EINVAL, l->path, "an OCI layer "
					    "cannot be merged in place: "
					    "convert it first (hunion "
					    "whiteout convert --to=overlay "
					    "--in-place)");
	}
	if (target_format(m, e) < 0 ||
	    writable(m->to, "the target (the layer merged into) is on a "
		     "read-only filesystem", e) < 0 ||
	    (!m->keep &&
	     writable(m->up, "the upper (the layer merged down, emptied as "
		      "it goes; --keep-upper leaves it as it is) is on a "
		      "read-only filesystem", e) < 0) ||
	    layers_apart(m, e) < 0)
		return -1;
	return unmounted(m, e);
}

static int merge_down(struct md *m, struct hu_error *e)
{
	struct timespec ts[2];
	struct hu_error ignored = { 0 };
	struct stat us;
	bool had;
	int rc;

	/* before phase 1 changes the upper's root; an interrupted run's
	 * record, if there is one, holds the times from before it */
	if (md_times_get(m, m->up->fd, NULL, false, ts, &had, e) < 0 ||
	    (!had && md_times_get(m, m->up->fd, NULL, true, ts, NULL, e) < 0))
		return md_prefix(m->up, NULL, NULL, e);
	rc = md_prepare(m, e);
	if (rc < 0) {
		/* A refusal (ENOTSUP) comes from the analysis before phase 1
		 * changes anything: the record made for it goes too. */
		if (!had && e->err == ENOTSUP &&
		    md_times_clear(m, m->up->fd, &ignored) < 0)
			hu_error_clear(&ignored);
		return -1;
	}
	if (rc > 0)	/* --keep-upper, nothing changed yet */
		return md_keep_clone(m, e);
	if (fstat(m->up->fd, &us) < 0)
		return md_fail(m->up, NULL, NULL, errno, "cannot stat", e);
	if (md_pool_merge(m, &us, e) < 0)
		return -1;
	/* the root's times went to the target's root from the record */
	if (md_times_clear(m, m->up->fd, e) < 0)
		return md_prefix(m->up, NULL, NULL, e);
	return 0;
}

/* @m's layers: the top one of @s merged into the one beneath. */
static void set_layers(struct md *m, const struct hu_stack *s)
{
	m->s = s;
	if (s->n < 2)
		return;
	m->iup = s->n - 1;
	m->ito = s->n - 2;
	m->up = &s->layers[m->iup];
	m->to = &s->layers[m->ito];
	m->after = (struct hu_stack){ .n = s->n - 1, .layers = s->layers,
				      .problems = s->problems };
	m->beneath = m->after;
	m->beneath.n--;
}

/* merge_down() with the path it reports from, freed after. */
static int run(struct md *m, struct hu_error *e)
{
	size_t saved;
	int rc;

	if (hu_pathbuf_push(&m->path, "", &saved) < 0)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	hu_report_phase(m->o->report, HU_PHASE_MERGING, NULL);
	rc = merge_down(m, e);
	hu_linkmap_free(&m->links);
	hu_pathbuf_free(&m->path);
	return rc;
}

int md_merge_root(struct md *m, const struct stat *us, struct hu_error *e)
{
	struct hu_vdir *root;
	int rc;

	if (hu_vdir_open_root(m->s, &root, e) < 0)
		return -1;
	rc = merge_dir(m, root, m->up->fd, us, m->to->fd, e);
	hu_vdir_close(root);
	return rc;
}

int md_merge_plain(const struct md *m, const struct hu_stack *s,
		   struct hu_error *e)
{
	struct md in = { .o = m->o, .st = m->st, .root = m->root,
			 .same_fs = true, .cs.bytes = m->cs.bytes };

	set_layers(&in, s);
	if (target_format(&in, e) < 0)
		return -1;
	return run(&in, e);
}

/*
 * One run at a time changes a layer: the upper and the target are each
 * locked (flock(2) on their roots, released when the process ends), so
 * that two uppers merged into one target, or a layer merged down while
 * another is merged into it, do not run at once.
 */
static int busy(const struct hu_layer *l, struct hu_error *e)
{
	return hu_layer_lock_change(l, e);
}

int hu_merge_down(const struct hu_stack *s, const struct hu_mergedown_opts *o,
		  struct hu_mergedown_stats *st, struct hu_error *e)
{
	struct md m = { .o = o, .st = st, .keep = o->keep_upper,
			.root = geteuid() == 0,
			.cs.bytes = o->report ? o->report->bytes : NULL };
	bool was_dry = hu_wr_dry_run();
	struct stat us, ts;
	int rc;

	memset(st, 0, sizeof(*st));
	set_layers(&m, s);
	if (preflight(&m, e) < 0)
		return -1;
	if (!o->dry_run && (busy(m.up, e) < 0 || busy(m.to, e) < 0))
		return -1;
	m.same_fs = fstat(m.up->fd, &us) == 0 && fstat(m.to->fd, &ts) == 0 &&
		    us.st_dev == ts.st_dev;
	hu_wr_set_dry_run(was_dry || o->dry_run);
	/* what an earlier --keep-upper run left, first */
	rc = md_keep_resume(&m, e);
	if (rc == 0)
		rc = run(&m, e);
	hu_wr_set_dry_run(was_dry);
	return rc < 0 ? -1 : 0;
}
