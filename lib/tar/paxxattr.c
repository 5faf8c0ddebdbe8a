/* SPDX-License-Identifier: MIT */
/*
 * xattr names in pax records, SCHILY.xattr.NAME=VALUE.
 *
 * GNU tar writes NAME as its bytes, with only '%' and '=' escaped, as %25
 * and %3D ('=' would end the keyword), and undoes exactly those two when
 * it reads.  libarchive 3.6 writes NAME URL-encoded instead (every byte
 * outside '!'..'~', and '%' and '='), and its reader, like bsdtar's and
 * Python's tarfile, takes NAME as it stands: "user.sp ace" written by
 * libarchive comes back from every reader as "user.sp%20ace".  So the
 * tar writer lets libarchive write each header with xattrs, then
 * rewrites the keys of its records into GNU tar's form (hu_pax_fix_xattr_
 * keys); libarchive's own LIBARCHIVE.xattr.* records, which some
 * versions add, would make bsdtar set each attribute twice, and go.
 *
 * Reading a tarball layer takes both forms (hu_pax_xattr_name): a name
 * that libarchive could have written (no byte it escapes left raw, each
 * '%' the escape of a byte it escapes) is URL-decoded; any other undoes
 * GNU tar's two escapes.  Where the two readings could differ GNU tar
 * never writes such a name, so both agree on every name GNU tar writes.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tar/paxxattr.h"

#define BLOCK 512
#define SIZE_OFF 124	/* ustar header fields */
#define SIZE_LEN 12
#define SUM_OFF 148
#define SUM_LEN 8
#define TYPE_OFF 156
#define MAGIC_OFF 257

static const char XATTR[] = "SCHILY.xattr.";
static const char LA_XATTR[] = "LIBARCHIVE.xattr.";

void hu_paxbuf_free(struct hu_paxbuf *b)
{
	free(b->p);
	*b = (struct hu_paxbuf){ 0 };
}

static int grow(struct hu_paxbuf *b, size_t more)
{
	size_t want = b->len + more;
	char *p;

	if (want <= b->cap)
		return 0;
	want = want < 2 * b->cap ? 2 * b->cap : want + BLOCK;
	p = realloc(b->p, want);
	if (!p) {
		errno = ENOMEM;
		return -1;
	}
	b->p = p;
	b->cap = want;
	return 0;
}

int hu_paxbuf_add(struct hu_paxbuf *b, const void *p, size_t n)
{
	if (grow(b, n) < 0)
		return -1;
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

/* ---- names ------------------------------------------------------------- */

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* The bytes libarchive's url_encode() escapes. */
static bool la_escapes(unsigned char c)
{
	return c < '!' || c > '~' || c == '%' || c == '=';
}

/* Could libarchive have written @s: no byte it escapes left raw, every
 * '%' an escape (upper-case hex, as it writes them) of such a byte? */
static bool la_encoded(const char *s)
{
	for (; *s; s++) {
		int hi, lo;

		if (*s != '%') {
			if (la_escapes((unsigned char)*s))
				return false;
			continue;
		}
		hi = hexval(s[1]);
		lo = hi < 0 ? -1 : hexval(s[2]);
		if (lo < 0 || !la_escapes((unsigned char)(hi << 4 | lo)))
			return false;
		s += 2;
	}
	return true;
}

int hu_pax_xattr_name(const char *in, char *out, size_t size)
{
	bool url = la_encoded(in);
	size_t n = 0;

	while (*in) {
		char c = *in++;

		if (c == '%' && (url || (in[0] == '2' && in[1] == '5') ||
				 (in[0] == '3' && in[1] == 'D'))) {
			c = (char)(hexval(in[0]) << 4 | hexval(in[1]));
			in += 2;
		}
		if (n + 1 >= size)
			return -1;
		out[n++] = c;
	}
	out[n] = '\0';
	return 0;
}

/* Append GNU tar's form of name @s (libarchive's URL encoding, undone). */
static int add_gnu_name(struct hu_paxbuf *b, const char *s, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[3] = { '%', 0, 0 };

		if (c == '%' && i + 2 < len && hexval(s[i + 1]) >= 0 &&
		    hexval(s[i + 2]) >= 0) {
			c = (unsigned char)(hexval(s[i + 1]) << 4 |
					    hexval(s[i + 2]));
			i += 2;
		}
		if (c != '%' && c != '=') {
			if (hu_paxbuf_add(b, &c, 1) < 0)
				return -1;
			continue;
		}
		esc[1] = hex[c >> 4];
		esc[2] = hex[c & 15];
		if (hu_paxbuf_add(b, esc, 3) < 0)
			return -1;
	}
	return 0;
}

/* ---- records ----------------------------------------------------------- */

static size_t digits(size_t n)
{
	size_t d = 1;

	while (n >= 10) {
		n /= 10;
		d++;
	}
	return d;
}

