/* SPDX-License-Identifier: MIT */
/*
 * Tarball layers: a .tar, .tar.gz or .tar.zst is read once, entry by
 * entry, into a private directory that the rest of hunion reads as an OCI
 * layer: whiteouts stay .wh.NAME files and .wh..wh..opq stays a file, so
 * the view's OCI rules apply unchanged (hunion-layers(7)).
 *
 * This file: the private directory, reading the archive, and how errors
 * read.  Each entry is made by tarentry.c, directories by tardirs.c, paths
 * are checked and indexed by tarindex.c, and tarsrc.c decompresses.
 * Memory: the index of paths, never file data.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/crypto_dl.h"
#include "internal.h"
#include "oci/oci.h"
#include "tar/archive_dl.h"
#include "tar/tarlayer.h"

/* ---- messages ------------------------------------------------------------ */

/* "LAYER: ENTRY", or "LAYER" outside an entry. */
char *tl_where(const char *layer, const char *entry)
{
	char *w;

	if (!entry)
		return strdup(layer);
	if (asprintf(&w, "%s: %s", layer, entry) < 0)
		return NULL;
	return w;
}

__attribute__((format(printf, 4, 0)))
static int vfail_at(struct tl *t, const char *entry, int err, const char *fmt,
		    va_list ap)
{
	char *msg, *w = tl_where(t->l->path, entry);

	if (vasprintf(&msg, fmt, ap) < 0)	/* whole: it may name paths */
		msg = NULL;
	hu_error_set(t->e, err, w ? w : t->l->path, "%s",
		     msg ? msg : "out of memory");
	free(msg);
	free(w);
	return -1;
}

int tl_fail(struct tl *t, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail_at(t, t->raw, err, fmt, ap);
	va_end(ap);
	return -1;
}

int tl_fail_at(struct tl *t, const char *path, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail_at(t, path, err, fmt, ap);
	va_end(ap);
	return -1;
}

void tl_warn_at(const struct hu_report *r, const char *layer,
		const char *entry, int err, const char *msg)
{
	char *w;

	if (!r || !r->warn)
		return;
	w = tl_where(layer, entry);
	hu_report_warn(r, err, w ? w : layer, NULL, "%s", msg);
	free(w);
}

void tl_warn(struct tl *t, int err, const char *fmt, ...)
{
	char *msg;
	va_list ap;

	if ((!t->r || !t->r->warn) && !t->warned)
		return;
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	if (t->warned)
		t->warned(t, err, msg ? msg : "out of memory");
	tl_warn_at(t->r, t->l->path, t->raw, err,
		   msg ? msg : "out of memory");
	free(msg);
}

int tl_write_fail(struct tl *t, int err, const char *what)
{
	/* (an output, merge -o's, is where the user said) */
	bool space = (err == ENOSPC || err == EDQUOT) && t->l->unpacked;

	return tl_fail(t, err, "cannot %s%s%s%s", what,
		     space ? " (unpacking into " : "",
		     space ? t->l->unpacked : "",
		     space ? "; TMPDIR chooses where)" : "");
}

int tl_archive_fail(struct tl *t, const char *when)
{
	const char *why = archive_error_string(t->a);

	if (!why || !*why)
		why = "unexpected end of data, or corrupt data";
	if (!t->raw && !t->last)
		return tl_fail(t, 0, *tar_src_error(t->src) ?
			     "corrupt or truncated tarball: %s" :
			     "not a tarball, or a corrupt one: %s", why);
	if (!t->raw)
		t->raw = t->last;
	return tl_fail(t, 0, "corrupt or truncated tarball (%s): %s", when, why);
}

/* ---- the private directory ------------------------------------------------- */

/*
 * $TMPDIR (or /var/tmp)/hunion-layer-XXXXXXXXXXXX, mode 0700, holding the
 * layer as root/.  Its owner holds flock(2) on it while it is in use (the
 * kernel drops the lock when the owner dies, however it dies), so a
 * directory that can be locked is one a killed run left: the next tarball
 * layer unpacked in the same TMPDIR moves it aside (aside.c), in one
 * rename, and the run removes it after its own work.
 */
