/* SPDX-License-Identifier: MIT */
/*
 * Copies of a merge-down: what cannot be renamed from the upper into the
 * target (another filesystem, --keep-upper) is made whole under a fixed
 * temporary name beside its place, fsync'd, and renamed over it.  The
 * name is the same on every run, so a re-run removes what a killed one
 * left before it makes the entry again.  Directory metadata and the
 * private xattrs that must not reach the target are handled here too.
 *
 * The same code makes the raw clone of the upper that --keep-upper
 * merges through (mdkeep.c), with @m->raw: every marker and private
 * xattr kept, each entry written at its own name (the whole tree is the
 * temporary) and the filesystem synced once at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mergedown/mergedown.h"
#include "output/treeout.h"

const char *md_temp_name(char *buf, const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull;	/* FNV-1a */

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	snprintf(buf, 32, ".hunion-md.%016llx", (unsigned long long)h);
	return buf;
}

/* The xattrs a copy keeps: all of them in the clone. */
static int copy_xattrs(const struct md *m, int sfd, const char *sname,
		       int dfd, const char *dname, struct hu_error *e)
{
	return m->raw ? hu_copy_xattrs_raw(sfd, sname, dfd, dname, e) :
		hu_copy_xattrs(sfd, sname, dfd, dname, e);
}

/* Owner, mode (after the owner: chown clears set-id bits) and times of
 * @name in @dfd, as @st says. */
static int put_meta(int dfd, const char *name, const struct stat *st,
		    struct hu_error *e)
{
	struct timespec ts[2] = { st->st_atim, st->st_mtim };

