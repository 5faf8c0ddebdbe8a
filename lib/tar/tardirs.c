/* SPDX-License-Identifier: MIT */
/*
 * The directories of a tarball layer: reaching an entry's parent (made
 * when no entry named it), one component at a time and never through a
 * symlink; and, once every entry is written, each directory's mode and
 * times, deepest first, in one walk of the index.  A directory no entry
 * named stands for the one of the same path beneath: it takes its owner,
 * mode, times and xattrs from the view of the layers below.  Where there
 * is none (or this tarball hides it) and it holds only markers, it goes:
 * a whiteout removes, it never makes a directory (hunion-layers(7)).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "internal.h"
#include "layer/ldir.h"
#include "tar/tarlayer.h"

static char no_memory[] = "";

char *tl_escape(const char *s)
{
	size_t n = 0, size = strlen(s) * 4 + 1;	/* "\xNN" at most */
	char *out = malloc(size);

	if (!out)
		return no_memory;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c < 0x20 || c == 0x7f || c == '\\')
			n += (size_t)snprintf(out + n, size - n, "\\x%02x", c);
		else
			out[n++] = (char)c;
	}
	out[n] = '\0';
	return out;
}

void tl_escape_free(char *esc)
{
	if (esc != no_memory)
		free(esc);
}

/* ---- reaching a directory ------------------------------------------------- */

void tl_drop_cache(struct tl *t)
{
	if (t->cfd >= 0)
		close(t->cfd);
	t->cfd = -1;
	free(t->cpath);
	t->cpath = NULL;
}

/* Make directory @name in @fd, node @parent, as a parent of the current
 * entry that no entry has named (yet). */
static int make_parent(struct tl *t, int fd, const char *name,
		       uint32_t parent)
{
	uint32_t id;
	struct ti_dir *d;

	id = ti_child(&t->ix, parent, name, strlen(name), true);
	if (id != TI_NONE && (t->ix.nodes[id].flags & TI_BELOW_GONE))
		return tl_fall_back(t);
	if (hu_wr_mkdirat(fd, name, 0700) < 0)
		return tl_write_fail(t, errno, "create a parent directory");
	/* (over the layers beneath, a setgid directory of theirs would give
	 * it its group) */
	if (t->over && t->as_root &&
	    hu_wr_fchownat(fd, name, geteuid(), getegid(),
			   AT_SYMLINK_NOFOLLOW) < 0)
		return tl_write_fail(t, errno, "set owner");
	d = id != TI_NONE ? ti_dir(&t->ix, id) : NULL;
	if (!d)
		return tl_fail(t, ENOMEM, "out of memory");
	t->ix.nodes[id].flags = TI_DIR | (t->ix.nodes[id].flags & TI_STASHED);
	*d = (struct ti_dir){ .node = id, .mode = 0755,
			      .times = { t->times[0], t->times[1] } };
	return 0;
}

/* Why component @name of @fd, the end of @prefix (@plen bytes of a
 * path), is no directory. */
static int through_fail(struct tl *t, int fd, const char *name,
			const char *prefix, size_t plen, int err)
{
	char *p = strndup(prefix, plen), *esc;
	struct stat st;
	const char *what = NULL;

	esc = tl_escape(p ? p : name);
	free(p);
	if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		what = S_ISLNK(st.st_mode) ? "a symlink" :
		       !S_ISDIR(st.st_mode) ? "a non-directory" : NULL;
	if (what)
		tl_fail(t, 0, "path passes through %s: %s", what, esc);
	else
		tl_fail(t, err, "cannot open directory %s", esc);
	tl_escape_free(esc);
	return -1;
}

bool tl_live(const struct tar_index *x, uint32_t id)
{
	return id != TI_NONE && !(x->nodes[id].flags & TI_GONE);
}

int tl_fall_back(struct tl *t)
{
	t->fallback = true;
	return tl_fail(t, 0, "a directory beneath replaced, then made again: "
		       "not streamed");
}

/*
 * Directory @name (open at @fd) of node @parent was there before this
 * tarball: the layers beneath's.  It is this tarball's too from now on,
 * as a parent no entry names, which keeps the mode and times it had
 * unless the tarball hides it (over_push).
 */
