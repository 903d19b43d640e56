// SPDX-License-Identifier: MIT
/*
 * The device's job decoder and buffer checks (rules/tpu_job_check.c) on
 * arbitrary bytes, with each of a few device configurations and buffer
 * tables. Beyond "no crash, no sanitizer report": a plan the decoder
 * accepts keeps the promises the engine relies on (counts, memory, refs,
 * programs inside the code), and accepted buffers lie inside HBM.
 */
#include "fuzz_input.h"
#include "fuzz_jobs.h"
#include "tpu_dtype.h"
#include "tpu_ops.h"
#include "tpu_plan.h"

static struct tpu_plan plan;

static void check_message(const struct tpu_job_result *res, int ret)
{
	FUZZ_ASSERT(memchr(res->message, 0, sizeof(res->message)),
		    "message not terminated");
	FUZZ_ASSERT(ret == (int)res->error.code, "returned %d, code %u",
		    ret, res->error.code);
	FUZZ_ASSERT(!ret || res->message[0], "code %d without a message", ret);
}

/* A program to run lies in the code; an empty one's offset means nothing. */
static bool prog_inside(struct tpu_plan_prog p)
{
	return !p.len || (p.len <= TPU_JOB_MAX_PROG_LEN &&
	       (uint64_t)p.offset + p.len <= plan.num_insns);
}

static bool vmem_ref(struct tpu_plan_ref r)
{
	if (r.kind == TPU_REF_OPERAND)
		return r.index < plan.num_operands &&
		       plan.operand[r.index].role != TPU_ROLE_SCALAR_PREFETCH &&
		       plan.operand[r.index].space == TPU_MEM_VMEM;
	if (r.kind == TPU_REF_WINDOW)
		return r.index < plan.num_windows && plan.window[r.index].body_ok &&
		       plan.window[r.index].space == TPU_MEM_VMEM;
	return r.kind == TPU_REF_SCRATCH && r.index < plan.num_scratch &&
	       plan.scratch[r.index].space == TPU_MEM_VMEM;
}

static bool semaphore_ref(struct tpu_plan_ref r)
{
	return r.kind == TPU_REF_SCRATCH && r.index < plan.num_scratch &&
	       plan.scratch[r.index].space >= TPU_MEM_SEM_DMA &&
	       plan.scratch[r.index].space < TPU_MEM_COUNT;
}

/* A copy's end: a box inside its base, of a ref with data. */
static bool copy_ref(struct tpu_plan_ref r)
{
	struct tpu_plan_box b;

	if (!tpu_plan_ref_box(&plan, r, &b) || b.space > TPU_MEM_ANY)
		return false;
	for (unsigned int d = 0; d < b.rank; d++)
		if (b.size[d] < 1 || b.size[d] > b.extent[d])
			return false;
	return true;
}

/* The memory-model ops: refs the engine's copies and semaphores rely on. */
static void check_memory_op(unsigned int i, const struct tpu_plan_op *op)
{
	switch (op->opcode) {
	case TPU_OP_COPY_START:
	case TPU_OP_COPY_WAIT:
		FUZZ_ASSERT(copy_ref(op->dst) && semaphore_ref(op->src1) &&
			    plan.scratch[op->src1.index].space == TPU_MEM_SEM_DMA &&
			    (op->opcode == TPU_OP_COPY_WAIT ||
			     copy_ref(op->src0)), "op %u: copy refs", i);
		break;
	case TPU_OP_SEM_SIGNAL:
	case TPU_OP_SEM_WAIT:
		FUZZ_ASSERT(semaphore_ref(op->src1) && op->scalar_index.len,
			    "op %u: semaphore", i);
		break;
	default:
		FUZZ_ASSERT(op->scalar_index.len && op->dst.kind != TPU_REF_WINDOW,
			    "op %u: scalar store", i);
	}
}

