/* SPDX-License-Identifier: MIT */
/*
 * An OCI image layout opened for writing: made when missing (oci-layout,
 * blobs/sha256/, index.json, each whole or not at all), its gc lock taken
 * (ociwrite.h), and blobs written into it.  A blob is written under a
 * temporary name in DIR/blobs/sha256, fsync'd, and renamed to its digest,
 * so a reader never sees half of one; one that is there already is kept
 * (content-addressed).  A killed writer leaves at most a temporary file,
 * which `oci gc` removes, or the next writer that is alone in the layout
 * once its tag is written (hu_ociw_layout_tidy()).
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "oci/ociwrite.h"

#define OCI_LAYOUT_TEXT "{\"imageLayoutVersion\":\"1.0.0\"}"

/* A new temporary name, unique among the running writers (pid) and
 * retried past a killed one's leftover. */
static void tmp_name(char *buf, size_t len)
{
	static unsigned seq;

	snprintf(buf, len, HU_OCIW_TMP "%ld-%u", (long)getpid(),
		 __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
}

static int create_tmp(int dirfd, char *tmp, size_t len, const char *dir,
		      struct hu_error *e)
{
	for (int tries = 0; tries < 1000; tries++) {
		int fd;

		tmp_name(tmp, len);
		fd = hu_wr_create(dirfd, tmp, 0644);
		if (fd >= 0)
			return fd;
		if (errno != EEXIST)
			break;
	}
	return hu_error_setat(e, errno, dir, tmp, "cannot create");
}

static int write_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = hu_wr_write(fd, p, len);

		if (n < 0 && hu_eintr_retry())
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int hu_ociw_replace_file(int dirfd, const char *name, const char *text,
			 bool noreplace, const char *path,
			 struct hu_error *e)
{
	char tmp[64];
	int fd = create_tmp(dirfd, tmp, sizeof(tmp), path, e);

	if (fd < 0)
		return -1;
	if (write_all(fd, text, strlen(text)) < 0 || hu_wr_fsync(fd) < 0) {
		hu_error_setat(e, errno, path, tmp, "cannot write");
		goto fail;
	}
	close(fd);
	fd = -1;
	if (hu_wr_renameat2(dirfd, tmp, dirfd, name,
			    noreplace ? RENAME_NOREPLACE : 0) < 0) {
		if (!(noreplace && errno == EEXIST)) {
			hu_error_setat(e, errno, path, name, "cannot rename "
				       "%s to it", tmp);
			goto fail;
		}
		(void)hu_wr_unlinkat(dirfd, tmp, 0);
	}
	if (hu_wr_fsync(dirfd) < 0)
		return hu_error_setat(e, errno, path, name, "in place, but its "
				      "directory cannot be synced");
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	(void)hu_wr_unlinkat(dirfd, tmp, 0);
	return -1;
}

/* ---- blobs ------------------------------------------------------------- */

int hu_ociw_blob_begin(struct hu_ociw_layout *l, struct hu_ociw_blob *b,
		       struct hu_error *e)
{
	b->fd = create_tmp(l->sha_fd, b->tmp, sizeof(b->tmp), l->path, e);
	return b->fd < 0 ? -1 : 0;
}

void hu_ociw_blob_abort(struct hu_ociw_layout *l, struct hu_ociw_blob *b)
{
	if (b->fd >= 0) {
		close(b->fd);
		(void)hu_wr_unlinkat(l->sha_fd, b->tmp, 0);
		b->fd = -1;
	}
}

int hu_ociw_blob_commit(struct hu_ociw_layout *l, struct hu_ociw_blob *b,
			const char *digest, uint64_t size,
			struct hu_error *e)
{
	const char *hex = digest + 7;
	struct stat st;

	if (!oci_digest_valid(digest)) {
		hu_ociw_blob_abort(l, b);
		return hu_error_set(e, 0, l->path, "invalid digest '%s'",
				    digest);
	}
	if (hu_wr_fsync(b->fd) < 0) {
		hu_error_setat(e, errno, l->path, "blobs/sha256",
			       "cannot sync %s", b->tmp);
		hu_ociw_blob_abort(l, b);
		return -1;
	}
	close(b->fd);
	b->fd = -1;
	/* Content-addressed: a blob of that name and size is this one. */
	if (fstatat(l->sha_fd, hex, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISREG(st.st_mode) && (uint64_t)st.st_size == size) {
		(void)hu_wr_unlinkat(l->sha_fd, b->tmp, 0);
		return 0;
	}
	if (hu_wr_renameat2(l->sha_fd, b->tmp, l->sha_fd, hex, 0) < 0) {
		hu_error_setat(e, errno, l->path, "blobs/sha256",
			       "cannot rename %s to %s", b->tmp, hex);
		(void)hu_wr_unlinkat(l->sha_fd, b->tmp, 0);
		return -1;
	}
	if (hu_wr_fsync(l->sha_fd) < 0)
		return hu_error_setat(e, errno, l->path, "blobs/sha256",
				      "cannot sync");
	return 0;
}

int hu_ociw_blob_put(struct hu_ociw_layout *l, const void *data, size_t len,
		     char digest[72], struct hu_error *e)
{
	struct hu_ociw_blob b;

	if (oci_sha256(data, len, digest, e) < 0 ||
	    hu_ociw_blob_begin(l, &b, e) < 0)
		return -1;
	if (write_all(b.fd, data, len) < 0) {
		hu_error_setat(e, errno, l->path, "blobs/sha256",
			       "cannot write %s", b.tmp);
		hu_ociw_blob_abort(l, &b);
		return -1;
	}
	return hu_ociw_blob_commit(l, &b, digest, len, e);
}

/* ---- the layout --------------------------------------------------------- */

/* A directory with no oci-layout may become a layout only when it holds
 * nothing but what a killed run of ours left, or what another writer
 * making it at this moment has made already (its oci-layout renamed in
 * since we looked). */
static bool ours(const char *name)
{
	return !strncmp(name, HU_OCIW_TMP, strlen(HU_OCIW_TMP)) ||
	       !strcmp(name, "oci-layout") || !strcmp(name, "blobs") ||
	       !strcmp(name, "index.json");
}

static int check_empty(int dirfd, const char *path, struct hu_error *e)
{
	struct hu_names names;
	int rc = 0;

	if (hu_names_read(dirfd, &names, path, e) < 0)
		return -1;
	for (size_t i = 0; i < names.n && rc == 0; i++)
		if (!ours(names.v[i].name))
			rc = hu_error_set(e, 0, path, "not an OCI image "
					  "layout (no oci-layout) and not "
					  "empty: refusing to write into it");
	hu_names_free(&names);
	return rc;
}

static int check_layout_file(struct hu_ociw_layout *l, bool create,
			     struct hu_error *e)
{
	struct stat st;
	char *buf;
	size_t len;
	int rc;

	if (fstatat(l->dirfd, "oci-layout", &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT || !create)
			return hu_error_setat(e, errno, l->path, "oci-layout",
					      "not an OCI image layout");
		if (check_empty(l->dirfd, l->path, e) < 0)
			return -1;
		l->made_layout = true;
		return hu_ociw_replace_file(l->dirfd, "oci-layout",
					    OCI_LAYOUT_TEXT, true, l->path, e);
	}
	/* read as the image reader reads it */
	if (oci_file_read(l->dirfd, l->path, "oci-layout", &buf, &len, e) < 0)
		return -1;
	rc = oci_layout_version_check(buf, len, e);
	free(buf);
	return rc < 0 ? oci_error_in(e, l->path) : 0;
}

static int open_subdir(int dirfd, const char *name, bool create,
		       const char *path, struct hu_error *e)
{
	int fd;

	if (create && hu_wr_mkdirat(dirfd, name, 0755) < 0 &&
	    errno != EEXIST)
		return hu_error_setat(e, errno, path, name, "cannot create");
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC);
	if (fd < 0)
		return hu_error_setat(e, errno, path, name, "cannot open");
	return fd;
}

/* index.json made under the index lock, so that no writer's entry is
 * lost to another's empty index. */
static int ensure_index(struct hu_ociw_layout *l, struct hu_error *e)
{
	struct stat st;
	int rc;

	if (fstatat(l->dirfd, "index.json", &st, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	if (hu_ociw_index_lock(l, e) < 0)
		return -1;
	rc = hu_ociw_replace_file(l->dirfd, "index.json", HU_OCIW_INDEX_EMPTY,
				  true, l->path, e);
	hu_ociw_index_unlock(l);
	return rc;
}

static int open_dir(struct hu_ociw_layout *l, const char *dir, bool create,
		    struct hu_error *e)
{
	l->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (l->dirfd < 0 && errno == ENOENT && create) {
		if (hu_wr_mkdirat(AT_FDCWD, dir, 0755) == 0)
			l->made_dir = true;
		else if (errno != EEXIST)
			return hu_error_set(e, errno, dir, "cannot create");
		l->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	if (l->dirfd < 0)
		return hu_error_set(e, errno, dir, "cannot open the layout");
	return 0;
}

int hu_ociw_lock_wait(int fd, int op, const char *path,
		      void (*waiting)(void *ctx, const char *dir), void *ctx,
		      struct hu_error *e)
{
	struct timespec nap = { 0, 1000000 };	/* 1 ms, up to 128 ms */
	bool told = false;

	while (flock(fd, op | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK && errno != EINTR)
			return hu_error_set(e, errno, path, "cannot lock");
		if (hu_interrupt_check(e) < 0)
			return -1;
		if (!told && waiting)
			waiting(ctx, path);
		told = true;
		(void)nanosleep(&nap, NULL);
		if (nap.tv_nsec < 128000000)
			nap.tv_nsec *= 2;
	}
	return 0;
}

int hu_ociw_layout_open(struct hu_ociw_layout *l, const char *dir,
			bool create, int gc_lock,
			void (*waiting)(void *ctx, const char *dir),
			void *ctx, struct hu_error *e)
{
	char *blobs;

	*l = (struct hu_ociw_layout){ .dirfd = -1, .blobs_fd = -1,
				      .sha_fd = -1 };
	l->path = strdup(dir);
	if (!l->path)
		return hu_error_set(e, ENOMEM, dir, "out of memory");
	for (int tries = 0;; tries++) {
		struct stat st;

		if (open_dir(l, dir, create, e) < 0)
			goto fail;
		/* Before anything is made in it: gc removes temporaries. */
		if (!gc_lock)
			break;
		if (hu_ociw_lock_wait(l->dirfd, gc_lock, dir, waiting, ctx,
				      e) < 0)
			goto fail;
		if (fstat(l->dirfd, &st) < 0) {
			hu_error_set(e, errno, dir, "cannot stat");
			goto fail;
		}
		/* A failed writer that made it removed it while we waited
		 * (hu_ociw_layout_discard): make it again. */
		if (st.st_nlink > 0 || !create || tries == 100)
			break;
		close(l->dirfd);
		l->dirfd = -1;
	}
	if (check_layout_file(l, create, e) < 0)
		goto fail;
	l->blobs_fd = open_subdir(l->dirfd, "blobs", create, dir, e);
	if (l->blobs_fd < 0)
		goto fail;
	if (asprintf(&blobs, "%s/blobs", dir) < 0) {
		hu_error_set(e, ENOMEM, dir, "out of memory");
		goto fail;
	}
	l->sha_fd = open_subdir(l->blobs_fd, "sha256", create, blobs, e);
	free(blobs);
	if (l->sha_fd < 0)
		goto fail;
	if (create && ensure_index(l, e) < 0)
		goto fail;
	return 0;
fail:
	hu_ociw_layout_discard(l);
	return -1;
}

/* index.json is the one a new layout is given (or not there yet). */
static bool index_empty(int dirfd)
{
	static const char empty[] = HU_OCIW_INDEX_EMPTY;
	char buf[sizeof(empty) + 1];
	size_t len = 0;
	ssize_t n;
	int fd = openat(dirfd, "index.json", O_RDONLY | O_NOFOLLOW |
			O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT;
	while (len < sizeof(buf) &&
	       (n = read(fd, buf + len, sizeof(buf) - len)) != 0) {
		if (n < 0 && hu_eintr_retry())
			continue;
		if (n < 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	return len == sizeof(empty) - 1 && !memcmp(buf, empty, len);
}

/* A blob's name (64 hex digits) or a writer's temporary. */
static bool blob_name(const char *name)
{
	return strlen(name) == 64 ?
		strspn(name, "0123456789abcdef") == 64 :
		!strncmp(name, HU_OCIW_TMP, strlen(HU_OCIW_TMP));
}

/* Remove what a layout holds in @l->dirfd: blobs (none referenced:
 * the index is empty), the directories, the documents, temporaries.
 * Anything else stays, and so does its directory. */
static void remove_layout(struct hu_ociw_layout *l)
{
	struct hu_names names;
	struct hu_error ignored = { 0 };

	if (l->sha_fd >= 0 &&
	    hu_names_read(l->sha_fd, &names, l->path, &ignored) == 0) {
		for (size_t i = 0; i < names.n; i++)
			if (blob_name(names.v[i].name))
				(void)hu_wr_unlinkat(l->sha_fd,
						     names.v[i].name, 0);
		hu_names_free(&names);
	}
	hu_error_clear(&ignored);
	if (l->blobs_fd >= 0)
		(void)hu_wr_unlinkat(l->blobs_fd, "sha256", AT_REMOVEDIR);
	(void)hu_wr_unlinkat(l->dirfd, "blobs", AT_REMOVEDIR);
	(void)hu_wr_unlinkat(l->dirfd, "index.json", 0);
	if (hu_names_read(l->dirfd, &names, l->path, &ignored) == 0) {
		for (size_t i = 0; i < names.n; i++)
			if (!strncmp(names.v[i].name, HU_OCIW_TMP,
				     strlen(HU_OCIW_TMP)))
				(void)hu_wr_unlinkat(l->dirfd,
						     names.v[i].name, 0);
		hu_names_free(&names);
	}
	hu_error_clear(&ignored);
	/* last: while it is there, the directory is a layout */
	(void)hu_wr_unlinkat(l->dirfd, "oci-layout", 0);
}

void hu_ociw_layout_discard(struct hu_ociw_layout *l)
{
	struct stat st, here;

	if (l->dirfd < 0 || !(l->made_dir || l->made_layout))
		goto out;
	/* No other writer in it (each holds it shared), nor gc; a waiting
	 * one finds it gone and makes it again. */
	if (flock(l->dirfd, LOCK_EX | LOCK_NB) < 0 || !index_empty(l->dirfd))
		goto out;
	remove_layout(l);
	/* DIR itself when we made it and the path still names it */
	if (l->made_dir && fstat(l->dirfd, &st) == 0 &&
	    stat(l->path, &here) == 0 && st.st_dev == here.st_dev &&
	    st.st_ino == here.st_ino)
		(void)hu_wr_unlinkat(AT_FDCWD, l->path, AT_REMOVEDIR);
out:
	hu_ociw_layout_close(l);
}

/* Move the temporaries of @dirfd (@dir) aside, and take over what a dead
 * writer moved aside there. */
static void tidy_dir(int dirfd, const char *dir)
{
	struct hu_names names;
	struct hu_error ignored = { 0 };
	struct stat st;

	if (dirfd < 0 || hu_names_read(dirfd, &names, dir, &ignored) < 0) {
		hu_error_clear(&ignored);
		return;
	}
	for (size_t i = 0; i < names.n; i++) {
		const char *n = names.v[i].name;

		if (!hu_aside_adopt(dirfd, n, dir) &&
		    !strncmp(n, HU_OCIW_TMP, strlen(HU_OCIW_TMP)) &&
		    fstatat(dirfd, n, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode))
			(void)hu_aside_move(dirfd, n, -1, dir);
	}
	hu_names_free(&names);
}

void hu_ociw_layout_tidy(struct hu_ociw_layout *l)
{
	char *blobs;

	if (l->dirfd < 0 || flock(l->dirfd, LOCK_EX | LOCK_NB) < 0)
		return;
	tidy_dir(l->dirfd, l->path);
	if (asprintf(&blobs, "%s/blobs/sha256", l->path) >= 0) {
		tidy_dir(l->sha_fd, blobs);
		free(blobs);
	}
}

void hu_ociw_layout_close(struct hu_ociw_layout *l)
{
	if (l->sha_fd >= 0)
		close(l->sha_fd);
	if (l->blobs_fd >= 0)
		close(l->blobs_fd);
	if (l->dirfd >= 0)
		close(l->dirfd);	/* drops the gc lock */
	free(l->path);
	*l = (struct hu_ociw_layout){ .dirfd = -1, .blobs_fd = -1,
				      .sha_fd = -1 };
}
