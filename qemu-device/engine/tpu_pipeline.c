// SPDX-License-Identifier: MIT
/*
 * The grid pipeline of one core, as Pallas TPU runs it: steps in row-major
 * order (restricted to the core's share of the parallel iterations); input
 * blocks fetched unless their index repeats the previous step's; output
 * blocks kept in VMEM while their index repeats and written back when it
 * changes and after the last step; edge blocks zero-padded on read and
 * written only in bounds. Double buffering is not emulated on the host (the
 * fetch of step s+1 happens after step s), only modeled: the results are
 * the same since input blocks are read-only.
 *
 * In-bounds input blocks are not copied: the ref points into HBM with the
 * array's row stride, which reads the same values a copy would.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tpu_core.h"
#include "tpu_ops.h"
#include "tpu_poison.h"

#define CLOSED	(1ull << 63)	/* owner table: block written back */

static bool is_output(const struct tpu_plan_operand *o)
{
	return o->role == TPU_ROLE_OUTPUT;
}

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

/* Big buffers on huge pages: blocks are walked with strides of a page. */
#define HUGE_PAGE	(2ull << 20)

static void *vmem_alloc(uint64_t bytes)
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

/* Buffer @slot of the core's VMEM, at least @bytes, reused when it fits. */
static void *vmem_get(struct tpu_core *core, unsigned int slot, uint64_t bytes)
{
	struct tpu_vmem *v = core->vmem;

	if (v->p[slot] && v->size[slot] >= bytes)
		return v->p[slot];
	free(v->p[slot]);
	v->p[slot] = vmem_alloc(bytes);
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
	if (core->run->model_only)
		return 0;
	for (unsigned int i = 0; i < plan->num_operands; i++) {
		const struct tpu_plan_operand *o = &plan->operand[i];

		if (!is_output(o))
			continue;	/* input buffers: on first copy */
		core->block_buf[i] = vmem_get(core, i, o->block_bytes);
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
		core->scratch_buf[i] = vmem_get(core, TPU_VMEM_SCRATCH + i,
						s->bytes);
		if (!core->scratch_buf[i])
			return -1;
		if (core->run->debug)
			tpu_poison_fill(core->scratch_buf[i], s->dtype,
					s->bytes / tpu_dtype_size(s->dtype));
		else
			memset(core->scratch_buf[i], 0, s->bytes);
	}
	for (int t = 0; t < 2; t++) {
		core->row_tmp[t] = vmem_get(core, TPU_VMEM_ROWS + t,
					    cols * sizeof(double));
		if (!core->row_tmp[t])
			return -1;
	}
	return 0;
}

/* The buffers stay with the core's VMEM; only a job's own are freed. */
void tpu_core_free(struct tpu_core *core)
{
	if (core->vmem == &core->own_vmem)
		tpu_vmem_release(&core->own_vmem);
}

/* The 2-D ref an op's operand names: the block in VMEM or a scratch buffer. */
static struct tpu_ref2d core_ref(const struct tpu_core *core,
				 struct tpu_plan_ref ref)
{
	const struct tpu_plan_scratch *s;

	if (ref.kind == TPU_REF_OPERAND)
		return core->block[ref.index];
	s = &core->run->plan->scratch[ref.index];
	return (struct tpu_ref2d){ core->scratch_buf[ref.index], s->rows,
				   s->cols, s->cols, s->dtype };
}

/* --- the step sequence --- */

static uint64_t parallel_index(const struct tpu_plan *plan, const int64_t *pid)
{
	uint64_t p = 0;

	for (unsigned int d = 0; d < plan->grid_rank; d++)
		if (plan->semantics[d] == TPU_DIM_PARALLEL)
			p = p * plan->grid[d] + (uint64_t)pid[d];
	return p;
}

static bool mine(const struct tpu_core *core, const int64_t *pid)
{
	uint64_t p = parallel_index(core->run->plan, pid);

	return p >= core->pbegin && p < core->pend;
}

/* Advance @pid/@step to the core's next step; false after the last. */
static bool next_step(const struct tpu_core *core, int64_t *pid, uint64_t *step)
{
	const struct tpu_plan *plan = core->run->plan;

	do {
		int d = plan->grid_rank - 1;

		while (d >= 0 && (uint64_t)++pid[d] == plan->grid[d])
			pid[d--] = 0;
		if (d < 0)
			return false;
		++*step;
	} while (!mine(core, pid));
	return true;
}

