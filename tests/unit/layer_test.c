/* SPDX-License-Identifier: MIT */
/* Layers and stacks: detection of the format and refusals. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"
#include "internal.h"

static void teardown(void)
{
	tu_cleanup();
}

TestSuite(layer, .fini = teardown);

static enum hu_format detect(const char *rel)
{
	struct hu_stack_opts o = { 0 };
	struct hu_error e = { 0 };
	struct hu_layer l;
	enum hu_format f;

	cr_assert_eq(hu_layer_open(&l, tu_path(rel), &o, &e), 0, "%s: %s",
		     e.path, e.msg);
	f = l.format;
	hu_layer_close(&l);
	return f;
}

Test(layer, detects_each_format)
{
	tu_file("plain/a", "");
	tu_wh_union("u/x");
	tu_wh_overlay("o/d/x");
	tu_opaque("o2/d", "overlay");
	tu_file("oci/d/.wh.x", "");
	cr_expect_eq(detect("plain"), HU_FMT_NONE);
	cr_expect_eq(detect("u"), HU_FMT_UNION);
	cr_expect_eq(detect("o"), HU_FMT_OVERLAY);
	cr_expect_eq(detect("o2"), HU_FMT_OVERLAY);
	cr_expect_eq(detect("oci"), HU_FMT_OCI);
}

Test(layer, wh_file_in_an_overlay_layer_is_not_oci)
{
	tu_file("o/.wh.x", "");
	tu_wh_overlay("o/y");
	cr_expect_eq(detect("o"), HU_FMT_OVERLAY);
}

Test(layer, mixed_union_and_overlay_is_refused_naming_the_path)
{
	struct hu_stack_opts o = { 0 };
	struct hu_error e = { 0 };
	struct hu_layer l;

	tu_wh_overlay("m/a");
	tu_wh_union("m/b/c");
	cr_assert_eq(hu_layer_open(&l, tu_path("m"), &o, &e), -1);
	cr_expect_str_eq(e.path, tu_path("m/b/c"));
	cr_expect(strstr(e.msg, "mixed formats") != NULL, "%s", e.msg);
	hu_error_clear(&e);
}

/* The layers of a stack are detected in parallel: each gets its own
 * format, and of two broken layers the lowest is the one reported. */
Test(layer, stack_layers_detected_together_lowest_error_wins)
{
	struct hu_stack s;
	struct hu_error e = { 0 };

	tu_file("plain/f", "");
	tu_wh_union("un/a");
	tu_wh_overlay("ov/a");
	tu_mkdir("ovu/d");
	tu_xattr("ovu/d", "user.overlay.opaque", "y");
	cr_assert_eq(tu_stack(&s, &e, 4, "plain", "un", "ov", "ovu"), 0,
		     "%s", e.msg);
	cr_expect_eq(s.layers[0].format, HU_FMT_NONE);
	cr_expect_eq(s.layers[1].format, HU_FMT_UNION);
	cr_expect_eq(s.layers[2].format, HU_FMT_OVERLAY);
	cr_expect(!s.layers[2].userxattr);
	cr_expect_eq(s.layers[3].format, HU_FMT_OVERLAY);
	cr_expect(s.layers[3].userxattr);
	hu_stack_close(&s);

	for (int i = 0; i < 3; i++) {
		char p[32];

		snprintf(p, sizeof(p), "m%d/a", i);
		tu_wh_overlay(p);
		snprintf(p, sizeof(p), "m%d/b/c", i);
		tu_wh_union(p);
	}
	cr_assert_eq(tu_stack(&s, &e, 5, "plain", "m1", "un", "m0", "m2"),
		     -1);
	cr_expect_str_eq(e.path, tu_path("m1/b/c"));
	cr_expect(strstr(e.msg, "mixed formats") != NULL, "%s", e.msg);
	hu_error_clear(&e);
}

