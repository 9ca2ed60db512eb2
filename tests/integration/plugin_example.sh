#!/usr/bin/env bash
# tests/integration/plugin_example.sh SHMRUN: the example plugin of
# docs/examples/plugins, as a user gets it (issue 11 §6). Installs the build
# tree of SHMRUN into a temporary prefix, copies the installed example out of
# it, builds dpkg.so there with its Makefile and pkg-config against the prefix
# only, runs the installed shmrun on dpkg.conf over a copy of
# /var/log/dpkg.log, and compares both outputs with an independent awk oracle
# over the same copy. Then the same over the checked-in dpkg.log.sample, whose
# malformed lines the plugin must count as the oracle does; a run with
# checkpoints in which a worker is killed with SIGKILL, whose output must
# still equal the oracle's; and `shmrun check` refusing a bad key of the
# plugin with file:line.
#
set -euo pipefail
shmrun=${1:?usage: plugin_example.sh path/to/shmrun}
export LC_ALL=C
src=$(cd "$(dirname "$0")/../.." && pwd)
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
[ -n "$pc" ] || fail "cmake --install put no shmrun.pc under $prefix/lib"
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
# The installed shmrun finds its libshmrun.so.0 through its RUNPATH
# ($ORIGIN/../lib), and dpkg.so resolves against that copy: no LD_LIBRARY_PATH.
unset LD_LIBRARY_PATH
[ -f "$libdir/libshmrun.so.0" ] || fail "no $libdir/libshmrun.so.0"

# The user's copy, built out of tree with the example's own Makefile.
cp -r "$ex" "$tmp/ex"
chmod -R u+w "$tmp/ex"
rm -rf "$tmp/ex/dpkg.so" "$tmp/ex/out"
make -C "$tmp/ex" CFLAGS="-O2 -Wall -Wextra -Werror" > "$tmp/make.log" 2>&1 ||
	{ cat "$tmp/make.log" >&2; fail "make of the installed example failed"; }
[ -f "$tmp/ex/dpkg.so" ] || fail "make built no dpkg.so"
nm -D --defined-only "$tmp/ex/dpkg.so" | qgrep -w shmrun_plugin ||
	fail "dpkg.so does not export shmrun_plugin"

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

# setup NAME LOG: $tmp/NAME/ with a copy of LOG as dpkg.log, dpkg.so, and
# dpkg.conf reading it; the oracle's answer in $tmp/want.*, and its counts in
# $lines, $records, $malformed.
setup() {
	local name=$1 log=$2 dir=$tmp/$1
	mkdir -p "$dir"
	cp "$log" "$dir/dpkg.log"
	ln -s "$tmp/ex/dpkg.so" "$dir/dpkg.so"
	sed "s|^path = /var/log/dpkg.log\$|path = dpkg.log|" "$tmp/ex/dpkg.conf" > "$dir/dpkg.conf"
	grep -qx "path = dpkg.log" "$dir/dpkg.conf" || fail "dpkg.conf: no 'path = /var/log/dpkg.log'"
	oracle "$dir/dpkg.log" "$keep" > "$dir/oracle.txt"
	read -r lines records malformed < "$dir/oracle.txt"
	[ "$records" -gt 0 ] && [ -s "$tmp/want.packages" ] && [ -s "$tmp/want.actions" ] ||
		fail "$name: the oracle found no records in $lines lines"
}

# compare NAME: both outputs of $tmp/NAME equal the oracle's, sorted.
compare() {
	local name=$1 dir=$tmp/$1 out got
	for out in packages actions; do
		got=$dir/out/$out.tsv
		[ -f "$got" ] || fail "$name: no $got"
		sort "$got" > "$dir/$out.got"
		diff "$tmp/want.$out" "$dir/$out.got" > "$dir/$out.diff" ||
			{ head -20 "$dir/$out.diff" >&2; fail "$name: out/$out.tsv differs from the awk oracle"; }
	done
}

