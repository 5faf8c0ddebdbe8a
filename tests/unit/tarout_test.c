/* SPDX-License-Identifier: MIT */
/* The tar writer, its byte pipeline and flatten: what the tarball holds,
 * byte for byte where it matters, and that equal input gives equal bytes. */
#include <archive.h>
#include <archive_entry.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <zlib.h>

#include "tar/paxxattr.h"
#include "testutil.h"

static void teardown(void)
{
	tu_cleanup();
}

TestSuite(tarout, .fini = teardown);

/* ---- helpers ------------------------------------------------------------ */

static struct hu_tarout *start(const char *rel, const struct hu_tarout_opts *o,
			       int *fd)
{
	struct hu_tarout_opts none = { 0 };
	struct hu_error e = { 0 };
	struct hu_tarout *t;

	*fd = open(tu_path(rel), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
		   0644);
	cr_assert(*fd >= 0);
	cr_assert_eq(hu_tarout_open(&t, *fd, o ? o : &none, &e), 0, "%s",
		     e.msg);
	return t;
}

static void finish(struct hu_tarout *t, int fd, struct hu_digests *d)
{
	struct hu_digests dummy;
	struct hu_error e = { 0 };

	cr_assert_eq(hu_tarout_close(t, d ? d : &dummy, &e), 0, "%s", e.msg);
	close(fd);
}

/* One entry for test file @rel, stored at @path. */
static void add(struct hu_tarout *t, const char *path, const char *rel)
{
	struct hu_error e = { 0 };
	struct stat st;
	int dirfd = open(tu_tmpdir(), O_RDONLY | O_DIRECTORY), datafd = -1;

	cr_assert_eq(fstatat(dirfd, rel, &st, AT_SYMLINK_NOFOLLOW), 0, "%s",
		     rel);
	if (S_ISREG(st.st_mode))
		datafd = openat(dirfd, rel, O_RDONLY);
	cr_assert_eq(hu_tarout_entry(t, path, &st, dirfd, rel, datafd, &e), 0,
		     "%s: %s", path, e.msg);
	if (datafd >= 0)
		close(datafd);
	close(dirfd);
}

static unsigned char *slurp(const char *rel, size_t *len)
{
	int fd = open(tu_path(rel), O_RDONLY);
	struct stat st;
	unsigned char *b;

	cr_assert(fd >= 0 && fstat(fd, &st) == 0);
	b = malloc(st.st_size + 1);
	cr_assert_eq(read(fd, b, st.st_size), st.st_size);
	close(fd);
	*len = st.st_size;
	return b;
}

static bool contains(const unsigned char *b, size_t len, const char *s)
{
	return memmem(b, len, s, strlen(s)) != NULL;
}

static void sha256_hex(const void *buf, size_t len, char out[72])
{
	unsigned char d[32];
	unsigned int n;

	EVP_Digest(buf, len, d, &n, EVP_sha256(), NULL);
	strcpy(out, "sha256:");
	for (unsigned int i = 0; i < n; i++)
		sprintf(out + 7 + 2 * i, "%02x", d[i]);
}

/* Reading back with libarchive. */
static struct archive *reader(const char *rel)
{
	struct archive *a = archive_read_new();

	archive_read_support_filter_all(a);
	archive_read_support_format_all(a);
	cr_assert_eq(archive_read_open_filename(a, tu_path(rel), 1 << 16),
		     ARCHIVE_OK);
	return a;
}

static struct archive_entry *next(struct archive *a)
{
	struct archive_entry *ent;

	cr_assert_eq(archive_read_next_header(a, &ent), ARCHIVE_OK, "%s",
		     archive_error_string(a));
	return ent;
}

static bool xattr_of(struct archive_entry *ent, const char *name,
		     const void **v, size_t *n)
{
	const char *x;

	archive_entry_xattr_reset(ent);
	while (archive_entry_xattr_next(ent, &x, v, n) == ARCHIVE_OK)
		if (!strcmp(x, name))
			return true;
	return false;
}

/* ---- entries ------------------------------------------------------------ */

Test(tarout, mode_owner_and_mtime_and_nothing_else)
{
	struct timespec ts[2] = { { 5, 0 }, { 1500000000, 0 } };
	struct timespec tn[2] = { { 5, 0 }, { 1500000000, 250000000 } };
	struct archive_entry *ent;
	struct archive *a;
	unsigned char *raw;
	size_t len;
	int fd;
	struct hu_tarout *t;

	tu_file("src/plain", "abc");
	tu_file("src/fine", "defg");
	cr_assert_eq(chmod(tu_path("src/plain"), 04751), 0);
	cr_assert_eq(utimensat(AT_FDCWD, tu_path("src/plain"), ts, 0), 0);
	cr_assert_eq(utimensat(AT_FDCWD, tu_path("src/fine"), tn, 0), 0);
	t = start("o.tar", NULL, &fd);
	add(t, "plain", "src/plain");
	add(t, "fine", "src/fine");
	finish(t, fd, NULL);

	raw = slurp("o.tar", &len);
	/* A short ASCII name, no xattrs, a whole-second mtime: a bare ustar
	 * header, no pax record at all. */
	cr_assert_eq(raw[156], '0');
	cr_assert_str_eq((char *)raw, "plain");
	cr_assert_eq(memcmp(raw + 265, "\0", 1), 0, "empty user name");
	cr_assert_eq(memcmp(raw + 297, "\0", 1), 0, "empty group name");
	/* The fraction of a second is kept, in a pax record; never atime or
	 * ctime. */
	cr_assert(contains(raw, len, "mtime=1500000000.25\n"));
	cr_assert(!contains(raw, len, "atime="));
	cr_assert(!contains(raw, len, "ctime="));
	cr_assert(!contains(raw, len, "LIBARCHIVE."));
	free(raw);

	a = reader("o.tar");
	ent = next(a);
	cr_assert_str_eq(archive_entry_pathname(ent), "plain");
	cr_assert_eq(archive_entry_mode(ent), S_IFREG | 04751);
	cr_assert_eq(archive_entry_uid(ent), getuid());
	cr_assert_eq(archive_entry_mtime(ent), 1500000000);
	cr_assert_eq(archive_entry_size(ent), 3);
	cr_assert(!archive_entry_atime_is_set(ent));
	cr_assert(!archive_entry_ctime_is_set(ent));
	ent = next(a);
	cr_assert_eq(archive_entry_mtime_nsec(ent), 250000000);
	archive_read_free(a);
}

