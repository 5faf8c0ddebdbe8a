/* SPDX-License-Identifier: MIT */
/*
 * fsck: the engine.  It opens the stack, walks the layer checked (the
 * walk of one layer, lwalk.c) with the view of the layers beneath kept
 * alongside, directory by directory, and hands each directory and entry
 * to the checks (fsck.h).  It alone decides, from the mode, the
 * severities and the problem table, whether a problem is repaired, and
 * counts what became of each.
 *
 * Cost: the walk reads the layer checked; beneath it only the names that
 * layer holds are looked up, so a check costs the size of the upper, not
 * of the image (as diff does).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "fsck/fsck.h"

/* A finding held while the walk settles the layer's format. */
struct fsck_held {
	struct hu_fsck_finding f;
	char *path, *detail;
};

/* One directory of the walk: the view beneath it, kept while inside. */
struct fsck_level {
	struct wh_dir *wd;
	struct hu_vdir *below;
	bool merges;
};

struct fsck_run {
	const struct hu_stack *s;
	size_t k;			/* the layer checked */
	struct hu_stack below;		/* layers [0, k) */
	const struct hu_fsck_opts *o;
	struct hu_fsck_stats *st;
	bool may_write;			/* this layer may be repaired */
	bool format_kept;		/* its format recorded (keep_format) */
	bool in_workdir;		/* fsck_workdir() runs: findings name
					 * the workdir as their layer */
	struct hu_vdir *below_root;
	struct fsck_level *lv;		/* the directories of the walk */
	size_t depth, cap;
	/* the problem fsck_found() said to repair, until fsck_done() */
	struct hu_fsck_finding cur;
	char *cur_path, *cur_detail;
	bool pending;
	/* A repair can change what merges beneath it (a directory made
	 * opaque, a redirect removed): the layer is then checked again,
	 * passing over what an earlier pass reported and did not repair
	 * (sorted, with their count at the start of this pass). */
	unsigned int pass;
	char **told;
	size_t ntold, cap_told, nsorted;
	/*
	 * The layer checked reads as NONE while this walk settles its
	 * format (a deferred bottom layer, -n): each directory and entry is
	 * probed as the view probes a deferred layer, and what is found is
	 * held (@held) until the walk ends with the layer NONE.  A probe
	 * that settles it in another format makes the walk start again in
	 * that one (@restart), its findings and counts dropped.
	 */
	bool spec;
	bool spec_partial;		/* a directory it did not descend */
	bool restart;
	struct hu_fsck_stats spec_counted;	/* counted meanwhile */
	struct fsck_held *held;
	size_t nheld, cap_held;
	/* fsck_entry_facts() of the entry at hand */
	struct fsck_facts facts;
	int facts_dirfd;
	const char *facts_name;		/* NULL: nothing kept */
};

const struct hu_layer *fsck_layer(const struct fsck_run *r)
{
	return &r->s->layers[r->k];
}

const struct hu_stack *fsck_below(const struct fsck_run *r)
{
	return &r->below;
}

const struct hu_fsck_opts *fsck_opts(const struct fsck_run *r)
{
	return r->o;
}

bool fsck_layer_is_top(const struct fsck_run *r)
{
	return r->k + 1 == r->s->n;
}

static enum hu_severity severity_of(const struct hu_fsck_opts *o,
				    enum hu_problem_id id)
{
	return o->severity ? o->severity[id] : hu_problem_info(id)->severity;
}

/* May problem @id, of severity @sev, be repaired in this run? */
static bool repair_allowed(const struct fsck_run *r, enum hu_problem_id id,
			   enum hu_severity sev)
{
	const struct hu_problem_info *pi = hu_problem_info(id);

	if (!r->may_write || pi->repair == HU_REPAIR_NONE)
		return false;
	/* In a layer whose format is a guess, which markers are the
	 * foreign ones is a guess too: --format says. */
	if (id == HU_PB_FORMAT_MIXED && fsck_layer(r)->format_tied)
		return false;
	/* an info finding is no problem: only --vacuum repairs one */
	if (sev == HU_SEV_INFO)
		return r->o->vacuum && id == HU_PB_COPYUP_IDENTICAL;
	if (pi->repair == HU_REPAIR_DESTRUCTIVE)
		return r->o->mode == HU_FSCK_YES;
	return r->o->mode >= HU_FSCK_PREEN;
}

/* Hold @f (a check's, -n: no repair, no why) until the walk settles. */
static int hold(struct fsck_run *r, const struct hu_fsck_finding *f,
		struct hu_error *e)
{
	struct fsck_held *h;