static bool first_step(const struct tpu_core *core, int64_t *pid,
		       uint64_t *step)
{
	memset(pid, 0, TPU_JOB_MAX_GRID_RANK * sizeof(*pid));
	*step = 0;
	return mine(core, pid) || next_step(core, pid, step);
}

/* --- errors --- */

/*
 * Record that the job fails at @step. Cores stop once past the lowest
 * failing step, and run steps in increasing order, so the error reported is
 * the first in row-major order whatever the core count.
 */
static void stop_at(struct tpu_core *core, uint64_t step)
{
	uint64_t cur = atomic_load(&core->run->fail_step);

	while (step < cur &&
	       !atomic_compare_exchange_weak(&core->run->fail_step, &cur, step))
		;
}

static void fail_at(struct tpu_core *core, uint64_t step, unsigned int operand,
		    const int64_t *idx, unsigned int rank)
{
	core->res.error.step = step;
	core->res.error.operand = operand;
	for (unsigned int d = 0; d < rank; d++)
		core->res.error.block[d] = idx[d];
	stop_at(core, step);
}

static int fail_scalar(struct tpu_core *core, uint64_t step, const char *what,
		       unsigned int index, const struct tpu_scalar_fault *f)
{
	if (f->code == TPU_JOB_ERR_DIV_ZERO)
		tpu_job_fail(&core->res, f->code,
			     "%s %u at step %llu: division by zero", what, index,
			     (unsigned long long)step);
	else
		tpu_job_fail(&core->res, f->code,
			     "%s %u at step %llu: SMEM index %lld outside scalar-prefetch operand %d (%llu elements)",
			     what, index, (unsigned long long)step,
			     (long long)f->index, f->operand,
			     (unsigned long long)core->run->plan->operand[f->operand].elems);
	core->res.error.step = step;
	stop_at(core, step);
	return -1;
}

static void format_index(char *buf, size_t len, const int64_t *v,
			 unsigned int n)
{
	int at = 0;

	for (unsigned int d = 0; d < n && at < (int)len; d++)
		at += snprintf(buf + at, len - at, "%s%lld", d ? ", " : "",
			       (long long)v[d]);
}

/* --- blocks --- */

struct block_span {
	uint64_t start[TPU_JOB_MAX_RANK];	/* first element, per dim */
	uint64_t valid[TPU_JOB_MAX_RANK];	/* in-bounds extent, per dim */
	uint64_t first, end;			/* byte range in the slot */
	bool full;				/* no padding */
};

/*
 * Where block @idx of operand @i lies; fails the job if it starts outside
 * the array or (defence in depth) ends outside the operand's slot.
 */
static int locate_block(struct tpu_core *core, unsigned int i,
			const int64_t *idx, uint64_t step,
			struct block_span *sp)
{
	const struct tpu_plan_operand *o = &core->run->plan->operand[i];
	uint64_t first = 0, last = 0, es = tpu_dtype_size(o->dtype);
	char b[96], n[96];

	sp->full = true;
	for (unsigned int d = 0; d < o->rank; d++) {
		if (idx[d] < 0 || (uint64_t)idx[d] >= o->nblocks[d]) {
			format_index(b, sizeof(b), idx, o->rank);
			format_index(n, sizeof(n), (const int64_t *)o->nblocks,
				     o->rank);
			tpu_job_fail(&core->res, TPU_JOB_ERR_BLOCK_OOB,
				     "operand %u: block (%s) at step %llu outside the array's (%s) blocks",
				     i, b, (unsigned long long)step, n);
			fail_at(core, step, i, idx, o->rank);
			return -1;
		}
		sp->start[d] = (uint64_t)idx[d] * o->block[d];
		sp->valid[d] = o->shape[d] - sp->start[d];
		if (sp->valid[d] >= o->block[d])
			sp->valid[d] = o->block[d];
		else
			sp->full = false;
		first += sp->start[d] * o->stride[d];
		last += (sp->start[d] + sp->valid[d] - 1) * o->stride[d];
	}
	sp->first = o->offset + first * es;
	sp->end = o->offset + (last + 1) * es;
	if (sp->end > core->run->slots[o->slot].size) {
		format_index(b, sizeof(b), idx, o->rank);
		tpu_job_fail(&core->res, TPU_JOB_ERR_BUFFER,
			     "operand %u: block (%s) at step %llu ends at byte %llu of slot %u (%llu bytes)",
			     i, b, (unsigned long long)step,
			     (unsigned long long)sp->end, o->slot,
			     (unsigned long long)core->run->slots[o->slot].size);
		fail_at(core, step, i, idx, o->rank);
		return -1;
	}
	return 0;
}

