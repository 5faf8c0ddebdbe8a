/* SPDX-License-Identifier: MIT */
/*
 * The media types hunion reads in an image layout: OCI's (image-spec
 * media-types.md) and Docker's image manifest v2 schema 2, which skopeo
 * keeps when it copies a Docker image into a layout.  Anything else is
 * refused by the caller, naming the blob: an encrypted layer (ocicrypt's
 * "+encrypted"), an artifact, a type of tomorrow.
 */
#include <string.h>

#include "oci/oci.h"

#define OCI_LAYER "application/vnd.oci.image.layer.v1.tar"
#define OCI_LAYER_ND "application/vnd.oci.image.layer.nondistributable.v1.tar"
#define DOCKER "application/vnd.docker."

static const struct oci_media_type types[] = {
	{ "application/vnd.oci.image.index.v1+json", OCI_KIND_INDEX,
	  OCI_COMP_NONE },
	{ DOCKER "distribution.manifest.list.v2+json", OCI_KIND_INDEX,
	  OCI_COMP_NONE },
	{ "application/vnd.oci.image.manifest.v1+json", OCI_KIND_MANIFEST,
	  OCI_COMP_NONE },
	{ DOCKER "distribution.manifest.v2+json", OCI_KIND_MANIFEST,
	  OCI_COMP_NONE },
	{ "application/vnd.oci.image.config.v1+json", OCI_KIND_CONFIG,
	  OCI_COMP_NONE },
	{ DOCKER "container.image.v1+json", OCI_KIND_CONFIG, OCI_COMP_NONE },
	{ OCI_LAYER, OCI_KIND_LAYER, OCI_COMP_NONE },
	{ OCI_LAYER "+gzip", OCI_KIND_LAYER, OCI_COMP_GZIP },
	{ OCI_LAYER "+zstd", OCI_KIND_LAYER, OCI_COMP_ZSTD },
	{ OCI_LAYER_ND, OCI_KIND_LAYER, OCI_COMP_NONE },
	{ OCI_LAYER_ND "+gzip", OCI_KIND_LAYER, OCI_COMP_GZIP },
	{ OCI_LAYER_ND "+zstd", OCI_KIND_LAYER, OCI_COMP_ZSTD },
	{ DOCKER "image.rootfs.diff.tar", OCI_KIND_LAYER, OCI_COMP_NONE },
	{ DOCKER "image.rootfs.diff.tar.gzip", OCI_KIND_LAYER, OCI_COMP_GZIP },
	{ DOCKER "image.rootfs.foreign.diff.tar.gzip", OCI_KIND_LAYER,
	  OCI_COMP_GZIP },
	{ DOCKER "image.rootfs.diff.tar.zstd", OCI_KIND_LAYER, OCI_COMP_ZSTD },
};

const struct oci_media_type *oci_media_type(const char *name)
{
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strcmp(types[i].name, name) == 0)
			return &types[i];
	return NULL;
}

bool oci_media_type_encrypted(const char *name)
{
	const char *p = strstr(name, "+encrypted");

	return p && p[strlen("+encrypted")] == '\0';
}