	if (r->nheld == r->cap_held) {
		size_t cap = r->cap_held ? 2 * r->cap_held : 16;

		h = realloc(r->held, cap * sizeof(*h));
		if (!h)
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		r->held = h;
		r->cap_held = cap;
	}
	h = &r->held[r->nheld];
	h->f = *f;
	h->path = strdup(f->path);
	h->detail = f->detail ? strdup(f->detail) : NULL;
	if (!h->path || (f->detail && !h->detail)) {
		free(h->path);
		free(h->detail);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	h->f.path = h->path;
	h->f.detail = h->detail;
	r->nheld++;
	return 0;
}

/* The held findings told (@tell) in order, or dropped; freed. */
static int held_end(struct fsck_run *r, bool tell, struct hu_error *e)
{
	int rc = 0;

	for (size_t i = 0; i < r->nheld; i++) {
		if (tell && rc == 0 && r->o->finding)
			rc = r->o->finding(r->o->ctx, &r->held[i].f, e);
		free(r->held[i].path);
		free(r->held[i].detail);
	}
	free(r->held);
	r->held = NULL;
	r->nheld = r->cap_held = 0;
	return rc < 0 ? -1 : 0;
}

/*
 * Findings held at most: past them the layer is settled at once (the
 * walk of detection), so that a layer full of problems costs no more
 * memory than its walk.  NONE: the findings are told, and the next ones
 * as they come; else the check walks the layer again in its format.
 */
#define HELD_MAX 4096

static int spec_settle_now(struct fsck_run *r, struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);

	if (hu_layer_settle(l, e) < 0)
		return -1;
	if (l->format != HU_FMT_NONE) {
		r->restart = true;
		return hu_error_set(e, EAGAIN, NULL, "read again in its format");
	}
	r->spec = false;
	return held_end(r, true, e);
}

static int tell(struct fsck_run *r, const struct hu_fsck_finding *f,
		struct hu_error *e)
{
	if (r->spec) {
		if (hold(r, f, e) < 0)
			return -1;
		return r->nheld < HELD_MAX ? 0 : spec_settle_now(r, e);
	}
	if (r->o->finding && r->o->finding(r->o->ctx, f, e) < 0)
		return -1;
	return 0;
}

static int key_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The key of a finding, or NULL (ENOMEM). */
static char *told_key(const struct fsck_run *r, enum hu_problem_id id,
		      const char *path)
{
	char *key;

	if (asprintf(&key, "%c%zu/%d/%s", r->in_workdir ? 'w' : 'l', r->k,
		     (int)id, path) < 0)
		return NULL;
	return key;
}

/* Was the finding told, and left, in an earlier pass? */
static bool told_before(const struct fsck_run *r, const char *key)
{
	return r->nsorted && bsearch(&key, r->told, r->nsorted,
				     sizeof(*r->told), key_cmp);
}

/* Remember a finding left unrepaired (@key taken); -1 ENOMEM. */
static int told_add(struct fsck_run *r, char *key)
{
	if (r->ntold == r->cap_told) {
		size_t cap = r->cap_told ? 2 * r->cap_told : 64;
		char **v = realloc(r->told, cap * sizeof(*v));

		if (!v) {
			free(key);
			return -1;
		}
		r->told = v;
		r->cap_told = cap;
	}
	r->told[r->ntold++] = key;
	return 0;
}

static void told_free(struct fsck_run *r)
{
	for (size_t i = 0; i < r->ntold; i++)
		free(r->told[i]);
	free(r->told);
	r->told = NULL;
	r->ntold = r->cap_told = r->nsorted = 0;
}

static void facts_forget(struct fsck_run *r)
{
	free(r->facts.xattrs);
	r->facts.xattrs = NULL;
	r->facts_name = NULL;
}

int fsck_entry_facts(struct fsck_run *r, const struct fsck_dir *d,
		     const char *name, const struct fsck_facts **out,
		     struct hu_error *e)
{
	struct fsck_facts *f = &r->facts;

