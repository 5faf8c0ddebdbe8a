/* SPDX-License-Identifier: MIT */
/*
 * A layer tarball's path index (pindex.h): built in one pass over the
 * tarball, read back as a position-independent image.
 *
 * Building: the tarball is read as its unpack reads it (tarlayer.c's
 * reader, tarsrc.c's bytes, an image layer's digests checked), but each
 * entry is recorded, not made: the rules that say what an entry makes
 * (names normalised, hard-link targets, markers, xattr names) are the
 * unpack's own (tl_*), and what the filesystem would say (a parent that
 * is no directory, a name too long, an xattr the kernel refuses) is said
 * here with the unpack's messages.  No data is read: libarchive skips it,
 * and each regular file's place in the uncompressed stream is kept.
 *
 * The image (all integers in the builder's byte order, which the header
 * names; every section 8-byte aligned):
 *
 *   header    magic "hupindex", version, byte order, size, XXH3-64 of
 *             every byte after the checksum field, the blob's digest and
 *             diff_id, the tarball's identity (a file that is no image's
 *             layer), counts and section offsets
 *   nodes     breadth first from the root: each directory's children one
 *             run, sorted bytewise by name (name, parent, inode, first
 *             child, children, flags)
 *   inodes    what the names of one inode share: type and mode, owner,
 *             times, size, rdev, data offset, sparse segments, symlink
 *             target, xattrs, names
 *   segs      sparse maps (struct hu_pseg)
 *   xattrs    (name, value) of each inode, sorted by name
 *   strings   names, targets, xattr names and values; ends with a NUL
 *
 * Loading checks the checksum, then every offset and count (and that the
 * nodes form the tree the readers assume: each child after its parent,
 * named once, sorted), so that the readers below never look outside the
 * image and never loop.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/crypto_dl.h"
#include "internal.h"
#include "tar/archive_dl.h"
#include "tar/pindex.h"
#include "tar/tarlayer.h"

/* ---- the image ------------------------------------------------------------ */

#define PI_MAGIC "hupindex"
#define PI_VERSION 2
#define PI_ORDER 0x01020304u
#define PI_NONE UINT32_MAX
#define PI_SUM_END 32	/* the checksum covers the bytes from here */

enum { PI_AS_ROOT = 1 << 0, PI_IMAGE = 1 << 1 };
enum { PN_IMPLICIT = 1 << 0 };

struct pi_header {
	char magic[8];
	uint32_t version, order;
	uint64_t size;
	uint64_t sum;
	char digest[72];	/* "sha256:HEX" of the stored bytes */
	char diff_id[72];	/* an image layer's; "" for a file */
	/* a tarball that is no image's layer: what identifies it */
	uint64_t src_dev, src_ino, src_size;
	int64_t src_mtime_ns, src_ctime_ns;
	uint64_t tar_size;	/* the uncompressed stream's */
	uint32_t flags, pad;
	uint64_t nnodes, ninodes, nsegs, nxattrs, nstrings;
	uint64_t onodes, oinodes, osegs, oxattrs, ostrings;
	/* what the build said, said again to each reader: nwarns records
	 * in lwarns bytes, each a pi_warn and its three strings */
	uint64_t nwarns, owarns, lwarns;
};

/* A warning (@kind 0) or what a problem sink takes (a TL_PROBLEM_*):
 * @err, then three strings, each its bytes and a NUL: the entry's raw
 * name, the path normalised (length PI_NONE and no bytes: none), the
 * message.  The next record follows, unaligned (read with memcpy). */
struct pi_warn {
	uint32_t kind, err, entry_len, path_len, msg_len;
};

struct pi_node {
	uint32_t name;		/* in strings */
	uint32_t parent;	/* PI_NONE for the root */
	uint32_t inode;
	uint32_t child, nchild;	/* a directory's children */
	uint32_t flags;		/* PN_* */
};

struct pi_inode {
	uint32_t mode, uid, gid, nlink;
	uint64_t size, rdev, off;
	int64_t mtime, atime;
	uint32_t mtime_ns, atime_ns;
	uint32_t seg, nseg;
	uint32_t link;		/* a symlink's target in strings, or PI_NONE */
	uint32_t xattr, nxattr;
	uint32_t xnames, xnames_len;	/* the names, as listxattr says */
	uint32_t pad;
};

struct pi_xattr {
	uint32_t name;		/* in strings */
	uint32_t len;
	uint64_t val;		/* in strings */
};

_Static_assert(sizeof(struct pi_header) % 8 == 0, "header aligned");
_Static_assert(sizeof(struct pi_node) == 24, "node size");
_Static_assert(sizeof(struct pi_inode) % 8 == 0, "inode aligned");
_Static_assert(sizeof(struct pi_xattr) == 16, "xattr size");
_Static_assert(sizeof(struct hu_pseg) == 16, "segment size");

struct hu_pindex {
	const unsigned char *base;
	size_t len;
	enum { PI_HEAP, PI_MAPPED } kind;
	const struct pi_header *h;
	const struct pi_node *nodes;
	const struct pi_inode *inodes;
	const struct hu_pseg *segs;
	const struct pi_xattr *xattrs;
	const char *strings;
	dev_t dev;
	bool as_root;		/* owners as the tarball says */
	uid_t uid;		/* else, and for implicit directories */
	gid_t gid;
};

/* ---- reading -------------------------------------------------------------- */

static const struct pi_inode *inode_of(const struct hu_pindex *x, hu_pnode n)
{
	return &x->inodes[x->nodes[n].inode];
}

size_t hu_pindex_nodes(const struct hu_pindex *x)
{
	return (size_t)x->h->nnodes;
}

size_t hu_pindex_nchildren(const struct hu_pindex *x, hu_pnode dir)
{
	return dir < x->h->nnodes ? x->nodes[dir].nchild : 0;
}

hu_pnode hu_pindex_child(const struct hu_pindex *x, hu_pnode dir, size_t i)
{
	if (dir >= x->h->nnodes || i >= x->nodes[dir].nchild)
		return HU_PNODE_NONE;
	return x->nodes[dir].child + (hu_pnode)i;
}

