/* SPDX-License-Identifier: MIT */
/*
 * Blobs of an image layout: DIR/blobs/sha256/HEX, opened relative to the
 * layout's fd with O_NOFOLLOW at each step, so a symlinked blobs/,
 * sha256/ or blob is refused, never followed out of the layout.  JSON
 * documents are read whole (capped at OCI_JSON_MAX) and checked against
 * their descriptor's size and sha256 before anything parses them.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/crypto_dl.h"
#include "internal.h"
#include "oci/oci.h"

#define SHA256_PREFIX "sha256:"
#define SHA512_PREFIX "sha512:"

/* Is @d @prefix and @n lowercase hex digits? */
static bool digest_is(const char *d, const char *prefix, size_t n)
{
	size_t p = strlen(prefix);

	if (strncmp(d, prefix, p) != 0 || strlen(d + p) != n)
		return false;
	for (d += p; *d; d++)
		if (!strchr("0123456789abcdef", *d))
			return false;
	return true;
}

bool oci_digest_valid(const char *d)
{
	return digest_is(d, SHA256_PREFIX, 64);
}

bool oci_digest_sha512(const char *d)
{
	return digest_is(d, SHA512_PREFIX, 128);
}

/* @buf's digest by the algorithm @d names, "ALGO:HEX", into @out. */
static int digest_of(const char *d, const void *buf, size_t len,
		     char out[OCI_DIGEST_MAX], struct hu_error *e)
{
	bool sha512 = oci_digest_sha512(d);
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;

	if (hu_crypto_need(e) < 0)
		return -1;
	if (!EVP_Digest(buf, len, md, &n, sha512 ? EVP_sha512() :
			EVP_sha256(), NULL) || n != (sha512 ? 64u : 32u))
		return hu_error_set(e, EIO, NULL, "%s failed",
				    sha512 ? "sha512" : "sha256");
	memcpy(out, sha512 ? SHA512_PREFIX : SHA256_PREFIX, 8);
	for (unsigned int i = 0; i < n; i++)
		snprintf(out + 7 + 2 * i, 3, "%02x", md[i]);
	return 0;
}

int oci_sha256(const void *buf, size_t len, char out[72],
	       struct hu_error *e)
{
	char d[OCI_DIGEST_MAX];

	if (digest_of(SHA256_PREFIX, buf, len, d, e) < 0)
		return -1;
	memcpy(out, d, 72);
	return 0;
}

/* One step down from @dirfd, never through a symlink. */
static int open_step(int dirfd, const char *name, int flags)
{
	return openat(dirfd, name, flags | O_NOFOLLOW | O_CLOEXEC);
}

static int blob_fail(struct hu_error *e, int err, const char *layout,
		     const char *digest, const char *why)
{
	/* O_NOFOLLOW: a symlinked blob fails ELOOP, a symlinked directory
	 * (O_DIRECTORY too) ENOTDIR */
	if (err == ELOOP || err == ENOTDIR)
		return hu_error_set(e, 0, layout, "blob %s: a symlink (or no "
				    "directory) on its way: blobs/, sha256/ "
				    "or the blob: refused", digest);
	if (err == ENOENT)
		return hu_error_set(e, 0, layout, "blob %s: missing from "
				    "the layout", digest);
	return hu_error_set(e, err, layout, "blob %s: %s", digest, why);
}

/* The blob of @digest, sha256 or sha512 (checked by the caller). */
static int blob_open(int layout_fd, const char *layout, const char *digest,
		     struct hu_error *e)
{
	bool sha512 = oci_digest_sha512(digest);
	int blobs, algo, fd;
	struct stat st;

	blobs = open_step(layout_fd, "blobs", O_RDONLY | O_DIRECTORY);
	if (blobs < 0)
		return blob_fail(e, errno, layout, digest, "cannot open blobs/");
	algo = open_step(blobs, sha512 ? "sha512" : "sha256",
			 O_RDONLY | O_DIRECTORY);
	close(blobs);
	if (algo < 0)
		return blob_fail(e, errno, layout, digest, sha512 ?
				 "cannot open blobs/sha512/" :
				 "cannot open blobs/sha256/");
	/* O_NONBLOCK: a FIFO planted there must not hang the open */
	fd = open_step(algo, digest + strlen(SHA256_PREFIX),
		       O_RDONLY | O_NONBLOCK);
	close(algo);
	if (fd < 0)
		return blob_fail(e, errno, layout, digest, "cannot open");
	if (fstat(fd, &st) < 0) {
		int err = errno;

		close(fd);
		return blob_fail(e, err, layout, digest, "cannot stat");
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return hu_error_set(e, 0, layout, "blob %s: not a regular "
				    "file", digest);
	}
	/* regular file: O_NONBLOCK means nothing to its reads; cleared
	 * all the same */
	if (fcntl(fd, F_SETFL, 0) < 0) {
		int err = errno;

		close(fd);
		return blob_fail(e, err, layout, digest, "cannot use");
	}
	return fd;
}

int oci_blob_open(int layout_fd, const char *layout, const char *digest,
		  struct hu_error *e)
{
	if (!oci_digest_valid(digest))
		return hu_error_set(e, 0, layout, "digest '%.80s': not "
				    "sha256 and 64 lowercase hex digits "
				    "(the only kind hunion reads)", digest);
	return blob_open(layout_fd, layout, digest, e);
}

