/* SPDX-License-Identifier: MIT */
/*
 * The EROFS writer's tree: inodes, directories, hard links, the
 * superblock.
 *
 * Layout, in one pass and without a temporary file: block 0 holds the
 * superblock and, right after it, the root inode (extended, its
 * directory data in blocks: its size is known before its contents, so
 * its nid, which the superblock keeps in 16 bits, is 36).  After that
 * the image grows by whole blocks, data and metadata interleaved as
 * entries come (erofs_meta.c): meta_blkaddr and xattr_blkaddr are 0, so
 * a nid is an image offset / 32 and a shared xattr id an offset / 4.
 *
 * A non-directory is written whole by its call.  A directory is written
 * at its hu_erofs_leave(), once its entries' nids are known: its sorted
 * dirent blocks, then its inode, its last block inline after the inode
 * when it fits (as mkfs.erofs does).  Its subdirectories' ".." entries
 * were written before its nid was known: their places are kept and
 * patched then.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "internal.h"
#include "erofs/erofs_fs.h"

#define SYMLINK_MAX	4095u	/* the kernel reads a target as one page */

/* What an inode's header says. */
struct erofs_inode {
	bool ext;
	unsigned layout;
	mode_t mode;
	uint32_t nlink;
	uint64_t size;
	uint32_t iu;
	uint32_t ino;
	uid_t uid;
	gid_t gid;
	int64_t mtime;
	uint32_t mtime_nsec;
	size_t xsize;
};

static size_t isize_of(bool ext)
{
	return ext ? EROFS_ISIZE_EXTENDED : EROFS_ISIZE_COMPACT;
}

/* The inode @i and its xattr body @x at @p. */
static void put_inode(uint8_t *p, const struct erofs_inode *i,
		      const uint8_t *x)
{
	size_t is = isize_of(i->ext);

	memset(p, 0, is);
	put16(p + I_FORMAT, (uint16_t)(i->layout << 1 | (i->ext ? 1 : 0)));
	put16(p + I_XATTR_ICOUNT, (uint16_t)(i->xsize ?
		(i->xsize - EROFS_XATTR_HDR_SIZE) / 4 + 1 : 0));
	put16(p + I_MODE, (uint16_t)i->mode);
	put32(p + I_U, i->iu);
	put32(p + I_INO, i->ino);
	if (i->ext) {
		put64(p + IE_SIZE, i->size);
		put32(p + IE_UID, (uint32_t)i->uid);
		put32(p + IE_GID, (uint32_t)i->gid);
		put64(p + IE_MTIME, (uint64_t)i->mtime);
		put32(p + IE_MTIME_NSEC, i->mtime_nsec);
		put32(p + IE_NLINK, i->nlink);
	} else {
		put16(p + IC_NLINK, (uint16_t)i->nlink);
		put32(p + IC_SIZE, (uint32_t)i->size);
		put16(p + IC_UID, (uint16_t)i->uid);
		put16(p + IC_GID, (uint16_t)i->gid);
	}
	if (i->xsize)
		memcpy(p + is, x, i->xsize);
}

/* Can a compact inode say all this?  Its mtime is the build time. */
static bool fits_compact(const struct hu_erofs *w, const struct erofs_inode *i)
{
	return i->mtime == w->o.build_time &&
	       i->mtime_nsec == w->o.build_time_nsec &&
	       i->uid <= UINT16_MAX && i->gid <= UINT16_MAX &&
	       i->size <= UINT32_MAX && i->nlink <= UINT16_MAX;
}

static void inode_from_meta(struct erofs_inode *i,
			    const struct hu_erofs_meta *m)
{
	memset(i, 0, sizeof(*i));
	i->mode = m->mode;
	i->uid = m->uid;
	i->gid = m->gid;
	i->mtime = m->mtime;
	i->mtime_nsec = m->mtime_nsec;
	i->nlink = 1;
}

/* Can a tail of @tail bytes follow a head (inode and xattrs) of @head
 * bytes?  Not across a block boundary: a record within a block never
 * crosses one, a larger record starts a block (hu_erofs_reserve). */
static bool tail_fits(const struct hu_erofs *w, size_t head, size_t tail)
{
	if (!tail)
		return false;
	if (head + tail <= w->blksz)
		return true;
	return head > w->blksz && (head & (w->blksz - 1)) + tail <= w->blksz;
}