/* The in-bounds part of block @i as a 2-D ref, for the useful FLOPs. */
static void set_valid(struct tpu_core *core, unsigned int i,
		      const struct block_span *sp)
{
	const struct tpu_plan_operand *o = &core->run->plan->operand[i];
	int64_t rows = 1;

	for (unsigned int d = 0; d + 1 < o->rank; d++)
		rows *= (int64_t)sp->valid[d];
	core->valid_rows[i] = rows;
	core->valid_cols[i] = (int64_t)sp->valid[o->rank - 1];
}

static uint64_t span_bytes(const struct tpu_plan_operand *o,
			   const struct block_span *sp)
{
	uint64_t n = tpu_dtype_size(o->dtype);

	for (unsigned int d = 0; d < o->rank; d++)
		n *= sp->valid[d];
	return n;
}

/*
 * HBM address of block row @r (a row of the flattened 2-D block) or NULL
 * when the row lies past the array's edge.
 */
static uint8_t *hbm_row(struct tpu_core *core, const struct tpu_plan_operand *o,
			const struct block_span *sp, int64_t r)
{
	uint64_t off = 0, es = tpu_dtype_size(o->dtype);

	for (int d = o->rank - 2; d >= 0; d--) {
		uint64_t c = (uint64_t)r % o->block[d];

		r /= o->block[d];
		if (c >= sp->valid[d])
			return NULL;
		off += (sp->start[d] + c) * o->stride[d];
	}
	off += sp->start[o->rank - 1];
	return core->run->hbm + core->run->slots[o->slot].offset + o->offset +
	       off * es;
}

/* Rows of the block are equally spaced in HBM: it can be viewed in place. */
static bool viewable(const struct tpu_plan_operand *o)
{
	for (int d = 0; d + 2 < o->rank; d++)
		if (o->block[d] != 1)
			return false;
	return true;
}

static int fetch_input(struct tpu_core *core, unsigned int i,
		       const struct block_span *sp)
{
	const struct tpu_plan_operand *o = &core->run->plan->operand[i];
	uint64_t es = tpu_dtype_size(o->dtype);
	uint64_t valid_cols = sp->valid[o->rank - 1];
	uint8_t *buf;

	if (sp->full && !core->run->debug && viewable(o)) {
		uint64_t ld = o->rank >= 2 ? o->stride[o->rank - 2] : (uint64_t)o->cols;

		core->block[i] = (struct tpu_ref2d){
			core->run->hbm + core->run->slots[o->slot].offset + sp->first,
			o->rows, o->cols, (int64_t)ld, o->dtype };
		return 0;
	}
	if (!core->block_buf[i]) {
		core->block_buf[i] = vmem_get(core, i, o->block_bytes);
		if (!core->block_buf[i])
			return -1;
	}
	buf = core->block_buf[i];
	for (int64_t r = 0; r < o->rows; r++) {
		uint8_t *dst = buf + r * o->cols * es;
		const uint8_t *src = hbm_row(core, o, sp, r);
		uint64_t n = src ? valid_cols * es : 0;

		if (n)
			memcpy(dst, src, n);
		memset(dst + n, 0, o->cols * es - n);
	}
	core->block[i] = (struct tpu_ref2d){ buf, o->rows, o->cols, o->cols,
					     o->dtype };
	return 0;
}

static void write_back(struct tpu_core *core, unsigned int i,
		       const struct block_span *sp)
{
	const struct tpu_plan_operand *o = &core->run->plan->operand[i];
	uint64_t es = tpu_dtype_size(o->dtype);
	const uint8_t *buf = core->block_buf[i];

	for (int64_t r = 0; r < o->rows; r++) {
		uint8_t *dst = hbm_row(core, o, sp, r);

		if (dst)
			memcpy(dst, buf + r * o->cols * es,
			       sp->valid[o->rank - 1] * es);
	}
}

/* --- debug: output hazards --- */

