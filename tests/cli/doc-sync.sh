#!/bin/bash
# SPDX-License-Identifier: MIT
#
# doc-sync.sh HUNION - the documentation agrees with the command table.
#
#  (a) completions/ holds exactly what 'HUNION __complete SHELL' prints;
#  (b) every subcommand and every long option that 'HUNION ... --help'
#      lists appears in the matching man page: hunion.1 for the top level,
#      hunion-CMD.1 for CMD and everything below it;
#  (c) every man page renders with scdoc (when scdoc is installed).
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

# The man page source that documents the command path "$*".
page_of() {
	if [ $# -eq 0 ]; then
		echo "$root/man/hunion.1.scd"
	else
		echo "$root/man/hunion-$1.1.scd"
	fi
}

check_cmd() {	# the command path, e.g. "whiteout ls"; none for the top
	local help page opt sub name="hunion${*:+ $*}"

	page=$(page_of "$@")
	if ! help=$("$hunion" "$@" --help 2>&1); then
		bad "'$name --help' failed"
		return
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

# ---- (c) the man pages render -----------------------------------------------

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