	*out = NULL;
	if (r->facts_name && r->facts_dirfd == d->wd->fd &&
	    strcmp(r->facts_name, name) == 0) {
		*out = f;
		return 0;
	}
	facts_forget(r);
	if (fstatat(d->wd->fd, name, &f->st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 :
			wh_fail(e, errno, fsck_layer(r)->path, d->wd->path,
				name, "cannot stat");
	if (hu_llistxattr_at(d->wd->fd, name, &f->xattrs, &f->xlen) < 0) {
		if (errno == ENOENT)
			return 0;
		return wh_fail(e, errno, fsck_layer(r)->path, d->wd->path,
			       name, "cannot list xattrs");
	}
	r->facts_dirfd = d->wd->fd;
	r->facts_name = name;
	*out = f;
	return 0;
}

bool fsck_xattr_listed(const char *list, ssize_t len, const char *attr)
{
	for (const char *a = list; a && a < list + len; a += strlen(a) + 1)
		if (strcmp(a, attr) == 0)
			return true;
	return false;
}

/*
 * Before the first repair of a layer: its format recorded on its root
 * (hu_layer_record_format()), so that a repair removing the last markers
 * that showed it does not change the format the layer reads in, and with
 * it what the next run finds (a lookalike left for -y found by that -y).
 * Not for the workdir, nor for a half-converted layer, whose conversion
 * record says its formats (and whose repair changes its format).
 */
static int keep_format(struct fsck_run *r, struct hu_error *why)
{
	const struct hu_layer *l = fsck_layer(r);

	if (r->format_kept || r->in_workdir || hu_layer_half(l))
		return 0;
	if (hu_layer_record_format(l, why) < 0)
		return -1;
	r->format_kept = true;
	return 0;
}

static void cur_free(struct fsck_run *r)
{
	free(r->cur_path);
	free(r->cur_detail);
	r->cur_path = r->cur_detail = NULL;
	r->pending = false;
}

int fsck_found(struct fsck_run *r, enum hu_problem_id id, const char *dir,
	       const char *name, const char *detail, struct hu_error *e)
{
	enum hu_severity sev = severity_of(r->o, id);
	struct hu_error why = { 0 };
	struct hu_fsck_finding f = {
		.id = id, .severity = sev,
		.layer = r->in_workdir ? r->o->workdir : fsck_layer(r)->path,
		.detail = detail, .action = HU_FSCK_LEFT,
	};
	char *path, *key;
	int rc;

	if (sev == HU_SEV_IGNORE)
		return 0;
	path = hu_path_join(dir ? dir : "", name ? name : "");
	key = path ? told_key(r, id, path) : NULL;
	if (!key) {
		free(path);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	if (told_before(r, key)) {
		free(key);
		free(path);
		return 0;
	}
	r->st->found[sev]++;
	r->spec_counted.found[sev] += r->spec;
	f.path = path;
	if (repair_allowed(r, id, sev)) {
		free(key);
		cur_free(r);
		r->cur = f;
		r->cur_path = path;
		r->cur_detail = detail ? strdup(detail) : NULL;
		if (detail && !r->cur_detail) {
			cur_free(r);
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		}
		r->cur.path = r->cur_path;
		r->cur.detail = r->cur_detail;
		r->pending = true;
		if (keep_format(r, &why) < 0)
			return fsck_done(r, -1, &why, e) < 0 ? -1 : 0;
		return 1;
	}
	if (sev >= HU_SEV_WARNING) {
		r->st->left++;
		r->spec_counted.left += r->spec;
	}
	rc = tell(r, &f, e);
	free(path);
	if (rc < 0)
		free(key);
	else if (told_add(r, key) < 0)
		rc = hu_error_set(e, ENOMEM, NULL, "out of memory");
	return rc;
}

int fsck_done(struct fsck_run *r, int rc, struct hu_error *why,
	      struct hu_error *e)
{
	int ret;

	if (!r->pending)
		return hu_error_set(e, EINVAL, NULL,
				    "fsck_done() without a problem to repair");
	facts_forget(r);	/* the repair may have changed the entry */
	/* ... or a directory's xattrs: read them afresh */
	for (size_t i = 0; i < r->depth; i++)
		r->lv[i].wd->xlisted = false;
	if (rc == 0) {
		r->cur.action = r->o->dry_run ? HU_FSCK_WOULD :
						HU_FSCK_REPAIRED;
		r->st->repaired++;
	} else {
		char *key = told_key(r, r->cur.id, r->cur.path);

		r->cur.action = HU_FSCK_FAILED;
		r->cur.why = why;
		r->st->failed++;
		if (r->cur.severity >= HU_SEV_WARNING)
			r->st->left++;
		/* a failed repair is not tried again in a later pass */
		if (!key || told_add(r, key) < 0) {
			cur_free(r);
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		}
	}
	ret = tell(r, &r->cur, e);
	cur_free(r);
	if (why)
		hu_error_clear(why);
	if (ret == 0)
		ret = hu_interrupt_check(e);
	return ret;
}

/* ---- the view beneath, alongside the walk -------------------------------- */

/* The directory @name of view directory @d, or NULL (*@out) when the view
 * has no directory there. */
static int below_child(struct hu_vdir *d, const char *name,
		       struct hu_vdir **out, struct hu_error *e)
{
	struct hu_ventry ent;
	int rc;

	*out = NULL;
	rc = hu_vdir_lookup(d, name, &ent, e);
	if (rc <= 0 || !S_ISDIR(ent.st.st_mode))
		return rc < 0 ? -1 : 0;
	return hu_vdir_open_child(d, &ent, out, e);
}

/* An absolute redirect: its path from the root of the view beneath. */
static int below_path(struct fsck_run *r, const char *path,
		      struct hu_vdir **out, struct hu_error *e)
{
	char *copy = strdup(path), *save = NULL;
	struct hu_vdir *d = r->below_root, *next;
	int rc = 0;

	*out = NULL;
	if (!copy)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (char *c = strtok_r(copy, "/", &save); c && d;
	     c = strtok_r(NULL, "/", &save)) {
		rc = below_child(d, c, &next, e);
		if (d != r->below_root)
			hu_vdir_close(d);
		d = next;
		if (rc < 0)
			break;
	}
	free(copy);
	if (rc == 0 && d == r->below_root)
		d = NULL;	/* "/" redirects nowhere a directory can go */
	*out = d;
	return rc;
}

/* What lies beneath directory @wd, whose parent level is @up (NULL at
 * the root): its redirect followed, as the view's lookup does. */
static int below_of(struct fsck_run *r, const struct fsck_level *up,
		    const struct wh_dir *wd, struct hu_vdir **out,
		    struct hu_error *e)
{
	bool redirect = wd->redirect && hu_redirect_valid(wd->redirect);

	*out = NULL;
	if (!up)
		return 0;	/* the root's is the view's root */
	/* An absolute redirect is looked up from the root whatever the
	 * parent merges with (namei.c: poe = roe), an opaque parent too. */
	if (redirect && wd->redirect[0] == '/' &&
	    wd->opaque != HU_OPAQUE_YES)
		return below_path(r, wd->redirect, out, e);
	if (!up->merges)
		return 0;	/* nothing beneath reaches here */
	if (redirect)
		return below_child(up->below, wd->redirect, out, e);
	return below_child(up->below, wd->name, out, e);
}

static struct fsck_level *level(struct fsck_run *r)
{
	return &r->lv[r->depth - 1];
}

/* After a probe of the layer checked (@rc its result, in @dir): settled
 * in a format other than NONE, the walk so far read it wrong. */
static int spec_probed(struct fsck_run *r, int rc, const char *dir,
		       struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);

	if (rc < 0)
		return wh_prefix(e, l->path, dir);
	if (hu_layer_is_deferred(l) || l->format == HU_FMT_NONE)
		return 0;
	r->restart = true;
	return hu_error_set(e, EAGAIN, NULL, "read again in its format");
}

/* The xattrs of directory @wd, as its walk listed them. */
static int probe_dir(struct fsck_run *r, const struct wh_dir *wd,
		     struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);

	if (!wd->xlisted)
		return hu_layer_probe_dir(l, wd->fd, e);
	return hu_layer_probe_xattr_names(l, wd->xattrs, wd->xlen, e);
}

static int dir_pre(void *ctx, struct wh_dir *wd, struct hu_error *e)
{
	struct fsck_run *r = ctx;
	struct fsck_level *up = r->depth ? level(r) : NULL, *lv;
	struct hu_vdir *below = NULL;
	struct fsck_dir d;

	if (r->depth == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 16;
		struct fsck_level *v = realloc(r->lv, cap * sizeof(*v));

		if (!v)
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		r->lv = v;
		r->cap = cap;
	}
	if (r->spec && spec_probed(r, probe_dir(r, wd, e), wd->path, e) < 0)
		return -1;
	if (!up)
		below = r->below_root;
	else if (below_of(r, up, wd, &below, e) < 0)
		return wh_prefix(e, fsck_layer(r)->path, wd->path);
	lv = &r->lv[r->depth++];
	lv->wd = wd;
	lv->below = below;
	/* The kernel ignores an opaque mark on a layer root. */
	lv->merges = below && (!up || wd->opaque != HU_OPAQUE_YES);
	d = (struct fsck_dir){ wd, below, lv->merges };
	if (fsck_marker_dir(r, &d, e) < 0 || fsck_overlay_dir(r, &d, e) < 0)
		return -1;
	return hu_interrupt_check(e);
}

static void level_pop(struct fsck_run *r)
{
	struct fsck_level *lv = level(r);

	if (lv->below != r->below_root)
		hu_vdir_close(lv->below);
	r->depth--;
}

static int dir_post(void *ctx, struct wh_dir *wd, struct hu_error *e)
{
	level_pop(ctx);
	return 0;
}

static void dir_abort(void *ctx, struct wh_dir *wd)
{
	level_pop(ctx);
}

void fsck_entry_checked(struct fsck_run *r)
{
	r->st->entries++;
	r->spec_counted.entries += r->spec;
	hu_report_progress(r->o->report, r->st->entries);
}

static int entry(void *ctx, struct wh_dir *wd, const struct wh_ent *ent,
		 struct hu_error *e)
{
	struct fsck_run *r = ctx;
	struct fsck_level *lv = level(r);
	struct fsck_dir d = { wd, lv->below, lv->merges };
	int rc;

