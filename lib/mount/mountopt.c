/* SPDX-License-Identifier: MIT */
/*
 * Mount option strings, as overlayfs reads them: options separated by
 * ',' (not inside double quotes, as mount(8) splits them), lowerdir
 * entries by ':', and '\' making the next byte literal
 * (fs/overlayfs/params.c: ovl_next_opt, ovl_parse_param_split_lowerdirs,
 * ovl_unescape).  The flags mount(8) takes by name (ro, nosuid...) are
 * mount(2) flags, not options of the filesystem.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

#include "internal.h"
#include "mount/mount.h"

/* The options mount(8) turns into mount(2) flags (set or cleared), and
 * those it keeps for itself (fstab's noauto, user...): none of them is
 * an option of the filesystem. */
static const struct {
	const char *name;
	unsigned long set, clear;
} flag_opts[] = {
	{ "ro", MS_RDONLY, 0 },		{ "rw", 0, MS_RDONLY },
	{ "nosuid", MS_NOSUID, 0 },	{ "suid", 0, MS_NOSUID },
	{ "nodev", MS_NODEV, 0 },	{ "dev", 0, MS_NODEV },
	{ "noexec", MS_NOEXEC, 0 },	{ "exec", 0, MS_NOEXEC },
	{ "sync", MS_SYNCHRONOUS, 0 },	{ "async", 0, MS_SYNCHRONOUS },
	{ "dirsync", MS_DIRSYNC, 0 },
	{ "noatime", MS_NOATIME, 0 },	{ "atime", 0, MS_NOATIME },
	{ "nodiratime", MS_NODIRATIME, 0 },
	{ "diratime", 0, MS_NODIRATIME },
	{ "relatime", MS_RELATIME, 0 },	{ "norelatime", 0, MS_RELATIME },
	{ "strictatime", MS_STRICTATIME, 0 },
	{ "lazytime", MS_LAZYTIME, 0 },	{ "nolazytime", 0, MS_LAZYTIME },
	{ "silent", MS_SILENT, 0 },	{ "loud", 0, MS_SILENT },
	{ "defaults", 0, 0 },	{ "auto", 0, 0 },	{ "noauto", 0, 0 },
	{ "user", 0, 0 },	{ "nouser", 0, 0 },	{ "users", 0, 0 },
	{ "owner", 0, 0 },	{ "group", 0, 0 },	{ "_netdev", 0, 0 },
	{ "nofail", 0, 0 },
};

/* A ',' inside double quotes splits nothing, as in mount(8) (libmount)
 * and the kernel's LSM options (context="a,b"). */
size_t hu_mountopt_len(const char *s)
{
	bool quoted = false;
	size_t i = 0;

	while (s[i] && (s[i] != ',' || quoted)) {
		if (s[i] == '"')
			quoted = !quoted;
		else if (s[i] == '\\' && s[i + 1])
			i++;
		i++;
	}
	return i;
}

void hu_mountopt_unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (*s == '\\' && s[1])
			s++;
		*d++ = *s;
	}
	*d = '\0';
}

size_t hu_mountopt_escaped_len(const char *path, const char *special)
{
	size_t n = 0;

	for (; *path; path++)
		n += strchr(special, *path) ? 2 : 1;
	return n;
}

char *hu_mountopt_escape(char *out, const char *path, const char *special)
{
	for (; *path; path++) {
		if (strchr(special, *path))
			*out++ = '\\';
		*out++ = *path;
	}
	*out = '\0';
	return out;
}

/* Append option @opt (already escaped) to @buf, ',' between. */
static int append(char **buf, size_t *len, const char *opt, size_t n)
{
	char *b = realloc(*buf, *len + n + 2);

	if (!b)
		return -1;
	if (*len)
		b[(*len)++] = ',';
	memcpy(b + *len, opt, n);
	*len += n;
	b[*len] = '\0';
	*buf = b;
	return 0;
}

static bool is_flag_opt(const char *opt, size_t n, unsigned long *flags)
{
	if ((n >= 2 && !strncmp(opt, "x-", 2)) ||
	    (n >= 8 && !strncmp(opt, "comment=", 8)))
		return true;	/* mount(8)'s own (fstab) */
	for (size_t i = 0; i < sizeof(flag_opts) / sizeof(flag_opts[0]); i++) {
		if (strlen(flag_opts[i].name) == n &&
		    !strncmp(flag_opts[i].name, opt, n)) {
			*flags = (*flags | flag_opts[i].set) &
				 ~flag_opts[i].clear;
			return true;
		}
	}
	return false;
}

/* Is option @opt (@n bytes) "@key=..."? */
static bool is_key(const char *opt, size_t n, const char *key)
{
	size_t k = strlen(key);

	return n > k && !strncmp(opt, key, k) && opt[k] == '=';
}

static int take_dir(char **dst, const char *opt, size_t n, const char *key,
		    struct hu_error *e)
{
	size_t k = strlen(key) + 1;

	if (*dst)
		return hu_error_set(e, 0, NULL, "%s= given twice", key);
	*dst = strndup(opt + k, n - k);
	if (!*dst)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	hu_mountopt_unescape(*dst);
	return 0;
}

char *hu_mountopt_next_path(char *p, char **rest, bool *last)
{
	char *q = p;

	while (*q && *q != ':') {
		if (*q == '\\' && q[1])
			q++;
		q++;
	}
	*last = *q == '\0';
	*q = '\0';
	*rest = q + 1;
	return p;
}

/* Split lowerdir value @v (top first, escaped) into @sp->layers, bottom
 * first: the array is filled from its end, and on failure freed here
 * (hu_mount_spec_free stops at the first empty slot). */
