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
 *   W/index/            index=on: one entry per copied-up inode, named by
 *                       the hex of the origin's file handle (struct
 *                       ovl_fb), a hard link of the upper inode (or a
 *                       directory, or a whiteout).  A name that is no
 *                       such handle, or a non-directory without the
 *                       origin xattr, refuses the mount; stale and
 *                       orphan entries the kernel removes itself, and
 *                       "#<hex>" temporaries too (it is the scratch
 *                       directory then): those are not problems, unless
 *                       one cannot be emptied, which stays for ever.
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

#include "fsck.h"
#include "internal.h"

#define WORK_DIR "work"
#define INDEX_DIR "index"
#define INCOMPAT_DIR "incompat"

/* struct ovl_fb (fs/overlayfs/overlayfs.h): version, magic, len, flags,
 * type, a 16-byte uuid, then the filesystem's fid. */
#define OVL_FB_HEADER 21
#define OVL_FB_MAGIC 0xfb
#define OVL_FB_VERSION 0
#define OVL_FB_FLAG_BIG_ENDIAN 0x1
#define OVL_FB_FLAG_ANY_ENDIAN 0x2
#define OVL_FB_FLAGS_ALL 0x7

static bool is_ovl_whiteout(const struct stat *st)
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
	return is_temp_name(name) && is_ovl_whiteout(st);
}

/* Can the kernel's cleanup (ovl_workdir_cleanup from level 1) remove
 * directory @name of @dirfd?  Only when no directory in it holds
 * anything. */
