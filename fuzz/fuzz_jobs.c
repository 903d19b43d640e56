// SPDX-License-Identifier: MIT
/* Template jobs for the fuzz targets, built with tests/job_builder. */
#include "fuzz_jobs.h"
#include "job_builder.h"

#include <string.h>

/* The guide's matmul in its variants, on slots 0 (x), 1 (y), 2 (z), 3 (bias). */
static void *mm(struct mm_job j, size_t *len)
{
	j.x_slot = 0, j.y_slot = 1, j.z_slot = 2, j.bias_slot = 3;
	return mm_build(&j, len);
}

static void *mm_f32(size_t *len)
{
	return mm((struct mm_job){ .m = 16, .k = 16, .n = 16, .bm = 8, .bk = 8,
				   .bn = 8 }, len);
}

static void *mm_bf16_fused(size_t *len)
{
	return mm((struct mm_job){ .m = 8, .k = 16, .n = 8, .bm = 8, .bk = 8,
				   .bn = 8, .in_dtype = TPU_DTYPE_BF16,
				   .transpose_rhs = true, .acc_scratch = true,
				   .activation = TPU_UNARY_GELU, .bias = true }, len);
}

static void *mm_int8_lhs_t(size_t *len)
{
	return mm((struct mm_job){ .m = 16, .k = 16, .n = 16, .bm = 8, .bk = 8,
				   .bn = 8, .in_dtype = TPU_DTYPE_INT8,
				   .out_dtype = TPU_DTYPE_INT32,
				   .transpose_lhs = true, .acc_scratch = true }, len);
}

static void *mm_edges_debug(size_t *len)
{
	return mm((struct mm_job){ .m = 10, .k = 12, .n = 9, .bm = 8, .bk = 8,
				   .bn = 8, .activation = TPU_UNARY_RELU,
				   .flags = TPU_JOB_F_DEBUG }, len);
}

static void *mm_uint8_pap(size_t *len)
{
	return mm((struct mm_job){ .m = 16, .k = 8, .n = 16, .bm = 8, .bk = 8,
				   .bn = 8, .in_dtype = TPU_DTYPE_UINT8,
				   .out_dtype = TPU_DTYPE_INT32, .sem = "pap",
				   .acc_scratch = true }, len);
}

/* Every broadcast: row, column, scalar prefetch, SMEM scratch, immediate. */
static void *elementwise(size_t *len)
{
	uint64_t full[2] = { 8, 8 }, rs[2] = { 1, 8 }, cs[2] = { 8, 1 }, ss[1] = { 4 };
	uint32_t grid[2] = { 2, 2 }, blk[2] = { 4, 4 }, rb[2] = { 1, 4 };
	uint32_t cb[2] = { 4, 1 }, smem[1] = { 2 };
	struct jb *b = jb_new();
	struct tpu_job_op *op;
	float half = 0.5f;
	void *blob;

	jb_grid(b, 2, grid, "pp");
	jb_operand(b, TPU_ROLE_SCALAR_PREFETCH, 4, TPU_DTYPE_INT32, 1, ss, NULL, NULL);
	jb_operand(b, TPU_ROLE_INPUT, 0, TPU_DTYPE_F32, 2, full, blk, "pid0 pid1");
	jb_operand(b, TPU_ROLE_INPUT, 1, TPU_DTYPE_F32, 2, rs, rb, "0 pid1");
	jb_operand(b, TPU_ROLE_INPUT, 2, TPU_DTYPE_F32, 2, cs, cb, "pid0 0");
	jb_operand(b, TPU_ROLE_OUTPUT, 3, TPU_DTYPE_F32, 2, full, blk, "pid0 pid1");
	jb_scratch(b, TPU_MEM_VMEM, TPU_DTYPE_F32, 2, blk);
	jb_scratch(b, TPU_MEM_SMEM, TPU_DTYPE_INT32, 1, smem);
	jb_unary(b, TPU_UNARY_TANH, JB_SCR(0), JB_OPND(1), NULL);
	jb_binary(b, TPU_BINARY_ADD, TPU_BCAST_ROW, JB_SCR(0), JB_SCR(0), JB_OPND(2), NULL);
	jb_binary(b, TPU_BINARY_MUL, TPU_BCAST_COL, JB_SCR(0), JB_SCR(0), JB_OPND(3), NULL);
	op = jb_binary(b, TPU_BINARY_MAX, TPU_BCAST_SMEM, JB_OPND(4), JB_SCR(0),
		       JB_OPND(0), NULL);
	op->scalar_index = jb_prog(b, "pid1 smem0 4 %");
	op = jb_binary(b, TPU_BINARY_MIN, TPU_BCAST_SMEM, JB_OPND(4), JB_OPND(4),
		       JB_SCR(1), "pid0 pid1 !=");
	op->scalar_index = jb_prog(b, "1");
	op = jb_binary(b, TPU_BINARY_SUB, TPU_BCAST_IMM, JB_OPND(4), JB_OPND(4),
		       JB_NONE, "pid0 1 ==");
	memcpy(&op->imm, &half, sizeof(half));
	jb_unary(b, TPU_UNARY_EXP, JB_OPND(4), JB_OPND(4), "pid1 nprog1 1 - ==");
	blob = jb_finish(b, len);
	jb_free(b);
	return blob;
}

