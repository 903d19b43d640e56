// SPDX-License-Identifier: GPL-2.0-only
/*
 * Structural checks of a grid-job descriptor before it may reach the
 * device: the header, every array's place in the blob, counts, enum values,
 * slots, program ranges, and a VMEM need the device could never meet.
 *
 * The device checks everything again (and runs the programs); this is the
 * driver's half of "userspace cannot hand the device garbage".
 */
#include <linux/overflow.h>

#include "tpu_drv.h"
#include "tpu_job_check.h"
#include "../uapi/tpu_job.h"

/* Log why, for drm.debug users, and fail with -EINVAL. */
#define reject(tdev, fmt, ...) \
	({ tpu_dbg(tdev, "job rejected: " fmt "\n", ##__VA_ARGS__); -EINVAL; })

struct job_view {
	const struct tpu_job_header *hdr;
	const struct tpu_job_operand *operands;
	const struct tpu_job_scratch *scratch;
	const struct tpu_job_op *ops;
	const struct tpu_job_insn *insns;
};

static const u8 dtype_sizes[TPU_DTYPE_COUNT] = {
	[TPU_DTYPE_F32] = 4, [TPU_DTYPE_BF16] = 2, [TPU_DTYPE_INT8] = 1,
	[TPU_DTYPE_UINT8] = 1, [TPU_DTYPE_INT32] = 4, [TPU_DTYPE_BOOL] = 1,
};

/* [offset, offset + count * size) inside the blob, 8-byte aligned. */
static bool array_fits(u32 total, u32 offset, u32 count, size_t size)
{
	u64 end = (u64)offset + (u64)count * size;

	return !(offset % 8) && offset >= sizeof(struct tpu_job_header) &&
	       end <= total;
}

static bool ranges_overlap(u64 a, u64 alen, u64 b, u64 blen)
{
	return alen && blen && a < b + blen && b < a + alen;
}

static int check_layout(struct tpu_device *tdev, const struct tpu_job_header *h,
			u32 size)
{
	const struct {
		u32 offset;
		u32 count;
		size_t size;
	} arrays[] = {
		{ h->operands_offset, h->num_operands, sizeof(struct tpu_job_operand) },
		{ h->scratch_offset, h->num_scratch, sizeof(struct tpu_job_scratch) },
		{ h->ops_offset, h->num_ops, sizeof(struct tpu_job_op) },
		{ h->code_offset, h->num_insns, sizeof(struct tpu_job_insn) },
	};
	unsigned int i, j;

	if (h->magic != TPU_JOB_MAGIC || h->version != TPU_JOB_VERSION ||
	    h->header_size != sizeof(*h) || h->total_size != size)
		return reject(tdev, "bad magic, version, header_size or total_size");
	if (h->flags & ~TPU_JOB_F_ALL || h->reserved0 ||
	    memchr_inv(h->reserved1, 0, sizeof(h->reserved1)))
		return reject(tdev, "unknown flags or non-zero reserved fields");
	if (!h->num_operands || h->num_operands > TPU_JOB_MAX_OPERANDS ||
	    h->num_scalar_prefetch > h->num_operands ||
	    h->num_scratch > TPU_JOB_MAX_SCRATCH ||
	    !h->num_ops || h->num_ops > TPU_JOB_MAX_OPS ||
	    h->num_insns > TPU_JOB_MAX_INSNS)
		return reject(tdev, "a count is out of range");
	for (i = 0; i < ARRAY_SIZE(arrays); i++) {
		if (!array_fits(size, arrays[i].offset, arrays[i].count,
				arrays[i].size))
			return reject(tdev, "array %u outside the descriptor", i);
		for (j = 0; j < i; j++)
			if (ranges_overlap(arrays[i].offset,
					   arrays[i].count * arrays[i].size,
					   arrays[j].offset,
					   arrays[j].count * arrays[j].size))
				return reject(tdev, "arrays %u and %u overlap", j, i);
	}
	return 0;
}

static int check_grid(struct tpu_device *tdev, const struct tpu_job_header *h)
{
	u64 steps = 1;
	unsigned int d;

	if (!h->grid_rank || h->grid_rank > TPU_JOB_MAX_GRID_RANK)
		return reject(tdev, "grid rank %u", h->grid_rank);
	for (d = 0; d < TPU_JOB_MAX_GRID_RANK; d++) {
		if (d >= h->grid_rank) {
			if (h->grid[d] || h->dim_semantics[d])
				return reject(tdev, "grid dim %u beyond the rank", d);
			continue;
		}
		if (!h->grid[d] || h->grid[d] > TPU_JOB_MAX_DIM ||
		    h->dim_semantics[d] > TPU_DIM_ARBITRARY)
			return reject(tdev, "grid dim %u", d);
		steps *= h->grid[d];
		if (steps > TPU_JOB_MAX_STEPS)
			return reject(tdev, "more than 2^40 grid steps");
	}
	return 0;
}

static bool prog_ok(const struct tpu_job_header *h, const struct tpu_job_prog *p)
{
	return !p->reserved && p->len <= TPU_JOB_MAX_PROG_LEN &&
	       (u64)p->offset + p->len <= h->num_insns;
}

/* Bytes of a dense block of @rank dims; false on overflow. */
static bool block_bytes(const u32 *dims, unsigned int rank, u8 dtype, u64 *bytes)
{
	u64 n = dtype_sizes[dtype];
	unsigned int d;

	for (d = 0; d < rank; d++)
		if (check_mul_overflow(n, (u64)dims[d], &n))
			return false;
	*bytes = n;
	return true;
}

static int check_operand(struct tpu_device *tdev, const struct job_view *v,
			 unsigned int i, const u64 *slot_sizes,
			 unsigned int nslots, u64 *vmem)
{
	const struct tpu_job_operand *o = &v->operands[i];
	bool prefetch = i < v->hdr->num_scalar_prefetch;
	u64 elems = 1, bytes;
	unsigned int d;

	if (o->slot >= nslots)
		return reject(tdev, "operand %u: slot %u, but %u buffers given",
			      i, o->slot, nslots);
	if (prefetch ? o->role != TPU_ROLE_SCALAR_PREFETCH :
	    o->role != TPU_ROLE_INPUT && o->role != TPU_ROLE_OUTPUT)
		return reject(tdev, "operand %u: role %u", i, o->role);
	if (o->dtype >= TPU_DTYPE_COUNT || (prefetch && o->dtype != TPU_DTYPE_INT32))
		return reject(tdev, "operand %u: dtype %u", i, o->dtype);
	if (!o->rank || o->rank > TPU_JOB_MAX_RANK || o->reserved0 ||
	    memchr_inv(o->reserved1, 0, sizeof(o->reserved1)))
		return reject(tdev, "operand %u: rank or reserved fields", i);
	for (d = 0; d < TPU_JOB_MAX_RANK; d++) {
		bool in = d < o->rank;

		if (in ? !o->shape[d] || o->shape[d] > TPU_JOB_MAX_ARRAY_DIM : o->shape[d])
			return reject(tdev, "operand %u: shape dim %u", i, d);
		if (prefetch ? o->block[d] != 0 :
		    in ? !o->block[d] || o->block[d] > TPU_JOB_MAX_DIM : o->block[d] != 0)
			return reject(tdev, "operand %u: block dim %u", i, d);
		if (in && check_mul_overflow(elems, o->shape[d], &elems))
			return reject(tdev, "operand %u: array too large", i);
	}
	if (!prog_ok(v->hdr, &o->index_map) || (prefetch && o->index_map.len))
		return reject(tdev, "operand %u: index map outside the code", i);
	if (check_mul_overflow(elems, (u64)dtype_sizes[o->dtype], &bytes) ||
	    o->offset > slot_sizes[o->slot] ||
	    bytes > slot_sizes[o->slot] - o->offset)
		return reject(tdev, "operand %u: array does not fit its buffer", i);
	if (!prefetch) {
		if (!block_bytes(o->block, o->rank, o->dtype, &bytes))
			return reject(tdev, "operand %u: block too large", i);
		*vmem += 2 * bytes;	/* double-buffered */
	}
	return 0;
}

static int check_scratch(struct tpu_device *tdev, const struct tpu_job_scratch *s,
			 unsigned int i, u64 *vmem)
{
	u64 bytes;
	unsigned int d;

	if (s->space > TPU_MEM_SMEM || s->dtype >= TPU_DTYPE_COUNT ||
	    !s->rank || s->rank > TPU_JOB_MAX_RANK || s->reserved0 ||
	    memchr_inv(s->reserved1, 0, sizeof(s->reserved1)))
		return reject(tdev, "scratch %u: space, dtype, rank or reserved", i);
	for (d = 0; d < TPU_JOB_MAX_RANK; d++)
		if (d < s->rank ? !s->shape[d] || s->shape[d] > TPU_JOB_MAX_DIM :
		    s->shape[d] != 0)
			return reject(tdev, "scratch %u: shape dim %u", i, d);
	if (!block_bytes(s->shape, s->rank, s->dtype, &bytes))
		return reject(tdev, "scratch %u: too large", i);
	if (s->space == TPU_MEM_VMEM)
		*vmem += bytes;
	return 0;
}

static bool ref_ok(const struct tpu_job_header *h, struct tpu_job_ref r,
		   bool may_be_none)
{
	switch (r.kind) {
	case TPU_REF_NONE:
		return may_be_none && !r.index;
	case TPU_REF_OPERAND:
		return r.index < h->num_operands;
	case TPU_REF_SCRATCH:
		return r.index < h->num_scratch;
	default:
		return false;
	}
}

static int check_op(struct tpu_device *tdev, const struct job_view *v,
		    unsigned int i)
{
	const struct tpu_job_op *op = &v->ops[i];
	const struct tpu_job_header *h = v->hdr;
	bool select = op->opcode == TPU_OP_SELECT;
	bool fn_ok;

	switch (op->opcode) {
	case TPU_OP_ZERO:
	case TPU_OP_DOT:
	case TPU_OP_SELECT:
	case TPU_OP_IOTA:
		fn_ok = !op->fn;
		break;
	case TPU_OP_UNARY:
		fn_ok = op->fn < TPU_UNARY_COUNT;
		break;
	case TPU_OP_BINARY:
		fn_ok = op->fn < TPU_BINARY_COUNT;
		break;
	case TPU_OP_REDUCE:
		fn_ok = op->fn < TPU_REDUCE_COUNT;
		break;
	default:
		return reject(tdev, "op %u: opcode %u", i, op->opcode);
	}
	if (!fn_ok || op->bcast >= TPU_BCAST_COUNT ||
	    (op->opcode != TPU_OP_BINARY && !select && op->bcast) ||
	    op->bcast2 >= TPU_BCAST_COUNT || (!select && op->bcast2) ||
	    op->axis > 1 || op->dot & ~TPU_DOT_ALL ||
	    (op->opcode != TPU_OP_DOT && op->dot) ||
	    op->reserved0 || memchr_inv(op->reserved1, 0, sizeof(op->reserved1)))
		return reject(tdev, "op %u: fn, bcast, axis, dot flags or reserved",
			      i);
	if (!ref_ok(h, op->dst, false) || !ref_ok(h, op->src0, true) ||
	    !ref_ok(h, op->src1, true) || !ref_ok(h, op->src2, true))
		return reject(tdev, "op %u: a ref names nothing", i);
	if (op->dst.kind == TPU_REF_OPERAND &&
	    v->operands[op->dst.index].role != TPU_ROLE_OUTPUT)
		return reject(tdev, "op %u: writes operand %u, not an output",
			      i, op->dst.index);
	if (!prog_ok(h, &op->pred) || !prog_ok(h, &op->scalar_index))
		return reject(tdev, "op %u: program outside the code", i);
	return 0;
}

/**
 * tpu_job_check() - check a job descriptor's structure
 * @tdev: the device
 * @blob: the descriptor, in kernel memory
 * @size: its size, at least sizeof(struct tpu_job_header)
 * @slot_sizes: the size of each buffer-table slot's buffer
 * @nslots: entries of @slot_sizes
 *
 * Return: 0; -EINVAL for a malformed descriptor; -ENOSPC for a VMEM need
 * beyond the device's physical VMEM, which no limit can satisfy.
 */
int tpu_job_check(struct tpu_device *tdev, const void *blob, u32 size,
		  const u64 *slot_sizes, unsigned int nslots)
{
	struct job_view v = { .hdr = blob };
	const struct tpu_job_header *h = blob;
	u64 vmem = 0;
	unsigned int i;
	int ret;

	ret = check_layout(tdev, h, size);
	if (!ret)
		ret = check_grid(tdev, h);
	if (ret)
		return ret;
	v.operands = blob + h->operands_offset;
	v.scratch = blob + h->scratch_offset;
	v.ops = blob + h->ops_offset;
	v.insns = blob + h->code_offset;

	for (i = 0; i < h->num_operands; i++) {
		ret = check_operand(tdev, &v, i, slot_sizes, nslots, &vmem);
		if (ret)
			return ret;
	}
	for (i = 0; i < h->num_scratch; i++) {
		ret = check_scratch(tdev, &v.scratch[i], i, &vmem);
		if (ret)
			return ret;
	}
	for (i = 0; i < h->num_ops; i++) {
		ret = check_op(tdev, &v, i);
		if (ret)
			return ret;
	}
	for (i = 0; i < h->num_insns; i++)
		if (v.insns[i].op >= TPU_INSN_COUNT ||
		    memchr_inv(v.insns[i].reserved, 0, sizeof(v.insns[i].reserved)))
			return reject(tdev, "instruction %u", i);

	if (h->vmem_limit_bytes > tdev->caps[TPU_CAP_VMEM_SIZE])
		return reject(tdev, "vmem_limit_bytes %llu above the %llu of VMEM",
			      h->vmem_limit_bytes, tdev->caps[TPU_CAP_VMEM_SIZE]);
	if (vmem > tdev->caps[TPU_CAP_VMEM_SIZE]) {
		tpu_dbg(tdev, "job rejected: needs %llu bytes of VMEM, the device has %llu\n",
			vmem, tdev->caps[TPU_CAP_VMEM_SIZE]);
		return -ENOSPC;
	}
	return 0;
}
