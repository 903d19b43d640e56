/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * tpu job traces: what the device writes into a job's trace buffer when
 * the job sets %TPU_JOB_F_TRACE (uapi/tpu_job.h). Little-endian, fixed
 * size: a &struct tpu_trace_header, then &struct tpu_trace_record entries
 * until the buffer ends. Each core's modeled timeline is the timing
 * model's own intervals (the figures the job's report sums), and the
 * device's host wall time of each step rides along for comparison.
 */
#ifndef TPU_TRACE_UAPI_H
#define TPU_TRACE_UAPI_H

#if defined(__KERNEL__) || defined(__linux__)
#include <linux/types.h>
#else
#include <stdint.h>
typedef uint16_t __u16;
typedef uint32_t __u32;
typedef uint64_t __u64;
#endif

#define TPU_TRACE_MAGIC		0x52545054	/* "TPTR" in memory order */

/**
 * enum tpu_trace_lane - &tpu_trace_record.lane: one track per core
 * @TPU_TRACE_STEP: a step's interval, from its compute to the next
 *	step's (one record per step)
 * @TPU_TRACE_DMA_IN: HBM -> VMEM, the input blocks of @step
 * @TPU_TRACE_MXU: the step's matrix-unit work
 * @TPU_TRACE_VECTOR: the step's vector-unit work (VPU and EUP)
 * @TPU_TRACE_DMA_OUT: VMEM -> HBM, the output blocks @step released
 * @TPU_TRACE_BUBBLE: compute idle, waiting for DMA
 * @TPU_TRACE_HOST: the device host's wall clock running @step (one record
 *	per step), not modeled time
 * @TPU_TRACE_LANES: number of lanes
 */
enum tpu_trace_lane {
	TPU_TRACE_STEP = 0,
	TPU_TRACE_DMA_IN = 1,
	TPU_TRACE_MXU = 2,
	TPU_TRACE_VECTOR = 3,
	TPU_TRACE_DMA_OUT = 4,
	TPU_TRACE_BUBBLE = 5,
	TPU_TRACE_HOST = 6,
	TPU_TRACE_LANES
};

/**
 * struct tpu_trace_record - one event of a job's trace
 * @lane: &enum tpu_trace_lane
 * @core: the core it happened on
 * @reserved: zero
 * @step: the core's step ordinal, 0 for its first step
 * @start_ps: modeled lanes: picoseconds from the core's start, before the
 *	job's launch cost; %TPU_TRACE_HOST: from the device's start of the job
 * @dur_ps: picoseconds
 * @bytes: DMA lanes: the bytes moved; else zero
 */
struct tpu_trace_record {
	__u16 lane;
	__u16 core;
	__u32 reserved;
	__u64 step;
	__u64 start_ps;
	__u64 dur_ps;
	__u64 bytes;
};

/**
 * struct tpu_trace_header - start of a trace buffer
 * @magic: %TPU_TRACE_MAGIC, written by the device when the job ends
 * @record_size: sizeof(struct tpu_trace_record)
 * @count: records the job produced; the buffer holds the first
 *	(buffer size - sizeof(header)) / @record_size of them, the rest were
 *	dropped
 * @reserved: zero
 */
struct tpu_trace_header {
	__u32 magic;
	__u32 record_size;
	__u64 count;
	__u64 reserved[2];
};

#endif /* TPU_TRACE_UAPI_H */
