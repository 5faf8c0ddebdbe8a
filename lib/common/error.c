/* SPDX-License-Identifier: MIT */
/* Errors and warnings: the library fills them in, the front end prints. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hunion.h"
#include "internal.h"

/* Set from a signal handler: lock-free, so async-signal-safe. */
static atomic_int interrupted;

void hu_interrupt(void)
{
	atomic_store_explicit(&interrupted, 1, memory_order_relaxed);
}

bool hu_interrupted(void)
{
	return atomic_load_explicit(&interrupted, memory_order_relaxed);
}

int hu_interrupt_check(struct hu_error *e)
{
	if (!atomic_load_explicit(&interrupted, memory_order_relaxed))
		return 0;
	return hu_error_set(e, 0, NULL, "interrupted");
}

__attribute__((format(printf, 4, 0)))
static void error_fill(struct hu_error *e, int err, char *path,
		       const char *fmt, va_list ap)
{
	char *msg;

	/* whole, however long the paths in it: formatted before the old
	 * message, which it may quote, is freed */
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	free(e->path);
	free(e->msg);
	e->err = err;
	e->path = path;
	e->msg = msg;
	e->whole = false;
}

int hu_error_set(struct hu_error *e, int err, const char *path,
		 const char *fmt, ...)
{
	va_list ap;

	if (!e)
		return -1;
	va_start(ap, fmt);
	error_fill(e, err, path ? strdup(path) : NULL, fmt, ap);
	va_end(ap);
	return -1;
}

int hu_error_setat(struct hu_error *e, int err, const char *dir,
		   const char *name, const char *fmt, ...)
{
	va_list ap;

	if (!e)
		return -1;
	va_start(ap, fmt);
	error_fill(e, err, hu_path_join(dir, name), fmt, ap);
	va_end(ap);
	return -1;
}

void hu_error_clear(struct hu_error *e)
{
	free(e->path);
	free(e->msg);
	e->path = NULL;
	e->msg = NULL;
	e->err = 0;
	e->whole = false;
}

void hu_report_warn(const struct hu_report *r, int err, const char *dir,
		    const char *name, const char *fmt, ...)
{
	struct hu_error w = { 0 };
	va_list ap;

	if (!r || !r->warn)
		return;
	va_start(ap, fmt);
	error_fill(&w, err, hu_path_join(dir, name), fmt, ap);
	va_end(ap);
	r->warn(r->ctx, &w);
	hu_error_clear(&w);
}

/* Keep @n in @b->entries: n == 1 starts a count, else the highest. */
static void entries_keep(struct hu_progress_bytes *b, uint64_t n)
{
	uint64_t had;

	if (n == 1) {
		atomic_store_explicit(&b->entries, n, memory_order_relaxed);
		return;
	}
	had = atomic_load_explicit(&b->entries, memory_order_relaxed);
	while (had < n && !atomic_compare_exchange_weak_explicit(
			&b->entries, &had, n, memory_order_relaxed,
			memory_order_relaxed))
		;
}

void hu_report_phase(const struct hu_report *r, const char *phase,
		     const char *what)
{
	if (r && r->phase)
		r->phase(r->ctx, phase, what);
}

void hu_report_progress(const struct hu_report *r, uint64_t n)
{
	if (r && r->bytes)
		entries_keep(r->bytes, n);
	if (r && r->progress && (n == 1 || n % 256 == 0))
		r->progress(r->ctx, n);
}

/* "dir/name", "name" when dir is empty, "dir" when name is empty; NULL
 * only when memory runs out. */
char *hu_path_join(const char *dir, const char *name)
{
	size_t dl = dir ? strlen(dir) : 0, nl = name ? strlen(name) : 0;
	bool slash = dl && nl && dir[dl - 1] != '/';
	char *p = malloc(dl + slash + nl + 1);

	if (!p)
		return NULL;
	if (dl)
		memcpy(p, dir, dl);
	if (slash)
		p[dl] = '/';
	if (nl)
		memcpy(p + dl + slash, name, nl);
	p[dl + slash + nl] = '\0';
	return p;
}

/* Make @e's path "@dir/<path>": lower levels name what they touched
 * relative to a directory, the level above knows where that lies. */
void hu_error_prefix(struct hu_error *e, const char *dir)
{
	char *p;

	if (!e || e->whole || !dir || !*dir)
		return;
	p = hu_path_join(dir, e->path ? e->path : "");
	if (p) {
		free(e->path);
		e->path = p;
	}
}

void hu_progress_bytes_add(struct hu_progress_bytes *b, uint64_t read,
			   uint64_t written)
{
	/* Relaxed: the counts order nothing, and a line drawn a little
	 * behind the workers is still right a moment later. */
	uint64_t r0 = 0, w0 = 0;

	if (!b)
		return;
	if (read)
		r0 = atomic_fetch_add_explicit(&b->read, read,
					       memory_order_relaxed);
	if (written)
		w0 = atomic_fetch_add_explicit(&b->written, written,
					       memory_order_relaxed);
	if (b->tick && (((r0 + read) >> 20) != (r0 >> 20) ||
			((w0 + written) >> 20) != (w0 >> 20)))
		b->tick(b->ctx);
}
