/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * tpu debug prints: what the device writes into a job's print buffer when
 * the job sets %TPU_JOB_F_PRINT (uapi/tpu_job.h). Little-endian: a
 * &struct tpu_print_header, then &struct tpu_print_record entries, each
 * followed by its values, packed one after the other. The device keeps
 * only a format's number and the values: the strings are the runtime's.
 *
 * Order: the cores share one cursor, so a core's records follow its own
 * steps in order (and within a step, the body's op and loop-trip order);
 * records of different cores interleave as the cores ran. A reader that
 * wants the grid's row-major order sorts them by @step, stably.
 */
#ifndef TPU_PRINT_UAPI_H
#define TPU_PRINT_UAPI_H

#if defined(__KERNEL__) || defined(__linux__)
#include <linux/types.h>
#else
#include <stdint.h>
typedef uint8_t __u8;
typedef uint16_t __u16;
typedef uint32_t __u32;
typedef int64_t __s64;
typedef uint64_t __u64;
#endif

#define TPU_PRINT_MAGIC		0x4e525054	/* "TPRN" in memory order */

/* The refs one %TPU_OP_DEBUG_PRINT copies: src0, src1, src2. */
#define TPU_PRINT_MAX_REFS	3

/**
 * struct tpu_print_header - start of a print buffer
 * @magic: %TPU_PRINT_MAGIC, written by the device when the job ends
 * @record_size: sizeof(struct tpu_print_record), the fixed part of a record
 * @records: records written after the header
 * @dropped: records that did not fit in the rest of the buffer, counted
 *	and not written (a later, smaller one may still have fitted)
 * @bytes: bytes of records written after the header
 */
struct tpu_print_header {
	__u32 magic;
	__u32 record_size;
	__u64 records;
	__u64 dropped;
	__u64 bytes;
};

/**
 * struct tpu_print_record - one %TPU_OP_DEBUG_PRINT run
 * @size: bytes of the record, its values included (a multiple of 8)
 * @op: the op's index in the body
 * @step: row-major number of the grid step
 * @fmt: the op's &tpu_job_op.imm, the format's number
 * @core: the core that ran it
 * @num_scalars: the op's fn: values from its scalar program, first
 * @num_refs: refs whose elements follow the scalars, 0 to
 *	%TPU_PRINT_MAX_REFS
 * @ref_rows: rows of each of the @num_refs refs (the body's 2-D view);
 *	zero beyond
 * @ref_cols: columns of each; zero beyond
 * @ref_dtype: &enum tpu_dtype of each ref; zero beyond
 * @reserved: zero
 * @values: @num_scalars signed 64-bit values, then each ref's elements
 *	row-major: integers and bool (0 or 1) as signed 64-bit values, f32
 *	and bf16 as IEEE binary64 bits
 */
struct tpu_print_record {
	__u32 size;
	__u32 op;
	__u64 step;
	__u32 fmt;
	__u16 core;
	__u8 num_scalars;
	__u8 num_refs;
	__u32 ref_rows[TPU_PRINT_MAX_REFS];
	__u32 ref_cols[TPU_PRINT_MAX_REFS];
	__u8 ref_dtype[TPU_PRINT_MAX_REFS];
	__u8 reserved[5];
	__s64 values[];
};

#endif /* TPU_PRINT_UAPI_H */
