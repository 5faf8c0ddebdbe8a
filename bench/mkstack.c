/* SPDX-License-Identifier: MIT */
/*
 * mkstack - write a deterministic three-layer overlayfs stack for benchmarks.
 *
 *   mkstack [-s SEED] [-n ENTRIES] [-b BYTES] [-t] [-q] DIR
 *   mkstack --now
 *
 * DIR/L0 (bottom), DIR/L1, DIR/L2 (top) are written in kernel overlay
 * format: whiteouts are character devices 0/0 (some of them hard links of
 * one another, as the kernel makes them), opaque directories carry
 * trusted.overlay.opaque=y.  The whole stack is planned in memory first
 * (a model of the merged view), then written; the same seed gives the same
 * names, sizes, modes, owners, times and bytes.
 *
 * Default shape (-n 200000 -b 2G): about ENTRIES directory entries in the
 * three layers together, about BYTES of regular-file data, sizes
 * log-normally distributed (most files small, a few large), directories
 * 1 to 6 levels deep, some very large directories.  Each upper layer
 * overwrites about 3% and deletes about 1% of the files visible beneath it
 * (about 5% and 2% over the whole stack), adds about 2% new files, makes a
 * few directories opaque, deletes a few whole subtrees, turns a few files
 * into directories and back, and holds some symlinks and hard links.
 *
 * -t (tiny) writes a stack of ENTRIES (default 1000000) empty or tiny files
 * for memory measurements; -b is ignored there.
 *
 * On stdout: one summary line per layer and one for the merged view as the
 * model predicts it ("merged: E entries B bytes"), which a caller can check
 * against a real merge.  --now prints CLOCK_MONOTONIC in seconds (used by
 * bench/run.sh as its clock).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define NLAYERS 3
#define MAXDEPTH 6
#define BUFSZ (16u << 20)
#define MAXFILE (256ull << 20)

enum { T_DIR, T_REG, T_LNK, T_HARD };
enum { OP_DIR, OP_REG, OP_LNK, OP_HARD, OP_WH };

struct node {
	char *path;		/* relative to the layer root; "" for the root */
	char *ltarget;		/* symlink target */
	uint64_t size;		/* regular file: bytes */
	int64_t mtime;
	uint32_t parent;	/* node index of the parent directory */
	uint32_t target;	/* hard link: node index of the linked file */
	uint32_t mode;
	uint32_t uid;
	uint32_t subtree;	/* directories: visible descendants (scratch) */
	uint8_t type, depth, layer, alive;
	uint8_t inlayer;	/* directories: bit k set when layer k has it */
	uint8_t opaque;		/* directory made opaque in its own layer */
	uint8_t xattr;		/* regular file carries a user.* xattr */
};

struct op {
	uint32_t node;
	uint8_t layer, kind;
};

static struct node *N;
static size_t nn, cap_n;
static struct op *O;
static size_t no, cap_o;
static uint64_t rng_state;
static int quiet, tiny;

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("mkstack: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n);
	if (!p)
		die("out of memory");
	return p;
}

/* ---- deterministic randomness ------------------------------------------ */

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rnd(void)
{
	return splitmix(&rng_state);
}

static uint64_t below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

static double unit(void)
{
	return (double)(rnd() >> 11) / 9007199254740992.0;
}

static int chance(double p)
{
	return unit() < p;
}