static uint8_t ftype_of(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return EROFS_FT_REG_FILE;
	case S_IFDIR: return EROFS_FT_DIR;
	case S_IFCHR: return EROFS_FT_CHRDEV;
	case S_IFBLK: return EROFS_FT_BLKDEV;
	case S_IFIFO: return EROFS_FT_FIFO;
	case S_IFSOCK: return EROFS_FT_SOCK;
	case S_IFLNK: return EROFS_FT_SYMLINK;
	}
	return EROFS_FT_UNKNOWN;
}

static int check_name(const char *name, size_t *len, struct hu_error *e)
{
	size_t l = strlen(name);

	if (!l || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 ||
	    memchr(name, '/', l))
		return hu_error_set(e, EINVAL, NULL,
				    "invalid name \"%s\" for an EROFS entry",
				    name);
	if (l > EROFS_NAME_LEN)
		return hu_error_set(e, ENAMETOOLONG, NULL,
				    "EROFS cannot hold a name longer than 255 bytes");
	*len = l;
	return 0;
}

/* ---- open directories ---------------------------------------------------- */

static void *grow(void *p, size_t *cap, size_t need, size_t size)
{
	size_t c = *cap ? *cap : 16;
	void *q;

	if (need <= *cap)
		return p;
	while (c < need)
		c *= 2;
	q = realloc(p, c * size);
	if (q)
		*cap = c;
	return q;
}

static int add_dent(struct erofs_odir *od, const char *name, size_t len,
		    uint64_t nid, uint8_t type, struct hu_error *e)
{
	char *n = grow(od->names, &od->ncap, od->nlen + len, 1);
	struct erofs_dent *d;

	if (!n)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	od->names = n;
	d = grow(od->ents, &od->ecap, od->nents + 1, sizeof(*d));
	if (!d)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	od->ents = d;
	memcpy(od->names + od->nlen, name, len);
	od->ents[od->nents++] = (struct erofs_dent){
		.nid = nid, .off = od->nlen, .len = (uint8_t)len, .type = type,
	};
	od->nlen += len;
	return 0;
}

static int add_dotdot(struct erofs_odir *od, uint64_t off, struct hu_error *e)
{
	uint64_t *p = grow(od->dotdot, &od->ddcap, od->ndd + 1, sizeof(*p));

	if (!p)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	od->dotdot = p;
	od->dotdot[od->ndd++] = off;
	return 0;
}

static void odir_free(struct erofs_odir *od)
{
	free(od->names);
	free(od->ents);
	free(od->dotdot);
	free(od->xattr);
}

static struct erofs_odir *cur_dir(struct hu_erofs *w)
{
	return w->ndirs ? &w->dirs[w->ndirs - 1] : NULL;
}

static int need_dir(struct hu_erofs *w, struct hu_error *e)
{
	if (w->failed)
		return hu_error_set(e, EINVAL, NULL,
				    "the EROFS image failed earlier");
	if (!w->ndirs)
		return hu_error_set(e, EINVAL, NULL,
				    "no EROFS directory is open");
	return 0;
}

/* Open a directory: its metadata, its xattrs encoded now (sharing is
 * decided in call order). */
static int push_dir(struct hu_erofs *w, const char *name, size_t len,
		    const struct hu_erofs_meta *m, struct hu_error *e)
{
	struct erofs_odir *dirs, *od;
	size_t xsize;

	if (hu_erofs_xattr_encode(w, m, &xsize, e) < 0)
		return -1;
	dirs = grow(w->dirs, &w->dcap, w->ndirs + 1, sizeof(*dirs));
	if (!dirs)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	w->dirs = dirs;
	od = &w->dirs[w->ndirs];
	memset(od, 0, sizeof(*od));
	if (xsize) {
		od->xattr = malloc(xsize);
		if (!od->xattr)
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		memcpy(od->xattr, w->xbuf, xsize);
	}
	od->xsize = xsize;
	memcpy(od->name, name, len);
	od->namelen = (uint8_t)len;
	od->mode = m->mode;
	od->uid = m->uid;
	od->gid = m->gid;
	od->mtime = m->mtime;
	od->mtime_nsec = m->mtime_nsec;
	od->ino = w->next_ino++;
	w->ndirs++;
	w->inos++;
	return 0;
}

