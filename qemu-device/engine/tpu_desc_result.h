/* SPDX-License-Identifier: MIT */
/*
 * What executing one queue descriptor (a DMA copy or a compute job) gives:
 * the fields the device writes into its struct tpu_completion.
 */
#ifndef TPU_DESC_RESULT_H
#define TPU_DESC_RESULT_H

#include <stdint.h>

struct tpu_desc_result {
	uint32_t status;	/* TPU_STATUS_* */
	uint32_t detail;	/* status-specific, see TPU_STATUS_* */
	uint64_t bytes;		/* moved before completion or failure */
};

/* End the descriptor with @status (not TPU_STATUS_OK) and its @detail. */
static inline void tpu_desc_fail(struct tpu_desc_result *res, uint32_t status,
				 uint32_t detail)
{
	res->status = status;
	res->detail = detail;
}

#endif /* TPU_DESC_RESULT_H */
