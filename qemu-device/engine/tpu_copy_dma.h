/* SPDX-License-Identifier: MIT */
/*
 * The body's async copies (pltpu.make_async_copy): a start moves the data
 * at once (a strided box copy between HBM, VMEM and SMEM), adds its bytes
 * to its DMA semaphore and stays in flight until a wait takes them back.
 * Not to be confused with tpu_copy.c, the DMA queue's copy descriptors.
 *
 * In debug mode the in-flight copies are what the hazard checks look at:
 * a body op, a new copy or the pipeline touching a region a copy in
 * flight writes (or writing one it reads) fails with TPU_JOB_ERR_HAZARD.
 */
#ifndef TPU_COPY_DMA_H
#define TPU_COPY_DMA_H

#include <stdint.h>

#include "tpu_core.h"

/*
 * TPU_OP_COPY_START op @n on semaphore element @e, issued @at_s into the
 * step's modeled compute. 0 or -1 (failed).
 */
int tpu_copy_start(struct tpu_core *core, unsigned int n,
		   const struct tpu_plan_op *op, int64_t e, double at_s);

/*
 * TPU_OP_COPY_WAIT op @n: take dst's bytes from semaphore element @e and
 * retire the copies that signalled them; *@stall_s grows by the modeled
 * time the core waits for their DMA.
 */
int tpu_copy_wait(struct tpu_core *core, unsigned int n,
		  const struct tpu_plan_op *op, int64_t e, double at_s,
		  double *stall_s);

/* Debug: body op @n touching @r (read or write) while a copy is in flight. */
int tpu_copy_hazard_op(struct tpu_core *core, unsigned int n,
		       const struct tpu_region *r);

/* Debug: operand @i's block written back or refetched (@what) meanwhile. */
int tpu_copy_hazard_block(struct tpu_core *core, unsigned int i,
			  const char *what);

#endif /* TPU_COPY_DMA_H */
