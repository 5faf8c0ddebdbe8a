/* SPDX-License-Identifier: MIT */
/*
 * Is a directory in use by a mounted overlay?  Writing to the upper, lower
 * or workdir of a mounted overlay is undefined behaviour for the kernel
 * (Documentation/filesystems/overlayfs.rst, "Changes to underlying
 * filesystems"), so what fsck -p/-y, merge --into and mount write is
 * refused there; and reading an upperdir or workdir (fsck -n, merge -o,
 * diff, flatten) may see changes in progress, so they warn.  One scanner, hu_mountinfo_dirs(),
 * answers both.
 *
 * /proc/self/mountinfo names each overlay's directories in its super
 * options, as the mounter wrote them: relative, through a bind mount or a
 * symlink, or not at all (fuse-overlayfs keeps them to itself).  So paths
 * are never compared as strings: each one is stat'ed and its (st_dev,
 * st_ino) compared with the directories'.  A relative path is relative to
 * the mounter's working directory, which we do not know; tried from ours,
 * "upper" of anybody's mount would be caught as the "upper" beside us.
 * So a path that does not resolve (relative, gone, renamed, another mount
 * namespace) is never tried from here: the kernel is asked instead where
 * it can answer: it locks an overlay's upperdir and workdir against a
 * second use (ovl_inuse_trylock), which the probe of probe.c sees.  It
 * cannot see a lower: a lowerdir that does not resolve leaves open
 * whether a directory to be written is it.
 *
 * The kernel's spelling (fs/overlayfs/params.c, ovl_show_options()): the
 * whole options field is escaped by seq_show_option() (",= \t\n\\" as
 * \ooo); inside it, lowerdir= is the ':'-separated list as given, its
 * ':' and '\' escaped by '\' ("::" before the data-only layers);
 * lowerdir+= and datadir+= (Linux 6.8) name one directory each, as is;
 * upperdir= and workdir= are as given (kernels before 6.5 kept the
 * mounter's '\' escapes in them, which they undid at mount time).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "mount/mountinfo.h"

#define MOUNTINFO "/proc/self/mountinfo"

/* One mount of an overlay-like filesystem, its fields decoded. */
struct mount {
	const char *mountpoint;
	const char *fstype;
};

static bool is_overlay_type(const char *fstype)
{
	return strcmp(fstype, "overlay") == 0 ||
	       strcmp(fstype, "union") == 0 ||
	       strcmp(fstype, "fuse.fuse-overlayfs") == 0;
}

static bool is_octal(char c)
{
	return c >= '0' && c <= '7';
}

/* Undo mountinfo's escapes in place: "\ooo" is the byte ooo (octal). */
static void unescape_octal(char *s)
{
	char *out = s;

	while (*s) {
		if (s[0] == '\\' && is_octal(s[1]) && is_octal(s[2]) &&
		    is_octal(s[3])) {
			*out++ = (char)(((s[1] - '0') << 6) |
					((s[2] - '0') << 3) | (s[3] - '0'));
			s += 4;
		} else {
			*out++ = *s++;
		}
	}
	*out = '\0';
}

/* Undo a mount option's escapes in place: "\c" is c. */
static void unescape_backslash(char *s)
{
	char *out = s;

	while (*s) {
		if (s[0] == '\\' && s[1])
			s++;
		*out++ = *s++;
	}
	*out = '\0';
}

static bool same_inode(const struct stat *st, dev_t dev, ino_t ino)
{
	return st->st_dev == dev && st->st_ino == ino;
}

/* The options that name an overlay's directories. */
struct layer_key {
	const char *prefix;
	const char *role;
	bool list;		/* a ':'-separated list (lowerdir=) */
};

static const struct layer_key keys[] = {
	{ "lowerdir=", "lowerdir", true },
	{ "lowerdir+=", "lowerdir", false },
	{ "datadir+=", "datadir", false },
	{ "upperdir=", "upperdir", false },
	{ "workdir=", "workdir", false },
};

/* The key of super option @opt, NULL when it names no directory. */
static const struct layer_key *layer_key(const char *opt)
{
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (strncmp(opt, keys[i].prefix, strlen(keys[i].prefix)) == 0)
			return &keys[i];
	return NULL;
}

