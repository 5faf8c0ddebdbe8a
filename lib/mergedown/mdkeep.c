/* SPDX-License-Identifier: MIT */
/*
 * merge --into --keep-upper of an upper holding a redirected directory
 * (or a metacopy file with a redirect): merged down through a clone.
 *
 * The ordinary merge resolves a redirect by moving the target's directory
 * to the new name and removing the upper's redirect.  --keep-upper must
 * leave the upper as it is, and the unchanged upper over the changed
 * target shows another view (the upper's "b" with redirect "/a" finds
 * nothing once the target's "a" is "b"): a run killed there could not
 * finish, and merging the upper again after a run that did would swap
 * its "b" in whole over the merged one.  (A metacopy file's data, named
 * by its redirect, may be replaced in the target before it is copied.)
 *
 * So the upper is first copied raw into the target's filesystem (every
 * marker and private xattr kept: mdcopy.c), under MD_UPPER_TMP, with a
 * record of which upper it is of, synced, and renamed to MD_UPPER: the
 * clone is whole once it has that name.
 * Then the ordinary merge runs with the clone as the upper, its records
 * on the clone, and the emptied clone goes.  The kept record on the
 * upper's root (mdjournal.c) says "merging" from the moment the clone is
 * whole and "merged" once it is gone; the upper is never changed
 * otherwise.  Every merge starts with md_keep_resume(): a clone is
 * merged on, a partial one removed, and an upper merged into this target
 * before is left alone, since merging it again would damage the target.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "mergedown/mergedown.h"

/* The emptied clone goes.  Its removal changed the target root's times,
 * which are the upper root's again (what the view shows, and what the
 * merge gave it); then the record says merged.  A re-run after a kill
 * in between finds the record "merging" and no clone, and comes here. */
static int finish(struct md *m, struct hu_error *e)
{
	struct timespec ts[2];
	struct stat st;

	md_step(m, "remove", MD_UPPER, NULL);
	if (hu_wr_unlinkat(m->to->fd, MD_UPPER, AT_REMOVEDIR) < 0 &&
	    errno != ENOENT)
		return md_fail(m->to, MD_UPPER, NULL, errno, "cannot remove "
			       "the emptied clone of the upper", e);
	if (fstat(m->up->fd, &st) < 0)
		return md_fail(m->up, NULL, NULL, errno, "cannot stat", e);
	ts[0] = st.st_atim;
	ts[1] = st.st_mtim;
	/* on disk before the record says it is done */
	if (hu_wr_futimens(m->to->fd, ts) < 0 || hu_wr_fsync(m->to->fd) < 0)
		return md_fail(m->to, NULL, NULL, errno, "cannot set the "
			       "times", e);
	return md_kept_write(m, MD_KEPT_MERGED, e);
}

/* The clone as the upper's stand-in: the upper's format, namespace and
 * detection, the clone's root.  Refused when it is another upper's. */
static int open_clone(struct md *m, struct hu_layer *c, struct hu_error *e)
{
	struct stat st;
	int ours;

	*c = *m->up;
	c->path = hu_path_join(m->to->path, MD_UPPER);
	c->fd = hu_open_dir_at(m->to->fd, MD_UPPER);
	if (!c->path)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	if (c->fd < 0 || fstat(c->fd, &st) < 0)
		return md_fail(m->to, MD_UPPER, NULL, errno, "cannot open", e);
	c->dev = st.st_dev;
	c->ino = st.st_ino;
	ours = md_clone_is_ours(m, c->fd, e);
	if (ours == 0)
		hu_error_set(e, EBUSY, NULL, "the clone of another upper, which "
			     "a stopped 'merge --into --keep-upper' of that one "
			     "merges: run that again to finish it first");
	return ours > 0 ? 0 : md_prefix(m->to, MD_UPPER, NULL, e);
}

/* The whole clone merged down, in the stack with the clone in the upper's
 * place, then finish(). */
static int through_clone(struct md *m, struct hu_error *e)
{
	size_t n = m->ito + 2;
	struct hu_layer *v = calloc(n, sizeof(*v));
	struct hu_stack cs = { .n = n, .layers = v,
			       .problems = m->s->problems };
	enum md_kept k = MD_KEPT_NONE;
	int rc;

	if (!v)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	memcpy(v, m->s->layers, (n - 1) * sizeof(*v));
	rc = open_clone(m, &v[n - 1], e);
	/* a kill between the clone's rename and the record left none */
	if (rc == 0)
		rc = md_kept_read(m, &k, e);
	if (rc == 0 && k != MD_KEPT_MERGING)
		rc = md_kept_write(m, MD_KEPT_MERGING, e);
	if (rc == 0)
		rc = md_merge_plain(m, &cs, e);
	if (rc == 0)
		rc = finish(m, e);
	if (v[n - 1].fd >= 0)
		close(v[n - 1].fd);
	free(v[n - 1].path);
	free(v);
	return rc;
}

int md_keep_clone(struct md *m, struct hu_error *e)
{
	struct statvfs sv;
	int rc;

	if (fstatvfs(m->up->fd, &sv) == 0 && (sv.f_flag & ST_RDONLY))
		return md_fail(m->up, NULL, NULL, EROFS, "--keep-upper merges "
			       "a redirected directory through a clone of the "
			       "upper, and marks the upper merged (a record "
			       "on its root), which a read-only filesystem "
			       "cannot take: merge a copy of the upper without "
			       "--keep-upper", e);
	md_step(m, "clone", MD_UPPER, NULL);
	if (hu_wr_dry_run()) {
		/* the plan: the clone would be the upper as it is */
		rc = md_merge_plain(m, m->s, e);
		if (rc == 0)
			md_step(m, "remove", MD_UPPER, NULL);
		return rc;
	}
	if (md_clone_upper(m, e) < 0)
		return -1;
	return through_clone(m, e);
}

int md_keep_resume(struct md *m, struct hu_error *e)
{
	enum md_kept k;
	struct stat st;

	if (fstatat(m->to->fd, MD_UPPER, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (!m->keep)
			return md_fail(m->to, MD_UPPER, NULL, EBUSY, "the "
				       "clone of the upper that a stopped "
				       "'merge --into --keep-upper' merges: "
				       "run that again (with --keep-upper) to "
				       "finish it", e);
		return through_clone(m, e) < 0 ? -1 : 1;
	}
	if (errno != ENOENT)
		return md_fail(m->to, MD_UPPER, NULL, errno, "cannot stat", e);
	/* a clone not yet whole: made again where it is needed */
	if (fstatat(m->to->fd, MD_UPPER_TMP, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		md_step(m, "remove", MD_UPPER_TMP, NULL);
		if (hu_rmtree(m->to->fd, MD_UPPER_TMP) < 0)
			return md_fail(m->to, MD_UPPER_TMP, NULL, errno,
				       "cannot remove", e);
	}
	if (md_kept_read(m, &k, e) < 0)
		return -1;
	if (k == MD_KEPT_MERGING && finish(m, e) < 0)
		return -1;
	m->st->kept_before = k == MD_KEPT_MERGED;
	return k == MD_KEPT_NONE ? 0 : 1;
}
