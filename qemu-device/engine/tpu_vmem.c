// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tpu_poison.h"
#include "tpu_smem.h"
#include "tpu_vmem.h"

static uint64_t max_cols(const struct tpu_plan *plan)
{
	uint64_t m = 1;

	for (unsigned int i = 0; i < plan->num_operands; i++)
		if ((uint64_t)plan->operand[i].cols > m)
			m = plan->operand[i].cols;
	for (unsigned int i = 0; i < plan->num_scratch; i++)
		if ((uint64_t)plan->scratch[i].cols > m)
			m = plan->scratch[i].cols;
	return m;
}

#define HUGE_PAGE	(2ull << 20)

void *tpu_vmem_alloc(uint64_t bytes)
{
	uint64_t align = bytes >= HUGE_PAGE ? HUGE_PAGE : 64;
	void *p;

	/* 64-byte aligned for the GEMM; rounded up as aligned_alloc wants */
	bytes = (bytes + align - 1) & ~(align - 1);
	p = aligned_alloc(align, bytes);
	if (p && align == HUGE_PAGE)
		madvise(p, bytes, MADV_HUGEPAGE);
	return p;
}

void *tpu_vmem_get(struct tpu_core *core, unsigned int slot, uint64_t bytes)
{
	struct tpu_vmem *v = core->vmem;

	if (v->p[slot] && v->size[slot] >= bytes)
		return v->p[slot];
	free(v->p[slot]);
	v->p[slot] = tpu_vmem_alloc(bytes);
	v->size[slot] = v->p[slot] ? bytes : 0;
	return v->p[slot];
}

void tpu_vmem_release(struct tpu_vmem *v)
{
	for (unsigned int i = 0; i < TPU_VMEM_BUFS; i++)
		free(v->p[i]);
	memset(v, 0, sizeof(*v));
}

int tpu_core_alloc(struct tpu_core *core)
{
	const struct tpu_plan *plan = core->run->plan;
	uint64_t cols = max_cols(plan);

	if (!core->vmem)
		core->vmem = &core->own_vmem;
	if (tpu_smem_alloc(core))
		return -1;
	/* SMEM-space blocks live in the core's SMEM, at their smem_base */
	for (unsigned int i = plan->num_scalar_prefetch; i < plan->num_operands; i++) {
		const struct tpu_plan_operand *o = &plan->operand[i];

		if (o->space != TPU_MEM_SMEM)
			continue;
		core->block_buf[i] = core->smem + o->smem_base;
		core->block[i] = (struct tpu_ref2d){ core->block_buf[i], o->rows,
						     o->cols, o->cols, o->dtype };
	}
	if (core->run->model_only)
		return 0;
	for (unsigned int i = 0; i < plan->num_operands; i++) {
		const struct tpu_plan_operand *o = &plan->operand[i];

		if (o->role != TPU_ROLE_OUTPUT || o->space != TPU_MEM_VMEM)
			continue;	/* input buffers: on first copy */
		core->block_buf[i] = tpu_vmem_get(core, i, o->block_bytes);
		if (!core->block_buf[i])
			return -1;
		/* zeros, not the last job's data: results depend on this job only */
		memset(core->block_buf[i], 0, o->block_bytes);
		core->block[i] = (struct tpu_ref2d){ core->block_buf[i], o->rows,
						     o->cols, o->cols, o->dtype };
	}
	for (unsigned int i = 0; i < plan->num_scratch; i++) {
		const struct tpu_plan_scratch *s = &plan->scratch[i];

		if (s->space != TPU_MEM_VMEM)
			continue;
		core->scratch_buf[i] = tpu_vmem_get(core, TPU_VMEM_SCRATCH + i,
						    s->bytes);
		if (!core->scratch_buf[i])
			return -1;
		if (core->run->debug)
			tpu_poison_fill(core->scratch_buf[i], s->dtype,
					s->bytes / tpu_dtype_size(s->dtype));
		else
			memset(core->scratch_buf[i], 0, s->bytes);
	}
	for (int t = 0; t < 4; t++) {
		core->row_tmp[t] = tpu_vmem_get(core, TPU_VMEM_ROWS + t,
						cols * sizeof(double));
		if (!core->row_tmp[t])
			return -1;
	}
	return 0;
}

/* The buffers stay with the core's VMEM; only a job's own are freed. */
void tpu_core_free(struct tpu_core *core)
{
	tpu_smem_free(core);
	if (core->vmem == &core->own_vmem)
		tpu_vmem_release(&core->own_vmem);
}
