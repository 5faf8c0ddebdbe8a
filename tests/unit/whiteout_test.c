/* SPDX-License-Identifier: MIT */
/* The markers of one layer: ls, add, rm, opaque and convert. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "testutil.h"

static void teardown(void)
{
	tu_cleanup();
}

TestSuite(whiteout, .fini = teardown);

/* ---- helpers ------------------------------------------------------------ */

static struct hu_layer open_as(const char *rel, enum hu_format f, bool user)
{
	struct hu_stack_opts o = { .format = f, .userxattr = user };
	struct hu_error e = { 0 };
	struct hu_layer l;

	cr_assert_eq(hu_layer_open(&l, tu_path(rel), &o, &e), 0, "%s: %s",
		     e.path, e.msg);
	return l;
}

static struct hu_layer open_layer(const char *rel)
{
	return open_as(rel, HU_FMT_AUTO, false);
}

static int add_line(void *ctx, const struct hu_wh_marker *m,
		    struct hu_error *e)
{
	FILE *f = ctx;

	fprintf(f, "%s %s", hu_wh_kind_name(m->kind), m->path);
	if (m->target)
		fprintf(f, " -> %s", m->target);
	fprintf(f, " (%s%s)\n", hu_format_name(m->format),
		m->userxattr ? " user" : "");
	return 0;
}

/* The markers of layer @rel as "kind path (format)" lines. */
static char *ls_of(const char *rel, enum hu_format f)
{
	struct hu_layer l = open_as(rel, f, false);
	struct hu_error e = { 0 };
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	int rc = hu_wh_list(&l, add_line, out, &e);

	fclose(out);
	cr_assert_eq(rc, 0, "ls: %s: %s", e.path, e.msg);
	hu_layer_close(&l);
	return buf;
}

#define expect_ls(rel, f, want)                                         \
	do {                                                            \
		char *g_ = ls_of(rel, f);                               \
		cr_expect_str_eq(g_, want);                             \
		free(g_);                                               \
	} while (0)

/* The merged view of lower @lo under @up, as tu_view_dump() gives it. */
static char *view_of(const char *lo, const char *up)
{
	struct hu_stack s;
	struct hu_error e = { 0 };
	char *d;

	cr_assert_eq(tu_stack(&s, &e, 2, lo, up), 0, "%s: %s", e.path, e.msg);
	d = tu_view_dump(&s);
	hu_stack_close(&s);
	return d;
}

/* Edit one path of layer @rel; returns what the call returned. */
static int edit(const char *rel, char op, const char *path, bool dry,
		struct hu_error *e)
{
	struct hu_layer l = open_layer(rel);
	struct hu_wh_edit o = { HU_FMT_AUTO, dry };
	int rc;

	if (op == 'a')
		rc = hu_wh_add(&l, &o, path, e);
	else if (op == 'r')
		rc = hu_wh_remove(&l, &o, path, e);
	else
		rc = hu_wh_set_opaque(&l, &o, path, op == 'o', e);
	hu_layer_close(&l);
	return rc;
}

static int convert(const char *rel, enum hu_format from, enum hu_format to,
		   bool to_user, const char *out, struct hu_error *e)
{
	struct hu_layer l = open_as(rel, from, false);
	struct hu_convert_opts o = { .to = to, .to_userxattr = to_user };
	struct hu_convert_stats st;
	int rc = hu_wh_convert(&l, out ? tu_path(out) : NULL, &o, &st, e);

	hu_layer_close(&l);
	return rc;
}

static bool is_union_whiteout(const char *rel)
{
	char t[64] = "", v = 0;
	ssize_t n = readlink(tu_path(rel), t, sizeof(t) - 1);

	return n == 16 && !strcmp(t, "(union-whiteout)") &&
	       lgetxattr(tu_path(rel), "trusted.union.whiteout", &v, 1) == 1 &&
	       v == 'y';
}

static bool is_overlay_whiteout(const char *rel)
{
	struct stat st;

	return lstat(tu_path(rel), &st) == 0 && S_ISCHR(st.st_mode) &&
	       st.st_rdev == makedev(0, 0);
}

static bool has_xattr(const char *rel, const char *name)
{
	return lgetxattr(tu_path(rel), name, NULL, 0) >= 0;
}

/* A lower layer and a union upper with every kind of union marker and
 * a few ordinary entries. */
static void union_stack(void)
{
	tu_file("lo/a/f", "lower f");
	tu_file("lo/a/keep", "kept");
	tu_file("lo/d/old", "");
	tu_file("lo/top", "");
	tu_file("lo/g/k", "");
	tu_file("up/a/new", "new");
	tu_symlink("target", "up/a/link");
	tu_wh_union("up/a/f");
	tu_wh_union("up/top");
	tu_wh_union("up/g/k");
	tu_opaque("up/d", "union");
	tu_file("up/d/mine", "");
}

