// SPDX-License-Identifier: MIT
/* What the host benches on the in-process device share: see bench_util.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tpurt.h"
#include "bench_util.h"

double bench_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

void bench_die(const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what,
		tpurt_last_error());
	exit(1);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double bench_median(const double *v, int n)
{
	double s[BENCH_MAX_ROUNDS];

	if (n > BENCH_MAX_ROUNDS) {
		fprintf(stderr, "bench_median: %d values, at most %d\n", n,
			BENCH_MAX_ROUNDS);
		abort();
	}
	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

double bench_median_ratio(const double *a, const double *b, int n)
{
	double r[BENCH_MAX_ROUNDS];

	for (int i = 0; i < n && i < BENCH_MAX_ROUNDS; i++)
		r[i] = a[i] / b[i];
	return bench_median(r, n);
}

void bench_clean_upper_state(void)
{
#if defined(__x86_64__)
	if (__builtin_cpu_supports("avx"))
		__asm__ volatile("vzeroupper");
#endif
}
