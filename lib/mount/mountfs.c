/* SPDX-License-Identifier: MIT */
/*
 * Which filesystem reads a stack, and the options it needs: from the
 * layers' formats (union, overlay, OCI), what the kernel has
 * (/proc/filesystems), who mounts (fuse-overlayfs for a non-root user),
 * and the markers the layers hold (redirects, metacopy files, user.*
 * namespace).  Then the option string, every path escaped.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "internal.h"
#include "mount/mount.h"

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

enum hu_format hu_mount_layer_format(void)
{
	return kernel_has("union") ? HU_FMT_UNION : HU_FMT_OVERLAY;
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

/* The conversion that would make @l mountable: a tarball is unpacked by
 * convert -o (it cannot be converted in place). */
static int convert_hint(struct hu_error *e, const struct hu_layer *l,
			const char *why)
{
	if (l->unpacked)
		return hu_error_set(e, 0, l->path, "%s; unpack it as an "
				    "overlay layer first: hunion whiteout "
				    "convert --to=overlay -o NEWLAYER LAYER: "
				    "hunion mount converts nothing", why);
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
		/* A layer whose format only its record says has no marker
		 * a filesystem could misread: it asks for none. */
		if (l->by_record)
			continue;
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

/* fuse-overlayfs splits its lowerdir= and its upperdir= at every ':'
 * (read_dirs(), with no escape); its workdir= it takes whole. */
static int fuse_layer_path(const struct hu_mount_plan *p, const char *path,
			   const char *role, struct hu_error *e)
{
	if (p->fs != HU_MOUNT_FUSE || !strchr(path, ':'))
		return 0;
	return hu_error_set(e, 0, path, "holds a ':', which fuse-overlayfs "
			    "cannot take in %s path (it has no escape for it)",
			    role);
}

int hu_mount_build_data(struct hu_mount_plan *p, char **paths,
			size_t nlower, const char *upper,
			const char *fs_options, struct hu_error *e)
{
	/* overlayfs unescapes every option; libfuse's option parser only
	 * ',' and '\' (fuse_layer_path) */
	const char *special = p->fs == HU_MOUNT_FUSE ? ",\\" : ":,\\";
	struct sbuf b = { 0 };

	for (size_t i = nlower; i-- > 0;)
		if (fuse_layer_path(p, paths[i], "a lower layer's", e) < 0)
			return -1;
	if (upper && fuse_layer_path(p, upper, "the upper layer's", e) < 0)
		return -1;
	sb_add(&b, "lowerdir=", NULL);
	for (size_t i = nlower; i-- > 0;) {
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
	/* mount(2) copies one page of options; overlayfs takes more through
	 * the new mount API (mountcall.c), the union filesystem does not */
	if (p->fs == HU_MOUNT_FUSE || b.len < (size_t)sysconf(_SC_PAGESIZE))
		return 0;
	if (p->fs == HU_MOUNT_OVERLAY) {
		p->fsconfig = true;
		return 0;
	}
	return hu_error_set(e, 0, NULL, "the mount options take %zu bytes, "
			    "and mount(2) takes at most %ld: shorter paths or "
			    "fewer layers", b.len, sysconf(_SC_PAGESIZE) - 1);
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

int hu_mount_choose(struct hu_mount_plan *p, const struct hu_stack *s,
		    const struct hu_mount_opts *o, struct hu_error *e)
{
	struct features f = { 0 };

	if (choose_fs(p, s, o, e) < 0 || choose_namespace(p, s, e) < 0)
		return -1;
	/* --userxattr read the layers so: the mount reads them so too */
	if (o->stack_opts && o->stack_opts->userxattr)
		p->userxattr = true;
	if (scan_features(s, &f, e) < 0 || check_features(p, &f, e) < 0)
		return -1;
	return p->fs == HU_MOUNT_FUSE ?
	       find_fuse(p, o->fs == HU_MOUNT_FUSE, e) : 0;
}
