/* SPDX-License-Identifier: MIT */
/* The walk of the view, listing in the walking thread or ahead of it. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "testutil.h"

static void teardown(void)
{
	tu_cleanup();
}

TestSuite(walk, .fini = teardown);

/* Records every callback; fails at the @fail_at'th entry, or in the
 * leave callback of the directory named @fail_leave; does not descend
 * into directories named "skip". */
struct rec {
	FILE *f;
	char *buf;
	size_t len, entries, fail_at;
	const char *fail_leave;
};

static int rec_entry(void *ctx, struct hu_vdir *d, const struct hu_ventry *ent,
		     struct hu_error *e)
{
	struct rec *r = ctx;

	fprintf(r->f, "E %s/%s:%zu\n", hu_vdir_path(d), ent->name, ent->layer);
	if (++r->entries == r->fail_at)
		return hu_error_set(e, EIO, ent->name, "failing on purpose");
	return strcmp(ent->name, "skip") != 0;
}

static int rec_leave(void *ctx, struct hu_vdir *d, const struct hu_ventry *ent,
		     struct hu_error *e)
{
	struct rec *r = ctx;

	fprintf(r->f, "L %s\n", hu_vdir_path(d));
	if (ent && r->fail_leave && !strcmp(ent->name, r->fail_leave))
		return hu_error_set(e, EIO, ent->name, "failing on leave");
	return 0;
}

static int rec_root(void *ctx, struct hu_vdir *d, struct hu_error *e)
{
	struct rec *r = ctx;

	(void)e;
	fprintf(r->f, "R %s\n", hu_vdir_path(d));
	return 0;
}

/* Walk @s recording the callbacks; returns the walk's result. */
static int record(const struct hu_stack *s, bool ahead, struct rec *r,
		  struct hu_error *e)
{
	const struct hu_walk_ops ops = {
		.entry = rec_entry, .leave = rec_leave,
		.enter_root = rec_root, .list_ahead = ahead,
	};
	int rc;

	r->f = open_memstream(&r->buf, &r->len);
	rc = hu_view_walk(s, &ops, r, e);
	fclose(r->f);
	return rc;
}

/* Three layers with @n directories of a few names each, merged at every
 * level: more than the lister may hold ahead of the walk. */
static void make_stack(struct hu_stack *s, int n)
{
	struct hu_error e = { 0 };
	char p[128];

	for (int i = 0; i < n; i++) {
		snprintf(p, sizeof(p), "l0/d%03d/e%d/f", i / 10, i % 10);
		tu_file(p, "0");
		snprintf(p, sizeof(p), "l1/d%03d/e%d/g", i / 10, i % 10);
		tu_file(p, "1");
		if (i % 7 == 0) {
			snprintf(p, sizeof(p), "l2/d%03d/e%d/f", i / 10,
				 i % 10);
			tu_wh_overlay(p);
		}
	}
	tu_mkdir("l1/skip/inside/deeper");
	tu_file("l2/skip/inside/file", "x");
	cr_assert_eq(tu_stack(s, &e, 3, "l0", "l1", "l2"), 0, "%s: %s",
		     e.path, e.msg);
}

Test(walk, listing_ahead_calls_back_as_the_plain_walk)
{
	struct hu_stack s;
	struct rec plain = { 0 }, ahead = { 0 };
	struct hu_error e = { 0 };

	make_stack(&s, 2000);
	cr_assert_eq(record(&s, false, &plain, &e), 0, "%s", e.msg);
	cr_assert_eq(record(&s, true, &ahead, &e), 0, "%s", e.msg);
	cr_expect_str_eq(ahead.buf, plain.buf);
	/* 201 names at the root, 2000 directories below, two names in
	 * each but where l2 whites out f (286 times); "skip" is not
	 * descended into */
	cr_expect_eq(plain.entries, 201 + 2000 + 2 * 2000 - 286);
	cr_expect(strstr(plain.buf, "E /skip:2\n") != NULL);
	cr_expect(strstr(plain.buf, "skip/inside") == NULL);
	free(plain.buf);
	free(ahead.buf);
	hu_stack_close(&s);
}