/*
 * One line of mountinfo (proc(5)): ID PARENT MAJ:MIN ROOT MOUNTPOINT
 * OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS.  Cuts @line up:
 * true for an overlay-like mount, @m and its @superopts (still escaped)
 * filled.  A line that does not parse is passed over: nothing of ours is
 * in it.
 */
static bool overlay_line(char *line, struct mount *m, char **superopts)
{
	char *field[5], *fstype, *opt;

	line[strcspn(line, "\n")] = '\0';
	for (int i = 0; i < 5; i++)
		if (!(field[i] = strsep(&line, " ")))
			return false;
	do {
		opt = strsep(&line, " ");	/* OPTIONS, OPTIONAL... */
	} while (opt && strcmp(opt, "-") != 0);
	fstype = strsep(&line, " ");
	(void)strsep(&line, " ");		/* SOURCE */
	*superopts = strsep(&line, " ");
	if (!opt || !fstype || !*superopts)
		return false;
	unescape_octal(fstype);
	if (!is_overlay_type(fstype))
		return false;
	unescape_octal(field[4]);
	m->mountpoint = field[4];
	m->fstype = fstype;
	return true;
}

/* A directory and those above it, up to the root: (st_dev, st_ino). */
struct dir_chain {
	struct stat *v;
	size_t n;
};

struct dirs_scan {
	const struct hu_dir_ref *d;
	size_t n;
	struct stat *st;	/* of each d[i]; st_ino 0 for a proxy */
	struct dir_chain *up;	/* of each d[i], itself first */
	bool writes;		/* some d[i] is written */
	struct mount m;		/* the mount being read */
	const char *role;	/* the option being read */
	bool found;		/* *use names a use */
	struct hu_mount_use *use;
	/* the first option of a mount that did not resolve */
	struct hu_mount_use hidden_upper;	/* upperdir=, workdir= */
	struct hu_mount_use hidden_lower;	/* lowerdir=, datadir+= */
};

static bool use_set(struct hu_mount_use *u, const struct mount *m,
		    const char *role, const char *layer, const char *option)
{
	*u = (struct hu_mount_use){
		.mountpoint = strdup(m->mountpoint),
		.fstype = strdup(m->fstype),
		.role = strdup(role),
		.layer = layer ? strdup(layer) : NULL,
	};
	if (option && asprintf(&u->option, "%s=%s", role, option) < 0)
		u->option = NULL;
	if (!u->mountpoint || !u->fstype || !u->role ||
	    (layer && !u->layer) || (option && !u->option)) {
		hu_mount_use_free(u);
		return false;
	}
	return true;
}

static bool writes_role(const char *role)
{
	return strcmp(role, "upperdir") == 0 || strcmp(role, "workdir") == 0;
}

/* Directory @fd and those above it, going up with "..", as
 * hu_dirs_apart() does.  0, or -1 out of memory; a directory that cannot
 * be opened or stat'ed ends the chain. */
static int chain_up(int fd, struct dir_chain *c)
{
	int cur = fcntl(fd, F_DUPFD_CLOEXEC, 0), next, rc = 0;
	struct stat st, *bigger;

	*c = (struct dir_chain){ 0 };
	while (cur >= 0 && fstat(cur, &st) == 0) {
		if (c->n && same_inode(&st, c->v[c->n - 1].st_dev,
				       c->v[c->n - 1].st_ino))
			break;	/* the root: ".." is itself */
		bigger = realloc(c->v, (c->n + 1) * sizeof(*c->v));
		if (!bigger) {
			rc = -1;
			break;
		}
		c->v = bigger;
		c->v[c->n++] = st;
		next = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		close(cur);
		cur = next;
	}
	if (cur >= 0)
		close(cur);
	return rc;
}

static bool in_chain(const struct dir_chain *c, size_t from,
		     const struct stat *st)
{
	for (size_t k = from; k < c->n; k++)
		if (same_inode(st, c->v[k].st_dev, c->v[k].st_ino))
			return true;
	return false;
}