Test(layer, user_namespace_detected)
{
	struct hu_stack_opts o = { 0 };
	struct hu_error e = { 0 };
	struct hu_layer l;

	tu_mkdir("u/d");
	tu_xattr("u/d", "user.overlay.opaque", "y");
	cr_assert_eq(hu_layer_open(&l, tu_path("u"), &o, &e), 0);
	cr_expect_eq(l.format, HU_FMT_OVERLAY);
	cr_expect(l.userxattr);
	hu_layer_close(&l);
}

Test(layer, refuses_missing_file_and_duplicate_layers)
{
	struct hu_stack s;
	struct hu_error e = { 0 };

	tu_mkdir("a");
	tu_file("f", "not a tarball");
	cr_expect_eq(tu_stack(&s, &e, 1, "missing"), -1);
	cr_expect_str_eq(e.msg, "no such layer");
	cr_expect_eq(tu_stack(&s, &e, 1, "f"), -1);
	cr_expect_str_eq(e.msg, "not a directory, nor a tarball");
	cr_expect_eq(tu_stack(&s, &e, 2, "a", "a/."), -1);
	cr_expect(strstr(e.msg, "the same directory") != NULL);
	hu_error_clear(&e);
}

Test(layer, format_names_round_trip)
{
	enum hu_format f;

	cr_expect_eq(hu_format_parse("overlay", &f), 0);
	cr_expect_eq(f, HU_FMT_OVERLAY);
	cr_expect_eq(hu_format_parse("none", &f), -1);
	cr_expect_eq(hu_format_parse("zip", &f), -1);
	cr_expect_str_eq(hu_format_name(HU_FMT_OCI), "oci");
}

Test(layer, private_xattrs)
{
	cr_expect(hu_xattr_is_private("trusted.overlay.origin"));
	cr_expect(hu_xattr_is_private("user.union.opaque"));
	cr_expect(!hu_xattr_is_private("user.overlayish"));
	cr_expect(!hu_xattr_is_private("security.capability"));
}

Test(layer, device_whiteouts_do_not_decide_the_namespace)
{
	struct hu_stack_opts o = { 0 };
	struct hu_error e = { 0 };
	struct hu_layer l;

	tu_wh_overlay("u/a");
	tu_mkdir("u/d");
	tu_xattr("u/d", "user.overlay.opaque", "y");
	cr_assert_eq(hu_layer_open(&l, tu_path("u"), &o, &e), 0);
	cr_expect(l.userxattr);
	hu_layer_close(&l);
}

Test(layer, overlay_bookkeeping_on_a_directory_marks_an_overlay_layer)
{
	tu_mkdir("u/d");
	tu_xattr("u/d", "trusted.overlay.origin", "x");
	tu_file("u/d/f", "");
	tu_xattr("u/d/f", "trusted.overlay.metacopy", "");
	cr_expect_eq(detect("u"), HU_FMT_OVERLAY);
}

/* An xattr whiteout is the kernel's in any layer: a layer holding nothing
 * else is an overlay layer (its namespace the xattr's).  A file with data
 * carrying the xattr is no whiteout, and says nothing. */
Test(layer, xattr_whiteout_alone_marks_an_overlay_layer)
{
	struct hu_stack_opts o = { 0 };
	struct hu_error e = { 0 };
	struct hu_layer l;

	tu_file("x/d/a", "");
	tu_xattr("x/d/a", "trusted.overlay.whiteout", "y");
	tu_file("data/d/a", "data");
	tu_xattr("data/d/a", "trusted.overlay.whiteout", "y");
	tu_file("u/a", "");
	tu_xattr("u/a", "user.overlay.whiteout", "");
	cr_expect_eq(detect("x"), HU_FMT_OVERLAY);
	cr_expect_eq(detect("data"), HU_FMT_NONE);
	cr_assert_eq(hu_layer_open(&l, tu_path("u"), &o, &e), 0, "%s", e.msg);
	cr_expect_eq(l.format, HU_FMT_OVERLAY);
	cr_expect(l.userxattr);
	hu_layer_close(&l);
}

