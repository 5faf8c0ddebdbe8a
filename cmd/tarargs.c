/* SPDX-License-Identifier: MIT */
/* The tarball options that flatten and diff --oci share (OPT_TAR_OUT in
 * hunion.c): collected while parsing, then checked into hu_tarout_opts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"

int tar_opt(struct tar_args *t, const struct parsed_opt *o)
{
	if (!strcmp(o->name, "compress"))
		t->compress = o->arg;
	else if (!strcmp(o->name, "level"))
		t->level = o->arg;
	else if (!strcmp(o->name, "threads"))
		t->threads = o->arg;
	else if (!strcmp(o->name, "descriptor"))
		t->descriptor = o->arg;
	else if (!strcmp(o->name, "clamp-mtime"))
		t->clamp = o->arg;
	else if (!strcmp(o->name, "opaque-markers"))
		t->opaque_markers = true;
	else
		return 0;
	return 1;
}

bool parse_num(const char *s, long long min, long long max, long long *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return false;
	*out = v;
	return true;
}

/* --threads: zstd's or xz's workers.  More than the online cores only cost
 * memory (zstd then fails for it): clamp, and say so. */
static int threads_resolve(const struct cmd *c, const char *arg,
			   struct hu_tarout_opts *to)
{
	struct hu_report r = front_report();
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	long long v;

	if (to->compress != HU_COMP_ZSTD && to->compress != HU_COMP_XZ)
		return cmd_usage_error(c, "--threads needs zstd or xz "
				       "compression");
	if (!parse_num(arg, 0, 1024, &v))
		return cmd_usage_error(c, "invalid --threads '%s' (0 for all "
				       "cores, up to 1024)", arg);
	if (cores > 0 && v > cores) {
		hu_report_warn(&r, 0, NULL, NULL, "--threads=%lld: more than "
			       "the %ld online cores; using %ld", v, cores,
			       cores);
		v = cores;
	}
	to->threads = (int)v;
	return 0;
}

/* The last second of year 9999: a later time has no RFC 3339 form of
 * four digits, and skopeo and umoci refuse an image dated so. */
#define SDE_MAX 253402300799LL

int sde_parse(const struct cmd *c, const char *sde, long long *v)
{
	if (!parse_num(sde, 0, SDE_MAX, v))
		return cmd_usage_error(c, "invalid SOURCE_DATE_EPOCH '%s' "
				       "(seconds since 1970, at most %lld: "
				       "the end of year 9999)", sde, SDE_MAX);
	return 0;
}

/* What the output's name says, and what --compress says: they must
 * agree. */
static int compress_resolve(const struct cmd *c, const struct tar_args *t,
			    const char *out, struct hu_tarout_opts *to)
{
	enum hu_compress named = out ? HU_COMP_NONE : HU_COMP_GZIP;
	int says = out ? hu_compress_for_path(out, &named) : 0;
	bool given = t->compress && strcmp(t->compress, "auto");

	if (says < 0)
		return cmd_usage_error(c, "%s: a compression hunion cannot "
				       "write (it writes %s)", out,
				       hu_compress_suffixes);
	to->compress = named;
	if (given && hu_compress_parse(t->compress, &to->compress) < 0)
		return cmd_usage_error(c, "invalid --compress '%s' (choose "
				       "auto, none, gzip, zstd, xz or bzip2)",
				       t->compress);
	if (given && says > 0 && to->compress != named)
		return cmd_usage_error(c, "--compress=%s contradicts the name "
				       "%s, which says %s", t->compress, out,
				       named == HU_COMP_NONE ? "uncompressed" :
				       hu_compress_name(named));
	if (!hu_compress_oci(to->compress) && (!out || t->layer ||
					       t->descriptor))
		return cmd_usage_error(c, "%s: an OCI layer has no media type "
				       "for %s (choose none, gzip or zstd)",
				       !out ? "an image" : t->descriptor ?
				       "--descriptor" : out,
				       hu_compress_name(to->compress));
	return 0;
}