/* How directory @i stands to the mount's directory @st (its chain
 * @above, itself first): "" it is it; "directory inside the", "directory
 * holding the" count for an upperdir or workdir only (what the mount
 * writes is d[i], or lies under it: a lower shared beneath is only read),
 * and "holding" for a directory written only (a layer read that holds an
 * upper elsewhere in its tree, a base image holding a container store,
 * is not refused).  NULL when it does not count. */
static const char *dirs_relation(const struct dirs_scan *x, size_t i,
				 const struct stat *st,
				 const struct dir_chain *above)
{
	bool same = x->st[i].st_ino &&
		    same_inode(st, x->st[i].st_dev, x->st[i].st_ino);

	if (same)
		return x->d[i].written || writes_role(x->role) ? "" : NULL;
	if (!writes_role(x->role))
		return NULL;
	/* a proxy stands for a directory to be made in it: "inside" */
	if (in_chain(&x->up[i], x->st[i].st_ino ? 1 : 0, st))
		return "directory inside the ";
	if (x->d[i].written && x->st[i].st_ino && in_chain(above, 1, &x->st[i]))
		return "directory holding the ";
	return NULL;
}

/* Path @path of the option being read: 1 when it names a d[i] in a way
 * that counts (a use filled), 0 when it names none, 2 when it does not
 * resolve; -1 out of memory. */
static int dirs_path(struct dirs_scan *x, const char *path)
{
	struct dir_chain above = { 0 };
	struct stat st;
	int rc = 0, fd;

	if (path[0] != '/' || stat(path, &st) < 0)
		return 2;
	if (writes_role(x->role)) {
		fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0) {
			rc = chain_up(fd, &above);
			close(fd);
		}
	}
	for (size_t i = 0; i < x->n && rc == 0; i++) {
		const char *rel = dirs_relation(x, i, &st, &above);
		char *role;

		if (!rel)
			continue;
		if (asprintf(&role, "%s%s", rel, x->role) < 0) {
			rc = -1;
			break;
		}
		rc = use_set(x->use, &x->m, role, x->d[i].path, NULL) ? 1 : -1;
		free(role);
		x->found = rc == 1;
	}
	free(above.v);
	return rc;
}

/* Remember @path (as the mount wrote it) as the first that did not
 * resolve, where it could hide a use that counts. */
static int dirs_hidden(struct dirs_scan *x, const char *path)
{
	struct hu_mount_use *u = writes_role(x->role) ? &x->hidden_upper :
				 &x->hidden_lower;

	if (u->mountpoint || (!writes_role(x->role) && !x->writes))
		return 0;
	return use_set(u, &x->m, x->role, NULL, path) ? 0 : -1;
}

static int dirs_one(struct dirs_scan *x, char *path)
{
	int rc = dirs_path(x, path);

	return rc == 2 ? dirs_hidden(x, path) : rc;
}

/* upperdir=, workdir=, lowerdir+=, datadir+=: as given, or (older
 * kernels) with the mounter's '\' escapes still in. */
static int dirs_single(struct dirs_scan *x, char *path)
{
	char *plain;
	int rc = dirs_path(x, path);

	if (rc != 2 || !strchr(path, '\\'))
		return rc == 2 ? dirs_hidden(x, path) : rc;
	plain = strdup(path);
	if (!plain)
		return -1;
	unescape_backslash(plain);
	rc = dirs_path(x, plain);
	free(plain);
	return rc == 2 ? dirs_hidden(x, path) : rc;
}

static int dirs_list(struct dirs_scan *x, char *list)
{
	char *start = list;
	int rc;

	for (char *p = list;; p++) {
		if (*p == '\\' && p[1]) {
			p++;
			continue;
		}
		if (*p != ':' && *p)
			continue;
		bool last = !*p;

		*p = '\0';
		unescape_backslash(start);
		/* "::" before the data-only layers: an empty entry */
		if (*start && (rc = dirs_one(x, start)) != 0)
			return rc;
		if (last)
			return 0;
		start = p + 1;
	}
}

