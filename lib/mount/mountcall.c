/* SPDX-License-Identifier: MIT */
/*
 * The mount itself: mount(2); or, for overlay options longer than the one
 * page mount(2) copies (a few hundred lowers), the new mount API (fsopen,
 * fsconfig, fsmount, move_mount); or fuse-overlayfs run as a child.  What
 * the calls are, printed exactly (-n, -v); and a refusal told as a
 * sentence with its likely cause and the kernel's own reason, which the
 * kernel writes to its log (or the fsopen fd's), not to errno.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/klog.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "mount/mount.h"

/* @s as a C string literal (mount(2) form) or a shell word (fuse). */
static void quote_c(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\%03o", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void quote_sh(FILE *f, const char *s)
{
	if (*s && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTU"
			 "VWXYZ0123456789-_./=:,+@%") == strlen(s)) {
		fputs(s, f);
		return;
	}
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'')
			fputs("'\\''", f);
		else
			fputc(*s, f);
	}
	fputc('\'', f);
}

/* ---- the new mount API: its calls ------------------------------------ */

typedef int (*config_fn)(void *ctx, unsigned int cmd, const char *key,
			 const char *value);

/* mount(2)'s flags that set the superblock, as fsconfig() flags. */
static const struct {
	unsigned long flag;
	const char *name;
} sb_flags[] = {
	{ MS_RDONLY, "ro" },		{ MS_SYNCHRONOUS, "sync" },
	{ MS_DIRSYNC, "dirsync" },	{ MS_LAZYTIME, "lazytime" },
};

/* mount(2)'s flags that set the mount, as fsmount()'s attributes. */
static unsigned int mount_attrs(unsigned long flags)
{
	unsigned int a = 0;

	if (flags & MS_RDONLY)
		a |= MOUNT_ATTR_RDONLY;
	if (flags & MS_NOSUID)
		a |= MOUNT_ATTR_NOSUID;
	if (flags & MS_NODEV)
		a |= MOUNT_ATTR_NODEV;
	if (flags & MS_NOEXEC)
		a |= MOUNT_ATTR_NOEXEC;
	if (flags & MS_NODIRATIME)
		a |= MOUNT_ATTR_NODIRATIME;
	if (flags & MS_NOATIME)
		a |= MOUNT_ATTR_NOATIME;
	else if (flags & MS_STRICTATIME)
		a |= MOUNT_ATTR_STRICTATIME;
	return a;
}

static const char *attr_names(unsigned int a, char *buf, size_t len)
{
	static const struct { unsigned int a; const char *name; } names[] = {
		{ MOUNT_ATTR_RDONLY, "MOUNT_ATTR_RDONLY" },
		{ MOUNT_ATTR_NOSUID, "MOUNT_ATTR_NOSUID" },
		{ MOUNT_ATTR_NODEV, "MOUNT_ATTR_NODEV" },
		{ MOUNT_ATTR_NOEXEC, "MOUNT_ATTR_NOEXEC" },
		{ MOUNT_ATTR_NODIRATIME, "MOUNT_ATTR_NODIRATIME" },
		{ MOUNT_ATTR_NOATIME, "MOUNT_ATTR_NOATIME" },
		{ MOUNT_ATTR_STRICTATIME, "MOUNT_ATTR_STRICTATIME" },
	};
	size_t at = 0;

	snprintf(buf, len, "0");
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if ((a & names[i].a) == names[i].a && at < len)
			at += snprintf(buf + at, len - at, "%s%s",
				       at ? "|" : "", names[i].name);
	return buf;
}

/* Each lower of lowerdir= value @v (top first, escaped): "lowerdir+"
 * takes one path as it is, escapes undone.  Cuts @v up. */
static int each_lower(char *v, config_fn fn, void *ctx)
{
	bool last = false;
	char *rest;
	int rc = 0;

	while (!last && rc == 0) {
		char *path = hu_mountopt_next_path(v, &rest, &last);

		hu_mountopt_unescape(path);
		rc = fn(ctx, FSCONFIG_SET_STRING, "lowerdir+", path);
		v = rest;
	}
	return rc;
}

/*
 * The fsconfig() calls that say what mount(2) with @p->data would: the
 * source, each option split as the kernel splits the string (key and
 * value as written, so upperdir= and workdir= keep the escapes overlayfs
 * undoes), lowerdir= as one "lowerdir+" per layer, then the superblock
 * flags.  One walk for the calls and for their text.
 */