/* Pallas's block-sparse pattern: a block row chosen by scalar prefetch. */
static void *block_sparse(size_t *len)
{
	uint64_t full[2] = { 16, 16 }, ss[1] = { 2 };
	uint32_t grid[2] = { 2, 2 }, blk[2] = { 8, 8 };
	struct jb *b = jb_new();
	void *blob;

	jb_grid(b, 2, grid, "pa");
	jb_operand(b, TPU_ROLE_SCALAR_PREFETCH, 4, TPU_DTYPE_INT32, 1, ss, NULL, NULL);
	jb_operand(b, TPU_ROLE_INPUT, 0, TPU_DTYPE_F32, 2, full, blk, "pid0 smem0 pid1");
	jb_operand(b, TPU_ROLE_OUTPUT, 1, TPU_DTYPE_F32, 2, full, blk, "pid0 pid1");
	jb_zero(b, JB_OPND(2), "pid0 smem0 0 <");
	jb_unary(b, TPU_UNARY_RELU, JB_OPND(2), JB_OPND(1), "pid0 smem0 0 >=");
	blob = jb_finish(b, len);
	jb_free(b);
	return blob;
}

/* A 4-D grid over rank-4 arrays; a cast to bf16 and back through it. */
static void *rank4(size_t *len)
{
	uint64_t shape[4] = { 2, 2, 4, 8 };
	uint32_t grid[4] = { 2, 1, 1, 2 }, blk[4] = { 1, 2, 4, 4 };
	struct jb *b = jb_new();
	void *blob;

	jb_grid(b, 4, grid, "papa");
	jb_operand(b, TPU_ROLE_INPUT, 0, TPU_DTYPE_F32, 4, shape, blk,
		   "pid0 pid1 pid2 pid3");
	jb_operand(b, TPU_ROLE_OUTPUT, 1, TPU_DTYPE_BF16, 4, shape, blk,
		   "pid0 pid1 pid2 pid3");
	jb_unary(b, TPU_UNARY_NEG, JB_OPND(1), JB_OPND(0), NULL);
	jb_binary(b, TPU_BINARY_ADD, TPU_BCAST_NONE, JB_OPND(1), JB_OPND(1),
		  JB_OPND(0), "pid3 0 ==");
	blob = jb_finish(b, len);
	jb_free(b);
	return blob;
}

