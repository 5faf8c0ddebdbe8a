/* SPDX-License-Identifier: MIT */
/*
 * The one rule for an output that exists already, for every command
 * that writes one (flatten's and diff --oci's tarballs, merge -o's and
 * whiteout convert -o's trees): it is replaced only by what it is, so
 * that a run never removes what it did not write.  A regular file gives
 * way to the new file; an empty directory to the new tree.  A non-empty
 * directory, an output of the other kind, a symlink or anything else is
 * refused, naming what is there: removing it is the user's call.  Either
 * way the output appears whole, by one rename, or not at all.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "internal.h"

/* Is directory @name in @dirfd empty? */
static int dir_empty(int dirfd, const char *name, const char *path,
		     bool *empty, struct hu_error *e)
{
	struct hu_names names;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			O_CLOEXEC);

	if (fd < 0)
		return hu_error_set(e, errno, path, "cannot check the output");
	if (hu_names_read(fd, &names, path, e) < 0) {
		close(fd);
		return -1;
	}
	*empty = names.n == 0;
	hu_names_free(&names);
	close(fd);
	return 0;
}

int hu_out_existing(int dirfd, const char *name, const char *path,
		    enum hu_out_kind kind, struct stat *st,
		    struct hu_error *e)
{
	bool empty = false;

	if (fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : hu_error_set(e, errno, path,
					"cannot check the output");
	if (kind == HU_OUT_FILE) {
		if (S_ISDIR(st->st_mode))
			return hu_error_set(e, EISDIR, path, "cannot write");
		if (!S_ISREG(st->st_mode))
			return hu_error_set(e, 0, path, "exists and is not a "
					    "regular file");
		return 1;
	}
	if (!S_ISDIR(st->st_mode))
		return hu_error_set(e, 0, path, "exists and is not a "
				    "directory");
	if (dir_empty(dirfd, name, path, &empty, e) < 0)
		return -1;
	if (!empty)
		return hu_error_set(e, 0, path, "exists and is not empty "
				    "(an empty directory is replaced)");
	return 1;
}
