/* SPDX-License-Identifier: MIT */
/*
 * Format detection: one light walk of a layer (directory listings, the
 * xattr names of directories and regular files, and a stat or readlink
 * only for entries whose type and xattrs could make them markers).  Files
 * are passed by once they can no longer change the outcome
 * (files_decided()).  Union
 * and overlay markers are unambiguous; a .wh. file is a marker only in a
 * layer that has neither, since in a union or overlay layer it is an
 * ordinary file.
 *
 * A layer holding both union and overlay markers is refused, naming the
 * first marker of the second format met.  With a problem sink that lets
 * the reader go on (hu_layer.problems: WARN, or COLLECT), the layer is
 * read in the format of most of its markers (a tie: overlay with a workdir
 * given, else the format of most private xattrs that are no markers, else
 * a guess, reported (formatTied): the format of the first marker met, in
 * the walk's bytewise depth-first order, each directory's xattrs before
 * its entries), and a second walk reports each
 * marker of the other format (formatMixed), so that fsck can open such a
 * layer and name every foreign marker.
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

struct detect {
	struct hu_layer *l;
	struct hu_pathbuf path;
	enum hu_format found;	/* NONE, UNION or OVERLAY */
	char *found_path;
	bool seen_user, seen_trusted, seen_oci;
	char *wh_path;		/* the first .wh. name met */
	bool mixed;		/* both formats met, with a sink */
	size_t count[HU_FMT_OCI + 1];	/* markers met, per format */
	/* private xattrs of a format that are no marker (overlay's origin,
	 * impure, uuid...; union.* but for the conversion record), which
	 * break a tie of the counts */
	size_t evidence[HU_FMT_OCI + 1];
	/* The second walk of a mixed layer: the format it is read in;
	 * every marker of another is reported.  NONE in the first walk. */
	enum hu_format keep;
	bool refs;		/* an overlay redirect or metacopy xattr met
				 * (hu_layer.refs ASK: files listed too) */
	bool file_private;	/* a private xattr on a regular file (ASK) */
	bool files_skipped;	/* regular files passed by (files_decided()) */
	bool files_all;		/* the walk again of a layer found mixed
				 * after files were passed by: read them all */
	bool odd_names;		/* a name hu_layer.names_plain is about */
	struct hu_error *e;
};

/* Count xattr @rest (its namespace left off) as evidence of its format,
 * unless it is a marker (@marker) or one of hunion's own records, which
 * every format's layers hold (hu_xattr_is_record()). */
static void note_evidence(struct detect *d, const char *rest, bool marker)
{
	if (marker || d->keep != HU_FMT_NONE)
		return;
	if (strncmp(rest, "overlay.", 8) == 0)
		d->evidence[HU_FMT_OVERLAY]++;
	else if (strncmp(rest, "union.", 6) == 0 && !hu_xattr_is_record(rest))
		d->evidence[HU_FMT_UNION]++;
}

/* Is xattr name @a an overlay redirect or metacopy of either namespace? */
static bool is_ref(const char *a)
{
	const char *rest = strncmp(a, "user.", 5) == 0 ? a + 5 :
		strncmp(a, "trusted.", 8) == 0 ? a + 8 : "";

	return !strcmp(rest, "overlay.redirect") ||
	       !strcmp(rest, "overlay.metacopy");
}

/* @ns: the namespace the marker showed (NS_NONE: a device whiteout, which
 * says nothing about where the xattrs live). */
enum { NS_NONE, NS_TRUSTED, NS_USER };

static int note(struct detect *d, enum hu_format f, int ns, const char *name);

/*
 * Regular file @name: an overlay marker when it carries a metacopy or
 * redirect xattr (an upper whose only markers are metacopy files is an
 * overlay layer, whose files the kernel reads from beneath) or is an xattr
 * whiteout (an empty file with overlay.whiteout, which the kernel's lookup
 * takes in any layer, so a layer holding nothing else is an overlay layer
 * too), in the layer's namespaces; one marker per file.  Its other private
 * xattrs are evidence for a tie (note_evidence()).  With hu_layer.refs ASK,
 * also whether it holds such an xattr in any namespace, or any private
 * one.  One listing of its xattrs; a stat only for a file whose one
 * marker xattr is overlay.whiteout.
 */
