/* SPDX-License-Identifier: MIT */
/*
 * fsck: the markers of every format (hunion-layers(7)) in the layer
 * checked.  Lookalikes (a union whiteout without its xattr, marker xattrs
 * where they mean nothing or with values the readers do not take),
 * whiteouts and opaque marks that do nothing or that the kernel lists
 * as entries, markers of another format than the layer's, and what
 * interrupted hunion runs leave in a layer.
 *
 * A repair makes the new state whole before the old one goes (a new
 * whiteout under a temporary name, renamed over the old one), so a
 * failed or faulted one leaves the entry as it was; a repair that adds
 * or removes an entry gives its directory back the times it had, since
 * the topmost layer's directory is what the view shows.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "fsck.h"

#define LOCK_SUFFIX ".hunion-lock"
#define TEMP_SUFFIX_LEN (sizeof(".hunion-XXXXXX") - 1)

/* ---- small helpers ------------------------------------------------------ */

/* The times @d had when the walk read it: entries come and go, the
 * directory the view shows stays as it was. */
static int restore_times(const struct fsck_dir *d)
{
	struct timespec ts[2] = { d->wd->st.st_atim, d->wd->st.st_mtim };

	return hu_wr_futimens(d->wd->fd, ts);
}

/* Report the outcome of a repair: @rc 0 done; else failed with @why, and
 * the directory's times back where the failure left them changed. */
static int done(struct fsck_run *r, const struct fsck_dir *d, int rc,
		struct hu_error *why, struct hu_error *e)
{
	if (rc == 0 && restore_times(d) < 0)
		rc = hu_error_setat(why, errno, d->wd->path, "",
				    "cannot restore the directory's times");
	return fsck_done(r, rc, why, e);
}

static int fail(struct hu_error *why, const struct fsck_dir *d,
		const char *name, const char *what)
{
	return hu_error_setat(why, errno, d->wd->path, name, "%s", what);
}

/* Report @id at @name of @d; 1 when to repair now, 0 not, -1 stop. */
static int found(struct fsck_run *r, const struct fsck_dir *d,
		 enum hu_problem_id id, const char *name, const char *detail,
		 struct hu_error *e)
{
	return fsck_found(r, id, d->wd->path, name, detail, e);
}

/* Are the layers beneath known?  Checked alone, without --all-layers, a
 * layer's whiteouts may be meant for layers not given: no whiteout or
 * opaque mark is then said to hide nothing. */
static bool beneath_known(const struct fsck_run *r)
{
	return fsck_below(r)->n > 0 || fsck_opts(r)->all_layers;
}

static bool has_xattr(const char *list, ssize_t len, const char *attr)
{
	for (const char *a = list; a && a < list + len; a += strlen(a) + 1)
		if (strcmp(a, attr) == 0)
			return true;
	return false;
}

/* ---- what one entry is ---------------------------------------------------- */

struct look {
	struct stat st;
	char *xattrs;		/* names, back to back */
	ssize_t xlen;
	bool wh_target;		/* a symlink to (union-whiteout) */
	bool union_wh;		/* ... with union.whiteout "y" */
	bool dev00;		/* a character device 0/0 */
};

