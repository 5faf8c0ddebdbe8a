/* SPDX-License-Identifier: MIT */
/*
 * walkx - the fsck bench's peer: walk whole layers as a checker without
 * hunion's upper-only walk must, lstat-ing every entry and listing its
 * xattrs.
 *
 *   walkx DIR...
 *
 * For each DIR (a layer), every entry below it, the root included:
 * fstatat(AT_SYMLINK_NOFOLLOW) and a listing of its xattr names (Linux
 * 6.13's listxattrat(2), fd-relative, or llistxattr(2) through the
 * directory's /proc/self/fd link on older kernels).  The walk is
 * fd-relative (openat O_NOFOLLOW, getdents64 with a large buffer), one
 * process, no fork and no path lookup from the root per entry: the
 * fastest honest way of reading what a whole-layer check needs, so that
 * the comparison favours the peer, not hunion.
 *
 * Prints one line per layer and a total: entries, directories, entries
 * carrying xattrs.  Exits 1 when anything could not be read.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#ifndef AT_SYMLINK_NOFOLLOW
#define AT_SYMLINK_NOFOLLOW 0x100
#endif
#if !defined(__NR_listxattrat) && defined(__x86_64__)
#define __NR_listxattrat 465
#endif

struct counts {
	uint64_t entries, dirs, with_xattrs;
};

static int failed;
static int have_at = 1;		/* listxattrat(2) works, until ENOSYS */
static char xbuf[1 << 16];	/* XATTR_LIST_MAX */

/* The records getdents64 returns (glibc's struct dirent64 layout). */
struct ldirent {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

static void warn(const char *what, const char *name)
{
	fprintf(stderr, "walkx: %s %s: %s\n", what, name, strerror(errno));
	failed = 1;
}

static ssize_t list_at(int dirfd, const char *name)
{
	char p[64 + 256];

#ifdef __NR_listxattrat
	if (have_at) {
		ssize_t n = syscall(__NR_listxattrat, dirfd, name,
				    AT_SYMLINK_NOFOLLOW, xbuf, sizeof(xbuf));

		if (n >= 0 || errno != ENOSYS)
			return n;
		have_at = 0;
	}
#endif
	snprintf(p, sizeof(p), "/proc/self/fd/%d/%s", dirfd, name);
	return llistxattr(p, xbuf, sizeof(xbuf));
}

static void xattrs(int dirfd, const char *name, struct counts *c)
{
	ssize_t n = name ? list_at(dirfd, name) :
			   flistxattr(dirfd, xbuf, sizeof(xbuf));

	if (n < 0 && errno != ENOTSUP)
		warn("listxattr", name ? name : ".");
	else if (n > 0)
		c->with_xattrs++;
}

static void walk(int dirfd, struct counts *c)
{
	char *buf = malloc(1 << 15);
	long n;

	if (!buf) {
		warn("malloc", "");
		close(dirfd);
		return;
	}
	c->dirs++;
	while ((n = syscall(SYS_getdents64, dirfd, buf, 1 << 15)) > 0) {
		for (long off = 0; off < n;) {
			struct ldirent *d = (struct ldirent *)(buf + off);
			const char *name = d->d_name;
			struct stat st;

			off += d->d_reclen;
			if (name[0] == '.' && (!name[1] ||
			    (name[1] == '.' && !name[2])))
				continue;
			c->entries++;
			if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
				warn("lstat", name);
				continue;
			}
			xattrs(dirfd, name, c);
			if (S_ISDIR(st.st_mode)) {
				int fd = openat(dirfd, name, O_RDONLY |
						O_DIRECTORY | O_NOFOLLOW |
						O_CLOEXEC);

				if (fd < 0)
					warn("open", name);
				else
					walk(fd, c);
			}
		}
	}
	if (n < 0)
		warn("getdents64", "");
	free(buf);
	close(dirfd);
}

int main(int argc, char **argv)
{
	struct counts all = { 0 };

	if (argc < 2) {
		fputs("usage: walkx DIR...\n", stderr);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		struct counts c = { 0 };
		struct stat st;
		int fd = open(argv[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (fd < 0 || fstat(fd, &st) < 0) {
			warn("open", argv[i]);
			if (fd >= 0)
				close(fd);
			continue;
		}
		c.entries = 1;		/* the root */
		xattrs(fd, NULL, &c);
		walk(fd, &c);
		printf("%s: %llu entries, %llu dirs, %llu with xattrs\n",
		       argv[i], (unsigned long long)c.entries,
		       (unsigned long long)c.dirs,
		       (unsigned long long)c.with_xattrs);
		all.entries += c.entries;
		all.dirs += c.dirs;
		all.with_xattrs += c.with_xattrs;
	}
	printf("total: %llu entries, %llu dirs, %llu with xattrs\n",
	       (unsigned long long)all.entries, (unsigned long long)all.dirs,
	       (unsigned long long)all.with_xattrs);
	return failed;
}
