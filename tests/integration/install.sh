#!/usr/bin/env bash
# tests/integration/install.sh CMAKE BUILD_DIR LIBDIR MAN: `cmake --install
# BUILD_DIR --prefix P` into a temporary prefix gives a working installation.
#
#   CMAKE      the cmake that configured BUILD_DIR (${CMAKE_COMMAND})
#   BUILD_DIR  the build tree (built)
#   LIBDIR     GNUInstallDirs' CMAKE_INSTALL_LIBDIR (lib, lib64, ...)
#   MAN        1 if the build made man pages (pandoc found), else 0: the man
#              checks are skipped and the test exits 77 (skipped) after all
#              the others pass
#
# Checks: every file the installation promises exists (README.md "Installing"),
# no private header is installed, and the examples are installed without what
# running them in place leaves (outputs, lock files, checkpoints, a built .so); P/bin/shmrun runs with nothing on
# LD_LIBRARY_PATH, loads P's libshmrun.so.0 through RUNPATH $ORIGIN/../LIBDIR,
# and still does after P is moved; P/bin/shmrun-bench runs it (from a copy);
# pkg-config gives exactly -IP/include
# -LP/LIBDIR -lshmrun; a plugin builds against P with those flags alone (and
# -Wl,--no-undefined: every function it calls is in the installed library);
# each man page renders with `man -l` at 80 columns without a warning.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

cmake=$1 build=$2 libdir=$3 man=$4
src=$(cd "$(dirname "$0")/../.." && pwd)
p=$tmp/prefix
unset LD_LIBRARY_PATH

# What running the examples in place leaves (docs/examples/out/, lock files,
# checkpoint directories, a plugin built with the example's Makefile) must not
# be installed: plant one of each beside the examples for this install, when
# the source tree is writable, and remove exactly what was planted.
ex=$src/docs/examples
planted=()
unplant() {
	local f
	for f in "${planted[@]}"; do
		rm -rf "$f"
	done
	[ -z "${made_out:-}" ] || rmdir "$ex/out" 2> /dev/null || true
	planted=()
	made_out=
}
if [ -w "$ex" ] && [ -w "$ex/plugins" ]; then
	[ -d "$ex/out" ] || { mkdir "$ex/out" && made_out=1; }
	planted+=("$ex/out/install-test-$$.tsv" "$ex/out/.install-test-$$.tsv.lock"
		  "$ex/install-test-$$.ckpt" "$ex/plugins/install-test-$$.so")
	trap 'unplant; cleanup' EXIT
	touch "$ex/out/install-test-$$.tsv" "$ex/out/.install-test-$$.tsv.lock" \
		"$ex/plugins/install-test-$$.so"
	mkdir "$ex/install-test-$$.ckpt" && touch "$ex/install-test-$$.ckpt/MANIFEST"
fi
"$cmake" --install "$build" --prefix "$p" > "$tmp/log" 2>&1 || { unplant; fail "cmake --install failed"; }
unplant

