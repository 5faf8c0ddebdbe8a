/* SPDX-License-Identifier: MIT */
/*
 * fsck of a tarball layer.  The stack reads a tarball through the
 * directory it was unpacked into (tarlayer.c), where the later of two
 * entries has won already and ./x and x are one path: what OCI readers
 * disagree on is gone from there.  So the tarball itself is read again,
 * as a stream (tarsrc.c decompresses, libarchive reads the entries, the
 * names are read by tarindex.c's rules), and each entry is checked
 * against the index of the paths seen so far and, for a whiteout, the
 * layers beneath.  Read only: fsck never changes a tarball (the engine
 * refuses -p and -y on one before it gets here).  Memory: the index of
 * paths, and the metadata of each directory, never file data.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsck.h"
#include "internal.h"
#include "tarlayer.h"

/* What the check knows of a path (struct ti_node.flags, an index of its
 * own: the unpack's TI_* flags do not apply here). */
enum {
	FT_ENTRY = 1 << 0,	/* named by an entry */
	FT_DIR = 1 << 1,	/* ... the last of which is a directory */
	FT_PARENT = 1 << 2,	/* holds an entry: the tarball makes it */
	FT_WHITED = 1 << 3,	/* a whiteout of this name in the tarball */
	FT_OPAQUE = 1 << 4,	/* a directory holding .wh..wh..opq */
	FT_WH_ENTRY_DONE = 1 << 5,	/* tarWhiteoutAndEntry reported */
	FT_REDUNDANT_DONE = 1 << 6,	/* a whiteout: tarOpaqueRedundant
					 * reported */
};

/* The metadata of a directory entry: a directory restated with the same
 * is no duplicate any reader can tell apart. */
struct ft_meta {
	mode_t mode;
	la_int64_t uid, gid;
	time_t mtime;
	long mtime_nsec;
};

struct ft {
	struct fsck_run *r;
	const struct hu_layer *l;
	struct hu_error *e;
	struct tar_src *src;
	struct archive *a;
	struct archive_entry *ae;
	const char *raw;	/* the current entry's name, as written */
	struct tar_index ix;
	struct ft_meta *meta;	/* by ti_dir index (ti_node.dir) */
	size_t meta_cap;
	/* The layers beneath: their root, and the directory the last
	 * whiteout was looked up in (bdir; bd NULL when they have none). */
	struct hu_vdir *broot, *bd;
	char *bdir;
	bool bdir_known;
};

/* ---- errors ---------------------------------------------------------------- */

/* "TARBALL: ENTRY: message"; outside an entry "TARBALL: message". */
static int ft_fail(struct ft *t, int err, const char *msg)
{
	char esc[256];

	if (!t->raw)
		return hu_error_set(t->e, err, t->l->path, "%s", msg);
	tl_escape(esc, sizeof(esc), t->raw);
	return hu_error_setat(t->e, err, t->l->path, esc, "%s", msg);
}

static int ft_archive_fail(struct ft *t)
{
	const char *why = archive_error_string(t->a);
	char msg[300];

	snprintf(msg, sizeof(msg), "cannot read the tarball again: %s",
		 why && *why ? why : "corrupt data");
	return ft_fail(t, 0, msg);
}

/* Report @id at @path (split into its directory and name for
 * fsck_found), @detail escaped.  Nothing is ever repaired here. */
static int report(struct ft *t, enum hu_problem_id id, const char *path,
		  const char *detail)
{
	const char *slash = strrchr(path, '/');
	char esc[512], *dir;
	struct hu_error why = { 0 };
	int rc;

	if (detail)
		tl_escape(esc, sizeof(esc), detail);
	dir = strndup(path, slash ? (size_t)(slash - path) : 0);
	if (!dir)
		return hu_error_set(t->e, ENOMEM, t->l->path, "out of memory");
	rc = fsck_found(t->r, id, dir, slash ? slash + 1 : path,
			detail ? esc : NULL, t->e);
	free(dir);
	if (rc <= 0)
		return rc;
	/* The engine refuses to repair a tarball before the check: should
	 * it ask all the same, say why nothing was done. */
	hu_error_set(&why, EROFS, t->l->path, "tarball layers are checked "
		     "read only");
	return fsck_done(t->r, -1, &why, t->e);
}

static int nomem(struct ft *t)
{
	return hu_error_set(t->e, ENOMEM, t->l->path, "out of memory");
}

/* ---- the layers beneath ------------------------------------------------------ */

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
		return nomem(t);
	if (!t->broot) {
		if (fsck_below(t->r)->n == 0)
			goto known;	/* nothing beneath: no directory */
		if (hu_vdir_open_root(fsck_below(t->r), &t->broot, t->e) < 0)
			return -1;
	}
	path = strdup(dir);
	if (!path)
		return nomem(t);
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

