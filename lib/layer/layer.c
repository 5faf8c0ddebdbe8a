/* SPDX-License-Identifier: MIT */
/*
 * Layers and stacks: open each layer directory once, detect its format
 * (detect.c) and refuse stacks that cannot mean anything.  A tarball
 * layer is unpacked into a private directory first (tarlayer.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"
#include "layer/ldir.h"
#include "tar/pindex.h"
#include "mount/mountinfo.h"

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

/* Without CAP_SYS_ADMIN trusted.* xattrs are invisible: a union or overlay
 * layer would silently lose its opaque markers. */
static int check_trusted(const struct hu_layer *l, struct hu_error *e)
{
	bool trusted = (!l->userxattr && l->format != HU_FMT_OCI) ||
		       (hu_layer_half(l) && !l->conv_to_userxattr &&
			l->conv_to != HU_FMT_OCI);

	if (trusted && !can_read_trusted())
		return hu_error_set(e, EPERM, l->path,
				    "trusted.* xattrs are unreadable without "
				    "CAP_SYS_ADMIN: run as root, or use "
				    "--userxattr");
	return 0;
}

/*
 * Layers of a stack whose format detection waits, to run together: one
 * walk of each layer, the walks in parallel threads.  Detection is pure
 * syscalls per directory, and the layers are independent.  A tarball layer
 * reads the view of the layers below it, so they are detected first.
 */
struct pending {
	struct hu_layer *layers;	/* the stack's, in order */
	bool *wait;			/* per layer: not detected yet */
	size_t n;			/* layers opened so far */
	struct hu_error *errs;		/* per layer */
	atomic_size_t next;		/* the next layer a thread takes */
	/* With a problem sink, which only this thread may call: the
	 * threads walk, and this one finishes each layer in turn (its
	 * reports), from what its walk left here. */
	bool one_thread;
	struct hu_detect **walked;	/* per layer, with one_thread */
	size_t look;			/* hu_stack_opts.defer_look */
};

static void *detect_worker(void *arg)
{
	struct pending *p = arg;

	for (size_t i; (i = atomic_fetch_add(&p->next, 1)) < p->n;) {
		struct hu_layer *l = &p->layers[i];

		if (!p->wait[i])
			continue;
		/* A deferred layer looked at early: detected here only where
		 * it shows a marker at once; else it stays deferred. */
		if (l->deferred &&
		    hu_layer_marked_early(l, p->look, &p->errs[i]) != 1)
			continue;
		l->deferred = false;	/* the stack is not handed out yet */
		if (p->one_thread)
			(void)hu_layer_detect_walk(&p->layers[i],
						   &p->walked[i], &p->errs[i]);
		else
			(void)hu_layer_detect(&p->layers[i], &p->errs[i]);
	}
	return NULL;
}

/* Detect every waiting layer; the error of the lowest failing one wins. */
static int detect_pending(struct pending *p, struct hu_error *e)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t nwait = 0, nthreads = 0;
	pthread_t threads[7];	/* with this thread, at most 8 walks at once */
	int rc = 0;

	for (size_t i = 0; i < p->n; i++)
		nwait += p->wait[i];
	if (nwait == 0)
		return 0;
	p->errs = calloc(p->n, sizeof(*p->errs));
	p->walked = p->one_thread ? calloc(p->n, sizeof(*p->walked)) : NULL;
	if (!p->errs || (p->one_thread && !p->walked)) {
		free(p->errs);
		p->errs = NULL;
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	atomic_store(&p->next, 0);
	/* this thread is one of the workers */
	while (nthreads + 1 < nwait &&
	       (long)nthreads + 1 < cpus &&
	       nthreads < sizeof(threads) / sizeof(threads[0]) &&
	       pthread_create(&threads[nthreads], NULL, detect_worker, p) == 0)
		nthreads++;
	detect_worker(p);
	while (nthreads > 0)
		pthread_join(threads[--nthreads], NULL);
	for (size_t i = 0; p->one_thread && i < p->n; i++)
		if (p->wait[i] && !p->layers[i].deferred)
			(void)hu_layer_detect_finish(p->walked[i], &p->errs[i]);
	free(p->walked);
	p->walked = NULL;
	for (size_t i = 0; i < p->n; i++) {
		if (!p->wait[i])
			continue;
		p->wait[i] = false;
		if (rc == 0 && (hu_error_has_msg(&p->errs[i]) ||
				check_trusted(&p->layers[i], &p->errs[i]) < 0)) {
			hu_error_clear(e);
			*e = p->errs[i];
			memset(&p->errs[i], 0, sizeof(p->errs[i]));
			rc = -1;
		}
		hu_error_clear(&p->errs[i]);
	}
	free(p->errs);
	p->errs = NULL;
	return rc;
}

