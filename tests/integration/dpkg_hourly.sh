#!/usr/bin/env bash
# tests/integration/dpkg_hourly.sh SHMRUN SOURCE_DIR: docs/examples/dpkg-hourly.conf,
# run as shipped (a copy beside its output), counts the actions of
# /var/log/dpkg.log per hour exactly as awk does over the same file: one
# line "action<TAB>hour start<TAB>hour end<TAB>count" per action and hour,
# hours as ISO-8601 UTC. Skipped (77) on a system without the log.
set -euo pipefail
shmrun=${1:?usage: dpkg_hourly.sh path/to/shmrun SOURCE_DIR}
src=${2:?}
export LC_ALL=C
. "$(dirname "$0")/lib.sh"

log=/var/log/dpkg.log
if [ ! -s $log ]; then
	echo "skipped: no $log" >&2
	exit 77
fi
cp "$log" "$tmp/dpkg.log" # the oracle and the run read the same bytes
sed "s|^path = /var/log/dpkg.log|path = $tmp/dpkg.log|" "$src/docs/examples/dpkg-hourly.conf" > "$tmp/job.conf"
grep -q "^path = $tmp/dpkg.log" "$tmp/job.conf" || fail "the example no longer reads $log"
"$shmrun" "$tmp/job.conf" 2> "$tmp/log" || fail "dpkg-hourly: exit $?"

# The oracle: civil dates to days and back (H. Hinnant's algorithms), so an
# hour's end is right across days, months and years.
awk '
function days(y, m, d,   era, yoe, doy) {
	y -= m <= 2
	era = int((y >= 0 ? y : y - 399) / 400)
	yoe = y - era * 400
	doy = int((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1
	return era * 146097 + yoe * 365 + int(yoe / 4) - int(yoe / 100) + doy - 719468
}
function civil(z,   era, doe, yoe, y, doy, mp, d, m) {
	z += 719468
	era = int((z >= 0 ? z : z - 146096) / 146097)
	doe = z - era * 146097
	yoe = int((doe - int(doe / 1460) + int(doe / 36524) - int(doe / 146096)) / 365)
	y = yoe + era * 400
	doy = doe - (365 * yoe + int(yoe / 4) - int(yoe / 100))
	mp = int((5 * doy + 2) / 153)
	d = doy - int((153 * mp + 2) / 5) + 1
	m = mp + (mp < 10 ? 3 : -9)
	return sprintf("%04d-%02d-%02d", y + (m <= 2), m, d)
}
NF >= 3 {
	h = days(substr($1, 1, 4) + 0, substr($1, 6, 2) + 0, substr($1, 9, 2) + 0) * 24 + substr($2, 1, 2)
	n[$3 "\t" h]++
}
END {
	for (k in n) {
		split(k, p, "\t")
		s = p[2] + 0
		e = s + 1
		printf "%s\t%sT%02d:00:00Z\t%sT%02d:00:00Z\t%d\n", p[1], civil(int(s / 24)), s % 24,
			civil(int(e / 24)), e % 24, n[k]
	}
}' "$tmp/dpkg.log" | sort > "$tmp/want"
[ -s "$tmp/want" ] || fail "the oracle found nothing in $log"
sort "$tmp/out/dpkg-hourly.tsv" > "$tmp/got"
cmp -s "$tmp/want" "$tmp/got" ||
	fail "dpkg-hourly differs from awk: $(diff "$tmp/want" "$tmp/got" | head -10)"
grep -q "late records" "$tmp/log" && fail "dpkg-hourly: records counted late"
echo "ok dpkg-hourly: $(wc -l < "$tmp/got") (action, hour) counts equal awk's over $(wc -l < "$tmp/dpkg.log") lines"
