#!/usr/bin/env bash
# tests/integration/wordcount.sh SHMRUN: word count through shmrun equals a
# coreutils reference, for several worker counts and widths that do not divide
# evenly, over generated edge-case input and over real text that ships with Debian.
#
# Reference (LC_ALL=C): tokens are maximal [A-Za-z0-9] runs, lower-cased; a file
# boundary ends a token; `sort | uniq -c`.
set -euo pipefail
shmrun=${1:?usage: wordcount.sh path/to/shmrun}
export LC_ALL=C
. "$(dirname "$0")/lib.sh"

# reference FILE... -> "word<TAB>count" lines, sorted
reference() {
	for f in "$@"; do
		tr -c 'A-Za-z0-9' '\n' < "$f"
		echo
	done | tr 'A-Z' 'a-z' | grep -v '^$' | sort | uniq -c | awk '{print $2 "\t" $1}' | sort
}

# Edge-case input: empty files, no final newline, CRLF, NUL bytes, non-UTF-8
# bytes, a long line, tokens split only by a file boundary.
mkdir -p "$tmp/in/sub"
: > "$tmp/in/empty.txt"
printf 'no final newline here' > "$tmp/in/nofinal.txt"
printf 'crlf\r\nLines\r\nCRLF end\r\n' > "$tmp/in/crlf.txt"
printf 'nul\0bytes\0in the\0middle\nA\0b\n' > "$tmp/in/nul.txt"
printf 'caf\xc3\xa9 na\xefve \xff\xfe bytes\xe2\x80\x94dash\n' > "$tmp/in/latin.txt"
head -c 300000 /dev/zero | tr '\0' 'x' > "$tmp/in/sub/long.txt"
printf ' tail\nabc' > "$tmp/in/sub/join1.txt"
printf 'def more\n' > "$tmp/in/sub/join2.txt"
for i in $(seq 1 40); do
	seq 1 $((i * 37)) | sed "s/^/Word$i w/" > "$tmp/in/sub/gen$i.txt"
done

run_case() { # name workers wread wwords wcount wout piece_bytes
	local name=$1 workers=$2 wr=$3 ww=$4 wc=$5 wo=$6 piece=$7
	local conf="$tmp/$name.conf"
	cat > "$conf" <<CONF
[job]
workers = $workers
ring_bytes = 1M
[read]
op = file_source
path = in
piece_bytes = $piece
width = $wr
[words]
op = tokenize
input = read
width = $ww
[count]
op = count
input = words by key
width = $wc
[out]
op = file_sink
input = count
path = out/$name.tsv
width = $wo
CONF
	"$shmrun" --log-level warn "$conf" 2> "$tmp/$name.log" || {
		cat "$tmp/$name.log" >&2
		fail "$name: shmrun exited $?"
	}
	if [ "$wo" -eq 1 ]; then
		sort "$tmp/out/$name.tsv" > "$tmp/$name.got"
	else
		cat "$tmp/out/$name.tsv".* | sort > "$tmp/$name.got"
	fi
	diff -q "$tmp/expected" "$tmp/$name.got" > /dev/null || {
		diff "$tmp/expected" "$tmp/$name.got" | head -20 >&2 || true
		fail "$name: output differs from the coreutils reference"
	}
	echo "ok $name"
}

mapfile -t files < <(find "$tmp/in" -type f | sort)
reference "${files[@]}" > "$tmp/expected"
[ -s "$tmp/expected" ] || fail "empty reference"

run_case w1 1 1 1 1 1 32M
run_case w2 2 2 2 4 1 32M
run_case w3_uneven 3 2 2 5 2 4K
run_case w5_uneven 5 3 3 7 3 1K
run_case w2_tiny_pieces 2 3 3 2 1 64

# Real input shipped with Debian, as in docs/examples/wordcount.conf.
if [ -d /usr/lib/python3.11 ]; then
	mapfile -t real < <( (find /usr/lib/python3.11 -type f -name '*.py'; \
			      for f in /usr/share/common-licenses/*; do [ -f "$f" ] && echo "$f"; done) | sort -u)
	reference "${real[@]}" > "$tmp/expected"
	cat > "$tmp/real.conf" <<CONF
[job]
workers = 2
[read]
op = file_source
path = /usr/lib/python3.11 /usr/share/common-licenses/*
match = *.py
width = 2
[words]
op = tokenize
input = read
width = 2
[count]
op = count
input = words by key
width = 4
[out]
op = file_sink
input = count
path = out/real.tsv
CONF
	"$shmrun" --log-level warn "$tmp/real.conf" 2> "$tmp/real.log" || { cat "$tmp/real.log" >&2; fail "real: exit $?"; }
	sort "$tmp/out/real.tsv" > "$tmp/real.got"
	diff -q "$tmp/expected" "$tmp/real.got" > /dev/null || { diff "$tmp/expected" "$tmp/real.got" | head >&2 || true; fail "real: differs"; }
	echo "ok real ($(wc -l < "$tmp/real.got") distinct words)"
fi
echo "wordcount: all cases equal the coreutils reference"