static int check_file_xattrs(struct detect *d, int dirfd, const char *name)
{
	char small[512], *list;
	int ns = NS_NONE, wh_ns = NS_NONE;
	struct stat st;
	ssize_t len;

	len = hu_xattr_names(dirfd, name, small, sizeof(small), &list);
	if (len < 0)
		return hu_error_setat(d->e, errno, d->path.s, name,
				      "cannot list xattrs");
	for (char *a = list; a < list + len; a += strlen(a) + 1) {
		bool user = strncmp(a, "user.", 5) == 0;
		const char *rest = a + (user ? 5 : 8);
		bool wh;

		if (d->l->refs == HU_REFS_ASK) {
			d->refs = d->refs || is_ref(a);
			d->file_private = d->file_private ||
					  hu_xattr_is_private(a);
		}
		if (!user && (d->l->userxattr ||
			      strncmp(a, "trusted.", 8) != 0))
			continue;
		wh = strcmp(rest, "overlay.whiteout") == 0;
		note_evidence(d, rest, is_ref(a) || wh);
		if (is_ref(a) && ns == NS_NONE)
			ns = user ? NS_USER : NS_TRUSTED;
		if (wh && (wh_ns == NS_NONE || !user))	/* trusted.* wins */
			wh_ns = user ? NS_USER : NS_TRUSTED;
	}
	if (list != small)
		free(list);
	if (ns == NS_NONE && wh_ns != NS_NONE) {
		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return hu_error_setat(d->e, errno, d->path.s, name,
					      "cannot stat");
		/* a file with data is no whiteout for anyone */
		if (S_ISREG(st.st_mode) && st.st_size == 0)
			ns = wh_ns;
	}
	return ns == NS_NONE ? 0 : note(d, HU_FMT_OVERLAY, ns, name);
}

/* The second walk of a mixed layer met marker @name of format @f, not
 * the one the layer is read in. */
static int foreign(struct detect *d, enum hu_format f, const char *name)
{
	char *here = hu_path_join(d->path.s, name), detail[160];
	int rc;

	if (!here)
		return hu_error_set(d->e, ENOMEM, NULL, "out of memory");
	snprintf(detail, sizeof(detail), "%s marker in a layer read as %s "
		 "(%zu %s markers, %zu %s)", hu_format_name(f),
		 hu_format_name(d->keep), d->count[d->keep],
		 hu_format_name(d->keep), d->count[f], hu_format_name(f));
	rc = hu_problem_found(d->l->problems, d->l->report,
			      HU_PB_FORMAT_MIXED, true, d->l->path, here,
			      detail, 0, d->e);
	free(here);
	return rc;
}

static int note(struct detect *d, enum hu_format f, int ns, const char *name)
{
	char *here;

	if (ns == NS_USER)
		d->seen_user = true;
	else if (ns == NS_TRUSTED)
		d->seen_trusted = true;
	if (d->keep != HU_FMT_NONE)
		return f == d->keep ? 0 : foreign(d, f, name);
	d->count[f]++;
	if (d->found == f)
		return 0;
	if (d->found != HU_FMT_NONE && d->l->problems) {
		d->mixed = true;	/* reported by the second walk */
		return 0;
	}
	here = hu_path_join(d->path.s, name);
	if (!here)
		return hu_error_set(d->e, ENOMEM, NULL, "out of memory");
	if (d->found == HU_FMT_NONE) {
		d->found = f;
		d->found_path = here;
		return 0;
	}
	hu_error_set(d->e, 0, here,
		     "%s marker in a layer whose first marker is %s (%s): "
		     "mixed formats; convert one with 'hunion whiteout "
		     "convert'", hu_format_name(f), hu_format_name(d->found),
		     *d->found_path ? d->found_path : ".");
	free(here);
	return -1;
}

/* Is the xattr value exactly one byte, @a or @b?  Returns that byte or 0. */
static char byte_value(int fd, const char *attr, char a, char b)
{
	char v;

	if (fgetxattr(fd, attr, &v, 1) == 1 && (v == a || v == b))
		return v;
	return 0;
}

/* A marker xattr of format @f on the directory: one marker per directory
 * and format, however many of its xattrs say so (a count, a report). */