/* Does @l read union or overlay markers (a directory layer: a tarball
 * is OCI whatever it holds)? */
static bool kernel_layer(const struct hu_layer *l)
{
	return !hu_layer_tarball(l) && (hu_layer_is(l, HU_FMT_UNION) ||
				hu_layer_is(l, HU_FMT_OVERLAY));
}

/* Is @l still to be detected (deferred, and not the one settling)? */
static bool undetected(const struct hu_layer *l, const struct hu_layer *self)
{
	return l != self && l->deferred;
}

/* Detect the deferred layers of @v but @self now: the rule needs them.
 * Each is released once the rule has read it (@got). */
static int detect_rest(struct hu_layer *v, size_t n,
		       const struct hu_layer *self, bool got[],
		       struct hu_error *e)
{
	for (size_t i = 0; i < n; i++) {
		struct hu_layer *l = &v[i];

		if (!undetected(l, self))
			continue;
		if (l->hold) {
			__atomic_store_n(l->hold, true, __ATOMIC_RELAXED);
			return hu_error_set(e, EAGAIN, l->path, "the format "
					    "of this layer is detected once "
					    "other threads stop");
		}
		got[i] = true;
		if (hu_layer_detect(l, e) < 0) {
			e->whole = true;
			return -1;
		}
	}
	return 0;
}

/*
 * A .wh. name is an OCI marker only in an OCI layer: in a stack of kernel
 * layers it is an ordinary file, which the kernel shows and which hides
 * nothing.  So a directory layer detected OCI for its .wh. names alone
 * reads as NONE where another directory layer of its stack is union or
 * overlay (a bottom layer's .wh. names hide nothing in any format, so they
 * never were evidence).  Where a tarball layer, OCI for sure, sits in such
 * a stack too, each reading has evidence: the kernel's is kept, with one
 * warning naming the first .wh. name of a layer above the bottom.
 */
int hu_stack_read_names(struct hu_layer *v, size_t n,
			const struct hu_layer *self, struct hu_error *e)
{
	bool names = false, kernel = false, tar = false, later = false;
	bool warned = false, *got;
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		bool known = !undetected(&v[i], self);

		names = names || (known && v[i].oci_by_names);
		kernel = kernel || (known && kernel_layer(&v[i]));
		tar = tar || hu_layer_tarball(&v[i]);
		later = later || !known;
	}
	if (!names || (!kernel && !later))
		return 0;
	got = calloc(n, sizeof(*got));
	if (!got)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	if (!kernel)
		rc = detect_rest(v, n, self, got, e);
	for (size_t i = 0; i < n && rc == 0 && !kernel; i++)
		kernel = (got[i] || !undetected(&v[i], self)) &&
			 kernel_layer(&v[i]);
	for (size_t i = 0; i < n && rc == 0 && kernel; i++) {
		struct hu_layer *l = &v[i];

		if ((!got[i] && undetected(l, self)) || !l->oci_by_names)
			continue;
		l->format = HU_FMT_NONE;
		l->oci_by_names = false;
		if (tar && i > 0 && !warned) {
			hu_report_warn(l->report, 0, l->path, l->wh_path,
				       "a .wh. name in a layer beside union "
				       "or overlay layers and an OCI tarball: "
				       "read as an ordinary file, as the "
				       "kernel does (--format=oci reads it "
				       "as a whiteout)");
			warned = true;
		}
	}
	/* Released after the format: see hu_layer_is_deferred(). */
	for (size_t i = 0; i < n; i++)
		if (got[i])
			__atomic_store_n(&v[i].deferred, false,
					 __ATOMIC_RELEASE);
	free(got);
	return rc;
}

