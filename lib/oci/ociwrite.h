/* SPDX-License-Identifier: MIT */
/*
 * What the modules that write OCI image layouts share (ociwrite.c,
 * ociindex.c, ociimage.c, ocireuse.c, ocigc.c): a layout opened for writing and its
 * two locks, blobs written under a temporary name and renamed in, and the
 * JSON documents of an image.
 *
 * The locks are flock(2)s on two directories of the layout, so nothing
 * is added to it and a killed holder releases them:
 *   DIR          shared by every hunion writer from open to close,
 *                exclusive by `oci gc`: gc never runs while a writer has
 *                blobs it has not referenced yet (nor their temporaries);
 *   DIR/blobs    exclusive while index.json is read, changed and
 *                replaced (a tag written, moved or removed; gc):
 *                concurrent writers keep every tag.
 */
#ifndef HUNION_OCI_OCIWRITE_H
#define HUNION_OCI_OCIWRITE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hunion.h"
#include "oci/oci.h"

/* The prefix of a writer's temporary files, in DIR and DIR/blobs/sha256:
 * what gc removes as a killed writer's leftover. */
#define HU_OCIW_TMP ".hunion-tmp-"

#define HU_OCI_MT_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define HU_OCI_MT_INDEX "application/vnd.oci.image.index.v1+json"
#define HU_OCI_MT_CONFIG "application/vnd.oci.image.config.v1+json"
#define HU_DOCKER_MT_MANIFEST \
	"application/vnd.docker.distribution.manifest.v2+json"
#define HU_DOCKER_MT_LIST \
	"application/vnd.docker.distribution.manifest.list.v2+json"
#define HU_OCI_REF_NAME "org.opencontainers.image.ref.name"

struct hu_ociw_layout {
	char *path;		/* DIR as given */
	int dirfd;		/* DIR: the gc lock */
	int blobs_fd;		/* DIR/blobs: the index lock */
	int sha_fd;		/* DIR/blobs/sha256 */
	bool made_dir;		/* DIR made by this open */
	bool made_layout;	/* DIR had no oci-layout: made by this open */
};

/* Open @dir (made, with what a layout holds, when @create and missing)
 * and take its gc lock (LOCK_SH for a writer, LOCK_EX for gc; 0 for a
 * reader: none).  It waits for the lock, @waiting (may be NULL) told
 * once if it must; a signal ends the wait (hu_interrupt). */
int hu_ociw_layout_open(struct hu_ociw_layout *l, const char *dir,
			bool create, int gc_lock,
			void (*waiting)(void *ctx, const char *dir),
			void *ctx, struct hu_error *e);
/* Wait for flock(@op) on @fd (naps that a signal ends: flock(2) itself
 * would be restarted after the front end's handler, SA_RESTART). */
int hu_ociw_lock_wait(int fd, int op, const char *path,
		      void (*waiting)(void *ctx, const char *dir), void *ctx,
		      struct hu_error *e);
void hu_ociw_layout_close(struct hu_ociw_layout *l);
/* After a write is committed, before the close: when no other writer nor
 * gc holds the layout (its gc lock taken exclusive without waiting), the
 * temporaries in it are killed writers' (each writer makes its own under
 * the shared lock only): moved aside (aside.c), to be removed after the
 * run's work, so that no writer waits for their removal.  Else, or when
 * that fails, left for the next writer or `oci gc`.  A writer's lock is
 * dropped by the try (flock(2) converts by dropping): call it last. */
void hu_ociw_layout_tidy(struct hu_ociw_layout *l);
/* Close @l after a failed write: a layout this open made (DIR, or what a
 * layout holds in an empty DIR) is removed again, when no other writer
 * holds it (its gc lock taken exclusive without waiting) and its
 * index.json is still the empty one (no tag written into it); else it
 * is left as it is, for `oci gc`. */
void hu_ociw_layout_discard(struct hu_ociw_layout *l);

/* A blob being written: its temporary file in DIR/blobs/sha256. */
struct hu_ociw_blob {
	int fd;
	char tmp[64];
};
int hu_ociw_blob_begin(struct hu_ociw_layout *l, struct hu_ociw_blob *b,
		       struct hu_error *e);
/* fsync it and rename it to @digest's hex ("sha256:<hex>"), unless a
 * blob of that size is there already (content-addressed: kept); the
 * directory fsync'd.  Closes the blob either way. */
int hu_ociw_blob_commit(struct hu_ociw_layout *l, struct hu_ociw_blob *b,
			const char *digest, uint64_t size,
			struct hu_error *e);