/* Read all of @fd, at most @max bytes: malloc'd, NUL-terminated; -1 with
 * errno (EFBIG when larger). */
static int read_all(int fd, size_t max, char **buf, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *b = malloc(cap + 1);

	if (!b)
		return -1;
	for (;;) {
		ssize_t r;

		if (n == cap) {
			char *nb;

			if (cap > max) {
				free(b);
				return errno = EFBIG, -1;
			}
			cap *= 2;
			nb = realloc(b, cap + 1);
			if (!nb) {
				free(b);
				return errno = ENOMEM, -1;
			}
			b = nb;
		}
		r = read(fd, b + n, cap - n);
		if (r < 0 && hu_eintr_retry())
			continue;
		if (r < 0) {
			int err = errno;

			free(b);
			return errno = err, -1;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > max) {
			free(b);
			return errno = EFBIG, -1;
		}
	}
	b[n] = '\0';
	*buf = b;
	*len = n;
	return 0;
}

int oci_doc_read(int layout_fd, const char *layout,
		 const struct hu_oci_desc *d, char **buf, size_t *len,
		 struct hu_error *e)
{
	return oci_doc_read_digest(layout_fd, layout, d->digest, d->size,
				   buf, len, e);
}

int oci_doc_read_digest(int layout_fd, const char *layout,
			const char *digest, uint64_t size, char **buf,
			size_t *len, struct hu_error *e)
{
	char got[OCI_DIGEST_MAX];
	int fd;

	if (!oci_digest_valid(digest) && !oci_digest_sha512(digest))
		return hu_error_set(e, 0, layout, "digest '%.80s': not "
				    "sha256 or sha512 and lowercase hex "
				    "digits (the only kinds hunion reads)",
				    digest);
	if (size > OCI_JSON_MAX)
		return hu_error_set(e, 0, layout, "blob %s: a JSON document "
				    "of %llu bytes, over hunion's cap of %zu: "
				    "refused", digest,
				    (unsigned long long)size, OCI_JSON_MAX);
	fd = blob_open(layout_fd, layout, digest, e);
	if (fd < 0)
		return -1;
	if (read_all(fd, OCI_JSON_MAX, buf, len) < 0) {
		int err = errno;

		close(fd);
		if (err == EFBIG)
			return hu_error_set(e, 0, layout, "blob %s: over "
					    "hunion's cap of %zu bytes for a "
					    "JSON document: refused",
					    digest, OCI_JSON_MAX);
		return hu_error_set(e, err, layout, "blob %s: cannot read",
				    digest);
	}
	close(fd);
	if (*len != size) {
		hu_error_set(e, 0, layout, "blob %s: %zu bytes, its "
			     "descriptor says %llu", digest, *len,
			     (unsigned long long)size);
		goto fail;
	}
	if (digest_of(digest, *buf, *len, got, e) < 0)
		goto fail;
	if (strcmp(got, digest) != 0) {
		hu_error_set(e, 0, layout, "blob %s: its content has digest "
			     "%s", digest, got);
		goto fail;
	}
	return 0;
fail:
	free(*buf);
	*buf = NULL;
	return -1;
}

int oci_file_read(int layout_fd, const char *layout, const char *name,
		  char **buf, size_t *len, struct hu_error *e)
{
	int fd = open_step(layout_fd, name, O_RDONLY | O_NONBLOCK), err;
	struct stat st;

	if (fd < 0) {
		err = errno;
		if (err == ENOENT)
			return hu_error_set(e, 0, layout, "no %s: not an OCI "
					    "image layout", name);
		return hu_error_set(e, err, layout, "cannot open %s%s", name,
				    err == ELOOP ? " (a symlink: refused)" :
				    "");
	}
	if (fstat(fd, &st) < 0) {
		err = errno;
		close(fd);
		return hu_error_set(e, err, layout, "cannot stat %s", name);
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return hu_error_set(e, 0, layout, "%s: not a regular file",
				    name);
	}
	if (read_all(fd, OCI_JSON_MAX, buf, len) < 0) {
		err = errno;
		close(fd);
		if (err == EFBIG)
			return hu_error_set(e, 0, layout, "%s: over hunion's "
					    "cap of %zu bytes for a JSON "
					    "document: refused", name,
					    OCI_JSON_MAX);
		return hu_error_set(e, err, layout, "cannot read %s", name);
	}
	close(fd);
	return 0;
}

int hu_oci_blob_open(const struct hu_oci_image *img,
		     const struct hu_oci_desc *d, struct hu_error *e)
{
	struct stat st;
	int fd = oci_blob_open(img->layout_fd, img->layout, d->digest, e);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0) {
		int err = errno;

		close(fd);
		return hu_error_set(e, err, img->layout, "blob %s: cannot stat",
				    d->digest);
	}
	if ((uint64_t)st.st_size != d->size) {
		close(fd);
		return hu_error_set(e, 0, img->layout, "blob %s: %lld bytes, "
				    "its descriptor says %llu", d->digest,
				    (long long)st.st_size,
				    (unsigned long long)d->size);
	}
	return fd;
}
