/* SPDX-License-Identifier: MIT */
/*
 * fsck of a tarball layer.  The stack reads a tarball through the
 * directory it was unpacked into (tarlayer.c), where the later of two
 * entries has won already and ./x and x are one path: what OCI readers
 * disagree on is gone from there.  So the tarball itself is read again,
 * as a stream (tarsrc.c decompresses, libarchive reads the entries, the
 * names are read by tarindex.c's rules), and each entry is checked
 * (fsck_tarcheck.c) against the index of the paths seen so far and, for
 * a whiteout, the layers beneath.  Read only: fsck never changes a
 * tarball (the engine refuses -p and -y on one before it gets here).
 * Memory: the index of paths, and the metadata of each directory, never
 * file data.
 */
#include <archive.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crypto_dl.h"
#include "fsck/fsck_tar.h"
#include "internal.h"
#include "tar/archive_dl.h"

/* ---- errors -------------------------------------------------------------- */

/* "TARBALL: ENTRY: message"; outside an entry "TARBALL: message". */
int ft_fail(struct ft *t, int err, const char *msg)
{
	char *esc, *where = NULL;

	if (!t->raw)
		return hu_error_set(t->e, err, t->l->path, "%s", msg);
	esc = tl_escape(t->raw);
	if (asprintf(&where, "%s: %s", t->l->path, esc) < 0)
		where = NULL;
	tl_escape_free(esc);
	hu_error_set(t->e, err, where ? where : t->l->path, "%s", msg);
	free(where);
	return -1;
}

static int ft_archive_fail(struct ft *t)
{
	const char *why = archive_error_string(t->a);
	char *msg;
	int rc;

	/* whole: libarchive's text may name a path */
	if (asprintf(&msg, "cannot read the tarball again: %s",
		     why && *why ? why : "corrupt data") < 0)
		return ft_fail(t, ENOMEM, "out of memory");
	rc = ft_fail(t, 0, msg);
	free(msg);
	return rc;
}

/* Report @id at @path (split into its directory and name for
 * fsck_found), @detail escaped.  Nothing is ever repaired here. */
int ft_report(struct ft *t, enum hu_problem_id id, const char *path,
	      const char *detail)
{
	const char *slash = strrchr(path, '/');
	char *esc = NULL, *dir;
	struct hu_error why = { 0 };
	int rc;

	dir = strndup(path, slash ? (size_t)(slash - path) : 0);
	if (!dir)
		return hu_error_set(t->e, ENOMEM, t->l->path, "out of memory");
	if (detail)
		esc = tl_escape(detail);
	rc = fsck_found(t->r, id, dir, slash ? slash + 1 : path, esc, t->e);
	if (esc)
		tl_escape_free(esc);
	free(dir);
	if (rc <= 0)
		return rc;
	/* The engine refuses to repair a tarball before the check: should
	 * it ask all the same, say why nothing was done. */
	hu_error_set(&why, EROFS, t->l->path, "tarball layers are checked "
		     "read only");
	return fsck_done(t->r, -1, &why, t->e);
}

int ft_nomem(struct ft *t)
{
	return hu_error_set(t->e, ENOMEM, t->l->path, "out of memory");
}
/* ---- the layers beneath -------------------------------------------------- */

/* Directory @dir ("" the root) of the view beneath into t->bd: NULL when
 * it has none there (a missing name or no directory on the way: a
 * symlink is never followed, as the unpack reads a whiteout under one). */
static int below_dir(struct ft *t, const char *dir)
{
	struct hu_vdir *d;
	char *path, *name, *next;
	int rc = 0;

	if (t->bdir_known && strcmp(t->bdir, dir) == 0)
		return 0;
	if (t->bd && t->bd != t->broot)
		hu_vdir_close(t->bd);
	t->bd = NULL;
	free(t->bdir);
	t->bdir = strdup(dir);
	t->bdir_known = false;
	if (!t->bdir)
		return ft_nomem(t);
	if (!t->broot) {
		if (fsck_below(t->r)->n == 0)
			goto known;	/* nothing beneath: no directory */
		if (hu_vdir_open_root(fsck_below(t->r), &t->broot, t->e) < 0)
			return -1;
	}
	path = strdup(dir);
	if (!path)
		return ft_nomem(t);
	d = t->broot;
	for (name = *path ? path : NULL; name && d; name = next) {
		struct hu_ventry ent;
		struct hu_vdir *child = NULL;

		next = strchr(name, '/');
		if (next)
			*next++ = '\0';
		rc = hu_vdir_lookup(d, name, &ent, t->e);
		if (rc > 0 && S_ISDIR(ent.st.st_mode))
			rc = hu_vdir_open_child(d, &ent, &child, t->e);
		else if (rc > 0)
			rc = 0;
		if (d != t->broot)
			hu_vdir_close(d);
		d = child;
		if (rc < 0)
			break;
	}
	free(path);
	if (rc < 0) {
		if (d && d != t->broot)
			hu_vdir_close(d);
		return -1;
	}
	t->bd = d;
known:
	t->bdir_known = true;
	return 0;
}