static int each_fsconfig(const struct hu_mount_plan *p, config_fn fn,
			 void *ctx)
{
	char *data = strdup(p->data), *s;
	int rc;

	if (!data)
		return -ENOMEM;
	rc = fn(ctx, FSCONFIG_SET_STRING, "source", p->source);
	for (s = data; *s && rc == 0;) {
		size_t n = hu_mountopt_len(s);
		char *next = s[n] ? s + n + 1 : s + n, *eq;

		s[n] = '\0';
		eq = strchr(s, '=');
		if (eq)
			*eq = '\0';
		if (!*s)
			rc = 0;
		else if (!eq)
			rc = fn(ctx, FSCONFIG_SET_FLAG, s, NULL);
		else if (!strcmp(s, "lowerdir"))
			rc = each_lower(eq + 1, fn, ctx);
		else
			rc = fn(ctx, FSCONFIG_SET_STRING, s, eq + 1);
		s = next;
	}
	for (size_t i = 0; i < sizeof(sb_flags) / sizeof(sb_flags[0]); i++)
		if (rc == 0 && (p->flags & sb_flags[i].flag))
			rc = fn(ctx, FSCONFIG_SET_FLAG, sb_flags[i].name,
				NULL);
	free(data);
	return rc;
}

static int config_text(void *ctx, unsigned int cmd, const char *key,
		       const char *value)
{
	FILE *f = ctx;

	fputs(cmd == FSCONFIG_SET_FLAG ? "fsconfig(fd, FSCONFIG_SET_FLAG, " :
	      "fsconfig(fd, FSCONFIG_SET_STRING, ", f);
	quote_c(f, key);
	if (value) {
		fputs(", ", f);
		quote_c(f, value);
	}
	fputs(")\n", f);
	return 0;
}

static int fsconfig_text(FILE *f, const struct hu_mount_plan *p)
{
	char attrs[256];

	fputs("fd = fsopen(", f);
	quote_c(f, p->fstype);
	fputs(", FSOPEN_CLOEXEC)\n", f);
	if (each_fsconfig(p, config_text, f) < 0)
		return -1;
	fprintf(f, "fsconfig(fd, FSCONFIG_CMD_CREATE)\n"
		"mfd = fsmount(fd, FSMOUNT_CLOEXEC, %s)\n"
		"move_mount(mfd, \"\", AT_FDCWD, ", attr_names(mount_attrs(
		p->flags), attrs, sizeof(attrs)));
	quote_c(f, p->target);
	fputs(", MOVE_MOUNT_F_EMPTY_PATH)", f);
	return 0;
}

char *hu_mount_plan_text(const struct hu_mount_plan *p)
{
	char *text = NULL, flags[256];
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return NULL;
	if (p->fs == HU_MOUNT_FUSE) {
		quote_sh(f, p->helper);
		fputs(" -o ", f);
		quote_sh(f, p->data);
		fputc(' ', f);
		quote_sh(f, p->target);
	} else if (p->fsconfig) {
		if (fsconfig_text(f, p) < 0) {
			fclose(f);
			free(text);
			return NULL;
		}
	} else {
		fputs("mount(", f);
		quote_c(f, p->source);
		fputs(", ", f);
		quote_c(f, p->target);
		fputs(", ", f);
		quote_c(f, p->fstype);
		fprintf(f, ", %s, ", hu_mount_flag_names(p->flags, flags,
							 sizeof(flags)));
		quote_c(f, p->data);
		fputc(')', f);
	}
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}

/* ---- the kernel's log ------------------------------------------------- */

/* /dev/kmsg, read from its end: what the kernel logs after this point is
 * what it said about our mount.  -1 when it cannot be read (non-root
 * with dmesg_restrict). */
static int kmsg_open_end(void)
{
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd >= 0 && lseek(fd, 0, SEEK_END) < 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* The text of one /dev/kmsg record ("6,123,456,-;text\n more"). */
static void kmsg_text(const char *rec, char *out, size_t len)
{
	const char *t = strchr(rec, ';');

	t = t ? t + 1 : rec;
	snprintf(out, len, "%.*s", (int)strcspn(t, "\n"), t);
}

/* The last line the kernel logged since @fd was opened; or, without
 * @fd, the last line of its log that names @fstype (what dmesg shows:
 * syslog(2)); "" when there is none. */
static void kernel_said(int fd, const char *fstype, char *out, size_t len)
{
	char rec[8192];
	ssize_t n;

	out[0] = '\0';
	if (fd >= 0) {
		/* each read() returns one record; EAGAIN at the end, EPIPE
		 * when records were overwritten meanwhile */
		while ((n = read(fd, rec, sizeof(rec) - 1)) > 0 ||
		       (n < 0 && errno == EPIPE)) {
			if (n <= 0)
				continue;
			rec[n] = '\0';
			kmsg_text(rec, out, len);
		}
		return;
	}
	int size = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
	char *buf, *line, *save = NULL;

	if (size <= 0 || !(buf = malloc(size + 1)))
		return;
	n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf, size);
	if (n > 0) {
		buf[n] = '\0';
		for (line = strtok_r(buf, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save)) {
			if (!strstr(line, fstype))
				continue;
			/* "<4>[ 123.456] text" */
			line = strchr(line, ']') ? strchr(line, ']') + 1 :
			       line;
			line += strspn(line, " ");
			snprintf(out, len, "%s", line);
		}
	}
	free(buf);
}

