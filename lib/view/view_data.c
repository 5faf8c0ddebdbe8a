/* SPDX-License-Identifier: MIT */
/*
 * The view's file data: an overlay metacopy file takes its bytes from the
 * file of the same path (or its redirect) further down; and the data of
 * the next files of a directory opened ahead of their readers.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "layer/ldir.h"
#include "view/view.h"

/* Close the prefetched fds not handed out. */
void view_prefetch_drop(struct hu_vdir *d)
{
	for (size_t i = 0; i < d->npre; i++)
		if (d->pre[i].fd >= 0)
			close(d->pre[i].fd);
	d->npre = 0;
}

static int is_metacopy(const struct hu_layer *l, int fd, bool *mc,
		       struct hu_error *e)
{
	char attr[64];

	*mc = false;
	for (int i = 0; i < 2 && !*mc; i++) {
		if (!hu_layer_overlay_xattr(l, i, "metacopy", attr,
					    sizeof(attr)))
			continue;
		if (fgetxattr(fd, attr, NULL, 0) >= 0)
			*mc = true;
		else if (errno != ENODATA && errno != ENOTSUP)
			return hu_error_set(e, errno, NULL, "cannot read %s",
					    attr);
	}
	return 0;
}

/*
 * Metacopy file @ent has no data to open (@err, @msg as it always said):
 * report it, unless @quiet, and fail either way.  With a FAIL sink the
 * error names the problem.
 */
static int no_data(struct hu_vdir *d, const struct hu_ventry *ent,
		   bool quiet, int err, const char *msg, const char *detail,
		   struct hu_error *e)
{
	const struct vlayer *v = view_vlayer_of(d, ent->layer);

	if (!quiet && d->s->layers[ent->layer].problems &&
	    view_problem(d->s, ent->layer, HU_PB_METACOPY_NO_DATA, true,
			 v ? view_layer_path(d, v) : d->path, ent->name,
			 detail, err, e) < 0)
		return view_fail(d, ent->layer, e);
	hu_error_set(e, err, ent->name, "%s", msg);
	return view_fail(d, ent->layer, e);
}

/*
 * The data of a metacopy file: look its name (or its redirect) up in the
 * layers below, through further metacopy files, to a regular file.
 * @quiet: report no problem (data opened ahead, to be opened again).
 */
static int find_data(struct hu_vdir *d, const struct hu_ventry *ent, int fd,
		     bool quiet, struct hu_error *e)
{
	const struct hu_stack *s = d->s;
	struct lookup lk = { .path = strdup(ent->name) };
	char *r = NULL;
	size_t from = ent->layer;

	if (!lk.path)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (;;) {
		/* @fd is the file at lk.path in layer @from, from its root
		 * or from @d's directory there */
		const struct vlayer *v = view_vlayer_of(d, from);
		const char *here = lk.abs || !v ? "" : view_layer_path(d, v);
		int base, found = -1;
		bool mc;
		struct stat st;

		if (view_read_redirect(&s->layers[from], fd, &r, e) < 0)
			break;
		if (r && !hu_redirect_valid(r) && !quiet &&
		    view_problem(s, from, HU_PB_REDIRECT_INVALID, false, here,
				 lk.path, r, EINVAL, e) < 0)
			break;
		if (r && hu_redirect_valid(r)) {
			char *comps[1] = { lk.path };
			int rc;

			/* A relative redirect names the data file in the
			 * same directory; comps[0] aliases lk.path, which
			 * view_apply_redirect frees only after copying. */
			rc = view_apply_redirect(&lk, r, comps, 1, 0);
			if (rc < 0) {
				hu_error_set(e, ENOMEM, NULL, "out of memory");
				break;
			}
		}
		free(r);
		r = NULL;
		close(fd);
		fd = -1;
		lk.stop = false;	/* a metacopy file does not stop it */
		for (size_t j = from; j-- > 0 && found < 0 && !lk.stop;) {
			const struct vlayer *vj = view_vlayer_of(d, j);
			const char *base_path = quiet ? NULL : "";

			if (lk.abs)
				base = s->layers[j].fd;
			else if (vj)
				base = vj->fd;
			else
				continue;
			if (!quiet && !lk.abs)
				base_path = view_layer_path(d, vj);
			if (view_lookup_layer(s, j, base, base_path, &lk,
					      false, NULL, &found, &st,
					      e) < 0) {
				view_layer_fail(s, j, lk.abs ? NULL : d->path,
						e);
				free(lk.path);
				return -1;
			}
			from = j;
		}
		if (found < 0) {
			free(lk.path);
			return no_data(d, ent, quiet, ENOENT,
				       "metacopy file without lower data",
				       NULL, e);
		}
		fd = found;
		if (!S_ISREG(st.st_mode))
			break;
		if (is_metacopy(&s->layers[from], fd, &mc, e) < 0)
			break;
		if (!mc) {
			free(lk.path);
			return fd;
		}
	}
	if (fd >= 0)
		close(fd);
	free(lk.path);
	free(r);
	if (!hu_error_has_msg(e))
		return no_data(d, ent, quiet, EIO,
			       "metacopy data is not a file",
			       "what lies below is not a regular file", e);
	return view_fail(d, ent->layer, e);
}

