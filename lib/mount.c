/* SPDX-License-Identifier: MIT */
/*
 * Mounting a stack: which filesystem reads its layers, the options it
 * needs, and the mount(2) call (or fuse-overlayfs's command line).  The
 * checks before the call are mountcheck.c's; option strings are
 * mountopt.c's.
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
#include <sys/utsname.h>
#include <unistd.h>

#include "internal.h"
#include "mount.h"

static const char *const fs_names[] = {
	[HU_MOUNT_AUTO] = "auto", [HU_MOUNT_OVERLAY] = "overlay",
	[HU_MOUNT_UNION] = "union", [HU_MOUNT_FUSE] = "fuse",
};

const char *hu_mount_fs_name(enum hu_mount_fs f)
{
	return (size_t)f < sizeof(fs_names) / sizeof(fs_names[0]) ?
	       fs_names[f] : "?";
}

int hu_mount_fs_parse(const char *s, enum hu_mount_fs *out)
{
	for (size_t i = 0; i < sizeof(fs_names) / sizeof(fs_names[0]); i++) {
		if (!strcmp(s, fs_names[i])) {
			*out = (enum hu_mount_fs)i;
			return 0;
		}
	}
	return -1;
}

void hu_mount_note(const struct hu_mount_opts *o, const char *what,
		   const char *path)
{
	if (o->notes && o->notes->step)
		o->notes->step(o->notes->ctx, what, path);
}

/* Does the kernel have filesystem @name: registered (/proc/filesystems;
 * HUNION_FILESYSTEMS names another file, for tests), or a module it
 * loads at the first mount (modules.alias "fs-NAME")? */
