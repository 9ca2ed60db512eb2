#!/usr/bin/env bash
# tests/integration/abi_exports.sh LIB MAP HEADER...: libshmrun.so.0 exports
# exactly the functions the public headers declare, no more (no internal
# symbol leaks out of the library) and no fewer.
#
#   LIB     the built libshmrun.so.0 (ctest passes $<TARGET_FILE:libshmrun>)
#   MAP     runtime/libshmrun.map, the version script
#   HEADER  the installed headers (runtime/CMakeLists.txt: SHMRUN_PUBLIC_HEADERS)
#
# The declared functions come from the compiler, not from a regex over C:
# gcc -aux-info writes one prototype per function declared in a translation
# unit, with the file and line it came from; the extern ones from the headers
# are the public API (static inline ones are not symbols). Three sets must be
# equal: those, the version script's global names, and `nm -D --defined-only`
# of the library (without the version node itself). Also: the SONAME is
# libshmrun.so.0, every export carries the version node, and no data symbol is
# exported (the API has none; shmrun_plugin is defined by plugins).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

lib=$1 map=$2
shift 2
headers=("$@")
for t in gcc nm readelf; do
	command -v $t > /dev/null || fail "$t not found (build-essential, binutils)"
done

# 1. what the headers declare
incs=()
for h in "${headers[@]}"; do
	incs+=("-I$(dirname "$(dirname "$h")")")
	echo "#include \"shmrun/$(basename "$h")\"" >> "$tmp/all.c"
done
gcc -std=c11 -fsyntax-only -aux-info "$tmp/aux.txt" "${incs[@]}" "$tmp/all.c" ||
	fail "the public headers do not compile together"
grep -E '^/\* [^ ]*/include/shmrun/[a-z]+\.h:[0-9]+:NC \*/ extern ' "$tmp/aux.txt" |
	sed 's/ (.*//; s/.*[ *]//' | sort -u > "$tmp/declared"
[ -s "$tmp/declared" ] || fail "no function found in the headers (gcc -aux-info)"
# every name must be a C identifier, else the extraction went wrong
grep -vqE '^shmrun_[a-z0-9_]+$' "$tmp/declared" &&
	fail "unexpected names in the headers' declarations: $(grep -vE '^shmrun_[a-z0-9_]+$' "$tmp/declared" | tr '\n' ' ')"

# 2. what the version script exports: the names between "global:" and "local:" or
#    the end of a version node (SHMRUN_0.1, SHMRUN_0.2, ...)
sed 's#/\*.*\*/##; /\/\*/,/\*\//d' "$map" |
	awk '/global:/ {g = 1; next} /local:|}/ {g = 0} g' | tr -d ' \t;' | grep -v '^$' |
	sort -u > "$tmp/map"

# 3. what the library exports
nm -D --defined-only "$lib" > "$tmp/nm"
awk '$2 != "A" {print $3}' "$tmp/nm" | sed 's/@.*//' | sort -u > "$tmp/exported"

diff_sets() { # NAME_A FILE_A NAME_B FILE_B
	local extra missing
	extra=$(comm -23 "$2" "$4" | tr '\n' ' ')
	missing=$(comm -13 "$2" "$4" | tr '\n' ' ')
	[ -z "$extra$missing" ] && return 0
	[ -n "$extra" ] && echo "in $1 but not in $3: $extra" >&2
	[ -n "$missing" ] && echo "in $3 but not in $1: $missing" >&2
	return 1
}
diff_sets "the version script" "$tmp/map" "the public headers" "$tmp/declared" ||
	fail "runtime/libshmrun.map and the public headers disagree: add a new public function to the map (a new version node for a new minor release)"
diff_sets "nm -D of $lib" "$tmp/exported" "the public headers" "$tmp/declared" ||
	fail "the library's exports are not the public API"

# every export is a function (T), versioned SHMRUN_*
bad=$(awk '$2 != "A" && ($2 != "T" || $3 !~ /@@SHMRUN_/)' "$tmp/nm")
[ -z "$bad" ] || fail "exports that are not versioned functions: $bad"
readelf -d "$lib" | qgrep 'Library soname: \[libshmrun\.so\.0\]' ||
	fail "SONAME is not libshmrun.so.0: $(readelf -d "$lib" | grep -i soname)"
echo "ok: $(wc -l < "$tmp/exported") functions exported, as declared in ${#headers[@]} headers"
