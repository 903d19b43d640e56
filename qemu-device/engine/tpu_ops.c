// SPDX-License-Identifier: MIT
/*
 * Micro-ops of the kernel body on 2-D refs: matmuls go to tpu_gemm, the
 * vector unit's ops to a fast path for their data if there is one
 * (tpu_cast.c, tpu_ops_f32.c on tpu_vec), else to the reference path
 * (tpu_ops_ew.c, tpu_ops_reduce.c), which rounds once into dst.
 */
#include <string.h>

#include "tpu_cast.h"
#include "tpu_dtype.h"
#include "tpu_elem.h"
#include "tpu_gemm.h"
#include "tpu_ops_int.h"

double tpu_op_imm(uint32_t bits)
{
	float f;

	memcpy(&f, &bits, sizeof(f));
	return f;
}

static void op_zero(const struct tpu_ref2d *d)
{
	for (int64_t i = 0; i < d->rows; i++)
		memset(tpu_elem_row(d, i), 0, d->cols * tpu_dtype_size(d->dtype));
}

/*
 * Row panels of a large matmul hold about this many flops (a few ms of
 * host time), so a reset stops the op between two of them; but at least
 * DOT_PANEL_MIN_ROWS rows, as each panel repacks the whole right-hand side
 * (a 64-row panel of a 1024 x 2048 block spent ~15 % of its time packing).
 */
#define DOT_PANEL_FLOPS		(1ull << 28)
#define DOT_PANEL_MIN_ROWS	512

static bool aborted(const atomic_bool *abort)
{
	return abort && atomic_load_explicit(abort, memory_order_relaxed);
}

/* Rows [@row, @row + @rows) of c (+)= op(a) @ op(b). */
static void dot_rows(const struct tpu_plan_op *op, const struct tpu_ref2d *a,
		     const struct tpu_ref2d *b, const struct tpu_ref2d *c,
		     int64_t row, int64_t rows)
{
	bool ta = op->dot & TPU_DOT_LHS_CONTRACT_0;
	bool tb = op->dot & TPU_DOT_RHS_CONTRACT_1;
	bool acc = op->dot & TPU_DOT_ACCUMULATE;
	/* Row @row of op(A) is a column of A when A is stored transposed. */
	const uint8_t *ap = (const uint8_t *)a->p +
			    (ta ? row : row * a->ld) * tpu_dtype_size(a->dtype);
	void *cp = tpu_elem_row(c, row);

	switch (a->dtype) {
	case TPU_DTYPE_F32:
		tpu_gemm_f32(ta, tb, rows, op->n, op->k, (const float *)ap, a->ld,
			     b->p, b->ld, cp, c->ld, acc);
		break;
	case TPU_DTYPE_BF16:
		tpu_gemm_bf16(ta, tb, rows, op->n, op->k, (const uint16_t *)ap,
			      a->ld, b->p, b->ld, cp, c->ld, acc);
		break;
	default:
		tpu_gemm_i8(a->dtype == TPU_DTYPE_UINT8,
			    b->dtype == TPU_DTYPE_UINT8, ta, tb, rows, op->n,
			    op->k, ap, a->ld, b->p, b->ld, cp, c->ld, acc);
		break;
	}
}

static void op_dot(const struct tpu_plan_op *op, const struct tpu_ref2d *a,
		   const struct tpu_ref2d *b, const struct tpu_ref2d *c,
		   const atomic_bool *abort)
{
	uint64_t row_flops = 2ull * op->n * op->k;
	int64_t panel = op->m;

	if (row_flops && row_flops * op->m > DOT_PANEL_FLOPS) {
		panel = DOT_PANEL_FLOPS / row_flops;
		panel = panel < DOT_PANEL_MIN_ROWS ? DOT_PANEL_MIN_ROWS :
			panel & ~(int64_t)15;
	}
	for (int64_t row = 0; row < op->m; row += panel) {
		if (row && aborted(abort))
			return;
		dot_rows(op, a, b, c, row,
			 op->m - row < panel ? op->m - row : panel);
	}
}

/* A plain cast or copy (the accumulator stored) without the double rows. */
static bool cast_rows(const struct tpu_ref2d *d, const struct tpu_ref2d *s)
{
	for (int64_t i = 0; i < d->rows; i++)
		if (!tpu_cast_row(tpu_elem_row(d, i), d->dtype,
				  tpu_elem_row(s, i), s->dtype, d->cols))
			return false;	/* no fast path: fails on row 0 */
	return true;
}

int tpu_op_run(const struct tpu_plan_op *op, const struct tpu_op_args *args,
	       struct tpu_op_fault *fault)
{
	switch (op->opcode) {
	case TPU_OP_ZERO:
		op_zero(&args->dst);
		return 0;
	case TPU_OP_DOT:
		op_dot(op, &args->src0, &args->src1, &args->dst, args->abort);
		return 0;
	case TPU_OP_REDUCE:
		tpu_op_reduce(op, args);
		return 0;
	case TPU_OP_TRANSPOSE:
	case TPU_OP_ROLL:
		tpu_op_move(op, args);
		return 0;
	case TPU_OP_GATHER:
		return tpu_op_gather(op, args, fault);
	default:
		if (op->opcode == TPU_OP_UNARY && op->fn == TPU_UNARY_IDENTITY &&
		    cast_rows(&args->dst, &args->src0))
			return 0;
		if (tpu_op_fast(op, args))
			return 0;
		return tpu_op_elementwise(op, args, fault);
	}
}