static int pass_below(struct tl *t, int fd, const char *name,
		      uint32_t parent)
{
	uint32_t id = ti_child(&t->ix, parent, name, strlen(name), true);
	struct ti_dir *d = id != TI_NONE ? ti_dir(&t->ix, id) : NULL;
	struct stat st;

	if (!d)
		return tl_fail(t, ENOMEM, "out of memory");
	if (fstat(fd, &st) < 0)
		return tl_fail(t, errno, "cannot stat the directory beneath");
	t->ix.nodes[id].flags = TI_DIR | TI_BELOW |
				(t->ix.nodes[id].flags & TI_BELOW_GONE);
	*d = (struct ti_dir){ .node = id, .mode = 0755,
			      .times = { t->times[0], t->times[1] },
			      .below_mode = st.st_mode & 07777,
			      .below_times = { st.st_atim, st.st_mtim } };
	return 0;
}

int tl_clear_xattrs(struct tl *t, int dfd, const char *leaf)
{
	char *list;
	ssize_t len;

	if (hu_llistxattr_at(dfd, leaf, &list, &len) < 0)
		return tl_write_fail(t, errno, "list xattrs");
	for (ssize_t i = 0; i < len; i += (ssize_t)strlen(list + i) + 1) {
		if (hu_wr_removexattr_at(dfd, leaf, list + i) < 0 &&
		    errno != ENODATA) {
			free(list);
			return tl_write_fail(t, errno, "remove xattr");
		}
	}
	free(list);
	return 0;
}

/*
 * The non-directory @name of @fd (node @parent) is the layers beneath's,
 * and a parent this tarball names nowhere goes in its place.  Should the
 * parent go at the end (it holds markers only: tardirs.c, drop_if_idle),
 * the view shows what was there: it waits in the stash till then.
 */
static int stash_below(struct tl *t, int fd, const char *name,
		       uint32_t parent)
{
	uint32_t id = ti_child(&t->ix, parent, name, strlen(name), true);
	char num[16];

	if (id == TI_NONE)
		return tl_fail(t, ENOMEM, "out of memory");
	while (t->stash < 0) {
		unsigned char rnd[8];

		if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
			return tl_fail(t, errno, "cannot name a directory");
		snprintf(t->stash_name, sizeof(t->stash_name),
			 ".wh..wh.hunion-%02x%02x%02x%02x%02x%02x%02x%02x",
			 rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5],
			 rnd[6], rnd[7]);
		if (hu_wr_mkdirat(t->root, t->stash_name, 0700) < 0) {
			if (errno == EEXIST)
				continue;
			return tl_write_fail(t, errno, "create a directory");
		}
		t->stash = openat(t->root, t->stash_name, O_RDONLY |
				  O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (t->stash < 0)
			return tl_fail(t, errno, "cannot open a directory");
	}
	snprintf(num, sizeof(num), "%" PRIu32, id);
	if (hu_wr_renameat2(fd, name, t->stash, num, 0) < 0)
		return tl_write_fail(t, errno, "move what lies beneath");
	t->ix.nodes[id].flags |= TI_STASHED;
	return 0;
}

int tl_over_start(struct tl *t)
{
	struct ti_dir *d = &t->ix.dirs[t->ix.nodes[TI_ROOT].dir];
	struct stat st;

	if (fstat(t->root, &st) < 0)
		return tl_fail(t, errno, "cannot stat the output");
	t->ix.nodes[TI_ROOT].flags |= TI_BELOW;
	d->below_mode = st.st_mode & 07777;
	d->below_times[0] = st.st_atim;
	d->below_times[1] = st.st_mtim;
	return 0;
}

/*
 * Open directory @dir of the layer, walking the components from byte
 * @skip on, where @from (node @node) already is.  With @make, missing
 * directories are made as parents.  Returns an fd the caller closes and
 * the node in *@out; -1 with the error set, or with @quiet, when a
 * component is missing or no directory, -1 with errno ENOENT alone.
 */