	if (geteuid() == 0 &&
	    hu_wr_fchownat(dfd, name, st->st_uid, st->st_gid,
			   AT_SYMLINK_NOFOLLOW) < 0)
		return hu_error_set(e, errno, name, "cannot set the owner");
	if (!S_ISLNK(st->st_mode) &&
	    hu_wr_fchmodat(dfd, name, st->st_mode & 07777) < 0)
		return hu_error_set(e, errno, name, "cannot set the mode");
	if (hu_wr_utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return hu_error_set(e, errno, name, "cannot set the times");
	return 0;
}

static int copy_file(struct md *m, int sfd, const char *name,
		     const struct stat *st, int datafd, int dfd,
		     const char *tmp, struct hu_error *e)
{
	int in = datafd, out, rc = -1;
	struct stat data;

	if (in < 0)
		in = openat(sfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return hu_error_set(e, errno, name, "cannot open");
	if (fstat(in, &data) < 0) {
		hu_error_set(e, errno, name, "cannot stat");
		goto out_in;
	}
	out = hu_wr_create(dfd, tmp, 0600);
	if (out < 0) {
		hu_error_set(e, errno, tmp, "cannot create");
		goto out_in;
	}
	if (hu_copy_data(&m->cs, in, &data, out, e) < 0 ||
	    copy_xattrs(m, sfd, name, out, NULL, e) < 0) {
		hu_error_prefix(e, name);
		goto out_out;
	}
	if (put_meta(dfd, tmp, st, e) < 0)
		goto out_out;
	if (!m->raw && hu_wr_fsync(out) < 0) {
		hu_error_set(e, errno, tmp, "cannot sync");
		goto out_out;
	}
	rc = 0;
out_out:
	close(out);
out_in:
	if (in != datafd)
		close(in);
	return rc;
}

static int copy_other(const struct md *m, int sfd, const char *name,
		      const struct stat *st, int dfd, const char *tmp,
		      struct hu_error *e)
{
	if (S_ISLNK(st->st_mode)) {
		char *target = hu_read_symlink(sfd, name, st);
		int rc;

		if (!target)
			return hu_error_set(e, errno, name,
					    "cannot read symlink");
		rc = hu_wr_symlinkat(target, dfd, tmp);
		free(target);
		if (rc < 0)
			return hu_error_set(e, errno, tmp,
					    "cannot create symlink");
	} else if (hu_wr_mknodat(dfd, tmp, st->st_mode & ~07777,
				 st->st_rdev) < 0) {
		return hu_error_set(e, errno, tmp, "cannot create");
	}
	if (copy_xattrs(m, sfd, name, dfd, tmp, e) < 0)
		return md_prefix_name(e, name);
	return put_meta(dfd, tmp, st, e);
}

/*
 * The first name already written of the hard-link group of @st, when
 * there is one, for @ddir/@dname to link to; else NULL, and this name
 * recorded as the first where the inode has more names.  Unlike the
 * other writers' sources, the upper loses each name once it is copied:
 * the last names of a group are seen with fewer links, down to one, so
 * the map is asked whatever the count says (no inode is made in the
 * upper meanwhile, so a number in the map is still the same inode).
 */
static int link_first(struct md *m, const struct stat *st, const char *ddir,
		      const char *dname, const char **first)
{
	*first = NULL;
	if (S_ISDIR(st->st_mode))
		return 0;
	if (!m->keep && st->st_nlink == 1) {
		*first = hu_linkmap_first_of(&m->links, st);
		return 0;
	}
	return hu_linkmap_first(&m->links, st, ddir, dname, first);
}

/* A copy of @name failed: the error names the upper's entry, whatever
 * temporary name @tmp the step that failed worked on (it is gone). */
static void name_entry(struct hu_error *e, const char *tmp, const char *name)
{
	char *p;

	if (e->path && strcmp(e->path, tmp) != 0)
		return;
	p = strdup(name);
	if (p) {
		free(e->path);
		e->path = p;
	}
}

int md_copy_nondir(struct md *m, int sfd, const char *name,
		   const struct stat *st, int datafd, int dfd,
		   const char *ddir, const char *dname, struct hu_error *e)
{
	const char *first = NULL;
	char tmp[32];
	/* the clone is one temporary as a whole */
	const char *at = m->raw ? dname : md_temp_name(tmp, dname);
	int rc;

	if (S_ISSOCK(st->st_mode)) {
		hu_report_warn(m->o->report, 0, ddir, dname,
			       "a socket cannot be copied: left out");
		return 0;
	}
	if (!m->raw && hu_rmtree(dfd, tmp) < 0)
		return hu_error_set(e, errno, tmp, "cannot remove a leftover");
	if (link_first(m, st, ddir, dname, &first) < 0)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	if (first && hu_linkat_path(m->to->fd, first, dfd, at) == 0)
		rc = 0;
	else if (S_ISREG(st->st_mode))
		rc = copy_file(m, sfd, name, st, datafd, dfd, at, e);
	else
		rc = copy_other(m, sfd, name, st, dfd, at, e);
	if (rc == 0 && at != dname &&
	    hu_wr_renameat2(dfd, at, dfd, dname, 0) < 0)
		rc = hu_error_set(e, errno, dname, "cannot rename the copy "
				  "into place");
	if (rc < 0 && at != dname) {
		(void)hu_wr_unlinkat(dfd, at, 0);
		name_entry(e, at, name);
	}
	if (rc == 0)
		m->st->copied++;
	return rc;
}

/* The contents of upper directory @sfd into new directory @dfd (at
 * @ddir in the target): whiteouts left out, for in a tree that merges
 * with nothing they hide nothing (the clone keeps them). */
static int copy_contents(struct md *m, int sfd, int dfd, const char *ddir,
			 struct hu_error *e)
{
	struct hu_names names;
	int rc = 0;

	if (hu_names_read(sfd, &names, NULL, e) < 0)
		return -1;
	for (size_t i = 0; i < names.n && rc == 0; i++) {
		const char *name = names.v[i].name;
		enum hu_marker kind;
		const char *target;
		struct stat st;

		if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			rc = hu_error_set(e, errno, name, "cannot stat");
			break;
		}
		kind = HU_MARK_NONE;
		if (!m->raw)
			rc = hu_marker_classify(m->up, sfd, name, &st, true,
						&kind, &target, e);
		if (rc < 0 || kind != HU_MARK_NONE)
			continue;
		if (S_ISDIR(st.st_mode)) {
			char *sub = hu_path_join(ddir, name);
			int s2 = -1, d2 = -1;

			if (!sub)
				rc = hu_error_set(e, ENOMEM, NULL, "out of memory");
			else if (hu_wr_mkdirat(dfd, name, 0700) < 0)
				rc = hu_error_set(e, errno, name, "cannot create");
			else if ((s2 = hu_open_dir_at(sfd, name)) < 0 ||
				 (!hu_wr_dry_run() &&
				  (d2 = hu_open_dir_at(dfd, name)) < 0))
				rc = hu_error_set(e, errno, name, "cannot open");
			else if (copy_contents(m, s2, d2, sub, e) < 0 ||
				 copy_xattrs(m, s2, NULL, dfd, name, e) < 0)
				rc = md_prefix_name(e, name);
			else
				rc = put_meta(dfd, name, &st, e);
			if (s2 >= 0)
				close(s2);
			if (d2 >= 0)
				close(d2);
			free(sub);
		} else {
			rc = md_copy_nondir(m, sfd, name, &st, -1, dfd, ddir,
					    name, e);
		}
	}
	hu_names_free(&names);
	return rc;
}

/*
 * Whole tree @tmp of @dfd renamed to @name.  An entry there (a file or
 * a whiteout, which hides what lies beneath as the tree does) is
 * exchanged with it in one step, then removed from under @tmp: a
 * removal first would let a directory beneath show through meanwhile.
 * A kill between the two leaves @tmp, which the next run removes
 * (md_copy_leftover()).
 */
static int into_place(int dfd, const char *tmp, const char *name,
		      struct hu_error *e)
{
	int rc = hu_wr_renameat2(dfd, tmp, dfd, name, RENAME_NOREPLACE);

