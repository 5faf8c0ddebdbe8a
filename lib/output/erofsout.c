/* SPDX-License-Identifier: MIT */
/*
 * flatten -o erofs:FILE: the merged view as one EROFS image.  The same
 * walk of the view as the tarball's (flatten.c), each entry handed to the
 * EROFS writer (erofs/erofs.h), which lays the image out.  The names of
 * one inode of a layer are one inode of the image, as in a tarball the
 * first name carries the data and the later ones link to it (linkmap.c).
 * Unlike a tarball, an image holds sockets.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "internal.h"
#include "common/linkmap.h"
#include "erofs/erofs.h"
#include "layer/ldir.h"
#include "layer/lxattr.h"

struct erofsout {
	const struct hu_stack *s;
	const struct hu_report *report;
	const struct hu_erofs_out_opts *o;
	struct hu_erofs *w;
	struct hu_flatten_stats *stats;
	struct hu_linkmap links;
	struct hu_xattrs xattrs;
	struct hu_pathbuf path;	/* the current entry's, for errors */
	char *target;		/* a symlink's */
	size_t target_cap;
};

/* A tarball layer's bytes, pushed to the writer as its stream is read. */
struct stream_src {
	struct hu_layer *l;
	int dir;
	const char *name;
	uint64_t size;
};

static int feed_stream(void *ctx, hu_erofs_put put, void *put_ctx,
		       struct hu_error *e)
{
	struct stream_src *src = ctx;

	return hu_ldir_copy_data(src->l, src->dir, src->name, src->size, put,
				 put_ctx, e);
}

static void meta_of(const struct erofsout *f, const struct stat *st,
		    struct hu_erofs_meta *m)
{
	int64_t sec = st->st_mtim.tv_sec;
	long nsec = st->st_mtim.tv_nsec;

	hu_clamp_mtime(f->o->clamp_mtime, f->o->mtime_max, &sec, &nsec);
	*m = (struct hu_erofs_meta){
		.mode = st->st_mode, .uid = st->st_uid, .gid = st->st_gid,
		.mtime = sec, .mtime_nsec = (uint32_t)nsec,
		.rdev = st->st_rdev,
		.xattrs = f->xattrs.v, .nxattrs = f->xattrs.n,
	};
}

static int read_target(struct erofsout *f, struct hu_layer *l, int dir,
		       const char *name, const struct stat *st, size_t *len,
		       struct hu_error *e)
{
	size_t want = (size_t)st->st_size + 1;
	ssize_t n;

	if (want > f->target_cap) {
		char *bigger = realloc(f->target, want);

		if (!bigger)
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		f->target = bigger;
		f->target_cap = want;
	}
	n = hu_ldir_readlink(l, dir, name, f->target, want);
	if (n < 0 || (size_t)n >= want)
		return hu_error_set(e, n < 0 ? errno : EAGAIN, f->path.s,
				    "cannot read symlink");
	*len = (size_t)n;
	return 0;
}

/* A regular file: its bytes from an fd, or from its tarball's stream. */
static int write_file(struct erofsout *f, struct hu_vdir *d,
		      const struct hu_ventry *ent, uint64_t *ref,
		      struct hu_error *e)
{
	struct hu_layer *l = hu_vdir_layer(d, ent);
	struct stream_src src = { l, ent->dirfd, ent->name,
				  (uint64_t)ent->st.st_size };
	struct hu_erofs_data data = { .size = src.size, .fd = -1 };
	struct hu_erofs_meta m;
	bool own = false;
	int rc;

	/* A large file's bytes may be copied after this call returns:
	 * their errors name the file in its layer. */
	data.layer = l->path;
	data.path = f->path.s;
	data.no_holes = (uint64_t)ent->st.st_blocks * 512 >=
			(uint64_t)ent->st.st_size;
	if (hu_ldir_indexed(l)) {
		data.feed = feed_stream;
		data.ctx = &src;
	} else if (ent->st.st_size > 0 || hu_vdir_may_be_metacopy(d, ent)) {
		data.fd = hu_vdir_open_data(d, ent, &own, e);
		if (data.fd < 0) {
			e->whole = true;	/* the view named the layer */
			return -1;
		}
	}
	/* The entry's own fd reaches its xattrs without a lookup. */
	rc = own ? hu_xattrs_read(&f->xattrs, l, data.fd, NULL,
				  ent->xattr_names, ent->xattr_names_len,
				  f->path.s, e) :
		   hu_xattrs_read(&f->xattrs, l, ent->dirfd, ent->name,
				  ent->xattr_names, ent->xattr_names_len,
				  f->path.s, e);
	if (rc == 0) {
		meta_of(f, &ent->st, &m);
		rc = hu_erofs_file(f->w, ent->name, &m, &data, ref, e);
	}
	if (data.fd >= 0)
		close(data.fd);
	return rc;
}

static int write_entry(struct erofsout *f, struct hu_vdir *d,
		       const struct hu_ventry *ent, uint64_t *ref,
		       struct hu_error *e)
{
	struct hu_layer *l = hu_vdir_layer(d, ent);
	struct hu_erofs_meta m;
	size_t len = 0;

	if (S_ISREG(ent->st.st_mode))
		return write_file(f, d, ent, ref, e);
	if (hu_xattrs_read(&f->xattrs, l, ent->dirfd, ent->name,
			   ent->xattr_names, ent->xattr_names_len, f->path.s,
			   e) < 0)
		return -1;
	meta_of(f, &ent->st, &m);
	if (S_ISDIR(ent->st.st_mode))
		return hu_erofs_dir(f->w, ent->name, &m, e);
	if (!S_ISLNK(ent->st.st_mode))
		return hu_erofs_special(f->w, ent->name, &m, ref, e);
	if (read_target(f, l, ent->dirfd, ent->name, &ent->st, &len, e) < 0)
		return -1;
	return hu_erofs_symlink(f->w, ent->name, &m, f->target, len, ref, e);
}

