/* SPDX-License-Identifier: MIT */
/*
 * The problems detection and the view meet, through the caller's sink:
 * each under FAIL (the call fails naming the ID), WARN (a warning, the
 * reader goes on), COLLECT (the callback gets id, layer, path, detail) and
 * without a sink (what the reader always did).
 */
#include <sys/xattr.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "testutil.h"

enum mode { NO_SINK, FAIL, WARN, COLLECT };

#define MAX_GOT 8
struct got {
	int n;
	enum hu_problem_id id[MAX_GOT];
	char layer[MAX_GOT][256];
	char path[MAX_GOT][256];
	char detail[MAX_GOT][256];	/* "-" for NULL */
};
static struct got got;
static int warned;
static char warning[512];

static int collect(void *ctx, const struct hu_problem *p, struct hu_error *e)
{
	int i = got.n++;

	cr_assert_lt(i, MAX_GOT);
	got.id[i] = p->id;
	snprintf(got.layer[i], sizeof(got.layer[i]), "%s", p->layer);
	snprintf(got.path[i], sizeof(got.path[i]), "%s", p->path);
	snprintf(got.detail[i], sizeof(got.detail[i]), "%s",
		 p->detail ? p->detail : "-");
	return 0;
}

static void warn(void *ctx, const struct hu_error *w)
{
	warned++;
	snprintf(warning, sizeof(warning), "%s: %s", w->path ? w->path : "",
		 w->msg);
}

static const struct hu_report report = { .warn = warn };
static const struct hu_problem_sink sinks[] = {
	[FAIL] = { HU_PB_FAIL, NULL, NULL },
	[WARN] = { HU_PB_WARN, NULL, NULL },
	[COLLECT] = { HU_PB_COLLECT, collect, NULL },
};

static void teardown(void)
{
	tu_cleanup();
}

TestSuite(viewproblem, .fini = teardown);

static struct hu_stack_opts opts(enum mode m)
{
	struct hu_stack_opts o = { .report = &report };

	if (m != NO_SINK)
		o.problems = &sinks[m];
	return o;
}

