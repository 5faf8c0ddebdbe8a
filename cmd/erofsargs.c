/* SPDX-License-Identifier: MIT */
/*
 * flatten -o erofs:FILE: the options of an EROFS image (--block-size,
 * --uuid, --clamp-mtime and SOURCE_DATE_EPOCH, --descriptor), the tarball
 * options that mean nothing for it refused, and the image written as
 * every output file is: beside its name, renamed in when complete.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"

#define EROFS_PREFIX "erofs:"

bool erofs_output(const char *out)
{
	return out && !strncmp(out, EROFS_PREFIX, strlen(EROFS_PREFIX));
}

int erofs_opt(struct erofs_args *a, const struct parsed_opt *o)
{
	if (!strcmp(o->name, "block-size"))
		a->block_size = o->arg;
	else if (!strcmp(o->name, "uuid"))
		a->uuid = o->arg;
	else
		return 0;
	return 1;
}

/* What a tarball's options would change, refused with erofs: rather
 * than ignored. */
static int refuse_tar_opts(const struct cmd *c, const struct tar_args *t)
{
	const char *opt = t->compress ? "--compress" :
			  t->level ? "--level" :
			  t->threads ? "--threads" :
			  t->opaque_markers ? "--opaque-markers" : NULL;

	if (!opt)
		return 0;
	return cmd_usage_error(c, "%s: an EROFS image is not compressed "
			       "(erofs: writes it uncompressed)", opt);
}

int erofs_args_resolve(const struct cmd *c, const struct erofs_args *a,
		       const struct tar_args *t, const char *out,
		       struct hu_erofs_out_opts *eo)
{
	long long v, sde;

	memset(eo, 0, sizeof(*eo));
	eo->block_bits = 12;
	if (refuse_tar_opts(c, t) < 0)
		return -1;
	if (!out[strlen(EROFS_PREFIX)])
		return cmd_usage_error(c, "erofs: needs a file name "
				       "(-o erofs:FILE)");
	if (!strcmp(out + strlen(EROFS_PREFIX), "-"))
		return cmd_usage_error(c, "an EROFS image cannot go to "
				       "standard output: it is written out "
				       "of order");
	if (a->block_size) {
		/* The kernel reads blocks of 512 bytes up to the page. */
		long page = sysconf(_SC_PAGESIZE);

		if (!parse_num(a->block_size, 512, page, &v) || (v & (v - 1)))
			return cmd_usage_error(c, "invalid --block-size '%s' "
					       "(a power of two from 512 to "
					       "%ld, the page size)",
					       a->block_size, page);
		for (eo->block_bits = 9; (1ll << eo->block_bits) < v;)
			eo->block_bits++;
	}
	if (a->uuid && strcmp(a->uuid, "zero") && strcmp(a->uuid, "content"))
		return cmd_usage_error(c, "invalid --uuid '%s' (choose zero "
				       "or content)", a->uuid);
	eo->uuid_content = a->uuid && !strcmp(a->uuid, "content");
	if (clamp_resolve(c, t->clamp, &eo->clamp_mtime, &eo->mtime_max,
			  &sde) < 0)
		return -1;
	/* Never the time of the run: the same stack, the same bytes. */
	eo->build_time = sde >= 0 ? sde : 0;
	if (t->descriptor && !strcmp(t->descriptor, out + strlen(EROFS_PREFIX)))
		return cmd_usage_error(c, "--descriptor names the output");
	return 0;
}

/* -n: the image made whole in an unnamed file beside @path, dropped at
 * its close. */
static int open_scratch(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, (size_t)(slash - path) + 1) :
			    strdup(".");
	int fd;

	if (!dir)
		return -1;
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	free(dir);
	return fd;
}

/* The image into @f[0] (reopened for reading too: the writer goes back
 * to what it wrote), then the descriptor into @f[1] when asked. */
static int write_image(const char *path, struct hu_outfile *f, bool desc,
		       const struct hu_stack *s,
		       const struct hu_erofs_out_opts *eo,
		       const struct hu_report *r, struct hu_flatten_stats *st,
		       struct hu_digests *d, bool dry_run, struct hu_error *e)
{
	struct hu_erofs_out_opts o = *eo;
	int fd = dry_run ? open_scratch(path) :
		 openat(f[0].dirfd, f[0].tmp, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return hu_error_set(e, errno, NULL, "cannot reopen");
	o.sync = !dry_run;
	rc = hu_flatten_write_erofs(s, r, fd, &o, st, d, e);
	front_progress_done();
	close(fd);
	if (rc < 0 || dry_run)
		return rc;
	return commit_with_descriptor(f, desc ? d : NULL, e);
}

int erofs_write(const char *out, const char *descriptor,
		const struct hu_stack *s, const struct hu_erofs_out_opts *eo,
		const struct hu_report *r, struct hu_flatten_stats *st,
		struct hu_digests *d, bool dry_run, struct hu_error *e)
{
	struct hu_outfile f[2] = { { .fd = -1, .dirfd = -1 },
				   { .fd = -1, .dirfd = -1 } };
	const char *path = out + strlen(EROFS_PREFIX);
	const char *paths[2] = { path, descriptor };
	struct hu_digests own;
	int rc = 0;

	if (descriptor && !d)
		d = &own;
	if (!dry_run)
		rc = descriptor ? hu_outfile_open2(f, paths, s, e) :
				  hu_outfile_open(&f[0], path, s, e);
	if (rc == 0)
		rc = write_image(path, f, descriptor, s, eo, r, st, d,
				 dry_run, e);
	if (rc < 0 && !e->path)
		hu_error_prefix(e, path);
	if (rc < 0) {
		hu_outfile_abort(&f[1]);
		hu_outfile_abort(&f[0]);
	}
	return rc;
}
