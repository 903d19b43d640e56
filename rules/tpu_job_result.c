// SPDX-License-Identifier: MIT
#include "tpu_job_result.h"

#include <stdarg.h>
#include <stdio.h>

int tpu_job_fail(struct tpu_job_result *res, unsigned int code,
		 const char *fmt, ...)
{
	va_list ap;

	res->error.code = code;
	va_start(ap, fmt);
	vsnprintf(res->message, sizeof(res->message), fmt, ap);
	va_end(ap);
	return (int)code;
}

const char *tpu_job_error_name(unsigned int code)
{
	static const char *const name[] = {
		[TPU_JOB_OK] = "ok",
		[TPU_JOB_ERR_DESCRIPTOR] = "bad descriptor",
		[TPU_JOB_ERR_BYTECODE] = "bad bytecode",
		[TPU_JOB_ERR_BUFFER] = "buffer",
		[TPU_JOB_ERR_VMEM_LIMIT] = "VMEM over limit",
		[TPU_JOB_ERR_SMEM_LIMIT] = "SMEM over limit",
		[TPU_JOB_ERR_BLOCK_OOB] = "block out of bounds",
		[TPU_JOB_ERR_DIV_ZERO] = "division by zero",
		[TPU_JOB_ERR_SMEM_RANGE] = "SMEM load out of range",
		[TPU_JOB_ERR_HAZARD] = "hazard",
		[TPU_JOB_ERR_INTERNAL] = "internal",
		[TPU_JOB_ERR_ABORTED] = "aborted",
		[TPU_JOB_ERR_WINDOW_OOB] = "window out of range",
		[TPU_JOB_ERR_SEMAPHORE] = "semaphore",
		[TPU_JOB_ERR_LOOP] = "loop over its trip limit",
	};

	return code < sizeof(name) / sizeof(name[0]) ? name[code] : "unknown";
}