/* Fail in a callback, the lister far ahead: the same error and the same
 * callbacks before it, and nothing left behind (ASan). */
static void expect_same_failure(struct rec *plain, struct rec *ahead)
{
	struct hu_stack s;
	struct hu_error pe = { 0 }, ae = { 0 };

	make_stack(&s, 2000);
	cr_assert_eq(record(&s, false, plain, &pe), -1);
	cr_assert_eq(record(&s, true, ahead, &ae), -1);
	cr_expect_str_eq(ae.msg, pe.msg);
	cr_expect_str_eq(ae.path, pe.path);
	cr_expect_str_eq(ahead->buf, plain->buf);
	hu_error_clear(&pe);
	hu_error_clear(&ae);
	free(plain->buf);
	free(ahead->buf);
	hu_stack_close(&s);
}

Test(walk, an_entry_callback_error_stops_the_lister)
{
	struct rec plain = { .fail_at = 1500 }, ahead = { .fail_at = 1500 };

	expect_same_failure(&plain, &ahead);
	cr_expect_eq(ahead.entries, 1500);
}

Test(walk, a_leave_callback_error_stops_the_lister)
{
	struct rec plain = { .fail_leave = "e3" }, ahead = { .fail_leave = "e3" };

	expect_same_failure(&plain, &ahead);
	cr_expect_eq(ahead.entries, 1 + 4 + 2 * 4 - 1);
}

/* The lister cannot open a directory (out of file descriptors): the walk
 * fails with its error, after callbacks the plain walk makes too. */
Test(walk, a_listing_error_in_the_lister_ends_the_walk)
{
	struct hu_stack s;
	struct rec plain = { 0 }, ahead = { 0 };
	struct hu_error e = { 0 };
	struct rlimit rl;
	int lowest;

	make_stack(&s, 2000);
	cr_assert_eq(record(&s, false, &plain, &e), 0, "%s", e.msg);
	lowest = dup(0);
	cr_assert_geq(lowest, 0);
	close(lowest);
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rl.rlim_cur = lowest + 8;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	cr_assert_eq(record(&s, true, &ahead, &e), -1);
	cr_expect_eq(e.err, EMFILE, "%s: %s", e.path, e.msg);
	cr_expect(e.path && strstr(e.path, "/l"), "path %s", e.path);
	cr_expect(strncmp(plain.buf, ahead.buf, ahead.len) == 0);
	cr_expect(ahead.len < plain.len);
	hu_error_clear(&e);
	free(plain.buf);
	free(ahead.buf);
	hu_stack_close(&s);
}

/* Collects "name=xattr names" for every entry. */
static int names_entry(void *ctx, struct hu_vdir *d,
		       const struct hu_ventry *ent, struct hu_error *e)
{
	FILE *f = ctx;

	(void)d;
	(void)e;
	fprintf(f, "%s=", ent->name);
	if (!ent->xattr_names)
		fputs("(unread)", f);
	for (size_t off = 0; off < ent->xattr_names_len;
	     off += strlen(ent->xattr_names + off) + 1)
		fprintf(f, "[%s]", ent->xattr_names + off);
	fputc('\n', f);
	return 1;
}

static char *names_of(const struct hu_stack *s, bool ahead)
{
	const struct hu_walk_ops ops = {
		.entry = names_entry, .list_ahead = ahead, .xattr_names = true,
	};
	struct hu_error e = { 0 };
	char *buf;
	size_t len;
	FILE *f = open_memstream(&buf, &len);

	cr_assert_eq(hu_view_walk(s, &ops, f, &e), 0, "%s", e.msg);
	fclose(f);
	return buf;
}