/* The tarball open at @fd read as index layer @l (layer/ldir.h): its
 * path index (tar/pindex.h), from the cache or made in one pass over it,
 * never unpacked.  Its implicit directories read the view of @below,
 * whose formats are settled. */
static int index_tarball(struct hu_layer *l, int fd,
			 const struct hu_stack *below,
			 const struct hu_stack_opts *o, struct hu_error *e)
{
	struct hu_pindex *x;
	bool cached;

	if (hu_pindex_get(o->pcache, fd, l->image, l->image_layer, l->path,
			  o->report, o->problems, &x, &cached, e) < 0)
		return -1;
	l->pindex_cached = cached;
	/* Its data read in the view's order passes once only when the
	 * tarball holds it in that order: else it is unpacked (1; its
	 * warnings given already, built or cached), the one case whose
	 * bytes go through the disk. */
	if (o->index_data && !hu_pindex_in_order(x)) {
		hu_pindex_free(x);
		return 1;
	}
	if (hu_ldir_imply(l, x, below, e) < 0)
		return -1;
	if (o->index_data || o->index_any_order) {
		l->tar_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		if (l->tar_fd < 0)
			return hu_error_set(e, errno, l->path,
					    "cannot open the tarball again");
	}
	return 0;
}

/* The tarball open at @fd (closed here) unpacked as layer @l, once the
 * layers beneath have settled their formats; the file's identity kept,
 * so that no output may replace it (outfile.c). */
static int unpack_tarball(struct hu_layer *l, int fd,
			  const struct hu_stack *below, struct pending *p,
			  const struct hu_stack_opts *o, struct hu_error *e)
{
	const struct hu_report *report = o->report;
	struct hu_report quiet;
	struct stat st;
	int rc;

	if (fstat(fd, &st) < 0) {
		rc = errno;
		close(fd);
		return hu_error_set(e, rc, l->path, "cannot stat layer");
	}
	l->file_dev = st.st_dev;
	l->file_ino = st.st_ino;
	if (o->index_tars && !o->tar_sources) {
		if (p && detect_pending(p, e) < 0) {
			close(fd);
			return -1;
		}
		rc = index_tarball(l, fd, below, o, e);
		if (rc <= 0) {
			close(fd);
			return rc;
		}
		/* unpacked after all: its warnings said once */
		if (report) {
			quiet = *report;
			quiet.warn = NULL;
			report = &quiet;
		}
	}
	if (o->tar_sources) {
		/* read later, straight into an output (mergetar.c) */
		l->fd = fd;
		l->streamed = true;
		l->format = HU_FMT_OCI;
		return 0;
	}
	if (p && detect_pending(p, e) < 0) {
		close(fd);
		return -1;
	}
	rc = hu_tarlayer_unpack(l, fd, below, report, e);
	close(fd);
	return rc;
}

/* Layer @l->image_layer of image @l->image: its blob unpacked as a
 * tarball layer, checked as it is read (tarlayer.c). */
static int open_image_layer(struct hu_layer *l, const struct hu_stack *below,
			    struct pending *p, const struct hu_stack_opts *o,
			    struct hu_error *e)
{
	const struct hu_oci_image *img = l->image;
	int fd = hu_oci_blob_open(img, &img->layers[l->image_layer], e);

	if (fd < 0)
		return -1;
	return unpack_tarball(l, fd, below, p, o, e);
}

/* @path is a regular file: unpack it if it holds a tarball. */
static int open_tarball(struct hu_layer *l, const char *path,
			const struct hu_stack *below, struct pending *p,
			const struct hu_stack_opts *o, struct hu_error *e)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return hu_error_set(e, errno, path, "cannot open layer");
	if (!hu_tar_sniff(fd)) {
		close(fd);
		return hu_error_set(e, 0, path,
				    "not a directory, nor a tarball");
	}
	return unpack_tarball(l, fd, below, p, o, e);
}

