// SPDX-License-Identifier: MIT
/*
 * The vector unit's cost per micro-op (tpu_model.h): passes over the data
 * per element on the VPU and the EUP. A pass is one vector op per vreg;
 * the counts are those of a straightforward lowering (gelu's tanh form is
 * a cube, two multiply-adds, a tanh and a multiply; sigmoid an exp, an add
 * and a reciprocal), every op at least one VPU pass for its load/store.
 */
#include "tpu_model.h"

struct passes {
	uint8_t vpu, eup;
};

static struct passes unary_passes(unsigned int fn)
{
	static const struct passes p[TPU_UNARY_COUNT] = {
		[TPU_UNARY_IDENTITY] = { 1, 0 }, [TPU_UNARY_RELU] = { 1, 0 },
		[TPU_UNARY_GELU] = { 6, 1 }, [TPU_UNARY_SILU] = { 3, 2 },
		[TPU_UNARY_SIGMOID] = { 2, 2 }, [TPU_UNARY_TANH] = { 1, 1 },
		[TPU_UNARY_EXP] = { 1, 1 }, [TPU_UNARY_NEG] = { 1, 0 },
		[TPU_UNARY_ABS] = { 1, 0 }, [TPU_UNARY_RECIPROCAL] = { 1, 1 },
		[TPU_UNARY_SQRT] = { 1, 1 }, [TPU_UNARY_RSQRT] = { 1, 1 },
		[TPU_UNARY_LOG] = { 1, 1 }, [TPU_UNARY_LOG1P] = { 2, 1 },
		[TPU_UNARY_EXP2] = { 1, 1 }, [TPU_UNARY_SQUARE] = { 1, 0 },
		[TPU_UNARY_FLOOR] = { 1, 0 }, [TPU_UNARY_CEIL] = { 1, 0 },
		[TPU_UNARY_SIGN] = { 2, 0 }, [TPU_UNARY_NOT] = { 1, 0 },
		[TPU_UNARY_CLAMP] = { 2, 0 }, [TPU_UNARY_ROUND] = { 1, 0 },
		[TPU_UNARY_SIN] = { 4, 1 }, [TPU_UNARY_COS] = { 4, 1 },
		[TPU_UNARY_ERF] = { 4, 1 },
		[TPU_UNARY_POPCNT] = { 2, 0 }, [TPU_UNARY_CLZ] = { 2, 0 },
	};

	return fn < TPU_UNARY_COUNT ? p[fn] : (struct passes){ 1, 0 };
}

static struct passes binary_passes(unsigned int fn)
{
	if (fn == TPU_BINARY_DIV)
		return (struct passes){ 2, 1 };		/* reciprocal, multiply */
	if (fn == TPU_BINARY_POW)
		return (struct passes){ 2, 2 };		/* exp(b log a) */
	if (fn == TPU_BINARY_MOD)
		return (struct passes){ 4, 1 };		/* a - b floor(a / b) */
	return (struct passes){ 1, 0 };
}

static uint64_t vreg_elems(uint64_t rows, uint64_t cols)
{
	uint64_t r = (rows + TPU_MODEL_VREG_ROWS - 1) / TPU_MODEL_VREG_ROWS;
	uint64_t c = (cols + TPU_MODEL_VREG_COLS - 1) / TPU_MODEL_VREG_COLS;

	return r * c * TPU_MODEL_VREG_ROWS * TPU_MODEL_VREG_COLS;
}

void tpu_model_vector_op(const struct tpu_config *cfg, unsigned int opcode,
			 unsigned int fn, uint64_t rows, uint64_t cols,
			 struct tpu_model_work *w)
{
	struct passes p = { 1, 0 };	/* zero, reduce, select, iota */
	double elems = (double)vreg_elems(rows, cols);

	if (opcode == TPU_OP_UNARY)
		p = unary_passes(fn);
	else if (opcode == TPU_OP_BINARY)
		p = binary_passes(fn);
	w->vpu_s += p.vpu * elems / (double)cfg->vpu_elems_per_s;
	w->eup_s += p.eup * elems / (double)cfg->eup_elems_per_s;
}

double tpu_model_compute_s(const struct tpu_model_work *w)
{
	double vec = w->vpu_s + w->eup_s;

	return w->mxu_s > vec ? w->mxu_s : vec;
}