static int dirs_line(struct dirs_scan *x, char *line)
{
	char *superopts, *opt;
	int rc = 0;

	if (!overlay_line(line, &x->m, &superopts))
		return 0;
	while (rc == 0 && (opt = strsep(&superopts, ","))) {
		const struct layer_key *k = layer_key(opt);
		char *value;

		if (!k)
			continue;
		value = opt + strlen(k->prefix);
		unescape_octal(value);
		x->role = k->role;
		rc = k->list ? dirs_list(x, value) : dirs_single(x, value);
	}
	return rc;
}

/* What the mountinfo left hidden, asked of the kernel: 1 with *@use, 0,
 * 2 with *@use (unknown).  Takes the hidden uses. */
static int dirs_unhide(struct dirs_scan *x, int (*locked)(int fd))
{
	struct hu_mount_use *use = x->use;

	if (x->hidden_upper.mountpoint) {
		for (size_t i = 0; i < x->n; i++) {
			int rc;

			if (!x->st[i].st_ino)
				continue;
			rc = locked(x->d[i].fd);
			if (rc == 0)
				continue;
			*use = x->hidden_upper;
			x->hidden_upper = (struct hu_mount_use){ 0 };
			if (rc < 0)
				return 2;
			/* which of them, the kernel does not say */
			free(use->role);
			free(use->layer);
			use->role = strdup("upperdir or workdir");
			use->layer = strdup(x->d[i].path);
			return use->role && use->layer ? 1 : -1;
		}
	}
	if (x->hidden_lower.mountpoint) {
		*use = x->hidden_lower;
		x->hidden_lower = (struct hu_mount_use){ 0 };
		return 2;
	}
	return 0;
}

int hu_mountinfo_dirs(FILE *f, const char *what, const struct hu_dir_ref *d,
		      size_t n, int (*locked)(int fd),
		      struct hu_mount_use *use, struct hu_error *e)
{
	struct dirs_scan x = { .d = d, .n = n, .use = use };
	char *line = NULL;
	size_t cap = 0;
	int rc = 0;

	*use = (struct hu_mount_use){ 0 };
	x.st = calloc(n ? n : 1, sizeof(*x.st));
	x.up = calloc(n ? n : 1, sizeof(*x.up));
	if (!x.st || !x.up) {
		free(x.st);
		free(x.up);
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		x.writes |= d[i].written;
		if (!d[i].proxy && fstat(d[i].fd, &x.st[i]) < 0)
			rc = hu_error_set(e, errno, d[i].path, "cannot stat");
		else if (chain_up(d[i].fd, &x.up[i]) < 0)
			rc = hu_error_set(e, ENOMEM, NULL, "out of memory");
	}
	errno = 0;
	while (rc == 0 && !x.found && getline(&line, &cap, f) >= 0)
		if (dirs_line(&x, line) < 0)
			rc = hu_error_set(e, ENOMEM, NULL, "out of memory");
	if (rc == 0 && ferror(f))
		rc = hu_error_set(e, errno ? errno : EIO, what,
				  "cannot read");
	if (rc == 0 && (rc = x.found ? 1 : dirs_unhide(&x, locked)) < 0)
		hu_error_set(e, ENOMEM, NULL, "out of memory");
	free(line);
	free(x.st);
	for (size_t i = 0; i < n; i++)
		free(x.up[i].v);
	free(x.up);
	hu_mount_use_free(&x.hidden_upper);
	hu_mount_use_free(&x.hidden_lower);
	if (rc < 0)
		hu_mount_use_free(use);
	return rc;
}

int hu_dirs_in_use(const struct hu_dir_ref *d, size_t n,
		   struct hu_mount_use *use, struct hu_error *e)
{
	FILE *f = fopen(MOUNTINFO, "re");
	int rc;

	*use = (struct hu_mount_use){ 0 };
	if (!f)
		return hu_error_set(e, errno, MOUNTINFO,
				    "cannot tell which layers are mounted");
	rc = hu_mountinfo_dirs(f, MOUNTINFO, d, n, hu_overlay_locked, use,
			       e);
	fclose(f);
	return rc;
}

/* The layers, the top first, and the workdir, into @d, as read: a mount
 * counts only where it writes them (its upperdir or workdir).  Their
 * count. */