static uint64_t flat_block(const struct tpu_plan_operand *o, const int64_t *idx)
{
	uint64_t f = 0;

	for (unsigned int d = 0; d < o->rank; d++)
		f = f * o->nblocks[d] + (uint64_t)idx[d];
	return f;
}

static int hazard(struct tpu_core *core, unsigned int i, const int64_t *idx,
		  const char *why, uint64_t a, uint64_t b)
{
	const struct tpu_plan_operand *o = &core->run->plan->operand[i];
	char s[96];

	format_index(s, sizeof(s), idx, o->rank);
	tpu_job_fail(&core->res, TPU_JOB_ERR_HAZARD,
		     "output operand %u: block (%s) at step %llu %s %llu and %llu",
		     i, s, (unsigned long long)core->step, why,
		     (unsigned long long)a, (unsigned long long)b);
	fail_at(core, core->step, i, idx, o->rank);
	return -1;
}

/* The first step of a visit to an output block claims it for this visit. */
static int claim_block(struct tpu_core *core, unsigned int i,
		       const int64_t *idx, uint64_t pflat)
{
	const struct tpu_plan_operand *o = &core->run->plan->operand[i];
	_Atomic uint64_t *slot = &core->run->owner[i][flat_block(o, idx)];
	uint64_t v = 0;

	core->visit_owner[i] = pflat;
	if (atomic_compare_exchange_strong(slot, &v, pflat + 1))
		return 0;
	if ((v & ~CLOSED) != pflat + 1)
		return hazard(core, i, idx,
			      "is written by parallel iterations",
			      (v & ~CLOSED) - 1, pflat);
	return hazard(core, i, idx,
		      "is revisited after its write-back (parallel iteration, step)",
		      pflat, core->step);
}

static void close_block(struct tpu_core *core, unsigned int i,
			const int64_t *idx)
{
	const struct tpu_plan_operand *o = &core->run->plan->operand[i];

	atomic_store(&core->run->owner[i][flat_block(o, idx)],
		     (core->visit_owner[i] + 1) | CLOSED);
}

/* --- one step --- */

typedef int64_t block_index[TPU_JOB_MAX_OPERANDS][TPU_JOB_MAX_RANK];

static int eval_index_maps(struct tpu_core *core, const int64_t *pid,
			   uint64_t step, block_index idx)
{
	const struct tpu_plan *plan = core->run->plan;
	struct tpu_scalar_fault f;

	for (unsigned int i = plan->num_scalar_prefetch; i < plan->num_operands; i++) {
		const struct tpu_plan_operand *o = &plan->operand[i];

		if (tpu_scalar_run(plan, o->index_map, pid, core->run->smem,
				   idx[i], o->rank, &f)) {
			core->res.error.operand = i;
			return fail_scalar(core, step, "operand index map", i, &f);
		}
	}
	return 0;
}

static bool same_index(const int64_t *a, const int64_t *b, unsigned int rank)
{
	return !memcmp(a, b, rank * sizeof(*a));
}

static int fetch_inputs(struct tpu_core *core, block_index idx,
			uint64_t *fetch_bytes)
{
	const struct tpu_plan *plan = core->run->plan;
	struct block_span sp;

	for (unsigned int i = plan->num_scalar_prefetch; i < plan->num_operands; i++) {
		const struct tpu_plan_operand *o = &plan->operand[i];

		if (o->role != TPU_ROLE_INPUT)
			continue;
		if (core->resident[i] && same_index(core->idx[i], idx[i], o->rank)) {
			core->stats.blocks_skipped++;
			continue;
		}
		if (locate_block(core, i, idx[i], core->step, &sp))
			return -1;
		set_valid(core, i, &sp);
		if (!core->run->model_only && fetch_input(core, i, &sp)) {
			tpu_job_fail(&core->res, TPU_JOB_ERR_INTERNAL,
				     "out of host memory for a VMEM block");
			core->res.error.step = core->step;
			stop_at(core, core->step);
			return -1;
		}
		memcpy(core->idx[i], idx[i], sizeof(idx[i]));
		core->resident[i] = true;
		core->stats.blocks_fetched++;
		*fetch_bytes += span_bytes(o, &sp);
	}
	return 0;
}

