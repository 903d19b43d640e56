// SPDX-License-Identifier: MIT
/*
 * tpurt_kernel_dump(): what a kernel became, one op a line, in the
 * statement syntax (doc/libtpurt.md), so a lowering can be read, and
 * tested, against the statements that produced it.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	case TPU_OP_LOOP:	/* its body: the next op->body ops */
		if (op->fn == TPU_LOOP_FOR)
			fprintf(out, "fori_loop(%s): %d ops", op->scalar, op->body);
		else
			fprintf(out, "while_loop(%s): %d ops", op->scalar, op->body);
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
	case TPU_OP_TRANSPOSE:
		fprintf(out, "%s[...] = %s[...].T", op->dst, op->src0);
		break;
	case TPU_OP_ROLL:
		fprintf(out, "%s[...] = roll(%s[...], %s, axis=%u)", op->dst,
			op->src0, op->scalar, op->axis);
		break;
	case TPU_OP_GATHER:
		fprintf(out, "%s[...] = take_along_axis(%s[...], %s[...], axis=%u",
			op->dst, op->src0, op->src1, op->axis);
		if (op->fn == TPU_GATHER_PROMISE)
			fputs(", mode=promise_in_bounds)", out);
		else
			fprintf(out, ", fill_value=%g)", op->imm);
		break;
	case TPU_OP_PRNG_SEED:
		fprintf(out, "prng_seed(%s)", op->scalar);
		break;
	case TPU_OP_DELAY:
		fprintf(out, "delay(%u)", op->delay_ns);
		break;
	case TPU_OP_DEBUG_PRINT:	/* the format's number, its values, refs */
		fprintf(out, "debug_print(format %d; %s; %s %s %s)", op->print,
			op->scalar, op->src0, op->src1, op->src2);
		break;
	case TPU_OP_PRNG_BITS:
		fprintf(out, "%s[...] = prng_random_bits(%s.shape)", op->dst, op->dst);
		break;
	case TPU_OP_COPY_START:
	case TPU_OP_COPY_WAIT:
		fprintf(out, "make_async_copy(%s, %s, %s).%s()", op->src0, op->dst,
			op->src1, op->opcode == TPU_OP_COPY_START ? "start" : "wait");
		break;
	case TPU_OP_SEM_SIGNAL:
	case TPU_OP_SEM_WAIT:
		fprintf(out, "semaphore_%s(%s, %s)",
			op->opcode == TPU_OP_SEM_SIGNAL ? "signal" : "wait", op->src1,
			op->scalar);
		break;
	case TPU_OP_SCALAR_STORE:
		fprintf(out, "%s = %s", op->dst, op->scalar);
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

/* A start and its wait on the hidden semaphore: one sync_copy. */
static int is_sync_copy(const struct tpurt_kernel *k, int i)
{
	const struct tpurt_kernel_op *a = &k->op[i], *b = &k->op[i + 1];

	return i + 1 < k->nops && a->opcode == TPU_OP_COPY_START &&
	       b->opcode == TPU_OP_COPY_WAIT && !strcmp(a->src1, TPURT_SYNC_SEM) &&
	       !strcmp(b->src1, TPURT_SYNC_SEM) && !strcmp(a->src0, b->src0) &&
	       !strcmp(a->dst, b->dst);
}

static const char *space_name(enum tpurt_memory_space space)
{
	static const char *const names[] = {
		[TPURT_VMEM] = "VMEM", [TPURT_SMEM] = "SMEM", [TPURT_ANY] = "ANY",
		[TPURT_SEMAPHORE_DMA] = "SemaphoreType.DMA",
		[TPURT_SEMAPHORE_REGULAR] = "SemaphoreType.REGULAR",
	};

	return (unsigned int)space <= TPURT_SEMAPHORE_REGULAR ? names[space] : "?";
}

/* run_scoped scratch: "scoped buf: VMEM float32[8, 128] in slot 0, ops 2 to 5" */
static void put_scopes(const struct tpurt_kernel *k, FILE *out)
{
	int slot[TPURT_KERNEL_MAX_SCOPES], slot_scope[TPURT_KERNEL_MAX_SCOPES];

	tpurt_kernel_scope_slots(k, slot, slot_scope);
	for (int i = 0; i < k->nscopes; i++) {
		const struct tpurt_kernel_scope *s = &k->scope[i];

		if (!strcmp(s->name, TPURT_SYNC_SEM))
			continue;
		fprintf(out, "scoped %s: %s %s[", s->name, space_name(s->space),
			tpurt_stmt_dtype_name(s->dtype));
		for (int d = 0; d < s->rank; d++)
			fprintf(out, "%s%lld", d ? ", " : "", (long long)s->shape[d]);
		fprintf(out, "] in slot %d, ops %d to %d\n", slot[i], s->first,
			(s->end < 0 ? k->nops : s->end) - 1);
	}
}

/* Temporary @t's slot ("in slot 2"), or its lives' ("in slots 2 (ops 0
 * to 5), 4 (ops 9 to 12)") where they differ. */
static void put_temp_slots(FILE *out, const struct tpurt_temp_life *lives, int nlives, int t)
{
	int slot = -1, one = 1;

	for (int l = 0; l < nlives; l++)
		if (lives[l].temp == t) {
			one &= slot < 0 || lives[l].slot == slot;
			slot = lives[l].slot;
		}
	if (one) {
		fprintf(out, " in slot %d\n", slot);
		return;
	}
	fputs(" in slots", out);
	for (int l = 0, n = 0; l < nlives; l++)
		if (lives[l].temp == t)
			fprintf(out, "%s %d (ops %d to %d)", n++ ? "," : "", lives[l].slot,
				lives[l].first, lives[l].last);
	fputc('\n', out);
}

int tpurt_kernel_dump(const struct tpurt_kernel *k, FILE *out)
{
	int slot_temp[TPURT_KERNEL_MAX_TEMPS], nlives, ret;
	struct tpurt_temp_life *lives;

	if (!k || !out)
		return tpurt_fail(-EINVAL, "kernel dump: no kernel or no file");
	ret = tpurt_kernel_temp_lives(k, &lives, &nlives, slot_temp);
	if (ret < 0)
		return ret;
	for (int i = 0; i < k->ntemps; i++) {
		fprintf(out, "temp %s: %s[%lld, %lld]", k->temp[i].name,
			tpurt_stmt_dtype_name(k->temp[i].dtype),
			(long long)k->temp[i].rows, (long long)k->temp[i].cols);
		put_temp_slots(out, lives, nlives, i);
	}
	free(lives);
	put_scopes(k, out);
	for (int i = 0; i < k->nops; i++) {
		put_pred(out, &k->op[i]);
		if (is_sync_copy(k, i)) {
			fprintf(out, "sync_copy(%s, %s)\n", k->op[i].src0, k->op[i].dst);
			i++;
			continue;
		}
		put_op(out, &k->op[i]);
		fputc('\n', out);
	}
	return ferror(out) ? tpurt_fail(-EIO, "kernel dump: write error") : 0;
}
