/* SPDX-License-Identifier: MIT */
/*
 * fsck: markers of another format than the layer's (formatMixed).  Each
 * is rewritten as the marker of the layer's format it stands for, made
 * whole under a temporary name before the old one goes, so that a failed
 * or killed repair leaves the entry as it was (or a temporary the next
 * run removes as a leftover).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "fsck/fsck_marker.h"

static unsigned int temp_seed;

/*
 * A whiteout of @l's format for @name in @d, taking the times of entry
 * @times_of: made whole under a temporary name and renamed over @name
 * (@flags 0: the name is never unhidden meanwhile) or into place
 * (RENAME_NOREPLACE).  For OCI, .wh.@name beside it, and with @flags 0
 * @name then goes.
 */
static int put_whiteout(const struct hu_layer *l, const struct fsck_dir *d,
			const char *name, const char *times_of,
			unsigned int flags, struct hu_error *why)
{
	char tmp[NAME_MAX + 1];
	struct timespec ts[2];
	struct stat st;

	if (fstatat(d->wd->fd, times_of, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return fm_fail(why, d, times_of, "cannot stat");
	ts[0] = st.st_atim;
	ts[1] = st.st_mtim;
	if (l->format == HU_FMT_OCI) {
		if (!hu_oci_whiteout_name(tmp, sizeof(tmp), name))
			return hu_error_setat(why, ENAMETOOLONG, d->wd->path,
					      name, "name too long for an OCI "
					      "whiteout");
		if (fstatat(d->wd->fd, tmp, &st, AT_SYMLINK_NOFOLLOW) < 0 &&
		    hu_marker_add_whiteout(l, HU_FMT_OCI, d->wd->fd, name,
					   why) < 0)
			return wh_prefix(why, "", d->wd->path);
		if (hu_wr_utimensat(d->wd->fd, tmp, ts, AT_SYMLINK_NOFOLLOW) < 0)
			return fm_fail(why, d, tmp, "cannot set times");
		if (!flags && hu_wr_unlinkat(d->wd->fd, name, 0) < 0)
			return fm_fail(why, d, name, "cannot remove");
		return 0;
	}
	if (!temp_seed)
		temp_seed = (unsigned)getpid() ^ (unsigned)time(NULL);
	if (hu_marker_put_whiteout(l, l->format, d->wd->fd, name, ts, flags,
				   &temp_seed, why) < 0)
		return wh_prefix(why, "", d->wd->path);
	return 0;
}

/* Is xattr @a a marker of another format than @l's?  hunion's records
 * (a conversion's, a merge --into's, kept on an upper of any format, and
 * the format fsck keeps: hu_xattr_is_record()) are every format's. */
static bool foreign_xattr(const struct hu_layer *l, const char *a)
{
	const char *rest = !strncmp(a, "user.", 5) ? a + 5 :
		!strncmp(a, "trusted.", 8) ? a + 8 : NULL;

	if (!rest)
		return false;
	if (!strncmp(rest, "overlay.", 8))
		return l->format == HU_FMT_UNION || l->format == HU_FMT_OCI;
	if (!strncmp(rest, "union.", 6))
		return !hu_xattr_is_record(rest) &&
		       (l->format == HU_FMT_OVERLAY ||
			l->format == HU_FMT_OCI);
	return false;
}

static bool listed(const struct look *k, const char *attr)
{
	return fsck_xattr_listed(k->xattrs, k->xlen, attr);
}

/* Is @k a whiteout of another format than @l's: a device 0/0, a union
 * whiteout symlink, an overlay xattr whiteout (an empty file with
 * overlay.whiteout)? */
static bool foreign_whiteout(const struct hu_layer *l, const struct look *k)
{
	bool xwh = false;

	if (S_ISREG(k->st.st_mode) && k->st.st_size == 0 &&
	    l->format != HU_FMT_OVERLAY)
		xwh = listed(k, "trusted.overlay.whiteout") ||
		      listed(k, "user.overlay.whiteout");
	if (k->dev00)
		return l->format != HU_FMT_OVERLAY;
	if (k->wh_target && l->format != HU_FMT_UNION) {
		/* the union whiteout xattr in either namespace */
		return listed(k, "trusted.union.whiteout") ||
		       listed(k, "user.union.whiteout");
	}
	return xwh;
}

/* An OCI marker name in a union or overlay layer, rewritten: .wh.NAME as
 * a whiteout of NAME (or NAME, a directory of this layer, made opaque;
 * or nothing, when NAME is a file of this layer, which hides what lies
 * beneath already), .wh..wh..opq as the directory's opaque mark, other
 * .wh..wh.* (AUFS metadata) removed. */
static int rewrite_oci_name(const struct hu_layer *l, const struct fsck_dir *d,
			    const char *name, struct hu_error *why)
{
	enum hu_marker kind = hu_oci_name_kind(name, strlen(name));
	const char *hidden = hu_oci_hidden(name);
	struct stat st;

	if (kind == HU_MARK_OPAQUE_FILE) {
		if (wh_opaque_fd(l, d->wd->fd, true, why) < 0)
			return wh_prefix(why, "", d->wd->path);
	} else if (kind == HU_MARK_WHITEOUT && !hu_oci_hides_nothing(hidden)) {
		if (fstatat(d->wd->fd, hidden, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			if (S_ISDIR(st.st_mode) &&
			    hu_marker_set_opaque(l, l->format, d->wd->fd,
						 hidden, true, why) < 0)
				return wh_prefix(why, "", d->wd->path);
		} else if (errno != ENOENT) {
			return fm_fail(why, d, hidden, "cannot stat");
		} else if (put_whiteout(l, d, hidden, name, RENAME_NOREPLACE,
					why) < 0) {
			return -1;
		}
	}
	return fm_remove_entry(d, name, why);
}

/* Make directory @fd opaque in @l's format.  An OCI .wh..wh..opq takes
 * the directory's times, and the directory keeps them. */
static int opaque_on(const struct hu_layer *l, int fd, struct hu_error *why)
{
	struct timespec ts[2];
	struct stat st;

	if (fstat(fd, &st) < 0)
		return hu_error_set(why, errno, NULL, "cannot stat");
	if (wh_opaque_fd(l, fd, true, why) < 0)
		return -1;
	if (l->format != HU_FMT_OCI)
		return 0;
	ts[0] = st.st_atim;
	ts[1] = st.st_mtim;
	if (hu_wr_utimensat(fd, HU_OCI_OPAQUE, ts, AT_SYMLINK_NOFOLLOW) < 0 ||
	    hu_wr_futimens(fd, ts) < 0)
		return hu_error_set(why, errno, HU_OCI_OPAQUE,
				    "cannot set times");
	return 0;
}

/* Foreign xattr @a of @name (NULL: @d itself): an opaque mark becomes
 * @l's, the rest (which @l's format cannot say) goes. */
static int rewrite_xattr(const struct hu_layer *l, const struct fsck_dir *d,
			 const char *name, const struct look *k,
			 const char *a, struct hu_error *why)
{
	const char *what = strrchr(a, '.') + 1;
	bool dir = S_ISDIR(k->st.st_mode);
	char v[2];
	int fd, rc;

	if (dir && !strcmp(what, "opaque") &&
	    hu_lgetxattr_at(d->wd->fd, name, a, v, 1) == 1 && v[0] == 'y') {
		if (!name)
			fd = d->wd->fd;
		else if ((fd = hu_open_dir_at(d->wd->fd, name)) < 0)
			return fm_fail(why, d, name, "cannot open directory");
		rc = opaque_on(l, fd, why);
		if (name)
			close(fd);
		if (rc < 0) {
			hu_error_prefix(why, name);
			return wh_prefix(why, "", d->wd->path);
		}
	}
	if (hu_wr_removexattr_at(d->wd->fd, name, a) < 0 && errno != ENODATA)
		return hu_error_setat(why, errno, d->wd->path, name ? name : "",
				      "cannot remove %s", a);
	return 0;
}

/* Markers of another format on @name (NULL: @d itself): the entry, then
 * each xattr.  1 when the entry itself was one (reported). */
int fm_check_foreign(struct fsck_run *r, const struct fsck_dir *d,
			 const char *name, const struct look *k,
			 struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	struct hu_error why = { 0 };
	int rc;

	/* An OCI marker is an empty file: a .wh.* name with bytes in it
	 * is a file like any other in this layer's format. */
	if (name && (foreign_whiteout(l, k) ||
		     (l->format != HU_FMT_OCI && hu_oci_is_marker(name) &&
		      S_ISREG(k->st.st_mode) && k->st.st_size == 0))) {
		const char *detail = k->dev00 ? "character device 0/0" :
			k->wh_target ? "union whiteout" :
			hu_oci_is_marker(name) ? "OCI marker" :
			"overlay xattr whiteout";

		rc = fm_found(r, d, HU_PB_FORMAT_MIXED, name, detail, e);
		if (rc != 1)
			return rc < 0 ? -1 : 1;
		rc = fm_keep(r, d, &why);
		if (rc == 0 && hu_oci_is_marker(name) &&
		    !foreign_whiteout(l, k))
			rc = rewrite_oci_name(l, d, name, &why);
		else if (rc == 0)
			rc = put_whiteout(l, d, name, name, 0, &why);
		return fm_done(r, d, rc, &why, e) < 0 ? -1 : 1;
	}
	for (const char *a = k->xattrs; a && a < k->xattrs + k->xlen;
	     a += strlen(a) + 1) {
		if (!foreign_xattr(l, a))
			continue;
		rc = fm_found(r, d, HU_PB_FORMAT_MIXED, name, a, e);
		if (rc == 1) {
			rc = fm_keep(r, d, &why);
			if (rc == 0)
				rc = rewrite_xattr(l, d, name, k, a, &why);
			rc = fm_done(r, d, rc, &why, e);
		}
		if (rc < 0)
			return -1;
	}
	return 0;
}

