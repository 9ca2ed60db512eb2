#!/usr/bin/env bash
# tests/integration/sockets.sh SHMRUN: socket_source (runtime/ops/socket_source.c)
# against python3 peers (socket_peer.py beside this file).
#   - TCP listen, line framing (`listen = 0`: the chosen port is read from the
#     start line "listening on 127.0.0.1:PORT (tcp, line)"): 20000 lines and a
#     final line without '\n' arrive exactly, in order; SIGTERM ends the run
#     (exit 143, no checkpoint_dir) with everything written;
#   - length framing: frames with blanks, tabs and an empty one, exactly;
#   - IPv6: `listen = [::1]:0` (where the machine has ::1);
#   - UDP, line and length framing: every line of every datagram once;
#   - max_connections = 2: a third connection is closed at once, one
#     warning for a burst of four; after one of the two ends, a new
#     connection is served;
#   - max_record = 16: a longer line closes that connection with a warning
#     naming the peer, the lines before it arrive, the job goes on;
#   - connect mode against a python server: the job ends by itself (exit 0)
#     when the server closes, with every line;
#   - 8 concurrent senders: every line exactly once, as a multiset;
#   - width 2 on one fixed port (SO_REUSEPORT): two instances listen, every
#     line of 8 connections arrives once;
#   - backpressure: a sender of 45 MB into a source held to 50000 records/s
#     is still blocked after 1 s (its send() waits: TCP flow control), then
#     finishes; nothing is lost; the worker's peak RSS stays under 64 MB;
#   - with checkpoint_dir and allow_data_loss_on_crash: a stop takes the
#     final checkpoint (exit 0) with every line sent; the rerun resumes,
#     listens again, and appends;
#   - refused with file:line, exit 2: checkpoint_dir without
#     allow_data_loss_on_crash; listen and connect both; neither; port
#     70000; a bare port for connect; udp with connect; listen = 0 at width
#     2; max_record above the ring's largest record. `shmrun check` does not
#     bind: it passes while another socket holds the port.
set -euo pipefail
shmrun=${1:?usage: sockets.sh path/to/shmrun}
export LC_ALL=C
. "$(dirname "$0")/lib.sh"
command -v python3 > /dev/null || { echo "skipped: no python3" >&2; exit 77; }
peer="python3 $(dirname "$0")/socket_peer.py"
d=$tmp/job; mkdir -p "$d"
peers=()
cleanup_peers() {
	for p in "${peers[@]}"; do kill "$p" 2> /dev/null || true; done
	cleanup
}
trap cleanup_peers EXIT

conf() { # FILE SOURCE-KEYS [JOB-KEYS] [SINK-KEYS]
	cat > "$1" <<CONF
[job]
${3:-}
[in]
op = socket_source
$2
[out]
op = file_sink
input = in
path = out.txt
${4:-}
CONF
}
start() { # CONF [OPTION...]: run it in the background; sets launcher and port
	"$shmrun" "${@:2}" "$1" 2> "$tmp/log" &
	launcher=$!
	port=
	for _ in $(seq 600); do
		port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$tmp/log" | head -1)
		[ -n "$port" ] && return 0
		kill -0 "$launcher" 2> /dev/null || fail "the job exited before listening"
		sleep 0.05
	done
	fail "no 'listening on' line"
}
wait_lines() { # N FILES...: until FILES hold N lines together (30 s)
	local n=$1
	shift
	for _ in $(seq 600); do
		[ "$(cat "$@" 2> /dev/null | wc -l)" -ge "$n" ] && return 0
		sleep 0.05
	done
	return 1
}
stop() { # stop the background job with SIGTERM; it must exit 143
	local rc=0
	kill -TERM "$launcher"
	wait "$launcher" || rc=$?
	launcher=
	[ "$rc" = 143 ] || fail "SIGTERM of a listening job exited $rc, want 143"
}

# ---- 1. TCP, line framing -----------------------------------------------------
conf "$d/line.conf" "listen = 0"
start "$d/line.conf"
grep -q "stage 'in' \[0\]: listening on 127.0.0.1:$port (tcp, line)" "$tmp/log" || fail "start line"
{ seq 1 20000; printf 'last without newline'; } > "$tmp/lines"
$peer send 127.0.0.1 "$port" "$tmp/lines"
wait_lines 20001 "$d/out.txt" || fail "lines did not arrive: $(wc -l < "$d/out.txt")"
stop
{ seq 1 20000; echo 'last without newline'; } | cmp -s - "$d/out.txt" || fail "TCP line output differs"
grep -q "in: socket_source cannot be replayed" "$tmp/log" || fail "no at-most-once line"

