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

/* The host's vector extensions, probed once by tpu_gemm_init(). */
extern bool tpu_gemm_has_avx2;

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
