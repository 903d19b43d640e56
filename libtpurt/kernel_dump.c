// SPDX-License-Identifier: MIT
/*
 * tpurt_kernel_dump(): what a kernel became, one op a line, in the
 * statement syntax (doc/libtpurt.md), so a lowering can be read, and
 * tested, against the statements that produced it.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>

#include "stmt.h"
#include "tpurt_private.h"

static void put_float(FILE *out, float v)
{
	if (isnan(v))
		fputs("nan", out);
	else if (isinf(v))
		fputs(v < 0 ? "-inf" : "inf", out);
	else
		fprintf(out, "%.9g", (double)v);
}

/* A source read as @bcast says: "b[...]", "row(b[...])", "0.5", "s[k]". */
static void put_source(FILE *out, const struct tpurt_kernel_op *op,
		       uint8_t bcast, const char *ref, float imm)
{
	switch (bcast) {
	case TPU_BCAST_ROW:
		fprintf(out, "row(%s[...])", ref);
		break;
	case TPU_BCAST_COL:
		fprintf(out, "col(%s[...])", ref);
		break;
	case TPU_BCAST_SMEM:
		fprintf(out, "%s[%s]", ref, op->scalar);
		break;
	case TPU_BCAST_IMM:
		put_float(out, imm);
		break;
	case TPU_BCAST_SCALAR:
		fprintf(out, "scalar(%s)", op->scalar);
		break;
	default:
		fprintf(out, "%s[...]", ref);
	}
}

static void put_dot(FILE *out, const struct tpurt_kernel_op *op)
{
	fprintf(out, "%s[...] %s dot(%s[...]%s, %s[...]%s)", op->dst,
		op->dot & TPU_DOT_ACCUMULATE ? "+=" : "=", op->src0,
		op->dot & TPU_DOT_LHS_CONTRACT_0 ? ".T" : "", op->src1,
		op->dot & TPU_DOT_RHS_CONTRACT_1 ? ".T" : "");
}

static void put_unary(FILE *out, const struct tpurt_kernel_op *op)
{
	if (op->fn == TPU_UNARY_IDENTITY) {
		fprintf(out, "%s[...] = %s[...]", op->dst, op->src0);
		return;
	}
	fprintf(out, "%s[...] = %s(%s[...]", op->dst,
		tpurt_stmt_unary_name(op->fn), op->src0);
	if (op->fn == TPU_UNARY_CLAMP) {
		fputs(", ", out);
		put_float(out, op->imm);
		fputs(", ", out);
		put_float(out, op->imm2);
	}
	fputs(")", out);
}

static void put_op(FILE *out, const struct tpurt_kernel_op *op)
{
	switch (op->opcode) {
	case TPU_OP_ZERO:
		fprintf(out, "%s[...] = 0", op->dst);
		break;
	case TPU_OP_DOT:
		put_dot(out, op);
		break;
	case TPU_OP_UNARY:
		put_unary(out, op);
		break;
	case TPU_OP_BINARY:
		fprintf(out, "%s[...] = %s(%s[...], ", op->dst,
			tpurt_stmt_binary_name(op->fn), op->src0);
		put_source(out, op, op->bcast, op->src1, op->imm);
		fputs(")", out);
		break;
	case TPU_OP_REDUCE:
		fprintf(out, "%s[...] = %s(%s[...], axis=%u)", op->dst,
			tpurt_stmt_reduce_name(op->fn), op->src0, op->axis);
		break;
	case TPU_OP_SELECT:
		fprintf(out, "%s[...] = where(%s[...], ", op->dst, op->src0);
		put_source(out, op, op->bcast, op->src1, op->imm);
		fputs(", ", out);
		put_source(out, op, op->bcast2, op->src2, op->imm2);
		fputs(")", out);
		break;
	case TPU_OP_IOTA:
		fprintf(out, "%s[...] = iota(%u%s%s)", op->dst, op->axis,
			op->scalar[0] ? ", " : "", op->scalar);
		break;
	default:
		fprintf(out, "opcode %u", op->opcode);
	}
}

static void put_pred(FILE *out, const struct tpurt_kernel_op *op)
{
	if (!op->npred)
		return;
	fputs("when(", out);
	for (int i = 0; i < op->npred; i++)
		fprintf(out, op->npred > 1 ? "%s(%s)" : "%s%s", i ? " and " : "",
			op->pred[i]);
	fputs("): ", out);
}

int tpurt_kernel_dump(const struct tpurt_kernel *k, FILE *out)
{
	int slot[TPURT_KERNEL_MAX_TEMPS], slot_temp[TPURT_KERNEL_MAX_TEMPS];

	if (!k || !out)
		return tpurt_fail(-EINVAL, "kernel dump: no kernel or no file");
	tpurt_kernel_temp_slots(k, slot, slot_temp);
	for (int i = 0; i < k->ntemps; i++)
		fprintf(out, "temp %s: %s[%lld, %lld] in slot %d\n", k->temp[i].name,
			tpurt_stmt_dtype_name(k->temp[i].dtype),
			(long long)k->temp[i].rows, (long long)k->temp[i].cols,
			slot[i]);
	for (int i = 0; i < k->nops; i++) {
		put_pred(out, &k->op[i]);
		put_op(out, &k->op[i]);
		fputc('\n', out);
	}
	return ferror(out) ? tpurt_fail(-EIO, "kernel dump: write error") : 0;
}
