// SPDX-License-Identifier: MIT
/*
 * Checks of the memory-model ops: async copies (pltpu.make_async_copy's
 * start and wait), semaphore signal and wait, and scalar stores. Messages
 * name the op, the field and both shapes where they must agree.
 */
#include <stdio.h>

#include "tpu_check.h"
#include "tpu_dtype.h"

static const char *const space_name[TPU_MEM_COUNT] = {
	"VMEM", "SMEM", "ANY", "DMA semaphore", "regular semaphore",
};

/* The box's shape once squeezed dimensions are dropped: "8x128". */
static unsigned int squeezed_shape(const struct tpu_plan_box *b, uint64_t *shape)
{
	unsigned int n = 0;

	for (unsigned int d = 0; d < b->rank; d++)
		if (!(b->squeeze >> d & 1))
			shape[n++] = b->size[d];
	return n;
}

/* The box's innermost kept dimension has no stride (its bytes are dense). */
static bool dense_last(const struct tpu_plan_box *b)
{
	for (int d = (int)b->rank - 1; d >= 0; d--)
		if (!(b->squeeze >> d & 1))
			return b->stride[d] == 1;
	return false;
}

static void format_shape(char *buf, size_t len, const uint64_t *shape,
			 unsigned int n)
{
	int at = snprintf(buf, len, "%s", n ? "" : "()");

	for (unsigned int d = 0; d < n && at >= 0 && (size_t)at < len; d++)
		at += snprintf(buf + at, len - at, "%s%llu", d ? "x" : "",
			       (unsigned long long)shape[d]);
}

/* A copy's end: a ref or window with data, the dst not read-only. */
static int copy_end(const struct tpu_plan *plan, unsigned int i,
		    struct tpu_plan_ref r, const char *field, bool dst,
		    struct tpu_plan_box *box, struct tpu_job_result *res)
{
	char name[24];

	tpu_check_ref_name(r, name, sizeof(name));
	if (!tpu_plan_ref_box(plan, r, box))
		return tpu_check_error(res, "op %u: %s %s: a copy moves an operand, a VMEM or SMEM scratch or a window of one",
				       i, field, name);
	if (dst && box->base.kind == TPU_REF_OPERAND &&
	    plan->operand[box->base.index].role == TPU_ROLE_INPUT)
		return tpu_check_error(res, "op %u: dst %s is input operand %u's %s, which is read-only",
				       i, name, box->base.index,
				       box->space == TPU_MEM_ANY ? "array" : "block");
	return 0;
}

/* A semaphore scratch (of @space, or either kind when @space is 0). */
static int semaphore_ref(const struct tpu_plan *plan, unsigned int i,
			 struct tpu_plan_ref r, unsigned int space,
			 struct tpu_job_result *res)
{
	char name[24];

	tpu_check_ref_name(r, name, sizeof(name));
	if (r.kind == TPU_REF_SCRATCH && r.index < plan->num_scratch &&
	    (space ? plan->scratch[r.index].space == space :
		     plan->scratch[r.index].space >= TPU_MEM_SEM_DMA))
		return 0;
	return tpu_check_error(res, "op %u: src1 %s must be a %s scratch",
			       i, name, space == TPU_MEM_SEM_DMA ? "DMA semaphore" :
			       "semaphore");
}

