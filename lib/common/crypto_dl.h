/* SPDX-License-Identifier: MIT */
/*
 * libcrypto (OpenSSL's SHA-256, and SHA-512 for the documents of
 * other tools that gc reads), loaded on demand (crypto_dl.c): linking
 * it costs every command a few milliseconds at start, and only the
 * commands that hash (tarballs written, image layers and blobs checked)
 * use it.  As tar/archive_dl.h does for libarchive: include this after
 * <openssl/evp.h> where EVP_* is called, and call hu_crypto_need() before
 * the first of them.
 */
#ifndef HUNION_CRYPTO_DL_H
#define HUNION_CRYPTO_DL_H

#include <openssl/evp.h>
#include <openssl/opensslv.h>

#include "hunion.h"

#if OPENSSL_VERSION_MAJOR != 3
#error "crypto_dl.h names libcrypto.so.3: OpenSSL 3 only"
#endif
#define HU_CRYPTO_SONAME "libcrypto.so.3"

/* Every libcrypto function hunion calls, each also in the list of names
 * below; one missing fails the link of hunion. */
#define HU_CRYPTO_FUNCS(X) \
	X(EVP_Digest) \
	X(EVP_DigestFinal_ex) \
	X(EVP_DigestInit_ex) \
	X(EVP_DigestUpdate) \
	X(EVP_MD_CTX_free) \
	X(EVP_MD_CTX_new) \
	X(EVP_sha256) \
	X(EVP_sha512)

struct hu_crypto {
#define HU_CRYPTO_FIELD(f) __typeof__(f) *f;
	HU_CRYPTO_FUNCS(HU_CRYPTO_FIELD)
#undef HU_CRYPTO_FIELD
};

/* Load libcrypto once; 0, or -1 with "hashing needs libcrypto.so.3: WHY"
 * in @e.  HUNION_LIBCRYPTO names another file to load. */
int hu_crypto_need(struct hu_error *e);
/* The table, loaded; aborts when libcrypto cannot be loaded. */
const struct hu_crypto *hu_crypto(void);

#ifndef HU_CRYPTO_TABLE_ONLY
#define EVP_Digest (hu_crypto()->EVP_Digest)
#define EVP_DigestFinal_ex (hu_crypto()->EVP_DigestFinal_ex)
#define EVP_DigestInit_ex (hu_crypto()->EVP_DigestInit_ex)
#define EVP_DigestUpdate (hu_crypto()->EVP_DigestUpdate)
#define EVP_MD_CTX_free (hu_crypto()->EVP_MD_CTX_free)
#define EVP_MD_CTX_new (hu_crypto()->EVP_MD_CTX_new)
#define EVP_sha256 (hu_crypto()->EVP_sha256)
#define EVP_sha512 (hu_crypto()->EVP_sha512)
#endif

#endif