static int take_lowers(struct hu_mount_spec *sp, const char *v, size_t n,
		       struct hu_error *e)
{
	char *s = strndup(v, n), *p, *rest;
	size_t count = 1, i;
	bool last = false;
	int rc = -1;

	if (!s)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (p = s; *p; p++) {
		if (*p == '\\' && p[1])
			p++;
		else if (*p == ':')
			count++;
	}
	sp->layers = calloc(count + 1, sizeof(*sp->layers));
	if (!sp->layers) {
		free(s);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	for (i = count, p = s; !last; p = rest) {
		hu_mountopt_next_path(p, &rest, &last);
		if (!*p) {
			hu_error_set(e, 0, NULL, "an empty path in lowerdir "
				     "('::' is overlayfs's data-only layers, "
				     "which hunion does not take)");
			goto out;
		}
		sp->layers[--i] = strdup(p);
		if (!sp->layers[i]) {
			hu_error_set(e, ENOMEM, NULL, "out of memory");
			goto out;
		}
		hu_mountopt_unescape(sp->layers[i]);
	}
	sp->n = count;
	rc = 0;
out:
	if (rc < 0) {
		for (size_t j = i; j < count; j++)
			free(sp->layers[j]);
		free(sp->layers);
		sp->layers = NULL;
	}
	free(s);
	return rc;
}

int hu_mount_spec_parse(const char *opts, bool take_dirs,
			struct hu_mount_spec *sp, struct hu_error *e)
{
	char *upper = NULL;
	const char *s = opts ? opts : "";

	memset(sp, 0, sizeof(*sp));
	while (*s) {
		size_t n = hu_mountopt_len(s);

		if (n == 0) {
			/* an empty option (",,"): nothing */
		} else if (is_key(s, n, "lowerdir") ||
			   is_key(s, n, "upperdir") ||
			   is_key(s, n, "workdir")) {
			if (!take_dirs) {
				hu_error_set(e, 0, NULL, "-o %.*s=: give the "
					     "layers as operands (and the "
					     "workdir with --workdir)",
					     (int)(strchr(s, '=') - s), s);
				goto fail;
			}
			if (is_key(s, n, "upperdir")) {
				if (take_dir(&upper, s, n, "upperdir", e) < 0)
					goto fail;
			} else if (is_key(s, n, "workdir")) {
				if (take_dir(&sp->workdir, s, n, "workdir",
					     e) < 0)
					goto fail;
			} else {
				if (sp->layers) {
					hu_error_set(e, 0, NULL,
						     "lowerdir= given twice");
					goto fail;
				}
				if (take_lowers(sp, s + 9, n - 9, e) < 0)
					goto fail;
			}
		} else if (!is_flag_opt(s, n, &sp->flags)) {
			if (append(&sp->fs_options, &sp->fs_len, s, n) < 0) {
				hu_error_set(e, ENOMEM, NULL, "out of memory");
				goto fail;
			}
		}
		s += n;
		if (*s == ',')
			s++;
	}
	if (upper) {
		char **l;

		if (!sp->layers) {
			hu_error_set(e, 0, NULL, "upperdir= without lowerdir=");
			goto fail;
		}
		l = realloc(sp->layers, (sp->n + 2) * sizeof(*l));
		if (!l) {
			hu_error_set(e, ENOMEM, NULL, "out of memory");
			goto fail;
		}
		sp->layers = l;
		sp->layers[sp->n++] = upper;
		sp->layers[sp->n] = NULL;
		sp->has_upper = true;
		upper = NULL;
	}
	return 0;
fail:
	free(upper);
	hu_mount_spec_free(sp);
	return -1;
}

int hu_lowerdir_parse(const char *v, struct hu_mount_spec *sp,
		      struct hu_error *e)
{
	memset(sp, 0, sizeof(*sp));
	return take_lowers(sp, v, strlen(v), e);
}

void hu_mount_spec_free(struct hu_mount_spec *sp)
{
	for (size_t i = 0; sp->layers && sp->layers[i]; i++)
		free(sp->layers[i]);
	free(sp->layers);
	free(sp->workdir);
	free(sp->fs_options);
	memset(sp, 0, sizeof(*sp));
}

const char *hu_mount_flag_names(unsigned long flags, char *buf, size_t len)
{
	static const struct { unsigned long f; const char *name; } names[] = {
		{ MS_RDONLY, "MS_RDONLY" },	{ MS_NOSUID, "MS_NOSUID" },
		{ MS_NODEV, "MS_NODEV" },	{ MS_NOEXEC, "MS_NOEXEC" },
		{ MS_SYNCHRONOUS, "MS_SYNCHRONOUS" },
		{ MS_DIRSYNC, "MS_DIRSYNC" },	{ MS_NOATIME, "MS_NOATIME" },
		{ MS_NODIRATIME, "MS_NODIRATIME" },
		{ MS_RELATIME, "MS_RELATIME" },
		{ MS_STRICTATIME, "MS_STRICTATIME" },
		{ MS_LAZYTIME, "MS_LAZYTIME" },	{ MS_SILENT, "MS_SILENT" },
	};
	size_t at = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!(flags & names[i].f))
			continue;
		if (at >= len)
			break;
		at += snprintf(buf + at, len - at, "%s%s",
			       at ? "|" : "", names[i].name);
	}
	if (!at)
		snprintf(buf, len, "0");
	return buf;
}

const char *hu_mount_flag_opts(unsigned long flags, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(flag_opts) / sizeof(flag_opts[0]); i++) {
		if (!flag_opts[i].set || (flags & flag_opts[i].set) !=
		    flag_opts[i].set || at >= len)
			continue;
		at += snprintf(buf + at, len - at, "%s%s", at ? "," : "",
			       flag_opts[i].name);
	}
	return buf;
}
