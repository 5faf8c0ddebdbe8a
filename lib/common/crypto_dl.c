/* SPDX-License-Identifier: MIT */
/*
 * libcrypto on demand (crypto_dl.h): loaded at the first digest, its
 * SHA-256 functions resolved into one table, once (pthread_once) for
 * every thread.
 */
#include <pthread.h>

#define HU_CRYPTO_TABLE_ONLY
#include "common/crypto_dl.h"
#include "common/dl.h"

HU_DL_NOTE(crypto_note,
	   "[{\"feature\":\"sha256\",\"description\":\"layer and blob "
	   "digests\",\"priority\":\"required\",\"soname\":[\""
	   HU_CRYPTO_SONAME "\"]}]");

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct hu_dl lib = { .feature = "hashing",
			    .soname = HU_CRYPTO_SONAME,
			    .env = "HUNION_LIBCRYPTO" };
static struct hu_crypto table;

static void load(void)
{
	if (hu_dl_open(&lib) < 0)
		return;
	/* POSIX: dlsym()'s void * converts to the function's type */
#define HU_CRYPTO_RESOLVE(f) *(void **)&table.f = hu_dl_sym(&lib, #f);
	HU_CRYPTO_FUNCS(HU_CRYPTO_RESOLVE)
#undef HU_CRYPTO_RESOLVE
}

int hu_crypto_need(struct hu_error *e)
{
	(void)pthread_once(&once, load);
	return lib.handle ? 0 : hu_dl_fail(&lib, e);
}

const struct hu_crypto *hu_crypto(void)
{
	(void)pthread_once(&once, load);
	if (!lib.handle)
		hu_dl_die(&lib);
	return &table;
}
