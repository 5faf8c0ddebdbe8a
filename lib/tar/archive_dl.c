/* SPDX-License-Identifier: MIT */
/*
 * libarchive on demand (archive_dl.h): loaded at the first tarball read
 * or written, every function hunion calls resolved into one table, once
 * (pthread_once) for every thread.
 */
#include <pthread.h>

#include "common/dl.h"
#define HU_LA_TABLE_ONLY
#include "tar/archive_dl.h"

HU_DL_NOTE(archive_note,
	   "[{\"feature\":\"archive\",\"description\":\"tarball layers\","
	   "\"priority\":\"required\",\"soname\":[\"" HU_LA_SONAME "\"]}]");

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct hu_dl lib = { .feature = "tarball support",
			    .soname = HU_LA_SONAME,
			    .env = "HUNION_LIBARCHIVE" };
static struct hu_la table;

static void load(void)
{
	if (hu_dl_open(&lib) < 0)
		return;
	/* POSIX: dlsym()'s void * converts to the function's type */
#define HU_LA_RESOLVE(f) *(void **)&table.f = hu_dl_sym(&lib, #f);
	HU_LA_FUNCS(HU_LA_RESOLVE)
#undef HU_LA_RESOLVE
}

int hu_la_need(struct hu_error *e)
{
	(void)pthread_once(&once, load);
	return lib.handle ? 0 : hu_dl_fail(&lib, e);
}

const struct hu_la *hu_la(void)
{
	(void)pthread_once(&once, load);
	if (!lib.handle)
		hu_dl_die(&lib);
	return &table;
}
