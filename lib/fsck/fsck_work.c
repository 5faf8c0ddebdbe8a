/* SPDX-License-Identifier: MIT */
/*
 * fsck of an overlay workdir (--workdir W), as the kernel reads it at
 * mount time (fs/overlayfs/super.c, readdir.c, namei.c):
 *
 *   W/work/             scratch: copy-ups and renames are made here and
 *                       renamed into the upper.  Every mount empties it
 *                       (ovl_workdir_cleanup, two levels deep); a
 *                       directory it cannot empty (one holding a
 *                       non-empty directory) makes the mount read-only.
 *   W/work/incompat/X   a feature this mount may not ignore: any entry
 *                       refuses every mount ("volatile", left by a
 *                       volatile mount, until someone decides the upper
 *                       survived).
 *   W/index/            index=on: one entry per copied-up inode
 *                       (fsck_index.c).
 *
 * And where W lies: on the upper's mount, neither inside the other
 * (ovl_workdir_ok), told by device and inode, walking up with "..".
 * When they are nested, work/ and index/ may be entries of the layer:
 * they are not checked then.
 *
 * Not problems: the kernel's own whiteout "#<hex>" (a character device
 * 0/0 linked to the upper's whiteouts) that stays in work/ or index/
 * after every unmount, and an empty work/incompat.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fsck/fsck.h"
#include "fsck/fsck_work.h"
#include "internal.h"

#define INCOMPAT_DIR "incompat"

bool fsck_work_is_whiteout(const struct stat *st)
{
	return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);
}

/* The kernel's temporary name: '#' and hex (ovl_tempname: "#%x"). */
static bool is_temp_name(const char *name)
{
	if (name[0] != '#' || !name[1])
		return false;
	for (const char *p = name + 1; *p; p++)
		if (!(*p >= '0' && *p <= '9') && !(*p >= 'a' && *p <= 'f'))
			return false;
	return true;
}

/* The kernel's shared whiteout, left in work/ or index/ by every
 * unmount: the next mount removes it. */
static bool is_kernel_whiteout(const char *name, const struct stat *st)
{
	return is_temp_name(name) && fsck_work_is_whiteout(st);
}

/* Can the kernel's cleanup (ovl_workdir_cleanup from level 1) remove
 * directory @name of @dirfd?  Only when no directory in it holds
 * anything. */
bool fsck_work_can_empty(int dirfd, const char *name)
{
	struct hu_names names;
	bool ok = true;
	int fd = hu_open_dir_at(dirfd, name);

	if (fd < 0 || hu_names_read_fresh(fd, &names, NULL, NULL) < 0) {
		if (fd >= 0)
			close(fd);
		return true;	/* what we cannot read, we do not judge */
	}
	for (size_t i = 0; ok && i < names.n; i++) {
		const char *n = names.v[i].name;
		struct hu_names sub;
		struct stat st;
		int sfd;

		if (fstatat(fd, n, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode))
			continue;
		sfd = hu_open_dir_at(fd, n);
		if (sfd < 0)
			continue;
		if (hu_names_read_fresh(sfd, &sub, NULL, NULL) == 0) {
			ok = sub.n == 0;
			hu_names_free(&sub);
		}
		close(sfd);
	}
	hu_names_free(&names);
	close(fd);
	return ok;
}

/* Remove entry @name of @dirfd, a tree or not, through the write
 * wrapper.  A tree that fails halfway stays what it was: garbage the
 * next run removes. */
static int remove_entry(int dirfd, const char *dir, const char *name,
			struct hu_error *why)
{
	struct stat st;
	int rc;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return hu_error_setat(why, errno, dir, name, "cannot stat");
	rc = S_ISDIR(st.st_mode) ? hu_rmtree(dirfd, name) :
				   hu_wr_unlinkat(dirfd, name, 0);
	if (rc < 0)
		return hu_error_setat(why, errno, dir, name, "cannot remove");
	return 0;
}

/* Report problem @id at @dir/@name and, when fsck_found() says so,
 * remove the entry. */
int fsck_work_found_remove(struct fsck_run *r, enum hu_problem_id id,
			   int dirfd, const char *dir, const char *name,
			   const char *detail, struct hu_error *e)
{
	struct hu_error why = { 0 };
	int rc = fsck_found(r, id, dir, name, detail, e);

	if (rc <= 0)
		return rc;
	rc = remove_entry(dirfd, dir, name, &why);
	return fsck_done(r, rc, &why, e);
}