void hu_ociw_blob_abort(struct hu_ociw_layout *l, struct hu_ociw_blob *b);
/* A whole blob from memory; @digest gets its "sha256:<hex>". */
int hu_ociw_blob_put(struct hu_ociw_layout *l, const void *data, size_t len,
		     char digest[72], struct hu_error *e);
/* Write @text as @name of @dirfd: a temporary, fsync'd, renamed over
 * (@noreplace: kept when @name exists), the directory fsync'd. */
int hu_ociw_replace_file(int dirfd, const char *name, const char *text,
			 bool noreplace, const char *path,
			 struct hu_error *e);

/* ---- index.json (ociindex.c) ------------------------------------------ */

/* Take and drop the index lock. */
int hu_ociw_index_lock(struct hu_ociw_layout *l, struct hu_error *e);
void hu_ociw_index_unlock(struct hu_ociw_layout *l);
/* index.json as a writer holds it: the object, changed and written back
 * whole (other tools' fields and entries kept as they are), and its
 * entries as the reader parses them (parse.c), in the same order. */
struct hu_ociw_index {
	json_t *j;
	struct oci_index x;
};
/* Parse @len bytes of index.json of the layout @path: an index with no
 * "manifests" (`umoci init` writes one) has none; @flags as
 * oci_index_entries() takes them (OCI_INDEX_KEEP_UNREADABLE: a writer
 * keeps the entries of other tools it cannot read). */
int hu_ociw_index_parse(const char *buf, size_t len, const char *path,
			unsigned flags, struct hu_ociw_index *ix,
			struct hu_error *e);
/* Read and parse index.json. */
int hu_ociw_index_read(const struct hu_ociw_layout *l, unsigned flags,
		       struct hu_ociw_index *ix, struct hu_error *e);
void hu_ociw_index_free(struct hu_ociw_index *ix);
/* Point @tag at @desc in @ix: the entries that held @tag go (the image
 * one named stays in the index only where another entry, tagged or not,
 * holds it; every other entry is kept as it is), @desc (taken: a
 * reference is stolen) is appended with the annotation
 * org.opencontainers.image.ref.name = @tag; the entries parsed again. */
int hu_ociw_index_set_tag(struct hu_ociw_index *ix, const char *tag,
			  json_t *desc, struct hu_error *e);
/* Remove the entries tagged @tag from @ix ("no image tagged" when none);
 * the entries parsed again. */
int hu_ociw_index_rm_tag(struct hu_ociw_index *ix, const char *tag,
			 struct hu_error *e);
/* Replace index.json by @index, atomically. */
int hu_ociw_index_write(struct hu_ociw_layout *l,
			const struct hu_ociw_index *ix, struct hu_error *e);
/* An empty index, as a new layout holds. */
#define HU_OCIW_INDEX_EMPTY \
	"{\"schemaVersion\":2,\"mediaType\":\"" HU_OCI_MT_INDEX \
	"\",\"manifests\":[]}"

/* ---- the image's documents (ociimage.c) ------------------------------- */

/* One layer of the image as written. */
struct hu_ociw_layer {
	char media_type[128];
	char digest[72], diff_id[72];
	uint64_t size;
	char *created_by;
};

/* An image being written (hu_ociout_open). */
struct hu_ociout {
	struct hu_ociw_layout l;
	struct hu_ociout_opts o;
	const char *base_config;	/* o.config, or the bottom image's */
	const char *base_name;
	struct hu_ociw_layer *layers;	/* written so far, bottom first */
	size_t n, cap;
	bool committed;			/* the tag written */
};

/* Append a layer written (or taken) to @w's image. */
int hu_ociw_add_layer(struct hu_ociout *w, const char *media_type,
		      const char *digest, const char *diff_id, uint64_t size,
		      const char *created_by, struct hu_error *e);

/* The host's platform in GOARCH / GOOS names: "amd64" for x86_64... */
void hu_ociw_host_platform(const char **os, const char **arch,
			   const char **variant);
/* The config JSON: @base (NULL: a minimal one for the host) with its
 * rootfs replaced by @layers' diff_ids, a history entry per layer
 * appended, and every "created" @created (seconds since 1970).  Keys
 * sorted.  @base_name names @base in errors. */
int hu_ociw_config_json(const char *base, const char *base_name,
			const struct hu_ociw_layer *layers, size_t n,
			int64_t created, char **out, struct hu_error *e);
/* The manifest JSON of the config @config_digest (@config_size bytes)
 * and @layers.  Keys sorted. */
int hu_ociw_manifest_json(const char *config_digest, uint64_t config_size,
			  const struct hu_ociw_layer *layers, size_t n,
			  char **out, struct hu_error *e);

#endif /* HUNION_OCI_OCIWRITE_H */