/* The likely cause of errno @err from mount(2) of @p. */
static const char *likely_cause(const struct hu_mount_plan *p, int err)
{
	switch (err) {
	case EPERM:
	case EACCES:
		return "only root may mount with the kernel (as another user, "
		       "-t fuse mounts through fuse-overlayfs)";
	case ENODEV:
		return "this kernel has no such filesystem";
	case EINVAL:
		return "the kernel refused the options or the layers";
	case ENOENT:
	case ENOTDIR:
		return "a layer, the workdir or the mount point was moved or "
		       "removed meanwhile";
	case ELOOP:
		return "the layers overlap, or one is a layer of a mounted "
		       "overlay";
	case EBUSY:
		return "the upper or the workdir is in use by another mount";
	case EOPNOTSUPP:
		return "the upper's filesystem lacks what overlayfs needs "
		       "(xattrs, d_type, O_TMPFILE, RENAME_WHITEOUT)";
	case EROFS:
		return "the upper's filesystem is read-only (-o ro mounts all "
		       "layers as lowers)";
	case ESTALE:
		return "the layers' index or origin records name other layers "
		       "(from a mount with index=on)";
	case ENOMEM:
		return "out of memory";
	default:
		return p->fs == HU_MOUNT_UNION ? "the union filesystem "
		       "refused it" : "overlayfs refused it";
	}
}

static int mount_kernel(const struct hu_mount_plan *p, struct hu_error *e)
{
	int log = kmsg_open_end(), err;
	char said[160];

	if (mount(p->source, p->target, p->fstype, p->flags, p->data) == 0) {
		if (log >= 0)
			close(log);
		return 0;
	}
	err = errno;
	kernel_said(log, p->fstype, said, sizeof(said));
	if (log >= 0)
		close(log);
	return hu_error_set(e, err, p->target, "cannot mount %s: %s%s%s%s",
			    p->fstype, likely_cause(p, err),
			    said[0] ? " (kernel: " : "", said,
			    said[0] ? ")" : "");
}

/* ---- the new mount API: the calls made ------------------------------- */

struct api {
	int fd;			/* fsopen()'s */
	bool lower_seen;	/* a "lowerdir+" was given */
	bool no_lower_add;	/* the kernel knows no "lowerdir+" */
	int err;
	char what[160];		/* the fsconfig() refused, as key=value */
};

static int config_call(void *ctx, unsigned int cmd, const char *key,
		       const char *value)
{
	struct api *a = ctx;
	bool first_lower = !a->lower_seen && !strcmp(key, "lowerdir+");

	a->lower_seen |= first_lower;
	if (fsconfig(a->fd, cmd, key, value, 0) == 0)
		return 0;
	a->err = errno;
	/* overlayfs before Linux 6.8: an unknown parameter */
	a->no_lower_add = first_lower && errno == EINVAL;
	snprintf(a->what, sizeof(a->what), "fsconfig %s%s%s", key,
		 value ? "=" : "", value ? value : "");
	return -1;
}

/* The last error the kernel logged in the filesystem context of @fd
 * ("e overlay: ..." records); "" when there is none. */
static void context_said(int fd, char *out, size_t len)
{
	char msg[1024];
	ssize_t n;

	out[0] = '\0';
	while ((n = read(fd, msg, sizeof(msg) - 1)) > 0) {
		msg[n] = '\0';
		if (msg[0] == 'e' && msg[1] == ' ')
			snprintf(out, len, "%.*s", (int)strcspn(msg + 2, "\n"),
				 msg + 2);
	}
}

/* Options mount(2) cannot take, and a kernel without what takes them. */
static int too_long(const struct hu_mount_plan *p, const char *lacks,
		    struct hu_error *e)
{
	return hu_error_set(e, 0, p->target, "cannot mount %s: the mount "
			    "options take %zu bytes, more than the %ld of "
			    "mount(2), and this kernel has no %s to take them: "
			    "shorter paths or fewer layers", p->fstype,
			    strlen(p->data), sysconf(_SC_PAGESIZE) - 1, lacks);
}