Test(walk, the_lister_reads_xattr_names_above_the_bottom_layer)
{
	struct hu_stack_opts o = { .defer_below = 1 };
	char *paths[2];
	struct hu_stack s;
	struct hu_error e = { 0 };

	tu_file("lo/d/f", "data");
	tu_xattr("lo/d/f", "user.one", "1");
	tu_file("up/d/empty", "");
	tu_xattr("up/d/empty", "user.three", "3");
	tu_symlink("f", "up/d/link");
	cr_assert_eq(tu_stack(&s, &e, 2, "lo", "up"), 0, "%s", e.msg);
	/* the bottom layer's only while the walk has plenty queued, which
	 * a tree this small never gives it */
	tu_expect_str(names_of(&s, true),
		      "d=\nempty=[user.three]\nf=(unread)\n"
		      "link=\n");
	/* without the lister nobody reads them ahead */
	tu_expect_str(names_of(&s, false),
		      "d=(unread)\nempty=(unread)\nf=(unread)\n"
		      "link=(unread)\n");
	hu_stack_close(&s);

	/* a deferred layer's files are probed by their names, kept */
	paths[0] = strdup(tu_path("lo"));
	paths[1] = strdup(tu_path("up"));
	for (int ahead = 0; ahead < 2; ahead++) {
		cr_assert_eq(hu_stack_open(&s, paths, 2, &o, &e), 0, "%s",
			     e.msg);
		tu_expect_str(names_of(&s, ahead),
			      ahead ? "d=\nempty=[user.three]\nf=[user.one]\n"
				      "link=\n" :
				      "d=(unread)\nempty=(unread)\n"
				      "f=[user.one]\nlink=(unread)\n");
		hu_stack_close(&s);
	}
	free(paths[0]);
	free(paths[1]);
}

/* A .wh. name an overlay upper holds (an ordinary file there) is looked
 * up in the deferred layers beneath, as fsck looks up each name of the
 * layer it checks: it settles only a layer that holds the name too, not
 * every layer it is looked up in. */
Test(walk, a_wh_name_from_above_settles_only_a_layer_holding_it)
{
	struct hu_stack_opts o = { .defer_below = 2 };
	struct hu_vdir *root, *d;
	struct hu_ventry ent;
	char *paths[3];
	struct hu_stack s;
	struct hu_error e = { 0 };

	tu_file("l0/d/f", "0");
	tu_file("l1/d/g", "1");
	tu_file("l2/d/.wh.x", "");
	tu_wh_overlay("l2/d/f");
	paths[0] = strdup(tu_path("l0"));
	paths[1] = strdup(tu_path("l1"));
	paths[2] = strdup(tu_path("l2"));
	for (int holds = 0; holds < 2; holds++) {
		if (holds)
			tu_file("l1/d/.wh.x", "");
		cr_assert_eq(hu_stack_open(&s, paths, 3, &o, &e), 0, "%s",
			     e.msg);
		cr_assert(hu_layer_is_deferred(&s.layers[0]) &&
			  hu_layer_is_deferred(&s.layers[1]));
		cr_assert_eq(hu_vdir_open_root(&s, &root, &e), 0, "%s",
			     e.msg);
		cr_assert_eq(hu_vdir_lookup(root, "d", &ent, &e), 1, "%s",
			     e.msg);
		cr_assert_eq(hu_vdir_open_child(root, &ent, &d, &e), 0, "%s",
			     e.msg);
		cr_expect_eq(hu_vdir_lookup_below(d, ".wh.x", 2, &ent, &e),
			     holds, "%s", e.msg);
		cr_expect(hu_layer_is_deferred(&s.layers[0]));
		cr_expect_eq(hu_layer_is_deferred(&s.layers[1]), !holds,
			     "l1 %s .wh.x", holds ? "holds" : "lacks");
		/* a plain name in a kernel stack, whichever */
		cr_expect_eq(s.layers[1].format, HU_FMT_NONE);
		hu_vdir_close(d);
		hu_vdir_close(root);
		hu_stack_close(&s);
	}
	for (int i = 0; i < 3; i++)
		free(paths[i]);
}