	fsck_entry_checked(r);
	facts_forget(r);
	if (r->spec &&
	    spec_probed(r, hu_layer_probe_own(fsck_layer(r), wd->fd, ent->name,
					      ent->type, e), wd->path, e) < 0)
		return -1;
	rc = fsck_marker_entry(r, &d, ent, e);
	if (rc < 0)
		return -1;
	if (rc > 0) {	/* not the layer's own: no more checks, no descent */
		r->spec_partial |= S_ISDIR(ent->type);
		return hu_interrupt_check(e);
	}
	rc = fsck_overlay_entry(r, &d, ent, e) < 0 ||
	     fsck_vacuum_entry(r, &d, ent, e) < 0 ||
	     hu_interrupt_check(e) < 0;
	facts_forget(r);
	if (rc)
		return -1;
	if (ent->kind == HU_MARK_NONE && S_ISDIR(ent->type))
		return 1;
	r->spec_partial |= S_ISDIR(ent->type);
	return 0;
}

/* ---- one layer ------------------------------------------------------------ */

static int walk_layer(struct fsck_run *r, struct hu_error *e)
{
	static const struct wh_walk_ops ops = {
		.dir_pre = dir_pre, .entry = entry, .dir_post = dir_post,
		.dir_abort = dir_abort, .oci_invalid_as_entries = true,
	};
	int rc;

	r->below_root = NULL;
	if (r->k > 0 && hu_vdir_open_root(&r->below, &r->below_root, e) < 0)
		return -1;
	hu_report_phase(r->o->report, HU_PHASE_CHECKING, fsck_layer(r)->path);
	rc = wh_walk(fsck_layer(r), &ops, r, e);
	while (r->depth)
		level_pop(r);
	hu_vdir_close(r->below_root);
	r->below_root = NULL;
	return rc;
}

/* The walk is over and the layer still deferred: settled NONE if the
 * probes saw all of it, else by detection, read again if not NONE. */
static int spec_end(struct fsck_run *r, struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);

