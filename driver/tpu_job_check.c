// SPDX-License-Identifier: GPL-2.0-only
/*
 * Structural checks of a grid-job descriptor before it may reach the
 * device: the header, every array's place in the blob, counts, enum values
 * (memory spaces, buffers, aliases, opcodes, instructions), semaphore
 * scratch, windows, slots, program ranges, and a VMEM need (pl.Buffered(n)
 * blocks and VMEM scratch) the device could never meet.
 *
 * The device checks everything again (and runs the programs); this is the
 * driver's half of "userspace cannot hand the device garbage".
 */
#include <linux/overflow.h>

#include "tpu_device.h"
#include "tpu_job_check.h"
#include "../uapi/tpu_hw.h"
#include "../uapi/tpu_job.h"
#include "../uapi/tpu_print.h"
#include "../uapi/tpu_trace.h"

/* Log why, for drm.debug users, and fail with -EINVAL. */
#define reject(tdev, fmt, ...) \
	({ tpu_dbg(tdev, "job rejected: " fmt "\n", ##__VA_ARGS__); -EINVAL; })

struct job_view {
	const struct tpu_job_header *hdr;
	const struct tpu_job_operand *operands;
	const struct tpu_job_scratch *scratch;
	const struct tpu_job_op *ops;
	const struct tpu_job_insn *insns;
	const struct tpu_job_window *windows;
};

static const u8 dtype_sizes[TPU_DTYPE_COUNT] = {
	[TPU_DTYPE_F32] = 4, [TPU_DTYPE_BF16] = 2, [TPU_DTYPE_INT8] = 1,
	[TPU_DTYPE_UINT8] = 1, [TPU_DTYPE_INT32] = 4, [TPU_DTYPE_BOOL] = 1,
	[TPU_DTYPE_UINT32] = 4,
};

/*
 * [offset, offset + count * size) inside the blob, 8-byte aligned, past the
 * header unless empty (an empty array's offset is any aligned one in bounds,
 * as the window array's 0 in descriptors that have none).
 */
static bool array_fits(u32 total, u32 offset, u32 count, size_t size)
{
	u64 end = (u64)offset + (u64)count * size;

	return !(offset % 8) &&
	       (!count || offset >= sizeof(struct tpu_job_header)) &&
	       end <= total;
}

static bool ranges_overlap(u64 a, u64 alen, u64 b, u64 blen)
{
	return alen && blen && a < b + blen && b < a + alen;
}

static int check_layout(struct tpu_device *tdev,
			const struct tpu_job_header *hdr, u32 size)
{
	const struct {
		u32 offset;
		u32 count;
		size_t size;
	} arrays[] = {
		{ hdr->operands_offset, hdr->num_operands,
		  sizeof(struct tpu_job_operand) },
		{ hdr->scratch_offset, hdr->num_scratch,
		  sizeof(struct tpu_job_scratch) },
		{ hdr->ops_offset, hdr->num_ops, sizeof(struct tpu_job_op) },
		{ hdr->code_offset, hdr->num_insns,
		  sizeof(struct tpu_job_insn) },
		{ hdr->windows_offset, hdr->num_windows,
		  sizeof(struct tpu_job_window) },
	};
	unsigned int i, j;

	if (hdr->magic != TPU_JOB_MAGIC || hdr->version != TPU_JOB_VERSION ||
	    hdr->header_size != sizeof(*hdr) || hdr->total_size != size)
		return reject(tdev, "bad magic, version, header_size or total_size");
	if (hdr->flags & ~TPU_JOB_F_ALL || hdr->reserved0 ||
	    (hdr->trace_slot && !(hdr->flags & TPU_JOB_F_TRACE)) ||
	    (hdr->print_slot && !(hdr->flags & TPU_JOB_F_PRINT)) ||
	    memchr_inv(hdr->reserved2, 0, sizeof(hdr->reserved2)))
		return reject(tdev, "unknown flags or non-zero reserved fields");
	if (!hdr->num_operands || hdr->num_operands > TPU_JOB_MAX_OPERANDS ||
	    hdr->num_scalar_prefetch > hdr->num_operands ||
	    hdr->num_scratch > TPU_JOB_MAX_SCRATCH ||
	    hdr->num_ops > TPU_JOB_MAX_OPS ||
	    hdr->num_insns > TPU_JOB_MAX_INSNS ||
	    hdr->num_windows > TPU_JOB_MAX_WINDOWS)
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

static int check_grid(struct tpu_device *tdev, const struct tpu_job_header *hdr)
{
	u64 steps = 1;
	unsigned int d;

	if (!hdr->grid_rank || hdr->grid_rank > TPU_JOB_MAX_GRID_RANK)
		return reject(tdev, "grid rank %u", hdr->grid_rank);
	for (d = 0; d < TPU_JOB_MAX_GRID_RANK; d++) {
		if (d >= hdr->grid_rank) {
			if (hdr->grid[d] || hdr->dim_semantics[d])
				return reject(tdev, "grid dim %u beyond the rank", d);
			continue;
		}
		if (!hdr->grid[d] || hdr->grid[d] > TPU_JOB_MAX_DIM ||
		    hdr->dim_semantics[d] > TPU_DIM_ARBITRARY)
			return reject(tdev, "grid dim %u", d);
		steps *= hdr->grid[d];
		if (steps > TPU_JOB_MAX_STEPS)
			return reject(tdev, "more than 2^40 grid steps");
	}
	return 0;
}

static bool prog_in_code(const struct tpu_job_header *hdr,
			 const struct tpu_job_prog *prog)
{
	/* an empty program's offset means nothing, as on the device */
	return !prog->reserved &&
	       (!prog->len || (prog->len <= TPU_JOB_MAX_PROG_LEN &&
			       (u64)prog->offset + prog->len <= hdr->num_insns));
}

/* Bytes of a dense block of @rank dims; false on overflow. */
static bool block_bytes(const u32 *dims, unsigned int rank, u8 dtype, u64 *bytes)
{
	u64 size = dtype_sizes[dtype];
	unsigned int d;

	for (d = 0; d < rank; d++)
		if (check_mul_overflow(size, (u64)dims[d], &size))
			return false;
	*bytes = size;
	return true;
}

/* Add @bytes to the job's VMEM need, saturating: no VMEM holds 2^64 bytes. */
static void vmem_need_add(u64 *vmem, u64 bytes)
{
	if (check_add_overflow(*vmem, bytes, vmem))
		*vmem = U64_MAX;
}

/* An output aliasing @input: the same array, the input aliased once. */
static int check_alias(struct tpu_device *tdev, const struct job_view *view,
		       unsigned int i, const struct tpu_job_operand *input)
{
	const struct tpu_job_operand *operand = &view->operands[i];
	unsigned int j;

	if (input->slot != operand->slot || input->offset != operand->offset ||
	    input->dtype != operand->dtype || input->rank != operand->rank ||
	    memcmp(input->shape, operand->shape, sizeof(input->shape)))
		return reject(tdev, "operand %u: aliases an input with another array",
			      i);
	for (j = 0; j < i; j++)
		if (view->operands[j].alias == operand->alias)
			return reject(tdev, "operand %u: its input is aliased twice",
				      i);
	return 0;
}

/*
 * pl.RevisitMode.ANY: of a VMEM output with one buffer or an SMEM output
 * (the device's rule, rules/tpu_job_check.c).
 */
static bool revisit_fits(const struct tpu_job_operand *operand)
{
	if (operand->revisit == TPU_REVISIT_IMMEDIATE)
		return true;
	if (operand->revisit != TPU_REVISIT_ANY ||
	    operand->role != TPU_ROLE_OUTPUT)
		return false;
	return operand->space == TPU_MEM_SMEM ||
	       (operand->space == TPU_MEM_VMEM && operand->buffers == 1);
}

/*
 * An operand's memory space, pl.Buffered(n) and alias: enum ranges, and an
 * alias naming an input with the same array.
 */
static int check_operand_memory(struct tpu_device *tdev,
				const struct job_view *view, unsigned int i)
{
	const struct tpu_job_operand *operand = &view->operands[i];
	unsigned int alias = operand->alias;

	if (operand->role == TPU_ROLE_SCALAR_PREFETCH) {
		if (operand->space || operand->buffers || alias ||
		    operand->revisit)
			return reject(tdev, "operand %u: prefetch with memory fields set",
				      i);
		return 0;
	}
	if (!revisit_fits(operand))
		return reject(tdev, "operand %u: revisit %u", i,
			      operand->revisit);
	if (operand->space > TPU_MEM_ANY ||
	    operand->buffers > TPU_JOB_MAX_BUFFERS ||
	    (operand->space != TPU_MEM_VMEM && operand->buffers))
		return reject(tdev, "operand %u: space %u or buffers %u", i,
			      operand->space, operand->buffers);
	if (!alias)
		return 0;
	if (operand->role != TPU_ROLE_OUTPUT || alias > view->hdr->num_operands ||
	    view->operands[alias - 1].role != TPU_ROLE_INPUT)
		return reject(tdev, "operand %u: alias %u does not name an input",
			      i, alias);
	return check_alias(tdev, view, i, &view->operands[alias - 1]);
}

/* pl.Element dimensions: of blocked operands, below the rank, padded alone. */
static int check_element_dims(struct tpu_device *tdev,
			      const struct tpu_job_operand *operand,
			      unsigned int i, bool unblocked)
{
	unsigned int d;

	if ((unblocked && operand->element_dims) ||
	    operand->element_dims >> operand->rank)
		return reject(tdev, "operand %u: element_dims 0x%x", i,
			      operand->element_dims);
	for (d = 0; d < TPU_JOB_MAX_RANK; d++)
		if (operand->element_pad[d] && !(operand->element_dims >> d & 1))
			return reject(tdev, "operand %u: element_pad[%u] of a blocked dimension",
				      i, d);
	return 0;
}

static int check_operand(struct tpu_device *tdev, const struct job_view *view,
			 unsigned int i, const u64 *slot_sizes,
			 unsigned int nslots, u64 *vmem)
{
	const struct tpu_job_operand *operand = &view->operands[i];
	bool prefetch = i < view->hdr->num_scalar_prefetch;
	bool unblocked = prefetch || operand->space == TPU_MEM_ANY;
	u64 elems = 1, bytes, buffers;
	unsigned int d;
	int ret;

	if (operand->slot >= nslots)
		return reject(tdev, "operand %u: slot %u, but %u buffers given",
			      i, operand->slot, nslots);
	if (prefetch ? operand->role != TPU_ROLE_SCALAR_PREFETCH :
	    operand->role != TPU_ROLE_INPUT && operand->role != TPU_ROLE_OUTPUT)
		return reject(tdev, "operand %u: role %u", i, operand->role);
	if (operand->dtype >= TPU_DTYPE_COUNT ||
	    (prefetch && operand->dtype != TPU_DTYPE_INT32 &&
	     operand->dtype != TPU_DTYPE_F32))
		return reject(tdev, "operand %u: dtype %u", i, operand->dtype);
	if (!operand->rank || operand->rank > TPU_JOB_MAX_RANK ||
	    operand->reserved2)
		return reject(tdev, "operand %u: rank or reserved fields", i);
	ret = check_element_dims(tdev, operand, i, unblocked);
	if (ret)
		return ret;
	ret = check_operand_memory(tdev, view, i);
	if (ret)
		return ret;
	for (d = 0; d < TPU_JOB_MAX_RANK; d++) {
		bool in = d < operand->rank;
		u64 shape = operand->shape[d];
		u32 block = operand->block[d];

		if (in ? !shape || shape > TPU_JOB_MAX_ARRAY_DIM : shape)
			return reject(tdev, "operand %u: shape dim %u", i, d);
		if (unblocked ? block != 0 :
		    in ? !block || block > TPU_JOB_MAX_DIM : block != 0)
			return reject(tdev, "operand %u: block dim %u", i, d);
		if (in && check_mul_overflow(elems, shape, &elems))
			return reject(tdev, "operand %u: array too large", i);
	}
	if (!prog_in_code(view->hdr, &operand->index_map) ||
	    unblocked != !operand->index_map.len)
		return reject(tdev, "operand %u: index map outside the code, or missing",
			      i);
	if (check_mul_overflow(elems, (u64)dtype_sizes[operand->dtype],
			       &bytes) ||
	    operand->offset > slot_sizes[operand->slot] ||
	    bytes > slot_sizes[operand->slot] - operand->offset)
		return reject(tdev, "operand %u: array does not fit its buffer", i);
	if (!unblocked && operand->space == TPU_MEM_VMEM) {
		if (!block_bytes(operand->block, operand->rank, operand->dtype,
				 &bytes))
			return reject(tdev, "operand %u: block too large", i);
		/* pl.Buffered(n): n blocks, 0 meaning double buffering */
		buffers = operand->buffers ? operand->buffers : 2;
		if (check_mul_overflow(bytes, buffers, &bytes))
			bytes = U64_MAX;
		vmem_need_add(vmem, bytes);
	}
	return 0;
}

static int check_scratch(struct tpu_device *tdev,
			 const struct tpu_job_scratch *scratch, unsigned int i,
			 u64 *vmem)
{
	u64 bytes;
	unsigned int d;

	bool sem = scratch->space == TPU_MEM_SEM_DMA ||
		   scratch->space == TPU_MEM_SEM_REGULAR;

	if (scratch->space >= TPU_MEM_COUNT || scratch->space == TPU_MEM_ANY ||
	    scratch->dtype >= TPU_DTYPE_COUNT ||
	    !scratch->rank || scratch->rank > TPU_JOB_MAX_RANK ||
	    scratch->reserved0 ||
	    memchr_inv(scratch->reserved1, 0, sizeof(scratch->reserved1)))
		return reject(tdev, "scratch %u: space, dtype, rank or reserved", i);
	if (sem && (scratch->dtype != TPU_DTYPE_INT32 || scratch->rank != 1 ||
		    scratch->shape[0] > TPU_JOB_MAX_SEMAPHORES))
		return reject(tdev, "scratch %u: semaphores are int32, rank 1, at most %d",
			      i, TPU_JOB_MAX_SEMAPHORES);
	for (d = 0; d < TPU_JOB_MAX_RANK; d++)
		if (d < scratch->rank ?
		    !scratch->shape[d] || scratch->shape[d] > TPU_JOB_MAX_DIM :
		    scratch->shape[d] != 0)
			return reject(tdev, "scratch %u: shape dim %u", i, d);
	if (!block_bytes(scratch->shape, scratch->rank, scratch->dtype, &bytes))
		return reject(tdev, "scratch %u: too large", i);
	if (scratch->space == TPU_MEM_VMEM)
		vmem_need_add(vmem, bytes);
	return 0;
}

static bool ref_valid(const struct tpu_job_header *hdr, struct tpu_job_ref ref,
		      bool may_be_none)
{
	switch (ref.kind) {
	case TPU_REF_NONE:
		return may_be_none && !ref.index;
	case TPU_REF_OPERAND:
		return ref.index < hdr->num_operands;
	case TPU_REF_SCRATCH:
		return ref.index < hdr->num_scratch;
	case TPU_REF_WINDOW:
		return ref.index < hdr->num_windows;
	default:
		return false;
	}
}

/* A window: its base an operand or scratch, programs in the code. */
static int check_window(struct tpu_device *tdev, const struct job_view *view,
			unsigned int i)
{
	const struct tpu_job_window *w = &view->windows[i];
	struct tpu_job_ref base = w->base;

	if (base.kind == TPU_REF_WINDOW || !ref_valid(view->hdr, base, false) ||
	    w->squeeze >> TPU_JOB_MAX_RANK || w->reserved0 ||
	    !prog_in_code(view->hdr, &w->start))
		return reject(tdev, "window %u: base, squeeze, start or reserved", i);
	return 0;
}

/* The memory-model ops take no fn and no vector fields. */
static bool memory_op(const struct tpu_job_op *op)
{
	return op->opcode >= TPU_OP_COPY_START &&
	       op->opcode <= TPU_OP_SCALAR_STORE;
}

static int check_op(struct tpu_device *tdev, const struct job_view *view,
		    unsigned int i)
{
	const struct tpu_job_op *op = &view->ops[i];
	const struct tpu_job_header *hdr = view->hdr;
	bool select = op->opcode == TPU_OP_SELECT;
	/* semaphore ops, prng_seed, loops and prints write no ref */
	bool sem_op = op->opcode == TPU_OP_SEM_SIGNAL ||
		      op->opcode == TPU_OP_SEM_WAIT ||
		      op->opcode == TPU_OP_PRNG_SEED ||
		      op->opcode == TPU_OP_LOOP ||
		      op->opcode == TPU_OP_DEBUG_PRINT ||
		      op->opcode == TPU_OP_DELAY;
	bool fn_ok;

	switch (op->opcode) {
	case TPU_OP_ZERO:
	case TPU_OP_DOT:
	case TPU_OP_SELECT:
	case TPU_OP_IOTA:
	case TPU_OP_TRANSPOSE:
	case TPU_OP_ROLL:
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
	case TPU_OP_GATHER:
		fn_ok = op->fn < TPU_GATHER_COUNT;
		break;
	case TPU_OP_PRNG_SEED:
		fn_ok = op->fn < TPU_PRNG_MAX_SEEDS;
		break;
	case TPU_OP_PRNG_BITS:
		fn_ok = !op->fn;
		break;
	case TPU_OP_LOOP:
		fn_ok = op->fn < TPU_LOOP_COUNT && op->dst.kind == TPU_REF_NONE &&
			op->src0.kind == TPU_REF_NONE &&
			op->src1.kind == TPU_REF_NONE &&
			op->src2.kind == TPU_REF_NONE;
		break;
	case TPU_OP_DEBUG_PRINT:
		fn_ok = op->fn <= TPU_PRINT_MAX_SCALARS &&
			(hdr->flags & TPU_JOB_F_PRINT) &&
			op->dst.kind == TPU_REF_NONE;
		break;
	case TPU_OP_DELAY:
		fn_ok = !op->fn && op->imm && op->imm <= TPU_JOB_MAX_DELAY_NS &&
			op->dst.kind == TPU_REF_NONE &&
			op->src0.kind == TPU_REF_NONE &&
			op->src1.kind == TPU_REF_NONE &&
			op->src2.kind == TPU_REF_NONE;
		break;
	case TPU_OP_COPY_START:
	case TPU_OP_COPY_WAIT:
	case TPU_OP_SEM_SIGNAL:
	case TPU_OP_SEM_WAIT:
	case TPU_OP_SCALAR_STORE:
		fn_ok = !op->fn && !op->bcast && !op->axis && !op->imm &&
			!op->imm2;
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
	if (!ref_valid(hdr, op->dst, sem_op) ||
	    !ref_valid(hdr, op->src0, true) ||
	    !ref_valid(hdr, op->src1, true) ||
	    !ref_valid(hdr, op->src2, true))
		return reject(tdev, "op %u: a ref names nothing", i);
	/* copies and scalar stores may also write scalar prefetch's SMEM */
	if (op->dst.kind == TPU_REF_OPERAND &&
	    view->operands[op->dst.index].role != TPU_ROLE_OUTPUT &&
	    (!memory_op(op) ||
	     view->operands[op->dst.index].role != TPU_ROLE_SCALAR_PREFETCH))
		return reject(tdev, "op %u: writes operand %u, not an output",
			      i, op->dst.index);
	if (!prog_in_code(hdr, &op->pred) ||
	    !prog_in_code(hdr, &op->scalar_index))
		return reject(tdev, "op %u: program outside the code", i);
	return 0;
}

/*
 * TPU_OP_LOOP bodies: at least one op, inside the op array and inside the
 * enclosing body, nested at most TPU_JOB_MAX_LOOP_DEPTH deep.
 */
static int check_loops(struct tpu_device *tdev, const struct job_view *view)
{
	u32 end[TPU_JOB_MAX_LOOP_DEPTH];
	unsigned int depth = 0, i;

	for (i = 0; i < view->hdr->num_ops; i++) {
		const struct tpu_job_op *op = &view->ops[i];
		u64 body_end = (u64)i + 1 + op->imm;

		while (depth && end[depth - 1] <= i)
			depth--;
		if (op->opcode != TPU_OP_LOOP)
			continue;
		if (depth == TPU_JOB_MAX_LOOP_DEPTH)
			return reject(tdev, "op %u: loops nested deeper than %d",
				      i, TPU_JOB_MAX_LOOP_DEPTH);
		if (!op->imm || body_end > view->hdr->num_ops ||
		    (depth && body_end > end[depth - 1]))
			return reject(tdev, "op %u: loop body of %u ops not in its enclosing body",
				      i, op->imm);
		if (op->fn == TPU_LOOP_WHILE ? op->imm2 > TPU_JOB_MAX_TRIPS :
		    op->imm2)
			return reject(tdev, "op %u: loop imm2 %u", i, op->imm2);
		end[depth++] = body_end;
	}
	return 0;
}

/* A buffer the device writes: a slot with room for its header, no operand's. */
static int check_device_slot(struct tpu_device *tdev, const struct job_view *view,
			     const char *field, unsigned int slot, size_t header,
			     const u64 *slot_sizes, unsigned int nslots)
{
	unsigned int i;

	if (slot >= nslots || slot_sizes[slot] < header)
		return reject(tdev, "%s %u: not a buffer of at least %zu bytes",
			      field, slot, header);
	for (i = 0; i < view->hdr->num_operands; i++)
		if (view->operands[i].slot == slot)
			return reject(tdev, "%s %u is operand %u's slot too",
				      field, slot, i);
	return 0;
}

/* TPU_JOB_F_TRACE and TPU_JOB_F_PRINT: their buffers, two different slots. */
static int check_device_slots(struct tpu_device *tdev, const struct job_view *view,
			      const u64 *slot_sizes, unsigned int nslots)
{
	const struct tpu_job_header *hdr = view->hdr;
	bool trace = hdr->flags & TPU_JOB_F_TRACE;
	bool print = hdr->flags & TPU_JOB_F_PRINT;
	int ret = 0;

	if (trace)
		ret = check_device_slot(tdev, view, "trace_slot", hdr->trace_slot,
					sizeof(struct tpu_trace_header),
					slot_sizes, nslots);
	if (!ret && print)
		ret = check_device_slot(tdev, view, "print_slot", hdr->print_slot,
					sizeof(struct tpu_print_header),
					slot_sizes, nslots);
	if (!ret && trace && print && hdr->trace_slot == hdr->print_slot)
		ret = reject(tdev, "print_slot %u is the trace_slot too",
			     hdr->print_slot);
	return ret;
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
	struct job_view view = { .hdr = blob };
	const struct tpu_job_header *hdr = blob;
	u64 vmem = 0;
	unsigned int i;
	int ret;

	ret = check_layout(tdev, hdr, size);
	if (!ret)
		ret = check_grid(tdev, hdr);
	if (ret)
		return ret;
	view.operands = blob + hdr->operands_offset;
	view.scratch = blob + hdr->scratch_offset;
	view.ops = blob + hdr->ops_offset;
	view.insns = blob + hdr->code_offset;
	view.windows = blob + hdr->windows_offset;

	for (i = 0; i < hdr->num_operands; i++) {
		ret = check_operand(tdev, &view, i, slot_sizes, nslots, &vmem);
		if (ret)
			return ret;
	}
	ret = check_device_slots(tdev, &view, slot_sizes, nslots);
	if (ret)
		return ret;
	for (i = 0; i < hdr->num_scratch; i++) {
		ret = check_scratch(tdev, &view.scratch[i], i, &vmem);
		if (ret)
			return ret;
	}
	for (i = 0; i < hdr->num_windows; i++) {
		ret = check_window(tdev, &view, i);
		if (ret)
			return ret;
	}
	for (i = 0; i < hdr->num_ops; i++) {
		ret = check_op(tdev, &view, i);
		if (ret)
			return ret;
	}
	ret = check_loops(tdev, &view);
	if (ret)
		return ret;
	for (i = 0; i < hdr->num_insns; i++)
		if (view.insns[i].op >= TPU_INSN_COUNT ||
		    memchr_inv(view.insns[i].reserved, 0,
			       sizeof(view.insns[i].reserved)))
			return reject(tdev, "instruction %u", i);

	if (hdr->vmem_limit_bytes > tdev->caps[TPU_CAP_VMEM_SIZE])
		return reject(tdev, "vmem_limit_bytes %llu above the %llu of VMEM",
			      hdr->vmem_limit_bytes, tdev->caps[TPU_CAP_VMEM_SIZE]);
	if (vmem > tdev->caps[TPU_CAP_VMEM_SIZE]) {
		tpu_dbg(tdev, "job rejected: needs %llu bytes of VMEM, the device has %llu\n",
			vmem, tdev->caps[TPU_CAP_VMEM_SIZE]);
		return -ENOSPC;
	}
	return 0;
}