static int open_outputs(struct tpu_core *core, block_index idx, uint64_t pflat)
{
	const struct tpu_plan *plan = core->run->plan;
	struct block_span sp;

	for (unsigned int i = plan->num_scalar_prefetch; i < plan->num_operands; i++) {
		const struct tpu_plan_operand *o = &plan->operand[i];

		if (!is_output(o))
			continue;
		if (core->resident[i] && same_index(core->idx[i], idx[i], o->rank)) {
			if (core->run->debug && core->visit_owner[i] != pflat)
				return hazard(core, i, idx[i],
					      "is written by parallel iterations",
					      core->visit_owner[i], pflat);
			continue;
		}
		if (locate_block(core, i, idx[i], core->step, &sp))
			return -1;
		set_valid(core, i, &sp);
		memcpy(core->idx[i], idx[i], sizeof(idx[i]));
		core->resident[i] = true;
		if (!core->run->debug)
			continue;
		if (claim_block(core, i, idx[i], pflat))
			return -1;
		if (!core->run->model_only)
			tpu_poison_fill(core->block_buf[i], o->dtype,
					o->block_bytes / tpu_dtype_size(o->dtype));
	}
	return 0;
}

/* Write back the output blocks whose index changes after this step. */
static uint64_t close_outputs(struct tpu_core *core, block_index next,
			      bool has_next)
{
	const struct tpu_plan *plan = core->run->plan;
	uint64_t bytes = 0;
	struct block_span sp;

	for (unsigned int i = plan->num_scalar_prefetch; i < plan->num_operands; i++) {
		const struct tpu_plan_operand *o = &plan->operand[i];

		if (!is_output(o))
			continue;
		if (has_next && same_index(core->idx[i], next[i], o->rank))
			continue;
		locate_block(core, i, core->idx[i], core->step, &sp);	/* checked */
		if (!core->run->model_only)
			write_back(core, i, &sp);
		if (core->run->debug)
			close_block(core, i, core->idx[i]);
		core->resident[i] = false;
		core->stats.blocks_written++;
		bytes += span_bytes(o, &sp);
	}
	return bytes;
}

static double smem_scalar(const struct tpu_run *run, struct tpu_plan_ref ref,
			  int64_t index)
{
	const struct tpu_plan *plan = run->plan;
	uint64_t base;
	uint8_t dtype;
	int32_t w;
	float f;

	if (ref.kind == TPU_REF_OPERAND) {
		base = plan->operand[ref.index].smem_base;
		dtype = TPU_DTYPE_INT32;
	} else {
		base = plan->scratch[ref.index].smem_base;
		dtype = plan->scratch[ref.index].dtype;
	}
	w = run->smem ? run->smem[base + index] : 0;
	if (dtype == TPU_DTYPE_INT32)
		return w;
	memcpy(&f, &w, sizeof(f));
	return f;
}

static uint64_t smem_elems(const struct tpu_plan *plan, struct tpu_plan_ref ref)
{
	if (ref.kind == TPU_REF_OPERAND)
		return plan->operand[ref.index].elems;
	return plan->scratch[ref.index].bytes / 4;
}

/* In-bounds extent of @ref along dim @d (0 rows, 1 cols); scratch: all. */
static int64_t valid_extent(const struct tpu_core *core, struct tpu_plan_ref ref,
			    int d, int64_t whole)
{
	if (ref.kind != TPU_REF_OPERAND)
		return whole;
	return d ? core->valid_cols[ref.index] : core->valid_rows[ref.index];
}

/*
 * FLOPs of a dot on the in-bounds parts of its operands: what the model
 * counts as useful work (the MXU's time is still that of the whole block).
 */
static uint64_t useful_flops(const struct tpu_core *core,
			     const struct tpu_plan_op *op)
{
	bool ta = op->dot & TPU_DOT_LHS_CONTRACT_0;
	bool tb = op->dot & TPU_DOT_RHS_CONTRACT_1;
	int64_t m = valid_extent(core, op->src0, ta, op->m);
	int64_t ka = valid_extent(core, op->src0, !ta, op->k);
	int64_t kb = valid_extent(core, op->src1, tb, op->k);
	int64_t n = valid_extent(core, op->src1, !tb, op->n);

	return 2ull * m * n * (ka < kb ? ka : kb);
}

static void run_op(const struct tpu_core *core, const struct tpu_plan_op *op,
		   double scalar)
{
	struct tpu_op_args args = {
		.dst = core_ref(core, op->dst),
		.scalar = scalar,
		.row_tmp = { core->row_tmp[0], core->row_tmp[1] },
	};

	if (tpu_op_reads_src0(op))
		args.src0 = core_ref(core, op->src0);
	if (tpu_op_reads_src1(op))
		args.src1 = core_ref(core, op->src1);
	tpu_op_run(op, &args);
}