# run_case NAME LOG: dpkg.conf over a copy of LOG, compared with the oracle,
# and the warning counting malformed lines.
run_case() {
	local name=$1 dir=$tmp/$1
	setup "$@"
	"$bin" "$dir/dpkg.conf" > "$tmp/log" 2>&1 || fail "$name: shmrun dpkg.conf exited $?"
	compare "$name"
	if [ "$malformed" -gt 0 ]; then
		grep -q "$malformed lines not in dpkg.log format were skipped" "$tmp/log" ||
			fail "$name: no warning counting the $malformed malformed lines"
	elif grep -q "not in dpkg.log format" "$tmp/log"; then
		fail "$name: a malformed-line warning, but the oracle found none"
	fi
	echo "ok $name: $lines lines, $records records, $malformed malformed;" \
		"$(wc -l < "$dir/packages.got") packages, $(wc -l < "$dir/actions.got") actions"
}

"$bin" check "$tmp/ex/dpkg.conf" > "$tmp/log" 2>&1 || [ ! -r /var/log/dpkg.log ] ||
	fail "shmrun check of the example's dpkg.conf failed"

# This machine's log (it changes whenever apt runs: hence the copy).
log=$ex/dpkg.log.sample
if [ -r /var/log/dpkg.log ] && [ -s /var/log/dpkg.log ]; then
	log=/var/log/dpkg.log
	run_case dpkg.log "$log"
else
	echo "note: /var/log/dpkg.log is missing or empty here; only the sample is used"
fi
# The sample: every kind of line, and 15 malformed ones.
run_case sample "$ex/dpkg.log.sample"
[ "$malformed" -eq 15 ] || fail "sample: the oracle found $malformed malformed lines, not 15"

# SIGKILL of a worker in a run with checkpoints, paced to last about 3 s: the
# job restarts from its last checkpoint and file_sink's output is still
# exactly the oracle's (docs/operators.md, "Testing a plugin").
if [ "$log" = "$ex/dpkg.log.sample" ]; then
	for _ in $(seq 120); do cat "$log"; done > "$tmp/big.log"
	log=$tmp/big.log
fi
setup kill "$log"
sed -i -e 's|^\[job\]$|[job]\ncheckpoint_dir = ckpt\ncheckpoint_interval = 50ms|' \
	-e "s|^path = dpkg.log\$|path = dpkg.log\nrate = $((lines / 3 + 1))|" "$tmp/kill/dpkg.conf"
"$bin" "$tmp/kill/dpkg.conf" > "$tmp/log" 2>&1 &
launcher=$!
wait_manifest "$tmp/kill/ckpt" || fail "kill: no checkpoint within 30 s"
mapfile -t workers < <(pgrep -P "$launcher" || true)
[ "${#workers[@]}" -gt 0 ] || fail "kill: no worker to kill"
kill -9 "${workers[0]}" 2> /dev/null || true
rc=0
wait "$launcher" || rc=$?
launcher=
[ "$rc" -eq 0 ] || fail "kill: shmrun exited $rc after a worker was killed"
compare kill
if grep -q "restart 1 of" "$tmp/log"; then
	echo "ok kill: a worker killed, the job restarted, and the output equals the oracle's"
else
	echo "ok kill: the output equals the oracle's (note: the run ended before the kill landed)"
fi

# A bad key of the plugin is refused by check, at the conf's file:line, as for a built-in.
sed -e "s|^path = /var/log/dpkg.log\$|path = dpkg.log.sample|" \
	-e "s|^actions = .*|actions = instal remove|" "$tmp/ex/dpkg.conf" > "$tmp/ex/bad.conf"
rc=0
"$bin" check "$tmp/ex/bad.conf" > "$tmp/log" 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "check of actions = instal: exit $rc, expected 2"
grep -q "bad.conf:[0-9]*:.*'instal' is not a dpkg.log action" "$tmp/log" ||
	fail "check of actions = instal: no file:line message naming 'instal'"
echo "ok check refuses actions = instal with file:line"

shm_after=$(ls /dev/shm | grep -ci shmrun || true)
[ "$shm_after" -eq "$shm_before" ] || fail "segments left in /dev/shm"
echo "plugin_example: all cases passed"