/*
 * Does getdents(2) fill its buffer on every directory of the layer at
 * @fd, unless the listing is at its end?  On these filesystems readdir
 * stops only when the next record does not fit (ext4_readdir and
 * ext4_dx_readdir, xfs_readdir, btrfs_real_readdir, offset_readdir of
 * tmpfs) or a signal is pending (hu_layer_names_read minds that).  A
 * filesystem mounted beneath the root could be any other, as FUSE and
 * NFS, which may return less: then the layer's listings read to 0.
 */
static bool readdir_fills(int fd)
{
	struct statfs sf;

	if (fstatfs(fd, &sf) < 0)
		return false;
	switch (sf.f_type) {
	case EXT4_SUPER_MAGIC:
	case XFS_SUPER_MAGIC:
	case BTRFS_SUPER_MAGIC:
	case TMPFS_MAGIC:
		return !hu_mount_beneath(fd);
	default:
		return false;
	}
}

int hu_layer_lock_change(const struct hu_layer *l, struct hu_error *e)
{
	struct stat st;

	if (flock(l->fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK)
		return hu_error_set(e, EBUSY, l->path, "another hunion run is "
				    "changing this layer (merge --into, "
				    "whiteout convert --in-place)");
	/* Locked (or no locks on this filesystem).  A run that held the
	 * lock while this one opened the layer has marked its root (its
	 * record set and cleared, entries moved): what this run read
	 * before the lock, the format first, may be stale. */
	if (fstat(l->fd, &st) < 0)
		return hu_error_set(e, errno, l->path, "cannot stat layer");
	if (st.st_ctim.tv_sec != l->ctime.tv_sec ||
	    st.st_ctim.tv_nsec != l->ctime.tv_nsec) {
		flock(l->fd, LOCK_UN);
		return hu_error_set(e, EBUSY, l->path, "changed since this "
				    "run opened it (another run?): run "
				    "again");
	}
	return 0;
}

/* What an operand that is neither a directory nor a regular file is. */
static const char *not_a_layer(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFIFO:
		return "is a FIFO (a pipe)";
	case S_IFCHR:
		return "is a character device";
	case S_IFBLK:
		return "is a block device";
	case S_IFSOCK:
		return "is a socket";
	default:
		return "is not a directory";
	}
}

static int open_root(struct hu_layer *l, const char *path,
		     const struct hu_stack *below, struct pending *p,
		     const struct hu_stack_opts *o, struct hu_error *e)
{
	struct stat st;

	if (l->image)
		return open_image_layer(l, below, p, o, e);
	l->fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (l->fd >= 0) {
		if (fstat(l->fd, &st) < 0)
			return hu_error_set(e, errno, path, "cannot stat layer");
		l->dev = st.st_dev;
		l->ino = st.st_ino;
		l->ctime = st.st_ctim;
		l->readdir_fills = readdir_fills(l->fd);
		return 0;
	}
	if (errno == ENOTDIR && stat(path, &st) == 0) {
		if (S_ISREG(st.st_mode))
			return open_tarball(l, path, below, p, o, e);
		return hu_error_set(e, 0, path, "%s: a layer is a directory "
				    "or a tarball in a regular file (a piped "
				    "tarball: save it to a file first)",
				    not_a_layer(st.st_mode));
	}
	if (errno == ENOENT)
		return hu_error_set(e, 0, path, "no such layer");
	return hu_error_set(e, errno, path, "cannot open layer");
}

/* What a layer of the stack is: an operand's path, or layer @k of @img
 * (an operand oci:DIR[:REF], @path its name in messages). */
struct layer_src {
	const char *path;
	const struct hu_oci_image *img;
	size_t k;
	bool index;		/* a tarball: read from its index */
};

/* @below: the layers already open beneath @l (NULL when alone).  With @p,
 * a layer to detect is left waiting in it (detect_pending). */