/*
 * flatten defers the bottom layer's detection, and the lister may settle
 * it while the walking thread reads files.  Walk l0 (deferred) under l1,
 * plain and ahead, each on a freshly opened stack: both give @want, or
 * both fail with the same error, containing @want_err.
 */
static char *walk_deferred_bottom(bool ahead, int *rc, struct hu_error *e)
{
	struct hu_stack_opts o = { .defer_below = 1 };
	struct hu_error oe = { 0 };
	char *paths[2] = { strdup(tu_path("l0")), strdup(tu_path("l1")) };
	struct hu_stack s;
	char *out;

	cr_assert_eq(hu_stack_open(&s, paths, 2, &o, &oe), 0, "%s", oe.msg);
	free(paths[0]);
	free(paths[1]);
	cr_assert(s.layers[0].deferred && !s.layers[1].deferred);
	out = tu_view_walk_data(&s, ahead, rc, e);
	hu_stack_close(&s);
	return out;
}

static void expect_deferred_bottom(const char *want, const char *want_err)
{
	struct hu_error e[2] = { 0 };
	char *out[2];
	int rc[2];

	for (int ahead = 0; ahead < 2; ahead++)
		out[ahead] = walk_deferred_bottom(ahead, &rc[ahead], &e[ahead]);
	if (want) {
		cr_expect_eq(rc[0], 0, "plain: %s", e[0].msg);
		cr_expect_eq(rc[1], 0, "ahead: %s", e[1].msg);
		cr_expect_str_eq(out[0], want);
		cr_expect_str_eq(out[1], want);
	} else {
		cr_expect_eq(rc[0], -1);
		cr_expect_eq(rc[1], -1);
		cr_expect(strstr(e[0].msg, want_err), "%s", e[0].msg);
		cr_expect_str_eq(e[1].msg, e[0].msg);
		cr_expect_str_eq(e[1].path ? e[1].path : "",
				 e[0].path ? e[0].path : "");
	}
	for (int i = 0; i < 2; i++) {
		free(out[i]);
		hu_error_clear(&e[i]);
	}
}

Test(walk, a_deferred_overlay_bottom_hides_its_whiteouts_only)
{
	tu_wh_overlay("l0/w");
	tu_file("l0/.wh.x", "ordinary");	/* a file in an overlay layer */
	tu_file("l0/f", "data");
	tu_file("l1/g", "up");
	expect_deferred_bottom(".wh.x:0 [ordinary]\nf:0 [data]\ng:1 [up]\n",
			       NULL);
}

Test(walk, a_deferred_oci_bottom_hides_its_whiteout_files)
{
	tu_file("l0/.wh.gone", "");
	tu_file("l0/kept", "k");
	tu_file("l1/g", "up");
	expect_deferred_bottom("g:1 [up]\nkept:0 [k]\n", NULL);
}

Test(walk, a_metacopy_file_reads_its_data_from_a_deferred_bottom)
{
	tu_file("l0/d/m", "lower data");	/* no marker in l0 at all */
	tu_file("l1/d/m", "");
	cr_assert_eq(truncate(tu_path("l1/d/m"), 10), 0);
	tu_xattr("l1/d/m", "trusted.overlay.metacopy", "");
	tu_wh_overlay("l1/zz");			/* l1 reads as overlay */
	expect_deferred_bottom("d:1\nd/m:1 [lower data]\n", NULL);
}

Test(walk, a_mixed_bottom_fails_alike_when_met)
{
	tu_wh_overlay("l0/a");
	tu_wh_union("l0/b");
	tu_file("l0/.wh.c", "");	/* met first: settles l0 */
	tu_file("l1/g", "up");
	expect_deferred_bottom(NULL, "mixed formats");
}