/* One record "LEN KEY=VALUE\n", LEN counting itself. */
static int add_record(struct hu_paxbuf *b, const char *key, size_t klen,
		      const char *value, size_t vlen)
{
	size_t n = klen + vlen + 3, d = digits(n);
	char num[24];

	if (digits(n + d) > d)
		d++;
	snprintf(num, sizeof(num), "%zu ", n + d);
	if (hu_paxbuf_add(b, num, strlen(num)) < 0 || hu_paxbuf_add(b, key, klen) < 0 ||
	    hu_paxbuf_add(b, "=", 1) < 0 || hu_paxbuf_add(b, value, vlen) < 0)
		return -1;
	return hu_paxbuf_add(b, "\n", 1);
}

/* The records of @body, rewritten into @out; @key: scratch.  -1 with
 * errno EINVAL for a malformed record, or ENOMEM. */
static int fix_records(const char *body, size_t len, struct hu_paxbuf *out,
		       struct hu_paxbuf *key)
{
	size_t xl = sizeof(XATTR) - 1, ll = sizeof(LA_XATTR) - 1;

	while (len > 0) {
		const char *sp = memchr(body, ' ', len < 24 ? len : 24);
		const char *k, *eq, *end;
		size_t rl = 0, kl;

		if (!sp)
			goto bad;
		for (const char *p = body; p < sp; p++) {
			if (*p < '0' || *p > '9')
				goto bad;
			rl = rl * 10 + (size_t)(*p - '0');
		}
		if (rl <= (size_t)(sp - body) + 3 || rl > len ||
		    body[rl - 1] != '\n')
			goto bad;
		k = sp + 1;
		end = body + rl - 1;
		eq = memchr(k, '=', (size_t)(end - k));
		if (!eq)
			goto bad;
		kl = (size_t)(eq - k);
		if (kl > xl && !memcmp(k, XATTR, xl)) {
			key->len = 0;
			if (hu_paxbuf_add(key, XATTR, xl) < 0 ||
			    add_gnu_name(key, k + xl, kl - xl) < 0 ||
			    add_record(out, key->p, key->len, eq + 1,
				       (size_t)(end - eq - 1)) < 0)
				return -1;
		} else if (!(kl > ll && !memcmp(k, LA_XATTR, ll)) &&
			   hu_paxbuf_add(out, body, rl) < 0) {
			return -1;
		}
		body += rl;
		len -= rl;
	}
	return 0;
bad:
	errno = EINVAL;
	return -1;
}

/* ---- the header --------------------------------------------------------- */

static bool octal_field(const char *f, size_t n, size_t *v)
{
	size_t i = 0;

	*v = 0;
	while (i < n && f[i] == ' ')
		i++;
	if (i == n || f[i] < '0' || f[i] > '7')
		return false;
	for (; i < n && f[i] >= '0' && f[i] <= '7'; i++)
		*v = *v * 8 + (size_t)(f[i] - '0');
	return true;
}

/* Size and checksum of ustar block @h, as libarchive writes them: eleven
 * octal digits; six, a NUL and a space. */
static void set_size_sum(char *h, size_t size)
{
	unsigned sum = 0;
	char num[16];

	snprintf(num, sizeof(num), "%011zo", size);
	memcpy(h + SIZE_OFF, num, 11);
	memset(h + SUM_OFF, ' ', SUM_LEN);
	for (size_t i = 0; i < BLOCK; i++)
		sum += (unsigned char)h[i];
	snprintf(num, sizeof(num), "%06o", sum & 0777777);
	memcpy(h + SUM_OFF, num, 6);
	h[SUM_OFF + 6] = '\0';
}

int hu_pax_fix_xattr_keys(const char *in, size_t len, struct hu_paxbuf *out)
{
	struct hu_paxbuf key = { 0 };
	size_t size, padded, body;
	int rc;

	out->len = 0;
	if (len < 2 * BLOCK || in[TYPE_OFF] != 'x' ||
	    memcmp(in + MAGIC_OFF, "ustar", 6) ||
	    !octal_field(in + SIZE_OFF, SIZE_LEN, &size) ||
	    size > len - 2 * BLOCK)
		goto bad;
	padded = (size + BLOCK - 1) / BLOCK * BLOCK;
	if (len - BLOCK - padded < BLOCK)
		goto bad;
	if (hu_paxbuf_add(out, in, BLOCK) < 0)
		return -1;
	rc = fix_records(in + BLOCK, size, out, &key);
	hu_paxbuf_free(&key);
	if (rc < 0)
		return -1;
	body = out->len - BLOCK;
	if (body >= 1ul << 33)
		goto bad;
	set_size_sum(out->p, body);
	padded = (body + BLOCK - 1) / BLOCK * BLOCK - body;
	if (grow(out, padded) < 0)
		return -1;
	memset(out->p + out->len, 0, padded);
	out->len += padded;
	/* The entry's own block(s), as they were. */
	size = (size + BLOCK - 1) / BLOCK * BLOCK;
	return hu_paxbuf_add(out, in + BLOCK + size, len - BLOCK - size);
bad:
	errno = EINVAL;
	return -1;
}
