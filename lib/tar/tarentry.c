/* SPDX-License-Identifier: MIT */
/*
 * One entry of a tarball layer, made in the private directory: its path
 * normalised and checked before anything is made (tarindex.c), its parent
 * reached without following a symlink (tardirs.c), then the entry by its
 * type, its owner (as root), xattrs, mode and times.  Whiteouts and the
 * opaque marker become empty files, so the view's OCI rules apply.  A
 * duplicate path: the later entry wins, with a warning.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "internal.h"
#include "tar/archive_dl.h"
#include "tar/paxxattr.h"
#include "tar/tarlayer.h"

/* ---- metadata ------------------------------------------------------------- */

bool tl_xattr_unsupported(int err)
{
	return err == EPERM || err == EACCES || err == ENOTSUP ||
	       err == EOPNOTSUPP || err == E2BIG || err == ERANGE ||
	       err == EINVAL;
}

/* Owner (as root) and xattrs of the entry just made: @fd itself, or @leaf
 * in @dfd (never followed). */
static int set_owner_xattrs(struct tl *t, int fd, int dfd, const char *leaf)
{
	const char *name;
	const void *value;
	size_t size;

	/* chown first: it clears setuid bits and file capabilities. */
	if (t->as_root &&
	    hu_wr_fchownat(fd >= 0 ? fd : dfd, fd >= 0 ? "" : leaf,
			   (uid_t)archive_entry_uid(t->ae),
			   (gid_t)archive_entry_gid(t->ae),
			   fd >= 0 ? AT_EMPTY_PATH : AT_SYMLINK_NOFOLLOW) < 0)
		return tl_write_fail(t, errno, "set owner");
	archive_entry_xattr_reset(t->ae);
	while (archive_entry_xattr_next(t->ae, &name, &value, &size) ==
	       ARCHIVE_OK) {
		char dec[XATTR_NAME_MAX + 1], *esc;

		name = tl_xattr_name(t, name, dec, sizeof(dec));
		if (!name)
			continue;
		if (hu_wr_setxattr_at(fd >= 0 ? fd : dfd, fd >= 0 ? NULL : leaf,
				      name, value, size, 0) == 0)
			continue;
		if (!tl_xattr_unsupported(errno))
			return tl_write_fail(t, errno, "set xattr");
		esc = tl_escape(name);
		tl_warn(t, errno, "xattr %s not kept", esc);
		tl_escape_free(esc);
	}
	return 0;
}

const char *tl_xattr_name(const struct tl *t, const char *name, char *dec,
			  size_t size)
{
	/* libarchive gives the name as the record's key has it: GNU tar's
	 * escapes or libarchive's URL encoding (paxxattr.c).  A name too
	 * long to decode here is too long to set. */
	if (name && hu_pax_xattr_name(name, dec, size) == 0)
		name = dec;
	/* An output keeps what a copy keeps: the view's reader (treeout.c)
	 * leaves out what /etc/xattr.conf skips too. */
	if (!name || !*name || (t->to_output ? !hu_xattr_copied(name) :
				hu_xattr_is_private(name)))
		return NULL;
	return name;
}

/* Mode and times of a non-directory (directories get theirs at the end). */
static int set_mode_times(struct tl *t, int fd, int dfd, const char *leaf,
			  bool is_link)
{
	mode_t mode = archive_entry_perm(t->ae) & 07777;

	if (!is_link && (fd >= 0 ? hu_wr_fchmod(fd, mode) :
			 hu_wr_fchmodat(dfd, leaf, mode)) < 0)
		return tl_write_fail(t, errno, "set mode");
	if ((fd >= 0 ? hu_wr_futimens(fd, t->times) :
	     hu_wr_utimensat(dfd, leaf, t->times, AT_SYMLINK_NOFOLLOW)) < 0)
		return tl_write_fail(t, errno, "set times");
	return 0;
}