int tar_args_resolve(const struct cmd *c, const struct tar_args *t,
		     const char *out, struct hu_tarout_opts *to)
{
	long long v;
	int min, max;

	memset(to, 0, sizeof(*to));
	to->bytes = progress_bytes();
	if (compress_resolve(c, t, out, to) < 0)
		return -1;
	if (t->level) {
		if (hu_compress_levels(to->compress, &min, &max) < 0)
			return cmd_usage_error(c, "--level needs "
					       "compression (gzip, zstd, xz "
					       "or bzip2)");
		if (!parse_num(t->level, min, max, &v))
			return cmd_usage_error(c, "invalid --level '%s' "
					       "(%d to %d)", t->level, min,
					       max);
		to->level = (int)v;
	}
	if (t->threads && threads_resolve(c, t->threads, to) < 0)
		return -1;
	return clamp_resolve(c, t->clamp, &to->clamp_mtime, &to->mtime_max,
			     NULL);
}

int clamp_resolve(const struct cmd *c, const char *clamp, bool *on,
		  int64_t *max, long long *sde_out)
{
	const char *sde = getenv("SOURCE_DATE_EPOCH");
	long long v = 0;

	/* checked whatever else is given: an image's timestamps are
	 * SOURCE_DATE_EPOCH's even when --clamp-mtime clamps the mtimes */
	if (sde && *sde && sde_parse(c, sde, &v) < 0)
		return -1;
	if (sde_out)
		*sde_out = sde && *sde ? v : -1;
	*on = false;
	if (clamp || (sde && *sde)) {
		if (clamp && !parse_num(clamp, 0, INT64_MAX / 2, &v))
			return cmd_usage_error(c, "invalid --clamp-mtime '%s' "
					       "(seconds since 1970)", clamp);
		*on = true;
		*max = v;
	}
	return 0;
}

/* Write the tarball: @fill streams the entries, this closes the stream,
 * writes the descriptor and renames both into place. */
static int write_both(const struct hu_tarout_opts *to, struct hu_outfile *f,
		      bool desc, tar_fill_fn fill, void *ctx,
		      struct hu_digests *d, struct hu_error *e)
{
	struct hu_tarout_opts o = *to;
	struct hu_digests own;
	struct hu_tarout *t;
	int rc;

	if (desc && !d)
		d = &own;
	o.no_digests = !d;
	if (hu_tarout_open(&t, f[0].fd, &o, e) < 0)
		return -1;
	rc = fill(ctx, t, e);
	front_progress_done();
	if (rc < 0) {
		hu_tarout_abort(t);
		return -1;
	}
	if (hu_tarout_close(t, d, e) < 0)
		return -1;
	return commit_with_descriptor(f, desc ? d : NULL, e);
}

int commit_with_descriptor(struct hu_outfile f[2], const struct hu_digests *d,
			   struct hu_error *e)
{
	char json[512];
	size_t n;

	if (!d)
		return hu_outfile_commit(&f[0], e);
	n = hu_descriptor_json(d, json, sizeof(json));
	if (hu_outfile_write(&f[1], json, n, e) < 0)
		return -1;
	return hu_outfile_commit2(f, e);
}

int tar_write(const struct tar_args *ta, const char *path,
	      const struct hu_stack *s, const struct hu_tarout_opts *to,
	      tar_fill_fn fill, void *ctx, struct hu_digests *d,
	      struct hu_error *e)
{
	struct hu_outfile f[2] = { { .fd = -1, .dirfd = -1 },
				   { .fd = -1, .dirfd = -1 } };
	const char *paths[2] = { path, ta->descriptor };
	bool desc = ta->descriptor != NULL;
	int rc = -1;

	/* The pair appears together or not at all (hu_outfile_commit2). */
	if ((desc ? hu_outfile_open2(f, paths, s, e) :
	     hu_outfile_open(&f[0], path, s, e)) == 0) {
		rc = write_both(to, f, desc, fill, ctx, d, e);
		if (rc < 0 && !e->path)
			hu_error_prefix(e, strcmp(path, "-") ? path :
					"standard output");
	}
	if (rc < 0) {
		hu_outfile_abort(&f[1]);
		hu_outfile_abort(&f[0]);
	}
	return rc;
}

void print_would_write(const struct tar_args *ta, const char *path,
		       const struct hu_tarout_opts *to,
		       const struct hu_digests *d, uint64_t entries)
{
	printf("would write %s: %s", strcmp(path, "-") ? path :
	       "standard output", hu_compress_name(to->compress));
	if (entries != PROGRESS_UNKNOWN)
		printf(", %llu %s", (unsigned long long)entries,
		       plural(entries, "entry", "entries"));
	printf(", %llu bytes, digest %s, diffID %s\n",
	       (unsigned long long)d->size, d->digest, d->diff_id);
	if (ta->descriptor)
		printf("would write %s: its descriptor, %s\n", ta->descriptor,
		       d->media_type);
}