/* Errors without a path are the writer's about this entry (a name or
 * value EROFS cannot hold): they name it; source errors name it in its
 * layer. */
static int efail(struct erofsout *f, size_t layer, struct hu_error *e)
{
	if (!e->path) {
		e->path = strdup(*f->path.s ? f->path.s : ".");
		e->whole = true;
	} else {
		hu_error_prefix(e, f->s->layers[layer].path);
	}
	return -1;
}

static int on_entry(void *ctx, struct hu_vdir *d, const struct hu_ventry *ent,
		    struct hu_error *e)
{
	struct erofsout *f = ctx;
	const char *first;
	uint64_t ref = 0;
	size_t saved;

	hu_pathbuf_pop(&f->path, 0);
	if (hu_pathbuf_push(&f->path, hu_vdir_path(d), &saved) < 0 ||
	    hu_pathbuf_push(&f->path, ent->name, &saved) < 0)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	hu_report_progress(f->report, ++f->stats->entries);
	if (hu_linkmap_first(&f->links, &ent->st, hu_vdir_path(d), ent->name,
			     &first) < 0)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	if (first) {
		f->stats->hardlinks++;
		if (hu_erofs_link(f->w, ent->name,
				  hu_linkmap_ref_of(&f->links, &ent->st),
				  e) < 0)
			return efail(f, ent->layer, e);
		return 0;
	}
	if (write_entry(f, d, ent, hu_linkmap_shared(&ent->st) ? &ref : NULL,
			e) < 0)
		return efail(f, ent->layer, e);
	if (hu_linkmap_shared(&ent->st))
		hu_linkmap_set_ref(&f->links, &ent->st, ref);
	hu_flatten_count(f->stats, &ent->st);
	return S_ISDIR(ent->st.st_mode) ? 1 : 0;
}

static int on_leave(void *ctx, struct hu_vdir *d, const struct hu_ventry *ent,
		    struct hu_error *e)
{
	struct erofsout *f = ctx;
	size_t saved;

	if (hu_erofs_leave(f->w, e) == 0)
		return 0;
	hu_pathbuf_pop(&f->path, 0);
	if (hu_pathbuf_push(&f->path, hu_vdir_path(d), &saved) < 0)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	return efail(f, 0, e);
}

/* The root of the view, from its topmost layer directory. */
static int on_root(void *ctx, struct hu_vdir *root, struct hu_error *e)
{
	struct erofsout *f = ctx;
	size_t layer;
	int fd = hu_vdir_fd(root, &layer);
	struct hu_layer *l = &f->s->layers[layer];
	struct hu_erofs_meta m;
	struct stat st;

	hu_pathbuf_pop(&f->path, 0);
	if (hu_layer_dir_stat(l, fd, &st, e) < 0 ||
	    hu_xattrs_read(&f->xattrs, l, fd, NULL, NULL, 0, "", e) < 0) {
		hu_error_prefix(e, l->path);
		return -1;
	}
	meta_of(f, &st, &m);
	if (hu_erofs_root(f->w, &m, e) < 0)
		return efail(f, layer, e);
	f->stats->dirs++;
	return 0;
}

/* The image's digest, read back: uncompressed, its content is its bytes. */
static int image_digest(int fd, struct hu_digests *d, struct hu_error *e)
{
	memset(d, 0, sizeof(*d));
	d->media_type = HU_EROFS_MEDIA_TYPE;
	if (hu_sha256_fd(fd, d->digest, &d->size, e) < 0)
		return -1;
	memcpy(d->diff_id, d->digest, sizeof(d->diff_id));
	return 0;
}

int hu_flatten_write_erofs(const struct hu_stack *s, const struct hu_report *r,
			   int fd, const struct hu_erofs_out_opts *o,
			   struct hu_flatten_stats *stats, struct hu_digests *d,
			   struct hu_error *e)
{
	static const struct hu_walk_ops ops = {
		.entry = on_entry, .leave = on_leave, .enter_root = on_root,
		.list_ahead = true, .xattr_names = true,
		.prefetch_data = true };
	struct hu_erofs_opts wo = {
		.block_bits = o->block_bits, .build_time = o->build_time,
		.uuid_content = o->uuid_content };
	struct erofsout f = { .s = s, .report = r, .o = o, .stats = stats };
	int rc;

	memset(stats, 0, sizeof(*stats));
	if (hu_erofs_open(&f.w, fd, &wo, e) < 0)
		return -1;
	hu_report_phase(r, HU_PHASE_WRITING, NULL);
	rc = hu_view_walk(s, &ops, &f, e);
	if (rc >= 0)
		rc = hu_flatten_data_finish(s, e);
	if (rc >= 0)
		rc = hu_erofs_close(f.w, e);
	else
		hu_erofs_abort(f.w);
	if (rc >= 0 && d)
		rc = image_digest(fd, d, e);
	if (rc >= 0 && o->sync && hu_wr_fsync(fd) < 0)
		rc = hu_error_set(e, errno, NULL, "cannot sync");
	hu_linkmap_free(&f.links);
	hu_xattrs_free(&f.xattrs);
	hu_pathbuf_free(&f.path);
	free(f.target);
	return rc;
}
