/* SPDX-License-Identifier: MIT */
/*
 * libarchive, loaded on demand (archive_dl.c).  hunion does not link
 * libarchive: it pulls in libxml2, ICU, libstdc++ and nettle, which a
 * command that reads and writes directories only would load for nothing.
 * The first tarball read or written loads it with dlopen() and resolves
 * every function hunion calls into one table.
 *
 * Include this after <archive.h> and <archive_entry.h> (which give the
 * types and constants) in every module that calls libarchive: the names
 * of the functions become calls through the table, so the code reads as
 * before.  Before the first libarchive object is made, call
 * hu_la_need(), which says in @e why libarchive cannot be loaded.  A call
 * through the table when it could not be loaded is a bug: it aborts with
 * the same message.
 */
#ifndef HUNION_ARCHIVE_DL_H
#define HUNION_ARCHIVE_DL_H

#include <archive.h>
#include <archive_entry.h>

#include "hunion.h"

/* What hunion loads, and what a packager sees in the ELF .note.dlopen. */
#define HU_LA_SONAME "libarchive.so.13"

/* Every libarchive function hunion calls, each also in the list of
 * names below (tests may call others: they link libarchive themselves).
 * One called but missing here fails the link of hunion, which does not
 * link libarchive. */
#define HU_LA_FUNCS(X) \
	X(archive_entry_atime) \
	X(archive_entry_atime_is_set) \
	X(archive_entry_atime_nsec) \
	X(archive_entry_clear) \
	X(archive_entry_copy_hardlink) \
	X(archive_entry_copy_pathname) \
	X(archive_entry_copy_symlink) \
	X(archive_entry_filetype) \
	X(archive_entry_free) \
	X(archive_entry_gid) \
	X(archive_entry_hardlink) \
	X(archive_entry_mtime) \
	X(archive_entry_mtime_is_set) \
	X(archive_entry_mtime_nsec) \
	X(archive_entry_new) \
	X(archive_entry_pathname) \
	X(archive_entry_perm) \
	X(archive_entry_rdevmajor) \
	X(archive_entry_rdevminor) \
	X(archive_entry_set_gid) \
	X(archive_entry_set_mode) \
	X(archive_entry_set_mtime) \
	X(archive_entry_set_rdev) \
	X(archive_entry_set_rdevmajor) \
	X(archive_entry_set_rdevminor) \
	X(archive_entry_set_size) \
	X(archive_entry_set_uid) \
	X(archive_entry_size) \
	X(archive_entry_size_is_set) \
	X(archive_entry_symlink) \
	X(archive_entry_uid) \
	X(archive_entry_unset_size) \
	X(archive_entry_xattr_add_entry) \
	X(archive_entry_xattr_clear) \
	X(archive_entry_xattr_count) \
	X(archive_entry_sparse_next) \
	X(archive_entry_sparse_reset) \
	X(archive_entry_xattr_next) \
	X(archive_entry_xattr_reset) \
	X(archive_errno) \
	X(archive_error_string) \
	X(archive_filter_bytes) \
	X(archive_read_data_block) \
	X(archive_read_data_skip) \
	X(archive_read_free) \
	X(archive_read_new) \
	X(archive_read_next_header) \
	X(archive_read_open) \
	X(archive_read_support_filter_none) \
	X(archive_read_support_format_tar) \
	X(archive_set_error) \
	X(archive_write_close) \
	X(archive_write_data) \
	X(archive_write_finish_entry) \
	X(archive_write_free) \
	X(archive_write_header) \
	X(archive_write_new) \
	X(archive_write_open2) \
	X(archive_write_set_bytes_in_last_block) \
	X(archive_write_set_bytes_per_block) \
	X(archive_write_set_format_option) \
	X(archive_write_set_format_pax)

struct hu_la {
#define HU_LA_FIELD(f) __typeof__(f) *f;
	HU_LA_FUNCS(HU_LA_FIELD)
#undef HU_LA_FIELD
};

/* Load libarchive once (every later call only looks); 0, or -1 with
 * "tarball support needs libarchive.so.13: WHY" in @e.  The environment
 * variable HUNION_LIBARCHIVE names another file to load (tests, and
 * packagers checking that directory commands work without it). */
int hu_la_need(struct hu_error *e);
/* The table, loaded; aborts when libarchive cannot be loaded. */
const struct hu_la *hu_la(void);