static bool is_metacopy_name(const char *name)
{
	return !strcmp(name, "trusted.overlay.metacopy") ||
	       !strcmp(name, "user.overlay.metacopy");
}

/* Might @ent be a metacopy file, whose data is looked up below it? */
static bool may_be_metacopy(const struct hu_stack *s,
			    const struct hu_ventry *ent)
{
	if (!S_ISREG(ent->st.st_mode) ||
	    !hu_layer_is(&s->layers[ent->layer], HU_FMT_OVERLAY))
		return false;
	return !ent->xattr_names || view_any_name(ent, is_metacopy_name);
}

bool hu_vdir_may_be_metacopy(const struct hu_vdir *d,
			      const struct hu_ventry *ent)
{
	return may_be_metacopy(d->s, ent);
}

int hu_vdir_settle_for_data(struct hu_vdir *d, struct hu_error *e)
{
	const struct hu_stack *s = d->s;

	for (size_t i = 0; i < d->nents; i++) {
		const struct hu_ventry *ent = &d->ents[i];

		if (!may_be_metacopy(s, ent))
			continue;
		for (size_t j = ent->layer; j-- > 0;)
			if (hu_layer_settle(&s->layers[j], e) < 0)
				return view_fail(d, ent->layer, e);
	}
	return 0;
}

static int open_data(struct hu_vdir *d, const struct hu_ventry *ent,
		     bool *own, bool quiet, struct hu_error *e)
{
	const struct hu_layer *l = &d->s->layers[ent->layer];
	int fd = hu_ldir_open_data(l, ent->dirfd, ent->name, O_RDONLY, e);
	bool mc;

	if (fd < 0)
		return view_fail(d, ent->layer, e);
	/* A layer still deferred has no marker on this entry, or reading it
	 * would have settled the layer; and the lister may be settling it
	 * now: ask the flag, not the format. */
	if (view_known_unmarked(ent) || hu_layer_is_deferred(l))
		mc = false;
	else if (is_metacopy(l, fd, &mc, e) < 0) {
		close(fd);
		return view_fail(d, ent->layer, e);
	}
	if (own)
		*own = !mc;
	/* In the bottom layer too a metacopy file takes its data from
	 * beneath, where there is none: the kernel answers EIO. */
	if (!mc)
		return fd;
	/* the data lies beneath: every layer directory of @d may count */
	if (view_complete(d, e) < 0) {
		close(fd);
		return -1;
	}
	return find_data(d, ent, fd, quiet, e);
}

int hu_vdir_open_data(struct hu_vdir *d, const struct hu_ventry *ent,
		      bool *own, struct hu_error *e)
{
	for (size_t i = 0; i < d->npre; i++) {
		struct prefetched *p = &d->pre[i];

		if (p->ent == ent && p->fd >= 0) {
			int fd = p->fd;

			p->fd = -1;
			if (own)
				*own = p->own;
			return fd;
		}
	}
	return open_data(d, ent, own, false, e);
}

/*
 * A walk that reads every file meets each page-cache miss alone, one
 * read(2) at a time, and the lister soon stops, its queue full.  Opening
 * the next files with POSIX_FADV_WILLNEED sends their reads to the disk
 * together.  A window ends before a directory, so that the walk never
 * holds one below another: at most PREFETCH_MAX fds are open here at
 * any time.  A file that cannot be opened now is left to
 * hu_vdir_open_data(), which reports the error at its turn.
 */
size_t hu_vdir_prefetch(struct hu_vdir *d, size_t from)
{
	size_t i;

	view_prefetch_drop(d);
	if (from < d->nents && S_ISDIR(d->ents[from].st.st_mode))
		return from + 1;
	for (i = from; i < d->nents && d->npre < PREFETCH_MAX; i++) {
		const struct hu_ventry *ent = &d->ents[i];
		struct hu_error ignored = { 0 };
		bool own = false;
		int fd;

		if (S_ISDIR(ent->st.st_mode))
			break;
		if (!S_ISREG(ent->st.st_mode) || ent->st.st_size == 0 ||
		    hu_ldir_indexed(&d->s->layers[ent->layer]))
			continue;
		fd = open_data(d, ent, &own, true, &ignored);
		if (fd < 0) {
			hu_error_clear(&ignored);
			continue;
		}
		/* The head only: reading on, the kernel's readahead takes
		 * over, and a large file is not read (or, when cached, its
		 * pages looked up) all at once. */
		(void)posix_fadvise(fd, 0, PREFETCH_BYTES, POSIX_FADV_WILLNEED);
		d->pre[d->npre++] = (struct prefetched){ ent, fd, own };
	}
	return i;
}
