/* SPDX-License-Identifier: MIT */
/*
 * renamewalk UPPER LOWER - the floor of a merge-down, for bench/mergedown.sh:
 * walk UPPER and rename(2) each of its entries once into the same place in
 * LOWER, descending where both hold a directory.  No markers, no
 * metadata, no safety: what any merge-down costs at least.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int walk(int ufd, int lfd)
{
	DIR *d = fdopendir(dup(ufd));
	struct dirent *de;
	int rc = 0;

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		struct stat us, ls;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(ufd, de->d_name, &us, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(us.st_mode) &&
		    fstatat(lfd, de->d_name, &ls, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(ls.st_mode)) {
			int u = openat(ufd, de->d_name, O_RDONLY | O_DIRECTORY);
			int l = openat(lfd, de->d_name, O_RDONLY | O_DIRECTORY);

			if (u < 0 || l < 0 || walk(u, l) < 0)
				rc = -1;
			close(u);
			close(l);
			continue;
		}
		/* a file over a directory or back: the floor skips it */
		(void)renameat(ufd, de->d_name, lfd, de->d_name);
	}
	closedir(d);
	return rc;
}

int main(int argc, char **argv)
{
	int u, l;

	if (argc != 3) {
		fprintf(stderr, "usage: renamewalk UPPER LOWER\n");
		return 2;
	}
	u = open(argv[1], O_RDONLY | O_DIRECTORY);
	l = open(argv[2], O_RDONLY | O_DIRECTORY);
	if (u < 0 || l < 0) {
		perror("open");
		return 1;
	}
	return walk(u, l) < 0;
}