static bool kernel_has(const char *name)
{
	const char *list = getenv("HUNION_FILESYSTEMS");
	char line[256], alias[128];
	struct utsname u;
	bool found = false;
	FILE *f = fopen(list && *list ? list : "/proc/filesystems", "re");

	if (f) {
		while (!found && fgets(line, sizeof(line), f)) {
			char *t = strrchr(line, '\t');

			t = t ? t + 1 : line;
			t[strcspn(t, "\n")] = '\0';
			found = !strcmp(t, name);
		}
		fclose(f);
	}
	if (found || (list && *list) || uname(&u) < 0)
		return found;
	snprintf(line, sizeof(line), "/lib/modules/%s/modules.alias",
		 u.release);
	snprintf(alias, sizeof(alias), "alias fs-%s ", name);
	f = fopen(line, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = !strncmp(line, alias, strlen(alias));
	fclose(f);
	return found;
}

/* ---- what the layers need --------------------------------------------- */

struct features {
	bool redirect, metacopy, xwhiteout;
	const char *redirect_at, *metacopy_at, *xwhiteout_at;	/* layers */
};

static int feature_seen(void *ctx, const struct hu_wh_marker *m,
			struct hu_error *e)
{
	struct features *f = ctx;

	(void)e;
	if (m->kind == HU_WH_REDIRECT)
		f->redirect = true;
	else if (m->kind == HU_WH_METACOPY)
		f->metacopy = true;
	else if (m->kind == HU_WH_XWHITEOUT)
		f->xwhiteout = true;
	return 0;
}

/* Redirects, metacopy files and xattr whiteouts of the overlay layers. */
static int scan_features(const struct hu_stack *s, struct features *f,
			 struct hu_error *e)
{
	for (size_t i = 0; i < s->n; i++) {
		struct features one = { 0 };

		if (!hu_layer_is(&s->layers[i], HU_FMT_OVERLAY))
			continue;
		if (hu_wh_list(&s->layers[i], feature_seen, &one, e) < 0)
			return -1;
		if (one.redirect && !f->redirect)
			f->redirect = true, f->redirect_at = s->layers[i].path;
		if (one.metacopy && !f->metacopy)
			f->metacopy = true, f->metacopy_at = s->layers[i].path;
		if (one.xwhiteout && !f->xwhiteout)
			f->xwhiteout = true,
			f->xwhiteout_at = s->layers[i].path;
	}
	return 0;
}

static int convert_hint(struct hu_error *e, const struct hu_layer *l,
			const char *why)
{
	return hu_error_set(e, 0, l->path, "%s; convert the layers first: "
			    "hunion whiteout convert --to=overlay --in-place "
			    "LAYER (or -o NEWLAYER LAYER): hunion mount "
			    "converts nothing", why);
}

/* The layers' format decides the filesystem; refuse what none reads. */
static int choose_fs(struct hu_mount_plan *p, const struct hu_stack *s,
		     const struct hu_mount_opts *o, struct hu_error *e)
{
	const struct hu_layer *uni = NULL, *ovl = NULL;
	enum hu_mount_fs fs = o->fs;

	for (size_t i = 0; i < s->n; i++) {
		const struct hu_layer *l = &s->layers[i];

		if (l->unpacked)
			return convert_hint(e, l, "a tarball layer: the kernel "
					    "mounts directories");
		if (hu_layer_half(l))
			return hu_error_set(e, 0, l->path, "half-converted (a "
				"'whiteout convert --in-place' stopped): run "
				"it again to finish before mounting");
		if (l->format == HU_FMT_OCI)
			return convert_hint(e, l, "an OCI layer (.wh. "
				"whiteouts), which no kernel filesystem reads");
		if (l->format == HU_FMT_UNION && !uni)
			uni = l;
		if (l->format == HU_FMT_OVERLAY && !ovl)
			ovl = l;
	}
	if (uni && ovl)
		return hu_error_set(e, 0, uni->path, "a union layer, and "
				    "%s is an overlay layer: no filesystem "
				    "reads both; convert the layers to one "
				    "format first (hunion whiteout convert "
				    "--to=overlay --in-place LAYER)", ovl->path);
	if (fs == HU_MOUNT_AUTO) {
		if (geteuid() != 0)
			fs = HU_MOUNT_FUSE;
		else
			fs = uni ? HU_MOUNT_UNION : HU_MOUNT_OVERLAY;
	}
	if (fs == HU_MOUNT_UNION && ovl)
		return hu_error_set(e, 0, ovl->path, "an overlay layer: the "
				    "union filesystem reads union layers "
				    "(mount with -t overlay or auto)");
	if (fs == HU_MOUNT_UNION && !kernel_has("union"))
		return convert_hint(e, uni ? uni : &s->layers[s->n - 1],
				    "union layers, and this kernel has no "
				    "union filesystem (not in "
				    "/proc/filesystems)");
	if (fs != HU_MOUNT_UNION && uni)
		return convert_hint(e, uni, fs == HU_MOUNT_FUSE ?
				    "a union layer: fuse-overlayfs reads "
				    "overlay layers" :
				    "a union layer: overlayfs reads overlay "
				    "layers");
	p->fs = fs;
	p->fstype = fs == HU_MOUNT_UNION ? "union" :
		    fs == HU_MOUNT_FUSE ? "fuse.fuse-overlayfs" : "overlay";
	return 0;
}

/* All marker layers in one namespace: userxattr, or not. */
static int choose_namespace(struct hu_mount_plan *p, const struct hu_stack *s,
			    struct hu_error *e)
{
	const struct hu_layer *first = NULL;

	for (size_t i = 0; i < s->n; i++) {
		const struct hu_layer *l = &s->layers[i];

		if (l->format == HU_FMT_NONE)
			continue;
		if (!first) {
			first = l;
		} else if (l->userxattr != first->userxattr) {
			return hu_error_set(e, 0, l->path, "markers under %s.*"
				", and %s has them under %s.*: a mount reads "
				"one namespace", l->userxattr ? "user" :
				"trusted", first->path, first->userxattr ?
				"user" : "trusted");
		}
	}
	p->userxattr = first && first->userxattr;
	return 0;
}

/* Refuse what the chosen filesystem cannot follow. */
static int check_features(struct hu_mount_plan *p, const struct features *f,
			  struct hu_error *e)
{
	if (p->fs == HU_MOUNT_FUSE && (f->redirect || f->metacopy ||
				       f->xwhiteout))
		return hu_error_set(e, 0, f->redirect ? f->redirect_at :
				    f->metacopy ? f->metacopy_at :
				    f->xwhiteout_at, "holds %s, which "
				    "fuse-overlayfs does not follow: mount it "
				    "as root with -t overlay",
				    f->redirect ? "redirected directories" :
				    f->metacopy ? "metacopy files" :
				    "xattr whiteouts");
	if (p->userxattr && (f->redirect || f->metacopy))
		return hu_error_set(e, 0, f->redirect ? f->redirect_at :
				    f->metacopy_at, "holds %s under "
				    "user.overlay.*, which overlayfs does not "
				    "follow with userxattr",
				    f->redirect ? "redirected directories" :
				    "metacopy files");
	p->redirect_dir = f->redirect;
	p->metacopy = f->metacopy;
	return 0;
}

/* ---- paths and the option string -------------------------------------- */

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

/* One growing string. */
struct sbuf {
	char *s;
	size_t len;
	bool oom;
};

static void sb_add(struct sbuf *b, const char *s, const char *special)
{
	size_t n = special ? hu_mountopt_escaped_len(s, special) : strlen(s);
	char *t;

	if (b->oom)
		return;
	t = realloc(b->s, b->len + n + 1);
	if (!t) {
		b->oom = true;
		return;
	}
	b->s = t;
	if (special)
		hu_mountopt_escape(b->s + b->len, s, special);
	else
		memcpy(b->s + b->len, s, n + 1);
	b->len += n;
}

static int build_data(struct hu_mount_plan *p, char **paths, size_t nlower,
		      const char *upper, const char *fs_options,
		      struct hu_error *e)
{
	/* overlayfs unescapes every option; libfuse's option parser only
	 * ',' and '\' (fuse-overlayfs splits lowerdir at every ':') */
	const char *special = p->fs == HU_MOUNT_FUSE ? ",\\" : ":,\\";
	struct sbuf b = { 0 };

	sb_add(&b, "lowerdir=", NULL);
	for (size_t i = nlower; i-- > 0;) {
		if (p->fs == HU_MOUNT_FUSE && strchr(paths[i], ':')) {
			free(b.s);
			return hu_error_set(e, 0, paths[i], "holds a ':', "
				"which fuse-overlayfs cannot take in a lower "
				"layer's path (it has no escape for it)");
		}
		sb_add(&b, paths[i], special);
		if (i)
			sb_add(&b, ":", NULL);
	}
	if (upper) {
		sb_add(&b, ",upperdir=", NULL);
		sb_add(&b, upper, special);
	}
	if (p->workdir && p->fs != HU_MOUNT_UNION) {
		sb_add(&b, ",workdir=", NULL);
		sb_add(&b, p->workdir, special);
	}
	if (p->fs == HU_MOUNT_OVERLAY) {
		if (p->redirect_dir)
			sb_add(&b, upper ? ",redirect_dir=on" :
			       ",redirect_dir=follow", NULL);
		if (p->metacopy)
			sb_add(&b, ",metacopy=on", NULL);
		if (p->userxattr)
			sb_add(&b, ",userxattr", NULL);
	}
	if (p->fs == HU_MOUNT_FUSE && p->flags) {
		char flags[256];

		hu_mount_flag_opts(p->flags, flags, sizeof(flags));
		if (*flags) {
			sb_add(&b, ",", NULL);
			sb_add(&b, flags, NULL);
		}
	}
	if (fs_options && *fs_options) {
		sb_add(&b, ",", NULL);
		sb_add(&b, fs_options, NULL);
	}
	if (b.oom) {
		free(b.s);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	p->data = b.s;
	/* mount(2) copies one page of options */
	if (p->fs != HU_MOUNT_FUSE && b.len >= (size_t)sysconf(_SC_PAGESIZE))
		return hu_error_set(e, 0, NULL, "the mount options take %zu "
				    "bytes, and mount(2) takes at most %ld: "
				    "shorter paths or fewer layers", b.len,
				    sysconf(_SC_PAGESIZE) - 1);
	return 0;
}

/* fuse-overlayfs on PATH (or the usual places when PATH is unset). */
static int find_fuse(struct hu_mount_plan *p, bool asked,
		     struct hu_error *e)
{
	const char *path = getenv("PATH");
	char *dirs = strdup(path ? path : "/usr/local/bin:/usr/bin:/bin");
	char *save = NULL;

	if (!dirs)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (char *d = strtok_r(dirs, ":", &save); d;
	     d = strtok_r(NULL, ":", &save)) {
		char *f = hu_path_join(*d ? d : ".", "fuse-overlayfs");

		if (f && access(f, X_OK) == 0) {
			p->helper = f;
			free(dirs);
			return 0;
		}
		free(f);
	}
	free(dirs);
	return hu_error_set(e, 0, NULL, "%s needs fuse-overlayfs, which is "
			    "not installed (Debian package fuse-overlayfs)%s",
			    asked ? "-t fuse" : "mounting as a non-root user",
			    asked ? "" : "; as root the kernel's overlayfs "
			    "mounts it");
}

int hu_mount_check_fuse(enum hu_mount_fs fs, struct hu_error *e)
{
	struct hu_mount_plan p = { 0 };

	if (fs != HU_MOUNT_FUSE && (fs != HU_MOUNT_AUTO || geteuid() == 0))
		return 0;
	if (find_fuse(&p, fs == HU_MOUNT_FUSE, e) < 0)
		return -1;
	free(p.helper);
	return 0;
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

/* The workdir: given (created when missing), or .UPPER.hunion-work
 * beside the upper.  Either way on the upper's mount (checked later). */
static int find_workdir(struct prep *r, struct hu_mount_plan *p,
			const struct hu_mount_opts *o, struct hu_error *e)
{
	const struct hu_layer *up = r->d.upper;
	const char *upath = r->paths[r->d.s->n - 1], *base;
	char *dir;

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
		if (asprintf(&r->workname, ".%s.hunion-work", base) < 0) {
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
	return 0;
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
	struct features f = { 0 };
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
	if (choose_fs(p, s, o, e) < 0 || choose_namespace(p, s, e) < 0 ||
	    scan_features(s, &f, e) < 0 || check_features(p, &f, e) < 0)
		goto out;
	if (p->fs == HU_MOUNT_FUSE &&
	    find_fuse(p, o->fs == HU_MOUNT_FUSE, e) < 0)
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
	if (build_data(p, r.paths, r.d.nlower,
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
	    hu_mount_check_upper_fs(&r.d, p->userxattr, o, e) < 0)
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
