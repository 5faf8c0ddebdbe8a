/* SPDX-License-Identifier: MIT */
/*
 * The EROFS on-disk format as far as the writer uses it (plain layouts
 * only: no compression), and the writer's private state shared by
 * lib/erofs/erofs*.c.  Every on-disk number is little-endian: fields are
 * put byte by byte (put16/32/64), never through packed structs, so no
 * padding byte is ever left uninitialised.
 */
#ifndef HUNION_EROFS_FS_H
#define HUNION_EROFS_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <xxhash.h>

#include "erofs/erofs.h"

#define EROFS_MAGIC		0xE0F5E1E2u
#define EROFS_SB_OFFSET		1024u
#define EROFS_SB_SIZE		128u
#define EROFS_INCOMPAT_CHUNKED	0x00000004u

/* Superblock field offsets (from EROFS_SB_OFFSET). */
#define SB_MAGIC		0
#define SB_BLKSZBITS		12
#define SB_ROOT_NID		14
#define SB_INOS			16
#define SB_BUILD_TIME		24
#define SB_BUILD_NSEC		32
#define SB_BLOCKS		36
#define SB_META_BLKADDR		40
#define SB_XATTR_BLKADDR	44
#define SB_UUID			48
#define SB_INCOMPAT		80

/* i_format: bit 0 the inode version, bits 1-3 the data layout. */
#define EROFS_LAYOUT_FLAT_PLAIN		0
#define EROFS_LAYOUT_FLAT_INLINE	2
#define EROFS_LAYOUT_CHUNK_BASED	4

#define EROFS_ISIZE_COMPACT	32u
#define EROFS_ISIZE_EXTENDED	64u
#define EROFS_NID_SHIFT		5	/* an inode slot is 32 bytes */

/* Field offsets common to both inode versions, then each one's own. */
#define I_FORMAT		0
#define I_XATTR_ICOUNT		2
#define I_MODE			4
#define I_U			16
#define I_INO			20
#define IC_NLINK		6
#define IC_SIZE			8
#define IC_UID			24
#define IC_GID			26
#define IE_SIZE			8
#define IE_UID			24
#define IE_GID			28
#define IE_MTIME		32
#define IE_MTIME_NSEC		40
#define IE_NLINK		44

#define EROFS_NULL_ADDR		0xFFFFFFFFu
#define EROFS_XATTR_HDR_SIZE	12u	/* erofs_xattr_ibody_header */
#define EROFS_XATTR_ENT_SIZE	4u	/* erofs_xattr_entry, before the name */
#define EROFS_DIRENT_SIZE	12u
#define EROFS_NAME_LEN		255u

enum {
	EROFS_FT_UNKNOWN, EROFS_FT_REG_FILE, EROFS_FT_DIR, EROFS_FT_CHRDEV,
	EROFS_FT_BLKDEV, EROFS_FT_FIFO, EROFS_FT_SOCK, EROFS_FT_SYMLINK,
};

static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)v);
	put16(p + 2, (uint16_t)(v >> 16));
}

static inline void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

/* ---- the writer's state ------------------------------------------------ */

/* An entry of an open directory: its name lives in the directory's name
 * arena at @off. */
struct erofs_dent {
	uint64_t nid;
	size_t off;
	uint8_t len;
	uint8_t type;
};

/* A directory between hu_erofs_dir() (or hu_erofs_root()) and its
 * hu_erofs_leave(). */
struct erofs_odir {
	char *names;			/* arena of its entries' names */
	size_t nlen, ncap;
	struct erofs_dent *ents;
	size_t nents, ecap;
	uint64_t *dotdot;		/* image offsets of its subdirectories'
					 * ".." nid fields, patched at leave */
	size_t ndd, ddcap;
	uint32_t nsub;
	char name[EROFS_NAME_LEN + 1];	/* its name in its parent */
	uint8_t namelen;
	mode_t mode;
	uid_t uid;
	gid_t gid;
	int64_t mtime;
	uint32_t mtime_nsec;
	uint32_t ino;
	uint8_t *xattr;			/* its encoded xattr body */
	size_t xsize;
};

/* A pair (name, value) met in some inode's xattrs, for sharing. */
struct erofs_xpair {
	uint64_t hash;
	uint8_t *ent;			/* the encoded entry, 4-aligned */
	uint32_t size;
	uint32_t count;
	uint32_t id;			/* shared xattr id, once shared */
	bool shared;
};

/* An inode given a reference: hu_erofs_link() may name it again. */
struct erofs_linked {
	uint64_t nid;			/* 0: a free slot (no inode's) */
	uint32_t nlink;
	uint8_t type;
};

struct hu_erofs {
	int fd;
	bool is_reg;			/* ftruncate() it at the end */
	bool no_cfr;			/* copy_file_range() fails here */
	bool failed;			/* a write went wrong: close refuses */
	bool chunked;			/* some file is chunk-based */
	unsigned blkbits;
	uint32_t blksz;
	struct hu_erofs_opts o;
	uint64_t end;			/* image size so far, whole blocks */
	uint64_t inos;
	uint32_t next_ino;

