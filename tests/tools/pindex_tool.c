/* SPDX-License-Identifier: MIT */
/*
 * pindex-tool: the path index (lib/tar/pindex.c) from the outside, for the
 * differential test (tests/kernel/pindex.sh); no user command.
 *
 *   pindex-tool manifest TARBALL STREAM
 *   pindex-tool manifest oci:LAYOUT[:REF] K STREAM
 *       the index of TARBALL (or of the image's layer K, from 0), built,
 *       as tests/tools/manifest.py --nlink describes a tree: each regular
 *       file's sha256 from the bytes the index says it has in STREAM, the
 *       uncompressed tar (which proves the offsets); warnings and errors
 *       on stderr, exit 1 on an error
 *   pindex-tool data TARBALL             per regular file: path, offset in
 *       the uncompressed stream, size, then the sparse segments
 *   pindex-tool implicit TARBALL         the directories no entry names
 *   pindex-tool unpack TARBALL CMD...    unpack TARBALL as a layer alone
 *       (hu_tarlayer_unpack, nothing beneath) and run CMD, each argument
 *       "{}" the unpack's root; exit CMD's status
 *   pindex-tool cache DIR TARBALL|oci:LAYOUT K STREAM
 *       hu_pindex_get through the cache DIR: "cached" or "built", then
 *       the manifest
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <openssl/evp.h>
#include <unistd.h>

#include "internal.h"
#include "tar/pindex.h"

static void warn(void *ctx, const struct hu_error *w)
{
	(void)ctx;
	fprintf(stderr, "warning: %s: %s\n", w->path ? w->path : "",
		w->msg ? w->msg : "");
}

static const struct hu_report report = { .warn = warn };

static int fail(struct hu_error *e)
{
	fprintf(stderr, "error: %s: %s%s%s\n", e->path ? e->path : "",
		e->msg ? e->msg : "", e->err ? ": " : "",
		e->err ? strerror(e->err) : "");
	hu_error_clear(e);
	return 1;
}

/* Path of @n, malloc'd ("" for the root). */
static char *path_of(const struct hu_pindex *x, hu_pnode n)
{
	char *p = strdup("");

	while (p && n != HU_PNODE_ROOT) {
		char *q;

		if (asprintf(&q, *p ? "%s/%s" : "%s%s",
			     hu_pindex_name(x, n), p) < 0)
			q = NULL;
		free(p);
		p = q;
		n = hu_pindex_parent(x, n);
	}
	return p;
}

struct line {
	char *path;
	hu_pnode n;
};

static int cmp_line(const void *a, const void *b)
{
	return strcmp(((const struct line *)a)->path,
		      ((const struct line *)b)->path);
}

static char type_char(mode_t m)
{
	return S_ISDIR(m) ? 'd' : S_ISLNK(m) ? 'l' : S_ISCHR(m) ? 'c' :
	       S_ISBLK(m) ? 'b' : S_ISFIFO(m) ? 'p' : S_ISREG(m) ? 'f' : '?';
}

/* manifest.py's escape(). */
static void print_esc(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '\\')
			printf("\\\\");
		else if (c == '\n')
			printf("\\n");
		else if (c == '\t')
			printf("\\t");
		else if (c == '\r')
			printf("\\r");
		else if (c < 0x21 || c > 0x7e)
			printf("\\%03o", c);
		else
			putchar(c);
	}
}

static void print_hex(const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		printf("%02x", ((const unsigned char *)p)[i]);
}

/* Every node, the root as ".", sorted by path. */
static struct line *lines_of(const struct hu_pindex *x, size_t *n)
{
	size_t total = hu_pindex_nodes(x);
	struct line *v = calloc(total, sizeof(*v));

	*n = 0;
	for (hu_pnode i = 0; v && i < total; i++) {
		v[*n].n = i;
		v[(*n)++].path = i ? path_of(x, i) : strdup(".");
	}
	if (v)
		qsort(v, *n, sizeof(*v), cmp_line);
	return v;
}

/* sha256 of regular file @n's content, read from the uncompressed stream
 * @sfd where the index says it is. */
