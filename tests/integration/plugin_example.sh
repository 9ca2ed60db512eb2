#!/usr/bin/env bash
# tests/integration/plugin_example.sh SHMRUN: the example plugin of
# docs/examples/plugins, as a user gets it (issue 11 §6). Installs the build
# tree of SHMRUN into a temporary prefix, copies the installed example out of
# it, builds dpkg.so there with make + pkg-config against the prefix only, runs
# the installed shmrun on dpkg.conf over a copy of /var/log/dpkg.log, and
# compares both outputs with an independent awk oracle over the same copy.
# Then the same over the checked-in dpkg.log.sample, whose malformed lines the
# plugin must count as the oracle does, and `shmrun check` refusing a bad key
# of the plugin with file:line.
#
# Skipped (77) while the build has no install rules for shmrun.pc, or its
# shmrun does not know `[job] plugins` (issue 11 §1, §3 not in this build).
set -euo pipefail
shmrun=${1:?usage: plugin_example.sh path/to/shmrun}
export LC_ALL=C
. "$(dirname "$0")/lib.sh"
shm_before=$(ls /dev/shm | grep -ci shmrun || true)

# The build tree: the nearest directory above SHMRUN holding CMakeCache.txt.
build=$(cd "$(dirname "$shmrun")" && pwd)
while [ ! -f "$build/CMakeCache.txt" ]; do
	[ "$build" != / ] || fail "no CMakeCache.txt above $shmrun"
	build=$(dirname "$build")
done

prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" > "$tmp/install.log" 2>&1 ||
	{ cat "$tmp/install.log" >&2; fail "cmake --install $build --prefix $prefix failed"; }
pc=$(find "$prefix/lib" "$prefix/lib64" -path '*/pkgconfig/shmrun.pc' 2> /dev/null | head -1 || true)
if [ -z "$pc" ]; then
	echo "skipped: cmake --install puts no shmrun.pc under $prefix/lib (install rules not in this build)" >&2
	exit 77
fi
pcdir=$(dirname "$pc")
libdir=$(dirname "$pcdir")
bin=$prefix/bin/shmrun
[ -x "$bin" ] || fail "installed $pc but no $bin"
ex=$prefix/share/shmrun/examples/plugins
for f in dpkg.c dpkg.conf Makefile README.md dpkg.log.sample; do
	[ -f "$ex/$f" ] || fail "the install lacks $ex/$f"
done

# pkg-config must point into the prefix, not at another copy of the headers.
export PKG_CONFIG_PATH=$pcdir
inc=$(pkg-config --variable=includedir shmrun)
[ -f "$inc/shmrun/operator.h" ] || fail "shmrun.pc: includedir $inc holds no shmrun/operator.h"
case $(cd "$inc" && pwd -P) in
"$(cd "$prefix" && pwd -P)"/*) ;;
*) fail "shmrun.pc: includedir $inc is outside the prefix $prefix" ;;
esac

# The user's copy, built out of tree with the example's own Makefile.
cp -r "$ex" "$tmp/ex"
chmod -R u+w "$tmp/ex"
make -C "$tmp/ex" CFLAGS="-O2 -Wall -Wextra -Werror" > "$tmp/make.log" 2>&1 ||
	{ cat "$tmp/make.log" >&2; fail "make of the installed example failed"; }
[ -f "$tmp/ex/dpkg.so" ] || fail "make built no dpkg.so"
nm -D --defined-only "$tmp/ex/dpkg.so" | grep -qw shmrun_plugin ||
	fail "dpkg.so does not export shmrun_plugin"
# The installed shmrun finds its libshmrun.so.0 in the prefix, not the build tree.
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# oracle LOG KEEP: what dpkg.conf must write, computed in awk from the format
# alone (docs/examples/plugins/README.md), into $tmp/want.packages and
# $tmp/want.actions (sorted); prints "lines records malformed".
oracle() {
	awk -v keep="$2" -v pkgs="$tmp/want.packages.u" -v acts="$tmp/want.actions.u" '
	BEGIN {
		FS = "[ ]"
		n = split(keep, k, " ")
		for (i = 1; i <= n; i++)
			kept[k[i]] = 1
		split("install upgrade configure trigproc disappear remove purge status", a, " ")
		for (i in a)
			action[a[i]] = 1
	}
	{
		if ($0 ~ /[[:cntrl:]]/ || NF < 3) { malformed++; next }
		for (i = 1; i <= NF; i++)
			if ($i == "")
				break
		if (i <= NF) { malformed++; next }
		if ($1 !~ /^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]$/ ||
		    $2 !~ /^[0-9][0-9]:[0-9][0-9]:[0-9][0-9]$/) { malformed++; next }
		mo = substr($1, 6, 2) + 0; d = substr($1, 9, 2) + 0
		h = substr($2, 1, 2) + 0; mi = substr($2, 4, 2) + 0; s = substr($2, 7, 2) + 0
		if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60) {
			malformed++
			next
		}
		if (($3 == "startup" && NF == 5) || ($3 == "conffile" && NF >= 5))
			next
		if (!($3 in action) || NF != 6) { malformed++; next }
		records++
		if ($3 == "status") { pkg = $5; what = "status " $4 } else { pkg = $4; what = $3 }
		by_action[what]++
		if ($3 in kept)
			by_package[pkg]++
	}
	END {
		printf "" > pkgs
		printf "" > acts
		for (p in by_package)
			print p "\t" by_package[p] > pkgs
		for (w in by_action)
			print w "\t" by_action[w] > acts
		print NR, records + 0, malformed + 0
	}' "$1"
	sort "$tmp/want.packages.u" > "$tmp/want.packages"
	sort "$tmp/want.actions.u" > "$tmp/want.actions"
}

# The `actions =` of [by_package] in dpkg.conf, which the oracle must apply too.
keep=$(sed -n '/^\[by_package\]/,/^\[/s/^actions = *//p' "$tmp/ex/dpkg.conf")
[ -n "$keep" ] || fail "dpkg.conf: no actions = in [by_package]"

