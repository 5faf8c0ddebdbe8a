/* SPDX-License-Identifier: MIT */
/* Tarball layers: unpacked as OCI layers, what is refused, what is left. */
#include <archive.h>
#include <archive_entry.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "internal.h"
#include "testutil.h"

static void setup(void)
{
	/* Every unpack goes under the test dir: the tests can see that
	 * nothing is left behind. */
	tu_mkdir("tmp");
	setenv("TMPDIR", tu_path("tmp"), 1);
}

static void teardown(void)
{
	tu_cleanup();
}

TestSuite(tarlayer, .init = setup, .fini = teardown);

/* ---- building tarballs ----------------------------------------------------- */

struct tent {
	char type;		/* f file, d dir, l symlink, h hard link,
				 * c char device, p fifo */
	const char *path;
	const char *data;	/* file content; link target */
	mode_t mode;		/* 0: 0644, or 0755 for a directory */
	const char *xattr;	/* "name=value" */
};

/* Entries: F file, D directory, L symlink, H hard link (to @t). */
#define F(p, d) { .type = 'f', .path = (p), .data = (d) }
#define FM(p, d, m) { .type = 'f', .path = (p), .data = (d), .mode = (m) }
#define FX(p, d, x) { .type = 'f', .path = (p), .data = (d), .xattr = (x) }
#define D(p) { .type = 'd', .path = (p) }
#define DM(p, m) { .type = 'd', .path = (p), .mode = (m) }
#define L(p, t) { .type = 'l', .path = (p), .data = (t) }
#define H(p, t) { .type = 'h', .path = (p), .data = (t) }
#define END { .type = 0 }