Test(walk, the_lister_detects_a_bottom_under_a_metacopy_file_whole)
{
	struct hu_error e = { 0 };
	char *out;
	int rc;

	/* l0's markers lie where l1 hides them: no marker of l0 is met */
	tu_wh_overlay("l0/hidden/a");
	tu_wh_union("l0/hidden/b");
	tu_wh_overlay("l1/hidden");
	tu_file("l0/m", "lower data");
	tu_file("l1/m", "");
	cr_assert_eq(truncate(tu_path("l1/m"), 10), 0);
	tu_xattr("l1/m", "trusted.overlay.metacopy", "");
	/* the plain walk looks m's data up in l0 read as it is... */
	out = walk_deferred_bottom(false, &rc, &e);
	cr_expect_eq(rc, 0, "%s", e.msg);
	cr_expect_str_eq(out, "m:1 [lower data]\n");
	free(out);
	/* ...the lister settles l0 first (hunion-layers(7)), which refuses
	 * it, before m's directory is handed over */
	out = walk_deferred_bottom(true, &rc, &e);
	cr_expect_eq(rc, -1);
	cr_expect(strstr(e.msg, "mixed formats"), "%s", e.msg);
	cr_expect_str_eq(out, "");
	free(out);
	hu_error_clear(&e);
}

Test(walk, xattr_name_lists_longer_than_the_first_ask_are_read_whole)
{
	struct hu_stack s;
	struct hu_error e = { 0 };
	char name[64], want[2048] = "f=", *got;

	/* 20 names of 40 bytes: more than the 512 hu_listxattr_at asks
	 * for first */
	tu_file("up/f", "");
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "user.%02d%s", i,
			 "-a-long-name-to-fill-the-list-xxxxxx");
		tu_xattr("up/f", name, "v");
		snprintf(want + strlen(want), sizeof(want) - strlen(want),
			 "[%s]", name);
	}
	strcat(want, "\n");
	tu_mkdir("lo");
	cr_assert_eq(tu_stack(&s, &e, 2, "lo", "up"), 0, "%s", e.msg);
	got = names_of(&s, true);
	/* listxattr's order is the filesystem's: compare as sets */
	cr_expect_eq(strlen(got), strlen(want), "%s", got);
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "[user.%02d%s]", i,
			 "-a-long-name-to-fill-the-list-xxxxxx");
		cr_expect(strstr(got, name), "%s missing: %s", name, got);
	}
	free(got);
	hu_stack_close(&s);
}

/* ---- opening files ahead (prefetch_data) ---------------------------- */

/* Regular files open in this process whose path starts with @prefix and
 * has no further '/' (files of that directory only), and all of them. */
static int open_files(const char *prefix, int *all)
{
	char target[4096];
	int n = 0, dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY);
	DIR *dir = fdopendir(dfd);
	struct dirent *de;
	struct stat st;
	size_t pl = strlen(prefix);

	cr_assert(dir);
	*all = 0;
	while ((de = readdir(dir))) {
		ssize_t len;

		if (de->d_name[0] == '.' || atoi(de->d_name) == dfd)
			continue;
		len = readlinkat(dfd, de->d_name, target, sizeof(target) - 1);
		if (len < 0 || fstatat(dfd, de->d_name, &st, 0) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		target[len] = '\0';
		(*all)++;
		if (!strncmp(target, prefix, pl) && !strchr(target + pl, '/'))
			n++;
	}
	closedir(dir);
	return n;
}

struct fetch {
	char *top;		/* "<layer>/d/": the directory with a subdirectory */
	int first_top, max_all, held_below, files;
};

