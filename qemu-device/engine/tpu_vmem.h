/* SPDX-License-Identifier: MIT */
/*
 * The host buffers behind a core's VMEM: output blocks, input blocks that
 * cannot be read in place, scratch and the elementwise work rows, each in a
 * slot of struct tpu_vmem that is reused from job to job when it fits.
 */
#ifndef TPU_VMEM_H
#define TPU_VMEM_H

#include <stdint.h>

#include "tpu_core.h"

/*
 * Host memory for a big buffer, as VMEM's are allocated: from a huge page
 * (2 MiB) on, huge-page aligned and advised onto huge pages (blocks are
 * walked with strides of a page), else 64-byte aligned for the GEMM.
 * free() it; NULL if out of memory.
 */
void *tpu_vmem_alloc(uint64_t bytes);

/* Buffer @slot of the core's VMEM, at least @bytes; NULL if out of memory. */
void *tpu_vmem_get(struct tpu_core *core, unsigned int slot, uint64_t bytes);

/* Free every buffer of @v. */
void tpu_vmem_release(struct tpu_vmem *v);

/*
 * Set up the core's VMEM for its job: output blocks zeroed, VMEM scratch
 * zeroed (poisoned in debug mode), work rows; input blocks come on their
 * first copy. -1 if out of memory.
 */
int tpu_core_alloc(struct tpu_core *core);
void tpu_core_free(struct tpu_core *core);

#endif /* TPU_VMEM_H */