static int look_at(const struct hu_layer *l, const struct fsck_dir *d,
		   const char *name, struct look *k, struct hu_error *e)
{
	char target[sizeof(HU_UNION_WHITEOUT_TARGET) + 1], attr[64], v[2];
	ssize_t n;

	memset(k, 0, sizeof(*k));
	if (fstatat(d->wd->fd, name, &k->st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 1 :	/* repaired away */
			wh_fail(e, errno, l->path, d->wd->path, name,
				"cannot stat");
	if (hu_llistxattr_at(d->wd->fd, name, &k->xattrs, &k->xlen) < 0)
		return wh_fail(e, errno, l->path, d->wd->path, name,
			       "cannot list xattrs");
	k->dev00 = S_ISCHR(k->st.st_mode) && k->st.st_rdev == makedev(0, 0);
	if (!S_ISLNK(k->st.st_mode) ||
	    k->st.st_size != (off_t)strlen(HU_UNION_WHITEOUT_TARGET))
		return 0;
	n = readlinkat(d->wd->fd, name, target, sizeof(target));
	if (n < 0)
		return wh_fail(e, errno, l->path, d->wd->path, name,
			       "cannot read symlink");
	k->wh_target = (size_t)n == strlen(HU_UNION_WHITEOUT_TARGET) &&
		       !memcmp(target, HU_UNION_WHITEOUT_TARGET, n);
	if (!k->wh_target)
		return 0;
	hu_marker_xattr(HU_FMT_UNION, l->userxattr, "whiteout", attr,
			sizeof(attr));
	k->union_wh = hu_lgetxattr_at(d->wd->fd, name, attr, v, 1) == 1 &&
		      v[0] == 'y';
	return 0;
}

/* ---- leftovers of interrupted runs --------------------------------------- */

/* The output NAME of ".NAME.hunion-lock" or ".NAME.hunion-XXXXXX"
 * (malloc'd), *@lock telling which; NULL for other names. */
static char *leftover_base(const char *name, bool *lock)
{
	size_t len = strlen(name), ll = strlen(LOCK_SUFFIX);
	char *base;

	if (name[0] != '.')
		return NULL;
	*lock = len > ll + 1 && !strcmp(name + len - ll, LOCK_SUFFIX);
	if (*lock)
		base = strndup(name + 1, len - ll - 1);
	else if (len > TEMP_SUFFIX_LEN + 1)
		base = strndup(name + 1, len - TEMP_SUFFIX_LEN - 1);
	else
		return NULL;
	if (base && (!*base || (!*lock && !hu_is_temp_of(name, base)))) {
		free(base);
		return NULL;
	}
	return base;
}

/*
 * Is output @base of @dirfd being written by a live run?  Such a run
 * holds flock(2) on ".BASE.hunion-lock" from before it makes a temporary
 * until the temporary is gone (outlock.c); a dead run's lock is free.
 * 1 held (or no locks here to tell), 0 free with *@lockfd our hold on
 * the lock file (-1 when there is none), -1 with errno on error.
 */
static int lock_held(int dirfd, const char *base, int *lockfd)
{
	char *name;
	struct stat st;
	int fd;

	*lockfd = -1;
	if (asprintf(&name, ".%s" LOCK_SUFFIX, base) < 0)
		return errno = ENOMEM, -1;
	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
		    O_CLOEXEC);
	free(name);
	if (fd < 0)
		return errno == ENOENT ? 0 : errno == ELOOP ? 1 : -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return 1;
	}
	*lockfd = fd;
	return 0;
}

static int remove_entry(const struct fsck_dir *d, const char *name,
			struct hu_error *why)
{
	if (hu_rmtree(d->wd->fd, name) < 0)
		return fail(why, d, name, "cannot remove");
	return 0;
}

/* ".NAME.hunion-XXXXXX" and ".NAME.hunion-lock" no live run holds, and
 * a conversion's ".hunion-wh.*" outside a half-converted layer.
 * 1 when @ent is one (reported), 0 when not. */
static int check_leftover(struct fsck_run *r, const struct fsck_dir *d,
			  const struct wh_ent *ent, struct hu_error *e)
{
	const char *name = ent->name;
	struct hu_error why = { 0 };
	int lockfd = -1, rc;
	bool lock = false;
	char *base = NULL;

	if (strncmp(name, HU_CONV_TEMP_PREFIX,
		    strlen(HU_CONV_TEMP_PREFIX)) != 0) {
		base = leftover_base(name, &lock);
		if (!base)
			return 0;
		rc = lock_held(d->wd->fd, base, &lockfd);
		free(base);
		if (rc < 0)
			return wh_fail(e, errno, fsck_layer(r)->path,
				       d->wd->path, name, "cannot read the "
				       "lock of its output");
		if (rc > 0)
			return 1;	/* a live run's: not ours to judge */
		/* a lock file that went meanwhile is none */
		if (lock && (lockfd < 0 ||
			     !hu_fd_is_at(d->wd->fd, name, lockfd))) {
			if (lockfd >= 0)
				close(lockfd);
			return 1;
		}
	}
	rc = found(r, d, HU_PB_HUNION_LEFTOVER, name, NULL, e);
	if (rc == 1) {
		/* Holding the lock: no run starts on this output meanwhile;
		 * a lock file goes while it is the one held (outlock.c). */
		rc = done(r, d, remove_entry(d, name, &why), &why, e);
	}
	if (lockfd >= 0)
		close(lockfd);
	return rc < 0 ? -1 : 1;
}

