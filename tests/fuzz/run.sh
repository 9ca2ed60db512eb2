#!/usr/bin/env bash
# tests/fuzz/run.sh: run one fuzz harness for ctest (tests/fuzz/tests.cmake).
#
#   run.sh replay HARNESS CORPUS_DIR
#       every file of CORPUS_DIR once (libFuzzer, or replay_main.c's main());
#       fails if any input crashes.
#   run.sh fuzz HARNESS CORPUS_DIR ARTIFACT_DIR [SECONDS]
#       libFuzzer for SECONDS (default $SHMRUN_FUZZ_SECONDS or 60) over a copy of
#       CORPUS_DIR in a temporary directory, so the checked-in corpus is never
#       modified; -timeout=10 per input, -rss_limit_mb=2048. A crashing input is
#       kept as ARTIFACT_DIR/<harness>-crash-<sha1> (or -leak-, -timeout-,
#       -oom-) and the test fails. Prints libFuzzer's final stats (executions).
set -euo pipefail

mode=$1 bin=$2 corpus=$3
name=$(basename "$bin")
case $mode in
replay)
	shopt -s nullglob
	files=("$corpus"/*)
	if [ ${#files[@]} -eq 0 ]; then
		echo "$name: no inputs in $corpus" >&2
		exit 1
	fi
	# ASan's leak check runs at exit: one process for all inputs
	exec "$bin" "${files[@]}"
	;;
fuzz)
	artifacts=$4
	secs=${5:-${SHMRUN_FUZZ_SECONDS:-60}}
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/shmrun-$name.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$tmp/corpus" "$artifacts"
	cp -- "$corpus"/* "$tmp/corpus/"
	cd "$tmp" # whatever a harness writes relative to the cwd stays in the temporary directory
	rc=0
	"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$artifacts/$name-" "$tmp/corpus" || rc=$?
	if [ $rc -ne 0 ]; then
		echo "$name: libFuzzer failed (exit $rc); the input is in $artifacts/ (reproduce: $bin FILE)" >&2
	fi
	exit $rc
	;;
*)
	echo "usage: run.sh replay|fuzz HARNESS CORPUS_DIR [ARTIFACT_DIR [SECONDS]]" >&2
	exit 2
	;;
esac
