/* SPDX-License-Identifier: MIT */
/*
 * merge -o of a stack of tarball layers (tarball files, an image's
 * blobs): each tarball is read once, bottom first, straight into the new
 * tree (treeout.c: built beside OUT, renamed into place when complete,
 * removed on failure), with no private copy under TMPDIR and no second
 * read through the view.  The entries are made by the tarball layer's own
 * code (lib/tar: the same paths, duplicates, parents, links, holes and
 * xattrs as its unpack).  The bottom tarball's markers hide nothing and
 * are left out; each tarball above goes over the tree as the view puts a
 * layer over the ones beneath (tardirs.c, tl.over), so the tree is the
 * view of the layers read so far.  HUNION_TAR_STREAM=0 takes the general
 * path (unpack, then the view) instead: the differential test
 * tests/kernel/tarstream.sh compares the two.
 *
 * One case the stream cannot read: a directory beneath, removed by an
 * entry of the tarball above and then made again by a later one (a
 * duplicate), which the view would merge with the directory beneath.
 * Then the part written goes and the general path reads the stack; the
 * warnings of the first try are held until it is known, so that each is
 * given once.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "output/treeout.h"

/* merge.c's words: the two paths read alike. */
static const struct hu_treeout_words merge_words = {
	.bad_name = "not a usable output name",
	.no_parent = "cannot open output's parent",
	.no_create = "cannot create the output directory",
	.no_open = "cannot open the output directory",
	.no_move = "cannot move the new tree into place",
};

bool hu_merge_can_stream(const char *const *layers, size_t n,
			 const struct hu_stack_opts *so,
			 const struct hu_merge_opts *o)
{
	const char *env = getenv("HUNION_TAR_STREAM");
	bool image = false;
	struct stat st;

	/* Formats read as the unpack reads them, files copied (--link
	 * would link to a private copy: the general path says what that
	 * means), and something to write. */
	if (n == 0 || o->dry_run || o->data != HU_DATA_COPY ||
	    so->format != HU_FMT_AUTO || (env && !strcmp(env, "0")))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (hu_oci_operand(layers[i]))
			image = true;
		else if (stat(layers[i], &st) < 0 || !S_ISREG(st.st_mode))
			return false;
	}
	/* A layer over another writes into the directories the one beneath
	 * made, whatever their modes: as root. */
	return (n == 1 && !image) || geteuid() == 0;
}

/* ---- warnings held until the stream is known to have done ------------- */

/* Past this many, the warnings are given as they come: should the stream
 * then fall back, the general path gives them again. */
enum { HELD_MAX = 4096 };

struct held {
	struct hu_report r;		/* what the stream reports to */
	const struct hu_report *to;	/* the caller's report */
	struct hu_error *v;
	size_t n, cap;
	bool passing;
};

static void held_pass(struct held *h)
{
	for (size_t i = 0; i < h->n; i++) {
		if (h->to && h->to->warn)
			h->to->warn(h->to->ctx, &h->v[i]);
		hu_error_clear(&h->v[i]);
	}
	h->n = 0;
}

static void held_warn(void *ctx, const struct hu_error *w)
{
	struct held *h = ctx;

	if (!h->passing && h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 16;
		struct hu_error *v = cap <= HELD_MAX ?
			realloc(h->v, cap * sizeof(*v)) : NULL;

		if (v) {
			h->v = v;
			h->cap = cap;
		} else {
			held_pass(h);
			h->passing = true;
		}
	}
	if (!h->passing) {
		struct hu_error *c = &h->v[h->n];

		*c = *w;	/* a copy of its own: @w is the caller's */
		c->path = w->path ? strdup(w->path) : NULL;
		c->msg = w->msg ? strdup(w->msg) : NULL;
		if ((!w->path || c->path) && (!w->msg || c->msg)) {
			h->n++;
			return;
		}
		hu_error_clear(c);
	}
	if (h->to && h->to->warn)
		h->to->warn(h->to->ctx, w);
}

static void held_progress(void *ctx, uint64_t done)
{
	const struct held *h = ctx;

	h->to->progress(h->to->ctx, done);
}

static void held_phase(void *ctx, const char *phase, const char *what)
{
	const struct held *h = ctx;

	h->to->phase(h->to->ctx, phase, what);
}

static void held_progress_read(void *ctx, const char *what, uint64_t done,
			       uint64_t read, uint64_t size)
{
	const struct held *h = ctx;

	h->to->progress_read(h->to->ctx, what, done, read, size);
}

/* @to's report, its warnings held when @hold. */
static void held_init(struct held *h, const struct hu_report *to, bool hold)
{
	memset(h, 0, sizeof(*h));
	h->to = to;
	h->passing = !hold;
	h->r.ctx = h;
	h->r.warn = held_warn;
	if (to && to->progress)
		h->r.progress = held_progress;
	if (to && to->progress_read)
		h->r.progress_read = held_progress_read;
	if (to && to->phase)
		h->r.phase = held_phase;
	h->r.bytes = to ? to->bytes : NULL;	/* counted as they move */
}

/* The held warnings given (@give) or dropped. */
static void held_end(struct held *h, bool give)
{
	if (give)
		held_pass(h);
	for (size_t i = 0; i < h->n; i++)
		hu_error_clear(&h->v[i]);
	free(h->v);
}

/* ---- the stream ---------------------------------------------------------- */

/* Every layer of @s into the new tree @out; *@fallback when the general
 * path must read it. */
static int stream(const struct hu_stack *s, const char *out,
		  const struct hu_report *r, struct hu_merge_stats *stats,
		  bool *fallback, struct hu_error *e)
{
	struct hu_treeout t;
	int rc;

	rc = hu_treeout_open(&t, out, &merge_words, NULL, 0, e);
	if (rc == 0 && !t.as_root)
		hu_report_warn(r, EPERM, out, NULL,
			       "not running as root: owners are not kept");
	if (rc == 0)
		rc = hu_treeout_begin(&t, e);
	for (size_t i = 0; rc == 0 && i < s->n; i++)
		rc = hu_tarlayer_extract(&s->layers[i], hu_treeout_fd(&t),
					 i > 0, stats, r, fallback, e);
	return hu_treeout_end(&t, rc, e);
}

int hu_merge_stream(char *const layers[], size_t n, const char *out,
		    const struct hu_stack_opts *so,
		    const struct hu_merge_opts *o, struct hu_merge_stats *st,
		    struct hu_error *e)
{
	struct hu_stack_opts files = *so;
	bool fallback = false;
	struct hu_stack s;
	struct held h;
	int rc;

	memset(st, 0, sizeof(*st));
	files.tar_sources = true;
	if (hu_stack_open(&s, layers, n, &files, e) < 0)
		return -1;
	held_init(&h, o->report, s.n > 1);
	rc = stream(&s, out, &h.r, st, &fallback, e);
	hu_stack_close(&s);
	held_end(&h, !fallback);
	if (!fallback)
		return rc;
	hu_error_clear(e);
	memset(st, 0, sizeof(*st));
	if (hu_stack_open(&s, layers, n, so, e) < 0)
		return -1;
	rc = hu_merge_tree(&s, out, o, st, e);
	hu_stack_close(&s);
	return rc;
}
