/* SPDX-License-Identifier: MIT */
/*
 * An inode's xattrs in EROFS: the xattr body after the inode (header,
 * shared xattr ids, inline entries), and sharing.
 *
 * Sharing is decided in one pass and only from what came before, so the
 * same calls give the same image: a pair (name, value) is inline the
 * first time it is met; from its second use on it is written once to the
 * shared area (any 4-aligned place of the metadata: ids count 4 bytes
 * from block 0, xattr_blkaddr being 0) and referred to by id.  The table
 * of pairs met is bounded: when full, the pairs met only once are
 * forgotten.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "erofs/erofs_fs.h"

#define NO_ID		UINT32_MAX
#define XBODY_MAX	(EROFS_XATTR_HDR_SIZE + 4u * 65534u)
#define MAX_SHARED	255u	/* h_shared_count is a byte */

static const struct {
	const char *prefix;
	uint8_t index;
	bool whole;		/* the name is the prefix, nothing after */
} prefixes[] = {
	{ "user.", 1, false },
	{ "system.posix_acl_access", 2, true },
	{ "system.posix_acl_default", 3, true },
	{ "trusted.", 4, false },
	{ "security.", 6, false },
};

static size_t align4(size_t v)
{
	return (v + 3) & ~(size_t)3;
}

/* The name index and what follows the prefix; -1 if EROFS has none. */
static int name_index(const char *name, const char **suffix)
{
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		size_t l = strlen(prefixes[i].prefix);

		if (strncmp(name, prefixes[i].prefix, l) != 0)
			continue;
		if (prefixes[i].whole ? name[l] != '\0' : name[l] == '\0')
			continue;
		*suffix = name + l;
		return prefixes[i].index;
	}
	return -1;
}

/* Encode one xattr entry at @p (room for its aligned size); its size. */
static int encode_entry(const struct hu_xattr *x, uint8_t *p,
			size_t *size, struct hu_error *e)
{
	const char *suffix;
	int idx = name_index(x->name, &suffix);
	size_t slen;

	if (idx < 0)
		return hu_error_set(e, EOPNOTSUPP, NULL,
				    "EROFS cannot hold xattr %s: no such name prefix",
				    x->name);
	slen = strlen(suffix);
	if (slen > EROFS_NAME_LEN)
		return hu_error_set(e, ENAMETOOLONG, NULL,
				    "EROFS cannot hold an xattr name longer than 255 bytes after its prefix");
	if (x->size > UINT16_MAX)
		return hu_error_set(e, E2BIG, NULL,
				    "EROFS cannot hold an xattr value over 65535 bytes (%s)",
				    x->name);
	*size = align4(EROFS_XATTR_ENT_SIZE + slen + x->size);
	p[0] = (uint8_t)slen;
	p[1] = (uint8_t)idx;
	put16(p + 2, (uint16_t)x->size);
	memcpy(p + 4, suffix, slen);
	if (x->size)
		memcpy(p + 4 + slen, x->value, x->size);
	memset(p + 4 + slen + x->size, 0,
	       *size - (EROFS_XATTR_ENT_SIZE + slen + x->size));
	return 0;
}

static size_t xp_slot(const struct hu_erofs *w, uint64_t h)
{
	return (size_t)(h ^ (h >> 31)) & (XP_SLOTS - 1);
}

static struct erofs_xpair *xp_find(struct hu_erofs *w, const uint8_t *ent,
				   size_t size, uint64_t h)
{
	for (size_t i = xp_slot(w, h);; i = (i + 1) & (XP_SLOTS - 1)) {
		struct erofs_xpair *x = &w->xp[i];

		if (!x->ent || (x->hash == h && x->size == size &&
				memcmp(x->ent, ent, size) == 0))
			return x;
	}
}

/* Forget the pairs met once, deterministically: keep the shared ones. */
static void xp_evict(struct hu_erofs *w)
{
	struct erofs_xpair *old = w->xp;

	w->xp = calloc(XP_SLOTS, sizeof(*w->xp));
	if (!w->xp) {
		/* Keep the old table: it only stops growing. */
		w->xp = old;
		return;
	}
	w->nxp = 0;
	for (size_t i = 0; i < XP_SLOTS; i++) {
		if (!old[i].ent)
			continue;
		if (!old[i].shared) {
			free(old[i].ent);
			continue;
		}
		*xp_find(w, old[i].ent, old[i].size, old[i].hash) = old[i];
		w->nxp++;
	}
	free(old);
}

/* Write the pair @x to the shared area. */
static int xp_share(struct hu_erofs *w, struct erofs_xpair *x,
		    struct hu_error *e)
{
	uint64_t pos;

