/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "testutil.h"

static char tmp[64];

const char *tu_tmpdir(void)
{
	if (!tmp[0]) {
		strcpy(tmp, "/tmp/hunion-unit.XXXXXX");
		cr_assert_not_null(mkdtemp(tmp));
	}
	return tmp;
}

void tu_cleanup(void)
{
	char cmd[128];

	if (!tmp[0])
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	cr_assert_eq(system(cmd), 0);
	tmp[0] = '\0';
}

const char *tu_path(const char *rel)
{
	static char ring[8][4096];
	static int next;
	char *p = ring[next++ % 8];

	snprintf(p, 4096, "%s/%s", tu_tmpdir(), rel);
	return p;
}

void tu_mkdir(const char *rel)
{
	char buf[4096], *s;

	snprintf(buf, sizeof(buf), "%s", tu_path(rel));
	for (s = buf + strlen(tu_tmpdir()) + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		mkdir(buf, 0755);
		*s = '/';
	}
	cr_assert(mkdir(buf, 0755) == 0 || errno == EEXIST, "mkdir %s: %s",
		  buf, strerror(errno));
}

static void parent_of(const char *rel)
{
	char buf[4096], *slash;

	snprintf(buf, sizeof(buf), "%s", rel);
	slash = strrchr(buf, '/');
	if (slash) {
		*slash = '\0';
		tu_mkdir(buf);
	}
}

void tu_file(const char *rel, const char *content)
{
	FILE *f;

	parent_of(rel);
	f = fopen(tu_path(rel), "w");
	cr_assert_not_null(f, "create %s: %s", rel, strerror(errno));
	fputs(content, f);
	fclose(f);
}

void tu_symlink(const char *target, const char *rel)
{
	parent_of(rel);
	cr_assert_eq(symlink(target, tu_path(rel)), 0, "symlink %s", rel);
}

void tu_xattr(const char *rel, const char *name, const char *value)
{
	cr_assert_eq(lsetxattr(tu_path(rel), name, value, strlen(value), 0),
		     0, "setxattr %s %s: %s", rel, name, strerror(errno));
}

void tu_mknod(const char *rel, mode_t mode, unsigned maj, unsigned min)
{
	parent_of(rel);
	cr_assert_eq(mknod(tu_path(rel), mode, makedev(maj, min)), 0,
		     "mknod %s: %s", rel, strerror(errno));
	cr_assert_eq(chmod(tu_path(rel), mode & 07777), 0);	/* no umask */
}

void tu_wh_union(const char *rel)
{
	tu_symlink("(union-whiteout)", rel);
	tu_xattr(rel, "trusted.union.whiteout", "y");
}

void tu_wh_overlay(const char *rel)
{
	tu_mknod(rel, S_IFCHR, 0, 0);
}

void tu_opaque(const char *rel, const char *fmt)
{
	char name[64];

	tu_mkdir(rel);
	snprintf(name, sizeof(name), "trusted.%s.opaque", fmt);
	tu_xattr(rel, name, "y");
}

char *tu_read(const char *rel)
{
	static char buf[8][4096];
	static int next;
	char *b = buf[next++ % 8];
	int fd = open(tu_path(rel), O_RDONLY | O_NOFOLLOW);
	ssize_t n;

	if (fd < 0)
		return NULL;
	n = read(fd, b, 4095);
	close(fd);
	b[n < 0 ? 0 : n] = '\0';
	return b;
}

bool tu_exists(const char *rel)
{
	struct stat st;

	return lstat(tu_path(rel), &st) == 0;
}

int tu_stack(struct hu_stack *s, struct hu_error *e, int n, ...)
{
	struct hu_stack_opts o = { 0 };
	char *paths[8];
	va_list ap;
	int rc;

	va_start(ap, n);
	for (int i = 0; i < n; i++)
		paths[i] = strdup(tu_path(va_arg(ap, const char *)));
	va_end(ap);
	rc = hu_stack_open(s, paths, n, &o, e);
	for (int i = 0; i < n; i++)
		free(paths[i]);
	return rc;
}

struct dump {
	char *buf, *full_buf;
	size_t len, full_len;
	FILE *f;
	FILE *full;	/* the same lines, with each file's data */
};

static int dump_entry(void *ctx, struct hu_vdir *d, const struct hu_ventry *ent,
		      struct hu_error *e)
{
	struct dump *dp = ctx;
	const char *dir = hu_vdir_path(d);
	char data[64];
	ssize_t n = 0;
	int fd;

	fprintf(dp->f, "%s%s%s:%zu\n", dir, *dir ? "/" : "", ent->name,
		ent->layer);
	fprintf(dp->full, "%s%s%s:%zu", dir, *dir ? "/" : "", ent->name,
		ent->layer);
	if (S_ISREG(ent->st.st_mode)) {
		/* through metacopy files to their data */
		fd = hu_vdir_open_data(d, ent, NULL, e);
		if (fd < 0)
			return -1;
		n = read(fd, data, sizeof(data));
		close(fd);
		fprintf(dp->full, " [%.*s]", (int)(n > 0 ? n : 0), data);
	}
	fputc('\n', dp->full);
	return 1;
}

/* The walk's lines; *@full: the same with each file's data. */
static char *view_walk(const struct hu_stack *s, bool ahead, char **full,
		       int *rc, struct hu_error *e)
{
	const struct hu_walk_ops ops = {
		.entry = dump_entry, .list_ahead = ahead,
		.xattr_names = ahead, .prefetch_data = ahead };
	struct dump dp = { 0 };

	dp.f = open_memstream(&dp.buf, &dp.len);
	dp.full = open_memstream(&dp.full_buf, &dp.full_len);
	*rc = hu_view_walk(s, &ops, &dp, e);
	fclose(dp.f);
	fclose(dp.full);
	*full = dp.full_buf;
	return dp.buf;
}

static char *view_dump(const struct hu_stack *s, bool ahead, char **full)
{
	struct hu_error e = { 0 };
	int rc;
	char *lines = view_walk(s, ahead, full, &rc, &e);

	cr_assert_eq(rc, 0, "walk: %s: %s", e.path, e.msg);
	return lines;
}

char *tu_view_walk_data(const struct hu_stack *s, bool ahead, int *rc,
			struct hu_error *e)
{
	char *full;

	free(view_walk(s, ahead, &full, rc, e));
	return full;
}

char *tu_view_dump(const struct hu_stack *s)
{
	char *plain_full, *ahead_full;
	char *plain = view_dump(s, false, &plain_full);
	char *ahead = view_dump(s, true, &ahead_full);

	/* Listing ahead in a second thread, which also reads the xattr
	 * names (and so skips asking unmarked entries for markers), and
	 * opening files ahead must change neither the walk nor any file's
	 * data. */
	cr_expect_str_eq(ahead_full, plain_full,
			 "the walk listing ahead differs");
	free(ahead);
	free(ahead_full);
	free(plain_full);
	return plain;
}