static int note_dir(struct detect *d, enum hu_format f, bool user,
		    bool noted[])
{
	if (noted[f]) {
		if (user)
			d->seen_user = true;
		else
			d->seen_trusted = true;
		return 0;
	}
	noted[f] = true;
	return note(d, f, user ? NS_USER : NS_TRUSTED, "");
}

static int check_dir_xattrs(struct detect *d, int fd)
{
	bool noted[HU_FMT_OCI + 1] = { false };
	char small[1024], *list;
	ssize_t len = hu_xattr_names(fd, NULL, small, sizeof(small), &list);
	int rc = 0;

	if (len < 0)
		return hu_error_set(d->e, errno, d->path.s,
				    "cannot list xattrs");
	for (char *a = list; a < list + len && rc == 0; a += strlen(a) + 1) {
		bool user = strncmp(a, "user.", 5) == 0;
		const char *rest = user ? a + 5 :
			strncmp(a, "trusted.", 8) == 0 ? a + 8 : NULL;

		d->refs = d->refs || is_ref(a);
		if (!rest || (user != d->l->userxattr && d->l->userxattr))
			continue;
		if (strcmp(rest, "overlay.opaque") == 0) {
			if (byte_value(fd, a, 'y', 'x'))
				rc = note_dir(d, HU_FMT_OVERLAY, user, noted);
		} else if (strncmp(rest, "overlay.", 8) == 0 &&
			   strcmp(rest, "overlay.opaque") != 0) {
			/* redirect, and the kernel's bookkeeping (origin,
			 * impure, uuid...): an upper whose only markers are
			 * metacopy files still shows them on directories. */
			rc = note_dir(d, HU_FMT_OVERLAY, user, noted);
		} else if (strcmp(rest, "union.opaque") == 0 &&
			   byte_value(fd, a, 'y', 'y')) {
			rc = note_dir(d, HU_FMT_UNION, user, noted);
		} else {
			note_evidence(d, rest, false);
		}
	}
	if (list != small)
		free(list);
	return rc;
}

static int check_symlink(struct detect *d, int dirfd, const char *name)
{
	static const char *const attrs[] = {
		"trusted.union.whiteout", "user.union.whiteout" };
	char target[sizeof(HU_UNION_WHITEOUT_TARGET) + 1];
	ssize_t n = readlinkat(dirfd, name, target, sizeof(target));

	if (n != (ssize_t)strlen(HU_UNION_WHITEOUT_TARGET) ||
	    memcmp(target, HU_UNION_WHITEOUT_TARGET, n) != 0)
		return 0;
	for (int i = d->l->userxattr ? 1 : 0; i < 2; i++) {
		char v;

		if (hu_lgetxattr_at(dirfd, name, attrs[i], &v, 1) == 1 &&
		    v == 'y')
			return note(d, HU_FMT_UNION, i == 1 ? NS_USER : NS_TRUSTED, name);
	}
	return 0;
}

static int detect_dir(struct detect *d, int fd);

/*
 * May the walk pass regular files by, unread?  A file can only add an
 * overlay marker (metacopy, redirect, xattr whiteout), evidence for a tie,
 * and the namespace its xattrs are in.  Once an overlay marker is met and
 * the namespace is known, none of that changes the outcome, unless the
 * layer turns out mixed (counts decide then: hu_layer_detect() walks it
 * again, files and all) or the stack asks about redirects and private
 * xattrs on files (hu_layer.refs ASK).  On an overlay upper most entries
 * are files, so this saves a listing of xattrs for each.
 */
static bool files_decided(const struct detect *d)
{
	return !d->files_all && d->keep == HU_FMT_NONE && !d->mixed &&
	       d->found == HU_FMT_OVERLAY &&
	       (d->seen_trusted || d->l->userxattr) &&
	       d->l->refs != HU_REFS_ASK;
}

