// SPDX-License-Identifier: MIT
/*
 * The guide's first section: a block matmul on the host, the way the
 * NumPy version iterates over (i, j, k) blocks and accumulates into z,
 * checked against the plain triple loop. No device involved: this is the
 * computation every later kernel distributes over a grid. The guest's CPU
 * is emulated: by default every size is half the guide's (same grid);
 * TPUEMU_SAMPLE_FULL=1 runs (256 x 512) @ (512 x 384).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "sample_util.h"

/* z[i*bm:(i+1)*bm, j*bn:(j+1)*bn] += x[i-block, k-block] @ y[k-block, j-block] */
static void block_matmul(const float *x, const float *y, float *z, int m,
			 int k, int n, int bm, int bk, int bn)
{
	for (int i = 0; i < m / bm; i++)
		for (int j = 0; j < n / bn; j++)
			for (int kk = 0; kk < k / bk; kk++)
				for (int a = i * bm; a < (i + 1) * bm; a++)
					for (int p = kk * bk; p < (kk + 1) * bk; p++)
						for (int b = j * bn; b < (j + 1) * bn; b++)
							z[a * n + b] += x[a * k + p] * y[p * n + b];
}

static void naive_matmul(const float *x, const float *y, double *z, int m,
			 int k, int n)
{
	for (int a = 0; a < m; a++)
		for (int b = 0; b < n; b++) {
			double acc = 0;

			for (int p = 0; p < k; p++)
				acc += (double)x[a * k + p] * y[p * n + b];
			z[a * n + b] = acc;
		}
}

int main(void)
{
	const int h = sample_full() ? 1 : 2;
	const int m = 256 / h, k = 512 / h, n = 384 / h;
	const int bm = 64 / h, bk = 128 / h, bn = 128 / h;
	float *x = malloc(sizeof(float) * m * k);
	float *y = malloc(sizeof(float) * k * n);
	float *z = calloc((size_t)m * n, sizeof(float));
	double *ref = malloc(sizeof(double) * m * n), worst = 0;
	unsigned int seed = 1;

	if (!x || !y || !z || !ref)
		return 1;
	for (int i = 0; i < m * k; i++)
		x[i] = (float)((seed = seed * 1103515245 + 12345) >> 16 & 0xff) / 128 - 1;
	for (int i = 0; i < k * n; i++)
		y[i] = (float)((seed = seed * 1103515245 + 12345) >> 16 & 0xff) / 128 - 1;

	block_matmul(x, y, z, m, k, n, bm, bk, bn);
	naive_matmul(x, y, ref, m, k, n);
	for (int i = 0; i < m * n; i++) {
		double err = fabs(z[i] - ref[i]) / (1 + fabs(ref[i]));

		worst = err > worst ? err : worst;
	}
	printf("block_matmul_host: (%d x %d) @ (%d x %d) in (%d, %d, %d) blocks, "
	       "grid (%d, %d, %d): max relative error %.2e\n",
	       m, k, k, n, bm, bk, bn, m / bm, n / bn, k / bk, worst);
	/* f32 accumulation over k terms of size ~1: a few ulps each. */
	printf("block_matmul_host: %s\n", worst < 1e-4 ? "PASS" : "FAIL");
	free(x);
	free(y);
	free(z);
	free(ref);
	return worst < 1e-4 ? 0 : 1;
}
