/* SPDX-License-Identifier: MIT */
/* Small fd-relative helpers: sorted directory listings, xattrs of entries
 * that may be symlinks, and the relative paths used in messages. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <sys/syscall.h>
#include <linux/openat2.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "internal.h"
#include "layer/ldir.h"

static int name_cmp(const void *a, const void *b)
{
	return strcmp(((const struct hu_name *)a)->name,
		      ((const struct hu_name *)b)->name);
}

struct name_acc {
	size_t *offs;
	unsigned char *types;
	size_t n, cap;
	char *pool;
	size_t plen, pcap;
};

static int acc_add(struct name_acc *a, const char *name, unsigned char type)
{
	size_t len = strlen(name) + 1;

	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 64;
		size_t *offs = realloc(a->offs, cap * sizeof(*offs));
		unsigned char *types;

		if (!offs)
			return -1;
		a->offs = offs;
		types = realloc(a->types, cap);
		if (!types)
			return -1;
		a->types = types;
		a->cap = cap;
	}
	if (a->plen + len > a->pcap) {
		size_t cap = a->pcap ? a->pcap * 2 : 4096;
		char *pool;

		while (cap < a->plen + len)
			cap *= 2;
		pool = realloc(a->pool, cap);
		if (!pool)
			return -1;
		a->pool = pool;
		a->pcap = cap;
	}
	memcpy(a->pool + a->plen, name, len);
	a->offs[a->n] = a->plen;
	a->types[a->n++] = type;
	a->plen += len;
	return 0;
}

/* The kernel's directory record, read with getdents64(2) straight from
 * the fd: no dup, fcntl or close per directory as with fdopendir(3). */
struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/* The longest record getdents64(2) writes: a NAME_MAX name, its NUL,
 * padded to 8 bytes. */
#define DIRENT64_MAX \
	((offsetof(struct linux_dirent64, d_name) + NAME_MAX + 1 + 7) & ~7ul)

/*
 * @fills: the directory is on a filesystem whose readdir fills the buffer
 * unless it is at the end (hu_layer.readdir_fills).  A read that left
 * room for the longest record then ended the listing, and the call that
 * would say so with 0 is saved: one syscall a directory.  @short_end: set
 * when a listing ended so.
 */
static int read_entries(int fd, bool rewind, bool fills, struct name_acc *a,
			bool *short_end)
{
	static __thread char buf[32768];
	long n;

	if (rewind && lseek(fd, 0, SEEK_SET) < 0)
		return -1;
	while ((n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n;) {
			struct linux_dirent64 *de = (void *)(buf + off);
			const char *nm = de->d_name;

			off += de->d_reclen;
			if (nm[0] == '.' &&
			    (!nm[1] || (nm[1] == '.' && !nm[2])))
				continue;
			if (acc_add(a, nm, de->d_type) < 0)
				return -1;
		}
		if (fills && (size_t)n + DIRENT64_MAX <= sizeof(buf)) {
			*short_end = true;
			return 0;
		}
	}
	return n < 0 ? -1 : 0;
}

static int names_read(int fd, bool rewind, bool fills, struct hu_names *out,
		      const char *path, struct hu_error *e)
{
	struct name_acc a = { 0 };
	bool short_end = false;
	int err;

	memset(out, 0, sizeof(*out));
	if (read_entries(fd, rewind, fills, &a, &short_end) < 0)
		goto fail;
	/* The one other short read: a signal pending on this thread
	 * (filldir64() stops for it).  Its handler ran before the call
	 * returned, and each one the program catches interrupts it: the
	 * listing may be cut short, so it is not used. */
	if (short_end && hu_interrupted()) {
		errno = EINTR;
		goto fail;
	}
	out->v = malloc((a.n ? a.n : 1) * sizeof(*out->v));
	if (!out->v) {
		errno = ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < a.n; i++) {
		out->v[i].name = a.pool + a.offs[i];
		out->v[i].type = a.types[i];
	}
	out->n = a.n;
	out->pool = a.pool;
	free(a.offs);
	free(a.types);
	qsort(out->v, out->n, sizeof(*out->v), name_cmp);
	return 0;
fail:
	err = errno;
	/* cut short by the interrupt: say so, not "Interrupted system call" */
	if (err == EINTR && hu_interrupted())
		hu_error_set(e, 0, path, "interrupted");
	else
		hu_error_set(e, err, path, "cannot list directory");
	free(a.offs);
	free(a.types);
	free(a.pool);
	errno = err;
	return -1;
}

int hu_names_read(int fd, struct hu_names *out, const char *path,
		  struct hu_error *e)
{
	return names_read(fd, true, false, out, path, e);
}

