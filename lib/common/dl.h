/* SPDX-License-Identifier: MIT */
/*
 * Libraries loaded on demand (dl.c): what a directory-only command never
 * needs is not linked but dlopen()ed where it is first used, so that it
 * costs nothing at start.  Each such library has a loader module
 * (tar/archive_dl.c: libarchive; common/crypto_dl.c: libcrypto) that
 * resolves the functions hunion calls into a table, once, and a header
 * that maps their names onto that table.
 */
#ifndef HUNION_DL_H
#define HUNION_DL_H

#include <stdint.h>

#include "hunion.h"

/* One library: how it is named and, after hu_dl_open(), what came of it. */
struct hu_dl {
	const char *feature;	/* what needs it: "tarball support" */
	const char *soname;	/* what is loaded: "libarchive.so.13" */
	const char *env;	/* names another file to load instead (tests,
				 * packagers): "HUNION_LIBARCHIVE" */
	void *handle;		/* NULL when it could not be loaded */
	char why[200];		/* then: dlerror(), or the missing symbol */
};

/* Load @d (call it once: under the loader's pthread_once).  0, or -1 with
 * d->why set. */
int hu_dl_open(struct hu_dl *d);
/* Function @name of @d, or NULL with d->why set and d->handle NULL: a
 * library without it is one hunion cannot use. */
void *hu_dl_sym(struct hu_dl *d, const char *name);
/* "FEATURE needs SONAME: WHY" in @e; returns -1. */
int hu_dl_fail(const struct hu_dl *d, struct hu_error *e);
/* The same on stderr, then abort(): a call through a table that was
 * never loaded, by a caller that did not ask first (a bug). */
__attribute__((noreturn)) void hu_dl_die(const struct hu_dl *d);

/*
 * The ELF note that says a binary may dlopen() a library: the FDO "dlopen
 * metadata" spec (systemd's ELF_NOTE_DLOPEN), read by packagers' tools
 * as they read DT_NEEDED (`readelf -n`: owner FDO, type 0x407c0c0a).
 * @payload is the note's payload: a JSON array of
 * {"feature", "description", "priority", "soname": [...]} objects.
 */
#define HU_DL_NOTE_OWNER "FDO"
#define HU_DL_NOTE_TYPE UINT32_C(0x407c0c0a)
#define HU_DL_NOTE(var, payload) \
	__attribute__((used, section(".note.dlopen"), aligned(4))) \
	static const struct { \
		struct { \
			uint32_t n_namesz, n_descsz, n_type; \
		} nhdr; \
		char name[sizeof(HU_DL_NOTE_OWNER)]; \
		_Alignas(4) char json[sizeof(payload)]; \
	} var = { \
		.nhdr = { \
			.n_namesz = sizeof(HU_DL_NOTE_OWNER), \
			.n_descsz = sizeof(payload), \
			.n_type = HU_DL_NOTE_TYPE, \
		}, \
		.name = HU_DL_NOTE_OWNER, \
		.json = payload, \
	}

#endif