static int detect_entry(struct detect *d, int dirfd, const char *name,
			unsigned char type)
{
	struct stat st;
	size_t saved;
	int sub, rc;

	if (hu_oci_is_marker(name) || hu_conv_temp_prefixed(name))
		d->odd_names = true;
	if (type == DT_UNKNOWN) {
		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return hu_error_setat(d->e, errno, d->path.s, name,
					      "cannot stat");
		type = IFTODT(st.st_mode);
	}
	switch (type) {
	case DT_CHR:
		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return hu_error_setat(d->e, errno, d->path.s, name,
					      "cannot stat");
		if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0))
			return note(d, HU_FMT_OVERLAY, NS_NONE, name);
		return 0;
	case DT_LNK:
		return check_symlink(d, dirfd, name);
	case DT_DIR:
		sub = hu_open_dir_at(dirfd, name);
		if (sub < 0)
			return hu_error_setat(d->e, errno, d->path.s, name,
					      "cannot open directory");
		if (hu_pathbuf_push(&d->path, name, &saved) < 0) {
			close(sub);
			return hu_error_set(d->e, ENOMEM, NULL,
					    "out of memory");
		}
		rc = detect_dir(d, sub);
		hu_pathbuf_pop(&d->path, saved);
		close(sub);
		return rc;
	default:
		if (hu_oci_is_marker(name) && !d->seen_oci) {
			d->seen_oci = true;
			d->wh_path = hu_path_join(d->path.s, name);
			if (!d->wh_path)
				return hu_error_set(d->e, ENOMEM, NULL,
						    "out of memory");
		}
		if (type != DT_REG)
			return 0;
		if (files_decided(d)) {
			d->files_skipped = true;
			return 0;
		}
		return check_file_xattrs(d, dirfd, name);
	}
}

static int detect_dir(struct detect *d, int fd)
{
	struct hu_names names;
	int rc = 0;

	if (check_dir_xattrs(d, fd) < 0)
		return -1;
	/* Below the layer's root, each fd is one this walk just opened. */
	rc = hu_layer_names_read(d->l, fd, fd != d->l->fd, &names, d->path.s,
				 d->e);
	if (rc < 0)
		return -1;
	for (size_t i = 0; i < names.n && rc == 0; i++)
		rc = detect_entry(d, fd, names.v[i].name, names.v[i].type);
	hu_names_free(&names);
	return rc;
}

/* The format a mixed layer is read in: the one fsck read it in when it
 * began repairing it (@recorded, NONE for none: its repairs must not
 * flip it); else that of most of its markers; on a tie, overlay with a
 * workdir given, else that of most of its private xattrs that are no
 * markers; else a guess (hu_layer.format_tied): the format of the first
 * marker met. */
static enum hu_format majority(struct detect *d, enum hu_format recorded)
{
	enum hu_format u = HU_FMT_UNION, o = HU_FMT_OVERLAY;

	if (recorded != HU_FMT_NONE)
		return recorded;
	if (d->count[u] != d->count[o])
		return d->count[u] > d->count[o] ? u : o;
	if (d->l->workdir_given)
		return o;
	if (d->evidence[u] != d->evidence[o])
		return d->evidence[u] > d->evidence[o] ? u : o;
	d->l->format_tied = true;
	return d->found;
}

static int report_tie(struct detect *d)
{
	char detail[160];

	snprintf(detail, sizeof(detail), "%zu union and %zu overlay markers; "
		 "read as %s, the first met", d->count[HU_FMT_UNION],
		 d->count[HU_FMT_OVERLAY], hu_format_name(d->keep));
	return hu_problem_found(d->l->problems, d->l->report,
				HU_PB_FORMAT_TIED, false, d->l->path, "",
				detail, 0, d->e);
}

/* The walk that counts (no report: it may run in a thread of its own,
 * hu_layer_detect_walk()). */
static int detect_count(struct detect *d)
{
	struct hu_layer *l = d->l;
	size_t saved;
	int rc;

	if (hu_pathbuf_push(&d->path, "", &saved) < 0)
		return hu_error_set(d->e, ENOMEM, NULL, "out of memory");
	rc = detect_dir(d, l->fd);
	if (rc == 0 && d->mixed && d->files_skipped) {
		/* The counts of a mixed layer decide: count every file. */
		free(d->found_path);
		free(d->wh_path);
		*d = (struct detect){ .l = l, .path = d->path,
				      .found = HU_FMT_NONE,
				      .keep = HU_FMT_NONE, .files_all = true,
				      .e = d->e };
		rc = detect_dir(d, l->fd);
	}
	return rc;
}

/* ---- the format record -------------------------------------------------- */