/* ---- directory blocks ---------------------------------------------------- */

static int dent_cmp(const void *a, const void *b, void *arg)
{
	const struct erofs_dent *x = a, *y = b;
	const char *names = arg;
	size_t l = x->len < y->len ? x->len : y->len;
	int c = memcmp(names + x->off, names + y->off, l);

	if (c)
		return c;
	return (x->len > y->len) - (x->len < y->len);
}

/* Fill one dirent block at @p of @cap bytes with entries [@from, @to);
 * the entry "." and ".." get their nids here, and the place of ".." is
 * kept in *@dotdot (image offset @at of @p). */
static void fill_block(const struct erofs_odir *od, uint8_t *p, size_t cap,
		       size_t from, size_t to, uint64_t at, uint64_t *dotdot)
{
	size_t nameoff = (to - from) * EROFS_DIRENT_SIZE;

	for (size_t i = from; i < to; i++) {
		const struct erofs_dent *d = &od->ents[i];
		uint8_t *de = p + (i - from) * EROFS_DIRENT_SIZE;

		put64(de, d->nid);
		put16(de + 8, (uint16_t)nameoff);
		de[10] = d->type;
		de[11] = 0;
		memcpy(p + nameoff, od->names + d->off, d->len);
		nameoff += d->len;
		if (d->len == 2 && memcmp(od->names + d->off, "..", 2) == 0)
			*dotdot = at + (i - from) * EROFS_DIRENT_SIZE;
	}
	memset(p + nameoff, 0, cap - nameoff);
}

/* Where each block starts: entries [bstart[k], bstart[k + 1]).  Returns
 * the number of blocks; *@last is the bytes used in the last. */
static int plan_blocks(const struct hu_erofs *w, const struct erofs_odir *od,
		       size_t **bstart, size_t *nblk, size_t *last,
		       struct hu_error *e)
{
	size_t n = 0, cap = 0, used = 0;
	size_t *b = NULL;

	for (size_t i = 0; i < od->nents; i++) {
		size_t need = EROFS_DIRENT_SIZE + od->ents[i].len;

		if (i && used + need <= w->blksz) {
			used += need;
			continue;
		}
		b = grow(*bstart, &cap, n + 2, sizeof(*b));
		if (!b)
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		*bstart = b;
		b[n++] = i;
		used = need;
	}
	(*bstart)[n] = od->nents;
	*nblk = n;
	*last = used;
	return 0;
}

/* Write blocks [0, @n) of the directory at block @blkaddr, batched. */
static int write_blocks(struct hu_erofs *w, const struct erofs_odir *od,
			const size_t *bstart, size_t n, uint32_t blkaddr,
			uint64_t *dotdot, struct hu_error *e)
{
	size_t per = IO_BUF >> w->blkbits;

	for (size_t k = 0; k < n; k += per) {
		size_t m = n - k < per ? n - k : per;
		uint64_t at = ((uint64_t)blkaddr + k) << w->blkbits;

		for (size_t j = 0; j < m; j++)
			fill_block(od, w->buf + (j << w->blkbits), w->blksz,
				   bstart[k + j], bstart[k + j + 1],
				   at + (j << w->blkbits), dotdot);
		if (hu_erofs_write(w, w->buf, m << w->blkbits, at, e) < 0)
			return -1;
	}
	return 0;
}

static void set_dir_nids(struct erofs_odir *od, uint64_t self, uint64_t up)
{
	for (size_t i = 0; i < od->nents; i++) {
		const char *n = od->names + od->ents[i].off;

		if (od->ents[i].len == 1 && n[0] == '.')
			od->ents[i].nid = self;
		else if (od->ents[i].len == 2 && memcmp(n, "..", 2) == 0)
			od->ents[i].nid = up;
	}
}

static int sort_dir(struct erofs_odir *od, struct hu_error *e)
{
	qsort_r(od->ents, od->nents, sizeof(*od->ents), dent_cmp, od->names);
	for (size_t i = 1; i < od->nents; i++)
		if (!dent_cmp(&od->ents[i - 1], &od->ents[i], od->names))
			return hu_error_set(e, EEXIST, NULL,
					    "name \"%.*s\" given twice",
					    (int)od->ents[i].len,
					    od->names + od->ents[i].off);
	return 0;
}

