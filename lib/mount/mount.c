/* SPDX-License-Identifier: MIT */
/*
 * Mounting a stack: the plan (the mount point, the layers' paths, the
 * workdir) and the order of the preflight.  The filesystem and its
 * options are mountfs.c's, the checks mountcheck.c's, the call
 * mountcall.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "mount/mount.h"

void hu_mount_note(const struct hu_mount_opts *o, const char *what,
		   const char *path)
{
	if (o->notes && o->notes->step)
		o->notes->step(o->notes->ctx, what, path);
}

/* ---- paths ----------------------------------------------------------- */

/* The absolute path of open directory @fd, as the kernel resolves it. */
static char *fd_path(int fd, const char *as_given, struct hu_error *e)
{
	char proc[64], buf[PATH_MAX];
	ssize_t n;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	n = readlink(proc, buf, sizeof(buf) - 1);
	if (n < 0) {
		hu_error_set(e, errno, as_given, "cannot tell its path");
		return NULL;
	}
	buf[n] = '\0';
	if (buf[0] != '/') {
		hu_error_set(e, 0, as_given, "not reachable from this "
			     "process's root (%s)", buf);
		return NULL;
	}
	char *s = strdup(buf);

	if (!s)
		hu_error_set(e, ENOMEM, NULL, "out of memory");
	return s;
}

/* ---- the plan --------------------------------------------------------- */

struct prep {
	struct hu_mount_dirs d;
	struct hu_mount_spec opts;
	char **paths;		/* the layers' absolute paths */
	char *workname;
	int workparent, workfd;
	bool made;		/* the workdir, by this run */
};

static void prep_free(struct prep *r, size_t n)
{
	for (size_t i = 0; r->paths && i < n; i++)
		free(r->paths[i]);
	free(r->paths);
	free(r->workname);
	if (r->workparent >= 0)
		close(r->workparent);
	if (r->workfd >= 0)
		close(r->workfd);
	if (r->d.mntfd >= 0)
		close(r->d.mntfd);
	hu_mount_spec_free(&r->opts);
}

static int open_mountpoint(struct prep *r, struct hu_mount_plan *p,
			   const char *mountpoint, struct hu_error *e)
{
	struct stat st;

	r->d.mntfd = open(mountpoint, O_PATH | O_CLOEXEC);
	if (r->d.mntfd < 0)
		return hu_error_set(e, errno, mountpoint,
				    "cannot use as mount point");
	if (fstat(r->d.mntfd, &st) < 0)
		return hu_error_set(e, errno, mountpoint, "cannot stat");
	if (!S_ISDIR(st.st_mode))
		return hu_error_set(e, ENOTDIR, mountpoint,
				    "cannot use as mount point");
	r->d.mountpoint = mountpoint;
	p->target = fd_path(r->d.mntfd, mountpoint, e);
	return p->target ? 0 : -1;
}

/* Are @fd and @upper on one mount (not only one filesystem: a bind mount
 * is another mount), as overlayfs needs the workdir and the upper? */
static int same_mount(int fd, int upper, const char *workdir,
		      struct hu_error *e)
{
	struct statx a, b;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &a) < 0 ||
	    statx(upper, "", AT_EMPTY_PATH, STATX_MNT_ID, &b) < 0)
		return hu_error_set(e, errno, workdir, "cannot stat");
	if (!(a.stx_mask & b.stx_mask & STATX_MNT_ID) ||
	    a.stx_mnt_id == b.stx_mnt_id)
		return 0;
	return hu_error_set(e, 0, workdir, "not on the upper layer's mount, "
			    "where overlayfs needs its workdir");
}

/* The workdir: given (created when missing), or .UPPER.hunion-work
 * beside the upper.  Either way on the upper's mount (checked later). */
static int find_workdir(struct prep *r, struct hu_mount_plan *p,
			const struct hu_mount_opts *o, struct hu_error *e)
{
	const struct hu_layer *up = r->d.upper;
	const char *upath = r->paths[r->d.s->n - 1], *base;
	char stem[HU_TEMP_STEM_SIZE], *dir;

	if (o->workdir) {
		char *a = strdup(o->workdir), *b = strdup(o->workdir);

		if (!a || !b) {
			free(a);
			free(b);
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		}
		r->workparent = open(dirname(a), O_RDONLY | O_DIRECTORY |
				     O_CLOEXEC);
		r->workname = strdup(basename(b));
		free(a);
		free(b);
		if (r->workparent < 0)
			return hu_error_set(e, errno, o->workdir,
					    "cannot open its parent");
		r->d.workdir = o->workdir;
	} else {
		struct stat st, pst;

		r->workparent = openat(up->fd, "..", O_RDONLY | O_DIRECTORY |
				       O_CLOEXEC);
		if (r->workparent < 0)
			return hu_error_set(e, errno, up->path,
					    "cannot open its parent");
		if (fstat(up->fd, &st) < 0 || fstat(r->workparent, &pst) < 0)
			return hu_error_set(e, errno, up->path, "cannot stat");
		if (st.st_dev != pst.st_dev || strcmp(upath, "/") == 0)
			return hu_error_set(e, 0, up->path, "the upper is the "
				"root of its filesystem, so no directory beside "
				"it is on that filesystem: give --workdir");
		base = strrchr(upath, '/') + 1;
		/* a long upper name shortened with a hash, as the names
		 * beside an output are (it fits NAME_MAX, and the same upper
		 * finds the same workdir again) */
		hu_temp_stem(base, stem);
		if (asprintf(&r->workname, ".%s.hunion-work", stem) < 0) {
			r->workname = NULL;
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		}
	}
	if (!r->workname)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	r->workfd = openat(r->workparent, r->workname, O_RDONLY |
			   O_DIRECTORY | O_CLOEXEC);
	if (r->workfd < 0 && errno != ENOENT)
		return hu_error_set(e, errno, o->workdir ? o->workdir :
				    r->workname, "cannot open the workdir");
	dir = fd_path(r->workparent, o->workdir, e);
	if (!dir)
		return -1;
	p->workdir = hu_path_join(strcmp(dir, "/") ? dir : "", r->workname);
	free(dir);
	if (!p->workdir)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	if (!o->workdir)
		r->d.workdir = p->workdir;
	r->d.workparent = r->workparent;
	r->d.workname = r->workname;
	r->d.workfd = r->workfd;
	return same_mount(r->workfd >= 0 ? r->workfd : r->workparent, up->fd,
			  r->d.workdir, e);
}

