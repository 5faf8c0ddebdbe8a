/* SPDX-License-Identifier: MIT */
/*
 * The preflight of a mount: what the kernel would trip on, or mount and
 * regret, found before mount(2).  Directories are compared by device and
 * inode, never by path strings (a symlink, a bind mount or "a/../b" name
 * the same directory many ways).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "internal.h"
#include "mount/mount.h"

/* The scratch file of the upper's check, in the workdir. */
#define PROBE ".hunion-probe"

/* ---- nesting ---------------------------------------------------------- */

/* Is @d[self], or a directory above it, another of @d (identities @st)?
 * Its index, or -1. */
static int inside(const struct hu_dir_ref *d, const struct stat *id,
		  size_t count, size_t self)
{
	struct stat st, up;
	int hit = -1, next, fd = fcntl(d[self].fd, F_DUPFD_CLOEXEC, 0);

	while (fd >= 0 && hit < 0 && fstat(fd, &st) == 0) {
		for (size_t j = 0; j < count && hit < 0; j++)
			if (j != self && !d[j].proxy &&
			    st.st_dev == id[j].st_dev &&
			    st.st_ino == id[j].st_ino)
				hit = (int)j;
		next = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (next < 0 || fstat(next, &up) < 0 ||
		    (up.st_dev == st.st_dev && up.st_ino == st.st_ino)) {
			if (next >= 0)
				close(next);
			break;
		}
		close(fd);
		fd = next;
	}
	if (fd >= 0)
		close(fd);
	return hit;
}

int hu_dirs_apart(const struct hu_dir_ref *d, size_t n, struct hu_error *e)
{
	struct stat *id = calloc(n ? n : 1, sizeof(*id));
	int rc = -1;

	if (!id)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (size_t i = 0; i < n; i++)
		if (fstat(d[i].fd, &id[i]) < 0) {
			hu_error_set(e, errno, d[i].path, "cannot stat");
			goto out;
		}
	for (size_t i = 0; i < n; i++) {
		int hit = inside(d, id, n, i);

		if (hit >= 0) {
			bool same = !d[i].proxy &&
				    id[hit].st_dev == id[i].st_dev &&
				    id[hit].st_ino == id[i].st_ino;

			hu_error_set(e, 0, d[i].path, "the %s %s the %s %s: "
				     "they must lie apart", d[i].role,
				     same ? "is" : "lies inside", d[hit].role,
				     d[hit].path);
			goto out;
		}
	}
	rc = 0;
out:
	free(id);
	return rc;
}

/* The mount point first, the workdir last, so that a message names
 * what the user chose before what hunion chose. */
int hu_mount_check_nesting(const struct hu_mount_dirs *d, struct hu_error *e)
{
	size_t count = 0;
	struct hu_dir_ref *n = calloc(d->s->n + 2, sizeof(*n));
	int workfd = d->workfd >= 0 ? d->workfd : d->workparent;
	int rc;

	if (!n)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	n[count++] = (struct hu_dir_ref){ d->mntfd, d->mountpoint,
					  "mount point", false, false };
	for (size_t i = 0; i < d->s->n; i++)
		n[count++] = (struct hu_dir_ref){
			d->s->layers[i].fd, d->s->layers[i].path,
			i < d->nlower ? "lower layer" : "upper layer",
			i >= d->nlower, false };
	if (workfd >= 0)
		n[count++] = (struct hu_dir_ref){ workfd, d->workdir,
						  "workdir", true,
						  d->workfd < 0 };
	rc = hu_dirs_apart(n, count, e);
	free(n);
	return rc;
}

/* ---- in use by a mount ------------------------------------------------ */

/* Layer @i of the mount (with the workdir, when it is the upper): in use
 * by a mount that writes it, or, when the mount writes it, in any use? */
static int in_use(const struct hu_mount_dirs *d, size_t i, bool force,
		  const struct hu_mount_opts *o, struct hu_error *e)
{
	const struct hu_layer *l = &d->s->layers[i];
	bool top = d->upper == l;
	struct hu_dir_ref dirs[2] = {
		{ l->fd, l->path, "layer", top, false },
		{ d->workfd, d->workdir, "workdir", true, false },
	};
	struct hu_mount_use use = { 0 };
	int rc = hu_dirs_in_use(dirs, top && d->workfd >= 0 ? 2 : 1, &use, e);
	const char *path;
	char *what;

	if (rc <= 0)
		return rc;
	path = use.layer ? use.layer : l->path;
	/* whole: it names paths */
	if ((rc == 1 ?
	     asprintf(&what, "in use as %s of the %s mounted on %s", use.role,
		      use.fstype, use.mountpoint) :
	     asprintf(&what, "cannot tell whether the %s mounted on %s uses "
		      "it: it names a layer by a path that cannot be "
		      "resolved (%s)", use.fstype, use.mountpoint,
		      use.option)) < 0) {
		rc = hu_error_set(e, ENOMEM, path, "out of memory");
		hu_mount_use_free(&use);
		return rc;
	}
	if (force) {
		hu_report_warn(o->report, 0, path, NULL, "%s (--force: mounted "
			       "anyway; the kernel calls this undefined)",
			       what);
		rc = 0;
	} else {
		rc = hu_error_set(e, 0, path, "%s: refused (--force mounts "
				  "anyway)", what);
	}
	free(what);
	hu_mount_use_free(&use);
	return rc;
}