/*
 * A repair that removes markers (fsck -p, -y) can remove the last ones
 * that showed the layer's format: the layer would then read as one with
 * no markers (or as OCI, by its .wh. names), a lookalike the run left for
 * -y would be a lookalike no more, and the next run would say clean.  So
 * fsck records the format on the layer root before its first repair, in
 * the namespace of the layer's markers: union.format, "union" or
 * "overlay".  Markers decide; the record speaks only for a layer where no
 * marker does, and for a mixed one (which fsck reads), before the counts
 * that its repairs could tip (majority()).  A private union.* xattr: never shown in a view, never
 * copied, and no marker nor evidence of any format (hu_xattr_is_record()).
 */
#define FORMAT_RECORD "union.format"

/* The record's xattr for @l: where its markers' xattrs are. */
static const char *record_attr(const struct hu_layer *l)
{
	return l->userxattr ? "user." FORMAT_RECORD : "trusted." FORMAT_RECORD;
}

/* The record of the layer: *@f the format it names, *@user whether it is
 * under user.*.  0 when there is none (trusted.* is not read with
 * --userxattr, and reads as absent without CAP_SYS_ADMIN), 1 found, -1
 * error. */
static int record_read(struct detect *d, enum hu_format *f, bool *user)
{
	static const char *const attrs[] = {
		"user." FORMAT_RECORD, "trusted." FORMAT_RECORD };
	int tries = d->l->userxattr ? 1 : 2;
	char v[16];

	for (int i = 0; i < tries; i++) {
		ssize_t n = fgetxattr(d->l->fd, attrs[i], v, sizeof(v) - 1);

		if (n < 0 && (errno == ENODATA || errno == ENOTSUP))
			continue;
		if (n < 0 && errno != ERANGE)
			return hu_error_set(d->e, errno, "", "cannot read %s",
					    attrs[i]);
		v[n < 0 ? 0 : n] = '\0';
		if (n < 0 || hu_format_parse(v, f) < 0 ||
		    (*f != HU_FMT_UNION && *f != HU_FMT_OVERLAY))
			return hu_error_set(d->e, 0, "", "unknown format '%s' "
					    "in %s on the layer root: remove "
					    "it (setfattr -x %s %s)", v,
					    attrs[i], attrs[i], d->l->path);
		*user = i == 0;
		return 1;
	}
	return 0;
}

int hu_layer_record_format(const struct hu_layer *l, struct hu_error *e)
{
	const char *attr = record_attr(l), *name = hu_format_name(l->format);
	char v[16];
	ssize_t n;

	if (l->format != HU_FMT_UNION && l->format != HU_FMT_OVERLAY)
		return 0;
	n = fgetxattr(l->fd, attr, v, sizeof(v));
	if (n == (ssize_t)strlen(name) && memcmp(v, name, n) == 0)
		return 0;
	if (hu_wr_setxattr_at(l->fd, NULL, attr, name, strlen(name), 0) < 0)
		return hu_error_set(e, errno, "", "cannot record the layer's "
				    "format in %s on its root", attr);
	return 0;
}

int hu_layer_record_convert(const struct hu_layer *l,
			    const struct hu_layer *to, struct hu_error *e)
{
	static const char *const attrs[] = {
		"user." FORMAT_RECORD, "trusted." FORMAT_RECORD };
	const char *keep = to->format == HU_FMT_UNION ||
			   to->format == HU_FMT_OVERLAY ? record_attr(to) : "";
	bool had[2];

	for (int i = 0; i < 2; i++) {
		had[i] = fgetxattr(l->fd, attrs[i], NULL, 0) >= 0;
		if (!had[i] && errno != ENODATA && errno != ENOTSUP)
			return hu_error_set(e, errno, "", "cannot read %s",
					    attrs[i]);
	}
	if (!had[0] && !had[1])
		return 0;
	if (*keep && hu_layer_record_format(to, e) < 0)
		return -1;
	for (int i = 0; i < 2; i++)
		if (had[i] && strcmp(attrs[i], keep) != 0 &&
		    hu_wr_removexattr_at(l->fd, NULL, attrs[i]) < 0 &&
		    errno != ENODATA)
			return hu_error_set(e, errno, "", "cannot remove %s",
					    attrs[i]);
	return 0;
}

/* The rest, after detect_count() returned @rc: a mixed layer's reports
 * (from the thread that may call the sink), and the layer's fields. */
