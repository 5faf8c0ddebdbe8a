#!/bin/bash
# SPDX-License-Identifier: MIT
#
# doc-sync.sh HUNION - the documentation agrees with the command table.
#
#  (a) completions/ holds exactly what 'HUNION __complete SHELL' prints;
#  (b) every 'HUNION ... --help' ends naming its man page ("See
#      hunion-merge(1)."), which is there, and every subcommand and every
#      long option that it lists appears in that page: hunion.1 for the
#      top level, hunion-CMD.1 (or .8) for CMD and everything below it;
#  (c) hunion.1's COMMON OPTIONS agree with the table: each option there
#      says "Taken by *CMD*, ..." and names exactly the commands whose
#      --help lists it, and every option that several commands share
#      with the same help text (OPT_FORMAT, OPT_TAR_OUT...) is there;
#  (d) README.md's first shell block holds the two commands a newcomer
#      needs (make demo, make check), and its other ```sh blocks run as
#      pasted: in order, in one bash under set -e, with the binary as
#      the "hunion" that make builds in the source tree (a temp copy of
#      the tree's top: only ./hunion), TMPDIR a temp dir.  Blocks of make
#      commands only are the build itself and are not run.  A line
#      "CMD || [ $? = N ]" (the way to let an expected status through
#      set -e) runs as an exact check: CMD must exit N, and 0 fails it
#      too.  As root only (the examples write trusted.* xattrs);
#  (e) every man page renders with scdoc (when scdoc is installed);
#  (f) every problem of lib/fsck/problem.def has its hunion-fsck(8) section;
#  (g) README.md's "Source tree" names every folder of lib/ and every file
#      of cmd/, and nothing that is not there.
#
# The table is read through --help, the same text users see, so the test
# follows the table without a second hand-kept list.
set -u