void tl_entry_times(struct tl *t)
{
	struct archive_entry *ae = t->ae;

	if (!archive_entry_mtime_is_set(ae)) {
		t->times[0].tv_nsec = t->times[1].tv_nsec = UTIME_OMIT;
		t->times[0].tv_sec = t->times[1].tv_sec = 0;
		return;
	}
	t->times[1].tv_sec = archive_entry_mtime(ae);
	t->times[1].tv_nsec = archive_entry_mtime_nsec(ae);
	t->times[0] = t->times[1];
	if (archive_entry_atime_is_set(ae)) {
		t->times[0].tv_sec = archive_entry_atime(ae);
		t->times[0].tv_nsec = archive_entry_atime_nsec(ae);
	}
}

/* ---- file data ------------------------------------------------------------ */

/* Write @size bytes at @off; *@written: the end of the last write. */
static int write_all(struct tl *t, int fd, const char *buf, size_t size,
		     off_t off, off_t *written)
{
	*written = off + (off_t)size;
	for (size_t done = 0; done < size;) {
		ssize_t w = hu_wr_pwrite(fd, buf + done, size - done,
					 off + (off_t)done);

		if (w <= 0)
			return tl_write_fail(t, w < 0 ? errno : EIO, "write");
		done += (size_t)w;
	}
	/* into an output (merge -o of tarballs), not a private unpack,
	 * which is input */
	if (t->to_output && t->r)
		hu_progress_bytes_add(t->r->bytes, 0, size);
	return 0;
}

static bool all_zero(const char *p, size_t n)
{
	return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

/*
 * @size bytes of data at @off of a new file, but no piece of a block (of
 * @blk bytes, aligned in the file) that holds only zeros: the file reads
 * zeros there anyway, and a block no write touches stays a hole, as
 * cp --sparse does.  Runs of other pieces go in one write each.
 */
static int write_sparse(struct tl *t, int fd, const char *buf, size_t size,
			off_t off, size_t blk, off_t *written)
{
	size_t run = 0, run_len = 0;

	for (size_t i = 0; i < size;) {
		size_t piece = blk - (size_t)((off + (off_t)i) % (off_t)blk);

		if (piece > size - i)
			piece = size - i;
		if (!all_zero(buf + i, piece)) {
			if (!run_len)
				run = i;
			run_len += piece;
		} else if (run_len) {
			if (write_all(t, fd, buf + run, run_len,
				      off + (off_t)run, written) < 0)
				return -1;
			run_len = 0;
		}
		i += piece;
	}
	return run_len ? write_all(t, fd, buf + run, run_len,
				   off + (off_t)run, written) : 0;
}

/* The data of the current entry into @fd, a new file: holes where the
 * tarball's sparse map has them (the blocks libarchive hands out are at
 * their offsets) and where the data are zeros, then the size. */
static int write_data(struct tl *t, int fd)
{
	off_t end = 0, written = 0;
	struct stat st;

	if (!t->blk)	/* the unpack's filesystem's, once */
		t->blk = fstat(fd, &st) == 0 && st.st_blksize >= 512 &&
			 st.st_blksize <= 1 << 20 ? (size_t)st.st_blksize :
			 4096;
	for (;;) {
		const void *buf;
		size_t size;
		la_int64_t off;
		int r = archive_read_data_block(t->a, &buf, &size, &off);

		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN)
			return tl_archive_fail(t, "in this entry's data");
		if (write_sparse(t, fd, buf, size, off, t->blk, &written) < 0)
			return -1;
		if (off + (off_t)size > end)
			end = off + (off_t)size;
	}
	/* The size: zeros or a hole at the end were not written. */
	if (archive_entry_size_is_set(t->ae) &&
	    archive_entry_size(t->ae) > end)
		end = archive_entry_size(t->ae);
	if (end > written && hu_wr_ftruncate(fd, end) < 0)
		return tl_write_fail(t, errno, "write");
	return 0;
}

/* ---- entries -------------------------------------------------------------- */

/* A regular file; @data false for a whiteout (its content is ignored). */
static int make_file(struct tl *t, int dfd, const char *leaf, bool data)
{
	int fd = hu_wr_create(dfd, leaf, 0600);
	int rc = -1;

	if (fd < 0)
		return tl_write_fail(t, errno, "create");
	if (data && write_data(t, fd) < 0)
		goto out;
	if (set_owner_xattrs(t, fd, -1, NULL) < 0 ||
	    set_mode_times(t, fd, -1, NULL, false) < 0)
		goto out;
	rc = 0;
out:
	close(fd);
	return rc;
}