static size_t read_dirs(const struct hu_stack *s, const char *workdir,
			int workfd, struct hu_dir_ref *d)
{
	size_t n = 0;

	for (size_t k = s->n; k-- > 0;)
		if (!s->layers[k].pindex)	/* a file, no directory */
			d[n++] = (struct hu_dir_ref){ s->layers[k].fd,
				s->layers[k].path, "layer", false, false };
	if (workfd >= 0)
		d[n++] = (struct hu_dir_ref){ workfd, workdir, "workdir",
					      false, false };
	return n;
}

int hu_warn_mounted(const struct hu_stack *s, const char *workdir,
		    int workfd, const char *effect, const struct hu_report *r,
		    struct hu_error *e)
{
	struct hu_mount_use use = { 0 };
	struct hu_dir_ref *d = calloc(s->n + 1, sizeof(*d));
	int rc;

	if (!d)
		return hu_error_set(e, ENOMEM, NULL, "out of memory");
	rc = hu_dirs_in_use(d, read_dirs(s, workdir, workfd, d), &use, e);
	if (rc == 1)
		hu_report_warn(r, 0, use.mountpoint, NULL, "%s is the %s of "
			       "the %s mounted here: %s", use.layer, use.role,
			       use.fstype, effect);
	hu_mount_use_free(&use);
	free(d);
	return rc < 0 ? -1 : 0;
}

/*
 * Is anything mounted beneath directory @dir (an absolute path as the
 * kernel writes one, never a user's), or is the mountinfo unreadable?
 * Here, unlike the overlay options above, both sides are the kernel's
 * own spelling of a path in this mount namespace (d_path: the fd link
 * and the MOUNTPOINT field), so they compare as strings.  A line that
 * does not parse counts as a mount beneath: the answer only ever turns
 * an optimisation off.
 */
bool hu_mountinfo_beneath(FILE *f, const char *dir)
{
	size_t len = strcmp(dir, "/") == 0 ? 0 : strlen(dir);
	char *line = NULL, *rest, *mountpoint = NULL;
	size_t cap = 0;
	bool beneath = false;

	while (!beneath && getline(&line, &cap, f) >= 0) {
		rest = line;
		rest[strcspn(rest, "\n")] = '\0';
		for (int i = 0; i < 5 && rest; i++)
			mountpoint = strsep(&rest, " ");
		if (!rest) {
			beneath = true;
			break;
		}
		unescape_octal(mountpoint);
		beneath = strncmp(mountpoint, dir, len) == 0 &&
			  mountpoint[len] == '/' && mountpoint[len + 1];
	}
	free(line);
	return beneath || ferror(f);
}

/* The path the kernel gives directory @fd (malloc'd), or NULL. */
static char *fd_dir_path(int fd)
{
	char link[HU_FDPATH_MAX], *buf = NULL, *bigger;
	size_t size = 256;
	ssize_t n;

	hu_fdpath(link, fd, NULL);
	for (;;) {
		bigger = realloc(buf, size);
		if (!bigger)
			break;
		buf = bigger;
		n = readlink(link, buf, size);
		if (n < 0)
			break;
		if ((size_t)n < size) {
			buf[n] = '\0';
			return buf;
		}
		size *= 2;
	}
	free(buf);
	return NULL;
}

bool hu_mount_beneath(int fd)
{
	char *dir = fd_dir_path(fd);
	FILE *f;
	bool beneath;

	if (!dir)
		return true;
	/* "/gone (deleted)", or not a path of this namespace at all */
	if (dir[0] != '/' || strstr(dir, " (deleted)")) {
		free(dir);
		return true;
	}
	f = fopen(MOUNTINFO, "re");
	beneath = !f || hu_mountinfo_beneath(f, dir);
	if (f)
		fclose(f);
	free(dir);
	return beneath;
}

void hu_mount_use_free(struct hu_mount_use *u)
{
	free(u->mountpoint);
	free(u->fstype);
	free(u->role);
	free(u->layer);
	free(u->option);
	*u = (struct hu_mount_use){ 0 };
}
