/* SPDX-License-Identifier: MIT */
/*
 * Markers: what makes an entry of a layer a whiteout, and a directory
 * opaque, in each of the three on-disk formats (hunion-layers(7)).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "internal.h"

static const char *const format_names[] = {
	[HU_FMT_AUTO] = "auto", [HU_FMT_NONE] = "none",
	[HU_FMT_UNION] = "union", [HU_FMT_OVERLAY] = "overlay",
	[HU_FMT_OCI] = "oci",
};

const char *hu_format_name(enum hu_format f)
{
	return (unsigned)f < sizeof(format_names) / sizeof(format_names[0]) ?
		format_names[f] : "?";
}

int hu_format_parse(const char *s, enum hu_format *out)
{
	for (enum hu_format f = HU_FMT_AUTO; f <= HU_FMT_OCI; f++) {
		if (f != HU_FMT_NONE && strcmp(s, format_names[f]) == 0) {
			*out = f;
			return 0;
		}
	}
	return -1;
}

const char *hu_marker_xattr(enum hu_format f, bool userxattr,
			    const char *what, char *buf, size_t len)
{
	snprintf(buf, len, "%s.%s.%s", userxattr ? "user" : "trusted",
		 f == HU_FMT_OVERLAY ? "overlay" : "union", what);
	return buf;
}

bool hu_xattr_is_private(const char *name)
{
	static const char *const prefixes[] = {
		"trusted.union.", "user.union.",
		"trusted.overlay.", "user.overlay.",
	};

	for (size_t i = 0; i < 4; i++)
		if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
			return true;
	return false;
}

bool hu_xattr_is_record(const char *rest)
{
	return strncmp(rest, "union.converting", 16) == 0 ||
	       strncmp(rest, "union.mergedown-", 16) == 0 ||
	       strcmp(rest, "union.format") == 0;
}

/* Is xattr @attr of the entry exactly the one byte @want?  Like the
 * kernel, read at most one byte: a longer value is not a match. */
static int xattr_is_byte(int dirfd, const char *name, const char *attr,
			 char want, bool *match)
{
	char v;
	ssize_t n = hu_lgetxattr_at(dirfd, name, attr, &v, 1);

	*match = false;
	if (n < 0) {
		if (errno == ENODATA || errno == ERANGE || errno == ENOTSUP)
			return 0;
		return -1;
	}
	*match = (n == 1 && v == want);
	return 0;
}

static int classify_union(const struct hu_layer *l, int dirfd,
			  const char *name, const struct stat *st,
			  enum hu_marker *kind, struct hu_error *e)
{
	char target[sizeof(HU_UNION_WHITEOUT_TARGET) + 1];
	char attr[64];
	bool match;
	ssize_t n;

	if (!S_ISLNK(st->st_mode) ||
	    st->st_size != (off_t)strlen(HU_UNION_WHITEOUT_TARGET))
		return 0;
	n = readlinkat(dirfd, name, target, sizeof(target));
	if (n < 0)
		return hu_error_set(e, errno, name, "cannot read symlink");
	if ((size_t)n != strlen(HU_UNION_WHITEOUT_TARGET) ||
	    memcmp(target, HU_UNION_WHITEOUT_TARGET, n) != 0)
		return 0;
	hu_marker_xattr(HU_FMT_UNION, l->userxattr, "whiteout", attr,
			sizeof(attr));
	if (xattr_is_byte(dirfd, name, attr, 'y', &match) < 0)
		return hu_error_set(e, errno, name, "cannot read %s", attr);
	if (match)
		*kind = HU_MARK_WHITEOUT;
	return 0;
}

static int classify_overlay(const struct hu_layer *l, int dirfd,
			    const char *name, const struct stat *st,
			    bool xwhiteouts, enum hu_marker *kind,
			    struct hu_error *e)
{
	char attr[64];

