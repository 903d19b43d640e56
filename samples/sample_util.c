// SPDX-License-Identifier: MIT
#include "sample_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPOT_CHECKS 64

int sample_open(struct tpurt_device **devp)
{
	const char *sim = getenv("TPUEMU_SAMPLE_SIM");

	if (sim && !strcmp(sim, "1"))
		return tpurt_open_sim(NULL, devp);
	return tpurt_open(devp);
}

bool sample_full(void)
{
	const char *full = getenv("TPUEMU_SAMPLE_FULL");

	return full && !strcmp(full, "1");
}

int64_t sample_size(int64_t small, int64_t full)
{
	return sample_full() ? full : small;
}

static uint32_t next(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return *s >> 8;
}

/*
 * Each element takes two draws of the generator, whatever the dtype, so an
 * array's values depend only on the seed. The dtype's loop is chosen once:
 * under TCG in the VM, a switch per element was a third of the filling.
 */
#define FILL_LOOP(T, expr)						\
	for (size_t i = 0; i < n; i++) {				\
		float f = (float)(next(&s) & 0xffff) / 32768.0f - 1.0f;	\
		int v = (int)(next(&s) % 16) - 8;			\
									\
		(void)f, (void)v;					\
		((T *)p)[i] = (T)(expr);				\
	}

void sample_fill(void *p, enum tpurt_dtype dtype, size_t n, uint32_t seed)
{
	uint32_t s = seed * 2654435761u + 7;

	switch (dtype) {
	case TPURT_F32:
		FILL_LOOP(float, f);
		break;
	case TPURT_BF16:
		FILL_LOOP(uint16_t, tpurt_f32_to_bf16(f));
		break;
	case TPURT_INT8:
		FILL_LOOP(int8_t, v);
		break;
	case TPURT_UINT8:
		FILL_LOOP(uint8_t, v + 8);
		break;
	case TPURT_INT32:
		FILL_LOOP(int32_t, v);
		break;
	case TPURT_BOOL:
		FILL_LOOP(uint8_t, v & 1);
		break;
	case TPURT_UINT32:
		FILL_LOOP(uint32_t, v + 8);
		break;
	}
}

#undef FILL_LOOP

double sample_get(const void *p, enum tpurt_dtype dtype, size_t i)
{
	switch (dtype) {
	case TPURT_F32:
		return ((const float *)p)[i];
	case TPURT_BF16:
		return tpurt_bf16_to_f32(((const uint16_t *)p)[i]);
	case TPURT_INT8:
		return ((const int8_t *)p)[i];
	case TPURT_UINT8:
		return ((const uint8_t *)p)[i];
	case TPURT_INT32:
		return ((const int32_t *)p)[i];
	case TPURT_BOOL:
		return ((const uint8_t *)p)[i] != 0;
	case TPURT_UINT32:
		return ((const uint32_t *)p)[i];
	}
	return NAN;
}

void sample_get_run(const void *p, enum tpurt_dtype dtype, size_t i, size_t n,
		    double *out)
{
	switch (dtype) {
	case TPURT_F32:
		for (size_t j = 0; j < n; j++)
			out[j] = ((const float *)p)[i + j];
		return;
	case TPURT_BF16:
		for (size_t j = 0; j < n; j++) {
			uint32_t bits = (uint32_t)((const uint16_t *)p)[i + j] << 16;
			float f;

			memcpy(&f, &bits, sizeof(f));
			out[j] = f;
		}
		return;
	default:
		for (size_t j = 0; j < n; j++)
			out[j] = sample_get(p, dtype, i + j);
		return;
	}
}

/* Write @h into @a; hand @h to *@host or free it. @a, or NULL (freed). */
static struct tpurt_array *upload(struct tpurt_array *a, void *h, void **host)
{
	if (!h || tpurt_array_write(a, h)) {
		free(h);
		tpurt_array_free(a);
		return NULL;
	}
	if (host)
		*host = h;
	else
		free(h);
	return a;
}

struct tpurt_array *sample_array(struct tpurt_device *dev,
				 enum tpurt_dtype dtype, int64_t r, int64_t c,
				 uint32_t seed, void **host)
{
	int64_t shape[2] = { r, c };
	struct tpurt_array *a;
	void *h;

	if (tpurt_array_create(dev, dtype, 2, shape, &a))
		return NULL;
	h = malloc(tpurt_array_nbytes(a));
	if (h)
		sample_fill(h, dtype, tpurt_array_size(a), seed);
	return upload(a, h, host);
}