/* lo and @top opened (with find_refs when @ask): the top layer's
 * answers, refs and hu_layer_files_plain(). */
static enum hu_refs refs_of_plain(const char *top, bool ask, bool *plain)
{
	struct hu_stack_opts o = { .find_refs = ask };
	struct hu_error e = { 0 };
	struct hu_stack s;
	char *paths[2] = { strdup(tu_path("lo")), strdup(tu_path(top)) };
	enum hu_refs r;

	cr_assert_eq(hu_stack_open(&s, paths, 2, &o, &e), 0, "%s", e.msg);
	r = s.layers[1].refs;
	*plain = hu_layer_files_plain(&s.layers[1]);
	/* not asked */
	cr_expect_eq(s.layers[0].refs, HU_REFS_UNKNOWN);
	cr_expect_not(hu_layer_files_plain(&s.layers[0]));
	hu_stack_close(&s);
	free(paths[0]);
	free(paths[1]);
	return r;
}

static enum hu_refs refs_of(const char *top, bool ask)
{
	bool plain;

	return refs_of_plain(top, ask, &plain);
}

static bool plain_of(const char *top)
{
	bool plain;

	refs_of_plain(top, true, &plain);
	return plain;
}

/* What merge --into asks to skip its search for redirected directories
 * and metacopy files: detection lists every regular file's xattrs too. */
Test(layer, find_refs_answers_for_the_top_layer)
{
	tu_file("lo/d/f", "data");
	tu_file("plain/d/g", "");
	tu_wh_overlay("plain/d/f");
	tu_xattr("plain/d/g", "user.other", "1");
	tu_file("meta/d/f", "");
	tu_xattr("meta/d/f", "trusted.overlay.metacopy", "");
	tu_wh_overlay("meta/x");
	tu_mkdir("moved/e");
	tu_xattr("moved/e", "trusted.overlay.redirect", "/d");
	tu_file("usermeta/d/f", "");
	tu_xattr("usermeta/d/f", "user.overlay.metacopy", "");
	tu_wh_overlay("usermeta/x");
	cr_expect_eq(refs_of("plain", true), HU_REFS_NONE);
	cr_expect_eq(refs_of("meta", true), HU_REFS_SOME);
	cr_expect_eq(refs_of("moved", true), HU_REFS_SOME);
	cr_expect_eq(refs_of("usermeta", true), HU_REFS_SOME);
	cr_expect_eq(refs_of("meta", false), HU_REFS_UNKNOWN);
}

/* merge --into moves a regular file without stripping its xattrs only
 * where detection saw no private xattr on any regular file: a copied-up
 * file's origin, past the first file already found with one, counts. */
Test(layer, files_plain_only_without_private_file_xattrs)
{
	tu_file("lo/d/f", "data");
	tu_file("plain/d/g", "");
	tu_xattr("plain/d/g", "user.other", "1");
	tu_wh_overlay("plain/d/f");
	tu_mkdir("plain/e");
	tu_xattr("plain/e", "trusted.overlay.origin", "x");
	tu_file("origin/a", "");
	tu_xattr("origin/a", "trusted.overlay.metacopy", "");
	tu_file("origin/b", "");
	tu_xattr("origin/b", "trusted.overlay.origin", "x");
	tu_wh_overlay("origin/x");
	tu_file("dironly/b", "");
	tu_mkdir("dironly/e");
	tu_xattr("dironly/e", "trusted.overlay.redirect", "/d");
	cr_expect(plain_of("plain"));
	cr_expect_not(plain_of("origin"));
	cr_expect_not(plain_of("dironly"));	/* refs: phase 1 runs */
}

/* An upper whose only overlay markers are metacopy files (or a redirect
 * on a file): overlay, in either namespace. */