/* Does the view beneath have @name in directory @dir?  1, 0, or -1. */
static int below_has(struct ft *t, const char *dir, const char *name)
{
	struct hu_ventry ent;

	if (below_dir(t, dir) < 0)
		return -1;
	return t->bd ? hu_vdir_lookup(t->bd, name, &ent, t->e) : 0;
}

/* ---- the checks of one entry ------------------------------------------------ */

/* tarWhiteoutAndEntry: reported at the whiteout of @entry (a path of
 * the tarball, normalised), once per name (node @id). */
static int whiteout_and_entry(struct ft *t, uint32_t id, const char *entry)
{
	const char *slash = strrchr(entry, '/');
	char *dir, *wh;
	int rc;

	if (t->ix.nodes[id].flags & FT_WH_ENTRY_DONE)
		return 0;
	t->ix.nodes[id].flags |= FT_WH_ENTRY_DONE;
	dir = strndup(entry, slash ? (size_t)(slash - entry) : 0);
	wh = dir ? hu_oci_whiteout_path(dir, slash ? slash + 1 : entry) : NULL;
	free(dir);
	if (!wh)
		return nomem(t);
	rc = report(t, HU_PB_TAR_WHITEOUT_AND_ENTRY, wh, entry);
	free(wh);
	return rc;
}

/*
 * @path's directory and its node: every name on the way made present
 * (the tarball makes those directories), and a whiteout of the tarball
 * of one of them reported, unless the entry is a marker (@marker): a
 * directory holding only whiteouts is no entry (.wh.foo beside
 * foo/.wh.bar, as some tools write rm -rf foo/bar).  TI_NONE when out of
 * memory.
 */
static uint32_t parent_node(struct ft *t, const char *path, bool marker,
			    int *rc)
{
	uint32_t id = TI_ROOT;
	const char *s = path;

	*rc = 0;
	for (;;) {
		const char *end = strchr(s, '/');
		struct ti_node *nd;

		if (!end)
			return id;
		id = ti_child(&t->ix, id, s, (size_t)(end - s), true);
		if (id == TI_NONE) {
			*rc = nomem(t);
			return TI_NONE;
		}
		nd = &t->ix.nodes[id];
		if (marker) {
			s = end + 1;
			continue;
		}
		nd->flags |= FT_PARENT;
		if (nd->flags & FT_WHITED) {
			char *dir = strndup(path, (size_t)(end - path));

			*rc = dir ? whiteout_and_entry(t, id, dir) : nomem(t);
			free(dir);
			if (*rc < 0)
				return TI_NONE;
		}
		s = end + 1;
	}
}

static const char *type_name(struct archive_entry *ae)
{
	if (archive_entry_hardlink(ae))
		return "hard link";
	switch (archive_entry_filetype(ae)) {
	case AE_IFREG:
		return "file";
	case AE_IFDIR:
		return "directory";
	case AE_IFLNK:
		return "symlink";
	case AE_IFCHR:
	case AE_IFBLK:
		return "device";
	case AE_IFIFO:
		return "fifo";
	default:
		return "entry";
	}
}

static struct ft_meta entry_meta(struct archive_entry *ae)
{
	return (struct ft_meta){
		.mode = archive_entry_perm(ae) & 07777,
		.uid = archive_entry_uid(ae), .gid = archive_entry_gid(ae),
		.mtime = archive_entry_mtime(ae),
		.mtime_nsec = archive_entry_mtime_nsec(ae),
	};
}

/* The metadata of directory node @id: *@out is where they are kept. */
static int dir_meta(struct ft *t, uint32_t id, struct ft_meta **out)
{
	struct ti_dir *d = ti_dir(&t->ix, id);
	size_t i;

	if (!d)
		return nomem(t);
	i = t->ix.nodes[id].dir;
	if (i >= t->meta_cap) {
		size_t cap = t->meta_cap ? t->meta_cap * 2 : 64;
		struct ft_meta *m;

		while (cap <= i)
			cap *= 2;
		m = realloc(t->meta, cap * sizeof(*m));
		if (!m)
			return nomem(t);
		t->meta = m;
		t->meta_cap = cap;
	}
	*out = &t->meta[i];
	return 0;
}

/*
 * A path named again.  Readers keep different ones: docker, containerd,
 * umoci, GNU tar and hunion the later, go-containerregistry (crane
 * export, ko, kaniko's extraction) the first.  Nothing tells them apart
 * where a directory is restated with the same mode, owner and time (its
 * entries stay either way) or a whiteout or opaque marker is restated
 * (read by their names): those are not reported.
 */