/* ---- a half-converted layer -------------------------------------------- */

static int check_converting(struct fsck_run *r, const struct fsck_dir *d,
			    struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	struct hu_convert_opts o = { .to = l->conv_to,
				     .to_userxattr = l->conv_to_userxattr,
				     .dry_run = hu_wr_dry_run(),
				     .report = fsck_opts(r)->report };
	struct hu_convert_stats st;
	struct hu_error why = { 0 };
	char detail[64];
	int rc;

	snprintf(detail, sizeof(detail), "%s>%s%s", hu_format_name(l->format),
		 hu_format_name(l->conv_to), l->conv_to_userxattr &&
		 l->conv_to != HU_FMT_OCI ? " (user.*)" : "");
	rc = found(r, d, HU_PB_CONVERT_UNFINISHED, NULL, detail, e);
	if (rc != 1)
		return rc;
	/* Each step of a conversion in place keeps the view as it is, and a
	 * run over a half-converted layer finishes it (convert_inplace.c). */
	rc = hu_wh_convert(l, NULL, &o, &st, &why);
	return fsck_done(r, rc, &why, e);
}

/* ---- markers of another format ------------------------------------------ */

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
	int tries = 0;

	if (fstatat(d->wd->fd, times_of, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return fail(why, d, times_of, "cannot stat");
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
			return fail(why, d, tmp, "cannot set times");
		if (!flags && hu_wr_unlinkat(d->wd->fd, name, 0) < 0)
			return fail(why, d, name, "cannot remove");
		return 0;
	}
	if (!temp_seed)
		temp_seed = (unsigned)getpid() ^ (unsigned)time(NULL);
	for (;;) {
		temp_seed = temp_seed * 1103515245u + 12345u;
		snprintf(tmp, sizeof(tmp), HU_CONV_TEMP_PREFIX "%06x",
			 temp_seed & 0xffffff);
		if (hu_marker_add_whiteout(l, l->format, d->wd->fd, tmp,
					   why) == 0)
			break;
		if (why->err != EEXIST || ++tries == 100)
			return wh_prefix(why, "", d->wd->path);
	}
	if (hu_wr_utimensat(d->wd->fd, tmp, ts, AT_SYMLINK_NOFOLLOW) < 0 ||
	    hu_wr_renameat2(d->wd->fd, tmp, d->wd->fd, name, flags) < 0) {
		int err = errno;

		(void)hu_wr_unlinkat(d->wd->fd, tmp, 0);
		return hu_error_setat(why, err, d->wd->path, name,
				      "cannot put the new whiteout in place");
	}
	return 0;
}

/* Is xattr @a a marker of another format than @l's?  The record of a
 * conversion (union.converting*) is every format's. */
static bool foreign_xattr(const struct hu_layer *l, const char *a)
{
	const char *rest = !strncmp(a, "user.", 5) ? a + 5 :
		!strncmp(a, "trusted.", 8) ? a + 8 : NULL;

	if (!rest)
		return false;
	if (!strncmp(rest, "overlay.", 8))
		return l->format == HU_FMT_UNION || l->format == HU_FMT_OCI;
	if (!strncmp(rest, "union.", 6))
		return strncmp(rest, "union.converting", 16) != 0 &&
		       (l->format == HU_FMT_OVERLAY ||
			l->format == HU_FMT_OCI);
	return false;
}

/* Is @k a whiteout of another format than @l's: a device 0/0, a union
 * whiteout symlink, an overlay xattr whiteout (an empty file with
 * overlay.whiteout)? */