Test(layer, metacopy_files_alone_make_an_overlay_layer)
{
	tu_file("m/f", "");
	tu_xattr("m/f", "trusted.overlay.metacopy", "");
	tu_file("mu/f", "");
	tu_xattr("mu/f", "user.overlay.metacopy", "");
	tu_file("r/f", "");
	tu_xattr("r/f", "trusted.overlay.redirect", "/g");
	cr_expect_eq(detect("m"), HU_FMT_OVERLAY);
	cr_expect_eq(detect("mu"), HU_FMT_OVERLAY);
	cr_expect_eq(detect("r"), HU_FMT_OVERLAY);
}

/* The formats of the layers of the stack @n paths make, bottom first. */
static void stack_formats(size_t n, const char *const rel[],
			  enum hu_format f[], size_t defer_below)
{
	struct hu_stack_opts o = { .defer_below = defer_below };
	struct hu_error e = { 0 };
	struct hu_stack s;
	char *paths[4];

	for (size_t i = 0; i < n; i++)
		paths[i] = strdup(tu_path(rel[i]));
	cr_assert_eq(hu_stack_open(&s, paths, n, &o, &e), 0, "%s", e.msg);
	for (size_t i = 0; i < n; i++) {
		cr_assert_eq(hu_layer_settle(&s.layers[i], &e), 0, "%s",
			     e.msg);
		f[i] = s.layers[i].format;
		free(paths[i]);
	}
	hu_stack_close(&s);
}

/* .wh. names alone make no OCI layer beside union or overlay layers, up
 * front or deferred; beside none they do. */
Test(layer, wh_names_alone_are_ordinary_in_a_kernel_stack)
{
	const char *kernel[] = { "base", "mid", "ovl" };
	const char *oci[] = { "base", "mid", "plain" };
	enum hu_format f[3];

	tu_file("base/.wh.notes", "");
	tu_file("mid/.wh.n", "");
	tu_wh_overlay("ovl/a");
	tu_file("plain/a", "");
	for (size_t defer = 0; defer < 3; defer++) {
		stack_formats(3, kernel, f, defer);
		cr_expect_eq(f[0], HU_FMT_NONE, "defer %zu", defer);
		cr_expect_eq(f[1], HU_FMT_NONE, "defer %zu", defer);
		cr_expect_eq(f[2], HU_FMT_OVERLAY, "defer %zu", defer);
		stack_formats(3, oci, f, defer);
		cr_expect_eq(f[0], HU_FMT_OCI, "defer %zu", defer);
		cr_expect_eq(f[1], HU_FMT_OCI, "defer %zu", defer);
		cr_expect_eq(f[2], HU_FMT_NONE, "defer %zu", defer);
	}
}

/* Set user.tick on @rel until its ctime is no longer @was (the kernel's
 * coarse clock may take a tick to move): a change the ctime shows. */
static void change_root(const char *rel, const struct timespec *was)
{
	struct stat st;
	char v[16];

	for (unsigned i = 0;; i++) {
		snprintf(v, sizeof(v), "%u", i);
		tu_xattr(rel, "user.tick", v);
		cr_assert_eq(stat(tu_path(rel), &st), 0);
		if (st.st_ctim.tv_sec != was->tv_sec ||
		    st.st_ctim.tv_nsec != was->tv_nsec)
			return;
	}
}

/* A run that changes a layer in place locks it; if its root changed
 * since this run opened it (another run finished meanwhile), what this
 * run read of it may be stale: refused, and the lock let go. */
