#!/usr/bin/env bash
# tests/integration/public_headers.sh LIB HEADER...: the public headers are a
# C11 and a C++11 API, and a plugin built on them works with the library.
#
#   LIB     the built libshmrun.so.0 (ctest passes $<TARGET_FILE:libshmrun>)
#   HEADER  the installed headers (runtime/CMakeLists.txt: SHMRUN_PUBLIC_HEADERS)
#
# 1. Each header alone compiles (it includes what it needs) with
#    cc -std=c11 -pedantic -Wall -Wextra -Werror and with g++ -std=c++11, same flags.
# 2. tests/abi/c_plugin.c (cc -std=c11) and tests/abi/cxx_plugin.cc (g++
#    -std=c++11) build as plugins with -fvisibility=hidden, and each exports
#    shmrun_plugin (nm -D: defined, data, C name) and nothing else.
# 3. A program linked to LIB dlopen()s each with RTLD_NOW, so every shmrun_*
#    function a plugin calls resolves against the library's exports, and reads
#    the descriptor: ABI version, name, the operator's name and size.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

lib=$1
shift
nheaders=$#
abi=$(cd "$(dirname "$0")/../abi" && pwd)
for t in cc g++ nm; do
	command -v $t > /dev/null || fail "$t not found (build-essential)"
done
incs=()
for h in "$@"; do
	d=$(dirname "$(dirname "$h")")
	[[ " ${incs[*]-} " == *" -I$d "* ]] || incs+=("-I$d")
done
warn=(-pedantic -Wall -Wextra -Werror)

for h in "$@"; do
	name=shmrun/$(basename "$h")
	echo "#include \"$name\"" | cc -std=c11 "${warn[@]}" "${incs[@]}" -fsyntax-only -x c - ||
		fail "$name does not compile alone as C11"
	echo "#include \"$name\"" | g++ -std=c++11 "${warn[@]}" "${incs[@]}" -fsyntax-only -x c++ - ||
		fail "$name does not compile alone as C++11"
done

cc -std=c11 "${warn[@]}" -fvisibility=hidden -shared -fPIC "${incs[@]}" \
	-o "$tmp/c_plugin.so" "$abi/c_plugin.c" || fail "tests/abi/c_plugin.c does not build as C11"
g++ -std=c++11 "${warn[@]}" -fvisibility=hidden -shared -fPIC "${incs[@]}" \
	-o "$tmp/cxx_plugin.so" "$abi/cxx_plugin.cc" || fail "tests/abi/cxx_plugin.cc does not build as C++11"
for p in c_plugin cxx_plugin; do
	exports=$(nm -D --defined-only "$tmp/$p.so" | awk '{print $2, $3}')
	[ "$exports" = "D shmrun_plugin" ] ||
		fail "$p.so should export exactly 'D shmrun_plugin', exports: $exports"
done

cat > "$tmp/load.c" << 'PROG'
#include <dlfcn.h>
#include <stdio.h>
#include <shmrun/operator.h>

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		void *h = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
		const struct shmrun_plugin *p;

		if (!h) {
			printf("dlopen: %s\n", dlerror());
			return 1;
		}
		p = (const struct shmrun_plugin *)dlsym(h, SHMRUN_PLUGIN_SYMBOL);
		if (!p) {
			printf("dlsym: %s\n", dlerror());
			return 1;
		}
		printf("%d %s %s %s %d\n",
		       p->abi_major == SHMRUN_ABI_MAJOR && p->abi_minor == SHMRUN_ABI_MINOR,
		       p->name, p->version,
		       p->operators[0]->name,
		       p->operators[0]->size == sizeof(struct shmrun_operator) && !p->operators[1]);
	}
	return 0;
}
PROG
# linked with -lshmrun (--no-as-needed: load.c calls none of it) so that
# RTLD_NOW must find the plugins' shmrun_* calls in libshmrun.so.0; in a
# sanitizer build with its sanitizer, whose runtime must come first
# (SHMRUN_TEST_SANITIZE: tests/CMakeLists.txt)
san=()
[ -n "${SHMRUN_TEST_SANITIZE:-}" ] && san=("-fsanitize=$SHMRUN_TEST_SANITIZE")
cc -std=c11 "${san[@]}" "${incs[@]}" -o "$tmp/load" "$tmp/load.c" -Wl,--no-as-needed "$lib" \
	-Wl,-rpath,"$(dirname "$lib")" -ldl || fail "the loader does not build"
out=$("$tmp/load" "$tmp/c_plugin.so" "$tmp/cxx_plugin.so" 2>&1) || fail "loading the plugins: $out"
want="1 abi_c 0.1.0 abi_c_upper 1
1 abi_cxx 0.1.0 abi_cxx_count 1"
[ "$out" = "$want" ] || fail "plugin descriptors: expected
$want
got
$out"
echo "ok: $nheaders headers as C11 and C++11; two plugins built, exported and loaded"
