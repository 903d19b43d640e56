/* SPDX-License-Identifier: MIT */
/* What the samples share: test data, result checks, and reporting. */
#ifndef SAMPLE_UTIL_H
#define SAMPLE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpurt.h"

/*
 * Open the device: tpurt_open(), or with TPUEMU_SAMPLE_SIM=1 in the
 * environment the in-process device with its defaults, as
 * TPURT_DEVICE=sim gives every program (`make run-host`).
 */
int sample_open(struct tpurt_device **devp);

/*
 * A problem size: @small by default (make run and make check, where the
 * guest's own CPU is emulated and its references are slow), @full with
 * TPUEMU_SAMPLE_FULL=1 in the environment (the guide's sizes: make run
 * FULL=1). sample_full() says which.
 */
bool sample_full(void);
int64_t sample_size(int64_t small, int64_t full);

/* Uniform values in [-1, 1) (rounded to bf16 for bf16), ints in [-8, 8). */
void sample_fill(void *p, enum tpurt_dtype dtype, size_t n, uint32_t seed);
double sample_get(const void *p, enum tpurt_dtype dtype, size_t i);
/*
 * Elements [@i, @i + @n) of @p as doubles into @out, the dtype's loop
 * chosen once: under TCG in the VM a dispatch per element costs more than
 * the arithmetic of most references.
 */
void sample_get_run(const void *p, enum tpurt_dtype dtype, size_t i, size_t n,
		    double *out);

/* A new array of @dtype and shape (r, c), filled with sample_fill(). */
struct tpurt_array *sample_array(struct tpurt_device *dev,
				 enum tpurt_dtype dtype, int64_t r, int64_t c,
				 uint32_t seed, void **host);

/*
 * A new array of @dtype (f32 or bf16) and @shape holding @vals (rounded to
 * bf16 for bf16); *@host, if given, gets a malloc'd copy of the elements
 * as stored.
 */
struct tpurt_array *sample_array_of(struct tpurt_device *dev,
				    enum tpurt_dtype dtype, int rank,
				    const int64_t *shape, const float *vals,
				    void **host);

/*
 * Check @n elements of @got (of @dtype) against a double-precision
 * reference: each within @atol + @rtol * |want|, and finite. Prints the
 * largest error and, on failure, the first element that is off.
 */
bool sample_check_close(const char *what, const void *got,
			enum tpurt_dtype dtype, const double *want, size_t n,
			double atol, double rtol);

/*
 * Check z ~= x @ y (y stored (n, k) when @transpose_rhs) without an O(n^3)
 * reference: Freivalds' test (z r against x (y r) for random sign vectors)
 * and exact double-precision dot products for sampled entries. Errors are
 * measured against the sum of |terms|, scaled by @tol.
 */
bool sample_check_matmul(const void *x, const void *y, const void *z,
			 int64_t m, int64_t k, int64_t n, enum tpurt_dtype in,
			 enum tpurt_dtype out, bool transpose_rhs, double tol);

/* Host wall time and modeled chip time of a matmul job, side by side. */
void sample_report(const char *what, const struct tpurt_device_info *info,
		   const struct tpurt_job_stats *st, int64_t m, int64_t k,
		   int64_t n, enum tpurt_dtype dtype);

/*
 * Host wall time and modeled chip time of a job that moves data more than
 * it computes: its steps, HBM bytes in and out, and the modeled bandwidth.
 */
void sample_report_memory(const struct tpurt_job_stats *st);

/*
 * The variant's time over the plain kernel's, wall-clock and modeled,
 * as "  NAME / plain: wall R x, modeled R x".
 */
void sample_ratio(const char *what, const struct tpurt_job_stats *variant,
		  const struct tpurt_job_stats *plain);

/* A malloc'd host copy of @a's elements (its storage order), or NULL. */
void *sample_read(const struct tpurt_array *a);

/*
 * A sample of several cases: open the device (sample_open), run each case
 * (@run_case false: it failed, and said why), print PASS or FAIL; the exit
 * code.
 */
int sample_run_cases(const char *name, size_t ncases,
		     bool (*run_case)(struct tpurt_device *dev,
				      const struct tpurt_device_info *info,
				      size_t i));

/* A case of a row-wise kernel: (rows, cols) of @dtype, blocks of @br rows. */
struct sample_rows_case {
	enum tpurt_dtype dtype;
	int64_t rows, cols, br;
};

/* Print PASS or FAIL for the sample and return its exit code. */
int sample_result(const char *name, bool ok);

/* Print the runtime's last error and fail. */
int sample_fail(const char *name, const char *what);

#endif /* SAMPLE_UTIL_H */
