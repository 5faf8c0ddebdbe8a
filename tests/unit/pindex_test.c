/* SPDX-License-Identifier: MIT */
/* The path index of a layer tarball (pindex.c) and its cache (pcache.c):
 * the readers, the loader against damaged images, the cache against
 * tampering, truncation, kills, parallel writers and its bound. */
#include <archive.h>
#include <archive_entry.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "tar/pindex.h"
#include "testutil.h"

static void teardown(void)
{
	tu_cleanup();
}

TestSuite(pindex, .fini = teardown);

/* ---- tarballs ---------------------------------------------------------------- */

struct tent {
	char type;		/* f file, d dir, l symlink, h hard link,
				 * c char device */
	const char *path;
	const char *data;	/* content; link target */
	const char *xattr;	/* "name=value" */
};

static const char *mktar(const char *rel, const struct tent *v)
{
	struct archive *a = archive_write_new();

	cr_assert_eq(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
	cr_assert_eq(archive_write_add_filter_gzip(a), ARCHIVE_OK);
	cr_assert_eq(archive_write_open_filename(a, tu_path(rel)),
		     ARCHIVE_OK);
	for (; v->type; v++) {
		struct archive_entry *ae = archive_entry_new();
		size_t len = v->data ? strlen(v->data) : 0;
		mode_t type = v->type == 'd' ? AE_IFDIR :
			v->type == 'l' ? AE_IFLNK : v->type == 'c' ? AE_IFCHR :
			AE_IFREG;

		archive_entry_set_pathname(ae, v->path);
		archive_entry_set_mtime(ae, 1000000000, 5);
		archive_entry_set_filetype(ae, type);
		archive_entry_set_perm(ae, type == AE_IFDIR ? 0750 : 0640);
		archive_entry_set_uid(ae, 7);
		archive_entry_set_gid(ae, 8);
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
		cr_assert_eq(archive_write_header(a, ae), ARCHIVE_OK);
		if (v->type == 'f' && len)
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

static const struct tent sample[] = {
	T('d', "etc"),
	TX('f', "etc/passwd", "root:x:0:0\n", "user.k=v"),
	TD('h', "etc/passwd-link", "etc/passwd"),
	TD('l', "etc/sh", "/bin/busybox"),
	TD('f', "usr/lib/deep/file", "deep"),
	T('f', "usr/.wh.gone"),
	TD('f', "etc/passwd", "root:x:0:0:again\n"),	/* the later wins */
	T('c', "dev/null"),
	END
};

static struct hu_pindex *build(const char *tarball, struct hu_error *e)
{
	struct hu_pindex *x = NULL;
	int fd = open(tarball, O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	if (hu_pindex_build(fd, NULL, 0, tarball, NULL, NULL, &x, e) < 0)
		x = NULL;
	close(fd);
	return x;
}

static hu_pnode at(const struct hu_pindex *x, const char *path)
{
	char *p = strdup(path), *save = NULL;
	hu_pnode n = HU_PNODE_ROOT;

	for (char *c = strtok_r(p, "/", &save); c && n != HU_PNODE_NONE;
	     c = strtok_r(NULL, "/", &save))
		n = hu_pindex_lookup(x, n, c);
	free(p);
	return n;
}

/* ---- the readers ------------------------------------------------------------ */

Test(pindex, reads_what_the_unpack_makes)
{
	struct hu_error e = { 0 };
	struct hu_pindex *x = build(mktar("t.tar.gz", sample), &e);
	hu_pnode pw, link, usr, root_kids[8];
	const char *names;
	const void *val;
	size_t len, n;
	struct stat st, st2;

	cr_assert_not_null(x, "%s", e.msg);
	/* the root: etc, dev, usr, sorted */
	n = hu_pindex_nchildren(x, HU_PNODE_ROOT);
	cr_assert_eq(n, 3);
	for (size_t i = 0; i < n; i++)
		root_kids[i] = hu_pindex_child(x, HU_PNODE_ROOT, i);
	cr_expect_str_eq(hu_pindex_name(x, root_kids[0]), "dev");
	cr_expect_str_eq(hu_pindex_name(x, root_kids[1]), "etc");
	cr_expect_str_eq(hu_pindex_name(x, root_kids[2]), "usr");
	cr_expect_eq(hu_pindex_child(x, HU_PNODE_ROOT, 3), HU_PNODE_NONE);
	cr_expect_eq(hu_pindex_parent(x, HU_PNODE_ROOT), HU_PNODE_NONE);
	cr_expect_str_eq(hu_pindex_name(x, HU_PNODE_ROOT), "");

	/* a duplicate: the later one, with a new inode the link lost */
	pw = at(x, "etc/passwd");
	link = at(x, "etc/passwd-link");
	cr_assert_neq(pw, HU_PNODE_NONE);
	cr_assert_neq(link, HU_PNODE_NONE);
	cr_expect_eq(hu_pindex_parent(x, pw), root_kids[1]);
	hu_pindex_stat(x, pw, &st);
	hu_pindex_stat(x, link, &st2);
	cr_expect_eq(st.st_size, 17);
	cr_expect_eq(st2.st_size, 11);
	cr_expect_neq(st.st_ino, st2.st_ino);
	cr_expect_eq(st.st_nlink, 1);
	cr_expect_eq(st2.st_nlink, 1);
	cr_expect_eq(st.st_dev, hu_pindex_dev(x));
	cr_expect_eq(st.st_mode, S_IFREG | 0640);
	cr_expect_eq(st.st_mtim.tv_sec, 1000000000);
	if (geteuid() == 0) {
		cr_expect_eq(st.st_uid, 7);
		cr_expect_eq(st.st_gid, 8);
	}
	/* the old inode kept its xattr, the new one has none */
	names = hu_pindex_xattr_names(x, link, &len);
	cr_assert_eq(len, sizeof("user.k"));
	cr_expect_str_eq(names, "user.k");
	cr_assert_eq(hu_pindex_xattr(x, link, "user.k", &val, &len), 0);
	cr_expect_eq(len, 1);
	cr_expect_eq(memcmp(val, "v", 1), 0);
	cr_expect_eq(hu_pindex_xattr(x, link, "user.none", &val, &len), -1);
	cr_expect_null(hu_pindex_xattr_names(x, pw, &len));
	cr_expect_eq(len, 0);

	/* a symlink, a marker kept as a name, a device */
	cr_expect_str_eq(hu_pindex_symlink(x, at(x, "etc/sh")),
			 "/bin/busybox");
	cr_expect_null(hu_pindex_symlink(x, pw));
	hu_pindex_stat(x, at(x, "usr/.wh.gone"), &st);
	cr_expect(S_ISREG(st.st_mode));
	if (geteuid() == 0) {
		hu_pindex_stat(x, at(x, "dev/null"), &st);
		cr_expect(S_ISCHR(st.st_mode));
		cr_expect_eq(st.st_rdev, makedev(1, 3));
	}

	/* parents no entry names */
	usr = at(x, "usr");
	cr_expect(hu_pindex_implicit(x, usr));
	cr_expect(hu_pindex_implicit(x, at(x, "usr/lib/deep")));
	cr_expect_not(hu_pindex_implicit(x, root_kids[1]));
	hu_pindex_stat(x, usr, &st);
	cr_expect_eq(st.st_mode, S_IFDIR | 0755);
	cr_expect_eq(st.st_uid, geteuid());
	cr_expect_eq(st.st_nlink, 3);	/* its name, ".", lib's ".." */
	cr_expect_eq(at(x, "usr/nothing"), HU_PNODE_NONE);
	cr_expect_eq(at(x, "etc/passwd/x"), HU_PNODE_NONE);
	cr_expect_eq(hu_pindex_nchildren(x, pw), 0);

	cr_expect_eq(strncmp(hu_pindex_digest(x), "sha256:", 7), 0);
	cr_expect_eq(strlen(hu_pindex_digest(x)), 71);
	cr_expect_str_eq(hu_pindex_diff_id(x), "");
	hu_pindex_free(x);
}

Test(pindex, data_offsets_point_at_the_bytes)
{
	static const struct tent v[] = {
		TD('f', "a", "alpha"), TD('f', "b/c", "charlie!"),
		T('f', "empty"), END
	};
	struct hu_error e = { 0 };
	const char *tb = mktar("d.tar.gz", v);
	struct hu_pindex *x = build(tb, &e);
	struct hu_pdata d;
	char cmd[4096], buf[16];
	FILE *f;

	cr_assert_not_null(x);
	snprintf(cmd, sizeof(cmd), "gzip -dc '%s' > '%s'", tb,
		 tu_path("stream"));
	cr_assert_eq(system(cmd), 0);
	f = fopen(tu_path("stream"), "rb");
	cr_assert_not_null(f);
	cr_assert_eq(hu_pindex_data(x, at(x, "b/c"), &d), 0);
	cr_expect_null(d.seg);
	cr_assert_eq(fseek(f, (long)d.off, SEEK_SET), 0);
	cr_assert_eq(fread(buf, 1, 8, f), 8);
	cr_expect_eq(memcmp(buf, "charlie!", 8), 0);
	cr_assert_eq(hu_pindex_data(x, at(x, "a"), &d), 0);
	cr_assert_eq(fseek(f, (long)d.off, SEEK_SET), 0);
	cr_assert_eq(fread(buf, 1, 5, f), 5);
	cr_expect_eq(memcmp(buf, "alpha", 5), 0);
	cr_expect_eq(hu_pindex_data(x, at(x, "b"), &d), -1);
	cr_expect_leq(d.off, hu_pindex_tar_size(x));
	fclose(f);
	hu_pindex_free(x);
}

Test(pindex, refuses_as_the_unpack_does)
{
	static const struct tent dotdot[] = { T('f', "a/../../x"), END };
	static const struct tent through[] = {
		TD('l', "etc", "/etc"), T('f', "etc/passwd"), END
	};
	static const struct tent forward[] = {
		TD('h', "l", "t"), T('f', "t"), END
	};
	struct hu_error e = { 0 };

	cr_expect_null(build(mktar("1.tar.gz", dotdot), &e));
	cr_expect_str_eq(e.msg, "path has a '..' component");
	hu_error_clear(&e);
	cr_expect_null(build(mktar("2.tar.gz", through), &e));
	cr_expect_str_eq(e.msg, "path passes through a symlink: etc");
	cr_expect(strstr(e.path, "2.tar.gz: etc/passwd"));
	hu_error_clear(&e);
	cr_expect_null(build(mktar("3.tar.gz", forward), &e));
	cr_expect_str_eq(e.msg, "hard link to a path not yet seen: t");
	hu_error_clear(&e);
}

/* ---- the loader ------------------------------------------------------------- */

static void *image_of(struct hu_pindex *x, size_t *len)
{
	const void *buf;
	void *copy;

	hu_pindex_bytes(x, &buf, len);
	copy = malloc(*len);
	memcpy(copy, buf, *len);
	return copy;
}

/* Loaded, an image is read whole without a fault: every reader on every
 * node. */
static void read_all(const struct hu_pindex *x)
{
	for (hu_pnode n = 0; n < hu_pindex_nodes(x); n++) {
		struct stat st;
		struct hu_pdata d;
		size_t len;
		const char *names = hu_pindex_xattr_names(x, n, &len);
		const void *val;

		hu_pindex_stat(x, n, &st);
		(void)hu_pindex_symlink(x, n);
		(void)hu_pindex_data(x, n, &d);
		for (size_t k = 0; k < len; k += strlen(names + k) + 1)
			(void)hu_pindex_xattr(x, n, names + k, &val, &len);
		for (size_t i = 0; i < hu_pindex_nchildren(x, n); i++)
			cr_assert_eq(hu_pindex_lookup(x, n, hu_pindex_name(x,
					hu_pindex_child(x, n, i))),
				     hu_pindex_child(x, n, i));
	}
}

Test(pindex, loads_its_own_image_again)
{
	struct hu_error e = { 0 };
	struct hu_pindex *x = build(mktar("t.tar.gz", sample), &e), *y;
	size_t len;
	void *img = image_of(x, &len);

	cr_assert_eq(hu_pindex_from_bytes(img, len, &y), 0);
	cr_expect_eq(hu_pindex_nodes(y), hu_pindex_nodes(x));
	cr_expect_neq(hu_pindex_dev(y), hu_pindex_dev(x));
	cr_expect_str_eq(hu_pindex_digest(y), hu_pindex_digest(x));
	read_all(y);
	hu_pindex_free(y);
	hu_pindex_free(x);
	free(img);
}

Test(pindex, refuses_damaged_images)
{
	struct hu_error e = { 0 };
	struct hu_pindex *x = build(mktar("t.tar.gz", sample), &e), *y;
	size_t len;
	unsigned char *img = image_of(x, &len), *bad = malloc(len);
	unsigned seed = 1;

	/* every truncation */
	for (size_t cut = 0; cut < len; cut++) {
		cr_assert_eq(hu_pindex_from_bytes(img, cut, &y), -1,
			     "cut at %zu", cut);
		cr_expect_eq(errno, EINVAL);
	}
	/* every bit of every byte flipped */
	for (size_t i = 0; i < len; i++) {
		for (int b = 0; b < 8; b++) {
			memcpy(bad, img, len);
			bad[i] ^= (unsigned char)(1 << b);
			cr_assert_eq(hu_pindex_from_bytes(bad, len, &y), -1,
				     "bit %d of byte %zu", b, i);
		}
	}
	/* garbage */
	for (int round = 0; round < 200; round++) {
		for (size_t i = 0; i < len; i++)
			bad[i] = (unsigned char)rand_r(&seed);
		cr_assert_eq(hu_pindex_from_bytes(bad, len, &y), -1);
	}
	free(bad);
	free(img);
	hu_pindex_free(x);
}

/* Malformed but checksummed: each field of the header and of the records
 * set to values that point outside, the checksum made right again.  Each
 * image is refused, or loads and reads without a fault. */
Test(pindex, survives_checksummed_garbage)
{
	struct hu_error e = { 0 };
	struct hu_pindex *x = build(mktar("t.tar.gz", sample), &e), *y;
	size_t len;
	unsigned char *img = image_of(x, &len), *bad = malloc(len);
	static const uint32_t vals[] = { 0, 1, 2, 7, 8, 0x7fffffff,
					 0xfffffffe, 0xffffffff };
	int refused = 0;

	for (size_t off = 32; off + 4 <= len; off += 4) {
		for (size_t v = 0; v < sizeof(vals) / sizeof(*vals); v++) {
			memcpy(bad, img, len);
			memcpy(bad + off, &vals[v], 4);
			hu_pindex_fix_sum(bad, len);
			if (hu_pindex_from_bytes(bad, len, &y) < 0) {
				refused++;
				continue;
			}
			read_all(y);
			hu_pindex_free(y);
		}
	}
	for (size_t off = 32; off + 8 <= len; off += 8) {
		static const uint64_t big[] = { 1ull << 32, 1ull << 63,
						UINT64_MAX, UINT64_MAX - 7 };

		for (size_t v = 0; v < sizeof(big) / sizeof(*big); v++) {
			memcpy(bad, img, len);
			memcpy(bad + off, &big[v], 8);
			hu_pindex_fix_sum(bad, len);
			if (hu_pindex_from_bytes(bad, len, &y) < 0) {
				refused++;
				continue;
			}
			read_all(y);
			hu_pindex_free(y);
		}
	}
	cr_expect_gt(refused, 0);
	free(bad);
	free(img);
	hu_pindex_free(x);
}

/* ---- the cache -------------------------------------------------------------- */

static struct hu_pindex *get(struct hu_pcache *c, const char *tarball,
			     bool *cached)
{
	struct hu_error e = { 0 };
	struct hu_pindex *x = NULL;
	int fd = open(tarball, O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	cr_assert_eq(hu_pindex_get(c, fd, NULL, 0, tarball, NULL, NULL, &x, cached,
				   &e), 0, "%s", e.msg);
	close(fd);
	return x;
}

/* The one index file of the cache at @dir (under file/), its path. */
static const char *cached_file(const char *dir)
{
	static char path[8192];
	char sub[4096];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(sub, sizeof(sub), "%s/index/v1/file", dir);
	d = opendir(sub);
	cr_assert_not_null(d);
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", sub, de->d_name);
		n++;
	}
	closedir(d);
	cr_assert_eq(n, 1, "%d index files", n);
	return path;
}

Test(pindex, cache_builds_then_reads)
{
	struct hu_error e = { 0 };
	struct hu_pcache *c;
	const char *tb = mktar("t.tar.gz", sample);
	struct hu_pindex *x;
	bool cached;
	struct stat st;

	cr_assert_eq(hu_pcache_open(&c, tu_path("cache"), &e), 0);
	cr_assert_eq(stat(tu_path("cache"), &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0700);
	x = get(c, tb, &cached);
	cr_expect_not(cached);
	hu_pindex_free(x);
	x = get(c, tb, &cached);
	cr_expect(cached);
	cr_expect_neq(at(x, "etc/passwd"), HU_PNODE_NONE);
	hu_pindex_free(x);
	/* the tarball rewritten: its index is built again */
	mktar("t.tar.gz", (const struct tent[]){ T('f', "other"), END });
	x = get(c, tb, &cached);
	cr_expect_not(cached);
	cr_expect_neq(at(x, "other"), HU_PNODE_NONE);
	cr_expect_eq(at(x, "etc"), HU_PNODE_NONE);
	hu_pindex_free(x);
	hu_pcache_close(c);
	/* --no-cache: nothing written */
	x = get(NULL, tb, &cached);
	cr_expect_not(cached);
	hu_pindex_free(x);
}

/* The warnings a report gets, one line each: "PATH: MESSAGE". */
static char said[4096];

static void say(void *ctx, const struct hu_error *w)
{
	size_t n = strlen(said);

	snprintf(said + n, sizeof(said) - n, "%s: %s\n", w->path, w->msg);
}

static void get_saying(struct hu_pcache *c, const char *tb, bool *cached)
{
	const struct hu_report r = { .warn = say };
	struct hu_error e = { 0 };
	struct hu_pindex *x = NULL;
	int fd = open(tb, O_RDONLY | O_CLOEXEC);

	said[0] = '\0';
	cr_assert_geq(fd, 0);
	cr_assert_eq(hu_pindex_get(c, fd, NULL, 0, tb, &r, NULL, &x, cached, &e), 0,
		     "%s", e.msg);
	close(fd);
	hu_pindex_free(x);
}

/* An index read back from the cache says what its build said: the same
 * run gives the same warnings whether it built the index or not. */
Test(pindex, cache_gives_the_warnings_again)
{
	struct hu_error e = { 0 };
	struct hu_pcache *c;
	const char *tb = mktar("t.tar.gz", sample);
	char built[sizeof(said)], want[8192];
	bool cached;

	cr_assert_eq(hu_pcache_open(&c, tu_path("cache"), &e), 0);
	get_saying(c, tb, &cached);
	cr_expect_not(cached);
	snprintf(want, sizeof(want), "%s: etc/passwd: ", tb);
	cr_expect(strstr(said, want) && strstr(said, "duplicate"),
		  "built: %s", said);
	memcpy(built, said, sizeof(said));
	get_saying(c, tb, &cached);
	cr_expect(cached);
	cr_expect_str_eq(said, built);
	hu_pcache_close(c);
}

static int take(void *ctx, const struct hu_problem *p, struct hu_error *e)
{
	size_t n = strlen(said);

	snprintf(said + n, sizeof(said) - n, "%s %s %s\n",
		 hu_problem_info(p->id)->id, p->path, p->detail);
	return 0;
}

/* What the unpack gives a problem sink (fsck) an index gives it too, built
 * or cached: a duplicate, and a hard link forward left out; without a
 * sink, the duplicate is a warning and the link fails the layer, as the
 * unpack fails it. */
Test(pindex, replay_to_a_sink)
{
	static const struct tent fwd[] = {
		TD('h', "early", "late"),
		TD('f', "late", "one"),
		TD('f', "late", "two"),
		END
	};
	const struct hu_problem_sink sink = { HU_PB_COLLECT, take, NULL };
	struct hu_error e = { 0 };
	struct hu_pcache *c;
	const char *tb = mktar("fwd.tar.gz", fwd);
	char first[sizeof(said)];
	struct hu_pindex *x;
	bool cached;
	int fd;

	cr_assert_eq(hu_pcache_open(&c, tu_path("cache"), &e), 0);
	for (int round = 0; round < 2; round++) {
		said[0] = '\0';
		x = NULL;
		fd = open(tb, O_RDONLY | O_CLOEXEC);
		cr_assert_eq(hu_pindex_get(c, fd, NULL, 0, tb, NULL, &sink, &x,
					   &cached, &e), 0, "%s", e.msg);
		close(fd);
		cr_expect_eq(cached, round == 1);
		cr_expect_str_eq(said, "tarLinkForward early late\n"
				 "tarDuplicate late duplicate entry: the "
				 "later one wins\n");
		cr_expect_eq(at(x, "early"), HU_PNODE_NONE);
		cr_expect_neq(at(x, "late"), HU_PNODE_NONE);
		hu_pindex_free(x);
		if (round == 0)
			memcpy(first, said, sizeof(said));
	}
	/* no sink: the layer fails where the unpack fails, said the same */
	fd = open(tb, O_RDONLY | O_CLOEXEC);
	cr_expect_eq(hu_pindex_get(c, fd, NULL, 0, tb, NULL, NULL, &x, &cached,
				   &e), -1);
	close(fd);
	cr_expect_null(x);
	cr_expect(e.path && strstr(e.path, ": early"), "%s", e.path);
	cr_expect(e.msg && strstr(e.msg, "hard link to a path not yet seen"),
		  "%s", e.msg);
	hu_error_clear(&e);
	hu_pcache_close(c);
}

Test(pindex, cache_dir_refused_when_others_may_write)
{
	struct hu_error e = { 0 };
	struct hu_pcache *c;

	tu_mkdir("open");
	cr_assert_eq(chmod(tu_path("open"), 0777), 0);
	cr_expect_eq(hu_pcache_open(&c, tu_path("open"), &e), -1);
	cr_expect(strstr(e.msg, "writable by group or others"), "%s", e.msg);
	cr_expect_str_eq(e.path, tu_path("open"));
	hu_error_clear(&e);
	if (geteuid() == 0) {
		tu_mkdir("theirs");
		cr_assert_eq(chown(tu_path("theirs"), 4321, 4321), 0);
		cr_expect_eq(hu_pcache_open(&c, tu_path("theirs"), &e), -1);
		cr_expect(strstr(e.msg, "owned by another user"), "%s", e.msg);
		hu_error_clear(&e);
	}
}

Test(pindex, cache_default_dir)
{
	struct hu_error e = { 0 };
	struct hu_pcache *c;
	char want[4096];

	setenv("XDG_CACHE_HOME", tu_path("xdg"), 1);
	cr_assert_eq(hu_pcache_open(&c, NULL, &e), 0);
	hu_pcache_close(c);
	snprintf(want, sizeof(want), "%s/hunion/index/v1/sha256",
		 tu_path("xdg"));
	cr_expect_eq(access(want, F_OK), 0);
	unsetenv("XDG_CACHE_HOME");
	setenv("HOME", tu_path("home"), 1);
	cr_assert_eq(hu_pcache_open(&c, NULL, &e), 0);
	hu_pcache_close(c);
	snprintf(want, sizeof(want), "%s/.cache/hunion/index/v1/file",
		 tu_path("home"));
	cr_expect_eq(access(want, F_OK), 0);
}

/* A tampered or truncated index is rebuilt and replaced, never trusted. */
Test(pindex, cache_never_trusts_a_damaged_index)
{
	struct hu_error e = { 0 };
	struct hu_pcache *c;
	const char *tb = mktar("t.tar.gz", sample);
	struct hu_pindex *x;
	bool cached;
	struct stat st, st2;
	const char *file;
	char *orig;
	size_t len;
	FILE *f;

	cr_assert_eq(hu_pcache_open(&c, tu_path("cache"), &e), 0);
	hu_pindex_free(get(c, tb, &cached));
	file = cached_file(tu_path("cache"));
	cr_assert_eq(stat(file, &st), 0);
	len = (size_t)st.st_size;
	orig = malloc(len);
	f = fopen(file, "rb");
	cr_assert_eq(fread(orig, 1, len, f), len);
	fclose(f);

	/* a byte changed: a name ("etc" becomes "etd") */
	for (size_t i = 0; i + 3 <= len; i++) {
		if (memcmp(orig + i, "etc", 4) != 0)
			continue;
		f = fopen(file, "r+b");
		fseek(f, (long)i + 2, SEEK_SET);
		fputc('d', f);
		fclose(f);
		break;
	}
	x = get(c, tb, &cached);
	cr_expect_not(cached);
	cr_expect_neq(at(x, "etc"), HU_PNODE_NONE);
	hu_pindex_free(x);
	x = get(c, tb, &cached);
	cr_expect(cached, "the rebuilt index replaced the tampered one");
	hu_pindex_free(x);

	/* truncated in place */
	cr_assert_eq(truncate(file, (off_t)len / 2), 0);
	x = get(c, tb, &cached);
	cr_expect_not(cached);
	cr_expect_neq(at(x, "etc/passwd"), HU_PNODE_NONE);
	hu_pindex_free(x);
	cr_assert_eq(stat(file, &st2), 0);
	cr_expect_eq(st2.st_size, st.st_size);

	/* empty */
	cr_assert_eq(truncate(file, 0), 0);
	x = get(c, tb, &cached);
	cr_expect_not(cached);
	hu_pindex_free(x);
	free(orig);
	hu_pcache_close(c);
}

/* 16 writers of the same index at once: each succeeds, one valid file is
 * left and nothing else. */
Test(pindex, cache_parallel_writers)
{
	struct hu_error e = { 0 };
	const char *tb = mktar("t.tar.gz", sample);
	pid_t pids[16];
	struct hu_pcache *c;
	struct hu_pindex *x;
	bool cached;
	char sub[4096];
	struct dirent *de;
	DIR *d;
	int names = 0;

	for (int i = 0; i < 16; i++) {
		pids[i] = fork();
		cr_assert_geq(pids[i], 0);
		if (pids[i] == 0) {
			struct hu_pcache *cc;
			struct hu_pindex *xx = NULL;
			int fd = open(tb, O_RDONLY | O_CLOEXEC);

			if (hu_pcache_open(&cc, tu_path("cache"), &e) < 0 ||
			    hu_pindex_get(cc, fd, NULL, 0, tb, NULL, NULL, &xx, NULL,
					  &e) < 0 ||
			    at(xx, "etc/passwd") == HU_PNODE_NONE)
				_exit(1);
			_exit(0);
		}
	}
	for (int i = 0; i < 16; i++) {
		int status;

		cr_assert_eq(waitpid(pids[i], &status, 0), pids[i]);
		cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	snprintf(sub, sizeof(sub), "%s/index/v1/file", tu_path("cache"));
	d = opendir(sub);
	while ((de = readdir(d)))
		names += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	cr_expect_eq(names, 1, "%d names", names);
	cr_assert_eq(hu_pcache_open(&c, tu_path("cache"), &e), 0);
	x = get(c, tb, &cached);
	cr_expect(cached);
	hu_pindex_free(x);
	hu_pcache_close(c);
}

/* In a child: the index of @tb through the cache, killed at the @kill-th
 * change it makes (0: never); exits 0 when it is right, 2 when it came
 * from the cache too. */
static void child_get(const char *tb, int kill)
{
	struct hu_error e = { 0 };
	struct hu_pcache *c;
	struct hu_pindex *x = NULL;
	bool cached = false;
	char spec[32];
	int fd = open(tb, O_RDONLY | O_CLOEXEC);

	snprintf(spec, sizeof(spec), "kill:%d", kill);
	if (kill)
		setenv("HUNION_FAULT", spec, 1);
	if (hu_pcache_open(&c, tu_path("cache"), &e) < 0 ||
	    hu_pindex_get(c, fd, NULL, 0, tb, NULL, NULL, &x, &cached, &e) < 0 ||
	    at(x, "etc/passwd") == HU_PNODE_NONE ||
	    at(x, "usr/lib/deep/file") == HU_PNODE_NONE ||
	    at(x, "etc/passwd-link") == HU_PNODE_NONE)
		_exit(1);
	_exit(cached ? 2 : 0);
}

static int run_rm(const char *path)
{
	char cmd[8192];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	return system(cmd);
}

static int run_child(const char *tb, int kill)
{
	pid_t pid = fork();
	int status;

	cr_assert_geq(pid, 0);
	if (pid == 0)
		child_get(tb, kill);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		return -WTERMSIG(status);
	return WEXITSTATUS(status);
}

/* A run killed at any change it makes to the cache leaves one that the
 * next run uses or rebuilds: never a wrong index.  (Every run is a child:
 * fault injection reads HUNION_FAULT once per process.) */
Test(pindex, cache_after_a_kill_at_each_step)
{
	const char *tb = mktar("t.tar.gz", sample);
	int killed = 0;

	for (int n = 1; n <= 8; n++) {
		int rc = run_child(tb, n);

		killed += rc == -SIGKILL;
		cr_expect(rc == -SIGKILL || rc == 0, "kill:%d: %d", n, rc);
		/* the next run: right, built or from the cache */
		rc = run_child(tb, 0);
		cr_expect(rc == 0 || rc == 2, "after kill:%d: %d", n, rc);
		/* and the one after it, from the cache */
		cr_expect_eq(run_child(tb, 0), 2, "after kill:%d", n);
		/* (not hu_rmtree: its writes would read HUNION_FAULT in
		 * this process, before the children set it) */
		cr_assert_eq(run_rm(tu_path("cache")), 0);
	}
	cr_expect_geq(killed, 2, "killed at the write, fsync and rename");
}

/* The bound: trim removes the least recently used, the last used stay. */
Test(pindex, cache_trim_least_recently_used)
{
	struct hu_error e = { 0 };
	struct hu_pcache *c;
	const char *tbs[3];
	struct hu_pindex *x;
	bool cached;
	struct timespec old[2] = { { 1000, 0 }, { 1000, 0 } };
	char sub[4096];
	struct dirent *de;
	DIR *d;

	tbs[0] = strdup(mktar("a.tar.gz", sample));
	tbs[1] = strdup(mktar("b.tar.gz", sample));
	tbs[2] = strdup(mktar("c.tar.gz", sample));
	cr_assert_eq(hu_pcache_open(&c, tu_path("cache"), &e), 0);
	for (int i = 0; i < 3; i++)
		hu_pindex_free(get(c, tbs[i], &cached));
	/* all as if used long ago, then b used */
	snprintf(sub, sizeof(sub), "%s/index/v1/file", tu_path("cache"));
	d = opendir(sub);
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			utimensat(dirfd(d), de->d_name, old, 0);
	closedir(d);
	hu_pindex_free(get(c, tbs[1], &cached));
	cr_expect(cached);
	/* room for one: b stays */
	hu_pcache_set_limit(c, 1);
	cr_assert_eq(hu_pcache_trim(c, &e), 0);
	x = get(c, tbs[1], &cached);
	cr_expect_not(cached, "all beyond the limit go, b too");
	hu_pindex_free(x);
	hu_pcache_set_limit(c, 1ull << 30);
	for (int i = 0; i < 3; i++)
		hu_pindex_free(get(c, tbs[i], &cached));
	d = opendir(sub);
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			utimensat(dirfd(d), de->d_name, old, 0);
	closedir(d);
	hu_pindex_free(get(c, tbs[2], &cached));
	{
		struct stat st;
		char one[8192];

		/* the limit: the size of one index file */
		d = opendir(sub);
		while ((de = readdir(d)))
			if (de->d_name[0] != '.')
				snprintf(one, sizeof(one), "%s/%s", sub,
					 de->d_name);
		closedir(d);
		cr_assert_eq(stat(one, &st), 0);
		hu_pcache_set_limit(c, (uint64_t)st.st_blocks * 512);
	}
	cr_assert_eq(hu_pcache_trim(c, &e), 0);
	x = get(c, tbs[2], &cached);
	cr_expect(cached, "the last used stays");
	hu_pindex_free(x);
	x = get(c, tbs[0], &cached);
	cr_expect_not(cached, "the least recently used went");
	hu_pindex_free(x);
	hu_pcache_close(c);
	for (int i = 0; i < 3; i++)
		free((char *)tbs[i]);
}