/* ---- ls ---------------------------------------------------------------- */

Test(whiteout, ls_union_sorted_depth_first)
{
	union_stack();
	tu_opaque("up", "union");
	expect_ls("up", HU_FMT_AUTO,
		  "opaque . (union)\n"
		  "whiteout a/f (union)\n"
		  "opaque d (union)\n"
		  "whiteout g/k (union)\n"
		  "whiteout top (union)\n");
}

Test(whiteout, ls_overlay_redirect_metacopy_and_xattr_whiteouts)
{
	tu_wh_overlay("o/wh");
	tu_mknod("o/not", S_IFCHR, 0, 1);
	tu_mkdir("o/r");
	tu_xattr("o/r", "trusted.overlay.redirect", "/elsewhere");
	tu_file("o/mc", "");
	tu_xattr("o/mc", "trusted.overlay.metacopy", "");
	tu_mkdir("o/x");
	tu_xattr("o/x", "trusted.overlay.opaque", "x");
	tu_file("o/x/xw", "");
	tu_xattr("o/x/xw", "trusted.overlay.whiteout", "");
	tu_file("o/x/full", "data");
	tu_xattr("o/x/full", "trusted.overlay.whiteout", "");
	expect_ls("o", HU_FMT_AUTO,
		  "metacopy mc (overlay)\n"
		  "redirect r -> /elsewhere (overlay)\n"
		  "whiteout wh (overlay)\n"
		  "xwhiteout x/xw (overlay)\n");
}

Test(whiteout, ls_oci_by_hidden_name_with_twins)
{
	tu_file("c/.wh.b", "");
	tu_file("c/a.b", "");
	tu_mkdir("c/b/in");
	tu_file("c/b/in/.wh..wh..opq", "");
	tu_file("c/.wh..wh.plnk", "");
	/* ".wh.b" sorts before "a.b", but b is listed after a.b */
	expect_ls("c", HU_FMT_AUTO,
		  "whiteout b (oci)\n"
		  "opaque b/in (oci)\n");
}

Test(whiteout, ls_empty_layer_lists_nothing)
{
	tu_file("plain/a/b", "x");
	expect_ls("plain", HU_FMT_AUTO, "");
}

Test(whiteout, ls_does_not_follow_symlinks)
{
	tu_wh_union("elsewhere/hidden");
	tu_wh_union("u/x");
	tu_symlink(tu_path("elsewhere"), "u/link");
	expect_ls("u", HU_FMT_AUTO, "whiteout x (union)\n");
}

/* ---- add ------------------------------------------------------------------ */

Test(whiteout, add_writes_the_layer_format)
{
	struct hu_error e = { 0 };

	tu_wh_union("u/x");
	tu_mkdir("u/d");
	tu_wh_overlay("o/x");
	tu_mkdir("o/d");
	tu_file("c/.wh.x", "");
	tu_mkdir("c/d");
	cr_assert_eq(edit("u", 'a', "d/y", false, &e), 0, "%s", e.msg);
	cr_assert_eq(edit("o", 'a', "/d/y", false, &e), 0, "%s", e.msg);
	cr_assert_eq(edit("c", 'a', "./d//y", false, &e), 0, "%s", e.msg);
	cr_expect(is_union_whiteout("u/d/y"));
	cr_expect(is_overlay_whiteout("o/d/y"));
	cr_expect(tu_exists("c/d/.wh.y"));
	cr_expect(!tu_exists("c/d/y"));
}

Test(whiteout, add_to_a_layer_without_markers)
{
	struct hu_layer l;
	struct hu_wh_edit o = { HU_FMT_AUTO, false };
	struct hu_error e = { 0 };

	tu_mkdir("p");
	tu_mkdir("u");
	tu_mkdir("q");
	/* the default: what the running kernel mounts */
	tu_file("no-union", "nodev\toverlay\n");
	tu_file("union", "nodev\toverlay\nnodev\tunion\n");
	setenv("HUNION_FILESYSTEMS", tu_path("no-union"), 1);
	cr_assert_eq(edit("p", 'a', "x", false, &e), 0, "%s", e.msg);
	cr_expect(is_overlay_whiteout("p/x"), "overlay without union fs");
	setenv("HUNION_FILESYSTEMS", tu_path("union"), 1);
	cr_assert_eq(edit("u", 'a', "x", false, &e), 0, "%s", e.msg);
	cr_expect(is_union_whiteout("u/x"), "union with the union fs");
	unsetenv("HUNION_FILESYSTEMS");
	l = open_layer("q");
	o.format = HU_FMT_OCI;
	cr_assert_eq(hu_wh_add(&l, &o, "x", &e), 0, "%s", e.msg);
	hu_layer_close(&l);
	cr_expect(tu_exists("q/.wh.x"));
}

