/* SPDX-License-Identifier: MIT */
/*
 * merge -o: write the merged view as a new plain tree.  The tree is built
 * under a temporary name beside the output and renamed into place only
 * when complete; on failure the partial tree is removed.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "linkmap.h"

struct merge {
	const char *out;	/* the output as the user named it */
	const struct hu_stack *s;
	const struct hu_merge_opts *o;
	struct hu_merge_stats *stats;
	int *fds;		/* output directory per depth; fds[0] the root */
	size_t depth, cap;
	struct hu_pathbuf path;	/* output path of the current directory */
	struct hu_copy_state cs;
	struct hu_linkmap links;
	bool as_root;
	bool warned_owner;
	uint64_t done;
};

static int out_fd(const struct merge *m)
{
	return m->fds[m->depth];
}

static int push_dir(struct merge *m, int fd, const char *name)
{
	size_t saved;

	if (!m->fds || m->depth + 1 >= m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 32;
		int *fds = realloc(m->fds, cap * sizeof(*fds));

		if (!fds)
			return -1;
		m->fds = fds;
		m->cap = cap;
	}
	if (hu_pathbuf_push(&m->path, name, &saved) < 0)
		return -1;
	m->fds[++m->depth] = fd;
	return 0;
}

static void pop_dir(struct merge *m)
{
	char *slash;

	close(m->fds[m->depth--]);
	slash = m->path.s ? strrchr(m->path.s, '/') : NULL;
	hu_pathbuf_pop(&m->path, slash ? (size_t)(slash - m->path.s) : 0);
}

/* Errors of the output side name the output path of the entry. */
static int mprefix(struct merge *m, const char *name, struct hu_error *e)
{
	hu_error_prefix(e, name);
	hu_error_prefix(e, m->path.s);
	hu_error_prefix(e, m->out);
	return -1;
}

static int mfail(struct merge *m, const char *name, struct hu_error *e,
		 int err, const char *what)
{
	hu_error_set(e, err, NULL, "%s", what);
	return mprefix(m, name, e);
}

static void progress(struct merge *m)
{
	const struct hu_report *r = m->o->report;

	if (++m->done % 4096 == 0 && r && r->progress)
		r->progress(r->ctx, m->done);
}

/* Owner, mode, xattrs and times of a directory or regular file @fd. */
static int set_meta_fd(struct merge *m, int srcfd, int fd,
		       const struct stat *st, const char *name,
		       struct hu_error *e)
{
	struct timespec ts[2] = { st->st_atim, st->st_mtim };

	/* chown first: it clears setuid/setgid and file capabilities. */
	if (m->as_root && hu_wr_fchownat(fd, "", st->st_uid, st->st_gid,
					 AT_EMPTY_PATH) < 0)
		return mfail(m, name, e, errno, "cannot set owner");
	if (hu_wr_fchmod(fd, st->st_mode & 07777) < 0)
		return mfail(m, name, e, errno, "cannot set mode");
	if (hu_copy_xattrs(srcfd, NULL, fd, NULL, e) < 0)
		return mprefix(m, name, e);
	if (hu_wr_futimens(fd, ts) < 0)
		return mfail(m, name, e, errno, "cannot set times");
	return 0;
}

/* The same for an entry that is never opened (symlink, device, fifo). */
static int set_meta_at(struct merge *m, const struct hu_ventry *ent,
		       struct hu_error *e)
{
	struct timespec ts[2] = { ent->st.st_atim, ent->st.st_mtim };
	int dfd = out_fd(m);