int tpu_check_copy(const struct tpu_plan *plan, unsigned int i,
		   const struct tpu_plan_op *op, struct tpu_job_result *res)
{
	uint64_t ss[TPU_JOB_MAX_RANK] = { 0 }, ds[TPU_JOB_MAX_RANK] = { 0 };
	struct tpu_plan_box src, dst;
	char a[64], b[64];
	unsigned int sn, dn;
	int ret;

	ret = copy_end(plan, i, op->dst, "dst", true, &dst, res);
	if (!ret)
		ret = semaphore_ref(plan, i, op->src1, TPU_MEM_SEM_DMA, res);
	if (ret)
		return ret;
	/* a wait needs only the dst, whose bytes it takes */
	if (op->opcode == TPU_OP_COPY_WAIT && op->src0.kind == TPU_REF_NONE) {
		/* as every (none) ref: the driver checks the same */
		if (op->src0.index)
			return tpu_check_error(res, "op %u: src0 (none) has index %u: must be 0",
					       i, op->src0.index);
		return 0;
	}
	ret = copy_end(plan, i, op->src0, "src0", false, &src, res);
	if (ret)
		return ret;
	/* the DMA engine moves bytes: dtypes of one width are a bitcast */
	if (src.dtype != dst.dtype &&
	    (src.dtype == TPU_DTYPE_BOOL || dst.dtype == TPU_DTYPE_BOOL))
		return tpu_check_error(res, "op %u: copy of %s into %s: src0 and dst must have the same dtype (or be bitcasts: no bool)",
				       i, tpu_dtype_name(src.dtype),
				       tpu_dtype_name(dst.dtype));
	sn = squeezed_shape(&src, ss);
	dn = squeezed_shape(&dst, ds);
	format_shape(a, sizeof(a), ss, sn);
	format_shape(b, sizeof(b), ds, dn);
	if (sn != dn)
		goto mismatch;
	if (tpu_dtype_size(src.dtype) != tpu_dtype_size(dst.dtype)) {
		/* two widths (a width-changing bitcast): the rows' bytes, so
		 * the last dimensions hold as many bytes, densely */
		if (!sn || !dense_last(&src) || !dense_last(&dst) ||
		    ss[sn - 1] * tpu_dtype_size(src.dtype) !=
		    ds[sn - 1] * tpu_dtype_size(dst.dtype))
			return tpu_check_error(res, "op %u: copy of %s %s into %s %s: a copy between dtypes of two widths moves whole rows of bytes (the last dimensions as many bytes, without a stride)",
					       i, tpu_dtype_name(src.dtype), a,
					       tpu_dtype_name(dst.dtype), b);
		sn--;
	}
	for (unsigned int d = 0; d < sn; d++)
		if (ss[d] != ds[d])
			goto mismatch;
	return 0;
mismatch:
	return tpu_check_error(res, "op %u: copy shapes differ: src0 is %s (%s), dst is %s (%s)",
			       i, a, space_name[src.space], b,
			       space_name[dst.space]);
}

int tpu_check_sem_op(const struct tpu_plan *plan, unsigned int i,
		     const struct tpu_plan_op *op, struct tpu_job_result *res)
{
	if (op->dst.kind != TPU_REF_NONE || op->dst.index)
		return tpu_check_error(res, "op %u: dst must be (none) for opcode %s",
				       i, op->opcode == TPU_OP_SEM_SIGNAL ?
				       "sem_signal" : "sem_wait");
	return semaphore_ref(plan, i, op->src1, 0, res);
}

/* A prefetch array, an SMEM scratch or an SMEM-space output's block. */
int tpu_check_scalar_store(const struct tpu_plan *plan, unsigned int i,
			   const struct tpu_plan_op *op,
			   struct tpu_job_result *res)
{
	struct tpu_plan_ref r = op->dst;
	char name[24];

	tpu_check_ref_name(r, name, sizeof(name));
	if (r.kind == TPU_REF_OPERAND && r.index < plan->num_operands) {
		const struct tpu_plan_operand *o = &plan->operand[r.index];

		if (o->role == TPU_ROLE_SCALAR_PREFETCH ||
		    (o->role == TPU_ROLE_OUTPUT && o->space == TPU_MEM_SMEM))
			return 0;
	}
	if (r.kind == TPU_REF_SCRATCH && r.index < plan->num_scratch &&
	    plan->scratch[r.index].space == TPU_MEM_SMEM)
		return 0;
	return tpu_check_error(res, "op %u: scalar_store dst %s must be an SMEM ref: a scalar-prefetch operand, an SMEM scratch or an SMEM-space output",
			       i, name);
}