static int detect_finish(struct detect *d, int rc)
{
	struct hu_layer *l = d->l;
	enum hu_format recorded = HU_FMT_NONE;
	bool user = false;

	l->by_record = false;
	if (rc == 0 && (d->found == HU_FMT_NONE || d->mixed)) {
		/* a layer with no markers, or with both kinds */
		rc = record_read(d, &recorded, &user);
		if (rc > 0 && d->found == HU_FMT_NONE) {
			/* its namespace, as a marker's would say it */
			d->found = recorded;
			d->seen_user = user;
			d->seen_trusted = !user;
			l->by_record = true;
		}
		rc = rc < 0 ? rc : 0;
	}
	if (rc == 0 && d->mixed) {
		d->keep = d->found = majority(d, recorded);
		if (l->format_tied)
			rc = report_tie(d);
		if (rc == 0)
			rc = detect_dir(d, l->fd);
	}
	if (rc < 0) {
		/* Paths in messages are relative to the layer: name it. */
		hu_error_prefix(d->e, l->path);
	} else if (d->found != HU_FMT_NONE) {
		l->format = d->found;
		if (d->seen_user && !d->seen_trusted)
			l->userxattr = true;
	} else {
		l->format = d->seen_oci ? HU_FMT_OCI : HU_FMT_NONE;
		/* whether they are markers is the stack's to say (layer.c) */
		l->oci_by_names = d->seen_oci;
		free(l->wh_path);
		l->wh_path = d->wh_path;
		d->wh_path = NULL;
	}
	l->names_plain = rc == 0 && !d->odd_names && !d->files_skipped;
	if (rc == 0 && l->refs == HU_REFS_ASK) {
		l->refs = d->refs ? HU_REFS_SOME : HU_REFS_NONE;
		l->files_private = d->file_private;
	}
	free(d->found_path);
	free(d->wh_path);
	hu_pathbuf_free(&d->path);
	return rc;
}

int hu_layer_detect(struct hu_layer *l, struct hu_error *e)
{
	struct detect d = { .l = l, .found = HU_FMT_NONE,
			    .keep = HU_FMT_NONE, .e = e };

	return detect_finish(&d, detect_count(&d));
}

struct hu_detect {
	struct detect d;
	int rc;
};

int hu_layer_detect_walk(struct hu_layer *l, struct hu_detect **out,
			 struct hu_error *e)
{
	struct hu_detect *s = calloc(1, sizeof(*s));

	*out = s;
	if (!s)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	s->d = (struct detect){ .l = l, .found = HU_FMT_NONE,
				.keep = HU_FMT_NONE, .e = e };
	s->rc = detect_count(&s->d);
	return s->rc;
}

int hu_layer_detect_finish(struct hu_detect *s, struct hu_error *e)
{
	int rc;

	if (!s)
		return -1;	/* hu_layer_detect_walk() said why */
	s->d.e = e;
	rc = detect_finish(&s->d, s->rc);
	free(s);
	return rc;
}

/* ---- deferred detection ------------------------------------------------ */

int hu_layer_settle(const struct hu_layer *cl, struct hu_error *e)
{
	/* The stack hands its layers out const; a deferred layer's format
	 * is the one thing that is filled in later, once, by the thread
	 * that lists the view (flatten's lister, or the one walking). */
	struct hu_layer *l = (struct hu_layer *)cl;
	int rc;

	if (!l->deferred)
		return 0;
	if (l->hold) {
		__atomic_store_n(l->hold, true, __ATOMIC_RELAXED);
		return hu_error_set(e, EAGAIN, l->path, "the format of this "
				    "layer is detected once other threads "
				    "stop");
	}
	rc = hu_layer_detect(l, e);
	if (rc == 0 && l->oci_by_names && l->peers)
		rc = hu_stack_read_names(l->peers, l->npeers, l, e);
	if (rc < 0)
		e->whole = true;	/* detect named the layer and path */
	/* Released after the format: see hu_layer_is_deferred(). */
	__atomic_store_n(&l->deferred, false, __ATOMIC_RELEASE);
	return rc;
}

bool hu_layer_files_plain(const struct hu_layer *l)
{
	return l->refs == HU_REFS_NONE && !l->files_private;
}

bool hu_layer_is_deferred(const struct hu_layer *l)
{
	return __atomic_load_n(&l->deferred, __ATOMIC_ACQUIRE);
}