static bool foreign_whiteout(const struct hu_layer *l, const struct look *k)
{
	bool xwh = false;

	if (S_ISREG(k->st.st_mode) && k->st.st_size == 0 &&
	    l->format != HU_FMT_OVERLAY)
		xwh = has_xattr(k->xattrs, k->xlen, "trusted.overlay.whiteout") ||
		      has_xattr(k->xattrs, k->xlen, "user.overlay.whiteout");
	if (k->dev00)
		return l->format != HU_FMT_OVERLAY;
	if (k->wh_target && l->format != HU_FMT_UNION) {
		/* the union whiteout xattr in either namespace */
		return has_xattr(k->xattrs, k->xlen, "trusted.union.whiteout") ||
		       has_xattr(k->xattrs, k->xlen, "user.union.whiteout");
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
			return fail(why, d, hidden, "cannot stat");
		} else if (put_whiteout(l, d, hidden, name, RENAME_NOREPLACE,
					why) < 0) {
			return -1;
		}
	}
	return remove_entry(d, name, why);
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
	int fd;

	if (dir && !strcmp(what, "opaque") &&
	    hu_lgetxattr_at(d->wd->fd, name, a, v, 1) == 1 && v[0] == 'y') {
		if (!name)
			fd = d->wd->fd;
		else if ((fd = hu_open_dir_at(d->wd->fd, name)) < 0)
			return fail(why, d, name, "cannot open directory");
		if (wh_opaque_fd(l, fd, true, why) < 0) {
			if (name)
				close(fd);
			return wh_prefix(why, "", d->wd->path);
		}
		if (name)
			close(fd);
	}
	if (hu_wr_removexattr_at(d->wd->fd, name, a) < 0 && errno != ENODATA)
		return hu_error_setat(why, errno, d->wd->path, name ? name : "",
				      "cannot remove %s", a);
	return 0;
}

/* Markers of another format on @name (NULL: @d itself): the entry, then
 * each xattr.  1 when the entry itself was one (reported). */
