/* SPDX-License-Identifier: MIT */
/*
 * What the host benches on the in-process device share (bench_attention,
 * bench_paged): the clock, exiting on a libtpurt error, medians of rounds,
 * and a clean AVX state before a host reference runs.
 */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#define BENCH_MAX_ROUNDS	16	/* the most values bench_median() takes */

/* Monotonic wall clock, in seconds. */
double bench_now(void);

/* "<program>: @what: <tpurt_last_error()>" on stderr, then exit(1). */
void bench_die(const char *what) __attribute__((noreturn));

/* The median of @v[0..@n), @n <= BENCH_MAX_ROUNDS; @v is left as it was. */
double bench_median(const double *v, int n);

/* Each round's @a / @b, then their median: a burst of load hits both sides. */
double bench_median_ratio(const double *a, const double *b, int n);

/*
 * The in-process device runs a core on this thread, and the engine's AVX2
 * kernels (bf16_row_avx2 in tpu_cast.c) can return through a tail call
 * with the upper halves of the YMM registers dirty; OpenBLAS's SSE kernels
 * then run several times slower here. Clear them before a host reference,
 * so it is not charged for the device's leftovers.
 */
void bench_clean_upper_state(void);

#endif /* BENCH_UTIL_H */