/* Is @a an xattr the markers of some format use in @l's namespaces? */
static bool marker_xattr(const struct hu_layer *l, const char *a)
{
	const char *rest;

	if (strncmp(a, "user.", 5) == 0)
		rest = a + 5;
	else if (!l->userxattr && strncmp(a, "trusted.", 8) == 0)
		rest = a + 8;
	else
		return false;
	return strncmp(rest, "overlay.", 8) == 0 ||
	       strncmp(rest, "union.", 6) == 0;
}

/* Do the xattrs of @fd (or of @name in it) hold a marker one?  1 yes,
 * 0 no, -1 error. */
static int marked_xattrs(const struct hu_layer *l, int fd, const char *name,
			 struct hu_error *e)
{
	bool found = false;
	char small[512], *list;
	ssize_t len = hu_xattr_names(fd, name, small, sizeof(small), &list);

	if (len < 0)
		return hu_error_set(e, errno, name, "cannot list xattrs");
	for (char *a = list; a < list + len && !found; a += strlen(a) + 1)
		found = marker_xattr(l, a);
	if (list != small)
		free(list);
	return found;
}

/* Settle @l if @rc (a test above) says yes. */
static int settle_if(const struct hu_layer *l, int rc, struct hu_error *e)
{
	return rc > 0 ? hu_layer_settle(l, e) : rc;
}

/* Settle @l if the xattrs of @fd (or of @name in it) hold a marker one. */
static int probe_xattrs(const struct hu_layer *l, int fd, const char *name,
			struct hu_error *e)
{
	return settle_if(l, marked_xattrs(l, fd, name, e), e);
}

int hu_layer_probe_xattr_names(const struct hu_layer *l, const char *names,
			       size_t len, struct hu_error *e)
{
	if (!l->deferred)
		return 0;
	for (size_t off = 0; off < len; off += strlen(names + off) + 1)
		if (marker_xattr(l, names + off))
			return hu_layer_settle(l, e);
	return 0;
}