if [ $# -ne 1 ]; then
	echo "usage: doc-sync.sh HUNION" >&2
	exit 2
fi
case $1 in
/*) hunion=$1 ;;
*) hunion=$(pwd)/$1 ;;
esac
root=$(cd "$(dirname "$0")/../.." && pwd)
pass=0
fail=0

ok() {
	pass=$((pass + 1))
}

bad() {
	echo "doc-sync: FAIL: $*"
	fail=$((fail + 1))
}

# ---- (a) the committed completions are the generated ones ----------------

check_completion() {	# SHELL FILE
	local want
	want=$("$hunion" __complete "$1") || {
		bad "'hunion __complete $1' failed"
		return
	}
	if [ "$want" == "$(cat "$root/completions/$2" 2>/dev/null)" ]; then
		ok
	else
		bad "completions/$2 differs from 'hunion __complete $1'" \
		    "(run 'make completions')"
	fi
}

check_completion bash hunion.bash
check_completion zsh _hunion
check_completion fish hunion.fish

# ---- (b) the man pages name everything the table holds --------------------

# The lines of section $2 ("commands:" or "options:") of help text $1.
help_section() {
	printf '%s\n' "$1" | awk -v want="$2" '
		/^[a-z]+:$/ { on = ($0 == want); next }
		/^$/ { on = 0 }
		on'
}

# The man page that help text $1 names on its last line ("See
# hunion-merge(1)." or "... and hunion-oci(1)."): "hunion-merge.1".
page_named() {
	printf '%s\n' "$1" | tail -n 1 |
		sed -n 's/.*[ ]\([a-z][a-z.-]*\)(\([1-8]\))\.$/\1.\2/p'
}

# The man page source that documents the command path "$*", by its name.
page_of() {
	if [ $# -eq 0 ]; then
		echo "$root/man/hunion.1.scd"
	else
		# section 1, or 8 for what only root runs (fsck, mount)
		local p
		for p in "$root/man/hunion-$1".[18].scd; do
			[ -f "$p" ] && { echo "$p"; return; }
		done
		echo "$root/man/hunion-$1.1.scd"
	fi
}

# "OPTION<TAB>COMMAND<TAB>HELP" for every option of every command that
# runs (has no subcommands), filled by check_cmd, read by (c).
leaf_opts=$(mktemp /tmp/hunion-doc-sync.XXXXXX)
readme_tmp=
trap 'rm -f "$leaf_opts"; [ -z "$readme_tmp" ] || rm -rf "$readme_tmp"' EXIT

check_cmd() {	# the command path, e.g. "whiteout ls"; none for the top
	local help page named opt sub name="hunion${*:+ $*}"

	page=$(page_of "$@")
	if ! help=$("$hunion" "$@" --help 2>&1); then
		bad "'$name --help' failed"
		return
	fi
	named=$(page_named "$help")
	if [ -z "$named" ]; then
		bad "'$name --help' does not end naming its man page" \
		    "(See hunion-CMD(N).)"
	elif [ "$named" != "$(basename "$page" .scd)" ] &&
	     [ ! -f "$page" ] && [ -f "$root/man/$named.scd" ]; then
		page=$root/man/$named.scd	# hunion help: hunion.1
		ok
	elif [ "$named" != "$(basename "$page" .scd)" ]; then
		bad "'$name --help' names $named, the page is" \
		    "$(basename "$page" .scd)"
	else
		ok
	fi
	if [ ! -f "$page" ]; then
		bad "$name: no man page ${page#"$root"/}"
		return
	fi
	for opt in $(help_section "$help" "options:" |
		     grep -o -- '--[a-z0-9][a-z0-9-]*' | sort -u); do
		if grep -Eq -- "$opt([^a-z0-9-]|$)" "$page"; then
			ok
		else
			bad "$name $opt: not in ${page#"$root"/}"
		fi
	done
	if [ $# -gt 0 ] && [ -z "$(help_section "$help" "commands:")" ]; then
		help_section "$help" "options:" |
			sed -n 's/^ *\(-[a-zA-Z], \)\{0,1\}--\([a-z0-9-]*\)[^ ]* *\(.*\)/\2\t'"$*"'\t\3/p' \
			>>"$leaf_opts"
	fi
	for sub in $(help_section "$help" "commands:" | awk '{ print $1 }'); do
		if grep -Fq -- "$name $sub" "$page"; then
			ok
		else
			bad "'$name $sub' is not in ${page#"$root"/}"
		fi
		check_cmd "$@" "$sub"
	done
}

check_cmd

# ---- (c) COMMON OPTIONS of hunion.1 against the table ---------------------

# "OPTIONS<TAB>COMMANDS" per entry of the section: the long options of its
# heading line, and the commands its "Taken by ... ." sentence names
# (the *bold* words that are not options), both comma-separated.
common_entries() {
	awk '
		/^# / { on = ($0 == "# COMMON OPTIONS"); next }
		!on { next }
		/^\*-/ {
			flush(); opts = ""; s = $0
			while (match(s, /--[a-z0-9-]+/)) {
				opts = opts (opts ? "," : "") \
					substr(s, RSTART + 2, RLENGTH - 2)
				s = substr(s, RSTART + RLENGTH)
			}
			text = ""; next
		}
		opts && /^\t/ { text = text " " substr($0, 2); next }
		/^$/ { flush() }
		END { flush() }
		function flush(  cmds, s, w) {
			if (!opts) return
			cmds = ""
			if (match(text, /Taken by [^.]*\./)) {
				s = substr(text, RSTART, RLENGTH)
				while (match(s, /\*[^*]+\*/)) {
					w = substr(s, RSTART + 1, RLENGTH - 2)
					s = substr(s, RSTART + RLENGTH)
					if (w !~ /^-/)
						cmds = cmds (cmds ? "," : "") w
				}
			}
			printf "%s\t%s\n", opts, cmds
			opts = ""
		}' "$root/man/hunion.1.scd"
}