# 1. the files
version=$(sed -n 's/^project(shmrun VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[ -n "$version" ] || fail "no version in CMakeLists.txt"
files=(bin/shmrun bin/shmrun-bench
       "$libdir/libshmrun.so" "$libdir/libshmrun.so.0" "$libdir/libshmrun.so.$version"
       "$libdir/pkgconfig/shmrun.pc" share/doc/shmrun/README.md)
for h in operator job runtime placement idle; do
	files+=("include/shmrun/$h.h")
done
if [ "$man" = 1 ]; then
	files+=(share/man/man1/shmrun.1 share/man/man5/topology.conf.5
		share/man/man3/shmrun-operator.3)
fi
for f in "${files[@]}"; do
	[ -f "$p/$f" ] || fail "not installed: $f"
done
[ -x "$p/bin/shmrun" ] && [ -x "$p/bin/shmrun-bench" ] || fail "bin/ not executable"
[ "$(readlink "$p/$libdir/libshmrun.so.0")" = "libshmrun.so.$version" ] ||
	fail "libshmrun.so.0 -> $(readlink "$p/$libdir/libshmrun.so.0"), not libshmrun.so.$version"
# exactly the public headers: ring.h, segment.h and runtime/*.h stay private
got=$(cd "$p/include" && find . -type f | sort | tr '\n' ' ')
[ "$got" = "./shmrun/idle.h ./shmrun/job.h ./shmrun/operator.h ./shmrun/placement.h ./shmrun/runtime.h " ] ||
	fail "include/ holds: $got"
# the examples, recursively, as they are in docs/examples/, without what
# running them leaves
(cd "$src/docs/examples" && find . \( -name out -o -name '*.ckpt' \) -prune -o -type f \
	! -name '.*.lock' ! -name '*.so' -print | sort) > "$tmp/want_examples"
(cd "$p/share/shmrun/examples" && find . -type f | sort) > "$tmp/got_examples" ||
	fail "share/shmrun/examples/ not installed"
diff "$tmp/want_examples" "$tmp/got_examples" > "$tmp/log" || fail "examples differ from docs/examples/"
while read -r f; do
	cmp -s "$src/docs/examples/$f" "$p/share/shmrun/examples/$f" || fail "example $f differs"
done < "$tmp/want_examples"

# 2. bin/shmrun finds the installed library, from anywhere
runpath=$(readelf -d "$p/bin/shmrun" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
[ "$runpath" = "\$ORIGIN/../$libdir" ] || fail "RUNPATH of bin/shmrun is '$runpath', not \$ORIGIN/../$libdir"
readelf -d "$p/$libdir/libshmrun.so.$version" | qgrep 'Library soname: \[libshmrun\.so\.0\]' ||
	fail "the installed library's SONAME is not libshmrun.so.0"
check_runs() { # PREFIX
	local out loaded
	out=$(cd / && "$1/bin/shmrun" --version 2>&1) || fail "$1/bin/shmrun --version: $out"
	[ "$(head -1 <<< "$out")" = "shmrun $version" ] || fail "$1/bin/shmrun --version says: $out"
	loaded=$(LD_TRACE_LOADED_OBJECTS=1 "$1/bin/shmrun" | awk '$1 == "libshmrun.so.0" {print $3}')
	[ "$(realpath "$loaded")" = "$(realpath "$1/$libdir/libshmrun.so.$version")" ] ||
		fail "$1/bin/shmrun loads libshmrun.so.0 from '$loaded', not from $1/$libdir"
}
check_runs "$p"
mv "$p" "$tmp/moved"
check_runs "$tmp/moved"
mv "$tmp/moved" "$p"
# bin/shmrun-bench runs bin/shmrun from a copy in a temporary directory, with
# a copy of the prefix's library (tools/bench/bench_job.c)
out=$(cd / && "$p/bin/shmrun-bench" shuffle --quick 2>&1) || fail "$p/bin/shmrun-bench shuffle --quick: $out"
grep -q '^shuffle workers=2 mrec_s=' <<< "$out" || fail "shmrun-bench shuffle printed no result: $out"
# a subcommand that reads the installed example (check validates only)
out=$("$p/bin/shmrun" check "$p/share/shmrun/examples/wordcount.conf" 2>&1) ||
	fail "shmrun check of the installed example: $out"

# 3. pkg-config, and a plugin built with its flags alone
export PKG_CONFIG_PATH=$p/$libdir/pkgconfig
flags=$(pkg-config --cflags --libs shmrun) || fail "pkg-config does not find shmrun in $PKG_CONFIG_PATH"
# shellcheck disable=SC2086
flags=$(echo $flags) # pkg-config ends the line with a blank
[ "$flags" = "-I$p/include -L$p/$libdir -lshmrun" ] || fail "pkg-config --cflags --libs shmrun: '$flags'"
[ "$(pkg-config --modversion shmrun)" = "$version" ] || fail "pkg-config --modversion: $(pkg-config --modversion shmrun)"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror -shared -fPIC -Wl,--no-undefined -o "$tmp/plugin.so" \
	"$src/tests/abi/c_plugin.c" $(pkg-config --cflags --libs shmrun) > "$tmp/log" 2>&1 ||
	fail "a plugin does not build against the prefix with pkg-config's flags"
nm -D --defined-only "$tmp/plugin.so" | qgrep ' D shmrun_plugin$' || fail "plugin.so does not export shmrun_plugin"

# 4. the man pages render without a warning
if [ "$man" != 1 ]; then
	echo "skipped: man pages (pandoc was not found when $build was configured)" >&2
	exit 77
fi
command -v man > /dev/null || fail "man not found (man-db; tools/bootstrap.sh installs it)"
# at every usual terminal width: tbl tables once warned at 60, 90 and 120 only
for page in "$p"/share/man/man*/*; do
	for width in 60 80 90 120 200; do
		warnings=$(MANWIDTH=$width man --warnings -l "$page" 2>&1 > "$tmp/page") ||
			fail "man -l $page failed: $warnings"
		[ -z "$warnings" ] || fail "MANWIDTH=$width man -l $(basename "$page") warns:
$warnings"
	done
	grep -q '^NAME' "$tmp/page" && grep -q '^SYNOPSIS' "$tmp/page" ||
		fail "$(basename "$page") has no NAME or SYNOPSIS section"
done
echo "ok: installed into a prefix, shmrun runs from it (also moved), pkg-config and a plugin build, $(ls "$p"/share/man/man*/* | wc -l) man pages render cleanly at widths 60 to 200"