/* 1-D with a ragged edge, through an int32 scratch (rounding, saturation). */
static void *rank1_casts(size_t *len)
{
	uint64_t shape[1] = { 20 };
	uint32_t grid[1] = { 3 }, blk[1] = { 8 };
	struct jb *b = jb_new();
	void *blob;

	jb_grid(b, 1, grid, "a");
	jb_operand(b, TPU_ROLE_INPUT, 0, TPU_DTYPE_F32, 1, shape, blk, "pid0");
	jb_operand(b, TPU_ROLE_OUTPUT, 1, TPU_DTYPE_F32, 1, shape, blk, "pid0");
	jb_scratch(b, TPU_MEM_VMEM, TPU_DTYPE_INT32, 1, blk);
	jb_unary(b, TPU_UNARY_SIGMOID, JB_OPND(1), JB_OPND(0), NULL);
	jb_unary(b, TPU_UNARY_IDENTITY, JB_SCR(0), JB_OPND(1), NULL);
	jb_unary(b, TPU_UNARY_SILU, JB_OPND(1), JB_SCR(0), "pid0 2 // 0 ==");
	jb_unary(b, TPU_UNARY_ABS, JB_OPND(1), JB_OPND(1), "pid0 nprog0 max 3 ==");
	blob = jb_finish(b, len);
	jb_free(b);
	return blob;
}

/*
 * uint32 arithmetic: wrapping mul, shifts by counts past the width, div
 * and mod by zero (XLA's), a wrapping row sum, casts to f32 and back.
 */
static void *uint32_ops(size_t *len)
{
	uint64_t shape[2] = { 12, 20 }, rs[2] = { 12, 1 };
	uint32_t grid[1] = { 2 }, blk[2] = { 8, 16 }, rb[2] = { 8, 1 };
	struct jb *b = jb_new();
	struct tpu_job_op *op;
	void *blob;

	jb_grid(b, 1, grid, "a");
	jb_operand(b, TPU_ROLE_INPUT, 0, TPU_DTYPE_UINT32, 2, shape, blk, "pid0 0");
	jb_operand(b, TPU_ROLE_INPUT, 1, TPU_DTYPE_UINT32, 2, shape, blk, "pid0 0");
	jb_operand(b, TPU_ROLE_OUTPUT, 2, TPU_DTYPE_UINT32, 2, shape, blk, "pid0 0");
	jb_operand(b, TPU_ROLE_OUTPUT, 3, TPU_DTYPE_UINT32, 2, rs, rb, "pid0 0");
	jb_scratch(b, TPU_MEM_VMEM, TPU_DTYPE_F32, 2, blk);
	jb_binary(b, TPU_BINARY_MUL, TPU_BCAST_NONE, JB_OPND(2), JB_OPND(0),
		  JB_OPND(1), NULL);
	jb_binary(b, TPU_BINARY_SHR, TPU_BCAST_NONE, JB_OPND(2), JB_OPND(2),
		  JB_OPND(1), NULL);
	jb_binary(b, TPU_BINARY_DIV, TPU_BCAST_NONE, JB_OPND(2), JB_OPND(2),
		  JB_OPND(1), "pid0 1 ==");
	jb_binary(b, TPU_BINARY_MOD, TPU_BCAST_NONE, JB_OPND(2), JB_OPND(0),
		  JB_OPND(2), NULL);
	jb_unary(b, TPU_UNARY_IDENTITY, JB_SCR(0), JB_OPND(2), NULL);
	jb_unary(b, TPU_UNARY_IDENTITY, JB_OPND(2), JB_SCR(0), "pid0 0 ==");
	op = jb_unary(b, TPU_UNARY_IDENTITY, JB_OPND(3), JB_OPND(2), NULL);
	op->opcode = TPU_OP_REDUCE;	/* fn 0: sum, over each row */
	op->axis = 1;
	blob = jb_finish(b, len);
	jb_free(b);
	return blob;
}

/*
 * int32 and int8 arithmetic that wraps (XLA's): a hash's mul, pow, neg,
 * abs and square of INT32_MIN, int8 adds, row sums into int32 and int8,
 * an iota offset near INT32_MAX, INT32_MIN // -1 from a 64-bit scalar.
 */