/* Record what was made at @leaf of directory @parent: a directory (with
 * the current entry's mode and times, set at the end) or not. */
static int note_made(struct tl *t, uint32_t parent, const char *leaf,
		     bool dir)
{
	uint32_t id = ti_child(&t->ix, parent, leaf, strlen(leaf), true);
	struct ti_dir *d;

	if (id == TI_NONE)
		return tl_fail(t, ENOMEM, "out of memory");
	t->ix.nodes[id].flags = TI_EXPLICIT | (dir ? TI_DIR : 0);
	if (!dir) {
		if (t->ix.nodes[id].dir != TI_NONE)
			t->ix.dirs[t->ix.nodes[id].dir].gone = true;
		return 0;
	}
	d = ti_dir(&t->ix, id);
	if (!d)
		return tl_fail(t, ENOMEM, "out of memory");
	*d = (struct ti_dir){ .node = id, .explicit_ = true,
			      .mode = archive_entry_perm(t->ae) & 07777,
			      .times = { t->times[0], t->times[1] } };
	return 0;
}

/* A directory, or new metadata for the one already there (@exists). */
static int make_dir(struct tl *t, int dfd, const char *leaf, bool exists)
{
	if (!exists && hu_wr_mkdirat(dfd, leaf, 0700) < 0)
		return tl_write_fail(t, errno, "create directory");
	return set_owner_xattrs(t, -1, dfd, leaf);
}

static int make_hardlink(struct tl *t, int dfd, const char *leaf,
			 const char *target, const char *esc_target)
{
	const char *slash = strrchr(target, '/');
	char *tdir = strndup(target, slash ? (size_t)(slash - target) : 0);
	int tfd, rc = 0;

	if (!tdir)
		return tl_fail(t, ENOMEM, "out of memory");
	tfd = tl_open_dir(t, tdir);
	free(tdir);
	if (tfd < 0 && errno != ENOENT)
		return -1;
	if (tfd < 0 ||
	    hu_wr_linkat(tfd, slash ? slash + 1 : target, dfd, leaf) < 0) {
		/* The target went with a directory replaced since. */
		rc = errno == ENOENT ?
			tl_fail(t, 0, "hard link to a path not yet seen: %s",
				esc_target) :
			tl_write_fail(t, errno, "create hard link");
	}
	if (tfd >= 0)
		close(tfd);
	return rc;
}

/* A device or a fifo; 1 when a device is left out (not root). */
static int make_node(struct tl *t, int dfd, const char *leaf, mode_t type)
{
	dev_t dev = makedev(archive_entry_rdevmajor(t->ae),
			    archive_entry_rdevminor(t->ae));

	if (hu_wr_mknodat(dfd, leaf, type | 0600,
			  type == S_IFIFO ? 0 : dev) < 0) {
		if (errno == EPERM && type != S_IFIFO) {
			tl_warn(t, 0, "device not made without root: skipped");
			return 1;
		}
		return tl_write_fail(t, errno, "create");
	}
	if (set_owner_xattrs(t, -1, dfd, leaf) < 0 ||
	    set_mode_times(t, -1, dfd, leaf, false) < 0)
		return -1;
	return 0;
}

static int make_symlink(struct tl *t, int dfd, const char *leaf)
{
	const char *to = archive_entry_symlink(t->ae);

	if (hu_wr_symlinkat(to ? to : "", dfd, leaf) < 0)
		return tl_write_fail(t, errno, "create symlink");
	if (set_owner_xattrs(t, -1, dfd, leaf) < 0 ||
	    set_mode_times(t, -1, dfd, leaf, true) < 0)
		return -1;
	return 0;
}

/* A name read as an OCI marker: made an empty file whatever the entry's
 * type (whiteouts and .wh..wh..opq); other .wh..wh.* are kept as they
 * are. */
bool tl_is_marker_name(const char *leaf)
{
	return hu_oci_hidden(leaf) || hu_oci_is_opaque(leaf);
}