Test(whiteout, add_refuses_a_format_the_layer_does_not_use)
{
	struct hu_layer l;
	struct hu_wh_edit o = { HU_FMT_OVERLAY, false };
	struct hu_error e = { 0 };

	tu_wh_union("u/x");
	l = open_layer("u");
	cr_expect_eq(hu_wh_add(&l, &o, "y", &e), -1);
	cr_expect(strstr(e.msg, "mix formats") != NULL, "%s", e.msg);
	hu_layer_close(&l);
	cr_expect(!tu_exists("u/y"));
	hu_error_clear(&e);
}

Test(whiteout, add_over_an_existing_whiteout_is_a_no_op)
{
	struct hu_error e = { 0 };

	tu_wh_union("u/x");
	tu_file("c/.wh.x", "");
	cr_expect_eq(edit("u", 'a', "x", false, &e), 1);
	cr_expect_eq(edit("c", 'a', "x", false, &e), 1);
	cr_expect(is_union_whiteout("u/x"));
}

Test(whiteout, add_refuses_bad_paths_and_changes_nothing)
{
	struct hu_error e = { 0 };

	tu_wh_union("u/x");
	tu_file("u/a/file", "data");
	tu_mkdir("outside");
	tu_symlink(tu_path("outside"), "u/link");
	tu_symlink("a", "u/rel");

	cr_expect_eq(edit("u", 'a', "a/file", false, &e), -1);
	cr_expect_str_eq(e.path, tu_path("u/a/file"));
	cr_expect_str_eq(e.msg, "exists; remove it first");
	cr_expect_str_eq(tu_read("u/a/file"), "data");

	cr_expect_eq(edit("u", 'a', "a/../y", false, &e), -1);
	cr_expect(strstr(e.msg, "'..'") != NULL, "%s", e.msg);
	cr_expect(!tu_exists("y"));

	cr_expect_eq(edit("u", 'a', "link/y", false, &e), -1);
	cr_expect_str_eq(e.path, tu_path("u/link/y"));
	cr_expect(strstr(e.msg, "symlink") != NULL, "%s", e.msg);
	cr_expect(!tu_exists("outside/y"));

	cr_expect_eq(edit("u", 'a', "rel/y", false, &e), -1);
	cr_expect(!tu_exists("u/a/y"));

	cr_expect_eq(edit("u", 'a', "nope/y", false, &e), -1);
	cr_expect_eq(e.err, ENOENT);
	cr_expect_str_eq(e.path, tu_path("u/nope/y"));

	cr_expect_eq(edit("u", 'a', "a/file/y", false, &e), -1);
	cr_expect_eq(e.err, ENOTDIR);

	cr_expect_eq(edit("u", 'a', "/", false, &e), -1);
	cr_expect(strstr(e.msg, "root") != NULL, "%s", e.msg);
	hu_error_clear(&e);
}

Test(whiteout, add_beyond_path_max)
{
	struct hu_error e = { 0 };
	char *path = malloc(PATH_MAX * 2), *p = path;
	int fd;

	tu_mkdir("u");
	tu_wh_union("u/w");
	fd = open(tu_path("u"), O_RDONLY | O_DIRECTORY);
	for (int i = 0; i < 60; i++) {
		static const char name[] = "a-rather-long-directory-name-"
					   "to-pass-path-max-soon-enough"
					   "-0123456789-0123456789-01234";
		int next;

		cr_assert_eq(mkdirat(fd, name, 0755), 0);
		next = openat(fd, name, O_RDONLY | O_DIRECTORY);
		close(fd);
		fd = next;
		p += sprintf(p, "%s/", name);
	}
	strcpy(p, "deep");
	cr_assert_gt(strlen(path), PATH_MAX);
	cr_expect_eq(edit("u", 'a', path, false, &e), 0, "%s", e.msg);
	cr_expect_eq(fstatat(fd, "deep", &(struct stat){ 0 },
			     AT_SYMLINK_NOFOLLOW), 0);
	cr_expect_eq(edit("u", 'r', path, false, &e), 0, "%s", e.msg);
	close(fd);
	free(path);
}

/* ---- rm ------------------------------------------------------------------ */