	if (hu_erofs_reserve(w, x->size, 4, &pos, e) < 0)
		return -1;
	memcpy(hu_erofs_at(w, pos), x->ent, x->size);
	if ((pos >> 2) >= NO_ID)
		return 0;	/* beyond what an id reaches: stays inline */
	x->id = (uint32_t)(pos >> 2);
	x->shared = true;
	return 0;
}

/* The shared id of entry @ent (NO_ID: inline), after counting its use. */
static int xp_use(struct hu_erofs *w, const uint8_t *ent, size_t size,
		  uint32_t *id, struct hu_error *e)
{
	uint64_t h;
	struct erofs_xpair *x;

	*id = NO_ID;
	if (size > XP_ENT_MAX || size > w->blksz)
		return 0;
	if (!w->xp) {
		w->xp = calloc(XP_SLOTS, sizeof(*w->xp));
		if (!w->xp)
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	h = XXH3_64bits(ent, size);
	x = xp_find(w, ent, size, h);
	if (!x->ent) {
		if (w->nxp >= XP_MAX) {
			xp_evict(w);
			if (w->nxp >= XP_MAX)
				return 0;
			x = xp_find(w, ent, size, h);
		}
		x->ent = malloc(size);
		if (!x->ent)
			return hu_error_set(e, ENOMEM, NULL, "out of memory");
		memcpy(x->ent, ent, size);
		x->hash = h;
		x->size = (uint32_t)size;
		w->nxp++;
	}
	if (x->count < UINT32_MAX)
		x->count++;
	if (!x->shared && x->count >= XP_SHARE_AT && xp_share(w, x, e) < 0)
		return -1;
	if (x->shared)
		*id = x->id;
	return 0;
}

static int xbuf_room(struct hu_erofs *w, size_t need, struct hu_error *e)
{
	uint8_t *p;

	if (need <= w->xcap)
		return 0;
	if (need > XBODY_MAX + EROFS_XATTR_ENT_SIZE + EROFS_NAME_LEN +
		   UINT16_MAX + 4)
		return hu_error_set(e, E2BIG, NULL,
				    "EROFS cannot hold more than 256 KiB of xattrs in one inode");
	p = realloc(w->xbuf, need);
	if (!p)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	w->xbuf = p;
	w->xcap = need;
	return 0;
}

/*
 * The xattr body of @m into w->xbuf, *@size bytes (0: none).  The shared
 * ids come first, then the inline entries in the caller's order.
 */
int hu_erofs_xattr_encode(struct hu_erofs *w, const struct hu_erofs_meta *m,
		       size_t *size, struct hu_error *e)
{
	size_t nid_room = m->nxattrs < MAX_SHARED ? m->nxattrs : MAX_SHARED;
	size_t head = EROFS_XATTR_HDR_SIZE + 4 * nid_room, len = head;
	uint32_t ids[MAX_SHARED];
	size_t nshared = 0;

	*size = 0;
	if (!m->nxattrs)
		return 0;
	for (size_t i = 0; i < m->nxattrs; i++) {
		const struct hu_xattr *x = &m->xattrs[i];
		size_t esize = 0;
		size_t emax = EROFS_XATTR_ENT_SIZE + strlen(x->name) +
			      x->size + 4;
		uint32_t id = NO_ID;

		if (xbuf_room(w, len + emax, e) < 0 ||
		    encode_entry(x, w->xbuf + len, &esize, e) < 0)
			return -1;
		if (nshared < MAX_SHARED &&
		    xp_use(w, w->xbuf + len, esize, &id, e) < 0)
			return -1;
		if (nshared < MAX_SHARED && id != NO_ID) {
			ids[nshared++] = id;
			continue;
		}
		len += esize;
	}
	/* The inline entries move down to just after the ids. */
	memmove(w->xbuf + EROFS_XATTR_HDR_SIZE + 4 * nshared, w->xbuf + head,
		len - head);
	len -= 4 * (nid_room - nshared);
	if (len > XBODY_MAX)
		return hu_error_set(e, E2BIG, NULL,
				    "EROFS cannot hold more than 256 KiB of xattrs in one inode");
	memset(w->xbuf, 0, EROFS_XATTR_HDR_SIZE);
	w->xbuf[4] = (uint8_t)nshared;
	for (size_t i = 0; i < nshared; i++)
		put32(w->xbuf + EROFS_XATTR_HDR_SIZE + 4 * i, ids[i]);
	*size = len;
	return 0;
}

void hu_erofs_xattr_free(struct hu_erofs *w)
{
	if (w->xp) {
		for (size_t i = 0; i < XP_SLOTS; i++)
			free(w->xp[i].ent);
		free(w->xp);
	}
	free(w->xbuf);
	w->xp = NULL;
	w->xbuf = NULL;
}