static void *int_wrap_ops(size_t *len)
{
	uint64_t shape[2] = { 12, 20 }, rs[2] = { 12, 1 };
	uint32_t grid[1] = { 2 }, blk[2] = { 8, 16 }, rb[2] = { 8, 1 };
	float three = 3.0f, hash = -1640531535.0f;
	struct jb *b = jb_new();
	struct tpu_job_op *op;
	void *blob;

	jb_grid(b, 1, grid, "a");
	jb_operand(b, TPU_ROLE_INPUT, 0, TPU_DTYPE_INT32, 2, shape, blk, "pid0 0");
	jb_operand(b, TPU_ROLE_INPUT, 1, TPU_DTYPE_INT8, 2, shape, blk, "pid0 0");
	jb_operand(b, TPU_ROLE_OUTPUT, 2, TPU_DTYPE_INT32, 2, shape, blk, "pid0 0");
	jb_operand(b, TPU_ROLE_OUTPUT, 3, TPU_DTYPE_INT8, 2, rs, rb, "pid0 0");
	jb_scratch(b, TPU_MEM_VMEM, TPU_DTYPE_INT8, 2, blk);
	op = jb_binary(b, TPU_BINARY_MUL, TPU_BCAST_IMM, JB_OPND(2), JB_OPND(0),
		       JB_NONE, NULL);
	memcpy(&op->imm, &hash, 4);
	op = jb_binary(b, TPU_BINARY_POW, TPU_BCAST_IMM, JB_OPND(2), JB_OPND(2),
		       JB_NONE, "pid0 1 ==");
	memcpy(&op->imm, &three, 4);
	jb_unary(b, TPU_UNARY_NEG, JB_OPND(2), JB_OPND(2), NULL);
	jb_unary(b, TPU_UNARY_ABS, JB_OPND(2), JB_OPND(2), "pid0 0 ==");
	jb_unary(b, TPU_UNARY_SQUARE, JB_SCR(0), JB_OPND(2), NULL);
	jb_binary(b, TPU_BINARY_ADD, TPU_BCAST_NONE, JB_SCR(0), JB_SCR(0),
		  JB_OPND(1), NULL);
	op = jb_binary(b, TPU_BINARY_DIV, TPU_BCAST_SCALAR, JB_OPND(2), JB_OPND(2),
		       JB_NONE, "pid0 1 ==");
	op->scalar_index = jb_prog(b, "0 1 -");
	op = jb_unary(b, TPU_UNARY_IDENTITY, JB_OPND(3), JB_SCR(0), NULL);
	op->opcode = TPU_OP_REDUCE;	/* fn 0: sum, over each row */
	op->axis = 1;
	op = jb_unary(b, TPU_UNARY_IDENTITY, JB_OPND(2), JB_NONE, "pid0 0 ==");
	op->opcode = TPU_OP_IOTA;
	op->axis = 1;
	op->scalar_index = jb_prog(b, "2147483647 5 -");
	blob = jb_finish(b, len);
	jb_free(b);
	return blob;
}

/* mm_f32 with its timeline traced into slot 5 (TPU_JOB_F_TRACE). */
static void *mm_traced(size_t *len)
{
	void *blob = mm((struct mm_job){ .m = 16, .k = 16, .n = 24, .bm = 8,
					 .bk = 8, .bn = 8,
					 .flags = TPU_JOB_F_TRACE }, len);

	jb_header(blob)->trace_slot = 5;
	return blob;
}

/*
 * The memory model: pages of an ANY input gathered through windows whose
 * starts a page table gives, double-buffered by hand across steps with two
 * DMA semaphores, in debug mode (its hazard checks run).
 */