	if (!hu_layer_is_deferred(l))
		return 0;	/* settled NONE on the way */
	if (!r->spec_partial && l->refs != HU_REFS_ASK) {
		hu_layer_settle_plain(l);
		return 0;
	}
	if (hu_layer_settle(l, e) < 0)
		return -1;
	r->restart = l->format != HU_FMT_NONE;
	return 0;
}

/* Start the layer's walk again, as if it had not been read. */
static void spec_undo(struct fsck_run *r, size_t ntold)
{
	struct hu_fsck_stats *st = r->st;
	const struct hu_fsck_stats *c = &r->spec_counted;

	(void)held_end(r, false, NULL);
	st->entries -= c->entries;
	st->left -= c->left;
	for (size_t i = 0; i <= HU_SEV_ERROR; i++)
		st->found[i] -= c->found[i];
	while (r->ntold > ntold)
		free(r->told[--r->ntold]);
	r->spec = r->restart = false;
}

static int check_layer(struct fsck_run *r, struct hu_error *e)
{
	const struct hu_layer *l = fsck_layer(r);
	size_t ntold = r->ntold;
	int rc;

	r->format_kept = false;
	if (hu_layer_tarball(l))
		return fsck_tarball(r, l, e);
	/*
	 * A deferred layer (the bottom one, -n) is settled by its check's
	 * walk, not walked first by detection: at most once more, where
	 * its probes settle it in a format other than NONE.  A repair
	 * needs the format before it plans one.
	 */
	r->spec = hu_layer_is_deferred(l) && r->o->mode == HU_FSCK_CHECK;
	if (!r->spec && hu_layer_settle(l, e) < 0)
		return -1;
	memset(&r->spec_counted, 0, sizeof(r->spec_counted));
	r->spec_partial = false;
	rc = walk_layer(r, e);
	if (rc == 0 && r->spec)
		rc = spec_end(r, e);
	if (r->restart) {
		hu_error_clear(e);
		spec_undo(r, ntold);
		rc = walk_layer(r, e);
	}
	if (r->spec) {
		r->spec = false;
		if (held_end(r, rc == 0, e) < 0)
			rc = -1;
	}
	if (rc == 0)
		rc = fsck_overlay_layer(r, e);
	return rc;
}

/*
 * What the view and detection meet while fsck reads: the checks of a
 * layer find that layer's problems themselves (and can repair them), so
 * the sink passes over the layers checked; a problem met in a layer
 * beneath them (without --all-layers) is reported, as one fsck cannot
 * repair.
 */