/* The directory on top, its entries all given: its blocks and inode.
 * *@nid is its nid, *@dotdot where its own ".." nid lies. */
static int write_dir(struct hu_erofs *w, struct erofs_odir *od, bool root,
		     uint64_t *nid, uint64_t *dotdot, struct hu_error *e)
{
	struct erofs_inode in;
	size_t *bstart = NULL, nblk = 0, last = 0, head, tail, nfull;
	uint32_t blkaddr = EROFS_NULL_ADDR;
	uint64_t pos, self, dsize;
	bool inl;
	uint8_t *p;
	int rc = -1;

	if (add_dent(od, ".", 1, 0, EROFS_FT_DIR, e) < 0 ||
	    add_dent(od, "..", 2, 0, EROFS_FT_DIR, e) < 0 ||
	    sort_dir(od, e) < 0 ||
	    plan_blocks(w, od, &bstart, &nblk, &last, e) < 0)
		goto out;
	dsize = ((uint64_t)(nblk - 1) << w->blkbits) + last;
	memset(&in, 0, sizeof(in));
	in.mode = od->mode;
	in.uid = od->uid;
	in.gid = od->gid;
	in.mtime = od->mtime;
	in.mtime_nsec = od->mtime_nsec;
	in.ino = od->ino;
	in.nlink = 2 + od->nsub;
	in.size = dsize;
	in.xsize = od->xsize;
	in.ext = root || !fits_compact(w, &in);
	head = isize_of(in.ext) + od->xsize;
	tail = last < w->blksz ? last : 0;
	inl = !root && tail_fits(w, head, tail);
	in.layout = inl ? EROFS_LAYOUT_FLAT_INLINE : EROFS_LAYOUT_FLAT_PLAIN;
	nfull = inl ? nblk - 1 : nblk;
	if (root)
		pos = w->root_nid << EROFS_NID_SHIFT;
	else if (hu_erofs_reserve(w, head + (inl ? tail : 0), 32, &pos, e) < 0)
		goto out;
	self = pos >> EROFS_NID_SHIFT;
	set_dir_nids(od, self, root ? self : 0);
	if (nfull && (hu_erofs_alloc_blocks(w, nfull << w->blkbits, &blkaddr,
					 e) < 0 ||
		      write_blocks(w, od, bstart, nfull, blkaddr, dotdot,
				   e) < 0))
		goto out;
	in.iu = blkaddr;
	if (root) {
		uint8_t rec[EROFS_ISIZE_EXTENDED];

		/* The xattr body went out with block 0: the header only. */
		in.xsize = 0;
		put_inode(rec, &in, NULL);
		put16(rec + I_XATTR_ICOUNT, (uint16_t)(od->xsize ?
			(od->xsize - EROFS_XATTR_HDR_SIZE) / 4 + 1 : 0));
		if (hu_erofs_patch(w, pos, rec, sizeof(rec), e) < 0)
			goto out;
	} else {
		p = hu_erofs_at(w, pos);
		put_inode(p, &in, od->xattr);
		if (inl)
			fill_block(od, p + head, tail, bstart[nblk - 1],
				   od->nents, pos + head, dotdot);
	}
	*nid = self;
	rc = 0;
out:
	free(bstart);
	return rc;
}

/* ---- hard links ---------------------------------------------------------- */

static struct erofs_linked *link_find(struct hu_erofs *w, uint64_t nid)
{
	uint64_t h = nid * 0x9e3779b97f4a7c15ull;

	for (size_t i = (size_t)(h >> 20) & (w->lcap - 1);;
	     i = (i + 1) & (w->lcap - 1))
		if (!w->links[i].nid || w->links[i].nid == nid)
			return &w->links[i];
}

static int link_add(struct hu_erofs *w, uint64_t nid, uint8_t type,
		    struct hu_error *e)
{
	if ((w->nlinks + 1) * 4 > w->lcap * 3) {
		struct erofs_linked *old = w->links;
		size_t ocap = w->lcap;

		w->lcap = ocap ? ocap * 2 : 256;
		w->links = calloc(w->lcap, sizeof(*w->links));
		if (!w->links) {
			w->links = old;
			w->lcap = ocap;
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		}
		for (size_t i = 0; i < ocap; i++)
			if (old[i].nid)
				*link_find(w, old[i].nid) = old[i];
		free(old);
	}
	*link_find(w, nid) = (struct erofs_linked){ nid, 1, type };
	w->nlinks++;
	return 0;
}