/* Open the stack of @n layers (relative to the test dir) with sink @m. */
static int stack(enum mode m, struct hu_stack *s, struct hu_error *e, int n,
		 ...)
{
	struct hu_stack_opts o = opts(m);
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

/* One walk of the view of @s reading every file: its lines, *@rc. */
static char *walk(const struct hu_stack *s, bool ahead, int *rc,
		  struct hu_error *e)
{
	return tu_view_walk_data(s, ahead, rc, e);
}

static void expect_got(int i, enum hu_problem_id id, const char *layer,
		       const char *path, const char *detail)
{
	cr_assert_gt(got.n, i, "problem %d not reported", i);
	cr_expect_eq(got.id[i], id, "%s", hu_problem_info(got.id[i])->id);
	cr_expect_str_eq(got.layer[i], tu_path(layer));
	cr_expect_str_eq(got.path[i], path);
	cr_expect_str_eq(got.detail[i], detail);
}

/* ---- metacopyNoData ------------------------------------------------- */

static void metacopy_without_data(void)
{
	tu_file("lo/other", "");
	tu_file("up/f", "");
	tu_xattr("up/f", "trusted.overlay.metacopy", "");
	tu_wh_overlay("up/w");
}

/* Open the data of @name at the view root. */
static int open_data(struct hu_stack *s, const char *name, struct hu_error *e)
{
	struct hu_vdir *root;
	struct hu_ventry ent;
	int fd;

	cr_assert_eq(hu_vdir_open_root(s, &root, e), 0);
	cr_assert_eq(hu_vdir_lookup(root, name, &ent, e), 1, "%s", e->msg);
	fd = hu_vdir_open_data(root, &ent, NULL, e);
	if (fd >= 0)
		close(fd);
	hu_vdir_close(root);
	return fd < 0 ? -1 : 0;
}

Test(viewproblem, metacopy_without_data_no_sink_fails_as_always)
{
	struct hu_stack s;
	struct hu_error e = { 0 };

	metacopy_without_data();
	cr_assert_eq(stack(NO_SINK, &s, &e, 2, "lo", "up"), 0, "%s", e.msg);
	cr_expect_eq(open_data(&s, "f", &e), -1);
	cr_expect_str_eq(e.msg, "metacopy file without lower data");
	cr_expect_str_eq(e.path, tu_path("up/f"));
	cr_expect_eq(e.err, ENOENT);
	cr_expect_eq(warned + got.n, 0);
	hu_stack_close(&s);
	hu_error_clear(&e);
}

Test(viewproblem, metacopy_without_data_fail_names_the_id)
{
	struct hu_stack s;
	struct hu_error e = { 0 };

	metacopy_without_data();
	cr_assert_eq(stack(FAIL, &s, &e, 2, "lo", "up"), 0, "%s", e.msg);
	cr_expect_eq(open_data(&s, "f", &e), -1);
	cr_expect(strstr(e.msg, "(metacopyNoData)"), "%s", e.msg);
	cr_expect_str_eq(e.path, tu_path("up/f"));
	cr_expect_eq(e.err, ENOENT);
	hu_stack_close(&s);
	hu_error_clear(&e);
}

Test(viewproblem, metacopy_without_data_warn_warns_then_still_fails)
{
	struct hu_stack s;
	struct hu_error e = { 0 };

	metacopy_without_data();
	cr_assert_eq(stack(WARN, &s, &e, 2, "lo", "up"), 0, "%s", e.msg);
	cr_expect_eq(open_data(&s, "f", &e), -1);
	cr_expect_eq(warned, 1);
	cr_expect(strstr(warning, "metacopyNoData"), "%s", warning);
	cr_expect(strstr(warning, "up/f"), "%s", warning);
	/* nothing to hand out: the error it always was */
	cr_expect_str_eq(e.msg, "metacopy file without lower data");
	hu_stack_close(&s);
	hu_error_clear(&e);
}

Test(viewproblem, metacopy_without_data_collect_once_even_when_opened_ahead)
{
	struct hu_stack s;
	struct hu_error e = { 0 };
	int rc;

	metacopy_without_data();
	cr_assert_eq(stack(COLLECT, &s, &e, 2, "lo", "up"), 0, "%s", e.msg);
	cr_expect_eq(open_data(&s, "f", &e), -1);
	cr_expect_eq(got.n, 1);
	expect_got(0, HU_PB_METACOPY_NO_DATA, "up", "f", "-");
	hu_error_clear(&e);
	/* the walk opening files ahead fails there too; the problem is
	 * reported once, at the file's turn, not by the prefetch */
	got.n = 0;
	free(walk(&s, true, &rc, &e));
	cr_expect_eq(rc, -1);
	cr_expect_eq(got.n, 1);
	expect_got(0, HU_PB_METACOPY_NO_DATA, "up", "f", "-");
	hu_stack_close(&s);
	hu_error_clear(&e);
}

Test(viewproblem, metacopy_data_not_a_file_is_reported_with_detail)
{
	struct hu_stack s;
	struct hu_error e = { 0 };

	tu_mknod("lo/f", S_IFCHR | 0644, 1, 3);
	tu_file("up/f", "");
	tu_xattr("up/f", "trusted.overlay.metacopy", "");
	tu_wh_overlay("up/w");
	cr_assert_eq(stack(NO_SINK, &s, &e, 2, "lo", "up"), 0, "%s", e.msg);
	cr_expect_eq(open_data(&s, "f", &e), -1);
	cr_expect_str_eq(e.msg, "metacopy data is not a file");
	cr_expect_eq(e.err, EIO);
	hu_stack_close(&s);
	hu_error_clear(&e);

	cr_assert_eq(stack(COLLECT, &s, &e, 2, "lo", "up"), 0, "%s", e.msg);
	cr_expect_eq(open_data(&s, "f", &e), -1);
	cr_expect_eq(got.n, 1);
	expect_got(0, HU_PB_METACOPY_NO_DATA, "up", "f",
		   "what lies below is not a regular file");
	hu_stack_close(&s);
	hu_error_clear(&e);
}

/* A metacopy file in a middle layer, reached through the upper's
 * redirect: its path is the one in its own layer. */
Test(viewproblem, metacopy_path_is_relative_to_its_own_layer)
{
	struct hu_stack s;
	struct hu_error e = { 0 };
	int rc;

	tu_file("lo/x", "");
	tu_file("mid/old/f", "");
	tu_xattr("mid/old/f", "trusted.overlay.metacopy", "");
	tu_wh_overlay("mid/w");
	tu_mkdir("up/new");
	tu_xattr("up/new", "trusted.overlay.redirect", "/old");
	tu_wh_overlay("up/old");
	cr_assert_eq(stack(COLLECT, &s, &e, 3, "lo", "mid", "up"), 0, "%s",
		     e.msg);
	free(walk(&s, false, &rc, &e));
	cr_expect_eq(rc, -1);
	cr_expect_eq(got.n, 1);
	expect_got(0, HU_PB_METACOPY_NO_DATA, "mid", "old/f", "-");
	hu_stack_close(&s);
	hu_error_clear(&e);
}

/* ---- redirectInvalid ------------------------------------------------ */

static void redirect_dotdot(void)
{
	tu_file("lo/d/f", "");
	tu_mkdir("up/e");
	tu_xattr("up/e", "trusted.overlay.redirect", "/../d");
}

Test(viewproblem, invalid_redirect_no_sink_is_silently_none)
{
	struct hu_stack s;
	struct hu_error e = { 0 };

	redirect_dotdot();
	cr_assert_eq(stack(NO_SINK, &s, &e, 2, "lo", "up"), 0, "%s", e.msg);
	tu_expect_str(tu_view_dump(&s), "d:0\nd/f:0\ne:1\n");
	cr_expect_eq(warned + got.n, 0);
	hu_stack_close(&s);
}

Test(viewproblem, invalid_redirect_fail_names_the_id)
{
	struct hu_stack s;
	struct hu_error e = { 0 };
	int rc;

	redirect_dotdot();
	cr_assert_eq(stack(FAIL, &s, &e, 2, "lo", "up"), 0, "%s", e.msg);
	free(walk(&s, false, &rc, &e));
	cr_expect_eq(rc, -1);
	cr_expect(strstr(e.msg, "(redirectInvalid): /../d"), "%s", e.msg);
	cr_expect_str_eq(e.path, tu_path("up/e"));
	hu_stack_close(&s);
	hu_error_clear(&e);
}

Test(viewproblem, invalid_redirect_warn_warns_and_reads_on_without_it)
{
	struct hu_stack s;
	struct hu_error e = { 0 };
	int rc;
	char *lines;

	redirect_dotdot();
	cr_assert_eq(stack(WARN, &s, &e, 2, "lo", "up"), 0, "%s", e.msg);
	lines = walk(&s, false, &rc, &e);
	cr_expect_eq(rc, 0, "%s", e.msg);
	cr_expect_str_eq(lines, "d:0\nd/f:0 []\ne:1\n");
	free(lines);
	cr_expect_eq(warned, 1);
	cr_expect(strstr(warning, "redirectInvalid"), "%s", warning);
	hu_stack_close(&s);
}

Test(viewproblem, invalid_redirect_collect_gets_layer_path_and_value)
{
	struct hu_stack s;
	struct hu_error e = { 0 };
	int rc;
	char *lines;

	redirect_dotdot();
	cr_assert_eq(stack(COLLECT, &s, &e, 2, "lo", "up"), 0, "%s", e.msg);
	lines = walk(&s, false, &rc, &e);
	cr_expect_eq(rc, 0, "%s", e.msg);
	cr_expect_str_eq(lines, "d:0\nd/f:0 []\ne:1\n");
	free(lines);
	cr_expect_eq(got.n, 1);
	expect_got(0, HU_PB_REDIRECT_INVALID, "up", "e", "/../d");
	hu_stack_close(&s);
}

/* Met while looking a redirected path up in a lower layer, and on a
 * metacopy file: each at its path in its own layer. */
Test(viewproblem, invalid_redirect_below_and_on_metacopy_file)
{
	struct hu_stack s;
	struct hu_error e = { 0 };
	int rc;
	char *lines;

	tu_file("lo/a/b/f", "lower");
	tu_mkdir("mid/a/b");
	tu_xattr("mid/a", "trusted.overlay.redirect", "x/y");
	tu_wh_overlay("mid/w");
	tu_mkdir("up/c");
	tu_xattr("up/c", "trusted.overlay.redirect", "/a/b");
	tu_file("up/m", "");
	cr_assert_eq(truncate(tu_path("up/m"), 5), 0);
	tu_xattr("up/m", "trusted.overlay.metacopy", "");
	tu_xattr("up/m", "trusted.overlay.redirect", "a/b");
	tu_file("lo/m", "lower");
	cr_assert_eq(stack(COLLECT, &s, &e, 3, "lo", "mid", "up"), 0, "%s",
		     e.msg);
	lines = walk(&s, false, &rc, &e);
	cr_expect_eq(rc, 0, "%s", e.msg);
	cr_expect_str_eq(lines, "a:1\na/b:1\na/b/f:0 [lower]\nc:2\n"
			 "c/f:0 [lower]\nm:2 [lower]\n", "%s", lines);
	free(lines);
	cr_expect_eq(got.n, 3, "%d", got.n);
	expect_got(0, HU_PB_REDIRECT_INVALID, "mid", "a", "x/y");
	expect_got(1, HU_PB_REDIRECT_INVALID, "mid", "a", "x/y");
	expect_got(2, HU_PB_REDIRECT_INVALID, "up", "m", "a/b");
	hu_stack_close(&s);
}

/* ---- ociWhiteoutInvalid --------------------------------------------- */

static void oci_hiding_nothing(void)
{
	tu_file("lo/a", "");
	tu_file("lo/b", "");
	tu_file("up/.wh.a", "");
	tu_file("up/d/.wh.", "");
	tu_file("up/.wh..", "");
}

Test(viewproblem, oci_whiteout_hiding_nothing_no_sink_fails_as_always)
{
	struct hu_stack s;
	struct hu_error e = { 0 };
	int rc;

	oci_hiding_nothing();
	cr_assert_eq(stack(NO_SINK, &s, &e, 2, "lo", "up"), 0, "%s", e.msg);
	cr_expect_eq(s.layers[1].format, HU_FMT_OCI);
	free(walk(&s, false, &rc, &e));
	cr_expect_eq(rc, -1);
	cr_expect(strstr(e.msg, "invalid OCI whiteout name"), "%s", e.msg);
	cr_expect_str_eq(e.path, tu_path("up/.wh.."));
	hu_stack_close(&s);
	hu_error_clear(&e);
}

Test(viewproblem, oci_whiteout_hiding_nothing_fail_names_the_id)
{
	struct hu_stack s;
	struct hu_error e = { 0 };
	int rc;

	oci_hiding_nothing();
	cr_assert_eq(stack(FAIL, &s, &e, 2, "lo", "up"), 0, "%s", e.msg);
	free(walk(&s, false, &rc, &e));
	cr_expect_eq(rc, -1);
	cr_expect(strstr(e.msg, "(ociWhiteoutInvalid)"), "%s", e.msg);
	cr_expect_str_eq(e.path, tu_path("up/.wh.."));
	hu_stack_close(&s);
	hu_error_clear(&e);
}

Test(viewproblem, oci_whiteout_hiding_nothing_warn_and_collect_read_on)
{
	struct hu_stack s;
	struct hu_error e = { 0 };
	int rc;
	char *lines;

	oci_hiding_nothing();
	cr_assert_eq(stack(WARN, &s, &e, 2, "lo", "up"), 0, "%s", e.msg);
	lines = walk(&s, false, &rc, &e);
	cr_expect_eq(rc, 0, "%s", e.msg);
	/* neither shown nor hiding anything */
	cr_expect_str_eq(lines, "b:0 []\nd:1\n");
	free(lines);
	cr_expect_eq(warned, 2);
	cr_expect(strstr(warning, "ociWhiteoutInvalid"), "%s", warning);
	hu_stack_close(&s);

	cr_assert_eq(stack(COLLECT, &s, &e, 2, "lo", "up"), 0, "%s", e.msg);
	lines = walk(&s, false, &rc, &e);
	cr_expect_eq(rc, 0, "%s", e.msg);
	cr_expect_str_eq(lines, "b:0 []\nd:1\n");
	free(lines);
	cr_expect_eq(got.n, 2);
	expect_got(0, HU_PB_OCI_WHITEOUT_INVALID, "up", ".wh..", "-");
	expect_got(1, HU_PB_OCI_WHITEOUT_INVALID, "up", "d/.wh.", "-");
	hu_stack_close(&s);
}

/* ---- formatMixed ------------------------------------------------------ */

static int open_layer(enum mode m, struct hu_layer *l, const char *path,
		      struct hu_error *e)
{
	struct hu_stack_opts o = opts(m);

	return hu_layer_open(l, tu_path(path), &o, e);
}

/* overlay at a and x, union at b/c: overlay is the first met and most */
static void mixed(void)
{
	tu_wh_overlay("m/a");
	tu_wh_union("m/b/c");
	tu_wh_overlay("m/x");
}

Test(viewproblem, mixed_layer_no_sink_is_refused_as_always)
{
	struct hu_error e = { 0 };
	struct hu_layer l;

	mixed();
	cr_assert_eq(open_layer(NO_SINK, &l, "m", &e), -1);
	cr_expect_str_eq(e.path, tu_path("m/b/c"));
	cr_expect(strstr(e.msg, "mixed formats"), "%s", e.msg);
	hu_error_clear(&e);
}

Test(viewproblem, mixed_layer_fail_names_the_id)
{
	struct hu_error e = { 0 };
	struct hu_layer l;

	mixed();
	cr_assert_eq(open_layer(FAIL, &l, "m", &e), -1);
	cr_expect_str_eq(e.path, tu_path("m/b/c"));
	cr_expect(strstr(e.msg, "(formatMixed)"), "%s", e.msg);
	hu_error_clear(&e);
}

Test(viewproblem, mixed_layer_warn_opens_in_the_majority_format)
{
	struct hu_error e = { 0 };
	struct hu_layer l;

	mixed();
	cr_assert_eq(open_layer(WARN, &l, "m", &e), 0, "%s", e.msg);
	cr_expect_eq(l.format, HU_FMT_OVERLAY);
	cr_expect_eq(warned, 1);
	cr_expect(strstr(warning, "formatMixed"), "%s", warning);
	cr_expect(strstr(warning, "m/b/c"), "%s", warning);
	hu_layer_close(&l);
}

Test(viewproblem, mixed_layer_collect_reports_each_foreign_marker)
{
	struct hu_error e = { 0 };
	struct hu_layer l;

	mixed();
	tu_opaque("m/u", "union");
	tu_mkdir("m/v");
	tu_xattr("m/v", "trusted.overlay.redirect", "/q");
	tu_xattr("m/v", "trusted.overlay.impure", "y");
	cr_assert_eq(open_layer(COLLECT, &l, "m", &e), 0, "%s", e.msg);
	cr_expect_eq(l.format, HU_FMT_OVERLAY);
	cr_expect_eq(got.n, 2);
	expect_got(0, HU_PB_FORMAT_MIXED, "m", "b/c",
		   "union marker in a layer read as overlay (3 overlay "
		   "markers, 2 union)");
	expect_got(1, HU_PB_FORMAT_MIXED, "m", "u",
		   "union marker in a layer read as overlay (3 overlay "
		   "markers, 2 union)");
	hu_layer_close(&l);
}

Test(viewproblem, mixed_layer_majority_wins_over_the_first_marker)
{
	struct hu_error e = { 0 };
	struct hu_layer l;

	tu_wh_overlay("m/a");
	tu_wh_union("m/b");
	tu_wh_union("m/c");
	cr_assert_eq(open_layer(COLLECT, &l, "m", &e), 0, "%s", e.msg);
	cr_expect_eq(l.format, HU_FMT_UNION);
	cr_expect_eq(got.n, 1);
	expect_got(0, HU_PB_FORMAT_MIXED, "m", "a",
		   "overlay marker in a layer read as union (2 union "
		   "markers, 1 overlay)");
	hu_layer_close(&l);
}

/* Files a first walk passes by once an overlay marker and the namespace
 * are known still count once the layer turns out mixed: three metacopy
 * files outweigh the union whiteouts met after them. */
Test(viewproblem, mixed_layer_counts_the_files_met_before_the_mix)
{
	struct hu_error e = { 0 };
	struct hu_layer l;

	tu_opaque("m/a", "overlay");
	for (int i = 0; i < 3; i++) {
		char rel[16];

		snprintf(rel, sizeof(rel), "m/b/f%d", i);
		tu_file(rel, "");
		tu_xattr(rel, "trusted.overlay.metacopy", "");
	}
	tu_wh_union("m/c");
	tu_wh_union("m/d");
	tu_wh_union("m/e");
	cr_assert_eq(open_layer(COLLECT, &l, "m", &e), 0, "%s", e.msg);
	cr_expect_eq(l.format, HU_FMT_OVERLAY);
	cr_expect_eq(got.n, 3);
	expect_got(0, HU_PB_FORMAT_MIXED, "m", "c",
		   "union marker in a layer read as overlay (4 overlay "
		   "markers, 3 union)");
	hu_layer_close(&l);
}

Test(viewproblem, mixed_layer_tie_is_reported_and_read_as_the_first_marker)
{
	struct hu_error e = { 0 };
	struct hu_layer l;

	tu_wh_union("m/a");
	tu_wh_overlay("m/b");
	cr_assert_eq(open_layer(COLLECT, &l, "m", &e), 0, "%s", e.msg);
	cr_expect_eq(l.format, HU_FMT_UNION);
	cr_expect(l.format_tied);
	cr_expect_eq(got.n, 2);
	expect_got(0, HU_PB_FORMAT_TIED, "m", "",
		   "1 union and 1 overlay markers; read as union, the first "
		   "met");
	expect_got(1, HU_PB_FORMAT_MIXED, "m", "b",
		   "overlay marker in a layer read as union (1 union "
		   "markers, 1 overlay)");
	hu_layer_close(&l);
}

/* A tie broken by a workdir given: the stack is an overlay's. */
Test(viewproblem, mixed_layer_tie_goes_to_overlay_with_a_workdir)
{
	struct hu_stack_opts o = opts(COLLECT);
	struct hu_error e = { 0 };
	struct hu_layer l;

	tu_wh_union("m/a");
	tu_wh_overlay("m/b");
	o.workdir_given = true;
	cr_assert_eq(hu_layer_open(&l, tu_path("m"), &o, &e), 0, "%s", e.msg);
	cr_expect_eq(l.format, HU_FMT_OVERLAY);
	cr_expect(!l.format_tied);
	cr_expect_eq(got.n, 1);
	expect_got(0, HU_PB_FORMAT_MIXED, "m", "a",
		   "union marker in a layer read as overlay (1 overlay "
		   "markers, 1 union)");
	hu_layer_close(&l);
}

/* A tie broken by private xattrs that are no markers (the kernel's
 * origin on a copied-up file). */
Test(viewproblem, mixed_layer_tie_goes_to_the_format_of_private_xattrs)
{
	struct hu_error e = { 0 };
	struct hu_layer l;

	tu_wh_union("m/a");
	tu_wh_overlay("m/b");
	tu_file("m/c", "c");
	cr_assert_eq(lsetxattr(tu_path("m/c"), "trusted.overlay.origin", "x",
			       1, 0), 0);
	cr_assert_eq(open_layer(COLLECT, &l, "m", &e), 0, "%s", e.msg);
	cr_expect_eq(l.format, HU_FMT_OVERLAY);
	cr_expect(!l.format_tied);
	hu_layer_close(&l);
}

/* A stack with a sink: detected layer after layer, the mixed one read in
 * its majority format by the view (the union whiteout an ordinary
 * symlink there). */
Test(viewproblem, mixed_layer_in_a_stack_is_read_on_with_collect)
{
	struct hu_stack s;
	struct hu_error e = { 0 };
	int rc;
	char *lines;

	tu_file("lo/a", "");
	tu_file("lo/b/c", "");
	tu_file("lo/k", "");
	mixed();
	tu_wh_union("n/y");	/* another mixed layer, reported after m */
	tu_wh_overlay("n/z");
	tu_wh_overlay("n/k");
	cr_assert_eq(stack(NO_SINK, &s, &e, 3, "lo", "m", "n"), -1);
	hu_error_clear(&e);
	cr_assert_eq(stack(COLLECT, &s, &e, 3, "lo", "m", "n"), 0, "%s",
		     e.msg);
	cr_expect_eq(s.problems, &sinks[COLLECT]);
	cr_expect_eq(got.n, 2);
	expect_got(0, HU_PB_FORMAT_MIXED, "m", "b/c",
		   "union marker in a layer read as overlay (2 overlay "
		   "markers, 1 union)");
	expect_got(1, HU_PB_FORMAT_MIXED, "n", "y",
		   "union marker in a layer read as overlay (2 overlay "
		   "markers, 1 union)");
	lines = walk(&s, false, &rc, &e);
	cr_expect_eq(rc, 0, "%s", e.msg);
	cr_expect_str_eq(lines, "b:1\nb/c:1\ny:2\n", "%s", lines);
	free(lines);
	hu_stack_close(&s);
}
