// SPDX-License-Identifier: MIT
/*
 * The vector unit's row kernels (tpu_vec.h) over a (8192, 4096) f32 array,
 * one 4096-element row at a time, beside one host thread's memcpy of the
 * same array in the same run. GB/s counts the array's bytes (128 MiB) per
 * second for every kernel and for memcpy alike; a _vs_memcpy ratio, for
 * the best instruction set the host has, is the best of 5 pairs of a
 * memcpy and the kernel run back to back. One thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tpu_job.h"
#include "tpu_vec.h"

enum { ROWS = 8192, COLS = 4096, REPS = 5 };
#define BYTES	((double)ROWS * COLS * sizeof(float))

struct arrays {
	float *x, *y, *col;
	uint8_t *mask;
	double sink;
};

enum kernel { K_MEMCPY, K_EXP, K_MAX, K_SUM, K_SUB_COL, K_SELECT, K_COUNT };

static const char *const names[K_COUNT] = {
	"memcpy", "exp", "max_reduce", "sum_reduce", "sub_col_bcast", "select",
};

static void run_once(enum kernel k, struct arrays *a)
{
	if (k == K_MEMCPY) {
		memcpy(a->y, a->x, BYTES);
		return;
	}
	for (int64_t i = 0; i < ROWS; i++) {
		const float *x = a->x + i * COLS;
		float *y = a->y + i * COLS;

		switch (k) {
		case K_EXP:
			tpu_vec_unary(TPU_UNARY_EXP, y, x, COLS, 0, 0);
			break;
		case K_MAX:
			a->sink += tpu_vec_reduce_row(TPU_REDUCE_MAX, x, COLS);
			break;
		case K_SUM:
			a->sink += tpu_vec_reduce_row(TPU_REDUCE_SUM, x, COLS);
			break;
		case K_SUB_COL:	/* x - rowmax[i]: softmax's first step */
			tpu_vec_binary(TPU_BINARY_SUB, y, x, &a->col[i], 0, COLS);
			break;
		default:	/* where(mask, x, -inf): an attention mask */
			tpu_vec_select(y, a->mask + i * COLS, TPU_DTYPE_BOOL, x, 1,
				       &a->col[ROWS], 0, COLS);
			break;
		}
	}
}

static double seconds(enum kernel k, struct arrays *a)
{
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	run_once(k, a);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
}

/*
 * The best GB/s of the kernel in REPS runs, and through @ratio the best of
 * its speed over a memcpy run just before it (the host is shared: pairs
 * taken close together compare best, and the best run is the least
 * disturbed).
 */
static double gbps(enum kernel k, struct arrays *a, double *ratio)
{
	double best = 0, rel = 0;

	run_once(k, a);	/* warm: pages touched, ISA probed */
	for (int r = 0; r < REPS; r++) {
		double base = seconds(K_MEMCPY, a), t = seconds(k, a);

		best = BYTES / t / 1e9 > best ? BYTES / t / 1e9 : best;
		rel = base / t > rel ? base / t : rel;
	}
	if (ratio)
		*ratio = rel;
	return best;
}

int main(void)
{
	struct arrays a = {
		.x = malloc(BYTES), .y = malloc(BYTES),
		.col = malloc((ROWS + 1) * sizeof(float)),
		.mask = malloc((size_t)ROWS * COLS),
	};
	enum tpu_vec_isa best = tpu_vec_isa();
	double ratio[K_COUNT];

	if (!a.x || !a.y || !a.col || !a.mask)
		return 1;
	for (size_t i = 0; i < (size_t)ROWS * COLS; i++) {
		a.x[i] = (float)((i * 2654435761u) % 10000) * 1e-3f - 5.0f;
		a.mask[i] = (i % COLS) <= (i / COLS) % COLS;	/* causal */
	}
	for (int i = 0; i <= ROWS; i++)
		a.col[i] = i < ROWS ? (float)(i % 7) : -__builtin_inff();
	printf("bench: host_memcpy_128MiB = %.2f GB/s\n", gbps(K_MEMCPY, &a, NULL));
	for (int isa = best; isa >= 0; isa--) {
		tpu_vec_use_isa(isa);
		for (int k = K_EXP; k < K_COUNT; k++) {
			double g = gbps(k, &a, &ratio[k]);

			printf("bench: vec_%s_%s = %.2f GB/s\n", names[k],
			       tpu_vec_isa_name(isa), g);
			if (isa == (int)best)
				printf("bench: vec_%s_vs_memcpy = %.2f x\n",
				       names[k], ratio[k]);
		}
	}
	printf("bench: host_memcpy_128MiB_after = %.2f GB/s\n",
	       gbps(K_MEMCPY, &a, NULL));
	printf("bench: vec_isa = %s\n", tpu_vec_isa_name(best));
	if (a.sink == 42)	/* keep the reductions observable */
		putchar('\n');
	free(a.x);
	free(a.y);
	free(a.col);
	free(a.mask);
	return 0;
}
