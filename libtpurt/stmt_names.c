// SPDX-License-Identifier: MIT
/*
 * The names kernel statements use: jnp / lax / pl functions (their module
 * prefix dropped by the parser) and dtypes. The dump prints ops with the
 * first name of each function, so what it prints parses again.
 */
#include <string.h>

#include "stmt.h"

struct name_entry {
	const char *name;
	enum stmt_fn_kind kind;
	int fn;
};

static const struct name_entry functions[] = {
	{ "relu", FN_UNARY, TPU_UNARY_RELU },
	{ "gelu", FN_UNARY, TPU_UNARY_GELU },
	{ "silu", FN_UNARY, TPU_UNARY_SILU },
	{ "swish", FN_UNARY, TPU_UNARY_SILU },
	{ "sigmoid", FN_UNARY, TPU_UNARY_SIGMOID },
	{ "logistic", FN_UNARY, TPU_UNARY_SIGMOID },
	{ "tanh", FN_UNARY, TPU_UNARY_TANH },
	{ "exp", FN_UNARY, TPU_UNARY_EXP },
	{ "negative", FN_UNARY, TPU_UNARY_NEG },
	{ "abs", FN_UNARY, TPU_UNARY_ABS },
	{ "absolute", FN_UNARY, TPU_UNARY_ABS },
	{ "reciprocal", FN_UNARY, TPU_UNARY_RECIPROCAL },
	{ "sqrt", FN_UNARY, TPU_UNARY_SQRT },
	{ "rsqrt", FN_UNARY, TPU_UNARY_RSQRT },
	{ "log", FN_UNARY, TPU_UNARY_LOG },
	{ "log1p", FN_UNARY, TPU_UNARY_LOG1P },
	{ "exp2", FN_UNARY, TPU_UNARY_EXP2 },
	{ "square", FN_UNARY, TPU_UNARY_SQUARE },
	{ "floor", FN_UNARY, TPU_UNARY_FLOOR },
	{ "ceil", FN_UNARY, TPU_UNARY_CEIL },
	{ "sign", FN_UNARY, TPU_UNARY_SIGN },
	{ "logical_not", FN_UNARY, TPU_UNARY_NOT },
	{ "round", FN_UNARY, TPU_UNARY_ROUND },
	{ "sin", FN_UNARY, TPU_UNARY_SIN },
	{ "cos", FN_UNARY, TPU_UNARY_COS },
	{ "erf", FN_UNARY, TPU_UNARY_ERF },
	{ "population_count", FN_UNARY, TPU_UNARY_POPCNT },
	{ "clz", FN_UNARY, TPU_UNARY_CLZ },
	{ "clip", FN_CLIP, TPU_UNARY_CLAMP },
	{ "clamp", FN_CLAMP, TPU_UNARY_CLAMP },	/* lax.clamp(lo, x, hi) */
	{ "add", FN_BINARY, TPU_BINARY_ADD },
	{ "subtract", FN_BINARY, TPU_BINARY_SUB },
	{ "multiply", FN_BINARY, TPU_BINARY_MUL },
	{ "maximum", FN_BINARY, TPU_BINARY_MAX },
	{ "minimum", FN_BINARY, TPU_BINARY_MIN },
	{ "divide", FN_BINARY, TPU_BINARY_DIV },
	{ "true_divide", FN_BINARY, TPU_BINARY_DIV },
	{ "power", FN_BINARY, TPU_BINARY_POW },
	{ "pow", FN_BINARY, TPU_BINARY_POW },
	{ "mod", FN_BINARY, TPU_BINARY_MOD },
	{ "remainder", FN_BINARY, TPU_BINARY_MOD },
	{ "equal", FN_BINARY, TPU_BINARY_EQ },
	{ "not_equal", FN_BINARY, TPU_BINARY_NE },
	{ "less", FN_BINARY, TPU_BINARY_LT },
	{ "less_equal", FN_BINARY, TPU_BINARY_LE },
	{ "greater", FN_BINARY, TPU_BINARY_GT },
	{ "greater_equal", FN_BINARY, TPU_BINARY_GE },
	{ "logical_and", FN_BINARY, TPU_BINARY_AND },
	{ "logical_or", FN_BINARY, TPU_BINARY_OR },
	{ "bitwise_and", FN_BINARY, TPU_BINARY_BITAND },
	{ "bitwise_or", FN_BINARY, TPU_BINARY_BITOR },
	{ "bitwise_xor", FN_BINARY, TPU_BINARY_BITXOR },
	{ "left_shift", FN_BINARY, TPU_BINARY_SHL },
	{ "shift_left", FN_BINARY, TPU_BINARY_SHL },
	{ "right_shift", FN_BINARY, TPU_BINARY_SHR },
	{ "shift_right_arithmetic", FN_BINARY, TPU_BINARY_SHR },
	{ "shift_right_logical", FN_BINARY, TPU_BINARY_SHR_LOGICAL },
	{ "sum", FN_REDUCE, TPU_REDUCE_SUM },
	{ "max", FN_REDUCE, TPU_REDUCE_MAX },
	{ "amax", FN_REDUCE, TPU_REDUCE_MAX },
	{ "min", FN_REDUCE, TPU_REDUCE_MIN },
	{ "amin", FN_REDUCE, TPU_REDUCE_MIN },
	{ "mean", FN_MEAN, 0 },		/* sum, then / the count */
	{ "argmax", FN_REDUCE, TPU_REDUCE_ARGMAX },
	{ "argmin", FN_REDUCE, TPU_REDUCE_ARGMIN },
	{ "where", FN_WHERE, 0 },
	{ "select", FN_WHERE, 0 },
	{ "dot", FN_DOT, 0 },
	{ "matmul", FN_DOT, 0 },
	{ "transpose", FN_TRANSPOSE, 0 },
	{ "swapaxes", FN_TRANSPOSE, 1 },
	{ "moveaxis", FN_TRANSPOSE, 2 },
	{ "roll", FN_ROLL, 0 },		/* pltpu.roll is jnp.roll */
	{ "take_along_axis", FN_GATHER, 0 },
	{ "prng_seed", FN_PRNG_SEED, 0 },	/* pltpu's */
	{ "debug_print", FN_DEBUG_PRINT, 0 },	/* pl.debug_print */
	{ "delay", FN_DELAY, 0 },		/* pltpu.delay, pl.delay */
	{ "prng_random_bits", FN_PRNG_BITS, 0 },
	{ "concatenate", FN_CONCATENATE, 0 },
	{ "reshape", FN_RESHAPE, 0 },
	{ "bitcast", FN_BITCAST, 0 },		/* pltpu.bitcast, any widths */
	{ "bitcast_convert_type", FN_BITCAST, 0 },
	{ "iota", FN_IOTA, 0 },
	{ "broadcasted_iota", FN_IOTA, 0 },
	{ "zeros_like", FN_ZEROS_LIKE, 0 },
	{ "ones_like", FN_ONES_LIKE, 0 },
	{ "full_like", FN_FULL_LIKE, 0 },
	{ "zeros", FN_ZEROS, 0 },
	{ "full", FN_FULL, 0 },
	{ "program_id", FN_PROGRAM_ID, 0 },
	{ "num_programs", FN_NUM_PROGRAMS, 0 },
	{ "loop_index", FN_LOOP_INDEX, 0 },
	{ "make_async_copy", FN_ASYNC_COPY, 0 },
	{ "sync_copy", FN_SYNC_COPY, 0 },
	{ "semaphore_signal", FN_SEM_SIGNAL, 0 },
	{ "semaphore_wait", FN_SEM_WAIT, 0 },
	{ "semaphore_read", FN_SEM_READ, 0 },
	{ "ds", FN_DS, 0 },
	{ "run_scoped", FN_RUN_SCOPED, 0 },
};