/* ---- work/ ----------------------------------------------------------- */

struct move {
	int fromfd;
	const char *name;
};

static int move_to(int dirfd, const char *tmp, void *ctx)
{
	const struct move *m = ctx;

	return hu_wr_renameat2(m->fromfd, m->name, dirfd, tmp,
			       RENAME_NOREPLACE);
}

/* Remove work/incompat/@name: moved out into work/ first, one rename
 * after which every mount is taken, then removed there (what a failure
 * leaves is a leftover in work/, which the next mount removes). */
static int remove_incompat(int incompatfd, int workfd, const char *name,
			   struct hu_error *why)
{
	struct move m = { incompatfd, name };
	char *tmp;
	int rc = 0;

	if (hu_make_temp(workfd, name, move_to, &m, &tmp) < 0)
		return hu_error_setat(why, errno, WORK_DIR "/" INCOMPAT_DIR,
				      name, "cannot move it out");
	if (hu_rmtree(workfd, tmp) < 0)
		rc = hu_error_setat(why, errno, WORK_DIR, tmp,
				    "moved out of incompat, cannot remove");
	free(tmp);
	return rc;
}

/* work/incompat: each entry a feature that refuses every mount. */
static int check_incompat(struct fsck_run *r, int workfd,
			  struct hu_error *e)
{
	static const char dir[] = WORK_DIR "/" INCOMPAT_DIR;
	struct hu_names names;
	int fd = hu_open_dir_at(workfd, INCOMPAT_DIR), rc = 0;

	if (fd < 0)
		return hu_error_set(e, errno, dir, "cannot open");
	if (hu_names_read_fresh(fd, &names, dir, e) < 0) {
		close(fd);
		return -1;
	}
	for (size_t i = 0; rc == 0 && i < names.n; i++) {
		const char *n = names.v[i].name;
		struct hu_error why = { 0 };

		if ((rc = hu_interrupt_check(e)) < 0)
			break;
		rc = fsck_found(r, HU_PB_WORK_INCOMPAT, dir, n,
				strcmp(n, "volatile") == 0 ?
				"left by a volatile mount: after a crash the "
				"upper layer may be inconsistent" :
				"a feature this kernel does not know", e);
		if (rc > 0)
			rc = fsck_done(r, remove_incompat(fd, workfd, n, &why),
				       &why, e);
	}
	hu_names_free(&names);
	close(fd);
	return rc;
}

/* One entry of work/: incompat, the kernel's whiteout, or a leftover. */
static int check_work_entry(struct fsck_run *r, int workfd, const char *name,
			    struct hu_error *e)
{
	const char *detail = NULL;
	struct stat st;

	if (fstatat(workfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		return hu_error_setat(e, errno, WORK_DIR, name,
				      "cannot stat");
	}
	if (strcmp(name, INCOMPAT_DIR) == 0 && S_ISDIR(st.st_mode))
		return check_incompat(r, workfd, e);
	if (is_kernel_whiteout(name, &st))
		return 0;
	if (S_ISDIR(st.st_mode) && !fsck_work_can_empty(workfd, name))
		detail = "the kernel cannot remove it: every mount is "
			 "read-only";
	return fsck_work_found_remove(r, HU_PB_WORK_LEFTOVER, workfd,
				      WORK_DIR, name, detail, e);
}

static int check_work(struct fsck_run *r, int wfd, struct hu_error *e)
{
	struct hu_names names;
	int fd = hu_open_dir_at(wfd, WORK_DIR), rc = 0;

	if (fd < 0) {
		/* None yet, or not a directory: the kernel removes that
		 * and makes its own. */
		if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)
			return 0;
		return hu_error_set(e, errno, WORK_DIR, "cannot open");
	}
	if (hu_names_read_fresh(fd, &names, WORK_DIR, e) < 0) {
		close(fd);
		return -1;
	}
	for (size_t i = 0; rc == 0 && i < names.n; i++)
		if ((rc = hu_interrupt_check(e)) == 0)
			rc = check_work_entry(r, fd, names.v[i].name, e);
	hu_names_free(&names);
	close(fd);
	return rc;
}

/* ---- where the workdir lies ------------------------------------------ */