/* ---- non-directories ----------------------------------------------------- */

/* A non-directory's content: @d for a file, @mem for a symlink target. */
struct leaf {
	uint8_t type;
	uint64_t size;
	bool special;		/* i_u is the device number */
	uint32_t rdev;
	const struct hu_erofs_data *d;
	const char *mem;
};

/* The first @blocks bytes to image offset @to, the rest to @tail. */
static int leaf_bytes(struct hu_erofs *w, const struct leaf *l, uint64_t to,
		      uint64_t blocks, uint8_t *tail, struct hu_error *e)
{
	size_t rest = (size_t)(l->size - blocks);

	if (!l->size)		/* an empty file has no source */
		return 0;
	if (l->d && l->d->fd < 0)
		return hu_erofs_feed(w, l->d, to, blocks, tail, e);
	if (l->d && l->size < EROFS_SMALL)
		return hu_erofs_read_small(w, l->d, to, blocks, tail, rest, e);
	if (blocks && (l->mem ? hu_erofs_write(w, l->mem, blocks, to, e) :
		       hu_erofs_copy_blocks(w, l->d, to, blocks, e)) < 0)
		return -1;
	if (!rest)
		return 0;
	if (l->mem) {
		memcpy(tail, l->mem + blocks, rest);
		return 0;
	}
	return hu_erofs_pread_all(l->d->fd, tail, rest, blocks, e);
}

/* A flat file: full blocks, then its tail inline or in a last block. */
static int write_flat(struct hu_erofs *w, struct erofs_inode *in,
		      const struct leaf *l, uint64_t *nid, struct hu_error *e)
{
	size_t head = isize_of(in->ext) + in->xsize;
	size_t tail = (size_t)(l->size & (w->blksz - 1));
	bool inl = tail_fits(w, head, tail);
	uint64_t blocks = inl ? l->size - tail : l->size, pos;
	uint32_t blkaddr = EROFS_NULL_ADDR;

	in->layout = inl ? EROFS_LAYOUT_FLAT_INLINE : EROFS_LAYOUT_FLAT_PLAIN;
	if (hu_erofs_reserve(w, head + (inl ? tail : 0), 32, &pos, e) < 0)
		return -1;
	if (blocks && hu_erofs_alloc_blocks(w, blocks, &blkaddr, e) < 0)
		return -1;
	if (leaf_bytes(w, l, (uint64_t)blkaddr << w->blkbits, blocks,
		       inl ? hu_erofs_at(w, pos) + head : NULL, e) < 0)
		return -1;
	in->iu = l->special ? l->rdev : blkaddr;
	put_inode(hu_erofs_at(w, pos), in, w->xbuf);
	*nid = pos >> EROFS_NID_SHIFT;
	return 0;
}

/* A sparse file: its block map after the xattrs, a hole chunk mapped to
 * EROFS_NULL_ADDR. */
static int write_chunked(struct hu_erofs *w, struct erofs_inode *in,
			 const struct leaf *l, unsigned cb, uint32_t *map,
			 uint64_t n, uint64_t *nid, struct hu_error *e)
{
	size_t head = isize_of(in->ext) + in->xsize;
	uint64_t pos;
	uint8_t *p;

	if (n > (SIZE_MAX - head) / 4)
		return hu_error_set(e, EFBIG, NULL, "file too large");
	if (hu_erofs_reserve(w, head + 4 * n, 32, &pos, e) < 0 ||
	    hu_erofs_sparse_copy(w, l->d, cb, map, n, e) < 0)
		return -1;
	in->layout = EROFS_LAYOUT_CHUNK_BASED;
	in->iu = cb;	/* chunk format: blkbits only, a 4-byte block map */
	p = hu_erofs_at(w, pos);
	put_inode(p, in, w->xbuf);
	for (uint64_t i = 0; i < n; i++)
		put32(p + head + 4 * i, map[i]);
	w->chunked = true;
	*nid = pos >> EROFS_NID_SHIFT;
	return 0;
}