static int walk_dir(struct tl *t, const char *dir, size_t skip, int from,
		    uint32_t node, bool make, bool quiet, uint32_t *out)
{
	char comp[NAME_MAX + 1];
	const char *s = dir + skip;
	int fd = fcntl(from, F_DUPFD_CLOEXEC, 0);

	if (fd < 0)
		return tl_fail(t, errno, "cannot open a directory");
	while (*s) {
		size_t len = strchrnul(s, '/') - s;
		int next, err;

		if (len > NAME_MAX) {
			/* No directory has such a name: none can be made. */
			through_fail(t, fd, "", dir, (s - dir) + len,
				     ENAMETOOLONG);
			goto fail;
		}
		memcpy(comp, s, len);
		comp[len] = '\0';
		next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			      O_CLOEXEC);
		if (make && t->over &&
		    !tl_live(&t->ix, ti_child(&t->ix, node, comp, len, false))) {
			/* not this tarball's: the layers beneath's */
			if (next >= 0 && pass_below(t, next, comp, node) < 0) {
				close(next);
				goto fail;
			}
			if (next < 0 && (errno == ENOTDIR || errno == ELOOP)) {
				if (stash_below(t, fd, comp, node) < 0)
					goto fail;
				errno = ENOENT;
			}
		}
		if (next < 0 && errno == ENOENT && make) {
			if (make_parent(t, fd, comp, node) < 0)
				goto fail;
			next = openat(fd, comp, O_RDONLY | O_DIRECTORY |
				      O_NOFOLLOW | O_CLOEXEC);
		}
		err = errno;
		if (next < 0 && quiet && (err == ENOENT || err == ENOTDIR ||
					  err == ELOOP)) {
			close(fd);
			errno = ENOENT;
			return -1;
		}
		if (next < 0) {
			through_fail(t, fd, comp, dir, (s - dir) + len, err);
			goto fail;
		}
		close(fd);
		fd = next;
		if (node != TI_NONE)
			node = ti_child(&t->ix, node, comp, len, make);
		s += len + (s[len] == '/');
	}
	if (out)
		*out = node;
	return fd;
fail:
	close(fd);
	return -1;
}

int tl_open_dir(struct tl *t, const char *dir)
{
	return walk_dir(t, dir, 0, t->root, TI_NONE, false, true, NULL);
}

int tl_parent_dir(struct tl *t, const char *dir, uint32_t *node)
{
	size_t clen = t->cpath ? strlen(t->cpath) : 0;
	int fd;

	if (t->cpath && strcmp(t->cpath, dir) == 0) {
		*node = t->cnode;
		return t->cfd;
	}
	/* Entries come grouped by directory, parents first: go on from the
	 * last parent when it lies above this one. */
	if (t->cpath && (!clen || (!strncmp(t->cpath, dir, clen) &&
				   dir[clen] == '/')))
		fd = walk_dir(t, dir, clen + (clen > 0), t->cfd, t->cnode,
			      true, false, node);
	else
		fd = walk_dir(t, dir, 0, t->root, TI_ROOT, true, false, node);
	if (fd < 0)
		return -1;
	tl_drop_cache(t);
	t->cpath = strdup(dir);
	if (!t->cpath) {
		close(fd);
		return tl_fail(t, ENOMEM, "out of memory");
	}
	t->cfd = fd;
	t->cnode = *node;
	if (*node == TI_NONE) {
		tl_drop_cache(t);
		return tl_fail(t, ENOMEM, "out of memory");
	}
	return fd;
}

/* ---- the end: modes, times, and what lies beneath ---------------------- */

enum { V_UNKNOWN = 0, V_OPEN, V_ABSENT };

/* One directory on the walk's current path. */
struct frame {
	uint32_t node;
	uint32_t next;		/* the next child node to look at */
	int fd;
	int vstate;
	struct hu_vdir *vd;	/* V_OPEN: the same directory beneath */
	/* Over the layers beneath (tl.over): this tarball hides the
	 * directory beneath (a whiteout of its name, or a parent's entries
	 * beneath hidden), and hides the entries beneath (so, or it holds
	 * the opaque marker). */
	bool hidden, cut;
};

struct dwalk {
	struct tl *t;
	struct frame *f;
	size_t n, cap;
};

static int node_fail(struct tl *t, uint32_t node, int err, const char *what)
{
	char *p = ti_name_path(&t->ix, node);

	tl_fail_at(t, p && *p ? p : ".", err, "%s", what);
	free(p);
	return -1;
}

static int ent_cmp(const void *key, const void *ent)
{
	return strcmp(key, ((const struct hu_ventry *)ent)->name);
}

/* Does this tarball hide what lies beneath directory @k: a whiteout of
 * its name, or the opaque marker, in its parent?  (Markers are made as
 * files, whatever their entries' types.)  1 yes, 0 no, -1 error. */