static bool kernel_can_empty(int dirfd, const char *name)
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
		struct stat st;
		struct hu_names sub;
		int sfd;

		if (fstatat(fd, names.v[i].name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode))
			continue;
		sfd = hu_open_dir_at(fd, names.v[i].name);
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
static int found_remove(struct fsck_run *r, enum hu_problem_id id,
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
	return found_remove(r, HU_PB_WORK_LEFTOVER, workfd, WORK_DIR, name,
			    S_ISDIR(st.st_mode) &&
			    !kernel_can_empty(workfd, name) ?
			    "the kernel cannot remove it: every mount is "
			    "read-only" : NULL, e);
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

/* ---- index/ ---------------------------------------------------------- */

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Is @name an index name the kernel takes (ovl_verify_index,
 * ovl_check_fb_len)?  NULL when it is, else why not.  As the kernel:
 * an even number of hex digits (either case), the handle's own length
 * at most the bytes they make; a newer version, unknown flags or the
 * other byte order are "origin unknown", which the check refuses too.
 */
static const char *index_name_invalid(const char *name)
{
	size_t len = strlen(name) / 2;
	unsigned char fb[OVL_FB_HEADER];

	if (len < OVL_FB_HEADER)
		return "too short for a file handle";
	if (strlen(name) % 2)
		return "an odd number of hex digits";
	for (size_t i = 0; i < len; i++) {
		int hi = hex_digit(name[2 * i]), lo = hex_digit(name[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return "not hexadecimal";
		if (i < OVL_FB_HEADER)
			fb[i] = (unsigned char)(hi << 4 | lo);
	}
	if (fb[1] != OVL_FB_MAGIC || fb[2] > len)
		return "not an overlay file handle";
	if (fb[0] > OVL_FB_VERSION || (fb[3] & ~OVL_FB_FLAGS_ALL))
		return "a file handle of a newer version";
	if (!(fb[3] & OVL_FB_FLAG_ANY_ENDIAN) &&
	    (fb[3] & OVL_FB_FLAG_BIG_ENDIAN) !=
	    (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__ ?
	     OVL_FB_FLAG_BIG_ENDIAN : 0))
		return "a file handle of the other byte order";
	return NULL;
}

/* Why the kernel refuses index entry @name, or NULL when it takes it
 * (or removes it itself). */
static const char *index_entry_refused(const struct hu_layer *upper, int fd,
				       const char *name, const struct stat *st)
{
	char origin[64];
	unsigned char fb[256];
	ssize_t n;
	const char *why;

	if ((why = index_name_invalid(name)))
		return why;
	/* Whiteouts mark stale handles; directories are checked only with
	 * nfs_export, and then only removed. */
	if (is_ovl_whiteout(st) || S_ISDIR(st->st_mode))
		return NULL;
	hu_marker_xattr(HU_FMT_OVERLAY, upper->userxattr, "origin", origin,
			sizeof(origin));
	n = hu_lgetxattr_at(fd, name, origin, fb, sizeof(fb));
	if (n < 0 && errno == ERANGE)
		return NULL;	/* too long to be ours to judge */
	if (n <= 0)
		return "no origin xattr";
	if (n < OVL_FB_HEADER || fb[1] != OVL_FB_MAGIC || fb[2] > n)
		return "origin xattr is not a file handle";
	/* A valid origin that is not this name's: stale, the kernel
	 * removes the entry itself. */
	return NULL;
}

/* One entry of index/: the kernel's temporaries it removes itself
 * (leftovers when it cannot), index entries, garbage. */
static int check_index_entry(struct fsck_run *r, int fd, const char *name,
			     struct hu_error *e)
{
	const char *why;
	struct stat st;

	if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		return hu_error_setat(e, errno, INDEX_DIR, name,
				      "cannot stat");
	}
	if (name[0] == '#')	/* ovl_is_temp_index(): never refused */
		return S_ISDIR(st.st_mode) && !kernel_can_empty(fd, name) ?
		       found_remove(r, HU_PB_WORK_LEFTOVER, fd, INDEX_DIR,
				    name, "the kernel cannot remove it", e) :
		       0;
	if (!(why = index_entry_refused(fsck_layer(r), fd, name, &st)))
		return 0;
	return found_remove(r, HU_PB_WORK_INDEX_GARBAGE, fd, INDEX_DIR, name,
			    why, e);
}

static int check_index(struct fsck_run *r, int wfd, struct hu_error *e)
{
	struct hu_names names;
	struct stat st;
	int fd, rc = 0;

	if (fstatat(wfd, INDEX_DIR, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		return hu_error_set(e, errno, INDEX_DIR, "cannot stat");
	}
	if (!S_ISDIR(st.st_mode))	/* index=on reads it: refused */
		return found_remove(r, HU_PB_WORK_INDEX_GARBAGE, wfd, "",
				    INDEX_DIR, "not a directory", e);
	if ((fd = hu_open_dir_at(wfd, INDEX_DIR)) < 0)
		return hu_error_set(e, errno, INDEX_DIR, "cannot open");
	if (hu_names_read_fresh(fd, &names, INDEX_DIR, e) < 0) {
		close(fd);
		return -1;
	}
	for (size_t i = 0; rc == 0 && i < names.n; i++)
		if ((rc = hu_interrupt_check(e)) == 0)
			rc = check_index_entry(r, fd, names.v[i].name, e);
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
			"another filesystem" : "another mount of its filesystem";

		if (fsck_found(r, HU_PB_WORK_OTHER_FS, "", NULL, detail, e) < 0)
			return -1;
	}
	return 0;
}

int fsck_workdir(struct fsck_run *r, const char *workdir, struct hu_error *e)
{
	/* The workdir as the user named it: followed, like the layers. */
	int wfd = open(workdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	bool nested = false;
	int rc;

	if (wfd < 0)
		return hu_error_set(e, errno, workdir,
				    errno == ENOTDIR ?
				    "the workdir is not a directory" :
				    "cannot open the workdir");
	rc = check_placement(r, wfd, workdir, &nested, e);
	if (rc == 0 && !nested) {
		rc = check_work(r, wfd, e);
		if (rc == 0)
			rc = check_index(r, wfd, e);
		/* paths inside the workdir: the user's path before them
		 * (an interrupt has none) */
		if (rc < 0 && e->path)
			hu_error_prefix(e, workdir);
	}
	close(wfd);
	return rc;
}