static void *paged_sparse_copies(size_t *len)
{
	uint64_t ts[1] = { 4 }, ps[3] = { 4, 4, 16 }, os[2] = { 16, 16 };
	uint32_t grid[1] = { 4 }, ob[2] = { 4, 16 }, bs[3] = { 2, 4, 16 };
	uint32_t page[3] = { 1, 4, 16 }, sems[1] = { 2 };
	struct jb *b = jb_new();
	void *blob;

	jb_grid(b, 1, grid, "a");
	jb_flags(b, TPU_JOB_F_DEBUG);
	jb_operand(b, TPU_ROLE_SCALAR_PREFETCH, 4, TPU_DTYPE_INT32, 1, ts, NULL, NULL);
	jb_operand(b, TPU_ROLE_INPUT, 0, TPU_DTYPE_F32, 3, ps, NULL, NULL);
	jb_space(b, 1, TPU_MEM_ANY);
	jb_operand(b, TPU_ROLE_OUTPUT, 1, TPU_DTYPE_F32, 2, os, ob, "pid0 0");
	jb_scratch(b, TPU_MEM_VMEM, TPU_DTYPE_F32, 3, bs);
	jb_scratch(b, TPU_MEM_SEM_DMA, TPU_DTYPE_INT32, 1, sems);
	jb_window(b, JB_OPND(1), 1, page, 3, "pid0 smem0 0 0");
	jb_window(b, JB_OPND(1), 1, page, 3, "pid0 1 + nprog0 1 - min smem0 0 0");
	jb_window(b, JB_SCR(0), 1, page, 3, "pid0 2 % 0 0");
	jb_window(b, JB_SCR(0), 1, page, 3, "pid0 1 + 2 % 0 0");
	jb_copy(b, TPU_OP_COPY_START, JB_WIN(2), JB_WIN(0), JB_SCR(1), "pid0 2 %",
		"pid0 0 ==");
	jb_copy(b, TPU_OP_COPY_START, JB_WIN(3), JB_WIN(1), JB_SCR(1),
		"pid0 1 + 2 %", "pid0 1 + nprog0 <");
	jb_copy(b, TPU_OP_COPY_WAIT, JB_WIN(2), JB_WIN(0), JB_SCR(1), "pid0 2 %",
		NULL);
	jb_unary(b, TPU_UNARY_RELU, JB_OPND(2), JB_WIN(2), NULL);
	blob = jb_finish(b, len);
	jb_free(b);
	return blob;
}

/*
 * SMEM-space blocks, a scalar store read back through LOAD_SCRATCH,
 * regular semaphores, pl.Buffered(1) and an aliased output.
 */
static void *smem_semaphores(size_t *len)
{
	uint64_t ss[2] = { 4, 8 }, xs[2] = { 16, 16 };
	uint32_t grid[1] = { 4 }, sb[2] = { 1, 8 }, xb[2] = { 4, 16 };
	uint32_t one[1] = { 1 }, sems[1] = { 2 };
	struct jb *b = jb_new();
	void *blob;

	jb_grid(b, 1, grid, "a");
	jb_operand(b, TPU_ROLE_INPUT, 2, TPU_DTYPE_INT32, 2, ss, sb, "pid0 0");
	jb_space(b, 0, TPU_MEM_SMEM);
	jb_operand(b, TPU_ROLE_OUTPUT, 3, TPU_DTYPE_INT32, 2, ss, sb, "pid0 0");
	jb_space(b, 1, TPU_MEM_SMEM);
	jb_operand(b, TPU_ROLE_INPUT, 0, TPU_DTYPE_F32, 2, xs, xb, "pid0 0");
	jb_buffers(b, 2, 1);
	jb_operand(b, TPU_ROLE_OUTPUT, 0, TPU_DTYPE_F32, 2, xs, xb, "pid0 2 // 0");
	jb_alias(b, 3, 2);
	jb_scratch(b, TPU_MEM_SMEM, TPU_DTYPE_INT32, 1, one);
	jb_scratch(b, TPU_MEM_SEM_REGULAR, TPU_DTYPE_INT32, 1, sems);
	jb_scalar_store(b, JB_SCR(0), "0 pid0 smem0", NULL);
	jb_scalar_store(b, JB_OPND(1), "pid0 0 scr0 1 +", NULL);
	jb_sem_op(b, TPU_OP_SEM_SIGNAL, JB_SCR(1), "1 pid0 1 +", NULL);
	jb_unary(b, TPU_UNARY_NEG, JB_OPND(3), JB_OPND(2), "1 scr1 2 >=");
	jb_sem_op(b, TPU_OP_SEM_WAIT, JB_SCR(1), "1 pid0 1 +", NULL);
	blob = jb_finish(b, len);
	jb_free(b);
	return blob;
}

