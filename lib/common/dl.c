/* SPDX-License-Identifier: MIT */
/* Libraries loaded on demand: dlopen(), dlsym() and what to say when they
 * fail (dl.h). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/dl.h"

int hu_dl_open(struct hu_dl *d)
{
	const char *file = getenv(d->env);
	const char *msg;

	if (!file || !*file)
		file = d->soname;
	/* RTLD_LOCAL: its symbols are reached through the loader's table
	 * only; never closed, as its objects live until exit */
	d->handle = dlopen(file, RTLD_NOW | RTLD_LOCAL);
	if (d->handle)
		return 0;
	msg = dlerror();
	snprintf(d->why, sizeof(d->why), "%s", msg ? msg : "cannot load it");
	return -1;
}

void *hu_dl_sym(struct hu_dl *d, const char *name)
{
	void *sym = d->handle ? dlsym(d->handle, name) : NULL;

	if (!sym && d->handle) {
		snprintf(d->why, sizeof(d->why), "it has no %s()", name);
		d->handle = NULL;
	}
	return sym;
}

int hu_dl_fail(const struct hu_dl *d, struct hu_error *e)
{
	return hu_error_set(e, 0, NULL, "%s needs %s: %s", d->feature,
			    d->soname, d->why);
}

void hu_dl_die(const struct hu_dl *d)
{
	fprintf(stderr, "hunion: %s needs %s: %s\n", d->feature, d->soname,
		d->why);
	abort();
}