# ---- 2. length framing ----------------------------------------------------------
conf "$d/len.conf" "listen = 0
framing = length"
start "$d/len.conf"
printf 'a b\nx\ty\n\nlast\n' > "$tmp/frames"
$peer send 127.0.0.1 "$port" "$tmp/frames" length
wait_lines 4 "$d/out.txt" || fail "frames did not arrive"
stop
cmp -s "$tmp/frames" "$d/out.txt" || fail "length output differs: $(od -c "$d/out.txt" | head)"

# ---- 2b. IPv6 loopback, where the machine has it --------------------------------
if python3 -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2> /dev/null; then
	conf "$d/v6.conf" "listen = [::1]:0"
	"$shmrun" "$d/v6.conf" 2> "$tmp/log" &
	launcher=$!
	port=
	for _ in $(seq 600); do
		port=$(sed -n 's/.*listening on \[::1\]:\([0-9]*\) (tcp, line).*/\1/p' "$tmp/log" | head -1)
		[ -n "$port" ] && break
		sleep 0.05
	done
	[ -n "$port" ] || fail "IPv6: no 'listening on [::1]:PORT' line"
	$peer send ::1 "$port" "$tmp/frames"
	wait_lines 4 "$d/out.txt" || fail "IPv6: lines did not arrive"
	stop
	cmp -s "$tmp/frames" "$d/out.txt" || fail "IPv6 output differs"
else
	echo "no IPv6 loopback: its case is skipped" >&2
fi

# ---- 3. UDP ---------------------------------------------------------------------
seq 1 3000 > "$tmp/udp"
for framing in line length; do
	conf "$d/udp.conf" "listen = 0
protocol = udp
framing = $framing"
	start "$d/udp.conf"
	grep -q "listening on 127.0.0.1:$port (udp, $framing)" "$tmp/log" || fail "udp start line"
	$peer $([ $framing = line ] && echo udp || echo udplen) 127.0.0.1 "$port" "$tmp/udp" 10
	wait_lines 3000 "$d/out.txt" || fail "udp $framing: $(wc -l < "$d/out.txt") of 3000 lines"
	stop
	sort -n "$d/out.txt" | cmp -s - "$tmp/udp" || fail "udp $framing output differs"
done

# ---- 4. max_connections -----------------------------------------------------------
conf "$d/max.conf" "listen = 0
max_connections = 2"
start "$d/max.conf"
$peer hold 127.0.0.1 "$port" 1 "$tmp/ready1" "$tmp/stop1" &
peers+=($!)
$peer hold 127.0.0.1 "$port" 1 "$tmp/ready2" "$tmp/stop2" &
peers+=($!)
for _ in $(seq 600); do [ -f "$tmp/ready1" ] && [ -f "$tmp/ready2" ] && break; sleep 0.05; done
wait_lines 2 "$d/out.txt" || fail "the two held connections were not served"
for _ in 1 2 3 4; do
	[ "$($peer probe 127.0.0.1 "$port")" = closed ] || fail "a connection past max_connections was not closed"
done
[ "$(grep -c "max_connections = 2 reached" "$tmp/log")" = 1 ] ||
	fail "want one max_connections warning for the burst, got $(grep -c "max_connections = 2 reached" "$tmp/log")"
touch "$tmp/stop1" # one held connection ends: a new one is served (once the source saw the end)
printf 'after\n' > "$tmp/after"
for _ in $(seq 40); do
	$peer send 127.0.0.1 "$port" "$tmp/after"
	sleep 0.25
	grep -q '^after$' "$d/out.txt" && break
done
touch "$tmp/stop2"
stop
[ "$(grep -c '^held$' "$d/out.txt")" = 2 ] && grep -q '^after$' "$d/out.txt" || fail "max_connections output: $(cat "$d/out.txt")"

# ---- 5. max_record ---------------------------------------------------------------
conf "$d/rec.conf" "listen = 0
max_record = 16"
start "$d/rec.conf"
printf 'short\nthis line is longer than sixteen\nnever\n' > "$tmp/long"
$peer send 127.0.0.1 "$port" "$tmp/long"
printf 'next\n' > "$tmp/next"
$peer send 127.0.0.1 "$port" "$tmp/next"
wait_lines 2 "$d/out.txt" || fail "max_record: lines did not arrive"
stop
[ "$(sort "$d/out.txt" | tr '\n' ' ')" = "next short " ] || fail "max_record output: $(cat "$d/out.txt")"
grep -q "WARN .*connection from 127.0.0.1:[0-9]* sent a record longer than max_record = 16 bytes: connection closed" \
	"$tmp/log" || fail "no warning naming the peer"