struct stmt_fn tpurt_stmt_function(const char *name, int len)
{
	for (size_t i = 0; i < sizeof(functions) / sizeof(functions[0]); i++)
		if ((int)strlen(functions[i].name) == len &&
		    !strncmp(functions[i].name, name, (size_t)len))
			return (struct stmt_fn){ functions[i].kind, functions[i].fn };
	return (struct stmt_fn){ FN_NONE, 0 };
}

/* The first entry of @kind and @fn. */
static const char *function_name(enum stmt_fn_kind kind, unsigned int fn)
{
	for (size_t i = 0; i < sizeof(functions) / sizeof(functions[0]); i++)
		if (functions[i].kind == kind && functions[i].fn == (int)fn)
			return functions[i].name;
	return "?";
}

const char *tpurt_stmt_unary_name(unsigned int fn)
{
	return fn == TPU_UNARY_CLAMP ? "clip" : function_name(FN_UNARY, fn);
}

const char *tpurt_stmt_binary_name(unsigned int fn)
{
	return function_name(FN_BINARY, fn);
}

const char *tpurt_stmt_reduce_name(unsigned int fn)
{
	return function_name(FN_REDUCE, fn);
}

static const struct {
	const char *name;
	enum tpurt_dtype dtype;
} dtypes[] = {
	{ "float32", TPURT_F32 }, { "f32", TPURT_F32 },
	{ "bfloat16", TPURT_BF16 }, { "bf16", TPURT_BF16 },
	{ "int8", TPURT_INT8 }, { "uint8", TPURT_UINT8 },
	{ "int32", TPURT_INT32 }, { "bool", TPURT_BOOL },
	{ "bool_", TPURT_BOOL }, { "uint32", TPURT_UINT32 },
};

int tpurt_stmt_dtype(const char *name, int len)
{
	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		if ((int)strlen(dtypes[i].name) == len &&
		    !strncmp(dtypes[i].name, name, (size_t)len))
			return (int)dtypes[i].dtype;
	return -1;
}

/* NumPy's names, which statements accept too. */
const char *tpurt_stmt_dtype_name(enum tpurt_dtype dtype)
{
	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
		if (dtypes[i].dtype == dtype)
			return dtypes[i].name;
	return "?";
}
