/* SPDX-License-Identifier: MIT */
/*
 * The smallest useful grid job, written by hand (uapi/tpu_job.h) so guest
 * programs need no job builder: a 1-step grid over two f32 vectors of
 * @n elements, out = in + @addend (a binary op with an immediate), with
 * both index maps the constant block 0. The output may sit at a byte
 * offset in its buffer, so thousands of jobs can share one buffer.
 * Shared by the io_uring selftest and the submission benchmark.
 */
#ifndef TPU_JOB_BLOB_H
#define TPU_JOB_BLOB_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tpu_job.h"

#define TPU_BLOB_IN_SLOT	0
#define TPU_BLOB_OUT_SLOT	1

struct tpu_add_job {
	struct tpu_job_header h;
	struct tpu_job_operand opnd[2];
	struct tpu_job_op op;
	struct tpu_job_insn code[1];
};

/*
 * out[out_offset / 4 + i] = in[i] + addend for i < n; @map_block is the
 * block index both maps return (0 for a valid job; anything else runs out
 * of the arrays and fails on the device).
 */
static inline void tpu_add_job_init(struct tpu_add_job *j, uint32_t n,
				    uint64_t out_offset, float addend,
				    int32_t map_block)
{
	uint32_t imm;

	memset(j, 0, sizeof(*j));
	j->h.magic = TPU_JOB_MAGIC;
	j->h.version = TPU_JOB_VERSION;
	j->h.header_size = sizeof(j->h);
	j->h.total_size = sizeof(*j);
	j->h.grid_rank = 1;
	j->h.grid[0] = 1;
	j->h.dim_semantics[0] = TPU_DIM_PARALLEL;
	j->h.num_operands = 2;
	j->h.num_ops = 1;
	j->h.num_insns = 1;
	j->h.operands_offset = offsetof(struct tpu_add_job, opnd);
	j->h.scratch_offset = offsetof(struct tpu_add_job, opnd);
	j->h.ops_offset = offsetof(struct tpu_add_job, op);
	j->h.code_offset = offsetof(struct tpu_add_job, code);

	for (int i = 0; i < 2; i++) {
		struct tpu_job_operand *o = &j->opnd[i];

		o->slot = i ? TPU_BLOB_OUT_SLOT : TPU_BLOB_IN_SLOT;
		o->role = i ? TPU_ROLE_OUTPUT : TPU_ROLE_INPUT;
		o->dtype = TPU_DTYPE_F32;
		o->rank = 1;
		o->offset = i ? out_offset : 0;
		o->shape[0] = n;
		o->block[0] = n;
		o->index_map.offset = 0;
		o->index_map.len = 1;
	}
	j->code[0].op = TPU_INSN_PUSH_CONST;
	j->code[0].arg = map_block;

	memcpy(&imm, &addend, sizeof(imm));
	j->op.opcode = TPU_OP_BINARY;
	j->op.fn = TPU_BINARY_ADD;
	j->op.bcast = TPU_BCAST_IMM;
	j->op.dst = (struct tpu_job_ref){ TPU_REF_OPERAND, 1 };
	j->op.src0 = (struct tpu_job_ref){ TPU_REF_OPERAND, 0 };
	j->op.src1 = (struct tpu_job_ref){ TPU_REF_NONE, 0 };
	j->op.imm = imm;
}

#endif /* TPU_JOB_BLOB_H */