# ---- 6. connect mode --------------------------------------------------------------
seq 1 5000 > "$tmp/served"
$peer serve "$tmp/port" "$tmp/served" &
peers+=($!)
for _ in $(seq 200); do [ -s "$tmp/port" ] && break; sleep 0.05; done
conf "$d/conn.conf" "connect = 127.0.0.1:$(cat "$tmp/port")"
timeout 60 "$shmrun" "$d/conn.conf" 2> "$tmp/log" || fail "connect mode did not end with exit 0"
cmp -s "$tmp/served" "$d/out.txt" || fail "connect mode output differs"
grep -q "connected to 127.0.0.1:$(cat "$tmp/port") (tcp, line)" "$tmp/log" || fail "no 'connected to' line"

# ---- 7. concurrent senders -------------------------------------------------------
conf "$d/many.conf" "listen = 0"
start "$d/many.conf"
$peer many 127.0.0.1 "$port" 8 5000
wait_lines 40000 "$d/out.txt" || fail "8 senders: $(wc -l < "$d/out.txt") of 40000 lines"
stop
for i in $(seq 0 7); do for k in $(seq 0 4999); do echo "c$i-$k"; done; done | sort > "$tmp/want"
sort "$d/out.txt" | cmp -s - "$tmp/want" || fail "8 senders: not every line exactly once"

# ---- 8. width 2 on one port -------------------------------------------------------
p=$($peer freeport)
conf "$d/w2.conf" "listen = $p
width = 2" "workers = 2" "width = 2"
start "$d/w2.conf"
for _ in $(seq 200); do [ "$(grep -c "listening on 127.0.0.1:$p " "$tmp/log")" = 2 ] && break; sleep 0.05; done
[ "$(grep -c "listening on 127.0.0.1:$p (tcp, line)" "$tmp/log")" = 2 ] || fail "width 2: not two instances listening"
$peer many 127.0.0.1 "$p" 8 2000
wait_lines 16000 "$d"/out.txt.0 "$d"/out.txt.1 || fail "width 2: lines missing"
stop
for i in $(seq 0 7); do for k in $(seq 0 1999); do echo "c$i-$k"; done; done | sort > "$tmp/want"
sort "$d"/out.txt.[01] | cmp -s - "$tmp/want" || fail "width 2: not every line exactly once"

# ---- 9. backpressure --------------------------------------------------------------
conf "$d/bp.conf" "listen = 0
rate = 50000"
start "$d/bp.conf"
$peer blast 127.0.0.1 "$port" 300000 150 "$tmp/progress" &
blaster=$!
peers+=($blaster)
sleep 1
sent=$(cat "$tmp/progress" 2> /dev/null || echo 0)
case $sent in done*) fail "the sender of 45 MB was not held back (finished within 1 s)" ;; esac
[ "$sent" -lt 45000000 ] || fail "sent $sent bytes in 1 s"
wait "$blaster" || fail "the sender failed"
grep -q "^done 45000000$" "$tmp/progress" || fail "sender: $(cat "$tmp/progress")"
wait_lines 300000 "$d/out.txt" || fail "backpressure: $(wc -l < "$d/out.txt") of 300000 lines"
w=$(first_child "$launcher")
hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$w/status")
[ "$hwm" -lt 65536 ] || fail "worker peak RSS $hwm kB"
stop
awk '{ sub(/\.+$/, ""); print }' "$d/out.txt" | cmp -s - <(seq 0 299999) || fail "backpressure: lines lost or reordered"

# ---- 9b. a stop while a sender is held back: its unread bytes are named -------
conf "$d/bp2.conf" "listen = 0
rate = 2000"
start "$d/bp2.conf"
$peer blast 127.0.0.1 "$port" 300000 150 "$tmp/progress2" &
blaster=$!
peers+=($blaster)
sleep 1
kill -TERM "$launcher"
rc=0
wait "$launcher" || rc=$?
launcher=
[ "$rc" = 143 ] || fail "stop with a held-back sender: exit $rc, want 143"
kill "$blaster" 2> /dev/null || true # it sees the reset, or would send for long
wait "$blaster" 2> /dev/null || true
grep -Eq "stage 'in' \[0\]: closing 1 connection with [0-9]+ bytes not yet read: they are lost \(a socket cannot be replayed" "$tmp/log" ||
	fail "a stop with unread bytes did not say so: $(tail -5 "$tmp/log")"
echo "ok a stop names the unread bytes it drops"

# ---- 10. with checkpoints (allow_data_loss_on_crash): a stop, then a resume ----
conf "$d/ck.conf" "listen = 0" "checkpoint_dir = ck
allow_data_loss_on_crash = true"
seq 1 1000 > "$tmp/ck1"
seq 1001 1500 > "$tmp/ck2"
for part in 1 2; do
	start "$d/ck.conf"
	$peer send 127.0.0.1 "$port" "$tmp/ck$part"
	wait_lines $((part * 1000 - (part - 1) * 500)) "$d/out.txt" || fail "checkpointed run $part: lines missing"
	rc=0
	kill -TERM "$launcher"
	wait "$launcher" || rc=$?
	launcher=
	[ "$rc" = 0 ] || fail "a stop with checkpoint_dir exited $rc, want 0"
	grep -q "in: socket_source cannot be replayed: records read since the last checkpoint are lost on a crash (at-most-once)" \
		"$tmp/log" || fail "no at-most-once line with checkpoint_dir"