static int check_duplicate(struct ft *t, uint32_t id, const char *path,
			   bool is_dir, bool marker)
{
	struct ti_node *nd = &t->ix.nodes[id];
	struct ft_meta now = entry_meta(t->ae), *was = NULL;
	char detail[80];

	if (is_dir && dir_meta(t, id, &was) < 0)
		return -1;
	if (!(nd->flags & FT_ENTRY)) {
		if (is_dir)
			*was = now;
		/* A directory the tarball made for earlier entries, then
		 * another type: they go where the later wins, stay where
		 * the first does. */
		if (!(nd->flags & FT_PARENT) || is_dir || marker)
			return 0;
		snprintf(detail, sizeof(detail), "the directory of earlier "
			 "entries, then a %s", type_name(t->ae));
		return report(t, HU_PB_TAR_DUPLICATE, path, detail);
	}
	if (marker)
		return 0;
	if (is_dir && (nd->flags & FT_DIR)) {
		if (was->mode == now.mode && was->uid == now.uid &&
		    was->gid == now.gid && was->mtime == now.mtime &&
		    was->mtime_nsec == now.mtime_nsec)
			return 0;
		*was = now;
		return report(t, HU_PB_TAR_DUPLICATE, path, "a directory "
			      "again, with another mode, owner or time");
	}
	if (is_dir)
		*was = now;
	snprintf(detail, sizeof(detail), nd->flags & FT_DIR ?
		 "a directory, then a %s" : "again, as a %s",
		 type_name(t->ae));
	return report(t, HU_PB_TAR_DUPLICATE, path, detail);
}

/* A hard link must name an entry seen before it, which is no directory
 * (the unpack refuses a link to a directory). */
static int check_link(struct ft *t, const char *path, const char *hl)
{
	const char *why, *odd;
	char *target, *detail;
	uint32_t id;
	bool is_root;
	int rc = 0;

	odd = hu_tar_path_unusual(hl, false);
	if (odd) {
		if (asprintf(&detail, "hard link to %s: %s", hl, odd) < 0)
			return nomem(t);
		rc = report(t, HU_PB_TAR_PATH_NOT_NORMAL, path, detail);
		free(detail);
		if (rc < 0)
			return -1;
	}
	target = hu_tar_path_norm(hl, &is_root, &why);
	if (!target)	/* the unpack refused it: the file changed */
		return ft_fail(t, 0, why);
	id = is_root ? TI_ROOT : ti_path(&t->ix, target, false);
	if (id == TI_NONE || !(t->ix.nodes[id].flags & FT_ENTRY))
		rc = report(t, HU_PB_TAR_LINK_FORWARD, path, target);
	free(target);
	return rc;
}

/* A whiteout of @hidden in @dir (node @parent): an entry of that name in
 * the tarball, an opaque marker beside it, nothing beneath to hide. */
static int check_whiteout(struct ft *t, const char *path, const char *dir,
			  uint32_t parent, uint32_t self, const char *hidden)
{
	uint32_t id = ti_child(&t->ix, parent, hidden, strlen(hidden), true);
	struct ti_node *nd;
	int rc = 0;

	if (id == TI_NONE)
		return nomem(t);
	nd = &t->ix.nodes[id];
	nd->flags |= FT_WHITED;
	if (nd->flags & (FT_ENTRY | FT_PARENT)) {
		char *entry = *dir ? hu_path_join(dir, hidden) :
			      strdup(hidden);

		rc = entry ? whiteout_and_entry(t, id, entry) : nomem(t);
		free(entry);
	}
	if (rc == 0 && (t->ix.nodes[parent].flags & FT_OPAQUE) &&
	    !(t->ix.nodes[self].flags & FT_REDUNDANT_DONE)) {
		t->ix.nodes[self].flags |= FT_REDUNDANT_DONE;
		rc = report(t, HU_PB_TAR_OPAQUE_REDUNDANT, path, NULL);
	}
	if (rc == 0) {
		rc = below_has(t, dir, hidden);
		if (rc == 0)
			rc = report(t, HU_PB_TAR_WHITEOUT_ORPHAN, path, NULL);
	}
	return rc < 0 ? -1 : 0;
}

/* The opaque marker in @dir (node @parent): the whiteouts seen beside it
 * so far hide nothing more (those after it: check_whiteout). */
