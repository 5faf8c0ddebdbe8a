/* SPDX-License-Identifier: MIT */
/*
 * The path index cache (pindex.h): DIR/index/v1/sha256/HEX for an image
 * layer, keyed by its blob's digest; DIR/index/v1/file/DEV-INO for a
 * tarball file that is no image's layer, keyed by where it is, the index
 * holding its size, mtime and ctime, checked at each use.  A file is not
 * hashed to find its index: that would cost a read of the whole tarball,
 * which the index is there to save; any rewrite of it changes its ctime.
 *
 * An index is written whole under no name (O_TMPFILE, or a unique
 * ".tmp-" name where the filesystem has none), synced, then renamed over
 * its key: a reader sees the old file or the new one, writers of the same
 * key each rename a whole file, and a killed run leaves no name that a
 * later run reads (a ".tmp-" one at most, which trim removes).  A file
 * that does not load (checksum, offsets, size) or is not of this blob,
 * this file or this user's kind (root or not) is rebuilt and replaced,
 * without a word.  Each use sets its mtime: trim removes the least
 * recently used beyond the limit.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "tar/pindex.h"

#define CACHE_LIMIT (1ull << 30)
#define TMP_PREFIX ".tmp-"
/* a ".tmp-" name lives between a link and a rename: one older than this
 * is a killed run's */
#define TMP_STALE_SEC 3600

struct hu_pcache {
	char *path;
	int dfd;		/* DIR/index/v1 */
	uint64_t limit;
};

static const char *const kinds[] = { "sha256", "file" };

/* The cache directory by default: $XDG_CACHE_HOME/hunion, else
 * $HOME/.cache/hunion; malloc'd, NULL when neither is set. */
static char *default_dir(void)
{
	const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	char *p;

	/* (the XDG spec: a relative path is invalid, to be ignored) */
	if (x && x[0] == '/')
		return hu_path_join(x, "hunion");
	if (!home || home[0] != '/')
		return NULL;
	if (asprintf(&p, "%s/.cache/hunion", home) < 0)
		return NULL;
	return p;
}

/* mkdir -p @path, each directory made 0700. */
static int make_dirs(const char *path)
{
	char *p = strdup(path);

	if (!p)
		return -1;
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s)
			continue;
		char c = *s;

		*s = '\0';
		if (mkdir(p, 0700) < 0 && errno != EEXIST) {
			free(p);
			return -1;
		}
		*s = c;
		if (!c)
			break;
	}
	free(p);
	return 0;
}

/* Open @name in @dfd as a directory of ours, made 0700 when missing. */
static int open_sub(int dfd, const char *name)
{
	if (mkdirat(dfd, name, 0700) < 0 && errno != EEXIST)
		return -1;
	return openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		      O_CLOEXEC);
}

/* A directory only this user can change: else refused, naming it. */
static int check_owner(int fd, const char *path, struct hu_error *e)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return hu_error_set(e, errno, path, "cannot stat the cache "
				    "directory");
	if (st.st_uid != geteuid())
		return hu_error_set(e, 0, path, "cache directory owned by "
				    "another user (uid %u): not used",
				    (unsigned)st.st_uid);
	if (st.st_mode & 022)
		return hu_error_set(e, 0, path, "cache directory writable by "
				    "group or others (mode %04o): not used",
				    (unsigned)(st.st_mode & 07777));
	return 0;
}

int hu_pcache_open(struct hu_pcache **out, const char *dir,
		   struct hu_error *e)
{
	struct hu_pcache *c = calloc(1, sizeof(*c));
	int fd = -1, sub;