struct sink_ctx {
	const struct hu_stack *s;	/* NULL while the stack opens */
	size_t n, first_checked;
	const struct hu_fsck_opts *o;
	struct hu_fsck_stats *st;
	/* what was reported: a reader meets a problem each time it passes
	 * (a bad redirect, on the directory and on a lookup through it) */
	char **seen;
	size_t nseen;
	/* What the stack's open met, held until it is open: only then are
	 * its layers' names known (an image operand's layers), and so which
	 * are checked, whose checks say it themselves. */
	struct hu_problem *held;
	size_t nheld;
};

/* Has @p been reported?  If not, remember it: 1 seen, 0 new, -1 ENOMEM. */
static int sink_seen(struct sink_ctx *c, const struct hu_problem *p)
{
	char *key, **v;

	if (asprintf(&key, "%d/%s/%s", (int)p->id, p->layer ? p->layer : "",
		     p->path) < 0)
		return -1;
	for (size_t i = 0; i < c->nseen; i++)
		if (strcmp(c->seen[i], key) == 0) {
			free(key);
			return 1;
		}
	v = realloc(c->seen, (c->nseen + 1) * sizeof(*v));
	if (!v) {
		free(key);
		return -1;
	}
	c->seen = v;
	c->seen[c->nseen++] = key;
	return 0;
}

static void held_free(struct sink_ctx *c)
{
	for (size_t i = 0; i < c->nheld; i++) {
		free((char *)c->held[i].layer);
		free((char *)c->held[i].path);
		free((char *)c->held[i].detail);
	}
	free(c->held);
	c->held = NULL;
	c->nheld = 0;
}

static int hold_problem(struct sink_ctx *c, const struct hu_problem *p,
			struct hu_error *e)
{
	struct hu_problem *v = realloc(c->held,
				       (c->nheld + 1) * sizeof(*v));
	struct hu_problem *h;

	if (!v)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	c->held = v;
	h = &v[c->nheld];
	*h = (struct hu_problem){ p->id, p->layer ? strdup(p->layer) : NULL,
				  strdup(p->path),
				  p->detail ? strdup(p->detail) : NULL };
	c->nheld++;
	if ((p->layer && !h->layer) || !h->path || (p->detail && !h->detail))
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	return 0;
}

static int sink_found(void *ctx, const struct hu_problem *p,
		      struct hu_error *e)
{
	struct sink_ctx *c = ctx;
	enum hu_severity sev = severity_of(c->o, p->id);
	struct hu_fsck_finding f = {
		.id = p->id, .severity = sev, .layer = p->layer,
		.path = p->path, .detail = p->detail, .action = HU_FSCK_LEFT,
	};

	if (!c->s)
		return hold_problem(c, p, e);
	/* A tie is detection's alone to see: no check finds it. */
	for (size_t i = c->first_checked; i < c->n; i++)
		if (p->layer && strcmp(p->layer, c->s->layers[i].path) == 0 &&
		    p->id != HU_PB_FORMAT_TIED)
			return 0;
	if (sev == HU_SEV_IGNORE)
		return 0;
	switch (sink_seen(c, p)) {
	case 1:
		return 0;
	case -1:
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	c->st->found[sev]++;
	if (sev >= HU_SEV_WARNING)
		c->st->left++;
	return c->o->finding ? c->o->finding(c->o->ctx, &f, e) : 0;
}

/* The stack is open: its layers, an image operand's expanded, are what
 * the sink compares with (the operands only while it opens). */
static int stack_opened(struct sink_ctx *c, const struct hu_stack *s,
			struct hu_error *e)
{
	int rc = 0;

	c->s = s;
	c->n = s->n;
	c->first_checked = c->o->all_layers ? 0 : s->n - 1;
	for (size_t i = 0; i < c->nheld && rc == 0; i++)
		rc = sink_found(c, &c->held[i], e);
	held_free(c);
	return rc;
}

/* The layers (from @from) and the workdir a repair may write, into @d:
 * their count. */
static size_t written_dirs(const struct hu_stack *s, size_t from,
			   const struct hu_fsck_opts *o, int workfd,
			   struct hu_dir_ref *d)
{
	size_t n = 0;

	for (size_t k = from; k < s->n; k++)
		if (k + 1 == s->n || o->repair_lowers)
			d[n++] = (struct hu_dir_ref){ s->layers[k].fd,
						      s->layers[k].path,
						      "layer", true, false };
	if (workfd >= 0)
		d[n++] = (struct hu_dir_ref){ workfd, o->workdir, "workdir",
					      true, false };
	return n;
}

/* No layer inside another, nor the workdir inside a lower: a repair of
 * the one would change the other, which may be a lower fsck only reads.
 * (The workdir and the top layer nested is the finding workNested.) */
static int check_apart(const struct hu_stack *s,
		       const struct hu_fsck_opts *o, int workfd,
		       struct hu_dir_ref *d, struct hu_error *e)
{
	size_t n = 0;