static int layer_open(struct hu_layer *l, const struct layer_src *src,
		      const struct hu_stack *below, struct pending *p,
		      const struct hu_stack_opts *so, struct hu_error *e)
{
	/* this layer's: a tarball read from its index or unpacked */
	struct hu_stack_opts lo = *so;
	const struct hu_stack_opts *o = &lo;
	const char *path = src->path;
	int rc;

	lo.index_tars = src->index;
	memset(l, 0, sizeof(*l));
	l->image = src->img;
	l->image_layer = src->k;
	l->fd = l->unpacked_lock = l->tar_fd = -1;
	l->problems = o->problems;
	l->workdir_given = o->workdir_given;
	l->report = o->report;
	l->path = strdup(path);
	if (!l->path)
		return hu_error_set(e, ENOMEM, path, "out of memory");
	if (open_root(l, path, below, p, o, e) < 0)
		goto fail;
	l->userxattr = o->userxattr;
	if (hu_layer_tarball(l))
		return 0;	/* a tarball: always OCI, no trusted.* */
	if (o->tar_sources) {
		hu_error_set(e, 0, path, "not a tarball: cannot be streamed");
		goto fail;
	}
	rc = hu_conv_record_read(l, e);
	if (rc < 0)
		goto fail;
	if (rc > 0) {
		/* half-converted: the record knows both formats */
		if (o->format != HU_FMT_AUTO && o->format != l->format) {
			hu_error_set(e, 0, path, "half-converted from %s to "
				     "%s, not %s: run the same 'hunion "
				     "whiteout convert --in-place' again to "
				     "finish", hu_format_name(l->format),
				     hu_format_name(l->conv_to),
				     hu_format_name(o->format));
			goto fail;
		}
	} else if (o->format != HU_FMT_AUTO) {
		l->format = o->format;
	} else if (below && below->n < o->defer_below &&
		   (l->userxattr || can_read_trusted())) {
		/* Unreadable trusted.* xattrs would hide the evidence that
		 * settles the layer: without them, detect now. */
		l->format = HU_FMT_NONE;
		l->deferred = true;
		if (p && o->defer_look)
			p->wait[below->n] = true;	/* a look first */
		return 0;
	} else if (p) {
		p->wait[below->n] = true;
		return 0;
	} else if (hu_layer_detect(l, e) < 0) {
		goto fail;
	}
	if (check_trusted(l, e) < 0)
		goto fail;
	return 0;
fail:
	hu_layer_close(l);
	return -1;
}

int hu_layer_open(struct hu_layer *l, const char *path,
		  const struct hu_stack_opts *o, struct hu_error *e)
{
	struct layer_src src = { .path = path };

	if (hu_oci_operand(path))
		return hu_error_set(e, EINVAL, path, "an image is a stack of "
				    "layers, not one layer");
	return layer_open(l, &src, NULL, NULL, o, e);
}

void hu_layer_close(struct hu_layer *l)
{
	if (l->pindex)
		hu_ldir_free(l);	/* the fd is the index's root */
	else if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
	hu_tarlayer_remove(l);
	free(l->path);
	l->path = NULL;
	free(l->wh_path);
	l->wh_path = NULL;
}

/* Open the image operand @arg names, kept in @s->images. */
static int open_image(struct hu_stack *s, const char *arg,
		      const struct hu_stack_opts *o, struct hu_error *e)
{
	struct hu_oci_image *img;
	char *layout, *ref;
	int rc;

	if (hu_oci_operand_parse(arg, &layout, &ref, e) < 0)
		return -1;
	rc = hu_oci_image_open(AT_FDCWD, layout, ref, o->platform, &img, e);
	free(layout);
	free(ref);
	if (rc < 0)
		return -1;
	s->images[s->nimages++] = img;
	return 0;
}

/* The layers the operands @paths name, bottom first, into *@out (*@names
 * holds the names made for an image's layers): an image's are its layers,
 * "oci:DIR:REF layer K (DIGEST)". */