static int mount_fsconfig(const struct hu_mount_plan *p, struct hu_error *e)
{
	struct api a = { .fd = -1 };
	int log = kmsg_open_end(), mfd = -1, rc = -1;
	const char *step;
	char said[160];

	a.fd = fsopen(p->fstype, FSOPEN_CLOEXEC);
	if (a.fd < 0) {
		a.err = errno;
		step = "fsopen";
	} else if (each_fsconfig(p, config_call, &a) < 0) {
		step = a.what;
	} else if (fsconfig(a.fd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
		a.err = errno;
		step = "fsconfig create";
	} else if ((mfd = fsmount(a.fd, FSMOUNT_CLOEXEC,
				  mount_attrs(p->flags))) < 0) {
		a.err = errno;
		step = "fsmount";
	} else if (move_mount(mfd, "", AT_FDCWD, p->target,
			      MOVE_MOUNT_F_EMPTY_PATH) < 0) {
		a.err = errno;
		step = "move_mount";
	} else {
		rc = 0;
		goto out;
	}
	if (a.fd < 0 && a.err == ENOSYS) {
		too_long(p, "fsopen(2) (Linux 5.2)", e);
		goto out;
	}
	if (a.no_lower_add) {
		too_long(p, "lowerdir+ (Linux 6.8)", e);
		goto out;
	}
	if (!a.err)
		a.err = ENOMEM;		/* each_fsconfig()'s own */
	said[0] = '\0';
	if (a.fd >= 0)
		context_said(a.fd, said, sizeof(said));
	if (!said[0])
		kernel_said(log, p->fstype, said, sizeof(said));
	hu_error_set(e, a.err, p->target, "cannot mount %s: %s (%s%s%s)",
		     p->fstype, likely_cause(p, a.err), step,
		     said[0] ? "; kernel: " : "", said);
out:
	if (mfd >= 0)
		close(mfd);
	if (a.fd >= 0)
		close(a.fd);
	if (log >= 0)
		close(log);
	return rc;
}

/* The last non-empty line of @buf. */
static void last_line(char *buf, char *out, size_t len)
{
	char *line, *save = NULL;

	out[0] = '\0';
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save))
		if (line[strspn(line, " \t")])
			snprintf(out, len, "%s", line);
}

/* fuse-overlayfs daemonizes once mounted: its exit status says if the
 * mount is there, its standard error why not. */
static int mount_fuse(const struct hu_mount_plan *p, struct hu_error *e)
{
	char *argv[] = { p->helper, "-o", p->data, p->target, NULL };
	char out[4096], said[160];
	size_t got = 0;
	ssize_t n;
	int pipefd[2], status;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return hu_error_set(e, errno, NULL, "cannot make a pipe");
	pid = fork();
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return hu_error_set(e, errno, NULL, "cannot start %s",
				    p->helper);
	}
	if (pid == 0) {
		/* the daemon keeps no end of our pipe: its stderr would
		 * hold our read open until it exits */
		dup2(pipefd[1], STDERR_FILENO);
		execv(p->helper, argv);
		dprintf(STDERR_FILENO, "cannot run %s: %s\n", p->helper,
			strerror(errno));
		_exit(127);
	}
	close(pipefd[1]);
	while ((n = read(pipefd[0], out + got, sizeof(out) - 1 - got)) > 0 ||
	       (n < 0 && errno == EINTR)) {
		if (n > 0)
			got += n;
		if (got == sizeof(out) - 1)
			got = 0;	/* keep the end */
	}
	out[got] = '\0';
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return hu_error_set(e, errno, NULL, "cannot wait for "
					    "%s", p->helper);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	last_line(out, said, sizeof(said));
	return hu_error_set(e, 0, p->target, "cannot mount: fuse-overlayfs "
			    "failed (%s %d)%s%s", WIFEXITED(status) ?
			    "exit" : "signal", WIFEXITED(status) ?
			    WEXITSTATUS(status) : WTERMSIG(status),
			    said[0] ? ": " : "", said);
}

/* The workdir a failed mount's preflight made goes again (with what the
 * kernel may have made in it). */
static void remove_workdir(const struct hu_mount_plan *p)
{
	char *dir = strdup(p->workdir);
	const char *name = strrchr(p->workdir, '/') + 1;
	int fd;

	if (!dir)
		return;
	dir[name - p->workdir] = '\0';
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		(void)hu_rmtree(fd, name);
		close(fd);
	}
	free(dir);
}

int hu_mount_run(const struct hu_mount_plan *p, struct hu_error *e)
{
	int rc = p->fs == HU_MOUNT_FUSE ? mount_fuse(p, e) :
		 p->fsconfig ? mount_fsconfig(p, e) : mount_kernel(p, e);

	if (rc < 0 && p->made_workdir)
		remove_workdir(p);
	return rc;
}