hu_pnode hu_pindex_lookup(const struct hu_pindex *x, hu_pnode dir,
			  const char *name)
{
	size_t lo = 0, hi = hu_pindex_nchildren(x, dir);

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		hu_pnode c = x->nodes[dir].child + (hu_pnode)mid;
		int cmp = strcmp(name, x->strings + x->nodes[c].name);

		if (cmp == 0)
			return c;
		if (cmp < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return HU_PNODE_NONE;
}

const char *hu_pindex_name(const struct hu_pindex *x, hu_pnode n)
{
	return n < x->h->nnodes ? x->strings + x->nodes[n].name : NULL;
}

hu_pnode hu_pindex_parent(const struct hu_pindex *x, hu_pnode n)
{
	return n < x->h->nnodes ? x->nodes[n].parent : HU_PNODE_NONE;
}

dev_t hu_pindex_dev(const struct hu_pindex *x)
{
	return x->dev;
}

bool hu_pindex_implicit(const struct hu_pindex *x, hu_pnode n)
{
	return n < x->h->nnodes && (x->nodes[n].flags & PN_IMPLICIT);
}

void hu_pindex_stat(const struct hu_pindex *x, hu_pnode n, struct stat *st)
{
	const struct pi_inode *in;
	uint64_t stored;

	memset(st, 0, sizeof(*st));
	if (n >= x->h->nnodes)
		return;
	in = inode_of(x, n);
	st->st_dev = x->dev;
	st->st_ino = (ino_t)x->nodes[n].inode + 1;
	st->st_mode = in->mode;
	st->st_nlink = in->nlink;
	/* made by this process when not as root, or as a parent no entry
	 * names: its owner's */
	if (x->as_root && !(x->nodes[n].flags & PN_IMPLICIT)) {
		st->st_uid = in->uid;
		st->st_gid = in->gid;
	} else {
		st->st_uid = x->uid;
		st->st_gid = x->gid;
	}
	st->st_rdev = (dev_t)in->rdev;
	st->st_size = (off_t)in->size;
	st->st_blksize = 4096;
	stored = in->size;
	if (in->nseg) {
		stored = 0;
		for (uint32_t i = 0; i < in->nseg; i++)
			stored += x->segs[in->seg + i].len;
	}
	st->st_blocks = S_ISREG(in->mode) ? (blkcnt_t)((stored + 511) / 512) :
			0;
	st->st_mtim.tv_sec = in->mtime;
	st->st_mtim.tv_nsec = in->mtime_ns;
	st->st_atim.tv_sec = in->atime;
	st->st_atim.tv_nsec = in->atime_ns;
	st->st_ctim = st->st_mtim;
}

const char *hu_pindex_symlink(const struct hu_pindex *x, hu_pnode n)
{
	const struct pi_inode *in;

	if (n >= x->h->nnodes)
		return NULL;
	in = inode_of(x, n);
	return in->link == PI_NONE ? NULL : x->strings + in->link;
}

const char *hu_pindex_xattr_names(const struct hu_pindex *x, hu_pnode n,
				  size_t *len)
{
	const struct pi_inode *in;

	*len = 0;
	if (n >= x->h->nnodes)
		return NULL;
	in = inode_of(x, n);
	*len = in->xnames_len;
	return in->xnames_len ? x->strings + in->xnames : NULL;
}

int hu_pindex_xattr(const struct hu_pindex *x, hu_pnode n, const char *name,
		    const void **val, size_t *len)
{
	const struct pi_inode *in;
	size_t lo = 0, hi;

	if (n >= x->h->nnodes)
		return errno = ENODATA, -1;
	in = inode_of(x, n);
	hi = in->nxattr;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct pi_xattr *a = &x->xattrs[in->xattr + mid];
		int cmp = strcmp(name, x->strings + a->name);

		if (cmp == 0) {
			*val = x->strings + a->val;
			*len = a->len;
			return 0;
		}
		if (cmp < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return errno = ENODATA, -1;
}

int hu_pindex_data(const struct hu_pindex *x, hu_pnode n, struct hu_pdata *d)
{
	const struct pi_inode *in;

	if (n >= x->h->nnodes || !S_ISREG((in = inode_of(x, n))->mode))
		return errno = EINVAL, -1;
	d->off = in->off;
	d->seg = in->nseg ? &x->segs[in->seg] : NULL;
	d->nseg = in->nseg;
	return 0;
}

const char *hu_pindex_digest(const struct hu_pindex *x)
{
	return x->h->digest;
}

const char *hu_pindex_diff_id(const struct hu_pindex *x)
{
	return x->h->diff_id;
}

uint64_t hu_pindex_tar_size(const struct hu_pindex *x)
{
	return x->h->tar_size;
}

bool hu_pindex_as_root(const struct hu_pindex *x)
{
	return x->h->flags & PI_AS_ROOT;
}

void hu_pindex_source(const struct hu_pindex *x, struct hu_pindex_file *f)
{
	f->dev = x->h->src_dev;
	f->ino = x->h->src_ino;
	f->size = x->h->src_size;
	f->mtime_ns = x->h->src_mtime_ns;
	f->ctime_ns = x->h->src_ctime_ns;
}

int hu_pindex_bytes(const struct hu_pindex *x, const void **buf, size_t *len)
{
	*buf = x->base;
	*len = x->len;
	return 0;
}

void hu_pindex_free(struct hu_pindex *x)
{
	if (!x)
		return;
	if (x->kind == PI_MAPPED)
		munmap((void *)x->base, x->len);
	else
		free((void *)x->base);
	free(x);
}

/* ---- loading: every offset and count checked ------------------------------ */

static bool section_ok(size_t len, uint64_t off, uint64_t n, size_t rec)
{
	return off % 8 == 0 && off >= sizeof(struct pi_header) &&
	       off <= len && n <= (len - off) / rec;
}

static bool string_ok(const struct pi_header *h, uint64_t off)
{
	/* the section ends with a NUL: a string from @off ends inside */
	return off < h->nstrings;
}

static bool digest_ok(const char *d, bool may_be_empty)
{
	size_t n = strnlen(d, 72);

	if (n == 72)
		return false;
	if (n == 0)
		return may_be_empty;
	if (n != 71 || strncmp(d, "sha256:", 7) != 0)
		return false;
	for (size_t i = 7; i < n; i++)
		if (!strchr("0123456789abcdef", d[i]) || !d[i])
			return false;
	return true;
}

static bool name_ok(const char *s)
{
	return *s && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

static bool header_ok(const struct pi_header *h, size_t len)
{
	if (h->size != len || (h->flags & ~(uint32_t)(PI_AS_ROOT | PI_IMAGE)) ||
	    !digest_ok(h->digest, false) ||
	    !digest_ok(h->diff_id, !(h->flags & PI_IMAGE)))
		return false;
	if (!section_ok(len, h->onodes, h->nnodes, sizeof(struct pi_node)) ||
	    !section_ok(len, h->oinodes, h->ninodes,
			sizeof(struct pi_inode)) ||
	    !section_ok(len, h->osegs, h->nsegs, sizeof(struct hu_pseg)) ||
	    !section_ok(len, h->oxattrs, h->nxattrs,
			sizeof(struct pi_xattr)) ||
	    !section_ok(len, h->ostrings, h->nstrings, 1) ||
	    !section_ok(len, h->owarns, h->lwarns, 1))
		return false;
	return h->nnodes >= 1 && h->nnodes < PI_NONE &&
	       h->ninodes < PI_NONE && h->nsegs < PI_NONE &&
	       h->nxattrs < PI_NONE && h->nstrings >= 1 &&
	       h->nstrings < PI_NONE;
}

static bool inode_ok(const struct hu_pindex *x, const struct pi_inode *in)
{
	const struct pi_header *h = x->h;
	uint64_t end = in->xnames + (uint64_t)in->xnames_len;

	if ((uint64_t)in->seg + in->nseg > h->nsegs ||
	    (uint64_t)in->xattr + in->nxattr > h->nxattrs ||
	    end > h->nstrings || (in->xnames_len &&
				 x->strings[end - 1] != '\0') ||
	    (in->nxattr == 0) != (in->xnames_len == 0))
		return false;
	if (S_ISLNK(in->mode) != (in->link != PI_NONE) ||
	    (in->link != PI_NONE && !string_ok(h, in->link)))
		return false;
	if (in->nseg && !S_ISREG(in->mode))
		return false;
	if (S_ISREG(in->mode)) {
		uint64_t stored = in->nseg ? 0 : in->size;

		for (uint32_t i = 0; i < in->nseg; i++) {
			const struct hu_pseg *s = &x->segs[in->seg + i];

			if (s->len > h->tar_size || s->file_off > in->size ||
			    s->len > in->size - s->file_off)
				return false;
			stored += s->len;
			if (stored > h->tar_size)
				return false;
		}
		if (in->off > h->tar_size || stored > h->tar_size - in->off)
			return false;
	}
	for (uint32_t i = 0; i < in->nxattr; i++) {
		const struct pi_xattr *a = &x->xattrs[in->xattr + i];

		if (a->name < in->xnames || a->name >= end ||
		    a->val > h->nstrings || a->len > h->nstrings - a->val)
			return false;
		if (i && strcmp(x->strings + x->xattrs[in->xattr + i - 1].name,
				x->strings + a->name) >= 0)
			return false;
	}
	return true;
}

/* The tree: every node but the root the child of one directory, which
 * comes before it, among siblings sorted and named once. */
static bool nodes_ok(const struct hu_pindex *x)
{
	const struct pi_header *h = x->h;

	if (x->nodes[0].parent != PI_NONE || !string_ok(h, x->nodes[0].name) ||
	    x->strings[x->nodes[0].name])
		return false;
	/* the fields first: the tree's checks read names and inodes */
	for (uint64_t i = 0; i < h->nnodes; i++) {
		const struct pi_node *nd = &x->nodes[i];

		if (!string_ok(h, nd->name) || nd->inode >= h->ninodes ||
		    (nd->flags & ~(uint32_t)PN_IMPLICIT))
			return false;
	}
	for (uint64_t i = 0; i < h->nnodes; i++) {
		const struct pi_node *nd = &x->nodes[i];
		const struct pi_inode *in = &x->inodes[nd->inode];

		if (i && !name_ok(x->strings + nd->name))
			return false;
		if (i && (nd->parent >= i ||
			  i < x->nodes[nd->parent].child ||
			  i - x->nodes[nd->parent].child >=
			  x->nodes[nd->parent].nchild))
			return false;
		if ((nd->flags & PN_IMPLICIT) && !S_ISDIR(in->mode))
			return false;
		if (!nd->nchild)
			continue;
		if (!S_ISDIR(in->mode) || nd->child <= i ||
		    (uint64_t)nd->child + nd->nchild > h->nnodes)
			return false;
		for (uint32_t c = 1; c < nd->nchild; c++)
			if (strcmp(x->strings + x->nodes[nd->child + c - 1].name,
				   x->strings + x->nodes[nd->child + c].name) >= 0)
				return false;
	}
	return true;
}

/* One of a record's strings at @p, @len bytes and a NUL, of the @left
 * bytes up to the section's end: its size with the NUL (0: none), or
 * SIZE_MAX when it does not fit or is not ended. */
static size_t str_at(const unsigned char *p, size_t left, uint32_t len)
{
	if (len == PI_NONE)
		return 0;
	if (len >= left || p[len] != '\0')
		return SIZE_MAX;
	return (size_t)len + 1;
}

/* The record at @p, of the @left bytes up to the section's end, into @w
 * and its strings (NULL: none): its size, or 0 when it is not whole. */
static size_t warn_at(const unsigned char *p, size_t left,
		      struct pi_warn *w, const char *str[3])
{
	const uint32_t *len[3] = { &w->entry_len, &w->path_len, &w->msg_len };
	size_t at = sizeof(*w);

	if (left < sizeof(*w))
		return 0;
	memcpy(w, p, sizeof(*w));
	if (w->kind > TL_PROBLEM_LINK_FORWARD || w->msg_len == PI_NONE)
		return 0;
	for (int i = 0; i < 3; i++) {
		size_t n = str_at(p + at, left - at, *len[i]);

		if (n == SIZE_MAX)
			return 0;
		str[i] = n ? (const char *)p + at : NULL;
		at += n;
	}
	return at;
}

static bool warns_ok(const struct hu_pindex *x)
{
	const unsigned char *p = x->base + x->h->owarns;
	size_t left = x->h->lwarns, n;
	const char *str[3];
	struct pi_warn w;

	for (uint64_t i = 0; i < x->h->nwarns; i++) {
		n = warn_at(p, left, &w, str);
		if (!n)
			return false;
		p += n;
		left -= n;
	}
	return left == 0;
}

/*
 * Say the @n records at @p (@len bytes, whole) of tarball @name as its
 * unpack would have said them, to @r, or to @sink where the unpack gives
 * one what it finds (tarentry.c: link_forward(), stated_again()).  -1
 * with @e where the unpack would have stopped: a hard link forward that
 * no sink takes.
 */
static int replay(const unsigned char *p, size_t len, uint64_t n,
		  const char *name, const struct hu_report *r,
		  const struct hu_problem_sink *sink, struct hu_error *e)
{
	const char *str[3];
	struct pi_warn w;
	size_t at;
	char *where;

	for (uint64_t i = 0; i < n; i++, p += at, len -= at) {
		const char *entry, *path, *msg;

		at = warn_at(p, len, &w, str);	/* checked at the load */
		entry = str[0];
		path = str[1] ? str[1] : "";
		msg = str[2];
		if (w.kind == TL_PROBLEM_LINK_FORWARD &&
		    (!sink || sink->policy == HU_PB_FAIL)) {
			where = tl_where(name, entry);
			hu_error_set(e, 0, where ? where : name,
				     "hard link to a path not yet seen: %s",
				     msg);
			free(where);
			return -1;
		}
		if (w.kind == TL_PROBLEM_LINK_FORWARD) {
			if (hu_problem_found(sink, r, HU_PB_TAR_LINK_FORWARD,
					     true, name, path, msg, 0, e) < 0)
				return -1;
		} else if (w.kind == 0 || !sink) {
			tl_warn_at(r, name, entry, (int)w.err, msg);
		} else if (w.kind == TL_PROBLEM_DUPLICATE &&
			   hu_problem_found(sink, r, HU_PB_TAR_DUPLICATE,
					    false, name, path, msg, 0, e) < 0) {
			return -1;
		}
		/* (a directory restated: only fsck's own read tells) */
	}
	return 0;
}

int hu_pindex_replay(const struct hu_pindex *x, const char *name,
		     const struct hu_report *r,
		     const struct hu_problem_sink *sink, struct hu_error *e)
{
	return replay(x->base + x->h->owarns, x->h->lwarns, x->h->nwarns,
		      name, r, sink, e);
}

static bool image_ok(struct hu_pindex *x)
{
	const struct pi_header *h = (const void *)x->base;

	if (x->len < sizeof(*h) || memcmp(h->magic, PI_MAGIC, 8) != 0 ||
	    h->version != PI_VERSION || h->order != PI_ORDER ||
	    h->size != x->len ||
	    XXH3_64bits(x->base + PI_SUM_END, x->len - PI_SUM_END) != h->sum ||
	    !header_ok(h, x->len))
		return false;
	x->h = h;
	x->nodes = (const void *)(x->base + h->onodes);
	x->inodes = (const void *)(x->base + h->oinodes);
	x->segs = (const void *)(x->base + h->osegs);
	x->xattrs = (const void *)(x->base + h->oxattrs);
	x->strings = (const char *)x->base + h->ostrings;
	if (x->strings[h->nstrings - 1] != '\0')
		return false;
	for (uint64_t i = 0; i < h->ninodes; i++)
		if (!inode_ok(x, &x->inodes[i]))
			return false;
	return nodes_ok(x) && warns_ok(x);
}

void hu_pindex_fix_sum(void *buf, size_t len)
{
	struct pi_header *h = buf;

	if (len >= sizeof(*h))
		h->sum = XXH3_64bits((unsigned char *)buf + PI_SUM_END,
				     len - PI_SUM_END);
}

/* A device number no filesystem has (majors are far smaller), one for
 * each index loaded. */
static dev_t next_dev(void)
{
	static atomic_uint count;
	unsigned c = atomic_fetch_add(&count, 1);

	return makedev(0x48550000u + (c >> 20), c & 0xfffff);
}

/* @base (@len bytes, owned as @kind) as an index: 0, or -1 with errno
 * EINVAL (not a valid index; @base freed) or ENOMEM. */
static int load(const void *base, size_t len, int kind, struct hu_pindex **out)
{
	struct hu_pindex *x = calloc(1, sizeof(*x));

	*out = NULL;
	if (x) {
		x->base = base;
		x->len = len;
		x->kind = kind;
	}
	if (!x || !image_ok(x)) {
		int err = x ? EINVAL : ENOMEM;

		if (x)
			hu_pindex_free(x);
		else if (kind == PI_MAPPED)
			munmap((void *)base, len);
		else
			free((void *)base);
		return errno = err, -1;
	}
	x->dev = next_dev();
	x->as_root = x->h->flags & PI_AS_ROOT;
	x->uid = geteuid();
	x->gid = getegid();
	*out = x;
	return 0;
}

int hu_pindex_from_bytes(const void *buf, size_t len, struct hu_pindex **out)
{
	void *copy = malloc(len ? len : 1);

	*out = NULL;
	if (!copy)
		return errno = ENOMEM, -1;
	memcpy(copy, buf, len);
	return load(copy, len, PI_HEAP, out);
}

int hu_pindex_from_fd(int fd, struct hu_pindex **out)
{
	struct stat st;
	void *p;

	*out = NULL;
	if (fstat(fd, &st) < 0)
		return -1;
	if (!S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(struct pi_header))
		return errno = EINVAL, -1;
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED)
		return -1;
	return load(p, (size_t)st.st_size, PI_MAPPED, out);
}

/* ---- building: the tarball's entries recorded ----------------------------- */

struct pb_xattr {
	char *name;
	void *val;
	size_t len;
};

/* An inode the unpack would make. */
struct pb_inode {
	mode_t mode;
	uid_t uid;
	gid_t gid;
	struct timespec times[2];	/* atime, mtime (UTIME_OMIT: now) */
	uint64_t size, rdev, off;
	struct hu_pseg *seg;
	size_t nseg;
	char *link;
	struct pb_xattr *x;
	size_t nx;
	uint32_t nlink, out;
};

struct buf {
	unsigned char *p;
	size_t len, cap;
};

struct pb {
	struct tl t;		/* first: the entry hook gets it */
	struct hu_layer l;
	struct pb_inode *ino;
	size_t nino, icap;
	uint32_t *node_ino;	/* per node of t.ix */
	size_t ncap;
	struct timespec now;
	uid_t uid;		/* ours, once: what the unpack's own */
	gid_t gid;		/* mkdir and create give */
	struct buf warns;	/* the warnings, as the image keeps them */
	uint64_t nwarns;
	bool warns_lost;	/* out of memory: the index is not kept */
};

static struct pb *pb_of(struct tl *t)
{
	return (struct pb *)t;
}

static int oom(struct tl *t)
{
	return tl_fail(t, ENOMEM, "out of memory");
}

static uint32_t new_inode(struct pb *b, mode_t mode)
{
	struct pb_inode *in;

	if (b->nino == b->icap) {
		size_t cap = b->icap ? b->icap * 2 : 1024;

		in = realloc(b->ino, cap * sizeof(*in));
		if (!in)
			return PI_NONE;
		b->ino = in;
		b->icap = cap;
	}
	if (b->nino >= PI_NONE - 1)
		return PI_NONE;
	in = &b->ino[b->nino];
	memset(in, 0, sizeof(*in));
	in->mode = mode;
	in->uid = b->uid;
	in->gid = b->gid;
	in->times[0] = b->t.times[0];
	in->times[1] = b->t.times[1];
	return (uint32_t)b->nino++;
}

/* Node @id of t.ix holds inode @ino. */
static int set_node(struct pb *b, uint32_t id, uint32_t ino)
{
	if (id >= b->ncap) {
		size_t cap = b->ncap ? b->ncap : 1024;
		uint32_t *v;

		while (cap <= id)
			cap *= 2;
		v = realloc(b->node_ino, cap * sizeof(*v));
		if (!v)
			return -1;
		for (size_t i = b->ncap; i < cap; i++)
			v[i] = PI_NONE;
		b->node_ino = v;
		b->ncap = cap;
	}
	b->node_ino[id] = ino;
	return 0;
}

static struct pb_inode *node_inode(struct pb *b, uint32_t id)
{
	return &b->ino[b->node_ino[id]];
}

static bool has_prefix(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

/* What setxattr(2) of @name (@size bytes) on an inode of type @type would
 * fail with, as the unpack's user: 0 when it is set. */
static int xattr_refusal(const struct tl *t, const char *name, size_t size,
			 mode_t type)
{
	if (strlen(name) > XATTR_NAME_MAX)
		return ERANGE;
	if (size > XATTR_SIZE_MAX)
		return E2BIG;
	if (!has_prefix(name, "user.") && !has_prefix(name, "trusted.") &&
	    !has_prefix(name, "security.") && !has_prefix(name, "system."))
		return EOPNOTSUPP;
	/* the kernel keeps user.* to regular files and directories */
	if (has_prefix(name, "user.") && !S_ISREG(type) && !S_ISDIR(type))
		return EPERM;
	if (!t->as_root && (has_prefix(name, "trusted.") ||
			    !strcmp(name, "security.capability")))
		return EPERM;
	return 0;
}

static int put_xattr(struct pb_inode *in, const char *name, const void *val,
		     size_t len)
{
	struct pb_xattr *x;
	void *v = malloc(len ? len : 1);

	if (!v)
		return -1;
	if (len)
		memcpy(v, val, len);
	for (size_t i = 0; i < in->nx; i++) {
		if (strcmp(in->x[i].name, name) != 0)
			continue;
		free(in->x[i].val);
		in->x[i].val = v;
		in->x[i].len = len;
		return 0;
	}
	x = realloc(in->x, (in->nx + 1) * sizeof(*x));
	if (!x) {
		free(v);
		return -1;
	}
	in->x = x;
	x[in->nx].name = strdup(name);
	if (!x[in->nx].name) {
		free(v);
		return -1;
	}
	x[in->nx].val = v;
	x[in->nx++].len = len;
	return 0;
}

/* Owner and xattrs of the current entry onto inode @ino (set_owner_xattrs
 * of tarentry.c). */
static int record_owner_xattrs(struct pb *b, uint32_t ino)
{
	struct tl *t = &b->t;
	const char *name;
	const void *value;
	size_t size;

	if (t->as_root) {
		b->ino[ino].uid = (uid_t)archive_entry_uid(t->ae);
		b->ino[ino].gid = (gid_t)archive_entry_gid(t->ae);
	}
	archive_entry_xattr_reset(t->ae);
	while (archive_entry_xattr_next(t->ae, &name, &value, &size) ==
	       ARCHIVE_OK) {
		char dec[XATTR_NAME_MAX + 1], *esc;
		int err;

		name = tl_xattr_name(t, name, dec, sizeof(dec));
		if (!name)
			continue;
		err = xattr_refusal(t, name, size, b->ino[ino].mode);
		if (!err) {
			if (put_xattr(&b->ino[ino], name, value, size) < 0)
				return oom(t);
			continue;
		}
		esc = tl_escape(name);
		tl_warn(t, err, "xattr %s not kept", esc);
		tl_escape_free(esc);
	}
	return 0;
}

/* Node @id and everything beneath it are gone (a directory replaced). */
static void mark_gone(struct tar_index *x, uint32_t id)
{
	uint32_t cur = x->nodes[id].child;

	x->nodes[id].flags |= TI_GONE;
	while (cur != TI_NONE) {
		x->nodes[cur].flags |= TI_GONE;
		if (x->nodes[cur].child != TI_NONE) {
			cur = x->nodes[cur].child;
			continue;
		}
		while (cur != id && x->nodes[cur].next == TI_NONE)
			cur = x->nodes[cur].parent;
		if (cur == id)
			break;
		cur = x->nodes[cur].next;
	}
}

/* A directory made as a parent of the current entry, named by none. */
static uint32_t make_parent(struct pb *b, uint32_t parent, const char *name,
			    size_t len)
{
	struct tar_index *x = &b->t.ix;
	uint32_t id = ti_child(x, parent, name, len, true);
	uint32_t ino = id != TI_NONE ? new_inode(b, S_IFDIR | 0755) : PI_NONE;

	if (ino == PI_NONE || set_node(b, id, ino) < 0)
		return TI_NONE;
	x->nodes[id].flags = TI_DIR;
	return id;
}

/* The node of directory @dir, its missing parts made as parents; fails as
 * the unpack's walk does (tardirs.c, walk_dir). */
static int parent_dir(struct pb *b, const char *dir, uint32_t *node)
{
	struct tl *t = &b->t;
	struct tar_index *x = &t->ix;
	uint32_t id = TI_ROOT;

	for (const char *s = dir; *s;) {
		size_t len = (size_t)(strchrnul(s, '/') - s);
		uint32_t c;

		if (len > NAME_MAX) {
			char *p = strndup(dir, (size_t)(s - dir) + len);
			char *esc = tl_escape(p ? p : dir);

			tl_fail(t, ENAMETOOLONG, "cannot open directory %s",
				esc);
			tl_escape_free(esc);
			free(p);
			return -1;
		}
		c = ti_child(x, id, s, len, false);
		if (tl_live(x, c) && !(x->nodes[c].flags & TI_DIR)) {
			char *p = strndup(dir, (size_t)(s - dir) + len);
			char *esc = tl_escape(p ? p : dir);

			tl_fail(t, 0, "path passes through %s: %s",
				S_ISLNK(node_inode(b, c)->mode) ? "a symlink" :
				"a non-directory", esc);
			tl_escape_free(esc);
			free(p);
			return -1;
		}
		if (!tl_live(x, c) && (c = make_parent(b, id, s, len)) ==
		    TI_NONE)
			return oom(t);
		id = c;
		s += len + (s[len] == '/');
	}
	*node = id;
	return 0;
}

static int record_problem(struct tl *t, int kind, const char *path,
			  const char *msg);

/* What is at @leaf (@path) already (node @id, live): kept to be said (as
 * stated_again() of tarentry.c says it), and gone unless a directory
 * meets a directory (replace_earlier of tarentry.c). */
static int replace_earlier(struct pb *b, const char *path, uint32_t id,
			   bool want_dir, bool *keep_dir)
{
	struct tl *t = &b->t;
	struct ti_node *nd = &t->ix.nodes[id];
	int rc = 0;

	*keep_dir = want_dir && (nd->flags & TI_DIR);
	if (nd->flags & TI_EXPLICIT)
		rc = record_problem(t, *keep_dir ? TL_PROBLEM_DIR_AGAIN :
				    TL_PROBLEM_DUPLICATE, path,
				    "duplicate entry: the later one wins");
	else if (!want_dir)
		rc = record_problem(t, TL_PROBLEM_DUPLICATE, path,
				    "replaces the directory made for earlier "
				    "entries");
	if (!*keep_dir)
		mark_gone(&t->ix, id);
	return rc;
}

static int add_seg(struct pb_inode *in, size_t *cap, uint64_t off,
		   uint64_t len)
{
	struct hu_pseg *v;

	if (in->nseg && in->seg[in->nseg - 1].file_off +
	    in->seg[in->nseg - 1].len == off) {
		in->seg[in->nseg - 1].len += len;
		return 0;
	}
	if (in->nseg == *cap) {
		*cap = *cap ? *cap * 2 : 4;
		v = realloc(in->seg, *cap * sizeof(*v));
		if (!v)
			return -1;
		in->seg = v;
	}
	in->seg[in->nseg++] = (struct hu_pseg){ off, len };
	return 0;
}

/*
 * Where the current entry's data lie in the stream, and its size.  The
 * blocks are read, not skipped (the same bytes pass either way): only
 * they say where a sparse file's data go, its map being read with them
 * (GNU sparse 1.0 keeps it in the data).  Each block's place in the
 * stream is where libarchive has consumed to when it hands it out.
 */
static int record_data(struct pb *b, struct pb_inode *in)
{
	struct tl *t = &b->t;
	uint64_t end = 0, next = 0;
	size_t cap = 0;

	in->off = (uint64_t)archive_filter_bytes(t->a, 0);
	for (bool first = true;; first = false) {
		const void *buf;
		size_t size;
		la_int64_t off;
		int r = archive_read_data_block(t->a, &buf, &size, &off);
		uint64_t at = (uint64_t)archive_filter_bytes(t->a, 0);

		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN)
			return tl_archive_fail(t, "in this entry's data");
		if (!size || off < 0)
			continue;
		if (first || !in->nseg)
			in->off = at;
		else if (at != next)
			return tl_fail(t, 0, "the entry's data are not one "
				       "run of the stream: not indexed");
		next = at + size;
		if (add_seg(in, &cap, (uint64_t)off, size) < 0)
			return oom(t);
		if ((uint64_t)off + size > end)
			end = (uint64_t)off + size;
	}
	/* The size: zeros or a hole at the end (write_data of
	 * tarentry.c). */
	if (archive_entry_size_is_set(t->ae) && archive_entry_size(t->ae) > 0 &&
	    (uint64_t)archive_entry_size(t->ae) > end)
		end = (uint64_t)archive_entry_size(t->ae);
	in->size = end;
	/* one run from the start to the end, or nothing: not sparse */
	if ((in->nseg == 1 && in->seg[0].file_off == 0 &&
	     in->seg[0].len == end) || (!in->nseg && !end)) {
		free(in->seg);
		in->seg = NULL;
		in->nseg = 0;
		return 0;
	}
	/* holes only: one empty segment at the end says it is sparse */
	if (!in->nseg && add_seg(in, &cap, end, 0) < 0)
		return oom(t);
	return 0;
}

/* The verb of the unpack's message when it cannot make the entry. */
static const char *create_what(bool marker, bool link, mode_t type)
{
	if (marker)
		return "create";
	if (link)
		return "create hard link";
	return type == AE_IFDIR ? "create directory" :
	       type == AE_IFLNK ? "create symlink" : "create";
}

/* Record the entry at @leaf of @parent by its type: its inode in *@ino;
 * 1 when it is left out (make_entry of tarentry.c). */
static int record_entry(struct pb *b, uint32_t parent, const char *leaf,
			bool marker, const char *target, bool keep_dir,
			uint32_t *ino)
{
	struct tl *t = &b->t;
	mode_t type = archive_entry_filetype(t->ae);
	mode_t perm = archive_entry_perm(t->ae) & 07777;
	const char *to;

	if (target) {
		*ino = b->node_ino[ti_path(&t->ix, target, false)];
		return 0;
	}
	if (!marker && (type == AE_IFCHR || type == AE_IFBLK) &&
	    !t->as_root) {
		tl_warn(t, 0, "device not made without root: skipped");
		return 1;
	}
	if (!marker && type != AE_IFREG && type != AE_IFDIR &&
	    type != AE_IFLNK && type != AE_IFCHR && type != AE_IFBLK &&
	    type != AE_IFIFO) {
		tl_warn(t, 0, "entry of an unknown type: skipped");
		return 1;
	}
	to = !marker && type == AE_IFLNK ? archive_entry_symlink(t->ae) : NULL;
	if (!marker && type == AE_IFLNK && (!to || !*to))
		return tl_write_fail(t, ENOENT, "create symlink");
	if (to && strlen(to) >= PATH_MAX)
		return tl_write_fail(t, ENAMETOOLONG, "create symlink");
	if (keep_dir) {
		*ino = b->node_ino[ti_child(&t->ix, parent, leaf, strlen(leaf),
					    false)];
		b->ino[*ino].times[0] = t->times[0];
		b->ino[*ino].times[1] = t->times[1];
	} else {
		*ino = new_inode(b, S_IFREG);
		if (*ino == PI_NONE)
			return oom(t);
	}
	b->ino[*ino].mode = marker ? S_IFREG | perm :
			    type == AE_IFLNK ? S_IFLNK | 0777 : type | perm;
	if (!marker && type == AE_IFREG && record_data(b, &b->ino[*ino]) < 0)
		return -1;
	if (!marker && (type == AE_IFCHR || type == AE_IFBLK))
		b->ino[*ino].rdev = makedev(archive_entry_rdevmajor(t->ae),
					    archive_entry_rdevminor(t->ae));
	if (to) {
		b->ino[*ino].link = strdup(to);
		if (!b->ino[*ino].link)
			return oom(t);
		b->ino[*ino].size = strlen(to);
	}
	return record_owner_xattrs(b, *ino);
}

static int put_entry(struct pb *b, const char *dir, const char *leaf,
		     const char *path)
{
	struct tl *t = &b->t;
	const char *hl = archive_entry_hardlink(t->ae);
	bool marker = tl_is_marker_name(leaf), keep_dir = false;
	bool want_dir = !marker && !hl &&
			archive_entry_filetype(t->ae) == AE_IFDIR;
	char *esc = hl ? tl_escape(hl) : NULL, *target = NULL;
	uint32_t parent = TI_ROOT, id, ino = PI_NONE;
	int rc;

	if (hl && !marker) {
		rc = tl_link_target(t, hl, path, &target, esc);
		if (rc != 0)
			goto out;
	}
	rc = -1;
	if (parent_dir(b, dir, &parent) < 0)
		goto out;
	id = ti_child(&t->ix, parent, leaf, strlen(leaf), false);
	if (tl_live(&t->ix, id) &&
	    replace_earlier(b, path, id, want_dir, &keep_dir) < 0)
		goto out;
	/* the target went with what the entry replaced */
	if (target && !tl_live(&t->ix, ti_path(&t->ix, target, false))) {
		rc = tl_fail(t, 0, "hard link to a path not yet seen: %s", esc);
		goto out;
	}
	if (strlen(leaf) > NAME_MAX && !keep_dir) {
		rc = tl_write_fail(t, ENAMETOOLONG,
				   create_what(marker, target != NULL,
					       archive_entry_filetype(t->ae)));
		goto out;
	}
	rc = record_entry(b, parent, leaf, marker, target, keep_dir, &ino);
	if (rc == 0) {
		id = ti_child(&t->ix, parent, leaf, strlen(leaf), true);
		if (id == TI_NONE || set_node(b, id, ino) < 0) {
			rc = oom(t);
			goto out;
		}
		t->ix.nodes[id].flags = TI_EXPLICIT | (want_dir ? TI_DIR : 0);
	}
out:
	free(target);
	if (esc)
		tl_escape_free(esc);
	return rc < 0 ? -1 : 0;
}

/* "./" or "/": the root (root_entry of tarentry.c). */
static int root_entry(struct pb *b)
{
	struct tl *t = &b->t;
	struct ti_node *root = &t->ix.nodes[TI_ROOT];
	struct pb_inode *in;

	if (archive_entry_hardlink(t->ae) ||
	    archive_entry_filetype(t->ae) != AE_IFDIR)
		return tl_fail(t, 0, "the layer's root must be a directory");
	if ((root->flags & TI_EXPLICIT) &&
	    record_problem(t, TL_PROBLEM_DIR_AGAIN, "",
			   "duplicate entry: the later one wins") < 0)
		return -1;
	if (record_owner_xattrs(b, b->node_ino[TI_ROOT]) < 0)
		return -1;
	root->flags = TI_DIR | TI_EXPLICIT;
	in = node_inode(b, TI_ROOT);
	in->mode = S_IFDIR | (archive_entry_perm(t->ae) & 07777);
	in->times[0] = t->times[0];
	in->times[1] = t->times[1];
	return 0;
}

static int record(struct tl *t)
{
	struct pb *b = pb_of(t);
	const char *why;
	char *path, *slash;
	bool is_root;
	int rc;

	t->raw = archive_entry_pathname(t->ae);
	if (!t->raw)
		return tl_fail(t, 0, "an entry's name cannot be read");
	tl_entry_times(t);
	if (!t->root_timed) {
		/* A root no entry names: the times of the first entry. */
		t->root_timed = true;
		node_inode(b, TI_ROOT)->times[0] = t->times[0];
		node_inode(b, TI_ROOT)->times[1] = t->times[1];
	}
	path = hu_tar_path_norm(t->raw, &is_root, &why);
	if (!path)
		return tl_fail(t, 0, "%s", why);
	slash = strrchr(path, '/');
	if (is_root) {
		rc = root_entry(b);
	} else {
		char *dir = strndup(path, slash ? (size_t)(slash - path) : 0);

		rc = dir ? put_entry(b, dir, slash ? slash + 1 : path, path) :
			   oom(t);
		free(dir);
	}
	free(path);
	return rc;
}

/* ---- building: the image written ----------------------------------------- */

static int buf_add(struct buf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		unsigned char *q;

		while (cap < b->len + n)
			cap *= 2;
		q = realloc(b->p, cap);
		if (!q)
			return -1;
		b->p = q;
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

/* A record of struct pi_warn, @kind, of the current entry: 0, or -1
 * (out of memory). */
static int keep_said(struct pb *b, uint32_t kind, int err, const char *path,
		     const char *msg)
{
	const char *str[3] = { b->t.raw, path, msg };
	uint32_t len[3];
	struct pi_warn w;

	for (int i = 0; i < 3; i++) {
		size_t n = str[i] ? strlen(str[i]) : 0;

		if (n >= PI_NONE)
			return -1;
		len[i] = str[i] ? (uint32_t)n : PI_NONE;
	}
	w = (struct pi_warn){ kind, (uint32_t)err, len[0], len[1], len[2] };
	if (buf_add(&b->warns, &w, sizeof(w)) < 0)
		return -1;
	for (int i = 0; i < 3; i++)
		if (str[i] && buf_add(&b->warns, str[i], len[i] + 1) < 0)
			return -1;
	b->nwarns++;
	return 0;
}

/* tl_warn()'s hook: the warning kept, to be said by replay(). */
static void record_warn(struct tl *t, int err, const char *msg)
{
	if (keep_said(pb_of(t), 0, err, NULL, msg) < 0)
		pb_of(t)->warns_lost = true;
}

/* The tl problem hook: kept, for the reader's sink to take or not. */
static int record_problem(struct tl *t, int kind, const char *path,
			  const char *msg)
{
	if (keep_said(pb_of(t), (uint32_t)kind, 0, path, msg) < 0)
		return oom(t);
	return 0;
}

/* @s (@n bytes, then a NUL) into the strings: its offset, or PI_NONE. */
static uint32_t str_add(struct buf *s, const void *p, size_t n)
{
	size_t at = s->len;

	if (at + n + 1 >= PI_NONE || buf_add(s, p, n) < 0 ||
	    buf_add(s, "", 1) < 0)
		return PI_NONE;
	return (uint32_t)at;
}

static void time_of(const struct pb *b, const struct timespec *t,
		    int64_t *sec, uint32_t *nsec)
{
	const struct timespec *u = t->tv_nsec == UTIME_OMIT ? &b->now : t;

	*sec = u->tv_sec;
	*nsec = (uint32_t)u->tv_nsec;
}

static int cmp_xattr(const void *a, const void *b)
{
	return strcmp(((const struct pb_xattr *)a)->name,
		      ((const struct pb_xattr *)b)->name);
}

/* Inode @in as written: its xattrs, segments and target placed. */
static int put_inode(struct pb *b, struct pb_inode *in, struct buf *inodes,
		     struct buf *segs, struct buf *xattrs, struct buf *strs)
{
	struct pi_inode o = { .mode = in->mode, .uid = in->uid,
		.gid = in->gid, .nlink = in->nlink, .size = in->size,
		.rdev = in->rdev, .off = in->off, .link = PI_NONE };
	uint32_t first = PI_NONE;

	time_of(b, &in->times[1], &o.mtime, &o.mtime_ns);
	time_of(b, &in->times[0], &o.atime, &o.atime_ns);
	o.seg = (uint32_t)(segs->len / sizeof(struct hu_pseg));
	o.nseg = (uint32_t)in->nseg;
	if (in->nseg && buf_add(segs, in->seg, in->nseg * sizeof(*in->seg)) < 0)
		return -1;
	if (in->link && (o.link = str_add(strs, in->link,
					  strlen(in->link))) == PI_NONE)
		return -1;
	if (in->nx)
		qsort(in->x, in->nx, sizeof(*in->x), cmp_xattr);
	o.xattr = (uint32_t)(xattrs->len / sizeof(struct pi_xattr));
	o.nxattr = (uint32_t)in->nx;
	for (size_t i = 0; i < in->nx; i++) {
		struct pi_xattr a = { 0 };

		a.name = str_add(strs, in->x[i].name, strlen(in->x[i].name));
		if (a.name == PI_NONE)
			return -1;
		if (first == PI_NONE)
			first = a.name;
		if (buf_add(xattrs, &a, sizeof(a)) < 0)
			return -1;
	}
	if (in->nx) {
		o.xnames = first;
		o.xnames_len = (uint32_t)(strs->len - first);
	}
	/* the values after the names, which stay one run */
	for (size_t i = 0; i < in->nx; i++) {
		struct pi_xattr *a = (struct pi_xattr *)xattrs->p + o.xattr + i;
		uint32_t v = str_add(strs, in->x[i].val, in->x[i].len);

		if (v == PI_NONE)
			return -1;
		a->val = v;
		a->len = (uint32_t)in->x[i].len;
	}
	return buf_add(inodes, &o, sizeof(o));
}

struct pb_kid {
	const char *name;
	uint32_t id;
};

static int cmp_kid(const void *a, const void *b)
{
	return strcmp(((const struct pb_kid *)a)->name,
		      ((const struct pb_kid *)b)->name);
}

static int pad8(struct buf *b)
{
	static const char zero[8];

	return buf_add(b, zero, (8 - b->len % 8) % 8);
}

struct pb_out {
	struct buf nodes, inodes, segs, xattrs, strs;
	uint32_t *order;	/* ti node of each node written */
	size_t n, cap;
};

static void out_free(struct pb_out *o)
{
	free(o->nodes.p);
	free(o->inodes.p);
	free(o->segs.p);
	free(o->xattrs.p);
	free(o->strs.p);
	free(o->order);
}

/* The live nodes, breadth first, each directory's children sorted; the
 * inodes they hold, numbered as met, their links counted. */
static int lay_out(struct pb *b, struct pb_out *o)
{
	const struct tar_index *x = &b->t.ix;
	struct pb_kid *kids = NULL;
	size_t kcap = 0;
	uint32_t nino = 0;
	int rc = -1;

	o->order = malloc(sizeof(*o->order) * (x->n ? x->n : 1));
	if (!o->order)
		return -1;
	o->order[o->n++] = TI_ROOT;
	for (size_t i = 0; i < b->nino; i++)
		b->ino[i].out = PI_NONE;
	if (str_add(&o->strs, "", 0) == PI_NONE)
		goto out;
	for (size_t i = 0; i < o->n; i++) {
		uint32_t id = o->order[i];
		struct pb_inode *in = node_inode(b, id);
		struct pi_node nd = { .parent = PI_NONE, .child = 0 };
		size_t nk = 0;

		if (in->out == PI_NONE)
			in->out = nino++;
		in->nlink++;
		nd.inode = in->out;
		nd.flags = (x->nodes[id].flags & TI_EXPLICIT) ? 0 : PN_IMPLICIT;
		nd.name = id == TI_ROOT ? 0 :
			  str_add(&o->strs, x->nodes[id].name,
				  strlen(x->nodes[id].name));
		if (nd.name == PI_NONE)
			goto out;
		for (uint32_t c = x->nodes[id].child; c != TI_NONE;
		     c = x->nodes[c].next) {
			if (!tl_live(x, c))
				continue;
			if (nk == kcap) {
				size_t cap = kcap ? kcap * 2 : 64;
				struct pb_kid *k = realloc(kids,
							   cap * sizeof(*k));

				if (!k)
					goto out;
				kids = k;
				kcap = cap;
			}
			kids[nk++] = (struct pb_kid){ x->nodes[c].name, c };
		}
		if (nk)
			qsort(kids, nk, sizeof(*kids), cmp_kid);
		nd.child = nk ? (uint32_t)o->n : 0;
		nd.nchild = (uint32_t)nk;
		for (size_t k = 0; k < nk; k++) {
			o->order[o->n++] = kids[k].id;
			/* a directory's links: "." and each child's ".." */
			if (x->nodes[kids[k].id].flags & TI_DIR)
				in->nlink++;
		}
		if (buf_add(&o->nodes, &nd, sizeof(nd)) < 0)
			goto out;
	}
	/* the parents, now that every node has its number */
	for (size_t i = 0; i < o->n; i++) {
		const struct pi_node *nd = (const void *)o->nodes.p;

		for (uint32_t c = 0; c < nd[i].nchild; c++)
			((struct pi_node *)o->nodes.p)[nd[i].child + c].parent =
				(uint32_t)i;
	}
	rc = 0;
out:
	free(kids);
	return rc;
}

/* The inodes in the order lay_out numbered them. */
static int put_inodes(struct pb *b, struct pb_out *o)
{
	uint32_t n = 0;
	uint32_t *by_out;

	for (size_t i = 0; i < b->nino; i++)
		n += b->ino[i].out != PI_NONE;
	by_out = malloc(sizeof(*by_out) * (n ? n : 1));
	if (!by_out)
		return -1;
	for (size_t i = 0; i < b->nino; i++)
		if (b->ino[i].out != PI_NONE)
			by_out[b->ino[i].out] = (uint32_t)i;
	for (uint32_t i = 0; i < n; i++) {
		struct pb_inode *in = &b->ino[by_out[i]];

		/* a directory counts its own "." once more */
		if (S_ISDIR(in->mode))
			in->nlink++;
		if (put_inode(b, in, &o->inodes, &o->segs, &o->xattrs,
			      &o->strs) < 0) {
			free(by_out);
			return -1;
		}
	}
	free(by_out);
	return 0;
}

/* The image of what was recorded, checksummed, in *@img. */
static int write_image(struct pb *b, struct pi_header *h, struct buf *img)
{
	struct pb_out o = { 0 };
	int rc = -1;

	if (lay_out(b, &o) < 0 || put_inodes(b, &o) < 0)
		goto out;
	h->nnodes = o.n;
	h->ninodes = o.inodes.len / sizeof(struct pi_inode);
	h->nsegs = o.segs.len / sizeof(struct hu_pseg);
	h->nxattrs = o.xattrs.len / sizeof(struct pi_xattr);
	h->nstrings = o.strs.len;
	if (buf_add(img, h, sizeof(*h)) < 0)
		goto out;
	h->onodes = img->len;
	if (buf_add(img, o.nodes.p, o.nodes.len) < 0)
		goto out;
	if (pad8(img) < 0)
		goto out;
	h->oinodes = img->len;
	if (buf_add(img, o.inodes.p, o.inodes.len) < 0)
		goto out;
	if (pad8(img) < 0)
		goto out;
	h->osegs = img->len;
	if (buf_add(img, o.segs.p, o.segs.len) < 0)
		goto out;
	if (pad8(img) < 0)
		goto out;
	h->oxattrs = img->len;
	if (buf_add(img, o.xattrs.p, o.xattrs.len) < 0)
		goto out;
	if (pad8(img) < 0)
		goto out;
	h->ostrings = img->len;
	if (buf_add(img, o.strs.p, o.strs.len) < 0)
		goto out;
	if (pad8(img) < 0)
		goto out;
	h->owarns = img->len;
	h->nwarns = b->nwarns;
	h->lwarns = b->warns.len;
	if (buf_add(img, b->warns.p, b->warns.len) < 0)
		goto out;
	if (pad8(img) < 0)
		goto out;
	h->size = img->len;
	memcpy(img->p, h, sizeof(*h));
	((struct pi_header *)img->p)->sum =
		XXH3_64bits(img->p + PI_SUM_END, img->len - PI_SUM_END);
	rc = 0;
out:
	out_free(&o);
	return rc;
}

static void pb_free(struct pb *b)
{
	for (size_t i = 0; i < b->nino; i++) {
		struct pb_inode *in = &b->ino[i];

		for (size_t k = 0; k < in->nx; k++) {
			free(in->x[k].name);
			free(in->x[k].val);
		}
		free(in->x);
		free(in->seg);
		free(in->link);
	}
	free(b->ino);
	free(b->node_ino);
	free(b->warns.p);
}

static int64_t ns_of(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* What identifies tarball file @fd cheaply. */
static void file_id(int fd, struct hu_pindex_file *f)
{
	struct stat st;

	memset(f, 0, sizeof(*f));
	if (fstat(fd, &st) < 0)
		return;
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	f->size = (uint64_t)st.st_size;
	f->mtime_ns = ns_of(&st.st_mtim);
	f->ctime_ns = ns_of(&st.st_ctim);
}

int hu_pindex_file_id(int fd, struct hu_pindex_file *f)
{
	file_id(fd, f);
	return f->ino ? 0 : -1;
}

static int build(struct pb *b, int fd, struct pi_header *h)
{
	struct tl *t = &b->t;
	const struct hu_oci_image *img = b->l.image;
	struct hu_pindex_file before, after;
	uint32_t root;

	if (ti_init(&t->ix) < 0 ||
	    (root = new_inode(b, S_IFDIR | 0755)) == PI_NONE ||
	    set_node(b, TI_ROOT, root) < 0)
		return oom(t);
	t->ix.nodes[TI_ROOT].flags = TI_DIR;
	b->ino[root].times[0].tv_nsec = b->ino[root].times[1].tv_nsec =
		UTIME_OMIT;
	file_id(fd, &before);
	if (tl_read_tarball(t, fd) < 0)
		return -1;
	file_id(fd, &after);
	h->tar_size = tar_src_pos(t->src);
	if (img) {
		snprintf(h->digest, sizeof(h->digest), "%s",
			 img->layers[b->l.image_layer].digest);
		snprintf(h->diff_id, sizeof(h->diff_id), "%s",
			 img->diff_ids[b->l.image_layer]);
		h->flags |= PI_IMAGE;
	} else {
		if (tar_src_stored_digest(t->src, h->digest) < 0)
			return oom(t);
		/* changed while read: the index is of no file to key */
		if (memcmp(&before, &after, sizeof(before)) == 0) {
			h->src_dev = before.dev;
			h->src_ino = before.ino;
			h->src_size = before.size;
			h->src_mtime_ns = before.mtime_ns;
			h->src_ctime_ns = before.ctime_ns;
		}
	}
	return 0;
}

int hu_pindex_build(int fd, const struct hu_oci_image *img, size_t k,
		    const char *name, const struct hu_report *r,
		    const struct hu_problem_sink *sink,
		    struct hu_pindex **out, struct hu_error *e)
{
	/* its progress as it goes, what it says once it is read (replay) */
	struct hu_report quiet = r ? *r : (struct hu_report){ 0 };
	struct pb b = { .t = { .r = &quiet, .e = e, .root = -1, .cfd = -1,
			       .stash = -1, .as_root = geteuid() == 0,
			       .entry = record, .warned = record_warn,
			       .problem = record_problem,
			       .hash_stored = true } };
	struct pi_header h = { .version = PI_VERSION, .order = PI_ORDER };
	struct buf image = { 0 };
	int rc;

	*out = NULL;
	quiet.warn = NULL;
	if (hu_la_need(e) < 0 || hu_crypto_need(e) < 0)
		return -1;
	b.l = (struct hu_layer){ .path = (char *)name, .fd = -1,
				 .unpacked_lock = -1, .image = img,
				 .image_layer = k };
	b.t.l = &b.l;
	memcpy(h.magic, PI_MAGIC, 8);
	h.flags = b.t.as_root ? PI_AS_ROOT : 0;
	clock_gettime(CLOCK_REALTIME, &b.now);
	b.uid = geteuid();
	b.gid = getegid();
	rc = build(&b, fd, &h);
	if (rc == 0 && b.warns_lost)
		rc = hu_error_set(e, ENOMEM, name, "out of memory");
	if (rc == 0 && write_image(&b, &h, &image) < 0)
		rc = hu_error_set(e, ENOMEM, name, "out of memory");
	tl_release(&b.t);
	if (rc < 0) {
		/* what the unpack would have said before it stopped, and
		 * where: at a forward link before this error, if a sink
		 * takes none */
		struct hu_error said = { 0 };

		if (!b.warns_lost &&
		    replay(b.warns.p, b.warns.len, b.nwarns, name, r, sink,
			   &said) < 0) {
			hu_error_clear(e);
			*e = said;
		}
		pb_free(&b);
		free(image.p);
		return -1;
	}
	pb_free(&b);
	if (load(image.p, image.len, PI_HEAP, out) < 0)
		return hu_error_set(e, errno, name, "%s", errno == ENOMEM ?
				    "out of memory" :
				    "the index built is not valid");
	if (hu_pindex_replay(*out, name, r, sink, e) < 0) {
		hu_pindex_free(*out);
		*out = NULL;
		return -1;
	}
	return 0;
}