static int expand(struct hu_stack *s, char *const paths[], size_t n,
		  const struct hu_stack_opts *o, struct layer_src **out,
		  size_t *nout, struct hu_error *e)
{
	size_t total = 0, k = 0;
	struct layer_src *v;

	s->images = calloc(n, sizeof(*s->images));
	if (!s->images)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (size_t i = 0; i < n; i++) {
		if (!hu_oci_operand(paths[i])) {
			total++;
			continue;
		}
		if (open_image(s, paths[i], o, e) < 0)
			return -1;
		total += s->images[s->nimages - 1]->nlayers;
	}
	if (total == 0)
		return hu_error_set(e, 0, paths[0], "an image of no layers: "
				    "nothing to read");
	v = calloc(total, sizeof(*v));
	if (!v)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	for (size_t i = 0, im = 0; i < n; i++) {
		const struct hu_oci_image *img;
		char *name;

		if (!hu_oci_operand(paths[i])) {
			v[k++].path = paths[i];
			continue;
		}
		img = s->images[im++];
		for (size_t j = 0; j < img->nlayers; j++, k++) {
			if (asprintf(&name, "%s layer %zu (%s)", paths[i],
				     j + 1, img->layers[j].digest) < 0) {
				for (size_t f = 0; f < k; f++)
					if (v[f].img)
						free((char *)v[f].path);
				free(v);
				return hu_error_set(e, ENOMEM, NULL,
						    "out of memory");
			}
			v[k] = (struct layer_src){ .path = name, .img = img,
						   .k = j };
		}
	}
	*out = v;
	*nout = total;
	return 0;
}

static void expand_free(struct layer_src *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		if (v[i].img)
			free((char *)v[i].path);
	free(v);
}

int hu_stack_open(struct hu_stack *s, char *const paths[], size_t nops,
		  const struct hu_stack_opts *o, struct hu_error *e)
{
	struct pending p = { 0 };
	struct layer_src *src = NULL;
	size_t n = 0;
	/* HUNION_INDEX=0: unpacked all the same, for the tests that hold
	 * the two paths to one answer */
	const char *env = getenv("HUNION_INDEX");
	bool index = o->index_tars && !(env && !strcmp(env, "0"));

	memset(s, 0, sizeof(*s));
	s->problems = o->problems;
	if (nops == 0)
		return hu_error_set(e, EINVAL, NULL, "no layers given");
	if (expand(s, paths, nops, o, &src, &n, e) < 0)
		goto fail;
	s->layers = calloc(n, sizeof(*s->layers));
	p.wait = calloc(n, sizeof(*p.wait));
	if (!s->layers || !p.wait) {
		hu_error_set(e, ENOMEM, NULL, "out of memory");
		goto fail;
	}
	p.layers = s->layers;
	p.one_thread = o->problems != NULL;
	p.look = o->defer_look;
	for (size_t i = 0; i < n; i++) {
		struct hu_stack below = { .n = i, .layers = s->layers,
					  .problems = o->problems };

		p.n = i;
		src[i].index = index && (i + 1 < n || o->index_data ||
					 o->index_top);
		if (layer_open(&s->layers[i], &src[i], &below, &p, o, e) < 0)
			goto fail;
		s->n = i + 1;
		for (size_t j = 0; j < i && !s->layers[i].streamed &&
				   !s->layers[i].pindex; j++) {
			if (s->layers[j].dev == s->layers[i].dev &&
			    s->layers[j].ino == s->layers[i].ino) {
				hu_error_set(e, 0, src[i].path,
					     "the same directory as layer %s",
					     src[j].path);
				goto fail;
			}
		}
	}
	p.n = n;
	if (o->find_refs && p.wait[n - 1])
		s->layers[n - 1].refs = HU_REFS_ASK;
	if (detect_pending(&p, e) < 0)
		goto fail;
	for (size_t i = 0; i < n; i++) {
		s->layers[i].peers = s->layers;
		s->layers[i].npeers = n;
	}
	if (!o->tar_sources && hu_stack_read_names(s->layers, n, NULL, e) < 0)
		goto fail;
	free(p.wait);
	expand_free(src, n);
	return 0;
fail:
	free(p.wait);
	expand_free(src, n);
	hu_stack_close(s);
	return -1;
}

void hu_stack_close(struct hu_stack *s)
{
	for (size_t i = 0; i < s->n; i++)
		hu_layer_close(&s->layers[i]);
	free(s->layers);
	for (size_t i = 0; i < s->nimages; i++)
		hu_oci_image_close(s->images[i]);
	free(s->images);
	memset(s, 0, sizeof(*s));
}
