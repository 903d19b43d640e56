// SPDX-License-Identifier: MIT
/*
 * The anchor for the VM's matmul figures: host OpenBLAS sgemm with as many
 * threads as the device has cores (argv[1]), at 1024, 2048 and 4096.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define REPS 3

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 1;
	static const int sizes[] = { 1024, 2048, 4096 };

	openblas_set_num_threads(threads);
	for (unsigned int s = 0; s < 3; s++) {
		int n = sizes[s];
		float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n);
		float *c = malloc(sizeof(float) * n * n);
		double best = 0;

		if (!a || !b || !c)
			return 1;
		for (long i = 0; i < (long)n * n; i++) {
			a[i] = 0.5f;
			b[i] = 0.25f;
		}
		for (int r = 0; r < REPS; r++) {
			double t = now_s(), rate;

			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n,
				    1.0f, a, n, b, n, 0.0f, c, n);
			rate = 2.0 * n * n * n / (now_s() - t) / 1e9;
			best = rate > best ? rate : best;
		}
		printf("bench: host_openblas_sgemm_%dt_%d = %.1f GFLOP/s\n", threads, n, best);
		free(a);
		free(b);
		free(c);
	}
	return 0;
}
