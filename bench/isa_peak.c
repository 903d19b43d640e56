// SPDX-License-Identifier: MIT
/*
 * The inner loops of the GEMM kernels without their memory: a 6 x 16
 * tile of 12 accumulators, six broadcast loads of A per step and B in
 * two registers, as tpu_gemm_small.c (f32, one vfmadd231ps per 8 products)
 * and tpu_gemm_i8.c (int16 pairs, vpmaddwd then vpaddd per 16) run them.
 * The lanes say the integer pair does twice f32's operations per cycle;
 * whether the pipes let it is what this measures.
 */
#include <immintrin.h>
#include <stdint.h>
#include <time.h>

#include "isa_peak.h"

#define STEPS	(1L << 24)
#define AROWS	6
#define SLOTS	64	/* A's broadcasts walk a 1.5 KiB buffer, as a panel */

static double thread_seconds(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static int has_avx2_fma(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/*
 * In assembly: from intrinsics GCC hoisted the six broadcasts ahead of
 * the arithmetic and spilled accumulators, which the kernels' loops do
 * not do. Accumulators ymm0-11, B in ymm14-15, A's broadcast in ymm12.
 */
#define ROW(bcast, op, off, lo, hi)					\
	bcast " " #off "(%[p]), %%ymm12\n\t"				\
	op(lo, "14") op(hi, "15")
#define FMA(acc, b) "vfmadd231ps %%ymm12, %%ymm" b ", %%ymm" acc "\n\t"
#define MADD(acc, b)							\
	"vpmaddwd %%ymm12, %%ymm" b ", %%ymm13\n\t"			\
	"vpaddd %%ymm13, %%ymm" acc ", %%ymm" acc "\n\t"
#define SIX_ROWS(bcast, op)						\
	ROW(bcast, op, 0, "0", "1") ROW(bcast, op, 4, "2", "3")		\
	ROW(bcast, op, 8, "4", "5") ROW(bcast, op, 12, "6", "7")	\
	ROW(bcast, op, 16, "8", "9") ROW(bcast, op, 20, "10", "11")
#define CLOBBERS "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4",	\
	"xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",	\
	"xmm12", "xmm13"

/* Zero accumulators and small B: no denormal, no overflow to slow it. */
#define ZERO_ACC(x) "vpxor %%ymm" #x ", %%ymm" #x ", %%ymm" #x "\n\t"
#define SET_UP(value)							\
	__asm__ volatile(ZERO_ACC(0) ZERO_ACC(1) ZERO_ACC(2) ZERO_ACC(3) \
			 ZERO_ACC(4) ZERO_ACC(5) ZERO_ACC(6) ZERO_ACC(7) \
			 ZERO_ACC(8) ZERO_ACC(9) ZERO_ACC(10) ZERO_ACC(11) \
			 "vpbroadcastd %[b], %%ymm14\n\t"		\
			 "vpbroadcastd %[b], %%ymm15\n\t"		\
			 : : [b] "m"(value) : CLOBBERS, "xmm14", "xmm15")

static const float b_f32 = 0.5f;
static const int32_t b_i16 = 0x00030002;

/* @a: SLOTS * AROWS elements of 4 bytes (float or int32 alike). */
__attribute__((target("avx2,fma"), noinline))
static void loop_fma(const void *a)
{
	SET_UP(b_f32);
	for (long s = 0; s < STEPS; s++)
		__asm__ volatile(SIX_ROWS("vbroadcastss", FMA)
				 : : [p] "r"((const uint32_t *)a + (s % SLOTS) * AROWS)
				 : CLOBBERS);
}

__attribute__((target("avx2"), noinline))
static void loop_madd(const void *a)
{
	SET_UP(b_i16);
	for (long s = 0; s < STEPS; s++)
		__asm__ volatile(SIX_ROWS("vpbroadcastd", MADD)
				 : : [p] "r"((const uint32_t *)a + (s % SLOTS) * AROWS)
				 : CLOBBERS);
}

/* Seconds of this thread's CPU time @loop takes over @a. */
static double run(void (*loop)(const void *), const void *a)
{
	double t = thread_seconds();

	loop(a);
	return thread_seconds() - t;
}

static float a_f32[SLOTS * AROWS];
static int32_t a_i16[SLOTS * AROWS];

/*
 * Interleaved rounds, each loop keeping its best: a burst of noise from
 * the host (another tenant on this core's sibling, a frequency step) then
 * costs one round of each alike.
 */
int isa_peak(int rounds, double *f32_flops, double *int16_ops)
{
	double best_f32 = 0, best_i16 = 0;

	if (!has_avx2_fma())
		return -1;
	for (int i = 0; i < SLOTS * AROWS; i++) {
		a_f32[i] = (float)(i % 7) * 0.25f;	/* sums stay finite */
		a_i16[i] = (i % 5) * 0x10001;
	}
	for (int r = 0; r < rounds; r++) {
		double t = run(loop_fma, a_f32), u = run(loop_madd, a_i16);

		/* 12 FMAs of 8 lanes, 2 flops each */
		if (t > 0 && 12.0 * 8 * 2 * STEPS / t > best_f32)
			best_f32 = 12.0 * 8 * 2 * STEPS / t;
		/* 12 vpmaddwd of 16 products, a multiply and an add each */
		if (u > 0 && 12.0 * 16 * 2 * STEPS / u > best_i16)
			best_i16 = 12.0 * 16 * 2 * STEPS / u;
	}
	*f32_flops = best_f32;
	*int16_ops = best_i16;
	return 0;
}