static int write_leaf(struct hu_erofs *w, const char *name,
		      const struct hu_erofs_meta *m, const struct leaf *l,
		      uint64_t *ref, struct hu_error *e)
{
	struct erofs_inode in;
	uint32_t *map = NULL;
	uint64_t nid = 0, n = 0;
	unsigned cb = 0;
	size_t len;
	int rc;

	if (need_dir(w, e) < 0 || check_name(name, &len, e) < 0)
		return -1;
	inode_from_meta(&in, m);
	in.size = l->size;
	in.ino = w->next_ino;
	if (hu_erofs_xattr_encode(w, m, &in.xsize, e) < 0)
		return -1;
	/* A linked inode's count is patched at the end: extended, it
	 * holds any. */
	in.ext = ref || !fits_compact(w, &in);
	if (l->d && hu_erofs_sparse_map(w, l->d, &cb, &map, &n, e) < 0)
		return -1;
	if (map)
		rc = write_chunked(w, &in, l, cb, map, n, &nid, e);
	else
		rc = write_flat(w, &in, l, &nid, e);
	free(map);
	if (rc < 0 || add_dent(cur_dir(w), name, len, nid, l->type, e) < 0)
		return -1;
	w->next_ino++;
	w->inos++;
	if (ref) {
		*ref = nid;
		return link_add(w, nid, l->type, e);
	}
	return 0;
}

/* ---- the API ------------------------------------------------------------- */

static int failed(struct hu_erofs *w)
{
	w->failed = true;
	return -1;
}

int hu_erofs_open(struct hu_erofs **wp, int fd, const struct hu_erofs_opts *o,
		  struct hu_error *e)
{
	struct hu_erofs *w;
	struct stat st;
	unsigned bits = o->block_bits ? o->block_bits : 12;

	*wp = NULL;
	if (bits < 9 || bits > 16)
		return hu_error_set(e, EINVAL, NULL,
				    "EROFS block size 2^%u is not 512 to 65536 bytes",
				    bits);
	if (fstat(fd, &st) < 0)
		return hu_error_set(e, errno, NULL, "cannot stat the image");
	w = calloc(1, sizeof(*w));
	if (!w)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	w->fd = fd;
	w->is_reg = S_ISREG(st.st_mode);
	w->o = *o;
	w->blkbits = bits;
	w->blksz = 1u << bits;
	w->next_ino = 1;
	w->buf = malloc(IO_BUF);
	w->dbuf = malloc(IO_BUF);
	/* Block 0 (and 1 and 2 for small blocks): the superblock, then
	 * the root inode. */
	w->rcap = (EROFS_SB_OFFSET + EROFS_SB_SIZE + w->blksz - 1) &
		  ~(size_t)(w->blksz - 1);
	w->rbuf = calloc(1, w->rcap);
	w->rmax = w->rcap;
	w->rused = EROFS_SB_OFFSET + EROFS_SB_SIZE;
	w->end = w->rcap;
	hu_writebehind_init(&w->wb, fd);
	if (o->uuid_content) {
		w->hash = XXH3_createState();
		if (w->hash && XXH3_128bits_reset(w->hash) != XXH_OK) {
			XXH3_freeState(w->hash);
			w->hash = NULL;
		}
	}
	if (!w->buf || !w->dbuf || !w->rbuf ||
	    (o->uuid_content && !w->hash)) {
		hu_erofs_abort(w);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	if (hu_erofs_copies_start(w, e) < 0) {
		hu_erofs_abort(w);
		return -1;
	}
	*wp = w;
	return 0;
}

int hu_erofs_root(struct hu_erofs *w, const struct hu_erofs_meta *m,
		  struct hu_error *e)
{
	struct erofs_odir *od;
	uint64_t pos;