/*
 * Narrow SMEM: an int8 SMEM-space block read by the scalar core, a bf16
 * SMEM output and a bool SMEM scratch stored into, bcast smem of a bf16
 * block into a vector op.
 */
static void *smem_narrow(size_t *len)
{
	uint64_t ss[2] = { 4, 8 }, xs[2] = { 16, 16 };
	uint32_t grid[1] = { 4 }, sb[2] = { 1, 8 }, xb[2] = { 4, 16 };
	uint32_t three[1] = { 3 };
	struct jb *b = jb_new();
	void *blob;

	jb_grid(b, 1, grid, "a");
	jb_operand(b, TPU_ROLE_INPUT, 2, TPU_DTYPE_INT8, 2, ss, sb, "pid0 0");
	jb_space(b, 0, TPU_MEM_SMEM);
	jb_operand(b, TPU_ROLE_OUTPUT, 3, TPU_DTYPE_BF16, 2, ss, sb, "pid0 0");
	jb_space(b, 1, TPU_MEM_SMEM);
	jb_operand(b, TPU_ROLE_INPUT, 0, TPU_DTYPE_F32, 2, xs, xb, "pid0 0");
	jb_operand(b, TPU_ROLE_OUTPUT, 1, TPU_DTYPE_F32, 2, xs, xb, "pid0 0");
	jb_scratch(b, TPU_MEM_SMEM, TPU_DTYPE_BOOL, 1, three);
	jb_scalar_store(b, JB_SCR(0), "pid0 3 % pid0 smem0", NULL);
	jb_scalar_store(b, JB_OPND(1), "pid0 8 % 0 smem0 300 *",
			"0 scr0");
	jb_binary(b, TPU_BINARY_ADD, TPU_BCAST_SMEM, JB_OPND(3), JB_OPND(2),
		  JB_OPND(1), "1 scr0 0 ==")->scalar_index = jb_prog(b, "pid0 1 +");
	blob = jb_finish(b, len);
	jb_free(b);
	return blob;
}

/*
 * Device loops: a for loop whose windows and scalar read its index, a
 * while loop nested in it counting in SMEM scratch (at most 3 trips), a
 * predicated loop over a scalar store.
 */
static void *device_loops(size_t *len)
{
	uint64_t xs[2] = { 32, 16 };
	uint32_t grid[1] = { 2 }, xb[2] = { 16, 16 }, ws[2] = { 4, 16 };
	uint32_t one[1] = { 1 };
	struct tpu_job_op *op;
	struct jb *b = jb_new();
	unsigned int wx, wo;
	void *blob;

	jb_grid(b, 1, grid, "p");
	jb_operand(b, TPU_ROLE_INPUT, 0, TPU_DTYPE_F32, 2, xs, xb, "pid0 0");
	jb_operand(b, TPU_ROLE_OUTPUT, 1, TPU_DTYPE_F32, 2, xs, xb, "pid0 0");
	jb_scratch(b, TPU_MEM_SMEM, TPU_DTYPE_INT32, 1, one);
	wx = jb_window(b, JB_OPND(0), 0, ws, 2, "loop0 4 * 0");
	wo = jb_window(b, JB_OPND(1), 0, ws, 2, "loop0 4 * 0");
	jb_loop(b, TPU_LOOP_FOR, "0 4", 4, NULL);
	op = jb_binary(b, TPU_BINARY_ADD, TPU_BCAST_SCALAR, JB_WIN(wo), JB_WIN(wx),
		       JB_NONE, "loop0 3 <");
	op->scalar_index = jb_prog(b, "loop0 pid0 +");
	jb_scalar_store(b, JB_SCR(0), "0 0", NULL);
	jb_loop(b, TPU_LOOP_WHILE, "0 scr0 loop0 <", 1, NULL)->imm2 = 3;
	jb_scalar_store(b, JB_SCR(0), "0 0 scr0 loop1 + 1 +", NULL);
	jb_loop(b, TPU_LOOP_FOR, "pid0 2", 1, "pid0 0 ==");
	jb_scalar_store(b, JB_SCR(0), "0 loop0", NULL);
	blob = jb_finish(b, len);
	jb_free(b);
	return blob;
}
/*
 * pl.RevisitMode.ANY: a VMEM output (edge blocks, pl.Buffered(1)) revisited
 * along the arbitrary i of a (p, i, j) grid and an SMEM output revisited
 * too, each read back at every new block.
 */