	/* a layer read from its path index is a file, no directory; the
	 * top one is written, so never one */
	for (size_t k = 0; k + 1 < s->n; k++)
		if (!s->layers[k].pindex)
			d[n++] = (struct hu_dir_ref){ s->layers[k].fd,
				s->layers[k].path, "lower layer", false,
				false };
	d[n] = (struct hu_dir_ref){ s->layers[s->n - 1].fd,
				    s->layers[s->n - 1].path, "top layer",
				    false, false };
	if (hu_dirs_apart(d, n + 1, e) < 0)
		return -1;
	if (workfd < 0)
		return 0;
	d[n] = (struct hu_dir_ref){ workfd, o->workdir, "workdir", false,
				    false };
	return hu_dirs_apart(d, n + 1, e);
}

/* Refuse to write a directory a mounted overlay uses; where that cannot
 * be known, unless --force. */
static int check_unmounted(const struct hu_stack *s, size_t from,
			   const struct hu_fsck_opts *o, int workfd,
			   struct hu_dir_ref *d, struct hu_error *e)
{
	struct hu_mount_use use = { 0 };
	size_t n = written_dirs(s, from, o, workfd, d);
	int rc = hu_dirs_in_use(d, n, &use, e);

	if (rc <= 0 || (rc == 2 && o->force)) {
		if (rc == 2)
			hu_report_warn(o->report, 0, use.mountpoint, NULL,
				       "the %s mounted here names a layer by "
				       "a path that cannot be resolved (%s): "
				       "--force: repairing anyway",
				       use.fstype, use.option);
		hu_mount_use_free(&use);
		return rc < 0 ? -1 : 0;
	}
	if (rc == 1)
		hu_error_set(e, EBUSY, use.mountpoint, "%s is the %s of the "
			     "%s mounted here: unmount it before repairing",
			     use.layer, use.role, use.fstype);
	else
		hu_error_set(e, EBUSY, use.mountpoint, "the %s mounted here "
			     "names a layer by a path that cannot be resolved "
			     "(%s): whether it uses %s cannot be known: unmount "
			     "it before repairing (or --force)", use.fstype,
			     use.option, n > 1 ? "the layers repaired" :
			     d[0].path);
	e->whole = true;
	hu_mount_use_free(&use);
	return -1;
}

/* Refuse to repair what must not be written: a tarball, a layer on a
 * read-only filesystem, layers nested, a layer in use by a mounted
 * overlay. */
static int check_writable(const struct hu_stack *s, size_t from,
			  const struct hu_fsck_opts *o, int workfd,
			  struct hu_error *e)
{
	struct hu_dir_ref *d;
	int rc;

	for (size_t k = from; k < s->n; k++) {
		const struct hu_layer *l = &s->layers[k];
		struct statvfs vfs;

		if (k + 1 < s->n && !o->repair_lowers)
			continue;
		if (hu_layer_tarball(l))
			return hu_error_set(e, 0, l->path, "a tarball layer "
					    "is checked read only (-n): -p "
					    "and -y do not apply; nothing was "
					    "changed");
		if (fstatvfs(l->fd, &vfs) == 0 && (vfs.f_flag & ST_RDONLY))
			return hu_error_set(e, EROFS, l->path,
					    "cannot repair");
	}
	d = calloc(s->n + 1, sizeof(*d));
	if (!d)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	rc = check_apart(s, o, workfd, d, e) < 0 ||
	     check_unmounted(s, from, o, workfd, d, e) < 0 ? -1 : 0;
	free(d);
	return rc;
}

/* Passes at most: a repair pass can only remove or mark entries, so what
 * a repair exposes is found in the next; repairs that still do not
 * converge in the last are left to the next run, whose -n shows them. */
#define FSCK_PASSES 3

/* One pass: each layer checked, against those beneath it. */
static int check_stack(struct fsck_run *r, size_t first, struct hu_error *e)
{
	const struct hu_fsck_opts *o = r->o;
	size_t n = r->s->n;

	for (r->k = first; r->k < n; r->k++) {
		bool top = r->k + 1 == n;

		r->below = (struct hu_stack){ .n = r->k,
					      .layers = r->s->layers,
					      .problems = r->s->problems };
		r->may_write = o->mode != HU_FSCK_CHECK &&
			       (top || o->repair_lowers);
		if (check_layer(r, e) < 0)
			return -1;
	}
	return 0;
}

int hu_fsck(char *const paths[], size_t n, const struct hu_stack_opts *so,
	    const struct hu_fsck_opts *o, struct hu_fsck_stats *st,
	    struct hu_error *e)
{
	struct sink_ctx sc = { .o = o, .st = st };
	struct hu_problem_sink sink = { HU_PB_COLLECT, sink_found, &sc };
	struct hu_stack_opts sopts = *so;
	struct hu_stack s;
	struct fsck_run r = { 0 };
	/* a dry run refuses what the real run would refuse */
	bool writes = o->mode != HU_FSCK_CHECK, was_dry = hu_wr_dry_run();
	bool opened = false;
	uint64_t counted = 0, repaired;
	int workfd = -1, rc = -1;