	*out = NULL;
	if (!c)
		return hu_error_set(e, ENOMEM, dir ? dir : "", "out of memory");
	c->dfd = -1;
	c->limit = CACHE_LIMIT;
	c->path = dir ? strdup(dir) : default_dir();
	if (!c->path) {
		free(c);
		return hu_error_set(e, dir ? ENOMEM : 0, "", dir ?
				    "out of memory" : "no cache directory: "
				    "neither XDG_CACHE_HOME nor HOME is set");
	}
	if (make_dirs(c->path) < 0 ||
	    (fd = open(c->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		hu_error_set(e, errno, c->path, "cannot make the cache "
			     "directory");
		goto fail;
	}
	if (check_owner(fd, c->path, e) < 0)
		goto fail;
	sub = open_sub(fd, "index");
	close(fd);
	fd = sub >= 0 ? open_sub(sub, "v1") : -1;
	if (sub >= 0)
		close(sub);
	for (size_t i = 0; fd >= 0 && i < 2; i++) {
		sub = open_sub(fd, kinds[i]);
		if (sub < 0) {
			close(fd);
			fd = -1;
		} else {
			close(sub);
		}
	}
	if (fd < 0) {
		hu_error_set(e, errno, c->path, "cannot make the cache "
			     "directory's index/v1");
		goto fail;
	}
	c->dfd = fd;
	*out = c;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	free(c->path);
	free(c);
	return -1;
}

void hu_pcache_close(struct hu_pcache *c)
{
	if (!c)
		return;
	if (c->dfd >= 0)
		close(c->dfd);
	free(c->path);
	free(c);
}

void hu_pcache_set_limit(struct hu_pcache *c, uint64_t bytes)
{
	c->limit = bytes;
}

/* ---- one index ------------------------------------------------------------ */

/* The key of the tarball: "sha256/HEX" of an image layer's blob,
 * "file/DEV-INO" of a file; malloc'd. */
static char *key_of(const struct hu_oci_image *img, size_t k,
		    const struct hu_pindex_file *f)
{
	char *key;

	if (img) {
		const char *d = img->layers[k].digest;

		if (strncmp(d, "sha256:", 7) != 0 || strlen(d) != 71 ||
		    strchr(d + 7, '/'))
			return NULL;
		return hu_path_join("sha256", d + 7);
	}
	if (asprintf(&key, "file/%" PRIx64 "-%" PRIx64, f->dev, f->ino) < 0)
		return NULL;
	return key;
}

/* Is @x the index of this tarball, for this user? */
static bool is_of(const struct hu_pindex *x, const struct hu_oci_image *img,
		  size_t k, const struct hu_pindex_file *f)
{
	struct hu_pindex_file src;

	if (hu_pindex_as_root(x) != (geteuid() == 0))
		return false;
	if (img)
		return !strcmp(hu_pindex_digest(x), img->layers[k].digest) &&
		       !strcmp(hu_pindex_diff_id(x), img->diff_ids[k]);
	hu_pindex_source(x, &src);
	return src.ino && memcmp(&src, f, sizeof(src)) == 0;
}

/* The cached index of @key, when it is good: touched (its mtime: the
 * LRU's clock).  NULL when there is none or it is not good. */
static struct hu_pindex *load_cached(struct hu_pcache *c, const char *key,
				     const struct hu_oci_image *img, size_t k,
				     const struct hu_pindex_file *f)
{
	struct hu_pindex *x = NULL;
	int fd = openat(c->dfd, key, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	if (hu_pindex_from_fd(fd, &x) == 0 && !is_of(x, img, k, f)) {
		hu_pindex_free(x);
		x = NULL;
	}
	if (x)
		(void)futimens(fd, NULL);
	close(fd);
	return x;
}

static int write_all(int fd, const void *buf, size_t len)
{
	for (size_t done = 0; done < len;) {
		ssize_t w = hu_wr_write(fd, (const char *)buf + done,
					len - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		done += (size_t)w;
	}
	return 0;
}

/* A fresh ".tmp-" name. */
static void tmp_name(char *buf, size_t size)
{
	unsigned char r[8] = { 0 };

	if (getrandom(r, sizeof(r), 0) != sizeof(r))
		for (size_t i = 0; i < sizeof(r); i++)
			r[i] = (unsigned char)(rand() ^ getpid());
	snprintf(buf, size, TMP_PREFIX "%02x%02x%02x%02x%02x%02x%02x%02x",
		 r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
}

/* Give @fd, written and synced, the name @tmp in @dfd. */
static int link_tmpfile(int fd, int dfd, const char *tmp)
{
	char proc[64];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return linkat(AT_FDCWD, proc, dfd, tmp, AT_SYMLINK_FOLLOW);
}

/* @len bytes of @buf, written and synced, as @tmp in @dfd: made without
 * a name and linked there (@unnamed: O_TMPFILE, so that a kill before
 * leaves nothing), or made under it.  -1 with errno, and no @tmp. */
static int write_as(int dfd, const char *tmp, bool unnamed, const void *buf,
		    size_t len)
{
	int fd, err;

	fd = unnamed ? openat(dfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC,
			      0600) :
		       hu_wr_create(dfd, tmp, 0600);
	if (fd < 0)
		return -1;
	if (write_all(fd, buf, len) == 0 && hu_wr_fsync(fd) == 0 &&
	    (!unnamed || link_tmpfile(fd, dfd, tmp) == 0)) {
		close(fd);
		return 0;
	}
	err = errno;
	if (!unnamed)
		(void)unlinkat(dfd, tmp, 0);
	close(fd);
	errno = err;
	return -1;
}

/* The index @x under @key, whole or not at all: -1 with errno. */
static int store(struct hu_pcache *c, const char *key,
		 const struct hu_pindex *x)
{
	const char *slash = strrchr(key, '/');
	char *kdir = strndup(key, (size_t)(slash - key)), tmp[40];
	const void *buf;
	size_t len;
	int dfd, rc = -1, err;

	if (!kdir)
		return -1;
	dfd = openat(c->dfd, kdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		     O_CLOEXEC);
	free(kdir);
	if (dfd < 0)
		return -1;
	tmp_name(tmp, sizeof(tmp));
	hu_pindex_bytes(x, &buf, &len);
	/* (no O_TMPFILE on this filesystem, or no /proc to link it by) */
	if (write_as(dfd, tmp, true, buf, len) < 0 &&
	    write_as(dfd, tmp, false, buf, len) < 0)
		goto out;
	if (hu_wr_renameat2(dfd, tmp, dfd, slash + 1, 0) < 0) {
		err = errno;
		(void)unlinkat(dfd, tmp, 0);
		errno = err;
		goto out;
	}
	rc = 0;
out:
	err = errno;
	close(dfd);
	errno = err;
	return rc;
}

int hu_pindex_get(struct hu_pcache *c, int fd, const struct hu_oci_image *img,
		  size_t k, const char *name, const struct hu_report *r,
		  const struct hu_problem_sink *sink, struct hu_pindex **out,
		  bool *from_cache, struct hu_error *e)
{
	struct hu_pindex_file f = { 0 };
	char *key = NULL;

	*out = NULL;
	if (from_cache)
		*from_cache = false;
	if (c && (img || hu_pindex_file_id(fd, &f) == 0))
		key = key_of(img, k, &f);
	if (key) {
		*out = load_cached(c, key, img, k, &f);
		if (*out) {
			free(key);
			if (from_cache)
				*from_cache = true;
			if (hu_pindex_replay(*out, name, r, sink, e) < 0) {
				hu_pindex_free(*out);
				*out = NULL;
				return -1;
			}
			return 0;
		}
	}
	if (hu_pindex_build(fd, img, k, name, r, sink, out, e) < 0) {
		free(key);
		return -1;
	}
	/* A cache that cannot take it costs the next run a build, no more;
	 * a file changed while it was read is keyed by nothing. */
	if (key && is_of(*out, img, k, &f)) {
		/* the cache is no output: written in a dry run too */
		bool was = hu_wr_dry_run();

		hu_wr_set_dry_run(false);
		(void)store(c, key, *out);
		hu_wr_set_dry_run(was);
	}
	free(key);
	return 0;
}

/* ---- trim ----------------------------------------------------------------- */

struct entry {
	int kind;
	char *name;
	uint64_t size;
	struct timespec used;
};

static int cmp_used(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	if (x->used.tv_sec != y->used.tv_sec)
		return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
	if (x->used.tv_nsec != y->used.tv_nsec)
		return x->used.tv_nsec < y->used.tv_nsec ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* The indexes of directory @kind (fd @dfd) into @v; killed runs' ".tmp-"
 * files removed. */
static int list_kind(int dfd, int kind, struct entry **v, size_t *n,
		     size_t *cap)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	time_t now = time(NULL);

	if (!d) {
		close(dfd);
		return -1;
	}
	while ((de = readdir(d))) {
		struct stat st;

		if (de->d_name[0] == '.' && strncmp(de->d_name, TMP_PREFIX,
						    strlen(TMP_PREFIX)))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (de->d_name[0] == '.') {
			if (now - st.st_mtime > TMP_STALE_SEC)
				(void)unlinkat(dirfd(d), de->d_name, 0);
			continue;
		}
		if (*n == *cap) {
			size_t nc = *cap ? *cap * 2 : 64;
			struct entry *nv = realloc(*v, nc * sizeof(*nv));

			if (!nv)
				break;
			*v = nv;
			*cap = nc;
		}
		(*v)[*n] = (struct entry){ .kind = kind,
			.name = strdup(de->d_name),
			.size = (uint64_t)st.st_blocks * 512,
			.used = st.st_mtim };
		if ((*v)[*n].name)
			(*n)++;
	}
	closedir(d);
	return 0;
}

int hu_pcache_trim(struct hu_pcache *c, struct hu_error *e)
{
	struct entry *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = 0;
	int dfd[2] = { -1, -1 };

	for (int i = 0; i < 2; i++) {
		int fd = openat(c->dfd, kinds[i], O_RDONLY | O_DIRECTORY |
				O_NOFOLLOW | O_CLOEXEC);

		if (fd < 0)
			continue;
		dfd[i] = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		if (list_kind(fd, i, &v, &n, &cap) < 0)
			continue;
	}
	for (size_t i = 0; i < n; i++)
		total += v[i].size;
	if (n)
		qsort(v, n, sizeof(*v), cmp_used);
	for (size_t i = 0; i < n && total > c->limit; i++) {
		if (dfd[v[i].kind] >= 0 &&
		    unlinkat(dfd[v[i].kind], v[i].name, 0) == 0)
			total -= v[i].size;
	}
	for (size_t i = 0; i < n; i++)
		free(v[i].name);
	free(v);
	for (int i = 0; i < 2; i++)
		if (dfd[i] >= 0)
			close(dfd[i]);
	(void)e;
	return 0;
}