# run_case NAME LOG: dpkg.conf over a copy of LOG, compared with the oracle.
run_case() {
	local name=$1 log=$2 dir=$tmp/$1 got
	mkdir -p "$dir"
	cp "$log" "$dir/dpkg.log"
	ln -s "$tmp/ex/dpkg.so" "$dir/dpkg.so"
	sed "s|^path = /var/log/dpkg.log\$|path = dpkg.log|" "$tmp/ex/dpkg.conf" > "$dir/dpkg.conf"
	grep -qx "path = dpkg.log" "$dir/dpkg.conf" || fail "dpkg.conf: no 'path = /var/log/dpkg.log'"
	oracle "$dir/dpkg.log" "$keep" > "$dir/oracle.txt"
	read -r lines records malformed < "$dir/oracle.txt"
	"$bin" "$dir/dpkg.conf" > "$tmp/log" 2>&1 || fail "$name: shmrun dpkg.conf exited $?"
	for out in packages actions; do
		got=$dir/out/$out.tsv
		[ -f "$got" ] || fail "$name: no $got"
		sort "$got" > "$dir/$out.got"
		diff "$tmp/want.$out" "$dir/$out.got" > "$dir/$out.diff" ||
			{ head -20 "$dir/$out.diff" >&2; fail "$name: out/$out.tsv differs from the awk oracle"; }
	done
	[ "$records" -gt 0 ] && [ -s "$tmp/want.packages" ] && [ -s "$tmp/want.actions" ] ||
		fail "$name: the oracle found no records in $lines lines"
	if [ "$malformed" -gt 0 ]; then
		grep -q "$malformed lines not in dpkg.log format were skipped" "$tmp/log" ||
			fail "$name: no warning counting the $malformed malformed lines"
	elif grep -q "not in dpkg.log format" "$tmp/log"; then
		fail "$name: a malformed-line warning, but the oracle found none"
	fi
	echo "ok $name: $lines lines, $records records, $malformed malformed;" \
		"$(wc -l < "$dir/packages.got") packages, $(wc -l < "$dir/actions.got") actions"
}

# Plugin loading: skipped where this shmrun does not know `plugins` yet.
sed "s|^path = /var/log/dpkg.log\$|path = dpkg.log.sample|" "$tmp/ex/dpkg.conf" > "$tmp/ex/sample.conf"
if ! "$bin" check "$tmp/ex/sample.conf" > "$tmp/log" 2>&1; then
	if grep -q "unknown key 'plugins'" "$tmp/log"; then
		echo "skipped: $bin does not load plugins ([job] plugins =) yet" >&2
		exit 77
	fi
	fail "shmrun check of the installed dpkg.conf failed"
fi

# This machine's log (it changes whenever apt runs: hence the copy).
if [ -r /var/log/dpkg.log ] && [ -s /var/log/dpkg.log ]; then
	run_case dpkg.log /var/log/dpkg.log
else
	echo "note: /var/log/dpkg.log is missing or empty here; only the sample is used"
fi
# The sample: every kind of line, and 15 malformed ones.
run_case sample "$ex/dpkg.log.sample"
[ "$malformed" -eq 15 ] || fail "sample: the oracle found $malformed malformed lines, not 15"

# A bad key of the plugin is refused by check, at the conf's file:line, as for a built-in.
sed "s|^actions = .*|actions = instal remove|" "$tmp/ex/sample.conf" > "$tmp/ex/bad.conf"
rc=0
"$bin" check "$tmp/ex/bad.conf" > "$tmp/log" 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "check of actions = instal: exit $rc, expected 2"
grep -q "bad.conf:[0-9]*:.*'instal' is not a dpkg.log action" "$tmp/log" ||
	fail "check of actions = instal: no file:line message naming 'instal'"
echo "ok check refuses actions = instal with file:line"

shm_after=$(ls /dev/shm | grep -ci shmrun || true)
[ "$shm_after" -eq "$shm_before" ] || fail "segments left in /dev/shm"
echo "plugin_example: all cases passed"