	if (w->rooted || w->failed)
		return hu_error_set(e, EINVAL, NULL,
				    "the EROFS root was given already");
	if (!S_ISDIR(m->mode))
		return hu_error_set(e, EINVAL, NULL,
				    "the EROFS root is no directory");
	w->rooted = true;
	if (push_dir(w, "", 0, m, e) < 0)
		return failed(w);
	od = cur_dir(w);
	if (hu_erofs_reserve(w, EROFS_ISIZE_EXTENDED + od->xsize, 32, &pos,
			  e) < 0)
		return failed(w);
	if ((pos >> EROFS_NID_SHIFT) > UINT16_MAX)
		return hu_error_set(e, EFBIG, NULL,
				    "EROFS cannot place the root inode");
	w->root_nid = pos >> EROFS_NID_SHIFT;
	if (od->xsize)
		memcpy(hu_erofs_at(w, pos) + EROFS_ISIZE_EXTENDED, od->xattr,
		       od->xsize);
	return 0;
}

int hu_erofs_dir(struct hu_erofs *w, const char *name,
		 const struct hu_erofs_meta *m, struct hu_error *e)
{
	size_t len;

	if (need_dir(w, e) < 0 || check_name(name, &len, e) < 0)
		return -1;
	if (!S_ISDIR(m->mode))
		return hu_error_set(e, EINVAL, NULL, "not a directory mode");
	return push_dir(w, name, len, m, e);
}

int hu_erofs_leave(struct hu_erofs *w, struct hu_error *e)
{
	struct erofs_odir *od, *up;
	uint64_t nid = 0, dotdot = 0;
	bool root;
	int rc = 0;

	if (need_dir(w, e) < 0)
		return -1;
	od = cur_dir(w);
	root = w->ndirs == 1;
	up = root ? NULL : &w->dirs[w->ndirs - 2];
	if (write_dir(w, od, root, &nid, &dotdot, e) < 0)
		rc = -1;
	for (size_t i = 0; !rc && i < od->ndd; i++) {
		uint8_t b[8];

		put64(b, nid);
		rc = hu_erofs_patch(w, od->dotdot[i], b, sizeof(b), e);
	}
	if (!rc && up &&
	    (add_dent(up, od->name, od->namelen, nid, EROFS_FT_DIR, e) < 0 ||
	     add_dotdot(up, dotdot, e) < 0))
		rc = -1;
	if (!rc && up)
		up->nsub++;
	odir_free(od);
	w->ndirs--;
	return rc < 0 ? failed(w) : 0;
}

int hu_erofs_file(struct hu_erofs *w, const char *name,
		  const struct hu_erofs_meta *m, const struct hu_erofs_data *d,
		  uint64_t *ref, struct hu_error *e)
{
	struct leaf l = { .type = EROFS_FT_REG_FILE, .size = d->size, .d = d };

	if (!S_ISREG(m->mode))
		return hu_error_set(e, EINVAL, NULL, "not a regular file mode");
	return write_leaf(w, name, m, &l, ref, e);
}

int hu_erofs_symlink(struct hu_erofs *w, const char *name,
		     const struct hu_erofs_meta *m, const char *target,
		     size_t len, uint64_t *ref, struct hu_error *e)
{
	struct leaf l = { .type = EROFS_FT_SYMLINK, .size = len,
			  .mem = target };

	if (!S_ISLNK(m->mode))
		return hu_error_set(e, EINVAL, NULL, "not a symlink mode");
	if (len > SYMLINK_MAX)
		return hu_error_set(e, ENAMETOOLONG, NULL,
				    "EROFS cannot hold a symlink target over 4095 bytes");
	return write_leaf(w, name, m, &l, ref, e);
}

int hu_erofs_special(struct hu_erofs *w, const char *name,
		     const struct hu_erofs_meta *m, uint64_t *ref,
		     struct hu_error *e)
{
	unsigned maj = major(m->rdev), min = minor(m->rdev);
	struct leaf l = { .type = ftype_of(m->mode), .special = true,
			  .mem = "" };

	if (!S_ISCHR(m->mode) && !S_ISBLK(m->mode) && !S_ISFIFO(m->mode) &&
	    !S_ISSOCK(m->mode))
		return hu_error_set(e, EINVAL, NULL, "not a special file mode");
	/* The kernel's new_encode_dev(); FIFOs and sockets have none. */
	if (S_ISCHR(m->mode) || S_ISBLK(m->mode))
		l.rdev = (min & 0xff) | (maj << 8) | ((min & ~0xffu) << 12);
	return write_leaf(w, name, m, &l, ref, e);
}

int hu_erofs_link(struct hu_erofs *w, const char *name, uint64_t ref,
		  struct hu_error *e)
{
	struct erofs_linked *l;
	size_t len;