	if (rc < 0 && errno == EEXIST) {
		rc = hu_wr_renameat2(dfd, tmp, dfd, name, RENAME_EXCHANGE);
		if (rc == 0 && hu_rmtree(dfd, tmp) < 0)
			return hu_error_set(e, errno, tmp, "cannot remove "
					    "what the copy replaced");
	}
	if (rc < 0)
		return hu_error_set(e, errno, name, "cannot rename the copy "
				    "into place");
	return 0;
}

int md_copy_leftover(int dfd, const char *name, struct hu_error *e)
{
	char tmp[32];

	if (hu_rmtree(dfd, md_temp_name(tmp, name)) < 0)
		return hu_error_set(e, errno, tmp, "cannot remove a leftover");
	return 0;
}

int md_copy_tree(struct md *m, int sfd, const char *name, int dfd,
		 const char *ddir, bool opaque, struct hu_error *e)
{
	char tmp[32], *sub = hu_path_join(ddir, name);
	/* where the tree is while it is built: the hard-link groups in it
	 * link to their first names there, moved with it after */
	char *tsub = hu_path_join(ddir, md_temp_name(tmp, name));
	int s2 = -1, d2 = -1, rc = -1;
	bool made = false;
	struct stat st;

	if (!sub || !tsub) {
		hu_error_set(e, ENOMEM, NULL, "out of memory");
		goto out;
	}
	if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		hu_error_set(e, errno, name, "cannot stat");
		goto out;
	}
	if (hu_rmtree(dfd, tmp) < 0) {
		hu_error_set(e, errno, tmp, "cannot remove a leftover");
		goto out;
	}
	if (hu_wr_mkdirat(dfd, tmp, 0700) < 0) {
		hu_error_set(e, errno, name, "cannot create");
		goto out;
	}
	made = true;
	if ((s2 = hu_open_dir_at(sfd, name)) < 0 ||
	    (!hu_wr_dry_run() && (d2 = hu_open_dir_at(dfd, tmp)) < 0)) {
		hu_error_set(e, errno, name, "cannot open");
		goto out;
	}
	if (copy_contents(m, s2, d2, tsub, e) < 0 ||
	    hu_copy_xattrs(s2, NULL, dfd, tmp, e) < 0) {
		hu_error_prefix(e, name);
		goto out;
	}
	if (opaque && hu_marker_set_opaque(&m->tofmt, m->tofmt.format, dfd,
					   tmp, true, e) < 0)
		goto out;
	if (put_meta(dfd, tmp, &st, e) < 0)
		goto out;
	if (into_place(dfd, tmp, name, e) < 0)
		goto out;
	if (hu_linkmap_move(&m->links, tsub, sub) < 0) {
		hu_error_set(e, ENOMEM, NULL, "out of memory");
		goto out;
	}
	m->st->copied++;
	rc = 0;
out:
	if (s2 >= 0)
		close(s2);
	if (d2 >= 0)
		close(d2);
	/* a tree not whole is nobody's: it would show in the view */
	if (rc < 0 && made) {
		(void)hu_rmtree(dfd, tmp);
		name_entry(e, tmp, name);
	}
	free(sub);
	free(tsub);
	return rc;
}

/* Is @name in the @len bytes of xattr names at @list? */
static bool listed(const char *list, ssize_t len, const char *name)
{
	for (ssize_t off = 0; off < len; off += strlen(list + off) + 1)
		if (strcmp(list + off, name) == 0)
			return true;
	return false;
}

int md_dir_meta(struct md *m, const struct hu_vdir *v, int ufd,
		const struct stat *us, int tfd, const struct timespec ts[2],
		struct hu_error *e)
{
	char usmall[512], tsmall[512], *ul = usmall, *tl = tsmall;
	const struct stat *tst = hu_vdir_layer_stat(v, m->ito);
	ssize_t un, tn = 0;
	struct stat ts_;
	int rc = -1;