done
grep -q "restoring epoch" "$tmp/log" || fail "the second run did not resume: $(cat "$tmp/log")"
seq 1 1500 | cmp -s - "$d/out.txt" || fail "stop and resume with checkpoints: output differs"
# listen is where, not what (no state depends on it): a resume may listen at
# another address; it once refused the checkpoint as another topology
seq 1501 1600 > "$tmp/ck3"
start "$d/ck.conf" --set in.listen=127.0.0.1:0
$peer send 127.0.0.1 "$port" "$tmp/ck3"
wait_lines 1600 "$d/out.txt" || fail "resume at another listen address: lines missing"
kill -TERM "$launcher"
rc=0
wait "$launcher" || rc=$?
launcher=
[ "$rc" = 0 ] || fail "resume at another listen address: the stop exited $rc"
grep -q "restoring epoch" "$tmp/log" || fail "another listen address did not resume: $(cat "$tmp/log")"
seq 1 1600 | cmp -s - "$d/out.txt" || fail "resume at another listen address: output differs"

# ---- 11. refusals -------------------------------------------------------------------
refused() { # WHAT PATTERN CONF
	local rc=0
	"$shmrun" check "$3" > "$tmp/out" 2> "$tmp/log" || rc=$?
	[ "$rc" = 2 ] || fail "$1: exit $rc, want 2"
	grep -q -- "$2" "$tmp/log" || fail "$1: no message matching '$2': $(cat "$tmp/log")"
}
conf "$d/r.conf" "listen = 9000" "checkpoint_dir = ck"
refused "checkpoint_dir" "r.conf:4: stage 'in': op = socket_source cannot be replayed.*allow_data_loss_on_crash = true" "$d/r.conf"
conf "$d/r.conf" "listen = 9000
connect = 127.0.0.1:9000"
refused "listen and connect" "r.conf:6: .*socket_source needs exactly one of listen" "$d/r.conf"
conf "$d/r.conf" "framing = line"
refused "neither" "r.conf:3: .*socket_source needs exactly one of listen" "$d/r.conf"
conf "$d/r.conf" "connect = 127.0.0.1:70000"
refused "port 70000" "r.conf:5: .*connect = '127.0.0.1:70000' has port 70000, outside 1..65535" "$d/r.conf"
conf "$d/r.conf" "listen = 70000"
refused "listen 70000" "r.conf:5: .*listen = '70000' has port 70000, outside 0..65535" "$d/r.conf"
conf "$d/r.conf" "connect = 9000"
refused "bare port" "r.conf:5: .*connect = '9000' has no host" "$d/r.conf"
conf "$d/r.conf" "connect = 127.0.0.1:9000
protocol = udp"
refused "udp connect" "r.conf:6: .*protocol = udp works with listen only" "$d/r.conf"
conf "$d/r.conf" "listen = 0
width = 2" "" "width = 2"
refused "port 0 width 2" "r.conf:5: .*lets the kernel choose the port" "$d/r.conf"
conf "$d/r.conf" "listen = 9000
max_record = 1M" "ring_bytes = 64K"
refused "max_record" "r.conf:6: .*max_record = 1048576 bytes is more than the largest record a ring of this job holds (32736" "$d/r.conf"
conf "$d/r.conf" "listen = 9000
framing = lines"
refused "framing" "r.conf:6: framing = 'lines'" "$d/r.conf"
# check does not bind: it passes while the port is taken
python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1)
open(sys.argv[2], "w").write("ok\n"); time.sleep(30)' "$p" "$tmp/bound" &
holder=$!
peers+=($holder)
for _ in $(seq 200); do [ -s "$tmp/bound" ] && break; sleep 0.05; done
conf "$d/busy.conf" "listen = $p"
"$shmrun" check "$d/busy.conf" > "$tmp/out" 2> "$tmp/log" || fail "check of a taken port failed: it must not bind"
rc=0; "$shmrun" "$d/busy.conf" 2> "$tmp/log" || rc=$?
[ "$rc" = 1 ] || fail "a run on a taken port exited $rc, want 1"
grep -q "cannot listen on $p (tcp): Address already in use; another program" "$tmp/log" || fail "no message for a taken port"
kill "$holder" 2> /dev/null || true
echo "sockets: ok"