int ft_below_has(struct ft *t, const char *dir, const char *name)
{
	struct hu_ventry ent;

	if (below_dir(t, dir) < 0)
		return -1;
	return t->bd ? hu_vdir_lookup(t->bd, name, &ent, t->e) : 0;
}
/* ---- the tarball --------------------------------------------------------- */

static int check_entries(struct ft *t)
{
	for (;;) {
		int r;

		if (hu_interrupt_check(t->e) < 0)
			return -1;
		t->raw = NULL;
		r = tar_src_next_header(t->a, &t->ae);
		if (r == ARCHIVE_EOF)
			return tar_src_archive_end(t->src, t->a) < 0 ?
			       ft_archive_fail(t) : 0;
		if (r < ARCHIVE_WARN)
			return ft_archive_fail(t);
		fsck_entry_checked(t->r);
		if (ft_check_entry(t) < 0)
			return -1;
		if (tar_src_entry_skip(t->src, t->a) < ARCHIVE_WARN)
			return ft_archive_fail(t);
	}
}

/* The tarball @l was read from, opened again: refused when another file
 * is at its path now. */
static int open_again(struct ft *t)
{
	struct stat st;
	int fd = t->l->image ?
		 hu_oci_blob_open(t->l->image,
				  &t->l->image->layers[t->l->image_layer],
				  t->e) :
		 open(t->l->path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 && t->l->image)
		return -1;
	if (fd < 0)
		return hu_error_set(t->e, errno, t->l->path, "cannot open "
				    "the tarball again");
	if (fstat(fd, &st) < 0) {
		int err = errno;

		close(fd);
		return hu_error_set(t->e, err, t->l->path, "cannot stat");
	}
	if (st.st_dev != t->l->file_dev || st.st_ino != t->l->file_ino) {
		close(fd);
		return hu_error_set(t->e, 0, t->l->path, "replaced while it "
				    "was checked");
	}
	return fd;
}

int fsck_tarball(struct fsck_run *r, const struct hu_layer *l,
		 struct hu_error *e)
{
	struct ft t = { .r = r, .l = l, .e = e };
	int fd, rc = -1;

	if (hu_la_need(e) < 0 || (l->image && hu_crypto_need(e) < 0))
		return -1;
	fd = open_again(&t);
	if (fd < 0)
		return -1;
	t.src = tar_src_open(fd);
	t.a = archive_read_new();
	if (!t.src || !t.a || ti_init(&t.ix) < 0 ||
	    (l->image && tar_src_verify(t.src,
					l->image->layers[l->image_layer].digest,
					l->image->layers[l->image_layer].size,
					l->image->diff_ids[l->image_layer],
					tar_comp_of_layer(l->image,
							  l->image_layer)) < 0)) {
		ft_nomem(&t);
		goto out;
	}
	if (tar_src_archive_open(t.src, t.a) != ARCHIVE_OK) {
		ft_archive_fail(&t);
		goto out;
	}
	rc = check_entries(&t);
	if (rc == 0 && tar_src_verify_end(t.src) < 0)
		rc = hu_error_set(e, 0, l->path, "%s", tar_src_error(t.src));
out:
	if (t.bd && t.bd != t.broot)
		hu_vdir_close(t.bd);
	if (t.broot)
		hu_vdir_close(t.broot);
	free(t.bdir);
	free(t.meta);
	ti_free(&t.ix);
	if (t.a)
		archive_read_free(t.a);
	tar_src_free(t.src);
	close(fd);
	return rc;
}
