/* SPDX-License-Identifier: MIT */
/*
 * The hook for image layers: a layer of the stack that is a layer of an
 * image operand (hu_layer.image, from the reader of oci:DIR[:REF]) goes
 * into the new image as the blob it is, not rewritten: copied from its
 * layout (its size and sha256 checked on the way, as no blob is trusted
 * by its name alone), or kept when the new layout has it already, with
 * its diff_id and the created_by its image's history gave it.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crypto_dl.h"
#include "internal.h"
#include "oci/ociwrite.h"
#include "tar/tarlayer.h"

/* The media type of a layer blob as an OCI manifest names it: Docker's
 * names of the same bytes become OCI's. */
static const char *oci_layer_type(const char *mt)
{
	if (!strcmp(mt, "application/vnd.docker.image.rootfs.diff.tar.gzip"))
		return "application/vnd.oci.image.layer.v1.tar+gzip";
	if (!strcmp(mt, "application/vnd.docker.image.rootfs.diff.tar"))
		return "application/vnd.oci.image.layer.v1.tar";
	return mt;
}

/* Copy @fd's bytes into @b, hashing them: @got their digest. */
static int copy_hashed(int fd, struct hu_ociw_blob *b, char got[72],
		       uint64_t *size)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char buf[1 << 16], dg[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	int rc = -1;

	*size = 0;
	if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
		goto out;
	for (;;) {
		ssize_t r = read(fd, buf, sizeof(buf));

		if (r < 0 && hu_eintr_retry())
			continue;
		if (r < 0)
			goto out;
		if (r == 0)
			break;
		for (ssize_t off = 0; off < r;) {
			ssize_t w = hu_wr_write(b->fd, buf + off,
						(size_t)(r - off));

			if (w <= 0)
				goto out;
			off += w;
		}
		if (!EVP_DigestUpdate(md, buf, (size_t)r))
			goto out;
		*size += (uint64_t)r;
	}
	if (!EVP_DigestFinal_ex(md, dg, &n) || n != 32)
		goto out;
	memcpy(got, "sha256:", 7);
	for (unsigned i = 0; i < n; i++)
		snprintf(got + 7 + 2 * i, 3, "%02x", dg[i]);
	rc = 0;
out:
	EVP_MD_CTX_free(md);
	return rc;
}

/* The blob @d of the layout @layout_fd into ours, verified. */
static int copy_blob(struct hu_ociout *w, const struct hu_oci_image *im,
		     const struct hu_oci_desc *d, enum tar_comp comp,
		     struct hu_error *e)
{
	struct hu_ociw_blob b;
	struct stat st;
	char got[72];
	uint64_t size;
	int fd;

	/* opened as the image reader opens it */
	fd = oci_blob_open(im->layout_fd, im->layout, d->digest, e);
	if (fd < 0)
		return -1;
	/* never under a label its bytes belie: umoci refuses such a layer */
	if (tar_comp_sniff(fd) != comp) {
		hu_error_setat(e, 0, im->layout, "blobs/sha256", "layer %s: "
			       "its media type says %s, its bytes are %s",
			       d->digest, tar_comp_label(comp),
			       tar_comp_label(tar_comp_sniff(fd)));
		close(fd);
		return -1;
	}
	if (fstatat(w->l.sha_fd, d->digest + 7, &st, AT_SYMLINK_NOFOLLOW) ==
	    0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == d->size) {
		close(fd);
		return 0;	/* there already: content-addressed */
	}
	if (hu_crypto_need(e) < 0 || hu_ociw_blob_begin(&w->l, &b, e) < 0) {
		close(fd);
		return -1;
	}
	if (copy_hashed(fd, &b, got, &size) < 0) {
		hu_error_setat(e, errno, w->l.path, "blobs/sha256",
			       "cannot copy blob %s from %s", d->digest,
			       im->layout);
		goto fail;
	}
	if (size != d->size || strcmp(got, d->digest) != 0) {
		hu_error_setat(e, 0, im->layout, "blobs/sha256", "blob %s: "
			       "%llu bytes of sha256 %s, not %llu as the "
			       "manifest says", d->digest,
			       (unsigned long long)size, got,
			       (unsigned long long)d->size);
		goto fail;
	}
	close(fd);
	return hu_ociw_blob_commit(&w->l, &b, d->digest, d->size, e);
fail:
	close(fd);
	hu_ociw_blob_abort(&w->l, &b);
	return -1;
}

int hu_ociout_reuse_layer(struct hu_ociout *w, const struct hu_layer *l,
			  const char *created_by, struct hu_error *e)
{
	const struct hu_oci_image *im = l->image;
	const struct hu_oci_desc *d;
	char *by;
	int rc;

	if (!im)
		return 0;
	if (l->image_layer >= im->nlayers)
		return hu_error_set(e, EINVAL, im->layout, "layer %zu of an "
				    "image of %zu", l->image_layer,
				    im->nlayers);
	d = &im->layers[l->image_layer];
	if (!oci_digest_valid(d->digest))
		return hu_error_set(e, 0, im->layout, "invalid digest '%s'",
				    d->digest);
	if (copy_blob(w, im, d, tar_comp_of_layer(im, l->image_layer),
		      e) < 0)
		return -1;
	/* its history entry says what made it, as the image said */
	by = im->config_json ? oci_config_created_by(im->config_json,
						     strlen(im->config_json),
						     l->image_layer) : NULL;
	rc = hu_ociw_add_layer(w, oci_layer_type(d->media_type), d->digest,
		       im->diff_ids[l->image_layer], d->size,
		       by ? by : created_by, e);
	free(by);
	return rc < 0 ? -1 : 1;
}