/* What the engine takes for granted in a decoded plan. */
static void check_plan(const struct tpu_config *cfg)
{
	uint64_t steps = 1;

	FUZZ_ASSERT(plan.grid_rank >= 1 && plan.grid_rank <= TPU_JOB_MAX_GRID_RANK,
		    "grid_rank %u", plan.grid_rank);
	for (unsigned int d = 0; d < plan.grid_rank; d++)
		steps *= plan.grid[d];
	FUZZ_ASSERT(steps == plan.steps && steps <= TPU_JOB_MAX_STEPS,
		    "steps %llu", (unsigned long long)plan.steps);
	FUZZ_ASSERT(plan.vmem_need <= plan.vmem_limit &&
		    plan.vmem_limit <= cfg->vmem_size, "VMEM need %llu",
		    (unsigned long long)plan.vmem_need);
	FUZZ_ASSERT(plan.smem_words <= cfg->smem_size / 4, "SMEM words %llu",
		    (unsigned long long)plan.smem_words);
	for (unsigned int i = 0; i < plan.num_operands; i++) {
		const struct tpu_plan_operand *o = &plan.operand[i];

		FUZZ_ASSERT(o->rank >= 1 && o->rank <= TPU_JOB_MAX_RANK &&
			    tpu_dtype_size(o->dtype) && prog_inside(o->index_map),
			    "operand %u", i);
		FUZZ_ASSERT(o->role == TPU_ROLE_SCALAR_PREFETCH ||
			    o->space == TPU_MEM_ANY || (o->rows >= 1 && o->cols >= 1 &&
			     (uint64_t)o->rows * o->cols * tpu_dtype_size(o->dtype) ==
			     o->block_bytes), "operand %u: block %lldx%lld", i,
			    (long long)o->rows, (long long)o->cols);
	}
	for (unsigned int i = 0; i < plan.num_windows; i++)
		FUZZ_ASSERT(prog_inside(plan.window[i].start), "window %u", i);
	for (unsigned int i = 0; i < plan.num_ops; i++) {
		const struct tpu_plan_op *op = &plan.op[i];

		FUZZ_ASSERT(op->opcode < TPU_OP_COUNT, "op %u: opcode", i);
		if (tpu_opcode_is_memory(op->opcode)) {
			check_memory_op(i, op);
			continue;
		}
		if (op->opcode == TPU_OP_LOOP) {
			/* the engine runs ops (i, body_end) per trip */
			FUZZ_ASSERT(op->dst.kind == TPU_REF_NONE && prog_inside(op->pred) &&
				    op->scalar_index.len && prog_inside(op->scalar_index) &&
				    op->body_end > i + 1 && op->body_end <= plan.num_ops &&
				    op->depth < TPU_JOB_MAX_LOOP_DEPTH, "op %u: loop", i);
			continue;
		}
		FUZZ_ASSERT(op->depth <= TPU_JOB_MAX_LOOP_DEPTH, "op %u: depth", i);
		FUZZ_ASSERT(vmem_ref(op->dst) &&
			    prog_inside(op->pred) && prog_inside(op->scalar_index),
			    "op %u", i);
		/* the engine reads src0 as a VMEM ref where the op has one */
		FUZZ_ASSERT(!tpu_op_reads_src(op, 0) || vmem_ref(op->src0),
			    "op %u: src0", i);
	}
}

/* Accepted buffers: each operand's array inside its slot, the slot in HBM. */
static void check_buffers(uint64_t hbm_size, const struct tpu_buffer_slot *slots,
			  unsigned int nslots)
{
	struct tpu_job_result res = { 0 };
	int ret = tpu_job_check_buffers(&plan, hbm_size, slots, nslots, &res);

	check_message(&res, ret);
	FUZZ_ASSERT(!ret || ret == TPU_JOB_ERR_BUFFER, "check_buffers: %d", ret);
	if (ret)
		return;
	for (unsigned int i = 0; i < plan.num_operands; i++) {
		const struct tpu_plan_operand *o = &plan.operand[i];
		const struct tpu_buffer_slot *s = &slots[o->slot];
		unsigned __int128 end = (unsigned __int128)o->elems *
					tpu_dtype_size(o->dtype) + o->offset;

		FUZZ_ASSERT(o->slot < nslots && end <= s->size &&
			    (unsigned __int128)s->offset + s->size <= hbm_size,
			    "operand %u accepted outside its slot", i);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tpu_buffer_slot slots[FUZZ_NSLOTS];

	fuzz_slots(slots);
	for (unsigned int c = 0; c < FUZZ_NCONFIGS; c++) {
		struct tpu_job_result res = { 0 };
		struct tpu_config cfg;
		int ret;

		fuzz_config(c, &cfg);
		ret = tpu_job_decode(data, size, &cfg, &plan, &res);
		check_message(&res, ret);
		FUZZ_ASSERT(ret >= 0 && ret <= TPU_JOB_ERR_SMEM_LIMIT && ret != TPU_JOB_ERR_BUFFER,
			    "decode: error %d before the job ran", ret);
		if (ret)
			continue;
		check_plan(&cfg);
		check_buffers(FUZZ_HBM_SIZE, slots, FUZZ_NSLOTS);
		check_buffers(FUZZ_HBM_SIZE - 100, slots, FUZZ_NSLOTS);
		check_buffers(UINT64_MAX, slots, 3);
	}
	return 0;
}