int hu_names_read_fresh(int fd, struct hu_names *out, const char *path,
			struct hu_error *e)
{
	return names_read(fd, false, false, out, path, e);
}

int hu_layer_names_read(const struct hu_layer *l, int fd, bool fresh,
			struct hu_names *out, const char *path,
			struct hu_error *e)
{
	if (hu_ldir_indexed(l))
		return hu_ldir_names(l, fd, out, path, e);
	return names_read(fd, !fresh, l->readdir_fills, out, path, e);
}

void hu_names_free(struct hu_names *l)
{
	free(l->v);
	free(l->pool);
	memset(l, 0, sizeof(*l));
}

int hu_open_dir_at(int dirfd, const char *name)
{
	return openat(dirfd, name,
		      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* openat2(2) (Linux 5.6) is asked once whether it works: an older kernel
 * says ENOSYS, a seccomp filter that does not know it EPERM or worse. */
enum { OPENAT2_UNKNOWN, OPENAT2_YES, OPENAT2_NO };
static atomic_int openat2_state;

static int open_dir_openat2(int rootfd, const char *path)
{
	struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
			   RESOLVE_NO_MAGICLINKS,
	};

	return (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
}

/* The same, a component at a time (@path holds one at least). */
static int open_dir_walk(int rootfd, const char *path)
{
	char *copy = strdup(path), *save = NULL;
	int fd = rootfd;

	if (!copy)
		return -1;
	for (char *c = strtok_r(copy, "/", &save); c;
	     c = strtok_r(NULL, "/", &save)) {
		int sub = hu_open_dir_at(fd, c);

		if (fd != rootfd) {
			int saved = errno;

			close(fd);
			errno = saved;
		}
		fd = sub;
		if (fd < 0)
			break;
	}
	free(copy);
	return fd;
}

int hu_open_dir_beneath(int rootfd, const char *path)
{
	int state = atomic_load_explicit(&openat2_state, memory_order_relaxed);
	int fd;

	while (*path == '/')
		path++;
	if (!*path)
		return hu_open_dir_at(rootfd, ".");
	if (state == OPENAT2_NO)
		return open_dir_walk(rootfd, path);
	fd = open_dir_openat2(rootfd, path);
	if (fd < 0 && state == OPENAT2_UNKNOWN &&
	    (errno == ENOSYS || errno == EPERM)) {
		atomic_store(&openat2_state, OPENAT2_NO);
		return open_dir_walk(rootfd, path);
	}
	if (state == OPENAT2_UNKNOWN)
		atomic_store(&openat2_state, OPENAT2_YES);
	/* a symlink on the way: the walk's open of it says ENOTDIR */
	if (fd < 0 && errno == ELOOP)
		errno = ENOTDIR;
	return fd;
}

bool hu_fd_is_at(int dirfd, const char *name, int fd)
{
	struct stat a, b;

	return fstat(fd, &a) == 0 &&
	       fstatat(dirfd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

const char *hu_fdpath(char *buf, int dirfd, const char *name)
{
	if (name && *name)
		snprintf(buf, HU_FDPATH_MAX, "/proc/self/fd/%d/%s", dirfd, name);
	else
		snprintf(buf, HU_FDPATH_MAX, "/proc/self/fd/%d", dirfd);
	return buf;
}

/*
 * getxattrat(2) and listxattrat(2) (Linux 6.13) name an entry by directory
 * fd and name: one syscall, where the fallback walks
 * "/proc/self/fd/N/NAME" (four lookups, and /proc must be mounted).  Their
 * numbers are in internal.h.  Whether they work is asked once.
 */
/* struct xattr_args of <linux/xattr.h>, which Debian 12's headers lack */
struct hu_xattr_args {
	uint64_t value;
	uint32_t size;
	uint32_t flags;
};

enum { XATTRAT_UNKNOWN, XATTRAT_YES, XATTRAT_NO };
static atomic_int xattrat_state;

void hu_xattrat_disable(void)
{
	atomic_store(&xattrat_state, XATTRAT_NO);
}

/* Ask once, on "/": a kernel before 6.13 says ENOSYS, and a seccomp
 * filter that does not know the calls may say EPERM or anything else,
 * which must not turn into an error on every entry later. */
static bool have_xattrat(void)
{
	int state = atomic_load_explicit(&xattrat_state, memory_order_relaxed);

	if (state == XATTRAT_UNKNOWN) {
		bool yes = false;
#ifdef __NR_listxattrat
		struct hu_xattr_args a = { 0 };
		int saved = errno;

		yes = syscall(__NR_listxattrat, AT_FDCWD, "/",
			      AT_SYMLINK_NOFOLLOW, NULL, 0) >= 0 &&
		      (syscall(__NR_getxattrat, AT_FDCWD, "/",
			       AT_SYMLINK_NOFOLLOW, "user.hunion.probe", &a,
			       sizeof(a)) >= 0 ||
		       errno == ENODATA || errno == ENOTSUP);
		errno = saved;
#endif
		state = yes ? XATTRAT_YES : XATTRAT_NO;
		atomic_store(&xattrat_state, state);
	}
	return state == XATTRAT_YES;
}

ssize_t hu_lgetxattr_at(int dirfd, const char *name, const char *attr,
			void *buf, size_t size)
{
	char p[HU_FDPATH_MAX];

	if (!name || !*name)
		return fgetxattr(dirfd, attr, buf, size);
#ifdef __NR_getxattrat
	if (have_xattrat()) {
		struct hu_xattr_args a = {
			.value = (uintptr_t)buf, .size = (uint32_t)size,
		};

		return syscall(__NR_getxattrat, dirfd, name,
			       AT_SYMLINK_NOFOLLOW, attr, &a, sizeof(a));
	}
#endif
	/* The entry may be a symlink: reach it through its directory's
	 * /proc fd link so that it is named, never followed. */
	return lgetxattr(hu_fdpath(p, dirfd, name), attr, buf, size);
}

static ssize_t listxattr_at(int dirfd, const char *name, char *list,
			    size_t size)
{
	char p[HU_FDPATH_MAX];

	if (!name || !*name)
		return flistxattr(dirfd, list, size);
#ifdef __NR_listxattrat
	if (have_xattrat())
		return syscall(__NR_listxattrat, dirfd, name,
			       AT_SYMLINK_NOFOLLOW, list, size);
#endif
	return llistxattr(hu_fdpath(p, dirfd, name), list, size);
}

/*
 * The kernel allocates a buffer of the size asked for on every
 * listxattr(2): a big one is a page allocation each time, which was a
 * tenth of a flatten's system time.  Most lists are short: ask for a
 * little first.
 */
enum { XATTR_LIST_SHORT = 512 };

ssize_t hu_listxattr_at(int dirfd, const char *name, char *list,
			size_t size)
{
	if (size > XATTR_LIST_SHORT) {
		ssize_t n = listxattr_at(dirfd, name, list, XATTR_LIST_SHORT);

		if (n >= 0 || errno != ERANGE)
			return n;
	}
	return listxattr_at(dirfd, name, list, size);
}

ssize_t hu_xattr_names(int dirfd, const char *name, char *small, size_t size,
		       char **list)
{
	ssize_t len = hu_listxattr_at(dirfd, name, small, size);
	char *big;

	*list = small;
	if (len < 0 && errno == ERANGE) {
		if (hu_llistxattr_at(dirfd, name, &big, &len) < 0)
			return -1;
		if (big)	/* NULL: none are left */
			*list = big;
	}
	return len < 0 && errno == ENOTSUP ? 0 : len;
}

int hu_llistxattr_at(int dirfd, const char *name, char **list, ssize_t *len)
{
	char *buf = NULL;
	ssize_t n;

	*list = NULL;
	*len = 0;
	for (;;) {
		n = hu_listxattr_at(dirfd, name, NULL, 0);
		if (n < 0)
			return (errno == ENOTSUP) ? 0 : -1;
		if (n == 0)
			return 0;
		free(buf);
		buf = malloc(n);
		if (!buf)
			return -1;
		n = hu_listxattr_at(dirfd, name, buf, n);
		if (n >= 0)
			break;
		if (errno != ERANGE) {
			free(buf);
			return -1;
		}
	}
	*list = buf;
	*len = n;
	return 0;
}

int hu_pathbuf_push(struct hu_pathbuf *p, const char *name, size_t *saved)
{
	size_t nl = strlen(name), need = p->len + 1 + nl + 1;

	*saved = p->len;
	if (need > p->cap) {
		size_t cap = p->cap ? p->cap : 256;
		char *s;

		while (cap < need)
			cap *= 2;
		s = realloc(p->s, cap);
		if (!s)
			return -1;
		p->s = s;
		p->cap = cap;
	}
	if (p->len)
		p->s[p->len++] = '/';
	memcpy(p->s + p->len, name, nl + 1);
	p->len += nl;
	return 0;
}

void hu_pathbuf_pop(struct hu_pathbuf *p, size_t saved)
{
	p->len = saved;
	if (p->s)
		p->s[saved] = '\0';
}

void hu_pathbuf_free(struct hu_pathbuf *p)
{
	free(p->s);
	memset(p, 0, sizeof(*p));
}

int hu_rmtree(int dirfd, const char *name)
{
	struct hu_names names;
	struct stat st;
	int fd, rc = 0, first_err = 0;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISDIR(st.st_mode))
		return hu_wr_unlinkat(dirfd, name, 0);
	fd = hu_open_dir_at(dirfd, name);
	/* A directory we made unreadable (a tarball's mode 0000, for one)
	 * must become readable to be emptied. */
	if (fd < 0 && errno == EACCES &&
	    hu_wr_fchmodat(dirfd, name, 0700) == 0)
		fd = hu_open_dir_at(dirfd, name);
	if (fd < 0)
		return -1;
	/* A directory we made read-only must become writable again. */
	if ((st.st_mode & 0700) != 0700)
		(void)hu_wr_fchmod(fd, 0700);
	if (hu_names_read(fd, &names, NULL, NULL) < 0) {
		close(fd);
		return -1;
	}
	for (size_t i = 0; i < names.n; i++)
		if (hu_rmtree(fd, names.v[i].name) < 0 && rc == 0)
			rc = -1, first_err = errno;
	hu_names_free(&names);
	close(fd);
	if (hu_wr_unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && rc == 0)
		rc = -1, first_err = errno;
	/* The cause, not the ENOTEMPTY of the directories above it. */
	errno = first_err;
	return rc;
}

int hu_linkat_path(int rootfd, const char *oldpath, int newdirfd,
		   const char *newname)
{
	char *copy = strdup(oldpath), *leaf, *slash;
	int fd = rootfd, rc = -1;

	if (!copy)
		return -1;
	leaf = copy;
	while ((slash = strchr(leaf, '/'))) {
		int next;

		*slash = '\0';
		next = hu_open_dir_at(fd, leaf);
		if (fd != rootfd)
			close(fd);
		if (next < 0)
			goto out;
		fd = next;
		leaf = slash + 1;
	}
	rc = hu_wr_linkat(fd, leaf, newdirfd, newname);
out:
	if (fd != rootfd && fd >= 0)
		close(fd);
	free(copy);
	return rc;
}

#define TEMP_TAG ".hunion-"
#define TEMP_DIGITS 6
/* The longest stem: ".STEM.hunion-XXXXXX" (and the shorter
 * ".STEM.hunion-lock") within NAME_MAX. */
#define STEM_MAX (NAME_MAX - 1 - (sizeof(TEMP_TAG) - 1) - TEMP_DIGITS)
#define STEM_HASH 16	/* "~" and 16 hex digits end a shortened stem */

void hu_temp_stem(const char *base, char stem[HU_TEMP_STEM_SIZE])
{
	size_t len = strlen(base);
	uint64_t h = 14695981039346656037ull;	/* FNV-1a */

	_Static_assert(HU_TEMP_STEM_SIZE == STEM_MAX + 1, "stem size");
	if (len <= STEM_MAX) {
		memcpy(stem, base, len + 1);
		return;
	}
	for (const unsigned char *p = (const unsigned char *)base; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	snprintf(stem, HU_TEMP_STEM_SIZE, "%.*s~%016llx",
		 (int)(STEM_MAX - 1 - STEM_HASH), base, (unsigned long long)h);
}

bool hu_is_temp_of(const char *name, const char *base)
{
	char stem[HU_TEMP_STEM_SIZE];
	size_t slen, tlen = strlen(TEMP_TAG);

	hu_temp_stem(base, stem);
	slen = strlen(stem);
	if (name[0] != '.' || strncmp(name + 1, stem, slen) != 0 ||
	    strncmp(name + 1 + slen, TEMP_TAG, tlen) != 0)
		return false;
	name += 1 + slen + tlen;
	if (strlen(name) != TEMP_DIGITS)
		return false;
	for (; *name; name++)
		if (!strchr("0123456789abcdef", *name))
			return false;
	return true;
}

int hu_make_temp(int dirfd, const char *base,
		 int (*make)(int dirfd, const char *name, void *ctx),
		 void *ctx, char **name)
{
	char stem[HU_TEMP_STEM_SIZE];
	size_t len = sizeof(stem) + 32;
	unsigned int seed = (unsigned)getpid() ^ (unsigned)time(NULL) ^
			    (unsigned)(uintptr_t)name;
	char *tmp = malloc(len);
	int rc = -1;

	*name = NULL;
	if (!tmp)
		return errno = ENOMEM, -1;
	hu_temp_stem(base, stem);
	for (int tries = 0; tries < 100; tries++) {
		seed = seed * 1103515245u + 12345u;
		snprintf(tmp, len, ".%s" TEMP_TAG "%0*x", stem, TEMP_DIGITS,
			 (seed >> 8) & 0xffffff);
		rc = make(dirfd, tmp, ctx);
		if (rc >= 0) {
			*name = tmp;
			return rc;
		}
		if (errno != EEXIST)
			break;
	}
	free(tmp);
	return -1;
}