/*
 * A hard link to a path not made yet: refused, unless the caller's
 * problem sink goes on (fsck): then it is reported there and left out,
 * as GNU tar leaves it out (with an error), and the unpack goes on.
 */
static int link_forward(struct tl *t, const char *path, const char *esc)
{
	const struct hu_problem_sink *sink =
		t->below ? t->below->problems : NULL;

	if (t->problem)		/* the index: the reader's sink decides */
		return t->problem(t, TL_PROBLEM_LINK_FORWARD, path, esc) < 0 ?
		       -1 : 1;
	if (!sink || sink->policy == HU_PB_FAIL)
		return tl_fail(t, 0, "hard link to a path not yet seen: %s",
			       esc);
	if (hu_problem_found(sink, t->r, HU_PB_TAR_LINK_FORWARD, true,
			     t->l->path, path, esc, 0, t->e) < 0)
		return -1;
	return 1;
}

/*
 * A hard link's target: a path an earlier entry made, not a directory.
 * Returns 1 when the link is to the entry itself (nothing to do).
 */
int tl_link_target(struct tl *t, const char *hl, const char *path,
		   char **norm, const char *esc)
{
	const struct ti_node *nd;
	const char *why;
	bool is_root;
	uint32_t id;

	*norm = hu_tar_path_norm(hl, &is_root, &why);
	if (!*norm)
		return tl_fail(t, 0, "hard link target: %s", why);
	if (is_root)
		return tl_fail(t, 0, "hard link to a directory: %s", esc);
	id = ti_path(&t->ix, *norm, false);
	nd = id != TI_NONE ? &t->ix.nodes[id] : NULL;
	if (!nd || !(nd->flags & TI_EXPLICIT) || (nd->flags & TI_GONE))
		return link_forward(t, path, esc);
	if (nd->flags & TI_DIR)
		return tl_fail(t, 0, "hard link to a directory: %s", esc);
	if (strcmp(*norm, path) == 0) {
		tl_warn(t, 0, "hard link to itself: ignored");
		return 1;
	}
	return 0;
}

/*
 * Path @path stated again (@msg says how): a warning.  Given a problem
 * sink, tarDuplicate goes there instead, but for a directory restated
 * (@dir_again), which only fsck, reading the tarball itself, can tell
 * from a duplicate readers disagree on (fsck_tar.c).
 */
static int stated_again(struct tl *t, const char *path, const char *msg,
			bool dir_again)
{
	const struct hu_problem_sink *sink =
		t->below ? t->below->problems : NULL;

	if (t->problem)
		return t->problem(t, dir_again ? TL_PROBLEM_DIR_AGAIN :
				  TL_PROBLEM_DUPLICATE, path, msg);
	if (!sink) {
		tl_warn(t, 0, "%s", msg);
		return 0;
	}
	if (dir_again)
		return 0;
	return hu_problem_found(sink, t->r, HU_PB_TAR_DUPLICATE, false,
				t->l->path, path, msg, 0, t->e);
}

/* What is at @leaf (@path) already (an earlier entry, node @id, or a
 * parent made for one): warn, and remove it unless a directory meets a
 * directory. */
static int replace_earlier(struct tl *t, int dfd, const char *leaf,
			   const char *path, uint32_t id, bool want_dir,
			   bool *keep_dir)
{
	struct ti_node *nd = &t->ix.nodes[id];
	struct stat st;
	int rc = 0;

	*keep_dir = false;
	/* The index may remember a path removed with a directory since. */
	if (fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		return tl_fail(t, errno, "cannot stat");
	}
	*keep_dir = want_dir && S_ISDIR(st.st_mode);
	if (nd->flags & TI_EXPLICIT)
		rc = stated_again(t, path, "duplicate entry: the later one "
				  "wins", *keep_dir);
	else if (!want_dir)
		rc = stated_again(t, path, "replaces the directory made for "
				  "earlier entries", false);
	if (rc < 0 || *keep_dir)
		return rc;	/* as tar does: a directory's children stay */
	nd = &t->ix.nodes[id];
	nd->flags |= TI_GONE;
	if (nd->dir != TI_NONE)
		t->ix.dirs[nd->dir].gone = true;
	if ((S_ISDIR(st.st_mode) ? hu_rmtree(dfd, leaf) :
	     hu_wr_unlinkat(dfd, leaf, 0)) < 0)
		return tl_write_fail(t, errno, "remove the earlier entry");
	return 0;
}