static int check_foreign(struct fsck_run *r, const struct fsck_dir *d,
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

		rc = found(r, d, HU_PB_FORMAT_MIXED, name, detail, e);
		if (rc != 1)
			return rc < 0 ? -1 : 1;
		if (hu_oci_is_marker(name) && !foreign_whiteout(l, k))
			rc = rewrite_oci_name(l, d, name, &why);
		else
			rc = put_whiteout(l, d, name, name, 0, &why);
		return done(r, d, rc, &why, e) < 0 ? -1 : 1;
	}
	for (const char *a = k->xattrs; a && a < k->xattrs + k->xlen;
	     a += strlen(a) + 1) {
		if (!foreign_xattr(l, a))
			continue;
		rc = found(r, d, HU_PB_FORMAT_MIXED, name, a, e);
		if (rc == 1)
			rc = done(r, d, rewrite_xattr(l, d, name, k, a, &why),
				  &why, e);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* ---- lookalikes of the layer's own format ------------------------------- */

/* Union whiteouts: the symlink and its xattr belong together, valued
 * "y" (marker.c reads one byte: anything else is no whiteout). */
static int check_union_whiteout(struct fsck_run *r, const struct fsck_dir *d,
				const char *name, const struct look *k,
				struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	struct hu_error why = { 0 };
	enum hu_problem_id id;
	char attr[64], *v = NULL;
	ssize_t len;
	int rc;

	if (l->format != HU_FMT_UNION || k->union_wh)
		return 0;
	hu_marker_xattr(HU_FMT_UNION, l->userxattr, "whiteout", attr,
			sizeof(attr));
	if (!has_xattr(k->xattrs, k->xlen, attr) && !k->wh_target)
		return 0;
	if (wh_xattr_read(d->wd->fd, name, attr, &v, &len) < 0)
		return wh_fail(e, errno, l->path, d->wd->path, name,
			       "cannot read %s", attr);
	id = !k->wh_target ? HU_PB_WHITEOUT_MARK_MISPLACED :
		v ? HU_PB_WHITEOUT_MARK_VALUE : HU_PB_WHITEOUT_UNMARKED;
	rc = found(r, d, id, name, id == HU_PB_WHITEOUT_MARK_VALUE ? v : NULL,
		   e);
	free(v);
	if (rc != 1)
		return rc < 0 ? -1 : 1;
	/* One syscall each: the entry is what it was, or repaired. */
	if (id == HU_PB_WHITEOUT_MARK_MISPLACED)
		rc = hu_wr_removexattr_at(d->wd->fd, name, attr);
	else
		rc = hu_wr_setxattr_at(d->wd->fd, name, attr, "y", 1, 0);
	if (rc < 0)
		fail(&why, d, name, id == HU_PB_WHITEOUT_MARK_MISPLACED ?
		     "cannot remove the whiteout xattr" :
		     "cannot set the whiteout xattr");
	return fsck_done(r, rc, &why, e) < 0 ? -1 : 1;
}

/* The layer's own opaque xattr on what is no directory: the kernel
 * reads it on directories only. */
static int check_opaque_misplaced(struct fsck_run *r, const struct fsck_dir *d,
				  const char *name, const struct look *k,
				  struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	struct hu_error why = { 0 };
	char attr[64];
	int rc;

	if (S_ISDIR(k->st.st_mode) ||
	    (l->format != HU_FMT_UNION && l->format != HU_FMT_OVERLAY))
		return 0;
	hu_marker_xattr(l->format, l->userxattr, "opaque", attr, sizeof(attr));
	if (!has_xattr(k->xattrs, k->xlen, attr))
		return 0;
	rc = found(r, d, HU_PB_OPAQUE_MARK_MISPLACED, name, NULL, e);
	if (rc != 1)
		return rc < 0 ? -1 : 1;
	rc = hu_wr_removexattr_at(d->wd->fd, name, attr);
	if (rc < 0)
		fail(&why, d, name, "cannot remove the opaque xattr");
	return fsck_done(r, rc, &why, e) < 0 ? -1 : 1;
}

/* ---- whiteouts against what lies beneath -------------------------------- */

static int check_whiteout_below(struct fsck_run *r, struct fsck_dir *d,
				const struct wh_ent *ent, struct hu_error *e)
{
	struct hu_error why = { 0 };
	struct hu_ventry below;
	enum hu_problem_id id;
	int rc;

	if (ent->kind != HU_MARK_WHITEOUT || ent->xwhiteout ||
	    !beneath_known(r))
		return 0;
	if (d->merges) {
		rc = hu_vdir_lookup(d->below, ent->key, &below, e);
		if (rc != 0)
			return rc < 0 ? -1 : 0;
		id = HU_PB_WHITEOUT_ORPHAN;
	} else {
		/* overlayfs lists a whiteout of a directory it does not
		 * merge as an entry that cannot be looked up */
		id = HU_PB_WHITEOUT_UNMERGED_DIR;
	}
	rc = found(r, d, id, ent->key, NULL, e);
	if (rc != 1)
		return rc;
	/* It hides nothing: the view is the same without it. */
	if (hu_wr_unlinkat(d->wd->fd, ent->name, 0) < 0)
		return done(r, d, fail(&why, d, ent->name, "cannot remove"),
			    &why, e);
	return done(r, d, 0, &why, e);
}

static int check_oci_invalid(struct fsck_run *r, const struct fsck_dir *d,
			     const struct wh_ent *ent, struct hu_error *e)
{
	const char *hidden = hu_oci_hidden(ent->name);
	struct hu_error why = { 0 };
	int rc;

	if (fsck_layer(r)->format != HU_FMT_OCI || !hidden ||
	    !hu_oci_hides_nothing(hidden))
		return 0;
	rc = found(r, d, HU_PB_OCI_WHITEOUT_INVALID, ent->name, NULL, e);
	if (rc == 1)
		rc = done(r, d, remove_entry(d, ent->name, &why), &why, e);
	return rc < 0 ? -1 : 1;
}

/* ---- the checks ---------------------------------------------------------- */

int fsck_marker_entry(struct fsck_run *r, struct fsck_dir *d,
		      const struct wh_ent *ent, struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	struct look k;
	int rc;

	/* A half-converted layer is finished first (fsck_marker_dir): its
	 * markers are then in one format, checked by the next run. */
	if (hu_layer_half(l))
		return 0;
	rc = check_leftover(r, d, ent, e);
	if (rc != 0)
		return rc;
	rc = check_oci_invalid(r, d, ent, e);
	if (rc != 0)
		return rc < 0 ? -1 : 0;
	if (l->format == HU_FMT_NONE)
		return 0;
	rc = look_at(l, d, ent->name, &k, e);
	if (rc == 0)
		rc = check_foreign(r, d, ent->name, &k, e);
	if (rc == 0)
		rc = check_union_whiteout(r, d, ent->name, &k, e);
	if (rc == 0)
		rc = check_opaque_misplaced(r, d, ent->name, &k, e);
	if (rc == 0)
		rc = check_whiteout_below(r, d, ent, e);
	free(k.xattrs);
	return rc < 0 ? -1 : 0;
}

/* The layer's opaque xattr with a value the readers do not take: not
 * opaque, so it goes (union; the overlay one is fsck_overlay.c's). */
static int check_opaque_value(struct fsck_run *r, struct fsck_dir *d,
			      struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	struct hu_error why = { 0 };
	char attr[64], *v;
	ssize_t len;
	int rc;

	if (l->format != HU_FMT_UNION)
		return 0;
	hu_marker_xattr(HU_FMT_UNION, l->userxattr, "opaque", attr,
			sizeof(attr));
	if (wh_xattr_read(d->wd->fd, NULL, attr, &v, &len) < 0)
		return wh_fail(e, errno, l->path, d->wd->path, "",
			       "cannot read %s", attr);
	if (!v || (len == 1 && v[0] == 'y')) {
		free(v);
		return 0;
	}
	rc = found(r, d, HU_PB_OPAQUE_MARK_VALUE, NULL, v, e);
	free(v);
	if (rc != 1)
		return rc;
	rc = hu_wr_removexattr_at(d->wd->fd, NULL, attr);
	if (rc < 0)
		fail(&why, d, "", "cannot remove the opaque xattr");
	return fsck_done(r, rc, &why, e);
}

/* An opaque directory over no directory, or over an empty one. */
static int check_opaque_redundant(struct fsck_run *r, struct fsck_dir *d,
				  struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	const struct hu_ventry *ents;
	struct hu_error why = { 0 };
	size_t n = 0;
	int rc;

	if (d->wd->opaque != HU_OPAQUE_YES || !beneath_known(r))
		return 0;
	if (d->below && hu_vdir_list(d->below, &ents, &n, e) < 0)
		return -1;
	if (n > 0)
		return 0;
	rc = found(r, d, HU_PB_OPAQUE_REDUNDANT, NULL, NULL, e);
	if (rc != 1)
		return rc;
	rc = wh_opaque_fd(l, d->wd->fd, false, &why);
	if (rc < 0)
		wh_prefix(&why, "", d->wd->path);
	return done(r, d, rc, &why, e);
}

int fsck_marker_dir(struct fsck_run *r, struct fsck_dir *d,
		    struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	struct look k;
	int rc;

	if (hu_layer_half(l))
		return *d->wd->path ? 0 : check_converting(r, d, e);
	if (l->format == HU_FMT_NONE)
		return 0;
	rc = check_opaque_value(r, d, e);
	if (rc == 0)
		rc = check_opaque_redundant(r, d, e);
	if (rc < 0 || *d->wd->path)
		return rc < 0 ? -1 : 0;
	/* The root's own xattrs; every other directory's are checked as an
	 * entry of its parent. */
	memset(&k, 0, sizeof(k));
	if (fstat(d->wd->fd, &k.st) < 0 ||
	    hu_llistxattr_at(d->wd->fd, NULL, &k.xattrs, &k.xlen) < 0)
		return wh_fail(e, errno, l->path, "", "", "cannot read xattrs");
	rc = check_foreign(r, d, NULL, &k, e);
	free(k.xattrs);
	return rc < 0 ? -1 : 0;
}
