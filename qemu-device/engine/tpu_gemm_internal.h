/* SPDX-License-Identifier: MIT */
/*
 * The GEMM kernels' internals, shared by tpu_gemm*.c: per-thread scratch,
 * the host's vector extensions (tpu_cast.c reads them too), the VNNI int8
 * kernel. Not part of the engine's interface.
 */
#ifndef TPU_GEMM_INTERNAL_H
#define TPU_GEMM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Per-thread scratch buffers, reused from call to call. */
enum tpu_gemm_slot {
	TPU_GEMM_SLOT_A,
	TPU_GEMM_SLOT_B,
	TPU_GEMM_SLOTS
};

/*
 * A 64-byte aligned buffer of at least @bytes owned by the calling thread;
 * it grows as needed and is freed when the thread exits. NULL if out of
 * memory.
 */
void *tpu_gemm_scratch(enum tpu_gemm_slot slot, size_t bytes);

/*
 * The vector extensions the GEMM kernels may use: the host's, probed once by
 * tpu_gemm_init(), capped by TPU_GEMM_ISA or tpu_gemm_use_isa().
 * AVX512 here means AVX512F and BW; VNNI is probed by the int8 kernels.
 */
enum tpu_gemm_isa {
	TPU_GEMM_PORTABLE,
	TPU_GEMM_AVX2,		/* with FMA */
	TPU_GEMM_AVX512,
	TPU_GEMM_ISA_COUNT
};

extern enum tpu_gemm_isa tpu_gemm_isa;
extern bool tpu_gemm_has_avx2;	/* tpu_gemm_isa >= TPU_GEMM_AVX2 */
extern bool tpu_gemm_vnni_ok;	/* AVX2 and not capped: VNNI if the host has it */

/*
 * tpu_gemm_f32() and tpu_gemm_bf16() on our own kernels for small blocks
 * (tpu_gemm_small.c). False, with C untouched, when the shape is not small,
 * the host lacks AVX2, or scratch memory ran out.
 */
bool tpu_gemm_f32_small(bool trans_a, bool trans_b, int64_t m, int64_t n,
			int64_t k, const float *a, int64_t lda, const float *b,
			int64_t ldb, float *c, int64_t ldc, bool accumulate);
bool tpu_gemm_bf16_small(bool trans_a, bool trans_b, int64_t m, int64_t n,
			 int64_t k, const uint16_t *a, int64_t lda,
			 const uint16_t *b, int64_t ldb, float *c, int64_t ldc,
			 bool accumulate);

/*
 * tpu_gemm_i8() on vpdpbusd (tpu_gemm_i8_vnni.c), m, n, k > 0: on AVX-VNNI's
 * ymm form, or with @wide on AVX512-VNNI's zmm form; the host must have it.
 * False if out of scratch memory (C is untouched).
 */
bool tpu_gemm_i8_vnni(bool wide, bool a_unsigned, bool b_unsigned,
		      bool trans_a, bool trans_b, int64_t m, int64_t n,
		      int64_t k, const void *a, int64_t lda, const void *b,
		      int64_t ldb, int32_t *c, int64_t ldc, bool accumulate);

#endif /* TPU_GEMM_INTERNAL_H */
