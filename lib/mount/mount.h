/* SPDX-License-Identifier: MIT */
/* What the mount modules share (mount.c, mountcheck.c, mountopt.c). */
#ifndef HUNION_MOUNT_H
#define HUNION_MOUNT_H

#include "hunion.h"

/* The length of the next option of @s, up to the ',' that ends it
 * (escapes and quotes kept; an unclosed quote runs to the end). */
size_t hu_mountopt_len(const char *s);
/* The next ':'-separated path of @p (escapes kept), NUL-terminated in
 * place; *@rest after it, *@last when it ends the value. */
char *hu_mountopt_next_path(char *p, char **rest, bool *last);
/* Remove the '\' escapes of @s, in place. */
void hu_mountopt_unescape(char *s);
/* The bytes @path takes with every byte of @special escaped by '\'. */
size_t hu_mountopt_escaped_len(const char *path, const char *special);
/* Write @path escaped into @out (room for hu_mountopt_escaped_len() + 1);
 * returns the end (the NUL). */
char *hu_mountopt_escape(char *out, const char *path, const char *special);
/* The names of mount flags @flags as options ("ro,nosuid"; "" for none),
 * for fuse-overlayfs, which takes them in -o. */
const char *hu_mount_flag_opts(unsigned long flags, char *buf, size_t len);
/* "MS_RDONLY|MS_NOSUID", or "0", into @buf. */
const char *hu_mount_flag_names(unsigned long flags, char *buf, size_t len);

/* The directories of a mount, open, with what they are. */
struct hu_mount_dirs {
	const struct hu_stack *s;
	size_t nlower;		/* layers [0, nlower) are lowers */
	const struct hu_layer *upper;	/* NULL when lower-only */
	int workfd;		/* -1: lower-only, or (dry) not made yet */
	int workparent;		/* the workdir's parent, -1 when none */
	const char *workname;	/* its name in @workparent */
	const char *workdir;	/* as the user gave it, or made beside */
	int mntfd;		/* the mount point (O_PATH) */
	const char *mountpoint;
};

/* mountfs.c: the filesystem for stack @s (p->fs, p->fstype; refusals
 * naming the layer and what to do), its needs (p->redirect_dir, metacopy,
 * userxattr), fuse-overlayfs's path (p->helper). */
int hu_mount_choose(struct hu_mount_plan *p, const struct hu_stack *s,
		    const struct hu_mount_opts *o, struct hu_error *e);
/* The option string into p->data: lowerdir= of @paths[0, @nlower) top
 * first, upperdir= @upper (NULL: none), workdir= p->workdir, what the
 * layers need, @fs_options last. */
int hu_mount_build_data(struct hu_mount_plan *p, char **paths,
			size_t nlower, const char *upper,
			const char *fs_options, struct hu_error *e);

/* The preflight of mountcheck.c: each returns 0 or -1 with @e. */
int hu_mount_check_nesting(const struct hu_mount_dirs *d, struct hu_error *e);
int hu_mount_check_in_use(const struct hu_mount_dirs *d, bool force,
			  const struct hu_mount_opts *o, struct hu_error *e);
int hu_mount_check_upper_fs(const struct hu_mount_dirs *d, bool userxattr,
			    const struct hu_mount_opts *o, struct hu_error *e);
int hu_mount_clean_workdir(const struct hu_mount_dirs *d,
			   const struct hu_mount_opts *o, struct hu_error *e);
int hu_mount_check_fsck(const struct hu_mount_dirs *d,
			const struct hu_mount_opts *o, struct hu_error *e);
/* Tell a step through o->notes. */
void hu_mount_note(const struct hu_mount_opts *o, const char *what,
		   const char *path);

#endif /* HUNION_MOUNT_H */
