/* SPDX-License-Identifier: MIT */
/*
 * laextract ARCHIVE DIR - extract ARCHIVE (any compression libarchive
 * reads) into the existing directory DIR with libarchive's disk writer,
 * as a program that links libarchive would: owners (numeric, since the
 * archive names no users), modes, times, xattrs, ACLs and file flags,
 * refusing ".." and paths through symlinks.  For the flatten round-trip
 * test; built by tests/kernel/flatten-roundtrip.sh.
 */
#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int flags = ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_PERM |
		    ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_XATTR |
		    ARCHIVE_EXTRACT_ACL | ARCHIVE_EXTRACT_FFLAGS |
		    ARCHIVE_EXTRACT_SECURE_NODOTDOT |
		    ARCHIVE_EXTRACT_SECURE_SYMLINKS;
	struct archive *in, *out;
	struct archive_entry *ent;
	int r, bad = 0;

	if (argc != 3) {
		fprintf(stderr, "usage: laextract ARCHIVE DIR\n");
		return 2;
	}
	in = archive_read_new();
	archive_read_support_filter_all(in);
	archive_read_support_format_all(in);
	out = archive_write_disk_new();
	archive_write_disk_set_options(out, flags);
	archive_write_disk_set_standard_lookup(out);
	if (archive_read_open_filename(in, argv[1], 1 << 20) != ARCHIVE_OK) {
		fprintf(stderr, "%s: %s\n", argv[1], archive_error_string(in));
		return 1;
	}
	if (chdir(argv[2]) < 0) {
		perror(argv[2]);
		return 1;
	}
	while ((r = archive_read_next_header(in, &ent)) == ARCHIVE_OK) {
		const void *buf;
		size_t len;
		la_int64_t off;

		if (archive_write_header(out, ent) != ARCHIVE_OK) {
			fprintf(stderr, "%s: %s\n", archive_entry_pathname(ent),
				archive_error_string(out));
			bad = 1;
			continue;
		}
		while ((r = archive_read_data_block(in, &buf, &len, &off)) ==
		       ARCHIVE_OK) {
			if (archive_write_data_block(out, buf, len, off) !=
			    ARCHIVE_OK) {
				fprintf(stderr, "%s: %s\n",
					archive_entry_pathname(ent),
					archive_error_string(out));
				bad = 1;
				break;
			}
		}
		if (r != ARCHIVE_EOF && r != ARCHIVE_OK) {
			fprintf(stderr, "%s: %s\n", archive_entry_pathname(ent),
				archive_error_string(in));
			return 1;
		}
		if (archive_write_finish_entry(out) != ARCHIVE_OK) {
			fprintf(stderr, "%s: %s\n", archive_entry_pathname(ent),
				archive_error_string(out));
			bad = 1;
		}
	}
	if (r != ARCHIVE_EOF) {
		fprintf(stderr, "%s: %s\n", argv[1], archive_error_string(in));
		return 1;
	}
	if (archive_write_close(out) != ARCHIVE_OK) {
		fprintf(stderr, "%s\n", archive_error_string(out));
		bad = 1;
	}
	archive_write_free(out);
	archive_read_free(in);
	return bad;
}