	if (m->as_root && hu_wr_fchownat(dfd, ent->name, ent->st.st_uid,
					 ent->st.st_gid,
					 AT_SYMLINK_NOFOLLOW) < 0)
		return mfail(m, ent->name, e, errno, "cannot set owner");
	if (!S_ISLNK(ent->st.st_mode) &&
	    hu_wr_fchmodat(dfd, ent->name, ent->st.st_mode & 07777) < 0)
		return mfail(m, ent->name, e, errno, "cannot set mode");
	if (hu_copy_xattrs(ent->dirfd, ent->name, dfd, ent->name, e) < 0)
		return mprefix(m, ent->name, e);
	if (hu_wr_utimensat(dfd, ent->name, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return mfail(m, ent->name, e, errno, "cannot set times");
	return 0;
}

/* A second name of an inode already written: link to the first. */
static int link_again(struct merge *m, const struct hu_ventry *ent,
		      bool *linked, struct hu_error *e)
{
	const char *first;
	int rc;

	*linked = false;
	if (S_ISDIR(ent->st.st_mode) || ent->st.st_nlink < 2)
		return 0;
	first = hu_linkmap_get(&m->links, ent->st.st_dev, ent->st.st_ino);
	if (!first)
		return 0;
	rc = hu_linkat_path(m->fds[0], first, out_fd(m), ent->name);
	if (rc < 0)
		return mfail(m, ent->name, e, errno, "cannot create hard link");
	m->stats->hardlinks++;
	*linked = true;
	return 0;
}

static int remember_link(struct merge *m, const struct hu_ventry *ent,
			 struct hu_error *e)
{
	char *p;

	if (ent->st.st_nlink < 2)
		return 0;
	p = hu_path_join(m->path.s, ent->name);
	if (!p || hu_linkmap_put(&m->links, ent->st.st_dev, ent->st.st_ino,
				 p) < 0) {
		free(p);
		return mfail(m, ent->name, e, ENOMEM, "out of memory");
	}
	return 0;
}

static int write_file(struct merge *m, struct hu_vdir *d,
		      const struct hu_ventry *ent, struct hu_error *e)
{
	int src, fd, rc = -1;
	struct stat dst;

	src = hu_vdir_open_data(d, ent, e);
	if (src < 0)
		return -1;
	if (fstat(src, &dst) < 0) {
		rc = mfail(m, ent->name, e, errno, "cannot stat source");
		goto out_src;
	}
	/* --link: the output shares the source inode, unless the data lives
	 * in another file than the metadata (metacopy). */
	if (m->o->data == HU_DATA_LINK && dst.st_ino == ent->st.st_ino &&
	    dst.st_dev == ent->st.st_dev) {
		if (hu_wr_linkat(ent->dirfd, ent->name, out_fd(m),
				 ent->name) < 0)
			rc = mfail(m, ent->name, e, errno,
				   errno == EXDEV ? "cannot hard-link across "
				   "filesystems (--link needs OUT on the "
				   "layers' filesystem)" :
				   "cannot hard-link");
		else
			rc = 0;
		goto out_src;
	}
	fd = hu_wr_create(out_fd(m), ent->name, 0600);
	if (fd < 0) {
		rc = mfail(m, ent->name, e, errno, "cannot create");
		goto out_src;
	}
	if (hu_copy_data(&m->cs, src, &dst, fd, e) < 0) {
		mprefix(m, ent->name, e);
		goto out_fd;
	}
	rc = set_meta_fd(m, src, fd, &ent->st, ent->name, e);
	m->stats->bytes += dst.st_size;
out_fd:
	close(fd);
out_src:
	close(src);
	return rc;
}

static int write_symlink(struct merge *m, const struct hu_ventry *ent,
			 struct hu_error *e)
{
	size_t size = ent->st.st_size + 1;
	char *target = malloc(size);
	ssize_t n;

	if (!target)
		return mfail(m, ent->name, e, ENOMEM, "out of memory");
	n = readlinkat(ent->dirfd, ent->name, target, size);
	if (n < 0 || (size_t)n >= size) {
		free(target);
		return mfail(m, ent->name, e, n < 0 ? errno : EAGAIN,
			     "cannot read symlink");
	}
	target[n] = '\0';
	n = hu_wr_symlinkat(target, out_fd(m), ent->name);
	free(target);
	if (n < 0)
		return mfail(m, ent->name, e, errno, "cannot create symlink");
	return set_meta_at(m, ent, e);
}

static int write_special(struct merge *m, const struct hu_ventry *ent,
			 struct hu_error *e)
{
	if (hu_wr_mknodat(out_fd(m), ent->name, ent->st.st_mode & S_IFMT,
			  ent->st.st_rdev) < 0)
		return mfail(m, ent->name, e, errno, "cannot create");
	return set_meta_at(m, ent, e);
}

static int write_dir(struct merge *m, const struct hu_ventry *ent,
		     struct hu_error *e)
{
	int fd;

	if (hu_wr_mkdirat(out_fd(m), ent->name, 0700) < 0)
		return mfail(m, ent->name, e, errno, "cannot create directory");
	fd = hu_open_dir_at(out_fd(m), ent->name);
	if (fd < 0)
		return mfail(m, ent->name, e, errno, "cannot open directory");
	if (push_dir(m, fd, ent->name) < 0) {
		close(fd);
		return mfail(m, ent->name, e, ENOMEM, "out of memory");
	}
	return 1;
}

static int on_entry(void *ctx, struct hu_vdir *d, const struct hu_ventry *ent,
		    struct hu_error *e)
{
	struct merge *m = ctx;
	mode_t type = ent->st.st_mode & S_IFMT;
	bool linked;
	int rc;

	progress(m);
	if (type == S_IFSOCK) {
		hu_report_warn(m->o->report, 0, hu_vdir_path(d), ent->name,
			       "socket skipped");
		m->stats->skipped++;
		return 0;
	}
	if (m->o->dry_run) {
		m->stats->dirs += type == S_IFDIR;
		m->stats->files += type == S_IFREG;
		if (type == S_IFREG)
			m->stats->bytes += ent->st.st_size;
		m->stats->symlinks += type == S_IFLNK;
		m->stats->specials += type != S_IFDIR && type != S_IFREG &&
				      type != S_IFLNK;
		return type == S_IFDIR;
	}
	if (type == S_IFDIR) {
		m->stats->dirs++;
		return write_dir(m, ent, e);
	}
	if (link_again(m, ent, &linked, e) < 0)
		return -1;
	if (linked)
		return 0;
	switch (type) {
	case S_IFREG:
		m->stats->files++;
		rc = write_file(m, d, ent, e);
		break;
	case S_IFLNK:
		m->stats->symlinks++;
		rc = write_symlink(m, ent, e);
		break;
	default:
		m->stats->specials++;
		rc = write_special(m, ent, e);
		break;
	}
	return rc < 0 ? -1 : remember_link(m, ent, e);
}

/* After a directory's contents: its own metadata, from its topmost layer
 * directory (now, so that creating children does not change its mtime). */
static int on_leave(void *ctx, struct hu_vdir *d, const struct hu_ventry *ent,
		    struct hu_error *e)
{
	struct merge *m = ctx;
	struct stat st;
	int src = hu_vdir_fd(d, NULL);

	if (m->o->dry_run)
		return 0;
	if (fstat(src, &st) < 0)
		return mfail(m, "", e, errno, "cannot stat source directory");
	if (set_meta_fd(m, src, out_fd(m), &st, "", e) < 0)
		return -1;
	if (ent)
		pop_dir(m);
	return 0;
}

/* Refuse an output inside a layer: walk up from its parent directory to
 * the filesystem root, comparing each directory with the layer roots. */
static int check_not_in_layer(const struct hu_stack *s, int parentfd,
			      const char *out, struct hu_error *e)
{
	struct stat st, up;
	int fd = dup(parentfd), next;

	if (fd < 0)
		return hu_error_set(e, errno, out, "cannot open parent");
	for (;;) {
		if (fstat(fd, &st) < 0)
			break;
		for (size_t i = 0; i < s->n; i++) {
			if (st.st_dev == s->layers[i].dev &&
			    st.st_ino == s->layers[i].ino) {
				close(fd);
				return hu_error_set(e, 0, out,
					"lies inside layer %s",
					s->layers[i].path);
			}
		}
		next = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (next < 0 || fstat(next, &up) < 0 ||
		    (up.st_dev == st.st_dev && up.st_ino == st.st_ino)) {
			if (next >= 0)
				close(next);
			break;
		}
		close(fd);
		fd = next;
	}
	close(fd);
	return 0;
}

/* Make the temporary directory ".NAME.hunion-XXXXXX" beside the output. */
static int make_temp(int parentfd, const char *base, char **tmp,
		     struct hu_error *e, const char *out)
{
	size_t len = strlen(base) + 32;
	unsigned int seed = (unsigned)getpid() ^ (unsigned)time(NULL);

	*tmp = malloc(len);
	if (!*tmp)
		return hu_error_set(e, ENOMEM, out, "out of memory");
	for (int tries = 0; tries < 100; tries++) {
		seed = seed * 1103515245u + 12345u;
		snprintf(*tmp, len, ".%s.hunion-%06x", base, seed & 0xffffff);
		if (hu_wr_mkdirat(parentfd, *tmp, 0700) == 0)
			return 0;
		if (errno != EEXIST)
			break;
	}
	hu_error_set(e, errno, out, "cannot create the output directory");
	free(*tmp);
	*tmp = NULL;
	return -1;
}

static int open_parent(const char *out, int *parentfd, char **base,
		       struct hu_error *e)
{
	char *a = strdup(out), *b = strdup(out);
	const char *dir, *name;
	struct stat st;
	int rc = -1;

	*parentfd = -1;
	*base = NULL;
	if (!a || !b) {
		hu_error_set(e, ENOMEM, out, "out of memory");
		goto out;
	}
	dir = dirname(a);
	name = basename(b);
	if (!*name || !strcmp(name, ".") || !strcmp(name, "..") ||
	    !strcmp(name, "/")) {
		hu_error_set(e, EINVAL, out, "not a usable output name");
		goto out;
	}
	*parentfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*parentfd < 0) {
		hu_error_set(e, errno, dir, "cannot open output's parent");
		goto out;
	}
	if (fstatat(*parentfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		hu_error_set(e, 0, out, "output already exists");
		goto out;
	}
	if (errno != ENOENT) {
		hu_error_set(e, errno, out, "cannot check the output");
		goto out;
	}
	*base = strdup(name);
	rc = *base ? 0 : hu_error_set(e, ENOMEM, out, "out of memory");
out:
	if (rc < 0 && *parentfd >= 0) {
		close(*parentfd);
		*parentfd = -1;
	}
	free(a);
	free(b);
	return rc;
}

static int build(struct merge *m, int parentfd, const char *tmp,
		 struct hu_error *e)
{
	static const struct hu_walk_ops ops = {
		.entry = on_entry, .leave = on_leave };
	int rootfd = -1;

	if (!m->o->dry_run) {
		rootfd = hu_open_dir_at(parentfd, tmp);
		if (rootfd < 0)
			return hu_error_set(e, errno, tmp, "cannot open");
	}
	m->cap = 32;
	m->fds = malloc(m->cap * sizeof(*m->fds));
	if (!m->fds) {
		if (rootfd >= 0)
			close(rootfd);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	m->fds[0] = rootfd;
	m->depth = 0;
	return hu_view_walk(m->s, &ops, m, e);
}

int hu_merge_tree(const struct hu_stack *s, const char *out,
		  const struct hu_merge_opts *o, struct hu_merge_stats *stats,
		  struct hu_error *e)
{
	struct merge m = { .out = out, .s = s, .o = o, .stats = stats,
			   .as_root = geteuid() == 0 };
	char *base = NULL, *tmp = NULL;
	int parentfd, rc = -1;

	memset(stats, 0, sizeof(*stats));
	if (open_parent(out, &parentfd, &base, e) < 0)
		return -1;
	if (check_not_in_layer(s, parentfd, out, e) < 0)
		goto out;
	if (!m.as_root)
		hu_report_warn(o->report, EPERM, out, NULL,
			       "not running as root: owners are not kept");
	if (!o->dry_run && make_temp(parentfd, base, &tmp, e, out) < 0)
		goto out;
	rc = build(&m, parentfd, tmp, e);
	while (m.depth > 0)
		pop_dir(&m);
	if (m.fds && m.fds[0] >= 0)
		close(m.fds[0]);
	if (rc == 0 && !o->dry_run &&
	    hu_wr_renameat2(parentfd, tmp, parentfd, base,
			    RENAME_NOREPLACE) < 0)
		rc = hu_error_set(e, errno, out, "cannot move the new tree "
				  "into place");
	if (rc < 0 && tmp)
		(void)hu_rmtree(parentfd, tmp);
out:
	hu_linkmap_free(&m.links);
	hu_pathbuf_free(&m.path);
	free(m.fds);
	free(tmp);
	free(base);
	close(parentfd);
	return rc;
}