/* Was node @id (TI_NONE: none) named by an entry before? */
static bool was_named(const struct tl *t, uint32_t id)
{
	return id != TI_NONE && (t->ix.nodes[id].flags & TI_EXPLICIT);
}

/* What node @id, replaced by the current entry (a directory kept when
 * @keep_dir), keeps of the layers beneath (tl.over): TI_BELOW while the
 * directory beneath stays, TI_BELOW_GONE once it went. */
static uint8_t below_kept(const struct tl *t, uint32_t id, bool keep_dir)
{
	uint8_t f = t->ix.nodes[id].flags;

	if (!(f & TI_BELOW))
		return f & TI_BELOW_GONE;
	return keep_dir ? (f & (TI_BELOW | TI_BELOW_GONE)) : TI_BELOW_GONE;
}

/* Over the layers beneath (tl.over), what they have at @leaf goes, as the
 * view puts this layer's entry over it: but a directory meets a directory
 * (*@keep_dir), whose entries merge with the tarball's (*@below:
 * TI_BELOW; TI_BELOW_GONE when a directory went). */
static int replace_below(struct tl *t, int dfd, const char *leaf,
			 bool want_dir, bool *keep_dir, uint8_t *below)
{
	struct stat st;

	*keep_dir = false;
	*below = 0;
	if (fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : tl_fail(t, errno, "cannot stat");
	if (want_dir && S_ISDIR(st.st_mode)) {
		*keep_dir = true;
		*below = TI_BELOW;
		return 0;
	}
	if (S_ISDIR(st.st_mode))
		*below = TI_BELOW_GONE;
	if ((S_ISDIR(st.st_mode) ? hu_rmtree(dfd, leaf) :
	     hu_wr_unlinkat(dfd, leaf, 0)) < 0)
		return tl_write_fail(t, errno, "remove what lies beneath");
	return 0;
}

/* What an output (merge -o) got from the current entry, for its summary:
 * entries as written, a duplicate counted each time it is written. */
static void count_made(struct tl *t, bool marker, bool hardlink)
{
	struct hu_merge_stats *st = t->stats;
	mode_t type = archive_entry_filetype(t->ae);

	if (!st || marker)
		return;
	if (hardlink) {
		st->hardlinks++;
		return;
	}
	st->dirs += type == AE_IFDIR;
	st->files += type == AE_IFREG;
	st->bytes += type == AE_IFREG ? (uint64_t)archive_entry_size(t->ae) :
		     0;
	st->symlinks += type == AE_IFLNK;
	st->specials += type == AE_IFCHR || type == AE_IFBLK ||
			type == AE_IFIFO;
}

/* Make entry @leaf in @dfd by its type; 1 when it is left out. */
static int make_entry(struct tl *t, int dfd, const char *leaf, bool marker,
		      const char *target, const char *esc, bool keep_dir)
{
	mode_t type = archive_entry_filetype(t->ae);

	if (marker)
		return make_file(t, dfd, leaf, false);
	if (target)
		return make_hardlink(t, dfd, leaf, target, esc);
	switch (type) {
	case AE_IFREG:
		return make_file(t, dfd, leaf, true);
	case AE_IFDIR:
		return make_dir(t, dfd, leaf, keep_dir);
	case AE_IFLNK:
		return make_symlink(t, dfd, leaf);
	case AE_IFCHR:
	case AE_IFBLK:
	case AE_IFIFO:
		return make_node(t, dfd, leaf, type);
	default:
		tl_warn(t, 0, "entry of an unknown type: skipped");
		return 1;
	}
}

static int put_entry(struct tl *t, const char *dir, const char *leaf,
		     const char *path)
{
	const char *hl = archive_entry_hardlink(t->ae);
	bool marker = tl_is_marker_name(leaf), keep_dir = false;
	bool want_dir = !marker && !hl &&
			archive_entry_filetype(t->ae) == AE_IFDIR;
	char *esc = hl ? tl_escape(hl) : NULL, *target = NULL;
	uint32_t parent, id;
	uint8_t below = 0;
	int dfd, rc;

	if (hl && !marker) {
		rc = tl_link_target(t, hl, path, &target, esc);
		if (rc != 0)
			goto out;
	}
	rc = -1;
	dfd = tl_parent_dir(t, dir, &parent);
	if (dfd < 0)
		goto out;
	id = ti_child(&t->ix, parent, leaf, strlen(leaf), false);
	if (tl_live(&t->ix, id)) {
		if (replace_earlier(t, dfd, leaf, path, id, want_dir,
				    &keep_dir) < 0)
			goto out;
		below = below_kept(t, id, keep_dir);
	} else if (t->over) {
		if (replace_below(t, dfd, leaf, want_dir, &keep_dir, &below) < 0)
			goto out;
		if (id != TI_NONE)
			below |= t->ix.nodes[id].flags & TI_BELOW_GONE;
	}
	/* The directory beneath is gone, yet the view would merge it with
	 * this one: only the general path can say what it holds. */
	if (want_dir && (below & TI_BELOW_GONE)) {
		rc = tl_fall_back(t);
		goto out;
	}
	if (keep_dir && (below & TI_BELOW) && !was_named(t, id) &&
	    tl_clear_xattrs(t, dfd, leaf) < 0)
		goto out;
	rc = make_entry(t, dfd, leaf, marker, target, esc, keep_dir);
	if (rc == 0) {
		count_made(t, marker, target != NULL);
		rc = note_made(t, parent, leaf, want_dir);
	}
	if (rc == 0 && below)
		t->ix.nodes[ti_child(&t->ix, parent, leaf, strlen(leaf),
				     false)].flags |= below;
out:
	free(target);
	if (esc)
		tl_escape_free(esc);
	return rc < 0 ? -1 : 0;
}

/* "./" or "/": the layer's root directory itself. */
static int root_entry(struct tl *t)
{
	struct ti_node *root = &t->ix.nodes[TI_ROOT];

	if (archive_entry_hardlink(t->ae) ||
	    archive_entry_filetype(t->ae) != AE_IFDIR)
		return tl_fail(t, 0, "the layer's root must be a directory");
	if ((root->flags & TI_EXPLICIT) &&
	    stated_again(t, "", "duplicate entry: the later one wins",
			 true) < 0)
		return -1;
	/* (over the layers beneath: the root is theirs until named) */
	if (t->over && !(root->flags & TI_EXPLICIT) &&
	    tl_clear_xattrs(t, t->root, NULL) < 0)
		return -1;
	if (set_owner_xattrs(t, t->root, -1, NULL) < 0)
		return -1;
	root->flags = TI_DIR | TI_EXPLICIT | (root->flags & TI_BELOW);
	t->ix.dirs[root->dir] = (struct ti_dir){ .node = TI_ROOT,
		.explicit_ = true, .mode = archive_entry_perm(t->ae) & 07777,
		.times = { t->times[0], t->times[1] } };
	return 0;
}

int tl_entry(struct tl *t)
{
	const char *why;
	char *path, *slash;
	bool is_root;
	int rc;

	t->raw = archive_entry_pathname(t->ae);
	if (!t->raw)
		return tl_fail(t, 0, "an entry's name cannot be read");
	tl_entry_times(t);
	if (!t->root_timed) {
		/* A root no entry names: the times of the first entry. */
		t->root_timed = true;
		t->ix.dirs[0].times[0] = t->times[0];
		t->ix.dirs[0].times[1] = t->times[1];
	}
	path = hu_tar_path_norm(t->raw, &is_root, &why);
	if (!path)
		return tl_fail(t, 0, "%s", why);
	slash = strrchr(path, '/');
	if (is_root) {
		rc = root_entry(t);
	} else {
		char *dir = strndup(path, slash ? (size_t)(slash - path) : 0);

		rc = dir ? put_entry(t, dir, slash ? slash + 1 : path, path) :
			tl_fail(t, ENOMEM, "out of memory");
		free(dir);
	}
	free(path);
	return rc;
}