	if (need_dir(w, e) < 0 || check_name(name, &len, e) < 0)
		return -1;
	l = w->lcap ? link_find(w, ref) : NULL;
	if (!l || !l->nid)
		return hu_error_set(e, EINVAL, NULL,
				    "no EROFS inode has that reference");
	if (l->nlink == UINT32_MAX)
		return hu_error_set(e, EMLINK, NULL,
				    "EROFS cannot hold 2^32 links to an inode");
	if (add_dent(cur_dir(w), name, len, ref, l->type, e) < 0)
		return -1;
	l->nlink++;
	return 0;
}

static int patch_nlinks(struct hu_erofs *w, struct hu_error *e)
{
	for (size_t i = 0; i < w->lcap; i++) {
		const struct erofs_linked *l = &w->links[i];
		uint8_t b[4];

		if (!l->nid || l->nlink == 1)
			continue;
		put32(b, l->nlink);
		if (hu_erofs_patch(w, (l->nid << EROFS_NID_SHIFT) + IE_NLINK, b,
				sizeof(b), e) < 0)
			return -1;
	}
	return 0;
}

static void put_super(struct hu_erofs *w, uint8_t *sb)
{
	memset(sb, 0, EROFS_SB_SIZE);
	put32(sb + SB_MAGIC, EROFS_MAGIC);
	sb[SB_BLKSZBITS] = (uint8_t)w->blkbits;
	put16(sb + SB_ROOT_NID, (uint16_t)w->root_nid);
	put64(sb + SB_INOS, w->inos);
	put64(sb + SB_BUILD_TIME, (uint64_t)w->o.build_time);
	put32(sb + SB_BUILD_NSEC, w->o.build_time_nsec);
	put32(sb + SB_BLOCKS, (uint32_t)(w->end >> w->blkbits));
	put32(sb + SB_META_BLKADDR, 0);
	put32(sb + SB_XATTR_BLKADDR, 0);
	put32(sb + SB_INCOMPAT, w->chunked ? EROFS_INCOMPAT_CHUNKED : 0);
	if (w->hash) {
		XXH128_canonical_t c;

		XXH128_canonicalFromHash(&c, XXH3_128bits_digest(w->hash));
		memcpy(sb + SB_UUID, c.digest, 16);
		/* Shaped as a random (version 4) UUID. */
		sb[SB_UUID + 6] = (uint8_t)((sb[SB_UUID + 6] & 0x0f) | 0x40);
		sb[SB_UUID + 8] = (uint8_t)((sb[SB_UUID + 8] & 0x3f) | 0x80);
	}
}

static int finish(struct hu_erofs *w, struct hu_error *e)
{
	uint8_t sb[EROFS_SB_SIZE];

	/* the copies a worker still makes land before the end is written */
	if (hu_erofs_copies_done(w, e) < 0)
		return -1;
	if (w->failed)
		return hu_error_set(e, EINVAL, NULL,
				    "the EROFS image failed earlier");
	if (!w->rooted || w->ndirs)
		return hu_error_set(e, EINVAL, NULL,
				    "the EROFS image has a directory not left");
	if (patch_nlinks(w, e) < 0 || hu_erofs_data_flush(w, e) < 0 ||
	    hu_erofs_flush(w, e) < 0)
		return -1;
	if (w->is_reg && ftruncate(w->fd, (off_t)w->end) < 0)
		return hu_error_set(e, errno, NULL,
				    "cannot size the EROFS image");
	put_super(w, sb);
	if (w->hash) {
		XXH3_freeState(w->hash);
		w->hash = NULL;
	}
	return hu_erofs_write(w, sb, sizeof(sb), EROFS_SB_OFFSET, e);
}

int hu_erofs_close(struct hu_erofs *w, struct hu_error *e)
{
	int rc = finish(w, e);

	hu_erofs_abort(w);
	return rc;
}

void hu_erofs_abort(struct hu_erofs *w)
{
	struct hu_error ignored = { 0 };

	if (!w)
		return;
	/* no worker may write after the caller removed the image */
	hu_erofs_copies_done(w, &ignored);
	hu_error_clear(&ignored);
	for (size_t i = 0; i < w->ndirs; i++)
		odir_free(&w->dirs[i]);
	free(w->dirs);
	hu_erofs_xattr_free(w);
	free(w->links);
	free(w->buf);
	free(w->dbuf);
	free(w->rbuf);
	if (w->hash)
		XXH3_freeState(w->hash);
	free(w);
}
