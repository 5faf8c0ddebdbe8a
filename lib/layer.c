/* SPDX-License-Identifier: MIT */
/*
 * Layers and stacks: open each layer directory once, detect its format
 * (detect.c) and refuse stacks that cannot mean anything.  A tarball
 * layer is unpacked into a private directory first (tarlayer.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/* Can this process read trusted.* xattrs (CAP_SYS_ADMIN)? */
static bool can_read_trusted(void)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &hdr, data) != 0)
		return geteuid() == 0;
	return data[CAP_SYS_ADMIN / 32].effective &
	       (1u << (CAP_SYS_ADMIN % 32));
}

/* @path is a regular file: unpack it if it holds a tarball. */
static int open_tarball(struct hu_layer *l, const char *path,
			const struct hu_stack *below,
			const struct hu_stack_opts *o, struct hu_error *e)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return hu_error_set(e, errno, path, "cannot open layer");
	if (!hu_tar_sniff(fd)) {
		close(fd);
		return hu_error_set(e, 0, path,
				    "not a directory, nor a tarball");
	}
	rc = hu_tarlayer_unpack(l, fd, below, o->report, e);
	close(fd);
	return rc;
}

static int open_root(struct hu_layer *l, const char *path,
		     const struct hu_stack *below,
		     const struct hu_stack_opts *o, struct hu_error *e)
{
	struct stat st;

	l->fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (l->fd >= 0) {
		if (fstat(l->fd, &st) < 0)
			return hu_error_set(e, errno, path, "cannot stat layer");
		l->dev = st.st_dev;
		l->ino = st.st_ino;
		return 0;
	}
	if (errno == ENOTDIR && stat(path, &st) == 0 && S_ISREG(st.st_mode))
		return open_tarball(l, path, below, o, e);
	if (errno == ENOENT)
		return hu_error_set(e, 0, path, "no such layer");
	return hu_error_set(e, errno, path, "cannot open layer");
}

/* @below: the layers already open beneath @l (NULL when alone). */
static int layer_open(struct hu_layer *l, const char *path,
		      const struct hu_stack *below,
		      const struct hu_stack_opts *o, struct hu_error *e)
{
	memset(l, 0, sizeof(*l));
	l->fd = -1;
	l->path = strdup(path);
	if (!l->path)
		return hu_error_set(e, ENOMEM, path, "out of memory");
	if (open_root(l, path, below, o, e) < 0)
		goto fail;
	l->userxattr = o->userxattr;
	if (l->unpacked)
		return 0;	/* a tarball: always OCI, no trusted.* */
	if (o->format != HU_FMT_AUTO) {
		l->format = o->format;
	} else if (below && below->n < o->defer_below &&
		   (l->userxattr || can_read_trusted())) {
		/* Unreadable trusted.* xattrs would hide the evidence that
		 * settles the layer: without them, detect now. */
		l->format = HU_FMT_NONE;
		l->deferred = true;
		return 0;
	} else if (hu_layer_detect(l, e) < 0) {
		goto fail;
	}
	/* Without CAP_SYS_ADMIN trusted.* xattrs are invisible: a union or
	 * overlay layer would silently lose its opaque markers. */
	if (!l->userxattr && l->format != HU_FMT_OCI && !can_read_trusted()) {
		hu_error_set(e, EPERM, path,
			     "trusted.* xattrs are unreadable without "
			     "CAP_SYS_ADMIN: run as root, or use --userxattr");
		goto fail;
	}
	return 0;
fail:
	hu_layer_close(l);
	return -1;
}

int hu_layer_open(struct hu_layer *l, const char *path,
		  const struct hu_stack_opts *o, struct hu_error *e)
{
	return layer_open(l, path, NULL, o, e);
}

void hu_layer_close(struct hu_layer *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
	hu_tarlayer_remove(l);
	free(l->path);
	l->path = NULL;
}

int hu_stack_open(struct hu_stack *s, char *const paths[], size_t n,
		  const struct hu_stack_opts *o, struct hu_error *e)
{
	memset(s, 0, sizeof(*s));
	if (n == 0)
		return hu_error_set(e, EINVAL, NULL, "no layers given");
	s->layers = calloc(n, sizeof(*s->layers));
	if (!s->layers)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (size_t i = 0; i < n; i++) {
		struct hu_stack below = { i, s->layers };

		if (layer_open(&s->layers[i], paths[i], &below, o, e) < 0)
			goto fail;
		s->n = i + 1;
		for (size_t j = 0; j < i; j++) {
			if (s->layers[j].dev == s->layers[i].dev &&
			    s->layers[j].ino == s->layers[i].ino) {
				hu_error_set(e, 0, paths[i],
					     "the same directory as layer %s",
					     paths[j]);
				goto fail;
			}
		}
	}
	return 0;
fail:
	hu_stack_close(s);
	return -1;
}

void hu_stack_close(struct hu_stack *s)
{
	for (size_t i = 0; i < s->n; i++)
		hu_layer_close(&s->layers[i]);
	free(s->layers);
	memset(s, 0, sizeof(*s));
}
