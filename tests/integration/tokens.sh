#!/usr/bin/env bash
# tests/integration/tokens.sh SHMRUN: the tokenizer's output equals coreutils'
# on input that is hard for a vectorised scanner (issue 10 item 4): CRLF line
# ends, NUL bytes, every byte value 0x80-0xff, empty lines and runs of them, a
# 300 KB line of many words, a 300 KB single word (a key of 300 KB through a
# shuffle: ring_bytes = 1M), words of every length 1..100 around 16- and
# 64-byte block edges, lines ending and starting with letters, a file without
# final newline before another file, and pseudo-random bytes of every value.
# Word counts with workers = 1 and 2, big and tiny pieces, lowercase = true
# and false, and tokenize fed by a direct call (equal widths) or over a ring.
#
# Reference (LC_ALL=C): tokens are maximal [A-Za-z0-9] runs; a file boundary
# ends a token; lower-cased with tr unless lowercase = false; `sort | uniq -c`.
set -euo pipefail
shmrun=${1:?usage: tokens.sh path/to/shmrun}
export LC_ALL=C
. "$(dirname "$0")/lib.sh"

# reference LOWER FILE... -> "word<TAB>count" lines, sorted
reference() {
	local lower=$1
	shift
	for f in "$@"; do
		tr -c 'A-Za-z0-9' '\n' < "$f"
		echo
	done | if [ "$lower" = true ]; then tr 'A-Z' 'a-z'; else cat; fi |
		grep -v '^$' | sort | uniq -c | awk '{print $2 "\t" $1}' | sort
}

mkdir -p "$tmp/in"
printf 'Alpha beta\r\nGAMMA\r\n\r\ndelta\r\n' > "$tmp/in/crlf.txt"
printf 'nul\0Bytes\0\0in\0the\0MIDDLE\n\0\0\0\nA\0b\0C\n\0' > "$tmp/in/nul.txt"
# every byte 0x80..0xff between letters, and alone on lines
gawk 'BEGIN { for (c = 128; c < 256; c++) printf "x%cY%c\n%c\n", c, c, c }' > "$tmp/in/high.txt"
printf '\n\n\nword\n\n\n\n\n\n\nWord\n\n\n' > "$tmp/in/empty_lines.txt"
: > "$tmp/in/empty.txt"
# one 300 KB line of words; one 300 KB word
gawk 'BEGIN { srand(7); while (n < 300000) { w = sprintf("w%dQ%c", int(rand() * 500), 97 + int(rand() * 26)); printf "%s ", w; n += length(w) + 1 } printf "\n" }' > "$tmp/in/long_line.txt"
head -c 300000 /dev/zero | tr '\0' 'K' > "$tmp/in/long_word.txt"
# words of every length 1..100 at shifting offsets, lines ending/starting with letters
gawk 'BEGIN { for (l = 1; l <= 100; l++) { pad = ""; for (i = 0; i < l % 17; i++) pad = pad "."; w = ""; for (i = 0; i < l; i++) w = w substr("aBc9", i % 4 + 1, 1); print pad w; print w } }' > "$tmp/in/lengths.txt"
printf 'abc' > "$tmp/in/nofinal.txt"
printf 'def\nghi' > "$tmp/in/nofinal2.txt"
# pseudo-random bytes of every value, 1 MB, deterministic
gawk 'BEGIN { srand(42); for (i = 0; i < 1000000; i++) { r = int(rand() * 4); if (r == 0) printf "%c", int(rand() * 256); else if (r == 1) printf "%c", 65 + int(rand() * 58); else if (r == 2) printf "%c", 48 + int(rand() * 10); else printf "%c", (rand() < 0.5 ? 10 : 13) } }' > "$tmp/in/random.bin"
[ "$(wc -c < "$tmp/in/random.bin")" -eq 1000000 ] || fail "gawk did not write 1000000 bytes"
grep -qaP '\x00' "$tmp/in/random.bin" || fail "random.bin has no NUL byte"

mapfile -t files < <(find "$tmp/in" -type f | sort)

run_case() { # name workers wcount lowercase piece_bytes [wread]
	local name=$1 workers=$2 wc=$3 lower=$4 piece=$5 wr=${6:-$2}
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
width = $workers
lowercase = $lower
[count]
op = count
input = words by key
width = $wc
[out]
op = file_sink
input = count
path = out/$name.tsv
CONF
	"$shmrun" --log-level warn "$conf" 2> "$tmp/log" || fail "$name: shmrun exited $?"
	sort "$tmp/out/$name.tsv" > "$tmp/$name.got"
	diff -q "$tmp/expected.$lower" "$tmp/$name.got" > /dev/null || {
		diff "$tmp/expected.$lower" "$tmp/$name.got" | head -20 | cut -c1-200 >&2 || true
		fail "$name: output differs from the coreutils reference"
	}
	echo "ok $name ($(wc -l < "$tmp/$name.got") distinct words)"
}

for lower in true false; do
	reference "$lower" "${files[@]}" > "$tmp/expected.$lower"
	[ -s "$tmp/expected.$lower" ] || fail "empty reference"
done
# the reference itself sees what the input was made for
awk -F'\t' 'length($1) == 300000 && $1 ~ /^k+$/ && $2 == 1 { found = 1 } END { exit !found }' \
	"$tmp/expected.true" || fail "reference lacks the 300 KB word"
grep -qx 'word	2' "$tmp/expected.true" || fail "reference: word should count 2"
grep -qx 'Word	1' "$tmp/expected.false" || fail "reference (lowercase false): Word should count 1"

run_case w1 1 1 true 32M
run_case w1_keep_case 1 1 false 32M
run_case w2 2 3 true 32M
run_case w2_keep_case 2 2 false 4K
run_case w2_tiny_pieces 2 2 true 64
# read -> words over a ring (widths 1 -> 2: rebalance), not a direct call:
# records reach tokenize in batches off the ring (process_batch())
run_case w2_ring_in 2 2 true 1M 1
run_case w2_ring_in_keep_case 2 3 false 4K 1
echo "tokens: all cases equal the coreutils reference"