	memset(st, 0, sizeof(*st));
	if (o->dry_run && o->mode == HU_FSCK_CHECK)
		return hu_error_set(e, EINVAL, NULL, "--dry-run shows "
				    "repairs: it needs -p or -y");
	hu_wr_set_dry_run(o->dry_run);
	sopts.problems = &sink;
	sopts.workdir_given = o->workdir != NULL;
	/* The bottom layer, where markers hide nothing (most often the base,
	 * the biggest), is read where the upper has names: it settles its
	 * format only when the view meets an OCI marker in it (as diff
	 * does).  The layers between are detected with the one checked,
	 * side by side (layer.c): deferred, each was walked all the same
	 * once the view met its first marker (a kernel-made layer shows
	 * them at once), stopping the check walk, whose lookups probed it
	 * name by name until then.  Checked (-n, --all-layers or alone), the
	 * bottom layer is settled by its check's walk (check_layer()). */
	if ((!o->all_layers && n > 1) || o->mode == HU_FSCK_CHECK)
		sopts.defer_below = 1;
	/* ... unless its first directories show a marker: it would settle
	 * at once, then detected alone, where at the open its detection
	 * runs beside the others'. */
	if (o->all_layers && o->mode == HU_FSCK_CHECK)
		sopts.defer_look = 64;
	if (hu_stack_open(&s, paths, n, &sopts, e) < 0)
		goto out;
	opened = true;
	if (stack_opened(&sc, &s, e) < 0)
		goto out;
	if (o->workdir) {
		/* the user's path, outside every layer: followed */
		workfd = open(o->workdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (workfd < 0) {
			hu_error_set(e, errno, o->workdir, "cannot open the "
				     "workdir");
			goto out;
		}
	}
	if (writes && check_writable(&s, sc.first_checked, o, workfd, e) < 0)
		goto out;
	if (!writes && hu_warn_mounted(&s, o->workdir, workfd, "the check may "
				       "see changes in progress", o->report,
				       e) < 0)
		goto out;
	r.s = &s;
	r.o = o;
	r.st = st;
	/*
	 * Check, and again while the last pass repaired something (e2fsck
	 * restarts the same way): a repair can change what merges with what
	 * beneath it (a directory made opaque, a redirect gone), or what
	 * the layer is (a conversion finished), so that what was checked
	 * before it reads differently now.  Each pass opens the stack
	 * afresh and passes over what an earlier one reported and left.
	 */
	for (r.pass = 1;; r.pass++) {
		repaired = st->repaired;
		if (check_stack(&r, sc.first_checked, e) < 0)
			goto out;
		if (r.pass == 1)
			counted = st->entries;
		if (!writes || o->dry_run || st->repaired == repaired ||
		    r.pass == FSCK_PASSES)
			break;
		if (r.ntold)
			qsort(r.told, r.ntold, sizeof(*r.told), key_cmp);
		r.nsorted = r.ntold;
		sc.s = NULL;
		hu_stack_close(&s);
		opened = false;
		if (hu_stack_open(&s, paths, n, &sopts, e) < 0)
			goto out;
		opened = true;
		if (stack_opened(&sc, &s, e) < 0)
			goto out;
	}
	st->entries = counted;	/* each entry counted once */
	if (o->workdir) {
		r.k = s.n - 1;
		r.below = (struct hu_stack){ .n = r.k, .layers = s.layers,
					     .problems = s.problems };
		r.may_write = writes;
		r.in_workdir = true;
		rc = fsck_workdir(&r, o->workdir, e);
		r.in_workdir = false;
		if (rc < 0)
			goto out;
	}
	rc = 0;
out:
	/* stopped in a later pass (an interrupt): each entry counted once */
	if (rc < 0 && r.pass > 1)
		st->entries = counted;
	cur_free(&r);
	told_free(&r);
	facts_forget(&r);
	free(r.lv);
	if (workfd >= 0)
		close(workfd);
	if (opened)
		hu_stack_close(&s);
	for (size_t i = 0; i < sc.nseen; i++)
		free(sc.seen[i]);
	free(sc.seen);
	held_free(&sc);
	hu_wr_set_dry_run(was_dry);
	return rc;
}