static void print_digest(const struct hu_pindex *x, hu_pnode n, off_t size,
			 int sfd)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char d[EVP_MAX_MD_SIZE], *buf = malloc(1 << 20);
	unsigned dl = 0;
	struct hu_pdata pd;
	uint64_t pos = 0, from, in = 0;
	size_t k = 0;

	if (!md || !buf || hu_pindex_data(x, n, &pd) < 0)
		abort();
	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	from = pd.off;
	while (pos < (uint64_t)size) {
		/* a segment (sparse) or the whole (not): data from the
		 * stream; else zeros up to the next segment */
		uint64_t seg_off = pd.seg ? (k < pd.nseg ? pd.seg[k].file_off :
					     (uint64_t)size) : 0;
		uint64_t seg_len = pd.seg ? (k < pd.nseg ? pd.seg[k].len : 0) :
				   (uint64_t)size;
		uint64_t chunk;

		if (pos < seg_off) {
			chunk = seg_off - pos > (1 << 20) ? (1 << 20) :
				seg_off - pos;
			memset(buf, 0, chunk);
		} else {
			chunk = seg_off + seg_len - pos > (1 << 20) ? (1 << 20) :
				seg_off + seg_len - pos;
			if (pread(sfd, buf, chunk, (off_t)(from + in)) !=
			    (ssize_t)chunk)
				abort();
			in += chunk;
		}
		EVP_DigestUpdate(md, buf, chunk);
		pos += chunk;
		if (pd.seg && k < pd.nseg && pos >= seg_off + seg_len)
			k++;
	}
	EVP_DigestFinal_ex(md, d, &dl);
	print_hex(d, dl);
	EVP_MD_CTX_free(md);
	free(buf);
}

/* manifest.py --nlink's lines, from the index (and, for the data, the
 * uncompressed stream @sfd). */
static void manifest(const struct hu_pindex *x, int sfd)
{
	size_t n;
	struct line *v = lines_of(x, &n);
	const char **first = calloc(hu_pindex_nodes(x) + 1, sizeof(*first));

	for (size_t i = 0; i < n; i++) {
		struct stat st;

		hu_pindex_stat(x, v[i].n, &st);
		if (!S_ISDIR(st.st_mode) && st.st_nlink > 1 &&
		    !first[st.st_ino])
			first[st.st_ino] = v[i].path;
	}
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		const char *names, *target;
		size_t len;

		hu_pindex_stat(x, v[i].n, &st);
		print_esc(v[i].path, strlen(v[i].path));
		printf(" %c %04o %u:%u mtime=%jd", type_char(st.st_mode),
		       (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid,
		       (unsigned)st.st_gid,
		       (intmax_t)st.st_mtim.tv_sec * 1000000000 +
		       st.st_mtim.tv_nsec);
		if (!S_ISDIR(st.st_mode))
			printf(" nlink=%ju", (uintmax_t)st.st_nlink);
		if (S_ISREG(st.st_mode)) {
			printf(" size=%jd sha256=", (intmax_t)st.st_size);
			print_digest(x, v[i].n, st.st_size, sfd);
		}
		target = hu_pindex_symlink(x, v[i].n);
		if (target) {
			printf(" -> ");
			print_esc(target, strlen(target));
		}
		if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
			printf(" rdev=%u:%u", major(st.st_rdev),
			       minor(st.st_rdev));
		names = hu_pindex_xattr_names(x, v[i].n, &len);
		for (size_t k = 0; k < len; k += strlen(names + k) + 1) {
			const void *val;
			size_t vlen;

			if (hu_pindex_xattr(x, v[i].n, names + k, &val,
					    &vlen) < 0)
				abort();
			if (!strcmp(names + k, "security.selinux"))
				continue;
			printf(" x:");
			print_esc(names + k, strlen(names + k));
			printf("=");
			print_hex(val, vlen);
		}
		if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
			printf(" link=");
			print_esc(first[st.st_ino], strlen(first[st.st_ino]));
		}
		printf("\n");
	}
	for (size_t i = 0; i < n; i++)
		free(v[i].path);
	free(v);
	free(first);
}

/* The directories no entry names, or each regular file's place. */
static void list(const struct hu_pindex *x, const char *what)
{
	size_t n;
	struct line *v = lines_of(x, &n);

	for (size_t i = 0; i < n; i++) {
		struct hu_pdata d;
		struct stat st;

		hu_pindex_stat(x, v[i].n, &st);
		if (!strcmp(what, "implicit") && hu_pindex_implicit(x, v[i].n))
			printf("%s\n", v[i].path);
		if (!strcmp(what, "data") && S_ISREG(st.st_mode) &&
		    hu_pindex_data(x, v[i].n, &d) == 0) {
			printf("%s\t%" PRIu64 "\t%jd", v[i].path, d.off,
			       (intmax_t)st.st_size);
			for (size_t k = 0; k < d.nseg; k++)
				printf("\t%" PRIu64 ":%" PRIu64,
				       d.seg[k].file_off, d.seg[k].len);
			printf("\n");
		}
		free(v[i].path);
	}
	free(v);
}

