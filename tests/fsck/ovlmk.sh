# SPDX-License-Identifier: MIT
# shellcheck shell=sh
#
# tests/fsck/ovlmk.sh - what the mk scripts of the overlay case folders
# share: they build their layers by using the kernel, then damage them.
#   ovl_mount LOWER...   mount LOWER... (bottom first) under upper at mnt,
#                        with redirect_dir=on, metacopy=on, index=off
#   ovl_umount           unmount it and remove the workdir
#   xwhiteout PATH       an xattr whiteout (an empty file with
#                        trusted.overlay.whiteout)

# Sourced by the runner (bash): no set -e here.  A stack that cannot be
# mounted skips the case (exit 77).

ovl_mount() {
	lowers=
	for l in "$@"; do
		lowers=$l${lowers:+:$lowers}
	done
	mkdir -p upper work mnt
	mount -t overlay overlay -o "lowerdir=$lowers,upperdir=upper,\
workdir=work,redirect_dir=on,metacopy=on,index=off" mnt || {
		echo "SKIP: cannot mount overlayfs (root, and a kernel with it)"
		exit 77
	}
}

ovl_umount() {
	umount mnt
	rm -rf work mnt
}

xwhiteout() {
	: >"$1"
	setfattr -n trusted.overlay.whiteout -v y "$1"
}