Test(whiteout, rm_removes_only_whiteouts)
{
	struct hu_error e = { 0 };

	tu_wh_union("u/x");
	tu_symlink("(union-whiteout)", "u/lookalike");
	tu_file("u/file", "");
	cr_expect_eq(edit("u", 'r', "x", false, &e), 0, "%s", e.msg);
	cr_expect(!tu_exists("u/x"));
	cr_expect_eq(edit("u", 'r', "lookalike", false, &e), -1);
	cr_expect_str_eq(e.msg, "not a whiteout");
	cr_expect(tu_exists("u/lookalike"));
	cr_expect_eq(edit("u", 'r', "file", false, &e), -1);
	cr_expect(tu_exists("u/file"));
	cr_expect_eq(edit("u", 'r', "missing", false, &e), -1);
	cr_expect_eq(e.err, ENOENT);
	hu_error_clear(&e);
}

Test(whiteout, rm_oci_removes_the_wh_file)
{
	struct hu_error e = { 0 };

	tu_file("c/d/.wh.x", "");
	tu_file("c/d/y", "");
	cr_expect_eq(edit("c", 'r', "d/x", false, &e), 0, "%s", e.msg);
	cr_expect(!tu_exists("c/d/.wh.x"));
	cr_expect_eq(edit("c", 'r', "d/y", false, &e), -1);
	cr_expect(tu_exists("c/d/y"));
	hu_error_clear(&e);
}

Test(whiteout, rm_overlay_xattr_whiteout)
{
	struct hu_error e = { 0 };

	tu_wh_overlay("o/w");
	tu_mkdir("o/x");
	tu_xattr("o/x", "trusted.overlay.opaque", "x");
	tu_file("o/x/xw", "");
	tu_xattr("o/x/xw", "trusted.overlay.whiteout", "");
	cr_expect_eq(edit("o", 'r', "x/xw", false, &e), 0, "%s", e.msg);
	cr_expect(!tu_exists("o/x/xw"));
}

/* ---- opaque ---------------------------------------------------------------- */

Test(whiteout, opaque_set_and_clear_in_each_format)
{
	struct hu_error e = { 0 };

	tu_wh_union("u/w");
	tu_mkdir("u/d");
	tu_wh_overlay("o/w");
	tu_mkdir("o/d");
	tu_file("c/.wh.w", "");
	tu_mkdir("c/d");
	cr_assert_eq(edit("u", 'o', "d", false, &e), 0, "%s", e.msg);
	cr_assert_eq(edit("o", 'o', "d", false, &e), 0, "%s", e.msg);
	cr_assert_eq(edit("c", 'o', "d", false, &e), 0, "%s", e.msg);
	cr_expect(has_xattr("u/d", "trusted.union.opaque"));
	cr_expect(has_xattr("o/d", "trusted.overlay.opaque"));
	cr_expect(tu_exists("c/d/.wh..wh..opq"));
	cr_expect_eq(edit("u", 'o', "d", false, &e), 1);
	cr_assert_eq(edit("u", 'c', "d", false, &e), 0, "%s", e.msg);
	cr_assert_eq(edit("o", 'c', "d", false, &e), 0, "%s", e.msg);
	cr_assert_eq(edit("c", 'c', "d", false, &e), 0, "%s", e.msg);
	cr_expect(!has_xattr("u/d", "trusted.union.opaque"));
	cr_expect(!has_xattr("o/d", "trusted.overlay.opaque"));
	cr_expect(!tu_exists("c/d/.wh..wh..opq"));
	cr_expect_eq(edit("u", 'c', "d", false, &e), 1);
}

Test(whiteout, opaque_root_and_refusals)
{
	struct hu_error e = { 0 };

	tu_wh_union("u/w");
	tu_file("u/f", "");
	tu_mkdir("u/real");
	tu_symlink("real", "u/sl");
	cr_assert_eq(edit("u", 'o', "/", false, &e), 0, "%s", e.msg);
	cr_expect(has_xattr("u", "trusted.union.opaque"));
	cr_expect_eq(edit("u", 'o', "f", false, &e), -1);
	cr_expect_eq(e.err, ENOTDIR);
	cr_expect_eq(edit("u", 'o', "sl", false, &e), -1);
	cr_expect(!has_xattr("u/real", "trusted.union.opaque"));
	hu_error_clear(&e);
}

Test(whiteout, overlay_x_is_not_opaque_and_clear_keeps_it)
{
	struct hu_error e = { 0 };
	char v = 0;

	tu_wh_overlay("o/w");
	tu_mkdir("o/x");
	tu_xattr("o/x", "trusted.overlay.opaque", "x");
	cr_expect_eq(edit("o", 'c', "x", false, &e), 1);
	cr_expect_eq(getxattr(tu_path("o/x"), "trusted.overlay.opaque", &v,
			      1), 1);
	cr_expect_eq(v, 'x');
}