static int make_workdir(struct prep *r, const struct hu_mount_opts *o,
			struct hu_error *e)
{
	if (r->workfd >= 0)
		return 0;
	hu_mount_note(o, o->dry_run ? "would create workdir" :
		      "created workdir", r->d.workdir);
	if (o->dry_run)
		return 0;
	if (hu_wr_mkdirat(r->workparent, r->workname, 0700) < 0)
		return hu_error_set(e, errno, r->d.workdir,
				    "cannot create the workdir");
	r->made = true;
	r->workfd = openat(r->workparent, r->workname, O_RDONLY |
			   O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (r->workfd < 0)
		return hu_error_set(e, errno, r->d.workdir,
				    "cannot open the workdir");
	r->d.workfd = r->workfd;
	return 0;
}

static int plan_paths(struct prep *r, const struct hu_stack *s,
		      struct hu_error *e)
{
	r->paths = calloc(s->n, sizeof(*r->paths));
	if (!r->paths)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (size_t i = 0; i < s->n; i++) {
		r->paths[i] = fd_path(s->layers[i].fd, s->layers[i].path, e);
		if (!r->paths[i])
			return -1;
	}
	return 0;
}

static int prepare(struct hu_mount_plan *p, const struct hu_stack *s,
		   const char *mountpoint, const struct hu_mount_opts *o,
		   struct hu_error *e)
{
	struct prep r = { .workparent = -1, .workfd = -1,
			  .d = { .s = s, .workfd = -1, .workparent = -1,
				 .mntfd = -1 } };
	bool lower_only;
	int rc = -1;

	memset(p, 0, sizeof(*p));
	if (hu_mount_spec_parse(o->options, false, &r.opts, e) < 0)
		return -1;
	p->flags = o->flags | r.opts.flags;
	lower_only = o->lower_only || (p->flags & MS_RDONLY);
	if (lower_only)
		p->flags |= MS_RDONLY;
	if (s->n < 2) {
		hu_error_set(e, 0, NULL, "a mount needs at least two layers "
			     "(%s)", lower_only ? "read only, all lowers" :
			     "a lower and the upper");
		goto out;
	}
	r.d.nlower = lower_only ? s->n : s->n - 1;
	r.d.upper = lower_only ? NULL : &s->layers[s->n - 1];
	if (hu_mount_choose(p, s, o, e) < 0)
		goto out;
	p->source = strdup(o->source ? o->source : "hunion");
	if (!p->source) {
		hu_error_set(e, ENOMEM, NULL, "out of memory");
		goto out;
	}
	if (open_mountpoint(&r, p, mountpoint, e) < 0 ||
	    plan_paths(&r, s, e) < 0)
		goto out;
	if (r.d.upper && p->fs != HU_MOUNT_UNION &&
	    find_workdir(&r, p, o, e) < 0)
		goto out;
	if (hu_mount_build_data(p, r.paths, r.d.nlower,
		       r.d.upper ? r.paths[s->n - 1] : NULL,
		       r.opts.fs_options, e) < 0)
		goto out;
	if (hu_mount_check_nesting(&r.d, e) < 0 ||
	    hu_mount_check_in_use(&r.d, o->force, o, e) < 0)
		goto out;
	if (r.d.upper && p->workdir &&
	    (make_workdir(&r, o, e) < 0 ||
	     hu_mount_clean_workdir(&r.d, o, e) < 0))
		goto out;
	if (r.d.upper &&
	    hu_mount_check_upper_fs(&r.d, p->userxattr || (p->fs ==
				    HU_MOUNT_FUSE && geteuid() != 0), o, e) < 0)
		goto out;
	rc = hu_mount_check_fsck(&r.d, o, e);
	p->made_workdir = r.made;
out:
	/* refused: the workdir this run made goes again */
	if (rc < 0 && r.made)
		(void)hu_rmtree(r.workparent, r.workname);
	prep_free(&r, s->n);
	if (rc < 0)
		hu_mount_plan_free(p);
	return rc;
}

/* A dry run goes through the write wrapper's dry run: every change the
 * preflight would make (the workdir, its leftovers) is skipped there. */
int hu_mount_prepare(struct hu_mount_plan *p, const struct hu_stack *s,
		     const char *mountpoint, const struct hu_mount_opts *o,
		     struct hu_error *e)
{
	bool was = hu_wr_dry_run();
	int rc;

	hu_wr_set_dry_run(was || o->dry_run);
	rc = prepare(p, s, mountpoint, o, e);
	hu_wr_set_dry_run(was);
	return rc;
}

void hu_mount_plan_free(struct hu_mount_plan *p)
{
	free(p->source);
	free(p->target);
	free(p->data);
	free(p->helper);
	free(p->workdir);
	memset(p, 0, sizeof(*p));
}