static int hidden_here(struct dwalk *w, size_t k)
{
	const char *name = w->t->ix.nodes[w->f[k].node].name;
	int pfd = w->f[k - 1].fd;
	char wh[NAME_MAX + 1];
	struct stat st;

	if (fstatat(pfd, HU_OCI_OPAQUE, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return 1;
	if (errno != ENOENT)
		return node_fail(w->t, w->f[k - 1].node, errno, "cannot stat "
				 "the opaque marker");
	if (!hu_oci_whiteout_name(wh, sizeof(wh), name))
		return 0;	/* no such whiteout can be made */
	if (fstatat(pfd, wh, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return 1;
	if (errno != ENOENT)
		return node_fail(w->t, w->f[k].node, errno, "cannot stat its "
				 "whiteout");
	return 0;
}

/* The directory of the view beneath at frame @k, looked up once: *@vd is
 * NULL when the layers beneath have no such directory, or this tarball
 * hides it. */
static int below_vdir(struct dwalk *w, size_t k, struct hu_vdir **vd)
{
	struct frame *f = &w->f[k];
	const struct hu_ventry *ents, *ent;
	struct hu_vdir *parent;
	size_t n;
	int hidden;

	*vd = NULL;
	if (f->vstate != V_UNKNOWN) {
		*vd = f->vd;
		return 0;
	}
	f->vstate = V_ABSENT;
	if (k == 0) {
		if (hu_vdir_open_root(w->t->below, &f->vd, w->t->e) < 0)
			return -1;
		f->vstate = V_OPEN;
		*vd = f->vd;
		return 0;
	}
	if (below_vdir(w, k - 1, &parent) < 0)
		return -1;
	if (!parent)
		return 0;
	hidden = hidden_here(w, k);
	if (hidden != 0)
		return hidden < 0 ? -1 : 0;
	if (hu_vdir_list(parent, &ents, &n, w->t->e) < 0)
		return -1;
	ent = bsearch(w->t->ix.nodes[f->node].name, ents, n, sizeof(*ents),
		      ent_cmp);
	if (!ent || !S_ISDIR(ent->st.st_mode))
		return 0;
	if (hu_vdir_open_child(parent, ent, &f->vd, w->t->e) < 0)
		return -1;
	f->vstate = V_OPEN;
	*vd = f->vd;
	return 0;
}

/* Directory @k, which no entry named, takes the metadata of the same
 * directory beneath. */
static int imply_from_below(struct dwalk *w, size_t k, struct ti_dir *d)
{
	struct tl *t = w->t;
	const struct hu_layer *bl;
	struct hu_vdir *vd;
	struct stat st;
	size_t layer;
	int bfd;

	if (below_vdir(w, k, &vd) < 0)
		return -1;
	if (!vd)
		return 0;
	bfd = hu_vdir_fd(vd, &layer);
	bl = &t->below->layers[layer];
	if (hu_ldir_stat(bl, bfd, NULL, &st) < 0)
		return node_fail(t, w->f[k].node, errno,
				 "cannot stat the directory beneath");
	if (t->as_root && hu_wr_fchownat(w->f[k].fd, "", st.st_uid,
					 st.st_gid, AT_EMPTY_PATH) < 0)
		return node_fail(t, w->f[k].node, errno, "cannot set owner");
	if (hu_ldir_copy_xattrs(bl, bfd, w->f[k].fd, t->e) < 0)
		return -1;
	d->mode = st.st_mode & 07777;
	d->times[0] = st.st_atim;
	d->times[1] = st.st_mtim;
	return 0;
}

/* Is @name in directory node @dir there, made by this tarball? */
static bool made_here(const struct tar_index *x, uint32_t dir,
		      const char *name)
{
	return tl_live(x, ti_child((struct tar_index *)x, dir, name,
				   strlen(name), false));
}

/* Remove from frame @f what this tarball hides of the layers beneath:
 * each entry it did not make, when they are all hidden; else the names
 * its whiteouts hide. */
static int remove_hidden(struct dwalk *w, struct frame *f)
{
	struct tl *t = w->t;
	const struct tar_index *x = &t->ix;
	struct hu_names names;
	int rc = 0;

	if (!f->cut) {
		for (uint32_t id = x->nodes[f->node].child; id != TI_NONE;
		     id = x->nodes[id].next) {
			const char *hid = hu_oci_hidden(x->nodes[id].name);

			if (!hid || !tl_live(x, id) || made_here(x, f->node, hid))
				continue;
			if (*hid && strcmp(hid, ".") && strcmp(hid, "..") &&
			    hu_rmtree(f->fd, hid) < 0)
				return node_fail(t, f->node, errno, "cannot "
						 "remove what a whiteout hides");
		}
		return 0;
	}
	if (hu_names_read(f->fd, &names, NULL, NULL) < 0)
		return node_fail(t, f->node, errno, "cannot list directory");
	for (size_t i = 0; i < names.n && rc == 0; i++)
		if (!made_here(x, f->node, names.v[i].name) &&
		    !(f->node == TI_ROOT && t->stash >= 0 &&
		      !strcmp(names.v[i].name, t->stash_name)) &&
		    hu_rmtree(f->fd, names.v[i].name) < 0)
			rc = node_fail(t, f->node, errno, "cannot remove what "
				       "the opaque directory hides");
	hu_names_free(&names);
	return rc;
}

/*
 * The top frame, over the layers beneath (tl.over): what the tarball
 * hides of the directory beneath goes, and a directory no entry named
 * keeps the mode and times of the one beneath, as the view would show
 * it, or, when it hides that one, is a parent made for its entries.
 */
static int over_push(struct dwalk *w)
{
	struct tl *t = w->t;
	size_t k = w->n - 1;
	struct frame *f = &w->f[k];
	const struct ti_node *nd = &t->ix.nodes[f->node];
	struct ti_dir *d = &t->ix.dirs[nd->dir];
	char wh[NAME_MAX + 1];

	if (k > 0)
		f->hidden = w->f[k - 1].cut ||
			    (hu_oci_whiteout_name(wh, sizeof(wh), nd->name) &&
			     made_here(&t->ix, w->f[k - 1].node, wh));
	f->cut = f->hidden || made_here(&t->ix, f->node, HU_OCI_OPAQUE);
	if (!(nd->flags & TI_BELOW))
		return 0;
	if (remove_hidden(w, f) < 0)
		return -1;
	if (d->explicit_)
		return 0;
	if (!f->hidden) {
		d->mode = d->below_mode;
		d->times[0] = d->below_times[0];
		d->times[1] = d->below_times[1];
		return 0;
	}
	if (t->as_root && hu_wr_fchownat(f->fd, "", geteuid(), getegid(),
					 AT_EMPTY_PATH) < 0)
		return node_fail(t, f->node, errno, "cannot set owner");
	return tl_clear_xattrs(t, f->fd, NULL);
}

static int push(struct dwalk *w, uint32_t node, int fd)
{
	struct ti_dir *d = &w->t->ix.dirs[w->t->ix.nodes[node].dir];

	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;
		struct frame *f = realloc(w->f, cap * sizeof(*f));

		if (!f) {
			close(fd);
			return tl_fail(w->t, ENOMEM, "out of memory");
		}
		w->f = f;
		w->cap = cap;
	}
	w->f[w->n++] = (struct frame){ .node = node, .fd = fd,
		.next = w->t->ix.nodes[node].child };
	if (w->t->over)
		return over_push(w);
	if (d->explicit_ || !w->t->below || !w->t->below->n)
		return 0;
	return imply_from_below(w, w->n - 1, d);
}

static void pop(struct dwalk *w)
{
	struct frame *f = &w->f[--w->n];

	close(f->fd);
	if (f->vstate == V_OPEN)
		hu_vdir_close(f->vd);
}

/* The next child of the top frame that is a live directory, or TI_NONE. */
static uint32_t next_dir(struct dwalk *w)
{
	struct frame *f = &w->f[w->n - 1];
	const struct tar_index *x = &w->t->ix;

	while (f->next != TI_NONE) {
		uint32_t id = f->next;
		const struct ti_node *nd = &x->nodes[id];

		f->next = nd->next;
		if ((nd->flags & TI_DIR) && !(nd->flags & TI_GONE) &&
		    nd->dir != TI_NONE && !x->dirs[nd->dir].gone)
			return id;
	}
	return TI_NONE;
}

/* What the layers beneath had at node @id back in its parent @pfd. */
static int unstash(struct tl *t, uint32_t id, int pfd)
{
	char num[16];

	snprintf(num, sizeof(num), "%" PRIu32, id);
	if (hu_wr_renameat2(t->stash, num, pfd, t->ix.nodes[id].name, 0) < 0)
		return node_fail(t, id, errno, "cannot move back what lies "
				 "beneath");
	return 0;
}

/* The stash goes, with what the parents made in their places hide. */
static int drop_stash(struct tl *t)
{
	if (t->stash < 0)
		return 0;
	close(t->stash);
	t->stash = -1;
	if (hu_rmtree(t->root, t->stash_name) < 0)
		return tl_fail(t, errno, "cannot remove %s", t->stash_name);
	return 0;
}

/* The top frame is a directory no entry named.  Holding nothing (its
 * subdirectories gone), it goes (1); holding markers only, it goes unless
 * it stands for a directory beneath: a whiteout or an opaque marker
 * removes what lies beneath, and there is nothing to remove.  0 when it
 * stays. */
static int drop_if_idle(struct dwalk *w)
{
	struct tl *t = w->t;
	size_t k = w->n - 1;
	struct frame *f = &w->f[k];
	struct ti_node *nd = &t->ix.nodes[f->node];
	struct hu_names names;
	struct hu_vdir *vd = NULL;
	bool entries = false, markers;

	if (hu_names_read(f->fd, &names, NULL, NULL) < 0)
		return node_fail(t, f->node, errno, "cannot list directory");
	markers = names.n > 0;
	for (size_t i = 0; i < names.n && !entries; i++)
		entries = !hu_oci_is_marker(names.v[i].name);
	hu_names_free(&names);
	if (entries)
		return 0;
	/* (over the layers beneath: the directory beneath is here) */
	if (t->over && (nd->flags & TI_BELOW) && !f->hidden)
		return 0;
	if (!t->over && markers && t->below->n && below_vdir(w, k, &vd) < 0)
		return -1;
	if (vd)
		return 0;
	if (hu_rmtree(w->f[k - 1].fd, nd->name) < 0)
		return node_fail(t, f->node, errno, "cannot remove directory");
	if ((nd->flags & TI_STASHED) && !f->hidden &&
	    unstash(t, f->node, w->f[k - 1].fd) < 0)
		return -1;
	nd->flags |= TI_GONE;
	t->ix.dirs[nd->dir].gone = true;
	return 1;
}

/*
 * An output (merge -o) shows what the view of the tarball alone shows:
 * none of the markers (.wh.*) made in the top frame's directory, which
 * were kept until now for the lookups above and for hard links to them.
 * Each name made has a node, so the index lists them all.
 */
static int drop_markers(struct dwalk *w)
{
	struct frame *f = &w->f[w->n - 1];
	const struct tar_index *x = &w->t->ix;

	for (uint32_t id = x->nodes[f->node].child; id != TI_NONE;
	     id = x->nodes[id].next) {
		const char *name = x->nodes[id].name;

		if (!hu_oci_is_marker(name) ||
		    (x->nodes[id].flags & TI_GONE))
			continue;
		if (hu_wr_unlinkat(f->fd, name, 0) == 0 || errno == ENOENT)
			continue;
		/* (a .wh..wh.* directory, kept as it came) */
		if (errno != EISDIR || hu_rmtree(f->fd, name) < 0)
			return node_fail(w->t, id, errno,
					 "cannot remove the marker");
	}
	return 0;
}

static int walk_dirs(struct dwalk *w)
{
	struct tl *t = w->t;
	int fd = fcntl(t->root, F_DUPFD_CLOEXEC, 0);

	if (fd < 0)
		return tl_fail(t, errno, "cannot open the layer's root");
	if (push(w, TI_ROOT, fd) < 0)
		return -1;
	while (w->n) {
		struct frame *f = &w->f[w->n - 1];
		uint32_t id = next_dir(w);
		struct ti_dir *d;

		if (id != TI_NONE) {
			fd = openat(f->fd, t->ix.nodes[id].name, O_RDONLY |
				    O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (fd >= 0) {
				if (push(w, id, fd) < 0)
					return -1;
			} else if (errno != ENOENT && errno != ENOTDIR &&
				   errno != ELOOP) {
				/* (those: gone with a directory replaced) */
				return node_fail(t, id, errno,
						 "cannot open directory");
			}
			continue;
		}
		d = &t->ix.dirs[t->ix.nodes[f->node].dir];
		/* Alone (no layers beneath known), a layer keeps them all:
		 * what they hide is for the stack it goes into to say. */
		if (!d->explicit_ && w->n > 1 && t->below) {
			int r = drop_if_idle(w);

			if (r != 0) {
				if (r < 0)
					return -1;
				pop(w);
				continue;
			}
		}
		if (t->to_output && drop_markers(w) < 0)
			return -1;
		if (w->n == 1 && drop_stash(t) < 0)
			return -1;
		if (hu_wr_fchmod(f->fd, d->mode) < 0 ||
		    hu_wr_futimens(f->fd, d->times) < 0)
			return node_fail(t, f->node, errno,
					 "cannot set mode and times");
		pop(w);
	}
	return 0;
}

int tl_finish_dirs(struct tl *t)
{
	struct dwalk w = { .t = t };
	int rc = walk_dirs(&w);

	while (w.n)
		pop(&w);
	free(w.f);
	return rc;
}