Test(whiteout, dry_run_edits_nothing)
{
	struct hu_error e = { 0 };

	tu_wh_union("u/w");
	tu_mkdir("u/d");
	cr_expect_eq(edit("u", 'a', "x", true, &e), 0, "%s", e.msg);
	cr_expect_eq(edit("u", 'r', "w", true, &e), 0, "%s", e.msg);
	cr_expect_eq(edit("u", 'o', "d", true, &e), 0, "%s", e.msg);
	cr_expect(!tu_exists("u/x"));
	cr_expect(is_union_whiteout("u/w"));
	cr_expect(!has_xattr("u/d", "trusted.union.opaque"));
	/* and the refusals are the same as for real */
	cr_expect_eq(edit("u", 'r', "d", true, &e), -1);
	hu_error_clear(&e);
}

/* ---- convert ------------------------------------------------------------- */

Test(whiteout, convert_copy_round_trip_keeps_the_view)
{
	struct hu_error e = { 0 };
	char *want, *got;

	union_stack();
	want = view_of("lo", "up");
	cr_assert_eq(convert("up", HU_FMT_AUTO, HU_FMT_OVERLAY, false, "ov",
			     &e), 0, "%s: %s", e.path, e.msg);
	cr_assert_eq(convert("ov", HU_FMT_AUTO, HU_FMT_OCI, false, "oci",
			     &e), 0, "%s: %s", e.path, e.msg);
	cr_assert_eq(convert("oci", HU_FMT_AUTO, HU_FMT_UNION, false, "un",
			     &e), 0, "%s: %s", e.path, e.msg);
	cr_expect(is_overlay_whiteout("ov/a/f"));
	cr_expect(has_xattr("ov/d", "trusted.overlay.opaque"));
	cr_expect(tu_exists("oci/a/.wh.f"));
	cr_expect(tu_exists("oci/d/.wh..wh..opq"));
	cr_expect(is_union_whiteout("un/a/f"));
	cr_expect(has_xattr("un/d", "trusted.union.opaque"));
	cr_expect_str_eq(tu_read("un/a/new"), "new");
	for (const char *const *l = (const char *const[]){ "ov", "oci", "un",
							    NULL }; *l; l++) {
		got = view_of("lo", *l);
		cr_expect_str_eq(got, want, "view with %s", *l);
		free(got);
	}
	free(want);
}

