/* SPDX-License-Identifier: MIT */
/*
 * The record of a conversion in place (whiteout convert --in-place): on
 * the layer root, which formats a half-converted layer is read in; on each
 * directory the conversion changed, the times it had.  Private union.*
 * xattrs, so never shown in a view nor copied.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/xattr.h>

#include "internal.h"
#include "layer/ldir.h"

#define CONV_RECORD "union.converting"

static const char *form_name(enum hu_format f, bool user)
{
	if (f == HU_FMT_OCI || !user)
		return hu_format_name(f);
	return f == HU_FMT_UNION ? "union-user" : "overlay-user";
}

static bool parse_form(const char *s, size_t n, enum hu_format *f, bool *user)
{
	static const enum hu_format fmts[] = {
		HU_FMT_UNION, HU_FMT_OVERLAY, HU_FMT_OCI };

	for (size_t i = 0; i < 3; i++) {
		for (int u = 0; u < 2; u++) {
			const char *name = form_name(fmts[i], u);

			if (strlen(name) == n && !memcmp(s, name, n)) {
				*f = fmts[i];
				*user = u;
				return true;
			}
		}
	}
	return false;
}

/* A trusted.* name only when one of the formats needs trusted.* anyway:
 * a layer converted without root is read without it. */
static const char *record_name(const struct hu_layer *l,
			       const struct hu_layer *to, const char *what,
			       char *buf, size_t len)
{
	bool trusted = (l->format != HU_FMT_OCI && !l->userxattr) ||
		       (to->format != HU_FMT_OCI && !to->userxattr);

	snprintf(buf, len, "%s%s", trusted ? "trusted." : "user.", what);
	return buf;
}

int hu_conv_record_set(const struct hu_layer *l, const struct hu_layer *to,
		       struct hu_error *e)
{
	char buf[64], v[64];
	const char *attr = record_name(l, to, CONV_RECORD, buf, sizeof(buf));

	snprintf(v, sizeof(v), "%s>%s", form_name(l->format, l->userxattr),
		 form_name(to->format, to->userxattr));
	if (hu_wr_setxattr_at(l->fd, NULL, attr, v, strlen(v), 0) < 0)
		return hu_error_set(e, errno, l->path, "cannot record the "
				    "conversion in %s", attr);
	return 0;
}

int hu_conv_record_clear(const struct hu_layer *l, const struct hu_layer *to,
			 struct hu_error *e)
{
	char buf[64];
	const char *attr = record_name(l, to, CONV_RECORD, buf, sizeof(buf));

	if (hu_wr_removexattr_at(l->fd, NULL, attr) < 0 && errno != ENODATA)
		return hu_error_set(e, errno, l->path, "cannot remove %s",
				    attr);
	return 0;
}

/* The times a directory had before the conversion first changed it: a
 * run that stops leaves them for the next to restore, and meanwhile the
 * view shows them. */
#define CONV_TIMES "union.converting-times"

int hu_conv_times_set(const struct hu_layer *l, const struct hu_layer *to,
		      int fd, const struct stat *st, struct hu_error *e)
{
	char name[64], v[96];

	record_name(l, to, CONV_TIMES, name, sizeof(name));
	snprintf(v, sizeof(v), "%lld.%09ld %lld.%09ld",
		 (long long)st->st_atim.tv_sec, st->st_atim.tv_nsec,
		 (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
	if (hu_wr_setxattr_at(fd, NULL, name, v, strlen(v), 0) < 0)
		return hu_error_set(e, errno, NULL, "cannot set %s", name);
	return 0;
}

int hu_conv_times_clear(const struct hu_layer *l, const struct hu_layer *to,
			int fd, struct hu_error *e)
{
	char name[64];

	record_name(l, to, CONV_TIMES, name, sizeof(name));
	if (hu_wr_removexattr_at(fd, NULL, name) < 0 && errno != ENODATA)
		return hu_error_set(e, errno, NULL, "cannot remove %s", name);
	return 0;
}

int hu_conv_times_read(int fd, struct timespec ts[2], bool *found,
		       struct hu_error *e)
{
	static const char *const attrs[] = {
		"user." CONV_TIMES, "trusted." CONV_TIMES };
	long long as, ms;
	long an, mn;
	ssize_t n = -1;
	char v[96];

	*found = false;
	for (int i = 0; i < 2 && n < 0; i++) {
		n = fgetxattr(fd, attrs[i], v, sizeof(v) - 1);
		if (n < 0 && errno != ENODATA && errno != ENOTSUP)
			return hu_error_set(e, errno, NULL, "cannot read %s",
					    attrs[i]);
	}
	if (n < 0)
		return 0;
	v[n] = '\0';
	if (sscanf(v, "%lld.%ld %lld.%ld", &as, &an, &ms, &mn) != 4)
		return hu_error_set(e, 0, NULL, "unreadable %s: '%s'",
				    CONV_TIMES, v);
	ts[0] = (struct timespec){ .tv_sec = as, .tv_nsec = an };
	ts[1] = (struct timespec){ .tv_sec = ms, .tv_nsec = mn };
	*found = true;
	return 0;
}

int hu_layer_dir_stat(const struct hu_layer *l, int fd, struct stat *st,
		      struct hu_error *e)
{
	struct timespec ts[2];
	bool found;

	if (hu_ldir_stat(l, fd, NULL, st) < 0)
		return hu_error_set(e, errno, NULL, "cannot stat");
	if (!hu_layer_half(l) || !S_ISDIR(st->st_mode))
		return 0;
	if (hu_conv_times_read(fd, ts, &found, e) < 0)
		return -1;
	if (found) {
		st->st_atim = ts[0];
		st->st_mtim = ts[1];
	}
	return 0;
}

bool hu_conv_temp_name(const struct hu_layer *l, const char *name)
{
	return hu_layer_half(l) && hu_conv_temp_prefixed(name);
}

int hu_conv_record_read(struct hu_layer *l, struct hu_error *e)
{
	static const char *const attrs[] = {
		"user." CONV_RECORD, "trusted." CONV_RECORD };
	enum hu_format from, to;
	bool from_user, to_user;
	char v[64], *gt;
	ssize_t n = -1;

	/* trusted.* reads as absent without CAP_SYS_ADMIN, and then the
	 * layer's markers cannot be read either (check_trusted) */
	for (int i = 0; i < 2 && n < 0; i++) {
		n = fgetxattr(l->fd, attrs[i], v, sizeof(v) - 1);
		if (n < 0 && errno != ENODATA && errno != ENOTSUP)
			return hu_error_set(e, errno, l->path,
					    "cannot read %s", attrs[i]);
	}
	if (n < 0)
		return 0;
	v[n] = '\0';
	gt = strchr(v, '>');
	if (!gt || !parse_form(v, gt - v, &from, &from_user) ||
	    !parse_form(gt + 1, strlen(gt + 1), &to, &to_user))
		return hu_error_set(e, 0, l->path, "unknown conversion record "
				    "'%s' on the layer root", v);
	l->format = from;
	l->userxattr = from_user;
	l->conv_to = to;
	l->conv_to_userxattr = to_user;
	return 1;
}