int hu_mount_check_in_use(const struct hu_mount_dirs *d, bool force,
			  const struct hu_mount_opts *o, struct hu_error *e)
{
	for (size_t i = 0; i < d->s->n; i++)
		if (in_use(d, i, force, o, e) < 0)
			return -1;
	return 0;
}

/* ---- the workdir ------------------------------------------------------ */

int hu_mount_clean_workdir(const struct hu_mount_dirs *d,
			   const struct hu_mount_opts *o, struct hu_error *e)
{
	struct hu_names names = { 0 }, work = { 0 };
	int workfd = -1, rc = -1;
	char *path = NULL;

	if (d->workfd < 0)
		return 0;	/* dry: not made yet, so empty */
	if (hu_names_read(d->workfd, &names, d->workdir, e) < 0)
		return -1;
	for (size_t i = 0; i < names.n; i++) {
		const char *nm = names.v[i].name;

		if (!strcmp(nm, PROBE)) {
			/* ours, from a run killed during its check */
			free(path);
			path = hu_path_join(d->workdir, PROBE);
			if (!path) {
				hu_error_set(e, ENOMEM, NULL, "out of memory");
				goto out;
			}
			hu_mount_note(o, o->dry_run ? "would remove leftover" :
				      "removed leftover", path);
			if (hu_wr_unlinkat(d->workfd, nm, 0) < 0) {
				hu_error_set(e, errno, path, "cannot remove");
				goto out;
			}
			continue;
		}
		if (strcmp(nm, "work") && strcmp(nm, "index")) {
			hu_error_set(e, 0, d->workdir, "holds '%s', which "
				     "overlayfs does not make there: a workdir "
				     "is an empty directory (or one an "
				     "overlay used before)", nm);
			goto out;
		}
	}
	workfd = hu_open_dir_at(d->workfd, "work");
	if (workfd < 0) {
		rc = errno == ENOENT ? 0 : hu_error_set(e, errno, d->workdir,
							"cannot open work");
		goto out;
	}
	if (hu_names_read(workfd, &work, d->workdir, e) < 0)
		goto out;
	for (size_t i = 0; i < work.n; i++) {
		const char *nm = work.v[i].name;

		free(path);
		path = hu_path_join(d->workdir, "work");
		if (path) {
			char *p = hu_path_join(path, nm);

			free(path);
			path = p;
		}
		if (!path) {
			hu_error_set(e, ENOMEM, NULL, "out of memory");
			goto out;
		}
		/* a volatile mount that was not unmounted cleanly: the
		 * upper may have lost writes, which the user must judge */
		if (!strcmp(nm, "incompat") && !o->force) {
			hu_error_set(e, 0, path, "left by a 'volatile' mount "
				     "that ended uncleanly: the upper may have "
				     "lost writes; check it, then remove this "
				     "(or --force)");
			goto out;
		}
		hu_mount_note(o, o->dry_run ? "would remove leftover" :
			      "removed leftover", path);
		if (hu_rmtree(workfd, nm) < 0) {
			hu_error_set(e, errno, path, "cannot remove leftover");
			goto out;
		}
	}
	rc = 0;
out:
	free(path);
	if (workfd >= 0)
		close(workfd);
	hu_names_free(&names);
	hu_names_free(&work);
	return rc;
}

/* ---- the upper's filesystem ------------------------------------------- */

/* Set and read back xattr @attr on entry @name of @dirfd (NULL: @dirfd
 * itself), through the write wrapper when @name is a named file. */
static int xattr_works(int fd, const char *name, const char *attr)
{
	char v[2];
	int rc = name ? hu_wr_setxattr_at(fd, name, attr, "y", 1, 0) :
		 fsetxattr(fd, attr, "y", 1, 0);

	if (rc < 0)
		return -1;
	if (hu_lgetxattr_at(fd, name, attr, v, sizeof(v)) != 1 ||
	    v[0] != 'y') {
		errno = EOPNOTSUPP;
		return -1;
	}
	return 0;
}

/* Does a listing of @fd give the type of its entries (not DT_UNKNOWN)?
 * 1 yes, 0 no, 2 cannot tell (no entry but "." and ".."). */