struct tpurt_array *sample_array_of(struct tpurt_device *dev,
				    enum tpurt_dtype dtype, int rank,
				    const int64_t *shape, const float *vals,
				    void **host)
{
	struct tpurt_array *a;
	void *h;
	size_t n;

	if (tpurt_array_create(dev, dtype, rank, shape, &a))
		return NULL;
	n = tpurt_array_size(a);
	h = malloc(tpurt_array_nbytes(a));
	for (size_t i = 0; h && i < n; i++) {
		if (dtype == TPURT_BF16)
			((uint16_t *)h)[i] = tpurt_f32_to_bf16(vals[i]);
		else
			((float *)h)[i] = vals[i];
	}
	return upload(a, h, host);
}

bool sample_check_close(const char *what, const void *got,
			enum tpurt_dtype dtype, const double *want, size_t n,
			double atol, double rtol)
{
	double worst = 0, run[1024];
	size_t bad = 0;

	for (size_t i0 = 0; i0 < n; i0 += 1024) {
		size_t len = n - i0 < 1024 ? n - i0 : 1024;

		sample_get_run(got, dtype, i0, len, run);
		for (size_t j = 0; j < len; j++) {
			size_t i = i0 + j;
			double g = run[j], err = fabs(g - want[i]);

			if (isfinite(g) && err <= atol + rtol * fabs(want[i])) {
				worst = fmax(worst, err);
				continue;
			}
			if (!bad++)
				printf("  %s: element %zu = %g, want %.9g\n", what,
				       i, g, want[i]);
		}
	}
	printf("  %s: %zu elements, max abs error %.3g%s", what, n, worst,
	       bad ? "" : "\n");
	if (bad)
		printf(", %zu off or not finite\n", bad);
	return !bad;
}

static double y_at(const void *y, enum tpurt_dtype in, int64_t k, int64_t n,
		   int64_t p, int64_t b, bool transpose_rhs)
{
	return sample_get(y, in, transpose_rhs ? b * k + p : p * n + b);
}

/*
 * Freivalds' check with ROUNDS random +-1 vectors r at once: |z r - x (y r)|
 * per row against sum |x| |y| |r|. Each element of x, y and z is read once
 * for all the rounds: under TCG in the VM, reading (and widening) them is
 * most of a sample's own time.
 */
#define ROUNDS 2

static bool freivalds(const void *x, const void *y, const void *z, int64_t m,
		      int64_t k, int64_t n, enum tpurt_dtype in,
		      enum tpurt_dtype out, bool tr, double tol)
{
	double *r = malloc(ROUNDS * n * sizeof(double));
	double *yr = calloc(ROUNDS * k, sizeof(double));
	double *yabs = calloc(k, sizeof(double));
	double *row = malloc((k > n ? k : n) * sizeof(double));
	bool ok = r && yr && yabs && row;

	for (int t = 0; ok && t < ROUNDS; t++) {
		uint32_t s = t + 1;

		for (int64_t b = 0; b < n; b++)
			r[t * n + b] = next(&s) & 1 ? 1.0 : -1.0;
	}
	/* y r, a row of y at a time: y is (k, n), or (n, k) transposed. */
	for (int64_t p = 0; ok && !tr && p < k; p++) {
		sample_get_run(y, in, p * n, n, row);
		for (int64_t b = 0; b < n; b++) {
			for (int t = 0; t < ROUNDS; t++)
				yr[t * k + p] += row[b] * r[t * n + b];
			yabs[p] += fabs(row[b]);
		}
	}
	for (int64_t b = 0; ok && tr && b < n; b++) {
		sample_get_run(y, in, b * k, k, row);
		for (int64_t p = 0; p < k; p++) {
			for (int t = 0; t < ROUNDS; t++)
				yr[t * k + p] += row[p] * r[t * n + b];
			yabs[p] += fabs(row[p]);
		}
	}
	for (int64_t a = 0; ok && a < m; a++) {
		double want[ROUNDS] = { 0 }, got[ROUNDS] = { 0 }, scale = 0;

		sample_get_run(x, in, a * k, k, row);
		for (int64_t p = 0; p < k; p++) {
			for (int t = 0; t < ROUNDS; t++)
				want[t] += row[p] * yr[t * k + p];
			scale += fabs(row[p]) * yabs[p];
		}
		sample_get_run(z, out, a * n, n, row);
		for (int64_t b = 0; b < n; b++)
			for (int t = 0; t < ROUNDS; t++)
				got[t] += row[b] * r[t * n + b];
		for (int t = 0; t < ROUNDS && ok; t++)
			if (fabs(got[t] - want[t]) > tol * scale + 1e-6) {
				printf("  Freivalds: row %lld off by %g (scale %g)\n",
				       (long long)a, fabs(got[t] - want[t]), scale);
				ok = false;
			}
	}
	free(r);
	free(yr);
	free(yabs);
	free(row);
	return ok;
}