/* The index of operand @arg (layer @k of an image): 0, or 1. */
static int build(const char *arg, const char *k, const char *cache,
		 struct hu_pindex **x)
{
	struct hu_error e = { 0 };
	struct hu_oci_image *img = NULL;
	struct hu_pcache *c = NULL;
	size_t layer = 0;
	bool cached = false;
	int fd, rc;

	if (hu_oci_operand(arg)) {
		char *dir, *ref;

		if (!k || hu_oci_operand_parse(arg, &dir, &ref, &e) < 0)
			return k ? fail(&e) : 2;
		rc = hu_oci_image_open(AT_FDCWD, dir, ref, NULL, &img, &e);
		free(dir);
		free(ref);
		if (rc < 0)
			return fail(&e);
		layer = strtoul(k, NULL, 10);
		if (layer >= img->nlayers)
			return 2;
		fd = hu_oci_blob_open(img, &img->layers[layer], &e);
	} else {
		fd = open(arg, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			hu_error_set(&e, errno, arg, "cannot open");
	}
	if (fd < 0)
		return fail(&e);
	if (cache && hu_pcache_open(&c, cache, &e) < 0)
		return fail(&e);
	rc = hu_pindex_get(c, fd, img, layer, arg, &report, NULL, x, &cached, &e);
	if (cache && rc == 0)
		printf("%s\n", cached ? "cached" : "built");
	if (c)
		hu_pcache_close(c);
	close(fd);
	if (img)
		hu_oci_image_close(img);
	return rc < 0 ? fail(&e) : 0;
}

static int unpack(const char *tarball, char **cmd)
{
	struct hu_layer l = { .path = (char *)tarball, .fd = -1,
			      .unpacked_lock = -1 };
	struct hu_error e = { 0 };
	int fd = open(tarball, O_RDONLY | O_CLOEXEC), status;
	char *root;
	pid_t pid;

	if (fd < 0 || hu_tarlayer_unpack(&l, fd, NULL, &report, &e) < 0) {
		if (fd < 0)
			hu_error_set(&e, errno, tarball, "cannot open");
		return fail(&e);
	}
	root = hu_path_join(l.unpacked, "root");
	for (char **a = cmd; *a; a++)
		if (!strcmp(*a, "{}"))
			*a = root;
	pid = fork();
	if (pid == 0) {
		execvp(cmd[0], cmd);
		_exit(127);
	}
	waitpid(pid, &status, 0);
	free(root);
	close(l.fd);
	hu_tarlayer_remove(&l);
	close(fd);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int main(int argc, char **argv)
{
	struct hu_pindex *x = NULL;
	const char *stream = NULL;
	int rc = 2, sfd;

	if (argc >= 4 && !strcmp(argv[1], "unpack"))
		return unpack(argv[2], argv + 3);
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "cache")) {
		rc = build(argv[3], argc == 6 ? argv[4] : NULL, argv[2], &x);
		stream = argv[argc - 1];
	} else if (argc >= 4 && !strcmp(argv[1], "manifest")) {
		rc = build(argv[2], argc > 4 ? argv[3] : NULL, NULL, &x);
		stream = argv[argc - 1];
	} else if (argc >= 3 && (!strcmp(argv[1], "data") ||
				 !strcmp(argv[1], "implicit"))) {
		rc = build(argv[2], argc > 3 ? argv[3] : NULL, NULL, &x);
	}
	if (rc == 2)
		fprintf(stderr, "usage: pindex-tool manifest TARBALL|oci:LAYOUT "
			"K STREAM, data|implicit TARBALL|oci:LAYOUT K, "
			"unpack TARBALL CMD..., cache DIR TARBALL|oci:LAYOUT K "
			"STREAM\n");
	if (rc)
		return rc;
	if (stream) {
		sfd = open(stream, O_RDONLY | O_CLOEXEC);
		if (sfd < 0) {
			perror(stream);
			return 1;
		}
		manifest(x, sfd);
		close(sfd);
	} else {
		list(x, argv[1]);
	}
	hu_pindex_free(x);
	return 0;
}