	/* The metadata region being filled: image bytes [rpos, rpos +
	 * rcap), in memory until a record no longer fits. */
	uint64_t rpos;
	uint8_t *rbuf;
	size_t rcap, rused, rmax;

	uint8_t *buf;			/* IO_BUF bytes: data and dir blocks */
	/* Small files' blocks, gathered while they are contiguous in the
	 * image: image bytes [dpos, dpos + dlen), one write for many
	 * files. */
	uint8_t *dbuf;
	uint64_t dpos;
	size_t dlen;

	struct erofs_odir *dirs;	/* the open directories, root first */
	size_t ndirs, dcap;
	bool rooted;			/* hu_erofs_root() was called */
	uint64_t root_nid;

	struct erofs_xpair *xp;		/* the sharing table, open-addressed */
	size_t nxp;
	uint8_t *xbuf;			/* an xattr body being encoded */
	size_t xcap;

	struct erofs_linked *links;	/* open-addressed by nid */
	size_t nlinks, lcap;

	XXH3_state_t *hash;		/* of all bytes written: the UUID */
	/* Workers copying large files' blocks beside the walk (none with
	 * the hash, which must see the bytes in order). */
	struct hu_pool *pool;
	struct hu_writebehind wb;	/* the image's writeback, behind */
};

#define IO_BUF		(1u << 20)
#define XP_SLOTS	8192u		/* sharing table slots ... */
#define XP_MAX		4096u		/* ... of which at most this many used */
#define XP_ENT_MAX	512u		/* largest entry ever shared */
#define XP_SHARE_AT	2u		/* shared from its second use on */

/* erofs_meta.c */
int hu_erofs_write(struct hu_erofs *w, const void *buf, size_t len,
		uint64_t off, struct hu_error *e);
/* All of @buf at @off through the write wrapper (hu_wr_pwrite); -1 with
 * errno.  Safe from a worker. */
int hu_erofs_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
int hu_erofs_patch(struct hu_erofs *w, uint64_t off, const void *buf,
		size_t len, struct hu_error *e);
int hu_erofs_reserve(struct hu_erofs *w, size_t size, size_t align,
		  uint64_t *pos, struct hu_error *e);
int hu_erofs_flush(struct hu_erofs *w, struct hu_error *e);
uint8_t *hu_erofs_at(struct hu_erofs *w, uint64_t pos);
int hu_erofs_alloc_blocks(struct hu_erofs *w, uint64_t bytes, uint32_t *blkaddr,
		       struct hu_error *e);

/* erofs_xattr.c */
int hu_erofs_xattr_encode(struct hu_erofs *w, const struct hu_erofs_meta *m,
		       size_t *size, struct hu_error *e);
void hu_erofs_xattr_free(struct hu_erofs *w);

/* erofs_data.c */
int hu_erofs_pread_all(int fd, void *buf, size_t len, uint64_t off,
		    struct hu_error *e);
/* @len bytes of @d's fd from offset 0 to image offset @to: now, or by a
 * worker when they are many (hu_erofs_copies_done() waits for them). */
int hu_erofs_copy_blocks(struct hu_erofs *w, const struct hu_erofs_data *d,
			 uint64_t to, uint64_t len, struct hu_error *e);
/* A small file's bytes from @d's fd in one read: the first @blocks to
 * image offset @to (gathered with the blocks of the files before it),
 * the @rest after them to @tail. */
int hu_erofs_read_small(struct hu_erofs *w, const struct hu_erofs_data *d,
			uint64_t to, uint64_t blocks, uint8_t *tail,
			size_t rest, struct hu_error *e);
/* Write what hu_erofs_read_small() gathered. */
int hu_erofs_data_flush(struct hu_erofs *w, struct hu_error *e);
/* Below this size a file is read whole, its blocks gathered; from it on
 * they are copied, by a worker beside the walk when there is one. */
#define EROFS_SMALL	(32u << 10)
int hu_erofs_copies_start(struct hu_erofs *w, struct hu_error *e);
int hu_erofs_copies_done(struct hu_erofs *w, struct hu_error *e);
int hu_erofs_copy_fd(struct hu_erofs *w, int fd, uint64_t from, uint64_t to,
		  uint64_t len, struct hu_error *e);
/* Push @d's bytes: the first @blocks to image offset @to, the rest to
 * @tail. */
int hu_erofs_feed(struct hu_erofs *w, const struct hu_erofs_data *d,
	       uint64_t to, uint64_t blocks, uint8_t *tail,
	       struct hu_error *e);
int hu_erofs_sparse_map(struct hu_erofs *w, const struct hu_erofs_data *d,
		     unsigned *chunkbits, uint32_t **map, uint64_t *nchunks,
		     struct hu_error *e);
int hu_erofs_sparse_copy(struct hu_erofs *w, const struct hu_erofs_data *d,
		      unsigned chunkbits, uint32_t *map, uint64_t nchunks,
		      struct hu_error *e);

#endif