Test(whiteout, convert_in_place_round_trip_keeps_the_view_and_times)
{
	struct hu_error e = { 0 };
	struct stat before, after;
	char *want, *got;

	union_stack();
	want = view_of("lo", "up");
	cr_assert_eq(lstat(tu_path("up/a"), &before), 0);
	cr_assert_eq(convert("up", HU_FMT_AUTO, HU_FMT_OVERLAY, false, NULL,
			     &e), 0, "%s: %s", e.path, e.msg);
	cr_expect(is_overlay_whiteout("up/a/f"));
	cr_expect(!has_xattr("up/d", "trusted.union.opaque"));
	cr_assert_eq(convert("up", HU_FMT_AUTO, HU_FMT_OCI, false, NULL, &e),
		     0, "%s: %s", e.path, e.msg);
	cr_expect(tu_exists("up/a/.wh.f") && !tu_exists("up/a/f"));
	cr_expect(!has_xattr("up/d", "trusted.overlay.opaque"));
	got = view_of("lo", "up");
	cr_expect_str_eq(got, want);
	free(got);
	cr_assert_eq(convert("up", HU_FMT_AUTO, HU_FMT_UNION, false, NULL, &e),
		     0, "%s: %s", e.path, e.msg);
	cr_expect(is_union_whiteout("up/a/f"));
	cr_expect(!tu_exists("up/d/.wh..wh..opq"));
	got = view_of("lo", "up");
	cr_expect_str_eq(got, want);
	cr_assert_eq(lstat(tu_path("up/a"), &after), 0);
	cr_expect_eq(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
	cr_expect_eq(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
	free(got);
	free(want);
}

Test(whiteout, convert_refuses_redirects_outside_overlay_and_changes_nothing)
{
	struct hu_error e = { 0 };

	tu_wh_overlay("o/a/w");
	tu_mkdir("o/b/r");
	tu_xattr("o/b/r", "trusted.overlay.redirect", "/old");
	cr_expect_eq(convert("o", HU_FMT_AUTO, HU_FMT_OCI, false, NULL, &e),
		     -1);
	cr_expect_str_eq(e.path, tu_path("o/b/r"));
	cr_expect(strstr(e.msg, "redirect") != NULL, "%s", e.msg);
	cr_expect(is_overlay_whiteout("o/a/w"), "nothing was changed");
	cr_expect(!tu_exists("o/a/.wh.w"));
	cr_expect_eq(convert("o", HU_FMT_AUTO, HU_FMT_UNION, false, "new",
			     &e), -1);
	cr_expect(!tu_exists("new"));
	/* overlay to overlay keeps it (in the user namespace) */
	cr_expect_eq(convert("o", HU_FMT_AUTO, HU_FMT_OVERLAY, true, "user",
			     &e), 0, "%s", e.msg);
	cr_expect(has_xattr("user/b/r", "user.overlay.redirect"));
	cr_expect(!has_xattr("user/b/r", "trusted.overlay.redirect"));
	hu_error_clear(&e);
}

Test(whiteout, convert_refuses_metacopy_outside_overlay)
{
	struct hu_error e = { 0 };

	tu_file("o/m", "");
	tu_xattr("o/m", "trusted.overlay.metacopy", "");
	tu_wh_overlay("o/w");
	cr_expect_eq(convert("o", HU_FMT_AUTO, HU_FMT_UNION, false, NULL, &e),
		     -1);
	cr_expect_str_eq(e.path, tu_path("o/m"));
	cr_expect(is_overlay_whiteout("o/w"));
	hu_error_clear(&e);
}

Test(whiteout, convert_copy_refuses_an_existing_or_inner_output)
{
	struct hu_error e = { 0 };

	tu_wh_union("u/w");
	tu_file("taken/x", "mine");
	cr_expect_eq(convert("u", HU_FMT_AUTO, HU_FMT_OCI, false, "taken",
			     &e), -1);
	cr_expect_eq(e.err, 0);
	cr_expect_str_eq(e.msg, "exists and is not empty (an empty directory "
			 "is replaced)");
	cr_expect_str_eq(tu_read("taken/x"), "mine");
	cr_expect(!tu_exists("taken/.wh.w"));
	cr_expect_eq(convert("u", HU_FMT_AUTO, HU_FMT_OCI, false, "u/in",
			     &e), -1);
	cr_expect(strstr(e.msg, "inside layer") != NULL, "%s", e.msg);
	cr_expect(!tu_exists("u/in"));
	hu_error_clear(&e);
}

Test(whiteout, convert_copy_refuses_entries_that_would_become_markers)
{
	struct hu_error e = { 0 };

	tu_wh_union("u/w");
	tu_file("u/.wh.plain", "");
	cr_expect_eq(convert("u", HU_FMT_AUTO, HU_FMT_OCI, false, "c", &e),
		     -1);
	cr_expect_str_eq(e.path, tu_path("u/.wh.plain"));
	cr_expect(!tu_exists("c"));
	tu_mknod("u2/dev", S_IFCHR, 0, 0);
	tu_file("u2/.wh.x", "");	/* an OCI layer then */
	cr_expect_eq(convert("u2", HU_FMT_OCI, HU_FMT_OVERLAY, false, "o",
			     &e), -1);
	cr_expect_str_eq(e.path, tu_path("u2/dev"));
	cr_expect(!tu_exists("o"));
	hu_error_clear(&e);
}

Test(whiteout, convert_refuses_union_whiteouts_under_user)
{
	struct hu_error e = { 0 };

	tu_wh_overlay("o/w");
	cr_expect_eq(convert("o", HU_FMT_AUTO, HU_FMT_UNION, true, NULL, &e),
		     -1);
	cr_expect(strstr(e.msg, "user.*") != NULL, "%s", e.msg);
	cr_expect(is_overlay_whiteout("o/w"));
	hu_error_clear(&e);
}

Test(whiteout, convert_oci_whiteout_of_an_own_entry)
{
	struct hu_error e = { 0 };
	char *want, *got;

	tu_file("lo/d/old", "");
	tu_file("lo/f", "lower");
	tu_file("lo/gone", "");
	tu_file("c/.wh.d", "");
	tu_file("c/d/new", "");
	tu_file("c/.wh.f", "");
	tu_file("c/f", "upper");
	tu_file("c/.wh.gone", "");
	tu_file("c/.wh..wh..aufs", "");
	want = view_of("lo", "c");
	cr_assert_eq(convert("c", HU_FMT_AUTO, HU_FMT_UNION, false, "u", &e),
		     0, "%s: %s", e.path, e.msg);
	cr_expect(has_xattr("u/d", "trusted.union.opaque"));
	cr_expect_str_eq(tu_read("u/f"), "upper");
	cr_expect(is_union_whiteout("u/gone"));
	cr_expect(!tu_exists("u/.wh..wh..aufs"));
	got = view_of("lo", "u");
	cr_expect_str_eq(got, want);
	free(got);
	cr_assert_eq(convert("c", HU_FMT_AUTO, HU_FMT_OVERLAY, false, NULL,
			     &e), 0, "%s: %s", e.path, e.msg);
	cr_expect(has_xattr("c/d", "trusted.overlay.opaque"));
	cr_expect(!tu_exists("c/.wh.d") && !tu_exists("c/.wh.f"));
	cr_expect(!tu_exists("c/.wh..wh..aufs"));
	got = view_of("lo", "c");
	cr_expect_str_eq(got, want);
	free(got);
	free(want);
}

Test(whiteout, convert_copy_keeps_data_links_modes_and_xattrs)
{
	struct hu_error e = { 0 };
	struct stat a, b, c;
	char v[8] = "";

	tu_wh_union("u/w");
	tu_file("u/d/f", "data");
	cr_assert_eq(link(tu_path("u/d/f"), tu_path("u/d/g")), 0);
	cr_assert_eq(chmod(tu_path("u/d/f"), 04750), 0);
	cr_assert_eq(lchown(tu_path("u/d/f"), 123, 456), 0);
	tu_xattr("u/d/f", "user.k", "v");
	tu_mknod("u/d/fifo", S_IFIFO | 0640, 0, 0);
	cr_assert_eq(convert("u", HU_FMT_AUTO, HU_FMT_OVERLAY, false, "o",
			     &e), 0, "%s: %s", e.path, e.msg);
	cr_assert_eq(lstat(tu_path("o/d/f"), &a), 0);
	cr_assert_eq(lstat(tu_path("o/d/g"), &b), 0);
	cr_assert_eq(lstat(tu_path("u/d/f"), &c), 0);
	cr_expect_eq(a.st_ino, b.st_ino, "hard link kept");
	cr_expect_eq(a.st_mode, c.st_mode);
	cr_expect_eq(a.st_uid, 123);
	cr_expect_eq(a.st_gid, 456);
	cr_expect_eq(a.st_mtim.tv_nsec, c.st_mtim.tv_nsec);
	cr_expect_str_eq(tu_read("o/d/g"), "data");
	cr_expect_eq(getxattr(tu_path("o/d/f"), "user.k", v, sizeof(v)), 1);
	cr_assert_eq(lstat(tu_path("o/d/fifo"), &a), 0);
	cr_expect(S_ISFIFO(a.st_mode));
}

Test(whiteout, convert_dry_run_writes_nothing)
{
	struct hu_layer l;
	struct hu_convert_opts o = { .to = HU_FMT_OCI, .dry_run = true };
	struct hu_convert_stats st;
	struct hu_error e = { 0 };

	union_stack();
	l = open_layer("up");
	cr_expect_eq(hu_wh_convert(&l, NULL, &o, &st, &e), 0, "%s", e.msg);
	cr_expect_eq(st.converted, 4);
	cr_expect_eq(hu_wh_convert(&l, tu_path("new"), &o, &st, &e), 0);
	hu_layer_close(&l);
	cr_expect(is_union_whiteout("up/a/f"));
	cr_expect(!tu_exists("up/a/.wh.f"));
	cr_expect(!tu_exists("new"));
}

Test(whiteout, convert_copy_failure_leaves_nothing)
{
	struct hu_error e = { 0 };
	char cmd[256];

	union_stack();
	setenv("HUNION_FAULT", "mknod:2", 1);
	cr_expect_eq(convert("up", HU_FMT_AUTO, HU_FMT_OVERLAY, false, "o",
			     &e), -1);
	cr_expect_eq(e.err, EIO);
	snprintf(cmd, sizeof(cmd), "ls -a '%s' | grep -q hunion",
		 tu_tmpdir());
	cr_expect(!tu_exists("o"));
	cr_expect_neq(system(cmd), 0, "no temporary left");
	hu_error_clear(&e);
}

Test(whiteout, convert_in_place_interrupted_then_finished)
{
	struct hu_error e = { 0 };
	struct hu_stack_opts so = { 0 };
	struct hu_layer l;
	char *want, *got;

	union_stack();
	want = view_of("lo", "up");
	setenv("HUNION_FAULT", "rename:2", 1);
	cr_expect_eq(convert("up", HU_FMT_AUTO, HU_FMT_OVERLAY, false, NULL,
			     &e), -1);
	/* no name lost its whiteout on the way */
	cr_expect(is_union_whiteout("up/g/k") || is_overlay_whiteout("up/g/k"));
	cr_expect(is_union_whiteout("up/top") || is_overlay_whiteout("up/top"));
	/* half-converted: known by its record, read in both formats, so
	 * its view is the one it had; only a conversion touches it */
	unsetenv("HUNION_FAULT");
	cr_assert_eq(hu_layer_open(&l, tu_path("up"), &so, &e), 0, "%s: %s",
		     e.path, e.msg);
	cr_expect_eq(l.format, HU_FMT_UNION);
	cr_expect_eq(l.conv_to, HU_FMT_OVERLAY);
	hu_layer_close(&l);
	got = view_of("lo", "up");
	cr_expect_str_eq(got, want);
	free(got);
	cr_expect_eq(convert("up", HU_FMT_AUTO, HU_FMT_OCI, false, NULL, &e),
		     -1);
	cr_expect(strstr(e.msg, "half-converted from union to overlay"),
		  "%s", e.msg);
	/* the same command again finishes it, and the record goes */
	cr_assert_eq(convert("up", HU_FMT_AUTO, HU_FMT_OVERLAY, false, NULL,
			     &e), 0, "%s: %s", e.path, e.msg);
	cr_expect(!has_xattr("up", "trusted.union.converting"));
	expect_ls("up", HU_FMT_AUTO, "whiteout a/f (overlay)\n"
		  "opaque d (overlay)\n"
		  "whiteout g/k (overlay)\n"
		  "whiteout top (overlay)\n");
	got = view_of("lo", "up");
	cr_expect_str_eq(got, want);
	free(got);
	free(want);
	hu_error_clear(&e);
}

/* A layer half-way from OCI to union, as a run killed there leaves it:
 * each marker in one format or the other (or both), a temporary
 * whiteout.  Its view is the one it had. */
Test(whiteout, half_converted_layer_reads_both_formats)
{
	char *want, *got;

	tu_file("lo/a", "a");
	tu_file("lo/b", "b");
	tu_file("lo/c", "c");
	tu_file("lo/d/old", "");
	tu_file("lo/e/old", "");
	tu_file("up/.wh.a", "");
	tu_file("up/.wh.b", "");
	tu_file("up/.wh.c", "");
	tu_file("up/.wh.d", "");
	tu_file("up/d/new", "");
	tu_file("up/e/.wh..wh..opq", "");
	tu_file("up/e/mine", "");
	want = view_of("lo", "up");
	/* half-way: b done, c's union whiteout made and its OCI one gone
	 * (with a temporary whiteout left), d made opaque, e too */
	tu_wh_union("up/b");
	unlink(tu_path("up/.wh.b"));
	tu_wh_union("up/c");
	unlink(tu_path("up/.wh.c"));
	tu_wh_union("up/.hunion-wh.123456");
	tu_opaque("up/d", "union");
	unlink(tu_path("up/.wh.d"));
	tu_opaque("up/e", "union");
	unlink(tu_path("up/e/.wh..wh..opq"));
	tu_xattr("up", "trusted.union.converting", "oci>union");
	got = view_of("lo", "up");
	cr_expect_str_eq(got, want);
	free(got);
	/* c's OCI whiteout still there, the temporary one gone */
	tu_file("up/.wh.c", "");
	unlink(tu_path("up/.hunion-wh.123456"));
	got = view_of("lo", "up");
	cr_expect_str_eq(got, want);
	free(got);
	/* without the record, the layer reads as union: wrong */
	removexattr(tu_path("up"), "trusted.union.converting");
	got = view_of("lo", "up");
	cr_expect_str_neq(got, want);
	free(got);
	free(want);
}

Test(whiteout, convert_overlay_xattr_whiteouts)
{
	struct hu_error e = { 0 };

	tu_wh_overlay("o/w");
	tu_mkdir("o/x");
	tu_xattr("o/x", "trusted.overlay.opaque", "x");
	tu_file("o/x/xw", "");
	tu_xattr("o/x/xw", "trusted.overlay.whiteout", "");
	tu_file("o/x/plain", "");
	cr_assert_eq(convert("o", HU_FMT_AUTO, HU_FMT_OCI, false, "c", &e), 0,
		     "%s: %s", e.path, e.msg);
	cr_expect(tu_exists("c/x/.wh.xw") && !tu_exists("c/x/xw"));
	cr_expect(tu_exists("c/x/plain"));
	cr_expect(!has_xattr("c/x", "trusted.overlay.opaque"));
	cr_assert_eq(convert("o", HU_FMT_AUTO, HU_FMT_UNION, false, NULL, &e),
		     0, "%s: %s", e.path, e.msg);
	cr_expect(is_union_whiteout("o/x/xw"));
	cr_expect(!has_xattr("o/x", "trusted.overlay.opaque"), "x removed");
	expect_ls("o", HU_FMT_AUTO, "whiteout w (union)\n"
		  "whiteout x/xw (union)\n");
}
