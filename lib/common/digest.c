/* SPDX-License-Identifier: MIT */
/* The sha256 of a whole file, as OCI names it ("sha256:<hex>"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/crypto_dl.h"
#include "internal.h"

#define DIGEST_BUF (1u << 20)

int hu_sha256_fd(int fd, char digest[72], uint64_t *size, struct hu_error *e)
{
	unsigned char dg[EVP_MAX_MD_SIZE];
	unsigned char *buf = NULL;
	EVP_MD_CTX *md = NULL;
	uint64_t off = 0;
	unsigned n = 0;
	int rc = -1;

	if (hu_crypto_need(e) < 0)
		return -1;
	buf = malloc(DIGEST_BUF);
	md = EVP_MD_CTX_new();
	if (!buf || !md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
		hu_error_set(e, ENOMEM, NULL, "out of memory");
		goto out;
	}
	for (;;) {
		ssize_t r = pread(fd, buf, DIGEST_BUF, (off_t)off);

		if (r < 0 && hu_eintr_retry())
			continue;
		if (r < 0) {
			hu_error_set(e, errno, NULL, "cannot read back");
			goto out;
		}
		if (r == 0)
			break;
		if (!EVP_DigestUpdate(md, buf, (size_t)r)) {
			hu_error_set(e, 0, NULL, "sha256 failed");
			goto out;
		}
		off += (uint64_t)r;
	}
	if (!EVP_DigestFinal_ex(md, dg, &n) || n != 32) {
		hu_error_set(e, 0, NULL, "sha256 failed");
		goto out;
	}
	snprintf(digest, 8, "sha256:");
	for (unsigned i = 0; i < n; i++)
		snprintf(digest + 7 + 2 * i, 3, "%02x", dg[i]);
	*size = off;
	rc = 0;
out:
	EVP_MD_CTX_free(md);
	free(buf);
	return rc;
}
