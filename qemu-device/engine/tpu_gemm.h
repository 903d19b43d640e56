/* SPDX-License-Identifier: MIT */
/*
 * The MXU's arithmetic on VMEM blocks: C (+)= op(A) @ op(B), row-major.
 *
 * op(A) is M x K: A is stored M x K, or K x M when @trans_a (x.T @ y).
 * op(B) is K x N: B is stored K x N, or N x K when @trans_b (x @ y.T).
 * lda/ldb/ldc are row strides in elements. With @accumulate, C += product;
 * otherwise C = product. Each call runs on the calling thread only: the
 * engine's core workers call it concurrently on disjoint C blocks.
 * m, n, k and the leading dimensions must fit in an int (BLAS's indices).
 *
 * f32 and bf16 go through OpenBLAS (bf16 widened to f32 first, in buffers
 * kept per thread), on small blocks through our own kernels
 * (tpu_gemm_small.c); 8-bit through our own packed kernels (tpu_gemm_i8.c).
 */
#ifndef TPU_GEMM_H
#define TPU_GEMM_H

#include <stdbool.h>
#include <stdint.h>

/*
 * Call before the first tpu_gemm_* call (more calls are harmless). It pins
 * OpenBLAS to the caller's thread for the whole process: the engine runs
 * its own worker per core.
 */
void tpu_gemm_init(void);

/* f32 x f32 -> f32. */
void tpu_gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
		  const float *a, int64_t lda, const float *b, int64_t ldb,
		  float *c, int64_t ldc, bool accumulate);

/* bf16 x bf16 -> f32 (bf16 as raw uint16_t bits); products are exact in f32. */
void tpu_gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
		   const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb,
		   float *c, int64_t ldc, bool accumulate);

/*
 * 8-bit integers -> int32, exact (wrapping on int32 overflow, as the
 * hardware's accumulators do). @a_unsigned/@b_unsigned pick uint8 over int8.
 */
void tpu_gemm_i8(bool a_unsigned, bool b_unsigned, bool trans_a, bool trans_b,
		 int64_t m, int64_t n, int64_t k,
		 const void *a, int64_t lda, const void *b, int64_t ldb,
		 int32_t *c, int64_t ldc, bool accumulate);

/*
 * Vector extensions the GEMM kernels use: "avx512", "avx2" or "portable",
 * the best the host has unless TPU_GEMM_ISA names a lesser one (so an
 * AVX-512 host can measure and test what an AVX2-only host runs: no
 * AVX-512 and no VNNI of any kind under "avx2"). OpenBLAS picks its own
 * kernels; OPENBLAS_CORETYPE steers it.
 */
const char *tpu_gemm_isa_name(void);

/*
 * OpenBLAS 0.3.21 does not know some newer CPUs (Intel family 6 model 207)
 * and falls back to its SSE3 "Prescott" kernels, several times slower
 * than the host allows. OpenBLAS picks its kernels when it loads, so the
 * fix is OPENBLAS_CORETYPE in the environment of the next process: this
 * returns the core type to set ("SkylakeX", "Haswell"), or NULL when
 * OpenBLAS runs its own choice for this host or the variable is set.
 * With the kernels capped to AVX2 (TPU_GEMM_ISA=avx2) on an AVX-512 host,
 * it returns "Haswell" too, so the capped run is an AVX2 host's.
 */
const char *tpu_gemm_blas_coretype(void);

/*
 * Whether OPENBLAS_CORETYPE, set by the user, names a core without AVX-512
 * kernels while the engine's use AVX-512: then an OpenBLAS anchor runs
 * narrower kernels than the engine's own, and ratios flatter the engine.
 */
bool tpu_gemm_blas_core_narrower(void);

/*
 * Tests and benchmarks: cap the kernels at @name (one of the above), or
 * back to the host's own (capped by TPU_GEMM_ISA) when @name is NULL.
 * Returns 0, or -1 if the host (or TPU_GEMM_ISA) does not allow it. Also
 * drops a tpu_gemm_i8_use() choice the new cap excludes. Not while another
 * thread is in a tpu_gemm_* call.
 */
int tpu_gemm_use_isa(const char *name);

/* The int8 micro-kernel in use ("avx512vnni", "avxvnni", ...), for logs. */
const char *tpu_gemm_i8_kernel(void);

/*
 * Tests and benchmarks: use the int8 kernel @name, or the best the host has
 * again when @name is NULL. Returns 0, or -1 if the host cannot run it (or
 * there is no such kernel). Not while another thread is in tpu_gemm_i8().
 */
int tpu_gemm_i8_use(const char *name);

#endif /* TPU_GEMM_H */