#ifndef HU_LA_TABLE_ONLY
#define archive_entry_atime (hu_la()->archive_entry_atime)
#define archive_entry_atime_is_set (hu_la()->archive_entry_atime_is_set)
#define archive_entry_atime_nsec (hu_la()->archive_entry_atime_nsec)
#define archive_entry_clear (hu_la()->archive_entry_clear)
#define archive_entry_copy_hardlink (hu_la()->archive_entry_copy_hardlink)
#define archive_entry_copy_pathname (hu_la()->archive_entry_copy_pathname)
#define archive_entry_copy_symlink (hu_la()->archive_entry_copy_symlink)
#define archive_entry_filetype (hu_la()->archive_entry_filetype)
#define archive_entry_free (hu_la()->archive_entry_free)
#define archive_entry_gid (hu_la()->archive_entry_gid)
#define archive_entry_hardlink (hu_la()->archive_entry_hardlink)
#define archive_entry_mtime (hu_la()->archive_entry_mtime)
#define archive_entry_mtime_is_set (hu_la()->archive_entry_mtime_is_set)
#define archive_entry_mtime_nsec (hu_la()->archive_entry_mtime_nsec)
#define archive_entry_new (hu_la()->archive_entry_new)
#define archive_entry_pathname (hu_la()->archive_entry_pathname)
#define archive_entry_perm (hu_la()->archive_entry_perm)
#define archive_entry_rdevmajor (hu_la()->archive_entry_rdevmajor)
#define archive_entry_rdevminor (hu_la()->archive_entry_rdevminor)
#define archive_entry_set_gid (hu_la()->archive_entry_set_gid)
#define archive_entry_set_mode (hu_la()->archive_entry_set_mode)
#define archive_entry_set_mtime (hu_la()->archive_entry_set_mtime)
#define archive_entry_set_rdev (hu_la()->archive_entry_set_rdev)
#define archive_entry_set_rdevmajor (hu_la()->archive_entry_set_rdevmajor)
#define archive_entry_set_rdevminor (hu_la()->archive_entry_set_rdevminor)
#define archive_entry_set_size (hu_la()->archive_entry_set_size)
#define archive_entry_set_uid (hu_la()->archive_entry_set_uid)
#define archive_entry_size (hu_la()->archive_entry_size)
#define archive_entry_size_is_set (hu_la()->archive_entry_size_is_set)
#define archive_entry_symlink (hu_la()->archive_entry_symlink)
#define archive_entry_uid (hu_la()->archive_entry_uid)
#define archive_entry_unset_size (hu_la()->archive_entry_unset_size)
#define archive_entry_xattr_add_entry (hu_la()->archive_entry_xattr_add_entry)
#define archive_entry_xattr_clear (hu_la()->archive_entry_xattr_clear)
#define archive_entry_xattr_count (hu_la()->archive_entry_xattr_count)
#define archive_entry_sparse_next (hu_la()->archive_entry_sparse_next)
#define archive_entry_sparse_reset (hu_la()->archive_entry_sparse_reset)
#define archive_entry_xattr_next (hu_la()->archive_entry_xattr_next)
#define archive_entry_xattr_reset (hu_la()->archive_entry_xattr_reset)
#define archive_errno (hu_la()->archive_errno)
#define archive_error_string (hu_la()->archive_error_string)
#define archive_filter_bytes (hu_la()->archive_filter_bytes)
#define archive_read_data_block (hu_la()->archive_read_data_block)
#define archive_read_data_skip (hu_la()->archive_read_data_skip)
#define archive_read_free (hu_la()->archive_read_free)
#define archive_read_new (hu_la()->archive_read_new)
#define archive_read_next_header (hu_la()->archive_read_next_header)
#define archive_read_open (hu_la()->archive_read_open)
#define archive_read_support_filter_none \
	(hu_la()->archive_read_support_filter_none)
#define archive_read_support_format_tar \
	(hu_la()->archive_read_support_format_tar)
#define archive_set_error (hu_la()->archive_set_error)
#define archive_write_close (hu_la()->archive_write_close)
#define archive_write_data (hu_la()->archive_write_data)
#define archive_write_finish_entry (hu_la()->archive_write_finish_entry)
#define archive_write_free (hu_la()->archive_write_free)
#define archive_write_header (hu_la()->archive_write_header)
#define archive_write_new (hu_la()->archive_write_new)
#define archive_write_open2 (hu_la()->archive_write_open2)
#define archive_write_set_bytes_in_last_block \
	(hu_la()->archive_write_set_bytes_in_last_block)
#define archive_write_set_bytes_per_block \
	(hu_la()->archive_write_set_bytes_per_block)
#define archive_write_set_format_option \
	(hu_la()->archive_write_set_format_option)
#define archive_write_set_format_pax (hu_la()->archive_write_set_format_pax)
#endif

#endif