Test(tarout, root_and_directories)
{
	struct hu_tarout *t;
	unsigned char *raw;
	size_t len;
	int fd;

	tu_mkdir("src/d");
	t = start("o.tar", NULL, &fd);
	add(t, "", "src");
	add(t, "d", "src/d");
	finish(t, fd, NULL);
	raw = slurp("o.tar", &len);
	/* pax headers first (times of fresh directories have fractions) */
	cr_assert(contains(raw, len, "./\0"));
	cr_assert(contains(raw, len, "d/\0"));
	free(raw);
}

Test(tarout, xattrs_byte_for_byte_private_ones_left_out)
{
	static const unsigned char cap[20] = { 1, 0, 0, 2, 0x20, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
	static const unsigned char bin[5] = { 0, '\n', 0xff, '=', 0 };
	struct archive_entry *ent;
	struct archive *a;
	const void *v;
	size_t n;
	unsigned char *raw;
	size_t len;
	int fd;
	struct hu_tarout *t;
	bool have_cap;

	tu_file("src/f", "x");
	cr_assert_eq(setxattr(tu_path("src/f"), "user.bin", bin, sizeof(bin),
			      0), 0);
	tu_xattr("src/f", "user.overlay.opaque", "y");
	tu_xattr("src/f", "user.union.whiteout", "y");
	tu_xattr("src/f", "user.a", "1");
	have_cap = setxattr(tu_path("src/f"), "security.capability", cap,
			    sizeof(cap), 0) == 0;
	if (geteuid() == 0)
		tu_xattr("src/f", "trusted.overlay.metacopy", "");
	t = start("o.tar", NULL, &fd);
	add(t, "f", "src/f");
	finish(t, fd, NULL);

	raw = slurp("o.tar", &len);
	cr_assert(contains(raw, len, "SCHILY.xattr.user.a=1\n"));
	cr_assert(!contains(raw, len, "overlay"));
	cr_assert(!contains(raw, len, "union"));
	/* sorted by name */
	if (have_cap)
		cr_assert(memmem(raw, len, "SCHILY.xattr.security", 21) <
			  memmem(raw, len, "SCHILY.xattr.user.a", 19));
	free(raw);

	a = reader("o.tar");
	ent = next(a);
	cr_assert(xattr_of(ent, "user.bin", &v, &n));
	cr_assert_eq(n, sizeof(bin));
	cr_assert_eq(memcmp(v, bin, n), 0);
	if (have_cap) {
		cr_assert(xattr_of(ent, "security.capability", &v, &n));
		cr_assert_eq(n, sizeof(cap));
		cr_assert_eq(memcmp(v, cap, n), 0);
	}
	cr_assert(!xattr_of(ent, "user.overlay.opaque", &v, &n));
	archive_read_free(a);
}

/* Names as GNU tar writes them: the bytes, with only '%' and '=' escaped
 * as %25 and %3D; never libarchive's URL encoding, nor its own
 * LIBARCHIVE.xattr.* records. */
static const char *const odd_names[] = {
	"user.sp ace", "user.\xc3\xbc", "user.a%b", "user.a=b", "user.\xff",
	"user.a%20b",
};
static const char *const odd_keys[] = {
	"SCHILY.xattr.user.sp ace=0\n", "SCHILY.xattr.user.\xc3\xbc=1\n",
	"SCHILY.xattr.user.a%25b=2\n", "SCHILY.xattr.user.a%3Db=3\n",
	"SCHILY.xattr.user.\xff=4\n", "SCHILY.xattr.user.a%2520b=5\n",
};
#define NODD (sizeof(odd_names) / sizeof(odd_names[0]))

static void odd_file(const char *rel)
{
	tu_file(rel, "x");
	for (size_t i = 0; i < NODD; i++) {
		char v[2] = { (char)('0' + i), 0 };

		cr_assert_eq(setxattr(tu_path(rel), odd_names[i], v, 1, 0), 0,
			     "%s", odd_names[i]);
	}
}

Test(tarout, xattr_names_are_written_as_gnu_tar_writes_them)
{
	unsigned char *raw;
	size_t len;
	int fd;
	struct hu_tarout *t;

	odd_file("src/f");
	t = start("o.tar", NULL, &fd);
	add(t, "f", "src/f");
	finish(t, fd, NULL);
	raw = slurp("o.tar", &len);
	for (size_t i = 0; i < NODD; i++)
		cr_expect(contains(raw, len, odd_keys[i]), "%s", odd_names[i]);
	cr_expect_not(contains(raw, len, "LIBARCHIVE"));
	cr_expect_not(contains(raw, len, "sp%20ace"));
	cr_expect_not(contains(raw, len, "%C3%BC"));
	free(raw);
}

/* Where no name needs escaping, the header is the one libarchive itself
 * writes: the rewrite changes the names and nothing else. */
Test(tarout, a_header_with_plain_xattr_names_is_libarchives_own)
{
	static char buf[1 << 16];
	struct archive_entry *ae = archive_entry_new();
	struct archive *a = archive_write_new();
	unsigned char *raw;
	size_t len, used = 0;
	int fd;
	struct hu_tarout *t;
	struct stat st;

	tu_file("src/f", "data");
	tu_xattr("src/f", "user.b", "2");
	tu_xattr("src/f", "user.a", "1");
	cr_assert_eq(stat(tu_path("src/f"), &st), 0);
	t = start("o.tar", NULL, &fd);
	add(t, "f", "src/f");
	finish(t, fd, NULL);
	raw = slurp("o.tar", &len);

	archive_write_set_format_pax(a);
	archive_write_set_bytes_per_block(a, 0);
	archive_write_set_bytes_in_last_block(a, 1);
	archive_write_set_format_option(a, "pax", "xattrheader", "SCHILY");
	cr_assert_eq(archive_write_open_memory(a, buf, sizeof(buf), &used),
		     ARCHIVE_OK);
	archive_entry_copy_pathname(ae, "f");
	archive_entry_set_mode(ae, st.st_mode);
	archive_entry_set_uid(ae, st.st_uid);
	archive_entry_set_gid(ae, st.st_gid);
	archive_entry_set_mtime(ae, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	archive_entry_set_size(ae, 4);
	archive_entry_xattr_add_entry(ae, "user.b", "2", 1);
	archive_entry_xattr_add_entry(ae, "user.a", "1", 1);
	cr_assert_eq(archive_write_header(a, ae), ARCHIVE_OK);
	cr_assert_eq(archive_write_data(a, "data", 4), 4);
	cr_assert_eq(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	archive_entry_free(ae);
	cr_assert_eq(len, used);
	for (size_t i = 0; i < len; i++)
		cr_assert_eq(raw[i], (unsigned char)buf[i],
			     "byte %zu: %02x, not %02x", i, raw[i],
			     (unsigned char)buf[i]);
	free(raw);
}

/* File @rel of tarball layer @l has the first @n odd names, each with its
 * value, and no other user.* name. */
static void expect_odd_names(const struct hu_layer *l, const char *rel,
			     size_t n)
{
	int fd = openat(l->fd, rel, O_RDONLY);
	char list[4096];
	ssize_t ll;
	size_t count = 0;

	cr_assert_geq(fd, 0);
	ll = flistxattr(fd, list, sizeof(list));
	cr_assert_geq(ll, 0);
	for (ssize_t off = 0; off < ll; off += strlen(list + off) + 1)
		count += !strncmp(list + off, "user.", 5);
	cr_expect_eq(count, n, "%zu user xattrs, not %zu", count, n);
	for (size_t i = 0; i < n; i++) {
		char v[8] = "";

		cr_expect_eq(fgetxattr(fd, odd_names[i], v, sizeof(v)), 1,
			     "%s", odd_names[i]);
		cr_expect_eq(v[0], (char)('0' + i), "%s", odd_names[i]);
	}
	close(fd);
}

static void open_layer(struct hu_layer *l, const char *rel)
{
	struct hu_stack_opts o = { 0 };
	struct hu_error e = { 0 };

	cr_assert_eq(hu_layer_open(l, tu_path(rel), &o, &e), 0, "%s",
		     e.msg);
}

/* What hunion writes, a tarball layer reads back: every name. */
Test(tarout, xattr_names_come_back_from_a_tarball_layer)
{
	struct hu_layer l;
	int fd;
	struct hu_tarout *t;

	odd_file("src/f");
	t = start("o.tar", NULL, &fd);
	add(t, "f", "src/f");
	finish(t, fd, NULL);
	open_layer(&l, "o.tar");
	expect_odd_names(&l, "f", NODD);
	hu_layer_close(&l);
}

/* libarchive's own forms: URL-encoded SCHILY.xattr.* keys alone (hunion
 * before it wrote GNU tar's form), or with LIBARCHIVE.xattr.* records
 * beside them (bsdtar).  Each name is read once, as it was.  Not the last
 * odd name: "%20" in a name is where the two forms cannot be told apart
 * (paxxattr.c). */
static void libarchive_tar(const char *rel, const char *hdr)
{
	struct archive_entry *ae = archive_entry_new();
	struct archive *a = archive_write_new();

	archive_write_set_format_pax(a);
	cr_assert_eq(archive_write_set_format_option(a, "pax", "xattrheader",
						     hdr), ARCHIVE_OK);
	cr_assert_eq(archive_write_open_filename(a, tu_path(rel)),
		     ARCHIVE_OK);
	archive_entry_copy_pathname(ae, "f");
	archive_entry_set_mode(ae, S_IFREG | 0644);
	archive_entry_set_size(ae, 0);
	for (size_t i = 0; i < NODD - 1; i++) {
		char v[2] = { (char)('0' + i), 0 };

		archive_entry_xattr_add_entry(ae, odd_names[i], v, 1);
	}
	cr_assert_eq(archive_write_header(a, ae), ARCHIVE_OK);
	cr_assert_eq(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	archive_entry_free(ae);
}

Test(tarout, xattr_names_of_libarchive_tarballs_are_decoded)
{
	struct hu_layer l;

	libarchive_tar("schily.tar", "SCHILY");
	open_layer(&l, "schily.tar");
	expect_odd_names(&l, "f", NODD - 1);
	hu_layer_close(&l);
	libarchive_tar("both.tar", "ALL");
	open_layer(&l, "both.tar");
	expect_odd_names(&l, "f", NODD - 1);
	hu_layer_close(&l);
}

/* The names as the two forms write them, decoded. */
Test(tarout, pax_xattr_names_in_both_forms)
{
	static const char *const cases[][2] = {
		/* GNU tar: raw bytes, %25 and %3D */
		{ "user.sp ace", "user.sp ace" },
		{ "user.a%25b", "user.a%b" },
		{ "user.a%3Db", "user.a=b" },
		{ "user.a%2520b", "user.a%20b" },
		{ "user.\xc3\xbc%25", "user.\xc3\xbc%" },
		{ "user.a%20 b", "user.a%20 b" },	/* a raw space: GNU */
		{ "user.100%", "user.100%" },
		{ "user.a%41", "user.a%41" },		/* 'A': never escaped */
		/* libarchive's URL encoding */
		{ "user.sp%20ace", "user.sp ace" },
		{ "user.%C3%BC", "user.\xc3\xbc" },
		{ "user.%FF", "user.\xff" },
	};
	char out[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cr_assert_eq(hu_pax_xattr_name(cases[i][0], out, sizeof(out)),
			     0);
		cr_expect_str_eq(out, cases[i][1], "%s", cases[i][0]);
	}
	cr_expect_eq(hu_pax_xattr_name("user.long", out, 9), -1);
}

Test(tarout, hard_links_devices_fifos_symlinks)
{
	struct stat st = { 0 };
	struct archive_entry *ent;
	struct archive *a;
	struct hu_error e = { 0 };
	int fd, dirfd;
	struct hu_tarout *t;

	tu_file("src/f", "data");
	tu_symlink("../some/where", "src/l");
	dirfd = open(tu_path("src"), O_RDONLY | O_DIRECTORY);
	t = start("o.tar", NULL, &fd);
	add(t, "f", "src/f");
	cr_assert_eq(lstat(tu_path("src/f"), &st), 0);
	cr_assert_eq(hu_tarout_hardlink(t, "g", "f", &st, &e), 0);
	/* Devices need no real node: the stat says what to write (the
	 * name only gives the xattrs, here none). */
	st.st_mode = S_IFCHR | 0620;
	st.st_rdev = makedev(136, 5);
	cr_assert_eq(hu_tarout_entry(t, "tty", &st, dirfd, "f", -1, &e), 0);
	st.st_mode = S_IFBLK | 0600;
	st.st_rdev = makedev(259, 70000);
	cr_assert_eq(hu_tarout_entry(t, "blk", &st, dirfd, "f", -1, &e), 0);
	st.st_mode = S_IFIFO | 0640;
	cr_assert_eq(hu_tarout_entry(t, "fifo", &st, dirfd, "f", -1, &e), 0);
	add(t, "l", "src/l");
	st.st_mode = S_IFSOCK | 0644;
	cr_assert_eq(hu_tarout_entry(t, "sock", &st, dirfd, "f", -1, &e), -1);
	cr_assert_str_eq(e.path, "sock");
	hu_error_clear(&e);
	finish(t, fd, NULL);
	close(dirfd);

	a = reader("o.tar");
	ent = next(a);
	cr_assert_eq(archive_entry_size(ent), 4);
	ent = next(a);
	cr_assert_str_eq(archive_entry_pathname(ent), "g");
	cr_assert_str_eq(archive_entry_hardlink(ent), "f");
	cr_assert_eq(archive_entry_size(ent), 0);
	ent = next(a);
	cr_assert_eq(archive_entry_filetype(ent), AE_IFCHR);
	cr_assert_eq(archive_entry_rdevmajor(ent), 136);
	cr_assert_eq(archive_entry_rdevminor(ent), 5);
	cr_assert_eq(archive_entry_perm(ent), 0620);
	ent = next(a);
	cr_assert_eq(archive_entry_filetype(ent), AE_IFBLK);
	cr_assert_eq(archive_entry_rdevmajor(ent), 259);
	cr_assert_eq(archive_entry_rdevminor(ent), 70000);
	ent = next(a);
	cr_assert_eq(archive_entry_filetype(ent), AE_IFIFO);
	ent = next(a);
	cr_assert_eq(archive_entry_filetype(ent), AE_IFLNK);
	cr_assert_str_eq(archive_entry_symlink(ent), "../some/where");
	archive_read_free(a);
}

Test(tarout, long_and_non_utf8_names_are_kept_as_bytes)
{
	char longname[400], target[2000];
	struct archive_entry *ent;
	struct archive *a;
	int fd;
	struct hu_tarout *t;

	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	memcpy(longname, "d\xff\xfe/", 4);
	longname[200] = '/';
	memset(target, 'x', sizeof(target) - 1);
	target[sizeof(target) - 1] = '\0';
	target[7] = '\x80';
	tu_file("src/f", "x");
	tu_symlink(target, "src/l");
	t = start("o.tar", NULL, &fd);
	add(t, longname, "src/f");
	add(t, "\xc3\xa9t\xc3\xa9", "src/f");
	add(t, "l", "src/l");
	finish(t, fd, NULL);

	a = reader("o.tar");
	ent = next(a);
	cr_assert_str_eq(archive_entry_pathname(ent), longname);
	ent = next(a);
	cr_assert_str_eq(archive_entry_pathname(ent), "\xc3\xa9t\xc3\xa9");
	ent = next(a);
	cr_assert_str_eq(archive_entry_symlink(ent), target);
	archive_read_free(a);
}

Test(tarout, oci_markers)
{
	struct hu_error e = { 0 };
	struct archive_entry *ent;
	struct archive *a;
	int fd;
	struct hu_tarout *t;
	const char *want[] = { "d/.wh..wh..opq", "d/.wh.gone", ".wh.top" };

	t = start("o.tar", NULL, &fd);
	cr_assert_eq(hu_tarout_opaque(t, "d", &e), 0);
	cr_assert_eq(hu_tarout_whiteout(t, "d", "gone", &e), 0);
	cr_assert_eq(hu_tarout_whiteout(t, "", "top", &e), 0);
	finish(t, fd, NULL);
	a = reader("o.tar");
	for (size_t i = 0; i < 3; i++) {
		ent = next(a);
		cr_assert_str_eq(archive_entry_pathname(ent), want[i]);
		cr_assert_eq(archive_entry_mode(ent), S_IFREG);
		cr_assert_eq(archive_entry_uid(ent), 0);
		cr_assert_eq(archive_entry_gid(ent), 0);
		cr_assert_eq(archive_entry_mtime(ent), 0);
		cr_assert_eq(archive_entry_size(ent), 0);
	}
	archive_read_free(a);
}

Test(tarout, clamp_mtime)
{
	struct timespec old[2] = { { 0, 0 }, { 1000, 5 } };
	struct timespec new[2] = { { 0, 0 }, { 3000, 7 } };
	struct hu_tarout_opts o = { .clamp_mtime = true, .mtime_max = 2000 };
	struct archive_entry *ent;
	struct archive *a;
	int fd;
	struct hu_tarout *t;

	tu_file("src/old", "o");
	tu_file("src/new", "n");
	utimensat(AT_FDCWD, tu_path("src/old"), old, 0);
	utimensat(AT_FDCWD, tu_path("src/new"), new, 0);
	t = start("o.tar", &o, &fd);
	add(t, "old", "src/old");
	add(t, "new", "src/new");
	finish(t, fd, NULL);
	a = reader("o.tar");
	ent = next(a);
	cr_assert_eq(archive_entry_mtime(ent), 1000);
	cr_assert_eq(archive_entry_mtime_nsec(ent), 5);
	ent = next(a);
	cr_assert_eq(archive_entry_mtime(ent), 2000);
	cr_assert_eq(archive_entry_mtime_nsec(ent), 0);
	archive_read_free(a);
}

/* At the limit: T.5 clamped at T is T.0, with no fraction left in a pax
 * record; T itself and T-1.5 stay as they are. */
Test(tarout, clamp_mtime_at_the_limit_drops_the_fraction)
{
	struct timespec half[2] = { { 0, 0 }, { 2000, 500000000 } };
	struct timespec at[2] = { { 0, 0 }, { 2000, 0 } };
	struct timespec below[2] = { { 0, 0 }, { 1998, 500000000 } };
	struct hu_tarout_opts o = { .clamp_mtime = true, .mtime_max = 2000 };
	struct archive_entry *ent;
	unsigned char *raw;
	struct archive *a;
	size_t len;
	int fd;
	struct hu_tarout *t;

	tu_file("src/half", "h");
	tu_file("src/at", "a");
	tu_file("src/below", "b");
	utimensat(AT_FDCWD, tu_path("src/half"), half, 0);
	utimensat(AT_FDCWD, tu_path("src/at"), at, 0);
	utimensat(AT_FDCWD, tu_path("src/below"), below, 0);
	t = start("o.tar", &o, &fd);
	add(t, "half", "src/half");
	add(t, "at", "src/at");
	add(t, "below", "src/below");
	finish(t, fd, NULL);
	a = reader("o.tar");
	ent = next(a);
	cr_assert_str_eq(archive_entry_pathname(ent), "half");
	cr_assert_eq(archive_entry_mtime(ent), 2000);
	cr_assert_eq(archive_entry_mtime_nsec(ent), 0);
	ent = next(a);
	cr_assert_eq(archive_entry_mtime(ent), 2000);
	cr_assert_eq(archive_entry_mtime_nsec(ent), 0);
	ent = next(a);
	cr_assert_eq(archive_entry_mtime(ent), 1998);
	cr_assert_eq(archive_entry_mtime_nsec(ent), 500000000);
	archive_read_free(a);
	/* Only the untouched entry carries a fractional mtime record. */
	raw = slurp("o.tar", &len);
	cr_assert(contains(raw, len, "mtime=1998.5\n"));
	cr_assert_not(contains(raw, len, "mtime=2000"));
	free(raw);
}

Test(tarout, sparse_files_are_written_expanded)
{
	struct archive_entry *ent;
	struct archive *a;
	char buf[4096];
	la_int64_t total = 0;
	ssize_t n;
	unsigned char *raw;
	size_t len;
	int fd, sfd;
	struct hu_tarout *t;

	tu_file("src/s", "");
	sfd = open(tu_path("src/s"), O_WRONLY);
	cr_assert_eq(pwrite(sfd, "end", 3, 3 << 20), 3);
	close(sfd);
	t = start("o.tar", NULL, &fd);
	add(t, "s", "src/s");
	finish(t, fd, NULL);
	raw = slurp("o.tar", &len);
	cr_assert(!contains(raw, len, "GNU.sparse"));
	cr_assert_gt(len, (size_t)3 << 20);
	free(raw);
	a = reader("o.tar");
	ent = next(a);
	cr_assert_eq(archive_entry_size(ent), (3 << 20) + 3);
	cr_assert_eq(archive_entry_sparse_count(ent), 0);
	while ((n = archive_read_data(a, buf, sizeof(buf))) > 0)
		total += n;
	cr_assert_eq(total, (3 << 20) + 3);
	archive_read_free(a);
}

Test(tarout, a_file_that_shrank_is_an_error_naming_it)
{
	struct hu_error e = { 0 };
	struct stat st;
	int fd, dirfd, datafd;
	struct hu_tarout *t;

	tu_file("src/f", "short");
	dirfd = open(tu_path("src"), O_RDONLY | O_DIRECTORY);
	datafd = openat(dirfd, "f", O_RDONLY);
	cr_assert_eq(fstat(datafd, &st), 0);
	st.st_size = 100;
	t = start("o.tar", NULL, &fd);
	cr_assert_eq(hu_tarout_entry(t, "a/f", &st, dirfd, "f", datafd, &e),
		     -1);
	cr_assert_str_eq(e.path, "a/f");
	hu_tarout_abort(t);
	hu_error_clear(&e);
	close(datafd);
	close(dirfd);
	close(fd);
}

/* ---- the byte pipeline ---------------------------------------------------- */

static void write_sample(const char *rel, const struct hu_tarout_opts *o,
			 struct hu_digests *d)
{
	int fd;
	struct hu_tarout *t = start(rel, o, &fd);

	add(t, "f", "src/f");
	add(t, "g", "src/g");
	finish(t, fd, d);
}

static void sample_files(void)
{
	struct timespec ts[2] = { { 0, 0 }, { 1234567890, 0 } };
	char *big = malloc(3 << 20);

	for (size_t i = 0; i < (3u << 20); i++)
		big[i] = (char)('a' + (i * 2654435761u >> 13) % 26);
	big[(3 << 20) - 1] = '\0';
	tu_file("src/f", "hello\n");
	tu_file("src/g", big);
	free(big);
	utimensat(AT_FDCWD, tu_path("src/f"), ts, 0);
	utimensat(AT_FDCWD, tu_path("src/g"), ts, 0);
}

Test(tarout, digests_of_a_plain_tar)
{
	struct hu_digests d;
	unsigned char *raw;
	size_t len;
	char want[72];

	sample_files();
	write_sample("o.tar", NULL, &d);
	raw = slurp("o.tar", &len);
	sha256_hex(raw, len, want);
	cr_assert_str_eq(d.digest, want);
	cr_assert_str_eq(d.diff_id, want);
	cr_assert_eq(d.size, len);
	cr_assert_eq(len % 512, 0);
	cr_assert_str_eq(d.media_type, "application/vnd.oci.image.layer.v1.tar");
	free(raw);
}

Test(tarout, gzip_header_has_no_name_and_no_time)
{
	struct hu_tarout_opts o = { .compress = HU_COMP_GZIP };
	struct hu_digests plain, gz;
	unsigned char *raw, *out;
	size_t len, plen;
	char want[72];
	uLongf outlen;
	z_stream z = { 0 };

	sample_files();
	write_sample("o.tar", NULL, &plain);
	write_sample("o.tar.gz", &o, &gz);
	raw = slurp("o.tar.gz", &len);
	cr_assert_eq(raw[0], 0x1f);
	cr_assert_eq(raw[1], 0x8b);
	cr_assert_eq(raw[3], 0, "FLG: no name, no comment, no extra");
	cr_assert_eq(raw[4] | raw[5] | raw[6] | raw[7], 0, "MTIME 0");
	cr_assert_eq(raw[9], 255, "OS unknown");
	sha256_hex(raw, len, want);
	cr_assert_str_eq(gz.digest, want);
	cr_assert_eq(gz.size, len);
	cr_assert_str_eq(gz.diff_id, plain.diff_id);
	cr_assert_str_eq(gz.media_type,
			 "application/vnd.oci.image.layer.v1.tar+gzip");
	/* and it decompresses to the plain tar */
	free(slurp("o.tar", &plen));
	outlen = plen;
	out = malloc(plen);
	cr_assert_eq(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = raw;
	z.avail_in = len;
	z.next_out = out;
	z.avail_out = outlen;
	cr_assert_eq(inflate(&z, Z_FINISH), Z_STREAM_END);
	cr_assert_eq(z.total_out, plen);
	inflateEnd(&z);
	free(out);
	free(raw);
}

Test(tarout, zstd_bytes_do_not_depend_on_the_threads)
{
	struct hu_tarout_opts one = { .compress = HU_COMP_ZSTD, .threads = 1 };
	struct hu_tarout_opts four = { .compress = HU_COMP_ZSTD, .threads = 4,
				       .level = 3 };
	struct hu_digests plain, d1, d4;
	unsigned char *a, *b;
	size_t la, lb;

	sample_files();
	write_sample("o.tar", NULL, &plain);
	write_sample("one.tar.zst", &one, &d1);
	write_sample("four.tar.zst", &four, &d4);
	a = slurp("one.tar.zst", &la);
	b = slurp("four.tar.zst", &lb);
	cr_assert_eq(la, lb);
	cr_assert_eq(memcmp(a, b, la), 0);
	cr_assert_eq(a[0], 0x28);	/* zstd frame magic 28 b5 2f fd */
	cr_assert_eq(a[3], 0xfd);
	cr_assert_str_eq(d1.digest, d4.digest);
	cr_assert_str_eq(d1.diff_id, plain.diff_id);
	cr_assert_lt(d1.size, plain.size);
	cr_assert_str_eq(d1.media_type,
			 "application/vnd.oci.image.layer.v1.tar+zstd");
	free(a);
	free(b);
}

/* A failed write surfaces (at the latest at close) with no path: the
 * caller names its output. */
Test(tarout, a_failed_write_has_no_path)
{
	struct hu_error e = { 0 };
	struct hu_digests d;
	struct stat st;
	int fd, dirfd, datafd, rc;
	struct hu_tarout *t;

	sample_files();
	setenv("HUNION_FAULT", "write:1:ENOSPC", 1);
	t = start("o.tar", NULL, &fd);
	add(t, "f", "src/f");
	dirfd = open(tu_path("src"), O_RDONLY | O_DIRECTORY);
	datafd = openat(dirfd, "g", O_RDONLY);
	fstat(datafd, &st);
	rc = hu_tarout_entry(t, "g", &st, dirfd, "g", datafd, &e);
	close(datafd);
	close(dirfd);
	if (rc == 0)
		rc = hu_tarout_close(t, &d, &e);
	else
		hu_tarout_abort(t);
	cr_assert_eq(rc, -1);
	cr_assert_null(e.path);
	cr_assert_eq(e.err, ENOSPC);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq(st.st_size, 0, "nothing written after the failure");
	close(fd);
	hu_error_clear(&e);
}

/* Compressed, the bytes go out from the pipeline thread: a failed write
 * there is reported all the same, with no path, and nothing follows it.
 * Enough data for several writes.  When it surfaces depends on how far
 * the pipeline got: in the entry's own call when the writer thread failed
 * while the entry's data were still going in, else by the close. */
Test(tarout, a_failed_write_of_compressed_bytes_is_reported)
{
	struct hu_tarout_opts o = { .compress = HU_COMP_GZIP, .level = 1 };
	struct hu_error e = { 0 };
	struct hu_digests d;
	struct stat st;
	int fd, dirfd, datafd, rc;
	struct hu_tarout *t;
	unsigned char *noise = malloc(8 << 20);

	cr_assert_not_null(noise);
	/* incompressible: xorshift */
	for (size_t i = 0, x = 88172645463325252u; i < (8u << 20); i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		noise[i] = (unsigned char)(x >> 24);
	}
	tu_file("src/big", "");
	fd = open(tu_path("src/big"), O_WRONLY);
	cr_assert_eq(write(fd, noise, 8 << 20), 8 << 20);
	close(fd);
	free(noise);
	setenv("HUNION_FAULT", "write:2:ENOSPC", 1);
	t = start("o.tar.gz", &o, &fd);
	dirfd = open(tu_path("src"), O_RDONLY | O_DIRECTORY);
	datafd = openat(dirfd, "big", O_RDONLY);
	cr_assert(dirfd >= 0 && datafd >= 0 && fstat(datafd, &st) == 0);
	rc = hu_tarout_entry(t, "big", &st, dirfd, "big", datafd, &e);
	close(datafd);
	close(dirfd);
	if (rc == 0)
		rc = hu_tarout_close(t, &d, &e);
	else
		hu_tarout_abort(t);
	unsetenv("HUNION_FAULT");
	cr_assert_eq(rc, -1);
	cr_assert_null(e.path);
	cr_assert_eq(e.err, ENOSPC, "%s", e.msg);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq(st.st_size, 1 << 20, "one buffer written, then none");
	close(fd);
	hu_error_clear(&e);
}

/* An aborted stream ends where it was cut: no end-of-archive records. */
Test(tarout, an_abort_writes_nothing_more)
{
	unsigned char *raw;
	size_t len;
	int fd;
	struct hu_tarout *t;
	bool zeros = true;

	sample_files();
	t = start("o.tar", NULL, &fd);
	add(t, "f", "src/f");
	add(t, "g", "src/g");
	hu_tarout_abort(t);
	close(fd);
	raw = slurp("o.tar", &len);
	cr_assert_lt(len, (size_t)(3 << 20) + 2048);
	for (size_t i = len >= 1024 ? len - 1024 : 0; i < len; i++)
		zeros = zeros && raw[i] == 0;
	cr_assert(len == 0 || !zeros);
	free(raw);
}

Test(tarout, a_failure_at_close_has_no_path)
{
	struct hu_error e = { 0 };
	struct hu_digests d;
	int fd;
	struct hu_tarout *t;

	tu_file("src/f", "small");
	setenv("HUNION_FAULT", "write:1:EIO", 1);
	t = start("p.tar", NULL, &fd);
	add(t, "f", "src/f");	/* all of it still in the buffers */
	cr_assert_eq(hu_tarout_close(t, &d, &e), -1);
	cr_assert_null(e.path);
	cr_assert_eq(e.err, EIO);
	close(fd);
	hu_error_clear(&e);
}

Test(tarout, compression_names_and_levels)
{
	enum hu_compress c;
	int min, max;
	struct hu_digests d = {
		.diff_id = "sha256:aa", .digest = "sha256:bb", .size = 42,
		.media_type = "application/vnd.oci.image.layer.v1.tar+zstd" };
	char json[256];

	cr_assert_eq(hu_compress_for_path("x.tar.gz", &c), 1);
	cr_assert_eq(c, HU_COMP_GZIP);
	cr_assert_eq(hu_compress_for_path("x.tgz", &c), 1);
	cr_assert_eq(c, HU_COMP_GZIP);
	cr_assert_eq(hu_compress_for_path("x.tar.zst", &c), 1);
	cr_assert_eq(c, HU_COMP_ZSTD);
	cr_assert_eq(hu_compress_for_path("x.tar.zstd", &c), 1);
	cr_assert_eq(c, HU_COMP_ZSTD);
	cr_assert_eq(hu_compress_for_path("x.tzst", &c), 1);
	cr_assert_eq(c, HU_COMP_ZSTD);
	cr_assert_eq(hu_compress_for_path("x.tar.xz", &c), 1);
	cr_assert_eq(c, HU_COMP_XZ);
	cr_assert_eq(hu_compress_for_path("x.tar.bz2", &c), 1);
	cr_assert_eq(c, HU_COMP_BZIP2);
	cr_assert_eq(hu_compress_for_path("x.tar", &c), 1);
	cr_assert_eq(c, HU_COMP_NONE);
	cr_assert_eq(hu_compress_for_path("x.tar.lz4", &c), -1);
	cr_assert_eq(hu_compress_for_path("x.tar.lzma", &c), -1);
	cr_assert_eq(hu_compress_for_path("-", &c), 0);
	cr_assert_eq(c, HU_COMP_NONE);
	cr_assert_eq(hu_compress_for_path("layer", &c), 0);
	cr_assert_eq(hu_compress_for_path(".gz", &c), 0);
	cr_assert_eq(c, HU_COMP_NONE);
	cr_assert_eq(hu_compress_parse("zstd", &c), 0);
	cr_assert_eq(c, HU_COMP_ZSTD);
	cr_assert_eq(hu_compress_parse("auto", &c), -1);
	cr_assert_eq(hu_compress_parse("lz4", &c), -1);
	cr_assert_eq(hu_compress_levels(HU_COMP_NONE, &min, &max), -1);
	cr_assert_eq(hu_compress_levels(HU_COMP_GZIP, &min, &max), 0);
	cr_assert(min == 1 && max == 9);
	cr_assert_eq(hu_compress_levels(HU_COMP_ZSTD, &min, &max), 0);
	cr_assert(min < 0 && max >= 19);
	hu_descriptor_json(&d, json, sizeof(json));
	cr_assert_str_eq(json, "{\"mediaType\":\"application/vnd.oci.image."
			 "layer.v1.tar+zstd\",\"digest\":\"sha256:bb\","
			 "\"size\":42,\"diffID\":\"sha256:aa\"}\n");
}

/* ---- output files ----------------------------------------------------------- */

Test(tarout, outfile_appears_whole_or_not_at_all)
{
	struct hu_outfile f;
	struct hu_error e = { 0 };

	tu_mkdir("out");
	cr_assert_eq(hu_outfile_open(&f, tu_path("out/x.tar"), NULL, &e), 0);
	cr_assert_eq(hu_outfile_write(&f, "abc", 3, &e), 0);
	cr_assert(!tu_exists("out/x.tar"));
	cr_assert_eq(hu_outfile_commit(&f, &e), 0);
	cr_assert_str_eq(tu_read("out/x.tar"), "abc");
	/* an existing file is replaced, only at commit */
	cr_assert_eq(hu_outfile_open(&f, tu_path("out/x.tar"), NULL, &e), 0);
	cr_assert_eq(hu_outfile_write(&f, "new", 3, &e), 0);
	cr_assert_str_eq(tu_read("out/x.tar"), "abc");
	cr_assert_eq(hu_outfile_commit(&f, &e), 0);
	cr_assert_str_eq(tu_read("out/x.tar"), "new");
	/* abort leaves nothing */
	cr_assert_eq(hu_outfile_open(&f, tu_path("out/y.tar"), NULL, &e), 0);
	cr_assert_eq(hu_outfile_write(&f, "abc", 3, &e), 0);
	hu_outfile_abort(&f);
	{
		char cmd[4200];

		snprintf(cmd, sizeof(cmd), "test \"$(ls -A '%s')\" = x.tar",
			 tu_path("out"));
		cr_assert_eq(system(cmd), 0, "only x.tar is left");
	}
	cr_assert_str_eq(tu_read("out/x.tar"), "new");
}

Test(tarout, outfile_refuses_directories_and_layers)
{
	struct hu_outfile f;
	struct hu_error e = { 0 };
	struct hu_stack s;

	tu_mkdir("out/dir.tar");
	cr_assert_eq(hu_outfile_open(&f, tu_path("out/dir.tar"), NULL, &e), -1);
	cr_assert_eq(e.err, EISDIR);
	hu_error_clear(&e);
	cr_assert_eq(hu_outfile_open(&f, tu_path("nowhere/x.tar"), NULL, &e),
		     -1);
	cr_assert_eq(e.err, ENOENT);
	hu_error_clear(&e);
	tu_mkdir("L0/sub");
	cr_assert_eq(tu_stack(&s, &e, 1, "L0"), 0);
	cr_assert_eq(hu_outfile_open(&f, tu_path("L0/sub/x.tar"), &s, &e), -1);
	cr_assert(strstr(e.msg, "inside layer"));
	hu_error_clear(&e);
	hu_stack_close(&s);
}

/* ---- flatten ------------------------------------------------------------------ */

static int warned;

static void count_warn(void *ctx, const struct hu_error *w)
{
	warned++;
}

Test(tarout, flatten_writes_the_view_in_order_with_hard_links)
{
	struct hu_report r = { .warn = count_warn };
	struct hu_flatten_stats st;
	struct hu_error e = { 0 };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *want[] = { "./", "a-b", "d/", "d/first", "d/x", "e/",
			       "e/second" };
	struct archive_entry *ent;
	struct archive *a;
	struct hu_stack s;
	struct hu_tarout *t;
	int fd, sock;

	tu_file("L0/d/first", "shared");
	tu_file("L0/d/x", "old");
	tu_file("L0/a-b", "ab");
	tu_mkdir("L0/e");
	cr_assert_eq(link(tu_path("L0/d/first"), tu_path("L0/e/second")), 0);
	tu_file("L1/d/x", "new");
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", tu_path("L1/sock"));
	sock = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert_eq(bind(sock, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(sock);
	cr_assert_eq(tu_stack(&s, &e, 2, "L0", "L1"), 0, "%s", e.msg);
	t = start("o.tar", NULL, &fd);
	cr_assert_eq(hu_flatten_write_tar(&s, &r, t, &st, &e), 0, "%s", e.msg);
	finish(t, fd, NULL);
	hu_stack_close(&s);
	cr_assert_eq(warned, 1, "the socket");
	cr_assert_eq(st.skipped, 1);
	cr_assert_eq(st.hardlinks, 1);
	cr_assert_eq(st.files, 3);

	a = reader("o.tar");
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		ent = next(a);
		cr_assert_str_eq(archive_entry_pathname(ent), want[i]);
		if (!strcmp(want[i], "d/first"))
			cr_assert_eq(archive_entry_size(ent), 6);
		if (!strcmp(want[i], "e/second"))
			cr_assert_str_eq(archive_entry_hardlink(ent),
					 "d/first");
		if (!strcmp(want[i], "d/x")) {
			char buf[8] = { 0 };

			cr_assert_eq(archive_read_data(a, buf, 7), 3);
			cr_assert_str_eq(buf, "new");
		}
	}
	cr_assert_eq(archive_read_next_header(a, &ent), ARCHIVE_EOF);
	archive_read_free(a);
}

/* The next entry of @a: file @name of @size bytes with xattr @attr=@value. */
static void expect_file_xattr(struct archive *a, const char *name,
			      int64_t size, const char *attr,
			      const char *value)
{
	struct archive_entry *ent = next(a);
	const void *v;
	size_t n;

	cr_assert_str_eq(archive_entry_pathname(ent), name);
	cr_expect_eq(archive_entry_size(ent), size);
	cr_assert(xattr_of(ent, attr, &v, &n), "%s has no %s", name, attr);
	cr_expect_eq(n, strlen(value));
	cr_expect_eq(memcmp(v, value, n), 0);
}

/* Empty files are not opened: their xattrs are read by name, and a file
 * with bytes gets its xattrs from the open file; both must come out. */
Test(tarout, flatten_keeps_xattrs_of_empty_and_full_files)
{
	struct hu_flatten_stats st;
	struct hu_error e = { 0 };
	struct archive_entry *ent;
	struct archive *a;
	struct hu_stack s;
	struct hu_tarout *t;
	int fd;

	tu_file("L0/empty", "");
	tu_xattr("L0/empty", "user.e", "1");
	tu_file("L0/full", "bytes");
	tu_xattr("L0/full", "user.f", "22");
	cr_assert_eq(chmod(tu_path("L0/empty"), 0), 0);
	cr_assert_eq(tu_stack(&s, &e, 1, "L0"), 0, "%s", e.msg);
	t = start("o.tar", NULL, &fd);
	cr_assert_eq(hu_flatten_write_tar(&s, NULL, t, &st, &e), 0, "%s",
		     e.msg);
	finish(t, fd, NULL);
	hu_stack_close(&s);

	a = reader("o.tar");
	ent = next(a);
	cr_assert_str_eq(archive_entry_pathname(ent), "./");
	expect_file_xattr(a, "empty", 0, "user.e", "1");
	expect_file_xattr(a, "full", 5, "user.f", "22");
	cr_assert_eq(archive_read_next_header(a, &ent), ARCHIVE_EOF);
	archive_read_free(a);
}
