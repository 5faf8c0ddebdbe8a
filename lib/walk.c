/* SPDX-License-Identifier: MIT */
/* A depth-first walk of the merged view: sorted, directories first, one
 * open directory per level of depth. */
#include <errno.h>

#include "internal.h"

static int walk_dir(struct hu_vdir *d, const struct hu_walk_ops *ops,
		    void *ctx, struct hu_error *e)
{
	const struct hu_ventry *ents;
	size_t n;

	if (hu_vdir_list(d, &ents, &n, e) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		const struct hu_ventry *ent = &ents[i];
		struct hu_vdir *child;
		int rc = ops->entry(ctx, d, ent, e);

		if (rc < 0)
			return -1;
		if (rc == 0 || !S_ISDIR(ent->st.st_mode))
			continue;
		if (hu_vdir_open_child(d, ent, &child, e) < 0)
			return -1;
		rc = walk_dir(child, ops, ctx, e);
		if (rc == 0 && ops->leave)
			rc = ops->leave(ctx, child, ent, e);
		hu_vdir_close(child);
		if (rc < 0)
			return -1;
	}
	return 0;
}

int hu_view_walk(const struct hu_stack *s, const struct hu_walk_ops *ops,
		 void *ctx, struct hu_error *e)
{
	struct hu_vdir *root;
	int rc;

	if (hu_vdir_open_root(s, &root, e) < 0)
		return -1;
	rc = ops->enter_root ? ops->enter_root(ctx, root, e) : 0;
	if (rc == 0)
		rc = walk_dir(root, ops, ctx, e);
	if (rc == 0 && ops->leave)
		rc = ops->leave(ctx, root, NULL, e);
	hu_vdir_close(root);
	return rc;
}