static double gauss(void)
{
	double u = unit(), v = unit();

	if (u < 1e-300)
		u = 1e-300;
	return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

/* ---- names --------------------------------------------------------------- */

static const char *const syl[] = {
	"lib", "core", "net", "util", "data", "conf", "share", "local", "gtk",
	"py", "perl", "x11", "font", "icon", "doc", "man", "kern", "sys",
	"boot", "log", "cache", "spool", "mail", "www", "db", "ssl", "cert",
	"zone", "info", "pkg", "mod", "test", "src", "inc", "bin", "run",
	"app", "node", "go", "rust", "java", "qt", "kde", "gnome", "media",
	"snd", "video", "img", "theme", "lang", "loc", "tz", "ca", "key",
};
static const char *const exts[] = {
	"", "", ".so", ".so.1", ".h", ".c", ".py", ".pyc", ".txt", ".png",
	".svg", ".gz", ".json", ".conf", ".mo", ".html", ".js", ".xml", ".a",
	".pm", ".rb", ".go", ".rs", ".md", ".ttf", ".xz", ".jar", ".desktop",
};
#define NSYL (sizeof(syl) / sizeof(syl[0]))
#define NEXT (sizeof(exts) / sizeof(exts[0]))

/* A name unique in the whole stack: the node index is part of it. */
static void make_name(char *buf, size_t len, uint32_t idx, int dir)
{
	char num[16];
	int k = 0;
	uint32_t x = idx;

	do {
		num[k++] = "0123456789abcdefghijklmnopqrstuvwxyz"[x % 36];
		x /= 36;
	} while (x);
	num[k] = 0;
	const char *pre = chance(0.02) ? "." : "";
	const char *a = syl[below(NSYL)], *b = syl[below(NSYL)];
	const char *sep = chance(0.004) ? " " : chance(0.003) ? "\xc3\xa9" : "-";
	const char *ext = dir ? "" : exts[below(NEXT)];

	if (chance(0.4))
		snprintf(buf, len, "%s%s%s%s%s%s", pre, a, b, sep, num, ext);
	else
		snprintf(buf, len, "%s%s%s%s%s", pre, a, sep, num, ext);
}

/* ---- the model ------------------------------------------------------------ */

static uint32_t new_node(uint32_t parent, int type, int layer, const char *reuse)
{
	if (nn == cap_n) {
		cap_n = cap_n ? cap_n * 2 : 1 << 16;
		N = xrealloc(N, cap_n * sizeof(*N));
	}
	uint32_t i = (uint32_t)nn++;
	struct node *n = &N[i];

	memset(n, 0, sizeof(*n));
	n->parent = parent;
	n->type = (uint8_t)type;
	n->layer = (uint8_t)layer;
	n->alive = 1;
	n->depth = (uint8_t)(N[parent].depth + 1);
	if (reuse) {
		n->path = strdup(reuse);
	} else {
		char name[96];
		size_t pl = strlen(N[parent].path);

		make_name(name, sizeof(name), i, type == T_DIR);
		n->path = xrealloc(NULL, pl + strlen(name) + 2);
		if (pl)
			sprintf(n->path, "%s/%s", N[parent].path, name);
		else
			strcpy(n->path, name);
	}
	if (!n->path)
		die("out of memory");
	n->mtime = 1600000000 + (int64_t)below(100000000);
	n->uid = chance(0.9) ? 0 : chance(0.5) ? 1000 : chance(0.5) ? 33 : 65534;
	if (type == T_DIR) {
		double r = unit();
		n->mode = r < 0.95 ? 0755 : r < 0.99 ? 0700 : 01777;
		n->inlayer = (uint8_t)(1u << layer);
	} else if (type == T_REG) {
		double r = unit();
		n->mode = r < 0.8 ? 0644 : r < 0.92 ? 0755 : r < 0.97 ? 0600 : 0444;
		n->xattr = chance(0.005);
	} else {
		n->mode = 0777;
	}
	return i;
}

static void push_op(uint32_t node, int layer, int kind)
{
	if (no == cap_o) {
		cap_o = cap_o ? cap_o * 2 : 1 << 16;
		O = xrealloc(O, cap_o * sizeof(*O));
	}
	O[no].node = node;
	O[no].layer = (uint8_t)layer;
	O[no].kind = (uint8_t)kind;
	no++;
}

static int visible(uint32_t i)
{
	for (;;) {
		if (!N[i].alive)
			return 0;
		if (i == 0)
			return 1;
		i = N[i].parent;
	}
}

/* Make directory @d exist in layer @k (a plain, merging directory). */
static void ensure_dir(uint32_t d, int k)
{
	if (N[d].inlayer & (1u << k))
		return;
	ensure_dir(N[d].parent, k);
	N[d].inlayer |= (uint8_t)(1u << k);
	push_op(d, k, OP_DIR);
}

static uint64_t draw_size(void)
{
	if (tiny)
		return chance(0.6) ? 0 : 1 + below(256);
	if (chance(0.04))
		return 0;
	if (chance(0.00006))	/* a few big ones: 16 to 160 MiB */
		return (uint64_t)exp(log(16.0 * 1048576) + log(10.0) * unit());
	double s = exp(log(2500.0) + 2.0 * gauss());
	if (s > (double)MAXFILE)
		s = (double)MAXFILE;
	return (uint64_t)s + 1;
}

static char *draw_symlink_target(uint32_t self)
{
	char buf[4200];

	if (nn > 2 && chance(0.5)) {
		uint32_t t = (uint32_t)(1 + below(nn - 1));
		snprintf(buf, sizeof(buf), "/%s", N[t].path);
	} else if (chance(0.5)) {
		char name[96];
		make_name(name, sizeof(name), self ^ 0x5a5a5, 0);
		snprintf(buf, sizeof(buf), "%s", name);
	} else {
		char name[96];
		make_name(name, sizeof(name), self ^ 0xa5a5a, 0);
		snprintf(buf, sizeof(buf), "../%s/%s", syl[below(NSYL)], name);
	}
	char *s = strdup(buf);
	if (!s)
		die("out of memory");
	return s;
}

static uint32_t add_entry(uint32_t dir, int type, int k, const char *reuse)
{
	uint32_t i = new_node(dir, type, k, reuse);

	ensure_dir(dir, k);
	switch (type) {
	case T_DIR:
		push_op(i, k, OP_DIR);
		break;
	case T_REG:
		N[i].size = draw_size();
		push_op(i, k, OP_REG);
		break;
	case T_LNK:
		N[i].ltarget = draw_symlink_target(i);
		push_op(i, k, OP_LNK);
		break;
	}
	return i;
}

/* Weighted choice of a directory: a few directories get very many entries. */
static uint32_t *wdirs;
static double *wcum;
static size_t nw;

static void build_weights(int k)
{
	double acc = 0;

	free(wdirs);
	free(wcum);
	wdirs = xrealloc(NULL, nn * sizeof(*wdirs));
	wcum = xrealloc(NULL, nn * sizeof(*wcum));
	nw = 0;
	for (uint32_t i = 1; i < nn; i++) {
		if (N[i].type != T_DIR || !visible(i))
			continue;
		/* the weight is a function of the node, so it does not change
		 * between layers: big directories stay big */
		uint64_t s = i * 0x9e3779b97f4a7c15ull;
		uint64_t h = splitmix(&s);
		double u = ((double)(h >> 11) + 1) / 9007199254740993.0;
		double v = (double)(splitmix(&s) >> 11) / 9007199254740992.0;
		double g = sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
		acc += exp((tiny ? 1.0 : 1.4) * g);
		wdirs[nw] = i;
		wcum[nw] = acc;
		nw++;
	}
	(void)k;
}

static uint32_t pick_dir(void)
{
	double x = unit() * wcum[nw - 1];
	size_t lo = 0, hi = nw - 1;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (wcum[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return wdirs[lo];
}

static void plan_base(size_t n0)
{
	double fdir = tiny ? 0.05 : 0.09;
	double flnk = tiny ? 0.02 : 0.04;
	double fhard = tiny ? 0.002 : 0.005;
	size_t ndirs = (size_t)(n0 * fdir), nlnk = (size_t)(n0 * flnk);
	size_t nhard = (size_t)(n0 * fhard);
	size_t nreg = n0 - ndirs - nlnk - nhard;
	uint32_t *cand = xrealloc(NULL, (ndirs + 1) * sizeof(*cand));
	size_t nc = 0;

	/* a handful of top-level directories, then a random recursive tree */
	for (size_t i = 0; i < ndirs; i++) {
		/* earlier (shallower) directories are likelier parents */
		double u = unit();
		uint32_t parent = i < 12 || nc == 0 ? 0 : cand[(size_t)(u * u * nc)];
		uint32_t d = new_node(parent, T_DIR, 0, NULL);
		push_op(d, 0, OP_DIR);
		if (N[d].depth < MAXDEPTH)
			cand[nc++] = d;
	}
	free(cand);
	build_weights(0);
	for (size_t i = 0; i < nreg; i++)
		add_entry(pick_dir(), T_REG, 0, NULL);
	for (size_t i = 0; i < nlnk; i++)
		add_entry(pick_dir(), T_LNK, 0, NULL);
	size_t last = nn;
	for (size_t i = 0; i < nhard; i++) {
		uint32_t t;
		do
			t = (uint32_t)(1 + below(last - 1));
		while (N[t].type != T_REG);
		uint32_t h = new_node(pick_dir(), T_HARD, 0, NULL);
		N[h].target = t;
		push_op(h, 0, OP_HARD);
	}
}

/* Visible descendants of every visible directory (for choosing small
 * subtrees to delete or hide). */
static void count_subtrees(void)
{
	for (size_t i = 0; i < nn; i++)
		N[i].subtree = 0;
	for (uint32_t i = 1; i < nn; i++) {
		if (!visible(i))
			continue;
		for (uint32_t p = N[i].parent; p; p = N[p].parent)
			N[p].subtree++;
	}
}

/* A visible lower directory of moderate size that layer k does not hold. */
static uint32_t pick_subtree(int k, uint32_t lo, uint32_t hi)
{
	for (int tries = 0; tries < 100000; tries++) {
		uint32_t d = wdirs[below(nw)];
		if (N[d].alive && N[d].depth >= 2 && N[d].layer < k &&
		    !(N[d].inlayer & (1u << k)) && N[d].subtree >= lo &&
		    N[d].subtree <= hi && visible(d))
			return d;
	}
	return 0;
}

/* A visible lower non-directory. */
static uint32_t pick_lower_nondir(int k, size_t limit)
{
	for (int tries = 0; tries < 1000000; tries++) {
		uint32_t i = (uint32_t)(1 + below(limit - 1));
		if (N[i].type != T_DIR && N[i].layer < k && visible(i) &&
		    !(N[N[i].parent].opaque && N[N[i].parent].layer == k))
			return i;
	}
	return 0;
}

static void fill_new_dir(uint32_t d, int k, size_t n)
{
	for (size_t j = 0; j < n; j++)
		add_entry(d, chance(0.9) ? T_REG : T_LNK, k, NULL);
}

static void plan_upper(int k, double p_over, double p_del, double p_new,
		       size_t scale)
{
	size_t limit = nn;	/* entries that exist beneath layer k */
	size_t vis = 0;

	for (uint32_t i = 1; i < limit; i++)
		if (N[i].type != T_DIR && visible(i))
			vis++;
	count_subtrees();
	build_weights(k);

	/* opaque directories: the lower contents vanish, new ones appear */
	size_t nopq = 2 + scale / 60000;
	for (size_t j = 0; j < nopq; j++) {
		uint32_t d = pick_subtree(k, 3, 300);
		if (!d)
			break;
		N[d].alive = 0;
		uint32_t o = add_entry(N[d].parent, T_DIR, k, N[d].path);
		N[o].opaque = 1;
		N[o].mode = N[d].mode;
		fill_new_dir(o, k, 5 + below(35));
		uint32_t sub = add_entry(o, T_DIR, k, NULL);
		fill_new_dir(sub, k, 1 + below(8));
	}
	/* whole subtrees deleted by one whiteout */
	size_t ndw = 3 + scale / 20000;
	for (size_t j = 0; j < ndw; j++) {
		uint32_t d = pick_subtree(k, 1, 200);
		if (!d)
			break;
		N[d].alive = 0;
		ensure_dir(N[d].parent, k);
		push_op(d, k, OP_WH);
	}
	/* a directory replaced by a file, a file replaced by a directory */
	for (int j = 0; j < 2; j++) {
		uint32_t d = pick_subtree(k, 0, 50);
		if (d) {
			N[d].alive = 0;
			add_entry(N[d].parent, T_REG, k, N[d].path);
		}
		uint32_t f = pick_lower_nondir(k, limit);
		if (f) {
			N[f].alive = 0;
			uint32_t nd = add_entry(N[f].parent, T_DIR, k, N[f].path);
			fill_new_dir(nd, k, 1 + below(5));
		}
	}
	/* overwrites: new content, a new symlink target, or a new type */
	size_t nover = (size_t)(vis * p_over);
	for (size_t j = 0; j < nover; j++) {
		uint32_t i = pick_lower_nondir(k, limit);
		if (!i)
			break;
		N[i].alive = 0;
		int type = N[i].type == T_LNK ? (chance(0.8) ? T_LNK : T_REG)
					      : (chance(0.97) ? T_REG : T_LNK);
		uint32_t o = add_entry(N[i].parent, type, k, N[i].path);
		if (N[i].type == T_REG && type == T_REG && chance(0.7))
			N[o].mode = N[i].mode;
	}
	/* deletions */
	size_t ndel = (size_t)(vis * p_del);
	for (size_t j = 0; j < ndel; j++) {
		uint32_t i = pick_lower_nondir(k, limit);
		if (!i)
			break;
		N[i].alive = 0;
		ensure_dir(N[i].parent, k);
		push_op(i, k, OP_WH);
	}
	/* new files in existing directories, and a few new directories */
	size_t nnew = (size_t)(vis * p_new);
	size_t first_new = nn;
	for (size_t j = 0; j < nnew; j++) {
		uint32_t d;
		do
			d = pick_dir();
		while (!visible(d));
		add_entry(d, chance(0.95) ? T_REG : T_LNK, k, NULL);
	}
	for (size_t j = 0; j < nnew / 40; j++) {
		uint32_t d;
		do
			d = pick_dir();
		while (!visible(d) || N[d].depth >= MAXDEPTH);
		uint32_t nd = add_entry(d, T_DIR, k, NULL);
		fill_new_dir(nd, k, below(25));
	}
	/* hard links among this layer's new files */
	size_t last = nn;
	for (size_t j = 0; j < nnew / 200 && last > first_new; j++) {
		uint32_t t = (uint32_t)(first_new + below(last - first_new));
		if (N[t].type != T_REG || !visible(t))
			continue;
		uint32_t d;
		do
			d = pick_dir();
		while (!visible(d));
		uint32_t h = new_node(d, T_HARD, k, NULL);
		N[h].target = t;
		ensure_dir(d, k);
		push_op(h, k, OP_HARD);
	}
}

/* ---- writing --------------------------------------------------------------- */

static unsigned char *databuf;
static int lfd[NLAYERS];
static char *first_wh[NLAYERS];

static void check(int rc, const char *what, int layer, const char *path)
{
	if (rc < 0)
		die("%s L%d/%s: %s", what, layer, path, strerror(errno));
}

static void set_owner_time(int k, const struct node *n)
{
	struct timespec ts[2] = { { n->mtime, 0 }, { n->mtime, 0 } };

	if (n->uid)
		check(fchownat(lfd[k], n->path, n->uid, n->uid,
			       AT_SYMLINK_NOFOLLOW), "chown", k, n->path);
	if (n->type != T_DIR)
		check(utimensat(lfd[k], n->path, ts, AT_SYMLINK_NOFOLLOW),
		      "utimensat", k, n->path);
}

static void write_file(int k, uint32_t idx)
{
	const struct node *n = &N[idx];
	int fd = openat(lfd[k], n->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
			n->mode);
	uint64_t s = idx * 0x2545f4914f6cdd1dull ^ rng_state;
	size_t off = splitmix(&s) % BUFSZ;
	uint64_t left = n->size;

	check(fd, "create", k, n->path);
	while (left) {
		size_t chunk = BUFSZ - off;
		if (chunk > left)
			chunk = (size_t)left;
		ssize_t w = write(fd, databuf + off, chunk);
		if (w <= 0)
			die("write L%d/%s: %s", k, n->path,
			    w < 0 ? strerror(errno) : "short write");
		left -= (uint64_t)w;
		off = (off + (size_t)w) % BUFSZ;
	}
	if (n->uid)
		check(fchown(fd, n->uid, n->uid), "chown", k, n->path);
	if (n->mode & 07000)
		check(fchmod(fd, n->mode), "chmod", k, n->path);
	if (n->xattr) {
		char v[32];
		int l = snprintf(v, sizeof(v), "bench-%" PRIu32, idx);
		check(fsetxattr(fd, "user.hunion.bench", v, (size_t)l, 0),
		      "setxattr", k, n->path);
	}
	struct timespec ts[2] = { { n->mtime, 0 }, { n->mtime, 0 } };
	check(futimens(fd, ts), "futimens", k, n->path);
	check(close(fd), "close", k, n->path);
}

static void emit(const struct op *op)
{
	int k = op->layer;
	const struct node *n = &N[op->node];

	switch (op->kind) {
	case OP_DIR:
		check(mkdirat(lfd[k], n->path, n->mode), "mkdir", k, n->path);
		if (n->opaque && n->layer == k) {
			int fd = openat(lfd[k], n->path,
					O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			check(fd, "open", k, n->path);
			check(fsetxattr(fd, "trusted.overlay.opaque", "y", 1, 0),
			      "setxattr trusted.overlay.opaque", k, n->path);
			close(fd);
		}
		if (n->uid)
			set_owner_time(k, n);
		break;
	case OP_REG:
		write_file(k, op->node);
		break;
	case OP_LNK:
		check(symlinkat(n->ltarget, lfd[k], n->path), "symlink", k,
		      n->path);
		set_owner_time(k, n);
		break;
	case OP_HARD:
		check(linkat(lfd[k], N[n->target].path, lfd[k], n->path, 0),
		      "link", k, n->path);
		break;
	case OP_WH:
		/* like the kernel, share one whiteout inode now and then */
		if (first_wh[k] && chance(0.5)) {
			check(linkat(lfd[k], first_wh[k], lfd[k], n->path, 0),
			      "link whiteout", k, n->path);
		} else {
			check(mknodat(lfd[k], n->path, S_IFCHR | 0, makedev(0, 0)),
			      "mknod whiteout", k, n->path);
			if (!first_wh[k])
				first_wh[k] = n->path;
		}
		{
			int64_t t = 1600000000 + k;
			struct timespec ts[2] = { { t, 0 }, { t, 0 } };
			check(utimensat(lfd[k], n->path, ts, AT_SYMLINK_NOFOLLOW),
			      "utimensat", k, n->path);
		}
		break;
	}
}

/* Directory times last: adding entries changed them. */
static void set_dir_times(void)
{
	for (size_t j = 0; j < no; j++) {
		if (O[j].kind != OP_DIR)
			continue;
		const struct node *n = &N[O[j].node];
		struct timespec ts[2] = { { n->mtime, 0 }, { n->mtime, 0 } };
		check(utimensat(lfd[O[j].layer], n->path, ts, AT_SYMLINK_NOFOLLOW),
		      "utimensat", O[j].layer, n->path);
	}
	for (int k = 0; k < NLAYERS; k++) {
		struct timespec ts[2] = { { 1600000000, 0 }, { 1600000000, 0 } };
		check(futimens(lfd[k], ts), "futimens", k, ".");
	}
}

static uint64_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	switch (*end) {
	case 'k': case 'K': v *= 1024; end++; break;
	case 'm': case 'M': v *= 1024 * 1024; end++; break;
	case 'g': case 'G': v *= 1024.0 * 1024 * 1024; end++; break;
	}
	if (end == s || *end || v < 0)
		die("bad number: %s", s);
	return (uint64_t)v;
}

static void usage(int rc)
{
	fprintf(rc ? stderr : stdout,
		"usage: mkstack [-s SEED] [-n ENTRIES] [-b BYTES] [-t] [-q] DIR\n"
		"       mkstack --now\n"
		"Write a deterministic overlayfs stack DIR/L0 DIR/L1 DIR/L2.\n"
		"  -s SEED     random seed (default 1)\n"
		"  -n ENTRIES  entries in the three layers (default 200000;\n"
		"              1000000 with -t); k/M suffixes allowed\n"
		"  -b BYTES    regular-file data in the stack (default 2G)\n"
		"  -t          tiny mode: empty or tiny files only\n"
		"  -q          no progress on stderr\n"
		"  --now       print CLOCK_MONOTONIC seconds and exit\n");
	exit(rc);
}

int main(int argc, char **argv)
{
	uint64_t seed = 1, entries = 0, bytes = 2ull << 30;
	const char *dir = NULL;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--now")) {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			printf("%lld.%09ld\n", (long long)ts.tv_sec, ts.tv_nsec);
			return 0;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(0);
		} else if (!strcmp(a, "-t")) {
			tiny = 1;
		} else if (!strcmp(a, "-q")) {
			quiet = 1;
		} else if ((!strcmp(a, "-s") || !strcmp(a, "-n") ||
			    !strcmp(a, "-b")) && i + 1 < argc) {
			uint64_t v = parse_size(argv[++i]);
			if (a[1] == 's')
				seed = v;
			else if (a[1] == 'n')
				entries = v;
			else
				bytes = v;
		} else if (a[0] != '-' && !dir) {
			dir = a;
		} else {
			usage(16);
		}
	}
	if (!dir)
		usage(16);
	if (!entries)
		entries = tiny ? 1000000 : 200000;
	if (entries < 1000)
		die("at least 1000 entries");
	rng_state = seed * 0x9e3779b97f4a7c15ull + 12345;

	/* ---- plan ---- */
	new_node(0, T_DIR, 0, "");	/* the root, index 0 */
	N[0].depth = 0;
	N[0].inlayer = (1u << NLAYERS) - 1;
	plan_base((size_t)(entries * (tiny ? 0.84 : 0.835)));
	size_t n_base = no;
	plan_upper(1, 0.03, 0.01, 0.02, entries);
	size_t n_l1 = no - n_base;
	plan_upper(2, 0.025, 0.01, 0.02, entries);

	uint64_t total = 0;
	for (size_t i = 0; i < nn; i++)
		if (N[i].type == T_REG)
			total += N[i].size;
	if (!tiny && total) {
		double f = (double)bytes / (double)total;
		total = 0;
		for (size_t i = 0; i < nn; i++) {
			if (N[i].type != T_REG || !N[i].size)
				continue;
			double s = (double)N[i].size * f;
			N[i].size = s < 1 ? 1 : (uint64_t)s;
			total += N[i].size;
		}
	}
	(void)n_l1;

	/* ---- write ---- */
	databuf = xrealloc(NULL, BUFSZ);
	{
		uint64_t s = seed ^ 0xdeadbeefull;
		for (size_t i = 0; i < BUFSZ; i += 8) {
			uint64_t v = splitmix(&s);
			memcpy(databuf + i, &v, 8);
		}
	}
	umask(0);
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		die("mkdir %s: %s", dir, strerror(errno));
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		die("open %s: %s", dir, strerror(errno));
	for (int k = 0; k < NLAYERS; k++) {
		char name[4] = { 'L', (char)('0' + k), 0, 0 };
		if (mkdirat(dfd, name, 0755) < 0)
			die("mkdir %s/%s: %s", dir, name, strerror(errno));
		lfd[k] = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (lfd[k] < 0)
			die("open %s/%s: %s", dir, name, strerror(errno));
	}
	/* whiteout sharing draws from its own stream, so the plan above and
	 * the bytes do not depend on it */
	rng_state ^= 0x77777777ull;
	size_t step = no / 20 ? no / 20 : 1;
	for (size_t j = 0; j < no; j++) {
		emit(&O[j]);
		if (!quiet && j % step == 0)
			fprintf(stderr, "\rmkstack: %3zu%%", j * 100 / no);
	}
	set_dir_times();
	if (!quiet)
		fprintf(stderr, "\rmkstack: done\n");

	/* ---- summary ---- */
	uint64_t cnt[NLAYERS][5] = { { 0 } }, lbytes[NLAYERS] = { 0 }, nopq[NLAYERS] = { 0 };
	for (size_t j = 0; j < no; j++) {
		int k = O[j].layer;
		cnt[k][O[j].kind]++;
		if (O[j].kind == OP_REG)
			lbytes[k] += N[O[j].node].size;
		if (O[j].kind == OP_DIR && N[O[j].node].opaque &&
		    N[O[j].node].layer == k)
			nopq[k]++;
	}
	uint64_t all = 0;
	for (int k = 0; k < NLAYERS; k++) {
		uint64_t e = 0;
		for (int t = 0; t < 5; t++)
			e += cnt[k][t];
		all += e;
		printf("L%d: %" PRIu64 " entries: %" PRIu64 " dirs (%" PRIu64
		       " opaque) %" PRIu64 " files %" PRIu64 " symlinks %" PRIu64
		       " hardlinks %" PRIu64 " whiteouts; %" PRIu64 " bytes\n",
		       k, e, cnt[k][OP_DIR], nopq[k], cnt[k][OP_REG],
		       cnt[k][OP_LNK], cnt[k][OP_HARD], cnt[k][OP_WH], lbytes[k]);
	}
	uint64_t ve = 0, vb = 0;
	for (uint32_t i = 1; i < nn; i++) {
		if (!visible(i))
			continue;
		ve++;
		if (N[i].type == T_REG)
			vb += N[i].size;
	}
	printf("stack: %" PRIu64 " entries %" PRIu64 " bytes\n", all, total);
	printf("merged: %" PRIu64 " entries %" PRIu64 " bytes\n", ve, vb);
	return 0;
}