#define LAYER_PREFIX "hunion-layer-"
#define LAYER_DIGITS 12

static bool is_layer_dir_name(const char *name)
{
	size_t n = strlen(LAYER_PREFIX);

	if (strncmp(name, LAYER_PREFIX, n) != 0 ||
	    strlen(name + n) != LAYER_DIGITS)
		return false;
	for (name += n; *name; name++)
		if (!strchr("0123456789abcdef", *name))
			return false;
	return true;
}

/* @n of @bfd, our unpack directory whose owner is dead: its fd, locked,
 * else -1. */
static int stale_locked(int bfd, const char *n)
{
	struct stat st;
	int fd;

	if (!is_layer_dir_name(n) ||
	    fstatat(bfd, n, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		return -1;
	fd = openat(bfd, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	/* Held: alive.  Not ours to judge if flock fails. */
	if (flock(fd, LOCK_EX | LOCK_NB) == 0 && hu_fd_is_at(bfd, n, fd))
		return fd;
	close(fd);
	return -1;
}

/* Move our unpack directories in @bfd (@dir) whose owner is dead aside,
 * and take over what a dead run moved aside there: removed after the
 * run's work (hu_aside_remove()), so a big one costs the run no wait.
 * @found (may be NULL) is told of each instead, nothing moved. */
static void sweep_stale(int bfd, const char *dir,
			void (*found)(void *ctx, const char *path), void *ctx)
{
	struct hu_names names;

	if (hu_names_read(bfd, &names, NULL, NULL) < 0)
		return;
	for (size_t i = 0; i < names.n; i++) {
		const char *n = names.v[i].name;
		int fd = hu_is_aside_name(n) && found ?
			 hu_aside_locked(bfd, n) : stale_locked(bfd, n);
		char *path;

		if (!found) {
			if (!hu_aside_adopt(bfd, n, dir) && fd >= 0 &&
			    hu_aside_move(bfd, n, fd, dir) == 0)
				continue;	/* fd taken */
		} else if (fd >= 0 && (path = hu_path_join(dir, n))) {
			found(ctx, path);
			free(path);
		}
		if (fd >= 0)
			close(fd);
	}
	hu_names_free(&names);
}

/* TMPDIR, or /var/tmp: its real path and an fd, or -1 with errno. */
static int tmp_dir(const char **base, char **abs)
{
	int bfd;

	*base = getenv("TMPDIR");
	if (!*base || !**base)
		*base = "/var/tmp";
	*abs = realpath(*base, NULL);
	bfd = *abs ? open(*abs, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	if (bfd < 0) {
		int err = errno;

		free(*abs);
		*abs = NULL;
		errno = err;
	}
	return bfd;
}

int hu_tmp_clean(bool dry_run, void (*found)(void *ctx, const char *path),
		 void *ctx, char **dir, struct hu_error *e)
{
	const char *base;
	int bfd = tmp_dir(&base, dir);

	if (bfd < 0)
		return hu_error_set(e, errno, base, "cannot open the "
				    "temporary directory (TMPDIR)");
	sweep_stale(bfd, *dir, dry_run ? found : NULL, ctx);
	close(bfd);
	return 0;
}

/* Make a new directory @name in @bfd and lock it: its fd, or -1 with
 * errno, EEXIST when the name was taken or a sweep took it first. */
static int make_locked(int bfd, const char *name)
{
	int fd;

	if (hu_wr_mkdirat(bfd, name, 0700) < 0)
		return -1;
	/* Until flock below, a sweep of another run may take it for a
	 * killed run's: lock it, find it there, move it aside (holding the
	 * lock until it removes it, after its work).  It is empty till
	 * then, so that costs only a try under another name (EEXIST),
	 * whether the sweep took it before the open (ENOENT, or ENOTDIR
	 * and ELOOP for what another run made under the name since), while
	 * it holds the lock (EWOULDBLOCK) or after (not there any more). */
	fd = openat(bfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC);
	if (fd < 0) {
		int err = errno;

		if (err == ENOENT || err == ENOTDIR || err == ELOOP)
			return errno = EEXIST, -1;
		(void)hu_wr_unlinkat(bfd, name, AT_REMOVEDIR);
		return errno = err == EEXIST ? EIO : err, -1;
	}
	/* Without flock here, go on unlocked (a sweep cannot lock it
	 * either). */
	if (flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK) {
		close(fd);
		return errno = EEXIST, -1;
	}
	if (!hu_fd_is_at(bfd, name, fd)) {
		close(fd);
		return errno = EEXIST, -1;
	}
	return fd;
}

static int make_tmp(struct tl *t)
{
	const char *base;
	char name[32], *abs;
	int bfd = tmp_dir(&base, &abs), tfd = -1, err = 0;

	if (bfd < 0)
		return tl_fail(t, errno, "cannot use %s to unpack (TMPDIR "
			     "chooses where)", base);
	sweep_stale(bfd, abs, NULL, NULL);
	for (int tries = 0;; tries++) {
		unsigned char rnd[6];

		if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
			for (size_t i = 0; i < sizeof(rnd); i++)
				rnd[i] = (unsigned char)(rand() ^ getpid());
		snprintf(name, sizeof(name),
			 LAYER_PREFIX "%02x%02x%02x%02x%02x%02x", rnd[0],
			 rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
		tfd = make_locked(bfd, name);
		if (tfd >= 0)
			break;
		if (errno != EEXIST || tries == 100) {
			err = errno;
			close(bfd);
			tl_fail(t, err, "cannot make a directory in %s to unpack "
			      "into (TMPDIR chooses where)", abs);
			free(abs);
			return -1;
		}
	}
	t->l->unpacked = hu_path_join(abs, name);
	t->l->unpacked_lock = tfd;
	free(abs);
	close(bfd);
	if (!t->l->unpacked) {
		close(tfd);
		t->l->unpacked_lock = -1;
		return tl_fail(t, ENOMEM, "out of memory");
	}
	if (hu_wr_mkdirat(tfd, "root", 0700) < 0 ||
	    (t->root = openat(tfd, "root", O_RDONLY | O_DIRECTORY |
			      O_NOFOLLOW | O_CLOEXEC)) < 0)
		return tl_write_fail(t, errno, "make the directory to unpack "
				     "into");
	return 0;
}

void hu_tarlayer_remove(struct hu_layer *l)
{
	bool was = hu_wr_dry_run();

	if (!l->unpacked)
		return;
	/* The private copy goes even in a dry run: it is not output. */
	hu_wr_set_dry_run(false);
	(void)hu_rmtree(AT_FDCWD, l->unpacked);
	hu_wr_set_dry_run(was);
	/* removed while locked: no sweep can take it for stale before */
	if (l->unpacked_lock >= 0)
		close(l->unpacked_lock);
	l->unpacked_lock = -1;
	free(l->unpacked);
	l->unpacked = NULL;
}

/* ---- the driver ------------------------------------------------------------- */

bool hu_tar_sniff(int fd)
{
	unsigned char b[512];
	ssize_t n = pread(fd, b, sizeof(b), 0);
	static const unsigned char zero[512];

	if (n >= 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f &&
	    b[3] == 0xfd)
		return true;			/* zstd */
	if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b)
		return true;			/* gzip */
	if (n != 512)
		return false;
	/* ustar, or an empty archive: an end-of-archive block first. */
	return memcmp(b + 257, "ustar", 5) == 0 || memcmp(b, zero, 512) == 0;
}

enum tar_comp tar_comp_of_layer(const struct hu_oci_image *img, size_t k)
{
	/* known: the manifest's parser refuses a type it does not know */
	const struct oci_media_type *mt =
		oci_media_type(img->layers[k].media_type);

	if (!mt)
		return TAR_PLAIN;
	return mt->comp == OCI_COMP_GZIP ? TAR_GZIP :
	       mt->comp == OCI_COMP_ZSTD ? TAR_ZSTD : TAR_PLAIN;
}

static int open_archive(struct tl *t, int fd)
{
	/* an image's layer: checked against its manifest and config */
	const struct hu_oci_image *img = t->l->image;
	size_t k = t->l->image_layer;
	struct stat st;

	t->size = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
	/* out of memory: the progress line says the layer's path */
	if (img)
		t->what = hu_oci_layer_name(img, k);
	t->src = tar_src_open(fd);
	t->a = archive_read_new();
	if (!t->src || !t->a)
		return tl_fail(t, ENOMEM, "out of memory");
	if (t->r)
		tar_src_count_into(t->src, t->r->bytes);
	if (t->r && t->r->bytes)
		atomic_fetch_add_explicit(&t->r->bytes->tarball_size, t->size,
					  memory_order_relaxed);
	if (img && tar_src_verify(t->src, img->layers[k].digest,
				  img->layers[k].size, img->diff_ids[k],
				  tar_comp_of_layer(img, k)) < 0)
		return tl_fail(t, ENOMEM, "out of memory");
	if (!img && t->hash_stored && tar_src_hash_stored(t->src) < 0)
		return tl_fail(t, ENOMEM, "out of memory");
	if (tar_src_archive_open(t->src, t->a) != ARCHIVE_OK)
		return tl_archive_fail(t, "at its start");
	return 0;
}

/* Read the rest of the entry (tar_src_entry_skip). */
static int entry_end(struct tl *t)
{
	int64_t size = archive_entry_size(t->ae);
	uint64_t pad = size > 0 ? (512 - (uint64_t)size % 512) % 512 : 0;

	if (tar_src_entry_skip(t->src, t->a) < ARCHIVE_WARN)
		return tl_archive_fail(t, "in this entry's data");
	/* the zeros after a verified layer's real end are padding only */
	if ((uint64_t)archive_filter_bytes(t->a, 0) - pad >
	    tar_src_real_end(t->src))
		return tl_fail(t, 0, "corrupt or truncated tarball: the "
			       "entry's data is cut short");
	return 0;
}

/* The entries so far and the stored bytes behind them, or (@end: the
 * last entry is in) all of them: the share follows what is done, not
 * what the producer has read ahead, so 100% means the entries are in. */
static void progress(struct tl *t, bool end)
{
	uint64_t done = end ? t->size :
		tar_src_bytes_done(t->src,
				   (uint64_t)archive_filter_bytes(t->a, 0));

	if (!t->r)
		return;
	if (done > t->size)
		done = t->size;
	if (t->r->bytes && done > t->counted)
		atomic_fetch_add_explicit(&t->r->bytes->tarball_done,
					  done - t->counted,
					  memory_order_relaxed);
	t->counted = done > t->counted ? done : t->counted;
	if (t->r->progress_read)
		t->r->progress_read(t->r->ctx, t->what ? t->what :
				    t->l->path, t->done, done, t->size);
	else if (t->r->progress)
		t->r->progress(t->r->ctx, t->done);
}

static int read_entries(struct tl *t)
{
	/* Named from the start: the bytes read tick the front end before
	 * the 16th entry reports (hu_progress_bytes.tick). */
	hu_report_phase(t->r, t->entry ? HU_PHASE_INDEXING :
			t->to_output ? HU_PHASE_READING : HU_PHASE_UNPACKING,
			t->what ? t->what : t->l->path);
	progress(t, false);
	for (;;) {
		int r;

		if (hu_interrupt_check(t->e) < 0)
			return -1;
		r = tar_src_next_header(t->a, &t->ae);

		if (r == ARCHIVE_EOF)
			return tar_src_archive_end(t->src, t->a) < 0 ?
			       tl_archive_fail(t, "after this entry") : 0;
		if (r == ARCHIVE_WARN) {
			t->raw = archive_entry_pathname(t->ae);
			tl_warn(t, 0, "%s", archive_error_string(t->a));
		} else if (r != ARCHIVE_OK) {
			t->raw = NULL;
			return tl_archive_fail(t, "after this entry");
		}
		if ((t->entry ? t->entry(t) : tl_entry(t)) < 0 ||
		    entry_end(t) < 0)
			return -1;
		free(t->last);
		t->last = t->raw ? strdup(t->raw) : NULL;
		t->raw = NULL;
		/* every 16th: a tarball of big files reports often, and a
		 * report costs the front end a clock read */
		if (++t->done % 16 == 0)
			progress(t, false);
	}
}

int tl_read_tarball(struct tl *t, int fd)
{
	if (open_archive(t, fd) < 0 || read_entries(t) < 0)
		return -1;
	if (tar_src_verify_end(t->src) < 0)
		return tl_fail_at(t, NULL, 0, "%s", tar_src_error(t->src));
	progress(t, true);	/* its last figures */
	return 0;
}

/* Read the tarball @fd into t->root, entry by entry, then set the modes
 * and times of its directories. */
static int read_into_root(struct tl *t, int fd)
{
	struct ti_dir *d;

	/* The root, until an entry names it: a parent like any other. */
	if (ti_init(&t->ix) < 0 || !(d = ti_dir(&t->ix, TI_ROOT)))
		return tl_fail(t, ENOMEM, "out of memory");
	t->ix.nodes[TI_ROOT].flags = TI_DIR;
	*d = (struct ti_dir){ .node = TI_ROOT, .mode = 0755,
		.times = { { 0, UTIME_OMIT }, { 0, UTIME_OMIT } } };
	if (t->over && tl_over_start(t) < 0)
		return -1;
	if (tl_read_tarball(t, fd) < 0)
		return -1;
	tl_drop_cache(t);
	return tl_finish_dirs(t);
}

static int unpack(struct tl *t, int fd)
{
	struct stat st;

	if (make_tmp(t) < 0 || read_into_root(t, fd) < 0)
		return -1;
	if (fstat(t->root, &st) < 0)
		return tl_fail(t, errno, "cannot stat the unpacked layer");
	t->l->fd = t->root;
	t->l->dev = st.st_dev;
	t->l->ino = st.st_ino;
	t->l->format = HU_FMT_OCI;
	t->root = -1;
	return 0;
}

void tl_release(struct tl *t)
{
	tl_drop_cache(t);
	if (t->stash >= 0)
		close(t->stash);
	if (t->a)
		archive_read_free(t->a);
	tar_src_free(t->src);
	ti_free(&t->ix);
	free(t->last);
	free(t->what);
}

int hu_tarlayer_unpack(struct hu_layer *l, int fd, const struct hu_stack *below,
		       const struct hu_report *r, struct hu_error *e)
{
	struct tl t = { .l = l, .below = below, .r = r, .e = e, .root = -1,
			.cfd = -1, .stash = -1, .as_root = geteuid() == 0 };
	bool was = hu_wr_dry_run();
	int rc;

	l->unpacked_lock = -1;
	if (hu_la_need(e) < 0 || (l->image && hu_crypto_need(e) < 0))
		return -1;
	/* The private copy is made even in a dry run: it is input. */
	hu_wr_set_dry_run(false);
	rc = unpack(&t, fd);
	tl_release(&t);
	if (t.root >= 0)
		close(t.root);
	if (rc < 0)
		hu_tarlayer_remove(l);
	hu_wr_set_dry_run(was);
	return rc;
}

int hu_tarlayer_extract(struct hu_layer *l, int root, bool over,
			struct hu_merge_stats *st, const struct hu_report *r,
			bool *fallback, struct hu_error *e)
{
	/* Nothing beneath but what @root holds already (@over), so a
	 * directory the tarball only implies and that holds markers alone
	 * goes, as in the unpack of a bottom layer (tardirs.c). */
	static const struct hu_stack nothing_below = { .n = 0 };
	struct tl t = { .l = l, .below = &nothing_below, .r = r, .e = e,
			.root = root, .cfd = -1, .as_root = geteuid() == 0,
			.to_output = true, .stats = st, .over = over,
			.stash = -1 };
	int rc;

	*fallback = false;
	if (hu_la_need(e) < 0 || (l->image && hu_crypto_need(e) < 0))
		return -1;
	rc = read_into_root(&t, l->fd);
	tl_release(&t);
	*fallback = t.fallback;
	return rc;
}