static const char *mktar(const char *rel, const char *comp,
			 const struct tent *v)
{
	struct archive *a = archive_write_new();

	cr_assert_eq(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
	if (!strcmp(comp, "gzip"))
		cr_assert_eq(archive_write_add_filter_gzip(a), ARCHIVE_OK);
	else if (!strcmp(comp, "zstd"))
		cr_assert_eq(archive_write_add_filter_zstd(a), ARCHIVE_OK);
	cr_assert_eq(archive_write_open_filename(a, tu_path(rel)),
		     ARCHIVE_OK);
	for (; v->type; v++) {
		struct archive_entry *ae = archive_entry_new();
		size_t len = v->data ? strlen(v->data) : 0;
		mode_t type = v->type == 'd' ? AE_IFDIR :
			v->type == 'l' ? AE_IFLNK : v->type == 'c' ? AE_IFCHR :
			v->type == 'p' ? AE_IFIFO : AE_IFREG;

		archive_entry_set_pathname(ae, v->path);
		archive_entry_set_mtime(ae, 1000000000, 0);
		archive_entry_set_filetype(ae, type);
		archive_entry_set_perm(ae, v->mode ? v->mode :
				       type == AE_IFDIR ? 0755 : 0644);
		if (v->type == 'l')
			archive_entry_set_symlink(ae, v->data);
		if (v->type == 'h')
			archive_entry_set_hardlink(ae, v->data);
		if (v->type == 'c')
			archive_entry_set_rdev(ae, makedev(1, 3));
		if (v->type == 'f')
			archive_entry_set_size(ae, (la_int64_t)len);
		if (v->xattr) {
			const char *eq = strchr(v->xattr, '=');
			char name[64];

			snprintf(name, sizeof(name), "%.*s",
				 (int)(eq - v->xattr), v->xattr);
			archive_entry_xattr_add_entry(ae, name, eq + 1,
						      strlen(eq + 1));
		}
		cr_assert_eq(archive_write_header(a, ae), ARCHIVE_OK, "%s: %s",
			     v->path, archive_error_string(a));
		if (v->type == 'f' && len)
			cr_assert_eq(archive_write_data(a, v->data, len),
				     (la_ssize_t)len);
		archive_entry_free(ae);
	}
	cr_assert_eq(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	return tu_path(rel);
}

/* How many entries the unpack directory holds. */
static int tmp_left(void)
{
	DIR *d = opendir(tu_path("tmp"));
	struct dirent *de;
	int n = 0;

	cr_assert_not_null(d);
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

struct warns {
	int n;
	char last[512];
};

static void on_warn(void *ctx, const struct hu_error *w)
{
	struct warns *ws = ctx;

	ws->n++;
	snprintf(ws->last, sizeof(ws->last), "%s: %s", w->path, w->msg);
}

static int open_tar(struct hu_layer *l, const char *rel, struct warns *ws,
		    struct hu_error *e)
{
	struct hu_report r = { .warn = on_warn, .ctx = ws };
	struct hu_stack_opts o = { .report = &r };

	return hu_layer_open(l, tu_path(rel), &o, e);
}

/* Open @rel, which must fail; return the error as "PATH: MSG" with the
 * test dir's prefix cut. */
static char *refused(const char *rel)
{
	static char buf[8192];
	struct hu_error e = { 0 };
	struct hu_layer l;
	struct warns ws = { 0 };

	cr_assert_eq(open_tar(&l, rel, &ws, &e), -1, "%s opened", rel);
	snprintf(buf, sizeof(buf), "%s: %s", e.path + strlen(tu_tmpdir()) + 1,
		 e.msg);
	hu_error_clear(&e);
	cr_expect_eq(tmp_left(), 0, "left behind in TMPDIR");
	return buf;
}

/* Read @rel of the unpacked layer @l. */
static char *layer_read(const struct hu_layer *l, const char *rel)
{
	static char buf[256];
	int fd = openat(l->fd, rel, O_RDONLY | O_NOFOLLOW);
	ssize_t n;

	if (fd < 0)
		return NULL;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n < 0 ? 0 : n] = '\0';
	return buf;
}

static void layer_stat(const struct hu_layer *l, const char *rel,
		       struct stat *st)
{
	cr_assert_eq(fstatat(l->fd, rel, st, AT_SYMLINK_NOFOLLOW), 0,
		     "stat %s", rel);
}

#define expect_view tu_expect_str

static char *dump2(const char *lower, const char *upper)
{
	struct hu_stack s;
	struct hu_error e = { 0 };
	char *d;

	cr_assert_eq(tu_stack(&s, &e, 2, lower, upper), 0, "%s: %s",
		     e.path, e.msg);
	d = tu_view_dump(&s);
	hu_stack_close(&s);
	return d;
}

/* ---- names ------------------------------------------------------------------ */

Test(tarlayer, names_are_normalised)
{
	static const char *const cases[][2] = {
		{ "x", "x" }, { "./x", "x" }, { "/x", "x" }, { "//x", "x" },
		{ "a//b/", "a/b" }, { "./a/./b", "a/b" }, { ".", "" },
		{ "./", "" }, { "/", "" }, { "...", "..." },
		{ ".wh..wh..opq", ".wh..wh..opq" },
		{ ".wh..wh.plnk/x", ".wh..wh.plnk/x" }, { ".wh.x", ".wh.x" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *why;
		bool root;
		char *p = hu_tar_path_norm(cases[i][0], &root, &why);

		cr_assert_not_null(p, "%s: %s", cases[i][0], why);
		cr_expect_str_eq(p, cases[i][1], "%s", cases[i][0]);
		cr_expect_eq(root, !*cases[i][1], "%s", cases[i][0]);
		free(p);
	}
}

Test(tarlayer, bad_names_are_refused)
{
	static const char *const bad[] = {
		"", "..", "../x", "a/../b", "a/..", ".wh.", "d/.wh.",
		".wh..", ".wh...", "a/.wh.b/c", ".wh..wh..opq/x",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *why = NULL;
		bool root;

		cr_expect_null(hu_tar_path_norm(bad[i], &root, &why), "%s",
			       bad[i]);
		cr_expect_not_null(why, "%s", bad[i]);
	}
}

/* The form fsck's tarPathNotNormal holds entry names to: one leading
 * "./" is fine (GNU tar and docker write it), and the root as "/"
 * (umoci writes it), the rest is not. */
Test(tarlayer, names_in_normal_form)
{
	static const struct {
		const char *name;
		bool dir;
		bool normal;
	} cases[] = {
		{ "x", false, true }, { "./x", false, true },
		{ "a/b", false, true }, { "./a/b", false, true },
		{ "d/", true, true }, { "./d/", true, true }, { "d", true, true },
		{ ".", true, true }, { "./", true, true }, { "...", false, true },
		{ ".wh..wh..opq", false, true },
		{ "/", true, true },
		{ "/x", false, false }, { "//", true, false },
		{ "//x", false, false }, { "a//b", false, false },
		{ "a/./b", false, false }, { "././x", false, false },
		{ "./.", true, false }, { "a/.", true, false },
		{ "x/", false, false }, { "d//", true, false },
		{ "a/../b", false, false },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *why = hu_tar_path_unusual(cases[i].name,
						      cases[i].dir);

		if (cases[i].normal)
			cr_expect_null(why, "%s: %s", cases[i].name, why);
		else
			cr_expect_not_null(why, "%s is normal?", cases[i].name);
	}
}

Test(tarlayer, sniffs_by_content)
{
	static const struct tent v[] = { F("a", "x"), END };
	int fd;

	mktar("plain", "none", v);
	mktar("gz", "gzip", v);
	mktar("zst", "zstd", v);
	tu_file("text", "just text\n");
	for (int i = 0; i < 4; i++) {
		const char *p[] = { "plain", "gz", "zst", "text" };

		fd = open(tu_path(p[i]), O_RDONLY);
		cr_assert_geq(fd, 0);
		cr_expect_eq(hu_tar_sniff(fd), i < 3, "%s", p[i]);
		close(fd);
	}
}

/* ---- unpacking ------------------------------------------------------------ */

Test(tarlayer, each_compression_unpacks_and_close_removes_it)
{
	static const struct tent v[] = {
		DM("d", 0750), FM("d/f", "hello", 0640),
		L("d/s", "f"), H("d/h", "d/f"), END };
	const char *comps[] = { "none", "gzip", "zstd" };

	for (int i = 0; i < 3; i++) {
		struct hu_error e = { 0 };
		struct hu_layer l;
		struct warns ws = { 0 };
		struct stat st, st2;
		char rel[32], *dir;

		snprintf(rel, sizeof(rel), "l%d.tar", i);
		mktar(rel, comps[i], v);
		cr_assert_eq(open_tar(&l, rel, &ws, &e), 0, "%s: %s: %s",
			     comps[i], e.path, e.msg);
		cr_expect_eq(l.format, HU_FMT_OCI);
		cr_expect_str_eq(l.path, tu_path(rel));
		cr_expect_str_eq(layer_read(&l, "d/f"), "hello");
		layer_stat(&l, "d", &st);
		cr_expect_eq(st.st_mode & 07777, 0750);
		cr_expect_eq(st.st_mtime, 1000000000);
		layer_stat(&l, "d/f", &st);
		cr_expect_eq(st.st_mode & 07777, 0640);
		layer_stat(&l, "d/h", &st2);
		cr_expect_eq(st.st_ino, st2.st_ino, "hard link");
		layer_stat(&l, "d/s", &st);
		cr_expect(S_ISLNK(st.st_mode));
		cr_expect_eq(ws.n, 0, "%s", ws.last);
		cr_expect_eq(tmp_left(), 1);
		dir = strdup(l.unpacked);
		cr_expect_eq(strncmp(dir, tu_path("tmp/hunion-layer-"),
				     strlen(tu_path("tmp/hunion-layer-"))), 0,
			     "%s", dir);
		cr_assert_eq(stat(dir, &st), 0);
		cr_expect_eq(st.st_mode & 07777, 0700, "private");
		hu_layer_close(&l);
		cr_expect_eq(tmp_left(), 0);
		free(dir);
	}
}

Test(tarlayer, dot_slash_and_bare_names_are_one_path)
{
	static const struct tent v[] = {
		F("./x", "first"), F("/x", "second"),
		F("x", "third"), END };
	struct hu_error e = { 0 };
	struct hu_layer l;
	struct warns ws = { 0 };

	mktar("l.tar", "none", v);
	cr_assert_eq(open_tar(&l, "l.tar", &ws, &e), 0, "%s", e.msg);
	cr_expect_str_eq(layer_read(&l, "x"), "third");
	cr_expect_eq(ws.n, 2);
	cr_expect(strstr(ws.last, "l.tar: x: duplicate entry: the later one "
			 "wins") != NULL, "%s", ws.last);
	hu_layer_close(&l);
}

Test(tarlayer, a_dir_over_a_dir_keeps_its_children_a_file_does_not)
{
	static const struct tent v[] = {
		DM("a", 0700), F("a/keep", "k"),
		DM("a/", 0751),
		D("b"), F("b/gone", "g"), F("b", "file"),
		END };
	struct hu_error e = { 0 };
	struct hu_layer l;
	struct warns ws = { 0 };
	struct stat st;

	mktar("l.tar", "none", v);
	cr_assert_eq(open_tar(&l, "l.tar", &ws, &e), 0, "%s", e.msg);
	cr_expect_str_eq(layer_read(&l, "a/keep"), "k");
	layer_stat(&l, "a", &st);
	cr_expect_eq(st.st_mode & 07777, 0751, "the later entry's mode");
	cr_expect_str_eq(layer_read(&l, "b"), "file");
	cr_expect_eq(ws.n, 2);
	hu_layer_close(&l);
}

Test(tarlayer, link_to_a_file_gone_with_its_dir_is_refused)
{
	static const struct tent v[] = {
		F("d/f", "x"), F("d", "now a file"),
		H("l", "d/f"), END };

	mktar("l.tar", "none", v);
	cr_expect_str_eq(refused("l.tar"), "l.tar: l: hard link to a path "
			 "not yet seen: d/f");
}

Test(tarlayer, whiteouts_follow_oci_rules_in_a_stack)
{
	/* The opaque marker comes after entries of its directory; a
	 * whiteout and a new entry of the same name in one layer. */
	static const struct tent v[] = {
		F(".wh.gone", ""),
		D("opq"), F("opq/new", ""),
		F("opq/.wh..wh..opq", ""),
		D("re"), F("re/mine", ""), F(".wh.re", ""),
		F("d/.wh.x", ""), F("d/.wh.nothing", ""),
		END };

	tu_file("lo/gone", "");
	tu_file("lo/keep", "");
	tu_file("lo/opq/old", "");
	tu_file("lo/re/old", "");
	tu_file("lo/d/x", "");
	tu_file("lo/d/y", "");
	mktar("up.tar.zst", "zstd", v);
	expect_view(dump2("lo", "up.tar.zst"),
		    "d:1\nd/y:0\nkeep:0\nopq:1\nopq/new:1\nre:1\n"
		    "re/mine:1\n");
}

/* Does the unpacked layer @l hold @rel (not followed)? */
static bool layer_has(const struct hu_layer *l, const char *rel)
{
	struct stat st;

	return fstatat(l->fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* A whiteout removes what lies beneath; it never makes a directory.  The
 * parent it implies exists only where the layers below have a directory
 * that this tarball does not hide.  (Issue 11, item 4.) */
Test(tarlayer, a_whiteout_under_no_directory_beneath_makes_none)
{
	static const struct tent v[] = {
		F("x/.wh.y", ""),		/* x: a file beneath */
		F("lnk/.wh.f", ""),		/* lnk: a symlink to dir d */
		F(".wh.test", ""), F("test/.wh.a", ""),	/* test: gone */
		F("nope/.wh.zzz", ""),		/* nothing beneath */
		F("deep/er/.wh.z", ""),		/* deep/er: nothing beneath */
		F("keep/.wh.y", ""),		/* a directory beneath */
		END };
	struct hu_stack s;
	struct hu_error e = { 0 };

	tu_file("lo/x", "");
	tu_file("lo/d/f", "");
	tu_symlink("d", "lo/lnk");
	tu_file("lo/test/a", "");
	tu_file("lo/keep/y", "");
	tu_file("lo/keep/z", "");
	tu_file("lo/deep/other", "");
	mktar("up.tar", "none", v);
	expect_view(dump2("lo", "up.tar"),
		    "d:0\nd/f:0\ndeep:0\ndeep/other:0\nkeep:1\nkeep/z:0\n"
		    "lnk:0\nx:0\n");
	cr_assert_eq(tu_stack(&s, &e, 2, "lo", "up.tar"), 0, "%s", e.msg);
	cr_expect(!layer_has(&s.layers[1], "x"));
	cr_expect(!layer_has(&s.layers[1], "lnk"));
	cr_expect(!layer_has(&s.layers[1], "test"));
	cr_expect(layer_has(&s.layers[1], ".wh.test"));
	cr_expect(!layer_has(&s.layers[1], "nope"));
	cr_expect(!layer_has(&s.layers[1], "deep"), "left empty: gone");
	cr_expect(layer_has(&s.layers[1], "keep/.wh.y"));
	hu_stack_close(&s);
	/* The bottom layer: nothing beneath, no such directory at all. */
	expect_view(dump2("up.tar", "lo"),
		    "d:1\nd/f:1\ndeep:1\ndeep/other:1\nkeep:1\nkeep/y:1\n"
		    "keep/z:1\nlnk:1\ntest:1\ntest/a:1\nx:1\n");
	cr_expect_eq(tmp_left(), 0);
}

/* Alone, a layer cannot know what its whiteouts hide: it keeps them all
 * (whiteout ls lists them, convert -o writes them). */
Test(tarlayer, alone_a_layer_keeps_every_whiteout)
{
	static const struct tent v[] = { F("nope/.wh.zzz", ""), END };
	struct hu_error e = { 0 };
	struct hu_layer l;
	struct warns ws = { 0 };

	mktar("l.tar", "none", v);
	cr_assert_eq(open_tar(&l, "l.tar", &ws, &e), 0, "%s", e.msg);
	cr_expect(layer_has(&l, "nope/.wh.zzz"));
	hu_layer_close(&l);
}

/* A directory this tarball whites out or hides under an opaque parent is
 * not the one beneath: an unnamed parent of new entries is a new
 * directory (0755, the entry's time), one of whiteouts alone goes. */
Test(tarlayer, an_unnamed_parent_hidden_by_its_own_layer_is_new)
{
	static const struct tent v[] = {
		F(".wh.etc", ""), F("etc/new", ""),
		F("o/.wh..wh..opq", ""), F("o/sub/.wh.x", ""),
		F("o2/.wh..wh..opq", ""),
		END };
	struct hu_stack s;
	struct hu_error e = { 0 };
	struct stat st;

	tu_file("lo/etc/old", "");
	cr_assert_eq(chmod(tu_path("lo/etc"), 0750), 0);
	tu_file("lo/o/sub/x", "");
	tu_file("lo/o/sub/y", "");
	tu_file("lo/o2/gone", "");
	mktar("up.tar", "none", v);
	expect_view(dump2("lo", "up.tar"),
		    "etc:1\netc/new:1\no:1\no2:1\n");
	cr_assert_eq(tu_stack(&s, &e, 2, "lo", "up.tar"), 0, "%s", e.msg);
	layer_stat(&s.layers[1], "etc", &st);
	cr_expect_eq(st.st_mode & 07777, 0755);
	cr_expect_eq(st.st_mtime, 1000000000);
	cr_expect(!layer_has(&s.layers[1], "o/sub"));
	cr_expect(layer_has(&s.layers[1], "o2/.wh..wh..opq"));
	hu_stack_close(&s);
}

Test(tarlayer, a_tarball_beneath_a_tarball)
{
	static const struct tent lo[] = {
		F("a", "lower"), F("b", ""), F("d/x", ""),
		END };
	static const struct tent up[] = {
		F("a", "upper"), F(".wh.b", ""),
		F("d/y", ""), END };

	mktar("lo.tar.gz", "gzip", lo);
	mktar("up.tar", "none", up);
	expect_view(dump2("lo.tar.gz", "up.tar"), "a:1\nd:1\nd/x:0\nd/y:1\n");
	cr_expect_eq(tmp_left(), 0);
}

Test(tarlayer, a_parent_no_entry_names_takes_metadata_from_beneath)
{
	static const struct tent v[] = { F("etc/new", ""), END };
	struct hu_stack s;
	struct hu_error e = { 0 };
	struct timespec ts[2] = { { 1200000000, 0 }, { 1200000000, 0 } };
	struct stat st;

	tu_file("lo/etc/old", "");
	cr_assert_eq(chmod(tu_path("lo/etc"), 0750), 0);
	cr_assert_eq(utimensat(AT_FDCWD, tu_path("lo/etc"), ts, 0), 0);
	tu_xattr("lo/etc", "user.kept", "yes");
	mktar("up.tar", "none", v);
	cr_assert_eq(tu_stack(&s, &e, 2, "lo", "up.tar"), 0, "%s", e.msg);
	layer_stat(&s.layers[1], "etc", &st);
	cr_expect_eq(st.st_mode & 07777, 0750);
	cr_expect_eq(st.st_mtime, 1200000000);
	cr_expect_eq(fgetxattr(s.layers[1].fd, "user.kept", NULL, 0), -1,
		     "the root has none");
	{
		char v3[8] = "";
		int fd = openat(s.layers[1].fd, "etc", O_RDONLY);

		cr_assert_geq(fd, 0);
		cr_expect_eq(fgetxattr(fd, "user.kept", v3, sizeof(v3)), 3);
		cr_expect_str_eq(v3, "yes");
		close(fd);
	}
	hu_stack_close(&s);
	/* Alone, such a parent is 0755 with the time of its entry. */
	{
		struct hu_layer l;
		struct warns ws = { 0 };

		cr_assert_eq(open_tar(&l, "up.tar", &ws, &e), 0, "%s", e.msg);
		layer_stat(&l, "etc", &st);
		cr_expect_eq(st.st_mode & 07777, 0755);
		cr_expect_eq(st.st_mtime, 1000000000);
		hu_layer_close(&l);
	}
}

Test(tarlayer, read_only_dirs_are_filled_then_locked)
{
	static const struct tent v[] = {
		DM("ro", 0555), FM("ro/f", "x", 0444),
		DM("ro/sub", 0500), F("ro/sub/g", "y"),
		END };
	struct hu_error e = { 0 };
	struct hu_layer l;
	struct warns ws = { 0 };
	struct stat st;

	mktar("l.tar", "none", v);
	cr_assert_eq(open_tar(&l, "l.tar", &ws, &e), 0, "%s", e.msg);
	layer_stat(&l, "ro", &st);
	cr_expect_eq(st.st_mode & 07777, 0555);
	layer_stat(&l, "ro/sub", &st);
	cr_expect_eq(st.st_mode & 07777, 0500);
	cr_expect_str_eq(layer_read(&l, "ro/sub/g"), "y");
	hu_layer_close(&l);
	cr_expect_eq(tmp_left(), 0);
}

Test(tarlayer, whiteout_content_is_dropped_and_xattrs_kept)
{
	static const struct tent v[] = {
		F(".wh.x", "not empty"),
		FX("f", "data", "user.note=hello"), END };
	struct hu_error e = { 0 };
	struct hu_layer l;
	struct warns ws = { 0 };
	struct stat st;
	char buf[16] = "";
	int fd;

	mktar("l.tar", "none", v);
	cr_assert_eq(open_tar(&l, "l.tar", &ws, &e), 0, "%s", e.msg);
	layer_stat(&l, ".wh.x", &st);
	cr_expect_eq(st.st_size, 0);
	fd = openat(l.fd, "f", O_RDONLY);
	cr_assert_geq(fd, 0);
	cr_expect_eq(fgetxattr(fd, "user.note", buf, sizeof(buf)), 5);
	cr_expect_str_eq(buf, "hello");
	close(fd);
	hu_layer_close(&l);
}

Test(tarlayer, devices_and_fifos)
{
	static const struct tent v[] = {
		{ .type = 'c', .path = "null" },
		{ .type = 'p', .path = "fifo", .mode = 0600 }, END };
	struct hu_error e = { 0 };
	struct hu_layer l;
	struct warns ws = { 0 };
	struct stat st;

	mktar("l.tar", "none", v);
	cr_assert_eq(open_tar(&l, "l.tar", &ws, &e), 0, "%s", e.msg);
	layer_stat(&l, "fifo", &st);
	cr_expect(S_ISFIFO(st.st_mode));
	cr_expect_eq(st.st_mode & 07777, 0600);
	if (geteuid() == 0) {
		layer_stat(&l, "null", &st);
		cr_expect(S_ISCHR(st.st_mode));
		cr_expect_eq(st.st_rdev, makedev(1, 3));
	} else {
		cr_expect_eq(ws.n, 1);
	}
	hu_layer_close(&l);
}

/* A tarball holding "big": @size bytes of zeros (no sparse map) but for
 * 4 KiB of data at each of @offs. */
static void mktar_zeros(const char *rel, off_t size, const off_t *offs,
			int n)
{
	static char buf[65536];
	struct archive *a = archive_write_new();
	struct archive_entry *ae = archive_entry_new();

	cr_assert_eq(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
	cr_assert_eq(archive_write_add_filter_zstd(a), ARCHIVE_OK);
	cr_assert_eq(archive_write_open_filename(a, tu_path(rel)),
		     ARCHIVE_OK);
	archive_entry_set_pathname(ae, "big");
	archive_entry_set_filetype(ae, AE_IFREG);
	archive_entry_set_perm(ae, 0644);
	archive_entry_set_size(ae, size);
	cr_assert_eq(archive_write_header(a, ae), ARCHIVE_OK);
	for (off_t off = 0; off < size; off += sizeof(buf)) {
		size_t len = size - off < (off_t)sizeof(buf) ?
			(size_t)(size - off) : sizeof(buf);

		memset(buf, 0, sizeof(buf));
		for (int i = 0; i < n; i++)
			for (off_t b = offs[i]; b < offs[i] + 4096; b++)
				if (b >= off && b < off + (off_t)len)
					buf[b - off] = 'd';
		cr_assert_eq(archive_write_data(a, buf, len), (la_ssize_t)len);
	}
	archive_entry_free(ae);
	cr_assert_eq(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
}

/* Zeros in a tarball's data become holes (whole blocks of them, as
 * cp --sparse makes), whether the entry has a sparse map or not: 64 MiB
 * holding 12 KiB of data allocate no more than that. */
Test(tarlayer, blocks_of_zeros_are_left_as_holes)
{
	/* Data at the start, across a 64 KiB write, and at the very end
	 * (so the file's size is written, not only set). */
	static const off_t offs[] = { 0, 65536 - 2048, (64 << 20) - 4096 };
	struct hu_error e = { 0 };
	struct hu_layer l;
	struct warns ws = { 0 };
	struct stat st;
	int fd = open(tu_path("tmp/probe"), O_RDWR | O_CREAT, 0600);

	/* Where holes cannot be made, there is nothing to see. */
	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, "x", 1, 1 << 20), 1);
	cr_assert_eq(fstat(fd, &st), 0);
	close(fd);
	unlink(tu_path("tmp/probe"));
	if (st.st_blocks * 512 > 64 * 1024)
		cr_skip_test("the test directory's filesystem keeps no holes");
	mktar_zeros("big.tar.zst", 64 << 20, offs, 3);
	cr_assert_eq(open_tar(&l, "big.tar.zst", &ws, &e), 0, "%s", e.msg);
	layer_stat(&l, "big", &st);
	cr_expect_eq(st.st_size, 64 << 20);
	cr_expect_leq(st.st_blocks * 512, 64 * 1024, "%lld bytes allocated",
		      (long long)st.st_blocks * 512);
	fd = openat(l.fd, "big", O_RDONLY);
	cr_assert_geq(fd, 0);
	for (int i = 0; i < 3; i++) {
		char b[4096], z = 1;

		cr_assert_eq(pread(fd, b, sizeof(b), offs[i]), 4096);
		cr_expect(b[0] == 'd' && !memcmp(b, b + 1, 4095), "%d", i);
		if (offs[i] > 0) {
			cr_assert_eq(pread(fd, &z, 1, offs[i] - 1), 1);
			cr_expect_eq(z, 0, "%d", i);
		}
		if (offs[i] + 4096 < st.st_size) {
			cr_assert_eq(pread(fd, &z, 1, offs[i] + 4096), 1);
			cr_expect_eq(z, 0, "%d", i);
		}
	}
	close(fd);
	hu_layer_close(&l);
}

/* ---- refused ---------------------------------------------------------------- */

Test(tarlayer, each_bad_entry_is_refused_naming_it)
{
	static const struct {
		struct tent v[3];
		const char *msg;
	} cases[] = {
		{ { F("../x", "") },
		  "l.tar: ../x: path has a '..' component" },
		{ { F("a/../../x", "") },
		  "l.tar: a/../../x: path has a '..' component" },
		{ { F(".wh.", "") },
		  "l.tar: .wh.: invalid whiteout name: it hides no name" },
		{ { F("d/.wh..", "") },
		  "l.tar: d/.wh..: invalid whiteout name: it hides no name" },
		{ { H("l", "nowhere") },
		  "l.tar: l: hard link to a path not yet seen: nowhere" },
		{ { H("l", "later"), F("later", "") },
		  "l.tar: l: hard link to a path not yet seen: later" },
		{ { D("d"), H("l", "d") },
		  "l.tar: l: hard link to a directory: d" },
		{ { L("s", "/etc"), F("s/passwd", "") },
		  "l.tar: s/passwd: path passes through a symlink: s" },
		{ { F("f", ""), F("f/x", "") },
		  "l.tar: f/x: path passes through a non-directory: f" },
		{ { F("a/.wh.b/c", "") },
		  "l.tar: a/.wh.b/c: path passes through a whiteout" },
		{ { F(".", "") },
		  "l.tar: .: the layer's root must be a directory" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char dir[16], rel[32];

		snprintf(dir, sizeof(dir), "c%zu", i);
		snprintf(rel, sizeof(rel), "%s/l.tar", dir);
		tu_mkdir(dir);
		mktar(rel, "none", cases[i].v);
		cr_expect_str_eq(refused(rel) + strlen(dir) + 1, cases[i].msg);
	}
}

Test(tarlayer, corrupt_and_truncated_tarballs_are_refused)
{
	static const struct tent v[] = {
		F("a", "aaaa"), F("b", "bbbb"), END };
	static const char *const comps[] = { "none", "gzip", "zstd" };
	struct stat st;

	for (int i = 0; i < 3; i++) {
		char whole[32], *msg;

		snprintf(whole, sizeof(whole), "w%d", i);
		mktar(whole, comps[i], v);
		cr_assert_eq(stat(tu_path(whole), &st), 0);
		/* Plain: cut inside b's data.  Compressed: cut only the last
		 * 3 bytes (the zstd checksum, the gzip trailer), after the
		 * tar's end-of-archive blocks. */
		cr_assert_eq(truncate(tu_path(whole),
				      i == 0 ? 1800 : st.st_size - 3), 0);
		msg = refused(whole);
		cr_expect(strstr(msg, "corrupt or truncated tarball") != NULL,
			  "%s: %s", comps[i], msg);
	}
}

/* The first @n bytes of @from into @to, through the command @filter
 * ("cat", "gzip -c", "zstd -qc"). */
static void head_through(const char *from, size_t n, const char *filter,
			 const char *to)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "head -c %zu '%s' | %s > '%s'", n,
		 tu_path(from), filter, tu_path(to));
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* A tarball that stops at an entry's boundary has lost what came after:
 * libarchive takes it for a whole one, hunion wants the end-of-archive
 * block, whatever the compression.  One zero block is an end (GNU tar
 * warns about it, and reads on). */
Test(tarlayer, a_tarball_cut_at_an_entry_boundary_is_refused)
{
	static const struct tent v[] = {
		F("a", "aaaa"), F("b", "bbbb"), END };
	static const struct {
		size_t n;
		const char *filter, *msg;
	} cases[] = {
		{ 1024, "cat", "a: corrupt or truncated tarball (after this "
		  "entry): no end-of-archive block" },
		{ 2048, "cat", "b: corrupt or truncated tarball (after this "
		  "entry): no end-of-archive block" },
		{ 2048, "gzip -c", "b: corrupt or truncated tarball (after this "
		  "entry): no end-of-archive block" },
		{ 2048, "zstd -qc", "b: corrupt or truncated tarball (after "
		  "this entry): no end-of-archive block" },
		{ 2048 + 512, "cat", NULL },
		{ 2048 + 512, "zstd -qc", NULL },
	};

	mktar("whole", "none", v);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char rel[16];

		snprintf(rel, sizeof(rel), "c%zu", i);
		head_through("whole", cases[i].n, cases[i].filter, rel);
		if (cases[i].msg) {
			char want[128];

			snprintf(want, sizeof(want), "%s: %s", rel,
				 cases[i].msg);
			cr_expect_str_eq(refused(rel), want);
		} else {
			struct hu_error e = { 0 };
			struct hu_layer l;
			struct warns ws = { 0 };

			cr_expect_eq(open_tar(&l, rel, &ws, &e), 0, "%s: %s",
				     rel, e.msg);
			cr_expect_str_eq(layer_read(&l, "b"), "bbbb");
			hu_layer_close(&l);
		}
	}
}

/* Append @n bytes of @data to @rel. */
static void append(const char *rel, const void *data, size_t n)
{
	FILE *f = fopen(tu_path(rel), "ab");

	cr_assert_not_null(f);
	cr_assert_eq(fwrite(data, 1, n, f), n);
	cr_assert_eq(fclose(f), 0);
}

/* What follows the last gzip member or zstd frame: one rule for both.
 * Another member or frame is read on (a skippable zstd frame skipped);
 * zero bytes are padding; anything else is refused. */
Test(tarlayer, after_the_compressed_stream_one_rule_for_gzip_and_zstd)
{
	static const struct tent v[] = { F("a", "aaaa"), END };
	static const struct tent v2[] = { F("b", "bbbb"), END };
	static const char zero[700], skippable[] = "\x50\x2a\x4d\x18"
		"\x04\x00\x00\x00" "abcd";
	static const char *const comps[] = { "gzip", "zstd" };

	for (int i = 0; i < 2; i++) {
		char rel[32], want[128], more[32];
		struct hu_error e = { 0 };
		struct hu_layer l;
		struct warns ws = { 0 };

		snprintf(rel, sizeof(rel), "garbage-%s", comps[i]);
		mktar(rel, comps[i], v);
		append(rel, "garbage", 7);
		snprintf(want, sizeof(want), "%s: a: corrupt or truncated "
			 "tarball (after this entry): data after the end of "
			 "the %s stream", rel, comps[i]);
		cr_expect_str_eq(refused(rel), want);

		/* Zeros, then another member or frame (a second tarball:
		 * after the first one's end, never read), more zeros. */
		snprintf(rel, sizeof(rel), "padded-%s", comps[i]);
		snprintf(more, sizeof(more), "more-%s", comps[i]);
		mktar(rel, comps[i], v);
		mktar(more, comps[i], v2);
		append(rel, zero, sizeof(zero));
		{
			char cmd[256];

			snprintf(cmd, sizeof(cmd), "cat '%s' >> '%s'",
				 tu_path(more), tu_path(rel));
			cr_assert_eq(system(cmd), 0);
		}
		append(rel, zero, 3);
		if (i == 1)
			append(rel, skippable, sizeof(skippable) - 1);
		cr_assert_eq(open_tar(&l, rel, &ws, &e), 0, "%s: %s", rel,
			     e.msg);
		cr_expect_str_eq(layer_read(&l, "a"), "aaaa");
		cr_expect_null(layer_read(&l, "b"));
		hu_layer_close(&l);

		/* One tar in two members or frames. */
		snprintf(rel, sizeof(rel), "two-%s", comps[i]);
		mktar("whole", "none", v);
		{
			char cmd[512];
			const char *z = i ? "zstd -qc" : "gzip -c";

			snprintf(cmd, sizeof(cmd), "head -c 700 '%s' | %s > "
				 "'%s' && tail -c +701 '%s' | %s >> '%s'",
				 tu_path("whole"), z, tu_path(rel),
				 tu_path("whole"), z, tu_path(rel));
			cr_assert_eq(system(cmd), 0);
		}
		cr_assert_eq(open_tar(&l, rel, &ws, &e), 0, "%s: %s", rel,
			     e.msg);
		cr_expect_str_eq(layer_read(&l, "a"), "aaaa");
		hu_layer_close(&l);
	}
}

Test(tarlayer, not_a_tarball_inside_gzip)
{
	FILE *p;

	p = popen("printf 'not a tar' | gzip > \"$TMPDIR/../g\"", "w");
	cr_assert_not_null(p);
	cr_assert_eq(pclose(p), 0);
	cr_expect_str_eq(refused("g"), "g: not a tarball, or a corrupt one: "
			 "Unrecognized archive format");
}

Test(tarlayer, a_failed_write_leaves_nothing)
{
	static const struct tent v[] = {
		F("a", "aaaa"), F("b", "bbbb"), END };

	mktar("l.tar", "none", v);
	setenv("HUNION_FAULT", "write:2:ENOSPC", 1);
	cr_expect(strstr(refused("l.tar"), "l.tar: b: cannot write (unpacking "
			 "into ") != NULL);
}

Test(tarlayer, a_dry_run_still_unpacks)
{
	static const struct tent v[] = { F("a", "aaaa"), END };
	struct hu_error e = { 0 };
	struct hu_layer l;
	struct warns ws = { 0 };

	mktar("l.tar", "none", v);
	hu_wr_set_dry_run(true);
	cr_assert_eq(open_tar(&l, "l.tar", &ws, &e), 0, "%s", e.msg);
	cr_expect(hu_wr_dry_run());
	cr_expect_str_eq(layer_read(&l, "a"), "aaaa");
	hu_layer_close(&l);
	cr_expect_eq(tmp_left(), 0);
}

Test(tarlayer, a_tarball_layer_is_not_edited_in_place)
{
	static const struct tent v[] = { F("a", ""), END };
	struct hu_wh_edit o = { .format = HU_FMT_OCI };
	struct hu_error e = { 0 };
	struct hu_layer l;
	struct warns ws = { 0 };

	mktar("l.tar", "none", v);
	cr_assert_eq(open_tar(&l, "l.tar", &ws, &e), 0, "%s", e.msg);
	cr_expect_eq(hu_wh_add(&l, &o, "b", &e), -1);
	cr_expect_str_eq(e.msg, "a tarball layer cannot be changed in place");
	hu_error_clear(&e);
	hu_layer_close(&l);
}

Test(tarlayer, deep_parents_are_made_and_long_paths_read)
{
	char deep[4096], *p = deep;
	struct tent v[2] = { F(deep, "x"), END };
	struct hu_error e = { 0 };
	struct hu_layer l;
	struct warns ws = { 0 };
	struct stat st;

	/* 2000 directories no entry names: 4001 bytes. */
	for (int i = 0; i < 2000; i++, p += 2)
		memcpy(p, "a/", 2);
	strcpy(p, "f");
	mktar("deep.tar", "none", v);
	cr_assert_eq(open_tar(&l, "deep.tar", &ws, &e), 0, "%s", e.msg);
	layer_stat(&l, "a/a/a", &st);
	cr_expect_eq(st.st_mode & 07777, 0755);
	cr_expect_eq(st.st_mtime, 1000000000);
	hu_layer_close(&l);
	cr_expect_eq(tmp_left(), 0);

	/* Longer than PATH_MAX (flatten writes such paths from a deep
	 * layer): read one name at a time, as every layer is.  A hard link
	 * to it, and from it. */
	{
		static char longer[12001], link[12001];
		struct tent lv[] = { F(longer, "far"), H(link, longer),
				     H("near", longer), END };
		struct hu_stack s;

		memset(longer, 'c', 12000);
		for (int i = 200; i < 12000; i += 200)
			longer[i] = '/';
		memcpy(link, longer, sizeof(link));
		link[11999] = 'l';
		mktar("long.tar", "none", lv);
		cr_assert_eq(tu_stack(&s, &e, 1, "long.tar"), 0, "%s", e.msg);
		{
			char *view = tu_view_dump(&s);

			cr_expect(strstr(view, "near:0\n") != NULL);
			cr_expect(strstr(view, "ccc/ccc") != NULL);
			free(view);
		}
		cr_expect_str_eq(layer_read(&s.layers[0], "near"), "far");
		hu_stack_close(&s);
		cr_expect_eq(tmp_left(), 0);
	}
	/* A name longer than 255 bytes: no directory can have it. */
	{
		static char name[400];
		struct tent nv[] = { F(name, ""), END };
		const char *msg;

		memset(name, 'n', 300);
		strcpy(name + 300, "/f");
		mktar("name.tar", "none", nv);
		msg = refused("name.tar");
		cr_expect(strstr(msg, ": cannot open directory nnnn") != NULL,
			  "%s", msg);
	}
}

/* The entries of tmp moved aside (aside.c), and the path of the last. */
static int tmp_aside(char **last)
{
	DIR *d = opendir(tu_path("tmp"));
	struct dirent *de;
	int n = 0;

	cr_assert_not_null(d);
	while ((de = readdir(d)))
		if (hu_is_aside_name(de->d_name)) {
			n++;
			free(*last);
			cr_assert_geq(asprintf(last, "tmp/%s", de->d_name), 0);
		}
	closedir(d);
	return n;
}

/* An unpack directory a killed run left (unlocked) is moved aside when
 * the next tarball layer is unpacked in the same TMPDIR, whole, and goes
 * after the run's work (hu_aside_remove()); a live run's (locked) stays,
 * and so does anything that is not named like ours. */
Test(tarlayer, stale_unpack_dirs_go_live_ones_stay)
{
	static const struct tent v[] = { F("f", "x"), END };
	struct hu_error e = { 0 };
	struct hu_layer l, l2;
	struct warns ws = { 0 };
	char *aside = NULL, *big = NULL;
	int live, own;

	mktar("l.tar", "none", v);
	tu_file("tmp/hunion-layer-0123456789ab/root/big", "stale");
	tu_mkdir("tmp/hunion-layer-0123456789ab/root/ro");
	cr_assert_eq(chmod(tu_path("tmp/hunion-layer-0123456789ab/root/ro"),
			   0500), 0);
	tu_mkdir("tmp/hunion-layer-ba9876543210/root");
	tu_mkdir("tmp/hunion-layer-0123456789");		/* too short */
	tu_mkdir("tmp/hunion-layer-0123456789AB");	/* not ours */
	tu_file("tmp/hunion-layer-aaaaaaaaaaaa", "a file");
	live = open(tu_path("tmp/hunion-layer-ba9876543210"),
		    O_RDONLY | O_DIRECTORY);
	cr_assert_geq(live, 0);
	cr_assert_eq(flock(live, LOCK_EX), 0);

	cr_assert_eq(open_tar(&l, "l.tar", &ws, &e), 0, "%s", e.msg);
	cr_expect_not(tu_exists("tmp/hunion-layer-0123456789ab"), "stale");
	cr_assert_eq(tmp_aside(&aside), 1, "moved aside");
	cr_assert_geq(asprintf(&big, "%s/root/big", aside), 0);
	cr_expect(tu_exists(big), "whole until the work is done");
	cr_expect_eq(hu_aside_pending(), 1);
	cr_expect(tu_exists("tmp/hunion-layer-ba9876543210/root"), "live");
	cr_expect(tu_exists("tmp/hunion-layer-0123456789"));
	cr_expect(tu_exists("tmp/hunion-layer-0123456789AB"));
	cr_expect(tu_exists("tmp/hunion-layer-aaaaaaaaaaaa"));
	cr_expect_eq(tmp_left(), 5);

	/* this layer's own directory is locked: a second unpack keeps it */
	cr_assert_eq(open_tar(&l2, "l.tar", &ws, &e), 0, "%s", e.msg);
	cr_expect_eq(tmp_left(), 6);
	own = open(l.unpacked, O_RDONLY | O_DIRECTORY);
	cr_assert_geq(own, 0);
	cr_expect_neq(flock(own, LOCK_EX | LOCK_NB), 0, "locked");
	close(own);
	hu_layer_close(&l2);
	hu_layer_close(&l);
	cr_expect_eq(tmp_left(), 4);
	/* after the work: what was moved aside goes, the live one stays */
	cr_expect_eq(hu_aside_remove(NULL, NULL, NULL, &e), 0, "%s", e.msg);
	cr_expect_not(tu_exists(aside));
	cr_expect_eq(hu_aside_pending(), 0);
	cr_expect(tu_exists("tmp/hunion-layer-ba9876543210/root"), "live");
	cr_expect_eq(tmp_left(), 4);
	free(aside);
	free(big);
	close(live);
}

/* ---- read straight into a directory (merge -o of one tarball) ---------- */

static bool at_has(int dfd, const char *rel)
{
	struct stat st;

	return fstatat(dfd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* hu_tarlayer_extract() of the tarball @path open at @fd, as a layer
 * opened with hu_stack_opts.tar_sources holds it. */
static int extract(const char *path, int fd, int root, bool over,
		   struct hu_merge_stats *st, bool *fallback,
		   struct hu_error *e)
{
	struct hu_layer l = { .path = (char *)path, .fd = fd,
			      .unpacked_lock = -1, .streamed = true };
	bool fb;

	return hu_tarlayer_extract(&l, root, over, st, NULL,
				   fallback ? fallback : &fb, e);
}

/* What the view of the layer alone shows, and nothing under TMPDIR:
 * markers of every kind go (a .wh..wh.* directory with what it holds),
 * a hard link to a whiteout stays (with one link), a parent of markers
 * alone goes, a named directory of markers alone stays, empty. */
Test(tarlayer, extract_writes_what_the_view_shows)
{
	static const struct tent v[] = {
		F("keep", "k"), F(".wh.keep", ""), D("named"),
		F("named/.wh..wh..opq", ""), F("implied/.wh.x", ""),
		F("d/.wh..wh.plnk/123", "p"), F("d/f", "f"),
		H("second-name", "d/f"), F("d/.wh.y", ""),
		H("w2", "d/.wh.y"), END };
	struct hu_merge_stats st = { 0 };
	struct hu_error e = { 0 };
	struct stat sb;
	int fd, root;

	mktar("x.tar.zst", "zstd", v);
	tu_mkdir("out");
	root = open(tu_path("out"), O_RDONLY | O_DIRECTORY);
	fd = open(tu_path("x.tar.zst"), O_RDONLY);
	cr_assert(root >= 0 && fd >= 0);
	cr_assert_eq(extract("x.tar.zst", fd, root, false, &st, NULL, &e), 0,
		     "%s", e.msg);
	cr_expect(at_has(root, "keep"));
	cr_expect(!at_has(root, ".wh.keep"));
	cr_expect(at_has(root, "named"));
	cr_expect(!at_has(root, "named/.wh..wh..opq"));
	cr_expect(!at_has(root, "implied"));
	cr_expect(!at_has(root, "d/.wh..wh.plnk"));
	cr_expect(!at_has(root, "d/.wh.y"));
	cr_expect(at_has(root, "d/f") && at_has(root, "second-name"));
	cr_assert_eq(fstatat(root, "w2", &sb, AT_SYMLINK_NOFOLLOW), 0);
	cr_expect_eq(sb.st_nlink, 1, "the whiteout's other name went");
	cr_expect_eq(st.hardlinks, 2);
	cr_expect_eq(tmp_left(), 0, "unpacked under TMPDIR");
	close(fd);
	close(root);
}

/* Over the layers beneath (a stack streamed into merge -o's tree): a
 * whiteout and an opaque directory remove what they hide, a directory
 * merges with the one beneath and keeps its mode where no entry names
 * it, a file replaces a directory beneath, a parent of markers alone
 * made over a symlink beneath goes and the symlink is back. */
Test(tarlayer, extract_over_the_layers_beneath)
{
	static const struct tent low[] = {
		D("d"), F("d/old", "o"), F("gone", "g"), D("o"),
		F("o/hidden", "h"), L("s", "target"), D("dir"),
		F("dir/in", "i"), END };
	static const struct tent up[] = {
		F("d/new", "n"), F(".wh.gone", ""), F("o/.wh..wh..opq", ""),
		F("o/mine", "m"), F("s/.wh..wh.plnk/1", "p"),
		F("dir", "a file"), END };
	struct hu_merge_stats st = { 0 };
	struct hu_error e = { 0 };
	struct stat sb;
	bool fallback = true;
	int fd, fd2, root;

	mktar("low.tar", "none", low);
	mktar("up.tar.gz", "gzip", up);
	tu_mkdir("out");
	root = open(tu_path("out"), O_RDONLY | O_DIRECTORY);
	fd = open(tu_path("low.tar"), O_RDONLY);
	fd2 = open(tu_path("up.tar.gz"), O_RDONLY);
	cr_assert(root >= 0 && fd >= 0 && fd2 >= 0);
	cr_assert_eq(extract("low.tar", fd, root, false, &st, NULL, &e), 0,
		     "%s", e.msg);
	cr_assert_eq(fchmodat(root, "d", 0700, 0), 0);
	cr_assert_eq(extract("up.tar.gz", fd2, root, true, &st, &fallback,
			     &e), 0, "%s", e.msg);
	cr_expect(!fallback);
	cr_expect(at_has(root, "d/old") && at_has(root, "d/new"));
	cr_assert_eq(fstatat(root, "d", &sb, 0), 0);
	cr_expect_eq(sb.st_mode & 07777, 0700, "the mode beneath kept");
	cr_expect(!at_has(root, "gone") && !at_has(root, ".wh.gone"));
	cr_expect(!at_has(root, "o/hidden") && at_has(root, "o/mine"));
	cr_expect(!at_has(root, "o/.wh..wh..opq"));
	cr_assert_eq(fstatat(root, "s", &sb, AT_SYMLINK_NOFOLLOW), 0);
	cr_expect(S_ISLNK(sb.st_mode), "the symlink beneath is back");
	cr_assert_eq(fstatat(root, "dir", &sb, AT_SYMLINK_NOFOLLOW), 0);
	cr_expect(S_ISREG(sb.st_mode));
	cr_expect_eq(tmp_left(), 0, "unpacked under TMPDIR");
	close(fd);
	close(fd2);
	close(root);
}

/* A directory beneath replaced by a file, then made again: the general
 * path must read the stack (*fallback). */
Test(tarlayer, extract_over_falls_back_for_a_directory_made_again)
{
	static const struct tent low[] = { D("x"), F("x/keep", "k"), END };
	static const struct tent up[] = { F("x", "f"), D("x"), END };
	struct hu_merge_stats st = { 0 };
	struct hu_error e = { 0 };
	bool fallback = false;
	int fd, fd2, root;

	mktar("low.tar", "none", low);
	mktar("up.tar", "none", up);
	tu_mkdir("out");
	root = open(tu_path("out"), O_RDONLY | O_DIRECTORY);
	fd = open(tu_path("low.tar"), O_RDONLY);
	fd2 = open(tu_path("up.tar"), O_RDONLY);
	cr_assert(root >= 0 && fd >= 0 && fd2 >= 0);
	cr_assert_eq(extract("low.tar", fd, root, false, &st, NULL, &e), 0,
		     "%s", e.msg);
	cr_expect_eq(extract("up.tar", fd2, root, true, &st, &fallback, &e),
		     -1);
	cr_expect(fallback);
	hu_error_clear(&e);
	close(fd);
	close(fd2);
	close(root);
}

/* A corrupt tarball: the error names it, as the unpack's does; what was
 * written is the caller's to remove. */
Test(tarlayer, extract_of_a_corrupt_tarball_fails_naming_it)
{
	static const struct tent v[] = { F("a", "aaaa"), F("b", "b"), END };
	struct hu_error e = { 0 };
	struct hu_merge_stats st = { 0 };
	int fd, root;

	mktar("c.tar", "none", v);
	cr_assert_eq(truncate(tu_path("c.tar"), 700), 0);
	tu_mkdir("out");
	root = open(tu_path("out"), O_RDONLY | O_DIRECTORY);
	fd = open(tu_path("c.tar"), O_RDONLY);
	cr_assert_eq(extract("c.tar", fd, root, false, &st, NULL, &e), -1);
	cr_expect_str_eq(e.path, "c.tar: a");
	cr_expect(strstr(e.msg, "corrupt or truncated tarball") != NULL,
		  "%s", e.msg);
	hu_error_clear(&e);
	close(fd);
	close(root);
}

/* ---- progress --------------------------------------------------------------- */

struct reads {
	int n;
	uint64_t done[16], read[16], size;
};

static void on_read(void *ctx, const char *what, uint64_t done,
		    uint64_t read, uint64_t size)
{
	struct reads *rs = ctx;

	(void)what;
	cr_assert_lt(rs->n, 16);
	rs->done[rs->n] = done;
	rs->read[rs->n++] = read;
	rs->size = size;
}

/* 64 files of 64 KiB of one byte, in @comp: reported at the start, every
 * 16th entry and at the end. */
static void read_reports(const char *rel, const char *comp, struct reads *rs,
			 struct hu_progress_bytes *b)
{
	struct tent v[65] = { 0 };
	char names[64][8], *data = malloc(65537);
	struct hu_report r = { .progress_read = on_read, .bytes = b,
			       .ctx = rs };
	struct hu_stack_opts o = { .report = &r };
	struct hu_error e = { 0 };
	struct hu_layer l;

	cr_assert_not_null(data);
	memset(data, 'x', 65536);
	data[65536] = '\0';
	for (int i = 0; i < 64; i++) {
		snprintf(names[i], sizeof(names[i]), "f%d", i);
		v[i] = (struct tent)F(names[i], data);
	}
	mktar(rel, comp, v);
	free(data);
	cr_assert_eq(hu_layer_open(&l, tu_path(rel), &o, &e), 0, "%s: %s",
		     e.path, e.msg);
	hu_layer_close(&l);
}

/* The share reported is of what the tar reader took, not of what the
 * decompressing thread read ahead: a plain tar's is the end of the last
 * entry taken, to the byte. */
Test(tarlayer, progress_counts_the_bytes_behind_the_entries_taken)
{
	struct hu_progress_bytes b = { 0 };
	struct reads rs = { 0 };

	read_reports("p.tar", "none", &rs, &b);
	cr_assert_eq(rs.n, 6);
	for (int i = 0; i < 5; i++) {
		cr_expect_eq(rs.done[i], 16u * i);
		cr_expect_eq(rs.read[i], rs.done[i] * (512 + 65536),
			     "after %llu entries: %llu",
			     (unsigned long long)rs.done[i],
			     (unsigned long long)rs.read[i]);
	}
	/* the last: all of it, the end blocks too */
	cr_expect_eq(rs.done[5], 64);
	cr_expect_eq(rs.read[5], rs.size);
	cr_expect_eq(b.tarball_done, rs.size);
	cr_expect_eq(b.tarball_size, rs.size);
}

/* A gzip stream far smaller than one read: the thread has all of it at
 * once, yet the share grows with the entries and is whole only at the
 * end. */
Test(tarlayer, progress_of_a_compressed_tarball_follows_the_entries)
{
	struct hu_progress_bytes b = { 0 };
	struct reads rs = { 0 };

	read_reports("p.tgz", "gzip", &rs, &b);
	cr_assert_eq(rs.n, 6);
	cr_expect_lt(rs.size, 128 << 10, "one read");
	cr_expect_eq(rs.read[0], 0);
	for (int i = 1; i < 5; i++) {
		cr_expect_geq(rs.read[i], rs.read[i - 1]);
		cr_expect_lt(rs.read[i], rs.size, "after %llu entries",
			     (unsigned long long)rs.done[i]);
	}
	cr_expect_eq(rs.done[5], 64);
	cr_expect_eq(rs.read[5], rs.size);
	cr_expect_eq(b.tarball_done, rs.size);
	cr_expect_eq(b.tarball_size, rs.size);
}