# The commands (sorted, comma-separated) whose --help lists --$1.
takers() {
	awk -F'\t' -v o="$1" '$1 == o { print $2 }' "$leaf_opts" | sort -u |
		paste -sd, -
}

check_common() {
	local entries opts cmds opt want got shared
	entries=$(common_entries)
	while IFS=$'\t' read -r opts cmds; do
		[ -n "$opts" ] || continue
		got=$(tr ',' '\n' <<<"$cmds" | sort -u | paste -sd, -)
		for opt in ${opts//,/ }; do
			want=$(takers "$opt")
			if [ -z "$cmds" ]; then
				bad "hunion.1 COMMON OPTIONS --$opt: no" \
				    "'Taken by *CMD*, ... .' (the table:" \
				    "${want:-no command})"
			elif [ "$got" == "$want" ]; then
				ok
			else
				bad "hunion.1 COMMON OPTIONS --$opt: taken by" \
				    "'$got' says the page, '$want' says the table"
			fi
		done
	done <<<"$entries"
	# Options two commands share with one help text come from one
	# macro of the table: common, so they belong in the section.
	shared=$(awk -F'\t' '$1 != "help" { n[$1 "\t" $3]++ }
		END { for (k in n) if (n[k] > 1) { split(k, a, "\t"); print a[1] } }' \
		"$leaf_opts" | sort -u)
	for opt in $shared; do
		if cut -f1 <<<"$entries" | tr ',' '\n' | grep -qx -- "$opt"; then
			ok
		else
			bad "--$opt is shared by $(takers "$opt") but not in" \
			    "hunion.1 COMMON OPTIONS"
		fi
	done
}

check_common

# ---- (d) README's examples run ---------------------------------------------

# The ```sh blocks of README.md, each as "# README.md:LINE" and its lines,
# blocks of make commands only left out (with a line "#skip LINE").  A
# line "CMD || [ $? = N ]  # comment" becomes an exact check of CMD's
# status: as pasted it lets a 0 through as well, which would hide a
# command that stopped reporting what the README says it reports.
readme_blocks() {
	awk '
		function exact(line, at,   i, rest, j, n, tail) {
			i = index(line, "|| [ $? = ")
			if (!i)
				return line
			rest = substr(line, i + 10)
			j = index(rest, " ]")
			n = substr(rest, 1, j - 1)
			tail = substr(rest, j + 2)
			if (!j || n !~ /^[0-9]+$/ || tail !~ /^[ \t]*(#.*)?$/)
				return line
			return "if " substr(line, 1, i - 1) "; then echo \"" at \
			       ": exit 0, not " n "\"; false; else __rc=$?; " \
			       "[ $__rc = " n " ] || { echo \"" at ": exit " \
			       "$__rc, not " n "\"; false; }; fi"
		}
		/^```sh$/ { on = 1; start = NR + 1; body = ""; build = 1; next }
		on && /^```$/ {
			on = 0
			if (build) { print "#skip " start; next }
			printf "echo \"== README.md:%d\"\n%s", start, body
			next
		}
		on {
			body = body exact($0, "README.md:" NR) "\n"
			if ($0 !~ /^[ \t]*(#.*)?$/ && $0 !~ /^make( |$)/)
				build = 0
		}' "$root/README.md"
}

check_readme() {
	local first blocks log
	first=$(awk '/^```sh$/ { on = 1; next } on && /^```$/ { exit } on' \
		"$root/README.md")
	if grep -q '^make demo' <<<"$first" && grep -q '^make check' <<<"$first"; then
		ok
	else
		bad "README.md: the first shell block must hold 'make demo'" \
		    "(the example stack) and 'make check' (the tests)"
	fi
	if [ "$(id -u)" != 0 ]; then
		echo "doc-sync: not root: README.md's examples not run"
		return
	fi
	blocks=$(readme_blocks | grep -v '^#skip ')
	if [ -z "$blocks" ]; then
		bad "README.md: no example to run"
		return
	fi
	readme_tmp=$(mktemp -d /tmp/hunion-readme.XXXXXX)
	mkdir "$readme_tmp/tree" "$readme_tmp/tmp"
	ln -s "$hunion" "$readme_tmp/tree/hunion"
	log=$readme_tmp/log
	# shellcheck disable=SC2016 # $BASH_COMMAND: of the inner shell
	if (cd "$readme_tmp/tree" && TMPDIR=$readme_tmp/tmp \
	    bash -e -c 'trap '\''echo "failed: $BASH_COMMAND"'\'' ERR
		'"$blocks") >"$log" 2>&1 </dev/null; then
		ok
	else
		bad "README.md: an example fails as pasted (set -e):"
		sed 's/^/  /' "$log" | tail -n 15
	fi
}

check_readme

# ---- (f) every problem ID of lib/fsck/problem.def has its section in
# hunion-fsck(8), as "## camelCaseId", and every such section a problem

check_problem_ids() {
	local page=$root/man/hunion-fsck.8.scd ids doc id
	ids=$(sed -n 's/^HU_PROBLEM([A-Z_0-9]*, *"\([A-Za-z0-9]*\)".*/\1/p' \
		"$root/lib/fsck/problem.def" | sort)
	if [ -z "$ids" ]; then
		bad "lib/fsck/problem.def: no problem found"
		return
	fi
	doc=$(sed -n 's/^## \([a-z][A-Za-z0-9]*\)$/\1/p' "$page" 2>/dev/null | sort)
	for id in $ids; do
		if grep -qx "$id" <<<"$doc"; then ok
		else bad "hunion-fsck.8: problem $id has no section (## $id)"; fi
	done
	for id in $doc; do
		grep -qx "$id" <<<"$ids" ||
			bad "hunion-fsck.8: section $id is no problem of lib/fsck/problem.def"
	done
}

check_problem_ids

# ---- (g) README.md's source tree is the tree ---------------------------------

check_source_tree() {
	local block name p named
	# (the fences are literal: nothing to expand)
	# shellcheck disable=SC2016
	block=$(sed -n '/^## Source tree/,/^## /p' "$root/README.md" |
		sed -n '/^```$/,/^```$/p')
	if [ -z "$block" ]; then
		bad "README.md: no \"## Source tree\" block"
		return
	fi
	# What the tree has: lib/'s folders, cmd/'s files.
	for p in "$root"/lib/*/ "$root"/cmd/*.c "$root"/cmd/*.h; do
		name=$(basename "$p")
		[ -d "$p" ] && name=$name/
		if grep -qE "(^|[[:space:]])$name([[:space:]]|$)" <<<"$block"; then ok
		else bad "README.md: the source tree does not name ${p#"$root"/}"; fi
	done
	# What the block names under lib/ and cmd/: each must be there.
	named=$(sed -n '/^lib\//,/^[a-z]/p' <<<"$block" |
		grep -oE '^  [a-z_]+/' | tr -d ' ')
	for name in $named; do
		[ -d "$root/lib/$name" ] ||
			bad "README.md: the source tree names lib/$name, which is not there"
	done
	named=$(sed -n '/^cmd\//,/^lib\//p' <<<"$block" | sed '$d' |
		grep -oE '[a-z_]+\.[ch]\b' | sort -u)
	for name in $named; do
		[ -f "$root/cmd/$name" ] ||
			bad "README.md: the source tree names cmd/$name, which is not there"
	done
}

check_source_tree

# ---- (e) the man pages render -----------------------------------------------

if command -v scdoc >/dev/null; then
	for scd in "$root"/man/*.scd; do
		if scdoc < "$scd" > /dev/null 2>&1; then
			ok
		else
			bad "${scd#"$root"/}: scdoc fails: $(scdoc < "$scd" 2>&1 >/dev/null)"
		fi
	done
else
	echo "doc-sync: scdoc not installed: man pages not rendered"
fi

echo "doc-sync: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