static int check_opaque(struct ft *t, const char *dir, uint32_t parent)
{
	t->ix.nodes[parent].flags |= FT_OPAQUE;
	for (uint32_t c = t->ix.nodes[parent].child; c != TI_NONE;
	     c = t->ix.nodes[c].next) {
		struct ti_node *nd = &t->ix.nodes[c];
		char *path;
		int rc;

		if (!(nd->flags & FT_ENTRY) || !hu_oci_hidden(nd->name) ||
		    (nd->flags & FT_REDUNDANT_DONE))
			continue;
		nd->flags |= FT_REDUNDANT_DONE;
		path = *dir ? hu_path_join(dir, nd->name) : strdup(nd->name);
		if (!path)
			return nomem(t);
		rc = report(t, HU_PB_TAR_OPAQUE_REDUNDANT, path, NULL);
		free(path);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* Entry @path (normalised, not the root) in directory node @parent. */
static int check_named(struct ft *t, const char *path, uint32_t parent)
{
	const char *slash = strrchr(path, '/');
	const char *leaf = slash ? slash + 1 : path, *hidden;
	const char *hl = archive_entry_hardlink(t->ae);
	bool marker = hu_oci_hidden(leaf) || hu_oci_is_opaque(leaf);
	/* Markers are read by their names, whatever their type. */
	bool is_dir = !marker && !hl &&
		      archive_entry_filetype(t->ae) == AE_IFDIR;
	uint32_t id = ti_child(&t->ix, parent, leaf, strlen(leaf), true);
	struct ti_node *nd;
	char *dir;
	bool again;
	int rc;

	if (id == TI_NONE)
		return nomem(t);
	nd = &t->ix.nodes[id];
	again = nd->flags & FT_ENTRY;
	if (check_duplicate(t, id, path, is_dir, marker) < 0)
		return -1;
	if (hl && !marker && check_link(t, path, hl) < 0)
		return -1;
	nd = &t->ix.nodes[id];
	nd->flags = (uint8_t)((nd->flags & ~FT_DIR) | FT_ENTRY |
			      (is_dir ? FT_DIR : 0));
	if (!marker && (nd->flags & FT_WHITED) &&
	    whiteout_and_entry(t, id, path) < 0)
		return -1;
	if (!marker || again)
		return 0;
	dir = strndup(path, slash ? (size_t)(slash - path) : 0);
	if (!dir)
		return nomem(t);
	hidden = hu_oci_hidden(leaf);
	rc = hidden ? check_whiteout(t, path, dir, parent, id, hidden) :
	     check_opaque(t, dir, parent);
	free(dir);
	return rc;
}

/* "./", "." or "/": the root directory (the unpack refuses any other
 * type there), restated or not. */
static int check_root(struct ft *t)
{
	if (check_duplicate(t, TI_ROOT, "", true, false) < 0)
		return -1;
	t->ix.nodes[TI_ROOT].flags |= FT_ENTRY | FT_DIR;
	return 0;
}

static int check_entry(struct ft *t)
{
	const char *why, *odd, *hl;
	char *path, *detail;
	uint32_t parent;
	bool is_root, is_dir;
	int rc;

	t->raw = archive_entry_pathname(t->ae);
	if (!t->raw)
		return ft_fail(t, 0, "an entry's name cannot be read");
	path = hu_tar_path_norm(t->raw, &is_root, &why);
	if (!path)	/* the unpack refused it: the file changed */
		return ft_fail(t, 0, why);
	hl = archive_entry_hardlink(t->ae);
	is_dir = !hl && archive_entry_filetype(t->ae) == AE_IFDIR;
	odd = hu_tar_path_unusual(t->raw, is_dir);
	rc = 0;
	if (odd) {
		detail = NULL;
		rc = asprintf(&detail, "%s: %s", t->raw, odd) < 0 ? nomem(t) :
		     report(t, HU_PB_TAR_PATH_NOT_NORMAL, path, detail);
		free(detail);
	}
	if (rc == 0 && is_root) {
		rc = check_root(t);
	} else if (rc == 0) {
		const char *slash = strrchr(path, '/');
		const char *leaf = slash ? slash + 1 : path;

		parent = parent_node(t, path, hu_oci_hidden(leaf) ||
				     hu_oci_is_opaque(leaf), &rc);
		if (parent != TI_NONE)
			rc = check_named(t, path, parent);
	}
	free(path);
	return rc < 0 ? -1 : 0;
}

/* ---- the tarball ----------------------------------------------------------- */

static int check_entries(struct ft *t)
{
	for (;;) {
		int r;

		if (hu_interrupt_check(t->e) < 0)
			return -1;
		t->raw = NULL;
		r = archive_read_next_header(t->a, &t->ae);
		if (r == ARCHIVE_EOF)
			return tar_src_archive_end(t->src, t->a) < 0 ?
			       ft_archive_fail(t) : 0;
		if (r < ARCHIVE_WARN)
			return ft_archive_fail(t);
		fsck_entry_checked(t->r);
		if (check_entry(t) < 0)
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
	int fd = open(t->l->path, O_RDONLY | O_CLOEXEC);

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

	fd = open_again(&t);
	if (fd < 0)
		return -1;
	t.src = tar_src_open(fd);
	t.a = archive_read_new();
	if (!t.src || !t.a || ti_init(&t.ix) < 0) {
		nomem(&t);
		goto out;
	}
	if (tar_src_archive_open(t.src, t.a) != ARCHIVE_OK) {
		ft_archive_fail(&t);
		goto out;
	}
	rc = check_entries(&t);
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