static int has_d_type(int fd, const char *path, struct hu_error *e)
{
	struct hu_names names = { 0 };
	int rc = 2;

	if (hu_names_read(fd, &names, path, e) < 0)
		return -1;
	for (size_t i = 0; i < names.n && rc == 2; i++)
		rc = names.v[i].type != DT_UNKNOWN;
	hu_names_free(&names);
	return rc;
}

/* @userxattr: the markers go under user.* (the userxattr option, or
 * fuse-overlayfs run by a non-root user, who cannot write trusted.*).
 * Tried for real on a scratch file: a named one in the workdir (through
 * the write wrapper), removed at once, whose d_type the workdir's listing
 * then shows.  In a dry run, an unnamed O_TMPFILE in the upper, which
 * changes nothing anyone sees, and the upper's own listing for d_type. */
int hu_mount_check_upper_fs(const struct hu_mount_dirs *d, bool userxattr,
			    const struct hu_mount_opts *o, struct hu_error *e)
{
	const char *attr = userxattr ? "user.overlay.hunion-probe" :
			   "trusted.overlay.hunion-probe";
	const char *scratch = PROBE;
	bool named = d->workfd >= 0 && !hu_wr_dry_run();
	int fd, dt, rc = -1;

	if (named)
		fd = hu_wr_create(d->workfd, scratch, 0600);
	else
		fd = openat(d->upper->fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC,
			    0600);
	if (fd < 0) {
		if (named)
			return hu_error_set(e, errno, d->workdir, "cannot "
					    "create a scratch file in the "
					    "workdir");
		hu_mount_note(o, "could not try xattrs (no O_TMPFILE) in",
			      d->upper->path);
		return 0;
	}
	if (xattr_works(named ? d->workfd : fd, named ? scratch : NULL,
			attr) < 0) {
		hu_error_set(e, errno, d->upper->path, "the upper's filesystem "
			     "does not keep %s.* xattrs, where overlayfs "
			     "keeps its markers", userxattr ? "user" :
			     "trusted");
		goto out;
	}
	dt = named ? has_d_type(d->workfd, d->workdir, e) :
	     has_d_type(d->upper->fd, d->upper->path, e);
	if (dt < 0)
		goto out;
	if (dt == 0) {
		hu_error_set(e, 0, d->upper->path, "the upper's filesystem "
			     "does not report d_type, which overlayfs needs");
		goto out;
	}
	rc = 0;
out:
	close(fd);
	if (named && hu_wr_unlinkat(d->workfd, scratch, 0) < 0 && rc == 0)
		rc = hu_error_set(e, errno, d->workdir,
				  "cannot remove the scratch file");
	return rc;
}

/* ---- fsck ------------------------------------------------------------- */

struct fsck_ctx {
	const struct hu_mount_opts *o;
};

static int fsck_finding(void *ctx, const struct hu_fsck_finding *f,
			struct hu_error *e)
{
	struct fsck_ctx *c = ctx;

	(void)e;
	if (f->severity >= HU_SEV_ERROR && c->o->notes &&
	    c->o->notes->problem)
		c->o->notes->problem(c->o->notes->ctx, f);
	return 0;
}

int hu_mount_check_fsck(const struct hu_mount_dirs *d,
			const struct hu_mount_opts *o, struct hu_error *e)
{
	struct fsck_ctx c = { o };
	struct hu_fsck_opts fo = { .mode = HU_FSCK_CHECK,
				   .all_layers = true, .finding = fsck_finding,
				   .ctx = &c, .report = o->report };
	struct hu_stack_opts so = o->stack_opts ? *o->stack_opts :
				  (struct hu_stack_opts){ 0 };
	struct hu_fsck_stats st = { 0 };
	char **paths = calloc(d->s->n, sizeof(*paths));
	int rc;

	if (!paths)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (size_t i = 0; i < d->s->n; i++)
		paths[i] = d->s->layers[i].path;
	fo.workdir = d->workfd >= 0 ? d->workdir : NULL;
	rc = hu_fsck(paths, d->s->n, &so, &fo, &st, e);
	free(paths);
	if (rc < 0)
		return -1;
	if (st.found[HU_SEV_ERROR] == 0)
		return 0;
	if (o->force) {
		hu_report_warn(o->report, 0, NULL, NULL, "fsck found %llu "
			       "error%s (--force: mounted anyway)",
			       (unsigned long long)st.found[HU_SEV_ERROR],
			       st.found[HU_SEV_ERROR] == 1 ? "" : "s");
		return 0;
	}
	return hu_error_set(e, 0, NULL, "fsck found %llu error%s in the "
			    "layers or the workdir (listed above): not "
			    "mounted (see hunion fsck; --force mounts "
			    "anyway)",
			    (unsigned long long)st.found[HU_SEV_ERROR],
			    st.found[HU_SEV_ERROR] == 1 ? "" : "s");
}
