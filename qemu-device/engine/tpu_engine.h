/* SPDX-License-Identifier: MIT */
/*
 * The engine: runs grid jobs (uapi/tpu_job.h) on a device's HBM.
 *
 * The caller (the QEMU device, a host test, libtpurt's in-process backend)
 * owns HBM, one host memory range, and the job's buffer table, which gives
 * each slot's range inside HBM. The engine never touches memory outside the
 * slots an operand names. A job runs on cfg->cores worker threads; its
 * results are bit-identical for any core count. The threads and each
 * core's VMEM buffers are kept from job to job until tpu_engine_destroy().
 */
#ifndef TPU_ENGINE_H
#define TPU_ENGINE_H

#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#include "tpu_config.h"
#include "tpu_job.h"
#include "tpu_job_result.h"
#include "tpu_plan.h"

struct tpu_engine;

/* tpu_engine_run() flags */
#define TPU_RUN_MODEL_ONLY	(1u << 0)	/* walk the schedule, no data */

/* NULL with a message in @err if @cfg fails tpu_config_check(). */
struct tpu_engine *tpu_engine_create(const struct tpu_config *cfg,
				     char *err, size_t errlen);
void tpu_engine_destroy(struct tpu_engine *engine);

/*
 * Check and run the @len-byte descriptor @desc against HBM [@hbm,
 * @hbm + @hbm_size) and the @nslots entries of @slots. With
 * TPU_RUN_MODEL_ONLY, @hbm may be NULL: no data is read or written, but the
 * schedule, index maps, predicates, bounds checks and model all run.
 * Returns 0, or the job's enum tpu_job_error (also in @res->error.code,
 * explained by @res->message). Safe to call from several threads at once.
 */
int tpu_engine_run(struct tpu_engine *engine, const void *desc, size_t len,
		   void *hbm, uint64_t hbm_size,
		   const struct tpu_buffer_slot *slots, unsigned int nslots,
		   unsigned int flags, struct tpu_job_result *res);

/*
 * tpu_engine_run(), stopping at the next grid step once @abort is set (a
 * reset of the device's queue) with TPU_JOB_ERR_ABORTED.
 */
int tpu_engine_run_abortable(struct tpu_engine *engine, const void *desc,
			     size_t len, void *hbm, uint64_t hbm_size,
			     const struct tpu_buffer_slot *slots,
			     unsigned int nslots, unsigned int flags,
			     const atomic_bool *abort, struct tpu_job_result *res);

#endif /* TPU_ENGINE_H */