/* Is the directory (@dev, @ino) @fd itself or one of its ancestors?
 * Walks up with "..", as the kernel's lock_rename() finds a common
 * ancestor; stops at the root (its ".." is itself). */
static int is_at_or_above(int fd, dev_t dev, ino_t ino, bool *found,
			  struct hu_error *e)
{
	int cur = openat(fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct stat st, up;

	*found = false;
	if (cur < 0 || fstat(cur, &st) < 0)
		goto fail;
	for (;;) {
		int parent;

		if (st.st_dev == dev && st.st_ino == ino) {
			*found = true;
			break;
		}
		parent = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (parent < 0 || fstat(parent, &up) < 0) {
			if (parent >= 0)
				close(parent);
			goto fail;
		}
		close(cur);
		cur = parent;
		if (up.st_dev == st.st_dev && up.st_ino == st.st_ino)
			break;	/* the root */
		st = up;
	}
	close(cur);
	return 0;
fail:
	if (cur >= 0)
		close(cur);
	return hu_error_set(e, errno, NULL, "cannot walk up to the root");
}

/* The mount @fd is on (statx), or 0 when the kernel does not say. */
static uint64_t mount_id(int fd)
{
	struct statx stx;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) < 0 ||
	    !(stx.stx_mask & STATX_MNT_ID))
		return 0;
	return stx.stx_mnt_id;
}

/* Where the workdir lies; *@nested when it and the upper are one inside
 * the other: then work/ and index/ may be the layer's own entries, which
 * no check of a workdir may touch. */
static int check_placement(struct fsck_run *r, int wfd, const char *workdir,
			   bool *nested_out, struct hu_error *e)
{
	const struct hu_layer *upper = fsck_layer(r);
	struct stat st;
	bool nested = false, below = false;
	uint64_t wmnt, umnt;

	if (fstat(wfd, &st) < 0)
		return hu_error_set(e, errno, workdir, "cannot stat");
	if (is_at_or_above(wfd, upper->dev, upper->ino, &nested, e) < 0) {
		hu_error_prefix(e, workdir);
		return -1;
	}
	if (!nested &&
	    is_at_or_above(upper->fd, st.st_dev, st.st_ino, &below, e) < 0) {
		hu_error_prefix(e, upper->path);
		return -1;
	}
	if (nested || below) {
		const char *detail =
			st.st_dev == upper->dev && st.st_ino == upper->ino ?
			"the same directory" : nested ?
			"the workdir lies inside the upper layer" :
			"the upper layer lies inside the workdir";

		*nested_out = true;
		if (fsck_found(r, HU_PB_WORK_NESTED, "", NULL, detail, e) < 0)
			return -1;
	}
	/* The kernel wants one mount (upperpath->mnt == workpath.mnt):
	 * two filesystems, or two mounts of one (bind mounts). */
	wmnt = mount_id(wfd);
	umnt = mount_id(upper->fd);
	if (st.st_dev != upper->dev || (wmnt && umnt && wmnt != umnt)) {
		const char *detail = st.st_dev != upper->dev ?
			"another filesystem" :
			"another mount of its filesystem";

		if (fsck_found(r, HU_PB_WORK_OTHER_FS, "", NULL, detail, e) < 0)
			return -1;
	}
	return 0;
}

int fsck_workdir(struct fsck_run *r, const char *workdir, struct hu_error *e)
{
	bool nested = false;
	int wfd, rc;

	if (hu_layer_tarball(fsck_layer(r)))
		return hu_error_set(e, 0, workdir, "a workdir goes with an "
				    "overlay's upper directory, not with a "
				    "tarball layer");
	/* The workdir as the user named it: followed, like the layers. */
	wfd = open(workdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (wfd < 0)
		return hu_error_set(e, errno, workdir,
				    errno == ENOTDIR ?
				    "the workdir is not a directory" :
				    "cannot open the workdir");
	rc = check_placement(r, wfd, workdir, &nested, e);
	if (rc == 0 && !nested) {
		rc = check_work(r, wfd, e);
		if (rc == 0)
			rc = fsck_index(r, wfd, e);
		/* paths inside the workdir: the user's path before them
		 * (an interrupt has none) */
		if (rc < 0 && e->path)
			hu_error_prefix(e, workdir);
	}
	close(wfd);
	return rc;
}