	/* the merge changed the directory's entries since the lookup, not
	 * its owner or mode */
	if (tst)
		ts_ = *tst;
	else if (fstat(tfd, &ts_) < 0)
		return hu_error_set(e, errno, NULL, "cannot stat");
	if (m->root && (us->st_uid != ts_.st_uid || us->st_gid != ts_.st_gid) &&
	    hu_wr_fchownat(tfd, "", us->st_uid, us->st_gid,
			   AT_EMPTY_PATH) < 0)
		return hu_error_set(e, errno, NULL, "cannot set the owner");
	if ((us->st_mode & 07777) != (ts_.st_mode & 07777) &&
	    hu_wr_fchmod(tfd, us->st_mode & 07777) < 0)
		return hu_error_set(e, errno, NULL, "cannot set the mode");
	/* one listing a side: the upper's is copied, and what the target
	 * holds beyond it goes.  A side the view found bare has nothing
	 * to list (the upper's times record is private, never copied; no
	 * step adds a public xattr to the target's directory). */
	un = hu_vdir_layer_bare(v, m->iup) ? 0 :
		hu_xattr_names(ufd, NULL, usmall, sizeof(usmall), &ul);
	if (un >= 0 && !hu_vdir_layer_bare(v, m->ito))
		tn = hu_xattr_names(tfd, NULL, tsmall, sizeof(tsmall), &tl);
	if (un < 0 || tn < 0) {
		hu_error_set(e, errno, NULL, "cannot list xattrs");
		goto out;
	}
	if (hu_copy_xattrs_listed(ufd, NULL, tfd, NULL, ul, un, e) < 0)
		goto out;
	for (ssize_t off = 0; off < tn; off += strlen(tl + off) + 1) {
		const char *a = tl + off;

		if (hu_xattr_copied(a) && !listed(ul, un, a) &&
		    hu_wr_removexattr_at(tfd, NULL, a) < 0 && errno != ENODATA) {
			hu_error_set(e, errno, NULL, "cannot remove xattr %s", a);
			goto out;
		}
	}
	if (hu_wr_futimens(tfd, ts) < 0) {
		hu_error_set(e, errno, NULL, "cannot set the times");
		goto out;
	}
	rc = 0;
out:
	if (ul != usmall)
		free(ul);
	if (tl != tsmall)
		free(tl);
	return rc;
}

int md_strip_private(int dirfd, const char *name, const char *keep,
		     struct hu_error *e)
{
	char small[512], *list;
	ssize_t len = hu_xattr_names(dirfd, name, small, sizeof(small), &list);
	int rc = 0;

	if (len < 0)
		return hu_error_set(e, errno, name, "cannot list xattrs");
	for (ssize_t off = 0; off < len && rc == 0;
	     off += strlen(list + off) + 1) {
		const char *a = list + off;

		if (!hu_xattr_is_private(a) || (keep && !strcmp(a, keep)))
			continue;
		if (hu_wr_removexattr_at(dirfd, name, a) < 0 &&
		    errno != ENODATA)
			rc = hu_error_set(e, errno, name,
					  "cannot remove xattr %s", a);
	}
	if (list != small)
		free(list);
	return rc;
}

int md_clone_upper(struct md *m, struct hu_error *e)
{
	int fd = -1, rc = -1;
	struct stat st;

	if (fstat(m->up->fd, &st) < 0)
		return md_fail(m->up, NULL, NULL, errno, "cannot stat", e);
	if (hu_rmtree(m->to->fd, MD_UPPER_TMP) < 0 ||
	    hu_wr_mkdirat(m->to->fd, MD_UPPER_TMP, 0700) < 0 ||
	    (fd = hu_open_dir_at(m->to->fd, MD_UPPER_TMP)) < 0)
		return md_fail(m->to, MD_UPPER_TMP, NULL, errno,
			       "cannot create", e);
	m->raw = true;
	if (copy_contents(m, m->up->fd, fd, MD_UPPER_TMP, e) < 0 ||
	    hu_copy_xattrs_raw(m->up->fd, NULL, fd, NULL, e) < 0 ||
	    md_clone_mark(m, fd, e) < 0 ||
	    put_meta(m->to->fd, MD_UPPER_TMP, &st, e) < 0)
		md_prefix(m->to, MD_UPPER_TMP, NULL, e);
	/* its contents on disk before its name says it is whole, and that
	 * name before the record on the upper says so too */
	else if (hu_wr_syncfs(fd) < 0)
		md_fail(m->to, MD_UPPER_TMP, NULL, errno, "cannot sync", e);
	else if (hu_wr_renameat2(m->to->fd, MD_UPPER_TMP, m->to->fd, MD_UPPER,
				 RENAME_NOREPLACE) < 0 ||
		 hu_wr_fsync(m->to->fd) < 0)
		md_fail(m->to, MD_UPPER, NULL, errno, "cannot rename the "
			"clone into place", e);
	else
		rc = 0;
	m->raw = false;
	/* its first paths of hard-link groups lie in the clone */
	hu_linkmap_free(&m->links);
	close(fd);
	return rc;
}