	if (S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0)) {
		*kind = HU_MARK_WHITEOUT;
		return 0;
	}
	/* An xattr whiteout: an empty regular file carrying
	 * overlay.whiteout.  The kernel's lookup honours it in any layer;
	 * only its readdir wants the parent marked "x" (elsewhere it lists
	 * the name, which then cannot be looked up), so for the view the
	 * callers pass @xwhiteouts true. */
	if (xwhiteouts && S_ISREG(st->st_mode) && st->st_size == 0) {
		hu_marker_xattr(HU_FMT_OVERLAY, l->userxattr, "whiteout",
				attr, sizeof(attr));
		if (hu_lgetxattr_at(dirfd, name, attr, NULL, 0) >= 0)
			*kind = HU_MARK_WHITEOUT;
		else if (errno != ENODATA && errno != ENOTSUP)
			return hu_error_set(e, errno, name, "cannot read %s",
					    attr);
	}
	return 0;
}

/* ---- OCI marker names --------------------------------------------------- */

enum hu_marker hu_oci_name_kind(const char *name, size_t len)
{
	if (len < HU_OCI_WH_PREFIX_LEN ||
	    memcmp(name, HU_OCI_WH_PREFIX, HU_OCI_WH_PREFIX_LEN) != 0)
		return HU_MARK_NONE;
	if (len == strlen(HU_OCI_OPAQUE) && !memcmp(name, HU_OCI_OPAQUE, len))
		return HU_MARK_OPAQUE_FILE;
	if (len >= HU_OCI_META_PREFIX_LEN &&
	    memcmp(name, HU_OCI_META_PREFIX, HU_OCI_META_PREFIX_LEN) == 0)
		return HU_MARK_META;
	return HU_MARK_WHITEOUT;
}

bool hu_oci_hides_nothing(const char *hidden)
{
	return !*hidden || strcmp(hidden, ".") == 0 || strcmp(hidden, "..") == 0;
}

bool hu_oci_whiteout_name(char *buf, size_t size, const char *name)
{
	return (size_t)snprintf(buf, size, HU_OCI_WH_PREFIX "%s", name) < size;
}

static char *oci_path(const char *dir, const char *marker, const char *name)
{
	size_t dl = strlen(dir);
	size_t len = dl + 1 + strlen(marker) + strlen(name) + 1;
	char *path = malloc(len);

	if (path)
		snprintf(path, len, "%s%s%s%s", dir, dl ? "/" : "", marker,
			 name);
	return path;
}

char *hu_oci_whiteout_path(const char *dir, const char *name)
{
	return oci_path(dir, HU_OCI_WH_PREFIX, name);
}

char *hu_oci_opaque_path(const char *dir)
{
	return oci_path(dir, HU_OCI_OPAQUE, "");
}

static int classify_oci(const char *name, enum hu_marker *kind,
			const char **target, struct hu_error *e)
{
	const char *t = hu_oci_hidden(name);

	if (!t) {
		if (hu_oci_is_opaque(name))
			*kind = HU_MARK_OPAQUE_FILE;
		else if (hu_oci_is_marker(name))
			*kind = HU_MARK_META;
		return 0;
	}
	if (hu_oci_hides_nothing(t))
		return hu_error_set(e, 0, name,
				    "invalid OCI whiteout name (hides '%s')",
				    t);
	*kind = HU_MARK_WHITEOUT;
	*target = t;
	return 0;
}

/* ---- half-converted layers: two formats at once ------------------------ */

bool hu_layer_half(const struct hu_layer *l)
{
	return l->conv_to > HU_FMT_NONE;
}

bool hu_layer_is(const struct hu_layer *l, enum hu_format f)
{
	return l->format == f || (hu_layer_half(l) && l->conv_to == f);
}

/* The forms @l is read in: itself, and while half-converted the same
 * layer in the format it is converted to.  Returns how many. */
static int layer_forms(const struct hu_layer *l, struct hu_layer out[2])
{
	out[0] = *l;
	out[0].conv_to = HU_FMT_AUTO;
	if (!hu_layer_half(l))
		return 1;
	out[1] = out[0];
	out[1].format = l->conv_to;
	out[1].userxattr = l->conv_to_userxattr;
	return 2;
}

