#!/usr/bin/env bash
# tools/bootstrap.sh: make a fresh Debian 12 machine ready, then build shmrun into build/.
#
# Installs (only what is missing) every Debian package the build, the tests and the
# examples need, as root or through sudo, then configures and builds build/.
# Idempotent: a second run installs nothing and rebuilds only what changed.
#
# Environment:
#   SHMRUN_BUILD_DIR    build directory (default: build)
#   SHMRUN_CMAKE_ARGS   extra arguments for cmake's configure step; the test
#                       build turns -DSHMRUN_FAULT_INJECTION=ON (the test-only
#                       fault switches) unless these say otherwise
#   SHMRUN_WITH_CLANG=1 also install clang (CI builds with both gcc and clang);
#                       CC=clang then selects it for a new build directory
# The fuzz build (-DSHMRUN_FUZZ=ON in SHMRUN_CMAKE_ARGS, tests/fuzz/README.md)
# also installs clang and libFuzzer's runtime (libclang-rt-dev), with or
# without SHMRUN_WITH_CLANG; it needs CC=clang.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"

packages=(
	build-essential cmake pkg-config
	liburing-dev libjemalloc-dev check libinih-dev libxxhash-dev libnuma-dev
	libpcre2-dev  # extract's regex (runtime/ops/extract.c)
	libjansson-dev     # JSON: --summary, top --json, --json, --log-format=json
	libmicrohttpd-dev  # the Prometheus endpoint ([job] metrics)
	libpq-dev   # postgres_sink (runtime/ops/postgres_sink.c): libpq, the PostgreSQL client library
	postgresql  # the server tests/integration/postgres.sh and tools/bench/postgres.sh start in
	            # a temp dir (initdb, pg_ctl: /usr/lib/postgresql/<version>/bin)
	curl        # scrapes /metrics in tests/integration
	tzdata      # extract's time_zone: /usr/share/zoneinfo
	python3     # ships /usr/lib/python3.11, the main job's real input
	coreutils findutils gawk   # the word-count reference in the tests
	procps      # pgrep, in the process tests
	tmux        # a real terminal for the Ctrl-C test (tests/integration/signals.sh)
	pandoc      # the man pages, from docs/*.md at build time (docs/CMakeLists.txt)
	man-db groff-base  # man -l: tests/integration/install.sh renders each page
	libseccomp-dev     # tests/integration/no_uring.c: io_uring blocked as Docker blocks it
	util-linux         # setpriv, unshare, prlimit, taskset: tests/integration/ci_machines.sh
	libopenmpi-dev openmpi-bin  # [job] hosts > 1: the MPI gateway (SHMRUN_MPI), mpirun
	                            # for the two-"host" tests (docs/multihost.md)
)
if [ "${SHMRUN_WITH_CLANG:-0}" = 1 ]; then
	packages+=(clang)
fi
case " ${SHMRUN_CMAKE_ARGS:-} " in
*-DSHMRUN_FUZZ=ON*) packages+=(clang libclang-rt-dev) ;; # libFuzzer: tests/fuzz/
esac

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" > /dev/null; then
		missing+=("$p")
	fi
done

if [ ${#missing[@]} -gt 0 ]; then
	echo "bootstrap: installing ${missing[*]}" >&2
	if [ "$(id -u)" -eq 0 ]; then
		sudo=()
	elif command -v sudo >/dev/null 2>&1; then
		sudo=(sudo)
	else
		echo "bootstrap: need root or sudo to install: ${missing[*]}" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	"${sudo[@]}" apt-get update -qq
	"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

build=${SHMRUN_BUILD_DIR:-build}
# shellcheck disable=SC2086
cmake -S . -B "$build" -DSHMRUN_FAULT_INJECTION=ON ${SHMRUN_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j "$(nproc)"
