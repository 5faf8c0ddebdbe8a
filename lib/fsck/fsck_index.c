/* SPDX-License-Identifier: MIT */
/*
 * fsck of an overlay workdir's index (W/index, index=on), as the kernel
 * verifies it at mount time (fs/overlayfs/super.c ovl_get_indexdir,
 * namei.c ovl_verify_index, readdir.c ovl_indexdir_cleanup):
 *
 * - the index belongs to one upper layer: its "upper" xattr is the file
 *   handle of the upper's root (another upper's, after the upper layer
 *   was copied or the workdir reused: every index=on mount is refused,
 *   ESTALE);
 * - each entry is named by the hex of the file handle of its origin
 *   (struct ovl_fb: version 0, magic 0xfb, length, flags, type, a 16-byte
 *   uuid, the filesystem's fid), and a non-directory entry, a hard link of
 *   the upper inode, carries that origin in its "origin" xattr.  A name
 *   that is no such handle, or an entry without a valid origin, refuses
 *   every index=on mount ("failed to verify index");
 * - stale and orphan entries (an origin gone, an upper inode unlinked) the
 *   kernel removes itself, whiteouts mark stale handles, and directories
 *   it verifies only with nfs_export: none of those is a problem;
 * - the index is the kernel's scratch directory then: its "#<hex>"
 *   temporaries it removes at the next mount, but not one holding a
 *   non-empty directory, which stays for ever (a leftover).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsck/fsck_work.h"
#include "internal.h"

/* struct ovl_fb (fs/overlayfs/overlayfs.h). */
#define OVL_FB_HEADER 21
#define OVL_FB_MAGIC 0xfb
#define OVL_FB_VERSION 0
#define OVL_FB_FLAG_BIG_ENDIAN 0x1
#define OVL_FB_FLAG_ANY_ENDIAN 0x2
#define OVL_FB_FLAGS_ALL 0x7
#define OVL_FB_MAX 256

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
		int hi = hex_digit(name[2 * i]);
		int lo = hex_digit(name[2 * i + 1]);

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
	unsigned char fb[OVL_FB_MAX];
	ssize_t n;
	const char *why;

	if ((why = index_name_invalid(name)))
		return why;
	/* Whiteouts mark stale handles; directories are checked only with
	 * nfs_export, and then only removed. */
	if (fsck_work_is_whiteout(st) || S_ISDIR(st->st_mode))
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
	if (name[0] == '#') {	/* ovl_is_temp_index(): never refused */
		if (!S_ISDIR(st.st_mode) || fsck_work_can_empty(fd, name))
			return 0;
		return fsck_work_found_remove(r, HU_PB_WORK_LEFTOVER, fd,
					      INDEX_DIR, name,
					      "the kernel cannot remove it", e);
	}
	if (!(why = index_entry_refused(fsck_layer(r), fd, name, &st)))
		return 0;
	return fsck_work_found_remove(r, HU_PB_WORK_INDEX_GARBAGE, fd,
				      INDEX_DIR, name, why, e);
}

/*
 * Does the index belong to another upper layer?  Its "upper" xattr holds
 * the handle of the upper root it was made for (ovl_verify_upper): the
 * handle's type and fid are compared with the ones name_to_handle_at(2)
 * gives for the upper now (the uuid is left out: some filesystems have
 * none to compare).  No xattr (the kernel sets one), or a filesystem
 * that makes no handles: not ours to judge.
 */
static bool index_foreign(const struct hu_layer *upper, int wfd)
{
	char name[64];
	unsigned char fb[OVL_FB_MAX];
	union {
		struct file_handle fh;
		unsigned char buf[sizeof(struct file_handle) + MAX_HANDLE_SZ];
	} h;
	ssize_t n;
	int mnt;

	hu_marker_xattr(HU_FMT_OVERLAY, upper->userxattr, "upper", name,
			sizeof(name));
	n = hu_lgetxattr_at(wfd, INDEX_DIR, name, fb, sizeof(fb));
	if (n < OVL_FB_HEADER || fb[1] != OVL_FB_MAGIC || fb[2] > n ||
	    fb[2] < OVL_FB_HEADER)
		return false;
	h.fh.handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(upper->fd, "", &h.fh, &mnt, AT_EMPTY_PATH) < 0)
		return false;
	return fb[4] != (unsigned char)h.fh.handle_type ||
	       (size_t)fb[2] - OVL_FB_HEADER != h.fh.handle_bytes ||
	       memcmp(fb + OVL_FB_HEADER, h.fh.f_handle,
		      h.fh.handle_bytes) != 0;
}

int fsck_index(struct fsck_run *r, int wfd, struct hu_error *e)
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
		return fsck_work_found_remove(r, HU_PB_WORK_INDEX_GARBAGE, wfd,
					      "", INDEX_DIR, "not a directory",
					      e);
	/* Another upper's index: its entries mean nothing for this one. */
	if (index_foreign(fsck_layer(r), wfd))
		return fsck_work_found_remove(r, HU_PB_WORK_INDEX_FOREIGN, wfd,
					      "", INDEX_DIR, NULL, e);
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