static int fetch_entry(void *ctx, struct hu_vdir *d,
		       const struct hu_ventry *ent, struct hu_error *e)
{
	struct fetch *f = ctx;
	int all, top = open_files(f->top, &all);
	char c;
	int fd;

	if (all > f->max_all)
		f->max_all = all;
	if (!strcmp(hu_vdir_path(d), "d/m") && top > 0)
		f->held_below++;
	if (!S_ISREG(ent->st.st_mode))
		return 1;
	fd = hu_vdir_open_data(d, ent, NULL, e);
	if (fd < 0)
		return -1;
	cr_expect_eq(read(fd, &c, 1), 1, "%s", ent->name);
	cr_expect_eq(c, ent->name[0], "%s", ent->name);
	close(fd);
	if (f->files++ == 0)
		f->first_top = top;
	return 1;
}

Test(walk, files_opened_ahead_are_handed_out_and_bounded)
{
	struct hu_stack s;
	struct hu_error e = { 0 };
	char p[64];

	/* d: 40 files, the directory m (5 files), 10 more files */
	for (int i = 0; i < 40; i++) {
		snprintf(p, sizeof(p), "lo/d/a%02d", i);
		tu_file(p, "a");
	}
	for (int i = 0; i < 5; i++) {
		snprintf(p, sizeof(p), "lo/d/m/m%d", i);
		tu_file(p, "m");
	}
	for (int i = 0; i < 10; i++) {
		snprintf(p, sizeof(p), "lo/d/z%d", i);
		tu_file(p, "z");
	}
	tu_mkdir("up");
	cr_assert_eq(tu_stack(&s, &e, 2, "lo", "up"), 0, "%s", e.msg);
	for (int ahead = 0; ahead < 2; ahead++) {
		const struct hu_walk_ops ops = {
			.entry = fetch_entry, .list_ahead = ahead,
			.prefetch_data = true };
		struct fetch f = { 0 };
		int before, after;

		cr_assert(asprintf(&f.top, "%s/", tu_path("lo/d")) > 0);
		(void)open_files("", &before);
		cr_assert_eq(hu_view_walk(&s, &ops, &f, &e), 0, "%s", e.msg);
		(void)open_files("", &after);
		cr_expect_eq(f.files, 55);
		/* the first file's turn finds the next ones open... */
		cr_expect_gt(f.first_top, 1, "ahead %d", ahead);
		/* ...but never more than 16, none left over, and none of d
		 * while the walk is below it, in m */
		cr_expect_leq(f.max_all - before, 16, "ahead %d", ahead);
		cr_expect_eq(f.held_below, 0, "ahead %d", ahead);
		cr_expect_eq(after, before, "ahead %d", ahead);
		free(f.top);
	}
	hu_stack_close(&s);
}

Test(walk, a_file_that_cannot_be_opened_ahead_fails_in_its_turn)
{
	struct hu_error e[2] = { 0 };
	struct hu_stack s;
	char *out[2];
	int rc[2];

	/* up/b is a metacopy file with no data below it: opening it ahead
	 * fails silently, and its own turn reports it */
	tu_file("lo/x", "");
	tu_file("up/a", "a");
	tu_file("up/b", "");
	tu_xattr("up/b", "trusted.overlay.metacopy", "");
	tu_file("up/c", "c");
	tu_wh_overlay("up/w");
	cr_assert_eq(tu_stack(&s, &e[0], 2, "lo", "up"), 0);
	for (int ahead = 0; ahead < 2; ahead++)
		out[ahead] = tu_view_walk_data(&s, ahead, &rc[ahead], &e[ahead]);
	cr_expect_eq(rc[0], -1);
	cr_expect_eq(rc[1], -1);
	cr_expect_str_eq(e[0].msg, "metacopy file without lower data");
	cr_expect_str_eq(e[1].msg, e[0].msg);
	cr_expect_str_eq(e[1].path, e[0].path);
	/* a's data was read first, in both walks, and b failed */
	cr_expect_str_eq(out[0], "a:1 [a]\nb:1");
	cr_expect_str_eq(out[1], out[0]);
	for (int i = 0; i < 2; i++) {
		free(out[i]);
		hu_error_clear(&e[i]);
	}
	hu_stack_close(&s);
}
