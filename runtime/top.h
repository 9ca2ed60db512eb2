/*
 * runtime/top.h: `shmrun top [JOB]` — a live view of a running job's metrics
 * block (private to runtime/; top.c; docs/observability.md "shmrun top").
 *
 * The command is shmrun_top_main(); the rest are the pure helpers it formats
 * numbers with, declared here so that tests/unit/check_top.c can pin them.
 * Every formatter writes a NUL-terminated string of at most @len - 1 bytes
 * into @buf (cut short if @len is too small) and returns @buf, so a call may
 * stand as a printf argument.
 */
#ifndef SHMRUN_RT_TOP_H
#define SHMRUN_RT_TOP_H

#include <stddef.h>
#include <stdint.h>

/*
 * shmrun_top_main() - `shmrun top`: @argv[0] is "top", then its options and
 * the optional JOB (see usage in top.c and docs/shmrun.1.md).
 * Return: the exit status: 0 shown (also when the job ended while watched);
 * 1 no such job, no running job, several running and none named, or the job
 * cannot be attached to; 2 bad usage.
 */
int shmrun_top_main(int argc, char **argv);

/*
 * top_fmt_bytes() - a byte count in binary units with three significant
 * digits: "0 B", "999 B", "1.00 KiB", "12.3 MiB", "512 GiB", "1.50 TiB".
 */
const char *top_fmt_bytes(char *buf, size_t len, double bytes);

/*
 * top_fmt_count() - a count or a rate in SI units with three significant
 * digits: "0", "999", "1.00k", "12.3M", "512G", "4.20T"; "-" for NaN (no
 * rate: one sample only). Negative numbers are shown as 0 (counters never go
 * backwards; a negative difference is a reset).
 */
const char *top_fmt_count(char *buf, size_t len, double n);

/*
 * top_fmt_duration() - @ns nanoseconds as the two largest units that matter:
 * "0s", "850us", "12ms", "4.3s", "4m05s", "2h03m", "3d04h"; negative as "-".
 */
const char *top_fmt_duration(char *buf, size_t len, int64_t ns);

/*
 * top_fmt_bar() - a bar of @width cells (>= 1) for @share (0 … 1, clamped):
 * "[###     ]" is 3/8. Cells are filled by rounding share × width to the
 * nearest cell, but a share above 0 fills at least one and a share below 1
 * leaves at least one empty, so "some" and "full" always look different.
 * NaN (no data): every cell '-', "[--------]".
 */
const char *top_fmt_bar(char *buf, size_t len, double share, int width);

/*
 * top_rate() - the per-second rate of a counter that went from @a to @b in
 * @dt_ns nanoseconds. NaN when @dt_ns is 0 (no interval); 0 when @b < @a (a
 * counter reset between the samples, as a restart resets ring positions).
 */
double top_rate(uint64_t a, uint64_t b, uint64_t dt_ns);

/*
 * top_ring_fill() - the fill of a ring whose producer published up to @tail
 * and whose consumer released up to @head, of @capacity bytes: (tail - head)
 * / capacity in 0 … 1. The two positions are loaded separately (relaxed), so
 * head may be seen ahead of tail, or tail a lap ahead of a stale head: the
 * result is clamped to 0 … 1. NaN when @capacity is 0.
 */
double top_ring_fill(uint64_t tail, uint64_t head, uint64_t capacity);

/*
 * top_share() - @part of @whole as a fraction 0 … 1; NaN when @whole is 0.
 */
double top_share(uint64_t part, uint64_t whole);

#endif /* SHMRUN_RT_TOP_H */
