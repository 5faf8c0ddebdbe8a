/* SPDX-License-Identifier: MIT */
/* A layer's directories on disk or in a path index (layer/ldir.c): an
 * index layer answers as its unpack's directory would, its handles are
 * no fds, and its implicit directories read as tardirs.c makes them. */
#include <archive.h>
#include <archive_entry.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "layer/ldir.h"
#include "testutil.h"

static void teardown(void)
{
	tu_cleanup();
}

TestSuite(ldir, .fini = teardown);

struct tent {
	char type;		/* f file, d dir, l symlink, h hard link */
	const char *path;
	const char *data;	/* content; link target */
	const char *xattr;	/* "name=value" */
};

static const char *mktar(const char *rel, const struct tent *v)
{
	struct archive *a = archive_write_new();

	cr_assert_eq(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
	cr_assert_eq(archive_write_open_filename(a, tu_path(rel)),
		     ARCHIVE_OK);
	for (; v->type; v++) {
		struct archive_entry *ae = archive_entry_new();
		size_t len = v->data && v->type == 'f' ? strlen(v->data) : 0;
		mode_t type = v->type == 'd' ? AE_IFDIR :
			v->type == 'l' ? AE_IFLNK : AE_IFREG;

		archive_entry_set_pathname(ae, v->path);
		archive_entry_set_mtime(ae, 1000000000, 0);
		archive_entry_set_filetype(ae, type);
		archive_entry_set_perm(ae, type == AE_IFDIR ? 0750 : 0640);
		if (v->type == 'l')
			archive_entry_set_symlink(ae, v->data);
		if (v->type == 'h')
			archive_entry_set_hardlink(ae, v->data);
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
		cr_assert_eq(archive_write_header(a, ae), ARCHIVE_OK);
		if (len)
			cr_assert_eq(archive_write_data(a, v->data, len),
				     (la_ssize_t)len);
		archive_entry_free(ae);
	}
	cr_assert_eq(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	return tu_path(rel);
}

#define T(t, p) { .type = (t), .path = (p) }
#define TD(t, p, d) { .type = (t), .path = (p), .data = (d) }
#define TX(t, p, d, x) { .type = (t), .path = (p), .data = (d), .xattr = (x) }
#define END { .type = 0 }

/* Layer @l: tarball @tar read from its index, over @below (NULL: alone). */
static void open_index(struct hu_layer *l, const char *tar,
		       const struct hu_stack *below)
{
	struct hu_error e = { 0 };
	struct hu_pindex *x = NULL;
	int fd = open(tar, O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	memset(l, 0, sizeof(*l));
	l->path = strdup(tar);
	l->unpacked_lock = -1;
	cr_assert_eq(hu_pindex_build(fd, NULL, 0, tar, NULL, NULL, &x, &e), 0,
		     "%s", e.msg);
	close(fd);
	cr_assert_eq(hu_ldir_imply(l, x, below, &e), 0, "%s", e.msg);
}

static const struct tent sample[] = {
	T('d', "etc"),
	TX('f', "etc/passwd", "root\n", "user.k=v"),
	TD('h', "etc/link", "etc/passwd"),
	TD('l', "etc/sh", "/bin/busybox"),
	TD('f', "usr/lib/f", "deep"),
	END
};

Test(ldir, an_index_layer_reads_as_its_directory)
{
	const char *tar = mktar("a.tar", sample);
	struct hu_layer l;
	struct hu_names names;
	struct hu_error e = { 0 };
	struct stat st, st2;
	char buf[64], small[16], *list;
	ssize_t n;
	int etc;

	open_index(&l, tar, NULL);
	cr_expect_eq(l.format, HU_FMT_OCI);
	cr_expect_geq(l.fd, HU_LDIR_BASE);
	etc = hu_ldir_open(&l, l.fd, "etc");
	cr_assert_geq(etc, HU_LDIR_BASE);
	cr_assert_eq(hu_layer_names_read(&l, etc, true, &names, "etc", &e),
		     0);
	cr_assert_eq(names.n, 3);
	cr_expect_str_eq(names.v[0].name, "link");
	cr_expect_str_eq(names.v[1].name, "passwd");
	cr_expect_str_eq(names.v[2].name, "sh");
	cr_expect_eq(names.v[2].type, DT_LNK);
	hu_names_free(&names);

	cr_assert_eq(hu_ldir_stat(&l, etc, "passwd", &st), 0);
	cr_expect(S_ISREG(st.st_mode));
	cr_expect_eq(st.st_mode & 07777, 0640);
	cr_expect_eq(st.st_size, 5);
	cr_expect_eq(st.st_nlink, 2);
	cr_assert_eq(hu_ldir_stat(&l, etc, "link", &st2), 0);
	cr_expect_eq(st.st_ino, st2.st_ino);
	cr_assert_eq(hu_ldir_stat(&l, l.fd, "usr/lib/f", &st), 0);
	cr_expect_eq(hu_ldir_stat(&l, etc, "nope", &st), -1);
	cr_expect_eq(errno, ENOENT);
	cr_expect_eq(hu_ldir_stat(&l, etc, "passwd/x", &st), -1);
	cr_expect_eq(errno, ENOTDIR);
	cr_expect_eq(hu_ldir_open(&l, etc, "passwd"), -1);
	cr_expect_eq(errno, ENOTDIR);
	cr_expect_eq(hu_ldir_open(&l, etc, "sh"), -1);
	cr_expect_eq(errno, ELOOP);

	n = hu_ldir_readlink(&l, etc, "sh", buf, sizeof(buf));
	cr_assert_eq(n, 12);
	cr_expect_eq(memcmp(buf, "/bin/busybox", 12), 0);
	cr_expect_eq(hu_ldir_readlink(&l, etc, "passwd", buf, sizeof(buf)),
		     -1);
	cr_expect_eq(errno, EINVAL);

	n = hu_ldir_xattr_names(&l, etc, "passwd", small, sizeof(small),
				&list);
	cr_assert_eq(n, 7);
	cr_expect_eq(memcmp(list, "user.k", 7), 0);
	cr_expect_eq(hu_ldir_getxattr(&l, etc, "passwd", "user.k", NULL, 0),
		     1);
	cr_expect_eq(hu_ldir_getxattr(&l, etc, "passwd", "user.k", buf, 1),
		     1);
	cr_expect_eq(buf[0], 'v');
	cr_expect_eq(hu_ldir_getxattr(&l, etc, "passwd", "user.no", buf, 1),
		     -1);
	cr_expect_eq(errno, ENODATA);

	/* no data in an index: said plainly */
	cr_expect_eq(hu_ldir_open_data(&l, etc, "passwd", O_RDONLY, &e), -1);
	cr_expect_eq(e.err, EOPNOTSUPP);
	hu_error_clear(&e);

	/* a handle is no fd: the kernel says EBADF, never another file */
	cr_expect_eq(fstat(etc, &st), -1);
	cr_expect_eq(errno, EBADF);
	cr_expect_eq(hu_ldir_stat(&l, 3, "passwd", &st), -1);
	cr_expect_eq(errno, EBADF);
	hu_ldir_close(&l, etc);
	hu_layer_close(&l);
}

/* A directory the tarball only implies reads as tardirs.c makes it: with
 * the mode, times and xattrs of the directory beneath; gone where nothing
 * is beneath and it holds markers only; kept with its markers where a
 * directory beneath stands for it. */
Test(ldir, implicit_directories_read_as_their_unpack)
{
	static const struct tent up[] = {
		TD('f', "a/new", "n"),
		T('f', "gone/.wh.x"),
		T('f', "none/.wh.y"),
		T('f', "empty/sub/.wh.z"),
		END
	};
	const char *tar;
	struct hu_stack below;
	struct hu_error e = { 0 };
	struct hu_layer l;
	struct stat st;
	char buf[8];

	tu_file("L0/a/old", "o\n");
	tu_file("L0/gone/x", "x\n");
	cr_assert_eq(chmod(tu_path("L0/a"), 0700), 0);
	tu_xattr("L0/a", "user.dir", "below");
	tar = mktar("up.tar", up);
	cr_assert_eq(tu_stack(&below, &e, 1, "L0"), 0, "%s", e.msg);
	open_index(&l, tar, &below);

	cr_assert_eq(hu_ldir_stat(&l, l.fd, "a", &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0700);
	cr_expect_eq(hu_ldir_getxattr(&l, l.fd, "a", "user.dir", buf,
				      sizeof(buf)), 5);
	cr_expect_eq(hu_ldir_stat(&l, l.fd, "gone", &st), 0,
		     "a directory beneath stands for it");
	cr_expect_eq(hu_ldir_stat(&l, l.fd, "gone/.wh.x", &st), 0);
	cr_expect_eq(hu_ldir_stat(&l, l.fd, "none", &st), -1,
		     "markers over nothing: gone");
	cr_expect_eq(errno, ENOENT);
	cr_expect_eq(hu_ldir_stat(&l, l.fd, "empty", &st), -1,
		     "holding only a directory gone: gone too");
	hu_layer_close(&l);

	/* alone, a layer keeps them all */
	open_index(&l, tar, NULL);
	cr_expect_eq(hu_ldir_stat(&l, l.fd, "none", &st), 0);
	cr_expect_eq(hu_ldir_stat(&l, l.fd, "empty/sub", &st), 0);
	hu_layer_close(&l);
	hu_stack_close(&below);
}