Test(layer, lock_change_refuses_a_layer_changed_since_it_was_opened)
{
	struct hu_stack_opts o = { 0 };
	struct hu_error e = { 0 };
	struct hu_layer l, again;
	struct stat st;

	tu_file("up/a", "a");
	cr_assert_eq(stat(tu_path("up"), &st), 0);
	change_root("up", &st.st_ctim);	/* not in the tick it was made */
	cr_assert_eq(hu_layer_open(&l, tu_path("up"), &o, &e), 0, "%s", e.msg);
	change_root("up", &l.ctime);
	cr_expect_eq(hu_layer_lock_change(&l, &e), -1);
	cr_expect_eq(e.err, EBUSY);
	cr_expect(strstr(e.msg, "changed since this run opened it"), "%s",
		  e.msg);
	hu_error_clear(&e);
	/* opened afresh: locked, and a second lock is refused as busy */
	cr_assert_eq(hu_layer_open(&again, tu_path("up"), &o, &e), 0, "%s",
		     e.msg);
	cr_expect_eq(hu_layer_lock_change(&again, &e), 0, "%s", e.msg);
	cr_expect_eq(hu_layer_lock_change(&l, &e), -1);
	cr_expect(strstr(e.msg, "another hunion run"), "%s", e.msg);
	hu_error_clear(&e);
	hu_layer_close(&again);
	hu_layer_close(&l);
}

/* hu_layer_marked_early() of layer @rel (read as NONE) within @dirs. */
static int marked_early(const char *rel, size_t dirs)
{
	struct hu_stack_opts o = { .format = HU_FMT_NONE };
	struct hu_error e = { 0 };
	struct hu_layer l;
	int rc;

	cr_assert_eq(hu_layer_open(&l, tu_path(rel), &o, &e), 0, "%s", e.msg);
	rc = hu_layer_marked_early(&l, dirs, &e);
	cr_assert_geq(rc, 0, "%s: %s", e.path, e.msg);
	hu_layer_close(&l);
	return rc;
}

Test(layer, early_look_sees_markers_within_its_directories)
{
	tu_file("plain/a/b/c", "x");
	tu_symlink("c", "plain/a/b/l");
	tu_wh_overlay("dev/a/b/x");
	tu_wh_union("lnk/a/x");
	tu_file("oci/a/.wh.x", "");
	tu_mkdir("dirx/a/b");
	tu_xattr("dirx/a/b", "trusted.overlay.opaque", "y");
	tu_file("filex/a/f", "");
	tu_xattr("filex/a/f", "user.overlay.metacopy", "");
	cr_expect_eq(marked_early("plain", 64), 0);
	cr_expect_eq(marked_early("dev", 64), 1);
	cr_expect_eq(marked_early("dev", 2), 0, "the third directory holds it");
	cr_expect_eq(marked_early("dev", 3), 1);
	cr_expect_eq(marked_early("lnk", 64), 1);
	cr_expect_eq(marked_early("oci", 64), 1);
	cr_expect_eq(marked_early("dirx", 64), 1);
	cr_expect_eq(marked_early("dirx", 2), 0);
	cr_expect_eq(marked_early("filex", 64), 1);
}

/* A stack of @bottom and "top", the bottom deferred with a look: is it
 * still deferred after the open, and in what format? */
static bool deferred_after_look(const char *bottom, enum hu_format *f)
{
	char *paths[] = { strdup(tu_path(bottom)), strdup(tu_path("top")) };
	struct hu_stack_opts o = { .defer_below = 1, .defer_look = 64 };
	struct hu_error e = { 0 };
	struct hu_stack s;
	bool deferred;
	int rc;

	cr_assert(paths[0] && paths[1]);
	rc = hu_stack_open(&s, paths, 2, &o, &e);
	free(paths[0]);
	free(paths[1]);
	cr_assert_eq(rc, 0, "%s", e.msg);
	deferred = hu_layer_is_deferred(&s.layers[0]);
	*f = s.layers[0].format;
	hu_stack_close(&s);
	return deferred;
}

Test(layer, a_deferred_layer_showing_a_marker_is_detected_at_the_open)
{
	enum hu_format f;

	tu_file("top/a", "a");
	tu_file("plain/d/a", "x");
	tu_wh_overlay("marked/d/x");
	cr_expect(deferred_after_look("plain", &f));
	cr_expect_eq(f, HU_FMT_NONE);
	cr_expect_not(deferred_after_look("marked", &f));
	cr_expect_eq(f, HU_FMT_OVERLAY);
}