bool hu_layer_overlay_xattr(const struct hu_layer *l, int i, const char *what,
			    char *buf, size_t len)
{
	bool user;

	if (i == 0 && l->format == HU_FMT_OVERLAY)
		user = l->userxattr;
	else if (i == 1 && hu_layer_half(l) && l->conv_to == HU_FMT_OVERLAY &&
		 (l->format != HU_FMT_OVERLAY ||
		  l->conv_to_userxattr != l->userxattr))
		user = l->conv_to_userxattr;
	else
		return false;
	hu_marker_xattr(HU_FMT_OVERLAY, user, what, buf, len);
	return true;
}

static int classify_one(const struct hu_layer *l, int dirfd, const char *name,
			const struct stat *st, bool xwhiteouts,
			enum hu_marker *kind, const char **target,
			struct hu_error *e)
{
	switch (l->format) {
	case HU_FMT_UNION:
		return classify_union(l, dirfd, name, st, kind, e);
	case HU_FMT_OVERLAY:
		return classify_overlay(l, dirfd, name, st, xwhiteouts, kind,
					e);
	case HU_FMT_OCI:
		return classify_oci(name, kind, target, e);
	default:
		return 0;
	}
}

int hu_marker_classify(const struct hu_layer *l, int dirfd, const char *name,
		       const struct stat *st, bool xwhiteouts,
		       enum hu_marker *kind, const char **target,
		       struct hu_error *e)
{
	struct hu_layer form[2];
	int n = layer_forms(l, form);

	*kind = HU_MARK_NONE;
	*target = name;
	for (int i = 0; i < n && *kind == HU_MARK_NONE; i++)
		if (classify_one(&form[i], dirfd, name, st, xwhiteouts, kind,
				 target, e) < 0)
			return -1;
	return 0;
}

static int dir_opaque_one(const struct hu_layer *l, int fd,
			  enum hu_opaque *out, struct hu_error *e)
{
	char attr[64], v[2];
	ssize_t n;

	*out = HU_OPAQUE_NO;
	if (l->format != HU_FMT_UNION && l->format != HU_FMT_OVERLAY)
		return 0;
	hu_marker_xattr(l->format, l->userxattr, "opaque", attr, sizeof(attr));
	n = fgetxattr(fd, attr, v, 1);
	if (n < 0) {
		if (errno == ENODATA || errno == ERANGE || errno == ENOTSUP)
			return 0;
		return hu_error_set(e, errno, NULL, "cannot read %s", attr);
	}
	if (n == 1 && v[0] == 'y')
		*out = HU_OPAQUE_YES;
	else if (n == 1 && v[0] == 'x' && l->format == HU_FMT_OVERLAY)
		*out = HU_OPAQUE_XWHITEOUTS;
	return 0;
}

int hu_marker_dir_opaque(const struct hu_layer *l, int fd,
			 enum hu_opaque *out, struct hu_error *e)
{
	struct hu_layer form[2];
	int n = layer_forms(l, form);
	enum hu_opaque op;

	*out = HU_OPAQUE_NO;
	for (int i = 0; i < n && *out != HU_OPAQUE_YES; i++) {
		if (dir_opaque_one(&form[i], fd, &op, e) < 0)
			return -1;
		if (op != HU_OPAQUE_NO)
			*out = op;
	}
	return 0;
}

