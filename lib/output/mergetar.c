/* SPDX-License-Identifier: MIT */
/*
 * merge -o of a stack that is one tarball layer: the tarball is read once,
 * straight into the new tree (treeout.c: built beside OUT, renamed into
 * place when complete, removed on failure), with no private copy under
 * TMPDIR and no second read through the view.  The entries are made by
 * the tarball layer's own code (lib/tar: the same paths, duplicates,
 * parents, links, holes and xattrs as its unpack), which then leaves out
 * the markers, as the view of a bottom layer does.  HUNION_TAR_STREAM=0
 * takes the general path (unpack, then the view) instead: the differential
 * test tests/kernel/tarstream.sh compares the two.
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
	.exists = "output already exists",
	.exists_err = 0,
	.no_check = "cannot check the output",
	.no_create = "cannot create the output directory",
	.no_open = "cannot open the output directory",
	.no_move = "cannot move the new tree into place",
};

bool hu_merge_can_stream(const char *const *layers, size_t n,
			 const struct hu_stack_opts *so,
			 const struct hu_merge_opts *o)
{
	const char *env = getenv("HUNION_TAR_STREAM");
	struct stat st;

	/* One tarball, formats read as its unpack reads them, files copied
	 * (--link would link to a private copy: the general path says
	 * what that means), and something to write. */
	if (n != 1 || o->dry_run || o->data != HU_DATA_COPY ||
	    so->format != HU_FMT_AUTO || (env && !strcmp(env, "0")))
		return false;
	return stat(layers[0], &st) == 0 && S_ISREG(st.st_mode);
}

int hu_merge_tarball(const char *layer, const char *out,
		     const struct hu_merge_opts *o,
		     struct hu_merge_stats *stats, struct hu_error *e)
{
	struct hu_treeout t;
	int fd, rc;

	memset(stats, 0, sizeof(*stats));
	fd = open(layer, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return hu_error_set(e, errno, layer, "cannot open layer");
	/* as a layer is opened (layer.c) */
	if (!hu_tar_sniff(fd)) {
		close(fd);
		return hu_error_set(e, 0, layer,
				    "not a directory, nor a tarball");
	}
	rc = hu_treeout_open(&t, out, &merge_words, NULL, 0, e);
	if (rc == 0 && !t.as_root)
		hu_report_warn(o->report, EPERM, out, NULL,
			       "not running as root: owners are not kept");
	if (rc == 0)
		rc = hu_treeout_begin(&t, e);
	if (rc == 0)
		rc = hu_tarlayer_extract(layer, fd, hu_treeout_fd(&t), stats,
					 o->report, e);
	close(fd);
	return hu_treeout_end(&t, rc, e);
}