static bool spot_checks(const void *x, const void *y, const void *z, int64_t m,
			int64_t k, int64_t n, enum tpurt_dtype in,
			enum tpurt_dtype out, bool tr, double tol)
{
	uint32_t s = 12345;

	for (int i = 0; i < SPOT_CHECKS; i++) {
		int64_t a = next(&s) % m, b = next(&s) % n;
		double want = 0, scale = 0, got;

		for (int64_t p = 0; p < k; p++) {
			double t = sample_get(x, in, a * k + p) *
				   y_at(y, in, k, n, p, b, tr);

			want += t;
			scale += fabs(t);
		}
		got = sample_get(z, out, a * n + b);
		if (fabs(got - want) > tol * scale + 1e-6) {
			printf("  z[%lld, %lld] = %g, want %g\n", (long long)a,
			       (long long)b, got, want);
			return false;
		}
	}
	return true;
}

bool sample_check_matmul(const void *x, const void *y, const void *z,
			 int64_t m, int64_t k, int64_t n, enum tpurt_dtype in,
			 enum tpurt_dtype out, bool transpose_rhs, double tol)
{
	return freivalds(x, y, z, m, k, n, in, out, transpose_rhs, tol) &&
	       spot_checks(x, y, z, m, k, n, in, out, transpose_rhs, tol);
}

void sample_report(const char *what, const struct tpurt_device_info *info,
		   const struct tpurt_job_stats *st, int64_t m, int64_t k,
		   int64_t n, enum tpurt_dtype dtype)
{
	double flops = 2.0 * m * k * n;
	double wall = st->call_wall_ns * 1e-9, model = st->model_time_ps * 1e-12;

	printf("  %s: host wall %.6f s, %.1f GFLOP/s | modeled %s %.6f s, "
	       "%.1f TFLOP/s, %.2f%% of peak\n",
	       what, wall, flops / wall / 1e9,
	       info ? "v5e" : "chip", model, flops / model / 1e12,
	       info ? tpurt_model_utilization(info, dtype, flops, model) : 0);
}

void sample_report_memory(const struct tpurt_job_stats *st)
{
	double bytes = (double)st->hbm_bytes_in + st->hbm_bytes_out;
	double model = st->model_time_ps * 1e-12;

	printf("  %llu steps | host wall %.6f s | modeled v5e %.1f us, HBM %.2f MB in, "
	       "%.2f MB out, %.1f GB/s\n",
	       (unsigned long long)st->steps, st->call_wall_ns * 1e-9, model * 1e6,
	       st->hbm_bytes_in / 1e6, st->hbm_bytes_out / 1e6,
	       model > 0 ? bytes / model / 1e9 : 0);
}

void sample_ratio(const char *what, const struct tpurt_job_stats *variant,
		  const struct tpurt_job_stats *plain)
{
	printf("  %s / plain: wall %.3f x, modeled %.3f x\n", what,
	       (double)variant->call_wall_ns / plain->call_wall_ns,
	       (double)variant->model_time_ps / plain->model_time_ps);
}

void *sample_read(const struct tpurt_array *a)
{
	void *h = malloc(tpurt_array_nbytes(a));

	if (h && tpurt_array_read(a, h)) {
		free(h);
		return NULL;
	}
	return h;
}

int sample_run_cases(const char *name, size_t ncases,
		     bool (*run_case)(struct tpurt_device *dev,
				      const struct tpurt_device_info *info,
				      size_t i))
{
	struct tpurt_device_info info;
	struct tpurt_device *dev;
	bool ok = true;

	if (sample_open(&dev) || tpurt_device_info(dev, &info))
		return sample_fail(name, "open");
	for (size_t i = 0; i < ncases; i++)
		ok = run_case(dev, &info, i) && ok;
	tpurt_close(dev);
	return sample_result(name, ok);
}

int sample_result(const char *name, bool ok)
{
	printf("%s: %s\n", name, ok ? "PASS" : "FAIL");
	return ok ? 0 : 1;
}

int sample_fail(const char *name, const char *what)
{
	printf("%s: %s: %s\n", name, what, tpurt_last_error());
	return sample_result(name, false);
}