static void *revisit_any(size_t *len)
{
	uint64_t xs[3] = { 2, 24, 200 }, os[3] = { 2, 8, 200 }, ss[1] = { 4 };
	uint32_t grid[3] = { 2, 3, 2 }, xb[3] = { 1, 8, 128 }, sb[1] = { 2 };
	struct jb *b = jb_new();
	void *blob;

	jb_grid(b, 3, grid, "paa");
	jb_operand(b, TPU_ROLE_INPUT, 0, TPU_DTYPE_F32, 3, xs, xb,
		   "pid0 pid1 pid2");
	jb_operand(b, TPU_ROLE_OUTPUT, 1, TPU_DTYPE_F32, 3, os, xb,
		   "pid0 0 pid2");
	jb_buffers(b, 1, 1);
	jb_revisit(b, 1, TPU_REVISIT_ANY);
	jb_operand(b, TPU_ROLE_OUTPUT, 2, TPU_DTYPE_INT32, 1, ss, sb, "pid2");
	jb_space(b, 2, TPU_MEM_SMEM);
	jb_revisit(b, 2, TPU_REVISIT_ANY);
	jb_zero(b, JB_OPND(1), "pid1 0 ==");
	jb_binary(b, TPU_BINARY_ADD, TPU_BCAST_NONE, JB_OPND(1), JB_OPND(1),
		  JB_OPND(0), NULL);
	jb_scalar_store(b, JB_OPND(2), "pid1 pid1 1 +", "pid0 0 ==");
	blob = jb_finish(b, len);
	jb_free(b);
	return blob;
}

static const struct {
	const char *name;
	void *(*build)(size_t *len);
} templates[] = {
	{ "mm_f32", mm_f32 },
	{ "mm_bf16_fused", mm_bf16_fused },
	{ "mm_int8_lhs_t", mm_int8_lhs_t },
	{ "mm_edges_debug", mm_edges_debug },
	{ "mm_uint8_pap", mm_uint8_pap },
	{ "elementwise", elementwise },
	{ "block_sparse", block_sparse },
	{ "rank4", rank4 },
	{ "rank1_casts", rank1_casts },
	{ "mm_traced", mm_traced },
	{ "paged_sparse_copies", paged_sparse_copies },
	{ "smem_semaphores", smem_semaphores },
	{ "uint32_ops", uint32_ops },
	{ "smem_narrow", smem_narrow },
	{ "int_wrap_ops", int_wrap_ops },
	{ "device_loops", device_loops },
	{ "revisit_any", revisit_any },
};

unsigned int fuzz_num_templates(void)
{
	return sizeof(templates) / sizeof(templates[0]);
}

void *fuzz_template(unsigned int i, size_t *len)
{
	return templates[i].build(len);
}

const char *fuzz_template_name(unsigned int i)
{
	return templates[i].name;
}