static int run_body(struct tpu_core *core, double *compute_s, uint64_t *flops,
		    uint64_t *useful)
{
	const struct tpu_plan *plan = core->run->plan;
	struct tpu_scalar_fault f;
	double scalar = 0;

	for (unsigned int n = 0; n < plan->num_ops; n++) {
		const struct tpu_plan_op *op = &plan->op[n];
		int64_t v = 1;

		if (op->pred.len &&
		    tpu_scalar_run(plan, op->pred, core->pid, core->run->smem,
				   &v, 1, &f)) {
			core->res.error.op = n;
			return fail_scalar(core, core->step, "op predicate", n, &f);
		}
		if (!v)
			continue;
		if (op->opcode == TPU_OP_DOT) {
			uint8_t t = core_ref(core, op->src0).dtype;

			if (core->run->model_only)
				t = op->src0.kind == TPU_REF_OPERAND ?
				    plan->operand[op->src0.index].dtype :
				    plan->scratch[op->src0.index].dtype;
			*flops += 2ull * op->m * op->n * op->k;
			*useful += useful_flops(core, op);
			*compute_s += tpu_model_dot_s(core->run->cfg, t, op->m,
						      op->n, op->k);
		}
		if (op->bcast == TPU_BCAST_SMEM) {
			int64_t at;

			if (tpu_scalar_run(plan, op->scalar_index, core->pid,
					   core->run->smem, &at, 1, &f)) {
				core->res.error.op = n;
				return fail_scalar(core, core->step,
						   "op scalar_index", n, &f);
			}
			if (at < 0 || (uint64_t)at >= smem_elems(plan, op->src1)) {
				f = (struct tpu_scalar_fault){
					TPU_JOB_ERR_SMEM_RANGE, op->src1.index, at };
				core->res.error.op = n;
				return fail_scalar(core, core->step,
						   "op scalar_index", n, &f);
			}
			scalar = smem_scalar(core->run, op->src1, at);
		} else if (op->bcast == TPU_BCAST_IMM) {
			float imm;

			memcpy(&imm, &op->imm, sizeof(imm));
			scalar = imm;
		}
		if (!core->run->model_only)
			run_op(core, op, scalar);
	}
	return 0;
}

void tpu_core_run(struct tpu_core *core)
{
	const struct tpu_plan *plan = core->run->plan;
	block_index cur, next;
	int64_t npid[TPU_JOB_MAX_GRID_RANK];
	uint64_t nstep;
	bool has_next;

	tpu_model_begin(&core->model, core->run->cfg);
	has_next = first_step(core, core->pid, &core->step);
	if (has_next && eval_index_maps(core, core->pid, core->step, cur))
		goto out;
	while (has_next && core->step < atomic_load_explicit(&core->run->fail_step,
							     memory_order_relaxed)) {
		uint64_t fetch = 0, flops = 0, useful = 0, out_bytes;
		double compute = 0;

		if (core->run->abort &&
		    atomic_load_explicit(core->run->abort, memory_order_relaxed)) {
			tpu_job_fail(&core->res, TPU_JOB_ERR_ABORTED,
				     "stopped at step %llu: the queue was reset",
				     (unsigned long long)core->step);
			core->res.error.step = core->step;
			break;
		}
		memcpy(npid, core->pid, sizeof(npid));
		nstep = core->step;
		has_next = next_step(core, npid, &nstep);
		if (has_next && eval_index_maps(core, npid, nstep, next))
			break;
		if (fetch_inputs(core, cur, &fetch) ||
		    open_outputs(core, cur, parallel_index(plan, core->pid)) ||
		    run_body(core, &compute, &flops, &useful))
			break;
		out_bytes = close_outputs(core, next, has_next);
		tpu_model_step(&core->model, fetch, compute, useful, out_bytes);
		core->stats.steps++;
		core->stats.hbm_bytes_in += fetch;
		core->stats.hbm_bytes_out += out_bytes;
		core->stats.mxu_flops += flops;
		memcpy(core->pid, npid, sizeof(npid));
		core->step = nstep;
		memcpy(cur, next, sizeof(cur));
	}
out:
	tpu_model_end(&core->model, &core->stats.model);
}