int hu_layer_probe_dir(const struct hu_layer *l, int fd, struct hu_error *e)
{
	struct stat st;

	if (!l->deferred)
		return 0;
	if (fstatat(fd, HU_OCI_OPAQUE, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return hu_layer_settle(l, e);
	if (errno != ENOENT)
		return hu_error_set(e, errno, HU_OCI_OPAQUE, "cannot stat");
	return probe_xattrs(l, fd, NULL, e);
}

int hu_layer_probe_name(const struct hu_layer *l, int dirfd,
			const char *name, struct hu_error *e)
{
	char wh[NAME_MAX + 1];
	struct stat st;

	if (!l->deferred)
		return 0;
	if (hu_oci_is_marker(name)) {
		/* The name may be one a layer above holds (an overlay upper's
		 * plain .wh. file): only the layer's own says anything of
		 * its format. */
		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			return hu_layer_settle(l, e);
		if (errno == ENOENT || errno == ENAMETOOLONG)
			return 0;
		return hu_error_set(e, errno, name, "cannot stat");
	}
	if (!hu_oci_whiteout_name(wh, sizeof(wh), name))
		return 0;
	if (fstatat(dirfd, wh, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return hu_layer_settle(l, e);
	if (errno != ENOENT)
		return hu_error_set(e, errno, wh, "cannot stat");
	return 0;
}

/* Does symlink @name point where a union whiteout does?  1, 0, -1. */
static int whiteout_link(int dirfd, const char *name, struct hu_error *e)
{
	char target[sizeof(HU_UNION_WHITEOUT_TARGET) + 1];
	ssize_t n = readlinkat(dirfd, name, target, sizeof(target));

	if (n < 0)
		return hu_error_set(e, errno, name, "cannot read symlink");
	return (size_t)n == strlen(HU_UNION_WHITEOUT_TARGET) &&
	       memcmp(target, HU_UNION_WHITEOUT_TARGET, n) == 0;
}

/* Settle @l if symlink @name points where a union whiteout does. */
static int probe_link(const struct hu_layer *l, int dirfd, const char *name,
		      struct hu_error *e)
{
	return settle_if(l, whiteout_link(dirfd, name, e), e);
}

int hu_layer_probe_entry(const struct hu_layer *l, int dirfd,
			 const char *name, const struct stat *st,
			 struct hu_error *e)
{
	if (!l->deferred)
		return 0;
	if (S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0))
		return hu_layer_settle(l, e);
	if (S_ISLNK(st->st_mode) &&
	    st->st_size == (off_t)strlen(HU_UNION_WHITEOUT_TARGET))
		return probe_link(l, dirfd, name, e);
	/* metacopy files and xattr whiteouts */
	if (S_ISREG(st->st_mode))
		return probe_xattrs(l, dirfd, name, e);
	return 0;
}

/* Is entry @name of @l's own walk, of type @type, one the probes settle
 * @l on?  1, 0, -1.  The syscalls detection spends on it. */
static int own_marked(const struct hu_layer *l, int dirfd, const char *name,
		      mode_t type, struct hu_error *e)
{
	struct stat st;

	/* the layer's own .wh. name: detection's seen_oci */
	if (hu_oci_is_marker(name))
		return 1;
	if (S_ISLNK(type))	/* one readlink, as detection reads it */
		return whiteout_link(dirfd, name, e);
	if (S_ISCHR(type)) {
		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return hu_error_set(e, errno, name, "cannot stat");
		return S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0);
	}
	if (S_ISREG(type))
		return marked_xattrs(l, dirfd, name, e);
	return 0;
}

int hu_layer_probe_own(const struct hu_layer *l, int dirfd, const char *name,
		       mode_t type, struct hu_error *e)
{
	if (!l->deferred)
		return 0;
	return settle_if(l, own_marked(l, dirfd, name, type, e), e);
}

/* The early look's walk: directory @fd, @path in messages; *@left the
 * directories it may still open. */
static int early_dir(const struct hu_layer *l, int fd, struct hu_pathbuf *path,
		     size_t *left, struct hu_error *e)
{
	struct hu_names names;
	int rc;

	(*left)--;
	rc = marked_xattrs(l, fd, NULL, e);
	if (rc < 0)
		hu_error_prefix(e, path->s);
	if (rc != 0)
		return rc;
	if (hu_layer_names_read(l, fd, fd != l->fd, &names, path->s, e) < 0)
		return -1;
	for (size_t i = 0; i < names.n && rc == 0; i++) {
		const char *name = names.v[i].name;
		mode_t type = names.v[i].type == DT_UNKNOWN ? 0 :
			      DTTOIF(names.v[i].type);
		struct stat st;
		size_t saved;
		int sub;

		if (!type) {
			if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
				rc = hu_error_setat(e, errno, path->s, name,
						    "cannot stat");
				break;
			}
			type = st.st_mode & S_IFMT;
		}
		if (!S_ISDIR(type)) {
			rc = own_marked(l, fd, name, type, e);
			if (rc < 0)
				hu_error_prefix(e, path->s);
			continue;
		}
		if (hu_oci_is_marker(name)) {
			rc = 1;
			continue;
		}
		if (*left == 0)
			continue;
		sub = hu_open_dir_at(fd, name);
		if (sub < 0) {
			rc = hu_error_setat(e, errno, path->s, name,
					    "cannot open directory");
			break;
		}
		if (hu_pathbuf_push(path, name, &saved) < 0) {
			close(sub);
			rc = hu_error_set(e, ENOMEM, NULL, "out of memory");
			break;
		}
		rc = early_dir(l, sub, path, left, e);
		hu_pathbuf_pop(path, saved);
		close(sub);
	}
	hu_names_free(&names);
	return rc;
}

int hu_layer_marked_early(const struct hu_layer *l, size_t max_dirs,
			  struct hu_error *e)
{
	struct hu_pathbuf path = { 0 };
	size_t saved, left = max_dirs;
	int rc;

	if (hu_pathbuf_push(&path, "", &saved) < 0)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	rc = early_dir(l, l->fd, &path, &left, e);
	hu_pathbuf_free(&path);
	if (rc < 0)
		hu_error_prefix(e, l->path);
	return rc;
}

void hu_layer_settle_plain(const struct hu_layer *cl)
{
	struct hu_layer *l = (struct hu_layer *)cl;

	/* Its format stays NONE, what detection finds in a layer where no
	 * probe fires.  Released as hu_layer_settle() releases it. */
	__atomic_store_n(&l->deferred, false, __ATOMIC_RELEASE);
}