int hu_marker_add_whiteout(const struct hu_layer *l, enum hu_format f,
			   int dirfd, const char *name, struct hu_error *e)
{
	char attr[64], whname[NAME_MAX + 1];
	int fd;

	switch (f) {
	case HU_FMT_UNION:
		if (hu_wr_symlinkat(HU_UNION_WHITEOUT_TARGET, dirfd, name) < 0)
			return hu_error_set(e, errno, name,
					    "cannot create whiteout");
		hu_marker_xattr(f, l->userxattr, "whiteout", attr,
				sizeof(attr));
		if (hu_wr_setxattr_at(dirfd, name, attr, "y", 1, 0) < 0) {
			int err = errno;

			(void)hu_wr_unlinkat(dirfd, name, 0);
			return hu_error_set(e, err, name, "cannot set %s%s",
					    attr, err == EPERM && l->userxattr ?
					    " (user.* xattrs cannot be set on "
					    "symlinks: use the overlay or oci "
					    "format)" : "");
		}
		return 0;
	case HU_FMT_OVERLAY:
		if (hu_wr_mknodat(dirfd, name, S_IFCHR | 0, makedev(0, 0)) < 0)
			return hu_error_set(e, errno, name,
					    "cannot create whiteout device");
		return 0;
	case HU_FMT_OCI:
		if (!hu_oci_whiteout_name(whname, sizeof(whname), name))
			return hu_error_set(e, ENAMETOOLONG, name,
					    "name too long for an OCI whiteout");
		fd = hu_wr_create(dirfd, whname, 0644);
		if (fd < 0)
			return hu_error_set(e, errno, whname,
					    "cannot create whiteout");
		close(fd);
		return 0;
	default:
		return hu_error_set(e, EINVAL, name,
				    "no whiteout format given");
	}
}

int hu_marker_put_whiteout(const struct hu_layer *l, enum hu_format f,
			   int dirfd, const char *name,
			   const struct timespec ts[2], unsigned int flags,
			   unsigned int *seed, struct hu_error *e)
{
	char tmp[sizeof(HU_CONV_TEMP_PREFIX) + 8];
	int tries = 0, err;

	for (;;) {
		*seed = *seed * 1103515245u + 12345u;
		snprintf(tmp, sizeof(tmp), HU_CONV_TEMP_PREFIX "%06x",
			 *seed & 0xffffff);
		if (hu_marker_add_whiteout(l, f, dirfd, tmp, e) == 0)
			break;
		if (e->err != EEXIST || ++tries == 100) {
			/* named by the entry: the temporary is gone */
			return hu_error_set(e, e->err, name, "cannot make its "
					    "new whiteout (%s)", e->msg);
		}
	}
	if (hu_wr_utimensat(dirfd, tmp, ts, AT_SYMLINK_NOFOLLOW) == 0 &&
	    hu_wr_renameat2(dirfd, tmp, dirfd, name, flags) == 0)
		return 0;
	err = errno;
	(void)hu_wr_unlinkat(dirfd, tmp, 0);
	return hu_error_set(e, err, name, "cannot put the new whiteout in "
			    "place");
}

int hu_marker_set_opaque(const struct hu_layer *l, enum hu_format f,
			 int dirfd, const char *name, bool opaque,
			 struct hu_error *e)
{
	char attr[64];
	int fd;

	if (f == HU_FMT_OCI) {
		int dfd = hu_open_dir_at(dirfd, name);
		int rc = 0;

		if (dfd < 0)
			return hu_error_set(e, errno, name,
					    "cannot open directory");
		if (opaque) {
			fd = hu_wr_create(dfd, HU_OCI_OPAQUE, 0644);
			if (fd < 0 && errno != EEXIST)
				rc = hu_error_setat(e, errno, name,
						    HU_OCI_OPAQUE,
						    "cannot create");
			if (fd >= 0)
				close(fd);
		} else if (hu_wr_unlinkat(dfd, HU_OCI_OPAQUE, 0) < 0 &&
			   errno != ENOENT) {
			rc = hu_error_setat(e, errno, name, HU_OCI_OPAQUE,
					    "cannot remove");
		}
		close(dfd);
		return rc;
	}
	if (f != HU_FMT_UNION && f != HU_FMT_OVERLAY)
		return hu_error_set(e, EINVAL, name, "no opaque format given");
	hu_marker_xattr(f, l->userxattr, "opaque", attr, sizeof(attr));
	if (opaque) {
		if (hu_wr_setxattr_at(dirfd, name, attr, "y", 1, 0) < 0)
			return hu_error_set(e, errno, name, "cannot set %s",
					    attr);
	} else if (hu_wr_removexattr_at(dirfd, name, attr) < 0 &&
		   errno != ENODATA) {
		return hu_error_set(e, errno, name, "cannot remove %s", attr);
	}
	return 0;
}
