/* SPDX-License-Identifier: MIT */
/*
 * The checks of one tarball entry (fsck_tar.c reads them): against the
 * index of the paths the entries before it named (duplicates, a whiteout
 * and an entry of one name, whiteouts beside an opaque marker, hard
 * links to what is not there yet), its name as written (the normal
 * form), and for a whiteout the layers beneath (does it hide anything).
 * The rules, and which OCI reader does what, are hunion-fsck(8)'s.
 */
#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsck/fsck_tar.h"
#include "internal.h"
#include "tar/archive_dl.h"

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
		return ft_nomem(t);
	rc = ft_report(t, HU_PB_TAR_WHITEOUT_AND_ENTRY, wh, entry);
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
			*rc = ft_nomem(t);
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

			*rc = dir ? whiteout_and_entry(t, id, dir) :
			      ft_nomem(t);
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
		return ft_nomem(t);
	i = t->ix.nodes[id].dir;
	if (i >= t->meta_cap) {
		size_t cap = t->meta_cap ? t->meta_cap * 2 : 64;
		struct ft_meta *m;

		while (cap <= i)
			cap *= 2;
		m = realloc(t->meta, cap * sizeof(*m));
		if (!m)
			return ft_nomem(t);
		t->meta = m;
		t->meta_cap = cap;
	}
	*out = &t->meta[i];
	return 0;
}

/*
 * A path named again.  Readers keep different ones: docker, containerd,
 * umoci, GNU tar and hunion the later, go-containerregistry (crane
 * export, crane flatten) the first.  Nothing tells them apart
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
		return ft_report(t, HU_PB_TAR_DUPLICATE, path, detail);
	}
	if (marker)
		return 0;
	if (is_dir && (nd->flags & FT_DIR)) {
		if (was->mode == now.mode && was->uid == now.uid &&
		    was->gid == now.gid && was->mtime == now.mtime &&
		    was->mtime_nsec == now.mtime_nsec)
			return 0;
		*was = now;
		return ft_report(t, HU_PB_TAR_DUPLICATE, path, "a directory "
			      "again, with another mode, owner or time");
	}
	if (is_dir)
		*was = now;
	snprintf(detail, sizeof(detail), nd->flags & FT_DIR ?
		 "a directory, then a %s" : "again, as a %s",
		 type_name(t->ae));
	return ft_report(t, HU_PB_TAR_DUPLICATE, path, detail);
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
			return ft_nomem(t);
		rc = ft_report(t, HU_PB_TAR_PATH_NOT_NORMAL, path, detail);
		free(detail);
		if (rc < 0)
			return -1;
	}
	target = hu_tar_path_norm(hl, &is_root, &why);
	if (!target)	/* the unpack refused it: the file changed */
		return ft_fail(t, 0, why);
	id = is_root ? TI_ROOT : ti_path(&t->ix, target, false);
	if (id == TI_NONE || !(t->ix.nodes[id].flags & FT_ENTRY))
		rc = ft_report(t, HU_PB_TAR_LINK_FORWARD, path, target);
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
		return ft_nomem(t);
	nd = &t->ix.nodes[id];
	nd->flags |= FT_WHITED;
	if (nd->flags & (FT_ENTRY | FT_PARENT)) {
		char *entry = *dir ? hu_path_join(dir, hidden) :
			      strdup(hidden);

		rc = entry ? whiteout_and_entry(t, id, entry) : ft_nomem(t);
		free(entry);
	}
	if (rc == 0 && (t->ix.nodes[parent].flags & FT_OPAQUE) &&
	    !(t->ix.nodes[self].flags & FT_REDUNDANT_DONE)) {
		t->ix.nodes[self].flags |= FT_REDUNDANT_DONE;
		rc = ft_report(t, HU_PB_TAR_OPAQUE_REDUNDANT, path, NULL);
	}
	if (rc == 0) {
		rc = ft_below_has(t, dir, hidden);
		if (rc == 0)
			rc = ft_report(t, HU_PB_TAR_WHITEOUT_ORPHAN, path,
				       NULL);
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
			return ft_nomem(t);
		rc = ft_report(t, HU_PB_TAR_OPAQUE_REDUNDANT, path, NULL);
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
		return ft_nomem(t);
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
		return ft_nomem(t);
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

int ft_check_entry(struct ft *t)
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
		rc = asprintf(&detail, "%s: %s", t->raw, odd) < 0 ?
		     ft_nomem(t) :
		     ft_report(t, HU_PB_TAR_PATH_NOT_NORMAL, path, detail);
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
