#!/bin/sh
# SPDX-License-Identifier: MIT
#
# demo.sh HUNION - build the example stack in examples/stack/ from the
# description below, merge it with HUNION, and show what came out.
#
# The stack is made at run time, so no device node or xattr has to live in
# git.  As root the upper layer is in the union format (symlink whiteouts
# with trusted.union.whiteout, trusted.union.opaque).  Without root,
# trusted.* cannot be written and Linux allows no user.* xattr on a
# symlink, so the upper layer is written in the OCI format instead (.wh.NAME
# files) and hunion runs with --userxattr.
set -eu

usage="usage: demo.sh HUNION"
[ $# -eq 1 ] || { echo "$usage" >&2; exit 2; }
case $1 in
/*) hunion=$1 ;;
*) hunion=$(pwd)/$1 ;;
esac
[ -x "$hunion" ] || { echo "demo.sh: $1: not an executable" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
stack=$here/stack

# The stack, bottom layer first.  KIND: d directory, f file (TEXT is its
# content), x executable file, l symlink to TEXT, h hard link to the path
# TEXT of the same layer, w whiteout, o opaque directory.
description() {
	cat <<'EOF'
lower   d etc
lower   f etc/hostname              lower
lower   f etc/motd                  Welcome to the lower layer.
lower   f etc/issue                 Demo Linux \n \l
lower   h etc/issue.net             etc/issue
lower   x usr/bin/busybox           #!/bin/sh
lower   l usr/bin/sh                busybox
lower   f var/cache/apt/old.bin     a stale cache
middle  f etc/motd                  Welcome to the middle layer.
middle  x usr/bin/tool              #!/bin/sh
middle  f var/cache/apt/mid.bin     another stale cache
upper   w etc/hostname
upper   o var/cache/apt
upper   f var/cache/apt/new.bin     a fresh cache
upper   f home/demo/notes.txt       Written in the upper layer.
EOF
}

if [ "$(id -u)" = 0 ]; then
	format=union
	xopt=
else
	format=oci
	xopt=--userxattr
fi

# Create entry PATH of KIND in layer directory DIR.
make_entry() {
	dir=$1 kind=$2 path=$3 text=$4
	mkdir -p "$dir/$(dirname "$path")"
	case $kind in
	d) mkdir -p "$dir/$path" ;;
	f) printf '%s\n' "$text" > "$dir/$path" ;;
	x) printf '%s\n' "$text" > "$dir/$path" && chmod 755 "$dir/$path" ;;
	l) ln -s "$text" "$dir/$path" ;;
	h) ln "$dir/$text" "$dir/$path" ;;
	w) make_whiteout "$dir" "$path" ;;
	o) make_opaque "$dir/$path" ;;
	*) echo "demo.sh: unknown kind '$kind'" >&2; exit 1 ;;
	esac
}

make_whiteout() {
	if [ "$format" = union ]; then
		ln -s '(union-whiteout)' "$1/$2"
		setfattr -h -n trusted.union.whiteout -v y "$1/$2"
	else
		: > "$1/$(dirname "$2")/.wh.$(basename "$2")"
	fi
}

make_opaque() {
	mkdir -p "$1"
	if [ "$format" = union ]; then
		setfattr -n trusted.union.opaque -v y "$1"
	else
		: > "$1/.wh..wh..opq"
	fi
}

say() {
	case $1 in
	d) echo "directory" ;;
	f) echo "file" ;;
	x) echo "executable" ;;
	l) echo "symlink ->" ;;
	h) echo "hard link to" ;;
	w) echo "whiteout ($format)" ;;
	o) echo "opaque directory ($format)" ;;
	esac
}

echo "== building $stack (upper layer in the $format format)"
rm -rf "$stack"
description | while read -r layer kind path text; do
	make_entry "$stack/$layer" "$kind" "$path" "$text"
	case $kind in
	f | x | w | o | d) printf '  %-7s %-24s %s\n' "$layer" "$path" \
		"$(say "$kind")" ;;
	*) printf '  %-7s %-24s %s %s\n' "$layer" "$path" "$(say "$kind")" \
		"$text" ;;
	esac
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hunion-demo.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
out=$tmp/merged

echo
echo "== hunion merge -v ${xopt:+$xopt }-o $out lower middle upper"
# shellcheck disable=SC2086 # $xopt is empty or one word
"$hunion" merge -v $xopt -o "$out" "$stack/lower" "$stack/middle" \
	"$stack/upper"

echo
echo "== the merged tree (type, mode, links, path)"
(cd "$out" && find . -mindepth 1 \( -type l -printf '%y %M %n %p -> %l\n' \) \
	-o -printf '%y %M %n %p\n' | sort -k4)

echo
echo "== etc/motd comes from the middle layer:"
cat "$out/etc/motd"

echo
echo "== hunion whiteout ls ${xopt:+$xopt }upper"
# shellcheck disable=SC2086
"$hunion" whiteout ls $xopt "$stack/upper"
