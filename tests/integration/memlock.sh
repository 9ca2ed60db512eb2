#!/usr/bin/env bash
# tests/integration/memlock.sh SHMRUN NO_URING: a low RLIMIT_MEMLOCK and a
# small /dev/shm, as CI containers have them (issue 14 §2; docs/ci-machines.md).
#
#   - RLIMIT_MEMLOCK 0 (`prlimit --memlock=0`, what `ulimit -l 0` sets): a
#     checkpointed job, killed once with kill -9, gives the fault-free output
#     and `ckpt verify` passes. shmrun locks no memory itself, but io_uring
#     counts its rings against the limit for a user without CAP_IPC_LOCK
#     (root has it): as root the run is made as `nobody` too (setpriv), where
#     io_uring_setup fails with ENOMEM and the one warning must name
#     "RLIMIT_MEMLOCK is 0 KiB"; where io_uring still works, no line.
#   - the refusal made by seccomp, where the user cannot be changed:
#     io_uring_setup failing with ENOMEM (NO_URING --errno ENOMEM) under
#     RLIMIT_MEMLOCK 64 KiB: the one
#     warning names "RLIMIT_MEMLOCK is 64 KiB" and how to raise it; the output
#     is exact.
#   - a tiny /dev/shm (as root: a mount namespace with a 64 KiB tmpfs there,
#     filled up to the last byte): the job runs and its output is exact,
#     because shmrun's segment and metrics block are memfds, not /dev/shm
#     files; nothing is created in /dev/shm. Skipped with a message when not
#     root (no mount namespace).
set -euo pipefail
shmrun=$(realpath "${1:?usage: memlock.sh path/to/shmrun path/to/no_uring}")
no_uring=$(realpath "${2:?usage: memlock.sh path/to/shmrun path/to/no_uring}")
. "$(dirname "$0")/lib.sh"

command -v prlimit > /dev/null || { echo "skipped: no prlimit (util-linux)" >&2; exit 77; }

conf() { # dir
	cat > "$1/job.conf" <<CONF
[job]
workers = 2
checkpoint_dir = ckpt
checkpoint_interval = 50ms
[gen]
op = sequence
count = 200000
keys = 100
piece_records = 2000
rate = 40000
width = 2
[count]
op = count
input = gen by key
emit = update
width = 3
[out]
op = file_sink
input = count
path = out/result.tsv
width = 2
CONF
}

# check_output DIR WHAT: the committed output is the fault-free one, ckpt verify passes
check_output() {
	cat "$1"/out/result.tsv* | sort | cmp -s - "$tmp/expected" || fail "$2: output differs from the fault-free run"
	"$shmrun" ckpt verify "$1/ckpt" > "$tmp/verify" 2>&1 || { cat "$tmp/verify" >&2; fail "$2: ckpt verify failed"; }
}

mkdir -p "$tmp/ref"
conf "$tmp/ref"
sed -i '/^rate = /d' "$tmp/ref/job.conf"
(cd "$tmp/ref" && "$shmrun" --log-level error job.conf) || fail "the reference run failed"
cat "$tmp"/ref/out/result.tsv* | sort > "$tmp/expected"
[ "$(wc -l < "$tmp/expected")" -eq 200000 ] || fail "reference: want 200000 lines"

# 1. RLIMIT_MEMLOCK 0, a kill -9 on the way
d=$tmp/memlock0
mkdir -p "$d"
conf "$d"
(cd "$d" && exec prlimit --memlock=0 "$shmrun" --log-level info job.conf) 2> "$tmp/log" &
launcher=$!
wait_started || fail "memlock 0: the run did not start"
wait_manifest "$d/ckpt" || fail "memlock 0: no checkpoint"
mapfile -t ws < <(pgrep -P $launcher || true)
[ ${#ws[@]} -gt 0 ] && kill -9 "${ws[0]}" 2> /dev/null
set +e; wait $launcher; rc=$?; set -e
launcher=
[ $rc -eq 0 ] || fail "memlock 0: exit status $rc, want 0"
grep -q "launcher: restart 1 of" "$tmp/log" || fail "memlock 0: the kill -9 was not followed by a restart"
check_output "$d" "memlock 0"
if grep -q "io_uring" "$tmp/log"; then
	[ "$(grep -c "io_uring" "$tmp/log")" -eq 1 ] || fail "memlock 0: more than one line about io_uring"
	qgrep "io_uring is unavailable: io_uring_setup failed with ENOMEM: RLIMIT_MEMLOCK is 0 KiB" "$tmp/log" ||
		fail "memlock 0: io_uring refused, but the line does not name RLIMIT_MEMLOCK"
	echo "ok RLIMIT_MEMLOCK 0: this kernel refuses io_uring; fallback named the limit; output exact"
else
	echo "ok RLIMIT_MEMLOCK 0 as uid $(id -u): io_uring works ($(uname -r); root's rings are not counted); output exact"
fi

# 1b. as root: the same as nobody, whose rings count against the limit
if [ "$(id -u)" = 0 ] && command -v setpriv > /dev/null && id nobody > /dev/null 2>&1; then
	d=$tmp/nobody
	mkdir -p "$d/run"
	conf "$d"
	chmod 711 "$tmp"
	chown -R nobody "$d"
	chmod 700 "$d/run"
	if setpriv --reuid=nobody --regid=nogroup --clear-groups "$shmrun" --version > /dev/null 2>&1; then
		(cd "$d" && setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all \
			env XDG_RUNTIME_DIR="$d/run" prlimit --memlock=0 "$shmrun" --log-level info job.conf) 2> "$tmp/log" ||
			fail "memlock 0 as nobody: the run failed"
		check_output "$d" "memlock 0 as nobody"
		if grep -q "io_uring" "$tmp/log"; then
			[ "$(grep -c "io_uring" "$tmp/log")" -eq 1 ] || fail "memlock 0 as nobody: more than one line about io_uring"
			qgrep -F "WARN  launcher: io_uring is unavailable: io_uring_setup failed with ENOMEM: RLIMIT_MEMLOCK is 0 KiB, too low for the rings (counted without CAP_IPC_LOCK); raise it" "$tmp/log" ||
				fail "memlock 0 as nobody: io_uring refused, but the line does not name RLIMIT_MEMLOCK"
			echo "ok RLIMIT_MEMLOCK 0 as nobody: io_uring refused, one line naming the limit, output exact"
		else
			echo "ok RLIMIT_MEMLOCK 0 as nobody: io_uring works on this kernel ($(uname -r)); output exact"
		fi
	else
		echo "note: nobody cannot run $shmrun: the memlock-as-nobody case is skipped"
	fi
fi

# 2. the refusal, made by seccomp (also for root, whose rings are not counted)
if "$no_uring" --errno ENOMEM true 2> /dev/null; then
	d=$tmp/enomem
	mkdir -p "$d"
	conf "$d"
	(cd "$d" && prlimit --memlock=65536 "$no_uring" --errno ENOMEM "$shmrun" --log-level info job.conf) 2> "$tmp/log" ||
		fail "ENOMEM: the run failed"
	check_output "$d" "ENOMEM"
	[ "$(grep -c "io_uring" "$tmp/log")" -eq 1 ] || fail "ENOMEM: want one line about io_uring"
	qgrep -F "WARN  launcher: io_uring is unavailable: io_uring_setup failed with ENOMEM: RLIMIT_MEMLOCK is 64 KiB, too low for the rings (counted without CAP_IPC_LOCK); raise it: ulimit -l, LimitMEMLOCK=, docker --ulimit memlock=; checkpoints use pwrite+fsync" "$tmp/log" ||
		fail "ENOMEM: the line does not name RLIMIT_MEMLOCK and how to raise it"
	echo "ok io_uring ENOMEM under RLIMIT_MEMLOCK 64 KiB: one line naming the limit, output exact"
else
	echo "note: seccomp filters cannot be installed here: the ENOMEM case is skipped"
fi

# 3. a tiny /dev/shm, full
if [ "$(id -u)" != 0 ] || ! unshare -m true 2> /dev/null; then
	echo "skipped part: a tiny /dev/shm needs root and mount namespaces (unshare -m)"
	exit 0
fi
d=$tmp/devshm
mkdir -p "$d"
conf "$d"
sed -i '/^rate = /d' "$d/job.conf"
cat > "$tmp/in_ns.sh" <<'NS'
set -eu
mount -t tmpfs -o size=64k,mode=1777 tiny-shm /dev/shm
dd if=/dev/zero of=/dev/shm/filler bs=4k 2> /dev/null || true # ENOSPC: full
[ "$(df -k --output=avail /dev/shm | tail -1 | tr -d ' ')" -eq 0 ] || { echo "/dev/shm is not full"; exit 3; }
cd "$1"
rc=0
"$2" --log-level info job.conf || rc=$?
ls -A /dev/shm > "$1/devshm.after"
exit $rc
NS
unshare -m --propagation private sh "$tmp/in_ns.sh" "$d" "$shmrun" 2> "$tmp/log" > "$tmp/ns.out" ||
	fail "tiny /dev/shm: the run failed: $(cat "$tmp/ns.out")"
check_output "$d" "tiny /dev/shm"
[ "$(cat "$d/devshm.after")" = filler ] || fail "tiny /dev/shm: the run created files there: $(cat "$d/devshm.after")"
echo "ok a full 64 KiB /dev/shm: the job runs (memfds), output exact, nothing created in /dev/shm"
